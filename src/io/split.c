/*
 * Parallel decode of one input. The video stream is cut at keyframes into chunks of whole
 * GOPs; chunk k is decoded by worker k % n, each worker with its own demuxer and decoder
 * (its own NVDEC session on the GPU). The consumer takes chunk 0 from worker 0, chunk 1 from
 * worker 1, ... so frames come out in order while every worker decodes ahead.
 *
 * Chunk k holds the frames with pts in [P_k, P_k+1), P_k being the pts of its first
 * keyframe. A worker starts at that keyframe and drops earlier frames (leading pictures of an
 * open GOP belong to the previous chunk); it feeds packets past the next chunk's keyframe until
 * the decoder outputs a frame at or after P_k+1, so frames of chunk k that follow that
 * keyframe in decode order (open GOPs) are still produced. A chunk that starts and ends at
 * H.264 IDR pictures and whose frames the index counts (MP4) ends with its last frame
 * instead: the decoder has then taken only as many of the next chunk's pictures as its
 * reorder delay, which the next chunk's worker decodes again (counted: decoded_pictures).
 * keyer's own split (long_chunks) makes chunks as long as a worker's queue holds, so that
 * those pictures are few against the chunk.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/log.h"

/* Whole GOPs are grouped until a chunk has at least this many frames. */
#define MIN_CHUNK_FRAMES 24

typedef struct chunk {
    int64_t start_dts; /* the keyframe's index timestamp */
    int64_t start_pts; /* P_k */
    int64_t end_pts;   /* P_k+1, INT64_MAX for the last chunk */
    int frames;        /* from the index (or estimated) */
    int clean;         /* starts with an H.264 IDR picture (kr_source_clean_cut_of) */
    /* frames counted exactly (an index of every packet) and IDR pictures at both ends: the
     * chunk is complete once that many frames came out */
    int exact;
} chunk;

enum { ENTRY_FRAME, ENTRY_END, ENTRY_ERROR };

typedef struct entry {
    AVFrame *frame; /* allocated once per slot */
    int chunk;
    int kind;
} entry;

typedef struct worker {
    struct kr_split *sp;
    int index;
    pthread_t thread;
    int started;
    kr_source s;
    AVFrame *tmp;
    entry *ring;
    int cap, head, count;
    keyer_status status; /* error reported by the worker */
    keyer_error err;
    /* counters copied under the lock */
    int64_t dropped, corrupt, setups, pictures;
    int truncated, hw_active, hw_fellback;
} worker;

struct kr_split {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    worker *w;
    int n;
    chunk *chunks;
    int nchunks;
    int first;        /* first chunk decoded (after a seek) */
    int cur;          /* chunk the consumer is in */
    int stop;
    atomic_int abort; /* interrupts the workers' I/O */
    atomic_int *interrupt;
    const char *url;
    const keyer_logger *logger;
};

static int64_t frame_pts(const AVFrame *f)
{
    return f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
}

/* Waits on the condition for at most 50 ms (so interrupts are noticed). */
static void timed_wait(kr_split *sp)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&sp->cond, &sp->lock, &ts);
}

