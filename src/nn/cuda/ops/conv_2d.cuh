/*
 * CONV_2D per output unit, as every schedule computes it: the multiply-add of one input value
 * into 4 output channels (kr_fma4), the window's input coordinates (kr_conv_in), and the
 * epilogue of an output from its sum (kr_conv_out: bias, residual, clamp and post function). The
 * schedules' loops differ (tiles through shared memory, registers, rows of a cluster's block);
 * each sums in one of these orders, always in float with one accumulator per output unless said:
 *
 *  zero-first: from 0, over the window's taps in (ky, kx) order and each tap's input channels in
 *      order (a tap outside the input adds 0 x w), then + bias (kr_conv_out). The per-node GEMM
 *      (conv_2d.cu, conv_gemm) and its pointwise tile path with BL (conv_pw_tile), the
 *      persistent schedule's group-4 convolutions (persistent/steps_conv.cuh: step_conv_g4, the
 *      resize-fed step_conv_rz, both halves of step_conv_pw, the pointwise half of
 *      step_expand_dw), and the cluster segment's pointwise stages where one lane takes all the
 *      inputs (segment/stages.cuh, pointwise_k with S = 1, U's a-convolution with S = 1).
 *  bias-first: from the bias, taps and channels in the same order. The per-node stem
 *      (conv_stem, and conv_2d_stem.cu's conv_stem_tile for the ONNX stems), narrow
 *      (conv_narrow), grouped (conv_pw_groups) paths and the pointwise tile path without BL
 *      (conv_pw_tile, in half precision where conv_pw_groups would run).
 *  split (persistent step_conv_split): `split` lanes per output, lane l taking the 4-channel
 *      chunks l, l + split, ... of each tap (vec 4: channels 0 and 2 of a chunk into one
 *      accumulator, 1 and 3 into another, added at the end), then a butterfly of shuffles from
 *      the farthest lane down; + bias last.
 *  lane-split (segment pointwise_k with S > 1): S lanes per 4 outputs, lane s taking the
 *      contiguous s-th of the inputs in order, a butterfly of shuffles from the nearest lane up;
 *      + bias last. U's a-convolution with S > 1 (segment): the lanes' parts added to the bias
 *      in lane order.
 *  tensor-core (f16 ONNX layers: conv_2d_tc.cu on compute 8.0+, conv_2d_mma.cu on 7.x, so
 *      these layers' results differ between the two classes): the weights rounded to
 *      half; from 0, the 16-deep chunks of k = (ky, kx, ic) in order (conv_2d_tc: K rounded up
 *      to 32 with zero products), each chunk's 16 products summed as the tensor core sums them
 *      (float accumulation), then + bias (kr_conv_out).
 *  tensor-core patch (conv_2d_tc.cu conv_tcp, compute 8.0+: the f16 ONNX layers of more than
 *      one tap whose patch fits its shared-memory bound, a choice by shape): the weights
 *      rounded to half; from 0, the 16-channel chunks of the input in order, within each the
 *      taps in (ky, kx) order, each tap's 16 products (channels past ic: zero) summed as the
 *      tensor core sums them (float accumulation), then + bias (kr_conv_out).
 *  one-output (conv_2d_one.cu: f16 ONNX layers of one output channel on compute 8.0+, a
 *      choice by shape): ic / 8 lanes per output, lane g from 0 over the taps in (ky, kx) order
 *      and channels [8g, 8g + 8) in order (a tap outside the input adds nothing), the lanes'
 *      sums by a butterfly of shuffles from the farthest lane down, then + bias (kr_conv_out);
 *      conv_one_row (4 pixels per lane group) computes the same sums.
 *  grouped direct (conv_2d_grouped.cu, groups > 1): from the bias, taps in (ky, kx) order and
 *      the group's channels in order.
 *  tensor-core pointwise (conv_2d_pw_mma.cu: f16 TFLite 1x1 layers and RGB stems on every
 *      class from 7.5, a choice by shape): each float weight split into hi = half(w) and
 *      lo = half(w - hi); from 0, the 8-deep chunks of k = (ky, kx, ic) in order
 *      (mma.sync.m16n8k8), each chunk's 8 products with hi summed as the tensor core sums them
 *      (float accumulation; k past K: zero), then its 8 products with lo likewise; then + bias
 *      (kr_conv_out's order: bias, clamp, post function, residual).
 *  narrow tensor-core (conv_2d.cu conv_narrow_mma: f16 16 -> 16 TFLite 1x1 layers of 16 pixels
 *      or more per item, every class from 7.5, a choice by shape): each float weight as hi + lo
 *      halves; from 0, two 8-deep chunks of k (mma.sync.m16n8k8), chunk c holding channels
 *      {4t + 2c, 4t + 2c + 1 : t = 0..3} (chunk 0: 0, 1, 4, 5, 8, 9, 12, 13), each chunk's 8
 *      products with hi summed as the tensor core sums them (float accumulation), then its 8
 *      products with lo likewise; then + bias (kr_conv_out's order: bias, clamp, post function,
 *      residual).
 * Which path a layer takes never depends on the batch (or, where it does, conv_pw_tile sums in
 * the order of the path it displaces), so an item's result is the same at every batch size.
 */
