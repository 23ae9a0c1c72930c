/*
 * The pipeline's device view: the core device table (core/device.h), plus the mask sigmoid
 * that used to be a slot of the pipeline's own device table (internal, prefix kr_).
 */
#ifndef KEYER_PIPELINE_DEVICE_H
#define KEYER_PIPELINE_DEVICE_H

#include <stddef.h>

#include "core/device.h"
#include "keyer/status.h"

/* dst[i] = 1 / (1 + exp(-src[i])) for @p count floats in device memory of @p ordinal, on
 * @p stream (dst may equal src). Errors: INVALID_ARGUMENT (NULL pointer), DEVICE. */
typedef keyer_status (*kr_pipeline_sigmoid_fn)(int ordinal, float *dst, const float *src,
                                               size_t count, void *stream, keyer_error *err);

/** The CUDA sigmoid (src/pipeline/cuda/sigmoid.cu), or NULL when keyer was built without
 *  CUDA. */
kr_pipeline_sigmoid_fn kr_pipeline_sigmoid_cuda(void);

#endif
