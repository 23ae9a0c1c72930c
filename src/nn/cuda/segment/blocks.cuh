/*
 * The cluster segment kernel's building blocks (segment.cu; segment.h describes the segment):
 * the epilogue in vector form, row loads, the stages' bulk weight copies and their barriers, the
 * pointwise convolution of a block's rows (pointwise_k: ops/conv_2d.cuh's multiply-add and
 * epilogue, in the segment's orders listed there), the excitation's dense layers, a row's pool
 * sums and the cluster's means (the segment's order of ops/pool_2d.cuh), the depthwise row
 * (ops/depthwise_conv_2d.cuh).
 */
#ifndef KEYER_NN_CUDA_SEGMENT_BLOCKS_CUH
#define KEYER_NN_CUDA_SEGMENT_BLOCKS_CUH

#include <cooperative_groups.h>

#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/ops/depthwise_conv_2d.cuh"
#include "nn/cuda/ops/resize_bilinear.cuh"
#include "nn/cuda/segment/segment.h"

namespace cg = cooperative_groups;

#define NT KR_CUDA_PERSISTENT_THREADS
#define SW KR_CUDA_SEG_W

/* The epilogue of 4 values: clamp lo..hi, post function (kr_apply's). Not inlined: the switch
 * (with the logistic's expf) at every site was a third of the kernel's code. */
__device__ __noinline__ float4 epi4(float4 v, float lo, float hi, int post)
{
    kr_epilogue e;
    e.lo = lo, e.hi = hi, e.post = post, e.res = NULL;
    v.x = kr_apply(e, v.x), v.y = kr_apply(e, v.y), v.z = kr_apply(e, v.z), v.w = kr_apply(e, v.w);
    return v;
}

/* epi4 with the post function a constant (PF >= 0: kr_apply inlined with its switch folded away),
 * or not (PF < 0: the call to epi4). */
template <int PF>
__device__ __forceinline__ float4 epi4c(float4 v, float lo, float hi, int post)
{
    if (PF < 0)
        return epi4(v, lo, hi, post);
    kr_epilogue e;
    e.lo = lo, e.hi = hi, e.post = PF, e.res = NULL;
    v.x = kr_apply(e, v.x), v.y = kr_apply(e, v.y), v.z = kr_apply(e, v.z), v.w = kr_apply(e, v.w);
    return v;
}

__device__ __forceinline__ float epi(float v, float lo, float hi, int post)
{
    kr_epilogue e;
    e.lo = lo, e.hi = hi, e.post = post, e.res = NULL;
    return kr_apply(e, v);
}

/* @p count values (a multiple of 4) of a block's input rows at @p x (global, the element type)
 * into @p dst (shared, float), 4 per thread at a time. */
