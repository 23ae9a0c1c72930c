/* The session's detector: loading it, and decoding each item's detections out of a run. */
#include "pipeline/detect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"
#include "keyer/detect.h"
#include "keyer/registry.h"

struct kr_detect {
    char name[32];
    keyer_precision cuda_precision; /* of its CUDA runtimes */
    keyer_detector *decoder;  /* anchors, decoding, weighted NMS */
    int in_w, in_h;           /* its input */
    int boxes, scores;        /* output indices */
    size_t box_count, score_count; /* values per frame */
    float *out;               /* host copy of a CUDA batch's outputs */
    const kr_device_fns *out_dev; /* out is page-locked memory of this device table */
    int out_ordinal;
    kr_queue *next;           /* NULL: the stream's reorder buffer */
    kr_model_stage *stage;
};

/* ---- outputs ---------------------------------------------------------------------------------- */

/* Decodes one frame's raw outputs into it->dets, in frame pixels. */
static keyer_status decode(kr_detect *d, kr_item *it, int slot, const float *boxes,
                           const float *scores, keyer_error *err)
{
    int n = 0;
    keyer_status st = keyer_detector_decode(d->decoder, boxes, scores, it->dets,
                                            KEYER_SESSION_MAX_DETECTIONS, &n, err);
    if (st)
        return st;
    const keyer_prepare_geometry *g = &it->geom[slot];
    float tw = (float)d->in_w, th = (float)d->in_h;
    keyer_letterbox lb = {g->content.x / tw, g->content.y / th,
                          (tw - g->content.x - g->content.width) / tw,
                          (th - g->content.y - g->content.height) / th};
    keyer_detections_to_pixels(it->dets, n, &lb, it->src->width, it->src->height);
    it->n_dets = n;
    return KEYER_OK;
}

static keyer_status decode_all(kr_detect *d, kr_item **items, int n, const float *boxes,
                               const float *scores, keyer_error *err)
{
    int slot = kr_model_stage_input(d->stage)->slot;
    keyer_status st = KEYER_OK;
    for (int i = 0; i < n && !st; i++)
        st = decode(d, items[i], slot, boxes + (size_t)i * d->box_count,
                    scores + (size_t)i * d->score_count, err);
    return st;
}

static keyer_status cpu_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                keyer_error *err)
{
    kr_detect *d = opaque;
    return decode_all(d, items, n, keyer_runtime_output_data(rt, d->boxes),
                      keyer_runtime_output_data(rt, d->scores), err);
}

/* The raw outputs come to the host (the host decodes them). */
static keyer_status cuda_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                 void *stream, keyer_error *err)
{
    kr_detect *d = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    float *boxes = d->out;
    float *scores = d->out + (size_t)n * d->box_count;
    size_t bb = (size_t)n * d->box_count * sizeof(float);
    size_t sb = (size_t)n * d->score_count * sizeof(float);
    keyer_status st =
        l->dev->copy(l->ordinal, boxes, keyer_runtime_output_data(rt, d->boxes), bb, stream, err);
    if (!st)
        st = l->dev->copy(l->ordinal, scores, keyer_runtime_output_data(rt, d->scores), sb,
                          stream, err);
    if (!st)
        st = l->dev->stream_sync(l->ordinal, stream, err);
    if (!st)
        st = decode_all(d, items, n, boxes, scores, err);
    return st;
}

/* Keying: on to the inference; passthrough: to the writer, which restores the order. */
static int forward(void *opaque, kr_item *it)
{
    return kr_model_stage_pass_on(((kr_detect *)opaque)->next, it);
}

/* The batch's items are all handed on: the next model stage (pose, face mesh, keying) takes
 * them without waiting for more (the next batch is a detector run away). */
static void handed_on(void *opaque)
{
    kr_queue_flush(((kr_detect *)opaque)->next);
}

/* The detections live on the host: nothing goes back to the device after a CPU run. */
static const kr_model_stage_ops detect_ops = {cpu_outputs, cuda_outputs, NULL, forward, NULL,
                                              handed_on};

/* ---- set-up ----------------------------------------------------------------------------------- */

