/*
 * The automatic choice between the selfie model and people mode (src/vision/people_switch.h):
 * the largest connected region of a mask against hand-made masks and, on random masks (blobs,
 * noise, stripes, spirals), against a flood fill over the cells written here, and the same
 * masks packed into bits (their layout checked bit by bit) giving the same result; the
 * hysteresis frame by frame, and the parameter checks.
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

/* ---- random masks against a flood fill ------------------------------------------------------ */

/* The oracle: cells of the largest 4-connected region of cells >= 0.5, by a flood fill from
 * every unvisited cell (another algorithm than the switch's runs). */
static long flood_largest(const float *m, int w, int h)
{
    size_t cells = (size_t)w * (size_t)h;
    unsigned char *seen = calloc(cells, 1);
    int *stack = malloc(cells * sizeof(int));
    assert_non_null(seen);
    assert_non_null(stack);
    long best = 0;
    for (size_t s = 0; s < cells; s++) {
        if (seen[s] || !(m[s] >= 0.5f))
            continue;
        long size = 0;
        size_t top = 0;
        seen[s] = 1;
        stack[top++] = (int)s;
        while (top > 0) {
            int c = stack[--top], x = c % w, y = c / w;
            size++;
            int nb[4] = {x > 0 ? c - 1 : -1, x + 1 < w ? c + 1 : -1, y > 0 ? c - w : -1,
                         y + 1 < h ? c + w : -1};
            for (int k = 0; k < 4; k++)
                if (nb[k] >= 0 && !seen[nb[k]] && m[nb[k]] >= 0.5f) {
                    seen[nb[k]] = 1;
                    stack[top++] = nb[k];
                }
        }
        best = size > best ? size : best;
    }
    free(seen);
    free(stack);
    return best;
}

static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Mask @p kind of @p w x @p h from seed @p s: 0 noise of density 0.3-0.7, 1 a few discs and
 * bars (a selfie-like blob with holes), 2 diagonal stripes one cell wide (joined only at
 * corners: many regions), 3 a square spiral (one long region with runs that join far
 * apart), 4 a comb (teeth joined by the bottom row only). */
static void make_mask(float *m, int w, int h, int kind, uint32_t *s)
{
    float density = 0.3f + 0.4f * (float)(rnd(s) % 1000) / 1000.0f;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float v = 0.0f;
            if (kind == 0)
                v = (float)(rnd(s) % 1000) / 1000.0f < density ? 0.75f : 0.25f;
            else if (kind == 2)
                v = (x + y) % 2 == 0 && (x + 2 * y) % 5 != 0 ? 1.0f : 0.0f;
            else if (kind == 4)
                v = (y == h - 1 || x % 3 == 0) ? 0.5f : 0.49f;
            m[y * w + x] = v;
        }
    if (kind == 1)
        for (int k = 0; k < 6; k++) {
            int cx = (int)(rnd(s) % (uint32_t)w), cy = (int)(rnd(s) % (uint32_t)h);
            int r = 1 + (int)(rnd(s) % (uint32_t)(w / 4 + 1));
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    int dx = x - cx, dy = y - cy;
                    if (dx * dx + dy * dy <= r * r && (dx * dx + dy * dy) * 9 > r * r)
                        m[y * w + x] = 0.9f;
                    if (k == 5 && y == cy)
                        m[y * w + x] = 0.6f; /* a bar across the frame */
                }
        }
    if (kind == 3) { /* walk inwards along the border, turning right, two cells off the wall */
        int x0 = 0, y0 = 0, x1 = w - 1, y1 = h - 1;
        while (x0 <= x1 && y0 <= y1) {
            for (int x = x0; x <= x1; x++)
                m[y0 * w + x] = 1.0f;
            for (int y = y0; y <= y1; y++)
                m[y * w + x1] = 1.0f;
            if (y1 > y0 + 1)
                for (int x = x0 + 2; x <= x1; x++)
                    m[y1 * w + x] = 1.0f;
            if (x1 > x0 + 3)
                for (int y = y0 + 2; y <= y1; y++)
                    m[y * w + x0 + 2] = 1.0f;
            x0 += 4, y0 += 2, x1 -= 2, y1 -= 2;
        }
    }
    if (rnd(s) % 4 == 0) /* NaN counts as nothing */
        m[rnd(s) % (uint32_t)(w * h)] = NAN;
}

static void test_largest_region_random(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1}, {1, 37}, {37, 1}, {2, 2}, {7, 5}, {40, 25}, {64, 64},
                            {256, 144}, {257, 129}};
    uint32_t seed = 12345u;
    int masks = 0;
    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
        int w = sizes[z][0], h = sizes[z][1];
        keyer_error err = {0};
        kr_people_switch *sw = NULL;
        kr_people_switch_params p = kr_people_switch_params_defaults();
        kr_people_switch *sb = NULL; /* the same masks packed first (as from CUDA) */
        assert_int_equal(kr_people_switch_create(&p, w, h, &sw, &err), KEYER_OK);
        assert_int_equal(kr_people_switch_create(&p, w, h, &sb, &err), KEYER_OK);
        int words = kr_people_switch_row_words(w);
        float *m = malloc((size_t)w * (size_t)h * sizeof(float));
        uint32_t *bits = malloc((size_t)words * (size_t)h * sizeof(uint32_t));
        assert_non_null(m);
        assert_non_null(bits);
        for (int kind = 0; kind < 5; kind++)
            for (int rep = 0; rep < 6; rep++, masks++) {
                make_mask(m, w, h, kind, &seed);
                long want = flood_largest(m, w, h);
                kr_people_switch_update(sw, m);
                float got = kr_people_switch_largest(sw);
                float exp = (float)((double)want / ((double)w * (double)h));
                if (got != exp)
                    fail_msg("%dx%d mask kind %d #%d: largest %.7f, the flood fill %.7f (%ld "
                             "cells)", w, h, kind, rep, (double)got, (double)exp, want);
                /* the packed mask: bit x % 32 of word x / 32 of its row, the cell >= 0.5 */
                memset(bits, 0xA5, (size_t)words * (size_t)h * sizeof(uint32_t));
                kr_people_switch_pack(m, w, h, bits);
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < words * 32; x++) {
                        int bit = (int)(bits[y * words + x / 32] >> (x % 32)) & 1;
                        int cell = x < w && m[y * w + x] >= 0.5f;
                        if (bit != cell)
                            fail_msg("%dx%d mask kind %d: packed bit (%d, %d) is %d", w, h,
                                     kind, x, y, bit);
                    }
                if (w % 32) /* bits past w are not cells: set them, the result stays */
                    for (int y = 0; y < h; y++)
                        bits[y * words + words - 1] |= ~(uint32_t)0 << (w % 32);
                assert_int_equal(kr_people_switch_update_bits(sb, bits),
                                 kr_people_switch_people(sw));
                assert_true(kr_people_switch_largest(sb) == got);
            }
        free(m);
        free(bits);
        kr_people_switch_destroy(&sw);
        kr_people_switch_destroy(&sb);
    }
    assert_int_equal(masks, 9 * 5 * 6);
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
        cmocka_unit_test(test_largest_region_random),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
