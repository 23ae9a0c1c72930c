/*
 * The cuda persistent schedule's planner (src/nn/cuda/persistent/plan.c, fuse.c) on the CPU: it
 * is host code that turns a graph's nodes into steps, so its decisions are checked here, where
 * CI runs; the kernel itself is checked against the reference on the GPU (tests/backend_ops,
 * test_nn_cuda_gpu). Device pointers are stand-ins (one address per storage tensor, 64 MiB
 * apart); nothing is dereferenced.
 *
 *  - selfie: supported; its 10 squeeze-and-excitation blocks become pool tails (the slices'
 *    sums) on the step that writes the pooled tensor (here, without the backend's folds: the 6
 *    depthwise convs before the encoder's pools, each also doing the activation node after it)
 *    or on a pool step of their own (the decoder's 4 pools after an ADD), each read by exactly
 *    one later step's prologue of the right width: 6 pointwise convs (input scaling), 1
 *    resize, 3 MULs; no dense (1x1-pixel) convolution and no pool final step remain; every
 *    tail's slices cover its pixels in one pass of a block and fit the tile; the tails' sums do
 *    not overlap in scratch. 6 of the encoder's 8 pointwise + depthwise pairs are one step (not
 *    the two stride-2 3x3 ones, whose halo takes more than one pass of a block), with tiles
 *    and halos that fit shared memory.
 *  - every step's work split (lanes, groups, vector width, slices) is the same at batch 1 and 4
 *    (what makes batch-4 results equal batch-1 results bit for bit on the GPU).
 *  - the shipped models it cannot run are refused naming the operator (face-short: PAD,
 *    selfie-landscape: MEAN); so are what ONNX models bring (PADs other than zeros, grouped
 *    convolutions, the new operators).
 *  - hand-built excitations: the tail on the producing conv or on a pool step; standalone
 *    activations done by the step before them; consumed by a
 *    conv, which also takes a folded ADD after the MUL (not when the conv's output overlaps
 *    the MUL's operand: then the MUL's own step), or by the MUL; not fused when the pool's
 *    output is also a graph output (then: pool final step, dense convs, a plain MUL).
 *  - cluster segments (segment.c): selfie's and selfie-landscape's steps at 1/16 and the
 *    encoder's block at 1/8 before them (E, S, P0, four pairs) found with the right shapes and
 *    packed sizes, refused or shortened where the run does not hold (E left out where its
 *    steps are not the block: a 5x5 window, another residual, its output not S's input, a
 *    tensor between its steps read after them); Q after them; with the decoder block after Q
 *    folded as the backend folds it (selfie's folded steps 17-22 as the GPU has them), U too,
 *    left out (Q kept) where a later step reads the pools' sums it no longer writes or a
 *    tensor it no longer writes, where the resize aligns corners, the expand/depthwise step
 *    has a residual, the skip is misaligned, or its output lies on another item's skip or
 *    input; with the two blocks after U folded too (selfie's folded steps 22-24), V (the 1x1
 *    convolution that resizes U's output, its pool tail a slice per row plus the addend) and W
 *    (the excited expand/depthwise after it) taken in U's stage, for both models at batch 1
 *    and 4 with stand-ins and both memory plans (each plan's V and W outputs checked against
 *    what take_v and take_w refuse, and printed); V left out (U kept) where its convolution
 *    does not resize, aligns corners, has other than 4h slices, U's output is read after it,
 *    or its output lies on its own addend or another item's skip or input; W left out (V kept)
 *    where it reads other sums than V's, has a residual, V's sums are read after it, its
 *    output lies on V's addend or another item's input, or a tensor between V and W is a graph
 *    output; their weights packed (with host arrays for the steps' weights) in segment.h's
 *    layout, E's, U's, V's and W's included.
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
#include "nn/cuda/persistent/persistent.h"
#include "nn/cuda/segment/segment.h"
#include "nn/cuda/tuning.h"
#include "nn/model.h"
#include "nn/planner.h"

/* A stand-in device address per storage tensor (constants included), 64 MiB apart: more than
 * any tensor of these graphs at batch 4, so that only the planner's overlap checks made to
 * fail (reuse below) find an overlap. */
static void *fake_ptr(const kr_graph *g, int t)
{
    return (void *)((uintptr_t)0x40000000u + ((uintptr_t)64 << 20) * (uintptr_t)kr_tensor_storage(g, t));
}

typedef struct plan {
    kr_cuda_op *ops;
    unsigned char *folded;
    kr_cuda_step *steps;
    int n;
    size_t scratch;
    float *sums; /* or NULL: scratch the steps' sums pointers are bound to (fold_decoder_block) */
    const char *why;
} plan;

/* The ops of @p g at @p batch as backend.c would give them without folds (every activation
 * its own node), nothing planned yet. */
static plan plan_ops(const kr_graph *g, int batch)
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
    return p;
}

/* Plans @p g at @p batch with no backend folds. */
static plan make_plan(const kr_graph *g, int batch)
{
    plan p = plan_ops(g, batch);
    p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, batch, p.steps, &p.n, &p.scratch);
    return p;
}

static void free_plan(plan *p)
{
    free(p->ops);
    free(p->folded);
    free(p->steps);
    free(p->sums);
}

/* @p p's ops moved to the places of the cuda backend's memory plan (its slack, the f16
 * arena's halved offsets), constants where fake_ptr put them. */
static void place_ops(plan *p, const kr_graph *g, int batch, int f16)
{
    kr_plan mp;
    keyer_error err = {0};
    if (kr_plan_create(g, batch, KR_CUDA_PLAN_SLACK, &mp, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        kr_cuda_op *op = &p->ops[n];
        op->f16 = f16;
        for (int i = 0; i <= node->n_inputs; i++) {
            int t = i < node->n_inputs ? node->inputs[i] : node->outputs[0];
            int st = t >= 0 ? kr_tensor_storage(g, t) : -1;
            if (st < 0 || kr_tensor_is_const(&g->tensors[st]))
                continue;
            void *at = (void *)((uintptr_t)0x40000000u + mp.offsets[st] / (f16 ? 2 : 1));
            if (i < node->n_inputs)
                op->in[i] = at;
            else
                op->out = at;
        }
    }
    kr_plan_destroy(&mp);
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

/* Channels step @p s reads an excitation for (persistent.h). */
static int scaled_channels(const kr_cuda_step *s)
{
    return s->kind == KR_STEP_CONV ? s->ic : s->oc;
}

static void test_selfie_excitations(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    plan p = make_plan(g, 1);
    if (p.why)
        fail_msg("selfie not planned: %s", p.why);
    int pools = 0, tails_dw = 0, tails_pool = 0, by_conv = 0, by_resize = 0, by_mul = 0;
    for (int n = 0; n < g->n_nodes; n++)
        pools += g->nodes[n].op == KR_OP_AVERAGE_POOL_2D;
    unsigned char *used = calloc(p.scratch, 1);
    assert_non_null(used);
    for (int i = 0; i < p.n; i++) {
        const kr_cuda_step *s = &p.steps[i];
        if (s->kind == KR_STEP_CONV)
            assert_true(s->oh * s->ow > 1); /* no dense layer left as a step */
        if (s->se_layers) { /* a prologue: an earlier tail wrote its sums */
            assert_true(s->se_layers <= 2);
            assert_int_equal(s->se_out[s->se_layers - 1], scaled_channels(s));
            int found = 0;
            for (int j = 0; j < i; j++)
                found += p.steps[j].tail && p.steps[j].tail_partial_off == s->se_partial_off &&
                         p.steps[j].tail_slices == s->se_slices && p.steps[j].tail_c == s->se_c;
            assert_int_equal(found, 1);
            by_conv += s->kind == KR_STEP_CONV;
            by_resize += s->kind == KR_STEP_RESIZE;
            by_mul += s->kind == KR_STEP_BINARY;
        }
        if (!s->tail)
            continue;
        tails_dw += s->kind == KR_STEP_DEPTHWISE || s->kind == KR_STEP_EXPAND_DW;
        tails_pool += s->kind == KR_STEP_POOL_PARTIAL;
        int pixels = s->kind == KR_STEP_POOL_PARTIAL ? s->ih * s->iw : s->oh * s->ow;
        if (s->kind == KR_STEP_EXPAND_DW) { /* slices: the tiles */
            int tiles = ((s->oh + s->tile - 1) / s->tile) * ((s->ow + s->tile - 1) / s->tile);
            assert_int_equal(s->tail_slices, tiles);
            assert_true(s->tile * s->tile * s->chan <= KR_CUDA_TILE_FLOATS);
        } else { /* whole pixels, covering the item's pixels, one pass of a block each */
            assert_true(s->tail_slices * s->tail_pixels >= pixels);
            assert_true((s->tail_slices - 1) * s->tail_pixels < pixels);
        }
        if (s->kind != KR_STEP_POOL_PARTIAL && s->kind != KR_STEP_EXPAND_DW) {
            assert_true(s->tail_pixels * s->tail_units * s->split <= KR_CUDA_PERSISTENT_THREADS);
            assert_true(s->tail_pixels * s->tail_c <= KR_CUDA_TILE_FLOATS);
        }
        /* its sums: scratch used once */
        size_t floats = (size_t)s->tail_slices * s->tail_c;
        assert_true(s->tail_partial_off + floats <= p.scratch);
        for (size_t f = 0; f < floats; f++)
            assert_int_equal(used[s->tail_partial_off + f]++, 0);
    }
    free(used);
    printf("selfie: %d nodes -> %d steps (no backend folds here; activations done by the step "
           "before them), %d pools: tails on %d depthwise and %d pool steps; excitations computed by %d convs, %d resize, %d "
           "MULs; %zu scratch floats\n",
           g->n_nodes, p.n, pools, tails_dw, tails_pool, by_conv, by_resize, by_mul,
           p.scratch);
    /* pointwise + depthwise pairs as one step: the encoder's but the two stride-2 3x3 ones
     * (the decoder's depthwise inputs are also read by an ADD, not folded here) */
    int fused = 0;
    for (int i = 0; i < p.n; i++) {
        const kr_cuda_step *s = &p.steps[i];
        if (s->kind != KR_STEP_EXPAND_DW)
            continue;
        fused++;
        int hh = (s->tile - 1) * s->sh + (s->kh - 1) * s->dh + 1;
        int hw = (s->tile - 1) * s->sw + (s->kw - 1) * s->dw + 1;
        assert_true(hh * hw * s->chan <= KR_CUDA_MID_FLOATS);
        assert_true(s->oc % s->chan == 0 && s->chan % 4 == 0 && s->group == 4);
        assert_true(s->w2 != NULL && s->w != NULL && s->w2 != s->w);
    }
    printf("selfie: %d pointwise + depthwise steps\n", fused);
    assert_int_equal(fused, 6);
    assert_int_equal(pools, 10);
    assert_int_equal(tails_dw, 6);
    assert_int_equal(tails_pool, 4);
    assert_int_equal(count_kind(&p, KR_STEP_POOL_PARTIAL), 4);
    assert_int_equal(count_kind(&p, KR_STEP_POOL_FINAL), 0);
    assert_int_equal(by_conv, 6);
    assert_int_equal(by_resize, 1);
    assert_int_equal(by_mul, 3);
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
        assert_int_equal(x->tail, y->tail);
        assert_int_equal(x->tail_pixels, y->tail_pixels);
        assert_int_equal(x->tail_slices, y->tail_slices);
        assert_int_equal(x->tail_units, y->tail_units);
        assert_int_equal(x->se_layers, y->se_layers);
    }
    assert_int_equal(b.scratch, 4 * a.scratch); /* sums per item */
    free_plan(&a);
    free_plan(&b);
    keyer_model_destroy(&m);
}

/* A CONV_2D node in[0..2] -> @p y with a k x k window, stride 1 and @p padding. */
static void conv_node(kt_graph *b, const int *in, int y, int k, kr_padding padding)
{
    kr_node *n = kt_graph_node(b, KR_OP_CONV_2D, 3, in, y);
    n->p.window.kernel_h = n->p.window.kernel_w = k;
    n->p.window.stride_h = n->p.window.stride_w = 1;
    n->p.window.padding = padding;
}

/* x [1, 6, 6, 4] -> PAD H and W by 1 -> 3x3 VALID convolution to 8 channels; with
 * @p pad_out the padded tensor is a graph output too. */
static kr_graph *padded_conv(int pad_out)
{
    static float w[8 * 3 * 3 * 4], bias[8];
    static const int32_t pads[8] = {0, 0, 1, 1, 1, 1, 0, 0};
    kt_graph b;
    kt_graph_begin(&b, "padded", 8, 4, 1 << 12);
    int xd[4] = {1, 6, 6, 4}, pd[4] = {1, 8, 8, 4}, yd[4] = {1, 6, 6, 8}, padd[2] = {4, 2};
    int wd[4] = {8, 3, 3, 4}, bd = 8;
    int x = kt_graph_act(&b, 4, xd);
    kt_graph_input(&b, x);
    int pin[2] = {x, kt_graph_const(&b, KR_DTYPE_I32, 2, padd, pads)};
    int p = kt_graph_act(&b, 4, pd);
    kt_graph_node(&b, KR_OP_PAD, 2, pin, p);
    int in[3] = {p, kt_graph_const(&b, KR_DTYPE_F32, 4, wd, w),
                 kt_graph_const(&b, KR_DTYPE_F32, 1, &bd, bias)};
    int y = kt_graph_act(&b, 4, yd);
    conv_node(&b, in, y, 3, KR_PADDING_VALID);
    kt_graph_output(&b, y);
    if (pad_out)
        kt_graph_output(&b, p);
    return kt_graph_build(&b);
}

/* A spatial PAD read only by a convolution is the convolution's window (the PAD's input, the
 * window moved by the leading rows and columns); one that something else reads too is a PAD
 * step the schedule does not have. The pose models' PADs are all of the first kind. */
static void test_spatial_pads(void **state)
{
    (void)state;
    for (int pad_out = 0; pad_out < 2; pad_out++) {
        kr_graph *g = padded_conv(pad_out);
        plan p = make_plan(g, 2);
        if (pad_out) {
            assert_non_null(p.why);
            assert_non_null(strstr(p.why, "PAD"));
        } else {
            assert_null(p.why);
            assert_int_equal(p.n, 1);
            const kr_cuda_step *s = &p.steps[0];
            assert_int_equal(s->kind, KR_STEP_CONV);
            assert_ptr_equal(s->x, fake_ptr(g, g->inputs[0]));
            assert_true(s->ih == 6 && s->iw == 6 && s->pt == 1 && s->pl == 1);
            assert_true(s->oh == 6 && s->ow == 6 && s->kh == 3);
        }
        free_plan(&p);
        kr_graph_destroy(&g);
    }
    const char *names[3] = {"pose-lite", "pose-full", "pose-heavy"};
    for (int i = 0; i < 3; i++) {
        keyer_model *m = load(names[i]);
        plan p = make_plan(kr_model_graph(m), 1);
        printf("%s: %s\n", names[i], p.why ? p.why : "(planned)");
        assert_null(p.why);
        assert_int_equal(count_kind(&p, KR_STEP_PAD), 0);
        free_plan(&p);
        keyer_model_destroy(&m);
    }
}

/* What ONNX models bring and the schedule does not do is refused, so that AUTO falls back to
 * the per-node kernels: a spatial PAD that reflects, repeats the edge or fills a value other
 * than 0 (neither a window nor a PAD step), a grouped convolution, the new operators. */
static void test_onnx_refusals(void **state)
{
    (void)state;
    for (int variant = 0; variant < 5; variant++) {
        kr_graph *g = padded_conv(0);
        const char *want = "PAD";
        if (variant == 0)
            g->nodes[0].p.pad.mode = KR_PAD_REFLECT;
        else if (variant == 1)
            g->nodes[0].p.pad.mode = KR_PAD_EDGE;
        else if (variant == 2)
            g->nodes[0].p.pad.value = 1.5f;
        else if (variant == 3)
            g->nodes[1].p.window.groups = 2, want = "grouped";
        else /* the PAD node turned into a SUB (of the same shapes): an operator it lacks */
            g->nodes[0].op = KR_OP_SUB, want = "SUB";
        plan p = make_plan(g, 1);
        printf("variant %d: %s\n", variant, p.why ? p.why : "(planned)");
        assert_non_null(p.why);
        assert_non_null(strstr(p.why, want));
        free_plan(&p);
        kr_graph_destroy(&g);
    }
}

/* face-mesh: every PRELU is a BINARY step (mul 2) with its slopes per channel. */
static void test_face_mesh_prelu(void **state)
{
    (void)state;
    keyer_model *m = load("face-mesh");
    const kr_graph *g = kr_model_graph(m);
    int prelus = 0;
    for (int n = 0; n < g->n_nodes; n++)
        prelus += g->nodes[n].op == KR_OP_PRELU;
    assert_true(prelus > 0);
    plan p = make_plan(g, 3);
    assert_null(p.why);
    int steps = 0;
    for (int i = 0; i < p.n; i++) {
        const kr_cuda_step *s = &p.steps[i];
        if (s->kind != KR_STEP_BINARY || s->mul != 2)
            continue;
        steps++;
        const kr_node *node = &g->nodes[s->node];
        assert_int_equal(node->op, KR_OP_PRELU);
        assert_int_equal(s->bmode, 1);
        assert_int_equal(s->cn, s->oc);
        assert_int_equal(s->batched, 0);
        assert_ptr_equal(s->x2, fake_ptr(g, node->inputs[1]));
    }
    assert_int_equal(steps, prelus);
    free_plan(&p);
    keyer_model_destroy(&m);
}

/* face-short: its channel PADs are done by the ADDs reading them (BINARY bmode 3, the PAD's
 * input as the operand), its max pools and its two concatenations are steps; a PAD whose ADD
 * writes where the PAD's input is keeps a step of its own. */
static void test_face_short_plan(void **state)
{
    (void)state;
    keyer_model *m = load("face-short");
    const kr_graph *g = kr_model_graph(m);
    int pads = 0, first_pad = -1;
    for (int n = 0; n < g->n_nodes; n++)
        if (g->nodes[n].op == KR_OP_PAD) {
            pads++;
            if (first_pad < 0)
                first_pad = n;
        }
    assert_true(pads >= 4);
    for (int reuse = 0; reuse < 2; reuse++) {
        plan p = plan_ops(g, 2);
        if (reuse) /* the ADD after the first PAD writes over the PAD's input */
            for (int a = first_pad + 1; a < g->n_nodes; a++)
                if (g->nodes[a].op == KR_OP_ADD) {
                    p.ops[a].out = fake_ptr(g, g->nodes[first_pad].inputs[0]);
                    break;
                }
        p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, 2, p.steps, &p.n, &p.scratch);
        assert_null(p.why);
        int folded = 0, absorbed = 0;
        for (int i = 0; i < p.n; i++) {
            const kr_cuda_step *s = &p.steps[i];
            const void *padded = NULL;
            const kr_node *add = NULL;
            if (s->kind == KR_STEP_BINARY && s->bmode == 3) { /* the ADD with the PAD */
                folded++;
                add = &g->nodes[s->node];
                padded = s->x2;
                assert_true(s->cn < s->oc);
            } else if (s->kind == KR_STEP_CONV && s->res_c) { /* the conv with that ADD */
                absorbed++;
                assert_int_equal(s->res_pre, 1);
                assert_true(s->res_c < s->oc);
                padded = s->res;
                for (int a = s->node + 1; a < g->n_nodes && !add; a++) /* reads the conv */
                    for (int k = 0; k < g->nodes[a].n_inputs; k++)
                        if (g->nodes[a].op == KR_OP_ADD &&
                            g->tensors[g->nodes[a].inputs[k]].producer == s->node)
                            add = &g->nodes[a];
            } else {
                continue;
            }
            assert_non_null(add);
            assert_int_equal(add->op, KR_OP_ADD);
            /* the padded operand is the input of the PAD that one of the ADD's operands is */
            int found = 0;
            for (int k = 0; k < 2; k++) {
                int w = g->tensors[add->inputs[k]].producer;
                found |= w >= 0 && g->nodes[w].op == KR_OP_PAD &&
                         padded == fake_ptr(g, g->nodes[w].inputs[0]);
            }
            assert_true(found);
        }
        assert_int_equal(folded + absorbed, pads - reuse);
        assert_true(absorbed >= pads / 2);
        assert_int_equal(count_kind(&p, KR_STEP_PAD), reuse);
        assert_int_equal(count_kind(&p, KR_STEP_MAXPOOL), 3);
        assert_int_equal(count_kind(&p, KR_STEP_CONCAT), 2);
        for (int i = 0; i < p.n; i++)
            if (p.steps[i].kind == KR_STEP_CONCAT)
                assert_true(p.steps[i].cn > 0 && p.steps[i].cn < p.steps[i].count);
        /* the 5x5 RGB stem reads the float input itself in f16 instances */
        const int in = g->inputs[0];
        assert_int_equal(kr_cuda_persistent_input_step(g, in, fake_ptr(g, in), p.steps, p.n), 0);
        assert_int_equal(p.steps[0].kh, 5);
        free_plan(&p);
    }
    /* with the backend's memory plan: every relu(conv(x) + pad(y)) is the convolution's step
     * (no RELU, ADD or PAD step left), which needs KR_CUDA_PLAN_SLACK 3 */
    for (int f16 = 0; f16 < 2; f16++) {
        plan p = plan_ops(g, 1);
        place_ops(&p, g, 1, f16);
        p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, 1, p.steps, &p.n, &p.scratch);
        assert_null(p.why);
        assert_int_equal(count_kind(&p, KR_STEP_UNARY), 0);
        assert_int_equal(count_kind(&p, KR_STEP_BINARY), 0);
        assert_int_equal(count_kind(&p, KR_STEP_PAD), 0);
        free_plan(&p);
    }
    keyer_model_destroy(&m);
}

