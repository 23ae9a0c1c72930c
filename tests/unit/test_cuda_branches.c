/*
 * The per-node schedule's branches (src/nn/cuda/branches.c) on the CPU: the units off the
 * critical path, the two-stream order and the planner's windows are host decisions over the
 * graph, the folds and the memory layout, so they are checked here, on the memory view that
 * backend.c builds for an f16 or f32 instance at stand-in device addresses (as
 * test_cuda_fusion.c; nothing is dereferenced). The GPU test (test_nn_onnx_cuda_gpu,
 * test_u2netp_branches) compares the branched run with the serial one byte for byte.
 *
 *  - u2netp f16 and f32 at batch 1 and 32: the side maps of hx2d .. hx6d (five 64 -> 1
 *    convolutions) and their resizes run on the second stream; in f16 no output has a
 *    conversion (the fuse layer and the six sigmoids write d0 .. d6 as float themselves); the
 *    graph's last node stays on the run stream;
 *  - every fused node and every conversion is queued exactly once, and every pair of units whose
 *    memory (read by the test from the bound kernel arguments) overlaps with a write runs in
 *    serial order's sense: on one stream in order, or across a fork or join; the last side unit
 *    is joined;
 *  - the same after the layout with the windows (kr_cuda_branches_windows,
 *    kr_plan_create_windows keeping the serial plan's places), which the backend runs: every
 *    node fused as on the serial layout (the folds depend on overlaps; other folds would change
 *    f16 sums), and that layout is at most 25% larger than the serial one; there the fuse convolution (the last CONV_2D) stays on the run
 *    stream and side2..side6 (the five other 64 -> 1 convolutions) go to the second;
 *  - u2netp f16: the concatenation of the six side maps folded into the fuse convolution
 *    (kr_cuda_op.gcat), which reads the maps where they lie and writes d0 as float itself
 *    (kr_cuda_op.y_f32);
 *  - selfie, selfie-landscape, face-short and face-full (f16 and f32, batch 32, where the
 *    per-node schedule runs them): whatever goes to the second stream keeps the order checks.
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
#include "nn/cuda/branches.h"
#include "nn/cuda/fusion.h"
#include "nn/cuda/pernode.h"
#include "nn/cuda/persistent/persistent.h" /* KR_CUDA_PLAN_SLACK */
#include "nn/model.h"
#include "nn/planner.h"

#define ARENA_BASE ((uintptr_t)1 << 32)
#define WEIGHTS_BASE ((uintptr_t)1 << 40)
#define IO_BASE ((uintptr_t)1 << 44)

typedef struct view {
    kr_plan plan;
    size_t *offsets, *const_offsets, *w16_offsets;
    kr_gpu_caps caps;
    kr_cuda_mem mem;
    kr_cuda_op *ops;
    unsigned char *folded;
    float **io;
    int f16;
} view;

/* The instance's memory view of @p g at @p batch (the planner's layout with the windows
 * @p from / @p to, or none), the backend's folds, stand-in float staging for the graph inputs
 * and outputs of f16 instances (64 MiB apart). */
