/*
 * CPU overlay renderer: primitives binned into 64x64 tiles, per-pixel analytic coverage from
 * signed distances, premultiplied "over" compositing in insertion order.
 */
#include "keyer/overlay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TILE 64

typedef enum prim_kind { PRIM_SEGMENT, PRIM_BOX } prim_kind;

typedef struct prim {
    prim_kind kind;
    float bx0, by0, bx1, by1; /* bounding box in pixels, anti-aliasing margin included */
    /* segment: endpoints and half width; box: centre, half extents, radius, stroke half width */
    float x0, y0, x1, y1, half_width;
    float radius;
    float stroke[4]; /* premultiplied r, g, b, a */
    float fill[4];
} prim;

struct keyer_overlay {
    int capacity, count;
    prim *prims;
    /* tile lists: tile_start[t]..tile_start[t+1] index into tile_items */
    int tiles_cap;
    int *tile_start;
    int items_cap;
    int *tile_items;
};

keyer_status keyer_overlay_create(int capacity, keyer_overlay **out, keyer_error *err)
{
    if (!out || capacity < 1 || capacity > (1 << 22))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay: capacity %d outside 1..%d", capacity, 1 << 22);
    *out = NULL;
    keyer_overlay *ov = calloc(1, sizeof(*ov));
    if (!ov || !(ov->prims = malloc((size_t)capacity * sizeof(prim)))) {
        free(ov);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
    }
    ov->capacity = capacity;
    *out = ov;
    return KEYER_OK;
}

void keyer_overlay_destroy(keyer_overlay **pov)
{
    if (!pov || !*pov)
        return;
    keyer_overlay *ov = *pov;
    free(ov->prims);
    free(ov->tile_start);
    free(ov->tile_items);
    free(ov);
    *pov = NULL;
}

void keyer_overlay_clear(keyer_overlay *ov)
{
    if (ov)
        ov->count = 0;
}

int keyer_overlay_count(const keyer_overlay *ov) { return ov ? ov->count : 0; }

static void premultiply(keyer_color c, float out[4])
{
    float a = fminf(fmaxf(c.a, 0.0f), 1.0f);
    out[0] = fminf(fmaxf(c.r, 0.0f), 1.0f) * a;
    out[1] = fminf(fmaxf(c.g, 0.0f), 1.0f) * a;
    out[2] = fminf(fmaxf(c.b, 0.0f), 1.0f) * a;
    out[3] = a;
}

static int finite4(float a, float b, float c, float d)
{
    return isfinite(a) && isfinite(b) && isfinite(c) && isfinite(d);
}

static prim *new_prim(keyer_overlay *ov, keyer_error *err)
{
    if (!ov) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
        return NULL;
    }
    if (ov->count >= ov->capacity) {
        keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                        "overlay: capacity of %d primitives reached", ov->capacity);
        return NULL;
    }
    return &ov->prims[ov->count];
}

keyer_status keyer_overlay_add_line(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                    float width, keyer_color color, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !(width > 0) || !isfinite(width))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay line: coordinates must be finite and width > 0");
    prim *p = new_prim(ov, err);
    if (!p)
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    p->kind = PRIM_SEGMENT;
    p->x0 = x0;
    p->y0 = y0;
    p->x1 = x1;
    p->y1 = y1;
    p->half_width = width / 2;
    float m = p->half_width + 1.0f;
    p->bx0 = fminf(x0, x1) - m;
    p->by0 = fminf(y0, y1) - m;
    p->bx1 = fmaxf(x0, x1) + m;
    p->by1 = fmaxf(y0, y1) + m;
    premultiply(color, p->stroke);
    ov->count++;
    return KEYER_OK;
}

keyer_status keyer_overlay_add_dot(keyer_overlay *ov, float x, float y, float radius,
                                   keyer_color color, keyer_error *err)
{
    return keyer_overlay_add_line(ov, x, y, x, y, 2 * radius, color, err);
}

