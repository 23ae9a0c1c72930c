/*
 * CONV_2D with one output channel (u2netp's side outputs: 3x3, 64 -> 1 at 320 x 320 down to
 * 10 x 10) for f16 instances of ONNX models on compute 8.0 and newer, on the CUDA cores.
 *
 * The tensor-core kernels (conv_2d_tc.cu) compute such a layer as 16 output channels of which
 * 15 are thrown away: the side output at 320 x 320 took 19 us a frame at batch 32 on the H100,
 * against a memory floor of about 4.4 us (13 MB read). Here L = ic / 8 lanes of a warp take one
 * output pixel, lane g channels [8g, 8g + 8) of every tap: per tap one 16-byte load per lane, so
 * a warp reads the whole channel rows of 32 / L consecutive pixels (coalesced), and 8 fused
 * multiply-adds with the lane's weights, read from shared memory (float; the block copies the
 * layer's weights there once, 9 KB at most, the two halves of each group's 8 apart so that the
 * groups' 16-byte reads fall in distinct banks). A 1x1 or 3x3 window (a template
 * parameter): all the taps' loads are issued before the multiply-adds. (With the taps in a loop
 * that left at the window's end and skipped taps outside the input, the loads ran one after the
 * other: 52 us at 320 x 320 on an H200.) The L partial sums are added by a butterfly of
 * shuffles; the first lane adds the bias, applies the clamp, the folded activation and the
 * residual (kr_conv_out) and stores the half.
 *
 * With the 72 weights of a 3x3 lane held in registers a thread took 121 of them: two 256-thread
 * blocks per multiprocessor, 64 pixels in flight. With the weights in shared memory a thread
 * holds its 9 loads and the sum: at most 64 registers (__launch_bounds__; 56 for 3x3), four
 * blocks per multiprocessor. Measured (session 11, H200, docs/notes/u2netp-kernels.md): u2netp's
 * side output at 320 x 320 took as long as before alone (33-35 us with its launch), while u2netp
 * at batch 8 and 32 gained about 1% with this and two other changes: the pixels in flight are
 * not what bounds this layer at batch 1.
 *
 * Summation order (ops/conv_2d.cuh, "one-output"): lane g from 0, over the taps in (ky, kx)
 * order (a tap outside the input adds nothing) and its 8 channels in order, in float; the lanes'
 * sums then by a butterfly of __shfl_xor from the farthest lane (L / 2) down to the nearest
 * (every lane ends with the same bits: each addition has the same two operands); + bias last.
 * Chosen by the layer's shape and the device class only, never the batch. The 3x3 windows of
 * stride 1 and dilation 1 from 16 channels and 4096 output pixels an item run on conv_one_row
 * (below: the same sums, fewer L1 wavefronts).
 *
 * On compute 9.0 a programmatic dependent launch as conv_tcp: the weights (constants) are
 * loaded before waiting for the kernel before; after the wait the next kernel may start.
 */
#include "nn/cuda/ops/conv_2d.cuh"

#define ONE_THREADS 256
/* Resident blocks per multiprocessor that conv_one<L, *>'s registers must allow (its
 * __launch_bounds__), and the grid's blocks per multiprocessor: 4 (at most 64 registers; ptxas
 * takes 56 for 3x3 windows); 2 for one lane per pixel (8 input channels), where every lane
 * reads the same weights and ptxas keeps all 72 in registers (it spilled at 64 and at 80). */
__host__ __device__ constexpr int one_blocks_per_sm(int lanes)
{
    return lanes == 1 ? 2 : 4;
}

struct one_shape {
    int ih, iw, ic, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
    int M; /* output pixels of the batch */
};

/* The block's copy of a one-output layer's float weights (OHWI of one output: [tap][ic]) in
 * conv_one's bank-conflict-free layout; every thread of the block takes part. */
template <int L, int TAPS>
__device__ __forceinline__ void one_stage_weights(float *ws, const float *__restrict__ w)
{
    constexpr int IC = 8 * L;
    for (int i = threadIdx.x; i < TAPS * IC; i += ONE_THREADS) {
        const int tap = i / IC, c = i % IC;
        ws[tap * IC + (c / 4 % 2) * 4 * L + c / 8 * 4 + c % 4] = w[i];
    }
}

