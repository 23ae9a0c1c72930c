/*
 * RESIZE_BILINEAR's arithmetic per output pixel: rs_axis (the source rows or columns and the
 * weight), rs_pixel (the per-node kernel, resize_bilinear.cu, and the persistent schedule's
 * RESIZE step and resize-fed convolution: exactly src/nn/reference/resize_bilinear.c, TFLite's
 * reference kernel, in float: each tap times (1 - dy) or dy, then (1 - dx) or dx, the four
 * added in order: rs_blend), and kr_bilerp4 (the cluster segment's resizes: the four tap weights
 * formed first, then the taps times their weights added in the same order; it rounds differently).
 */
#ifndef KEYER_NN_CUDA_RESIZE_BILINEAR_CUH
#define KEYER_NN_CUDA_RESIZE_BILINEAR_CUH

#include "nn/cuda/common.cuh"

struct rs_shape {
    int ih, iw, ch, oh, ow, align, half;
};

/* Per axis: scale = in/out, or (in-1)/(out-1) with align_corners; source coordinate with or
 * without half-pixel centres; i0 = max(floor, 0), i1 = min(ceil, in-1); f the weight of i1. */
__device__ __forceinline__ void rs_axis(int in, int out, int align, int half, int o, int *i0,
                                        int *i1, float *f)
{
    float scale = (float)in / (float)out;
    if (align && out > 1)
        scale = (float)(in - 1) / (float)(out - 1);
    float src = half ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
    int lo = (int)floorf(src);
    *i0 = lo < 0 ? 0 : lo;
    int hi = (int)ceilf(src);
    *i1 = hi < in - 1 ? hi : in - 1;
    *f = src - (float)*i0;
}

/* One channel's value from its four taps v00 (y0, x0), v10 (y1, x0), v01 (y0, x1), v11 (y1, x1)
 * and the weights dy, dx (rs_axis): each tap times (1 - dy) or dy, then (1 - dx) or dx, the four
 * added in order (the reference's arithmetic; rs_pixel and every caller that must equal it
 * compute each value through this function). */
__device__ __forceinline__ float rs_blend(float v00, float v10, float v01, float v11, float dy,
                                          float dx)
{
    return v00 * (1 - dy) * (1 - dx) + v10 * dy * (1 - dx) + v01 * (1 - dy) * dx +
           v11 * dy * dx;
}

/* V channels at once (the per-node kernels' vector paths): rs_blend per channel. */
template <int V>
__device__ __forceinline__ void rs_blend(const float *v00, const float *v10, const float *v01,
                                         const float *v11, float dy, float dx, float *v)
{
#pragma unroll
    for (int j = 0; j < V; j++)
        v[j] = rs_blend(v00[j], v10[j], v01[j], v11[j], dy, dx);
}

/* Channels k..k+V-1 of output pixel (oy, ox) of item b, before any epilogue: the four taps
 * weighted in the reference's order (rs_blend). */
template <typename T, int V, typename I>
__device__ __forceinline__ void rs_pixel(const T *x, const rs_shape &s, I b, int oy, int ox, int k,
                                         float *v)
{
    int y0, y1, x0, x1;
    float dy, dx;
    rs_axis(s.ih, s.oh, s.align, s.half, oy, &y0, &y1, &dy);
    rs_axis(s.iw, s.ow, s.align, s.half, ox, &x0, &x1, &dx);
    const T *r0 = x + (b * s.ih + y0) * (I)s.iw * s.ch;
    const T *r1 = x + (b * s.ih + y1) * (I)s.iw * s.ch;
    float v00[V], v10[V], v01[V], v11[V];
    kr_ldv<V>(r0 + (I)x0 * s.ch + k, v00);
    kr_ldv<V>(r1 + (I)x0 * s.ch + k, v10);
    kr_ldv<V>(r0 + (I)x1 * s.ch + k, v01);
    kr_ldv<V>(r1 + (I)x1 * s.ch + k, v11);
    rs_blend<V>(v00, v10, v01, v11, dy, dx, v);
}

/* The cluster segment's interpolation of 4 channels from the taps v00 (y0, x0), v10 (y1, x0),
 * v01 (y0, x1), v11 (y1, x1) with weights dy, dx (rs_axis): w00 = (1 - dy)(1 - dx),
 * w10 = dy (1 - dx), w01 = (1 - dy) dx, w11 = dy dx, then v00 w00 + v10 w10 + v01 w01 + v11 w11
 * per channel. */
__device__ __forceinline__ float4 kr_bilerp4(float4 v00, float4 v10, float4 v01, float4 v11,
                                             float dy, float dx)
{
    const float w00 = (1 - dy) * (1 - dx), w10 = dy * (1 - dx), w01 = (1 - dy) * dx;
    const float w11 = dy * dx;
    float4 r;
    r.x = v00.x * w00 + v10.x * w10 + v01.x * w01 + v11.x * w11;
    r.y = v00.y * w00 + v10.y * w10 + v01.y * w01 + v11.y * w11;
    r.z = v00.z * w00 + v10.z * w10 + v01.z * w01 + v11.z * w11;
    r.w = v00.w * w00 + v10.w * w10 + v01.w * w01 + v11.w * w11;
    return r;
}

#endif
