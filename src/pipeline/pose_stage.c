/* The session's pose stage: the body crops of a batch's frames, run in powers of two. */
#include "pipeline/pose_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"
#include "keyer/registry.h"
#include "vision/pose_heatmap.h"
#include "vision/pose_steps.h"

#define POINTS KR_POSE_MODEL_POINTS
#define GATHERED KR_POSE_GATHERED(POINTS)

/* Where an item of a round is in its frame's steps. */
enum { PS_IDLE = 0, PS_SEED, PS_FINAL };

static const char *const model_names[] = {"pose-lite", "pose-full", "pose-heavy"};

struct kr_pose_stage {
    kr_pose_stage_params p;
    keyer_precision cuda_precision;
    kr_pose_shape shape;
    int out_points, out_flag, out_world, out_heat; /* output indices */
    kr_model_stage *stage;
    kr_queue *next;               /* NULL: the stream's reorder buffer */
    keyer_pose **trackers;        /* per stream id, made at the stream's first frame */
    keyer_prepare *prep;          /* crops into a runtime's input (host or CUDA frames) */
    const kr_device_fns *dev;     /* CUDA table, or NULL */
    int ordinal;
    float *dev_crops;             /* hybrid: the crops on the device before they come down */
    float *dev_out;               /* batch x GATHERED: a CUDA run's gathered outputs */
    float *run_out;               /* batch x GATHERED: the same on the host */
    int batch;                    /* items per batch, crops per run at most */
    int *order;                   /* batch: round positions of the crops, CUDA items' first */
    const keyer_frame **frames;   /* batch: one run's frames */
    keyer_roi *run_rois;          /* batch */
    keyer_prepare_geometry *run_geo; /* batch */
    kr_item **round;              /* batch: one round's items, one per stream */
    keyer_pose **round_tr;        /* batch: their trackers (NULL: not run) */
    int *state;                   /* batch: PS_* per round position */
    keyer_roi *rois;              /* batch: the crop each round position runs next */
    int *done;                    /* batch: per position in the batch */
};

/* ---- running crops ------------------------------------------------------------------------ */

/* Hands round position @p j the outputs of its crop: the seeding run or the final one. */
static void take(kr_pose_stage *ps, int j, const kr_pose_outputs *o,
                 const keyer_prepare_geometry *geo)
{
    kr_item *it = ps->round[j];
    if (ps->state[j] == PS_SEED) {
        ps->state[j] = kr_pose_add_seed(ps->round_tr[j], o, geo, &it->pose, &ps->rois[j])
                           ? PS_FINAL
                           : PS_IDLE;
    } else {
        kr_pose_add_final(ps->round_tr[j], &ps->rois[j], o, geo, &it->pose);
        ps->state[j] = PS_IDLE;
    }
}

/* Runs the crops of round positions ord[0 .. n), all of items on CUDA (@p cuda) or host,
 * through the runtime of batch 2^lg (n == 2^lg), and hands each its outputs. */
