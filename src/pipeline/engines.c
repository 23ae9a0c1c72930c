/*
 * The public session calls, and sessions over several GPUs.
 *
 * A session on one device is one engine (session.c): every call here forwards to it. With
 * two or more GPUs (keyer_session_params::cuda_devices) the session is an engine that never
 * starts (it holds the parameters) plus a group: one engine per GPU, each a whole pipeline
 * on its device (decoders, batcher, model runtimes, detector, refine, composite workers,
 * writers). A stream lives on one engine from its reader to its writer; it is placed when it
 * is added, on the engine with the least load (placement.h). The group maps the session's
 * stream ids to (engine, the engine's own id) and back, so callbacks and reports speak the
 * session's ids. keyer_session_run() runs each engine's kr_engine_run on its own thread and
 * waits for all. With split_gpus the one input is not placed but split over every engine
 * (split_gpus.h); its stream id 0 maps to engine -1.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "pipeline/clock.h"
#include "pipeline/engines_group.h"
#include "pipeline/gate.h"
#include "pipeline/handoff.h"
#include "pipeline/placement.h"
#include "pipeline/split_gpus.h"

/* ---- callbacks: engine ids to session ids ---------------------------------------------------- */

static int global_id(const engine_slot *sl, int local)
{
    return kr_group_global_id(sl, local);
}

static keyer_status on_frame(void *opaque, int stream_id, int64_t frame_index,
                             const keyer_frame *input, keyer_frame *output, keyer_error *err)
{
    const engine_slot *sl = opaque;
    const keyer_session_params *u = &sl->group->user;
    return u->frame_fn(u->frame_opaque, global_id(sl, stream_id), frame_index, input, output,
                       err);
}

static keyer_status on_detect(void *opaque, int stream_id, int64_t frame_index,
                              const keyer_frame *frame, const keyer_detection *dets, int count,
                              keyer_overlay *overlay, keyer_error *err)
{
    const engine_slot *sl = opaque;
    const keyer_session_params *u = &sl->group->user;
    return u->detect_fn(u->detect_opaque, global_id(sl, stream_id), frame_index, frame, dets,
                        count, overlay, err);
}

static keyer_status on_faces(void *opaque, int stream_id, int64_t frame_index,
                             const keyer_frame *frame, const keyer_face *faces, int count,
                             keyer_overlay *overlay, keyer_error *err)
{
    const engine_slot *sl = opaque;
    const keyer_session_params *u = &sl->group->user;
    return u->faces_fn(u->faces_opaque, global_id(sl, stream_id), frame_index, frame, faces,
                       count, overlay, err);
}

static keyer_status on_pose(void *opaque, int stream_id, int64_t frame_index,
                            const keyer_frame *frame, const keyer_detection *dets, int count,
                            const keyer_pose_result *pose, keyer_overlay *overlay,
                            keyer_error *err)
{
    const engine_slot *sl = opaque;
    const keyer_session_params *u = &sl->group->user;
    return u->pose_fn(u->pose_opaque, global_id(sl, stream_id), frame_index, frame, dets, count,
                      pose, overlay, err);
}

/* Each engine's progress is kept; the caller gets the sum, one call at a time. */
static void on_progress(void *opaque, const keyer_session_progress *p)
{
    const engine_slot *sl = opaque;
    kr_engines *g = sl->group;
    pthread_mutex_lock(&g->progress_lock);
    g->progress[sl->index] = *p;
    keyer_session_progress sum;
    memset(&sum, 0, sizeof(sum));
    for (int e = 0; e < g->count; e++) {
        sum.frames_done += g->progress[e].frames_done;
        sum.frames_read += g->progress[e].frames_read;
        sum.frames_total += g->progress[e].frames_total;
        if (g->progress[e].elapsed > sum.elapsed)
            sum.elapsed = g->progress[e].elapsed;
    }
    sum.fps = sum.elapsed > 0 ? (double)sum.frames_done / sum.elapsed : 0.0;
    sum.remaining = sum.frames_total > 0 && sum.fps > 0 && sum.frames_done <= sum.frames_total
                        ? (double)(sum.frames_total - sum.frames_done) / sum.fps
                        : -1.0;
    g->user.progress(g->user.progress_opaque, &sum);
    pthread_mutex_unlock(&g->progress_lock);
}

/* ---- create / destroy ------------------------------------------------------------------------ */

