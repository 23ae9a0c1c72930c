/* keyer_reader: libavformat/libavcodec input with NVDEC device frames, split decode, and a
 * queue of audio/subtitle packets for a writer that copies them. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/buffer.h>
#include <libavutil/display.h>
#include <libavutil/hwcontext.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/io.h"
#include "keyer/log.h"

/* Packets kept for a writer before one attaches; past this they are dropped (logged). */
#define KEEP_LIMIT_BYTES (64u << 20)
/* Seeking retries further back when the keyframe found starts after the target. */
#define SEEK_TRIES 8

typedef struct pkt_queue {
    pthread_mutex_t lock;
    AVPacket **slots; /* ring; slots are allocated once and reused */
    int cap, head, count;
    size_t bytes;
    int consumer;     /* a writer takes packets */
    int dropping;     /* over the limit without a consumer (logged once) */
} pkt_queue;

struct keyer_reader {
    char *url;
    const keyer_logger *logger;
    keyer_pixel_format want; /* NONE: native */
    int keep_streams;
    atomic_int interrupt;
    kr_source main;
    kr_split *split;
    kr_source_opts opts; /* for split re-creation on seek */
    char *input_format, *input_options;
    int segments, segment_queue;
    int min_chunks; /* a split needs this many chunks (segments_auto: 2 per session) */
    int auto_split; /* segments_auto: chunks that keep their decoder, as long as the queue holds */
    int64_t split_pictures; /* pictures decoded by the split workers before a seek restarted them */
    AVBufferRef *hw_device;
    AVFrame *pic;       /* decoder output */
    AVFrame *sw;        /* download target for device frames converted to host formats */
    keyer_frame *ready; /* a frame decoded ahead (first frame at open, target after seek) */
    int ended;
    kr_converter conv;
    AVBufferPool *pool;
    int pool_size;
    keyer_video_info info;
    keyer_reader_stats stats;
    int64_t last_pts, last_duration;
    int64_t out_of_order; /* frames dropped because their pts went backwards */
    pkt_queue q;
    int input_done;
    int split_audio_eof;
    int64_t audio_pump_limit; /* split mode: demux audio up to this time (AV_TIME_BASE units) */
    int cuda_device;
    int network; /* avformat_network_init() was called */
    kr_live live; /* reconnection; live.tb is the time base of the frames returned */
};

/* ---- names and defaults ---------------------------------------------------------------- */

static const char *const device_names[] = {"auto", "cpu", "cuda"};

const char *keyer_decode_device_name(keyer_decode_device device)
{
    if ((unsigned)device < sizeof(device_names) / sizeof(device_names[0]))
        return device_names[device];
    return "unknown";
}

keyer_status keyer_decode_device_from_name(const char *name, keyer_decode_device *out,
                                           keyer_error *err)
{
    for (unsigned i = 0; name && i < sizeof(device_names) / sizeof(device_names[0]); i++)
        if (!strcmp(name, device_names[i])) {
            if (out)
                *out = (keyer_decode_device)i;
            return KEYER_OK;
        }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "unknown decode device \"%s\" (auto, cpu, cuda)", name ? name : "");
}

keyer_reader_params keyer_reader_params_defaults(void)
{
    keyer_reader_params p;
    memset(&p, 0, sizeof(p));
    p.device = KEYER_DECODE_DEVICE_AUTO;
    p.format = KEYER_PIXEL_FORMAT_NONE;
    p.keep_streams = 1;
    p.reconnect = KEYER_RECONNECT_AUTO;
    p.reconnect_max = 30.0f;
    p.timeout = 10.0f;
    return p;
}

/* ---- kept packets ---------------------------------------------------------------------- */

static void queue_drop_all(pkt_queue *q)
{
    for (int i = 0; i < q->count; i++)
        av_packet_unref(q->slots[(q->head + i) % q->cap]);
    q->head = q->count = 0;
    q->bytes = 0;
}

static void queue_free(pkt_queue *q)
{
    for (int i = 0; i < q->cap; i++)
        av_packet_free(&q->slots[i]);
    free(q->slots);
    q->slots = NULL;
    q->cap = q->count = q->head = 0;
}

