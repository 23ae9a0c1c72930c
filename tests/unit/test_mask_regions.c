/*
 * kr_mask_keep_regions (src/vision/mask_regions.h) against hand-made masks: regions under the
 * size limit and cells under 0.5 are zeroed, larger regions kept with their values,
 * 4-connectivity, NaN, the whole mask as one region.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vision/mask_regions.h"

#define W 30
#define H 20

static uint8_t seen[W * H];
static int32_t list[W * H];

static void rect(float *m, int x0, int y0, int x1, int y1, float v)
{
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            m[y * W + x] = v;
}

static void test_keep_regions(void **state)
{
    (void)state;
    float m[W * H];
    memset(m, 0, sizeof(m));
    rect(m, 0, 0, 5, 4, 0.8f);     /* 20 cells: kept */
    rect(m, 10, 10, 13, 13, 0.6f); /* 9 cells: dropped */
    rect(m, 20, 0, 30, 1, 0.5f);   /* 10 cells at exactly 0.5: kept */
    rect(m, 5, 0, 6, 4, 0.49f);    /* touches the first, under 0.5: zeroed, joins nothing */
    m[4 * W + 5] = 0.9f;           /* diagonal to the first's corner (4,3): a region of 1 */
    long kept = kr_mask_keep_regions(m, W, H, 10, seen, list);
    assert_int_equal(kept, 30);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float v = m[y * W + x];
            if (x < 5 && y < 4)
                assert_true(v == 0.8f);
            else if (y == 0 && x >= 20)
                assert_true(v == 0.5f);
            else if (v != 0.0f)
                fail_msg("cell (%d, %d) is %g, want 0", x, y, (double)v);
        }
    /* an L shape of 7 cells is one region: kept with a limit of 7, dropped with 8 */
    float l[W * H];
    memset(l, 0, sizeof(l));
    rect(l, 2, 2, 3, 7, 0.7f);
    rect(l, 3, 6, 5, 7, 0.7f);
    assert_int_equal(kr_mask_keep_regions(l, W, H, 7, seen, list), 7);
    assert_true(l[6 * W + 4] == 0.7f);
    assert_int_equal(kr_mask_keep_regions(l, W, H, 8, seen, list), 0);
    assert_true(l[6 * W + 4] == 0.0f && l[2 * W + 2] == 0.0f);
    /* NaN cells are zeroed and split nothing they do not touch; the whole mask is one region */
    for (int i = 0; i < W * H; i++)
        l[i] = 1.0f;
    l[0] = NAN;
    assert_int_equal(kr_mask_keep_regions(l, W, H, W * H - 1, seen, list), W * H - 1);
    assert_true(l[0] == 0.0f && l[1] == 1.0f);
    /* a limit of 0 or 1 keeps every region */
    memset(l, 0, sizeof(l));
    l[7] = 0.6f;
    assert_int_equal(kr_mask_keep_regions(l, W, H, 1, seen, list), 1);
    assert_int_equal(kr_mask_keep_regions(l, W, H, 0, seen, list), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_regions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
