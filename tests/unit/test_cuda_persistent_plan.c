/*
 * The cuda persistent schedule's planner (src/nn/cuda/persistent.c) on the CPU: it is host code
 * that turns a graph's nodes into steps, so its decisions are checked here, where CI runs; the
 * kernel itself is checked against the reference on the GPU (tests/backend_ops,
 * test_nn_cuda_gpu). Device pointers are stand-ins (one 1 MiB-aligned address per storage
 * tensor); nothing is dereferenced.
 *
 *  - selfie: supported; its 10 squeeze-and-excitation blocks become a pool partial-sum step and
 *    a prologue in the MUL's step (4) or, where the MUL only feeds a pointwise conv, in that
 *    conv's step (6); no dense (1x1-pixel) convolution and no pool final step remain;
 *    every prologue reads an earlier pool step's sums of the right size.
 *  - every step's work split (lanes, groups, vector width, pool slices) is the same at batch 1
 *    and 4 (what makes batch-4 results equal batch-1 results bit for bit on the GPU).
 *  - the shipped models it cannot run are refused naming the operator (face-short: PAD,
 *    selfie-landscape: MEAN).
 *  - hand-built excitations: fused when every intermediate is private; not fused when the pool's
 *    output is also a graph output (then: pool final step, dense convs, a plain MUL).
 *
 * Built only with the cuda backend (exits 77 otherwise).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KEYER_HAVE_CUDA_NN
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "kt_graph.h"
#include "nn/cuda/persistent.h"
#include "nn/model.h"

/* A stand-in device address per storage tensor (constants included). */
static void *fake_ptr(const kr_graph *g, int t)
{
    return (void *)(uintptr_t)(0x40000000u + 0x100000u * (unsigned)kr_tensor_storage(g, t));
}

typedef struct plan {
    kr_cuda_op *ops;
    unsigned char *folded;
    kr_cuda_step *steps;
    int n;
    size_t scratch;
    const char *why;
} plan;

/* Plans @p g at @p batch with no backend folds (every activation its own node). */
static plan make_plan(const kr_graph *g, int batch)
{
    plan p = {0};
    p.ops = calloc((size_t)g->n_nodes, sizeof(*p.ops));
    p.folded = calloc((size_t)g->n_nodes, 1);
    p.steps = calloc(2 * (size_t)g->n_nodes + 1, sizeof(*p.steps));
    assert_non_null(p.ops);
    assert_non_null(p.folded);
    assert_non_null(p.steps);
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        kr_cuda_op *op = &p.ops[n];
        op->graph = g;
        op->node = node;
        op->batch = batch;
        for (int i = 0; i < node->n_inputs; i++)
            op->in[i] = node->inputs[i] >= 0 ? fake_ptr(g, node->inputs[i]) : NULL;
        op->out = fake_ptr(g, node->outputs[0]);
    }
    p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, batch, p.steps, &p.n, &p.scratch);
    return p;
}

static void free_plan(plan *p)
{
    free(p->ops);
    free(p->folded);
    free(p->steps);
}

static keyer_model *load(const char *name)
{
    char path[1024];
    keyer_error err = {0};
    assert_int_equal(keyer_registry_resolve(name, path, sizeof(path), &err), KEYER_OK);
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    return m;
}

static int count_kind(const plan *p, int kind)
{
    int c = 0;
    for (int i = 0; i < p->n; i++)
        c += p->steps[i].kind == kind;
    return c;
}

