/* Streams of a session: pools, file and pushed sources, writer and pulled sinks. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/threadpool.h"
#include "pipeline/clock.h"
#include "pipeline/session_internal.h"

/* ---- errors ---------------------------------------------------------------------------------- */

void kr_stream_fail(kr_stream *st, keyer_status status, const keyer_error *err, int fatal)
{
    pthread_mutex_lock(&st->err_lock);
    if (st->status == KEYER_OK) {
        st->status = status;
        st->error.status = status;
        snprintf(st->error.message, sizeof(st->error.message), "%s",
                 err && err->message[0] ? err->message : keyer_status_name(status));
    }
    pthread_mutex_unlock(&st->err_lock);
    if (fatal)
        kr_session_fail(st->session, status, err);
}

/* ---- items ----------------------------------------------------------------------------------- */

static keyer_status wrap_mask(keyer_session *s, kr_item_bufs *b, int cuda, keyer_error *err)
{
    keyer_status st = keyer_frame_create(&b->mask_frame, err);
    if (st)
        return st;
    keyer_frame *m = b->mask_frame;
    m->format = KEYER_PIXEL_FORMAT_GRAYF32;
    m->width = s->mask_w;
    m->height = s->mask_h;
    m->memory = cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    m->device = cuda ? s->ordinal : 0;
    m->data[0] = (uint8_t *)b->mask;
    m->stride[0] = (ptrdiff_t)s->mask_w * (ptrdiff_t)sizeof(float);
    return KEYER_OK;
}

static keyer_pixel_format out_format(const keyer_session *s, keyer_pixel_format in)
{
    switch (s->params.composite.mode) {
    case KEYER_COMPOSITE_ALPHA:
    case KEYER_COMPOSITE_ALPHA_PREMULTIPLIED:
        return KEYER_PIXEL_FORMAT_RGBA;
    case KEYER_COMPOSITE_MASK:
        return KEYER_PIXEL_FORMAT_GRAY8;
    default:
        return in;
    }
}

/* Allocates a frame in host or device memory. */
static keyer_status frame_alloc(keyer_session *s, int cuda, keyer_frame **f,
                                keyer_pixel_format format, int w, int h, keyer_error *err)
{
    keyer_status st = KEYER_OK;
    if (!*f && (st = keyer_frame_create(f, err)))
        return st;
    if (cuda)
        return kr_device_frame_alloc(s->dev, s->ordinal, *f, format, w, h, err);
    return keyer_frame_alloc(*f, format, w, h, NULL, err);
}

keyer_status kr_item_tensors_ensure(kr_item *it, int cuda, keyer_error *err)
{
    kr_item_bufs *b = cuda ? &it->cuda : &it->host;
    if (b->tensors_ready)
        return KEYER_OK;
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    keyer_status rs = KEYER_OK;
    if (cuda) {
        if ((s->model && ((rs = s->dev->alloc(s->ordinal, s->tensor_bytes, &b->tensor, err)) ||
                          (rs = s->dev->alloc(s->ordinal, s->mask_bytes, (void **)&b->mask,
                                              err)))) ||
            (s->det_model &&
             (rs = s->dev->alloc(s->ordinal, s->det_tensor_bytes, &b->det_tensor, err))))
            goto fail;
    } else {
        if (s->model) {
            b->tensor = keyer_alloc(NULL, s->tensor_bytes, KEYER_ALIGNMENT);
            b->mask = keyer_alloc(NULL, s->mask_bytes, KEYER_ALIGNMENT);
        }
        if (s->det_model)
            b->det_tensor = keyer_alloc(NULL, s->det_tensor_bytes, KEYER_ALIGNMENT);
        if ((s->model && (!b->tensor || !b->mask)) || (s->det_model && !b->det_tensor)) {
            rs = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                 "stream %d: cannot allocate its frame buffers", st->id);
            goto fail;
        }
    }
    if (s->model && (rs = wrap_mask(s, b, cuda, err)))
        goto fail;
    b->tensors_ready = 1;
    return KEYER_OK;
fail:
    keyer_error_prefix(err, "stream %d: ", st->id);
    return rs;
}

keyer_status kr_item_bufs_ensure(kr_item *it, int cuda, keyer_error *err)
{
    kr_item_bufs *b = cuda ? &it->cuda : &it->host;
    if (b->ready)
        return KEYER_OK;
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    keyer_status rs = kr_item_tensors_ensure(it, cuda, err);
    if (rs)
        return rs;
    if (!s->model) { /* passthrough with detection: the frame itself is written */
        b->ready = 1;
        return KEYER_OK;
    }
    if ((rs = frame_alloc(s, cuda, &b->alpha, KEYER_PIXEL_FORMAT_GRAY8, st->width, st->height,
                          err)) ||
        (rs = frame_alloc(s, cuda, &b->out, out_format(s, st->format), st->width, st->height,
                          err)))
        return keyer_error_prefix(err, "stream %d: ", st->id);
    b->ready = 1;
    return KEYER_OK;
}