/* selfie-landscape, whose excitations pool with MEAN over H and W instead of a global
 * AVERAGE_POOL_2D, gets the same steps as selfie: every MEAN a pool tail or prologue. */
static void test_landscape_means(void **state)
{
    (void)state;
    keyer_model *a = load("selfie"), *b = load("selfie-landscape");
    const kr_graph *gb = kr_model_graph(b);
    int means = 0;
    for (int n = 0; n < gb->n_nodes; n++) {
        means += gb->nodes[n].op == KR_OP_MEAN;
        if (gb->nodes[n].op == KR_OP_MEAN)
            assert_true(kr_cuda_is_global_pool(gb, &gb->nodes[n]));
    }
    assert_int_equal(means, 10);
    plan p = make_plan(kr_model_graph(a), 1), q = make_plan(gb, 1);
    assert_null(p.why);
    assert_null(q.why);
    assert_int_equal(q.n, p.n);
    for (int i = 0; i < p.n; i++) {
        assert_int_equal(q.steps[i].kind, p.steps[i].kind);
        assert_int_equal(q.steps[i].tail, p.steps[i].tail);
        assert_int_equal(q.steps[i].se_layers, p.steps[i].se_layers);
    }
    assert_int_equal(count_kind(&q, KR_STEP_POOL_FINAL), 0);
    free_plan(&p);
    free_plan(&q);
    keyer_model_destroy(&a);
    keyer_model_destroy(&b);
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
    conv_node(b, in, y, 1, KR_PADDING_VALID);
    return y;
}

static int unary(kt_graph *b, kr_op op, int x, const int *d)
{
    int y = kt_graph_act(b, 4, d);
    kt_graph_node(b, op, 1, &x, y);
    return y;
}

/* Adds x * excitation(x) to @p b for x of shape @p xd (NHWC, C a multiple of 4): a global
 * average pool -> 1x1 C->C/4 -> RELU -> 1x1 C/4->C -> LOGISTIC -> MUL(x, .). Returns the MUL's
 * output; the pool's in *pool. */
static int add_excitation(kt_graph *b, int x, const int *xd, int *pool)
{
    int pd[4] = {1, 1, 1, xd[3]}, hd[4], sd[4];
    *pool = kt_graph_act(b, 4, pd);
    kr_node *pn = kt_graph_node(b, KR_OP_AVERAGE_POOL_2D, 1, &x, *pool);
    pn->p.window.kernel_h = xd[1], pn->p.window.kernel_w = xd[2];
    pn->p.window.stride_h = pn->p.window.stride_w = 1;
    pn->p.window.padding = KR_PADDING_VALID;
    int h = unary(b, KR_OP_RELU, conv1x1(b, *pool, pd, xd[3] / 4, hd), hd);
    int s = unary(b, KR_OP_LOGISTIC, conv1x1(b, h, hd, xd[3], sd), sd);
    int y = kt_graph_act(b, 4, xd), in[2] = {x, s};
    kt_graph_node(b, KR_OP_MUL, 2, in, y);
    return y;
}

/* x [1,8,8,16] (the graph input, or with @p produced a pointwise conv of it) -> global pool
 * -> 1x1 16->4 -> RELU -> 1x1 4->16 -> LOGISTIC -> MUL(x, .) [-> ADD(., z) with @p then_add,
 * z a second input] [-> a pointwise conv with @p then_conv]; @p pool_out also makes the
 * pool's output a graph output. */
static kr_graph *excitation(int produced, int then_add, int then_conv, int pool_out)
{
    kt_graph b;
    kt_graph_begin(&b, "excitation", 32, 16, 1 << 16);
    int xd[4] = {1, 8, 8, 16}, yd[4];
    int x = kt_graph_act(&b, 4, xd), z = -1;
    kt_graph_input(&b, x);
    if (then_add) {
        z = kt_graph_act(&b, 4, xd);
        kt_graph_input(&b, z);
    }
    if (produced)
        x = conv1x1(&b, x, xd, 16, xd);
    int p, y = add_excitation(&b, x, xd, &p);
    if (then_add) {
        int a2[2] = {y, z};
        y = kt_graph_act(&b, 4, xd);
        kt_graph_node(&b, KR_OP_ADD, 2, a2, y);
    }
    if (then_conv)
        y = conv1x1(&b, y, xd, 8, yd);
    kt_graph_output(&b, y);
    if (pool_out)
        kt_graph_output(&b, p);
    return kt_graph_build(&b);
}

/* Adds an RGB stem to @p b: a graph input [1, size, size, 3] -> 3x3 SAME convolution to 16
 * channels. Returns the convolution's output; the input in *x. */
static int add_stem(kt_graph *b, int size, int *x)
{
    static float w[16 * 3 * 3 * 3], bias[16];
    int xd[4] = {1, size, size, 3}, yd[4] = {1, size, size, 16}, wd[4] = {16, 3, 3, 3}, bd = 16;
    *x = kt_graph_act(b, 4, xd);
    kt_graph_input(b, *x);
    int in[3] = {*x, kt_graph_const(b, KR_DTYPE_F32, 4, wd, w),
                 kt_graph_const(b, KR_DTYPE_F32, 1, &bd, bias)};
    int y = kt_graph_act(b, 4, yd);
    conv_node(b, in, y, 3, KR_PADDING_SAME);
    return y;
}

/* A stem: x [1, 64, 64, 3] -> 3x3 convolution to 16 channels -> y; with @p second_reader, x
 * is also read by a MUL (x * x, a second output). */
static kr_graph *stem(int second_reader)
{
    kt_graph b;
    kt_graph_begin(&b, "stem", 8, 4, 1 << 12);
    int xd[4] = {1, 64, 64, 3}, x;
    int y = add_stem(&b, 64, &x);
    kt_graph_output(&b, y);
    if (second_reader) {
        int z = kt_graph_act(&b, 4, xd), m[2] = {x, x};
        kt_graph_node(&b, KR_OP_MUL, 2, m, z);
        kt_graph_output(&b, z);
    }
    return kt_graph_build(&b);
}

/* x [1, 16, 16, 3] -> 3x3 SAME convolution to 16 channels -> 1x1 convolution to @p oc. */
static kr_graph *stem_pointwise(int oc)
{
    static float w2[16 * 16], bias2[16];
    kt_graph b;
    kt_graph_begin(&b, "stem-pw", 8, 6, 1 << 13);
    int yd[4] = {1, 16, 16, oc}, w2d[4] = {oc, 1, 1, 16}, x;
    int t = add_stem(&b, 16, &x);
    int in2[3] = {t, kt_graph_const(&b, KR_DTYPE_F32, 4, w2d, w2),
                  kt_graph_const(&b, KR_DTYPE_F32, 1, &oc, bias2)};
    int y = kt_graph_act(&b, 4, yd);
    conv_node(&b, in2, y, 1, KR_PADDING_VALID);
    kt_graph_output(&b, y);
    return kt_graph_build(&b);
}

/* x [1, 16, 16, 3] -> 3x3 stem to 16 -> 1x1 16 -> 16 -> RELU -> r, and r scaled by its
 * excitation (global pool -> 1x1 16->4 -> RELU -> 1x1 4->16 -> LOGISTIC -> MUL(r, .)). */
static kr_graph *stem_pointwise_pooled(void)
{
    kt_graph b;
    kt_graph_begin(&b, "stem-pw-pool", 24, 16, 1 << 14);
    int x, p, d[4] = {1, 16, 16, 16};
    int t = add_stem(&b, 16, &x);
    int r = unary(&b, KR_OP_RELU, conv1x1(&b, t, d, 16, d), d);
    kt_graph_output(&b, add_excitation(&b, r, d, &p));
    return kt_graph_build(&b);
}

/* The kernel's CONV_PW step has no pool tail: an activation after it whose output is pooled
 * for an excitation is not absorbed into it, so that some step computes the pool's sums. */
static void test_stem_pointwise_no_tail(void **state)
{
    (void)state;
    kr_graph *g = stem_pointwise_pooled();
    plan p = make_plan(g, 1);
    assert_null(p.why);
    assert_int_equal(p.steps[0].kind, KR_STEP_CONV_PW);
    int tails = 0;
    for (int i = 0; i < p.n; i++) {
        if (p.steps[i].kind == KR_STEP_CONV_PW)
            assert_int_equal(p.steps[i].tail, 0);
        tails += p.steps[i].tail || p.steps[i].kind == KR_STEP_POOL_PARTIAL;
    }
    assert_int_equal(tails, 1); /* the pool's sums, once */
    free_plan(&p);
    kr_graph_destroy(&g);
}

