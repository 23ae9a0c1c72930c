/* The session's face-mesh stage: the crops of all faces of a batch, run in powers of two. */
#include "pipeline/mesh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"
#include "keyer/registry.h"
#include "pipeline/crop_rounds.h"
#include "vision/faces_steps.h"

#define MESH_VALUES (KEYER_FACE_MESH_POINTS * 3)

/* One crop of a round: the round's item it belongs to, and its detection (-1: tracked). */
typedef struct mesh_crop {
    int item;
    int det;
} mesh_crop;

struct kr_mesh {
    kr_mesh_params p;
    keyer_precision cuda_precision;
    int in_w, in_h;
    int points, flag;             /* output indices */
    kr_model_stage *stage;
    kr_rounds *rounds;            /* the rounds and passes (crop_rounds.h) */
    kr_queue *next;               /* NULL: the stream's reorder buffer */
    keyer_faces **faces;          /* per stream id, made at the stream's first frame */
    keyer_prepare *prep;          /* crops into a runtime's input (host or CUDA frames) */
    const kr_device_fns *dev;     /* CUDA table, or NULL */
    int ordinal;
    float *dev_crops;             /* hybrid: the crops on the device before they come down */
    int batch;                    /* items per batch, crops per run at most */
    int cap;                      /* crops per round at most */
    mesh_crop *crops;             /* cap */
    keyer_roi *rois;              /* cap */
    keyer_prepare_geometry *geo;  /* cap */
    float *pts;                   /* cap x MESH_VALUES */
    float *logits;                /* cap */
    int *cuda;                    /* cap: whether a crop is of a CUDA item */
    const keyer_frame **frames;   /* batch: one run's frames */
    keyer_roi *run_rois;          /* batch */
    keyer_prepare_geometry *run_geo; /* batch */
    int out_cap;                  /* host places of the CUDA runs' outputs */
    float *run_out;               /* out_cap x (MESH_VALUES + 1): landmarks, then presences
                                   * (page-locked on CUDA) */
    int run_out_pinned;           /* run_out came from dev->host_alloc */
    kr_item *const *round;        /* the round being run (the rounds' array) */
    keyer_faces **round_fa;       /* batch: its analysers (NULL: not run) */
};

/* ---- running crops ------------------------------------------------------------------------ */

/* The deferred CUDA crops ord[0 .. n) take their outputs from host places 0 .. n. */
static keyer_status take_deferred(void *opaque, const int *ord, int n, keyer_error *err)
{
    (void)err;
    kr_mesh *m = opaque;
    const float *logits = m->run_out + (size_t)m->out_cap * MESH_VALUES;
    for (int c = 0; c < n; c++) {
        memcpy(m->pts + (size_t)ord[c] * MESH_VALUES, m->run_out + (size_t)c * MESH_VALUES,
               MESH_VALUES * sizeof(float));
        m->logits[ord[c]] = logits[c];
    }
    return KEYER_OK;
}

/* Runs crops ord[0 .. n) of the pass (kr_crops_ops::chunk) through the runtime of batch
 * 2^lg; outputs and geometry to the crops' places. */
