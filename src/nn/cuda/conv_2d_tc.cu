/*
 * CONV_2D on the tensor cores for compute capability 8.0 and newer, f16 instances: an implicit
 * GEMM Y[m, n] = act(bias[n] + sum_k X'[m, k] * W[n, k]) (m = (b, oy, ox), n = output channel,
 * k = (ky, kx, ic), the OHWI weight layout) with mma.sync m16n8k16 (half inputs, float
 * accumulation). kr_cuda_conv_2d hands it the layers of kr_cuda_conv_2d_tc_fits (ops.h): the
 * ONNX models' layers; the TFLite models keep their CUDA-core paths.
 *
 * Data: the weights are read in half from op->w16, the OHWI weights rounded to half once at set-up
 * (backend.c; nothing is converted per run). The input is NHWC half. Each 16-byte chunk of a
 * shared-memory row is 8 consecutive k, which lie in one tap because the input channels are a
 * multiple of 8; a chunk outside the input (padding) or past M, N or K is zero-filled by cp.async.
 * With op->cat.src[0] set (a CONCATENATION along the channels folded into the convolution,
 * fusion.h) a chunk reads channels [c, c + 8) from the first source below cat.c0 and from the
 * second above; a source with a resize (op->cat.rz) is sampled bilinearly as RESIZE_BILINEAR
 * computes it (ops/resize_bilinear.cuh) and rounded to half, the value the unfused RESIZE would
 * have stored, with ordinary loads into the same pipeline stage. With op->pool.src set (a
 * MAX_POOL_2D folded into the convolution) each input pixel is the pool's window maximum over
 * that source, taken in half (exact: the value the pool would have stored).
 *
 * Tiling: 4 warps compute a BM x BN tile of Y (BN 16, 32 or 64 by the layer's output channels,
 * BM 128, or 64 where 128 would leave the multiprocessors short of blocks: a choice by M, which
 * changes no output's sum). k steps by 32 through a 3-stage cp.async pipeline in shared memory
 * (rows padded to 80 bytes: ldmatrix reads 8 rows without bank conflicts); each warp loads its A
 * and B fragments with ldmatrix.x4 and issues MI x NI mma.sync per 16 k. The epilogue runs from
 * the accumulator registers: bias, clamp, folded activation and residual (kr_conv_out,
 * ops/conv_2d.cuh), stored as half pairs.
 *
 * Summation order (ops/conv_2d.cuh lists it with the others): per output, from 0, the 16-deep
 * chunks of k in order (k past K counts as zero products), each chunk's products summed as the
 * tensor core sums them in float; the bias last. It depends only on the layer, not on the batch
 * or the tile.
 *
 * The shared pieces (the shape, the mma/ldmatrix/cp.async wrappers, the gathers, the epilogue and
 * the patch kernel's tile, tcp_tile) are in conv_2d_tc.cuh, which the chain kernel of small
 * layers (conv_2d_tc_chain.cu) also runs; a chain's head comes here and is handed over to it.
 */
#include "nn/cuda/conv_2d_tc.cuh"

