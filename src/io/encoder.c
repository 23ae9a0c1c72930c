/* The writer's video encoder: pixel format and options, NVENC's CUDA input frames, and the
 * conversion of keyer frames into the encoder's input. */
#include "io/encoder.h"

#include <stdio.h>
#include <string.h>

#include <libavutil/hwcontext.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>

#include "io/io_internal.h"
#include "keyer/log.h"

static int supports_pix_fmt(const AVCodec *c, enum AVPixelFormat f)
{
    if (!c->pix_fmts)
        return 1;
    for (const enum AVPixelFormat *p = c->pix_fmts; *p != AV_PIX_FMT_NONE; p++)
        if (*p == f)
            return 1;
    return 0;
}

int kr_encoder_is_nvenc(const AVCodec *c) { return strstr(c->name, "_nvenc") != NULL; }

/* Pixel format of the encoded stream. */
static keyer_status choose_pix_fmt(const kr_encoder_config *cfg, const AVCodec *c,
                                   const keyer_writer_params *p, enum AVPixelFormat *out,
                                   keyer_error *err)
{
    enum AVPixelFormat f = AV_PIX_FMT_NONE;
    if (p->pixel_format) {
        f = av_get_pix_fmt(p->pixel_format);
        if (f == AV_PIX_FMT_NONE)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: unknown pixel format \"%s\"", cfg->path, p->pixel_format);
    } else if (p->alpha) {
        static const enum AVPixelFormat alpha_fmts[] = {
            AV_PIX_FMT_YUVA444P10LE, AV_PIX_FMT_YUVA420P, AV_PIX_FMT_RGBA, AV_PIX_FMT_YUVA444P,
            AV_PIX_FMT_YUVA422P, AV_PIX_FMT_NONE};
        for (int i = 0; alpha_fmts[i] != AV_PIX_FMT_NONE && f == AV_PIX_FMT_NONE; i++)
            if (c->pix_fmts && supports_pix_fmt(c, alpha_fmts[i]))
                f = alpha_fmts[i];
        if (f == AV_PIX_FMT_NONE)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: encoder %s cannot keep alpha (use .mov for ProRes 4444, "
                                   ".webm for VP9, or a PNG sequence)", cfg->path, c->name);
    } else if (!strcmp(c->name, "png")) {
        f = AV_PIX_FMT_RGB24;
    } else if (!strcmp(c->name, "prores_ks")) {
        f = AV_PIX_FMT_YUV422P10LE;
    } else if (kr_encoder_is_nvenc(c) || supports_pix_fmt(c, AV_PIX_FMT_YUV420P)) {
        f = AV_PIX_FMT_YUV420P;
    } else {
        f = c->pix_fmts[0];
    }
    if (!supports_pix_fmt(c, f))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: encoder %s does not take pixel format %s", cfg->path, c->name,
                               av_get_pix_fmt_name(f));
    *out = f;
    return KEYER_OK;
}

static void log_unused_options(const kr_encoder_config *cfg, const char *what, AVDictionary *d)
{
    const AVDictionaryEntry *e = NULL;
    while ((e = av_dict_get(d, "", e, AV_DICT_IGNORE_SUFFIX)))
        keyer_log(cfg->logger, KEYER_LOG_WARNING, "%s: %s did not use option %s=%s", cfg->path,
                  what, e->key, e->value);
}

/* Size, timing and colour metadata of encoder context @p e for pixel format @p pix. */
static void set_picture(AVCodecContext *e, const kr_encoder_config *cfg, enum AVPixelFormat pix)
{
    e->width = cfg->width;
    e->height = cfg->height;
    e->time_base = cfg->time_base;
    e->framerate = av_inv_q(cfg->frame_tb);
    e->sample_aspect_ratio = (AVRational){1, 1};
    e->pix_fmt = pix;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(pix);
    if (d && !(d->flags & AV_PIX_FMT_FLAG_RGB)) {
        e->colorspace = kr_av_matrix_to(cfg->matrix);
        e->color_range =
            cfg->range == KEYER_COLOR_RANGE_FULL ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
        if (cfg->matrix == KEYER_COLOR_MATRIX_BT709) {
            e->color_primaries = AVCOL_PRI_BT709;
            e->color_trc = AVCOL_TRC_BT709;
        } else if (cfg->matrix == KEYER_COLOR_MATRIX_BT601) {
            e->color_primaries = AVCOL_PRI_SMPTE170M;
            e->color_trc = AVCOL_TRC_SMPTE170M;
        }
    } else {
        e->color_range = AVCOL_RANGE_JPEG;
    }
    if (cfg->global_header)
        e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
}

