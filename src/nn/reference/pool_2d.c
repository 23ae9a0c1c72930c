/* AVERAGE_POOL_2D (sum in double over the taps inside the input, divided by their count, not
 * by the window size) and MAX_POOL_2D (max over the taps inside), then the fused activation
 * clamp (reference/pooling.h). */
#include <float.h>

#include "nn/reference/common.h"

static void pool(const kr_op_ctx *c, int is_max)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    const kr_window_params *p = &c->node->p.window;
    int n = ref_dim(c, xt, 0), ih = xt->dims[1], iw = xt->dims[2], ch = xt->dims[3];
    int oh = yt->dims[1], ow = yt->dims[2];
    float lo, hi;
    kr_activation_range(c->node->activation, &lo, &hi);
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int k = 0; k < ch; k++) {
                    double sum = 0;
                    float mx = -FLT_MAX;
                    int count = 0;
                    for (int ky = 0; ky < p->kernel_h; ky++) {
                        int iy = oy * p->stride_h - p->pad_top + ky;
                        if (iy < 0 || iy >= ih)
                            continue;
                        for (int kx = 0; kx < p->kernel_w; kx++) {
                            int ix = ox * p->stride_w - p->pad_left + kx;
                            if (ix < 0 || ix >= iw)
                                continue;
                            float v = x[(((size_t)b * ih + iy) * iw + ix) * ch + k];
                            sum += v;
                            mx = v > mx ? v : mx;
                            count++;
                        }
                    }
                    float v = is_max ? mx : (count ? (float)(sum / count) : 0.0f);
                    y[(((size_t)b * oh + oy) * ow + ox) * ch + k] = ref_clamp(v, lo, hi);
                }
}

void kr_ref_average_pool_2d(const kr_op_ctx *c) { pool(c, 0); }
void kr_ref_max_pool_2d(const kr_op_ctx *c) { pool(c, 1); }
