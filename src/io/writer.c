/* keyer_writer: libavformat/libavcodec output, NVENC where it opens (else x264/x265), alpha
 * codecs, stream copy (and AAC re-encode) of a reader's audio and subtitles. The video encoder
 * is encoder.c's, the copied streams are copy.c's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavutil/display.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "io/copy.h"
#include "io/encoder.h"
#include "io/encoder_probe.h"
#include "io/io_internal.h"
#include "keyer/io.h"
#include "keyer/log.h"

struct keyer_writer {
    char *path;
    const keyer_logger *logger;
    AVFormatContext *oc;
    int pb_opened, created_file, header_written;
    kr_encoder enc;
    keyer_encoder_probe *own_probe; /* when the caller gave none and the codec is left to keyer */
    AVStream *vst;
    AVPacket *pkt;
    AVRational in_tb;    /* the writer's time base */
    AVRational frame_tb; /* 1/frame_rate */
    int width, height;
    keyer_color_matrix matrix;
    keyer_color_range range;
    int64_t last_pts, frames;
    int pts_warned;
    keyer_reader *src;
    kr_copies copies;
    keyer_status failed; /* first error of write(); only close() is accepted after it */
    keyer_error fail_err;
    int closed;
    keyer_status close_status;
    keyer_error close_err;
};

keyer_writer_params keyer_writer_params_defaults(void)
{
    keyer_writer_params p;
    memset(&p, 0, sizeof(p));
    p.quality = -1;
    p.fragmented = 1;
    return p;
}

static const char *muxer_alias(const char *name)
{
    if (!name)
        return NULL;
    if (!strcmp(name, "y4m"))
        return "yuv4mpegpipe";
    if (!strcmp(name, "raw"))
        return "rawvideo";
    if (!strcmp(name, "mkv"))
        return "matroska";
    return name;
}

/* Encoder name for the container when none is given; NULL when alpha cannot be kept. */
static const char *default_codec(const AVOutputFormat *of, const char *path, int alpha)
{
    const char *m = of->name;
    if (alpha) {
        if (kr_av_name_in_list(m, "mov"))
            return "prores_ks";
        if (kr_av_name_in_list(m, "webm") || kr_av_name_in_list(m, "matroska"))
            return "libvpx-vp9";
        if (kr_av_name_in_list(m, "image2") || kr_av_name_in_list(m, "image2pipe"))
            return "png";
        if (kr_av_name_in_list(m, "nut") || kr_av_name_in_list(m, "avi"))
            return "ffv1";
        return NULL;
    }
    if (kr_av_name_in_list(m, "webm"))
        return "libvpx-vp9";
    if (kr_av_name_in_list(m, "yuv4mpegpipe") || kr_av_name_in_list(m, "rawvideo")) {
        const AVCodec *c = avcodec_find_encoder(of->video_codec);
        return c ? c->name : "rawvideo";
    }
    enum AVCodecID id = av_guess_codec(of, NULL, path, NULL, AVMEDIA_TYPE_VIDEO);
    if (id == AV_CODEC_ID_H264 && avcodec_find_encoder_by_name("libx264"))
        return "libx264";
    const AVCodec *c = avcodec_find_encoder(id);
    return c ? c->name : NULL;
}
/* ---- open ------------------------------------------------------------------------------- */

static keyer_status check_params(const char *path, const keyer_writer_params *p, keyer_error *err)
{
    if (p->width <= 0 || p->height <= 0 || p->width > 16384 || p->height > 16384)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: frame size %dx%d is outside 1..16384", path, p->width,
                               p->height);
    if (p->frame_rate.num <= 0 || p->frame_rate.den <= 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: frame rate %d/%d is not positive", path, p->frame_rate.num,
                               p->frame_rate.den);
    if (p->rotation % 90 || p->rotation < 0 || p->rotation >= 360)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: rotation %d is not 0, 90, 180 or 270", path, p->rotation);
    if ((unsigned)p->matrix > KEYER_COLOR_MATRIX_BT2020 || (unsigned)p->range > KEYER_COLOR_RANGE_FULL)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: bad colour parameters",
                               path);
    if (!strcmp(path, "-") && !p->format)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "standard output (\"-\") needs a container format (y4m, raw, "
                               "matroska, ...)");
    return KEYER_OK;
}

