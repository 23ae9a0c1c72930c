/*
 * The `keyer` element: a video filter doing what keyer's main job does to one stream
 * (background blurred, replaced by a colour or a picture, green screen, RGBA with alpha, the
 * matte), through a keyer session (keyer/pipeline.h) fed with keyer_session_send_frame() and
 * read with keyer_session_receive_frame(). Its properties are generated from the session's,
 * refinement's and compositing's option tables (option_props.h), plus model and background.
 *
 * Streaming: each input buffer is copied into the session (send); processed frames are copied
 * into buffers of the negotiated pool, with the input's timestamps, flags and metas, and
 * pushed in input order. In latency mode each input is pushed before the next is taken; in
 * throughput mode frames leave when the session has them and the rest at EOS or a caps
 * change (drain). A flush discards the frames in flight. Latency queries add the measured
 * time from input to output (see keyer_filter.c); QoS events drop late input frames.
 */
#ifndef KEYER_GST_KEYER_FILTER_H
#define KEYER_GST_KEYER_FILTER_H

#include <gst/gst.h>

G_BEGIN_DECLS

/** The element's GType ("GstKeyer", factory name "keyer"). */
GType gst_keyer_get_type(void);
#define GST_TYPE_KEYER (gst_keyer_get_type())

/** Registers the element with @p plugin. */
gboolean gst_keyer_register(GstPlugin *plugin);

G_END_DECLS
#endif