/* A hand-built stem and 1x1: one CONV_PW step (the stem's output not stored) when the 1x1 keeps
 * the 16 channels, the shape run on the GPU; two steps when it narrows them to 8. */
static void test_stem_pointwise_shapes(void **state)
{
    (void)state;
    for (int oc = 16; oc >= 8; oc -= 8) {
        kr_graph *g = stem_pointwise(oc);
        plan p = make_plan(g, 1);
        assert_null(p.why);
        assert_int_equal(p.n, oc == 16 ? 1 : 2);
        assert_int_equal(p.steps[0].kind, oc == 16 ? KR_STEP_CONV_PW : KR_STEP_CONV);
        if (oc == 16) {
            assert_null(p.steps[0].y1);
            assert_int_equal(p.steps[0].cn, 16);
            assert_ptr_equal(p.steps[0].y, fake_ptr(g, g->outputs[0]));
        }
        free_plan(&p);
        kr_graph_destroy(&g);
    }
}

/* Selfie's two decoder resizes read only by a 1x1 convolution take no step (rz); the one
 * scaled by an excitation keeps its step; and none is merged when the convolution's output sits
 * where the resize's input is. */
static void test_resize_into_conv(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    for (int reuse = 0; reuse < 2; reuse++) {
        plan p = plan_ops(g, 1);
        int resizes = 0;
        for (int n = 0; n < g->n_nodes; n++) {
            const kr_node *node = &g->nodes[n];
            if (node->op != KR_OP_RESIZE_BILINEAR)
                continue;
            resizes++;
            if (reuse) /* the reading convolution's output placed on the resize's input */
                for (int k = 0; k < g->n_nodes; k++)
                    if (g->nodes[k].op == KR_OP_CONV_2D &&
                        g->nodes[k].inputs[0] == node->outputs[0])
                        p.ops[k].out = fake_ptr(g, node->inputs[0]);
        }
        p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, 1, p.steps, &p.n, &p.scratch);
        assert_null(p.why);
        int rz = 0;
        for (int i = 0; i < p.n; i++) {
            const kr_cuda_step *s = &p.steps[i];
            if (!s->rz)
                continue;
            rz++;
            assert_int_equal(s->kind, KR_STEP_CONV);
            assert_true(s->group == 4 && s->kh == 1 && s->kw == 1 && !s->se_layers);
            assert_true(s->rz_ih * 2 == s->oh && s->rz_iw * 2 == s->ow);
            assert_int_equal(g->nodes[s->node].op, KR_OP_CONV_2D);
            assert_ptr_equal(s->x, fake_ptr(g, g->nodes[s->node - 1].inputs[0]));
        }
        assert_int_equal(resizes, 3);
        assert_int_equal(rz, reuse ? 0 : 2);
        assert_int_equal(count_kind(&p, KR_STEP_RESIZE), reuse ? 3 : 1);
        free_plan(&p);
    }
    keyer_model_destroy(&m);
}

/* Selfie's RGB stem and the 1x1 convolution after it are one CONV_PW step, which also stores
 * the stem's output (the decoder reads it); refused when the 1x1 output would overlap the stem's
 * input. */
static void test_stem_pointwise(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    int pw = -1; /* the 1x1 convolution reading the stem's activation */
    for (int n = 1; n < g->n_nodes && pw < 0; n++)
        if (g->nodes[n].op == KR_OP_CONV_2D)
            pw = n;
    assert_true(pw > 0);
    const int stem_out = g->nodes[pw].inputs[0];
    for (int reuse = 0; reuse < 2; reuse++) {
        plan p = plan_ops(g, 2);
        if (reuse)
            p.ops[pw].out = fake_ptr(g, g->inputs[0]);
        p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, 2, p.steps, &p.n, &p.scratch);
        assert_null(p.why);
        const kr_cuda_step *s = &p.steps[0];
        if (reuse) {
            assert_int_equal(s->kind, KR_STEP_CONV);
            assert_int_equal(count_kind(&p, KR_STEP_CONV_PW), 0);
        } else {
            assert_int_equal(s->kind, KR_STEP_CONV_PW);
            assert_int_equal(s->kh, 3);
            assert_int_equal(s->ic, 3);
            assert_int_equal(s->cn, 16);
            assert_int_equal(s->oc, 16);
            assert_ptr_equal(s->x, fake_ptr(g, g->inputs[0]));
            assert_ptr_equal(s->y1, fake_ptr(g, stem_out)); /* read again by the decoder */
            assert_int_equal(s->e_post, KR_CUDA_POST_HARD_SWISH);
            assert_int_equal(s->post, KR_CUDA_POST_RELU); /* the RELU after the 1x1 */
            assert_ptr_equal(s->w2, fake_ptr(g, g->nodes[pw].inputs[1]));
            assert_int_equal(p.steps[1].kind, KR_STEP_DEPTHWISE);
            assert_ptr_equal(p.steps[1].x, s->y);
        }
        free_plan(&p);
    }
    keyer_model_destroy(&m);
}

/* f16 graph inputs and outputs without conversion steps: selfie's stem reads the float input,
 * its transpose convolution writes the float output; refused for any other reader or writer. */
static void test_io_steps(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    plan p = make_plan(g, 1);
    assert_null(p.why);
    const int in = g->inputs[0], out = g->outputs[0];
    assert_int_equal(kr_cuda_persistent_input_step(g, in, fake_ptr(g, in), p.steps, p.n), 0);
    assert_int_equal(p.steps[0].kind, KR_STEP_CONV_PW); /* the stem with its 1x1 convolution */
    assert_int_equal(kr_cuda_persistent_output_step(g, out, fake_ptr(g, out), p.steps, p.n),
                     p.n - 1);
    assert_int_equal(p.steps[p.n - 1].kind, KR_STEP_TCONV);
    /* another place: nothing reads or writes there */
    assert_int_equal(kr_cuda_persistent_input_step(g, in, fake_ptr(g, out), p.steps, p.n), -1);
    /* the stem not on the group-4 path, or with 4 channels: no float input */
    p.steps[0].group = 1;
    assert_int_equal(kr_cuda_persistent_input_step(g, in, fake_ptr(g, in), p.steps, p.n), -1);
    p.steps[0].group = 4, p.steps[0].ic = 4;
    assert_int_equal(kr_cuda_persistent_input_step(g, in, fake_ptr(g, in), p.steps, p.n), -1);
    /* a writer with a pool tail, or one that reads there: no float output */
    kr_cuda_step *last = &p.steps[p.n - 1];
    last->tail = 1;
    assert_int_equal(kr_cuda_persistent_output_step(g, out, fake_ptr(g, out), p.steps, p.n), -1);
    last->tail = 0;
    const void *x = last->x;
    last->x = last->y;
    assert_int_equal(kr_cuda_persistent_output_step(g, out, fake_ptr(g, out), p.steps, p.n), -1);
    last->x = x;
    /* an earlier step writing another tensor at the same place (the f16 arena reuses it for
     * selfie): still folded; the last writer not the transpose convolution: refused */
    void *y = last->y;
    p.steps[p.n - 2].y = y;
    assert_int_equal(kr_cuda_persistent_output_step(g, out, fake_ptr(g, out), p.steps, p.n),
                     p.n - 1);
    last->y = fake_ptr(g, in);
    assert_int_equal(kr_cuda_persistent_output_step(g, out, fake_ptr(g, out), p.steps, p.n), -1);
    last->y = y;
    free_plan(&p);
    keyer_model_destroy(&m);
    /* a hand-built stem: folded alone, refused when a second node reads the input */
    for (int second = 0; second < 2; second++) {
        kr_graph *sg = stem(second);
        plan q = make_plan(sg, 1);
        assert_null(q.why);
        int at = kr_cuda_persistent_input_step(sg, sg->inputs[0], fake_ptr(sg, sg->inputs[0]),
                                               q.steps, q.n);
        assert_int_equal(q.steps[0].group, 4);
        assert_int_equal(at, second ? -1 : 0);
        free_plan(&q);
        kr_graph_destroy(&sg);
    }
}

/* The steps of excitation(@p produced, @p then_add, 1, 0) at batch 2 with the backend's
 * residual fold of the ADD into the MUL done by hand (make_plan does no folds); with
 * @p reuse 1, the last conv's output placed where the MUL's full operand is (as the memory plan
 * may: that tensor's life ended at the MUL); 2, an f16 instance with that output right after
 * the operand's halves (adjacent, not overlapping). */
static plan plan_folded_add(const kr_graph *g, int reuse)
{
    plan p = plan_ops(g, 2);
    int mul = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        const kr_cuda_op *op = &p.ops[n];
        if (node->op == KR_OP_MUL)
            mul = n;
        if (node->op == KR_OP_ADD) { /* MUL + ADD: the MUL writes the sum */
            assert_int_equal(mul, n - 1);
            p.ops[mul].out = op->out;
            p.ops[mul].residual = fake_ptr(g, node->inputs[1]);
            p.folded[n] = 1;
        }
    }
    if (reuse == 1)
        p.ops[g->n_nodes - 1].out = (void *)(uintptr_t)p.ops[mul].in[0];
    if (reuse == 2) { /* f16: the conv's output right after the operand's halves */
        for (int n = 0; n < g->n_nodes; n++)
            p.ops[n].f16 = 1;
        size_t half_bytes = kr_tensor_elements(&g->tensors[g->inputs[0]]) * 2 * 2;
        p.ops[g->n_nodes - 1].out = (void *)((uintptr_t)p.ops[mul].in[0] + half_bytes);
    }
    p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, 2, p.steps, &p.n, &p.scratch);
    return p;
}

static void test_excitation_fusion(void **state)
{
    (void)state;
    for (int produced = 0; produced < 2; produced++)
        for (int then_conv = 0; then_conv < 2; then_conv++) {
            kr_graph *g = excitation(produced, 0, then_conv, 0);
            plan p = make_plan(g, 2);
            assert_null(p.why);
            /* the tail on the producing conv or on a pool step, then the consumer */
            assert_int_equal(p.n, 2);
            const kr_cuda_step *t = &p.steps[0], *c = &p.steps[1];
            assert_int_equal(t->kind, produced ? KR_STEP_CONV : KR_STEP_POOL_PARTIAL);
            assert_int_equal(c->kind, then_conv ? KR_STEP_CONV : KR_STEP_BINARY);
            assert_int_equal(t->tail, 1);
            assert_int_equal(t->tail_c, 16);
            assert_null(t->tail_add);
            assert_int_equal(c->se_layers, 2);
            assert_int_equal(c->se_out[0], 4);
            assert_int_equal(c->se_out[1], 16);
            assert_int_equal(c->se_post[0], KR_CUDA_POST_RELU);
            assert_int_equal(c->se_post[1], KR_CUDA_POST_LOGISTIC);
            assert_int_equal(c->se_pixels, 64);
            assert_int_equal(c->se_c, 16);
            assert_true(c->se_partial_off == t->tail_partial_off && c->se_slices == t->tail_slices);
            if (produced) /* 4 lanes per output (16 input channels), 16 outputs per pixel:
                           * 256 threads cover 4 pixels, 16 slices of the 64 */
                assert_true(t->split == 4 && t->tail_units == 16 && t->tail_pixels == 4 &&
                            t->tail_slices == 16);
            if (then_conv) /* reads the MUL's full operand: the pool's input */
                assert_ptr_equal(c->x, produced ? t->y : fake_ptr(g, g->inputs[0]));
            assert_null(c->scale_add);
            free_plan(&p);
            kr_graph_destroy(&g);
        }
    /* MUL + ADD (folded) before a pointwise conv: the conv scales and adds */
    kr_graph *g = excitation(1, 1, 1, 0);
    plan p = plan_folded_add(g, 0);
    assert_null(p.why);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.steps[1].kind, KR_STEP_CONV);
    assert_true(p.steps[1].se_layers == 2 &&
                p.steps[1].se_partial_off == p.steps[0].tail_partial_off);
    assert_ptr_equal(p.steps[1].x, p.steps[0].y);
    assert_ptr_equal(p.steps[1].scale_add, fake_ptr(g, g->inputs[1]));
    free_plan(&p);
    /* f16: sized in halves, an adjacent output is no overlap */
    p = plan_folded_add(g, 2);
    assert_null(p.why);
    assert_int_equal(p.n, 2);
    assert_true(p.steps[1].kind == KR_STEP_CONV && p.steps[1].se_layers == 2);
    free_plan(&p);
    /* ... unless the conv's output overlaps what it would read: then the MUL keeps its step */
    p = plan_folded_add(g, 1);
    assert_null(p.why);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.steps[1].kind, KR_STEP_BINARY);
    assert_int_equal(p.steps[1].se_layers, 2);
    assert_ptr_equal(p.steps[1].res, fake_ptr(g, g->inputs[1]));
    assert_int_equal(p.steps[2].kind, KR_STEP_CONV);
    assert_int_equal(p.steps[2].se_layers, 0);
    assert_null(p.steps[2].scale_add);
    free_plan(&p);
    kr_graph_destroy(&g);
    /* the pool's output is also read outside: nothing fuses */
    g = excitation(0, 0, 0, 1);
    p = make_plan(g, 1);
    assert_null(p.why);
    assert_int_equal(count_kind(&p, KR_STEP_POOL_FINAL), 1);
    assert_int_equal(count_kind(&p, KR_STEP_CONV), 2);
    assert_int_equal(count_kind(&p, KR_STEP_UNARY), 0); /* done by the dense convs */
    assert_int_equal(count_kind(&p, KR_STEP_BINARY), 1);
    int posts = 0;
    for (int i = 0; i < p.n; i++) {
        assert_int_equal(p.steps[i].se_layers, 0);
        if (p.steps[i].kind == KR_STEP_CONV)
            posts |= 1 << p.steps[i].post;
    }
    assert_int_equal(posts, (1 << KR_CUDA_POST_RELU) | (1 << KR_CUDA_POST_LOGISTIC));
    free_plan(&p);
    kr_graph_destroy(&g);
}
/* The checks every cluster segment of selfie / selfie-landscape passes: E, the encoder's block
 * at 2h x 32 (1x1 convolution 72 -> 24, expand/depthwise 3x3 24 -> 88 with RELUs, 1x1
 * convolution 88 -> 24 plus the first one's output) whose output is S's input; S, the stride-2
 * expand/depthwise 5x5 24 -> 96 from 2h x 32, then an excited projection 96 -> 32 at @p h x 16,
 * then four expand/depthwise 5x5 + excited projection pairs (128, 128, 96, 96 channels) with
 * their residuals; the packed stages' sizes and alignment (E's weights after S's in stage 0). */
