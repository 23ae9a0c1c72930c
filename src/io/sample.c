/* A synthetic but real video for tests, demos and benchmarks: pan/zoom over a photo + a sine tone,
 * encoded directly with libavformat/libavcodec (independent of keyer_writer, so tests can check
 * the writer against it). */
#define _POSIX_C_SOURCE 200809L
#include "keyer/io.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "keyer/image.h"

static const double PI = 3.14159265358979323846;

keyer_sample_params keyer_sample_params_defaults(void)
{
    keyer_sample_params p;
    memset(&p, 0, sizeof(p));
    p.width = 320;
    p.height = 240;
    p.frames = 48;
    p.frame_rate = (keyer_rational){24, 1};
    p.codec = "libx264";
    p.pixel_format = "yuv420p";
    p.keyint = 12;
    p.bframes = 2;
    p.audio_codec = "aac";
    return p;
}

typedef struct sample_writer {
    const char *path;
    AVFormatContext *oc;
    AVCodecContext *venc, *aenc;
    AVStream *vst, *ast;
    AVFrame *vframe, *aframe;
    AVPacket *pkt;
    int64_t audio_samples; /* written so far */
} sample_writer;

static keyer_status drain(sample_writer *s, AVCodecContext *enc, AVStream *st, keyer_error *err)
{
    for (;;) {
        int ret = avcodec_receive_packet(enc, s->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return KEYER_OK;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: %s encoder", s->path, enc->codec->name);
        av_packet_rescale_ts(s->pkt, enc->time_base, st->time_base);
        s->pkt->stream_index = st->index;
        ret = av_interleaved_write_frame(s->oc, s->pkt);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: cannot write", s->path);
    }
}

static keyer_status encode(sample_writer *s, AVCodecContext *enc, AVStream *st, AVFrame *f,
                           keyer_error *err)
{
    int ret = avcodec_send_frame(enc, f);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: %s encoder", s->path, enc->codec->name);
    return drain(s, enc, st, err);
}

static keyer_status open_video(sample_writer *s, const keyer_sample_params *p, keyer_error *err)
{
    const AVCodec *codec = avcodec_find_encoder_by_name(p->codec);
    if (!codec || codec->type != AVMEDIA_TYPE_VIDEO)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: no video encoder %s", s->path,
                               p->codec);
    enum AVPixelFormat pix = av_get_pix_fmt(p->pixel_format ? p->pixel_format : "yuv420p");
    if (pix == AV_PIX_FMT_NONE)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: unknown pixel format %s",
                               s->path, p->pixel_format);
    s->venc = avcodec_alloc_context3(codec);
    s->vst = avformat_new_stream(s->oc, NULL);
    if (!s->venc || !s->vst)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", s->path);
    AVCodecContext *c = s->venc;
    c->width = p->width;
    c->height = p->height;
    c->pix_fmt = pix;
    c->time_base = (AVRational){p->frame_rate.den, p->frame_rate.num};
    c->framerate = (AVRational){p->frame_rate.num, p->frame_rate.den};
    c->sample_aspect_ratio = (AVRational){1, 1};
    c->color_range = AVCOL_RANGE_MPEG;
    c->colorspace = p->height >= 720 ? AVCOL_SPC_BT709 : AVCOL_SPC_SMPTE170M;
    if (p->keyint > 0)
        c->gop_size = p->keyint;
    if (p->bframes >= 0)
        c->max_b_frames = p->bframes;
    if (s->oc->oformat->flags & AVFMT_GLOBALHEADER)
        c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary *opts = NULL;
    if (p->preset)
        av_dict_set(&opts, "preset", p->preset, 0);
    if (p->keyint > 0 && !strcmp(codec->name, "libx265")) {
        char buf[96];
        snprintf(buf, sizeof(buf), "keyint=%d:min-keyint=%d:bframes=%d:log-level=error",
                 p->keyint, p->keyint, p->bframes >= 0 ? p->bframes : 4);
        av_dict_set(&opts, "x265-params", buf, 0);
    }
    if (p->codec_options && *p->codec_options &&
        av_dict_parse_string(&opts, p->codec_options, "=", ":", 0) < 0) {
        av_dict_free(&opts);
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: cannot parse codec options \"%s\"", s->path, p->codec_options);
    }
    int ret = avcodec_open2(c, codec, &opts);
    av_dict_free(&opts);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot open encoder %s", s->path, codec->name);
    ret = avcodec_parameters_from_context(s->vst->codecpar, c);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: stream parameters", s->path);
    s->vst->time_base = c->time_base;
    s->vst->avg_frame_rate = c->framerate;
    s->vframe = av_frame_alloc();
    if (!s->vframe)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", s->path);
    s->vframe->format = pix;
    s->vframe->width = p->width;
    s->vframe->height = p->height;
    ret = av_frame_get_buffer(s->vframe, 0);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: frame buffer", s->path);
    return KEYER_OK;
}

