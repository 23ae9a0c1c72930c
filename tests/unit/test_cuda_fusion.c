/*
 * The cuda backend's gather folds (src/nn/cuda/fusion.c, kr_cuda_fuse_gathers) on the CPU: they
 * are host decisions over the graph and the memory plan, so they are checked here, where CI
 * runs; the folded kernels themselves are checked against the reference on the GPU
 * (tests/backend_ops: test_gather_folds, test_nn_onnx_cuda_gpu). The memory view is the one
 * backend.c builds for an f16 instance (the planner's offsets halved, a half copy of every
 * ungrouped CONV_2D's weights), at stand-in device addresses; nothing is dereferenced.
 *
 *  - u2netp (per U²-Net's architecture: every max pool feeds one convolution; 50 two-input
 *    channel concatenations each read only by the convolution after it, 33 of them with one
 *    side written by a bilinear upsample read only there, the other 5 upsamples those of the
 *    side outputs into the 6-input fuse concatenation) on a compute 9.0 and an emulated 8.0
 *    device: all 33 pools, 50 concatenations and 33 resizes folded (at the end of 4 RSU blocks
 *    only after the residual ADD folded into the convolution is undone: the planner put the
 *    ADD's output on the resize's input), and the folded convolutions' fields name the right
 *    sources, sizes and resize modes and their outputs do not overlap the sources; and the
 *    6-input fuse concatenation gathered by the 1x1 fuse convolution (kr_cuda_op.gcat: the six
 *    side maps where they lie, its output clear of them);
 *  - compute 7.5 (no mma.sync) and f32 instances (no half weights): nothing folded;
 *  - selfie's excitation MULs into the pointwise layer after them (kr_cuda_op.scale): 6 of its
 *    10 in f16 on compute 9.0, 8.6 and 7.5 (not the one read by a resize nor the three read by
 *    a 16 -> 16 layer), and 2 of its 3 upsamples into the pointwise layer reading them
 *    (kr_cuda_op.rs), with the right sources
 *    and outputs clear of them; none in f32;
 *  - face-short's 16 ADDs (+ RELU) and 11 channel PADs into the pointwise layer before them
 *    (kr_cuda_op.add), in f16 on the same classes, none in f32;
 *  - with a memory plan without slack (the planner may then reuse a source's memory for the
 *    convolution's output): no folded convolution writes over a source it reads.
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
#include "nn/cuda/fusion.h"
#include "nn/cuda/persistent/persistent.h" /* KR_CUDA_PLAN_SLACK */
#include "nn/model.h"
#include "nn/planner.h"

#define ARENA_BASE ((uintptr_t)1 << 32)
#define WEIGHTS_BASE ((uintptr_t)1 << 40)

typedef struct view {
    kr_plan plan;
    size_t *offsets, *const_offsets, *w16_offsets;
    kr_gpu_caps caps;
    kr_cuda_mem mem;
    kr_cuda_op *ops;
    unsigned char *folded;
    int n_folded;
} view;

/* The f16 (or f32) instance's memory view of @p g with the planner's @p slack, the device of
 * compute @p cc, the backend's folds (kr_cuda_fuse, then kr_cuda_fuse_gathers). */
