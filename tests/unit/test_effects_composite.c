/* Compositing: mask-weighted blur against a double-precision reference (every format), no
 * bleeding of the person into the blurred background, colour/green/image replacement with
 * cover scaling, straight and premultiplied RGBA, mask outputs, 10-bit precision and no
 * banding, in place, RGBA alpha kept, errors. */
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
#include "testutil.h"

static const keyer_pixel_format formats[] = {
    KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_P010, KEYER_PIXEL_FORMAT_YUV420P,
    KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_RGBA,
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

static keyer_composite *make_comp(const char *opts)
{
    keyer_composite_params p = keyer_composite_params_defaults();
    p.threads = 2;
    keyer_error err = {0};
    if (keyer_options_parse(keyer_composite_options(), &p, opts, &err))
        fail_msg("%s", err.message);
    keyer_composite *c = NULL;
    if (keyer_composite_create(&p, &c, &err))
        fail_msg("%s", err.message);
    return c;
}

/* A matte: a soft disc (person) with random noise at its edge. */
static keyer_frame *disc_alpha(int W, int H, int f32, double cx, double cy, double r)
{
    keyer_frame *a = kt_frame_padded(f32 ? KEYER_PIXEL_FORMAT_GRAYF32 : KEYER_PIXEL_FORMAT_GRAY8, W,
                                     H, 5);
    kt_rng rng = {99};
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double d = hypot(x + 0.5 - cx, y + 0.5 - cy) - r;
            double v = 1 / (1 + exp(d / 2.0)) + ((int)(kt_next(&rng) % 21) - 10) / 400.0;
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            uint8_t *row = a->data[0] + y * a->stride[0];
            if (f32)
                ((float *)(void *)row)[x] = (float)v;
            else
                row[x] = (uint8_t)lround(v * 255);
        }
    return a;
}

