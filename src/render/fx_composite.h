/*
 * Per-sample arithmetic of the compositing stage shared by the CPU (src/render/cpu/) and
 * CUDA (src/render/cuda/) implementations. See fx_math.h for the conventions.
 *
 * Background blur, mask weighted ("normalised convolution"): the frame is reduced to a grid
 * of factor x factor cells holding, per colour channel, the sum of w * sample and, per
 * resolution level, the sum of w, with w = 1 - alpha (plus a small floor). Both are blurred
 * with the same Gaussian and divided, so the person's pixels (w ~ 0) do not bleed into the
 * blurred background near the edges. The result is interpolated bilinearly at full
 * resolution and blended under the person.
 */
#ifndef KEYER_RENDER_FX_COMPOSITE_H
#define KEYER_RENDER_FX_COMPOSITE_H

#include "render/fx_backend.h"

/** Number of grid channels: 3 sums of w * sample, then one sum of w per level. */
KR_FX int kr_blur_channels(const kr_composite_job *job) { return job->src.chroma ? 5 : 4; }

/** Grid cell (gx, gy): acc[0..2] = sum of w * sample per channel, acc[3 + level] = sum of w
 *  over that level's samples. Samples in row-major order within the cell. */
KR_FX void kr_blur_cell(const kr_composite_job *job, int gx, int gy, float *acc)
{
    for (int c = 0; c < 3; c++) {
        const kr_chan *ch = &job->src.ch[c];
        int fl = job->factor >> ch->level;
        int xs = gx * fl, ys = gy * fl;
        int xe = xs + fl < ch->width ? xs + fl : ch->width;
        int ye = ys + fl < ch->height ? ys + fl : ch->height;
        float num = 0.0f, den = 0.0f;
        for (int y = ys; y < ye; y++)
            for (int x = xs; x < xe; x++) {
                float a = ch->level ? kr_alpha_chroma(job->alpha, job->alpha_stride,
                                                      job->alpha_f32, job->width, job->height, x, y)
                                    : kr_alpha_at(job->alpha, job->alpha_stride, job->alpha_f32,
                                                  x, y);
                float w = kr_blur_weight(a);
                num += w * kr_chan_load(ch, x, y);
                den += w;
            }
        acc[c] = num;
        if (c == 0 || (c == 1 && ch->level))
            acc[3 + ch->level] = den;
    }
}

/** Horizontal Gaussian at gx of one grid row of width gw (edges clamped). */
KR_FX float kr_blur_h_at(const float *row, int gw, int gx, const float *kernel, int taps)
{
    int r = taps / 2;
    float sum = 0.0f;
    for (int k = 0; k < taps; k++) {
        int i = gx + k - r;
        i = i < 0 ? 0 : i > gw - 1 ? gw - 1 : i;
        sum += kernel[k] * row[i];
    }
    return sum;
}

/** Vertical Gaussian at (gx, gy) of channel plane h (gw x gh, edges clamped). */
KR_FX float kr_blur_v_at(const float *h, int gw, int gh, int gx, int gy, const float *kernel,
                         int taps)
{
    int r = taps / 2;
    float sum = 0.0f;
    for (int k = 0; k < taps; k++) {
        int j = gy + k - r;
        j = j < 0 ? 0 : j > gh - 1 ? gh - 1 : j;
        sum += kernel[k] * h[(size_t)j * (size_t)gw + (size_t)gx];
    }
    return sum;
}

/** Scale from a channel's sample coordinates to grid coordinates. */
KR_FX float kr_blur_grid_scale(const kr_composite_job *job, int level)
{
    return (float)(1 << level) / (float)job->factor;
}

/** RGBA output pixel (x, y): straight or premultiplied colour, alpha from the matte. */
KR_FX void kr_comp_rgba(const kr_composite_job *job, int x, int y, int premultiplied,
                        uint8_t out[4])
{
    float c[3], rgb[3];
    kr_src_sample(&job->src, (float)x, (float)y, c);
    kr_src_rgb(&job->src, c, rgb);
    float a = kr_alpha_at(job->alpha, job->alpha_stride, job->alpha_f32, x, y);
    float d = kr_dither(job->dither, x, y);
    for (int i = 0; i < 3; i++) {
        float v = premultiplied ? rgb[i] * a : rgb[i];
        out[i] = (uint8_t)kr_quantise(v * 255.0f, d, 255);
    }
    out[3] = (uint8_t)kr_quantise(a * 255.0f, 0.5f, 255);
}

/** Mask output code of channel c of a same-format grey picture with coverage a. */
KR_FX int kr_comp_mask_code(const kr_composite_job *job, int c, float a)
{
    float rgb[3] = {a, a, a}, codes[3];
    kr_src_encode(&job->src, rgb, codes);
    return kr_quantise(codes[c], 0.5f, job->src.maxcode);
}

#endif
