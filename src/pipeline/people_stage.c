/* The session's people stage: every person's crop of a batch's frames, across streams. */
#include "pipeline/people_stage.h"

#include <stdlib.h>
#include <string.h>

#include "keyer/registry.h"
#include "pipeline/crop_stage.h"
#include "vision/people_steps.h"

#define POINTS_5 (39 * 5) /* the model's landmarks: 33 + 2 auxiliary + 4 unused, x y z v p */

static const char *const model_names[] = {"pose-lite", "pose-full", "pose-heavy"};

struct kr_people_stage {
    kr_people_stage_params p;
    int side;                     /* the model's input (square) */
    int seg_w, seg_h;
    size_t seg_cells;
    int out_points, out_flag, out_seg; /* output indices */
    kr_crop_stage *cs;            /* model stage, rounds, crops, buffers (crop_stage.h): its
                                   * out holds out_cap x (points, presence, segmentation), the
                                   * landmarks first, then presences, then masks */
    keyer_people **keyers;        /* per stream id, made at the stream's first frame */
    int batch;                    /* items per batch */
    int host_lg;                  /* log2 of the keyers' batch: host crops as they run them */
    int run_cap;                  /* crops per run at most */
    int crop_cap;                 /* crops per pass at most */
    int out_cap;                  /* deferred crops between two waits at most */
    kr_item *const *round;        /* the round being run (the rounds' array) */
    keyer_people **round_kp;      /* batch: its keyers (NULL: not run) */
    int *jobs;                    /* batch: each position's crops in this pass */
    int *crop_pos, *crop_job, *crop_cuda; /* crop_cap: a pass's crops */
    keyer_frame *mask_host;       /* a CUDA item's mask before it goes up */
    size_t mask_bytes;
};

/* ---- running crops ------------------------------------------------------------------------ */

static float *out_points(const kr_people_stage *ps)
{
    return kr_crop_stage_buffers(ps->cs)->out;
}

static float *out_flags(const kr_people_stage *ps)
{
    return out_points(ps) + (size_t)ps->out_cap * POINTS_5;
}

static float *out_segs(const kr_people_stage *ps)
{
    return out_points(ps) + (size_t)ps->out_cap * (POINTS_5 + 1);
}

/* The deferred CUDA crops ord[0 .. n) take their outputs from host places 0 .. n. */
static keyer_status take_deferred(void *opaque, const int *ord, int n, keyer_error *err)
{
    kr_people_stage *ps = opaque;
    keyer_status st = KEYER_OK;
    for (int c = 0; c < n && !st; c++) {
        int crop = ord[c];
        st = kr_people_add(ps->round_kp[ps->crop_pos[crop]], ps->crop_job[crop],
                           out_points(ps) + (size_t)c * POINTS_5, out_flags(ps)[c],
                           out_segs(ps) + (size_t)c * ps->seg_cells,
                           &kr_crop_stage_buffers(ps->cs)->out_geo[c], err);
    }
    return st;
}

/* A runtime's outputs of @p n crops, read on the host; hands crop c its outputs through
 * keyer @p kp[c] and job @p job[c]. */
static keyer_status take_host(kr_people_stage *ps, keyer_runtime *rt, int n,
                              keyer_people *const *kp, const int *job, keyer_error *err)
{
    const float *pts = keyer_runtime_output_data(rt, ps->out_points);
    const float *flag = keyer_runtime_output_data(rt, ps->out_flag);
    const float *seg = keyer_runtime_output_data(rt, ps->out_seg);
    if (!pts || !flag || !seg)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "people landmarks: no output data");
    keyer_status st = KEYER_OK;
    for (int c = 0; c < n && !st; c++)
        st = kr_people_add(kp[c], job[c], pts + (size_t)c * POINTS_5, flag[c],
                           seg + (size_t)c * ps->seg_cells,
                           &kr_crop_stage_buffers(ps->cs)->geo[c], err);
    return st;
}