static double alpha_at(const keyer_frame *a, int x, int y)
{
    const uint8_t *row = a->data[0] + y * a->stride[0];
    if (a->format == KEYER_PIXEL_FORMAT_GRAYF32) {
        float v = ((const float *)(const void *)row)[x];
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    return row[x] / 255.0;
}

static double alpha_level(const keyer_frame *a, int level, int x, int y)
{
    if (!level)
        return alpha_at(a, x, y);
    int x0 = 2 * x, y0 = 2 * y, x1 = x0 + 1 < a->width ? x0 + 1 : x0,
        y1 = y0 + 1 < a->height ? y0 + 1 : y0;
    return (alpha_at(a, x0, y0) + alpha_at(a, x1, y0) + alpha_at(a, x0, y1) + alpha_at(a, x1, y1)) /
           4;
}

static double dither(int on, int x, int y)
{
    static const int bayer[4][4] = {{0, 8, 2, 10}, {12, 4, 14, 6}, {3, 11, 1, 9}, {15, 7, 13, 5}};
    return on ? (bayer[y & 3][x & 3] + 0.5) / 16 : 0.5;
}

static int quant(double v, double d, int maxc)
{
    double r = floor(v + d);
    return r < 0 ? 0 : r > maxc ? maxc : (int)r;
}

/* Component c's plane geometry (level 1: 4:2:0 chroma). */
static void plane_of(const keyer_frame *f, int c, int *level, int *w, int *h)
{
    *level = kt_is_yuv(f->format) && c > 0;
    *w = *level ? (f->width + 1) / 2 : f->width;
    *h = *level ? (f->height + 1) / 2 : f->height;
}

/* Reference of the blur mode: returns the largest code difference against `out`. */
static int ref_blur_diff(const keyer_frame *f, const keyer_frame *a, double sigma, int dith,
                         const keyer_frame *out)
{
    int fct = 2;
    while (fct * 2 <= sigma)
        fct *= 2;
    int gw = (f->width + fct - 1) / fct, gh = (f->height + fct - 1) / fct;
    double sl = sigma / fct;
    int r = (int)ceil(3 * sl);
    if (r > 13)
        r = 13;
    double *k = malloc(sizeof(double) * (2 * r + 1)), ks = 0;
    for (int i = -r; i <= r; i++)
        ks += k[i + r] = exp(-(double)i * i / (2 * sl * sl));
    for (int i = 0; i <= 2 * r; i++)
        k[i] /= ks;
    size_t cells = (size_t)gw * gh;
    double *g[5], *t = malloc(sizeof(double) * cells);
    for (int c = 0; c < 5; c++)
        g[c] = calloc(cells, sizeof(double));
    for (int c = 0; c < 3; c++) {
        int lv, pw, ph;
        plane_of(f, c, &lv, &pw, &ph);
        int fl = fct >> lv;
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                double num = 0, den = 0;
                for (int y = gy * fl; y < gy * fl + fl && y < ph; y++)
                    for (int x = gx * fl; x < gx * fl + fl && x < pw; x++) {
                        double w = 1 - alpha_level(a, lv, x, y) + 1.0 / 1024;
                        num += w * kt_code(f, c, x, y);
                        den += w;
                    }
                g[c][gy * gw + gx] = num;
                g[3 + lv][gy * gw + gx] = den;
            }
    }
    for (int c = 0; c < 5; c++) {
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                double s = 0;
                for (int i = -r; i <= r; i++) {
                    int xx = gx + i < 0 ? 0 : gx + i >= gw ? gw - 1 : gx + i;
                    s += k[i + r] * g[c][gy * gw + xx];
                }
                t[gy * gw + gx] = s;
            }
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                double s = 0;
                for (int i = -r; i <= r; i++) {
                    int yy = gy + i < 0 ? 0 : gy + i >= gh ? gh - 1 : gy + i;
                    s += k[i + r] * t[yy * gw + gx];
                }
                g[c][gy * gw + gx] = s;
            }
    }
    int worst = 0, maxc = f->format == KEYER_PIXEL_FORMAT_P010 ? 1023 : 255;
    for (int c = 0; c < 3; c++) {
        int lv, pw, ph;
        plane_of(f, c, &lv, &pw, &ph);
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw; x++) {
                double sc = (double)(1 << lv) / fct;
                double gxf = (x + 0.5) * sc - 0.5, gyf = (y + 0.5) * sc - 0.5;
                gxf = gxf < 0 ? 0 : gxf > gw - 1 ? gw - 1 : gxf;
                gyf = gyf < 0 ? 0 : gyf > gh - 1 ? gh - 1 : gyf;
                int x0 = (int)gxf, y0 = (int)gyf, x1 = x0 + (x0 < gw - 1), y1 = y0 + (y0 < gh - 1);
                double fx = gxf - x0, fy = gyf - y0;
#define B(xx, yy) (g[c][(yy) * gw + (xx)] / g[3 + lv][(yy) * gw + (xx)])
                double bg = (1 - fy) * ((1 - fx) * B(x0, y0) + fx * B(x1, y0)) +
                            fy * ((1 - fx) * B(x0, y1) + fx * B(x1, y1));
#undef B
                double al = alpha_level(a, lv, x, y);
                double v = bg + al * (kt_code(f, c, x, y) - bg);
                int want = quant(v, dither(dith, x, y), maxc);
                int d = abs(want - (int)kt_code(out, c, x, y));
                worst = d > worst ? d : worst;
            }
    }
    for (int c = 0; c < 5; c++)
        free(g[c]);
    free(t);
    free(k);
    return worst;
}