static void group_destroy(kr_engines **gp)
{
    kr_engines *g = *gp;
    if (!g)
        return;
    kr_split_gpus_cancel(g->split);
    for (int e = 0; e < g->count; e++)
        kr_engine_cancel(g->engine[e]);
    kr_split_gpus_destroy(&g->split);
    /* every engine's streams first, then the handoffs (a writer given and never taken),
     * then the engines: a writer handed over logs through, and encodes with the probe of,
     * the engine that made it */
    for (int e = 0; e < g->count; e++)
        kr_engine_release_streams(g->engine[e]);
    for (int i = 0; g->parts && i < g->max_streams; i++) {
        for (int p = 0; p < atomic_load(&g->parts[i].n); p++)
            kr_handoff_destroy(&g->parts[i].handoff[p]);
        free(g->parts[i].push_output);
    }
    for (int e = 0; e < g->count; e++)
        kr_engine_destroy(&g->engine[e]);
    pthread_mutex_destroy(&g->progress_lock);
    pthread_mutex_destroy(&g->failover_lock);
    free(g->parts);
    free(g->where);
    free(g->local);
    free(g->global);
    free(g);
    *gp = NULL;
}

/* The GPUs of @p p->cuda_devices that exist, in ordinal order, into @p ordinals; their count,
 * or 0 with @p err set. */
static int resolve_devices(const keyer_session_params *p, int *ordinals, keyer_error *err)
{
    char text[4 * 64 + 8];
    keyer_device_list_format(p->cuda_devices, text, sizeof(text));
    if (p->device == KEYER_DEVICE_CPU) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                        "session parameters: device cpu with the GPU list %s", text);
        return 0;
    }
    const kr_device_fns *dev = kr_device_cuda();
    int present = dev ? dev->count() : 0;
    if (present <= 0) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "device %s: %s", text,
                        !dev ? "keyer was built without CUDA"
                             : "no CUDA device was found (no NVIDIA driver or no GPU)");
        return 0;
    }
    int n = 0;
    for (int i = 0; i < 64; i++) {
        if (!(p->cuda_devices & (UINT64_C(1) << i)))
            continue;
        if (i >= present) {
            if (p->cuda_devices == KEYER_CUDA_DEVICES_ALL)
                break;
            keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                            "device %s: there is no cuda:%d (%d CUDA device%s found)", text, i,
                            present, present == 1 ? "" : "s");
            return 0;
        }
        ordinals[n++] = i;
    }
    return n;
}

static keyer_status group_create(keyer_session *s, const keyer_session_params *p,
                                 const keyer_device_kind *kinds, const int *ordinals, int n,
                                 keyer_error *err)
{
    kr_engines *g = calloc(1, sizeof(*g));
    if (!g)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    pthread_mutex_init(&g->progress_lock, NULL);
    pthread_mutex_init(&g->failover_lock, NULL);
    s->group = g;
    g->user = *p;
    g->max_streams = p->max_streams;
    atomic_init(&g->streams, 0);
    size_t ms = (size_t)p->max_streams;
    g->where = calloc(ms, sizeof(int));
    g->local = calloc(ms, sizeof(int));
    g->global = calloc(ms * (size_t)n, sizeof(int));
    g->parts = calloc(ms, sizeof(*g->parts));
    atomic_init(&g->working, 0);
    if (!g->where || !g->local || !g->global || !g->parts)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    for (size_t i = 0; i < ms; i++)
        atomic_init(&g->parts[i].n, 0);
    for (int e = 0; e < n; e++) {
        keyer_session_params ep = *p;
        ep.device = kinds[e];
        ep.cuda_device = ordinals[e];
        ep.cuda_devices = 0;
        /* this GPU's share of the file streams (placed by load: equal inputs alternate),
         * which decode_segments -1 decides by */
        ep.expected_files = (p->expected_files + n - 1) / n;
        g->slot[e] = (engine_slot){g, e};
        if (p->frame_fn)
            ep.frame_fn = on_frame, ep.frame_opaque = &g->slot[e];
        if (p->detect_fn)
            ep.detect_fn = on_detect, ep.detect_opaque = &g->slot[e];
        if (p->faces_fn)
            ep.faces_fn = on_faces, ep.faces_opaque = &g->slot[e];
        if (p->pose_fn)
            ep.pose_fn = on_pose, ep.pose_opaque = &g->slot[e];
        if (p->progress)
            ep.progress = on_progress, ep.progress_opaque = &g->slot[e];
        keyer_status st = kr_engine_create(&ep, &g->engine[e], err);
        if (st)
            return kinds[e] == KEYER_DEVICE_CUDA ? keyer_error_prefix(err, "cuda:%d: ", ordinals[e])
                                                 : st;
        g->ordinal[e] = ordinals[e];
        g->count = e + 1;
        g->progress[e].remaining = -1.0;
        if (n > 1)
            kr_engine_set_failover(g->engine[e], kr_group_failover, &g->slot[e]);
    }
    return KEYER_OK;
}

