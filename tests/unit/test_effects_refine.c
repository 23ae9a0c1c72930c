/* Mask refinement: bilinear and guided upsampling against double-precision references,
 * soft threshold, exact dilate/erode and feather, mask regions, temporal smoothing on a
 * static noisy clip and a moving edge, streams and resets, and errors. */
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

/* A GRAYF32 mask frame wrapping caller memory (no buffer reference). */
static keyer_frame mask_frame(float *data, int w, int h)
{
    keyer_frame m;
    memset(&m, 0, sizeof(m));
    m.format = KEYER_PIXEL_FORMAT_GRAYF32;
    m.width = w;
    m.height = h;
    m.data[0] = (uint8_t *)data;
    m.stride[0] = (ptrdiff_t)w * 4;
    return m;
}

/* A smooth blob mask with a soft edge and some values outside [0,1] and a NaN. */
static float *blob_mask(int w, int h, double cx, double cy, double r)
{
    float *m = malloc(sizeof(float) * (size_t)w * h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double d = hypot(x + 0.5 - cx, (y + 0.5 - cy) * 1.3) - r;
            m[y * w + x] = (float)(1.0 / (1.0 + exp(d / 1.5)));
        }
    m[0] = -0.5f;
    m[1] = 1.5f;
    m[2] = NAN;
    return m;
}

static keyer_refine *make_refine(const char *opts)
{
    keyer_refine_params p = keyer_refine_params_defaults();
    p.threads = 2;
    keyer_error err = {0};
    if (keyer_options_parse(keyer_refine_options(), &p, opts, &err))
        fail_msg("%s", err.message);
    keyer_refine *r = NULL;
    if (keyer_refine_create(&p, &r, &err))
        fail_msg("%s", err.message);
    return r;
}

static double mask_val(float v) { return v == v ? (v < 0 ? 0 : v > 1 ? 1 : v) : 0; }

/* Reference: bilinear (half-pixel centres, clamped) of a grid at frame pixel (x, y). */
static double ref_bilinear_d(const double *g, int mw, int mh, int W, int H, int x, int y)
{
    double gx = (x + 0.5) * mw / W - 0.5, gy = (y + 0.5) * mh / H - 0.5;
    gx = gx < 0 ? 0 : gx > mw - 1 ? mw - 1 : gx;
    gy = gy < 0 ? 0 : gy > mh - 1 ? mh - 1 : gy;
    int x0 = (int)gx, y0 = (int)gy, x1 = x0 + (x0 < mw - 1), y1 = y0 + (y0 < mh - 1);
    double fx = gx - x0, fy = gy - y0;
    return (1 - fy) * ((1 - fx) * g[y0 * mw + x0] + fx * g[y0 * mw + x1]) +
           fy * ((1 - fx) * g[y1 * mw + x0] + fx * g[y1 * mw + x1]);
}

static double *mask_to_double(const float *m, int n)
{
    double *g = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++)
        g[i] = mask_val(m[i]);
    return g;
}

static void test_bilinear_matches_reference(void **state)
{
    (void)state;
    const keyer_pixel_format fm[] = {KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_RGB24,
                                     KEYER_PIXEL_FORMAT_P010};
    for (int i = 0; i < 3; i++) {
        int W = 203 + i * 50, H = 117 + i * 31, mw = 64, mh = 48;
        keyer_frame *f = kt_frame_padded(fm[i], W, H, 6);
        keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 3);
        kt_fill_random(f, 3, 1);
        float *m = blob_mask(mw, mh, 30, 20, 12);
        keyer_frame mf = mask_frame(m, mw, mh);
        keyer_refine *r = make_refine("upsample=bilinear,threshold=0,feather=0,temporal=off");
        keyer_error err = {0};
        if (keyer_refine_run(r, 0, f, &mf, NULL, a, &err))
            fail_msg("%s", err.message);
        int worst = 0;
        double *g = mask_to_double(m, mw * mh);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int want = (int)lround(ref_bilinear_d(g, mw, mh, W, H, x, y) * 255);
                int d = abs(a->data[0][y * a->stride[0] + x] - want);
                worst = d > worst ? d : worst;
            }
        free(g);
        assert_true(worst <= 1);
        keyer_refine_destroy(&r);
        free(m);
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&a);
    }
}