const char *kr_nvenc_preset(const char *preset)
{
    static const char *const map[][2] = {
        {"ultrafast", "p1"}, {"superfast", "p2"}, {"veryfast", "p3"}, {"faster", "p3"},
        {"fast", "p4"},      {"medium", "p5"},    {"slow", "p6"},     {"slower", "p7"},
        {"veryslow", "p7"},  {"placebo", "p7"}};
    if (!preset)
        return "p5";
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(preset, map[i][0]))
            return map[i][1];
    return preset;
}

keyer_status kr_nvenc_options(const keyer_writer_params *p, kr_nvenc_bframes bframes, int gpu,
                              AVDictionary **opts, keyer_error *err)
{
    char q[32];
    snprintf(q, sizeof(q), "%d", p->quality >= 0 ? p->quality : 23);
    int ret = 0;
    ret |= av_dict_set(opts, "preset", kr_nvenc_preset(p->preset), 0);
    ret |= av_dict_set(opts, "tune", "hq", 0);
    ret |= av_dict_set(opts, "rc", "vbr", 0);
    ret |= av_dict_set(opts, "cq", q, 0);
    ret |= av_dict_set(opts, "rc-lookahead", "20", 0);
    ret |= av_dict_set(opts, "spatial-aq", "1", 0);
    ret |= av_dict_set(opts, "bf", bframes == KR_NVENC_BFRAMES_NONE ? "0" : "3", 0);
    if (bframes == KR_NVENC_BFRAMES_NONE)
        av_dict_set(opts, "b_ref_mode", NULL, 0);
    else
        ret |= av_dict_set(opts, "b_ref_mode",
                           bframes == KR_NVENC_BFRAMES_MIDDLE_REF ? "middle" : "disabled", 0);
    if (gpu >= 0)
        ret |= av_dict_set_int(opts, "gpu", gpu, 0);
    if (ret < 0)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "NVENC options: out of memory");
    return KEYER_OK;
}

keyer_status kr_encoder_options(AVCodecContext *e, const AVCodec *c, const kr_encoder_config *cfg,
                                const keyer_writer_params *p, int use_preset, AVDictionary **opts,
                                keyer_error *err)
{
    const char *n = c->name;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(e->pix_fmt);
    int x26x = !strcmp(n, "libx264") || !strcmp(n, "libx265");
    char q[32];
    snprintf(q, sizeof(q), "%d", p->quality);
    if (kr_encoder_is_nvenc(c)) {
        keyer_status st = kr_nvenc_options(p, (kr_nvenc_bframes)cfg->nvenc_bframes,
                                           kr_hwdec_built() ? -1 : cfg->cuda_device, opts, err);
        if (st)
            return keyer_error_prefix(err, "%s: ", cfg->path);
        e->bit_rate = 0;
    } else if (use_preset && p->preset) {
        av_dict_set(opts, !strcmp(n, "libvpx-vp9") ? "deadline" : "preset", p->preset, 0);
    }
    if (kr_encoder_is_nvenc(c)) {
        /* quality is NVENC's cq, set with its other defaults above */
    } else if (x26x && p->quality >= 0) {
        av_dict_set(opts, "crf", q, 0);
    } else if (!strcmp(n, "libvpx-vp9")) {
        e->bit_rate = 0;
        av_dict_set(opts, "crf", p->quality >= 0 ? q : "32", 0);
        av_dict_set(opts, "row-mt", "1", 0);
        av_dict_set(opts, "cpu-used", "5", 0);
    } else if (!strcmp(n, "prores_ks")) {
        av_dict_set(opts, "profile", d && (d->flags & AV_PIX_FMT_FLAG_ALPHA) ? "4444" : "hq", 0);
        if (p->quality >= 0) {
            e->flags |= AV_CODEC_FLAG_QSCALE;
            e->global_quality = p->quality * FF_QP2LAMBDA;
        }
    } else if (p->quality >= 0) {
        e->flags |= AV_CODEC_FLAG_QSCALE;
        e->global_quality = p->quality * FF_QP2LAMBDA;
    }
    if (!strcmp(n, "libx265"))
        av_dict_set(opts, "x265-params", "log-level=warning", 0);
    if (p->codec_options && *p->codec_options &&
        av_dict_parse_string(opts, p->codec_options, "=", ":", 0) < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: cannot parse codec options \"%s\" (want key=value:key=value)",
                               cfg->path, p->codec_options);
    return KEYER_OK;
}