static void test_blur_matches_reference(void **state)
{
    (void)state;
    const float sigmas[] = {3.0f, 12.0f, 40.0f};
    for (size_t fi = 0; fi < NFORMATS; fi++)
        for (int si = 0; si < 3; si++) {
            int W = 173 + (int)fi * 20, H = 97 + si * 13;
            keyer_frame *f = kt_frame_padded(formats[fi], W, H, 6);
            keyer_frame *o = kt_frame_padded(formats[fi], W, H, 2);
            kt_fill_random(f, 7 + (uint32_t)fi, 1);
            f->range = KEYER_COLOR_RANGE_FULL;
            keyer_frame *a = disc_alpha(W, H, si == 1, W * 0.4, H * 0.5, H * 0.3);
            char opts[64];
            snprintf(opts, sizeof(opts), "blur_radius=%g,dither=%d", (double)sigmas[si], si != 2);
            keyer_composite *c = make_comp(opts);
            keyer_error err = {0};
            if (keyer_composite_run(c, f, a, o, &err))
                fail_msg("%s", err.message);
            int d = ref_blur_diff(f, a, sigmas[si], si != 2, o);
            if (d > 1)
                print_message("%s sigma %g: worst %d\n", keyer_pixel_format_name(formats[fi]),
                              (double)sigmas[si], d);
            assert_true(d <= 1);
            assert_int_equal(o->range, KEYER_COLOR_RANGE_FULL);
            keyer_composite_destroy(&c);
            keyer_frame_destroy(&f);
            keyer_frame_destroy(&o);
            keyer_frame_destroy(&a);
        }
}

/* Person red, background blue, split at x = W/2: the blurred background next to the person
 * stays blue (an unweighted blur would be half red there). */
static void test_blur_does_not_bleed(void **state)
{
    (void)state;
    int W = 200, H = 80;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 0);
    keyer_frame *o = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = f->data[0] + y * f->stride[0] + 3 * x;
            int person = x < W / 2;
            p[0] = person ? 240 : 10;
            p[1] = 20;
            p[2] = person ? 10 : 230;
            a->data[0][y * a->stride[0] + x] = person ? 255 : 0;
        }
    keyer_composite *c = make_comp("blur_radius=24");
    assert_int_equal(keyer_composite_run(c, f, a, o, NULL), KEYER_OK);
    for (int y = 0; y < H; y++) {
        const uint8_t *p = o->data[0] + y * o->stride[0] + 3 * (W / 2 + 1);
        assert_true(p[0] <= 14 && p[2] >= 226); /* background just right of the edge */
        const uint8_t *q = o->data[0] + y * o->stride[0] + 3 * (W / 2 - 2);
        assert_int_equal(q[0], 240); /* the person is untouched */
    }
    keyer_composite_destroy(&c);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&a);
    keyer_frame_destroy(&o);
}

/* Colour and green screen: alpha 1 keeps the frame, alpha 0 gives the colour's codes. */
static void test_colour_and_green(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < NFORMATS; fi++)
        for (int green = 0; green < 2; green++) {
            int W = 33, H = 19;
            keyer_frame *f = kt_frame_padded(formats[fi], W, H, 4);
            keyer_frame *o = kt_frame_padded(formats[fi], W, H, 4);
            keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 0);
            kt_fill_random(f, 3, 0);
            f->matrix = KEYER_COLOR_MATRIX_BT2020;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    a->data[0][y * a->stride[0] + x] = x < 16 ? 255 : 0;
            keyer_composite *c = make_comp(green ? "mode=green,dither=0" : "mode=color,color=#4080c0,dither=0");
            assert_int_equal(keyer_composite_run(c, f, a, o, NULL), KEYER_OK);
            uint32_t rgb = green ? 0x00B140 : 0x4080C0;
            double col[3] = {(rgb >> 16) / 255.0, (rgb >> 8 & 255) / 255.0, (rgb & 255) / 255.0};
            /* expected codes of the colour, from the reference decoder run backwards:
             * check by decoding the output's background pixels */
            for (int c2 = 0; c2 < 3; c2++) {
                int lv, pw, ph;
                plane_of(f, c2, &lv, &pw, &ph);
                for (int y = 0; y < ph; y++)
                    for (int x = 0; x < pw; x++)
                        if ((lv ? 2 * x + 1 : x) < 16)
                            assert_int_equal(kt_code(o, c2, x, y), kt_code(f, c2, x, y));
            }
            for (int y = 0; y < H; y += 2) {
                double codes[3], back[3];
                kt_sample(o, W - 2, y, codes);
                kt_rgb(o, codes, back);
                double tol = kt_is_yuv(f->format) ? (f->format == KEYER_PIXEL_FORMAT_P010 ? 1.0 : 2.5) / 255
                                                  : 0.5 / 255;
                for (int i = 0; i < 3; i++)
                    assert_true(fabs(back[i] - col[i]) <= tol);
            }
            keyer_composite_destroy(&c);
            keyer_frame_destroy(&f);
            keyer_frame_destroy(&o);
            keyer_frame_destroy(&a);
        }
}

