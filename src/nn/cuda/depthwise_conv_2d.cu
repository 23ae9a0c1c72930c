/*
 * DEPTHWISE_CONV_2D: y[b,oy,ox,o] = act(bias[o] + sum_{ky,kx} x[b,iy,ix,o/M] * W[0,ky,kx,o]),
 * M the depth multiplier; taps outside the input are skipped. Channel fastest so that a warp
 * reads consecutive channels of one pixel (coalesced); the taps of neighbouring pixels are served
 * by L1/L2. With multiplier 1 and channels a multiple of 4 (every shipped model), a thread
 * computes 4 consecutive channels with vector loads and one index computation; otherwise one
 * output element. Float accumulation from the bias, taps outside the input skipped (the
 * schedules' orders: ops/depthwise_conv_2d.cuh), fused epilogue.
 */
#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/ops/depthwise_conv_2d.cuh"
#include "nn/cuda/tuning.h"

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
        int o = (int)(g % ocv) * V;
        I p = g / ocv;
        int ox = (int)(p % s.ow);
        I q = p / s.ow;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
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

/*
 * A pointwise CONV_2D folded into the depthwise reading its output (kr_cuda_op.pw, fusion.h:
 * the MobileNet expansions, whose wide output was written and read back at the models' highest
 * resolutions). A 256-thread block takes a band of `rows` output rows of one item: it stages
 * the pointwise layer's transposed weights [K][C] in shared memory, computes the pointwise
 * outputs of every input row the band's windows reach (halo included, rows outside the image
 * left out) into shared memory, rounded to T as the unfused layer stored them, then the
 * depthwise from there. The pointwise sum is formed in the order of the kernel the layer gets
 * unfused (BF: from the bias, as conv_narrow and conv_pw_groups; else from 0 with the bias
 * last, as the GEMM and the tile), the depthwise in the per-node order (kr_dw_unit's), so the
 * fold changes no bit. A residual that is the pointwise output itself (the ADD of the block's
 * input folded into the depthwise: selfie's decoder) is read from shared memory.
 */
struct band_shape {
    int ih, iw, c, oh, ow, kh, kw, sh, sw, pt, pl;
    int K, rows, bands;
};