static void item_bufs_free(keyer_session *s, kr_item_bufs *b, int cuda)
{
    if (cuda && s->dev) {
        s->dev->free(s->ordinal, b->tensor);
        s->dev->free(s->ordinal, b->mask);
        s->dev->free(s->ordinal, b->det_tensor);
    } else if (!cuda) {
        keyer_free(NULL, b->tensor);
        keyer_free(NULL, b->mask);
        keyer_free(NULL, b->det_tensor);
    }
    b->tensor = NULL;
    b->mask = NULL;
    b->det_tensor = NULL;
    keyer_frame_destroy(&b->mask_frame);
    keyer_frame_destroy(&b->alpha);
    keyer_frame_destroy(&b->out);
    keyer_frame_destroy(&b->staged);
    keyer_frame_destroy(&b->bg);
    b->ready = b->tensors_ready = 0;
}

void kr_item_release(kr_item *it)
{
    keyer_frame_unref(it->frame);
    keyer_frame_unref(it->bg_src);
    it->src = NULL;
    it->bg = NULL;
    it->lost = it->failed = 0;
    it->seq = -1;
    /* the free list holds every item, so it is never full */
    kr_queue_try_push(it->stream->free_items, it);
}

/* ---- received frames: a ticket buffer returns the item when the caller lets go --------------- */

static void home_unref(kr_pool_home *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
}

static void ticket_free(void *opaque, void *data)
{
    kr_pool_home *h = opaque;
    pthread_mutex_lock(&h->lock);
    if (h->alive)
        kr_item_release(data);
    pthread_mutex_unlock(&h->lock);
    home_unref(h);
}

/* ---- stream set-up ----------------------------------------------------------------------------- */