static void make_view(view *v, const kr_graph *g, int f16, int slack, int cc)
{
    memset(v, 0, sizeof(*v));
    keyer_error err = {0};
    if (kr_plan_create(g, 1, slack, &v->plan, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    size_t nt = (size_t)g->n_tensors;
    v->offsets = malloc(nt * sizeof(size_t));
    v->const_offsets = malloc(nt * sizeof(size_t));
    v->w16_offsets = malloc(nt * sizeof(size_t));
    v->ops = calloc((size_t)g->n_nodes, sizeof(kr_cuda_op));
    v->folded = calloc((size_t)g->n_nodes, 1);
    assert_true(v->offsets && v->const_offsets && v->w16_offsets && v->ops && v->folded);
    size_t wbytes = 0;
    for (size_t t = 0; t < nt; t++) {
        v->offsets[t] = v->plan.offsets[t] == SIZE_MAX ? SIZE_MAX
                                                       : v->plan.offsets[t] / (f16 ? 2 : 1);
        v->const_offsets[t] = SIZE_MAX;
        v->w16_offsets[t] = SIZE_MAX;
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
    v->caps.major = v->caps.real_major = cc / 10;
    v->caps.minor = v->caps.real_minor = cc % 10;
    v->caps.sms = 132;
    v->mem = (kr_cuda_mem){.graph = g,
                           .batch = 1,
                           .esize = f16 ? 2 : 4,
                           .arena = (unsigned char *)ARENA_BASE,
                           .offsets = v->offsets,
                           .weights = (unsigned char *)WEIGHTS_BASE,
                           .const_offsets = v->const_offsets,
                           .w16_offsets = f16 ? v->w16_offsets : NULL,
                           .caps = &v->caps};
    v->n_folded = kr_cuda_fuse(&v->mem, f16, v->ops, v->folded);
    v->n_folded += kr_cuda_fuse_gathers(&v->mem, v->ops, v->folded);
}

static void free_view(view *v)
{
    kr_plan_destroy(&v->plan);
    free(v->offsets);
    free(v->const_offsets);
    free(v->w16_offsets);
    free(v->ops);
    free(v->folded);
}

/* Folded nodes of operator @p op. */
static int folded_of(const view *v, kr_op op)
{
    int c = 0;
    for (int n = 0; n < v->mem.graph->n_nodes; n++)
        c += v->folded[n] && v->mem.graph->nodes[n].op == op;
    return c;
}

static int count_of(const kr_graph *g, kr_op op)
{
    int c = 0;
    for (int n = 0; n < g->n_nodes; n++)
        c += g->nodes[n].op == op;
    return c;
}

/* Whether [a, a + an) and [b, b + bn) overlap. */
static int ranges_overlap(uintptr_t a, size_t an, uintptr_t b, size_t bn)
{
    return a < b + bn && b < a + an;
}

/* Every folded convolution of @p v: its sources are what the graph says (the concatenation's
 * two inputs, or the resize's input in place of its output; the pool's input), and its
 * output does not overlap them. Returns how many convolutions carry a fold. */
static int check_folded_convs(const view *v)
{
    const kr_graph *g = v->mem.graph;
    int convs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_cuda_op *op = &v->ops[n];
        if (!op->cat.src[0] && !op->pool.src)
            continue;
        convs++;
        const kr_node *conv = &g->nodes[n];
        assert_int_equal(conv->op, KR_OP_CONV_2D);
        assert_false(v->folded[n]);
        const int x = conv->inputs[0];
        const kr_node *prod = &g->nodes[g->tensors[x].producer];
        assert_true(v->folded[g->tensors[x].producer]);
        const void *srcs[2] = {op->pool.src, NULL};
        int src_t[2] = {-1, -1};
        if (op->pool.src) {
            assert_null(op->cat.src[0]);
            assert_int_equal(prod->op, KR_OP_MAX_POOL_2D);
            src_t[0] = prod->inputs[0];
            assert_int_equal(op->pool.ih, g->tensors[src_t[0]].dims[1]);
            assert_int_equal(op->pool.iw, g->tensors[src_t[0]].dims[2]);
            assert_int_equal(op->pool.kh, prod->p.window.kernel_h);
            assert_int_equal(op->pool.sh, prod->p.window.stride_h);
        } else {
            assert_int_equal(prod->op, KR_OP_CONCATENATION);
            assert_int_equal(op->cat.c0, g->tensors[prod->inputs[0]].dims[3]);
            assert_int_equal(op->cat.h, g->tensors[x].dims[1]);
            assert_int_equal(op->cat.w, g->tensors[x].dims[2]);
            for (int side = 0; side < 2; side++) {
                int t = prod->inputs[side];
                const kr_tensor *tt = &g->tensors[t];
                if (op->cat.rz == side) {
                    const kr_node *rz = &g->nodes[tt->producer];
                    assert_int_equal(rz->op, KR_OP_RESIZE_BILINEAR);
                    assert_true(v->folded[tt->producer]);
                    t = rz->inputs[0];
                    assert_int_equal(op->cat.rh, g->tensors[t].dims[1]);
                    assert_int_equal(op->cat.rw, g->tensors[t].dims[2]);
                    assert_int_equal(op->cat.half, rz->p.resize.half_pixel_centers);
                    assert_int_equal(op->cat.align, rz->p.resize.align_corners);
                }
                src_t[side] = t;
                srcs[side] = op->cat.src[side];
            }
        }
        const uintptr_t out = (uintptr_t)op->out;
        const size_t out_bytes = kr_cuda_mem_bytes(&v->mem, conv->outputs[0]);
        for (int side = 0; side < 2; side++) {
            if (src_t[side] < 0)
                continue;
            const int st = kr_tensor_storage(g, src_t[side]);
            assert_ptr_equal(srcs[side], v->mem.arena + v->offsets[st]);
            assert_false(ranges_overlap(out, out_bytes, (uintptr_t)srcs[side],
                                        kr_cuda_mem_bytes(&v->mem, st)));
        }
    }
    return convs;
}

/* The gathered concatenations of @p v (kr_cuda_op.gcat): the 1x1 convolution's sources are its
 * folded CONCATENATION's one-channel inputs in order, where they lie, its output clear of them.
 * Returns how many. */
static int check_gathered(const view *v)
{
    const kr_graph *g = v->mem.graph;
    int convs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_cuda_op *op = &v->ops[n];
        if (!op->gcat.n)
            continue;
        convs++;
        const kr_node *conv = &g->nodes[n];
        assert_int_equal(conv->op, KR_OP_CONV_2D);
        assert_false(v->folded[n]);
        const int x = conv->inputs[0];
        const kr_node *cat = &g->nodes[g->tensors[x].producer];
        assert_int_equal(cat->op, KR_OP_CONCATENATION);
        assert_true(v->folded[g->tensors[x].producer]);
        assert_int_equal(op->gcat.n, cat->n_inputs);
        const uintptr_t out = (uintptr_t)op->out;
        const size_t out_bytes = kr_cuda_mem_bytes(&v->mem, conv->outputs[0]);
        for (int c = 0; c < op->gcat.n; c++) {
            const int st = kr_tensor_storage(g, cat->inputs[c]);
            assert_int_equal(g->tensors[cat->inputs[c]].dims[3], 1);
            assert_ptr_equal(op->gcat.src[c], v->mem.arena + v->offsets[st]);
            assert_false(ranges_overlap(out, out_bytes, (uintptr_t)op->gcat.src[c],
                                        kr_cuda_mem_bytes(&v->mem, st)));
        }
    }
    return convs;
}

static keyer_model *load_u2netp(void)
{
    char path[1024];
    keyer_error err = {0};
    if (keyer_registry_resolve("u2netp", path, sizeof(path), &err) != KEYER_OK) {
        printf("u2netp not available (%s): skipped\n", err.message);
        return NULL;
    }
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    return m;
}

static void test_u2netp_folds(void **state)
{
    (void)state;
    keyer_model *m = load_u2netp();
    if (!m)
        skip();
    const kr_graph *g = kr_model_graph(m);
    printf("u2netp: %d nodes, %d MAX_POOL_2D, %d CONCATENATION, %d RESIZE_BILINEAR\n",
           g->n_nodes, count_of(g, KR_OP_MAX_POOL_2D), count_of(g, KR_OP_CONCATENATION),
           count_of(g, KR_OP_RESIZE_BILINEAR));
    assert_int_equal(count_of(g, KR_OP_MAX_POOL_2D), 33);
    assert_int_equal(count_of(g, KR_OP_RESIZE_BILINEAR), 38);
    static const int ccs[] = {90, 80};
    for (size_t i = 0; i < sizeof(ccs) / sizeof(ccs[0]); i++) {
        view v;
        make_view(&v, g, 1, KR_CUDA_PLAN_SLACK, ccs[i]);
        const int pools = folded_of(&v, KR_OP_MAX_POOL_2D);
        const int cats = folded_of(&v, KR_OP_CONCATENATION);
        const int rzs = folded_of(&v, KR_OP_RESIZE_BILINEAR);
        printf("compute %d: folded %d pools, %d concatenations, %d resizes (%d nodes in all)\n",
               ccs[i], pools, cats, rzs, v.n_folded);
        assert_int_equal(pools, 33);
        assert_int_equal(cats, 51); /* 50 two-way into the tensor-core gathers, the six-way */
        assert_int_equal(rzs, 33);
        assert_int_equal(check_folded_convs(&v), 33 + 50);
        assert_int_equal(check_gathered(&v), 1); /* the fuse layer's six side maps */
        free_view(&v);
    }
    /* no mma.sync (7.5), or no half weights (f32): nothing for the gathers */
    for (int f16 = 0; f16 < 2; f16++) {
        view v;
        make_view(&v, g, f16, KR_CUDA_PLAN_SLACK, f16 ? 75 : 90);
        assert_int_equal(folded_of(&v, KR_OP_MAX_POOL_2D) + folded_of(&v, KR_OP_CONCATENATION) +
                             folded_of(&v, KR_OP_RESIZE_BILINEAR),
                         0);
        assert_int_equal(check_folded_convs(&v), 0);
        assert_int_equal(check_gathered(&v), 0);
        free_view(&v);
    }
    /* without slack the planner may put a convolution's output on a source it would read:
     * such folds are refused, the others keep their sources intact */
    view v;
    make_view(&v, g, 1, 0, 90);
    const int convs = check_folded_convs(&v);
    printf("without slack: %d convolutions with a fold (%d with slack %d)\n", convs, 33 + 50,
           KR_CUDA_PLAN_SLACK);
    assert_true(convs <= 33 + 50);
    free_view(&v);
    keyer_model_destroy(&m);
}

/* Every excitation MUL folded into the pointwise convolution after it in @p v: the MUL (and an
 * ADD folded into it) marked folded, the convolution's sources the MUL's operands (the tensor,
 * the per-item vector, the ADD's other operand), its output clear of them. Returns how many. */
static int check_scale_folds(const view *v)
{
    const kr_graph *g = v->mem.graph;
    int convs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_cuda_op *op = &v->ops[n];
        if (!op->scale.src)
            continue;
        convs++;
        const kr_node *conv = &g->nodes[n];
        assert_int_equal(conv->op, KR_OP_CONV_2D);
        assert_false(v->folded[n]);
        int p = n - 1; /* the MUL: the node run before the convolution */
        while (p >= 0 && v->folded[p] && g->nodes[p].op != KR_OP_MUL)
            p--;
        assert_true(p >= 0 && v->folded[p]);
        const kr_node *mul = &g->nodes[p];
        assert_int_equal(mul->op, KR_OP_MUL);
        const int side = g->tensors[mul->inputs[0]].dims[1] == 1 ? 1 : 0;
        const int src[2] = {mul->inputs[side], mul->inputs[1 - side]};
        assert_ptr_equal(op->scale.src, v->mem.arena + v->offsets[kr_tensor_storage(g, src[0])]);
        assert_ptr_equal(op->scale.vec, v->mem.arena + v->offsets[kr_tensor_storage(g, src[1])]);
        assert_int_equal(op->scale.pixels, g->tensors[src[0]].dims[1] * g->tensors[src[0]].dims[2]);
        const uintptr_t out = (uintptr_t)op->out;
        const size_t out_bytes = kr_cuda_mem_bytes(&v->mem, conv->outputs[0]);
        for (int i = 0; i < 2; i++) {
            const int st = kr_tensor_storage(g, src[i]);
            assert_false(ranges_overlap(out, out_bytes, (uintptr_t)(v->mem.arena + v->offsets[st]),
                                        kr_cuda_mem_bytes(&v->mem, st)));
        }
        if (op->scale.addend) /* the ADD folded into the MUL, right after it */
            assert_false(ranges_overlap(out, out_bytes, (uintptr_t)op->scale.addend,
                                        kr_cuda_mem_bytes(&v->mem, conv->inputs[0])));
    }
    return convs;
}

