/* The session's people stage: every person's crop of a batch's frames, across streams. */
#include "pipeline/people_stage.h"

#include <stdlib.h>
#include <string.h>

#include "keyer/registry.h"
#include "vision/people_steps.h"

#define POINTS_5 (39 * 5) /* the model's landmarks: 33 + 2 auxiliary + 4 unused, x y z v p */

static const char *const model_names[] = {"pose-lite", "pose-full", "pose-heavy"};

struct kr_people_stage {
    kr_people_stage_params p;
    int side;                     /* the model's input (square) */
    int seg_w, seg_h;
    size_t seg_cells;
    int out_points, out_flag, out_seg; /* output indices */
    kr_model_stage *stage;
    kr_rounds *rounds;
    kr_queue *next;
    keyer_people **keyers;        /* per stream id, made at the stream's first frame */
    keyer_prepare *prep;          /* crops into a runtime's input (host or CUDA frames) */
    const kr_device_fns *dev;     /* CUDA table, or NULL */
    int ordinal;
    float *dev_crops;             /* hybrid: the crops on the device before they come down */
    int batch;                    /* items per batch */
    int host_lg;                  /* log2 of the keyers' batch: host crops as they run them */
    int run_cap;                  /* crops per run at most */
    int crop_cap;                 /* crops per pass at most */
    int out_cap;                  /* deferred crops between two waits at most */
    float *run_out;               /* out_cap x (points, presence, segmentation), page-locked
                                   * on CUDA: the landmarks first, then presences, then masks */
    int run_out_pinned;
    keyer_prepare_geometry *geo;  /* out_cap: the deferred crops' geometry, by host place */
    const keyer_frame **frames;   /* run_cap: one run's frames */
    keyer_roi *run_rois;          /* run_cap */
    keyer_prepare_geometry *run_geo; /* run_cap */
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
    return ps->run_out;
}

static float *out_flags(const kr_people_stage *ps)
{
    return ps->run_out + (size_t)ps->out_cap * POINTS_5;
}

static float *out_segs(const kr_people_stage *ps)
{
    return ps->run_out + (size_t)ps->out_cap * (POINTS_5 + 1);
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
                           out_segs(ps) + (size_t)c * ps->seg_cells, &ps->geo[c], err);
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
                           seg + (size_t)c * ps->seg_cells, &ps->run_geo[c], err);
    return st;
}

/* The runtime of batch 2^lg on CUDA (@p cuda) or the CPU, checked against the crops' size. */
static keyer_status runtime(kr_people_stage *ps, int cuda, int lg, keyer_runtime **rt,
                            size_t *in_bytes, keyer_error *err)
{
    keyer_status st = kr_model_stage_runtime(ps->stage, cuda, lg, rt, err);
    if (st)
        return st;
    *in_bytes = ((size_t)1 << lg) * (size_t)ps->side * (size_t)ps->side * 3 * sizeof(float);
    if (keyer_runtime_input_bytes(*rt, 0) != *in_bytes)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "people landmarks: the runtime of batch %d takes %zu input "
                               "bytes, not %zu", 1 << lg, keyer_runtime_input_bytes(*rt, 0),
                               *in_bytes);
    return KEYER_OK;
}

/* Runs the pass's CUDA crops ord[0 .. n) (kr_crops_ops::chunk) through the runtime of batch
 * 2^lg; deferred: their outputs to host places at .. at + n. */