static keyer_status stream_new(keyer_session *s, kr_stream **out, keyer_error *err)
{
    *out = NULL;
    int id = atomic_load(&s->stream_count);
    if (id >= s->params.max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: at most %d streams (max_streams)", s->params.max_streams);
    kr_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    st->session = s;
    st->id = id;
    st->last_pts = INT64_MIN;
    pthread_mutex_init(&st->err_lock, NULL);
    atomic_init(&st->reader_pub, NULL);
    atomic_init(&st->sink_finished, 0);
    atomic_init(&st->closed, 0);
    atomic_init(&st->frames_read, 0);
    atomic_init(&st->frames_written, 0);
    atomic_init(&st->frames_dropped, 0);
    atomic_init(&st->frames_damaged, 0);
    atomic_init(&st->frames_lost, 0);
    *out = st;
    return KEYER_OK;
}

static void stream_publish(keyer_session *s, kr_stream *st)
{
    s->streams[st->id] = st;
    atomic_store(&s->stream_count, st->id + 1);
}

static char *dup_str(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int effects_take(keyer_pixel_format f)
{
    return f == KEYER_PIXEL_FORMAT_NV12 || f == KEYER_PIXEL_FORMAT_P010 ||
           f == KEYER_PIXEL_FORMAT_YUV420P || f == KEYER_PIXEL_FORMAT_RGB24 ||
           f == KEYER_PIXEL_FORMAT_RGBA;
}

static int looks_live(const char *url)
{
    if (!strncmp(url, "/dev/video", 10) || !strncmp(url, "v4l2:", 5))
        return 1;
    const char *scheme = strstr(url, "://");
    return scheme && strncmp(url, "file://", 7) != 0;
}

keyer_status keyer_session_add_file(keyer_session *s, const keyer_file_stream_params *params,
                                    int *stream_id, keyer_error *err)
{
    if (!s || !params || !params->input)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_add_file: %s", !s ? "session is NULL"
                                                             : "no input given");
    if (s->run_called || s->started)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_add_file: the session is already running");
    kr_stream *st = NULL;
    keyer_status rs = stream_new(s, &st, err);
    if (rs)
        return rs;
    st->source = KR_SOURCE_READER;
    st->sink = params->output ? KR_SINK_WRITER : KR_SINK_DISCARD;
    st->input = dup_str(params->input);
    st->output = dup_str(params->output);
    if (!st->input || (params->output && !st->output)) {
        rs = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        goto fail;
    }
    st->reader_params = params->reader;
    st->reader_params.logger = s->logger;
    /* NVDEC only when the session may compute on CUDA: frames then stay on the GPU */
    st->reader_params.device = s->params.device == KEYER_DEVICE_CPU ? KEYER_DECODE_DEVICE_CPU
                               : params->reader.device == KEYER_DECODE_DEVICE_CPU
                                   ? KEYER_DECODE_DEVICE_CPU
                                   : (kr_device_cuda() ? KEYER_DECODE_DEVICE_AUTO
                                                       : KEYER_DECODE_DEVICE_CPU);
    st->reader_params.cuda_device = s->params.cuda_device;
    st->writer_params = params->writer;
    st->copy_streams = params->copy_streams;
    int live = params->live >= 0 ? params->live : s->params.live;
    st->live = live >= 0 ? live : looks_live(st->input);
    if ((rs = keyer_reader_open(st->input, &st->reader_params, &st->reader, err)))
        goto fail;
    const keyer_video_info *vi = keyer_reader_info(st->reader);
    if (!effects_take(vi->format)) {
        /* a format the effects do not take (gray, ...): let the reader convert */
        keyer_reader_destroy(&st->reader);
        st->reader_params.format = vi->has_alpha ? KEYER_PIXEL_FORMAT_RGBA
                                                 : KEYER_PIXEL_FORMAT_YUV420P;
        if ((rs = keyer_reader_open(st->input, &st->reader_params, &st->reader, err)))
            goto fail;
        vi = keyer_reader_info(st->reader);
    }
    st->info = *vi;
    st->width = vi->width;
    st->height = vi->height;
    st->format = vi->format;
    st->memory = vi->memory;
    st->time_base = vi->time_base;
    st->frame_rate = vi->frame_rate;
    if (st->frame_rate.num <= 0 || st->frame_rate.den <= 0)
        st->frame_rate = (keyer_rational){25, 1};
    atomic_store(&st->reader_pub, st->reader);
    stream_publish(s, st);
    if (stream_id)
        *stream_id = st->id;
    if (atomic_load(&s->cancel))
        keyer_reader_interrupt(st->reader);
    return KEYER_OK;
fail:
    kr_stream_destroy(&st);
    return rs;
}

static keyer_status open_writer(kr_stream *st, keyer_error *err)
{
    keyer_session *s = st->session;
    keyer_writer_params wp = st->writer_params;
    wp.width = st->width;
    wp.height = st->height;
    wp.frame_rate = st->frame_rate;
    wp.time_base = st->time_base;
    wp.logger = s->logger;
    int mode = s->params.composite.mode;
    wp.alpha = mode == KEYER_COMPOSITE_ALPHA || mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED;
    if (st->source == KR_SOURCE_READER) {
        wp.rotation = st->info.rotation;
        if (mode != KEYER_COMPOSITE_ALPHA && mode != KEYER_COMPOSITE_ALPHA_PREMULTIPLIED &&
            mode != KEYER_COMPOSITE_MASK) {
            wp.matrix = st->info.matrix;
            wp.range = st->info.range;
        }
        wp.copy_from = st->copy_streams ? st->reader : NULL;
    }
    keyer_status rs = keyer_writer_open(st->output, &wp, &st->writer, err);
    if (rs)
        return rs;
    snprintf(st->encoder, sizeof(st->encoder), "%s", keyer_writer_codec(st->writer));
    return KEYER_OK;
}

static keyer_status open_background_video(kr_stream *st, keyer_error *err)
{
    keyer_session *s = st->session;
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.keep_streams = 0;
    rp.logger = s->logger;
    rp.threads = 1;
    keyer_status rs = keyer_reader_open(s->background_path, &rp, &st->bg_reader, err);
    if (rs)
        return keyer_error_prefix(err, "background: ");
    st->bg_start_pts = keyer_reader_info(st->bg_reader)->start_pts;
    return KEYER_OK;
}

static void *reader_main(void *arg);
static void *sink_main(void *arg);

keyer_status kr_stream_start(kr_stream *st, keyer_error *err)
{
    keyer_session *s = st->session;
    if (st->started)
        return KEYER_OK;
    keyer_status rs;
    /* A pool big enough to keep every stage busy: the ingest queue, a batch, the composite
     * workers and the frames the shared queues may hold of this stream, plus slack. */
    int n = s->depth + s->batch + s->workers + 4;
    if (s->params.mode != KEYER_PIPELINE_LATENCY)
        n += s->depth;
    st->nitems = n;
    st->items = calloc((size_t)n, sizeof(*st->items));
    if (!st->items)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "stream %d: out of memory", st->id);
    if ((rs = kr_queue_create(n, &st->free_items, err)) ||
        (rs = kr_queue_create(s->depth, &st->ingest, err)) ||
        (rs = kr_reorder_create(n, &st->done, err)))
        return rs;
    st->home = calloc(1, sizeof(*st->home));
    if (!st->home)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "stream %d: out of memory", st->id);
    pthread_mutex_init(&st->home->lock, NULL);
    atomic_init(&st->home->refs, 1);
    st->home->alive = 1;
    st->home->free_items = st->free_items;
    for (int i = 0; i < n; i++) {
        kr_item *it = &st->items[i];
        it->stream = st;
        it->seq = -1;
        if ((rs = keyer_frame_create(&it->frame, err)) ||
            (rs = keyer_frame_create(&it->bg_src, err)))
            return rs;
        if (s->params.passthrough && !s->det_model) { /* the input frame itself is written */
            kr_queue_try_push(st->free_items, it);
            continue;
        }
        int cuda = s->use_cuda && !atomic_load(&s->gpu_failed);
        rs = kr_item_bufs_ensure(it, cuda, err);
        if (rs == KEYER_STATUS_OUT_OF_MEMORY && cuda) {
            /* no room on the GPU for this stream's frames: the session goes on on the CPU */
            kr_session_gpu_failure(s, err);
            keyer_error_clear(err);
            rs = kr_item_bufs_ensure(it, 0, err);
        }
        if (rs)
            return rs;
        kr_queue_try_push(st->free_items, it);
    }
    if (s->use_cuda && ((rs = s->dev->stream_create(s->ordinal, &st->prep_stream, err)) ||
                        (rs = s->dev->stream_create(s->ordinal, &st->sink_stream, err))))
        return rs;
    if (s->det_model && ((rs = keyer_overlay_create(KEYER_SESSION_OVERLAY_CAPACITY, &st->overlay, err)) ||
                         (s->use_cuda &&
                          (rs = keyer_overlay_set_stream(st->overlay, st->sink_stream, err)))))
        return rs;
    if (s->params.composite.mode == KEYER_COMPOSITE_IMAGE && !s->bg_image[0] &&
        (rs = open_background_video(st, err)))
        return rs;
    if (st->sink == KR_SINK_WRITER && (rs = open_writer(st, err)))
        return rs;
    if (st->source == KR_SOURCE_READER) {
        if (pthread_create(&st->reader_thread, NULL, reader_main, st))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream %d: cannot start a thread",
                                   st->id);
        st->reader_running = 1;
    }
    if (pthread_create(&st->prepare_thread, NULL, kr_prepare_main, st))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream %d: cannot start a thread",
                               st->id);
    st->prepare_running = 1;
    if (st->sink != KR_SINK_PULL) {
        if (pthread_create(&st->sink_thread, NULL, sink_main, st))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream %d: cannot start a thread",
                                   st->id);
        st->sink_running = 1;
    }
    st->started = 1;
    return KEYER_OK;
}

