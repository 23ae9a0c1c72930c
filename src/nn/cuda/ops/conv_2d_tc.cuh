/*
 * The tensor-core helpers of the f16 3x3 convolution kernels (conv_2d_tc.cu's patch and row
 * kernels, conv_2d_chain.cu's chains): cp.async copies and waits, mma.sync m16n8k16, and the
 * gathered inputs' arithmetic (a folded RESIZE_BILINEAR's blend of four taps, a folded 2 x 2
 * MAX_POOL_2D's maxima), each the value the unfused node would have stored, so that every
 * kernel that includes these computes the same bits.
 */
#ifndef KEYER_NN_CUDA_OPS_CONV_2D_TC_CUH
#define KEYER_NN_CUDA_OPS_CONV_2D_TC_CUH

#include <cuda_fp16.h>

/* A 16-byte cp.async of @p src to shared address @p dst (CA: through L1, else L2 only); zeros
 * where @p ok is false. */
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

/* Halves per shared weight row: 32 bytes, no padding; a row's two 16-byte halves are swapped in
 * rows 4-7 of every 8 (tp_wswz), so that ldmatrix's 8 consecutive rows and a quarter warp's
 * cp.async of 4 rows x 2 halves each cover the 32 banks once. The weights of a stage are
 * taps x BN rows (BN a multiple of 8): in 48-byte rows they were two thirds of conv_tcp's
 * shared memory (the 16-row 64-output tiles: 86 KB a block, now 68) */
#define TP_WLDS 16
/* The offset in halves of half @p h (0 or 1: channels [8 h, 8 h + 8) of the chunk) of weight
 * row @p r in a stage's weights (TP_WLDS): the halves swapped where bit 2 of the row is set. */
__host__ __device__ constexpr int tp_wswz(int r, int h)
{
    return r * TP_WLDS + ((h ^ ((r >> 2) & 1)) << 3);
}

#endif
