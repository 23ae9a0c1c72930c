/*
 * Internal to the overlay module: the primitive record, the overlay object and the per-pixel
 * shading shared by the CPU renderer (cpu/overlay.c) and the CUDA renderer (cuda/overlay.cu).
 * The shading functions are compiled for host and device from this one definition so that
 * both renderers compute every pixel with the same arithmetic. The renderers' table is in
 * backend.h.
 */
#ifndef KEYER_OVERLAY_INTERNAL_H
#define KEYER_OVERLAY_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "keyer/overlay.h"

#ifdef __CUDACC__
#define KR_OV_HD static __host__ __device__ __forceinline__
#else
#define KR_OV_HD static inline
#endif

/* Float operations rounded once each, never fused (the host's C arithmetic), for values both
 * renderers must compute bit for bit (curve points). */
#ifdef __CUDA_ARCH__
#define KR_OV_ADD(a, b) __fadd_rn((a), (b))
#define KR_OV_MUL(a, b) __fmul_rn((a), (b))
#define KR_OV_DIV(a, b) __fdiv_rn((a), (b))
#else
#define KR_OV_ADD(a, b) ((a) + (b))
#define KR_OV_MUL(a, b) ((a) * (b))
#define KR_OV_DIV(a, b) ((a) / (b))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Tile side in pixels of the CPU renderer: it bins primitives per 64x64 tile. */
#define KR_OV_TILE 64
/** Inside a tile, primitives are culled again per block of KR_OV_BLOCK_W x KR_OV_BLOCK_H pixels
 * (on the GPU, the pixels of one warp). */
#define KR_OV_BLOCK_W 16
#define KR_OV_BLOCK_H 8

/** Font cell of the built-in bitmap font (src/overlay/text.c): 5 x 7 units, advance 6. */
#define KR_FONT_W 5
#define KR_FONT_H 7
#define KR_FONT_ADVANCE 6
#define KR_FONT_LINE 9

typedef enum kr_prim_kind {
    KR_PRIM_SEGMENT = 0,
    KR_PRIM_BOX,
    KR_PRIM_GLYPH,
    KR_PRIM_CURVE,     /* a quadratic Bézier, flattened by the renderer into segs segments */
    KR_PRIM_CURVE_REST /* the slots of a curve's segments after its first: draws nothing */
} kr_prim_kind;

/*
 * One primitive. The layout is plain data shared with the CUDA renderer (copied as is).
 *  - segment: (x0,y0)-(x1,y1) endpoints, half_width; colour in stroke.
 *  - box: (x0,y0) centre, (x1,y1) half extents, radius, half_width (stroke); stroke and fill.
 *  - glyph: (x0,y0) top-left of the 5x7 cell, radius = pixels per font unit, rows = the
 *    glyph's 7 rows (bit 4 = leftmost column); colour in stroke.
 *  - curve: (x0,y0) and (x1,y1) the ends, (cx,cy) the control point, segs the number of
 *    segments (1..64) it is drawn as, half_width; colour in stroke; the bounding box is that of
 *    the control polygon. It takes segs slots: this one and segs - 1 KR_PRIM_CURVE_REST records
 *    after it (empty bounding box). A renderer replaces the curve and its rest by its segments
 *    (kr_ov_curve_segment: the CPU renderer on the host, the CUDA renderer on the device), each
 *    exactly the segment record keyer_overlay_add_line would make; slots past the overlay's
 *    count (keyer_overlay_truncate) are left out.
 */
typedef struct kr_prim {
    int32_t kind;             /* kr_prim_kind */
    float bx0, by0, bx1, by1; /* bounding box in pixels, anti-aliasing margin included */
    float x0, y0, x1, y1, half_width;
    float radius;
    float stroke[4]; /* premultiplied r, g, b, a */
    float fill[4];
    uint8_t rows[8];
    float cx, cy;    /* curve: control point */
    int32_t segs;    /* curve: segments */
} kr_prim;

/** Renderer state slots of an overlay, indexed by keyer_memory_type (host, CUDA). */
#define KR_OVERLAY_BACKENDS 2

struct keyer_overlay {
    int capacity, count;
    kr_prim *prims;
    void *cuda_stream; /* cudaStream_t for CUDA frames (NULL: the default stream) */
    /* each renderer's state (backend.h), created on its first render */
    void *state[KR_OVERLAY_BACKENDS];
};

/** The font: glyphs of ASCII 32..126, 7 rows each (defined in text.c). */
extern const uint8_t kr_font_5x7[95][KR_FONT_H];

/** Premultiplied, clamped colour. */
void kr_overlay_premultiply(keyer_color c, float out[4]);