/* Runs the pass's CUDA crops ord[0 .. n) (kr_crops_ops::chunk) through the runtime of batch
 * 2^lg; deferred: their outputs to host places at .. at + n. */
static keyer_status run_chunk(void *opaque, const int *ord, int n, int lg, int cuda,
                              int deferred, int at, keyer_error *err)
{
    kr_people_stage *ps = opaque;
    const kr_crop_buffers *b = kr_crop_stage_buffers(ps->cs);
    keyer_people *kp[1 << KR_MAX_BATCH_LOG2];
    int job[1 << KR_MAX_BATCH_LOG2];
    if (n > 1 << KR_MAX_BATCH_LOG2)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "people landmarks: a run of %d crops",
                               n);
    for (int c = 0; c < n; c++) {
        kp[c] = ps->round_kp[ps->crop_pos[ord[c]]];
        job[c] = ps->crop_job[ord[c]];
        kr_people_job(kp[c], job[c], &b->rois[c], &b->frames[c]);
    }
    keyer_runtime *rt = NULL;
    keyer_status st = kr_crop_stage_run(ps->cs, n, lg, cuda, deferred, at, &rt, err);
    if (st)
        return st;
    if (!deferred)
        return take_host(ps, rt, n, kp, job, err);
    /* the outputs come down to their host places, read after the pass's one wait */
    size_t cells = ps->seg_cells;
    if ((st = kr_crop_stage_copy(ps->cs, out_points(ps) + (size_t)at * POINTS_5,
                                 keyer_runtime_output_data(rt, ps->out_points),
                                 (size_t)n * POINTS_5 * sizeof(float), err)) ||
        (st = kr_crop_stage_copy(ps->cs, out_flags(ps) + at,
                                 keyer_runtime_output_data(rt, ps->out_flag),
                                 (size_t)n * sizeof(float), err)))
        return st;
    return kr_crop_stage_copy(ps->cs, out_segs(ps) + (size_t)at * cells,
                              keyer_runtime_output_data(rt, ps->out_seg),
                              (size_t)n * cells * sizeof(float), err);
}

static const kr_crops_ops people_crops = {run_chunk, take_deferred};

/* The @p count crops of host item @p j (round position), exactly as keyer_people_run() runs
 * them: chunks of the keyer's batch while two or more are left (the unused items of a chunk
 * zeros), the rest one by one. */
static keyer_status run_host_jobs(kr_people_stage *ps, int j, int count, keyer_error *err)
{
    const kr_crop_buffers *b = kr_crop_stage_buffers(ps->cs);
    keyer_people *kp[1 << KR_MAX_BATCH_LOG2];
    int job[1 << KR_MAX_BATCH_LOG2];
    int done = 0;
    while (done < count) {
        int left = count - done;
        int lg = left >= 2 ? ps->host_lg : 0;
        int n = left < (1 << lg) ? left : 1 << lg;
        for (int c = 0; c < n; c++) {
            kp[c] = ps->round_kp[j];
            job[c] = done + c;
            kr_people_job(kp[c], job[c], &b->rois[c], &b->frames[c]);
        }
        keyer_runtime *rt = NULL;
        keyer_status st = kr_crop_stage_run(ps->cs, n, lg, 0, 0, 0, &rt, err);
        if (st || (st = take_host(ps, rt, n, kp, job, err)))
            return st;
        kr_rounds_note_run(kr_crop_stage_rounds(ps->cs), n, lg);
        done += n;
    }
    return KEYER_OK;
}