static keyer_status run_chunk(kr_pose_stage *ps, kr_model_stage *ms, const int *ord, int n,
                              int lg, int cuda, keyer_error *err)
{
    const kr_model_stage_run *run = kr_model_stage_get_run(ms);
    void *stream = kr_model_stage_stream(ms);
    int rt_cuda = cuda && run->cuda;
    keyer_runtime *rt = NULL;
    keyer_status st = kr_model_stage_runtime(ms, rt_cuda, lg, &rt, err);
    if (st)
        return st;
    int side = ps->shape.width;
    size_t in_bytes = (size_t)n * (size_t)side * (size_t)side * 3 * sizeof(float);
    if (keyer_runtime_input_bytes(rt, 0) != in_bytes)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "pose landmarks: the runtime of batch %d takes %zu input bytes, "
                               "not %zu", n, keyer_runtime_input_bytes(rt, 0), in_bytes);
    for (int c = 0; c < n; c++) {
        ps->frames[c] = ps->round[ord[c]]->src;
        ps->run_rois[c] = ps->rois[ord[c]];
    }
    if (rt_cuda) {
        /* crops straight into the runtime's input; the landmarks refined on the device and
         * gathered: only they come down */
        if ((st = keyer_prepare_run(ps->prep, ps->frames, ps->run_rois, n,
                                    keyer_runtime_input_data(rt, 0), ps->run_geo, err)) ||
            (st = keyer_runtime_run(rt, err)) ||
            (st = kr_pose_gather_cuda(ps->ordinal, ps->dev_out,
                                      keyer_runtime_output_data(rt, ps->out_points),
                                      keyer_runtime_output_data(rt, ps->out_flag),
                                      keyer_runtime_output_data(rt, ps->out_world),
                                      keyer_runtime_output_data(rt, ps->out_heat), n, POINTS,
                                      ps->shape.heat_w, ps->shape.heat_h, side, side,
                                      1, stream, err)) ||
            (st = ps->dev->copy(ps->ordinal, ps->run_out, ps->dev_out,
                                (size_t)n * GATHERED * sizeof(float), stream, err)) ||
            (st = ps->dev->stream_sync(ps->ordinal, stream, err)))
            return st;
        for (int c = 0; c < n; c++) {
            const float *g = ps->run_out + (size_t)c * GATHERED;
            kr_pose_outputs o = {g, g[POINTS * 5], g + POINTS * 5 + 1, NULL, NULL};
            take(ps, ord[c], &o, &ps->run_geo[c]);
        }
        return KEYER_OK;
    }
    if (cuda) {
        /* CUDA items, CPU model: cropped on the GPU, the crops come down */
        if ((st = keyer_prepare_run(ps->prep, ps->frames, ps->run_rois, n, ps->dev_crops,
                                    ps->run_geo, err)) ||
            (st = ps->dev->copy(ps->ordinal, keyer_runtime_input_data(rt, 0), ps->dev_crops,
                                in_bytes, stream, err)) ||
            (st = ps->dev->stream_sync(ps->ordinal, stream, err)))
            return st;
    } else if ((st = keyer_prepare_run(ps->prep, ps->frames, ps->run_rois, n,
                                       keyer_runtime_input_data(rt, 0), ps->run_geo, err))) {
        return st;
    }
    if ((st = keyer_runtime_run(rt, err)))
        return st;
    const float *pts = keyer_runtime_output_data(rt, ps->out_points);
    const float *flag = keyer_runtime_output_data(rt, ps->out_flag);
    const float *world = keyer_runtime_output_data(rt, ps->out_world);
    const float *heat = keyer_runtime_output_data(rt, ps->out_heat);
    if (!pts || !flag || !world || !heat)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "pose landmarks: no output data");
    size_t heat_n = (size_t)ps->shape.heat_w * (size_t)ps->shape.heat_h * POINTS;
    for (int c = 0; c < n; c++) {
        kr_pose_outputs o = {pts + (size_t)c * POINTS * 5, flag[c],
                             world + (size_t)c * POINTS * 3, heat + (size_t)c * heat_n, NULL};
        take(ps, ord[c], &o, &ps->run_geo[c]);
    }
    return KEYER_OK;
}

/* Runs the crops of the round positions in state @p want (of @p k): the CUDA items'
 * together, then the host items'. */
static keyer_status run_crops(kr_pose_stage *ps, kr_model_stage *ms, int k, int want,
                              keyer_error *err)
{
    int n = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int j = 0; j < k; j++)
            if (ps->round_tr[j] && ps->state[j] == want && ps->round[j]->on_cuda == pass)
                ps->order[n++] = j;
    int done = 0;
    while (done < n) {
        int cuda = ps->round[ps->order[done]]->on_cuda;
        int same = 1;
        while (done + same < n && ps->round[ps->order[done + same]]->on_cuda == cuda)
            same++;
        int lg = 0;
        while (lg < KR_MAX_BATCH_LOG2 && (1 << (lg + 1)) <= same && (1 << (lg + 1)) <= ps->batch)
            lg++;
        keyer_status st = run_chunk(ps, ms, ps->order + done, 1 << lg, lg, cuda, err);
        if (st)
            return st;
        done += 1 << lg;
    }
    return KEYER_OK;
}

/* ---- rounds ------------------------------------------------------------------------------- */

/* The tracker of stream @p id, made at its first frame. */
static keyer_status tracker(kr_pose_stage *ps, int id, keyer_pose **out, keyer_error *err)
{
    *out = NULL;
    if (id < 0 || id >= ps->p.max_streams)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "pose landmarks: no stream %d", id);
    if (!ps->trackers[id]) {
        keyer_pose_params pp = keyer_pose_params_defaults();
        pp.model = (keyer_pose_model)ps->p.model;
        pp.segmentation = 0;
        pp.logger = ps->p.ctx->logger;
        keyer_status st = kr_pose_create_external(&pp, &ps->shape, &ps->trackers[id], err);
        if (st)
            return keyer_error_prefix(err, "pose landmarks: ");
    }
    *out = ps->trackers[id];
    return KEYER_OK;
}