/** Reserves the next primitive slot (NULL with the error set when full or ov is NULL). */
kr_prim *kr_overlay_new_prim(keyer_overlay *ov, keyer_error *err);

/* ---- shading, shared by host and device -------------------------------------------------- */

KR_OV_HD float kr_ov_clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/*
 * Exact area coverage of the pixel square [px, px+1) x [py, py+1) by the lit cells of a glyph
 * whose cell (0,0) has its top-left corner at (ox, oy) and whose cells are s pixels wide
 * (s >= 1, so a pixel meets at most 2 x 2 cells).
 */
KR_OV_HD float kr_ov_glyph_coverage(const uint8_t *rows, float ox, float oy, float s, float px,
                                    float py)
{
    float u0 = (px - ox) / s, u1 = (px + 1.0f - ox) / s;
    float v0 = (py - oy) / s, v1 = (py + 1.0f - oy) / s;
    int c0 = (int)floorf(u0), c1 = (int)floorf(u1), r0 = (int)floorf(v0), r1 = (int)floorf(v1);
    if (c0 < 0)
        c0 = 0;
    if (r0 < 0)
        r0 = 0;
    if (c1 > KR_FONT_W - 1)
        c1 = KR_FONT_W - 1;
    if (r1 > KR_FONT_H - 1)
        r1 = KR_FONT_H - 1;
    float area = 0.0f;
    for (int r = r0; r <= r1; r++) {
        float dv = fminf(v1, (float)(r + 1)) - fmaxf(v0, (float)r);
        if (dv <= 0.0f)
            continue;
        for (int c = c0; c <= c1; c++) {
            if (!((rows[r] >> (KR_FONT_W - 1 - c)) & 1))
                continue;
            float du = fminf(u1, (float)(c + 1)) - fmaxf(u0, (float)c);
            if (du > 0.0f)
                area += du * dv;
        }
    }
    return kr_ov_clamp01(area * s * s);
}

/* Segment i (1..c->segs) of curve c: from the curve's point at t = (i - 1) / segs to the one
 * at i / segs, as the record keyer_overlay_add_line makes for it (the same float operations on
 * host and device). */
KR_OV_HD void kr_ov_curve_segment(const kr_prim *c, int i, kr_prim *seg)
{
    float pt[2][2];
    for (int e = 0; e < 2; e++) {
        const int at = i - 1 + e;
        if (at == 0) {
            pt[e][0] = c->x0;
            pt[e][1] = c->y0;
            continue;
        }
        const float t = KR_OV_DIV((float)at, (float)c->segs), u = 1 - t;
        const float w0 = KR_OV_MUL(u, u), w1 = KR_OV_MUL(KR_OV_MUL(2.0f, u), t),
                    w2 = KR_OV_MUL(t, t);
        pt[e][0] = KR_OV_ADD(KR_OV_ADD(KR_OV_MUL(w0, c->x0), KR_OV_MUL(w1, c->cx)),
                             KR_OV_MUL(w2, c->x1));
        pt[e][1] = KR_OV_ADD(KR_OV_ADD(KR_OV_MUL(w0, c->y0), KR_OV_MUL(w1, c->cy)),
                             KR_OV_MUL(w2, c->y1));
    }
    kr_prim s;
    memset(&s, 0, sizeof(s));
    s.kind = KR_PRIM_SEGMENT;
    s.x0 = pt[0][0];
    s.y0 = pt[0][1];
    s.x1 = pt[1][0];
    s.y1 = pt[1][1];
    s.half_width = c->half_width;
    const float m = c->half_width + 1.0f;
    s.bx0 = fminf(s.x0, s.x1) - m;
    s.by0 = fminf(s.y0, s.y1) - m;
    s.bx1 = fmaxf(s.x0, s.x1) + m;
    s.by1 = fmaxf(s.y0, s.y1) + m;
    for (int k = 0; k < 4; k++)
        s.stroke[k] = c->stroke[k];
    *seg = s;
}

/* Coverage of segment p at pixel centre (px, py). */
KR_OV_HD float kr_ov_segment_coverage(const kr_prim *p, float px, float py)
{
    float vx = p->x1 - p->x0, vy = p->y1 - p->y0, wx = px - p->x0, wy = py - p->y0;
    float len2 = vx * vx + vy * vy;
    float t = len2 > 0 ? kr_ov_clamp01((wx * vx + wy * vy) / len2) : 0;
    float dx = wx - t * vx, dy = wy - t * vy;
    return kr_ov_clamp01(p->half_width - sqrtf(dx * dx + dy * dy) + 0.5f);
}

