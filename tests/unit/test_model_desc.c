/* Model descriptions (keyer/registry.h): defaults, the registry's u2netp, options and YAML
 * files with their errors; the per-channel normalisation and channel order of prepare against
 * the double-precision reference; the mask of every output kind (vision/segmodel.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/config.h"
#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/keying.h"
#include "keyer/registry.h"
#include "kt_effects.h"
#include "testutil.h"
#include "vision/segmodel.h"

static void test_defaults_and_registry(void **state)
{
    (void)state;
    keyer_model_desc d = keyer_model_desc_defaults();
    assert_string_equal(d.input, "");
    assert_string_equal(d.output, "");
    assert_int_equal(d.layout, KEYER_TENSOR_LAYOUT_NCHW);
    assert_int_equal(d.color_order, KEYER_COLOR_RGB);
    assert_true(d.scale == 1.0f && d.offset == 0.0f);
    assert_int_equal(d.output_kind, KEYER_MASK_PROBABILITY);
    assert_int_equal(d.person_class, 15);
    keyer_error err = {0};
    assert_int_equal(keyer_model_desc_validate(&d, &err), KEYER_OK);

    const keyer_model_entry *e = keyer_registry_find("u2netp");
    assert_non_null(e);
    assert_string_equal(e->file, "u2netp.onnx");
    assert_int_equal(e->task, KEYER_TASK_SEGMENTATION);
    d = keyer_model_desc_from_entry(e);
    assert_int_equal(d.width, 320);
    assert_int_equal(d.height, 320);
    assert_int_equal(d.layout, KEYER_TENSOR_LAYOUT_NCHW);
    assert_int_equal(d.letterbox, 0);
    assert_int_equal(d.output_index, 0);
    assert_int_equal(d.output_kind, KEYER_MASK_PROBABILITY);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        assert_true(d.mean[c] == mean[c]);
        assert_true(d.std[c] == sd[c]);
    }
    /* the TFLite models keep their scalar normalisation, NHWC, no mean/std */
    d = keyer_model_desc_from_entry(keyer_registry_find("pose-lite"));
    assert_int_equal(d.layout, KEYER_TENSOR_LAYOUT_NHWC);
    assert_int_equal(d.output_index, 2);
    assert_int_equal(d.output_kind, KEYER_MASK_LOGITS);
    assert_int_equal(d.letterbox, 1);
    assert_true(d.std[0] == 0.0f && d.std[1] == 0.0f && d.std[2] == 0.0f);

    /* an .onnx name is a path; the unknown-name message mentions .onnx */
    char path[256];
    assert_int_equal(keyer_registry_resolve("/nonexistent/net.onnx", path, sizeof(path), &err),
                     KEYER_STATUS_IO);
    assert_string_equal(path, "/nonexistent/net.onnx");
    assert_int_equal(keyer_registry_resolve("net.onnx", path, sizeof(path), &err),
                     KEYER_STATUS_IO);
    assert_int_equal(keyer_registry_resolve("no-such-model", path, sizeof(path), &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "u2netp"));
    assert_non_null(strstr(err.message, ".onnx"));
}

