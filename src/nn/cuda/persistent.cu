/*
 * The persistent kernel (see persistent.h): one cooperative launch walks the steps; every
 * thread of the grid takes units of every step (grid-stride), then all wait at a grid barrier
 * (cooperative_groups grid sync, which also orders the memory: a step reads what the steps
 * before it wrote, from any multiprocessor).
 *
 * The per-step code follows the per-node kernels' arithmetic (float accumulation, the same
 * epilogue: clamp, post function, residual) with one difference: a convolution output may be
 * reduced by `split` lanes of a warp (interleaved 4-channel chunks, then a butterfly of
 * shuffles in fixed order), so that small layers use the whole GPU. Activations are read with
 * plain loads (never the read-only path: they are written during the kernel).
 */
#include <cooperative_groups.h>

#include "nn/cuda/common.cuh"
#include "nn/cuda/persistent.h"

namespace cg = cooperative_groups;

__device__ __forceinline__ kr_epilogue step_epilogue(const kr_cuda_step &s)
{
    kr_epilogue e;
    e.lo = s.lo;
    e.hi = s.hi;
    e.post = s.post;
    e.res = s.res;
    return e;
}

/* Finishes output element @p i: bias, epilogue, residual, store. */
template <typename T>
__device__ __forceinline__ void finish(const kr_cuda_step &s, unsigned i, float acc)
{
    kr_epilogue e = step_epilogue(s);
    float v = kr_apply(e, acc);
    kr_add_res<T, 1>(e, i, &v);
    kr_st((T *)s.y + i, v);
}

template <typename T> __device__ void step_conv(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned S = (unsigned)s.split, lane = g % S;
    const unsigned first = (threadIdx.x & 31u) - lane;
    const unsigned mask = S == 32 ? 0xffffffffu : (((1u << S) - 1u) << first);
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * s.oc;
    const T *x = (const T *)s.x;
    for (unsigned u = g / S; u < units; u += nt / S) {
        int co = (int)(u % s.oc);
        unsigned p = u / s.oc;
        int ox = (int)(p % s.ow);
        unsigned q = p / s.ow;
        int oy = (int)(q % s.oh);
        int n = (int)(q / s.oh);
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = oy * s.sh - s.pt + ky * s.dh;
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                int ix = ox * s.sw - s.pl + kx * s.dw;
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                const T *xp = x + ((unsigned)(n * s.ih + iy) * s.iw + ix) * s.ic;
                const float *wp = s.w + ((unsigned)(co * s.kh + ky) * s.kw + kx) * s.ic;
                if (s.vec == 4) {
#pragma unroll 2
                    for (int c = (int)lane * 4; c < s.ic; c += 4 * (int)S) {
                        float a[4];
                        kr_ldv<4>(xp + c, a);
                        float4 b = *reinterpret_cast<const float4 *>(wp + c);
                        acc0 = fmaf(a[0], b.x, acc0);
                        acc1 = fmaf(a[1], b.y, acc1);
                        acc0 = fmaf(a[2], b.z, acc0);
                        acc1 = fmaf(a[3], b.w, acc1);
                    }
                } else {
                    for (int c = (int)lane; c < s.ic; c += (int)S)
                        acc0 = fmaf(kr_ld(xp + c), wp[c], acc0);
                }
            }
        }
        float acc = acc0 + acc1;
        for (unsigned off = S >> 1; off > 0; off >>= 1)
            acc += __shfl_xor_sync(mask, acc, off);
        if (lane == 0)
            finish<T>(s, u, acc + (s.bias ? s.bias[co] : 0.0f));
    }
}

