/* keyer_writer: libavformat/libavcodec output, NVENC with a logged libx264 fallback, alpha
 * codecs, stream copy (and AAC re-encode) of a reader's audio and subtitles. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/hwcontext.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/io.h"
#include "keyer/log.h"

typedef struct copy_stream {
    int in_index;
    AVStream *ost;
    AVRational in_tb;
    int64_t last_dts;
    /* re-encoding (the container cannot hold the input codec) */
    AVCodecContext *dec, *enc;
    SwrContext *swr;
    AVAudioFifo *fifo;
    AVFrame *in, *out;
    uint8_t **cvt; /* resampler output, grown when a larger frame arrives */
    int cvt_cap;
    int64_t next_pts; /* in enc->time_base; INT64_MIN until the first frame */
} copy_stream;

struct keyer_writer {
    char *path;
    const keyer_logger *logger;
    AVFormatContext *oc;
    int pb_opened, created_file, header_written;
    AVCodecContext *venc;
    AVStream *vst;
    AVFrame *vframe;  /* host frame in the encoder's (software) format */
    AVFrame *hwframe; /* NVENC input */
    AVBufferRef *hw_frames;
    int hw_input;
    int encoder_failed; /* set when the encoder itself (or its CUDA frames) failed to open */
    kr_converter conv;
    keyer_frame *download; /* host copy of a device frame for a CPU encoder */
    AVPacket *pkt, *cpkt;
    AVRational in_tb;      /* the writer's time base */
    AVRational frame_tb;   /* 1/frame_rate */
    int width, height;
    keyer_color_matrix matrix;
    keyer_color_range range;
    int64_t last_pts, frames;
    int pts_warned;
    keyer_reader *src;
    copy_stream *copies;
    int ncopies;
    int *map; /* input stream index -> copies index, -1: not copied */
    int nmap;
    keyer_status failed; /* first error of write(); only close() is accepted after it */
    keyer_error fail_err;
    int closed;
    keyer_status close_status;
    keyer_error close_err;
    char codec_name[64];
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

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && !strncmp(p, word, n))
            return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

/* Encoder name for the container when none is given; NULL when alpha cannot be kept. */
static const char *default_codec(const AVOutputFormat *of, const char *path, int alpha)
{
    const char *m = of->name;
    if (alpha) {
        if (has_word(m, "mov"))
            return "prores_ks";
        if (has_word(m, "webm") || has_word(m, "matroska"))
            return "libvpx-vp9";
        if (has_word(m, "image2") || has_word(m, "image2pipe"))
            return "png";
        if (has_word(m, "nut") || has_word(m, "avi"))
            return "ffv1";
        return NULL;
    }
    if (has_word(m, "webm"))
        return "libvpx-vp9";
    if (has_word(m, "yuv4mpegpipe") || has_word(m, "rawvideo")) {
        const AVCodec *c = avcodec_find_encoder(of->video_codec);
        return c ? c->name : "rawvideo";
    }
    enum AVCodecID id = av_guess_codec(of, NULL, path, NULL, AVMEDIA_TYPE_VIDEO);
    if (id == AV_CODEC_ID_H264 && avcodec_find_encoder_by_name("libx264"))
        return "libx264";
    const AVCodec *c = avcodec_find_encoder(id);
    return c ? c->name : NULL;
}

static int supports_pix_fmt(const AVCodec *c, enum AVPixelFormat f)
{
    if (!c->pix_fmts)
        return 1;
    for (const enum AVPixelFormat *p = c->pix_fmts; *p != AV_PIX_FMT_NONE; p++)
        if (*p == f)
            return 1;
    return 0;
}

static int is_nvenc(const AVCodec *c) { return strstr(c->name, "_nvenc") != NULL; }

/* Pixel format of the encoded stream. */
static keyer_status choose_pix_fmt(keyer_writer *w, const AVCodec *c, const keyer_writer_params *p,
                                   enum AVPixelFormat *out, keyer_error *err)
{
    enum AVPixelFormat f = AV_PIX_FMT_NONE;
    if (p->pixel_format) {
        f = av_get_pix_fmt(p->pixel_format);
        if (f == AV_PIX_FMT_NONE)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: unknown pixel format \"%s\"", w->path, p->pixel_format);
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
                                   ".webm for VP9, or a PNG sequence)", w->path, c->name);
    } else if (!strcmp(c->name, "png")) {
        f = AV_PIX_FMT_RGB24;
    } else if (!strcmp(c->name, "prores_ks")) {
        f = AV_PIX_FMT_YUV422P10LE;
    } else if (is_nvenc(c) || supports_pix_fmt(c, AV_PIX_FMT_YUV420P)) {
        f = AV_PIX_FMT_YUV420P;
    } else {
        f = c->pix_fmts[0];
    }
    if (!supports_pix_fmt(c, f))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: encoder %s does not take pixel format %s", w->path, c->name,
                               av_get_pix_fmt_name(f));
    *out = f;
    return KEYER_OK;
}

