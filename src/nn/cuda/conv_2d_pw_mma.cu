/*
 * Pointwise (1x1, stride 1, unpadded) CONV_2D layers of the TFLite models in half precision on
 * the tensor cores (issue 27): Y[m, n] = act(sum_k X[m, k] W[n, k] + bias[n]) (+ residual), with
 * m the pixels of the NHWC tensor (whole rows of K halves) and W the layer's OHWI float weights,
 * each split into two halves, hi = half(w) and lo = half(w - hi), both multiplied on the tensor
 * cores into the same float sums (so the weights are not rounded to half on top of the
 * activations: the layer's error is that of the CUDA-core kernels, whose weights are float).
 *
 * At batch 256 these layers ran on the CUDA cores (conv_2d.cu: the narrow, grouped and tile
 * paths and the GEMM) at a fraction of both their memory floor and the FMA peak; here the
 * multiply-adds cost next to nothing and the layer is a copy of its input rows into shared memory
 * and of its output rows out.
 *
 * A block of 4 warps takes a tile of BM = 16 MI x 4 pixel rows: it copies the tile's rows (one
 * contiguous run of BM x K halves) into shared memory with 16-byte loads (4- or 2-byte loads
 * where K is no multiple of 8: BlazeFace's 28, 36, 42 channels), rows padded to KP + 8
 * halves (KP: K rounded up to 16, the columns past K zero) so that ldmatrix reads without bank
 * conflicts. Warp w computes rows [16 MI w, 16 MI (w + 1)) of the tile, 32 output channels at a
 * time: per 16-deep chunk of k, one ldmatrix.x4 of A per 16 rows and two of each weight half
 * (4 n8 tiles of the weights, staged once per block as hi and lo [NP][KP + 8] halves, zero past
 * N and K, copied from the hi and lo halves made once at set-up, kr_cuda_op.w16), then
 * mma.sync.m16n8k8 (f16 in, f32 accumulate) for the chunk's lower 8 k with hi, with lo, then
 * the upper 8 k likewise. The
 * accumulators get the bias, the clamp and the folded activation in registers, go through a
 * per-warp float staging area, and the warp writes whole 64-byte pieces of output rows (adding a
 * folded residual there) with 16-byte stores (where N is no multiple of 8: pairs of channels,
 * 4-byte stores, the folded operand's loads all issued first; 2-byte stores where N is odd or
 * a pointer unaligned; a warp still writing contiguous runs). The grid is one wave of resident
 * blocks, each looping over tiles with the weights staged once; a layer with few tiles
 * (pwm_groups) runs its 32-channel passes in separate blocks, each staging only its own 32
 * channels' weights. A MUL by an excitation's channel vector or a bilinear
 * upsample folded into the layer (fusion.h) is computed in the copy into shared memory, each
 * value rounded to half as the folded node would have stored it, so the results are those of
 * the unfolded nodes bit for bit (pwm_scale_tile: a thread's loads for 4 vectors in flight
 * together; pwm_resize_tile: each row's taps and weights once per tile, then 16-byte taps).
 *
 * m16n8k8 and ldmatrix exist from compute 7.5, so every class keyer supports (7.5 and newer)
 * takes the same instructions for the same layers and computes the same sums: the choice is by
 * layer shape only (kr_cuda_conv_2d_pw_mma_fits), never by batch or device, and an item's result
 * is the same at every batch size and under every emulated class.
 *
 * Sum order (ops/conv_2d.cuh, "tensor-core pointwise"): each weight as hi + lo halves; from 0,
 * the 8-deep chunks of k in order, each chunk's 8 products with hi summed as the tensor core sums
 * them (float accumulation; k past K: zero products), then its 8 products with lo likewise;
 * then + bias, clamp, post function, + residual.
 */
#include "nn/cuda/common.cuh"
#include "nn/cuda/ops/resize_bilinear.cuh"
#include "nn/cuda/tuning.h"

#include <math.h>
#include <string.h>

#define PWM_THREADS 128
#define PWM_WARPS 4
#define PWM_NC 32 /* output channels per warp pass: 4 n8 tiles */
#define PWM_LDS (PWM_NC + 4) /* floats per staging row */

/* 16 bytes from global @p src to shared @p dst (@p sdst its shared address), or 16 zero bytes
 * where !ok: asynchronously on compute 8.0+ (kr_cp_async_commit / pwm_wait1), else at once. */
__device__ __forceinline__ void pwm_cp16(void *dst, unsigned sdst, const void *src, bool ok)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    (void)dst;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sdst), "l"(src),
                 "r"(ok ? 16 : 0));
#else
    (void)sdst;
    *reinterpret_cast<uint4 *>(dst) =
        ok ? *reinterpret_cast<const uint4 *>(src) : make_uint4(0u, 0u, 0u, 0u);
#endif
}

/* Waits until at most one committed group of this thread is still in flight. */
__device__ __forceinline__ void pwm_wait1()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}

/* Shared memory of a block: A tile [BM][KP + 8] halves (two of them for PWM_PIPE), the
 * weights' high then low halves [2][NP][KP + 8], bias [NP] floats, per-warp staging
 * [16 MI][PWM_LDS] floats. */
struct pwm_layout {
    int KP, NP, lda, bm;
    size_t a_off, w_off, b_off, s_off, bytes;
};

static pwm_layout pwm_plan(int K, int N, int mi, int nbuf = 1)
{
    pwm_layout l;
    l.KP = (K + 15) / 16 * 16;
    l.NP = (N + PWM_NC - 1) / PWM_NC * PWM_NC;
    l.lda = l.KP + 8;
    l.bm = 16 * mi * PWM_WARPS;
    l.a_off = 0;
    l.w_off = l.a_off + (size_t)nbuf * l.bm * l.lda * 2;
    l.b_off = l.w_off + (size_t)2 * l.NP * l.lda * 2;
    l.s_off = l.b_off + (size_t)l.NP * 4;
    l.bytes = l.s_off + (size_t)PWM_WARPS * 16 * mi * PWM_LDS * 4;
    return l;
}