/* Reference fast guided filter in double, from its definition. */
static void ref_guided(const keyer_frame *f, const float *m, int mw, int mh, int r, double eps,
                       double *out /* W x H */)
{
    int W = f->width, H = f->height, n = mw * mh;
    double *I = calloc((size_t)n, sizeof(double)), *P = calloc((size_t)n, sizeof(double));
    double *mean[4], *ab[2];
    for (int k = 0; k < 4; k++)
        mean[k] = calloc((size_t)n, sizeof(double));
    for (int k = 0; k < 2; k++)
        ab[k] = calloc((size_t)n, sizeof(double));
    double *ab_mean[2] = {calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double))};
    int yuv = kt_is_yuv(f->format);
    double maxc = f->format == KEYER_PIXEL_FORMAT_P010 ? 1023 : 255, kr, kb;
    kt_kr_kb(f, &kr, &kb);
    /* grid luma: area sampling like prepare (stretch, area on) */
    double ux = (double)W / mw, uy = (double)H / mh;
    int nx = ux > 2 ? (int)ceil(ux) : 1, ny = uy > 2 ? (int)ceil(uy) : 1;
    for (int gy = 0; gy < mh; gy++)
        for (int gx = 0; gx < mw; gx++) {
            double acc = 0;
            for (int j = 0; j < ny; j++)
                for (int i = 0; i < nx; i++) {
                    double fx = (gx + (i + 0.5) / nx) * ux - 0.5, fy = (gy + (j + 0.5) / ny) * uy - 0.5;
                    if (yuv)
                        acc += kt_bilinear(f, 0, fx, fy) / maxc;
                    else
                        acc += (kr * kt_bilinear(f, 0, fx, fy) + (1 - kr - kb) * kt_bilinear(f, 1, fx, fy) +
                                kb * kt_bilinear(f, 2, fx, fy)) / 255;
                }
            I[gy * mw + gx] = acc / (nx * ny);
            P[gy * mw + gx] = mask_val(m[gy * mw + gx]);
        }
    for (int y = 0; y < mh; y++)
        for (int x = 0; x < mw; x++) {
            double s[4] = {0, 0, 0, 0};
            int cnt = 0;
            for (int j = y - r; j <= y + r; j++)
                for (int i = x - r; i <= x + r; i++) {
                    if (i < 0 || j < 0 || i >= mw || j >= mh)
                        continue;
                    double iv = I[j * mw + i], pv = P[j * mw + i];
                    s[0] += iv;
                    s[1] += pv;
                    s[2] += iv * pv;
                    s[3] += iv * iv;
                    cnt++;
                }
            for (int k = 0; k < 4; k++)
                mean[k][y * mw + x] = s[k] / cnt;
            double var = mean[3][y * mw + x] - mean[0][y * mw + x] * mean[0][y * mw + x];
            double cov = mean[2][y * mw + x] - mean[0][y * mw + x] * mean[1][y * mw + x];
            if (var < 0)
                var = 0;
            ab[0][y * mw + x] = cov / (var + eps);
            ab[1][y * mw + x] = mean[1][y * mw + x] - ab[0][y * mw + x] * mean[0][y * mw + x];
        }
    for (int y = 0; y < mh; y++)
        for (int x = 0; x < mw; x++)
            for (int k = 0; k < 2; k++) {
                double s = 0;
                int cnt = 0;
                for (int j = y - r; j <= y + r; j++)
                    for (int i = x - r; i <= x + r; i++)
                        if (i >= 0 && j >= 0 && i < mw && j < mh) {
                            s += ab[k][j * mw + i];
                            cnt++;
                        }
                ab_mean[k][y * mw + x] = s / cnt;
            }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double a = ref_bilinear_d(ab_mean[0], mw, mh, W, H, x, y);
            double b = ref_bilinear_d(ab_mean[1], mw, mh, W, H, x, y);
            double lum = yuv ? kt_code(f, 0, x, y) / maxc
                             : (kr * kt_code(f, 0, x, y) + (1 - kr - kb) * kt_code(f, 1, x, y) +
                                kb * kt_code(f, 2, x, y)) / 255;
            double q = a * lum + b;
            out[y * W + x] = q < 0 ? 0 : q > 1 ? 1 : q;
        }
    free(I);
    free(P);
    for (int k = 0; k < 4; k++)
        free(mean[k]);
    for (int k = 0; k < 2; k++) {
        free(ab[k]);
        free(ab_mean[k]);
    }
}

