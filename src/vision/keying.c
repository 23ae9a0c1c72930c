/* The keying chain as one object (keyer/keying.h): preparation, network, mask, refinement and
 * compositing per frame, with the effects where the frame is and the network on its backend. */
#include "keyer/keying.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "keyer/people.h"
#include "vision/segmodel.h"

enum { MEM_HOST = 0, MEM_CUDA = 1 };

struct keyer_keying {
    keyer_keying_params p;          /* p.model not kept (see name) */
    char name[512];                 /* the model as given, for messages */
    const kr_device_fns *dev;       /* the CUDA table; NULL without CUDA */
    keyer_model *model;
    keyer_runtime *rt;
    int rt_cuda;                    /* the runtime's tensors are in CUDA memory */
    int in_w, in_h;                 /* the network's input */
    int mask_w, mask_h, mask_c;     /* its mask output: cells and channels per cell */
    int mask_index, mask_plain, letterbox; /* mask_plain: the output is the mask itself */
    kr_segmodel seg;                /* input, mask output and its kind (seg.model moves out) */
    keyer_people *people;           /* model "people": the people keyer instead of a network */
    keyer_model_desc desc;          /* copy of *p.model_desc */
    size_t in_bytes, out_bytes, mask_bytes; /* input tensor, mask output, one-channel mask */

    /* the effects of each memory ([MEM_HOST], [MEM_CUDA]: made at the first CUDA frame) */
    keyer_prepare *prep[2];
    keyer_refine *refine[2];
    keyer_composite *comp[2];
    keyer_frame *alpha[2];          /* the matte when the caller passes none */
    int last_mem;                   /* memory of the last frame; -1 before the first */

    /* host staging: a CUDA runtime with host frames, masks that are not the output itself */
    float *host_in, *host_out, *host_mask;

    /* CUDA */
    int ordinal;                    /* the device of the stream and scratch; -1: none yet */
    void *stream;                   /* where CUDA work is queued: p.stream or own_stream */
    void *own_stream;
    void *event;                    /* for stream_wait / stream_signal, made when first needed */
    void *dev_in;                   /* a host runtime fed from CUDA frames: the prepared input */
    float *dev_mask;                /* CUDA frames: the mask when not the output itself */
    int cuda_queued;                /* CUDA work was queued */

    keyer_frame mask;               /* view of the last mask (no buffers) */
    int mask_valid;

    keyer_frame *bg;                /* the caller's background (a reference), or NULL */
    keyer_frame *bg_moved;          /* it copied into the other memory */
    int bg_current[2];              /* comp[m] holds the current background (or none) */
};

static const keyer_option_choice backend_choices[] = {
    {"reference", KEYER_BACKEND_REFERENCE, "plain C, the oracle (slow)"},
    {"cpu", KEYER_BACKEND_CPU, "XNNPACK on the CPU's cores"},
    {"cuda", KEYER_BACKEND_CUDA, "an NVIDIA GPU"},
    {NULL, 0, NULL},
};
static const keyer_option_choice precision_choices[] = {
    {"f32", KEYER_PRECISION_F32, "float32 throughout"},
    {"f16", KEYER_PRECISION_F16, "half-precision weights and activations (cuda only)"},
    {"auto", KEYER_PRECISION_AUTO, "f16 on cuda where the model meets keyer's half-precision "
                                   "bounds, else f32"},
    {NULL, 0, NULL},
};
static const keyer_option_choice fit_choices[] = {
    {"model", KEYER_KEYING_FIT_MODEL, "as the model's registry entry says (the main job's)"},
    {"stretch", KEYER_KEYING_FIT_STRETCH, "stretch the frame over the network's input"},
    {"letterbox", KEYER_KEYING_FIT_LETTERBOX, "keep the frame's aspect ratio"},
    {NULL, 0, NULL},
};