void kr_stream_destroy(kr_stream **sp)
{
    if (!sp || !*sp)
        return;
    kr_stream *st = *sp;
    keyer_session *s = st->session;
    kr_queue_cancel(st->ingest);
    kr_queue_cancel(st->free_items);
    kr_reorder_cancel(st->done);
    if (st->reader_running)
        pthread_join(st->reader_thread, NULL);
    if (st->prepare_running)
        pthread_join(st->prepare_thread, NULL);
    if (st->sink_running)
        pthread_join(st->sink_thread, NULL);
    /* the output is finalised with what reached it */
    if (st->writer) {
        keyer_error e = {0};
        if (keyer_writer_close(st->writer, &e))
            keyer_log(s->logger, KEYER_LOG_ERROR, "%s", e.message);
        keyer_writer_destroy(&st->writer);
    }
    if (st->home) {
        pthread_mutex_lock(&st->home->lock);
        st->home->alive = 0;
        pthread_mutex_unlock(&st->home->lock);
        home_unref(st->home);
    }
    if (st->items) {
        for (int i = 0; i < st->nitems; i++) {
            kr_item *it = &st->items[i];
            keyer_frame_destroy(&it->frame);
            keyer_frame_destroy(&it->bg_src);
            keyer_frame_destroy(&it->input_copy);
            item_bufs_free(s, &it->host, 0);
            item_bufs_free(s, &it->cuda, 1);
        }
        free(st->items);
    }
    keyer_frame_destroy(&st->hook_in);
    keyer_frame_destroy(&st->hook_out);
    keyer_frame_destroy(&st->drawn);
    keyer_overlay_destroy(&st->overlay);
    for (int d = 0; d < 2; d++) {
        keyer_prepare_destroy(&st->prep[d]);
        keyer_prepare_destroy(&st->det_prep[d]);
    }
    if (s->dev) {
        s->dev->stream_destroy(s->ordinal, st->prep_stream);
        s->dev->stream_destroy(s->ordinal, st->sink_stream);
    }
    atomic_store(&st->reader_pub, NULL);
    keyer_reader_destroy(&st->reader);
    keyer_reader_destroy(&st->bg_reader);
    kr_queue_destroy(&st->free_items);
    kr_queue_destroy(&st->ingest);
    kr_reorder_destroy(&st->done);
    pthread_mutex_destroy(&st->err_lock);
    free(st->input);
    free(st->output);
    free(st);
    *sp = NULL;
}

/* ---- file source ------------------------------------------------------------------------------ */

/* Reads the next background video frame into @p dst, looping at the end. */
static void read_background(kr_stream *st, keyer_frame *dst)
{
    keyer_error e = {0};
    keyer_status rs = keyer_reader_read(st->bg_reader, dst, &e);
    if (rs == KEYER_STATUS_END) {
        keyer_error_clear(&e);
        int64_t start = st->bg_start_pts == INT64_MIN ? 0 : st->bg_start_pts;
        rs = keyer_reader_seek(st->bg_reader, start, &e);
        if (!rs)
            rs = keyer_reader_read(st->bg_reader, dst, &e);
    }
    if (rs) {
        keyer_frame_unref(dst);
        if (!st->bg_warned) {
            st->bg_warned = 1;
            kr_session_warn(st->session, "background video: %s; the last frame is kept",
                            e.message[0] ? e.message : keyer_status_name(rs));
        }
    }
}