static void log_unused_options(keyer_writer *w, const char *what, AVDictionary *d)
{
    const AVDictionaryEntry *e = NULL;
    while ((e = av_dict_get(d, "", e, AV_DICT_IGNORE_SUFFIX)))
        keyer_log(w->logger, KEYER_LOG_WARNING, "%s: %s did not use option %s=%s", w->path, what,
                  e->key, e->value);
}

/* Creates and opens the video encoder @p c. Leaves w->venc NULL on failure. */
static keyer_status open_video_encoder(keyer_writer *w, const AVCodec *c,
                                       const keyer_writer_params *p, int use_preset,
                                       keyer_error *err)
{
    enum AVPixelFormat pix = AV_PIX_FMT_NONE;
    keyer_status st = choose_pix_fmt(w, c, p, &pix, err);
    if (st)
        return st;
    AVDictionary *opts = NULL;
    AVCodecContext *e = avcodec_alloc_context3(c);
    if (!e)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    e->width = w->width;
    e->height = w->height;
    e->time_base = w->in_tb;
    e->framerate = av_inv_q(w->frame_tb);
    e->sample_aspect_ratio = (AVRational){1, 1};
    e->pix_fmt = pix;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(pix);
    if (d && !(d->flags & AV_PIX_FMT_FLAG_RGB)) {
        e->colorspace = kr_av_matrix_to(w->matrix);
        e->color_range = w->range == KEYER_COLOR_RANGE_FULL ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
        if (w->matrix == KEYER_COLOR_MATRIX_BT709) {
            e->color_primaries = AVCOL_PRI_BT709;
            e->color_trc = AVCOL_TRC_BT709;
        } else if (w->matrix == KEYER_COLOR_MATRIX_BT601) {
            e->color_primaries = AVCOL_PRI_SMPTE170M;
            e->color_trc = AVCOL_TRC_SMPTE170M;
        }
    } else {
        e->color_range = AVCOL_RANGE_JPEG;
    }
    if (w->oc->oformat->flags & AVFMT_GLOBALHEADER)
        e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    const char *n = c->name;
    int x26x = !strcmp(n, "libx264") || !strcmp(n, "libx265");
    if (use_preset && p->preset)
        av_dict_set(&opts, !strcmp(n, "libvpx-vp9") ? "deadline" : "preset", p->preset, 0);
    char q[32];
    snprintf(q, sizeof(q), "%d", p->quality);
    if (x26x && p->quality >= 0) {
        av_dict_set(&opts, "crf", q, 0);
    } else if (!strcmp(n, "libvpx-vp9")) {
        e->bit_rate = 0;
        av_dict_set(&opts, "crf", p->quality >= 0 ? q : "32", 0);
        av_dict_set(&opts, "row-mt", "1", 0);
        av_dict_set(&opts, "cpu-used", "5", 0);
    } else if (is_nvenc(c)) {
        av_dict_set(&opts, "rc", "vbr", 0);
        av_dict_set(&opts, "cq", p->quality >= 0 ? q : "23", 0);
        e->bit_rate = 0;
    } else if (!strcmp(n, "prores_ks")) {
        av_dict_set(&opts, "profile", d && (d->flags & AV_PIX_FMT_FLAG_ALPHA) ? "4444" : "hq", 0);
        if (p->quality >= 0) {
            e->flags |= AV_CODEC_FLAG_QSCALE;
            e->global_quality = p->quality * FF_QP2LAMBDA;
        }
    } else if (p->quality >= 0) {
        e->flags |= AV_CODEC_FLAG_QSCALE;
        e->global_quality = p->quality * FF_QP2LAMBDA;
    }
    if (!strcmp(n, "libx265"))
        av_dict_set(&opts, "x265-params", "log-level=warning", 0);
    if (p->codec_options && *p->codec_options &&
        av_dict_parse_string(&opts, p->codec_options, "=", ":", 0) < 0) {
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                             "%s: cannot parse codec options \"%s\" (want key=value:key=value)",
                             w->path, p->codec_options);
        goto fail;
    }
    if (is_nvenc(c) && kr_hwdec_built()) {
        /* Device frames go in directly: a CUDA frames context on the primary context. */
        AVBufferRef *dev = NULL;
        w->encoder_failed = 1; /* until the encoder opens */
        if ((st = kr_hwdec_device_create(0, &dev, err)))
            goto fail;
        w->hw_frames = av_hwframe_ctx_alloc(dev);
        av_buffer_unref(&dev);
        if (!w->hw_frames) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
            goto fail;
        }
        AVHWFramesContext *fc = (AVHWFramesContext *)w->hw_frames->data;
        fc->format = AV_PIX_FMT_CUDA;
        fc->sw_format = AV_PIX_FMT_NV12;
        fc->width = w->width;
        fc->height = w->height;
        int ret = av_hwframe_ctx_init(w->hw_frames);
        if (ret < 0) {
            st = kr_av_error(err, ret, "%s: CUDA frames for %s", w->path, n);
            goto fail;
        }
        e->hw_frames_ctx = av_buffer_ref(w->hw_frames);
        if (!e->hw_frames_ctx) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
            goto fail;
        }
        e->pix_fmt = AV_PIX_FMT_CUDA;
        pix = AV_PIX_FMT_NV12;
        w->hw_input = 1;
    }
    w->encoder_failed = 1;
    int ret = avcodec_open2(e, c, &opts);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot open encoder %s (%s %dx%d)", w->path, n,
                         av_get_pix_fmt_name(pix), w->width, w->height);
        goto fail;
    }
    w->encoder_failed = 0;
    log_unused_options(w, n, opts);
    av_dict_free(&opts);
    w->venc = e;
    w->vframe = av_frame_alloc();
    if (!w->vframe) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
        return st;
    }
    w->vframe->format = pix;
    w->vframe->width = w->width;
    w->vframe->height = w->height;
    ret = av_frame_get_buffer(w->vframe, 0);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: frame buffer", w->path);
    if (w->hw_input && !(w->hwframe = av_frame_alloc()))
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    snprintf(w->codec_name, sizeof(w->codec_name), "%s", n);
    return KEYER_OK;
