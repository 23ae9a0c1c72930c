/*
 * CPU overlay renderer: primitives binned into 64x64 tiles, per-pixel analytic coverage from
 * signed distances, premultiplied "over" compositing in insertion order.
 */
#include "keyer/overlay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "overlay/overlay_internal.h"

#define TILE KR_OV_TILE

keyer_status keyer_overlay_create(int capacity, keyer_overlay **out, keyer_error *err)
{
    if (!out || capacity < 1 || capacity > (1 << 22))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay: capacity %d outside 1..%d", capacity, 1 << 22);
    *out = NULL;
    keyer_overlay *ov = calloc(1, sizeof(*ov));
    if (!ov || !(ov->prims = malloc((size_t)capacity * sizeof(kr_prim)))) {
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
#ifdef KEYER_HAVE_CUDA
    kr_overlay_cuda_free(ov->cuda);
#endif
    free(ov->prims);
    free(ov->tile_start);
    free(ov->tile_items);
    free(ov->sub_items);
    free(ov);
    *pov = NULL;
}

void keyer_overlay_clear(keyer_overlay *ov)
{
    if (ov)
        ov->count = 0;
}

int keyer_overlay_count(const keyer_overlay *ov) { return ov ? ov->count : 0; }

void kr_overlay_premultiply(keyer_color c, float out[4])
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

kr_prim *kr_overlay_new_prim(keyer_overlay *ov, keyer_error *err)
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
    kr_prim *p = &ov->prims[ov->count];
    memset(p, 0, sizeof(*p)); /* every byte defined: the record is copied to the GPU as is */
    return p;
}

keyer_status keyer_overlay_add_line(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                    float width, keyer_color color, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !(width > 0) || !isfinite(width))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay line: coordinates must be finite and width > 0");
    kr_prim *p = kr_overlay_new_prim(ov, err);
    if (!p)
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    p->kind = KR_PRIM_SEGMENT;
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
    kr_overlay_premultiply(color, p->stroke);
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
    kr_prim *p = kr_overlay_new_prim(ov, err);
    if (!p)
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    p->kind = KR_PRIM_BOX;
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
    kr_overlay_premultiply(stroke, p->stroke);
    if (stroke_width == 0)
        p->stroke[3] = 0;
    kr_overlay_premultiply(fill, p->fill);
    ov->count++;
    return KEYER_OK;
}

/* Builds per-tile primitive lists for a w x h frame. */
/* Tile index of pixel coordinate v, clamped to [-1, n] before the conversion so that any
 * finite coordinate converts without overflow. */
static int tile_of(float v, int n)
{
    float t = floorf(v / TILE);
    return t < -1.0f ? -1 : t > (float)n ? n : (int)t;
}

/* Narrows the tile columns [*tx0, *tx1] of row ty to those segment p can reach: the part of
 * the segment within its reach of the row's band, widened by the reach. Leaves *tx0 > *tx1
 * when the row is not reached. Conservative: a pixel is covered only within half_width + 0.5
 * of the segment, and the reach is half_width + 1.5. */
static void segment_row_span(const kr_prim *p, int ty, int tw, int *tx0, int *tx1)
{
    float reach = p->half_width + 1.5f;
    float ylo = (float)ty * TILE - reach, yhi = (float)(ty + 1) * TILE + reach;
    float dy = p->y1 - p->y0, t0 = 0.0f, t1 = 1.0f;
    if (dy == 0.0f) {
        if (p->y0 < ylo || p->y0 > yhi) {
            *tx1 = *tx0 - 1;
            return;
        }
    } else {
        float ta = (ylo - p->y0) / dy, tb = (yhi - p->y0) / dy;
        if (ta > tb) {
            float t = ta;
            ta = tb;
            tb = t;
        }
        t0 = ta > 0.0f ? ta : 0.0f;
        t1 = tb < 1.0f ? tb : 1.0f;
        if (!(t0 <= t1)) {
            *tx1 = *tx0 - 1;
            return;
        }
    }
    float xa = p->x0 + t0 * (p->x1 - p->x0), xb = p->x0 + t1 * (p->x1 - p->x0);
    int lo = tile_of(fminf(xa, xb) - reach, tw), hi = tile_of(fmaxf(xa, xb) + reach, tw);
    if (lo > *tx0)
        *tx0 = lo;
    if (hi < *tx1)
        *tx1 = hi;
}