/* Device frames go in directly: a CUDA frames context (NV12) on the primary context of device
 * cfg->cuda_device for NVENC encoder context @p e, kept in enc->hw_frames. Errors:
 * UNSUPPORTED (no CUDA), OUT_OF_MEMORY, DEVICE, or libav's error. */
static keyer_status attach_cuda_frames(kr_encoder *enc, AVCodecContext *e, const char *name,
                                       const kr_encoder_config *cfg, keyer_error *err)
{
    AVBufferRef *dev = NULL;
    keyer_status st = kr_hwdec_device_create(cfg->cuda_device, 0, &dev, err);
    if (st)
        return st;
    enc->hw_frames = av_hwframe_ctx_alloc(dev);
    av_buffer_unref(&dev);
    if (!enc->hw_frames)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
    AVHWFramesContext *fc = (AVHWFramesContext *)enc->hw_frames->data;
    fc->format = AV_PIX_FMT_CUDA;
    fc->sw_format = AV_PIX_FMT_NV12;
    fc->width = cfg->width;
    fc->height = cfg->height;
    int ret = av_hwframe_ctx_init(enc->hw_frames);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: CUDA frames for %s", cfg->path, name);
    e->hw_frames_ctx = av_buffer_ref(enc->hw_frames);
    if (!e->hw_frames_ctx)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
    e->pix_fmt = AV_PIX_FMT_CUDA;
    return KEYER_OK;
}

/* The host input frame in pixel format @p pix, NVENC's input frame when it takes CUDA
 * frames, and the download frame. */
static keyer_status alloc_frames(kr_encoder *enc, enum AVPixelFormat pix,
                                 const kr_encoder_config *cfg, keyer_error *err)
{
    enc->vframe = av_frame_alloc();
    if (!enc->vframe)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
    enc->vframe->format = pix;
    enc->vframe->width = cfg->width;
    enc->vframe->height = cfg->height;
    int ret = av_frame_get_buffer(enc->vframe, 0);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: frame buffer", cfg->path);
    if (enc->hw_input && !(enc->hwframe = av_frame_alloc()))
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
    if (keyer_frame_create(&enc->download, err))
        return KEYER_STATUS_OUT_OF_MEMORY;
    return KEYER_OK;
}

keyer_status kr_encoder_open(kr_encoder *enc, const AVCodec *c, const kr_encoder_config *cfg,
                             const keyer_writer_params *p, int use_preset, keyer_error *err)
{
    enc->path = cfg->path;
    enc->width = cfg->width;
    enc->height = cfg->height;
    enc->matrix = cfg->matrix;
    enum AVPixelFormat pix = AV_PIX_FMT_NONE;
    keyer_status st = choose_pix_fmt(cfg, c, p, &pix, err);
    if (st)
        return st;
    AVDictionary *opts = NULL;
    AVCodecContext *e = avcodec_alloc_context3(c);
    if (!e)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
    set_picture(e, cfg, pix);
    if ((st = kr_encoder_options(e, c, cfg, p, use_preset, &opts, err)))
        goto fail;
    if (kr_encoder_is_nvenc(c) && kr_hwdec_built()) {
        enc->failed = 1; /* until the encoder opens */
        if ((st = attach_cuda_frames(enc, e, c->name, cfg, err)))
            goto fail;
        pix = AV_PIX_FMT_NV12;
        enc->hw_input = 1;
    }
    enc->failed = 1;
    int ret = avcodec_open2(e, c, &opts);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot open encoder %s (%s %dx%d)", cfg->path, c->name,
                         av_get_pix_fmt_name(pix), cfg->width, cfg->height);
        goto fail;
    }
    enc->failed = 0;
    log_unused_options(cfg, c->name, opts);
    av_dict_free(&opts);
    enc->ctx = e;
    if ((st = alloc_frames(enc, pix, cfg, err)))
        return st;
    snprintf(enc->name, sizeof(enc->name), "%s", c->name);
    return KEYER_OK;