static keyer_status run_chunk(void *opaque, const int *ord, int n, int lg, int cuda,
                              int deferred, int at, keyer_error *err)
{
    kr_mesh *m = opaque;
    kr_model_stage *ms = m->stage;
    void *stream = kr_model_stage_stream(ms);
    keyer_runtime *rt = NULL;
    keyer_status st = kr_model_stage_runtime(ms, deferred, lg, &rt, err);
    if (st)
        return st;
    size_t in_bytes = ((size_t)1 << lg) * (size_t)m->in_w * (size_t)m->in_h * 3 * sizeof(float);
    if (keyer_runtime_input_bytes(rt, 0) != in_bytes)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "face mesh: the runtime of batch %d takes %zu input bytes, not "
                               "%zu", 1 << lg, keyer_runtime_input_bytes(rt, 0), in_bytes);
    for (int c = 0; c < n; c++) {
        m->frames[c] = m->round[m->crops[ord[c]].item]->src;
        m->run_rois[c] = m->rois[ord[c]];
    }
    if (deferred) {
        /* crops straight into the runtime's input (its padding keeps what it held: those
         * outputs are not read); only the outputs come down, to their host places, read
         * after the pass's one wait */
        float *pts_host = m->run_out + (size_t)at * MESH_VALUES;
        float *logits_host = m->run_out + (size_t)m->out_cap * MESH_VALUES + at;
        if ((st = keyer_prepare_run(m->prep, m->frames, m->run_rois, n,
                                    keyer_runtime_input_data(rt, 0), m->run_geo, err)) ||
            (st = keyer_runtime_run(rt, err)) ||
            (st = m->dev->copy(m->ordinal, pts_host, keyer_runtime_output_data(rt, m->points),
                               (size_t)n * MESH_VALUES * sizeof(float), stream, err)) ||
            (st = m->dev->copy(m->ordinal, logits_host, keyer_runtime_output_data(rt, m->flag),
                               (size_t)n * sizeof(float), stream, err)))
            return st;
        for (int c = 0; c < n; c++)
            m->geo[ord[c]] = m->run_geo[c];
        return KEYER_OK;
    }
    if (cuda) {
        /* CUDA items, CPU model: cropped on the GPU, the crops come down */
        if ((st = keyer_prepare_run(m->prep, m->frames, m->run_rois, n, m->dev_crops,
                                    m->run_geo, err)) ||
            (st = m->dev->copy(m->ordinal, keyer_runtime_input_data(rt, 0), m->dev_crops,
                               in_bytes, stream, err)) ||
            (st = m->dev->stream_sync(m->ordinal, stream, err)))
            return st;
    } else if ((st = keyer_prepare_run(m->prep, m->frames, m->run_rois, n,
                                       keyer_runtime_input_data(rt, 0), m->run_geo, err))) {
        return st;
    }
    if ((st = keyer_runtime_run(rt, err)))
        return st;
    const float *pts = keyer_runtime_output_data(rt, m->points);
    const float *logits = keyer_runtime_output_data(rt, m->flag);
    if (!pts || !logits)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "face mesh: no output data");
    for (int c = 0; c < n; c++) {
        memcpy(m->pts + (size_t)ord[c] * MESH_VALUES, pts + (size_t)c * MESH_VALUES,
               MESH_VALUES * sizeof(float));
        m->logits[ord[c]] = logits[c];
        m->geo[ord[c]] = m->run_geo[c];
    }
    return KEYER_OK;
}

static const kr_crops_ops mesh_crops = {run_chunk, take_deferred};

/* Runs the round's crops 0 .. n - 1 (one pass). */
static keyer_status run_crops(kr_mesh *m, kr_model_stage *ms, int n, keyer_error *err)
{
    for (int c = 0; c < n; c++)
        m->cuda[c] = m->round[m->crops[c].item]->on_cuda;
    return kr_rounds_crops(m->rounds, ms, m->cuda, n, &mesh_crops, m, err);
}

/* ---- rounds ------------------------------------------------------------------------------- */

/* The analyser of stream @p id, made at its first frame (kr_rounds_ops::state). */
static keyer_status analyser(void *opaque, int id, void **out, keyer_error *err)
{
    kr_mesh *m = opaque;
    *out = NULL;
    if (id < 0 || id >= m->p.max_streams)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "face mesh: no stream %d", id);
    if (!m->faces[id]) {
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.max_faces = m->p.max_faces;
        fp.detect_interval = m->p.detect_interval;
        fp.threads = 1;
        fp.logger = m->p.ctx->logger;
        keyer_status st = kr_faces_create_external(&fp, &m->faces[id], err);
        if (st)
            return keyer_error_prefix(err, "face mesh: ");
    }
    *out = m->faces[id];
    return KEYER_OK;
}

