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
 * Where the stem alone reads the graph input (u2netp's), the per-node f16 schedule points it at
 * the input's float staging (kr_cuda_op.x_f32, kr_cuda_pernode_bind_inputs), as for
 * conv_stem_half below: the patch copy loads the floats and rounds each to half as
 * kr_cuda_f32_to_f16 does, so the conversion kernel before the stem is left out with the same
 * values (u2netp batch 1: 1.9 us of its own, 1.2 MB read, 0.6 MB written and read again).
 *
 * Summation order: bias-first (ops/conv_2d.cuh), the same as conv_stem: from the bias, the taps
 * in (ky, kx) order and each tap's 3 channels in order, one fused multiply-add each, in float;
 * then the clamp and folded activation, then the folded residual (added in float before the
 * value is rounded to the element type). So a stem gives the same results bit for bit on
 * either path and at every batch size.
 */
#include <string.h>

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

/* Floats per weight row k of the staged [k][oc] weights: oc plus 4, a multiple of 4 (rows read
 * as float4). The block writes the rows transposed from OHWI, consecutive lanes consecutive k
 * of one output: at a pitch of oc (a multiple of 32 floats for 64 outputs) they all hit one
 * bank, 27-way conflicts on 56 stores a block (ncu, u2netp's 3 -> 64 at 320 x 320: 85% of the
 * kernel's shared-store wavefronts, the L1 pipe busy for several us a round); at oc + 4 four
 * rows share a bank, 4-way. */
__host__ __device__ constexpr int stem_ldw(int oc) { return oc + 4; }

/* Floats of a tile's input patch, rounded up to a multiple of 4 (the weights after it are read
 * as float4). */
__host__ __device__ inline int stem_patch_floats(const stem_shape &s)
{
    return (s.ph * s.pw * 3 + 3) & ~3;
}

/* Shared memory of a tile: the input patch (float, ph x pw x 3) and the weights (float,
 * K*K*3 rows of stem_ldw(oc)) while computing, then, in the same space, the staged outputs (T,
 * 128 x ldo). */
template <typename T> static size_t stem_smem(const stem_shape &s, int k)
{
    const size_t in =
        ((size_t)stem_patch_floats(s) + (size_t)k * k * 3 * stem_ldw(s.oc)) * sizeof(float);
    const size_t out = (size_t)STEM_TH * STEM_TW * stem_ldo<T>(s.oc) * sizeof(T);
    return in > out ? in : out;
}

/* A patch value of a stem of element type T reading TX: the input's own value, or, for a half
 * stem reading the float graph input (kr_cuda_op.x_f32), the float rounded to half as
 * kr_cuda_f32_to_f16 rounds it (__float2half_rn). */
template <typename T, typename TX> __device__ __forceinline__ float stem_ld(const TX *p)
{
    return kr_ld(p);
}
template <> __device__ __forceinline__ float stem_ld<__half, float>(const float *p)
{
    return __half2float(__float2half_rn(*p));
}

/* A folded activation (KR_CUDA_POST_*) as a type: the epilogue's constant. */
template <int P, bool OPEN = false> struct stem_post {
    static constexpr int value = P;
    static constexpr bool open = OPEN;
};

/* The epilogue's value of @p v: kr_apply, or, OPEN (the node's own clamp is [-inf, inf] and the
 * folded activation a RELU or RELU6: u2netp's stem, its Relu node folded), the RELU or RELU6
 * alone: kr_apply's value for every input (the clamp changes only a NaN, to -inf, which the
 * RELU turns into the 0 it gives the NaN itself), without 2 instructions a value. */
template <typename Post> __device__ __forceinline__ float stem_apply(const kr_epilogue &f, float v)
{
    if (!Post::open)
        return kr_apply(f, v);
    return Post::value == KR_CUDA_POST_RELU6 ? fminf(fmaxf(v, 0.0f), 6.0f) : fmaxf(v, 0.0f);
}

template <typename T, typename TX, int K, int G>
__global__ void __launch_bounds__(STEM_THREADS)
    conv_stem_tile(const TX *__restrict__ x, const float *__restrict__ w,
                   const float *__restrict__ bias, T *__restrict__ y, stem_shape s, kr_epilogue e)
{
    constexpr int KK = K * K * 3, R = 4 / G; /* R: warps per channel group */
    extern __shared__ uint4 stem_shared[];
    float *const patch = reinterpret_cast<float *>(stem_shared);
    float *const ws = patch + stem_patch_floats(s); /* [KK][LDW]: 16-byte aligned */
    constexpr int oc = 16 * G, LDW = stem_ldw(16 * G);
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
    const TX *xb = x + (size_t)b * s.ih * s.iw * 3;
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
            v[j] = stem_ld<T>(xb + (in[j] ? ((size_t)iy * s.iw + ix) * 3 + r % 3 : 0));
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
            ws[k * LDW + n] = wv[j];
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
                    reinterpret_cast<const float4 *>(ws + ((ky * K + kx) * 3 + c) * LDW + g * 16);
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
                v[n] = stem_apply<decltype(post)>(f, acc[j][n]);
            if (oy < s.oh && ox < s.ow) {
                const size_t o = (((size_t)b * s.oh + oy) * s.ow + ox) * oc + g * 16;
#pragma unroll
                for (int n = 0; n < 16; n += 4)
                    kr_add_res<T, 4>(e, o + n, v + n);
            }
            /* 16-byte stores (8 halves or 4 floats): at the pixel pitch LDO the 8 lanes of a
             * quarter warp hit distinct banks (8-byte stores of halves: 4-way conflicts) */
            T *d = st + (row * STEM_TW + lane) * LDO + g * 16;
            constexpr int SV = 16 / (int)sizeof(T);
#pragma unroll
            for (int n = 0; n < 16; n += SV)
                kr_stv<SV>(d + n, v + n);
        }
    };
    const bool open = e.lo == -INFINITY && e.hi == INFINITY;
    switch (e.post) {
    case KR_CUDA_POST_RELU:
        if (open)
            stage(stem_post<KR_CUDA_POST_RELU, true>());
        else
            stage(stem_post<KR_CUDA_POST_RELU>());
        break;
    case KR_CUDA_POST_RELU6:
        if (open)
            stage(stem_post<KR_CUDA_POST_RELU6, true>());
        else
            stage(stem_post<KR_CUDA_POST_RELU6>());
        break;
    case KR_CUDA_POST_HARD_SWISH: stage(stem_post<KR_CUDA_POST_HARD_SWISH>()); break;
    case KR_CUDA_POST_LOGISTIC: stage(stem_post<KR_CUDA_POST_LOGISTIC>()); break;
    default: stage(stem_post<KR_CUDA_POST_NONE>());
    }
    __syncthreads();

    /* whole output rows of the tile, 16 bytes per thread per pass; the 64-bit index of the
     * tile's first output once, then 32-bit offsets from it (the index chain per piece was most
     * of this loop's instructions) */
    constexpr int PIECES = 16 * G * (int)sizeof(T) / 16; /* 16-byte pieces per pixel */
    const int nx = s.ow - ox0 < STEM_TW ? s.ow - ox0 : STEM_TW;
    const int ny = s.oh - oy0 < STEM_TH ? s.oh - oy0 : STEM_TH;
    T *const yt = y + (((size_t)b * s.oh + oy0) * s.ow + ox0) * oc;
    for (int i = tid; i < STEM_TH * STEM_TW * PIECES; i += STEM_THREADS) {
        const int row = i / (STEM_TW * PIECES), r = i - row * (STEM_TW * PIECES);
        const int px = r / PIECES, piece = r - px * PIECES;
        if (px < nx && row < ny) {
            const uint4 v = *reinterpret_cast<const uint4 *>(st + (row * STEM_TW + px) * LDO +
                                                             piece * (16 / sizeof(T)));
            *reinterpret_cast<uint4 *>(yt + (unsigned)((row * s.ow + px) * oc +
                                                       piece * (16 / (int)sizeof(T)))) = v;
        }
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
    const cudaStream_t st = (cudaStream_t)op->stream;
    if (op->x_f32) /* the float graph input (f16 instances only) */
        conv_stem_tile<T, float, K, G><<<(unsigned)blocks, STEM_THREADS, stem_smem<T>(s, K), st>>>(
            (const float *)op->in[0], (const float *)op->in[1], bias, (T *)op->out, s,
            kr_make_epilogue(op, 1));
    else
        conv_stem_tile<T, T, K, G><<<(unsigned)blocks, STEM_THREADS, stem_smem<T>(s, K), st>>>(
            (const T *)op->in[0], (const float *)op->in[1], bias, (T *)op->out, s,
            kr_make_epilogue(op, 1));
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

/*
 * The TFLite 3x3 RGB stems of stride 2 with 16 output channels in half precision (selfie's and
 * selfie-landscape's node 0: 256 x 256 -> 128 x 128 and 144 x 256 -> 72 x 128), one launch.
 *
 * conv_2d.cu's conv_stem gives a thread one pixel and loads its 27 input values with 2-byte
 * loads strided 12 bytes across the warp; at selfie's batch 256 it took 0.24 ms (ncu: SM
 * throughput 90%, DRAM 18%) against a memory floor near 0.05 ms. Here a block of 8 warps takes
 * 4 output rows x 64 columns of one image. It copies the tile's input patch (9 rows x 129
 * pixels x 3 channels, zeros outside the input) into shared memory with 16-byte loads of the
 * input rows; warp w then computes output row w / 2 of the tile and channel group w % 2 (8
 * channels), each lane two neighbouring pixels, whose windows share a column: per window row
 * a lane reads its 15 halves as 4 8-byte shared loads. The weights are a kernel parameter
 * (__grid_constant__), so every multiply-add reads its weight from the constant bank at a
 * compile-time offset, as in conv_stem; the two channel groups are two copies of the loop (the
 * group is warp-uniform), and the warps of one scheduler all read the same group's 0.9 KB.
 * Each pixel's 8 channels leave as one 16-byte store.
 *
 * Where the stem alone reads the graph input (selfie's and landscape's), the per-node schedule
 * points it at the input's float staging (kr_cuda_op.x_f32, kr_cuda_pernode_bind_inputs): the
 * patch copy loads floats (32-byte pieces) and rounds each to half as kr_cuda_f32_to_f16 does,
 * so the conversion kernel before the stem (0.12 ms of selfie's batch 256, 50 M values read
 * and written) is left out with the same values.
 *
 * Summation order: that of conv_stem, so the results are the same bit for bit: from the bias,
 * the taps in (ky, kx) order and each tap's 3 channels in order, one fused multiply-add each,
 * in float; then the clamp and the folded activation; rounded to half once.
 */
#define SH_ROWS 4                      /* output rows of a tile */
#define SH_COLS 64                     /* output columns of a tile: 2 per lane */
#define SH_THREADS (SH_ROWS * 2 * 32)  /* a warp per row and channel group */
#define SH_PH (2 * (SH_ROWS - 1) + 3)  /* patch rows */
#define SH_PW (2 * (SH_COLS - 1) + 3)  /* patch pixels per row */
#define SH_PITCH 392                   /* halves per patch row: >= 3 SH_PW + 1, a multiple of 8 */
#define SH_CHUNKS (SH_PITCH / 8 + 1)   /* 16-byte pieces of the input covering a patch row */

/* The weights (OHWI, [16][27]) and biases of a half stem, as one kernel parameter. */
struct stem_half_weights {
    float w[16 * 27];
    float b[16];
};

struct stem_half_shape {
    int ih, iw, oh, ow, pt, pl, tiles_y, tiles_x;
    long long total; /* halves of the whole input (batch included) */
};

/* The 8 sums of channel group G (channels 8 G .. 8 G + 7) of the two pixels whose window rows
 * start at halves @p row[0], row[P], row[2 P] of the patch (P = SH_PITCH): a0 for the lane's
 * first pixel, a1 for the second (2 input pixels, 6 halves, to the right). */
template <int G>
__device__ __forceinline__ void stem_half_sums(const __half *row,
                                               const stem_half_weights &p, float *a0, float *a1)
{
#pragma unroll
    for (int n = 0; n < 8; n++)
        a0[n] = a1[n] = p.b[8 * G + n];
#pragma unroll
    for (int ky = 0; ky < 3; ky++) {
        float v[16]; /* 5 pixels x 3 channels (and one half past them) */
        const uint2 *q = reinterpret_cast<const uint2 *>(row + ky * SH_PITCH);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint2 u = q[i];
            const float2 lo = __half22float2(*reinterpret_cast<const __half2 *>(&u.x));
            const float2 hi = __half22float2(*reinterpret_cast<const __half2 *>(&u.y));
            v[4 * i] = lo.x, v[4 * i + 1] = lo.y, v[4 * i + 2] = hi.x, v[4 * i + 3] = hi.y;
        }
#pragma unroll
        for (int k = 0; k < 9; k++) /* (kx, c) */
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const float w = p.w[(8 * G + n) * 27 + ky * 9 + k];
                a0[n] = fmaf(v[k], w, a0[n]);
                a1[n] = fmaf(v[k + 6], w, a1[n]);
            }
    }
}