static void test_guided_matches_reference(void **state)
{
    (void)state;
    const keyer_pixel_format fm[] = {KEYER_PIXEL_FORMAT_YUV420P, KEYER_PIXEL_FORMAT_RGBA,
                                     KEYER_PIXEL_FORMAT_P010};
    for (int i = 0; i < 3; i++) {
        int W = 301 - i * 40, H = 177 + i * 21, mw = 50, mh = 40;
        keyer_frame *f = kt_frame_padded(fm[i], W, H, 10);
        keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 8);
        kt_fill_random(f, 11 + (uint32_t)i, 1);
        float *m = blob_mask(mw, mh, 22, 21, 11);
        keyer_frame mf = mask_frame(m, mw, mh);
        keyer_refine *r = make_refine("upsample=guided,guided_radius=3,guided_eps=0.004,"
                                      "threshold=0,feather=0,temporal=off");
        keyer_error err = {0};
        if (keyer_refine_run(r, 0, f, &mf, NULL, a, &err))
            fail_msg("%s", err.message);
        double *want = malloc(sizeof(double) * (size_t)W * H), worst = 0;
        ref_guided(f, m, mw, mh, 3, 0.004, want);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double got = ((float *)(void *)(a->data[0] + y * a->stride[0]))[x];
                double d = fabs(got - want[y * W + x]);
                worst = d > worst ? d : worst;
            }
        print_message("guided %s: max diff %g\n", keyer_pixel_format_name(fm[i]), worst);
        assert_true(worst < 0.5 / 255);
        free(want);
        keyer_refine_destroy(&r);
        free(m);
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&a);
    }
}

/* Runs a refinement into a GRAYF32 matte and returns it as 16-bit codes. */
static uint16_t *run16(const char *opts, keyer_frame *f, keyer_frame *mf)
{
    int W = f->width, H = f->height;
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 4);
    keyer_refine *r = make_refine(opts);
    keyer_error err = {0};
    if (keyer_refine_run(r, 0, f, mf, NULL, a, &err))
        fail_msg("%s", err.message);
    uint16_t *c = malloc(sizeof(uint16_t) * (size_t)W * H);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            c[y * W + x] = (uint16_t)(((float *)(void *)(a->data[0] + y * a->stride[0]))[x] *
                                      65535.0f + 0.5f);
    keyer_refine_destroy(&r);
    keyer_frame_destroy(&a);
    return c;
}

