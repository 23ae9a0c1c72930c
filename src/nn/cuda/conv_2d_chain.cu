/*
 * Chains of small f16 3x3 CONV_2D layers in one launch (kr_cuda_op.chain, formed by
 * kr_cuda_fuse_chains, fusion.h): one block per item runs the layers in order and keeps every
 * tensor between them in shared memory. u2netp's levels of 20 x 20 and 10 x 10 pixels (16
 * channels) took a kernel each at batch 1, 2.5 to 7.5 us of end increment for a few hundred
 * thousand multiply-adds: each layer's own chain of latencies (the kernel before draining, the
 * patch from L2, the taps, the stores). In a chain a layer costs its taps and a block barrier.
 *
 * Layout of the shared memory (kr_cuda_conv_2d_chain_smem): every layer's weights (per 16-channel
 * chunk 9 taps x 16 output rows of 32 bytes, conv_tcp's swizzled rows, tp_wswz), one zero pixel
 * row, then planes of h x w pixel rows of CH_LDS halves (16 channels and 8 of padding: 48 bytes,
 * so that ldmatrix's 8 rows of consecutive pixels hit distinct banks): one per layer output that
 * a later layer reads, one per input the chain gathers (a folded pool's maxima, a folded
 * resize's samples, or a tensor copied from global memory).
 *
 * Arithmetic: conv_tcp's (conv_2d_tc.cu) value for value. A layer's inputs are the values the
 * unfused nodes would have stored (tc_pooled4's maxima, tc_blend8's samples, the layers'
 * half outputs); each output's sum from 0 over the 16-channel chunks in order (a concatenation:
 * its first source's, then its second's), within each the taps in (ky, kx) order, one
 * mma.sync m16n8k16 per tap with the same A rows (16 output pixels, a tap outside the input
 * reads zeros) and B rows (tp_wswz); then kr_conv_out's bias, clamp and post function, rounded
 * to half. So a chain's output equals the unchained layers' bit for bit, and the choice of a
 * chain (by the layers' shapes, folds and the device's shared memory) changes no result.
 *
 * Work: the gathers by 16-byte element (a pixel's 8 channels), the convolution by 16-pixel
 * fragment (a warp computes all 16 outputs of its fragments: 2 mma per tap), CH_THREADS
 * threads, a block barrier after each gather and each layer. On compute 9.0 a programmatic
 * dependent launch: the weights are copied while the kernel before finishes.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/ops/conv_2d_tc.cuh"
#include "nn/cuda/ops/resize_bilinear.cuh"

#define CH_THREADS 512
#define CH_LDS 24                 /* halves per pixel row of a plane */
#define CH_WCHUNK (9 * 16 * TP_WLDS) /* halves of one 16-channel chunk's weights */

/* One 16-channel input of a layer: where the convolution reads it (plane, halves from the
 * shared memory's start) and how it gets there. */
struct ch_src {
    const __half *g; /* from global memory (NHWC, 16 channels; NULL: from a plane) */
    int from;        /* from the plane at this offset (-1: from g) */
    int plane;       /* the plane the convolution reads (== from: read as it is) */
    int xf;          /* 0: as it is, 1: a 2 x 2 stride-2 max pool, 2: a bilinear resize */
    int sh, sw;      /* the source's pixels (pool, resize); else the layer's */
    int pt, pl;      /* the pool's leading pads */
    int align, half; /* the resize's align_corners, half_pixel_centers */
};

struct ch_layer {
    int h, w, d, nsrc;
    ch_src src[2];
    int out;          /* plane of the output (-1: none) */
    __half *y;        /* global output (the chain's last layer), else NULL */
    const __half *wg; /* weights (OHWI half, op->w16) */
    const float *bias;
    int ic, wofs; /* input channels (16 or 32), weights' offset in halves */
    kr_epilogue e;
};

struct ch_args {
    ch_layer l[KR_CUDA_CHAIN_MAX];
    int n, zero; /* layers; the zero row's offset in halves */
};

/* The 8 halves of a source at pixel (y, x) of the layer, channels [8 hc, 8 hc + 8), for item b:
 * as conv_tcp's gathered loads compute them (tc_pool_taps' taps with tc_pooled4, rs_axis with
 * tc_blend8, or the value itself). A plane's pixel rows are CH_LDS halves apart. */
