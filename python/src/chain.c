/* The per-frame keying chain of the Python package: see chain.h. */
#include "chain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kp_chain {
    const keyer_model_entry *entry; /* NULL for a file outside the registry */
    keyer_model *model;
    keyer_runtime *rt;
    keyer_prepare *prep;
    keyer_refine *refine;
    keyer_composite *comp;
    int in_w, in_h;          /* model input */
    int mask_w, mask_h;      /* mask output */
    int mask_index, mask_c;  /* output index, channels per cell */
    int mask_logit;
    int letterbox;
    float *mask_data;        /* GRAYF32 mask when the output is not used in place */
    keyer_frame mask;        /* GRAYF32 view of the mask (no buffers) */
};

kp_chain_params kp_chain_params_defaults(void)
{
    kp_chain_params p;
    memset(&p, 0, sizeof(p));
    p.model = NULL;
    p.backend = KEYER_BACKEND_CPU;
    p.precision = KEYER_PRECISION_F32;
    p.threads = 0;
    p.refine = keyer_refine_params_defaults();
    p.composite = keyer_composite_params_defaults();
    return p;
}

void kp_chain_destroy(kp_chain **pc)
{
    if (!pc || !*pc)
        return;
    kp_chain *c = *pc;
    free(c->mask_data);
    keyer_composite_destroy(&c->comp);
    keyer_refine_destroy(&c->refine);
    keyer_prepare_destroy(&c->prep);
    keyer_runtime_destroy(&c->rt);
    keyer_model_destroy(&c->model);
    free(c);
    *pc = NULL;
}

keyer_status kp_chain_create(const kp_chain_params *params, kp_chain **out, keyer_error *err)
{
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keying chain: NULL argument");
    *out = NULL;
    const char *name = params->model ? params->model : "selfie";
    if (params->backend == KEYER_BACKEND_CUDA)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keying chain: the per-frame chain takes host frames; use the "
                               "cpu or reference backend");
    kp_chain *c = calloc(1, sizeof(*c));
    if (!c)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keying chain: out of memory");
    char path[4096];
    keyer_status st;
    keyer_tensor_info in, mo;
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = params->backend;
    rp.precision = params->precision;
    rp.threads = params->threads;
    c->entry = keyer_registry_find(name);
    if (c->entry && c->entry->mask_output < 0 && c->entry->task != KEYER_TASK_SEGMENTATION) {
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                             "model %s: not a segmentation model (it has no person mask)", name);
        goto fail;
    }
    c->mask_index = c->entry && c->entry->mask_output >= 0 ? c->entry->mask_output : 0;
    c->mask_logit = c->entry ? c->entry->mask_is_logit : 0;
    c->letterbox = c->entry ? c->entry->letterbox : 0;
    if ((st = keyer_registry_resolve(name, path, sizeof(path), err)) ||
        (st = keyer_model_load_file(path, &c->model, err)) ||
        (st = keyer_model_input_info(c->model, 0, &in, err)) ||
        (st = keyer_model_output_info(c->model, c->mask_index, &mo, err)))
        goto fail;
    if (in.rank != 4 || in.dims[3] != 3 || mo.rank < 3) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "model %s: not an image-to-mask model (input rank %d)", name, in.rank);
        goto fail;
    }
    if ((st = keyer_runtime_create(c->model, &rp, &c->rt, err)))
        goto fail;
    c->in_w = in.dims[2];
    c->in_h = in.dims[1];
    c->mask_w = mo.dims[2];
    c->mask_h = mo.dims[1];
    c->mask_c = mo.rank >= 4 ? mo.dims[3] : 1;

    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = c->in_w;
    pp.height = c->in_h;
    pp.scale = c->entry ? c->entry->input_scale : 1.0f;
    pp.offset = c->entry ? c->entry->input_offset : 0.0f;
    pp.fit = c->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp.threads = params->threads;
    keyer_refine_params fp = params->refine;
    fp.max_streams = 1;
    fp.threads = params->threads;
    keyer_composite_params cp = params->composite;
    cp.threads = params->threads;
    if ((st = keyer_prepare_create(&pp, &c->prep, err)) ||
        (st = keyer_refine_create(&fp, &c->refine, err)) ||
        (st = keyer_composite_create(&cp, &c->comp, err)))
        goto fail;

    /* the mask: the runtime's output itself when it is one probability per cell */
    float *mask = (float *)keyer_runtime_output_data(c->rt, c->mask_index);
    if (c->mask_logit || c->mask_c != 1) {
        c->mask_data = malloc((size_t)c->mask_w * (size_t)c->mask_h * sizeof(float));
        if (!c->mask_data) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keying chain: out of memory");
            goto fail;
        }
        mask = c->mask_data;
    }
    c->mask.format = KEYER_PIXEL_FORMAT_GRAYF32;
    c->mask.width = c->mask_w;
    c->mask.height = c->mask_h;
    c->mask.memory = KEYER_MEMORY_HOST;
    c->mask.data[0] = (uint8_t *)mask;
    c->mask.stride[0] = (ptrdiff_t)c->mask_w * (ptrdiff_t)sizeof(float);
    c->mask.pts = INT64_MIN;
    *out = c;
    return KEYER_OK;
fail:
    kp_chain_destroy(&c);
    return st;
}

const keyer_model_entry *kp_chain_model_entry(const kp_chain *c)
{
    return c ? c->entry : NULL;
}

keyer_status kp_chain_matte(kp_chain *c, const keyer_frame *frame, keyer_frame *alpha,
                            keyer_error *err)
{
    const keyer_frame *frames[1] = {frame};
    keyer_prepare_geometry geom;
    keyer_status st;
    if ((st = keyer_prepare_run(c->prep, frames, NULL, 1, keyer_runtime_input_data(c->rt, 0),
                                &geom, err)) ||
        (st = keyer_runtime_run(c->rt, err)))
        return st;
    if (c->mask_data) {
        const float *src = keyer_runtime_output_data(c->rt, c->mask_index);
        size_t cells = (size_t)c->mask_w * (size_t)c->mask_h, ch = (size_t)c->mask_c;
        if (c->mask_logit)
            for (size_t k = 0; k < cells; k++)
                c->mask_data[k] = 1.0f / (1.0f + expf(-src[k * ch]));
        else
            for (size_t k = 0; k < cells; k++)
                c->mask_data[k] = src[k * ch];
    }
    /* the part of the mask covering the frame (letterboxed models) */
    keyer_rectf region, *rp = NULL;
    if (c->letterbox) {
        float sx = (float)c->mask_w / (float)c->in_w, sy = (float)c->mask_h / (float)c->in_h;
        region.x = geom.content.x * sx;
        region.y = geom.content.y * sy;
        region.width = geom.content.width * sx;
        region.height = geom.content.height * sy;
        rp = &region;
    }
    return keyer_refine_run(c->refine, 0, frame, &c->mask, rp, alpha, err);
}

keyer_status kp_chain_composite(kp_chain *c, const keyer_frame *frame, const keyer_frame *alpha,
                                keyer_frame *out, keyer_error *err)
{
    return keyer_composite_run(c->comp, frame, alpha, out, err);
}

keyer_status kp_chain_set_background(kp_chain *c, const keyer_frame *background,
                                     keyer_error *err)
{
    return keyer_composite_set_background(c->comp, background, err);
}

void kp_chain_reset(kp_chain *c)
{
    if (c)
        keyer_refine_reset(c->refine, -1, NULL);
}