/* Pushes an entry; blocks while the ring is full. Returns 0, or -1 when stopping. */
static int push(worker *w, int chunk_index, int kind, AVFrame *f)
{
    kr_split *sp = w->sp;
    pthread_mutex_lock(&sp->lock);
    while (w->count == w->cap && !sp->stop)
        pthread_cond_wait(&sp->cond, &sp->lock);
    if (sp->stop) {
        pthread_mutex_unlock(&sp->lock);
        return -1;
    }
    entry *e = &w->ring[(w->head + w->count) % w->cap];
    e->chunk = chunk_index;
    e->kind = kind;
    if (f)
        av_frame_move_ref(e->frame, f);
    w->count++;
    w->dropped = w->s.dropped_packets;
    w->corrupt = w->s.corrupt_packets;
    w->setups = w->s.hw.setups;
    w->pictures = w->s.pictures_sent;
    w->truncated |= w->s.truncated;
    w->hw_active |= w->s.hw.active;
    w->hw_fellback |= w->s.hw.fellback;
    pthread_cond_broadcast(&sp->cond);
    pthread_mutex_unlock(&sp->lock);
    return 0;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    kr_split *sp = w->sp;
    for (int k = sp->first + w->index; k < sp->nchunks; k += sp->n) {
        const chunk *c = &sp->chunks[k];
        /* Seeking by the keyframe's pts lands on it (demuxers seek by presentation time).
         * The decoder is kept where the chunk starts with an IDR picture: a flush would set
         * it up again (for NVDEC a new session and surface pool, every chunk). */
        keyer_status st = kr_source_seek(&w->s, c->start_pts, KR_SEEK_KEEP_DECODER, &w->err);
        /* A chunk counted exactly ends with its last frame: the decoder then holds only the
         * pictures of the next chunk that pushed that frame out (its reorder delay), not one
         * more to show the next chunk's first frame. */
        int out = 0; /* the chunk's frames handed on */
        while (st == KEYER_OK && !(c->exact && out == c->frames)) {
            st = kr_source_receive(&w->s, w->tmp, &w->err);
            if (st)
                break;
            int64_t t = frame_pts(w->tmp);
            if (t != AV_NOPTS_VALUE && t < c->start_pts)
                continue; /* belongs to the previous chunk */
            if (t != AV_NOPTS_VALUE && t >= c->end_pts)
                break; /* the next chunk's first frame: this chunk is complete */
            if (push(w, k, ENTRY_FRAME, w->tmp))
                return NULL;
            out++;
        }
        av_frame_unref(w->tmp);
        if (st && st != KEYER_STATUS_END) {
            keyer_error_prefix(&w->err, "split decode worker %d, chunk %d: ", w->index, k);
            w->status = st;
            push(w, k, ENTRY_ERROR, NULL);
            return NULL;
        }
        if (push(w, k, ENTRY_END, NULL))
            return NULL;
    }
    return NULL;
}

/* Reads the pts of the keyframe of index timestamp @p ts (dts in MP4, pts in Matroska). Demuxers
 * seek by presentation time, which can land on an earlier keyframe: packets are read until
 * the keyframe itself. */
static int keyframe_pts(AVFormatContext *fc, int stream, int64_t ts, AVPacket *pkt, int64_t *pts,
                        int *clean)
{
    if (av_seek_frame(fc, stream, ts, AVSEEK_FLAG_BACKWARD) < 0)
        return -1;
    for (int i = 0; i < 100000; i++) {
        if (av_read_frame(fc, pkt) < 0)
            return -1;
        int64_t t = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
        int found = pkt->stream_index == stream && (pkt->flags & AV_PKT_FLAG_KEY) &&
                    t != AV_NOPTS_VALUE && t >= ts;
        *pts = pkt->pts;
        if (found) {
            const AVCodecParameters *par = fc->streams[stream]->codecpar;
            *clean = kr_source_clean_cut_of(par->codec_id, par->extradata, par->extradata_size,
                                            pkt);
        }
        av_packet_unref(pkt);
        if (found)
            return *pts != AV_NOPTS_VALUE ? 0 : -1;
    }
    return -1;
}

/* Frames of each GOP of @p st's index (keys: the keyframes' entries; keys_only: an index of
 * keyframes only, frames estimated from timestamps). */
static void gop_frames(const AVStream *st, const int *keys, int nkeys, int entries, int keys_only,
                       AVRational fr, int *frames)
{
    for (int g = 0; g < nkeys; g++) {
        int next = g + 1 < nkeys ? keys[g + 1] : entries;
        int f;
        if (!keys_only) {
            f = next - keys[g];
        } else {
            const AVIndexEntry *a = avformat_index_get_entry((AVStream *)st, keys[g]);
            const AVIndexEntry *b =
                g + 1 < nkeys ? avformat_index_get_entry((AVStream *)st, keys[g + 1]) : NULL;
            int64_t span = b ? b->timestamp - a->timestamp
                             : (st->duration > 0 ? st->duration - a->timestamp : 0);
            f = fr.num > 0 ? (int)av_rescale_q(span, st->time_base, av_inv_q(fr)) : 1;
        }
        frames[g] = f > 0 ? f : 1;
    }
}

/* Chunk starts (GOP indices into @p starts) for @p nkeys GOPs of @p frames, @p total frames in
 * all; returns the count. chunk_max 0: GOPs grouped until a chunk has at least
 * MIN_CHUNK_FRAMES (fewer when the file is short for @p n workers). Else: a multiple of @p n
 * chunks (at least @p min_chunks) of at most about chunk_max frames (at least
 * MIN_CHUNK_FRAMES), each starting at the keyframe nearest its share of @p total. */