__device__ __forceinline__ uint4 ch_gather(const ch_src &S, const __half *sm, int h, int w, int b,
                                           int y, int x, int hc)
{
    const __half *base = S.from >= 0 ? sm + S.from : S.g + (size_t)b * S.sh * S.sw * 16;
    const int stride = S.from >= 0 ? CH_LDS : 16;
    if (S.xf == 1) {
        const int y0 = y * 2 - S.pt, x0 = x * 2 - S.pl;
        int pix[4];
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const int iy = y0 + (t >> 1), ix = x0 + (t & 1);
            pix[t] = (unsigned)iy < (unsigned)S.sh && (unsigned)ix < (unsigned)S.sw
                         ? iy * S.sw + ix
                         : -1;
        }
        return tc_pooled4(base, stride, hc * 8, pix);
    }
    if (S.xf == 2) {
        int y0, y1, x0, x1;
        float fy, fx;
        rs_axis(S.sh, h, S.align, S.half, y, &y0, &y1, &fy);
        rs_axis(S.sw, w, S.align, S.half, x, &x0, &x1, &fx);
        const __half *c = base + hc * 8;
        const uint4 q00 = *reinterpret_cast<const uint4 *>(c + (y0 * S.sw + x0) * stride);
        const uint4 q01 = *reinterpret_cast<const uint4 *>(c + (y0 * S.sw + x1) * stride);
        const uint4 q10 = *reinterpret_cast<const uint4 *>(c + (y1 * S.sw + x0) * stride);
        const uint4 q11 = *reinterpret_cast<const uint4 *>(c + (y1 * S.sw + x1) * stride);
        return tc_blend8(q00, q01, q10, q11, fy, fx);
    }
    return *reinterpret_cast<const uint4 *>(base + (y * w + x) * stride + hc * 8);
}

__global__ void __launch_bounds__(CH_THREADS) conv_chain(const __grid_constant__ ch_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) uint4 ch_shared[];
    __half *const sm = reinterpret_cast<__half *>(ch_shared);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, b = blockIdx.x;

    /* every layer's weights: the layers' own (written once at set-up), copied before the wait
     * for the kernel before */
    for (int i = 0; i < a.n; i++) {
        const ch_layer &L = a.l[i];
        const int total = (L.ic / 16) * 9 * 16 * 2;
        for (int e = tid; e < total; e += CH_THREADS) {
            const int q = e / 288, r = e - q * 288, hc = r & 1, n = (r >> 1) & 15, tap = r >> 5;
            const __half *g = L.wg + (size_t)n * 9 * L.ic + tap * L.ic + q * 16 + hc * 8;
            tc_cp16<false>(kr_smem_addr(sm + L.wofs + q * CH_WCHUNK + tp_wswz(tap * 16 + n, hc)),
                           g, true);
        }
    }
    kr_cp_async_commit();
    if (tid < CH_LDS / 8)
        reinterpret_cast<uint4 *>(sm + a.zero)[tid] = make_uint4(0, 0, 0, 0);
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    tc_wait<0>();
    __syncthreads();

    const int acol = (lane >> 4) * 8;
    /* B rows of a tap (conv_tcp's brow and boff with one 16-output tile) */
    const int boff = tp_wswz((lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1);
    for (int i = 0; i < a.n; i++) {
        const ch_layer &L = a.l[i];
        const int M = L.h * L.w;
        /* the inputs that are not read where they lie: gathered into their planes */
        int gathered = 0;
        for (int k = 0; k < L.nsrc; k++) {
            const ch_src &S = L.src[k];
            if (S.plane == S.from)
                continue;
            gathered = 1;
            for (int e = tid; e < M * 2; e += CH_THREADS) {
                const int p = e >> 1, y = p / L.w, x = p - y * L.w;
                const uint4 v = ch_gather(S, sm, L.h, L.w, b, y, x, e & 1);
                *reinterpret_cast<uint4 *>(sm + S.plane + p * CH_LDS + (e & 1) * 8) = v;
            }
        }
        if (gathered)
            __syncthreads();

        for (int t = warp; t * 16 < M; t += CH_THREADS / 32) {
            float acc[2][4];
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int q = 0; q < 4; q++)
                    acc[j][q] = 0.0f;
            const int r = t * 16 + (lane & 15); /* this lane's A row: output pixel r */
            const int ry = r < M ? r / L.w : -(1 << 20), rx = r < M ? r - (r / L.w) * L.w : 0;
            for (int k = 0; k < L.nsrc; k++) {
                const __half *P = sm + L.src[k].plane;
                const __half *W = sm + L.wofs + k * CH_WCHUNK;
#pragma unroll
                for (int ky = 0; ky < 3; ky++) {
                    const int iy = ry + (ky - 1) * L.d;
#pragma unroll
                    for (int kx = 0; kx < 3; kx++) {
                        const int ix = rx + (kx - 1) * L.d;
                        const bool in = (unsigned)iy < (unsigned)L.h && (unsigned)ix < (unsigned)L.w;
                        const __half *ap = (in ? P + (iy * L.w + ix) * CH_LDS : sm + a.zero) + acol;
                        unsigned af[4], bq[4];
                        kr_ldsm_x4(af, kr_smem_addr(ap));
                        kr_ldsm_x4(bq, kr_smem_addr(W + (ky * 3 + kx) * 16 * TP_WLDS + boff));
                        const unsigned b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
                        tc_mma(acc[0], af, b0);
                        tc_mma(acc[1], af, b1);
                    }
                }
            }
            /* the epilogue: tc_epilogue_post's values (bias, clamp, post function, half) */
            const int n = (lane & 3) * 2;
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const float bv0 = L.bias ? L.bias[n + j * 8] : 0.0f;
                const float bv1 = L.bias ? L.bias[n + j * 8 + 1] : 0.0f;
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int row = t * 16 + (lane >> 2) + hh * 8;
                    if (row >= M)
                        continue;
                    const float v0 = kr_conv_out(acc[j][hh * 2], bv0, 0.0f, false, kr_no_res(),
                                                 [&](float v) { return kr_apply(L.e, v); });
                    const float v1 = kr_conv_out(acc[j][hh * 2 + 1], bv1, 0.0f, false, kr_no_res(),
                                                 [&](float v) { return kr_apply(L.e, v); });
                    const __half2 h2 = __floats2half2_rn(v0, v1);
                    if (L.out >= 0)
                        *reinterpret_cast<__half2 *>(sm + L.out + row * CH_LDS + n + j * 8) = h2;
                    if (L.y)
                        *reinterpret_cast<__half2 *>(L.y + ((size_t)b * M + row) * 16 + n + j * 8) =
                            h2;
                }
            }
        }
        __syncthreads();
    }
