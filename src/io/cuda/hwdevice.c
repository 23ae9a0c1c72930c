/* CUDA side of io (CUDA builds only), the kr_io_cuda_fns table: a libav CUDA device context on
 * the device's primary context (retained here, whatever flags keyer's CUDA code created it
 * with), the copy of decoded frames out of NVDEC's few mapped surfaces into a pool of device
 * buffers, and plane copies (transfer.c).
 *
 * The five driver-API calls needed for the primary context are looked up in libcuda.so.1 with
 * dlopen when a hardware decoder is opened, so keyer's binaries do not need the driver library
 * on machines without a GPU (CI, users' CPU-only machines). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include <libavutil/hwcontext.h>
#include <libavutil/hwcontext_cuda.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "io/cuda/transfer.h"
#include "io/io_internal.h"

/* The driver entry points used here, resolved from libcuda.so.1 at run time. */
typedef struct driver_api {
    void *lib;
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_release)(CUdevice);
    CUresult (*error_string)(CUresult, const char **);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_destroy)(CUstream);
    CUdevice device; /* the device whose primary context is retained */
    CUcontext ctx;
    CUstream stream; /* the decoder's own stream, or NULL (the legacy default stream) */
} driver_api;

static void *sym(void *lib, const char *a, const char *b)
{
    void *f = dlsym(lib, a);
    return f ? f : (b ? dlsym(lib, b) : NULL);
}

static keyer_status driver_open(driver_api *d, int ordinal, keyer_error *err)
{
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "CUDA device %d: the CUDA driver (libcuda.so.1) is not installed",
                               ordinal);
    *(void **)&d->init = sym(d->lib, "cuInit", NULL);
    *(void **)&d->device_get = sym(d->lib, "cuDeviceGet", NULL);
    *(void **)&d->ctx_retain = sym(d->lib, "cuDevicePrimaryCtxRetain", NULL);
    *(void **)&d->ctx_release = sym(d->lib, "cuDevicePrimaryCtxRelease_v2",
                                    "cuDevicePrimaryCtxRelease");
    *(void **)&d->error_string = sym(d->lib, "cuGetErrorString", NULL);
    *(void **)&d->ctx_push = sym(d->lib, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
    *(void **)&d->ctx_pop = sym(d->lib, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
    *(void **)&d->stream_create = sym(d->lib, "cuStreamCreate", NULL);
    *(void **)&d->stream_destroy = sym(d->lib, "cuStreamDestroy_v2", "cuStreamDestroy");
    if (!d->init || !d->device_get || !d->ctx_retain || !d->ctx_release || !d->error_string ||
        !d->ctx_push || !d->ctx_pop || !d->stream_create || !d->stream_destroy) {
        dlclose(d->lib);
        d->lib = NULL;
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "CUDA device %d: libcuda.so.1 lacks a primary-context entry point",
                               ordinal);
    }
    return KEYER_OK;
}

static keyer_status cu_fail(const driver_api *d, keyer_error *err, const char *what, CUresult r,
                            int ordinal)
{
    const char *name = NULL;
    d->error_string(r, &name);
    return keyer_error_set(err, KEYER_STATUS_DEVICE, "CUDA device %d: %s failed: %s", ordinal,
                           what, name ? name : "unknown error");
}

/* A non-blocking stream in the primary context @p d->ctx (made current for the call). */
static CUresult own_stream(driver_api *d)
{
    CUresult r = d->ctx_push(d->ctx);
    if (r != CUDA_SUCCESS)
        return r;
    r = d->stream_create(&d->stream, CU_STREAM_NON_BLOCKING);
    CUcontext popped = NULL;
    d->ctx_pop(&popped);
    if (r != CUDA_SUCCESS)
        d->stream = NULL;
    return r;
}

static void release_primary(AVHWDeviceContext *ctx)
{
    driver_api *d = ctx->user_opaque;
    if (d->stream && d->ctx_push(d->ctx) == CUDA_SUCCESS) {
        d->stream_destroy(d->stream); /* waits for nothing: every frame was copied out */
        CUcontext popped = NULL;
        d->ctx_pop(&popped);
    }
    d->ctx_release(d->device);
    dlclose(d->lib);
    free(d);
}