/* Where a layer's input values come from (the kernel's SRC): the input tensor as stored (K a
 * multiple of 8: 16-byte loads; PWM_ODD: any K, 2-byte loads (4-byte ones where K is even and the
 * input 4-byte aligned), each warp's still contiguous
 * runs), a folded excitation MUL (kr_cuda_op.scale: act(x * vec) + addend per element,
 * pwm_scale_tile), a folded RESIZE_BILINEAR (kr_cuda_op.rs: rs_pixel's values from the resize's
 * source, then its post function, pwm_resize_tile), each value rounded to half as the folded
 * node stores it; or (PWM_STEM3, PWM_STEM5) the 3x3 or 5x5 window of an RGB stem, k =
 * (ky, kx, c) as the OHWI weights, zero outside the image; PWM_PIPE: as PWM_PLAIN, the next
 * tile's rows copied into a second buffer with cp.async (compute 8.0+; plain loads on 7.5)
 * while the current one is computed. */
enum { PWM_PLAIN = 0, PWM_SCALE = 1, PWM_RESIZE = 2, PWM_ODD = 3, PWM_STEM3 = 5, PWM_STEM5 = 6,
       PWM_PIPE = 7 };

struct pwm_source {
    const __half *vec, *addend;
    int stride, pixels; /* vec elements per item (0: one vector), pixels per item */
    kr_epilogue e;      /* the folded node's clamp and post function (res unused) */
    rs_shape rs;        /* the folded resize: source ih x iw, output oh x ow (the layer's) */
    int ih, iw, oh, ow, sh, sw, pt, pl; /* a stem's input and output sizes, strides, pads */
};

/* A folded ADD (kr_cuda_op.add): src of ch channels (zeros past), the ADD's clamp and post. */
struct pwm_add {
    const __half *src;
    int ch;
    kr_epilogue e;
};

/* Output value @p v (the convolution's, after its own epilogue) through the folded ADD with @p r
 * (the other operand's value): the convolution's value as stored (half), + r, the ADD's clamp
 * and post function. */
__device__ __forceinline__ float pwm_added(const pwm_add &ra, float v, float r)
{
    return kr_apply(ra.e, kr_stored<__half>(v) + r);
}

/* The staged values of rows [0, @p rows) (at most RW) of a warp's 32-channel pass @p nc as
 * whole 16-byte pieces of the output rows from pixel @p m: lane (row, piece) = (lane / 4 + 8 it,
 * lane % 4); the folded residual added, rounded to half. */
template <int RW>
__device__ __forceinline__ void pwm_store_rows(const float *st, __half *__restrict__ y,
                                               const kr_epilogue &e, const pwm_add &ra, int m,
                                               int rows, int nc, int N, int lane)
{
#pragma unroll
    for (int it = 0; it < RW / 8; it++) {
        const int r = it * 8 + (lane >> 2), col = nc + (lane & 3) * 8;
        if (r >= rows || col >= N)
            continue;
        const float *sv = st + r * PWM_LDS + (lane & 3) * 8;
        const float4 v0 = *reinterpret_cast<const float4 *>(sv);
        const float4 v1 = *reinterpret_cast<const float4 *>(sv + 4);
        float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        const size_t o = (size_t)(m + r) * N + col;
        if (e.res || ra.src) { /* a residual, or a folded ADD's operand of N channels */
            const uint4 rv =
                *reinterpret_cast<const uint4 *>((e.res ? (const __half *)e.res : ra.src) + o);
            const __half2 *rh = reinterpret_cast<const __half2 *>(&rv);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 f = __half22float2(rh[j]);
                v[2 * j] = ra.src ? pwm_added(ra, v[2 * j], f.x) : v[2 * j] + f.x;
                v[2 * j + 1] = ra.src ? pwm_added(ra, v[2 * j + 1], f.y) : v[2 * j + 1] + f.y;
            }
        }
        uint4 ov;
        __half2 *oh = reinterpret_cast<__half2 *>(&ov);
#pragma unroll
        for (int j = 0; j < 4; j++)
            oh[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
        *reinterpret_cast<uint4 *>(y + o) = ov;
    }
}

/* How a layer's stores go (pwm_store_mode): whole 16-byte pieces of output rows
 * (pwm_store_rows), pairs of channels (pwm_store_pairs), or one channel per lane. */
enum { PWM_ST_VEC = 0, PWM_ST_ONE = 1, PWM_ST_PAIRS = 2 };

/* The staged values of rows [0, @p rows) (at most RW) of a warp's 32-channel pass @p nc, for
 * layers of an even N whose stores and operands are 4-byte aligned (BlazeFace's 28, 36, 42
 * channels; pwm_store_mode): lane (pair, row parity) = (lane % 16, lane / 16) writes channels
 * nc + 2 pair, + 1 of every other row as one __half2. A folded residual (e.res, N channels) or
 * ADD operand (ra.src, ra.ch channels, even; zeros past ra.ch: never both, see
 * pwm_store_mode) is read for 16 of the warp's rows first, so that those loads are
 * in flight together, then added as the one-channel stores add it: the same values. Not inlined: inlined, its loads
 * raised the kernel's registers from 96 to 124 (sm_90, 32 rows per warp), fewer resident
 * blocks for every layer. */
template <int RW>
__device__ __noinline__ void pwm_store_pairs(const float *st, __half *__restrict__ y,
                                                const kr_epilogue &e, const pwm_add &ra, int m,
                                                int rows, int nc, int N, int lane)
{
    const int p = lane & 15, h = lane >> 4, col = nc + 2 * p;
    if (col >= N)
        return;
    const __half *rsrc = e.res ? (const __half *)e.res : ra.src;
    const int rch = e.res ? N : ra.ch;
    const bool rin = rsrc != NULL && col < rch;
    constexpr int G = RW / 2 < 8 ? RW / 2 : 8; /* rows per lane in one group of loads */
#pragma unroll
    for (int i0 = 0; i0 < RW / 2; i0 += G) {
    __half2 rv[G];
#pragma unroll
    for (int i = 0; i < G; i++) {
        const int r = 2 * (i0 + i) + h;
        rv[i] = __floats2half2_rn(0.0f, 0.0f);
        if (rin && r < rows)
            rv[i] = *reinterpret_cast<const __half2 *>(rsrc + (size_t)(m + r) * rch + col);
    }
#pragma unroll
    for (int i = 0; i < G; i++) {
        const int r = 2 * (i0 + i) + h;
        if (r >= rows)
            continue;
        const float2 rf = __half22float2(rv[i]);
        float2 v = *reinterpret_cast<const float2 *>(st + r * PWM_LDS + 2 * p);
        if (e.res) {
            v.x += rf.x;
            v.y += rf.y;
        } else if (ra.src) {
            v.x = pwm_added(ra, v.x, rf.x);
            v.y = pwm_added(ra, v.y, rf.y);
        }
        *reinterpret_cast<__half2 *>(y + (size_t)(m + r) * N + col) = __floats2half2_rn(v.x, v.y);
    }
    }
}

