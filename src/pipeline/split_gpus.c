/* One file split at keyframes over several engines, written back in order (split_gpus.h). */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/split_gpus.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "pipeline/clock.h"
#include "pipeline/placement.h"

/* Most engines a split spreads over (the group's limit), and most lanes in all. */
#define MAX_PARTS 64
#define MAX_LANES KR_SPLIT_MAX_LANES

/* A lane: one reader (decoder session) and one pushed stream on one engine. */
typedef struct producer {
    struct kr_split_gpus *sp;
    int index;                 /* lane: chunks index, index + lanes, ...; engine index % parts */
    keyer_session *engine;
    int stream;                /* the engine's pushed stream */
    keyer_reader *reader;
    keyer_frame *frame;
    pthread_t thread;
    int started;
    atomic_llong sent;
    /* the reader's counters (keyer_reader_stats), copied by the producer after each chunk */
    atomic_llong pictures, setups;
    int64_t blocked_ns;        /* waiting to send (the stream's pool full); read after join */
    keyer_frame *pending;      /* writer side: a frame of this engine's next chunk */
    int has_pending;
} producer;

/* When chunk k was read and written (ns from the run's start), for the timeline in the log:
 * read_* by its producer, write_* by the writer; read after the producers are joined. */
typedef struct chunk_times {
    int64_t read_start, read_end;   /* its seek; its last frame sent */
    int64_t write_start, write_first, write_end; /* the writer's turn; its first frame in; done */
} chunk_times;

struct kr_split_gpus {
    char *input, *output;
    char *w_format, *w_codec, *w_preset, *w_pixel_format, *w_codec_options;
    keyer_writer_params writer_params;
    keyer_reader_params reader_params;
    const keyer_logger *logger;
    keyer_video_info info;     /* from the probe */
    int64_t *starts;           /* chunk k: pts in [starts[k], starts[k + 1]) */
    int *frames;               /* chunk k's frames when the plan counts them exactly, else 0 */
    atomic_int *chunk_frames;  /* frames the producer sent of chunk k; -1 while unknown */
    chunk_times *times;
    int64_t t0;                /* the run's start (kr_clock_ns) */
    int chunks;
    int parts;                 /* engines */
    int lanes;                 /* parts x chunks in flight per engine */
    producer prod[MAX_LANES];
    atomic_int cancel;
    atomic_llong written;
    pthread_mutex_t lock;      /* the first error */
    keyer_status status;
    keyer_error error;
    int hw_decode;
    char encoder[32];
};

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

/* Records the first error and stops everything. */
static void split_fail(kr_split_gpus *sp, keyer_status st, const keyer_error *err)
{
    pthread_mutex_lock(&sp->lock);
    if (!sp->status) {
        sp->status = st;
        sp->error.status = st;
        snprintf(sp->error.message, sizeof(sp->error.message), "%s",
                 err && err->message[0] ? err->message : keyer_status_name(st));
    }
    pthread_mutex_unlock(&sp->lock);
    kr_split_gpus_cancel(sp);
}

int kr_split_gpus_lanes(int parts, int per_engine)
{
    if (parts < 1 || parts > MAX_PARTS)
        return 0;
    if (per_engine <= 0)
        per_engine = KR_SPLIT_DEFAULT_CHUNKS;
    if (per_engine > KR_SPLIT_MAX_CHUNKS)
        per_engine = KR_SPLIT_MAX_CHUNKS;
    if (parts * per_engine > MAX_LANES)
        per_engine = MAX_LANES / parts;
    return parts * per_engine;
}