template <typename T>
__device__ __forceinline__ void load_rows(const T *x, int count, float *dst)
{
    for (int i = threadIdx.x; i < count / 4; i += NT) {
        float v[4];
        kr_ldv<4>(x + 4 * i, v);
        *reinterpret_cast<float4 *>(dst + 4 * i) = make_float4(v[0], v[1], v[2], v[3]);
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
/* @p bytes (a multiple of 16) from global @p src into this block's shared @p dst; completion
 * counted on mbarrier @p bar (which expects them). */
__device__ __forceinline__ void bulk_load(float *dst, const float *src, int bytes,
                                          unsigned long long *bar)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}
/* Stage @p st's packed weights into @p dst, counted on its buffer's barrier bar[st % 2]. */
__device__ __forceinline__ void load_stage(const kr_cuda_segment &s, int st, float *dst,
                                           unsigned long long *bar)
{
    bulk_load(dst, s.w + s.stage_off[st], s.stage_floats[st] * 4, &bar[st % 2]);
}
__device__ __forceinline__ void bar_wait(unsigned long long *bar, unsigned parity)
{
    asm volatile("{\n .reg .pred p;\n WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], "
                 "%1;\n @!p bra WAIT_%=;\n}"
                 ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}
/* Waits for stage @p st's weights: the (st / 2)-th use of its buffer's barrier. */
__device__ __forceinline__ void wait_stage(unsigned long long *bar, int st)
{
    bar_wait(&bar[st % 2], (unsigned)(st / 2) & 1u);
}
#endif

/* out[p][o] = epilogue(b[o] + sum_i in[p][i] sc[i] w[i][o]) (+ res[p][o]) for NPX pixels (a
 * row's SW by default): a thread does 2 pixels x 4 outputs over ci / S inputs; S lanes
 * (g + G s) add their parts. @p sc, @p res may be NULL (@p b never: the packer writes a
 * missing bias as zeros); res may be @p out (same element, same thread). */
template <typename T, int CI, int CO, int PF = -1, int NPX = SW>
__device__ __forceinline__ void pointwise_k(const float *in, int ci_rt, const float *sc,
                                         const float *w, const float *b, int co_rt, float *out,
                                         int ostride, const float *res, int res_pre, float lo,
                                         float hi, int post)
{
    const int ci = CI ? CI : ci_rt, co = CO ? CO : co_rt; /* CI, CO: 0 = run-time */
    const int G = co / 4, PU = NPX / 2; /* NPX: the pixels, 2 per unit */
    int S = 4;
    while (S > 1 && (PU * G * S > NT || G * S > 32 || G * S < 4 || 32 % (G * S) != 0 ||
                     ci % (4 * S) != 0))
        S >>= 1;
    const int CS = ci / S, units = PU * G * S;
    for (int v = threadIdx.x; v < units; v += NT) {
        const int g = v % G, s = (v / G) % S, pu = v / (G * S);
        float4 acc[2] = {make_float4(0, 0, 0, 0), make_float4(0, 0, 0, 0)};
        const float *x = in + pu * 2 * ci + s * CS, *ws = w + (size_t)s * CS * co + 4 * g;
#pragma unroll 2
        for (int c4 = 0; c4 < CS; c4 += 4) {
            float4 xv[2];
#pragma unroll
            for (int i = 0; i < 2; i++)
                xv[i] = *reinterpret_cast<const float4 *>(x + i * ci + c4);
            if (sc) {
                const float4 sv = *reinterpret_cast<const float4 *>(sc + s * CS + c4);
#pragma unroll
                for (int i = 0; i < 2; i++)
                    xv[i].x *= sv.x, xv[i].y *= sv.y, xv[i].z *= sv.z, xv[i].w *= sv.w;
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 wv = *reinterpret_cast<const float4 *>(ws + (c4 + j) * co);
#pragma unroll
                for (int i = 0; i < 2; i++)
                    kr_fma4(acc[i], j == 0 ? xv[i].x : j == 1 ? xv[i].y : j == 2 ? xv[i].z : xv[i].w,
                            wv);
            }
        }
        for (int o = G; o < G * S; o *= 2)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                acc[i].x += __shfl_xor_sync(0xffffffffu, acc[i].x, o);
                acc[i].y += __shfl_xor_sync(0xffffffffu, acc[i].y, o);
                acc[i].z += __shfl_xor_sync(0xffffffffu, acc[i].z, o);
                acc[i].w += __shfl_xor_sync(0xffffffffu, acc[i].w, o);
            }
        if (s != 0)
            continue;
        const float4 bb = *reinterpret_cast<const float4 *>(b + 4 * g);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int p = pu * 2 + i;
            float4 rv = make_float4(0, 0, 0, 0); /* (added also where there is none) */
            if (res)
                rv = *reinterpret_cast<const float4 *>(res + p * co + 4 * g);
            float4 r = kr_conv_out(acc[i], bb, rv, res_pre != 0, kr_add_res_always(),
                                   [&](float4 v) { return epi4c<PF>(v, lo, hi, post); });
            r.x = kr_stored<T>(r.x), r.y = kr_stored<T>(r.y);
            r.z = kr_stored<T>(r.z), r.w = kr_stored<T>(r.w);
            *reinterpret_cast<float4 *>(out + p * ostride + 4 * g) = r;
        }
    }
}

/* pointwise_k with run-time shapes: one copy, called (not inlined) where no shape below fits. */
template <typename T>
__device__ __noinline__ void pointwise_rt(const float *in, int ci, const float *sc, const float *w,
                                          const float *b, int co, float *out, int ostride,
                                          const float *res, int res_pre, float lo, float hi,
                                          int post)
{
    pointwise_k<T, 0, 0>(in, ci, sc, w, b, co, out, ostride, res, res_pre, lo, hi, post);
}

/* pointwise_k with the post function PF as a constant where @p post is PF (the call site's
 * usual one), else the run-time one. */
template <typename T, int CI, int CO, int PF, int NPX = SW>
__device__ __forceinline__ void pointwise_pf(const float *in, int ci, const float *sc,
                                             const float *w, const float *b, int co, float *out,
                                             int ostride, const float *res, int res_pre, float lo,
                                             float hi, int post)
{
    if (post == PF)
        pointwise_k<T, CI, CO, PF, NPX>(in, ci, sc, w, b, co, out, ostride, res, res_pre, lo, hi,
                                        post);
    else
        pointwise_k<T, CI, CO, -1, NPX>(in, ci, sc, w, b, co, out, ostride, res, res_pre, lo, hi,
                                        post);
}

/* pointwise_k with the shape (ci, co) = (CI, CO) as constants (the index arithmetic and the
 * lane split folded away) where it is that, else pointwise_rt: a call site names the shape of
 * the shipped segments, so that the kernel's code stays small (instruction fetches are a cost
 * at this size: docs/notes/cuda-cluster-segment.md). */