fail:
    av_dict_free(&opts);
    avcodec_free_context(&e);
    av_buffer_unref(&w->hw_frames);
    w->hw_input = 0;
    return st;
}

/* ---- copied streams --------------------------------------------------------------------- */

static keyer_status setup_transcode(keyer_writer *w, copy_stream *cs, const AVStream *ist,
                                    enum AVCodecID to, keyer_error *err)
{
    const AVCodec *dc = avcodec_find_decoder(ist->codecpar->codec_id);
    const AVCodec *ec = avcodec_find_encoder(to);
    if (!dc || !ec)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: cannot re-encode audio stream %d (%s to %s): %s missing",
                               w->path, ist->index, avcodec_get_name(ist->codecpar->codec_id),
                               avcodec_get_name(to), !dc ? "decoder" : "encoder");
    cs->dec = avcodec_alloc_context3(dc);
    cs->enc = avcodec_alloc_context3(ec);
    cs->in = av_frame_alloc();
    cs->out = av_frame_alloc();
    if (!cs->dec || !cs->enc || !cs->in || !cs->out)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    int ret = avcodec_parameters_to_context(cs->dec, ist->codecpar);
    if (ret >= 0) {
        cs->dec->pkt_timebase = ist->time_base;
        ret = avcodec_open2(cs->dec, dc, NULL);
    }
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio decoder %s", w->path, dc->name);
    AVCodecContext *e = cs->enc;
    int rate = cs->dec->sample_rate > 0 ? cs->dec->sample_rate : 48000;
    if (ec->supported_samplerates) {
        int best = ec->supported_samplerates[0];
        for (const int *r = ec->supported_samplerates; *r; r++)
            if (*r == rate)
                best = rate;
        rate = best;
    }
    e->sample_rate = rate;
    e->sample_fmt = ec->sample_fmts ? ec->sample_fmts[0] : cs->dec->sample_fmt;
    if (cs->dec->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC || cs->dec->ch_layout.nb_channels <= 0)
        av_channel_layout_default(&e->ch_layout,
                                  cs->dec->ch_layout.nb_channels > 0 ? cs->dec->ch_layout.nb_channels : 2);
    else if ((ret = av_channel_layout_copy(&e->ch_layout, &cs->dec->ch_layout)) < 0)
        return kr_av_error(err, ret, "%s: channel layout", w->path);
    e->bit_rate = 64000L * (e->ch_layout.nb_channels > 0 ? e->ch_layout.nb_channels : 2);
    e->time_base = (AVRational){1, rate};
    if (w->oc->oformat->flags & AVFMT_GLOBALHEADER)
        e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    ret = avcodec_open2(e, ec, NULL);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio encoder %s", w->path, ec->name);
    ret = swr_alloc_set_opts2(&cs->swr, &e->ch_layout, e->sample_fmt, e->sample_rate,
                              &cs->dec->ch_layout, cs->dec->sample_fmt, cs->dec->sample_rate, 0,
                              NULL);
    if (ret >= 0)
        ret = swr_init(cs->swr);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio resampler", w->path);
    int fs = e->frame_size > 0 ? e->frame_size : 1024;
    cs->fifo = av_audio_fifo_alloc(e->sample_fmt, e->ch_layout.nb_channels, fs * 4);
    if (!cs->fifo)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    cs->out->format = e->sample_fmt;
    cs->out->sample_rate = e->sample_rate;
    cs->out->nb_samples = fs;
    if ((ret = av_channel_layout_copy(&cs->out->ch_layout, &e->ch_layout)) < 0 ||
        (ret = av_frame_get_buffer(cs->out, 0)) < 0)
        return kr_av_error(err, ret, "%s: audio frame", w->path);
    ret = avcodec_parameters_from_context(cs->ost->codecpar, e);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio parameters", w->path);
    cs->ost->time_base = e->time_base;
    cs->next_pts = INT64_MIN;
    keyer_log(w->logger, KEYER_LOG_INFO,
              "%s: %s cannot hold %s audio (stream %d): re-encoding it to %s", w->path,
              w->oc->oformat->name, avcodec_get_name(ist->codecpar->codec_id), ist->index,
              ec->name);
    return KEYER_OK;
}

