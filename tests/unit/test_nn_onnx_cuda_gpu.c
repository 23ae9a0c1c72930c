/*
 * u2netp (the ONNX segmentation model of models/manifest.tsv) on the cuda backend against the
 * reference backend (double-precision sums; itself checked against ONNX Runtime's outputs by
 * the ONNX tests; about half a minute per run), on a synthetic 320 x 320 picture (smooth
 * gradients and a bright disc, every item of a batch different).
 *
 *  float32: every output within 1e-3 * max(1, |ref|) of the reference backend's (the outputs are
 *           sigmoids in [0, 1]), at batch 1 and 2, with the AUTO schedule (the per-node
 *           kernels: 19.8 G multiply-adds a frame is far above AUTO's persistent limit) and
 *           KERNELS.
 *  float16: every output (all are masks in [0, 1]) thresholded at 0.5 agrees with the
 *           reference backend's on >= 99.5% of the pixels with a mean absolute difference
 *           <= 5e-3 (the ONNX and precision issues' bounds; the max abs is printed: half
 *           storage moves a few outline pixels of this 7-level U-Net by up to ~0.1).
 *  batch:   item b of a batch-2 run equals a batch-1 run of that item, bit for bit, in f32 and
 *           f16 (the kernels' summation order does not depend on the batch).
 *  branches: the per-node schedule with the units off the critical path on a second stream
 *           (src/nn/cuda/branches.h, the default) gives the serial order's outputs
 *           (KEYER_CUDA_BRANCHES=0) bit for bit, f32 and f16, batch 1 and 2, AUTO schedule;
 *           so do face-short and face-full (their detector heads branch) on the KERNELS
 *           schedule at batch 32, f32 and f16, when their files are there.
 *  persistent: asked for explicitly, the persistent schedule refuses the model (UNSUPPORTED:
 *           its concatenations along the channels), naming why.
 *
 * Label gpu (file name *_gpu.c); exits 77 without a CUDA device or without the model file.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "keyer/registry.h"
#include "kt_gpu.h"
#include "testutil.h"

#define U2_FILE "u2netp.onnx"
#define U2_SIZE 320
#define U2_MAX_OUT 8

typedef struct {
    int n;
    float *out[U2_MAX_OUT];
    size_t bytes[U2_MAX_OUT];
} outputs;

static void outputs_free(outputs *o)
{
    for (int i = 0; i < o->n; i++)
        free(o->out[i]);
    memset(o, 0, sizeof(*o));
}

/* Item @p b of the synthetic input, NHWC [320][320][3] in the model's normalised range. */
static void make_item(float *x, int b)
{
    const float cx = 140.0f + 30.0f * (float)b, cy = 170.0f - 20.0f * (float)b, r = 90.0f;
    for (int y = 0; y < U2_SIZE; y++)
        for (int xx = 0; xx < U2_SIZE; xx++) {
            float d = sqrtf((xx - cx) * (xx - cx) + (y - cy) * (y - cy));
            float disc = d < r ? 1.0f : 0.0f;
            for (int c = 0; c < 3; c++) {
                float v = 0.3f * (float)xx / U2_SIZE + 0.2f * (float)y / U2_SIZE * (float)(c + 1) +
                          0.8f * disc - 0.1f * (float)c;
                x[((size_t)y * U2_SIZE + xx) * 3 + c] = (v - 0.45f) / 0.226f;
            }
        }
}

/* Runs @p model at @p batch on items first..first+batch-1. Returns the status of the runtime's
 * creation (the outputs are filled only for KEYER_OK); @p why gets the message. */
