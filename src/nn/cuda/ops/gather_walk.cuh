/*
 * Index walks of the per-node data-movement kernels (TRANSPOSE, SLICE): an output element's
 * index split over up to KR_MAX_DIMS output axes (left-padded with extent 1), each axis adding
 * its own input stride times the axis index, plus a base offset. The loop is unrolled over
 * KR_MAX_DIMS so that the shape stays in kernel parameters. No arithmetic on the values: every
 * output is a copy of one input element.
 */
#ifndef KEYER_NN_CUDA_OPS_GATHER_WALK_CUH
#define KEYER_NN_CUDA_OPS_GATHER_WALK_CUH

#include "nn/cuda/common.cuh"

struct kr_walk {
    int dims[KR_MAX_DIMS];          /* output extents, left-padded with 1 */
    long long stride[KR_MAX_DIMS];  /* input elements per step along each output axis */
    long long base;                 /* input offset of output element 0 */
};

/* Input offset of output element @p i. */
template <typename I> __device__ __forceinline__ long long kr_walk_offset(const kr_walk &w, I i)
{
    long long off = w.base;
    I r = i;
#pragma unroll
    for (int d = KR_MAX_DIMS - 1; d >= 0; d--) {
        I q = r / (I)w.dims[d];
        off += (long long)(r - q * (I)w.dims[d]) * w.stride[d];
        r = q;
    }
    return off;
}

template <typename T, typename I>
__global__ void kr_walk_copy(const T *__restrict__ x, T *__restrict__ y, I total, kr_walk w)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x)
        y[i] = x[kr_walk_offset(w, i)];
}

/* Row-major element strides of tensor @p t at the run's batch, in @p s[0..rank). */
static inline void kr_walk_strides(const kr_cuda_op *op, const kr_tensor *t, long long *s)
{
    long long st = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        s[d] = st;
        st *= kr_dim(op, t, d);
    }
}

/* Queues the copy of @p w over the output of @p op. */
template <typename T, typename I> static int kr_walk_launch(const kr_cuda_op *op, const kr_walk &w)
{
    size_t total = kr_elems(op, kr_out_t(op));
    kr_walk_copy<T, I><<<kr_blocks(total, 256), 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (T *)op->out, (I)total, w);
    return (int)cudaGetLastError();
}

#endif