/* A free item, or for a live source the oldest one still waiting for prepare (dropped). */
static kr_item *take_free_item(kr_stream *st, int wait)
{
    void *p = NULL;
    if (kr_queue_try_pop(st->free_items, &p) == KEYER_OK)
        return p;
    if (st->live && kr_queue_try_pop(st->ingest, &p) == KEYER_OK) {
        kr_item *old = p;
        atomic_fetch_add(&st->frames_dropped, 1);
        keyer_frame_unref(old->frame);
        keyer_frame_unref(old->bg_src);
        return old;
    }
    if (!wait)
        return NULL;
    if (kr_queue_pop(st->free_items, &p) != KEYER_OK)
        return NULL;
    return p;
}

static int same_geometry(const kr_stream *st, const keyer_frame *f)
{
    return f->width == st->width && f->height == st->height && f->format == st->format;
}

/* Hands an item to prepare; returns 0 when the stream must stop. */
static int ingest(kr_stream *st, kr_item *it)
{
    if (st->live) {
        void *dropped = NULL;
        keyer_status rs = kr_queue_push_drop_oldest(st->ingest, it, &dropped);
        if (dropped) {
            atomic_fetch_add(&st->frames_dropped, 1);
            kr_item_release(dropped);
        }
        if (rs) {
            kr_item_release(it);
            return 0;
        }
        return 1;
    }
    if (kr_queue_push(st->ingest, it)) {
        kr_item_release(it);
        return 0;
    }
    return 1;
}

/* Realtime reading: sleeps until the frame's presentation time (relative to the first). */
static void pace(kr_stream *st, const keyer_frame *f, int64_t *origin_ns, int64_t *origin_pts)
{
    if (f->pts == INT64_MIN || st->time_base.den <= 0 || st->time_base.num <= 0)
        return;
    if (*origin_pts == INT64_MIN) {
        *origin_pts = f->pts;
        *origin_ns = kr_clock_ns();
        return;
    }
    double t = (double)(f->pts - *origin_pts) * st->time_base.num / st->time_base.den;
    if (!(t > 0) || t > 86400.0)
        return;
    int64_t due = *origin_ns + (int64_t)(t * 1e9);
    struct timespec ts = kr_clock_deadline(due);
    while (kr_clock_ns() < due && !atomic_load(&st->session->cancel))
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != EINTR)
            break;
}

/* Realtime at a known frame rate: frame @p index is released at origin + index / rate, as a
 * camera delivers it, and decoding starts then, so the latency measured from its release
 * includes decoding. Waits for that time and returns it. */
static int64_t release_at_rate(kr_stream *st, int64_t *origin_ns, int64_t index)
{
    int64_t now = kr_clock_ns();
    if (index == 0)
        *origin_ns = now;
    double t = (double)index * st->frame_rate.den / st->frame_rate.num;
    int64_t due = *origin_ns + (int64_t)(t * 1e9);
    struct timespec ts = kr_clock_deadline(due);
    while (kr_clock_ns() < due && !atomic_load(&st->session->cancel))
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != EINTR)
            break;
    return due;
}

static void *reader_main(void *arg)
{
    kr_stream *st = arg;
    keyer_session *s = st->session;
    int track = kr_trace_thread(s->trace, "read", st->id);
    int64_t origin_ns = 0, origin_pts = INT64_MIN;
    int at_rate = s->params.realtime && st->info.frame_rate.num > 0 &&
                  st->info.frame_rate.den > 0 && st->frame_rate.num > 0 &&
                  (double)st->frame_rate.num / st->frame_rate.den <= 1000.0;
    int64_t released = 0, due = 0;
    while (!atomic_load(&s->cancel)) {
        kr_item *it = take_free_item(st, 1);
        if (!it)
            break;
        if (atomic_load(&s->cancel)) {
            kr_item_release(it);
            break;
        }
        keyer_error e = {0};
        if (at_rate)
            due = release_at_rate(st, &origin_ns, released++);
        int64_t t0 = kr_clock_ns();
        keyer_status rs = keyer_reader_read(st->reader, it->frame, &e);
        int64_t t1 = kr_clock_ns();
        if (rs == KEYER_STATUS_END || rs == KEYER_STATUS_INTERRUPTED) {
            kr_item_release(it);
            break;
        }
        if (rs) {
            kr_item_release(it);
            keyer_error_prefix(&e, "reading %s: ", st->input);
            kr_stream_fail(st, rs, &e, 1);
            break;
        }
        if (!same_geometry(st, it->frame)) {
            atomic_fetch_add(&st->frames_dropped, 1);
            if (!st->geometry_warned) {
                st->geometry_warned = 1;
                kr_session_warn(s, "%s: a frame of %dx%d %s in a %dx%d %s stream is skipped "
                                   "(size changes are not supported)",
                                st->input, it->frame->width, it->frame->height,
                                keyer_pixel_format_name(it->frame->format), st->width, st->height,
                                keyer_pixel_format_name(st->format));
            }
            atomic_fetch_add(&st->frames_read, 1);
            kr_item_release(it);
            continue;
        }
        int64_t arrive = t1;
        if (at_rate) {
            arrive = due; /* decoding counts in the frame's latency */
        } else if (s->params.realtime) {
            pace(st, it->frame, &origin_ns, &origin_pts);
            arrive = kr_clock_ns(); /* the frame "arrives" now */
        }
        if (it->frame->flags & KEYER_FRAME_FLAG_CORRUPT)
            atomic_fetch_add(&st->frames_damaged, 1);
        if (it->frame->time_base.num <= 0 || it->frame->time_base.den <= 0)
            it->frame->time_base = st->time_base;
        atomic_fetch_add(&st->frames_read, 1);
        it->t_in = arrive;
        kr_stage_stats_record(&s->stages[KR_ST_READ], 1, t0, t1);
        kr_trace_add(s->trace, track, "read", st->id, atomic_load(&st->frames_read) - 1, 1, t0,
                     t1);
        if (st->bg_reader)
            read_background(st, it->bg_src);
        if (!ingest(st, it))
            break;
    }
    kr_queue_close(st->ingest);
    return NULL;
}

