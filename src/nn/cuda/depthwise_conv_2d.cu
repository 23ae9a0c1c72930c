/*
 * DEPTHWISE_CONV_2D: y[b,oy,ox,o] = act(bias[o] + sum_{ky,kx} x[b,iy,ix,o/M] * W[0,ky,kx,o]),
 * M the depth multiplier; taps outside the input are skipped. One thread per output element,
 * channel fastest so that a warp reads consecutive channels of one pixel (coalesced); the taps
 * of neighbouring pixels are served by L1/L2. Float accumulation, fused epilogue.
 */
#include "nn/cuda/common.cuh"

struct dw_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl, mult;
};

template <typename T, typename I>
__global__ void dw_kernel(const T *__restrict__ x, const float *__restrict__ w,
                          const float *__restrict__ bias, T *__restrict__ y, I total, dw_shape s,
                          kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        int o = (int)(i % s.oc);
        I p = i / s.oc;
        int ox = (int)(p % s.ow);
        I q = p / s.ow;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
        int c = o / s.mult;
        float acc = bias ? kr_ld(bias + o) : 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = oy * s.sh - s.pt + ky * s.dh;
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            const T *row = x + ((b * s.ih + iy) * s.iw) * s.ic + c;
            for (int kx = 0; kx < s.kw; kx++) {
                int ix = ox * s.sw - s.pl + kx * s.dw;
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                acc = fmaf(kr_ld(row + (I)ix * s.ic), kr_ld(w + ((I)ky * s.kw + kx) * s.oc + o),
                           acc);
            }
        }
        kr_st(y + i, kr_apply(e, acc));
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    dw_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2], yt->dims[3],
                  wt->dims[1], wt->dims[2], p->stride_h, p->stride_w, p->dilation_h,
                  p->dilation_w, p->pad_top, p->pad_left, p->depth_multiplier > 0 ? p->depth_multiplier : 1};
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    dw_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], (const float *)op->in[2], (T *)op->out, total, s,
        kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_depthwise_conv_2d(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
