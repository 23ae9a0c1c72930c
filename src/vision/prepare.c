/* Model input preparation: parameters, validation and dispatch to a backend. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "keyer/effects.h"
#include "render/fx_backend.h"

struct keyer_prepare {
    keyer_prepare_params params;
    kr_fx_config config;
    void *slots[KR_FX_BACKENDS]; /* backend states, created on first use */
    kr_prepare_item *items;      /* max_batch resolved frames */
    float scale[3], offset[3], pad_value[3]; /* per tensor channel, resolved at create */
    int src[3];
};

static const keyer_option_choice dtype_choices[] = {
    {"f32", KEYER_DTYPE_F32, "32-bit float"},
    {"f16", KEYER_DTYPE_F16, "16-bit float (IEEE half)"},
    {NULL, 0, NULL},
};
static const keyer_option_choice layout_choices[] = {
    {"nhwc", KEYER_TENSOR_LAYOUT_NHWC, "[N][H][W][C] (TFLite)"},
    {"nchw", KEYER_TENSOR_LAYOUT_NCHW, "[N][C][H][W]"},
    {NULL, 0, NULL},
};
static const keyer_option_choice fit_choices[] = {
    {"stretch", KEYER_FIT_STRETCH, "scale each axis to fill the tensor"},
    {"letterbox", KEYER_FIT_LETTERBOX, "keep the aspect ratio; pad the rest"},
    {NULL, 0, NULL},
};

#define OFF(f) offsetof(keyer_prepare_params, f)
static const keyer_option prepare_options[] = {
    KEYER_OPTION_FIELD("width", "tensor width in pixels", OFF(width), KEYER_OPTION_INT, 256, 1,
        16384, NULL),
    KEYER_OPTION_FIELD("height", "tensor height in pixels", OFF(height), KEYER_OPTION_INT, 256, 1,
        16384, NULL),
    KEYER_OPTION_FIELD("max_batch", "most frames per call", OFF(max_batch), KEYER_OPTION_INT, 1, 1,
        256, NULL),
    KEYER_OPTION_FIELD("dtype", "tensor element type", OFF(dtype), KEYER_OPTION_ENUM,
        KEYER_DTYPE_F32, 0, 0, dtype_choices),
    KEYER_OPTION_FIELD("layout", "tensor layout", OFF(layout), KEYER_OPTION_ENUM,
        KEYER_TENSOR_LAYOUT_NHWC, 0, 0, layout_choices),
    KEYER_OPTION_FIELD("fit", "how the region fills the tensor", OFF(fit), KEYER_OPTION_ENUM,
        KEYER_FIT_STRETCH, 0, 0, fit_choices),
    KEYER_OPTION_FIELD("scale", "value = rgb * scale + offset, rgb in [0,1]", OFF(scale),
        KEYER_OPTION_FLOAT, 1, -1e6, 1e6, NULL),
    KEYER_OPTION_FIELD("offset", "added after scaling ([-1,1] models: scale=2, offset=-1)",
        OFF(offset), KEYER_OPTION_FLOAT, 0, -1e6, 1e6, NULL),
    KEYER_OPTION_FIELD("pad", "letterbox bar colour in [0,1] before normalisation", OFF(pad),
        KEYER_OPTION_FLOAT, 0, 0, 1, NULL),
    KEYER_OPTION_FIELD("area", "average all covered pixels when shrinking more than 2x", OFF(area),
        KEYER_OPTION_BOOL, 1, 0, 1, NULL),
    KEYER_OPTION_FIELD("threads", "CPU threads (0: one per core)", OFF(threads), KEYER_OPTION_INT,
        0, 0, 256, NULL),
    KEYER_OPTION_FIELD("bgr", "the tensor's channels are blue, green, red", OFF(bgr),
        KEYER_OPTION_BOOL, 0, 0, 1, NULL),
    KEYER_OPTION_END,
};
#undef OFF

const keyer_option *keyer_prepare_options(void) { return prepare_options; }

keyer_prepare_params keyer_prepare_params_defaults(void)
{
    keyer_prepare_params p;
    memset(&p, 0, sizeof(p));
    keyer_options_set_defaults(prepare_options, &p, NULL);
    return p;
}

