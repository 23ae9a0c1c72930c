/* GStreamer's CUDA memory for the keyer element (see cuda_memory.h). */
#define GST_USE_UNSTABLE_API /* gst/cuda is unstable API (GStreamer 1.22) */
#include "cuda_memory.h"

#include <cuda_runtime_api.h>
#include <gst/cuda/gstcudabufferpool.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>
#include <stdio.h>

struct kg_cuda {
    int device;
    GstCudaContext *context;
};

kg_cuda *kg_cuda_create(int device, char *why, size_t why_size)
{
    if (!gst_cuda_load_library()) {
        snprintf(why, why_size, "GStreamer's CUDA library cannot load the CUDA driver");
        return NULL;
    }
    gst_cuda_memory_init_once();
    /* the runtime's primary context of @p device, current on this thread after the first
     * runtime call; the driver hands it out by popping it (and takes it back) */
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaFree(NULL);
    if (e != cudaSuccess) {
        snprintf(why, why_size, "cuda:%d: %s", device, cudaGetErrorString(e));
        return NULL;
    }
    CUcontext ctx = NULL;
    CUdevice dev = 0;
    if (CuCtxPopCurrent(&ctx) != CUDA_SUCCESS || !ctx || CuCtxPushCurrent(ctx) != CUDA_SUCCESS ||
        CuDeviceGet(&dev, device) != CUDA_SUCCESS) {
        snprintf(why, why_size, "cuda:%d: no current CUDA context after the runtime's start",
                 device);
        return NULL;
    }
    GstCudaContext *gctx = gst_cuda_context_new_wrapped(ctx, dev);
    if (!gctx) {
        snprintf(why, why_size, "cuda:%d: GStreamer cannot wrap the CUDA context", device);
        return NULL;
    }
    kg_cuda *c = g_new0(kg_cuda, 1);
    c->device = device;
    c->context = gctx;
    return c;
}

void kg_cuda_destroy(kg_cuda **c)
{
    if (!c || !*c)
        return;
    gst_clear_object(&(*c)->context);
    g_free(*c);
    *c = NULL;
}

int kg_cuda_device(const kg_cuda *c)
{
    return c->device;
}

gboolean kg_cuda_handle_context_query(kg_cuda *c, GstElement *element, GstQuery *query)
{
    return c && gst_cuda_handle_context_query(element, query, c->context);
}

gboolean kg_caps_are_cuda(const GstCaps *caps)
{
    if (!caps || gst_caps_is_empty(caps) || gst_caps_is_any(caps))
        return FALSE;
    GstCapsFeatures *f = gst_caps_get_features(caps, 0);
    return f && gst_caps_features_contains(f, KG_CAPS_FEATURE_CUDA);
}

gboolean kg_cuda_buffer_is_ours(kg_cuda *c, GstBuffer *buf)
{
    guint n = gst_buffer_n_memory(buf);
    if (!c || n == 0)
        return FALSE;
    gpointer ours = gst_cuda_context_get_handle(c->context);
    for (guint i = 0; i < n; i++) {
        GstMemory *m = gst_buffer_peek_memory(buf, i);
        if (!gst_is_cuda_memory(m))
            return FALSE;
        GstCudaMemory *cm = GST_CUDA_MEMORY_CAST(m);
        if (!cm->context || gst_cuda_context_get_handle(cm->context) != ours)
            return FALSE;
    }
    return TRUE;
}

gboolean kg_cuda_frame_map(GstVideoFrame *vf, const GstVideoInfo *info, GstBuffer *buf,
                           GstMapFlags flags)
{
    return gst_video_frame_map(vf, (GstVideoInfo *)info, buf, flags | GST_MAP_CUDA);
}

GstBufferPool *kg_cuda_pool_new(kg_cuda *c, GstCaps *caps, guint size, guint min)
{
    GstBufferPool *pool = gst_cuda_buffer_pool_new(c->context);
    if (!pool)
        return NULL;
    GstStructure *config = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_set_params(config, caps, size, min, 0);
    gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
    if (!gst_buffer_pool_set_config(pool, config)) {
        /* the pool adjusted the parameters (its pitch): take them as they are now */
        config = gst_buffer_pool_get_config(pool);
        if (!gst_buffer_pool_set_config(pool, config)) {
            gst_object_unref(pool);
            return NULL;
        }
    }
    return pool;
}

gboolean kg_cuda_propose_allocation(kg_cuda *c, GstCaps *caps, gboolean need_pool,
                                    GstQuery *query)
{
    GstVideoInfo info;
    if (!gst_video_info_from_caps(&info, caps))
        return FALSE;
    if (need_pool) {
        GstBufferPool *pool = kg_cuda_pool_new(c, caps, (guint)GST_VIDEO_INFO_SIZE(&info), 2);
        if (!pool)
            return FALSE;
        GstStructure *config = gst_buffer_pool_get_config(pool);
        guint size = 0;
        gst_buffer_pool_config_get_params(config, NULL, &size, NULL, NULL);
        gst_structure_free(config);
        gst_query_add_allocation_pool(query, pool, size, 2, 0);
        gst_object_unref(pool);
    }
    gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, NULL);
    return TRUE;
}

kg_cuda *kg_cuda_open(GstElement *element, GstDebugCategory *cat, gboolean cpu, int ordinal)
{
    if (cpu)
        return NULL;
    char why[256] = "";
    kg_cuda *c = kg_cuda_create(ordinal, why, sizeof(why));
    if (!c)
        GST_CAT_INFO_OBJECT(cat, element, "no CUDA memory: %s", why);
    return c;
}

gboolean kg_cuda_propose_or_parent(kg_cuda *c, GstBaseTransformClass *parent,
                                   GstBaseTransform *trans, GstQuery *decide_query,
                                   GstQuery *query)
{
    GstCaps *caps = NULL;
    gboolean need_pool = FALSE;
    gst_query_parse_allocation(query, &caps, &need_pool);
    if (!caps || !kg_caps_are_cuda(caps) || !c)
        return parent->propose_allocation(trans, decide_query, query);
    return kg_cuda_propose_allocation(c, caps, need_pool, query);
}
