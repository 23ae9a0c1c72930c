/* The session's face-mesh stage: the crops of all faces of a batch, run in powers of two. */
#include "pipeline/mesh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"
#include "keyer/registry.h"
#include "pipeline/crop_stage.h"
#include "vision/faces_steps.h"

#define MESH_VALUES (KEYER_FACE_MESH_POINTS * 3)

/* One crop of a round: the round's item it belongs to, and its detection (-1: tracked). */
typedef struct mesh_crop {
    int item;
    int det;
} mesh_crop;

struct kr_mesh {
    kr_mesh_params p;
    int points, flag;             /* output indices */
    kr_crop_stage *cs;            /* model stage, rounds, crops, buffers (crop_stage.h) */
    keyer_faces **faces;          /* per stream id, made at the stream's first frame */
    int batch;                    /* items per batch, crops per run at most */
    int cap;                      /* crops per round at most */
    mesh_crop *crops;             /* cap */
    keyer_roi *rois;              /* cap */
    keyer_prepare_geometry *geo;  /* cap */
    float *pts;                   /* cap x MESH_VALUES */
    float *logits;                /* cap */
    int *cuda;                    /* cap: whether a crop is of a CUDA item */
    int out_cap;                  /* host places of the CUDA runs' outputs: the crop stage's
                                   * out holds out_cap x MESH_VALUES landmarks, then out_cap
                                   * presences */
    kr_item *const *round;        /* the round being run (the rounds' array) */
    keyer_faces **round_fa;       /* batch: its analysers (NULL: not run) */
};

/* ---- running crops ------------------------------------------------------------------------ */

/* The deferred CUDA crops ord[0 .. n) take their outputs from host places 0 .. n. */
static keyer_status take_deferred(void *opaque, const int *ord, int n, keyer_error *err)
{
    (void)err;
    kr_mesh *m = opaque;
    const kr_crop_buffers *b = kr_crop_stage_buffers(m->cs);
    const float *logits = b->out + (size_t)m->out_cap * MESH_VALUES;
    for (int c = 0; c < n; c++) {
        memcpy(m->pts + (size_t)ord[c] * MESH_VALUES, b->out + (size_t)c * MESH_VALUES,
               MESH_VALUES * sizeof(float));
        m->logits[ord[c]] = logits[c];
        m->geo[ord[c]] = b->out_geo[c];
    }
    return KEYER_OK;
}

/* Runs crops ord[0 .. n) of the pass (kr_crops_ops::chunk) through the runtime of batch
 * 2^lg; outputs and geometry to the crops' places (deferred: the outputs to host places
 * at .. at + n, read by take_deferred after the pass's one wait). */
static keyer_status run_chunk(void *opaque, const int *ord, int n, int lg, int cuda,
                              int deferred, int at, keyer_error *err)
{
    kr_mesh *m = opaque;
    const kr_crop_buffers *b = kr_crop_stage_buffers(m->cs);
    for (int c = 0; c < n; c++) {
        b->frames[c] = m->round[m->crops[ord[c]].item]->src;
        b->rois[c] = m->rois[ord[c]];
    }
    keyer_runtime *rt = NULL;
    keyer_status st = kr_crop_stage_run(m->cs, n, lg, cuda, deferred, at, &rt, err);
    if (st)
        return st;
    if (deferred) {
        /* only the landmarks and presences come down */
        float *pts_host = b->out + (size_t)at * MESH_VALUES;
        float *logits_host = b->out + (size_t)m->out_cap * MESH_VALUES + at;
        if ((st = kr_crop_stage_copy(m->cs, pts_host, keyer_runtime_output_data(rt, m->points),
                                     (size_t)n * MESH_VALUES * sizeof(float), err)))
            return st;
        return kr_crop_stage_copy(m->cs, logits_host, keyer_runtime_output_data(rt, m->flag),
                                  (size_t)n * sizeof(float), err);
    }
    const float *pts = keyer_runtime_output_data(rt, m->points);
    const float *logits = keyer_runtime_output_data(rt, m->flag);
    if (!pts || !logits)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "face mesh: no output data");
    for (int c = 0; c < n; c++) {
        memcpy(m->pts + (size_t)ord[c] * MESH_VALUES, pts + (size_t)c * MESH_VALUES,
               MESH_VALUES * sizeof(float));
        m->logits[ord[c]] = logits[c];
        m->geo[ord[c]] = b->geo[c];
    }
    return KEYER_OK;
}

