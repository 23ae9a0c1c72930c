/*
 * The keying chain object (keyer/keying.h) on the test photos, against the same chain written
 * out step by step with the public effects and runtime API (the oracle below):
 *  - selfie (a probability mask, stretched) and pose-lite (logits, letterboxed by the model's
 *    registry entry): output and matte bit-exact, the raw mask equal to the model's output
 *    (after the sigmoid), for blur, colour, image, alpha and mask output;
 *  - empty output and matte frames are allocated in the mode's format (NV12 in, NV12 out);
 *  - the temporal history: a second frame differs from a first, reset brings the first back;
 *  - the option table and the errors (parameters, models, frames, outputs, backgrounds), and
 *    the CUDA entry points in a build without CUDA.
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
#include "keyer/keying.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "keyer/version.h"
#include "kt_io.h"
#include "testutil.h"

static keyer_frame *new_frame(keyer_pixel_format fmt, int w, int h)
{
    keyer_frame *f = NULL;
    keyer_error err = {0};
    if (keyer_frame_create(&f, &err) || keyer_frame_alloc(f, fmt, w, h, NULL, &err))
        fail_msg("%s", err.message);
    return f;
}

static keyer_keying *make_keying(const keyer_keying_params *p)
{
    keyer_keying *k = NULL;
    keyer_error err = {0};
    if (keyer_keying_create(p, &k, &err))
        fail_msg("%s", err.message);
    return k;
}

/* Same size and format, every row's bytes equal. */
static void assert_frames_equal(const keyer_frame *a, const keyer_frame *b)
{
    assert_int_equal(a->format, b->format);
    assert_int_equal(a->width, b->width);
    assert_int_equal(a->height, b->height);
    for (int p = 0; p < keyer_pixel_format_planes(a->format); p++) {
        int pw, ph, bpe;
        assert_int_equal(keyer_pixel_format_plane(a->format, a->width, a->height, p, &pw, &ph,
                                                  &bpe, NULL), KEYER_OK);
        for (int y = 0; y < ph; y++)
            if (memcmp(a->data[p] + y * a->stride[p], b->data[p] + y * b->stride[p],
                       (size_t)pw * (size_t)bpe))
                fail_msg("plane %d row %d differs", p, y);
    }
}

/* ---- the oracle: the chain step by step on the public API ------------------------------------ */

typedef struct oracle {
    keyer_model *model;
    keyer_runtime *rt;
    keyer_prepare *prep;
    keyer_refine *refine;
    keyer_composite *comp;
    const keyer_model_entry *entry;
    int letterbox, in_w, in_h, mask_w, mask_h;
    float *mask;     /* probabilities, mask_w x mask_h */
    keyer_frame view; /* GRAYF32 view of mask */
} oracle;

static void oracle_open(oracle *o, const char *model, int letterbox, const keyer_refine_params *rp,
                        const keyer_composite_params *cp)
{
    memset(o, 0, sizeof(*o));
    char path[4096];
    keyer_error err = {0};
    o->entry = keyer_registry_find(model);
    assert_non_null(o->entry);
    o->letterbox = letterbox;
    keyer_tensor_info in, mo;
    int idx = o->entry->mask_output < 0 ? 0 : o->entry->mask_output;
    keyer_runtime_params rtp = keyer_runtime_params_defaults();
    rtp.threads = 2;
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    keyer_refine_params r = *rp;
    keyer_composite_params c = *cp;
    r.threads = c.threads = pp.threads = 2;
    if (keyer_registry_resolve(model, path, sizeof(path), &err) ||
        keyer_model_load_file(path, &o->model, &err) ||
        keyer_runtime_create(o->model, &rtp, &o->rt, &err) ||
        keyer_model_input_info(o->model, 0, &in, &err) ||
        keyer_model_output_info(o->model, idx, &mo, &err))
        fail_msg("%s", err.message);
    o->in_w = pp.width = in.dims[2];
    o->in_h = pp.height = in.dims[1];
    o->mask_w = mo.dims[2];
    o->mask_h = mo.dims[1];
    pp.scale = o->entry->input_scale;
    pp.offset = o->entry->input_offset;
    pp.fit = letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    if (keyer_prepare_create(&pp, &o->prep, &err) || keyer_refine_create(&r, &o->refine, &err) ||
        keyer_composite_create(&c, &o->comp, &err))
        fail_msg("%s", err.message);
    o->mask = malloc(sizeof(float) * (size_t)o->mask_w * (size_t)o->mask_h);
    assert_non_null(o->mask);
    o->view.format = KEYER_PIXEL_FORMAT_GRAYF32;
    o->view.width = o->mask_w;
    o->view.height = o->mask_h;
    o->view.data[0] = (uint8_t *)o->mask;
    o->view.stride[0] = (ptrdiff_t)o->mask_w * 4;
}