template <int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(TC_THREADS)
    conv_tc(const __half *__restrict__ x, const __half *__restrict__ x1,
            const __half *__restrict__ w, const float *__restrict__ bias, __half *__restrict__ y,
            tc_shape s, kr_epilogue e)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    typedef tc_tile<BM, BN, WM, WN> tl;
    static_assert(WM * WN == 4, "conv_tc: 4 warps (TC_THREADS)");
    constexpr int MI = tl::MI, NI = tl::NI, AR = tl::AROWS;
    __shared__ __align__(128) __half As[TC_STAGES][BM][TC_LDS];
    __shared__ __align__(128) __half Bs[TC_STAGES][BN][TC_LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;

    /* the A rows this thread loads (rows tid / 4 + 32 i, chunk tid % 4 of each stage) */
    const int ach = tid & 3;
    int a_b[AR], a_iy[AR], a_ix[AR];
#pragma unroll
    for (int i = 0; i < AR; i++) {
        const int m = m0 + (tid >> 2) + 32 * i;
        if (m < s.M) {
            const int ox = m % s.ow, t = m / s.ow;
            a_iy[i] = (t % s.oh) * s.sh - s.pt;
            a_ix[i] = ox * s.sw - s.pl;
            a_b[i] = t / s.oh;
        } else {
            a_b[i] = -1, a_iy[i] = 0, a_ix[i] = 0;
        }
    }
    const int ktiles = (s.K + TC_BK - 1) / TC_BK;
#if __CUDA_ARCH__ >= 900
    /* a programmatic dependent launch on 9.0 (launch_tile): the kernel before may still be
     * running until here; nothing is read or written before this */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif

    auto load_stage = [&](int st, int kt) {
        const int k = kt * TC_BK + ach * 8;
        const bool kin = k < s.K;
        const int tap = kin ? k / s.ic : 0, c = k - tap * s.ic;
        const int ky = tap / s.kw, kx = tap - ky * s.kw;
        /* which source: the input, or a side of the folded concatenation */
        const __half *src = x;
        int cs = s.ic, cc = c, resized = 0;
        if (s.c0) {
            const bool second = c >= s.c0;
            src = second ? x1 : x;
            cs = second ? s.ic - s.c0 : s.c0;
            cc = second ? c - s.c0 : c;
            resized = s.rz == (second ? 1 : 0);
        }
#pragma unroll
        for (int i = 0; i < AR; i++) {
            const int r = (tid >> 2) + 32 * i;
            const int iy = a_iy[i] + ky * s.dh, ix = a_ix[i] + kx * s.dw;
            const bool ok = kin && a_b[i] >= 0 && (unsigned)iy < (unsigned)s.ih &&
                            (unsigned)ix < (unsigned)s.iw;
            __half *dst = &As[st][r][ach * 8];
            if (resized || s.pool) {
                uint4 v = make_uint4(0, 0, 0, 0);
                if (ok)
                    v = s.pool ? tc_pooled8<false>(src, s, a_b[i], iy, ix, cc)
                               : tc_resized8<false>(src, s, a_b[i], iy, ix, cc, cs);
                *reinterpret_cast<uint4 *>(dst) = v;
            } else {
                const __half *p =
                    ok ? src + (((size_t)a_b[i] * s.ih + iy) * s.iw + ix) * cs + cc : x;
                tc_cp16<true>(tc_smem(dst), p, ok);
            }
        }
#pragma unroll
        for (int j = 0; j < (BN * 4 + TC_THREADS - 1) / TC_THREADS; j++) {
            const int chunk = tid + j * TC_THREADS;
            if (chunk < BN * 4) {
                const int n = chunk >> 2, kb = kt * TC_BK + (chunk & 3) * 8;
                const bool ok = n0 + n < s.oc && kb < s.K;
                const __half *p = ok ? w + (size_t)(n0 + n) * s.K + kb : w;
                tc_cp16<false>(tc_smem(&Bs[st][n][(chunk & 3) * 8]), p, ok);
            }
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                acc[i][j][q] = 0.0f;

#pragma unroll
    for (int st = 0; st < TC_STAGES - 1; st++) {
        if (st < ktiles)
            load_stage(st, st);
        tc_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        tc_wait<TC_STAGES - 2>();
        __syncthreads(); /* stage kt is in for every thread; stage kt - 1 is read by all */
        const int nk = kt + TC_STAGES - 1;
        if (nk < ktiles)
            load_stage(nk % TC_STAGES, nk);
        tc_commit();
        const int st = kt % TC_STAGES;
#pragma unroll
        for (int kk = 0; kk < TC_BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++)
                tc_ldsm4(a[i], tc_smem(&As[st][wm * tl::TM + i * 16 + (lane & 15)]
                                          [kk + (lane >> 4) * 8]));
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                unsigned r[4];
                tc_ldsm4(r, tc_smem(&Bs[st][wn * tl::TN + j * 8 + (lane >> 4) * 8 + (lane & 7)]
                                       [kk + ((lane >> 3) & 1) * 8]));
                b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++)
                    tc_mma(acc[i][j], a[i], b[j]);
        }
    }
    tc_wait<0>(); /* no copy left in flight at exit */

#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int m = m0 + wm * tl::TM + i * 16 + (lane >> 2) + h * 8;
            if (m >= s.M)
                continue;
#pragma unroll
            for (int j = 0; j < NI; j++)
                tc_store2<false>(y, bias, e, s.oc, (size_t)m * s.oc,
                          n0 + wn * tl::TN + j * 8 + (lane & 3) * 2, acc[i][j][h * 2],
                          acc[i][j][h * 2 + 1]);
        }
