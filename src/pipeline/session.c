/* The keying session of one device (an engine): parameters, creation and tear-down, running, the
 * stream calls. Its start (models, device, stages) is engine_start.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "keyer/image.h"
#include "keyer/registry.h"
#include "pipeline/clock.h"
#include "pipeline/gate.h"
#include "pipeline/placement.h"
#include "pipeline/session.h"
#include "pipeline/split_gpus.h"
/* ---- parameters ----------------------------------------------------------------------------- */

#define OFF(f) offsetof(keyer_session_params, f)

static const keyer_option_choice device_choices[] = {
    {"auto", KEYER_DEVICE_AUTO, "CUDA when built, present and working, else the CPU"},
    {"cpu", KEYER_DEVICE_CPU, "the CPU only"},
    {"cuda", KEYER_DEVICE_CUDA, "a CUDA GPU (cuda_device picks which)"},
    {NULL, 0, NULL},
};

static const keyer_option_choice precision_choices[] = {
    {"auto", KEYER_PRECISION_AUTO, "per model: f16 where it meets keyer's half-precision bounds"},
    {"f32", KEYER_PRECISION_F32, "float32 throughout"},
    {"f16", KEYER_PRECISION_F16, "half-precision weights and activations"},
    {NULL, 0, NULL},
};

static const keyer_option_choice mode_choices[] = {
    {"throughput", KEYER_PIPELINE_THROUGHPUT, "files: large batches, deep queues"},
    {"latency", KEYER_PIPELINE_LATENCY, "live: batch 1, shallow queues, no batch waiting"},
    {NULL, 0, NULL},
};

static const keyer_option_choice reconnect_choices[] = {
    {"auto", KEYER_RECONNECT_AUTO, "live network inputs (rtsp, rtmp, srt, udp, rtp, live http)"},
    {"on", KEYER_RECONNECT_ON, "every network input"},
    {"off", KEYER_RECONNECT_OFF, "never: a break ends the stream"},
    {NULL, 0, NULL},
};

static const keyer_option_choice cuda_sync_choices[] = {
    {"auto", KEYER_CUDA_SYNC_AUTO, "CUDA's default (spin with fewer contexts than cores)"},
    {"spin", KEYER_CUDA_SYNC_SPIN, "spin: lowest latency, a core per waiting thread"},
    {"yield", KEYER_CUDA_SYNC_YIELD, "spin, yielding to other threads"},
    {"block", KEYER_CUDA_SYNC_BLOCK, "sleep until the GPU signals: frees the waiting cores"},
    {NULL, 0, NULL},
};

