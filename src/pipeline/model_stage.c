/* A model stage: one network, its runtimes per device and batch, its queue, stream and thread. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/model_stage.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/clock.h"

struct kr_model_stage {
    kr_model_stage_params p;
    keyer_model *model;
    keyer_runtime *rt[2][KR_MAX_BATCH_LOG2 + 1]; /* [device][log2 batch] */
    size_t input_bytes;        /* one item's input */
    const kr_device_fns *dev;  /* set by use_cuda */
    int ordinal;
    void *stream;              /* its CUDA stream */
    kr_model_stage_run run;
    kr_queue *in;
    pthread_t thread;
    int running;
    int track;
    int gone;                  /* the next stage was gone at an early hand-on (stage thread) */
};

keyer_status kr_model_stage_create(const kr_model_stage_params *params, keyer_model **model,
                                   kr_model_stage **out, keyer_error *err)
{
    *out = NULL;
    kr_model_stage *ms = calloc(1, sizeof(*ms));
    if (!ms) {
        keyer_model_destroy(model);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                               params->name);
    }
    ms->p = *params;
    ms->model = *model;
    *model = NULL;
    ms->input_bytes =
        (size_t)params->input.width * (size_t)params->input.height * 3 * sizeof(float);
    *out = ms;
    return KEYER_OK;
}

void kr_model_stage_destroy(kr_model_stage **pms)
{
    if (!pms || !*pms)
        return;
    kr_model_stage *ms = *pms;
    kr_model_stage_cancel(ms);
    kr_model_stage_join(ms);
    kr_model_stage_drop_runtimes(ms, 0);
    kr_model_stage_drop_cuda(ms);
    kr_queue_destroy(&ms->in);
    keyer_model_destroy(&ms->model);
    free(ms);
    *pms = NULL;
}

keyer_status kr_model_stage_use_cuda(kr_model_stage *ms, const kr_device_fns *dev, int ordinal,
                                     keyer_error *err)
{
    ms->dev = dev;
    ms->ordinal = ordinal;
    if (ms->p.urgent && dev->stream_create_urgent)
        return dev->stream_create_urgent(ordinal, &ms->stream, err);
    return dev->stream_create(ordinal, &ms->stream, err);
}

void kr_model_stage_drop_cuda(kr_model_stage *ms)
{
    kr_model_stage_drop_runtimes(ms, 1);
    if (ms->dev)
        ms->dev->stream_destroy(ms->ordinal, ms->stream);
    ms->stream = NULL;
    ms->dev = NULL;
}

keyer_status kr_model_stage_runtimes(kr_model_stage *ms, int cuda, int batch, int warm,
                                     keyer_error *err)
{
    keyer_runtime **rts = ms->rt[cuda];
    for (int b = 0; b <= KR_MAX_BATCH_LOG2 && (1 << b) <= batch; b++) {
        if (rts[b])
            continue;
        keyer_runtime_params rp = keyer_runtime_params_defaults();
        rp.backend = cuda ? KEYER_BACKEND_CUDA : KEYER_BACKEND_CPU;
        rp.precision = cuda ? ms->p.cuda_precision : KEYER_PRECISION_F32;
        rp.batch = 1 << b;
        rp.threads = ms->p.threads;
        rp.device = ms->ordinal;
        rp.stream = cuda ? ms->stream : NULL;
        rp.logger = ms->p.ctx->logger;
        keyer_status st = keyer_runtime_create(ms->model, &rp, &rts[b], err);
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
            return keyer_error_prefix(err, "%smodel %s on %s (%s) at batch %d: ", ms->p.what,
                                      ms->p.model_name, cuda ? "cuda" : "cpu",
                                      keyer_precision_name(rp.precision), 1 << b);
    }
    return KEYER_OK;
}

