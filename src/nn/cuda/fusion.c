/*
 * The cuda backend's fusion pass (fusion.h).
 */
#include "nn/cuda/fusion.h"

#include <stddef.h>
#include <stdint.h>

static int takes_post(kr_op op)
{
    switch (op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_TRANSPOSE_CONV_BIAS:
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_PRELU:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
    case KR_OP_MEAN:
    case KR_OP_RESIZE_BILINEAR: return 1;
    default: return 0;
    }
}

/* Whether the arena bytes of tensors a and b overlap. */
static int overlaps(const kr_cuda_mem *mem, int a, int b)
{
    const kr_graph *g = mem->graph;
    int sa = kr_tensor_storage(g, a), sb = kr_tensor_storage(g, b);
    if (kr_tensor_is_const(&g->tensors[sa]) || kr_tensor_is_const(&g->tensors[sb]))
        return 0;
    size_t a0 = mem->offsets[sa], a1 = a0 + kr_cuda_mem_bytes(mem, sa);
    size_t b0 = mem->offsets[sb], b1 = b0 + kr_cuda_mem_bytes(mem, sb);
    return a0 < b1 && b0 < a1;
}

/* Whether tensors a and b occupy exactly the same arena bytes (an element-wise kernel may then
 * read one and write the other: each element is read and written by the same thread). */
static int same_place(const kr_cuda_mem *mem, int a, int b)
{
    const kr_graph *g = mem->graph;
    int sa = kr_tensor_storage(g, a), sb = kr_tensor_storage(g, b);
    return !kr_tensor_is_const(&g->tensors[sa]) && !kr_tensor_is_const(&g->tensors[sb]) &&
           mem->offsets[sa] == mem->offsets[sb] &&
           kr_tensor_bytes(&g->tensors[sa], mem->batch) ==
               kr_tensor_bytes(&g->tensors[sb], mem->batch);
}

static int is_elementwise(kr_op op)
{
    return op == KR_OP_ADD || op == KR_OP_MUL || op == KR_OP_PRELU;
}

/* Whether any tensor is a view of @p t. */
static int is_viewed(const kr_graph *g, int t)
{
    for (int v = 0; v < g->n_tensors; v++)
        if (g->tensors[v].view_of == t)
            return 1;
    return 0;
}

/* Activation folds (see fusion.h). */
static int plan_folds(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    int n_folded = 0;
    for (int n = 0; n + 1 < g->n_nodes; n++) {
        const kr_node *a = &g->nodes[n], *b = &g->nodes[n + 1];
        if (folded[n] || !takes_post(a->op) || kr_cuda_post_of(b->op) == KR_CUDA_POST_NONE)
            continue;
        int t = a->outputs[0];
        const kr_tensor *tt = &g->tensors[t];
        if (b->inputs[0] != t || tt->last_consumer != n + 1 || tt->graph_output >= 0)
            continue;
        int viewed = is_viewed(g, t);
        int clash = 0;
        for (int i = 0; i < a->n_inputs && !clash; i++)
            clash = a->inputs[i] >= 0 && overlaps(mem, a->inputs[i], b->outputs[0]) &&
                    !(is_elementwise(a->op) && same_place(mem, a->inputs[i], b->outputs[0]));
        if (viewed || clash)
            continue;
        ops[n].out = kr_cuda_mem_ptr(mem, b->outputs[0]);
        ops[n].post = kr_cuda_post_of(b->op);
        folded[n + 1] = 1;
        n_folded++;
    }
    return n_folded;
}

static int takes_residual(kr_op op)
{
    return op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D ||
           op == KR_OP_TRANSPOSE_CONV_BIAS || op == KR_OP_ADD || op == KR_OP_MUL;
}

/* Residual folds, after the activation folds (see the file comment): an ADD of two tensors of
 * its output's shape, one of them written by the node just before it (after folding) and read
 * by nobody else, is done in that node's epilogue. */
