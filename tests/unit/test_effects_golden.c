/*
 * The frame effects on the project's test photos:
 *  - preparation against the shared reference input tensor (OpenCV INTER_LINEAR, [0,1]) and
 *    against the double-precision reference for every input format;
 *  - golden images of refinement and compositing made from the photos and the selfie model's
 *    reference mask, compared within 1 code value (KEYER_UPDATE_GOLDEN=1 rewrites them);
 *  - temporal smoothing on clips made from a photo: flicker of a static shot with a noisy
 *    mask, and a pan that the matte must follow within one frame.
 * The reference mask comes from tests/data/reference/selfie/<photo>/ or, failing that,
 * $KEYER_SHARED_DIR/reference/outputs/selfie/<photo>/; photos without one are skipped.
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

#include "keyer/effects.h"
#include "keyer/image.h"
#include "kt_effects.h"
#include "kt_io.h"
#include "testutil.h"

static const char *const photos[] = {"grace_hopper", "messi5"};

static keyer_frame *read_photo(const char *name, keyer_pixel_format fmt)
{
    char file[64];
    snprintf(file, sizeof(file), "%s.jpg", name);
    return kt_read_image(file, fmt);
}

/* The selfie model's 256x256 reference output for a photo, or NULL. */
static float *read_mask(const char *name)
{
    char path[512], file[128];
    snprintf(file, sizeof(file), "reference/selfie/%s/activation_10.f32", name);
    kt_data_path(path, sizeof(path), file);
    if (!kt_exists(path)) {
        snprintf(file, sizeof(file), "reference/outputs/selfie/%s/activation_10.f32", name);
        if (!kt_shared_path(path, sizeof(path), file))
            return NULL;
    }
    size_t size = 0;
    float *m = kt_read_file(path, &size);
    if (m && size != 256 * 256 * sizeof(float)) {
        free(m);
        return NULL;
    }
    return m;
}

static keyer_frame mask_frame(float *data)
{
    keyer_frame m;
    memset(&m, 0, sizeof(m));
    m.format = KEYER_PIXEL_FORMAT_GRAYF32;
    m.width = 256;
    m.height = 256;
    m.data[0] = (uint8_t *)data;
    m.stride[0] = 256 * 4;
    return m;
}

/* ---- preparation on the photos --------------------------------------------------------- */

static void test_prepare_reference_tensor(void **state)
{
    (void)state;
    char path[512];
    kt_data_path(path, sizeof(path), "reference/selfie/grace_hopper/input.f32");
    size_t size = 0;
    float *ref = kt_read_file(path, &size);
    if (!ref || size != 256 * 256 * 3 * sizeof(float)) {
        free(ref);
        skip();
    }
    keyer_frame *f = read_photo("grace_hopper", KEYER_PIXEL_FORMAT_RGB24);
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.area = 0; /* the reference used cv::resize INTER_LINEAR, which does not filter */
    keyer_prepare *prep = NULL;
    assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
    float *t = malloc(size);
    const keyer_frame *frames[1] = {f};
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, t, NULL, NULL), KEYER_OK);
    double mx = kt_maxdiff(t, ref, 256 * 256 * 3, NULL), mean = 0;
    for (size_t i = 0; i < 256 * 256 * 3; i++)
        mean += fabs((double)t[i] - ref[i]);
    mean /= 256 * 256 * 3;
    /* The resize itself matches INTER_LINEAR within 1e-5 (see the double reference); what
     * remains is JPEG decoding (libavcodec's IDCT and chroma upsampling vs libjpeg's). */
    print_message("grace_hopper vs reference input.f32 (INTER_LINEAR, [0,1]): max %.4f (%.1f/255), "
                  "mean %.5f\n", mx, mx * 255, mean);
    assert_true(mean < 0.004);
    assert_true(mx < 0.1);
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&f);
    free(t);
    free(ref);
}

/* Photos read as RGB24, YUV420P and NV12 (as JPEG stores them: full-range BT.601), prepared
 * to the shipped models' inputs, against the double-precision reference. */
