/**
 * @file keyer/keyer.h
 * @brief Umbrella header: includes every public keyer header.
 *
 * keyer is a C library for AI video effects (background keying, detection,
 * overlays) on NVIDIA GPUs with a complete CPU path. Conventions shared by
 * every header:
 *  - names are keyer_<object>_<verb>; objects come in create/destroy pairs;
 *    destroy takes a pointer to the handle, accepts NULL and sets it to NULL;
 *  - calls that can fail return ::keyer_status and take an optional
 *    ::keyer_error as their last parameter (see keyer/status.h);
 *  - parameters come in structs with a *_defaults() initialiser.
 */
#ifndef KEYER_KEYER_H
#define KEYER_KEYER_H

#include "keyer/alloc.h"
#include "keyer/config.h"
#include "keyer/detect.h"
#include "keyer/effects.h"
#include "keyer/faces.h"
#include "keyer/frame.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keying.h"
#include "keyer/log.h"
#include "keyer/nn.h"
#include "keyer/options.h"
#include "keyer/overlay.h"
#include "keyer/pipeline.h"
#include "keyer/people.h"
#include "keyer/pose.h"
#include "keyer/registry.h"
#include "keyer/status.h"
#include "keyer/track.h"
#include "keyer/version.h"

#endif /* KEYER_KEYER_H */