static void oracle_close(oracle *o)
{
    keyer_composite_destroy(&o->comp);
    keyer_refine_destroy(&o->refine);
    keyer_prepare_destroy(&o->prep);
    keyer_runtime_destroy(&o->rt);
    keyer_model_destroy(&o->model);
    free(o->mask);
}

/* One frame: the mask (channel 0, sigmoid of logits), the matte and, when @p out, the output. */
static void oracle_key(oracle *o, const keyer_frame *frame, keyer_frame *alpha, keyer_frame *out)
{
    keyer_error err = {0};
    keyer_prepare_geometry g;
    const keyer_frame *frames[1] = {frame};
    int idx = o->entry->mask_output < 0 ? 0 : o->entry->mask_output;
    keyer_tensor_info mo;
    if (keyer_prepare_run(o->prep, frames, NULL, 1, keyer_runtime_input_data(o->rt, 0), &g,
                          &err) ||
        keyer_runtime_run(o->rt, &err) || keyer_model_output_info(o->model, idx, &mo, &err))
        fail_msg("%s", err.message);
    const float *raw = keyer_runtime_output_data(o->rt, idx);
    size_t c = mo.rank == 4 ? (size_t)mo.dims[3] : 1, cells = (size_t)o->mask_w * o->mask_h;
    for (size_t i = 0; i < cells; i++) {
        float v = raw[i * c];
        o->mask[i] = o->entry->mask_is_logit ? 1.0f / (1.0f + expf(-v)) : v;
    }
    keyer_rectf region, *rp = NULL;
    if (o->letterbox) {
        float sx = (float)o->mask_w / (float)o->in_w, sy = (float)o->mask_h / (float)o->in_h;
        region = (keyer_rectf){g.content.x * sx, g.content.y * sy, g.content.width * sx,
                               g.content.height * sy};
        rp = &region;
    }
    if (keyer_refine_run(o->refine, 0, frame, &o->view, rp, alpha, &err) ||
        (out && keyer_composite_run(o->comp, frame, alpha, out, &err)))
        fail_msg("%s", err.message);
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* Keys a photo with @p model and @p mode through both chains, two frames (history). */
static void check_equal(const char *model, keyer_composite_mode mode, keyer_pixel_format out_fmt,
                        int expect_letterbox)
{
    keyer_keying_params p = keyer_keying_params_defaults();
    p.model = model;
    p.threads = 2;
    p.composite.mode = mode;
    p.composite.color = 0x3060c0;
    keyer_keying *k = make_keying(&p);
    oracle o;
    oracle_open(&o, model, expect_letterbox, &p.refine, &p.composite);
    keyer_frame *bg = kt_read_image("messi5.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_error err = {0};
    if (mode == KEYER_COMPOSITE_IMAGE &&
        (keyer_keying_set_background(k, bg, &err) ||
         keyer_composite_set_background(o.comp, bg, &err)))
        fail_msg("%s", err.message);
    keyer_frame_destroy(&bg); /* both hold their own references */
    const char *photos[2] = {"grace_hopper.jpg", "messi5.jpg"};
    for (int i = 0; i < 2; i++) {
        keyer_frame *f = kt_read_image(photos[i], KEYER_PIXEL_FORMAT_RGB24);
        keyer_frame *a1 = new_frame(KEYER_PIXEL_FORMAT_GRAY8, f->width, f->height);
        keyer_frame *a2 = new_frame(KEYER_PIXEL_FORMAT_GRAY8, f->width, f->height);
        keyer_frame *o1 = new_frame(out_fmt, f->width, f->height);
        keyer_frame *o2 = new_frame(out_fmt, f->width, f->height);
        if (keyer_keying_process(k, f, o1, a1, &err))
            fail_msg("%s", err.message);
        oracle_key(&o, f, a2, o2);
        assert_frames_equal(a1, a2);
        assert_frames_equal(o1, o2);
        const keyer_frame *m = keyer_keying_mask(k);
        assert_non_null(m);
        assert_int_equal(m->format, KEYER_PIXEL_FORMAT_GRAYF32);
        assert_int_equal(m->width, o.mask_w);
        assert_int_equal(m->height, o.mask_h);
        assert_frames_equal(m, &o.view);
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&a1);
        keyer_frame_destroy(&a2);
        keyer_frame_destroy(&o1);
        keyer_frame_destroy(&o2);
    }
    oracle_close(&o);
    keyer_keying_destroy(&k);
    assert_null(k);
}

static void test_selfie_equals_steps(void **state)
{
    (void)state;
    check_equal("selfie", KEYER_COMPOSITE_BLUR, KEYER_PIXEL_FORMAT_RGB24, 0);
    check_equal("selfie", KEYER_COMPOSITE_COLOR, KEYER_PIXEL_FORMAT_RGB24, 0);
    check_equal("selfie", KEYER_COMPOSITE_IMAGE, KEYER_PIXEL_FORMAT_RGB24, 0);
    check_equal("selfie", KEYER_COMPOSITE_ALPHA, KEYER_PIXEL_FORMAT_RGBA, 0);
}

static void test_pose_equals_steps(void **state)
{
    (void)state;
    /* logits (sigmoid), channel 0 of output 2, letterboxed by the registry */
    check_equal("pose-lite", KEYER_COMPOSITE_MASK, KEYER_PIXEL_FORMAT_GRAY8, 1);
}

/* Empty outputs are allocated in the mode's format, in the frame's format for blur. */
static void test_empty_outputs(void **state)
{
    (void)state;
    keyer_error err = {0};
    static const struct {
        keyer_composite_mode mode;
        keyer_pixel_format in, out;
    } cases[] = {
        {KEYER_COMPOSITE_BLUR, KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_NV12},
        {KEYER_COMPOSITE_GREEN_SCREEN, KEYER_PIXEL_FORMAT_RGBA, KEYER_PIXEL_FORMAT_RGBA},
        {KEYER_COMPOSITE_ALPHA_PREMULTIPLIED, KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_RGBA},
        {KEYER_COMPOSITE_MASK, KEYER_PIXEL_FORMAT_YUV420P, KEYER_PIXEL_FORMAT_GRAY8},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        keyer_keying_params p = keyer_keying_params_defaults();
        p.threads = 2;
        p.composite.mode = cases[i].mode;
        keyer_keying *k = make_keying(&p);
        keyer_frame *f = kt_read_image("grace_hopper.jpg", cases[i].in), *out = NULL, *matte = NULL;
        keyer_frame *full = new_frame(cases[i].out, f->width, f->height);
        keyer_frame *full_matte = new_frame(KEYER_PIXEL_FORMAT_GRAY8, f->width, f->height);
        assert_int_equal(keyer_frame_create(&out, &err), KEYER_OK);
        assert_int_equal(keyer_frame_create(&matte, &err), KEYER_OK);
        if (keyer_keying_process(k, f, out, matte, &err))
            fail_msg("%s", err.message);
        assert_int_equal(out->format, cases[i].out);
        assert_int_equal(out->memory, KEYER_MEMORY_HOST);
        assert_int_equal(matte->format, KEYER_PIXEL_FORMAT_GRAY8);
        /* the same frame again into allocated frames, from the same history */
        keyer_keying_reset(k);
        if (keyer_keying_process(k, f, full, full_matte, &err))
            fail_msg("%s", err.message);
        assert_frames_equal(out, full);
        assert_frames_equal(matte, full_matte);
        /* the output of a frame's own format may be the frame (in place) */
        if (cases[i].out == cases[i].in) {
            keyer_keying_reset(k);
            if (keyer_keying_process(k, f, f, NULL, &err))
                fail_msg("%s", err.message);
            assert_frames_equal(f, full);
        }
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&out);
        keyer_frame_destroy(&matte);
        keyer_frame_destroy(&full);
        keyer_frame_destroy(&full_matte);
        keyer_keying_destroy(&k);
    }
}

