/*
 * Cluster segments (segment.h), the kernel: one cluster per image, block r of it owns image row
 * r. Per stage: the stage's weights are in shared memory (a bulk copy issued while the stage
 * before ran: two buffers, an mbarrier each); the pointwise convolutions split the input
 * channels over up to 4 lanes when there are fewer (2 pixels x 4 channels) units than threads
 * and add the parts with shuffles; the depthwise convolution does 2 adjacent pixels x 4
 * channels per thread from a sliding window of K + stride inputs per kernel row; the halo rows
 * come from the neighbours' shared memory after a cluster barrier; each block pushes its pool
 * sums into every block's shared memory before one. S and Q (segment.h), where there are
 * they, are the first and the last stage: S reads its window's rows at twice the resolution
 * from its neighbours, Q computes its row into the expanded rows' buffer and writes it out.
 * The packed weights' and shared memory's layouts are segment.h's (kr_seg_*_layout), the ones
 * the packer and kr_cuda_segment_smem use.
 */
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
 * at this size: BENCHMARKS.md). */
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

/* Pair k of the segment (stage k + 1, or k + 2 after S; weights at @p we): expand into EP's middle row, the halo
 * rows from the neighbours, the depthwise row, the pool, the excitation, the projection plus
 * the residual back into X. CC, EE: c and e as constants (0 = run-time). */
template <typename T, int K, int CC, int EE>
__device__ __forceinline__ void pair(const kr_cuda_segment &s, int k, const float *we,
                                     const seg_smem &m, cg::cluster_group &cl)
{
    constexpr int PAD = K / 2;
    const kr_cuda_seg_dw &d = s.d[k];
    const kr_cuda_seg_proj &p = s.p[k];
    const int E = EE ? EE : d.e, C = CC ? CC : s.c, H = s.h, t = threadIdx.x;
    const int rank = (int)cl.block_rank();
    int od[KR_SEG_DW_N + 1], op[KR_SEG_PJ_N + 1];
    kr_seg_dw_layout(C, E, K, od);
    kr_seg_proj_layout(E, p.hid, C, op);
    const float *be = we + od[KR_SEG_DW_BE], *wd = we + od[KR_SEG_DW_WD];
    const float *bd = we + od[KR_SEG_DW_BD], *wp = we + od[KR_SEG_DW_N];
    /* 1. the expanded row into EP's middle row */
    pointwise_pf<T, CC, EE, KR_CUDA_POST_HARD_SWISH>(m.X, C, NULL, we, be, E, m.EP + PAD * SW * E,
                                                     E, NULL, 0, d.e_lo, d.e_hi, d.e_post);
    cl.sync(); /* every row expanded (and the last stage's reads of EP done) */
    { /* 2. the halo rows from their owners, zeros outside the image: loads first */
        const int q4 = SW * E / 4, total = 2 * PAD * q4;
        float4 v[8];
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int i = t + n * NT, hr = i / q4, r = hr < PAD ? hr : hr + 1;
            const int iy = rank - PAD + r;
            v[n] = make_float4(0, 0, 0, 0);
            if (i < total && iy >= 0 && iy < H)
                v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(m.EP, iy) +
                                                        PAD * SW * E)[i % q4];
        }
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int i = t + n * NT, hr = i / q4, r = hr < PAD ? hr : hr + 1;
            if (i < total)
                reinterpret_cast<float4 *>(m.EP + r * SW * E)[i % q4] = v[n];
        }
    }
    __syncthreads();
    /* 3. the depthwise row */
    if (EE)
        if (d.post == KR_CUDA_POST_HARD_SWISH)
            depthwise_k<T, K, EE, KR_CUDA_POST_HARD_SWISH>(m.EP, wd, bd, E, PAD, m.D, d);
        else
            depthwise_k<T, K, EE>(m.EP, wd, bd, E, PAD, m.D, d);
    else
        depthwise_rt<T, K>(m.EP, wd, bd, E, m.D, d);
    __syncthreads();
    /* 4. the pool: the channel means */
    cluster_pool<EE>(m.D, E, m, cl, H);
    /* 5. the excitation, then the projection plus the residual, back into X */
    excite<EE>(p, wp, op, m.mean, m.hid, m.sc);
    const float *pw = wp + op[KR_SEG_PJ_W], *pb = wp + op[KR_SEG_PJ_B];
    pointwise_pf<T, EE, CC, KR_CUDA_POST_NONE>(m.D, E, m.sc, pw, pb, C, m.X, C,
                                               p.res ? m.X : NULL, p.res_pre, p.lo, p.hi, p.post);
    __syncthreads();
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* S (stage 0, weights in buffer 0): this block's input rows 2r, 2r + 1 into m.xin, expanded
 * into the window (buffer 1: [K][2 SW][E], own rows at pt and pt + 1), the window's other rows
 * from their owners (zeros outside the image) after a cluster barrier, the stride-2 depthwise
 * row into m.xin (P0's input), then (thread 0) pair 0's weights into buffer 0, and S's pool:
 * every block's sums in m.slots, the means in m.mean. Synchronises the cluster; on return no
 * block reads another's window any more.
 * CI, EE: s_ic and the output channels as constants (0 = run-time). */
template <typename T, int K, int CI, int EE>
__device__ __forceinline__ void stage_s(const kr_cuda_segment &s, const seg_smem &m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    constexpr int IW = 2 * SW;
    const int ci = CI ? CI : s.s_ic, E = EE ? EE : s.sd.e, H = s.h, pt = s.s_pt, t = threadIdx.x;
    const int rank = (int)cl.block_rank();
    float *win = m.wbuf + s.buf_floats;
    if (!s.e_ic) /* the input rows (with E, in m.xin already) */
        load_rows((const T *)s.x + ((size_t)img * 2 * H + 2 * rank) * IW * ci, 2 * IW * ci,
                  m.xin);
    __syncthreads();
    wait_stage(bar, 0);
    int o[KR_SEG_DW_N + 1];
    kr_seg_dw_layout(ci, E, K, o);
    const float *we = m.wbuf + o[KR_SEG_DW_WE], *be = m.wbuf + o[KR_SEG_DW_BE];
    pointwise_pf<T, CI, EE, KR_CUDA_POST_HARD_SWISH, 2 * IW>(m.xin, ci, NULL, we, be, E,
                                                             win + pt * IW * E, E, NULL, 0,
                                                             s.sd.e_lo, s.sd.e_hi, s.sd.e_post);
    cl.sync(); /* every block's rows expanded */
    { /* the window's other rows: row j is image row y = 2r - pt + j, block y / 2's row pt + y % 2 */
        const int q4 = IW * E / 4, total = K * q4;
        for (int i0 = t; i0 < total; i0 += 8 * NT) {
            float4 v[8];
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const int i = i0 + n * NT, j = i / q4, y = 2 * rank - pt + j;
                v[n] = make_float4(0, 0, 0, 0);
                if (i < total && (j < pt || j > pt + 1) && y >= 0 && y < 2 * H)
                    v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(win, y / 2))
                        [(pt + y % 2) * q4 + i % q4];
            }
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const int i = i0 + n * NT, j = i / q4;
                if (i < total && (j < pt || j > pt + 1))
                    reinterpret_cast<float4 *>(win)[i] = v[n];
            }
        }
    }
    __syncthreads();
    const float *wd = m.wbuf + o[KR_SEG_DW_WD], *bd = m.wbuf + o[KR_SEG_DW_BD];
    if (s.sd.post == KR_CUDA_POST_HARD_SWISH)
        depthwise_k<T, K, EE, KR_CUDA_POST_HARD_SWISH, 2>(win, wd, bd, E, s.s_pl, m.xin, s.sd);
    else
        depthwise_k<T, K, EE, -1, 2>(win, wd, bd, E, s.s_pl, m.xin, s.sd);
    __syncthreads();
    if (t == 0) { /* stage 2 (pair 0) over S's weights, which no thread reads any more */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        load_stage(s, 2, m.wbuf, bar);
    }
    /* the pool: the channel means (the cluster barrier in it also ends every block's reads of
     * the others' windows) */
    cluster_pool<EE>(m.xin, E, m, cl, H);
}