static int plan_residual_folds(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    int n_folded = 0;
    for (int m = 1; m < g->n_nodes; m++) {
        const kr_node *add = &g->nodes[m];
        if (add->op != KR_OP_ADD || folded[m] || add->activation != KR_ACT_NONE ||
            ops[m].post != KR_CUDA_POST_NONE || add->n_inputs != 2)
            continue;
        int n = m - 1;
        while (n >= 0 && folded[n])
            n--;
        if (n < 0 || !takes_residual(g->nodes[n].op) || ops[n].residual)
            continue;
        const kr_node *prod = &g->nodes[n];
        int out = add->outputs[0];
        for (int side = 0; side < 2; side++) {
            int t = add->inputs[side], r = add->inputs[1 - side];
            const kr_tensor *tt = &g->tensors[t], *rt = &g->tensors[r];
            if (kr_tensor_is_const(tt) || kr_tensor_is_const(rt) ||
                !kr_tensor_same_dims(tt, &g->tensors[out]) || !kr_tensor_same_dims(rt, &g->tensors[out]) ||
                ops[n].out != kr_cuda_mem_ptr(mem, t) || tt->last_consumer != m ||
                tt->graph_output >= 0 || is_viewed(g, t) || t == r ||
                (rt->producer >= n) || is_viewed(g, out))
                continue;
            /* the node reads its inputs and r while writing the ADD's output: no partial
             * overlap (an element-wise node, and r, may share the exact bytes) */
            int clash = overlaps(mem, r, out) && !same_place(mem, r, out);
            for (int i = 0; i < prod->n_inputs && !clash; i++)
                clash = prod->inputs[i] >= 0 && overlaps(mem, prod->inputs[i], out) &&
                        !(is_elementwise(prod->op) && same_place(mem, prod->inputs[i], out));
            if (clash)
                continue;
            ops[n].out = kr_cuda_mem_ptr(mem, out);
            ops[n].residual = kr_cuda_mem_ptr(mem, r);
            folded[m] = 1;
            n_folded++;
            break;
        }
    }
    return n_folded;
}

/* (ops.h) */
int kr_cuda_is_global_pool(const kr_graph *g, const kr_node *node)
{
    if (node->n_inputs < 1 || node->inputs[0] < 0)
        return 0;
    const kr_tensor *x = &g->tensors[node->inputs[0]], *y = &g->tensors[node->outputs[0]];
    if (x->rank != 4 || y->rank != 4 || y->dims[1] != 1 || y->dims[2] != 1)
        return 0;
    if (node->op == KR_OP_MEAN)
        return node->p.mean.axes_mask == ((1u << 1) | (1u << 2)) && node->p.mean.keep_dims;
    const kr_window_params *p = &node->p.window;
    /* (ONNX windows: dilated taps skip pixels; counting the padding changes the divisor) */
    return node->op == KR_OP_AVERAGE_POOL_2D && p->pad_top <= 0 && p->pad_left <= 0 &&
           p->kernel_h - p->pad_top >= x->dims[1] && p->kernel_w - p->pad_left >= x->dims[2] &&
           p->dilation_h <= 1 && p->dilation_w <= 1 &&
           !(p->count_include_pad && (p->pad_bottom > 0 || p->pad_right > 0));
}

/* An ADD (no activation, same-shape operands) read only by the global average pool right
 * after it: the pool sums the two operands itself (squeeze-and-excitation after a skip
 * connection, selfie's decoder) and the sum is never stored. */
static int plan_pool_folds(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    int n_folded = 0;
    for (int m = 0; m + 1 < g->n_nodes; m++) {
        const kr_node *add = &g->nodes[m];
        if (add->op != KR_OP_ADD || folded[m] || add->activation != KR_ACT_NONE ||
            ops[m].post != KR_CUDA_POST_NONE || ops[m].residual || add->n_inputs != 2)
            continue;
        const kr_node *pool = &g->nodes[m + 1];
        int out = add->outputs[0];
        const kr_tensor *ot = &g->tensors[out];
        if (folded[m + 1] || !kr_cuda_is_global_pool(g, pool) || pool->inputs[0] != out ||
            ot->last_consumer != m + 1 || ot->graph_output >= 0 || is_viewed(g, out) ||
            ops[m].out != kr_cuda_mem_ptr(mem, out) || ops[m + 1].addend)
            continue;
        const kr_tensor *a = &g->tensors[add->inputs[0]], *b = &g->tensors[add->inputs[1]];
        if (kr_tensor_is_const(a) || kr_tensor_is_const(b) || !kr_tensor_same_dims(a, ot) ||
            !kr_tensor_same_dims(b, ot))
            continue;
        ops[m + 1].in[0] = kr_cuda_mem_ptr(mem, add->inputs[0]);
        ops[m + 1].addend = kr_cuda_mem_ptr(mem, add->inputs[1]);
        folded[m] = 1;
        n_folded++;
    }
    return n_folded;
}

