/* Streams of a session: opening, starting and stopping, the file source, pushed frames. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/clock.h"

/* ---- errors ---------------------------------------------------------------------------------- */

void kr_stream_record_error(kr_stream *st, keyer_status status, const keyer_error *err)
{
    pthread_mutex_lock(&st->err_lock);
    if (st->status == KEYER_OK) {
        st->status = status;
        st->error.status = status;
        snprintf(st->error.message, sizeof(st->error.message), "%s",
                 err && err->message[0] ? err->message : keyer_status_name(status));
    }
    pthread_mutex_unlock(&st->err_lock);
    atomic_store(&st->stop, 1);
    kr_stream_interrupt(st);
}

/* Whether the stream's source stops: the session's or the stream's own stop. */
static int stream_stopped(const kr_stream *st)
{
    return kr_stage_cancelled(st->env->ctx) || atomic_load(&st->stop);
}

/* A fatal error of the stream: the session records it as the stream's and its own. */
static void stream_fail(kr_stream *st, keyer_status status, const keyer_error *err)
{
    kr_stage_fail(st->env->ctx, st->id, status, err);
}

/* ---- opening --------------------------------------------------------------------------------- */

static keyer_status stream_new(const kr_stream_env *env, int id, kr_stream **out,
                               keyer_error *err)
{
    *out = NULL;
    kr_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    st->env = env;
    st->id = id;
    pthread_mutex_init(&st->err_lock, NULL);
    atomic_init(&st->reader_pub, NULL);
    atomic_init(&st->sink_finished, 0);
    atomic_init(&st->closed, 0);
    atomic_init(&st->stop, 0);
    atomic_init(&st->frames_read, 0);
    atomic_init(&st->frames_written, 0);
    atomic_init(&st->frames_dropped, 0);
    atomic_init(&st->frames_damaged, 0);
    atomic_init(&st->frames_lost, 0);
    atomic_init(&st->switch_missed, 0);
    *out = st;
    return KEYER_OK;
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

keyer_status kr_stream_open_file(const kr_stream_env *env, int id,
                                 const keyer_file_stream_params *params, kr_stream **out,
                                 keyer_error *err)
{
    const keyer_session_params *sp = env->params;
    kr_stream *st = NULL;
    keyer_status rs = stream_new(env, id, &st, err);
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
    st->reader_params.logger = env->ctx->logger;
    /* NVDEC only when the session may compute on CUDA: frames then stay on the GPU */
    st->reader_params.device = sp->device == KEYER_DEVICE_CPU ? KEYER_DECODE_DEVICE_CPU
                               : params->reader.device == KEYER_DECODE_DEVICE_CPU
                                   ? KEYER_DECODE_DEVICE_CPU
                                   : (kr_device_cuda() ? KEYER_DECODE_DEVICE_AUTO
                                                       : KEYER_DECODE_DEVICE_CPU);
    st->reader_params.cuda_device = sp->cuda_device;
    st->reader_params.reconnect = sp->reconnect;
    st->reader_params.reconnect_max = sp->reconnect_max;
    st->reader_params.timeout = sp->input_timeout;
    st->writer_params = params->writer;
    st->copy_streams = params->copy_streams;
    int live = params->live >= 0 ? params->live : sp->live;
    st->live = live >= 0 ? live : looks_live(st->input);
    /* decode-ahead delays every frame: not for live inputs, paced files or latency mode */
    kr_stream_decoder_knobs(sp, st->live || sp->realtime || sp->mode == KEYER_PIPELINE_LATENCY,
                            &st->reader_params);
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
    *out = st;
    return KEYER_OK;
fail:
    kr_stream_destroy(&st);
    return rs;
}

keyer_status kr_stream_open_failed(const kr_stream_env *env, int id,
                                   const keyer_file_stream_params *params, keyer_status status,
                                   const keyer_error *cause, kr_stream **out, keyer_error *err)
{
    kr_stream *st = NULL;
    keyer_status rs = stream_new(env, id, &st, err);
    if (rs)
        return rs;
    st->source = KR_SOURCE_READER;
    st->sink = params->output ? KR_SINK_WRITER : KR_SINK_DISCARD;
    st->open_failed = 1;
    st->input = dup_str(params->input);
    st->output = dup_str(params->output);
    if (!st->input || (params->output && !st->output)) {
        kr_stream_destroy(&st);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    }
    kr_stream_record_error(st, status, cause);
    *out = st;
    return KEYER_OK;
}

keyer_status kr_stream_open_push(const kr_stream_env *env, int id,
                                 const keyer_stream_params *params, kr_stream **out,
                                 keyer_error *err)
{
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
    if (id >= env->params->max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: at most %d streams (max_streams)",
                               env->params->max_streams);
    kr_stream *st = NULL;
    keyer_status rs = stream_new(env, id, &st, err);
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
        kr_stream_destroy(&st);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    }
    *out = st;
    return KEYER_OK;
}

