/* RESIZE_BILINEAR exactly as TFLite's reference kernel (reference/resize_bilinear.h, section
 * 2.7), in float as TFLite computes it, per axis: scale = in/out, or (in-1)/(out-1) with
 * align_corners and out > 1; src = (o + 0.5)*scale - 0.5 with half_pixel_centers, else o*scale;
 * i0 = max(floor(src), 0), i1 = min(ceil(src), in-1), f = src - i0; the four taps are weighted
 * (1-fy)(1-fx), fy(1-fx), (1-fy)fx, fy*fx in that order. */
#include <math.h>

#include "nn/reference/common.h"

static void axis(int in, int out, int align, int half, int o, int *i0, int *i1, float *f)
{
    float scale = (float)in / (float)out;
    if (align && out > 1)
        scale = (float)(in - 1) / (float)(out - 1);
    float src = half ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
    int lo = (int)floorf(src);
    *i0 = lo < 0 ? 0 : lo;
    int hi = (int)ceilf(src);
    *i1 = hi < in - 1 ? hi : in - 1;
    *f = src - (float)*i0;
}

void kr_ref_resize_bilinear(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    int n = ref_dim(c, xt, 0), ih = xt->dims[1], iw = xt->dims[2], ch = xt->dims[3];
    int oh = yt->dims[1], ow = yt->dims[2];
    int align = c->node->p.resize.align_corners, half = c->node->p.resize.half_pixel_centers;
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++) {
            int y0, y1;
            float dy;
            axis(ih, oh, align, half, oy, &y0, &y1, &dy);
            for (int ox = 0; ox < ow; ox++) {
                int x0, x1;
                float dx;
                axis(iw, ow, align, half, ox, &x0, &x1, &dx);
                const float *r0 = x + ((size_t)b * ih + y0) * iw * ch;
                const float *r1 = x + ((size_t)b * ih + y1) * iw * ch;
                float *yp = y + (((size_t)b * oh + oy) * ow + ox) * ch;
                for (int k = 0; k < ch; k++)
                    yp[k] = r0[x0 * ch + k] * (1 - dy) * (1 - dx) + r1[x0 * ch + k] * dy * (1 - dx) +
                            r0[x1 * ch + k] * (1 - dy) * dx + r1[x1 * ch + k] * dy * dx;
            }
        }
}
