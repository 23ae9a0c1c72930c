/*
 * Host side of the persistent schedule (persistent.h): the fused node list -> steps. Beyond
 * backend.c's folds it merges: squeeze-and-excitation blocks (a pool tail on the producer, the
 * dense layers and the MUL in the consumer: plan_excitations), standalone activations into the
 * step before them (absorb_activation), a depthwise convolution into the pointwise one
 * before it (absorb_depthwise) and a 1x1 convolution into the RGB stem before it
 * (absorb_pointwise). A merge that makes a step read a tensor the memory plan thought
 * dead is made only if the step's output does not overlap it. Every size that shapes the work
 * (a convolution's lanes per output, a pool's pixel slices, tiles) is taken from one batch item,
 * so that an item's arithmetic is the same at every batch size.
 */
#include <stdint.h>
#include <stdlib.h>

#include "nn/cuda/persistent/persistent.h"
#include "nn/cuda/tuning.h"

static int aligned(const void *p, size_t a) { return p == NULL || ((uintptr_t)p % a) == 0; }

static const kr_tensor *in_t(const kr_cuda_op *op, int i)
{
    return &op->graph->tensors[op->node->inputs[i]];
}
static const kr_tensor *out_t(const kr_cuda_op *op)
{
    return &op->graph->tensors[op->node->outputs[0]];
}

static void common(kr_cuda_step *s, const kr_cuda_op *op, int n, int batch, int use_activation)
{
    *s = (kr_cuda_step){0};
    s->node = n;
    s->batch = batch;
    s->x = op->in[0];
    s->y = op->out;
    s->res = op->residual;
    s->post = (int)op->post;
    kr_activation_range(use_activation ? op->node->activation : KR_ACT_NONE, &s->lo, &s->hi);
    s->vec = 1;
    s->split = 1;
}

static void window(kr_cuda_step *s, const kr_cuda_op *op, int kh, int kw)
{
    const kr_window_params *p = &op->node->p.window;
    const kr_tensor *x = in_t(op, 0), *y = out_t(op);
    s->ih = x->dims[1], s->iw = x->dims[2], s->ic = x->dims[3];
    s->oh = y->dims[1], s->ow = y->dims[2], s->oc = y->dims[3];
    s->kh = kh, s->kw = kw;
    s->sh = p->stride_h, s->sw = p->stride_w;
    s->dh = p->dilation_h > 0 ? p->dilation_h : 1, s->dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s->pt = p->pad_top, s->pl = p->pad_left;
}

/* A BINARY step's operand layout (see persistent.h); NULL if supported. */
static const char *binary(kr_cuda_step *s, const kr_cuda_op *op, size_t esize)
{
    const kr_tensor *a = in_t(op, 0), *b = in_t(op, 1), *y = out_t(op);
    s->mul = op->node->op == KR_OP_PRELU ? 2 : op->node->op == KR_OP_MUL;
    s->x2 = op->in[1];
    s->count = (long long)kr_tensor_elements(y);
    s->oc = y->rank ? y->dims[y->rank - 1] : 1;
    int ca = kr_tensor_is_const(a), cb = kr_tensor_is_const(b);
    if (!ca && !cb && kr_tensor_same_dims(a, y) && kr_tensor_same_dims(b, y)) {
        s->bmode = 0;
    } else {
        const kr_tensor *full = a, *chan = b;
        s->bmode = 1;
        if (!(!ca && kr_tensor_same_dims(a, y))) {
            full = b, chan = a;
            s->bmode = 2;
        }
        if (kr_tensor_is_const(full) || !kr_tensor_same_dims(full, y) || chan->rank > y->rank)
            return "a broadcast other than per channel";
        int shift = y->rank - chan->rank;
        s->cn = 1;
        for (int d = 0; d < chan->rank; d++) {
            int e = chan->dims[d];
            if (e == 1)
                continue;
            if (e != y->dims[d + shift] || d + shift != y->rank - 1)
                return "a broadcast other than per channel";
            s->cn = e;
        }
        s->batched = !kr_tensor_is_const(chan);
        if (s->batched && chan->rank != y->rank)
            return "a broadcast other than per channel";
    }
    const void *chan_ptr = s->bmode == 2 ? s->x : s->x2;
    int v4 = s->oc % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->x2, 4 * esize) &&
             aligned(s->y, 4 * esize) && aligned(s->res, 4 * esize) &&
             (s->bmode == 0 || s->cn == 1 || aligned(chan_ptr, 4 * esize));
    s->vec = v4 ? 4 : 1;
    return NULL;
}

static int is_global_pool(const kr_cuda_op *op)
{
    return kr_cuda_is_global_pool(op->graph, op->node);
}

/* Pixels per slice and slices per item of a global pool over @p pixels pixels of @p c channels:
 * a block's threads split into lanes per 4-channel group (block_colsum), each lane adds
 * KR_CUDA_POOL_ROWS_PER_THREAD pixels, and the final sum (or a prologue) adds the slices. */
static void pool_slices(int pixels, int c, int *slice, int *slices)
{
    int gw = c / 4 < KR_CUDA_PERSISTENT_THREADS ? c / 4 : KR_CUDA_PERSISTENT_THREADS;
    int lanes = KR_CUDA_PERSISTENT_THREADS / (gw > 0 ? gw : 1);
    *slice = KR_CUDA_POOL_ROWS_PER_THREAD * lanes;
    *slices = (pixels + *slice - 1) / *slice;
}

/* ---- squeeze-and-excitation fusion ---------------------------------------------------------- */

enum { FUSE_NONE = 0, FUSE_SKIP, FUSE_POOL_PARTIAL };

typedef struct se_match {
    int pool, layers, fc[2], post[2]; /* fc[0] reads the pool */
    int skip[4], n_skip;              /* nodes done in the consumer's prologue */
} se_match;

/* The node whose kernel writes tensor @p t: its producer, or the node it was folded into. */
static int writer(const kr_graph *g, const unsigned char *folded, int t)
{
    int q = g->tensors[t].producer;
    while (q >= 0 && folded[q])
        q--;
    return q;
}

static int readers(const kr_graph *g, int t)
{
    int r = 0;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < g->nodes[n].n_inputs; i++)
            r += g->nodes[n].inputs[i] == t;
    return r;
}

/* Whether a RESHAPE view of tensor @p t exists. */
static int has_view(const kr_graph *g, int t)
{
    for (int v = 0; v < g->n_tensors; v++)
        if (g->tensors[v].view_of == t)
            return 1;
    return 0;
}

/* A tensor only @p reader-side code ever sees: activation, read once, no view, not an output. */
static int private_tensor(const kr_graph *g, int t)
{
    const kr_tensor *tt = &g->tensors[t];
    return !kr_tensor_is_const(tt) && tt->graph_output < 0 && tt->graph_input < 0 &&
           readers(g, t) == 1 && !has_view(g, t);
}