static const keyer_option session_options[] = {
    KEYER_OPTION_FIELD("device", "where to compute", OFF(device), KEYER_OPTION_ENUM,
        KEYER_DEVICE_AUTO, 0, 0, device_choices),
    KEYER_OPTION_FIELD("cuda_device", "CUDA device ordinal", OFF(cuda_device), KEYER_OPTION_INT, 0,
        0, 63, NULL),
    {"cuda_devices", "several GPUs: all, or ordinals 0,2 (before cuda_device); none: one GPU",
     OFF(cuda_devices), KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, kr_set_cuda_devices, "none",
     "all|N,N,...|none", 0, 0u},
    KEYER_OPTION_FIELD("split_gpus",
        "one file input over several GPUs: chunks at keyframes, written back in order",
        OFF(split_gpus), KEYER_OPTION_BOOL, 0, 0, 1, NULL),
    KEYER_OPTION_FIELD("split_chunks",
        "with split_gpus: chunks in flight per GPU, each on a decoder session of its own; "
        "0: 2", OFF(split_chunks), KEYER_OPTION_INT, 0, 0, KR_SPLIT_MAX_CHUNKS, NULL),
    KEYER_OPTION_FIELD("precision", "of the networks on CUDA (the CPU computes in float32)",
        OFF(precision), KEYER_OPTION_ENUM, KEYER_PRECISION_AUTO, 0, 0, precision_choices),
    KEYER_OPTION_FIELD("mode", "latency or throughput trade-off", OFF(mode), KEYER_OPTION_ENUM,
        KEYER_PIPELINE_THROUGHPUT, 0, 0, mode_choices),
    KEYER_OPTION_FIELD("batch", "frames per inference; 0: automatic", OFF(batch), KEYER_OPTION_INT,
        0, 0, 64, NULL),
    KEYER_OPTION_FIELD("batch_wait_us", "longest wait of a frame for its batch (us); -1: automatic",
        OFF(batch_wait_us), KEYER_OPTION_INT, -1, -1, 10000000, NULL),
    KEYER_OPTION_FIELD("queue_depth", "frames per queue between stages; 0: automatic",
        OFF(queue_depth), KEYER_OPTION_INT, 0, 0, 1024, NULL),
    KEYER_OPTION_FIELD("threads",
        "CPU threads inside each stage; 0: 1 (throughput) or half the cores (latency)",
        OFF(threads), KEYER_OPTION_INT, 0, 0, 1024, NULL),
    KEYER_OPTION_FIELD("composite_workers", "concurrent composite workers; 0: automatic",
        OFF(composite_workers), KEYER_OPTION_INT, 0, 0, KR_MAX_COMPOSITE_WORKERS, NULL),
    KEYER_OPTION_FIELD("refine_workers", "refine workers (a stream stays on one); 0: automatic",
        OFF(refine_workers), KEYER_OPTION_INT, 0, 0, KR_MAX_REFINE_WORKERS, NULL),
    KEYER_OPTION_FIELD("max_streams", "most streams in one session", OFF(max_streams),
        KEYER_OPTION_INT, 64, 1, 1024, NULL),
    KEYER_OPTION_FIELD("live",
        "drop the oldest frames of live inputs under overload: -1 auto, 0 never, 1 always",
        OFF(live), KEYER_OPTION_INT, -1, -1, 1, NULL),
    KEYER_OPTION_FIELD("realtime", "read file inputs at their frame rate, like live sources",
        OFF(realtime), KEYER_OPTION_BOOL, 0, 0, 1, NULL),
    KEYER_OPTION_FIELD("reconnect", "reopen network inputs that break off, with back-off",
        OFF(reconnect), KEYER_OPTION_ENUM, KEYER_RECONNECT_AUTO, 0, 0, reconnect_choices),
    KEYER_OPTION_FIELD("reconnect_max",
        "seconds a broken network input tries to reconnect before its stream fails",
        OFF(reconnect_max), KEYER_OPTION_FLOAT, 30, 0, 1e6, NULL),
    KEYER_OPTION_FIELD("input_timeout",
        "seconds without data after which a network open or read fails; 0: none",
        OFF(input_timeout), KEYER_OPTION_FLOAT, 10, 0, 86400, NULL),
    KEYER_OPTION_FIELD("decode_segments",
        "NVDEC sessions per file stream (split at keyframes, frames in order); 0 or 1: one; "
        "-1: two while a GPU gets fewer than 16 of the expected file streams",
        OFF(decode_segments), KEYER_OPTION_INT, -1, -1, 16, NULL),
    KEYER_OPTION_FIELD("expected_files",
        "file inputs that will be added (the keyer program: its inputs); 0: not said",
        OFF(expected_files), KEYER_OPTION_INT, 0, 0, 1 << 20, NULL),
    KEYER_OPTION_FIELD("decode_surfaces", "extra NVDEC surfaces per decoder; 0: libavcodec's",
        OFF(decode_surfaces), KEYER_OPTION_INT, 0, 0, 16, NULL),
    KEYER_OPTION_FIELD("decode_ahead",
        "pictures each NVDEC session decodes ahead of the one returned (H.264); 0: none; "
        "-1: 4 for file streams, none for live ones",
        OFF(decode_ahead), KEYER_OPTION_INT, 0, -1, 8, NULL),
    {"decode_shared_stream",
     "NVDEC copies on the device's shared default stream instead of one per decoder (for "
     "comparisons)", OFF(decode_shared_stream), KEYER_OPTION_BOOL, 0, 0, 1, NULL, NULL, NULL,
     NULL, 0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    KEYER_OPTION_FIELD("cuda_sync",
        "how threads wait for the GPU (the device's setting, for the whole process)",
        OFF(cuda_sync), KEYER_OPTION_ENUM, KEYER_CUDA_SYNC_AUTO, 0, 0, cuda_sync_choices),
    KEYER_OPTION_FIELD("trace_events", "record a trace with room for this many events; 0: off",
        OFF(trace_events), KEYER_OPTION_INT, 0, 0, 1 << 26, NULL),
    KEYER_OPTION_FIELD("progress_interval_ms", "progress callback period",
        OFF(progress_interval_ms), KEYER_OPTION_INT, 200, 10, 60000, NULL),
    KEYER_OPTION_END,
};

const keyer_option *keyer_session_options(void)
{
    return session_options;
}

keyer_session_params keyer_session_params_defaults(void)
{
    keyer_session_params p;
    memset(&p, 0, sizeof(p));
    keyer_options_set_defaults(session_options, &p, NULL);
    p.refine = keyer_refine_params_defaults();
    p.composite = keyer_composite_params_defaults();
    p.mesh_max_faces = 4;
    return p;
}

keyer_file_stream_params keyer_file_stream_params_defaults(void)
{
    keyer_file_stream_params p;
    memset(&p, 0, sizeof(p));
    p.reader = keyer_reader_params_defaults();
    p.writer = keyer_writer_params_defaults();
    p.copy_streams = 1;
    p.live = -1;
    return p;
}

keyer_stream_params keyer_stream_params_defaults(void)
{
    keyer_stream_params p;
    memset(&p, 0, sizeof(p));
    p.memory = KEYER_MEMORY_HOST;
    p.frame_rate = (keyer_rational){0, 1};
    p.time_base = (keyer_rational){0, 1};
    p.writer = keyer_writer_params_defaults();
    return p;
}

/* ---- reports from the stages ------------------------------------------------------------------ */

/* Records the session's first fatal error and stops reading everywhere. */
static void session_fail(keyer_session *s, keyer_status st, const keyer_error *err)
{
    pthread_mutex_lock(&s->err_lock);
    int first = s->status == KEYER_OK;
    if (first) {
        s->status = st;
        s->error.status = st;
        snprintf(s->error.message, sizeof(s->error.message), "%s",
                 err && err->message[0] ? err->message : keyer_status_name(st));
    }
    pthread_mutex_unlock(&s->err_lock);
    /* the caller gets the message from keyer_session_run() or the send/receive calls */
    if (first)
        keyer_log(s->logger, KEYER_LOG_INFO, "stopping after an error: %s", s->error.message);
    kr_engine_cancel(s);
}

/* Wakes keyer_session_run() (a file sink finished). */
static void notify(keyer_session *s)
{
    pthread_mutex_lock(&s->done_lock);
    pthread_cond_broadcast(&s->done_cond);
    pthread_mutex_unlock(&s->done_lock);
}

/* The stages' and streams' reports (kr_stage_ctx::report). */
static void on_report(void *opaque, kr_report what, int stream, keyer_status status,
                      const keyer_error *err)
{
    keyer_session *s = opaque;
    switch (what) {
    case KR_REPORT_ERROR:
        if (stream >= 0 && stream < atomic_load(&s->stream_count) && s->streams[stream]) {
            /* the stream fails alone: the others go on */
            kr_stream *st = s->streams[stream];
            if (!kr_stream_status(st, NULL))
                keyer_log(s->logger, KEYER_LOG_INFO, "stream %d (%s) stops after an error: %s",
                          stream, st->input ? st->input : "pushed frames",
                          err && err->message[0] ? err->message : keyer_status_name(status));
            kr_stream_record_error(st, status, err);
            break;
        }
        session_fail(s, status, err);
        break;
    case KR_REPORT_GPU_FAILURE: {
        int expected = 0;
        if (atomic_compare_exchange_strong(&s->gpu_failed, &expected, 1))
            kr_stage_warn(&s->ctx,
                          s->env.failover
                              ? "GPU failure on %s: its file streams move to another GPU where "
                                "one is running, the rest is processed on the CPU: %s"
                              : "GPU failure on %s, the remaining frames are processed on the "
                                "CPU: %s",
                          s->device_name, err && err->message[0] ? err->message : "unknown error");
        break;
    }
    case KR_REPORT_SINK_DONE:
        notify(s);
        break;
    }
}

/* ---- create / destroy / cancel ---------------------------------------------------------------- */

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

static const char *const stage_names[KR_ST_COUNT] = {"read",      "prepare", "infer", "refine",
                                                     "composite", "write",   "detect", "mesh",
                                                     "pose"};

static int is_image_path(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot)
        return 0;
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif",
                                       ".tiff", ".ppm", ".pgm", NULL};
    for (int i = 0; exts[i]; i++) {
        const char *a = dot, *b = exts[i];
        while (*a && *b && (*a | 0x20) == (*b | 0x20))
            a++, b++;
        if (!*a && !*b)
            return 1;
    }
    return 0;
}

