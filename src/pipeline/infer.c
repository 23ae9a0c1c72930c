/* The keying model: loading and checking it, and reading each item's mask out of a run. */
#include "pipeline/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/registry.h"
#include "vision/sigmoid.h"

struct kr_infer {
    kr_infer_info info;
    int mask_c, mask_index, mask_logit;
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
    const float *outp = keyer_runtime_output_data(rt, inf->mask_index);
    size_t cells = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h;
    size_t c = (size_t)inf->mask_c;
    for (int i = 0; i < n; i++) {
        const float *src = outp + (size_t)i * cells * c;
        float *dst = items[i]->host.mask;
        if (inf->mask_logit)
            kr_sigmoid_cpu(dst, src, cells, c);
        else if (c == 1)
            memcpy(dst, src, inf->mask_bytes);
        else
            for (size_t k = 0; k < cells; k++)
                dst[k] = src[k * c];
    }
    atomic_fetch_add(&inf->frames_cpu, n);
    return KEYER_OK;
}

static keyer_status cuda_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                 void *stream, keyer_error *err)
{
    kr_infer *inf = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    const kr_device_fns *dev = l->dev;
    const char *outp = (const char *)keyer_runtime_output_data(rt, inf->mask_index);
    size_t cells = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++) {
        const char *src = outp + (size_t)i * cells * (size_t)inf->mask_c * sizeof(float);
        float *mask = items[i]->cuda.mask;
        if (inf->mask_c == 1)
            rs = dev->copy(l->ordinal, mask, src, inf->mask_bytes, stream, err);
        else /* channel 0 of each cell: a 2-D copy of 4-byte rows */
            rs = dev->copy_2d(l->ordinal, mask, sizeof(float), src,
                              (size_t)inf->mask_c * sizeof(float), sizeof(float), cells, stream,
                              err);
        if (!rs && inf->mask_logit)
            rs = kr_sigmoid_cuda(l->ordinal, mask, mask, cells, stream, err);
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

static const kr_model_stage_ops infer_ops = {cpu_outputs, cuda_outputs, upload_outputs, forward};

/* ---- set-up ----------------------------------------------------------------------------------- */

/* Checks the model's input and mask output and fills the geometry. */
static keyer_status check_model(kr_infer *inf, keyer_model *model,
                                const keyer_model_entry *entry, const char *name,
                                keyer_error *err)
{
    if (entry && entry->mask_output < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model %s has no person mask (keying needs a segmentation or pose "
                               "model: selfie, selfie-landscape, pose-lite, ...)", name);
    keyer_tensor_info in, mo;
    keyer_status st = keyer_model_input_info(model, 0, &in, err);
    if (st)
        return st;
    if (in.rank != 4 || in.dims[3] != 3 || in.dtype != KEYER_DTYPE_F32 || in.dims[1] < 1 ||
        in.dims[2] < 1)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: input 0 is not a float [1,H,W,3] image", name);
    inf->info.in_h = in.dims[1];
    inf->info.in_w = in.dims[2];
    inf->mask_index = entry ? entry->mask_output : 0;
    inf->mask_logit = entry ? entry->mask_is_logit : 0;
    inf->info.letterbox = entry ? entry->letterbox : 0;
    if (inf->mask_index >= keyer_model_output_count(model))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "model %s: no output %d", name,
                               inf->mask_index);
    if ((st = keyer_model_output_info(model, inf->mask_index, &mo, err)))
        return st;
    if ((mo.rank != 4 && mo.rank != 3) || mo.dims[1] < 1 || mo.dims[2] < 1 ||
        (mo.rank == 4 && mo.dims[3] < 1) || mo.dtype != KEYER_DTYPE_F32)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: output %d is not a float [1,H,W,C] mask", name,
                               inf->mask_index);
    inf->info.mask_h = mo.dims[1];
    inf->info.mask_w = mo.dims[2];
    inf->mask_c = mo.rank == 4 ? mo.dims[3] : 1;
    inf->mask_bytes = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h * sizeof(float);
    return KEYER_OK;
}

keyer_status kr_infer_create(const kr_infer_params *p, kr_infer **out, keyer_error *err)
{
    *out = NULL;
    const char *name = p->model;
    char path[4096];
    keyer_status st = keyer_registry_resolve(name, path, sizeof(path), err);
    if (st)
        return st;
    kr_infer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    atomic_init(&inf->frames_cpu, 0);
    atomic_init(&inf->frames_cuda, 0);
    const keyer_model_entry *entry = keyer_registry_find(name);
    snprintf(inf->info.model, sizeof(inf->info.model), "%s", name);
    inf->info.cuda_precision = keyer_registry_precision(entry, p->precision, 1);
    keyer_model *model = NULL;
    if ((st = keyer_model_load_file(path, &model, err)) ||
        (st = check_model(inf, model, entry, name, err)))
        goto fail;
    kr_model_stage_params mp = {
        .name = "infer",
        .model_name = inf->info.model,
        .what = "",
        .input = {p->slot, inf->info.in_w, inf->info.in_h, inf->info.letterbox,
                  entry ? entry->input_scale : 1.0f, entry ? entry->input_offset : 0.0f, 0, ""},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = p->counters,
        .threads = p->threads,
        .fail_cuda_at = p->fail_cuda_at,
        .cuda_precision = inf->info.cuda_precision,
        .ops = &infer_ops,
        .opaque = inf,
    };
    if ((st = kr_model_stage_create(&mp, &model, &inf->stage, err)))
        goto fail;
    *out = inf;
    return KEYER_OK;
fail:
    keyer_model_destroy(&model);
    kr_infer_destroy(&inf);
    return st;
}

void kr_infer_destroy(kr_infer **pinf)
{
    if (!pinf || !*pinf)
        return;
    kr_model_stage_destroy(&(*pinf)->stage);
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
