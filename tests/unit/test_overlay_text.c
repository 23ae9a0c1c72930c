/* Overlay text (built-in 5x7 font, area-coverage anti-aliasing), labels, points and
 * connections. */
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
#include "overlay/overlay_internal.h"

static keyer_frame *rgba_frame(int w, int h)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGBA, w, h, NULL, NULL), KEYER_OK);
    for (int y = 0; y < h; y++)
        memset(f->data[0] + y * f->stride[0], 0, (size_t)w * 4);
    return f;
}

static int alpha_at(const keyer_frame *f, int x, int y)
{
    return f->data[0][y * f->stride[0] + x * 4 + 3];
}

static const keyer_color white = {1, 1, 1, 1};

/* The font table: 95 distinct glyphs, 5 columns wide, every one but the space lit. */
static void test_font_table(void **state)
{
    (void)state;
    for (int i = 0; i < 95; i++) {
        int lit = 0;
        for (int r = 0; r < KR_FONT_H; r++) {
            assert_int_equal(kr_font_5x7[i][r] & ~0x1f, 0);
            lit |= kr_font_5x7[i][r];
        }
        if (i == 0)
            assert_int_equal(lit, 0);
        else
            assert_true(lit != 0);
        for (int j = 0; j < i; j++)
            assert_true(memcmp(kr_font_5x7[i], kr_font_5x7[j], KR_FONT_H) != 0);
    }
}

static void test_text_size(void **state)
{
    (void)state;
    float w = -1, h = -1;
    keyer_overlay_text_size("", 2, &w, &h);
    assert_true(w == 0 && h == 0);
    keyer_overlay_text_size("id 12", 1, &w, &h);
    assert_true(w == 29 && h == 7);
    keyer_overlay_text_size("ab\nlonger", 2, &w, &h);
    assert_true(w == 2 * 35 && h == 2 * 16);
    keyer_overlay_text_size(NULL, 2, &w, &h);
    assert_true(w == 0 && h == 0);
}

/* At scale 1 and an integer origin every pixel is exactly one font cell: the rendered text
 * reads back as the font's bits, character by character. */
static void test_text_reads_back(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(64, &ov, &err), KEYER_OK);
    const char *text = "Id 42: 0.98 ~{}@";
    keyer_frame *f = rgba_frame(120, 20);
    assert_int_equal(keyer_overlay_add_text(ov, 3, 5, 1, text, white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), (int)strlen(text) - 3); /* 3 spaces: no primitive */
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    for (size_t i = 0; i < strlen(text); i++) {
        const uint8_t *g = kr_font_5x7[text[i] - 32];
        for (int r = 0; r < KR_FONT_H; r++)
            for (int c = 0; c < KR_FONT_ADVANCE; c++) {
                int on = c < KR_FONT_W && ((g[r] >> (KR_FONT_W - 1 - c)) & 1);
                assert_int_equal(alpha_at(f, 3 + (int)i * KR_FONT_ADVANCE + c, 5 + r), on ? 255 : 0);
            }
    }
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

/* Anti-aliasing: at a fractional origin and scale the coverage of every pixel is the covered
 * area, so the summed alpha equals the lit area (cells x scale^2) and edge pixels are partial. */
