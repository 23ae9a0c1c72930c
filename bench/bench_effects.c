/*
 * Frame effects benchmark: model input preparation, mask refinement, background-blur
 * compositing and the refine + composite chain, at 1080p and 4K, on the CPU and (when keyer
 * is built with CUDA and a device exists, with --cuda) on the GPU. Each figure is the median
 * of --iters runs after warm-up, reported with the memory-traffic floor: the bytes a stage
 * must read and write once, divided by the copy bandwidth measured here (host memcpy, or
 * cudaMemcpy device to device).
 *
 *   bench_effects [--iters N] [--threads T] [--cuda] [--json]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "keyer/effects.h"
#ifdef KEYER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* CPU time of the whole process (all threads), seconds. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const keyer_error *err)
{
    fprintf(stderr, "bench_effects: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

/* Synthetic NV12 picture: smooth gradients, texture and a bright "person" disc. */
static void fill_nv12(keyer_frame *f)
{
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++) {
            double d = hypot(x - f->width * 0.5, (y - f->height * 0.6) * 1.2) / f->height;
            int v = d < 0.35 ? 180 : 40 + (int)(60 * (1 + sin(x * 0.02) * cos(y * 0.03)));
            f->data[0][(ptrdiff_t)y * f->stride[0] + x] = (uint8_t)v;
        }
    for (int y = 0; y < (f->height + 1) / 2; y++)
        for (int x = 0; x < (f->width + 1) / 2; x++) {
            uint8_t *p = f->data[1] + (ptrdiff_t)y * f->stride[1] + 2 * x;
            p[0] = (uint8_t)(110 + (x * 37 / f->width));
            p[1] = (uint8_t)(140 - (y * 29 / f->height));
        }
}

static void fill_mask(float *m, int w, int h)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double d = hypot(x + 0.5 - w * 0.5, (y + 0.5 - h * 0.6) * 1.2) / h - 0.35;
            m[y * w + x] = (float)(1.0 / (1.0 + exp(d * 60)));
        }
}

typedef struct result {
    const char *stage;
    const char *size;
    double ms;     /* median */
    double min_ms; /* fastest run: least disturbed by other load on the machine */
    double cpu_ms; /* CPU time of all threads per run, over all timed runs (host runs only) */
    double bytes;
} result;

static double host_copy_bandwidth(void)
{
    size_t n = 256u << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        return 0;
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 1e9;
    for (int i = 0; i < 5; i++) {
        double t = kb_now_s();
        memcpy(b, a, n);
        t = kb_now_s() - t;
        best = t < best ? t : best;
    }
    free(a);
    free(b);
    return 2.0 * (double)n / best; /* bytes read + written per second */
}

#ifdef KEYER_HAVE_CUDA
static double device_copy_bandwidth(void)
{
    size_t n = 1u << 30;
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess)
        return 0;
    cudaMemset(a, 1, n);
    cudaDeviceSynchronize();
    double best = 1e9;
    for (int i = 0; i < 10; i++) {
        double t = kb_now_s();
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
        t = kb_now_s() - t;
        best = t < best ? t : best;
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * (double)n / best;
}

/* Copies a host frame into a new device frame (one cudaMalloc, freed by the buffer). */
static void free_dev(void *opaque, void *data)
{
    (void)opaque;
    cudaFree(data);
}

static keyer_frame *to_device(const keyer_frame *h)
{
    keyer_frame *d = NULL;
    if (keyer_frame_create(&d, NULL))
        return NULL;
    *d = *h;
    size_t total = 0, offs[KEYER_FRAME_MAX_PLANES];
    int planes = keyer_pixel_format_planes(h->format);
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(h->format, h->width, h->height, p, &pw, &ph, &bpe, NULL);
        offs[p] = total;
        total += (size_t)h->stride[p] * (size_t)ph;
    }
    void *mem = NULL;
    if (cudaMalloc(&mem, total) != cudaSuccess)
        return NULL;
    for (int i = 0; i < KEYER_FRAME_MAX_PLANES; i++)
        d->buf[i] = NULL;
    keyer_buffer_wrap(mem, total, KEYER_MEMORY_CUDA, free_dev, NULL, &d->buf[0], NULL);
    d->memory = KEYER_MEMORY_CUDA;
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(h->format, h->width, h->height, p, &pw, &ph, &bpe, NULL);
        d->data[p] = (uint8_t *)mem + offs[p];
        cudaMemcpy(d->data[p], h->data[p], (size_t)h->stride[p] * (size_t)ph,
                   cudaMemcpyHostToDevice);
    }
    return d;
}
#endif

