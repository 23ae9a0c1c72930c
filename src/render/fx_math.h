/*
 * The per-sample arithmetic of keyer's frame effects, written once and compiled both as C11
 * (CPU implementations) and as CUDA C++ (device functions), so that the two backends compute
 * the same thing. Only plain structs of numbers and pointers, and static inline functions.
 *
 * Coordinates: "continuous" coordinates put pixel i over [i, i+1); "index" coordinates put
 * pixel i's centre at i (index = continuous - 0.5).
 */
#ifndef KEYER_RENDER_FX_MATH_H
#define KEYER_RENDER_FX_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define KR_FX static __host__ __device__ __forceinline__
#else
#define KR_FX static inline
#endif

/* ---- channels: one colour component of a frame as a sampling source ------------------ */

/** One component (Y, U, V, R, G or B) of a frame: where it is and how to read it. */
typedef struct kr_chan {
    uint8_t *base;    /* first sample (component offset applied) */
    ptrdiff_t stride; /* bytes between rows */
    int width;        /* samples per row */
    int height;       /* rows */
    int step;         /* bytes between horizontally adjacent samples */
    int wide;         /* 1: 16-bit little-endian samples */
    int shift;        /* value = sample >> shift (P010: 6) */
    int level;        /* 0: full resolution; 1: 4:2:0 chroma (half width and height) */
} kr_chan;

/** A frame as three components plus its colour conversion. */
typedef struct kr_src {
    kr_chan ch[3];  /* Y,U,V or R,G,B */
    int chroma;     /* 1: ch[1], ch[2] are 4:2:0 chroma */
    int maxcode;    /* 255 or 1023 */
    float m[9];     /* rgb = m * (c0, c1, c2) + o, codes in, [0,1] out (before clamping) */
    float o[3];
    float e[9];     /* codes = e * rgb + eo: the inverse, for encoding into this format */
    float eo[3];
    float luma[3];  /* guide intensity in [0,1]: luma[0]*c0 + luma[1]*c1 + luma[2]*c2 */
} kr_src;

KR_FX float kr_chan_load(const kr_chan *c, int x, int y)
{
    const uint8_t *p = c->base + (ptrdiff_t)y * c->stride + (ptrdiff_t)x * c->step;
    if (c->wide)
        return (float)(*(const uint16_t *)(const void *)p >> c->shift);
    return (float)*p;
}

KR_FX float kr_clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/** Bilinear sample at index coordinates (x, y), clamped to the channel's edges. */
KR_FX float kr_chan_bilinear(const kr_chan *c, float x, float y)
{
    x = kr_clampf(x, 0.0f, (float)(c->width - 1));
    y = kr_clampf(y, 0.0f, (float)(c->height - 1));
    int x0 = (int)x, y0 = (int)y;
    float fx = x - (float)x0, fy = y - (float)y0;
    int x1 = x0 + (x0 < c->width - 1), y1 = y0 + (y0 < c->height - 1);
    float a = kr_chan_load(c, x0, y0), b = kr_chan_load(c, x1, y0);
    float d = kr_chan_load(c, x0, y1), e = kr_chan_load(c, x1, y1);
    float top = a + (b - a) * fx, bot = d + (e - d) * fx;
    return top + (bot - top) * fy;
}

/** Index coordinate in a chroma channel of luma index coordinate x (horizontal siting:
 *  chroma sample i sits on luma column 2i). */
KR_FX float kr_chroma_x(float x) { return x * 0.5f; }
/** Same vertically (chroma row j sits between luma rows 2j and 2j+1). */
KR_FX float kr_chroma_y(float y) { return (y - 0.5f) * 0.5f; }

/** Component codes of @p s at luma index coordinates (x, y). */
KR_FX void kr_src_sample(const kr_src *s, float x, float y, float out[3])
{
    out[0] = kr_chan_bilinear(&s->ch[0], x, y);
    if (s->chroma) {
        float cx = kr_chroma_x(x), cy = kr_chroma_y(y);
        out[1] = kr_chan_bilinear(&s->ch[1], cx, cy);
        out[2] = kr_chan_bilinear(&s->ch[2], cx, cy);
    } else {
        out[1] = kr_chan_bilinear(&s->ch[1], x, y);
        out[2] = kr_chan_bilinear(&s->ch[2], x, y);
    }
}