/* The 8 input values from element @p g0 on, as halves: TX = float (the graph input's float
 * staging, kr_cuda_op.x_f32) rounded as kr_cuda_f32_to_f16 rounds them. @p g0: a multiple of
 * 8 (16-byte aligned halves, 32-byte aligned floats). */
__device__ __forceinline__ void stem_half_piece(const __half *x, long long g0, __half *h)
{
    *reinterpret_cast<uint4 *>(h) = *reinterpret_cast<const uint4 *>(x + g0);
}
__device__ __forceinline__ void stem_half_piece(const float *x, long long g0, __half *h)
{
    const float4 a = *reinterpret_cast<const float4 *>(x + g0);
    const float4 b = *reinterpret_cast<const float4 *>(x + g0 + 4);
    __half2 *d = reinterpret_cast<__half2 *>(h);
    d[0] = __floats2half2_rn(a.x, a.y), d[1] = __floats2half2_rn(a.z, a.w);
    d[2] = __floats2half2_rn(b.x, b.y), d[3] = __floats2half2_rn(b.z, b.w);
}
__device__ __forceinline__ __half stem_half_value(const __half *x, long long i) { return x[i]; }
__device__ __forceinline__ __half stem_half_value(const float *x, long long i)
{
    return __float2half_rn(x[i]);
}