/* stage_s with run-time shapes: one copy, called (not inlined). */
template <typename T, int K>
__device__ __noinline__ void stage_s_rt(const kr_cuda_segment &s, const seg_smem m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    stage_s<T, K, 0, 0>(s, m, cl, bar, img);
}
#endif

/* Rows 0 and R + 1 of @p buf [R + 2][W2][ch] (the block's R image rows in rows 1 .. R) from
 * the neighbours' rows R (block r - 1's last) and 1 (block r + 1's first), zeros outside the
 * image's @p h blocks: loads first. Every block's rows must be published (a cluster barrier). */
template <int R = 2, int W2 = 2 * SW>
__device__ __forceinline__ void halo_rows(float *buf, int ch, cg::cluster_group &cl, int h)
{
    const int q4 = W2 * ch / 4, rank = (int)cl.block_rank();
    for (int i0 = threadIdx.x; i0 < 2 * q4; i0 += 4 * NT) {
        float4 v[4];
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int i = i0 + n * NT, top = i < q4, nb = top ? rank - 1 : rank + 1;
            v[n] = make_float4(0, 0, 0, 0);
            if (i < 2 * q4 && nb >= 0 && nb < h)
                v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(buf, nb) +
                                                        (top ? R : 1) * W2 * ch)[i % q4];
        }
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int i = i0 + n * NT;
            if (i < 2 * q4)
                reinterpret_cast<float4 *>(buf + (i < q4 ? 0 : R + 1) * W2 * ch)[i % q4] = v[n];
        }
    }
}

/* The 3x3 "same" depthwise of rows 1 .. R of @p buf [R + 2][W2][ch] (halo rows 0, R + 1),
 * bias, epilogue lo..hi, post, plus the input pixel where @p res_mid: out(i, x, g, value) for
 * row i < R, column x, channels 4g..4g+3. CH: ch as a constant (0 = run-time). */
