/*
 * Device capabilities and emulated compute capabilities on a real device (ctest label gpu):
 *  - the device table's caps slot agrees with cudaGetDeviceProperties (compute capability,
 *    multiprocessors, shared memory per block with opt-in and per multiprocessor, threads);
 *  - KEYER_CUDA_EMULATE_CC set in the process: every older class keyer knows below the device's
 *    own is accepted and lowers the limits to the class's (never raises them), clusters only
 *    from 9.0; a bad value, or a class newer than the device, makes keyer_runtime_create fail
 *    with INVALID_ARGUMENT naming the variable;
 *  - the schedule each class gets: selfie with PERSISTENT runs with its cluster segment only
 *    on a device with clusters that is not emulating an older class ("persistent+cluster"),
 *    else the plain persistent kernel; KERNELS is "per-node" everywhere;
 *  - results: an item's result does not depend on the device within a schedule (keyer/nn.h),
 *    so selfie, selfie-landscape and face-short give the same outputs bit for bit under every
 *    emulated class as on the device itself, per node (the pointwise tile path then fits a
 *    smaller shared memory or gives way to the kernel whose order it keeps) and with the
 *    persistent kernel without segment (fewer blocks per multiprocessor), f32 and f16; with
 *    the emulation, PERSISTENT equals the device's PERSISTENT_GRID bit for bit;
 *  - KEYER_CUDA_SCHEDULE replaces an asked AUTO (keyer/nn.h): selfie at batch 1 (AUTO: the
 *    persistent kernel, with its segment on a device with clusters) runs per node under
 *    "kernels" and as the plain persistent kernel under "persistent-grid"; a schedule asked by
 *    name stays; a bad value is refused naming the variable and the value (the variable's value
 *    when the test starts is restored at its end: compute-sanitizer's runs set it).
 * Exits 77 without a CUDA device. KEYER_TEST_FILTER (tests/common/kt_gpu.h) runs only the
 * matching cases.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/gpu_caps.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/schedule_choice.h"
#include "kt_gpu.h"

static const char *const classes[] = {"7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0"};
#define N_CLASSES (int)(sizeof(classes) / sizeof(classes[0]))

static void test_caps_match_properties(void **state)
{
    (void)state;
    unsetenv(KR_GPU_EMULATE_ENV);
    const kr_device_fns *dev = kr_device_cuda();
    assert_non_null(dev);
    kr_gpu_caps c;
    keyer_error err = {0};
    assert_int_equal(dev->caps(0, 1, &c, &err), KEYER_OK);
    struct cudaDeviceProp prop;
    assert_int_equal(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    assert_int_equal(c.major, prop.major);
    assert_int_equal(c.minor, prop.minor);
    assert_int_equal(c.emulated, 0);
    assert_int_equal(c.sms, prop.multiProcessorCount);
    assert_int_equal(c.smem_block, prop.sharedMemPerBlock);
    assert_int_equal(c.smem_block_optin, prop.sharedMemPerBlockOptin);
    assert_int_equal(c.smem_sm, prop.sharedMemPerMultiprocessor);
    assert_int_equal(c.threads_sm, prop.maxThreadsPerMultiProcessor);
    assert_int_equal(c.regs_sm, prop.regsPerMultiprocessor);
    char line[400];
    kr_gpu_caps_describe(&c, line, sizeof(line));
    printf("device 0, %s: %s\n", prop.name, line);
    /* the class table agrees with the device where it knows the device's class */
    kr_gpu_caps cls;
    if (kr_gpu_class_limits(c.major, c.minor, &cls)) {
        assert_int_equal(cls.smem_block_optin, c.smem_block_optin);
        assert_int_equal(cls.smem_sm, c.smem_sm);
        assert_int_equal(cls.threads_sm, c.threads_sm);
        assert_int_equal(cls.blocks_sm, c.blocks_sm);
    }
}

