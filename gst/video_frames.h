/*
 * Between GStreamer's mapped video frames and keyer frames (keyer/frame.h): the formats the
 * elements take, views of mapped planes as keyer frames (no copy, no buffers: the frame is
 * valid while the GstVideoFrame stays mapped), the BGRx <-> RGBA channel swaps for the one
 * format keyer has no layout of, and the copy of a keyer frame into an output buffer.
 */
#ifndef KEYER_GST_VIDEO_FRAMES_H
#define KEYER_GST_VIDEO_FRAMES_H

#include <gst/video/video.h>

#include "keyer/frame.h"

G_BEGIN_DECLS

/** The system-memory formats both elements take, as a caps format list. */
#define KG_VIDEO_FORMATS "{ NV12, I420, RGBA, BGRx, RGB }"

/**
 * The keyer format that holds @p format's pixels: NV12, I420 (YUV420P), RGBA, RGB (RGB24),
 * GRAY8; BGRx gives RGBA with *@p swap set (its channels must be swapped: kg_swap_rb()).
 * Returns KEYER_PIXEL_FORMAT_NONE for another format.
 */
keyer_pixel_format kg_keyer_format(GstVideoFormat format, gboolean *swap);

/**
 * Fills @p out with a view of the mapped frame @p vf: format (kg_keyer_format(); a BGRx
 * frame is described as RGBA), size, planes and strides, colour matrix and range from the
 * caps' colorimetry, memory HOST, no buffers, pts unknown. Returns FALSE for a format
 * kg_keyer_format() does not know.
 */
gboolean kg_frame_view(const GstVideoFrame *vf, keyer_frame *out);

/**
 * Copies the 4-byte pixels of @p src to @p dst (same size) swapping bytes 0 and 2 (BGRx <->
 * RGBA) and setting byte 3 to 255. Either may be the mapped frame's view.
 */
void kg_swap_rb(const keyer_frame *src, keyer_frame *dst);

#ifdef KEYER_GST_HAVE_CUDA
/**
 * Copies the planes of @p src (host or CUDA memory of device @p device) into the planes
 * @p dst / @p dst_stride (host memory, or device memory of the same device when
 * @p dst_on_device), with the CUDA runtime, and waits for the copy. @p src's format and size
 * say how many planes and bytes. FALSE with the reason in @p why on a CUDA error.
 * Exists when keyer is built with CUDA (KEYER_GST_HAVE_CUDA; gst/cuda_copy.c).
 */
gboolean kg_cuda_copy_planes(const keyer_frame *src, uint8_t *const dst[4],
                             const gint dst_stride[4], gboolean dst_on_device, int device,
                             char *why, size_t why_size);

/**
 * Waits for the work queued on the legacy default CUDA stream of device @p device (what
 * keyer_overlay_render() queues on CUDA frames by default). FALSE with the reason in @p why
 * on a CUDA error.
 */
gboolean kg_cuda_sync(int device, char *why, size_t why_size);

#endif

/**
 * Copies the planes of @p src into the mapped frame @p dst (same size; @p src's format must be
 * the one kg_keyer_format() gives for @p dst, swapping channels for BGRx). @p src may be in
 * CUDA memory (a session computing on the GPU hands out its frames there; keyer built with
 * CUDA): it is then copied with the CUDA runtime, through @p host (a frame of the element,
 * allocated here in host memory when needed) for BGRx. @p dst_on_device: @p dst was mapped
 * with CUDA device pointers (kg_cuda_frame_map()). Returns FALSE, with the reason in @p why,
 * when the formats or sizes do not match or a copy fails.
 */
gboolean kg_frame_copy_out(const keyer_frame *src, GstVideoFrame *dst, gboolean dst_on_device,
                           keyer_frame *host, char *why, size_t why_size);

G_END_DECLS
#endif
