/* Tracker: stable ids through motion and short occlusions, birth after min_hits, removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "keyer/track.h"

static keyer_detection box_at(float cx, float cy, float size)
{
    keyer_detection d;
    memset(&d, 0, sizeof(d));
    d.xmin = cx - size / 2;
    d.xmax = cx + size / 2;
    d.ymin = cy - size / 2;
    d.ymax = cy + size / 2;
    d.score = 0.9f;
    return d;
}

static void test_two_moving_objects(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_tracker_params p = keyer_tracker_params_defaults();
    keyer_tracker *t = NULL;
    assert_int_equal(keyer_tracker_create(&p, &t, &err), KEYER_OK);
    keyer_track out[8];
    int n = 0;
    uint32_t id_a = 0, id_b = 0;
    for (int f = 0; f < 60; f++) {
        /* A moves right, B moves left on another row; B is occluded (missing) on frames 30-32. */
        keyer_detection dets[2];
        int nd = 0;
        dets[nd++] = box_at(0.1f + 0.01f * (float)f, 0.3f, 0.1f);
        if (f < 30 || f > 32)
            dets[nd++] = box_at(0.9f - 0.01f * (float)f, 0.7f, 0.12f);
        assert_int_equal(keyer_tracker_update(t, dets, nd, out, 8, &n, &err), KEYER_OK);
        if (f < p.min_hits - 1) {
            assert_int_equal(n, 0); /* not confirmed yet */
            continue;
        }
        assert_int_equal(n, 2); /* B coasts through its occlusion */
        float ya = out[0].box.ymin < out[1].box.ymin ? 0 : 1;
        const keyer_track *a = &out[(int)ya], *b = &out[1 - (int)ya];
        if (!id_a) {
            id_a = a->id;
            id_b = b->id;
            assert_int_not_equal(id_a, id_b);
        }
        assert_int_equal(a->id, id_a);
        assert_int_equal(b->id, id_b);
        if (f > 10) {
            assert_true(fabsf(a->vx - 0.01f) < 0.003f);
            assert_true(fabsf(b->vx + 0.01f) < 0.003f);
            /* Filtered boxes follow the truth closely, also while coasting. */
            float want_bx = 0.9f - 0.01f * (float)f;
            assert_true(fabsf((b->box.xmin + b->box.xmax) / 2 - want_bx) < 0.01f);
        }
        if (f >= 30 && f <= 32)
            assert_int_equal(b->misses, f - 29);
    }
    /* Objects vanish: tracks survive max_misses frames, then go. */
    for (int f = 0; f <= p.max_misses; f++) {
        assert_int_equal(keyer_tracker_update(t, NULL, 0, out, 8, &n, &err), KEYER_OK);
        assert_int_equal(n, f < p.max_misses ? 2 : 0);
    }
    /* A new object gets a new id. */
    keyer_detection d = box_at(0.5f, 0.5f, 0.2f);
    for (int f = 0; f < p.min_hits; f++)
        assert_int_equal(keyer_tracker_update(t, &d, 1, out, 8, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    assert_true(out[0].id > id_a && out[0].id > id_b);
    keyer_tracker_destroy(&t);
    assert_null(t);
}

static void test_flicker_is_not_confirmed(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_tracker_params p = keyer_tracker_params_defaults();
    keyer_tracker *t = NULL;
    assert_int_equal(keyer_tracker_create(&p, &t, &err), KEYER_OK);
    keyer_track out[4];
    int n = 0;
    /* A false positive that appears every other frame never reaches min_hits consecutive. */
    for (int f = 0; f < 20; f++) {
        keyer_detection d = box_at(0.5f, 0.5f, 0.1f);
        assert_int_equal(keyer_tracker_update(t, &d, f % 2, out, 4, &n, &err), KEYER_OK);
        assert_int_equal(n, 0);
    }
    /* Capacity limits the output, the count says how many were written. */
    keyer_detection many[3] = {box_at(0.2f, 0.2f, 0.1f), box_at(0.5f, 0.5f, 0.1f),
                               box_at(0.8f, 0.8f, 0.1f)};
    for (int f = 0; f < 3; f++)
        assert_int_equal(keyer_tracker_update(t, many, 3, out, 2, &n, &err), KEYER_OK);
    assert_int_equal(n, 2);
    keyer_tracker_reset(t);
    assert_int_equal(keyer_tracker_update(t, NULL, 0, out, 4, &n, &err), KEYER_OK);
    assert_int_equal(n, 0);
    keyer_tracker_destroy(&t);
}

static void test_bad_params(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_tracker *t = NULL;
    keyer_tracker_params p = keyer_tracker_params_defaults();
    p.min_hits = 0;
    assert_int_equal(keyer_tracker_create(&p, &t, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "min_hits"));
    assert_null(t);
    p = keyer_tracker_params_defaults();
    assert_int_equal(keyer_tracker_create(&p, &t, &err), KEYER_OK);
    int n;
    assert_int_equal(keyer_tracker_update(t, NULL, 2, NULL, 0, &n, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_tracker_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_moving_objects),
        cmocka_unit_test(test_flicker_is_not_confirmed),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
