/* The keying session: parameters, set-up of the devices and stages, running, the stream calls. */
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
#include "pipeline/session.h"

#include "keyer/people.h"
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

static const keyer_option session_options[] = {
    KEYER_OPTION_FIELD("device", "where to compute", OFF(device), KEYER_OPTION_ENUM,
        KEYER_DEVICE_AUTO, 0, 0, device_choices),
    KEYER_OPTION_FIELD("cuda_device", "CUDA device ordinal", OFF(cuda_device), KEYER_OPTION_INT, 0,
        0, 63, NULL),
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
    keyer_session_cancel(s);
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
                          "GPU failure, the remaining frames are processed on the CPU: %s",
                          err && err->message[0] ? err->message : "unknown error");
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
                                                     "composite", "write",   "detect"};

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
    if (p->detect && !p->detect_fn)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: detect needs detect_fn");
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

keyer_status keyer_session_create(const keyer_session_params *params, keyer_session **out,
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
    const char *fail_env = getenv("KEYER_FAIL_CUDA_AT_FRAME");
    if (fail_env && *fail_env) {
        char *end = NULL;
        long n = strtol(fail_env, &end, 10);
        if (end && !*end && n >= 0 && n < (1L << 30))
            s->fail_cuda_at = (int)n;
    }
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
    init_context(s);
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
    keyer_session_destroy(&s);
    return st;
}

void keyer_session_cancel(keyer_session *s)
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
    kr_model_stage *inf = s->infer ? kr_infer_stage(s->infer) : NULL;
    kr_model_stage_cancel(det);
    kr_model_stage_cancel(inf);
    kr_refine_stage_cancel(s->refine);
    kr_composite_stage_cancel(s->composite);
    kr_model_stage_join(det);
    kr_model_stage_join(inf);
    kr_refine_stage_join(s->refine);
    kr_composite_stage_join(s->composite);
}

void keyer_session_destroy(keyer_session **sp)
{
    if (!sp || !*sp)
        return;
    keyer_session *s = *sp;
    keyer_session_cancel(s);
    int n = atomic_load(&s->stream_count);
    /* Sources stop first (cancel), then the shared stages are stopped, then each stream
     * joins its threads, finalises its output and frees its pool. */
    for (int i = 0; i < n; i++)
        if (s->streams[i])
            kr_stream_cancel(s->streams[i]);
    stop_shared(s);
    for (int i = 0; i < n; i++)
        kr_stream_destroy(&s->streams[i]);
    kr_detect_destroy(&s->detect);
    kr_infer_destroy(&s->infer);
    kr_refine_stage_destroy(&s->refine);
    kr_composite_stage_destroy(&s->composite);
    keyer_frame_destroy(&s->bg_image);
    kr_trace_destroy(&s->trace);
    kr_nvml_close(&s->nvml);
    if (s->stages_ready)
        for (int i = 0; i < KR_ST_COUNT; i++)
            kr_stage_stats_fini(&s->stages[i]);
    free(s->streams);
    free(s->model_name);
    free(s->background_path);
    pthread_cond_destroy(&s->done_cond);
    pthread_mutex_destroy(&s->done_lock);
    pthread_mutex_destroy(&s->out.lock);
    pthread_mutex_destroy(&s->stats_lock);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
    *sp = NULL;
}

/* ---- start: models, device, stages, threads ---------------------------------------------------- */

static const char *auto_model(keyer_session *s)
{
    int n = atomic_load(&s->stream_count);
    if (n == 0)
        return "selfie";
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        if (st->open_failed)
            continue;
        int w = st->width, h = st->height;
        if (st->source == KR_SOURCE_READER && (st->info.rotation == 90 || st->info.rotation == 270)) {
            int t = w;
            w = h;
            h = t;
        }
        if (h <= 0 || (double)w / (double)h < 1.5)
            return "selfie";
    }
    return "selfie-landscape";
}

/* The model stages, in the order items pass them: the detector first, then the keying model. */
static int model_stages(keyer_session *s, kr_model_stage **out)
{
    int n = 0;
    if (s->detect)
        out[n++] = kr_detect_stage(s->detect);
    if (s->infer)
        out[n++] = kr_infer_stage(s->infer);
    return n;
}