/* The writer for @p path with @p p's settings, nothing opened yet. Errors: OUT_OF_MEMORY. */
static keyer_status writer_create(const char *path, const keyer_writer_params *p,
                                  keyer_writer **out, keyer_error *err)
{
    keyer_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    *out = w;
    size_t n = strlen(path) + 1;
    w->path = malloc(n);
    w->pkt = av_packet_alloc();
    if (!w->path || !w->pkt)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(w->path, path, n);
    w->logger = p->logger;
    kr_av_log_attach(w, w->logger); /* FFmpeg's own lines go to this logger (see av.h) */
    w->width = p->width;
    w->height = p->height;
    w->frame_tb = (AVRational){p->frame_rate.den, p->frame_rate.num};
    w->in_tb = p->time_base.num > 0 && p->time_base.den > 0
                   ? (AVRational){p->time_base.num, p->time_base.den}
                   : w->frame_tb;
    w->matrix = p->matrix != KEYER_COLOR_MATRIX_UNSPECIFIED
                    ? p->matrix
                    : (p->height >= 720 ? KEYER_COLOR_MATRIX_BT709 : KEYER_COLOR_MATRIX_BT601);
    w->range =
        p->range == KEYER_COLOR_RANGE_FULL ? KEYER_COLOR_RANGE_FULL : KEYER_COLOR_RANGE_LIMITED;
    w->last_pts = INT64_MIN;
    w->src = p->copy_from;
    return KEYER_OK;
}

/* The encoder settings of writer @p w, with NVENC on device @p device taking @p bframes. */
static kr_encoder_config encoder_config(const keyer_writer *w, int device,
                                        kr_nvenc_bframes bframes)
{
    kr_encoder_config cfg = {
        .path = w->path,
        .logger = w->logger,
        .width = w->width,
        .height = w->height,
        .time_base = w->in_tb,
        .frame_tb = w->frame_tb,
        .matrix = w->matrix,
        .range = w->range,
        .global_header = (w->oc->oformat->flags & AVFMT_GLOBALHEADER) != 0,
        .cuda_device = device,
        .nvenc_bframes = bframes,
    };
    return cfg;
}

/* 1 for NVENC's own presets p1..p7, which mean nothing to x264/x265. */
static int nvenc_preset(const char *preset)
{
    return preset && preset[0] == 'p' && preset[1] >= '1' && preset[1] <= '7' && !preset[2];
}

/* The caller's probe, else the writer's own (device 0). Errors: OUT_OF_MEMORY. */
static keyer_status get_probe(keyer_writer *w, const keyer_writer_params *p,
                              keyer_encoder_probe **probe, keyer_error *err)
{
    *probe = p->encoder_probe;
    if (*probe)
        return KEYER_OK;
    if (!w->own_probe && keyer_encoder_probe_create(0, &w->own_probe, err))
        return keyer_error_prefix(err, "%s: ", w->path);
    *probe = w->own_probe;
    return KEYER_OK;
}

/* Opens encoder @p codec, named by the caller; an NVENC encoder that does not open for the
 * probe or for this output (no GPU, no driver, no free NVENC session) gives way to libx264 or
 * libx265, with a warning. */
