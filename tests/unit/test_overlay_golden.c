/*
 * Golden images of the CPU overlay renderer: one fixed scene (rounded boxes filled, stroked
 * and crossing the frame's edge; lines of several widths at fractional positions; a polyline;
 * curves bent both ways; dots and points with hidden ones; connections; text and labels at
 * fractional positions and scales; a kNN graph of fixed points after two updates) drawn on a
 * fixed checkered background at 320x240 and at an odd size (213x161, the scene scaled), and
 * compared with tests/data/golden/overlay_scene_<W>x<H>.png within 1 code value, the policy of
 * every golden test (tests/common/testutil.h). KEYER_UPDATE_GOLDEN=1 rewrites the images;
 * on a mismatch the rendered image is written to overlay_scene_<W>x<H>.got.png in the test's
 * working directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/overlay.h"
#include "testutil.h"

/* The scene is designed on a 320x240 canvas; positions scale with the frame on each axis,
 * widths, radii and text with the smaller of the two factors (text no smaller than 1). */
typedef struct scene_scale {
    float sx, sy, s;
} scene_scale;

#define X(v) ((v) * sc->sx)
#define Y(v) ((v) * sc->sy)
#define S(v) ((v) * sc->s)
#define T(v) fmaxf(1.0f, (v) * sc->s) /* text scales are at least 1 */

#define KNN_POINTS 12

static void add_ok(keyer_status st, const keyer_error *err)
{
    if (st)
        fail_msg("adding to the overlay: %s", err->message);
}

/* kNN points: a loose grid of 12 ids, the second frame moved a little (the hysteresis path). */
static void knn_points(int frame, const scene_scale *sc, uint32_t *ids, float *xy)
{
    for (int i = 0; i < KNN_POINTS; i++) {
        float x = 170 + 35 * (float)(i % 4) + 9 * (float)((i * 7) % 3);
        float y = 130 + 30 * (float)(i / 4) + 7 * (float)((i * 5) % 4);
        if (frame) {
            x += (float)(i % 3) * 4 - 4;
            y += (float)(i % 2) * 5;
        }
        ids[i] = (uint32_t)(100 + 3 * i);
        xy[2 * i] = X(x);
        xy[2 * i + 1] = Y(y);
    }
}

static void build_scene(keyer_overlay *ov, const scene_scale *sc)
{
    keyer_error err = {0};
    const keyer_color red = {0.9f, 0.1f, 0.1f, 1}, green = {0.1f, 0.85f, 0.2f, 1},
                      blue = {0.15f, 0.3f, 1, 0.35f}, yellow = {1, 0.85f, 0.1f, 0.9f},
                      white = {1, 1, 1, 1}, black = {0, 0, 0, 1}, none = {0, 0, 0, 0},
                      magenta = {0.9f, 0.2f, 0.8f, 0.6f}, cyan = {0.2f, 0.9f, 1, 0.85f},
                      plate = {0, 0, 0, 0.6f}, orange = {1, 0.55f, 0.1f, 1};
    keyer_overlay_clear(ov);

    /* boxes: stroked and filled; stroke only with square corners; over the top-right edge;
     * fill only with a radius of half its side (a disc) */
    add_ok(keyer_overlay_add_box(ov, X(20), Y(20), X(140), Y(110), S(10), S(3), red, blue, &err),
           &err);
    add_ok(keyer_overlay_add_box(ov, X(150.5f), Y(30.25f), X(230), Y(90), 0, S(2), green, none,
                                 &err), &err);
    add_ok(keyer_overlay_add_box(ov, X(270), Y(-20), X(340), Y(60), S(20), S(4), yellow,
                                 (keyer_color){1, 1, 1, 0.2f}, &err), &err);
    add_ok(keyer_overlay_add_box(ov, X(30), Y(150), X(90), Y(210), S(30), 0, none, magenta, &err),
           &err);

    /* lines: 1, 2.5 and 6 pixels, at fractional positions, across tile borders */
    add_ok(keyer_overlay_add_line(ov, X(5.5f), Y(230.5f), X(315), Y(120.25f), S(1), white, &err),
           &err);
    add_ok(keyer_overlay_add_line(ov, X(10), Y(125), X(150), Y(140), S(2.5f), cyan, &err), &err);
    add_ok(keyer_overlay_add_line(ov, X(100), Y(160), X(135), Y(225), S(6), orange, &err), &err);
    /* a line leaving the frame at the bottom-left */
    add_ok(keyer_overlay_add_line(ov, X(-10), Y(200), X(20), Y(250), S(3), green, &err), &err);

    /* a zigzag polyline */
    float zig[12];
    for (int i = 0; i < 6; i++) {
        zig[2 * i] = X(150 + 16 * (float)i);
        zig[2 * i + 1] = Y(i % 2 ? 96 : 112);
    }
    add_ok(keyer_overlay_add_polyline(ov, zig, 6, S(2), white, &err), &err);

    /* curves bent both ways */
    add_ok(keyer_overlay_add_curve(ov, X(20), Y(130), X(140), Y(130), 0.25f, S(2), yellow, &err),
           &err);
    add_ok(keyer_overlay_add_curve(ov, X(240), Y(20), X(300), Y(100), -0.3f, S(1.5f), magenta,
                                   &err), &err);

    /* dots; points with one hidden (NaN); a small skeleton of connections */
    add_ok(keyer_overlay_add_dot(ov, X(250.5f), Y(110.5f), S(5), red, &err), &err);
    add_ok(keyer_overlay_add_dot(ov, X(262), Y(112), S(1.2f), white, &err), &err);
    float pts[10] = {X(40), Y(60), X(60), Y(62), NAN, Y(70), X(80), Y(58), X(100), Y(66)};
    add_ok(keyer_overlay_add_points(ov, pts, 5, S(3), green, &err), &err);
    const int pairs[] = {0, 1, 1, 3, 3, 4, 1, 2, 0, 4};
    add_ok(keyer_overlay_add_connections(ov, pts, 5, pairs, 5, S(1.5f), white, &err), &err);

    /* text and labels: integer and fractional positions and scales, two lines, a byte outside
     * the font */
    add_ok(keyer_overlay_add_label(ov, X(24.5f), Y(24.25f), T(2), "id 7", white, plate, &err),
           &err);
    add_ok(keyer_overlay_add_text(ov, X(152.3f), Y(40.6f), T(1.25f), "keyer 0.5\nAa{|}~\x7f", white,
                                  &err), &err);
    add_ok(keyer_overlay_add_text(ov, X(8), Y(4), T(1), "Overlay golden", white, &err), &err);
    add_ok(keyer_overlay_add_label(ov, X(200), Y(212), T(1.5f), "kNN k=3", black,
                                   (keyer_color){1, 1, 1, 0.8f}, &err), &err);

    /* a kNN graph of fixed points after two updates, edges as curves */
    keyer_knn_params kp = keyer_knn_params_defaults();
    kp.k = 3;
    keyer_knn_graph *g = NULL;
    assert_int_equal(keyer_knn_graph_create(&kp, KNN_POINTS, &g, &err), KEYER_OK);
    uint32_t ids[KNN_POINTS];
    float xy[2 * KNN_POINTS];
    keyer_knn_edge edges[4 * KNN_POINTS];
    int ne = 0;
    for (int frame = 0; frame < 2; frame++) {
        knn_points(frame, sc, ids, xy);
        assert_int_equal(keyer_knn_graph_update(g, ids, xy, KNN_POINTS, edges,
                                                (int)(sizeof(edges) / sizeof(edges[0])), &ne, &err),
                         KEYER_OK);
    }
    assert_true(ne > 0);
    for (int e = 0; e < ne; e++) {
        int a = (int)(edges[e].a - 100) / 3, b = (int)(edges[e].b - 100) / 3;
        add_ok(keyer_overlay_add_curve(ov, xy[2 * a], xy[2 * a + 1], xy[2 * b], xy[2 * b + 1],
                                       0.15f, S(1.5f), cyan, &err), &err);
    }
    add_ok(keyer_overlay_add_points(ov, xy, KNN_POINTS, S(2.5f), cyan, &err), &err);
    keyer_knn_graph_destroy(&g);
}

