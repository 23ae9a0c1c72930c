/* The keying session: parameters, devices and model set-up, shared stages, reports. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "keyer/image.h"
#include "pipeline/clock.h"
#include "pipeline/session_internal.h"

/* ---- parameters ----------------------------------------------------------------------------- */

#define OFF(f) offsetof(keyer_session_params, f)

static const keyer_option_choice device_choices[] = {
    {"auto", KEYER_DEVICE_AUTO, "CUDA when built, present and working, else the CPU"},
    {"cpu", KEYER_DEVICE_CPU, "the CPU only"},
    {"cuda", KEYER_DEVICE_CUDA, "a CUDA GPU (cuda_device picks which)"},
    {NULL, 0, NULL},
};

static const keyer_option_choice mode_choices[] = {
    {"throughput", KEYER_PIPELINE_THROUGHPUT, "files: large batches, deep queues"},
    {"latency", KEYER_PIPELINE_LATENCY, "live: batch 1, shallow queues, no batch waiting"},
    {NULL, 0, NULL},
};

static const keyer_option session_options[] = {
    KEYER_OPTION_FIELD("device", "where to compute", OFF(device), KEYER_OPTION_ENUM,
        KEYER_DEVICE_AUTO, 0, 0, device_choices),
    KEYER_OPTION_FIELD("cuda_device", "CUDA device ordinal", OFF(cuda_device), KEYER_OPTION_INT, 0,
        0, 63, NULL),
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

/* ---- errors and warnings ---------------------------------------------------------------------- */

void kr_session_warn(keyer_session *s, const char *fmt, ...)
{
    atomic_fetch_add(&s->warnings, 1);
    va_list ap;
    va_start(ap, fmt);
    keyer_logv(s->logger, KEYER_LOG_WARNING, fmt, ap);
    va_end(ap);
}

void kr_session_fail(keyer_session *s, keyer_status st, const keyer_error *err)
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

void kr_session_gpu_failure(keyer_session *s, const keyer_error *err)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&s->gpu_failed, &expected, 1))
        kr_session_warn(s, "GPU failure, the remaining frames are processed on the CPU: %s",
                        err && err->message[0] ? err->message : "unknown error");
}