keyer_status kr_session_create_engines(const keyer_session_params *params,
                                       const keyer_device_kind *kinds, const int *ordinals,
                                       int count, keyer_session **out, keyer_error *err)
{
    if (!out || !params || !kinds || !ordinals || count < 1 || count > MAX_ENGINES)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_session_create_engines: bad arguments");
    *out = NULL;
    /* the parent: checks and holds the parameters; it never starts */
    keyer_session_params pp = *params;
    pp.device = kinds[0];
    pp.cuda_device = ordinals[0];
    pp.cuda_devices = 0;
    keyer_session *s = NULL;
    keyer_status st = kr_engine_create(&pp, &s, err);
    if (st)
        return st;
    /* a split over one engine's decoder sessions is a group of one */
    if ((count > 1 || params->split_gpus) &&
        (st = group_create(s, params, kinds, ordinals, count, err))) {
        keyer_session_destroy(&s);
        return st;
    }
    *out = s;
    return KEYER_OK;
}

keyer_status keyer_session_create(const keyer_session_params *params, keyer_session **out,
                                  keyer_error *err)
{
    keyer_session_params p = params ? *params : keyer_session_params_defaults();
    if (out && !p.cuda_devices && p.split_gpus && p.device != KEYER_DEVICE_CPU &&
        kr_split_gpus_lanes(1, p.split_chunks) >= 2) {
        /* one GPU: the file split over its decoder sessions (when it is there) */
        const kr_device_fns *dev = kr_device_cuda();
        if (dev && p.cuda_device < dev->count()) {
            keyer_device_kind kind = KEYER_DEVICE_CUDA;
            *out = NULL;
            return kr_session_create_engines(&p, &kind, &p.cuda_device, 1, out, err);
        }
    }
    if (!out || !p.cuda_devices)
        return kr_engine_create(params, out, err);
    *out = NULL;
    int ordinals[MAX_ENGINES];
    keyer_device_kind kinds[MAX_ENGINES];
    int n = resolve_devices(&p, ordinals, err);
    if (n == 0)
        return err && err->status ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    for (int e = 0; e < n; e++)
        kinds[e] = KEYER_DEVICE_CUDA;
    return kr_session_create_engines(&p, kinds, ordinals, n, out, err);
}

void keyer_session_destroy(keyer_session **sp)
{
    if (!sp || !*sp)
        return;
    group_destroy(&(*sp)->group);
    kr_engine_destroy(sp);
}

void keyer_session_cancel(keyer_session *s)
{
    if (!s)
        return;
    kr_engines *g = s->group;
    if (g) {
        kr_split_gpus_cancel(g->split);
        for (int e = 0; e < g->count; e++)
            kr_engine_cancel(g->engine[e]);
    }
    kr_engine_cancel(s);
}

/* ---- streams --------------------------------------------------------------------------------- */

static void drop_log(void *opaque, keyer_log_level level, const char *message)
{
    (void)opaque, (void)level, (void)message;
}

/* Pixels per second of a file input: a probe on the CPU. Network inputs and devices (a second
 * connection, a camera opened twice) are not probed: they count as 1080p30. */
static double file_load(const keyer_file_stream_params *fp)
{
    const char *url = fp->input;
    const char *sep = strstr(url, "://");
    if ((sep && strncmp(url, "file://", 7)) || !strncmp(url, "/dev/", 5) ||
        fp->reader.input_format)
        return kr_place_load(1920, 1080, (keyer_rational){30, 1});
    keyer_reader_params rp = fp->reader;
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.segments = 0;
    rp.segments_auto = 0;
    rp.threads = 1; /* one frame of the probe: libavcodec's own count started a decoder thread
                     * per core for each input (16 x 1080p on 32 cores: ~260 threads, 3 s of
                     * CPU before the run) */
    rp.keep_streams = 0;
    keyer_logger quiet = keyer_logger_default();
    quiet.callback = drop_log; /* the engine's own open reports what goes wrong */
    rp.logger = &quiet;
    keyer_reader *r = NULL;
    keyer_error e = {0};
    if (keyer_reader_open(url, &rp, &r, &e))
        return 0.0; /* the engine's open reports why */
    const keyer_video_info *vi = keyer_reader_info(r);
    double load = kr_place_load(vi->width, vi->height, vi->frame_rate);
    keyer_reader_destroy(&r);
    return load;
}

