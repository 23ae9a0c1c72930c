/*
 * DEPTHWISE_CONV_2D: y[b,oy,ox,o] = act(bias[o] + sum_{ky,kx} x[b,iy,ix,o/M] * W[0,ky,kx,o]),
 * M the depth multiplier; taps outside the input are skipped. Channel fastest so that a warp
 * reads consecutive channels of one pixel (coalesced); the taps of neighbouring pixels are served
 * by L1/L2. With multiplier 1 and channels a multiple of 4, a thread computes 4 consecutive
 * channels with vector loads and one index computation; otherwise one output element. In half
 * precision 3x3 and 5x5 layers of stride 1 or 2 and an even channel count take dw_half (4
 * channels of 4 pixels per thread for multiples of 4, else 2: BlazeFace's 42), except 5x5
 * stride 1 with a multiple of 4 channels, which measured faster on dw_rows. Float
 * accumulation from the bias, taps outside the input skipped (the schedules' orders:
 * ops/depthwise_conv_2d.cuh; every kernel here sums alike), fused epilogue.
 */
#include "nn/cuda/ops/depthwise_conv_2d.cuh"

struct dw_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl, mult;
};

/* V channels per thread (1, or 4 with multiplier 1). */
template <typename T, int V, typename I>
__global__ void dw_kernel(const T *__restrict__ x, const float *__restrict__ w,
                          const float *__restrict__ bias, T *__restrict__ y, I total, dw_shape s,
                          kr_epilogue e)
{
    I groups = total / V;
    int ocv = s.oc / V;
    for (I g = blockIdx.x * (I)blockDim.x + threadIdx.x; g < groups;
         g += (I)gridDim.x * blockDim.x) {
        int oy, ox, o;
        const I b = kr_nhwc_split(g, ocv, s.ow, s.oh, &oy, &ox, &o);
        o *= V;
        int c = V == 1 ? o / s.mult : o;
        float acc[V];
        if (bias)
            kr_ldv<V>(bias + o, acc);
        else
            for (int k = 0; k < V; k++)
                acc[k] = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = kr_conv_in(oy, s.sh, s.pt, ky, s.dh);
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            const T *row = x + ((b * s.ih + iy) * s.iw) * s.ic + c;
            const float *wrow = w + (I)ky * s.kw * s.oc + o;
            for (int kx = 0; kx < s.kw; kx++) {
                int ix = kr_conv_in(ox, s.sw, s.pl, kx, s.dw);
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                float xv[V], wv[V];
                kr_ldv<V>(row + (I)ix * s.ic, xv);
                kr_ldv<V>(wrow + kx * s.oc, wv);
                kr_dw_fma<V>(acc, xv, wv);
            }
        }
#pragma unroll
        for (int k = 0; k < V; k++)
            acc[k] = kr_apply(e, acc[k]);
        kr_add_res<T, V>(e, g * V, acc);
        kr_stv<V>(y + g * V, acc);
    }
}

/*
 * Stride 1, no dilation, multiplier 1, a KW x KW kernel: a thread computes 4 channels of PX
 * neighbouring output pixels of one row, so each input column of the window is loaded once
 * for all of them (PX + KW - 1 loads per kernel row instead of PX * KW) and each weight once.
 */
template <typename T, int KW, int PX, typename I>
__global__ void dw_rows(const T *__restrict__ x, const float *__restrict__ w,
                        const float *__restrict__ bias, T *__restrict__ y, I groups, dw_shape s,
                        kr_epilogue e)
{
    const int ocv = s.oc / 4, owb = (s.ow + PX - 1) / PX;
    for (I g = blockIdx.x * (I)blockDim.x + threadIdx.x; g < groups;
         g += (I)gridDim.x * blockDim.x) {
        int o = (int)(g % ocv) * 4;
        I p = g / ocv;
        int ox0 = (int)(p % owb) * PX;
        I q = p / owb;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
        float acc[PX][4];
        float b4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (bias)
            kr_ldv<4>(bias + o, b4);
#pragma unroll
        for (int px = 0; px < PX; px++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[px][c] = b4[c];
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = oy - s.pt + ky;
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            const T *row = x + ((b * s.ih + iy) * s.iw) * s.ic + o;
            float wv[KW][4];
#pragma unroll
            for (int kx = 0; kx < KW; kx++)
                kr_ldv<4>(w + (I)(ky * KW + kx) * s.oc + o, wv[kx]);
#pragma unroll
            for (int j = 0; j < PX + KW - 1; j++) {
                int ix = ox0 - s.pl + j;
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                float xv[4];
                kr_ldv<4>(row + (I)ix * s.ic, xv);
#pragma unroll
                for (int px = 0; px < PX; px++) {
                    const int kx = j - px;
                    if (kx >= 0 && kx < KW)
                        kr_dw_fma<4>(acc[px], xv, wv[kx]);
                }
            }
        }
#pragma unroll
        for (int px = 0; px < PX; px++) {
            if (ox0 + px >= s.ow)
                break;
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[px][c] = kr_apply(e, acc[px][c]);
            I idx = ((b * s.oh + oy) * s.ow + ox0 + px) * s.oc + o;
            kr_add_res<T, 4>(e, idx, acc[px]);
            kr_stv<4>(y + idx, acc[px]);
        }
    }
}