/* Takes @p pkt's reference (leaves it blank) or drops it. Called from the demuxing thread. */
static void keep_packet(void *opaque, AVPacket *pkt)
{
    keyer_reader *r = opaque;
    pkt_queue *q = &r->q;
    if (!r->keep_streams)
        return;
    const AVStream *st = r->main.fc->streams[pkt->stream_index];
    enum AVMediaType type = st->codecpar->codec_type;
    if (type != AVMEDIA_TYPE_AUDIO && type != AVMEDIA_TYPE_SUBTITLE)
        return;
    if (!kr_live_shift_packet(&r->live, pkt, st->time_base)) /* after a reconnection */
        return;
    pthread_mutex_lock(&q->lock);
    if (!q->consumer && q->bytes + (size_t)pkt->size > KEEP_LIMIT_BYTES) {
        if (!q->dropping)
            keyer_log(r->logger, KEYER_LOG_WARNING,
                      "%s: %u MiB of audio/subtitle packets kept without a writer taking them: "
                      "dropping further ones", r->url, KEEP_LIMIT_BYTES >> 20);
        q->dropping = 1;
        pthread_mutex_unlock(&q->lock);
        return;
    }
    if (q->count == q->cap) { /* grow the ring, keeping order */
        int cap = q->cap ? q->cap * 2 : 64;
        AVPacket **slots = calloc((size_t)cap, sizeof(*slots));
        if (!slots) {
            pthread_mutex_unlock(&q->lock);
            keyer_log(r->logger, KEYER_LOG_ERROR, "%s: out of memory keeping audio packets",
                      r->url);
            return;
        }
        for (int i = 0; i < q->count; i++)
            slots[i] = q->slots[(q->head + i) % q->cap];
        free(q->slots);
        q->slots = slots;
        q->head = 0;
        q->cap = cap;
    }
    int tail = (q->head + q->count) % q->cap;
    if (!q->slots[tail])
        q->slots[tail] = av_packet_alloc();
    if (!q->slots[tail]) {
        pthread_mutex_unlock(&q->lock);
        keyer_log(r->logger, KEYER_LOG_ERROR, "%s: out of memory keeping audio packets", r->url);
        return;
    }
    av_packet_move_ref(q->slots[tail], pkt);
    q->bytes += (size_t)q->slots[tail]->size;
    q->count++;
    pthread_mutex_unlock(&q->lock);
}

int kr_reader_take_packet(keyer_reader *r, AVPacket *out)
{
    pkt_queue *q = &r->q;
    pthread_mutex_lock(&q->lock);
    int moved = 0;
    if (q->count > 0) {
        AVPacket *p = q->slots[q->head];
        q->bytes -= (size_t)p->size;
        av_packet_move_ref(out, p);
        q->head = (q->head + 1) % q->cap;
        q->count--;
        r->stats.copied_packets++;
        moved = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return moved;
}

void kr_reader_attach_consumer(keyer_reader *r)
{
    pthread_mutex_lock(&r->q.lock);
    r->q.consumer = 1;
    pthread_mutex_unlock(&r->q.lock);
}

int kr_reader_input_done(keyer_reader *r)
{
    pthread_mutex_lock(&r->q.lock);
    int done = r->input_done;
    pthread_mutex_unlock(&r->q.lock);
    return done;
}

static void set_input_done(keyer_reader *r)
{
    pthread_mutex_lock(&r->q.lock);
    r->input_done = 1;
    pthread_mutex_unlock(&r->q.lock);
}

AVFormatContext *kr_reader_format_context(keyer_reader *r) { return r->main.fc; }
int kr_reader_video_stream(const keyer_reader *r) { return r->main.stream; }

/* Split mode: the main demuxer reads only the kept streams (video is discarded); pump it
 * until its packets pass @p until (AV_TIME_BASE units) or it ends. */
static void pump_split_audio(keyer_reader *r, int64_t until)
{
    if (r->split_audio_eof || !r->keep_streams)
        return;
    AVPacket *pkt = r->main.pkt;
    while (r->audio_pump_limit < until) {
        int ret = av_read_frame(r->main.fc, pkt);
        if (ret < 0) {
            if (ret == AVERROR(EAGAIN))
                continue;
            r->split_audio_eof = 1;
            set_input_done(r);
            return;
        }
        AVStream *st = r->main.fc->streams[pkt->stream_index];
        int64_t t = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
        if (t != AV_NOPTS_VALUE)
            r->audio_pump_limit = av_rescale_q(t, st->time_base, AV_TIME_BASE_Q);
        if (pkt->stream_index != r->main.stream)
            keep_packet(r, pkt);
        av_packet_unref(pkt);
    }
}

/* ---- frames ---------------------------------------------------------------------------- */

static void free_avframe(void *opaque, void *data)
{
    (void)data;
    AVFrame *f = opaque;
    av_frame_free(&f);
}

static void free_avbuffer(void *opaque, void *data)
{
    (void)data;
    AVBufferRef *b = opaque;
    av_buffer_unref(&b);
}

/* keyer format a host libav frame is delivered in when the caller wants "native". */
static keyer_pixel_format native_host_format(enum AVPixelFormat f)
{
    keyer_pixel_format k = kr_av_keyer_format(f);
    if (k != KEYER_PIXEL_FORMAT_NONE && k != KEYER_PIXEL_FORMAT_GRAYF32)
        return k;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f);
    if (!d)
        return KEYER_PIXEL_FORMAT_YUV420P;
    if (d->flags & AV_PIX_FMT_FLAG_ALPHA)
        return KEYER_PIXEL_FORMAT_RGBA;
    if (d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL))
        return KEYER_PIXEL_FORMAT_RGB24;
    if (d->nb_components == 1)
        return KEYER_PIXEL_FORMAT_GRAY8;
    return d->comp[0].depth > 8 ? KEYER_PIXEL_FORMAT_P010 : KEYER_PIXEL_FORMAT_YUV420P;
}

/* Device layouts handed out without a copy: NV12, and P010/P016 (16-bit, MSB-aligned). */
static keyer_pixel_format device_format(enum AVPixelFormat sw)
{
    if (sw == AV_PIX_FMT_NV12)
        return KEYER_PIXEL_FORMAT_NV12;
    if (sw == AV_PIX_FMT_P010LE || sw == AV_PIX_FMT_P016LE)
        return KEYER_PIXEL_FORMAT_P010;
    return KEYER_PIXEL_FORMAT_NONE;
}