/* Whether MUL node @p m multiplies a full tensor by global pool -> 1x1 conv [-> 1x1 conv]
 * (each conv with its activation, folded or a standalone activation node after it), every
 * intermediate read only along that chain. Sets @p se and @p full (the full operand's side). */
static int match_se(const kr_graph *g, const kr_cuda_op *ops, const unsigned char *folded, int m,
                    int batch, se_match *se, int *full)
{
    const kr_node *mul = &g->nodes[m];
    if (mul->op != KR_OP_MUL || folded[m] || mul->n_inputs != 2)
        return 0;
    const kr_tensor *y = &g->tensors[mul->outputs[0]];
    if (y->rank != 4)
        return 0;
    for (int side = 0; side < 2; side++) {
        int t = mul->inputs[side];
        const kr_tensor *tt = &g->tensors[t], *ft = &g->tensors[mul->inputs[1 - side]];
        if (kr_tensor_is_const(ft) || !kr_tensor_same_dims(ft, y) || tt->rank != 4 || tt->dims[0] != 1 ||
            tt->dims[1] != 1 || tt->dims[2] != 1 || tt->dims[3] != y->dims[3])
            continue;
        *se = (se_match){.pool = -1};
        int cur = t, ok = 1, widths = 0;
        while (ok) {
            if (!private_tensor(g, cur)) {
                ok = 0;
                break;
            }
            int q = writer(g, folded, cur);
            if (q < 0) {
                ok = 0;
                break;
            }
            const kr_cuda_op *op = &ops[q];
            const kr_node *node = op->node;
            int pending = KR_CUDA_POST_NONE;
            if ((int)kr_cuda_post_of(node->op) != KR_CUDA_POST_NONE && op->post == KR_CUDA_POST_NONE &&
                !op->residual && se->n_skip < 4) { /* a standalone activation after a dense */
                pending = (int)kr_cuda_post_of(node->op);
                se->skip[se->n_skip++] = q;
                cur = node->inputs[0];
                if (!private_tensor(g, cur) || (q = writer(g, folded, cur)) < 0) {
                    ok = 0;
                    break;
                }
                op = &ops[q];
                node = op->node;
            }
            if (node->op == KR_OP_CONV_2D && se->layers < 2 && !op->residual &&
                !(pending && op->post != KR_CUDA_POST_NONE) && se->n_skip < 4) {
                const kr_tensor *x = &g->tensors[node->inputs[0]], *w = &g->tensors[node->inputs[1]];
                if (x->rank != 4 || x->dims[1] != 1 || x->dims[2] != 1 || w->rank != 4 ||
                    w->dims[1] != 1 || w->dims[2] != 1) {
                    ok = 0;
                    break;
                }
                /* layers are found last first */
                se->fc[1] = se->fc[0], se->post[1] = se->post[0];
                se->fc[0] = q;
                se->post[0] = pending ? pending : (int)op->post;
                se->layers++;
                widths += w->dims[0];
                se->skip[se->n_skip++] = q;
                cur = node->inputs[0];
                continue;
            }
            if (pending || se->layers == 0 || !is_global_pool(op) || op->residual ||
                op->post != KR_CUDA_POST_NONE || node->activation != KR_ACT_NONE) {
                ok = 0;
                break;
            }
            se->pool = q;
            widths += g->tensors[node->outputs[0]].dims[3];
            break;
        }
        if (!ok || se->pool < 0 || (long long)batch * widths > KR_CUDA_SE_FLOATS)
            continue;
        *full = 1 - side;
        return 1;
    }
    return 0;
}

/* The planner's state across nodes. */
typedef struct plan_ctx {
    const kr_graph *g;
    const kr_cuda_op *ops;
    const unsigned char *folded;
    int batch;
    unsigned char *fuse;   /* per node: FUSE_* */
    int *se_at;            /* per node: the MUL whose excitation it consumes, or -1 */
    int *se_full;          /* per node: that MUL's full operand (input side) */
    int *tail_at;          /* per node: the MUL whose pool its step's tail computes, or -1 */
    const void **tail_add; /* per node: the other operand of that pool's folded ADD, or NULL */
    int *se_slices;        /* per MUL node: the slices of its pool's tail */
    size_t *se_partial_off; /* per MUL node: the offset of its pool's sums in scratch */
    se_match *matches;     /* per MUL node */
    int *pad_at;           /* per ADD node: the channel PAD folded into it (bmode 3), or -1 */
    int *spad_at;          /* per conv node: the spatial PAD folded into its window, or -1 */
    size_t scratch;        /* floats of scratch so far */
} plan_ctx;

/* The pool tail of step @p s (persistent.h): its slicing from the step's own work split; for an
 * excitation (@p m >= 0, the MUL), where its consumer's prologue finds the sums. */
static void set_tail(plan_ctx *c, kr_cuda_step *s, int m, int pool, const void *add)
{
    const kr_graph *g = c->g;
    const kr_tensor *px = &g->tensors[c->ops[pool].node->inputs[0]];
    const int pixels = px->dims[1] * px->dims[2], C = px->dims[3];
    int threads = 1, units = C; /* per unit, per pixel */
    switch (s->kind) {
    case KR_STEP_CONV:
        threads = s->split;
        units = s->group == 4 ? s->oc / 4 : s->oc;
        break;
    case KR_STEP_DEPTHWISE: units = s->oc / s->vec; break;
    case KR_STEP_UNARY: /* an element per unit; its output shape, for the tail */
        s->oh = px->dims[1], s->ow = px->dims[2], s->oc = C;
        break;
    default: break; /* POOL_PARTIAL: slices of its own */
    }
    if (s->kind == KR_STEP_EXPAND_DW) { /* the slices are its tiles */
        s->tail_pixels = s->tail_units = 0;
        s->tail_slices = ((s->oh + s->tile - 1) / s->tile) * ((s->ow + s->tile - 1) / s->tile);
    } else if (s->kind == KR_STEP_POOL_PARTIAL) {
        pool_slices(pixels, C, &s->tail_pixels, &s->tail_slices);
    } else {
        int per_pass = KR_CUDA_PERSISTENT_THREADS / threads / units;
        s->tail_pixels = per_pass > 1 ? per_pass : 1; /* whole pixels, one pass of the block */
        s->tail_slices = (pixels + s->tail_pixels - 1) / s->tail_pixels;
    }
    s->tail = 1;
    s->tail_units = units;
    s->tail_c = C;
    s->tail_add = add;
    s->tail_partial_off = c->scratch;
    c->scratch += (size_t)c->batch * s->tail_slices * C;
    if (m >= 0) {
        c->se_slices[m] = s->tail_slices;
        c->se_partial_off[m] = s->tail_partial_off;
    }
}

