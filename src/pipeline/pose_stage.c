/* The session's pose stage: the body crops of a batch's frames, run in powers of two. */
#include "pipeline/pose_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"
#include "keyer/registry.h"
#include "pipeline/crop_stage.h"
#include "vision/pose_heatmap.h"
#include "vision/pose_steps.h"

#define POINTS KR_POSE_MODEL_POINTS
#define GATHERED KR_POSE_GATHERED(POINTS)

/* Where an item of a round is in its frame's steps. */
enum { PS_IDLE = 0, PS_SEED, PS_FINAL };

static const char *const model_names[] = {"pose-lite", "pose-full", "pose-heavy"};

struct kr_pose_stage {
    kr_pose_stage_params p;
    kr_pose_shape shape;
    int out_points, out_flag, out_world, out_heat; /* output indices */
    kr_crop_stage *cs;            /* model stage, rounds, crops, buffers (crop_stage.h): its
                                   * out and dev_out hold batch x GATHERED floats, the CUDA
                                   * runs' gathered outputs (host, page-locked; device) */
    keyer_pose **trackers;        /* per stream id, made at the stream's first frame */
    int batch;                    /* items per batch, crops per run at most */
    kr_item *const *round;        /* the round being run (the rounds' array) */
    keyer_pose **round_tr;        /* batch: its trackers (NULL: not run) */
    int *state;                   /* batch: PS_* per round position */
    keyer_roi *rois;              /* batch: the crop each round position runs next */
    int *pos;                     /* batch: a pass's crops' round positions */
    int *pass_cuda;               /* batch: whether they are of CUDA items */
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

/* The deferred CUDA crops ord[0 .. n) take their gathered outputs at host places 0 .. n. */
static keyer_status take_deferred(void *opaque, const int *ord, int n, keyer_error *err)
{
    (void)err;
    kr_pose_stage *ps = opaque;
    const kr_crop_buffers *b = kr_crop_stage_buffers(ps->cs);
    for (int c = 0; c < n; c++) {
        const float *g = b->out + (size_t)c * GATHERED;
        kr_pose_outputs o = {g, g[POINTS * 5], g + POINTS * 5 + 1, NULL, NULL};
        take(ps, ps->pos[ord[c]], &o, &b->out_geo[c]);
    }
    return KEYER_OK;
}

/* Runs the pass's crops ord[0 .. n) (kr_crops_ops::chunk) through the runtime of batch 2^lg
 * (deferred: the landmarks refined on the device and gathered, only they come down, to host
 * places at .. at + n, read by take_deferred after the pass's one wait). */
static keyer_status run_chunk(void *opaque, const int *ord, int n, int lg, int cuda,
                              int deferred, int at, keyer_error *err)
{
    kr_pose_stage *ps = opaque;
    const kr_crop_buffers *b = kr_crop_stage_buffers(ps->cs);
    for (int c = 0; c < n; c++) {
        b->frames[c] = ps->round[ps->pos[ord[c]]]->src;
        b->rois[c] = ps->rois[ps->pos[ord[c]]];
    }
    keyer_runtime *rt = NULL;
    keyer_status st = kr_crop_stage_run(ps->cs, n, lg, cuda, deferred, at, &rt, err);
    if (st)
        return st;
    int side = ps->shape.width;
    if (deferred) {
        float *dst = b->dev_out + (size_t)at * GATHERED;
        if ((st = kr_pose_gather_cuda(kr_crop_stage_ordinal(ps->cs), dst,
                                      keyer_runtime_output_data(rt, ps->out_points),
                                      keyer_runtime_output_data(rt, ps->out_flag),
                                      keyer_runtime_output_data(rt, ps->out_world),
                                      keyer_runtime_output_data(rt, ps->out_heat), n, POINTS,
                                      ps->shape.heat_w, ps->shape.heat_h, side, side, 1,
                                      kr_model_stage_stream(kr_crop_stage_model(ps->cs)),
                                      err)))
            return st;
        return kr_crop_stage_copy(ps->cs, b->out + (size_t)at * GATHERED, dst,
                                  (size_t)n * GATHERED * sizeof(float), err);
    }
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
        take(ps, ps->pos[ord[c]], &o, &b->geo[c]);
    }
    return KEYER_OK;
}

static const kr_crops_ops pose_crops = {run_chunk, take_deferred};

/* One pass: the crops of the round positions whose state is in @p want (bits 1 << PS_*). */
static keyer_status run_pass(kr_pose_stage *ps, kr_model_stage *ms, int k, int want,
                             keyer_error *err)
{
    int n = 0;
    for (int j = 0; j < k; j++)
        if (ps->round_tr[j] && (want & (1 << ps->state[j]))) {
            ps->pos[n] = j;
            ps->pass_cuda[n] = ps->round[j]->on_cuda;
            n++;
        }
    return kr_rounds_crops(kr_crop_stage_rounds(ps->cs), ms, ps->pass_cuda, n, &pose_crops, ps,
                           err);
}

/* ---- rounds ------------------------------------------------------------------------------- */

