/*
 * CONV_2D on the tensor cores for compute capability 8.0 and newer, f16 instances: an implicit
 * GEMM Y[m, n] = act(bias[n] + sum_k X'[m, k] * W[n, k]) (m = (b, oy, ox), n = output channel,
 * k = (ky, kx, ic), the OHWI weight layout) with mma.sync m16n8k16 (half inputs, float
 * accumulation). kr_cuda_conv_2d hands it the layers of kr_cuda_conv_2d_tc_fits (ops.h): the
 * ONNX models' layers; the TFLite models keep their CUDA-core paths.
 *
 * Data: the weights are read in half from op->w16, the OHWI weights rounded to half once at set-up
 * (backend.c; nothing is converted per run). The input is NHWC half. Each 16-byte chunk of a
 * shared-memory row is 8 consecutive k, which lie in one tap because the input channels are a
 * multiple of 8; a chunk outside the input (padding) or past M, N or K is zero-filled by cp.async.
 * With op->cat.src[0] set (a CONCATENATION along the channels folded into the convolution,
 * fusion.h) a chunk reads channels [c, c + 8) from the first source below cat.c0 and from the
 * second above; a source with a resize (op->cat.rz) is sampled bilinearly as RESIZE_BILINEAR
 * computes it (ops/resize_bilinear.cuh) and rounded to half, the value the unfused RESIZE would
 * have stored, with ordinary loads into the same pipeline stage. With op->pool.src set (a
 * MAX_POOL_2D folded into the convolution) each input pixel is the pool's window maximum over
 * that source, taken in half (exact: the value the pool would have stored).
 *
 * Tiling: 4 warps compute a BM x BN tile of Y (BN 16, 32 or 64 by the layer's output channels,
 * BM 128, or 64 where 128 would leave the multiprocessors short of blocks: a choice by M, which
 * changes no output's sum). k steps by 32 through a 3-stage cp.async pipeline in shared memory
 * (rows padded to 80 bytes: ldmatrix reads 8 rows without bank conflicts); each warp loads its A
 * and B fragments with ldmatrix.x4 and issues MI x NI mma.sync per 16 k. The epilogue runs from
 * the accumulator registers: bias, clamp, folded activation and residual (kr_conv_out,
 * ops/conv_2d.cuh), stored as half pairs (tc_epilogue: the activation a constant of the code, so
 * that a thread's 16 to 64 outputs do not each inline a switch over the activations).
 *
 * Summation order (ops/conv_2d.cuh lists it with the others): per output, from 0, the 16-deep
 * chunks of k in order (k past K counts as zero products), each chunk's products summed as the
 * tensor core sums them in float; the bias last. It depends only on the layer, not on the batch
 * or the tile.
 */
#include <stdlib.h>
#include <string.h>

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
    /* conv_tcp's chunks in flight (shared-memory buffers): 2, or TP_DEEP_STAGES on small grids */
    int stages;
    /* conv_tcp's tile height in output rows (tp_geometry), and whether its epilogue stages the
     * tile's sums in shared memory and stores whole 16-byte vectors (tp_store_vec: output
     * channels a multiple of 8, the output and residual 16-byte aligned; tp_vec_epilogue) */
    int th, ev;
    /* conv_tcp with Hopper's warpgroup MMA (1: wgmma.mma_async, sm_90a code on compute 9.0,
     * tp_use_wgmma) or mma.sync (0): a choice by the device and the layer's shape, never by
     * the batch */
    int wg;
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

/* The source of channel @p c of the layer's input (tc_shape.c0: a folded concatenation's first
 * side's channels; 0: the input alone): its tensor (x, or x1 for the second side), its channels
 * per pixel @p cs and the channel in it @p cc, and whether that side is the resized one. */
__device__ __forceinline__ const __half *tc_side(const tc_shape &s, const __half *x,
                                                 const __half *x1, int c, int &cs, int &cc,
                                                 int &resized)
{
    cs = s.ic, cc = c, resized = 0;
    if (!s.c0)
        return x;
    const bool second = c >= s.c0;
    cs = second ? s.ic - s.c0 : s.c0;
    cc = second ? c - s.c0 : c;
    resized = s.rz == (second ? 1 : 0);
    return second ? x1 : x;
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

template <int N> __device__ __forceinline__ void tc_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
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

/* 8 channels of the resized source from its four taps' 16-byte values q00 (y0, x0), q01 (y0, x1),
 * q10 (y1, x0), q11 (y1, x1) and the weights fy, fx (rs_axis): RESIZE_BILINEAR's arithmetic
 * (rs_blend's expression), each value rounded to half as the RESIZE would store it. */
__device__ __forceinline__ uint4 tc_blend8(const uint4 &q00, const uint4 &q01, const uint4 &q10,
                                           const uint4 &q11, float fy, float fx)
{
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

/* 8 channels [c, c + 8) of the resized source at output pixel (b, iy, ix) of the concatenation,
 * from the rh x rw source of @p cs channels as RESIZE_BILINEAR computes them (rs_axis, the taps
 * in rs_pixel's order), each rounded to half as the RESIZE would store it (tc_blend8). */
__device__ __forceinline__ uint4 tc_resized8(const __half *__restrict__ src, const tc_shape &s,
                                             int b, int iy, int ix, int c, int cs)
{
    int y0, y1, x0, x1;
    float fy, fx;
    rs_axis(s.rh, s.ih, s.align, s.half, iy, &y0, &y1, &fy);
    rs_axis(s.rw, s.iw, s.align, s.half, ix, &x0, &x1, &fx);
    const __half *base = src + (size_t)b * s.rh * s.rw * cs + c;
    const uint4 q00 = *reinterpret_cast<const uint4 *>(base + ((size_t)y0 * s.rw + x0) * cs);
    const uint4 q01 = *reinterpret_cast<const uint4 *>(base + ((size_t)y0 * s.rw + x1) * cs);
    const uint4 q10 = *reinterpret_cast<const uint4 *>(base + ((size_t)y1 * s.rw + x0) * cs);
    const uint4 q11 = *reinterpret_cast<const uint4 *>(base + ((size_t)y1 * s.rw + x1) * cs);
    return tc_blend8(q00, q01, q10, q11, fy, fx);
}

/* @p m = the larger of each pair of halves of @p m and @p q, 8 lanes (__hmax2, m first). */
__device__ __forceinline__ void tc_max8(__half2 (&m)[4], const uint4 &q)
{
    const __half2 *h = reinterpret_cast<const __half2 *>(&q);
#pragma unroll
    for (int j = 0; j < 4; j++)
        m[j] = __hmax2(m[j], h[j]);
}

/* The 8 halves of @p m as one 16-byte value. */
__device__ __forceinline__ uint4 tc_pack8(const __half2 (&m)[4])
{
    uint4 out;
    __half2 *o = reinterpret_cast<__half2 *>(&out);
#pragma unroll
    for (int j = 0; j < 4; j++)
        o[j] = m[j];
    return out;
}

/* 8 channels [c, c + 8) of a 2 x 2 max pool's output pixel from the source pixels @p pix of its
 * taps in (ky, kx) order (the pixel's index in the batch's NHWC source of @p ic channels, -1
 * outside the source): the four loads issued together, then the maxima in the same order, each
 * through tc_max8 (a tap outside reads as -inf: max(m, -inf) = m; -inf when none is inside). */
__device__ __forceinline__ uint4 tc_pooled4(const __half *__restrict__ src, int ic, int c,
                                            const int (&pix)[4])
{
    const __half2 ninf = __half2half2(__ushort_as_half((unsigned short)0xFC00u));
    __half2 m[4] = {ninf, ninf, ninf, ninf};
    const uint4 ninf4 = make_uint4(0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u);
    uint4 q[4];
#pragma unroll
    for (int t = 0; t < 4; t++)
        q[t] = pix[t] >= 0 ? *reinterpret_cast<const uint4 *>(src + (size_t)pix[t] * ic + c)
                           : ninf4;
#pragma unroll
    for (int t = 0; t < 4; t++)
        tc_max8(m, q[t]);
    return tc_pack8(m);
}

/* The source pixels of a 2 x 2 max pool's taps at its output pixel (b, oy, ox), in (ky, kx)
 * order: each the pixel's index in the batch's source ((b * pih + iy) * piw + ix), -1 outside. */
__device__ __forceinline__ void tc_pool_taps(const tc_shape &s, int b, int oy, int ox,
                                             int (&pix)[4])
{
    const int y0 = oy * s.psh - s.ppt, x0 = ox * s.psw - s.ppl;
    const int yy[2] = {y0, y0 + s.pdh}, xx[2] = {x0, x0 + s.pdw};
#pragma unroll
    for (int t = 0; t < 4; t++) {
        const int iy = yy[t >> 1], ix = xx[t & 1];
        pix[t] = (unsigned)iy < (unsigned)s.pih && (unsigned)ix < (unsigned)s.piw
                     ? (b * s.pih + iy) * s.piw + ix
                     : -1;
    }
}

/* 8 channels [c, c + 8) of the folded max pool's output pixel (b, oy, ox): the largest of the
 * window's taps inside the source (kr_pool_window's candidates; -inf, as the pool stores its
 * -FLT_MAX in half, when none is), exact in half: the taps in (ky, kx) order, each through
 * tc_max8. */
__device__ __forceinline__ uint4 tc_pooled8(const __half *__restrict__ src, const tc_shape &s,
                                            int b, int oy, int ox, int c)
{
    const __half2 ninf = __half2half2(__ushort_as_half((unsigned short)0xFC00u));
    __half2 m[4] = {ninf, ninf, ninf, ninf};
    const __half *base = src + (size_t)b * s.pih * s.piw * s.ic + c;
    if (s.pkh == 2 && s.pkw == 2) { /* u2netp's pools */
        int pix[4];
        tc_pool_taps(s, b, oy, ox, pix);
        return tc_pooled4(src, s.ic, c, pix);
    }
    for (int ky = 0; ky < s.pkh; ky++) {
        const int iy = oy * s.psh - s.ppt + ky * s.pdh;
        if ((unsigned)iy >= (unsigned)s.pih)
            continue;
        for (int kx = 0; kx < s.pkw; kx++) {
            const int ix = ox * s.psw - s.ppl + kx * s.pdw;
            if ((unsigned)ix >= (unsigned)s.piw)
                continue;
            const uint4 q = *reinterpret_cast<const uint4 *>(base + ((size_t)iy * s.piw + ix) * s.ic);
            tc_max8(m, q);
        }
    }
    return tc_pack8(m);
}

/* The bias of a thread's fragment columns n + 8 j and n + 8 j + 1 (0 from @p oc on, or without
 * a bias), read once for its fragments. */
template <int NI>
__device__ __forceinline__ void tc_bias_pairs(const float *__restrict__ bias, int n, int oc,
                                              float (&bv)[NI][2])
{
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
        for (int q = 0; q < 2; q++)
            bv[j][q] = bias && n + j * 8 + q < oc ? bias[n + j * 8 + q] : 0.0f;
}

/* The epilogue of a warp's MI x NI accumulator fragments, activation @p Post (KR_CUDA_POST_*, a
 * constant): output channels c = n + 8 j and c + 1 (n: this thread's first column) of the rows
 * @p row(i, h) gives (the offset of the output pixel's first element in @p y; SIZE_MAX where the
 * row is outside the output), from their sums acc[i][j][2 h] and acc[i][j][2 h + 1]: bias, clamp,
 * folded activation and residual (kr_conv_out, ops/conv_2d.cuh), stored in half (as a pair where
 * @p oc is even). The bias of the thread's columns is read once, a fragment row's residual pairs
 * are loaded before its first store (loaded between the stores, each load waited for its own
 * round trip: the compiler may not move a load over a store that might alias it), and the
 * activation is one constant (a switch per value made the unrolled epilogue most of the
 * kernel's code). */
template <int Post, int MI, int NI, typename Row>
__device__ __forceinline__ void tc_epilogue_post(__half *__restrict__ y,
                                                 const float *__restrict__ bias,
                                                 const kr_epilogue &e, int oc, int n,
                                                 const float (&acc)[MI][NI][4], Row row)
{
    kr_epilogue f = e;
    f.post = Post;
    float bv[NI][2];
    tc_bias_pairs(bias, n, oc, bv);
    const bool pairs = (oc & 1) == 0; /* then n + 8 j < oc means both channels are */
#pragma unroll
    for (int i = 0; i < MI; i++) {
        const size_t r0 = row(i, 0), r1 = row(i, 1);
        __half2 res[2][NI];
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int j = 0; j < NI; j++) {
                res[h][j] = __float2half2_rn(0.0f);
                if (e.res && pairs && (h ? r1 : r0) != SIZE_MAX && n + j * 8 < oc)
                    res[h][j] = *reinterpret_cast<const __half2 *>((const __half *)e.res +
                                                                   (h ? r1 : r0) + n + j * 8);
            }
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int j = 0; j < NI; j++) {
                const size_t o = (h ? r1 : r0) + n + j * 8;
                if ((h ? r1 : r0) == SIZE_MAX || n + j * 8 >= oc)
                    continue;
                float v[2];
#pragma unroll
                for (int q = 0; q < 2; q++)
                    v[q] = kr_conv_out(acc[i][j][h * 2 + q], bv[j][q], 0.0f, false, kr_no_res(),
                                       [&](float t) { return kr_apply(f, t); });
                if (pairs) {
                    if (e.res) {
                        const float2 r = __half22float2(res[h][j]);
                        v[0] += r.x, v[1] += r.y;
                    }
                    *reinterpret_cast<__half2 *>(y + o) = __floats2half2_rn(v[0], v[1]);
                } else { /* odd oc: element by element */
                    kr_add_res<__half, 1>(e, o, &v[0]);
                    kr_st(y + o, v[0]);
                    if (n + j * 8 + 1 < oc) {
                        kr_add_res<__half, 1>(e, o + 1, &v[1]);
                        kr_st(y + o + 1, v[1]);
                    }
                }
            }
    }
}