/* The squeeze-and-excitation prologue of step @p s, the consumer of MUL @p m's excitation. */
static void set_prologue(plan_ctx *c, kr_cuda_step *s, int m)
{
    const kr_graph *g = c->g;
    const se_match *se = &c->matches[m];
    const kr_tensor *px = &g->tensors[c->ops[se->pool].node->inputs[0]];
    s->se_layers = se->layers;
    s->se_c = px->dims[3];
    s->se_pixels = px->dims[1] * px->dims[2];
    s->se_slices = c->se_slices[m];
    s->se_partial_off = c->se_partial_off[m];
    for (int l = 0; l < se->layers; l++) {
        const kr_cuda_op *fc = &c->ops[se->fc[l]];
        s->se_out[l] = g->tensors[fc->node->inputs[1]].dims[0];
        s->se_w[l] = fc->in[1];
        s->se_b[l] = fc->node->n_inputs > 2 ? fc->in[2] : NULL;
        kr_activation_range(fc->node->activation, &s->se_lo[l], &s->se_hi[l]);
        s->se_post[l] = se->post[l];
    }
}

/* The CONV_2D, DEPTHWISE_CONV_2D and transpose convolution set-up: shapes, window, weights. */
static const char *conv_like(kr_cuda_step *s, const kr_cuda_op *op, int n, int batch, int kind,
                             int use_activation)
{
    const kr_tensor *w = in_t(op, 1);
    if (in_t(op, 0)->rank != 4 || w->rank != 4)
        return "a convolution that is not 2-D";
    common(s, op, n, batch, use_activation);
    s->kind = kind;
    window(s, op, w->dims[1], w->dims[2]);
    s->w = op->in[1];
    s->bias = op->node->n_inputs > 2 ? op->in[2] : NULL;
    return NULL;
}

/* 4 when step @p s can work on 4 channels at a time (oc a multiple of 4, x, y and the
 * residual 16-byte aligned at @p esize bytes per element), else 1. */
static int channel_vec(const kr_cuda_step *s, size_t esize)
{
    return s->oc % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->y, 4 * esize) &&
                   aligned(s->res, 4 * esize)
               ? 4
               : 1;
}

/* Whether PAD node @p node pads only the channels of an NHWC tensor, after them. */
static int channel_pad(const kr_graph *g, const kr_node *node)
{
    const kr_tensor *x = &g->tensors[node->inputs[0]];
    if (x->rank != 4)
        return 0;
    for (int d = 0; d < 4; d++)
        if (node->p.pad.before[d] || (d < 3 && node->p.pad.after[d]))
            return 0;
    return node->p.pad.after[3] > 0;
}

/* Whether PAD node @p node pads only H and W of an NHWC tensor. */
static int spatial_pad(const kr_graph *g, const kr_node *node)
{
    const kr_tensor *x = &g->tensors[node->inputs[0]];
    return x->rank == 4 && !node->p.pad.before[0] && !node->p.pad.after[0] &&
           !node->p.pad.before[3] && !node->p.pad.after[3] && node->p.pad.before[1] >= 0 &&
           node->p.pad.before[2] >= 0 && node->p.pad.after[1] >= 0 && node->p.pad.after[2] >= 0;
}

/* Step @p s of convolution node @p n reads the input of the spatial PAD folded into it
 * (spad_at): the PAD's zeros are taps outside that input, so the window moves by the PAD's
 * leading rows and columns. */
static void fold_spatial_pad(const plan_ctx *c, int n, kr_cuda_step *s)
{
    if (c->spad_at[n] < 0)
        return;
    const kr_cuda_op *pad = &c->ops[c->spad_at[n]];
    const kr_tensor *x = in_t(pad, 0);
    s->x = pad->in[0];
    s->ih = x->dims[1], s->iw = x->dims[2];
    s->pt += pad->node->p.pad.before[1];
    s->pl += pad->node->p.pad.before[2];
}

/* The step(s) of node @p n at @p s (room for two); sets *count (0: nothing to do). Returns
 * NULL, or what the schedule cannot do. */