/* Temporal smoothing: a second frame is smoothed with the first, reset forgets it. */
static void test_history_and_reset(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_keying_params p = keyer_keying_params_defaults();
    p.threads = 2;
    keyer_keying *k = make_keying(&p);
    keyer_frame *f = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_frame *g = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    /* a slightly darker copy: the smoothing mixes the two masks where little moved */
    for (int y = 0; y < g->height; y++)
        for (int x = 0; x < 3 * g->width; x++) {
            uint8_t *v = g->data[0] + y * g->stride[0] + x;
            *v = (uint8_t)(*v * 0.97f);
        }
    keyer_frame *m1 = new_frame(KEYER_PIXEL_FORMAT_GRAYF32, f->width, f->height);
    keyer_frame *m2 = new_frame(KEYER_PIXEL_FORMAT_GRAYF32, f->width, f->height);
    keyer_frame *m3 = new_frame(KEYER_PIXEL_FORMAT_GRAYF32, f->width, f->height);
    if (keyer_keying_process(k, g, NULL, m1, &err) || /* g alone */
        keyer_keying_process(k, f, NULL, m2, &err))  /* f after g */
        fail_msg("%s", err.message);
    keyer_keying_reset(k);
    assert_null(keyer_keying_mask(k));
    if (keyer_keying_process(k, g, NULL, m3, &err)) /* g alone again */
        fail_msg("%s", err.message);
    assert_frames_equal(m1, m3);
    int differ = 0;
    for (int y = 0; y < f->height && !differ; y++)
        differ = memcmp(m1->data[0] + y * m1->stride[0], m2->data[0] + y * m2->stride[0],
                        (size_t)f->width * 4) != 0;
    assert_true(differ);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&g);
    keyer_frame_destroy(&m1);
    keyer_frame_destroy(&m2);
    keyer_frame_destroy(&m3);
    keyer_keying_destroy(&k);
}