#define OFF(f) offsetof(keyer_keying_params, f)
static const keyer_option keying_options[] = {
    {"model", "segmentation model: registry name, .tflite or .onnx path, or people (the person "
     "detector and a pose body mask per person, for people far from the camera)", OFF(model),
     KEYER_OPTION_STRING, 0, 0, 4095, NULL, NULL, "selfie", "NAME", 0, 0u},
    KEYER_OPTION_FIELD("backend", "where the network runs", OFF(backend), KEYER_OPTION_ENUM,
        KEYER_BACKEND_CPU, 0, 0, backend_choices),
    KEYER_OPTION_FIELD("precision", "the network's arithmetic", OFF(precision),
        KEYER_OPTION_ENUM, KEYER_PRECISION_AUTO, 0, 0, precision_choices),
    KEYER_OPTION_FIELD("device", "CUDA device ordinal of the cuda backend", OFF(device),
        KEYER_OPTION_INT, 0, 0, 63, NULL),
    KEYER_OPTION_FIELD("fit", "how a frame is fitted into the network's input", OFF(fit),
        KEYER_OPTION_ENUM, KEYER_KEYING_FIT_MODEL, 0, 0, fit_choices),
    KEYER_OPTION_FIELD("threads", "CPU threads of every step (0: one per core)", OFF(threads),
        KEYER_OPTION_INT, 0, 0, 256, NULL),
    KEYER_OPTION_END,
};
#undef OFF

const keyer_option *keyer_keying_options(void) { return keying_options; }

keyer_keying_params keyer_keying_params_defaults(void)
{
    keyer_keying_params p;
    memset(&p, 0, sizeof(p));
    keyer_options_set_defaults(keying_options, &p, NULL);
    p.refine = keyer_refine_params_defaults();
    p.composite = keyer_composite_params_defaults();
    return p;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

/* The effects of one memory, with the object's stream for CUDA. */
static keyer_status make_effects(keyer_keying *k, int mem, keyer_error *err)
{
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    if (k->people) { /* no network input: any valid preparation (never run) */
        pp.width = pp.height = 8;
    } else {
        kr_segmodel_prepare_params(&k->seg, &pp);
    }
    pp.fit = k->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp.threads = k->p.threads;
    keyer_refine_params rp = k->p.refine;
    rp.max_streams = 1;
    rp.threads = k->p.threads;
    keyer_composite_params cp = k->p.composite;
    cp.threads = k->p.threads;
    pp.stream = rp.stream = cp.stream = mem == MEM_CUDA ? k->stream : NULL;
    keyer_status st;
    if ((st = keyer_prepare_create(&pp, &k->prep[mem], err)) ||
        (st = keyer_refine_create(&rp, &k->refine[mem], err)) ||
        (st = keyer_composite_create(&cp, &k->comp[mem], err)))
        return keyer_error_prefix(err, "keying: ");
    return KEYER_OK;
}

/* The stream on CUDA device @p ordinal (the caller's or the object's own), once. */
static keyer_status use_device(keyer_keying *k, int ordinal, keyer_error *err)
{
    if (!k->dev)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keying: a CUDA frame, but keyer was built without CUDA");
    if (k->ordinal >= 0) {
        if (ordinal != k->ordinal)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keying: a frame on CUDA device %d, but this object works on "
                                   "device %d", ordinal, k->ordinal);
        return KEYER_OK;
    }
    if (k->p.stream) {
        k->stream = k->p.stream;
    } else {
        keyer_status st = k->dev->stream_create(ordinal, &k->own_stream, err);
        if (st)
            return keyer_error_prefix(err, "keying: ");
        k->stream = k->own_stream;
    }
    k->ordinal = ordinal;
    return KEYER_OK;
}

/* The model as described (p.model_desc, the registry, or the defaults for a file), and its
 * geometry. */
static keyer_status open_model(keyer_keying *k, keyer_error *err)
{
    keyer_status st = kr_segmodel_open(&k->seg, k->name, k->p.model_desc, err);
    if (st)
        return st;
    k->model = k->seg.model;
    k->seg.model = NULL;
    k->in_w = k->seg.in_w;
    k->in_h = k->seg.in_h;
    k->mask_w = k->seg.mask_w;
    k->mask_h = k->seg.mask_h;
    k->mask_c = k->seg.mask_c;
    k->mask_index = k->seg.output;
    k->mask_plain = k->seg.kind == KEYER_MASK_PROBABILITY &&
                    (k->mask_c == 1 || k->seg.mask_planar); /* channel 0: the first values */
    size_t cells = (size_t)k->mask_w * (size_t)k->mask_h;
    k->in_bytes = (size_t)k->in_w * (size_t)k->in_h * 3 * sizeof(float);
    k->out_bytes = cells * (size_t)k->mask_c * sizeof(float);
    k->mask_bytes = cells * sizeof(float);
    return KEYER_OK;
}