static void test_emulated_limits(void **state)
{
    (void)state;
    const kr_device_fns *dev = kr_device_cuda();
    kr_gpu_caps real, c;
    keyer_error err = {0};
    unsetenv(KR_GPU_EMULATE_ENV);
    assert_int_equal(dev->caps(0, 1, &real, &err), KEYER_OK);
    int emulated = 0;
    for (int i = 0; i < N_CLASSES; i++) {
        setenv(KR_GPU_EMULATE_ENV, classes[i], 1);
        kr_gpu_caps cls;
        int ma = 0, mi = 0;
        assert_int_equal(kr_gpu_emulate_parse(classes[i], "class", &ma, &mi, NULL), KEYER_OK);
        assert_int_equal(kr_gpu_class_limits(ma, mi, &cls), 1);
        keyer_status st = dev->caps(0, 1, &c, &err);
        if (ma * 10 + mi > real.major * 10 + real.minor) {
            assert_int_equal(st, KEYER_STATUS_INVALID_ARGUMENT);
            assert_non_null(strstr(err.message, KR_GPU_EMULATE_ENV));
            printf("%s: refused (%s)\n", classes[i], err.message);
            continue;
        }
        assert_int_equal(st, KEYER_OK);
        assert_int_equal(c.major, ma);
        assert_int_equal(c.minor, mi);
        assert_true(c.smem_block_optin <= cls.smem_block_optin);
        assert_true(c.smem_block_optin <= real.smem_block_optin);
        assert_true(c.smem_sm <= cls.smem_sm);
        assert_true(c.threads_sm <= cls.threads_sm);
        assert_int_equal(c.sms, real.sms);
        assert_int_equal(kr_gpu_has_clusters(&c), ma >= 9 && real.cluster_launch);
        emulated += c.emulated;
        printf("%s: accepted\n", classes[i]);
    }
    unsetenv(KR_GPU_EMULATE_ENV);
    printf("%d older classes emulated on this %d.%d device\n", emulated, real.major, real.minor);
}

static keyer_model *load(const char *name)
{
    char path[1024];
    keyer_error err = {0};
    assert_int_equal(keyer_registry_resolve(name, path, sizeof(path), &err), KEYER_OK);
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err))
        fail_msg("%s", err.message);
    return m;
}

/* Creates @p m's runtime with @p prec and @p schedule at batch 2 under the current
 * KEYER_CUDA_EMULATE_CC, runs it on @p x and returns its outputs concatenated (malloc'd, *bytes)
 * and its schedule's name in @p sched; NULL (printing why) when a persistent schedule cannot
 * run the model. */
static unsigned char *run(const keyer_model *m, keyer_precision prec, keyer_cuda_schedule schedule,
                          const float *x, size_t *bytes, char *sched, size_t sched_size)
{
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    p.precision = prec;
    p.batch = 2;
    p.cuda_schedule = schedule;
    keyer_runtime *rt = NULL;
    keyer_error err = {0};
    keyer_status st = keyer_runtime_create(m, &p, &rt, &err);
    if (st == KEYER_STATUS_UNSUPPORTED && schedule != KEYER_CUDA_SCHEDULE_KERNELS) {
        printf("  %s\n", err.message);
        return NULL;
    }
    if (st)
        fail_msg("%s", err.message);
    snprintf(sched, sched_size, "%s", keyer_runtime_schedule(rt));
    assert_int_equal(keyer_runtime_set_input(rt, 0, x, keyer_runtime_input_bytes(rt, 0), &err),
                     KEYER_OK);
    if (keyer_runtime_run(rt, &err))
        fail_msg("%s", err.message);
    size_t total = 0;
    const int n = keyer_model_output_count(m);
    for (int i = 0; i < n; i++)
        total += keyer_runtime_output_bytes(rt, i);
    unsigned char *out = malloc(total);
    assert_non_null(out);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t b = keyer_runtime_output_bytes(rt, i);
        assert_int_equal(keyer_runtime_get_output(rt, i, (float *)(out + off), b, &err), KEYER_OK);
        off += b;
    }
    keyer_runtime_destroy(&rt);
    *bytes = total;
    return out;
}