/* Fills timing, colour and flags of @p out from decoded @p pic. */
static void set_metadata(keyer_reader *r, const AVFrame *pic, keyer_frame *out)
{
    AVStream *st = r->main.fc->streams[r->main.stream];
    int64_t pts = pic->best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE)
        pts = pic->pts;
    int64_t dur = pic->pkt_duration;
    if (dur <= 0 && st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0)
        dur = av_rescale_q(1, av_inv_q(st->avg_frame_rate), r->live.tb);
    if (pts == AV_NOPTS_VALUE) /* no timestamps in the input: continue from the last frame */
        pts = r->last_pts == INT64_MIN ? 0 : r->last_pts + (r->last_duration > 0 ? r->last_duration : 1);
    r->last_pts = pts;
    r->last_duration = dur;
    out->pts = pts;
    out->duration = dur > 0 ? dur : 0;
    out->time_base = (keyer_rational){r->live.tb.num, r->live.tb.den};
    enum AVColorRange range = pic->color_range;
    if (pic->format == AV_PIX_FMT_YUVJ420P || pic->format == AV_PIX_FMT_YUVJ422P ||
        pic->format == AV_PIX_FMT_YUVJ444P)
        range = AVCOL_RANGE_JPEG;
    if (out->format == KEYER_PIXEL_FORMAT_RGB24 || out->format == KEYER_PIXEL_FORMAT_RGBA) {
        out->matrix = KEYER_COLOR_MATRIX_UNSPECIFIED;
        out->range = KEYER_COLOR_RANGE_FULL;
    } else if (out->format == KEYER_PIXEL_FORMAT_GRAY8) {
        out->matrix = KEYER_COLOR_MATRIX_UNSPECIFIED;
        out->range = kr_av_range_from(range);
    } else {
        out->matrix = kr_av_matrix_from(pic->colorspace);
        out->range = kr_av_range_from(range);
    }
    out->rotation = r->info.rotation;
    out->flags = 0;
    if (pic->key_frame)
        out->flags |= KEYER_FRAME_FLAG_KEY;
    if ((pic->flags & AV_FRAME_FLAG_CORRUPT) || pic->decode_error_flags)
        out->flags |= KEYER_FRAME_FLAG_CORRUPT;
}

/* Hands @p pic's planes to @p out without copying; @p pic is left blank. */
static keyer_status wrap_avframe(keyer_reader *r, AVFrame *pic, keyer_pixel_format fmt,
                                 keyer_memory_type memory, keyer_frame *out, keyer_error *err)
{
    AVFrame *ref = av_frame_alloc();
    if (!ref)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", r->url);
    av_frame_move_ref(ref, pic);
    size_t size = ref->buf[0] ? ref->buf[0]->size : 1;
    keyer_buffer *buf = NULL;
    keyer_status st = keyer_buffer_wrap(ref->data[0], size, memory, free_avframe, ref, &buf, err);
    if (st) {
        av_frame_free(&ref);
        return keyer_error_prefix(err, "%s: ", r->url);
    }
    out->format = fmt;
    out->width = ref->width;
    out->height = ref->height;
    out->memory = memory;
    out->device = memory == KEYER_MEMORY_CUDA ? r->main.hw.ordinal : 0;
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        out->data[p] = ref->data[p];
        out->stride[p] = ref->linesize[p];
    }
    out->buf[0] = buf;
    set_metadata(r, ref, out);
    return KEYER_OK;
}

/* Plane layout of a converted frame: rows aligned to KEYER_ALIGNMENT, one buffer. */
static int frame_layout(keyer_pixel_format fmt, int w, int h, size_t offsets[4],
                        ptrdiff_t strides[4])
{
    size_t total = 0;
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(fmt, w, h, p, &pw, &ph, &bpe, NULL))
            return -1;
        size_t row = ((size_t)pw * (size_t)bpe + KEYER_ALIGNMENT - 1) & ~(size_t)(KEYER_ALIGNMENT - 1);
        offsets[p] = total;
        strides[p] = (ptrdiff_t)row;
        total += row * (size_t)ph;
    }
    return total > INT_MAX - KEYER_ALIGNMENT ? -1 : (int)total;
}