/* Model "people": the people keyer on the backend, its mask KEYER_PEOPLE_MASK_SIDE square
 * stretched over the frame, the host effects. */
static keyer_status open_people(keyer_keying *k, keyer_error *err)
{
    keyer_people_params pp = keyer_people_params_defaults();
    pp.backend = k->p.backend;
    pp.device = k->p.device;
    pp.threads = k->p.threads;
    pp.logger = k->p.logger;
    keyer_status st = keyer_people_create(&pp, &k->people, err);
    if (st)
        return st;
    k->in_w = k->in_h = k->mask_w = k->mask_h = KEYER_PEOPLE_MASK_SIDE;
    k->mask_c = 1;
    k->mask_plain = 0;
    k->letterbox = 0;
    k->mask_bytes = (size_t)k->mask_w * (size_t)k->mask_h * sizeof(float);
    if (!(k->host_mask = malloc(k->mask_bytes)))
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keying: out of memory");
    return make_effects(k, MEM_HOST, err);
}

/* Model "people" on a host frame: the people mask into host_mask and the mask view. */
static keyer_status people_mask(keyer_keying *k, const keyer_frame *frame, keyer_error *err)
{
    int n = 0;
    keyer_status st = keyer_people_run(k->people, frame, NULL, 0, &n, err);
    if (st)
        return st;
    keyer_frame *m = &k->mask;
    memset(m, 0, sizeof(*m));
    m->format = KEYER_PIXEL_FORMAT_GRAYF32;
    m->width = k->mask_w;
    m->height = k->mask_h;
    m->memory = KEYER_MEMORY_HOST;
    m->data[0] = (uint8_t *)k->host_mask;
    m->stride[0] = (ptrdiff_t)k->mask_w * (ptrdiff_t)sizeof(float);
    m->pts = INT64_MIN;
    if ((st = keyer_people_mask(k->people, m, err)))
        return st;
    k->mask_valid = 1;
    return KEYER_OK;
}

keyer_status keyer_keying_create(const keyer_keying_params *params, keyer_keying **out,
                                 keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_keying_create: %s is NULL", !params ? "params" : "out");
    *out = NULL;
    if (keyer_options_validate(keying_options, params, "keying parameters", err))
        return err->status;
    keyer_keying *k = calloc(1, sizeof(*k));
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keying: out of memory");
    k->p = *params;
    k->p.model = NULL;
    if (params->model_desc) { /* the caller's copy need not outlive the call */
        k->desc = *params->model_desc;
        k->p.model_desc = &k->desc;
    }
    k->ordinal = -1;
    k->last_mem = -1;
    k->bg_current[0] = k->bg_current[1] = 1;
    k->dev = kr_device_cuda();
    snprintf(k->name, sizeof(k->name), "%s", params->model ? params->model : "selfie");
    keyer_status st;
    const keyer_model_entry *entry = keyer_registry_find(k->name);
    if (entry && entry->mask_output < 0 && entry->task != KEYER_TASK_SEGMENTATION) {
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                             "model %s: not a segmentation model (it has no person mask)",
                             k->name);
        goto fail;
    }
    if (params->backend == KEYER_BACKEND_CUDA && !k->dev) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "keying: keyer was built without CUDA, so the cuda backend is not "
                             "available");
        goto fail;
    }
    if (!strcmp(k->name, KEYER_PEOPLE_MODEL)) {
        if ((st = open_people(k, err)))
            goto fail;
        *out = k;
        return KEYER_OK;
    }
    if ((st = open_model(k, err)))
        goto fail;
    k->letterbox = params->fit == KEYER_KEYING_FIT_LETTERBOX ||
                   (params->fit == KEYER_KEYING_FIT_MODEL && k->seg.desc.letterbox);
    k->rt_cuda = params->backend == KEYER_BACKEND_CUDA;
    if (k->rt_cuda && (st = use_device(k, params->device, err)))
        goto fail;
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = params->backend;
    /* an explicit f16 off CUDA is the runtime's error to report, as before */
    rp.precision = params->precision == KEYER_PRECISION_AUTO
                       ? keyer_registry_precision(k->seg.entry, KEYER_PRECISION_AUTO, k->rt_cuda)
                       : params->precision;
    rp.threads = params->threads;
    rp.device = params->device;
    rp.stream = k->rt_cuda ? k->stream : NULL;
    rp.logger = params->logger;
    if ((st = keyer_runtime_create(k->model, &rp, &k->rt, err)) ||
        (st = make_effects(k, MEM_HOST, err)))
        goto fail;
    /* host masks that are not the output itself; the staging of a CUDA runtime */
    if (!k->mask_plain && !(k->host_mask = malloc(k->mask_bytes)))
        goto oom;
    if (k->rt_cuda && (!(k->host_in = malloc(k->in_bytes)) ||
                       !(k->host_out = malloc(k->out_bytes))))
        goto oom;
    *out = k;
    return KEYER_OK;
