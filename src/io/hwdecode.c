/* NVDEC through libavcodec's CUDA hwaccel. Only libav APIs are used here; the CUDA side (the
 * device context on the primary context, copies out of NVDEC surfaces: the kr_io_cuda_fns
 * table of cuda/hwdevice.c, which includes libavutil/hwcontext_cuda.h and so <cuda.h>) exists
 * in CUDA builds only, which are also the only builds that decode into device memory.
 * kr_io_cuda() here is the one place in io that knows whether keyer was built with CUDA. */
#include <stdio.h>
#include <string.h>

#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/log.h"

const kr_io_cuda_fns *kr_io_cuda(void)
{
#ifdef KEYER_HAVE_CUDA
    return &kr_io_cuda_table;
#else
    return NULL;
#endif
}

int kr_hwdec_built(void) { return kr_io_cuda() != NULL; }

keyer_status kr_hwdec_device_create(int ordinal, int own_stream, AVBufferRef **out,
                                    keyer_error *err)
{
    *out = NULL;
    const kr_io_cuda_fns *cuda = kr_io_cuda();
    if (!cuda)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keyer was built without CUDA: NVDEC is not available");
    /* Not av_hwdevice_ctx_create(..., AV_CUDA_USE_PRIMARY_CONTEXT): libav refuses a primary
     * context that is already active with other flags than its own, which is the case once
     * keyer's CUDA code (the runtime API) has run. */
    return cuda->hwdevice_create(ordinal, own_stream, out, err);
}

int kr_hwdec_codec_supported(const AVCodec *codec)
{
    for (int i = 0;; i++) {
        const AVCodecHWConfig *c = avcodec_get_hw_config(codec, i);
        if (!c)
            return 0;
        if (c->device_type == AV_HWDEVICE_TYPE_CUDA && c->pix_fmt == AV_PIX_FMT_CUDA &&
            (c->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX))
            return 1;
    }
}

static enum AVPixelFormat get_format(AVCodecContext *dec, const enum AVPixelFormat *fmts)
{
    kr_hwdec *hw = dec->opaque;
    hw->setups++;
    enum AVPixelFormat sw = AV_PIX_FMT_NONE;
    int offered = 0;
    for (const enum AVPixelFormat *p = fmts; *p != AV_PIX_FMT_NONE; p++) {
        const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(*p);
        if (*p == AV_PIX_FMT_CUDA)
            offered = 1;
        else if (sw == AV_PIX_FMT_NONE && d && !(d->flags & AV_PIX_FMT_FLAG_HWACCEL))
            sw = *p;
    }
    /* libavcodec calls again without CUDA in the list when the hwaccel failed to start
     * (unsupported profile or size, decoder session not created). */
    if (offered && !hw->fellback) {
        hw->active = 1;
        return AV_PIX_FMT_CUDA;
    }
    if (!hw->fellback) {
        const char *sw_name = av_get_pix_fmt_name(dec->sw_pix_fmt);
        keyer_log(hw->logger, KEYER_LOG_WARNING,
                  "%s: NVDEC %s %s %dx%d %s (decoder %d): decoding on the CPU", hw->url,
                  offered ? "could not start for" : "does not support",
                  avcodec_get_name(dec->codec_id), dec->coded_width, dec->coded_height,
                  sw_name ? sw_name : "?", hw->source);
        hw->fellback = 1;
    }
    hw->active = 0;
    return sw;
}

keyer_status kr_hwdec_attach(AVCodecContext *dec, kr_hwdec *hw, AVBufferRef *device,
                             keyer_error *err)
{
    dec->hw_device_ctx = av_buffer_ref(device);
    if (!dec->hw_device_ctx)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "%s: cannot reference the CUDA device", hw->url);
    dec->opaque = hw;
    dec->get_format = get_format;
    return KEYER_OK;
}