static keyer_status setup_copies(keyer_writer *w, keyer_error *err)
{
    AVFormatContext *ic = kr_reader_format_context(w->src);
    int vidx = kr_reader_video_stream(w->src);
    const AVOutputFormat *of = w->oc->oformat;
    w->nmap = (int)ic->nb_streams;
    w->map = malloc(sizeof(int) * (size_t)(w->nmap ? w->nmap : 1));
    w->copies = calloc(ic->nb_streams ? ic->nb_streams : 1, sizeof(copy_stream));
    if (!w->map || !w->copies)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
    for (unsigned i = 0; i < ic->nb_streams; i++) {
        w->map[i] = -1;
        AVStream *ist = ic->streams[i];
        enum AVMediaType type = ist->codecpar->codec_type;
        if ((int)i == vidx || (type != AVMEDIA_TYPE_AUDIO && type != AVMEDIA_TYPE_SUBTITLE))
            continue;
        enum AVCodecID id = ist->codecpar->codec_id;
        int q = avformat_query_codec(of, id, FF_COMPLIANCE_NORMAL);
        enum AVCodecID transcode_to = AV_CODEC_ID_NONE;
        if (type == AVMEDIA_TYPE_SUBTITLE) {
            if (q != 1) {
                keyer_log(w->logger, KEYER_LOG_WARNING,
                          "%s: %s cannot hold %s subtitles: stream %u is not copied", w->path,
                          of->name, avcodec_get_name(id), i);
                continue;
            }
        } else if (of->audio_codec == AV_CODEC_ID_NONE) {
            keyer_log(w->logger, KEYER_LOG_WARNING,
                      "%s: %s takes no audio: audio stream %u is not copied", w->path, of->name, i);
            continue;
        } else if (q == 0) {
            transcode_to = avformat_query_codec(of, AV_CODEC_ID_AAC, FF_COMPLIANCE_NORMAL) == 1 &&
                                   avcodec_find_encoder(AV_CODEC_ID_AAC)
                               ? AV_CODEC_ID_AAC
                               : of->audio_codec;
        }
        copy_stream *cs = &w->copies[w->ncopies];
        cs->in_index = (int)i;
        cs->in_tb = ist->time_base;
        cs->last_dts = INT64_MIN;
        cs->ost = avformat_new_stream(w->oc, NULL);
        if (!cs->ost)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
        w->ncopies++;
        w->map[i] = w->ncopies - 1;
        cs->ost->disposition = ist->disposition;
        av_dict_copy(&cs->ost->metadata, ist->metadata, 0);
        if (transcode_to != AV_CODEC_ID_NONE) {
            keyer_status st = setup_transcode(w, cs, ist, transcode_to, err);
            if (st)
                return st;
        } else {
            int ret = avcodec_parameters_copy(cs->ost->codecpar, ist->codecpar);
            if (ret < 0)
                return kr_av_error(err, ret, "%s: copying stream %u parameters", w->path, i);
            cs->ost->codecpar->codec_tag = 0;
            cs->ost->time_base = ist->time_base;
        }
    }
    /* Chapters and global metadata. */
    av_dict_copy(&w->oc->metadata, ic->metadata, AV_DICT_DONT_OVERWRITE);
    if (ic->nb_chapters > 0 && !has_word(of->name, "image2")) {
        w->oc->chapters = av_calloc(ic->nb_chapters, sizeof(*w->oc->chapters));
        if (!w->oc->chapters)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", w->path);
        for (unsigned i = 0; i < ic->nb_chapters; i++) {
            const AVChapter *in = ic->chapters[i];
            AVChapter *c = av_mallocz(sizeof(*c));
            if (!c)
                return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                       w->path);
            c->id = in->id;
            c->time_base = in->time_base;
            c->start = in->start;
            c->end = in->end;
            av_dict_copy(&c->metadata, in->metadata, 0);
            w->oc->chapters[w->oc->nb_chapters++] = c;
        }
    }
    kr_reader_attach_consumer(w->src);
    return KEYER_OK;
}