/* Dilate/erode are exact running max/min over a square; feather is two exact box blurs. */
static void test_dilate_erode_feather_exact(void **state)
{
    (void)state;
    int W = 157, H = 91, mw = 40, mh = 30;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, W, H, 2);
    kt_fill_random(f, 9, 0);
    float *m = blob_mask(mw, mh, 20, 15, 8);
    keyer_frame mf = mask_frame(m, mw, mh);
    uint16_t *base = run16("feather=0,temporal=off", f, &mf);
    for (int d = -5; d <= 6; d += 11) {
        char opts[96];
        snprintf(opts, sizeof(opts), "feather=0,temporal=off,dilate=%d", d);
        uint16_t *got = run16(opts, f, &mf);
        int r = abs(d);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int e = d > 0 ? 0 : 65535;
                for (int j = y - r; j <= y + r; j++)
                    for (int i = x - r; i <= x + r; i++) {
                        if (i < 0 || j < 0 || i >= W || j >= H)
                            continue;
                        int v = base[j * W + i];
                        e = d > 0 ? (v > e ? v : e) : (v < e ? v : e);
                    }
                if (got[y * W + x] != e)
                    fail_msg("dilate %d at %d,%d: %d, want %d", d, x, y, got[y * W + x], e);
            }
        free(got);
    }
    /* feather 4: box of 9 twice (a tent), edges replicated, rounded once per direction */
    uint16_t *got = run16("feather=4,temporal=off", f, &mf);
    double *t = malloc(sizeof(double) * (size_t)W * H), *u = malloc(sizeof(double) * (size_t)W * H);
    double *b1 = malloc(sizeof(double) * (size_t)(W > H ? W : H));
    for (int i = 0; i < W * H; i++)
        u[i] = base[i];
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            double s = 0;
            for (int i = x - 4; i <= x + 4; i++)
                s += u[y * W + (i < 0 ? 0 : i >= W ? W - 1 : i)];
            b1[x] = s;
        }
        for (int x = 0; x < W; x++) {
            double s = 0;
            for (int i = x - 4; i <= x + 4; i++)
                s += b1[i < 0 ? 0 : i >= W ? W - 1 : i];
            t[y * W + x] = floor(s / 81 + 0.5);
        }
    }
    for (int x = 0; x < W; x++) {
        for (int y = 0; y < H; y++) {
            double s = 0;
            for (int j = y - 4; j <= y + 4; j++)
                s += t[(j < 0 ? 0 : j >= H ? H - 1 : j) * W + x];
            b1[y] = s;
        }
        for (int y = 0; y < H; y++) {
            double s = 0;
            for (int j = y - 4; j <= y + 4; j++)
                s += b1[j < 0 ? 0 : j >= H ? H - 1 : j];
            u[y * W + x] = floor(s / 81 + 0.5);
        }
    }
    free(b1);
    int worst = 0;
    for (int i = 0; i < W * H; i++) {
        int d = abs((int)got[i] - (int)u[i]);
        worst = d > worst ? d : worst;
    }
    assert_true(worst <= 1);
    free(t);
    free(u);
    free(got);
    free(base);
    free(m);
    keyer_frame_destroy(&f);
}

/* The soft threshold: smoothstep between the two levels, on a mask ramp. */
static void test_threshold(void **state)
{
    (void)state;
    int W = 100, H = 4;
    float m[100 * 4];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            m[y * W + x] = (x + 0.5f) / W;
    keyer_frame mf = mask_frame(m, W, H);
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 0);
    keyer_refine *r = make_refine("upsample=bilinear,threshold_low=0.3,threshold_high=0.6,"
                                  "feather=0,temporal=off");
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, NULL, a, NULL), KEYER_OK);
    for (int x = 0; x < W; x++) {
        double v = (x + 0.5) / W, t = (v - 0.3) / 0.3;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        assert_float_equal(((float *)(void *)a->data[0])[x], t * t * (3 - 2 * t), 1e-5);
    }
    keyer_refine_destroy(&r);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&a);
}

