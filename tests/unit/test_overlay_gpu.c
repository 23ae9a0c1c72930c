/*
 * CUDA overlay renderer against the CPU renderer: the same scenes (boxes, segments, curves,
 * dots, text labels, a kNN graph) drawn on RGBA, NV12 and YUV420P frames in host memory by the
 * CPU and in device memory by CUDA must agree within one code value everywhere.
 * Exits 77 (skipped) when no CUDA device is present.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyer/overlay.h"

typedef struct rng {
    uint32_t s;
} rng;

static float frand(rng *r)
{
    r->s = r->s * 1664525u + 1013904223u;
    return (float)(r->s >> 8) / 16777216.0f;
}

static keyer_color rcolor(rng *r)
{
    keyer_color c = {frand(r), frand(r), frand(r), 0.3f + 0.7f * frand(r)};
    return c;
}

typedef struct scene {
    int boxes, segments, curves, dots, labels, graph_points;
} scene;

/* Fills the overlay with a deterministic random scene for a w x h frame. */
static void build_scene(keyer_overlay *ov, const scene *sc, int w, int h, uint32_t seed)
{
    keyer_error err = {0};
    rng r = {seed};
    keyer_overlay_clear(ov);
    for (int i = 0; i < sc->boxes; i++) {
        float x0 = frand(&r) * w - 20, y0 = frand(&r) * h - 20;
        float bw = 4 + frand(&r) * w / 4, bh = 4 + frand(&r) * h / 4;
        keyer_color fill = rcolor(&r);
        fill.a *= 0.4f;
        assert_int_equal(keyer_overlay_add_box(ov, x0, y0, x0 + bw, y0 + bh, frand(&r) * 20,
                                               frand(&r) * 6, rcolor(&r), fill, &err),
                         KEYER_OK);
    }
    for (int i = 0; i < sc->segments; i++)
        assert_int_equal(keyer_overlay_add_line(ov, frand(&r) * w, frand(&r) * h, frand(&r) * w,
                                                frand(&r) * h, 0.5f + frand(&r) * 5, rcolor(&r),
                                                &err),
                         KEYER_OK);
    for (int i = 0; i < sc->curves; i++)
        assert_int_equal(keyer_overlay_add_curve(ov, frand(&r) * w, frand(&r) * h, frand(&r) * w,
                                                 frand(&r) * h, frand(&r) - 0.5f,
                                                 1 + frand(&r) * 3, rcolor(&r), &err),
                         KEYER_OK);
    for (int i = 0; i < sc->dots; i++)
        assert_int_equal(keyer_overlay_add_dot(ov, frand(&r) * w, frand(&r) * h,
                                               0.5f + frand(&r) * 6, rcolor(&r), &err),
                         KEYER_OK);
    for (int i = 0; i < sc->labels; i++) {
        char text[32];
        snprintf(text, sizeof(text), "id %d %.2f", i, (double)frand(&r));
        keyer_color bg = {0, 0, 0, 0.5f};
        assert_int_equal(keyer_overlay_add_label(ov, frand(&r) * w, frand(&r) * h,
                                                 1 + frand(&r) * 2, text, rcolor(&r), bg, &err),
                         KEYER_OK);
    }
    if (sc->graph_points > 0) {
        keyer_knn_params kp = keyer_knn_params_defaults();
        kp.k = 5;
        kp.max_degree = 5;
        keyer_knn_graph *g = NULL;
        assert_int_equal(keyer_knn_graph_create(&kp, sc->graph_points, &g, &err), KEYER_OK);
        uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)sc->graph_points);
        float *xy = malloc(sizeof(float) * 2 * (size_t)sc->graph_points);
        int cap = sc->graph_points * 5;
        keyer_knn_edge *edges = malloc(sizeof(keyer_knn_edge) * (size_t)cap);
        assert_non_null(ids);
        assert_non_null(xy);
        assert_non_null(edges);
        for (int i = 0; i < sc->graph_points; i++) {
            ids[i] = (uint32_t)i + 1;
            xy[2 * i] = frand(&r) * w;
            xy[2 * i + 1] = frand(&r) * h;
        }
        int n = 0;
        assert_int_equal(keyer_knn_graph_update(g, ids, xy, sc->graph_points, edges, cap, &n, &err),
                         KEYER_OK);
        keyer_color ec = {0.2f, 0.9f, 1, 0.8f};
        for (int i = 0; i < n; i++) {
            const float *a = &xy[2 * (edges[i].a - 1)], *b = &xy[2 * (edges[i].b - 1)];
            assert_int_equal(keyer_overlay_add_line(ov, a[0], a[1], b[0], b[1], 1.5f, ec, &err),
                             KEYER_OK);
        }
        assert_int_equal(keyer_overlay_add_points(ov, xy, sc->graph_points, 2.5f, ec, &err),
                         KEYER_OK);
        free(edges);
        free(xy);
        free(ids);
        keyer_knn_graph_destroy(&g);
    }
}