static keyer_status open_named(keyer_writer *w, const AVCodec *codec, const char *cname,
                               const keyer_writer_params *p, keyer_error *err)
{
    int nvenc = kr_encoder_is_nvenc(codec);
    if (!nvenc) {
        kr_encoder_config cfg = encoder_config(w, 0, KR_NVENC_BFRAMES_MIDDLE_REF);
        return kr_encoder_open(&w->enc, codec, &cfg, p, 1, err);
    }
    keyer_encoder_probe *probe = NULL;
    keyer_status st = get_probe(w, p, &probe, err);
    if (st)
        return st;
    kr_encoder_config cfg = encoder_config(w, keyer_encoder_probe_device(probe),
                                           kr_encoder_probe_bframes(probe, codec->name));
    keyer_error nverr = {0};
    if (keyer_encoder_probe_nvenc(probe, codec->name, nverr.message, sizeof(nverr.message))) {
        st = kr_encoder_open(&w->enc, codec, &cfg, p, 1, &nverr);
        if (st == KEYER_OK || !w->enc.failed) {
            if (st && err)
                *err = nverr;
            return st;
        }
    }
    const char *alt = codec->id == AV_CODEC_ID_HEVC && avcodec_find_encoder_by_name("libx265")
                          ? "libx265"
                          : "libx264";
    keyer_log(w->logger, KEYER_LOG_WARNING, "%s is unavailable (%s); encoding with %s instead",
              codec->name, nverr.message, alt);
    codec = avcodec_find_encoder_by_name(alt);
    if (!codec)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: %s failed and %s is missing",
                               w->path, cname, alt);
    return kr_encoder_open(&w->enc, codec, &cfg, p, !nvenc_preset(p->preset), err);
}

/* Opens the encoder keyer chooses for family @p fam: NVENC when the probe (the caller's, else
 * the writer's own for device 0) says it opens, else x264/x265 (libavcodec's own encoder of the
 * codec when those are missing); an NVENC that opened for the probe but not for this output
 * (a pixel format it lacks, no free session) gives way too. The choice is logged (info). */
static keyer_status open_chosen(keyer_writer *w, kr_encoder_family fam,
                                const keyer_writer_params *p, keyer_error *err)
{
    keyer_encoder_probe *probe = NULL;
    keyer_status st = get_probe(w, p, &probe, err);
    if (st)
        return st;
    int device = keyer_encoder_probe_device(probe);
    const char *nv = kr_encoder_nvenc_name(fam);
    char why[KEYER_ERROR_MESSAGE_MAX];
    const AVCodec *c = NULL;
    if (keyer_encoder_probe_nvenc(probe, nv, why, sizeof(why)) &&
        (c = avcodec_find_encoder_by_name(nv))) {
        kr_encoder_config cfg = encoder_config(w, device, kr_encoder_probe_bframes(probe, nv));
        keyer_error nverr = {0};
        st = kr_encoder_open(&w->enc, c, &cfg, p, 1, &nverr);
        if (st == KEYER_OK) {
            keyer_log(w->logger, KEYER_LOG_INFO, "%s: encoder: %s on cuda:%d", w->path, nv,
                      device);
            return KEYER_OK;
        }
        if (w->enc.ctx) { /* opened, then out of memory */
            if (err)
                *err = nverr;
            return st;
        }
        kr_encoder_free(&w->enc);
        snprintf(why, sizeof(why), "%s", nverr.message);
    }
    const char *sw = kr_encoder_pick(fam, 0);
    c = avcodec_find_encoder_by_name(sw);
    if (!c) {
        c = avcodec_find_encoder(fam == KR_ENCODER_HEVC ? AV_CODEC_ID_HEVC : AV_CODEC_ID_H264);
        if (!c || kr_encoder_is_nvenc(c))
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: NVENC is unavailable (%s) and libavcodec has no %s",
                                   w->path, why, sw);
    }
    keyer_log(w->logger, KEYER_LOG_INFO, "%s: encoder: %s (NVENC unavailable: %s)", w->path,
              c->name, why);
    kr_encoder_config cfg = encoder_config(w, device, KR_NVENC_BFRAMES_MIDDLE_REF);
    return kr_encoder_open(&w->enc, c, &cfg, p, !nvenc_preset(p->preset), err);
}

/* The video encoder for @p p (its codec, or the container's default) and the video stream
 * it feeds, with the display rotation. */
