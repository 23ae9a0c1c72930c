/*
 * The pieces the tensor-core convolutions of conv_2d_tc.cu (conv_tc, conv_tcp) and the chain
 * kernel of conv_2d_tc_chain.cu share: the layer's shape (tc_shape), the mma.sync / ldmatrix /
 * cp.async wrappers, the folded gathers (tc_resized8, tc_pooled8), the epilogue (tc_store2) and
 * the patch kernel's tile as a device function (tcp_tile), so that both kernels compute a layer
 * with the same code and the same summation order (ops/conv_2d.cuh, "tensor-core patch").
 * Compute capability 8.0+ (the device code traps below it); conv_2d_tc.cu's comment describes the
 * data layout and tiling.
 */
#ifndef KEYER_NN_CUDA_CONV_2D_TC_CUH
#define KEYER_NN_CUDA_CONV_2D_TC_CUH

#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/ops/resize_bilinear.cuh"

#define TC_BK 32
#define TC_LDS (TC_BK + 8) /* halves per shared row: 80 bytes */
#define TC_STAGES 3
#define TC_THREADS 128

struct tc_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl;
    int M, K;
    /* the patch kernel (conv_tcp): tiles of the output per image along y and x, and the input
     * patch a tile reads (ph x pw pixels) */
    int tiles_y, tiles_x, ph, pw;
    /* the folded concatenation (c0 = 0: none): channels [0, c0) from src0 (c0 channels per
     * pixel), [c0, ic) from src1 (ic - c0); rz: which source is resized (-1 none) from rh x rw
     * pixels to ih x iw, with RESIZE_BILINEAR's align_corners and half_pixel_centers */
    int c0, rz, rh, rw, align, half;
    /* the folded max pool (pool = 0: none): the input pixels are window maxima over the
     * pih x piw source */
    int pool, pih, piw, pkh, pkw, psh, psw, pdh, pdw, ppt, ppl;
};

template <int BM, int BN, int WM, int WN> struct tc_tile {
    static constexpr int TM = BM / WM, TN = BN / WN; /* a warp's tile */
    static constexpr int MI = TM / 16, NI = TN / 8;  /* m16 and n8 fragments per warp */
    static constexpr int AROWS = BM / 32;            /* A rows each thread loads per stage */
    static_assert(WM * WN == 4 || WM * WN == 8, "4 warps (conv_tc), 4 or 8 (conv_tcp)");
    static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "fragments");
    static_assert(BN * 4 <= 2 * TC_THREADS, "B chunks per thread");
};

__device__ __forceinline__ unsigned tc_smem(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes of activations at @p p: an ordinary load, or with @p CG one from L2 (ld.global.cg),
 * for the chain kernel (conv_2d_tc_chain.cu), whose layers read what other blocks of the same
 * launch wrote: the L1 and read-only caches are not coherent within a launch. */
template <bool CG> __device__ __forceinline__ uint4 tc_ld16(const __half *p)
{
    if (CG)
        return __ldcg(reinterpret_cast<const uint4 *>(p));
    return *reinterpret_cast<const uint4 *>(p);
}

/* 16 bytes from global @p src to shared @p dst, or 16 zero bytes where !ok (nothing is read).
 * CA: through L1 (the activations: a 3x3 layer reads each input pixel for up to 9 taps of a
 * block's rows); else L2 only (the weights, shared by all blocks). */
template <bool CA> __device__ __forceinline__ void tc_cp16(unsigned dst, const void *src, bool ok)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (CA)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                     "r"(ok ? 16 : 0));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                     "r"(ok ? 16 : 0));
#endif
}

__device__ __forceinline__ void tc_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N> __device__ __forceinline__ void tc_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void tc_ldsm4(unsigned *r, unsigned addr)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