/* One pass: every crop in ps->jobs of the round's k positions, the CUDA items' together. */
static keyer_status run_pass(kr_people_stage *ps, kr_model_stage *ms, int k, keyer_error *err)
{
    int n = 0;
    for (int j = 0; j < k; j++) {
        if (!ps->round_kp[j] || !ps->round[j]->on_cuda)
            continue;
        for (int i = 0; i < ps->jobs[j]; i++) {
            if (n >= ps->crop_cap)
                return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                       "people landmarks: more than %d crops in a round",
                                       ps->crop_cap);
            ps->crop_pos[n] = j;
            ps->crop_job[n] = i;
            ps->crop_cuda[n] = 1;
            n++;
        }
    }
    kr_rounds *rounds = kr_crop_stage_rounds(ps->cs);
    keyer_status st = kr_rounds_crops(rounds, ms, ps->crop_cuda, n, &people_crops, ps, err);
    int host = 0;
    for (int j = 0; j < k && !st; j++)
        if (ps->round_kp[j] && !ps->round[j]->on_cuda && ps->jobs[j] > 0) {
            st = run_host_jobs(ps, j, ps->jobs[j], err);
            host = 1;
        }
    if (host && !n) /* counted once: kr_rounds_crops counted the pass with CUDA crops */
        kr_rounds_note_pass(rounds);
    return st;
}

/* ---- rounds ------------------------------------------------------------------------------- */

/* The keyer of stream @p id, made at its first frame (kr_rounds_ops::state). */
static keyer_status keyer_of(void *opaque, int id, void **out, keyer_error *err)
{
    kr_people_stage *ps = opaque;
    *out = NULL;
    if (id < 0 || id >= ps->p.max_streams)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "people: no stream %d", id);
    if (!ps->keyers[id]) {
        keyer_status st = kr_people_create_external(&ps->p.people, &ps->keyers[id], err);
        if (st)
            return keyer_error_prefix(err, "people: ");
        int side = 0, sw = 0, sh = 0;
        kr_people_grids(ps->keyers[id], &side, &sw, &sh);
        if (side != ps->side || sw != ps->seg_w || sh != ps->seg_h)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "people: the keyer's landmark model (%d, %dx%d) is not the "
                                   "stage's (%d, %dx%d)", side, sw, sh, ps->side, ps->seg_w,
                                   ps->seg_h);
    }
    *out = ps->keyers[id];
    return KEYER_OK;
}

/* Frame @p j's mask into its item: the host mask, or up into the device mask. */
static keyer_status mask_out(kr_people_stage *ps, kr_model_stage *ms, int j, keyer_error *err)
{
    kr_item *it = ps->round[j];
    if (!it->on_cuda)
        return keyer_people_mask(ps->round_kp[j], it->host.mask_frame, err);
    keyer_status st;
    /* from pageable memory: the copy has read the mask when it returns (reused next) */
    if ((st = keyer_people_mask(ps->round_kp[j], ps->mask_host, err)) ||
        (st = kr_crop_stage_copy(ps->cs, it->cuda.mask, ps->mask_host->data[0], ps->mask_bytes,
                                 err)))
        return st;
    /* refine waits for the mask on its stream */
    return kr_item_record(it, kr_model_stage_stream(ms), err);
}

/* The steps of keyer_people_run() for the round's k items (those with a keyer): every crop,
 * then the crops that lost their person, then the masks. */
static keyer_status round_steps(void *opaque, kr_model_stage *ms, kr_item *const *round,
                                void *const *states, int k, keyer_error *err)
{
    kr_people_stage *ps = opaque;
    keyer_status st = KEYER_OK;
    ps->round = round;
    for (int j = 0; j < k && !st; j++) {
        ps->round_kp[j] = states[j];
        ps->jobs[j] = 0;
        if (ps->round_kp[j])
            st = kr_people_begin(ps->round_kp[j], round[j]->src, round[j]->dets,
                                 round[j]->n_dets, &ps->jobs[j], err);
    }
    if (!st)
        st = run_pass(ps, ms, k, err);
    for (int j = 0; j < k; j++)
        ps->jobs[j] = ps->round_kp[j] && !st ? kr_people_retries(ps->round_kp[j]) : 0;
    if (!st)
        st = run_pass(ps, ms, k, err);
    for (int j = 0; j < k && !st; j++)
        if (ps->round_kp[j])
            st = mask_out(ps, ms, j, err);
    return st;
}