/* Copies an item's faces into it (its room grows to the most faces a frame had). */
static keyer_status store_faces(kr_item *it, const keyer_face *faces, int n, keyer_error *err)
{
    if (n > it->faces_cap) {
        keyer_face *f = realloc(it->faces, sizeof(keyer_face) * (size_t)n);
        if (!f)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "face mesh: out of memory");
        it->faces = f;
        it->faces_cap = n;
    }
    if (n)
        memcpy(it->faces, faces, sizeof(keyer_face) * (size_t)n);
    it->n_faces = n;
    return KEYER_OK;
}

/* The steps of keyer_faces_run() for the round's k items (those with an analyser). */
static keyer_status round_steps(void *opaque, kr_model_stage *ms, kr_item *const *round,
                                void *const *states, int k, keyer_error *err)
{
    kr_mesh *m = opaque;
    keyer_status st;
    m->round = round;
    for (int j = 0; j < k; j++)
        m->round_fa[j] = states[j];
    /* 1. the faces followed, by their landmarks */
    int n = 0;
    for (int j = 0; j < k; j++) {
        if (!m->round_fa[j])
            continue;
        const keyer_frame *f = m->round[j]->src;
        int t = kr_faces_begin(m->round_fa[j], f->width, f->height, m->rois + n);
        for (int c = n; c < n + t; c++)
            m->crops[c] = (mesh_crop){j, -1};
        n += t;
    }
    if (n && (st = run_crops(m, ms, n, err)))
        return st;
    for (int c = 0; c < n; c++)
        kr_faces_add_tracked(m->round_fa[m->crops[c].item], &m->rois[c],
                             m->pts + (size_t)c * MESH_VALUES, m->logits[c], &m->geo[c]);
    /* 2. the detections, where keyer_faces_run() would detect */
    n = 0;
    for (int j = 0; j < k; j++) {
        kr_item *it = m->round[j];
        int index[KR_FACES_MAX_CROPS];
        if (!m->round_fa[j] || !kr_faces_wants_detection(m->round_fa[j]))
            continue;
        int nd = it->n_dets < KR_FACES_MAX_CROPS ? it->n_dets : KR_FACES_MAX_CROPS;
        int t = kr_faces_detection_rois(m->round_fa[j], it->dets, nd, m->rois + n, index);
        for (int c = 0; c < t; c++)
            m->crops[n + c] = (mesh_crop){j, index[c]};
        n += t;
    }
    if (n && (st = run_crops(m, ms, n, err)))
        return st;
    for (int c = 0; c < n; c++) {
        const mesh_crop *cr = &m->crops[c];
        kr_faces_add_detected(m->round_fa[cr->item], &m->round[cr->item]->dets[cr->det],
                              &m->rois[c], m->pts + (size_t)c * MESH_VALUES, m->logits[c],
                              &m->geo[c]);
    }
    /* 3. ids, and the faces into the items */
    for (int j = 0; j < k; j++) {
        const keyer_face *faces = NULL;
        int count = 0;
        if (!m->round_fa[j])
            continue;
        if ((st = kr_faces_end(m->round_fa[j], &faces, &count, err)) ||
            (st = store_faces(m->round[j], faces, count, err)))
            return st;
    }
    return KEYER_OK;
}

static void clear_item(kr_item *it)
{
    it->n_faces = 0;
}

static void reset_analyser(void *state)
{
    keyer_faces_reset(state);
}

static const kr_rounds_ops mesh_rounds = {"mesh", clear_item, analyser, round_steps,
                                          reset_analyser};

/* The batch in rounds of at most one frame per stream, each stream's frames in order. */
static void run_batch(void *opaque, kr_model_stage *ms, kr_item **items, int n)
{
    kr_rounds_run_batch(((kr_mesh *)opaque)->rounds, ms, items, n);
}

/* Keying: on to the inference; passthrough: to the writer, which restores the order. */
static int forward(void *opaque, kr_item *it)
{
    return kr_model_stage_pass_on(((kr_mesh *)opaque)->next, it);
}

