/*
 * The mixed-precision plan of f16 instances (nn/precision_plan.h) on the shipped models (CPU:
 * the plan reads only the graph).
 *  - the pose landmark models get a mixed plan: float32 for exactly the nodes that an output
 *    other than the body mask depends on (closed under their inputs, every such node in it),
 *    half for the rest, which only the mask reads; the mask's own node is half;
 *  - every other shipped model runs all in half (no float32 node): the selfie models and
 *    u2netp (masks only, or every node under the outputs), the face and pose detectors and the
 *    face mesh (no mask output), pose-heavy (its float32 part would hold 84% of the
 *    activations, over KR_PRECISION_PLAN_MAX_F32_SHARE);
 *  - the plan is the same on a second call (deterministic per model) and frees cleanly.
 * A model whose file is absent (pose-heavy where it was not fetched) is skipped with a line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/precision_plan.h"

static int is_mask(const kr_tensor *t)
{
    return t->dtype == KR_DTYPE_F32 && t->rank == 4 && t->dims[3] == 1 &&
           t->dims[1] * t->dims[2] > 1;
}

/* Whether node @p n's output is read (transitively, through any node) by an output other than
 * a mask: the independent oracle of the plan's float32 set, by forward reachability. */
static int reaches_other_output(const kr_graph *g, int n, unsigned char *seen)
{
    if (seen[n])
        return seen[n] == 2;
    seen[n] = 1;
    const kr_node *node = &g->nodes[n];
    for (int o = 0; o < node->n_outputs; o++) {
        int t = node->outputs[o];
        if (t < 0)
            continue;
        if (g->tensors[t].graph_output >= 0 && !is_mask(&g->tensors[t])) {
            seen[n] = 2;
            return 1;
        }
        for (int m = n + 1; m < g->n_nodes; m++)
            for (int i = 0; i < g->nodes[m].n_inputs; i++)
                if (g->nodes[m].inputs[i] == t && reaches_other_output(g, m, seen)) {
                    seen[n] = 2;
                    return 1;
                }
    }
    return 0;
}

static void check_model(const char *name, int want_mixed)
{
    char path[1024];
    keyer_error err = {0};
    if (keyer_registry_resolve(name, path, sizeof(path), &err)) {
        printf("%-18s skipped: %s\n", name, err.message);
        return;
    }
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err)) {
        printf("%-18s skipped: %s\n", name, err.message);
        return;
    }
    const kr_graph *g = kr_model_graph(m);
    kr_precision_plan a, b;
    assert_int_equal(kr_precision_plan_make(g, &a, &err), KEYER_OK);
    assert_int_equal(kr_precision_plan_make(g, &b, &err), KEYER_OK);
    printf("%-18s %3d nodes, %3d in float32: %s\n", name, g->n_nodes, a.n_f32, a.summary);
    assert_int_equal(a.n_f32, b.n_f32);
    if (!want_mixed) {
        assert_int_equal(a.n_f32, 0);
        assert_null(a.f32);
    } else {
        assert_non_null(a.f32);
        assert_true(a.n_f32 > 0 && a.n_f32 < g->n_nodes);
        assert_memory_equal(a.f32, b.f32, (size_t)g->n_nodes);
        unsigned char *seen = calloc((size_t)g->n_nodes, 1);
        assert_non_null(seen);
        int count = 0;
        for (int n = 0; n < g->n_nodes; n++) {
            int want = reaches_other_output(g, n, seen);
            if (want != a.f32[n])
                fail_msg("%s: node %d (%s): plan %d, reaches an output other than a mask %d",
                         name, n, kr_op_name(g->nodes[n].op), a.f32[n], want);
            count += a.f32[n];
            /* closed under inputs: a float32 node's activation inputs come from float32 nodes */
            for (int i = 0; a.f32[n] && i < g->nodes[n].n_inputs; i++) {
                int t = g->nodes[n].inputs[i];
                if (t >= 0 && g->tensors[t].producer >= 0)
                    assert_true(a.f32[g->tensors[t].producer]);
            }
        }
        assert_int_equal(count, a.n_f32);
        for (int i = 0; i < g->n_outputs; i++) {
            const kr_tensor *t = &g->tensors[g->outputs[i]];
            if (is_mask(t) && t->producer >= 0)
                assert_false(a.f32[t->producer]);
        }
        free(seen);
    }
    kr_precision_plan_free(&a);
    kr_precision_plan_free(&b);
    assert_null(a.f32);
    assert_int_equal(a.n_f32, 0);
    kr_precision_plan_free(NULL);
    keyer_model_destroy(&m);
}

static void test_shipped_models(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int mixed;
    } models[] = {
        {"pose-lite", 1},  {"pose-full", 1},        {"pose-heavy", 0},
        {"selfie", 0},     {"selfie-landscape", 0}, {"face-short", 0},
        {"face-full", 0},  {"pose-detect", 0},      {"face-mesh", 0},
        {"u2netp", 0},
    };
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        check_model(models[i].name, models[i].mixed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