/* Loads the keying model (slot 0) and the detector (the next slot). */
static keyer_status load_models(keyer_session *s, keyer_error *err)
{
    const keyer_session_params *p = &s->params;
    keyer_status st;
    if (p->passthrough) {
        snprintf(s->model_used, sizeof(s->model_used), "none");
        snprintf(s->device_name, sizeof(s->device_name), "cpu");
    } else {
        const char *name = s->model_name ? s->model_name : auto_model(s);
        snprintf(s->model_used, sizeof(s->model_used), "%s", name);
        kr_infer_params ip = {name, p->model_desc, 0, &s->ctx, &s->stages[KR_ST_INFER],
                              &s->batches, s->serial_threads, s->fail_cuda_at, p->precision,
                              p->max_streams,
                              p->device == KEYER_DEVICE_CUDA ? p->cuda_device : -1};
        if ((st = kr_infer_create(&ip, &s->infer, err)))
            return st;
    }
    if (p->detect) {
        /* without keying the session's batch counters count the detector's batches */
        kr_detect_params dp = {p->detect == KEYER_SESSION_DETECT_FACES_FULL,
                               p->detect_min_score,
                               s->infer ? 1 : 0,
                               &s->ctx,
                               &s->stages[KR_ST_DETECT],
                               s->infer ? NULL : &s->batches,
                               s->serial_threads,
                               s->fail_cuda_at,
                               p->precision};
        if ((st = kr_detect_create(&dp, &s->detect, err)))
            return st;
    }
    return KEYER_OK;
}