static void check_selfie_segment(const kr_cuda_segment *seg, const plan *p, int h, int batch)
{
    static const int e[4] = {128, 128, 96, 96};
    assert_int_equal(seg->n_ir, 4);
    assert_int_equal(seg->count, 13);
    /* E: the three steps before S */
    const kr_cuda_step *c1 = &p->steps[seg->first], *ed = c1 + 1, *c3 = c1 + 2, *sd = c1 + 3;
    assert_int_equal(seg->e_ic, 72);
    assert_int_equal(seg->e_e, 88);
    assert_int_equal(c1->kind, KR_STEP_CONV);
    assert_true(c1->kh == 1 && c1->kw == 1 && c1->ic == 72 && c1->oc == 24);
    assert_true(c1->ih == 2 * h && c1->iw == 32 && c1->oh == 2 * h && c1->ow == 32);
    assert_int_equal(ed->kind, KR_STEP_EXPAND_DW);
    assert_true(ed->kh == 3 && ed->kw == 3 && ed->sh == 1 && ed->ic == 24 && ed->oc == 88);
    assert_ptr_equal(ed->x, c1->y);
    assert_int_equal(c3->kind, KR_STEP_CONV);
    assert_true(c3->kh == 1 && c3->ic == 88 && c3->oc == 24);
    assert_ptr_equal(c3->x, ed->y);
    assert_ptr_equal(c3->res, c1->y); /* the block's residual: the first convolution's output */
    assert_ptr_equal(seg->x, c1->x);
    assert_ptr_equal(seg->e_y, c3->y);
    assert_ptr_equal(seg->e_y, sd->x);
    assert_int_equal(seg->e1_post, KR_CUDA_POST_NONE);
    assert_int_equal(seg->e3_post, KR_CUDA_POST_NONE);
    assert_int_equal(seg->e3_res, 1);
    assert_int_equal(seg->e3_res_pre, c3->res_pre);
    assert_int_equal(seg->ed.e, 88);
    assert_int_equal(seg->ed.e_post, KR_CUDA_POST_RELU);
    assert_int_equal(seg->ed.post, KR_CUDA_POST_RELU);
    /* S */
    assert_int_equal(seg->s_ic, 24);
    assert_int_equal(seg->sd.e, 96);
    assert_int_equal(seg->s_pt, 1);
    assert_int_equal(seg->s_pl, 1);
    assert_int_equal(seg->sd.e_post, KR_CUDA_POST_HARD_SWISH);
    assert_int_equal(seg->sd.post, KR_CUDA_POST_HARD_SWISH);
    assert_int_equal(sd->kind, KR_STEP_EXPAND_DW);
    assert_int_equal(sd->sh, 2);
    assert_int_equal(sd->ih, 2 * h);
    assert_null(seg->x_sums);
    assert_int_equal(seg->h, h);
    assert_int_equal(seg->batch, batch);
    assert_int_equal(seg->c, 32);
    assert_int_equal(seg->k, 5);
    assert_int_equal(seg->p0.ci, 96);
    assert_int_equal(seg->p0.hid, 24);
    assert_int_equal(seg->p0.res, 0);
    const kr_cuda_step *s = sd + 1;
    assert_int_equal(s->kind, KR_STEP_CONV); /* P0, whose excitation reads S's pool tail */
    assert_int_equal(s->se_partial_off, sd->tail_partial_off);
    assert_ptr_equal(s->x, sd->y);
    assert_ptr_equal(seg->y, p->steps[seg->first + 12].y);
    int big = 0;
    size_t total = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(seg->d[i].e, e[i]);
        assert_int_equal(seg->p[i].ci, e[i]);
        assert_int_equal(seg->p[i].hid, e[i] / 4);
        assert_int_equal(seg->p[i].res, 1);
        assert_int_equal(seg->d[i].e_post, KR_CUDA_POST_HARD_SWISH);
        assert_int_equal(seg->d[i].post, KR_CUDA_POST_HARD_SWISH);
        assert_int_equal(seg->p[i].se_post[1], KR_CUDA_POST_LOGISTIC);
        assert_true(seg->p[i].w_off > seg->d[i].w_off);
    }
    for (int i = 0; i <= 5; i++) {
        assert_int_equal(seg->stage_off[i] % 4, 0);
        assert_int_equal(seg->stage_floats[i] % 4, 0);
        assert_int_equal((size_t)seg->stage_off[i], total);
        total += (size_t)seg->stage_floats[i];
        big = seg->stage_floats[i] > big ? seg->stage_floats[i] : big;
    }
    assert_int_equal(seg->weight_floats, total);
    assert_int_equal(seg->buf_floats, big);
    /* 32x128 + 128 + 25x128 + 128 expand/depthwise, 2x(32x128) + 32 + 128 excitation, 128x32 +
     * 32 projection */
    assert_int_equal(seg->stage_floats[2], 4096 + 128 + 3200 + 128 + 8192 + 32 + 128 + 4096 + 32);
    /* S: 24x96 + 96 expansion, 25x96 + 96 depthwise; its window [5][32][96] in a stage buffer;
     * then E's: 72x24 + 24, 24x88 + 88 expansion, 9x88 + 88 depthwise, 88x24 + 24 */
    int oe[KR_SEG_E_N + 1];
    kr_seg_e_layout(72, 24, 88, oe);
    assert_int_equal(oe[KR_SEG_E_N], 1728 + 24 + 2112 + 88 + 792 + 88 + 2112 + 24);
    assert_int_equal(seg->stage_floats[0], 2304 + 96 + 2400 + 96 + oe[KR_SEG_E_N]);
    assert_int_equal(seg->sd.w_off, 0);
    assert_int_equal(seg->e_w_off, 2304 + 96 + 2400 + 96);
    assert_true(seg->buf_floats >= 5 * 32 * 96);
    /* E's input rows and window [2][32][72] + [4][32][88] in a stage buffer too */
    assert_true(seg->buf_floats >= 32 * (2 * 72 + 4 * 88));
    assert_true(seg->stage_floats[1] <= 5 * 16 * 128); /* P0's weights in EP during S */
    assert_true(kr_cuda_segment_smem(seg) <= 232448);
}

/* @p p's last projection of segment @p seg given its output's pool tail, as the backend's folds
 * make it (a slice per pixel at @p tail_slices 0), and the pool step after it taken out. */
static void fold_output_pool(plan *p, const kr_cuda_segment *seg, int tail_slices)
{
    const int last = seg->first + seg->count - 1;
    kr_cuda_step *pool = &p->steps[last + 1];
    assert_int_equal(pool->kind, KR_STEP_POOL_PARTIAL);
    p->steps[last].tail = 1;
    p->steps[last].tail_c = 32;
    p->steps[last].tail_slices = tail_slices ? tail_slices : seg->h * KR_CUDA_SEG_W;
    p->steps[last].tail_partial = (float *)(uintptr_t)0x1000;
    memmove(pool, pool + 1, (size_t)(p->n - last - 2) * sizeof(*pool));
    p->n--;
}

/* The stand-in storage tensor at stand-in address @p at (fake_ptr). */
static kr_tensor *tensor_at(const kr_graph *g, const void *at)
{
    int t = (int)(((uintptr_t)at - (uintptr_t)0x40000000u) >> 26);
    assert_true(t >= 0 && t < g->n_tensors);
    assert_ptr_equal(fake_ptr(g, t), at);
    return (kr_tensor *)&g->tensors[t];
}

/* A decoder block of selfie in @p p's steps from @p at (a 1x1 convolution, the ADD of the
 * skip, its pool step, the MUL of the skip by that pool's excitation, the ADD of the
 * convolution's output, the 1x1 expansion, the depthwise 3x3, the ADD of the two, then a 1x1
 * convolution that resizes that, or the transpose convolution) as the cuda backend's folds
 * make it: the convolution with a pool tail that adds the skip (slices of @p tail_pixels
 * pixels: the ADD and the pool step folded away); one EXPAND_DW step for the MUL of the skip by the excitation of that pool, the
 * ADD of the convolution's output (scale_add), the 1x1 expansion + RELU, the depthwise 3x3 +
 * RELU and the ADD of the two (res_mid) (6 steps taken out). The tail's sums get scratch of
 * their own (p->scratch grows) and every step's sums pointers are bound to p->sums, so that a
 * prologue's se_partial is the tail_partial it reads. */
static void fold_excited_block(plan *p, int at, int tail_pixels)
{
    kr_cuda_step *s = p->steps, *cv = &s[at];
    const kr_cuda_step *add = &s[at + 1], *pool = &s[at + 2], *mul = &s[at + 3];
    const kr_cuda_step *vadd = &s[at + 4], *pw = &s[at + 5], *dw = &s[at + 6], *mid = &s[at + 7];
    const kr_cuda_step *next = &s[at + 8];
    assert_int_equal(cv->kind, KR_STEP_CONV);
    assert_true(add->kind == KR_STEP_BINARY && add->mul == 0 && add->x2 == cv->y);
    assert_true(pool->kind == KR_STEP_POOL_PARTIAL && pool->x == add->y);
    assert_true(mul->kind == KR_STEP_BINARY && mul->mul == 1 && mul->x == add->x);
    assert_true(mul->se_layers == 2 && mul->se_partial_off == pool->tail_partial_off);
    assert_true(vadd->kind == KR_STEP_BINARY && vadd->x == mul->y && vadd->x2 == cv->y);
    assert_true(pw->kind == KR_STEP_CONV && pw->x == vadd->y && pw->kh == 1);
    assert_true(dw->kind == KR_STEP_DEPTHWISE && dw->x == pw->y && dw->kh == 3);
    assert_true(mid->kind == KR_STEP_BINARY && mid->x == pw->y && mid->x2 == dw->y);
    assert_true(next->x == mid->y);
    assert_true((next->kind == KR_STEP_CONV && next->rz) || next->kind == KR_STEP_TCONV);
    cv->tail = 1;
    cv->tail_pixels = tail_pixels;
    cv->tail_slices = (cv->oh * cv->ow + tail_pixels - 1) / tail_pixels;
    cv->tail_c = cv->oc;
    cv->tail_add = add->x; /* the skip */
    cv->tail_partial_off = p->scratch;
    p->scratch += (size_t)cv->batch * cv->tail_slices * cv->tail_c;
    kr_cuda_step d = *dw; /* as absorb_depthwise (persistent/fuse.c) makes it */
    d.kind = KR_STEP_EXPAND_DW;
    d.x = mul->x;
    d.ic = pw->ic;
    d.scale_add = cv->y;
    d.w_tensor = pw->w_tensor;
    d.group = 4;
    d.split = 1;
    d.vec = 4;
    d.e_bias = pw->bias;
    d.e_lo = pw->lo, d.e_hi = pw->hi, d.e_post = pw->post;
    d.se_layers = 2;
    d.se_c = cv->oc, d.se_slices = cv->tail_slices, d.se_pixels = cv->oh * cv->ow;
    d.se_partial_off = cv->tail_partial_off;
    for (int l = 0; l < 2; l++) {
        d.se_out[l] = mul->se_out[l];
        d.se_w[l] = mul->se_w[l], d.se_b[l] = mul->se_b[l];
        d.se_lo[l] = mul->se_lo[l], d.se_hi[l] = mul->se_hi[l], d.se_post[l] = mul->se_post[l];
    }
    d.w2 = dw->w;
    d.bias2 = dw->bias;
    d.w = pw->w;
    d.bias = NULL;
    d.res_mid = 1;
    d.res = NULL;
    d.y = mid->y;
    s[at + 1] = d;
    memmove(&s[at + 2], &s[at + 8], (size_t)(p->n - at - 8) * sizeof(*s));
    p->n -= 6;
    free(p->sums);
    p->sums = calloc(p->scratch, sizeof(float));
    assert_non_null(p->sums);
    kr_cuda_persistent_bind(s, p->n, p->sums);
}

/* fold_excited_block as the cuda backend's folds make it where the memory plan keeps the
 * pointwise and depthwise convolutions apart (selfie's steps 24-26 on the GPU): the 1x1
 * convolution with its pool tail, then the excited 1x1 convolution of skip * e + its output
 * (CONV, group 4) and the depthwise convolution of that plus it (DEPTHWISE, its residual the
 * convolution's output). */
static void fold_excited_block_split(plan *p, int at, int tail_pixels)
{
    kr_cuda_step *s = p->steps, *cv = &s[at];
    const kr_cuda_step *add = &s[at + 1], *pool = &s[at + 2], *mul = &s[at + 3];
    const kr_cuda_step *vadd = &s[at + 4], *pw = &s[at + 5], *dw = &s[at + 6], *mid = &s[at + 7];
    assert_int_equal(cv->kind, KR_STEP_CONV);
    assert_true(add->kind == KR_STEP_BINARY && add->mul == 0 && add->x2 == cv->y);
    assert_true(pool->kind == KR_STEP_POOL_PARTIAL && pool->x == add->y);
    assert_true(mul->kind == KR_STEP_BINARY && mul->mul == 1 && mul->x == add->x);
    assert_true(vadd->kind == KR_STEP_BINARY && vadd->x == mul->y && vadd->x2 == cv->y);
    assert_true(pw->kind == KR_STEP_CONV && pw->x == vadd->y && pw->kh == 1);
    assert_true(dw->kind == KR_STEP_DEPTHWISE && dw->x == pw->y && dw->kh == 3);
    assert_true(mid->kind == KR_STEP_BINARY && mid->x == pw->y && mid->x2 == dw->y);
    cv->tail = 1;
    cv->tail_pixels = tail_pixels;
    cv->tail_slices = (cv->oh * cv->ow + tail_pixels - 1) / tail_pixels;
    cv->tail_c = cv->oc;
    cv->tail_add = add->x; /* the skip */
    cv->tail_partial_off = p->scratch;
    p->scratch += (size_t)cv->batch * cv->tail_slices * cv->tail_c;
    kr_cuda_step c2 = *pw, d = *dw;
    c2.x = mul->x;
    c2.scale_add = cv->y;
    c2.group = 4;
    c2.split = 1;
    c2.vec = 4;
    c2.se_layers = 2;
    c2.se_c = cv->oc, c2.se_slices = cv->tail_slices, c2.se_pixels = cv->oh * cv->ow;
    c2.se_partial_off = cv->tail_partial_off;
    for (int l = 0; l < 2; l++) {
        c2.se_out[l] = mul->se_out[l];
        c2.se_w[l] = mul->se_w[l], c2.se_b[l] = mul->se_b[l];
        c2.se_lo[l] = mul->se_lo[l], c2.se_hi[l] = mul->se_hi[l], c2.se_post[l] = mul->se_post[l];
    }
    d.res = pw->y; /* the ADD after it */
    d.res_pre = 0;
    d.y = mid->y;
    s[at + 1] = c2;
    s[at + 2] = d;
    memmove(&s[at + 3], &s[at + 8], (size_t)(p->n - at - 8) * sizeof(*s));
    p->n -= 5;
    free(p->sums);
    p->sums = calloc(p->scratch, sizeof(float));
    assert_non_null(p->sums);
    kr_cuda_persistent_bind(s, p->n, p->sums);
}

/* Selfie's decoder block after Q (U, segment.h) as the cuda backend's folds make it (its steps
 * 19-21 at batch 1 on the GPU), from @p p's own steps after segment @p seg (found with Q, after
 * fold_output_pool): the resize of Q's output excited by the last projection's pool tail (a
 * slice per pixel, its sums given scratch of their own); then fold_excited_block on the 1x1
 * convolution 128 -> 24 of that (205 slices of 5 pixels) and the expand/depthwise 24 -> 24. */
