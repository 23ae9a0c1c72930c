/*
 * CONV_2D on the tensor cores, for f16 instances of ONNX models: an implicit GEMM
 * Y[m, n] = act(bias[n] + sum_k X'[m, k] * W[n, k]) (m = (b, oy, ox), n = output channel,
 * k = (ky, kx, ic): the OHWI weight layout) with WMMA 16 x 16 x 16 half-precision products and
 * float accumulation. kr_cuda_conv_2d hands it the layers of kr_cuda_conv_2d_mma_fits: half
 * activations, explicit padding (ONNX; the TFLite models keep their paths and results bit for
 * bit), no groups, input channels a multiple of 16 (so that every 16 consecutive k are one tap's
 * contiguous channels), 16-byte aligned input and weights, a device of compute capability 7 or
 * more.
 *
 * Tiling: a block of 4 warps computes a BM x BN tile of Y, BN 16, 32 or 64 by the layer's
 * output channels (u2netp's are mostly 16: a 64-wide tile would waste three quarters of the
 * products) and BM 128, 128 or 64; k steps by 32 through shared memory; each warp holds 2 x FN
 * accumulator fragments (mma_tile). The loaders fill 16 consecutive k of a row of the X' tile
 * (two 16-byte loads, zero outside the input) and of a row of the weight tile (float, rounded
 * to half here: the weights lose what half precision loses, as the activations already have). The accumulators go through shared memory
 * to the epilogue, which adds the bias, applies the clamp, the folded activation and residual
 * (kr_conv_out, ops/conv_2d.cuh) and stores half, channel fastest.
 *
 * Summation order (ops/conv_2d.cuh lists it with the others): per output, the 16-deep chunks of
 * k in order, each chunk's products summed as the tensor core sums them, from zero; the bias
 * last. It depends only on the layer, not on the batch.
 */
#include <mma.h>

#include "nn/cuda/ops/conv_2d.cuh"

#define MMA_BK 32
#define MMA_LDS (MMA_BK + 8) /* halves per shared row: 80 bytes, rows 16-byte aligned */
#define MMA_THREADS 128      /* 4 warps */

struct mma_shape {
    int ih, iw, ic, oh, ow, oc, kw, sh, sw, dh, dw, pt, pl;
    int M, K;
};

/* The tile of a BN-wide block (BN = 16, 32 or 64 output channels, by the layer's): FN 16-wide
 * fragments per warp along N, WN warps along N, the other warps along M with 2 fragments each. */
template <int BN> struct mma_tile {
    static constexpr int FN = BN >= 32 ? 2 : 1;
    static constexpr int WN = BN / (16 * FN);
    static constexpr int WM = 4 / WN;
    static constexpr int BM = WM * 32;
    static constexpr int LDC = BN + 4; /* floats per accumulator row */
};

/* 16 consecutive k from @p k of X' row @p m (zero outside the input or past M / K). */
__device__ __forceinline__ void mma_load_x(const __half *__restrict__ x, const mma_shape &s,
                                           int m, int k, uint4 *d)
{
    uint4 a0 = make_uint4(0, 0, 0, 0), a1 = a0;
    if (m < s.M && k < s.K) {
        const int ox = m % s.ow, t = m / s.ow;
        const int oy = t % s.oh, b = t / s.oh;
        const int tap = k / s.ic, c = k - tap * s.ic;
        const int ky = tap / s.kw, kx = tap - ky * s.kw;
        const int iy = oy * s.sh - s.pt + ky * s.dh, ix = ox * s.sw - s.pl + kx * s.dw;
        if ((unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw) {
            const uint4 *p = reinterpret_cast<const uint4 *>(
                x + (((size_t)b * s.ih + iy) * s.iw + ix) * s.ic + c);
            a0 = p[0];
            a1 = p[1];
        }
    }
    d[0] = a0;
    d[1] = a1;
}

/* 16 consecutive k from @p k of weight row @p n, rounded to half (zero past oc / K). */
__device__ __forceinline__ void mma_load_w(const float *__restrict__ w, const mma_shape &s, int n,
                                           int k, __half2 *d)
{
    if (n < s.oc && k < s.K) {
        const float4 *p = reinterpret_cast<const float4 *>(w + (size_t)n * s.K + k);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float4 v = p[q];
            d[2 * q] = __floats2half2_rn(v.x, v.y);
            d[2 * q + 1] = __floats2half2_rn(v.z, v.w);
        }
    } else {
#pragma unroll
        for (int q = 0; q < 8; q++)
            d[q] = __floats2half2_rn(0.0f, 0.0f);
    }
}