/* Converts host @p pic into a pooled buffer of @p fmt. */
static keyer_status convert_avframe(keyer_reader *r, const AVFrame *pic, keyer_pixel_format fmt,
                                    keyer_frame *out, keyer_error *err)
{
    size_t offsets[4] = {0};
    ptrdiff_t strides[4] = {0};
    int total = frame_layout(fmt, pic->width, pic->height, offsets, strides);
    if (total <= 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: frame size %dx%d is invalid",
                               r->url, pic->width, pic->height);
    if (!r->pool || r->pool_size != total + KEYER_ALIGNMENT) {
        av_buffer_pool_uninit(&r->pool); /* buffers still out stay valid until returned */
        r->pool_size = total + KEYER_ALIGNMENT;
        r->pool = av_buffer_pool_init((size_t)r->pool_size, NULL);
        if (!r->pool)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", r->url);
    }
    AVBufferRef *b = av_buffer_pool_get(r->pool);
    if (!b)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", r->url);
    uint8_t *base = (uint8_t *)(((uintptr_t)b->data + KEYER_ALIGNMENT - 1) &
                                ~(uintptr_t)(KEYER_ALIGNMENT - 1));
    keyer_buffer *kb = NULL;
    keyer_status st = keyer_buffer_wrap(base, (size_t)total, KEYER_MEMORY_HOST, free_avbuffer, b,
                                        &kb, err);
    if (st) {
        av_buffer_unref(&b);
        return keyer_error_prefix(err, "%s: ", r->url);
    }
    out->format = fmt;
    out->width = pic->width;
    out->height = pic->height;
    out->memory = KEYER_MEMORY_HOST;
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        out->data[p] = base + offsets[p];
        out->stride[p] = strides[p];
    }
    out->buf[0] = kb;
    set_metadata(r, pic, out);
    kr_image src, dst;
    kr_image_from_avframe(&src, pic);
    kr_image_from_frame(&dst, out);
    /* YUV outputs keep the stream's matrix and range; RGB/gray are full range. */
    dst.colorspace = src.colorspace;
    if (fmt == KEYER_PIXEL_FORMAT_NV12 || fmt == KEYER_PIXEL_FORMAT_YUV420P ||
        fmt == KEYER_PIXEL_FORMAT_P010)
        dst.range = src.range;
    else
        dst.range = AVCOL_RANGE_JPEG;
    if (fmt == KEYER_PIXEL_FORMAT_GRAY8)
        out->range = KEYER_COLOR_RANGE_FULL;
    st = kr_convert(&r->conv, &src, &dst, err);
    if (st) {
        keyer_frame_unref(out);
        return keyer_error_prefix(err, "%s: ", r->url);
    }
    return KEYER_OK;
}

/* Turns decoded @p pic into @p out per the requested format. */
static keyer_status deliver(keyer_reader *r, AVFrame *pic, keyer_frame *out, keyer_error *err)
{
    keyer_frame_unref(out);
    if (pic->width <= 0 || pic->height <= 0 || pic->width > 16384 || pic->height > 16384)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: decoded frame size %dx%d",
                               r->url, pic->width, pic->height);
    AVFrame *host = pic;
    if (pic->format == AV_PIX_FMT_CUDA) {
        const AVHWFramesContext *fc = (const AVHWFramesContext *)pic->hw_frames_ctx->data;
        keyer_pixel_format dev = device_format(fc->sw_format);
        if (r->want == KEYER_PIXEL_FORMAT_NONE && dev != KEYER_PIXEL_FORMAT_NONE)
            return wrap_avframe(r, pic, dev, KEYER_MEMORY_CUDA, out, err);
        av_frame_unref(r->sw);
        int ret = av_hwframe_transfer_data(r->sw, pic, 0);
        if (ret >= 0)
            ret = av_frame_copy_props(r->sw, pic);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: cannot download an NVDEC frame", r->url);
        host = r->sw;
    }
    keyer_pixel_format fmt = r->want;
    if (fmt == KEYER_PIXEL_FORMAT_NONE) {
        fmt = native_host_format((enum AVPixelFormat)host->format);
        if (kr_av_keyer_format((enum AVPixelFormat)host->format) == fmt && host->buf[0])
            return wrap_avframe(r, host, fmt, KEYER_MEMORY_HOST, out, err);
    }
    keyer_status st = convert_avframe(r, host, fmt, out, err);
    if (host == r->sw)
        av_frame_unref(r->sw);
    return st;
}

/* A reconnected source: its sink and device again, and its streams checked. */
static void reattach(keyer_reader *r)
{
    r->main.hw.ordinal = r->cuda_device;
    r->main.sink = keep_packet;
    r->main.sink_opaque = r;
    if (r->keep_streams && !kr_live_same_layout(&r->live, r->main.fc)) {
        keyer_log(r->logger, KEYER_LOG_WARNING, "%s: the reconnected input has other streams "
                  "(%u, was %u): its audio and subtitles are not kept", r->url,
                  r->main.fc->nb_streams, r->live.layout_n);
        r->keep_streams = 0;
    }
    pthread_mutex_lock(&r->q.lock);
    r->stats.reconnects++;
    pthread_mutex_unlock(&r->q.lock);
}

/* Maps a frame of a live source; counts and logs the gap before the first of a connection. */
static void map_live(keyer_reader *r, AVFrame *pic)
{
    int64_t missed = 0;
    double gap = 0;
    AVRational fr = {r->info.frame_rate.num, r->info.frame_rate.den};
    if (!kr_live_map(&r->live, pic, r->last_pts, r->last_duration, fr, &missed, &gap))
        return;
    pthread_mutex_lock(&r->q.lock);
    r->stats.missed_frames += missed;
    r->stats.disconnected_seconds += gap;
    pthread_mutex_unlock(&r->q.lock);
    keyer_log(r->logger, KEYER_LOG_WARNING, "%s: frames resume after a gap of %.2f s (%lld "
              "frames missed)", r->url, gap, (long long)missed);
}

/* Next decoded AVFrame from the source or the split workers; frames presented before the
 * last one (a damaged stream confusing the decoder's reordering) are dropped and counted. */