#else
    __trap(); /* built without mma.sync / cp.async for this device: fail loudly */
#endif
}

/* (ops.h) */
extern "C" int kr_cuda_conv_2d_chain_layer_fits(const kr_cuda_op *op)
{
    if (op->node->op != KR_OP_CONV_2D || !kr_cuda_conv_2d_tc_fits(op) ||
        !kr_cuda_conv_2d_tc_patch(op, 16) || op->residual || op->addend || op->scale.src ||
        op->rs.src || op->add.src || op->gcat.n || op->x_f32 || op->y_f32 || op->chain.n ||
        op->node->n_inputs < 2)
        return 0;
    const kr_window_params *p = &op->node->p.window;
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const int d = p->dilation_h > 0 ? p->dilation_h : 1;
    const int h = yt->dims[1], w = yt->dims[2], ic = wt->dims[3];
    if (wt->dims[0] != 16 || wt->dims[1] != 3 || wt->dims[2] != 3 || yt->dims[3] != 16 ||
        p->stride_h != 1 || p->stride_w != 1 || (p->dilation_w > 0 ? p->dilation_w : 1) != d ||
        p->pad_top != d || p->pad_bottom != d || p->pad_left != d || p->pad_right != d ||
        h * w > KR_CUDA_CHAIN_MAX_PIXELS || !kr_aligned(op->out, 16))
        return 0;
    if (op->cat.src[0])
        return ic == 32 && op->cat.c0 == 16 && op->cat.h == h && op->cat.w == w;
    /* the input (a folded pool's output where one is folded) has the output's pixels */
    const kr_tensor *xt = kr_in_t(op, 0);
    if (ic != 16 || xt->rank != 4 || xt->dims[1] != h || xt->dims[2] != w)
        return 0;
    return !op->pool.src || (op->pool.kh == 2 && op->pool.kw == 2 && op->pool.sh == 2 &&
                             op->pool.sw == 2 && op->pool.dh == 1 && op->pool.dw == 1);
}

/* Layer @p i of @p layers as the kernel runs it (@p L; its planes' offsets from @p off on,
 * advancing it), the output planes of the layers before in @p outp (-1: none yet). Returns 0,
 * or -1 where a source lies inside an earlier layer's output without being it. */
