/*
 * keyer's log levels against GStreamer's debug levels, for the elements' loggers (keyer_logger
 * into a debug category): one mapping for every element.
 */
#ifndef KEYER_GST_LOG_H
#define KEYER_GST_LOG_H

#include <gst/gst.h>

#include "keyer/log.h"

G_BEGIN_DECLS

/** GStreamer's level of a keyer message: errors (and below) ERROR, warnings WARNING, info
 *  INFO, the rest DEBUG. */
GstDebugLevel kg_gst_level(keyer_log_level level);

/** The keyer log level that lets through what @p cat's threshold shows: DEBUG from
 *  GST_LEVEL_DEBUG up, INFO, WARNING, else ERROR. */
keyer_log_level kg_keyer_level(GstDebugCategory *cat);

G_END_DECLS
#endif
