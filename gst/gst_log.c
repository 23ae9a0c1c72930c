/* keyer's log levels against GStreamer's (see gst_log.h). */
#include "gst_log.h"

GstDebugLevel kg_gst_level(keyer_log_level level)
{
    return level <= KEYER_LOG_ERROR     ? GST_LEVEL_ERROR
           : level == KEYER_LOG_WARNING ? GST_LEVEL_WARNING
           : level == KEYER_LOG_INFO    ? GST_LEVEL_INFO
                                        : GST_LEVEL_DEBUG;
}

keyer_log_level kg_keyer_level(GstDebugCategory *cat)
{
    GstDebugLevel threshold = gst_debug_category_get_threshold(cat);
    return threshold >= GST_LEVEL_DEBUG     ? KEYER_LOG_DEBUG
           : threshold >= GST_LEVEL_INFO    ? KEYER_LOG_INFO
           : threshold >= GST_LEVEL_WARNING ? KEYER_LOG_WARNING
                                            : KEYER_LOG_ERROR;
}