static int group_gops(const int *frames, int nkeys, int64_t total, int n, int min_chunks,
                      int chunk_max, int *starts)
{
    int nchunks = 0;
    if (chunk_max <= 0) {
        int target = MIN_CHUNK_FRAMES;
        if (total > 0 && total / n < target)
            target = (int)(total / n) > 1 ? (int)(total / n) : 1;
        for (int g = 0; g < nkeys;) {
            starts[nchunks++] = g;
            int f = 0;
            do
                f += frames[g++];
            while (g < nkeys && f < target);
        }
        return nchunks;
    }
    int64_t per = chunk_max > MIN_CHUNK_FRAMES ? chunk_max : MIN_CHUNK_FRAMES;
    int64_t want = (int64_t)n * ((total + (int64_t)n * per - 1) / ((int64_t)n * per));
    if (want < min_chunks)
        want = min_chunks;
    if (want > total / MIN_CHUNK_FRAMES) /* chunks of MIN_CHUNK_FRAMES on average, at least */
        want = total / MIN_CHUNK_FRAMES > 1 ? total / MIN_CHUNK_FRAMES : 1;
    if (want > nkeys)
        want = nkeys;
    int64_t before = 0; /* frames before GOP g */
    for (int g = 0; g < nkeys; g++) {
        /* chunk m starts at the first keyframe past (m * total / want) less half the GOP
         * before it: the keyframe nearest that share, for GOPs of equal length */
        int64_t share = nchunks * total / want;
        if (g == 0 || (nchunks < want && 2 * before >= 2 * share - frames[g - 1]))
            starts[nchunks++] = g;
        before += frames[g];
    }
    return nchunks;
}

/* Groups the index's keyframes of @p fc (a second opening of the input, so that the main
 * demuxer keeps its position) into chunks (group_gops: long ones with @p chunk_max > 0);
 * UNSUPPORTED with fewer than @p min_chunks (>= 2), and with @p clean_cuts when a chunk after
 * the first does not start with an H.264 IDR picture (kr_source_clean_cut: its worker's
 * decoder would be set up again there). */
static keyer_status plan_with(kr_split *sp, AVFormatContext *fc, int stream, AVPacket *pkt, int n,
                              int min_chunks, int clean_cuts, int chunk_max, keyer_error *err)
{
    AVStream *st = fc->streams[stream];
    int entries = avformat_index_get_entries_count(st);
    if (entries < 2) { /* Matroska reads its cues on the first seek */
        av_seek_frame(fc, stream, st->start_time != AV_NOPTS_VALUE ? st->start_time : 0,
                      AVSEEK_FLAG_BACKWARD);
        entries = avformat_index_get_entries_count(st);
    }
    if (entries < 2)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s has no keyframe index", fc->iformat->name);
    int *keys = malloc(sizeof(int) * (size_t)entries * 3);
    sp->chunks = calloc((size_t)entries, sizeof(chunk));
    if (!keys || !sp->chunks) {
        free(keys);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    int *frames = keys + entries, *starts = keys + 2 * entries;
    int nkeys = 0;
    for (int i = 0; i < entries; i++) {
        const AVIndexEntry *e = avformat_index_get_entry(st, i);
        if (e && (e->flags & AVINDEX_KEYFRAME))
            keys[nkeys++] = i;
    }
    /* An index of keyframes only (Matroska cues): estimate frames from timestamps. */
    int keys_only = nkeys == entries;
    AVRational fr = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    if (nkeys < 2) {
        free(keys);
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "fewer than two keyframes");
    }
    gop_frames(st, keys, nkeys, entries, keys_only, fr, frames);
    int64_t total = keys_only ? 0 : entries; /* 0: unknown */
    if (keys_only && fr.num > 0 && fr.den > 0 && st->duration > 0)
        total = av_rescale_q(st->duration, st->time_base, av_inv_q(fr));
    if (total <= 0 && chunk_max > 0)
        for (int g = 0; g < nkeys; g++)
            total += frames[g];
    int nchunks = group_gops(frames, nkeys, total, n, min_chunks, chunk_max, starts);
    for (int k = 0; k < nchunks; k++) {
        chunk *c = &sp->chunks[k];
        int end = k + 1 < nchunks ? starts[k + 1] : nkeys;
        c->start_dts = avformat_index_get_entry(st, keys[starts[k]])->timestamp;
        for (int g = starts[k]; g < end; g++)
            c->frames += frames[g];
        c->exact = !keys_only;
    }
    free(keys);
    if (nchunks < 2)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "only one chunk of keyframes");
    if (nchunks < min_chunks)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%d chunks of keyframes, fewer "
                               "than %d", nchunks, min_chunks);
    for (int k = 0; k < nchunks; k++) {
        if (keyframe_pts(fc, stream, sp->chunks[k].start_dts, pkt, &sp->chunks[k].start_pts,
                         &sp->chunks[k].clean) < 0)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "keyframe %d of the index has no timestamp", k);
        if (clean_cuts && k > 0 && !sp->chunks[k].clean)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "chunk %d does not start with an H.264 IDR picture (its "
                                   "decoder would be set up again)", k);
        if (k > 0 && sp->chunks[k].start_pts <= sp->chunks[k - 1].start_pts)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "keyframe timestamps are not increasing");
    }
    for (int k = 0; k < nchunks; k++) {
        chunk *c = &sp->chunks[k];
        c->end_pts = k + 1 < nchunks ? sp->chunks[k + 1].start_pts : INT64_MAX;
        /* no leading pictures on either side: the packets between the two IDR pictures are
         * exactly the chunk's frames */
        c->exact = c->exact && c->clean && (k + 1 == nchunks || sp->chunks[k + 1].clean);
    }
    sp->nchunks = nchunks;
    return KEYER_OK;
}