/* kr_apply (common.cuh) with its post function @p P fixed: the clamp, then the same operations
 * for each post function, so the same values. */
template <int P> __device__ __forceinline__ float pwm_post(const kr_epilogue &e, float v)
{
    v = fminf(fmaxf(v, e.lo), e.hi);
    if (P == KR_CUDA_POST_RELU)
        return fmaxf(v, 0.0f);
    if (P == KR_CUDA_POST_RELU6)
        return fminf(fmaxf(v, 0.0f), 6.0f);
    if (P == KR_CUDA_POST_HARD_SWISH)
        return kr_div6(v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f));
    if (P == KR_CUDA_POST_LOGISTIC)
        return 1.0f / (1.0f + expf(-v));
    return v;
}

/* A warp's accumulators (MI x 16 rows, 32 channels: the m16n8 layout) + the bias @p b (the
 * pass's 32 channels), clamped, through post function @p P, into the warp's staging rows. */
template <int P, int MI>
__device__ __forceinline__ void pwm_epilogue(const kr_epilogue &e, const float (&acc)[MI][4][4],
                                             const float *b, float *st, int lane)
{
    const int g = lane >> 2, q2 = (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const int c = t * 8 + q2;
            const float b0 = b[c], b1 = b[c + 1];
            float *s0 = st + (16 * i + g) * PWM_LDS + c;
            *reinterpret_cast<float2 *>(s0) =
                make_float2(pwm_post<P>(e, acc[i][t][0] + b0), pwm_post<P>(e, acc[i][t][1] + b1));
            *reinterpret_cast<float2 *>(s0 + 8 * PWM_LDS) =
                make_float2(pwm_post<P>(e, acc[i][t][2] + b0), pwm_post<P>(e, acc[i][t][3] + b1));
        }
}

/* Waits until none of this thread's committed groups is in flight. */
__device__ __forceinline__ void pwm_wait0()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

/* The 8 values [8 c, 8 c + 8) of @p v (floats) as halves, rounded to nearest. */
__device__ __forceinline__ uint4 pwm_pack8(const float *v)
{
    uint4 out;
    __half2 *oh = reinterpret_cast<__half2 *>(&out);
#pragma unroll
    for (int j = 0; j < 4; j++)
        oh[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    return out;
}

/* PWM_SCALE: rows [0, @p here) of the tile at pixel @p m0 (kv = K / 8 16-byte vectors a row)
 * into the A tile as the folded MUL stores them: each value x * vec (the row's item's vector),
 * clamped and through the MUL's post function P (pwm_post: kr_apply's operations), + the
 * folded ADD's addend, rounded to half (the values of the unfolded MUL, bit for bit); rows past
 * @p here zero. A thread's vectors go in batches of PWM_SCALE_BATCH whose input and addend
 * loads are all issued before any is used (the scale vectors, a few KB read by every block, are
 * loaded where used: 48 registers of loads in flight raised the 16-rows kernel from 72 to 96
 * registers, one block fewer per multiprocessor), and the row's item comes from the tile's
 * first item without a division where the rows stay within the next item (every layer with
 * pixels >= BM). */
#define PWM_SCALE_BATCH 4
template <int P, int BM>
__device__ __forceinline__ void pwm_scale_tile(const __half *__restrict__ x, const pwm_source &sc,
                                               __half *as, int lda, int m0, int here, int kv,
                                               int tid)
{
    const int n = BM * kv;
    const int b0 = sc.stride ? m0 / sc.pixels : 0;  /* the item of the tile's first row */
    const int e0 = (b0 + 1) * sc.pixels - m0;       /* the tile row where item b0 + 1 starts */
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (int i0 = tid; i0 < n; i0 += PWM_SCALE_BATCH * PWM_THREADS) {
        uint4 xv[PWM_SCALE_BATCH], av[PWM_SCALE_BATCH];
#pragma unroll
        for (int u = 0; u < PWM_SCALE_BATCH; u++) {
            const int i = i0 + u * PWM_THREADS, r = i / kv;
            xv[u] = zero, av[u] = zero;
            if (i < n && r < here) {
                const size_t vi = (size_t)m0 * kv + i; /* the vector's index in x and addend */
                xv[u] = reinterpret_cast<const uint4 *>(x)[vi];
                if (sc.addend)
                    av[u] = reinterpret_cast<const uint4 *>(sc.addend)[vi];
            }
        }
#pragma unroll
        for (int u = 0; u < PWM_SCALE_BATCH; u++) {
            const int i = i0 + u * PWM_THREADS, r = i / kv, c = i - r * kv;
            if (i >= n)
                break;
            uint4 out = zero;
            if (r < here) {
                const int b = !sc.stride || r < e0 ? b0 : b0 + 1 + (r - e0) / sc.pixels;
                const uint4 sv =
                    *reinterpret_cast<const uint4 *>(sc.vec + (size_t)b * sc.stride + 8 * c);
                const __half2 *xh = reinterpret_cast<const __half2 *>(&xv[u]);
                const __half2 *sh = reinterpret_cast<const __half2 *>(&sv);
                const __half2 *ah = reinterpret_cast<const __half2 *>(&av[u]);
                float v[8];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 xf = __half22float2(xh[j]), sf = __half22float2(sh[j]);
                    v[2 * j] = pwm_post<P>(sc.e, xf.x * sf.x);
                    v[2 * j + 1] = pwm_post<P>(sc.e, xf.y * sf.y);
                    if (sc.addend) {
                        const float2 af = __half22float2(ah[j]);
                        v[2 * j] += af.x;
                        v[2 * j + 1] += af.y;
                    }
                }
                out = pwm_pack8(v);
            }
            *reinterpret_cast<uint4 *>(as + r * lda + c * 8) = out;
        }
    }
}

