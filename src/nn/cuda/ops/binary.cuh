/*
 * ADD, MUL, PRELU (and SUB, DIV: per-node only) per element, as every schedule computes them: the per-node kernels
 * (binary.cuh) and the persistent schedule's BINARY step. One function per unit: the operation
 * on the two operands in their order, then the node's epilogue (clamp, post function, folded
 * residual); the caller stores the values. The schedules differ
 * only in how they find the operands (broadcasting schemes); the arithmetic is this.
 */
#ifndef KEYER_NN_CUDA_OPS_BINARY_CUH
#define KEYER_NN_CUDA_OPS_BINARY_CUH

#include "nn/cuda/common.cuh"

/* The element-wise binary operators: @p f 0 ADD, 1 MUL, 2 PRELU (b the slope where a < 0),
 * 3 SUB (a - b), 4 DIV (a / b, IEEE division). SUB and DIV run in the per-node kernels only. */
__device__ __forceinline__ float kr_bin_op(int f, float a, float b)
{
    if (f == 0)
        return a + b;
    if (f == 1)
        return a * b;
    if (f == 3)
        return a - b;
    if (f == 4)
        return __fdiv_rn(a, b);
    return a >= 0.0f ? a : a * b;
}

/* V values of a per-channel operand (squeeze-and-excitation scales, PReLU alphas, scalars):
 * channels [ci, ci + V) of the row at @p row, or its one value V times when the operand has one
 * channel (@p cn 1). */
template <int V, typename T>
__device__ __forceinline__ void kr_ld_chan(const T *row, size_t ci, int cn, float *v)
{
    if (cn == 1) {
        const float c = kr_ld(row);
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = c;
    } else {
        kr_ldv<V>(row + ci, v);
    }
}

/* Output elements [idx, idx + V) of operator @p f from operands @p a and @p b (V values each,
 * in the operation's order) into @p v, as stored next: the operation, the clamp and post
 * function of @p e, the folded residual (V = 4 needs idx % 4 == 0). */
template <typename T, int V, typename I>
__device__ __forceinline__ void kr_binary_out(const kr_epilogue &e, int f, const float *a,
                                              const float *b, I idx, float *v)
{
#pragma unroll
    for (int k = 0; k < V; k++)
        v[k] = kr_apply(e, kr_bin_op(f, a[k], b[k]));
    kr_add_res<T, V>(e, idx, v);
}

#endif