__device__ __forceinline__ void tc_mma(float *c, const unsigned *a, const unsigned *b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* 8 channels [c, c + 8) of the resized source at output pixel (b, iy, ix) of the concatenation,
 * from the rh x rw source of @p cs channels as RESIZE_BILINEAR computes them (rs_axis, the taps
 * in rs_pixel's order), each rounded to half as the RESIZE would store it. */
template <bool CG>
__device__ __forceinline__ uint4 tc_resized8(const __half *__restrict__ src, const tc_shape &s,
                                             int b, int iy, int ix, int c, int cs)
{
    int y0, y1, x0, x1;
    float fy, fx;
    rs_axis(s.rh, s.ih, s.align, s.half, iy, &y0, &y1, &fy);
    rs_axis(s.rw, s.iw, s.align, s.half, ix, &x0, &x1, &fx);
    const __half *base = src + (size_t)b * s.rh * s.rw * cs + c;
    const uint4 q00 = tc_ld16<CG>(base + ((size_t)y0 * s.rw + x0) * cs);
    const uint4 q01 = tc_ld16<CG>(base + ((size_t)y0 * s.rw + x1) * cs);
    const uint4 q10 = tc_ld16<CG>(base + ((size_t)y1 * s.rw + x0) * cs);
    const uint4 q11 = tc_ld16<CG>(base + ((size_t)y1 * s.rw + x1) * cs);
    const __half2 *h00 = reinterpret_cast<const __half2 *>(&q00);
    const __half2 *h01 = reinterpret_cast<const __half2 *>(&q01);
    const __half2 *h10 = reinterpret_cast<const __half2 *>(&q10);
    const __half2 *h11 = reinterpret_cast<const __half2 *>(&q11);
    uint4 out;
    __half2 *o = reinterpret_cast<__half2 *>(&out);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 a = __half22float2(h00[j]), bb = __half22float2(h01[j]);
        const float2 cc = __half22float2(h10[j]), d = __half22float2(h11[j]);
        /* v00 = q00 (y0, x0), v10 = q10 (y1, x0), v01 = q01 (y0, x1), v11 = q11 */
        o[j] = __floats2half2_rn(a.x * (1 - fy) * (1 - fx) + cc.x * fy * (1 - fx) +
                                     bb.x * (1 - fy) * fx + d.x * fy * fx,
                                 a.y * (1 - fy) * (1 - fx) + cc.y * fy * (1 - fx) +
                                     bb.y * (1 - fy) * fx + d.y * fy * fx);
    }
    return out;
}

/* 8 channels [c, c + 8) of the folded max pool's output pixel (b, oy, ox): the largest of the
 * window's taps inside the source (kr_pool_window's candidates; -inf, as the pool stores its
 * -FLT_MAX in half, when none is), exact in half. */
template <bool CG>
__device__ __forceinline__ uint4 tc_pooled8(const __half *__restrict__ src, const tc_shape &s,
                                            int b, int oy, int ox, int c)
{
    const __half2 ninf = __half2half2(__ushort_as_half((unsigned short)0xFC00u));
    __half2 m[4] = {ninf, ninf, ninf, ninf};
    const __half *base = src + (size_t)b * s.pih * s.piw * s.ic + c;
    if (s.pkh == 2 && s.pkw == 2) {
        /* u2netp's pools: the four taps' loads issued together, then the same maxima in the same
         * (ky, kx) order (a tap outside the source reads as -inf: max(m, -inf) = m) */
        const int y0 = oy * s.psh - s.ppt, x0 = ox * s.psw - s.ppl;
        const int yy[2] = {y0, y0 + s.pdh}, xx[2] = {x0, x0 + s.pdw};
        const uint4 ninf4 = make_uint4(0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u);
        uint4 q[4];
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const int iy = yy[t >> 1], ix = xx[t & 1];
            q[t] = (unsigned)iy < (unsigned)s.pih && (unsigned)ix < (unsigned)s.piw
                       ? tc_ld16<CG>(base + ((size_t)iy * s.piw + ix) * s.ic)
                       : ninf4;
        }
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const __half2 *h = reinterpret_cast<const __half2 *>(&q[t]);
#pragma unroll
            for (int j = 0; j < 4; j++)
                m[j] = __hmax2(m[j], h[j]);
        }
        uint4 out;
        __half2 *o = reinterpret_cast<__half2 *>(&out);
#pragma unroll
        for (int j = 0; j < 4; j++)
            o[j] = m[j];
        return out;
    }
    for (int ky = 0; ky < s.pkh; ky++) {
        const int iy = oy * s.psh - s.ppt + ky * s.pdh;
        if ((unsigned)iy >= (unsigned)s.pih)
            continue;
        for (int kx = 0; kx < s.pkw; kx++) {
            const int ix = ox * s.psw - s.ppl + kx * s.pdw;
            if ((unsigned)ix >= (unsigned)s.piw)
                continue;
            const uint4 q = tc_ld16<CG>(base + ((size_t)iy * s.piw + ix) * s.ic);
            const __half2 *h = reinterpret_cast<const __half2 *>(&q);
#pragma unroll
            for (int j = 0; j < 4; j++)
                m[j] = __hmax2(m[j], h[j]);
        }
    }
    uint4 out;
    __half2 *o = reinterpret_cast<__half2 *>(&out);