static keyer_status next_avframe_raw(keyer_reader *r, AVFrame *pic, keyer_error *err);

static keyer_status next_avframe(keyer_reader *r, AVFrame *pic, keyer_error *err)
{
    for (;;) {
        keyer_status st = next_avframe_raw(r, pic, err);
        if (st)
            return st;
        int64_t t = pic->best_effort_timestamp != AV_NOPTS_VALUE ? pic->best_effort_timestamp
                                                                 : pic->pts;
        if (t == AV_NOPTS_VALUE || r->last_pts == INT64_MIN || t > r->last_pts)
            return KEYER_OK;
        r->out_of_order++;
        keyer_log(r->logger, KEYER_LOG_DEBUG, "%s: dropped a frame at pts %lld after %lld",
                  r->url, (long long)t, (long long)r->last_pts);
    }
}

static keyer_status next_avframe_raw(keyer_reader *r, AVFrame *pic, keyer_error *err)
{
    keyer_status st;
    if (r->split) {
        st = kr_split_receive(r->split, pic, err);
        if (st == KEYER_OK) {
            AVStream *vs = r->main.fc->streams[r->main.stream];
            int64_t t = pic->best_effort_timestamp != AV_NOPTS_VALUE ? pic->best_effort_timestamp
                                                                     : pic->pts;
            if (t != AV_NOPTS_VALUE)
                pump_split_audio(r, av_rescale_q(t, vs->time_base, AV_TIME_BASE_Q) + AV_TIME_BASE);
        } else if (st == KEYER_STATUS_END) {
            pump_split_audio(r, INT64_MAX);
        }
    } else {
        st = kr_source_receive(&r->main, pic, err);
        if (r->main.demux_eof && !r->live.on)
            set_input_done(r);
        if (st == KEYER_OK && (r->live.remapped || r->live.resync))
            map_live(r, pic);
    }
    return st;
}

static void update_counters(keyer_reader *r)
{
    if (r->split) {
        int trunc = 0, active = 0, fellback = 0;
        kr_split_counters(r->split, &r->stats.dropped_packets, &r->stats.corrupt_packets, &trunc,
                          &active, &fellback, &r->stats.decoder_setups,
                          &r->stats.decoded_pictures);
        r->stats.decoded_pictures += r->split_pictures + r->main.pictures_sent;
        r->stats.truncated = trunc;
        r->stats.dropped_packets += r->out_of_order;
        r->stats.hw_fallback = fellback || r->stats.hw_fallback;
    } else {
        r->stats.dropped_packets = r->main.dropped_packets;
        r->stats.corrupt_packets = r->main.corrupt_packets;
        r->stats.truncated = r->main.truncated;
        r->stats.decoder_setups = r->main.hw.setups;
        r->stats.decoded_pictures = r->split_pictures + r->main.pictures_sent;
        r->stats.dropped_packets += r->out_of_order;
        if (r->main.hw.fellback)
            r->stats.hw_fallback = 1;
    }
}

/* Decodes the next frame into r->ready (used at open and after seeks). */
static keyer_status decode_ahead(keyer_reader *r, int64_t target, keyer_error *err)
{
    for (;;) {
        keyer_status st = next_avframe(r, r->pic, err);
        if (st)
            return st;
        int64_t t = r->pic->best_effort_timestamp != AV_NOPTS_VALUE ? r->pic->best_effort_timestamp
                                                                    : r->pic->pts;
        if (target != INT64_MIN && t != AV_NOPTS_VALUE && t < target) {
            r->last_pts = t;
            continue;
        }
        return deliver(r, r->pic, r->ready, err);
    }
}

/* ---- open ------------------------------------------------------------------------------ */