/* tc_epilogue_post with the node's activation (e.post) as its constant. */
template <int MI, int NI, typename Row>
__device__ __forceinline__ void tc_epilogue(__half *__restrict__ y, const float *__restrict__ bias,
                                            const kr_epilogue &e, int oc, int n,
                                            const float (&acc)[MI][NI][4], Row row)
{
    kr_with_post(e.post, [&](auto pc) {
        tc_epilogue_post<decltype(pc)::value>(y, bias, e, oc, n, acc, row);
    });
}

template <int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(TC_THREADS)
    conv_tc(const __half *__restrict__ x, const __half *__restrict__ x1,
            const __half *__restrict__ w, const float *__restrict__ bias, __half *__restrict__ y,
            tc_shape s, kr_epilogue e)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    typedef tc_tile<BM, BN, WM, WN> tl;
    static_assert(WM * WN == 4, "conv_tc: 4 warps (TC_THREADS)");
    constexpr int MI = tl::MI, NI = tl::NI, AR = tl::AROWS;
    __shared__ __align__(128) __half As[TC_STAGES][BM][TC_LDS];
    __shared__ __align__(128) __half Bs[TC_STAGES][BN][TC_LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;

    /* the A rows this thread loads (rows tid / 4 + 32 i, chunk tid % 4 of each stage) */
    const int ach = tid & 3;
    int a_b[AR], a_iy[AR], a_ix[AR];
#pragma unroll
    for (int i = 0; i < AR; i++) {
        const int m = m0 + (tid >> 2) + 32 * i;
        if (m < s.M) {
            const int ox = m % s.ow, t = m / s.ow;
            a_iy[i] = (t % s.oh) * s.sh - s.pt;
            a_ix[i] = ox * s.sw - s.pl;
            a_b[i] = t / s.oh;
        } else {
            a_b[i] = -1, a_iy[i] = 0, a_ix[i] = 0;
        }
    }
    const int ktiles = (s.K + TC_BK - 1) / TC_BK;
    /* a programmatic dependent launch on 9.0 (launch_tile): the kernel before may still be
     * running until here; nothing is read or written before this */
    kr_pdl_wait();

    auto load_stage = [&](int st, int kt) {
        const int k = kt * TC_BK + ach * 8;
        const bool kin = k < s.K;
        const int tap = kin ? k / s.ic : 0, c = k - tap * s.ic;
        const int ky = tap / s.kw, kx = tap - ky * s.kw;
        /* which source: the input, or a side of the folded concatenation */
        int cs, cc, resized;
        const __half *src = tc_side(s, x, x1, c, cs, cc, resized);
#pragma unroll
        for (int i = 0; i < AR; i++) {
            const int r = (tid >> 2) + 32 * i;
            const int iy = a_iy[i] + ky * s.dh, ix = a_ix[i] + kx * s.dw;
            const bool ok = kin && a_b[i] >= 0 && (unsigned)iy < (unsigned)s.ih &&
                            (unsigned)ix < (unsigned)s.iw;
            __half *dst = &As[st][r][ach * 8];
            if (resized || s.pool) {
                uint4 v = make_uint4(0, 0, 0, 0);
                if (ok)
                    v = s.pool ? tc_pooled8(src, s, a_b[i], iy, ix, cc)
                               : tc_resized8(src, s, a_b[i], iy, ix, cc, cs);
                *reinterpret_cast<uint4 *>(dst) = v;
            } else {
                const __half *p =
                    ok ? src + (((size_t)a_b[i] * s.ih + iy) * s.iw + ix) * cs + cc : x;
                tc_cp16<true>(kr_smem_addr(dst), p, ok);
            }
        }
#pragma unroll
        for (int j = 0; j < (BN * 4 + TC_THREADS - 1) / TC_THREADS; j++) {
            const int chunk = tid + j * TC_THREADS;
            if (chunk < BN * 4) {
                const int n = chunk >> 2, kb = kt * TC_BK + (chunk & 3) * 8;
                const bool ok = n0 + n < s.oc && kb < s.K;
                const __half *p = ok ? w + (size_t)(n0 + n) * s.K + kb : w;
                tc_cp16<false>(kr_smem_addr(&Bs[st][n][(chunk & 3) * 8]), p, ok);
            }
        }
    };

    float acc[MI][NI][4];
    kr_each_acc(acc, [](float &v) { v = 0.0f; });

#pragma unroll
    for (int st = 0; st < TC_STAGES - 1; st++) {
        if (st < ktiles)
            load_stage(st, st);
        kr_cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        tc_wait<TC_STAGES - 2>();
        __syncthreads(); /* stage kt is in for every thread; stage kt - 1 is read by all */
        const int nk = kt + TC_STAGES - 1;
        if (nk < ktiles)
            load_stage(nk % TC_STAGES, nk);
        kr_cp_async_commit();
        const int st = kt % TC_STAGES;
#pragma unroll
        for (int kk = 0; kk < TC_BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++)
                kr_ldsm_x4(a[i], kr_smem_addr(&As[st][wm * tl::TM + i * 16 + (lane & 15)]
                                          [kk + (lane >> 4) * 8]));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                unsigned r[4];
                kr_ldsm_x4(r, kr_smem_addr(&Bs[st][wn * tl::TN + j * 8 + (lane >> 4) * 8 + (lane & 7)]
                                       [kk + ((lane >> 3) & 1) * 8]));
                b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++)
                    tc_mma(acc[i][j], a[i], b[j]);
        }
    }
    tc_wait<0>(); /* no copy left in flight at exit */

    tc_epilogue(y, bias, e, s.oc, n0 + wn * tl::TN + (lane & 3) * 2, acc, [&](int i, int h) {
        const int m = m0 + wm * tl::TM + i * 16 + (lane >> 2) + h * 8;
        return m < s.M ? (size_t)m * s.oc : SIZE_MAX;
    });