/* Every RESIZE_BILINEAR folded into the pointwise convolution after it in @p v: the resize
 * marked folded, the convolution's source its input (with its sizes and modes), its output
 * clear of it. Returns how many. */
static int check_resize_folds(const view *v)
{
    const kr_graph *g = v->mem.graph;
    int convs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_cuda_op *op = &v->ops[n];
        if (!op->rs.src)
            continue;
        convs++;
        const kr_node *conv = &g->nodes[n];
        assert_int_equal(conv->op, KR_OP_CONV_2D);
        const int prod = g->tensors[conv->inputs[0]].producer;
        assert_true(v->folded[prod]);
        const kr_node *rz = &g->nodes[prod];
        assert_int_equal(rz->op, KR_OP_RESIZE_BILINEAR);
        const int st = kr_tensor_storage(g, rz->inputs[0]);
        assert_ptr_equal(op->rs.src, v->mem.arena + v->offsets[st]);
        assert_int_equal(op->rs.ih, g->tensors[rz->inputs[0]].dims[1]);
        assert_int_equal(op->rs.iw, g->tensors[rz->inputs[0]].dims[2]);
        assert_int_equal(op->rs.align, rz->p.resize.align_corners);
        assert_int_equal(op->rs.half, rz->p.resize.half_pixel_centers);
        assert_false(ranges_overlap((uintptr_t)op->out,
                                    kr_cuda_mem_bytes(&v->mem, conv->outputs[0]),
                                    (uintptr_t)op->rs.src, kr_cuda_mem_bytes(&v->mem, st)));
    }
    return convs;
}