/* A folded resize's sampling of one output pixel (pwm_resize_tile): the element offset of its
 * (y0, x0) tap in the source, the offsets from there to row y1 and to column x1, and the
 * weights dy, dx of rs_axis. */
struct pwm_rs_row {
    long long o;
    int dy, dx;
    float fy, fx;
};

/* PWM_RESIZE: rows [0, @p here) of the tile at pixel @p m0 (kv = K / 8 16-byte vectors a row)
 * into the A tile as the folded resize stores them, rows past @p here zero. First each row's
 * taps and weights, once per row (rs_axis, as rs_pixel computes them), into @p tab (BM
 * entries: the warps' staging area, which no warp touches between the tile loop's first
 * __syncthreads and the one after the A tile is written); then every 8 channels of a row from
 * four 16-byte loads (one per tap), each value rs_blend of its taps then the resize's post
 * function P (pwm_post: kr_apply's operations), rounded to half: rs_pixel's values bit for bit,
 * with the coordinates, divisions and clamps once per row instead of twice per 8 channels. A
 * thread steps through its vectors (rows and columns) without dividing. */
template <int P, int BM>
__device__ __forceinline__ void pwm_resize_tile(const __half *__restrict__ x, const pwm_source &sc,
                                                __half *as, int lda, pwm_rs_row *tab, int m0,
                                                int here, int kv, int tid)
{
    const rs_shape &s = sc.rs;
    for (int r = tid; r < BM; r += PWM_THREADS) {
        pwm_rs_row t;
        t.o = 0, t.dy = 0, t.dx = 0, t.fy = 0.0f, t.fx = 0.0f;
        if (r < here) {
            const int hw = s.oh * s.ow, m = m0 + r, b = m / hw, p = m - b * hw;
            const int oy = p / s.ow, ox = p - oy * s.ow;
            int y0, y1, x0, x1;
            rs_axis(s.ih, s.oh, s.align, s.half, oy, &y0, &y1, &t.fy);
            rs_axis(s.iw, s.ow, s.align, s.half, ox, &x0, &x1, &t.fx);
            t.o = (((long long)b * s.ih + y0) * s.iw + x0) * s.ch;
            t.dy = (y1 - y0) * s.iw * s.ch;
            t.dx = (x1 - x0) * s.ch;
        }
        tab[r] = t;
    }
    __syncthreads();
    const int n = BM * kv, q = PWM_THREADS / kv, rem = PWM_THREADS - q * kv;
    int r = tid / kv, c = tid - r * kv;
#pragma unroll 2
    for (int i = tid; i < n; i += PWM_THREADS) {
        uint4 out = make_uint4(0u, 0u, 0u, 0u);
        if (r < here) {
            const pwm_rs_row t = tab[r];
            const __half *p = x + t.o + 8 * c;
            float v00[8], v10[8], v01[8], v11[8], v[8];
            kr_ldv<8>(p, v00);
            kr_ldv<8>(p + t.dy, v10);
            kr_ldv<8>(p + t.dx, v01);
            kr_ldv<8>(p + t.dy + t.dx, v11);
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[j] = pwm_post<P>(sc.e, rs_blend(v00[j], v10[j], v01[j], v11[j], t.fy, t.fx));
            out = pwm_pack8(v);
        }
        *reinterpret_cast<uint4 *>(as + r * lda + c * 8) = out;
        r += q, c += rem;
        if (c >= kv)
            c -= kv, r++;
    }
}

/* The kernel: @p wh the weights as hi halves [N][K] then lo halves [N][K] (kr_cuda_op.w16);
 * the grid's blocks in groups of @p G, block b computing output channels [NG (b % G),
 * NG (b % G + 1)) (NG = NP / G, a multiple of PWM_NC) of tiles b / G, b / G + gridDim / G, ...
 * (gridDim a multiple of G), with only its NG channels' weights staged. */