oom:
    st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keying: out of memory");
fail:
    keyer_keying_destroy(&k);
    return st;
}

void keyer_keying_destroy(keyer_keying **pk)
{
    if (!pk || !*pk)
        return;
    keyer_keying *k = *pk;
    if (k->stream && k->cuda_queued)
        k->dev->stream_sync(k->ordinal, k->stream, NULL); /* its buffers may still be in use */
    for (int m = 0; m < 2; m++) {
        keyer_prepare_destroy(&k->prep[m]);
        keyer_refine_destroy(&k->refine[m]);
        keyer_composite_destroy(&k->comp[m]);
        keyer_frame_destroy(&k->alpha[m]);
    }
    keyer_frame_destroy(&k->bg);
    keyer_frame_destroy(&k->bg_moved);
    keyer_runtime_destroy(&k->rt);
    keyer_model_destroy(&k->model);
    keyer_people_destroy(&k->people);
    free(k->host_in);
    free(k->host_out);
    free(k->host_mask);
    if (k->dev && k->ordinal >= 0) {
        k->dev->free(k->ordinal, k->dev_in);
        k->dev->free(k->ordinal, k->dev_mask);
        k->dev->event_destroy(k->ordinal, k->event);
        k->dev->stream_destroy(k->ordinal, k->own_stream);
    }
    free(k);
    *pk = NULL;
}

/* ---- per frame ------------------------------------------------------------------------------- */

/* The first frame in CUDA memory: the stream, the CUDA effects and the device scratch. */
static keyer_status cuda_ready(keyer_keying *k, const keyer_frame *frame, keyer_error *err)
{
    keyer_status st;
    if ((st = use_device(k, frame->device, err)))
        return st;
    if (k->comp[MEM_CUDA])
        return KEYER_OK;
    if ((!k->rt_cuda && !k->dev_in &&
         (st = k->dev->alloc(k->ordinal, k->in_bytes, &k->dev_in, err))) ||
        ((!k->rt_cuda || !k->mask_plain) && !k->dev_mask &&
         (st = k->dev->alloc(k->ordinal, k->mask_bytes, (void **)&k->dev_mask, err))) ||
        (st = make_effects(k, MEM_CUDA, err))) {
        /* so that the next CUDA frame tries again */
        keyer_prepare_destroy(&k->prep[MEM_CUDA]);
        keyer_refine_destroy(&k->refine[MEM_CUDA]);
        keyer_composite_destroy(&k->comp[MEM_CUDA]);
        return keyer_error_prefix(err, "keying: ");
    }
    return KEYER_OK;
}

/* Allocates an empty @p f as a @p format frame of @p like's size and memory. */
static keyer_status alloc_like(keyer_keying *k, keyer_frame *f, keyer_pixel_format format,
                               const keyer_frame *like, keyer_error *err)
{
    if (like->memory == KEYER_MEMORY_CUDA)
        return kr_device_frame_alloc(k->dev, like->device, f, format, like->width, like->height,
                                     err);
    return keyer_frame_alloc(f, format, like->width, like->height, NULL, err);
}

/* An output frame the caller passed: allocated when empty, else in the frame's memory. */
static keyer_status output_ready(keyer_keying *k, keyer_frame *f, keyer_pixel_format format,
                                 const keyer_frame *frame, const char *what, keyer_error *err)
{
    if (!f->data[0]) {
        keyer_status st = alloc_like(k, f, format, frame, err);
        return st ? keyer_error_prefix(err, "keying: %s: ", what) : KEYER_OK;
    }
    if (f->memory != frame->memory ||
        (f->memory == KEYER_MEMORY_CUDA && f->device != frame->device))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keying: the %s is in %s memory, the frame in %s memory", what,
                               f->memory == KEYER_MEMORY_CUDA ? "CUDA" : "host",
                               frame->memory == KEYER_MEMORY_CUDA ? "CUDA" : "host");
    return KEYER_OK;
}

