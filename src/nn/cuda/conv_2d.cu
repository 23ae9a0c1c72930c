/*
 * CONV_2D as an implicit GEMM: Y[m, n] = act(bias[n] + sum_k X'[m, k] * W[n, k]) with
 * m = (b, oy, ox), n = output channel, k = (ky, kx, ic) - exactly the OHWI weight layout, so
 * weights are used as stored. X'[m, k] is gathered from the NHWC input on the fly (zero outside
 * the input); a 1x1, stride-1, unpadded convolution reads X directly (the pointwise fast path,
 * most of the MACs in the MediaPipe models).
 *
 * The summation orders of these paths and of the other schedules' convolutions, and the
 * multiply-add and epilogue they share, are in ops/conv_2d.cuh.
 *
 * Tiling: a 256-thread block computes a BM x BN tile of Y, stepping K by 16 through shared
 * memory; each thread accumulates a 4 x 4 sub-tile in float registers. BN follows the layer's
 * output channels (16, 32 or 64; BM = 4096 / BN) so that the narrow layers of the MediaPipe
 * models (16 or 24 channels at the highest resolutions) do not compute a 64-wide tile of which
 * three quarters is thrown away. Loads are coalesced along k (the innermost, contiguous axis of
 * both X and W); shared-memory rows are padded by 4 floats against bank conflicts. Half-precision
 * instances load __half and convert in the shared-memory fill; accumulation is float; the
 * epilogue adds the bias, applies the fused clamp and the folded activation, and stores T.
 *
 * Stems (the first layer of every shipped model: 3 input channels, 3x3 or 5x5, 8 to 32 output
 * channels) take a direct path instead: the GEMM spends its time there on the gather's index
 * arithmetic for K = 27 or 75, with a tile three quarters empty. conv_stem gives each thread
 * one output pixel and a group of output channels; the group's weights and bias travel as a
 * kernel parameter (__grid_constant__), so every multiply-add reads its weight from the
 * constant bank with a compile-time offset, and the input patch sits in registers. Chosen when
 * the weights are float constants of such a shape. The ONNX models' stems (explicit padding, 16,
 * 32 or 64 outputs: u2netp's 3 -> 64) take conv_2d_stem.cu instead, one launch for all the
 * output channels with the same sums.
 *
 * Narrow pointwise layers (1x1 with 8 to 32 input channels, the 16- and 24-channel layers at
 * the models' highest resolutions) take the same route: conv_narrow gives each thread one
 * pixel, loads its input channels with vector loads and computes all its output channels
 * (at most 32, and at most 2 KB of weights) with the weights in the constant bank. The GEMM tile spends these layers' time on scalar
 * gathers and stores with a 16-deep K; they move little data per FMA and are bound by memory.
 * In half precision the 16 -> 16 layers (selfie's at 128 x 128 and 64 x 64) take the tensor
 * cores instead (conv_narrow_mma, below): conv_narrow's 256 FFMA a pixel made them bound by
 * instructions at twice their memory floor.
 * Wider layers with as few inputs (up to 256 outputs) take conv_pw_groups (below) in half
 * precision.
 */
#include <string.h>

#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/tuning.h"

#define BK 16

struct conv_shape {
    int n, ih, iw, ic, oh, ow, oc, kh, kw;
    int sh, sw, dh, dw, pt, pl;
    int M, K;
    int pointwise;
};

template <typename T>
__device__ __forceinline__ float gather(const T *__restrict__ x, const conv_shape &s, int m, int k)
{
    if (m >= s.M || k >= s.K)
        return 0.0f;
    if (s.pointwise)
        return kr_ld(x + (size_t)m * s.K + k);
    int ox = m % s.ow, t = m / s.ow;
    int oy = t % s.oh, b = t / s.oh;
    int ic = k % s.ic, r = k / s.ic;
    int kx = r % s.kw, ky = r / s.kw;
    int iy = kr_conv_in(oy, s.sh, s.pt, ky, s.dh), ix = kr_conv_in(ox, s.sw, s.pl, kx, s.dw);
    if ((unsigned)iy >= (unsigned)s.ih || (unsigned)ix >= (unsigned)s.iw)
        return 0.0f;
    return kr_ld(x + (((size_t)b * s.ih + iy) * s.iw + ix) * s.ic + ic);
}