static keyer_status run(const keyer_model *model, keyer_backend backend, keyer_precision prec,
                        keyer_cuda_schedule schedule, int batch, int first, outputs *o,
                        char *why, size_t why_cap)
{
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = backend;
    p.precision = prec;
    p.batch = batch;
    p.cuda_schedule = schedule;
    keyer_runtime *rt = NULL;
    keyer_error err = {0};
    keyer_status st = keyer_runtime_create(model, &p, &rt, &err);
    if (st != KEYER_OK) {
        snprintf(why, why_cap, "%s", err.message);
        return st;
    }
    size_t in_bytes = keyer_runtime_input_bytes(rt, 0);
    size_t item = (size_t)U2_SIZE * U2_SIZE * 3;
    assert_int_equal(in_bytes, item * sizeof(float) * (size_t)batch);
    float *x = malloc(in_bytes);
    assert_non_null(x);
    for (int b = 0; b < batch; b++)
        make_item(x + item * (size_t)b, first + b);
    assert_int_equal(keyer_runtime_set_input(rt, 0, x, in_bytes, &err), KEYER_OK);
    free(x);
    if (keyer_runtime_run(rt, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    o->n = keyer_model_output_count(model);
    assert_true(o->n >= 1 && o->n <= U2_MAX_OUT);
    for (int i = 0; i < o->n; i++) {
        o->bytes[i] = keyer_runtime_output_bytes(rt, i);
        o->out[i] = malloc(o->bytes[i]);
        assert_non_null(o->out[i]);
        assert_int_equal(keyer_runtime_get_output(rt, i, o->out[i], o->bytes[i], &err), KEYER_OK);
    }
    keyer_runtime_destroy(&rt);
    return KEYER_OK;
}

static void run_ok(const keyer_model *model, keyer_backend backend, keyer_precision prec,
                   keyer_cuda_schedule schedule, int batch, int first, outputs *o)
{
    char why[512];
    if (run(model, backend, prec, schedule, batch, first, o, why, sizeof(why)) != KEYER_OK)
        fail_msg("%s", why);
}

static keyer_model *load_u2netp(void)
{
    char path[1024];
    kt_model_path(path, sizeof(path), U2_FILE);
    keyer_model *model = NULL;
    keyer_error err = {0};
    if (keyer_model_load_file(path, &model, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    return model;
}

/* Output @p i of item @p b of @p batched against output @p i of @p one (batch 1). */
static void check_bitwise(const outputs *batched, int b, const outputs *one, const char *what)
{
    for (int i = 0; i < one->n; i++) {
        size_t n = one->bytes[i];
        assert_int_equal(batched->bytes[i], n * 2);
        if (memcmp((const char *)batched->out[i] + n * (size_t)b, one->out[i], n) != 0)
            fail_msg("%s: output %d of item %d differs from its batch-1 run", what, i, b);
    }
}

static void compare(const outputs *got, const outputs *want, int f16, const char *what)
{
    assert_int_equal(got->n, want->n);
    for (int i = 0; i < want->n; i++) {
        assert_int_equal(got->bytes[i], want->bytes[i]);
        size_t n = want->bytes[i] / sizeof(float), agree = 0;
        double max_abs = 0, max_rel = 0, sum = 0;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)got->out[i][k] - want->out[i][k]);
            if (isnan(d))
                d = INFINITY;
            max_abs = fmax(max_abs, d);
            sum += d;
            max_rel = fmax(max_rel, d / fmax(1.0, fabs((double)want->out[i][k])));
            agree += (got->out[i][k] >= 0.5f) == (want->out[i][k] >= 0.5f);
        }
        double agreement = (double)agree / (double)n;
        double mean = sum / (double)n;
        printf("  %s output %d: max abs %.3g, max rel %.3g, mean abs %.3g, mask agreement %.5f\n",
               what, i, max_abs, max_rel, mean, agreement);
        if (f16) {
            assert_true(mean <= 5e-3);
            assert_true(agreement >= 0.995);
        } else {
            assert_true(max_rel <= 1e-3);
        }
    }
}

static void test_u2netp(void **state)
{
    (void)state;
    keyer_model *model = load_u2netp();
    outputs ref[2] = {{0}}, one = {0}, two = {0};
    run_ok(model, KEYER_BACKEND_REFERENCE, KEYER_PRECISION_F32, KEYER_CUDA_SCHEDULE_AUTO, 1, 0,
           &ref[0]);
    run_ok(model, KEYER_BACKEND_REFERENCE, KEYER_PRECISION_F32, KEYER_CUDA_SCHEDULE_AUTO, 1, 1,
           &ref[1]);
    static const keyer_cuda_schedule schedules[] = {KEYER_CUDA_SCHEDULE_AUTO,
                                                    KEYER_CUDA_SCHEDULE_KERNELS};
    for (int f16 = 0; f16 <= 1; f16++)
        for (int s = 0; s < 2; s++) {
            keyer_precision prec = f16 ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32;
            char what[64];
            snprintf(what, sizeof(what), "cuda %s %s", f16 ? "f16" : "f32",
                     s ? "kernels" : "auto");
            run_ok(model, KEYER_BACKEND_CUDA, prec, schedules[s], 1, 0, &one);
            compare(&one, &ref[0], f16, what);
            run_ok(model, KEYER_BACKEND_CUDA, prec, schedules[s], 2, 0, &two);
            check_bitwise(&two, 0, &one, what);
            outputs_free(&one);
            run_ok(model, KEYER_BACKEND_CUDA, prec, schedules[s], 1, 1, &one);
            compare(&one, &ref[1], f16, what);
            check_bitwise(&two, 1, &one, what);
            outputs_free(&one);
            outputs_free(&two);
        }
    outputs_free(&ref[0]);
    outputs_free(&ref[1]);
    keyer_model_destroy(&model);
}

/* Outputs of @p a and @p b equal byte for byte. */
static void check_same(const outputs *a, const outputs *b, const char *what)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_int_equal(a->bytes[i], b->bytes[i]);
        if (memcmp(a->out[i], b->out[i], a->bytes[i]) != 0) {
            size_t n = a->bytes[i] / sizeof(float), diff = 0, first = 0;
            double max_abs = 0;
            for (size_t k = 0; k < n; k++)
                if (memcmp(&a->out[i][k], &b->out[i][k], sizeof(float)) != 0) {
                    first = diff++ ? first : k;
                    max_abs = fmax(max_abs, fabs((double)a->out[i][k] - b->out[i][k]));
                }
            fail_msg("%s: output %d differs between the branched and the serial order: %zu of "
                     "%zu values, the first at %zu (%.9g against %.9g), max abs %.3g",
                     what, i, diff, n, first, (double)a->out[i][first],
                     (double)b->out[i][first], max_abs);
        }
    }
}

