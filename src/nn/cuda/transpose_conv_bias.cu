/*
 * MediaPipe's Convolution2DTransposeBias in gather form: y[b,oy,ox,o] = bias[o] +
 * sum over (ky, kx) with oy = iy*S - pad_top + ky (and likewise x) for an input pixel (iy, ix)
 * inside the input, of sum_ic x[b,iy,ix,ic] * W[o,ky,kx,ic] (OHWI). One thread per output
 * element; no fused activation of its own (a folded following activation is applied).
 */
#include "nn/cuda/common.cuh"

struct tc_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, pt, pl;
};

template <typename T, typename I>
__global__ void tconv_kernel(const T *__restrict__ x, const float *__restrict__ w,
                             const float *__restrict__ bias, T *__restrict__ y, I total,
                             tc_shape s, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        int o = (int)(i % s.oc);
        I p = i / s.oc;
        int ox = (int)(p % s.ow);
        I q = p / s.ow;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
        float acc = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int ty = oy + s.pt - ky;
            if (ty < 0 || ty % s.sh)
                continue;
            int iy = ty / s.sh;
            if (iy >= s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                int tx = ox + s.pl - kx;
                if (tx < 0 || tx % s.sw)
                    continue;
                int ix = tx / s.sw;
                if (ix >= s.iw)
                    continue;
                const T *xp = x + ((b * s.ih + iy) * s.iw + ix) * s.ic;
                const float *wp = w + (((I)o * s.kh + ky) * s.kw + kx) * s.ic;
                for (int c = 0; c < s.ic; c++)
                    acc = fmaf(kr_ld(xp + c), kr_ld(wp + c), acc);
            }
        }
        kr_st(y + i, kr_apply(e, acc + (bias ? kr_ld(bias + o) : 0.0f)));
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    tc_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2], yt->dims[3],
                  wt->dims[1], wt->dims[2], p->stride_h, p->stride_w, p->pad_top, p->pad_left};
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    tconv_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out, total, s,
        kr_make_epilogue(op, 0));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_transpose_conv_bias(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