static keyer_status mux(keyer_writer *w, AVPacket *pkt, keyer_error *err)
{
    int ret = av_interleaved_write_frame(w->oc, pkt);
    av_packet_unref(pkt);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot write", w->path);
    return KEYER_OK;
}

static keyer_status drain_audio_encoder(keyer_writer *w, copy_stream *cs, keyer_error *err)
{
    for (;;) {
        int ret = avcodec_receive_packet(cs->enc, w->cpkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return KEYER_OK;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio encoder", w->path);
        av_packet_rescale_ts(w->cpkt, cs->enc->time_base, cs->ost->time_base);
        w->cpkt->stream_index = cs->ost->index;
        keyer_status st = mux(w, w->cpkt, err);
        if (st)
            return st;
    }
}

/* Encodes whole encoder frames from the FIFO; with @p flush also the rest. */
static keyer_status encode_fifo(keyer_writer *w, copy_stream *cs, int flush, keyer_error *err)
{
    int fs = cs->out->nb_samples;
    for (;;) {
        int have = av_audio_fifo_size(cs->fifo);
        if (have <= 0 || (have < fs && !flush))
            return KEYER_OK;
        int n = have < fs ? have : fs;
        int ret = av_frame_make_writable(cs->out);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio frame", w->path);
        if (av_audio_fifo_read(cs->fifo, (void **)cs->out->data, n) != n)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: audio FIFO read", w->path);
        if (n < fs && !(cs->enc->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME))
            av_samples_set_silence(cs->out->data, n, fs - n, cs->enc->ch_layout.nb_channels,
                                   cs->enc->sample_fmt);
        else
            cs->out->nb_samples = n;
        cs->out->pts = cs->next_pts;
        cs->next_pts += n;
        ret = avcodec_send_frame(cs->enc, cs->out);
        cs->out->nb_samples = fs;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio encoder", w->path);
        keyer_status st = drain_audio_encoder(w, cs, err);
        if (st)
            return st;
    }
}

/* Decodes, resamples and queues for re-encoding; @p pkt NULL flushes the decoder. */
static keyer_status transcode_packet(keyer_writer *w, copy_stream *cs, AVPacket *pkt,
                                     keyer_error *err)
{
    int ret = avcodec_send_packet(cs->dec, pkt);
    if (pkt)
        av_packet_unref(pkt);
    if (ret < 0 && ret != AVERROR_EOF) {
        keyer_log(w->logger, KEYER_LOG_DEBUG, "%s: audio decoder rejected a packet", w->path);
        return KEYER_OK;
    }
    for (;;) {
        ret = avcodec_receive_frame(cs->dec, cs->in);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            break;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio decoder", w->path);
        if (cs->next_pts == INT64_MIN) {
            int64_t t = cs->in->best_effort_timestamp;
            cs->next_pts = t == AV_NOPTS_VALUE ? 0 : av_rescale_q(t, cs->in_tb, cs->enc->time_base);
        }
        int out_n = swr_get_out_samples(cs->swr, cs->in->nb_samples);
        if (out_n < 0)
            return kr_av_error(err, out_n, "%s: resampler", w->path);
        if (out_n > cs->cvt_cap) {
            if (cs->cvt)
                av_freep(&cs->cvt[0]);
            av_freep(&cs->cvt);
            cs->cvt_cap = 0;
            ret = av_samples_alloc_array_and_samples(&cs->cvt, NULL,
                                                     cs->enc->ch_layout.nb_channels, out_n,
                                                     cs->enc->sample_fmt, 0);
            if (ret < 0)
                return kr_av_error(err, ret, "%s: audio buffer", w->path);
            cs->cvt_cap = out_n;
        }
        int got = swr_convert(cs->swr, cs->cvt, out_n, (const uint8_t **)cs->in->extended_data,
                              cs->in->nb_samples);
        av_frame_unref(cs->in);
        if (got < 0)
            return kr_av_error(err, got, "%s: resampler", w->path);
        if (got > 0 && av_audio_fifo_write(cs->fifo, (void **)cs->cvt, got) != got)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: audio FIFO", w->path);
        keyer_status st = encode_fifo(w, cs, 0, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

/* Writes (or re-encodes) every packet the reader has kept so far. */
static keyer_status copy_pending(keyer_writer *w, keyer_error *err)
{
    if (!w->src)
        return KEYER_OK;
    while (kr_reader_take_packet(w->src, w->cpkt)) {
        AVPacket *pkt = w->cpkt;
        int idx = pkt->stream_index >= 0 && pkt->stream_index < w->nmap ? w->map[pkt->stream_index] : -1;
        if (idx < 0) {
            av_packet_unref(pkt);
            continue;
        }
        copy_stream *cs = &w->copies[idx];
        if (cs->enc) {
            keyer_status st = transcode_packet(w, cs, pkt, err);
            if (st)
                return st;
            continue;
        }
        if (pkt->dts != AV_NOPTS_VALUE) {
            if (cs->last_dts != INT64_MIN && pkt->dts <= cs->last_dts) {
                av_packet_unref(pkt); /* out of order after a seek of the reader */
                continue;
            }
            cs->last_dts = pkt->dts;
        }
        av_packet_rescale_ts(pkt, cs->in_tb, cs->ost->time_base);
        pkt->stream_index = cs->ost->index;
        pkt->pos = -1;
        keyer_status st = mux(w, pkt, err);
        if (st)
            return st;
    }
    return KEYER_OK;
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
    keyer_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    size_t n = strlen(path) + 1;
    w->path = malloc(n);
    w->pkt = av_packet_alloc();
    w->cpkt = av_packet_alloc();
    if (!w->path || !w->pkt || !w->cpkt) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    memcpy(w->path, path, n);
    w->logger = p.logger;
    kr_av_log_attach(w, w->logger); /* FFmpeg's own lines go to this logger (see av.h) */
    w->width = p.width;
    w->height = p.height;
    w->frame_tb = (AVRational){p.frame_rate.den, p.frame_rate.num};
    w->in_tb = p.time_base.num > 0 && p.time_base.den > 0
                   ? (AVRational){p.time_base.num, p.time_base.den}
                   : w->frame_tb;
    w->matrix = p.matrix != KEYER_COLOR_MATRIX_UNSPECIFIED
                    ? p.matrix
                    : (p.height >= 720 ? KEYER_COLOR_MATRIX_BT709 : KEYER_COLOR_MATRIX_BT601);
    w->range = p.range == KEYER_COLOR_RANGE_FULL ? KEYER_COLOR_RANGE_FULL : KEYER_COLOR_RANGE_LIMITED;
    w->last_pts = INT64_MIN;
    w->src = p.copy_from;

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
    const AVOutputFormat *of = w->oc->oformat;
    const char *cname = p.codec ? p.codec : default_codec(of, path, p.alpha);
    if (!cname) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             p.alpha ? "%s: %s cannot hold video with alpha (use .mov for "
                                       "ProRes 4444, .webm for VP9, or a PNG sequence)"
                                     : "%s: no video encoder for %s",
                             path, of->name);
        goto fail;
    }
    const AVCodec *codec = avcodec_find_encoder_by_name(cname);
    if (!codec || codec->type != AVMEDIA_TYPE_VIDEO) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "%s: libavcodec has no video encoder \"%s\"", path, cname);
        goto fail;
    }
    if (avformat_query_codec(of, codec->id, FF_COMPLIANCE_NORMAL) == 0) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: %s cannot hold %s video",
                             path, of->name, avcodec_get_name(codec->id));
        goto fail;
    }
    keyer_error nverr = {0};
    st = open_video_encoder(w, codec, &p, 1, is_nvenc(codec) ? &nverr : err);
    if (st && is_nvenc(codec) && w->encoder_failed) {
        const char *alt = codec->id == AV_CODEC_ID_HEVC && avcodec_find_encoder_by_name("libx265")
                              ? "libx265"
                              : "libx264";
        keyer_log(w->logger, KEYER_LOG_WARNING, "%s is unavailable (%s); encoding with %s instead",
                  codec->name, nverr.message, alt);
        codec = avcodec_find_encoder_by_name(alt);
        if (!codec) {
            st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                 "%s: %s failed and %s is missing", path, cname, alt);
            goto fail;
        }
        av_frame_free(&w->vframe);
        av_frame_free(&w->hwframe);
        /* NVENC presets (p1..p7) mean nothing to x264/x265. */
        int keep_preset = p.preset && !(p.preset[0] == 'p' && p.preset[1] >= '1' && p.preset[1] <= '7');
        st = open_video_encoder(w, codec, &p, keep_preset, err);
    } else if (st && err && is_nvenc(codec)) {
        *err = nverr;
    }
    if (st)
        goto fail;
    w->vst = avformat_new_stream(w->oc, NULL);
    if (!w->vst) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    ret = avcodec_parameters_from_context(w->vst->codecpar, w->venc);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: stream parameters", path);
        goto fail;
    }
    w->vst->time_base = w->venc->time_base;
    w->vst->avg_frame_rate = w->venc->framerate;
    w->vst->r_frame_rate = w->venc->framerate;
    if (p.rotation) {
        int32_t *m = (int32_t *)av_stream_new_side_data(w->vst, AV_PKT_DATA_DISPLAYMATRIX,
                                                        9 * sizeof(int32_t));
        if (!m) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            goto fail;
        }
        /* av_display_rotation_set takes the clockwise angle (its _get returns the opposite). */
        av_display_rotation_set(m, (double)p.rotation);
    }
    if (w->src && (st = setup_copies(w, err)))
        goto fail;

    if (!(of->flags & AVFMT_NOFILE)) {
        ret = avio_open2(&w->oc->pb, lavf_path, AVIO_FLAG_WRITE, NULL, NULL);
        if (ret < 0) {
            st = kr_av_error(err, ret, "%s: cannot create the file", path);
            goto fail;
        }
        w->pb_opened = 1;
        w->created_file = !is_stdout && !strstr(path, "://");
    }
    AVDictionary *mopts = NULL;
    int mov = has_word(of->name, "mp4") || has_word(of->name, "mov");
    if (mov && p.fragmented && !is_stdout) {
        /* delay_moov: the moov (with edit lists for B-frame and audio priming delays) is
         * written with the first fragment, so timestamps come back exactly. */
        av_dict_set(&mopts, "movflags", "frag_keyframe+empty_moov+delay_moov+default_base_moof", 0);
        av_dict_set(&mopts, "frag_duration", "1000000", 0);
    } else if (mov && is_stdout) {
        av_dict_set(&mopts, "movflags", "frag_keyframe+empty_moov+default_base_moof", 0);
    }
    ret = avformat_write_header(w->oc, &mopts);
    av_dict_free(&mopts);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot write the %s header", path, of->name);
        goto fail;
    }
    w->header_written = 1;
    if (keyer_frame_create(&w->download, err)) {
        st = KEYER_STATUS_OUT_OF_MEMORY;
        goto fail;
    }
    keyer_log(w->logger, KEYER_LOG_INFO, "%s: %s, %s %dx%d %s", path, of->name, w->codec_name,
              w->width, w->height, av_get_pix_fmt_name(w->venc->pix_fmt));
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
        int ret = avcodec_receive_packet(w->venc, w->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return KEYER_OK;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: %s encoder", w->path, w->codec_name);
        if (w->pkt->duration <= 0) /* one frame; lets muxers know the last frame's length */
            w->pkt->duration = av_rescale_q(1, w->frame_tb, w->venc->time_base);
        av_packet_rescale_ts(w->pkt, w->venc->time_base, w->vst->time_base);
        w->pkt->stream_index = w->vst->index;
        keyer_status st = mux(w, w->pkt, err);
        if (st)
            return st;
    }
}

