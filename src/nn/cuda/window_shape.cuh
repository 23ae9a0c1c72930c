/*
 * The geometry shared by the direct (one thread per output element) kernels of the grouped
 * convolutions, CONV_2D with groups > 1 (conv_2d_grouped.cu) and TRANSPOSE_CONV
 * (transpose_conv.cu): x [N, IH, IW, C_in], filter [C_out, KH, KW, C_in / groups],
 * y [N, OH, OW, C_out], output channel fastest.
 */
#ifndef KEYER_NN_CUDA_WINDOW_SHAPE_CUH
#define KEYER_NN_CUDA_WINDOW_SHAPE_CUH

#include "nn/cuda/common.cuh"

struct kr_win_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl;
    int cig, cog; /* input and output channels per group */
};

/* Fills @p s from the node's tensors and window parameters (strides and dilations below 1
 * read as 1). Returns 0, or cudaErrorInvalidValue when the channels do not split into the
 * groups or the filter does not match them. */
static inline int kr_win_shape_of(const kr_cuda_op *op, kr_win_shape *s)
{
    const kr_tensor *xt = kr_in_t(op, 0), *wt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    const int groups = p->groups > 1 ? p->groups : 1;
    *s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2], yt->dims[3],
          wt->dims[1], wt->dims[2], p->stride_h > 0 ? p->stride_h : 1,
          p->stride_w > 0 ? p->stride_w : 1, p->dilation_h > 0 ? p->dilation_h : 1,
          p->dilation_w > 0 ? p->dilation_w : 1, p->pad_top, p->pad_left,
          xt->dims[3] / groups, yt->dims[3] / groups};
    if (s->cig * groups != s->ic || s->cog * groups != s->oc || wt->dims[3] != s->cig ||
        wt->dims[0] != s->oc)
        return (int)cudaErrorInvalidValue;
    return 0;
}

/* Output element @p i -> its batch (returned), row, column and channel. */
template <typename I>
__device__ __forceinline__ I kr_win_split(I i, const kr_win_shape &s, int *oy, int *ox, int *o)
{
    return kr_nhwc_split(i, s.oc, s.ow, s.oh, oy, ox, o);
}

/* acc + the dot product over one tap's channels of its group: input pixel (b, iy, ix) from
 * channel c0, filter row of output channel o at (ky, kx). */
template <typename T, typename I>
__device__ __forceinline__ float kr_win_tap(const T *__restrict__ x, const float *__restrict__ w,
                                            const kr_win_shape &s, I b, int iy, int ix, int c0,
                                            int o, int ky, int kx, float acc)
{
    const T *xp = x + ((b * (I)s.ih + (I)iy) * (I)s.iw + (I)ix) * (I)s.ic + c0;
    const float *wp = w + (((size_t)o * s.kh + ky) * s.kw + kx) * s.cig;
    for (int c = 0; c < s.cig; c++)
        acc = fmaf(kr_ld(xp + c), __ldg(wp + c), acc);
    return acc;
}

#endif
