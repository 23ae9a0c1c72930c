/* TRANSPOSE_CONV (ONNX ConvTranspose), gather form: y[b,oy,ox,o] = act(bias[o] + sum of
 * x[b,iy,ix,g*Cg + i] * W[o,ky,kx,i] over the taps with oy = iy*sh - pad_top + ky*dh and
 * ox = ix*sw - pad_left + kx*dw inside the input), W [C_out, KH, KW, Cg], Cg = C_in / groups,
 * g = o / (C_out / groups); bias optional. The whole sum in double, rounded once. The output
 * extent is the output tensor's (ONNX output_padding only adds rows/columns that no tap or only
 * the bias reaches). */
#include "nn/reference/common.h"

void kr_ref_transpose_conv(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *wt = ref_in(c, 1), *yt = ref_out(c, 0);
    const float *x = c->in[0], *w = c->in[1];
    const float *bias = c->node->n_inputs > 2 ? c->in[2] : NULL;
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
                        int ty = oy + p->pad_top - ky * p->dilation_h; /* = iy * sh */
                        if (ty < 0 || ty % p->stride_h || ty / p->stride_h >= ih)
                            continue;
                        int iy = ty / p->stride_h;
                        for (int kx = 0; kx < kw; kx++) {
                            int tx = ox + p->pad_left - kx * p->dilation_w;
                            if (tx < 0 || tx % p->stride_w || tx / p->stride_w >= iw)
                                continue;
                            int ix = tx / p->stride_w;
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