template <int L, int KS>
__global__ void __launch_bounds__(ONE_THREADS, one_blocks_per_sm(L))
    conv_one(const __half *__restrict__ x, const float *__restrict__ w,
             const float *__restrict__ bias, __half *__restrict__ y, one_shape s, kr_epilogue e)
{
    constexpr int TAPS = KS * KS, IC = 8 * L; /* s.ic == IC (launch_l) */
    /* the weights, [tap][half][g][4]: channel 8 g + 4 h + j of a tap (OHWI of one output as
     * stored: [tap][ic]) at tap * IC + 4 L h + 4 g + j, so that the L groups' 16-byte reads of
     * one half are 16 L contiguous bytes (with [tap][ic], groups g and g + 4 read the same
     * banks: 2-way conflicts, half of the layer's shared-load wavefronts at 64 channels) */
    __shared__ __align__(16) float ws[TAPS * IC];
    const int g = threadIdx.x % L; /* the lane's channel group */
    one_stage_weights<L, TAPS>(ws, w);
    const float b0 = bias ? bias[0] : 0.0f;
    kr_pdl_wait();
    __syncthreads(); /* ws is in */
    /* pixels [m0, m0 + ONE_THREADS / L) per pass; m0 is the same for the whole block, so every
     * lane of a warp runs the same passes (the shuffles below need the whole warp) */
    constexpr int PPB = ONE_THREADS / L;
    for (long long m0 = (long long)blockIdx.x * PPB; m0 < s.M; m0 += (long long)gridDim.x * PPB) {
        const int m = (int)m0 + (int)threadIdx.x / L;
        const bool live = m < s.M;
        const int mm = live ? m : 0;
        const int ox = mm % s.ow, t = mm / s.ow;
        const int oy = t % s.oh, b = t / s.oh;
        const __half *xb = x + (size_t)b * s.ih * s.iw * s.ic + g * 8;
        /* every tap's load issued before any multiply-add (a tap outside the input reads the
         * image's first pixel and adds nothing): a branch between the loads kept them one
         * after the other */
        uint4 q[TAPS];
        bool ok[TAPS];
#pragma unroll
        for (int tap = 0; tap < TAPS; tap++) {
            const int ky = tap / KS, kx = tap % KS;
            const int iy = oy * s.sh - s.pt + ky * s.dh, ix = ox * s.sw - s.pl + kx * s.dw;
            ok[tap] = live && (unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw;
            const size_t off = ok[tap] ? ((size_t)iy * s.iw + ix) * s.ic : 0;
            q[tap] = *reinterpret_cast<const uint4 *>(xb + off);
        }
        float acc = 0.0f;
#pragma unroll
        for (int tap = 0; tap < TAPS; tap++) {
            if (!ok[tap])
                continue;
            const __half2 *h = reinterpret_cast<const __half2 *>(&q[tap]);
            const float4 *wk = reinterpret_cast<const float4 *>(ws + tap * IC + g * 4);
            const float4 w0 = wk[0], w1 = wk[L];
            const float wr[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 f = __half22float2(h[j]);
                acc = fmaf(f.x, wr[2 * j], acc);
                acc = fmaf(f.y, wr[2 * j + 1], acc);
            }
        }
#pragma unroll
        for (int off = L / 2; off >= 1; off /= 2)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (live && g == 0) {
            float v = kr_conv_out(acc, b0, 0.0f, false, kr_no_res(),
                                  [&](float a) { return kr_apply(e, a); });
            kr_add_res<__half, 1>(e, (size_t)m, &v);
            kr_st(y + m, v);
        }
    }
}

/*
 * conv_one_row: the 3x3 windows of stride 1 and dilation 1 (u2netp's six side outputs), L = ic / 8
 * lanes of a warp taking ONE_ROW_P consecutive output pixels of a row (a "slot"; a warp 32 / L
 * slots). conv_one's L1 traffic per warp pass of 32 / L pixels was 9 input loads of a pixel's
 * channel row and 18 weight reads (LDS.128, each 4 wavefronts at 8 lanes per pixel): 36 + 72
 * wavefronts for 4 pixels at 64 channels, 6x the layer's memory floor at 320 x 320. Here a lane
 * loads the P + 2 input columns of each of the 3 window rows once (18 loads for 4 pixels instead
 * of 36; all issued before the multiply-adds) and reads each tap's 8 weights once for its P
 * pixels (72 wavefronts for 16 pixels instead of 4). Each pixel's sum is conv_one's, bit for
 * bit: lane g from 0 over the taps in (ky, kx) order (a tap outside the input adds nothing) and
 * its 8 channels in order, fmaf in float; the butterfly as conv_one's; + bias. Lane p < P of a
 * slot stores pixel p (every lane holds every pixel's sum). The warps loop over the slots
 * independently (a warp's lanes run the same passes), so that the multiprocessors' shares of
 * the layer differ by at most one warp pass. 114-124 registers (18 loads of 16 bytes in
 * flight): two 256-thread blocks per multiprocessor.
 */
#define ONE_ROW_P 4

/* The slot of output pixels of conv_one_row a warp's lanes take: slot sl of the layer (xt slots
 * per output row; live: sl is one) starts at output pixel row * ow + ox0. */
struct one_slot {
    long long row; /* b x oh + oy */
    int ox0;
    bool live;
};

/* Slot @p sl of @p slots (@p xt per output row). */
__device__ __forceinline__ one_slot one_slot_of(long long sl, long long slots, int xt)
{
    one_slot o;
    o.live = sl < slots;
    const long long sm = o.live ? sl : 0;
    o.ox0 = (int)(sm % xt) * ONE_ROW_P;
    o.row = sm / xt;
    return o;
}

/* The ONE_ROW_P sums of slot @p o (before the bias), in every lane of the slot's L lanes
 * (conv_one_row's comment). The whole warp calls it (shuffles). */
template <int L>
__device__ __forceinline__ void one_row_sums(const __half *__restrict__ x, const float *ws,
                                             const one_shape &s, const one_slot &o,
                                             float (&acc)[ONE_ROW_P])
{
    constexpr int IC = 8 * L, P = ONE_ROW_P, C = P + 2;
    const int g = threadIdx.x % L;
    const int oy = (int)(o.row % s.oh), b = (int)(o.row / s.oh);
    const __half *xb = x + (size_t)b * s.ih * s.iw * s.ic + g * 8;
    uint4 q[3][C];
    bool okr[3], okc[C];
#pragma unroll
    for (int c = 0; c < C; c++)
        okc[c] = (unsigned)(o.ox0 - s.pl + c) < (unsigned)s.iw;
#pragma unroll
    for (int ky = 0; ky < 3; ky++) {
        const int iy = oy - s.pt + ky;
        okr[ky] = o.live && (unsigned)iy < (unsigned)s.ih;
#pragma unroll
        for (int c = 0; c < C; c++) {
            const size_t off =
                okr[ky] && okc[c] ? ((size_t)iy * s.iw + (o.ox0 - s.pl + c)) * s.ic : 0;
            q[ky][c] = *reinterpret_cast<const uint4 *>(xb + off);
        }
    }
#pragma unroll
    for (int p = 0; p < P; p++)
        acc[p] = 0.0f;
#pragma unroll
    for (int ky = 0; ky < 3; ky++)
#pragma unroll
        for (int kx = 0; kx < 3; kx++) {
            const float4 *wk = reinterpret_cast<const float4 *>(ws + (ky * 3 + kx) * IC + g * 4);
            const float4 w0 = wk[0], w1 = wk[L];
            const float wr[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int p = 0; p < P; p++) {
                if (!okr[ky] || !okc[p + kx])
                    continue;
                const __half2 *h = reinterpret_cast<const __half2 *>(&q[ky][p + kx]);
                float a = acc[p];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 f = __half22float2(h[j]);
                    a = fmaf(f.x, wr[2 * j], a);
                    a = fmaf(f.y, wr[2 * j + 1], a);
                }
                acc[p] = a;
            }
        }
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int off = L / 2; off >= 1; off /= 2)
            acc[p] += __shfl_xor_sync(0xffffffffu, acc[p], off);
}