/* How many nodes read tensor @p t. */
static int readers(const kr_graph *g, int t)
{
    int r = 0;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < g->nodes[n].n_inputs; i++)
            r += g->nodes[n].inputs[i] == t;
    return r;
}

/* Whether the @p bytes at device address @p p overlap activation tensor @p t's storage. */
static int ptr_overlaps(const kr_cuda_mem *mem, const void *p, size_t bytes, int t)
{
    const kr_graph *g = mem->graph;
    int s = kr_tensor_storage(g, t);
    if (kr_tensor_is_const(&g->tensors[s]))
        return 0;
    const unsigned char *a0 = (const unsigned char *)p, *b0 = mem->arena + mem->offsets[s];
    return a0 < b0 + kr_cuda_mem_bytes(mem, s) && b0 < a0 + bytes;
}

/* An intermediate tensor that a fold may skip: an activation read by exactly one node, not a
 * graph output, not viewed. */
static int private_tensor(const kr_graph *g, int t)
{
    const kr_tensor *tt = &g->tensors[t];
    return !kr_tensor_is_const(tt) && tt->graph_output < 0 && tt->view_of < 0 && !is_viewed(g, t) &&
           readers(g, t) == 1;
}

/* The source of side @p side of CONCATENATION @p cat feeding CONV_2D @p n: the tensor itself,
 * or the input of the RESIZE_BILINEAR that wrote it (set *rz_node), when that resize is
 * unfolded, has no activation or post function and its output is read only by the
 * concatenation. */
static int cat_source(const kr_cuda_mem *mem, const kr_cuda_op *ops, const unsigned char *folded,
                      int t, int *rz_node)
{
    const kr_graph *g = mem->graph;
    const kr_tensor *tt = &g->tensors[t];
    *rz_node = -1;
    int p = tt->producer;
    if (p >= 0 && g->nodes[p].op == KR_OP_RESIZE_BILINEAR && !folded[p] &&
        ops[p].post == KR_CUDA_POST_NONE && !ops[p].residual &&
        g->nodes[p].activation == KR_ACT_NONE && ops[p].out == kr_cuda_mem_ptr(mem, t) &&
        private_tensor(g, t)) {
        const kr_tensor *in = &g->tensors[g->nodes[p].inputs[0]];
        if (in->rank == 4 && !kr_tensor_is_const(in) && in->dims[0] == tt->dims[0] &&
            in->dims[3] == tt->dims[3]) {
            *rz_node = p;
            return g->nodes[p].inputs[0];
        }
    }
    return t;
}

/* Whether node @p q's kernel writes over the storage of source tensor @p src[0] or @p src[1]
 * (-1: none). */
static int writes_over(const kr_cuda_mem *mem, const kr_cuda_op *ops, int q, const int *src)
{
    const kr_graph *g = mem->graph;
    if (!ops[q].out)
        return 0;
    size_t bytes = kr_cuda_mem_bytes(mem, g->nodes[q].outputs[0]);
    for (int side = 0; side < 2; side++)
        if (src[side] >= 0 && ptr_overlaps(mem, ops[q].out, bytes, src[side]))
            return 1;
    return 0;
}

/* Undoes the residual ADD fold into node @p n (plan_residual_folds): @p n writes its own
 * output again and the ADD is no longer marked folded. Returns the ADD's node, -1 if none was
 * found (then nothing changed). */