template <typename T, int BN>
__global__ void __launch_bounds__(256) conv_gemm(const T *__restrict__ x, const float *__restrict__ w,
                                                 const float *__restrict__ bias, T *__restrict__ y,
                                                 conv_shape s, kr_epilogue e)
{
    constexpr int TX = BN / 4, TY = 256 / TX, BM = TY * 4;
    __shared__ __align__(16) float As[BK][BM + 4];
    __shared__ __align__(16) float Bs[BK][BN + 4];
    int tid = threadIdx.x;
    int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    int tx = tid % TX, ty = tid / TX;
    float acc[4][4] = {};
    int lk = tid % BK, lr = tid / BK; /* loader: k and the first of the rows (stride 16) */
    for (int k0 = 0; k0 < s.K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < BM / 16; i++) {
            int r = lr + 16 * i;
            As[lk][r] = gather(x, s, m0 + r, k0 + lk);
        }
#pragma unroll
        for (int i = 0; i < BN / 16; i++) {
            int r = lr + 16 * i;
            int n = n0 + r, k = k0 + lk;
            Bs[lk][r] = (n < s.oc && k < s.K) ? kr_ld(w + (size_t)n * s.K + k) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float4 a = *reinterpret_cast<const float4 *>(&As[k][ty * 4]);
            float4 b = *reinterpret_cast<const float4 *>(&Bs[k][tx * 4]);
            float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
                kr_fma4(acc[i], av[i], b);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int m = m0 + ty * 4 + i;
        if (m >= s.M)
            continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int n = n0 + tx * 4 + j;
            if (n < s.oc) {
                float v = kr_conv_out(acc[i][j], bias ? kr_ld(bias + n) : 0.0f, 0.0f, false,
                                      kr_no_res(), [&](float a) { return kr_apply(e, a); });
                kr_add_res<T, 1>(e, (size_t)m * s.oc + n, &v);
                kr_st(y + (size_t)m * s.oc + n, v);
            }
        }
    }
}

/* The weights of CG output channels of a stem, as one kernel parameter. */
template <int K, int CG> struct stem_weights {
    float w[CG * K * K * 3]; /* OHWI */
    float b[CG];
};

/* Output channels [co, co + CG) of every pixel of a stem (CO channels in all). */
template <typename T, int K, int CG>
__global__ void __launch_bounds__(128) conv_stem(const T *__restrict__ x, T *__restrict__ y,
                                                 const __grid_constant__ stem_weights<K, CG> p,
                                                 conv_shape s, int co, kr_epilogue e)
{
    constexpr int KK = K * K * 3;
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= s.M)
        return;
    const int ox = m % s.ow, t = m / s.ow;
    const int oy = t % s.oh, b = t / s.oh;
    const int iy0 = oy * s.sh - s.pt, ix0 = ox * s.sw - s.pl;
    const T *xb = x + (size_t)b * s.ih * s.iw * 3;
    float in[KK];
#pragma unroll
    for (int ky = 0; ky < K; ky++) {
        const int iy = iy0 + ky;
#pragma unroll
        for (int kx = 0; kx < K; kx++) {
            const int ix = ix0 + kx;
            const bool ok = (unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw;
            const T *px = xb + ((size_t)iy * s.iw + ix) * 3;
#pragma unroll
            for (int c = 0; c < 3; c++)
                in[(ky * K + kx) * 3 + c] = ok ? kr_ld(px + c) : 0.0f;
        }
    }
    float acc[CG];
#pragma unroll
    for (int n = 0; n < CG; n++)
        acc[n] = p.b[n];
#pragma unroll
    for (int k = 0; k < KK; k++)
#pragma unroll
        for (int n = 0; n < CG; n++)
            acc[n] = fmaf(in[k], p.w[n * KK + k], acc[n]);
#pragma unroll
    for (int n = 0; n < CG; n++)
        acc[n] = kr_apply(e, acc[n]);
    T *out = y + (size_t)m * s.oc + co;
#pragma unroll
    for (int n = 0; n < CG; n += 4) {
        kr_add_res<T, 4>(e, (size_t)m * s.oc + co + n, acc + n);
        kr_stv<4>(out + n, acc + n);
    }
}

/* Queues the stem as s.oc / CG launches of CG channels each. */
template <typename T, int K, int CG> static void launch_stem(const kr_cuda_op *op, const conv_shape &s)
{
    constexpr int KK = K * K * 3;
    const float *w = (const float *)kr_in_t(op, 1)->data;
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    const float *bias = bt ? (const float *)bt->data : NULL;
    for (int co = 0; co < s.oc; co += CG) {
        stem_weights<K, CG> p;
        memcpy(p.w, w + (size_t)co * KK, sizeof(p.w));
        for (int n = 0; n < CG; n++)
            p.b[n] = bias ? bias[co + n] : 0.0f;
        conv_stem<T, K, CG><<<(unsigned)((s.M + 127) / 128), 128, 0, (cudaStream_t)op->stream>>>(
            (const T *)op->in[0], (T *)op->out, p, s, co, kr_make_epilogue(op, 1));
    }
}