static keyer_status plan(kr_split *sp, kr_source *main, int n, int min_chunks, int clean_cuts,
                         int chunk_max, keyer_error *err)
{
    if (!main->fc->pb || !(main->fc->pb->seekable & AVIO_SEEKABLE_NORMAL))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "the input is not seekable");
    AVFormatContext *fc = avformat_alloc_context();
    AVPacket *pkt = av_packet_alloc();
    if (!fc || !pkt) {
        avformat_free_context(fc);
        av_packet_free(&pkt);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    fc->interrupt_callback = main->fc->interrupt_callback;
    int ret = avformat_open_input(&fc, main->fc->url, main->fc->iformat, NULL);
    keyer_status st;
    if (ret < 0)
        st = kr_av_error(err, ret, "cannot open the input a second time");
    else if (main->stream >= (int)fc->nb_streams)
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "the input changed between openings");
    else
        st = plan_with(sp, fc, main->stream, pkt, n, min_chunks, clean_cuts, chunk_max, err);
    avformat_close_input(&fc);
    av_packet_free(&pkt);
    return st;
}

keyer_status keyer_reader_plan_chunks(const char *url, int parts, int64_t **start_pts,
                                      int **frames, int *count, keyer_error *err)
{
    if (frames)
        *frames = NULL;
    if (!url || parts < 1 || !start_pts || !count)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_reader_plan_chunks: bad arguments");
    *start_pts = NULL;
    *count = 0;
    AVFormatContext *fc = NULL;
    AVPacket *pkt = av_packet_alloc();
    kr_split plan_of;
    memset(&plan_of, 0, sizeof(plan_of));
    keyer_status st = KEYER_OK;
    int ret = pkt ? avformat_open_input(&fc, url, NULL, NULL) : AVERROR(ENOMEM);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot open", url);
        goto done;
    }
    if ((ret = avformat_find_stream_info(fc, NULL)) < 0) {
        st = kr_av_error(err, ret, "%s: cannot read the stream information", url);
        goto done;
    }
    int stream = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    if (stream < 0) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: no video stream", url);
        goto done;
    }
    if (!fc->pb || !(fc->pb->seekable & AVIO_SEEKABLE_NORMAL)) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: the input is not seekable", url);
        goto done;
    }
    if ((st = plan_with(&plan_of, fc, stream, pkt, parts, 2, 0, 0, err))) {
        keyer_error_prefix(err, "%s: cannot be split at keyframes: ", url);
        goto done;
    }
    *start_pts = malloc(sizeof(int64_t) * (size_t)plan_of.nchunks);
    if (frames)
        *frames = malloc(sizeof(int) * (size_t)plan_of.nchunks);
    if (!*start_pts || (frames && !*frames)) {
        free(*start_pts);
        *start_pts = NULL;
        if (frames) {
            free(*frames);
            *frames = NULL;
        }
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int k = 0; k < plan_of.nchunks; k++) {
        (*start_pts)[k] = plan_of.chunks[k].start_pts;
        if (frames) /* exact: IDR pictures at both ends, every packet in the index */
            (*frames)[k] = plan_of.chunks[k].exact ? plan_of.chunks[k].frames : 0;
    }
    *count = plan_of.nchunks;
done:
    free(plan_of.chunks);
    avformat_close_input(&fc);
    av_packet_free(&pkt);
    return st;
}

