/* AVERAGE_POOL_2D and MAX_POOL_2D (reference/pooling.h; ONNX AveragePool / MaxPool): the window
 * of output (oy, ox) has taps iy = oy*sh - pad_top + ky*dh (and likewise x), ky < kernel_h.
 *  - MAX: the maximum over the taps inside the input (padding never wins).
 *  - AVERAGE: the sum in double over the taps inside the input, divided by their count (TFLite,
 *    ONNX count_include_pad = 0) or, with count_include_pad, by the number of taps inside
 *    [-pad_before, n + pad_after) per axis (padding counted; taps that ceil_mode's last window
 *    puts past the end padding are not).
 * Then the fused activation clamp. Dilation 0 is taken as 1. */
#include <float.h>

#include "nn/reference/common.h"

/* Taps of one axis: how many of the k taps from @p start (step @p d) lie in [lo, hi). */
static int taps_in(int start, int k, int d, int lo, int hi)
{
    int count = 0;
    for (int t = 0; t < k; t++) {
        int i = start + t * d;
        count += i >= lo && i < hi;
    }
    return count;
}

static void pool(const kr_op_ctx *c, int is_max)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    const kr_window_params *p = &c->node->p.window;
    int n = ref_dim(c, xt, 0), ih = xt->dims[1], iw = xt->dims[2], ch = xt->dims[3];
    int oh = yt->dims[1], ow = yt->dims[2];
    int dh = p->dilation_h > 0 ? p->dilation_h : 1, dw = p->dilation_w > 0 ? p->dilation_w : 1;
    float lo, hi;
    kr_activation_range(c->node->activation, &lo, &hi);
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int y0 = oy * p->stride_h - p->pad_top, x0 = ox * p->stride_w - p->pad_left;
                int padded = taps_in(y0, p->kernel_h, dh, -p->pad_top, ih + p->pad_bottom) *
                             taps_in(x0, p->kernel_w, dw, -p->pad_left, iw + p->pad_right);
                for (int k = 0; k < ch; k++) {
                    double sum = 0;
                    float mx = -FLT_MAX;
                    int count = 0;
                    for (int ky = 0; ky < p->kernel_h; ky++) {
                        int iy = y0 + ky * dh;
                        if (iy < 0 || iy >= ih)
                            continue;
                        for (int kx = 0; kx < p->kernel_w; kx++) {
                            int ix = x0 + kx * dw;
                            if (ix < 0 || ix >= iw)
                                continue;
                            float v = x[(((size_t)b * ih + iy) * iw + ix) * ch + k];
                            sum += v;
                            mx = v > mx ? v : mx;
                            count++;
                        }
                    }
                    if (p->count_include_pad)
                        count = padded;
                    float v = is_max ? mx : (count ? (float)(sum / count) : 0.0f);
                    y[(((size_t)b * oh + oy) * ow + ox) * ch + k] = ref_clamp(v, lo, hi);
                }
            }
}

void kr_ref_average_pool_2d(const kr_op_ctx *c) { pool(c, 0); }
void kr_ref_max_pool_2d(const kr_op_ctx *c) { pool(c, 1); }
