/*
 * The memory planner (src/nn/planner.c). Every plan is checked by an independent liveness
 * computation: each storage tensor (views resolved to their source) is live from the first node
 * that touches it (before node 0 for graph inputs) to the last node that touches it or any view
 * of it (after the last node for graph outputs); no two storages live at the same time may share
 * a byte, every offset is 64-byte aligned, views sit at their source's offset, constants are not
 * placed, and the arena holds everything. Graphs: chains, branches with views and outputs used
 * inside the graph, 300 random DAGs (every third with random live windows,
 * kr_plan_create_windows: those tensors also live over them, planned afresh and keeping the
 * plan without windows, where a tensor moves only above that plan's arena), and the shipped
 * models (arena vs the naive sum printed).
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
#include "kt_graph.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/planner.h"
#include "testutil.h"

typedef struct plan_stats {
    size_t naive;    /* sum of all storage sizes (no sharing) */
    size_t max_live; /* the largest sum of sizes live at one time: no plan can do better */
} plan_stats;

static int storage_of(const kr_graph *g, int t)
{
    int hops = 0;
    while (g->tensors[t].view_of >= 0) {
        t = g->tensors[t].view_of;
        assert_true(++hops <= g->n_tensors);
    }
    return t;
}

/* Checks @p plan against an independent liveness computation, with the live windows @p wfrom
 * / @p wto (kr_plan_create_windows; NULL: none); returns sizes for reporting. */
static plan_stats check_plan_windows(const kr_graph *g, const kr_plan *plan, int batch, int slack,
                                     const int *wfrom, const int *wto)
{
    int nt = g->n_tensors;
    assert_int_equal(plan->n_tensors, nt);
    assert_int_equal(plan->batch, batch);
    int *first = malloc((size_t)nt * sizeof(int)), *last = malloc((size_t)nt * sizeof(int));
    assert_true(first && last);
    for (int t = 0; t < nt; t++) {
        first[t] = g->n_nodes + 1;
        last[t] = -2;
    }
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        for (int i = 0; i < node->n_inputs + node->n_outputs; i++) {
            int t = i < node->n_inputs ? node->inputs[i] : node->outputs[i - node->n_inputs];
            if (t < 0 || kr_tensor_is_const(&g->tensors[t]))
                continue;
            int s = storage_of(g, t);
            first[s] = n < first[s] ? n : first[s];
            last[s] = n > last[s] ? n : last[s];
        }
    }
    for (int t = 0; t < nt; t++) /* the slack keeps storage live after the last reader */
        if (last[t] >= 0 && last[t] < g->n_nodes - 1)
            last[t] = last[t] + slack < g->n_nodes - 1 ? last[t] + slack : g->n_nodes - 1;
    for (int i = 0; i < g->n_inputs; i++)
        first[storage_of(g, g->inputs[i])] = -1;
    for (int i = 0; i < g->n_outputs; i++)
        last[storage_of(g, g->outputs[i])] = g->n_nodes;
    for (int t = 0; wfrom && t < nt; t++) { /* windows: live over them too */
        if (kr_tensor_is_const(&g->tensors[t]) || wfrom[t] > wto[t])
            continue;
        int s = storage_of(g, t);
        first[s] = wfrom[t] < first[s] ? wfrom[t] : first[s];
        last[s] = wto[t] > last[s] ? wto[t] : last[s];
    }
    plan_stats st = {0, 0};
    for (int t = 0; t < nt; t++) {
        const kr_tensor *x = &g->tensors[t];
        if (kr_tensor_is_const(x)) {
            assert_true(plan->offsets[t] == SIZE_MAX);
            continue;
        }
        int s = storage_of(g, t);
        assert_true(plan->offsets[t] == plan->offsets[s]); /* views share their source */
        if (s != t)
            continue;
        size_t bytes = kr_tensor_bytes(x, batch);
        assert_int_equal(plan->offsets[t] % KR_PLAN_ALIGNMENT, 0);
        assert_true(plan->offsets[t] + bytes <= plan->arena_bytes);
        st.naive += bytes;
        if (last[t] < first[t]) /* never touched: no constraint */
            continue;
        for (int u = t + 1; u < nt; u++) {
            if (kr_tensor_is_const(&g->tensors[u]) || storage_of(g, u) != u || last[u] < first[u])
                continue;
            if (last[t] < first[u] || last[u] < first[t])
                continue; /* not live together */
            size_t ub = kr_tensor_bytes(&g->tensors[u], batch);
            size_t a0 = plan->offsets[t], a1 = a0 + bytes, b0 = plan->offsets[u], b1 = b0 + ub;
            if (a0 < b1 && b0 < a1)
                fail_msg("%s: tensors %d '%s' [%zu,%zu) and %d '%s' [%zu,%zu) overlap while both "
                         "are live (nodes %d..%d and %d..%d)",
                         g->name, t, x->name, a0, a1, u, g->tensors[u].name, b0, b1, first[t],
                         last[t], first[u], last[u]);
        }
    }
    for (int n = -1; n <= g->n_nodes; n++) {
        size_t live = 0;
        for (int t = 0; t < nt; t++)
            if (!kr_tensor_is_const(&g->tensors[t]) && storage_of(g, t) == t && first[t] <= n &&
                n <= last[t])
                live += kr_tensor_bytes(&g->tensors[t], batch);
        st.max_live = live > st.max_live ? live : st.max_live;
    }
    assert_true(plan->arena_bytes >= st.max_live);
    free(first);
    free(last);
    return st;
}