static void test_prepare_photos_all_formats(void **state)
{
    (void)state;
    const keyer_pixel_format fm[] = {KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_YUV420P,
                                     KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_RGBA};
    /* selfie 256x256 [0,1] stretch; landscape 256x144; face 128x128 letterbox [-1,1] */
    const struct {
        int w, h, letterbox;
        float scale, offset;
    } models[] = {{256, 256, 0, 1, 0}, {256, 144, 0, 1, 0}, {128, 128, 1, 2, -1}, {192, 192, 1, 2, -1}};
    for (size_t pi = 0; pi < 2; pi++)
        for (size_t fi = 0; fi < sizeof(fm) / sizeof(fm[0]); fi++) {
            keyer_frame *f = read_photo(photos[pi], fm[fi]);
            for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
                keyer_prepare_params p = keyer_prepare_params_defaults();
                p.width = models[mi].w;
                p.height = models[mi].h;
                p.fit = models[mi].letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
                p.scale = models[mi].scale;
                p.offset = models[mi].offset;
                keyer_prepare *prep = NULL;
                assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
                size_t n = (size_t)p.width * p.height * 3;
                float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
                const keyer_frame *frames[1] = {f};
                assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, got, NULL, NULL), KEYER_OK);
                kt_ref_prepare(f, NULL, p.width, p.height, models[mi].letterbox, 1, p.scale,
                               p.offset, 0, want);
                double d = kt_maxdiff(got, want, n, NULL);
                if (d > 1e-3)
                    print_message("%s %s %dx%d: %g\n", photos[pi],
                                  keyer_pixel_format_name(fm[fi]), p.width, p.height, d);
                assert_true(d <= 1e-3);
                free(got);
                free(want);
                keyer_prepare_destroy(&prep);
            }
            keyer_frame_destroy(&f);
        }
}

/* ---- golden images -------------------------------------------------------------------- */

/* The photo reduced 4x with keyer_prepare (area filtering), rounded to RGB24. */
static keyer_frame *small_photo(const char *name)
{
    keyer_frame *f = read_photo(name, KEYER_PIXEL_FORMAT_RGB24);
    int w = f->width / 4, h = f->height / 4;
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.width = w;
    p.height = h;
    keyer_prepare *prep = NULL;
    assert_int_equal(keyer_prepare_create(&p, &prep, NULL), KEYER_OK);
    float *t = malloc(sizeof(float) * 3 * (size_t)w * h);
    const keyer_frame *frames[1] = {f};
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, t, NULL, NULL), KEYER_OK);
    keyer_frame *s = NULL;
    assert_int_equal(keyer_frame_create(&s, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(s, KEYER_PIXEL_FORMAT_RGB24, w, h, NULL, NULL), KEYER_OK);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * 3; x++)
            s->data[0][y * s->stride[0] + x] = (uint8_t)lrintf(t[(size_t)y * w * 3 + x] * 255.0f);
    free(t);
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&f);
    return s;
}

static keyer_frame *new_frame(keyer_pixel_format fmt, int w, int h)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, fmt, w, h, NULL, NULL), KEYER_OK);
    return f;
}

static void composite(const char *opts, const keyer_frame *bg, keyer_frame *f, keyer_frame *a,
                      keyer_frame *out)
{
    keyer_composite_params p = keyer_composite_params_defaults();
    keyer_error err = {0};
    if (keyer_options_parse(keyer_composite_options(), &p, opts, &err))
        fail_msg("%s", err.message);
    keyer_composite *c = NULL;
    assert_int_equal(keyer_composite_create(&p, &c, NULL), KEYER_OK);
    if (bg)
        assert_int_equal(keyer_composite_set_background(c, bg, NULL), KEYER_OK);
    if (keyer_composite_run(c, f, a, out, &err))
        fail_msg("%s", err.message);
    keyer_composite_destroy(&c);
}

/* Compares @p got with tests/data/golden/<name>.png within 1 code value (or writes it when
 * KEYER_UPDATE_GOLDEN=1). */