/* The network's input from @p frame; *geom receives where the frame went. */
static keyer_status make_input(keyer_keying *k, int mem, const keyer_frame *frame,
                               keyer_prepare_geometry *geom, keyer_error *err)
{
    const keyer_frame *frames[1] = {frame};
    keyer_status st;
    if (mem == MEM_HOST && !k->rt_cuda)
        return keyer_prepare_run(k->prep[mem], frames, NULL, 1,
                                 keyer_runtime_input_data(k->rt, 0), geom, err);
    if (mem == MEM_HOST) /* a CUDA runtime: through the host staging */
        return (st = keyer_prepare_run(k->prep[mem], frames, NULL, 1, k->host_in, geom, err))
                   ? st
                   : keyer_runtime_set_input(k->rt, 0, k->host_in, k->in_bytes, err);
    if (k->rt_cuda)
        return keyer_prepare_run(k->prep[mem], frames, NULL, 1,
                                 keyer_runtime_input_data(k->rt, 0), geom, err);
    /* a host runtime: prepared on the device, then copied down */
    if ((st = keyer_prepare_run(k->prep[mem], frames, NULL, 1, k->dev_in, geom, err)) ||
        (st = k->dev->copy(k->ordinal, keyer_runtime_input_data(k->rt, 0), k->dev_in,
                           k->in_bytes, k->stream, err)))
        return st;
    return k->dev->stream_sync(k->ordinal, k->stream, err);
}

/* The person mask in host memory from the whole mask output @p out (host). */
static const float *host_mask_of(keyer_keying *k, const float *out)
{
    if (k->mask_plain)
        return out;
    kr_segmask_cpu(&k->seg, k->host_mask, out, (size_t)k->mask_w * (size_t)k->mask_h);
    return k->host_mask;
}

/* Runs the network and points the mask view at the person mask in the frame's memory. */
static keyer_status make_mask(keyer_keying *k, int mem, const keyer_frame *frame,
                              keyer_error *err)
{
    keyer_status st = keyer_runtime_run(k->rt, err);
    if (st)
        return st;
    const float *mask;
    if (!k->rt_cuda) {
        mask = host_mask_of(k, keyer_runtime_output_data(k->rt, k->mask_index));
    } else if (mem == MEM_HOST) {
        if ((st = keyer_runtime_get_output(k->rt, k->mask_index, k->host_out, k->out_bytes,
                                           err)))
            return st;
        mask = host_mask_of(k, k->host_out);
    } else {
        /* CUDA runtime, CUDA frame: the mask of its kind, on the device */
        const float *out = keyer_runtime_output_data(k->rt, k->mask_index);
        size_t cells = (size_t)k->mask_w * (size_t)k->mask_h;
        mask = out;
        if (!k->mask_plain) {
            if ((st = kr_segmask_cuda(&k->seg, k->ordinal, k->dev_mask, out, cells, k->stream,
                                      err)))
                return st;
            mask = k->dev_mask;
        }
    }
    if (mem == MEM_CUDA && !k->rt_cuda) { /* a host runtime: the mask goes up */
        if ((st = k->dev->copy(k->ordinal, k->dev_mask, mask, k->mask_bytes, k->stream, err)))
            return st;
        mask = k->dev_mask;
    }
    keyer_frame *m = &k->mask;
    memset(m, 0, sizeof(*m));
    m->format = KEYER_PIXEL_FORMAT_GRAYF32;
    m->width = k->mask_w;
    m->height = k->mask_h;
    m->memory = mem == MEM_CUDA ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    m->device = mem == MEM_CUDA ? k->ordinal : 0;
    m->data[0] = (uint8_t *)(uintptr_t)mask;
    m->stride[0] = (ptrdiff_t)k->mask_w * (ptrdiff_t)sizeof(float);
    m->pts = INT64_MIN;
    k->mask_valid = 1;
    return KEYER_OK;
}

