/* u2netp as the keying chain runs it, against ONNX Runtime (tests/data/onnx/u2netp/, made as
 * U-2-Net's own inference code makes its input; PROVENANCE.md there):
 *  - the input tensor keyer prepares from the registry's description (stretch to 320x320,
 *    pixel / 255, ImageNet mean and std, RGB) against U-2-Net's input.f32, converted from the
 *    file's NCHW with the model's layout helper: the two resize filters differ (keyer's
 *    bilinear with area averaging, scikit-image 0.14's bilinear) and U-2-Net divides by the
 *    image's maximum where keyer divides by 255, so the tolerance is a few code values;
 *  - the person mask of the keying object (reference backend) against ONNX Runtime's d1
 *    ('1959') on the same photo: agreement at 0.5 and the mean absolute difference.
 * Skipped when models/u2netp.onnx is absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/keyer.h"
#include "testutil.h"
#include "vision/segmodel.h"

#define S 320

static float *read_f32(const char *photo, const char *name, size_t count)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof(rel), "onnx/u2netp/%s/%s", photo, name);
    kt_data_path(path, sizeof(path), rel);
    size_t size = 0, n = 0, len = strlen(name);
    float *p;
    if (len > 4 && !strcmp(name + len - 4, ".f16")) { /* exact binary16 values */
        p = kt_read_f16_file(path, &n);
        size = n * sizeof(float);
    } else {
        p = kt_read_file(path, &size);
    }
    if (!p || size != count * sizeof(float))
        fail_msg("%s: missing or %zu bytes (expected %zu)", path, size, count * sizeof(float));
    return p;
}

/* Input tolerance: the mean |difference| over the tensor, and the fraction of elements more
 * than 0.2 apart (about 12 code values: edges where the resize filters differ most). */
static void check_photo(const char *photo, double mean_input_diff, double far_fraction)
{
    char path[1024], file[256];
    if (!kt_exists(kt_model_path(path, sizeof(path), "u2netp.onnx")))
        skip();
    keyer_error err = {0};
    kr_segmodel m;
    if (kr_segmodel_open(&m, "u2netp", NULL, &err))
        fail_msg("%s", err.message);
    assert_int_equal(m.in_w, S);
    assert_int_equal(m.in_h, S);
    assert_int_equal(m.mask_w, S);
    assert_int_equal(m.mask_c, 1);
    assert_int_equal(m.output, 0);
    keyer_tensor_info in;
    assert_int_equal(keyer_model_input_info(m.model, 0, &in, &err), KEYER_OK);
    assert_string_equal(in.name, "input.1");

    snprintf(file, sizeof(file), "%s.jpg", photo);
    keyer_frame *img = NULL;
    assert_int_equal(keyer_frame_create(&img, &err), KEYER_OK);
    if (keyer_image_read(kt_data_path(path, sizeof(path), file), KEYER_PIXEL_FORMAT_RGB24, img,
                         &err))
        fail_msg("%s", err.message);

    /* the input tensor */
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    kr_segmodel_prepare_params(&m, &pp);
    pp.threads = 1;
    keyer_prepare *prep = NULL;
    assert_int_equal(keyer_prepare_create(&pp, &prep, &err), KEYER_OK);
    size_t n = (size_t)S * S * 3;
    float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    assert_non_null(got);
    assert_non_null(want);
    const keyer_frame *frames[1] = {img};
    assert_int_equal(keyer_prepare_run(prep, frames, NULL, 1, got, NULL, &err), KEYER_OK);
    float *nchw = read_f32(photo, "input.f16", n);
    assert_int_equal(keyer_tensor_to_graph_layout(&in, 1, nchw, want, &err), KEYER_OK);
    double worst = 0, sum = 0;
    size_t far = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        worst = d > worst ? d : worst;
        sum += d;
        far += d > 0.2;
    }
    print_message("%s input: mean |keyer - U-2-Net| %.5f, max %.4f, %.5f of the values more than "
                  "0.2 apart (std-normalised units)\n",
                  photo, sum / (double)n, worst, (double)far / (double)n);
    assert_true(sum / (double)n < mean_input_diff);
    assert_true((double)far / (double)n < far_fraction);
    kr_segmodel_close(&m);

    /* the mask through the keying object, reference backend */
    keyer_keying_params kp = keyer_keying_params_defaults();
    kp.model = "u2netp";
    kp.backend = KEYER_BACKEND_REFERENCE;
    kp.threads = 2;
    keyer_keying *k = NULL;
    if (keyer_keying_create(&kp, &k, &err))
        fail_msg("%s", err.message);
    assert_int_equal(keyer_keying_process(k, img, NULL, NULL, &err), KEYER_OK);
    const keyer_frame *mask = keyer_keying_mask(k);
    assert_non_null(mask);
    assert_int_equal(mask->width, S);
    assert_int_equal(mask->height, S);
    float *ort = read_f32(photo, "1959.f32", (size_t)S * S);
    size_t agree = 0;
    double mad = 0;
    for (int y = 0; y < S; y++) {
        const float *row = (const float *)(mask->data[0] + (size_t)y * (size_t)mask->stride[0]);
        for (int x = 0; x < S; x++) {
            float a = row[x], b = ort[(size_t)y * S + x];
            agree += (a >= 0.5f) == (b >= 0.5f);
            mad += fabs((double)a - b);
        }
    }
    double frac = (double)agree / (S * S);
    mad /= S * S;
    print_message("%s mask: %.4f of the pixels agree at 0.5, mean |keyer - ORT| %.5f\n", photo,
                  frac, mad);
    assert_true(frac > 0.99);
    assert_true(mad < 0.01);
    keyer_keying_destroy(&k);
    free(ort);
    free(nchw);
    free(got);
    free(want);
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&img);
}

static void test_grace_hopper(void **state)
{
    (void)state;
    check_photo("grace_hopper", 0.03, 0.01);
}

static void test_messi5(void **state)
{
    (void)state;
    check_photo("messi5", 0.03, 0.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grace_hopper),
        cmocka_unit_test(test_messi5),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