/* Creates the runtimes of one device for batch 1, 2, 4, ... up to s->batch. */
static keyer_status create_runtimes(keyer_session *s, int cuda, keyer_error *err)
{
    kr_model_stage *ms[2];
    int n = model_stages(s, ms);
    for (int i = 0; i < n; i++) {
        keyer_status st = kr_model_stage_runtimes(ms[i], cuda, s->batch, 1, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

static void destroy_runtimes(keyer_session *s, int cuda)
{
    kr_model_stage *ms[2];
    int n = model_stages(s, ms);
    for (int i = 0; i < n; i++)
        kr_model_stage_drop_runtimes(ms[i], cuda);
}

/* Tries CUDA; on out-of-memory halves the batch; returns 1 when CUDA is usable. */
static int try_cuda(keyer_session *s, int asked)
{
    keyer_error e = {0};
    const kr_device_fns *dev = kr_device_cuda();
    if (!dev) {
        if (asked)
            kr_stage_warn(&s->ctx,
                          "CUDA was asked for but keyer was built without it; using the CPU");
        return 0;
    }
    int n = dev->count();
    if (n <= s->params.cuda_device) {
        if (asked || n > 0)
            kr_stage_warn(&s->ctx, "no CUDA device %d (%d found); using the CPU",
                          s->params.cuda_device, n);
        return 0;
    }
    s->dev = dev;
    s->ordinal = s->params.cuda_device;
    kr_model_stage *ms[2];
    int nms = model_stages(s, ms);
    for (int i = 0; i < nms; i++) {
        if (kr_model_stage_use_cuda(ms[i], dev, s->ordinal, &e)) {
            kr_stage_warn(&s->ctx, "CUDA device %d does not work (%s); using the CPU",
                          s->ordinal, e.message);
            goto off;
        }
    }
    s->infer_cuda = 1;
    for (;;) {
        keyer_error_clear(&e);
        keyer_status st = create_runtimes(s, 1, &e);
        if (!st)
            break;
        destroy_runtimes(s, 1);
        if (st == KEYER_STATUS_OUT_OF_MEMORY && s->batch > 1) {
            kr_stage_warn(&s->ctx, "out of GPU memory at batch %d, trying batch %d", s->batch,
                          s->batch / 2);
            s->batch /= 2;
            continue;
        }
        if (st == KEYER_STATUS_OUT_OF_MEMORY || st == KEYER_STATUS_DEVICE) {
            kr_stage_warn(&s->ctx, "cannot run on CUDA device %d (%s); using the CPU",
                          s->ordinal, e.message);
            goto off;
        }
        /* no CUDA inference for this model (backend not built, an operator it lacks): the
         * pixel stages stay on the GPU and the small model runs on the CPU in between */
        kr_stage_warn(&s->ctx, "inference on the CPU, pixel stages on CUDA device %d: %s",
                      s->ordinal, e.message);
        s->infer_cuda = 0;
        if (s->params.batch <= 0)
            s->batch = s->params.mode == KEYER_PIPELINE_LATENCY ? 1 : 4;
        break;
    }
    s->use_cuda = 1;
    snprintf(s->device_name, sizeof(s->device_name), "cuda:%d%s", s->ordinal,
             s->infer_cuda ? "" : " (inference on the cpu)");
    s->nvml = kr_nvml_open(s->ordinal);
    return 1;
off:
    /* infer_cuda may stay set: no item is on CUDA now, and the model stages then make their
     * CPU runtimes when first needed */
    for (int i = 0; i < nms; i++)
        kr_model_stage_drop_cuda(ms[i]);
    s->dev = NULL;
    return 0;
}

/* Decides the device and the batch: CUDA first when wanted, else (or when it fails) the CPU. */
static keyer_status choose_device(keyer_session *s, keyer_error *err)
{
    const keyer_session_params *p = &s->params;
    int latency = p->mode == KEYER_PIPELINE_LATENCY;
    int want_cuda = p->device != KEYER_DEVICE_CPU;
    /* the batch is decided per device; CUDA's is tried first */
    s->batch = p->batch > 0 ? p->batch : latency ? 1 : 16;
    if (p->passthrough && !p->detect)
        want_cuda = 0; /* nothing runs on the GPU */
    if (s->infer && kr_infer_get_info(s->infer)->host_frames)
        want_cuda = 0; /* model people: host frames; its networks run where it was told */
    if (want_cuda && !try_cuda(s, p->device == KEYER_DEVICE_CUDA)) {
        s->fell_back = p->device == KEYER_DEVICE_CUDA || kr_device_cuda() != NULL;
        if (s->fell_back && p->device == KEYER_DEVICE_AUTO && kr_device_cuda() &&
            kr_device_cuda()->count() == 0)
            s->fell_back = 0; /* AUTO without any GPU is not a fallback */
    }
    if (!s->use_cuda) {
        /* XNNPACK's time per frame does not drop with the batch: batch 1 keeps latency low */
        s->batch = p->batch > 0 ? p->batch : 1;
    }
    if (!s->infer_cuda)
        return create_runtimes(s, 0, err);
    return KEYER_OK;
}

/* Fixes the batches and queues of the stages and connects them. */
static keyer_status open_stages(keyer_session *s, keyer_error *err)
{
    const keyer_session_params *p = &s->params;
    keyer_status st;
    int infer_cap = s->depth > s->batch ? s->depth : s->batch;
    const kr_device_fns *dev = s->use_cuda ? s->dev : NULL;
    int models_cuda = s->use_cuda && s->infer_cuda; /* the models' CUDA runtimes exist */
    kr_queue *keying = NULL;
    if (s->infer) {
        const kr_infer_info *ki = kr_infer_get_info(s->infer);
        kr_composite_stage_params cp = {&s->ctx,        &s->stages[KR_ST_COMPOSITE],
                                        p->composite,   s->threads,
                                        s->workers,     p->max_streams,
                                        s->bg_image,    dev,
                                        s->ordinal,     s->depth};
        if ((st = kr_composite_stage_create(&cp, &s->composite, err)))
            return st;
        keyer_refine_params rp = p->refine;
        rp.max_streams = p->max_streams;
        rp.threads = s->serial_threads;
        kr_refine_stage_params fp = {&s->ctx,     &s->stages[KR_ST_REFINE],
                                     rp,          dev,
                                     s->ordinal,  0,
                                     ki->letterbox, ki->in_w,
                                     ki->in_h,    ki->mask_w,
                                     ki->mask_h,  s->depth,
                                     kr_composite_stage_queue(s->composite)};
        if ((st = kr_refine_stage_create(&fp, &s->refine, err)))
            return st;
        kr_model_stage_run run = {s->batch, s->batch_wait_ns, infer_cap, KR_NEED_INPUT(0),
                                  models_cuda};
        kr_model_stage *ms = kr_infer_stage(s->infer);
        if ((st = kr_model_stage_open(ms, &run, err)))
            return st;
        kr_infer_connect(s->infer, kr_refine_stage_queue(s->refine));
        keying = kr_model_stage_queue(ms);
    }
    if (s->detect) {
        kr_model_stage *ms = kr_detect_stage(s->detect);
        /* a CUDA item moved to the CPU here also needs its keying input there */
        int need = KR_NEED_INPUT(kr_model_stage_input(ms)->slot) | (s->infer ? KR_NEED_INPUT(0) : 0);
        kr_model_stage_run run = {s->batch, s->batch_wait_ns, infer_cap, need, models_cuda};
        if ((st = kr_model_stage_open(ms, &run, err)) ||
            (st = kr_detect_connect(s->detect, keying, models_cuda, s->batch, err)))
            return st;
    }
    s->stages[KR_ST_INFER].workers = 1;
    s->stages[KR_ST_REFINE].workers = 1;
    s->stages[KR_ST_COMPOSITE].workers = s->workers;
    return KEYER_OK;
}

/* What the streams need to start: devices, buffers, model inputs, the first queue. */
static void fill_stream_env(keyer_session *s)
{
    const keyer_session_params *p = &s->params;
    kr_stream_env *env = &s->env;
    kr_item_layout *l = &env->layout;
    l->ctx = &s->ctx;
    l->dev = s->dev;
    l->ordinal = s->ordinal;
    kr_model_stage *ms[2];
    int n = model_stages(s, ms);
    env->inputs = 0;
    l->inputs = n;
    /* prepare makes the keying input first, then the detector's */
    for (int i = n - 1; i >= 0; i--) {
        const kr_model_input *in = kr_model_stage_input(ms[i]);
        env->input[env->inputs++] = *in;
        l->input_bytes[in->slot] = (size_t)in->width * (size_t)in->height * 3 * sizeof(float);
    }
    if (s->infer) {
        l->mask_w = kr_infer_get_info(s->infer)->mask_w;
        l->mask_h = kr_infer_get_info(s->infer)->mask_h;
    }
    env->use_cuda = s->use_cuda;
    /* A pool big enough to keep every stage busy: the ingest queue, a batch, the composite
     * workers and the frames the shared queues may hold of this stream, plus slack. */
    env->pool_size = s->depth + s->batch + s->workers + 4;
    if (p->mode != KEYER_PIPELINE_LATENCY)
        env->pool_size += s->depth;
    env->depth = s->depth;
    env->buffers = !(p->passthrough && !s->detect); /* else the input frame itself is written */
    env->first = n ? kr_model_stage_queue(ms[0]) : NULL;
    env->threads = s->threads;
    env->detect = s->detect != NULL;
    env->bg_video = p->composite.mode == KEYER_COMPOSITE_IMAGE && !s->bg_image;
}

/* Starts the shared stages' threads, tracing them as before: composite, infer, detect, refine. */
static keyer_status start_threads(keyer_session *s, keyer_error *err)
{
    int track_infer = -1, track_detect = -1, track_refine = -1;
    if (s->composite)
        kr_composite_stage_trace(s->composite);
    if (s->infer)
        track_infer = kr_trace_thread(s->trace, "infer", 0);
    if (s->detect)
        track_detect = kr_trace_thread(s->trace, "detect", 0);
    if (s->refine)
        track_refine = kr_trace_thread(s->trace, "refine", 0);
    s->out.t_start = s->out.t_last = kr_clock_ns();
    kr_histogram_reset(&s->out.e2e);
    keyer_status st;
    if (s->detect) {
        if ((st = kr_model_stage_start(kr_detect_stage(s->detect), track_detect, err)))
            return st;
        s->stages[KR_ST_DETECT].workers = 1;
    }
    if (s->infer && ((st = kr_model_stage_start(kr_infer_stage(s->infer), track_infer, err)) ||
                     (st = kr_refine_stage_start(s->refine, track_refine, err)) ||
                     (st = kr_composite_stage_start(s->composite, err))))
        return st;
    return KEYER_OK;
}

/* Starts the shared stages (models, device, queues, threads) once the streams are known. */
static keyer_status session_start(keyer_session *s, keyer_error *err)
{
    if (s->started)
        return KEYER_OK;
    const keyer_session_params *p = &s->params;
    int latency = p->mode == KEYER_PIPELINE_LATENCY;
    /* Throughput: the stages run side by side and already fill the cores, so each works
     * single-threaded (threads inside a stage only contend with the other stages); latency:
     * one frame at a time, so a stage may spread over half the cores (the other stages and
     * the codecs keep the rest busy; measured: docs/notes/pipeline-throughput.md). */
    int cores = kr_cpu_count();
    s->threads = p->threads > 0 ? p->threads : latency && cores >= 4 ? cores / 2 : 1;
    /* inference and refinement have one worker each: on a large machine they get a share of
     * the cores so that they do not cap the many-stream throughput */
    s->serial_threads = p->threads > 0 ? p->threads : cores >= 8 ? cores / 4 : s->threads;
    keyer_status st;
    if ((st = load_models(s, err)) || (st = choose_device(s, err)))
        return st;
    s->depth = p->queue_depth > 0 ? p->queue_depth : latency ? 1 : 2 * s->batch;
    int64_t wait_us = p->batch_wait_us >= 0 ? p->batch_wait_us
                      : latency               ? 0
                      : s->use_cuda           ? 4000
                                              : 20000;
    s->batch_wait_ns = wait_us * 1000;
    s->workers = p->composite_workers > 0 ? p->composite_workers
                 : s->use_cuda            ? 1
                 : latency                ? 1
                                          : (cores < KR_MAX_COMPOSITE_WORKERS ? cores
                                                                              : KR_MAX_COMPOSITE_WORKERS);
    if (s->workers < 1)
        s->workers = 1;
    if ((st = open_stages(s, err)))
        return st;
    fill_stream_env(s);
    if ((st = start_threads(s, err)))
        return st;
    s->started = 1;
    const kr_infer_info *ki = s->infer ? kr_infer_get_info(s->infer) : NULL;
    keyer_log(s->logger, KEYER_LOG_INFO,
              "pipeline: model %s (%dx%d), device %s, batch %d, queues %d, %d composite "
              "worker%s%s%s",
              s->model_used, ki ? ki->in_w : 0, ki ? ki->in_h : 0, s->device_name, s->batch,
              s->depth, s->workers, s->workers == 1 ? "" : "s", s->detect ? ", detector " : "",
              s->detect ? kr_detect_name(s->detect) : "");
    return KEYER_OK;
}

/* ---- run -------------------------------------------------------------------------------------- */

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
        if (st->source == KR_SOURCE_READER)
            pr.frames_total += st->info.frame_count;
    }
    pr.elapsed = (double)(kr_clock_ns() - t0) * 1e-9;
    pr.fps = pr.elapsed > 0 ? (double)pr.frames_done / pr.elapsed : 0.0;
    pr.remaining = -1.0;
    if (pr.frames_total > 0 && pr.fps > 0 && pr.frames_done <= pr.frames_total)
        pr.remaining = (double)(pr.frames_total - pr.frames_done) / pr.fps;
    s->params.progress(s->params.progress_opaque, &pr);
}

/* Waits for every file sink, calling the progress callback and sampling the GPU. */
static void wait_for_sinks(keyer_session *s, int n)
{
    int64_t t0 = kr_clock_ns();
    int64_t interval = (int64_t)s->params.progress_interval_ms * 1000000;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++)
            pending += kr_stream_sink_pending(s->streams[i]);
        if (!pending)
            break;
        sample_gpu(s);
        report_progress(s, t0);
        pthread_mutex_lock(&s->done_lock);
        struct timespec ts = kr_clock_deadline(kr_clock_ns() + interval);
        pthread_cond_timedwait(&s->done_cond, &s->done_lock, &ts);
        pthread_mutex_unlock(&s->done_lock);
    }
    sample_gpu(s);
    report_progress(s, t0);
}