template <typename TX, int P>
__global__ void __launch_bounds__(SH_THREADS)
    conv_stem_half(const TX *__restrict__ x, __half *__restrict__ y,
                   const __grid_constant__ stem_half_weights p, stem_half_shape s, float lo,
                   float hi)
{
    __shared__ __align__(16) __half patch[SH_PH * SH_PITCH];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int t = blockIdx.x;
    const int tx = t % s.tiles_x;
    t /= s.tiles_x;
    const int ty = t % s.tiles_y, b = t / s.tiles_y;
    const int oy0 = ty * SH_ROWS, ox0 = tx * SH_COLS;
    const int iy0 = oy0 * 2 - s.pt, ix0 = ox0 * 2 - s.pl;

    /* The patch: row r holds input row iy0 + r, pixels ix0 .. ix0 + SH_PW - 1, at halves
     * [0, 3 SH_PW) (zeros outside the input; the halves after them unread). Each row is one run
     * of the input, copied as the 8-element pieces of the input that cover it (16 or 32 bytes,
     * aligned: the input is): piece c of row r starts at element base + 8 c, base = start
     * rounded down to a multiple of 8, and lands at patch half base + 8 c - start (halves that
     * fall outside [0, SH_PITCH) are not stored): one 16-byte store where the row starts at a
     * multiple of 8 elements (selfie's rows: 768 halves, tiles 384 apart), else 8 stores. */
    const int vlo = (ix0 < 0 ? -ix0 : 0) * 3;                               /* valid halves */
    const int vhi = ((ix0 + SH_PW < s.iw ? ix0 + SH_PW : s.iw) - ix0) * 3; /* of a row */
    for (int i = tid; i < SH_PH * SH_CHUNKS; i += SH_THREADS) {
        const int r = i / SH_CHUNKS, c = i - r * SH_CHUNKS, iy = iy0 + r;
        const bool row_in = (unsigned)iy < (unsigned)s.ih;
        const long long start = (((long long)b * s.ih + iy) * s.iw + ix0) * 3;
        const long long g0 = (start & ~7LL) + 8LL * c; /* the piece's first element */
        const int at = (int)(g0 - start);             /* its place in the patch row */
        __align__(16) __half h[8];
        const bool any = row_in && at + 8 > vlo && at < vhi;
        if (any && at >= vlo && at + 8 <= vhi) { /* wholly inside the input */
            stem_half_piece(x, g0, h);
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                h[j] = any && at + j >= vlo && at + j < vhi ? stem_half_value(x, g0 + j)
                                                            : __float2half_rn(0.0f);
        }
        __half *d = patch + r * SH_PITCH;
        if (at >= 0 && at + 8 <= SH_PITCH && (at & 7) == 0) { /* rows starting 16-byte aligned */
            *reinterpret_cast<uint4 *>(d + at) = *reinterpret_cast<const uint4 *>(h);
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int k = at + j;
                if (k >= 0 && k < SH_PITCH)
                    d[k] = h[j];
            }
        }
    }
    __syncthreads();

    const int row = warp >> 1, grp = warp & 1;
    const __half *src = patch + 2 * row * SH_PITCH + 12 * lane; /* pixel 4 lane of the row */
    float a0[8], a1[8];
    if (grp == 0)
        stem_half_sums<0>(src, p, a0, a1);
    else
        stem_half_sums<1>(src, p, a0, a1);
    const int oy = oy0 + row, ox = ox0 + 2 * lane;
    if (oy >= s.oh)
        return;
    kr_epilogue e;
    e.lo = lo, e.hi = hi, e.post = P, e.res = NULL;