/* ---- starting and stopping ------------------------------------------------------------------- */

static keyer_status open_writer(kr_stream *st, keyer_error *err)
{
    const kr_stream_env *env = st->env;
    keyer_writer_params wp = st->writer_params;
    wp.width = st->width;
    wp.height = st->height;
    wp.frame_rate = st->frame_rate;
    wp.time_base = st->time_base;
    wp.logger = env->ctx->logger;
    if (!wp.encoder_probe)
        wp.encoder_probe = env->encoder_probe;
    int mode = env->params->composite.mode;
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
    const kr_stream_env *env = st->env;
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.keep_streams = 0;
    rp.logger = env->ctx->logger;
    rp.threads = 1;
    keyer_status rs = keyer_reader_open(env->params->background, &rp, &st->bg_reader, err);
    if (rs)
        return keyer_error_prefix(err, "background: ");
    st->bg_start_pts = keyer_reader_info(st->bg_reader)->start_pts;
    return KEYER_OK;
}

static keyer_pixel_format out_format(const kr_stream_env *env, keyer_pixel_format in)
{
    switch (env->params->composite.mode) {
    case KEYER_COMPOSITE_ALPHA:
    case KEYER_COMPOSITE_ALPHA_PREMULTIPLIED:
        return KEYER_PIXEL_FORMAT_RGBA;
    case KEYER_COMPOSITE_MASK:
        return KEYER_PIXEL_FORMAT_GRAY8;
    default:
        return in;
    }
}

/* The stream's items, queues and prepare stage. */
static keyer_status start_items(kr_stream *st, keyer_error *err)
{
    const kr_stream_env *env = st->env;
    const kr_device_fns *dev = env->layout.dev;
    keyer_status rs;
    int n = env->pool_size;
    if ((rs = kr_queue_create(env->depth, &st->ingest, err)) ||
        (rs = kr_reorder_create(n, &st->done, err)))
        return rs;
    if (env->use_cuda && ((rs = dev->stream_create(env->layout.ordinal, &st->prep_stream, err)) ||
                          (rs = dev->stream_create(env->layout.ordinal, &st->sink_stream, err))))
        return rs;
    kr_item_layout layout = env->layout;
    layout.stream = st->id;
    layout.width = st->width;
    layout.height = st->height;
    layout.out_format = out_format(env, st->format);
    layout.copy_stream = st->prep_stream;
    if ((rs = kr_item_pool_create(&layout, n, env->buffers, env->use_cuda, st->done, &st->pool,
                                  err)))
        return rs;
    kr_prepare_stage_params pp = {
        .ctx = env->ctx,
        .stats = env->prepare_stats,
        .stream = st->id,
        .in = st->ingest,
        .out = env->first,
        .done = st->done,
        .inputs = env->inputs,
        .use_cuda = env->use_cuda,
        .dev = dev,
        .ordinal = env->layout.ordinal,
        .cuda_stream = st->prep_stream,
        .threads = env->threads,
        .streams = env->stream_count,
    };
    for (int i = 0; i < env->inputs; i++)
        pp.input[i] = env->input[i];
    return kr_prepare_stage_create(&pp, &st->prepare, err);
}

static void *reader_main(void *arg);

/* Passthrough with the session's detector on CUDA frames: the copy the sink draws on and the
 * overlay renderer's device buffers are made now, and its kernels loaded by drawing one
 * transparent dot, before the first frame is read, so that the first frames do not wait for
 * device allocations (which wait for the device) next to every other stream's. A failure here
 * only leaves that work to the first frame, which reports it. */
