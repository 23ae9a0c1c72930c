/*
 * DEPTHWISE_CONV_2D per output unit, as every schedule computes it: the multiply-add of one tap
 * into V channels (kr_dw_fma, channel by channel: input channel = output channel with multiplier
 * 1), and the epilogue of conv_2d.cuh (kr_conv_out for a sum started from 0, kr_conv_out_bf for
 * one started from the bias). The schedules' orders, in float with one accumulator per output
 * channel:
 *
 *  per node (depthwise_conv_2d.cu: dw_kernel, dw_rows; kr_dw_unit below, for the pointwise
 *      tile with a folded depthwise in conv_2d.cu): from the bias, the taps in (ky, kx) order,
 *      taps outside the input skipped;
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

/* A depthwise convolution (multiplier 1, no dilation, channels a multiple of 4, 16-byte aligned
 * weights and bias) as a fused kernel computes it for its consumer (conv_2d.cu: the per-node
 * pointwise tile with a folded depthwise, kr_cuda_op.dw): the input x (element type T),
 * weights [1, kh, kw, c], bias (NULL: none), the sizes, and the node's clamp and post function. */
struct kr_dw_src {
    const void *x;
    const float *w, *bias;
    int ih, iw, c, oh, ow, kh, kw, sh, sw, pt, pl;
    kr_epilogue e;
};

/* Channels [k, k + 4) of output pixel @p m (b, oy, ox flattened) of @p d into @p v, in the per-node
 * order (dw_kernel and dw_rows in depthwise_conv_2d.cu): from the bias, the taps in (ky, kx)
 * order, taps outside the input skipped; then the clamp and post function. Rounded to T by the
 * caller's store, it is bit for bit what the per-node depthwise kernel stores. KW: the kernel's
 * width when it is 3 or 5 (each kernel row's taps and weights are loaded before its
 * multiply-adds, so that its loads are in flight together), 0 for any width (tap by tap). */
template <typename T, int KW>
__device__ __forceinline__ void kr_dw_unit(const kr_dw_src &d, int m, int k, float *v)
{
    const int ox = m % d.ow, t = m / d.ow;
    const int oy = t % d.oh, b = t / d.oh;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (d.bias)
        kr_ldv<4>(d.bias + k, acc);
    for (int ky = 0; ky < d.kh; ky++) {
        const int iy = kr_conv_in(oy, d.sh, d.pt, ky, 1);
        if ((unsigned)iy >= (unsigned)d.ih)
            continue;
        const T *row = (const T *)d.x + ((size_t)b * d.ih + iy) * d.iw * d.c + k;
        const float *wrow = d.w + (size_t)ky * d.kw * d.c + k;
        if (KW > 0) {
            float xv[KW > 0 ? KW : 1][4], wv[KW > 0 ? KW : 1][4];
            bool in[KW > 0 ? KW : 1];
#pragma unroll
            for (int kx = 0; kx < KW; kx++) {
                const int ix = kr_conv_in(ox, d.sw, d.pl, kx, 1);
                in[kx] = (unsigned)ix < (unsigned)d.iw;
                if (in[kx]) {
                    kr_ldv<4>(row + (size_t)ix * d.c, xv[kx]);
                    kr_ldv<4>(wrow + (size_t)kx * d.c, wv[kx]);
                }
            }
#pragma unroll
            for (int kx = 0; kx < KW; kx++)
                if (in[kx])
                    kr_dw_fma<4>(acc, xv[kx], wv[kx]);
        } else {
            for (int kx = 0; kx < d.kw; kx++) {
                const int ix = kr_conv_in(ox, d.sw, d.pl, kx, 1);
                if ((unsigned)ix >= (unsigned)d.iw)
                    continue;
                float xv[4], wv[4];
                kr_ldv<4>(row + (size_t)ix * d.c, xv);
                kr_ldv<4>(wrow + (size_t)kx * d.c, wv);
                kr_dw_fma<4>(acc, xv, wv);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
        v[j] = kr_apply(d.e, acc[j]);
}

#endif