/* Split decode chosen by keyer (keyer_reader_params::segments_auto): each session decodes
 * its chunk ahead (the largest + 2 frames), but at most about this much of frames, so that
 * long GOPs of large pictures do not fill the GPU. */
#define AUTO_SPLIT_AHEAD_BYTES ((size_t)256 << 20)

int kr_split_auto_queue(const AVCodecParameters *par, int segment_queue)
{
    if (segment_queue > 0)
        return segment_queue;
    size_t px = (size_t)(par->width > 0 ? par->width : 1920) *
                (size_t)(par->height > 0 ? par->height : 1080);
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)par->format);
    size_t bytes = px * 3 / 2 * (d && d->comp[0].depth > 8 ? 2 : 1);
    size_t frames = AUTO_SPLIT_AHEAD_BYTES / (bytes ? bytes : 1);
    return -(int)(frames < 8 ? 8 : frames > 4096 ? 4096 : frames);
}

keyer_status kr_split_create(kr_source *main, const kr_source_opts *o, int n, int queue,
                             int min_chunks, int clean_cuts, int long_chunks, int64_t from,
                             kr_split **out, keyer_error *err)
{
    *out = NULL;
    kr_split *sp = calloc(1, sizeof(*sp));
    if (!sp)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&sp->lock, NULL);
    pthread_cond_init(&sp->cond, NULL);
    atomic_init(&sp->abort, 0);
    sp->interrupt = o->interrupt;
    sp->url = o->url;
    sp->logger = o->logger;
    /* long chunks: as many frames as a worker's queue holds beside the end marker and one
     * spare (queue 0: no bound) */
    int chunk_max = !long_chunks ? 0 : queue == 0 ? INT_MAX : abs(queue) - 2;
    if (long_chunks && chunk_max < 1)
        chunk_max = 1; /* group_gops() makes that at least MIN_CHUNK_FRAMES */
    keyer_status st = plan(sp, main, n, min_chunks < 2 ? 2 : min_chunks, clean_cuts, chunk_max,
                           err);
    if (st)
        goto fail;
    /* After a seek: start with the chunk holding @p from. */
    while (sp->first + 1 < sp->nchunks && sp->chunks[sp->first].end_pts <= from)
        sp->first++;
    sp->cur = sp->first;
    if (sp->nchunks - sp->first < n)
        n = sp->nchunks - sp->first;
    int max_frames = 0;
    for (int k = 0; k < sp->nchunks; k++)
        if (sp->chunks[k].frames > max_frames)
            max_frames = sp->chunks[k].frames;
    /* queue > 0: that many; < 0: the largest chunk + 2, at most -queue; 0: the chunk + 2 */
    int cap = (queue > 0                            ? queue
               : queue < 0 && -queue < max_frames + 2 ? -queue
                                                      : max_frames + 2) +
              1; /* + the end-of-chunk marker */
    sp->w = calloc((size_t)n, sizeof(worker));
    if (!sp->w) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    sp->n = n;
    AVStream *vs = main->fc->streams[main->stream];
    for (int i = 0; i < n; i++) {
        worker *w = &sp->w[i];
        w->sp = sp;
        w->index = i;
        w->cap = cap;
        w->ring = calloc((size_t)cap, sizeof(entry));
        w->tmp = av_frame_alloc();
        if (!w->ring || !w->tmp) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
            goto fail;
        }
        for (int j = 0; j < cap; j++)
            if (!(w->ring[j].frame = av_frame_alloc())) {
                st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
                goto fail;
            }
        kr_source_opts wo = *o;
        wo.codecpar = vs->codecpar;
        wo.stream_index = main->stream;
        wo.source_index = i;
        wo.interrupt = &sp->abort;
        AVBufferRef *own = NULL;
        if (o->hw_device && o->hw_own_stream) {
            /* a stream of its own for each worker's decoder (its decoder keeps the
             * reference; this one goes after the open) */
            if ((st = kr_hwdec_device_create(o->hw_ordinal, 1, &own, err)))
                goto fail;
            wo.hw_device = own;
        }
        st = kr_source_open(&w->s, &wo, err);
        av_buffer_unref(&own);
        if (st)
            goto fail;
        w->s.hw.ordinal = main->hw.ordinal;
        /* Workers decode video only. */
        for (unsigned s = 0; s < w->s.fc->nb_streams; s++)
            if ((int)s != w->s.stream)
                w->s.fc->streams[s]->discard = AVDISCARD_ALL;
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&sp->w[i].thread, NULL, worker_main, &sp->w[i]) != 0) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                 "cannot start split decode thread %d", i);
            goto fail;
        }
        sp->w[i].started = 1;
    }
    for (int k = 0; k < sp->nchunks; k++)
        keyer_log(sp->logger, KEYER_LOG_DEBUG, "%s: chunk %d: dts %lld, pts %lld..%lld, %d frames",
                  sp->url, k, (long long)sp->chunks[k].start_dts,
                  (long long)sp->chunks[k].start_pts, (long long)sp->chunks[k].end_pts,
                  sp->chunks[k].frames);
    keyer_log(sp->logger, KEYER_LOG_INFO, "%s: split decode: %d chunks on %d decoders",
              sp->url, sp->nchunks, n);
    *out = sp;
    return KEYER_OK;