/* The steps of keyer_pose_run() for the round's k items (those with a tracker). */
static keyer_status round_steps(kr_pose_stage *ps, kr_model_stage *ms, int k, keyer_error *err)
{
    for (int j = 0; j < k; j++) {
        kr_item *it = ps->round[j];
        ps->state[j] = PS_IDLE;
        if (!ps->round_tr[j])
            continue;
        const keyer_frame *f = it->src;
        if (kr_pose_begin(ps->round_tr[j], f->width, f->height, &it->pose, &ps->rois[j])) {
            ps->state[j] = PS_FINAL;
        } else {
            /* seeded from the best face of the session's detector (best first) */
            kr_pose_seed(ps->round_tr[j], it->n_dets > 0 ? &it->dets[0] : NULL, &it->pose,
                         &ps->rois[j]);
            ps->state[j] = PS_SEED;
        }
    }
    keyer_status st = run_crops(ps, ms, k, PS_SEED, err);
    if (!st)
        st = run_crops(ps, ms, k, PS_FINAL, err);
    return st;
}

/* Readies the round's items: CUDA items move to the CPU after a GPU failure, or the stage's
 * stream waits for them; each gets its stream's tracker (NULL when it is not run). */
static void round_ready(kr_pose_stage *ps, kr_model_stage *ms, int k)
{
    const kr_stage_ctx *ctx = ps->p.ctx;
    void *stream = kr_model_stage_stream(ms);
    for (int j = 0; j < k; j++) {
        kr_item *it = ps->round[j];
        keyer_error e = {0};
        ps->round_tr[j] = NULL;
        if (it->on_cuda && kr_stage_gpu_failed(ctx))
            kr_item_demote(it, kr_model_stage_get_run(ms)->need, stream);
        if (it->lost || it->failed)
            continue;
        keyer_status st = it->on_cuda ? kr_item_wait(it, stream, &e) : KEYER_OK;
        if (st && kr_stage_device_error(ctx, st, &e)) {
            kr_item_demote(it, kr_model_stage_get_run(ms)->need, stream);
            if (it->lost)
                continue;
            st = KEYER_OK;
        }
        if (!st)
            st = tracker(ps, it->stream, &ps->round_tr[j], &e);
        if (st)
            kr_item_fail(it, st, &e, "pose");
    }
}

static void run_round(kr_pose_stage *ps, kr_model_stage *ms, int k)
{
    const kr_stage_ctx *ctx = ps->p.ctx;
    round_ready(ps, ms, k);
    keyer_error e = {0};
    keyer_status st = round_steps(ps, ms, k, &e);
    if (!st)
        return;
    /* the frames start afresh: tracking dropped, as keyer_pose_run() does on error */
    for (int j = 0; j < k; j++)
        keyer_pose_reset(ps->round_tr[j]);
    int on_cuda = 0;
    for (int j = 0; j < k; j++)
        on_cuda |= ps->round_tr[j] && ps->round[j]->on_cuda;
    if (on_cuda && kr_stage_device_error(ctx, st, &e)) {
        /* the GPU failed: the round goes again on the CPU */
        round_ready(ps, ms, k);
        keyer_error_clear(&e);
        st = round_steps(ps, ms, k, &e);
        if (!st)
            return;
        for (int j = 0; j < k; j++)
            keyer_pose_reset(ps->round_tr[j]);
    }
    for (int j = 0; j < k; j++) {
        if (!ps->round_tr[j])
            continue;
        keyer_error ej = e;
        kr_item_fail(ps->round[j], st, &ej, "pose");
    }
}

/* The batch in rounds of at most one frame per stream, each stream's frames in order. */
static void run_batch(void *opaque, kr_model_stage *ms, kr_item **items, int n)
{
    kr_pose_stage *ps = opaque;
    for (int i = 0; i < n; i++) {
        memset(&items[i]->pose, 0, sizeof(items[i]->pose));
        ps->done[i] = items[i]->lost || items[i]->failed;
    }
    for (;;) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (ps->done[i])
                continue;
            int seen = 0;
            for (int j = 0; j < k && !seen; j++)
                seen = ps->round[j]->stream == items[i]->stream;
            if (seen)
                continue; /* the next round: it depends on this round's frame */
            ps->round[k++] = items[i];
            ps->done[i] = 1;
        }
        if (!k)
            break;
        run_round(ps, ms, k);
    }
}