static const kr_crops_ops mesh_crops = {run_chunk, take_deferred};

/* Runs the round's crops 0 .. n - 1 (one pass). */
static keyer_status run_crops(kr_mesh *m, kr_model_stage *ms, int n, keyer_error *err)
{
    for (int c = 0; c < n; c++)
        m->cuda[c] = m->round[m->crops[c].item]->on_cuda;
    return kr_rounds_crops(kr_crop_stage_rounds(m->cs), ms, m->cuda, n, &mesh_crops, m, err);
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

/* ---- set-up ------------------------------------------------------------------------------- */

/* Checks the model's input and finds its landmark and presence outputs (the first output of
 * 468 x 3 values and the first of 1, as the face analyser finds them). */
static keyer_status check_model(void *opaque, keyer_model *model, const char *path,
                                int *width, int *height, keyer_error *err)
{
    kr_mesh *m = opaque;
    keyer_tensor_info in;
    keyer_status st = keyer_model_input_info(model, 0, &in, err);
    if (st)
        return st;
    if (keyer_model_input_count(model) != 1 || in.rank != 4 || in.dtype != KEYER_DTYPE_F32 ||
        in.dims[1] < 1 || in.dims[2] < 1 || in.dims[3] != 3)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "face mesh: %s: the input is not one float [1,H,W,3] image", path);
    *height = in.dims[1];
    *width = in.dims[2];
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
    kr_crop_stage_params cp = {
        .name = "mesh",
        .what = "face mesh: ",
        .model_name = "face-mesh",
        .cuda_precision = keyer_registry_precision(keyer_registry_find("face-mesh"),
                                                   p->precision, 1),
        .ctx = p->ctx,
        .stats = p->stats,
        .threads = p->threads,
        .check_model = check_model,
        .rounds = &mesh_rounds,
        .opaque = m,
    };
    keyer_status st = kr_crop_stage_create(&cp, &m->cs, err);
    if (st) {
        kr_mesh_destroy(&m);
        return st;
    }
    *out = m;
    return KEYER_OK;
}

void kr_mesh_destroy(kr_mesh **pm)
{
    if (!pm || !*pm)
        return;
    kr_mesh *m = *pm;
    kr_crop_stage_destroy(&m->cs); /* its thread stops before the buffers go */
    for (int i = 0; m->faces && i < m->p.max_streams; i++)
        keyer_faces_destroy(&m->faces[i]);
    free(m->faces);
    free(m->crops);
    free(m->rois);
    free(m->geo);
    free(m->pts);
    free(m->logits);
    free(m->cuda);
    free(m->round_fa);
    free(m);
    *pm = NULL;
}

const kr_rounds *kr_mesh_rounds(const kr_mesh *m)
{
    return kr_crop_stage_rounds(m->cs);
}

kr_model_stage *kr_mesh_stage(kr_mesh *m)
{
    return kr_crop_stage_model(m->cs);
}

keyer_status kr_mesh_connect(kr_mesh *m, kr_queue *next, const kr_device_fns *dev, int ordinal,
                             int hybrid, int batch, keyer_error *err)
{
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
    m->round_fa = calloc(b, sizeof(*m->round_fa));
    if (!m->crops || !m->rois || !m->geo || !m->pts || !m->logits || !m->cuda || !m->round_fa)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "face mesh: out of memory");
    /* the CUDA runs' outputs of up to 4 batches of crops between two waits */
    m->out_cap = 4 * m->batch < m->cap ? 4 * m->batch : m->cap;
    kr_crop_stage_run_params run = {
        .next = next,
        .dev = dev,
        .ordinal = ordinal,
        .hybrid = hybrid,
        .batch = m->batch,
        .crop_cap = m->cap,
        .out_cap = m->out_cap,
        .run_cap = m->batch,
        .fit = KEYER_FIT_STRETCH, /* the face analyser's crops: stretched, rgb in [0, 1] */
        .out_floats = (size_t)m->out_cap * (MESH_VALUES + 1),
        .dev_floats = 0,
    };
    return kr_crop_stage_connect(m->cs, &run, err);
}