#else
    __trap(); /* built without mma.sync / cp.async for this device: fail loudly */
#endif
}

/* The patch kernel (conv_tcp, conv_2d_tc.cuh's tcp_tile): one tile per block. */
template <int TH, int BN, int WM, int WN, int GK>
__global__ void __launch_bounds__(WM * WN * 32)
    conv_tcp(const __half *__restrict__ x, const __half *__restrict__ x1,
             const __half *__restrict__ w, const float *__restrict__ bias, __half *__restrict__ y,
             tc_shape s, kr_epilogue e)
{
    extern __shared__ uint4 tp_shared[];
    tcp_tile<TH, BN, WM, WN, GK, false>(reinterpret_cast<__half *>(tp_shared), x, x1, w, bias, y,
                                        s, e, (int)blockIdx.x, (int)blockIdx.y * BN);
}

/* How many blocks of conv_tcp<TH, BN, WM, WN, GK> for layer @p s the device holds at once (blocks
 * per multiprocessor by the occupancy calculator, times the multiprocessors); 0 when the tile's
 * shared memory does not fit or the calculator fails (its error is cleared). */
template <int TH, int BN, int WM, int WN, int GK>
static size_t tp_slots_of(const kr_cuda_op *op, tc_shape s)
{
    tp_geometry(s, TH);
    const size_t smem = tp_smem_bytes(s, BN);
    if (smem > TP_SMEM_MAX || smem > op->caps->smem_block_optin)
        return 0;
    int n = 0;
    if ((smem > 48 * 1024 &&
         cudaFuncSetAttribute(conv_tcp<TH, BN, WM, WN, GK>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)smem) != cudaSuccess) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, conv_tcp<TH, BN, WM, WN, GK>, WM * WN * 32,
                                                      smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (size_t)n * (size_t)(op->caps->sms > 0 ? op->caps->sms : 1);
}

/* tp_slots_of for the instance kr_cuda_conv_2d_tc launches for @p bn and @p th. */
template <int GK> static size_t tp_slots(const kr_cuda_op *op, const tc_shape &s, int bn, int th)
{
    if (bn == 16)
        return th == 4   ? tp_slots_of<4, 16, 4, 1, GK>(op, s)
               : th == 8 ? tp_slots_of<8, 16, 4, 1, GK>(op, s)
                         : tp_slots_of<16, 16, 8, 1, GK>(op, s);
    if (bn == 32)
        return th == 4   ? tp_slots_of<4, 32, 2, 2, GK>(op, s)
               : th == 8 ? tp_slots_of<8, 32, 4, 1, GK>(op, s)
                         : tp_slots_of<16, 32, 8, 1, GK>(op, s);
    return th == 4   ? tp_slots_of<4, 64, 2, 2, GK>(op, s)
           : th == 8 ? tp_slots_of<8, 64, 2, 2, GK>(op, s)
                     : tp_slots_of<16, 64, 4, 2, GK>(op, s);
}

template <int TH, int BN, int WM, int WN, int GK>
static int launch_patch(const kr_cuda_op *op, tc_shape s, const __half *x0, const __half *x1,
                        const float *bias, int batch)
{
    tp_geometry(s, TH);
    const size_t smem = tp_smem_bytes(s, BN);
    cudaError_t err;
    if (smem > 48 * 1024 &&
        (err = cudaFuncSetAttribute(conv_tcp<TH, BN, WM, WN, GK>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) !=
            cudaSuccess)
        return (int)err;
    const size_t blocks = (size_t)batch * s.tiles_y * s.tiles_x;
    if (blocks >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    /* on compute 9.0 a programmatic dependent launch: the blocks start (index arithmetic, the
     * first weights) while the kernel before finishes; the kernel waits for it
     * (griddepcontrol.wait) before reading any activation or writing */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)blocks, (unsigned)((s.oc + BN - 1) / BN));
    cfg.blockDim = dim3(WM * WN * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, conv_tcp<TH, BN, WM, WN, GK>, x0, x1,
                                   (const __half *)op->w16, bias, (__half *)op->out, s,
                                   kr_make_epilogue(op, 1));
}