keyer_status keyer_overlay_add_polyline(keyer_overlay *ov, const float *xy, int n, float width,
                                        keyer_color color, keyer_error *err)
{
    if (!xy || n < 2)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay polyline: needs at least 2 points");
    if (ov && ov->count + n - 1 > ov->capacity)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "overlay: capacity of %d primitives reached", ov->capacity);
    for (int i = 0; i + 1 < n; i++) {
        keyer_status st = keyer_overlay_add_line(ov, xy[2 * i], xy[2 * i + 1], xy[2 * i + 2],
                                                 xy[2 * i + 3], width, color, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

keyer_status keyer_overlay_add_curve(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                     float bend, float width, keyer_color color, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !isfinite(bend))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay curve: values must be finite");
    float dx = x1 - x0, dy = y1 - y0, len = sqrtf(dx * dx + dy * dy);
    float cx = (x0 + x1) / 2 - dy * bend, cy = (y0 + y1) / 2 + dx * bend;
    /* A quadratic's distance from its chord is at most |P0 - 2C + P1| / 4 per subdivision level;
     * n segments keep the error below 0.1 px when dev / (4 n^2) <= 0.1 (dev = |P0-2C+P1|). */
    float ddx = x0 - 2 * cx + x1, ddy = y0 - 2 * cy + y1;
    float dev = sqrtf(ddx * ddx + ddy * ddy);
    int n = (int)ceilf(sqrtf(dev / 0.4f));
    if (n < 1 || len == 0)
        n = 1;
    if (n > 64)
        n = 64;
    if (ov && ov->count + n > ov->capacity)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "overlay: capacity of %d primitives reached", ov->capacity);
    float px = x0, py = y0;
    for (int i = 1; i <= n; i++) {
        float t = (float)i / (float)n, u = 1 - t;
        float qx = u * u * x0 + 2 * u * t * cx + t * t * x1;
        float qy = u * u * y0 + 2 * u * t * cy + t * t * y1;
        keyer_status st = keyer_overlay_add_line(ov, px, py, qx, qy, width, color, err);
        if (st)
            return st;
        px = qx;
        py = qy;
    }
    return KEYER_OK;
}

keyer_status keyer_overlay_add_box(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                   float radius, float stroke_width, keyer_color stroke,
                                   keyer_color fill, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !isfinite(radius) || !isfinite(stroke_width) || radius < 0 ||
        stroke_width < 0 || x1 < x0 || y1 < y0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay box: needs finite x0 <= x1, y0 <= y1, radius >= 0, "
                               "stroke width >= 0");
    prim *p = new_prim(ov, err);
    if (!p)
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    p->kind = PRIM_BOX;
    p->x0 = (x0 + x1) / 2; /* centre */
    p->y0 = (y0 + y1) / 2;
    p->x1 = (x1 - x0) / 2; /* half extents */
    p->y1 = (y1 - y0) / 2;
    p->radius = fminf(radius, fminf(p->x1, p->y1));
    p->half_width = stroke_width / 2;
    float m = p->half_width + 1.0f;
    p->bx0 = x0 - m;
    p->by0 = y0 - m;
    p->bx1 = x1 + m;
    p->by1 = y1 + m;
    premultiply(stroke, p->stroke);
    if (stroke_width == 0)
        p->stroke[3] = 0;
    premultiply(fill, p->fill);
    ov->count++;
    return KEYER_OK;
}

static float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* Composites primitive p's contribution at pixel centre (px, py) over the accumulator. */
static void shade(const prim *p, float px, float py, float acc[4])
{
    float src[4] = {0, 0, 0, 0};
    if (p->kind == PRIM_SEGMENT) {
        float vx = p->x1 - p->x0, vy = p->y1 - p->y0, wx = px - p->x0, wy = py - p->y0;
        float len2 = vx * vx + vy * vy;
        float t = len2 > 0 ? clamp01((wx * vx + wy * vy) / len2) : 0;
        float dx = wx - t * vx, dy = wy - t * vy;
        float cov = clamp01(p->half_width - sqrtf(dx * dx + dy * dy) + 0.5f);
        for (int c = 0; c < 4; c++)
            src[c] = p->stroke[c] * cov;
    } else {
        /* Signed distance to the rounded rectangle (negative inside). */
        float qx = fabsf(px - p->x0) - p->x1 + p->radius;
        float qy = fabsf(py - p->y0) - p->y1 + p->radius;
        float ox = fmaxf(qx, 0), oy = fmaxf(qy, 0);
        float d = sqrtf(ox * ox + oy * oy) + fminf(fmaxf(qx, qy), 0) - p->radius;
        float fill_cov = clamp01(0.5f - d);
        float stroke_cov = p->stroke[3] > 0 ? clamp01(p->half_width - fabsf(d) + 0.5f) : 0;
        /* Stroke over fill. */
        for (int c = 0; c < 4; c++)
            src[c] = p->stroke[c] * stroke_cov + p->fill[c] * fill_cov * (1 - p->stroke[3] * stroke_cov);
    }
    float k = 1 - src[3];
    for (int c = 0; c < 4; c++)
        acc[c] = src[c] + acc[c] * k;
}