int kr_split_gpus_balance(const int64_t *gops, int n, int64_t end, int lanes,
                          int64_t max_span, int64_t *out)
{
    if (!gops || n < 1 || !out)
        return 0;
    int64_t total = end - gops[0];
    if (lanes < 1 || max_span <= 0 || total <= 0 || end <= gops[n - 1]) {
        memcpy(out, gops, sizeof(int64_t) * (size_t)n);
        return n;
    }
    /* c chunks per lane, each at most about max_span: every lane the same share of the file
     * (the run ends with its slowest lane), a chunk within a lane's pool */
    int64_t per = (int64_t)lanes * max_span;
    int64_t c = (total + per - 1) / per;
    int64_t k = (int64_t)lanes * (c < 1 ? 1 : c);
    if (k > n)
        k = n;
    out[0] = gops[0];
    int m = 1, g = 0; /* g: the GOP the last chunk starts at */
    for (int64_t j = 1; j < k; j++) {
        /* the cut nearest to j / k of the file, after the last one, leaving a GOP for each
         * chunk still to cut */
        int64_t target = gops[0] + (int64_t)((double)total * (double)j / (double)k);
        int best = -1;
        for (int i = g + 1; i < n; i++) {
            int64_t d = gops[i] > target ? gops[i] - target : target - gops[i];
            if (best < 0 || d < (gops[best] > target ? gops[best] - target : target - gops[best]))
                best = i;
            if (gops[i] >= target)
                break;
        }
        int last = n - (int)(k - j); /* room for the chunks after this one */
        if (best > last)
            best = last;
        if (best <= g)
            continue;
        out[m++] = gops[best];
        g = best;
    }
    return m;
}

/* The chunks, from the file's GOPs: kr_split_gpus_balance over the lanes, each chunk at most
 * about KR_SPLIT_CHUNK_FRAMES frames (the stream's frame rate; without one, two chunks per
 * lane). sp->starts and sp->frames hold the GOPs on entry, the chunks on return: a chunk's
 * frames are known exactly when every GOP's in it are (its ends are then IDR pictures). */
static void balance_chunks(kr_split_gpus *sp)
{
    const keyer_video_info *vi = &sp->info;
    int n = sp->chunks;
    int64_t first = sp->starts[0];
    int64_t span = n > 1 ? (sp->starts[n - 1] - first) / (n - 1) : 0; /* a mean GOP */
    int64_t end = vi->duration > 0 && vi->start_pts != INT64_MIN ? vi->start_pts + vi->duration
                                                                  : sp->starts[n - 1] + span;
    if (end <= sp->starts[n - 1])
        end = sp->starts[n - 1] + (span > 0 ? span : 1);
    int64_t max_span;
    if (vi->frame_rate.num > 0 && vi->frame_rate.den > 0 && vi->time_base.num > 0 &&
        vi->time_base.den > 0)
        max_span = (int64_t)((double)KR_SPLIT_CHUNK_FRAMES * vi->frame_rate.den *
                             vi->time_base.den / ((double)vi->frame_rate.num * vi->time_base.num));
    else
        max_span = (end - first) / (2 * (int64_t)sp->lanes);
    int64_t *out = malloc(sizeof(int64_t) * (size_t)n);
    if (!out)
        return; /* the GOPs as chunks: correct, only less even */
    int m = kr_split_gpus_balance(sp->starts, n, end, sp->lanes, max_span, out);
    /* out is a subset of the GOP starts, in order: chunk j holds GOPs g .. (next start) - 1 */
    for (int j = 0, g = 0; j < m; j++) {
        while (g < n && sp->starts[g] != out[j])
            g++;
        int sum = 0, exact = 1;
        for (; g < n && (j + 1 == m || sp->starts[g] != out[j + 1]); g++) {
            exact = exact && sp->frames[g] > 0;
            sum += sp->frames[g];
        }
        sp->frames[j] = exact ? sum : 0; /* j <= the GOP index read last: not read again */
    }
    sp->chunks = m;
    memcpy(sp->starts, out, sizeof(int64_t) * (size_t)m);
    free(out);
}

