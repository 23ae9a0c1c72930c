/* The keying model: loading and checking it, and reading each item's mask out of a run. */
#include "pipeline/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/registry.h"
#include "vision/segmodel.h"

struct kr_infer {
    kr_infer_info info;
    kr_segmodel seg;         /* the model's geometry and mask kind (its model moves to the stage) */
    size_t mask_bytes;       /* one frame's mask (one channel) */
    kr_model_stage *stage;
    kr_queue *next;
    atomic_llong frames_cpu, frames_cuda;
};

/* ---- outputs ---------------------------------------------------------------------------------- */

static keyer_status cpu_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                keyer_error *err)
{
    (void)err;
    kr_infer *inf = opaque;
    const float *outp = keyer_runtime_output_data(rt, inf->seg.output);
    size_t cells = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h;
    size_t c = (size_t)inf->seg.mask_c;
    for (int i = 0; i < n; i++)
        kr_segmask_cpu(&inf->seg, items[i]->host.mask, outp + (size_t)i * cells * c, cells);
    atomic_fetch_add(&inf->frames_cpu, n);
    return KEYER_OK;
}

static keyer_status cuda_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                 void *stream, keyer_error *err)
{
    kr_infer *inf = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    const kr_device_fns *dev = l->dev;
    const char *outp = (const char *)keyer_runtime_output_data(rt, inf->seg.output);
    size_t cells = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++) {
        const char *src = outp + (size_t)i * cells * (size_t)inf->seg.mask_c * sizeof(float);
        float *mask = items[i]->cuda.mask;
        if (inf->seg.kind == KEYER_MASK_PROBABILITY &&
            (inf->seg.mask_c == 1 || inf->seg.mask_planar)) /* channel 0 is the first plane */
            rs = dev->copy(l->ordinal, mask, src, inf->mask_bytes, stream, err);
        else if (inf->seg.kind == KEYER_MASK_PROBABILITY) /* channel 0: 2-D copy of 4-byte rows */
            rs = dev->copy_2d(l->ordinal, mask, sizeof(float), src,
                              (size_t)inf->seg.mask_c * sizeof(float), sizeof(float), cells,
                              stream, err);
        else
            rs = kr_segmask_cuda(&inf->seg, l->ordinal, mask, (const float *)src, cells, stream,
                                 err);
    }
    /* refine waits for the masks on its own stream */
    for (int i = 0; i < n && !rs; i++)
        rs = kr_item_record(items[i], stream, err);
    if (!rs)
        atomic_fetch_add(&inf->frames_cuda, n);
    return rs;
}

/* CUDA items inferred on the CPU: the masks go up (small: the model's size). */
static keyer_status upload_outputs(void *opaque, kr_item **items, int n, void *stream,
                                   keyer_error *err)
{
    kr_infer *inf = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++)
        rs = l->dev->copy(l->ordinal, items[i]->cuda.mask, items[i]->host.mask, inf->mask_bytes,
                          stream, err);
    for (int i = 0; i < n && !rs; i++)
        rs = kr_item_record(items[i], stream, err);
    return rs;
}

static int forward(void *opaque, kr_item *it)
{
    kr_infer *inf = opaque;
    return kr_queue_push(inf->next, it) != KEYER_OK;
}

static const kr_model_stage_ops infer_ops = {cpu_outputs, cuda_outputs, upload_outputs, forward,
                                               NULL};

/* ---- set-up ----------------------------------------------------------------------------------- */

keyer_status kr_infer_create(const kr_infer_params *p, kr_infer **out, keyer_error *err)
{
    *out = NULL;
    const char *name = p->model;
    kr_infer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    atomic_init(&inf->frames_cpu, 0);
    atomic_init(&inf->frames_cuda, 0);
    snprintf(inf->info.model, sizeof(inf->info.model), "%s", name);
    keyer_status st = kr_segmodel_open(&inf->seg, name, p->desc, err);
    if (st)
        goto fail;
    inf->info.in_w = inf->seg.in_w;
    inf->info.in_h = inf->seg.in_h;
    inf->info.mask_w = inf->seg.mask_w;
    inf->info.mask_h = inf->seg.mask_h;
    inf->info.letterbox = inf->seg.desc.letterbox;
    inf->info.cuda_precision = keyer_registry_precision(inf->seg.entry, p->precision, 1);
    inf->mask_bytes = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h * sizeof(float);
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    kr_segmodel_prepare_params(&inf->seg, &pp);
    kr_model_stage_params mp = {
        .name = "infer",
        .model_name = inf->info.model,
        .what = "",
        .input = {p->slot, inf->info.in_w, inf->info.in_h, inf->info.letterbox, pp.scale,
                  pp.offset, 0, "", {pp.mean[0], pp.mean[1], pp.mean[2]},
                  {pp.std[0], pp.std[1], pp.std[2]}, pp.bgr},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = p->counters,
        .threads = p->threads,
        .fail_cuda_at = p->fail_cuda_at,
        .cuda_precision = inf->info.cuda_precision,
        .ops = &infer_ops,
        .opaque = inf,
    };
    /* the stage takes the model */
    if ((st = kr_model_stage_create(&mp, &inf->seg.model, &inf->stage, err)))
        goto fail;
    *out = inf;
    return KEYER_OK;
fail:
    kr_infer_destroy(&inf);
    return st;
}

void kr_infer_destroy(kr_infer **pinf)
{
    if (!pinf || !*pinf)
        return;
    kr_model_stage_destroy(&(*pinf)->stage);
    kr_segmodel_close(&(*pinf)->seg);
    free(*pinf);
    *pinf = NULL;
}

kr_model_stage *kr_infer_stage(kr_infer *inf)
{
    return inf->stage;
}

const kr_infer_info *kr_infer_get_info(const kr_infer *inf)
{
    return &inf->info;
}

void kr_infer_connect(kr_infer *inf, kr_queue *next)
{
    inf->next = next;
}

void kr_infer_frames(kr_infer *inf, int64_t *cpu, int64_t *cuda)
{
    *cpu = inf ? atomic_load(&inf->frames_cpu) : 0;
    *cuda = inf ? atomic_load(&inf->frames_cuda) : 0;
}
