/* A cropping model stage: its model stage, rounds, preparation and buffers, and a chunk's run. */
#include "pipeline/crop_stage.h"

#include <stdlib.h>
#include <string.h>

#include "keyer/registry.h"

struct kr_crop_stage {
    kr_crop_stage_params p;
    int width, height;           /* the crops (the model's input) */
    kr_model_stage *stage;
    kr_rounds *rounds;           /* from connect */
    kr_queue *next;              /* NULL: the stream's reorder buffer */
    keyer_prepare *prep;         /* crops into a runtime's input (host or CUDA frames) */
    const kr_device_fns *dev;    /* CUDA table, or NULL */
    int ordinal;
    int batch, run_cap, out_cap;
    float *dev_crops;            /* hybrid: the crops on the device before they come down */
    int out_pinned;              /* buf.out came from dev->host_alloc */
    kr_crop_buffers buf;
};

/* ---- the model stage's ops ---------------------------------------------------------------- */

/* The batch in rounds of at most one frame per stream, each stream's frames in order. */
static void run_batch(void *opaque, kr_model_stage *ms, kr_item **items, int n)
{
    kr_rounds_run_batch(((kr_crop_stage *)opaque)->rounds, ms, items, n);
}

/* On to the next stage, or to the writer, which restores the order. */
static int forward(void *opaque, kr_item *it)
{
    return kr_model_stage_pass_on(((kr_crop_stage *)opaque)->next, it);
}

/* The batch's items are all handed on: the next model stage takes them without waiting for
 * more (NULL next: the writer's reorder buffers, nothing to flush). */
static void handed_on(void *opaque)
{
    kr_queue_flush(((kr_crop_stage *)opaque)->next);
}

/* The crops are made by the batch op: no per-item input, no per-run outputs callbacks. */
static const kr_model_stage_ops crop_ops = {NULL, NULL, NULL, forward, run_batch, handed_on};

/* ---- set-up ------------------------------------------------------------------------------- */

keyer_status kr_crop_stage_create(const kr_crop_stage_params *p, kr_crop_stage **out,
                                  keyer_error *err)
{
    *out = NULL;
    const char *what = p->what ? p->what : "";
    if (!p->name || !p->model_name || !p->check_model || !p->rounds)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%sa cropping stage without a name, model, check or rounds", what);
    kr_crop_stage *cs = calloc(1, sizeof(*cs));
    if (!cs)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%sout of memory", what);
    cs->p = *p;
    cs->p.what = what;
    char path[4096];
    keyer_model *model = NULL;
    keyer_status st = keyer_registry_resolve(p->model_name, path, sizeof(path), err);
    if (!st)
        st = keyer_model_load_file(path, &model, err);
    if (st) {
        keyer_error_prefix(err, "%s", what);
        goto fail;
    }
    if ((st = p->check_model(p->opaque, model, path, &cs->width, &cs->height, err)))
        goto fail;
    kr_model_stage_params mp = {
        .name = p->name,
        .model_name = p->model_name,
        .what = what,
        /* slot -1: no input made by prepare (the batch op crops the frames) */
        .input = {.slot = -1, .width = cs->width, .height = cs->height, .scale = 1.0f,
                  .what = what},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = NULL,
        .threads = p->threads,
        .fail_cuda_at = -1,
        .cuda_precision = p->cuda_precision,
        .urgent = 1, /* the rounds wait on the host after every pass */
        .ops = &crop_ops,
        .opaque = cs,
    };
    if ((st = kr_model_stage_create(&mp, &model, &cs->stage, err)))
        goto fail;
    *out = cs;
    return KEYER_OK;
fail:
    keyer_model_destroy(&model);
    kr_crop_stage_destroy(&cs);
    return st;
}

/* Frees what connect made (none of it in use: the stage's thread is not running). */
static void disconnect(kr_crop_stage *cs)
{
    kr_rounds_destroy(&cs->rounds);
    keyer_prepare_destroy(&cs->prep);
    if (cs->dev) {
        cs->dev->free(cs->ordinal, cs->dev_crops);
        cs->dev->free(cs->ordinal, cs->buf.dev_out);
    }
    if (cs->out_pinned)
        cs->dev->host_free(cs->ordinal, cs->buf.out);
    else
        free(cs->buf.out);
    free(cs->buf.frames);
    free(cs->buf.rois);
    free(cs->buf.geo);
    free(cs->buf.out_geo);
    cs->dev_crops = NULL;
    cs->out_pinned = 0;
    memset(&cs->buf, 0, sizeof(cs->buf));
}

void kr_crop_stage_destroy(kr_crop_stage **pcs)
{
    if (!pcs || !*pcs)
        return;
    kr_crop_stage *cs = *pcs;
    kr_model_stage_destroy(&cs->stage); /* its thread stops before the buffers go */
    disconnect(cs);
    free(cs);
    *pcs = NULL;
}