/* Records session stream id = next for engine @p e's stream @p local. */
static int publish(kr_engines *g, int e, int local, double load)
{
    int id = atomic_load(&g->streams);
    g->where[id] = e;
    g->local[id] = local;
    g->global[(size_t)e * (size_t)g->max_streams + (size_t)local] = id;
    g->load[e] += load;
    stream_parts *sp = &g->parts[id];
    sp->load = load;
    sp->engine[0] = e;
    sp->local[0] = local;
    atomic_store(&sp->n, 1);
    atomic_store(&g->streams, id + 1);
    return id;
}

/* split_gpus: the input becomes stream 0, split over every engine (engine index -1 in the
 * maps). UNSUPPORTED when the file cannot be split (logged; the caller places it whole). */
static keyer_status add_split(keyer_session *s, const keyer_file_stream_params *params,
                              keyer_error *err)
{
    kr_engines *g = s->group;
    if (atomic_load(&g->streams) > 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "split_gpus: one input only (%s is the second)", params->input);
    if (g->user.frame_fn || g->user.detect_fn || g->user.faces_fn || g->user.pose_fn)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "split_gpus: per-frame callbacks (frame_fn, detect_fn, faces_fn, "
                               "pose_fn) "
                               "are not called for a split input");
    keyer_file_stream_params fp = *params;
    /* the lanes' decoders (a file; decode-ahead as for a stream) */
    kr_stream_decoder_knobs(&g->user, g->user.realtime || g->user.mode == KEYER_PIPELINE_LATENCY,
                            &fp.reader);
    keyer_status st = kr_split_gpus_create(&fp, g->count, g->user.split_chunks, s->logger,
                                           &g->split, err);
    if (st == KEYER_STATUS_UNSUPPORTED) {
        keyer_log(s->logger, KEYER_LOG_WARNING, "%s runs on one GPU: %s", params->input,
                  err ? err->message : "it cannot be split");
        return st;
    }
    if (st)
        return st;
    int id = atomic_load(&g->streams);
    g->where[id] = -1;
    g->local[id] = 0;
    atomic_store(&g->streams, id + 1);
    return KEYER_OK;
}

keyer_status keyer_session_add_file(keyer_session *s, const keyer_file_stream_params *params,
                                    int *stream_id, keyer_error *err)
{
    kr_engines *g = s ? s->group : NULL;
    if (!g)
        return kr_engine_add_file(s, params, stream_id, err);
    if (!params || !params->input)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_add_file: no input given");
    if (g->run_called)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_add_file: the session is already running");
    if (atomic_load(&g->streams) >= g->max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: at most %d streams (max_streams)", g->max_streams);
    if (g->user.split_gpus) {
        keyer_status st = add_split(s, params, err);
        if (st != KEYER_STATUS_UNSUPPORTED) {
            if (!st && stream_id)
                *stream_id = 0;
            return st;
        }
        keyer_error_clear(err); /* cannot be split: it runs on one GPU */
    }
    double load = file_load(params);
    int e = kr_place_pick(g->load, g->count), local = -1;
    keyer_status st = kr_engine_add_file(g->engine[e], params, &local, err);
    if (st)
        return st;
    int id = publish(g, e, local, load);
    if (stream_id)
        *stream_id = id;
    return KEYER_OK;
}

keyer_status keyer_session_open_stream(keyer_session *s, const keyer_stream_params *params,
                                       int *stream_id, keyer_error *err)
{
    kr_engines *g = s ? s->group : NULL;
    if (!g)
        return kr_engine_open_stream(s, params, stream_id, err);
    if (!params)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: NULL argument");
    if (g->split)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: the session splits one file over "
                               "its GPUs (split_gpus)");
    if (atomic_load(&g->streams) >= g->max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: at most %d streams (max_streams)", g->max_streams);
    double load = kr_place_load(params->width, params->height, params->frame_rate);
    int e = kr_place_pick(g->load, g->count), local = -1;
    keyer_status st = kr_engine_open_stream(g->engine[e], params, &local, err);
    if (st)
        return st;
    if (!g->model_fixed && !g->user.model && !g->user.passthrough) {
        /* the first stream chose the model, as in a session on one GPU: the others use it */
        for (int k = 0; k < g->count && !st; k++)
            if (k != e && !g->engine[k]->started)
                st = kr_engine_set_model(g->engine[k], g->engine[e]->model_used, err);
        if (st)
            return st;
    }
    g->model_fixed = 1;
    int id = publish(g, e, local, load);
    /* kept for a move to another GPU (without the copy of its output name: none) */
    stream_parts *sp = &g->parts[id];
    sp->push = *params;
    sp->push_output = params->output ? strdup(params->output) : NULL;
    sp->push.output = sp->push_output;
    sp->stuck = params->output && !sp->push_output;
    if (stream_id)
        *stream_id = id;
    return KEYER_OK;
}

/* The engine and its stream id of part @p part of session stream @p id (-1: its last part);
 * NULL with @p err set. */
static keyer_session *engine_of(keyer_session *s, int id, int part, int *local, keyer_error *err,
                                const char *fn)
{
    kr_engines *g = s->group;
    if (id < 0 || id >= atomic_load(&g->streams)) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: no stream %d", fn, id);
        return NULL;
    }
    if (g->where[id] < 0) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                        "%s: stream %d is split over the GPUs", fn, id);
        return NULL;
    }
    const stream_parts *sp = &g->parts[id];
    int n = atomic_load(&sp->n);
    int p = part < 0 || part >= n ? n - 1 : part;
    *local = sp->local[p];
    return g->engine[sp->engine[p]];
}