static void test_u2netp_branches(void **state)
{
    (void)state;
    keyer_model *model = load_u2netp();
    for (int f16 = 0; f16 <= 1; f16++)
        for (int batch = 1; batch <= 2; batch++) {
            keyer_precision prec = f16 ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32;
            outputs branched = {0}, serial = {0};
            char what[64];
            snprintf(what, sizeof(what), "cuda %s batch %d", f16 ? "f16" : "f32", batch);
            unsetenv("KEYER_CUDA_BRANCHES");
            run_ok(model, KEYER_BACKEND_CUDA, prec, KEYER_CUDA_SCHEDULE_AUTO, batch, 0,
                   &branched);
            setenv("KEYER_CUDA_BRANCHES", "0", 1);
            run_ok(model, KEYER_BACKEND_CUDA, prec, KEYER_CUDA_SCHEDULE_AUTO, batch, 0, &serial);
            unsetenv("KEYER_CUDA_BRANCHES");
            check_same(&branched, &serial, what);
            printf("  %s: branched = serial, %d outputs\n", what, branched.n);
            outputs_free(&branched);
            outputs_free(&serial);
        }
    keyer_model_destroy(&model);
}

/* Model @p name (registry) on the KERNELS schedule at @p batch, every input filled with a
 * deterministic pattern, branched and serial: equal byte for byte. Skipped without the file. */