/* The tracker of stream @p id, made at its first frame (kr_rounds_ops::state). */
static keyer_status tracker(void *opaque, int id, void **out, keyer_error *err)
{
    kr_pose_stage *ps = opaque;
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

/* The steps of keyer_pose_run() for the round's k items (those with a tracker), in as few
 * passes as they allow: the seeding crops and the tracked crops together, then the final
 * crops of the frames just seeded (the frames already over go on to the next stage before
 * that second pass). */
static keyer_status round_steps(void *opaque, kr_model_stage *ms, kr_item *const *round,
                                void *const *states, int k, keyer_error *err)
{
    kr_pose_stage *ps = opaque;
    ps->round = round;
    for (int j = 0; j < k; j++) {
        kr_item *it = round[j];
        ps->round_tr[j] = states[j];
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
    keyer_status st = run_pass(ps, ms, k, (1 << PS_SEED) | (1 << PS_FINAL), err);
    if (st)
        return st;
    /* The frames that were tracked, or seeded and found empty, are over: they go on now
     * rather than behind the final crops of the frames just seeded with a person. */
    int second = 0;
    for (int j = 0; j < k; j++)
        second |= ps->round_tr[j] && ps->state[j] == PS_FINAL;
    if (!second)
        return KEYER_OK;
    kr_rounds *rounds = kr_crop_stage_rounds(ps->cs);
    for (int j = 0; j < k; j++)
        if (ps->round_tr[j] && ps->state[j] == PS_IDLE) {
            kr_rounds_finish(rounds, ms, j);
            ps->round_tr[j] = NULL;
        }
    return run_pass(ps, ms, k, 1 << PS_FINAL, err);
}

static void clear_item(kr_item *it)
{
    memset(&it->pose, 0, sizeof(it->pose));
}

static void reset_tracker(void *state)
{
    keyer_pose_reset(state);
}

static const kr_rounds_ops pose_rounds = {"pose", clear_item, tracker, round_steps,
                                          reset_tracker};

/* ---- set-up ------------------------------------------------------------------------------- */

/* Checks the model's input and finds its outputs as keyer_pose_create() does. */
static keyer_status check_model(void *opaque, keyer_model *model, const char *path,
                                int *width, int *height, keyer_error *err)
{
    kr_pose_stage *ps = opaque;
    int side = 0;
    keyer_status st = kr_model_stage_square_image(model, "pose landmarks", path, &side, err);
    if (st)
        return st;
    ps->shape.width = ps->shape.height = side;
    *width = *height = side;
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
    kr_crop_stage_params cp = {
        .name = "pose",
        .what = "pose landmarks: ",
        .model_name = name,
        .cuda_precision = keyer_registry_precision(keyer_registry_find(name), p->precision, 1),
        .ctx = p->ctx,
        .stats = p->stats,
        .threads = p->threads,
        .check_model = check_model,
        .rounds = &pose_rounds,
        .opaque = ps,
    };
    keyer_status st = kr_crop_stage_create(&cp, &ps->cs, err);
    if (st) {
        kr_pose_stage_destroy(&ps);
        return st;
    }
    *out = ps;
    return KEYER_OK;
}

void kr_pose_stage_destroy(kr_pose_stage **pps)
{
    if (!pps || !*pps)
        return;
    kr_pose_stage *ps = *pps;
    kr_crop_stage_destroy(&ps->cs); /* its thread stops before the buffers go */
    for (int i = 0; ps->trackers && i < ps->p.max_streams; i++)
        keyer_pose_destroy(&ps->trackers[i]);
    free(ps->trackers);
    free(ps->round_tr);
    free(ps->state);
    free(ps->rois);
    free(ps->pos);
    free(ps->pass_cuda);
    free(ps);
    *pps = NULL;
}

kr_model_stage *kr_pose_stage_model(kr_pose_stage *ps)
{
    return kr_crop_stage_model(ps->cs);
}

const kr_rounds *kr_pose_stage_rounds(const kr_pose_stage *ps)
{
    return kr_crop_stage_rounds(ps->cs);
}

const char *kr_pose_stage_name(const kr_pose_stage *ps)
{
    return model_names[ps->p.model];
}

keyer_status kr_pose_stage_connect(kr_pose_stage *ps, kr_queue *next, const kr_device_fns *dev,
                                   int ordinal, int hybrid, int batch, keyer_error *err)
{
    ps->batch = batch < 1 ? 1 : batch;
    size_t b = (size_t)ps->batch;
    ps->round_tr = calloc(b, sizeof(*ps->round_tr));
    ps->state = calloc(b, sizeof(int));
    ps->rois = calloc(b, sizeof(*ps->rois));
    ps->pos = calloc(b, sizeof(int));
    ps->pass_cuda = calloc(b, sizeof(int));
    if (!ps->round_tr || !ps->state || !ps->rois || !ps->pos || !ps->pass_cuda)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "pose landmarks: out of memory");
    /* a round has one frame per stream: a pass at most one crop per item of the batch */
    kr_crop_stage_run_params run = {
        .next = next,
        .dev = dev,
        .ordinal = ordinal,
        .hybrid = hybrid,
        .batch = ps->batch,
        .crop_cap = ps->batch,
        .out_cap = ps->batch,
        .run_cap = ps->batch,
        .fit = KEYER_FIT_LETTERBOX, /* keyer_pose_run's crops: letterboxed, rgb in [0, 1] */
        .out_floats = b * GATHERED,
        .dev_floats = b * GATHERED, /* the gathered outputs on the device */
    };
    return kr_crop_stage_connect(ps->cs, &run, err);
}
