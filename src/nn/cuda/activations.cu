/*
 * Element-wise activations (semantics of src/nn/reference/activations.c): RELU, RELU6,
 * HARD_SWISH x*min(6,max(0,x+3))/6, LOGISTIC 1/(1+exp(-x)) in float. One kernel; the function
 * is the epilogue's post function, so a standalone activation node and one folded into the
 * preceding kernel compute the same thing; 16 bytes per thread where the sizes and alignment
 * allow (unary_vec), else one element per thread. Usually folded away (fusion.h). An f16 node
 * whose output is a float graph output may write it as float itself (kr_cuda_op.y_f32:
 * u2netp's sigmoids of d1 .. d6), each value rounded to half and widened, so that the output
 * needs no conversion kernel.
 */
#include "nn/cuda/common.cuh"

/* @p v as an output of element type Y holds it where the activations are T: rounded to half
 * and widened where an f16 node writes its float graph output itself (kr_cuda_op.y_f32: the
 * values the output's conversion would give), else as it is (kr_st rounds a half output). */
template <typename T, typename Y> __device__ __forceinline__ float as_stored(float v)
{
    return sizeof(T) == 2 && sizeof(Y) == 4 ? __half2float(__float2half_rn(v)) : v;
}

template <typename T, typename Y, typename I>
__global__ void unary_kernel(const T *__restrict__ x, Y *__restrict__ y, I total, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x)
        kr_st(y + i, as_stored<T, Y>(kr_apply(e, kr_ld(x + i))));
}

/* unary_kernel's values V at a time (16-byte accesses: 8 halves or 4 floats) over @p vecs
 * groups, for items of at least 4096 elements, a multiple of V, both tensors aligned: selfie's
 * RELU over 16 x 16 x 128 (batch 256) ran one 2-byte element per thread at 14% of DRAM
 * bandwidth (25.3 us; 10.0 us in vectors). */
template <typename T, int V, typename I, typename Y>
__global__ void unary_vec(const T *__restrict__ x, Y *__restrict__ y, I vecs, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < vecs;
         i += (I)gridDim.x * blockDim.x) {
        float v[V];
        kr_ldv<V>(x + i * V, v);
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = as_stored<T, Y>(kr_apply(e, v[k]));
        kr_stv<V>(y + i * V, v);
    }
}

/* The activation of @p op into output elements of type Y (T, or float: kr_cuda_op.y_f32). */
template <typename T, typename I, typename Y> static int unary(const kr_cuda_op *op, kr_cuda_post f)
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
        unary_vec<T, 16 / sizeof(T), I, Y><<<kr_blocks(total / v, 256), 256, 0,
                                             (cudaStream_t)op->stream>>>(
            (const T *)op->in[0], (Y *)op->out, (I)(total / v), e);
        return (int)cudaGetLastError();
    }
    unsigned blocks = kr_blocks(total, 256);
    unary_kernel<T, Y, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (Y *)op->out, total, e);
    return (int)cudaGetLastError();
}

/* unary by element type and index width; an f16 node writing its float graph output itself
 * (kr_cuda_op.y_f32, kr_cuda_pernode_bind_outputs) stores float. */
static int run(const kr_cuda_op *op, kr_cuda_post f)
{
    if (op->y_f32 && !op->f16)
        return (int)cudaErrorInvalidValue;
    if (kr_small_index(op))
        return op->y_f32 ? unary<__half, unsigned, float>(op, f)
               : op->f16 ? unary<__half, unsigned, __half>(op, f)
                         : unary<float, unsigned, float>(op, f);
    return op->y_f32 ? unary<__half, size_t, float>(op, f)
           : op->f16 ? unary<__half, size_t, __half>(op, f)
                     : unary<float, size_t, float>(op, f);
}

extern "C" int kr_cuda_relu(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_RELU); }
extern "C" int kr_cuda_relu6(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_RELU6); }
extern "C" int kr_cuda_hard_swish(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_HARD_SWISH); }
extern "C" int kr_cuda_logistic(const kr_cuda_op *op) { return run(op, KR_CUDA_POST_LOGISTIC); }