keyer_status keyer_prepare_create(const keyer_prepare_params *params, keyer_prepare **out,
                                  keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_prepare_create: %s is NULL",
                               !params ? "params" : "out");
    *out = NULL;
    if (keyer_options_validate(prepare_options, params, "prepare parameters", err))
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    for (int c = 0; c < 3; c++)
        if (!isfinite(params->mean[c]) || !isfinite(params->std[c]) || params->std[c] < 0 ||
            fabsf(params->mean[c]) > 1e6f || (params->std[c] > 0 && params->std[c] < 1e-6f))
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "prepare parameters: mean[%d] %g, std[%d] %g (std must be "
                                   "0 or at least 1e-6)", c, (double)params->mean[c], c,
                                   (double)params->std[c]);
    keyer_prepare *p = keyer_calloc(params->allocator, sizeof(*p), KEYER_ALIGNMENT);
    if (!p)
        goto oom;
    p->params = *params;
    for (int c = 0; c < 3; c++) {
        /* the plain case keeps the expression rgb * scale + offset exactly */
        float sd = params->std[c];
        p->scale[c] = sd > 0 ? params->scale / sd : params->scale;
        p->offset[c] = sd > 0 ? (params->offset - params->mean[c]) / sd : params->offset;
        p->pad_value[c] = params->pad * p->scale[c] + p->offset[c];
        p->src[c] = params->bgr ? 2 - c : c;
    }
    p->config.threads = params->threads;
    p->config.allocator = params->allocator;
    p->config.max_streams = 1;
    p->items = keyer_calloc(params->allocator, sizeof(*p->items) * (size_t)params->max_batch,
                            KEYER_ALIGNMENT);
    if (!p->items)
        goto oom;
    /* The CPU state (threads, scratch) is made now so that per-frame calls do not start
     * threads; the CUDA state is made on the first CUDA call. */
    const kr_fx_backend *b;
    void *state;
    if (kr_fx_state(p->slots, KEYER_MEMORY_HOST, &p->config, &b, &state, err)) {
        keyer_prepare_destroy(&p);
        return keyer_error_prefix(err, "keyer_prepare_create: ");
    }
    *out = p;
    return KEYER_OK;
oom:
    keyer_prepare_destroy(&p);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                           "keyer_prepare_create: out of memory");
}

void keyer_prepare_destroy(keyer_prepare **prep)
{
    if (!prep || !*prep)
        return;
    keyer_prepare *p = *prep;
    kr_fx_states_destroy(p->slots);
    const keyer_allocator *a = p->params.allocator;
    keyer_free(a, p->items);
    keyer_free(a, p);
    *prep = NULL;
}

keyer_status keyer_prepare_run(keyer_prepare *prep, const keyer_frame *const *frames,
                               const keyer_roi *rois, int count, void *tensor,
                               keyer_prepare_geometry *geometry, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!prep || !frames || !tensor)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_prepare_run: %s is NULL",
                               !prep ? "prep" : !frames ? "frames" : "tensor");
    const keyer_prepare_params *pp = &prep->params;
    if (count < 1 || count > pp->max_batch)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_prepare_run: %d frames, expected 1..%d (max_batch)", count,
                               pp->max_batch);
    keyer_memory_type memory = KEYER_MEMORY_HOST;
    for (int i = 0; i < count; i++) {
        const keyer_frame *f = frames[i];
        char what[48];
        snprintf(what, sizeof(what), "keyer_prepare_run: frame %d", i);
        if (kr_fx_check_frame(f, what, err))
            return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
        if (i == 0)
            memory = f->memory;
        else if (f->memory != memory)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keyer_prepare_run: frame %d is in %s memory, frame 0 in %s", i,
                                   f->memory == KEYER_MEMORY_CUDA ? "CUDA" : "host",
                                   memory == KEYER_MEMORY_CUDA ? "CUDA" : "host");
        kr_prepare_item *it = &prep->items[i];
        if (kr_fx_src_init(&it->src, f, err))
            return keyer_error_prefix(err, "keyer_prepare_run: frame %d: ", i);
        if (kr_fx_resolve_sampling(f->width, f->height, rois ? &rois[i] : NULL, pp->width,
                                   pp->height, pp->fit == KEYER_FIT_LETTERBOX, pp->area, it,
                                   geometry ? &geometry[i] : NULL, err))
            return keyer_error_prefix(err, "keyer_prepare_run: frame %d: ", i);
    }
    const kr_fx_backend *backend;
    void *state;
    if (kr_fx_state(prep->slots, memory, &prep->config, &backend, &state, err))
        return keyer_error_prefix(err, "keyer_prepare_run: ");
    kr_prepare_job job;
    memset(&job, 0, sizeof(job));
    job.items = prep->items;
    job.count = count;
    job.max_count = pp->max_batch;
    job.width = pp->width;
    job.height = pp->height;
    job.dtype = pp->dtype;
    job.layout = pp->layout;
    for (int c = 0; c < 3; c++) {
        job.scale[c] = prep->scale[c];
        job.offset[c] = prep->offset[c];
        job.pad_value[c] = prep->pad_value[c];
        job.src[c] = prep->src[c];
    }
    job.tensor = tensor;
    job.stream = pp->stream;
    job.device = frames[0]->device;
    if (backend->prepare(state, &job, err))
        return keyer_error_prefix(err, "keyer_prepare_run (%s): ", backend->name);
    return KEYER_OK;
}
