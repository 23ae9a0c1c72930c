/*
 * Host side of the persistent schedule (persistent.h): the fused node list -> steps. Beyond
 * the fusion pass's folds (fusion.h) the planner merges across nodes (fuse.c: excitations,
 * activations, resizes, ADDs, pointwise + depthwise pairs, the stem's 1x1 convolution, PADs);
 * this file makes each remaining node's step(s). Every size that shapes the work (a
 * convolution's lanes per output, a pool's pixel slices, tiles) is taken from one batch item,
 * so that an item's arithmetic is the same at every batch size.
 */
#include <stdint.h>
#include <stdlib.h>

#include "nn/cuda/persistent/plan_util.h"
#include "nn/cuda/tuning.h"

/* A BINARY step's operand layout (see persistent.h); NULL if supported. */
static const char *binary(kr_cuda_step *s, const kr_cuda_op *op, size_t esize)
{
    const kr_tensor *a = kr_pp_in(op, 0), *b = kr_pp_in(op, 1), *y = kr_pp_out(op);
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
    int v4 = s->oc % 4 == 0 && kr_pp_aligned(s->x, 4 * esize) && kr_pp_aligned(s->x2, 4 * esize) &&
             kr_pp_aligned(s->y, 4 * esize) && kr_pp_aligned(s->res, 4 * esize) &&
             (s->bmode == 0 || s->cn == 1 || kr_pp_aligned(chan_ptr, 4 * esize));
    s->vec = v4 ? 4 : 1;
    return NULL;
}

/* Step @p s of convolution node @p n reads the input of the spatial PAD folded into it
 * (spad_at): the PAD's zeros are taps outside that input, so the window moves by the PAD's
 * leading rows and columns. */
static void fold_spatial_pad(const kr_pp_ctx *c, int n, kr_cuda_step *s)
{
    if (c->spad_at[n] < 0)
        return;
    const kr_cuda_op *pad = &c->ops[c->spad_at[n]];
    const kr_tensor *x = kr_pp_in(pad, 0);
    s->x = pad->in[0];
    s->ih = x->dims[1], s->iw = x->dims[2];
    s->pt += pad->node->p.pad.before[1];
    s->pl += pad->node->p.pad.before[2];
}

/* The steps of one node (node_steps' cases): @p s has room for two; *count is 1 unless said.
 * Each returns NULL, or what the schedule cannot do. */

static const char *conv_step(kr_pp_ctx *c, int n, kr_cuda_step *s, size_t esize)
{
    const kr_cuda_op *op = &c->ops[n];
    const char *why = kr_pp_conv_like(s, op, n, c->batch, KR_STEP_CONV, 1);
    if (why)
        return why;
    fold_spatial_pad(c, n, s);
    const kr_tensor *w = kr_pp_in(op, 1);
    if (c->se_at[n] >= 0) { /* reads the MUL's full operand, scaled per channel */
        const int m = c->se_at[n];
        kr_pp_set_prologue(c, s, m);
        s->x = c->ops[m].in[c->se_full[n]];
        s->scale_add = c->ops[m].residual; /* a folded ADD after the MUL */
    }
    s->vec = s->ic % 4 == 0 && kr_pp_aligned(s->x, 4 * esize) &&
                     kr_pp_aligned(s->scale_add, 4 * esize) && kr_pp_aligned(s->w, 16)
                 ? 4
                 : 1;
    long long outputs = (long long)s->oh * s->ow * s->oc;
    while (s->split < 32 && outputs * s->split * 2 <= KR_CUDA_SPLIT_BUDGET &&
           4 * s->split * 2 <= s->ic)
        s->split *= 2;
    s->w_tensor = op->node->inputs[1];
    s->group = s->split == 1 && s->oc % 4 == 0 && kr_pp_aligned(s->y, 4 * esize) &&
                       kr_pp_aligned(s->res, 4 * esize) && w->dtype == KR_DTYPE_F32 && w->data
                   ? 4
                   : 1;
    return NULL;
}

static const char *depthwise_step(kr_pp_ctx *c, int n, kr_cuda_step *s, size_t esize)
{
    const char *why = kr_pp_conv_like(s, &c->ops[n], n, c->batch, KR_STEP_DEPTHWISE, 1);
    if (why)
        return why;
    fold_spatial_pad(c, n, s);
    if (s->ic <= 0 || s->oc % s->ic)
        return "a depthwise convolution with an odd channel multiplier";
    s->vec = s->oc == s->ic && s->oc % 4 == 0 && kr_pp_aligned(s->x, 4 * esize) &&
                     kr_pp_aligned(s->y, 4 * esize) && kr_pp_aligned(s->res, 4 * esize) &&
                     kr_pp_aligned(s->w, 16)
                 ? 4
                 : 1;
    return NULL;
}