/* The crops are made by the batch op: no per-item input, no per-run outputs callbacks. */
static const kr_model_stage_ops mesh_ops = {NULL, NULL, NULL, forward, run_batch};

/* ---- set-up ------------------------------------------------------------------------------- */

/* Checks the model's input and finds its landmark and presence outputs (the first output of
 * 468 x 3 values and the first of 1, as the face analyser finds them). */
static keyer_status check_model(kr_mesh *m, keyer_model *model, const char *path,
                                keyer_error *err)
{
    keyer_tensor_info in;
    keyer_status st = keyer_model_input_info(model, 0, &in, err);
    if (st)
        return st;
    if (keyer_model_input_count(model) != 1 || in.rank != 4 || in.dtype != KEYER_DTYPE_F32 ||
        in.dims[1] < 1 || in.dims[2] < 1 || in.dims[3] != 3)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "face mesh: %s: the input is not one float [1,H,W,3] image", path);
    m->in_h = in.dims[1];
    m->in_w = in.dims[2];
    m->points = m->flag = -1;
    for (int i = 0; i < keyer_model_output_count(model); i++) {
        keyer_tensor_info o;
        if ((st = keyer_model_output_info(model, i, &o, err)))
            return st;
        size_t n = kr_model_stage_item_elements(&o);
        if (o.dtype != KEYER_DTYPE_F32)
            continue;
        if (m->points < 0 && n == MESH_VALUES)
            m->points = i;
        else if (m->flag < 0 && n == 1)
            m->flag = i;
    }
    if (m->points < 0 || m->flag < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "face mesh: %s: expected an output of %d x 3 landmarks and a "
                               "1-element presence score", path, KEYER_FACE_MESH_POINTS);
    return KEYER_OK;
}

keyer_status kr_mesh_create(const kr_mesh_params *p, kr_mesh **out, keyer_error *err)
{
    *out = NULL;
    if (p->max_faces < 1 || p->max_faces > KEYER_FACES_MAX || p->detect_interval < 0 ||
        p->max_streams < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "face mesh: max_faces %d (1..%d), detect_interval %d (>= 0)",
                               p->max_faces, KEYER_FACES_MAX, p->detect_interval);
    kr_mesh *m = calloc(1, sizeof(*m));
    if (!m || !(m->faces = calloc((size_t)p->max_streams, sizeof(*m->faces)))) {
        free(m);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "face mesh: out of memory");
    }
    m->p = *p;
    m->cuda_precision = keyer_registry_precision(keyer_registry_find("face-mesh"), p->precision,
                                                 1);
    char path[4096];
    keyer_model *model = NULL;
    keyer_status st = keyer_registry_resolve("face-mesh", path, sizeof(path), err);
    if (!st)
        st = keyer_model_load_file(path, &model, err);
    if (st) {
        keyer_error_prefix(err, "face mesh: ");
        goto fail;
    }
    if ((st = check_model(m, model, path, err)))
        goto fail;
    kr_model_stage_params mp = {
        .name = "mesh",
        .model_name = "face-mesh",
        .what = "face mesh: ",
        /* slot -1: no input made by prepare (the batch op crops the faces) */
        .input = {.slot = -1, .width = m->in_w, .height = m->in_h, .scale = 1.0f,
                  .what = "face mesh: "},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = NULL,
        .threads = p->threads,
        .fail_cuda_at = -1,
        .cuda_precision = m->cuda_precision,
        .ops = &mesh_ops,
        .opaque = m,
    };
    if ((st = kr_model_stage_create(&mp, &model, &m->stage, err)))
        goto fail;
    *out = m;
    return KEYER_OK;
fail:
    keyer_model_destroy(&model);
    kr_mesh_destroy(&m);
    return st;
}

