/*
 * The RGB stem of the ONNX models (3 input channels, 3x3 or 5x5, 16, 32 or 64 output channels:
 * u2netp's 3 -> 64 at 320 x 320) on the CUDA cores, as one launch that writes whole output
 * rows.
 *
 * conv_2d.cu's conv_stem gives each thread one pixel and 16 output channels, with the weights
 * in the constant bank: a 64-channel stem is four launches, each reading the input again and
 * writing a quarter of every output row (32-byte pieces at the row's 128-byte stride). On the
 * H100 u2netp's stem took 0.107 ms at batch 1 (30 us a frame at batch 32) against a floor of
 * about 5 us (177 M multiply-adds, 13 MB written).
 *
 * Here a block of 4 warps takes a tile of 4 x 32 output pixels of one image and all its output
 * channels. It copies the tile's input patch (zeros outside the input, so the loop has no
 * bounds checks) and the layer's weights (transposed to [k][oc]) into shared memory once. Warp
 * w computes channel group w % G (16 channels; G = oc / 16) of tile rows w / G, w / G + 4 / G,
 * ...: lane = the pixel's column, so each weight is one broadcast read for the warp and each
 * input value a conflict-free read (3 floats apart). The results go through shared memory
 * (rows padded against bank conflicts) and leave as 16-byte stores of whole output rows.
 *
 * Summation order: bias-first (ops/conv_2d.cuh), the same as conv_stem: from the bias, the taps
 * in (ky, kx) order and each tap's 3 channels in order, one fused multiply-add each, in float;
 * then the clamp and folded activation, then the folded residual (added in float before the
 * value is rounded to the element type). So a stem gives the same results bit for bit on
 * either path and at every batch size.
 */
#include "nn/cuda/ops/conv_2d.cuh"

#define STEM_TH 4        /* tile rows */
#define STEM_TW 32       /* tile columns: a warp's lanes */
#define STEM_THREADS 128 /* 4 warps */
#define STEM_SMEM_MAX (48 * 1024)
#define STEM_LOADS 8     /* patch values a thread loads before storing them */

struct stem_shape {
    int ih, iw, oh, ow, oc, sh, sw, dh, dw, pt, pl;
    int tiles_y, tiles_x, ph, pw; /* tiles per image; the input patch of a tile (pixels) */
};

/* Halves or floats per staged output pixel: oc plus 16 bytes, so that the 16-byte pieces of 8
 * consecutive pixels fall in distinct banks. */
template <typename T> __host__ __device__ constexpr int stem_ldo(int oc)
{
    return oc + 16 / (int)sizeof(T);
}

/* Floats of a tile's input patch, rounded up to a multiple of 4 (the weights after it are read
 * as float4). */
__host__ __device__ inline int stem_patch_floats(const stem_shape &s)
{
    return (s.ph * s.pw * 3 + 3) & ~3;
}

/* Shared memory of a tile: the input patch (float, ph x pw x 3) and the weights (float,
 * K*K*3 x oc) while computing, then, in the same space, the staged outputs (T, 128 x ldo). */
template <typename T> static size_t stem_smem(const stem_shape &s, int k)
{
    const size_t in = ((size_t)stem_patch_floats(s) + (size_t)k * k * 3 * s.oc) * sizeof(float);
    const size_t out = (size_t)STEM_TH * STEM_TW * stem_ldo<T>(s.oc) * sizeof(T);
    return in > out ? in : out;
}

/* A folded activation (KR_CUDA_POST_*) as a type: the epilogue's constant. */
template <int P> struct stem_post {
    static constexpr int value = P;
};