static const char *node_steps(plan_ctx *c, int n, kr_cuda_step *s, int *count)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    const size_t esize = op->f16 ? 2 : 4;
    const int batch = c->batch;
    const char *why = NULL;
    *count = 1;
    for (int i = 0; i < node->n_inputs; i++) {
        int t = node->inputs[i];
        if (t >= 0 && !kr_tensor_is_const(&g->tensors[t]) &&
            (double)kr_tensor_elements(&g->tensors[t]) * batch >= 2147483647.0)
            return "a tensor of 2^31 or more elements";
    }
    if ((double)kr_tensor_elements(out_t(op)) * batch >= 2147483647.0)
        return "a tensor of 2^31 or more elements";
    if (op->addend && !is_global_pool(op))
        return "an addend outside a pool";
    switch (node->op) {
    case KR_OP_CONV_2D: {
        if ((why = conv_like(s, op, n, batch, KR_STEP_CONV, 1)))
            return why;
        fold_spatial_pad(c, n, s);
        const kr_tensor *w = in_t(op, 1);
        if (c->se_at[n] >= 0) { /* reads the MUL's full operand, scaled per channel */
            const int m = c->se_at[n];
            set_prologue(c, s, m);
            s->x = c->ops[m].in[c->se_full[n]];
            s->scale_add = c->ops[m].residual; /* a folded ADD after the MUL */
        }
        s->vec = s->ic % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->scale_add, 4 * esize) &&
                         aligned(s->w, 16)
                     ? 4
                     : 1;
        long long outputs = (long long)s->oh * s->ow * s->oc;
        while (s->split < 32 && outputs * s->split * 2 <= KR_CUDA_SPLIT_BUDGET &&
               4 * s->split * 2 <= s->ic)
            s->split *= 2;
        s->w_tensor = node->inputs[1];
        s->group = s->split == 1 && s->oc % 4 == 0 && aligned(s->y, 4 * esize) &&
                           aligned(s->res, 4 * esize) && w->dtype == KR_DTYPE_F32 && w->data
                       ? 4
                       : 1;
        return NULL;
    }
    case KR_OP_DEPTHWISE_CONV_2D:
        if ((why = conv_like(s, op, n, batch, KR_STEP_DEPTHWISE, 1)))
            return why;
        fold_spatial_pad(c, n, s);
        if (s->ic <= 0 || s->oc % s->ic)
            return "a depthwise convolution with an odd channel multiplier";
        s->vec = s->oc == s->ic && s->oc % 4 == 0 && aligned(s->x, 4 * esize) &&
                         aligned(s->y, 4 * esize) && aligned(s->res, 4 * esize) &&
                         aligned(s->w, 16)
                     ? 4
                     : 1;
        return NULL;
    case KR_OP_TRANSPOSE_CONV_BIAS:
        if ((why = conv_like(s, op, n, batch, KR_STEP_TCONV, 0)))
            return why;
        s->vec = s->ic % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->w, 16) ? 4 : 1;
        return NULL;
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_PRELU:
        if (node->n_inputs != 2)
            return "an element-wise operator without two operands";
        common(s, op, n, batch, node->op != KR_OP_PRELU); /* (PRELU has no fused activation) */
        s->kind = KR_STEP_BINARY;
        if (c->pad_at[n] >= 0) { /* + a folded channel PAD of its input */
            const kr_cuda_op *pad = &c->ops[c->pad_at[n]];
            const int padded = node->inputs[1] == pad->node->outputs[0];
            s->x = op->in[1 - padded];
            s->x2 = pad->in[0];
            s->bmode = 3;
            s->cn = in_t(pad, 0)->dims[3];
            s->count = (long long)kr_tensor_elements(out_t(op));
            s->oc = out_t(op)->dims[3];
            s->vec = s->oc % 4 == 0 && s->cn % 4 == 0 && aligned(s->x, 4 * esize) &&
                             aligned(s->x2, 4 * esize) && aligned(s->y, 4 * esize) &&
                             aligned(s->res, 4 * esize)
                         ? 4
                         : 1;
            return NULL;
        }
        if ((why = binary(s, op, esize)))
            return why;
        if (s->mul == 2 && s->bmode == 2)
            return "a PRELU whose slopes are full and input per channel";
        if (c->se_at[n] >= 0) /* the excitation is the per-channel operand */
            set_prologue(c, s, c->se_at[n]);
        return NULL;
    case KR_OP_RELU:
    case KR_OP_RELU6:
    case KR_OP_HARD_SWISH:
    case KR_OP_LOGISTIC:
        if (op->post != KR_CUDA_POST_NONE || op->residual)
            return "an activation with a folded epilogue";
        common(s, op, n, batch, 0);
        s->kind = KR_STEP_UNARY;
        s->post = (int)kr_cuda_post_of(node->op);
        s->count = (long long)kr_tensor_elements(out_t(op));
        return NULL;
    case KR_OP_MEAN:
    case KR_OP_AVERAGE_POOL_2D:
        if (!is_global_pool(op))
            return node->op == KR_OP_MEAN ? "a MEAN that is not over H and W"
                                          : "an average pool that is not global";
        if (op->residual)
            return "a pool with a folded residual";
        if (in_t(op, 0)->dims[3] % 4)
            return "a global pool over a number of channels that is not a multiple of 4";
        common(s, op, n, batch, 1);
        window(s, op, 1, 1);
        s->sh = s->sw = 1, s->pt = s->pl = 0; /* not used by the pool; a MEAN has no window */
        s->dh = s->dw = 1;
        s->x2 = op->addend;
        s->kind = KR_STEP_POOL_PARTIAL;
        set_tail(c, s, c->fuse[n] == FUSE_POOL_PARTIAL ? c->tail_at[n] : -1, n, op->addend);
        if (c->fuse[n] != FUSE_POOL_PARTIAL) { /* else an excitation's prologue adds the sums */
            s[1] = s[0];
            s[1].kind = KR_STEP_POOL_FINAL;
            s[1].tail = 0;
            *count = 2;
        }
        return NULL;
    case KR_OP_RESIZE_BILINEAR: {
        const kr_tensor *x = in_t(op, 0), *y = out_t(op);
        if (x->rank != 4 || y->rank != 4)
            return "a resize that is not 2-D";
        common(s, op, n, batch, 0);
        s->kind = KR_STEP_RESIZE;
        s->ih = x->dims[1], s->iw = x->dims[2], s->ic = x->dims[3];
        s->oh = y->dims[1], s->ow = y->dims[2], s->oc = y->dims[3];
        if (c->se_at[n] >= 0) { /* resizes the MUL's full operand, scales the result */
            set_prologue(c, s, c->se_at[n]);
            s->x = c->ops[c->se_at[n]].in[c->se_full[n]];
        }
        s->align = node->p.resize.align_corners;
        s->half = node->p.resize.half_pixel_centers;
        s->vec = channel_vec(s, esize);
        return NULL;
    }
    case KR_OP_MAX_POOL_2D: {
        const kr_tensor *x = in_t(op, 0);
        if (x->rank != 4)
            return "a max pool that is not 2-D";
        common(s, op, n, batch, 1);
        window(s, op, node->p.window.kernel_h, node->p.window.kernel_w);
        s->kind = KR_STEP_MAXPOOL;
        s->vec = channel_vec(s, esize);
        return NULL;
    }
    case KR_OP_PAD: {
        if (!channel_pad(g, node))
            return "a PAD other than of the channels, after them";
        if (op->residual || op->post != KR_CUDA_POST_NONE)
            return "a PAD with a folded epilogue";
        common(s, op, n, batch, 0);
        window(s, op, 1, 1);
        s->kind = KR_STEP_PAD;
        return NULL;
    }
    case KR_OP_CONCATENATION: {
        const kr_tensor *y = out_t(op);
        long long outer = 1;
        for (int d = 1; d < node->p.concat.axis; d++)
            outer *= y->dims[d];
        if (node->n_inputs != 2 || outer != 1)
            return "a CONCATENATION other than of two runs per item";
        if (op->residual || op->post != KR_CUDA_POST_NONE || node->activation != KR_ACT_NONE)
            return "a CONCATENATION with an epilogue";
        common(s, op, n, batch, 0);
        s->kind = KR_STEP_CONCAT;
        s->x2 = op->in[1];
        s->count = (long long)kr_tensor_elements(y);
        s->cn = (int)kr_tensor_elements(in_t(op, 0));
        return NULL;
    }
    case KR_OP_RESHAPE:
        if (op->out == op->in[0]) { /* a view: nothing moves */
            *count = 0;
            return NULL;
        }
        common(s, op, n, batch, 0);
        s->kind = KR_STEP_COPY;
        s->count = (long long)kr_tensor_elements(out_t(op));
        return NULL;
    default: return kr_op_name(node->op);
    }
}

/* The node after @p n that has a kernel of its own (folded nodes skipped), or g->n_nodes. */
static int next_step_node(const kr_graph *g, const unsigned char *folded, int n)
{
    for (n++; n < g->n_nodes && folded[n]; n++) {
    }
    return n;
}

/* The node before @p n with a step of its own (folded and fused nodes skipped), or -1. */
static int prev_step_node(const plan_ctx *c, int n)
{
    for (n--; n >= 0 && (c->folded[n] || c->fuse[n] == FUSE_SKIP); n--) {
    }
    return n;
}

/* Whether [a, a + na) and [b, b + nb) share a byte (device addresses). */
static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && x < y + nb && y < x + na;
}

/* Bytes of activation tensor @p t in the arena: its elements at the batch, in the instance's
 * element type (half for f16: sizing at 4 bytes would see overlaps between neighbours). */
static size_t arena_bytes(const plan_ctx *c, int t)
{
    return kr_tensor_elements(&c->g->tensors[t]) * (size_t)c->batch * (c->ops[0].f16 ? 2 : 4);
}