template <int MI, int SRC>
__global__ void __launch_bounds__(PWM_THREADS) conv_pw_mma(const __half *__restrict__ x,
                                                           const __half *__restrict__ wh,
                                                           const float *__restrict__ bias,
                                                           __half *__restrict__ y, int M, int K,
                                                           int N, int KP, int NP, int G,
                                                           int tiles, kr_epilogue e,
                                                           pwm_source sc, pwm_add ra, int st_odd)
{
    constexpr int BM = 16 * MI * PWM_WARPS, RW = 16 * MI; /* rows per block, per warp */
    static_assert(BM * sizeof(pwm_rs_row) <= PWM_WARPS * RW * PWM_LDS * sizeof(float),
                  "a resize's sampling table fits the staging area");
    extern __shared__ __align__(16) unsigned char pwm_sm[];
    const int lda = KP + 8;
    constexpr int NBUF = SRC == PWM_PIPE ? 2 : 1;
    const int NG = NP / G, grp = (int)(blockIdx.x % (unsigned)G), nc0 = grp * NG;
    const int tile0 = (int)(blockIdx.x / (unsigned)G), tstep = (int)(gridDim.x / (unsigned)G);
    __half *as = reinterpret_cast<__half *>(pwm_sm);
    __half *ws = as + (size_t)NBUF * BM * lda; /* the weights' high halves, NG rows */
    __half *wl = ws + (size_t)NG * lda;        /* and their low halves */
    float *bs = reinterpret_cast<float *>(wl + (size_t)NG * lda);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    float *st = bs + NG + warp * RW * PWM_LDS;
    /* the weights of the block's NG channels and their bias once per block, zero past N and K:
     * the hi and lo halves were made at set-up (hi = half(w), lo = half(w - hi): hi + lo is w to
     * about 2^-22 relative, so the layer's only roundings are the activations' and the sums');
     * where K is a multiple of 8, 16-byte copies all in flight at once (cp.async on 8.0+,
     * waited for with the first tile's rows), else 2-byte loads. The A tile's columns past K
     * zero (the row loads below never write them). */
    const __half *wlo = wh + (size_t)N * K;
    if ((K & 7) == 0 && (reinterpret_cast<uintptr_t>(wh) & 15) == 0) {
        const int kc = KP / 8, units = NG * kc;
        for (int u = tid; u < 2 * units; u += PWM_THREADS) {
            const int hl = u >= units, v = u - hl * units, nl = v / kc, c = v - nl * kc;
            const int n = nc0 + nl;
            const bool ok = n < N && 8 * c < K;
            __half *d = (hl ? wl : ws) + nl * lda + 8 * c;
            pwm_cp16(d, kr_smem_addr(d), (hl ? wlo : wh) + (ok ? (size_t)n * K + 8 * c : 0), ok);
        }
    } else {
        const int units = NG * KP;
#pragma unroll 4
        for (int u = tid; u < units; u += PWM_THREADS) {
            const int nl = u / KP, k = u - nl * KP, n = nc0 + nl;
            const bool ok = n < N && k < K;
            ws[nl * lda + k] = ok ? wh[(size_t)n * K + k] : __float2half_rn(0.0f);
            wl[nl * lda + k] = ok ? wlo[(size_t)n * K + k] : __float2half_rn(0.0f);
        }
    }
    for (int i = tid; i < NG; i += PWM_THREADS)
        bs[i] = bias && nc0 + i < N ? bias[nc0 + i] : 0.0f;
    for (int i = tid; i < NBUF * BM * (KP - K); i += PWM_THREADS) {
        const int r = i / (KP - K), k = K + i % (KP - K);
        as[r * lda + k] = __float2half_rn(0.0f);
    }
    const int kv = K / 8; /* 16-byte vectors per row */
    const unsigned w_base = kr_smem_addr(ws), wl_off = (unsigned)NG * (unsigned)lda * 2u;
    /* PWM_PIPE: the rows of tile t (all of the block's vectors, zero past M) into buffer b */
    auto issue = [&](int t, int b) {
        const int tm0 = t * BM, th = M - tm0 < BM ? M - tm0 : BM;
        __half *buf = as + (size_t)b * BM * lda;
        for (int i = tid; i < BM * kv; i += PWM_THREADS) {
            const int r = i / kv, c = i % kv;
            __half *d = buf + r * lda + c * 8;
            pwm_cp16(d, kr_smem_addr(d), x + ((size_t)tm0 * kv + (r < th ? i : 0)) * 8, r < th);
        }
    };
    /* a programmatic dependent launch on compute 9.0+ (pwm_launch): what is above reads only
     * set-up data (weights, bias); wait here for the kernel before to end and its writes to be
     * visible, before reading any activation or writing the output (a no-op without one). Then
     * the kernel after may start (if it is a programmatic dependent launch too: its blocks take
     * the multiprocessors this one's blocks leave as they finish, and stage their own weights;
     * every block of this kernel is resident from the start, so none waits for them). */
    kr_pdl_wait();
    if (SRC == PWM_PIPE && tile0 < tiles)
        issue(tile0, 0); /* in the weights' group */
    kr_cp_async_commit();
    int it = 0;
    for (int tile = tile0; tile < tiles; tile += tstep, it++) {
        const int m0 = tile * BM;
        const int here = M - m0 < BM ? M - m0 : BM;
        const int cur = SRC == PWM_PIPE ? (it & 1) : 0;
        const unsigned a_base = kr_smem_addr(as + (size_t)cur * BM * lda);
        __syncthreads(); /* the previous tile's rows are read */
        if (SRC == PWM_PIPE) { /* the next tile's rows in flight while this one is computed */
            if (tile + tstep < tiles)
                issue(tile + tstep, cur ^ 1);
            kr_cp_async_commit();
            pwm_wait1();
        } else if (SRC == PWM_STEM3 || SRC == PWM_STEM5) {
            /* one window row (ky) of one pixel per thread and step: item i = (ky, r), so that
             * every warp gathers (the tile has fewer pixels than twice the threads) and a warp's
             * lanes take neighbouring pixels */
            constexpr int KW = SRC == PWM_STEM3 ? 3 : 5;
            for (int i = tid; i < KW * BM; i += PWM_THREADS) {
                const int ky = i / BM, r = i - ky * BM;
                const int m = m0 + r, hw = sc.oh * sc.ow;
                const int b = m / hw, q = m - b * hw, oy = q / sc.ow, ox = q - oy * sc.ow;
                const int iy = oy * sc.sh - sc.pt + ky, ix0 = ox * sc.sw - sc.pl;
                const bool rok = r < here && (unsigned)iy < (unsigned)sc.ih;
                const __half *xr = x + ((size_t)b * sc.ih + iy) * sc.iw * 3;
                __half *row = as + r * lda + ky * KW * 3;
#pragma unroll
                for (int kx = 0; kx < KW; kx++) {
                    const int ix = ix0 + kx;
                    const bool ok = rok && (unsigned)ix < (unsigned)sc.iw;
#pragma unroll
                    for (int c = 0; c < 3; c++)
                        row[kx * 3 + c] = ok ? xr[(size_t)ix * 3 + c] : __float2half_rn(0.0f);
                }
            }
        } else if (SRC == PWM_ODD) {
            if ((K & 1) == 0 && (reinterpret_cast<uintptr_t>(x) & 3) == 0) { /* pairs */
                const int K2 = K / 2;
                const __half2 *x2 = reinterpret_cast<const __half2 *>(x + (size_t)m0 * K);
#pragma unroll 4
                for (int i = tid; i < BM * K2; i += PWM_THREADS) {
                    const int r = i / K2;
                    *reinterpret_cast<__half2 *>(as + r * lda + 2 * (i - r * K2)) =
                        r < here ? x2[i] : __floats2half2_rn(0.0f, 0.0f);
                }
            } else {
                for (int i = tid; i < BM * K; i += PWM_THREADS) {
                    const int r = i / K;
                    as[r * lda + i % K] =
                        r < here ? x[(size_t)m0 * K + i] : __float2half_rn(0.0f);
                }
            }
        } else if (SRC == PWM_PLAIN) { /* 4 loads in flight per thread */
#pragma unroll 4
            for (int i = tid; i < BM * kv; i += PWM_THREADS) {
                const int r = i / kv, c = i % kv;
                uint4 v = make_uint4(0u, 0u, 0u, 0u);
                if (r < here)
                    v = reinterpret_cast<const uint4 *>(x)[(size_t)m0 * kv + i];
                *reinterpret_cast<uint4 *>(as + r * lda + c * 8) = v;
            }
        } else if (SRC == PWM_SCALE) { /* the post function fixed for the whole tile */
            kr_with_post(sc.e.post, [&](auto pc) {
                pwm_scale_tile<decltype(pc)::value, BM>(x, sc, as, lda, m0, here, kv, tid);
            });
        } else { /* PWM_RESIZE: the sampling table in the (idle) staging area */
            pwm_rs_row *tab = reinterpret_cast<pwm_rs_row *>(bs + NG);
            kr_with_post(sc.e.post, [&](auto pc) {
                pwm_resize_tile<decltype(pc)::value, BM>(x, sc, as, lda, tab, m0, here, kv, tid);
            });
        }
        if (SRC != PWM_PIPE)
            pwm_wait0(); /* the weights' copies (the first tile only has any in flight) */
        __syncthreads();
        const int r0 = warp * RW; /* the warp's first row in the tile */
        if (r0 >= here)
            continue;
        for (int nc = nc0; nc < nc0 + NG; nc += PWM_NC) {
            float acc[MI][4][4];
            kr_each_acc(acc, [](float &v) { v = 0.0f; });
            for (int k0 = 0; k0 < KP; k0 += 16) {
                unsigned a[MI][4], b[2][4], bl[2][4];
#pragma unroll
                for (int i = 0; i < MI; i++)
                    kr_ldsm_x4(a[i], a_base + (unsigned)(((r0 + 16 * i + (lane & 15)) * lda + k0 +
                                                         (lane >> 4) * 8) *
                                                        2));
#pragma unroll
                for (int j = 0; j < 2; j++) { /* n8 tiles 2j, 2j + 1: (tile, k half) per matrix */
                    const unsigned bo = w_base + (unsigned)(((nc - nc0 + (2 * j + (lane >> 4)) * 8 +
                                                              (lane & 7)) *
                                                                 lda +
                                                             k0 + ((lane >> 3) & 1) * 8) *
                                                            2);
                    kr_ldsm_x4(b[j], bo);
                    kr_ldsm_x4(bl[j], bo + wl_off);
                }
                /* per 8-deep chunk: the products with the high halves, then the low halves */
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int t = 0; t < 4; t++) {
                        kr_mma_16x8x8(acc[i][t], a[i][0], a[i][1], b[t >> 1][(t & 1) * 2]);
                        kr_mma_16x8x8(acc[i][t], a[i][0], a[i][1], bl[t >> 1][(t & 1) * 2]);
                        kr_mma_16x8x8(acc[i][t], a[i][2], a[i][3], b[t >> 1][(t & 1) * 2 + 1]);
                        kr_mma_16x8x8(acc[i][t], a[i][2], a[i][3], bl[t >> 1][(t & 1) * 2 + 1]);
                    }
            }
            /* bias, clamp, post function in registers (the post function's switch once per
             * pass, not per value); then the staging rows */
            kr_with_post(e.post, [&](auto pc) {
                pwm_epilogue<decltype(pc)::value, MI>(e, acc, bs + (nc - nc0), st, lane);
            });
            __syncwarp();
            if (st_odd == PWM_ST_PAIRS) {
                pwm_store_pairs<RW>(st, y, e, ra, m0 + r0, here - r0, nc, N, lane);
            } else if (st_odd) { /* lane j: column nc + j of each row */
                const int col = nc + lane;
                for (int r = 0; r < RW && r0 + r < here && col < N; r++) {
                    float v = st[r * PWM_LDS + lane];
                    const size_t m = (size_t)(m0 + r0 + r), o = m * N + col;
                    if (e.res)
                        v += __half2float(((const __half *)e.res)[o]);
                    if (ra.src)
                        v = pwm_added(ra, v,
                                      col < ra.ch ? __half2float(ra.src[m * ra.ch + col]) : 0.0f);
                    y[o] = __float2half_rn(v);
                }
            } else {
                pwm_store_rows<RW>(st, y, e, ra, m0 + r0, here - r0, nc, N, lane);
            }
            __syncwarp(); /* the staging is read before the next pass writes it */
        }
    }
}