static void make_view(view *v, const kr_graph *g, int f16, int batch, const kr_plan *keep,
                      const int *from, const int *to)
{
    memset(v, 0, sizeof(*v));
    keyer_error err = {0};
    if (kr_plan_create_windows(g, batch, KR_CUDA_PLAN_SLACK, keep, from, to, &v->plan, &err) !=
        KEYER_OK)
        fail_msg("%s", err.message);
    size_t nt = (size_t)g->n_tensors;
    v->f16 = f16;
    v->offsets = malloc(nt * sizeof(size_t));
    v->const_offsets = malloc(nt * sizeof(size_t));
    v->w16_offsets = malloc(nt * sizeof(size_t));
    v->ops = calloc((size_t)g->n_nodes, sizeof(kr_cuda_op));
    v->folded = calloc((size_t)g->n_nodes, 1);
    v->io = calloc(nt, sizeof(float *));
    assert_true(v->offsets && v->const_offsets && v->w16_offsets && v->ops && v->folded && v->io);
    size_t wbytes = 0;
    for (size_t t = 0; t < nt; t++) {
        v->offsets[t] = v->plan.offsets[t] == SIZE_MAX ? SIZE_MAX
                                                       : v->plan.offsets[t] / (f16 ? 2 : 1);
        v->const_offsets[t] = SIZE_MAX;
        v->w16_offsets[t] = SIZE_MAX;
        const kr_tensor *x = &g->tensors[t];
        if (f16 && (x->graph_input >= 0 || x->graph_output >= 0))
            v->io[t] = (float *)(IO_BASE + t * ((uintptr_t)64 << 20));
    }
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        if (node->op != KR_OP_CONV_2D || node->p.window.groups > 1 || node->n_inputs < 2)
            continue;
        int w = node->inputs[1];
        if (!f16 || v->w16_offsets[w] != SIZE_MAX)
            continue;
        v->w16_offsets[w] = wbytes;
        wbytes += (kr_tensor_elements(&g->tensors[w]) * 2 + 255) / 256 * 256;
    }
    v->caps.major = v->caps.real_major = 9;
    v->caps.minor = v->caps.real_minor = 0;
    v->caps.sms = 132;
    v->mem = (kr_cuda_mem){.graph = g,
                           .batch = batch,
                           .esize = f16 ? 2 : 4,
                           .arena = (unsigned char *)ARENA_BASE,
                           .offsets = v->offsets,
                           .weights = (unsigned char *)WEIGHTS_BASE,
                           .const_offsets = v->const_offsets,
                           .w16_offsets = f16 ? v->w16_offsets : NULL,
                           .caps = &v->caps};
    kr_cuda_fuse(&v->mem, f16, v->ops, v->folded);
    kr_cuda_fuse_gathers(&v->mem, v->ops, v->folded);
    if (f16) { /* as backend.c binds them */
        kr_cuda_pernode_bind_inputs(&v->mem, v->io, v->ops, v->folded);
        kr_cuda_pernode_bind_outputs(&v->mem, v->io, v->ops, v->folded);
    }
}

static void free_view(view *v)
{
    kr_plan_destroy(&v->plan);
    free(v->offsets);
    free(v->const_offsets);
    free(v->w16_offsets);
    free(v->ops);
    free(v->folded);
    free(v->io);
}

static size_t arena_of(const view *v) { return v->plan.arena_bytes / (v->f16 ? 2 : 1); }

typedef struct span {
    uintptr_t lo, hi;
} span;

/* Whether node @p m names tensor @p t or a view of it. */
static int names(const kr_graph *g, int m, int t)
{
    const kr_node *x = &g->nodes[m];
    for (int k = 0; k < x->n_inputs; k++)
        if (x->inputs[k] >= 0 && kr_tensor_storage(g, x->inputs[k]) == t)
            return 1;
    for (int k = 0; k < x->n_outputs; k++)
        if (x->outputs[k] >= 0 && kr_tensor_storage(g, x->outputs[k]) == t)
            return 1;
    return 0;
}

/* Whether node @p m is in node @p n's kernel: @p n itself, or a folded node reached from it over
 * graph edges through folded nodes only (fusion.h folds a node into a producer or a consumer). */
