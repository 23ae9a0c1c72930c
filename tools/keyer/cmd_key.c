/*
 * keyer key: the keying job on one photo, end to end on the public API:
 * decode -> prepare (model input) -> inference -> refine (matte) -> composite -> PNG.
 *
 *   keyer key PHOTO -o OUT.png [--blur [SIGMA] | --replace COLOR|IMAGE | --alpha | --mask |
 *             --green] [--model NAME] [--backend reference|cpu|cuda] [--threads N]
 *
 * Its options come from an option table (args.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/keyer.h"
#include "keyer/nn.h"

static int is_hex_color(const char *s, uint32_t *rgb)
{
    if (*s == '#')
        s++;
    if (strlen(s) != 6)
        return 0;
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 16);
    if (*end)
        return 0;
    *rgb = (uint32_t)v;
    return 1;
}

typedef struct key_args {
    const char *input, *output, *model_name, *replace;
    keyer_backend backend;
    int threads;
    keyer_composite_params cp;
} key_args;

/* --blur [SIGMA] */
static keyer_status set_blur(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    key_args *k = obj;
    if (value && keyer_option_set(keyer_composite_options(), &k->cp, "blur_radius", value, err))
        return KEYER_STATUS_INVALID_ARGUMENT;
    k->cp.mode = KEYER_COMPOSITE_BLUR;
    return KEYER_OK;
}

/* --alpha, --mask, --green: switches picking the output */
static keyer_status set_output_kind(const keyer_option *o, void *obj, const char *value,
                                    keyer_error *err)
{
    key_args *k = obj;
    if (kc_switch_value(value))
        k->cp.mode = !strcmp(o->name, "alpha")  ? KEYER_COMPOSITE_ALPHA
                     : !strcmp(o->name, "mask") ? KEYER_COMPOSITE_MASK
                                                : KEYER_COMPOSITE_GREEN_SCREEN;
    return KEYER_OK;
}

#define OFF(f) offsetof(key_args, f)
#define SWITCH(name, help)                                                                         \
    {name, help, 0, KEYER_OPTION_BOOL, 0, 0, 1, NULL, set_output_kind, NULL, NULL, 0,            \
     KEYER_OPTION_FLAG_VALUE_OPTIONAL}
