/*
 * CONCATENATION along an axis (src/nn/reference/concatenation.c): per outer index, each input
 * contributes its block of (extent on the axis x inner size) elements, in input order. One
 * thread per output element finds its input from the block offset (ops/concatenation.cuh).
 */
#include "nn/cuda/ops/concatenation.cuh"

struct cat_args {
    const void *in[KR_MAX_NODE_INPUTS];
    long long block[KR_MAX_NODE_INPUTS]; /* elements each input contributes per outer index */
    int n;
    long long out_block;
};

template <typename T, typename I>
__global__ void cat_kernel(T *__restrict__ y, I total, cat_args a)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        y[i] = *kr_concat_src<T>(a.in, i, a.out_block, a.block, a.n);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *yt = kr_out_t(op);
    int axis = op->node->p.concat.axis;
    long long inner = 1;
    for (int d = axis + 1; d < yt->rank; d++)
        inner *= kr_dim(op, yt, d);
    cat_args a = {};
    a.n = op->node->n_inputs;
    for (int i = 0; i < a.n; i++) {
        a.in[i] = op->in[i];
        a.block[i] = (long long)kr_dim(op, kr_in_t(op, i), axis) * inner;
    }
    a.out_block = (long long)kr_dim(op, yt, axis) * inner;
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    cat_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>((T *)op->out, total, a);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_concatenation(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
