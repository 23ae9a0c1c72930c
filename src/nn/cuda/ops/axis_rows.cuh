/*
 * The rows of the per-node reductions along one axis (SOFTMAX, ARGMAX): a tensor seen as
 * [outer][n][inner] around axis @p axis; row r = (o, i) reads elements (o * n + k) * inner + i
 * for k in [0, n). Host-side shape helper only.
 */
#ifndef KEYER_NN_CUDA_OPS_AXIS_ROWS_CUH
#define KEYER_NN_CUDA_OPS_AXIS_ROWS_CUH

#include "nn/cuda/common.cuh"

struct kr_rows {
    long long outer, inner;
    int n;
};

/* The rows of @p t around @p axis at the run's batch. */
static inline kr_rows kr_rows_of(const kr_cuda_op *op, const kr_tensor *t, int axis)
{
    kr_rows r = {1, 1, 1};
    for (int d = 0; d < t->rank; d++) {
        if (d < axis)
            r.outer *= kr_dim(op, t, d);
        else if (d == axis)
            r.n = kr_dim(op, t, d);
        else
            r.inner *= kr_dim(op, t, d);
    }
    return r;
}

#endif