/* The pixels of a slot that one lane stores: lane g of the slot's L lanes takes pixels g,
 * g + L, ... below ONE_ROW_P (every lane holds every pixel's sum): ONE_ROW_NP(L) of them. */
#define ONE_ROW_NP(L) ((ONE_ROW_P + (L) - 1) / (L))

/* Output pixel index of this lane's pixel @p i (< ONE_ROW_NP(L)) of slot @p o, -1 where that
 * pixel is past the row's end or the slot is none. */
template <int L>
__device__ __forceinline__ long long one_row_pixel(const one_slot &o, const one_shape &s, int i)
{
    const int p = i * L + (int)(threadIdx.x % L), ox = o.ox0 + p;
    return o.live && p < ONE_ROW_P && ox < s.ow ? o.row * s.ow + ox : -1;
}

/* Calls @p f(i, m, sum) for this lane's pixels i of slot @p o (one_row_pixel, m >= 0). */
template <int L, typename F>
__device__ __forceinline__ void one_row_each(const one_slot &o, const one_shape &s,
                                             const float (&acc)[ONE_ROW_P], F f)
{
    const int g = threadIdx.x % L;
#pragma unroll
    for (int i = 0; i < ONE_ROW_NP(L); i++) {
        const int p0 = i * L;
        float a = acc[p0];
#pragma unroll
        for (int p = 1; p < (ONE_ROW_P - p0 < L ? ONE_ROW_P - p0 : L); p++)
            a = g == p ? acc[p0 + p] : a;
        const long long m = one_row_pixel<L>(o, s, i);
        if (m >= 0)
            f(i, (size_t)m, a);
    }
}