#pragma unroll
    for (int j = 0; j < 4; j++)
        o[j] = m[j];
    return out;
}

/* The epilogue of output channels n and n + 1 of the output pixel whose first element is at
 * @p row in @p y, from their sums @p a0 and @p a1: bias, clamp, folded activation and residual
 * (kr_conv_out, ops/conv_2d.cuh), stored in half (as a pair where @p oc is even). @p CG: the
 * residual read from L2 (tc_ld16; the chain kernel takes only even @p oc). */
template <bool CG>
__device__ __forceinline__ void tc_store2(__half *__restrict__ y, const float *__restrict__ bias,
                                          const kr_epilogue &e, int oc, size_t row, int n,
                                          float a0, float a1)
{
    float v[2];
    const float a[2] = {a0, a1};
#pragma unroll
    for (int q = 0; q < 2; q++)
        v[q] = kr_conv_out(a[q], bias && n + q < oc ? bias[n + q] : 0.0f, 0.0f, false, kr_no_res(),
                           [&](float t) { return kr_apply(e, t); });
    const size_t o = row + n;
    if ((oc & 1) == 0 && n < oc) {
        if (e.res) {
            const __half *rp = (const __half *)e.res + o;
            unsigned rb;
            if (CG)
                rb = __ldcg(reinterpret_cast<const unsigned *>(rp));
            else
                rb = *reinterpret_cast<const unsigned *>(rp);
            const float2 r = __half22float2(*reinterpret_cast<const __half2 *>(&rb));
            v[0] += r.x, v[1] += r.y;
        }
        *reinterpret_cast<__half2 *>(y + o) = __floats2half2_rn(v[0], v[1]);
    } else {
#pragma unroll
        for (int q = 0; q < 2; q++)
            if (n + q < oc) {
                kr_add_res<__half, 1>(e, o + q, &v[q]);
                kr_st(y + o + q, v[q]);
            }
    }
}

/*
 * The patch kernel (conv_tcp), for layers with more than one tap: a block of WM x WN warps (4
 * or 8) computes a tile of TH x TP_TW output pixels of one image (BM = TH * 16 GEMM rows) by BN
 * output channels. For each
 * 16-channel chunk of the input it stages, in shared memory, the input patch the tile's windows
 * cover (ph x pw pixels, zeros outside the input) and the chunk's weights of every tap; every
 * input value (gathered from a folded concatenation, resize or pool, once) then serves all the
 * taps that read it: each tap's A fragments are ldmatrix rows pointed at the shifted patch
 * pixels. Two stages: the next chunk's patch and weights load (cp.async) while this one's are
 * multiplied.
 *
 * Summation order: per output, from 0, the 16-channel chunks of the input in order, within each
 * the taps in (ky, kx) order, each tap's 16 products (channels past ic count as zero) summed as
 * the tensor core sums them in float; the bias last. Only the layer's shape chooses this kernel
 * (tc_use_patch), never the batch.
 */
#define TP_CK 16  /* input channels per stage */
#define TP_LDS 24 /* halves per shared row: 48 bytes (8 consecutive rows: no bank conflict) */
#define TP_TW 16  /* tile width in output pixels: a 16-row fragment is one tile row */
#define TP_PREFETCH 16384 /* bytes of weights per L2 bulk prefetch (sm_90) */

/* Shared memory of conv_tcp: two stages of the patch and BN x taps weight rows. */
static inline size_t tp_smem_bytes(const tc_shape &s, int bn)
{
    return 2 * ((size_t)s.ph * s.pw + (size_t)s.kh * s.kw * bn) * TP_LDS * sizeof(__half);
}

/* Patch tiles of TH rows: their geometry in @p s (tiles_y, ph; tiles_x and pw do not depend on
 * TH). */
