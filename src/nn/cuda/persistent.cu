/*
 * The persistent kernel (see persistent.h): one cooperative launch walks the steps; every
 * block takes a contiguous share of every step's units (share_begin/share_end), then all wait
 * at a grid barrier (cooperative_groups grid sync, which also orders the memory: a step reads
 * what the steps before it wrote, from any multiprocessor). The (g, nt) arguments of the step
 * functions are the thread's grid index and the grid's size; only the split convolution uses
 * g, for its lane (g % split == threadIdx.x % split).
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
#include "nn/cuda/resize_bilinear.cuh"
#include "nn/cuda/transpose_conv_bias.cuh"

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

#define NT KR_CUDA_PERSISTENT_THREADS

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

/* Asks the block's L1 for @p bytes at @p p (constants: weights), one 128-byte line per thread,
 * without waiting: their latency overlaps what the block does next. */
__device__ __forceinline__ void prefetch_l1(const void *p, size_t bytes)
{
    for (size_t off = (size_t)threadIdx.x * 128; off < bytes; off += (size_t)NT * 128)
        asm volatile("prefetch.L1 [%0];" ::"l"((const char *)p + off));
}

/* Column sums of @p R rows of @p C values (row stride C; @p rows2, if not NULL, added
 * element-wise) by the whole block in a fixed order: lanes of a column take every lanes-th row,
 * then one thread per column adds the lanes' sums in order. Calls out(column, sum) from one
 * thread per column. Every thread of the block must call it (it synchronises the block). */
template <typename T, typename F>
__device__ void block_colsum(const T *rows, const T *rows2, int R, int C, float *red, F out)
{
    const int tid = threadIdx.x;
    for (int c0 = 0; c0 < C; c0 += NT) {
        const int cw = min(C - c0, NT), lanes = NT / cw, lane = tid / cw, c = c0 + tid % cw;
        float a0 = 0.0f, a1 = 0.0f;
        if (lane < lanes) {
            int r = lane;
#pragma unroll 4
            for (; r + lanes < R; r += 2 * lanes) {
                a0 += kr_ld(rows + (size_t)r * C + c);
                a1 += kr_ld(rows + (size_t)(r + lanes) * C + c);
                if (rows2) {
                    a0 += kr_ld(rows2 + (size_t)r * C + c);
                    a1 += kr_ld(rows2 + (size_t)(r + lanes) * C + c);
                }
            }
            if (r < R) {
                a0 += kr_ld(rows + (size_t)r * C + c);
                if (rows2)
                    a0 += kr_ld(rows2 + (size_t)r * C + c);
            }
        }
        red[tid] = a0 + a1;
        __syncthreads();
        if (tid < cw) {
            float sum = 0.0f;
            for (int l = 0; l < lanes; l++)
                sum += red[l * cw + tid];
            out(c0 + tid, sum);
        }
        __syncthreads();
    }
}

/* A dense layer on shared memory, by the whole block: out[n][j] = epilogue(b[j] + sum_k
 * W[j][k] in[n][k]) for @p batch items; L lanes (a power of two) share a dot product and add
 * their parts with shuffles in a fixed order. Synchronises the block at the end. */
__device__ __noinline__ void block_dense(const float *in, int K, float *out, int J, int batch, const float *W,
                            const float *b, float lo, float hi, int post)
{
    /* lanes per output from one item's sizes, so that the order is the same at every batch */
    int L = 1;
    while (L < 32 && J * L * 2 <= NT && 8 * L <= K)
        L *= 2;
    const int tid = threadIdx.x, lane = tid % L, units = batch * J;
    const unsigned first = (unsigned)((tid & 31) - lane);
    const unsigned mask = L == 32 ? 0xffffffffu : (((1u << L) - 1u) << first);
    kr_epilogue e;
    e.lo = lo, e.hi = hi, e.post = post, e.res = NULL;
    for (int u = tid / L; u < units; u += NT / L) {
        int n = u / J, j = u % J;
        const float *wr = W + (size_t)j * K, *xr = in + n * K;
        float a0 = 0.0f, a1 = 0.0f;
        if (K % 4 == 0) { /* rows of 16-byte multiples: vector weight loads, all in flight */
#pragma unroll 4
            for (int k = lane * 4; k < K; k += 4 * L) {
                float4 w = *reinterpret_cast<const float4 *>(wr + k);
                a0 = fmaf(w.x, xr[k], a0);
                a1 = fmaf(w.y, xr[k + 1], a1);
                a0 = fmaf(w.z, xr[k + 2], a0);
                a1 = fmaf(w.w, xr[k + 3], a1);
            }
        } else {
            for (int k = lane; k < K; k += L)
                a0 = fmaf(wr[k], xr[k], a0);
        }
        float a = a0 + a1;
        for (int off = L >> 1; off > 0; off >>= 1)
            a += __shfl_xor_sync(mask, a, off);
        if (lane == 0)
            out[u] = kr_apply(e, a + (b ? b[j] : 0.0f));
    }
    __syncthreads();
}