/* Builds per-tile primitive lists for a w x h frame. */
static keyer_status bin(keyer_overlay *ov, int w, int h, int *tw_out, int *th_out,
                        keyer_error *err)
{
    int tw = (w + TILE - 1) / TILE, th = (h + TILE - 1) / TILE, nt = tw * th;
    if (nt + 1 > ov->tiles_cap) {
        int *s = realloc(ov->tile_start, (size_t)(nt + 1) * sizeof(int));
        if (!s)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
        ov->tile_start = s;
        ov->tiles_cap = nt + 1;
    }
    memset(ov->tile_start, 0, (size_t)(nt + 1) * sizeof(int));
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ov->count; i++) {
            const prim *p = &ov->prims[i];
            int tx0 = (int)floorf(p->bx0 / TILE), ty0 = (int)floorf(p->by0 / TILE);
            int tx1 = (int)floorf(p->bx1 / TILE), ty1 = (int)floorf(p->by1 / TILE);
            if (tx1 < 0 || ty1 < 0 || tx0 >= tw || ty0 >= th)
                continue;
            tx0 = tx0 < 0 ? 0 : tx0;
            ty0 = ty0 < 0 ? 0 : ty0;
            tx1 = tx1 >= tw ? tw - 1 : tx1;
            ty1 = ty1 >= th ? th - 1 : ty1;
            for (int ty = ty0; ty <= ty1; ty++)
                for (int tx = tx0; tx <= tx1; tx++) {
                    int t = ty * tw + tx;
                    if (pass == 0) {
                        ov->tile_start[t + 1]++;
                        total++;
                    } else {
                        ov->tile_items[ov->tile_start[t]++] = i;
                    }
                }
        }
        if (pass == 0) {
            if (total > (size_t)ov->items_cap) {
                if (total > (size_t)INT32_MAX)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: too many tiles");
                int *items = realloc(ov->tile_items, total * sizeof(int));
                if (!items)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
                ov->tile_items = items;
                ov->items_cap = (int)total;
            }
            for (int t = 0; t < nt; t++) /* prefix sums; tile_start[t] = first slot */
                ov->tile_start[t + 1] += ov->tile_start[t];
        }
    }
    /* Pass 1 advanced each start to its end: shift back. */
    for (int t = nt; t > 0; t--)
        ov->tile_start[t] = ov->tile_start[t - 1];
    ov->tile_start[0] = 0;
    *tw_out = tw;
    *th_out = th;
    return KEYER_OK;
}

typedef struct yuv_coeffs {
    float kr, kg, kb, y_off, y_scale, c_scale; /* 8-bit code values */
} yuv_coeffs;

static yuv_coeffs coeffs_for(const keyer_frame *f)
{
    yuv_coeffs c;
    keyer_color_matrix m = f->matrix;
    if (m == KEYER_COLOR_MATRIX_UNSPECIFIED)
        m = f->height >= 720 ? KEYER_COLOR_MATRIX_BT709 : KEYER_COLOR_MATRIX_BT601;
    if (m == KEYER_COLOR_MATRIX_BT709) {
        c.kr = 0.2126f;
        c.kb = 0.0722f;
    } else if (m == KEYER_COLOR_MATRIX_BT2020) {
        c.kr = 0.2627f;
        c.kb = 0.0593f;
    } else {
        c.kr = 0.299f;
        c.kb = 0.114f;
    }
    c.kg = 1 - c.kr - c.kb;
    if (f->range == KEYER_COLOR_RANGE_FULL) {
        c.y_off = 0;
        c.y_scale = 255;
        c.c_scale = 255;
    } else {
        c.y_off = 16;
        c.y_scale = 219;
        c.c_scale = 224;
    }
    return c;
}