static int unfold_residual(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded, int n)
{
    const kr_graph *g = mem->graph;
    for (int m = n + 1; m < g->n_nodes; m++) {
        const kr_node *add = &g->nodes[m];
        if (!folded[m] || add->op != KR_OP_ADD || add->n_inputs != 2 ||
            kr_cuda_mem_ptr(mem, add->outputs[0]) != ops[n].out)
            continue;
        for (int side = 0; side < 2; side++)
            if (kr_cuda_mem_ptr(mem, add->inputs[1 - side]) == ops[n].residual) {
                ops[n].out = kr_cuda_mem_ptr(mem, add->inputs[side]);
                ops[n].residual = NULL;
                folded[m] = 0;
                return m;
            }
    }
    return -1;
}

/* The MAX_POOL_2D fold of fusion.h into CONV_2D @p n from node @p p before it: 1 if done. */
static int fold_pool(const kr_cuda_mem *mem, kr_cuda_op *ops, int p, int n)
{
    const kr_graph *g = mem->graph;
    const kr_node *pool = &g->nodes[p], *conv = &g->nodes[n];
    int t = pool->outputs[0], x = pool->inputs[0];
    const kr_tensor *tt = &g->tensors[t], *xt = &g->tensors[x];
    const kr_window_params *w = &pool->p.window;
    if (pool->op != KR_OP_MAX_POOL_2D || conv->inputs[0] != t || tt->rank != 4 || xt->rank != 4 ||
        kr_tensor_is_const(xt) || pool->activation != KR_ACT_NONE ||
        ops[p].post != KR_CUDA_POST_NONE || ops[p].residual ||
        ops[p].out != kr_cuda_mem_ptr(mem, t) || !private_tensor(g, t) ||
        xt->dims[3] != tt->dims[3] || xt->dims[0] != tt->dims[0] || w->kernel_h < 1 ||
        w->kernel_w < 1 || w->stride_h < 1 || w->stride_w < 1)
        return 0;
    /* the convolution must not write over the pool's input */
    if (ptr_overlaps(mem, ops[n].out, kr_cuda_mem_bytes(mem, conv->outputs[0]), x))
        return 0;
    kr_cuda_op trial = ops[n];
    trial.pool.src = kr_cuda_mem_ptr(mem, x);
    trial.pool.ih = xt->dims[1], trial.pool.iw = xt->dims[2];
    trial.pool.kh = w->kernel_h, trial.pool.kw = w->kernel_w;
    trial.pool.sh = w->stride_h, trial.pool.sw = w->stride_w;
    trial.pool.dh = w->dilation_h > 0 ? w->dilation_h : 1;
    trial.pool.dw = w->dilation_w > 0 ? w->dilation_w : 1;
    trial.pool.pt = w->pad_top, trial.pool.pl = w->pad_left;
    if (!kr_cuda_conv_2d_tc_fits(&trial))
        return 0;
    ops[n] = trial;
    return 1;
}

/* The excitation MUL fold of fusion.h into the pointwise CONV_2D @p n from node @p p, the node
 * run just before it: 1 if done. The MUL's operands (and the ADD folded into it) stay intact
 * until the convolution has read them: only it runs between, and it must not write over them. */