/* The direct stem path for a stem of a supported shape (see the file comment); 0 when it does
 * not apply. A launch's weights stay within 2 KB: larger sets (5x5 with 24 channels: 7.2 KB)
 * thrashed the constant cache and ran no faster than the GEMM, so they are split by channels. */
template <typename T> static int try_stem(const kr_cuda_op *op, const conv_shape &s)
{
    const kr_tensor *wt = kr_in_t(op, 1);
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    if (s.ic != 3 || s.dh != 1 || s.dw != 1 || s.kh != s.kw || (s.kh != 3 && s.kh != 5) ||
        s.oc % 4 || s.oc > 64 || !wt->data || wt->dtype != KR_DTYPE_F32 ||
        (bt && (!bt->data || bt->dtype != KR_DTYPE_F32)) || !kr_aligned(op->out, 4 * sizeof(T)) ||
        (op->residual && !kr_aligned(op->residual, 4 * sizeof(T))))
        return 0;
    if (s.kh == 3 && s.oc % 16 == 0)
        launch_stem<T, 3, 16>(op, s); /* 1.7 KB per launch */
    else if (s.kh == 3 && s.oc % 8 == 0)
        launch_stem<T, 3, 8>(op, s);
    else if (s.kh == 3)
        launch_stem<T, 3, 4>(op, s);
    else
        launch_stem<T, 5, 4>(op, s); /* 1.2 KB per launch */
    return 1;
}

/* Output channels [co, co + CG) of a pointwise layer with K input channels. */
template <int K, int CG> struct narrow_weights {
    float w[CG * K]; /* [n][k] */
    float b[CG];
};

template <typename T, int K, int CG>
__global__ void __launch_bounds__(128) conv_narrow(const T *__restrict__ x, T *__restrict__ y,
                                                   const __grid_constant__ narrow_weights<K, CG> p,
                                                   int M, int N, int co, kr_epilogue e)
{
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M)
        return;
    float in[K];
    const T *row = x + (size_t)m * K;
#pragma unroll
    for (int k = 0; k < K; k += 4)
        kr_ldv<4>(row + k, in + k);
    float acc[CG];
#pragma unroll
    for (int n = 0; n < CG; n++)
        acc[n] = p.b[n];
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
        for (int n = 0; n < CG; n++)
            acc[n] = fmaf(in[k], p.w[n * K + k], acc[n]);
#pragma unroll
    for (int n = 0; n < CG; n++)
        acc[n] = kr_apply(e, acc[n]);
    T *out = y + (size_t)m * N + co;
#pragma unroll
    for (int n = 0; n < CG; n += 4) {
        kr_add_res<T, 4>(e, (size_t)m * N + co + n, acc + n);
        kr_stv<4>(out + n, acc + n);
    }
}

template <typename T, int K, int CG> static int launch_narrow(const kr_cuda_op *op, const conv_shape &s)
{
    /* One launch per layer: split into channel groups, each launch wrote part of every
     * output row (partial sectors) and the 16 -> 72 layer took twice the GEMM's time. */
    if (s.K != K || s.oc != CG)
        return 0;
    const float *w = (const float *)kr_in_t(op, 1)->data;
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    const float *bias = bt ? (const float *)bt->data : NULL;
    for (int co = 0; co < s.oc; co += CG) {
        narrow_weights<K, CG> p;
        memcpy(p.w, w + (size_t)co * K, sizeof(p.w));
        for (int n = 0; n < CG; n++)
            p.b[n] = bias ? bias[co + n] : 0.0f;
        conv_narrow<T, K, CG><<<(unsigned)((s.M + 127) / 128), 128, 0, (cudaStream_t)op->stream>>>(
            (const T *)op->in[0], (T *)op->out, p, s.M, s.oc, co, kr_make_epilogue(op, 1));
    }
    return 1;
}

