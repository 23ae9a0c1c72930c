/* Compositing: parameters, validation, background bookkeeping and dispatch. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "keyer/effects.h"
#include "render/fx_backend.h"

/* What a backend's converted background was built from. */
typedef struct bg_key {
    unsigned long generation;
    int width, height;
    keyer_pixel_format format;
    keyer_color_matrix matrix;
    keyer_color_range range;
    keyer_memory_type memory;
    int valid;
} bg_key;

struct keyer_composite {
    keyer_composite_params params;
    kr_fx_config config;
    void *slots[KR_FX_BACKENDS];
    keyer_frame *background;  /* our reference, or empty */
    unsigned long generation; /* bumped by each set_background */
    bg_key built;
};

static const keyer_option_choice mode_choices[] = {
    {"blur", KEYER_COMPOSITE_BLUR, "blur the background"},
    {"color", KEYER_COMPOSITE_COLOR, "replace the background by a colour"},
    {"image", KEYER_COMPOSITE_IMAGE, "replace the background by an image or video frame"},
    {"green", KEYER_COMPOSITE_GREEN_SCREEN, "green screen (key_color) for downstream keying"},
    {"alpha", KEYER_COMPOSITE_ALPHA, "RGBA with straight alpha"},
    {"premultiplied", KEYER_COMPOSITE_ALPHA_PREMULTIPLIED, "RGBA with premultiplied alpha"},
    {"mask", KEYER_COMPOSITE_MASK, "the matte alone"},
    {NULL, 0, NULL},
};

#define OFF(f) offsetof(keyer_composite_params, f)
static const keyer_option composite_options[] = {
    KEYER_OPTION_FIELD("mode", "what to produce", OFF(mode), KEYER_OPTION_ENUM,
        KEYER_COMPOSITE_BLUR, 0, 0, mode_choices),
    KEYER_OPTION_FIELD("blur_radius", "background blur: Gaussian sigma in pixels", OFF(blur_radius),
        KEYER_OPTION_FLOAT, 12, 2, 256, NULL),
    KEYER_OPTION_FIELD("color", "background colour for mode=color", OFF(color), KEYER_OPTION_COLOR,
        0x000000, 0, 0, NULL),
    KEYER_OPTION_FIELD("key_color", "background colour for mode=green", OFF(key_color),
        KEYER_OPTION_COLOR, 0x00B140, 0, 0, NULL),
    KEYER_OPTION_FIELD("dither", "ordered dither when rounding blended samples", OFF(dither),
        KEYER_OPTION_BOOL, 1, 0, 1, NULL),
    KEYER_OPTION_FIELD("threads", "CPU threads (0: one per core)", OFF(threads), KEYER_OPTION_INT,
        0, 0, 256, NULL),
    KEYER_OPTION_END,
};
#undef OFF

const keyer_option *keyer_composite_options(void) { return composite_options; }

keyer_composite_params keyer_composite_params_defaults(void)
{
    keyer_composite_params p;
    memset(&p, 0, sizeof(p));
    keyer_options_set_defaults(composite_options, &p, NULL);
    return p;
}

keyer_status keyer_composite_create(const keyer_composite_params *params,
                                    keyer_composite **out, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_create: %s is NULL", !params ? "params" : "out");
    *out = NULL;
    if (keyer_options_validate(composite_options, params, "composite parameters", err))
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    keyer_composite *c = keyer_calloc(params->allocator, sizeof(*c), KEYER_ALIGNMENT);
    if (!c)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "keyer_composite_create: out of memory");
    c->params = *params;
    c->config.threads = params->threads;
    c->config.allocator = params->allocator;
    c->config.max_streams = 1;
    keyer_status st = keyer_frame_create(&c->background, err);
    const kr_fx_backend *b;
    void *state;
    if (st || kr_fx_state(c->slots, KEYER_MEMORY_HOST, &c->config, &b, &state, err)) {
        keyer_composite_destroy(&c);
        return keyer_error_prefix(err, "keyer_composite_create: ");
    }
    *out = c;
    return KEYER_OK;
}

void keyer_composite_destroy(keyer_composite **comp)
{
    if (!comp || !*comp)
        return;
    keyer_composite *c = *comp;
    kr_fx_states_destroy(c->slots);
    keyer_frame_destroy(&c->background);
    keyer_free(c->params.allocator, c);
    *comp = NULL;
}