#pragma unroll
    for (int n = 0; n < 8; n++)
        a0[n] = kr_apply(e, a0[n]), a1[n] = kr_apply(e, a1[n]);
    __half *o = y + (((size_t)b * s.oh + oy) * s.ow + ox) * 16 + 8 * grp;
    if (ox < s.ow)
        kr_stv<8>(o, a0);
    if (ox + 1 < s.ow)
        kr_stv<8>(o + 16, a1);
}

extern "C" int kr_cuda_conv_2d_stem_half_fits(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    if (!op->f16 || !op->caps || p->groups > 1 || op->node->n_inputs < 2 || op->residual ||
        op->cat.src[0] ||
        op->pool.src || op->scale.src || op->rs.src || op->add.src)
        return 0;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_tensor *bt =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    const int dh = p->dilation_h > 0 ? p->dilation_h : 1, dw = p->dilation_w > 0 ? p->dilation_w : 1;
    return xt->rank == 4 && wt->rank == 4 && yt->rank == 4 && xt->dims[3] == 3 &&
           wt->dims[0] == 16 && wt->dims[1] == 3 && wt->dims[2] == 3 && wt->dims[3] == 3 &&
           yt->dims[3] == 16 && wt->data && wt->dtype == KR_DTYPE_F32 &&
           (!bt || (bt->data && bt->dtype == KR_DTYPE_F32 && bt->dims[bt->rank - 1] == 16)) &&
           p->stride_h == 2 && p->stride_w == 2 && dh == 1 && dw == 1 && p->pad_top >= 0 &&
           p->pad_left >= 0 && kr_aligned(op->in[0], 16) && kr_aligned(op->out, 16);
}