/* A mask region (letterboxed model output): only the region covers the frame. */
static void test_mask_region(void **state)
{
    (void)state;
    int W = 160, H = 90, mw = 64, mh = 64;
    float *m = malloc(sizeof(float) * mw * mh);
    /* rows 14..49 hold the frame (64 * 90/160 = 36 rows); left half 1, right half 0; bars 0.5 */
    for (int y = 0; y < mh; y++)
        for (int x = 0; x < mw; x++)
            m[y * mw + x] = (y < 14 || y >= 50) ? 0.5f : (x < 32 ? 1.0f : 0.0f);
    keyer_frame mf = mask_frame(m, mw, mh);
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, W, H, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 0);
    keyer_refine *r = make_refine("upsample=bilinear,threshold=0,feather=0,temporal=off");
    keyer_rectf region = {0, 14, 64, 36};
    keyer_error err = {0};
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, &region, a, &err), KEYER_OK);
    for (int y = 0; y < H; y++) {
        assert_int_equal(a->data[0][y * a->stride[0] + 10], 255);
        assert_int_equal(a->data[0][y * a->stride[0] + 150], 0);
    }
    keyer_rectf outside = {0, 40, 64, 36};
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, &outside, a, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "mask region"));
    keyer_refine_destroy(&r);
    free(m);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&a);
}

/* ---- temporal smoothing ------------------------------------------------------------- */

/* Mean |alpha_t - alpha_t-1| over the pixels where sel is set, for a clip of n frames:
 * frames[t], masks[t] -> alpha. Returns the mattes (n x W x H) for further checks. */
static float *run_clip(const char *opts, keyer_frame **frames, float **masks, int n, int mw,
                       int mh)
{
    int W = frames[0]->width, H = frames[0]->height;
    float *out = malloc(sizeof(float) * (size_t)n * W * H);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 0);
    keyer_refine *r = make_refine(opts);
    for (int t = 0; t < n; t++) {
        keyer_frame mf = mask_frame(masks[t], mw, mh);
        keyer_error err = {0};
        if (keyer_refine_run(r, 0, frames[t], &mf, NULL, a, &err))
            fail_msg("%s", err.message);
        for (int y = 0; y < H; y++)
            memcpy(out + ((size_t)t * H + y) * W, a->data[0] + y * a->stride[0],
                   sizeof(float) * W);
    }
    keyer_refine_destroy(&r);
    keyer_frame_destroy(&a);
    return out;
}

/* A frame showing a bright disc at (cx, cy) on a textured background. */
static void draw_scene(keyer_frame *f, double cx, double cy, double rad)
{
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++) {
            uint8_t *p = f->data[0] + y * f->stride[0] + 3 * x;
            int in = hypot(x - cx, y - cy) < rad;
            int bgv = 60 + (int)(30 * sin(x * 0.11) * cos(y * 0.07));
            p[0] = (uint8_t)(in ? 230 : bgv);
            p[1] = (uint8_t)(in ? 200 : bgv + 20);
            p[2] = (uint8_t)(in ? 180 : bgv + 10);
        }
}

static void draw_mask(float *m, int mw, int mh, double cx, double cy, double rad, kt_rng *noise,
                      double amp)
{
    for (int y = 0; y < mh; y++)
        for (int x = 0; x < mw; x++) {
            double d = hypot(x + 0.5 - cx, y + 0.5 - cy) - rad;
            double v = 1.0 / (1.0 + exp(d / 0.8));
            if (noise) /* model flicker: strongest where the model is unsure */
                v += amp * ((double)(kt_next(noise) % 2001) / 1000.0 - 1.0) * (0.3 + 4 * v * (1 - v));
            m[y * mw + x] = (float)v;
        }
}