#else
    __trap(); /* built without mma.sync / cp.async for this device: fail loudly */
#endif
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
 * multiplied; on a grid of at most one block per multiprocessor (the deep layers), four: the
 * next three chunks load while one is multiplied.
 *
 * Summation order: per output, from 0, the 16-channel chunks of the input in order, within each
 * the taps in (ky, kx) order, each tap's 16 products (channels past ic count as zero) summed as
 * the tensor core sums them in float; the bias last. Only the layer's shape chooses this kernel
 * (tc_use_patch), never the batch. The tile's height (4, 8 or 16 rows) and width in output
 * channels (BN 16, 32 or 64: narrower than the layer's outputs on a grid of fewer than two
 * blocks per multiprocessor) are chosen by the grid, and change no output's sum.
 */
#define TP_CK 16  /* input channels per stage */
#define TP_LDS 24 /* halves per shared patch row: 48 bytes (8 consecutive rows: no bank conflict) */
/* Halves per shared weight row: 32 bytes, no padding; a row's two 16-byte halves are swapped in
 * rows 4-7 of every 8 (tp_wswz), so that ldmatrix's 8 consecutive rows and a quarter warp's
 * cp.async of 4 rows x 2 halves each cover the 32 banks once. The weights of a stage are
 * taps x BN rows (BN a multiple of 8): in 48-byte rows they were two thirds of conv_tcp's
 * shared memory (the 16-row 64-output tiles: 86 KB a block, now 68) */
#define TP_WLDS 16
#define TP_TW 16  /* tile width in output pixels: a 16-row fragment is one tile row */
#define TP_PREFETCH 16384 /* bytes of weights per L2 bulk prefetch (sm_90) */
/* Chunks in flight on a grid of at most one block per multiprocessor (u2netp's deep layers: 3
 * to 30 blocks, up to 8 chunks, each waiting for its weights and patch from L2 with two
 * buffers), within TP_DEEP_SMEM_MAX of shared memory; else 2 */
#define TP_DEEP_STAGES 4
#define TP_DEEP_SMEM_MAX (160 * 1024)
/* Floats of padding per row of the staged epilogue's tile (tp_stage): rows of BN + 4 floats, so
 * that a warp's 8 fragment rows of float pairs cover every bank twice (two wavefronts, the
 * fewest for 256 bytes) */
#define TP_EPAD 4

/* Halves of a stage's patch area: ph x pw rows of TP_LDS; with wgmma (@p wg) rounded up to
 * 256 bytes, so that the weights after it start on the 256-byte boundary the 32-byte swizzle of
 * wgmma's shared-memory descriptor needs (tp_wgmma_desc). */
__host__ __device__ constexpr int tp_patch_halves(int patch, int wg)
{
    return wg ? (patch * TP_LDS + 127) & ~127 : patch * TP_LDS;
}

/* One element of conv_tcp's patch (8 channels of a patch pixel in each 16-channel chunk: element
 * i is pixel i / 2's channels [8 (i % 2), 8 (i % 2) + 8) of the chunk), what of it does not
 * depend on the chunk: tp_elem_at computes it (a thread's first two elements once per kernel,
 * its others at each chunk; in the instances with a table, tp_has_table, every element once per
 * block), tp_elem_load adds the chunk's channels. */
struct tp_elem {
    int dst;    /* halves from the buffer's start (p * TP_LDS + 8 hc); -1: no element */
    int hc8;    /* the element's first channel in the chunk: 0 or 8 */
    int pix;    /* the input pixel's index in the batch ((b * ih + iy) * iw + ix); -1: outside */
    int tap[4]; /* GK 1 (a 2 x 2 pool): tc_pool_taps' source pixels (other windows: iy, ix);
                 * GK 2 (a resized source): its four taps' pixels in the batch's rh x rw source,
                 * (y0, x0) (y0, x1) (y1, x0) (y1, x1) */
    float fy, fx; /* GK 2: rs_axis's weights */
};

/* Whether conv_tcp<TH, BN, ..., GK> keeps a table of its patch elements in shared memory
 * (tp_run's TAB): 16-row tiles of 64 outputs (64 accumulators a thread, so no element is kept in
 * registers) reading a folded resize (GK 2: rs_axis's arithmetic per element). Not the folded
 * pool's (GK 1): its elements are cheaper, and with the table its mma.sync instance spilled (8
 * bytes, ptxas). */
__host__ __device__ constexpr bool tp_has_table(int th, int bn, int gk)
{
    return th == 16 && bn == 64 && gk == 2;
}

/* The gather conv_tcp's instance for layer @p s has (its GK): the folded pool's (1), the folded
 * resize's (2) or none (0). */
static int tp_gather_kind(const tc_shape &s) { return s.pool ? 1 : s.c0 && s.rz >= 0 ? 2 : 0; }

/* Shared memory of conv_tcp: s.stages buffers of the patch and BN x taps weight rows, then the
 * table of the patch elements (tp_has_table); the staged epilogue's tile where larger. */
static size_t tp_smem_bytes(const tc_shape &s, int bn)
{
    const int gk = tp_gather_kind(s);
    const size_t stages =
        (size_t)s.stages *
            ((size_t)tp_patch_halves(s.ph * s.pw, s.wg) + (size_t)s.kh * s.kw * bn * TP_WLDS) *
            sizeof(__half) +
        (tp_has_table(s.th, bn, gk) ? (size_t)s.ph * s.pw * 2 * sizeof(tp_elem) : 0);
    /* the staged epilogue's tile (tp_store_vec) reuses the buffers after the last chunk */
    const size_t tile = s.ev ? (size_t)s.th * TP_TW * (bn + TP_EPAD) * sizeof(float) : 0;
    return stages > tile ? stages : tile;
}

/* The offset in halves of half @p h (0 or 1: channels [8 h, 8 h + 8) of the chunk) of weight
 * row @p r in a stage's weights (TP_WLDS): the halves swapped where bit 2 of the row is set. */
__host__ __device__ constexpr int tp_wswz(int r, int h)
{
    return r * TP_WLDS + ((h ^ ((r >> 2) & 1)) << 3);
}

/* Blocks per multiprocessor that conv_tcp<TH, BN, WM, WN, GK>'s registers must allow (its
 * __launch_bounds__; the shared memory may allow fewer): at most 128 registers (two 8-warp or
 * four 4-warp blocks), as ptxas chose for every instance before the resize instance was split
 * from the pool's (164 without the bound, which left one 8-warp block per multiprocessor);
 * the 8-warp 16-output instance without a gather at most 64 (four blocks): with 80 (ptxas's
 * choice under the 128 bound) three fit, 396 places on 132 multiprocessors for the 400 blocks
 * of u2netp's two 64 -> 16 layers at 320 x 320 at batch 1, so 4 blocks ran in a second round. A
 * bound changes the registers, not one operation of the kernel. */
__host__ __device__ constexpr int tp_min_blocks(int warps, int bn, int gk)
{
    return warps == 8 ? (bn == 16 && gk == 0 ? 4 : 2) : 4;
}

/* Element @p i of the patch of the tile whose patch starts at input pixel (b, iy0, ix0), for
 * kernel variant GK (conv_tcp): its pixel, and the folded pool's taps or the folded resize's
 * taps and weights, each computed as tc_pooled8 and tc_resized8 compute them. */