static void check_golden(const keyer_frame *got, const char *name)
{
    char msg[640];
    int rc = kt_golden_check(got, name, 1, msg, sizeof(msg));
    if (rc)
        fail_msg("%s", msg);
    if (getenv("KEYER_UPDATE_GOLDEN"))
        print_message("%s\n", msg);
}

static void test_golden(void **state)
{
    (void)state;
    int ran = 0;
    for (size_t pi = 0; pi < 2; pi++) {
        float *m = read_mask(photos[pi]);
        if (!m)
            continue;
        ran++;
        keyer_frame mf = mask_frame(m);
        keyer_frame *f = small_photo(photos[pi]);
        int w = f->width, h = f->height;
        keyer_frame *a = new_frame(KEYER_PIXEL_FORMAT_GRAY8, w, h);
        keyer_refine_params rp = keyer_refine_params_defaults();
        keyer_refine *r = NULL;
        assert_int_equal(keyer_refine_create(&rp, &r, NULL), KEYER_OK);
        assert_int_equal(keyer_refine_run(r, 0, f, &mf, NULL, a, NULL), KEYER_OK);
        char name[96];
        snprintf(name, sizeof(name), "%s_alpha", photos[pi]);
        check_golden(a, name);
        keyer_frame *o = new_frame(KEYER_PIXEL_FORMAT_RGB24, w, h);
        composite("mode=blur,blur_radius=4", NULL, f, a, o);
        snprintf(name, sizeof(name), "%s_blur", photos[pi]);
        check_golden(o, name);
        composite("mode=color,color=#3060c0", NULL, f, a, o);
        snprintf(name, sizeof(name), "%s_color", photos[pi]);
        check_golden(o, name);
        /* the NV12 path: the photo converted to NV12 (image replacement under alpha 0), the
         * blur composited in NV12, then read back as RGBA with the matte as alpha */
        keyer_frame *zero = new_frame(KEYER_PIXEL_FORMAT_GRAY8, w, h);
        for (int y = 0; y < h; y++)
            memset(zero->data[0] + y * zero->stride[0], 0, (size_t)w);
        keyer_frame *nv = new_frame(KEYER_PIXEL_FORMAT_NV12, w, h);
        nv->matrix = KEYER_COLOR_MATRIX_BT709;
        nv->range = KEYER_COLOR_RANGE_LIMITED;
        composite("mode=image,dither=0", f, nv, zero, nv);
        composite("mode=blur,blur_radius=4", NULL, nv, a, nv);
        keyer_frame *rgba = new_frame(KEYER_PIXEL_FORMAT_RGBA, w, h);
        composite("mode=alpha", NULL, nv, a, rgba);
        snprintf(name, sizeof(name), "%s_nv12_blur", photos[pi]);
        check_golden(rgba, name);
        keyer_refine_destroy(&r);
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&a);
        keyer_frame_destroy(&o);
        keyer_frame_destroy(&zero);
        keyer_frame_destroy(&nv);
        keyer_frame_destroy(&rgba);
        free(m);
    }
    if (!ran)
        skip();
}

/* ---- temporal smoothing on clips made from a photo -------------------------------------- */

/* Frame t of a pan: a window of the photo moving `step` pixels right per frame. */
static void pan_window(const keyer_frame *photo, keyer_frame *out, int x0)
{
    for (int y = 0; y < out->height; y++)
        memcpy(out->data[0] + y * out->stride[0], photo->data[0] + y * photo->stride[0] + 3 * x0,
               (size_t)out->width * 3);
}

/* Adds model-like flicker to a mask: strongest where the model is unsure. */
static void noisy_mask(const float *m, float *out, kt_rng *rng, double amp)
{
    for (int i = 0; i < 256 * 256; i++) {
        double v = m[i];
        v += amp * ((double)(kt_next(rng) % 2001) / 1000.0 - 1.0) * (0.2 + 4 * v * (1 - v));
        out[i] = (float)v;
    }
}

static double mean_change(const keyer_frame *a, const keyer_frame *b)
{
    double s = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            s += abs(a->data[0][y * a->stride[0] + x] - b->data[0][y * b->stride[0] + x]);
    return s / ((double)a->width * a->height * 255);
}

