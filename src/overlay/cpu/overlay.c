/*
 * CPU overlay renderer: primitives binned into 64x64 tiles, each tile drawn per block of
 * pixels with the primitives that can touch the block; per-pixel analytic coverage from
 * signed distances, premultiplied "over" compositing in insertion order
 * (overlay_internal.h's shading, shared with the CUDA renderer).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "overlay/backend.h"

#define TILE KR_OV_TILE

/* Scratch kept between renders, grown when a frame needs more. */
typedef struct cpu_state {
    /* tile lists: tile_start[t]..tile_start[t+1] index into tile_items */
    int tiles_cap;
    int *tile_start;
    int items_cap;
    int *tile_items;
    int sub_cap;
    int *sub_items; /* one pixel block's primitives */
    int flat_cap;
    kr_prim *flat;  /* the job's records with the curves flattened into segments */
} cpu_state;

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

/* Builds the per-tile lists of the job's primitives for its w x h frame into
 * s->tile_start/tile_items (grown when needed); *tw_out, *th_out receive the tile grid.
 * Errors: OUT_OF_MEMORY. */
static keyer_status bin(cpu_state *s, const kr_overlay_job *job, int w, int h, int *tw_out,
                        int *th_out, keyer_error *err)
{
    int tw = (w + TILE - 1) / TILE, th = (h + TILE - 1) / TILE, nt = tw * th;
    if (nt + 1 > s->tiles_cap) {
        int *start = realloc(s->tile_start, (size_t)(nt + 1) * sizeof(int));
        if (!start)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
        s->tile_start = start;
        s->tiles_cap = nt + 1;
    }
    memset(s->tile_start, 0, (size_t)(nt + 1) * sizeof(int));
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < job->count; i++) {
            const kr_prim *p = &job->prims[i];
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
                        s->tile_start[t + 1]++;
                        total++;
                    } else {
                        s->tile_items[s->tile_start[t]++] = i;
                    }
                }
            }
        }
        if (pass == 0) {
            if (total > (size_t)s->items_cap) {
                if (total > (size_t)INT32_MAX)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: too many tiles");
                int *items = realloc(s->tile_items, total * sizeof(int));
                if (!items)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
                s->tile_items = items;
                s->items_cap = (int)total;
            }
            for (int t = 0; t < nt; t++) /* prefix sums; tile_start[t] = first slot */
                s->tile_start[t + 1] += s->tile_start[t];
        }
    }
    /* Pass 1 advanced each start to its end: shift back. */
    for (int t = nt; t > 0; t--)
        s->tile_start[t] = s->tile_start[t - 1];
    s->tile_start[0] = 0;
    *tw_out = tw;
    *th_out = th;
    return KEYER_OK;
}

/* Draws the primitives items[0..n) (in order; -i-1 for primitive i when it is a box whose fill
 * covers the whole block) over the pixels [x0, x1) x [y0, y1) of a host frame, in 2x2 blocks
 * so the chroma of YUV frames is the average of the block's coverage. */
static void render_block(const kr_prim *prims, keyer_frame *f, const kr_ov_yuv *yc, int yuv,
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
                            kr_ov_blend_fill(&prims[-items[k] - 1], acc);
                            continue;
                        }
                        const kr_prim *p = &prims[items[k]];
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

/* The job's records with every curve replaced by its segments (at its slot and the following
 * ones, up to the job's count) in s->flat (grown when needed). Errors: OUT_OF_MEMORY. */
static keyer_status flatten(cpu_state *s, const kr_overlay_job *job, keyer_error *err)
{
    if (job->count > s->flat_cap) {
        kr_prim *flat = realloc(s->flat, (size_t)job->count * sizeof(kr_prim));
        if (!flat)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
        s->flat = flat;
        s->flat_cap = job->count;
    }
    memcpy(s->flat, job->prims, (size_t)job->count * sizeof(kr_prim));
    for (int i = 0; i < job->count; i++) {
        const kr_prim *c = &job->prims[i];
        if (c->kind != KR_PRIM_CURVE)
            continue;
        for (int k = 1; k <= c->segs && i + k - 1 < job->count; k++)
            kr_ov_curve_segment(c, k, &s->flat[i + k - 1]);
    }
    return KEYER_OK;
}

static keyer_status cpu_render(void **state, const kr_overlay_job *job_in, keyer_error *err)
{
    cpu_state *s = *state;
    if (!s) {
        if (!(s = calloc(1, sizeof(*s))))
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
        *state = s;
    }
    kr_overlay_job flat_job = *job_in;
    const kr_overlay_job *job = job_in;
    if (job_in->curves > 0) {
        keyer_status fst = flatten(s, job_in, err);
        if (fst)
            return fst;
        flat_job.prims = s->flat;
        flat_job.curves = 0;
        job = &flat_job;
    }
    keyer_frame *f = job->frame;
    int tw = 0, th = 0;
    keyer_status st = bin(s, job, f->width, f->height, &tw, &th, err);
    if (st)
        return st;
    /* Each tile is drawn per block of pixels, with the primitives that can touch the block. */
    for (int ty = 0; ty < th; ty++)
        for (int tx = 0; tx < tw; tx++) {
            int t = ty * tw + tx, b = s->tile_start[t], e = s->tile_start[t + 1];
            if (b == e)
                continue;
            int x0 = tx * TILE, y0 = ty * TILE;
            int x1 = x0 + TILE < f->width ? x0 + TILE : f->width;
            int y1 = y0 + TILE < f->height ? y0 + TILE : f->height;
            if (e - b > s->sub_cap) {
                int *sub = realloc(s->sub_items, (size_t)(e - b) * sizeof(int));
                if (!sub)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                           "overlay: out of memory");
                s->sub_items = sub;
                s->sub_cap = e - b;
            }
            for (int by = y0; by < y1; by += KR_OV_BLOCK_H)
                for (int bx = x0; bx < x1; bx += KR_OV_BLOCK_W) {
                    int bx1 = bx + KR_OV_BLOCK_W < x1 ? bx + KR_OV_BLOCK_W : x1;
                    int by1 = by + KR_OV_BLOCK_H < y1 ? by + KR_OV_BLOCK_H : y1;
                    int n = 0;
                    for (int k = b; k < e; k++) {
                        int item = s->tile_items[k];
                        const kr_prim *p = &job->prims[item];
                        if (kr_ov_may_touch_rect(p, bx, by, bx1, by1))
                            s->sub_items[n++] =
                                kr_ov_box_fills_rect(p, bx, by, bx1, by1) ? -item - 1 : item;
                    }
                    if (n > 0)
                        render_block(job->prims, f, &job->yc, job->yuv, s->sub_items, n, bx,
                                     by, bx1, by1);
                }
        }
    return KEYER_OK;
}

static void cpu_state_destroy(void *state)
{
    cpu_state *s = state;
    if (!s)
        return;
    free(s->tile_start);
    free(s->tile_items);
    free(s->sub_items);
    free(s->flat);
    free(s);
}

const kr_overlay_backend kr_overlay_cpu = {
    .name = "cpu",
    .render = cpu_render,
    .state_destroy = cpu_state_destroy,
};