static int ch_layer_of(const kr_cuda_op *const *layers, int n, int i, const int *outp,
                       ch_layer &L, int &off)
{
    const kr_cuda_op *op = layers[i];
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    memset(&L, 0, sizeof(L));
    L.h = yt->dims[1], L.w = yt->dims[2], L.d = p->dilation_h > 0 ? p->dilation_h : 1;
    L.ic = wt->dims[3];
    L.wg = (const __half *)op->w16;
    L.bias = op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    L.e = kr_make_epilogue(op, 1);
    L.e.res = NULL;
    L.out = outp[i];
    L.y = i == n - 1 ? (__half *)op->out : NULL;
    const void *src[2] = {op->in[0], NULL};
    int xf[2] = {0, 0}, sh[2] = {L.h, L.h}, sw[2] = {L.w, L.w};
    L.nsrc = 1;
    if (op->pool.src) {
        src[0] = op->pool.src, xf[0] = 1, sh[0] = op->pool.ih, sw[0] = op->pool.iw;
    } else if (op->cat.src[0]) {
        L.nsrc = 2;
        for (int k = 0; k < 2; k++) {
            src[k] = op->cat.src[k];
            if (op->cat.rz == k)
                xf[k] = 2, sh[k] = op->cat.rh, sw[k] = op->cat.rw;
        }
    }
    for (int k = 0; k < L.nsrc; k++) {
        ch_src &S = L.src[k];
        S.xf = xf[k], S.sh = sh[k], S.sw = sw[k];
        S.pt = op->pool.pt, S.pl = op->pool.pl;
        S.align = op->cat.align, S.half = op->cat.half;
        S.from = -1;
        const char *a = (const char *)src[k];
        for (int j = i - 1; j >= 0; j--) {
            const kr_tensor *oj = kr_out_t(layers[j]);
            const char *o = (const char *)layers[j]->out;
            const size_t bytes = (size_t)kr_dim(layers[j], oj, 0) * oj->dims[1] * oj->dims[2] * 16 *
                                 sizeof(__half);
            if (a == o) {
                if (outp[j] < 0 || oj->dims[1] != S.sh || oj->dims[2] != S.sw)
                    return -1;
                S.from = outp[j];
                break;
            }
            if (a > o && a < o + bytes)
                return -1;
        }
        S.g = S.from < 0 ? (const __half *)src[k] : NULL;
        if (S.from >= 0 && S.xf == 0) {
            S.plane = S.from;
        } else {
            S.plane = off;
            off += L.h * L.w * CH_LDS;
        }
    }
    return 0;
}

/* The kernel's arguments for the chain @p layers (@p n of them) and its shared memory in bytes;
 * 0 where a source lies inside an earlier layer's output (ch_layer_of). */
static size_t ch_build(const kr_cuda_op *const *layers, int n, ch_args &a)
{
    memset(&a, 0, sizeof(a));
    a.n = n;
    int off = 0, outp[KR_CUDA_CHAIN_MAX];
    for (int i = 0; i < n; i++) {
        a.l[i].wofs = off;
        off += (kr_in_t(layers[i], 1)->dims[3] / 16) * CH_WCHUNK;
    }
    a.zero = off;
    off += CH_LDS;
    /* a plane for each output that a later layer reads where it lies or gathers from */
    for (int i = 0; i < n; i++) {
        outp[i] = -1;
        for (int j = i + 1; j < n && outp[i] < 0; j++) {
            const kr_cuda_op *op = layers[j];
            const void *s[3] = {op->pool.src ? op->pool.src : op->cat.src[0] ? NULL : op->in[0],
                                op->cat.src[0], op->cat.src[1]};
            for (int k = 0; k < 3; k++)
                if (s[k] && s[k] == layers[i]->out) {
                    outp[i] = off;
                    const kr_tensor *yt = kr_out_t(layers[i]);
                    off += yt->dims[1] * yt->dims[2] * CH_LDS;
                    break;
                }
        }
    }
    for (int i = 0; i < n; i++) {
        const int wofs = a.l[i].wofs;
        if (ch_layer_of(layers, n, i, outp, a.l[i], off))
            return 0;
        a.l[i].wofs = wofs;
    }
    return (size_t)off * sizeof(__half);
}

/* (ops.h) */
extern "C" size_t kr_cuda_conv_2d_chain_smem(const kr_cuda_op *const *layers, int n)
{
    if (n < 1 || n > KR_CUDA_CHAIN_MAX)
        return 0;
    ch_args a;
    return ch_build(layers, n, a);
}

/* (ops.h) */
extern "C" int kr_cuda_conv_2d_chain(const kr_cuda_op *op)
{
    const kr_cuda_op *layers[KR_CUDA_CHAIN_MAX];
    const int n = op->chain.n + 1;
    if (n > KR_CUDA_CHAIN_MAX)
        return (int)cudaErrorInvalidValue;
    layers[0] = op;
    for (int i = 1; i < n; i++)
        layers[i] = op->chain.op[i - 1];
    ch_args a;
    const size_t smem = ch_build(layers, n, a);
    if (!smem || smem > op->caps->smem_block_optin)
        return (int)cudaErrorInvalidValue;
    const kr_tensor *yt = kr_out_t(layers[n - 1]);
    const size_t batch = (size_t)kr_dim(layers[n - 1], yt, 0);
    if (batch >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    cudaError_t err;
    if (smem > 48 * 1024 &&
        (err = cudaFuncSetAttribute(conv_chain, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem)) != cudaSuccess)
        return (int)err;
    /* on compute 9.0 a programmatic dependent launch, as conv_tcp's */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)batch);
    cfg.blockDim = dim3(CH_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, conv_chain, a);
}
