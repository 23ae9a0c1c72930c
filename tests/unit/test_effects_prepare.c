/* Model input preparation against a double-precision reference: every format, matrix and
 * range, odd sizes and strides, ROI with rotation, letterbox geometry, area filtering,
 * batches, f16 and NCHW, errors; and the shared reference input tensor of the selfie model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/effects.h"
#include "kt_effects.h"
#include "render/fx_math.h"
#include "testutil.h"

static const keyer_pixel_format formats[] = {
    KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_P010, KEYER_PIXEL_FORMAT_YUV420P,
    KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_RGBA,
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

/* Runs prepare on one frame and the reference; returns the max difference. */
static double compare_one(keyer_frame *f, const keyer_roi *roi, int tw, int th, int letterbox,
                          int area, float scale, float offset, float pad)
{
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.width = tw;
    p.height = th;
    p.fit = letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    p.area = area;
    p.scale = scale;
    p.offset = offset;
    p.pad = pad;
    p.threads = 2;
    keyer_prepare *prep = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_OK);
    size_t n = (size_t)tw * th * 3;
    float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    assert_non_null(got);
    assert_non_null(want);
    const keyer_frame *frames[1] = {f};
    keyer_status st = keyer_prepare_run(prep, frames, roi, 1, got, NULL, &err);
    if (st)
        fail_msg("prepare: %s", err.message);
    kt_ref_prepare(f, roi, tw, th, letterbox, area, scale, offset, pad, want);
    size_t where = 0;
    double d = kt_maxdiff(got, want, n, &where);
    if (d > 1e-3)
        print_message("%s %dx%d -> %dx%d: max diff %g at %zu (got %g want %g)\n",
                      keyer_pixel_format_name(f->format), f->width, f->height, tw, th, d, where,
                      (double)got[where], (double)want[where]);
    free(got);
    free(want);
    keyer_prepare_destroy(&prep);
    assert_null(prep);
    return d;
}

/* Every format x matrix x range, odd sizes, padded strides, shrinking and enlarging. */
static void test_formats_matrices_ranges(void **state)
{
    (void)state;
    static const int sizes[][4] = {
        {37, 23, 16, 16},   /* odd, small, enlarge-ish */
        {101, 77, 32, 20},  /* shrink ~3x/4x: area sampling */
        {64, 48, 128, 96},  /* enlarge 2x */
        {255, 129, 31, 17}, /* odd everything, shrink ~8x */
    };
    double worst = 0;
    for (size_t fi = 0; fi < NFORMATS; fi++)
        for (int m = 0; m < 4; m++)
            for (int r = 0; r < 3; r++)
                for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                    if (!kt_is_yuv(formats[fi]) && (m > 0 || r > 0))
                        continue;
                    keyer_frame *f = kt_frame_padded(formats[fi], sizes[si][0], sizes[si][1],
                                                     6 + (int)si * 2);
                    assert_non_null(f);
                    f->matrix = (keyer_color_matrix)m;
                    f->range = (keyer_color_range)r;
                    kt_fill_random(f, (uint32_t)(fi * 100 + m * 10 + r + si), (int)(si & 1));
                    double d = compare_one(f, NULL, sizes[si][2], sizes[si][3], 0, 1, 1.0f, 0.0f,
                                           0.0f);
                    if (d > worst)
                        worst = d;
                    assert_true(d <= 1e-3);
                    keyer_frame_destroy(&f);
                }
    print_message("formats x matrices x ranges: worst max diff %.3g\n", worst);
}