static void fold_decoder_block(plan *p, const kr_cuda_segment *seg)
{
    const int r = seg->first + seg->count, batch = seg->batch;
    kr_cuda_step *s = p->steps;
    kr_cuda_step *last = &s[r - 2], *rs = &s[r];
    assert_int_equal(seg->q_oc, 128);
    assert_true(last->tail && last->tail_slices == seg->h * KR_CUDA_SEG_W);
    assert_int_equal(rs->kind, KR_STEP_RESIZE);
    assert_ptr_equal(rs->x, seg->y2);
    assert_int_equal(rs->se_layers, 1);
    assert_ptr_equal(s[r + 1].x, rs->y);
    last->tail_partial_off = p->scratch;
    p->scratch += (size_t)batch * last->tail_slices * last->tail_c;
    rs->se_slices = last->tail_slices;
    rs->se_pixels = seg->h * KR_CUDA_SEG_W;
    rs->se_partial_off = last->tail_partial_off;
    fold_excited_block(p, r + 1, 5);
}

/* The decoder's next blocks after U as the cuda backend's folds make them (selfie's steps 22-24
 * at batch 1 on the GPU), from @p p's steps after segment @p seg (found with U, after
 * fold_decoder_block): fold_excited_block on the 1x1 convolution 24 -> 16 that resizes U's
 * output x2 as it loads it (rz; V, segment.h: its pool tail a slice per row, 4h slices of 4W
 * pixels) and the expand/depthwise 16 -> 16 after it (W); then on the block after that (the
 * 1x1 convolution 16 -> 16 at 8h x 8W with rz, its pool tail slices of 64 pixels, and its
 * expand/depthwise) before the transpose convolution. */
static void fold_vw_block_as(plan *p, const kr_cuda_segment *seg, int split);
static void fold_vw_block(plan *p, const kr_cuda_segment *seg)
{
    fold_vw_block_as(p, seg, 0);
}

/* fold_vw_block, with @p split the block at 8h x 8W as fold_excited_block_split makes it. */
static void fold_vw_block_as(plan *p, const kr_cuda_segment *seg, int split)
{
    const int at = seg->first + seg->count;
    const kr_cuda_step *v = &p->steps[at];
    assert_int_equal(seg->u_c, 24);
    assert_int_equal(seg->v_oc, 0);
    assert_true(v->kind == KR_STEP_CONV && v->rz && v->x == seg->y3);
    assert_true(v->rz_ih == 2 * seg->h && v->rz_iw == 2 * KR_CUDA_SEG_W);
    assert_true(v->oh == 4 * seg->h && v->ow == 4 * KR_CUDA_SEG_W && v->oc == 16);
    fold_excited_block(p, at, 4 * KR_CUDA_SEG_W);
    const kr_cuda_step *next = &p->steps[at + 2];
    assert_true(next->kind == KR_STEP_CONV && next->rz && next->x == p->steps[at + 1].y);
    assert_true(next->oh == 8 * seg->h && next->ow == 8 * KR_CUDA_SEG_W && next->oc == 16);
    if (split) {
        fold_excited_block_split(p, at + 2, 64);
        assert_int_equal(p->steps[at + 5].kind, KR_STEP_TCONV);
    } else {
        fold_excited_block(p, at + 2, 64);
        assert_int_equal(p->steps[at + 4].kind, KR_STEP_TCONV);
    }
}

/* The checks every U of selfie / selfie-landscape passes (its decoder block folded by
 * fold_decoder_block): the resize x2 of Q's output (half-pixel centres) excited by the last
 * projection's pool, the 1x1 convolution 128 -> 24 whose pool adds the skip (E's output), the
 * expand/depthwise 24 -> 24 (RELUs, plus the expansion: res_mid) of skip * excitation + a;
 * the segment's steps 14-16 (its last ones, or before V and W), output not shared (y is not
 * written); its packed weights a stage after Q's (with V's and W's where there are those). */
static void check_selfie_u(const kr_cuda_segment *seg, const plan *p)
{
    const kr_cuda_step *rs = &p->steps[seg->first + 14], *cv = rs + 1, *ed = rs + 2;
    assert_int_equal(seg->count, 17 + (seg->v_oc > 0) + (seg->w_e > 0) +
                                     (seg->y_oc ? 4 - seg->y_dbf : 0));
    assert_int_equal(seg->q_oc, 128);
    assert_int_equal(seg->u_c, 24);
    assert_int_equal(seg->u_e, 24);
    assert_int_equal(seg->u_hid, 24);
    assert_int_equal(seg->u_align, 0);
    assert_int_equal(seg->u_half, 1);
    assert_int_equal(seg->u_res_mid, 1);
    assert_int_equal(seg->u_se_post, KR_CUDA_POST_LOGISTIC);
    assert_int_equal(seg->u_post, KR_CUDA_POST_NONE);
    assert_int_equal(seg->up.ci, 24);
    assert_int_equal(seg->up.hid, 24);
    assert_int_equal(seg->up.se_post[0], KR_CUDA_POST_RELU);
    assert_int_equal(seg->up.se_post[1], KR_CUDA_POST_LOGISTIC);
    assert_int_equal(seg->up.post, KR_CUDA_POST_RELU);  /* the expansion's */
    assert_int_equal(seg->u_dpost, KR_CUDA_POST_RELU);  /* the depthwise's */
    assert_int_equal(rs->kind, KR_STEP_RESIZE);
    assert_ptr_equal(rs->x, seg->y2);
    assert_ptr_equal(rs->se_partial, seg->y_sums);
    assert_int_equal(cv->kind, KR_STEP_CONV);
    assert_int_equal(ed->kind, KR_STEP_EXPAND_DW);
    assert_ptr_equal(seg->u_skip, cv->tail_add);
    assert_ptr_equal(seg->u_skip, ed->x);
    assert_ptr_equal(seg->u_skip, seg->e_y); /* the skip: E's output */
    assert_ptr_equal(seg->y3, ed->y);
    assert_int_equal(seg->shared_out, 0);
    /* 128x32 + 128 excitation, 128x24 + 24 convolution, 3x(24x24 + 24) expansion's excitation
     * and expansion, 9x24 + 24 depthwise */
    int o[KR_SEG_U_N + 1];
    kr_seg_u_layout(32, 128, 24, 24, 24, 0, 0, 0, o);
    assert_int_equal(o[KR_SEG_U_N], 4096 + 128 + 3072 + 24 + 3 * (576 + 24) + 216 + 24);
    assert_int_equal(seg->stage_off[7], seg->stage_off[6] + seg->stage_floats[6]);
    assert_int_equal(seg->stage_floats[6], 32 * 128 + 128);
    if (!seg->v_oc) {
        assert_int_equal(seg->stage_floats[7], o[KR_SEG_U_N]);
        assert_int_equal(seg->weight_floats, (size_t)seg->stage_off[7] + o[KR_SEG_U_N]);
    }
    assert_true(seg->buf_floats >= seg->stage_floats[7]);
}

/* The checks every V and W of selfie / selfie-landscape pass (U's next block folded by
 * fold_vw_block): V, the 1x1 convolution 24 -> 16 of U's output resized x2 (half-pixel
 * centres) at 4h x 64, its pool tail over a row per slice plus the addend (its step's y,
 * tail_add and tail_partial as v_y, v_skip, v_sums); W, the expand/depthwise 16 -> 16 (excitation 16 -> 16 -> 16 with
 * RELU and LOGISTIC, RELUs, res_mid) of addend * excitation + V's output; the segment's last 2
 * steps; their weights in U's stage after U's: kr_seg_u_layout's total, the segment's total
 * the stages' sum. */
static void check_selfie_vw(const kr_cuda_segment *seg, const plan *p)
{
    const kr_cuda_step *v = &p->steps[seg->first + 17], *wd = v + 1;
    const int h = seg->h;
    check_selfie_u(seg, p);
    assert_int_equal(seg->count, 19 + (seg->y_oc ? 4 - seg->y_dbf : 0));
    assert_int_equal(v->kind, KR_STEP_CONV);
    assert_true(v->rz && !v->align && v->half && v->rz_ih == 2 * h && v->rz_iw == 32);
    assert_ptr_equal(v->x, seg->y3);
    assert_true(v->tail && v->tail_slices == 4 * h && v->tail_pixels == 64 && v->tail_c == 16);
    assert_int_equal(seg->v_oc, 16);
    assert_int_equal(seg->v_half, 1);
    assert_int_equal(seg->v_post, KR_CUDA_POST_NONE);
    assert_ptr_equal(seg->v_skip, v->tail_add);
    assert_ptr_equal(seg->v_y, v->y);
    assert_ptr_equal(seg->v_sums, v->tail_partial);
    assert_non_null(seg->v_sums);
    assert_int_equal(wd->kind, KR_STEP_EXPAND_DW);
    assert_ptr_equal(wd->x, seg->v_skip);
    assert_ptr_equal(wd->scale_add, seg->v_y);
    assert_ptr_equal(wd->se_partial, seg->v_sums); /* the sums W's prologue reads: V's */
    assert_int_equal(wd->se_partial_off, v->tail_partial_off);
    assert_int_equal(seg->w_e, 16);
    assert_int_equal(seg->w_hid, 16);
    assert_int_equal(seg->w_res_mid, 1);
    assert_ptr_equal(seg->w_y, wd->y);
    assert_int_equal(seg->wp.ci, 16);
    assert_int_equal(seg->wp.hid, 16);
    assert_int_equal(seg->wp.se_post[0], KR_CUDA_POST_RELU);
    assert_int_equal(seg->wp.se_post[1], KR_CUDA_POST_LOGISTIC);
    assert_int_equal(seg->wp.post, KR_CUDA_POST_RELU); /* the expansion's */
    assert_int_equal(seg->w_dpost, KR_CUDA_POST_RELU); /* the depthwise's */
    assert_int_equal(seg->shared_out, 0);
    /* U's 9360; V's 24x16 + 16; W's 3x(16x16 + 16) excitation and expansion, 9x16 + 16 */
    int o[KR_SEG_U_N + 1];
    kr_seg_u_layout(32, 128, 24, 24, 24, 16, 16, 16, o);
    assert_int_equal(o[KR_SEG_U_VW], 9360);
    assert_int_equal(o[KR_SEG_U_N], 9360 + 384 + 16 + 3 * (256 + 16) + 144 + 16);
    int oy[KR_SEG_Y_N + 1];
    kr_seg_y_layout(16, 16, 16, 16, 1, oy);
    assert_int_equal(seg->stage_floats[7], o[KR_SEG_U_N] + (seg->y_oc ? oy[KR_SEG_Y_N] : 0));
    size_t total = 0;
    for (int i = 0; i <= 7; i++) {
        assert_int_equal((size_t)seg->stage_off[i], total);
        total += (size_t)seg->stage_floats[i];
    }
    assert_int_equal(seg->weight_floats, total);
    assert_true(seg->buf_floats >= seg->stage_floats[7]);
    assert_true(kr_cuda_segment_smem(seg) <= 232448);
}

/* The checks every Y and Z of selfie / selfie-landscape pass (the block at 8h x 8W folded by
 * fold_vw_block_as, as one step or two: @p split): Y1, the 1x1 convolution 16 -> 16 of W's
 * output resized x2 (half-pixel centres) at 8h x 128, its pool tail plus the skip; Y2, the
 * excited 1x1 convolution 16 -> 16 (excitation 16 -> 16 -> 16, RELU and LOGISTIC; RELU) and
 * the depthwise 3x3 (RELU) plus its input, as an EXPAND_DW (sums from the bias) or a CONV and
 * a DEPTHWISE (from 0); Z, the transpose convolution 2x2 stride 2 to 16h x 256 x 1; the
 * segment's last 3 or 4 steps, the network's last; their weights after U's, V's and W's in
 * U's stage (kr_seg_y_layout: 272 + 3 x 272 + 160 + 68 floats), the stages' sum the total;
 * the shared memory within the block's. */
static void check_selfie_yz(const kr_cuda_segment *seg, const plan *p, int split)
{
    const kr_cuda_step *cv = &p->steps[seg->first + 19], *c2 = cv + 1;
    const kr_cuda_step *dw = split ? c2 + 1 : c2, *tc = dw + 1;
    const int h = seg->h;
    check_selfie_vw(seg, p);
    assert_int_equal(seg->count, 22 + split);
    assert_int_equal(seg->first + seg->count, p->n);
    assert_true(cv->kind == KR_STEP_CONV && cv->rz && cv->half && cv->oh == 8 * h);
    assert_ptr_equal(cv->x, seg->w_y);
    assert_int_equal(c2->kind, split ? KR_STEP_CONV : KR_STEP_EXPAND_DW);
    assert_int_equal(dw->kind, split ? KR_STEP_DEPTHWISE : KR_STEP_EXPAND_DW);
    assert_int_equal(tc->kind, KR_STEP_TCONV);
    assert_int_equal(seg->y_oc, 16);
    assert_int_equal(seg->y_half, 1);
    assert_int_equal(seg->y_tail, 64);
    assert_true(seg->batch >= KR_CUDA_SEG_Y_MIN_BATCH);
    assert_int_equal(seg->y_post, KR_CUDA_POST_NONE);
    assert_ptr_equal(seg->y_skip, cv->tail_add);
    assert_ptr_equal(c2->x, cv->tail_add);
    assert_ptr_equal(c2->scale_add, cv->y);
    assert_int_equal(seg->yp.ci, 16);
    assert_int_equal(seg->yp.hid, 16);
    assert_int_equal(seg->yp.se_post[0], KR_CUDA_POST_RELU);
    assert_int_equal(seg->yp.se_post[1], KR_CUDA_POST_LOGISTIC);
    assert_int_equal(seg->yp.post, KR_CUDA_POST_RELU);
    assert_int_equal(seg->y_c, 16);
    assert_int_equal(seg->y_dpost, KR_CUDA_POST_RELU);
    assert_int_equal(seg->y_dbf, !split);
    assert_int_equal(seg->y_res, 1);
    assert_int_equal(seg->z_oc, 1);
    assert_int_equal(seg->z_f32, 0);
    assert_ptr_equal(seg->z_y, tc->y);
    int o[KR_SEG_U_N + 1], oy[KR_SEG_Y_N + 1];
    kr_seg_u_layout(32, 128, 24, 24, 24, 16, 16, 16, o);
    kr_seg_y_layout(16, 16, 16, 16, 1, oy);
    assert_int_equal(oy[KR_SEG_Y_N], 272 + 3 * 272 + 160 + 68);
    assert_int_equal(seg->stage_floats[7], o[KR_SEG_U_N] + oy[KR_SEG_Y_N]);
    assert_true(kr_cuda_segment_smem(seg) <= 232448);
}

/* Whether item a of @p batch items of @p yb bytes at @p y overlaps item b (@p tb bytes each at
 * @p t) for some a != b (any a and b where @p own): take_v's and take_w's checks, made here on
 * their own. */
