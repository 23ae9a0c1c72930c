/* Mask refinement: parameters, validation, temporal bookkeeping and dispatch. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "keyer/effects.h"
#include "render/fx_backend.h"

/* What a stream's history was made from; a change makes it unusable. */
typedef struct stream_history {
    int valid;
    int gw, gh;
    keyer_memory_type memory;
} stream_history;

struct keyer_refine {
    keyer_refine_params params;
    kr_fx_config config;
    void *slots[KR_FX_BACKENDS];
    stream_history *history; /* max_streams */
};

static const keyer_option_choice upsample_choices[] = {
    {"bilinear", KEYER_UPSAMPLE_BILINEAR, "plain bilinear upsampling"},
    {"guided", KEYER_UPSAMPLE_GUIDED, "fast guided filter following the frame's edges"},
    {NULL, 0, NULL},
};
static const keyer_option_choice temporal_choices[] = {
    {"off", KEYER_TEMPORAL_OFF, "no temporal smoothing"},
    {"adaptive", KEYER_TEMPORAL_ADAPTIVE, "average that stops where frame or mask move"},
    {"mediapipe", KEYER_TEMPORAL_MEDIAPIPE, "MediaPipe's uncertainty-weighted smoothing"},
    {NULL, 0, NULL},
};

#define OFF(f) offsetof(keyer_refine_params, f)
static const keyer_option refine_options[] = {
    KEYER_OPTION_FIELD("upsample", "mask upsampling", OFF(upsample), KEYER_OPTION_ENUM,
        KEYER_UPSAMPLE_GUIDED, 0, 0, upsample_choices),
    KEYER_OPTION_FIELD("guided_radius", "guided filter window radius in mask pixels",
        OFF(guided_radius), KEYER_OPTION_INT, 2, 1, 16, NULL),
    KEYER_OPTION_FIELD("guided_eps", "guided filter regulariser (luma variance, luma in [0,1])",
        OFF(guided_eps), KEYER_OPTION_FLOAT, 1e-3, 1e-6, 1, NULL),
    KEYER_OPTION_FIELD("threshold", "apply the soft threshold", OFF(threshold), KEYER_OPTION_BOOL,
        1, 0, 1, NULL),
    KEYER_OPTION_FIELD("threshold_low", "alpha at or below this becomes 0", OFF(threshold_low),
        KEYER_OPTION_FLOAT, 0.25, 0, 1, NULL),
    KEYER_OPTION_FIELD("threshold_high", "alpha at or above this becomes 1", OFF(threshold_high),
        KEYER_OPTION_FLOAT, 0.75, 0, 1, NULL),
    KEYER_OPTION_FIELD("dilate", "grow (>0) or shrink (<0) the matte by this many pixels",
        OFF(dilate), KEYER_OPTION_INT, 0, -64, 64, NULL),
    KEYER_OPTION_FIELD("feather", "soften edges: box blur radius in pixels, applied twice",
        OFF(feather), KEYER_OPTION_INT, 1, 0, 64, NULL),
    KEYER_OPTION_FIELD("temporal", "temporal smoothing per stream", OFF(temporal),
        KEYER_OPTION_ENUM, KEYER_TEMPORAL_ADAPTIVE, 0, 0, temporal_choices),
    KEYER_OPTION_FIELD("temporal_strength", "weight of the previous mask", OFF(temporal_strength),
        KEYER_OPTION_FLOAT, 0.8, 0, 0.99, NULL),
    KEYER_OPTION_FIELD("motion_tolerance", "luma change (0..1) where smoothing stops",
        OFF(motion_tolerance), KEYER_OPTION_FLOAT, 0.05, 1e-3, 1, NULL),
    KEYER_OPTION_FIELD("mask_tolerance", "mask change (0..1) where smoothing stops",
        OFF(mask_tolerance), KEYER_OPTION_FLOAT, 0.25, 1e-3, 1, NULL),
    KEYER_OPTION_FIELD("scene_cut", "mean luma change (0..1) that resets the history",
        OFF(scene_cut), KEYER_OPTION_FLOAT, 0.15, 0, 1, NULL),
    KEYER_OPTION_FIELD("max_streams", "number of streams with their own history", OFF(max_streams),
        KEYER_OPTION_INT, 1, 1, 1024, NULL),
    KEYER_OPTION_FIELD("threads", "CPU threads (0: one per core)", OFF(threads), KEYER_OPTION_INT,
        0, 0, 256, NULL),
    KEYER_OPTION_END,
};
#undef OFF