/*
 * The 16 -> 16 pointwise layers of an f16 instance on the tensor cores (selfie's 128 x 128 and
 * 64 x 64 layers, issue 27). conv_narrow spent 256 FFMA, 16 conversions and its stores per pixel
 * (ncu, selfie f16 b256 at 128 x 128: 125 us, SM throughput 83-93%, DRAM 41%: bound by
 * instructions; the floor of its 247 MB is ~59 us). Here a warp computes 16 rows with 8
 * mma.sync.m16n8k8 (2 n8 tiles x 2 k chunks x the weights' hi and lo halves) from registers
 * loaded straight from global memory, no shared memory:
 *  - A (16 x 8 per chunk): lane (g = lane / 4, t = lane % 4) loads channels [4t, 4t + 4) of rows
 *    g and g + 8 (8 bytes each; a warp's load is 8 whole rows, 256 contiguous bytes). The first
 *    half2 is its A register of chunk 0 (logical k 2t, 2t + 1), the second that of chunk 1: chunk
 *    c holds channels {4t + 2c, 4t + 2c + 1 : t = 0..3}. The B fragments permute k the same way,
 *    so each chunk is a sum over its 8 channels.
 *  - B (8 x 8 per n tile and chunk): column g of n tile j is output channel
 *    4 (g / 2) + 2j + g % 2, so that the accumulators c0, c1 of tiles 0 and 1 are channels
 *    [4t, 4t + 4) of row g (c2, c3: of row g + 8) and each lane stores 8 contiguous bytes per row.
 *    Lane g, t loads weights [4t, 4t + 4) of that channel, hi then lo halves (kr_cuda_op.w16),
 *    once per warp.
 * Each warp takes NARROW_MMA_TILES tiles of 16 rows per step (all their loads issued first),
 * striding over the rows; rows past M load zeros and store nothing. Compute 7.5 and newer (every
 * class keyer supports) take it alike; a choice by layer shape only (try_narrow_mma).
 * Sum order: ops/conv_2d.cuh, "narrow tensor-core".
 */
struct narrow_bias16 {
    float4 b[4]; /* channels [4t, 4t + 4) for lane t */
};