static inline void tp_geometry(tc_shape &s, int th)
{
    s.tiles_y = (s.oh + th - 1) / th;
    s.tiles_x = (s.ow + TP_TW - 1) / TP_TW;
    s.ph = (th - 1) * s.sh + (s.kh - 1) * s.dh + 1;
    s.pw = (TP_TW - 1) * s.sw + (s.kw - 1) * s.dw + 1;
}

/* The most shared memory conv_tcp takes: beyond it (large dilations: a patch mostly outside the
 * input) a layer stays on conv_tc, which keeps several blocks per multiprocessor. */
#define TP_SMEM_MAX (100 * 1024)

/* Whether the layer of shape @p s (kh, kw, strides, dilations, oc set) runs on conv_tcp: more
 * than one tap and the 8-row tile's shared memory (the larger of the two tile heights) within
 * TP_SMEM_MAX and the device's opt-in limit. By the layer's shape and the device only. */
static inline int tc_use_patch(const kr_cuda_op *op, tc_shape s, int bn)
{
    if (s.kh * s.kw < 2)
        return 0;
    tp_geometry(s, 8);
    const size_t smem = tp_smem_bytes(s, bn);
    return smem <= TP_SMEM_MAX && smem <= op->caps->smem_block_optin;
}

/* The layer of @p op (which kr_cuda_conv_2d_tc_fits accepted) as the kernels see it: @p s (without
 * the patch geometry: tp_geometry), its sources (*x0, *x1: a folded concatenation's, a folded
 * pool's, else the input and NULL), its bias (NULL: none) and *batch. Returns
 * cudaErrorInvalidValue for a layer past 32-bit indexing, else 0. */
static inline int tc_shape_of(const kr_cuda_op *op, tc_shape *sp, const __half **x0p,
                              const __half **x1p, const float **biasp, size_t *batchp)
{
    tc_shape &s = *sp;
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    s.oh = yt->dims[1], s.ow = yt->dims[2], s.oc = yt->dims[3];
    s.ic = wt->dims[3];
    s.kh = wt->dims[1], s.kw = wt->dims[2];
    s.sh = p->stride_h, s.sw = p->stride_w;
    s.dh = p->dilation_h > 0 ? p->dilation_h : 1, s.dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s.pt = p->pad_top, s.pl = p->pad_left;
    s.c0 = 0, s.rz = -1, s.rh = s.rw = 0, s.align = s.half = 0;
    s.pool = 0, s.pih = s.piw = s.pkh = s.pkw = s.psh = s.psw = s.pdh = s.pdw = s.ppt = s.ppl = 0;
    const __half *x0 = (const __half *)op->in[0], *x1 = NULL;
    if (op->cat.src[0]) {
        s.ih = op->cat.h, s.iw = op->cat.w;
        s.c0 = op->cat.c0;
        s.rz = op->cat.rz;
        s.rh = op->cat.rh, s.rw = op->cat.rw;
        s.align = op->cat.align, s.half = op->cat.half;
        x0 = (const __half *)op->cat.src[0], x1 = (const __half *)op->cat.src[1];
    } else {
        const kr_tensor *xt = kr_in_t(op, 0);
        s.ih = xt->dims[1], s.iw = xt->dims[2];
    }
    if (op->pool.src) {
        s.pool = 1;
        s.pih = op->pool.ih, s.piw = op->pool.iw, s.pkh = op->pool.kh, s.pkw = op->pool.kw;
        s.psh = op->pool.sh, s.psw = op->pool.sw, s.pdh = op->pool.dh, s.pdw = op->pool.dw;
        s.ppt = op->pool.pt, s.ppl = op->pool.pl;
        x0 = (const __half *)op->pool.src;
    }
    const size_t batch = (size_t)kr_dim(op, yt, 0);
    const size_t M = batch * s.oh * s.ow;
    const size_t K = (size_t)wt->dims[1] * wt->dims[2] * s.ic;
    if (M >= ((size_t)1 << 31) || K >= ((size_t)1 << 31) ||
        batch * s.ih * s.iw * s.ic >= ((size_t)1 << 40))
        return (int)cudaErrorInvalidValue;
    s.M = (int)M, s.K = (int)K;
    s.tiles_y = s.tiles_x = s.ph = s.pw = 0;
    *x0p = x0, *x1p = x1, *batchp = batch;
    *biasp = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    return 0;
}