/* [-1,1] normalisation, letterbox in both directions, rotated ROIs, area on/off. */
static void test_roi_letterbox_normalisation(void **state)
{
    (void)state;
    const keyer_roi rois[] = {
        {0, 0, 0, 0, 0},                       /* whole frame */
        {60.0f, 40.0f, 50.0f, 30.0f, 0.0f},    /* axis-aligned crop */
        {60.0f, 40.0f, 50.0f, 30.0f, 0.4f},    /* rotated crop */
        {20.0f, 70.0f, 80.0f, 90.0f, -2.0f},   /* partly outside the frame */
        {64.0f, 48.0f, 120.0f, 20.0f, 1.5708f},/* quarter turn */
    };
    for (size_t fi = 0; fi < NFORMATS; fi++) {
        keyer_frame *f = kt_frame_padded(formats[fi], 127, 95, 10);
        assert_non_null(f);
        f->matrix = KEYER_COLOR_MATRIX_BT709;
        kt_fill_random(f, 77 + (uint32_t)fi, 1);
        for (size_t i = 0; i < sizeof(rois) / sizeof(rois[0]); i++)
            for (int lb = 0; lb < 2; lb++)
                for (int area = 0; area < 2; area++) {
                    double d = compare_one(f, &rois[i], 48, 40, lb, area, 2.0f, -1.0f, 0.0f);
                    assert_true(d <= 1e-3);
                    d = compare_one(f, &rois[i], 24, 64, lb, area, 1.0f, 0.0f, 0.5f);
                    assert_true(d <= 1e-3);
                }
        keyer_frame_destroy(&f);
    }
}

/* MediaPipe's example: 640x480 into 128x128 letterboxed has 16-pixel bars top and bottom;
 * with [-1,1] and pad 0 the bars are -1. The geometry maps tensor corners to the frame. */
static void test_letterbox_geometry(void **state)
{
    (void)state;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, 640, 480, 0);
    assert_non_null(f);
    for (int y = 0; y < 480; y++)
        memset(f->data[0] + y * f->stride[0], 200, 640 * 3);
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.width = 128;
    p.height = 128;
    p.fit = KEYER_FIT_LETTERBOX;
    p.scale = 2.0f;
    p.offset = -1.0f;
    keyer_prepare *prep = NULL;
    assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
    float *t = malloc(128 * 128 * 3 * sizeof(float));
    keyer_prepare_geometry g;
    const keyer_frame *frames[1] = {f};
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, t, &g, NULL), KEYER_OK);
    assert_float_equal(g.content.x, 0.0f, 1e-5);
    assert_float_equal(g.content.y, 16.0f, 1e-5);
    assert_float_equal(g.content.width, 128.0f, 1e-5);
    assert_float_equal(g.content.height, 96.0f, 1e-5);
    /* tensor (0,16) -> frame (0,0); tensor (128,112) -> frame (640,480) */
    assert_float_equal(g.matrix[0] * 0 + g.matrix[1] * 16 + g.matrix[2], 0.0f, 1e-3);
    assert_float_equal(g.matrix[3] * 0 + g.matrix[4] * 16 + g.matrix[5], 0.0f, 1e-3);
    assert_float_equal(g.matrix[0] * 128 + g.matrix[1] * 112 + g.matrix[2], 640.0f, 1e-3);
    assert_float_equal(g.matrix[3] * 128 + g.matrix[4] * 112 + g.matrix[5], 480.0f, 1e-3);
    for (int y = 0; y < 128; y++)
        for (int x = 0; x < 128; x++) {
            float want = (y < 16 || y >= 112) ? -1.0f : 200.0f / 255.0f * 2.0f - 1.0f;
            for (int c = 0; c < 3; c++)
                assert_float_equal(t[(y * 128 + x) * 3 + c], want, 1e-5);
        }
    free(t);
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&f);
}

/* Shrinking by an integer factor > 2 with area filtering is the box average. */
static void test_area_is_box_average(void **state)
{
    (void)state;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, 64, 40, 3);
    assert_non_null(f);
    kt_fill_random(f, 5, 0);
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.width = 16;
    p.height = 10;
    keyer_prepare *prep = NULL;
    assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
    float t[16 * 10 * 3];
    const keyer_frame *frames[1] = {f};
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, t, NULL, NULL), KEYER_OK);
    for (int y = 0; y < 10; y++)
        for (int x = 0; x < 16; x++)
            for (int c = 0; c < 3; c++) {
                double sum = 0;
                for (int j = 0; j < 4; j++)
                    for (int i = 0; i < 4; i++)
                        sum += kt_code(f, c, 4 * x + i, 4 * y + j);
                assert_float_equal(t[(y * 16 + x) * 3 + c], sum / 16 / 255, 1e-5);
            }
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&f);
}