keyer_status kr_split_gpus_create(const keyer_file_stream_params *fp, int parts, int per_engine,
                                  const keyer_logger *logger, kr_split_gpus **out,
                                  keyer_error *err)
{
    *out = NULL;
    if (parts < 1 || parts > MAX_PARTS)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "split over GPUs: %d parts (1..%d)", parts, MAX_PARTS);
    int lanes = kr_split_gpus_lanes(parts, per_engine);
    if (lanes < 2)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "split: one GPU with one chunk in flight is no split");
    kr_split_gpus *sp = calloc(1, sizeof(*sp));
    if (!sp)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "split over GPUs: out of memory");
    pthread_mutex_init(&sp->lock, NULL);
    atomic_init(&sp->cancel, 0);
    atomic_init(&sp->written, 0);
    sp->parts = parts;
    sp->lanes = lanes;
    sp->logger = logger;
    sp->reader_params = fp->reader;
    sp->writer_params = fp->writer;
    sp->input = dup_or_null(fp->input);
    sp->output = dup_or_null(fp->output);
    sp->w_format = dup_or_null(fp->writer.format);
    sp->w_codec = dup_or_null(fp->writer.codec);
    sp->w_preset = dup_or_null(fp->writer.preset);
    sp->w_pixel_format = dup_or_null(fp->writer.pixel_format);
    sp->w_codec_options = dup_or_null(fp->writer.codec_options);
    keyer_status st;
    if (!sp->input || (fp->output && !sp->output) || (fp->writer.format && !sp->w_format) ||
        (fp->writer.codec && !sp->w_codec) || (fp->writer.preset && !sp->w_preset) ||
        (fp->writer.pixel_format && !sp->w_pixel_format) ||
        (fp->writer.codec_options && !sp->w_codec_options)) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "split over GPUs: out of memory");
        goto fail;
    }
    sp->reader_params.input_format = NULL; /* a file: probed */
    sp->reader_params.input_options = NULL;
    sp->reader_params.segments = 0; /* each lane is one decoder session */
    sp->reader_params.segments_auto = 0;
    sp->reader_params.keep_streams = 0;    /* video only: no audio to copy */
    sp->reader_params.logger = logger;
    /* the stream's properties, from a probe on the CPU */
    keyer_reader_params rp = sp->reader_params;
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.threads = 1; /* one frame: not a decoder thread per core */
    keyer_reader *r = NULL;
    if ((st = keyer_reader_open(sp->input, &rp, &r, err)))
        goto fail;
    sp->info = *keyer_reader_info(r);
    keyer_reader_destroy(&r);
    /* every GOP (as many parts as there could be frames), then grouped into chunks */
    if ((st = keyer_reader_plan_chunks(sp->input, 1 << 24, &sp->starts, &sp->frames,
                                       &sp->chunks, err)))
        goto fail;
    balance_chunks(sp);
    sp->chunk_frames = malloc(sizeof(atomic_int) * (size_t)sp->chunks);
    sp->times = calloc((size_t)sp->chunks, sizeof(chunk_times));
    if (!sp->chunk_frames || !sp->times) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "split over GPUs: out of memory");
        goto fail;
    }
    for (int k = 0; k < sp->chunks; k++)
        atomic_init(&sp->chunk_frames[k], -1);
    *out = sp;
    return KEYER_OK;
fail:
    kr_split_gpus_destroy(&sp);
    return st;
}

double kr_split_gpus_load(const kr_split_gpus *sp)
{
    return sp ? kr_place_load(sp->info.width, sp->info.height, sp->info.frame_rate) : 0.0;
}

void kr_split_gpus_cancel(kr_split_gpus *sp)
{
    if (!sp)
        return;
    atomic_store(&sp->cancel, 1);
    for (int i = 0; i < sp->lanes; i++)
        if (sp->prod[i].reader)
            keyer_reader_interrupt(sp->prod[i].reader);
}

/* ---- producers: read this engine's chunks and send them ---------------------------------- */

/* Sends @p f, waiting while the stream's pool is full (the writer is on another chunk). */
static keyer_status send_one(producer *pr, const keyer_frame *f, keyer_error *err)
{
    kr_split_gpus *sp = pr->sp;
    int64_t since = 0;
    for (;;) {
        keyer_status st = kr_engine_send_frame(pr->engine, pr->stream, f, err);
        if (st != KEYER_STATUS_AGAIN) {
            if (since)
                pr->blocked_ns += kr_clock_ns() - since;
            return st;
        }
        if (atomic_load(&sp->cancel))
            return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "interrupted");
        keyer_error_clear(err);
        if (!since)
            since = kr_clock_ns();
        struct timespec ts = {0, 500000}; /* 0.5 ms */
        nanosleep(&ts, NULL);
    }
}

