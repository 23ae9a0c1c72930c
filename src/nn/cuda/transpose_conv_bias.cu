/*
 * MediaPipe's Convolution2DTransposeBias in gather form: y[b,oy,ox,o] = bias[o] +
 * sum over (ky, kx) with oy = iy*S - pad_top + ky (and likewise x) for an input pixel (iy, ix)
 * inside the input, of sum_ic x[b,iy,ix,ic] * W[o,ky,kx,ic] (OHWI). No fused activation of its
 * own (a folded following activation and residual are applied).
 *
 * Two kernels:
 *  - tconv_tiles, when the kernel equals the stride without padding (the segmentation models'
 *    2x2 stride-2 output layer): every output pixel takes exactly one input pixel and one tap,
 *    so a thread takes one input pixel, holds its channels in registers (vector loads) and
 *    writes its S x S block of outputs: each input is read once, no index search;
 *    (tconv_2x2_one: the 2x2 stride-2 layers of one output channel, the weights in registers,
 *    the same sums);
 *  - tconv_kernel otherwise: one thread per output element, searching the taps that reach it.
 */
#include "nn/cuda/ops/transpose_conv_bias.cuh"

template <typename T, typename I>
__global__ void tconv_kernel(const T *__restrict__ x, const float *__restrict__ w,
                             const float *__restrict__ bias, T *__restrict__ y, I total,
                             tc_shape s, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        int oy, ox, o;
        const I b = kr_nhwc_split(i, s.oc, s.ow, s.oh, &oy, &ox, &o);
        float acc = tc_gather<T, 1, I>(x, w, s, b, oy, ox, o);
        float v = kr_apply(e, acc + (bias ? kr_ld(bias + o) : 0.0f));
        kr_add_res<T, 1>(e, i, &v);
        kr_st(y + i, v);
    }
}

/* Kernel == stride, no padding; IC input channels (a multiple of 4). */
template <typename T, int IC, typename I>
__global__ void tconv_tiles(const T *__restrict__ x, const float *__restrict__ w,
                            const float *__restrict__ bias, T *__restrict__ y, I pixels,
                            tc_shape s, kr_epilogue e)
{
    for (I p = blockIdx.x * (I)blockDim.x + threadIdx.x; p < pixels;
         p += (I)gridDim.x * blockDim.x) {
        int ix = (int)(p % s.iw);
        I q = p / s.iw;
        int iy = (int)(q % s.ih);
        I b = q / s.ih;
        float in[IC];
#pragma unroll
        for (int c = 0; c < IC; c += 4)
            kr_ldv<4>(x + p * IC + c, in + c);
        for (int ky = 0; ky < s.kh; ky++) {
            I row = ((b * s.oh + (I)(iy * s.sh + ky)) * s.ow + (I)ix * s.sw) * s.oc;
            for (int kx = 0; kx < s.kw; kx++)
                for (int o = 0; o < s.oc; o++) {
                    const float *wp = w + ((o * s.kh + ky) * s.kw + kx) * IC;
                    float acc = bias ? __ldg(bias + o) : 0.0f;
#pragma unroll
                    for (int c = 0; c < IC; c++)
                        acc = fmaf(in[c], __ldg(wp + c), acc);
                    acc = kr_apply(e, acc);
                    I idx = row + (I)kx * s.oc + o;
                    kr_add_res<T, 1>(e, idx, &acc);
                    kr_st(y + idx, acc);
                }
        }
    }
}

/* tconv_tiles' values for the segmentation models' output layer (2x2, stride 2, one output
 * channel, IC = 8 or 16 inputs): the 4 x IC weights and the bias held in registers for all the
 * pixels a thread takes (the grid is a few waves, each thread looping), each output row's two
 * values stored together (__half2 or float2). Sums as tconv_tiles: from the bias, the channels
 * in order, one fmaf each; then the epilogue and residual. Loads of V channels (8 halves: 16
 * bytes where the input is aligned so, else 4); output row 2 r + ky of input row r = p / iw
 * over all items (one division per pixel; item and row separately took two). Session 12 tried
 * two lanes per pixel with coalesced 16-byte loads for halves (tconv_2x2_h16): 114 us against
 * this kernel's 90 for selfie at batch 256, as the layer is bound by instructions
 * (docs/notes/cuda-per-node-kernels.md). */
