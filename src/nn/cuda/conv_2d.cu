/*
 * CONV_2D as an implicit GEMM: Y[m, n] = act(bias[n] + sum_k X'[m, k] * W[n, k]) with
 * m = (b, oy, ox), n = output channel, k = (ky, kx, ic) - exactly the OHWI weight layout, so
 * weights are used as stored. X'[m, k] is gathered from the NHWC input on the fly (zero outside
 * the input); a 1x1, stride-1, unpadded convolution reads X directly (the pointwise fast path,
 * most of the MACs in the MediaPipe models).
 *
 * Tiling: a 256-thread block computes a BM x BN tile of Y, stepping K by 16 through shared
 * memory; each thread accumulates a 4 x 4 sub-tile in float registers. BN follows the layer's
 * output channels (16, 32 or 64; BM = 4096 / BN) so that the narrow layers of the MediaPipe
 * models (16 or 24 channels at the highest resolutions) do not compute a 64-wide tile of which
 * three quarters is thrown away. Loads are coalesced along k (the innermost, contiguous axis of
 * both X and W); shared-memory rows are padded by 4 floats against bank conflicts. Half-precision
 * instances load __half and convert in the shared-memory fill; accumulation is float; the
 * epilogue adds the bias, applies the fused clamp and the folded activation, and stores T.
 */
#include "nn/cuda/common.cuh"

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
    int iy = oy * s.sh - s.pt + ky * s.dh, ix = ox * s.sw - s.pl + kx * s.dw;
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
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
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
            if (n < s.oc)
                kr_st(y + (size_t)m * s.oc + n, kr_apply(e, acc[i][j] + (bias ? kr_ld(bias + n) : 0.0f)));
        }
    }
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
    conv_shape s;
    s.n = kr_dim(op, xt, 0);
    s.ih = xt->dims[1], s.iw = xt->dims[2], s.ic = xt->dims[3];
    s.oh = yt->dims[1], s.ow = yt->dims[2], s.oc = yt->dims[3];
    s.kh = wt->dims[1], s.kw = wt->dims[2];
    s.sh = p->stride_h, s.sw = p->stride_w, s.dh = p->dilation_h, s.dw = p->dilation_w;
    s.pt = p->pad_top, s.pl = p->pad_left;
    s.M = s.n * s.oh * s.ow;
    s.K = s.kh * s.kw * s.ic;
    s.pointwise = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 && s.pl == 0 &&
                  s.oh == s.ih && s.ow == s.iw;
    if (s.oc <= 16) {
        launch_bn<T, 16>(op, s);
    } else if (s.oc <= 32) {
        launch_bn<T, 32>(op, s);
    } else {
        launch_bn<T, 64>(op, s);
    }
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_conv_2d(const kr_cuda_op *op) { return KR_BY_TYPE(launch, op); }