static keyer_status hwdevice_create(int ordinal, int own, AVBufferRef **out, keyer_error *err)
{
    *out = NULL;
    driver_api *d = calloc(1, sizeof(*d));
    if (!d)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "CUDA device %d: out of memory",
                               ordinal);
    keyer_status st = driver_open(d, ordinal, err);
    if (st) {
        free(d);
        return st;
    }
    CUresult r = d->init(0);
    if (r == CUDA_SUCCESS)
        r = d->device_get(&d->device, ordinal);
    CUcontext ctx = NULL;
    if (r == CUDA_SUCCESS)
        r = d->ctx_retain(&ctx, d->device);
    if (r != CUDA_SUCCESS) {
        st = cu_fail(d, err, "opening the primary context", r, ordinal);
        dlclose(d->lib);
        free(d);
        return st;
    }
    d->ctx = ctx;
    if (own && (r = own_stream(d)) != CUDA_SUCCESS) {
        st = cu_fail(d, err, "creating the decoder's stream", r, ordinal);
        d->ctx_release(d->device);
        dlclose(d->lib);
        free(d);
        return st;
    }
    AVBufferRef *ref = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA);
    if (!ref) {
        if (d->stream && d->ctx_push(d->ctx) == CUDA_SUCCESS) {
            d->stream_destroy(d->stream);
            CUcontext popped = NULL;
            d->ctx_pop(&popped);
        }
        d->ctx_release(d->device);
        dlclose(d->lib);
        free(d);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "CUDA device %d: out of memory",
                               ordinal);
    }
    AVHWDeviceContext *hw = (AVHWDeviceContext *)ref->data;
    AVCUDADeviceContext *cu = hw->hwctx;
    cu->cuda_ctx = ctx; /* libav uses it and does not destroy it */
    cu->stream = d->stream; /* NVDEC maps and copies its frames there (NULL: legacy stream) */
    hw->user_opaque = d;
    hw->free = release_primary; /* runs when the last reference goes, also if init fails */
    int ret = av_hwdevice_ctx_init(ref);
    if (ret < 0) {
        av_buffer_unref(&ref);
        return kr_av_error(err, ret, "CUDA device %d: libav CUDA device context", ordinal);
    }
    *out = ref;
    return KEYER_OK;
}

static keyer_status detach_frame(AVBufferRef **pool, AVFrame *pic, AVFrame *tmp,
                                 keyer_error *err)
{
    const AVHWFramesContext *src = (const AVHWFramesContext *)pic->hw_frames_ctx->data;
    AVHWFramesContext *fc = *pool ? (AVHWFramesContext *)(*pool)->data : NULL;
    if (!fc || fc->sw_format != src->sw_format || fc->width != pic->width ||
        fc->height != pic->height || fc->device_ref->data != src->device_ref->data) {
        av_buffer_unref(pool);
        *pool = av_hwframe_ctx_alloc(src->device_ref);
        if (!*pool)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "NVDEC frame pool: out of memory");
        fc = (AVHWFramesContext *)(*pool)->data;
        fc->format = AV_PIX_FMT_CUDA;
        fc->sw_format = src->sw_format;
        fc->width = pic->width;
        fc->height = pic->height;
        int ret = av_hwframe_ctx_init(*pool);
        if (ret < 0) {
            av_buffer_unref(pool);
            return kr_av_error(err, ret, "NVDEC frame pool %dx%d", pic->width, pic->height);
        }
    }
    av_frame_unref(tmp);
    int ret = av_hwframe_get_buffer(*pool, tmp, 0);
    if (ret < 0)
        return kr_av_error(err, ret, "NVDEC frame pool: no buffer");
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fc->sw_format);
    int planes = av_pix_fmt_count_planes(fc->sw_format);
    /* the decoder's own stream, where NVDEC's copy into this frame was queued (NULL: the
     * legacy default stream, shared by every decoder of the device) */
    const AVCUDADeviceContext *cu = src->device_ctx->hwctx;
    void *stream = cu->stream;
    for (int p = 0; p < planes && p < 4; p++) {
        int rows = p == 0 || p == 3 ? pic->height : AV_CEIL_RSHIFT(pic->height, d->log2_chroma_h);
        int bytes = av_image_get_linesize(fc->sw_format, pic->width, p);
        if (bytes <= 0 || bytes > pic->linesize[p] || bytes > tmp->linesize[p])
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "NVDEC frame plane %d: %d bytes per row, pitches %d and %d", p,
                                   bytes, pic->linesize[p], tmp->linesize[p]);
        keyer_status st =
            stream ? kr_io_cuda_copy_2d_async(tmp->data[p], (size_t)tmp->linesize[p], pic->data[p],
                                              (size_t)pic->linesize[p], (size_t)bytes,
                                              (size_t)rows, stream, err)
                   : kr_io_cuda_copy_2d(tmp->data[p], (size_t)tmp->linesize[p], pic->data[p],
                                        (size_t)pic->linesize[p], (size_t)bytes, (size_t)rows,
                                        err);
        if (st)
            return keyer_error_prefix(err, "copying an NVDEC frame: ");
    }
    if (stream) {
        keyer_status st = kr_io_cuda_stream_sync(stream, err);
        if (st)
            return keyer_error_prefix(err, "copying an NVDEC frame: ");
    }
    ret = av_frame_copy_props(tmp, pic);
    if (ret < 0)
        return kr_av_error(err, ret, "NVDEC frame properties");
    tmp->width = pic->width;
    tmp->height = pic->height;
    av_frame_unref(pic); /* the decoder's surface is free again */
    av_frame_move_ref(pic, tmp);
    return KEYER_OK;
}

const kr_io_cuda_fns kr_io_cuda_table = {
    .hwdevice_create = hwdevice_create,
    .detach_frame = detach_frame,
    .copy_2d = kr_io_cuda_copy_2d,
};