/* Checks the parameters (and what they name) before anything is made. */
static keyer_status check_params(keyer_session_params *p, keyer_error *err)
{
    keyer_status st = keyer_options_validate(session_options, p, "session parameters", err);
    if (st)
        return st;
    if (p->batch_wait_us < -1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: batch_wait_us %d is below -1",
                               p->batch_wait_us);
    p->refine.max_streams = p->max_streams;
    if ((st = keyer_options_validate(keyer_refine_options(), &p->refine, "refine parameters",
                                     err)))
        return st;
    if ((st = keyer_options_validate(keyer_composite_options(), &p->composite,
                                     "composite parameters", err)))
        return st;
    {
        /* the effects check their own parameters (threshold_low < threshold_high, ...) */
        keyer_refine *ref = NULL;
        keyer_composite *comp = NULL;
        keyer_refine_params rp = p->refine;
        keyer_composite_params cp = p->composite;
        rp.threads = cp.threads = 1;
        if ((st = keyer_refine_create(&rp, &ref, err)) ||
            (st = keyer_composite_create(&cp, &comp, err))) {
            keyer_refine_destroy(&ref);
            return st;
        }
        keyer_refine_destroy(&ref);
        keyer_composite_destroy(&comp);
    }
    if (p->composite.mode == KEYER_COMPOSITE_IMAGE && !p->background)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: composite mode image needs a background "
                               "image or video");
    if (p->detect < KEYER_SESSION_DETECT_NONE || p->detect > KEYER_SESSION_DETECT_FACES_FULL ||
        !(p->detect_min_score < 1.0f))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: detect %d is not a keyer_session_detect, or "
                               "detect_min_score is not below 1", p->detect);
    if (p->detect && !p->detect_fn && !p->mesh && !p->pose)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: detect needs detect_fn");
    if (p->mesh && (p->mesh != 1 || !p->detect || !p->faces_fn || p->mesh_max_faces < 1 ||
                    p->mesh_max_faces > KEYER_FACES_MAX || p->mesh_detect_interval < 0))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: mesh needs detect and faces_fn, "
                               "mesh_max_faces 1..%d and mesh_detect_interval >= 0",
                               KEYER_FACES_MAX);
    if (p->pose && (p->pose != 1 || p->detect != KEYER_SESSION_DETECT_FACES_FULL || p->mesh ||
                    !p->pose_fn || p->pose_model < KEYER_POSE_MODEL_LITE ||
                    p->pose_model > KEYER_POSE_MODEL_HEAVY))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: pose needs detect faces_full (its seeding), "
                               "pose_fn and a pose_model 0..2, and no mesh");
    if (p->detect) {
        char path[4096];
        const char *dn = p->detect == KEYER_SESSION_DETECT_FACES_FULL ? "face-full" : "face-short";
        if ((st = keyer_registry_resolve(dn, path, sizeof(path), err)))
            return keyer_error_prefix(err, "detection: ");
    }
    if (p->model_desc && (st = keyer_model_desc_validate(p->model_desc, err)))
        return st;
    if (p->model) {
        /* an unknown name or a missing file is reported now, not when the stages start */
        return kr_infer_resolve(p->model, err);
    }
    return KEYER_OK;
}

