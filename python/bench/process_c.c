/*
 * The per-frame work of keyer.Keyer.process from C, for the overhead benchmark
 * (python/bench/bench_process.py runs both and compares them):
 *
 *   bench_python_process RAW.rgb WIDTH HEIGHT FRAMES THREADS
 *
 * RAW.rgb holds one packed RGB24 picture of WIDTH x HEIGHT. The keying chain (keyer/keying.h,
 * what the extension calls) runs with the selfie model on the CPU backend, background blur,
 * into preallocated frames; after 3 warm-up frames, FRAMES frames are timed one by one.
 * Prints "per-frame ms: median M mean A min N" on stdout.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyer/keyer.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s RAW.rgb WIDTH HEIGHT FRAMES THREADS\n", argv[0]);
        return 2;
    }
    int w = atoi(argv[2]), h = atoi(argv[3]), n = atoi(argv[4]), threads = atoi(argv[5]);
    if (w <= 0 || h <= 0 || n <= 0 || threads < 0) {
        fprintf(stderr, "%s: bad sizes, frame count or threads\n", argv[0]);
        return 2;
    }
    keyer_error err = {0};
    keyer_keying *c = NULL;
    keyer_frame *in = NULL, *alpha = NULL, *out = NULL;
    double *ms = calloc((size_t)n, sizeof(double));
    int rc = 1;
    keyer_keying_params p = keyer_keying_params_defaults();
    p.threads = threads;
    if (!ms || keyer_keying_create(&p, &c, &err) || keyer_frame_create(&in, &err) ||
        keyer_frame_alloc(in, KEYER_PIXEL_FORMAT_RGB24, w, h, NULL, &err) ||
        keyer_frame_create(&alpha, &err) ||
        keyer_frame_alloc(alpha, KEYER_PIXEL_FORMAT_GRAY8, w, h, NULL, &err) ||
        keyer_frame_create(&out, &err) ||
        keyer_frame_alloc(out, KEYER_PIXEL_FORMAT_RGB24, w, h, NULL, &err))
        goto done;
    FILE *f = fopen(argv[1], "rb");
    for (int y = 0; f && y < h; y++)
        if (fread(in->data[0] + y * in->stride[0], 3, (size_t)w, f) != (size_t)w) {
            fclose(f);
            f = NULL;
        }
    if (!f) {
        keyer_error_set(&err, KEYER_STATUS_IO, "%s: cannot read %dx%d RGB24", argv[1], w, h);
        goto done;
    }
    fclose(f);
    for (int i = -3; i < n; i++) {
        double t0 = now_ms();
        if (keyer_keying_process(c, in, out, alpha, &err))
            goto done;
        if (i >= 0)
            ms[i] = now_ms() - t0;
    }
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += ms[i];
    qsort(ms, (size_t)n, sizeof(double), cmp_double);
    printf("per-frame ms: median %.3f mean %.3f min %.3f\n", ms[n / 2], sum / n, ms[0]);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "%s: %s\n", argv[0], err.message);
    free(ms);
    keyer_frame_destroy(&in);
    keyer_frame_destroy(&alpha);
    keyer_frame_destroy(&out);
    keyer_keying_destroy(&c);
    return rc;
}