/* Whether a box without fill can cover a pixel of tile (tx, ty): not when the tile lies in
 * its inside, deeper than the radius plus the stroke's reach, where the signed distance is
 * below -(half_width + 1) and the stroke's coverage is 0. */
static int box_tile_needed(const kr_prim *p, int tx, int ty)
{
    if (p->fill[3] > 0)
        return 1;
    float m = p->half_width + 1.0f + p->radius;
    float ix0 = p->x0 - p->x1 + m, ix1 = p->x0 + p->x1 - m;
    float iy0 = p->y0 - p->y1 + m, iy1 = p->y0 + p->y1 - m;
    float x0 = (float)tx * TILE, y0 = (float)ty * TILE;
    return !(x0 >= ix0 && x0 + TILE <= ix1 && y0 >= iy0 && y0 + TILE <= iy1);
}

keyer_status kr_overlay_bin(keyer_overlay *ov, int w, int h, int *tw_out, int *th_out,
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
            const kr_prim *p = &ov->prims[i];
            int tx0 = tile_of(p->bx0, tw), ty0 = tile_of(p->by0, th);
            int tx1 = tile_of(p->bx1, tw), ty1 = tile_of(p->by1, th);
            if (tx1 < 0 || ty1 < 0 || tx0 >= tw || ty0 >= th)
                continue;
            tx0 = tx0 < 0 ? 0 : tx0;
            ty0 = ty0 < 0 ? 0 : ty0;
            tx1 = tx1 >= tw ? tw - 1 : tx1;
            ty1 = ty1 >= th ? th - 1 : ty1;
            for (int ty = ty0; ty <= ty1; ty++) {
                int ra = tx0, rb = tx1;
                if (p->kind == KR_PRIM_SEGMENT)
                    segment_row_span(p, ty, tw, &ra, &rb);
                for (int tx = ra; tx <= rb; tx++) {
                    if (p->kind == KR_PRIM_BOX && !box_tile_needed(p, tx, ty))
                        continue;
                    int t = ty * tw + tx;
                    if (pass == 0) {
                        ov->tile_start[t + 1]++;
                        total++;
                    } else {
                        ov->tile_items[ov->tile_start[t]++] = i;
                    }
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

kr_ov_yuv kr_overlay_yuv_coeffs(const keyer_frame *f)
{
    kr_ov_yuv c;
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

keyer_status keyer_overlay_set_stream(keyer_overlay *ov, void *cuda_stream, keyer_error *err)
{
    if (!ov)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
    ov->cuda_stream = cuda_stream;
    return KEYER_OK;
}

/* Draws the primitives items[0..n) (in order; -i-1 for primitive i when it is a box whose fill
 * covers the whole block) over the pixels [x0, x1) x [y0, y1) of a host frame, in 2x2 blocks so the chroma of YUV frames is the average of the block's coverage. */
static void render_block(const keyer_overlay *ov, keyer_frame *f, const kr_ov_yuv *yc, int yuv,
                         const int *items, int n, int x0, int y0, int x1, int y1)
{
    for (int y = y0; y < y1; y += 2)
        for (int x = x0; x < x1; x += 2) {
            float csum[4] = {0, 0, 0, 0};
            int ncov = 0;
            for (int dy = 0; dy < 2 && y + dy < y1; dy++)
                for (int dx = 0; dx < 2 && x + dx < x1; dx++) {
                    int px = x + dx, py = y + dy;
                    float acc[4] = {0, 0, 0, 0};
                    for (int k = 0; k < n; k++) {
                        if (items[k] < 0) { /* deep inside a filled box: the fill itself */
                            kr_ov_blend_fill(&ov->prims[-items[k] - 1], acc);
                            continue;
                        }
                        const kr_prim *p = &ov->prims[items[k]];
                        if (kr_ov_touches(p, px, py))
                            kr_ov_shade(p, px, py, acc);
                    }
                    for (int c = 0; c < 4; c++)
                        csum[c] += acc[c];
                    ncov++;
                    if (acc[3] <= 0)
                        continue;
                    if (!yuv)
                        kr_ov_blend_rgba(f->data[0] + py * f->stride[0] + px * 4, acc);
                    else
                        kr_ov_blend_luma(f->data[0] + py * f->stride[0] + px, acc, yc);
                }
            if (!yuv || csum[3] <= 0)
                continue;
            for (int c = 0; c < 4; c++)
                csum[c] /= (float)ncov;
            int cx = x / 2, cy = y / 2;
            uint8_t *u, *v;
            if (f->format == KEYER_PIXEL_FORMAT_NV12) {
                u = f->data[1] + cy * f->stride[1] + cx * 2;
                v = u + 1;
            } else {
                u = f->data[1] + cy * f->stride[1] + cx;
                v = f->data[2] + cy * f->stride[2] + cx;
            }
            kr_ov_blend_chroma(u, v, csum, yc);
        }
}

keyer_status keyer_overlay_render(keyer_overlay *ov, keyer_frame *f, keyer_error *err)
{
    if (!ov)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
    keyer_status st = keyer_frame_check(f, err);
    if (st)
        return keyer_error_prefix(err, "overlay render: ");
    int yuv = f->format == KEYER_PIXEL_FORMAT_NV12 || f->format == KEYER_PIXEL_FORMAT_YUV420P;
    if (!yuv && f->format != KEYER_PIXEL_FORMAT_RGBA)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: %s frames are not supported (rgba, nv12, yuv420p)",
                               keyer_pixel_format_name(f->format));
    if (f->memory == KEYER_MEMORY_CUDA) {
#ifdef KEYER_HAVE_CUDA
        return kr_overlay_render_cuda(ov, f, err);
#else
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: a CUDA frame, but keyer was built without CUDA");
#endif
    }
    if (f->memory != KEYER_MEMORY_HOST)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: unknown frame memory type %d", (int)f->memory);
    if (ov->count == 0)
        return KEYER_OK;
    int tw = 0, th = 0;
    if ((st = kr_overlay_bin(ov, f->width, f->height, &tw, &th, err)))
        return st;
    kr_ov_yuv yc = kr_overlay_yuv_coeffs(f);
    /* Each tile is drawn per block of pixels, with the primitives that can touch the block. */
    for (int ty = 0; ty < th; ty++)
        for (int tx = 0; tx < tw; tx++) {
            int t = ty * tw + tx, b = ov->tile_start[t], e = ov->tile_start[t + 1];
            if (b == e)
                continue;
            int x0 = tx * TILE, y0 = ty * TILE;
            int x1 = x0 + TILE < f->width ? x0 + TILE : f->width;
            int y1 = y0 + TILE < f->height ? y0 + TILE : f->height;
            if (e - b > ov->sub_cap) {
                int *sub = realloc(ov->sub_items, (size_t)(e - b) * sizeof(int));
                if (!sub)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                           "overlay: out of memory");
                ov->sub_items = sub;
                ov->sub_cap = e - b;
            }
            for (int by = y0; by < y1; by += KR_OV_BLOCK_H)
                for (int bx = x0; bx < x1; bx += KR_OV_BLOCK_W) {
                    int bx1 = bx + KR_OV_BLOCK_W < x1 ? bx + KR_OV_BLOCK_W : x1;
                    int by1 = by + KR_OV_BLOCK_H < y1 ? by + KR_OV_BLOCK_H : y1;
                    int n = 0;
                    for (int k = b; k < e; k++) {
                        int item = ov->tile_items[k];
                        const kr_prim *p = &ov->prims[item];
                        if (kr_ov_may_touch_rect(p, bx, by, bx1, by1))
                            ov->sub_items[n++] =
                                kr_ov_box_fills_rect(p, bx, by, bx1, by1) ? -item - 1 : item;
                    }
                    if (n > 0)
                        render_block(ov, f, &yc, yuv, ov->sub_items, n, bx, by, bx1, by1);
                }
        }
    return KEYER_OK;
}