template <typename T, bool BF>
__global__ void __launch_bounds__(256) dw_pw_band(const T *__restrict__ x,
                                                  const float *__restrict__ pw,
                                                  const float *__restrict__ pb, kr_epilogue pe,
                                                  const float *__restrict__ w,
                                                  const float *__restrict__ bias,
                                                  T *__restrict__ y, band_shape s, kr_epilogue e,
                                                  int self_res)
{
    extern __shared__ __align__(16) float sm[];
    const int C = s.c, K = s.K, cv = C / 4, tid = threadIdx.x;
    float *ws = sm;        /* [K][C] */
    float *bs = ws + K * C; /* [C] */
    T *xs = reinterpret_cast<T *>(bs + C); /* [rows in][iw][C] */
    for (int i = tid; i < K * C; i += 256)
        ws[(i % K) * C + i / K] = pw[i];
    for (int i = tid; i < C; i += 256)
        bs[i] = pb ? pb[i] : 0.0f;
    const int b = blockIdx.x / s.bands, oy0 = blockIdx.x % s.bands * s.rows;
    const int oy1 = oy0 + s.rows < s.oh ? oy0 + s.rows : s.oh;
    int iy0 = oy0 * s.sh - s.pt, iy1 = (oy1 - 1) * s.sh - s.pt + s.kh;
    iy0 = iy0 > 0 ? iy0 : 0;
    iy1 = iy1 < s.ih ? iy1 : s.ih;
    __syncthreads();
    for (int u = tid; u < (iy1 - iy0) * s.iw * cv; u += 256) {
        const int c4 = u % cv * 4, px = u / cv;
        const T *xp = x + (((size_t)b * s.ih + iy0) * s.iw + px) * K;
        float acc[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[j] = BF ? bs[c4 + j] : 0.0f;
        for (int k = 0; k < K; k += 4) {
            float xv[4];
            kr_ldv<4>(xp + k, xv);
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                kr_fma4(acc, xv[kk], *reinterpret_cast<const float4 *>(ws + (k + kk) * C + c4));
        }
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            v[j] = kr_apply(pe, BF ? acc[j] : acc[j] + bs[c4 + j]);
        kr_stv<4>(xs + (size_t)px * C + c4, v);
    }
    __syncthreads();
    for (int u = tid; u < (oy1 - oy0) * s.ow * cv; u += 256) {
        const int c4 = u % cv * 4, px = u / cv;
        const int ox = px % s.ow, oy = oy0 + px / s.ow;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (bias)
            kr_ldv<4>(bias + c4, acc);
        for (int ky = 0; ky < s.kh; ky++) {
            const int iy = kr_conv_in(oy, s.sh, s.pt, ky, 1);
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            const T *row = xs + (size_t)(iy - iy0) * s.iw * C + c4;
            const float *wrow = w + (size_t)ky * s.kw * C + c4;
            for (int kx = 0; kx < s.kw; kx++) {
                const int ix = kr_conv_in(ox, s.sw, s.pl, kx, 1);
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                float xv[4], wv[4];
                kr_ldv<4>(row + (size_t)ix * C, xv);
                kr_ldv<4>(wrow + (size_t)kx * C, wv);
                kr_dw_fma<4>(acc, xv, wv);
            }
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[j] = kr_apply(e, acc[j]);
        const size_t idx = (((size_t)b * s.oh + oy) * s.ow + ox) * C + c4;
        if (self_res) { /* the residual is the pointwise output at this pixel (oh = ih, ow = iw) */
            float r[4];
            kr_ldv<4>(xs + ((size_t)(oy - iy0) * s.iw + ox) * C + c4, r);
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[j] += r[j];
        } else {
            kr_add_res<T, 4>(e, idx, acc);
        }
        kr_stv<4>(y + idx, acc);
    }
}

/* Shared memory of dw_pw_band for bands of @p rows output rows. */
static size_t band_smem(const band_shape &s, int rows, size_t esize)
{
    int in = (rows - 1) * s.sh + s.kh;
    in = in < s.ih ? in : s.ih;
    return ((size_t)s.K * s.c + (size_t)s.c) * sizeof(float) + (size_t)in * s.iw * s.c * esize;
}

/* The band's rows: the most (of 16, 8, 4, 2, 1, at most the output's) whose shared memory stays
 * within DW_PW_SMEM, else 1 within PW_TILE_MAX_SMEM; both within the device's (or the emulated
 * class's) opt-in limit; 0 when not even that fits. Only speed depends on it, never a result. */
static int band_rows(const band_shape &s, size_t esize, const kr_gpu_caps *caps)
{
    if (!caps)
        return 0;
    size_t want = DW_PW_SMEM, max_smem = PW_TILE_MAX_SMEM;
    if (caps->smem_block_optin < want)
        want = caps->smem_block_optin;
    if (caps->smem_block_optin < max_smem)
        max_smem = caps->smem_block_optin;
    for (int r = 16; r >= 1; r /= 2)
        if (r <= s.oh && band_smem(s, r, esize) <= want)
            return r;
    return band_smem(s, 1, esize) <= max_smem ? 1 : 0;
}

/* The band view of depthwise @p op with pointwise @p pw folded in. */
static band_shape band_of(const kr_cuda_op *op, const kr_cuda_op *pw)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    band_shape s;
    s.ih = xt->dims[1], s.iw = xt->dims[2], s.c = xt->dims[3];
    s.oh = yt->dims[1], s.ow = yt->dims[2];
    s.kh = wt->dims[1], s.kw = wt->dims[2];
    s.sh = p->stride_h, s.sw = p->stride_w, s.pt = p->pad_top, s.pl = p->pad_left;
    s.K = kr_in_t(pw, 0)->dims[3];
    s.rows = s.bands = 0;
    return s;
}

/* Whether the fold of pointwise @p pw into depthwise @p op holds (kr_cuda_depthwise_conv_2d_pw_fits). */
template <typename T> static int pw_fits(const kr_cuda_op *op, const kr_cuda_op *pw)
{
    const kr_node *dn = op->node, *pn = pw->node;
    if (dn->op != KR_OP_DEPTHWISE_CONV_2D || pn->op != KR_OP_CONV_2D || dn->n_inputs < 2 ||
        pn->n_inputs < 2 || pn->inputs[1] < 0 || dn->inputs[1] < 0 || pn->p.window.groups > 1 ||
        pw->residual || pw->cat.src[0] || pw->pool.src || pw->dw || pw->add.src || op->dw ||
        op->add.src || op->addend || kr_cuda_conv_2d_tc_fits(pw) || kr_cuda_conv_2d_mma_fits(pw))
        return 0;
    const kr_window_params *dp = &dn->p.window, *pp = &pn->p.window;
    const kr_tensor *px = kr_in_t(pw, 0), *pwt = kr_in_t(pw, 1), *py = kr_out_t(pw);
    const kr_tensor *pbt = pn->n_inputs > 2 && pn->inputs[2] >= 0 ? kr_in_t(pw, 2) : NULL;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_tensor *bt = dn->n_inputs > 2 && dn->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    if (px->rank != 4 || py->rank != 4 || xt->rank != 4 || yt->rank != 4 || wt->rank != 4 ||
        pwt->rank != 4 || pwt->dims[1] != 1 || pwt->dims[2] != 1 || pp->stride_h != 1 ||
        pp->stride_w != 1 || pp->pad_top != 0 || pp->pad_left != 0 || px->dims[1] != py->dims[1] ||
        px->dims[2] != py->dims[2] || !kr_dims_equal(4, py->dims, 4, xt->dims) ||
        px->dims[3] % 4 || xt->dims[3] % 4 || yt->dims[3] != xt->dims[3] ||
        dp->depth_multiplier > 1 || dp->dilation_h > 1 || dp->dilation_w > 1 ||
        dp->stride_h < 1 || dp->stride_w < 1 || !pwt->data || pwt->dtype != KR_DTYPE_F32 ||
        (pbt && (!pbt->data || pbt->dtype != KR_DTYPE_F32)) || !wt->data ||
        wt->dtype != KR_DTYPE_F32 || (bt && (!bt->data || bt->dtype != KR_DTYPE_F32)) ||
        !kr_aligned(pw->in[0], 4 * sizeof(T)) || !kr_aligned(op->out, 4 * sizeof(T)) ||
        !kr_aligned(op->in[1], 16) || (bt && !kr_aligned(op->in[2], 16)) ||
        (op->residual && !kr_aligned(op->residual, 4 * sizeof(T))))
        return 0;
    /* a residual that is the pointwise output: at the output's own pixels */
    if (op->residual && op->residual == pw->out &&
        (yt->dims[1] != xt->dims[1] || yt->dims[2] != xt->dims[2]))
        return 0;
    const band_shape s = band_of(op, pw);
    return s.K > 0 && s.K <= 256 && band_rows(s, sizeof(T), op->caps) > 0 && op->caps;
}

/* Queues dw_pw_band for depthwise @p op with its folded pointwise; 0 when the device refuses
 * the shared memory (the caller runs the two unfused). */
template <typename T> static int launch_band(const kr_cuda_op *op)
{
    const kr_cuda_op *pw = op->pw;
    if (!pw_fits<T>(op, pw))
        return 0;
    band_shape s = band_of(op, pw);
    s.rows = band_rows(s, sizeof(T), op->caps);
    s.bands = (s.oh + s.rows - 1) / s.rows;
    const size_t smem = band_smem(s, s.rows, sizeof(T));
    const size_t blocks = (size_t)kr_dim(op, kr_out_t(op), 0) * (size_t)s.bands;
    const int self_res = op->residual && op->residual == pw->out;
    kr_epilogue e = kr_make_epilogue(op, 1);
    if (self_res)
        e.res = NULL;
    const bool bf = kr_cuda_conv_2d_bias_first(pw) != 0;
    if (blocks > 0x7fffffff)
        return 0;
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(bf ? dw_pw_band<T, true> : dw_pw_band<T, false>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 0;
    const float *pb = pw->node->n_inputs > 2 && pw->node->inputs[2] >= 0 ? (const float *)pw->in[2] : NULL;
    const float *db = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    (bf ? dw_pw_band<T, true> : dw_pw_band<T, false>)<<<(unsigned)blocks, 256, smem,
                                                         (cudaStream_t)op->stream>>>(
        (const T *)pw->in[0], (const float *)pw->in[1], pb, kr_make_epilogue(pw, 1),
        (const float *)op->in[1], db, (T *)op->out, s, e, self_res);
    return 1;
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    if (op->pw) {
        if (launch_band<T>(op))
            return (int)cudaGetLastError();
        /* the fold could not launch: the pointwise writes its output, as unfused */
        kr_cuda_op p = *op->pw;
        p.stream = op->stream;
        const int err = kr_cuda_conv_2d(&p);
        if (err)
            return err;
    }
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

extern "C" int kr_cuda_depthwise_conv_2d_pw_fits(const kr_cuda_op *op, const kr_cuda_op *pw)
{
    return op->f16 ? pw_fits<__half>(op, pw) : pw_fits<float>(op, pw);
}