static int items_overlap(const void *y, size_t yb, const void *t, size_t tb, int batch, int own)
{
    for (int a = 0; a < batch; a++)
        for (int b = 0; b < batch; b++) {
            const uintptr_t ya = (uintptr_t)y + a * yb, tb0 = (uintptr_t)t + b * tb;
            if ((own || a != b) && ya < tb0 + tb && tb0 < ya + yb)
                return 1;
        }
    return 0;
}

/* Cluster segments (segment.h): selfie's 13 steps at 16x16 and selfie-landscape's at 9x16
 * (E, S, P0, four pairs) are one segment with stand-in addresses and with the backend's memory
 * plan (f32, f16), at batch 1, 4 and AUTO's largest with a segment (16: the excitations of
 * every item fit the persistent kernel's buffer, so they are fused as the finder expects); an item's output over another item's input is flagged
 * (shared_out: never at batch 1; the memory plan may do it at batch 4); refused when a tensor
 * written inside it is read after it; shorter when a pair's input is not the step before's
 * output; E left out (the segment starting at S) where its expand/depthwise window is not 3x3,
 * its last convolution's residual is not its first's output or its output not S's input, or
 * a tensor between its steps is read after them; the last projection's pool tail (the global
 * pool of the output, the next node) taken in when it has a slice per row at least; then the
 * 1x1 convolution after it (Q) too (at batch 4 with the memory plan as well, so that batch 4
 * runs what batch 1 runs), but not where its output lies on another item's input; then, with
 * the decoder block after Q folded as the backend folds it, U (everywhere; selfie's folded
 * steps at batch 1 with the f32 memory plan where the GPU has them); then, with the blocks
 * after U folded (fold_vw_block), V and W (everywhere: check_selfie_vw, unless the memory plan
 * puts V's or W's output where take_v / take_w refuse it, which the test works out on its own
 * and prints: then V or W left out, U kept; none of the plans does; selfie's steps 22-24 at
 * batch 1 with the f32 memory plan where the GPU has them); none in the face detector. */
static void test_cluster_segment(void **state)
{
    (void)state;
    const char *names[2] = {"selfie", "selfie-landscape"};
    const int rows[2] = {16, 9};
    for (int mi = 0; mi < 2; mi++) {
        keyer_model *m = load(names[mi]);
        const kr_graph *g = kr_model_graph(m);
        /* 16: AUTO's largest batch with a segment (KEYER_CUDA_SEGMENT_MAX_BATCH), the main
         * job's batch */
        static const int batches[3] = {1, 4, KEYER_CUDA_SEGMENT_MAX_BATCH};
        for (int bi = 0; bi < 3; bi++)
            for (int pv = 0; pv < 6; pv++) { /* stand-ins; plan f32; plan f16; each with the
                                              * block at 8h x 8W as one step or two */
                const int batch = batches[bi], placed = pv / 2, split = pv % 2;
                plan p = plan_ops(g, batch);
                if (placed)
                    place_ops(&p, g, batch, placed == 2);
                p.why = kr_cuda_persistent_plan(g, p.ops, p.folded, batch, p.steps, &p.n,
                                                &p.scratch);
                assert_null(p.why);
                kr_cuda_segment seg;
                const char *why = NULL;
                const size_t esize = placed == 2 ? 2 : 4;
                if (!kr_cuda_segment_find(g, p.steps, p.n, esize, &seg, &why))
                    fail_msg("%s batch %d placement %d: no segment: %s", names[mi], batch, placed,
                             why ? why : "no candidate");
                check_selfie_segment(&seg, &p, rows[mi], batch);
                if (batch == 1 || !placed)
                    assert_int_equal(seg.shared_out, 0);
                fold_output_pool(&p, &seg, 0); /* Q follows */
                assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, esize, &seg, &why), 1);
                assert_int_equal(seg.q_oc, 128); /* at batch 4 too: the same arithmetic */
                assert_int_equal(seg.count, 14);
                assert_int_equal(seg.u_c, 0); /* the decoder block is not folded yet */
                if (batch > 1 && placed)
                    printf("%s batch %d (%s memory plan): an item's output %s another item's "
                           "input\n", names[mi], batch, placed == 2 ? "f16" : "f32",
                           seg.shared_out ? "overlaps" : "does not overlap");
                fold_decoder_block(&p, &seg); /* U follows Q */
                assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, esize, &seg, &why), 1);
                check_selfie_u(&seg, &p);
                if (mi == 0 && batch == 1 && placed == 1) { /* the GPU's steps 17-22 */
                    const uintptr_t at = 0x40000000u;
                    assert_int_equal(seg.first, 5);
                    assert_int_equal(seg.first + seg.count, 22);
                    assert_int_equal((uintptr_t)seg.y2 - at, 3538944);
                    assert_int_equal((uintptr_t)p.steps[19].y - at, 0);
                    assert_int_equal((uintptr_t)p.steps[20].y - at, 3407872);
                    assert_int_equal((uintptr_t)seg.u_skip - at, 1441792);
                    assert_int_equal((uintptr_t)seg.y3 - at, 1736704);
                    assert_ptr_equal(p.steps[22].x, seg.y3);
                    assert_true(p.steps[22].rz);
                }
                assert_int_equal(seg.v_oc, 0); /* V's block is not folded yet */
                fold_vw_block_as(&p, &seg, split); /* V and W follow U, then Y and Z */
                const kr_cuda_step *vs = &p.steps[seg.first + seg.count], *ws = vs + 1;
                const int h = rows[mi];
                const size_t vb = (size_t)(4 * h) * 64 * 16 * esize; /* V's and W's outputs */
                const size_t in_b = (size_t)(2 * h) * 32 * 72 * esize;
                const size_t skip_b = (size_t)(2 * h) * 32 * 24 * esize;
                const int v_on = items_overlap(vs->y, vb, seg.x, in_b, batch, 0) ||
                                 items_overlap(vs->y, vb, seg.u_skip, skip_b, batch, 0) ||
                                 items_overlap(vs->y, vb, vs->tail_add, vb, batch, 1);
                const int w_on = items_overlap(ws->y, vb, seg.x, in_b, batch, 0) ||
                                 items_overlap(ws->y, vb, seg.u_skip, skip_b, batch, 0) ||
                                 items_overlap(ws->y, vb, vs->tail_add, vb, batch, 1);
                assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, esize, &seg, &why), 1);
                if (placed)
                    printf("%s batch %d (%s memory plan): V's output %s, W's %s\n", names[mi],
                           batch, placed == 2 ? "f16" : "f32",
                           v_on ? "on what take_v refuses" : "free",
                           w_on ? "on what take_w refuses" : "free");
                /* Y and Z: the transpose convolution's output on another item's input */
                const kr_cuda_step *ys = ws + 1, *ts = ys + 2 + split;
                const size_t tb = (size_t)(16 * h) * 256 * esize, yb = (size_t)(8 * h) * 128 * 16 * esize;
                const int y_on = items_overlap(ts->y, tb, seg.x, in_b, batch, 0) ||
                                 items_overlap(ts->y, tb, seg.u_skip, skip_b, batch, 0) ||
                                 items_overlap(ts->y, tb, vs->tail_add, vb, batch, 0) ||
                                 items_overlap(ts->y, tb, ys->tail_add, yb, batch, 0);
                assert_int_equal(ts->kind, KR_STEP_TCONV);
                if (placed)
                    printf("%s batch %d (%s memory plan, the block at 8h x 8W as %s): the "
                           "output %s\n", names[mi], batch, placed == 2 ? "f16" : "f32",
                           split ? "two steps" : "one", y_on ? "on what take_y refuses" : "free");
                if (!v_on && !w_on) {
                    check_selfie_vw(&seg, &p);
                    /* (taken from KR_CUDA_SEG_Y_MIN_BATCH: the same values either way) */
                    const int y_in = !y_on && batch >= KR_CUDA_SEG_Y_MIN_BATCH;
                    assert_int_equal(seg.y_oc, y_in ? 16 : 0);
                    if (y_in)
                        check_selfie_yz(&seg, &p, split);
                } else { /* U kept, V and W (or W) left out */
                    check_selfie_u(&seg, &p);
                    assert_int_equal(seg.v_oc, v_on ? 0 : 16);
                    assert_int_equal(seg.w_e, 0);
                }
                if (mi == 0 && batch == 1 && placed == 1) { /* the GPU's steps 22-23 */
                    const uintptr_t at = 0x40000000u;
                    assert_int_equal(seg.first + seg.count, seg.y_oc ? 27 + split : 24);
                    assert_int_equal(p.steps[22].node, 105);
                    assert_int_equal(p.steps[23].node, 116);
                    assert_int_equal((uintptr_t)p.steps[22].x - at, 1736704);
                    assert_int_equal((uintptr_t)seg.v_y - at, 3407872);
                    assert_int_equal((uintptr_t)seg.v_skip - at, 3997696);
                    assert_int_equal((uintptr_t)seg.w_y - at, 5046272);
                    assert_int_equal(p.steps[23].se_pixels, 4096);
                    const kr_cuda_step *next = &p.steps[24];
                    assert_true(next->kind == KR_STEP_CONV && next->node == 120 && next->rz);
                    assert_true(next->rz_ih == 64 && next->oh == 128 && next->oc == 16);
                    assert_ptr_equal(next->x, seg.w_y);
                }
                free_plan(&p);
            }
        keyer_model_destroy(&m);
    }
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    kr_cuda_segment seg;
    const char *why = NULL;
    { /* the last output on the input */
        plan p = make_plan(g, 1);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        p.steps[seg.first + seg.count - 1].y = (void *)seg.x; /* harmless at batch 1 */
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.shared_out, 0);
        free_plan(&p);
        p = make_plan(g, 2);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.shared_out, 0);
        p.steps[seg.first + seg.count - 1].y = (void *)seg.x; /* item 1's output on item 0's input */
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.shared_out, 1);
        free_plan(&p);
    }
    { /* the second pair's depthwise output read after the segment */
        plan p = make_plan(g, 1);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(p.steps[seg.first + 7].kind, KR_STEP_EXPAND_DW); /* pair 2's D */
        kr_tensor *tt = tensor_at(g, p.steps[seg.first + 7].y);
        const int last = tt->last_consumer;
        tt->last_consumer = g->n_nodes - 1;
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 0);
        assert_string_equal(why, "a tensor inside the run is read after it");
        tt->last_consumer = last;
        free_plan(&p);
    }
    { /* the second pair reads something else: the segment ends after the first */
        plan p = make_plan(g, 1);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        p.steps[seg.first + 7].x = p.steps[seg.first + 4].x;
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.n_ir, 1);
        assert_int_equal(seg.e_ic, 72);
        assert_int_equal(seg.count, 7);
        free_plan(&p);
    }
    { /* the third pair's pool sums read after the segment too: it ends after the second */
        plan p = make_plan(g, 1);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        const int first = seg.first;
        assert_int_equal(p.steps[first + 9].kind, KR_STEP_EXPAND_DW); /* pair 3's D */
        assert_int_equal(p.steps[first + 15].kind, KR_STEP_RESIZE);
        p.steps[first + 15].se_partial_off = p.steps[first + 9].tail_partial_off;
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.first, first);
        assert_int_equal(seg.n_ir, 2);
        assert_int_equal(seg.count, 9);
        free_plan(&p);
    }
    { /* E refused: the expand/depthwise's window 5x5; the third convolution's residual not the
       * first one's output; its output not S's input; a tensor between E's steps (the first
       * convolution's output, the depthwise's) read after them; then the segment starts at S
       * and reads S's input from global memory */
        for (int c = 0; c < 5; c++) {
            plan p = make_plan(g, 1);
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            assert_int_equal(seg.e_ic, 72);
            const int first = seg.first;
            const size_t all = seg.weight_floats;
            kr_cuda_step *c1 = &p.steps[first], *ed = c1 + 1, *c3 = c1 + 2;
            kr_tensor *tt = NULL;
            int last = 0;
            if (c == 0) {
                ed->kh = ed->kw = 5;
            } else if (c == 1) {
                c3->res = c1->x;
            } else if (c == 2) {
                c3->y = ed->y;
            } else {
                tt = tensor_at(g, c == 3 ? c1->y : ed->y);
                last = tt->last_consumer;
                tt->last_consumer = g->n_nodes - 1;
            }
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            assert_int_equal(seg.e_ic, 0);
            assert_int_equal(seg.s_ic, 24);
            assert_int_equal(seg.n_ir, 4);
            assert_int_equal(seg.first, first + 3);
            assert_int_equal(seg.count, 10);
            assert_ptr_equal(seg.x, p.steps[first + 3].x);
            assert_int_equal(seg.stage_floats[0], 2304 + 96 + 2400 + 96); /* S's alone */
            assert_int_equal(seg.weight_floats,
                             all - (1728 + 24 + 2112 + 88 + 792 + 88 + 2112 + 24)); /* E's */
            if (tt)
                tt->last_consumer = last;
            free_plan(&p);
        }
    }
    { /* E refused at batch 2 where its output (written in the kernel) lies on the other item's
       * input, which that item's cluster may not have read yet */
        plan p = make_plan(g, 2);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.e_ic, 72);
        const int first = seg.first;
        kr_cuda_step *c1 = &p.steps[first], *c3 = c1 + 2, *sd = c1 + 3;
        void *other = (void *)((uintptr_t)c1->x + (size_t)32 * 32 * 72 * 4); /* item 1 */
        c3->y = other;
        sd->x = other;
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.e_ic, 0);
        assert_int_equal(seg.first, first + 3);
        free_plan(&p);
    }
    { /* S refused: a window reaching past the neighbours; P0's sums not its pool's; its pool's
       * sums read by a step after P0 too; then the segment starts at P0 (without E, which
       * comes only with S) and reads its input and sums from global memory */
        for (int c = 0; c < 3; c++) {
            plan p = make_plan(g, 1);
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            const int first = seg.first, s = first + 3;
            if (c == 0)
                p.steps[s].pt = 3;
            else if (c == 1)
                p.steps[s].tail_partial_off += 16;
            else { /* the decoder's resize excited by S's pool instead of its own */
                assert_int_equal(p.steps[first + 15].kind, KR_STEP_RESIZE);
                assert_int_equal(p.steps[first + 15].se_layers, 1);
                p.steps[first + 15].se_partial_off = p.steps[s].tail_partial_off;
            }
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            assert_int_equal(seg.s_ic, 0);
            assert_int_equal(seg.e_ic, 0);
            assert_int_equal(seg.first, s + 1);
            assert_int_equal(seg.count, 9);
            assert_ptr_equal(seg.x, p.steps[s + 1].x);
            assert_ptr_equal(seg.x_sums, p.steps[s + 1].se_partial);
            assert_int_equal(seg.stage_floats[0], 2304 + 24 + 2304 + 96 + 3072 + 32); /* P0 */
            free_plan(&p);
        }
    }
    { /* the last projection with its output's pool tail, as the backend's folds make it (here
       * the pool step is taken out); refused while the node after the segment is not that pool */
        plan p = make_plan(g, 1);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_null(seg.y_sums);
        assert_int_equal(seg.q_oc, 0); /* the pool step follows */
        const int last = seg.first + seg.count - 1;
        p.steps[last].tail = 1;
        p.steps[last].tail_c = 32;
        p.steps[last].tail_slices = 256; /* a pixel each */
        p.steps[last].tail_partial = (float *)(uintptr_t)0x1000;
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 0);
        assert_string_equal(why, "the pool tail is not the last node's global pool of the output");
        fold_output_pool(&p, &seg, 8); /* fewer slices than the 16 rows: refused */
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 0);
        assert_string_equal(why, "the output's pool tail has fewer slices than the image has rows");
        p.steps[last].tail_slices = 256;
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_ptr_equal(seg.y_sums, (float *)(uintptr_t)0x1000);
        assert_int_equal(seg.y_slices, p.steps[last].tail_slices);
        /* Q: selfie's 1x1 convolution 32 -> 128 (+ RELU) of the segment's output */
        const kr_cuda_step *q = &p.steps[last + 1];
        assert_int_equal(seg.count, 14);
        assert_int_equal(seg.q_oc, 128);
        assert_int_equal(seg.q_post, KR_CUDA_POST_RELU);
        assert_ptr_equal(seg.y2, q->y);
        assert_ptr_equal(seg.y, p.steps[last].y);
        assert_int_equal(seg.stage_off[6], seg.stage_off[5] + seg.stage_floats[5]);
        assert_int_equal(seg.stage_floats[6], 32 * 128 + 128);
        assert_int_equal(seg.weight_floats, (size_t)seg.stage_off[6] + 32 * 128 + 128);
        assert_true(seg.buf_floats >= seg.stage_floats[6]);
        p.steps[last + 1].se_layers = 1; /* not a plain convolution: no Q */
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.count, 13);
        assert_int_equal(seg.q_oc, 0);
        free_plan(&p);
        for (int on = 0; on < 2; on++) { /* batch 2: Q's output on the other item's input */
            p = make_plan(g, 2);
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            fold_output_pool(&p, &seg, 0);
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            assert_int_equal(seg.q_oc, 128);
            p.steps[seg.first + seg.count - (on ? 2 : 1)].y = (void *)seg.x;
            if (on) /* Q still reads it */
                p.steps[seg.first + seg.count - 1].x = (void *)seg.x;
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            assert_int_equal(seg.shared_out, on); /* on: the last projection's output there */
            assert_int_equal(seg.q_oc, on ? 128 : 0); /* shared_out: Q kept, the copy after */
            assert_int_equal(seg.count, on ? 14 : 13);
            free_plan(&p);
        }
    }
    keyer_model_destroy(&m);
    m = load("face-short");
    g = kr_model_graph(m);
    plan p = make_plan(g, 1);
    assert_null(p.why);
    assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 0);
    free_plan(&p);
    keyer_model_destroy(&m);
}