static void test_options(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_keying_params p = keyer_keying_params_defaults();
    assert_string_equal(p.model, "selfie");
    assert_int_equal(p.backend, KEYER_BACKEND_CPU);
    assert_int_equal(p.fit, KEYER_KEYING_FIT_MODEL);
    assert_int_equal(p.composite.mode, KEYER_COMPOSITE_BLUR);
    assert_int_equal(p.refine.temporal, KEYER_TEMPORAL_ADAPTIVE);
    const char *names[] = {"model", "backend", "precision", "device", "fit", "threads"};
    assert_int_equal(keyer_options_count(keyer_keying_options()), 6);
    for (size_t i = 0; i < 6; i++)
        assert_non_null(keyer_option_find(keyer_keying_options(), names[i]));
    if (keyer_options_parse(keyer_keying_options(), &p, "backend=reference,fit=letterbox,threads=3",
                            &err))
        fail_msg("%s", err.message);
    assert_int_equal(p.backend, KEYER_BACKEND_REFERENCE);
    assert_int_equal(p.fit, KEYER_KEYING_FIT_LETTERBOX);
    assert_int_equal(p.threads, 3);
    assert_int_equal(keyer_options_parse(keyer_keying_options(), &p, "fit=crop", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "fit"));
    /* the reference backend, letterboxed: runs, and its mask is the model's */
    keyer_keying *k = make_keying(&p);
    keyer_frame *f = kt_read_image("messi5.jpg", KEYER_PIXEL_FORMAT_RGB24);
    if (keyer_keying_process(k, f, NULL, NULL, &err))
        fail_msg("%s", err.message);
    assert_int_equal(keyer_keying_mask(k)->width, 256);
    assert_ptr_equal(keyer_keying_model_entry(k), keyer_registry_find("selfie"));
    keyer_frame_destroy(&f);
    keyer_keying_destroy(&k);
    keyer_keying_destroy(&k); /* NULL is fine */
    keyer_keying_destroy(NULL);
}

static void expect_create_error(keyer_keying_params *p, keyer_status want, const char *text)
{
    keyer_keying *k = (keyer_keying *)&k; /* must be cleared on failure */
    keyer_error err = {0};
    assert_int_equal(keyer_keying_create(p, &k, &err), want);
    assert_null(k);
    if (!strstr(err.message, text))
        fail_msg("'%s' lacks '%s'", err.message, text);
}

static void test_create_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_keying *k = NULL;
    assert_int_equal(keyer_keying_create(NULL, &k, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_keying_params p = keyer_keying_params_defaults();
    assert_int_equal(keyer_keying_create(&p, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p.threads = 999;
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "threads");
    p = keyer_keying_params_defaults();
    p.fit = (keyer_keying_fit)7;
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "fit");
    p = keyer_keying_params_defaults();
    p.refine.feather = 100;
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "feather");
    p = keyer_keying_params_defaults();
    p.composite.blur_radius = 1;
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "blur_radius");
    p = keyer_keying_params_defaults();
    p.model = "face-short";
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "face-short: not a segmentation");
    p.model = "face-mesh";
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "not a segmentation");
    p.model = "nope";
    expect_create_error(&p, KEYER_STATUS_INVALID_ARGUMENT, "unknown model 'nope'");
    p.model = "/nonexistent/missing.tflite";
    expect_create_error(&p, KEYER_STATUS_IO, "missing.tflite");
    p = keyer_keying_params_defaults();
    p.precision = KEYER_PRECISION_F16;
    expect_create_error(&p, KEYER_STATUS_UNSUPPORTED, "f16");
    if (!keyer_built_with_cuda()) {
        p = keyer_keying_params_defaults();
        p.backend = KEYER_BACKEND_CUDA;
        expect_create_error(&p, KEYER_STATUS_UNSUPPORTED, "without CUDA");
    }
}