const keyer_option *keyer_refine_options(void) { return refine_options; }

keyer_refine_params keyer_refine_params_defaults(void)
{
    keyer_refine_params p;
    memset(&p, 0, sizeof(p));
    keyer_options_set_defaults(refine_options, &p, NULL);
    return p;
}

keyer_status keyer_refine_create(const keyer_refine_params *params, keyer_refine **out,
                                 keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_refine_create: %s is NULL",
                               !params ? "params" : "out");
    *out = NULL;
    if (keyer_options_validate(refine_options, params, "refine parameters", err))
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    if (params->threshold && !(params->threshold_low < params->threshold_high))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "refine parameters: threshold_low %g must be below threshold_high %g",
                               (double)params->threshold_low, (double)params->threshold_high);
    keyer_refine *r = keyer_calloc(params->allocator, sizeof(*r), KEYER_ALIGNMENT);
    if (!r)
        goto oom;
    r->params = *params;
    r->config.threads = params->threads;
    r->config.allocator = params->allocator;
    r->config.max_streams = params->max_streams;
    r->history = keyer_calloc(params->allocator, sizeof(*r->history) * (size_t)params->max_streams,
                              KEYER_ALIGNMENT);
    if (!r->history)
        goto oom;
    const kr_fx_backend *b;
    void *state;
    if (kr_fx_state(r->slots, KEYER_MEMORY_HOST, &r->config, &b, &state, err)) {
        keyer_refine_destroy(&r);
        return keyer_error_prefix(err, "keyer_refine_create: ");
    }
    *out = r;
    return KEYER_OK;
oom:
    keyer_refine_destroy(&r);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keyer_refine_create: out of memory");
}

void keyer_refine_destroy(keyer_refine **refine)
{
    if (!refine || !*refine)
        return;
    keyer_refine *r = *refine;
    kr_fx_states_destroy(r->slots);
    keyer_free(r->params.allocator, r->history);
    keyer_free(r->params.allocator, r);
    *refine = NULL;
}

keyer_status keyer_refine_reset(keyer_refine *refine, int stream_id, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!refine)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_refine_reset: refine is NULL");
    if (stream_id < -1 || stream_id >= refine->params.max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_refine_reset: stream %d is outside -1..%d", stream_id,
                               refine->params.max_streams - 1);
    for (int i = 0; i < refine->params.max_streams; i++)
        if (stream_id < 0 || i == stream_id)
            refine->history[i].valid = 0;
    return KEYER_OK;
}