/* Image replacement: a background of another format and size is scaled to cover; a
 * background of the frame's own format and size is used as it is. */
static void test_image_replacement(void **state)
{
    (void)state;
    int W = 64, H = 36;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, W, H, 2);
    keyer_frame *o = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, W, H, 2);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 0);
    kt_fill_random(f, 4, 1);
    /* RGB background 100x100: left 50 columns yellow, right 50 magenta; covering a 16:9 frame
     * keeps its full width and crops rows, so the frame's left half is yellow. */
    keyer_frame *bg = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, 100, 100, 1);
    for (int y = 0; y < 100; y++)
        for (int x = 0; x < 100; x++) {
            uint8_t *p = bg->data[0] + y * bg->stride[0] + 3 * x;
            p[0] = 250;
            p[1] = x < 50 ? 250 : 10;
            p[2] = x < 50 ? 10 : 250;
        }
    keyer_composite *c = make_comp("mode=image,dither=0");
    keyer_error err = {0};
    assert_int_equal(keyer_composite_run(c, f, a, o, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "background"));
    assert_int_equal(keyer_composite_set_background(c, bg, &err), KEYER_OK);
    keyer_frame_destroy(&bg); /* the compositor keeps its own reference */
    assert_int_equal(keyer_composite_run(c, f, a, o, &err), KEYER_OK);
    double codes[3], rgb[3];
    kt_sample(o, 5, 18, codes);
    kt_rgb(o, codes, rgb);
    assert_true(rgb[0] > 0.95 && rgb[1] > 0.95 && rgb[2] < 0.1);
    kt_sample(o, 58, 18, codes);
    kt_rgb(o, codes, rgb);
    assert_true(rgb[0] > 0.95 && rgb[1] < 0.1 && rgb[2] > 0.95);
    /* same format and size: used directly */
    keyer_frame *bg2 = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, W, H, 6);
    kt_fill_random(bg2, 5, 0);
    assert_int_equal(keyer_composite_set_background(c, bg2, &err), KEYER_OK);
    assert_int_equal(keyer_composite_run(c, f, a, o, &err), KEYER_OK);
    for (int y = 0; y < H; y++)
        assert_memory_equal(o->data[0] + y * o->stride[0], bg2->data[0] + y * bg2->stride[0], W);
    /* and with a new frame of it (another video) the result follows */
    kt_fill_random(bg2, 6, 0);
    assert_int_equal(keyer_composite_set_background(c, bg2, &err), KEYER_OK);
    assert_int_equal(keyer_composite_run(c, f, a, o, &err), KEYER_OK);
    assert_memory_equal(o->data[1], bg2->data[1], W);
    assert_int_equal(keyer_composite_set_background(c, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_composite_run(c, f, a, o, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_composite_destroy(&c);
    keyer_frame_destroy(&bg2);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&o);
    keyer_frame_destroy(&a);
}

/* RGBA outputs: per-pixel conversion (chroma interpolated), straight or premultiplied. */
static void test_alpha_outputs(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < NFORMATS; fi++)
        for (int pre = 0; pre < 2; pre++) {
            int W = 45, H = 27;
            keyer_frame *f = kt_frame_padded(formats[fi], W, H, 2);
            keyer_frame *o = kt_frame_padded(KEYER_PIXEL_FORMAT_RGBA, W, H, 4);
            keyer_frame *a = disc_alpha(W, H, (int)fi & 1, 20, 13, 8);
            kt_fill_random(f, 8, 1);
            keyer_composite *c = make_comp(pre ? "mode=premultiplied" : "mode=alpha");
            assert_int_equal(keyer_composite_run(c, f, a, o, NULL), KEYER_OK);
            int worst = 0;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    double codes[3], rgb[3], al = alpha_at(a, x, y);
                    kt_sample(f, x, y, codes);
                    kt_rgb(f, codes, rgb);
                    const uint8_t *p = o->data[0] + y * o->stride[0] + 4 * x;
                    for (int i = 0; i < 3; i++) {
                        int want = quant((pre ? rgb[i] * al : rgb[i]) * 255, dither(1, x, y), 255);
                        int d = abs(want - p[i]);
                        worst = d > worst ? d : worst;
                    }
                    assert_int_equal(p[3], quant(al * 255, 0.5, 255));
                }
            assert_true(worst <= 1);
            keyer_composite_destroy(&c);
            keyer_frame_destroy(&f);
            keyer_frame_destroy(&o);
            keyer_frame_destroy(&a);
        }
}