static uint8_t to_u8(float v)
{
    v = v + 0.5f;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

keyer_status keyer_overlay_render(keyer_overlay *ov, keyer_frame *f, keyer_error *err)
{
    if (!ov)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
    keyer_status st = keyer_frame_check(f, err);
    if (st)
        return keyer_error_prefix(err, "overlay render: ");
    if (f->memory != KEYER_MEMORY_HOST)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: the CPU renderer needs a host frame");
    int yuv = f->format == KEYER_PIXEL_FORMAT_NV12 || f->format == KEYER_PIXEL_FORMAT_YUV420P;
    if (!yuv && f->format != KEYER_PIXEL_FORMAT_RGBA)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: %s frames are not supported (rgba, nv12, yuv420p)",
                               keyer_pixel_format_name(f->format));
    if (ov->count == 0)
        return KEYER_OK;
    int tw = 0, th = 0;
    if ((st = bin(ov, f->width, f->height, &tw, &th, err)))
        return st;
    yuv_coeffs yc = coeffs_for(f);
    /* Tiles are rendered in 2x2 pixel blocks so the chroma of YUV frames can be averaged. */
    for (int ty = 0; ty < th; ty++)
        for (int tx = 0; tx < tw; tx++) {
            int t = ty * tw + tx, b = ov->tile_start[t], e = ov->tile_start[t + 1];
            if (b == e)
                continue;
            int x0 = tx * TILE, y0 = ty * TILE;
            int x1 = x0 + TILE < f->width ? x0 + TILE : f->width;
            int y1 = y0 + TILE < f->height ? y0 + TILE : f->height;
            for (int y = y0; y < y1; y += 2)
                for (int x = x0; x < x1; x += 2) {
                    float csum[4] = {0, 0, 0, 0};
                    int ncov = 0;
                    for (int dy = 0; dy < 2 && y + dy < y1; dy++)
                        for (int dx = 0; dx < 2 && x + dx < x1; dx++) {
                            int px = x + dx, py = y + dy;
                            float acc[4] = {0, 0, 0, 0};
                            for (int k = b; k < e; k++) {
                                const prim *p = &ov->prims[ov->tile_items[k]];
                                if (px + 1 < p->bx0 || px > p->bx1 || py + 1 < p->by0 || py > p->by1)
                                    continue;
                                shade(p, (float)px + 0.5f, (float)py + 0.5f, acc);
                            }
                            for (int c = 0; c < 4; c++)
                                csum[c] += acc[c];
                            ncov++;
                            if (acc[3] <= 0)
                                continue;
                            float k = 1 - acc[3];
                            if (!yuv) {
                                uint8_t *d = f->data[0] + py * f->stride[0] + px * 4;
                                for (int c = 0; c < 3; c++)
                                    d[c] = to_u8(acc[c] * 255 + d[c] * k);
                                d[3] = to_u8(acc[3] * 255 + d[3] * k);
                            } else {
                                uint8_t *d = f->data[0] + py * f->stride[0] + px;
                                float yv = yc.kr * acc[0] + yc.kg * acc[1] + yc.kb * acc[2];
                                *d = to_u8(yc.y_off * acc[3] + yc.y_scale * yv + *d * k);
                            }
                        }
                    if (!yuv || csum[3] <= 0)
                        continue;
                    for (int c = 0; c < 4; c++)
                        csum[c] /= (float)ncov;
                    float yv = yc.kr * csum[0] + yc.kg * csum[1] + yc.kb * csum[2];
                    float cb = (csum[2] - yv) / (2 * (1 - yc.kb));
                    float cr = (csum[0] - yv) / (2 * (1 - yc.kr));
                    float k = 1 - csum[3];
                    int cx = x / 2, cyy = y / 2;
                    uint8_t *u, *v;
                    if (f->format == KEYER_PIXEL_FORMAT_NV12) {
                        u = f->data[1] + cyy * f->stride[1] + cx * 2;
                        v = u + 1;
                    } else {
                        u = f->data[1] + cyy * f->stride[1] + cx;
                        v = f->data[2] + cyy * f->stride[2] + cx;
                    }
                    *u = to_u8(128 * csum[3] + yc.c_scale * cb + *u * k);
                    *v = to_u8(128 * csum[3] + yc.c_scale * cr + *v * k);
                }
        }
    return KEYER_OK;
}
