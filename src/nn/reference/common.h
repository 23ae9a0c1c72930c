/*
 * Small helpers shared by the reference kernels: shapes at the run's batch size, the fused
 * activation clamp and a NumPy-broadcasting walk for the element-wise binary operators.
 * Everything here is static inline; nothing allocates.
 */
#ifndef KEYER_NN_REFERENCE_COMMON_H
#define KEYER_NN_REFERENCE_COMMON_H

#include <stddef.h>

#include "nn/graph.h"
#include "nn/reference/ops.h"

static inline const kr_tensor *ref_in(const kr_op_ctx *c, int i)
{
    return &c->graph->tensors[c->node->inputs[i]];
}

static inline const kr_tensor *ref_out(const kr_op_ctx *c, int i)
{
    return &c->graph->tensors[c->node->outputs[i]];
}

/* Dimension d of a tensor at the run's batch: activations scale dims[0] by the batch. */
static inline int ref_dim(const kr_op_ctx *c, const kr_tensor *t, int d)
{
    return (d == 0 && !kr_tensor_is_const(t)) ? t->dims[0] * c->batch : t->dims[d];
}

/* Elements of a tensor at the run's batch. */
static inline size_t ref_elements(const kr_op_ctx *c, const kr_tensor *t)
{
    size_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= (size_t)ref_dim(c, t, d);
    return n;
}

/* TFLite's ActivationFunctionWithMinMax: min(max(v, lo), hi). */
static inline float ref_clamp(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Broadcasting walk for out = f(a, b): shapes are right-aligned to the output's rank; an operand
 * axis of extent 1 against a larger output extent gets stride 0 (the value repeats).
 * Usage: ref_bcast_init(), then for each output element i in order: use a[ia], b[ib];
 * ref_bcast_next().
 */
typedef struct ref_bcast {
    int rank;
    int dims[KR_MAX_DIMS];             /* output extents at the run's batch */
    size_t sa[KR_MAX_DIMS], sb[KR_MAX_DIMS]; /* operand element strides (0: broadcast) */
    size_t total;                      /* output elements */
    int idx[KR_MAX_DIMS];              /* current output multi-index */
    size_t ia, ib;                     /* current operand offsets */
} ref_bcast;

static inline void ref_bcast_strides(const kr_op_ctx *c, const kr_tensor *t, const ref_bcast *w,
                                     size_t *strides)
{
    int shift = w->rank - t->rank;
    size_t s = 1;
    for (int d = w->rank - 1; d >= 0; d--) {
        int td = d - shift;
        int extent = td >= 0 ? ref_dim(c, t, td) : 1;
        strides[d] = (extent == 1 && w->dims[d] != 1) ? 0 : s;
        s *= (size_t)extent;
    }
}

static inline void ref_bcast_init(const kr_op_ctx *c, ref_bcast *w)
{
    const kr_tensor *yt = ref_out(c, 0);
    w->rank = yt->rank;
    w->total = 1;
    for (int d = 0; d < w->rank; d++) {
        w->dims[d] = ref_dim(c, yt, d);
        w->total *= (size_t)w->dims[d];
        w->idx[d] = 0;
    }
    ref_bcast_strides(c, ref_in(c, 0), w, w->sa);
    ref_bcast_strides(c, ref_in(c, 1), w, w->sb);
    w->ia = w->ib = 0;
}

/* Advances to the next output element (last axis fastest). */
static inline void ref_bcast_next(ref_bcast *w)
{
    for (int d = w->rank - 1; d >= 0; d--) {
        w->ia += w->sa[d];
        w->ib += w->sb[d];
        if (++w->idx[d] < w->dims[d])
            return;
        w->ia -= w->sa[d] * (size_t)w->dims[d];
        w->ib -= w->sb[d] * (size_t)w->dims[d];
        w->idx[d] = 0;
    }
}

/* The index walk of the reductions (MEAN, REDUCE_MAX): the input's axes split into kept and
 * reduced ones by axes_mask, innermost first. Output element o and reduced element r address
 * the input at ref_reduce_base(w, o) + ref_reduce_offset(w, r). */
typedef struct ref_reduce {
    int kept_dims[KR_MAX_DIMS], red_dims[KR_MAX_DIMS], n_kept, n_red;
    size_t kept_stride[KR_MAX_DIMS], red_stride[KR_MAX_DIMS];
    size_t n_out, n_reduced; /* output elements; input elements per output element */
} ref_reduce;

static inline void ref_reduce_init(const kr_op_ctx *c, ref_reduce *w)
{
    const kr_tensor *xt = ref_in(c, 0);
    unsigned mask = c->node->p.mean.axes_mask;
    size_t stride = 1;
    w->n_kept = w->n_red = 0;
    w->n_out = w->n_reduced = 1;
    for (int d = xt->rank - 1; d >= 0; d--) { /* innermost first */
        int extent = ref_dim(c, xt, d);
        if (mask & (1u << d)) {
            w->red_dims[w->n_red] = extent;
            w->red_stride[w->n_red++] = stride;
            w->n_reduced *= (size_t)extent;
        } else {
            w->kept_dims[w->n_kept] = extent;
            w->kept_stride[w->n_kept++] = stride;
            w->n_out *= (size_t)extent;
        }
        stride *= (size_t)extent;
    }
}

static inline size_t ref_reduce_walk_(const int *dims, const size_t *strides, int n, size_t i)
{
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        off += (i % (size_t)dims[k]) * strides[k];
        i /= (size_t)dims[k];
    }
    return off;
}

static inline size_t ref_reduce_base(const ref_reduce *w, size_t o)
{
    return ref_reduce_walk_(w->kept_dims, w->kept_stride, w->n_kept, o);
}

static inline size_t ref_reduce_offset(const ref_reduce *w, size_t r)
{
    return ref_reduce_walk_(w->red_dims, w->red_stride, w->n_red, r);
}

#endif