void kr_model_stage_schedules(const kr_model_stage *ms, char *buf, size_t size)
{
    int first[KR_MAX_BATCH_LOG2 + 1], last[KR_MAX_BATCH_LOG2 + 1], runs = 0;
    const char *name[KR_MAX_BATCH_LOG2 + 1];
    for (int b = 0; b <= KR_MAX_BATCH_LOG2; b++) {
        const keyer_runtime *rt = ms->rt[1][b];
        if (!rt)
            continue;
        const char *s = keyer_runtime_schedule(rt);
        if (runs && !strcmp(name[runs - 1], s)) {
            last[runs - 1] = 1 << b;
        } else {
            name[runs] = s;
            first[runs] = last[runs] = 1 << b;
            runs++;
        }
    }
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < runs && n < size; i++) {
        int w;
        if (runs == 1)
            w = snprintf(buf, size, "%s", name[0]);
        else if (first[i] == last[i])
            w = snprintf(buf + n, size - n, "%s%s at %s%d", i ? ", " : "", name[i],
                         i ? "" : "batch ", first[i]);
        else
            w = snprintf(buf + n, size - n, "%s%s at %s%d-%d", i ? ", " : "", name[i],
                         i ? "" : "batch ", first[i], last[i]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

void kr_model_stage_drop_runtimes(kr_model_stage *ms, int cuda)
{
    for (int b = 0; b <= KR_MAX_BATCH_LOG2; b++)
        keyer_runtime_destroy(&ms->rt[cuda][b]);
}

keyer_status kr_model_stage_open(kr_model_stage *ms, const kr_model_stage_run *run,
                                 keyer_error *err)
{
    ms->run = *run;
    return kr_queue_create(run->capacity, &ms->in, err);
}

int kr_model_stage_pass_on(kr_queue *next, kr_item *it)
{
    if (next)
        return kr_queue_push(next, it) != KEYER_OK;
    kr_item_done(it);
    return 0;
}

size_t kr_model_stage_item_elements(const keyer_tensor_info *t)
{
    size_t n = 1;
    for (int d = 1; d < t->rank; d++) /* dims[0] is the batch */
        n *= (size_t)(t->dims[d] > 0 ? t->dims[d] : 0);
    return n;
}

keyer_status kr_model_stage_square_image(keyer_model *model, const char *what, const char *path,
                                         int *side, keyer_error *err)
{
    keyer_tensor_info in;
    keyer_status st = keyer_model_input_info(model, 0, &in, err);
    if (st)
        return st;
    if (keyer_model_input_count(model) != 1 || in.rank != 4 || in.dtype != KEYER_DTYPE_F32 ||
        in.dims[1] < 8 || in.dims[1] != in.dims[2] || in.dims[1] > 4096 || in.dims[3] != 3)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: the input is not one float [1,S,S,3] image", what, path);
    *side = in.dims[1];
    return KEYER_OK;
}

kr_queue *kr_model_stage_queue(const kr_model_stage *ms)
{
    return ms ? ms->in : NULL;
}

const kr_model_input *kr_model_stage_input(const kr_model_stage *ms)
{
    return &ms->p.input;
}

keyer_model *kr_model_stage_model(const kr_model_stage *ms)
{
    return ms->model;
}

keyer_status kr_model_stage_runtime(kr_model_stage *ms, int cuda, int lg, keyer_runtime **rt,
                                    keyer_error *err)
{
    *rt = NULL;
    if (lg < 0 || lg > KR_MAX_BATCH_LOG2)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: no runtime of batch 2^%d",
                               ms->p.name, lg);
    if (!ms->rt[cuda][lg]) {
        keyer_status st = kr_model_stage_runtimes(ms, cuda, 1 << lg, 0, err);
        if (st)
            return st;
    }
    *rt = ms->rt[cuda][lg];
    return KEYER_OK;
}

const kr_model_stage_run *kr_model_stage_get_run(const kr_model_stage *ms)
{
    return &ms->run;
}

void *kr_model_stage_stream(const kr_model_stage *ms)
{
    return ms->stream;
}

keyer_status kr_model_stage_sync(kr_model_stage *ms, keyer_error *err)
{
    if (!ms->dev || !ms->stream)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: no CUDA stream to wait for",
                               ms->p.name);
    return ms->dev->stream_sync(ms->ordinal, ms->stream, err);
}

const kr_stage_ctx *kr_model_stage_ctx(const kr_model_stage *ms)
{
    return ms->p.ctx;
}

/* ---- running a chunk on one device ------------------------------------------------------------ */

/* Runs @p n CPU items through the CPU runtime of batch 2^lg. */
static keyer_status run_cpu(kr_model_stage *ms, kr_item **items, int n, int lg,
                            keyer_error *err)
{
    keyer_runtime *rt = ms->rt[0][lg];
    char *in = (char *)keyer_runtime_input_data(rt, 0);
    int slot = ms->p.input.slot;
    for (int i = 0; i < n; i++)
        memcpy(in + (size_t)i * ms->input_bytes, items[i]->host.input[slot], ms->input_bytes);
    keyer_status rs = keyer_runtime_run(rt, err);
    if (rs)
        return rs;
    return ms->p.ops->cpu_outputs(ms->p.opaque, rt, items, n, err);
}