/* The items' masks are written whole by the rounds: nothing to clear. */
static void clear_item(kr_item *it)
{
    (void)it;
}

static void reset_keyer(void *state)
{
    keyer_people_reset(state);
}

static const kr_rounds_ops people_rounds = {"people", clear_item, keyer_of, round_steps,
                                            reset_keyer};

/* ---- set-up ------------------------------------------------------------------------------- */

/* Checks the model's input and finds its outputs as the people keyer does. */
static keyer_status check_model(void *opaque, keyer_model *model, const char *path,
                                int *width, int *height, keyer_error *err)
{
    kr_people_stage *ps = opaque;
    keyer_status st = kr_model_stage_square_image(model, "people landmarks", path, &ps->side, err);
    if (st)
        return st;
    *width = *height = ps->side;
    ps->out_points = ps->out_flag = ps->out_seg = -1;
    for (int i = 0; i < keyer_model_output_count(model); i++) {
        keyer_tensor_info o;
        if ((st = keyer_model_output_info(model, i, &o, err)))
            return st;
        size_t n = kr_model_stage_item_elements(&o);
        if (o.dtype != KEYER_DTYPE_F32)
            continue;
        if (n == POINTS_5 && ps->out_points < 0) {
            ps->out_points = i;
        } else if (n == 1 && ps->out_flag < 0) {
            ps->out_flag = i;
        } else if (o.rank == 4 && o.dims[3] == 1 && o.dims[1] >= 8 && ps->out_seg < 0) {
            ps->out_seg = i;
            ps->seg_h = o.dims[1];
            ps->seg_w = o.dims[2];
        }
    }
    if (ps->out_points < 0 || ps->out_flag < 0 || ps->out_seg < 0 || ps->seg_w < 1)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "people landmarks: %s: not a BlazePose landmark model (expected "
                               "outputs of 39 x 5 landmarks, 1 presence and a [1,H,W,1] "
                               "segmentation)", path);
    ps->seg_cells = (size_t)ps->seg_w * (size_t)ps->seg_h;
    return KEYER_OK;
}

keyer_status kr_people_stage_create(const kr_people_stage_params *p, kr_people_stage **out,
                                    keyer_error *err)
{
    *out = NULL;
    if (p->people.model < KEYER_POSE_MODEL_LITE || p->people.model > KEYER_POSE_MODEL_HEAVY ||
        p->max_streams < 1 || p->mask_w < 1 || p->mask_h < 1 || p->people.batch < 1 ||
        p->people.max_people < 1 || p->people.max_people > KEYER_PEOPLE_MAX)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "people landmarks: model %d (0..2), max_streams %d, mask %dx%d, "
                               "batch %d, max_people %d", (int)p->people.model, p->max_streams,
                               p->mask_w, p->mask_h, p->people.batch, p->people.max_people);
    kr_people_stage *ps = calloc(1, sizeof(*ps));
    if (!ps || !(ps->keyers = calloc((size_t)p->max_streams, sizeof(*ps->keyers)))) {
        free(ps);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people landmarks: out of memory");
    }
    ps->p = *p; /* the model names stay the session's (read when a stream's keyer is made) */
    kr_crop_stage_params cp = {
        .name = "people",
        .what = "people landmarks: ",
        .model_name = p->people.landmark_model ? p->people.landmark_model
                                               : model_names[p->people.model],
        .cuda_precision = KEYER_PRECISION_F32, /* the people keyer's */
        .ctx = p->ctx,
        .stats = p->stats,
        .threads = p->threads,
        .check_model = check_model,
        .rounds = &people_rounds,
        .opaque = ps,
    };
    keyer_status st = kr_crop_stage_create(&cp, &ps->cs, err);
    if (st) {
        kr_people_stage_destroy(&ps);
        return st;
    }
    *out = ps;
    return KEYER_OK;
}