keyer_status keyer_session_run(keyer_session *s, keyer_error *err)
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
    if (files == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: no input was added");
    s->run_called = 1;
    /* with no input opened there is nothing to start: the streams' errors are the result */
    keyer_status st = opened ? session_start(s, err) : KEYER_OK;
    if (st)
        session_fail(s, st, err);
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
    wait_for_sinks(s, n);
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

keyer_status keyer_session_open_stream(keyer_session *s, const keyer_stream_params *params,
                                       int *stream_id, keyer_error *err)
{
    if (!s || !params)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_open_stream: NULL argument");
    kr_stream *st = NULL;
    keyer_status rs = kr_stream_open_push(&s->env, atomic_load(&s->stream_count), params, &st,
                                          err);
    if (rs)
        return rs;
    /* the first stream decides the model (by its aspect ratio) and starts the stages */
    stream_publish(s, st);
    if ((rs = session_start(s, err)) || (rs = kr_stream_start(st, err))) {
        s->streams[st->id] = NULL;
        atomic_store(&s->stream_count, st->id);
        kr_stream_destroy(&st);
        return rs;
    }
    if (stream_id)
        *stream_id = st->id;
    return KEYER_OK;
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

keyer_status keyer_session_send_frame(keyer_session *s, int stream_id, const keyer_frame *frame,
                                      keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_send_frame");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    return kr_stream_send(st, frame, err);
}

keyer_status keyer_session_receive_frame(keyer_session *s, int stream_id, keyer_frame *out,
                                         int64_t timeout_us, keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_receive_frame");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    return kr_sink_receive(st, out, timeout_us, err);
}

keyer_status keyer_session_close_stream(keyer_session *s, int stream_id, keyer_error *err)
{
    kr_stream *st = pushed_stream(s, stream_id, err, "keyer_session_close_stream");
    if (!st)
        return KEYER_STATUS_INVALID_ARGUMENT;
    return kr_stream_close(st, err);
}

keyer_status keyer_session_stream_status(keyer_session *s, int stream_id, keyer_error *err)
{
    if (!s || stream_id < 0 || stream_id >= atomic_load(&s->stream_count) ||
        !s->streams[stream_id])
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_stream_status: no stream %d", stream_id);
    return kr_stream_status(s->streams[stream_id], err);
}