static void warm_drawing(kr_stream *st)
{
    const kr_stream_env *env = st->env;
    const kr_device_fns *dev = env->layout.dev;
    if (!env->detect || !env->params->passthrough || !env->use_cuda || !dev || !st->overlay ||
        st->memory != KEYER_MEMORY_CUDA || st->drawn)
        return;
    keyer_error e = {0};
    const keyer_color clear = {0.0f, 0.0f, 0.0f, 0.0f};
    int ordinal = env->layout.ordinal;
    if (keyer_frame_create(&st->drawn, &e) ||
        kr_device_frame_alloc(dev, ordinal, st->drawn, st->format, st->width, st->height, &e) ||
        keyer_overlay_add_dot(st->overlay, 1.0f, 1.0f, 1.0f, clear, &e) ||
        keyer_overlay_render(st->overlay, st->drawn, &e) ||
        dev->stream_sync(ordinal, st->sink_stream, &e))
        keyer_log(env->ctx->logger, KEYER_LOG_DEBUG, "stream %d: drawing not warmed up: %s",
                  st->id, e.message);
    keyer_overlay_clear(st->overlay);
}

keyer_status kr_stream_start(kr_stream *st, keyer_error *err)
{
    const kr_stream_env *env = st->env;
    if (st->started)
        return KEYER_OK;
    keyer_status rs;
    if ((rs = start_items(st, err)))
        return rs;
    if (env->detect &&
        ((rs = keyer_overlay_create(KEYER_SESSION_OVERLAY_CAPACITY, &st->overlay, err)) ||
         (env->use_cuda && (rs = keyer_overlay_set_stream(st->overlay, st->sink_stream, err)))))
        return rs;
    warm_drawing(st);
    if (env->bg_video && (rs = open_background_video(st, err)))
        return rs;
    /* a continuation writes with the writer its first stream hands over (handoff.h) */
    if (st->sink == KR_SINK_WRITER && !st->continuation && (rs = open_writer(st, err)))
        return rs;
    if (st->source == KR_SOURCE_READER) {
        if (pthread_create(&st->reader_thread, NULL, reader_main, st))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream %d: cannot start a thread",
                                   st->id);
        st->reader_running = 1;
    }
    if ((rs = kr_prepare_stage_start(st->prepare, err)))
        return rs;
    if (st->sink != KR_SINK_PULL) {
        if (pthread_create(&st->sink_thread, NULL, kr_sink_main, st))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream %d: cannot start a thread",
                                   st->id);
        st->sink_running = 1;
    }
    st->started = 1;
    return KEYER_OK;
}

void kr_stream_interrupt(kr_stream *st)
{
    keyer_reader_interrupt(atomic_load(&st->reader_pub));
}

void kr_stream_cancel(kr_stream *st)
{
    kr_queue_cancel(st->ingest);
    kr_item_pool_cancel(st->pool);
    kr_reorder_cancel(st->done);
}

int kr_stream_sink_pending(kr_stream *st)
{
    return st->source == KR_SOURCE_READER && st->sink_running && !atomic_load(&st->sink_finished);
}

void kr_stream_finish(kr_stream *st, keyer_status *first, keyer_error *first_err)
{
    if (st->sink_running) {
        pthread_join(st->sink_thread, NULL);
        st->sink_running = 0;
    }
    kr_prepare_stage_join(st->prepare);
    if (st->reader_running) {
        pthread_join(st->reader_thread, NULL);
        st->reader_running = 0;
    }
    if (st->writer) {
        keyer_error we = {0};
        keyer_status ws = keyer_writer_close(st->writer, &we);
        if (ws && !*first) {
            *first = ws;
            *first_err = we;
        }
    }
    if (st->status && !*first) {
        *first = st->status;
        *first_err = st->error;
    }
}

void kr_stream_destroy(kr_stream **sp)
{
    if (!sp || !*sp)
        return;
    kr_stream *st = *sp;
    const kr_stream_env *env = st->env;
    kr_stream_cancel(st);
    if (st->reader_running)
        pthread_join(st->reader_thread, NULL);
    kr_prepare_stage_join(st->prepare);
    if (st->sink_running)
        pthread_join(st->sink_thread, NULL);
    /* the output is finalised with what reached it */
    if (st->writer) {
        keyer_error e = {0};
        if (keyer_writer_close(st->writer, &e))
            keyer_log(env->ctx->logger, KEYER_LOG_ERROR, "%s", e.message);
        keyer_writer_destroy(&st->writer);
    }
    kr_item_pool_destroy(&st->pool);
    keyer_frame_destroy(&st->hook_in);
    keyer_frame_destroy(&st->hook_out);
    keyer_frame_destroy(&st->drawn);
    keyer_overlay_destroy(&st->overlay);
    kr_prepare_stage_destroy(&st->prepare);
    if (env->layout.dev) {
        env->layout.dev->stream_destroy(env->layout.ordinal, st->prep_stream);
        env->layout.dev->stream_destroy(env->layout.ordinal, st->sink_stream);
    }
    atomic_store(&st->reader_pub, NULL);
    keyer_reader_destroy(&st->reader);
    keyer_reader_destroy(&st->bg_reader);
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
            kr_stage_warn(st->env->ctx, "background video: %s; the last frame is kept",
                          e.message[0] ? e.message : keyer_status_name(rs));
        }
    }
}