static keyer_status open_audio(sample_writer *s, const keyer_sample_params *p, keyer_error *err)
{
    const AVCodec *codec = avcodec_find_encoder_by_name(p->audio_codec);
    if (!codec || codec->type != AVMEDIA_TYPE_AUDIO)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: no audio encoder %s", s->path,
                               p->audio_codec);
    s->aenc = avcodec_alloc_context3(codec);
    s->ast = avformat_new_stream(s->oc, NULL);
    s->aframe = av_frame_alloc();
    if (!s->aenc || !s->ast || !s->aframe)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", s->path);
    AVCodecContext *c = s->aenc;
    c->sample_rate = 48000;
    c->sample_fmt = codec->sample_fmts ? codec->sample_fmts[0] : AV_SAMPLE_FMT_S16;
    if (c->sample_fmt != AV_SAMPLE_FMT_S16 && c->sample_fmt != AV_SAMPLE_FMT_FLTP &&
        c->sample_fmt != AV_SAMPLE_FMT_FLT && c->sample_fmt != AV_SAMPLE_FMT_S16P)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: audio encoder %s wants sample format %s", s->path,
                               codec->name, av_get_sample_fmt_name(c->sample_fmt));
    AVChannelLayout stereo = AV_CHANNEL_LAYOUT_STEREO;
    int ret = av_channel_layout_copy(&c->ch_layout, &stereo);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: channel layout", s->path);
    c->time_base = (AVRational){1, c->sample_rate};
    c->bit_rate = 96000;
    if (s->oc->oformat->flags & AVFMT_GLOBALHEADER)
        c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    ret = avcodec_open2(c, codec, NULL);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot open encoder %s", s->path, codec->name);
    ret = avcodec_parameters_from_context(s->ast->codecpar, c);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: stream parameters", s->path);
    s->ast->time_base = c->time_base;
    s->aframe->format = c->sample_fmt;
    s->aframe->sample_rate = c->sample_rate;
    s->aframe->nb_samples = c->frame_size > 0 ? c->frame_size : 1024;
    ret = av_channel_layout_copy(&s->aframe->ch_layout, &c->ch_layout);
    if (ret >= 0)
        ret = av_frame_get_buffer(s->aframe, 0);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio frame", s->path);
    return KEYER_OK;
}