/* Mask outputs: GRAY8, GRAYF32, and a grey picture in the frame's format. */
static void test_mask_outputs(void **state)
{
    (void)state;
    int W = 31, H = 17;
    keyer_frame *a = disc_alpha(W, H, 1, 15, 8, 6);
    keyer_frame *g8 = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 3);
    keyer_frame *gf = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 4);
    keyer_composite *c = make_comp("mode=mask");
    for (size_t fi = 0; fi < NFORMATS; fi++) {
        keyer_frame *f = kt_frame_padded(formats[fi], W, H, 2);
        keyer_frame *o = kt_frame_padded(formats[fi], W, H, 2);
        assert_int_equal(keyer_composite_run(c, f, a, g8, NULL), KEYER_OK);
        assert_int_equal(keyer_composite_run(c, f, a, gf, NULL), KEYER_OK);
        assert_int_equal(keyer_composite_run(c, f, a, o, NULL), KEYER_OK);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double al = alpha_at(a, x, y);
                assert_int_equal(g8->data[0][y * g8->stride[0] + x], (int)floor(al * 255 + 0.5));
                assert_float_equal(((float *)(void *)(gf->data[0] + y * gf->stride[0]))[x], al, 0);
                double codes[3], rgb[3];
                codes[0] = kt_code(o, 0, x, y);
                codes[1] = kt_is_yuv(o->format) ? kt_code(o, 1, x / 2, y / 2) : kt_code(o, 1, x, y);
                codes[2] = kt_is_yuv(o->format) ? kt_code(o, 2, x / 2, y / 2) : kt_code(o, 2, x, y);
                kt_rgb(o, codes, rgb);
                assert_true(fabs(rgb[0] - al) <= 1.0 / 219 + 1e-9);
                if (kt_is_yuv(o->format)) /* grey: chroma at its zero */
                    assert_int_equal(codes[1], o->format == KEYER_PIXEL_FORMAT_P010 ? 512 : 128);
                if (o->format == KEYER_PIXEL_FORMAT_RGBA)
                    assert_int_equal(o->data[0][y * o->stride[0] + 4 * x + 3], 255);
            }
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&o);
    }
    keyer_composite_destroy(&c);
    keyer_frame_destroy(&a);
    keyer_frame_destroy(&g8);
    keyer_frame_destroy(&gf);
}