/* A free item, or for a live source the oldest one still waiting for prepare (dropped). */
static kr_item *take_free_item(kr_stream *st, int wait);

/*
 * The reader's next item. A stream that may move to another GPU (env->failover) waits for it
 * in steps of 20 ms and, between them, moves when its engine's GPU has failed: a reader
 * waiting for its pool while the failed GPU's frames are finished on the CPU would otherwise
 * notice the failure only after them. Returns NULL when the reader stops: *@p moved 1 when
 * the rest of the stream moved.
 */
static kr_item *next_item(kr_stream *st, int64_t last_pts, int64_t ingested, int *moved)
{
    const kr_stream_env *env = st->env;
    *moved = 0;
    for (;;) {
        /* this engine's GPU failed: the rest of the input may move to another GPU (a
         * continuation stream there reads on from the next frame; the frames read so far
         * are finished here, on the CPU) */
        if (env->failover && kr_stage_gpu_failed(env->ctx) &&
            env->failover(env->failover_opaque, st, last_pts, ingested)) {
            st->moved = 1;
            *moved = 1;
            return NULL;
        }
        if (!env->failover)
            return take_free_item(st, 1);
        kr_item *it = take_free_item(st, 0);
        if (it)
            return it;
        int stopped = 0;
        it = kr_item_pool_take_timed(st->pool, 20 * 1000000LL, &stopped);
        if (it || stopped || stream_stopped(st))
            return it;
    }
}

static kr_item *take_free_item(kr_stream *st, int wait)
{
    kr_item *it = kr_item_pool_take(st->pool, 0);
    if (it)
        return it;
    void *p = NULL;
    if (st->live && kr_queue_try_pop(st->ingest, &p) == KEYER_OK) {
        kr_item *old = p;
        atomic_fetch_add(&st->frames_dropped, 1);
        keyer_frame_unref(old->frame);
        keyer_frame_unref(old->bg_src);
        return old;
    }
    if (!wait)
        return NULL;
    return kr_item_pool_take(st->pool, 1);
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

/* Sleeps until @p due (ns) unless the session stops reading. */
static void sleep_until(const kr_stream *st, int64_t due)
{
    struct timespec ts = kr_clock_deadline(due);
    while (kr_clock_ns() < due && !stream_stopped(st))
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != EINTR)
            break;
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
    sleep_until(st, *origin_ns + (int64_t)(t * 1e9));
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
    sleep_until(st, due);
    return due;
}

/* A frame of another size or format than the stream's: skipped (warned once). */
static void skip_frame(kr_stream *st, kr_item *it)
{
    atomic_fetch_add(&st->frames_dropped, 1);
    if (!st->geometry_warned) {
        st->geometry_warned = 1;
        kr_stage_warn(st->env->ctx,
                      "%s: a frame of %dx%d %s in a %dx%d %s stream is skipped "
                      "(size changes are not supported)",
                      st->input, it->frame->width, it->frame->height,
                      keyer_pixel_format_name(it->frame->format), st->width, st->height,
                      keyer_pixel_format_name(st->format));
    }
    atomic_fetch_add(&st->frames_read, 1);
    kr_item_release(it);
}

/* Moves *@p last_end (in @p tb units) to the end of frame @p f when it is later. */
static void frame_end(const keyer_frame *f, keyer_rational tb, int64_t *last_end)
{
    if (f->pts == INT64_MIN || tb.num <= 0 || tb.den <= 0 || f->time_base.num <= 0 ||
        f->time_base.den <= 0)
        return;
    int64_t dur = f->duration > 0 ? f->duration : 0;
    double t = (double)(f->pts + dur) * f->time_base.num / f->time_base.den;
    int64_t end = (int64_t)(t * tb.den / tb.num + 0.5);
    if (end > *last_end)
        *last_end = end;
}