/* The rows per warp of a block layout with @p nbuf A buffers within @p limit bytes of shared
 * memory: 32 where it fits, else 16; 0 when neither fits. */
static int pwm_mi_within(int K, int N, int nbuf, size_t limit)
{
    if (pwm_plan(K, N, 2, nbuf).bytes <= limit)
        return 2;
    return pwm_plan(K, N, 1, nbuf).bytes <= limit ? 1 : 0;
}

/* The block layout a layer takes with @p nbuf A buffers: within PW_MMA_SMEM where it fits,
 * else within PW_MMA_MAX_SMEM (an opt-in every class from 7.5 allows); 0 when neither fits. A
 * function of K, N and the A buffers only (the rows per warp change no sum: each output row is
 * its own tile row's product). */
static int pwm_mi(int K, int N, int nbuf = 1)
{
    const int mi = pwm_mi_within(K, N, nbuf, PW_MMA_SMEM);
    return mi ? mi : pwm_mi_within(K, N, nbuf, PW_MMA_MAX_SMEM);
}

extern "C" int kr_cuda_conv_2d_pw_mma_fits(const kr_cuda_op *op)
{
    const kr_node *node = op->node;
    const kr_window_params *p = &node->p.window;
    if (!op->f16 || !op->w16 || !op->caps || op->cat.src[0] || op->pool.src ||
        node->op != KR_OP_CONV_2D || node->n_inputs < 2 || p->groups > 1 ||
        p->padding == KR_PADDING_EXPLICIT)
        return 0;
    /* mma.sync.m16n8k8 and ldmatrix: compute 7.5 and newer (the device's or the emulated
     * class's; every class keyer emulates is 7.5+, so they all take this path alike) */
    if (op->caps->major * 10 + op->caps->minor < 75)
        return 0;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    if (xt->rank != 4 || yt->rank != 4 || wt->rank != 4 || wt->dims[3] != xt->dims[3] ||
        wt->dims[0] != yt->dims[3])
        return 0;
    /* an RGB stem: 3 channels, a 3x3 or 5x5 window, strides up to 2, no dilation, no folds */
    const int stem = xt->dims[3] == 3 && wt->dims[1] == wt->dims[2] &&
                     (wt->dims[1] == 3 || wt->dims[1] == 5) && wt->dims[1] >= PW_MMA_STEM_MIN_K &&
                     p->stride_h >= 1 &&
                     p->stride_h <= 2 && p->stride_w >= 1 && p->stride_w <= 2 &&
                     p->dilation_h <= 1 && p->dilation_w <= 1 && !op->scale.src && !op->rs.src;
    if (!stem && (wt->dims[1] != 1 || wt->dims[2] != 1 || p->stride_h != 1 || p->stride_w != 1 ||
                  xt->dims[1] != yt->dims[1] || xt->dims[2] != yt->dims[2]))
        return 0;
    const int K = wt->dims[1] * wt->dims[2] * wt->dims[3], N = yt->dims[3];
    const int folds = (op->scale.src != NULL) + (op->rs.src != NULL);
    if (folds > 1 || (folds && K % 8) || K > PW_MMA_MAX_K || N > PW_MMA_MAX_N ||
        (!stem && K * N <= PW_MMA_MIN_KN) ||
        yt->dims[1] * yt->dims[2] < PW_MMA_MIN_PIXELS || !pwm_mi(K, N))
        return 0;
    const kr_tensor *bt = node->n_inputs > 2 && node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    if (bt && (!bt->data || bt->dtype != KR_DTYPE_F32))
        return 0;
    if (op->scale.src && (!kr_aligned(op->scale.src, 16) || !kr_aligned(op->scale.vec, 16) ||
                          (op->scale.addend && !kr_aligned(op->scale.addend, 16)) ||
                          op->scale.pixels != xt->dims[1] * xt->dims[2] ||
                          (op->scale.vec_stride != 0 && op->scale.vec_stride != K)))
        return 0;
    if (op->rs.src && (!kr_aligned(op->rs.src, 16) || op->rs.ih < 1 || op->rs.iw < 1))
        return 0;
    /* unaligned rows or pointers take 2-byte accesses (kr_cuda_conv_2d_pw_mma) */
    return !op->add.src || (!op->residual && op->add.ch >= 1 && op->add.ch <= N);
}

