/*
 * The automatic choice between the selfie model and people mode (src/vision/people_switch.h):
 * the largest connected region of a mask against hand-made masks, the hysteresis frame by
 * frame, and the parameter checks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vision/people_switch.h"

#define W 40
#define H 25

/* @p m: zero, then a filled rectangle [x0, x1) x [y0, y1) of value v. */
static void rect(float *m, int x0, int y0, int x1, int y1, float v)
{
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            m[y * W + x] = v;
}

static void test_largest_region(void **state)
{
    (void)state;
    keyer_error err = {0};
    kr_people_switch *sw = NULL;
    kr_people_switch_params p = kr_people_switch_params_defaults();
    assert_int_equal(kr_people_switch_create(&p, W, H, &sw, &err), KEYER_OK);
    float m[W * H];
    memset(m, 0, sizeof(m));
    kr_people_switch_update(sw, m);
    assert_true(kr_people_switch_largest(sw) == 0.0f);
    /* two regions of 30 and 12 cells, apart; cells of 0.49 do not count, 0.5 does */
    rect(m, 0, 0, 6, 5, 0.9f);
    rect(m, 20, 10, 24, 13, 0.5f);
    rect(m, 6, 0, 7, 5, 0.49f); /* touches the first, below the threshold */
    kr_people_switch_update(sw, m);
    assert_float_equal(kr_people_switch_largest(sw), 30.0f / (W * H), 1e-7);
    /* joined by a diagonal only: still two regions (4-neighbours) */
    rect(m, 6, 5, 7, 6, 0.7f); /* (6,5) touches (5,4) diagonally */
    kr_people_switch_update(sw, m);
    assert_float_equal(kr_people_switch_largest(sw), 30.0f / (W * H), 1e-7);
    /* a U shape: one region of 3 + 5 + 3 - 2 cells folded back */
    memset(m, 0, sizeof(m));
    rect(m, 10, 10, 11, 13, 0.6f);
    rect(m, 14, 10, 15, 13, 0.6f);
    rect(m, 10, 12, 15, 13, 0.6f);
    kr_people_switch_update(sw, m);
    assert_float_equal(kr_people_switch_largest(sw), 9.0f / (W * H), 1e-7);
    /* the whole mask; NaN counts as nothing */
    for (int i = 0; i < W * H; i++)
        m[i] = 1.0f;
    kr_people_switch_update(sw, m);
    assert_float_equal(kr_people_switch_largest(sw), 1.0f, 1e-7);
    m[0] = NAN;
    kr_people_switch_update(sw, m);
    assert_float_equal(kr_people_switch_largest(sw), (W * H - 1.0f) / (W * H), 1e-7);
    kr_people_switch_destroy(&sw);
    assert_null(sw);
    kr_people_switch_destroy(NULL);
}

static void test_hysteresis(void **state)
{
    (void)state;
    keyer_error err = {0};
    kr_people_switch *sw = NULL;
    kr_people_switch_params p = {0.10f, 0.20f, 3, 4};
    assert_int_equal(kr_people_switch_create(&p, W, H, &sw, &err), KEYER_OK);
    assert_int_equal(kr_people_switch_people(sw), 0); /* selfie before the first mask */
    float big[W * H], mid[W * H], small[W * H];
    memset(big, 0, sizeof(big));
    memset(mid, 0, sizeof(mid));
    memset(small, 0, sizeof(small));
    rect(big, 0, 0, 20, 15, 1.0f);  /* 300 cells: 30% */
    rect(mid, 0, 0, 10, 15, 1.0f);  /* 150 cells: 15%, between enter and leave */
    rect(small, 0, 0, 5, 5, 1.0f);  /* 25 cells: 2.5% */
    /* selfie at the start; people after 3 small frames in a row, a big one in between
     * restarts the count; a middle one also counts as someone large in selfie mode */
    const float *seq[] = {big, small, small, big, small, small, mid, small, small, small,
                          mid, mid, big, big, big, small, big, big, big, big, small};
    const int want[] =   {0,   0,     0,     0,   0,     0,     0,   0,     0,     1,
                          1,   1,     1,     1,   1,     1,     1,   1,     1,     0,   0};
    int n = (int)(sizeof(want) / sizeof(want[0])), people = 0;
    for (int i = 0; i < n; i++) {
        int got = kr_people_switch_update(sw, seq[i]);
        assert_int_equal(kr_people_switch_people(sw), got);
        if (got != want[i])
            fail_msg("frame %d: mode %d, want %d", i, got, want[i]);
        people += want[i];
    }
    int64_t frames = 0, in_people = 0;
    kr_people_switch_counts(sw, &frames, &in_people);
    assert_int_equal(frames, n);
    assert_int_equal(in_people, people);
    kr_people_switch_destroy(&sw);
}

static void test_params(void **state)
{
    (void)state;
    keyer_error err = {0};
    kr_people_switch *sw = (kr_people_switch *)&err; /* set NULL on failure */
    kr_people_switch_params p = kr_people_switch_params_defaults();
    assert_true(p.enter > 0 && p.enter <= p.leave && p.leave <= 1);
    p.enter = 0.5f;
    p.leave = 0.4f;
    assert_int_equal(kr_people_switch_create(&p, W, H, &sw, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(sw);
    assert_non_null(strstr(err.message, "people switch"));
    p = kr_people_switch_params_defaults();
    p.enter_frames = 0;
    assert_int_equal(kr_people_switch_create(&p, W, H, &sw, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    p = kr_people_switch_params_defaults();
    assert_int_equal(kr_people_switch_create(&p, 0, H, &sw, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_people_switch_create(NULL, W, H, &sw, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_largest_region),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