/*
 * At the end of a file input: an input whose reader saw it stop inside damaged or missing
 * data, or whose frames end well before the duration its container declares (by more than
 * half a second and 2 % of it: audio longer than the video stays within that), was cut or
 * damaged; that is the stream's error (BAD_DATA). Live inputs and inputs of unknown length
 * are not checked.
 */
static keyer_status check_complete(kr_stream *st, int64_t last_end, keyer_error *err)
{
    keyer_reader_stats rs;
    keyer_reader_stats_get(st->reader, &rs);
    if (rs.truncated)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "reading %s: the input ends inside damaged or missing data (cut "
                               "file?) after %lld frames", st->input,
                               (long long)atomic_load(&st->frames_read));
    const keyer_video_info *vi = &st->info;
    if (st->live || vi->duration <= 0 || last_end == INT64_MIN || vi->time_base.num <= 0 ||
        vi->time_base.den <= 0)
        return KEYER_OK;
    double tb = (double)vi->time_base.num / vi->time_base.den;
    double start = vi->start_pts == INT64_MIN ? 0.0 : (double)vi->start_pts * tb;
    double covered = (double)last_end * tb - start;
    double declared = (double)vi->duration * tb;
    double slack = declared * 0.02 > 0.5 ? declared * 0.02 : 0.5;
    if (covered + slack >= declared)
        return KEYER_OK;
    return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                           "reading %s: the input stops after %.2f s of its %.2f s (%lld "
                           "frames; cut or damaged file)", st->input, covered, declared,
                           (long long)atomic_load(&st->frames_read));
}

/*
 * A live continuation (stream.h): the reopened source's frames follow the last frame the
 * failed GPU's stream read. The first frame's pts becomes that frame's end plus the switch's
 * wall-clock length in whole frames (at least one), as the reader maps a reconnection
 * (kr_live_map); the whole frames skipped are counted as missed. Later frames keep their
 * distance to the first.
 */
static void shift_live(kr_stream *st, keyer_frame *f)
{
    if (f->pts == INT64_MIN)
        return;
    if (!st->shift_known) {
        st->shift_known = 1;
        keyer_rational fr = st->frame_rate.num > 0 && st->frame_rate.den > 0
                                ? st->frame_rate
                                : (keyer_rational){25, 1};
        keyer_rational tb = f->time_base;
        /* one frame in the frame's time base (at least one tick) */
        int64_t dur = f->duration > 0
                          ? f->duration
                          : (int64_t)((double)fr.den * tb.den / ((double)fr.num * tb.num) + 0.5);
        if (dur < 1)
            dur = 1;
        double seconds = (double)(kr_clock_ns() - st->switch_ns) * 1e-9;
        int64_t steps = (int64_t)(seconds * fr.num / fr.den + 0.5);
        if (steps < 1)
            steps = 1;
        int64_t base = st->switch_pts == INT64_MIN ? 0 : st->switch_pts;
        st->pts_shift = base + steps * dur - f->pts;
        st->switch_seconds = seconds;
        atomic_store(&st->switch_missed, steps - 1);
        kr_stage_warn(st->env->ctx,
                      "%s: reopened on another GPU after %.2f s (%lld frames missed)", st->input,
                      seconds, (long long)(steps - 1));
    }
    f->pts += st->pts_shift;
}