static const keyer_option key_options[] = {
    {"output", "the PNG to write", OFF(output), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL,
     "OUT.png", 'o', 0u},
    {"blur", "blur the background (default; Gaussian sigma in pixels, default 12)", 0,
     KEYER_OPTION_FLOAT, 12, 2, 256, NULL, set_blur, NULL, "SIGMA", 0,
     KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    {"replace", "replace the background by a colour (RRGGBB hex) or an image file",
     OFF(replace), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "COLOR|IMAGE", 0, 0u},
    SWITCH("alpha", "write RGBA with the matte as alpha"),
    SWITCH("mask", "write the matte alone"),
    SWITCH("green", "replace the background by chroma-key green"),
    {"model", "segmentation model (selfie, selfie-landscape, pose-*; default selfie)",
     OFF(model_name), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, "selfie", "NAME", 0, 0u},
    {"backend", "inference backend: reference, cpu (default) or cuda", OFF(backend),
     KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, kc_set_backend, "cpu", "NAME", 0, 0u},
    {"threads", "CPU threads, 0: one per core (default 0)", OFF(threads), KEYER_OPTION_INT, 0, 0,
     256, NULL, NULL, NULL, "N", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};
#undef OFF
#undef SWITCH

static int key_input(const kc_args *a, const char *arg)
{
    key_args *k = a->opaque;
    if (k->input)
        return kc_usage_error(a, "one photo at a time (got %s and %s)", k->input, arg);
    k->input = arg;
    return 0;
}

int keyer_cmd_key(int argc, char **argv)
{
    key_args k;
    memset(&k, 0, sizeof(k));
    k.model_name = "selfie";
    k.backend = KEYER_BACKEND_CPU;
    k.cp = keyer_composite_params_defaults();
    kc_table table = {key_options, &k};
    kc_args a = {
        .prog = "keyer key",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer key PHOTO -o OUT.png [--blur [SIGMA] | --replace COLOR|IMAGE |\n"
                 "                 --alpha | --mask | --green] [--model NAME]\n"
                 "                 [--backend reference|cpu|cuda] [--threads N]\n"
                 "Keys the person in PHOTO: blurs (default, sigma 12) or replaces the background\n"
                 "(COLOR as RRGGBB hex, or an image file), or writes RGBA with alpha, the matte, or a\n"
                 "green screen. MODEL is a segmentation model (selfie, selfie-landscape, pose-*).\n\n",
        .positional = key_input,
        .opaque = &k,
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!k.input || !k.output)
        return kc_usage_error(&a, "a PHOTO and -o OUT.png are required");
    const char *input = k.input, *output = k.output, *model_name = k.model_name;
    const char *replace = k.replace;
    int threads = k.threads;
    keyer_composite_params cp = k.cp;
    keyer_error err = {0};
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.threads = threads;
    rp.backend = k.backend;
    const keyer_model_entry *entry = keyer_registry_find(model_name);
    if (!entry || (entry->mask_output < 0 && entry->task != KEYER_TASK_SEGMENTATION)) {
        fprintf(stderr, "keyer key: '%s' is not a segmentation model (selfie, "
                        "selfie-landscape, pose-lite, pose-full, pose-heavy)\n", model_name);
        return 2;
    }
    int mask_index = entry->mask_output < 0 ? 0 : entry->mask_output;
    uint32_t rgb = 0;
    if (replace) {
        cp.mode = is_hex_color(replace, &rgb) ? KEYER_COMPOSITE_COLOR : KEYER_COMPOSITE_IMAGE;
        cp.color = rgb;
    }

    rc = 1;
    char path[4096];
    keyer_model *model = NULL;
    keyer_runtime *rt = NULL;
    keyer_prepare *prep = NULL;
    keyer_refine *refine = NULL;
    keyer_composite *comp = NULL;
    keyer_frame *frame = NULL, *mask = NULL, *alpha = NULL, *out = NULL, *bg = NULL;
    float *host_mask = NULL;
    keyer_status st;
    if ((st = keyer_registry_resolve(model_name, path, sizeof(path), &err)) ||
        (st = keyer_model_load_file(path, &model, &err)) ||
        (st = keyer_runtime_create(model, &rp, &rt, &err)))
        goto done;
    keyer_tensor_info in_info, out_info;
    if ((st = keyer_model_input_info(model, 0, &in_info, &err)) ||
        (st = keyer_model_output_info(model, mask_index, &out_info, &err)))
        goto done;
    if ((st = keyer_frame_create(&frame, &err)) ||
        (st = keyer_image_read(input, KEYER_PIXEL_FORMAT_RGB24, frame, &err))) {
        keyer_error_prefix(&err, "%s: ", input);
        goto done;
    }
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = in_info.dims[2];
    pp.height = in_info.dims[1];
    pp.scale = entry->input_scale;
    pp.offset = entry->input_offset;
    pp.fit = KEYER_FIT_STRETCH;
    pp.threads = threads;
    keyer_refine_params fp = keyer_refine_params_defaults();
    fp.temporal = KEYER_TEMPORAL_OFF; /* one photo: no history */
    fp.threads = threads;
    cp.threads = threads;
    if ((st = keyer_prepare_create(&pp, &prep, &err)) ||
        (st = keyer_refine_create(&fp, &refine, &err)) ||
        (st = keyer_composite_create(&cp, &comp, &err)))
        goto done;
    size_t in_bytes = keyer_runtime_input_bytes(rt, 0);
    float *tensor = malloc(in_bytes);
    const keyer_frame *frames[1] = {frame};
    if (!tensor) {
        st = keyer_error_set(&err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    st = keyer_prepare_run(prep, frames, NULL, 1, tensor, NULL, &err);
    if (!st)
        st = keyer_runtime_set_input(rt, 0, tensor, in_bytes, &err);
    free(tensor);
    if (st || (st = keyer_runtime_run(rt, &err)))
        goto done;
    /* The mask as a float frame (sigmoid applied for models that output logits). */
    int mh = out_info.dims[1], mw = out_info.dims[2];
    size_t out_bytes = keyer_runtime_output_bytes(rt, mask_index);
    host_mask = malloc(out_bytes);
    if (!host_mask || (st = keyer_runtime_get_output(rt, mask_index, host_mask, out_bytes, &err)) ||
        (st = keyer_frame_create(&mask, &err)) ||
        (st = keyer_frame_alloc(mask, KEYER_PIXEL_FORMAT_GRAYF32, mw, mh, NULL, &err)))
        goto done;
    for (int y = 0; y < mh; y++) {
        float *row = (float *)(mask->data[0] + y * mask->stride[0]);
        for (int x = 0; x < mw; x++) {
            float v = host_mask[(size_t)y * mw + x];
            row[x] = entry->mask_is_logit ? 1.0f / (1.0f + expf(-v)) : v;
        }
    }
    if ((st = keyer_frame_create(&alpha, &err)) ||
        (st = keyer_frame_alloc(alpha, KEYER_PIXEL_FORMAT_GRAY8, frame->width, frame->height, NULL,
                                &err)) ||
        (st = keyer_refine_run(refine, 0, frame, mask, NULL, alpha, &err)))
        goto done;
    if (cp.mode == KEYER_COMPOSITE_IMAGE) {
        if ((st = keyer_frame_create(&bg, &err)) ||
            (st = keyer_image_read(replace, KEYER_PIXEL_FORMAT_RGB24, bg, &err)) ||
            (st = keyer_composite_set_background(comp, bg, &err))) {
            keyer_error_prefix(&err, "--replace %s: ", replace);
            goto done;
        }
    }
    keyer_pixel_format out_format = KEYER_PIXEL_FORMAT_RGB24;
    if (cp.mode == KEYER_COMPOSITE_ALPHA || cp.mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        out_format = KEYER_PIXEL_FORMAT_RGBA;
    else if (cp.mode == KEYER_COMPOSITE_MASK)
        out_format = KEYER_PIXEL_FORMAT_GRAY8;
    if ((st = keyer_frame_create(&out, &err)) ||
        (st = keyer_frame_alloc(out, out_format, frame->width, frame->height, NULL, &err)) ||
        (st = keyer_composite_run(comp, frame, alpha, out, &err)) ||
        (st = keyer_image_write(output, out, &err)))
        goto done;
    printf("keyer key: %s -> %s (%dx%d, model %s, %s backend)\n", input, output, frame->width,
           frame->height, model_name, keyer_backend_name(rp.backend));
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "keyer key: %s\n", err.message);
    free(host_mask);
    keyer_frame_destroy(&frame);
    keyer_frame_destroy(&mask);
    keyer_frame_destroy(&alpha);
    keyer_frame_destroy(&out);
    keyer_frame_destroy(&bg);
    keyer_composite_destroy(&comp);
    keyer_refine_destroy(&refine);
    keyer_prepare_destroy(&prep);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
    return rc;
}
