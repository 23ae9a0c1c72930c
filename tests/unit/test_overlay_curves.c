/*
 * Curves are recorded as one Bézier record and flattened by the renderer: the CPU renderer's
 * result must be exactly that of the same curves flattened on the host into line segments as
 * keyer_overlay_add_curve did before (written again here as the reference), on RGBA and NV12,
 * also when keyer_overlay_truncate cuts a curve in the middle; and the arguments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/overlay.h"

static float uni(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f;
}

/* The reference: the curve as host-flattened line segments (keyer's earlier add_curve). */
static int add_curve_as_lines(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                              float bend, float width, keyer_color color)
{
    keyer_error err = {0};
    float dx = x1 - x0, dy = y1 - y0, len = sqrtf(dx * dx + dy * dy);
    float cx = (x0 + x1) / 2 - dy * bend, cy = (y0 + y1) / 2 + dx * bend;
    float ddx = x0 - 2 * cx + x1, ddy = y0 - 2 * cy + y1;
    float dev = sqrtf(ddx * ddx + ddy * ddy);
    int n = (int)ceilf(sqrtf(dev / 0.4f));
    if (n < 1 || len == 0)
        n = 1;
    if (n > 64)
        n = 64;
    float px = x0, py = y0;
    for (int i = 1; i <= n; i++) {
        float t = (float)i / (float)n, u = 1 - t;
        float qx = u * u * x0 + 2 * u * t * cx + t * t * x1;
        float qy = u * u * y0 + 2 * u * t * cy + t * t * y1;
        assert_int_equal(keyer_overlay_add_line(ov, px, py, qx, qy, width, color, &err), KEYER_OK);
        px = qx;
        py = qy;
    }
    return n;
}

static keyer_frame *frame(keyer_pixel_format fmt, int w, int h, uint32_t seed)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, fmt, w, h, NULL, NULL), KEYER_OK);
    f->matrix = KEYER_COLOR_MATRIX_BT709;
    f->range = KEYER_COLOR_RANGE_LIMITED;
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(fmt, w, h, p, &pw, &ph, &bpe, NULL), KEYER_OK);
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw * bpe; x++)
                f->data[p][y * f->stride[p] + x] = (uint8_t)(16 + uni(&seed) * 200);
    }
    return f;
}

static long differing(const keyer_frame *a, const keyer_frame *b)
{
    long d = 0;
    for (int p = 0; p < keyer_pixel_format_planes(a->format); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(a->format, a->width, a->height, p, &pw, &ph,
                                                  &bpe, NULL),
                         KEYER_OK);
        for (int y = 0; y < ph; y++)
            d += memcmp(a->data[p] + y * a->stride[p], b->data[p] + y * b->stride[p],
                        (size_t)(pw * bpe)) != 0;
    }
    return d;
}

/* Fills ov with 300 curves (and dots between them) and ref with the same curves as host-made
 * segments; *mid is a count that cuts curve 150 in the middle. Returns the curves' segments. */
static int build(keyer_overlay *ov, keyer_overlay *ref, int w, int h, int *mid)
{
    keyer_error err = {0};
    keyer_overlay_clear(ov);
    keyer_overlay_clear(ref);
    uint32_t s = 4242;
    int total = 0;
    *mid = -1;
    for (int i = 0; i < 300; i++) {
        keyer_color c = {uni(&s), uni(&s), uni(&s), 0.3f + 0.7f * uni(&s)};
        float x0 = uni(&s) * (float)w * 1.2f - 60, y0 = uni(&s) * (float)h * 1.2f - 30;
        float x1 = x0 + (uni(&s) - 0.5f) * 400, y1 = y0 + (uni(&s) - 0.5f) * 300;
        float bend = (uni(&s) - 0.5f) * (i % 10 == 0 ? 8.0f : 1.2f), width = 0.5f + 6 * uni(&s);
        if (i == 7) { /* a curve of zero length */
            x1 = x0;
            y1 = y0;
        }
        int before = keyer_overlay_count(ov);
        assert_int_equal(keyer_overlay_add_curve(ov, x0, y0, x1, y1, bend, width, c, &err),
                         KEYER_OK);
        int n = add_curve_as_lines(ref, x0, y0, x1, y1, bend, width, c);
        /* The same slots of the capacity as the segments. */
        assert_int_equal(keyer_overlay_count(ov) - before, n);
        if (i == 150) {
            assert_true(n > 2);
            *mid = before + n / 2;
        }
        if (i % 3 == 0) { /* other primitives between curves */
            assert_int_equal(keyer_overlay_add_dot(ov, x1, y1, 3, c, &err), KEYER_OK);
            assert_int_equal(keyer_overlay_add_dot(ref, x1, y1, 3, c, &err), KEYER_OK);
        }
        total += n;
    }
    assert_int_equal(keyer_overlay_count(ov), keyer_overlay_count(ref));
    return total;
}