/* The squeeze-and-excitation prologue (persistent.h): returns the last layer's output,
 * [batch][se_out[se_layers - 1]] in @p buf. */
__device__ __noinline__ const float *se_prologue(const kr_cuda_step &s, float *buf, float *red)
{
    const int C = s.se_c;
    for (int l = 0, k = C; l < s.se_layers; k = s.se_out[l], l++)
        prefetch_l1(s.se_w[l], (size_t)s.se_out[l] * k * sizeof(float));
    float *pooled = buf;
    const float inv = 1.0f / (float)s.se_pixels;
    for (int n = 0; n < s.batch; n++)
        block_colsum<float>(s.se_partial + (size_t)n * s.se_slices * C, (const float *)NULL,
                            s.se_slices, C, red,
                            [&](int c, float v) { pooled[n * C + c] = v * inv; });
    const float *in = pooled;
    float *out = pooled + s.batch * C;
    int K = C;
    for (int l = 0; l < s.se_layers; l++) {
        block_dense(in, K, out, s.se_out[l], s.batch, s.se_w[l], s.se_b[l], s.se_lo[l],
                    s.se_hi[l], s.se_post[l]);
        in = out;
        K = s.se_out[l];
        out += s.batch * K;
    }
    return in;
}

template <typename T, int KS, int IC>
__device__ __noinline__ void step_conv_g4(const kr_cuda_step &s, unsigned g, unsigned nt, const float *sc);