static keyer_status add_video(keyer_writer *w, const keyer_writer_params *p, keyer_error *err)
{
    const AVOutputFormat *of = w->oc->oformat;
    const char *cname = p->codec ? p->codec : default_codec(of, w->path, p->alpha);
    if (!cname)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               p->alpha ? "%s: %s cannot hold video with alpha (use .mov for "
                                          "ProRes 4444, .webm for VP9, or a PNG sequence)"
                                        : "%s: no video encoder for %s",
                               w->path, of->name);
    kr_encoder_family fam = kr_encoder_family_of(p->codec, cname);
    const AVCodec *codec = NULL;
    enum AVCodecID id = fam == KR_ENCODER_H264   ? AV_CODEC_ID_H264
                        : fam == KR_ENCODER_HEVC ? AV_CODEC_ID_HEVC
                                                 : AV_CODEC_ID_NONE;
    if (fam == KR_ENCODER_NAMED) {
        codec = avcodec_find_encoder_by_name(cname);
        if (!codec || codec->type != AVMEDIA_TYPE_VIDEO)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: libavcodec has no video encoder \"%s\"", w->path, cname);
        id = codec->id;
    }
    if (avformat_query_codec(of, id, FF_COMPLIANCE_NORMAL) == 0)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: %s cannot hold %s video",
                               w->path, of->name, avcodec_get_name(id));
    keyer_status st = codec ? open_named(w, codec, cname, p, err) : open_chosen(w, fam, p, err);
    if (st)
        return st;
    w->vst = avformat_new_stream(w->oc, NULL);
    if (!w->vst)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    int ret = avcodec_parameters_from_context(w->vst->codecpar, w->enc.ctx);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: stream parameters", w->path);
    w->vst->time_base = w->enc.ctx->time_base;
    w->vst->avg_frame_rate = w->enc.ctx->framerate;
    w->vst->r_frame_rate = w->enc.ctx->framerate;
    if (p->rotation) {
        int32_t *m = (int32_t *)av_stream_new_side_data(w->vst, AV_PKT_DATA_DISPLAYMATRIX,
                                                        9 * sizeof(int32_t));
        if (!m)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                   w->path);
        /* av_display_rotation_set takes the clockwise angle (its _get returns the opposite). */
        av_display_rotation_set(m, (double)p->rotation);
    }
    return KEYER_OK;
}

/* Creates the output file (unless the container writes none, or to standard output) and
 * writes the container's header: MP4/MOV fragmented as @p p asks. */
static keyer_status write_header(keyer_writer *w, const keyer_writer_params *p,
                                 const char *lavf_path, int is_stdout, keyer_error *err)
{
    const AVOutputFormat *of = w->oc->oformat;
    int ret;
    if (!(of->flags & AVFMT_NOFILE)) {
        ret = avio_open2(&w->oc->pb, lavf_path, AVIO_FLAG_WRITE, NULL, NULL);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: cannot create the file", w->path);
        w->pb_opened = 1;
        w->created_file = !is_stdout && !strstr(w->path, "://");
    }
    AVDictionary *mopts = NULL;
    int mov = kr_av_name_in_list(of->name, "mp4") || kr_av_name_in_list(of->name, "mov");
    if (mov && p->fragmented && !is_stdout) {
        /* delay_moov: the moov (with edit lists for B-frame and audio priming delays) is
         * written with the first fragment, so timestamps come back exactly. */
        av_dict_set(&mopts, "movflags", "frag_keyframe+empty_moov+delay_moov+default_base_moof", 0);
        av_dict_set(&mopts, "frag_duration", "1000000", 0);
    } else if (mov && is_stdout) {
        av_dict_set(&mopts, "movflags", "frag_keyframe+empty_moov+default_base_moof", 0);
    }
    ret = avformat_write_header(w->oc, &mopts);
    av_dict_free(&mopts);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot write the %s header", w->path, of->name);
    w->header_written = 1;
    return KEYER_OK;
}