static void test_temporal_on_photo_clips(void **state)
{
    (void)state;
    float *m = read_mask("grace_hopper");
    if (!m)
        skip();
    keyer_frame *photo = read_photo("grace_hopper", KEYER_PIXEL_FORMAT_RGB24);
    const int W = 400, H = photo->height, N = 10, STEP = 8;
    float *noisy = malloc(sizeof(float) * 256 * 256);
    keyer_frame mf = mask_frame(noisy);
    keyer_frame *frame = new_frame(KEYER_PIXEL_FORMAT_RGB24, W, H);
    keyer_frame *prev[2] = {new_frame(KEYER_PIXEL_FORMAT_GRAY8, W, H),
                            new_frame(KEYER_PIXEL_FORMAT_GRAY8, W, H)};
    keyer_frame *cur[2] = {new_frame(KEYER_PIXEL_FORMAT_GRAY8, W, H),
                           new_frame(KEYER_PIXEL_FORMAT_GRAY8, W, H)};
    keyer_refine *r[2] = {NULL, NULL};
    keyer_refine_params rp = keyer_refine_params_defaults();
    rp.temporal = KEYER_TEMPORAL_OFF;
    assert_int_equal(keyer_refine_create(&rp, &r[0], NULL), KEYER_OK);
    rp.temporal = KEYER_TEMPORAL_ADAPTIVE;
    assert_int_equal(keyer_refine_create(&rp, &r[1], NULL), KEYER_OK);
    /* 1. static shot, flickering mask */
    kt_rng rng = {77};
    double flicker[2] = {0, 0};
    pan_window(photo, frame, 56);
    keyer_rectf region = {56 * 256.0f / photo->width, 0, W * 256.0f / photo->width, 256};
    for (int t = 0; t < N; t++) {
        noisy_mask(m, noisy, &rng, 0.08);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(keyer_refine_run(r[k], 0, frame, &mf, &region, cur[k], NULL), KEYER_OK);
            if (t >= 2)
                flicker[k] += mean_change(cur[k], prev[k]);
            keyer_frame *sw = prev[k];
            prev[k] = cur[k];
            cur[k] = sw;
        }
    }
    print_message("static shot of grace_hopper, noisy mask: mean |d alpha| per frame %.5f "
                  "unsmoothed, %.5f smoothed (%.0f%%)\n", flicker[0] / (N - 2), flicker[1] / (N - 2),
                  100 * flicker[1] / flicker[0]);
    assert_true(flicker[1] <= 0.5 * flicker[0]);
    /* 2. a pan, clean masks: the smoothed matte stays with this frame's unsmoothed one */
    assert_int_equal(keyer_refine_reset(r[1], 0, NULL), KEYER_OK);
    for (int t = 0; t < N; t++) {
        int x0 = t * STEP;
        pan_window(photo, frame, x0);
        region.x = x0 * 256.0f / photo->width;
        memcpy(noisy, m, sizeof(float) * 256 * 256);
        for (int k = 0; k < 2; k++)
            assert_int_equal(keyer_refine_run(r[k], 0, frame, &mf, &region, cur[k], NULL), KEYER_OK);
        if (t >= 1) {
            double lag = mean_change(cur[1], cur[0]), step = mean_change(cur[0], prev[0]);
            if (t == N - 1)
                print_message("pan of %d px/frame: smoothed vs unsmoothed %.5f, frame-to-frame "
                              "change %.5f (%.0f%%)\n", STEP, lag, step, 100 * lag / step);
            assert_true(lag < 0.25 * step);
        }
        keyer_frame *sw = prev[0];
        prev[0] = cur[0];
        cur[0] = sw;
    }
    for (int k = 0; k < 2; k++) {
        keyer_refine_destroy(&r[k]);
        keyer_frame_destroy(&prev[k]);
        keyer_frame_destroy(&cur[k]);
    }
    keyer_frame_destroy(&frame);
    keyer_frame_destroy(&photo);
    free(noisy);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepare_reference_tensor),
        cmocka_unit_test(test_prepare_photos_all_formats),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_temporal_on_photo_clips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