/* Copies device planes into host frame w->download (CUDA builds). */
static keyer_status download_frame(keyer_writer *w, const keyer_frame *f, keyer_error *err)
{
#ifdef KEYER_HAVE_CUDA
    if (w->download->format != f->format || w->download->width != f->width ||
        w->download->height != f->height) {
        keyer_status st = keyer_frame_alloc(w->download, f->format, f->width, f->height, NULL, err);
        if (st)
            return keyer_error_prefix(err, "%s: ", w->path);
    }
    for (int p = 0; p < keyer_pixel_format_planes(f->format); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &ph, &bpe, NULL);
        keyer_status st = kr_cuda_copy_2d(w->download->data[p], (size_t)w->download->stride[p],
                                          f->data[p], (size_t)f->stride[p],
                                          (size_t)pw * (size_t)bpe, (size_t)ph, err);
        if (st)
            return keyer_error_prefix(err, "%s: downloading a device frame: ", w->path);
    }
    w->download->matrix = f->matrix;
    w->download->range = f->range;
    return KEYER_OK;
#else
    (void)f;
    return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                           "%s: a CUDA frame was given to a keyer built without CUDA", w->path);
#endif
}

/* Fills the encoder's input frame from @p f. */
static keyer_status fill_input(keyer_writer *w, const keyer_frame *f, AVFrame **enc_in,
                               keyer_error *err)
{
    keyer_status st;
#ifdef KEYER_HAVE_CUDA
    if (w->hw_input && f->memory == KEYER_MEMORY_CUDA && f->format == KEYER_PIXEL_FORMAT_NV12) {
        av_frame_unref(w->hwframe);
        int ret = av_hwframe_get_buffer(w->hw_frames, w->hwframe, 0);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: NVENC input frame", w->path);
        for (int p = 0; p < 2; p++) {
            st = kr_cuda_copy_2d(w->hwframe->data[p], (size_t)w->hwframe->linesize[p], f->data[p],
                                 (size_t)f->stride[p], (size_t)w->width,
                                 (size_t)(p ? (w->height + 1) / 2 : w->height), err);
            if (st)
                return keyer_error_prefix(err, "%s: ", w->path);
        }
        *enc_in = w->hwframe;
        return KEYER_OK;
    }
#endif
    if (f->memory == KEYER_MEMORY_CUDA) {
        if ((st = download_frame(w, f, err)))
            return st;
        f = w->download;
    }
    int ret = av_frame_make_writable(w->vframe);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: encoder frame", w->path);
    kr_image src, dst;
    kr_image_from_frame(&src, f);
    kr_image_from_avframe(&dst, w->vframe);
    if (src.colorspace == AVCOL_SPC_UNSPECIFIED)
        src.colorspace = kr_av_matrix_to(w->matrix);
    dst.colorspace = w->venc->colorspace != AVCOL_SPC_UNSPECIFIED ? w->venc->colorspace
                                                                  : kr_av_matrix_to(w->matrix);
    dst.range = w->venc->color_range;
    if ((st = kr_convert(&w->conv, &src, &dst, err)))
        return keyer_error_prefix(err, "%s: ", w->path);
    if (w->hw_input) {
        av_frame_unref(w->hwframe);
        ret = av_hwframe_get_buffer(w->hw_frames, w->hwframe, 0);
        if (ret >= 0)
            ret = av_hwframe_transfer_data(w->hwframe, w->vframe, 0);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: uploading to NVENC", w->path);
        *enc_in = w->hwframe;
        return KEYER_OK;
    }
    *enc_in = w->vframe;
    return KEYER_OK;
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
    int64_t step = av_rescale_q(1, w->frame_tb, w->venc->time_base);
    if (step < 1)
        step = 1;
    int64_t pts;
    if (f->pts != INT64_MIN) {
        AVRational tb = f->time_base.num > 0 && f->time_base.den > 0
                            ? (AVRational){f->time_base.num, f->time_base.den}
                            : w->in_tb;
        pts = av_rescale_q(f->pts, tb, w->venc->time_base);
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
    if ((st = fill_input(w, f, &in, err)))
        goto fail;
    in->pts = pts;
    in->pict_type = AV_PICTURE_TYPE_NONE;
    in->color_range = w->venc->color_range;
    in->colorspace = w->venc->colorspace;
    int ret = avcodec_send_frame(w->venc, in);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: %s encoder", w->path, w->codec_name);
        goto fail;
    }
    w->last_pts = pts;
    w->frames++;
    if ((st = drain_video(w, err)))
        goto fail;
    if ((st = copy_pending(w, err)))
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
    if (w->venc && w->header_written) {
        int ret = avcodec_send_frame(w->venc, NULL);
        if (ret < 0 && ret != AVERROR_EOF) {
            st = kr_av_error(&e, ret, "%s: flushing %s", w->path, w->codec_name);
            close_fail(w, st, &e);
        } else if ((st = drain_video(w, &e))) {
            close_fail(w, st, &e);
        }
    }
    if (w->header_written && (st = copy_pending(w, &e)))
        close_fail(w, st, &e);
    for (int i = 0; w->header_written && i < w->ncopies; i++) {
        copy_stream *cs = &w->copies[i];
        if (!cs->enc || cs->next_pts == INT64_MIN)
            continue;
        if ((st = transcode_packet(w, cs, NULL, &e)) || (st = encode_fifo(w, cs, 1, &e))) {
            close_fail(w, st, &e);
            continue;
        }
        avcodec_send_frame(cs->enc, NULL);
        if ((st = drain_audio_encoder(w, cs, &e)))
            close_fail(w, st, &e);
    }
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

const char *keyer_writer_codec(const keyer_writer *w) { return w ? w->codec_name : ""; }

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
    for (int i = 0; w->copies && i < w->ncopies; i++) {
        copy_stream *cs = &w->copies[i];
        avcodec_free_context(&cs->dec);
        avcodec_free_context(&cs->enc);
        swr_free(&cs->swr);
        if (cs->fifo)
            av_audio_fifo_free(cs->fifo);
        av_frame_free(&cs->in);
        av_frame_free(&cs->out);
        if (cs->cvt)
            av_freep(&cs->cvt[0]);
        av_freep(&cs->cvt);
    }
    free(w->copies);
    free(w->map);
    avcodec_free_context(&w->venc);
    av_frame_free(&w->vframe);
    av_frame_free(&w->hwframe);
    av_buffer_unref(&w->hw_frames);
    kr_convert_free(&w->conv);
    keyer_frame_destroy(&w->download);
    av_packet_free(&w->pkt);
    av_packet_free(&w->cpkt);
    avformat_free_context(w->oc);
    free(w->path);
    kr_av_log_detach(w); /* after every libav context (and its threads) is gone */
    free(w);
}