fail:
    av_dict_free(&opts);
    avcodec_free_context(&e);
    av_buffer_unref(&enc->hw_frames);
    enc->hw_input = 0;
    return st;
}

/* Copies device planes into host frame enc->download. */
static keyer_status download_frame(kr_encoder *enc, const keyer_frame *f, keyer_error *err)
{
    const kr_io_cuda_fns *cuda = kr_io_cuda();
    if (!cuda)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: a CUDA frame was given to a keyer built without CUDA",
                               enc->path);
    if (enc->download->format != f->format || enc->download->width != f->width ||
        enc->download->height != f->height) {
        keyer_status st =
            keyer_frame_alloc(enc->download, f->format, f->width, f->height, NULL, err);
        if (st)
            return keyer_error_prefix(err, "%s: ", enc->path);
    }
    for (int p = 0; p < keyer_pixel_format_planes(f->format); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &ph, &bpe, NULL);
        keyer_status st = cuda->copy_2d(enc->download->data[p], (size_t)enc->download->stride[p],
                                        f->data[p], (size_t)f->stride[p],
                                        (size_t)pw * (size_t)bpe, (size_t)ph, err);
        if (st)
            return keyer_error_prefix(err, "%s: downloading a device frame: ", enc->path);
    }
    enc->download->matrix = f->matrix;
    enc->download->range = f->range;
    return KEYER_OK;
}

keyer_status kr_encoder_input(kr_encoder *enc, const keyer_frame *f, AVFrame **enc_in,
                              keyer_error *err)
{
    keyer_status st;
    /* hw_input is set only when kr_io_cuda() exists (kr_hwdec_built) */
    if (enc->hw_input && f->memory == KEYER_MEMORY_CUDA && f->format == KEYER_PIXEL_FORMAT_NV12) {
        av_frame_unref(enc->hwframe);
        int ret = av_hwframe_get_buffer(enc->hw_frames, enc->hwframe, 0);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: NVENC input frame", enc->path);
        for (int p = 0; p < 2; p++) {
            st = kr_io_cuda()->copy_2d(enc->hwframe->data[p], (size_t)enc->hwframe->linesize[p],
                                       f->data[p], (size_t)f->stride[p], (size_t)enc->width,
                                       (size_t)(p ? (enc->height + 1) / 2 : enc->height), err);
            if (st)
                return keyer_error_prefix(err, "%s: ", enc->path);
        }
        *enc_in = enc->hwframe;
        return KEYER_OK;
    }
    if (f->memory == KEYER_MEMORY_CUDA) {
        if ((st = download_frame(enc, f, err)))
            return st;
        f = enc->download;
    }
    int ret = av_frame_make_writable(enc->vframe);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: encoder frame", enc->path);
    kr_image src, dst;
    kr_image_from_frame(&src, f);
    kr_image_from_avframe(&dst, enc->vframe);
    if (src.colorspace == AVCOL_SPC_UNSPECIFIED)
        src.colorspace = kr_av_matrix_to(enc->matrix);
    dst.colorspace = enc->ctx->colorspace != AVCOL_SPC_UNSPECIFIED ? enc->ctx->colorspace
                                                                   : kr_av_matrix_to(enc->matrix);
    dst.range = enc->ctx->color_range;
    if ((st = kr_convert(&enc->conv, &src, &dst, err)))
        return keyer_error_prefix(err, "%s: ", enc->path);
    if (enc->hw_input) {
        av_frame_unref(enc->hwframe);
        ret = av_hwframe_get_buffer(enc->hw_frames, enc->hwframe, 0);
        if (ret >= 0)
            ret = av_hwframe_transfer_data(enc->hwframe, enc->vframe, 0);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: uploading to NVENC", enc->path);
        *enc_in = enc->hwframe;
        return KEYER_OK;
    }
    *enc_in = enc->vframe;
    return KEYER_OK;
}

void kr_encoder_free(kr_encoder *enc)
{
    avcodec_free_context(&enc->ctx);
    av_frame_free(&enc->vframe);
    av_frame_free(&enc->hwframe);
    av_buffer_unref(&enc->hw_frames);
    kr_convert_free(&enc->conv);
    keyer_frame_destroy(&enc->download);
    memset(enc, 0, sizeof(*enc));
}