/* ---- sinks ------------------------------------------------------------------------------------- */

void kr_stream_account_out(kr_stream *st, kr_item *it)
{
    keyer_session *s = st->session;
    int64_t now = kr_clock_ns();
    atomic_fetch_add(&st->frames_written, 1);
    pthread_mutex_lock(&s->stats_lock);
    kr_histogram_add(&s->e2e, now - it->t_in);
    if (now > s->t_last)
        s->t_last = now;
    pthread_mutex_unlock(&s->stats_lock);
}

/* A host copy of @p f in *slot (allocated on the first frame and when the size changes). */
keyer_status kr_stream_copy_frame(kr_stream *st, keyer_frame **slot, const keyer_frame *f,
                                  int cuda, keyer_error *err)
{
    keyer_status rs = kr_stage_copy(st->session, slot, f, cuda, st->sink_stream, err);
    if (rs)
        return rs;
    keyer_frame *d = *slot;
    d->pts = f->pts;
    d->duration = f->duration;
    d->time_base = f->time_base;
    d->flags = f->flags;
    d->matrix = f->matrix;
    d->range = f->range;
    return KEYER_OK;
}

/* Calls the session's frame_fn with host frames; *out becomes the frame to write. */
static keyer_status call_frame_fn(kr_item *it, const keyer_frame **out, keyer_error *err)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    const keyer_frame *in = it->frame && it->frame->data[0] ? it->frame : it->src;
    keyer_status rs = KEYER_OK;
    if (in->memory != KEYER_MEMORY_HOST) {
        if ((rs = kr_stream_copy_frame(st, &st->hook_in, in, 0, err)))
            return rs;
        in = st->hook_in;
    }
    keyer_frame *w = NULL;
    if ((s->params.passthrough && *out == it->src) || (*out)->memory != KEYER_MEMORY_HOST) {
        if ((rs = kr_stream_copy_frame(st, &st->hook_out, *out, 0, err)))
            return rs;
        w = st->hook_out;
    } else {
        w = (keyer_frame *)*out; /* the item's own composite buffer */
    }
    if ((rs = s->params.frame_fn(s->params.frame_opaque, st->id, it->seq, in, w, err)))
        return rs;
    *out = w;
    return KEYER_OK;
}

/* The item's output in host memory when the GPU failed, else where it is. */
static const keyer_frame *output_of(kr_item *it, keyer_error *err, keyer_status *rs)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    *rs = KEYER_OK;
    if (s->params.passthrough)
        return it->src;
    if (!it->on_cuda)
        return it->host.out;
    if (!atomic_load(&s->gpu_failed))
        return it->cuda.out;
    /* the GPU failed after this frame was composited there: bring it over */
    if ((*rs = kr_item_bufs_ensure(it, 0, err)) ||
        (*rs = kr_download_frame(s, it->host.out, it->cuda.out, st->sink_stream, err)))
        return NULL;
    return it->host.out;
}

static void *sink_main(void *arg)
{
    kr_stream *st = arg;
    keyer_session *s = st->session;
    int track = kr_trace_thread(s->trace, "write", st->id);
    int writing = 1;
    for (;;) {
        void *p = NULL;
        if (kr_reorder_take(st->done, &p, 1) != KEYER_OK)
            break;
        kr_item *it = p;
        if (it->lost)
            atomic_fetch_add(&st->frames_lost, 1);
        if (!it->lost && !it->failed && writing) {
            int64_t t0 = kr_clock_ns();
            keyer_error e = {0};
            keyer_status rs = KEYER_OK;
            const keyer_frame *out = output_of(it, &e, &rs);
            if (!out) {
                atomic_fetch_add(&st->frames_lost, 1);
                keyer_log(s->logger, KEYER_LOG_ERROR, "stream %d: frame %lld lost: %s", st->id,
                          (long long)it->seq, e.message);
            } else {
                /* keyed outputs are the item's own buffers: drawn on in place */
                if (s->det_model && (rs = kr_detect_draw(it, &out, !s->params.passthrough, &e))) {
                    keyer_error_prefix(&e, "stream %d, frame %lld: ", st->id, (long long)it->seq);
                    kr_stream_fail(st, rs, &e, 1);
                    writing = 0;
                } else if (s->params.frame_fn && (rs = call_frame_fn(it, &out, &e))) {
                    keyer_error_prefix(&e, "stream %d, frame %lld: ", st->id, (long long)it->seq);
                    kr_stream_fail(st, rs, &e, 1);
                    writing = 0;
                } else if (st->writer && (rs = keyer_writer_write(st->writer, out, &e))) {
                    keyer_error_prefix(&e, "writing %s: ", st->output);
                    kr_stream_fail(st, rs, &e, 1);
                    writing = 0;
                } else {
                    int64_t t1 = kr_clock_ns();
                    kr_stage_stats_record(&s->stages[KR_ST_WRITE], 1, t0, t1);
                    kr_trace_add(s->trace, track, "write", st->id, it->seq, 1, t0, t1);
                    kr_stream_account_out(st, it);
                }
            }
        }
        kr_item_release(it);
    }
    atomic_store(&st->sink_finished, 1);
    kr_session_notify(s);
    return NULL;
}