static void test_options(void **state)
{
    (void)state;
    const keyer_option *t = keyer_model_desc_options();
    keyer_model_desc d = keyer_model_desc_defaults();
    keyer_error err = {0};
    if (keyer_options_parse(t, &d,
                            "input=image,size=64x48,layout=nhwc,color_order=bgr,range=signed,"
                            "mean=0.5/0.25/0.125,std=0.5,fit=letterbox,output=seg,"
                            "output_kind=classes,person_class=1",
                            &err))
        fail_msg("%s", err.message);
    assert_string_equal(d.input, "image");
    assert_int_equal(d.width, 64);
    assert_int_equal(d.height, 48);
    assert_int_equal(d.layout, KEYER_TENSOR_LAYOUT_NHWC);
    assert_int_equal(d.color_order, KEYER_COLOR_BGR);
    assert_true(d.scale == 2.0f && d.offset == -1.0f);
    assert_true(d.mean[0] == 0.5f && d.mean[1] == 0.25f && d.mean[2] == 0.125f);
    assert_true(d.std[0] == 0.5f && d.std[1] == 0.5f && d.std[2] == 0.5f);
    assert_int_equal(d.letterbox, 1);
    assert_string_equal(d.output, "seg");
    assert_int_equal(d.output_kind, KEYER_MASK_CLASSES);
    assert_int_equal(d.person_class, 1);
    assert_int_equal(keyer_model_desc_validate(&d, &err), KEYER_OK);
    assert_int_equal(keyer_options_parse(t, &d, "range=byte", &err), KEYER_OK);
    assert_true(d.scale == 255.0f && d.offset == 0.0f);
    assert_int_equal(keyer_options_parse(t, &d, "size=96", &err), KEYER_OK);
    assert_int_equal(d.width, 96);
    assert_int_equal(d.height, 96);

    /* errors name the option and the value; the struct is unchanged */
    keyer_model_desc before = d;
    struct {
        const char *text, *expect;
    } bad[] = {
        {"output_kind=mask", "output_kind"},
        {"layout=chwn", "layout"},
        {"std=0.5/-1/1", "std"},
        {"std=0", "std"},
        {"mean=1/2", "mean"},
        {"mean=x", "mean"},
        {"size=0x10", "size"},
        {"size=10x", "size"},
        {"person_class=5000", "person_class"},
        {"colour=rgb", "colour"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        assert_int_not_equal(keyer_options_parse(t, &d, bad[i].text, &err), KEYER_OK);
        if (!strstr(err.message, bad[i].expect))
            fail_msg("'%s': message '%s' does not name '%s'", bad[i].text, err.message,
                     bad[i].expect);
        assert_memory_equal(&d, &before, sizeof(d));
    }
    char longname[400];
    memset(longname, 'a', sizeof(longname));
    memcpy(longname, "input=", 6);
    longname[sizeof(longname) - 1] = 0;
    assert_int_equal(keyer_options_parse(t, &d, longname, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "input"));

    /* validation of a struct set by hand */
    d = keyer_model_desc_defaults();
    d.width = 64;
    assert_int_equal(keyer_model_desc_validate(&d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "height"));
    d = keyer_model_desc_defaults();
    d.std[1] = -1.0f;
    assert_int_equal(keyer_model_desc_validate(&d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    d = keyer_model_desc_defaults();
    d.output_kind = (keyer_mask_kind)9;
    assert_int_equal(keyer_model_desc_validate(&d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    d = keyer_model_desc_defaults();
    d.scale = 0.0f;
    assert_int_equal(keyer_model_desc_validate(&d, &err), KEYER_STATUS_INVALID_ARGUMENT);

    /* help comes from the table */
    char help[8192];
    keyer_options_help(t, help, sizeof(help));
    assert_non_null(strstr(help, "output_kind"));
    assert_non_null(strstr(help, "classes"));
    assert_non_null(strstr(help, "person_class"));
}

static const char *write_yaml(char *path, size_t n, const char *name, const char *text)
{
    char dir[512];
    kt_tmpdir(dir, sizeof(dir), "model_desc");
    snprintf(path, n, "%s/%s", dir, name);
    assert_int_equal(kt_write_file(path, text, strlen(text)), 0);
    return path;
}

static void test_yaml(void **state)
{
    (void)state;
    char path[1024];
    keyer_error err = {0};
    keyer_model_desc d = keyer_model_desc_defaults();
    write_yaml(path, sizeof(path), "good.yaml",
               "# a DeepLab-style segmenter\n"
               "input: pixel_values\n"
               "size: [513, 257]\n"
               "layout: nchw\n"
               "color_order: bgr\n"
               "range: unit\n"
               "mean: [0.485, 0.456, 0.406]\n"
               "std: [0.229, 0.224, 0.225]\n"
               "output: logits\n"
               "output_kind: classes\n"
               "person_class: 15\n");
    keyer_status st = keyer_model_desc_read(path, &d, &err);
    if (st == KEYER_STATUS_UNSUPPORTED)
        skip();
    if (st)
        fail_msg("%s", err.message);
    assert_string_equal(d.input, "pixel_values");
    assert_int_equal(d.width, 513);
    assert_int_equal(d.height, 257);
    assert_int_equal(d.color_order, KEYER_COLOR_BGR);
    assert_true(d.mean[2] == 0.406f && d.std[1] == 0.224f);
    assert_string_equal(d.output, "logits");
    assert_int_equal(d.output_kind, KEYER_MASK_CLASSES);
    assert_int_equal(d.person_class, 15);

    /* "mean: 0.5" (one value) and "size: 320x320" */
    d = keyer_model_desc_defaults();
    write_yaml(path, sizeof(path), "scalar.yaml", "mean: 0.5\nstd: 0.25\nsize: 320x160\n");
    assert_int_equal(keyer_model_desc_read(path, &d, &err), KEYER_OK);
    assert_true(d.mean[0] == 0.5f && d.mean[2] == 0.5f && d.std[1] == 0.25f);
    assert_int_equal(d.width, 320);
    assert_int_equal(d.height, 160);

    /* errors: the file, the line and what is wrong */
    struct {
        const char *name, *text, *expect;
        keyer_status status;
    } bad[] = {
        {"unknown.yaml", "input: x\nmodel_kind: logits\n", "unknown.yaml:2: unknown key 'model_kind'",
         KEYER_STATUS_INVALID_ARGUMENT},
        {"layout.yaml", "layout: nchw\nlayout2: x\n", "unknown key", KEYER_STATUS_INVALID_ARGUMENT},
        {"badlayout.yaml", "\nlayout: planar\n", "badlayout.yaml:2:", KEYER_STATUS_INVALID_ARGUMENT},
        {"mean.yaml", "mean: [0.1, 0.2]\n", "mean", KEYER_STATUS_INVALID_ARGUMENT},
        {"kind.yaml", "output_kind: segmentation\n", "output_kind", KEYER_STATUS_INVALID_ARGUMENT},
        {"notyaml.yaml", "input: [unclosed\n", "notyaml.yaml", KEYER_STATUS_BAD_DATA},
        {"half.yaml", "width: 64\n", "height", KEYER_STATUS_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        d = keyer_model_desc_defaults();
        memset(&err, 0, sizeof(err));
        write_yaml(path, sizeof(path), bad[i].name, bad[i].text);
        st = keyer_model_desc_read(path, &d, &err);
        if (st != bad[i].status || !strstr(err.message, bad[i].expect))
            fail_msg("%s: status %d, message '%s' (expected %d, '%s')", bad[i].name, (int)st,
                     err.message, (int)bad[i].status, bad[i].expect);
    }
    assert_int_equal(keyer_model_desc_read("/nonexistent/desc.yaml", &d, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/desc.yaml"));
}

/* prepare's per-channel standardisation and BGR against the reference's [0,1] RGB */
static void test_prepare_mean_std_bgr(void **state)
{
    (void)state;
    const keyer_pixel_format fmts[] = {KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_NV12};
    const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    for (size_t fi = 0; fi < 2; fi++)
        for (int bgr = 0; bgr < 2; bgr++)
            for (int layout = 0; layout < 2; layout++) {
                const int tw = 37, th = 29;
                keyer_frame *f = kt_frame_padded(fmts[fi], 90, 64, 0);
                kt_fill_random(f, 7u + (uint32_t)fi, 1);
                keyer_prepare_params p = keyer_prepare_params_defaults();
                p.width = tw;
                p.height = th;
                p.fit = KEYER_FIT_LETTERBOX;
                p.pad = 0.25f;
                p.layout = layout ? KEYER_TENSOR_LAYOUT_NCHW : KEYER_TENSOR_LAYOUT_NHWC;
                p.bgr = bgr;
                p.threads = 2;
                for (int c = 0; c < 3; c++) {
                    p.mean[c] = mean[c];
                    p.std[c] = sd[c];
                }
                keyer_prepare *prep = NULL;
                keyer_error err = {0};
                assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_OK);
                size_t n = (size_t)tw * th * 3;
                float *got = malloc(n * sizeof(float)), *rgb = malloc(n * sizeof(float));
                assert_non_null(got);
                assert_non_null(rgb);
                const keyer_frame *frames[1] = {f};
                assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, got, NULL, &err),
                                 KEYER_OK);
                kt_ref_prepare(f, NULL, tw, th, 1, 1, 1.0f, 0.0f, 0.25f, rgb); /* NHWC RGB */
                double worst = 0;
                for (int y = 0; y < th; y++)
                    for (int x = 0; x < tw; x++)
                        for (int c = 0; c < 3; c++) {
                            int from = bgr ? 2 - c : c;
                            double want = ((double)rgb[((size_t)y * tw + x) * 3 + from] -
                                           mean[c]) / sd[c];
                            size_t at = layout ? (size_t)c * tw * th + (size_t)y * tw + x
                                               : ((size_t)y * tw + x) * 3 + c;
                            double dd = fabs(got[at] - want);
                            worst = dd > worst ? dd : worst;
                        }
                if (worst > 5e-3) /* the reference's 1e-3 on [0,1], over std ~0.22 */
                    fail_msg("format %zu bgr %d layout %d: max diff %g", fi, bgr, layout, worst);
                free(got);
                free(rgb);
                keyer_prepare_destroy(&prep);
                keyer_frame_destroy(&f);
            }
    /* std must be 0 (none) or positive */
    keyer_prepare_params p = keyer_prepare_params_defaults();
    p.std[1] = -0.5f;
    keyer_prepare *prep = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(prep);
    assert_non_null(strstr(err.message, "std"));
}

/* The mask of every output kind from a 3-channel output, against formulas in double. */
static void test_mask_kinds(void **state)
{
    (void)state;
    enum { CELLS = 7, C = 3 };
    const float src[CELLS * C] = {0.2f, 5, -5,  -3, 1, 2,   0.5f, 0.5f, 0.5f, 1.5f, -1, 0,
                                  -0.25f, 0, 9, 40, -40, 0, 0.99f, 0.1f, -0.1f};
    kr_segmodel m;
    memset(&m, 0, sizeof(m));
    m.mask_c = C;
    float dst[CELLS];
    for (int kind = 0; kind < 4; kind++) {
        m.kind = (keyer_mask_kind)kind;
        m.channel = kind == KEYER_MASK_CLASSES ? 2 : 0;
        kr_segmask_cpu(&m, dst, src, CELLS);
        for (int k = 0; k < CELLS; k++) {
            const float *s = src + k * C;
            double want;
            if (kind == KEYER_MASK_PROBABILITY) {
                want = s[0];
            } else if (kind == KEYER_MASK_LOGITS) {
                want = 1.0 / (1.0 + exp(-(double)s[0]));
            } else if (kind == KEYER_MASK_ALPHA) {
                want = s[0] < 0 ? 0 : s[0] > 1 ? 1 : s[0];
            } else {
                double sum = 0;
                for (int j = 0; j < C; j++)
                    sum += exp((double)s[j]);
                want = exp((double)s[2]) / sum;
            }
            if (fabs(dst[k] - want) > 1e-6)
                fail_msg("kind %d cell %d: %g, expected %g", kind, k, (double)dst[k], want);
            assert_true(kind == 0 || (dst[k] >= 0.0f && dst[k] <= 1.0f + 1e-6f));
        }
    }
    /* the same output as planes ([1,C,H,W]) gives the same masks */
    float planes[CELLS * C], again[CELLS];
    for (int k = 0; k < CELLS; k++)
        for (int j = 0; j < C; j++)
            planes[j * CELLS + k] = src[k * C + j];
    m.mask_planar = 1;
    for (int kind = 0; kind < 4; kind++) {
        m.kind = (keyer_mask_kind)kind;
        m.channel = kind == KEYER_MASK_CLASSES ? 1 : 0;
        m.mask_planar = 0;
        kr_segmask_cpu(&m, dst, src, CELLS);
        m.mask_planar = 1;
        kr_segmask_cpu(&m, again, planes, CELLS);
        assert_memory_equal(dst, again, sizeof(dst));
    }
    m.mask_planar = 0;
    /* one channel: a probability is the output itself, in place */
    float one[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    m.mask_c = 1;
    m.kind = KEYER_MASK_PROBABILITY;
    m.channel = 0;
    kr_segmask_cpu(&m, one, one, 4);
    assert_true(one[0] == 0.1f && one[3] == 0.4f);
}

/* A registry model without a person mask, and a TFLite model read through a description. */
static void test_segmodel_open(void **state)
{
    (void)state;
    kr_segmodel m;
    keyer_error err = {0};
    assert_int_equal(kr_segmodel_open(&m, "face-short", NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "no person mask"));
    assert_null(m.model);
    char path[1024];
    if (!kt_exists(kt_model_path(path, sizeof(path), "selfie_segmentation.tflite")))
        skip();
    /* selfie as a user's file: described as NHWC, probability, output by index */
    keyer_model_desc d = keyer_model_desc_defaults();
    d.layout = KEYER_TENSOR_LAYOUT_NHWC;
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_OK);
    assert_int_equal(m.in_w, 256);
    assert_int_equal(m.in_h, 256);
    assert_int_equal(m.mask_c, 1);
    assert_int_equal(m.output, 0);
    assert_null(m.entry);
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    kr_segmodel_prepare_params(&m, &pp);
    assert_int_equal(pp.width, 256);
    assert_int_equal(pp.fit, KEYER_FIT_STRETCH);
    kr_segmodel_close(&m);
    assert_null(m.model);
    /* unknown tensor names list the model's */
    snprintf(d.output, sizeof(d.output), "mask");
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "no output named 'mask'"));
    assert_non_null(strstr(err.message, "its outputs: '"));
    assert_null(m.model);
    d.output[0] = 0;
    snprintf(d.input, sizeof(d.input), "image");
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "no input named 'image'"));
    d.input[0] = 0;
    /* classes need one channel per class; the size must match a static model's */
    d.output_kind = KEYER_MASK_CLASSES;
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "one channel"));
    d.output_kind = KEYER_MASK_PROBABILITY;
    d.width = 320;
    d.height = 320;
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "256x256"));
    d.width = d.height = 0;
    d.layout = KEYER_TENSOR_LAYOUT_NCHW; /* wrong for a TFLite file */
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "layout nchw"));
    assert_int_equal(kr_segmodel_open(&m, path, NULL, &err), KEYER_OK); /* undescribed: NHWC */
    assert_int_equal(m.desc.layout, KEYER_TENSOR_LAYOUT_NHWC);
    kr_segmodel_close(&m);
    d.layout = KEYER_TENSOR_LAYOUT_NHWC;
    d.output_index = 3;
    assert_int_equal(kr_segmodel_open(&m, path, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "no output 3"));
}