template <typename T, int CI, int CO>
__device__ __forceinline__ void pointwise(const float *in, int ci, const float *sc,
                                          const float *w, const float *b, int co, float *out,
                                          int ostride, const float *res, int res_pre, float lo,
                                          float hi, int post)
{
    if (ci == CI && co == CO)
        pointwise_k<T, CI, CO>(in, ci, sc, w, b, co, out, ostride, res, res_pre, lo, hi, post);
    else
        pointwise_rt<T>(in, ci, sc, w, b, co, out, ostride, res, res_pre, lo, hi, post);
}

/* The excitation of stage @p p from the channel means @p mean: the two dense layers (the stage's
 * weights at @p wp, its layout @p o: kr_seg_proj_layout) into @p sc. Synchronises the block
 * before and after. */
template <int CI>
__device__ __forceinline__ void excite(const kr_cuda_seg_proj &p, const float *wp, const int *o,
                                       const float *mean, float *hid, float *sc)
{
    const int ci = CI ? CI : p.ci, hd = p.hid, t = threadIdx.x; /* CI: 0 = run-time */
    const float *w1 = wp + o[KR_SEG_PJ_W1], *b1 = wp + o[KR_SEG_PJ_B1];
    const float *w2 = wp + o[KR_SEG_PJ_W2], *b2 = wp + o[KR_SEG_PJ_B2];
    __syncthreads();
    if (hd <= NT / 8) { /* dense 1: 8 lanes per output (every thread busy), a float4 a load */
        const int j = t / 8, lane = t % 8;
        float a = 0.0f;
        if (j < hd)
            for (int k = 4 * lane; k < ci; k += 32) {
                const float4 w = *reinterpret_cast<const float4 *>(w1 + j * ci + k);
                const float4 x = *reinterpret_cast<const float4 *>(mean + k);
                a = fmaf(w.x, x.x, a), a = fmaf(w.y, x.y, a);
                a = fmaf(w.z, x.z, a), a = fmaf(w.w, x.w, a);
            }
        a += __shfl_xor_sync(0xffffffffu, a, 4);
        a += __shfl_xor_sync(0xffffffffu, a, 2);
        a += __shfl_xor_sync(0xffffffffu, a, 1);
        if (lane == 0 && j < hd)
            hid[j] = epi(a + b1[j], p.se_lo[0], p.se_hi[0], p.se_post[0]);
    } else { /* dense 1: a warp per output, lanes over the inputs (consecutive addresses) */
        const int lane = t % 32;
        for (int j = t / 32; j < hd; j += NT / 32) {
            float a = 0.0f;
#pragma unroll 4
            for (int k = lane; k < ci; k += 32)
                a = fmaf(w1[j * ci + k], mean[k], a);
#pragma unroll
            for (int o = 16; o > 0; o /= 2)
                a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0)
                hid[j] = epi(a + b1[j], p.se_lo[0], p.se_hi[0], p.se_post[0]);
        }
    }
    __syncthreads();
    { /* dense 2: w2 transposed [hd][ci]; two adjacent lanes per output, half the inputs each */
        const int o = t / 2, h = t % 2, half = hd / 2;
        float a = 0.0f;
        if (o < ci)
#pragma unroll 8
            for (int k = h * half; k < (h + 1) * half; k++)
                a = fmaf(w2[k * ci + o], hid[k], a);
        a += __shfl_xor_sync(0xffffffffu, a, 1);
        if (o < ci && h == 0)
            sc[o] = epi(a + b2[o], p.se_lo[1], p.se_hi[1], p.se_post[1]);
    }
    __syncthreads();
}

/* Column sums of the [NPX][e] values @p d (plus @p d2's, element by element, where given) in a
 * fixed order, passed as out(g, float4 of columns 4g..4g+3) by threads g < e / 4. EE: e as a
 * constant, 0 = run-time; NPX: the pixels (a row's by default). */