/* Launches conv_stem_half for the activation @p e.post. */
template <typename TX>
static int launch_stem_half(const kr_cuda_op *op, const TX *x, size_t blocks,
                            const stem_half_weights &p, const stem_half_shape &s,
                            const kr_epilogue &e)
{
    const cudaStream_t st = (cudaStream_t)op->stream;
    __half *y = (__half *)op->out;
    const unsigned nb = (unsigned)blocks;
    switch (e.post) {
    case KR_CUDA_POST_RELU:
        conv_stem_half<TX, KR_CUDA_POST_RELU><<<nb, SH_THREADS, 0, st>>>(x, y, p, s, e.lo, e.hi);
        break;
    case KR_CUDA_POST_RELU6:
        conv_stem_half<TX, KR_CUDA_POST_RELU6><<<nb, SH_THREADS, 0, st>>>(x, y, p, s, e.lo, e.hi);
        break;
    case KR_CUDA_POST_HARD_SWISH:
        conv_stem_half<TX, KR_CUDA_POST_HARD_SWISH><<<nb, SH_THREADS, 0, st>>>(x, y, p, s, e.lo,
                                                                              e.hi);
        break;
    case KR_CUDA_POST_LOGISTIC:
        conv_stem_half<TX, KR_CUDA_POST_LOGISTIC><<<nb, SH_THREADS, 0, st>>>(x, y, p, s, e.lo,
                                                                            e.hi);
        break;
    default:
        conv_stem_half<TX, KR_CUDA_POST_NONE><<<nb, SH_THREADS, 0, st>>>(x, y, p, s, e.lo, e.hi);
    }
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_conv_2d_stem_half(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_tensor *bt =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? kr_in_t(op, 2) : NULL;
    const kr_window_params *wp = &op->node->p.window;
    stem_half_shape s;
    s.ih = xt->dims[1], s.iw = xt->dims[2], s.oh = yt->dims[1], s.ow = yt->dims[2];
    s.pt = wp->pad_top, s.pl = wp->pad_left;
    s.tiles_y = (s.oh + SH_ROWS - 1) / SH_ROWS, s.tiles_x = (s.ow + SH_COLS - 1) / SH_COLS;
    const int n = kr_dim(op, xt, 0);
    s.total = (long long)n * s.ih * s.iw * 3;
    const size_t blocks = (size_t)n * s.tiles_y * s.tiles_x;
    if (blocks >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    stem_half_weights p;
    memcpy(p.w, wt->data, sizeof(p.w));
    for (int i = 0; i < 16; i++)
        p.b[i] = bt ? ((const float *)bt->data)[i] : 0.0f;
    const kr_epilogue e = kr_make_epilogue(op, 1);
    return op->x_f32 ? launch_stem_half(op, (const float *)op->in[0], blocks, p, s, e)
                     : launch_stem_half(op, (const __half *)op->in[0], blocks, p, s, e);
}