static void device_free(void *opaque, void *data)
{
    (void)opaque;
    cudaFree(data);
}

/* A device frame with the same format and size as @p host, holding a copy of its pixels. */
static keyer_frame *upload(const keyer_frame *host)
{
    keyer_frame *d = NULL;
    assert_int_equal(keyer_frame_create(&d, NULL), KEYER_OK);
    int planes = keyer_pixel_format_planes(host->format);
    size_t offs[4], total = 0, rows[4], widths[4];
    ptrdiff_t pitch[4];
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(host->format, host->width, host->height, p, &pw,
                                                  &ph, &bpe, NULL),
                         KEYER_OK);
        widths[p] = (size_t)pw * (size_t)bpe;
        pitch[p] = (ptrdiff_t)((widths[p] + 255) & ~(size_t)255) + 256; /* odd padding */
        rows[p] = (size_t)ph;
        offs[p] = total;
        total += (size_t)pitch[p] * rows[p];
    }
    void *mem = NULL;
    assert_int_equal(cudaMalloc(&mem, total), cudaSuccess);
    keyer_buffer *buf = NULL;
    assert_int_equal(keyer_buffer_wrap(mem, total, KEYER_MEMORY_CUDA, device_free, NULL, &buf, NULL),
                     KEYER_OK);
    d->format = host->format;
    d->width = host->width;
    d->height = host->height;
    d->memory = KEYER_MEMORY_CUDA;
    d->device = 0;
    d->matrix = host->matrix;
    d->range = host->range;
    d->buf[0] = buf;
    for (int p = 0; p < planes; p++) {
        d->data[p] = (uint8_t *)mem + offs[p];
        d->stride[p] = pitch[p];
        assert_int_equal(cudaMemcpy2D(d->data[p], (size_t)pitch[p], host->data[p],
                                      (size_t)host->stride[p], widths[p], rows[p],
                                      cudaMemcpyHostToDevice),
                         cudaSuccess);
    }
    return d;
}

/* Downloads @p dev into a new host frame. */
static keyer_frame *download(const keyer_frame *dev)
{
    keyer_frame *h = NULL;
    assert_int_equal(keyer_frame_create(&h, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(h, dev->format, dev->width, dev->height, NULL, NULL),
                     KEYER_OK);
    for (int p = 0; p < keyer_pixel_format_planes(dev->format); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(dev->format, dev->width, dev->height, p, &pw,
                                                  &ph, &bpe, NULL),
                         KEYER_OK);
        assert_int_equal(cudaMemcpy2D(h->data[p], (size_t)h->stride[p], dev->data[p],
                                      (size_t)dev->stride[p], (size_t)pw * (size_t)bpe,
                                      (size_t)ph, cudaMemcpyDeviceToHost),
                         cudaSuccess);
    }
    return h;
}