static void *reader_main(void *arg)
{
    kr_stream *st = arg;
    const kr_stream_env *env = st->env;
    const kr_stage_ctx *ctx = env->ctx;
    kr_thread_name("read");
    int track = kr_trace_thread(ctx->trace, "read", st->id);
    int64_t origin_ns = 0, origin_pts = INT64_MIN;
    int realtime = env->params->realtime;
    int at_rate = realtime && st->info.frame_rate.num > 0 && st->info.frame_rate.den > 0 &&
                  st->frame_rate.num > 0 &&
                  (double)st->frame_rate.num / st->frame_rate.den <= 1000.0;
    int64_t released = 0, due = 0;
    int64_t last_end = INT64_MIN; /* end of the last frame read, in the stream's time base */
    int64_t last_pts = INT64_MIN, ingested = 0;
    if (st->continuation && st->resume_pts != INT64_MIN) {
        /* on from the frame after the last one the failed GPU's stream read */
        keyer_error e = {0};
        keyer_status rs = keyer_reader_seek(st->reader, st->resume_pts, &e);
        if (rs) {
            keyer_error_prefix(&e, "reading %s (moved to another GPU): ", st->input);
            stream_fail(st, rs, &e);
            kr_queue_close(st->ingest);
            return NULL;
        }
    }
    while (!stream_stopped(st)) {
        int moved = 0;
        kr_item *it = next_item(st, last_pts, ingested, &moved);
        if (!it)
            break;
        if (stream_stopped(st)) {
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
            if (rs == KEYER_STATUS_END && (rs = check_complete(st, last_end, &e)))
                stream_fail(st, rs, &e);
            break;
        }
        if (rs == KEYER_STATUS_DEVICE && env->failover && env->layout.dev) {
            /* NVDEC failed with its GPU: the stream may go on on another GPU */
            kr_stage_gpu_failure(ctx, &e);
            if (env->failover(env->failover_opaque, st, last_pts, ingested)) {
                kr_item_release(it);
                st->moved = 1;
                break;
            }
        }
        if (rs) {
            kr_item_release(it);
            keyer_error_prefix(&e, "reading %s: ", st->input);
            stream_fail(st, rs, &e);
            break;
        }
        if (!same_geometry(st, it->frame)) {
            skip_frame(st, it);
            continue;
        }
        int64_t arrive = t1;
        if (at_rate) {
            arrive = due; /* decoding counts in the frame's latency */
        } else if (realtime) {
            pace(st, it->frame, &origin_ns, &origin_pts);
            arrive = kr_clock_ns(); /* the frame "arrives" now */
        }
        if (it->frame->flags & KEYER_FRAME_FLAG_CORRUPT)
            atomic_fetch_add(&st->frames_damaged, 1);
        if (it->frame->time_base.num <= 0 || it->frame->time_base.den <= 0)
            it->frame->time_base = st->time_base;
        if (st->continuation && st->live)
            shift_live(st, it->frame);
        frame_end(it->frame, st->time_base, &last_end);
        last_pts = it->frame->pts;
        atomic_fetch_add(&st->frames_read, 1);
        it->t_in = arrive;
        kr_stage_stats_record(env->read_stats, 1, t0, t1);
        kr_trace_add(ctx->trace, track, "read", st->id, atomic_load(&st->frames_read) - 1, 1, t0,
                     t1);
        if (st->bg_reader)
            read_background(st, it->bg_src);
        if (!ingest(st, it))
            break;
        ingested++;
    }
    kr_queue_close(st->ingest);
    return NULL;
}

/* ---- pushed frames ---------------------------------------------------------------------------- */

/* Makes @p it hold @p frame: a reference, or a copy into the item's own frame (made once)
 * when the frame has no buffers to hold on to. */
static keyer_status take_frame(kr_item *it, const keyer_frame *frame, keyer_error *err)
{
    if (frame->buf[0])
        return keyer_frame_ref(it->frame, frame, err);
    keyer_status rs = KEYER_OK;
    if (!it->input_copy) {
        const kr_device_fns *dev = kr_device_cuda();
        rs = keyer_frame_create(&it->input_copy, err);
        if (!rs && frame->memory == KEYER_MEMORY_CUDA)
            rs = kr_device_frame_alloc(dev, frame->device, it->input_copy, frame->format,
                                       frame->width, frame->height, err);
        else if (!rs)
            rs = keyer_frame_alloc(it->input_copy, frame->format, frame->width, frame->height,
                                   NULL, err);
        if (rs)
            keyer_frame_destroy(&it->input_copy);
    }
    if (!rs)
        rs = kr_device_frame_copy(kr_device_cuda(), frame->device, it->input_copy, frame, NULL,
                                  err);
    if (!rs)
        rs = keyer_frame_ref(it->frame, it->input_copy, err);
    return rs;
}

keyer_status kr_stream_send(kr_stream *st, const keyer_frame *frame, keyer_error *err)
{
    const kr_stream_env *env = st->env;
    if (atomic_load(&st->closed))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_send_frame: stream %d is closed", st->id);
    if (kr_stage_cancelled(env->ctx))
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                               "keyer_session_send_frame: the session was cancelled");
    keyer_status failed = kr_stream_status(st, err);
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
    if ((rs = take_frame(it, frame, err))) {
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
    kr_stage_stats_record(env->read_stats, 1, t0, t1);
    if (!ingest(st, it))
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                               "keyer_session_send_frame: the session is stopping");
    return KEYER_OK;
}

keyer_status kr_stream_close(kr_stream *st, keyer_error *err)
{
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