template <int L>
__global__ void __launch_bounds__(ONE_THREADS, 2)
    conv_one_row(const __half *__restrict__ x, const float *__restrict__ w,
                 const float *__restrict__ bias, __half *__restrict__ y, one_shape s,
                 kr_epilogue e)
{
    __shared__ __align__(16) float ws[9 * 8 * L];
    one_stage_weights<L, 9>(ws, w);
    const float b0 = bias ? bias[0] : 0.0f;
    kr_pdl_wait();
    __syncthreads(); /* ws is in */
    const int xt = (s.ow + ONE_ROW_P - 1) / ONE_ROW_P;  /* slots per output row */
    const long long slots = (long long)s.M / s.ow * xt; /* s.M = batch x oh x ow */
    constexpr int SPW = 32 / L;                         /* slots per warp */
    const long long warp0 = (long long)blockIdx.x * (ONE_THREADS / 32) + threadIdx.x / 32;
    const long long warps = (long long)gridDim.x * (ONE_THREADS / 32);
    for (long long u = warp0 * SPW; u < slots; u += warps * SPW) {
        float acc[ONE_ROW_P];
        const one_slot o = one_slot_of(u + (int)(threadIdx.x % 32) / L, slots, xt);
        one_row_sums<L>(x, ws, s, o, acc);
        one_row_each<L>(o, s, acc, [&](int, size_t m, float a) {
            float v = kr_conv_out(a, b0, 0.0f, false, kr_no_res(),
                                  [&](float t) { return kr_apply(e, t); });
            kr_add_res<__half, 1>(e, m, &v);
            kr_st(y + m, v);
        });
    }
}

extern "C" int kr_cuda_conv_2d_one_fits(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    if (!op->f16 || !op->caps || !kr_gpu_has_mma_sync(op->caps) ||
        p->padding != KR_PADDING_EXPLICIT || p->groups > 1 || op->node->n_inputs < 2 ||
        op->cat.src[0] || op->pool.src || op->gcat.n)
        return 0;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    if (xt->rank != 4 || wt->rank != 4 || yt->rank != 4 || yt->dims[3] != 1 || wt->dims[0] != 1 ||
        wt->dtype != KR_DTYPE_F32 || wt->dims[3] != xt->dims[3] ||
        wt->dims[1] != wt->dims[2] || (wt->dims[1] != 1 && wt->dims[1] != 3) ||
        !kr_aligned(op->in[0], 16))
        return 0;
    const int ic = xt->dims[3];
    if (ic != 8 && ic != 16 && ic != 32 && ic != 64 && ic != 128 && ic != 256)
        return 0;
    if (op->node->n_inputs > 2 && op->node->inputs[2] >= 0 &&
        kr_in_t(op, 2)->dtype != KR_DTYPE_F32)
        return 0;
    return p->stride_h >= 1 && p->stride_w >= 1;
}