template <int GK>
__device__ __forceinline__ tp_elem tp_elem_at(const tc_shape &s, int i, int patch, int b, int iy0,
                                              int ix0)
{
    tp_elem e;
    e.dst = -1, e.hc8 = 0, e.pix = -1, e.fy = 0.0f, e.fx = 0.0f;
#pragma unroll
    for (int t = 0; t < 4; t++)
        e.tap[t] = -1;
    if (i >= patch * 2)
        return e;
    const int p = i >> 1, hc = i & 1;
    const int py = p / s.pw, px = p - py * s.pw;
    const int iy = iy0 + py, ix = ix0 + px;
    e.dst = p * TP_LDS + hc * 8, e.hc8 = hc * 8;
    if ((unsigned)iy >= (unsigned)s.ih || (unsigned)ix >= (unsigned)s.iw)
        return e;
    e.pix = (b * s.ih + iy) * s.iw + ix;
    if (GK == 1 && s.pool) {
        if (s.pkh == 2 && s.pkw == 2)
            tc_pool_taps(s, b, iy, ix, e.tap);
        else
            e.tap[0] = iy, e.tap[1] = ix;
    }
    if (GK == 2 && s.rz >= 0) {
        int y0, y1, x0, x1;
        rs_axis(s.rh, s.ih, s.align, s.half, iy, &y0, &y1, &e.fy);
        rs_axis(s.rw, s.iw, s.align, s.half, ix, &x0, &x1, &e.fx);
        const int r0 = (b * s.rh + y0) * s.rw, r1 = (b * s.rh + y1) * s.rw;
        e.tap[0] = r0 + x0, e.tap[1] = r0 + x1, e.tap[2] = r1 + x0, e.tap[3] = r1 + x1;
    }
    return e;
}

/* An element past the patch (tp_elem_at's for i >= 2 x patch): nothing to load. */
__device__ __forceinline__ tp_elem tp_elem_none()
{
    tp_elem e;
    e.dst = -1, e.hc8 = 0, e.pix = -1, e.fy = 0.0f, e.fx = 0.0f;
    e.tap[0] = e.tap[1] = e.tap[2] = e.tap[3] = -1;
    return e;
}

/* Element @p e of chunk @p q into the buffer at @p P: a copy (cp.async: zeros outside the input
 * or past its channels) or, gathered from a folded pool or resize, the value in @p v and its
 * place in @p vd (stored by the caller, after the pass's loads are issued); the values of
 * tc_pooled8 and tc_resized8. */
template <int GK>
__device__ __forceinline__ void tp_elem_load(__half *P, const tp_elem &e, int q,
                                             const __half *__restrict__ x,
                                             const __half *__restrict__ x1, const tc_shape &s,
                                             int b, uint4 &v, __half *&vd)
{
    if (e.dst < 0)
        return;
    const int c = q * TP_CK + e.hc8;
    const bool ok = c < s.ic && e.pix >= 0;
    int cs, cc, resized;
    const __half *src = tc_side(s, x, x1, c, cs, cc, resized);
    __half *dst = P + e.dst;
    if ((GK == 1 && s.pool) || (GK == 2 && resized)) {
        v = make_uint4(0, 0, 0, 0);
        if (ok) {
            if (GK == 1)
                v = s.pkh == 2 && s.pkw == 2 ? tc_pooled4(src, s.ic, cc, e.tap)
                                             : tc_pooled8(src, s, b, e.tap[0], e.tap[1], cc);
            else {
                uint4 qt[4];
#pragma unroll
                for (int t = 0; t < 4; t++)
                    qt[t] = *reinterpret_cast<const uint4 *>(src + (size_t)e.tap[t] * cs + cc);
                v = tc_blend8(qt[0], qt[1], qt[2], qt[3], e.fy, e.fx);
            }
        }
        vd = dst;
    } else {
        const __half *g = ok ? src + (size_t)e.pix * cs + cc : x;
        tc_cp16<true>(kr_smem_addr(dst), g, ok);
    }
}

#if defined(KR_HAVE_WGMMA)
#define TP_WGMMA_CODE 1
#else
#define TP_WGMMA_CODE 0
#endif

/* The staged epilogue's first half, activation @p Post (a constant): each of the warp's
 * accumulator pairs (tile rows @p row(i, h), output channels n0 + col + 8 j and + 1) with its
 * bias, clamp and activation (kr_conv_out, as tc_epilogue_post computes them) into the tile
 * @p T in shared memory, rows of EP floats. The residual is added by tp_store_vec. */
template <int Post, int EP, int MI, int NI, typename Row>
__device__ __forceinline__ void tp_stage_post(float *T, const float *__restrict__ bias,
                                              const kr_epilogue &e, int oc, int n0, int col,
                                              const float (&acc)[MI][NI][4], Row row)
{
    kr_epilogue f = e;
    f.post = Post;
    float bv[NI][2];
    tc_bias_pairs(bias, n0 + col, oc, bv);
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *t = T + row(i, h) * EP + col;
#pragma unroll
            for (int j = 0; j < NI; j++) {
                float2 v;
                v.x = kr_conv_out(acc[i][j][h * 2], bv[j][0], 0.0f, false, kr_no_res(),
                                  [&](float a) { return kr_apply(f, a); });
                v.y = kr_conv_out(acc[i][j][h * 2 + 1], bv[j][1], 0.0f, false, kr_no_res(),
                                  [&](float a) { return kr_apply(f, a); });
                *reinterpret_cast<float2 *>(t + j * 8) = v;
            }
        }
}

/* tp_stage_post with the node's activation (e.post) as its constant. */
template <int EP, int MI, int NI, typename Row>
__device__ __forceinline__ void tp_stage(float *T, const float *__restrict__ bias,
                                         const kr_epilogue &e, int oc, int n0, int col,
                                         const float (&acc)[MI][NI][4], Row row)
{
    kr_with_post(e.post, [&](auto pc) {
        tp_stage_post<decltype(pc)::value, EP>(T, bias, e, oc, n0, col, acc, row);
    });
}

/* The staged epilogue's second half (after a block barrier): the tile @p T of BM pixels (16 a
 * tile row, from output pixel (b, oy0, ox0)) x BN channels (from n0) stored as 16-byte vectors of
 * 8 channels, the residual's vectors (e.res) loaded first, all of a thread's together, and added
 * in float before the rounding to half, as tc_epilogue_post adds them: the same values as that
 * epilogue, with a sixteenth of its stores (its 4-byte pairs of 8 pixels a warp instruction) and
 * no load waiting behind a store. Needs oc % 8 == 0 and 16-byte aligned y and e.res
 * (tp_vec_epilogue). */
template <int BM, int BN, int NT>
__device__ __forceinline__ void tp_store_vec(const float *T, __half *__restrict__ y,
                                             const kr_epilogue &e, const tc_shape &s, int b,
                                             int oy0, int ox0, int n0)
{
    constexpr int EP = BN + TP_EPAD, G = BN / 8, NV = BM * G, PER = (NV + NT - 1) / NT;
    const __half *res = (const __half *)e.res;
    size_t off[PER];
    uint4 rv[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const int v = (int)threadIdx.x + k * NT, r = v / G, c = n0 + (v % G) * 8;
        const int oy = oy0 + r / TP_TW, ox = ox0 + r % TP_TW;
        off[k] = v < NV && oy < s.oh && ox < s.ow && c < s.oc
                     ? (((size_t)b * s.oh + oy) * s.ow + ox) * s.oc + c
                     : SIZE_MAX;
        rv[k] = make_uint4(0u, 0u, 0u, 0u);
        if (res && off[k] != SIZE_MAX)
            rv[k] = *reinterpret_cast<const uint4 *>(res + off[k]);
    }
#pragma unroll
    for (int k = 0; k < PER; k++) {
        if (off[k] == SIZE_MAX)
            continue;
        const int v = (int)threadIdx.x + k * NT;
        const float *t = T + (v / G) * EP + (v % G) * 8;
        const float4 lo = *reinterpret_cast<const float4 *>(t);
        const float4 hi = *reinterpret_cast<const float4 *>(t + 4);
        float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        if (res) {
            const __half2 *r2 = reinterpret_cast<const __half2 *>(&rv[k]);
#pragma unroll
            for (int p = 0; p < 4; p++) {
                const float2 r = __half22float2(r2[p]);
                f[2 * p] += r.x, f[2 * p + 1] += r.y;
            }
        }
        uint4 o;
        __half2 *o2 = reinterpret_cast<__half2 *>(&o);
#pragma unroll
        for (int p = 0; p < 4; p++)
            o2[p] = __floats2half2_rn(f[2 * p], f[2 * p + 1]);
        *reinterpret_cast<uint4 *>(y + off[k]) = o;
    }
}