keyer_status keyer_session_send_frame(keyer_session *s, int stream_id, const keyer_frame *frame,
                                      keyer_error *err)
{
    if (!s || !s->group)
        return kr_engine_send_frame(s, stream_id, frame, err);
    int local;
    keyer_session *e = engine_of(s, stream_id, -1, &local, err, "keyer_session_send_frame");
    if (e && atomic_load(&e->gpu_failed) && !s->group->parts[stream_id].stuck &&
        e->streams[local]->source == KR_SOURCE_PUSH) {
        /* its GPU failed: this frame and the next go to another GPU where one is left */
        kr_group_move_pushed(s->group, stream_id);
        e = engine_of(s, stream_id, -1, &local, err, "keyer_session_send_frame");
    }
    return e ? kr_engine_send_frame(e, local, frame, err) : KEYER_STATUS_INVALID_ARGUMENT;
}

keyer_status keyer_session_receive_frame(keyer_session *s, int stream_id, keyer_frame *out,
                                         int64_t timeout_us, keyer_error *err)
{
    if (!s || !s->group)
        return kr_engine_receive_frame(s, stream_id, out, timeout_us, err);
    int local;
    if (!engine_of(s, stream_id, -1, &local, err, "keyer_session_receive_frame"))
        return KEYER_STATUS_INVALID_ARGUMENT;
    stream_parts *sp = &s->group->parts[stream_id];
    for (;;) {
        /* the parts in order: a part that moved on ends (END) after its last frame */
        keyer_session *e = engine_of(s, stream_id, sp->recv, &local, err,
                                     "keyer_session_receive_frame");
        keyer_status st = kr_engine_receive_frame(e, local, out, timeout_us, err);
        if (st != KEYER_STATUS_END || sp->recv + 1 >= atomic_load(&sp->n))
            return st;
        sp->recv++;
    }
}

keyer_status keyer_session_close_stream(keyer_session *s, int stream_id, keyer_error *err)
{
    if (!s || !s->group)
        return kr_engine_close_stream(s, stream_id, err);
    int local;
    keyer_session *e = engine_of(s, stream_id, -1, &local, err, "keyer_session_close_stream");
    if (!e)
        return KEYER_STATUS_INVALID_ARGUMENT;
    /* the last part (after the parts before it handed over their output); then the first
     * error of any part */
    keyer_status st = kr_engine_close_stream(e, local, err);
    int n = atomic_load(&s->group->parts[stream_id].n);
    for (int p = 0; p + 1 < n && !st; p++) {
        keyer_session *pe = engine_of(s, stream_id, p, &local, err, "keyer_session_close_stream");
        st = kr_engine_close_stream(pe, local, err);
        if (!st)
            st = kr_engine_stream_status(pe, local, err);
    }
    return st;
}

