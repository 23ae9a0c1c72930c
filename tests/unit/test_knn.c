/*
 * The CPU kNN graph (a uniform grid) against the oracle that compares every pair
 * (tests/common/kt_knn.c: the implementation the grid replaced), edge for edge and in order,
 * over several frames (hysteresis): uniform, clustered, lattice (exact ties), duplicate
 * positions, NaN / infinite / far points, nearly all points on a few spots of a few cells
 * (dense), and face-mesh landmarks of the test photos; then
 * the arguments (no 4,096-point limit, repeated ids refused).
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
#include "kt_knn.h"

/* Runs @p frames frames of the set through the graph and the oracle; every frame's edges must
 * be equal. Returns the last frame's edge count. */
static int check(const keyer_knn_params *p, kt_knn_set kind, int n, int frames, uint32_t seed,
                 uint32_t *ids, float *xy)
{
    keyer_error err = {0};
    keyer_knn_graph *g = NULL;
    kt_knn_oracle *o = kt_knn_oracle_create(p, n > 0 ? n : 1);
    assert_non_null(o);
    assert_int_equal(keyer_knn_graph_create(p, n > 0 ? n : 1, &g, &err), KEYER_OK);
    size_t cap = (size_t)(n > 0 ? n : 1) * (size_t)p->max_degree;
    keyer_knn_edge *a = malloc(cap * sizeof(*a)), *b = malloc(cap * sizeof(*b));
    assert_true(a && b);
    if (kind != KT_KNN_SETS)
        kt_knn_points(kind, n, seed, ids, xy);
    int na = 0;
    for (int f = 0; f < frames; f++) {
        if (f > 0 && kind != KT_KNN_SETS)
            kt_knn_jitter(kind, n, seed * 31 + (uint32_t)f, xy);
        if (keyer_knn_graph_update(g, ids, xy, n, a, (int)cap, &na, &err))
            fail_msg("%s", err.message);
        int nb = kt_knn_oracle_update(o, ids, xy, n, b);
        int d = kt_knn_first_difference(a, na, b, nb);
        if (d >= 0)
            fail_msg("%s n=%d k=%d max_degree=%d max_dy=%g frame %d: edge %d differs (%d vs %d "
                     "edges; grid %u-%u, oracle %u-%u)",
                     kind == KT_KNN_SETS ? "given" : kt_knn_set_name(kind), n, p->k,
                     p->max_degree, (double)p->max_dy, f, d, na, nb, d < na ? a[d].a : 0,
                     d < na ? a[d].b : 0, d < nb ? b[d].a : 0, d < nb ? b[d].b : 0);
    }
    free(a);
    free(b);
    kt_knn_oracle_destroy(&o);
    keyer_knn_graph_destroy(&g);
    return na;
}

static void test_sets(void **state)
{
    (void)state;
    const int n = 3000;
    uint32_t *ids = malloc((size_t)n * sizeof(uint32_t));
    float *xy = malloc((size_t)n * 2 * sizeof(float));
    assert_true(ids && xy);
    static const struct {
        int k, max_degree;
        float max_dy, hysteresis;
    } cfg[] = {{3, 4, 0, 0.2f}, {5, 4, 0, 0.2f}, {1, 2, 0, 0.0f}, {5, 5, 40, 0.5f},
               {8, 3, 0, 0.2f}, {2, 6, 3, 0.1f}};
    for (int kind = 0; kind < KT_KNN_SETS; kind++)
        for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
            keyer_knn_params p = keyer_knn_params_defaults();
            p.k = cfg[c].k;
            p.max_degree = cfg[c].max_degree;
            p.max_dy = cfg[c].max_dy;
            p.hysteresis = cfg[c].hysteresis;
            int edges = check(&p, (kt_knn_set)kind, n, 4, (uint32_t)(kind * 10 + (int)c), ids, xy);
            printf("  %-10s n=%d k=%d max_degree=%d max_dy=%-3g: 4 frames equal, %d edges\n",
                   kt_knn_set_name((kt_knn_set)kind), n, p.k, p.max_degree, (double)p.max_dy,
                   edges);
            /* (the dense set's duplicates of one spot share their few nearest points, whose
             * degrees fill: far fewer edges) */
            assert_true(edges > (kind == KT_KNN_DENSE ? n / 16 : n / 4));
        }
    /* Small and degenerate frames: 0, 1, 2 points, all on one spot, all on a vertical line. */
    keyer_knn_params p = keyer_knn_params_defaults();
    p.k = 4;
    for (int m = 0; m <= 2; m++)
        check(&p, KT_KNN_UNIFORM, m, 2, 5, ids, xy);
    for (int i = 0; i < 50; i++) {
        ids[i] = (uint32_t)(50 - i);
        xy[2 * i] = 7;
        xy[2 * i + 1] = 9;
    }
    assert_true(check(&p, KT_KNN_SETS, 50, 2, 0, ids, xy) > 0);
    for (int i = 0; i < 50; i++)
        xy[2 * i + 1] = (float)(i % 7) * 2.5f;
    assert_true(check(&p, KT_KNN_SETS, 50, 2, 0, ids, xy) > 0);
    /* Coordinates so large that squared distances overflow: no edge between those. */
    for (int i = 0; i < 50; i++) {
        xy[2 * i] = (i % 2 ? 1e19f : -1e19f) + (float)i * 1e13f;
        xy[2 * i + 1] = (float)(i % 5);
    }
    check(&p, KT_KNN_SETS, 50, 2, 0, ids, xy);
    free(ids);
    free(xy);
}