/* conv_tcp's body (the kernel below); WG 1: the taps on wgmma (sm_90a code only). */
template <int TH, int BN, int WM, int WN, int GK, int WG>
__device__ __forceinline__ void tp_run(const __half *__restrict__ x, const __half *__restrict__ x1,
                                       const __half *__restrict__ w,
                                       const float *__restrict__ bias, __half *__restrict__ y,
                                       const tc_shape &s, const kr_epilogue &e)
{
    typedef tc_tile<TH * TP_TW, BN, WM, WN> tl;
    constexpr int NT = WM * WN * 32;
    /* the accumulators: mma.sync's MI x NI fragments of the warp's TM x TN tile; with wgmma,
     * warpgroup g = warp / 4 (NWG of them) takes the tile's rows [g BM / NWG, (g + 1) BM / NWG)
     * and all BN outputs, SL slices of 64 rows (one m64nBNk16 each per tap), warp % 4 supplying
     * rows 16 (warp % 4) .. + 15 of each slice: acc[i][j] is the C fragment of those 16 rows and
     * columns 8 j .. 8 j + 7 (the same registers a thread as mma.sync's tiles) */
    constexpr int NWG = WM * WN / 4, SL = TH * TP_TW / (64 * NWG);
    static_assert(!WG || (SL >= 1 && SL * 64 * NWG == TH * TP_TW), "wgmma slices");
    constexpr int MI = WG ? SL : tl::MI, NI = WG ? BN / 8 : tl::NI;
    extern __shared__ __align__(1024) uint4 tp_shared[];
    __half *const sm = reinterpret_cast<__half *>(tp_shared);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int taps = s.kh * s.kw, patch = s.ph * s.pw;
    const int pa = tp_patch_halves(patch, WG); /* the patch area; the weights after it */
    const int stage = pa + taps * BN * TP_WLDS; /* halves */

    int t = blockIdx.x;
    const int tx = t % s.tiles_x;
    t /= s.tiles_x;
    const int ty = t % s.tiles_y, b = t / s.tiles_y;
    const int oy0 = ty * TH, ox0 = tx * TP_TW, n0 = blockIdx.y * BN;
    const int iy0 = oy0 * s.sh - s.pt, ix0 = ox0 * s.sw - s.pl;
    const int nq = (s.ic + TP_CK - 1) / TP_CK;

    /* in the instances of at most 32 accumulators a thread (all but <8, 64, 2, 2> and <16, 64,
     * 4, 2>, whose registers would spill), the thread's first two patch elements (of every
     * chunk) are computed once, here (before the wait for the kernel before), and each chunk
     * adds only its channels (tp_elem_load); the other elements, and every element in the
     * instances of 64 accumulators, are computed at each chunk */
    constexpr bool keep = MI * NI <= 8;
    /* the 16-row tiles of 64 accumulators a thread reading a folded resize (u2netp's 320 x 320
     * layers after a resize and concatenation): every patch element computed once, before the
     * wait for the kernel before, into a table after the chunk buffers (tp_table_bytes), which
     * each chunk reads; Nsight Compute put a quarter of the 128 -> 64 layer's stall samples in
     * the elements' arithmetic at each chunk (the taps' integer divisions, rs_axis) */
    constexpr bool TAB = tp_has_table(TH, BN, GK);
    tp_elem *const tab = reinterpret_cast<tp_elem *>(sm + s.stages * stage);
    const tp_elem e0 = tp_elem_at<GK>(s, keep ? tid : patch * 2, patch, b, iy0, ix0);
    const tp_elem e1 = tp_elem_at<GK>(s, keep ? tid + NT : patch * 2, patch, b, iy0, ix0);
    auto load_patch = [&](int buf, int q) {
        __half *P = sm + buf * stage;
        /* two elements per pass: a gathered (resized or pooled) element's loads are all issued
         * before either is stored */
        auto pass = [&](const tp_elem &ea, const tp_elem &eb) {
            uint4 v[2];
            __half *vd[2] = {NULL, NULL};
            tp_elem_load<GK>(P, ea, q, x, x1, s, b, v[0], vd[0]);
            tp_elem_load<GK>(P, eb, q, x, x1, s, b, v[1], vd[1]);
#pragma unroll
            for (int u = 0; u < 2; u++)
                if (vd[u])
                    *reinterpret_cast<uint4 *>(vd[u]) = v[u];
        };
        if (keep)
            pass(e0, e1);
        for (int i0 = keep ? tid + 2 * NT : tid; i0 < patch * 2; i0 += 2 * NT) {
            if constexpr (TAB)
                pass(tab[i0], i0 + NT < patch * 2 ? tab[i0 + NT] : tp_elem_none());
            else
                pass(tp_elem_at<GK>(s, i0, patch, b, iy0, ix0),
                     tp_elem_at<GK>(s, i0 + NT, patch, b, iy0, ix0));
        }
    };
    /* weight element i (tap i / (2 BN), output n0 + (i / 2) % BN, channels [8 (i % 2), 8 (i % 2)
     * + 8) of the chunk): its place in the buffer (halves, tp_wswz's multiple of 8, plus i % 2;
     * -1: none)
     * and its offset in w at chunk 0 (-1: past the outputs); in the instances that keep the
     * patch elements, the thread's first two computed once, the others at each chunk */
    auto w_elem = [&](int i, int &dst, int &off) {
        dst = -1, off = -1;
        if (i >= taps * BN * 2)
            return;
        const int hc = i & 1, r = i >> 1, n = r % BN, tap = r / BN;
        dst = tp_wswz(tap * BN + n, hc) + hc;
        if (n0 + n < s.oc)
            off = (n0 + n) * s.K + tap * s.ic + hc * 8;
    };
    int wd0, wo0, wd1, wo1;
    w_elem(keep ? tid : taps * BN * 2, wd0, wo0);
    w_elem(keep ? tid + NT : taps * BN * 2, wd1, wo1);
    auto load_weights = [&](int buf, int q) {
        __half *W = sm + buf * stage + pa;
        auto one = [&](int dst, int off) {
            if (dst < 0)
                return;
            const int hc = dst & 1;
            const bool ok = off >= 0 && q * TP_CK + hc * 8 < s.ic;
            const __half *g = ok ? w + (off + q * TP_CK) : w;
            tc_cp16<false>(kr_smem_addr(W + (dst - hc)), g, ok);
        };
        if (keep)
            one(wd0, wo0), one(wd1, wo1);
        for (int i = keep ? tid + 2 * NT : tid; i < taps * BN * 2; i += NT) {
            int dst, off;
            w_elem(i, dst, off);
            one(dst, off);
        }
    };

    /* the first tile row of the warp's fragment i (mma.sync: wm * TM + 16 i; wgmma: slice i of
     * warpgroup warp / 4, rows 16 (warp % 4) of it) */
    auto frag_row = [&](int i) {
        return WG ? (warp >> 2) * (TH * TP_TW / NWG) + i * 64 + (warp & 3) * 16
                  : wm * tl::TM + i * 16;
    };
    /* each A fragment row's patch pixel at tap (0, 0): row r = frag_row(i) + (lane & 15) is
     * tile pixel (r / 16, lane & 15) */
    int arow[MI];
#pragma unroll
    for (int i = 0; i < MI; i++)
        arow[i] = (frag_row(i) / TP_TW) * s.sh * s.pw + (lane & 15) * s.sw;
    const int acol = (lane >> 4) * 8;
    /* the B rows' offset (tp_wswz; tap * BN + j * 8 is a multiple of 8, so bit 2 of the row is
     * bit 2 of brow) */
    const int brow = wn * tl::TN + (lane >> 4) * 8 + (lane & 7);
    const int boff = tp_wswz(brow, (lane >> 3) & 1);

    float acc[MI][NI][4];
    kr_each_acc(acc, [](float &v) { v = 0.0f; });

    /* the weights are the layer's own (written once at set-up): loaded before waiting for the
     * kernel before, which a programmatic dependent launch lets run until here (sm_90); on sm_90
     * the n-tile's weights of every chunk are also fetched into L2 (bulk prefetches of 16 KB,
     * each by one block): a run's activations evict them, and the deep layers (a few blocks,
     * up to 8 chunks of 18 KB of weights each) waited for them from memory chunk by chunk */
#if __CUDA_ARCH__ >= 900
    if (tid == 0) {
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
    if constexpr (TAB)
        for (int i = tid; i < patch * 2; i += NT)
            tab[i] = tp_elem_at<GK>(s, i, patch, b, iy0, ix0);
#if __CUDA_ARCH__ >= 900
    if (keep) {
        /* the kept elements in registers before the wait (an asm volatile keeps its place
         * among the others): computed while the kernel before finishes */
        asm volatile("" ::"r"(e0.dst), "r"(e0.pix), "r"(e1.dst), "r"(e1.pix), "r"(wd0), "r"(wo0),
                     "r"(wd1), "r"(wo1));
        if (GK != 0)
            asm volatile("" ::"r"(e0.tap[0]), "r"(e0.tap[1]), "r"(e0.tap[2]), "r"(e0.tap[3]),
                         "r"(e1.tap[0]), "r"(e1.tap[1]), "r"(e1.tap[2]), "r"(e1.tap[3]));
        if (GK == 2)
            asm volatile("" ::"f"(e0.fy), "f"(e0.fx), "f"(e1.fy), "f"(e1.fx));
    }
    /* then the next kernel, if it is a programmatic dependent launch too, may start its blocks
     * once every block of this one has come here (they wait for this grid's completion before
     * reading what it writes): on the multiprocessors this grid's last wave leaves free */
    kr_pdl_wait();
#endif
    if constexpr (TAB)
        __syncthreads(); /* every thread's table entries written */
    load_patch(0, 0);
    kr_cp_async_commit();
    /* s.stages chunks in flight: chunks 1 .. stages - 2 now (one commit group each, empty past
     * the last chunk), then chunk q + stages - 1 at chunk q */
    const int nst = s.stages;
    for (int st = 1; st < nst - 1; st++) {
        if (st < nq) {
            load_weights(st, st);
            load_patch(st, st);
        }
        kr_cp_async_commit();
    }
    int cur = 0, nxt = nst - 1; /* the buffers of chunks q and q + stages - 1 */
    for (int q = 0; q < nq; q++) {
        if (q + nst - 1 < nq) { /* chunk q - 1's buffer: every warp finished with it (the
                                 * barrier below) */
            load_weights(nxt, q + nst - 1);
            load_patch(nxt, q + nst - 1);
        }
        kr_cp_async_commit();
        /* chunk q's copies are in (the later chunks' may still be in flight) */
        if (nst == TP_DEEP_STAGES)
            tc_wait<TP_DEEP_STAGES - 1>();
        else
            tc_wait<1>();
#if TP_WGMMA_CODE
        if (WG) /* the chunk's weights (cp.async: the generic proxy) to wgmma's async proxy */
            kr_fence_proxy_async_smem();
#endif
        __syncthreads();
        const __half *P = sm + cur * stage, *W = P + pa;
        cur = cur + 1 == nst ? 0 : cur + 1;
        nxt = nxt + 1 == nst ? 0 : nxt + 1;
        /* one tap: its A fragments (patch rows shifted by off) and B fragments (its weights),
         * then its MI x NI mma.sync */
        auto tap_mma = [&](int tap, int off) {
            unsigned a[MI][4], bf[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++)
                kr_ldsm_x4(a[i], kr_smem_addr(P + (arow[i] + off) * TP_LDS + acol));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                unsigned r[4];
                kr_ldsm_x4(r, kr_smem_addr(W + (tap * BN + j * 8) * TP_WLDS + boff));
                bf[j][0] = r[0], bf[j][1] = r[1], bf[j + 1][0] = r[2], bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++)
                    tc_mma(acc[i][j], a[i], bf[j]);
        };
        /* the taps on wgmma (WG): per tap one m64nBNk16 per slice, reading the tap's BN weight
         * rows (a multiple of 256 bytes from the 256-byte aligned weights: tp_wswz is the
         * descriptor's 32-byte swizzle) and the warp's A rows of each slice (ldmatrix.x4, as
         * mma.sync's), committed as one group; the next tap's A is loaded into a second
         * register set while this tap's wgmma runs, then the wait for it. wgmma reads its A
         * registers asynchronously, and the compiler does not know it: an empty asm reading the
         * set in flight after the wait keeps it alive there, so that the next set is not given
         * its registers (session 15's run 1: without, the second slice's A was overwritten by
         * the next tap's ldmatrix, results wrong, and timing-dependent with one slice). The
         * accumulators pass through an empty asm after each wait too (nothing moves them while
         * a wgmma writes them). The taps in (ky, kx) order */
        auto wg_taps = [&]() {
#if TP_WGMMA_CODE
            if constexpr (WG) {
                unsigned a[MI][4], an[MI][4] = {};
#pragma unroll
                for (int i = 0; i < MI; i++)
                    kr_ldsm_x4(a[i], kr_smem_addr(P + arow[i] * TP_LDS + acol));
                const unsigned wb = kr_smem_addr(W);
                int ky = 0, kx = 0;
#pragma unroll 1
                for (int tap = 0; tap < taps; tap++) {
                    const unsigned long long desc =
                        kr_wgmma_desc_sw32(wb + tap * BN * TP_WLDS * (int)sizeof(__half));
                    kr_wgmma_fence();
#pragma unroll
                    for (int i = 0; i < MI; i++)
                        kr_wgmma_f16<BN>(acc[i], a[i], desc);
                    kr_wgmma_commit();
                    if (++kx == s.kw)
                        kx = 0, ky++;
                    if (tap + 1 < taps) {
                        const int off = ky * s.dh * s.pw + kx * s.dw;
#pragma unroll
                        for (int i = 0; i < MI; i++)
                            kr_ldsm_x4(an[i], kr_smem_addr(P + (arow[i] + off) * TP_LDS + acol));
                    }
                    kr_wgmma_wait<0>();
#pragma unroll
                    for (int i = 0; i < MI; i++) {
                        asm volatile("" ::"r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3])
                                     : "memory");
#pragma unroll
                        for (int j = 0; j < NI; j++)
#pragma unroll
                            for (int q = 0; q < 4; q++)
                                kr_reg_fence(acc[i][j][q]);
#pragma unroll
                        for (int q = 0; q < 4; q++)
                            a[i][q] = an[i][q];
                    }
                }
            }
#endif
        };
        if constexpr (WG) {
            wg_taps();
        } else if (TH == 4 && s.kw == 3) {
            /* the 4-row tiles (small grids: a few warps per multiprocessor, each waiting for
             * its own ldmatrix round trips) with 3-wide kernels: a kernel row's three taps in
             * one unrolled block, so that their ldmatrix can be issued together; the same
             * mma.sync in the same (ky, kx) order */
#pragma unroll 1
            for (int ky = 0; ky < s.kh; ky++) {
#pragma unroll
                for (int kx = 0; kx < 3; kx++)
                    tap_mma(ky * 3 + kx, ky * s.dh * s.pw + kx * s.dw);
            }
        } else {
            int ky = 0, kx = 0;
#pragma unroll 1
            for (int tap = 0; tap < taps; tap++) {
                tap_mma(tap, ky * s.dh * s.pw + kx * s.dw);
                if (++kx == s.kw)
                    kx = 0, ky++;
            }
        }
#if TP_WGMMA_CODE
        if constexpr (WG) {
            /* the chunk's wgmma done (their weights and A registers free) before the barrier
             * that lets this buffer be loaded again; the accumulators not touched before */
            kr_wgmma_wait<0>();
            kr_each_acc(acc, [](float &v) { kr_reg_fence(v); });
        }
#endif
        __syncthreads(); /* this buffer is loaded again at chunk q + 1 */
    }
    tc_wait<0>(); /* no copy left in flight at exit */

    if (s.ev) {
        /* the buffers are free (every warp passed the last chunk's barrier, no copy in flight):
         * the tile's values through shared memory, then 16-byte vectors */
        float *const T = reinterpret_cast<float *>(tp_shared);
        tp_stage<BN + TP_EPAD>(T, bias, e, s.oc, n0, (WG ? 0 : wn * tl::TN) + (lane & 3) * 2, acc,
                               [&](int i, int h) { return frag_row(i) + (lane >> 2) + h * 8; });
        __syncthreads();
        tp_store_vec<TH * TP_TW, BN, NT>(T, y, e, s, b, oy0, ox0, n0);
        return;
    }
    tc_epilogue(y, bias, e, s.oc, n0 + (WG ? 0 : wn * tl::TN) + (lane & 3) * 2, acc,
                [&](int i, int h) {
                    const int r = frag_row(i) + (lane >> 2) + h * 8;
                    const int oy = oy0 + r / TP_TW, ox = ox0 + r % TP_TW;
                    return oy < s.oh && ox < s.ow
                               ? (((size_t)b * s.oh + oy) * s.ow + ox) * s.oc
                               : SIZE_MAX;
                });
}