/** Codes to RGB in [0,1] (clamped). */
KR_FX void kr_src_rgb(const kr_src *s, const float c[3], float rgb[3])
{
    for (int i = 0; i < 3; i++) {
        float v = s->m[3 * i] * c[0] + s->m[3 * i + 1] * c[1] + s->m[3 * i + 2] * c[2] + s->o[i];
        rgb[i] = kr_clampf(v, 0.0f, 1.0f);
    }
}

/** RGB in [0,1] to (unrounded) codes of @p s's format. */
KR_FX void kr_src_encode(const kr_src *s, const float rgb[3], float c[3])
{
    for (int i = 0; i < 3; i++)
        c[i] = s->e[3 * i] * rgb[0] + s->e[3 * i + 1] * rgb[1] + s->e[3 * i + 2] * rgb[2] +
               s->eo[i];
}

/* ---- model input preparation --------------------------------------------------------- */

/** One frame's part of a prepare job, fully resolved by the common code. */
typedef struct kr_prepare_item {
    kr_src src;
    float m[6];         /* tensor continuous -> frame continuous (keyer_prepare_geometry) */
    int nx, ny;         /* samples per tensor pixel along tensor x and y (area filtering) */
    int x0, x1, y0, y1; /* tensor pixels [x0,x1) x [y0,y1) show the region; others are bars */
} kr_prepare_item;

/** RGB in [0,1] of tensor pixel (x, y) inside the content: the mean of nx*ny bilinear
 *  samples of the codes, converted and clamped. */
KR_FX void kr_prepare_pixel(const kr_prepare_item *it, int x, int y, float rgb[3])
{
    float acc[3] = {0.0f, 0.0f, 0.0f};
    for (int j = 0; j < it->ny; j++) {
        float ty = (float)y + ((float)j + 0.5f) / (float)it->ny;
        for (int i = 0; i < it->nx; i++) {
            float tx = (float)x + ((float)i + 0.5f) / (float)it->nx;
            float fx = it->m[0] * tx + it->m[1] * ty + it->m[2] - 0.5f;
            float fy = it->m[3] * tx + it->m[4] * ty + it->m[5] - 0.5f;
            float c[3];
            kr_src_sample(&it->src, fx, fy, c);
            acc[0] += c[0];
            acc[1] += c[1];
            acc[2] += c[2];
        }
    }
    float inv = 1.0f / (float)(it->nx * it->ny);
    acc[0] *= inv;
    acc[1] *= inv;
    acc[2] *= inv;
    kr_src_rgb(&it->src, acc, rgb);
}

