/*
 * DEPTHWISE_CONV_2D per output unit, as every schedule computes it: the multiply-add of one tap
 * into V channels (kr_dw_fma, channel by channel: input channel = output channel with multiplier
 * 1), and the epilogue of conv_2d.cuh (kr_conv_out for a sum started from 0, kr_conv_out_bf for
 * one started from the bias). The schedules' orders, in float with one accumulator per output
 * channel:
 *
 *  per node (depthwise_conv_2d.cu: dw_kernel, dw_rows, dw_half): from the bias, the taps in
 *      (ky, kx) order, taps outside the input skipped;
 *  persistent DEPTHWISE step (persistent/steps.cuh): from 0, every tap in (ky, kx) order, a tap
 *      outside the input adding 0 x w (a clamped pixel's load, then 0), + bias last;
 *  persistent EXPAND_DW step's depthwise half: from the bias, every tap in order, the values
 *      outside the image 0 (the pointwise half's halo in shared memory);
 *  cluster segment (segment/stages.cuh: depthwise_k, dw3_rows): from the bias, every tap in
 *      order with the rows outside the image 0 (halo rows), columns outside 0 (depthwise_k) or
 *      skipped (dw3_rows).
 */
#ifndef KEYER_NN_CUDA_OPS_DEPTHWISE_CONV_2D_CUH
#define KEYER_NN_CUDA_OPS_DEPTHWISE_CONV_2D_CUH

#include "nn/cuda/ops/conv_2d.cuh"

/* acc[k] += x[k] * w[k] for the V channels of one tap, in channel order. */
template <int V>
__device__ __forceinline__ void kr_dw_fma(float *acc, const float *x, const float *w)
{
#pragma unroll
    for (int k = 0; k < V; k++)
        acc[k] = fmaf(x[k], w[k], acc[k]);
}
__device__ __forceinline__ void kr_dw_fma(float *acc, const float *x, float4 w)
{
    acc[0] = fmaf(x[0], w.x, acc[0]);
    acc[1] = fmaf(x[1], w.y, acc[1]);
    acc[2] = fmaf(x[2], w.z, acc[2]);
    acc[3] = fmaf(x[3], w.w, acc[3]);
}
__device__ __forceinline__ void kr_dw_fma(float4 &acc, float4 x, float4 w)
{
    acc.x = fmaf(x.x, w.x, acc.x), acc.y = fmaf(x.y, w.y, acc.y);
    acc.z = fmaf(x.z, w.z, acc.z), acc.w = fmaf(x.w, w.w, acc.w);
}

#endif