template <int L, int KS> static int launch_one(const kr_cuda_op *op, const one_shape &s)
{
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    /* at most the blocks the device holds at once (one_blocks_per_sm per multiprocessor),
     * looping over the pixels: each block copies the weights once (with a block per 256 / L
     * pixels, u2netp's side output at 320 x 320 issued eight times as many weight loads as input
     * loads); by the device's size, which changes no output's sum */
    const int per = ONE_THREADS / L, sms = op->caps->sms > 0 ? op->caps->sms : 1;
    int blocks = (s.M + per - 1) / per;
    if (blocks > one_blocks_per_sm(L) * sms)
        blocks = one_blocks_per_sm(L) * sms;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)(blocks < 65536 ? blocks : 65536)); /* blocks loop beyond */
    cfg.blockDim = dim3(ONE_THREADS);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, conv_one<L, KS>, (const __half *)op->in[0],
                                   (const float *)op->in[1], bias, (__half *)op->out, s,
                                   kr_make_epilogue(op, 1));
}

/* launch_one for the layer's lanes per pixel (ic / 8). */
template <int KS> static int launch_l(const kr_cuda_op *op, const one_shape &s)
{
    switch (s.ic / 8) {
    case 1: return launch_one<1, KS>(op, s);
    case 2: return launch_one<2, KS>(op, s);
    case 4: return launch_one<4, KS>(op, s);
    case 8: return launch_one<8, KS>(op, s);
    case 16: return launch_one<16, KS>(op, s);
    default: return launch_one<32, KS>(op, s);
    }
}

/* conv_one_row for the layer's lanes per pixel (16 to 256 input channels): at most the warps
 * two blocks per multiprocessor hold, each looping over its slots (by the device's size, which
 * changes no output's sum). */
template <int L> static int launch_row_l(const kr_cuda_op *op, const one_shape &s)
{
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    const long long xt = (s.ow + ONE_ROW_P - 1) / ONE_ROW_P, slots = (long long)s.M / s.ow * xt;
    const long long per = ONE_THREADS / L; /* slots per block pass */
    const int sms = op->caps->sms > 0 ? op->caps->sms : 1;
    long long blocks = (slots + per - 1) / per;
    if (blocks > 2LL * sms)
        blocks = 2LL * sms;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)blocks);
    cfg.blockDim = dim3(ONE_THREADS);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, conv_one_row<L>, (const __half *)op->in[0],
                                   (const float *)op->in[1], bias, (__half *)op->out, s,
                                   kr_make_epilogue(op, 1));
}

static int launch_row(const kr_cuda_op *op, const one_shape &s)
{
    switch (s.ic / 8) {
    case 2: return launch_row_l<2>(op, s);
    case 4: return launch_row_l<4>(op, s);
    case 8: return launch_row_l<8>(op, s);
    case 16: return launch_row_l<16>(op, s);
    default: return launch_row_l<32>(op, s);
    }
}

/* The one_shape of CONV_2D node @p n of @p op's graph at @p op's batch; 0 past 2^31 output
 * pixels. */
static int shape_of(const kr_cuda_op *op, const kr_node *n, one_shape *s)
{
    const kr_graph *g = op->graph;
    const kr_tensor *xt = &g->tensors[n->inputs[0]], *wt = &g->tensors[n->inputs[1]],
                    *yt = &g->tensors[n->outputs[0]];
    const kr_window_params *p = &n->p.window;
    s->ih = xt->dims[1], s->iw = xt->dims[2], s->ic = xt->dims[3];
    s->oh = yt->dims[1], s->ow = yt->dims[2];
    s->kh = wt->dims[1], s->kw = wt->dims[2];
    s->sh = p->stride_h, s->sw = p->stride_w;
    s->dh = p->dilation_h > 0 ? p->dilation_h : 1, s->dw = p->dilation_w > 0 ? p->dilation_w : 1;
    s->pt = p->pad_top, s->pl = p->pad_left;
    const size_t M = (size_t)kr_dim(op, yt, 0) * s->oh * s->ow;
    s->M = (int)M;
    return M < ((size_t)1 << 31);
}