static keyer_status run_chunk(void *opaque, const int *ord, int n, int lg, int cuda,
                              int deferred, int at, keyer_error *err)
{
    kr_people_stage *ps = opaque;
    void *stream = kr_model_stage_stream(ps->stage);
    keyer_runtime *rt = NULL;
    size_t in_bytes = 0;
    keyer_status st = runtime(ps, deferred, lg, &rt, &in_bytes, err);
    if (st)
        return st;
    keyer_people *kp[1 << KR_MAX_BATCH_LOG2];
    int job[1 << KR_MAX_BATCH_LOG2];
    for (int c = 0; c < n; c++) {
        kp[c] = ps->round_kp[ps->crop_pos[ord[c]]];
        job[c] = ps->crop_job[ord[c]];
        kr_people_job(kp[c], job[c], &ps->run_rois[c], &ps->frames[c]);
    }
    if (deferred) {
        /* crops straight into the runtime's input (its padding keeps what it held: those
         * outputs are not read); the outputs come down to their host places, read after the
         * pass's one wait */
        size_t cells = ps->seg_cells;
        if ((st = keyer_prepare_run(ps->prep, ps->frames, ps->run_rois, n,
                                    keyer_runtime_input_data(rt, 0), ps->geo + at, err)) ||
            (st = keyer_runtime_run(rt, err)) ||
            (st = ps->dev->copy(ps->ordinal, out_points(ps) + (size_t)at * POINTS_5,
                                keyer_runtime_output_data(rt, ps->out_points),
                                (size_t)n * POINTS_5 * sizeof(float), stream, err)) ||
            (st = ps->dev->copy(ps->ordinal, out_flags(ps) + at,
                                keyer_runtime_output_data(rt, ps->out_flag),
                                (size_t)n * sizeof(float), stream, err)))
            return st;
        return ps->dev->copy(ps->ordinal, out_segs(ps) + (size_t)at * cells,
                             keyer_runtime_output_data(rt, ps->out_seg),
                             (size_t)n * cells * sizeof(float), stream, err);
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
    return take_host(ps, rt, n, kp, job, err);
}

static const kr_crops_ops people_crops = {run_chunk, take_deferred};

/* The @p count crops of host item @p j (round position), exactly as keyer_people_run() runs
 * them: chunks of the keyer's batch while two or more are left (the unused items of a chunk
 * zeros), the rest one by one. */
static keyer_status run_host_jobs(kr_people_stage *ps, int j, int count, keyer_error *err)
{
    keyer_people *kp[1 << KR_MAX_BATCH_LOG2];
    int job[1 << KR_MAX_BATCH_LOG2];
    int done = 0;
    while (done < count) {
        int left = count - done;
        int lg = left >= 2 ? ps->host_lg : 0;
        int n = left < (1 << lg) ? left : 1 << lg;
        keyer_runtime *rt = NULL;
        size_t in_bytes = 0;
        keyer_status st = runtime(ps, 0, lg, &rt, &in_bytes, err);
        if (st)
            return st;
        for (int c = 0; c < n; c++) {
            kp[c] = ps->round_kp[j];
            job[c] = done + c;
            kr_people_job(kp[c], job[c], &ps->run_rois[c], &ps->frames[c]);
        }
        float *in = keyer_runtime_input_data(rt, 0);
        if (n < (1 << lg))
            memset(in, 0, in_bytes);
        if ((st = keyer_prepare_run(ps->prep, ps->frames, ps->run_rois, n, in, ps->run_geo,
                                    err)) ||
            (st = keyer_runtime_run(rt, err)) || (st = take_host(ps, rt, n, kp, job, err)))
            return st;
        kr_rounds_note_run(ps->rounds, n, lg);
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
    keyer_status st = kr_rounds_crops(ps->rounds, ms, ps->crop_cuda, n, &people_crops, ps, err);
    int host = 0;
    for (int j = 0; j < k && !st; j++)
        if (ps->round_kp[j] && !ps->round[j]->on_cuda && ps->jobs[j] > 0) {
            st = run_host_jobs(ps, j, ps->jobs[j], err);
            host = 1;
        }
    if (host && !n) /* counted once: kr_rounds_crops counted the pass with CUDA crops */
        kr_rounds_note_pass(ps->rounds);
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
    void *stream = kr_model_stage_stream(ms);
    keyer_status st;
    /* from pageable memory: the copy has read the mask when it returns (reused next) */
    if ((st = keyer_people_mask(ps->round_kp[j], ps->mask_host, err)) ||
        (st = ps->dev->copy(ps->ordinal, it->cuda.mask, ps->mask_host->data[0], ps->mask_bytes,
                            stream, err)))
        return st;
    return kr_item_record(it, stream, err); /* refine waits for the mask on its stream */
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

static void run_batch(void *opaque, kr_model_stage *ms, kr_item **items, int n)
{
    kr_rounds_run_batch(((kr_people_stage *)opaque)->rounds, ms, items, n);
}

static int forward(void *opaque, kr_item *it)
{
    return kr_model_stage_pass_on(((kr_people_stage *)opaque)->next, it);
}

static const kr_model_stage_ops people_ops = {NULL, NULL, NULL, forward, run_batch};

/* ---- set-up ------------------------------------------------------------------------------- */

/* Checks the model's input and finds its outputs as the people keyer does. */
static keyer_status check_model(kr_people_stage *ps, keyer_model *model, const char *path,
                                keyer_error *err)
{
    keyer_status st = kr_model_stage_square_image(model, "people landmarks", path, &ps->side, err);
    if (st)
        return st;
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
    const char *name = p->people.landmark_model ? p->people.landmark_model
                                                : model_names[p->people.model];
    char path[4096];
    keyer_model *model = NULL;
    keyer_status st = keyer_registry_resolve(name, path, sizeof(path), err);
    if (!st)
        st = keyer_model_load_file(path, &model, err);
    if (st) {
        keyer_error_prefix(err, "people landmarks: ");
        goto fail;
    }
    if ((st = check_model(ps, model, path, err)))
        goto fail;
    kr_model_stage_params mp = {
        .name = "people",
        .model_name = name,
        .what = "people landmarks: ",
        /* slot -1: no input made by prepare (the batch op crops the people) */
        .input = {.slot = -1, .width = ps->side, .height = ps->side, .scale = 1.0f,
                  .what = "people landmarks: "},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = NULL,
        .threads = p->threads,
        .fail_cuda_at = -1,
        .cuda_precision = KEYER_PRECISION_F32, /* the people keyer's */
        .ops = &people_ops,
        .opaque = ps,
    };
    if ((st = kr_model_stage_create(&mp, &model, &ps->stage, err)))
        goto fail;
    *out = ps;
    return KEYER_OK;
fail:
    keyer_model_destroy(&model);
    kr_people_stage_destroy(&ps);
    return st;
}

void kr_people_stage_destroy(kr_people_stage **pps)
{
    if (!pps || !*pps)
        return;
    kr_people_stage *ps = *pps;
    kr_model_stage_destroy(&ps->stage); /* its thread stops before the buffers go */
    kr_rounds_destroy(&ps->rounds);
    for (int i = 0; ps->keyers && i < ps->p.max_streams; i++)
        keyer_people_destroy(&ps->keyers[i]);
    free(ps->keyers);
    keyer_prepare_destroy(&ps->prep);
    if (ps->dev)
        ps->dev->free(ps->ordinal, ps->dev_crops);
    if (ps->run_out_pinned)
        ps->dev->host_free(ps->ordinal, ps->run_out);
    else
        free(ps->run_out);
    keyer_frame_destroy(&ps->mask_host);
    free(ps->geo);
    free(ps->frames);
    free(ps->run_rois);
    free(ps->run_geo);
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
    return ps->stage;
}

const kr_rounds *kr_people_stage_rounds(const kr_people_stage *ps)
{
    return ps->rounds;
}

keyer_status kr_people_stage_connect(kr_people_stage *ps, kr_queue *next,
                                     const kr_device_fns *dev, int ordinal, int hybrid,
                                     int batch, keyer_error *err)
{
    ps->next = next;
    ps->dev = dev;
    ps->ordinal = ordinal;
    ps->batch = batch < 1 ? 1 : batch;
    ps->host_lg = 0;
    while (ps->host_lg < KR_MAX_BATCH_LOG2 && (2 << ps->host_lg) <= ps->p.people.batch)
        ps->host_lg++;
    ps->run_cap = ps->batch > (1 << ps->host_lg) ? ps->batch : 1 << ps->host_lg;
    if (ps->run_cap > 1 << KR_MAX_BATCH_LOG2)
        ps->run_cap = 1 << KR_MAX_BATCH_LOG2;
    ps->crop_cap = ps->batch * ps->p.people.max_people;
    ps->out_cap = 2 * ps->batch;
    size_t b = (size_t)ps->batch, rc = (size_t)ps->run_cap, cc = (size_t)ps->crop_cap;
    size_t out_bytes = (size_t)ps->out_cap * (POINTS_5 + 1 + ps->seg_cells) * sizeof(float);
    keyer_status st;
    if (dev && dev->host_alloc) {
        /* page-locked: the outputs come down without the host waiting per run */
        if ((st = dev->host_alloc(ordinal, out_bytes, (void **)&ps->run_out, err)))
            return keyer_error_prefix(err, "people landmarks: ");
        ps->run_out_pinned = 1;
    } else {
        ps->run_out = malloc(out_bytes);
    }
    ps->geo = calloc((size_t)ps->out_cap, sizeof(*ps->geo));
    ps->frames = calloc(rc, sizeof(*ps->frames));
    ps->run_rois = calloc(rc, sizeof(*ps->run_rois));
    ps->run_geo = calloc(rc, sizeof(*ps->run_geo));
    ps->round_kp = calloc(b, sizeof(*ps->round_kp));
    ps->jobs = calloc(b, sizeof(int));
    ps->crop_pos = calloc(cc, sizeof(int));
    ps->crop_job = calloc(cc, sizeof(int));
    ps->crop_cuda = calloc(cc, sizeof(int));
    if (!ps->run_out || !ps->geo || !ps->frames || !ps->run_rois || !ps->run_geo ||
        !ps->round_kp || !ps->jobs || !ps->crop_pos || !ps->crop_job || !ps->crop_cuda)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people landmarks: out of memory");
    if ((st = kr_rounds_create(&people_rounds, ps, ps->batch, ps->crop_cap, ps->out_cap,
                               &ps->rounds, err)))
        return keyer_error_prefix(err, "people landmarks: ");
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
    /* the people keyer's crops: letterboxed, rgb in [0, 1] */
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = ps->side;
    pp.height = ps->side;
    pp.max_batch = ps->run_cap;
    pp.fit = KEYER_FIT_LETTERBOX;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    pp.threads = ps->p.threads;
    pp.stream = dev ? kr_model_stage_stream(ps->stage) : NULL;
    if ((st = keyer_prepare_create(&pp, &ps->prep, err)))
        return keyer_error_prefix(err, "people landmarks: ");
    if (dev && hybrid &&
        (st = dev->alloc(ordinal, b * (size_t)ps->side * (size_t)ps->side * 3 * sizeof(float),
                         (void **)&ps->dev_crops, err)))
        return keyer_error_prefix(err, "people landmarks: ");
    return KEYER_OK;
}