/* The lane reader's counters, for the report (read from another thread). */
static void copy_counters(producer *pr)
{
    keyer_reader_stats rs;
    keyer_reader_stats_get(pr->reader, &rs);
    atomic_store(&pr->pictures, rs.decoded_pictures);
    atomic_store(&pr->setups, rs.decoder_setups);
}

static void *producer_main(void *arg)
{
    producer *pr = arg;
    kr_split_gpus *sp = pr->sp;
    kr_thread_name("split");
    keyer_error err = {0};
    keyer_status st = KEYER_OK;
    for (int k = pr->index; k < sp->chunks && !st && !atomic_load(&sp->cancel); k += sp->lanes) {
        int64_t end = k + 1 < sp->chunks ? sp->starts[k + 1] : INT64_MAX;
        sp->times[k].read_start = kr_clock_ns() - sp->t0;
        /* The file's first chunk, on a reader just opened: its opening decoded the file's
         * first frame and keeps it for the first read, so no seek. A seek there would find
         * the IDR picture already given to the decoder, flush it and decode the chunk's first
         * pictures again; on NVDEC that flush also sets the decoder session up again (its
         * surfaces), on the way to the first frame the writer waits for. */
        int at_start = k == 0 && atomic_load(&pr->sent) == 0 &&
                       keyer_reader_info(pr->reader)->start_pts == sp->starts[0];
        if (!at_start && (st = keyer_reader_seek(pr->reader, sp->starts[k], &err)))
            break;
        int sent = 0;
        /* A chunk counted exactly ends with its last frame: reading one more would make the
         * decoder take the next chunk's IDR picture (and its reorder delay's pictures) only
         * to show that the chunk has ended; that chunk's lane decodes them again. */
        for (int first = 1;
             !atomic_load(&sp->cancel) && !(sp->frames[k] > 0 && sent == sp->frames[k]);) {
            st = keyer_reader_read(pr->reader, pr->frame, &err);
            if (st == KEYER_STATUS_END) {
                st = KEYER_OK;
                break;
            }
            if (st)
                break;
            if (pr->frame->pts < sp->starts[k])
                continue; /* before the chunk (the seek lands at or before it) */
            if (pr->frame->pts >= end)
                break; /* the next chunk's first frame */
            if (first)
                pr->frame->flags |= KEYER_FRAME_FLAG_DISCONTINUITY;
            first = 0;
            if ((st = send_one(pr, pr->frame, &err)))
                break;
            atomic_fetch_add(&pr->sent, 1);
            sent++;
        }
        keyer_frame_unref(pr->frame);
        sp->times[k].read_end = kr_clock_ns() - sp->t0;
        copy_counters(pr);
        if (!st)
            atomic_store(&sp->chunk_frames[k], sent); /* the writer may leave the chunk */
    }
    if (st && st != KEYER_STATUS_INTERRUPTED) {
        keyer_error_prefix(&err, "%s, split over GPUs (part %d): ", sp->input, pr->index);
        split_fail(sp, st, &err);
    }
    /* the frames sent are still processed; the writer receives them until END */
    keyer_error ce = {0};
    kr_engine_close_stream(pr->engine, pr->stream, &ce);
    return NULL;
}

/* Opens lane @p i's reader (on its engine's device: a decoder session of its own) and pushed
 * stream. */
