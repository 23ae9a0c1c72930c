/*
 * The persistent planner's state and helpers (plan_util.h).
 */
#include "nn/cuda/persistent/plan_util.h"

#include "nn/cuda/tuning.h"

void kr_pp_common(kr_cuda_step *s, const kr_cuda_op *op, int n, int batch, int use_activation)
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

void kr_pp_window(kr_cuda_step *s, const kr_cuda_op *op, int kh, int kw)
{
    const kr_window_params *p = &op->node->p.window;
    const kr_tensor *x = kr_pp_in(op, 0), *y = kr_pp_out(op);
    s->ih = x->dims[1], s->iw = x->dims[2], s->ic = x->dims[3];
    s->oh = y->dims[1], s->ow = y->dims[2], s->oc = y->dims[3];
    s->kh = kh, s->kw = kw;
    s->sh = p->stride_h, s->sw = p->stride_w;
    s->dh = p->dilation_h > 0 ? p->dilation_h : 1, s->dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s->pt = p->pad_top, s->pl = p->pad_left;
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

int kr_pp_readers(const kr_graph *g, int t)
{
    int r = 0;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < g->nodes[n].n_inputs; i++)
            r += g->nodes[n].inputs[i] == t;
    return r;
}

/* Whether a RESHAPE view of tensor @p t exists. */
int kr_pp_has_view(const kr_graph *g, int t)
{
    for (int v = 0; v < g->n_tensors; v++)
        if (g->tensors[v].view_of == t)
            return 1;
    return 0;
}

/* A tensor only @p reader-side code ever sees: activation, read once, no view, not an output. */
int kr_pp_private(const kr_graph *g, int t)
{
    const kr_tensor *tt = &g->tensors[t];
    return !kr_tensor_is_const(tt) && tt->graph_output < 0 && tt->graph_input < 0 &&
           kr_pp_readers(g, t) == 1 && !kr_pp_has_view(g, t);
}


/* The pool tail of step @p s (persistent.h): its slicing from the step's own work split; for an
 * excitation (@p m >= 0, the MUL), where its consumer's prologue finds the sums. */
void kr_pp_set_tail(kr_pp_ctx *c, kr_cuda_step *s, int m, int pool, const void *add)
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
void kr_pp_set_prologue(kr_pp_ctx *c, kr_cuda_step *s, int m)
{
    const kr_graph *g = c->g;
    const kr_pp_se_match *se = &c->matches[m];
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
const char *kr_pp_conv_like(kr_cuda_step *s, const kr_cuda_op *op, int n, int batch, int kind,
                             int use_activation)
{
    const kr_tensor *w = kr_pp_in(op, 1);
    if (kr_pp_in(op, 0)->rank != 4 || w->rank != 4)
        return "a convolution that is not 2-D";
    if (op->node->p.window.groups > 1)
        return "a grouped convolution";
    kr_pp_common(s, op, n, batch, use_activation);
    s->kind = kind;
    kr_pp_window(s, op, w->dims[1], w->dims[2]);
    s->w = op->in[1];
    s->bias = op->node->n_inputs > 2 ? op->in[2] : NULL;
    return NULL;
}

/* 4 when step @p s can work on 4 channels at a time (oc a multiple of 4, x, y and the
 * residual 16-byte aligned at @p esize bytes per element), else 1. */
int kr_pp_channel_vec(const kr_cuda_step *s, size_t esize)
{
    return s->oc % 4 == 0 && kr_pp_aligned(s->x, 4 * esize) && kr_pp_aligned(s->y, 4 * esize) &&
                   kr_pp_aligned(s->res, 4 * esize)
               ? 4
               : 1;
}

/* Whether PAD node @p node pads only the channels of an NHWC tensor, after them. */
int kr_pp_channel_pad(const kr_graph *g, const kr_node *node)
{
    const kr_tensor *x = &g->tensors[node->inputs[0]];
    if (x->rank != 4 || !kr_pp_zero_pad(node))
        return 0;
    for (int d = 0; d < 4; d++)
        if (node->p.pad.before[d] || (d < 3 && node->p.pad.after[d]))
            return 0;
    return node->p.pad.after[3] > 0;
}

/* Whether PAD node @p node pads only H and W of an NHWC tensor. */
int kr_pp_spatial_pad(const kr_graph *g, const kr_node *node)
{
    const kr_tensor *x = &g->tensors[node->inputs[0]];
    return x->rank == 4 && kr_pp_zero_pad(node) && !node->p.pad.before[0] && !node->p.pad.after[0] &&
           !node->p.pad.before[3] && !node->p.pad.after[3] && node->p.pad.before[1] >= 0 &&
           node->p.pad.before[2] >= 0 && node->p.pad.after[1] >= 0 && node->p.pad.after[2] >= 0;
}
