/*
 * CONCATENATION along an axis (src/nn/reference/concatenation.c) per output element, as the
 * per-node kernel (concatenation.cu, any number of inputs) and the persistent schedule's CONCAT
 * step (two inputs, one run each per item) read it: per outer index, each input contributes its
 * block of (extent on the axis x inner size) elements, in input order. A copy: no arithmetic.
 */
#ifndef KEYER_NN_CUDA_OPS_CONCATENATION_CUH
#define KEYER_NN_CUDA_OPS_CONCATENATION_CUH

#include "nn/cuda/common.cuh"

/* The element that output element @p i reads: of @p n inputs @p in, input k contributing
 * @p block[k] elements per outer index (@p out_block in all). */
template <typename T, typename I, typename B, int N>
__device__ __forceinline__ const T *kr_concat_src(const void *const (&in)[N], I i, B out_block,
                                                  const B (&block)[N], int n)
{
    I o = i / (I)out_block;
    B r = (B)(i - o * (I)out_block);
    int k = 0;
    while (k < n - 1 && r >= block[k]) {
        r -= block[k];
        k++;
    }
    return (const T *)in[k] + (o * (I)block[k] + (I)r);
}

/* kr_concat_src for two inputs and one outer index per item (the persistent schedule's CONCAT
 * step): of the @p per elements of each item, the first @p a from @p x, the others from @p x2. */
template <typename T, typename I>
__device__ __forceinline__ const T *kr_concat2_src(const void *x, const void *x2, I i, I per, I a)
{
    const I n = i / per, r = i % per;
    return r < a ? (const T *)x + (n * a + r) : (const T *)x2 + (n * (per - a) + (r - a));
}

#endif