__global__ void __launch_bounds__(128) conv_narrow_mma(const __half *__restrict__ x,
                                                       const __half *__restrict__ w16,
                                                       const __grid_constant__ narrow_bias16 p,
                                                       __half *__restrict__ y, long long M,
                                                       kr_epilogue e)
{
    constexpr int TILES = NARROW_MMA_TILES, ROWS = 16 * TILES;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint2 bh[2], bl[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int n = 4 * (g >> 1) + 2 * j + (g & 1);
        bh[j] = *reinterpret_cast<const uint2 *>(w16 + n * 16 + 4 * t);
        bl[j] = *reinterpret_cast<const uint2 *>(w16 + 256 + n * 16 + 4 * t);
    }
    const float4 b4 = p.b[t];
    const float bias[4] = {b4.x, b4.y, b4.z, b4.w};
    const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long r0 = ((long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * ROWS;
         r0 < M; r0 += warps * ROWS) {
        uint2 a[TILES][2];
#pragma unroll
        for (int i = 0; i < TILES; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const long long row = r0 + 16 * i + 8 * h + g;
                a[i][h] = row < M ? *reinterpret_cast<const uint2 *>(x + row * 16 + 4 * t)
                                  : make_uint2(0u, 0u);
            }
#pragma unroll
        for (int i = 0; i < TILES; i++) {
            float acc[2][4] = {};
#pragma unroll
            for (int j = 0; j < 2; j++) {
                kr_mma_16x8x8(acc[j], a[i][0].x, a[i][1].x, bh[j].x);
                kr_mma_16x8x8(acc[j], a[i][0].x, a[i][1].x, bl[j].x);
                kr_mma_16x8x8(acc[j], a[i][0].y, a[i][1].y, bh[j].y);
                kr_mma_16x8x8(acc[j], a[i][0].y, a[i][1].y, bl[j].y);
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const long long row = r0 + 16 * i + 8 * h + g;
                if (row >= M)
                    continue;
                float v[4] = {acc[0][2 * h], acc[0][2 * h + 1], acc[1][2 * h], acc[1][2 * h + 1]};
#pragma unroll
                for (int c = 0; c < 4; c++)
                    v[c] = kr_conv_out(v[c], bias[c], 0.0f, false, kr_no_res(),
                                       [&](float s) { return kr_apply(e, s); });
                kr_add_res<__half, 4>(e, (size_t)row * 16 + 4 * t, v);
                kr_stv<4>(y + (size_t)row * 16 + 4 * t, v);
            }
        }
    }
}

/* The tensor-core narrow path (above) for an f16 layer of 16 -> 16 channels with at least
 * NARROW_MMA_MIN_PIXELS pixels per item (the excitations' 1x1 layers keep conv_narrow), its
 * half weights (op->w16), float bias, 8-byte aligned rows, compute 7.5 or newer; 0 when it does
 * not apply. Chosen by shape only, never by batch. */
template <typename T> static int try_narrow_mma(const kr_cuda_op *, const conv_shape &) { return 0; }
template <> int try_narrow_mma<__half>(const kr_cuda_op *op, const conv_shape &s)
{
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    if (!s.pointwise || s.K != 16 || s.oc != 16 || s.oh * s.ow < NARROW_MMA_MIN_PIXELS ||
        !op->w16 || !op->caps || op->caps->major * 10 + op->caps->minor < 75 ||
        (bt && (!bt->data || bt->dtype != KR_DTYPE_F32)) || !kr_aligned(op->in[0], 8) ||
        !kr_aligned(op->out, 8) || !kr_aligned(op->w16, 8) ||
        (op->residual && !kr_aligned(op->residual, 8)))
        return 0;
    narrow_bias16 p;
    const float *bias = bt ? (const float *)bt->data : NULL;
    for (int q = 0; q < 4; q++)
        p.b[q] = bias ? make_float4(bias[4 * q], bias[4 * q + 1], bias[4 * q + 2], bias[4 * q + 3])
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const long long M = s.M;
    const long long warps = (M + 16 * NARROW_MMA_TILES - 1) / (16 * NARROW_MMA_TILES);
    long long blocks = (warps + 3) / 4;
    if (blocks > NARROW_MMA_MAX_BLOCKS)
        blocks = NARROW_MMA_MAX_BLOCKS;
    conv_narrow_mma<<<(unsigned)blocks, 128, 0, (cudaStream_t)op->stream>>>(
        (const __half *)op->in[0], (const __half *)op->w16, p, (__half *)op->out, M,
        kr_make_epilogue(op, 1));
    return 1;
}

/* The narrow pointwise path (see the file comment): weights of one launch within 2 KB. */
template <typename T> static int try_narrow(const kr_cuda_op *op, const conv_shape &s)
{
    const kr_tensor *wt = kr_in_t(op, 1);
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    if (!s.pointwise || s.K > 32 || s.K % 8 || s.oc % 4 || !wt->data || wt->dtype != KR_DTYPE_F32 ||
        (bt && (!bt->data || bt->dtype != KR_DTYPE_F32)) || !kr_aligned(op->out, 4 * sizeof(T)) ||
        !kr_aligned(op->in[0], 4 * sizeof(T)) ||
        (op->residual && !kr_aligned(op->residual, 4 * sizeof(T))))
        return 0;
    if (try_narrow_mma<T>(op, s))
        return 1;
    return launch_narrow<T, 8, 32>(op, s) || launch_narrow<T, 8, 24>(op, s) ||
           launch_narrow<T, 8, 16>(op, s) || launch_narrow<T, 8, 8>(op, s) ||
           launch_narrow<T, 16, 32>(op, s) ||
           launch_narrow<T, 16, 24>(op, s) || launch_narrow<T, 16, 16>(op, s) ||
           launch_narrow<T, 16, 8>(op, s) || launch_narrow<T, 24, 16>(op, s) ||
           launch_narrow<T, 24, 8>(op, s) || launch_narrow<T, 32, 16>(op, s) ||
           launch_narrow<T, 32, 8>(op, s);
}

/*
 * Wider pointwise layers with few input channels (8 to 32 in, a multiple of 8 and at most 256
 * out: the 16 -> 72, 24 -> 88 and 24 -> 96 expansions of the MobileNet blocks). The GEMM tile
 * computed them at 1/7 of their memory floor: one k-step per tile, and 72 outputs padded to a
 * 128-wide tile. Here a block of 32 x G threads takes 32 pixels; warp g computes output
 * channels [8g, 8g + 8) for its lane's pixel from the K inputs held in registers, with the
 * layer's weights staged once per block in shared memory (every lane of a warp reads the same
 * weight: a broadcast). The G warps of a block write the whole output rows of its pixels.
 */
template <typename T, int K>
__global__ void __launch_bounds__(1024) conv_pw_groups(const T *__restrict__ x,
                                                       const float *__restrict__ w,
                                                       const float *__restrict__ bias,
                                                       T *__restrict__ y, int M, int N,
                                                       kr_epilogue e)
{
    extern __shared__ float sw[]; /* [N][K] weights, then N biases */
    const int tid = threadIdx.y * 32 + threadIdx.x, nt = 32 * blockDim.y;
    for (int i = tid; i < N * K; i += nt)
        sw[i] = w[i];
    for (int i = tid; i < N; i += nt)
        sw[N * K + i] = bias ? bias[i] : 0.0f;
    __syncthreads();
    const int n0 = threadIdx.y * 8;
    const float *wg = sw + n0 * K;
    for (int m = blockIdx.x * 32 + threadIdx.x; m < M; m += gridDim.x * 32) {
        float in[K];
#pragma unroll
        for (int k = 0; k < K; k += 4)
            kr_ldv<4>(x + (size_t)m * K + k, in + k);
        float acc[8];
#pragma unroll
        for (int n = 0; n < 8; n++)
            acc[n] = sw[N * K + n0 + n];
#pragma unroll
        for (int k = 0; k < K; k++)
#pragma unroll
            for (int n = 0; n < 8; n++)
                acc[n] = fmaf(in[k], wg[n * K + k], acc[n]);
#pragma unroll
        for (int n = 0; n < 8; n++)
            acc[n] = kr_apply(e, acc[n]);
        size_t o = (size_t)m * N + n0;
        kr_add_res<T, 4>(e, o, acc);
        kr_add_res<T, 4>(e, o + 4, acc + 4);
        kr_stv<4>(y + o, acc);
        kr_stv<4>(y + o + 4, acc + 4);
    }
}

template <typename T, int K> static int launch_pw_groups(const kr_cuda_op *op, const conv_shape &s)
{
    if (s.K != K)
        return 0;
    dim3 block(32, (unsigned)(s.oc / 8));
    size_t blocks = ((size_t)s.M + 31) / 32;
    unsigned grid = (unsigned)(blocks < 16384 ? blocks : 16384);
    size_t smem = ((size_t)s.oc * K + (size_t)s.oc) * sizeof(float);
    conv_pw_groups<T, K><<<grid, block, smem, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out,
        s.M, s.oc, kr_make_epilogue(op, 1));
    return 1;
}