static void check_model_branches(const char *name, keyer_precision prec, int batch)
{
    char path[1024];
    keyer_error err = {0};
    keyer_model *model = NULL;
    if (keyer_registry_resolve(name, path, sizeof(path), &err) != KEYER_OK ||
        keyer_model_load_file(path, &model, &err) != KEYER_OK) {
        printf("  %s: not available (%s), skipped\n", name, err.message);
        return;
    }
    outputs o[2] = {{0}};
    for (int serial = 0; serial <= 1; serial++) {
        if (serial)
            setenv("KEYER_CUDA_BRANCHES", "0", 1);
        keyer_runtime_params p = keyer_runtime_params_defaults();
        p.backend = KEYER_BACKEND_CUDA;
        p.precision = prec;
        p.batch = batch;
        p.cuda_schedule = KEYER_CUDA_SCHEDULE_KERNELS;
        keyer_runtime *rt = NULL;
        if (keyer_runtime_create(model, &p, &rt, &err) != KEYER_OK)
            fail_msg("%s", err.message);
        unsetenv("KEYER_CUDA_BRANCHES");
        for (int i = 0; i < keyer_model_input_count(model); i++) {
            size_t bytes = keyer_runtime_input_bytes(rt, i);
            float *x = malloc(bytes);
            assert_non_null(x);
            for (size_t k = 0; k < bytes / sizeof(float); k++)
                x[k] = (float)((k * 2654435761u + (size_t)i * 97u) % 2001u) / 1000.0f - 1.0f;
            assert_int_equal(keyer_runtime_set_input(rt, i, x, bytes, &err), KEYER_OK);
            free(x);
        }
        if (keyer_runtime_run(rt, &err) != KEYER_OK)
            fail_msg("%s", err.message);
        o[serial].n = keyer_model_output_count(model);
        assert_true(o[serial].n >= 1 && o[serial].n <= U2_MAX_OUT);
        for (int i = 0; i < o[serial].n; i++) {
            o[serial].bytes[i] = keyer_runtime_output_bytes(rt, i);
            o[serial].out[i] = malloc(o[serial].bytes[i]);
            assert_non_null(o[serial].out[i]);
            assert_int_equal(keyer_runtime_get_output(rt, i, o[serial].out[i], o[serial].bytes[i],
                                                      &err),
                             KEYER_OK);
        }
        keyer_runtime_destroy(&rt);
    }
    char what[96];
    snprintf(what, sizeof(what), "%s %s batch %d", name,
             prec == KEYER_PRECISION_F16 ? "f16" : "f32", batch);
    check_same(&o[0], &o[1], what);
    printf("  %s: branched = serial, %d outputs\n", what, o[0].n);
    outputs_free(&o[0]);
    outputs_free(&o[1]);
    keyer_model_destroy(&model);
}

static void test_tflite_branches(void **state)
{
    (void)state;
    const char *names[] = {"face-short", "face-full"};
    for (int k = 0; k < 2; k++)
        for (int f16 = 0; f16 <= 1; f16++)
            check_model_branches(names[k], f16 ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32, 32);
}

static void test_persistent_refuses(void **state)
{
    (void)state;
    keyer_model *model = load_u2netp();
    outputs o = {0};
    char why[512];
    for (int f16 = 0; f16 <= 1; f16++) {
        keyer_status st = run(model, KEYER_BACKEND_CUDA, f16 ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32,
                              KEYER_CUDA_SCHEDULE_PERSISTENT, 1, 0, &o, why, sizeof(why));
        printf("  persistent %s: %s\n", f16 ? "f16" : "f32", st ? why : "ran");
        assert_int_equal(st, KEYER_STATUS_UNSUPPORTED);
    }
    keyer_model_destroy(&model);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "test_nn_onnx_cuda_gpu: no CUDA device, skipped\n");
        return 77;
    }
    char path[1024];
    kt_model_path(path, sizeof(path), U2_FILE);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "test_nn_onnx_cuda_gpu: %s absent (scripts/setup.sh fetches it), skipped\n",
                path);
        return 77;
    }
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u2netp),
        cmocka_unit_test(test_u2netp_branches),
        cmocka_unit_test(test_tflite_branches),
        cmocka_unit_test(test_persistent_refuses),
    };
    kt_gpu_apply_filter(); /* KEYER_TEST_FILTER: one case */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