/* On to the next model stage, or to the writer, which restores the order. */
static int forward(void *opaque, kr_item *it)
{
    return kr_model_stage_pass_on(((kr_pose_stage *)opaque)->next, it);
}

/* The crops are made by the batch op: no per-item input, no per-run outputs callbacks. */
static const kr_model_stage_ops pose_ops = {NULL, NULL, NULL, forward, run_batch};

/* ---- set-up ------------------------------------------------------------------------------- */

/* Checks the model's input and finds its outputs as keyer_pose_create() does. */
static keyer_status check_model(kr_pose_stage *ps, keyer_model *model, const char *path,
                                keyer_error *err)
{
    keyer_tensor_info in;
    keyer_status st = keyer_model_input_info(model, 0, &in, err);
    if (st)
        return st;
    if (keyer_model_input_count(model) != 1 || in.rank != 4 || in.dtype != KEYER_DTYPE_F32 ||
        in.dims[1] < 8 || in.dims[1] != in.dims[2] || in.dims[1] > 4096 || in.dims[3] != 3)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "pose landmarks: %s: the input is not one float [1,S,S,3] image",
                               path);
    ps->shape.width = ps->shape.height = in.dims[1];
    ps->out_points = ps->out_flag = ps->out_world = ps->out_heat = -1;
    int out_seg = -1;
    for (int i = 0; i < keyer_model_output_count(model); i++) {
        keyer_tensor_info o;
        if ((st = keyer_model_output_info(model, i, &o, err)))
            return st;
        if (o.dtype != KEYER_DTYPE_F32)
            continue;
        size_t n = kr_model_stage_item_elements(&o);
        if (ps->out_points < 0 && n == POINTS * 5)
            ps->out_points = i;
        if (ps->out_flag < 0 && n == 1)
            ps->out_flag = i;
        if (ps->out_world < 0 && n == POINTS * 3)
            ps->out_world = i;
        if (o.rank != 4 || o.dims[0] != 1 || o.dims[1] < 1 || o.dims[2] < 1)
            continue;
        if (o.dims[3] == 1 && out_seg < 0) {
            out_seg = i;
            ps->shape.seg_h = o.dims[1];
            ps->shape.seg_w = o.dims[2];
        } else if (o.dims[3] == POINTS && ps->out_heat < 0) {
            ps->out_heat = i;
            ps->shape.heat_h = o.dims[1];
            ps->shape.heat_w = o.dims[2];
        }
    }
    if (ps->out_points < 0 || ps->out_flag < 0 || ps->out_world < 0 || ps->out_heat < 0 ||
        out_seg < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "pose landmarks: %s: not a BlazePose landmark model (expected "
                               "outputs of %d x 5 landmarks, 1 presence, [1,H,W,1] "
                               "segmentation, [1,h,w,%d] heatmaps, %d x 3 world landmarks)",
                               path, POINTS, POINTS, POINTS);
    return KEYER_OK;
}

keyer_status kr_pose_stage_create(const kr_pose_stage_params *p, kr_pose_stage **out,
                                  keyer_error *err)
{
    *out = NULL;
    if (p->model < KEYER_POSE_MODEL_LITE || p->model > KEYER_POSE_MODEL_HEAVY ||
        p->max_streams < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "pose landmarks: model %d (0..2), max_streams %d (>= 1)",
                               p->model, p->max_streams);
    kr_pose_stage *ps = calloc(1, sizeof(*ps));
    if (!ps || !(ps->trackers = calloc((size_t)p->max_streams, sizeof(*ps->trackers)))) {
        free(ps);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "pose landmarks: out of memory");
    }
    ps->p = *p;
    const char *name = model_names[p->model];
    ps->cuda_precision = keyer_registry_precision(keyer_registry_find(name), p->precision, 1);
    char path[4096];
    keyer_model *model = NULL;
    keyer_status st = keyer_registry_resolve(name, path, sizeof(path), err);
    if (!st)
        st = keyer_model_load_file(path, &model, err);
    if (st) {
        keyer_error_prefix(err, "pose landmarks: ");
        goto fail;
    }
    if ((st = check_model(ps, model, path, err)))
        goto fail;
    kr_model_stage_params mp = {
        .name = "pose",
        .model_name = name,
        .what = "pose landmarks: ",
        /* slot -1: no input made by prepare (the batch op crops the bodies) */
        .input = {.slot = -1, .width = ps->shape.width, .height = ps->shape.height,
                  .scale = 1.0f, .what = "pose landmarks: "},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = NULL,
        .threads = p->threads,
        .fail_cuda_at = -1,
        .cuda_precision = ps->cuda_precision,
        .ops = &pose_ops,
        .opaque = ps,
    };
    if ((st = kr_model_stage_create(&mp, &model, &ps->stage, err)))
        goto fail;
    *out = ps;
    return KEYER_OK;