#define PROG "bench_effects"

int main(int argc, char **argv)
{
    int iters = 30, threads = 0, json = 0, cuda = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = kb_int_arg(PROG, "--iters", argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = kb_int_arg(PROG, "--threads", argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--cuda"))
            cuda = 1;
        else {
            fprintf(stderr, "usage: bench_effects [--iters N] [--threads T] [--cuda] [--json]\n");
            return 2;
        }
    }
    if (iters < 1)
        iters = 1;
#ifndef KEYER_HAVE_CUDA
    if (cuda) {
        fprintf(stderr, "bench_effects: built without CUDA\n");
        return 77;
    }
#endif
#ifdef KEYER_HAVE_CUDA
    int ndev = 0;
    if (cuda && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
        fprintf(stderr, "bench_effects: no CUDA device\n");
        return 77;
    }
#endif
    double bw = cuda ? 0 : host_copy_bandwidth();
#ifdef KEYER_HAVE_CUDA
    if (cuda)
        bw = device_copy_bandwidth();
#endif
    static const struct {
        const char *name;
        int w, h;
    } sizes[] = {{"1080p", 1920, 1080}, {"4K", 3840, 2160}};
    result res[16];
    int nres = 0;
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int s = 0; s < 2; s++) {
        int W = sizes[s].w, H = sizes[s].h, MW = 256, MH = 256;
        keyer_error err = {0};
        keyer_frame *fh = NULL, *ah = NULL, *oh = NULL;
        if (keyer_frame_create(&fh, &err) || keyer_frame_create(&ah, &err) ||
            keyer_frame_create(&oh, &err) ||
            keyer_frame_alloc(fh, KEYER_PIXEL_FORMAT_NV12, W, H, NULL, &err) ||
            keyer_frame_alloc(ah, KEYER_PIXEL_FORMAT_GRAY8, W, H, NULL, &err) ||
            keyer_frame_alloc(oh, KEYER_PIXEL_FORMAT_NV12, W, H, NULL, &err))
            die("frames", &err);
        fill_nv12(fh);
        fh->matrix = KEYER_COLOR_MATRIX_BT709;
        keyer_frame *mh = NULL;
        if (keyer_frame_create(&mh, &err) ||
            keyer_frame_alloc(mh, KEYER_PIXEL_FORMAT_GRAYF32, MW, MH, NULL, &err))
            die("mask", &err);
        float *mask = malloc(sizeof(float) * MW * MH);
        fill_mask(mask, MW, MH);
        for (int y = 0; y < MH; y++)
            memcpy(mh->data[0] + y * mh->stride[0], mask, sizeof(float) * MW);
        free(mask);
        keyer_frame *f = fh, *a = ah, *o = oh, *m = mh;
        void *tensor = malloc(sizeof(float) * MW * MH * 3);
#ifdef KEYER_HAVE_CUDA
        if (cuda) {
            f = to_device(fh);
            a = to_device(ah);
            o = to_device(oh);
            m = to_device(mh);
            free(tensor);
            tensor = NULL;
            if (!f || !a || !o || !m || cudaMalloc(&tensor, sizeof(float) * MW * MH * 3))
                die("device memory", NULL);
        }
#endif
        keyer_prepare_params pp = keyer_prepare_params_defaults();
        pp.threads = threads;
        keyer_refine_params rp = keyer_refine_params_defaults();
        rp.threads = threads;
        if (getenv("FX_REFINE")) keyer_options_parse(keyer_refine_options(), &rp, getenv("FX_REFINE"), NULL);
        keyer_composite_params cp = keyer_composite_params_defaults();
        cp.threads = threads;
        keyer_prepare *prep = NULL;
        keyer_refine *ref = NULL;
        keyer_composite *comp = NULL;
        if (keyer_prepare_create(&pp, &prep, &err) || keyer_refine_create(&rp, &ref, &err) ||
            keyer_composite_create(&cp, &comp, &err))
            die("create", &err);
        double fbytes = (double)W * H * 1.5, abytes = (double)W * H;
        struct {
            const char *name;
            double bytes;
        } stages[] = {
            {"prepare NV12 -> 256x256x3 f32", fbytes + MW * MH * 12.0},
            {"refine (guided, threshold, feather 1, temporal)", abytes + MW * MH * 4.0 + abytes},
            {"composite blur NV12", fbytes + abytes + fbytes},
            {"refine + composite blur", fbytes + MW * MH * 4.0 + fbytes},
        };
        for (int st = 0; st < 4; st++) {
            double cpu0 = 0;
            for (int i = -3; i < iters; i++) {
                if (i == 0)
                    cpu0 = cpu_now(); /* over the whole loop: other threads' time is only
                                         accounted at scheduler ticks */
                double t0 = kb_now_s();
                keyer_status r = KEYER_OK;
                const keyer_frame *frames[1] = {f};
                if (st == 0)
                    r = keyer_prepare_run(prep, frames, NULL, 1, tensor, NULL, &err);
                if (st == 1 || st == 3)
                    r = keyer_refine_run(ref, 0, f, m, NULL, a, &err);
                if (!r && (st == 2 || st == 3))
                    r = keyer_composite_run(comp, f, a, o, &err);
                if (r)
                    die(stages[st].name, &err);
#ifdef KEYER_HAVE_CUDA
                if (cuda)
                    cudaDeviceSynchronize();
#endif
                if (i >= 0)
                    t[i] = kb_now_s() - t0;
            }
            double cpu_total = cpu_now() - cpu0;
            qsort(t, (size_t)iters, sizeof(double), kb_cmp_double);
            res[nres].stage = stages[st].name;
            res[nres].size = sizes[s].name;
            res[nres].ms = t[iters / 2] * 1e3;
            res[nres].min_ms = t[0] * 1e3;
            res[nres].cpu_ms = cpu_total / iters * 1e3;
            res[nres].bytes = stages[st].bytes;
            nres++;
        }
        keyer_prepare_destroy(&prep);
        keyer_refine_destroy(&ref);
        keyer_composite_destroy(&comp);
#ifdef KEYER_HAVE_CUDA
        if (cuda) {
            keyer_frame_destroy(&f);
            keyer_frame_destroy(&a);
            keyer_frame_destroy(&o);
            keyer_frame_destroy(&m);
            cudaFree(tensor);
            tensor = NULL;
        }
#endif
        free(tensor);
        keyer_frame_destroy(&fh);
        keyer_frame_destroy(&ah);
        keyer_frame_destroy(&oh);
        keyer_frame_destroy(&mh);
    }
    free(t);
    if (json) {
        printf("{\"device\": \"%s\", \"copy_bandwidth_gbs\": %.1f, \"results\": [\n",
               cuda ? "cuda" : "cpu", bw / 1e9);
        for (int i = 0; i < nres; i++)
            printf("  {\"stage\": \"%s\", \"size\": \"%s\", \"ms\": %.4f, \"min_ms\": %.4f, "
                   "\"cpu_ms\": %.4f, \"floor_ms\": %.4f}%s\n", res[i].stage, res[i].size,
                   res[i].ms, res[i].min_ms, res[i].cpu_ms, res[i].bytes / bw * 1e3,
                   i + 1 < nres ? "," : "");
        printf("]}\n");
    } else {
        printf("%s, copy bandwidth %.1f GB/s (read + write), median of %d runs\n",
               cuda ? "CUDA" : "CPU", bw / 1e9, iters);
        printf("%-6s %-48s %9s %8s %8s %8s %8s %8s\n", "size", "stage", "median ms", "min ms",
               "cpu ms", "floor ms", "x floor", "frames/s");
        for (int i = 0; i < nres; i++)
            printf("%-6s %-48s %9.3f %8.3f %8.3f %8.3f %8.1f %8.1f\n", res[i].size, res[i].stage,
                   res[i].ms, res[i].min_ms, cuda ? 0.0 : res[i].cpu_ms, res[i].bytes / bw * 1e3,
                   res[i].ms / (res[i].bytes / bw * 1e3), 1e3 / res[i].ms);
    }
    return 0;
}