template <typename T, int KW, typename I>
static void launch_rows(const kr_cuda_op *op, const dw_shape &s, kr_epilogue e)
{
    constexpr int PX = 4;
    size_t groups = kr_elems(op, kr_out_t(op)) / (size_t)s.ow / 4 * (size_t)((s.ow + PX - 1) / PX);
    dw_rows<T, KW, PX, I><<<kr_blocks(groups, 128), 128, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out,
        (I)groups, s, e);
}

/* V (8, 4 or 2) floats of @p p (16- or 8-byte aligned: dw_half's weights and bias), as two
 * 16-byte loads, one 16-byte load or one 8-byte load. */
template <int V> __device__ __forceinline__ void dwh_ldf(const float *p, float *v)
{
    if (V == 8) {
        const float4 a = __ldg(reinterpret_cast<const float4 *>(p));
        const float4 b = __ldg(reinterpret_cast<const float4 *>(p) + 1);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
        v[7] = b.w;
    } else if (V == 4) {
        const float4 a = __ldg(reinterpret_cast<const float4 *>(p));
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    } else {
        const float2 a = __ldg(reinterpret_cast<const float2 *>(p));
        v[0] = a.x, v[1] = a.y;
    }
}

/*
 * Division of an unsigned n < 2^31 by a divisor d fixed at launch (1 <= d < 2^31), without the
 * division instruction sequence: with l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1
 * (it fits in 32 bits), n / d = (umulhi(n, m) + n) >> l (Granlund and Montgomery's method for
 * a divisor known in advance; the sum cannot overflow as umulhi(n, m) <= n < 2^31). dw_half's
 * three divisions per thread were a 32-bit division sequence each.
 */
struct dw_div {
    unsigned d, m, l;
};
static inline dw_div dw_div_make(unsigned d)
{
    unsigned l = 0;
    while (l < 31 && (1u << l) < d)
        l++;
    const unsigned long long m = ((1ull << 32) * ((1ull << l) - d)) / d + 1;
    return dw_div{d, (unsigned)m, l};
}
__device__ __forceinline__ unsigned dw_divide(unsigned n, const dw_div &q)
{
    return (__umulhi(n, q.m) + n) >> q.l;
}

/* The divisors of dw_half's walk: units (V channels of PX pixels) per output row, channel
 * groups per pixel, output rows per item. */
struct dw_walk {
    dw_div per_row, ocv, oh;
};

/*
 * Half precision, multiplier 1, no dilation, a KW x KW kernel, stride S (1 or 2): a thread
 * computes V channels (4: one 8-byte access per pixel, every channel count a multiple of 4;
 * 2: 4-byte ones, for channel counts that are even but no multiple of 4: BlazeFace's 28, 36,
 * 42) of PX neighbouring output pixels of one row, each input column of the window loaded once
 * for all of them. The units (items x output rows x pixel groups x channel groups, channels
 * fastest as dw_rows walks them) are numbered flat, so that no block has idle threads at the
 * end of a row (a row of 64 x 64 x 72 holds 144 units); the three divisions that split a unit's
 * number are multiplications (dw_div). The window's rows are unrolled (KW is known), so the
 * loads of every row can be in flight together; a tap outside the input is a predicated load
 * and multiply-add that does not happen.
 * The same sums as dw_kernel and dw_rows: from the bias, the taps in (ky, kx) order, taps
 * outside the input skipped, one fmaf per tap and channel; then the epilogue and residual as
 * kr_add_res adds it.
 */