static const char *tconv_step(kr_pp_ctx *c, int n, kr_cuda_step *s, size_t esize)
{
    const char *why = kr_pp_conv_like(s, &c->ops[n], n, c->batch, KR_STEP_TCONV, 0);
    if (why)
        return why;
    s->vec = s->ic % 4 == 0 && kr_pp_aligned(s->x, 4 * esize) && kr_pp_aligned(s->w, 16) ? 4 : 1;
    return NULL;
}

/* ADD, MUL, PRELU: a folded channel PAD of an ADD's operand (bmode 3), or the operand layout
 * (binary), with an excitation as the per-channel operand where there is one. */
static const char *binary_step(kr_pp_ctx *c, int n, kr_cuda_step *s, size_t esize)
{
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    if (node->n_inputs != 2)
        return "an element-wise operator without two operands";
    kr_pp_common(s, op, n, c->batch, node->op != KR_OP_PRELU); /* (PRELU has no fused activation) */
    s->kind = KR_STEP_BINARY;
    if (c->pad_at[n] >= 0) { /* + a folded channel PAD of its input */
        const kr_cuda_op *pad = &c->ops[c->pad_at[n]];
        const int padded = node->inputs[1] == pad->node->outputs[0];
        s->x = op->in[1 - padded];
        s->x2 = pad->in[0];
        s->bmode = 3;
        s->cn = kr_pp_in(pad, 0)->dims[3];
        s->count = (long long)kr_tensor_elements(kr_pp_out(op));
        s->oc = kr_pp_out(op)->dims[3];
        s->vec = s->oc % 4 == 0 && s->cn % 4 == 0 && kr_pp_aligned(s->x, 4 * esize) &&
                         kr_pp_aligned(s->x2, 4 * esize) && kr_pp_aligned(s->y, 4 * esize) &&
                         kr_pp_aligned(s->res, 4 * esize)
                     ? 4
                     : 1;
        return NULL;
    }
    const char *why = binary(s, op, esize);
    if (why)
        return why;
    if (s->mul == 2 && s->bmode == 2)
        return "a PRELU whose slopes are full and input per channel";
    if (c->se_at[n] >= 0) /* the excitation is the per-channel operand */
        kr_pp_set_prologue(c, s, c->se_at[n]);
    return NULL;
}

/* A standalone RELU, RELU6, HARD_SWISH or LOGISTIC. */
static const char *unary_step(kr_pp_ctx *c, int n, kr_cuda_step *s)
{
    const kr_cuda_op *op = &c->ops[n];
    if (op->post != KR_CUDA_POST_NONE || op->residual)
        return "an activation with a folded epilogue";
    kr_pp_common(s, op, n, c->batch, 0);
    s->kind = KR_STEP_UNARY;
    s->post = (int)kr_cuda_post_of(op->node->op);
    s->count = (long long)kr_tensor_elements(kr_pp_out(op));
    return NULL;
}

/* A global average pool (AVERAGE_POOL_2D or MEAN): a partial step with a pool tail, and the
 * final step unless an excitation's prologue adds the sums (then *count stays 1). */
static const char *pool_steps(kr_pp_ctx *c, int n, kr_cuda_step *s, int *count)
{
    const kr_cuda_op *op = &c->ops[n];
    if (!kr_pp_is_global_pool(op))
        return op->node->op == KR_OP_MEAN ? "a MEAN that is not over H and W"
                                          : "an average pool that is not global";
    if (op->residual)
        return "a pool with a folded residual";
    if (kr_pp_in(op, 0)->dims[3] % 4)
        return "a global pool over a number of channels that is not a multiple of 4";
    kr_pp_common(s, op, n, c->batch, 1);
    kr_pp_window(s, op, 1, 1);
    s->sh = s->sw = 1, s->pt = s->pl = 0; /* not used by the pool; a MEAN has no window */
    s->dh = s->dw = 1;
    s->x2 = op->addend;
    s->kind = KR_STEP_POOL_PARTIAL;
    kr_pp_set_tail(c, s, c->fuse[n] == KR_PP_FUSE_POOL_PARTIAL ? c->tail_at[n] : -1, n,
                   op->addend);
    if (c->fuse[n] != KR_PP_FUSE_POOL_PARTIAL) { /* else an excitation's prologue adds the sums */
        s[1] = s[0];
        s[1].kind = KR_STEP_POOL_FINAL;
        s[1].tail = 0;
        *count = 2;
    }
    return NULL;
}