/* A batch of different frames equals one call per frame; f16 equals rounded f32; NCHW is the
 * transpose of NHWC. */
static void test_batch_f16_nchw(void **state)
{
    (void)state;
    keyer_frame *f[3] = {
        kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 99, 55, 2),
        kt_frame_padded(KEYER_PIXEL_FORMAT_RGBA, 40, 80, 4),
        kt_frame_padded(KEYER_PIXEL_FORMAT_P010, 321, 181, 6),
    };
    for (int i = 0; i < 3; i++) {
        assert_non_null(f[i]);
        kt_fill_random(f[i], 40 + (uint32_t)i, 1);
    }
    const int W = 33, H = 21;
    const size_t item = (size_t)W * H * 3;
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.width = W;
    p.height = H;
    p.max_batch = 3;
    p.fit = KEYER_FIT_LETTERBOX;
    keyer_prepare *prep = NULL, *prep16 = NULL, *prepc = NULL;
    assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
    p.dtype = KEYER_DTYPE_F16;
    assert_int_equal(keyer_prepare_create(&p, &prep16, NULL), KEYER_OK);
    p.dtype = KEYER_DTYPE_F32;
    p.layout = KEYER_TENSOR_LAYOUT_NCHW;
    assert_int_equal(keyer_prepare_create(&p, &prepc, NULL), KEYER_OK);
    float *batch = calloc(3 * item, sizeof(float)), *one = calloc(item, sizeof(float));
    float *nchw = calloc(3 * item, sizeof(float));
    uint16_t *half = calloc(3 * item, sizeof(uint16_t));
    const keyer_frame *frames[3] = {f[0], f[1], f[2]};
    keyer_prepare_geometry g[3];
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 3, batch, g, NULL), KEYER_OK);
    assert_int_equal(keyer_prepare_run(prep16, frames, NULL, 3, half, NULL, NULL), KEYER_OK);
    assert_int_equal(keyer_prepare_run(prepc, frames, NULL, 3, nchw, NULL, NULL), KEYER_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(keyer_prepare_run(prep, frames + i, NULL, 1, one, NULL, NULL), KEYER_OK);
        assert_memory_equal(one, batch + i * item, item * sizeof(float));
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < 3; c++) {
                    float v = batch[i * item + ((size_t)y * W + x) * 3 + c];
                    assert_true(nchw[i * item + (size_t)c * W * H + (size_t)y * W + x] == v);
                    assert_int_equal(half[i * item + ((size_t)y * W + x) * 3 + c],
                                     kr_float_to_half(v));
                }
    }
    /* the tall frame is letterboxed horizontally */
    assert_true(g[1].content.x > 0 && g[1].content.y == 0.0f);
    free(batch);
    free(one);
    free(nchw);
    free(half);
    keyer_prepare_destroy(&prep);
    keyer_prepare_destroy(&prep16);
    keyer_prepare_destroy(&prepc);
    for (int i = 0; i < 3; i++)
        keyer_frame_destroy(&f[i]);
}

/* Results do not depend on the number of threads. */
static void test_threads_do_not_change_results(void **state)
{
    (void)state;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 1001, 603, 6);
    kt_fill_random(f, 31, 1);
    float *t[2];
    for (int k = 0; k < 2; k++) {
        keyer_prepare_params p = keyer_prepare_params_defaults();
        p.width = 193;
        p.height = 255;
        p.threads = k ? 7 : 1;
        keyer_prepare *prep = NULL;
        assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
        t[k] = malloc(sizeof(float) * 193 * 255 * 3);
        const keyer_frame *frames[1] = {f};
        assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, t[k], NULL, NULL), KEYER_OK);
        keyer_prepare_destroy(&prep);
    }
    assert_memory_equal(t[0], t[1], sizeof(float) * 193 * 255 * 3);
    free(t[0]);
    free(t[1]);
    keyer_frame_destroy(&f);
}

