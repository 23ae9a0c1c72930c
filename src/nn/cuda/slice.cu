/*
 * SLICE (src/nn/reference/slice.c): y[i_0, ...] = x[start_0 + i_0 * step_0, ...], the output
 * size the output tensor's (steps may be negative). One thread per output element
 * (ops/gather_walk.cuh): the base offset is the starts', each axis's stride the input's times
 * the step.
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
        w.stride[d] = od >= 0 ? xs[od] * op->node->p.slice.step[od] : 0;
        if (od >= 0)
            w.base += xs[od] * op->node->p.slice.start[od];
    }
    return kr_walk_launch<T, I>(op, w);
}

extern "C" int kr_cuda_slice(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