/* Selfie's plan (stand-ins) at @p batch with its output's pool and decoder block folded as the
 * backend folds them, and its segment (E, S, P0, 4 pairs, Q, U) in @p seg; with @p vw the
 * blocks after U folded too (fold_vw_block) and the segment with V and W. */
static plan decoder_plan(const kr_graph *g, int batch, kr_cuda_segment *seg, int vw)
{
    plan p = make_plan(g, batch);
    const char *why = NULL;
    assert_null(p.why);
    assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, seg, &why), 1);
    fold_output_pool(&p, seg, 0);
    assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, seg, &why), 1);
    fold_decoder_block(&p, seg);
    assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, seg, &why), 1);
    assert_int_equal(seg->u_c, 24);
    assert_int_equal(seg->count, 17);
    if (vw) {
        fold_vw_block(&p, seg);
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, seg, &why), 1);
        check_selfie_vw(seg, &p);
    }
    return p;
}

/* U (segment.h) left out, Q kept (the segment's first 14 steps), where: a step after U reads
 * the last projection's pool sums (the resize's excitation) or the convolution's (the
 * expand/depthwise's), neither of which the kernel writes with U; the resize aligns corners;
 * the expand/depthwise step has a residual; the skip is not 16-byte aligned (its rows are one
 * bulk copy); a tensor U no longer writes (the last projection's output, Q's, the
 * convolution's, the depthwise's before the ADD) is read after it; at batch 4, U's output lies
 * on another item's skip or input (on its own skip it is taken; an item's last projection
 * output on another item's input does not keep it out, nor is it shared_out then: U does not
 * write it). */
static void test_cluster_segment_decoder(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    kr_cuda_segment seg;
    const char *why = NULL;
    for (int c = 0; c < 9; c++) {
        plan p = decoder_plan(g, 1, &seg, 0);
        const int r = seg.first + seg.count - 3;
        kr_cuda_step *rs = &p.steps[r], *cv = rs + 1, *ed = rs + 2;
        kr_tensor *tt = NULL;
        int last = 0, later = r + 3;
        while (later < p.n && !p.steps[later].se_layers)
            later++;
        assert_true(later < p.n);
        if (c == 0) /* the next excitation after U reads the last projection's sums */
            p.steps[later].se_partial_off = rs->se_partial_off;
        else if (c == 1) /* or the convolution's */
            p.steps[later].se_partial_off = cv->tail_partial_off;
        else if (c == 2)
            rs->align = 1;
        else if (c == 3)
            ed->res = ed->x;
        else if (c == 4)
            ed->x = cv->tail_add = (const char *)ed->x + 8;
        else { /* the last projection's output, Q's, the convolution's, the depthwise's */
            const void *at = c == 5 ? p.steps[r - 2].y : c == 6 ? seg.y2 : cv->y;
            tt = c < 8 ? tensor_at(g, at) : (kr_tensor *)&g->tensors[g->nodes[ed->node].outputs[0]];
            last = tt->last_consumer;
            tt->last_consumer = g->n_nodes - 1;
        }
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.u_c, 0);
        assert_int_equal(seg.q_oc, 128);
        assert_int_equal(seg.count, 14);
        assert_int_equal(seg.e_ic, 72);
        if (tt)
            tt->last_consumer = last;
        free_plan(&p);
    }
    for (int c = 0; c < 4; c++) { /* batch 4: U's output on its own skip; item 1's; item 1's
                                   * input (E's); the last projection's output on item 1's
                                   * input (not written with U: not shared) */
        plan p = decoder_plan(g, 4, &seg, 0);
        check_selfie_u(&seg, &p);
        kr_cuda_step *ed = &p.steps[seg.first + seg.count - 1];
        const size_t skip_b = (size_t)32 * 32 * 24 * 4, in_b = (size_t)32 * 32 * 72 * 4;
        void *at = c == 0 ? (void *)ed->x
                   : c == 1 ? (void *)((const char *)ed->x + skip_b)
                            : (void *)((const char *)seg.x + in_b);
        if (c < 3) {
            ed->y = at;
            p.steps[seg.first + seg.count].x = at; /* the step after U reads it */
        } else {
            p.steps[seg.first + 12].y = at; /* and Q reads it */
            p.steps[seg.first + 13].x = at;
        }
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.u_c, c == 1 || c == 2 ? 0 : 24);
        assert_int_equal(seg.q_oc, 128);
        assert_int_equal(seg.count, c == 1 || c == 2 ? 14 : 17);
        assert_int_equal(seg.shared_out, 0);
        if (c == 3) { /* without U (the resize aligning corners) it is */
            p.steps[seg.first + 14].align = 1;
            assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
            assert_int_equal(seg.u_c, 0);
            assert_int_equal(seg.shared_out, 1);
        }
        free_plan(&p);
    }
    keyer_model_destroy(&m);
}
/* V and W (segment.h) on selfie's plan with the blocks after U folded (decoder_plan with vw):
 * V left out (W with it, U kept: 17 steps, U's weights alone) where its convolution does not
 * resize its input (no rz), the resize aligns corners, its pool tail has other than a slice
 * per row (4h), U's output is read after it, its output lies on its own addend, or at batch 4
 * on another item's skip or input; W left out (V kept: 18 steps, V's sums written) where its
 * prologue reads other sums than V's pool tail, it has a residual, a step after it reads V's
 * pool sums, its output lies on V's addend (or at batch 4 on another item's input), a
 * tensor between V and W is a graph output (V's output, the depthwise's before the ADD), or V's
 * output is read by the step right after W. */
static void test_cluster_segment_vw(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    kr_cuda_segment seg;
    const char *why = NULL;
    int ou[KR_SEG_U_N + 1];
    for (int c = 0; c < 15; c++) {
        const int batch = c == 5 || c == 6 || c == 12 ? 4 : 1, v_out = c < 7;
        plan p = decoder_plan(g, batch, &seg, 1);
        const int h = seg.h;
        kr_cuda_step *v = &p.steps[seg.first + 17], *wd = v + 1, *next = v + 2;
        const size_t skip_b = (size_t)(2 * h) * 32 * 24 * 4, in_b = (size_t)(2 * h) * 32 * 72 * 4;
        kr_tensor *tt = NULL;
        int last = 0;
        if (c == 0) {
            v->rz = 0;
        } else if (c == 1) {
            v->align = 1;
        } else if (c == 2) { /* half the slices (W's prologue reading them so) */
            wd->se_slices = v->tail_slices = 2 * h;
        } else if (c == 3) {
            tt = tensor_at(g, seg.y3);
            last = tt->last_consumer;
            tt->last_consumer = g->n_nodes - 1;
        } else if (c >= 4 && c <= 6) { /* its own addend; item 1's skip; item 1's input */
            v->y = c == 4 ? (void *)v->tail_add
                   : c == 5 ? (void *)((const char *)seg.u_skip + skip_b)
                            : (void *)((const char *)seg.x + in_b);
            wd->scale_add = v->y;
        } else if (c == 7) { /* other sums (U's convolution's: U refused, its sums read) */
            wd->se_partial_off += 16;
            wd->se_partial += 16;
        } else if (c == 8) {
            wd->res = wd->x;
        } else if (c == 9) { /* the next block's expand/depthwise excited by V's pool */
            assert_true(next[1].kind == KR_STEP_EXPAND_DW && next[1].se_layers == 2);
            next[1].se_partial_off = v->tail_partial_off;
        } else if (c == 10 || c == 12) { /* V's addend; item 1's input (batch 4) */
            wd->y = c == 10 ? (void *)v->tail_add : (void *)((const char *)seg.x + in_b);
            next->x = wd->y;
        } else if (c == 14) { /* V's output read by the step right after W */
            tt = tensor_at(g, v->y);
            last = tt->last_consumer;
            tt->last_consumer = next->node;
        } else { /* V's output; the depthwise's output (before the ADD) */
            tt = c == 11 ? tensor_at(g, v->y)
                         : (kr_tensor *)&g->tensors[g->nodes[wd->node].outputs[0]];
            assert_int_equal(tt->graph_output, -1);
            tt->graph_output = 0;
        }
        assert_int_equal(kr_cuda_segment_find(g, p.steps, p.n, 4, &seg, &why), 1);
        assert_int_equal(seg.u_c, 24);
        assert_int_equal(seg.v_oc, v_out ? 0 : 16);
        assert_int_equal(seg.w_e, 0);
        assert_int_equal(seg.count, v_out ? 17 : 18);
        check_selfie_u(&seg, &p);
        kr_seg_u_layout(32, 128, 24, 24, 24, v_out ? 0 : 16, 0, 0, ou);
        assert_int_equal(seg.stage_floats[7], ou[KR_SEG_U_N]);
        assert_int_equal(seg.weight_floats, (size_t)seg.stage_off[7] + ou[KR_SEG_U_N]);
        if (!v_out) /* V's sums written then */
            assert_ptr_equal(seg.v_sums, v->tail_partial);
        if (tt && (c == 3 || c == 14))
            tt->last_consumer = last;
        else if (tt)
            tt->graph_output = -1;
        free_plan(&p);
    }
    keyer_model_destroy(&m);
}

/* A host array standing in for a step's weight tensor: value 1000 * id + index, so that every
 * packed float names its source and place. */
static float *fill(float **keep, int *n_keep, int id, size_t count)
{
    float *a = malloc(count * sizeof(float));
    assert_non_null(a);
    for (size_t i = 0; i < count; i++)
        a[i] = (float)(1000 * id) + (float)i;
    keep[(*n_keep)++] = a;
    return a;
}

static int fetch_host(void *ctx, float *to, const float *src, size_t count)
{
    (*(int *)ctx)++;
    memcpy(to, src, count * sizeof(float));
    return 0;
}

/* kr_cuda_segment_pack on selfie's segment (E, S, P0, 4 pairs, Q, U: the output's pool and the
 * decoder block folded as the backend folds them) with host arrays for its steps' weights:
 * every stage at its offset, each part where segment.h puts it, the transposed ones (the
 * projections' [c][ci] -> [ci][c], the second dense layers' [ci][hid] -> [hid][ci], the
 * expansions' [e][c] -> [c][e], S's [e][s_ic] -> [s_ic][e], E's first convolution's [24][72]
 * -> [72][24], its expansion's [88][24] -> [24][88] and its third convolution's [24][88] ->
 * [88][24], Q's [q_oc][c] -> [c][q_oc], U's convolution's [u_c][q_oc] -> [q_oc][u_c], its
 * expansion's [u_e][u_c] -> [u_c][u_e] and its excitation's second layer [u_c][hid] ->
 * [hid][u_c]) transposed, the depthwise taps and the resize's excitation [q_oc][c] as they
 * are, a missing bias as zeros, the alignment gaps zero. */