static plan_stats check_plan(const kr_graph *g, const kr_plan *plan, int batch, int slack)
{
    return check_plan_windows(g, plan, batch, slack, NULL, NULL);
}

/* A chain input -> RELU -> RELU -> ... of @p n equal tensors: the input keeps its slot (it
 * survives a run) and the rest ping-pong in two more. */
static void test_chain(void **state)
{
    (void)state;
    kt_graph b;
    const int n = 10, dims[4] = {1, 16, 16, 8};
    kt_graph_begin(&b, "chain", n + 1, n, 0);
    int prev = kt_graph_act(&b, 4, dims);
    kt_graph_input(&b, prev);
    for (int i = 0; i < n; i++) {
        int y = kt_graph_act(&b, 4, dims);
        kt_graph_node(&b, i % 2 ? KR_OP_RELU6 : KR_OP_RELU, 1, &prev, y);
        prev = y;
    }
    kt_graph_output(&b, prev);
    kr_graph *g = kt_graph_build(&b);
    size_t one = 16 * 16 * 8 * sizeof(float);
    for (int batch = 1; batch <= 3; batch++) {
        kr_plan plan;
        keyer_error err = {0};
        assert_int_equal(kr_plan_create(g, batch, 0, &plan, &err), KEYER_OK);
        plan_stats st = check_plan(g, &plan, batch, 0);
        printf("chain of %d, batch %d: arena %zu bytes, naive sum %zu\n", n, batch,
               plan.arena_bytes, st.naive);
        assert_int_equal(st.naive, (size_t)(n + 1) * one * batch);
        assert_true(plan.arena_bytes < st.naive);
        assert_int_equal(plan.arena_bytes, 3 * one * batch); /* the optimum */
        for (int t = 1; t < g->n_tensors; t++) /* nothing shares the input's bytes */
            assert_true(plan.offsets[t] >= plan.offsets[0] + one * batch ||
                        plan.offsets[t] + one * batch <= plan.offsets[0]);
        kr_plan_destroy(&plan);
        kr_plan_destroy(&plan); /* a destroyed plan may be destroyed again */
    }
    kr_graph_destroy(&g);
}

/* Views extend their source's life; an output read inside the graph lives to the end;
 * constants are not placed. */
