/*
 * What the persistent kernel's step functions share (persistent.cu includes the step files in
 * order: step_common.cuh, squeeze.cuh, steps_conv.cuh, steps.cuh): the step's epilogue, the
 * block's share of a step's units, unit and tap positions, channel loads, residuals.
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_STEP_COMMON_CUH
#define KEYER_NN_CUDA_PERSISTENT_STEP_COMMON_CUH

#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/persistent/persistent.h"

#define NT KR_CUDA_PERSISTENT_THREADS

__device__ __forceinline__ kr_epilogue step_epilogue(const kr_cuda_step &s)
{
    kr_epilogue e;
    e.lo = s.lo;
    e.hi = s.hi;
    e.post = s.post;
    e.res = s.res;
    return e;
}

/* Finishes output element @p i: bias, epilogue, residual (T), store (TY). */
template <typename T, typename TY = T>
__device__ __forceinline__ void finish(const kr_cuda_step &s, unsigned i, float acc)
{
    kr_epilogue e = step_epilogue(s);
    float v = kr_apply(e, acc);
    kr_add_res<T, 1>(e, i, &v);
    kr_st((TY *)s.y + i, v);
}

/* Finishes the V output elements from @p idx: epilogue @p e (clamp, post function), its
 * residual, store (resize and max pool steps). */
template <typename T, int V>
__device__ __forceinline__ void finish_v(const kr_cuda_step &s, const kr_epilogue &e,
                                         unsigned idx, float *v)
{
#pragma unroll
    for (int k = 0; k < V; k++)
        v[k] = kr_apply(e, v[k]);
    kr_add_res<T, V>(e, idx, v);
    kr_stv<V>((T *)s.y + idx, v);
}

/* This block's contiguous share [share_begin, share_end) of a step's @p units work units:
 * every block gets work, and a warp's units are neighbours (coalesced). A grid-stride loop put
 * all the units of a small step on the first blocks, so on a few multiprocessors. */
__device__ __forceinline__ unsigned share_begin(unsigned units)
{
    unsigned chunk = (units + gridDim.x - 1) / gridDim.x;
    return min(blockIdx.x * chunk, units);
}
__device__ __forceinline__ unsigned share_end(unsigned units)
{
    unsigned chunk = (units + gridDim.x - 1) / gridDim.x;
    return min(blockIdx.x * chunk + chunk, units);
}

/* Position of unit @p u of an output [batch][oh][ow][groups]: group, column, row, item. */
__device__ __forceinline__ void unit_pos(unsigned u, unsigned groups, const kr_cuda_step &s,
                                         int *gi, int *ox, int *oy, int *n)
{
    *gi = (int)(u % groups);
    unsigned p = u / groups;
    *ox = (int)(p % (unsigned)s.ow);
    unsigned q = p / (unsigned)s.ow;
    *oy = (int)(q % (unsigned)s.oh);
    *n = (int)(q / (unsigned)s.oh);
}

/* Input pixel index of tap (ky, kx) of output (oy, ox) of item n, clamped into the input, and
 * in *inside whether the tap really is inside (else it counts as 0). Taps outside read a
 * clamped pixel instead of branching, so the loads of all taps can be in flight together. */
__device__ __forceinline__ unsigned tap_pixel(const kr_cuda_step &s, int n, int oy, int ox,
                                              int ky, int kx, bool *inside)
{
    int iy = oy * s.sh - s.pt + ky * s.dh, ix = ox * s.sw - s.pl + kx * s.dw;
    *inside = (unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw;
    int cy = min(max(iy, 0), s.ih - 1), cx = min(max(ix, 0), s.iw - 1);
    return (unsigned)(n * s.ih + cy) * s.iw + cx;
}


/* Input channels a convolution thread loads before using them (registers: CH floats; 32
 * spilled under the 128-register limit of two blocks per multiprocessor). */
#define CH 16

/* a[0..N) = input channels [c0, c0 + N) of one pixel, times the excitation @p scn and plus
 * the folded ADD's operand @p xap where set; 4-element loads, all issued before any use. */
template <typename T, int N, typename TX>
__device__ __forceinline__ void load_channels(const TX *xp, const T *xap, const float *scn,
                                              int c0, float *a)
{
#pragma unroll
    for (int j = 0; j < N; j += 4)
        kr_ldv<4>(xp + c0 + j, a + j);
    if (scn) {
#pragma unroll
        for (int j = 0; j < N; j++)
            a[j] *= scn[c0 + j];
    }
    if (xap) {
#pragma unroll
        for (int j = 0; j < N; j += 4) {
            float b[4];
            kr_ldv<4>(xap + c0 + j, b);
            a[j] += b[0], a[j + 1] += b[1], a[j + 2] += b[2], a[j + 3] += b[3];
        }
    }
}

/* acc[0..4) += xv * the 4 weights at @p w (one 16-byte load; ops/conv_2d.cuh, kr_fma4). */
__device__ __forceinline__ void fma4(float *acc, float xv, const float *w)
{
    kr_fma4(acc, xv, *reinterpret_cast<const float4 *>(w));
}

/* The folded residual of @p V outputs at @p idx, loaded before the sums (0 without one). */
template <typename T, int V>
__device__ __forceinline__ void early_res(const kr_cuda_step &s, unsigned idx, float *r)
{
    if (s.res) {
        kr_ldv<V>((const T *)s.res + idx, r);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            r[k] = 0.0f;
    }
}

/* A convolution's residual (early_res), which may have only res_c of the oc channels (a
 * channel PAD's input; V divides res_c): the others are 0. */
template <typename T, int V>
__device__ __forceinline__ void conv_res(const kr_cuda_step &s, unsigned idx, float *r)
{
    if (!s.res_c) {
        early_res<T, V>(s, idx, r);
        return;
    }
    const unsigned c = idx % (unsigned)s.oc;
    if (c < (unsigned)s.res_c) {
        kr_ldv<V>((const T *)s.res + idx / (unsigned)s.oc * (unsigned)s.res_c + c, r);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            r[k] = 0.0f;
    }
}

/* The biases of output channels co..co+3 of a group-4 unit (0 without a bias). */
__device__ __forceinline__ void g4_bias(const kr_cuda_step &s, int co, float *bz)
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        bz[j] = s.bias ? s.bias[co + j] : 0.0f;
}

/* Finishes group-4 unit @p u (the block's units from @p begin): bias @p bz, epilogue @p e,
 * residual @p r (if the step has one), the values as stored into @p tile (a pool tail's slice,
 * if not NULL), stored. */
template <typename T, bool PRE = false>
__device__ __forceinline__ void g4_finish(const kr_cuda_step &s, const kr_epilogue &e, unsigned u,
                                          unsigned begin, const float *acc, const float *bz,
                                          const float *r, float *tile)
{
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) { /* PRE: an ADD's activation after the residual (res_pre) */
        v[j] = kr_conv_out(acc[j], bz[j], r[j], PRE, [&] { return s.res != NULL; },
                           [&](float a) { return kr_apply(e, a); });
        if (tile)
            tile[(u - begin) * 4 + j] = kr_stored<T>(v[j]);
    }
    kr_stv<4>((T *)s.y + u * 4, v);
}

#endif