template <typename T> static int try_pw_groups(const kr_cuda_op *op, const conv_shape &s)
{
    /* half precision only: in float this kernel measured 8x slower than the GEMM on the same
     * layers (selfie's 16 -> 72 at batch 256: 3.68 ms against 0.45 ms; not understood), in
     * half 0.34 ms against 0.44 ms (docs/notes/cuda-per-node-kernels.md) */
    if (sizeof(T) != 2 || !s.pointwise || s.K > 32 || s.K % 8 || s.oc % 8 || s.oc > 256 ||
        !kr_aligned(op->out, 4 * sizeof(T)) || !kr_aligned(op->in[0], 4 * sizeof(T)) ||
        (op->residual && !kr_aligned(op->residual, 4 * sizeof(T))))
        return 0;
    return launch_pw_groups<T, 8>(op, s) || launch_pw_groups<T, 16>(op, s) ||
           launch_pw_groups<T, 24>(op, s) || launch_pw_groups<T, 32>(op, s);
}

/*
 * Pointwise layers whose input and output rows fit a block's shared memory (K and N multiples of
 * 4, up to 256), where it pays (PW_TILE_MAX_KN, PW_TILE_ANY_KN_K, PW_TILE_MIN_TILES: tuning.h).
 * A block takes a tile of P whole pixel rows: it copies the tile's P x K inputs (one contiguous
 * run of the NHWC tensor) into shared memory with vector loads, then thread (tx, ty) computes
 * channels [CPT tx, CPT tx + CPT) of pixels ty, ty + rows, ... (R of them): per k, one input
 * per pixel and CPT weights from the transposed [K][N] weights in shared memory, R x CPT
 * multiply-adds. Threads with consecutive tx write consecutive pieces of one output row, so a
 * warp stores (and reads the residual of) whole rows: fully coalesced. The GEMM tile wrote
 * these layers as column tiles of 16 to 64 channels and re-read the input per tile, and the
 * warp-per-8-outputs kernel above stored 16-byte pieces at the row stride; both took 3 to 4
 * times cuBLAS's time for the same GEMM (bench/bench_nn_vendor.c,
 * docs/notes/cuda-per-node-kernels.md, docs/notes/cuda-vendor-libraries.md). Whether a
 * layer takes this path depends on its tile count, so on the batch: the sum is formed in the
 * order of the kernel the layer gets otherwise (BL: from 0 with the bias added last, as the
 * GEMM; else from the bias, as conv_pw_groups), so that an item's result is the same bit for
 * bit at every batch size. Blocks loop over tiles, so the weights are staged once per block.
 */
template <typename T, int CPT, int R, bool BL>
__global__ void __launch_bounds__(256) conv_pw_tile(const T *__restrict__ x,
                                                    const float *__restrict__ w,
                                                    const float *__restrict__ bias,
                                                    T *__restrict__ y, int M, int K, int N,
                                                    int rows, int tiles, kr_epilogue e)
{
    extern __shared__ __align__(16) float sm[];
    float *ws = sm;       /* [K][N] */
    float *bs = ws + K * N; /* [N] (N a multiple of 4: xs stays 16-byte aligned) */
    T *xs = reinterpret_cast<T *>(bs + N); /* [P][ld] */
    const int tid = threadIdx.x, tpr = N / CPT, P = rows * R;
    const int ld = K + (sizeof(T) == 2 ? 2 : 1); /* an odd number of 4-byte words per row */
    for (int i = tid; i < K * N; i += 256)
        ws[(i % K) * N + i / K] = w[i];
    for (int i = tid; i < N; i += 256)
        bs[i] = bias ? bias[i] : 0.0f;
    const int tx = tid % tpr, ty = tid / tpr, n0 = tx * CPT;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int m0 = tile * P;
        const int here = M - m0 < P ? M - m0 : P;
        __syncthreads(); /* the weights are in; the previous tile's inputs are read */
        for (int i = tid; i < here * K / 4; i += 256) {
            const int p = 4 * i / K, k = 4 * i % K;
            float v[4];
            kr_ldv<4>(x + (size_t)(m0 + p) * K + k, v);
#pragma unroll
            for (int j = 0; j < 4; j++)
                kr_st(xs + p * ld + k + j, v[j]);
        }
        __syncthreads();
        if (ty >= rows)
            continue;
        float acc[R][CPT];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < CPT; c++)
                acc[r][c] = BL ? 0.0f : bs[n0 + c];