/* Bytes of @p elements elements of one item at the batch, in the instance's element type. */
static size_t item_bytes(const plan_ctx *c, size_t elements)
{
    return elements * (size_t)c->batch * (c->ops[0].f16 ? 2 : 4);
}

/* Where the excitation of MUL @p m (no activation or post of its own; @p full its full
 * operand) can be consumed instead of the MUL's own step: the next node, when it alone reads
 * the MUL's output and is a convolution (input scaling, + the MUL's folded ADD) or, without a
 * folded ADD, a resize. That node then reads the MUL's operands itself, which the memory plan
 * did not foresee (backend.c checked its folds against the MUL's output): the node's output
 * must not overlap them, or a block could overwrite what another still reads. Returns that
 * node, or @p m. */
static int excitation_consumer(const plan_ctx *c, int m, int full)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *ops = c->ops;
    const kr_node *mul = &g->nodes[m];
    if (mul->activation != KR_ACT_NONE || ops[m].post != KR_CUDA_POST_NONE)
        return m;
    int nx = next_step_node(g, c->folded, m);
    if (nx >= g->n_nodes || ops[nx].in[0] != ops[m].out)
        return m;
    int t = g->nodes[nx].inputs[0], q = g->tensors[t].producer;
    if (!private_tensor(g, t) || q < m || q >= nx)
        return m;
    kr_op op = g->nodes[nx].op;
    if (op != KR_OP_CONV_2D && !(op == KR_OP_RESIZE_BILINEAR && !ops[m].residual))
        return m;
    size_t in_bytes = arena_bytes(c, t); /* the operands have the MUL output's shape */
    size_t out_bytes = arena_bytes(c, g->nodes[nx].outputs[0]);
    if (overlap(ops[nx].out, out_bytes, ops[m].in[full], in_bytes) ||
        overlap(ops[nx].out, out_bytes, ops[m].residual, in_bytes))
        return m;
    return nx;
}

/* Squeeze-and-excitation blocks (persistent.h): the step writing the pooled tensor, when it is
 * the one right before the pool and can (a convolution or an activation whose slice of outputs
 * fits the tile), or else the pool's own step, gets the pool tail that writes the sums; the
 * excitation's consumer computes it in its prologue; marks what has no step of its own. */
static void plan_excitations(plan_ctx *c)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *ops = c->ops;
    for (int m = 0; m < g->n_nodes; m++) {
        c->se_at[m] = c->tail_at[m] = -1;
        c->se_full[m] = 0;
        c->tail_add[m] = NULL;
    }
    for (int m = 0; m < g->n_nodes; m++) {
        se_match se = {.pool = -1};
        int full = 0;
        if (!match_se(g, ops, c->folded, m, c->batch, &se, &full))
            continue;
        c->matches[m] = se;
        int at = excitation_consumer(c, m, full);
        if (at != m)
            c->fuse[m] = FUSE_SKIP;
        for (int i = 0; i < se.n_skip; i++)
            c->fuse[se.skip[i]] = FUSE_SKIP;
        c->se_at[at] = m;
        c->se_full[at] = full;
        /* the pool's producer: the step right before it, writing one of its operands */
        const kr_cuda_op *pool = &ops[se.pool];
        int q = prev_step_node(c, se.pool);
        kr_op qop = q >= 0 ? g->nodes[q].op : KR_OP_ADD;
        int kind_ok = qop == KR_OP_CONV_2D || qop == KR_OP_DEPTHWISE_CONV_2D ||
                      ((int)kr_cuda_post_of(qop) != KR_CUDA_POST_NONE &&
                       ops[q].post == KR_CUDA_POST_NONE && !ops[q].residual);
        const int channels = g->tensors[pool->node->inputs[0]].dims[3];
        if (q >= 0 && kind_ok && channels <= KR_CUDA_TILE_FLOATS && c->tail_at[q] < 0 &&
            c->fuse[q] != FUSE_POOL_PARTIAL &&
            (ops[q].out == pool->in[0] || (pool->addend && ops[q].out == pool->addend))) {
            c->fuse[se.pool] = FUSE_SKIP;
            c->tail_at[q] = m;
            c->tail_add[q] = ops[q].out == pool->in[0] ? pool->addend : pool->in[0];
        } else {
            c->fuse[se.pool] = FUSE_POOL_PARTIAL;
            c->tail_at[se.pool] = m;
        }
    }
}

/* A standalone activation node @p n (RELU, RELU6, HARD_SWISH, LOGISTIC) done as the post
 * function of the step before it, @p prev, when that step writes the activation's input and
 * nothing else reads it (the backend folds only an activation right after its producer in node
 * order; an excitation's skipped nodes may sit between). The step then writes the activation's
 * output, which must not overlap what the step reads. Returns whether it did. */
static int absorb_activation(const plan_ctx *c, kr_cuda_step *prev, int n)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    int post = (int)kr_cuda_post_of(op->node->op);
    if (post == KR_CUDA_POST_NONE || op->post != KR_CUDA_POST_NONE || op->residual ||
        op->node->n_inputs != 1 || prev->post != KR_CUDA_POST_NONE ||
        (prev->res && !prev->res_pre) ||
        prev->res_mid || prev->tail || prev->y != op->in[0] ||
        !private_tensor(g, op->node->inputs[0]))
        return 0;
    switch (prev->kind) {
    case KR_STEP_CONV:
    case KR_STEP_DEPTHWISE:
    case KR_STEP_TCONV:
    case KR_STEP_BINARY:
    case KR_STEP_RESIZE:
    case KR_STEP_EXPAND_DW: break;
    case KR_STEP_CONV_PW: /* its kernel has no pool tail to take the activation's */
        if (c->tail_at[n] >= 0)
            return 0;
        break;
    default: return 0;
    }
    size_t out_bytes = arena_bytes(c, op->node->outputs[0]);
    size_t in_bytes = prev->kind == KR_STEP_BINARY
                          ? item_bytes(c, (size_t)prev->count)
                          : item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    if (overlap(op->out, out_bytes, prev->x, in_bytes) ||
        overlap(op->out, out_bytes, prev->x2, in_bytes) ||
        overlap(op->out, out_bytes, prev->scale_add, in_bytes))
        return 0;
    prev->post = post;
    prev->y = op->out;
    return 1;
}

/* A RESIZE step @p prev whose output only the 1x1 group-4 convolution @p cur reads is done by
 * the convolution as it loads its input (persistent.h, rz); @p cur then takes @p prev's place.
 * Not when the resize scales by an excitation, adds a residual, has a pool tail, or when the
 * convolution's output overlaps the resize's input (the memory plan may put it there: that
 * tensor's life ended at the resize). Returns 1 if merged. */