static void test_selfie_excitations(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    plan p = make_plan(g, 1);
    if (p.why)
        fail_msg("selfie not planned: %s", p.why);
    int pools = 0, se_conv = 0, se_mul = 0;
    for (int n = 0; n < g->n_nodes; n++)
        pools += g->nodes[n].op == KR_OP_AVERAGE_POOL_2D;
    for (int i = 0; i < p.n; i++) {
        const kr_cuda_step *s = &p.steps[i];
        if (s->kind == KR_STEP_CONV)
            assert_true(s->oh * s->ow > 1); /* no dense layer left as a step */
        if (!s->se_layers)
            continue;
        se_conv += s->kind == KR_STEP_CONV;
        se_mul += s->kind == KR_STEP_BINARY;
        /* the prologue reads the sums of an earlier pool step of the same shape, and ends with
         * as many channels as the step scales */
        int found = 0;
        for (int j = 0; j < i; j++)
            found |= p.steps[j].kind == KR_STEP_POOL_PARTIAL &&
                     p.steps[j].scratch_off == s->se_partial_off &&
                     p.steps[j].slices == s->se_slices && p.steps[j].ic == s->se_c &&
                     p.steps[j].ih * p.steps[j].iw == s->se_pixels;
        assert_true(found);
        assert_int_equal(s->se_out[s->se_layers - 1], s->kind == KR_STEP_CONV ? s->ic : s->oc);
        assert_true(s->se_layers >= 1 && s->se_layers <= 2);
    }
    printf("selfie: %d nodes -> %d steps (no activation folds here), %d pools, excitations in "
           "%d conv and %d MUL steps, %zu scratch floats\n",
           g->n_nodes, p.n, pools, se_conv, se_mul, p.scratch);
    assert_int_equal(pools, 10);
    assert_int_equal(count_kind(&p, KR_STEP_POOL_PARTIAL), 10);
    assert_int_equal(count_kind(&p, KR_STEP_POOL_FINAL), 0);
    assert_int_equal(se_conv, 6);
    assert_int_equal(se_mul, 4);
    free_plan(&p);
    keyer_model_destroy(&m);
}

static void test_batch_independent_split(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    plan a = make_plan(g, 1), b = make_plan(g, 4);
    assert_null(a.why);
    assert_null(b.why);
    assert_int_equal(a.n, b.n);
    for (int i = 0; i < a.n; i++) {
        const kr_cuda_step *x = &a.steps[i], *y = &b.steps[i];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->batch, 1);
        assert_int_equal(y->batch, 4);
        assert_int_equal(x->split, y->split);
        assert_int_equal(x->group, y->group);
        assert_int_equal(x->vec, y->vec);
        assert_int_equal(x->slice, y->slice);
        assert_int_equal(x->slices, y->slices);
        assert_int_equal(x->se_slices, y->se_slices);
        assert_int_equal(x->se_layers, y->se_layers);
    }
    assert_int_equal(b.scratch, 4 * a.scratch); /* partial sums per item */
    free_plan(&a);
    free_plan(&b);
    keyer_model_destroy(&m);
}

static void test_unsupported_models(void **state)
{
    (void)state;
    const char *names[2] = {"face-short", "selfie-landscape"}, *ops[2] = {"PAD", "MEAN"};
    for (int i = 0; i < 2; i++) {
        keyer_model *m = load(names[i]);
        plan p = make_plan(kr_model_graph(m), 1);
        printf("%s: %s\n", names[i], p.why ? p.why : "(planned)");
        assert_non_null(p.why);
        assert_non_null(strstr(p.why, ops[i]));
        free_plan(&p);
        keyer_model_destroy(&m);
    }
}

/* ---- hand-built excitations --------------------------------------------------------------- */

static int conv1x1(kt_graph *b, int x, const int *xd, int cout, int *od)
{
    static float w[64 * 64], bias[64];
    int wd[4] = {cout, 1, 1, xd[3]};
    int in[3] = {x, kt_graph_const(b, KR_DTYPE_F32, 4, wd, w), kt_graph_const(b, KR_DTYPE_F32, 1,
                                                                               &cout, bias)};
    memcpy(od, xd, 4 * sizeof(int));
    od[3] = cout;
    int y = kt_graph_act(b, 4, od);
    kr_node *n = kt_graph_node(b, KR_OP_CONV_2D, 3, in, y);
    n->p.window.kernel_h = n->p.window.kernel_w = 1;
    n->p.window.stride_h = n->p.window.stride_w = 1;
    n->p.window.padding = KR_PADDING_VALID;
    return y;
}

static int unary(kt_graph *b, kr_op op, int x, const int *d)
{
    int y = kt_graph_act(b, 4, d);
    kt_graph_node(b, op, 1, &x, y);
    return y;
}