static int fold_scale(const kr_cuda_mem *mem, kr_cuda_op *ops, const unsigned char *folded, int p,
                      int n)
{
    const kr_graph *g = mem->graph;
    const kr_node *mul = &g->nodes[p], *conv = &g->nodes[n];
    int t = conv->inputs[0];
    if (mul->op != KR_OP_MUL || mul->n_inputs != 2 || mul->inputs[0] < 0 || mul->inputs[1] < 0 ||
        ops[p].out != kr_cuda_mem_ptr(mem, t) || !private_tensor(g, t))
        return 0;
    const kr_tensor *tt = &g->tensors[t];
    int side = -1; /* the operand of the output's shape; the other: [1,1,1,C] */
    for (int i = 0; i < 2; i++) {
        const kr_tensor *a = &g->tensors[mul->inputs[i]], *b = &g->tensors[mul->inputs[1 - i]];
        if (!kr_tensor_is_const(a) && a->rank == 4 && tt->rank == 4 && b->rank == 4 &&
            a->dims[0] == tt->dims[0] && a->dims[1] == tt->dims[1] && a->dims[2] == tt->dims[2] &&
            a->dims[3] == tt->dims[3] && b->dims[0] == 1 && b->dims[1] == 1 && b->dims[2] == 1 &&
            b->dims[3] == tt->dims[3])
            side = i;
    }
    if (side < 0)
        return 0;
    int src[3] = {mul->inputs[side], mul->inputs[1 - side], -1};
    if (ops[p].residual) { /* the ADD folded into the MUL: its other operand */
        for (int q = p + 1; q < n && src[2] < 0; q++)
            if (folded[q] && g->nodes[q].op == KR_OP_ADD && g->nodes[q].outputs[0] == t)
                src[2] = g->nodes[q].inputs[0] == mul->outputs[0] ? g->nodes[q].inputs[1]
                                                                   : g->nodes[q].inputs[0];
        if (src[2] < 0 || kr_cuda_mem_ptr(mem, src[2]) != ops[p].residual)
            return 0;
    }
    size_t bytes = kr_cuda_mem_bytes(mem, conv->outputs[0]);
    for (int i = 0; i < 3; i++)
        if (src[i] >= 0 && ptr_overlaps(mem, ops[n].out, bytes, src[i]))
            return 0;
    kr_cuda_op trial = ops[n];
    const kr_tensor *vt = &g->tensors[src[1]];
    trial.scale.src = kr_cuda_mem_ptr(mem, src[0]);
    trial.scale.vec = ops[p].in[1 - side];
    trial.scale.addend = ops[p].residual;
    trial.scale.vec_stride = kr_tensor_is_const(vt) ? 0 : vt->dims[3];
    trial.scale.pixels = tt->dims[1] * tt->dims[2];
    trial.scale.act = mul->activation;
    trial.scale.post = ops[p].post;
    if (!kr_cuda_conv_2d_pw_mma_fits(&trial))
        return 0;
    ops[n] = trial;
    return 1;
}

/* The RESIZE_BILINEAR fold of fusion.h into the pointwise CONV_2D @p n from node @p p, the node
 * run just before it: 1 if done. */
static int fold_resize(const kr_cuda_mem *mem, kr_cuda_op *ops, int p, int n)
{
    const kr_graph *g = mem->graph;
    const kr_node *rz = &g->nodes[p], *conv = &g->nodes[n];
    int t = conv->inputs[0];
    if (rz->op != KR_OP_RESIZE_BILINEAR || rz->n_inputs < 1 || rz->inputs[0] < 0 ||
        rz->activation != KR_ACT_NONE || ops[p].residual || ops[p].out != kr_cuda_mem_ptr(mem, t) ||
        !private_tensor(g, t))
        return 0;
    const int x = rz->inputs[0];
    const kr_tensor *xt = &g->tensors[x], *tt = &g->tensors[t];
    if (kr_tensor_is_const(xt) || xt->rank != 4 || tt->rank != 4 || xt->dims[0] != tt->dims[0] ||
        xt->dims[3] != tt->dims[3] ||
        ptr_overlaps(mem, ops[n].out, kr_cuda_mem_bytes(mem, conv->outputs[0]), x))
        return 0;
    kr_cuda_op trial = ops[n];
    trial.rs.src = kr_cuda_mem_ptr(mem, x);
    trial.rs.ih = xt->dims[1], trial.rs.iw = xt->dims[2];
    trial.rs.align = rz->p.resize.align_corners;
    trial.rs.half = rz->p.resize.half_pixel_centers;
    trial.rs.post = ops[p].post;
    if (!kr_cuda_conv_2d_pw_mma_fits(&trial))
        return 0;
    ops[n] = trial;
    return 1;
}

/* The next node after @p n that runs (not folded), or -1. */
static int next_run(const kr_graph *g, const unsigned char *folded, int n)
{
    for (int q = n + 1; q < g->n_nodes; q++)
        if (!folded[q])
            return q;
    return -1;
}