void kr_people_stage_destroy(kr_people_stage **pps)
{
    if (!pps || !*pps)
        return;
    kr_people_stage *ps = *pps;
    kr_crop_stage_destroy(&ps->cs); /* its thread stops before the buffers go */
    for (int i = 0; ps->keyers && i < ps->p.max_streams; i++)
        keyer_people_destroy(&ps->keyers[i]);
    free(ps->keyers);
    keyer_frame_destroy(&ps->mask_host);
    free(ps->round_kp);
    free(ps->jobs);
    free(ps->crop_pos);
    free(ps->crop_job);
    free(ps->crop_cuda);
    free(ps);
    *pps = NULL;
}

kr_model_stage *kr_people_stage_model(kr_people_stage *ps)
{
    return kr_crop_stage_model(ps->cs);
}

const kr_rounds *kr_people_stage_rounds(const kr_people_stage *ps)
{
    return kr_crop_stage_rounds(ps->cs);
}

keyer_status kr_people_stage_connect(kr_people_stage *ps, kr_queue *next,
                                     const kr_device_fns *dev, int ordinal, int hybrid,
                                     int batch, keyer_error *err)
{
    ps->batch = batch < 1 ? 1 : batch;
    ps->host_lg = 0;
    while (ps->host_lg < KR_MAX_BATCH_LOG2 && (2 << ps->host_lg) <= ps->p.people.batch)
        ps->host_lg++;
    ps->run_cap = ps->batch > (1 << ps->host_lg) ? ps->batch : 1 << ps->host_lg;
    if (ps->run_cap > 1 << KR_MAX_BATCH_LOG2)
        ps->run_cap = 1 << KR_MAX_BATCH_LOG2;
    ps->crop_cap = ps->batch * ps->p.people.max_people;
    ps->out_cap = 2 * ps->batch;
    size_t b = (size_t)ps->batch, cc = (size_t)ps->crop_cap;
    ps->round_kp = calloc(b, sizeof(*ps->round_kp));
    ps->jobs = calloc(b, sizeof(int));
    ps->crop_pos = calloc(cc, sizeof(int));
    ps->crop_job = calloc(cc, sizeof(int));
    ps->crop_cuda = calloc(cc, sizeof(int));
    if (!ps->round_kp || !ps->jobs || !ps->crop_pos || !ps->crop_job || !ps->crop_cuda)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people landmarks: out of memory");
    kr_crop_stage_run_params run = {
        .next = next,
        .dev = dev,
        .ordinal = ordinal,
        .hybrid = hybrid,
        .batch = ps->batch,
        .crop_cap = ps->crop_cap,
        .out_cap = ps->out_cap,
        .run_cap = ps->run_cap,
        .fit = KEYER_FIT_LETTERBOX, /* the people keyer's crops: letterboxed, rgb in [0, 1] */
        .out_floats = (size_t)ps->out_cap * (POINTS_5 + 1 + ps->seg_cells),
        .dev_floats = 0,
    };
    keyer_status st = kr_crop_stage_connect(ps->cs, &run, err);
    if (st)
        return st;
    ps->mask_bytes = (size_t)ps->p.mask_w * (size_t)ps->p.mask_h * sizeof(float);
    if (dev) {
        if ((st = keyer_frame_create(&ps->mask_host, err)) ||
            (st = keyer_frame_alloc(ps->mask_host, KEYER_PIXEL_FORMAT_GRAYF32, ps->p.mask_w,
                                    ps->p.mask_h, NULL, err)))
            return keyer_error_prefix(err, "people landmarks: ");
        if ((size_t)ps->mask_host->stride[0] != (size_t)ps->p.mask_w * sizeof(float))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "people landmarks: the mask's rows are not contiguous");
    }
    return KEYER_OK;
}