template <int EE, int NPX = SW, typename F>
__device__ __forceinline__ void row_pool(const float *d, int e_rt, float *red, F out,
                                         const float *d2 = nullptr)
{
    const int e = EE ? EE : e_rt;
    const int G = e / 4, L = NT / G, t = threadIdx.x, g = t % G, l = t / G;
    float4 s = make_float4(0, 0, 0, 0);
    if (l < L)
        for (int p = l; p < NPX; p += L) {
            float4 v = *reinterpret_cast<const float4 *>(d + p * e + 4 * g);
            if (d2) {
                const float4 v2 = *reinterpret_cast<const float4 *>(d2 + p * e + 4 * g);
                v.x += v2.x, v.y += v2.y, v.z += v2.z, v.w += v2.w;
            }
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
    reinterpret_cast<float4 *>(red)[t] = s;
    __syncthreads();
    if (t < G) {
        float4 r = make_float4(0, 0, 0, 0);
        for (int k = 0; k < L; k++) {
            const float4 v = reinterpret_cast<const float4 *>(red)[k * G + t];
            r.x += v.x, r.y += v.y, r.z += v.z, r.w += v.w;
        }
        out(t, r);
    }
}

/* The depthwise row from the expanded rows @p ep (K of them, the output row's window, each
 * ST x SW pixels: ST the stride), its column padding @p pl: 2 adjacent outputs x 4 channels per
 * unit from a sliding window of K + ST inputs per kernel row; epilogue of @p d, rounded as
 * stored, into @p out [SW][e]. EE: e as a constant, 0 = run-time. */
template <typename T, int K, int EE, int PF = -1, int ST = 1>
__device__ __forceinline__ void depthwise_k(const float *ep, const float *wd, const float *bd,
                                            int e_rt, int pl, float *out, const kr_cuda_seg_dw &d)
{
    constexpr int IW = ST * SW;
    const int E = EE ? EE : e_rt, G = E / 4;
    for (int u = threadIdx.x; u < (SW / 2) * G; u += NT) {
        const int g = u % G, x0 = 2 * (u / G), c0 = ST * x0 - pl;
        float4 a0 = *reinterpret_cast<const float4 *>(bd + 4 * g), a1 = a0;
#pragma unroll
        for (int ky = 0; ky < K; ky++) {
            float4 in[K + ST];
#pragma unroll
            for (int j = 0; j < K + ST; j++) {
                const int xx = c0 + j;
                in[j] = xx >= 0 && xx < IW
                            ? *reinterpret_cast<const float4 *>(ep + (ky * IW + xx) * E + 4 * g)
                            : make_float4(0, 0, 0, 0);
            }
#pragma unroll
            for (int kx = 0; kx < K; kx++) {
                const float4 wv = *reinterpret_cast<const float4 *>(wd + (ky * K + kx) * E + 4 * g);
                kr_dw_fma(a0, in[kx], wv);
                kr_dw_fma(a1, in[kx + ST], wv);
            }
        }
        const auto act = [&](float4 v) { return epi4c<PF>(v, d.lo, d.hi, d.post); };
        a0 = kr_conv_out_bf(a0, a0, kr_no_res(), act);
        a1 = kr_conv_out_bf(a1, a1, kr_no_res(), act);
        a0.x = kr_stored<T>(a0.x), a0.y = kr_stored<T>(a0.y), a0.z = kr_stored<T>(a0.z);
        a0.w = kr_stored<T>(a0.w), a1.x = kr_stored<T>(a1.x), a1.y = kr_stored<T>(a1.y);
        a1.z = kr_stored<T>(a1.z), a1.w = kr_stored<T>(a1.w);
        *reinterpret_cast<float4 *>(out + x0 * E + 4 * g) = a0;
        *reinterpret_cast<float4 *>(out + (x0 + 1) * E + 4 * g) = a1;
    }
}

/* depthwise_k with the run-time channel count: one copy, called (not inlined). */
template <typename T, int K>
__device__ __noinline__ void depthwise_rt(const float *ep, const float *wd, const float *bd, int e,
                                          float *out, const kr_cuda_seg_dw &d)
{
    depthwise_k<T, K, 0>(ep, wd, bd, e, K / 2, out, d);
}

/* Shared memory of a block (the kernel's comment). */
struct seg_smem {
    float *wbuf, *xin, *X, *EP, *D, *slots, *mean, *hid, *sc, *red;
};

/* The channel means of the image's h rows [SW][e] (this block's: @p rows) into m.mean: every
 * block's pool sums pushed by each block into the slots [rank][e] of blocks [0, h) (remote
 * stores issued together, before the cluster barrier that publishes them), then added in rank
 * order from its own shared memory. Called by every thread; synchronises the cluster. The
 * slots must be free: every block past its last read of them. */
template <int EE>
__device__ __forceinline__ void cluster_pool(const float *rows, int e_rt, const seg_smem &m,
                                             cg::cluster_group &cl, int h)
{
    const int e = EE ? EE : e_rt, rank = (int)cl.block_rank(), t = threadIdx.x;
    row_pool<EE>(rows, e, m.red, [&](int g, float4 v) {
        for (int r = 0; r < h; r++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(m.slots, r) + rank * e)[g] = v;
    });
    cl.sync();
    if (t < e) {
        float a = 0.0f;
        for (int r = 0; r < h; r++)
            a += m.slots[r * e + t];
        m.mean[t] = a * (1.0f / (float)(h * SW));
    }
}

#endif