/* What the stages and streams get from the session: made once, at create. */
static void init_context(keyer_session *s)
{
    s->ctx = (kr_stage_ctx){s->logger, s->trace,  &s->warnings, &s->gpu_failed,
                            &s->cancel, on_report, s};
    s->env.ctx = &s->ctx;
    s->env.params = &s->params;
    s->env.stream_count = &s->stream_count;
    s->env.read_stats = &s->stages[KR_ST_READ];
    s->env.prepare_stats = &s->stages[KR_ST_PREPARE];
    s->env.write_stats = &s->stages[KR_ST_WRITE];
    s->env.out = &s->out;
}

keyer_status kr_engine_create(const keyer_session_params *params, keyer_session **out,
                                  keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_create: out is NULL");
    *out = NULL;
    keyer_session_params p = params ? *params : keyer_session_params_defaults();
    keyer_status st = check_params(&p, err);
    if (st)
        return st;

    keyer_session *s = calloc(1, sizeof(*s));
    if (!s)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    pthread_mutex_init(&s->err_lock, NULL);
    pthread_mutex_init(&s->stats_lock, NULL);
    pthread_mutex_init(&s->out.lock, NULL);
    pthread_mutex_init(&s->done_lock, NULL);
    pthread_mutex_init(&s->accept_lock, NULL);
    /* its timed waits take CLOCK_MONOTONIC deadlines (kr_clock_deadline): with the default
     * clock they would all be in the past, and keyer_session_run() would spin */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->done_cond, &ca);
    pthread_condattr_destroy(&ca);
    s->params = p;
    if (p.logger) {
        s->logger_copy = *p.logger;
        s->logger = &s->logger_copy;
    }
    s->params.logger = s->logger;
    s->fail_cuda_at = -1;
    /* "N": any device; "cuda:K@N": this engine only when it computes on CUDA device K; a
     * comma-separated list of those: each device its own frame */
    s->fail_cuda_at = kr_fail_spec_frame(getenv("KEYER_FAIL_CUDA_AT_FRAME"), p.cuda_device);
    s->model_name = dup_or_null(p.model);
    s->background_path = dup_or_null(p.background);
    s->params.model = s->model_name;
    s->params.background = s->background_path;
    if (p.model_desc)
        s->model_desc = *p.model_desc, s->params.model_desc = &s->model_desc;
    s->streams = calloc((size_t)p.max_streams, sizeof(*s->streams));
    if ((p.model && !s->model_name) || (p.background && !s->background_path) || !s->streams) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        goto fail;
    }
    atomic_init(&s->stream_count, 0);
    atomic_init(&s->cancel, 0);
    atomic_init(&s->gpu_failed, 0);
    atomic_init(&s->warnings, 0);
    atomic_init(&s->batches.batches, 0);
    atomic_init(&s->batches.frames, 0);
    atomic_init(&s->batches.full, 0);
    s->gpu_mem_used = s->gpu_mem_total = -1;
    snprintf(s->device_name, sizeof(s->device_name), "cpu");
    for (int i = 0; i < KR_ST_COUNT; i++) {
        if (kr_stage_stats_init(&s->stages[i], stage_names[i], 1)) {
            for (int j = 0; j < i; j++)
                kr_stage_stats_fini(&s->stages[j]);
            st = keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot create a mutex");
            goto fail;
        }
    }
    s->stages_ready = 1;
    if (p.trace_events > 0 && (st = kr_trace_create(p.trace_events, &s->trace, err)))
        goto fail;
    /* NVENC or x264/x265 for outputs whose codec is left to keyer: probed once, on the
     * session's device, when the first such output opens */
    if ((st = keyer_encoder_probe_create(p.cuda_device > 0 ? p.cuda_device : 0,
                                         &s->encoder_probe, err)))
        goto fail;
    init_context(s);
    s->env.encoder_probe = s->encoder_probe;
    /* A still background is read once, here, so a bad file is reported before any work. */
    if (p.composite.mode == KEYER_COMPOSITE_IMAGE && is_image_path(s->background_path)) {
        if ((st = keyer_frame_create(&s->bg_image, err)) ||
            (st = keyer_image_read(s->background_path, KEYER_PIXEL_FORMAT_RGB24, s->bg_image,
                                   err)))
            goto fail;
    }
    *out = s;
    return KEYER_OK;