static void test_emulated_schedules_and_results(void **state)
{
    (void)state;
    static const char *const models[] = {"selfie", "selfie-landscape", "face-short"};
    const kr_device_fns *dev = kr_device_cuda();
    kr_gpu_caps real;
    keyer_error err = {0};
    unsetenv(KR_GPU_EMULATE_ENV);
    assert_int_equal(dev->caps(0, 1, &real, &err), KEYER_OK);
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        keyer_model *m = load(models[mi]);
        keyer_tensor_info in;
        assert_int_equal(keyer_model_input_info(m, 0, &in, &err), KEYER_OK);
        const size_t in_bytes = 2 * sizeof(float) * (size_t)in.dims[1] * in.dims[2] * in.dims[3];
        float *x = malloc(in_bytes);
        assert_non_null(x);
        uint32_t s = 12345u + (uint32_t)mi; /* a fixed pseudo-random picture in [0, 1] */
        for (size_t i = 0; i < in_bytes / sizeof(float); i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)(s >> 8) / 16777216.0f;
        }
        int has_segment = strcmp(models[mi], "face-short") != 0; /* selfie, landscape */
        for (int prec = 0; prec < 2; prec++) {
            const keyer_precision pr = prec ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32;
            char sk[24], sg[24], sp[24], name[24];
            size_t bk = 0, bg = 0, bp = 0, b = 0;
            unsetenv(KR_GPU_EMULATE_ENV);
            unsigned char *kern = run(m, pr, KEYER_CUDA_SCHEDULE_KERNELS, x, &bk, sk, sizeof(sk));
            unsigned char *grid =
                run(m, pr, KEYER_CUDA_SCHEDULE_PERSISTENT_GRID, x, &bg, sg, sizeof(sg));
            unsigned char *pers = NULL;
            if (!grid) { /* the persistent kernel cannot run this model: per node only */
                has_segment = 0;
                sg[0] = 0;
            }
            if (has_segment) {
                pers = run(m, pr, KEYER_CUDA_SCHEDULE_PERSISTENT, x, &bp, sp, sizeof(sp));
                assert_non_null(pers);
                assert_string_equal(sp, kr_gpu_has_clusters(&real) ? "persistent+cluster"
                                                                   : "persistent");
                free(pers);
            }
            assert_string_equal(sk, "per-node");
            if (grid)
                assert_string_equal(sg, "persistent");
            for (int i = 0; i < N_CLASSES; i++) {
                int ma = 0, mi2 = 0;
                kr_gpu_emulate_parse(classes[i], "class", &ma, &mi2, NULL);
                if (ma * 10 + mi2 >= real.major * 10 + real.minor)
                    continue; /* only older classes */
                setenv(KR_GPU_EMULATE_ENV, classes[i], 1);
                unsigned char *o = run(m, pr, KEYER_CUDA_SCHEDULE_KERNELS, x, &b, name,
                                       sizeof(name));
                assert_string_equal(name, "per-node");
                assert_int_equal(b, bk);
                assert_memory_equal(o, kern, b);
                free(o);
                if (grid) {
                    o = run(m, pr, KEYER_CUDA_SCHEDULE_PERSISTENT_GRID, x, &b, name,
                            sizeof(name));
                    assert_non_null(o);
                    assert_string_equal(name, "persistent");
                    assert_int_equal(b, bg);
                    assert_memory_equal(o, grid, b);
                    free(o);
                }
                if (has_segment) { /* no clusters below 9.0: the plain persistent kernel */
                    o = run(m, pr, KEYER_CUDA_SCHEDULE_PERSISTENT, x, &b, name, sizeof(name));
                    assert_non_null(o);
                    assert_string_equal(name, "persistent");
                    assert_memory_equal(o, grid, b);
                    free(o);
                }
                printf("%s %s emulating %s: per-node%s identical to the device's\n", models[mi],
                       prec ? "f16" : "f32", classes[i], grid ? " and persistent" : "");
            }
            unsetenv(KR_GPU_EMULATE_ENV);
            free(kern);
            free(grid);
        }
        free(x);
        keyer_model_destroy(&m);
    }
}

