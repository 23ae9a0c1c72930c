/*
 * GStreamer's CUDA memory (video/x-raw(memory:CUDAMemory), libgstcuda of gst-plugins-bad,
 * made by nvh264dec, cudaupload, ...) for the keyer element, without host copies. Built only
 * when keyer has CUDA and gst/cuda's headers and libgstcuda are found (gst/CMakeLists.txt,
 * KEYER_GST_CUDA).
 *
 * Contexts: keyer computes on the primary context of its CUDA device (the CUDA runtime's).
 * Device memory of another context cannot be read by keyer's kernels, so the element wraps
 * that primary context in a GstCudaContext (kg_cuda_create()) and gives it to its neighbours
 * through GStreamer's context sharing (kg_cuda_handle_context_query(): decoders, uploaders
 * and encoders that ask get it, so their buffers are in keyer's context). Buffers of another
 * context (an element that made its own) are still accepted: they are read through host
 * memory (kg_cuda_buffer_is_ours() says which).
 */
#ifndef KEYER_GST_CUDA_MEMORY_H
#define KEYER_GST_CUDA_MEMORY_H

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include "keyer/frame.h"

G_BEGIN_DECLS

/** The caps feature of CUDA memory ("memory:CUDAMemory"). */
#define KG_CAPS_FEATURE_CUDA "memory:CUDAMemory"
/** The formats the element takes and gives in CUDA memory. */
#define KG_CUDA_FORMATS "{ NV12, I420, RGBA }"

/** A wrapped primary context. Opaque. */
typedef struct kg_cuda kg_cuda;

/**
 * Loads libgstcuda's CUDA driver functions and wraps the primary context of CUDA device
 * @p device (made current on the calling thread through the CUDA runtime, as keyer's stages
 * do) in a GstCudaContext. Returns NULL, with the reason in @p why, when there is no CUDA
 * driver, no such device or the runtime fails there. Free with kg_cuda_destroy().
 */
kg_cuda *kg_cuda_create(int device, char *why, size_t why_size);

/** Frees @p c (the primary context stays: the runtime owns it). NULL accepted; sets NULL. */
void kg_cuda_destroy(kg_cuda **c);

/** The CUDA device ordinal of @p c. */
int kg_cuda_device(const kg_cuda *c);

/**
 * Answers a context query for GStreamer's CUDA context with @p c's context (TRUE when
 * answered). @p c may be NULL (FALSE).
 */
gboolean kg_cuda_handle_context_query(kg_cuda *c, GstElement *element, GstQuery *query);

/** Whether @p caps' first structure has the CUDA memory feature. */
gboolean kg_caps_are_cuda(const GstCaps *caps);

/**
 * Whether every memory of @p buf is CUDA memory of @p c's context (then it can be mapped
 * with kg_cuda_frame_map() and read by keyer on the device).
 */
gboolean kg_cuda_buffer_is_ours(kg_cuda *c, GstBuffer *buf);

/**
 * Maps @p buf (CUDA memory) as a video frame of @p info with device pointers (GST_MAP_CUDA
 * added to @p flags); unmap with gst_video_frame_unmap(). FALSE when it cannot be mapped.
 */
gboolean kg_cuda_frame_map(GstVideoFrame *vf, const GstVideoInfo *info, GstBuffer *buf,
                           GstMapFlags flags);

/**
 * A CUDA buffer pool of @p c's context configured for @p caps (buffers of @p size bytes, at
 * least @p min of them); NULL when it cannot be configured. The caller owns the pool.
 */
GstBufferPool *kg_cuda_pool_new(kg_cuda *c, GstCaps *caps, guint size, guint min);

/**
 * Answers an allocation query of upstream for CUDA memory @p caps (the element's input): with
 * @p need_pool, a CUDA pool of @p c's context (kg_cuda_pool_new(), at least 2 buffers), and
 * the video meta. FALSE when the caps are not video caps or the pool cannot be made.
 */
gboolean kg_cuda_propose_allocation(kg_cuda *c, GstCaps *caps, gboolean need_pool,
                                    GstQuery *query);

/**
 * For an element's change to READY: keyer's context on CUDA device @p ordinal
 * (kg_cuda_create()) unless @p cpu (the element computes on the CPU). NULL without one, the
 * reason logged at INFO for @p element in @p cat. Free with kg_cuda_destroy().
 */
kg_cuda *kg_cuda_open(GstElement *element, GstDebugCategory *cat, gboolean cpu, int ordinal);

/**
 * An element's propose_allocation: CUDA memory caps with @p c (not NULL) get
 * kg_cuda_propose_allocation(), anything else @p parent's propose_allocation (the element's
 * parent class).
 */
gboolean kg_cuda_propose_or_parent(kg_cuda *c, GstBaseTransformClass *parent,
                                   GstBaseTransform *trans, GstQuery *decide_query,
                                   GstQuery *query);

G_END_DECLS
#endif
