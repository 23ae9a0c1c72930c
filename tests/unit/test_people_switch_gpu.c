/*
 * The automatic switch's masks packed into bits on the GPU (kr_people_switch_pack_cuda, label
 * gpu; exits 77 without a device) against the CPU's packing (kr_people_switch_pack, whose
 * layout test_people_switch checks bit by bit): every word equal, for one to 64 masks a launch
 * of sizes from 1x1 to 4096x3 (rows of one word, of several, ending inside a word), with values
 * at and around the 0.5 threshold, NaN, infinities and negative zero; and the switch on the
 * GPU's bits decides as on the floats. Bad arguments are refused with INVALID_ARGUMENT.
 * Written to be clean under compute-sanitizer --tool memcheck (no shared memory: racecheck
 * has nothing to check).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/device.h"
#include "vision/people_switch.h"
#include "kt_gpu.h"

static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* A value for a cell: mostly smooth blobs, some of the awkward ones. */
static float cell(int x, int y, int k, uint32_t *s)
{
    static const float odd[] = {0.5f, 0.49999997f, 0.50000006f, -0.0f, 0.0f, 1.0f, -1.0f,
                                INFINITY, -INFINITY, NAN, -NAN, 1e-38f, 2.0f};
    uint32_t r = rnd(s) % 100;
    if (r < 8)
        return odd[rnd(s) % (sizeof(odd) / sizeof(odd[0]))];
    if (r < 20)
        return (float)(rnd(s) % 1000) / 999.0f;
    int dx = x - 40 - 7 * k, dy = y - 30;
    return dx * dx + dy * dy < 900 ? 0.9f : 0.1f;
}

/* @p n masks of @p w x @p h: packed on the GPU in one launch and on the CPU, compared word
 * for word; then each mask's switch decision on both. */
static void check(int n, int w, int h, uint32_t *seed)
{
    const kr_device_fns *dev = kr_device_cuda();
    keyer_error err = {0};
    size_t cells = (size_t)w * (size_t)h;
    size_t words = (size_t)kr_people_switch_row_words(w) * (size_t)h;
    float *host = malloc((size_t)n * cells * sizeof(float));
    uint32_t *want = malloc((size_t)n * words * sizeof(uint32_t));
    uint32_t *got = malloc((size_t)n * words * sizeof(uint32_t));
    assert_non_null(host);
    assert_non_null(want);
    assert_non_null(got);
    void *dmasks = NULL, *dbits = NULL;
    assert_int_equal(dev->alloc(0, (size_t)n * cells * sizeof(float), &dmasks, &err), KEYER_OK);
    assert_int_equal(dev->alloc(0, (size_t)n * words * sizeof(uint32_t), &dbits, &err),
                     KEYER_OK);
    const float *masks[64];
    for (int k = 0; k < n; k++) {
        float *m = host + (size_t)k * cells;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                m[(size_t)y * (size_t)w + (size_t)x] = cell(x, y, k, seed);
        kr_people_switch_pack(m, w, h, want + (size_t)k * words);
        /* the masks in reverse order in device memory: the launch follows the pointers */
        masks[k] = (const float *)dmasks + (size_t)(n - 1 - k) * cells;
        assert_int_equal(dev->copy(0, (void *)masks[k], m, cells * sizeof(float), NULL, &err),
                         KEYER_OK);
    }
    memset(got, 0x5A, (size_t)n * words * sizeof(uint32_t));
    assert_int_equal(dev->copy(0, dbits, got, (size_t)n * words * sizeof(uint32_t), NULL, &err),
                     KEYER_OK);
    /* the uploads (on the legacy stream) are done before the packing's stream starts */
    assert_int_equal(dev->stream_sync(0, NULL, &err), KEYER_OK);
    void *stream = NULL;
    assert_int_equal(dev->stream_create(0, &stream, &err), KEYER_OK);
    if (kr_people_switch_pack_cuda(0, masks, n, w, h, dbits, stream, &err))
        fail_msg("pack %d masks of %dx%d: %s", n, w, h, err.message);
    assert_int_equal(dev->copy(0, got, dbits, (size_t)n * words * sizeof(uint32_t), stream,
                               &err), KEYER_OK);
    assert_int_equal(dev->stream_sync(0, stream, &err), KEYER_OK);
    for (size_t i = 0; i < (size_t)n * words; i++)
        if (got[i] != want[i])
            fail_msg("%d masks of %dx%d: word %zu (mask %zu) is %08x on the GPU, %08x on the CPU",
                     n, w, h, i, i / words, (unsigned)got[i], (unsigned)want[i]);
    kr_people_switch_params p = kr_people_switch_params_defaults();
    kr_people_switch *a = NULL, *b = NULL;
    assert_int_equal(kr_people_switch_create(&p, w, h, &a, &err), KEYER_OK);
    assert_int_equal(kr_people_switch_create(&p, w, h, &b, &err), KEYER_OK);
    for (int k = 0; k < n; k++) {
        assert_int_equal(kr_people_switch_update(a, host + (size_t)k * cells),
                         kr_people_switch_update_bits(b, got + (size_t)k * words));
        assert_true(kr_people_switch_largest(a) == kr_people_switch_largest(b));
    }
    kr_people_switch_destroy(&a);
    kr_people_switch_destroy(&b);
    dev->stream_destroy(0, stream);
    dev->free(0, dmasks);
    dev->free(0, dbits);
    free(host);
    free(want);
    free(got);
}

static void test_pack_cuda_equal_cpu(void **state)
{
    (void)state;
    const int cases[][3] = {{1, 1, 1},   {1, 31, 2},   {3, 32, 5},    {2, 33, 7},
                            {16, 256, 144}, {16, 144, 256}, {7, 257, 129}, {64, 64, 9},
                            {1, 4096, 3}, {5, 1, 70}};
    uint32_t seed = 777u;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        check(cases[c][0], cases[c][1], cases[c][2], &seed);
        printf("  %d masks of %dx%d: the GPU's bits equal the CPU's\n", cases[c][0],
               cases[c][1], cases[c][2]);
    }
}

static void test_pack_cuda_arguments(void **state)
{
    (void)state;
    keyer_error err = {0};
    const float *masks[1] = {NULL};
    uint32_t *bits = (uint32_t *)&err; /* never written: the arguments are refused first */
    assert_int_equal(kr_people_switch_pack_cuda(0, masks, 1, 8, 8, bits, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "people switch"));
    const float *one[1] = {(const float *)&err};
    assert_int_equal(kr_people_switch_pack_cuda(0, one, 0, 8, 8, bits, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_people_switch_pack_cuda(0, one, 65, 8, 8, bits, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_people_switch_pack_cuda(0, one, 1, 4097, 8, bits, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_people_switch_pack_cuda(0, one, 1, 8, 0, bits, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_cuda_equal_cpu),
        cmocka_unit_test(test_pack_cuda_arguments),
    };
    return KT_GPU_RUN_GROUP(tests, NULL, NULL);
}