template <int KW, int S, int PX, int V, typename I>
__global__ void __launch_bounds__(128) dw_half(const __half *__restrict__ x,
                                               const float *__restrict__ w,
                                               const float *__restrict__ bias,
                                               __half *__restrict__ y, unsigned units,
                                               dw_shape s, dw_walk k, kr_epilogue e)
{
    constexpr int NJ = (PX - 1) * S + KW; /* input columns of the PX windows */
    for (unsigned u = blockIdx.x * blockDim.x + threadIdx.x; u < units;
         u += gridDim.x * blockDim.x) {
        const unsigned row = dw_divide(u, k.per_row), i = u - row * k.per_row.d;
        const unsigned og = dw_divide(i, k.ocv), b = dw_divide(row, k.oh);
        const int o = (int)(i - og * k.ocv.d) * V, ox0 = (int)og * PX;
        const int oy = (int)(row - b * k.oh.d);
        float acc[PX][V], b0[V];
        if (bias)
            dwh_ldf<V>(bias + o, b0);
        else
#pragma unroll
            for (int c = 0; c < V; c++)
                b0[c] = 0.0f;
#pragma unroll
        for (int c = 0; c < V; c++)
#pragma unroll
            for (int px = 0; px < PX; px++)
                acc[px][c] = b0[c];
        const __half *xb = x + (I)b * s.ih * s.iw * s.ic + o;
#pragma unroll
        for (int ky = 0; ky < KW; ky++) {
            const int iy = oy * S - s.pt + ky;
            const bool row_in = (unsigned)iy < (unsigned)s.ih;
            const __half *xr = xb + (I)(row_in ? iy : 0) * s.iw * s.ic;
            float wv[KW][V];
#pragma unroll
            for (int kx = 0; kx < KW; kx++)
                dwh_ldf<V>(w + (ky * KW + kx) * s.oc + o, wv[kx]);
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                const int ix = ox0 * S - s.pl + j;
                if (!row_in || (unsigned)ix >= (unsigned)s.iw)
                    continue;
                float xv[V];
                kr_ldv<V>(xr + (I)ix * s.ic, xv);
#pragma unroll
                for (int px = 0; px < PX; px++) {
                    const int kx = j - px * S;
                    if (kx >= 0 && kx < KW)
#pragma unroll
                        for (int c = 0; c < V; c++)
                            acc[px][c] = fmaf(xv[c], wv[kx][c], acc[px][c]);
                }
            }
        }
#pragma unroll
        for (int px = 0; px < PX; px++) {
            if (ox0 + px >= s.ow)
                break;
            const I idx = ((I)row * s.ow + ox0 + px) * s.oc + o;
            float v[V];
#pragma unroll
            for (int c = 0; c < V; c++)
                v[c] = kr_apply(e, acc[px][c]);
            kr_add_res<__half, V>(e, idx, v);
            kr_stv<V>(y + idx, v);
        }
    }
}

/* Output pixels per dw_half thread. */
constexpr int DWH_PX = 4;

template <int KW, int S, int V, typename I>
static void launch_half(const kr_cuda_op *op, const dw_shape &s, kr_epilogue e, unsigned units)
{
    constexpr int PX = DWH_PX;
    const unsigned per_row = (unsigned)((s.ow + PX - 1) / PX * (s.oc / V));
    const dw_walk k = {dw_div_make(per_row), dw_div_make((unsigned)(s.oc / V)),
                       dw_div_make((unsigned)s.oh)};
    dw_half<KW, S, PX, V, I><<<kr_blocks(units, 128), 128, 0, (cudaStream_t)op->stream>>>(
        (const __half *)op->in[0], (const float *)op->in[1], (const float *)op->in[2],
        (__half *)op->out, units, s, k, e);
}

/* dw_half where it applies (half, multiplier 1, no dilation, a 3x3 or 5x5 kernel, stride 1 or
 * 2 on both axes, channels even, aligned accesses: 8 bytes for 4 channels, 4 for 2; the float
 * weights and bias 16 or 8; fewer than 2^31 units; not 5x5 stride 1 with 4 channels); 0 when
 * it does not. */
