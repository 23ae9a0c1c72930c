/*
 * The element-wise operators of ONNX models (semantics in nn/graph.h, the reference in
 * src/nn/reference/): TANH, EXP, SQRT, ELU, LEAKY_RELU, HARD_SIGMOID, CLIP, POW, in float from
 * the element type, then the node's epilogue (its fused clamp, a folded post function or
 * residual where the fusion pass set one). One kernel, the function a template parameter;
 * parameters from p.unary. Per-node only (the persistent schedule refuses these operators).
 */
#include "nn/cuda/common.cuh"

enum { U_TANH, U_EXP, U_SQRT, U_ELU, U_LEAKY_RELU, U_HARD_SIGMOID, U_CLIP, U_POW };

template <int F> __device__ __forceinline__ float unary_fn(float x, float alpha, float beta)
{
    switch (F) {
    case U_TANH: return tanhf(x);
    case U_EXP: return expf(x);
    case U_SQRT: return sqrtf(x);
    case U_ELU: return x < 0.0f ? alpha * (expf(x) - 1.0f) : x;
    case U_LEAKY_RELU: return x < 0.0f ? alpha * x : x;
    case U_HARD_SIGMOID: return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case U_CLIP: return x != x ? x : fminf(fmaxf(x, alpha), beta); /* NaN stays */
    default: return powf(x, alpha);
    }
}

template <typename T, int F, typename I>
__global__ void onnx_unary_kernel(const T *__restrict__ x, T *__restrict__ y, I total,
                                  float alpha, float beta, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        float v = kr_apply(e, unary_fn<F>(kr_ld(x + i), alpha, beta));
        kr_add_res<T, 1>(e, i, &v);
        kr_st(y + i, v);
    }
}

template <typename T, int F, typename I> static int launch(const kr_cuda_op *op)
{
    size_t total = kr_elems(op, kr_out_t(op));
    onnx_unary_kernel<T, F, I><<<kr_blocks(total, 256), 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (T *)op->out, (I)total, op->node->p.unary.alpha,
        op->node->p.unary.beta, kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

template <int F> static int run(const kr_cuda_op *op)
{
    if (kr_small_index(op))
        return op->f16 ? launch<__half, F, unsigned>(op) : launch<float, F, unsigned>(op);
    return op->f16 ? launch<__half, F, size_t>(op) : launch<float, F, size_t>(op);
}

extern "C" int kr_cuda_tanh(const kr_cuda_op *op) { return run<U_TANH>(op); }
extern "C" int kr_cuda_exp(const kr_cuda_op *op) { return run<U_EXP>(op); }
extern "C" int kr_cuda_sqrt(const kr_cuda_op *op) { return run<U_SQRT>(op); }
extern "C" int kr_cuda_elu(const kr_cuda_op *op) { return run<U_ELU>(op); }
extern "C" int kr_cuda_leaky_relu(const kr_cuda_op *op) { return run<U_LEAKY_RELU>(op); }
extern "C" int kr_cuda_hard_sigmoid(const kr_cuda_op *op) { return run<U_HARD_SIGMOID>(op); }
extern "C" int kr_cuda_clip(const kr_cuda_op *op) { return run<U_CLIP>(op); }
extern "C" int kr_cuda_pow(const kr_cuda_op *op) { return run<U_POW>(op); }
