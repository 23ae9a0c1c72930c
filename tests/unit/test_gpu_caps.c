/*
 * Device capabilities and the cuda backend's choice of schedule on the CPU (no device needed):
 *  - the compute-capability classes' limits against the CUDA C++ Programming Guide's table
 *    "Technical Specifications per Compute Capability" (shared memory per block and per SM,
 *    threads and blocks per SM, clusters from 9.0), unknown classes refused;
 *  - parsing KEYER_CUDA_EMULATE_CC ("8.6", "86", "sm_86", "compute_80"), bad values refused
 *    with a message naming the variable, the value and the classes it accepts;
 *  - emulating an older class on an H100's capabilities: the class's limits where smaller,
 *    the device's multiprocessors, no clusters below 9.0; a newer class refused;
 *  - resident blocks per SM under each class's limits;
 *  - the schedule choice: AUTO's limits, the persistent kernel's and the cluster segment's
 *    refusals from the capabilities (an emulated 8.6 gets no cluster segment);
 *  - KEYER_CUDA_SCHEDULE: its names parsed, a bad value refused with a message naming the
 *    variable and the value, and only an asked AUTO replaced by it.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gpu_caps.h"
#include "keyer/nn.h"
#include "nn/cuda/tuning.h"
#include "nn/schedule_choice.h"

/* An H100 SXM as cudaDeviceGetAttribute reports it. */
static kr_gpu_caps h100(void)
{
    kr_gpu_caps c;
    memset(&c, 0, sizeof(c));
    c.major = c.real_major = 9;
    c.minor = c.real_minor = 0;
    c.sms = 132;
    c.smem_block = 49152;
    c.smem_block_optin = 232448;
    c.smem_sm = 233472;
    c.smem_reserved_block = 1024;
    c.regs_block = c.regs_sm = 65536;
    c.threads_block = 1024;
    c.threads_sm = 2048;
    c.blocks_sm = 32;
    c.cooperative_launch = 1;
    c.cluster_launch = 1;
    return c;
}

