/*
 * bench_overlay: the overlay renderer on issue 8's scene (100 boxes, 500 segments, 100 curves,
 * a 1,000-point k=5 kNN graph: tests/common/kt_overlay_scene.h) over NV12 frames.
 *
 *   bench_overlay [--sizes 1080p,4k] [--reps N] [--no-cpu] [--json]
 *
 * Per frame size:
 *  - scene: host time to build the scene (kNN graph update included), and the graph alone;
 *  - cpu: the CPU renderer, one thread, median of N renders onto one frame;
 *  - cuda (when built with CUDA and a device exists), onto a frame in device memory:
 *     gpu_ms: the GPU time of one render (staging copy, binning and drawing kernels), taken
 *       between two events with the stream kept busy by a large memset queued first, so the
 *       host's part of the call is not in the interval; median of N;
 *     frame_ms: back-to-back renders, time per frame at steady state (host and GPU overlapped);
 *     host_ms: host time per render call (record copy to pinned memory, launches).
 *  - floor: reading and writing the whole frame once at the device's copy bandwidth (the
 *    renderer touches only covered pixels, so it can beat this), and the record upload.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "keyer/frame.h"
#include "keyer/overlay.h"
#include "kt_overlay_scene.h"
#include "overlay/overlay_internal.h"

#ifdef KEYER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), kb_cmp_double);
    return v[n / 2];
}

static int die(const char *what, const keyer_error *err)
{
    fprintf(stderr, "bench_overlay: %s: %s\n", what, err->message);
    return 1;
}

static keyer_frame *grey_frame(int w, int h)
{
    keyer_frame *f = NULL;
    if (keyer_frame_create(&f, NULL) ||
        keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NV12, w, h, NULL, NULL)) {
        keyer_frame_destroy(&f);
        return NULL;
    }
    f->matrix = KEYER_COLOR_MATRIX_BT709;
    f->range = KEYER_COLOR_RANGE_LIMITED;
    for (int p = 0; p < 2; p++)
        for (int y = 0; y < (p ? (h + 1) / 2 : h); y++)
            memset(f->data[p] + y * f->stride[p], p ? 128 : 100, (size_t)(p ? 2 * ((w + 1) / 2) : w));
    return f;
}

typedef struct result {
    const char *size;
    int prims;
    double scene_ms, graph_ms, cpu_ms, gpu_ms, frame_ms, host_ms, floor_frame_ms, upload_mb;
} result;

#ifdef KEYER_HAVE_CUDA
static void device_free(void *opaque, void *data)
{
    (void)opaque;
    cudaFree(data);
}

/* A device copy of host frame @p h (pitch = the host's). NULL on failure. */
static keyer_frame *upload(const keyer_frame *h)
{
    size_t y_bytes = (size_t)h->stride[0] * (size_t)h->height;
    size_t c_bytes = (size_t)h->stride[1] * (size_t)((h->height + 1) / 2);
    void *mem = NULL;
    if (cudaMalloc(&mem, y_bytes + c_bytes) != cudaSuccess)
        return NULL;
    keyer_buffer *buf = NULL;
    keyer_frame *d = NULL;
    if (keyer_buffer_wrap(mem, y_bytes + c_bytes, KEYER_MEMORY_CUDA, device_free, NULL, &buf,
                          NULL) ||
        keyer_frame_create(&d, NULL)) {
        cudaFree(mem);
        return NULL;
    }
    d->format = h->format;
    d->width = h->width;
    d->height = h->height;
    d->memory = KEYER_MEMORY_CUDA;
    d->matrix = h->matrix;
    d->range = h->range;
    d->buf[0] = buf;
    d->data[0] = mem;
    d->data[1] = (unsigned char *)mem + y_bytes;
    d->stride[0] = h->stride[0];
    d->stride[1] = h->stride[1];
    if (cudaMemcpy(d->data[0], h->data[0], y_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(d->data[1], h->data[1], c_bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        keyer_frame_destroy(&d);
    return d;
}

/* Device copy bandwidth (bytes read + written per second), cudaMemcpy of 1 GiB. */
static double copy_bandwidth(void)
{
    size_t n = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    double bw = 0;
    if (cudaMalloc(&a, n) == cudaSuccess && cudaMalloc(&b, n) == cudaSuccess) {
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
        double t0 = kb_now_ms();
        for (int i = 0; i < 5; i++)
            cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
        bw = 2.0 * 5 * (double)n / ((kb_now_ms() - t0) * 1e-3);
    }
    cudaFree(a);
    cudaFree(b);
    return bw;
}

static int bench_cuda(keyer_overlay *ov, const keyer_frame *host, int reps, double *samples,
                      result *r, double bw)
{
    keyer_error err = {0};
    cudaStream_t stream;
    cudaEvent_t e0, e1;
    void *busy = NULL;
    size_t busy_bytes = (size_t)2 << 30;
    if (cudaStreamCreate(&stream) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess || cudaMalloc(&busy, busy_bytes) != cudaSuccess) {
        fprintf(stderr, "bench_overlay: CUDA set-up failed\n");
        return 1;
    }
    keyer_frame *dev = upload(host);
    if (!dev || keyer_overlay_set_stream(ov, stream, &err))
        return die("cuda frame", &err);
    for (int i = 0; i < 10; i++) /* warm-up: buffers grow, kernels load */
        if (keyer_overlay_render(ov, dev, &err))
            return die("render (cuda)", &err);
    cudaStreamSynchronize(stream);
    for (int i = 0; i < reps; i++) {
        cudaMemsetAsync(busy, i & 0xff, busy_bytes, stream); /* ~1.5 ms of queued work */
        cudaEventRecord(e0, stream);
        if (keyer_overlay_render(ov, dev, &err))
            return die("render (cuda)", &err);
        cudaEventRecord(e1, stream);
        if (cudaEventSynchronize(e1) != cudaSuccess) {
            fprintf(stderr, "bench_overlay: a render failed on the device\n");
            return 1;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        samples[i] = ms;
    }
    r->gpu_ms = median(samples, reps);
    int n = reps * 4;
    double host_total = 0, t0 = kb_now_ms();
    for (int i = 0; i < n; i++) {
        double h0 = kb_now_ms();
        if (keyer_overlay_render(ov, dev, &err))
            return die("render (cuda)", &err);
        host_total += kb_now_ms() - h0;
    }
    cudaStreamSynchronize(stream);
    r->frame_ms = (kb_now_ms() - t0) / n;
    r->host_ms = host_total / n;
    double frame_bytes = (double)host->width * host->height * 1.5;
    r->floor_frame_ms = 2 * frame_bytes / bw * 1e3;
    keyer_overlay_set_stream(ov, NULL, &err);
    keyer_frame_destroy(&dev);
    cudaFree(busy);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(stream);
    return 0;
}
#endif

#define PROG "bench_overlay"

int main(int argc, char **argv)
{
    const char *sizes = "1080p,4k";
    int reps = 50, cpu = 1, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = kb_int_arg(PROG, "--reps", argv[++i]);
        else if (!strcmp(argv[i], "--no-cpu"))
            cpu = 0;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: bench_overlay [--sizes 1080p,4k] [--reps N] [--no-cpu] "
                            "[--json]\n");
            return 2;
        }
    }
    if (reps < 3)
        reps = 3;
    double *samples = malloc(sizeof(double) * (size_t)reps);
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    if (!samples || keyer_overlay_create(40000, &ov, &err))
        return die("overlay", &err);
    int have_cuda = 0;
#ifdef KEYER_HAVE_CUDA
    double bw = 0;
    int ndev = 0;
    have_cuda = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
    if (have_cuda)
        bw = copy_bandwidth();
#endif
    const kt_scene scene = KT_SCENE_ACCEPTANCE, graph = {0, 0, 0, 0, 0, 1000};
    int first = 1;
    if (json)
        printf("[");
    else
        printf("%-6s %6s %9s %9s %9s %9s %9s %9s %10s %9s\n", "size", "prims", "scene_ms",
               "graph_ms", "cpu_ms", "gpu_ms", "frame_ms", "host_ms", "floor_ms", "upload_MB");
    for (const char *s = sizes; *s;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        int w = 0, h = 0;
        if (len == 5 && !strncmp(s, "1080p", 5))
            w = 1920, h = 1080;
        else if (len == 2 && (!strncmp(s, "4k", 2) || !strncmp(s, "4K", 2)))
            w = 3840, h = 2160;
        else if (len == 4 && !strncmp(s, "720p", 4))
            w = 1280, h = 720;
        else {
            fprintf(stderr, "bench_overlay: unknown size '%.*s' (720p, 1080p, 4k)\n", (int)len, s);
            return 2;
        }
        s = comma ? comma + 1 : s + len;
        result r = {0};
        r.size = h == 2160 ? "4k" : h == 1080 ? "1080p" : "720p";
        for (int i = 0; i < reps; i++) {
            double t0 = kb_now_ms();
            if (kt_overlay_scene(ov, &graph, w, h, 99, &err))
                return die("scene", &err);
            samples[i] = kb_now_ms() - t0;
        }
        r.graph_ms = median(samples, reps);
        for (int i = 0; i < reps; i++) {
            double t0 = kb_now_ms();
            if (kt_overlay_scene(ov, &scene, w, h, 99, &err))
                return die("scene", &err);
            samples[i] = kb_now_ms() - t0;
        }
        r.scene_ms = median(samples, reps);
        r.prims = keyer_overlay_count(ov);
        r.upload_mb = (double)r.prims * sizeof(kr_prim) / 1e6;
        keyer_frame *f = grey_frame(w, h);
        if (!f)
            return die("frame", &err);
        r.cpu_ms = -1;
        if (cpu) {
            int n = reps < 10 ? reps : 10;
            for (int i = 0; i < n; i++) {
                double t0 = kb_now_ms();
                if (keyer_overlay_render(ov, f, &err))
                    return die("render (cpu)", &err);
                samples[i] = kb_now_ms() - t0;
            }
            r.cpu_ms = median(samples, n);
        }
        r.gpu_ms = r.frame_ms = r.host_ms = r.floor_frame_ms = -1;
#ifdef KEYER_HAVE_CUDA
        if (have_cuda && bench_cuda(ov, f, reps, samples, &r, bw))
            return 1;
#endif
        keyer_frame_destroy(&f);
        if (json)
            printf("%s{\"size\":\"%s\",\"primitives\":%d,\"scene_ms\":%.4f,\"graph_ms\":%.4f,"
                   "\"cpu_ms\":%.4f,\"gpu_ms\":%.4f,\"frame_ms\":%.4f,\"host_ms\":%.4f,"
                   "\"floor_frame_ms\":%.4f,\"upload_mb\":%.3f}",
                   first ? "" : ",", r.size, r.prims, r.scene_ms, r.graph_ms, r.cpu_ms, r.gpu_ms,
                   r.frame_ms, r.host_ms, r.floor_frame_ms, r.upload_mb);
        else
            printf("%-6s %6d %9.3f %9.3f %9.2f %9.4f %9.4f %9.4f %10.4f %9.3f\n", r.size, r.prims,
                   r.scene_ms, r.graph_ms, r.cpu_ms, r.gpu_ms, r.frame_ms, r.host_ms,
                   r.floor_frame_ms, r.upload_mb);
        first = 0;
    }
    if (json)
        printf("]\n");
    if (!have_cuda && !json)
        printf("(no CUDA device: CPU figures only)\n");
    keyer_overlay_destroy(&ov);
    free(samples);
    return 0;
}