fail:
    kr_engine_destroy(&s);
    return st;
}

void kr_engine_cancel(keyer_session *s)
{
    if (!s)
        return;
    atomic_store(&s->cancel, 1);
    int n = atomic_load(&s->stream_count);
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        if (st)
            kr_stream_interrupt(st);
    }
}

/* Stops the shared stages: every queue is cancelled first (a worker blocked on the next
 * stage's queue wakes up), then the workers are joined and queued items go back home. */
static void stop_shared(keyer_session *s)
{
    kr_model_stage *det = s->detect ? kr_detect_stage(s->detect) : NULL;
    kr_model_stage *mesh = s->mesh ? kr_mesh_stage(s->mesh) : NULL;
    kr_model_stage *pose = s->pose ? kr_pose_stage_model(s->pose) : NULL;
    kr_model_stage *inf = s->infer ? kr_infer_stage(s->infer) : NULL;
    kr_model_stage *people = s->people ? kr_people_stage_model(s->people) : NULL;
    kr_model_stage_cancel(det);
    kr_model_stage_cancel(mesh);
    kr_model_stage_cancel(pose);
    kr_model_stage_cancel(inf);
    kr_model_stage_cancel(people);
    kr_refine_stage_cancel(s->refine);
    kr_composite_stage_cancel(s->composite);
    kr_model_stage_join(det);
    kr_model_stage_join(mesh);
    kr_model_stage_join(pose);
    kr_model_stage_join(inf);
    kr_model_stage_join(people);
    kr_refine_stage_join(s->refine);
    kr_composite_stage_join(s->composite);
}

void kr_engine_release_streams(keyer_session *s)
{
    if (!s)
        return;
    kr_engine_cancel(s);
    int n = atomic_load(&s->stream_count);
    /* Sources stop first (cancel), then the shared stages are stopped, then each stream
     * joins its threads, finalises its output and frees its pool. */
    for (int i = 0; i < n; i++)
        if (s->streams[i])
            kr_stream_cancel(s->streams[i]);
    stop_shared(s);
    for (int i = 0; i < n; i++)
        kr_stream_destroy(&s->streams[i]);
}

void kr_engine_destroy(keyer_session **sp)
{
    if (!sp || !*sp)
        return;
    keyer_session *s = *sp;
    kr_engine_release_streams(s);
    kr_detect_destroy(&s->detect);
    kr_mesh_destroy(&s->mesh);
    kr_pose_stage_destroy(&s->pose);
    kr_people_stage_destroy(&s->people);
    kr_infer_destroy(&s->infer);
    kr_refine_stage_destroy(&s->refine);
    kr_composite_stage_destroy(&s->composite);
    keyer_frame_destroy(&s->bg_image);
    kr_trace_destroy(&s->trace);
    keyer_encoder_probe_destroy(&s->encoder_probe); /* after every writer */
    kr_nvml_close(&s->nvml);
    if (s->stages_ready)
        for (int i = 0; i < KR_ST_COUNT; i++)
            kr_stage_stats_fini(&s->stages[i]);
    free(s->streams);
    free(s->model_name);
    free(s->background_path);
    pthread_cond_destroy(&s->done_cond);
    pthread_mutex_destroy(&s->done_lock);
    pthread_mutex_destroy(&s->accept_lock);
    pthread_mutex_destroy(&s->out.lock);
    pthread_mutex_destroy(&s->stats_lock);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
    *sp = NULL;
}