static keyer_status open_part(kr_split_gpus *sp, keyer_session *engine, int i, keyer_error *err)
{
    producer *pr = &sp->prod[i];
    pr->sp = sp;
    pr->index = i;
    pr->engine = engine;
    atomic_init(&pr->sent, 0);
    atomic_init(&pr->pictures, 0);
    atomic_init(&pr->setups, 0);
    keyer_reader_params rp = sp->reader_params;
    int cuda = engine->params.device != KEYER_DEVICE_CPU;
    rp.device = cuda ? KEYER_DECODE_DEVICE_AUTO : KEYER_DECODE_DEVICE_CPU;
    rp.cuda_device = engine->params.cuda_device;
    keyer_status st;
    if ((st = keyer_frame_create(&pr->frame, err)) ||
        (st = keyer_frame_create(&pr->pending, err)) ||
        (st = keyer_reader_open(sp->input, &rp, &pr->reader, err)))
        return st;
    copy_counters(pr); /* the opening decodes the file's first picture(s) */
    const keyer_video_info *vi = keyer_reader_info(pr->reader);
    sp->hw_decode |= vi->hw_decode;
    keyer_stream_params p = keyer_stream_params_defaults();
    p.width = vi->width;
    p.height = vi->height;
    p.format = vi->format;
    p.memory = vi->memory;
    p.frame_rate = vi->frame_rate;
    p.time_base = vi->time_base;
    return kr_engine_open_stream(engine, &p, &pr->stream, err);
}

/* ---- the writer -------------------------------------------------------------------------- */

typedef struct out_state {
    keyer_writer *writer;
    keyer_frame *host;    /* a device frame's download, allocated once */
    int64_t t0, next_progress;
} out_state;

static keyer_status write_frame(kr_split_gpus *sp, out_state *o, const keyer_frame *f,
                                keyer_error *err)
{
    keyer_status st;
    if (!o->writer && sp->output) {
        keyer_writer_params wp = sp->writer_params;
        wp.width = f->width;
        wp.height = f->height;
        wp.frame_rate = sp->info.frame_rate.num > 0 ? sp->info.frame_rate
                                                    : (keyer_rational){30, 1};
        wp.time_base = sp->info.time_base;
        wp.rotation = sp->info.rotation;
        wp.matrix = sp->info.matrix;
        wp.range = sp->info.range;
        wp.alpha = f->format == KEYER_PIXEL_FORMAT_RGBA;
        wp.format = sp->w_format;
        wp.codec = sp->w_codec;
        wp.preset = sp->w_preset;
        wp.pixel_format = sp->w_pixel_format;
        wp.codec_options = sp->w_codec_options;
        wp.copy_from = NULL;
        wp.logger = sp->logger;
        if ((st = keyer_writer_open(sp->output, &wp, &o->writer, err)))
            return st;
    }
    if (!o->writer)
        return KEYER_OK; /* no output: the frame is dropped */
    const keyer_frame *w = f;
    if (f->memory == KEYER_MEMORY_CUDA) {
        /* frames of different GPUs meet here: the encoder gets host frames */
        const kr_device_fns *dev = kr_device_cuda();
        if (!dev)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "split over GPUs: a CUDA frame without CUDA");
        if (!o->host->buf[0] &&
            (st = keyer_frame_alloc(o->host, f->format, f->width, f->height, NULL, err)))
            return st;
        if ((st = kr_device_frame_copy(dev, f->device, o->host, f, NULL, err)))
            return st;
        w = o->host;
    }
    return keyer_writer_write(o->writer, w, err);
}

static void progress(kr_split_gpus *sp, out_state *o, const keyer_session_params *p, int last)
{
    if (!p->progress)
        return;
    int64_t now = kr_clock_ns();
    if (!last && now < o->next_progress)
        return;
    o->next_progress = now + (int64_t)p->progress_interval_ms * 1000000;
    keyer_session_progress pr;
    memset(&pr, 0, sizeof(pr));
    pr.frames_done = atomic_load(&sp->written);
    for (int i = 0; i < sp->lanes; i++)
        pr.frames_read += atomic_load(&sp->prod[i].sent);
    pr.frames_total = sp->info.frame_count;
    pr.elapsed = (double)(now - o->t0) * 1e-9;
    pr.fps = pr.elapsed > 0 ? (double)pr.frames_done / pr.elapsed : 0.0;
    pr.remaining = pr.frames_total > 0 && pr.fps > 0 && pr.frames_done <= pr.frames_total
                       ? (double)(pr.frames_total - pr.frames_done) / pr.fps
                       : -1.0;
    p->progress(p->progress_opaque, &pr);
}