template <typename T, int IC, int V, typename I>
__global__ void __launch_bounds__(128, 8) /* 64 registers: 8 blocks per multiprocessor */
    tconv_2x2_one(const T *__restrict__ x, const float *__restrict__ w,
                  const float *__restrict__ bias, T *__restrict__ y, I pixels, int iw,
                  kr_epilogue e)
{
    float wr[4][IC]; /* [ky * 2 + kx][c]: OHWI with o = 0 */
#pragma unroll
    for (int t = 0; t < 4; t++)
#pragma unroll
        for (int c = 0; c < IC; c++)
            wr[t][c] = __ldg(w + t * IC + c);
    const float b0 = bias ? __ldg(bias) : 0.0f;
    const I ow = 2 * (I)iw;
    for (I p = blockIdx.x * (I)blockDim.x + threadIdx.x; p < pixels;
         p += (I)gridDim.x * blockDim.x) {
        const I r = p / (I)iw, ix = p - r * (I)iw;
        float in[IC];
#pragma unroll
        for (int c = 0; c < IC; c += V)
            kr_ldv<V>(x + p * IC + c, in + c);
#pragma unroll
        for (int ky = 0; ky < 2; ky++) {
            float v[2];
#pragma unroll
            for (int kx = 0; kx < 2; kx++) {
                float acc = b0;
#pragma unroll
                for (int c = 0; c < IC; c++)
                    acc = fmaf(in[c], wr[ky * 2 + kx][c], acc);
                v[kx] = kr_apply(e, acc);
            }
            const I idx = (2 * r + (I)ky) * ow + 2 * ix;
            kr_add_res<T, 1>(e, idx, &v[0]);
            kr_add_res<T, 1>(e, idx + 1, &v[1]);
            kr_stv<2>(y + idx, v);
        }
    }
}

/* tconv_2x2_one where it applies (see there; the output and residual aligned to two elements);
 * 0 when it does not. */
template <typename T, typename I> static int launch_2x2_one(const kr_cuda_op *op, const tc_shape &s)
{
    const size_t al = 2 * sizeof(T);
    if (s.kh != 2 || s.kw != 2 || s.sh != 2 || s.sw != 2 || s.oc != 1 ||
        (s.ic != 8 && s.ic != 16) || !kr_aligned(op->out, al) ||
        (op->residual && !kr_aligned(op->residual, al)))
        return 0;
    const size_t pixels = kr_elems(op, kr_in_t(op, 0)) / (size_t)s.ic;
    size_t blocks = (pixels + 127) / 128;
    const size_t cap = (size_t)(op->caps && op->caps->sms > 0 ? op->caps->sms : 132) * 16;
    if (blocks > cap)
        blocks = cap;
    if (blocks < 1)
        blocks = 1;
    const kr_epilogue e = kr_make_epilogue(op, 0);
    const unsigned nb = (unsigned)blocks;
    const cudaStream_t st = (cudaStream_t)op->stream;
    const T *x = (const T *)op->in[0];
    const float *w = (const float *)op->in[1], *bias = (const float *)op->in[2];
    T *y = (T *)op->out;
    constexpr int VH = sizeof(T) == 2 ? 8 : 4; /* 16 bytes */
    if (kr_aligned(x, 16)) {
        if (s.ic == 8)
            tconv_2x2_one<T, 8, VH, I><<<nb, 128, 0, st>>>(x, w, bias, y, (I)pixels, s.iw, e);
        else
            tconv_2x2_one<T, 16, VH, I><<<nb, 128, 0, st>>>(x, w, bias, y, (I)pixels, s.iw, e);
    } else if (s.ic == 8) {
        tconv_2x2_one<T, 8, 4, I><<<nb, 128, 0, st>>>(x, w, bias, y, (I)pixels, s.iw, e);
    } else {
        tconv_2x2_one<T, 16, 4, I><<<nb, 128, 0, st>>>(x, w, bias, y, (I)pixels, s.iw, e);
    }
    return 1;
}

template <typename T, int IC, typename I> static int launch_tiles(const kr_cuda_op *op, const tc_shape &s)
{
    if (s.ic != IC)
        return 0;
    size_t pixels = kr_elems(op, kr_in_t(op, 0)) / IC;
    tconv_tiles<T, IC, I><<<kr_blocks(pixels, 128), 128, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out,
        (I)pixels, s, kr_make_epilogue(op, 0));
    return 1;
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    tc_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2], yt->dims[3],
                  wt->dims[1], wt->dims[2], p->stride_h, p->stride_w, p->pad_top, p->pad_left};
    if (s.kh == s.sh && s.kw == s.sw && s.pt == 0 && s.pl == 0 && s.oh == s.ih * s.sh &&
        s.ow == s.iw * s.sw && kr_aligned(op->in[0], 4 * sizeof(T)) &&
        (launch_2x2_one<T, I>(op, s) || launch_tiles<T, 8, I>(op, s) || launch_tiles<T, 16, I>(op, s) ||
         launch_tiles<T, 32, I>(op, s)))
        return (int)cudaGetLastError();
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    tconv_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out, total, s,
        kr_make_epilogue(op, 0));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_transpose_conv_bias(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