keyer_status keyer_session_stream_status(keyer_session *s, int stream_id, keyer_error *err)
{
    if (!s || !s->group)
        return kr_engine_stream_status(s, stream_id, err);
    if (s->group->split && stream_id == 0)
        return kr_split_gpus_status(s->group->split, err);
    int local;
    if (!engine_of(s, stream_id, 0, &local, err, "keyer_session_stream_status"))
        return KEYER_STATUS_INVALID_ARGUMENT;
    /* its parts in order: the first error */
    int n = atomic_load(&s->group->parts[stream_id].n);
    keyer_status st = KEYER_OK;
    for (int p = 0; p < n && !st; p++) {
        keyer_session *e = engine_of(s, stream_id, p, &local, err, "keyer_session_stream_status");
        st = kr_engine_stream_status(e, local, err);
    }
    return st;
}

/* ---- run ------------------------------------------------------------------------------------- */

typedef struct engine_run {
    keyer_session *engine;
    pthread_t thread;
    int started;
    keyer_status status;
    keyer_error err;
} engine_run;

static void *run_thread(void *arg)
{
    engine_run *r = arg;
    keyer_session *e = r->engine;
    r->status = kr_engine_run(e, &r->err);
    /* a run that returned before its wait for streams leaves the working engines too (the
     * others would wait for it) */
    pthread_mutex_lock(&e->accept_lock);
    e->closing = 1;
    if (e->hold && e->counted) {
        e->counted = 0;
        if (atomic_fetch_sub(e->hold, 1) == 1 && e->hold_wake)
            e->hold_wake(e->hold_opaque);
    }
    pthread_mutex_unlock(&e->accept_lock);
    return NULL;
}

/* One keying model for every GPU: the one a single session would choose from all streams. */
static keyer_status fix_model(kr_engines *g, keyer_error *err)
{
    if (g->model_fixed || g->user.model || g->user.passthrough)
        return KEYER_OK;
    const char *name = "selfie-landscape";
    int any = 0;
    for (int e = 0; e < g->count; e++) {
        if (kr_engine_stream_count(g->engine[e]) == 0)
            continue;
        any = 1;
        if (strcmp(kr_engine_auto_model(g->engine[e]), "selfie-landscape"))
            name = "selfie";
    }
    if (!any)
        name = "selfie";
    for (int e = 0; e < g->count; e++) {
        keyer_status st = kr_engine_set_model(g->engine[e], name, err);
        if (st)
            return st;
    }
    g->model_fixed = 1;
    return KEYER_OK;
}

/* File streams (keyer_session_add_file) of one engine; its pushed streams run without it. */
static int file_streams(const keyer_session *e)
{
    int n = kr_engine_stream_count(e), files = 0;
    for (int i = 0; i < n; i++)
        files += e->streams[i]->source == KR_SOURCE_READER;
    return files;
}

/* kr_session::hold_wake: the last working engine is done; the others close. */
static void wake_all(void *opaque)
{
    kr_engines *g = opaque;
    for (int e = 0; e < g->count; e++)
        kr_engine_wake(g->engine[e]);
}