keyer_status kr_crop_stage_connect(kr_crop_stage *cs, const kr_crop_stage_run_params *run,
                                   keyer_error *err)
{
    const char *what = cs->p.what;
    if (run->batch < 1 || run->run_cap < run->batch ||
        run->run_cap > 1 << KR_MAX_BATCH_LOG2 || run->out_cap < run->batch ||
        run->crop_cap < 1 || run->out_floats < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%sconnected with batch %d, %d crops per run, %d per pass, %d "
                               "output places", what, run->batch, run->run_cap, run->crop_cap,
                               run->out_cap);
    disconnect(cs); /* connected again (the session's start again after a failure): anew */
    cs->next = run->next;
    cs->dev = run->dev;
    cs->ordinal = run->ordinal;
    cs->batch = run->batch;
    cs->run_cap = run->run_cap;
    cs->out_cap = run->out_cap;
    const kr_device_fns *dev = run->dev;
    size_t rc = (size_t)run->run_cap;
    keyer_status st;
    if (dev && dev->host_alloc) {
        /* page-locked: the outputs come down without the host waiting per run */
        if ((st = dev->host_alloc(cs->ordinal, run->out_floats * sizeof(float),
                                  (void **)&cs->buf.out, err)))
            return keyer_error_prefix(err, "%s", what);
        cs->out_pinned = 1;
    } else {
        cs->buf.out = calloc(run->out_floats, sizeof(float));
    }
    cs->buf.frames = calloc(rc, sizeof(*cs->buf.frames));
    cs->buf.rois = calloc(rc, sizeof(*cs->buf.rois));
    cs->buf.geo = calloc(rc, sizeof(*cs->buf.geo));
    cs->buf.out_geo = calloc((size_t)run->out_cap, sizeof(*cs->buf.out_geo));
    if (!cs->buf.out || !cs->buf.frames || !cs->buf.rois || !cs->buf.geo || !cs->buf.out_geo)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%sout of memory", what);
    if ((st = kr_rounds_create(cs->p.rounds, cs->p.opaque, run->batch, run->crop_cap,
                               run->out_cap, &cs->rounds, err)))
        return keyer_error_prefix(err, "%s", what);
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = cs->width;
    pp.height = cs->height;
    pp.max_batch = run->run_cap;
    pp.fit = run->fit;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    pp.threads = cs->p.threads;
    pp.stream = dev ? kr_model_stage_stream(cs->stage) : NULL;
    if ((st = keyer_prepare_create(&pp, &cs->prep, err)))
        return keyer_error_prefix(err, "%s", what);
    if (dev && run->dev_floats &&
        (st = dev->alloc(cs->ordinal, run->dev_floats * sizeof(float),
                         (void **)&cs->buf.dev_out, err)))
        return keyer_error_prefix(err, "%s", what);
    if (dev && run->hybrid &&
        (st = dev->alloc(cs->ordinal,
                         (size_t)run->batch * (size_t)cs->width * (size_t)cs->height * 3 *
                             sizeof(float),
                         (void **)&cs->dev_crops, err)))
        return keyer_error_prefix(err, "%s", what);
    return KEYER_OK;
}

/* ---- a chunk ------------------------------------------------------------------------------ */

keyer_status kr_crop_stage_run(kr_crop_stage *cs, int n, int lg, int cuda, int deferred,
                               int at, keyer_runtime **out, keyer_error *err)
{
    *out = NULL;
    const char *what = cs->p.what;
    if (!cs->prep || lg < 0 || lg > KR_MAX_BATCH_LOG2 || n < 1 || n > (1 << lg) ||
        n > cs->run_cap || (deferred && (at < 0 || at + n > cs->out_cap)) ||
        ((cuda || deferred) && !cs->dev) ||
        (cuda && !deferred && (!cs->dev_crops || (1 << lg) > cs->batch)))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "%sa run of %d crops on the runtime of batch 2^%d at place %d "
                               "(%s)", what, n, lg, at, cuda ? "CUDA items" : "host items");
    keyer_runtime *rt = NULL;
    keyer_status st = kr_model_stage_runtime(cs->stage, deferred, lg, &rt, err);
    if (st)
        return st;
    size_t in_bytes = ((size_t)1 << lg) * (size_t)cs->width * (size_t)cs->height * 3 *
                      sizeof(float);
    if (keyer_runtime_input_bytes(rt, 0) != in_bytes)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "%sthe runtime of batch %d takes %zu input bytes, not %zu", what,
                               1 << lg, keyer_runtime_input_bytes(rt, 0), in_bytes);
    const kr_crop_buffers *b = &cs->buf;
    float *in = keyer_runtime_input_data(rt, 0);
    if (deferred) {
        /* crops straight into the runtime's input (its padding keeps what it held: those
         * outputs are not read) */
        st = keyer_prepare_run(cs->prep, b->frames, b->rois, n, in, b->out_geo + at, err);
    } else if (cuda) {
        /* CUDA items, CPU model: cropped on the GPU, the crops come down */
        void *stream = kr_model_stage_stream(cs->stage);
        if (!(st = keyer_prepare_run(cs->prep, b->frames, b->rois, n, cs->dev_crops, b->geo,
                                     err)) &&
            !(st = cs->dev->copy(cs->ordinal, in, cs->dev_crops, in_bytes, stream, err)))
            st = cs->dev->stream_sync(cs->ordinal, stream, err);
    } else {
        if (n < (1 << lg)) /* the unused items of the run: zeros */
            memset(in, 0, in_bytes);
        st = keyer_prepare_run(cs->prep, b->frames, b->rois, n, in, b->geo, err);
    }
    if (!st)
        st = keyer_runtime_run(rt, err);
    if (!st)
        *out = rt;
    return st;
}

keyer_status kr_crop_stage_copy(kr_crop_stage *cs, void *dst, const void *src, size_t bytes,
                                keyer_error *err)
{
    if (!cs->dev)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%sa device copy without a device",
                               cs->p.what);
    return cs->dev->copy(cs->ordinal, dst, src, bytes, kr_model_stage_stream(cs->stage), err);
}

/* ---- accessors ---------------------------------------------------------------------------- */

const kr_crop_buffers *kr_crop_stage_buffers(const kr_crop_stage *cs)
{
    return &cs->buf;
}

kr_model_stage *kr_crop_stage_model(kr_crop_stage *cs)
{
    return cs->stage;
}

kr_rounds *kr_crop_stage_rounds(const kr_crop_stage *cs)
{
    return cs->rounds;
}

int kr_crop_stage_ordinal(const kr_crop_stage *cs)
{
    return cs->ordinal;
}