/* The software half conversion on known values (round to nearest even, subnormals, inf). */
static void test_float_to_half(void **state)
{
    (void)state;
    assert_int_equal(kr_float_to_half(0.0f), 0x0000);
    assert_int_equal(kr_float_to_half(-0.0f), 0x8000);
    assert_int_equal(kr_float_to_half(1.0f), 0x3C00);
    assert_int_equal(kr_float_to_half(-2.0f), 0xC000);
    assert_int_equal(kr_float_to_half(65504.0f), 0x7BFF);
    assert_int_equal(kr_float_to_half(65520.0f), 0x7C00);
    assert_int_equal(kr_float_to_half(1e9f), 0x7C00);
    assert_int_equal(kr_float_to_half(5.9604645e-8f), 0x0001); /* 2^-24 */
    assert_int_equal(kr_float_to_half(2.98e-8f), 0x0000);      /* below half of 2^-24 */
    assert_int_equal(kr_float_to_half(6.1035156e-5f), 0x0400); /* 2^-14 */
    assert_int_equal(kr_float_to_half(1.0f + 1.0f / 2048), 0x3C00); /* tie to even */
    assert_int_equal(kr_float_to_half(1.0f + 3.0f / 2048), 0x3C02); /* tie to even, up */
    assert_int_equal(kr_float_to_half(0.333333343f), 0x3555);
    assert_int_equal(kr_float_to_half(INFINITY), 0x7C00);
    assert_true((kr_float_to_half(NAN) & 0x7C00) == 0x7C00 && (kr_float_to_half(NAN) & 0x3FF));
}

/* Colour round trip per matrix and range: a colour encoded by the compositor (COLOR mode,
 * alpha 0) into a YUV frame and prepared back gives the colour within quantisation. */
static void test_colour_round_trip(void **state)
{
    (void)state;
    static const uint32_t colours[] = {0x000000, 0xFFFFFF, 0xFF0000, 0x00FF00, 0x0000FF,
                                       0x808080, 0x12C0A4, 0xE07010};
    const keyer_pixel_format fm[] = {KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_P010,
                                     KEYER_PIXEL_FORMAT_YUV420P};
    for (size_t fi = 0; fi < 3; fi++)
        for (int m = 1; m <= 3; m++)
            for (int r = 1; r <= 2; r++) {
                double worst = 0;
                for (size_t ci = 0; ci < sizeof(colours) / sizeof(colours[0]); ci++) {
                    keyer_frame *f = kt_frame_padded(fm[fi], 18, 10, 2);
                    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 18, 10, 1);
                    assert_non_null(f);
                    assert_non_null(a);
                    f->matrix = (keyer_color_matrix)m;
                    f->range = (keyer_color_range)r;
                    keyer_composite_params cp = keyer_composite_params_defaults();
                    cp.mode = KEYER_COMPOSITE_COLOR;
                    cp.color = colours[ci];
                    cp.dither = 0;
                    keyer_composite *comp = NULL;
                    keyer_error err = {0};
                    assert_int_equal(keyer_composite_create(&cp, &comp, &err), KEYER_OK);
                    if (keyer_composite_run(comp, f, a, f, &err))
                        fail_msg("%s", err.message);
                    keyer_prepare_params p = keyer_prepare_params_defaults();
                    p.width = 18;
                    p.height = 10;
                    keyer_prepare *prep = NULL;
                    assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
                    float t[18 * 10 * 3];
                    const keyer_frame *frames[1] = {f};
                    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, t, NULL, NULL),
                                     KEYER_OK);
                    double want[3] = {(colours[ci] >> 16 & 255) / 255.0,
                                      (colours[ci] >> 8 & 255) / 255.0, (colours[ci] & 255) / 255.0};
                    for (int i = 0; i < 18 * 10; i++)
                        for (int c = 0; c < 3; c++) {
                            double d = fabs(t[i * 3 + c] - want[c]);
                            if (d > worst)
                                worst = d;
                        }
                    keyer_prepare_destroy(&prep);
                    keyer_composite_destroy(&comp);
                    keyer_frame_destroy(&f);
                    keyer_frame_destroy(&a);
                }
                /* 8-bit: Y and chroma quantisation amplify to about 2 codes in R or B */
                double tol = fm[fi] == KEYER_PIXEL_FORMAT_P010 ? 0.8 / 255 : 2.5 / 255;
                if (worst > tol)
                    print_message("%s matrix %d range %d: worst %g\n",
                                  keyer_pixel_format_name(fm[fi]), m, r, worst * 255);
                assert_true(worst <= tol);
            }
}