/* Gives comp[mem] the current background, copied into the frame's memory when needed. */
static keyer_status background_ready(keyer_keying *k, int mem, const keyer_frame *frame,
                                     keyer_error *err)
{
    if (k->bg_current[mem])
        return KEYER_OK;
    const keyer_frame *bg = k->bg;
    keyer_status st;
    if (bg && (int)(bg->memory == KEYER_MEMORY_CUDA) != mem) {
        if (!k->bg_moved || k->bg_moved->memory != frame->memory) {
            keyer_frame_destroy(&k->bg_moved);
            if ((st = keyer_frame_create(&k->bg_moved, err)))
                return st;
            keyer_frame like = *bg;
            like.memory = frame->memory;
            like.device = frame->device;
            /* the copy runs on the device holding the CUDA side (waiting for it) */
            int ordinal = bg->memory == KEYER_MEMORY_CUDA ? bg->device : frame->device;
            if ((st = alloc_like(k, k->bg_moved, bg->format, &like, err)) ||
                (st = kr_device_frame_copy(k->dev, ordinal, k->bg_moved, bg,
                                           ordinal == k->ordinal ? k->stream : NULL, err)))
                return keyer_error_prefix(err, "keying: background: ");
        }
        bg = k->bg_moved;
    }
    if ((st = keyer_composite_set_background(k->comp[mem], bg, err)))
        return st;
    k->bg_current[mem] = 1;
    return KEYER_OK;
}

/* The format an empty output gets in the compositing mode. */
static keyer_pixel_format output_format(const keyer_keying *k, const keyer_frame *frame)
{
    switch (k->p.composite.mode) {
    case KEYER_COMPOSITE_ALPHA:
    case KEYER_COMPOSITE_ALPHA_PREMULTIPLIED: return KEYER_PIXEL_FORMAT_RGBA;
    case KEYER_COMPOSITE_MASK: return KEYER_PIXEL_FORMAT_GRAY8;
    default: return frame->format;
    }
}

keyer_status keyer_keying_process(keyer_keying *k, const keyer_frame *frame, keyer_frame *out,
                                  keyer_frame *matte, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err;
    if (!k || !frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_keying_process: %s is NULL", !k ? "keying" : "frame");
    keyer_status st = keyer_frame_check(frame, err);
    if (st)
        return keyer_error_prefix(err, "keying: frame: ");
    int mem = frame->memory == KEYER_MEMORY_CUDA ? MEM_CUDA : MEM_HOST;
    if (mem == MEM_CUDA && k->people)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keying: model people keys host frames (its networks run on the "
                               "backend); this frame is in CUDA memory");
    if (mem == MEM_CUDA && (st = cuda_ready(k, frame, err)))
        return st;
    keyer_frame *alpha = matte;
    if (alpha) {
        if ((st = output_ready(k, alpha, KEYER_PIXEL_FORMAT_GRAY8, frame, "matte", err)))
            return st;
    } else {
        keyer_frame **a = &k->alpha[mem];
        if (!*a && (st = keyer_frame_create(a, err)))
            return st;
        if ((*a)->width != frame->width || (*a)->height != frame->height) {
            if ((st = alloc_like(k, *a, KEYER_PIXEL_FORMAT_GRAY8, frame, err)))
                return keyer_error_prefix(err, "keying: matte: ");
        }
        alpha = *a;
    }
    if (out && (st = output_ready(k, out, output_format(k, frame), frame, "output", err)))
        return st;
    if (out && k->p.composite.mode == KEYER_COMPOSITE_IMAGE && !k->bg)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keying: composite mode image without a background");

    /* a new memory: its refinement's history is older than the last frame */
    if (k->last_mem >= 0 && k->last_mem != mem)
        keyer_refine_reset(k->refine[mem], -1, NULL);
    k->last_mem = mem;
    k->mask_valid = 0;
    if (mem == MEM_CUDA || k->rt_cuda)
        k->cuda_queued = 1;

    keyer_prepare_geometry geom;
    if (k->people) {
        if ((st = people_mask(k, frame, err)))
            return st;
    } else if ((st = make_input(k, mem, frame, &geom, err)) ||
               (st = make_mask(k, mem, frame, err))) {
        return st;
    }
    /* the part of the mask covering the frame (letterboxed) */
    keyer_rectf region, *rp = NULL;
    if (k->letterbox) {
        float sx = (float)k->mask_w / (float)k->in_w, sy = (float)k->mask_h / (float)k->in_h;
        region.x = geom.content.x * sx;
        region.y = geom.content.y * sy;
        region.width = geom.content.width * sx;
        region.height = geom.content.height * sy;
        rp = &region;
    }
    if ((st = keyer_refine_run(k->refine[mem], 0, frame, &k->mask, rp, alpha, err)))
        return st;
    if (!out)
        return KEYER_OK;
    if (k->p.composite.mode == KEYER_COMPOSITE_IMAGE && (st = background_ready(k, mem, frame, err)))
        return st;
    return keyer_composite_run(k->comp[mem], frame, alpha, out, err);
}

const keyer_frame *keyer_keying_mask(const keyer_keying *k)
{
    return k && k->mask_valid ? &k->mask : NULL;
}

keyer_status keyer_keying_set_background(keyer_keying *k, const keyer_frame *background,
                                         keyer_error *err)
{
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_keying_set_background: keying is NULL");
    keyer_frame *copy = NULL;
    keyer_status st;
    if (background) {
        if ((st = keyer_frame_check(background, err)))
            return keyer_error_prefix(err, "keying: background: ");
        switch (background->format) {
        case KEYER_PIXEL_FORMAT_NV12:
        case KEYER_PIXEL_FORMAT_P010:
        case KEYER_PIXEL_FORMAT_YUV420P:
        case KEYER_PIXEL_FORMAT_RGB24:
        case KEYER_PIXEL_FORMAT_RGBA: break;
        default:
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keying: background: unsupported format %s",
                                   keyer_pixel_format_name(background->format));
        }
        if (background->memory == KEYER_MEMORY_CUDA && !k->dev)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "keying: background: a CUDA frame, but keyer was built "
                                   "without CUDA");
        if ((st = keyer_frame_create(&copy, err)) ||
            (st = keyer_frame_ref(copy, background, err))) {
            keyer_frame_destroy(&copy);
            return st;
        }
    }
    keyer_frame_destroy(&k->bg);
    keyer_frame_destroy(&k->bg_moved);
    k->bg = copy;
    k->bg_current[0] = k->bg_current[1] = 0;
    return KEYER_OK;
}