/* How a layer's stores go (the same values every way): PWM_ST_VEC where rows of N are 16-byte
 * multiples and the output, residual and folded ADD operand (of N channels) 16-byte aligned;
 * else PWM_ST_PAIRS where N, the ADD operand's channels and every row are even and 4-byte
 * aligned (and not both a residual and an ADD); else PWM_ST_ONE (2-byte accesses). */
static int pwm_store_mode(const kr_cuda_op *op, int N)
{
    if (!(N % 8 || !kr_aligned(op->out, 16) || (op->residual && !kr_aligned(op->residual, 16)) ||
          (op->add.src && (op->add.ch != N || !kr_aligned(op->add.src, 16)))))
        return PWM_ST_VEC;
    if (N % 2 == 0 && kr_aligned(op->out, 4) && !(op->residual && op->add.src) &&
        (!op->residual || kr_aligned(op->residual, 4)) &&
        (!op->add.src || (op->add.ch % 2 == 0 && kr_aligned(op->add.src, 4))))
        return PWM_ST_PAIRS;
    return PWM_ST_ONE;
}

/* A layer's launch with @p G channel groups (pwm_groups): the block layout of NL = N (G = 1) or
 * PWM_NC channels (G > 1) staged, MI pixel rows per warp. */
template <int MI, int SRC>
static int pwm_launch(const kr_cuda_op *op, int M, int K, int N, int G, int NL)
{
    const pwm_layout l = pwm_plan(K, NL, MI, SRC == PWM_PIPE ? 2 : 1);
    const int tiles = (M + l.bm - 1) / l.bm;
    const int NP = (N + PWM_NC - 1) / PWM_NC * PWM_NC;
    /* one wave of resident blocks (registers, shared memory, threads), each looping over
     * (tile, channel group) items, the grid a multiple of G; the grid only spreads the items:
     * it changes no result */
    int per_sm = 0;
    if (l.bytes > 48 * 1024) { /* past the default: opt in (PW_MMA_MAX_SMEM, every class) */
        const cudaError_t ae = cudaFuncSetAttribute(
            conv_pw_mma<MI, SRC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)l.bytes);
        if (ae != cudaSuccess)
            return (int)ae;
    }
    const cudaError_t oe =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv_pw_mma<MI, SRC>, PWM_THREADS,
                                                      l.bytes);
    if (oe != cudaSuccess)
        return (int)oe;
    const long cap = (long)(op->caps->sms > 0 ? op->caps->sms : 1) * (per_sm > 0 ? per_sm : 1);
    const long items = (long)tiles * G;
    const long fill = (items < cap ? items : cap) / G * G;
    const int grid = (int)(fill > G ? fill : G);
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    const kr_tensor *yt = kr_out_t(op);
    pwm_source sc;
    memset(&sc, 0, sizeof(sc));
    const void *x = op->in[0];
    sc.e.lo = -INFINITY, sc.e.hi = INFINITY, sc.e.post = 0, sc.e.res = NULL;
    if (SRC == PWM_SCALE) {
        x = op->scale.src;
        sc.vec = (const __half *)op->scale.vec;
        sc.addend = (const __half *)op->scale.addend;
        sc.stride = op->scale.vec_stride;
        sc.pixels = op->scale.pixels > 0 ? op->scale.pixels : 1;
        kr_activation_range(op->scale.act, &sc.e.lo, &sc.e.hi);
        sc.e.post = (int)op->scale.post;
    } else if (SRC == PWM_STEM3 || SRC == PWM_STEM5) {
        const kr_tensor *xt = kr_in_t(op, 0);
        const kr_window_params *p = &op->node->p.window;
        sc.ih = xt->dims[1], sc.iw = xt->dims[2], sc.oh = yt->dims[1], sc.ow = yt->dims[2];
        sc.sh = p->stride_h, sc.sw = p->stride_w, sc.pt = p->pad_top, sc.pl = p->pad_left;
    } else if (SRC == PWM_RESIZE) {
        x = op->rs.src;
        sc.rs.ih = op->rs.ih, sc.rs.iw = op->rs.iw, sc.rs.ch = K;
        sc.rs.oh = yt->dims[1], sc.rs.ow = yt->dims[2];
        sc.rs.align = op->rs.align, sc.rs.half = op->rs.half;
        kr_activation_range(KR_ACT_NONE, &sc.e.lo, &sc.e.hi);
        sc.e.post = (int)op->rs.post;
    }
    pwm_add ra;
    ra.src = (const __half *)op->add.src;
    ra.ch = op->add.ch;
    kr_activation_range(op->add.act, &ra.e.lo, &ra.e.hi);
    ra.e.post = (int)op->add.post;
    ra.e.res = NULL;
    /* on compute 9.0+ (the device's or the emulated class's) a programmatic dependent launch:
     * the launch and the weights' staging overlap the end of the kernel before (the kernel
     * waits for it before touching activations); the same values either way */
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3(PWM_THREADS);
    cfg.dynamicSmemBytes = l.bytes;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = kr_gpu_cc(op->caps) >= 90 ? 1 : 0;
    const __half *xh = (const __half *)x, *wh = (const __half *)op->w16;
    const float *bias = bt ? (const float *)op->in[2] : NULL;
    return (int)cudaLaunchKernelEx(&cfg, conv_pw_mma<MI, SRC>, xh, wh, bias, (__half *)op->out, M,
                                   K, N, l.KP, NP, G, tiles, kr_make_epilogue(op, 1), sc, ra,
                                   pwm_store_mode(op, N));
}