template <int CH, int R = 2, int W2 = 2 * SW, typename F>
__device__ __forceinline__ void dw3_rows(const float *buf, const float *wd, const float *bd,
                                         int ch_rt, float lo, float hi, int post, int res_mid,
                                         F out)
{
    const int ch = CH ? CH : ch_rt, G = ch / 4;
    for (int v = threadIdx.x; v < R * W2 * G; v += NT) {
        const int g = v % G, x = (v / G) % W2, i = v / (G * W2);
        float4 a = *reinterpret_cast<const float4 *>(bd + 4 * g);
#pragma unroll
        for (int ky = 0; ky < 3; ky++)
#pragma unroll
            for (int kx = 0; kx < 3; kx++) {
                const int xx = x - 1 + kx;
                if (xx < 0 || xx >= W2)
                    continue;
                const float4 in = *reinterpret_cast<const float4 *>(buf + ((i + ky) * W2 + xx) * ch +
                                                                    4 * g);
                const float4 wv = *reinterpret_cast<const float4 *>(wd + (ky * 3 + kx) * ch + 4 * g);
                kr_dw_fma(a, in, wv);
            }
        a = post == KR_CUDA_POST_RELU ? epi4c<KR_CUDA_POST_RELU>(a, lo, hi, post)
                                      : epi4(a, lo, hi, post);
        if (res_mid) {
            const float4 r = *reinterpret_cast<const float4 *>(buf + ((i + 1) * W2 + x) * ch + 4 * g);
            a.x += r.x, a.y += r.y, a.z += r.z, a.w += r.w;
        }
        out(i, x, g, a);
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* E (segment.h), before S (stage 0's weights, E's after S's, in buffer 0): this block's input
 * rows 2r, 2r + 1 into buffer 1, the first convolution into D, the expansion into the window's
 * middle rows (at buffer 1's end: S's own rows, written before S's first cluster barrier, stay
 * below the rows the neighbours read), its halo rows from the neighbours, the depthwise into EP,
 * the second convolution (+ the first's output) into m.xin (S's input) and out to e_y; then
 * (thread 0) P0's weights into EP. Synchronises the cluster once.
 * IC, CC, EE: e_ic, s_ic and e_e as constants (0 = run-time). */
template <typename T, int IC, int CC, int EE>
__device__ __forceinline__ void stage_e(const kr_cuda_segment &s, const seg_smem &m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    constexpr int W2 = 2 * SW, NPX = 2 * W2;
    const int ic = IC ? IC : s.e_ic, c = CC ? CC : s.s_ic, e = EE ? EE : s.e_e, H = s.h;
    const int t = threadIdx.x, rank = (int)cl.block_rank();
    float *xr = m.wbuf + s.buf_floats, *win = m.wbuf + 2 * s.buf_floats - 4 * W2 * e;
    load_rows((const T *)s.x + ((size_t)img * 2 * H + 2 * rank) * W2 * ic, 2 * W2 * ic, xr);
    __syncthreads();
    wait_stage(bar, 0);
    int o[KR_SEG_E_N + 1];
    kr_seg_e_layout(ic, c, e, o);
    const float *w = m.wbuf + s.e_w_off - s.stage_off[0];
    pointwise_pf<T, IC, CC, KR_CUDA_POST_NONE, NPX>(xr, ic, NULL, w + o[KR_SEG_E_W1],
                                                    w + o[KR_SEG_E_B1], c, m.D, c, NULL, 0,
                                                    s.e1_lo, s.e1_hi, s.e1_post);
    __syncthreads();
    pointwise_pf<T, CC, EE, KR_CUDA_POST_RELU, NPX>(m.D, c, NULL, w + o[KR_SEG_E_WE],
                                                    w + o[KR_SEG_E_BE], e, win + W2 * e, e, NULL,
                                                    0, s.ed.e_lo, s.ed.e_hi, s.ed.e_post);
    cl.sync(); /* every block's expanded rows */
    halo_rows(win, e, cl, H);
    __syncthreads();
    float *dd = m.EP;
    dw3_rows<EE>(win, w + o[KR_SEG_E_WD], w + o[KR_SEG_E_BD], e, s.ed.lo, s.ed.hi, s.ed.post, 0,
                  [&](int i, int x, int g, float4 a) {
                      a.x = kr_stored<T>(a.x), a.y = kr_stored<T>(a.y);
                      a.z = kr_stored<T>(a.z), a.w = kr_stored<T>(a.w);
                      *reinterpret_cast<float4 *>(dd + (i * W2 + x) * e + 4 * g) = a;
                  });
    __syncthreads();
    pointwise_pf<T, EE, CC, KR_CUDA_POST_NONE, NPX>(dd, e, NULL, w + o[KR_SEG_E_W3],
                                                    w + o[KR_SEG_E_B3], c, m.xin, c,
                                                    s.e3_res ? m.D : NULL, s.e3_res_pre,
                                                    s.e3_lo, s.e3_hi, s.e3_post);
    __syncthreads();
    if (t == 0) { /* P0's weights into EP, which no thread reads any more */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        load_stage(s, 1, m.EP, bar);
    }
    T *y = (T *)s.e_y + ((size_t)img * 2 * H + 2 * rank) * W2 * c;
    for (int i = t; i < 2 * W2 * c / 4; i += NT)
        kr_stv<4>(y + 4 * i, m.xin + 4 * i);
}

/* stage_e with run-time shapes: one copy, called (not inlined). */
template <typename T>
__device__ __noinline__ void stage_e_rt(const kr_cuda_segment &s, const seg_smem m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    stage_e<T, 0, 0, 0>(s, m, cl, bar, img);
}

/* Channels 4g..4g+3 of a bilinear resize's output pixel from its two source rows @p r0, @p r1
 * ([..][ch], either block's shared memory), columns x0, x1 and weights dy, dx (rs_axis): the
 * four taps in the reference's order, then the epilogue lo..hi, post, as stored. */
template <typename T>
__device__ __forceinline__ float4 bilerp4(const float *r0, const float *r1, int x0, int x1,
                                          float dy, float dx, int ch, int g, float lo, float hi,
                                          int post)
{
    const float4 v00 = *reinterpret_cast<const float4 *>(r0 + x0 * ch + 4 * g);
    const float4 v10 = *reinterpret_cast<const float4 *>(r1 + x0 * ch + 4 * g);
    const float4 v01 = *reinterpret_cast<const float4 *>(r0 + x1 * ch + 4 * g);
    const float4 v11 = *reinterpret_cast<const float4 *>(r1 + x1 * ch + 4 * g);
    float4 r = epi4(kr_bilerp4(v00, v10, v01, v11, dy, dx), lo, hi, post);
    r.x = kr_stored<T>(r.x), r.y = kr_stored<T>(r.y);
    r.z = kr_stored<T>(r.z), r.w = kr_stored<T>(r.w);
    return r;
}

/* U's activations in EP (kr_seg_u_smem_layout). */
struct u_smem {
    float *q, *slots, *skip, *a, *p;
};

__device__ __forceinline__ u_smem u_regions(const kr_cuda_segment &s, const seg_smem &m)
{
    int o[KR_SEG_UM_N + 1];
    kr_seg_u_smem_layout(s.c, s.q_oc, s.u_c, s.u_e, o);
    const u_smem u = {m.EP + o[KR_SEG_UM_Q], m.EP + o[KR_SEG_UM_SLOTS], m.EP + o[KR_SEG_UM_SKIP],
                      m.EP + o[KR_SEG_UM_A], m.EP + o[KR_SEG_UM_P]};
    return u;
}

/* U's start, before Q (thread 0 issues its copies; every thread pushes): the skip's rows 2r
 * and 2r + 1 copied as they are stored (float: into u.skip; half: into u.a, converted later)
 * on @p skip_bar, and this block's sums of the segment's output row X pushed into every
 * block's u.slots. EP is free: every block is past the last pair's halo reads. */
template <typename T, int CC>
__device__ __forceinline__ void u_begin(const kr_cuda_segment &s, const seg_smem &m,
                                        cg::cluster_group &cl, unsigned long long *skip_bar,
                                        int img)
{
    const u_smem u = u_regions(s, m);
    const int C = CC ? CC : s.c, H = s.h, rank = (int)cl.block_rank();
    const int bytes = 2 * (2 * SW) * s.u_c * (int)sizeof(T);
    if (threadIdx.x == 0) {
        /* the async proxy's copy after the generic proxy's accesses: EP's (shared), and with E
         * the skip's rows, which this block's threads stored (global; a block barrier since) */
        asm volatile("fence.proxy.async;" ::: "memory");
        const T *src = (const T *)s.u_skip + ((size_t)img * 2 * H + 2 * rank) * (2 * SW) * s.u_c;
        bulk_load(sizeof(T) == 4 ? u.skip : u.a, (const float *)src, bytes, skip_bar);
    }
    row_pool<CC>(m.X, C, m.red, [&](int g, float4 v) {
        for (int r = 0; r < H; r++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(u.slots, r) + rank * C)[g] = v;
    });
}

/* V (segment.h), after U's depthwise (U's rows in u.a): its convolution of U's rows at 2h x 2W
 * with its bias (before the resize, whose weights add to 1) into m.D; its rows 4r .. 4r + 3
 * resized from the owners' rows 2r - 1 .. 2r + 2 (epilogue, as stored) into u.p (the expansion's
 * buffer) and, without W, out to v_y; each row's pool sums with the addend (a slice per row; its
 * rows copied into @p vskip on @p skip_bar) out to v_sums, or with W kept in m.red. */
template <typename T, int UE, int VO>
__device__ __forceinline__ void stage_v(const kr_cuda_segment &s, const float *wu, const int *o,
                                        const seg_smem &m, const u_smem &u, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, const float *vskip, int img,
                                        int ue, int vo, int we, int H, int rank, int t)
{
    constexpr int W2 = 2 * SW, W4 = 4 * SW;
    __syncthreads();
    pointwise_k<float, UE, VO, KR_CUDA_POST_NONE, 2 * W2>(u.a, ue, NULL, wu + o[KR_SEG_U_VW],
                                                          wu + o[KR_SEG_U_VB], vo, m.D, vo, NULL,
                                                          0, -INFINITY, INFINITY,
                                                          KR_CUDA_POST_NONE);
    cl.sync(); /* every block's rows of V's convolution (and every read of u.p done) */
    float *vy = u.p;
    {
        const int G = vo / 4;
        T *y = (T *)s.v_y + ((size_t)img * 4 * H + 4 * rank) * W4 * vo;
        for (int v = t; v < 4 * W4 * G; v += NT) {
            const int g = v % G, x = (v / G) % W4, j = v / (G * W4);
            int y0, y1, x0, x1;
            float dy, dx;
            rs_axis(2 * H, 4 * H, 0, s.v_half, 4 * rank + j, &y0, &y1, &dy);
            rs_axis(W2, W4, 0, s.v_half, x, &x0, &x1, &dx);
            const float4 r = bilerp4<T>(cl.map_shared_rank(m.D, y0 / 2) + (y0 % 2) * W2 * vo,
                                        cl.map_shared_rank(m.D, y1 / 2) + (y1 % 2) * W2 * vo,
                                        x0, x1, dy, dx, vo, g, s.v_lo, s.v_hi, s.v_post);
            *reinterpret_cast<float4 *>(vy + (j * W4 + x) * vo + 4 * g) = r;
            if (!we) { /* (with W, read by nothing after it) */
                const float st[4] = {r.x, r.y, r.z, r.w};
                kr_stv<4>(y + (j * W4 + x) * vo + 4 * g, st);
            }
        }
    }
    __syncthreads();
    bar_wait(skip_bar, 1); /* the addend's rows */
    { /* each row's sums: 16 adjacent lanes per (row, 4 channels), 4 pixels each, added with
       * shuffles in a fixed order */
        const int G = vo / 4, units = 4 * G * 16;
        float *dst = s.v_sums + ((size_t)img * 4 * H + 4 * rank) * vo;
        for (int v0 = 0; v0 < units; v0 += NT) {
            const int v = v0 + t, l = v % 16, g = (v / 16) % G, j = v / (16 * G);
            float4 a = make_float4(0, 0, 0, 0);
            if (v < units)
                for (int px = l; px < W4; px += 16) {
                    const int e = (j * W4 + px) * vo + 4 * g;
                    const float4 q = *reinterpret_cast<const float4 *>(vy + e);
                    float k[4];
                    kr_ldv<4>(reinterpret_cast<const T *>(vskip) + e, k);
                    a.x += q.x + k[0], a.y += q.y + k[1], a.z += q.z + k[2], a.w += q.w + k[3];
                }
#pragma unroll
            for (int off = 8; off > 0; off /= 2) {
                a.x += __shfl_xor_sync(0xffffffffu, a.x, off);
                a.y += __shfl_xor_sync(0xffffffffu, a.y, off);
                a.z += __shfl_xor_sync(0xffffffffu, a.z, off);
                a.w += __shfl_xor_sync(0xffffffffu, a.w, off);
            }
            if (v < units && l == 0) {
                if (!we)
                    *reinterpret_cast<float4 *>(dst + j * vo + 4 * g) = a;
                else /* with W: kept for the block's sums below */
                    reinterpret_cast<float4 *>(m.red)[j * G + g] = a;
            }
        }
    }
}

/* W (segment.h), after V: the block's sums (its rows' in order) pushed into every block's slots
 * (u.a: U's output rows are dead), the means, the excitation; v = addend * e + V's output in
 * place (u.p); the expansion into the window's middle rows (@p wwin, in Q's weight buffer), its
 * halo rows from the neighbours, the depthwise (+ its input) out to w_y. */
template <typename T, int VO, int WE>
__device__ __forceinline__ void stage_w(const kr_cuda_segment &s, const float *wu, const int *o,
                                        const seg_smem &m, const u_smem &u, cg::cluster_group &cl,
                                        const float *vskip, float *wwin, int img, int vo, int we,
                                        int H, int rank, int t)
{
    constexpr int W4 = 4 * SW;
    float *vy = u.p;
    /* W: the block's sums (its rows' in order) pushed into every block's slots (u.a: U's
     * output rows are dead), the means, the excitation; v = addend * e + V's output in place;
     * the expansion into the window's middle rows (in Q's weight buffer), its halo rows from
     * the neighbours, the depthwise (+ its input) out to w_y */
    __syncthreads();
    float *slots = u.a;
    if (t < vo / 4) {
        float4 r = reinterpret_cast<const float4 *>(m.red)[t];
        for (int j = 1; j < 4; j++) {
            const float4 q = reinterpret_cast<const float4 *>(m.red)[j * (vo / 4) + t];
            r.x += q.x, r.y += q.y, r.z += q.z, r.w += q.w;
        }
        for (int b = 0; b < H; b++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(slots, b) + rank * vo)[t] = r;
    }
    cl.sync(); /* every block's sums */
    if (t < vo) {
        float a = 0.0f;
        for (int b = 0; b < H; b++)
            a += slots[b * vo + t];
        m.mean[t] = a * (1.0f / (float)(4 * H * W4));
    }
    int ow[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(vo, s.w_hid, we, ow);
    const float *wq = wu + o[KR_SEG_U_WP];
    excite<VO>(s.wp, wq, ow, m.mean, m.hid, m.sc);
    for (int i = t; i < 4 * W4 * vo / 4; i += NT) {
        const float4 sv = *reinterpret_cast<const float4 *>(m.sc + (4 * i) % vo);
        float k[4];
        kr_ldv<4>(reinterpret_cast<const T *>(vskip) + 4 * i, k);
        float4 a = *reinterpret_cast<const float4 *>(vy + 4 * i);
        a.x = fmaf(k[0], sv.x, a.x), a.y = fmaf(k[1], sv.y, a.y);
        a.z = fmaf(k[2], sv.z, a.z), a.w = fmaf(k[3], sv.w, a.w);
        *reinterpret_cast<float4 *>(vy + 4 * i) = a;
    }
    __syncthreads();
    pointwise_pf<T, VO, WE, KR_CUDA_POST_RELU, 4 * W4>(vy, vo, NULL, wq + ow[KR_SEG_PJ_W],
                                                       wq + ow[KR_SEG_PJ_B], we, wwin + W4 * we,
                                                       we, NULL, 0, s.wp.lo, s.wp.hi, s.wp.post);
    cl.sync(); /* every block's expanded rows */
    halo_rows<4, W4>(wwin, we, cl, H);
    __syncthreads();
    T *yw = (T *)s.w_y + ((size_t)img * 4 * H + 4 * rank) * W4 * we;
    dw3_rows<WE, 4, W4>(wwin, wu + o[KR_SEG_U_WD], wu + o[KR_SEG_U_WB], we, s.w_dlo, s.w_dhi,
                        s.w_dpost, s.w_res_mid, [&](int i, int x, int g, float4 a) {
                            const float v[4] = {a.x, a.y, a.z, a.w};
                            kr_stv<4>(yw + (i * W4 + x) * we + 4 * g, v);
                        });
}

/* U after Q (Q's row in u.q; U's weights at @p wu; the skip's copy counted on @p skip_bar):
 * the excitation of the segment's output, a at h x W from Q's row (the convolution before the
 * resize), a's rows 2r, 2r + 1 resized from rows r - 1 .. r + 1 of the neighbours, the pool of
 * a + skip, its excitation, v = skip * e + a, the expansion p into the middle rows of u.p, its
 * halo rows from the neighbours, the depthwise (+ p) written to y3. Synchronises the cluster
 * four times; the neighbours read u.p until the kernel's last cluster barrier.
 * CC, QO, UC, UE: c, q_oc, u_c, u_e as constants (0 = run-time). */
template <typename T, int CC, int QO, int UC, int UE, int VO, int WE>
__device__ __forceinline__ void stage_u(const kr_cuda_segment &s, const float *wu,
                                        const seg_smem &m, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, int img, float *wwin)
{
    constexpr int W2 = 2 * SW;
    const int C = CC ? CC : s.c, qo = QO ? QO : s.q_oc, uc = UC ? UC : s.u_c;
    const int ue = UE ? UE : s.u_e, H = s.h, t = threadIdx.x, rank = (int)cl.block_rank();
    const u_smem u = u_regions(s, m);
    int o[KR_SEG_U_N + 1], op[KR_SEG_PJ_N + 1];
    kr_seg_u_layout(C, qo, uc, s.u_hid, ue, s.v_oc, s.w_hid, s.w_e, o);
    kr_seg_proj_layout(uc, s.u_hid, ue, op);
    cl.sync(); /* every block's sums pushed */
    if (t < C) { /* 1. the resize's excitation: means, one dense layer q_oc <- C (2 lanes each) */
        float a = 0.0f;
        for (int r = 0; r < H; r++)
            a += u.slots[r * C + t];
        m.mean[t] = a * (1.0f / (float)(H * SW));
    }
    __syncthreads();
    {
        const float *w = wu + o[KR_SEG_U_SW], *b = wu + o[KR_SEG_U_SB];
        const int h2 = t % 2;
        for (int j0 = 0; j0 < qo; j0 += NT / 2) {
            const int j = j0 + t / 2;
            float a = 0.0f;
            if (j < qo)
                for (int k = 4 * h2; k < C; k += 8) {
                    const float4 wv = *reinterpret_cast<const float4 *>(w + j * C + k);
                    const float4 x = *reinterpret_cast<const float4 *>(m.mean + k);
                    a = fmaf(wv.x, x.x, a), a = fmaf(wv.y, x.y, a);
                    a = fmaf(wv.z, x.z, a), a = fmaf(wv.w, x.w, a);
                }
            a += __shfl_xor_sync(0xffffffffu, a, 1);
            if (j < qo && h2 == 0)
                m.sc[j] = epi(a + b[j], s.u_se_lo, s.u_se_hi, s.u_se_post);
        }
    }
    __syncthreads();
    { /* 2. a at h x W: the convolution of Q's row scaled by the excitation, plus its bias
       * (before the resize, whose weights add to 1), into m.D; S lanes per unit over the
       * input channels where there are threads for them, their parts added in order */
        const float *w = wu + o[KR_SEG_U_AW], *b = wu + o[KR_SEG_U_AB];
        const int G = uc / 4, U = SW * G;
        int S = 1;
        while (2 * S * U <= NT && qo % (8 * S) == 0)
            S *= 2;
        const int cs = qo / S;
        float4 *red = reinterpret_cast<float4 *>(m.red);
        for (int v = t; v < S * U; v += NT) {
            const int un = v % U, l = v / U, g = un % G, px = un / G;
            const float *x = u.q + px * qo + l * cs, *sc = m.sc + l * cs;
            const float *wl = w + (size_t)l * cs * uc + 4 * g;
            float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll 4
            for (int c = 0; c < cs; c += 4) {
                const float4 xv = *reinterpret_cast<const float4 *>(x + c);
                const float4 sv = *reinterpret_cast<const float4 *>(sc + c);
                const float xs[4] = {xv.x * sv.x, xv.y * sv.y, xv.z * sv.z, xv.w * sv.w};
#pragma unroll
                for (int j = 0; j < 4; j++)
                    kr_fma4(acc, xs[j], *reinterpret_cast<const float4 *>(wl + (c + j) * uc));
            }
            if (S == 1) {
                const float4 bb = *reinterpret_cast<const float4 *>(b + 4 * g);
                acc.x += bb.x, acc.y += bb.y, acc.z += bb.z, acc.w += bb.w;
                *reinterpret_cast<float4 *>(m.D + px * uc + 4 * g) = acc;
            } else {
                red[l * U + un] = acc;
            }
        }
        if (S > 1) {
            __syncthreads();
            for (int v = t; v < U; v += NT) {
                float4 r = *reinterpret_cast<const float4 *>(b + 4 * (v % G));
                for (int l = 0; l < S; l++) {
                    const float4 q = red[l * U + v];
                    r.x += q.x, r.y += q.y, r.z += q.z, r.w += q.w;
                }
                *reinterpret_cast<float4 *>(m.D + (v / G) * uc + 4 * (v % G)) = r;
            }
        }
    }
    bar_wait(skip_bar, 0); /* the skip's rows, as stored */
    if (sizeof(T) == 2) { /* half in u.a -> float in u.skip */
        for (int i = t; i < 2 * W2 * uc / 4; i += NT) {
            float v[4];
            kr_ldv<4>(reinterpret_cast<const __half *>(u.a) + 4 * i, v);
            *reinterpret_cast<float4 *>(u.skip + 4 * i) = make_float4(v[0], v[1], v[2], v[3]);
        }
    }
    cl.sync(); /* every block's a at h x W */
    { /* 3. a's rows 2r, 2r + 1 (epilogue, as stored) resized from the owners' rows */
        const int G = uc / 4;
        for (int v = t; v < 2 * W2 * G; v += NT) {
            const int g = v % G, x = (v / G) % W2, i = v / (G * W2);
            int y0, y1, x0, x1;
            float dy, dx;
            rs_axis(H, 2 * H, s.u_align, s.u_half, 2 * rank + i, &y0, &y1, &dy);
            rs_axis(SW, W2, s.u_align, s.u_half, x, &x0, &x1, &dx);
            const float4 r = bilerp4<T>(cl.map_shared_rank(m.D, y0), cl.map_shared_rank(m.D, y1),
                                        x0, x1, dy, dx, uc, g, s.u_lo, s.u_hi, s.u_post);
            *reinterpret_cast<float4 *>(u.a + (i * W2 + x) * uc + 4 * g) = r;
        }
    }
    __syncthreads();
    /* 4. the pool of a + skip: every block's sums into every block's slots (free: every block
     * read them before the barrier above) */
    row_pool<UC, 2 * W2>(u.a, uc, m.red, [&](int g, float4 v) {
        for (int r = 0; r < H; r++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(u.slots, r) + rank * uc)[g] = v;
    }, u.skip);
    cl.sync();
    if (t < uc) {
        float a = 0.0f;
        for (int r = 0; r < H; r++)
            a += u.slots[r * uc + t];
        m.mean[t] = a * (1.0f / (float)(2 * H * W2));
    }
    /* 5. its excitation; v = skip * e + a into u.a; the expansion p into u.p's middle rows */
    const float *wp = wu + o[KR_SEG_U_P];
    excite<UC>(s.up, wp, op, m.mean, m.hid, m.sc);
    for (int i = t; i < 2 * W2 * uc / 4; i += NT) {
        const float4 sv = *reinterpret_cast<const float4 *>(m.sc + (4 * i) % uc);
        const float4 k = *reinterpret_cast<const float4 *>(u.skip + 4 * i);
        float4 a = *reinterpret_cast<const float4 *>(u.a + 4 * i);
        a.x = fmaf(k.x, sv.x, a.x), a.y = fmaf(k.y, sv.y, a.y);
        a.z = fmaf(k.z, sv.z, a.z), a.w = fmaf(k.w, sv.w, a.w);
        *reinterpret_cast<float4 *>(u.a + 4 * i) = a;
    }
    __syncthreads();
    pointwise_pf<T, UC, UE, KR_CUDA_POST_RELU, 2 * W2>(u.a, uc, NULL, wp + op[KR_SEG_PJ_W],
                                                       wp + op[KR_SEG_PJ_B], ue, u.p + W2 * ue,
                                                       ue, NULL, 0, s.up.lo, s.up.hi,
                                                       s.up.post);
    cl.sync(); /* every block's p */
    const int vo = VO ? VO : s.v_oc, we = WE ? WE : s.w_e;
    constexpr int W4 = 4 * SW;
    float *vskip = m.EP; /* with V: its addend's rows as stored, copied meanwhile */
    if (vo && t == 0) { /* (EP's start is dead: Q's row, the sums, the skip) */
        asm volatile("fence.proxy.async;" ::: "memory");
        const T *src = (const T *)s.v_skip + ((size_t)img * 4 * H + 4 * rank) * W4 * vo;
        bulk_load(vskip, (const float *)src, 4 * W4 * vo * (int)sizeof(T), skip_bar);
    }
    halo_rows(u.p, ue, cl, H); /* 6. p's rows 2r - 1 and 2r + 2 */
    __syncthreads();
    { /* 7. the 3x3 depthwise of p (epilogue, plus p with res_mid) into y3's rows 2r, 2r + 1,
       * or with V into u.a (a's and v's rows are dead) */
        T *y = (T *)s.y3 + ((size_t)img * 2 * H + 2 * rank) * W2 * ue;
        dw3_rows<UE>(u.p, wu + o[KR_SEG_U_DW], wu + o[KR_SEG_U_DB], ue, s.u_dlo, s.u_dhi,
                      s.u_dpost, s.u_res_mid, [&](int i, int x, int g, float4 a) {
                          if (vo) {
                              a.x = kr_stored<T>(a.x), a.y = kr_stored<T>(a.y);
                              a.z = kr_stored<T>(a.z), a.w = kr_stored<T>(a.w);
                              *reinterpret_cast<float4 *>(u.a + (i * W2 + x) * ue + 4 * g) = a;
                          } else {
                              const float v[4] = {a.x, a.y, a.z, a.w};
                              kr_stv<4>(y + (i * W2 + x) * ue + 4 * g, v);
                          }
                      });
    }
    if (!vo)
        return;
    stage_v<T, UE, VO>(s, wu, o, m, u, cl, skip_bar, vskip, img, ue, vo, we, H, rank, t);
    if (!we)
        return;
    stage_w<T, VO, WE>(s, wu, o, m, u, cl, vskip, wwin, img, vo, we, H, rank, t);
}

/* stage_u with run-time shapes: one copy, called (not inlined). */
template <typename T>
__device__ __noinline__ void stage_u_rt(const kr_cuda_segment &s, const float *wu,
                                        const seg_smem m, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, int img, float *wwin)
{
    stage_u<T, 0, 0, 0, 0, 0, 0>(s, wu, m, cl, skip_bar, img, wwin);
}
#endif

/* pair() with run-time shapes: one copy, called (not inlined). */
template <typename T, int K>
__device__ __noinline__ void pair_rt(const kr_cuda_segment &s, int k, const float *we,
                                     const seg_smem m, cg::cluster_group &cl)
{
    pair<T, K, 0, 0>(s, k, we, m, cl);
}

template <typename T, int K>
__global__ void __launch_bounds__(NT, 1) segment_kernel(const __grid_constant__ kr_cuda_segment s)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) float sm[];
    __shared__ __align__(8) unsigned long long bar[3]; /* the stage buffers', U's skip copy */
    cg::cluster_group cl = cg::this_cluster();
    const int H = s.h, C = s.c, CI0 = s.p0.ci, t = threadIdx.x;
    const int rank = (int)cl.block_rank(), img = (int)blockIdx.x / H;
    int so[KR_SEG_SM_N + 1];
    kr_seg_smem_layout(&s, so);
    float *wbuf = sm + so[KR_SEG_SM_WBUF], *xin = sm + so[KR_SEG_SM_XIN], *X = sm + so[KR_SEG_SM_X];
    float *EP = sm + so[KR_SEG_SM_EP], *D = sm + so[KR_SEG_SM_D], *slots = sm + so[KR_SEG_SM_SLOTS];
    float *mean = sm + so[KR_SEG_SM_MEAN], *hid = sm + so[KR_SEG_SM_HID];
    float *sc = sm + so[KR_SEG_SM_SC], *red = sm + so[KR_SEG_SM_RED];
    const seg_smem m = {wbuf, xin, X, EP, D, slots, mean, hid, sc, red};

    /* S's stage (0 or 1 where there is one), P0's, the last one */
    const int S0 = s.s_ic > 0, last = S0 + s.n_ir + (s.q_oc > 0);
    /* P0's weights: in buffer S0, or with S (whose window is in buffer 1) in EP, which nothing
     * uses before pair 0 (the finder checks that they fit) */
    const float *wp0 = S0 ? EP : wbuf;
    if (t == 0) { /* stage 0's and stage 1's weights */
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[0])));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[1])));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[2])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        load_stage(s, 0, wbuf, bar);
        if (!s.e_ic) /* (with E, once E is done with EP) */
            load_stage(s, 1, S0 ? EP : wbuf + s.buf_floats, bar);
    }
    /* the weights are set-up data; the input is the kernel before's (kr_cuda_segment_launch's
     * after_kernel: wait for its writes) */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (S0) { /* S: P0's input row and its channel means without leaving the cluster */
        if (s.e_ic == 72 && s.s_ic == 24 && s.e_e == 88)
            stage_e<T, 72, 24, 88>(s, m, cl, bar, img);
        else if (s.e_ic)
            stage_e_rt<T>(s, m, cl, bar, img);
        if (s.s_ic == 24 && s.sd.e == 96)
            stage_s<T, K, 24, 96>(s, m, cl, bar, img);
        else
            stage_s_rt<T, K>(s, m, cl, bar, img);
    } else { /* this block's input row, and P0's channel means from the sums before it */
        load_rows((const T *)s.x + ((size_t)img * H + rank) * SW * CI0, SW * CI0, xin);
        const float *sums = s.x_sums + (size_t)img * s.x_slices * CI0;
        if (t < CI0) { /* slices in batches of 8 loads issued together, added in order */
            float a = 0.0f;
            for (int k0 = 0; k0 < s.x_slices; k0 += 8) {
                float v[8];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[k] = k0 + k < s.x_slices ? sums[(size_t)(k0 + k) * CI0 + t] : 0.0f;
#pragma unroll
                for (int k = 0; k < 8; k++)
                    a += v[k];
            }
            mean[t] = a * (1.0f / (float)s.x_pixels);
        }
    }
    __syncthreads(); /* also: the mbarriers are initialised */
    wait_stage(bar, S0); /* P0 */
    {
        int o[KR_SEG_PJ_N + 1];
        kr_seg_proj_layout(CI0, s.p0.hid, C, o);
        excite<0>(s.p0, wp0, o, mean, hid, sc);
        pointwise<T, 96, 32>(xin, CI0, sc, wp0 + o[KR_SEG_PJ_W], wp0 + o[KR_SEG_PJ_B], C, X, C,
                             NULL, 0, s.p0.lo, s.p0.hi, s.p0.post);
    }
    __syncthreads();