template <int TH, int BN, int WM, int WN, int GK, int WG>
__global__ void __launch_bounds__(WM * WN * 32, tp_min_blocks(WM * WN, BN, GK))
    conv_tcp(const __half *__restrict__ x, const __half *__restrict__ x1,
             const __half *__restrict__ w, const float *__restrict__ bias, __half *__restrict__ y,
             tc_shape s, kr_epilogue e)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (WG && !TP_WGMMA_CODE)
        __trap(); /* the wgmma instance outside sm_90a code: never launched (tp_use_wgmma) */
    else
        tp_run<TH, BN, WM, WN, GK, WG>(x, x1, w, bias, y, s, e);
#else
    __trap(); /* built without mma.sync / cp.async for this device: fail loudly */
#endif
}

/* Whether the loaded code of this file has the wgmma instances (sm_90a): the probe's launch
 * bound is 64 threads in that code, 32 elsewhere (cudaFuncGetAttributes' maxThreadsPerBlock,
 * read from the cubin the device loaded without a launch, also while a stream is captured). */
__global__ void __launch_bounds__(TP_WGMMA_CODE ? 64 : 32) tp_wgmma_probe(int *out)
{
    if (out)
        out[threadIdx.x] = TP_WGMMA_CODE;
}

/* Patch tiles of TH rows: their geometry in @p s (tiles_y, ph; tiles_x and pw do not depend on
 * TH). */
