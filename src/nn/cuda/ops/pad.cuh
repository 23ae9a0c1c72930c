/*
 * PAD with zeros (src/nn/reference/pad.c) per output element, as the per-node kernels (pad.cu)
 * and the persistent schedule's PAD step read it: an output index minus the padding before it is
 * either inside the input (copied) or not (zero). No arithmetic: every schedule's result is the
 * input's value or 0.
 */
#ifndef KEYER_NN_CUDA_OPS_PAD_CUH
#define KEYER_NN_CUDA_OPS_PAD_CUH

#include "nn/cuda/common.cuh"

/* Output element @p i of a PAD of the last axis only, from @p ic to @p oc channels with
 * @p before of them first: input [pixels][ic] @p x's channel c - before of the same pixel, or 0
 * outside [0, ic). */
template <typename T, typename I>
__device__ __forceinline__ float kr_pad_channels(const T *x, I i, int ic, int oc, int before)
{
    I p = i / (I)oc;
    int c = (int)(i - p * (I)oc) - before;
    return (unsigned)c < (unsigned)ic ? kr_ld(x + p * (I)ic + c) : 0.0f;
}

#endif