template <int SRC>
static int pwm_launch_mi(const kr_cuda_op *op, int M, int K, int N, int G, int NL)
{
    return pwm_mi(K, NL, SRC == PWM_PIPE ? 2 : 1) == 2
               ? pwm_launch<2, SRC>(op, M, K, N, G, NL)
               : pwm_launch<1, SRC>(op, M, K, N, G, NL);
}

/* The channel groups a layer of @p M pixel rows runs in: 1 (every block computes all N
 * channels of its tiles, the weights staged once per block) where the one-group layout has at
 * least PW_MMA_SPLIT_TILES_PER_SM tiles per multiprocessor, else one group per PWM_NC output
 * channels (each block stages only its group's weights and computes one pass per tile: more
 * blocks, shorter ones, and a smaller block; the tile's rows are read once per group). The
 * grid's shape only: every output value is the same sum either way, so the choice may depend
 * on the batch without changing any result. */
static int pwm_groups(const kr_cuda_op *op, int M, int K, int N)
{
    const int np = (N + PWM_NC - 1) / PWM_NC * PWM_NC;
    const long sms = op->caps->sms > 0 ? op->caps->sms : 1;
    const long bm = 16L * PWM_WARPS * pwm_mi(K, N);
    const long tiles = bm > 0 ? (M + bm - 1) / bm : 0;
    if (np <= PWM_NC || tiles >= PW_MMA_SPLIT_TILES_PER_SM * sms)
        return 1;
    return np / PWM_NC;
}

extern "C" int kr_cuda_conv_2d_pw_mma(const kr_cuda_op *op)
{
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const int K = wt->dims[1] * wt->dims[2] * wt->dims[3], N = yt->dims[3];
    const size_t m = (size_t)kr_dim(op, yt, 0) * yt->dims[1] * yt->dims[2];
    if (m == 0)
        return (int)cudaSuccess;
    if (m > (size_t)0x7fffffff - 256)
        return (int)cudaErrorInvalidValue;
    const int G = pwm_groups(op, (int)m, K, N), NL = G > 1 ? PWM_NC : N;
    /* 2-byte loads where rows are no 16-byte multiples or the input is not aligned (the same
     * sums: only the loads differ; folded nodes need neither, kr_cuda_conv_2d_pw_mma_fits) */
    if (wt->dims[1] > 1) /* an RGB stem (kr_cuda_conv_2d_pw_mma_fits) */
        return wt->dims[1] == 3 ? pwm_launch_mi<PWM_STEM3>(op, (int)m, K, N, G, NL)
                                : pwm_launch_mi<PWM_STEM5>(op, (int)m, K, N, G, NL);
    if (!op->scale.src && !op->rs.src && (K % 8 || !kr_aligned(op->in[0], 16)))
        return pwm_launch_mi<PWM_ODD>(op, (int)m, K, N, G, NL);
    if (op->scale.src)
        return pwm_launch_mi<PWM_SCALE>(op, (int)m, K, N, G, NL);
    if (op->rs.src)
        return pwm_launch_mi<PWM_RESIZE>(op, (int)m, K, N, G, NL);
    /* a second buffer where it fits (the next tile's rows load during this one), within
     * PW_MMA_SMEM first, then within PW_MMA_MAX_SMEM (the same order as pwm_mi) */
    if (pwm_mi_within(K, NL, 2, PW_MMA_SMEM) ||
        (!pwm_mi_within(K, NL, 1, PW_MMA_SMEM) && pwm_mi_within(K, NL, 2, PW_MMA_MAX_SMEM)))
        return pwm_launch_mi<PWM_PIPE>(op, (int)m, K, N, G, NL);
    return pwm_launch_mi<PWM_PLAIN>(op, (int)m, K, N, G, NL);
}