/* Opaque 16-pixel checks of two slate tones with a darker band along the left edge. */
static keyer_frame *background(int w, int h)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGBA, w, h, NULL, NULL), KEYER_OK);
    for (int y = 0; y < h; y++) {
        uint8_t *d = f->data[0] + y * f->stride[0];
        for (int x = 0; x < w; x++, d += 4) {
            int light = ((x / 16) ^ (y / 16)) & 1;
            d[0] = (uint8_t)(light ? 92 : 64);
            d[1] = (uint8_t)(light ? 104 : 72);
            d[2] = (uint8_t)(light ? 120 : 88);
            if (x < 8)
                d[0] = d[1] = d[2] = 24;
            d[3] = 255;
        }
    }
    return f;
}

static void render_and_check(int w, int h)
{
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(1024, &ov, &err), KEYER_OK);
    scene_scale sc = {(float)w / 320, (float)h / 240, 0};
    sc.s = fminf(sc.sx, sc.sy);
    build_scene(ov, &sc);
    keyer_frame *f = background(w, h);
    if (keyer_overlay_render(ov, f, &err))
        fail_msg("rendering %dx%d: %s", w, h, err.message);
    char name[64], msg[640];
    snprintf(name, sizeof(name), "overlay_scene_%dx%d", w, h);
    print_message("%s: %d primitives\n", name, keyer_overlay_count(ov));
    int rc = kt_golden_check(f, name, 1, msg, sizeof(msg));
    print_message("%s\n", msg);
    if (rc)
        fail_msg("%s", msg);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

static void test_scene_320x240(void **state)
{
    (void)state;
    render_and_check(320, 240);
}

/* Odd width and height: partial tiles on both axes, the scene squeezed unevenly. */
static void test_scene_213x161(void **state)
{
    (void)state;
    render_and_check(213, 161);
}

/* Rendering the same scene twice into fresh frames gives identical pixels (no state carried
 * between renders, e.g. in tile lists), so the goldens test the scene and nothing else. */
static void test_scene_repeatable(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(1024, &ov, &err), KEYER_OK);
    scene_scale big = {2, 2, 2}, sc = {1, 1, 1};
    build_scene(ov, &big); /* a larger frame first: the tile grid grows, then shrinks */
    keyer_frame *f0 = background(640, 480);
    assert_int_equal(keyer_overlay_render(ov, f0, &err), KEYER_OK);
    keyer_frame *f1 = background(320, 240), *f2 = background(320, 240);
    build_scene(ov, &sc);
    assert_int_equal(keyer_overlay_render(ov, f1, &err), KEYER_OK);
    build_scene(ov, &sc);
    assert_int_equal(keyer_overlay_render(ov, f2, &err), KEYER_OK);
    for (int y = 0; y < 240; y++)
        assert_memory_equal(f1->data[0] + y * f1->stride[0], f2->data[0] + y * f2->stride[0],
                            320 * 4);
    keyer_frame_destroy(&f0);
    keyer_frame_destroy(&f1);
    keyer_frame_destroy(&f2);
    keyer_overlay_destroy(&ov);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scene_320x240),
        cmocka_unit_test(test_scene_213x161),
        cmocka_unit_test(test_scene_repeatable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
