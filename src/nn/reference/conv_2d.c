/* CONV_2D (reference/conv.h): y[b,oy,ox,o] = act(bias[o] + sum over ky,kx,i of
 * x[b, oy*sh - pad_top + ky*dh, ox*sw - pad_left + kx*dw, g*Cg + i] * W[o,ky,kx,i]), OHWI weights
 * with Cg = C_in / groups input channels per group and g = o / (C_out / groups) (ONNX groups);
 * taps outside the input are skipped (zero padding; TF SAME puts the odd pad after). The sum is
 * accumulated in double and rounded once, before the fused activation clamp. */
#include "nn/reference/common.h"

void kr_ref_conv_2d(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *wt = ref_in(c, 1), *yt = ref_out(c, 0);
    const float *x = c->in[0], *w = c->in[1], *bias = c->in[2];
    float *y = c->out[0];
    const kr_window_params *p = &c->node->p.window;
    int n = ref_dim(c, xt, 0), ih = xt->dims[1], iw = xt->dims[2], ic = xt->dims[3];
    int oh = yt->dims[1], ow = yt->dims[2], oc = yt->dims[3];
    int kh = wt->dims[1], kw = wt->dims[2], icg = wt->dims[3];
    int groups = p->groups > 1 ? p->groups : 1, ocg = oc / groups;
    float lo, hi;
    kr_activation_range(c->node->activation, &lo, &hi);
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int o = 0; o < oc; o++) {
                    double acc = bias ? bias[o] : 0.0;
                    for (int ky = 0; ky < kh; ky++) {
                        int iy = oy * p->stride_h - p->pad_top + ky * p->dilation_h;
                        if (iy < 0 || iy >= ih)
                            continue;
                        for (int kx = 0; kx < kw; kx++) {
                            int ix = ox * p->stride_w - p->pad_left + kx * p->dilation_w;
                            if (ix < 0 || ix >= iw)
                                continue;
                            const float *xp = x + (((size_t)b * ih + iy) * iw + ix) * ic +
                                              (size_t)(o / ocg) * icg;
                            const float *wp = w + (((size_t)o * kh + ky) * kw + kx) * icg;
                            for (int i = 0; i < icg; i++)
                                acc += (double)xp[i] * wp[i];
                        }
                    }
                    y[(((size_t)b * oh + oy) * ow + ox) * oc + o] = ref_clamp((float)acc, lo, hi);
                }
}