static void test_temporal_static_flicker(void **state)
{
    (void)state;
    enum { N = 12, W = 240, H = 160, MW = 96, MH = 64 };
    keyer_frame *frames[N];
    float *masks[N];
    kt_rng rng = {1234};
    for (int t = 0; t < N; t++) {
        frames[t] = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
        draw_scene(frames[t], 120, 80, 40);
        masks[t] = malloc(sizeof(float) * MW * MH);
        draw_mask(masks[t], MW, MH, 48, 32, 16, &rng, 0.12);
    }
    const char *base = "feather=0,threshold=0,upsample=bilinear";
    char off[128], on[128], mp[128];
    snprintf(off, sizeof(off), "%s,temporal=off", base);
    snprintf(on, sizeof(on), "%s,temporal=adaptive", base);
    snprintf(mp, sizeof(mp), "%s,temporal=mediapipe,temporal_strength=0.9", base);
    float *a_off = run_clip(off, frames, masks, N, MW, MH);
    float *a_on = run_clip(on, frames, masks, N, MW, MH);
    float *a_mp = run_clip(mp, frames, masks, N, MW, MH);
    double c_off = 0, c_on = 0, c_mp = 0;
    for (int t = 2; t < N; t++)
        for (int i = 0; i < W * H; i++) {
            c_off += fabs(a_off[(size_t)t * W * H + i] - a_off[(size_t)(t - 1) * W * H + i]);
            c_on += fabs(a_on[(size_t)t * W * H + i] - a_on[(size_t)(t - 1) * W * H + i]);
            c_mp += fabs(a_mp[(size_t)t * W * H + i] - a_mp[(size_t)(t - 1) * W * H + i]);
        }
    print_message("static clip, mean |d alpha|/frame: off %.5f adaptive %.5f (%.0f%%) mediapipe "
                  "%.5f (%.0f%%)\n", c_off / ((N - 2.0) * W * H), c_on / ((N - 2.0) * W * H),
                  100 * c_on / c_off, c_mp / ((N - 2.0) * W * H), 100 * c_mp / c_off);
    assert_true(c_on <= 0.5 * c_off);
    assert_true(c_mp < c_off);
    free(a_off);
    free(a_on);
    free(a_mp);
    for (int t = 0; t < N; t++) {
        keyer_frame_destroy(&frames[t]);
        free(masks[t]);
    }
}

/* A disc moving 6 pixels per frame: the smoothed matte follows it within the frame (its edge
 * stays nearer this frame's unsmoothed matte than the previous frame's). */
static void test_temporal_follows_motion(void **state)
{
    (void)state;
    enum { N = 8, W = 240, H = 160, MW = 96, MH = 64 };
    keyer_frame *frames[N];
    float *masks[N];
    for (int t = 0; t < N; t++) {
        double cx = 70 + 6.0 * t;
        frames[t] = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
        draw_scene(frames[t], cx, 80, 40);
        masks[t] = malloc(sizeof(float) * MW * MH);
        draw_mask(masks[t], MW, MH, cx * MW / W, 32, 16, NULL, 0);
    }
    const char *opts_off = "feather=0,threshold=0,upsample=bilinear,temporal=off";
    const char *opts_on = "feather=0,threshold=0,upsample=bilinear,temporal=adaptive";
    float *u = run_clip(opts_off, frames, masks, N, MW, MH);
    float *s = run_clip(opts_on, frames, masks, N, MW, MH);
    for (int t = 1; t < N; t++) {
        double lag = 0, step = 0;
        for (int i = 0; i < W * H; i++) {
            lag += fabs(s[(size_t)t * W * H + i] - u[(size_t)t * W * H + i]);
            step += fabs(u[(size_t)t * W * H + i] - u[(size_t)(t - 1) * W * H + i]);
        }
        print_message("t=%d lag %.1f step %.1f\n", t, lag, step);
        assert_true(lag < 0.25 * step);
    }
    free(u);
    free(s);
    for (int t = 0; t < N; t++) {
        keyer_frame_destroy(&frames[t]);
        free(masks[t]);
    }
}