static char *dup_or_null(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int display_rotation(const AVStream *st)
{
    size_t size = 0;
    const uint8_t *m = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
    if (!m || size < 9 * sizeof(int32_t))
        return 0;
    double ccw = av_display_rotation_get((const int32_t *)m);
    if (ccw != ccw) /* NaN: degenerate matrix */
        return 0;
    long cw = -lround(ccw / 90.0) * 90;
    cw %= 360;
    if (cw < 0)
        cw += 360;
    return (int)cw;
}

static void fill_info(keyer_reader *r)
{
    keyer_video_info *vi = &r->info;
    AVFormatContext *fc = r->main.fc;
    AVStream *st = fc->streams[r->main.stream];
    const AVCodecParameters *par = st->codecpar;
    vi->width = r->ready->width;
    vi->height = r->ready->height;
    AVRational fr = st->avg_frame_rate;
    if (fr.num <= 0 || fr.den <= 0)
        fr = st->r_frame_rate;
    if (fr.num > 0 && fr.den > 0)
        vi->frame_rate = (keyer_rational){fr.num, fr.den};
    else
        vi->frame_rate = (keyer_rational){0, 1};
    vi->time_base = (keyer_rational){st->time_base.num, st->time_base.den};
    vi->start_pts = r->ready->pts;
    if (st->duration > 0 && st->duration != AV_NOPTS_VALUE)
        vi->duration = st->duration;
    else if (fc->duration > 0 && fc->duration != AV_NOPTS_VALUE)
        vi->duration = av_rescale_q(fc->duration, AV_TIME_BASE_Q, st->time_base);
    if (st->nb_frames > 0) {
        vi->frame_count = st->nb_frames;
        vi->frame_count_exact = 1;
    } else if (vi->duration > 0 && fr.num > 0 && fr.den > 0) {
        vi->frame_count = av_rescale_q(vi->duration, st->time_base, av_inv_q(fr));
    }
    vi->format = r->ready->format;
    vi->memory = r->ready->memory;
    vi->matrix = r->ready->matrix;
    vi->range = r->ready->range;
    if (vi->matrix == KEYER_COLOR_MATRIX_UNSPECIFIED)
        vi->matrix = kr_av_matrix_from(par->color_space);
    if (vi->range == KEYER_COLOR_RANGE_UNSPECIFIED)
        vi->range = kr_av_range_from(par->color_range);
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)par->format);
    if (d) {
        vi->bit_depth = d->comp[0].depth;
        vi->has_alpha = (d->flags & AV_PIX_FMT_FLAG_ALPHA) != 0;
        snprintf(vi->coded_format, sizeof(vi->coded_format), "%s", d->name);
    }
    AVDictionaryEntry *alpha = av_dict_get(st->metadata, "alpha_mode", NULL, 0);
    if (alpha && !strcmp(alpha->value, "1"))
        vi->has_alpha = 1;
    for (unsigned i = 0; i < fc->nb_streams; i++) {
        if (fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO)
            vi->audio_streams++;
        if (fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_SUBTITLE)
            vi->subtitle_streams++;
    }
    vi->has_audio = vi->audio_streams > 0;
    vi->hw_decode = r->ready->memory == KEYER_MEMORY_CUDA ||
                    (r->split ? 0 : r->main.hw.active);
    vi->segments = r->split ? kr_split_sources(r->split) : 1;
    vi->seekable = (fc->pb && (fc->pb->seekable & AVIO_SEEKABLE_NORMAL)) ||
                   !strcmp(fc->iformat->name, "image2");
    snprintf(vi->codec, sizeof(vi->codec), "%s", avcodec_get_name(par->codec_id));
    snprintf(vi->container, sizeof(vi->container), "%s", fc->iformat->name);
}