/* A PAD of the channels only (zeros after them) of a rank-4 tensor. */
static int channel_pad(const kr_graph *g, const kr_node *pad)
{
    const kr_tensor *x = &g->tensors[pad->inputs[0]], *y = &g->tensors[pad->outputs[0]];
    if (pad->op != KR_OP_PAD || x->rank != 4 || y->rank != 4 ||
        pad->p.pad.mode != KR_PAD_CONSTANT || pad->p.pad.value != 0.0f)
        return 0;
    for (int d = 0; d < 4; d++)
        if (pad->p.pad.before[d] != 0 || (d < 3 && pad->p.pad.after[d] != 0) ||
            (d < 3 && x->dims[d] != y->dims[d]))
            return 0;
    return 1;
}

/* The ADD fold of fusion.h into the pointwise CONV_2D @p n: the ADD run next (or after a channel
 * PAD of its other operand, run next), which reads the convolution's output (read by nobody
 * else) and a tensor ready before the convolution: 1 if done. */
static int fold_add(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded, int n)
{
    const kr_graph *g = mem->graph;
    const kr_node *conv = &g->nodes[n];
    const int tc = conv->outputs[0];
    int a = next_run(g, folded, n), p = -1;
    if (a < 0 || ops[n].residual || ops[n].scale.src || ops[n].rs.src ||
        ops[n].out != kr_cuda_mem_ptr(mem, tc) || !private_tensor(g, tc))
        return 0;
    const int in = conv->inputs[0];
    if (g->nodes[a].op == KR_OP_PAD) {
        p = a;
        a = next_run(g, folded, p);
        if (a < 0 || !channel_pad(g, &g->nodes[p]) || ops[p].post != KR_CUDA_POST_NONE ||
            ops[p].residual || !private_tensor(g, g->nodes[p].outputs[0]))
            return 0;
    }
    const kr_node *add = &g->nodes[a];
    /* (the ADD writes its own output, or that of the activation folded into it) */
    if (add->op != KR_OP_ADD || add->n_inputs != 2 || ops[a].residual || !ops[a].out ||
        (add->inputs[0] != tc && add->inputs[1] != tc))
        return 0;
    int other = add->inputs[0] == tc ? add->inputs[1] : add->inputs[0];
    if (other == tc || other < 0)
        return 0;
    if (p >= 0) { /* the PAD's output is the other operand; its input is read instead */
        if (other != g->nodes[p].outputs[0])
            return 0;
        other = g->nodes[p].inputs[0];
    }
    const kr_tensor *ot = &g->tensors[other], *ct = &g->tensors[tc],
                    *at = &g->tensors[add->outputs[0]];
    if (kr_tensor_is_const(ot) || ot->rank != 4 || at->rank != 4 || ct->rank != 4 ||
        (ot->producer >= n && ot->producer >= 0))
        return 0;
    for (int d = 0; d < 4; d++)
        if (at->dims[d] != ct->dims[d] || (d < 3 && ot->dims[d] != ct->dims[d]) ||
            (d == 3 && (ot->dims[3] > ct->dims[3] || (p < 0 && ot->dims[3] != ct->dims[3]))))
            return 0;
    /* the convolution then writes the ADD's output: not over its input, nor over the ADD's
     * other operand */
    const void *out = ops[a].out;
    const size_t bytes = kr_cuda_mem_bytes(mem, add->outputs[0]);
    if (ptr_overlaps(mem, out, bytes, other) || ptr_overlaps(mem, out, bytes, in))
        return 0;
    kr_cuda_op trial = ops[n];
    trial.out = ops[a].out;
    trial.add.src = kr_cuda_mem_ptr(mem, other);
    trial.add.ch = ot->dims[3];
    trial.add.act = add->activation;
    trial.add.post = ops[a].post;
    if (!kr_cuda_conv_2d_pw_mma_fits(&trial))
        return 0;
    ops[n] = trial;
    folded[a] = 1;
    if (p >= 0)
        folded[p] = 1;
    return p >= 0 ? 2 : 1;
}

/* The gathered concatenation fold of fusion.h into the 1x1 one-output CONV_2D @p n from the
 * CONCATENATION @p c run just before it: 1 if done. The maps are read where they lie (each may
 * have other readers); the convolution must not write over them. */