template <typename I> static int try_half(const kr_cuda_op *op, const dw_shape &s, kr_epilogue e)
{
    /* 4 channels per thread for multiples of 4 (dw_rows' and dw_kernel's unit, their f16
     * layers before session 12), 2 for the other even counts. Session 9 measured 8 channels
     * per thread (16-byte accesses) slower than dw_rows and dw_kernel on every shape of selfie
     * and face-short (H200, f16, batch 256: the 128 x 128 x 16 layer + ADD 0.158 -> 0.173 ms,
     * 64 x 64 x 24 0.067 -> 0.086; twice the registers, and idle threads at the rows' ends),
     * 2 channels faster on BlazeFace's 42 (16 x 16 x 42: 0.066 -> under 0.024 ms) */
    const int v = s.oc % 4 == 0 ? 4 : s.oc % 2 == 0 ? 2 : 0;
    /* 5x5 stride 1 with 4 channels stays on dw_rows: session 12 measured dw_half (82
     * registers) slower there (ncu, H200, selfie f16 b256: 16 x 16 x 128 46.9 -> 49.7 and
     * 46.5 -> 50.0 us, 16 x 16 x 96 40.7 -> 40.4 and 40.4 -> 40.2), faster at stride 2 (64 x 64
     * x 72 -> 32 x 32 129.1 -> 79.1, 128 x 128 x 16 -> 64 x 64 106.0 -> 73.4, 5x5 32 x 32 x 96
     * -> 16 x 16 91.5 -> 57.1) and on every 3x3 stride-1 layer but one (by 0.3-3.2 us) */
    if (v == 4 && s.kw == 5 && s.sh == 1)
        return 0;
    const size_t al = 2 * (size_t)v, wal = 4 * (size_t)v;
    const float *bias = (const float *)op->in[2];
    if (!op->f16 || !v || s.mult != 1 || s.dh != 1 || s.dw != 1 || s.kh != s.kw ||
        (s.kw != 3 && s.kw != 5) || s.sh != s.sw || (s.sh != 1 && s.sh != 2) ||
        !kr_aligned(op->in[0], al) || !kr_aligned(op->out, al) ||
        !kr_aligned(op->in[1], wal) || (bias && !kr_aligned(bias, wal)) ||
        (op->residual && !kr_aligned(op->residual, al)))
        return 0;
    const size_t rows = kr_elems(op, kr_out_t(op)) / ((size_t)s.ow * s.oc);
    const size_t units = rows * (size_t)((s.ow + DWH_PX - 1) / DWH_PX) * (size_t)(s.oc / v);
    if (units >= 0x80000000u)
        return 0;
#define DWH(KW, S, V)                                                                             \
    if (s.kw == KW && s.sh == S && v == V) {                                                      \
        launch_half<KW, S, V, I>(op, s, e, (unsigned)units);                                      \
        return 1;                                                                                 \
    }
    DWH(3, 1, 4) DWH(3, 2, 4) DWH(5, 2, 4)
    DWH(3, 1, 2) DWH(3, 2, 2) DWH(5, 1, 2) DWH(5, 2, 2)
#undef DWH
    return 0;
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    dw_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2], yt->dims[3],
                  wt->dims[1], wt->dims[2], p->stride_h, p->stride_w, p->dilation_h,
                  p->dilation_w, p->pad_top, p->pad_left, p->depth_multiplier > 0 ? p->depth_multiplier : 1};
    size_t total = kr_elems(op, yt);
    cudaStream_t st = (cudaStream_t)op->stream;
    const T *x = (const T *)op->in[0];
    const float *w = (const float *)op->in[1], *bias = (const float *)op->in[2];
    int vec = s.mult == 1 && s.oc % 4 == 0 && kr_aligned(x, 4 * sizeof(T)) &&
              kr_aligned(op->out, 4 * sizeof(T)) && kr_aligned(w, 16) &&
              (!op->residual || kr_aligned(op->residual, 4 * sizeof(T))) &&
              (!bias || kr_aligned(bias, 16));
    kr_epilogue e = kr_make_epilogue(op, 1);
    if (try_half<I>(op, s, e))
        return (int)cudaGetLastError();
    int rows = vec && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.kh == s.kw &&
               (s.kw == 3 || s.kw == 5);
    if (rows && s.kw == 3)
        launch_rows<T, 3, I>(op, s, e);
    else if (rows)
        launch_rows<T, 5, I>(op, s, e);
    else if (vec)
        dw_kernel<T, 4, I><<<kr_blocks(total / 4, 256), 256, 0, st>>>(x, w, bias, (T *)op->out,
                                                                       total, s, e);
    else
        dw_kernel<T, 1, I><<<kr_blocks(total, 256), 256, 0, st>>>(x, w, bias, (T *)op->out,
                                                                   total, s, e);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_depthwise_conv_2d(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