static void test_views_and_outputs(void **state)
{
    (void)state;
    kt_graph b;
    kt_graph_begin(&b, "views", 16, 8, 256);
    int big[4] = {1, 8, 8, 16}, flat[2] = {1, 1024};
    int x = kt_graph_act(&b, 4, big);
    int a = kt_graph_act(&b, 4, big);
    kt_graph_node(&b, KR_OP_RELU, 1, &x, a);                 /* 0: a = relu(x) */
    int v = kt_graph_act(&b, 2, flat);
    kt_graph_node(&b, KR_OP_RESHAPE, 1, &a, v);              /* 1: v = view of a */
    int c = kt_graph_act(&b, 4, big);
    kt_graph_node(&b, KR_OP_RELU6, 1, &x, c);                /* 2: c = relu6(x) */
    int pads[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int pd[2] = {4, 2};
    int p = kt_graph_const(&b, KR_DTYPE_I32, 2, pd, pads);
    int cin[2] = {c, p};
    int d = kt_graph_act(&b, 4, big);
    kt_graph_node(&b, KR_OP_PAD, 2, cin, d);                 /* 3: d = pad(c) (no-op pad) */
    int v2 = kt_graph_act(&b, 2, flat);
    kt_graph_node(&b, KR_OP_LOGISTIC, 1, &v, v2);            /* 4: last read of v (so of a) */
    int hs[1] = {d};
    int e = kt_graph_act(&b, 4, big);
    kt_graph_node(&b, KR_OP_HARD_SWISH, 1, hs, e);           /* 5: e = hswish(d) */
    int f = kt_graph_act(&b, 4, big);
    int add_in[2] = {e, x};
    kt_graph_node(&b, KR_OP_ADD, 2, add_in, f);              /* 6: f = e + x */
    kt_graph_input(&b, x);
    kt_graph_output(&b, v2);                                 /* output, not read again */
    kt_graph_output(&b, f);
    kt_graph_output(&b, d);                                  /* output that node 5 reads */
    kr_graph *g = kt_graph_build(&b);
    kr_plan plan;
    keyer_error err = {0};
    assert_int_equal(kr_plan_create(g, 2, 0, &plan, &err), KEYER_OK);
    plan_stats st = check_plan(g, &plan, 2, 0);
    assert_true(plan.offsets[v] == plan.offsets[a]);
    assert_true(plan.offsets[p] == SIZE_MAX);
    printf("views graph: arena %zu, naive %zu, max live %zu\n", plan.arena_bytes, st.naive,
           st.max_live);
    assert_true(plan.arena_bytes < st.naive);
    kr_plan_destroy(&plan);
    kr_graph_destroy(&g);
}

/* Random DAGs of RELU / ADD / CONCATENATION / PAD / RESHAPE over [1,4,4,C] tensors. */
static void test_random_graphs(void **state)
{
    (void)state;
    kt_rng rng = kt_rng_seed(2024);
    size_t total_arena = 0, total_naive = 0, total_live = 0;
    for (int gi = 0; gi < 300; gi++) {
        kt_graph b;
        int n_nodes = 1 + (int)(kt_rng_next(&rng) % 30);
        kt_graph_begin(&b, "random", 2 * n_nodes + 8, n_nodes, 1024);
        int acts[80], chans[80], n_acts = 0;
        int n_in = 1 + (int)(kt_rng_next(&rng) % 3);
        for (int i = 0; i < n_in; i++) {
            int cdim = 1 + (int)(kt_rng_next(&rng) % 16);
            acts[n_acts] = kt_graph_act(&b, 4, (int[]){1, 4, 4, cdim});
            chans[n_acts] = cdim;
            kt_graph_input(&b, acts[n_acts++]);
        }
        for (int n = 0; n < n_nodes; n++) {
            int i0 = (int)(kt_rng_next(&rng) % (unsigned)n_acts);
            int i1 = (int)(kt_rng_next(&rng) % (unsigned)n_acts);
            int kind = (int)(kt_rng_next(&rng) % 5);
            int cdim = chans[i0], y;
            if (kind == 1 && chans[i1] == cdim) {
                y = kt_graph_act(&b, 4, (int[]){1, 4, 4, cdim});
                kt_graph_node(&b, KR_OP_ADD, 2, (int[]){i0 == i1 ? acts[i0] : acts[i0], acts[i1]},
                              y);
            } else if (kind == 2 && cdim + chans[i1] <= 64) {
                cdim += chans[i1];
                y = kt_graph_act(&b, 4, (int[]){1, 4, 4, cdim});
                kr_node *node = kt_graph_node(&b, KR_OP_CONCATENATION, 2,
                                              (int[]){acts[i0], acts[i1]}, y);
                node->p.concat.axis = 3;
            } else if (kind == 3 && cdim < 60) {
                int32_t pads[8] = {0, 0, 0, 0, 0, 0, 0, 3};
                int pt = kt_graph_const(&b, KR_DTYPE_I32, 2, (int[]){4, 2}, pads);
                cdim += 3;
                y = kt_graph_act(&b, 4, (int[]){1, 4, 4, cdim});
                kt_graph_node(&b, KR_OP_PAD, 2, (int[]){acts[i0], pt}, y);
            } else if (kind == 4) {
                y = kt_graph_act(&b, 4, (int[]){1, 4, 4, cdim});
                kt_graph_node(&b, KR_OP_RESHAPE, 1, &acts[i0], y);
            } else {
                y = kt_graph_act(&b, 4, (int[]){1, 4, 4, cdim});
                kt_graph_node(&b, KR_OP_RELU, 1, &acts[i0], y);
            }
            acts[n_acts] = y;
            chans[n_acts++] = cdim;
        }
        /* The last tensor and a few random ones (not graph inputs) are outputs. */
        kt_graph_output(&b, acts[n_acts - 1]);
        for (int k = 0; k < 2; k++) {
            int t = acts[n_in + (int)(kt_rng_next(&rng) % (unsigned)(n_acts - n_in))];
            int dup = 0;
            for (int o = 0; o < b.g->n_outputs; o++)
                dup |= b.g->outputs[o] == t;
            if (!dup)
                kt_graph_output(&b, t);
        }
        kr_graph *g = kt_graph_build(&b);
        int batch = 1 + gi % 3, slack = gi % 2 ? 2 : 0; /* 2: the cuda backend's */
        kr_plan plan;
        keyer_error err = {0};
        /* every third graph: a few tensors live over a random window too (an out-of-order
         * schedule's, planner.h) */
        int *wfrom = NULL, *wto = NULL;
        if (gi % 3 == 2) {
            wfrom = malloc((size_t)g->n_tensors * sizeof(int));
            wto = malloc((size_t)g->n_tensors * sizeof(int));
            assert_true(wfrom && wto);
            for (int t = 0; t < g->n_tensors; t++) {
                int a = -1 + (int)(kt_rng_next(&rng) % (unsigned)(g->n_nodes + 2));
                int z = -1 + (int)(kt_rng_next(&rng) % (unsigned)(g->n_nodes + 2));
                int on = kt_rng_next(&rng) % 4 == 0;
                wfrom[t] = on ? (a < z ? a : z) : 1;
                wto[t] = on ? (a < z ? z : a) : 0;
            }
        }
        assert_int_equal(kr_plan_create_windows(g, batch, slack, NULL, wfrom, wto, &plan, &err),
                         KEYER_OK);
        plan_stats st = check_plan_windows(g, &plan, batch, slack, wfrom, wto);
        if (wfrom) { /* the same windows keeping a plan without them: valid, no smaller arena */
            kr_plan base, kept;
            assert_int_equal(kr_plan_create(g, batch, slack, &base, &err), KEYER_OK);
            assert_int_equal(
                kr_plan_create_windows(g, batch, slack, &base, wfrom, wto, &kept, &err),
                KEYER_OK);
            check_plan_windows(g, &kept, batch, slack, wfrom, wto);
            assert_true(kept.arena_bytes >= base.arena_bytes);
            for (int t = 0; t < g->n_tensors; t++) /* unwindowed tensors moved only if they met */
                if (kept.offsets[t] != base.offsets[t])
                    assert_true(kept.offsets[t] >= base.arena_bytes);
            kr_plan_destroy(&base);
            kr_plan_destroy(&kept);
        }
        free(wfrom);
        free(wto);
        assert_true(plan.arena_bytes <= st.naive + (size_t)g->n_tensors * KR_PLAN_ALIGNMENT);
        total_arena += plan.arena_bytes;
        total_naive += st.naive;
        total_live += st.max_live;
        kr_plan_destroy(&plan);
        kr_graph_destroy(&g);
    }
    printf("300 random graphs: arena total %zu bytes, lower bound (max live) %zu, naive %zu\n",
           total_arena, total_live, total_naive);
    assert_true(total_arena < total_naive);
}

/* The shipped models: the invariant holds and the arena is far below the naive sum. */
static void test_models(void **state)
{
    (void)state;
    static const char *const names[] = {"selfie", "selfie-landscape", "face-short", "face-full",
                                        "pose-lite"};
    int planned = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[1024];
        keyer_error err = {0};
        keyer_model *model = NULL;
        if (keyer_registry_resolve(names[i], path, sizeof(path), &err) != KEYER_OK ||
            keyer_model_load_file(path, &model, &err) != KEYER_OK) {
            printf("skip %s: %s\n", names[i], err.message);
            continue;
        }
        const kr_graph *g = kr_model_graph(model);
        for (int run = 0; run < 4; run++) { /* batch 1 and 4, slack 0 and 2 (cuda) */
            int batch = run % 2 ? 4 : 1, slack = run >= 2 ? 2 : 0;
            kr_plan plan;
            assert_int_equal(kr_plan_create(g, batch, slack, &plan, &err), KEYER_OK);
            plan_stats st = check_plan(g, &plan, batch, slack);
            printf("%-16s batch %d slack %d: arena %9zu bytes, naive sum %10zu (%.1fx), lower "
                   "bound %9zu\n",
                   names[i], batch, slack, plan.arena_bytes, st.naive,
                   (double)st.naive / (double)plan.arena_bytes, st.max_live);
            assert_true(plan.arena_bytes < st.naive);
            kr_plan_destroy(&plan);
        }
        keyer_model_destroy(&model);
        planned++;
    }
    if (!planned)
        skip();
}

