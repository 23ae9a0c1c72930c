/*
 * keyer key: the keying job on one photo, end to end on the public API:
 * decode -> prepare (model input) -> inference -> refine (matte) -> composite -> PNG.
 *
 *   keyer key PHOTO -o OUT.png [--blur [SIGMA] | --replace COLOR|IMAGE | --alpha | --mask |
 *             --green] [--model NAME] [--backend reference|cpu|cuda] [--threads N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/keyer.h"
#include "keyer/nn.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: keyer key PHOTO -o OUT.png [--blur [SIGMA] | --replace COLOR|IMAGE |\n"
            "                 --alpha | --mask | --green] [--model NAME]\n"
            "                 [--backend reference|cpu|cuda] [--threads N]\n"
            "Keys the person in PHOTO: blurs (default, sigma 12) or replaces the background\n"
            "(COLOR as RRGGBB hex, or an image file), or writes RGBA with alpha, the matte, or a\n"
            "green screen. MODEL is a segmentation model (selfie, selfie-landscape, pose-*).\n");
}

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

int keyer_cmd_key(int argc, char **argv)
{
    const char *input = NULL, *output = NULL, *model_name = "selfie", *backend_name = "cpu";
    const char *replace = NULL;
    int threads = 0;
    keyer_composite_params cp = keyer_composite_params_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--blur")) {
            cp.mode = KEYER_COMPOSITE_BLUR;
            if (v && v[0] >= '0' && v[0] <= '9') {
                cp.blur_radius = (float)atof(v);
                i++;
            }
        } else if (!strcmp(a, "--alpha")) {
            cp.mode = KEYER_COMPOSITE_ALPHA;
        } else if (!strcmp(a, "--mask")) {
            cp.mode = KEYER_COMPOSITE_MASK;
        } else if (!strcmp(a, "--green")) {
            cp.mode = KEYER_COMPOSITE_GREEN_SCREEN;
        } else if (a[0] == '-' && a[1] && !v) {
            fprintf(stderr, "keyer key: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            output = argv[++i];
        } else if (!strcmp(a, "--replace")) {
            replace = argv[++i];
        } else if (!strcmp(a, "--model")) {
            model_name = argv[++i];
        } else if (!strcmp(a, "--backend")) {
            backend_name = argv[++i];
        } else if (!strcmp(a, "--threads")) {
            threads = atoi(argv[++i]);
        } else if (a[0] == '-') {
            fprintf(stderr, "keyer key: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!input) {
            input = a;
        } else {
            fprintf(stderr, "keyer key: one photo at a time (got %s and %s)\n", input, a);
            return 2;
        }
    }
    if (!input || !output) {
        usage(stderr);
        return 2;
    }
    keyer_error err = {0};
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.threads = threads;
    if (keyer_backend_from_name(backend_name, &rp.backend, &err)) {
        fprintf(stderr, "keyer key: %s\n", err.message);
        return 2;
    }
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

    int rc = 1;
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