#ifndef KEYER_NN_CUDA_OPS_CONV_2D_CUH
#define KEYER_NN_CUDA_OPS_CONV_2D_CUH

#include "nn/cuda/common.cuh"

/* acc[0..4) += x * w.{x, y, z, w}, in that order: one input value into the sums of 4
 * consecutive output channels, w their 4 weights for this input channel. */
__device__ __forceinline__ void kr_fma4(float *acc, float x, float4 w)
{
    acc[0] = fmaf(x, w.x, acc[0]);
    acc[1] = fmaf(x, w.y, acc[1]);
    acc[2] = fmaf(x, w.z, acc[2]);
    acc[3] = fmaf(x, w.w, acc[3]);
}
__device__ __forceinline__ void kr_fma4(float4 &acc, float x, float4 w)
{
    acc.x = fmaf(x, w.x, acc.x), acc.y = fmaf(x, w.y, acc.y);
    acc.z = fmaf(x, w.z, acc.z), acc.w = fmaf(x, w.w, acc.w);
}

/* Input coordinate of tap @p k of output @p o along one axis: stride @p st, padding before
 * @p pad, dilation @p dil. */
__device__ __forceinline__ int kr_conv_in(int o, int st, int pad, int k, int dil)
{
    return o * st - pad + k * dil;
}

__device__ __forceinline__ float kr_add(float a, float b) { return a + b; }
__device__ __forceinline__ float4 kr_add(float4 a, float4 b)
{
    a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
    return a;
}

/* A convolution output from its zero-first sum @p sum (float, or float4 for 4 channels): + the
 * bias, then with @p pre the residual @p r before the activation @p act (an ADD with its
 * activation folded in: act(sum + bias + r)), else act(sum + bias), + r where @p res() (a folded
 * residual ADD after the activation; res is asked after the activation, so that a schedule
 * reading it from its step descriptor loads it there). @p act: the node's clamp and post
 * function (kr_apply, or a schedule's vector form of it). */
template <typename V, typename Act, typename Res>
__device__ __forceinline__ V kr_conv_out(V sum, V bias, V r, bool pre, Res res, Act act)
{
    V v = kr_add(sum, bias);
    if (pre)
        v = kr_add(v, r);
    v = act(v); /* one call of act on both paths: the segment's code size */
    return !pre && res() ? kr_add(v, r) : v;
}

/* A convolution output from its bias-first sum @p sum: act(sum), + r where @p res(). */
template <typename V, typename Act, typename Res>
__device__ __forceinline__ V kr_conv_out_bf(V sum, V r, Res res, Act act)
{
    const V v = act(sum);
    return res() ? kr_add(v, r) : v;
}

/* The residual conditions of kr_conv_out: none, always (a residual of zeros counts), or where a
 * pointer is set. */
struct kr_no_res {
    __device__ __forceinline__ bool operator()() const { return false; }
};
struct kr_add_res_always {
    __device__ __forceinline__ bool operator()() const { return true; }
};

#endif