/* The keying object with a description: the selfie file read as logits gives the sigmoid of
 * the registry model's mask, cell by cell. */
static void test_keying_desc(void **state)
{
    (void)state;
    char path[1024], photo[1024];
    if (!kt_exists(kt_model_path(path, sizeof(path), "selfie_segmentation.tflite")))
        skip();
    keyer_error err = {0};
    keyer_frame *img = NULL;
    assert_int_equal(keyer_frame_create(&img, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(kt_data_path(photo, sizeof(photo), "grace_hopper.jpg"),
                                      KEYER_PIXEL_FORMAT_RGB24, img, &err),
                     KEYER_OK);
    keyer_keying_params kp = keyer_keying_params_defaults();
    kp.model = "selfie";
    kp.threads = 1;
    keyer_keying *a = NULL, *b = NULL;
    assert_int_equal(keyer_keying_create(&kp, &a, &err), KEYER_OK);
    keyer_model_desc d = keyer_model_desc_defaults();
    d.layout = KEYER_TENSOR_LAYOUT_NHWC;
    d.output_kind = KEYER_MASK_LOGITS;
    kp.model = path;
    kp.model_desc = &d;
    assert_int_equal(keyer_keying_create(&kp, &b, &err), KEYER_OK);
    d.output_kind = KEYER_MASK_ALPHA; /* the object keeps its own copy */
    assert_int_equal(keyer_keying_process(a, img, NULL, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_keying_process(b, img, NULL, NULL, &err), KEYER_OK);
    const keyer_frame *ma = keyer_keying_mask(a), *mb = keyer_keying_mask(b);
    assert_non_null(ma);
    assert_non_null(mb);
    assert_int_equal(ma->width, mb->width);
    assert_int_equal(ma->height, mb->height);
    double worst = 0;
    for (int y = 0; y < ma->height; y++)
        for (int x = 0; x < ma->width; x++) {
            float va = ((const float *)(ma->data[0] + (size_t)y * (size_t)ma->stride[0]))[x];
            float vb = ((const float *)(mb->data[0] + (size_t)y * (size_t)mb->stride[0]))[x];
            double dd = fabs(vb - 1.0 / (1.0 + exp(-(double)va)));
            worst = dd > worst ? dd : worst;
        }
    assert_true(worst < 1e-6);
    keyer_keying_destroy(&a);
    keyer_keying_destroy(&b);
    keyer_frame_destroy(&img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_registry),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_yaml),
        cmocka_unit_test(test_prepare_mean_std_bgr),
        cmocka_unit_test(test_mask_kinds),
        cmocka_unit_test(test_segmodel_open),
        cmocka_unit_test(test_keying_desc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