/* ---- pushed streams ---------------------------------------------------------------------------- */

static kr_stream *pushed_stream(keyer_session *s, int id, keyer_error *err, const char *fn)
{
    if (!s || id < 0 || id >= atomic_load(&s->stream_count) || !s->streams[id]) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: no stream %d", fn, id);
        return NULL;
    }
    kr_stream *st = s->streams[id];
    if (st->source != KR_SOURCE_PUSH) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                        "%s: stream %d reads a file; it takes no frames", fn, id);
        return NULL;
    }
    return st;
}

keyer_status keyer_session_open_stream(keyer_session *s, const keyer_stream_params *params,
                                       int *stream_id, keyer_error *err)
{
    if (!s || !params)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: NULL argument");
    if (params->width < 1 || params->height < 1 || params->width > 16384 ||
        params->height > 16384)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: size %dx%d is outside 1..16384",
                               params->width, params->height);
    if (!effects_take(params->format))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: format %s is not supported (nv12, "
                               "p010, yuv420p, rgb24, rgba)",
                               keyer_pixel_format_name(params->format));
    if (params->memory == KEYER_MEMORY_CUDA && !kr_device_cuda())
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keyer_session_open_stream: CUDA frames, and keyer was built "
                               "without CUDA");
    if (params->output && (params->frame_rate.num <= 0 || params->frame_rate.den <= 0))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: an output needs a frame rate");
    kr_stream *st = NULL;
    keyer_status rs = stream_new(s, &st, err);
    if (rs)
        return rs;
    st->source = KR_SOURCE_PUSH;
    st->sink = params->output ? KR_SINK_WRITER : KR_SINK_PULL;
    st->width = params->width;
    st->height = params->height;
    st->format = params->format;
    st->memory = params->memory;
    st->live = params->live > 0;
    st->frame_rate = params->frame_rate;
    st->time_base = params->time_base;
    if (st->time_base.num <= 0 || st->time_base.den <= 0)
        st->time_base = st->frame_rate.num > 0 ? (keyer_rational){st->frame_rate.den,
                                                                  st->frame_rate.num}
                                               : (keyer_rational){1, 1000000};
    st->writer_params = params->writer;
    st->output = dup_str(params->output);
    if (params->output && !st->output) {
        rs = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        goto fail;
    }
    /* the first stream decides the model (by its aspect ratio) and starts the stages */
    stream_publish(s, st);
    if ((rs = kr_session_start(s, err)) || (rs = kr_stream_start(st, err))) {
        s->streams[st->id] = NULL;
        atomic_store(&s->stream_count, st->id);
        goto fail;
    }
    if (stream_id)
        *stream_id = st->id;
    return KEYER_OK;
fail:
    kr_stream_destroy(&st);
    return rs;
}