static int fold_gcat(const kr_cuda_mem *mem, kr_cuda_op *ops, int c, int n)
{
    const kr_graph *g = mem->graph;
    const kr_node *cat = &g->nodes[c], *conv = &g->nodes[n];
    const int k = cat->outputs[0];
    const kr_tensor *kt = &g->tensors[k];
    if (cat->op != KR_OP_CONCATENATION || cat->n_inputs < 2 || cat->n_inputs > KR_CUDA_GCAT_MAX ||
        kt->rank != 4 || cat->p.concat.axis != 3 || conv->inputs[0] != k ||
        ops[c].post != KR_CUDA_POST_NONE || ops[c].out != kr_cuda_mem_ptr(mem, k) ||
        !private_tensor(g, k) || kt->dims[3] != cat->n_inputs)
        return 0;
    kr_cuda_op trial = ops[n];
    const size_t bytes = kr_cuda_mem_bytes(mem, conv->outputs[0]);
    for (int i = 0; i < cat->n_inputs; i++) {
        const int t = cat->inputs[i];
        const kr_tensor *st = t >= 0 ? &g->tensors[t] : NULL;
        if (!st || st->rank != 4 || kr_tensor_is_const(st) || st->dims[0] != kt->dims[0] ||
            st->dims[1] != kt->dims[1] || st->dims[2] != kt->dims[2] || st->dims[3] != 1 ||
            ptr_overlaps(mem, ops[n].out, bytes, t))
            return 0;
        trial.gcat.src[i] = kr_cuda_mem_ptr(mem, t);
    }
    trial.gcat.n = cat->n_inputs;
    if (!kr_cuda_conv_2d_one_gather_fits(&trial))
        return 0;
    ops[n] = trial;
    return 1;
}