/* One tile of the patch kernel: tile @p tile (of batch x tiles_y x tiles_x, x fastest) by the BN
 * output channels from @p n0, with the block's WM x WN warps and @p sm (tp_smem_bytes of
 * dynamic shared memory). conv_tcp runs one per block; the chain kernel (conv_2d_tc_chain.cu)
 * runs several layers' tiles in one launch with CHAIN set: then its activations are read from L2
 * (cp.async.cg, tc_ld16<true>: other blocks of the launch wrote them), and the weights' L2
 * prefetch and the programmatic-dependent-launch wait are the chain kernel's. The same
 * arithmetic either way (summation order above). Every thread of the block calls it; it ends
 * with the shared memory free for the next call (the last chunk's barrier). */
template <int TH, int BN, int WM, int WN, int GK, bool CHAIN>
__device__ __forceinline__ void tcp_tile(__half *sm, const __half *__restrict__ x,
                                         const __half *__restrict__ x1,
                                         const __half *__restrict__ w,
                                         const float *__restrict__ bias, __half *__restrict__ y,
                                         const tc_shape &s, const kr_epilogue &e, int tile, int n0)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    typedef tc_tile<TH * TP_TW, BN, WM, WN> tl;
    constexpr int MI = tl::MI, NI = tl::NI, NT = WM * WN * 32;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int taps = s.kh * s.kw, patch = s.ph * s.pw;
    const int stage = (patch + taps * BN) * TP_LDS; /* halves */

    int t = tile;
    const int tx = t % s.tiles_x;
    t /= s.tiles_x;
    const int ty = t % s.tiles_y, b = t / s.tiles_y;
    const int oy0 = ty * TH, ox0 = tx * TP_TW;
    const int iy0 = oy0 * s.sh - s.pt, ix0 = ox0 * s.sw - s.pl;
    const int nq = (s.ic + TP_CK - 1) / TP_CK;

    auto load_patch = [&](int buf, int q) {
        __half *P = sm + buf * stage;
        /* two elements per pass: a gathered (resized or pooled) element's loads are all issued
         * before either is stored */
        for (int i0 = tid; i0 < patch * 2; i0 += 2 * NT) {
            uint4 v[2];
            __half *vd[2] = {NULL, NULL};
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int i = i0 + u * NT;
                if (i >= patch * 2)
                    break;
                const int p = i >> 1, hc = i & 1;
                const int py = p / s.pw, px = p - py * s.pw;
                const int iy = iy0 + py, ix = ix0 + px, c = q * TP_CK + hc * 8;
                const bool ok =
                    c < s.ic && (unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw;
                const __half *src = x;
                int cs = s.ic, cc = c, resized = 0;
                if (s.c0) {
                    const bool second = c >= s.c0;
                    src = second ? x1 : x;
                    cs = second ? s.ic - s.c0 : s.c0;
                    cc = second ? c - s.c0 : c;
                    resized = s.rz == (second ? 1 : 0);
                }
                __half *dst = P + p * TP_LDS + hc * 8;
                if (GK && (resized || s.pool)) {
                    v[u] = make_uint4(0, 0, 0, 0);
                    if (ok)
                        v[u] = s.pool ? tc_pooled8<CHAIN>(src, s, b, iy, ix, cc)
                                      : tc_resized8<CHAIN>(src, s, b, iy, ix, cc, cs);
                    vd[u] = dst;
                } else {
                    const __half *g = ok ? src + (((size_t)b * s.ih + iy) * s.iw + ix) * cs + cc : x;
                    tc_cp16<!CHAIN>(tc_smem(dst), g, ok);
                }
            }
#pragma unroll
            for (int u = 0; u < 2; u++)
                if (vd[u])
                    *reinterpret_cast<uint4 *>(vd[u]) = v[u];
        }
    };
    auto load_weights = [&](int buf, int q) {
        __half *W = sm + buf * stage + patch * TP_LDS;
        for (int i = tid; i < taps * BN * 2; i += NT) {
            const int hc = i & 1, r = i >> 1, n = r % BN, tap = r / BN;
            const int c = q * TP_CK + hc * 8;
            const bool ok = n0 + n < s.oc && c < s.ic;
            const __half *g = ok ? w + (size_t)(n0 + n) * s.K + (size_t)tap * s.ic + c : w;
            tc_cp16<false>(tc_smem(W + (tap * BN + n) * TP_LDS + hc * 8), g, ok);
        }
    };

    /* each A fragment row's patch pixel at tap (0, 0): row r = wm * TM + i * 16 + (lane & 15)
     * is tile pixel (r / 16, lane & 15) */
    int arow[MI];