void kr_session_notify(keyer_session *s)
{
    pthread_mutex_lock(&s->done_lock);
    pthread_cond_broadcast(&s->done_cond);
    pthread_mutex_unlock(&s->done_lock);
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

keyer_status keyer_session_create(const keyer_session_params *params, keyer_session **out,
                                  keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_create: out is NULL");
    *out = NULL;
    keyer_session_params p = params ? *params : keyer_session_params_defaults();
    keyer_status st = keyer_options_validate(session_options, &p, "session parameters", err);
    if (st)
        return st;
    if (p.batch_wait_us < -1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: batch_wait_us %d is below -1",
                               p.batch_wait_us);
    p.refine.max_streams = p.max_streams;
    if ((st = keyer_options_validate(keyer_refine_options(), &p.refine, "refine parameters", err)))
        return st;
    if ((st = keyer_options_validate(keyer_composite_options(), &p.composite,
                                     "composite parameters", err)))
        return st;
    {
        /* the effects check their own parameters (threshold_low < threshold_high, ...) */
        keyer_refine *ref = NULL;
        keyer_composite *comp = NULL;
        keyer_refine_params rp = p.refine;
        keyer_composite_params cp = p.composite;
        rp.threads = cp.threads = 1;
        if ((st = keyer_refine_create(&rp, &ref, err)) ||
            (st = keyer_composite_create(&cp, &comp, err))) {
            keyer_refine_destroy(&ref);
            return st;
        }
        keyer_refine_destroy(&ref);
        keyer_composite_destroy(&comp);
    }
    if (p.composite.mode == KEYER_COMPOSITE_IMAGE && !p.background)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: composite mode image needs a background "
                               "image or video");
    if (p.detect < KEYER_SESSION_DETECT_NONE || p.detect > KEYER_SESSION_DETECT_FACES_FULL ||
        !(p.detect_min_score < 1.0f))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: detect %d is not a keyer_session_detect, or "
                               "detect_min_score is not below 1", p.detect);
    if (p.detect && !p.detect_fn)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session parameters: detect needs detect_fn");
    if (p.detect) {
        char path[4096];
        const char *dn = p.detect == KEYER_SESSION_DETECT_FACES_FULL ? "face-full" : "face-short";
        if ((st = keyer_registry_resolve(dn, path, sizeof(path), err)))
            return keyer_error_prefix(err, "detection: ");
    }
    if (p.model) {
        /* an unknown name or a missing file is reported now, not when the stages start */
        char path[4096];
        if ((st = keyer_registry_resolve(p.model, path, sizeof(path), err)))
            return st;
    }

    keyer_session *s = calloc(1, sizeof(*s));
    if (!s)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    pthread_mutex_init(&s->err_lock, NULL);
    pthread_mutex_init(&s->stats_lock, NULL);
    pthread_mutex_init(&s->done_lock, NULL);
    pthread_cond_init(&s->done_cond, NULL);
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
    s->streams = calloc((size_t)p.max_streams, sizeof(*s->streams));
    if ((p.model && !s->model_name) || (p.background && !s->background_path) || !s->streams) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        goto fail;
    }
    atomic_init(&s->stream_count, 0);
    atomic_init(&s->cancel, 0);
    atomic_init(&s->abort, 0);
    atomic_init(&s->gpu_failed, 0);
    atomic_init(&s->warnings, 0);
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
    /* A still background is read once, here, so a bad file is reported before any work. */
    if (p.composite.mode == KEYER_COMPOSITE_IMAGE && is_image_path(s->background_path)) {
        if ((st = keyer_frame_create(&s->bg_image[0], err)) ||
            (st = keyer_image_read(s->background_path, KEYER_PIXEL_FORMAT_RGB24, s->bg_image[0],
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
            keyer_reader_interrupt(atomic_load(&st->reader_pub));
    }
}

static void stop_shared(keyer_session *s)
{
    kr_queue_cancel(s->detect_q);
    kr_queue_cancel(s->infer_q);
    kr_queue_cancel(s->refine_q);
    kr_queue_cancel(s->comp_q);
    if (s->detect_running)
        pthread_join(s->detect_thread, NULL);
    s->detect_running = 0;
    if (s->infer_running)
        pthread_join(s->infer_thread, NULL);
    if (s->refine_running)
        pthread_join(s->refine_thread, NULL);
    for (int i = 0; i < KR_MAX_COMPOSITE_WORKERS; i++)
        if (s->comp_workers[i].running)
            pthread_join(s->comp_workers[i].thread, NULL);
    s->infer_running = s->refine_running = 0;
    for (int i = 0; i < KR_MAX_COMPOSITE_WORKERS; i++)
        s->comp_workers[i].running = 0;
    /* items still queued go back to their pools */
    kr_queue *qs[4] = {s->detect_q, s->infer_q, s->refine_q, s->comp_q};
    for (int q = 0; q < 4; q++) {
        void *item;
        while (qs[q] && kr_queue_drain(qs[q], &item))
            kr_item_release(item);
    }
}

void keyer_session_destroy(keyer_session **sp)
{
    if (!sp || !*sp)
        return;
    keyer_session *s = *sp;
    atomic_store(&s->abort, 1);
    keyer_session_cancel(s);
    int n = atomic_load(&s->stream_count);
    /* Sources stop first (cancel), then the shared stages are stopped, then each stream
     * joins its threads, finalises its output and frees its pool. */
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        if (st) {
            kr_queue_cancel(st->ingest);
            kr_queue_cancel(st->free_items);
            kr_reorder_cancel(st->done);
        }
    }
    stop_shared(s);
    for (int i = 0; i < n; i++)
        kr_stream_destroy(&s->streams[i]);
    for (int d = 0; d < 2; d++) {
        for (int b = 0; b <= KR_MAX_BATCH_LOG2; b++)
            keyer_runtime_destroy(&s->rt[d][b]);
        keyer_refine_destroy(&s->refine[d]);
    }
    for (int w = 0; w < KR_MAX_COMPOSITE_WORKERS; w++) {
        kr_comp_worker *cw = &s->comp_workers[w];
        for (int d = 0; d < 2; d++) {
            if (cw->comp[d]) {
                for (int i = 0; i < s->params.max_streams; i++)
                    keyer_composite_destroy(&cw->comp[d][i]);
                free(cw->comp[d]);
            }
            free(cw->bg_set[d]);
        }
        if (s->dev)
            s->dev->stream_destroy(s->ordinal, cw->cuda_stream);
    }
    kr_detect_free(s);
    if (s->dev) {
        s->dev->stream_destroy(s->ordinal, s->infer_stream);
        s->dev->stream_destroy(s->ordinal, s->refine_stream);
        s->dev->stream_destroy(s->ordinal, s->detect_stream);
    }
    keyer_frame_destroy(&s->bg_image[0]);
    keyer_frame_destroy(&s->bg_image[1]);
    kr_queue_destroy(&s->detect_q);
    kr_queue_destroy(&s->infer_q);
    kr_queue_destroy(&s->refine_q);
    kr_queue_destroy(&s->comp_q);
    keyer_model_destroy(&s->model);
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
    pthread_mutex_destroy(&s->stats_lock);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
    *sp = NULL;
}

/* ---- start: device, model, runtimes, threads ------------------------------------------------- */

static const char *auto_model(keyer_session *s)
{
    int n = atomic_load(&s->stream_count);
    if (n == 0)
        return "selfie";
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
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

static keyer_status load_model(keyer_session *s, keyer_error *err)
{
    const char *name = s->model_name ? s->model_name : auto_model(s);
    char path[4096];
    keyer_status st = keyer_registry_resolve(name, path, sizeof(path), err);
    if (st)
        return st;
    s->entry = keyer_registry_find(name);
    snprintf(s->model_used, sizeof(s->model_used), "%s", name);
    if ((st = keyer_model_load_file(path, &s->model, err)))
        return st;
    if (s->entry && s->entry->mask_output < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model %s has no person mask (keying needs a segmentation or pose "
                               "model: selfie, selfie-landscape, pose-lite, ...)", name);
    keyer_tensor_info in, mo;
    if ((st = keyer_model_input_info(s->model, 0, &in, err)))
        return st;
    if (in.rank != 4 || in.dims[3] != 3 || in.dtype != KEYER_DTYPE_F32 || in.dims[1] < 1 ||
        in.dims[2] < 1)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: input 0 is not a float [1,H,W,3] image", name);
    s->in_h = in.dims[1];
    s->in_w = in.dims[2];
    s->mask_index = s->entry ? s->entry->mask_output : 0;
    s->mask_logit = s->entry ? s->entry->mask_is_logit : 0;
    s->letterbox = s->entry ? s->entry->letterbox : 0;
    s->in_scale = s->entry ? s->entry->input_scale : 1.0f;
    s->in_offset = s->entry ? s->entry->input_offset : 0.0f;
    if (s->mask_index >= keyer_model_output_count(s->model))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "model %s: no output %d", name,
                               s->mask_index);
    if ((st = keyer_model_output_info(s->model, s->mask_index, &mo, err)))
        return st;
    if ((mo.rank != 4 && mo.rank != 3) || mo.dims[1] < 1 || mo.dims[2] < 1 ||
        (mo.rank == 4 && mo.dims[3] < 1) || mo.dtype != KEYER_DTYPE_F32)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: output %d is not a float [1,H,W,C] mask", name,
                               s->mask_index);
    s->mask_h = mo.dims[1];
    s->mask_w = mo.dims[2];
    s->mask_c = mo.rank == 4 ? mo.dims[3] : 1;
    s->tensor_bytes = (size_t)s->in_w * (size_t)s->in_h * 3 * sizeof(float);
    s->mask_bytes = (size_t)s->mask_w * (size_t)s->mask_h * sizeof(float);
    return KEYER_OK;
}

/* Creates the runtimes of one device for batch 1, 2, 4, ... up to s->batch. */
static keyer_status create_runtimes(keyer_session *s, int cuda, keyer_error *err)
{
    if (s->det_model) {
        keyer_status st = kr_detect_runtimes(s, cuda, s->batch, err);
        if (st)
            return st;
    }
    if (!s->model)
        return KEYER_OK;
    return kr_session_runtimes(s, s->model, s->model_used, s->rt[cuda], cuda, s->batch,
                               cuda ? s->infer_stream : NULL, 1, err);
}

keyer_status kr_session_runtimes(keyer_session *s, keyer_model *model, const char *name,
                                 keyer_runtime **rts, int cuda, int batch, void *stream,
                                 int warm, keyer_error *err)
{
    for (int b = 0; b <= KR_MAX_BATCH_LOG2 && (1 << b) <= batch; b++) {
        if (rts[b])
            continue;
        keyer_runtime_params rp = keyer_runtime_params_defaults();
        rp.backend = cuda ? KEYER_BACKEND_CUDA : KEYER_BACKEND_CPU;
        rp.batch = 1 << b;
        rp.threads = s->serial_threads;
        rp.device = s->ordinal;
        rp.stream = stream;
        rp.logger = s->logger;
        keyer_status st = keyer_runtime_create(model, &rp, &rts[b], err);
        /* one run on zeros now, so that lazy set-up (weight packing, kernel loading) does
         * not delay the first frames */
        if (!st && warm) {
            float *in = keyer_runtime_input_data(rts[b], 0);
            size_t bytes = keyer_runtime_input_bytes(rts[b], 0);
            if (!cuda && in)
                memset(in, 0, bytes);
            st = keyer_runtime_run(rts[b], err);
            if (!st)
                st = keyer_runtime_synchronize(rts[b], err);
        }
        if (st)
            return keyer_error_prefix(err, "model %s on %s at batch %d: ", name,
                                      cuda ? "cuda" : "cpu", 1 << b);
    }
    return KEYER_OK;
}

static void destroy_runtimes(keyer_session *s, int cuda)
{
    for (int b = 0; b <= KR_MAX_BATCH_LOG2; b++) {
        keyer_runtime_destroy(&s->rt[cuda][b]);
        keyer_runtime_destroy(&s->det_rt[cuda][b]);
    }
}

/* Tries CUDA; on out-of-memory halves the batch; returns 1 when CUDA is usable. */
static int try_cuda(keyer_session *s, int asked)
{
    keyer_error e = {0};
    const kr_device_fns *dev = kr_device_cuda();
    if (!dev) {
        if (asked)
            kr_session_warn(s, "CUDA was asked for but keyer was built without it; using the CPU");
        return 0;
    }
    int n = dev->count();
    if (n <= s->params.cuda_device) {
        if (asked || n > 0)
            kr_session_warn(s, "no CUDA device %d (%d found); using the CPU",
                            s->params.cuda_device, n);
        return 0;
    }
    s->dev = dev;
    s->ordinal = s->params.cuda_device;
    if (dev->stream_create(s->ordinal, &s->infer_stream, &e) ||
        dev->stream_create(s->ordinal, &s->refine_stream, &e) ||
        dev->stream_create(s->ordinal, &s->detect_stream, &e)) {
        kr_session_warn(s, "CUDA device %d does not work (%s); using the CPU", s->ordinal,
                        e.message);
        goto off;
    }
    s->infer_cuda = 1;
    s->det_cuda = s->det_model != NULL;
    for (;;) {
        keyer_error_clear(&e);
        keyer_status st = create_runtimes(s, 1, &e);
        if (!st)
            break;
        destroy_runtimes(s, 1);
        if (st == KEYER_STATUS_OUT_OF_MEMORY && s->batch > 1) {
            kr_session_warn(s, "out of GPU memory at batch %d, trying batch %d", s->batch,
                            s->batch / 2);
            s->batch /= 2;
            continue;
        }
        if (st == KEYER_STATUS_OUT_OF_MEMORY || st == KEYER_STATUS_DEVICE) {
            kr_session_warn(s, "cannot run on CUDA device %d (%s); using the CPU", s->ordinal,
                            e.message);
            goto off;
        }
        /* no CUDA inference for this model (backend not built, an operator it lacks): the
         * pixel stages stay on the GPU and the small model runs on the CPU in between */
        kr_session_warn(s, "inference on the CPU, pixel stages on CUDA device %d: %s", s->ordinal,
                        e.message);
        s->infer_cuda = 0;
        s->det_cuda = 0;
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
    dev->stream_destroy(s->ordinal, s->infer_stream);
    dev->stream_destroy(s->ordinal, s->refine_stream);
    dev->stream_destroy(s->ordinal, s->detect_stream);
    s->infer_stream = s->refine_stream = s->detect_stream = NULL;
    s->det_cuda = 0;
    s->dev = NULL;
    return 0;
}

keyer_status kr_session_start(keyer_session *s, keyer_error *err)
{
    if (s->started)
        return KEYER_OK;
    const keyer_session_params *p = &s->params;
    keyer_status st = KEYER_OK;
    if (p->passthrough) {
        snprintf(s->model_used, sizeof(s->model_used), "none");
        snprintf(s->device_name, sizeof(s->device_name), "cpu");
    } else if ((st = load_model(s, err))) {
        return st;
    }
    if (p->detect && (st = kr_detect_load(s, err)))
        return st;
    int latency = p->mode == KEYER_PIPELINE_LATENCY;
    /* Throughput: the stages run side by side and already fill the cores, so each works
     * single-threaded (threads inside a stage only contend with the other stages); latency:
     * one frame at a time, so a stage may spread over half the cores (the other stages and
     * the codecs keep the rest busy; measured in BENCHMARKS.md). */
    int cores = kr_cpu_count();
    s->threads = p->threads > 0 ? p->threads : latency && cores >= 4 ? cores / 2 : 1;
    /* inference and refinement have one worker each: on a large machine they get a share of
     * the cores so that they do not cap the many-stream throughput */
    s->serial_threads = p->threads > 0 ? p->threads : cores >= 8 ? cores / 4 : s->threads;
    int want_cuda = p->device != KEYER_DEVICE_CPU;
    /* the batch is decided per device; CUDA's is tried first */
    s->batch = p->batch > 0 ? p->batch : latency ? 1 : 16;
    if (p->passthrough && !p->detect)
        want_cuda = 0; /* nothing runs on the GPU */
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
    if ((!p->passthrough || p->detect) && !s->infer_cuda && (st = create_runtimes(s, 0, err)))
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
    int infer_cap = s->depth > s->batch ? s->depth : s->batch;
    if ((s->det_model && (st = kr_queue_create(infer_cap, &s->detect_q, err))) ||
        (st = kr_queue_create(infer_cap, &s->infer_q, err)) ||
        (st = kr_queue_create(s->depth, &s->refine_q, err)) ||
        (st = kr_queue_create(s->depth, &s->comp_q, err)))
        return st;
    s->stages[KR_ST_INFER].workers = 1;
    s->stages[KR_ST_REFINE].workers = 1;
    s->stages[KR_ST_COMPOSITE].workers = s->workers;
    /* Still background on the device, once. */
    if (s->use_cuda && s->bg_image[0]) {
        if ((st = keyer_frame_create(&s->bg_image[1], err)) ||
            (st = kr_device_frame_alloc(s->dev, s->ordinal, s->bg_image[1], s->bg_image[0]->format,
                                        s->bg_image[0]->width, s->bg_image[0]->height, err)) ||
            (st = kr_device_frame_copy(s->dev, s->ordinal, s->bg_image[1], s->bg_image[0],
                                       s->infer_stream, err)))
            return st;
    }
    for (int w = 0; w < s->workers; w++) {
        kr_comp_worker *cw = &s->comp_workers[w];
        cw->session = s;
        cw->index = w;
        for (int d = 0; d < 2; d++) {
            cw->comp[d] = calloc((size_t)p->max_streams, sizeof(*cw->comp[d]));
            cw->bg_set[d] = calloc((size_t)p->max_streams, sizeof(*cw->bg_set[d]));
            if (!cw->comp[d] || !cw->bg_set[d])
                return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        }
        if (s->use_cuda && (st = s->dev->stream_create(s->ordinal, &cw->cuda_stream, err)))
            return st;
        cw->track = kr_trace_thread(s->trace, "composite", w);
    }
    s->track_infer = kr_trace_thread(s->trace, "infer", 0);
    s->track_detect = s->det_model ? kr_trace_thread(s->trace, "detect", 0) : 0;
    s->track_refine = kr_trace_thread(s->trace, "refine", 0);
    s->t_start = s->t_last = kr_clock_ns();
    kr_histogram_reset(&s->e2e);
    if (s->det_model) {
        if (pthread_create(&s->detect_thread, NULL, kr_detect_main, s))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
        s->detect_running = 1;
        s->stages[KR_ST_DETECT].workers = 1;
    }
    if (pthread_create(&s->infer_thread, NULL, kr_infer_main, s))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
    s->infer_running = 1;
    if (pthread_create(&s->refine_thread, NULL, kr_refine_main, s))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
    s->refine_running = 1;
    for (int w = 0; w < s->workers; w++) {
        if (pthread_create(&s->comp_workers[w].thread, NULL, kr_composite_main,
                           &s->comp_workers[w]))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
        s->comp_workers[w].running = 1;
    }
    s->started = 1;
    keyer_log(s->logger, KEYER_LOG_INFO,
              "pipeline: model %s (%dx%d), device %s, batch %d, queues %d, %d composite "
              "worker%s%s%s",
              s->model_used, s->in_w, s->in_h, s->device_name, s->batch, s->depth, s->workers,
              s->workers == 1 ? "" : "s", s->det_model ? ", detector " : "",
              s->det_model ? s->det_name : "");
    return KEYER_OK;
}

/* ---- run ------------------------------------------------------------------------------------ */

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

keyer_status keyer_session_run(keyer_session *s, keyer_error *err)
{
    if (!s)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_session_run: NULL");
    if (s->run_called)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: the session already ran");
    int n = atomic_load(&s->stream_count);
    int files = 0;
    for (int i = 0; i < n; i++)
        files += s->streams[i]->source == KR_SOURCE_READER;
    if (files == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_run: no input was added");
    s->run_called = 1;
    keyer_status st = kr_session_start(s, err);
    for (int i = 0; i < n && !st; i++) {
        kr_stream *ss = s->streams[i];
        if (ss->source != KR_SOURCE_READER)
            continue;
        if ((st = kr_stream_start(ss, err))) {
            /* a stream that could not start completely: unblock what of it did start */
            kr_queue_cancel(ss->ingest);
            kr_queue_cancel(ss->free_items);
            kr_reorder_cancel(ss->done);
        }
    }
    if (st)
        kr_session_fail(s, st, err);
    int64_t t0 = kr_clock_ns();
    int64_t interval = (int64_t)s->params.progress_interval_ms * 1000000;
    /* wait for every file sink, calling the progress callback and sampling the GPU */
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            kr_stream *ss = s->streams[i];
            if (ss->source == KR_SOURCE_READER && ss->sink_running &&
                !atomic_load(&ss->sink_finished))
                pending++;
        }
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
    /* join the file streams' threads and finalise their outputs */
    keyer_status first = KEYER_OK;
    keyer_error first_err = {0};
    for (int i = 0; i < n; i++) {
        kr_stream *ss = s->streams[i];
        if (ss->source != KR_SOURCE_READER)
            continue;
        if (ss->sink_running) {
            pthread_join(ss->sink_thread, NULL);
            ss->sink_running = 0;
        }
        if (ss->prepare_running) {
            pthread_join(ss->prepare_thread, NULL);
            ss->prepare_running = 0;
        }
        if (ss->reader_running) {
            pthread_join(ss->reader_thread, NULL);
            ss->reader_running = 0;
        }
        if (ss->writer) {
            keyer_error we = {0};
            keyer_status ws = keyer_writer_close(ss->writer, &we);
            if (ws && !first) {
                first = ws;
                first_err = we;
            }
        }
        if (ss->status && !first) {
            first = ss->status;
            first_err = ss->error;
        }
    }
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

/* ---- reports -------------------------------------------------------------------------------- */

static keyer_latency latency_of(const kr_histogram *h)
{
    keyer_latency l;
    l.count = h->count;
    l.mean = kr_histogram_mean(h) * 1e-6;
    l.p50 = kr_histogram_quantile(h, 0.50) * 1e-6;
    l.p95 = kr_histogram_quantile(h, 0.95) * 1e-6;
    l.p99 = kr_histogram_quantile(h, 0.99) * 1e-6;
    l.max = (double)h->max * 1e-6;
    return l;
}

void keyer_session_get_report(keyer_session *s, keyer_session_report *out)
{
    memset(out, 0, sizeof(*out));
    out->bottleneck = -1;
    out->gpu_memory_used = out->gpu_memory_total = -1;
    out->gpu_utilization = -1;
    if (!s)
        return;
    int n = atomic_load(&s->stream_count);
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        out->frames_read += atomic_load(&st->frames_read);
        out->frames_written += atomic_load(&st->frames_written);
        out->frames_dropped += atomic_load(&st->frames_dropped);
        out->frames_damaged += atomic_load(&st->frames_damaged);
        out->frames_lost += atomic_load(&st->frames_lost);
    }
    out->frames_on_cpu = atomic_load(&s->frames_cpu);
    out->frames_on_cuda = atomic_load(&s->frames_cuda);
    snprintf(out->device, sizeof(out->device), "%s",
             s->use_cuda && atomic_load(&s->gpu_failed) ? "cpu (after a GPU failure)"
                                                        : s->device_name);
    snprintf(out->model, sizeof(out->model), "%s", s->model_used);
    snprintf(out->detector, sizeof(out->detector), "%s", s->det_model ? s->det_name : "");
    out->batch = s->batch;
    out->fell_back = s->fell_back || atomic_load(&s->gpu_failed);
    out->warnings = atomic_load(&s->warnings);
    out->batches = atomic_load(&s->batches);
    out->batch_mean = out->batches ? (double)atomic_load(&s->batch_frames) / (double)out->batches
                                   : 0.0;
    out->batches_full = atomic_load(&s->batches_full);
    pthread_mutex_lock(&s->stats_lock);
    kr_histogram e2e = s->e2e;
    int64_t t_start = s->t_start, t_last = s->t_last;
    out->gpu_memory_used = s->gpu_mem_used;
    out->gpu_memory_total = s->gpu_mem_total;
    if (s->gpu_util_samples)
        out->gpu_utilization = s->gpu_util_sum / (double)s->gpu_util_samples;
    pthread_mutex_unlock(&s->stats_lock);
    out->latency = latency_of(&e2e);
    out->seconds = s->started && t_last > t_start ? (double)(t_last - t_start) * 1e-9 : 0.0;
    out->fps = out->seconds > 0 ? (double)out->frames_written / out->seconds : 0.0;
    if (!s->stages_ready)
        return;
    kr_stage_stats snaps[KR_ST_COUNT];
    int read_workers = 0, prep_workers = 0, sinks = 0;
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        read_workers += st->source == KR_SOURCE_READER;
        prep_workers++;
        sinks += st->sink != KR_SINK_PULL;
    }
    for (int i = 0; i < KR_ST_COUNT; i++) {
        kr_stage_stats_snapshot(&s->stages[i], &snaps[i]);
        if (i == KR_ST_READ)
            snaps[i].workers = read_workers > 0 ? read_workers : 1;
        if (i == KR_ST_PREPARE)
            snaps[i].workers = prep_workers > 0 ? prep_workers : 1;
        if (i == KR_ST_WRITE)
            snaps[i].workers = sinks > 0 ? sinks : 1;
    }
    out->stage_count = s->det_model ? KR_ST_COUNT : KR_ST_DETECT;
    double wall = out->seconds;
    for (int i = 0; i < out->stage_count; i++) {
        keyer_stage_report *r = &out->stages[i];
        snprintf(r->name, sizeof(r->name), "%s", stage_names[i]);
        r->workers = snaps[i].workers;
        r->frames = snaps[i].items;
        r->busy = (double)snaps[i].busy_ns * 1e-9;
        r->utilization = wall > 0 ? r->busy / (wall * r->workers) : 0.0;
        if (r->utilization > 1.0)
            r->utilization = 1.0;
        r->latency = latency_of(&snaps[i].latency);
        kr_queue *q = i == KR_ST_DETECT   ? s->detect_q
                      : i == KR_ST_INFER  ? s->infer_q
                      : i == KR_ST_REFINE ? s->refine_q
                      : i == KR_ST_COMPOSITE ? s->comp_q
                                             : NULL;
        if (q) {
            kr_queue_stats qs;
            kr_queue_stats_get(q, &qs);
            r->queue_capacity = qs.capacity;
            r->queue_mean = qs.mean_depth;
            r->queue_max = qs.max_depth;
        } else if (i == KR_ST_PREPARE && n > 0) {
            /* the streams' ingest queues, summed */
            for (int k = 0; k < n; k++) {
                if (!s->streams[k]->ingest)
                    continue;
                kr_queue_stats qs;
                kr_queue_stats_get(s->streams[k]->ingest, &qs);
                r->queue_capacity += qs.capacity;
                r->queue_mean += qs.mean_depth;
                r->queue_max += qs.max_depth;
            }
        }
    }
    out->bottleneck = kr_stage_stats_bottleneck(snaps, KR_ST_COUNT);
}

int keyer_session_stream_count(const keyer_session *s)
{
    return s ? atomic_load((atomic_int *)&s->stream_count) : 0;
}

keyer_status keyer_session_get_stream_report(keyer_session *s, int id, keyer_stream_report *out,
                                             keyer_error *err)
{
    if (!s || !out || id < 0 || id >= atomic_load(&s->stream_count))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_get_stream_report: no stream %d", id);
    kr_stream *st = s->streams[id];
    memset(out, 0, sizeof(*out));
    snprintf(out->input, sizeof(out->input), "%s", st->input ? st->input : "");
    snprintf(out->output, sizeof(out->output), "%s", st->output ? st->output : "");
    out->width = st->width;
    out->height = st->height;
    out->frames_read = atomic_load(&st->frames_read);
    out->frames_written = atomic_load(&st->frames_written);
    out->frames_dropped = atomic_load(&st->frames_dropped);
    out->frames_damaged = atomic_load(&st->frames_damaged);
    out->frames_lost = atomic_load(&st->frames_lost);
    out->hw_decode = st->source == KR_SOURCE_READER ? st->info.hw_decode : 0;
    out->has_audio = st->source == KR_SOURCE_READER ? st->info.has_audio : 0;
    snprintf(out->encoder, sizeof(out->encoder), "%s", st->encoder);
    return KEYER_OK;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static double finite_or_zero(double v)
{
    return isfinite(v) ? v : 0.0;
}

static void json_latency(FILE *f, const keyer_latency *l)
{
    fprintf(f, "{\"count\":%lld,\"mean\":%.4f,\"p50\":%.4f,\"p95\":%.4f,\"p99\":%.4f,\"max\":%.4f}",
            (long long)l->count, finite_or_zero(l->mean), finite_or_zero(l->p50),
            finite_or_zero(l->p95), finite_or_zero(l->p99), finite_or_zero(l->max));
}

keyer_status keyer_session_write_stats(keyer_session *s, const char *path, keyer_error *err)
{
    if (!s || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_write_stats: NULL argument");
    keyer_session_report r;
    keyer_session_get_report(s, &r);
    FILE *f = fopen(path, "w");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot create: %s", path,
                               strerror(errno));
    fprintf(f, "{\n  \"keyer_stats_version\": 1,\n  \"device\": ");
    json_string(f, r.device);
    fprintf(f, ",\n  \"model\": ");
    json_string(f, r.model);
    fprintf(f, ",\n  \"detector\": ");
    json_string(f, r.detector);
    fprintf(f, ",\n  \"mode\": \"%s\",\n  \"batch\": %d,\n  \"fell_back\": %s,\n",
            s->params.mode == KEYER_PIPELINE_LATENCY ? "latency" : "throughput", r.batch,
            r.fell_back ? "true" : "false");
    fprintf(f, "  \"seconds\": %.4f,\n  \"fps\": %.3f,\n", finite_or_zero(r.seconds),
            finite_or_zero(r.fps));
    fprintf(f, "  \"frames\": {\"read\": %lld, \"written\": %lld, \"dropped\": %lld, "
               "\"damaged\": %lld, \"lost\": %lld, \"on_cpu\": %lld, \"on_cuda\": %lld},\n",
            (long long)r.frames_read, (long long)r.frames_written, (long long)r.frames_dropped,
            (long long)r.frames_damaged, (long long)r.frames_lost, (long long)r.frames_on_cpu,
            (long long)r.frames_on_cuda);
    fprintf(f, "  \"batches\": {\"count\": %lld, \"mean_frames\": %.3f, \"full\": %lld},\n",
            (long long)r.batches, finite_or_zero(r.batch_mean), (long long)r.batches_full);
    fprintf(f, "  \"latency_ms\": ");
    json_latency(f, &r.latency);
    fprintf(f, ",\n  \"stages\": [\n");
    for (int i = 0; i < r.stage_count; i++) {
        const keyer_stage_report *g = &r.stages[i];
        fprintf(f, "    {\"name\": ");
        json_string(f, g->name);
        fprintf(f, ", \"workers\": %d, \"frames\": %lld, \"busy_seconds\": %.4f, "
                   "\"utilization\": %.4f, \"latency_ms\": ",
                g->workers, (long long)g->frames, finite_or_zero(g->busy),
                finite_or_zero(g->utilization));
        json_latency(f, &g->latency);
        fprintf(f, ", \"queue\": {\"capacity\": %d, \"mean_depth\": %.3f, \"max_depth\": %d}}%s\n",
                g->queue_capacity, finite_or_zero(g->queue_mean), g->queue_max,
                i + 1 < r.stage_count ? "," : "");
    }
    fprintf(f, "  ],\n  \"bottleneck\": ");
    if (r.bottleneck >= 0)
        json_string(f, r.stages[r.bottleneck].name);
    else
        fprintf(f, "null");
    fprintf(f, ",\n  \"gpu\": {\"memory_used_bytes\": %lld, \"memory_total_bytes\": %lld, "
               "\"utilization_percent\": %.1f},\n",
            (long long)r.gpu_memory_used, (long long)r.gpu_memory_total,
            finite_or_zero(r.gpu_utilization));
    fprintf(f, "  \"warnings\": %d,\n  \"streams\": [\n", r.warnings);
    int n = keyer_session_stream_count(s);
    for (int i = 0; i < n; i++) {
        keyer_stream_report sr;
        if (keyer_session_get_stream_report(s, i, &sr, NULL))
            continue;
        fprintf(f, "    {\"id\": %d, \"input\": ", i);
        json_string(f, sr.input);
        fprintf(f, ", \"output\": ");
        json_string(f, sr.output);
        fprintf(f, ", \"width\": %d, \"height\": %d, \"frames_read\": %lld, "
                   "\"frames_written\": %lld, \"dropped\": %lld, \"damaged\": %lld, "
                   "\"lost\": %lld, \"hw_decode\": %s, \"encoder\": ",
                sr.width, sr.height, (long long)sr.frames_read, (long long)sr.frames_written,
                (long long)sr.frames_dropped, (long long)sr.frames_damaged,
                (long long)sr.frames_lost, sr.hw_decode ? "true" : "false");
        json_string(f, sr.encoder);
        fprintf(f, ", \"audio\": %s}%s\n", sr.has_audio ? "true" : "false", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    int bad = ferror(f);
    if (fclose(f) || bad)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: writing the statistics failed", path);
    return KEYER_OK;
}

keyer_status keyer_session_write_trace(keyer_session *s, const char *path, keyer_error *err)
{
    if (!s || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_write_trace: NULL argument");
    if (!s->trace)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_write_trace: tracing is off (trace_events is 0)");
    FILE *f = fopen(path, "w");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot create: %s", path,
                               strerror(errno));
    keyer_status st = kr_trace_write(s->trace, f, err);
    if (fclose(f) && !st)
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: writing the trace failed", path);
    else if (st)
        keyer_error_prefix(err, "%s: ", path);
    return st;
}