/* launch_patch for @p bn and @p th: the instance (warps) of each tile shape. */
template <int GK>
static int launch_patch_th(const kr_cuda_op *op, const tc_shape &s, const __half *x0,
                           const __half *x1, const float *bias, int batch, int bn, int th)
{
    if (bn == 16)
        return th == 4   ? launch_patch<4, 16, 4, 1, GK>(op, s, x0, x1, bias, batch)
               : th == 8 ? launch_patch<8, 16, 4, 1, GK>(op, s, x0, x1, bias, batch)
                         : launch_patch<16, 16, 8, 1, GK>(op, s, x0, x1, bias, batch);
    if (bn == 32)
        return th == 4   ? launch_patch<4, 32, 2, 2, GK>(op, s, x0, x1, bias, batch)
               : th == 8 ? launch_patch<8, 32, 4, 1, GK>(op, s, x0, x1, bias, batch)
                         : launch_patch<16, 32, 8, 1, GK>(op, s, x0, x1, bias, batch);
    return th == 4   ? launch_patch<4, 64, 2, 2, GK>(op, s, x0, x1, bias, batch)
           : th == 8 ? launch_patch<8, 64, 2, 2, GK>(op, s, x0, x1, bias, batch)
                     : launch_patch<16, 64, 4, 2, GK>(op, s, x0, x1, bias, batch);
}

/* The row kernel; on compute 9.0 a programmatic dependent launch, as launch_patch's. */
template <int BM, int BN, int WM, int WN>
static int launch_tile(const kr_cuda_op *op, const tc_shape &s, const __half *x0,
                       const __half *x1, const float *bias)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)((s.M + BM - 1) / BM), (unsigned)((s.oc + BN - 1) / BN));
    cfg.blockDim = dim3(TC_THREADS);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = (cudaStream_t)op->stream;
    cfg.attrs = attr;
    cfg.numAttrs = op->caps->major >= 9 ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, conv_tc<BM, BN, WM, WN>, x0, x1,
                                   (const __half *)op->w16, bias, (__half *)op->out, s,
                                   kr_make_epilogue(op, 1));
}

/* Whether layer @p op's input channels, alignment and device allow the kernel (before the
 * choice of where it pays). */
static int tc_possible(const kr_cuda_op *op)
{
    const kr_window_params *p = &op->node->p.window;
    if (!op->f16 || !op->w16 || !op->caps || !kr_gpu_has_mma_sync(op->caps) || p->groups > 1 ||
        op->node->n_inputs < 2)
        return 0;
    const kr_tensor *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const int ic = wt->dims[3];
    if (wt->rank != 4 || yt->rank != 4 || ic % 8 || wt->dims[0] != yt->dims[3] ||
        !kr_aligned(op->w16, 16) || !kr_aligned(op->out, 4) ||
        (op->residual && !kr_aligned(op->residual, 4)))
        return 0;
    if (op->pool.src) /* the folded pool's source (fusion.c checked its shape) */
        return !op->cat.src[0] && kr_aligned(op->pool.src, 16);
    if (op->cat.src[0]) /* the folded concatenation's sources (fusion.c checked their shapes) */
        return op->cat.c0 > 0 && op->cat.c0 < ic && op->cat.c0 % 8 == 0 &&
               kr_aligned(op->cat.src[0], 16) &&
               kr_aligned(op->cat.src[1], 16);
    const kr_tensor *xt = kr_in_t(op, 0);
    return xt->rank == 4 && xt->dims[3] == ic && kr_aligned(op->in[0], 16);
}