static void test_process_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_keying_params p = keyer_keying_params_defaults();
    p.threads = 2;
    keyer_keying *k = make_keying(&p);
    keyer_frame *f = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    assert_int_equal(keyer_keying_process(NULL, f, NULL, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_keying_process(k, NULL, NULL, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame empty;
    memset(&empty, 0, sizeof(empty));
    assert_int_equal(keyer_keying_process(k, &empty, NULL, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "frame"));
    /* a format the effects do not take */
    keyer_frame *gray = new_frame(KEYER_PIXEL_FORMAT_GRAY8, 64, 48);
    assert_int_equal(keyer_keying_process(k, gray, NULL, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    /* a matte and an output of the wrong size or format */
    keyer_frame *small = new_frame(KEYER_PIXEL_FORMAT_GRAY8, 64, 48);
    assert_int_equal(keyer_keying_process(k, f, NULL, small, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame *rgba = new_frame(KEYER_PIXEL_FORMAT_RGBA, f->width, f->height);
    assert_int_equal(keyer_keying_process(k, f, rgba, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* an output in other memory than the frame */
    keyer_frame dev = *rgba;
    dev.memory = KEYER_MEMORY_CUDA;
    memset(dev.buf, 0, sizeof(dev.buf));
    assert_int_equal(keyer_keying_process(k, f, &dev, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "CUDA memory"));
    /* a CUDA frame in a build without CUDA */
    if (!keyer_built_with_cuda()) {
        keyer_frame cf = *f;
        cf.memory = KEYER_MEMORY_CUDA;
        memset(cf.buf, 0, sizeof(cf.buf));
        assert_int_equal(keyer_keying_process(k, &cf, NULL, NULL, &err),
                         KEYER_STATUS_UNSUPPORTED);
        assert_non_null(strstr(err.message, "without CUDA"));
        assert_int_equal(keyer_keying_stream_wait(k, NULL, &err), KEYER_STATUS_UNSUPPORTED);
        assert_int_equal(keyer_keying_stream_signal(k, NULL, &err), KEYER_STATUS_UNSUPPORTED);
        assert_null(keyer_keying_stream(k));
    }
    assert_int_equal(keyer_keying_synchronize(k, &err), KEYER_OK); /* no CUDA work */
    assert_int_equal(keyer_keying_synchronize(NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* the frame still keys after the errors */
    if (keyer_keying_process(k, f, NULL, NULL, &err))
        fail_msg("%s", err.message);
    keyer_frame_destroy(&gray);
    keyer_frame_destroy(&small);
    keyer_frame_destroy(&rgba);
    keyer_frame_destroy(&f);
    keyer_keying_destroy(&k);
}

static void test_background_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_keying_params p = keyer_keying_params_defaults();
    p.threads = 2;
    p.composite.mode = KEYER_COMPOSITE_IMAGE;
    keyer_keying *k = make_keying(&p);
    keyer_frame *f = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_frame *out = new_frame(KEYER_PIXEL_FORMAT_RGB24, f->width, f->height);
    assert_int_equal(keyer_keying_process(k, f, out, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "without a background"));
    /* the matte alone needs no background */
    assert_int_equal(keyer_keying_process(k, f, NULL, NULL, &err), KEYER_OK);
    keyer_frame *gray = new_frame(KEYER_PIXEL_FORMAT_GRAY8, 16, 16);
    assert_int_equal(keyer_keying_set_background(k, gray, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "gray8"));
    assert_int_equal(keyer_keying_set_background(NULL, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* a background, then none again */
    assert_int_equal(keyer_keying_set_background(k, f, &err), KEYER_OK);
    assert_int_equal(keyer_keying_process(k, f, out, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_keying_set_background(k, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_keying_process(k, f, out, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&gray);
    keyer_frame_destroy(&out);
    keyer_frame_destroy(&f);
    keyer_keying_destroy(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selfie_equals_steps),
        cmocka_unit_test(test_pose_equals_steps),
        cmocka_unit_test(test_empty_outputs),
        cmocka_unit_test(test_history_and_reset),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_process_errors),
        cmocka_unit_test(test_background_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