#pragma unroll 4
        for (int k = 0; k < K; k++) {
            float wv[CPT];
#pragma unroll
            for (int c = 0; c < CPT; c += 4)
                kr_ldv<4>(ws + k * N + n0 + c, wv + c);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float xv = kr_ld(xs + (ty + r * rows) * ld + k);
#pragma unroll
                for (int c = 0; c < CPT; c++)
                    acc[r][c] = fmaf(xv, wv[c], acc[r][c]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int p = ty + r * rows;
            if (p >= here)
                continue;
            const size_t o = (size_t)(m0 + p) * N + n0;
#pragma unroll
            for (int c = 0; c < CPT; c += 4) {
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    v[j] = kr_apply(e, BL ? acc[r][c + j] + bs[n0 + c + j] : acc[r][c + j]);
                kr_add_res<T, 4>(e, o + c, v);
                kr_stv<4>(y + o + c, v);
            }
        }
    }
}

/* Shared memory of conv_pw_tile for @p rows x @p r pixels. */
template <typename T> static size_t pw_tile_smem(int K, int N, int rows, int r)
{
    const int ld = K + (sizeof(T) == 2 ? 2 : 1);
    return ((size_t)K * N + (size_t)N) * sizeof(float) + (size_t)rows * r * ld * sizeof(T);
}

/* Launches the tile path; 0 when the device refuses its shared memory (the caller falls back). */
template <typename T, int CPT, int R, bool BL>
static int launch_pw_tile(const kr_cuda_op *op, const conv_shape &s)
{
    const int rows = 256 / (s.oc / CPT), P = rows * R;
    const size_t smem = pw_tile_smem<T>(s.K, s.oc, rows, R);
    const int tiles = (s.M + P - 1) / P;
    const int grid = tiles < 1024 ? tiles : 1024;
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(conv_pw_tile<T, CPT, R, BL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem) != cudaSuccess)
        return 0;
    conv_pw_tile<T, CPT, R, BL><<<(unsigned)grid, 256, smem, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out,
        s.M, s.K, s.oc, rows, tiles, kr_make_epilogue(op, 1));
    return 1;
}

/* launch_pw_tile with @p r (4, 2 or 1) pixels per thread. */
template <typename T, int CPT, bool BL>
static int launch_pw_tile_r(const kr_cuda_op *op, const conv_shape &s, int r)
{
    return r == 4   ? launch_pw_tile<T, CPT, 4, BL>(op, s)
           : r == 2 ? launch_pw_tile<T, CPT, 2, BL>(op, s)
                    : launch_pw_tile<T, CPT, 1, BL>(op, s);
}

/* The tile path (above) for a pointwise layer where it pays (PW_TILE_MAX_KN, PW_TILE_ANY_KN_K,
 * PW_TILE_MIN_TILES):
 * 8 channels per thread from 48 outputs (4 below), 4 pixels per thread, fewer where the tile's
 * shared memory would pass 100 KB. */
template <typename T> static int try_pw_tile(const kr_cuda_op *op, const conv_shape &s)
{
    const kr_tensor *wt = kr_in_t(op, 1);
    const kr_tensor *bt = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    if (!s.pointwise || s.K % 4 || s.oc % 4 || s.K > 256 || s.oc > 256 || !wt->data ||
        wt->dtype != KR_DTYPE_F32 || (bt && (!bt->data || bt->dtype != KR_DTYPE_F32)) ||
        !kr_aligned(op->out, 4 * sizeof(T)) || !kr_aligned(op->in[0], 4 * sizeof(T)) ||
        (op->residual && !kr_aligned(op->residual, 4 * sizeof(T))))
        return 0;
    if (s.K * s.oc > PW_TILE_MAX_KN && s.K > PW_TILE_ANY_KN_K)
        return 0;
    const int cpt = s.oc % 8 == 0 && s.oc >= 48 ? 8 : 4, rows = 256 / (s.oc / cpt);
    /* PW_TILE_MAX_SMEM, or less where the device (or the emulated class) allows a block less */
    size_t max_smem = PW_TILE_MAX_SMEM;
    if (!op->caps)
        return 0;
    if (op->caps->smem_block_optin < max_smem)
        max_smem = op->caps->smem_block_optin;
    int r = 4;
    while (r > 1 && pw_tile_smem<T>(s.K, s.oc, rows, r) > max_smem)
        r /= 2;
    if (pw_tile_smem<T>(s.K, s.oc, rows, r) > max_smem ||
        (s.M + rows * r - 1) / (rows * r) < PW_TILE_MIN_TILES)
        return 0;
    /* the sum in the order of the kernel this layer gets otherwise (conv_pw_groups: the bias
     * first; the GEMM: the bias last), so that an item's result does not depend on which of the
     * two runs (keyer/nn.h) */
    const bool bl = !(sizeof(T) == 2 && s.K <= 32 && s.K % 8 == 0 && s.oc % 8 == 0);
    if (cpt == 8)
        return bl ? launch_pw_tile_r<T, 8, true>(op, s, r) : launch_pw_tile_r<T, 8, false>(op, s, r);
    return bl ? launch_pw_tile_r<T, 4, true>(op, s, r) : launch_pw_tile_r<T, 4, false>(op, s, r);
}