/* selfie's excitation MULs into the pointwise layer reading them (kr_cuda_fuse_gathers): the
 * encoder's 7 (one at 64x64, six at 16x16) and the decoder's 3 with their ADD (32x32, 64x64,
 * 128x128), less the one read by a resize and the three read by a 16 -> 16 layer (which keeps
 * the CUDA-core path: PW_MMA_MIN_KN): 6; the decoder's 3 upsamples, each read by a pointwise
 * layer, less the one read by a 16 -> 16 layer: 2; no depthwise layer. In f16 on every class from 7.5 (the tensor-core pointwise kernel takes them
 * all alike); none in f32. */
static void test_selfie_folds(void **state)
{
    (void)state;
    char path[1024];
    keyer_error err = {0};
    if (keyer_registry_resolve("selfie", path, sizeof(path), &err) != KEYER_OK) {
        printf("selfie not available (%s): skipped\n", err.message);
        skip();
    }
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    const kr_graph *g = kr_model_graph(m);
    assert_int_equal(count_of(g, KR_OP_MUL), 10);
    static const int ccs[] = {90, 86, 75};
    for (size_t i = 0; i < sizeof(ccs) / sizeof(ccs[0]); i++) {
        view v;
        make_view(&v, g, 1, KR_CUDA_PLAN_SLACK, ccs[i]);
        printf("selfie f16, compute %d: %d MUL and %d RESIZE_BILINEAR folded into pointwise "
               "layers\n",
               ccs[i], folded_of(&v, KR_OP_MUL), folded_of(&v, KR_OP_RESIZE_BILINEAR));
        assert_int_equal(folded_of(&v, KR_OP_MUL), 6);
        assert_int_equal(check_scale_folds(&v), 6);
        assert_int_equal(folded_of(&v, KR_OP_RESIZE_BILINEAR), 2);
        assert_int_equal(check_resize_folds(&v), 2);
        assert_int_equal(folded_of(&v, KR_OP_DEPTHWISE_CONV_2D), 0);
        free_view(&v);
    }
    view v;
    make_view(&v, g, 0, KR_CUDA_PLAN_SLACK, 90);
    assert_int_equal(folded_of(&v, KR_OP_MUL) + folded_of(&v, KR_OP_RESIZE_BILINEAR), 0);
    assert_int_equal(check_scale_folds(&v) + check_resize_folds(&v), 0);
    free_view(&v);
    keyer_model_destroy(&m);
}

