/*
 * Element-wise activations (semantics of src/nn/reference/activations.c): RELU, RELU6,
 * HARD_SWISH x*min(6,max(0,x+3))/6, LOGISTIC 1/(1+exp(-x)) in float. One kernel; the function
 * is the epilogue's post function, so a standalone activation node and one folded into the
 * preceding kernel compute the same thing; 16 bytes per thread where the sizes and alignment
 * allow (unary_vec), else one element per thread. Usually folded away (fusion.h).
 */
#include "nn/cuda/common.cuh"

template <typename T, typename I>
__global__ void unary_kernel(const T *__restrict__ x, T *__restrict__ y, I total, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x)
        kr_st(y + i, kr_apply(e, kr_ld(x + i)));
}

/* unary_kernel's values V at a time (16-byte accesses: 8 halves or 4 floats) over @p vecs
 * groups, for items of at least 4096 elements, a multiple of V, both tensors aligned: selfie's
 * RELU over 16 x 16 x 128 (batch 256) ran one 2-byte element per thread at 14% of DRAM
 * bandwidth (25.3 us; 10.0 us in vectors). */
template <typename T, int V, typename I>
__global__ void unary_vec(const T *__restrict__ x, T *__restrict__ y, I vecs, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < vecs;
         i += (I)gridDim.x * blockDim.x) {
        float v[V];
        kr_ldv<V>(x + i * V, v);
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = kr_apply(e, v[k]);
        kr_stv<V>(y + i * V, v);
    }
}

template <typename T, typename I> static int unary(const kr_cuda_op *op, kr_cuda_post f)
{
    size_t total = kr_elems(op, kr_out_t(op));
    kr_epilogue e = kr_make_epilogue(op, 0);
    if (op->post != KR_CUDA_POST_NONE) /* fusion never folds into an activation node */
        return (int)cudaErrorInvalidValue;
    e.post = (int)f;
    /* by the layer's shape: an item of at least 4096 elements, a multiple of the vector (a
     * small layer, e.g. selfie's LOGISTIC over 128 channels, ran slower in vectors: 2.7 ->
     * 3.4 us at batch 256, fewer threads each with eight logistics) */
    const int v = 16 / (int)sizeof(T);
    const size_t item = kr_tensor_elements(kr_out_t(op));
    if (item >= 4096 && item % (size_t)v == 0 && kr_aligned(op->in[0], 16) &&
        kr_aligned(op->out, 16)) {
        unary_vec<T, 16 / sizeof(T), I><<<kr_blocks(total / v, 256), 256, 0,
                                          (cudaStream_t)op->stream>>>(
            (const T *)op->in[0], (T *)op->out, (I)(total / v), e);
        return (int)cudaGetLastError();
    }
    unsigned blocks = kr_blocks(total, 256);
    unary_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>((const T *)op->in[0], (T *)op->out,
                                                                  total, e);
    return (int)cudaGetLastError();
}

static int run(const kr_cuda_op *op, kr_cuda_post f)
{
    if (kr_small_index(op))
        return op->f16 ? unary<__half, unsigned>(op, f) : unary<float, unsigned>(op, f);
    return op->f16 ? unary<__half, size_t>(op, f) : unary<float, size_t>(op, f);
}

extern "C" int kr_cuda_relu(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_RELU); }
extern "C" int kr_cuda_relu6(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_RELU6); }
extern "C" int kr_cuda_hard_swish(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_HARD_SWISH); }
extern "C" int kr_cuda_logistic(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_LOGISTIC); }