void kr_mesh_destroy(kr_mesh **pm)
{
    if (!pm || !*pm)
        return;
    kr_mesh *m = *pm;
    kr_model_stage_destroy(&m->stage); /* its thread stops before the buffers go */
    kr_rounds_destroy(&m->rounds);
    for (int i = 0; m->faces && i < m->p.max_streams; i++)
        keyer_faces_destroy(&m->faces[i]);
    free(m->faces);
    keyer_prepare_destroy(&m->prep);
    if (m->dev)
        m->dev->free(m->ordinal, m->dev_crops);
    free(m->crops);
    free(m->rois);
    free(m->geo);
    free(m->pts);
    free(m->logits);
    free(m->cuda);
    free(m->frames);
    free(m->run_rois);
    free(m->run_geo);
    if (m->run_out_pinned)
        m->dev->host_free(m->ordinal, m->run_out);
    else
        free(m->run_out);
    free(m->round_fa);
    free(m);
    *pm = NULL;
}

const kr_rounds *kr_mesh_rounds(const kr_mesh *m)
{
    return m->rounds;
}

kr_model_stage *kr_mesh_stage(kr_mesh *m)
{
    return m->stage;
}

keyer_status kr_mesh_connect(kr_mesh *m, kr_queue *next, const kr_device_fns *dev, int ordinal,
                             int hybrid, int batch, keyer_error *err)
{
    m->next = next;
    m->dev = dev;
    m->ordinal = ordinal;
    m->batch = batch < 1 ? 1 : batch;
    int per_item = m->p.max_faces > KEYER_SESSION_MAX_DETECTIONS ? m->p.max_faces
                                                                 : KEYER_SESSION_MAX_DETECTIONS;
    m->cap = m->batch * per_item;
    size_t cap = (size_t)m->cap, b = (size_t)m->batch;
    m->crops = calloc(cap, sizeof(*m->crops));
    m->rois = calloc(cap, sizeof(*m->rois));
    m->geo = calloc(cap, sizeof(*m->geo));
    m->pts = calloc(cap * MESH_VALUES, sizeof(float));
    m->logits = calloc(cap, sizeof(float));
    m->cuda = calloc(cap, sizeof(int));
    m->frames = calloc(b, sizeof(*m->frames));
    m->run_rois = calloc(b, sizeof(*m->run_rois));
    m->run_geo = calloc(b, sizeof(*m->run_geo));
    m->round_fa = calloc(b, sizeof(*m->round_fa));
    /* the CUDA runs' outputs of up to 4 batches of crops between two waits */
    m->out_cap = 4 * m->batch < m->cap ? 4 * m->batch : m->cap;
    size_t out_bytes = (size_t)m->out_cap * (MESH_VALUES + 1) * sizeof(float);
    keyer_status st;
    if (dev && dev->host_alloc) {
        if ((st = dev->host_alloc(ordinal, out_bytes, (void **)&m->run_out, err)))
            return keyer_error_prefix(err, "face mesh: ");
        m->run_out_pinned = 1;
    } else {
        m->run_out = calloc(1, out_bytes);
    }
    if (!m->crops || !m->rois || !m->geo || !m->pts || !m->logits || !m->cuda || !m->frames ||
        !m->run_rois || !m->run_geo || !m->run_out || !m->round_fa)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "face mesh: out of memory");
    if ((st = kr_rounds_create(&mesh_rounds, m, m->batch, m->cap, m->out_cap, &m->rounds, err)))
        return keyer_error_prefix(err, "face mesh: ");
    /* the face analyser's crops: stretched, rgb in [0, 1] */
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = m->in_w;
    pp.height = m->in_h;
    pp.max_batch = m->batch;
    pp.fit = KEYER_FIT_STRETCH;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    pp.threads = m->p.threads;
    pp.stream = dev ? kr_model_stage_stream(m->stage) : NULL;
    st = keyer_prepare_create(&pp, &m->prep, err);
    if (st)
        return keyer_error_prefix(err, "face mesh: ");
    if (dev && hybrid &&
        (st = dev->alloc(ordinal, b * (size_t)m->in_w * (size_t)m->in_h * 3 * sizeof(float),
                         (void **)&m->dev_crops, err)))
        return keyer_error_prefix(err, "face mesh: ");
    return KEYER_OK;
}