/* ---- start: models, device, stages, threads ---------------------------------------------------- */

keyer_status kr_engine_set_model(keyer_session *s, const char *name, keyer_error *err)
{
    if (s->started)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: the model cannot change once the stages run");
    char *copy = dup_or_null(name);
    if (name && !copy)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    free(s->model_name);
    s->model_name = copy;
    s->params.model = copy;
    return KEYER_OK;
}

static void sample_gpu(keyer_session *s)
{
    int64_t used, total;
    int util;
    if (kr_nvml_sample(s->nvml, &used, &total, &util) == 0) {
        pthread_mutex_lock(&s->stats_lock);
        if (used > s->gpu_mem_used)
            s->gpu_mem_used = used;
        s->gpu_mem_total = total;
        s->gpu_util_sum += util;
        s->gpu_util_samples++;
        pthread_mutex_unlock(&s->stats_lock);
    }
}

static void report_progress(keyer_session *s, int64_t t0)
{
    if (!s->params.progress)
        return;
    keyer_session_progress pr;
    memset(&pr, 0, sizeof(pr));
    int n = atomic_load(&s->stream_count);
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        pr.frames_done += atomic_load(&st->frames_written);
        pr.frames_read += atomic_load(&st->frames_read);
        if (st->source == KR_SOURCE_READER && !st->continuation) /* counted by its first part */
            pr.frames_total += st->info.frame_count;
    }
    pr.elapsed = (double)(kr_clock_ns() - t0) * 1e-9;
    pr.fps = pr.elapsed > 0 ? (double)pr.frames_done / pr.elapsed : 0.0;
    pr.remaining = -1.0;
    if (pr.frames_total > 0 && pr.fps > 0 && pr.frames_done <= pr.frames_total)
        pr.remaining = (double)(pr.frames_total - pr.frames_done) / pr.fps;
    s->params.progress(s->params.progress_opaque, &pr);
}

/* File sinks of the first @p n streams still writing. */
static int sinks_pending(keyer_session *s, int n)
{
    int pending = 0;
    for (int i = 0; i < n; i++)
        pending += kr_stream_sink_pending(s->streams[i]);
    return pending;
}

/* Waits for every file sink, calling the progress callback and sampling the GPU; streams
 * moved here from a failed GPU while it waits (kr_engine_add_continuation) are waited for
 * too. Returns the streams there are then: no stream is added after it returns. */
static int wait_for_sinks(keyer_session *s)
{
    int64_t t0 = kr_clock_ns();
    int64_t interval = (int64_t)s->params.progress_interval_ms * 1000000;
    for (;;) {
        if (!sinks_pending(s, atomic_load(&s->stream_count))) {
            /* a continuation is published and started under accept_lock: none is half made */
            pthread_mutex_lock(&s->accept_lock);
            int n = atomic_load(&s->stream_count);
            int done = !sinks_pending(s, n);
            if (done && s->hold) {
                /* several GPUs: open to moved streams while another engine works */
                if (s->counted) {
                    s->counted = 0;
                    if (atomic_fetch_sub(s->hold, 1) == 1 && s->hold_wake)
                        s->hold_wake(s->hold_opaque);
                }
                done = atomic_load(s->hold) == 0;
            }
            if (done)
                s->closing = 1;
            pthread_mutex_unlock(&s->accept_lock);
            if (done)
                break;
        }
        sample_gpu(s);
        report_progress(s, t0);
        pthread_mutex_lock(&s->done_lock);
        struct timespec ts = kr_clock_deadline(kr_clock_ns() + interval);
        pthread_cond_timedwait(&s->done_cond, &s->done_lock, &ts);
        pthread_mutex_unlock(&s->done_lock);
    }
    sample_gpu(s);
    report_progress(s, t0);
    return atomic_load(&s->stream_count);
}