keyer_status keyer_writer_open(const char *path, const keyer_writer_params *params,
                               keyer_writer **out, keyer_error *err)
{
    if (!out || !path || !*path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_writer_open: %s",
                               !out ? "out is NULL" : "path is empty");
    *out = NULL;
    keyer_writer_params p = params ? *params : keyer_writer_params_defaults();
    keyer_status st = check_params(path, &p, err);
    if (st)
        return st;
    keyer_writer *w = NULL;
    if ((st = writer_create(path, &p, &w, err))) {
        if (!w)
            return st;
        goto fail;
    }
    int is_stdout = !strcmp(path, "-");
    const char *lavf_path = is_stdout ? "pipe:1" : path;
    int ret = avformat_alloc_output_context2(&w->oc, NULL, muxer_alias(p.format), lavf_path);
    if (ret < 0 || !w->oc) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "%s: no container %s%s%s", path,
                             p.format ? "named \"" : "for this file name extension",
                             p.format ? p.format : "", p.format ? "\"" : "");
        goto fail;
    }
    if ((st = add_video(w, &p, err)))
        goto fail;
    if (w->src && (st = kr_copies_open(&w->copies, w->oc, w->src, w->path, w->logger, err)))
        goto fail;
    if ((st = write_header(w, &p, lavf_path, is_stdout, err)))
        goto fail;
    keyer_log(w->logger, KEYER_LOG_INFO, "%s: %s, %s %dx%d %s", path, w->oc->oformat->name,
              w->enc.name, w->width, w->height, av_get_pix_fmt_name(w->enc.ctx->pix_fmt));
    *out = w;
    return KEYER_OK;
fail:
    if (w->pb_opened)
        avio_closep(&w->oc->pb);
    w->pb_opened = 0;
    if (w->created_file)
        unlink(path);
    w->created_file = 0;
    w->closed = 1;
    keyer_writer_destroy(&w);
    return st;
}

/* ---- writing ---------------------------------------------------------------------------- */

static keyer_status drain_video(keyer_writer *w, keyer_error *err)
{
    for (;;) {
        int ret = avcodec_receive_packet(w->enc.ctx, w->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return KEYER_OK;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: %s encoder", w->path, w->enc.name);
        if (w->pkt->duration <= 0) /* one frame; lets muxers know the last frame's length */
            w->pkt->duration = av_rescale_q(1, w->frame_tb, w->enc.ctx->time_base);
        av_packet_rescale_ts(w->pkt, w->enc.ctx->time_base, w->vst->time_base);
        w->pkt->stream_index = w->vst->index;
        keyer_status st = kr_av_write_packet(w->oc, w->pkt, w->path, err);
        if (st)
            return st;
    }
}


keyer_status keyer_writer_write(keyer_writer *w, const keyer_frame *f, keyer_error *err)
{
    if (!w || !f)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_writer_write: %s is NULL",
                               !w ? "writer" : "frame");
    if (w->closed)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: the writer is closed",
                               w->path);
    if (w->failed) {
        if (err)
            *err = w->fail_err;
        return w->failed;
    }
    keyer_status st = keyer_frame_check(f, err);
    if (st)
        return keyer_error_prefix(err, "%s: ", w->path);
    if (f->width != w->width || f->height != w->height)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: frame is %dx%d, the writer was opened for %dx%d", w->path,
                               f->width, f->height, w->width, w->height);
    if (f->format == KEYER_PIXEL_FORMAT_GRAYF32)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: grayf32 frames cannot be encoded", w->path);
    int64_t step = av_rescale_q(1, w->frame_tb, w->enc.ctx->time_base);
    if (step < 1)
        step = 1;
    int64_t pts;
    if (f->pts != INT64_MIN) {
        AVRational tb = f->time_base.num > 0 && f->time_base.den > 0
                            ? (AVRational){f->time_base.num, f->time_base.den}
                            : w->in_tb;
        pts = av_rescale_q(f->pts, tb, w->enc.ctx->time_base);
    } else {
        pts = w->last_pts == INT64_MIN ? 0 : w->last_pts + step;
    }
    if (w->last_pts != INT64_MIN && pts <= w->last_pts) {
        if (!w->pts_warned)
            keyer_log(w->logger, KEYER_LOG_WARNING,
                      "%s: frame pts %lld does not increase (last %lld): using %lld", w->path,
                      (long long)pts, (long long)w->last_pts, (long long)(w->last_pts + 1));
        w->pts_warned = 1;
        pts = w->last_pts + 1;
    }
    AVFrame *in = NULL;
    if ((st = kr_encoder_input(&w->enc, f, &in, err)))
        goto fail;
    in->pts = pts;
    in->pict_type = AV_PICTURE_TYPE_NONE;
    in->color_range = w->enc.ctx->color_range;
    in->colorspace = w->enc.ctx->colorspace;
    int ret = avcodec_send_frame(w->enc.ctx, in);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: %s encoder", w->path, w->enc.name);
        goto fail;
    }
    w->last_pts = pts;
    w->frames++;
    if ((st = drain_video(w, err)))
        goto fail;
    if ((st = kr_copies_write_pending(&w->copies, err)))
        goto fail;
    return KEYER_OK;