static void test_text_area_coverage(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(8, &ov, &err), KEYER_OK);
    const float scales[] = {1.0f, 1.7f, 3.25f};
    const float offs[][2] = {{10.5f, 7.25f}, {10.3f, 7.9f}, {11.0f, 8.0f}};
    for (int si = 0; si < 3; si++)
        for (int oi = 0; oi < 3; oi++) {
            keyer_frame *f = rgba_frame(64, 48);
            keyer_overlay_clear(ov);
            assert_int_equal(keyer_overlay_add_text(ov, offs[oi][0], offs[oi][1], scales[si], "B",
                                                    white, &err),
                             KEYER_OK);
            assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
            int cells = 0;
            for (int r = 0; r < KR_FONT_H; r++)
                for (int c = 0; c < KR_FONT_W; c++)
                    cells += (kr_font_5x7['B' - 32][r] >> c) & 1;
            double sum = 0;
            int partial = 0;
            for (int y = 0; y < 48; y++)
                for (int x = 0; x < 64; x++) {
                    int a = alpha_at(f, x, y);
                    sum += a / 255.0;
                    partial += a > 0 && a < 255;
                }
            double area = cells * (double)scales[si] * scales[si];
            /* Each pixel is rounded to 1/255: a tolerance of half a code value per pixel. */
            assert_true(fabs(sum - area) < 0.5 / 255 * 64 * 48 / 8 + 1e-3);
            if (offs[oi][0] != floorf(offs[oi][0]))
                assert_true(partial > 0);
            keyer_frame_destroy(&f);
        }
    /* A pixel split in half by a cell edge: origin x = 10.5 puts the left edge of column 0 of
     * 'B' (lit on every row) through the middle of pixel 10. */
    keyer_frame *f = rgba_frame(64, 48);
    keyer_overlay_clear(ov);
    assert_int_equal(keyer_overlay_add_text(ov, 10.5f, 8, 2, "B", white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    assert_int_equal(alpha_at(f, 10, 9), 128);
    assert_int_equal(alpha_at(f, 11, 9), 255);
    assert_int_equal(alpha_at(f, 9, 9), 0);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

static void test_label_and_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(6, &ov, &err), KEYER_OK);
    keyer_color bg = {0, 0, 1, 1};
    keyer_frame *f = rgba_frame(80, 40);
    /* Plate + 2 glyphs ("7" and "\x01" drawn as '?'), newline ignored. */
    assert_int_equal(keyer_overlay_add_label(ov, 4, 4, 2, "7\n\x01", white, bg, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), 3);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    /* Plate corner region inside the margin: blue. Text: white at the top of '7' (row 0 is
     * fully lit: #####) at x = 4 + 4 (margin) + 1, y = 4 + 4. */
    const uint8_t *p = f->data[0] + 6 * f->stride[0] + 20 * 4;
    assert_int_equal(p[2], 255);
    assert_int_equal(p[0], 0);
    p = f->data[0] + 8 * f->stride[0] + 9 * 4;
    assert_int_equal(p[0], 255);
    /* Second line: '?' row 0 is .###. : column 1 lit at y = 8 + 18. */
    p = f->data[0] + 26 * f->stride[0] + (8 + 2) * 4;
    assert_int_equal(p[0], 255);
    /* All or nothing: 3 more slots do not hold a plate and 3 glyphs. */
    assert_int_equal(keyer_overlay_add_label(ov, 0, 0, 1, "abc", white, bg, &err),
                     KEYER_STATUS_OUT_OF_MEMORY);
    assert_int_equal(keyer_overlay_count(ov), 3);
    assert_int_equal(keyer_overlay_add_text(ov, 0, 0, 1, "abc", white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), 6);
    assert_int_equal(keyer_overlay_add_text(ov, 0, 0, 0.5f, "a", white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_text(ov, NAN, 0, 1, "a", white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_text(ov, 0, 0, 1, NULL, white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_text(NULL, 0, 0, 1, "a", white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

static void test_points_and_connections(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(16, &ov, &err), KEYER_OK);
    float xy[] = {10, 10, 50, 10, NAN, NAN, 50, 30};
    int pairs[] = {0, 1, 1, 2, 1, 3};
    assert_int_equal(keyer_overlay_add_points(ov, xy, 4, 3, white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), 3); /* the NaN point is skipped */
    assert_int_equal(keyer_overlay_add_connections(ov, xy, 4, pairs, 3, 2, white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), 5); /* 1-2 has a NaN end */
    int bad[] = {0, 4};
    assert_int_equal(keyer_overlay_add_connections(ov, xy, 4, bad, 1, 2, white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "outside"));
    keyer_frame *f = rgba_frame(64, 40);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    assert_int_equal(alpha_at(f, 30, 10), 255); /* on 0-1 */
    assert_int_equal(alpha_at(f, 50, 20), 255); /* on 1-3 */
    assert_int_equal(alpha_at(f, 30, 20), 0);   /* between */
    assert_int_equal(alpha_at(f, 10, 10), 255); /* a dot */
    keyer_frame_destroy(&f);
    /* Capacity: all or nothing. */
    float many[40];
    for (int i = 0; i < 40; i++)
        many[i] = (float)i;
    assert_int_equal(keyer_overlay_add_points(ov, many, 20, 1, white, &err),
                     KEYER_STATUS_OUT_OF_MEMORY);
    assert_int_equal(keyer_overlay_count(ov), 5);
    keyer_overlay_destroy(&ov);
}

/* Text on NV12: luma follows the glyph, chroma stays neutral for white text. */
static void test_text_nv12(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    keyer_frame *f = NULL;
    assert_int_equal(keyer_overlay_create(8, &ov, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NV12, 40, 20, NULL, &err), KEYER_OK);
    f->range = KEYER_COLOR_RANGE_LIMITED;
    for (int y = 0; y < 20; y++)
        memset(f->data[0] + y * f->stride[0], 16, 40);
    for (int y = 0; y < 10; y++)
        memset(f->data[1] + y * f->stride[1], 128, 40);
    assert_int_equal(keyer_overlay_add_text(ov, 2, 2, 2, "L", white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    assert_int_equal(f->data[0][4 * f->stride[0] + 2], 235); /* 'L' column 0 */
    assert_int_equal(f->data[0][4 * f->stride[0] + 6], 16);  /* 'L' column 2, row 1: unlit */
    assert_int_equal(f->data[1][2 * f->stride[1] + 2], 128);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

static float rnd(uint32_t *r)
{
    *r = *r * 1664525u + 1013904223u;
    return (float)(*r >> 8) / 16777216.0f;
}

/* Tile binning (with the culling of tiles a segment or an unfilled box cannot reach) gives
 * exactly the image of shading every primitive at every pixel. */
static void test_binning_is_exact(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(4000, &ov, &err), KEYER_OK);
    const int w = 517, h = 389;
    uint32_t r = 12345;
#define RND() rnd(&r)
    keyer_color none = {0, 0, 0, 0};
    for (int i = 0; i < 300; i++) {
        keyer_color c = {RND(), RND(), RND(), 0.4f + 0.6f * RND()};
        float x0 = RND() * w * 1.2f - 50, y0 = RND() * h * 1.2f - 50;
        switch (i % 4) {
        case 0:
            assert_int_equal(keyer_overlay_add_line(ov, x0, y0, RND() * w, RND() * h,
                                                    0.5f + 8 * RND(), c, &err),
                             KEYER_OK);
            break;
        case 1: {
            float bw = 5 + RND() * w / 2, bh = 5 + RND() * h / 2;
            assert_int_equal(keyer_overlay_add_box(ov, x0, y0, x0 + bw, y0 + bh, 40 * RND(),
                                                   6 * RND(), c, i % 8 == 1 ? none : c, &err),
                             KEYER_OK);
            break;
        }
        case 2:
            assert_int_equal(keyer_overlay_add_curve(ov, x0, y0, RND() * w, RND() * h,
                                                     RND() - 0.5f, 1 + 3 * RND(), c, &err),
                             KEYER_OK);
            break;
        default:
            assert_int_equal(keyer_overlay_add_text(ov, x0, y0, 1 + 3 * RND(), "Tile 42", c, &err),
                             KEYER_OK);
        }
    }
#undef RND
    keyer_frame *f = rgba_frame(w, h);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    long differ = 0, drawn = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float acc[4] = {0, 0, 0, 0};
            for (int k = 0; k < keyer_overlay_count(ov); k++)
                if (kr_ov_touches(&ov->prims[k], x, y))
                    kr_ov_shade(&ov->prims[k], x, y, acc);
            uint8_t ref[4] = {0, 0, 0, 0};
            if (acc[3] > 0)
                kr_ov_blend_rgba(ref, acc);
            const uint8_t *got = f->data[0] + y * f->stride[0] + x * 4;
            differ += memcmp(ref, got, 4) != 0;
            drawn += ref[3] != 0;
        }
    printf("  %d primitives, %ld pixels drawn, %ld differ from the unbinned reference\n",
           keyer_overlay_count(ov), drawn, differ);
    assert_true(drawn > w * h / 4);
    assert_int_equal(differ, 0);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_font_table),
        cmocka_unit_test(test_text_size),
        cmocka_unit_test(test_text_reads_back),
        cmocka_unit_test(test_text_area_coverage),
        cmocka_unit_test(test_label_and_errors),
        cmocka_unit_test(test_points_and_connections),
        cmocka_unit_test(test_text_nv12),
        cmocka_unit_test(test_binning_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