template <typename T>
__device__ __noinline__ void step_conv(const kr_cuda_step &s, unsigned g, unsigned nt, float *se_buf,
                          float *red)
{
    /* a folded squeeze-and-excitation MUL: input channel c of item n scaled by sc[n][c] */
    if (s.se_layers) /* this step's weights load while the prologue runs */
        prefetch_l1(s.w, (size_t)s.oc * s.kh * s.kw * s.ic * sizeof(float));
    const float *sc = s.se_layers ? se_prologue(s, se_buf, red) : NULL;
    if (s.group == 4) {
        if (s.kh == 1 && s.kw == 1)
            step_conv_g4<T, 1, 0>(s, g, nt, sc);
        else if (s.kh == 3 && s.kw == 3 && s.ic == 3) /* an RGB stem: all 27 loads in flight */
            step_conv_g4<T, 3, 3>(s, g, nt, sc);
        else
            step_conv_g4<T, 0, 0>(s, g, nt, sc);
        return;
    }
    const unsigned S = (unsigned)s.split, lane = g % S;
    const unsigned first = (threadIdx.x & 31u) - lane;
    const unsigned mask = S == 32 ? 0xffffffffu : (((1u << S) - 1u) << first);
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * s.oc;
    const T *x = (const T *)s.x;
    for (unsigned u = share_begin(units) + threadIdx.x / S, end = share_end(units); u < end;
         u += blockDim.x / S) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)s.oc, s, &co, &ox, &oy, &n);
        const float *scn = sc ? sc + n * s.ic : NULL;
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
#pragma unroll 4
                    for (int c = (int)lane * 4; c < s.ic; c += 4 * (int)S) {
                        float a[4];
                        kr_ldv<4>(xp + c, a);
                        if (scn) {
                            a[0] *= scn[c], a[1] *= scn[c + 1];
                            a[2] *= scn[c + 2], a[3] *= scn[c + 3];
                        }
                        float4 b = *reinterpret_cast<const float4 *>(wp + c);
                        acc0 = fmaf(a[0], b.x, acc0);
                        acc1 = fmaf(a[1], b.y, acc1);
                        acc0 = fmaf(a[2], b.z, acc0);
                        acc1 = fmaf(a[3], b.w, acc1);
                    }
                } else {
                    for (int c = (int)lane; c < s.ic; c += (int)S)
                        acc0 = fmaf(kr_ld(xp + c) * (scn ? scn[c] : 1.0f), wp[c], acc0);
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

/* A convolution whose outputs alone fill the GPU (split 1, group 4): a thread per pixel and 4
 * output channels, so that each input value is loaded once for 4 dot products, with the
 * weights transposed at set-up (s.wt) so that a warp's weight loads are coalesced. KS, IC: the
 * kernel size and input channels when fixed at compile time (1x1 any; 3x3 on 3 channels, the
 * stem: every load unrolled), else 0. */
template <typename T, int KS, int IC>
__device__ __noinline__ void step_conv_g4(const kr_cuda_step &s, unsigned g, unsigned nt, const float *sc)
{
    const int kh = KS ? KS : s.kh, kw = KS ? KS : s.kw, ic = IC ? IC : s.ic, groups = s.oc / 4;
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * groups;
    const T *x = (const T *)s.x;
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = share_begin(units) + threadIdx.x, end = share_end(units); u < end;
         u += blockDim.x) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)groups, s, &co, &ox, &oy, &n);
        co *= 4;
        const float *scn = sc ? sc + n * s.ic : NULL;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int ky = 0; ky < kh; ky++) {
#pragma unroll
            for (int kx = 0; kx < kw; kx++) {
                bool inside;
                const T *xp = x + tap_pixel(s, n, oy, ox, ky, kx, &inside) * ic;
                /* weights [tap][ic][oc]: the 4 outputs of a thread are one 16-byte load, and
                 * the threads of a warp (neighbouring output groups) read neighbouring bytes */
                const float *wr = s.wt + (size_t)((ky * kw + kx) * ic) * s.oc + co;
                if (s.vec == 4) {
#pragma unroll 2
                    for (int c = 0; c < ic; c += 4) {
                        float a[4];
                        kr_ldv<4>(xp + c, a);
#pragma unroll
                        for (int t = 0; t < 4; t++) {
                            float4 b = *reinterpret_cast<const float4 *>(wr + (size_t)(c + t) * s.oc);
                            float xv = inside ? (scn ? a[t] * scn[c + t] : a[t]) : 0.0f;
                            acc[0] = fmaf(xv, b.x, acc[0]);
                            acc[1] = fmaf(xv, b.y, acc[1]);
                            acc[2] = fmaf(xv, b.z, acc[2]);
                            acc[3] = fmaf(xv, b.w, acc[3]);
                        }
                    }
                } else {
#pragma unroll
                    for (int c = 0; c < ic; c++) {
                        float xv = kr_ld(xp + c) * (scn ? scn[c] : 1.0f);
                        xv = inside ? xv : 0.0f;
                        float4 b = *reinterpret_cast<const float4 *>(wr + (size_t)c * s.oc);
                        acc[0] = fmaf(xv, b.x, acc[0]);
                        acc[1] = fmaf(xv, b.y, acc[1]);
                        acc[2] = fmaf(xv, b.z, acc[2]);
                        acc[3] = fmaf(xv, b.w, acc[3]);
                    }
                }
            }
        }
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            v[j] = kr_apply(e, acc[j] + (s.bias ? s.bias[co + j] : 0.0f));
        kr_add_res<T, 4>(e, u * 4, v);
        kr_stv<4>((T *)s.y + u * 4, v);
    }
}

/* Depthwise: a thread per pixel and V channels; KS the kernel size when 3 or 5 (taps unrolled),
 * else 0: every tap's load can be in flight before the sums (taps outside the input read a
 * clamped pixel and add 0, without a branch). */