keyer_status keyer_refine_run(keyer_refine *refine, int stream_id, const keyer_frame *frame,
                              const keyer_frame *mask, const keyer_rectf *mask_region,
                              keyer_frame *alpha, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!refine)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_refine_run: refine is NULL");
    const keyer_refine_params *p = &refine->params;
    if (stream_id < 0 || stream_id >= p->max_streams)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_refine_run: stream %d is outside 0..%d (max_streams)",
                               stream_id, p->max_streams - 1);
    if (kr_fx_check_frame(frame, "keyer_refine_run: frame", err) ||
        kr_fx_check_frame(mask, "keyer_refine_run: mask", err) ||
        kr_fx_check_frame(alpha, "keyer_refine_run: alpha", err))
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    if (mask->format != KEYER_PIXEL_FORMAT_GRAYF32)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_refine_run: mask is %s, expected grayf32",
                               keyer_pixel_format_name(mask->format));
    if (alpha->format != KEYER_PIXEL_FORMAT_GRAY8 && alpha->format != KEYER_PIXEL_FORMAT_GRAYF32)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_refine_run: alpha is %s, expected gray8 or grayf32",
                               keyer_pixel_format_name(alpha->format));
    if (alpha->width != frame->width || alpha->height != frame->height)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_refine_run: alpha is %dx%d, the frame %dx%d", alpha->width,
                               alpha->height, frame->width, frame->height);
    if (mask->memory != frame->memory || alpha->memory != frame->memory)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_refine_run: frame, mask and alpha must be in the same memory");
    kr_refine_job job;
    memset(&job, 0, sizeof(job));
    if (kr_fx_src_init(&job.guide, frame, err))
        return keyer_error_prefix(err, "keyer_refine_run: frame: ");
    job.width = frame->width;
    job.height = frame->height;
    job.mask = (const float *)(const void *)mask->data[0];
    job.mask_stride = mask->stride[0];
    job.mask_width = mask->width;
    job.mask_height = mask->height;
    if (!mask_region) {
        job.region[0] = 0;
        job.region[1] = 0;
        job.region[2] = (float)mask->width;
        job.region[3] = (float)mask->height;
    } else {
        const keyer_rectf *r = mask_region;
        const float slack = 1e-3f;
        if (!isfinite(r->x) || !isfinite(r->y) || !isfinite(r->width) || !isfinite(r->height) ||
            r->x < -slack || r->y < -slack || r->width < 1.0f || r->height < 1.0f ||
            r->x + r->width > (float)mask->width + slack ||
            r->y + r->height > (float)mask->height + slack)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keyer_refine_run: mask region %g,%g %gx%g is not inside the "
                                   "%dx%d mask (or smaller than one pixel)", (double)r->x,
                                   (double)r->y, (double)r->width, (double)r->height, mask->width,
                                   mask->height);
        job.region[0] = r->x;
        job.region[1] = r->y;
        job.region[2] = r->width;
        job.region[3] = r->height;
    }
    job.gw = (int)lrintf(job.region[2]);
    job.gh = (int)lrintf(job.region[3]);
    if (job.gw < 1)
        job.gw = 1;
    if (job.gh < 1)
        job.gh = 1;
    job.region_is_mask = job.region[0] == 0.0f && job.region[1] == 0.0f &&
                         job.gw == mask->width && job.gh == mask->height &&
                         job.region[2] == (float)mask->width && job.region[3] == (float)mask->height;
    if (kr_fx_resolve_sampling(frame->width, frame->height, NULL, job.gw, job.gh, 0, 1, &job.grid,
                               NULL, err))
        return keyer_error_prefix(err, "keyer_refine_run: ");
    job.grid.src = job.guide;
    job.upsample = p->upsample;
    job.need_luma = p->upsample == KEYER_UPSAMPLE_GUIDED || p->temporal != KEYER_TEMPORAL_OFF;
    job.radius = p->guided_radius;
    job.eps = p->guided_eps;
    job.threshold = p->threshold;
    job.lo = p->threshold_low;
    job.inv_range = 1.0f / (p->threshold_high - p->threshold_low);
    job.dilate = p->dilate;
    job.feather = p->feather;
    job.temporal.mode = p->temporal;
    job.temporal.strength = p->temporal_strength;
    job.temporal.inv_motion = 1.0f / p->motion_tolerance;
    job.temporal.inv_mask = 1.0f / p->mask_tolerance;
    job.scene_cut = p->scene_cut;
    job.stream_id = stream_id;
    stream_history *h = &refine->history[stream_id];
    job.history_valid = h->valid && h->gw == job.gw && h->gh == job.gh &&
                        h->memory == frame->memory;
    job.out = alpha->data[0];
    job.out_stride = alpha->stride[0];
    job.out_f32 = alpha->format == KEYER_PIXEL_FORMAT_GRAYF32;
    job.stream = p->stream;
    job.device = frame->device;

    const kr_fx_backend *backend;
    void *state;
    if (kr_fx_state(refine->slots, frame->memory, &refine->config, &backend, &state, err))
        return keyer_error_prefix(err, "keyer_refine_run: ");
    h->valid = 0;
    if (backend->refine(state, &job, err))
        return keyer_error_prefix(err, "keyer_refine_run (%s): ", backend->name);
    if (p->temporal != KEYER_TEMPORAL_OFF) {
        h->valid = 1;
        h->gw = job.gw;
        h->gh = job.gh;
        h->memory = frame->memory;
    }
    return KEYER_OK;
}
