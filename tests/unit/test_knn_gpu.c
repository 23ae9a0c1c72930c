/*
 * The CUDA kNN graph against the CPU graph, edge for edge and in order, over consecutive
 * frames (hysteresis): random sets (uniform, clustered, lattice with exact ties, duplicate
 * positions, NaN / infinite / far points) at several k / max_degree / max_dy, 5,000 and 50,000
 * points, face-mesh landmarks of the test photos; then repeated ids, an empty frame, the output
 * capacity and a stream. KEYER_KNN_GPU_QUICK=1 (e.g. under compute-sanitizer): small sets only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/overlay.h"
#include "kt_knn.h"

static int quick(void)
{
    const char *q = getenv("KEYER_KNN_GPU_QUICK");
    return q && *q == '1';
}

/* Runs @p frames frames through a CPU and a CUDA graph; every frame's edges must be equal.
 * kind KT_KNN_SETS: the given points, moved by kt_knn_jitter(UNIFORM) between frames. */
static void check(const keyer_knn_params *p, kt_knn_set kind, int n, int frames, uint32_t seed,
                  uint32_t *ids, float *xy, const char *name)
{
    keyer_error err = {0};
    keyer_knn_params pc = *p, pg = *p;
    pc.cuda = 0;
    pg.cuda = 1;
    keyer_knn_graph *gc = NULL, *gg = NULL;
    assert_int_equal(keyer_knn_graph_create(&pc, n, &gc, &err), KEYER_OK);
    if (keyer_knn_graph_create(&pg, n, &gg, &err))
        fail_msg("%s", err.message);
    size_t cap = (size_t)n * (size_t)p->max_degree;
    keyer_knn_edge *a = malloc(cap * sizeof(*a)), *b = malloc(cap * sizeof(*b));
    assert_true(a && b);
    if (kind != KT_KNN_SETS)
        kt_knn_points(kind, n, seed, ids, xy);
    int na = 0, nb = 0;
    for (int f = 0; f < frames; f++) {
        if (f > 0)
            kt_knn_jitter(kind == KT_KNN_SETS ? KT_KNN_UNIFORM : kind, n, seed * 31 + (uint32_t)f,
                          xy);
        if (keyer_knn_graph_update(gc, ids, xy, n, a, (int)cap, &na, &err))
            fail_msg("cpu: %s", err.message);
        if (keyer_knn_graph_update(gg, ids, xy, n, b, (int)cap, &nb, &err))
            fail_msg("cuda: %s", err.message);
        int d = kt_knn_first_difference(a, na, b, nb);
        if (d >= 0)
            fail_msg("%s n=%d k=%d max_degree=%d max_dy=%g frame %d: edge %d differs (cpu %d, "
                     "cuda %d edges; cpu %u-%u, cuda %u-%u)",
                     name, n, p->k, p->max_degree, (double)p->max_dy, f, d, na, nb,
                     d < na ? a[d].a : 0, d < na ? a[d].b : 0, d < nb ? b[d].a : 0,
                     d < nb ? b[d].b : 0);
    }
    printf("  %-10s n=%-6d k=%d max_degree=%d max_dy=%-3g: %d frames equal, %d edges\n", name, n,
           p->k, p->max_degree, (double)p->max_dy, frames, na);
    assert_true(n < 10 || na > 0);
    free(a);
    free(b);
    keyer_knn_graph_destroy(&gc);
    keyer_knn_graph_destroy(&gg);
}