/* Writes chunk @p k, from its engine's stream, in order. */
static keyer_status write_chunk(kr_split_gpus *sp, int k, out_state *o,
                                const keyer_session_params *p, keyer_frame *f, keyer_error *err)
{
    producer *pr = &sp->prod[k % sp->lanes];
    int64_t end = k + 1 < sp->chunks ? sp->starts[k + 1] : INT64_MAX;
    for (int got = 0;;) {
        keyer_status st;
        if (atomic_load(&sp->cancel))
            return KEYER_STATUS_INTERRUPTED;
        /* the producer says how many frames the chunk had once it has sent them all */
        if (got == atomic_load(&sp->chunk_frames[k]))
            return KEYER_OK;
        if (pr->has_pending) {
            keyer_frame_unref(f);
            if ((st = keyer_frame_ref(f, pr->pending, err)))
                return st;
            keyer_frame_unref(pr->pending);
            pr->has_pending = 0;
        } else {
            /* a short wait: the chunk may have ended (its producer says so once it has read
             * past it), and then the writer goes on to the next lane at once, where waiting
             * for this lane's next frame would hold every lane up by the pipeline's latency */
            st = kr_engine_receive_frame(pr->engine, pr->stream, f, 1000, err);
            if (st == KEYER_STATUS_AGAIN) {
                keyer_error_clear(err);
                progress(sp, o, p, 0);
                if (atomic_load(&sp->cancel))
                    return KEYER_STATUS_INTERRUPTED;
                continue;
            }
            if (st == KEYER_STATUS_END)
                return KEYER_OK; /* the engine's last chunk ended */
            if (st)
                return st;
        }
        if (got == 0)
            sp->times[k].write_first = kr_clock_ns() - sp->t0;
        if (f->pts >= end) {
            /* the first frame of this engine's next chunk: kept for its turn */
            if ((st = keyer_frame_ref(pr->pending, f, err)))
                return st;
            pr->has_pending = 1;
            keyer_frame_unref(f);
            return KEYER_OK;
        }
        st = write_frame(sp, o, f, err);
        keyer_frame_unref(f);
        if (st)
            return st;
        got++;
        atomic_fetch_add(&sp->written, 1);
        progress(sp, o, p, 0);
    }
}

/* Appends @p ms to @p buf (of @p size, holding *@p len characters), after " / " unless it is
 * the first; stops at the end of the buffer. */
static void append_ms(char *buf, size_t size, size_t *len, int first, double ms)
{
    if (*len + 1 >= size)
        return;
    int w = snprintf(buf + *len, size - *len, "%s%.1f", first ? "" : " / ", ms);
    *len = w < 0 ? *len : *len + (size_t)w >= size ? size - 1 : *len + (size_t)w;
}

/* The run's timeline in the log (ms from the run's start), after the producers are joined:
 * info, one line for the split and one per engine (when each lane read its last frame and how
 * long it waited for room in its stream's pool, i.e. for the writer); debug, one line per
 * chunk (read, the writer's turn, its first frame in, written). */