/* Streams keep separate histories; a scene cut or a reset forgets the history. */
static void test_streams_and_reset(void **state)
{
    (void)state;
    enum { W = 64, H = 48, MW = 32, MH = 24 };
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
    keyer_frame *cut = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, W, H, 0);
    draw_scene(f, 32, 24, 10);
    for (int y = 0; y < H; y++)
        memset(cut->data[0] + y * cut->stride[0], 250, W * 3);
    float m0[MW * MH], m1[MW * MH];
    for (int i = 0; i < MW * MH; i++) {
        m0[i] = 0.2f;
        m1[i] = 0.6f;
    }
    keyer_frame k0 = mask_frame(m0, MW, MH), k1 = mask_frame(m1, MW, MH);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAYF32, W, H, 0);
    keyer_refine_params p = keyer_refine_params_defaults();
    p.max_streams = 2;
    p.upsample = KEYER_UPSAMPLE_BILINEAR;
    p.threshold = 0;
    p.feather = 0;
    p.mask_tolerance = 1.0f;
    keyer_refine *r = NULL;
    assert_int_equal(keyer_refine_create(&p, &r, NULL), KEYER_OK);
    float *av = (float *)(void *)a->data[0];
    /* stream 0 sees 0.2; stream 1 sees 0.6 first: histories do not mix */
    assert_int_equal(keyer_refine_run(r, 0, f, &k0, NULL, a, NULL), KEYER_OK);
    assert_float_equal(av[0], 0.2f, 1e-6);
    assert_int_equal(keyer_refine_run(r, 1, f, &k1, NULL, a, NULL), KEYER_OK);
    assert_float_equal(av[0], 0.6f, 1e-6);
    /* stream 0 now sees 0.6: smoothed towards 0.2 with weight 0.8 * (1 - 0.4) */
    assert_int_equal(keyer_refine_run(r, 0, f, &k1, NULL, a, NULL), KEYER_OK);
    float want = 0.6f + (0.2f - 0.6f) * 0.8f * 0.6f; /* mask_tolerance 1 */
    assert_float_equal(av[0], want, 1e-5);
    /* a scene cut resets */
    assert_int_equal(keyer_refine_run(r, 0, cut, &k0, NULL, a, NULL), KEYER_OK);
    assert_float_equal(av[0], 0.2f, 1e-6);
    /* a reset forgets */
    assert_int_equal(keyer_refine_reset(r, -1, NULL), KEYER_OK);
    assert_int_equal(keyer_refine_run(r, 0, cut, &k1, NULL, a, NULL), KEYER_OK);
    assert_float_equal(av[0], 0.6f, 1e-6);
    assert_int_equal(keyer_refine_reset(r, 2, NULL), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_refine_run(r, 2, f, &k0, NULL, a, NULL), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_refine_destroy(&r);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&cut);
    keyer_frame_destroy(&a);
}

/* Results do not depend on the number of threads. */
static void test_threads_do_not_change_results(void **state)
{
    (void)state;
    const char *variants[] = {"", "dilate=3,feather=2", "dilate=-4,feather=0", "feather=9"};
    int W = 777, H = 431, mw = 96, mh = 64;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, W, H, 2);
    kt_fill_random(f, 5, 1);
    float *m = blob_mask(mw, mh, 40, 30, 14);
    keyer_frame mf = mask_frame(m, mw, mh);
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
        keyer_frame *a[2];
        for (int k = 0; k < 2; k++) {
            keyer_refine_params p = keyer_refine_params_defaults();
            assert_int_equal(keyer_options_parse(keyer_refine_options(), &p, variants[v], NULL),
                             KEYER_OK);
            p.threads = k ? 7 : 1;
            keyer_refine *r = NULL;
            assert_int_equal(keyer_refine_create(&p, &r, NULL), KEYER_OK);
            a[k] = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, W, H, 1);
            for (int rep = 0; rep < 2; rep++)
                assert_int_equal(keyer_refine_run(r, 0, f, &mf, NULL, a[k], NULL), KEYER_OK);
            keyer_refine_destroy(&r);
        }
        for (int y = 0; y < H; y++)
            assert_memory_equal(a[0]->data[0] + y * a[0]->stride[0],
                                a[1]->data[0] + y * a[1]->stride[0], (size_t)W);
        keyer_frame_destroy(&a[0]);
        keyer_frame_destroy(&a[1]);
    }
    free(m);
    keyer_frame_destroy(&f);
}