static int absorb_resize(const plan_ctx *c, kr_cuda_step *prev, const kr_cuda_step *cur)
{
    const kr_graph *g = c->g;
    if (prev->kind != KR_STEP_RESIZE || prev->se_layers || prev->res || prev->tail ||
        prev->post != KR_CUDA_POST_NONE || prev->vec != 4 || prev->node < 0 ||
        !private_tensor(g, g->nodes[prev->node].outputs[0]))
        return 0;
    if (cur->kind != KR_STEP_CONV || cur->group != 4 || cur->kh != 1 || cur->kw != 1 ||
        cur->sh != 1 || cur->sw != 1 || cur->pt || cur->pl || cur->scale_add || cur->se_layers ||
        cur->x != prev->y || cur->ic != prev->oc || cur->ic % 4 || cur->oh != prev->oh ||
        cur->ow != prev->ow)
        return 0;
    size_t out_bytes = arena_bytes(c, g->nodes[cur->node].outputs[0]);
    size_t in_bytes = item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    if (overlap(cur->y, out_bytes, prev->x, in_bytes))
        return 0;
    kr_cuda_step d = *cur;
    d.x = prev->x;
    d.rz = 1;
    d.rz_ih = prev->ih, d.rz_iw = prev->iw;
    d.align = prev->align, d.half = prev->half;
    *prev = d;
    return 1;
}

/* An ADD step @p cur, one of whose operands only the convolution step @p prev writes and only
 * the ADD reads, is done by that convolution: the other operand becomes its residual, added
 * before the ADD's activation (res_pre; BlazeFace's blocks are relu(conv + x), which the
 * backend's residual fold, activation first, does not take); with a folded channel PAD
 * (bmode 3) the residual has the PAD input's cn channels (res_c). Not when the convolution has
 * a residual, tail, activation or post function of its own, when the group-4 path would read
 * the residual across the channel boundary or unaligned, or when the ADD's output overlaps
 * what the convolution reads (its input, or the residual other than in place). @p cur then
 * takes no step. Returns 1 if merged. */
static int absorb_add(const plan_ctx *c, kr_cuda_step *prev, const kr_cuda_step *cur)
{
    const kr_graph *g = c->g;
    const size_t esize = c->ops[0].f16 ? 2 : 4;
    if (cur->kind != KR_STEP_BINARY || cur->mul || (cur->bmode != 0 && cur->bmode != 3) ||
        cur->res || cur->se_layers || prev->kind != KR_STEP_CONV || prev->res || prev->tail ||
        prev->post != KR_CUDA_POST_NONE || prev->lo > -3e38f || prev->hi < 3e38f ||
        prev->y_f32 || prev->node < 0 || prev->oc != cur->oc || prev->rz ||
        (prev->group == 4 && (prev->kh != 1 || prev->kw != 1)))
        return 0; /* (the kernel has res_pre for 1x1 group-4 and split convolutions) */
    const void *res;
    if (prev->y == cur->x)
        res = cur->x2;
    else if (cur->bmode == 0 && prev->y == cur->x2)
        res = cur->x;
    else
        return 0;
    const int res_c = cur->bmode == 3 ? cur->cn : 0;
    if (prev->group == 4 && (res_c % 4 || !aligned(res, 4 * esize)))
        return 0;
    if (!private_tensor(g, g->nodes[prev->node].outputs[0]))
        return 0;
    size_t out_bytes = arena_bytes(c, g->nodes[cur->node].outputs[0]);
    size_t in_bytes = item_bytes(c, (size_t)(prev->rz ? prev->rz_ih * prev->rz_iw
                                                      : prev->ih * prev->iw) * prev->ic);
    size_t res_bytes = res_c ? item_bytes(c, (size_t)prev->oh * prev->ow * res_c) : out_bytes;
    if (overlap(cur->y, out_bytes, prev->x, in_bytes) ||
        overlap(cur->y, out_bytes, prev->scale_add, in_bytes) ||
        (overlap(cur->y, out_bytes, res, res_bytes) && (res_c || cur->y != res)))
        return 0;
    prev->y = cur->y;
    prev->res = res;
    prev->res_c = res_c;
    prev->res_pre = 1;
    prev->lo = cur->lo, prev->hi = cur->hi, prev->post = cur->post;
    return 1;
}

/* Gives 1x1 convolution node @p n to step @p prev when prev is a 3x3 convolution on 3 channels
 * (the models' RGB stem) whose output n reads, pixel by pixel: the two become one CONV_PW step
 * (selfie: one step and one grid barrier fewer); the stem's output is stored only if other
 * nodes read it too (selfie's decoder does). Refused where n has anything folded into it (a
 * residual, an excitation, a pool tail, a pad), where n's output channels differ from the
 * stem's (the one shape run on the GPU is selfie's 16 -> 16; a version for other shapes and
 * 1x1 first convolutions was tried and dropped, BENCHMARKS.md), where their weights do not
 * fit the step's shared memory, where the stem's output is a graph output or has a view, or
 * where n's output overlaps the stem's input or output. Returns whether it did. */
static int absorb_pointwise(const plan_ctx *c, kr_cuda_step *prev, int n)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    const size_t esize = op->f16 ? 2 : 4;
    if (node->op != KR_OP_CONV_2D || prev->kind != KR_STEP_CONV || prev->group != 4 ||
        prev->kh != 3 || prev->kw != 3 || prev->ic != 3 || prev->oc % 4 || prev->res ||
        prev->tail || prev->rz || prev->se_layers || prev->scale_add || prev->y_f32 ||
        op->in[0] != prev->y || op->residual || op->addend || c->fuse[n] != FUSE_NONE ||
        c->se_at[n] >= 0 || c->tail_at[n] >= 0 || c->pad_at[n] >= 0 || c->spad_at[n] >= 0)
        return 0;
    const int t = node->inputs[0];
    if (g->tensors[t].graph_output >= 0 || has_view(g, t))
        return 0;
    kr_cuda_step d;
    if (conv_like(&d, op, n, c->batch, KR_STEP_CONV, 1) || d.kh != 1 || d.kw != 1 ||
        d.sh != 1 || d.sw != 1 || d.pt > 0 || d.pl > 0 || d.ic != prev->oc ||
        d.oc != prev->oc || d.oh != prev->oh || d.ow != prev->ow || !aligned(d.y, 4 * esize))
        return 0;
    if (d.ic * d.oc > KR_CUDA_PERSISTENT_THREADS || /* the kernel's pass: NT / (oc / 4) pixels */
        KR_CUDA_PERSISTENT_THREADS / (d.oc / 4) * d.ic + d.ic * d.oc + d.oc > KR_CUDA_MID_FLOATS)
        return 0;
    size_t in_bytes = item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    size_t out_bytes = arena_bytes(c, node->outputs[0]);
    if (overlap(d.y, out_bytes, prev->x, in_bytes) ||
        overlap(d.y, out_bytes, prev->y, arena_bytes(c, t)))
        return 0;
    prev->y1 = readers(g, t) > 1 ? prev->y : NULL;
    /* the stem's half stays in prev's fields (its epilogue moves to e_*), n's is added */
    prev->kind = KR_STEP_CONV_PW;
    prev->node = d.node;
    prev->cn = prev->oc;
    prev->e_bias = prev->bias;
    prev->e_lo = prev->lo, prev->e_hi = prev->hi, prev->e_post = prev->post;
    prev->oc = d.oc;
    prev->w2 = d.w;
    prev->bias2 = d.bias;
    prev->bias = NULL;
    prev->lo = d.lo, prev->hi = d.hi, prev->post = d.post;
    prev->y = d.y;
    return 1;
}