/* Bad input gives clear errors. */
static void test_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_prepare *prep = NULL;
    keyer_prepare_params p = keyer_prepare_params_defaults();
    assert_int_equal(keyer_prepare_create(NULL, &prep, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p.width = 0;
    assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "width"));
    p = keyer_prepare_params_defaults();
    p.dtype = KEYER_DTYPE_I32;
    assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "dtype"));
    p = keyer_prepare_params_defaults();
    p.width = 8;
    p.height = 8;
    assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_OK);
    float t[8 * 8 * 3];
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 16, 16, 0);
    keyer_frame *g = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 16, 16, 0);
    const keyer_frame *frames[2] = {f, g};
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 0, t, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 2, t, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "max_batch"));
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, NULL, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_prepare_run(NULL, frames, NULL, 1, t, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    const keyer_frame *grey[1] = {g};
    assert_int_equal(keyer_prepare_run(prep, grey, NULL, 1, t, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "gray8"));
    const keyer_frame *nul[1] = {NULL};
    assert_int_equal(keyer_prepare_run(prep, nul, NULL, 1, t, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_roi bad = {NAN, 0, 4, 4, 0};
    const keyer_frame *one[1] = {f};
    assert_int_equal(keyer_prepare_run(prep, one, &bad, 1, t, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "region of interest"));
    /* a CUDA frame: without CUDA support it is UNSUPPORTED; with it, the fake pointer would
     * be a device error, so only test the CPU-only build's answer */
#ifndef KEYER_HAVE_CUDA
    keyer_frame dev = *f;
    dev.memory = KEYER_MEMORY_CUDA;
    for (int i = 0; i < KEYER_FRAME_MAX_PLANES; i++)
        dev.buf[i] = NULL;
    const keyer_frame *devs[1] = {&dev};
    assert_int_equal(keyer_prepare_run(prep, devs, NULL, 1, t, NULL, &err),
                     KEYER_STATUS_UNSUPPORTED);
    assert_non_null(strstr(err.message, "CUDA"));
#endif
    keyer_prepare_destroy(&prep);
    keyer_prepare_destroy(&prep);
    keyer_prepare_destroy(NULL);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&g);
}

/* Allocation failures at create are reported and leak nothing. */
static void test_out_of_memory(void **state)
{
    (void)state;
    for (long fail = 1; fail < 8; fail++) {
        kt_alloc_state as = {0, 0, fail};
        keyer_allocator a = kt_counting_allocator(&as);
        keyer_prepare_params p = keyer_prepare_params_defaults();
        p.allocator = &a;
        p.threads = 1;
        keyer_prepare *prep = NULL;
        keyer_status st = keyer_prepare_create(&p, &prep, NULL);
        if (st == KEYER_OK)
            keyer_prepare_destroy(&prep);
        else
            assert_int_equal(st, KEYER_STATUS_OUT_OF_MEMORY);
        assert_int_equal(as.live, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_matrices_ranges),
        cmocka_unit_test(test_roi_letterbox_normalisation),
        cmocka_unit_test(test_letterbox_geometry),
        cmocka_unit_test(test_area_is_box_average),
        cmocka_unit_test(test_batch_f16_nchw),
        cmocka_unit_test(test_float_to_half),
        cmocka_unit_test(test_threads_do_not_change_results),
        cmocka_unit_test(test_colour_round_trip),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