static int in_unit(const view *v, int n, int m)
{
    const kr_graph *g = v->mem.graph;
    unsigned char *seen = calloc((size_t)g->n_nodes, 1);
    int *stack = malloc((size_t)g->n_nodes * sizeof(int)), top = 0, found = 0;
    assert_true(seen && stack);
    seen[n] = 1;
    stack[top++] = n;
    while (top > 0 && !found) {
        int k = stack[--top];
        found = k == m;
        for (int q = 0; q < g->n_nodes; q++) {
            if (seen[q] || !v->folded[q])
                continue;
            int linked = 0; /* q produces an input of k, or reads an output of k */
            for (int i = 0; i < g->nodes[k].n_inputs; i++)
                for (int o = 0; o < g->nodes[q].n_outputs; o++)
                    linked |= g->nodes[k].inputs[i] >= 0 &&
                              g->nodes[k].inputs[i] == g->nodes[q].outputs[o];
            for (int o = 0; o < g->nodes[k].n_outputs; o++)
                for (int i = 0; i < g->nodes[q].n_inputs; i++)
                    linked |= g->nodes[k].outputs[o] >= 0 &&
                              g->nodes[k].outputs[o] == g->nodes[q].inputs[i];
            if (linked) {
                seen[q] = 1;
                stack[top++] = q;
            }
        }
    }
    free(seen);
    free(stack);
    return found;
}

/* The bytes kernel argument @p p of node @p n's kernel covers: the largest tensor placed there
 * that a node in the kernel names (all placed there when none), a staging buffer, nothing for
 * constants. */
static span span_of(const view *v, const void *p, int n)
{
    const kr_graph *g = v->mem.graph;
    uintptr_t a = (uintptr_t)p;
    span s = {a, a}, any = {a, a};
    for (int t = 0; p && t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        if (v->io[t] && (uintptr_t)v->io[t] == a)
            s.hi = a + kr_tensor_bytes(x, v->mem.batch);
        if (kr_tensor_is_const(x) || x->view_of >= 0 || v->offsets[t] == SIZE_MAX ||
            ARENA_BASE + v->offsets[t] != a)
            continue;
        size_t bytes = kr_cuda_mem_bytes(&v->mem, t);
        any.hi = a + bytes > any.hi ? a + bytes : any.hi;
        if (a + bytes <= s.hi)
            continue;
        for (int m = 0; m < g->n_nodes; m++)
            if (names(g, m, t) && (m == n || (v->folded[m] && in_unit(v, n, m)))) {
                s.hi = a + bytes;
                break;
            }
    }
    return s.hi > s.lo ? s : any;
}