/* Checks the model's input against @p dp, finds its box and score outputs. */
static keyer_status check_model(kr_detect *d, keyer_model *model,
                                const keyer_detector_params *dp, const char *path,
                                keyer_error *err)
{
    keyer_tensor_info in;
    keyer_status st = keyer_model_input_info(model, 0, &in, err);
    if (st)
        return st;
    if (in.rank != 4 || in.dtype != KEYER_DTYPE_F32 || in.dims[1] != dp->input_height ||
        in.dims[2] != dp->input_width || in.dims[3] != 3)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "detection: %s: the input is not a float [1,%d,%d,3] image", path,
                               dp->input_height, dp->input_width);
    if ((st = keyer_detector_create(dp, &d->decoder, err)))
        return st;
    size_t anchors = (size_t)keyer_detector_anchor_count(d->decoder);
    d->boxes = d->scores = -1;
    for (int i = 0; i < keyer_model_output_count(model); i++) {
        keyer_tensor_info o;
        if ((st = keyer_model_output_info(model, i, &o, err)))
            return st;
        size_t n = kr_model_stage_item_elements(&o);
        if (o.dtype != KEYER_DTYPE_F32)
            continue;
        if (d->boxes < 0 && n == anchors * (size_t)dp->num_coords)
            d->boxes = i;
        else if (d->scores < 0 && n == anchors)
            d->scores = i;
    }
    if (d->boxes < 0 || d->scores < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "detection: %s: expected outputs of %zu x %d box values and %zu "
                               "scores", path, anchors, dp->num_coords, anchors);
    d->in_w = dp->input_width;
    d->in_h = dp->input_height;
    d->box_count = anchors * (size_t)dp->num_coords;
    d->score_count = anchors;
    return KEYER_OK;
}

keyer_status kr_detect_create(const kr_detect_params *p, kr_detect **out, keyer_error *err)
{
    *out = NULL;
    kr_detect *d = calloc(1, sizeof(*d));
    if (!d)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "detection: out of memory");
    snprintf(d->name, sizeof(d->name), "%s", p->full ? "face-full" : "face-short");
    d->cuda_precision = keyer_registry_precision(keyer_registry_find(d->name), p->precision, 1);
    char path[4096];
    keyer_model *model = NULL;
    keyer_status st = keyer_registry_resolve(d->name, path, sizeof(path), err);
    if (!st)
        st = keyer_model_load_file(path, &model, err);
    if (st) {
        keyer_error_prefix(err, "detection: ");
        goto fail;
    }
    keyer_detector_params dp = p->full ? keyer_detector_params_face_full()
                                       : keyer_detector_params_face_short();
    if (p->min_score > 0)
        dp.min_score = p->min_score;
    if ((st = check_model(d, model, &dp, path, err)))
        goto fail;
    kr_model_stage_params mp = {
        .name = "detect",
        .model_name = d->name,
        .what = "detection: ",
        /* values in [-1, 1], bars at -1 (BlazeFace) */
        .input = {.slot = p->slot, .width = d->in_w, .height = d->in_h, .letterbox = 1,
                  .scale = 2.0f, .offset = -1.0f, .threads = 1, .what = "detection: "},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = p->counters,
        .threads = p->threads,
        .fail_cuda_at = p->fail_cuda_at,
        .cuda_precision = d->cuda_precision,
        .urgent = 1, /* every stream's frames pass it, its thread waits for each run */
        .ops = &detect_ops,
        .opaque = d,
    };
    if ((st = kr_model_stage_create(&mp, &model, &d->stage, err)))
        goto fail;
    *out = d;
    return KEYER_OK;
fail:
    keyer_model_destroy(&model);
    kr_detect_destroy(&d);
    return st;
}

void kr_detect_destroy(kr_detect **pd)
{
    if (!pd || !*pd)
        return;
    kr_detect *d = *pd;
    kr_model_stage_destroy(&d->stage);
    if (d->out_dev)
        d->out_dev->host_free(d->out_ordinal, d->out);
    else
        keyer_free(NULL, d->out);
    keyer_detector_destroy(&d->decoder);
    free(d);
    *pd = NULL;
}

kr_model_stage *kr_detect_stage(kr_detect *d)
{
    return d->stage;
}

const char *kr_detect_name(const kr_detect *d)
{
    return d->name;
}

keyer_precision kr_detect_cuda_precision(const kr_detect *d)
{
    return d->cuda_precision;
}

keyer_status kr_detect_connect(kr_detect *d, kr_queue *next, const kr_device_fns *dev,
                               int ordinal, int batch, keyer_error *err)
{
    d->next = next;
    if (dev && !d->out) {
        size_t bytes = (size_t)batch * (d->box_count + d->score_count) * sizeof(float);
        if (dev->host_alloc) {
            /* page-locked: both copies queued, one wait */
            keyer_status st = dev->host_alloc(ordinal, bytes, (void **)&d->out, err);
            if (st)
                return keyer_error_prefix(err, "detection: ");
            d->out_dev = dev;
            d->out_ordinal = ordinal;
        } else if (!(d->out = keyer_alloc(NULL, bytes, KEYER_ALIGNMENT))) {
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "detection: out of memory");
        }
    }
    return KEYER_OK;
}