static void log_timeline(kr_split_gpus *sp, keyer_session *const *engines, int count)
{
    int64_t pictures = 0, sent = 0, wait = 0, done = 0;
    int least = 0, most = 0, exact = 0;
    for (int i = 0; i < sp->lanes; i++) {
        pictures += atomic_load(&sp->prod[i].pictures);
        sent += atomic_load(&sp->prod[i].sent);
    }
    for (int k = 0; k < sp->chunks; k++) {
        const chunk_times *t = &sp->times[k];
        int n = atomic_load(&sp->chunk_frames[k]);
        exact += sp->frames[k] > 0;
        if (k == 0 || n < least)
            least = n;
        if (n > most)
            most = n;
        if (t->write_first > t->write_start)
            wait += t->write_first - t->write_start;
        if (t->write_end > done)
            done = t->write_end;
    }
    keyer_log(sp->logger, KEYER_LOG_INFO,
              "split: %d chunks of %d-%d frames (%d counted exactly) on %d lanes, %d per GPU; "
              "%lld pictures decoded for %lld frames read; first frame out at %.1f ms, last "
              "at %.1f ms; the writer waited %.1f ms in all for chunks' first frames",
              sp->chunks, least, most, exact, sp->lanes, sp->lanes / count, (long long)pictures,
              (long long)sent, (double)sp->times[0].write_first * 1e-6, (double)done * 1e-6,
              (double)wait * 1e-6);
    for (int e = 0; e < count; e++) {
        char ends[256] = "", blocked[256] = "";
        size_t le = 0, lb = 0;
        for (int i = e; i < sp->lanes; i += count) {
            int64_t end = 0;
            for (int k = i; k < sp->chunks; k += sp->lanes)
                end = sp->times[k].read_end;
            append_ms(ends, sizeof(ends), &le, i == e, (double)end * 1e-6);
            append_ms(blocked, sizeof(blocked), &lb, i == e, (double)sp->prod[i].blocked_ns * 1e-6);
        }
        keyer_log(sp->logger, KEYER_LOG_INFO,
                  "split: %s: lanes read their last frame at %s ms, waited for room %s ms",
                  engines[e]->device_name, ends, blocked);
    }
    for (int k = 0; k < sp->chunks; k++) {
        const chunk_times *t = &sp->times[k];
        keyer_log(sp->logger, KEYER_LOG_DEBUG,
                  "split: chunk %d (lane %d, %s): %d frames, read %.1f..%.1f ms, written from "
                  "%.1f ms (first frame %.1f) to %.1f ms",
                  k, k % sp->lanes, engines[(k % sp->lanes) % count]->device_name,
                  atomic_load(&sp->chunk_frames[k]), (double)t->read_start * 1e-6,
                  (double)t->read_end * 1e-6, (double)t->write_start * 1e-6,
                  (double)t->write_first * 1e-6, (double)t->write_end * 1e-6);
    }
}

keyer_status kr_split_gpus_run(kr_split_gpus *sp, keyer_session *const *engines, int count,
                               const keyer_session_params *params, keyer_error *err)
{
    if (count != sp->parts)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "split over GPUs: planned for %d parts, %d engines", sp->parts,
                               count);
    keyer_status st = KEYER_OK;
    out_state o = {NULL, NULL, kr_clock_ns(), 0};
    keyer_frame *f = NULL;
    for (int i = 0; i < sp->lanes && !st; i++)
        st = open_part(sp, engines[i % count], i, err);
    if (!st && !(st = keyer_frame_create(&o.host, err)))
        st = keyer_frame_create(&f, err);
    /* Every engine's stages were started one after the other (runtimes, warm-up); the run's
     * wall time starts now, when the first frame can go in, for all of them. */
    int64_t now = kr_clock_ns();
    for (int i = 0; i < count && !st; i++) {
        pthread_mutex_lock(&engines[i]->out.lock);
        engines[i]->out.t_start = engines[i]->out.t_last = now;
        pthread_mutex_unlock(&engines[i]->out.lock);
    }
    o.t0 = sp->t0 = now;
    for (int i = 0; i < sp->lanes && !st; i++) {
        if (pthread_create(&sp->prod[i].thread, NULL, producer_main, &sp->prod[i])) {
            st = keyer_error_set(err, KEYER_STATUS_INTERNAL, "split over GPUs: no thread");
            break;
        }
        sp->prod[i].started = 1;
    }
    for (int k = 0; k < sp->chunks && !st; k++) {
        sp->times[k].write_start = kr_clock_ns() - sp->t0;
        st = write_chunk(sp, k, &o, params, f, err);
        sp->times[k].write_end = kr_clock_ns() - sp->t0;
    }
    if (st && st != KEYER_STATUS_INTERRUPTED)
        keyer_error_prefix(err, "%s: ", sp->output ? sp->output : sp->input);
    if (st)
        split_fail(sp, st, err);
    /* Every chunk written (the producers are done), or a failure: the producers stop at
     * their next read or send (readers interrupted, sends see the flag). */
    kr_split_gpus_cancel(sp);
    int ran = 0;
    for (int i = 0; i < sp->lanes; i++) {
        if (sp->prod[i].started)
            pthread_join(sp->prod[i].thread, NULL);
        ran += sp->prod[i].started;
        sp->prod[i].started = 0;
    }
    if (ran == sp->lanes && !kr_split_gpus_status(sp, NULL))
        log_timeline(sp, engines, count);
    if (o.writer) {
        keyer_error we = {0};
        keyer_status ws = keyer_writer_close(o.writer, &we);
        if (ws)
            split_fail(sp, ws, &we);
        snprintf(sp->encoder, sizeof(sp->encoder), "%s", sp->w_codec ? sp->w_codec : "default");
        keyer_writer_destroy(&o.writer);
    }
    progress(sp, &o, params, 1);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&o.host);
    pthread_mutex_lock(&sp->lock);
    keyer_status first = sp->status;
    if (first && err)
        *err = sp->error;
    pthread_mutex_unlock(&sp->lock);
    return first;
}