fail:
    keyer_model_destroy(&model);
    kr_pose_stage_destroy(&ps);
    return st;
}

void kr_pose_stage_destroy(kr_pose_stage **pps)
{
    if (!pps || !*pps)
        return;
    kr_pose_stage *ps = *pps;
    kr_model_stage_destroy(&ps->stage); /* its thread stops before the buffers go */
    for (int i = 0; ps->trackers && i < ps->p.max_streams; i++)
        keyer_pose_destroy(&ps->trackers[i]);
    free(ps->trackers);
    keyer_prepare_destroy(&ps->prep);
    if (ps->dev) {
        ps->dev->free(ps->ordinal, ps->dev_crops);
        ps->dev->free(ps->ordinal, ps->dev_out);
    }
    free(ps->run_out);
    free(ps->order);
    free(ps->frames);
    free(ps->run_rois);
    free(ps->run_geo);
    free(ps->round);
    free(ps->round_tr);
    free(ps->state);
    free(ps->rois);
    free(ps->done);
    free(ps);
    *pps = NULL;
}

kr_model_stage *kr_pose_stage_model(kr_pose_stage *ps)
{
    return ps->stage;
}

const char *kr_pose_stage_name(const kr_pose_stage *ps)
{
    return model_names[ps->p.model];
}

keyer_status kr_pose_stage_connect(kr_pose_stage *ps, kr_queue *next, const kr_device_fns *dev,
                                   int ordinal, int hybrid, int batch, keyer_error *err)
{
    ps->next = next;
    ps->dev = dev;
    ps->ordinal = ordinal;
    ps->batch = batch < 1 ? 1 : batch;
    size_t b = (size_t)ps->batch;
    ps->run_out = calloc(b * GATHERED, sizeof(float));
    ps->order = calloc(b, sizeof(int));
    ps->frames = calloc(b, sizeof(*ps->frames));
    ps->run_rois = calloc(b, sizeof(*ps->run_rois));
    ps->run_geo = calloc(b, sizeof(*ps->run_geo));
    ps->round = calloc(b, sizeof(*ps->round));
    ps->round_tr = calloc(b, sizeof(*ps->round_tr));
    ps->state = calloc(b, sizeof(int));
    ps->rois = calloc(b, sizeof(*ps->rois));
    ps->done = calloc(b, sizeof(int));
    if (!ps->run_out || !ps->order || !ps->frames || !ps->run_rois || !ps->run_geo ||
        !ps->round || !ps->round_tr || !ps->state || !ps->rois || !ps->done)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "pose landmarks: out of memory");
    /* keyer_pose_run's crops: letterboxed, rgb in [0, 1] */
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = ps->shape.width;
    pp.height = ps->shape.height;
    pp.max_batch = ps->batch;
    pp.fit = KEYER_FIT_LETTERBOX;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    pp.threads = ps->p.threads;
    pp.stream = dev ? kr_model_stage_stream(ps->stage) : NULL;
    keyer_status st = keyer_prepare_create(&pp, &ps->prep, err);
    if (st)
        return keyer_error_prefix(err, "pose landmarks: ");
    if (dev && (st = dev->alloc(ordinal, b * GATHERED * sizeof(float), (void **)&ps->dev_out,
                                err)))
        return keyer_error_prefix(err, "pose landmarks: ");
    if (dev && hybrid &&
        (st = dev->alloc(ordinal, b * (size_t)ps->shape.width * (size_t)ps->shape.height * 3 *
                                      sizeof(float),
                         (void **)&ps->dev_crops, err)))
        return keyer_error_prefix(err, "pose landmarks: ");
    return KEYER_OK;
}