static void test_bad_emulation_refused(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    static const char *const bad[] = {"turing", "6.1", "99"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv(KR_GPU_EMULATE_ENV, bad[i], 1);
        keyer_runtime *rt = NULL;
        keyer_error err = {0};
        assert_int_equal(keyer_runtime_create(m, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
        assert_null(rt);
        assert_non_null(strstr(err.message, KR_GPU_EMULATE_ENV));
        assert_non_null(strstr(err.message, bad[i]));
        printf("%s: %s\n", bad[i], err.message);
    }
    unsetenv(KR_GPU_EMULATE_ENV);
    keyer_model_destroy(&m);
}

/* keyer_runtime_schedule() of @p m's runtime at batch 1 asking @p asked with KEYER_CUDA_SCHEDULE
 * set to @p env (NULL: unset) into @p name; returns keyer_runtime_create()'s status. */
static keyer_status schedule_with_env(const keyer_model *m, keyer_cuda_schedule asked,
                                      const char *env, char *name, size_t size,
                                      keyer_error *err)
{
    if (env)
        setenv(KR_SCHEDULE_ENV, env, 1);
    else
        unsetenv(KR_SCHEDULE_ENV);
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    p.cuda_schedule = asked;
    keyer_runtime *rt = NULL;
    keyer_status st = keyer_runtime_create(m, &p, &rt, err);
    snprintf(name, size, "%s", keyer_runtime_schedule(rt));
    if (st)
        assert_null(rt);
    keyer_runtime_destroy(&rt);
    return st;
}

static void test_schedule_env(void **state)
{
    (void)state;
    const char *given = getenv(KR_SCHEDULE_ENV);
    char saved[64] = "";
    if (given)
        snprintf(saved, sizeof(saved), "%s", given);
    unsetenv(KR_GPU_EMULATE_ENV);
    const kr_device_fns *dev = kr_device_cuda();
    kr_gpu_caps real;
    keyer_error err = {0};
    assert_int_equal(dev->caps(0, 1, &real, &err), KEYER_OK);
    const char *pers = kr_gpu_has_clusters(&real) ? "persistent+cluster" : "persistent";
    keyer_model *m = load("selfie");
    static const struct {
        const char *env;
        keyer_cuda_schedule asked;
        int auto_schedule; /* 1: want AUTO's own choice (pers above) */
        const char *want;
    } cases[] = {
        {NULL, KEYER_CUDA_SCHEDULE_AUTO, 1, NULL},
        {"auto", KEYER_CUDA_SCHEDULE_AUTO, 1, NULL},
        {"", KEYER_CUDA_SCHEDULE_AUTO, 1, NULL},
        {"kernels", KEYER_CUDA_SCHEDULE_AUTO, 0, "per-node"},
        {"persistent-grid", KEYER_CUDA_SCHEDULE_AUTO, 0, "persistent"},
        {"kernels", KEYER_CUDA_SCHEDULE_PERSISTENT, 1, NULL},
        {"persistent", KEYER_CUDA_SCHEDULE_KERNELS, 0, "per-node"},
        {"fast", KEYER_CUDA_SCHEDULE_PERSISTENT_GRID, 0, "persistent"},
    };
    char name[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *want = cases[i].auto_schedule ? pers : cases[i].want;
        if (schedule_with_env(m, cases[i].asked, cases[i].env, name, sizeof(name), &err))
            fail_msg("KEYER_CUDA_SCHEDULE=%s, asked %d: %s", cases[i].env ? cases[i].env : "(unset)",
                     (int)cases[i].asked, err.message);
        printf("KEYER_CUDA_SCHEDULE=%s, asked %d: %s\n", cases[i].env ? cases[i].env : "(unset)",
               (int)cases[i].asked, name);
        assert_string_equal(name, want);
    }
    assert_int_equal(schedule_with_env(m, KEYER_CUDA_SCHEDULE_AUTO, "fast", name, sizeof(name),
                                       &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    printf("fast: %s\n", err.message);
    assert_non_null(strstr(err.message, "KEYER_CUDA_SCHEDULE=\"fast\""));
    if (given)
        setenv(KR_SCHEDULE_ENV, saved, 1);
    else
        unsetenv(KR_SCHEDULE_ENV);
    keyer_model_destroy(&m);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "test_gpu_caps_gpu: no CUDA device, skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps_match_properties),
        cmocka_unit_test(test_emulated_limits),
        cmocka_unit_test(test_emulated_schedules_and_results),
        cmocka_unit_test(test_bad_emulation_refused),
        cmocka_unit_test(test_schedule_env),
    };
    kt_gpu_apply_filter(); /* KEYER_TEST_FILTER: one case */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