void kr_split_gpus_report(kr_split_gpus *sp, keyer_session *const *engines, int count,
                          keyer_stream_report *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->input, sizeof(out->input), "%s", sp->input);
    snprintf(out->output, sizeof(out->output), "%s", sp->output ? sp->output : "");
    out->width = sp->info.width;
    out->height = sp->info.height;
    size_t len = 0;
    for (int i = 0; i < sp->lanes; i++) {
        producer *pr = &sp->prod[i];
        out->frames_read += atomic_load(&pr->sent);
        out->decoder_setups += atomic_load(&pr->setups);
        out->decoded_pictures += atomic_load(&pr->pictures);
        if (pr->engine) {
            keyer_stream_report part;
            if (!kr_engine_get_stream_report(pr->engine, pr->stream, &part, NULL)) {
                out->frames_dropped += part.frames_dropped;
                out->frames_damaged += part.frames_damaged;
                out->frames_lost += part.frames_lost;
            }
        }
    }
    for (int i = 0; i < count; i++) {
        /* "cuda:0 + cuda:1 (split)" */
        char one[80];
        keyer_session_report er;
        kr_engine_get_report(engines[i], &er);
        snprintf(one, sizeof(one), "%s%s", i ? " + " : "", er.device);
        int w = snprintf(out->device + len, sizeof(out->device) - len, "%s", one);
        len = w < 0 ? len : len + (size_t)w;
        if (len >= sizeof(out->device))
            len = sizeof(out->device) - 1;
    }
    if (len + 1 < sizeof(out->device))
        snprintf(out->device + len, sizeof(out->device) - len, " (split)");
    out->frames_written = atomic_load(&sp->written);
    out->hw_decode = sp->hw_decode;
    snprintf(out->encoder, sizeof(out->encoder), "%s", sp->encoder);
    keyer_error e = {0};
    out->status = kr_split_gpus_status(sp, &e);
    if (out->status)
        snprintf(out->error, sizeof(out->error), "%s", e.message);
}

keyer_status kr_split_gpus_status(kr_split_gpus *sp, keyer_error *err)
{
    pthread_mutex_lock(&sp->lock);
    keyer_status st = sp->status;
    if (st && err)
        *err = sp->error;
    pthread_mutex_unlock(&sp->lock);
    return st;
}

void kr_split_gpus_destroy(kr_split_gpus **spp)
{
    if (!spp || !*spp)
        return;
    kr_split_gpus *sp = *spp;
    for (int i = 0; i < MAX_LANES; i++) {
        producer *pr = &sp->prod[i];
        if (pr->started)
            pthread_join(pr->thread, NULL);
        keyer_reader_destroy(&pr->reader);
        keyer_frame_destroy(&pr->frame);
        keyer_frame_destroy(&pr->pending);
    }
    free(sp->starts);
    free(sp->frames);
    free(sp->chunk_frames);
    free(sp->times);
    free(sp->input);
    free(sp->output);
    free(sp->w_format);
    free(sp->w_codec);
    free(sp->w_preset);
    free(sp->w_pixel_format);
    free(sp->w_codec_options);
    pthread_mutex_destroy(&sp->lock);
    free(sp);
    *spp = NULL;
}