extern "C" int kr_cuda_conv_2d_tc_fits(const kr_cuda_op *op)
{
    /* ONNX layers (explicit padding) only, as the WMMA kernel before it: the TFLite models keep
     * their CUDA-core paths, which sum alike on every compute capability (an emulated older
     * class gives the device's results bit for bit, test_gpu_caps_gpu) and measured faster on
     * the H100 at batch 256 than this kernel on their 1x1 layers (selfie f16 68,162 against
     * 72,534 frames/s, face-short 121,270 against 124,389, with the layers of K >= 32 and
     * N >= 32 on it) */
    return op->node->p.window.padding == KR_PADDING_EXPLICIT && tc_possible(op);
}

extern "C" int kr_cuda_conv_2d_tc(const kr_cuda_op *op)
{
    if (op->chain) /* the head of a chain of small layers (fusion.h): one launch for all */
        return kr_cuda_conv_2d_tc_chain(op);
    tc_shape s;
    const __half *x0, *x1;
    const float *bias;
    size_t batch;
    const int bad = tc_shape_of(op, &s, &x0, &x1, &bias, &batch);
    if (bad)
        return bad;
    const int bn = s.oc <= 16 ? 16 : s.oc <= 32 ? 32 : 64;
    const size_t ntiles = (size_t)(s.oc + bn - 1) / bn;
    const size_t sms = (size_t)(op->caps->sms > 0 ? op->caps->sms : 1);
    if (tc_use_patch(op, s, bn)) {
        /* the tile height by M (which changes no output's sum): 16 rows (8 warps, the weights
         * staged once for 256 pixels) where that still gives two blocks per multiprocessor and
         * its patch fits, 4 rows where 8-row tiles would not, else 8 */
        const size_t tx = (size_t)(s.ow + TP_TW - 1) / TP_TW;
        const size_t t8 = batch * ((s.oh + 7) / 8) * tx * ntiles;
        const size_t t16 = batch * ((s.oh + 15) / 16) * tx * ntiles;
        tc_shape s16 = s;
        tp_geometry(s16, 16);
        const size_t smem16 = tp_smem_bytes(s16, bn);
        int th = t8 < 2 * sms ? 4
                 : t16 >= 2 * sms && smem16 <= TP_SMEM_MAX && smem16 <= op->caps->smem_block_optin
                     ? 16
                     : 8;
        /* where those tiles take more than one round of the blocks the device holds at once
         * and 8 (else 16) rows take one, the latter: at batch 1 u2netp's 160 x 160 layers of 64
         * outputs gave 400 4-row blocks against 396 places (4 blocks in a second round), its
         * 320 x 320 layers of 16 outputs 400 16-row blocks against 264 */
        /* GK: the instance with the gathered loads (a folded pool or resize), else without
         * them (the kernel's code, and its instruction fetches, a third smaller) */
        const int gk = s.pool || (s.c0 && s.rz >= 0);
        auto slots = [&](int t) { return gk ? tp_slots<1>(op, s, bn, t) : tp_slots<0>(op, s, bn, t); };
        const size_t here = slots(th);
        if (here && batch * ((s.oh + th - 1) / th) * tx * ntiles > here)
            for (int alt = 8; alt <= 16; alt += 8) {
                const size_t places = alt == th ? 0 : slots(alt);
                if (places && batch * ((s.oh + alt - 1) / alt) * tx * ntiles <= places) {
                    th = alt;
                    break;
                }
            }
        return gk ? launch_patch_th<1>(op, s, x0, x1, bias, (int)batch, bn, th)
                  : launch_patch_th<0>(op, s, x0, x1, bias, (int)batch, bn, th);
    }
    /* BM 64 where 128-row tiles would give fewer than two blocks per multiprocessor */
    const int small = (((size_t)s.M + 127) / 128) * ntiles < 2 * sms;
    if (bn == 16)
        return small ? launch_tile<64, 16, 4, 1>(op, s, x0, x1, bias)
                     : launch_tile<128, 16, 4, 1>(op, s, x0, x1, bias);
    if (bn == 32)
        return small ? launch_tile<64, 32, 2, 2>(op, s, x0, x1, bias)
                     : launch_tile<128, 32, 4, 1>(op, s, x0, x1, bias);
    return small ? launch_tile<64, 64, 2, 2>(op, s, x0, x1, bias)
                 : launch_tile<128, 64, 2, 2>(op, s, x0, x1, bias);
}
