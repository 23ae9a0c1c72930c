/*
 * TRANSPOSE_CONV (ONNX ConvTranspose; semantics in nn/graph.h, src/nn/reference/): x, filter
 * [C_out, kh, kw, C_in / groups], optional bias [C_out]; y[o] += x[i] * w[k] where
 * o = i * stride - pad_before + k * dilation per axis, grouped as CONV_2D; the output size is
 * the output tensor's. Gather form: one thread per output element (output channel fastest)
 * sums, over (ky, kx, ci) in that order, the taps whose input pixel
 * i = (o + pad_before - k * dilation) / stride is whole and inside the input; then the bias and
 * the epilogue (fused clamp, folded post function and residual).
 */
#include "nn/cuda/common.cuh"

struct tcv_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl, cig, cog;
};

template <typename T, typename I>
__global__ void tconv_general(const T *__restrict__ x, const float *__restrict__ w,
                              const float *__restrict__ bias, T *__restrict__ y, I total,
                              tcv_shape s, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        const int o = (int)(i % (I)s.oc);
        const I p = i / (I)s.oc;
        const int ox = (int)(p % (I)s.ow);
        const I q = p / (I)s.ow;
        const int oy = (int)(q % (I)s.oh);
        const I b = q / (I)s.oh;
        const int c0 = (o / s.cog) * s.cig;
        float acc = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            const int ty = oy + s.pt - ky * s.dh;
            if (ty < 0 || ty % s.sh)
                continue;
            const int iy = ty / s.sh;
            if (iy >= s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                const int tx = ox + s.pl - kx * s.dw;
                if (tx < 0 || tx % s.sw)
                    continue;
                const int ix = tx / s.sw;
                if (ix >= s.iw)
                    continue;
                const T *xp = x + ((b * (I)s.ih + (I)iy) * (I)s.iw + (I)ix) * (I)s.ic + c0;
                const float *wp = w + (((size_t)o * s.kh + ky) * s.kw + kx) * s.cig;
                for (int c = 0; c < s.cig; c++)
                    acc = fmaf(kr_ld(xp + c), __ldg(wp + c), acc);
            }
        }
        float v = kr_apply(e, acc + (bias ? bias[o] : 0.0f));
        kr_add_res<T, 1>(e, i, &v);
        kr_st(y + i, v);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    const int groups = p->groups > 1 ? p->groups : 1;
    tcv_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2], yt->dims[3],
                   wt->dims[1], wt->dims[2], p->stride_h > 0 ? p->stride_h : 1,
                   p->stride_w > 0 ? p->stride_w : 1, p->dilation_h > 0 ? p->dilation_h : 1,
                   p->dilation_w > 0 ? p->dilation_w : 1, p->pad_top, p->pad_left,
                   xt->dims[3] / groups, yt->dims[3] / groups};
    if (s.cig * groups != s.ic || s.cog * groups != s.oc || wt->dims[3] != s.cig ||
        wt->dims[0] != s.oc)
        return (int)cudaErrorInvalidValue;
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    size_t total = kr_elems(op, yt);
    tconv_general<T, I><<<kr_blocks(total, 128), 128, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], bias, (T *)op->out, (I)total, s,
        kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_transpose_conv(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