#pragma unroll
    for (int i = 0; i < MI; i++)
        arow[i] = ((wm * tl::TM + i * 16) / TP_TW) * s.sh * s.pw + (lane & 15) * s.sw;
    const int acol = (lane >> 4) * 8;
    const int brow = wn * tl::TN + (lane >> 4) * 8 + (lane & 7), bcol = ((lane >> 3) & 1) * 8;

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                acc[i][j][q] = 0.0f;

    /* the weights are the layer's own (written once at set-up): loaded before waiting for the
     * kernel before, which a programmatic dependent launch lets run until here (sm_90); on sm_90
     * the n-tile's weights of every chunk are also fetched into L2 (bulk prefetches of 16 KB,
     * each by one block): a run's activations evict them, and the deep layers (a few blocks,
     * up to 8 chunks of 18 KB of weights each) waited for them from memory chunk by chunk */
#if __CUDA_ARCH__ >= 900
    if (!CHAIN && tid == 0) {
        const int n1 = n0 + BN < s.oc ? n0 + BN : s.oc;
        const size_t bytes = (size_t)(n1 - n0) * s.K * sizeof(__half); /* a multiple of 16 */
        const char *wb = reinterpret_cast<const char *>(w + (size_t)n0 * s.K);
        for (size_t off = (size_t)blockIdx.x * TP_PREFETCH; off < bytes;
             off += (size_t)gridDim.x * TP_PREFETCH) {
            const unsigned len = (unsigned)(bytes - off < TP_PREFETCH ? bytes - off : TP_PREFETCH);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wb + off), "r"(len)
                         : "memory");
        }
    }
#endif
    load_weights(0, 0);
#if __CUDA_ARCH__ >= 900
    if (!CHAIN) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        /* the next kernel, if it is a programmatic dependent launch too, may start its blocks
         * once every block of this one has come here (they wait for this grid's completion
         * before reading what it writes): on the multiprocessors this grid's last wave leaves
         * free */
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
#endif
    load_patch(0, 0);
    tc_commit();
    for (int q = 0; q < nq; q++) {
        if (q + 1 < nq) { /* the other buffer: every warp finished with it (the barrier below) */
            load_weights((q + 1) & 1, q + 1);
            load_patch((q + 1) & 1, q + 1);
        }
        tc_commit();
        tc_wait<1>(); /* chunk q's copies are in (chunk q + 1's may still be in flight) */
        __syncthreads();
        const __half *P = sm + (q & 1) * stage, *W = P + patch * TP_LDS;
        int ky = 0, kx = 0;
#pragma unroll 1
        for (int tap = 0; tap < taps; tap++) {
            const int off = ky * s.dh * s.pw + kx * s.dw;
            unsigned a[MI][4], bf[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++)
                tc_ldsm4(a[i], tc_smem(P + (arow[i] + off) * TP_LDS + acol));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                unsigned r[4];
                tc_ldsm4(r, tc_smem(W + (tap * BN + brow + j * 8) * TP_LDS + bcol));
                bf[j][0] = r[0], bf[j][1] = r[1], bf[j + 1][0] = r[2], bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++)
                    tc_mma(acc[i][j], a[i], bf[j]);
            if (++kx == s.kw)
                kx = 0, ky++;
        }
        __syncthreads(); /* this buffer is loaded again at chunk q + 2 */
    }
    tc_wait<0>(); /* no copy left in flight at exit */

#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = wm * tl::TM + i * 16 + (lane >> 2) + h * 8;
            const int oy = oy0 + r / TP_TW, ox = ox0 + r % TP_TW;
            if (oy >= s.oh || ox >= s.ow)
                continue;
            const size_t row = (((size_t)b * s.oh + oy) * s.ow + ox) * s.oc;
#pragma unroll
            for (int j = 0; j < NI; j++)
                tc_store2<CHAIN>(y, bias, e, s.oc, row,
                                 n0 + wn * tl::TN + j * 8 + (lane & 3) * 2, acc[i][j][h * 2],
                                 acc[i][j][h * 2 + 1]);
        }
#else
    __trap(); /* built without mma.sync / cp.async for this device: fail loudly */
#endif
}

#endif