template <typename T, int V>
__device__ void step_depthwise_v(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const int groups = s.oc / V, m = s.oc / s.ic;
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * groups;
    const T *x = (const T *)s.x;
    for (unsigned u = g; u < units; u += nt) {
        int co = (int)(u % groups) * V;
        unsigned p = u / groups;
        int ox = (int)(p % s.ow);
        unsigned q = p / s.ow;
        int oy = (int)(q % s.oh);
        int n = (int)(q / s.oh);
        float acc[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            acc[k] = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = oy * s.sh - s.pt + ky * s.dh;
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                int ix = ox * s.sw - s.pl + kx * s.dw;
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                const T *xp = x + ((unsigned)(n * s.ih + iy) * s.iw + ix) * s.ic;
                const float *wp = s.w + (ky * s.kw + kx) * s.oc + co;
                if (V == 4) { /* multiplier 1: input channel = output channel */
                    float a[4];
                    kr_ldv<4>(xp + co, a);
                    float4 b = *reinterpret_cast<const float4 *>(wp);
                    acc[0] = fmaf(a[0], b.x, acc[0]);
                    acc[1] = fmaf(a[1], b.y, acc[1]);
                    acc[2] = fmaf(a[2], b.z, acc[2]);
                    acc[3] = fmaf(a[3], b.w, acc[3]);
                } else {
                    acc[0] = fmaf(kr_ld(xp + co / m), wp[0], acc[0]);
                }
            }
        }
        unsigned i = u * V;
        kr_epilogue e = step_epilogue(s);
        float v[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = kr_apply(e, acc[k] + (s.bias ? s.bias[co + k] : 0.0f));
        kr_add_res<T, V>(e, i, v);
        kr_stv<V>((T *)s.y + i, v);
    }
}

template <typename T> __device__ void step_tconv(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * s.oc;
    const T *x = (const T *)s.x;
    for (unsigned u = g; u < units; u += nt) {
        int o = (int)(u % s.oc);
        unsigned p = u / s.oc;
        int ox = (int)(p % s.ow);
        unsigned q = p / s.ow;
        int oy = (int)(q % s.oh);
        int n = (int)(q / s.oh);
        float acc = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int ty = oy + s.pt - ky;
            if (ty < 0 || ty % s.sh)
                continue;
            int iy = ty / s.sh;
            if (iy >= s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                int tx = ox + s.pl - kx;
                if (tx < 0 || tx % s.sw)
                    continue;
                int ix = tx / s.sw;
                if (ix >= s.iw)
                    continue;
                const T *xp = x + ((unsigned)(n * s.ih + iy) * s.iw + ix) * s.ic;
                const float *wp = s.w + ((unsigned)(o * s.kh + ky) * s.kw + kx) * s.ic;
                if (s.vec == 4) {
                    for (int c = 0; c < s.ic; c += 4) {
                        float a[4];
                        kr_ldv<4>(xp + c, a);
                        float4 b = *reinterpret_cast<const float4 *>(wp + c);
                        acc = fmaf(a[0], b.x, acc);
                        acc = fmaf(a[1], b.y, acc);
                        acc = fmaf(a[2], b.z, acc);
                        acc = fmaf(a[3], b.w, acc);
                    }
                } else {
                    for (int c = 0; c < s.ic; c++)
                        acc = fmaf(kr_ld(xp + c), wp[c], acc);
                }
            }
        }
        finish<T>(s, u, acc + (s.bias ? s.bias[o] : 0.0f));
    }
}

template <typename T, int V>
__device__ void step_binary_v(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned per_item = (unsigned)s.count, units = per_item * s.batch / V;
    const T *a = (const T *)s.x, *b = (const T *)s.x2;
    if (s.bmode == 2) { /* the per-channel operand first: swap (ADD and MUL commute) */
        const T *t = a;
        a = b;
        b = t;
    }
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = g; u < units; u += nt) {
        unsigned i = u * V;
        float va[V], vb[V], v[V];
        kr_ldv<V>(a + i, va);
        if (s.bmode == 0) {
            kr_ldv<V>(b + i, vb);
        } else {
            unsigned off = s.batched ? (i / per_item) * (unsigned)s.cn : 0u;
            if (s.cn == 1) {
                float c = kr_ld(b + off);
#pragma unroll
                for (int k = 0; k < V; k++)
                    vb[k] = c;
            } else {
                kr_ldv<V>(b + off + i % (unsigned)s.oc, vb);
            }
        }
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = kr_apply(e, s.mul ? va[k] * vb[k] : va[k] + vb[k]);
        kr_add_res<T, V>(e, i, v);
        kr_stv<V>((T *)s.y + i, v);
    }
}

