/* Small helpers shared by the reference kernels: shapes at the run's batch size. */
#ifndef KEYER_NN_REFERENCE_COMMON_H
#define KEYER_NN_REFERENCE_COMMON_H

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

static inline float ref_clamp(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

#endif