static void test_cluster_segment_pack(void **state)
{
    (void)state;
    keyer_model *m = load("selfie");
    const kr_graph *g = kr_model_graph(m);
    kr_cuda_segment seg;
    plan p = decoder_plan(g, KR_CUDA_SEG_Y_MIN_BATCH, &seg, 1); /* (with Y and Z) */
    assert_int_equal(seg.q_oc, 128);
    float *keep[96];
    int n_keep = 0, id = 1, fetches = 0;
    const int c = seg.c, k = seg.k, e3 = 3, s0 = 1, qi = 1 + 2 * seg.n_ir;
    assert_int_equal(seg.e_ic, 72);
    assert_int_equal(seg.s_ic, 24);
    assert_int_equal(seg.u_c, 24);
    for (int i = 0; i < seg.count; i++) {
        kr_cuda_step *s = &p.steps[seg.first + i];
        const int j = i - e3 - s0, proj = j >= 0 && j % 2 == 0, ci = s->ic, e = s->oc;
        if (i == 0 || i == 2 || j == qi) { /* E's convolutions, Q */
            s->w = fill(keep, &n_keep, id++, (size_t)e * ci);
            s->bias = fill(keep, &n_keep, id++, (size_t)e);
        } else if (j == qi + 1) { /* U's resize: its excitation */
            s->se_w[0] = fill(keep, &n_keep, id++, (size_t)seg.q_oc * c);
            s->se_b[0] = fill(keep, &n_keep, id++, (size_t)seg.q_oc);
        } else if (j == qi + 2) { /* U's convolution */
            s->w = fill(keep, &n_keep, id++, (size_t)e * ci);
            s->bias = fill(keep, &n_keep, id++, (size_t)e);
        } else if (j == qi + 8) { /* Z: [1][2][2][16] */
            s->w = fill(keep, &n_keep, id++, (size_t)e * 4 * ci);
            s->bias = fill(keep, &n_keep, id++, (size_t)e);
        } else if (j == qi + 4 || j == qi + 6) { /* V's convolution, Y1's */
            s->w = fill(keep, &n_keep, id++, (size_t)e * ci);
            s->bias = fill(keep, &n_keep, id++, (size_t)e);
        } else if (j == qi + 3 || j == qi + 5 || j == qi + 7) { /* U's, W's, Y2's
                                                                  * expand/depthwise (excited) */
            const int hid = s->se_out[0];
            s->se_w[0] = fill(keep, &n_keep, id++, (size_t)hid * ci);
            s->se_b[0] = fill(keep, &n_keep, id++, (size_t)hid);
            s->se_w[1] = fill(keep, &n_keep, id++, (size_t)ci * hid);
            s->se_b[1] = fill(keep, &n_keep, id++, (size_t)ci);
            s->w = fill(keep, &n_keep, id++, (size_t)e * ci);
            s->e_bias = fill(keep, &n_keep, id++, (size_t)e);
            s->w2 = fill(keep, &n_keep, id++, (size_t)9 * e);
            s->bias2 = fill(keep, &n_keep, id++, (size_t)e);
        } else if (proj) {
            const int hid = s->se_out[0];
            s->se_w[0] = fill(keep, &n_keep, id++, (size_t)hid * ci);
            s->se_b[0] = fill(keep, &n_keep, id++, (size_t)hid);
            s->se_w[1] = fill(keep, &n_keep, id++, (size_t)ci * hid);
            s->se_b[1] = j == 0 ? NULL : fill(keep, &n_keep, id++, (size_t)ci); /* P0: zeros */
            s->w = fill(keep, &n_keep, id++, (size_t)c * ci);
            s->bias = fill(keep, &n_keep, id++, (size_t)c);
        } else { /* E's expand/depthwise (3x3), S (its input's channels) or a D */
            const int kk = i == 1 ? 3 : k;
            s->w = fill(keep, &n_keep, id++, (size_t)e * ci);
            s->e_bias = fill(keep, &n_keep, id++, (size_t)e);
            s->w2 = fill(keep, &n_keep, id++, (size_t)kk * kk * e);
            s->bias2 = fill(keep, &n_keep, id++, (size_t)e);
        }
    }
    float *w = malloc(seg.weight_floats * sizeof(float));
    assert_non_null(w);
    memset(w, 0xff, seg.weight_floats * sizeof(float)); /* NaN: every float must be written */
    assert_int_equal(kr_cuda_segment_pack(&seg, p.steps, w, fetch_host, &fetches), 0);
    assert_true(fetches > 0);
    for (size_t i = 0; i < seg.weight_floats; i++)
        assert_true(w[i] == w[i]);
    /* S: the expansion [24][96] from [96][24], the depthwise taps as they are */
    const kr_cuda_step *sd = &p.steps[seg.first + e3];
    const float *swe = w + seg.sd.w_off, *swd = swe + 24 * 96 + 96;
    assert_true(swe[5 * 96 + 70] == sd->w[70 * 24 + 5]);
    assert_true(swe[24 * 96 + 95] == sd->e_bias[95]);
    assert_true(swd[24 * 96 + 3] == sd->w2[24 * 96 + 3]);
    assert_true(swd[25 * 96 + 2] == sd->bias2[2]);
    /* E, after S's weights in stage 0: w1 [72][24] from [24][72], the expansion [24][88] from
     * [88][24], the taps [9][88] as they are, w3 [88][24] from [24][88], the biases */
    const kr_cuda_step *c1 = &p.steps[seg.first], *ed = c1 + 1, *c3 = c1 + 2;
    int oe[KR_SEG_E_N + 1];
    kr_seg_e_layout(72, 24, 88, oe);
    const float *ew = w + seg.e_w_off;
    assert_int_equal(seg.e_w_off, seg.sd.w_off + 2304 + 96 + 2400 + 96);
    assert_int_equal(seg.e_w_off + oe[KR_SEG_E_N], seg.stage_off[1]);
    assert_true(ew[oe[KR_SEG_E_W1] + 70 * 24 + 5] == c1->w[5 * 72 + 70]);
    assert_true(ew[oe[KR_SEG_E_B1] + 23] == c1->bias[23]);
    assert_true(ew[oe[KR_SEG_E_WE] + 5 * 88 + 80] == ed->w[80 * 24 + 5]);
    assert_true(ew[oe[KR_SEG_E_BE] + 87] == ed->e_bias[87]);
    assert_true(ew[oe[KR_SEG_E_WD] + 8 * 88 + 3] == ed->w2[8 * 88 + 3]);
    assert_true(ew[oe[KR_SEG_E_BD] + 1] == ed->bias2[1]);
    assert_true(ew[oe[KR_SEG_E_W3] + 80 * 24 + 5] == c3->w[5 * 88 + 80]);
    assert_true(ew[oe[KR_SEG_E_B3] + 23] == c3->bias[23]);
    /* P0: w1 [hid][ci] as is, b2 zeros, w [ci][c] from [c][ci] */
    const kr_cuda_step *p0 = sd + 1;
    const int ci0 = seg.p0.ci, hid0 = seg.p0.hid;
    const float *q = w + seg.stage_off[s0];
    assert_true(q[5] == p0->se_w[0][5]);
    const int r4h = (hid0 * ci0 + 3) / 4 * 4, r4b = (hid0 + 3) / 4 * 4, r4c = (ci0 + 3) / 4 * 4;
    const float *w2 = q + r4h + r4b, *b2 = w2 + r4h, *pw = b2 + r4c;
    assert_true(w2[3 * ci0 + 7] == p0->se_w[1][7 * hid0 + 3]); /* [hid][ci] from [ci][hid] */
    assert_true(b2[0] == 0.0f && b2[ci0 - 1] == 0.0f);
    assert_true(pw[10 * c + 5] == p0->w[5 * ci0 + 10]);       /* [ci][c] from [c][ci] */
    /* pair 1: the expansion [c][e] from [e][c], the depthwise taps as they are, its projection */
    const kr_cuda_step *d1 = p0 + 3, *p1 = d1 + 1;
    const int e1 = seg.d[1].e;
    const float *we = w + seg.d[1].w_off, *wd = we + c * e1 + e1;
    assert_int_equal(seg.d[1].w_off, seg.stage_off[s0 + 2]);
    assert_true(we[3 * e1 + 17] == d1->w[17 * c + 3]);
    assert_true(wd[24 * e1 + 5] == d1->w2[24 * e1 + 5]);
    const float *pp = w + seg.p[1].w_off;
    const int hid1 = seg.p[1].hid;
    const float *pw1 = pp + 2 * hid1 * e1 + hid1 + e1;
    assert_true(pw1[100 * c + 31] == p1->w[31 * e1 + 100]);
    assert_true(pw1[e1 * c] == p1->bias[0]);
    /* Q: w [c][q_oc] from [q_oc][c], then its bias */
    const kr_cuda_step *qs = p0 + qi;
    const float *qw = w + seg.stage_off[s0 + seg.n_ir + 1];
    assert_true(qw[7 * seg.q_oc + 100] == qs->w[100 * c + 7]);
    assert_true(qw[c * seg.q_oc + 127] == qs->bias[127]);
    assert_int_equal(seg.stage_off[s0 + seg.n_ir + 1] + seg.stage_floats[s0 + seg.n_ir + 1],
                     seg.stage_off[s0 + seg.n_ir + 2]);
    /* U: the resize's excitation [128][32] and bias as they are; the convolution [128][24]
     * from [24][128]; the expansion's excitation w1 [24][24] as is, w2 [hid][u_c] from
     * [u_c][hid]; the expansion [u_c][u_e] from [u_e][u_c]; the taps [9][24] as they are */
    const kr_cuda_step *rs = qs + 1, *cv = rs + 1, *ud = rs + 2;
    int ou[KR_SEG_U_N + 1], op[KR_SEG_PJ_N + 1];
    kr_seg_u_layout(c, 128, 24, 24, 24, 16, 16, 16, ou);
    kr_seg_proj_layout(24, 24, 24, op);
    const float *uw = w + seg.stage_off[s0 + seg.n_ir + 2], *up = uw + ou[KR_SEG_U_P];
    assert_true(uw[ou[KR_SEG_U_SW] + 100 * 32 + 7] == rs->se_w[0][100 * 32 + 7]);
    assert_true(uw[ou[KR_SEG_U_SB] + 127] == rs->se_b[0][127]);
    assert_true(uw[ou[KR_SEG_U_AW] + 100 * 24 + 5] == cv->w[5 * 128 + 100]);
    assert_true(uw[ou[KR_SEG_U_AB] + 23] == cv->bias[23]);
    assert_true(up[op[KR_SEG_PJ_W1] + 3 * 24 + 7] == ud->se_w[0][3 * 24 + 7]);
    assert_true(up[op[KR_SEG_PJ_B1] + 2] == ud->se_b[0][2]);
    assert_true(up[op[KR_SEG_PJ_W2] + 3 * 24 + 7] == ud->se_w[1][7 * 24 + 3]);
    assert_true(up[op[KR_SEG_PJ_B2] + 22] == ud->se_b[1][22]);
    assert_true(up[op[KR_SEG_PJ_W] + 5 * 24 + 17] == ud->w[17 * 24 + 5]);
    assert_true(up[op[KR_SEG_PJ_B] + 23] == ud->e_bias[23]);
    assert_true(uw[ou[KR_SEG_U_DW] + 8 * 24 + 3] == ud->w2[8 * 24 + 3]);
    assert_true(uw[ou[KR_SEG_U_DB] + 2] == ud->bias2[2]);
    /* V, after U's: the convolution [24][16] from [16][24], its bias; W: the expansion's
     * excitation w1 [16][16] as is, w2 [hid][v_oc] from [v_oc][hid], the expansion
     * [v_oc][w_e] from [w_e][v_oc], the taps [9][16] as they are, the biases */
    const kr_cuda_step *vc = ud + 1, *ws = ud + 2;
    int ow[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(16, 16, 16, ow);
    const float *wp = uw + ou[KR_SEG_U_WP];
    assert_int_equal(ou[KR_SEG_U_VW], ou[KR_SEG_U_DB] + 24);
    assert_true(uw[ou[KR_SEG_U_VW] + 5 * 16 + 11] == vc->w[11 * 24 + 5]);
    assert_true(uw[ou[KR_SEG_U_VW] + 23 * 16 + 15] == vc->w[15 * 24 + 23]);
    assert_true(uw[ou[KR_SEG_U_VB] + 15] == vc->bias[15]);
    assert_true(wp[ow[KR_SEG_PJ_W1] + 3 * 16 + 7] == ws->se_w[0][3 * 16 + 7]);
    assert_true(wp[ow[KR_SEG_PJ_B1] + 2] == ws->se_b[0][2]);
    assert_true(wp[ow[KR_SEG_PJ_W2] + 3 * 16 + 7] == ws->se_w[1][7 * 16 + 3]);
    assert_true(wp[ow[KR_SEG_PJ_B2] + 14] == ws->se_b[1][14]);
    assert_true(wp[ow[KR_SEG_PJ_W] + 5 * 16 + 11] == ws->w[11 * 16 + 5]);
    assert_true(wp[ow[KR_SEG_PJ_B] + 15] == ws->e_bias[15]);
    assert_true(uw[ou[KR_SEG_U_WD] + 8 * 16 + 3] == ws->w2[8 * 16 + 3]);
    assert_true(uw[ou[KR_SEG_U_WB] + 2] == ws->bias2[2]);
    assert_int_equal(ou[KR_SEG_U_WP] + ow[KR_SEG_PJ_N], ou[KR_SEG_U_WD]);
    /* Y and Z, after W's: Y1's convolution [16][16] from [16][16] transposed, Y2's excitation
     * and convolution as W's but the second dense layer as it is ([oc][hid], block_dense's),
     * the taps [9][16] as they are, Z's [1][2][2][16] as it is */
    assert_int_equal(seg.y_oc, 16);
    assert_int_equal(seg.y_dbf, 1);
    const kr_cuda_step *y1 = ud + 3, *y2 = ud + 4, *zs = ud + 5;
    int oy[KR_SEG_Y_N + 1];
    kr_seg_y_layout(16, 16, 16, 16, 1, oy);
    const float *yw = uw + ou[KR_SEG_U_N], *yp = yw + oy[KR_SEG_Y_P];
    assert_true(yw[oy[KR_SEG_Y_W1] + 5 * 16 + 11] == y1->w[11 * 16 + 5]);
    assert_true(yw[oy[KR_SEG_Y_B1] + 15] == y1->bias[15]);
    assert_true(yp[ow[KR_SEG_PJ_W1] + 3 * 16 + 7] == y2->se_w[0][3 * 16 + 7]);
    assert_true(yp[ow[KR_SEG_PJ_B1] + 2] == y2->se_b[0][2]);
    assert_true(yp[ow[KR_SEG_PJ_W2] + 3 * 16 + 7] == y2->se_w[1][3 * 16 + 7]); /* as is */
    assert_true(yp[ow[KR_SEG_PJ_B2] + 14] == y2->se_b[1][14]);
    assert_true(yp[ow[KR_SEG_PJ_W] + 5 * 16 + 11] == y2->w[11 * 16 + 5]);
    assert_true(yp[ow[KR_SEG_PJ_B] + 15] == y2->e_bias[15]);
    assert_true(yw[oy[KR_SEG_Y_DW] + 8 * 16 + 3] == y2->w2[8 * 16 + 3]);
    assert_true(yw[oy[KR_SEG_Y_DB] + 2] == y2->bias2[2]);
    assert_true(yw[oy[KR_SEG_Y_ZW] + 3 * 16 + 9] == zs->w[3 * 16 + 9]);
    assert_true(yw[oy[KR_SEG_Y_ZB]] == zs->bias[0]);
    assert_int_equal(seg.stage_off[s0 + seg.n_ir + 2] + ou[KR_SEG_U_N] + oy[KR_SEG_Y_N],
                     (int)seg.weight_floats);
    free(w);
    for (int i = 0; i < n_keep; i++)
        free(keep[i]);
    free_plan(&p);
    keyer_model_destroy(&m);
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
        cmocka_unit_test(test_spatial_pads),
        cmocka_unit_test(test_onnx_refusals),
        cmocka_unit_test(test_landscape_means),
        cmocka_unit_test(test_face_short_plan),
        cmocka_unit_test(test_face_mesh_prelu),
        cmocka_unit_test(test_excitation_fusion),
        cmocka_unit_test(test_io_steps),
        cmocka_unit_test(test_stem_pointwise),
        cmocka_unit_test(test_stem_pointwise_shapes),
        cmocka_unit_test(test_stem_pointwise_no_tail),
        cmocka_unit_test(test_resize_into_conv),
        cmocka_unit_test(test_cluster_segment),
        cmocka_unit_test(test_cluster_segment_decoder),
        cmocka_unit_test(test_cluster_segment_vw),
        cmocka_unit_test(test_cluster_segment_pack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
