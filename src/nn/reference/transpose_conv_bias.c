/* MediaPipe's Convolution2DTransposeBias (section 2.10), scatter form: every output starts at
 * bias[oc]; each input pixel adds sum_ic x[iy,ix,ic] * W[oc,ky,kx,ic] (OHWI; the channel sum in
 * double) at (iy*S - pad_top + ky, ix*S - pad_left + kx), skipping positions outside the output.
 * No fused activation. */
#include <string.h>

#include "nn/reference/common.h"

void kr_ref_transpose_conv_bias(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *wt = ref_in(c, 1), *yt = ref_out(c, 0);
    const float *x = c->in[0], *w = c->in[1], *bias = c->in[2];
    float *y = c->out[0];
    const kr_window_params *p = &c->node->p.window;
    int n = ref_dim(c, xt, 0), ih = xt->dims[1], iw = xt->dims[2], ic = xt->dims[3];
    int oh = yt->dims[1], ow = yt->dims[2], oc = yt->dims[3];
    int kh = wt->dims[1], kw = wt->dims[2];
    size_t out_count = (size_t)n * oh * ow;
    for (size_t i = 0; i < out_count; i++)
        for (int o = 0; o < oc; o++)
            y[i * oc + o] = bias ? bias[o] : 0.0f;
    for (int b = 0; b < n; b++)
        for (int iy = 0; iy < ih; iy++)
            for (int ix = 0; ix < iw; ix++) {
                const float *xp = x + (((size_t)b * ih + iy) * iw + ix) * ic;
                for (int ky = 0; ky < kh; ky++) {
                    int oy = iy * p->stride_h - p->pad_top + ky;
                    if (oy < 0 || oy >= oh)
                        continue;
                    for (int kx = 0; kx < kw; kx++) {
                        int ox = ix * p->stride_w - p->pad_left + kx;
                        if (ox < 0 || ox >= ow)
                            continue;
                        float *yp = y + (((size_t)b * oh + oy) * ow + ox) * oc;
                        for (int o = 0; o < oc; o++) {
                            const float *wp = w + (((size_t)o * kh + ky) * kw + kx) * ic;
                            double acc = 0;
                            for (int i = 0; i < ic; i++)
                                acc += (double)xp[i] * wp[i];
                            yp[o] += (float)acc;
                        }
                    }
                }
            }
}