/** float -> IEEE half, round to nearest even (as CUDA's __float2half_rn). */
KR_FX uint16_t kr_float_to_half(float f)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    uint32_t x = v.u;
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
    if (ax >= 0x477FF000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (ax < 0x33000000u) /* below half the smallest subnormal */
            return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14 - (e - 127) + 13 - 1 ... chosen so 2^-24 -> 1 */
        uint32_t r = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

/* ---- mask refinement ------------------------------------------------------------------ */

/** Mask value from the model: clamped to [0,1], NaN gives 0. */
KR_FX float kr_mask_value(float v)
{
    return v == v ? kr_clampf(v, 0.0f, 1.0f) : 0.0f;
}

/** Smoothstep from lo to lo + 1 / inv_range. */
KR_FX float kr_smoothstep(float lo, float inv_range, float x)
{
    float t = kr_clampf((x - lo) * inv_range, 0.0f, 1.0f);
    return t * t * (3.0f - 2.0f * t);
}

/** MediaPipe SegmentationSmoothingCalculator's uncertainty of probability p (1 at 0.5). */
KR_FX float kr_mediapipe_uncertainty(float p)
{
    float t = p - 0.5f, x = t * t;
    float poly = x * (5.68842f + x * (-0.748699f + x * (-57.8051f + x * (291.309f +
                                                                          x * -624.717f))));
    return 1.0f - (poly < 1.0f ? poly : 1.0f);
}

/** Temporal smoothing parameters as the kernels see them. */
typedef struct kr_temporal {
    int mode;          /* keyer_temporal */
    float strength;
    float inv_motion;  /* 1 / motion_tolerance */
    float inv_mask;    /* 1 / mask_tolerance */
} kr_temporal;

/** New mask value from new p, previous output q, luma change di. */
KR_FX float kr_temporal_blend(const kr_temporal *t, float p, float q, float di)
{
    float k;
    if (t->mode == 2) {
        k = t->strength * kr_mediapipe_uncertainty(p);
    } else {
        float gm = 1.0f - fabsf(di) * t->inv_motion;
        float gp = 1.0f - fabsf(p - q) * t->inv_mask;
        k = t->strength * (gm > 0.0f ? gm : 0.0f) * (gp > 0.0f ? gp : 0.0f);
    }
    return p + (q - p) * k;
}

/** Full-resolution alpha step: guided (or bilinear) value, optional soft threshold
 *  (smoothstep from lo to lo + 1 / inv_range). */
KR_FX float kr_refine_alpha(float a, float b, float luma, int threshold, float lo, float inv_range)
{
    float q = a * luma + b;
    q = kr_clampf(q, 0.0f, 1.0f);
    if (threshold)
        q = kr_smoothstep(lo, inv_range, q);
    return q;
}

/** Mask sample at index coordinates (x, y) of a float mask, bilinear, clamped at the edges;
 *  each tap goes through kr_mask_value. */
KR_FX float kr_mask_bilinear(const float *mask, ptrdiff_t stride, int w, int h, float x, float y)
{
    x = kr_clampf(x, 0.0f, (float)(w - 1));
    y = kr_clampf(y, 0.0f, (float)(h - 1));
    int x0 = (int)x, y0 = (int)y;
    float fx = x - (float)x0, fy = y - (float)y0;
    int x1 = x0 + (x0 < w - 1), y1 = y0 + (y0 < h - 1);
    const float *r0 = (const float *)(const void *)((const uint8_t *)mask + (ptrdiff_t)y0 * stride);
    const float *r1 = (const float *)(const void *)((const uint8_t *)mask + (ptrdiff_t)y1 * stride);
    float a = kr_mask_value(r0[x0]), b = kr_mask_value(r0[x1]);
    float d = kr_mask_value(r1[x0]), e = kr_mask_value(r1[x1]);
    float top = a + (b - a) * fx, bot = d + (e - d) * fx;
    return top + (bot - top) * fy;
}

/** Guide intensity of the frame at luma index coordinates (x, y) (bilinear). */
KR_FX float kr_src_luma_at(const kr_src *s, float x, float y)
{
    if (s->chroma)
        return s->luma[0] * kr_chan_bilinear(&s->ch[0], x, y);
    return s->luma[0] * kr_chan_bilinear(&s->ch[0], x, y) +
           s->luma[1] * kr_chan_bilinear(&s->ch[1], x, y) +
           s->luma[2] * kr_chan_bilinear(&s->ch[2], x, y);
}

/** Guide intensity of full-resolution pixel (x, y). */
KR_FX float kr_src_luma_pixel(const kr_src *s, int x, int y)
{
    if (s->chroma)
        return s->luma[0] * kr_chan_load(&s->ch[0], x, y);
    return s->luma[0] * kr_chan_load(&s->ch[0], x, y) + s->luma[1] * kr_chan_load(&s->ch[1], x, y) +
           s->luma[2] * kr_chan_load(&s->ch[2], x, y);
}

/** Mean guide intensity over grid cell (x, y) of an area sampling (as kr_prepare_pixel). */
KR_FX float kr_grid_luma(const kr_prepare_item *it, int x, int y)
{
    float acc = 0.0f;
    for (int j = 0; j < it->ny; j++) {
        float ty = (float)y + ((float)j + 0.5f) / (float)it->ny;
        for (int i = 0; i < it->nx; i++) {
            float tx = (float)x + ((float)i + 0.5f) / (float)it->nx;
            float fx = it->m[0] * tx + it->m[1] * ty + it->m[2] - 0.5f;
            float fy = it->m[3] * tx + it->m[4] * ty + it->m[5] - 0.5f;
            acc += kr_src_luma_at(&it->src, fx, fy);
        }
    }
    return acc * (1.0f / (float)(it->nx * it->ny));
}

/** Bilinear interpolation in a row-major float grid of width gw: along x in rows y0 and y1,
 *  then along y (the refinement's order). */
KR_FX float kr_grid_bilerp_xy(const float *g, int gw, int y0, int y1, float fy, int x0, int x1,
                              float fx)
{
    const float *r0 = g + (size_t)y0 * (size_t)gw, *r1 = g + (size_t)y1 * (size_t)gw;
    float h0 = r0[x0] + (r0[x1] - r0[x0]) * fx;
    float h1 = r1[x0] + (r1[x1] - r1[x0]) * fx;
    return h0 + (h1 - h0) * fy;
}

/** Bilinear interpolation in a row-major float grid of width gw: first along y between rows
 *  y0 and y1, then along x (the compositor's order). */
KR_FX float kr_grid_bilerp(const float *g, int gw, int y0, int y1, float fy, int x0, int x1,
                           float fx)
{
    const float *r0 = g + (size_t)y0 * (size_t)gw, *r1 = g + (size_t)y1 * (size_t)gw;
    float v0 = r0[x0] + (r1[x0] - r0[x0]) * fy;
    float v1 = r0[x1] + (r1[x1] - r0[x1]) * fy;
    return v0 + (v1 - v0) * fx;
}

/** Splits an index coordinate along an axis of n cells into i0, i1 and the fraction. */
KR_FX float kr_axis_split(float c, int n, int *i0, int *i1)
{
    c = kr_clampf(c, 0.0f, (float)(n - 1));
    *i0 = (int)c;
    *i1 = *i0 + (*i0 < n - 1);
    return c - (float)*i0;
}

/** Rounded sum / n for a box filter, with mul = kr_box_mul(n): the same on every backend. */
KR_FX uint32_t kr_box_div(uint32_t sum, uint32_t mul)
{
    return (uint32_t)(((uint64_t)sum * mul + 0x80000000ull) >> 32);
}

/** Multiplier for kr_box_div giving round(sum * 255 / (65535 * n)): a box sum of 16-bit
 *  matte codes straight to an 8-bit code. */
KR_FX uint32_t kr_box_mul8(uint32_t n)
{
    uint64_t den = 257ull * n; /* 65535 / 255 */
    return (uint32_t)((0x100000000ull + den / 2) / den);
}

KR_FX uint32_t kr_box_mul(uint32_t n)
{
    if (n <= 1)
        return 0xFFFFFFFFu;
    return (uint32_t)((0x100000000ull + n / 2) / n);
}

/** Guided filter: the linear model alpha = a * I + b fitted in one window from the window
 *  means of I, p, I*p and I*I, with regulariser eps. */
KR_FX void kr_guided_coeffs(float mi, float mp, float mip, float mii, float eps, float *a,
                            float *b)
{
    float cov = mip - mi * mp;
    float var = mii - mi * mi;
    var = var > 0.0f ? var : 0.0f;
    float av = cov / (var + eps);
    *a = av;
    *b = mp - av * mi;
}

/** [0,1] -> 16-bit matte code. */
KR_FX uint16_t kr_alpha16(float q)
{
    return (uint16_t)(q * 65535.0f + 0.5f);
}

/** 16-bit matte code -> 8-bit, rounded. */
KR_FX uint8_t kr_alpha16_to8(uint32_t v)
{
    return (uint8_t)((v * 255u + 32767u) / 65535u);
}

/** Position along a low-resolution axis of n cells spanning a full axis of size full:
 *  index coordinate of full-resolution index i (half-pixel centres), unclamped. */
KR_FX float kr_up_coord(int i, float scale)
{
    return ((float)i + 0.5f) * scale - 0.5f;
}

/* ---- compositing ----------------------------------------------------------------------- */

/** Alpha in [0,1] from a GRAY8 code. */
KR_FX float kr_alpha_from8(unsigned v) { return (float)v * (1.0f / 255.0f); }

/** Alpha in [0,1] from the sum of four GRAY8 codes. */
KR_FX float kr_alpha_from_sum8(unsigned sum) { return (float)sum * (1.0f / 1020.0f); }

/** Matte value of luma pixel (x, y) of a GRAY8 or GRAYF32 plane. */
KR_FX float kr_alpha_at(const uint8_t *alpha, ptrdiff_t stride, int f32, int x, int y)
{
    const uint8_t *row = alpha + (ptrdiff_t)y * stride;
    return f32 ? kr_mask_value(((const float *)(const void *)row)[x]) : kr_alpha_from8(row[x]);
}

/** Matte value of 4:2:0 chroma sample (cx, cy): the mean over its 2x2 luma block (edge
 *  pixels repeated where the block passes the frame's edge). GRAY8 mattes sum the codes
 *  exactly, so the CPU can read the value from a table of the 1021 possible sums. */
KR_FX float kr_alpha_chroma(const uint8_t *alpha, ptrdiff_t stride, int f32, int w, int h, int cx,
                            int cy)
{
    int x0 = 2 * cx, y0 = 2 * cy;
    int x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
    if (!f32) {
        const uint8_t *r0 = alpha + (ptrdiff_t)y0 * stride, *r1 = alpha + (ptrdiff_t)y1 * stride;
        return kr_alpha_from_sum8((unsigned)r0[x0] + r0[x1] + r1[x0] + r1[x1]);
    }
    return (kr_alpha_at(alpha, stride, f32, x0, y0) + kr_alpha_at(alpha, stride, f32, x1, y0) +
            kr_alpha_at(alpha, stride, f32, x0, y1) + kr_alpha_at(alpha, stride, f32, x1, y1)) *
           0.25f;
}

/** 4x4 ordered-dither offset in (0,1) at (x, y); 0.5 when dithering is off. */
KR_FX float kr_dither(int dither, int x, int y)
{
    if (!dither)
        return 0.5f;
    unsigned a = (unsigned)(x ^ y) & 3u, b = (unsigned)y & 3u;
    unsigned v = ((a & 1u) << 3) | ((b & 1u) << 2) | (a & 2u) | ((b & 2u) >> 1);
    return ((float)v + 0.5f) * (1.0f / 16.0f);
}

/** Rounds a code with the dither offset d (floor(v + d)) and clamps it to [0, maxcode]. */
KR_FX int kr_quantise(float v, float d, int maxcode)
{
    float r = v + d;
    if (!(r > 0.0f))
        return 0;
    if (r >= (float)maxcode)
        return maxcode;
    return (int)r;
}

/** Composite: foreground code v over background code bg with coverage alpha. */
KR_FX float kr_blend(float v, float bg, float alpha)
{
    return bg + alpha * (v - bg);
}

/** Background weight of the mask-weighted blur: small floor so that the normalised blur is
 *  defined everywhere (deep inside the person it is then the plain blur, never seen). */
#define KR_BLUR_WEIGHT_FLOOR (1.0f / 1024.0f)

KR_FX float kr_blur_weight(float alpha) { return 1.0f - alpha + KR_BLUR_WEIGHT_FLOOR; }

/** Stores a code into a channel sample. */
KR_FX void kr_chan_store(const kr_chan *c, int x, int y, int v)
{
    uint8_t *p = c->base + (ptrdiff_t)y * c->stride + (ptrdiff_t)x * c->step;
    if (c->wide)
        *(uint16_t *)(void *)p = (uint16_t)(v << c->shift);
    else
        *p = (uint8_t)v;
}

#endif