template <int BN>
__global__ void __launch_bounds__(MMA_THREADS)
    conv_mma(const __half *__restrict__ x, const float *__restrict__ w,
             const float *__restrict__ bias, __half *__restrict__ y, mma_shape s, kr_epilogue e)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    using namespace nvcuda;
    typedef mma_tile<BN> tl;
    constexpr int BM = tl::BM, FN = tl::FN;
    __shared__ __align__(32) __half As[BM][MMA_LDS];
    __shared__ __align__(32) __half Bs[BN][MMA_LDS];
    __shared__ __align__(32) float Cs[BM][tl::LDC];
    const int tid = threadIdx.x, warp = tid / 32;
    const int wm = warp / tl::WN, wn = warp % tl::WN;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][FN];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < s.K; k0 += MMA_BK) {
        /* chunk c: row c / 2, k half (c % 2) * 16 */
        for (int c = tid; c < BM * 2; c += MMA_THREADS)
            mma_load_x(x, s, m0 + c / 2, k0 + (c % 2) * 16,
                       reinterpret_cast<uint4 *>(&As[c / 2][(c % 2) * 16]));
        for (int c = tid; c < BN * 2; c += MMA_THREADS)
            mma_load_w(w, s, n0 + c / 2, k0 + (c % 2) * 16,
                       reinterpret_cast<__half2 *>(&Bs[c / 2][(c % 2) * 16]));
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MMA_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[FN];
#pragma unroll
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(fa[i], &As[wm * 32 + i * 16][kk], MMA_LDS);
#pragma unroll
            for (int j = 0; j < FN; j++)
                wmma::load_matrix_sync(fb[j], &Bs[(wn * FN + j) * 16][kk], MMA_LDS);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < FN; j++)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            wmma::store_matrix_sync(&Cs[wm * 32 + i * 16][(wn * FN + j) * 16], acc[i][j],
                                    tl::LDC, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < BM * BN; i += MMA_THREADS) {
        const int r = i / BN, cn = i % BN;
        const int om = m0 + r, on = n0 + cn;
        if (om >= s.M || on >= s.oc)
            continue;
        float v = kr_conv_out(Cs[r][cn], bias ? bias[on] : 0.0f, 0.0f, false, kr_no_res(),
                              [&](float a) { return kr_apply(e, a); });
        kr_add_res<__half, 1>(e, (size_t)om * s.oc + on, &v);
        kr_st(y + (size_t)om * s.oc + on, v);
    }
#else
    __trap(); /* built without WMMA for this device: fail loudly, never a wrong result */
#endif
}

template <int BN> static void launch_bn(const kr_cuda_op *op, const mma_shape &s, const float *bias)
{
    constexpr int BM = mma_tile<BN>::BM;
    dim3 grid((unsigned)((s.M + BM - 1) / BM), (unsigned)((s.oc + BN - 1) / BN));
    conv_mma<BN><<<grid, MMA_THREADS, 0, (cudaStream_t)op->stream>>>(
        (const __half *)op->in[0], (const float *)op->in[1], bias, (__half *)op->out, s,
        kr_make_epilogue(op, 1));
}

extern "C" int kr_cuda_conv_2d_mma_fits(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1);
    if (!op->f16 || p->padding != KR_PADDING_EXPLICIT || p->groups > 1 || xt->rank != 4 ||
        wt->rank != 4 || xt->dims[3] % 16 || wt->dims[3] != xt->dims[3] ||
        !kr_aligned(op->in[0], 16) || !kr_aligned(op->in[1], 16))
        return 0;
    return op->caps && kr_gpu_has_wmma_f16(op->caps); /* the device's or the emulated class's */
}

extern "C" int kr_cuda_conv_2d_mma(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    mma_shape s;
    s.ih = xt->dims[1], s.iw = xt->dims[2], s.ic = xt->dims[3];
    s.oh = yt->dims[1], s.ow = yt->dims[2], s.oc = yt->dims[3];
    s.kw = wt->dims[2];
    s.sh = p->stride_h, s.sw = p->stride_w;
    s.dh = p->dilation_h > 0 ? p->dilation_h : 1, s.dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s.pt = p->pad_top, s.pl = p->pad_left;
    const size_t M = (size_t)kr_dim(op, xt, 0) * s.oh * s.ow;
    const size_t K = (size_t)wt->dims[1] * wt->dims[2] * s.ic;
    if (M >= ((size_t)1 << 31) || K >= ((size_t)1 << 31) || wt->dims[0] != s.oc)
        return (int)cudaErrorInvalidValue;
    s.M = (int)M, s.K = (int)K;
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    if (s.oc <= 16)
        launch_bn<16>(op, s, bias);
    else if (s.oc <= 32)
        launch_bn<32>(op, s, bias);
    else
        launch_bn<64>(op, s, bias);
    return (int)cudaGetLastError();
}