keyer_status keyer_composite_set_background(keyer_composite *comp, const keyer_frame *background,
                                            keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!comp)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_set_background: comp is NULL");
    if (!background) {
        keyer_frame_unref(comp->background);
        comp->generation++;
        return KEYER_OK;
    }
    if (kr_fx_check_frame(background, "keyer_composite_set_background: background", err))
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    if (!kr_fx_format_supported(background->format))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_set_background: format %s is not supported (use "
                               "nv12, p010, yuv420p, rgb24 or rgba)",
                               keyer_pixel_format_name(background->format));
    if (background == comp->background)
        return KEYER_OK;
    if (keyer_frame_ref(comp->background, background, err))
        return keyer_error_prefix(err, "keyer_composite_set_background: ");
    comp->generation++;
    return KEYER_OK;
}

static void copy_metadata(keyer_frame *out, const keyer_frame *in, int colour)
{
    out->pts = in->pts;
    out->duration = in->duration;
    out->time_base = in->time_base;
    out->rotation = in->rotation;
    out->flags = in->flags;
    if (colour) {
        out->matrix = in->matrix;
        out->range = in->range;
    }
}

/* Gaussian of sigma `radius` on a grid of cells factor x factor: factor is the largest power
 * of two <= radius (at least 2), so the grid's own sigma is in [1, 2) and the kernel has at
 * most 13 taps. */
static void blur_setup(kr_composite_job *job, float radius)
{
    int f = 2;
    while ((float)(f * 2) <= radius)
        f *= 2;
    job->factor = f;
    job->gw = (job->width + f - 1) / f;
    job->gh = (job->height + f - 1) / f;
    double sigma = (double)radius / f;
    int r = (int)ceil(3.0 * sigma);
    if (2 * r + 1 > KR_BLUR_MAX_TAPS)
        r = (KR_BLUR_MAX_TAPS - 1) / 2;
    job->taps = 2 * r + 1;
    double w[KR_BLUR_MAX_TAPS], sum = 0;
    for (int i = -r; i <= r; i++) {
        w[i + r] = exp(-(double)(i * i) / (2.0 * sigma * sigma));
        sum += w[i + r];
    }
    for (int i = 0; i < job->taps; i++)
        job->kernel[i] = (float)(w[i] / sum);
}

