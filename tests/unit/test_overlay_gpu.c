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

#include "keyer/overlay.h"
#include "kt_overlay_scene.h"
#include "kt_gpu.h"

/* Fills the overlay with a deterministic random scene for a w x h frame. */
static void build_scene(keyer_overlay *ov, const kt_scene *sc, int w, int h, uint32_t seed)
{
    keyer_error err = {0};
    if (kt_overlay_scene(ov, sc, w, h, seed, &err))
        fail_msg("scene: %s", err.message);
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
    uint32_t r = seed;
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(fmt, w, h, p, &pw, &ph, &bpe, NULL), KEYER_OK);
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw * bpe; x++)
                f->data[p][y * f->stride[p] + x] = (uint8_t)(16 + kt_scene_uniform(&r) * 200);
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
                        int h, const kt_scene *sc, uint32_t seed, const char *name)
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
    const kt_scene one_box = {1, 0, 0, 0, 0, 0};
    const kt_scene mixed = {100, 500, 100, 200, 40, 0};
    const kt_scene boxes = {1000, 0, 0, 0, 0, 0};
    const kt_scene segments = {0, 5000, 0, 0, 0, 0};
    const kt_scene graph = {0, 0, 0, 0, 0, 1000};
    const kt_scene acceptance = KT_SCENE_ACCEPTANCE;
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_vs_cuda),
    };
    return KT_GPU_RUN_GROUP(tests, NULL, NULL);
}