keyer_status keyer_session_send_frame(keyer_session *s, int stream_id, const keyer_frame *frame,
                                      keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_send_frame");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    if (atomic_load(&st->closed))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_send_frame: stream %d is closed", stream_id);
    if (atomic_load(&s->cancel))
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                               "keyer_session_send_frame: the session was cancelled");
    pthread_mutex_lock(&st->err_lock);
    keyer_status failed = st->status;
    if (failed && err)
        *err = st->error;
    pthread_mutex_unlock(&st->err_lock);
    if (failed)
        return failed;
    keyer_status rs = keyer_frame_check(frame, err);
    if (rs)
        return keyer_error_prefix(err, "keyer_session_send_frame: ");
    if (!same_geometry(st, frame))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_send_frame: a %dx%d %s frame in a %dx%d %s stream",
                               frame->width, frame->height, keyer_pixel_format_name(frame->format),
                               st->width, st->height, keyer_pixel_format_name(st->format));
    if (frame->memory == KEYER_MEMORY_CUDA && !kr_device_cuda())
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keyer_session_send_frame: a CUDA frame without CUDA support");
    kr_item *it = take_free_item(st, 0);
    if (!it)
        return KEYER_STATUS_AGAIN;
    int64_t t0 = kr_clock_ns();
    if (frame->buf[0]) {
        rs = keyer_frame_ref(it->frame, frame, err);
    } else {
        /* no buffers to hold on to: copy into the item's own frame (made once) */
        if (!it->input_copy) {
            const kr_device_fns *dev = kr_device_cuda();
            rs = keyer_frame_create(&it->input_copy, err);
            if (!rs && frame->memory == KEYER_MEMORY_CUDA)
                rs = kr_device_frame_alloc(dev, frame->device, it->input_copy, frame->format,
                                           frame->width, frame->height, err);
            else if (!rs)
                rs = keyer_frame_alloc(it->input_copy, frame->format, frame->width,
                                       frame->height, NULL, err);
            if (rs)
                keyer_frame_destroy(&it->input_copy);
        }
        if (!rs)
            rs = kr_device_frame_copy(kr_device_cuda(), frame->device, it->input_copy, frame,
                                      NULL, err);
        if (!rs)
            rs = keyer_frame_ref(it->frame, it->input_copy, err);
    }
    if (rs) {
        kr_item_release(it);
        return keyer_error_prefix(err, "keyer_session_send_frame: ");
    }
    if (it->frame->time_base.num <= 0 || it->frame->time_base.den <= 0)
        it->frame->time_base = st->time_base;
    if (st->bg_reader)
        read_background(st, it->bg_src);
    int64_t t1 = kr_clock_ns();
    it->t_in = t0;
    atomic_fetch_add(&st->frames_read, 1);
    kr_stage_stats_record(&s->stages[KR_ST_READ], 1, t0, t1);
    if (!ingest(st, it))
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                               "keyer_session_send_frame: the session is stopping");
    return KEYER_OK;
}

keyer_status keyer_session_receive_frame(keyer_session *s, int stream_id, keyer_frame *out,
                                         int64_t timeout_us, keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_receive_frame");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_receive_frame: out is NULL");
    if (st->sink != KR_SINK_PULL)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_receive_frame: stream %d writes to %s", stream_id,
                               st->output);
    int64_t deadline = timeout_us > 0 ? kr_clock_ns() + timeout_us * 1000 : 0;
    for (;;) {
        void *p = NULL;
        keyer_status rs;
        if (timeout_us < 0) {
            rs = kr_reorder_take(st->done, &p, 1);
        } else {
            int64_t left = deadline ? deadline - kr_clock_ns() : 0;
            rs = kr_reorder_take_timed(st->done, &p, left > 0 ? left : 0);
        }
        if (rs == KEYER_STATUS_END) {
            pthread_mutex_lock(&st->err_lock);
            keyer_status failed = st->status;
            if (failed && err)
                *err = st->error;
            pthread_mutex_unlock(&st->err_lock);
            return failed ? failed : KEYER_STATUS_END;
        }
        if (rs == KEYER_STATUS_INTERRUPTED)
            return keyer_error_set(err, rs, "keyer_session_receive_frame: the session stopped");
        if (rs)
            return rs; /* AGAIN */
        kr_item *it = p;
        if (it->lost || it->failed) {
            if (it->lost)
                atomic_fetch_add(&st->frames_lost, 1);
            kr_item_release(it);
            continue;
        }
        keyer_error e = {0};
        const keyer_frame *res = output_of(it, &e, &rs);
        if (!res) {
            atomic_fetch_add(&st->frames_lost, 1);
            kr_item_release(it);
            continue;
        }
        /* out refers to the item's pixels; a ticket in an unused buffer slot returns the
         * item to the pool when the caller drops the frame */
        keyer_buffer *ticket = NULL;
        if ((rs = keyer_frame_ref(out, res, err)) ||
            (rs = keyer_buffer_wrap(it, 1, KEYER_MEMORY_HOST, ticket_free, st->home, &ticket,
                                    err))) {
            keyer_frame_unref(out);
            kr_item_release(it);
            return rs;
        }
        atomic_fetch_add(&st->home->refs, 1);
        keyer_buffer_unref(&out->buf[KEYER_FRAME_MAX_PLANES - 1]);
        out->buf[KEYER_FRAME_MAX_PLANES - 1] = ticket;
        kr_stream_account_out(st, it);
        return KEYER_OK;
    }
}

keyer_status keyer_session_close_stream(keyer_session *s, int stream_id, keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_close_stream");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    if (atomic_exchange(&st->closed, 1))
        return KEYER_OK;
    kr_queue_close(st->ingest);
    if (st->sink != KR_SINK_WRITER)
        return KEYER_OK;
    if (st->sink_running) {
        pthread_join(st->sink_thread, NULL);
        st->sink_running = 0;
    }
    keyer_status rs = KEYER_OK;
    if (st->writer)
        rs = keyer_writer_close(st->writer, err);
    pthread_mutex_lock(&st->err_lock);
    if (!rs && st->status) {
        rs = st->status;
        if (err)
            *err = st->error;
    }
    pthread_mutex_unlock(&st->err_lock);
    return rs;
}