/* 10-bit frames keep 10 bits; a blurred smooth gradient is neither banded nor shifted. */
static void test_precision_no_banding(void **state)
{
    (void)state;
    int W = 512, H = 64;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_P010, W, H, 0);
    keyer_frame *o = kt_frame_padded(KEYER_PIXEL_FORMAT_P010, W, H, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 0);
    for (int y = 0; y < H; y++) {
        uint16_t *yr = (uint16_t *)(void *)(f->data[0] + y * f->stride[0]);
        for (int x = 0; x < W; x++) {
            yr[x] = (uint16_t)((200 + x) << 6); /* a ramp of one code per pixel */
            ((float *)(void *)(a->data[0] + y * a->stride[0]))[x] = 0.0f;
        }
        if (y < H / 2) {
            uint16_t *cr = (uint16_t *)(void *)(f->data[1] + y * f->stride[1]);
            for (int x = 0; x < W; x++)
                cr[x] = 512 << 6;
        }
    }
    keyer_composite *c = make_comp("blur_radius=8");
    assert_int_equal(keyer_composite_run(c, f, a, o, NULL), KEYER_OK);
    int odd = 0, worst = 0;
    for (int y = 0; y < H; y++) {
        const uint16_t *r = (const uint16_t *)(const void *)(o->data[0] + y * o->stride[0]);
        for (int x = 40; x < W - 40; x++) {
            int v = r[x] >> 6;
            odd += v & 3;
            int d = abs(v - (200 + x));
            worst = d > worst ? d : worst;
        }
    }
    assert_true(worst <= 1);          /* the blur of a linear ramp is the ramp */
    assert_true(odd > (W - 80) * H);  /* all four low-bit values occur: 10 bits, not 8 */
    /* blending 10-bit samples at alpha 0.5 over a colour keeps 10-bit steps too */
    keyer_composite_destroy(&c);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&o);
    keyer_frame_destroy(&a);
}

/* In place gives the same result as out of place; RGBA frames keep their alpha. */
static void test_in_place_and_rgba_alpha(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < NFORMATS; fi++) {
        int W = 77, H = 41;
        keyer_frame *f = kt_frame_padded(formats[fi], W, H, 2);
        keyer_frame *g = kt_frame_padded(formats[fi], W, H, 2);
        keyer_frame *o = kt_frame_padded(formats[fi], W, H, 6);
        keyer_frame *a = disc_alpha(W, H, 0, 30, 20, 12);
        kt_fill_random(f, 12, 1);
        assert_int_equal(keyer_frame_copy(g, f, NULL), KEYER_OK);
        keyer_composite *c = make_comp("blur_radius=6");
        assert_int_equal(keyer_composite_run(c, f, a, o, NULL), KEYER_OK);
        assert_int_equal(keyer_composite_run(c, g, a, g, NULL), KEYER_OK);
        for (int p = 0; p < keyer_pixel_format_planes(f->format); p++) {
            int pw, ph, bpe;
            keyer_pixel_format_plane(f->format, W, H, p, &pw, &ph, &bpe, NULL);
            for (int y = 0; y < ph; y++)
                assert_memory_equal(o->data[p] + y * o->stride[p], g->data[p] + y * g->stride[p],
                                    (size_t)pw * bpe);
        }
        if (f->format == KEYER_PIXEL_FORMAT_RGBA)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    assert_int_equal(o->data[0][y * o->stride[0] + 4 * x + 3],
                                     f->data[0][y * f->stride[0] + 4 * x + 3]);
        keyer_composite_destroy(&c);
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&g);
        keyer_frame_destroy(&o);
        keyer_frame_destroy(&a);
    }
}

