/*
 * TRANSPOSE (src/nn/reference/transpose.c): y dims[d] = x dims[perm[d]]; output element
 * (i_0, ..., i_r-1) is input element with index i_d on axis perm[d]. One thread per output
 * element (ops/gather_walk.cuh).
 */
#include "nn/cuda/ops/gather_walk.cuh"

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    long long xs[KR_MAX_DIMS];
    kr_walk_strides(op, xt, xs);
    kr_walk w = {};
    const int shift = KR_MAX_DIMS - yt->rank;
    for (int d = 0; d < KR_MAX_DIMS; d++) {
        const int od = d - shift;
        w.dims[d] = od >= 0 ? kr_dim(op, yt, od) : 1;
        w.stride[d] = od >= 0 ? xs[op->node->p.transpose.perm[od]] : 0;
    }
    return kr_walk_launch<T, I>(op, w);
}

extern "C" int kr_cuda_transpose(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
