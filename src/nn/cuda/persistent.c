/*
 * Host side of the persistent schedule (persistent.h): the fused node list -> steps. Every
 * size that shapes the work (a convolution's lanes per output, a pool's pixel slices) is taken
 * from one batch item, so that an item's arithmetic is the same at every batch size.
 */
#include <math.h>
#include <stdint.h>

#include "nn/cuda/persistent.h"

/* Threads the lane split of a convolution aims to fill, per batch item (fixed, not the GPU's
 * size, so that results do not depend on the device). */
#define SPLIT_BUDGET 65536
/* Global pools over more pixels than this take two steps (slice sums, then their sum). */
#define POOL_ONE_STEP_PIXELS 1024
#define POOL_SLICE 16

static int aligned(const void *p, size_t a) { return p == NULL || ((uintptr_t)p % a) == 0; }

static const kr_tensor *in_t(const kr_cuda_op *op, int i)
{
    return &op->graph->tensors[op->node->inputs[i]];
}
static const kr_tensor *out_t(const kr_cuda_op *op)
{
    return &op->graph->tensors[op->node->outputs[0]];
}

static int same_dims(const kr_tensor *a, const kr_tensor *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return 0;
    return 1;
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
    s->mul = op->node->op == KR_OP_MUL;
    s->x2 = op->in[1];
    s->count = (long long)kr_tensor_elements(y);
    s->oc = y->rank ? y->dims[y->rank - 1] : 1;
    int ca = kr_tensor_is_const(a), cb = kr_tensor_is_const(b);
    if (!ca && !cb && same_dims(a, y) && same_dims(b, y)) {
        s->bmode = 0;
    } else {
        const kr_tensor *full = a, *chan = b;
        s->bmode = 1;
        if (!(!ca && same_dims(a, y))) {
            full = b, chan = a;
            s->bmode = 2;
        }
        if (kr_tensor_is_const(full) || !same_dims(full, y) || chan->rank > y->rank)
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
    const kr_tensor *x = in_t(op, 0), *y = out_t(op);
    const kr_window_params *p = &op->node->p.window;
    return x->rank == 4 && y->rank == 4 && y->dims[1] == 1 && y->dims[2] == 1 &&
           p->pad_top <= 0 && p->pad_left <= 0 && p->kernel_h - p->pad_top >= x->dims[1] &&
           p->kernel_w - p->pad_left >= x->dims[2];
}

const char *kr_cuda_persistent_plan(const kr_graph *g, const kr_cuda_op *ops,
                                    const unsigned char *folded, int batch, kr_cuda_step *steps,
                                    int *n_steps, size_t *scratch_floats)
{
    int k = 0;
    size_t scratch = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        if (folded[n])
            continue;
        const kr_cuda_op *op = &ops[n];
        const kr_node *node = op->node;
        size_t esize = op->f16 ? 2 : 4;
        for (int i = 0; i < node->n_inputs; i++) {
            const kr_tensor *t = &g->tensors[node->inputs[i] >= 0 ? node->inputs[i] : 0];
            if (node->inputs[i] >= 0 && !kr_tensor_is_const(t) &&
                (double)kr_tensor_elements(t) * batch >= 2147483647.0)
                return "a tensor of 2^31 or more elements";
        }
        if ((double)kr_tensor_elements(out_t(op)) * batch >= 2147483647.0)
            return "a tensor of 2^31 or more elements";
        if (op->addend && node->op != KR_OP_AVERAGE_POOL_2D)
            return "an addend outside a pool";
        kr_cuda_step *s = &steps[k];
        switch (node->op) {
        case KR_OP_CONV_2D: {
            const kr_tensor *w = in_t(op, 1);
            if (in_t(op, 0)->rank != 4 || w->rank != 4)
                return "a convolution that is not 2-D";
            common(s, op, n, batch, 1);
            s->kind = KR_STEP_CONV;
            window(s, op, w->dims[1], w->dims[2]);
            s->w = op->in[1];
            s->bias = node->n_inputs > 2 ? op->in[2] : NULL;
            s->vec = s->ic % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->w, 16) ? 4 : 1;
            long long outputs = (long long)s->oh * s->ow * s->oc;
            while (s->split < 32 && outputs * s->split * 2 <= SPLIT_BUDGET &&
                   4 * s->split * 2 <= s->ic)
                s->split *= 2;
            break;
        }
        case KR_OP_DEPTHWISE_CONV_2D: {
            const kr_tensor *w = in_t(op, 1);
            if (in_t(op, 0)->rank != 4 || w->rank != 4)
                return "a depthwise convolution that is not 2-D";
            common(s, op, n, batch, 1);
            s->kind = KR_STEP_DEPTHWISE;
            window(s, op, w->dims[1], w->dims[2]);
            s->w = op->in[1];
            s->bias = node->n_inputs > 2 ? op->in[2] : NULL;
            if (s->ic <= 0 || s->oc % s->ic)
                return "a depthwise convolution with an odd channel multiplier";
            s->vec = s->oc == s->ic && s->oc % 4 == 0 && aligned(s->x, 4 * esize) &&
                             aligned(s->y, 4 * esize) && aligned(s->res, 4 * esize) &&
                             aligned(s->w, 16)
                         ? 4
                         : 1;
            break;
        }
        case KR_OP_TRANSPOSE_CONV_BIAS: {
            const kr_tensor *w = in_t(op, 1);
            if (in_t(op, 0)->rank != 4 || w->rank != 4)
                return "a transpose convolution that is not 2-D";
            common(s, op, n, batch, 0);
            s->kind = KR_STEP_TCONV;
            window(s, op, w->dims[1], w->dims[2]);
            s->w = op->in[1];
            s->bias = node->n_inputs > 2 ? op->in[2] : NULL;
            s->vec = s->ic % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->w, 16) ? 4 : 1;
            break;
        }
        case KR_OP_ADD:
        case KR_OP_MUL: {
            if (node->n_inputs != 2)
                return "an element-wise operator without two operands";
            common(s, op, n, batch, 1);
            s->kind = KR_STEP_BINARY;
            const char *why = binary(s, op, esize);
            if (why)
                return why;
            break;
        }
        case KR_OP_RELU:
        case KR_OP_RELU6:
        case KR_OP_HARD_SWISH:
        case KR_OP_LOGISTIC:
            common(s, op, n, batch, 0);
            s->kind = KR_STEP_UNARY;
            s->post = node->op == KR_OP_RELU        ? KR_CUDA_POST_RELU
                      : node->op == KR_OP_RELU6     ? KR_CUDA_POST_RELU6
                      : node->op == KR_OP_HARD_SWISH ? KR_CUDA_POST_HARD_SWISH
                                                    : KR_CUDA_POST_LOGISTIC;
            if (op->post != KR_CUDA_POST_NONE || op->residual)
                return "an activation with a folded epilogue";
            s->count = (long long)kr_tensor_elements(out_t(op));
            break;
        case KR_OP_AVERAGE_POOL_2D: {
            if (!is_global_pool(op))
                return "an average pool that is not global";
            if (op->residual)
                return "a pool with a folded residual";
            common(s, op, n, batch, 1);
            window(s, op, 1, 1);
            s->x2 = op->addend;
            int pixels = s->ih * s->iw;
            if (pixels <= POOL_ONE_STEP_PIXELS) {
                s->kind = KR_STEP_POOL;
                break;
            }
            s->kind = KR_STEP_POOL_PARTIAL;
            s->slice = POOL_SLICE;
            s->slices = (pixels + POOL_SLICE - 1) / POOL_SLICE;
            s->scratch_off = scratch;
            scratch += (size_t)batch * s->slices * s->ic;
            steps[k + 1] = *s;
            steps[k + 1].kind = KR_STEP_POOL_FINAL;
            k++;
            break;
        }
        case KR_OP_RESIZE_BILINEAR: {
            const kr_tensor *x = in_t(op, 0), *y = out_t(op);
            if (x->rank != 4 || y->rank != 4)
                return "a resize that is not 2-D";
            common(s, op, n, batch, 0);
            s->kind = KR_STEP_RESIZE;
            s->ih = x->dims[1], s->iw = x->dims[2], s->ic = x->dims[3];
            s->oh = y->dims[1], s->ow = y->dims[2], s->oc = y->dims[3];
            s->align = node->p.resize.align_corners;
            s->half = node->p.resize.half_pixel_centers;
            s->vec = s->oc % 4 == 0 && aligned(s->x, 4 * esize) && aligned(s->y, 4 * esize) &&
                             aligned(s->res, 4 * esize)
                         ? 4
                         : 1;
            break;
        }
        case KR_OP_RESHAPE:
            if (op->out == op->in[0])
                continue; /* a view: nothing moves */
            common(s, op, n, batch, 0);
            s->kind = KR_STEP_COPY;
            s->count = (long long)kr_tensor_elements(out_t(op));
            break;
        default: return kr_op_name(node->op);
        }
        k++;
    }
    *n_steps = k;
    *scratch_floats = scratch;
    return NULL;
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