template <typename T, int K, int G>
__global__ void __launch_bounds__(STEM_THREADS)
    conv_stem_tile(const T *__restrict__ x, const float *__restrict__ w,
                   const float *__restrict__ bias, T *__restrict__ y, stem_shape s, kr_epilogue e)
{
    constexpr int KK = K * K * 3, R = 4 / G; /* R: warps per channel group */
    extern __shared__ uint4 stem_shared[];
    float *const patch = reinterpret_cast<float *>(stem_shared);
    float *const ws = patch + stem_patch_floats(s); /* [KK][oc]: 16-byte aligned */
    const int oc = 16 * G;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    int t = blockIdx.x;
    const int tx = t % s.tiles_x;
    t /= s.tiles_x;
    const int ty = t % s.tiles_y, b = t / s.tiles_y;
    const int oy0 = ty * STEM_TH, ox0 = tx * STEM_TW;
    const int iy0 = oy0 * s.sh - s.pt, ix0 = ox0 * s.sw - s.pl;

    /* The weights, OHWI [n][k] -> [k][n], and the patch, row by row (each row 3 * pw contiguous
     * values of the input). Each thread issues its loads before their stores into shared memory,
     * STEM_LOADS at a time (a value outside the input loads the image's first one and stores
     * zero): with a load and its store per step, each step waited for its own round trip (the
     * patch's loads behind a branch each), some 9 of them per block before any multiply-add. */
    constexpr int WPT = (KK * 16 * G + STEM_THREADS - 1) / STEM_THREADS; /* weights per thread */
    float wv[WPT];
#pragma unroll
    for (int j = 0; j < WPT; j++) {
        const int i = tid + j * STEM_THREADS;
        wv[j] = i < KK * oc ? w[i] : 0.0f;
    }
    const T *xb = x + (size_t)b * s.ih * s.iw * 3;
    const int prow = s.pw * 3, pn = s.ph * prow;
    for (int i0 = tid; i0 < pn; i0 += STEM_LOADS * STEM_THREADS) {
        float v[STEM_LOADS];
        bool in[STEM_LOADS];
#pragma unroll
        for (int j = 0; j < STEM_LOADS; j++) {
            const int i = i0 + j * STEM_THREADS;
            const int py = i / prow, r = i - py * prow;
            const int iy = iy0 + py, ix = ix0 + r / 3;
            in[j] = i < pn && (unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw;
            v[j] = kr_ld(xb + (in[j] ? ((size_t)iy * s.iw + ix) * 3 + r % 3 : 0));
        }
#pragma unroll
        for (int j = 0; j < STEM_LOADS; j++) {
            const int i = i0 + j * STEM_THREADS;
            if (i < pn)
                patch[i] = in[j] ? v[j] : 0.0f;
        }
    }
#pragma unroll
    for (int j = 0; j < WPT; j++) {
        const int i = tid + j * STEM_THREADS;
        if (i < KK * oc) {
            const int n = i / KK, k = i - n * KK;
            ws[k * oc + n] = wv[j];
        }
    }
    __syncthreads();

    const int g = warp % G, r0 = warp / G; /* channel group; first tile row */
    float acc[G][16];
#pragma unroll
    for (int j = 0; j < G; j++)
#pragma unroll
        for (int n = 0; n < 16; n++)
            acc[j][n] = bias ? bias[g * 16 + n] : 0.0f;
#pragma unroll 1
    for (int ky = 0; ky < K; ky++)
#pragma unroll
        for (int kx = 0; kx < K; kx++) {
            float in[G][3];
#pragma unroll
            for (int j = 0; j < G; j++) {
                const int py = (r0 + j * R) * s.sh + ky * s.dh, px = lane * s.sw + kx * s.dw;
                const float *p = patch + (py * s.pw + px) * 3;
                in[j][0] = p[0], in[j][1] = p[1], in[j][2] = p[2];
            }
#pragma unroll
            for (int c = 0; c < 3; c++) {
                const float4 *wk =
                    reinterpret_cast<const float4 *>(ws + ((ky * K + kx) * 3 + c) * oc + g * 16);
                float wv[16];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float4 v = wk[q];
                    wv[4 * q] = v.x, wv[4 * q + 1] = v.y, wv[4 * q + 2] = v.z, wv[4 * q + 3] = v.w;
                }
#pragma unroll
                for (int j = 0; j < G; j++)
#pragma unroll
                    for (int n = 0; n < 16; n++)
                        acc[j][n] = fmaf(in[j][c], wv[n], acc[j][n]);
            }
        }
    __syncthreads(); /* every warp is done with the patch and weights: the space is the stage */

    T *const st = reinterpret_cast<T *>(stem_shared);
    constexpr int LDO = stem_ldo<T>(16 * G);
    const int ox = ox0 + lane;
    /* the activation as a constant (stem_post): one switch, not one per value (64 inlined
     * switches made the epilogue most of the kernel's code) */
    auto stage = [&](auto post) {
        kr_epilogue f = e;
        f.post = decltype(post)::value;
#pragma unroll
        for (int j = 0; j < G; j++) {
            const int row = r0 + j * R, oy = oy0 + row;
            float v[16];
#pragma unroll
            for (int n = 0; n < 16; n++)
                v[n] = kr_apply(f, acc[j][n]);
            if (oy < s.oh && ox < s.ow) {
                const size_t o = (((size_t)b * s.oh + oy) * s.ow + ox) * oc + g * 16;
#pragma unroll
                for (int n = 0; n < 16; n += 4)
                    kr_add_res<T, 4>(e, o + n, v + n);
            }
            T *d = st + (row * STEM_TW + lane) * LDO + g * 16;
#pragma unroll
            for (int n = 0; n < 16; n += 4)
                kr_stv<4>(d + n, v + n);
        }
    };
    switch (e.post) {
    case KR_CUDA_POST_RELU: stage(stem_post<KR_CUDA_POST_RELU>()); break;
    case KR_CUDA_POST_RELU6: stage(stem_post<KR_CUDA_POST_RELU6>()); break;
    case KR_CUDA_POST_HARD_SWISH: stage(stem_post<KR_CUDA_POST_HARD_SWISH>()); break;
    case KR_CUDA_POST_LOGISTIC: stage(stem_post<KR_CUDA_POST_LOGISTIC>()); break;
    default: stage(stem_post<KR_CUDA_POST_NONE>());
    }
    __syncthreads();

    /* whole output rows of the tile, 16 bytes per thread per pass */
    constexpr int PIECES = 16 * G * (int)sizeof(T) / 16; /* 16-byte pieces per pixel */
    const int nx = s.ow - ox0 < STEM_TW ? s.ow - ox0 : STEM_TW;
    for (int i = tid; i < STEM_TH * STEM_TW * PIECES; i += STEM_THREADS) {
        const int row = i / (STEM_TW * PIECES), r = i - row * (STEM_TW * PIECES);
        const int px = r / PIECES, piece = r - px * PIECES;
        const int oy = oy0 + row;
        if (px >= nx || oy >= s.oh)
            continue;
        const uint4 v =
            *reinterpret_cast<const uint4 *>(st + (row * STEM_TW + px) * LDO + piece * (16 / sizeof(T)));
        *reinterpret_cast<uint4 *>(y + (((size_t)b * s.oh + oy) * s.ow + ox0 + px) * oc +
                                   piece * (16 / sizeof(T))) = v;
    }
}