static void test_class_table(void **state)
{
    (void)state;
    /* {major, minor, opt-in KB per block, KB per SM, threads per SM, blocks per SM, clusters} */
    static const int rows[][7] = {
        {7, 5, 64, 64, 1024, 16, 0},   {8, 0, 163, 164, 2048, 32, 0},
        {8, 6, 99, 100, 1536, 16, 0},  {8, 7, 163, 164, 1536, 16, 0},
        {8, 9, 99, 100, 1536, 24, 0},  {9, 0, 227, 228, 2048, 32, 1},
        {10, 0, 227, 228, 2048, 32, 1}, {12, 0, 99, 128, 1536, 32, 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        kr_gpu_caps c;
        assert_int_equal(kr_gpu_class_limits(rows[i][0], rows[i][1], &c), 1);
        assert_int_equal(c.major, rows[i][0]);
        assert_int_equal(c.minor, rows[i][1]);
        assert_int_equal(c.smem_block_optin, (size_t)rows[i][2] * 1024);
        assert_int_equal(c.smem_sm, (size_t)rows[i][3] * 1024);
        assert_int_equal(c.threads_sm, rows[i][4]);
        assert_int_equal(c.blocks_sm, rows[i][5]);
        assert_int_equal(c.cluster_launch, rows[i][6]);
        assert_int_equal(c.smem_block, 49152);
        assert_int_equal(c.regs_sm, 65536);
        assert_int_equal(c.emulated, 0);
    }
    kr_gpu_caps c;
    assert_int_equal(kr_gpu_class_limits(7, 0, &c), 0); /* not built for (CUDA 13: sm_75+) */
    assert_int_equal(kr_gpu_class_limits(6, 1, &c), 0);
    assert_int_equal(kr_gpu_class_limits(9, 9, &c), 0);
}

static void test_parse(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        int major, minor;
    } good[] = {{"8.6", 8, 6}, {"86", 8, 6}, {"sm_86", 8, 6}, {"compute_80", 8, 0},
                {"7.5", 7, 5}, {"89", 8, 9}, {"10.0", 10, 0}, {"100", 10, 0},
                {"sm_120", 12, 0}, {"9.0", 9, 0}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        int ma = -1, mi = -1;
        keyer_error err = {0};
        assert_int_equal(kr_gpu_emulate_parse(good[i].spec, "X", &ma, &mi, &err), KEYER_OK);
        assert_int_equal(ma, good[i].major);
        assert_int_equal(mi, good[i].minor);
    }
    int ma = -1, mi = -1;
    assert_int_equal(kr_gpu_emulate_parse(NULL, "X", &ma, &mi, NULL), KEYER_OK);
    assert_int_equal(ma, 0);
    assert_int_equal(kr_gpu_emulate_parse("", "X", &ma, &mi, NULL), KEYER_OK);
    assert_int_equal(ma, 0);
    static const char *const bad[] = {"abc", "8.", "8.6x", "9.9", "6.1", "86.0", "-8.6",
                                      " 8.6", "8,6", "sm_", "7", "1234", "8.60", "sm_70"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        keyer_error err = {0};
        assert_int_equal(kr_gpu_emulate_parse(bad[i], KR_GPU_EMULATE_ENV, &ma, &mi, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        assert_int_equal(ma, 0);
        assert_non_null(strstr(err.message, KR_GPU_EMULATE_ENV));
        assert_non_null(strstr(err.message, bad[i])); /* the value, quoted */
        assert_non_null(strstr(err.message, "7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 12.0"));
    }
}

static void test_emulate(void **state)
{
    (void)state;
    const kr_gpu_caps real = h100();
    kr_gpu_caps c;
    keyer_error err = {0};
    assert_int_equal(kr_gpu_caps_emulate(&real, 8, 6, &c, &err), KEYER_OK);
    assert_int_equal(c.major, 8);
    assert_int_equal(c.minor, 6);
    assert_int_equal(c.real_major, 9);
    assert_int_equal(c.real_minor, 0);
    assert_int_equal(c.emulated, 1);
    assert_int_equal(c.sms, 132); /* the device's */
    assert_int_equal(c.smem_block_optin, 101376);
    assert_int_equal(c.smem_sm, 102400);
    assert_int_equal(c.threads_sm, 1536);
    assert_int_equal(c.blocks_sm, 16);
    assert_int_equal(c.cluster_launch, 0);
    assert_int_equal(c.cooperative_launch, 1);
    assert_false(kr_gpu_has_clusters(&c));
    assert_true(kr_gpu_has_wmma_f16(&c));
    assert_true(kr_gpu_has_clusters(&real));

    assert_int_equal(kr_gpu_caps_emulate(&real, 7, 5, &c, &err), KEYER_OK);
    assert_int_equal(c.smem_block_optin, 65536);
    assert_int_equal(c.smem_sm, 65536);
    assert_int_equal(c.threads_sm, 1024);
    assert_int_equal(c.smem_reserved_block, 1024); /* the device's, larger than 7.5's 0 */

    assert_int_equal(kr_gpu_caps_emulate(&real, 8, 0, &c, &err), KEYER_OK);
    assert_int_equal(c.smem_block_optin, 166912);
    assert_int_equal(c.threads_sm, 2048);

    /* the device's own class: nothing emulated; 0: a copy */
    assert_int_equal(kr_gpu_caps_emulate(&real, 9, 0, &c, &err), KEYER_OK);
    assert_int_equal(c.emulated, 0);
    assert_int_equal(c.smem_block_optin, 232448);
    assert_int_equal(kr_gpu_caps_emulate(&real, 0, 0, &c, &err), KEYER_OK);
    assert_memory_equal(&c, &real, sizeof(c));

    /* newer than the device, or unknown: refused */
    assert_int_equal(kr_gpu_caps_emulate(&real, 10, 0, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "only older classes"));
    assert_int_equal(kr_gpu_caps_emulate(&real, 12, 0, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_gpu_caps_emulate(&real, 7, 0, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);

    char line[400];
    kr_gpu_caps_emulate(&real, 8, 6, &c, NULL);
    kr_gpu_caps_describe(&c, line, sizeof(line));
    assert_non_null(strstr(line, "compute 8.6 (emulated on a 9.0 device)"));
    assert_non_null(strstr(line, "99 KB per block"));
    assert_non_null(strstr(line, "thread-block clusters no"));
}

static void test_env(void **state)
{
    (void)state;
    const kr_gpu_caps real = h100();
    kr_gpu_caps c;
    keyer_error err = {0};
    unsetenv(KR_GPU_EMULATE_ENV);
    assert_int_equal(kr_gpu_caps_from_env(&real, &c, &err), KEYER_OK);
    assert_memory_equal(&c, &real, sizeof(c));
    setenv(KR_GPU_EMULATE_ENV, "sm_75", 1);
    assert_int_equal(kr_gpu_caps_from_env(&real, &c, &err), KEYER_OK);
    assert_int_equal(kr_gpu_cc(&c), 75);
    assert_int_equal(c.emulated, 1);
    setenv(KR_GPU_EMULATE_ENV, "turing", 1);
    assert_int_equal(kr_gpu_caps_from_env(&real, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "KEYER_CUDA_EMULATE_CC=\"turing\""));
    setenv(KR_GPU_EMULATE_ENV, "12.0", 1); /* newer than the H100 */
    assert_int_equal(kr_gpu_caps_from_env(&real, &c, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "KEYER_CUDA_EMULATE_CC=\"12.0\""));
    assert_non_null(strstr(err.message, "on a 9.0 device"));
    unsetenv(KR_GPU_EMULATE_ENV);
}

static void test_blocks_per_sm(void **state)
{
    (void)state;
    const kr_gpu_caps real = h100();
    kr_gpu_caps c75, c86;
    kr_gpu_caps_emulate(&real, 7, 5, &c75, NULL);
    kr_gpu_caps_emulate(&real, 8, 6, &c86, NULL);
    /* 256 threads, 64 registers, 40 KB: H100 min(8 by threads, 32, 4 by registers, 5 by
     * shared memory of 41 KB each); 7.5: 1 by its 64 KB; 8.6: 2 by its 100 KB */
    assert_int_equal(kr_gpu_blocks_per_sm(&real, 256, 64, 40960), 4);
    assert_int_equal(kr_gpu_blocks_per_sm(&c75, 256, 64, 40960), 1);
    assert_int_equal(kr_gpu_blocks_per_sm(&c86, 256, 64, 40960), 2);
    /* 256 threads, 32 registers, no shared memory: by threads 8 (H100), 4 (7.5), 6 (8.6) */
    assert_int_equal(kr_gpu_blocks_per_sm(&real, 256, 32, 0), 8);
    assert_int_equal(kr_gpu_blocks_per_sm(&c75, 256, 32, 0), 4);
    assert_int_equal(kr_gpu_blocks_per_sm(&c86, 256, 32, 0), 6);
    /* registers rounded to 256 per warp: 33 -> 1280 per warp, 65536 / 1280 = 51 warps, 6 blocks */
    assert_int_equal(kr_gpu_blocks_per_sm(&real, 256, 33, 0), 6);
    /* does not fit: more shared memory than a block may opt in to, too many registers */
    assert_int_equal(kr_gpu_blocks_per_sm(&c75, 256, 32, 70000), 0);
    assert_int_equal(kr_gpu_blocks_per_sm(&real, 1024, 255, 0), 0);
    assert_int_equal(kr_gpu_blocks_per_sm(&real, 2048, 32, 0), 0);
}

static void test_schedule_choice(void **state)
{
    (void)state;
    const double small = 1e8; /* multiply-adds per item */
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_KERNELS, 1, small), 1);
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_AUTO, 1, small), 0);
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_AUTO,
                                                    KEYER_CUDA_SEGMENT_MAX_BATCH, small), 0);
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_AUTO,
                                                    KEYER_CUDA_SEGMENT_MAX_BATCH + 1, small), 1);
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_AUTO, 2, 1.9e9), 1);
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_AUTO, 1, 1.9e9), 0);
    assert_int_equal(kr_schedule_per_node_by_config(KEYER_CUDA_SCHEDULE_PERSISTENT, 256, 1.9e9),
                     0);
    assert_int_equal(kr_schedule_needs_segment(KEYER_CUDA_SCHEDULE_AUTO,
                                               KEYER_CUDA_PERSISTENT_MAX_BATCH), 0);
    assert_int_equal(kr_schedule_needs_segment(KEYER_CUDA_SCHEDULE_AUTO,
                                               KEYER_CUDA_PERSISTENT_MAX_BATCH + 1), 1);
    assert_int_equal(kr_schedule_needs_segment(KEYER_CUDA_SCHEDULE_PERSISTENT, 10), 0);

    kr_gpu_caps real = h100(), c86, c75;
    kr_gpu_caps_emulate(&real, 8, 6, &c86, NULL);
    kr_gpu_caps_emulate(&real, 7, 5, &c75, NULL);
    assert_null(kr_schedule_persistent_refusal(&real, 2));
    assert_null(kr_schedule_persistent_refusal(&c75, 1));
    assert_non_null(strstr(kr_schedule_persistent_refusal(&real, 0), "does not fit"));
    kr_gpu_caps nocoop = real;
    nocoop.cooperative_launch = 0;
    assert_non_null(strstr(kr_schedule_persistent_refusal(&nocoop, 2), "cooperative"));

    /* selfie's segment: 16 blocks per cluster, about 100 KB each */
    assert_null(kr_schedule_segment_refusal(&real, 16, 100000));
    assert_non_null(strstr(kr_schedule_segment_refusal(&c86, 16, 100000), "compute 9.0"));
    assert_non_null(strstr(kr_schedule_segment_refusal(&c86, 16, 100000), "emulating"));
    assert_non_null(strstr(kr_schedule_segment_refusal(&c75, 4, 1000), "compute 9.0"));
    assert_non_null(strstr(kr_schedule_segment_refusal(&real, 16, 240000), "too small"));
    assert_non_null(strstr(kr_schedule_segment_refusal(&real, 17, 1000), "cluster size"));
    kr_gpu_caps nocl = real;
    nocl.cluster_launch = 0;
    assert_non_null(strstr(kr_schedule_segment_refusal(&nocl, 16, 1000), "no thread-block"));
    kr_gpu_caps c100;
    assert_int_equal(kr_gpu_class_limits(10, 0, &c100), 1);
    assert_null(kr_schedule_segment_refusal(&c100, 16, 100000));

    assert_string_equal(kr_schedule_name(KR_SCHEDULE_PER_NODE), "per-node");
    assert_string_equal(kr_schedule_name(KR_SCHEDULE_PERSISTENT), "persistent");
    assert_string_equal(kr_schedule_name(KR_SCHEDULE_PERSISTENT_CLUSTER), "persistent+cluster");
}