static keyer_frame *random_frame(keyer_pixel_format fmt, int w, int h, uint32_t seed)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, fmt, w, h, NULL, NULL), KEYER_OK);
    f->matrix = KEYER_COLOR_MATRIX_BT709;
    f->range = KEYER_COLOR_RANGE_LIMITED;
    rng r = {seed};
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(fmt, w, h, p, &pw, &ph, &bpe, NULL), KEYER_OK);
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw * bpe; x++)
                f->data[p][y * f->stride[p] + x] = (uint8_t)(16 + frand(&r) * 200);
    }
    return f;
}

typedef struct diff_stats {
    long pixels, equal;
    int max;
} diff_stats;

static diff_stats compare(const keyer_frame *a, const keyer_frame *b)
{
    diff_stats s = {0, 0, 0};
    for (int p = 0; p < keyer_pixel_format_planes(a->format); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(a->format, a->width, a->height, p, &pw, &ph,
                                                  &bpe, NULL),
                         KEYER_OK);
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw * bpe; x++) {
                int d = abs((int)a->data[p][y * a->stride[p] + x] -
                            (int)b->data[p][y * b->stride[p] + x]);
                s.pixels++;
                s.equal += d == 0;
                if (d > s.max)
                    s.max = d;
            }
    }
    return s;
}

static int changed_samples(const keyer_frame *a, const keyer_frame *b)
{
    diff_stats s = compare(a, b);
    return (int)(s.pixels - s.equal);
}