static keyer_status group_run(keyer_session *s, keyer_error *err)
{
    kr_engines *g = s->group;
    if (g->run_called)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: the session already ran");
    if (g->split) {
        g->run_called = 1;
        return kr_split_gpus_run(g->split, g->engine, g->count, &g->user, err);
    }
    int n = atomic_load(&g->streams), files = 0;
    for (int e = 0; e < g->count; e++)
        files += file_streams(g->engine[e]);
    if (files == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: no input was added");
    g->run_called = 1;
    keyer_status st = fix_model(g, err);
    if (st)
        return st;
    engine_run runs[MAX_ENGINES];
    memset(runs, 0, sizeof(runs));
    /* the engines with files, and those with no stream at all (standbys: a failed GPU's
     * streams move to them), start reading together (gate.h); each stays open to moved
     * streams while another works (session.h) */
    int running = 0, run[MAX_ENGINES];
    for (int e = 0; e < g->count; e++) {
        run[e] = file_streams(g->engine[e]) > 0 || kr_engine_stream_count(g->engine[e]) == 0;
        running += run[e];
    }
    kr_gate gate;
    int gated = running > 1 && !kr_gate_init(&gate, running);
    for (int e = 0; e < g->count; e++) {
        if (!run[e])
            continue;
        g->engine[e]->start_gate = gated ? &gate : NULL;
        g->engine[e]->hold = &g->working;
        g->engine[e]->hold_wake = wake_all;
        g->engine[e]->hold_opaque = g;
        g->engine[e]->counted = 1;
        atomic_fetch_add(&g->working, 1);
    }
    for (int e = 0; e < g->count; e++) {
        runs[e].engine = g->engine[e];
        if (!run[e])
            continue;
        if (pthread_create(&runs[e].thread, NULL, run_thread, &runs[e])) {
            /* run it here instead, not waiting for the others (they start after it): slower,
             * nothing lost (the gate's wait is bounded) */
            g->engine[e]->hold = NULL;
            g->engine[e]->counted = 0;
            atomic_fetch_sub(&g->working, 1);
            run_thread(&runs[e]);
            continue;
        }
        runs[e].started = 1;
    }
    for (int e = 0; e < g->count; e++)
        if (runs[e].started)
            pthread_join(runs[e].thread, NULL);
    for (int e = 0; e < g->count; e++) {
        g->engine[e]->start_gate = NULL;
        g->engine[e]->hold = NULL;
    }
    if (gated)
        kr_gate_destroy(&gate);
    /* as one session: the first failed stream in stream order, then an engine's own error */
    for (int id = 0; id < n; id++) {
        keyer_session *e = g->engine[g->where[id]];
        if (e->streams[g->local[id]]->source != KR_SOURCE_READER)
            continue; /* pushed streams report through their own calls */
        keyer_error se = {0};
        keyer_status ss = keyer_session_stream_status(s, id, &se); /* with a moved rest */
        if (ss) {
            if (err)
                *err = se;
            return ss;
        }
    }
    for (int e = 0; e < g->count; e++) {
        if (runs[e].status && runs[e].status != KEYER_STATUS_INTERRUPTED) {
            if (err)
                *err = runs[e].err;
            return runs[e].status;
        }
    }
    for (int e = 0; e < g->count; e++) {
        if (runs[e].status) {
            if (err)
                *err = runs[e].err;
            return runs[e].status;
        }
    }
    return KEYER_OK;
}

keyer_status keyer_session_run(keyer_session *s, keyer_error *err)
{
    if (!s || !s->group)
        return kr_engine_run(s, err);
    return group_run(s, err);
}

/* ---- reports --------------------------------------------------------------------------------- */

void keyer_session_get_report(keyer_session *s, keyer_session_report *out)
{
    if (!s || !s->group) {
        kr_engine_get_report(s, out);
        return;
    }
    kr_engines_get_report(s->group->engine, s->group->count, out);
    kr_engines *g = s->group;
    int any = 0;
    for (int e = 0; e < g->count; e++)
        any |= g->moved[e] > 0;
    if (!any)
        return;
    /* "cuda:0 + cuda:1 (failed: 2 streams moved to other GPUs)"; where that does not fit,
     * "cuda:0 + cuda:1 (failed, 1 moved) + cuda:2 (failed, 1 moved)" */
    for (int brief = 0; brief < 2; brief++) {
        size_t len = 0, size = sizeof(out->device);
        int cut = 0;
        out->device[0] = 0;
        for (int e = 0; e < g->count; e++) {
            const keyer_session *en = g->engine[e];
            int w;
            if (g->moved[e] > 0 && brief)
                w = snprintf(out->device + len, size - len, "%s%.16s (failed, %d moved)",
                             e ? " + " : "", en->device_name, g->moved[e]);
            else if (g->moved[e] > 0)
                w = snprintf(out->device + len, size - len,
                             "%s%.16s (failed: %d stream%s moved to other GPUs)", e ? " + " : "",
                             en->device_name, g->moved[e], g->moved[e] == 1 ? "" : "s");
            else if (en->use_cuda && atomic_load((atomic_int *)&en->gpu_failed))
                w = snprintf(out->device + len, size - len, "%s%.16s, then cpu (GPU failure)",
                             e ? " + " : "", en->device_name);
            else
                w = snprintf(out->device + len, size - len, "%s%s", e ? " + " : "",
                             en->device_name);
            if (w < 0 || (size_t)w >= size - len) {
                out->device[size - 1] = 0;
                cut = 1;
                break;
            }
            len += (size_t)w;
        }
        if (!cut)
            break;
    }
}

int keyer_session_stream_count(const keyer_session *s)
{
    if (!s || !s->group)
        return kr_engine_stream_count(s);
    return atomic_load(&s->group->streams);
}

keyer_status keyer_session_get_stream_report(keyer_session *s, int stream_id,
                                             keyer_stream_report *out, keyer_error *err)
{
    if (!s || !s->group)
        return kr_engine_get_stream_report(s, stream_id, out, err);
    if (s->group->split && stream_id == 0 && out) {
        kr_split_gpus_report(s->group->split, s->group->engine, s->group->count, out);
        return KEYER_OK;
    }
    int local;
    keyer_session *e = engine_of(s, stream_id, 0, &local, err, "keyer_session_get_stream_report");
    if (!e)
        return KEYER_STATUS_INVALID_ARGUMENT;
    keyer_status st = kr_engine_get_stream_report(e, local, out, err);
    int n = atomic_load(&s->group->parts[stream_id].n);
    if (st || n < 2 || !out)
        return st;
    /* moved after GPU failures: the parts as one stream, each part's GPU named once:
     * "cuda:1, then cuda:0 (GPU failure)", "cuda:1, then cuda:2, then cuda:0 (GPU failures)",
     * and ", then cpu" when the last one failed too */
    snprintf(out->device, sizeof(out->device), "%.16s", e->device_name);
    size_t len = strlen(out->device);
    int failures = n - 1;
    for (int p = 1; p < n; p++) {
        keyer_stream_report rest;
        keyer_session *pe = engine_of(s, stream_id, p, &local, NULL, NULL);
        if (kr_engine_get_stream_report(pe, local, &rest, NULL))
            continue;
        out->frames_read += rest.frames_read;
        out->frames_written += rest.frames_written;
        out->frames_dropped += rest.frames_dropped;
        out->frames_damaged += rest.frames_damaged;
        out->frames_lost += rest.frames_lost;
        out->reconnects += rest.reconnects;
        out->missed_frames += rest.missed_frames;
        out->disconnected_seconds += rest.disconnected_seconds;
        out->decoder_setups += rest.decoder_setups;
        out->decoded_pictures += rest.decoded_pictures;
        out->hw_decode |= rest.hw_decode;
        int last_failed = p == n - 1 && pe->use_cuda && atomic_load(&pe->gpu_failed);
        failures += last_failed;
        if (len + 1 < sizeof(out->device)) {
            int w = snprintf(out->device + len, sizeof(out->device) - len, ", then %.16s%s",
                             pe->device_name, last_failed ? ", then cpu" : "");
            len = w < 0 ? len : len + (size_t)w;
            if (len >= sizeof(out->device))
                len = sizeof(out->device) - 1;
        }
        if (!out->status && rest.status) {
            out->status = rest.status;
            snprintf(out->error, sizeof(out->error), "%s", rest.error);
        }
    }
    if (len + 1 < sizeof(out->device))
        snprintf(out->device + len, sizeof(out->device) - len, " (GPU failure%s)",
                 failures > 1 ? "s" : "");
    return KEYER_OK;
}

int kr_session_engines(keyer_session *s, keyer_session **out, int max)
{
    if (!s || !s->group || !out)
        return 0;
    int n = s->group->count < max ? s->group->count : max;
    for (int e = 0; e < n; e++)
        out[e] = s->group->engine[e];
    return n;
}

int kr_session_stream_engine(const keyer_session *s, int stream_id)
{
    if (!s || stream_id < 0 || stream_id >= keyer_session_stream_count(s))
        return -1;
    return s->group ? s->group->where[stream_id] : 0; /* -1: split over every engine */
}

void kr_session_fail_engine(keyer_session *s, int engine)
{
    if (!s || !s->group || engine < 0 || engine >= s->group->count)
        return;
    kr_engine_mark_failed(s->group->engine[engine], "device failure forced by a test");
}

int kr_session_stream_moved_to(const keyer_session *s, int stream_id)
{
    if (!s || !s->group || stream_id < 0 || stream_id >= keyer_session_stream_count(s))
        return -1;
    const stream_parts *sp = &s->group->parts[stream_id];
    int n = atomic_load(&sp->n);
    return n > 1 ? sp->engine[n - 1] : -1;
}

keyer_status keyer_session_write_trace(keyer_session *s, const char *path, keyer_error *err)
{
    if (s && s->group)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keyer_session_write_trace: a session over several GPUs has "
                               "one trace per GPU and cannot write them as one file");
    return kr_engine_write_trace(s, path, err);
}