static const char *resize_step(kr_pp_ctx *c, int n, kr_cuda_step *s, size_t esize)
{
    const kr_cuda_op *op = &c->ops[n];
    const kr_tensor *x = kr_pp_in(op, 0), *y = kr_pp_out(op);
    if (x->rank != 4 || y->rank != 4)
        return "a resize that is not 2-D";
    kr_pp_common(s, op, n, c->batch, 0);
    s->kind = KR_STEP_RESIZE;
    s->ih = x->dims[1], s->iw = x->dims[2], s->ic = x->dims[3];
    s->oh = y->dims[1], s->ow = y->dims[2], s->oc = y->dims[3];
    if (c->se_at[n] >= 0) { /* resizes the MUL's full operand, scales the result */
        kr_pp_set_prologue(c, s, c->se_at[n]);
        s->x = c->ops[c->se_at[n]].in[c->se_full[n]];
    }
    s->align = op->node->p.resize.align_corners;
    s->half = op->node->p.resize.half_pixel_centers;
    s->vec = kr_pp_channel_vec(s, esize);
    return NULL;
}

static const char *maxpool_step(kr_pp_ctx *c, int n, kr_cuda_step *s, size_t esize)
{
    const kr_cuda_op *op = &c->ops[n];
    if (kr_pp_in(op, 0)->rank != 4)
        return "a max pool that is not 2-D";
    kr_pp_common(s, op, n, c->batch, 1);
    kr_pp_window(s, op, op->node->p.window.kernel_h, op->node->p.window.kernel_w);
    s->kind = KR_STEP_MAXPOOL;
    s->vec = kr_pp_channel_vec(s, esize);
    return NULL;
}

static const char *pad_step(kr_pp_ctx *c, int n, kr_cuda_step *s)
{
    const kr_cuda_op *op = &c->ops[n];
    if (!kr_pp_channel_pad(c->g, op->node))
        return "a PAD other than of the channels, after them";
    if (op->residual || op->post != KR_CUDA_POST_NONE)
        return "a PAD with a folded epilogue";
    kr_pp_common(s, op, n, c->batch, 0);
    kr_pp_window(s, op, 1, 1);
    s->kind = KR_STEP_PAD;
    return NULL;
}

static const char *concat_step(kr_pp_ctx *c, int n, kr_cuda_step *s)
{
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    const kr_tensor *y = kr_pp_out(op);
    long long outer = 1;
    for (int d = 1; d < node->p.concat.axis; d++)
        outer *= y->dims[d];
    if (node->n_inputs != 2 || outer != 1)
        return "a CONCATENATION other than of two runs per item";
    if (op->residual || op->post != KR_CUDA_POST_NONE || node->activation != KR_ACT_NONE)
        return "a CONCATENATION with an epilogue";
    kr_pp_common(s, op, n, c->batch, 0);
    s->kind = KR_STEP_CONCAT;
    s->x2 = op->in[1];
    s->count = (long long)kr_tensor_elements(y);
    s->cn = (int)kr_tensor_elements(kr_pp_in(op, 0));
    return NULL;
}

/* A RESHAPE: nothing for a view (*count 0), else a copy. */
static const char *reshape_step(kr_pp_ctx *c, int n, kr_cuda_step *s, int *count)
{
    const kr_cuda_op *op = &c->ops[n];
    if (op->out == op->in[0]) { /* a view: nothing moves */
        *count = 0;
        return NULL;
    }
    kr_pp_common(s, op, n, c->batch, 0);
    s->kind = KR_STEP_COPY;
    s->count = (long long)kr_tensor_elements(kr_pp_out(op));
    return NULL;
}

/* The step(s) of node @p n at @p s (room for two); sets *count (0: nothing to do). Returns
 * NULL, or what the schedule cannot do. */