keyer_status keyer_composite_run(keyer_composite *comp, const keyer_frame *frame,
                                 const keyer_frame *alpha, keyer_frame *out, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err; /* so that keyer_error_prefix always returns the status */
    if (!comp)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_run: comp is NULL");
    const keyer_composite_params *p = &comp->params;
    if (kr_fx_check_frame(frame, "keyer_composite_run: frame", err) ||
        kr_fx_check_frame(alpha, "keyer_composite_run: alpha", err) ||
        kr_fx_check_frame(out, "keyer_composite_run: out", err))
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    if (alpha->format != KEYER_PIXEL_FORMAT_GRAY8 && alpha->format != KEYER_PIXEL_FORMAT_GRAYF32)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_run: alpha is %s, expected gray8 or grayf32",
                               keyer_pixel_format_name(alpha->format));
    if (alpha->width != frame->width || alpha->height != frame->height ||
        out->width != frame->width || out->height != frame->height)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_run: frame %dx%d, alpha %dx%d and out %dx%d must "
                               "have the same size", frame->width, frame->height, alpha->width,
                               alpha->height, out->width, out->height);
    if (alpha->memory != frame->memory || out->memory != frame->memory)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_run: frame, alpha and out must be in the same memory");
    kr_composite_job job;
    memset(&job, 0, sizeof(job));
    if (kr_fx_src_init(&job.src, frame, err))
        return keyer_error_prefix(err, "keyer_composite_run: frame: ");
    job.mode = p->mode;
    job.width = frame->width;
    job.height = frame->height;
    job.alpha = alpha->data[0];
    job.alpha_stride = alpha->stride[0];
    job.alpha_f32 = alpha->format == KEYER_PIXEL_FORMAT_GRAYF32;
    job.dither = p->dither;
    job.stream = p->stream;
    job.device = frame->device;
    if (frame->format == KEYER_PIXEL_FORMAT_RGBA) {
        job.src_alpha_chan = frame->data[0] + 3;
        job.src_alpha_stride = frame->stride[0];
    }
    keyer_pixel_format want = frame->format;
    const char *want_text = keyer_pixel_format_name(frame->format);
    switch (p->mode) {
    case KEYER_COMPOSITE_ALPHA:
    case KEYER_COMPOSITE_ALPHA_PREMULTIPLIED:
        want = KEYER_PIXEL_FORMAT_RGBA;
        want_text = "rgba";
        job.out_kind = KR_OUT_RGBA;
        break;
    case KEYER_COMPOSITE_MASK:
        if (out->format == KEYER_PIXEL_FORMAT_GRAY8 || out->format == KEYER_PIXEL_FORMAT_GRAYF32) {
            want = out->format;
            job.out_kind = out->format == KEYER_PIXEL_FORMAT_GRAY8 ? KR_OUT_GRAY8 : KR_OUT_GRAYF32;
        }
        want_text = "gray8, grayf32 or the frame's format";
        break;
    default: break;
    }
    if (out->format != want)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_composite_run: out is %s, mode %s needs %s",
                               keyer_pixel_format_name(out->format), mode_choices[p->mode].name,
                               want_text);
    if (job.out_kind == KR_OUT_SAME) {
        keyer_frame tmp = *out;
        tmp.matrix = frame->matrix;
        tmp.range = frame->range;
        if (kr_fx_src_init(&job.dst, &tmp, err))
            return keyer_error_prefix(err, "keyer_composite_run: out: ");
        if (out->format == KEYER_PIXEL_FORMAT_RGBA)
            job.dst_alpha_chan = out->data[0] + 3;
    } else {
        job.out = out->data[0];
        job.out_stride = out->stride[0];
    }
    if (p->mode == KEYER_COMPOSITE_COLOR || p->mode == KEYER_COMPOSITE_GREEN_SCREEN) {
        uint32_t c = p->mode == KEYER_COMPOSITE_COLOR ? p->color : p->key_color;
        float rgb[3] = {(float)((c >> 16) & 255) / 255.0f, (float)((c >> 8) & 255) / 255.0f,
                        (float)(c & 255) / 255.0f};
        kr_src_encode(&job.src, rgb, job.bg_codes);
    }
    if (p->mode == KEYER_COMPOSITE_IMAGE) {
        const keyer_frame *bg = comp->background;
        if (!bg->data[0])
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keyer_composite_run: mode image needs a background "
                                   "(keyer_composite_set_background)");
        if (bg->memory != frame->memory)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keyer_composite_run: the background is in %s memory, the "
                                   "frame in %s", bg->memory == KEYER_MEMORY_CUDA ? "CUDA" : "host",
                                   frame->memory == KEYER_MEMORY_CUDA ? "CUDA" : "host");
        if (kr_fx_src_init(&job.bg.src, bg, err))
            return keyer_error_prefix(err, "keyer_composite_run: background: ");
        /* cover: the largest centred region of the background with the frame's aspect */
        double s = fmax((double)frame->width / bg->width, (double)frame->height / bg->height);
        keyer_roi roi = {(float)(bg->width / 2.0), (float)(bg->height / 2.0),
                         (float)(frame->width / s), (float)(frame->height / s), 0.0f};
        if (kr_fx_resolve_sampling(bg->width, bg->height, &roi, frame->width, frame->height, 0, 1,
                                   &job.bg, NULL, err))
            return keyer_error_prefix(err, "keyer_composite_run: background: ");
        bg_key key;
        memset(&key, 0, sizeof(key));
        key.generation = comp->generation;
        key.width = frame->width;
        key.height = frame->height;
        key.format = frame->format;
        key.matrix = frame->matrix;
        key.range = frame->range;
        key.memory = frame->memory;
        key.valid = 1;
        job.bg_dirty = memcmp(&key, &comp->built, sizeof(key)) != 0;
        job.bg_direct = bg->format == frame->format && bg->width == frame->width &&
                        bg->height == frame->height &&
                        !memcmp(job.bg.src.m, job.src.m, sizeof(job.src.m)) &&
                        !memcmp(job.bg.src.o, job.src.o, sizeof(job.src.o));
        comp->built.valid = 0;
        const kr_fx_backend *backend;
        void *state;
        if (kr_fx_state(comp->slots, frame->memory, &comp->config, &backend, &state, err))
            return keyer_error_prefix(err, "keyer_composite_run: ");
        if (backend->composite(state, &job, err))
            return keyer_error_prefix(err, "keyer_composite_run (%s): ", backend->name);
        comp->built = key;
        copy_metadata(out, frame, 1);
        return KEYER_OK;
    }
    if (p->mode == KEYER_COMPOSITE_BLUR)
        blur_setup(&job, p->blur_radius);
    const kr_fx_backend *backend;
    void *state;
    if (kr_fx_state(comp->slots, frame->memory, &comp->config, &backend, &state, err))
        return keyer_error_prefix(err, "keyer_composite_run: ");
    if (backend->composite(state, &job, err))
        return keyer_error_prefix(err, "keyer_composite_run (%s): ", backend->name);
    copy_metadata(out, frame, job.out_kind == KR_OUT_SAME);
    return KEYER_OK;
}
