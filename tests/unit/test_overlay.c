/* Overlay rendering (coverage, compositing, tiles, YUV conversion) and the kNN graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/overlay.h"

static keyer_frame *rgba_frame(int w, int h, uint8_t v)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGBA, w, h, NULL, NULL), KEYER_OK);
    for (int y = 0; y < h; y++)
        memset(f->data[0] + y * f->stride[0], v, (size_t)w * 4);
    return f;
}

static const uint8_t *px(const keyer_frame *f, int x, int y)
{
    return f->data[0] + y * f->stride[0] + x * 4;
}

static void test_box_and_line_rgba(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(16, &ov, &err), KEYER_OK);
    keyer_frame *f = rgba_frame(301, 157, 0); /* odd size, several tiles */
    keyer_color red = {1, 0, 0, 1}, half_blue = {0, 0, 1, 0.5f};
    /* A box spanning tile borders: 4 px red stroke, half-transparent blue fill. */
    assert_int_equal(keyer_overlay_add_box(ov, 40, 30, 200, 120, 10, 4, red, half_blue, &err),
                     KEYER_OK);
    /* A green 3 px horizontal line crossing three tiles. */
    keyer_color green = {0, 1, 0, 1};
    assert_int_equal(keyer_overlay_add_line(ov, 10, 140.5f, 290, 140.5f, 3, green, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    /* Inside the fill, far from the stroke: blue at half intensity over black. */
    const uint8_t *c = px(f, 120, 75);
    assert_int_equal(c[0], 0);
    assert_int_equal(c[2], 128);
    assert_int_equal(c[3], 128);
    /* On the stroke (the left edge at x = 40): opaque red. */
    c = px(f, 40, 75);
    assert_int_equal(c[0], 255);
    assert_int_equal(c[3], 255);
    /* Rounded corner: the exact corner pixel lies outside the rounded outline. */
    c = px(f, 36, 26);
    assert_int_equal(c[3], 0);
    /* The line is continuous across tile borders (x = 63, 64, 127, 128). */
    int xs[] = {63, 64, 127, 128, 200};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(px(f, xs[i], 140)[1], 255);
        assert_int_equal(px(f, xs[i], 139)[1], 255);
        assert_int_equal(px(f, xs[i], 141)[1], 255);
        /* Anti-aliasing: half coverage one pixel beyond the half width. */
        assert_int_equal(px(f, xs[i], 138)[1], 0);
    }
    /* Untouched far away. */
    assert_int_equal(px(f, 280, 10)[3], 0);
    /* Anti-aliased edge of the line's round cap at x = 290 + 1.5: partial coverage. */
    uint8_t edge = px(f, 291, 140)[1];
    assert_true(edge > 0 && edge < 255);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

static void test_curve_and_order(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(200, &ov, &err), KEYER_OK);
    keyer_frame *f = rgba_frame(128, 128, 0);
    keyer_color white = {1, 1, 1, 1}, black = {0, 0, 0, 1};
    /* bend 0.25 on a horizontal chord pushes the control point by 0.25 * 100 = 25 px, so the
     * curve's apex is 12.5 px from the chord. */
    assert_int_equal(keyer_overlay_add_curve(ov, 14, 64, 114, 64, 0.25f, 2, white, &err), KEYER_OK);
    assert_true(keyer_overlay_count(ov) > 4);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    assert_int_equal(px(f, 64, 76)[0], 255); /* apex at y = 64 + 12.5 */
    assert_int_equal(px(f, 64, 64)[3], 0);   /* the chord itself is empty */
    /* Later primitives are drawn over earlier ones. */
    keyer_overlay_clear(ov);
    assert_int_equal(keyer_overlay_add_dot(ov, 20, 20, 5, white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_add_dot(ov, 20, 20, 3, black, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    assert_int_equal(px(f, 20, 20)[0], 0);
    assert_int_equal(px(f, 23, 20)[0], 255); /* 3.5 px out: inside white, outside black */
    /* Capacity and bad values. */
    keyer_overlay_clear(ov);
    assert_int_equal(keyer_overlay_add_line(ov, 0, 0, NAN, 1, 1, white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_overlay_add_box(ov, 10, 10, 5, 20, 0, 1, white, white, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
    assert_int_equal(keyer_overlay_create(1, &ov, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_add_dot(ov, 1, 1, 1, white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_add_dot(ov, 1, 1, 1, white, &err), KEYER_STATUS_OUT_OF_MEMORY);
    assert_non_null(strstr(err.message, "capacity"));
    keyer_overlay_destroy(&ov);
}

static void test_nv12(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_overlay *ov = NULL;
    keyer_frame *f = NULL;
    assert_int_equal(keyer_overlay_create(4, &ov, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NV12, 99, 65, NULL, &err), KEYER_OK);
    f->matrix = KEYER_COLOR_MATRIX_BT709;
    f->range = KEYER_COLOR_RANGE_LIMITED;
    for (int y = 0; y < 65; y++)
        memset(f->data[0] + y * f->stride[0], 16, 99);
    for (int y = 0; y < 33; y++)
        memset(f->data[1] + y * f->stride[1], 128, 100);
    keyer_color white = {1, 1, 1, 1}, red = {1, 0, 0, 1};
    assert_int_equal(keyer_overlay_add_box(ov, 10, 10, 40, 40, 0, 0, white, white, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_add_box(ov, 60, 10, 90, 40, 0, 0, red, red, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_OK);
    assert_int_equal(f->data[0][20 * f->stride[0] + 20], 235); /* white: Y 235, UV 128 */
    assert_int_equal(f->data[1][10 * f->stride[1] + 20], 128);
    /* BT.709 limited red: Y = 16 + 219 * 0.2126 = 62.6, Cr = 128 + 224 * 0.5 = 240. */
    assert_int_equal(f->data[0][20 * f->stride[0] + 70], 63);
    assert_int_equal(f->data[1][10 * f->stride[1] + 2 * 35 + 1], 240);
    assert_int_equal(f->data[0][50 * f->stride[0] + 50], 16);
    /* Unsupported format. */
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_GRAYF32, 8, 8, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_render(ov, f, &err), KEYER_STATUS_UNSUPPORTED);
    keyer_frame_destroy(&f);
    keyer_overlay_destroy(&ov);
}

static int edge_present(const keyer_knn_edge *e, int n, uint32_t a, uint32_t b)
{
    for (int i = 0; i < n; i++)
        if (e[i].a == a && e[i].b == b)
            return 1;
    return 0;
}

static void test_knn_hysteresis(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_knn_params p = keyer_knn_params_defaults();
    p.k = 1;
    p.max_degree = 2;
    keyer_knn_graph *g = NULL;
    assert_int_equal(keyer_knn_graph_create(&p, 8, &g, &err), KEYER_OK);
    uint32_t ids[3] = {7, 8, 9};
    /* Point 9 sits between 7 and 8, slightly closer to 7. */
    float xy[6] = {0, 0, 100, 0, 49, 0};
    keyer_knn_edge e[8];
    int n = 0;
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 3, e, 8, &n, &err), KEYER_OK);
    assert_true(edge_present(e, n, 7, 9));
    assert_true(edge_present(e, n, 8, 9)); /* 8's nearest is 9 */
    assert_false(edge_present(e, n, 7, 8));
    /* 9 drifts to be slightly closer to 8: edges stay (no flicker) ... */
    xy[4] = 52;
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 3, e, 8, &n, &err), KEYER_OK);
    assert_true(edge_present(e, n, 7, 9));
    assert_true(edge_present(e, n, 8, 9));
    /* max_dy removes edges between points far apart vertically. */
    keyer_knn_graph_destroy(&g);
    p.max_dy = 10;
    assert_int_equal(keyer_knn_graph_create(&p, 8, &g, &err), KEYER_OK);
    float xy2[6] = {0, 0, 5, 50, 10, 3};
    assert_int_equal(keyer_knn_graph_update(g, ids, xy2, 3, e, 8, &n, &err), KEYER_OK);
    assert_true(edge_present(e, n, 7, 9));
    assert_false(edge_present(e, n, 7, 8));
    assert_false(edge_present(e, n, 8, 9));
    /* Too many points for the graph. */
    uint32_t many_ids[9] = {0};
    float many_xy[18] = {0};
    assert_int_equal(keyer_knn_graph_update(g, many_ids, many_xy, 9, e, 8, &n, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_knn_graph_destroy(&g);
    assert_null(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_box_and_line_rgba),
        cmocka_unit_test(test_curve_and_order),
        cmocka_unit_test(test_nv12),
        cmocka_unit_test(test_knn_hysteresis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