/* Whether a layer of shape @p s runs on conv_one_row: a 3x3 window of stride and dilation 1, 16
 * channels or more, at least ONE_ROW_MIN_PIXELS output pixels an item (by the item's shape,
 * never the batch). Measured (session 15, H200, u2netp f16 batch 1 on the second stream):
 * 160 x 160 13.5 -> 11.8 us, 80 x 80 9.1 -> 6.2; but 40 x 40 5.7 -> 7.2, 20 x 20 3.6 -> 5.0,
 * 10 x 10 4.3 -> 6.4 (a lane group's 4 pixels one after the other: fewer lanes for few
 * pixels). */
#define ONE_ROW_MIN_PIXELS 4096
static int row_shape(const one_shape &s)
{
    return s.kh == 3 && s.ic >= 16 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 &&
           (long long)s.oh * s.ow >= ONE_ROW_MIN_PIXELS;
}

extern "C" int kr_cuda_conv_2d_one(const kr_cuda_op *op)
{
    one_shape s;
    if (!shape_of(op, op->node, &s))
        return (int)cudaErrorInvalidValue;
    if (row_shape(s))
        return launch_row(op, s);
    return s.kh == 1 ? launch_l<1>(op, s) : launch_l<3>(op, s);
}


/*
 * The gathered fuse layer (kr_cuda_conv_2d_one_gather): a 1x1 CONV_2D of one output channel
 * whose input is a CONCATENATION of n one-channel maps (u2netp's fuse layer: the six side maps,
 * 6 -> 1, with d0's LOGISTIC folded), reading channel c from map c itself, so that the
 * concatenation is never stored. V consecutive pixels per thread: 4 (one 8-byte load per map
 * and one store; 100 blocks at u2netp's 320 x 320), 1 where a map or the output is not 16-byte
 * aligned or the pixels are not a multiple of 4. Every map's load is issued before the
 * multiply-adds. Sum: from 0, channel c = 0 .. n - 1 in order, fmaf(x, w_c, acc) in float, then
 * + bias (kr_conv_out): the order of the kernel the unfolded layer gets (conv_gemm's zero-first
 * sum for 2-7 channels, with the zero products of its chunk's padding; conv_one<1, 1> for 8),
 * so the values are bit for bit those of the concatenation and that kernel. Memory-bound:
 * (n + 1) x 2 bytes a pixel. Where the layer writes a graph output (kr_cuda_op.y_f32: u2netp's
 * d0) it stores float into the output's staging, each value rounded to half first (the values
 * stored in half and converted), and the output's conversion is no kernel of its own.
 */
struct gcat_args {
    const __half *src[KR_CUDA_GCAT_MAX];
    float w[KR_CUDA_GCAT_MAX];
    float bias;
    int n;
};

template <int V, typename Y>
__global__ void __launch_bounds__(256)
    conv_one_gather(const __grid_constant__ gcat_args a, Y *__restrict__ y, int M, kr_epilogue e)
{
    kr_pdl_wait();
    const long long m0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (m0 >= M)
        return;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        acc[j] = 0.0f;
    /* (no branch between the loads: they are issued together) */
    float x[KR_CUDA_GCAT_MAX][V];
#pragma unroll
    for (int c = 0; c < KR_CUDA_GCAT_MAX; c++)
        if (c < a.n)
            kr_ldv<V>(a.src[c] + m0, x[c]);
#pragma unroll
    for (int c = 0; c < KR_CUDA_GCAT_MAX; c++)
        if (c < a.n) {
#pragma unroll
            for (int j = 0; j < V; j++)
                acc[j] = fmaf(x[c][j], a.w[c], acc[j]);
        }
    /* conv_gemm (n < 8) adds the zero products of its 16-deep chunk's padding, which turn a sum
     * of -0 into +0 */
    if (a.n < 8) {
#pragma unroll
        for (int j = 0; j < V; j++)
            acc[j] = fmaf(0.0f, 0.0f, acc[j]);
    }
    float v[V];
#pragma unroll
    for (int j = 0; j < V; j++) {
        v[j] = kr_conv_out(acc[j], a.bias, 0.0f, false, kr_no_res(),
                           [&](float t) { return kr_apply(e, t); });
        kr_add_res<__half, 1>(e, (size_t)m0 + j, &v[j]);
        if (sizeof(Y) == 4) /* the float staging of a graph output: its conversion's values */
            v[j] = __half2float(__float2half_rn(v[j]));
    }
    kr_stv<V>(y + m0, v);
}