template <typename T, int V, int KS>
__device__ __noinline__ void step_depthwise_v(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const int kh = KS ? KS : s.kh, kw = KS ? KS : s.kw;
    const int groups = s.oc / V, m = s.oc / s.ic;
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * groups;
    const T *x = (const T *)s.x;
    for (unsigned u = share_begin(units) + threadIdx.x, end = share_end(units); u < end;
         u += blockDim.x) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)groups, s, &co, &ox, &oy, &n);
        co *= V;
        float acc[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            acc[k] = 0.0f;
#pragma unroll
        for (int ky = 0; ky < kh; ky++) {
#pragma unroll
            for (int kx = 0; kx < kw; kx++) {
                bool inside;
                const T *xp = x + tap_pixel(s, n, oy, ox, ky, kx, &inside) * s.ic;
                const float *wp = s.w + (ky * kw + kx) * s.oc + co;
                float a[V];
                if (V == 4) { /* multiplier 1: input channel = output channel */
                    kr_ldv<4>(xp + co, a); /* a clamped pixel outside the input, then 0 */
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        a[k] = inside ? a[k] : 0.0f;
                    float4 b = *reinterpret_cast<const float4 *>(wp);
                    acc[0] = fmaf(a[0], b.x, acc[0]);
                    acc[1] = fmaf(a[1], b.y, acc[1]);
                    acc[2] = fmaf(a[2], b.z, acc[2]);
                    acc[3] = fmaf(a[3], b.w, acc[3]);
                } else {
                    a[0] = inside ? kr_ld(xp + co / m) : 0.0f;
                    acc[0] = fmaf(a[0], wp[0], acc[0]);
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

template <typename T> __device__ __noinline__ void step_tconv(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * s.oc;
    const T *x = (const T *)s.x;
    const tc_shape shape = {s.ih, s.iw, s.ic, s.oh, s.ow, s.oc, s.kh, s.kw, s.sh, s.sw, s.pt, s.pl};
    for (unsigned u = share_begin(units) + threadIdx.x, end = share_end(units); u < end;
         u += blockDim.x) {
        int o, ox, oy, n;
        unit_pos(u, (unsigned)s.oc, s, &o, &ox, &oy, &n);
        float acc = s.vec == 4 ? tc_gather<T, 4, unsigned>(x, s.w, shape, (unsigned)n, oy, ox, o)
                               : tc_gather<T, 1, unsigned>(x, s.w, shape, (unsigned)n, oy, ox, o);
        finish<T>(s, u, acc + (s.bias ? s.bias[o] : 0.0f));
    }
}

template <typename T, int V>
__device__ __noinline__ void step_binary_v(const kr_cuda_step &s, unsigned g, unsigned nt, float *se_buf,
                              float *red)
{
    /* squeeze-and-excitation: the per-channel operand is computed here, [batch][oc] */
    const float *sc = s.se_layers ? se_prologue(s, se_buf, red) : NULL;
    const unsigned per_item = (unsigned)s.count, units = per_item * s.batch / V;
    const T *a = (const T *)s.x, *b = (const T *)s.x2;
    if (s.bmode == 2) { /* the per-channel operand first: swap (ADD and MUL commute) */
        const T *t = a;
        a = b;
        b = t;
    }
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = share_begin(units) + threadIdx.x, end = share_end(units); u < end;
         u += blockDim.x) {
        unsigned i = u * V;
        float va[V], vb[V], v[V];
        kr_ldv<V>(a + i, va);
        if (s.bmode == 0) {
            kr_ldv<V>(b + i, vb);
        } else if (sc) {
            const float *scp = sc + (i / per_item) * (unsigned)s.oc + i % (unsigned)s.oc;
#pragma unroll
            for (int k = 0; k < V; k++)
                vb[k] = scp[k];
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

template <typename T> __device__ __noinline__ void step_unary(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned total = (unsigned)s.count * s.batch;
    kr_epilogue e = step_epilogue(s);
    for (unsigned i = share_begin(total) + threadIdx.x, end = share_end(total); i < end;
         i += blockDim.x)
        kr_st((T *)s.y + i, kr_apply(e, kr_ld((const T *)s.x + i)));
}

template <typename S, typename D>
__device__ __noinline__ void step_copy(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const unsigned total = (unsigned)s.count * s.batch;
    for (unsigned i = share_begin(total) + threadIdx.x, end = share_end(total); i < end;
         i += blockDim.x)
        kr_st((D *)s.y + i, kr_ld((const S *)s.x + i));
}

/* A block per (item, slice): the slice's channel sums (input + folded addend) to scratch. */
template <typename T> __device__ __noinline__ void step_pool_partial(const kr_cuda_step &s, float *red)
{
    const unsigned pixels = (unsigned)(s.ih * s.iw), units = (unsigned)s.batch * s.slices;
    for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
        unsigned n = u / s.slices, p0 = (u % s.slices) * (unsigned)s.slice;
        int rows = (int)min((unsigned)s.slice, pixels - p0);
        size_t off = ((size_t)n * pixels + p0) * s.ic;
        float *dst = s.scratch + (size_t)u * s.ic;
        block_colsum<T>((const T *)s.x + off, s.x2 ? (const T *)s.x2 + off : (const T *)NULL, rows,
                        s.ic, red, [&](int c, float v) { dst[c] = v; });
    }
}

/* A block per item: the mean from the slices' sums, through the epilogue. */
template <typename T> __device__ __noinline__ void step_pool_final(const kr_cuda_step &s, float *red)
{
    kr_epilogue e = step_epilogue(s);
    e.res = NULL;
    const float inv = 1.0f / (float)(s.ih * s.iw);
    for (unsigned n = blockIdx.x; n < (unsigned)s.batch; n += gridDim.x) {
        T *y = (T *)s.y + (size_t)n * s.ic;
        block_colsum<float>(s.scratch + (size_t)n * s.slices * s.ic, (const float *)NULL,
                            s.slices, s.ic, red,
                            [&](int c, float v) { kr_st(y + c, kr_apply(e, v * inv)); });
    }
}

template <typename T, int V>
__device__ __noinline__ void step_resize_v(const kr_cuda_step &s, unsigned g, unsigned nt)
{
    const int chv = s.oc / V;
    const unsigned units = (unsigned)s.batch * s.oh * s.ow * chv;
    const T *x = (const T *)s.x;
    const rs_shape shape = {s.ih, s.iw, s.oc, s.oh, s.ow, s.align, s.half};
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = share_begin(units) + threadIdx.x, end = share_end(units); u < end;
         u += blockDim.x) {
        int k, ox, oy, n;
        unit_pos(u, (unsigned)chv, s, &k, &ox, &oy, &n);
        k *= V;
        float v[V];
        rs_pixel<T, V, unsigned>(x, shape, (unsigned)n, oy, ox, k, v);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = kr_apply(e, v[j]);
        kr_add_res<T, V>(e, u * V, v);
        kr_stv<V>((T *)s.y + u * V, v);
    }
}

/* Copies step @p src into shared memory with the block's first threads (8-byte words). */
__device__ __forceinline__ void load_step(kr_cuda_step *dst, const kr_cuda_step *src)
{
    const int words = (int)(sizeof(kr_cuda_step) / 8);
    if ((int)threadIdx.x < words)
        reinterpret_cast<unsigned long long *>(dst)[threadIdx.x] =
            reinterpret_cast<const unsigned long long *>(src)[threadIdx.x];
}

template <typename T>
__global__ void __launch_bounds__(NT)
    persistent_kernel(const kr_cuda_step *__restrict__ steps, int n, long long *clocks)
{
    static_assert(sizeof(kr_cuda_step) % 8 == 0 && sizeof(kr_cuda_step) / 8 <= NT,
                  "a step is copied by one 8-byte word per thread");
    /* the current step and the next, in shared memory: the next one is fetched before the
     * barrier, so no step waits for its descriptor */
    __shared__ kr_cuda_step desc[2];
    __shared__ float red[NT];
    __shared__ float se_buf[KR_CUDA_SE_FLOATS];
    cg::grid_group grid = cg::this_grid();
    const unsigned g = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    const int timing = clocks && blockIdx.x == 0 && threadIdx.x == 0;
    load_step(&desc[0], &steps[0]);
    __syncthreads();
    for (int i = 0; i < n; i++) {
        const kr_cuda_step &s = desc[i & 1];
        if (timing)
            clocks[4 * i] = clock64();
        switch (s.kind) {
        case KR_STEP_CONV: step_conv<T>(s, g, nt, se_buf, red); break;
        case KR_STEP_DEPTHWISE:
            if (s.vec == 4 && s.kh == 3 && s.kw == 3)
                step_depthwise_v<T, 4, 3>(s, g, nt);
            else if (s.vec == 4 && s.kh == 5 && s.kw == 5)
                step_depthwise_v<T, 4, 5>(s, g, nt);
            else if (s.vec == 4)
                step_depthwise_v<T, 4, 0>(s, g, nt);
            else
                step_depthwise_v<T, 1, 0>(s, g, nt);
            break;
        case KR_STEP_TCONV: step_tconv<T>(s, g, nt); break;
        case KR_STEP_BINARY:
            if (s.vec == 4)
                step_binary_v<T, 4>(s, g, nt, se_buf, red);
            else
                step_binary_v<T, 1>(s, g, nt, se_buf, red);
            break;
        case KR_STEP_UNARY: step_unary<T>(s, g, nt); break;
        case KR_STEP_POOL_PARTIAL: step_pool_partial<T>(s, red); break;
        case KR_STEP_POOL_FINAL: step_pool_final<T>(s, red); break;
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
        if (clocks) { /* the profile: the first thread's own work, the block, the grid */
            if (timing)
                clocks[4 * i + 1] = clock64();
            __syncthreads();
            if (timing)
                clocks[4 * i + 2] = clock64();
        }
        if (i + 1 < n) {
            load_step(&desc[(i + 1) & 1], &steps[i + 1]);
            grid.sync(); /* also a block barrier: the next descriptor is visible */
        }
        if (timing)
            clocks[4 * i + 3] = clock64();
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
                                         unsigned blocks, long long *clocks, void *stream)
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
    cudaError_t e = f16 ? cudaLaunchKernelEx(&cfg, persistent_kernel<__half>, steps, n, clocks)
                        : cudaLaunchKernelEx(&cfg, persistent_kernel<float>, steps, n, clocks);
    return (int)e;
}