#pragma unroll 1
    for (int k = 0; k < s.n_ir; k++) {
        const int st = S0 + 1 + k, b = st % 2;
        if (t == 0 && st + 1 <= last) { /* into the other buffer (stage st - 1's, or at pair 0
                                         * after S S's window), which every thread left */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            load_stage(s, st + 1, wbuf + (1 - b) * s.buf_floats, bar);
        }
        wait_stage(bar, st);
        const float *we = wbuf + b * s.buf_floats;
        const int E = s.d[k].e;
        if (C == 32 && E == 128)
            pair<T, K, 32, 128>(s, k, we, m, cl);
        else if (C == 32 && E == 96)
            pair<T, K, 32, 96>(s, k, we, m, cl);
        else
            pair_rt<T, K>(s, k, we, m, cl);
    }
    if (!s.u_c) { /* with U, neither the output nor its pool's sums leave the cluster */
        T *y = (T *)s.y + ((size_t)img * H + rank) * SW * C;
        for (int i = t; i < SW * C / 4; i += NT)
            kr_stv<4>(y + 4 * i, X + 4 * i);
    }
    if (s.y_sums && !s.u_c) { /* the output's pool tail: block r's row sums in slice r, zeros in slices
                     * r + h, r + 2h, ... (the planner asks for y_slices >= h) */
        float *dst = s.y_sums + (size_t)img * s.y_slices * C;
        row_pool<0>(X, C, red, [&](int g, float4 v) {
            reinterpret_cast<float4 *>(dst + (size_t)rank * C)[g] = v;
        });
        for (int i = t; i < (s.y_slices - 1) / H * C; i += NT) {
            const int k = rank + H * (1 + i / C);
            if (k < s.y_slices)
                dst[(size_t)k * C + i % C] = 0.0f;
        }
    }
    if (s.q_oc) { /* Q: the row into EP (free: every block is past the last halo reads), then
                   * y2, or U */
        const int b = last % 2, QO = s.q_oc;
        if (s.u_c) { /* U's weights into the last pair's buffer, which every thread left */
            if (t == 0) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                load_stage(s, last + 1, wbuf + (1 - b) * s.buf_floats, bar);
            }
            if (C == 32)
                u_begin<T, 32>(s, m, cl, &bar[2], img);
            else
                u_begin<T, 0>(s, m, cl, &bar[2], img);
        }
        wait_stage(bar, last);
        int o[KR_SEG_Q_N + 1];
        kr_seg_q_layout(C, QO, o);
        const float *wq = wbuf + b * s.buf_floats + o[KR_SEG_Q_W];
        const float *bq = wbuf + b * s.buf_floats + o[KR_SEG_Q_B];
        if (C == 32 && QO == 128 && s.q_post == KR_CUDA_POST_RELU)
            pointwise_k<T, 32, 128, KR_CUDA_POST_RELU>(X, C, NULL, wq, bq, QO, EP, QO, NULL, 0,
                                                       s.q_lo, s.q_hi, s.q_post);
        else
            pointwise_rt<T>(X, C, NULL, wq, bq, QO, EP, QO, NULL, 0, s.q_lo, s.q_hi, s.q_post);
        __syncthreads();
        if (s.u_c) {
            wait_stage(bar, last + 1);
            const float *wu = wbuf + (1 - b) * s.buf_floats;
            float *qbuf = wbuf + b * s.buf_floats; /* Q's weights: dead, W's window */
            if (C == 32 && QO == 128 && s.u_c == 24 && s.u_e == 24 && s.v_oc == 16 &&
                s.w_e == 16)
                stage_u<T, 32, 128, 24, 24, 16, 16>(s, wu, m, cl, &bar[2], img, qbuf);
            else
                stage_u_rt<T>(s, wu, m, cl, &bar[2], img, qbuf);
        } else {
            T *y2 = (T *)s.y2 + ((size_t)img * H + rank) * SW * QO;
            for (int i = t; i < SW * QO / 4; i += NT)
                kr_stv<4>(y2 + 4 * i, EP + 4 * i);
        }
    }
    cl.sync(); /* no block leaves while another may read its shared memory */
