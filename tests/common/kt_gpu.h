/*
 * What the GPU tests (tests/unit/test_*_gpu.c, ctest label gpu) share in main(): the skip
 * on a machine without a CUDA device, the one-case filter and the short mode that
 * compute-sanitizer runs use.
 *
 *     int main(void)
 *     {
 *         const struct CMUnitTest tests[] = {cmocka_unit_test(test_a), cmocka_unit_test(test_b)};
 *         return KT_GPU_RUN_GROUP(tests, setup, teardown);
 *     }
 *
 * Environment:
 *  - KEYER_TEST_FILTER: a cmocka pattern ("test_a", "test_*_f32"): only the matching tests
 *    run (one case per compute-sanitizer process keeps each run short);
 *  - KEYER_TEST_SHORT=1: the tests that document a short mode run less of it (fewer frames,
 *    streams or sizes), with the same checks on what runs (for compute-sanitizer, whose
 *    racecheck and memcheck multiply a kernel's time by 10 to 100);
 *  - KEYER_TEST_MODELS: model names separated by commas ("selfie,face-mesh"): the tests that
 *    loop over models (test_nn_cuda_gpu's test_models and test_auto_batch_limits) run only the
 *    listed ones (kt_test_model), and skip when none of theirs is listed (one model per
 *    compute-sanitizer process: every model at full size is too long for one run).
 */
#ifndef KEYER_KT_GPU_H
#define KEYER_KT_GPU_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/** The exit status of a skipped test (ctest's SKIP_RETURN_CODE in tests/CMakeLists.txt). */
#define KT_SKIPPED 77

/**
 * Runs the GPU test group @p tests (@p count of them, named @p name in cmocka's output) with
 * the group fixtures @p setup and @p teardown (either may be NULL) when keyer's CUDA device
 * table (core/device.h) counts at least one device, after applying KEYER_TEST_FILTER.
 * Without a device (a build or a machine without CUDA) prints "no CUDA device: skipped" on
 * stdout and returns KT_SKIPPED, running nothing. Otherwise returns cmocka's result (0 when
 * every test that ran passed).
 */
int kt_gpu_run_group(const char *name, const struct CMUnitTest *tests, size_t count,
                     CMFixtureFunction setup, CMFixtureFunction teardown);

/** kt_gpu_run_group() of the array @p tests, named as cmocka_run_group_tests() names it. */
#define KT_GPU_RUN_GROUP(tests, setup, teardown)                                               \
    kt_gpu_run_group(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

/**
 * Applies KEYER_TEST_FILTER (above) to the next cmocka group run, when it is set and not empty;
 * for the GPU tests whose main() runs cmocka_run_group_tests() itself (kt_gpu_run_group() calls
 * it).
 */
void kt_gpu_apply_filter(void);

/** 1 when KEYER_TEST_SHORT is "1" in the environment (the short mode above), else 0. */
int kt_test_short(void);

/**
 * 1 when @p model is to run: KEYER_TEST_MODELS (above) is unset or empty, or lists @p model
 * (an exact name between commas); else 0.
 */
int kt_test_model(const char *model);

#endif