static void test_same_as_host_flattening(void **state)
{
    (void)state;
    keyer_error err = {0};
    const int w = 640, h = 360;
    keyer_overlay *ov = NULL, *ref = NULL;
    assert_int_equal(keyer_overlay_create(40000, &ov, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_create(40000, &ref, &err), KEYER_OK);
    static const keyer_pixel_format fmts[] = {KEYER_PIXEL_FORMAT_RGBA, KEYER_PIXEL_FORMAT_NV12};
    for (int k = 0; k < 2; k++)
        for (int cut = 0; cut < 2; cut++) {
            int mid = -1, total = build(ov, ref, w, h, &mid);
            if (cut) { /* truncated in the middle of a curve: its first segments stay */
                keyer_overlay_truncate(ov, mid);
                keyer_overlay_truncate(ref, mid);
            }
            keyer_frame *a = frame(fmts[k], w, h, 9), *b = frame(fmts[k], w, h, 9);
            keyer_frame *orig = frame(fmts[k], w, h, 9);
            assert_int_equal(keyer_overlay_render(ov, a, &err), KEYER_OK);
            assert_int_equal(keyer_overlay_render(ref, b, &err), KEYER_OK);
            long rows_drawn = differing(a, orig), rows_differ = differing(a, b);
            printf("  %s%s: %d primitives (%d curve segments), %ld rows drawn, %ld rows differ "
                   "from the host-flattened reference\n",
                   keyer_pixel_format_name(fmts[k]), cut ? " truncated mid-curve" : "",
                   keyer_overlay_count(ov), total, rows_drawn, rows_differ);
            assert_true(rows_drawn > h / 2);
            assert_int_equal(rows_differ, 0);
            keyer_frame_destroy(&a);
            keyer_frame_destroy(&b);
            keyer_frame_destroy(&orig);
        }
    keyer_overlay_destroy(&ov);
    keyer_overlay_destroy(&ref);
}

static void test_curve_arguments(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    keyer_color c = {1, 1, 1, 1};
    assert_int_equal(keyer_overlay_create(4, &ov, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_add_curve(ov, 0, 0, 10, 0, 0.1f, 0, c, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_curve(ov, 0, 0, 10, 0, NAN, 1, c, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_curve(ov, 0, 0, 10, 0, 1e38f, 1, c, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_curve(ov, 0, 0, 2e30f, 0, 0, 1, c, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_curve(NULL, 0, 0, 10, 0, 0, 1, c, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    /* A curve needing more segments than the capacity left adds nothing. */
    assert_int_equal(keyer_overlay_add_curve(ov, 0, 0, 200, 0, 0.5f, 1, c, &err),
                     KEYER_STATUS_OUT_OF_MEMORY);
    assert_int_equal(keyer_overlay_count(ov), 0);
    assert_int_equal(keyer_overlay_add_curve(ov, 0, 0, 200, 0, 0, 1, c, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), 1); /* straight: one segment */
    keyer_overlay_destroy(&ov);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_host_flattening),
        cmocka_unit_test(test_curve_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