/* Renders @p sc on CPU and CUDA for one format and size and checks agreement. */
static void check_scene(keyer_overlay *ov, cudaStream_t stream, keyer_pixel_format fmt, int w,
                        int h, const scene *sc, uint32_t seed, const char *name)
{
    keyer_error err = {0};
    keyer_frame *cpu = random_frame(fmt, w, h, seed);
    keyer_frame *orig = random_frame(fmt, w, h, seed);
    keyer_frame *dev = upload(cpu);
    build_scene(ov, sc, w, h, seed * 7 + 1);
    assert_int_equal(keyer_overlay_set_stream(ov, stream, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, cpu, &err), KEYER_OK);
    if (keyer_overlay_render(ov, dev, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    keyer_frame *back = download(dev);
    diff_stats s = compare(cpu, back);
    int touched = changed_samples(orig, cpu);
    printf("  %-34s %-7s %4dx%-4d %6d primitives: %ld samples, %d drawn, %.4f%% equal, max "
           "diff %d\n",
           name, keyer_pixel_format_name(fmt), w, h, keyer_overlay_count(ov), s.pixels, touched,
           100.0 * (double)s.equal / (double)s.pixels, s.max);
    assert_true(touched > 0); /* the scene drew something */
    assert_true(s.max <= 1);
    assert_true((double)s.equal >= 0.99 * (double)s.pixels);
    keyer_frame_destroy(&back);
    keyer_frame_destroy(&dev);
    keyer_frame_destroy(&orig);
    keyer_frame_destroy(&cpu);
}

static void test_cpu_vs_cuda(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(40000, &ov, &err), KEYER_OK);
    cudaStream_t stream;
    assert_int_equal(cudaStreamCreate(&stream), cudaSuccess);
    const scene one_box = {1, 0, 0, 0, 0, 0};
    const scene mixed = {100, 500, 100, 200, 40, 0};
    const scene boxes = {1000, 0, 0, 0, 0, 0};
    const scene segments = {0, 5000, 0, 0, 0, 0};
    const scene graph = {0, 0, 0, 0, 0, 1000};
    const scene acceptance = {100, 500, 100, 0, 0, 1000};
    const keyer_pixel_format fmts[] = {KEYER_PIXEL_FORMAT_RGBA, KEYER_PIXEL_FORMAT_NV12,
                                       KEYER_PIXEL_FORMAT_YUV420P};
    /* KEYER_OVERLAY_GPU_QUICK=1 (e.g. under compute-sanitizer): the small scenes only. */
    const char *quick = getenv("KEYER_OVERLAY_GPU_QUICK");
    for (int i = 0; i < 3; i++) {
        check_scene(ov, stream, fmts[i], 1001, 563, &one_box, 11, "1 box (odd size)");
        check_scene(ov, stream, fmts[i], 1001, 563, &mixed, 12, "mixed + labels (odd size)");
        if (quick && *quick == '1')
            continue;
        check_scene(ov, stream, fmts[i], 1920, 1080, &boxes, 13, "1,000 boxes");
        check_scene(ov, stream, fmts[i], 1920, 1080, &segments, 14, "5,000 segments");
        check_scene(ov, stream, fmts[i], 1920, 1080, &graph, 15, "1,000-point k=5 graph");
    }
    if (quick && *quick == '1') {
        keyer_overlay_destroy(&ov);
        cudaStreamDestroy(stream);
        return;
    }
    check_scene(ov, stream, KEYER_PIXEL_FORMAT_NV12, 3840, 2160, &acceptance, 16,
                "4K: 100 boxes/500 seg/100 curves/graph");
    /* Time the acceptance scene on an NV12 4K frame (render + composite, staging included). */
    keyer_frame *host = random_frame(KEYER_PIXEL_FORMAT_NV12, 3840, 2160, 3);
    keyer_frame *dev = upload(host);
    build_scene(ov, &acceptance, 3840, 2160, 99);
    cudaEvent_t t0, t1;
    assert_int_equal(cudaEventCreate(&t0), cudaSuccess);
    assert_int_equal(cudaEventCreate(&t1), cudaSuccess);
    for (int i = 0; i < 5; i++)
        assert_int_equal(keyer_overlay_render(ov, dev, &err), KEYER_OK);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    const int reps = 50;
    struct timespec h0, h1;
    clock_gettime(CLOCK_MONOTONIC, &h0);
    assert_int_equal(cudaEventRecord(t0, stream), cudaSuccess);
    for (int i = 0; i < reps; i++)
        assert_int_equal(keyer_overlay_render(ov, dev, &err), KEYER_OK);
    assert_int_equal(cudaEventRecord(t1, stream), cudaSuccess);
    clock_gettime(CLOCK_MONOTONIC, &h1);
    assert_int_equal(cudaEventSynchronize(t1), cudaSuccess);
    float ms = 0;
    assert_int_equal(cudaEventElapsedTime(&ms, t0, t1), cudaSuccess);
    double host_ms = ((double)(h1.tv_sec - h0.tv_sec) * 1e3 + (double)(h1.tv_nsec - h0.tv_nsec) / 1e6);
    printf("  4K NV12 acceptance scene (%d primitives): %.3f ms per frame on the GPU timeline, "
           "%.3f ms of host time per render call (binning, staging, launch)\n",
           keyer_overlay_count(ov), (double)ms / reps, host_ms / reps);
    /* The CPU renderer on the same scene, for comparison (single thread). */
    keyer_frame *cpu4k = random_frame(KEYER_PIXEL_FORMAT_NV12, 3840, 2160, 3);
    clock_gettime(CLOCK_MONOTONIC, &h0);
    assert_int_equal(keyer_overlay_render(ov, cpu4k, &err), KEYER_OK);
    clock_gettime(CLOCK_MONOTONIC, &h1);
    printf("  the same scene on the CPU renderer: %.2f ms\n",
           (double)(h1.tv_sec - h0.tv_sec) * 1e3 + (double)(h1.tv_nsec - h0.tv_nsec) / 1e6);
    keyer_frame_destroy(&cpu4k);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    keyer_frame_destroy(&dev);
    keyer_frame_destroy(&host);
    /* An empty overlay leaves a CUDA frame as it was. */
    keyer_frame *a = random_frame(KEYER_PIXEL_FORMAT_RGBA, 64, 64, 5);
    keyer_frame *da = upload(a);
    keyer_overlay_clear(ov);
    assert_int_equal(keyer_overlay_render(ov, da, &err), KEYER_OK);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    keyer_frame *b = download(da);
    assert_int_equal(changed_samples(a, b), 0);
    keyer_frame_destroy(&b);
    keyer_frame_destroy(&da);
    keyer_frame_destroy(&a);
    keyer_overlay_destroy(&ov);
    cudaStreamDestroy(stream);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_vs_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
