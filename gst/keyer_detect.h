/*
 * The `keyerdetect` element: face detection (BlazeFace, optionally the 468-point face mesh)
 * and body pose (BlazePose) with tracking, per stream, through keyer's analysers
 * (keyer/faces.h, keyer/pose.h) on the CPU. In place: each buffer gets one
 * GstVideoRegionOfInterestMeta per face ("face", id = the tracker's id, 0 until confirmed) and
 * one for the pose ("pose"), each with a parameter structure holding the exact values (see
 * keyer_detect.c); optionally the overlay is drawn on the frame; each frame's detections are
 * posted on the bus as an element message named "keyerdetect".
 */
#ifndef KEYER_GST_KEYER_DETECT_H
#define KEYER_GST_KEYER_DETECT_H

#include <gst/gst.h>

G_BEGIN_DECLS

/** The element's GType ("GstKeyerDetect", factory name "keyerdetect"). */
GType gst_keyer_detect_get_type(void);
#define GST_TYPE_KEYER_DETECT (gst_keyer_detect_get_type())

/** Registers the element with @p plugin. */
gboolean gst_keyer_detect_register(GstPlugin *plugin);

G_END_DECLS
#endif
