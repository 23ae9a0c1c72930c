/*
 * RESIZE (ONNX Resize / Upsample) over H and W of NHWC, following ONNX Runtime's CPU kernel
 * where the specification leaves room:
 *  - Source coordinate per output index x along an axis (in / out: the axis' input and output
 *    extents, s: p.resize_onnx.scale_*), computed in float as ONNX Runtime does so that the
 *    nearest rounding sees the same ties:
 *      HALF_PIXEL                (x + 0.5) / s - 0.5
 *      PYTORCH_HALF_PIXEL        out > 1 ? (x + 0.5) / s - 0.5 : 0
 *      ALIGN_CORNERS             out == 1 ? 0 : x * (in - 1) / (out - 1)
 *      ASYMMETRIC                x / s
 *      TF_HALF_PIXEL_FOR_NEAREST (x + 0.5) / s
 *      TF_CROP_AND_RESIZE        out > 1 ? r0 * (in - 1) + x * (r1 - r0) * (in - 1) / (out - 1)
 *                                        : (r0 + r1) / 2 * (in - 1)   (roi r0..r1 of the axis)
 *      HALF_PIXEL_SYMMETRIC      c * (1 - out / (s * in)) + (x + 0.5) / s - 0.5, c = in / 2
 *  - TF_CROP_AND_RESIZE: a sample whose coordinate along either axis is outside [0, in - 1] is
 *    the extrapolation value.
 *  - NEAREST: the coordinate rounded by the nearest mode (ROUND_PREFER_FLOOR: halves down, else
 *    round half away from zero; ROUND_PREFER_CEIL: round half away from zero; FLOOR; CEIL), then
 *    clamped to [0, in - 1].
 *  - LINEAR: the coordinate clamped to [0, in - 1]; i0 = floor, i1 = min(i0 + 1, in - 1), weights
 *    1 - f and f for f = coordinate - i0; the four products summed in double.
 */
#include <math.h>

#include "nn/reference/common.h"

static float source_coord(kr_resize_coord mode, float x, float s, float out, float in, float r0,
                          float r1)
{
    switch (mode) {
    case KR_COORD_HALF_PIXEL: return (x + 0.5f) / s - 0.5f;
    case KR_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
    case KR_COORD_ALIGN_CORNERS: return out == 1 ? 0.0f : x * (in - 1) / (out - 1);
    case KR_COORD_ASYMMETRIC: return x / s;
    case KR_COORD_TF_HALF_PIXEL_FOR_NEAREST: return (x + 0.5f) / s;
    case KR_COORD_TF_CROP_AND_RESIZE:
        if (out > 1)
            return r0 * (in - 1) + (x * (r1 - r0) * (in - 1)) / (out - 1);
        return (float)(0.5 * (r0 + r1) * (in - 1));
    case KR_COORD_HALF_PIXEL_SYMMETRIC: {
        float adjustment = out / (s * in);
        float offset = in / 2 * (1 - adjustment);
        return (float)(offset + (x + 0.5) / s - 0.5);
    }
    }
    return 0.0f;
}

static int nearest_index(kr_nearest_mode mode, float v, int in)
{
    /* Clamping first keeps the integer conversion in range and changes no clamped result. */
    v = v < -2.0f ? -2.0f : v > (float)in + 1.0f ? (float)in + 1.0f : v;
    int i;
    switch (mode) {
    case KR_NEAREST_ROUND_PREFER_FLOOR:
        i = v == (float)(int)v + 0.5f ? (int)floorf(v) : (int)roundf(v);
        break;
    case KR_NEAREST_ROUND_PREFER_CEIL: i = (int)roundf(v); break;
    case KR_NEAREST_FLOOR: i = (int)floorf(v); break;
    case KR_NEAREST_CEIL: i = (int)ceilf(v); break;
    default: i = 0; break;
    }
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* One axis' sampling for output index @p o: the two source indices and the weight of the
 * second; *outside when the coordinate leaves [0, in - 1] (for TF_CROP_AND_RESIZE). */
typedef struct axis_sample {
    int i0, i1;
    double f;
    int outside;
} axis_sample;

static axis_sample sample(const kr_node *node, int o, int in, int out, float s, float r0,
                          float r1)
{
    axis_sample a = {0, 0, 0.0, 0};
    float v = source_coord(node->p.resize_onnx.coord, (float)o, s, (float)out, (float)in, r0, r1);
    a.outside = v < 0 || v > (float)(in - 1);
    if (node->p.resize_onnx.mode == KR_RESIZE_NEAREST) {
        a.i0 = a.i1 = nearest_index(node->p.resize_onnx.nearest, v, in);
        return a;
    }
    v = v < 0 ? 0.0f : v > (float)(in - 1) ? (float)(in - 1) : v;
    a.i0 = (int)v;
    if (a.i0 > in - 1)
        a.i0 = in - 1;
    a.i1 = a.i0 + 1 < in ? a.i0 + 1 : in - 1;
    a.f = a.i1 == a.i0 ? 0.0 : (double)(v - (float)a.i0);
    return a;
}

void kr_ref_resize(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const kr_node *node = c->node;
    const float *x = c->in[0];
    float *y = c->out[0];
    int n = ref_dim(c, xt, 0), ih = xt->dims[1], iw = xt->dims[2], ch = xt->dims[3];
    int oh = yt->dims[1], ow = yt->dims[2];
    const float *roi = node->p.resize_onnx.roi;
    int crop = node->p.resize_onnx.coord == KR_COORD_TF_CROP_AND_RESIZE;
    float fill = node->p.resize_onnx.extrapolation;
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++) {
            axis_sample sy = sample(node, oy, ih, oh, node->p.resize_onnx.scale_h, roi[0], roi[2]);
            for (int ox = 0; ox < ow; ox++) {
                axis_sample sx =
                    sample(node, ox, iw, ow, node->p.resize_onnx.scale_w, roi[1], roi[3]);
                float *yp = y + (((size_t)b * oh + oy) * ow + ox) * ch;
                const float *r0 = x + ((size_t)b * ih + sy.i0) * iw * ch;
                const float *r1 = x + ((size_t)b * ih + sy.i1) * iw * ch;
                for (int k = 0; k < ch; k++) {
                    if (crop && (sy.outside || sx.outside)) {
                        yp[k] = fill;
                        continue;
                    }
                    double top = (1 - sx.f) * r0[(size_t)sx.i0 * ch + k] +
                                 sx.f * r0[(size_t)sx.i1 * ch + k];
                    double bottom = (1 - sx.f) * r1[(size_t)sx.i0 * ch + k] +
                                    sx.f * r1[(size_t)sx.i1 * ch + k];
                    yp[k] = (float)((1 - sy.f) * top + sy.f * bottom);
                }
            }
        }
}