/* Output tile side and channels per block of an EXPAND_DW step with @p oc channels; 0 when
 * its halo's pointwise outputs take more than one pass of a block (measured: a 17x17 halo for
 * 8x8 outputs at stride 2 made the pair slower than two steps) or its tile does not fit. */
static void expand_dw_tiling(const kr_cuda_step *d, int oc, int *tile, int *chan)
{
    int t = d->oh <= 16 ? 4 : 8, g = oc % 8 == 0 ? 8 : 4;
    int hh = (t - 1) * d->sh + (d->kh - 1) * d->dh + 1, hw = (t - 1) * d->sw + (d->kw - 1) * d->dw + 1;
    if (hh * hw * g > KR_CUDA_MID_FLOATS || t * t * g > KR_CUDA_TILE_FLOATS ||
        hh * hw * (g / 4) > KR_CUDA_PERSISTENT_THREADS ||
        (d->kh * d->kw + 1) * g > KR_CUDA_DWW_FLOATS)
        t = g = 0;
    *tile = t;
    *chan = g;
}

/* A depthwise convolution node @p n done in the step before it, @p prev, when that is a
 * pointwise convolution (1x1, stride 1, no residual or tail) whose output only the depthwise
 * convolution reads (and its folded residual ADD): the two become one EXPAND_DW step and the
 * pointwise output is never stored. The depthwise output must not overlap what the step reads.
 * Returns whether it did. */
static int absorb_depthwise(const plan_ctx *c, kr_cuda_step *prev, int n)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    if (node->op != KR_OP_DEPTHWISE_CONV_2D || prev->kind != KR_STEP_CONV || prev->kh != 1 ||
        prev->kw != 1 || prev->sh != 1 || prev->sw != 1 || prev->pt > 0 || prev->pl > 0 ||
        prev->res || prev->tail || prev->rz || prev->vec != 4 || prev->oc % 4 ||
        op->in[0] != prev->y || op->addend)
        return 0;
    const kr_tensor *x = &g->tensors[node->inputs[0]], *w = &g->tensors[node->inputs[1]];
    const kr_tensor *pw = &g->tensors[prev->w_tensor], *y = &g->tensors[node->outputs[0]];
    const int res_mid = op->residual && op->residual == prev->y;
    int readers_ok = readers(g, node->inputs[0]) == 1 + res_mid;
    if (!readers_ok || x->graph_output >= 0 || x->rank != 4 || w->rank != 4 || y->rank != 4 ||
        y->dims[3] != x->dims[3] || pw->dtype != KR_DTYPE_F32 || !pw->data)
        return 0;
    if (has_view(g, node->inputs[0]))
        return 0;
    kr_cuda_step d;
    if (conv_like(&d, op, n, c->batch, KR_STEP_DEPTHWISE, 1))
        return 0;
    expand_dw_tiling(&d, d.oc, &d.tile, &d.chan);
    size_t in_bytes = item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    size_t out_bytes = arena_bytes(c, node->outputs[0]);
    if (!d.tile || overlap(op->out, out_bytes, prev->x, in_bytes) ||
        overlap(op->out, out_bytes, prev->scale_add, in_bytes) ||
        (!res_mid && op->residual && overlap(op->out, out_bytes, op->residual, out_bytes)))
        return 0;
    /* the pointwise half, from prev */
    d.kind = KR_STEP_EXPAND_DW;
    d.x = prev->x;
    d.ic = prev->ic;
    d.scale_add = prev->scale_add;
    d.w_tensor = prev->w_tensor;
    d.group = 4;
    d.split = 1;
    d.vec = 4;
    d.e_bias = prev->bias;
    d.e_lo = prev->lo, d.e_hi = prev->hi, d.e_post = prev->post;
    d.se_layers = prev->se_layers; /* an excitation's prologue scaling the input */
    d.se_c = prev->se_c, d.se_slices = prev->se_slices, d.se_pixels = prev->se_pixels;
    d.se_partial_off = prev->se_partial_off;
    for (int l = 0; l < 2; l++) {
        d.se_out[l] = prev->se_out[l];
        d.se_w[l] = prev->se_w[l], d.se_b[l] = prev->se_b[l];
        d.se_lo[l] = prev->se_lo[l], d.se_hi[l] = prev->se_hi[l], d.se_post[l] = prev->se_post[l];
    }
    /* the depthwise half: conv_like set its window, weights, epilogue and output */
    d.w2 = d.w;
    d.bias2 = d.bias;
    d.w = prev->w;
    d.bias = NULL;
    d.res_mid = res_mid;
    if (res_mid)
        d.res = NULL;
    *prev = d;
    return 1;
}

/* A channel PAD read only by an ADD of its output's shape is done by that ADD (BINARY bmode
 * 3: the padded operand read with its own channels, zero beyond), unless the ADD's output
 * overlaps the PAD's input (the memory plan may put it there: that tensor's life ended at the
 * PAD). */
static void plan_pads(plan_ctx *c)
{
    const kr_graph *g = c->g;
    for (int p = 0; p < g->n_nodes; p++) { /* spatial PADs into the convolution reading them */
        const kr_node *pad = &g->nodes[p];
        if (pad->op != KR_OP_PAD || c->folded[p] || !spatial_pad(g, pad) ||
            c->ops[p].residual || c->ops[p].post != KR_CUDA_POST_NONE ||
            !private_tensor(g, pad->outputs[0]))
            continue;
        for (int r = p + 1; r < g->n_nodes; r++) {
            const kr_node *rd = &g->nodes[r];
            if (rd->n_inputs < 1 || rd->inputs[0] != pad->outputs[0])
                continue;
            if (!c->folded[r] &&
                (rd->op == KR_OP_CONV_2D || rd->op == KR_OP_DEPTHWISE_CONV_2D)) {
                c->fuse[p] = FUSE_SKIP;
                c->spad_at[r] = p;
            }
            break;
        }
    }
    for (int p = 0; p < g->n_nodes; p++) {
        const kr_node *pad = &g->nodes[p];
        if (pad->op != KR_OP_PAD || c->folded[p] || !channel_pad(g, pad) ||
            c->ops[p].residual || c->ops[p].post != KR_CUDA_POST_NONE)
            continue;
        const int t = pad->outputs[0];
        if (!private_tensor(g, t))
            continue;
        for (int a = p + 1; a < g->n_nodes; a++) {
            const kr_node *add = &g->nodes[a];
            if (add->op != KR_OP_ADD || add->n_inputs != 2 ||
                (add->inputs[0] != t && add->inputs[1] != t))
                continue;
            const int other = add->inputs[add->inputs[0] == t];
            const kr_tensor *o = &g->tensors[other], *y = &g->tensors[add->outputs[0]];
            size_t in_bytes = item_bytes(c, kr_tensor_elements(&g->tensors[pad->inputs[0]]));
            if (!c->folded[a] && other != t && !kr_tensor_is_const(o) &&
                kr_tensor_same_dims(o, y) && kr_tensor_same_dims(&g->tensors[t], y) &&
                !overlap(c->ops[a].out, arena_bytes(c, add->outputs[0]), c->ops[p].in[0],
                         in_bytes)) {
                c->fuse[p] = FUSE_SKIP;
                c->pad_at[a] = p;
            }
            break;
        }
    }
}