/* Composites primitive p's contribution at pixel (ix, iy) over the accumulator acc
 * (premultiplied), sampling coverage at the pixel centre. A curve composites its segments in
 * order (what its flattened records draw); its rest draws nothing. */
KR_OV_HD void kr_ov_shade(const kr_prim *p, int ix, int iy, float acc[4])
{
    float px = (float)ix + 0.5f, py = (float)iy + 0.5f;
    float src[4] = {0, 0, 0, 0};
    if (p->kind == KR_PRIM_CURVE) {
        for (int i = 1; i <= p->segs; i++) {
            kr_prim seg;
            kr_ov_curve_segment(p, i, &seg);
            if ((float)ix + 1 < seg.bx0 || (float)ix > seg.bx1 || (float)iy + 1 < seg.by0 ||
                (float)iy > seg.by1)
                continue;
            float cov = kr_ov_segment_coverage(&seg, px, py), k = 1 - seg.stroke[3] * cov;
            for (int c = 0; c < 4; c++)
                acc[c] = seg.stroke[c] * cov + acc[c] * k;
        }
        return;
    }
    if (p->kind == KR_PRIM_CURVE_REST)
        return;
    if (p->kind == KR_PRIM_SEGMENT) {
        float cov = kr_ov_segment_coverage(p, px, py);
        for (int c = 0; c < 4; c++)
            src[c] = p->stroke[c] * cov;
    } else if (p->kind == KR_PRIM_BOX) {
        /* Signed distance to the rounded rectangle (negative inside). */
        float qx = fabsf(px - p->x0) - p->x1 + p->radius;
        float qy = fabsf(py - p->y0) - p->y1 + p->radius;
        float ox = fmaxf(qx, 0), oy = fmaxf(qy, 0);
        float d = sqrtf(ox * ox + oy * oy) + fminf(fmaxf(qx, qy), 0) - p->radius;
        float fill_cov = kr_ov_clamp01(0.5f - d);
        float stroke_cov = p->stroke[3] > 0 ? kr_ov_clamp01(p->half_width - fabsf(d) + 0.5f) : 0;
        /* Stroke over fill. */
        for (int c = 0; c < 4; c++)
            src[c] = p->stroke[c] * stroke_cov +
                     p->fill[c] * fill_cov * (1 - p->stroke[3] * stroke_cov);
    } else {
        float cov = kr_ov_glyph_coverage(p->rows, p->x0, p->y0, p->radius, (float)ix, (float)iy);
        for (int c = 0; c < 4; c++)
            src[c] = p->stroke[c] * cov;
    }
    float k = 1 - src[3];
    for (int c = 0; c < 4; c++)
        acc[c] = src[c] + acc[c] * k;
}

/* Whether pixel (ix, iy) can be touched by p (its bounding box test). */
KR_OV_HD int kr_ov_touches(const kr_prim *p, int ix, int iy)
{
    return !((float)ix + 1 < p->bx0 || (float)ix > p->bx1 || (float)iy + 1 < p->by0 ||
             (float)iy > p->by1);
}

/*
 * Whether p can give a non-zero coverage to any pixel of the rectangle of pixel indices
 * [px0, px1) x [py0, py1). Conservative (it may say yes for a primitive that leaves every pixel
 * of the rectangle unchanged, never the reverse): the bounding box, then for segments and boxes
 * the distance field at the rectangle's centre, which changes by at most the half diagonal
 * inside it (both fields are 1-Lipschitz), with one pixel of slack for rounding. Renderers use
 * it to skip primitives per tile and per block of pixels; a skipped primitive would have added
 * exactly nothing, so culling never changes a pixel.
 */
