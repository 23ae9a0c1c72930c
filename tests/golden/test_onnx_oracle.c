/*
 * ONNX models on the reference and cpu backends against ONNX Runtime 1.30.0's outputs
 * (tests/data/onnx/, made by tests/onnx/make_graphs.py and u2netp_refs.py; PROVENANCE.md there):
 *  - every operator test graph of tests/data/onnx/manifest.tsv, inputs and outputs in the
 *    model's own layout (NCHW), converted by keyer's layout helpers;
 *  - U^2-NetP (models/u2netp.onnx) on both test photos: output '1959' in full, the six side
 *    outputs on an 8-pixel grid.
 * Tolerance per element: |keyer - ort| <= tol * max(1, |ort|), tol = 1e-4 on the reference
 * backend (it accumulates in double) and 1e-3 on cpu (XNNPACK accumulates in float); a case
 * whose data ONNX Runtime rounds to half (float16 models) states a higher floor in the manifest.
 * Every case prints its largest differences; the cuda backend's part is test_onnx_oracle_gpu.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>

#include "kt_onnx_oracle.h"

static void run_ops(keyer_backend backend, double tol)
{
    kt_onnx_target t = {backend, KEYER_PRECISION_F32, tol, 0, 2};
    int cases = 0;
    int failed = kt_onnx_run_ops(&t, &cases);
    assert_true(cases > 0);
    assert_int_equal(failed, 0);
}

static void run_u2netp(keyer_backend backend, double tol)
{
    kt_onnx_target t = {backend, KEYER_PRECISION_F32, tol, 0, 2};
    kt_u2netp_limits lim = {tol, 0, 0};
    int failed = kt_onnx_run_u2netp(&t, &lim);
    if (failed < 0)
        skip();
    assert_int_equal(failed, 0);
}

static void test_ops_reference(void **state)
{
    (void)state;
    run_ops(KEYER_BACKEND_REFERENCE, 1e-4);
}

static void test_ops_cpu(void **state)
{
    (void)state;
    run_ops(KEYER_BACKEND_CPU, 1e-3);
}

static void test_u2netp_reference(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    /* The reference backend takes about a minute per photo optimised; unoptimised under the
     * sanitizers it would outrun the test's time limit. The cpu run below goes through the same
     * loading, import and layout code, and the optimised build runs this one. */
    printf("u2netp on the reference backend: left to the build without sanitizers\n");
    skip();
#else
    run_u2netp(KEYER_BACKEND_REFERENCE, 1e-4);
#endif
}

static void test_u2netp_cpu(void **state)
{
    (void)state;
    run_u2netp(KEYER_BACKEND_CPU, 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_reference),
        cmocka_unit_test(test_ops_cpu),
        cmocka_unit_test(test_u2netp_reference),
        cmocka_unit_test(test_u2netp_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