/* Every ADD folded into the pointwise convolution before it in @p v (kr_cuda_op.add): the ADD
 * (and a channel PAD of its other operand) marked folded, the convolution writing the ADD's
 * output (or its folded activation's), its source the other operand (the PAD's input), the
 * output clear of the convolution's input and of that source. Returns how many. */
static int check_add_folds(const view *v)
{
    const kr_graph *g = v->mem.graph;
    int convs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_cuda_op *op = &v->ops[n];
        if (!op->add.src)
            continue;
        convs++;
        const kr_node *conv = &g->nodes[n];
        assert_int_equal(conv->op, KR_OP_CONV_2D);
        assert_false(v->folded[n]);
        int a = n + 1; /* the ADD reading the convolution's output */
        while (a < g->n_nodes && !(g->nodes[a].op == KR_OP_ADD &&
                                   (g->nodes[a].inputs[0] == conv->outputs[0] ||
                                    g->nodes[a].inputs[1] == conv->outputs[0])))
            a++;
        assert_true(a < g->n_nodes && v->folded[a]);
        const kr_node *add = &g->nodes[a];
        int other = add->inputs[0] == conv->outputs[0] ? add->inputs[1] : add->inputs[0];
        const kr_node *pad = g->tensors[other].producer >= 0 ? &g->nodes[g->tensors[other].producer]
                                                             : NULL;
        if (pad && pad->op == KR_OP_PAD) {
            assert_true(v->folded[g->tensors[other].producer]);
            other = pad->inputs[0];
        }
        const int so = kr_tensor_storage(g, other);
        assert_ptr_equal(op->add.src, v->mem.arena + v->offsets[so]);
        assert_int_equal(op->add.ch, g->tensors[other].dims[3]);
        const size_t out_bytes = kr_cuda_mem_bytes(&v->mem, add->outputs[0]);
        const int in = conv->inputs[0];
        const int si = kr_tensor_storage(g, in);
        assert_false(ranges_overlap((uintptr_t)op->out, out_bytes,
                                    (uintptr_t)(v->mem.arena + v->offsets[so]),
                                    kr_cuda_mem_bytes(&v->mem, so)));
        assert_false(ranges_overlap((uintptr_t)op->out, out_bytes,
                                    (uintptr_t)(v->mem.arena + v->offsets[si]),
                                    kr_cuda_mem_bytes(&v->mem, si)));
    }
    return convs;
}