fail:
    kr_split_destroy(&sp);
    return st;
}

keyer_status kr_split_receive(kr_split *sp, AVFrame *out, keyer_error *err)
{
    av_frame_unref(out);
    pthread_mutex_lock(&sp->lock);
    for (;;) {
        if (sp->cur >= sp->nchunks) {
            pthread_mutex_unlock(&sp->lock);
            return KEYER_STATUS_END;
        }
        if (sp->interrupt && atomic_load(sp->interrupt)) {
            atomic_store(&sp->abort, 1);
            pthread_mutex_unlock(&sp->lock);
            return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "%s: reading was interrupted",
                                   sp->url);
        }
        worker *w = &sp->w[(sp->cur - sp->first) % sp->n];
        if (w->count == 0) {
            timed_wait(sp);
            continue;
        }
        entry *e = &w->ring[w->head];
        if (e->kind == ENTRY_ERROR) { /* stays queued: later calls fail the same way */
            keyer_status st = w->status;
            if (err)
                *err = w->err;
            pthread_mutex_unlock(&sp->lock);
            return st;
        }
        if (e->chunk != sp->cur) { /* cannot happen: workers take their chunks in order */
            pthread_mutex_unlock(&sp->lock);
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "%s: split decode expected chunk %d, got %d", sp->url,
                                   sp->cur, e->chunk);
        }
        int kind = e->kind;
        if (kind == ENTRY_FRAME)
            av_frame_move_ref(out, e->frame);
        w->head = (w->head + 1) % w->cap;
        w->count--;
        pthread_cond_broadcast(&sp->cond);
        if (kind == ENTRY_END) {
            sp->cur++;
            continue;
        }
        pthread_mutex_unlock(&sp->lock);
        return KEYER_OK;
    }
}

void kr_split_counters(kr_split *sp, int64_t *dropped, int64_t *corrupt_packets, int *truncated,
                       int *hw_active, int *hw_fellback, int64_t *setups, int64_t *pictures)
{
    int64_t d = 0, c = 0, u = 0, p = 0;
    int t = 0, a = 0, f = 0;
    pthread_mutex_lock(&sp->lock);
    for (int i = 0; i < sp->n; i++) {
        d += sp->w[i].dropped;
        c += sp->w[i].corrupt;
        u += sp->w[i].setups;
        p += sp->w[i].pictures;
        t |= sp->w[i].truncated;
        a |= sp->w[i].hw_active;
        f |= sp->w[i].hw_fellback;
    }
    pthread_mutex_unlock(&sp->lock);
    *dropped = d;
    *corrupt_packets = c;
    *setups = u;
    *pictures = p;
    *truncated = t;
    *hw_active = a;
    *hw_fellback = f;
}

int kr_split_sources(const kr_split *sp) { return sp ? sp->n : 0; }

void kr_split_destroy(kr_split **psp)
{
    if (!psp || !*psp)
        return;
    kr_split *sp = *psp;
    *psp = NULL;
    pthread_mutex_lock(&sp->lock);
    sp->stop = 1;
    atomic_store(&sp->abort, 1);
    pthread_cond_broadcast(&sp->cond);
    pthread_mutex_unlock(&sp->lock);
    for (int i = 0; i < sp->n && sp->w; i++)
        if (sp->w[i].started)
            pthread_join(sp->w[i].thread, NULL);
    for (int i = 0; i < sp->n && sp->w; i++) {
        worker *w = &sp->w[i];
        kr_source_close(&w->s);
        av_frame_free(&w->tmp);
        for (int j = 0; w->ring && j < w->cap; j++)
            av_frame_free(&w->ring[j].frame);
        free(w->ring);
    }
    free(sp->w);
    free(sp->chunks);
    pthread_cond_destroy(&sp->cond);
    pthread_mutex_destroy(&sp->lock);
    free(sp);
}