/* Runs @p n CUDA items through the CUDA runtime of batch 2^lg, on the stage's stream. */
static keyer_status run_cuda(kr_model_stage *ms, kr_item **items, int n, int lg,
                             keyer_error *err)
{
    keyer_runtime *rt = ms->rt[1][lg];
    char *in = (char *)keyer_runtime_input_data(rt, 0);
    int slot = ms->p.input.slot;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++) {
        rs = kr_item_wait(items[i], ms->stream, err);
        if (!rs)
            rs = ms->dev->copy(ms->ordinal, in + (size_t)i * ms->input_bytes,
                               items[i]->cuda.input[slot], ms->input_bytes, ms->stream, err);
    }
    if (!rs)
        rs = keyer_runtime_run(rt, err);
    if (!rs)
        rs = ms->p.ops->cuda_outputs(ms->p.opaque, rt, items, n, ms->stream, err);
    return rs;
}

/* CUDA items, CPU model: the inputs come down (small: the model's size), the CPU runs, and
 * the owner moves the results back up when the next stages read them on the device. */
static keyer_status run_hybrid(kr_model_stage *ms, kr_item **items, int n, int lg,
                               keyer_error *err)
{
    int slot = ms->p.input.slot;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++) {
        rs = kr_item_inputs_ensure(items[i], 0, err);
        if (!rs)
            rs = kr_item_wait(items[i], ms->stream, err);
        if (!rs)
            rs = ms->dev->copy(ms->ordinal, items[i]->host.input[slot],
                               items[i]->cuda.input[slot], ms->input_bytes, ms->stream, err);
    }
    if (!rs)
        rs = ms->dev->stream_sync(ms->ordinal, ms->stream, err);
    if (!rs)
        rs = run_cpu(ms, items, n, lg, err);
    if (!rs && ms->p.ops->upload_outputs)
        rs = ms->p.ops->upload_outputs(ms->p.opaque, items, n, ms->stream, err);
    return rs;
}

/* The CPU runtime of batch 2^lg, made when first needed (after a GPU failure). */
static keyer_status cpu_runtime(kr_model_stage *ms, int lg, keyer_error *err)
{
    return kr_model_stage_runtimes(ms, 0, 1 << lg, 0, err);
}

/* KEYER_FAIL_CUDA_AT_FRAME: the CUDA path fails on the chunk holding that frame number. */
static keyer_status injected_failure(const kr_model_stage *ms, kr_item **items, int n,
                                     keyer_error *err)
{
    if (ms->p.fail_cuda_at < 0)
        return KEYER_OK;
    for (int i = 0; i < n; i++)
        if (items[i]->seq == ms->p.fail_cuda_at)
            return keyer_error_set(err, KEYER_STATUS_DEVICE,
                                   "CUDA inference failed at frame %lld of stream %d "
                                   "(KEYER_FAIL_CUDA_AT_FRAME)",
                                   (long long)items[i]->seq, items[i]->stream);
    return KEYER_OK;
}

/* ---- batches ---------------------------------------------------------------------------------- */

/* Moves the CUDA items of @p items to the CPU and drops the ones that could not leave the GPU
 * (marked lost); returns how many remain, compacted at the front. */
static int demote_all(const kr_model_stage *ms, kr_item **items, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (items[i]->on_cuda)
            kr_item_demote(items[i], ms->run.need, ms->stream);
        if (!items[i]->lost)
            items[k++] = items[i];
    }
    return k;
}

/* Runs one device-uniform group, split into power-of-two runtimes. */
static void run_group(kr_model_stage *ms, kr_item **items, int n)
{
    const kr_stage_ctx *ctx = ms->p.ctx;
    int done = 0;
    while (done < n) {
        /* the GPU failed on an earlier chunk of this group: the rest moves to the CPU too */
        if (items[done]->on_cuda && kr_stage_gpu_failed(ctx)) {
            n = done + demote_all(ms, items + done, n - done);
            if (done >= n)
                break;
        }
        int lg = 0;
        while (lg < KR_MAX_BATCH_LOG2 && (1 << (lg + 1)) <= n - done &&
               (1 << (lg + 1)) <= ms->run.batch)
            lg++;
        int m = 1 << lg;
        kr_item **chunk = items + done;
        done += m;
        keyer_error e = {0};
        keyer_status rs;
        if (chunk[0]->on_cuda) { /* the check above demoted them if the GPU had failed */
            rs = injected_failure(ms, chunk, m, &e);
            if (!rs && !ms->run.cuda)
                rs = cpu_runtime(ms, lg, &e);
            if (!rs)
                rs = ms->run.cuda ? run_cuda(ms, chunk, m, lg, &e)
                                  : run_hybrid(ms, chunk, m, lg, &e);
            if (rs && kr_stage_device_error(ctx, rs, &e)) {
                /* the chunk goes again, on the CPU; items that cannot leave the GPU are lost */
                int k = demote_all(ms, chunk, m);
                if (k)
                    run_group(ms, chunk, k);
                continue;
            }
        } else {
            rs = cpu_runtime(ms, lg, &e);
            if (!rs)
                rs = run_cpu(ms, chunk, m, lg, &e);
        }
        if (rs)
            for (int i = 0; i < m; i++)
                kr_item_fail(chunk[i], rs, &e, ms->p.name);
    }
}