keyer_status kr_engine_run(keyer_session *s, keyer_error *err)
{
    if (!s)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_session_run: NULL");
    if (s->run_called)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: the session already ran");
    int n = atomic_load(&s->stream_count);
    int files = 0, opened = 0;
    for (int i = 0; i < n; i++) {
        files += s->streams[i]->source == KR_SOURCE_READER;
        opened += s->streams[i]->source == KR_SOURCE_READER && !s->streams[i]->open_failed;
    }
    int standby = files == 0 && s->hold; /* several GPUs: for streams moved here */
    if (files == 0 && !standby)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: no input was added");
    s->run_called = 1;
    /* with no input opened there is nothing to start: the streams' errors are the result */
    keyer_status st = opened || standby ? kr_engine_start(s, err) : KEYER_OK;
    if (st && standby) {
        /* a standby that cannot start takes no stream; the others run on */
        keyer_log(s->logger, KEYER_LOG_WARNING,
                  "%s: cannot start as a standby for the other GPUs' streams: %s",
                  s->device_name, err ? err->message : keyer_status_name(st));
        if (err)
            keyer_error_clear(err);
        st = KEYER_OK;
    } else if (st) {
        session_fail(s, st, err);
    }
    if (s->start_gate) {
        /* every GPU's engine starts reading at once (at most 60 s apart) */
        int64_t t = kr_gate_pass(s->start_gate, (int64_t)60 * 1000000000);
        pthread_mutex_lock(&s->out.lock);
        s->out.t_start = s->out.t_last = t;
        pthread_mutex_unlock(&s->out.lock);
    }
    for (int i = 0; i < n && !st; i++) {
        kr_stream *ss = s->streams[i];
        if (ss->source != KR_SOURCE_READER || ss->open_failed)
            continue;
        keyer_error se = {0};
        keyer_status rs = kr_stream_start(ss, &se);
        if (rs) {
            /* this stream fails alone (its output cannot be made, ...) */
            on_report(s, KR_REPORT_ERROR, ss->id, rs, &se);
            kr_stream_cancel(ss); /* unblock what of it did start */
        }
    }
    n = wait_for_sinks(s);
    /* join the file streams' threads and finalise their outputs */
    keyer_status first = KEYER_OK;
    keyer_error first_err = {0};
    for (int i = 0; i < n; i++)
        if (s->streams[i]->source == KR_SOURCE_READER)
            kr_stream_finish(s->streams[i], &first, &first_err);
    pthread_mutex_lock(&s->err_lock);
    if (s->status && !first) {
        first = s->status;
        first_err = s->error;
    }
    pthread_mutex_unlock(&s->err_lock);
    if (first) {
        if (err)
            *err = first_err;
        return first;
    }
    if (atomic_load(&s->cancel))
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                               "interrupted: the outputs hold every frame read before the stop");
    return KEYER_OK;
}

/* ---- streams ---------------------------------------------------------------------------------- */

static void stream_publish(keyer_session *s, kr_stream *st)
{
    s->streams[st->id] = st;
    atomic_store(&s->stream_count, st->id + 1);
}

keyer_status kr_engine_add_file(keyer_session *s, const keyer_file_stream_params *params,
                                    int *stream_id, keyer_error *err)
{
    if (!s || !params || !params->input)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_add_file: %s", !s ? "session is NULL"
                                                             : "no input given");
    if (s->run_called || s->started)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_add_file: the session is already running");
    int id = atomic_load(&s->stream_count);
    if (id >= s->params.max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: at most %d streams (max_streams)", s->params.max_streams);
    kr_stream *st = NULL;
    keyer_status rs = kr_stream_open_file(&s->env, id, params, &st, err);
    if (rs && params->fail_alone && rs != KEYER_STATUS_INVALID_ARGUMENT &&
        rs != KEYER_STATUS_OUT_OF_MEMORY) {
        /* kept as a failed stream: reported, and the other streams run */
        keyer_error cause = err ? *err : (keyer_error){0};
        if (!err)
            keyer_error_set(&cause, rs, "%s: cannot open", params->input);
        keyer_log(s->logger, KEYER_LOG_INFO, "stream %d (%s) fails alone: %s", id,
                  params->input, cause.message);
        rs = kr_stream_open_failed(&s->env, id, params, rs, &cause, &st, err);
        if (!rs && err)
            keyer_error_clear(err);
    }
    if (rs)
        return rs;
    stream_publish(s, st);
    if (stream_id)
        *stream_id = st->id;
    if (atomic_load(&s->cancel))
        kr_stream_interrupt(st);
    return KEYER_OK;
}

/* Makes @p st continue a stream of a failed GPU's engine as @p c says (stream.h). */
static void continue_from(kr_stream *st, const kr_continuation *c)
{
    st->continuation = 1;
    st->handoff_in = c->handoff;
    st->resume_pts = st->live ? INT64_MIN : c->resume_pts;
    st->seq_base = c->seq_base;
    st->switch_ns = c->switch_ns;
    st->switch_pts = c->switch_pts;
}