/* face-short's 16 BlazeFace blocks: each ADD (+ RELU) and the 11 channel PADs of its other
 * operand folded into the pointwise layer before it (no depthwise layer folded), in f16 on
 * every class from 7.5; none in f32. */
static void test_face_short_folds(void **state)
{
    (void)state;
    char path[1024];
    keyer_error err = {0};
    if (keyer_registry_resolve("face-short", path, sizeof(path), &err) != KEYER_OK) {
        printf("face-short not available (%s): skipped\n", err.message);
        skip();
    }
    keyer_model *m = NULL;
    if (keyer_model_load_file(path, &m, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    const kr_graph *g = kr_model_graph(m);
    assert_int_equal(count_of(g, KR_OP_ADD), 16);
    assert_int_equal(count_of(g, KR_OP_PAD), 11);
    static const int ccs[] = {90, 86, 75};
    for (size_t i = 0; i < sizeof(ccs) / sizeof(ccs[0]); i++) {
        view v;
        make_view(&v, g, 1, KR_CUDA_PLAN_SLACK, ccs[i]);
        printf("face-short f16, compute %d: %d ADD, %d PAD and %d DEPTHWISE_CONV_2D folded into "
               "pointwise layers\n",
               ccs[i], folded_of(&v, KR_OP_ADD), folded_of(&v, KR_OP_PAD),
               folded_of(&v, KR_OP_DEPTHWISE_CONV_2D));
        assert_int_equal(folded_of(&v, KR_OP_DEPTHWISE_CONV_2D), 0);
        assert_int_equal(folded_of(&v, KR_OP_ADD), 16);
        assert_int_equal(folded_of(&v, KR_OP_PAD), 11);
        assert_int_equal(check_add_folds(&v), 16);
        free_view(&v);
    }
    view v;
    make_view(&v, g, 0, KR_CUDA_PLAN_SLACK, 90);
    assert_int_equal(folded_of(&v, KR_OP_PAD), 0);
    assert_int_equal(check_add_folds(&v), 0);
    free_view(&v);
    keyer_model_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u2netp_folds),
        cmocka_unit_test(test_selfie_folds),
        cmocka_unit_test(test_face_short_folds),
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