KR_OV_HD int kr_ov_may_touch_rect(const kr_prim *p, int px0, int py0, int px1, int py1)
{
    if ((float)px1 < p->bx0 || (float)px0 > p->bx1 || (float)py1 < p->by0 ||
        (float)py0 > p->by1)
        return 0;
    if (p->kind == KR_PRIM_GLYPH || p->kind == KR_PRIM_CURVE)
        return 1;
    if (p->kind == KR_PRIM_CURVE_REST)
        return 0;
    float cx = 0.5f * (float)(px0 + px1), cy = 0.5f * (float)(py0 + py1);
    float hx = 0.5f * (float)(px1 - px0), hy = 0.5f * (float)(py1 - py0);
    float r = sqrtf(hx * hx + hy * hy) + 1.0f;
    float reach = p->half_width + 0.5f;
    if (p->kind == KR_PRIM_SEGMENT) {
        float vx = p->x1 - p->x0, vy = p->y1 - p->y0, wx = cx - p->x0, wy = cy - p->y0;
        float len2 = vx * vx + vy * vy;
        float t = len2 > 0 ? kr_ov_clamp01((wx * vx + wy * vy) / len2) : 0;
        float dx = wx - t * vx, dy = wy - t * vy;
        return sqrtf(dx * dx + dy * dy) < reach + r;
    }
    float qx = fabsf(cx - p->x0) - p->x1 + p->radius;
    float qy = fabsf(cy - p->y0) - p->y1 + p->radius;
    float ox = fmaxf(qx, 0), oy = fmaxf(qy, 0);
    float d = sqrtf(ox * ox + oy * oy) + fminf(fmaxf(qx, qy), 0) - p->radius;
    if (d - r >= reach)
        return 0; /* every pixel is outside the fill and the stroke */
    if (p->fill[3] <= 0 && d + r <= -reach)
        return 0; /* every pixel is inside, where an unfilled box draws nothing */
    return 1;
}

/*
 * Whether every pixel of the rectangle [px0, px1) x [py0, py1) lies deep inside the filled box
 * p, away from its edge and stroke: there kr_ov_shade's contribution is exactly p->fill, so a
 * renderer may blend the fill without evaluating the distance field per pixel.
 */
KR_OV_HD int kr_ov_box_fills_rect(const kr_prim *p, int px0, int py0, int px1, int py1)
{
    if (p->kind != KR_PRIM_BOX)
        return 0;
    float cx = 0.5f * (float)(px0 + px1), cy = 0.5f * (float)(py0 + py1);
    float hx = 0.5f * (float)(px1 - px0), hy = 0.5f * (float)(py1 - py0);
    float r = sqrtf(hx * hx + hy * hy) + 1.0f;
    float qx = fabsf(cx - p->x0) - p->x1 + p->radius;
    float qy = fabsf(cy - p->y0) - p->y1 + p->radius;
    float ox = fmaxf(qx, 0), oy = fmaxf(qy, 0);
    float d = sqrtf(ox * ox + oy * oy) + fminf(fmaxf(qx, qy), 0) - p->radius;
    return d + r <= -(p->half_width + 0.5f);
}

/* acc = fill over acc, as kr_ov_shade computes it for a pixel deep inside a filled box. */
KR_OV_HD void kr_ov_blend_fill(const kr_prim *p, float acc[4])
{
    float k = 1 - p->fill[3];
    for (int c = 0; c < 4; c++)
        acc[c] = p->fill[c] + acc[c] * k;
}

/* YUV conversion constants in 8-bit code values for a frame's matrix and range. */
typedef struct kr_ov_yuv {
    float kr, kg, kb, y_off, y_scale, c_scale;
} kr_ov_yuv;

KR_OV_HD unsigned char kr_ov_to_u8(float v)
{
    v = v + 0.5f;
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Blends the premultiplied accumulator over an RGBA pixel (straight alpha). */
KR_OV_HD void kr_ov_blend_rgba(unsigned char *d, const float acc[4])
{
    float k = 1 - acc[3];
    for (int c = 0; c < 3; c++)
        d[c] = kr_ov_to_u8(acc[c] * 255 + d[c] * k);
    d[3] = kr_ov_to_u8(acc[3] * 255 + d[3] * k);
}

/* Blends over a luma sample. */
KR_OV_HD void kr_ov_blend_luma(unsigned char *d, const float acc[4], const kr_ov_yuv *yc)
{
    float k = 1 - acc[3];
    float yv = yc->kr * acc[0] + yc->kg * acc[1] + yc->kb * acc[2];
    *d = kr_ov_to_u8(yc->y_off * acc[3] + yc->y_scale * yv + *d * k);
}

/* Blends the 2x2-averaged accumulator csum (already divided by the pixel count) over a chroma
 * pair. */
KR_OV_HD void kr_ov_blend_chroma(unsigned char *u, unsigned char *v, const float csum[4],
                                 const kr_ov_yuv *yc)
{
    float yv = yc->kr * csum[0] + yc->kg * csum[1] + yc->kb * csum[2];
    float cb = (csum[2] - yv) / (2 * (1 - yc->kb));
    float cr = (csum[0] - yv) / (2 * (1 - yc->kr));
    float k = 1 - csum[3];
    *u = kr_ov_to_u8(128 * csum[3] + yc->c_scale * cb + *u * k);
    *v = kr_ov_to_u8(128 * csum[3] + yc->c_scale * cr + *v * k);
}

#ifdef __cplusplus
}
#endif
#endif /* KEYER_OVERLAY_INTERNAL_H */