static const char *node_steps(kr_pp_ctx *c, int n, kr_cuda_step *s, int *count)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    const size_t esize = op->f16 ? 2 : 4;
    *count = 1;
    for (int i = 0; i < node->n_inputs; i++) {
        int t = node->inputs[i];
        if (t >= 0 && !kr_tensor_is_const(&g->tensors[t]) &&
            (double)kr_tensor_elements(&g->tensors[t]) * c->batch >= 2147483647.0)
            return "a tensor of 2^31 or more elements";
    }
    if ((double)kr_tensor_elements(kr_pp_out(op)) * c->batch >= 2147483647.0)
        return "a tensor of 2^31 or more elements";
    if (op->addend && !kr_pp_is_global_pool(op))
        return "an addend outside a pool";
    switch (node->op) {
    case KR_OP_CONV_2D: return conv_step(c, n, s, esize);
    case KR_OP_DEPTHWISE_CONV_2D: return depthwise_step(c, n, s, esize);
    case KR_OP_TRANSPOSE_CONV_BIAS: return tconv_step(c, n, s, esize);
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_PRELU: return binary_step(c, n, s, esize);
    case KR_OP_RELU:
    case KR_OP_RELU6:
    case KR_OP_HARD_SWISH:
    case KR_OP_LOGISTIC: return unary_step(c, n, s);
    case KR_OP_MEAN:
    case KR_OP_AVERAGE_POOL_2D: return pool_steps(c, n, s, count);
    case KR_OP_RESIZE_BILINEAR: return resize_step(c, n, s, esize);
    case KR_OP_MAX_POOL_2D: return maxpool_step(c, n, s, esize);
    case KR_OP_PAD: return pad_step(c, n, s);
    case KR_OP_CONCATENATION: return concat_step(c, n, s);
    case KR_OP_RESHAPE: return reshape_step(c, n, s, count);
    default: return kr_op_name(node->op);
    }
}

const char *kr_cuda_persistent_plan(const kr_graph *g, const kr_cuda_op *ops,
                                    const unsigned char *folded, int batch, kr_cuda_step *steps,
                                    int *n_steps, size_t *scratch_floats)
{
    size_t nn = g->n_nodes ? (size_t)g->n_nodes : 1;
    kr_pp_ctx c = {.g = g, .ops = ops, .folded = folded, .batch = batch};
    c.fuse = calloc(nn, 1);
    c.se_at = calloc(nn, sizeof(int));
    c.se_full = calloc(nn, sizeof(int));
    c.tail_at = calloc(nn, sizeof(int));
    c.tail_add = calloc(nn, sizeof(void *));
    c.se_slices = calloc(nn, sizeof(int));
    c.se_partial_off = calloc(nn, sizeof(size_t));
    c.matches = calloc(nn, sizeof(kr_pp_se_match));
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
        kr_pp_plan_excitations(&c);
        kr_pp_plan_pads(&c);
        for (int n = 0; n < g->n_nodes && !why; n++) {
            int count = 0;
            if (folded[n] || c.fuse[n] == KR_PP_FUSE_SKIP)
                continue;
            if (k > 0 && kr_pp_absorb_depthwise(&c, &steps[k - 1], n)) {
                if (c.tail_at[n] >= 0)
                    kr_pp_set_tail(&c, &steps[k - 1], c.tail_at[n], c.matches[c.tail_at[n]].pool,
                             c.tail_add[n]);
                continue;
            }
            if (k > 0 && kr_pp_absorb_pointwise(&c, &steps[k - 1], n))
                continue;
            if (k > 0 && kr_pp_absorb_activation(&c, &steps[k - 1], n)) {
                if (c.tail_at[n] >= 0) /* the pool's sums: now of the step before */
                    kr_pp_set_tail(&c, &steps[k - 1], c.tail_at[n], c.matches[c.tail_at[n]].pool,
                             c.tail_add[n]);
                continue;
            }
            why = node_steps(&c, n, &steps[k], &count);
            if (!why && count == 1 && c.tail_at[n] >= 0 && steps[k].kind != KR_STEP_POOL_PARTIAL)
                kr_pp_set_tail(&c, &steps[k], c.tail_at[n], c.matches[c.tail_at[n]].pool, c.tail_add[n]);
            if (!why && count == 1 && k > 0 && kr_pp_absorb_resize(&c, &steps[k - 1], &steps[k]))
                count = 0;
            if (!why && count == 1 && k > 0 && c.tail_at[n] < 0 &&
                kr_pp_absorb_add(&c, &steps[k - 1], &steps[k]))
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
    if (kr_pp_readers(g, t) != 1)
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
    if (kr_pp_readers(g, t) != 0)
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
