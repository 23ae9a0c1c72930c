/*
 * bench_people_switch: what the automatic selfie -> people switch (src/vision/people_switch.h)
 * costs the host per frame, the work the main job's infer stage does for every frame when no
 * model is given.
 *
 *   bench_people_switch [--width W] [--height H] [--frames N] [--cuda] [--json]
 *
 * Masks of W x H cells (default 256 x 144, selfie-landscape's; 256 x 256 is the selfie
 * model's): a portrait-like blob (an ellipse over a third of the mask, soft edges) with a
 * scattering of single cells above 0.5 (1%), as a selfie mask of someone near the camera
 * looks. Timed per mask, median of N (default 2000) calls:
 *  - update: kr_people_switch_update on the floats (the CPU path: packing, then the runs);
 *  - pack: kr_people_switch_pack alone;
 *  - update_bits: kr_people_switch_update_bits on the packed mask (what the host does per frame
 *    on CUDA, where the device packs).
 * With --cuda (CUDA builds, device 0): a run of 16 masks packed on the device and brought down
 * (kr_people_switch_pack_cuda, the copy, a stream wait), per run: the device's side of it.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/device.h"
#include "vision/people_switch.h"

static float *make_mask(int w, int h)
{
    float *m = malloc((size_t)w * (size_t)h * sizeof(float));
    if (!m)
        return NULL;
    uint32_t s = 1u;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double dx = (x - 0.5 * w) / (0.22 * w), dy = (y - 0.6 * h) / (0.45 * h);
            double r = dx * dx + dy * dy;
            float v = r < 0.8 ? 0.97f : r < 1.2 ? (float)(0.97 - (r - 0.8) * 2.3) : 0.02f;
            s = s * 1664525u + 1013904223u;
            if ((s >> 8) % 100 == 0)
                v = 0.6f;
            m[(size_t)y * (size_t)w + (size_t)x] = v;
        }
    return m;
}

/* Median of the @p n timings (milliseconds) in @p t, in microseconds. */
static double median_us(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), kb_cmp_double);
    return t[n / 2] * 1e3;
}

int main(int argc, char **argv)
{
    const char *prog = "bench_people_switch";
    int w = 256, h = 144, n = 2000, cuda = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--width") && i + 1 < argc)
            w = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--height") && i + 1 < argc)
            h = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--frames") && i + 1 < argc)
            n = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--cuda"))
            cuda = 1;
        else if (!strcmp(a, "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: %s [--width W] [--height H] [--frames N] [--cuda] [--json]\n",
                    prog);
            return 2;
        }
    }
    if (w < 1 || h < 1 || w > 4096 || h > 4096 || n < 1 || n > 1000000) {
        fprintf(stderr, "%s: sizes 1..4096, frames 1..1000000\n", prog);
        return 2;
    }
    keyer_error err = {0};
    kr_people_switch *sw = NULL;
    kr_people_switch_params p = kr_people_switch_params_defaults();
    float *mask = make_mask(w, h);
    size_t words = (size_t)kr_people_switch_row_words(w) * (size_t)h;
    uint32_t *bits = malloc(words * sizeof(uint32_t));
    double *t = malloc((size_t)n * sizeof(double));
    if (!mask || !bits || !t || kr_people_switch_create(&p, w, h, &sw, &err)) {
        fprintf(stderr, "%s: %s\n", prog, err.message[0] ? err.message : "out of memory");
        return 1;
    }
    double us[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++) {
            double t0 = kb_now_ms();
            if (k == 0)
                kr_people_switch_update(sw, mask);
            else if (k == 1)
                kr_people_switch_pack(mask, w, h, bits);
            else
                kr_people_switch_update_bits(sw, bits);
            t[i] = kb_now_ms() - t0;
        }
        us[k] = median_us(t, n);
    }
    double largest = kr_people_switch_largest(sw), run_us = -1;
    if (cuda) {
        const kr_device_fns *dev = kr_device_cuda();
        enum { RUN = 16 };
        void *dmask = NULL, *dbits = NULL, *hbits = NULL, *stream = NULL;
        size_t cells = (size_t)w * (size_t)h;
        if (!dev || dev->count() == 0 ||
            dev->alloc(0, RUN * cells * sizeof(float), &dmask, &err) ||
            dev->alloc(0, RUN * words * sizeof(uint32_t), &dbits, &err) ||
            dev->host_alloc(0, RUN * words * sizeof(uint32_t), &hbits, &err) ||
            dev->stream_create(0, &stream, &err)) {
            fprintf(stderr, "%s: --cuda: %s\n", prog, err.message[0] ? err.message
                                                                       : "no CUDA device");
            return 1;
        }
        const float *masks[RUN];
        for (int i = 0; i < RUN; i++) {
            masks[i] = (const float *)dmask + (size_t)i * cells;
            if (dev->copy(0, (void *)masks[i], mask, cells * sizeof(float), stream, &err))
                break;
        }
        int runs = n / RUN > 1 ? n / RUN : 1;
        for (int i = 0; i < runs && !err.message[0]; i++) {
            double t0 = kb_now_ms();
            if (kr_people_switch_pack_cuda(0, masks, RUN, w, h, dbits, stream, &err) ||
                dev->copy(0, hbits, dbits, RUN * words * sizeof(uint32_t), stream, &err) ||
                dev->stream_sync(0, stream, &err))
                break;
            t[i] = kb_now_ms() - t0;
        }
        if (err.message[0]) {
            fprintf(stderr, "%s: --cuda: %s\n", prog, err.message);
            return 1;
        }
        run_us = median_us(t, runs);
        dev->stream_destroy(0, stream);
        dev->host_free(0, hbits);
        dev->free(0, dbits);
        dev->free(0, dmask);
    }
    if (json)
        printf("{\"width\": %d, \"height\": %d, \"frames\": %d, \"largest\": %.4f, \"update_us\": "
               "%.2f, \"pack_us\": %.2f, \"update_bits_us\": %.2f, \"cuda_run16_us\": %.2f}\n",
               w, h, n, largest, us[0], us[1], us[2], run_us);
    else {
        printf("%dx%d masks (largest region %.1f%%), median of %d: update %.2f us (pack %.2f us), "
               "update_bits %.2f us per frame", w, h, 100.0 * largest, n, us[0], us[1], us[2]);
        if (run_us >= 0)
            printf("; CUDA: 16 masks packed and down %.1f us per run", run_us);
        printf("\n");
    }
    kr_people_switch_destroy(&sw);
    free(mask);
    free(bits);
    free(t);
    return 0;
}
