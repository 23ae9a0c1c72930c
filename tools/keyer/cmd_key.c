/*
 * keyer key: the keying job on one photo, end to end on the public API: decode, then the
 * keying chain (keyer/keying.h: model input, inference, matte, compositing), then PNG.
 *
 *   keyer key PHOTO -o OUT.png [--blur [SIGMA] | --replace COLOR|IMAGE | --alpha | --mask |
 *             --green] [--model NAME] [--backend reference|cpu|cuda] [--threads N]
 *
 * Its options come from an option table (args.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/keyer.h"
#include "keyer/keying.h"

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
    const keyer_model_entry *entry = keyer_registry_find(model_name);
    if (!entry || (entry->mask_output < 0 && entry->task != KEYER_TASK_SEGMENTATION)) {
        fprintf(stderr, "keyer key: '%s' is not a segmentation model (selfie, "
                        "selfie-landscape, pose-lite, pose-full, pose-heavy)\n", model_name);
        return 2;
    }
    uint32_t rgb = 0;
    if (replace) {
        cp.mode = is_hex_color(replace, &rgb) ? KEYER_COMPOSITE_COLOR : KEYER_COMPOSITE_IMAGE;
        cp.color = rgb;
    }

    /* the keying chain (keyer/keying.h): the photo stretched over the model's input, no
     * temporal history (one picture) */
    rc = 1;
    keyer_keying_params kp = keyer_keying_params_defaults();
    kp.model = model_name;
    kp.backend = k.backend;
    kp.threads = threads;
    kp.fit = KEYER_KEYING_FIT_STRETCH;
    kp.refine.temporal = KEYER_TEMPORAL_OFF;
    kp.composite = cp;
    keyer_keying *keying = NULL;
    keyer_frame *frame = NULL, *out = NULL, *bg = NULL;
    if (keyer_keying_create(&kp, &keying, &err))
        goto done;
    if (keyer_frame_create(&frame, &err) ||
        keyer_image_read(input, KEYER_PIXEL_FORMAT_RGB24, frame, &err)) {
        keyer_error_prefix(&err, "%s: ", input);
        goto done;
    }
    if (cp.mode == KEYER_COMPOSITE_IMAGE) {
        if (keyer_frame_create(&bg, &err) ||
            keyer_image_read(replace, KEYER_PIXEL_FORMAT_RGB24, bg, &err) ||
            keyer_keying_set_background(keying, bg, &err)) {
            keyer_error_prefix(&err, "--replace %s: ", replace);
            goto done;
        }
    }
    /* out starts empty: the chain allocates it in the mode's format (RGB24, RGBA, GRAY8) */
    if (keyer_frame_create(&out, &err) || keyer_keying_process(keying, frame, out, NULL, &err) ||
        keyer_image_write(output, out, &err))
        goto done;
    printf("keyer key: %s -> %s (%dx%d, model %s, %s backend)\n", input, output, frame->width,
           frame->height, model_name, keyer_backend_name(k.backend));
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "keyer key: %s\n", err.message);
    keyer_frame_destroy(&frame);
    keyer_frame_destroy(&out);
    keyer_frame_destroy(&bg);
    keyer_keying_destroy(&keying);
    return rc;
}