keyer_status keyer_reader_open(const char *url, const keyer_reader_params *params,
                               keyer_reader **out, keyer_error *err)
{
    if (!out || !url || !*url)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_reader_open: %s",
                               !out ? "out is NULL" : "url is empty");
    *out = NULL;
    keyer_reader_params p = params ? *params : keyer_reader_params_defaults();
    if ((unsigned)p.device > KEYER_DECODE_DEVICE_CUDA || p.segments < 0 || p.segments > 64 ||
        p.segment_queue < 0 || (unsigned)p.segments_auto > 1 || p.threads < 0 ||
        p.threads > 256 ||
        (unsigned)p.format >= KEYER_PIXEL_FORMAT_COUNT_ || p.format == KEYER_PIXEL_FORMAT_GRAYF32)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: bad reader parameters (device %d, segments %d, threads %d, "
                               "format %s)", url, (int)p.device, p.segments, p.threads,
                               keyer_pixel_format_name(p.format));
    if (p.hw_surfaces < 0 || p.hw_surfaces > 16 || (unsigned)p.hw_shared_stream > 1 ||
        p.decode_ahead < 0 || p.decode_ahead > 8)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: bad reader parameters (hw_surfaces %d (0..16), "
                               "hw_shared_stream %d (0 or 1), decode_ahead %d (0..8))", url,
                               p.hw_surfaces, p.hw_shared_stream, p.decode_ahead);
    if ((unsigned)p.reconnect > KEYER_RECONNECT_ON || !(p.reconnect_max >= 0.0f) ||
        p.reconnect_max > 1e6f || !(p.timeout >= 0.0f) || p.timeout > 86400.0f)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: bad reader parameters (reconnect %d, reconnect_max %g s "
                               "(0..1e6), timeout %g s (0..86400))", url, (int)p.reconnect,
                               (double)p.reconnect_max, (double)p.timeout);
    keyer_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", url);
    keyer_status st = KEYER_OK;
    pthread_mutex_init(&r->q.lock, NULL);
    atomic_init(&r->interrupt, 0);
    r->logger = p.logger;
    kr_av_log_attach(r, r->logger); /* FFmpeg's own lines go to this logger (see av.h) */
    r->want = p.format;
    r->keep_streams = p.keep_streams;
    r->last_pts = INT64_MIN;
    r->main.stream = -1;
    r->cuda_device = p.cuda_device;
    if (kr_source_is_network(url)) {
        avformat_network_init();
        r->network = 1;
    }
    r->url = dup_or_null(url);
    r->input_format = dup_or_null(p.input_format);
    r->input_options = dup_or_null(p.input_options);
    r->pic = av_frame_alloc();
    r->sw = av_frame_alloc();
    if (!r->url || (p.input_format && !r->input_format) ||
        (p.input_options && !r->input_options) || !r->pic || !r->sw ||
        keyer_frame_create(&r->ready, NULL)) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", url);
        goto fail;
    }

    /* NVDEC: a CUDA device context on the primary context, or the logged CPU fallback. */
    if (p.device != KEYER_DECODE_DEVICE_CPU) {
        if (!kr_hwdec_built()) {
            if (p.device == KEYER_DECODE_DEVICE_CUDA) {
                keyer_log(r->logger, KEYER_LOG_WARNING,
                          "%s: keyer was built without CUDA: decoding on the CPU", url);
                r->stats.hw_fallback = 1;
            }
        } else {
            keyer_error herr = {0};
            if (kr_hwdec_device_create(p.cuda_device, !p.hw_shared_stream, &r->hw_device,
                                       &herr)) {
                keyer_log(r->logger,
                          p.device == KEYER_DECODE_DEVICE_CUDA ? KEYER_LOG_WARNING : KEYER_LOG_INFO,
                          "%s: %s: decoding on the CPU", url, herr.message);
                r->stats.hw_fallback = 1;
            }
        }
    }
    r->opts = (kr_source_opts){
        .url = r->url,
        .input_format = r->input_format,
        .input_options = r->input_options,
        .threads = p.threads,
        .hw_device = r->hw_device,
        .hw_own_stream = r->hw_device && !p.hw_shared_stream,
        .hw_ordinal = p.cuda_device,
        .hw_surfaces = p.hw_surfaces,
        .decode_ahead = p.decode_ahead,
        .interrupt = &r->interrupt,
        .logger = r->logger,
        .stream_index = -1,
        .timeout_us = (int64_t)((double)p.timeout * 1e6),
    };
    r->segments = p.segments;
    r->segment_queue = p.segment_queue;
    st = kr_source_open(&r->main, &r->opts, err);
    if (st)
        goto fail;
    r->main.hw.ordinal = p.cuda_device;
    r->main.sink = keep_packet;
    r->main.sink_opaque = r;
    r->info.rotation = display_rotation(r->main.fc->streams[r->main.stream]);
    kr_live_init(&r->live, &r->main,
                 r->network && p.reconnect != KEYER_RECONNECT_OFF &&
                     (p.reconnect == KEYER_RECONNECT_ON || kr_live_url(url, r->main.fc)),
                 p.reconnect_max);

    r->min_chunks = 2;
    if (p.segments > 1 && p.segments_auto) {
        /* keyer's own choice: only files long enough for two chunks per session whose chunks
         * start with IDR pictures (elsewhere each chunk would set its NVDEC session up
         * again, the collapse of docs/notes/pipeline-throughput.md), each session's frames
         * ahead bounded */
        r->min_chunks = 2 * p.segments;
        r->auto_split = 1;
        r->segment_queue = kr_split_auto_queue(r->main.fc->streams[r->main.stream]->codecpar,
                                               p.segment_queue);
    }
    if (p.segments > 1) {
        keyer_error serr = {0};
        st = kr_split_create(&r->main, &r->opts, p.segments, r->segment_queue, r->min_chunks,
                             r->auto_split, r->auto_split, INT64_MIN, &r->split, &serr);
        if (st == KEYER_STATUS_UNSUPPORTED) {
            /* asked for: a warning; keyer's own choice: a debug line */
            keyer_log(r->logger, p.segments_auto ? KEYER_LOG_DEBUG : KEYER_LOG_WARNING,
                      "%s: split decode is not possible (%s): one decoder is used", url,
                      serr.message);
            st = KEYER_OK;
        } else if (st) {
            *err = serr;
            goto fail;
        } else {
            /* The main demuxer, still at the start, now only reads the streams kept for a
             * writer (video packets it buffered while probing are skipped). */
            r->main.fc->streams[r->main.stream]->discard = AVDISCARD_ALL;
        }
    }
    st = decode_ahead(r, INT64_MIN, err);
    if (st == KEYER_STATUS_END) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: no decodable video frame in %s",
                             url, r->main.fc->iformat->name);
        goto fail;
    }
    if (st)
        goto fail;
    fill_info(r);
    if (r->split)
        r->live.on = 0; /* split decode needs a seekable file */
    kr_live_frame_returned(&r->live);
    update_counters(r);
    *out = r;
    return KEYER_OK;
fail:
    keyer_reader_destroy(&r);
    return st;
}

/* ---- read, seek, stats ------------------------------------------------------------------ */

const keyer_video_info *keyer_reader_info(const keyer_reader *r) { return r ? &r->info : NULL; }

keyer_status keyer_reader_read(keyer_reader *r, keyer_frame *frame, keyer_error *err)
{
    if (!r || !frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_reader_read: %s is NULL",
                               !r ? "reader" : "frame");
    keyer_frame_unref(frame);
    if (atomic_load(&r->interrupt))
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "%s: reading was interrupted",
                               r->url);
    keyer_status st;
    if (r->ready->format != KEYER_PIXEL_FORMAT_NONE) {
        *frame = *r->ready; /* moves the references */
        memset(r->ready, 0, sizeof(*r->ready));
        keyer_frame_unref(r->ready);
        st = KEYER_OK;
    } else if (r->ended) {
        return KEYER_STATUS_END;
    } else {
        st = next_avframe(r, r->pic, err);
        while (st != KEYER_OK && !r->split && kr_live_is_break(&r->live, st, &r->interrupt)) {
            kr_av_log_demote(1); /* failed attempts are reported by the reconnection */
            st = kr_live_reopen(&r->live, &r->main, &r->opts, st, err);
            kr_av_log_demote(0);
            if (st) {
                r->ended = 1;
                set_input_done(r);
                break;
            }
            reattach(r);
            st = next_avframe(r, r->pic, err);
        }
        if (st == KEYER_OK)
            st = deliver(r, r->pic, frame, err);
    }
    update_counters(r);
    if (st == KEYER_STATUS_END) {
        r->ended = 1;
        set_input_done(r);
        return st;
    }
    if (st)
        return st;
    r->stats.frames++;
    kr_live_frame_returned(&r->live);
    if (frame->flags & KEYER_FRAME_FLAG_CORRUPT)
        r->stats.corrupt_frames++;
    return KEYER_OK;
}