/* (fusion.h) */
int kr_cuda_fuse_gathers(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    int n_folded = 0;
    for (int n = 1; n < g->n_nodes; n++) {
        const kr_node *conv = &g->nodes[n];
        if (conv->op != KR_OP_CONV_2D || folded[n] || ops[n].cat.src[0] || ops[n].pool.src ||
            ops[n].gcat.n || !ops[n].w16)
            continue;
        int c = n - 1;
        while (c >= 0 && folded[c])
            c--;
        if (c < 0)
            continue;
        if (fold_pool(mem, ops, c, n) || fold_scale(mem, ops, folded, c, n) ||
            fold_resize(mem, ops, c, n) || fold_gcat(mem, ops, c, n)) {
            folded[c] = 1;
            n_folded++;
            continue;
        }
        const kr_node *cat = &g->nodes[c];
        int k = cat->outputs[0];
        const kr_tensor *kt = &g->tensors[k];
        if (cat->op != KR_OP_CONCATENATION || cat->n_inputs != 2 || kt->rank != 4 ||
            cat->p.concat.axis != 3 || conv->inputs[0] != k || ops[c].post != KR_CUDA_POST_NONE ||
            ops[c].out != kr_cuda_mem_ptr(mem, k) || !private_tensor(g, k))
            continue;
        int rz[2], src[2], ok = 1;
        for (int side = 0; side < 2 && ok; side++) {
            int t = cat->inputs[side];
            const kr_tensor *st = &g->tensors[t];
            ok = t >= 0 && st->rank == 4 && !kr_tensor_is_const(st) && st->dims[0] == kt->dims[0] &&
                 st->dims[1] == kt->dims[1] && st->dims[2] == kt->dims[2];
            if (ok)
                src[side] = cat_source(mem, ops, folded, t, &rz[side]);
        }
        if (!ok || (rz[0] >= 0 && rz[1] >= 0) || src[0] == src[1])
            continue;
        /* the sources must still hold their values when the convolution runs, and it must not
         * write over them: no node from the first folded one to the convolution (itself
         * included) writes their storage */
        int first = c;
        for (int side = 0; side < 2; side++)
            first = rz[side] >= 0 && rz[side] < first ? rz[side] : first;
        const int skip = rz[0] >= 0 ? rz[0] : rz[1];
        for (int q = first; q < n && ok; q++)
            if (!folded[q] && q != c && q != skip)
                ok = !writes_over(mem, ops, q, src);
        /* the residual ADD folded into the convolution may write where a source lies (the
         * planner's slack ends before it: the end of u2netp's RSU blocks, upsample-concatenate-
         * convolve + ADD); then the ADD runs on its own again, which saves one launch less */
        int unfolded = -1;
        const kr_cuda_op keep = ops[n];
        if (ok && writes_over(mem, ops, n, src) && ops[n].residual) {
            unfolded = unfold_residual(mem, ops, folded, n);
            if (unfolded < 0 || writes_over(mem, ops, n, src)) {
                if (unfolded >= 0)
                    folded[unfolded] = 1;
                ops[n] = keep;
                unfolded = -1;
                ok = 0;
            }
        } else if (ok && writes_over(mem, ops, n, src)) {
            ok = 0;
        }
        if (!ok)
            continue;
        kr_cuda_op trial = ops[n];
        const int r = rz[0] >= 0 ? 0 : rz[1] >= 0 ? 1 : -1;
        trial.cat.src[0] = kr_cuda_mem_ptr(mem, src[0]);
        trial.cat.src[1] = kr_cuda_mem_ptr(mem, src[1]);
        trial.cat.c0 = g->tensors[cat->inputs[0]].dims[3];
        trial.cat.h = kt->dims[1], trial.cat.w = kt->dims[2];
        trial.cat.rz = r;
        trial.cat.rh = trial.cat.rw = trial.cat.align = trial.cat.half = 0;
        if (r >= 0) {
            const kr_node *rn = &g->nodes[rz[r]];
            trial.cat.rh = g->tensors[src[r]].dims[1], trial.cat.rw = g->tensors[src[r]].dims[2];
            trial.cat.align = rn->p.resize.align_corners;
            trial.cat.half = rn->p.resize.half_pixel_centers;
        }
        if (!kr_cuda_conv_2d_tc_fits(&trial)) {
            if (unfolded >= 0) { /* put the residual fold back */
                folded[unfolded] = 1;
                ops[n] = keep;
            }
            continue;
        }
        ops[n] = trial;
        folded[c] = 1;
        n_folded += unfolded >= 0 ? 0 : 1; /* the ADD runs again */
        if (r >= 0) {
            folded[rz[r]] = 1;
            n_folded++;
        }
    }
    for (int n = 0; n < g->n_nodes; n++) /* ADDs (+ channel PADs) into pointwise layers */
        if (g->nodes[n].op == KR_OP_CONV_2D && !folded[n] && ops[n].w16 && !ops[n].cat.src[0] &&
            !ops[n].pool.src && !ops[n].gcat.n)
            n_folded += fold_add(mem, ops, folded, n);
    return n_folded;
}

int kr_cuda_fuse(const kr_cuda_mem *mem, int f16, kr_cuda_op *ops, unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        kr_cuda_op *op = &ops[n];
        op->graph = g;
        op->node = node;
        op->batch = mem->batch;
        op->f16 = f16;
        op->caps = mem->caps;
        for (int i = 0; i < node->n_inputs; i++)
            op->in[i] = node->inputs[i] >= 0 ? kr_cuda_mem_ptr(mem, node->inputs[i]) : NULL;
        op->out = kr_cuda_mem_ptr(mem, node->outputs[0]);
        op->post = KR_CUDA_POST_NONE;
        op->scale.src = op->scale.vec = op->scale.addend = NULL;
        op->rs.src = NULL;
        op->add.src = NULL;
        op->w16 = NULL;
        if (node->op == KR_OP_CONV_2D && node->n_inputs > 1 && node->inputs[1] >= 0 &&
            mem->w16_offsets && mem->w16_offsets[node->inputs[1]] != SIZE_MAX)
            op->w16 = mem->weights + mem->w16_offsets[node->inputs[1]];
        op->cat.src[0] = op->cat.src[1] = NULL;
        op->cat.rz = -1;
        op->gcat.n = 0;
        op->pool.src = NULL;
        op->x_f32 = 0;
        op->y_f32 = 0;
    }
    int n_folded = plan_folds(mem, ops, folded);
    n_folded += plan_residual_folds(mem, ops, folded);
    n_folded += plan_pool_folds(mem, ops, folded);
    return n_folded;
}