extern "C" int kr_cuda_conv_2d_one_gather_fits(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    if (!op->f16 || !op->caps || !kr_gpu_has_mma_sync(op->caps) || op->gcat.n < 2 ||
        op->gcat.n > KR_CUDA_GCAT_MAX || p->groups > 1 || op->node->n_inputs < 2 ||
        op->cat.src[0] || op->pool.src || op->scale.src || op->rs.src || op->add.src || op->x_f32)
        return 0;
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    if (xt->rank != 4 || wt->rank != 4 || yt->rank != 4 || yt->dims[3] != 1 || wt->dims[0] != 1 ||
        wt->dims[1] != 1 || wt->dims[2] != 1 || wt->dims[3] != op->gcat.n ||
        xt->dims[3] != op->gcat.n || wt->dtype != KR_DTYPE_F32 || !wt->data ||
        xt->dims[1] != yt->dims[1] || xt->dims[2] != yt->dims[2])
        return 0;
    /* an ONNX layer (explicit padding, as kr_cuda_conv_2d_one_fits): no other kernel before the
     * GEMM takes it unfolded (a different order of sums) */
    if (p->padding != KR_PADDING_EXPLICIT || p->pad_top != 0 || p->pad_left != 0 ||
        p->pad_bottom != 0 || p->pad_right != 0)
        return 0;
    if (p->stride_h != 1 || p->stride_w != 1)
        return 0;
    if (op->node->n_inputs > 2 && op->node->inputs[2] >= 0 &&
        (kr_in_t(op, 2)->dtype != KR_DTYPE_F32 || !kr_in_t(op, 2)->data))
        return 0;
    for (int c = 0; c < op->gcat.n; c++)
        if (!op->gcat.src[c])
            return 0;
    return 1;
}

extern "C" int kr_cuda_conv_2d_one_gather(const kr_cuda_op *op)
{
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const size_t M = (size_t)kr_dim(op, yt, 0) * yt->dims[1] * yt->dims[2];
    if (M >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    gcat_args a = {};
    a.n = op->gcat.n;
    const float *w = (const float *)wt->data;
    a.bias = op->node->n_inputs > 2 && op->node->inputs[2] >= 0
                 ? ((const float *)kr_in_t(op, 2)->data)[0]
                 : 0.0f;
    int vec = M % 4 == 0 && kr_aligned(op->out, 16) &&
              (!op->residual || kr_aligned(op->residual, 16));
    for (int c = 0; c < a.n; c++) {
        a.src[c] = (const __half *)op->gcat.src[c];
        a.w[c] = w[c];
        vec = vec && kr_aligned(a.src[c], 16);
    }
    const int V = vec ? 4 : 1;
    const size_t threads = (M + V - 1) / V;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)((threads + 255) / 256));
    cfg.blockDim = dim3(256);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    const kr_epilogue e = kr_make_epilogue(op, 1);
    if (op->y_f32)
        return vec ? (int)cudaLaunchKernelEx(&cfg, conv_one_gather<4, float>, a,
                                             (float *)op->out, (int)M, e)
                   : (int)cudaLaunchKernelEx(&cfg, conv_one_gather<1, float>, a,
                                             (float *)op->out, (int)M, e);
    return vec ? (int)cudaLaunchKernelEx(&cfg, conv_one_gather<4, __half>, a, (__half *)op->out,
                                         (int)M, e)
               : (int)cudaLaunchKernelEx(&cfg, conv_one_gather<1, __half>, a, (__half *)op->out,
                                         (int)M, e);
}