#endif
}

typedef void (*segment_fn)(const kr_cuda_segment);

/* The kernel for @p seg's element type and window. */
static segment_fn pick(const kr_cuda_segment *seg)
{
    if (seg->k == 5)
        return seg->f16 ? segment_kernel<__half, 5> : segment_kernel<float, 5>;
    return seg->f16 ? segment_kernel<__half, 3> : segment_kernel<float, 3>;
}

/* The launch of @p items clusters of seg->h blocks on @p stream (a programmatic dependent one
 * with @p after_kernel); @p attr: room for its two attributes. */
static cudaLaunchConfig_t launch_config(const kr_cuda_segment *seg, int items, int after_kernel,
                                        cudaStream_t stream, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)seg->h;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)(seg->h * items));
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = kr_cuda_segment_smem(seg);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = after_kernel ? 2 : 1;
    return cfg;
}

extern "C" int kr_cuda_segment_prepare(const kr_cuda_segment *seg, const char **why)
{
    *why = NULL;
    int dev = 0, cluster = 0, optin = 0, fits = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess)
        return (int)e;
    if (!cluster) {
        *why = "the device has no thread-block clusters";
        return 0;
    }
    if ((size_t)optin < kr_cuda_segment_smem(seg)) {
        *why = "a block's shared memory is too small for it";
        return 0;
    }
    /* the kernel's shared-memory allowance is the function's, shared by every instance: only
     * ever raised, so that an instance with a smaller segment never lowers another's */
    const segment_fn fn = pick(seg);
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, fn);
    if (e == cudaSuccess && (size_t)fa.maxDynamicSharedSizeBytes < kr_cuda_segment_smem(seg))
        e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)kr_cuda_segment_smem(seg));
    if (e == cudaSuccess && seg->h > 8)
        e = cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = launch_config(seg, 1, 0, 0, attr);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveClusters(&fits, fn, &cfg);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an unsupported cluster size is not sticky */
        *why = "the device refuses the cluster size or shared memory";
        return 0;
    }
    if (fits < 1)
        *why = "one cluster does not fit on the device";
    return 0;
}

extern "C" int kr_cuda_segment_launch(const kr_cuda_segment *seg, int after_kernel, void *stream)
{
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = launch_config(seg, seg->batch, after_kernel,
                                                 (cudaStream_t)stream, attr);
    return (int)cudaLaunchKernelEx(&cfg, pick(seg), *seg);
}