static void test_sets(void **state)
{
    (void)state;
    const int n = quick() ? 600 : 5000;
    uint32_t *ids = malloc(50000 * sizeof(uint32_t));
    float *xy = malloc(50000 * 2 * sizeof(float));
    assert_true(ids && xy);
    static const struct {
        int k, max_degree;
        float max_dy, hysteresis;
    } cfg[] = {{3, 4, 0, 0.2f}, {5, 4, 0, 0.2f}, {1, 2, 0, 0.0f}, {5, 5, 40, 0.5f},
               {20, 3, 0, 0.2f}, {2, 6, 3, 0.1f}};
    for (int kind = 0; kind < KT_KNN_SETS; kind++)
        for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
            keyer_knn_params p = keyer_knn_params_defaults();
            p.k = cfg[c].k;
            p.max_degree = cfg[c].max_degree;
            p.max_dy = cfg[c].max_dy;
            p.hysteresis = cfg[c].hysteresis;
            check(&p, (kt_knn_set)kind, n, 5, (uint32_t)(kind * 10 + (int)c), ids, xy,
                  kt_knn_set_name((kt_knn_set)kind));
        }
    if (!quick()) {
        keyer_knn_params p = keyer_knn_params_defaults();
        p.k = 5;
        check(&p, KT_KNN_UNIFORM, 50000, 4, 1, ids, xy, "uniform");
        check(&p, KT_KNN_CLUSTERED, 50000, 4, 2, ids, xy, "clustered");
        check(&p, KT_KNN_LATTICE, 50000, 4, 3, ids, xy, "lattice");
    }
    /* Tiny frames: 1, 2, 3 points; all on one spot. */
    keyer_knn_params p = keyer_knn_params_defaults();
    for (int m = 1; m <= 3; m++)
        check(&p, KT_KNN_UNIFORM, m, 3, 5, ids, xy, "tiny");
    for (int i = 0; i < 64; i++) {
        ids[i] = (uint32_t)(900 - i);
        xy[2 * i] = 7;
        xy[2 * i + 1] = 9;
    }
    check(&p, KT_KNN_SETS, 64, 1, 0, ids, xy, "one spot");
    free(ids);
    free(xy);
}

static void test_face_mesh(void **state)
{
    (void)state;
    const int faces = quick() ? 4 : 40, n = faces * 468;
    uint32_t *ids = malloc((size_t)n * sizeof(uint32_t));
    float *xy = malloc((size_t)n * 2 * sizeof(float));
    assert_true(ids && xy);
    if (kt_knn_face_points(faces, ids, xy)) {
        free(ids);
        free(xy);
        skip();
    }
    keyer_knn_params p = keyer_knn_params_defaults();
    p.k = 5;
    check(&p, KT_KNN_SETS, n, 4, 9, ids, xy, "face mesh");
    free(ids);
    free(xy);
}

static void test_arguments(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_knn_params p = keyer_knn_params_defaults();
    p.cuda = 1;
    p.cuda_device = 1000;
    keyer_knn_graph *g = NULL;
    assert_int_equal(keyer_knn_graph_create(&p, 8, &g, &err), KEYER_STATUS_DEVICE);
    assert_null(g);
    p.cuda_device = 0;
    assert_int_equal(keyer_knn_graph_create(&p, 8, &g, &err), KEYER_OK);
    cudaStream_t stream;
    assert_int_equal(cudaStreamCreate(&stream), cudaSuccess);
    assert_int_equal(keyer_knn_graph_set_stream(g, stream, &err), KEYER_OK);
    uint32_t ids[4] = {1, 2, 3, 4}, dup[4] = {1, 2, 3, 2};
    float xy[8] = {0, 0, 10, 0, 20, 0, 30, 0};
    keyer_knn_edge e1[32], e2[32];
    int n1 = 0, n2 = 0;
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e1, 32, &n1, &err), KEYER_OK);
    assert_int_equal(n1, 3); /* k 3 on a line of 4: the three gaps */
    assert_int_equal(keyer_knn_graph_update(g, dup, xy, 4, e2, 32, &n2, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "id 2 appears twice"));
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e2, 32, &n2, &err), KEYER_OK);
    assert_int_equal(kt_knn_first_difference(e1, n1, e2, n2), -1);
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e2, 2, &n2, &err), KEYER_OK);
    assert_int_equal(n2, 2);
    /* An empty frame drops every edge; the next frame starts afresh. */
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 0, e2, 32, &n2, &err), KEYER_OK);
    assert_int_equal(n2, 0);
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 4, e2, 32, &n2, &err), KEYER_OK);
    assert_int_equal(kt_knn_first_difference(e1, n1, e2, n2), -1);
    assert_int_equal(keyer_knn_graph_update(g, ids, xy, 5, e2, 32, &n2, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_knn_graph_destroy(&g);
    assert_null(g);
    assert_int_equal(cudaStreamDestroy(stream), cudaSuccess);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sets),
        cmocka_unit_test(test_face_mesh),
        cmocka_unit_test(test_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