const char *kr_cuda_persistent_plan(const kr_graph *g, const kr_cuda_op *ops,
                                    const unsigned char *folded, int batch, kr_cuda_step *steps,
                                    int *n_steps, size_t *scratch_floats)
{
    size_t nn = g->n_nodes ? (size_t)g->n_nodes : 1;
    plan_ctx c = {.g = g, .ops = ops, .folded = folded, .batch = batch};
    c.fuse = calloc(nn, 1);
    c.se_at = calloc(nn, sizeof(int));
    c.se_full = calloc(nn, sizeof(int));
    c.tail_at = calloc(nn, sizeof(int));
    c.tail_add = calloc(nn, sizeof(void *));
    c.se_slices = calloc(nn, sizeof(int));
    c.se_partial_off = calloc(nn, sizeof(size_t));
    c.matches = calloc(nn, sizeof(se_match));
    c.pad_at = malloc(nn * sizeof(int));
    c.spad_at = malloc(nn * sizeof(int));
    const char *why = NULL;
    int k = 0;
    if (!c.fuse || !c.se_at || !c.se_full || !c.tail_at || !c.tail_add || !c.se_slices ||
        !c.se_partial_off || !c.matches || !c.pad_at || !c.spad_at) {
        why = "out of memory";
    } else {
        for (size_t i = 0; i < nn; i++)
            c.pad_at[i] = c.spad_at[i] = -1;
        plan_excitations(&c);
        plan_pads(&c);
        for (int n = 0; n < g->n_nodes && !why; n++) {
            int count = 0;
            if (folded[n] || c.fuse[n] == FUSE_SKIP)
                continue;
            if (k > 0 && absorb_depthwise(&c, &steps[k - 1], n)) {
                if (c.tail_at[n] >= 0)
                    set_tail(&c, &steps[k - 1], c.tail_at[n], c.matches[c.tail_at[n]].pool,
                             c.tail_add[n]);
                continue;
            }
            if (k > 0 && absorb_pointwise(&c, &steps[k - 1], n))
                continue;
            if (k > 0 && absorb_activation(&c, &steps[k - 1], n)) {
                if (c.tail_at[n] >= 0) /* the pool's sums: now of the step before */
                    set_tail(&c, &steps[k - 1], c.tail_at[n], c.matches[c.tail_at[n]].pool,
                             c.tail_add[n]);
                continue;
            }
            why = node_steps(&c, n, &steps[k], &count);
            if (!why && count == 1 && c.tail_at[n] >= 0 && steps[k].kind != KR_STEP_POOL_PARTIAL)
                set_tail(&c, &steps[k], c.tail_at[n], c.matches[c.tail_at[n]].pool, c.tail_add[n]);
            if (!why && count == 1 && k > 0 && absorb_resize(&c, &steps[k - 1], &steps[k]))
                count = 0;
            if (!why && count == 1 && k > 0 && c.tail_at[n] < 0 &&
                absorb_add(&c, &steps[k - 1], &steps[k]))
                count = 0;
            k += count;
        }
    }
    *n_steps = why ? 0 : k;
    *scratch_floats = why ? 0 : c.scratch;
    free(c.fuse);
    free(c.se_at);
    free(c.se_full);
    free(c.tail_at);
    free(c.tail_add);
    free(c.se_slices);
    free(c.se_partial_off);
    free(c.matches);
    free(c.pad_at);
    free(c.spad_at);
    return why;
}

int kr_cuda_persistent_input_step(const kr_graph *g, int t, const void *t_arena,
                                  const kr_cuda_step *steps, int n)
{
    if (readers(g, t) != 1)
        return -1;
    for (int i = 0; i < n; i++) {
        const kr_cuda_step *s = &steps[i];
        if (s->x != t_arena)
            continue;
        int ok = (s->kind == KR_STEP_CONV || s->kind == KR_STEP_CONV_PW) && s->group == 4 &&
                 s->kh == s->kw &&
                 (s->kh == 3 || s->kh == 5) && s->ic == 3 && !s->scale_add && !s->se_layers;
        return ok ? i : -1;
    }
    return -1;
}

int kr_cuda_persistent_output_step(const kr_graph *g, int t, const void *t_arena,
                                   const kr_cuda_step *steps, int n)
{
    if (readers(g, t) != 0)
        return -1;
    /* the last step writing there produces the output: a graph output lives to the end, so no
     * step after its producer writes there; steps before it that write there (the memory plan
     * reuses the place; the f16 arena does for selfie) wrote tensors that are dead by then */
    int last = -1;
    for (int i = 0; i < n; i++)
        if (steps[i].y == t_arena)
            last = i;
    if (last < 0 || steps[last].kind != KR_STEP_TCONV || steps[last].tail ||
        steps[last].x == t_arena)
        return -1;
    return last;
}

void kr_cuda_persistent_bind(kr_cuda_step *steps, int n, float *scratch)
{
    for (int i = 0; i < n; i++) {
        kr_cuda_step *s = &steps[i];
        s->tail_partial = s->tail || s->kind == KR_STEP_POOL_FINAL ? scratch + s->tail_partial_off
                                                                   : NULL;
        s->se_partial = s->se_layers ? scratch + s->se_partial_off : NULL;
    }
}

void kr_cuda_persistent_convert(kr_cuda_step *s, int to_f16, const void *src, void *dst,
                                size_t count)
{
    *s = (kr_cuda_step){0};
    s->kind = to_f16 ? KR_STEP_TO_F16 : KR_STEP_TO_F32;
    s->node = -1;
    s->batch = 1;
    s->count = (long long)count;
    s->x = src;
    s->y = dst;
}

void kr_cuda_persistent_copy(kr_cuda_step *s, int node, int batch, const void *src, void *dst,
                             size_t count)
{
    *s = (kr_cuda_step){0};
    s->kind = KR_STEP_COPY;
    s->node = node;
    s->batch = batch;
    s->count = (long long)count;
    s->x = src;
    s->y = dst;
}