void keyer_keying_reset(keyer_keying *k)
{
    if (!k)
        return;
    for (int m = 0; m < 2; m++)
        if (k->refine[m])
            keyer_refine_reset(k->refine[m], -1, NULL);
    keyer_people_reset(k->people);
    k->mask_valid = 0;
}

const keyer_model_entry *keyer_keying_model_entry(const keyer_keying *k)
{
    return k ? k->seg.entry : NULL;
}

void *keyer_keying_stream(const keyer_keying *k)
{
    return k ? k->stream : NULL;
}

/* The event of stream_wait / stream_signal, made once. */
static keyer_status event_ready(keyer_keying *k, keyer_error *err)
{
    keyer_status st;
    if (!k->dev)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keying: keyer was built without CUDA (no streams to order)");
    if (k->ordinal < 0 && (st = use_device(k, k->p.device, err)))
        return st;
    if (!k->event && (st = k->dev->event_create(k->ordinal, &k->event, err)))
        return keyer_error_prefix(err, "keying: ");
    return KEYER_OK;
}

keyer_status keyer_keying_stream_wait(keyer_keying *k, void *stream, keyer_error *err)
{
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_keying_stream_wait: keying is NULL");
    keyer_status st = event_ready(k, err);
    if (st || stream == k->stream)
        return st;
    if ((st = k->dev->event_record(k->ordinal, k->event, stream, err)) ||
        (st = k->dev->event_wait(k->ordinal, k->stream, k->event, err)))
        return keyer_error_prefix(err, "keying: ");
    return KEYER_OK;
}

keyer_status keyer_keying_stream_signal(keyer_keying *k, void *stream, keyer_error *err)
{
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_keying_stream_signal: keying is NULL");
    if (k->dev && (!k->cuda_queued || (k->ordinal >= 0 && stream == k->stream)))
        return KEYER_OK;
    keyer_status st = event_ready(k, err);
    if (st)
        return st;
    if ((st = k->dev->event_record(k->ordinal, k->event, k->stream, err)) ||
        (st = k->dev->event_wait(k->ordinal, stream, k->event, err)))
        return keyer_error_prefix(err, "keying: ");
    return KEYER_OK;
}

keyer_status keyer_keying_synchronize(keyer_keying *k, keyer_error *err)
{
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_keying_synchronize: keying is NULL");
    if (!k->stream || !k->cuda_queued)
        return KEYER_OK;
    keyer_status st = k->dev->stream_sync(k->ordinal, k->stream, err);
    return st ? keyer_error_prefix(err, "keying: ") : KEYER_OK;
}