static void test_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_refine_params p = keyer_refine_params_defaults();
    keyer_refine *r = NULL;
    p.threshold_low = 0.8f;
    p.threshold_high = 0.2f;
    assert_int_equal(keyer_refine_create(&p, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "threshold_low"));
    p = keyer_refine_params_defaults();
    p.feather = 100;
    assert_int_equal(keyer_refine_create(&p, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "feather"));
    assert_int_equal(keyer_refine_create(NULL, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_refine_params_defaults();
    assert_int_equal(keyer_refine_create(&p, &r, &err), KEYER_OK);
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 32, 32, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 32, 32, 0);
    keyer_frame *small = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 31, 32, 0);
    keyer_frame *rgb = kt_frame_padded(KEYER_PIXEL_FORMAT_RGB24, 32, 32, 0);
    float m[16 * 16] = {0};
    keyer_frame mf = mask_frame(m, 16, 16);
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, NULL, small, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "31x32"));
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, NULL, rgb, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "gray8 or grayf32"));
    assert_int_equal(keyer_refine_run(r, 0, f, a, NULL, a, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "mask is gray8"));
    assert_int_equal(keyer_refine_run(r, 0, a, &mf, NULL, a, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_refine_run(r, 0, NULL, &mf, NULL, a, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_refine_run(r, 0, f, NULL, NULL, a, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_refine_run(NULL, 0, f, &mf, NULL, a, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_rectf nan_region = {NAN, 0, 4, 4};
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, &nan_region, a, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame dev = mf;
    dev.memory = KEYER_MEMORY_CUDA;
    assert_int_equal(keyer_refine_run(r, 0, f, &dev, NULL, a, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "same memory"));
    assert_int_equal(keyer_refine_run(r, 0, f, &mf, NULL, a, &err), KEYER_OK);
    keyer_refine_destroy(&r);
    keyer_refine_destroy(&r);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&a);
    keyer_frame_destroy(&small);
    keyer_frame_destroy(&rgb);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    keyer_frame *f = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 64, 40, 0);
    keyer_frame *a = kt_frame_padded(KEYER_PIXEL_FORMAT_GRAY8, 64, 40, 0);
    float m[32 * 20] = {0};
    keyer_frame mf = mask_frame(m, 32, 20);
    int saw_failure = 0;
    for (long fail = 1; fail < 40; fail++) {
        kt_alloc_state as = {0, 0, fail};
        keyer_allocator al = kt_counting_allocator(&as);
        keyer_refine_params p = keyer_refine_params_defaults();
        p.allocator = &al;
        p.threads = 1;
        p.dilate = 2;
        keyer_refine *r = NULL;
        keyer_status st = keyer_refine_create(&p, &r, NULL);
        if (st == KEYER_OK) {
            st = keyer_refine_run(r, 0, f, &mf, NULL, a, NULL);
            keyer_refine_destroy(&r);
        }
        if (st && st != KEYER_STATUS_OUT_OF_MEMORY) fail_msg("fail_at %ld: status %d", fail, st);
        saw_failure |= st != KEYER_OK;
        assert_int_equal(as.live, 0);
    }
    assert_true(saw_failure);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bilinear_matches_reference),
        cmocka_unit_test(test_guided_matches_reference),
        cmocka_unit_test(test_dilate_erode_feather_exact),
        cmocka_unit_test(test_threshold),
        cmocka_unit_test(test_mask_region),
        cmocka_unit_test(test_temporal_static_flicker),
        cmocka_unit_test(test_temporal_follows_motion),
        cmocka_unit_test(test_streams_and_reset),
        cmocka_unit_test(test_threads_do_not_change_results),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