keyer_status keyer_reader_seek(keyer_reader *r, int64_t pts, keyer_error *err)
{
    if (!r)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_reader_seek: reader is NULL");
    if (!r->info.seekable)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: the input is not seekable",
                               r->url);
    keyer_frame_unref(r->ready);
    r->ended = 0;
    r->last_pts = INT64_MIN;
    pthread_mutex_lock(&r->q.lock);
    queue_drop_all(&r->q);
    r->input_done = 0;
    pthread_mutex_unlock(&r->q.lock);
    keyer_status st;
    if (r->split) {
        /* Restart the workers from the chunk holding the target. */
        update_counters(r);
        r->split_pictures = r->stats.decoded_pictures - r->main.pictures_sent;
        kr_split_destroy(&r->split);
        st = kr_split_create(&r->main, &r->opts, r->segments, r->segment_queue, r->min_chunks,
                             r->auto_split, r->auto_split, pts, &r->split, err);
        if (st)
            return keyer_error_prefix(err, "%s: restarting split decode after a seek: ", r->url);
        /* Audio for a writer from one second before the target. */
        int64_t t = av_rescale_q(pts, r->main.fc->streams[r->main.stream]->time_base, AV_TIME_BASE_Q);
        av_seek_frame(r->main.fc, -1, t > AV_TIME_BASE ? t - AV_TIME_BASE : 0, AVSEEK_FLAG_BACKWARD);
        r->split_audio_eof = 0;
        r->audio_pump_limit = INT64_MIN;
        st = decode_ahead(r, pts, err);
    } else {
        /* Keyframes are found by dts: if the one found presents after the target, seek
         * further back until the decoded frames reach the target from below. */
        int64_t ts = pts, back = r->last_duration > 0 ? r->last_duration : 1;
        int64_t start = r->info.start_pts;
        for (int tries = 0;; tries++) {
            st = kr_source_seek(&r->main, ts, KR_SEEK_KEEP_DECODER, err);
            if (st)
                return st;
            r->last_pts = INT64_MIN;
            st = next_avframe(r, r->pic, err);
            if (st && st != KEYER_STATUS_END)
                return st;
            int last_try = tries >= SEEK_TRIES || (start != INT64_MIN && ts <= start);
            if (st == KEYER_STATUS_END) {
                if (last_try)
                    break;
            } else {
                int64_t t = r->pic->best_effort_timestamp != AV_NOPTS_VALUE
                                ? r->pic->best_effort_timestamp
                                : r->pic->pts;
                if (t == AV_NOPTS_VALUE || t <= pts || last_try) {
                    if (t == AV_NOPTS_VALUE || t >= pts) {
                        st = deliver(r, r->pic, r->ready, err);
                    } else {
                        r->last_pts = t;
                        st = decode_ahead(r, pts, err);
                    }
                    break;
                }
                if ((t - pts) * 2 > back)
                    back = (t - pts) * 2;
            }
            back *= 2;
            ts = pts - back;
            if (start != INT64_MIN && ts < start)
                ts = start;
        }
    }
    update_counters(r);
    if (st == KEYER_STATUS_END) {
        r->ended = 1;
        return KEYER_OK;
    }
    return st;
}

void keyer_reader_stats_get(const keyer_reader *r, keyer_reader_stats *out)
{
    if (!r || !out)
        return;
    pthread_mutex_lock((pthread_mutex_t *)&r->q.lock);
    *out = r->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&r->q.lock);
}

void keyer_reader_interrupt(keyer_reader *r)
{
    if (r)
        atomic_store(&r->interrupt, 1);
}

void keyer_reader_destroy(keyer_reader **pr)
{
    if (!pr || !*pr)
        return;
    keyer_reader *r = *pr;
    *pr = NULL;
    atomic_store(&r->interrupt, 1);
    kr_split_destroy(&r->split);
    kr_source_close(&r->main);
    av_buffer_unref(&r->hw_device);
    av_frame_free(&r->pic);
    av_frame_free(&r->sw);
    keyer_frame_destroy(&r->ready);
    kr_convert_free(&r->conv);
    av_buffer_pool_uninit(&r->pool);
    queue_drop_all(&r->q);
    queue_free(&r->q);
    pthread_mutex_destroy(&r->q.lock);
    free(r->url);
    free(r->input_format);
    free(r->input_options);
    if (r->network)
        avformat_network_deinit();
    kr_av_log_detach(r); /* after every libav context (and its threads) is gone */
    free(r);
}