static void tp_geometry(tc_shape &s, int th)
{
    s.th = th;
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
static int tc_use_patch(const kr_cuda_op *op, tc_shape s, int bn)
{
    if (s.kh * s.kw < 2)
        return 0;
    tp_geometry(s, 8);
    const size_t smem = tp_smem_bytes(s, bn);
    return smem <= TP_SMEM_MAX && smem <= op->caps->smem_block_optin;
}

typedef void (*tp_kernel_fn)(const __half *, const __half *, const __half *, const float *,
                             __half *, tc_shape, kr_epilogue);

/* conv_tcp<TH, BN, WM, WN, GK> for layer @p s: its wgmma instance where s.wg is set. */
template <int TH, int BN, int WM, int WN, int GK> static tp_kernel_fn tp_kernel(const tc_shape &s)
{
    return s.wg ? conv_tcp<TH, BN, WM, WN, GK, 1> : conv_tcp<TH, BN, WM, WN, GK, 0>;
}

/* Which layers conv_tcp runs on wgmma (kr_gpu_caps.wgmma 1): at least TP_WG_MIN_PIXELS output
 * pixels per image, 64 outputs a tile and TP_WG_MIN_IC inputs. Session 15's device runs (one
 * H200, u2netp f16 batch 1, CUPTI end increments against mma.sync in the same binary; wgmma's
 * values equal mma.sync's bit for bit in every test_backend_ops case): the 320 x 320 128 -> 64
 * layer (node 306, 8 chunks) 93.6 -> 85.9 us; the 320 x 320 32 -> 64 layers (2 chunks) the same
 * (35.4 -> 34.2, 35.5 -> 36.1), the 320 x 320 64 -> 16 ones slower (18.5 -> 22.5, 51.4 -> 53.2),
 * the 160 x 160 64-output layers 0.3 to 2.2 us slower each and the small 4-row 16-output layers
 * about 1 us each (a wait per tap on a few warps per multiprocessor). */
#define TP_WG_MIN_PIXELS (256 * 256)
#define TP_WG_MIN_IC 128

/* Whether conv_tcp's epilogue for @p op stages the tile in shared memory and stores 16-byte
 * vectors (tc_shape.ev, tp_store_vec): the device's mode (kr_gpu_caps.vec_epilogue), output
 * channels a multiple of 8 and the output and the folded residual 16-byte aligned. By the layer and its buffers only (the same at every batch);
 * the values are those of the other epilogue bit for bit. */
static int tp_vec_epilogue(const kr_cuda_op *op, int oc)
{
    return op->caps->vec_epilogue && oc % 8 == 0 && kr_aligned(op->out, 16) &&
           (!op->residual || kr_aligned(op->residual, 16));
}

/* (ops.h) */
int kr_cuda_vec_epilogue_mode(void)
{
    const char *env = getenv("KEYER_CUDA_VEC_EPILOGUE");
    return !(env && !strcmp(env, "0"));
}

/* (ops.h) */
int kr_cuda_wgmma_mode(const kr_gpu_caps *caps)
{
    if (caps->emulated || kr_gpu_cc(caps) != 90)
        return 0;
    cudaFuncAttributes fa;
    const int have = cudaFuncGetAttributes(&fa, tp_wgmma_probe) == cudaSuccess &&
                     fa.maxThreadsPerBlock == 64;
    (void)cudaGetLastError();
    const char *env = getenv("KEYER_CUDA_WGMMA");
    return !have || (env && !strcmp(env, "0")) ? 0 : env && !strcmp(env, "all") ? 2 : 1;
}

/* Whether conv_tcp runs on wgmma for layer @p s (tc_shape.wg): the device's mode
 * (kr_gpu_caps.wgmma) and, in mode 1, the layer's shape (TP_WG_MIN_PIXELS, 64 outputs,
 * TP_WG_MIN_IC). By the device and the layer's shape only, never by the batch: every tile
 * instance a layer can take on the device uses the same MMA. */
static int tp_use_wgmma(const kr_cuda_op *op, const tc_shape &s, int bn)
{
    const int m = op->caps->wgmma;
    return m == 2 || (m == 1 && (size_t)s.oh * s.ow >= TP_WG_MIN_PIXELS && bn == 64 &&
                      s.ic >= TP_WG_MIN_IC);
}

/* How many blocks of conv_tcp<TH, BN, WM, WN, GK> for layer @p s the device holds at once (blocks
 * per multiprocessor by the occupancy calculator, times the multiprocessors); 0 when the tile's
 * shared memory does not fit or the calculator fails (its error is cleared). */
template <int TH, int BN, int WM, int WN, int GK>
static size_t tp_slots_of(const kr_cuda_op *op, tc_shape s)
{
    tp_geometry(s, TH);
    const size_t smem = tp_smem_bytes(s, BN);
    if (smem > TP_SMEM_MAX || smem > op->caps->smem_block_optin)
        return 0;
    int n = 0;
    if ((smem > 48 * 1024 &&
         cudaFuncSetAttribute(tp_kernel<TH, BN, WM, WN, GK>(s),
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)smem) != cudaSuccess) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, tp_kernel<TH, BN, WM, WN, GK>(s),
                                                      WM * WN * 32, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (size_t)n * (size_t)(op->caps->sms > 0 ? op->caps->sms : 1);
}

/* tp_slots_of for the instance kr_cuda_conv_2d_tc launches for @p bn and @p th. */
template <int GK> static size_t tp_slots(const kr_cuda_op *op, const tc_shape &s, int bn, int th)
{
    if (bn == 16)
        return th == 4   ? tp_slots_of<4, 16, 4, 1, GK>(op, s)
               : th == 8 ? tp_slots_of<8, 16, 4, 1, GK>(op, s)
                         : tp_slots_of<16, 16, 8, 1, GK>(op, s);
    if (bn == 32)
        return th == 4   ? tp_slots_of<4, 32, 2, 2, GK>(op, s)
               : th == 8 ? tp_slots_of<8, 32, 4, 1, GK>(op, s)
                         : tp_slots_of<16, 32, 8, 1, GK>(op, s);
    return th == 4   ? tp_slots_of<4, 64, 2, 2, GK>(op, s)
           : th == 8 ? tp_slots_of<8, 64, 2, 2, GK>(op, s)
                     : tp_slots_of<16, 64, 4, 2, GK>(op, s);
}

template <int TH, int BN, int WM, int WN, int GK>
static int launch_patch(const kr_cuda_op *op, tc_shape s, const __half *x0, const __half *x1,
                        const float *bias, int batch)
{
    tp_geometry(s, TH);
    const size_t smem = tp_smem_bytes(s, BN);
    cudaError_t err;
    if (smem > 48 * 1024 &&
        (err = cudaFuncSetAttribute(tp_kernel<TH, BN, WM, WN, GK>(s),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) !=
            cudaSuccess)
        return (int)err;
    const size_t blocks = (size_t)batch * s.tiles_y * s.tiles_x;
    if (blocks >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    /* on compute 9.0 a programmatic dependent launch: the blocks start (index arithmetic, the
     * first weights) while the kernel before finishes; the kernel waits for it
     * (griddepcontrol.wait) before reading any activation or writing */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)blocks, (unsigned)((s.oc + BN - 1) / BN));
    cfg.blockDim = dim3(WM * WN * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, tp_kernel<TH, BN, WM, WN, GK>(s), x0, x1,
                                   (const __half *)op->w16, bias, (__half *)op->out, s,
                                   kr_make_epilogue(op, 1));
}

/* launch_patch for @p bn and @p th: the instance (warps) of each tile shape. */
template <int GK>
static int launch_patch_th(const kr_cuda_op *op, const tc_shape &s, const __half *x0,
                           const __half *x1, const float *bias, int batch, int bn, int th)
{
    if (bn == 16)
        return th == 4   ? launch_patch<4, 16, 4, 1, GK>(op, s, x0, x1, bias, batch)
               : th == 8 ? launch_patch<8, 16, 4, 1, GK>(op, s, x0, x1, bias, batch)
                         : launch_patch<16, 16, 8, 1, GK>(op, s, x0, x1, bias, batch);
    if (bn == 32)
        return th == 4   ? launch_patch<4, 32, 2, 2, GK>(op, s, x0, x1, bias, batch)
               : th == 8 ? launch_patch<8, 32, 4, 1, GK>(op, s, x0, x1, bias, batch)
                         : launch_patch<16, 32, 8, 1, GK>(op, s, x0, x1, bias, batch);
    return th == 4   ? launch_patch<4, 64, 2, 2, GK>(op, s, x0, x1, bias, batch)
           : th == 8 ? launch_patch<8, 64, 2, 2, GK>(op, s, x0, x1, bias, batch)
                     : launch_patch<16, 64, 4, 2, GK>(op, s, x0, x1, bias, batch);
}

/* The row kernel; on compute 9.0 a programmatic dependent launch, as launch_patch's. */
template <int BM, int BN, int WM, int WN>
static int launch_tile(const kr_cuda_op *op, const tc_shape &s, const __half *x0,
                       const __half *x1, const float *bias)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)((s.M + BM - 1) / BM), (unsigned)((s.oc + BN - 1) / BN));
    cfg.blockDim = dim3(TC_THREADS);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, conv_tc<BM, BN, WM, WN>, x0, x1,
                                   (const __half *)op->w16, bias, (__half *)op->out, s,
                                   kr_make_epilogue(op, 1));
}