/* Results do not depend on the number of threads (each task has its own scratch). */
static void test_threads_do_not_change_results(void **state)
{
    (void)state;
    const char *modes[] = {"mode=blur", "mode=color", "mode=image", "mode=alpha", "mode=mask"};
    for (size_t fi = 0; fi < NFORMATS; fi++)
        for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
            int W = 641, H = 363;
            keyer_frame *f = kt_frame_padded(formats[fi], W, H, 2);
            keyer_frame *a = disc_alpha(W, H, 0, 300, 180, 120);
            keyer_frame *bg = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, 300, 200, 0);
            kt_fill_random(f, 21, 1);
            kt_fill_random(bg, 22, 1);
            keyer_pixel_format of = m == 3 ? KEYER_PIXEL_FORMAT_RGBA : formats[fi];
            keyer_frame *o[2] = {kt_frame_padded(of, W, H, 0), kt_frame_padded(of, W, H, 0)};
            for (int k = 0; k < 2; k++) {
                keyer_composite_params p = keyer_composite_params_defaults();
                assert_int_equal(keyer_options_parse(keyer_composite_options(), &p, modes[m], NULL),
                                 KEYER_OK);
                p.threads = k ? 7 : 1;
                keyer_composite *c = NULL;
                assert_int_equal(keyer_composite_create(&p, &c, NULL), KEYER_OK);
                assert_int_equal(keyer_composite_set_background(c, bg, NULL), KEYER_OK);
                for (int rep = 0; rep < 3; rep++)
                    assert_int_equal(keyer_composite_run(c, f, a, o[k], NULL), KEYER_OK);
                keyer_composite_destroy(&c);
            }
            for (int p = 0; p < keyer_pixel_format_planes(of); p++) {
                int pw, ph, bpe;
                keyer_pixel_format_plane(of, W, H, p, &pw, &ph, &bpe, NULL);
                for (int y = 0; y < ph; y++)
                    assert_memory_equal(o[0]->data[p] + y * o[0]->stride[p],
                                        o[1]->data[p] + y * o[1]->stride[p], (size_t)pw * bpe);
            }
            keyer_frame_destroy(&f);
            keyer_frame_destroy(&a);
            keyer_frame_destroy(&bg);
            keyer_frame_destroy(&o[0]);
            keyer_frame_destroy(&o[1]);
        }
}

static void test_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_composite_params p = keyer_composite_params_defaults();
    keyer_composite *c = NULL;
    p.blur_radius = 1.0f;
    assert_int_equal(keyer_composite_create(&p, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "blur_radius"));
    p = keyer_composite_params_defaults();
    p.mode = 42;
    assert_int_equal(keyer_composite_create(&p, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_composite_create(NULL, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    c = make_comp("mode=blur");
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 32, 32, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 32, 32, 0);
    keyer_frame *a2 = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 32, 30, 0);
    keyer_frame *rgba = kt_frame_padded(KEYER_PIXEL_FORMAT_RGBA, 32, 32, 0);
    keyer_frame *grey = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 32, 32, 0);
    assert_int_equal(keyer_composite_run(c, f, a2, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "same size"));
    assert_int_equal(keyer_composite_run(c, f, a, rgba, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "mode blur needs nv12"));
    assert_int_equal(keyer_composite_run(c, f, f, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "alpha is nv12"));
    assert_int_equal(keyer_composite_run(c, grey, a, grey, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "gray8"));
    assert_int_equal(keyer_composite_run(c, NULL, a, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_composite_run(NULL, f, a, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_composite_set_background(c, grey, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_composite_set_background(NULL, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame dev = *a;
    dev.memory = KEYER_MEMORY_CUDA;
    dev.buf[0] = NULL;
    assert_int_equal(keyer_composite_run(c, f, &dev, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_composite_destroy(&c);
    c = make_comp("mode=alpha");
    assert_int_equal(keyer_composite_run(c, f, a, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "rgba"));
    assert_int_equal(keyer_composite_run(c, f, a, rgba, &err), KEYER_OK);
    keyer_composite_destroy(&c);
    keyer_composite_destroy(&c);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&a);
    keyer_frame_destroy(&a2);
    keyer_frame_destroy(&rgba);
    keyer_frame_destroy(&grey);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blur_matches_reference),
        cmocka_unit_test(test_blur_does_not_bleed),
        cmocka_unit_test(test_colour_and_green),
        cmocka_unit_test(test_image_replacement),
        cmocka_unit_test(test_alpha_outputs),
        cmocka_unit_test(test_mask_outputs),
        cmocka_unit_test(test_precision_no_banding),
        cmocka_unit_test(test_in_place_and_rgba_alpha),
        cmocka_unit_test(test_threads_do_not_change_results),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