static void test_schedule_env(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        keyer_cuda_schedule want;
    } good[] = {
        {"auto", KEYER_CUDA_SCHEDULE_AUTO},
        {"kernels", KEYER_CUDA_SCHEDULE_KERNELS},
        {"persistent", KEYER_CUDA_SCHEDULE_PERSISTENT},
        {"persistent-grid", KEYER_CUDA_SCHEDULE_PERSISTENT_GRID},
        {"", KEYER_CUDA_SCHEDULE_AUTO},
    };
    keyer_error err = {0};
    int s = -1;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(kr_schedule_parse(good[i].spec, "X", &s, &err), KEYER_OK);
        assert_int_equal(s, (int)good[i].want);
    }
    assert_int_equal(kr_schedule_parse(NULL, "X", &s, NULL), KEYER_OK);
    assert_int_equal(s, KEYER_CUDA_SCHEDULE_AUTO);
    static const char *const bad[] = {"Kernels", "per-node", "persistent ", "1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(kr_schedule_parse(bad[i], KR_SCHEDULE_ENV, &s, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof(want), "KEYER_CUDA_SCHEDULE=\"%s\"", bad[i]);
        assert_non_null(strstr(err.message, want));
    }

    /* only AUTO is replaced; unset leaves AUTO */
    unsetenv(KR_SCHEDULE_ENV);
    assert_int_equal(kr_schedule_from_env(KEYER_CUDA_SCHEDULE_AUTO, &s, &err), KEYER_OK);
    assert_int_equal(s, KEYER_CUDA_SCHEDULE_AUTO);
    setenv(KR_SCHEDULE_ENV, "kernels", 1);
    assert_int_equal(kr_schedule_from_env(KEYER_CUDA_SCHEDULE_AUTO, &s, &err), KEYER_OK);
    assert_int_equal(s, KEYER_CUDA_SCHEDULE_KERNELS);
    assert_int_equal(kr_schedule_from_env(KEYER_CUDA_SCHEDULE_PERSISTENT, &s, &err), KEYER_OK);
    assert_int_equal(s, KEYER_CUDA_SCHEDULE_PERSISTENT);
    setenv(KR_SCHEDULE_ENV, "fast", 1);
    assert_int_equal(kr_schedule_from_env(KEYER_CUDA_SCHEDULE_AUTO, &s, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "KEYER_CUDA_SCHEDULE=\"fast\""));
    /* a schedule asked by name does not read the variable, even a bad one */
    assert_int_equal(kr_schedule_from_env(KEYER_CUDA_SCHEDULE_KERNELS, &s, &err), KEYER_OK);
    assert_int_equal(s, KEYER_CUDA_SCHEDULE_KERNELS);
    unsetenv(KR_SCHEDULE_ENV);
}

/* The public side on a CPU runtime: no schedule. */
static void test_runtime_schedule_cpu(void **state)
{
    (void)state;
    assert_string_equal(keyer_runtime_schedule(NULL), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_table),   cmocka_unit_test(test_parse),
        cmocka_unit_test(test_emulate),       cmocka_unit_test(test_env),
        cmocka_unit_test(test_blocks_per_sm), cmocka_unit_test(test_schedule_choice),
        cmocka_unit_test(test_schedule_env),  cmocka_unit_test(test_runtime_schedule_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