/* Whether layer @p op's input channels, alignment and device allow the kernel (before the
 * choice of where it pays). */
static int tc_possible(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    if (!op->f16 || !op->w16 || !op->caps || !kr_gpu_has_mma_sync(op->caps) || p->groups > 1 ||
        op->node->n_inputs < 2)
        return 0;
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const int ic = wt->dims[3];
    if (wt->rank != 4 || yt->rank != 4 || ic % 8 || wt->dims[0] != yt->dims[3] ||
        !kr_aligned(op->w16, 16) || !kr_aligned(op->out, 4) ||
        (op->residual && !kr_aligned(op->residual, 4)))
        return 0;
    if (op->pool.src) /* the folded pool's source (fusion.c checked its shape) */
        return !op->cat.src[0] && kr_aligned(op->pool.src, 16);
    if (op->cat.src[0]) /* the folded concatenation's sources (fusion.c checked their shapes) */
        return op->cat.c0 > 0 && op->cat.c0 < ic && op->cat.c0 % 8 == 0 &&
               kr_aligned(op->cat.src[0], 16) &&
               kr_aligned(op->cat.src[1], 16);
    const kr_tensor *xt = kr_in_t(op, 0);
    return xt->rank == 4 && xt->dims[3] == ic && kr_aligned(op->in[0], 16);
}

extern "C" int kr_cuda_conv_2d_tc_fits(const kr_cuda_op *op)
{
    /* ONNX layers (explicit padding) only, as the WMMA kernel before it: the TFLite models keep
     * their CUDA-core paths, which sum alike on every compute capability (an emulated older
     * class gives the device's results bit for bit, test_gpu_caps_gpu) and measured faster on
     * the H100 at batch 256 than this kernel on their 1x1 layers (selfie f16 68,162 against
     * 72,534 frames/s, face-short 121,270 against 124,389, with the layers of K >= 32 and
     * N >= 32 on it) */
    return op->node->p.window.padding == KR_PADDING_EXPLICIT && tc_possible(op);
}

extern "C" int kr_cuda_conv_2d_tc(const kr_cuda_op *op)
{
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    tc_shape s;
    s.oh = yt->dims[1], s.ow = yt->dims[2], s.oc = yt->dims[3];
    s.ic = wt->dims[3];
    s.kh = wt->dims[1], s.kw = wt->dims[2];
    s.sh = p->stride_h, s.sw = p->stride_w;
    s.dh = p->dilation_h > 0 ? p->dilation_h : 1, s.dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s.pt = p->pad_top, s.pl = p->pad_left;
    s.c0 = 0, s.rz = -1, s.rh = s.rw = 0, s.align = s.half = 0;
    s.pool = 0, s.pih = s.piw = s.pkh = s.pkw = s.psh = s.psw = s.pdh = s.pdw = s.ppt = s.ppl = 0;
    s.stages = 2;
    s.wg = 0;
    s.th = 0;
    s.ev = tp_vec_epilogue(op, s.oc);
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
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    int bn = s.oc <= 16 ? 16 : s.oc <= 32 ? 32 : 64;
    size_t ntiles = (size_t)(s.oc + bn - 1) / bn;
    const size_t sms = (size_t)(op->caps->sms > 0 ? op->caps->sms : 1);
    s.tiles_y = s.tiles_x = s.ph = s.pw = 0;
    if (tc_use_patch(op, s, bn)) {
        s.wg = tp_use_wgmma(op, s, bn);
        /* the tile height by M (which changes no output's sum): 16 rows (8 warps, the weights
         * staged once for 256 pixels) where that still gives two blocks per multiprocessor and
         * its patch fits, 4 rows where 8-row tiles would not, else 8 */
        const size_t tx = (size_t)(s.ow + TP_TW - 1) / TP_TW;
        const size_t t8 = batch * ((s.oh + 7) / 8) * tx * ntiles;
        const size_t t16 = batch * ((s.oh + 15) / 16) * tx * ntiles;
        tc_shape s16 = s;
        tp_geometry(s16, 16);
        const size_t smem16 = tp_smem_bytes(s16, bn);
        int th = t8 < 2 * sms ? 4
                 : t16 >= 2 * sms && smem16 <= TP_SMEM_MAX && smem16 <= op->caps->smem_block_optin
                     ? 16
                     : 8;
        /* where those tiles take more than one round of the blocks the device holds at once
         * and 8 (else 16) rows take one, the latter: at batch 1 u2netp's 160 x 160 layers of 64
         * outputs gave 400 4-row blocks against 396 places (4 blocks in a second round; since
         * the weights' 32-byte rows, TP_WLDS, 528 places, so they keep the 4-row tiles), its
         * 320 x 320 layers of 16 outputs 400 16-row blocks against 264 */
        /* GK: the instance with the folded pool's gathered loads (1), the folded resize's (2),
         * or none (0): each instance holds only its own gather's code (the code of the chunk
         * loop is fetched again for every chunk; ncu found the large layers stalled on
         * instruction fetch) */
        const int gk = tp_gather_kind(s);
        auto slots = [&](int t) {
            return gk == 1   ? tp_slots<1>(op, s, bn, t)
                   : gk == 2 ? tp_slots<2>(op, s, bn, t)
                             : tp_slots<0>(op, s, bn, t);
        };
        const size_t here = slots(th);
        if (here && batch * ((s.oh + th - 1) / th) * tx * ntiles > here)
            for (int alt = 8; alt <= 16; alt += 8) {
                const size_t places = alt == th ? 0 : slots(alt);
                if (places && batch * ((s.oh + alt - 1) / alt) * tx * ntiles <= places) {
                    th = alt;
                    break;
                }
            }
        /* narrower output tiles on a small grid: where the layer's tiles (of the height chosen
         * above) give fewer than two blocks per multiprocessor, the narrowest of 16 and 32
         * output channels whose grid the device still holds in one round. u2netp's deep
         * 64-output layers at batch 1 (3 to 100 blocks, up to 8 input chunks) ran each block's
         * 64 columns (8 mma.sync per warp and tap) and 18 KB of weights per chunk on a few
         * multiprocessors with the rest idle; at 16 columns the same chain of chunks is a
         * quarter of the work per block on four times the blocks. Its 160 x 160 layers of 64
         * outputs (200 8-row blocks, 3 places per multiprocessor by shared memory: 1.5 blocks
         * each) ran 400 blocks of 32 outputs (4 places each) until the weights' 32-byte rows
         * gave their 4-row tiles one round. Each output's sum is the same at
         * every tile width (an output column's mma.sync accumulation does not involve the
         * others; the chunks and taps in the same order), so this choice by the grid (and so by
         * the batch too) changes no result. */
        if (bn > 16) {
            const size_t tiles = batch * ((s.oh + th - 1) / th) * tx;
            if (tiles * ntiles < 2 * sms)
                for (int nb = 16; nb < bn; nb *= 2) {
                    const size_t nt = (size_t)(s.oc + nb - 1) / nb;
                    const size_t places = gk == 1   ? tp_slots<1>(op, s, nb, th)
                                          : gk == 2 ? tp_slots<2>(op, s, nb, th)
                                                    : tp_slots<0>(op, s, nb, th);
                    if (places && tiles * nt <= places) {
                        bn = nb, ntiles = nt;
                        break;
                    }
                }
        }
        /* a grid of at most one block per multiprocessor (no other block of the layer competes
         * for the shared memory): TP_DEEP_STAGES chunks in flight where they fit. A choice by
         * the number of blocks (so by the batch too), which changes no output's sum */
        {
            tc_shape sd = s;
            tp_geometry(sd, th);
            sd.stages = TP_DEEP_STAGES;
            const size_t blocks = batch * sd.tiles_y * sd.tiles_x * ntiles;
            const size_t smem = tp_smem_bytes(sd, bn);
            if (blocks <= sms && smem <= TP_DEEP_SMEM_MAX && smem <= op->caps->smem_block_optin)
                s.stages = TP_DEEP_STAGES;
        }
        return gk == 1   ? launch_patch_th<1>(op, s, x0, x1, bias, (int)batch, bn, th)
               : gk == 2 ? launch_patch_th<2>(op, s, x0, x1, bias, (int)batch, bn, th)
                         : launch_patch_th<0>(op, s, x0, x1, bias, (int)batch, bn, th);
    }
    /* BM 64 where 128-row tiles would give fewer than two blocks per multiprocessor */
    const int small = ((M + 127) / 128) * ntiles < 2 * sms;
    if (bn == 16)
        return small ? launch_tile<64, 16, 4, 1>(op, s, x0, x1, bias)
                     : launch_tile<128, 16, 4, 1>(op, s, x0, x1, bias);
    if (bn == 32)
        return small ? launch_tile<64, 32, 2, 2>(op, s, x0, x1, bias)
                     : launch_tile<128, 32, 4, 1>(op, s, x0, x1, bias);
    return small ? launch_tile<64, 64, 2, 2>(op, s, x0, x1, bias)
                 : launch_tile<128, 64, 2, 2>(op, s, x0, x1, bias);
}