template <typename T> __device__ void step_unary(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned total = (unsigned)s.count * s.batch;
    kr_epilogue e = step_epilogue(s);
    for (unsigned i = g; i < total; i += nt)
        kr_st((T *)s.y + i, kr_apply(e, kr_ld((const T *)s.x + i)));
}

template <typename S, typename D>
__device__ void step_copy(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned total = (unsigned)s.count * s.batch;
    for (unsigned i = g; i < total; i += nt)
        kr_st((D *)s.y + i, kr_ld((const S *)s.x + i));
}

/* Sum of input (+ folded addend) at pixel p of item n, channel c. */
template <typename T>
__device__ __forceinline__ float pool_tap(const kr_cuda_step &s, unsigned n, unsigned p, int c)
{
    unsigned i = (n * (unsigned)(s.ih * s.iw) + p) * s.ic + c;
    float v = kr_ld((const T *)s.x + i);
    if (s.x2)
        v += kr_ld((const T *)s.x2 + i);
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* One thread per (item, slice, channel): channels fastest, so a warp reads whole pixels. */
template <typename T>
__device__ void step_pool_partial(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned pixels = (unsigned)(s.ih * s.iw);
    const unsigned units = (unsigned)s.batch * s.slices * s.ic;
    for (unsigned u = g; u < units; u += nt) {
        int c = (int)(u % s.ic);
        unsigned r = u / s.ic;
        unsigned sl = r % s.slices, n = r / s.slices;
        unsigned p0 = sl * s.slice, p1 = min(p0 + (unsigned)s.slice, pixels);
        float a0 = 0.0f, a1 = 0.0f;
        unsigned p = p0;
        for (; p + 1 < p1; p += 2) {
            a0 += pool_tap<T>(s, n, p, c);
            a1 += pool_tap<T>(s, n, p + 1, c);
        }
        if (p < p1)
            a0 += pool_tap<T>(s, n, p, c);
        s.scratch[u] = a0 + a1;
    }
}

/* A warp per (item, channel): lanes over the slices' partial sums (FINAL) or over the pixels
 * (POOL), then a butterfly; lane 0 writes the mean through the epilogue. */
template <typename T, int FINAL>
__device__ void step_pool_warp(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned lane = g & 31u, units = (unsigned)s.batch * s.ic;
    const unsigned pixels = (unsigned)(s.ih * s.iw);
    for (unsigned u = g >> 5; u < units; u += nt >> 5) {
        int c = (int)(u % s.ic);
        unsigned n = u / s.ic;
        float a = 0.0f;
        if (FINAL) {
            const float *part = s.scratch + (size_t)n * s.slices * s.ic + c;
            for (unsigned k = lane; k < (unsigned)s.slices; k += 32)
                a += part[(size_t)k * s.ic];
        } else {
            for (unsigned p = lane; p < pixels; p += 32)
                a += pool_tap<T>(s, n, p, c);
        }
        a = warp_sum(a);
        if (lane == 0) {
            kr_epilogue e = step_epilogue(s);
            e.res = NULL;
            kr_st((T *)s.y + u, kr_apply(e, a / (float)pixels));
        }
    }
}

__device__ __forceinline__ void rs_axis_p(int in, int out, int align, int half, int o, int *i0,
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

template <typename T, int V>
__device__ void step_resize_v(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const int chv = s.oc / V;
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * chv;
    const T *x = (const T *)s.x;
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = g; u < units; u += nt) {
        int k = (int)(u % chv) * V;
        unsigned p = u / chv;
        int ox = (int)(p % s.ow);
        unsigned q = p / s.ow;
        int oy = (int)(q % s.oh);
        unsigned n = q / s.oh;
        int y0, y1, x0, x1;
        float dy, dx;
        rs_axis_p(s.ih, s.oh, s.align, s.half, oy, &y0, &y1, &dy);
        rs_axis_p(s.iw, s.ow, s.align, s.half, ox, &x0, &x1, &dx);
        const T *r0 = x + (n * s.ih + y0) * (unsigned)s.iw * s.oc;
        const T *r1 = x + (n * s.ih + y1) * (unsigned)s.iw * s.oc;
        float v00[V], v10[V], v01[V], v11[V], v[V];
        kr_ldv<V>(r0 + (unsigned)x0 * s.oc + k, v00);
        kr_ldv<V>(r1 + (unsigned)x0 * s.oc + k, v10);
        kr_ldv<V>(r0 + (unsigned)x1 * s.oc + k, v01);
        kr_ldv<V>(r1 + (unsigned)x1 * s.oc + k, v11);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = kr_apply(e, v00[j] * (1 - dy) * (1 - dx) + v10[j] * dy * (1 - dx) +
                                   v01[j] * (1 - dy) * dx + v11[j] * dy * dx);
        kr_add_res<T, V>(e, u * V, v);
        kr_stv<V>((T *)s.y + u * V, v);
    }
}

template <typename T>
__global__ void __launch_bounds__(KR_CUDA_PERSISTENT_THREADS)
    persistent_kernel(const kr_cuda_step *__restrict__ steps, int n)
{
    cg::grid_group grid = cg::this_grid();
    const unsigned g = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    for (int i = 0; i < n; i++) {
        const kr_cuda_step &s = steps[i];
        switch (s.kind) {
        case KR_STEP_CONV: step_conv<T>(s, g, nt); break;
        case KR_STEP_DEPTHWISE:
            if (s.vec == 4)
                step_depthwise_v<T, 4>(s, g, nt);
            else
                step_depthwise_v<T, 1>(s, g, nt);
            break;
        case KR_STEP_TCONV: step_tconv<T>(s, g, nt); break;
        case KR_STEP_BINARY:
            if (s.vec == 4)
                step_binary_v<T, 4>(s, g, nt);
            else
                step_binary_v<T, 1>(s, g, nt);
            break;
        case KR_STEP_UNARY: step_unary<T>(s, g, nt); break;
        case KR_STEP_POOL_PARTIAL: step_pool_partial<T>(s, g, nt); break;
        case KR_STEP_POOL_FINAL: step_pool_warp<T, 1>(s, g, nt); break;
        case KR_STEP_POOL: step_pool_warp<T, 0>(s, g, nt); break;
        case KR_STEP_RESIZE:
            if (s.vec == 4)
                step_resize_v<T, 4>(s, g, nt);
            else
                step_resize_v<T, 1>(s, g, nt);
            break;
        case KR_STEP_COPY: step_copy<T, T>(s, g, nt); break;
        case KR_STEP_TO_F16: step_copy<float, __half>(s, g, nt); break;
        case KR_STEP_TO_F32: step_copy<__half, float>(s, g, nt); break;
        default: break;
        }
        if (i + 1 < n)
            grid.sync();
    }
}

extern "C" int kr_cuda_persistent_occupancy(int f16, int *cuda_error)
{
    int blocks = 0;
    cudaError_t e = f16 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                              &blocks, persistent_kernel<__half>, KR_CUDA_PERSISTENT_THREADS, 0)
                        : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                              &blocks, persistent_kernel<float>, KR_CUDA_PERSISTENT_THREADS, 0);
    *cuda_error = (int)e;
    return e == cudaSuccess ? blocks : 0;
}

extern "C" int kr_cuda_persistent_launch(const kr_cuda_step *steps, int n, int f16,
                                         unsigned blocks, void *stream)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(KR_CUDA_PERSISTENT_THREADS);
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaError_t e = f16 ? cudaLaunchKernelEx(&cfg, persistent_kernel<__half>, steps, n)
                        : cudaLaunchKernelEx(&cfg, persistent_kernel<float>, steps, n);
    return (int)e;
}