static void test_errors(void **state)
{
    (void)state;
    kt_graph b;
    kt_graph_begin(&b, "errors", 2, 1, 0);
    int x = kt_graph_act(&b, 2, (int[]){1, 8});
    int y = kt_graph_act(&b, 2, (int[]){1, 8});
    kt_graph_node(&b, KR_OP_RELU, 1, &x, y);
    kt_graph_input(&b, x);
    kt_graph_output(&b, y);
    kr_graph *g = kt_graph_build(&b);
    kr_plan plan;
    keyer_error err = {0};
    assert_int_equal(kr_plan_create(g, 0, 0, &plan, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "batch 0"));
    assert_null(plan.offsets);
    assert_int_equal(kr_plan_create(NULL, 1, 0, &plan, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_plan_create(g, 1, 0, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_plan_create(g, 1, -1, &plan, &err), KEYER_STATUS_INVALID_ARGUMENT);
    {
        int *wf = malloc((size_t)g->n_tensors * sizeof(int));
        int *wt = malloc((size_t)g->n_tensors * sizeof(int));
        assert_true(wf && wt);
        for (int t = 0; t < g->n_tensors; t++) {
            wf[t] = -2; /* before the graph's start: refused */
            wt[t] = 0;
        }
        assert_int_equal(kr_plan_create_windows(g, 1, 0, NULL, wf, wt, &plan, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        free(wf);
        free(wt);
    }
    kr_plan_destroy(NULL);
    /* A batch whose tensor bytes overflow size_t is refused, not wrapped. */
    g->tensors[x].dims[1] = INT32_MAX;
    g->tensors[y].dims[1] = INT32_MAX;
    assert_int_equal(kr_plan_create(g, INT32_MAX, 0, &plan, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "too large"));
    /* Each tensor fits, but the two (live together) do not fit in one address space. */
    assert_int_equal(kr_plan_create(g, 1 << 30, 0, &plan, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "address space"));
    kr_graph_destroy(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_views_and_outputs),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