void kr_model_stage_hand_on(kr_model_stage *ms, kr_item **slot)
{
    kr_item *it = *slot;
    if (!it)
        return;
    *slot = NULL;
    if (ms->gone || ms->p.ops->forward(ms->p.opaque, it)) {
        kr_item_release(it);
        ms->gone = 1;
    }
}

/* Runs one batch taken from the queue; returns non-zero when the next stage is gone. */
static int run_batch(kr_model_stage *ms, kr_item **items, int n, int full)
{
    kr_item *run[64], *run_on_cpu[64];
    int64_t t0 = kr_clock_ns();
    /* the trace's item, read now: the batch op may hand items on before the batch ends */
    int trace_stream = n == 1 ? items[0]->stream : -1;
    int64_t trace_seq = n == 1 ? items[0]->seq : -1;
    /* counted before the batch runs: the batch op may hand items on early, and a report read as
     * soon as the last frame is written must already count them */
    if (ms->p.counters) {
        atomic_fetch_add(&ms->p.counters->batches, 1);
        atomic_fetch_add(&ms->p.counters->frames, n);
        if (full)
            atomic_fetch_add(&ms->p.counters->full, 1);
    }
    kr_stage_stats_count(ms->p.stats, n);
    /* after a GPU failure, CUDA items come over to the CPU first */
    if (kr_stage_gpu_failed(ms->p.ctx))
        for (int i = 0; i < n; i++)
            if (items[i]->on_cuda && !items[i]->lost && !items[i]->failed)
                kr_item_demote(items[i], ms->run.need, ms->stream);
    /* group by device (both groups first: a failing CUDA group moves its items to the CPU and
     * runs them there itself), keeping failed and lost items out of the runs; or the owner
     * runs the batch itself */
    int ncuda = 0, ncpu = 0;
    if (ms->p.ops->batch)
        ms->p.ops->batch(ms->p.opaque, ms, items, n);
    else
        for (int i = 0; i < n; i++)
            if (!items[i]->lost && !items[i]->failed) {
                if (items[i]->on_cuda)
                    run[ncuda++] = items[i];
                else
                    run_on_cpu[ncpu++] = items[i];
            }
    if (ncuda)
        run_group(ms, run, ncuda);
    if (ncpu)
        run_group(ms, run_on_cpu, ncpu);
    int64_t t1 = kr_clock_ns();
    kr_stage_stats_record(ms->p.stats, 0, t0, t1); /* the frames counted above */
    kr_trace_add(ms->p.ctx->trace, ms->track, ms->p.name, trace_stream, trace_seq, n, t0, t1);
    /* the items the batch op handed on early are NULL here */
    for (int i = 0; i < n; i++)
        kr_model_stage_hand_on(ms, &items[i]);
    if (ms->gone)
        return 1;
    if (ms->p.ops->handed_on)
        ms->p.ops->handed_on(ms->p.opaque);
    return 0;
}

static void *stage_main(void *arg)
{
    kr_model_stage *ms = arg;
    kr_thread_name(ms->p.name);
    kr_item *items[64];
    for (;;) {
        int n = 0, full = 0;
        if (kr_queue_pop_batch(ms->in, (void **)items, ms->run.batch, ms->run.wait_ns, &n,
                               &full) != KEYER_OK)
            break;
        if (run_batch(ms, items, n, full))
            break;
    }
    return NULL;
}

keyer_status kr_model_stage_start(kr_model_stage *ms, int track, keyer_error *err)
{
    ms->track = track;
    if (pthread_create(&ms->thread, NULL, stage_main, ms))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
    ms->running = 1;
    return KEYER_OK;
}

void kr_model_stage_cancel(kr_model_stage *ms)
{
    if (ms)
        kr_queue_cancel(ms->in);
}

void kr_model_stage_join(kr_model_stage *ms)
{
    if (!ms)
        return;
    if (ms->running)
        pthread_join(ms->thread, NULL);
    ms->running = 0;
    void *item;
    while (ms->in && kr_queue_drain(ms->in, &item))
        kr_item_release(item);
}
