/* The keyer GStreamer plugin: the `keyer` and `keyerdetect` elements. */
#include <gst/gst.h>

#include "keyer_detect.h"
#include "keyer_filter.h"

static gboolean plugin_init(GstPlugin *plugin)
{
    return gst_keyer_register(plugin) && gst_keyer_detect_register(plugin);
}

#define PACKAGE "keyer" /* GST_PLUGIN_DEFINE's package name */
#ifndef KEYER_GST_VERSION
#define KEYER_GST_VERSION "0"
#endif

/* "unknown": keyer's tree states no licence. */
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, keyer,
                  "keyer: person segmentation, face and pose analytics", plugin_init,
                  KEYER_GST_VERSION, "unknown", "keyer", "keyer")