/* The layer's shape (kr_cuda_conv_2d_stem_fits accepted it). */
static stem_shape stem_shape_of(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    stem_shape s;
    s.ih = xt->dims[1], s.iw = xt->dims[2];
    s.oh = yt->dims[1], s.ow = yt->dims[2], s.oc = yt->dims[3];
    s.sh = p->stride_h, s.sw = p->stride_w;
    s.dh = p->dilation_h > 0 ? p->dilation_h : 1, s.dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s.pt = p->pad_top, s.pl = p->pad_left;
    s.tiles_y = (s.oh + STEM_TH - 1) / STEM_TH;
    s.tiles_x = (s.ow + STEM_TW - 1) / STEM_TW;
    s.ph = (STEM_TH - 1) * s.sh + (wt->dims[1] - 1) * s.dh + 1;
    s.pw = (STEM_TW - 1) * s.sw + (wt->dims[2] - 1) * s.dw + 1;
    return s;
}

template <typename T> static int stem_fits(const kr_cuda_op *op)
{
    const kr_tensor *wt = kr_in_t(op, 1);
    const stem_shape s = stem_shape_of(op);
    return stem_smem<T>(s, wt->dims[1]) <= STEM_SMEM_MAX;
}

extern "C" int kr_cuda_conv_2d_stem_fits(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    if (p->padding != KR_PADDING_EXPLICIT || p->groups > 1 || op->node->n_inputs < 2 ||
        op->cat.src[0] || op->pool.src || !op->caps)
        return 0;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    if (xt->rank != 4 || wt->rank != 4 || yt->rank != 4 || xt->dims[3] != 3 || wt->dims[3] != 3 ||
        wt->dims[1] != wt->dims[2] || (wt->dims[1] != 3 && wt->dims[1] != 5) ||
        wt->dims[0] != yt->dims[3] || (yt->dims[3] != 16 && yt->dims[3] != 32 && yt->dims[3] != 64) ||
        wt->dtype != KR_DTYPE_F32 || p->stride_h < 1 || p->stride_w < 1 || p->stride_h > 4 ||
        p->stride_w > 4 || p->dilation_h > 4 || p->dilation_w > 4 ||
        !kr_aligned(op->out, 16) || !kr_aligned(op->in[1], 16) ||
        (op->residual && !kr_aligned(op->residual, 4 * (op->f16 ? 2 : 4))))
        return 0;
    if (op->node->n_inputs > 2 && op->node->inputs[2] >= 0 &&
        kr_in_t(op, 2)->dtype != KR_DTYPE_F32)
        return 0;
    return KR_BY_TYPE(stem_fits, op);
}

template <typename T, int K, int G> static int launch_stem_tile(const kr_cuda_op *op)
{
    const stem_shape s = stem_shape_of(op);
    const size_t blocks = (size_t)kr_dim(op, kr_out_t(op), 0) * s.tiles_y * s.tiles_x;
    if (blocks >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    conv_stem_tile<T, K, G><<<(unsigned)blocks, STEM_THREADS, stem_smem<T>(s, K),
                              (cudaStream_t)op->stream>>>((const T *)op->in[0],
                                                          (const float *)op->in[1], bias,
                                                          (T *)op->out, s, kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

template <typename T> static int launch(const kr_cuda_op *op)
{
    const int k = kr_in_t(op, 1)->dims[1], g = kr_out_t(op)->dims[3] / 16;
    if (k == 3)
        return g == 1 ? launch_stem_tile<T, 3, 1>(op)
               : g == 2 ? launch_stem_tile<T, 3, 2>(op)
                        : launch_stem_tile<T, 3, 4>(op);
    return g == 1 ? launch_stem_tile<T, 5, 1>(op)
           : g == 2 ? launch_stem_tile<T, 5, 2>(op)
                    : launch_stem_tile<T, 5, 4>(op);
}

extern "C" int kr_cuda_conv_2d_stem(const kr_cuda_op *op) { return KR_BY_TYPE(launch, op); }