/* Fills and encodes audio up to @p until samples (a 440 Hz tone, 660 Hz on the right). */
static keyer_status write_audio(sample_writer *s, int64_t until, keyer_error *err)
{
    while (s->audio_samples < until) {
        AVFrame *f = s->aframe;
        int ret = av_frame_make_writable(f);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio frame", s->path);
        int n = f->nb_samples;
        for (int i = 0; i < n; i++) {
            double t = (double)(s->audio_samples + i) / 48000.0;
            float l = (float)(0.3 * sin(2 * PI * 440.0 * t));
            float r = (float)(0.3 * sin(2 * PI * 660.0 * t));
            switch (f->format) {
            case AV_SAMPLE_FMT_FLTP:
                ((float *)f->data[0])[i] = l;
                ((float *)f->data[1])[i] = r;
                break;
            case AV_SAMPLE_FMT_FLT:
                ((float *)f->data[0])[2 * i] = l;
                ((float *)f->data[0])[2 * i + 1] = r;
                break;
            case AV_SAMPLE_FMT_S16P:
                ((int16_t *)f->data[0])[i] = (int16_t)lrintf(l * 32767.f);
                ((int16_t *)f->data[1])[i] = (int16_t)lrintf(r * 32767.f);
                break;
            default: /* S16 */
                ((int16_t *)f->data[0])[2 * i] = (int16_t)lrintf(l * 32767.f);
                ((int16_t *)f->data[0])[2 * i + 1] = (int16_t)lrintf(r * 32767.f);
                break;
            }
        }
        f->pts = s->audio_samples;
        s->audio_samples += n;
        keyer_status st = encode(s, s->aenc, s->ast, f, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

/* Adds deterministic noise in [-amp, amp] (an xorshift sequence seeded by the frame). */
static void add_noise(keyer_frame *f, int amp, uint32_t seed)
{
    uint32_t x = 2463534242u ^ (seed * 2654435761u);
    for (int yy = 0; yy < f->height; yy++) {
        uint8_t *row = f->data[0] + (ptrdiff_t)yy * f->stride[0];
        for (int i = 0; i < 3 * f->width; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            int v = row[i] + (int)(x % (uint32_t)(2 * amp + 1)) - amp;
            row[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

keyer_status keyer_video_write_sample(const char *path, const char *image_path,
                                      const keyer_sample_params *params, keyer_error *err)
{
    keyer_sample_params p = params ? *params : keyer_sample_params_defaults();
    if (!path || !image_path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_video_write_sample: %s is NULL", !path ? "path" : "image_path");
    if (p.width < 16 || p.height < 16 || p.width > 8192 || p.height > 8192 || (p.width & 1) ||
        (p.height & 1) || p.frames <= 0 || p.frame_rate.num <= 0 || p.frame_rate.den <= 0 ||
        !p.codec || p.noise < 0 || p.noise > 64)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_video_write_sample %s: bad parameters (%dx%d, %d frames, "
                               "%d/%d fps): sizes must be even, 16..8192", path, p.width,
                               p.height, p.frames, p.frame_rate.num, p.frame_rate.den);
    sample_writer s = {.path = path};
    keyer_frame *img = NULL;
    keyer_frame *rgb = NULL;
    kr_converter conv = {0}, conv2 = {0};
    int opened_file = 0, created = 0;
    /* FFmpeg's lines (libx264 reports its settings at info level) go to the default logger:
     * warnings and errors to stderr (see av.h). */
    kr_av_log_attach(&s, NULL);
    keyer_status st = KEYER_OK;
    if ((st = keyer_frame_create(&img, err)) || (st = keyer_frame_create(&rgb, err)) ||
        (st = keyer_frame_alloc(rgb, KEYER_PIXEL_FORMAT_RGB24, p.width, p.height, NULL, err)))
        goto fail;
    st = keyer_image_read(image_path, KEYER_PIXEL_FORMAT_RGB24, img, err);
    if (st)
        goto fail;
    int ret = avformat_alloc_output_context2(&s.oc, NULL, p.format, path);
    if (ret < 0 || !s.oc) {
        st = kr_av_error(err, ret < 0 ? ret : AVERROR_MUXER_NOT_FOUND,
                         "%s: no container for this name", path);
        goto fail;
    }
    s.pkt = av_packet_alloc();
    if (!s.pkt) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    if ((st = open_video(&s, &p, err)))
        goto fail;
    if (p.audio_codec && (st = open_audio(&s, &p, err)))
        goto fail;
    if (!(s.oc->oformat->flags & AVFMT_NOFILE)) {
        ret = avio_open(&s.oc->pb, path, AVIO_FLAG_WRITE);
        if (ret < 0) {
            st = kr_av_error(err, ret, "%s: cannot create", path);
            goto fail;
        }
        opened_file = 1;
        created = 1;
    }
    ret = avformat_write_header(s.oc, NULL);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot write the header", path);
        goto fail;
    }
    for (int i = 0; i < p.frames; i++) {
        /* Crop window: zooms in from the whole picture (fitted to the output's aspect) to 80%
         * of it while panning from the top-left to the bottom-right. */
        double t = p.frames > 1 ? (double)i / (p.frames - 1) : 0;
        double aspect = (double)p.width / p.height;
        double cw = img->width, ch = cw / aspect;
        if (ch > img->height) {
            ch = img->height;
            cw = ch * aspect;
        }
        double zoom = 1.0 - 0.2 * t;
        cw *= zoom;
        ch *= zoom;
        int w = (int)cw & ~1, h = (int)ch & ~1;
        int x = (int)((img->width - w) * t), y = (int)((img->height - h) * t);
        if (w < 2 || h < 2) {
            st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: image %s is too small",
                                 path, image_path);
            goto fail;
        }
        ret = av_frame_make_writable(s.vframe);
        if (ret < 0) {
            st = kr_av_error(err, ret, "%s: video frame", path);
            goto fail;
        }
        kr_image src = {0}, dst = {0};
        src.data[0] = img->data[0] + (ptrdiff_t)y * img->stride[0] + 3 * x;
        src.linesize[0] = (int)img->stride[0];
        src.width = w;
        src.height = h;
        src.format = AV_PIX_FMT_RGB24;
        kr_image_from_frame(&dst, rgb);
        dst.colorspace = AVCOL_SPC_RGB;
        if ((st = kr_convert(&conv, &src, &dst, err)))
            goto fail;
        if (p.noise > 0)
            add_noise(rgb, p.noise, (uint32_t)i);
        kr_image_from_frame(&src, rgb);
        kr_image_from_avframe(&dst, s.vframe);
        dst.colorspace = s.venc->colorspace;
        dst.range = s.venc->color_range;
        if ((st = kr_convert(&conv2, &src, &dst, err)))
            goto fail;
        s.vframe->pts = i;
        s.vframe->color_range = s.venc->color_range;
        s.vframe->colorspace = s.venc->colorspace;
        if ((st = encode(&s, s.venc, s.vst, s.vframe, err)))
            goto fail;
        if (s.aenc) {
            int64_t until = av_rescale_q(i + 1, s.venc->time_base, (AVRational){1, 48000});
            if ((st = write_audio(&s, until, err)))
                goto fail;
        }
    }
    if ((st = encode(&s, s.venc, s.vst, NULL, err)))
        goto fail;
    if (s.aenc && (st = encode(&s, s.aenc, s.ast, NULL, err)))
        goto fail;
    ret = av_write_trailer(s.oc);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot write the trailer", path);
        goto fail;
    }
    if (opened_file) {
        ret = avio_closep(&s.oc->pb);
        opened_file = 0;
        if (ret < 0) {
            st = kr_av_error(err, ret, "%s: cannot close", path);
            goto fail;
        }
    }
fail:
    if (opened_file)
        avio_closep(&s.oc->pb);
    if (st && created)
        unlink(path);
    kr_convert_free(&conv);
    kr_convert_free(&conv2);
    keyer_frame_destroy(&rgb);
    av_frame_free(&s.vframe);
    av_frame_free(&s.aframe);
    av_packet_free(&s.pkt);
    avcodec_free_context(&s.venc);
    avcodec_free_context(&s.aenc);
    avformat_free_context(s.oc);
    keyer_frame_destroy(&img);
    kr_av_log_detach(&s);
    return st;
}
