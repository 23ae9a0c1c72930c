/*
 * RESIZE_BILINEAR's arithmetic, shared by its kernel (resize_bilinear.cu) and the persistent
 * schedule's step (persistent.cu): exactly src/nn/reference/resize_bilinear.c (TFLite's
 * reference kernel, in float).
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

/* Channels k..k+V-1 of output pixel (oy, ox) of item b, before any epilogue: the four taps
 * weighted in the reference's order. */
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
#pragma unroll
    for (int j = 0; j < V; j++)
        v[j] = v00[j] * (1 - dy) * (1 - dx) + v10[j] * dy * (1 - dx) + v01[j] * (1 - dy) * dx +
               v11[j] * dy * dx;
}

#endif