/* Face-mesh landmarks: 40 faces of 468 points (18,720 points, more than the old limit). */
static void test_face_mesh(void **state)
{
    (void)state;
    const int faces = 40, n = faces * 468;
    uint32_t *ids = NULL;
    float *xy = NULL;
    kt_knn_face_crowd(faces, &ids, &xy);
    keyer_knn_params p = keyer_knn_params_defaults();
    p.k = 5;
    int edges = check(&p, KT_KNN_SETS, n, 1, 0, ids, xy);
    /* Second frame: every face moved by a few pixels (the hysteresis keeps and drops edges). */
    for (int i = 0; i < n; i++) {
        xy[2 * i] += (float)((i / 468) % 3) * 0.7f;
        xy[2 * i + 1] += (float)((i / 468) % 5) * -0.4f;
    }
    p.k = 3;
    check(&p, KT_KNN_SETS, n, 1, 0, ids, xy);
    printf("  face mesh: %d faces, %d points, k=5: %d edges equal to the oracle\n", faces, n,
           edges);
    free(ids);
    free(xy);
}

/* Hysteresis over frames with a fixed graph object (not recreated per frame): the sets above
 * run 4 frames each; here a long run where points wander, checked against the oracle. */
static void test_long_run(void **state)
{
    (void)state;
    const int n = 1500;
    uint32_t ids[1500];
    float xy[3000];
    keyer_knn_params p = keyer_knn_params_defaults();
    p.k = 4;
    p.max_degree = 3;
    p.hysteresis = 0.3f;
    check(&p, KT_KNN_CLUSTERED, n, 30, 77, ids, xy);
}

static void test_arguments(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_knn_params p = keyer_knn_params_defaults();
    keyer_knn_graph *g = NULL;
    /* No 4,096-point limit. */
    assert_int_equal(keyer_knn_graph_create(&p, 100000, &g, &err), KEYER_OK);
    keyer_knn_graph_destroy(&g);
    assert_null(g);
    p.k = 0;
    assert_int_equal(keyer_knn_graph_create(&p, 10, &g, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_knn_params_defaults();
    p.hysteresis = INFINITY;
    assert_int_equal(keyer_knn_graph_create(&p, 10, &g, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_knn_params_defaults();
    p.cuda = 2;
    assert_int_equal(keyer_knn_graph_create(&p, 10, &g, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_knn_graph_create(NULL, 10, &g, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* A repeated id is refused and leaves the graph as it was. */
    p = keyer_knn_params_defaults();
    assert_int_equal(keyer_knn_graph_create(&p, 8, &g, &err), KEYER_OK);
    uint32_t ids[4] = {1, 2, 3, 4}, dup[4] = {1, 2, 3, 2};
    float xy[8] = {0, 0, 10, 0, 20, 0, 30, 0};
    keyer_knn_edge e1[32], e2[32];
    int n1 = 0, n2 = 0;
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e1, 32, &n1, &err), KEYER_OK);
    assert_int_equal(n1, 6); /* k 3 on 4 points: every pair, degrees 3 <= 4 */
    assert_int_equal(keyer_knn_graph_update(g, dup, xy, 4, e2, 32, &n2, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "twice"));
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e2, 32, &n2, &err), KEYER_OK);
    assert_int_equal(kt_knn_first_difference(e1, n1, e2, n2), -1);
    /* capacity below the edge count: the first capacity edges. */
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e2, 2, &n2, &err), KEYER_OK);
    assert_int_equal(n2, 2);
    assert_int_equal(kt_knn_first_difference(e1, 2, e2, 2), -1);
    assert_int_equal(keyer_knn_graph_set_stream(g, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_knn_graph_set_stream(NULL, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_knn_graph_destroy(&g);
    keyer_knn_graph_destroy(NULL);
#ifndef KEYER_HAVE_CUDA
    p.cuda = 1;
    assert_int_equal(keyer_knn_graph_create(&p, 8, &g, &err), KEYER_STATUS_UNSUPPORTED);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sets),
        cmocka_unit_test(test_face_mesh),
        cmocka_unit_test(test_long_run),
        cmocka_unit_test(test_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