static int spans_meet(span a, span b)
{
    return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

typedef struct access {
    span rd[20 + KR_CUDA_GCAT_MAX], wr;
    int n_rd;
} access;

static void add_rd(access *x, span s)
{
    if (s.lo < s.hi)
        x->rd[x->n_rd++] = s;
}

/* What unit @p node (or output conversion -1 - i) reads and writes. */
static void access_of(const view *v, int node, access *x)
{
    memset(x, 0, sizeof(*x));
    const kr_graph *g = v->mem.graph;
    if (node < 0) {
        int t = g->outputs[-1 - node];
        uintptr_t a = ARENA_BASE + v->offsets[kr_tensor_storage(g, t)];
        add_rd(x, (span){a, a + kr_cuda_mem_bytes(&v->mem, t)});
        x->wr = span_of(v, v->io[t], g->n_nodes);
        return;
    }
    const kr_cuda_op *op = &v->ops[node];
    for (int i = 0; i < KR_MAX_NODE_INPUTS; i++)
        add_rd(x, span_of(v, op->in[i], node));
    const void *more[] = {op->residual,  op->addend,    op->cat.src[0],   op->cat.src[1],
                          op->scale.src, op->scale.vec, op->scale.addend, op->rs.src,
                          op->add.src,   op->pool.src};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
        add_rd(x, span_of(v, more[i], node));
    for (int c = 0; c < op->gcat.n; c++)
        add_rd(x, span_of(v, op->gcat.src[c], node));
    x->wr = span_of(v, op->out, node);
}

static int conflict(const access *a, const access *b)
{
    if (spans_meet(a->wr, b->wr))
        return 1;
    for (int i = 0; i < b->n_rd; i++)
        if (spans_meet(a->wr, b->rd[i]))
            return 1;
    for (int i = 0; i < a->n_rd; i++)
        if (spans_meet(a->rd[i], b->wr))
            return 1;
    return 0;
}

typedef struct placed {
    int node, stream, seq, knows; /* knows: units of the other stream finished before it starts */
    access acc;
} placed;

/* Checks @p b's order on @p v (see the file comment); returns the number of side units and
 * counts the side CONV_2D nodes in @p side_convs, side conversions in @p side_outs. */
static int check_order(const view *v, const kr_cuda_branches *b, int *side_convs, int *side_outs)
{
    const kr_graph *g = v->mem.graph;
    int n_steps = kr_cuda_branches_steps(b);
    placed *p = calloc((size_t)n_steps, sizeof(placed));
    int *seen_node = calloc((size_t)g->n_nodes, sizeof(int));
    int *seen_out = calloc((size_t)g->n_outputs + 1, sizeof(int));
    assert_true(p && seen_node && seen_out);
    int np = 0, seq[2] = {0, 0}, side_knows_main = 0, main_knows_side = 0, side = 0;
    *side_convs = *side_outs = 0;
    for (int i = 0; i < n_steps; i++) {
        int kind, s, node;
        kr_cuda_branches_step(b, i, &kind, &s, &node);
        if (kind == 1) {
            side_knows_main = seq[0];
            continue;
        }
        if (kind == 2) {
            main_knows_side = seq[1];
            continue;
        }
        assert_int_equal(kind, 0);
        if (node >= 0) {
            assert_false(v->folded[node]);
            seen_node[node]++;
            if (s && g->nodes[node].op == KR_OP_CONV_2D)
                (*side_convs)++;
        } else {
            seen_out[-1 - node]++;
            *side_outs += s;
        }
        side += s;
        memset(&p[np], 0, sizeof(p[np]));
        p[np].node = node;
        p[np].stream = s;
        p[np].seq = seq[s]++;
        p[np].knows = s ? side_knows_main : main_knows_side;
        access_of(v, node, &p[np].acc);
        np++;
    }
    assert_int_equal(main_knows_side, seq[1]); /* the last side unit is joined */
    for (int n = 0; n < g->n_nodes; n++)
        assert_int_equal(seen_node[n], v->folded[n] ? 0 : 1);
    for (int i = 0; i < g->n_outputs; i++) { /* none for an output written as float */
        int t = g->outputs[i];
        assert_int_equal(seen_out[i], v->f16 && g->tensors[t].dtype == KR_DTYPE_F32 &&
                                              !kr_cuda_pernode_output_bound(&v->mem, v->io,
                                                                            v->ops, v->folded, i)
                                          ? 1
                                          : 0);
    }
    /* serial position of every unit: node order, a conversion after its producer's node */
    for (int i = 0; i < np; i++)
        for (int j = 0; j < np; j++) {
            int ni = p[i].node, nj = p[j].node;
            int pi = ni >= 0 ? 2 * ni : 2 * g->tensors[g->outputs[-1 - ni]].producer + 1;
            int pj = nj >= 0 ? 2 * nj : 2 * g->tensors[g->outputs[-1 - nj]].producer + 1;
            if (pi >= pj || !conflict(&p[i].acc, &p[j].acc))
                continue;
            int before = p[i].stream == p[j].stream ? p[i].seq < p[j].seq : p[i].seq < p[j].knows;
            if (!before)
                fail_msg("%s: unit %d (node %d) may run before unit %d (node %d) that it "
                         "depends on",
                         g->name, j, nj, i, ni);
        }
    free(p);
    free(seen_node);
    free(seen_out);
    return side;
}

/* The first node fused otherwise on @p v than on @p v0 (folds, post function, folded sources),
 * -1 when none. */
static int fused_otherwise(const view *v0, const view *v)
{
    for (int n = 0; n < v->mem.graph->n_nodes; n++) {
        const kr_cuda_op *a = &v0->ops[n], *c = &v->ops[n];
        if (v0->folded[n] != v->folded[n] || a->post != c->post || !a->residual != !c->residual ||
            !a->addend != !c->addend || !a->cat.src[0] != !c->cat.src[0] ||
            !a->scale.src != !c->scale.src || !a->rs.src != !c->rs.src ||
            !a->add.src != !c->add.src || !a->pool.src != !c->pool.src ||
            a->gcat.n != c->gcat.n)
            return n;
    }
    return -1;
}

static keyer_model *load(const char *name)
{
    char path[1024];
    keyer_error err = {0};
    if (keyer_registry_resolve(name, path, sizeof(path), &err) != KEYER_OK) {
        printf("%s not available (%s): skipped\n", name, err.message);
        return NULL;
    }
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    return m;
}

static void check_u2netp(const kr_graph *g, int f16, int batch)
{
    keyer_error err = {0};
    view v;
    make_view(&v, g, f16, batch, NULL, NULL, NULL);
    kr_cuda_branches *b = NULL;
    assert_int_equal(kr_cuda_branches_plan(&v.mem, arena_of(&v), v.io, v.ops, v.folded, &b, &err),
                     KEYER_OK);
    assert_non_null(b);
    int convs, outs;
    int side = check_order(&v, b, &convs, &outs); /* on the serial layout: runnable too */
    kr_cuda_branches_destroy(&b);
    int *from = malloc((size_t)g->n_tensors * sizeof(int));
    int *to = malloc((size_t)g->n_tensors * sizeof(int));
    assert_true(from && to);
    int any = 0;
    assert_int_equal(kr_cuda_branches_windows(&v.mem, arena_of(&v), v.io, v.ops, v.folded, from, to,
                                              &any, &err),
                     KEYER_OK);
    assert_true(any);
    size_t serial = arena_of(&v);
    view v0 = v;

    make_view(&v, g, f16, batch, &v0.plan, from, to);
    int other = fused_otherwise(&v0, &v); /* the same folds: the same kernels and sums */
    if (other >= 0)
        fail_msg("u2netp: node %d (%s) is fused otherwise on the layout with windows", other,
                 kr_op_name(g->nodes[other].op));
    free_view(&v0);
    assert_int_equal(kr_cuda_branches_plan(&v.mem, arena_of(&v), v.io, v.ops, v.folded, &b, &err),
                     KEYER_OK);
    assert_non_null(b);
    side = check_order(&v, b, &convs, &outs);
    printf("u2netp %s batch %d: %d side units (%d convolutions, %d conversions), arena %.1f MB "
           "(%.1f MB serial)\n",
           f16 ? "f16" : "f32", batch, side, convs, outs, arena_of(&v) / 1e6, serial / 1e6);
    assert_true(convs >= 5);
    /* f16: d0 .. d6 written as float by their layers (the fuse kernel, the six sigmoids), so no
     * output has a conversion unit */
    int bound = 0;
    for (int i = 0; i < g->n_outputs; i++) {
        const int o = kr_cuda_pernode_output_bound(&v.mem, v.io, v.ops, v.folded, i);
        if (f16 && !o)
            printf("  output %d (tensor %d) not written as float\n", i, g->outputs[i]);
        bound += o;
    }
    assert_int_equal(bound, f16 ? g->n_outputs : 0);
    assert_int_equal(outs, 0);
    assert_true(arena_of(&v) <= serial + serial / 4);
    /* the fuse convolution (the last CONV_2D) runs on the run stream; list the side units */
    int last = g->n_nodes - 1;
    while (last > 0 && g->nodes[last].op != KR_OP_CONV_2D)
        last--;
    /* f16: the six side maps' concatenation folded into it, read where the maps lie, and d0
     * (graph output 0) written as float by it, without a conversion */
    assert_int_equal(v.ops[last].gcat.n, f16 ? 6 : 0);
    assert_int_equal(v.ops[last].y_f32, f16);
    assert_int_equal(kr_cuda_pernode_output_bound(&v.mem, v.io, v.ops, v.folded, 0), f16);
    printf("  side:");
    for (int i = 0; i < kr_cuda_branches_steps(b); i++) {
        int kind, s, node;
        kr_cuda_branches_step(b, i, &kind, &s, &node);
        if (kind == 0 && node == last)
            assert_int_equal(s, 0);
        if (kind == 0 && s)
            printf(" %d%s", node, node >= 0 ? kr_op_name(g->nodes[node].op) : "out");
        else if (kind) { /* with the run-stream node queued next */
            int next = -1;
            for (int j = i + 1; j < kr_cuda_branches_steps(b) && next < 0; j++) {
                int k2, s2, n2;
                kr_cuda_branches_step(b, j, &k2, &s2, &n2);
                if (k2 == 0 && !s2)
                    next = n2;
            }
            printf(" %s(%d)", kind == 1 ? "F" : "J", next);
        }
    }
    printf("\n");
    kr_cuda_branches_destroy(&b);
    free(from);
    free(to);
    free_view(&v);
}

static void test_u2netp_branches(void **state)
{
    (void)state;
    keyer_model *m = load("u2netp");
    if (!m)
        skip();
    const kr_graph *g = kr_model_graph(m);
    check_u2netp(g, 1, 1);
    check_u2netp(g, 1, 32);
    check_u2netp(g, 0, 1);
    keyer_model_destroy(&m);
}

/* Other shipped graphs: whatever goes to the second stream keeps the order's guarantees. */
static void test_other_models_order(void **state)
{
    (void)state;
    const char *names[] = {"selfie", "selfie-landscape", "face-short", "face-full"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        keyer_model *m = load(names[k]);
        if (!m)
            continue;
        const kr_graph *g = kr_model_graph(m);
        for (int f16 = 0; f16 <= 1; f16++) {
            keyer_error err = {0};
            view v;
            make_view(&v, g, f16, 32, NULL, NULL, NULL);
            kr_cuda_branches *b = NULL;
            assert_int_equal(kr_cuda_branches_plan(&v.mem, arena_of(&v), v.io, v.ops, v.folded, &b,
                                                   &err),
                             KEYER_OK);
            int convs = 0, outs = 0, side = b ? check_order(&v, b, &convs, &outs) : 0;
            kr_cuda_branches_destroy(&b);
            /* the layout with windows, as the backend makes it: run only with the same folds */
            int *from = malloc((size_t)g->n_tensors * sizeof(int));
            int *to = malloc((size_t)g->n_tensors * sizeof(int));
            int any = 0, other = -1, side_w = 0;
            assert_true(from && to);
            assert_int_equal(kr_cuda_branches_windows(&v.mem, arena_of(&v), v.io, v.ops, v.folded,
                                                      from, to, &any, &err),
                             KEYER_OK);
            size_t serial = arena_of(&v), windowed = serial;
            if (any) {
                view w;
                make_view(&w, g, f16, 32, &v.plan, from, to);
                windowed = arena_of(&w);
                other = fused_otherwise(&v, &w);
                assert_int_equal(kr_cuda_branches_plan(&w.mem, arena_of(&w), w.io, w.ops, w.folded,
                                                       &b, &err),
                                 KEYER_OK);
                side_w = b ? check_order(&w, b, &convs, &outs) : 0;
                kr_cuda_branches_destroy(&b);
                free_view(&w);
            }
            printf("%s %s batch 32: %d side units on the serial layout, %d with windows "
                   "(arena %.1f -> %.1f MB, %s)\n",
                   names[k], f16 ? "f16" : "f32", side, side_w, serial / 1e6, windowed / 1e6,
                   other < 0 ? "same folds" : "other folds: serial order");
            free(from);
            free(to);
            free_view(&v);
        }
        keyer_model_destroy(&m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u2netp_branches),
        cmocka_unit_test(test_other_models_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("built without the cuda backend: skipped\n");
    return 77;
}
#endif