fail:
    w->failed = st;
    if (err)
        w->fail_err = *err;
    return st;
}

/* ---- close ------------------------------------------------------------------------------ */

/* Records the first error of close. */
static void close_fail(keyer_writer *w, keyer_status st, const keyer_error *e)
{
    if (!w->close_status) {
        w->close_status = st;
        w->close_err = *e;
    }
}

keyer_status keyer_writer_set_copy_source(keyer_writer *w, keyer_reader *r, keyer_error *err)
{
    if (!w || !r)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_writer_set_copy_source: NULL argument");
    if (!w->src)
        return KEYER_OK; /* copies nothing */
    w->src = r;
    if (w->copies.src) {
        w->copies.src = r;
        kr_reader_attach_consumer(r);
    }
    return KEYER_OK;
}

keyer_status keyer_writer_close(keyer_writer *w, keyer_error *err)
{
    if (!w)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_writer_close: writer is NULL");
    if (w->closed) {
        if (w->close_status && err)
            *err = w->close_err;
        return w->close_status;
    }
    w->closed = 1;
    keyer_error e = {0};
    keyer_status st;
    if (w->failed)
        close_fail(w, w->failed, &w->fail_err);
    /* Flush the encoder, then the packets the reader still holds, then the audio encoders. */
    if (w->enc.ctx && w->header_written) {
        int ret = avcodec_send_frame(w->enc.ctx, NULL);
        if (ret < 0 && ret != AVERROR_EOF) {
            st = kr_av_error(&e, ret, "%s: flushing %s", w->path, w->enc.name);
            close_fail(w, st, &e);
        } else if ((st = drain_video(w, &e))) {
            close_fail(w, st, &e);
        }
    }
    if (w->header_written && (st = kr_copies_write_pending(&w->copies, &e)))
        close_fail(w, st, &e);
    for (int i = 0; w->header_written && i < kr_copies_count(&w->copies); i++)
        if ((st = kr_copies_flush(&w->copies, i, &e)))
            close_fail(w, st, &e);
    if (w->header_written) {
        int ret = av_write_trailer(w->oc);
        if (ret < 0) {
            st = kr_av_error(&e, ret, "%s: cannot write the trailer", w->path);
            close_fail(w, st, &e);
        }
    }
    if (w->pb_opened) {
        if (w->oc->pb && w->oc->pb->error < 0) {
            st = kr_av_error(&e, w->oc->pb->error, "%s: write error", w->path);
            close_fail(w, st, &e);
        }
        int ret = avio_closep(&w->oc->pb);
        w->pb_opened = 0;
        if (ret < 0) {
            st = kr_av_error(&e, ret, "%s: cannot close", w->path);
            close_fail(w, st, &e);
        }
    }
    if (w->close_status && err)
        *err = w->close_err;
    return w->close_status;
}

const char *keyer_writer_codec(const keyer_writer *w) { return w ? w->enc.name : ""; }

int64_t keyer_writer_frames(const keyer_writer *w) { return w ? w->frames : 0; }

void keyer_writer_destroy(keyer_writer **pw)
{
    if (!pw || !*pw)
        return;
    keyer_writer *w = *pw;
    *pw = NULL;
    if (!w->closed) {
        keyer_error e = {0};
        if (keyer_writer_close(w, &e))
            keyer_log(w->logger, KEYER_LOG_ERROR, "%s", e.message);
    }
    if (w->pb_opened)
        avio_closep(&w->oc->pb);
    kr_copies_free(&w->copies);
    kr_encoder_free(&w->enc);
    keyer_encoder_probe_destroy(&w->own_probe);
    av_packet_free(&w->pkt);
    avformat_free_context(w->oc);
    free(w->path);
    kr_av_log_detach(w); /* after every libav context (and its threads) is gone */
    free(w);
}