/* x [1,8,8,16] -> global pool -> 1x1 16->4 -> RELU -> 1x1 4->16 -> LOGISTIC -> MUL(x, .),
 * then (with @p then_conv) a pointwise conv of the product; @p pool_out also makes the pool's
 * output a graph output. */
static kr_graph *excitation(int then_conv, int pool_out)
{
    kt_graph b;
    kt_graph_begin(&b, "excitation", 32, 16, 1 << 16);
    int xd[4] = {1, 8, 8, 16}, pd[4] = {1, 1, 1, 16}, hd[4], sd[4], yd[4];
    int x = kt_graph_act(&b, 4, xd);
    kt_graph_input(&b, x);
    int p = kt_graph_act(&b, 4, pd);
    kr_node *pool = kt_graph_node(&b, KR_OP_AVERAGE_POOL_2D, 1, &x, p);
    pool->p.window.kernel_h = pool->p.window.kernel_w = 8;
    pool->p.window.stride_h = pool->p.window.stride_w = 1;
    pool->p.window.padding = KR_PADDING_VALID;
    int h = unary(&b, KR_OP_RELU, conv1x1(&b, p, pd, 4, hd), hd);
    int s = unary(&b, KR_OP_LOGISTIC, conv1x1(&b, h, hd, 16, sd), sd);
    int y = kt_graph_act(&b, 4, xd), in[2] = {x, s};
    kt_graph_node(&b, KR_OP_MUL, 2, in, y);
    if (then_conv)
        y = conv1x1(&b, y, xd, 8, yd);
    kt_graph_output(&b, y);
    if (pool_out)
        kt_graph_output(&b, p);
    kr_graph *g = NULL;
    keyer_error err = {0};
    if (kt_graph_finish(&b, &g, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    return g;
}

static void test_excitation_fusion(void **state)
{
    (void)state;
    for (int then_conv = 0; then_conv < 2; then_conv++) {
        kr_graph *g = excitation(then_conv, 0);
        plan p = make_plan(g, 2);
        assert_null(p.why);
        /* pool partial sums, then the step that does the excitation */
        assert_int_equal(p.n, 2);
        assert_int_equal(p.steps[0].kind, KR_STEP_POOL_PARTIAL);
        assert_int_equal(p.steps[1].kind, then_conv ? KR_STEP_CONV : KR_STEP_BINARY);
        assert_int_equal(p.steps[1].se_layers, 2);
        assert_int_equal(p.steps[1].se_out[0], 4);
        assert_int_equal(p.steps[1].se_out[1], 16);
        assert_int_equal(p.steps[1].se_post[0], KR_CUDA_POST_RELU);
        assert_int_equal(p.steps[1].se_post[1], KR_CUDA_POST_LOGISTIC);
        if (then_conv) /* reads the MUL's full operand: the graph input */
            assert_ptr_equal(p.steps[1].x, fake_ptr(g, g->inputs[0]));
        free_plan(&p);
        kr_graph_destroy(&g);
    }
    /* the pool's output is also read outside: nothing fuses */
    kr_graph *g = excitation(0, 1);
    plan p = make_plan(g, 1);
    assert_null(p.why);
    assert_int_equal(count_kind(&p, KR_STEP_POOL_FINAL), 1);
    assert_int_equal(count_kind(&p, KR_STEP_CONV), 2);
    assert_int_equal(count_kind(&p, KR_STEP_UNARY), 2);
    assert_int_equal(count_kind(&p, KR_STEP_BINARY), 1);
    for (int i = 0; i < p.n; i++)
        assert_int_equal(p.steps[i].se_layers, 0);
    free_plan(&p);
    kr_graph_destroy(&g);
}
#endif

int main(void)
{
#ifndef KEYER_HAVE_CUDA_NN
    fprintf(stderr, "test_cuda_persistent_plan: built without the cuda backend, skipped\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selfie_excitations),
        cmocka_unit_test(test_batch_independent_split),
        cmocka_unit_test(test_unsupported_models),
        cmocka_unit_test(test_excitation_fusion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