keyer_status kr_engine_add_continuation(keyer_session *s, const keyer_file_stream_params *params,
                                        const kr_continuation *c, int *stream_id,
                                        keyer_error *err)
{
    pthread_mutex_lock(&s->accept_lock);
    keyer_status rs = KEYER_OK;
    int id = atomic_load(&s->stream_count);
    if (!s->started || s->closing || !s->run_called || atomic_load(&s->cancel) ||
        atomic_load(&s->gpu_failed) || id >= s->params.max_streams) {
        rs = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "%s: not running, failed, stopping or full", s->device_name);
        goto done;
    }
    kr_stream *st = NULL;
    if ((rs = kr_stream_open_file(&s->env, id, params, &st, err)))
        goto done;
    continue_from(st, c);
    stream_publish(s, st);
    if ((rs = kr_stream_start(st, err))) {
        s->streams[id] = NULL;
        atomic_store(&s->stream_count, id);
        kr_stream_destroy(&st);
        goto done;
    }
    if (s->hold && !s->counted) {
        /* working again: the other engines stay open while it does */
        s->counted = 1;
        atomic_fetch_add(s->hold, 1);
    }
    if (stream_id)
        *stream_id = id;
done:
    pthread_mutex_unlock(&s->accept_lock);
    return rs;
}

/* A pushed stream opened, published and started (the first stream decides the model by its
 * aspect ratio and starts the stages); @p c (or NULL) is the stream it continues. On failure
 * the stream is unpublished and destroyed. */
static keyer_status open_push(keyer_session *s, const keyer_stream_params *params,
                              const kr_continuation *c, int *stream_id, keyer_error *err)
{
    kr_stream *st = NULL;
    keyer_status rs = kr_stream_open_push(&s->env, atomic_load(&s->stream_count), params, &st,
                                          err);
    if (rs)
        return rs;
    if (c)
        continue_from(st, c);
    stream_publish(s, st);
    if ((rs = kr_engine_start(s, err)) || (rs = kr_stream_start(st, err))) {
        s->streams[st->id] = NULL;
        atomic_store(&s->stream_count, st->id);
        kr_stream_destroy(&st);
        return rs;
    }
    if (stream_id)
        *stream_id = st->id;
    return KEYER_OK;
}

keyer_status kr_engine_open_continuation(keyer_session *s, const keyer_stream_params *params,
                                         const kr_continuation *c, int *stream_id,
                                         keyer_error *err)
{
    if (!s || !params || !c)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_engine_open_continuation: NULL argument");
    if (atomic_load(&s->gpu_failed) || atomic_load(&s->cancel))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: failed or stopping",
                               s->device_name);
    return open_push(s, params, c, stream_id, err);
}

void kr_engine_end_input(keyer_session *s, int stream_id)
{
    if (!s || stream_id < 0 || stream_id >= atomic_load(&s->stream_count) ||
        !s->streams[stream_id] || s->streams[stream_id]->source != KR_SOURCE_PUSH)
        return;
    kr_stream *st = s->streams[stream_id];
    atomic_store(&st->closed, 1);
    kr_queue_close(st->ingest);
}

void kr_engine_wake(keyer_session *s)
{
    if (s)
        notify(s);
}

void kr_engine_set_failover(keyer_session *s, int (*fn)(void *, kr_stream *, int64_t, int64_t),
                            void *opaque)
{
    s->env.failover = fn;
    s->env.failover_opaque = opaque;
}

void kr_engine_mark_failed(keyer_session *s, const char *why)
{
    keyer_error e = {0};
    keyer_error_set(&e, KEYER_STATUS_DEVICE, "%s", why);
    on_report(s, KR_REPORT_GPU_FAILURE, -1, KEYER_STATUS_DEVICE, &e);
}

keyer_status kr_engine_open_stream(keyer_session *s, const keyer_stream_params *params,
                                       int *stream_id, keyer_error *err)
{
    if (!s || !params)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: NULL argument");
    return open_push(s, params, NULL, stream_id, err);
}

/* The pushed stream @p id, or NULL (error set for @p fn). */
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

keyer_status kr_engine_send_frame(keyer_session *s, int stream_id, const keyer_frame *frame,
                                      keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_send_frame");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    return kr_stream_send(st, frame, err);
}

keyer_status kr_engine_receive_frame(keyer_session *s, int stream_id, keyer_frame *out,
                                         int64_t timeout_us, keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_receive_frame");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    return kr_sink_receive(st, out, timeout_us, err);
}

keyer_status kr_engine_close_stream(keyer_session *s, int stream_id, keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_close_stream");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    return kr_stream_close(st, err);
}

keyer_status kr_engine_stream_status(keyer_session *s, int stream_id, keyer_error *err)
{
    if (!s || stream_id < 0 || stream_id >= atomic_load(&s->stream_count) ||
        !s->streams[stream_id])
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_stream_status: no stream %d", stream_id);
    return kr_stream_status(s->streams[stream_id], err);
}