template <typename T, int BN> static void launch_bn(const kr_cuda_op *op, const conv_shape &s)
{
    constexpr int BM = 4096 / BN;
    dim3 grid((unsigned)((s.M + BM - 1) / BM), (unsigned)((s.oc + BN - 1) / BN));
    conv_gemm<T, BN><<<grid, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out, s,
        kr_make_epilogue(op, 1));
}

template <typename T> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    if (op->x_f32) /* reads the float graph input: kr_cuda_pernode_bind_inputs chose a stem, in
                    * the order below */
        return kr_cuda_conv_2d_stem_fits(op) ? kr_cuda_conv_2d_stem(op)
                                             : kr_cuda_conv_2d_stem_half(op);
    if (op->gcat.n) /* a folded concatenation of one-channel maps (fusion.h): conv_2d_one.cu */
        return kr_cuda_conv_2d_one_gather(op);
    if (p->groups > 1) /* grouped (ONNX): its own direct kernel, conv_2d_grouped.cu */
        return kr_cuda_conv_2d_grouped(op);
    if (kr_cuda_conv_2d_one_fits(op)) /* f16 ONNX layers of one output channel: conv_2d_one.cu */
        return kr_cuda_conv_2d_one(op);
    if (kr_cuda_conv_2d_tc_fits(op)) /* f16 on the tensor cores, compute 8.0+: conv_2d_tc.cu */
        return kr_cuda_conv_2d_tc(op);
    if (kr_cuda_conv_2d_mma_fits(op)) /* f16 ONNX layers on WMMA (compute 7.x), conv_2d_mma.cu */
        return kr_cuda_conv_2d_mma(op);
    if (kr_cuda_conv_2d_stem_fits(op)) /* ONNX RGB stems in one launch: conv_2d_stem.cu */
        return kr_cuda_conv_2d_stem(op);
    if (kr_cuda_conv_2d_stem_half_fits(op)) /* f16 TFLite 3x3/2 stems -> 16: conv_2d_stem.cu */
        return kr_cuda_conv_2d_stem_half(op);
    if (kr_cuda_conv_2d_pw_mma_fits(op)) /* f16 TFLite 1x1 layers, tensor cores: conv_2d_pw_mma.cu */
        return kr_cuda_conv_2d_pw_mma(op);
    conv_shape s;
    s.n = kr_dim(op, xt, 0);
    s.ih = xt->dims[1], s.iw = xt->dims[2], s.ic = xt->dims[3];
    s.oh = yt->dims[1], s.ow = yt->dims[2], s.oc = yt->dims[3];
    s.kh = wt->dims[1], s.kw = wt->dims[2];
    s.sh = p->stride_h, s.sw = p->stride_w, s.dh = p->dilation_h > 0 ? p->dilation_h : 1;
    s.dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s.pt = p->pad_top, s.pl = p->pad_left;
    s.M = s.n * s.oh * s.ow;
    s.K = s.kh * s.kw * s.ic;
    s.pointwise = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 && s.pl == 0 &&
                  s.oh == s.ih && s.ow == s.iw;
    if (try_stem<T>(op, s) || try_narrow<T>(op, s) || try_pw_tile<T>(op, s) ||
        try_pw_groups<T>(op, s)) {
        /* launched */
    } else if (s.oc <= 16) {
        launch_bn<T, 16>(op, s);
    } else if (s.oc <= 32) {
        launch_bn<T, 32>(op, s);
    } else {
        launch_bn<T, 64>(op, s);
    }
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_conv_2d(const kr_cuda_op *op) { return KR_BY_TYPE(launch, op); }
