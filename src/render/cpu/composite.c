/*
 * Compositing on the CPU. Rows (and grid rows) are split over the thread pool; per-row tables
 * replace per-sample coordinate arithmetic, with the same float operations in the same order
 * as the per-sample CUDA kernels (fx_composite.h).
 */
#include <string.h>

#include "render/cpu/cpu.h"
#include "render/fx_composite.h"

enum {
    /* slots 0..8 are used by kr_cpu_prepare when converting a background */
    SLOT_GRID = 12,
    SLOT_GRID_H = 13,
    SLOT_BGRID = 14,
    SLOT_ROWS = 15,
    SLOT_XT0 = 16,
    SLOT_RUNS = 17,
    SLOT_LUT = 19,
    SLOT_BGT = 18,
};


typedef struct comp_ctx {
    const kr_composite_job *job;
    int tasks;
    int gch;
    size_t cells;
    float *grid, *gridh, *bgrid;
    float *rows; /* per task: 4 rows of max(W, 3 * gw) floats */
    size_t row_len;
    const kr_src *bg;     /* IMAGE: what to blend over */
    const float *w8;      /* kr_blur_weight of each GRAY8 code (256) */
    const float *wsum;    /* ... of each sum of four GRAY8 codes (chroma, 1021) */
    const int *run[2];    /* per level: samples [run[g], run[g+1]) lie between cells g, g+1 */
    const float *fx[2];   /* per level: their interpolation fraction */
    const float *bgt;     /* background conversion: RGB tensor W x H x 3 */
    kr_src *bgdst;        /* background conversion target */
} comp_ctx;

static void range(int n, int tasks, size_t index, int *a, int *b)
{
    *a = (int)((size_t)n * index / (size_t)tasks);
    *b = (int)((size_t)n * (index + 1) / (size_t)tasks);
}

/* Matte row of a level: kr_alpha_at / kr_alpha_chroma for x in [0, n). */
static void alpha_row(const kr_composite_job *job, int level, int y, int n, float *out)
{
    if (job->alpha_f32) {
        for (int x = 0; x < n; x++)
            out[x] = level ? kr_alpha_chroma(job->alpha, job->alpha_stride, 1, job->width,
                                             job->height, x, y)
                           : kr_alpha_at(job->alpha, job->alpha_stride, 1, x, y);
        return;
    }
    const uint8_t *a0 = job->alpha + (ptrdiff_t)(level ? 2 * y : y) * job->alpha_stride;
    if (!level) {
        for (int x = 0; x < n; x++)
            out[x] = kr_alpha_from8(a0[x]);
        return;
    }
    const uint8_t *a1 = 2 * y + 1 < job->height ? a0 + job->alpha_stride : a0;
    for (int x = 0; x < n; x++) {
        int xa = 2 * x, xb = xa + 1 < job->width ? xa + 1 : xa;
        out[x] = kr_alpha_from_sum8((unsigned)a0[xa] + a0[xb] + a1[xa] + a1[xb]);
    }
}

/* ---- blur grid ------------------------------------------------------------------------- */

/* The grid rows of a task, accumulated row by row across all cells of a grid row: each
 * cell still adds its samples rows first, then columns, as kr_blur_cell does; the weights of
 * a row are computed once per level and shared by its channels. */
static void grid_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    int y0, y1;
    range(job->gh, cx->tasks, index, &y0, &y1);
    const int gw = job->gw;
    float *wrow = cx->rows + index * 4 * cx->row_len, *vrow = wrow + cx->row_len;
    float *num = vrow + cx->row_len, *den = num + gw; /* gw each; 2 * gw <= row_len */
    float *num2 = den + gw;                             /* second chroma channel */
    for (int gy = y0; gy < y1; gy++) {
        size_t gi = (size_t)gy * (size_t)gw;
        for (int lv = 0; lv <= job->src.chroma; lv++) {
            const kr_chan *c0 = &job->src.ch[lv ? 1 : 0];
            const int fl = job->factor >> lv, pw = c0->width;
            const int ys = gy * fl, ye = ys + fl < c0->height ? ys + fl : c0->height;
            /* channels of this level: level 0 is Y or R,G,B; level 1 is U,V */
            int chans[3], nc = 0;
            for (int c = 0; c < 3; c++)
                if (job->src.ch[c].level == lv)
                    chans[nc++] = c;
            for (int k = 0; k < nc; k++) {
                const kr_chan *ch = &job->src.ch[chans[k]];
                float *n = k == 0 ? num : num2;
                memset(n, 0, sizeof(float) * (size_t)gw);
                if (k == 0)
                    memset(den, 0, sizeof(float) * (size_t)gw);
                for (int y = ys; y < ye; y++) {
                    if (job->alpha_f32 || !cx->w8)
                        alpha_row(job, lv, y, pw, wrow);
                    else if (lv) {
                        const uint8_t *a0 = job->alpha + (ptrdiff_t)(2 * y) * job->alpha_stride;
                        const uint8_t *a1 = 2 * y + 1 < job->height ? a0 + job->alpha_stride : a0;
                        for (int x = 0; x < pw; x++) {
                            int xa = 2 * x, xb = xa + 1 < job->width ? xa + 1 : xa;
                            wrow[x] = cx->wsum[(unsigned)a0[xa] + a0[xb] + a1[xa] + a1[xb]];
                        }
                    } else {
                        const uint8_t *a0 = job->alpha + (ptrdiff_t)y * job->alpha_stride;
                        for (int x = 0; x < pw; x++)
                            wrow[x] = cx->w8[a0[x]];
                    }
                    if (job->alpha_f32)
                        for (int x = 0; x < pw; x++)
                            wrow[x] = kr_blur_weight(wrow[x]);
                    const uint8_t *row = ch->base + (ptrdiff_t)y * ch->stride;
                    if (ch->wide)
                        for (int x = 0; x < pw; x++)
                            vrow[x] = (float)(*(const uint16_t *)(const void *)(row + (ptrdiff_t)x * ch->step) >> ch->shift);
                    else
                        for (int x = 0; x < pw; x++)
                            vrow[x] = (float)row[(ptrdiff_t)x * ch->step];
                    for (int gx = 0; gx < gw; gx++) {
                        int xs = gx * fl, xe = xs + fl < pw ? xs + fl : pw;
                        float sn = n[gx];
                        for (int x = xs; x < xe; x++)
                            sn += wrow[x] * vrow[x];
                        n[gx] = sn;
                        if (k == 0) {
                            float sd = den[gx];
                            for (int x = xs; x < xe; x++)
                                sd += wrow[x];
                            den[gx] = sd;
                        }
                    }
                }
                memcpy(cx->grid + (size_t)chans[k] * cx->cells + gi, n, sizeof(float) * (size_t)gw);
            }
            memcpy(cx->grid + (size_t)(3 + lv) * cx->cells + gi, den, sizeof(float) * (size_t)gw);
        }
    }
}

static void blur_h_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    int y0, y1;
    range(job->gh, cx->tasks, index, &y0, &y1);
    const int gw = job->gw, taps = job->taps, r = taps / 2;
    for (int c = 0; c < cx->gch; c++)
        for (int gy = y0; gy < y1; gy++) {
            size_t off = (size_t)c * cx->cells + (size_t)gy * (size_t)gw;
            const float *in = cx->grid + off;
            float *out = cx->gridh + off;
            for (int gx = 0; gx < gw; gx++) {
                if (gx < r || gx + r >= gw) {
                    out[gx] = kr_blur_h_at(in, gw, gx, job->kernel, taps);
                    continue;
                }
                /* inside: the same sum without clamping */
                const float *p = in + gx - r;
                float sum = 0.0f;
                for (int k = 0; k < taps; k++)
                    sum += job->kernel[k] * p[k];
                out[gx] = sum;
            }
        }
}

static void blur_v_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    int y0, y1;
    range(job->gh, cx->tasks, index, &y0, &y1);
    const int gw = job->gw, gh = job->gh, taps = job->taps, r = taps / 2;
    for (int gy = y0; gy < y1; gy++) {
        size_t roff[KR_BLUR_MAX_TAPS];
        for (int k = 0; k < taps; k++) {
            int j = gy + k - r;
            roff[k] = (size_t)(j < 0 ? 0 : j > gh - 1 ? gh - 1 : j) * (size_t)gw;
        }
        size_t gi = (size_t)gy * (size_t)gw;
        float v[5][64];
        for (int x0 = 0; x0 < gw; x0 += 64) {
            int n = gw - x0 < 64 ? gw - x0 : 64;
            for (int c = 0; c < cx->gch; c++) {
                const float *h = cx->gridh + (size_t)c * cx->cells + (size_t)x0;
                for (int i = 0; i < n; i++)
                    v[c][i] = 0.0f;
                for (int k = 0; k < taps; k++) {
                    const float *row = h + roff[k];
                    const float w = job->kernel[k];
                    for (int i = 0; i < n; i++)
                        v[c][i] += w * row[i];
                }
            }
            for (int c = 0; c < 3; c++) {
                const float *d = v[3 + job->src.ch[c].level];
                float *o = cx->bgrid + (size_t)c * cx->cells + gi + (size_t)x0;
                for (int i = 0; i < n; i++)
                    o[i] = v[c][i] / d[i];
            }
        }
    }
}

/* ---- blending ------------------------------------------------------------------------- */

/* The rows of level `level` a task blends: level 0 rows for task indexes [0, tasks), level 1
 * (chroma) rows for [tasks, 2 * tasks). */
/* The rows of level `level` a task blends: level 0 rows for task indexes [0, tasks), level 1
 * (chroma) rows for [tasks, 2 * tasks). */
/* The rows of level `level` a task blends: level 0 rows for task indexes [0, tasks), level 1
 * (chroma) rows for [tasks, 2 * tasks). Per row: the matte, then per channel the background
 * row, then the blend. */
static void blend_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    int level = index >= (size_t)cx->tasks;
    size_t t = level ? index - (size_t)cx->tasks : index;
    const kr_src *src = &job->src, *dst = &job->dst;
    if (level && !src->chroma)
        return;
    const int cw = level ? src->ch[1].width : src->ch[0].width;
    const int chh = level ? src->ch[1].height : src->ch[0].height;
    const int gw = job->gw, blur = job->mode == KEYER_COMPOSITE_BLUR, maxc = src->maxcode;
    int y0, y1;
    range(chh, cx->tasks, t, &y0, &y1);
    float *arow = cx->rows + index * 4 * cx->row_len; /* per task index: levels run together */
    float *bg = arow + cx->row_len, *gr = bg + cx->row_len, *gd = gr + gw;
    const int *run = cx->run[level];
    const float *fxs = cx->fx[level];
    const float gscale = blur ? kr_blur_grid_scale(job, level) : 0.0f;
    for (int y = y0; y < y1; y++) {
        alpha_row(job, level, y, cw, arow);
        int gy0 = 0, gy1 = 0;
        float fy = 0.0f;
        if (blur)
            fy = kr_axis_split(kr_up_coord(y, gscale), job->gh, &gy0, &gy1);
        float d4[4];
        for (int i = 0; i < 4; i++)
            d4[i] = kr_dither(job->dither, i, y);
        for (int c = 0; c < 3; c++) {
            const kr_chan *ch = &src->ch[c], *dch = &dst->ch[c];
            if (ch->level != level)
                continue;
            /* the background row, in codes */
            if (blur) {
                const float *g = cx->bgrid + (size_t)c * cx->cells;
                const float *r0 = g + (size_t)gy0 * (size_t)gw, *r1 = g + (size_t)gy1 * (size_t)gw;
                for (int x = 0; x < gw; x++)
                    gr[x] = r0[x] + (r1[x] - r0[x]) * fy;
                for (int x = 0; x < gw; x++)
                    gd[x] = gr[x + (x < gw - 1)] - gr[x]; /* kr_grid_bilerp's x step */
                for (int g2 = 0; g2 < gw; g2++) {
                    const float v0 = gr[g2], dv = gd[g2];
                    for (int x = run[g2]; x < run[g2 + 1]; x++)
                        bg[x] = v0 + dv * fxs[x];
                }
            } else if (job->mode == KEYER_COMPOSITE_IMAGE) {
                const kr_chan *bc = &cx->bg->ch[c];
                const uint8_t *q = bc->base + (ptrdiff_t)y * bc->stride;
                if (bc->wide)
                    for (int x = 0; x < cw; x++)
                        bg[x] = (float)(*(const uint16_t *)(const void *)(q + (ptrdiff_t)x * bc->step) >> 6);
                else
                    for (int x = 0; x < cw; x++)
                        bg[x] = (float)q[(ptrdiff_t)x * bc->step];
            } else {
                for (int x = 0; x < cw; x++)
                    bg[x] = job->bg_codes[c];
            }
            const uint8_t *in = ch->base + (ptrdiff_t)y * ch->stride;
            uint8_t *outp = dch->base + (ptrdiff_t)y * dch->stride;
            const int step = ch->step, dstep = dch->step;
            if (ch->wide) {
                for (int x = 0; x < cw; x++) {
                    float v = (float)(*(const uint16_t *)(const void *)(in + (ptrdiff_t)x * step) >> 6);
                    int q = kr_quantise(kr_blend(v, bg[x], arow[x]), d4[x & 3], maxc);
                    *(uint16_t *)(void *)(outp + (ptrdiff_t)x * dstep) = (uint16_t)(q << 6);
                }
            } else if (step == 1 && dstep == 1) {
                for (int x = 0; x < cw; x++)
                    outp[x] = (uint8_t)kr_quantise(kr_blend((float)in[x], bg[x], arow[x]), d4[x & 3],
                                                   255);
            } else {
                for (int x = 0; x < cw; x++)
                    outp[(ptrdiff_t)x * dstep] = (uint8_t)kr_quantise(
                        kr_blend((float)in[(ptrdiff_t)x * step], bg[x], arow[x]), d4[x & 3], 255);
            }
        }
        if (!level && job->src_alpha_chan && job->dst_alpha_chan &&
            job->src_alpha_chan != job->dst_alpha_chan) {
            const uint8_t *sa = job->src_alpha_chan + (ptrdiff_t)y * job->src_alpha_stride;
            uint8_t *da = job->dst_alpha_chan + (ptrdiff_t)y * dst->ch[0].stride;
            for (int x = 0; x < cw; x++)
                da[4 * x] = sa[4 * x];
        }
    }
}

static void rgba_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    int y0, y1;
    range(job->height, cx->tasks, index, &y0, &y1);
    int pre = job->mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED;
    for (int y = y0; y < y1; y++) {
        uint8_t *o = job->out + (ptrdiff_t)y * job->out_stride;
        for (int x = 0; x < job->width; x++)
            kr_comp_rgba(job, x, y, pre, o + 4 * x);
    }
}

static void mask_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    if (job->out_kind == KR_OUT_GRAY8 || job->out_kind == KR_OUT_GRAYF32) {
        if (index >= (size_t)cx->tasks)
            return;
        int y0, y1;
        range(job->height, cx->tasks, index, &y0, &y1);
        for (int y = y0; y < y1; y++) {
            uint8_t *o = job->out + (ptrdiff_t)y * job->out_stride;
            for (int x = 0; x < job->width; x++) {
                float a = kr_alpha_at(job->alpha, job->alpha_stride, job->alpha_f32, x, y);
                if (job->out_kind == KR_OUT_GRAYF32)
                    ((float *)(void *)o)[x] = a;
                else
                    o[x] = (uint8_t)kr_quantise(a * 255.0f, 0.5f, 255);
            }
        }
        return;
    }
    int level = index >= (size_t)cx->tasks;
    size_t t = level ? index - (size_t)cx->tasks : index;
    const kr_src *dst = &job->dst;
    if (level && !dst->chroma)
        return;
    const kr_chan *c0 = &dst->ch[level ? 1 : 0];
    int y0, y1;
    range(c0->height, cx->tasks, t, &y0, &y1);
    for (int y = y0; y < y1; y++) {
        for (int x = 0; x < c0->width; x++) {
            float a = level ? kr_alpha_chroma(job->alpha, job->alpha_stride, job->alpha_f32,
                                              job->width, job->height, x, y)
                            : kr_alpha_at(job->alpha, job->alpha_stride, job->alpha_f32, x, y);
            for (int c = 0; c < 3; c++)
                if (dst->ch[c].level == level)
                    kr_chan_store(&dst->ch[c], x, y, kr_comp_mask_code(job, c, a));
            if (job->dst_alpha_chan)
                job->dst_alpha_chan[(ptrdiff_t)y * dst->ch[0].stride + 4 * x] = 255;
        }
    }
}

/* ---- background conversion --------------------------------------------------------- */

/* Encodes the RGB tensor into the converted background: full-resolution channels from their
 * pixel, chroma from the mean of its 2x2 block (edge pixels repeated). */
static void bg_encode_task(void *ctx, size_t index)
{
    const comp_ctx *cx = ctx;
    const kr_composite_job *job = cx->job;
    const kr_src *d = cx->bgdst;
    int W = job->width, H = job->height;
    int level = index >= (size_t)cx->tasks;
    size_t t = level ? index - (size_t)cx->tasks : index;
    if (level && !d->chroma)
        return;
    const kr_chan *c0 = &d->ch[level ? 1 : 0];
    int y0, y1;
    range(c0->height, cx->tasks, t, &y0, &y1);
    for (int y = y0; y < y1; y++)
        for (int x = 0; x < c0->width; x++) {
            float rgb[3];
            if (!level) {
                const float *p = cx->bgt + ((size_t)y * (size_t)W + (size_t)x) * 3;
                rgb[0] = p[0];
                rgb[1] = p[1];
                rgb[2] = p[2];
            } else {
                int xa = 2 * x, ya = 2 * y;
                int xb = xa + 1 < W ? xa + 1 : xa, yb = ya + 1 < H ? ya + 1 : ya;
                const float *p00 = cx->bgt + ((size_t)ya * (size_t)W + (size_t)xa) * 3;
                const float *p01 = cx->bgt + ((size_t)ya * (size_t)W + (size_t)xb) * 3;
                const float *p10 = cx->bgt + ((size_t)yb * (size_t)W + (size_t)xa) * 3;
                const float *p11 = cx->bgt + ((size_t)yb * (size_t)W + (size_t)xb) * 3;
                for (int i = 0; i < 3; i++)
                    rgb[i] = (p00[i] + p01[i] + p10[i] + p11[i]) * 0.25f;
            }
            float codes[3];
            kr_src_encode(d, rgb, codes);
            for (int c = 0; c < 3; c++)
                if (d->ch[c].level == level)
                    kr_chan_store(&d->ch[c], x, y, kr_quantise(codes[c], 0.5f, d->maxcode));
        }
}

static keyer_status build_background(kr_cpu_state *s, comp_ctx *cx, keyer_error *err)
{
    const kr_composite_job *job = cx->job;
    keyer_pixel_format fmt;
    if (!job->src.chroma)
        fmt = job->src.ch[0].step == 4 ? KEYER_PIXEL_FORMAT_RGBA : KEYER_PIXEL_FORMAT_RGB24;
    else if (job->src.maxcode == 1023)
        fmt = KEYER_PIXEL_FORMAT_P010;
    else
        fmt = job->src.ch[1].step == 2 ? KEYER_PIXEL_FORMAT_NV12 : KEYER_PIXEL_FORMAT_YUV420P;
    keyer_status st;
    if (!s->bg_cache && (st = keyer_frame_create(&s->bg_cache, err)))
        return st;
    keyer_frame *c = s->bg_cache;
    if (c->format != fmt || c->width != job->width || c->height != job->height) {
        if ((st = keyer_frame_alloc(c, fmt, job->width, job->height, kr_cpu_allocator(s), err))) {
            keyer_error_prefix(err, "background: ");
            return st;
        }
    }
    float *t = kr_cpu_scratch(s, SLOT_BGT, sizeof(float) * 3 * (size_t)job->width * (size_t)job->height);
    if (!t)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "out of memory for the background conversion");
    kr_prepare_job pj;
    memset(&pj, 0, sizeof(pj));
    pj.items = &job->bg;
    pj.count = 1;
    pj.width = job->width;
    pj.height = job->height;
    pj.dtype = KEYER_DTYPE_F32;
    pj.layout = KEYER_TENSOR_LAYOUT_NHWC;
    for (int k = 0; k < 3; k++) {
        pj.scale[k] = 1.0f;
        pj.src[k] = k;
    }
    pj.tensor = t;
    if ((st = kr_cpu_prepare(s, &pj, err))) {
        keyer_error_prefix(err, "background: ");
        return st;
    }
    /* Encode with the frame's matrix and range into the cache's layout. */
    kr_src dst = job->src;
    kr_src layout;
    if ((st = kr_fx_src_init(&layout, c, err)))
        return st;
    for (int i = 0; i < 3; i++)
        dst.ch[i] = layout.ch[i];
    cx->bgt = t;
    cx->bgdst = &dst;
    kr_threadpool_parallel_for(s->pool, bg_encode_task, cx, 2 * (size_t)cx->tasks);
    cx->bgdst = NULL;
    s->bg_src = dst;
    return KEYER_OK;
}

/* ---- the job ------------------------------------------------------------------------- */

keyer_status kr_cpu_composite(void *state, const kr_composite_job *job, keyer_error *err)
{
    kr_cpu_state *s = state;
    comp_ctx cx;
    memset(&cx, 0, sizeof(cx));
    cx.job = job;
    cx.tasks = kr_cpu_tasks(s);
    int W = job->width;
    if (job->out_kind == KR_OUT_RGBA) {
        kr_threadpool_parallel_for(s->pool, rgba_task, &cx, (size_t)cx.tasks);
        return KEYER_OK;
    }
    if (job->mode == KEYER_COMPOSITE_MASK) {
        kr_threadpool_parallel_for(s->pool, mask_task, &cx, 2 * (size_t)cx.tasks);
        return KEYER_OK;
    }
    cx.row_len = (size_t)W;
    if (job->mode == KEYER_COMPOSITE_BLUR && 3 * (size_t)job->gw > cx.row_len)
        cx.row_len = 3 * (size_t)job->gw;
    /* 2 * tasks: blend_task runs the luma and chroma rows of task t at the same time */
    cx.rows = kr_cpu_scratch(s, SLOT_ROWS, sizeof(float) * 4 * cx.row_len * 2 * (size_t)cx.tasks);
    if (!cx.rows)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory for rows");
    if (job->mode == KEYER_COMPOSITE_IMAGE) {
        if (job->bg_direct) {
            cx.bg = &job->bg.src;
        } else {
            if (job->bg_dirty) {
                keyer_status st = build_background(s, &cx, err);
                if (st)
                    return st;
            }
            cx.bg = &s->bg_src;
        }
    }
    if (job->mode == KEYER_COMPOSITE_BLUR) {
        cx.gch = kr_blur_channels(job);
        cx.cells = (size_t)job->gw * (size_t)job->gh;
        cx.grid = kr_cpu_scratch(s, SLOT_GRID, sizeof(float) * 5 * cx.cells);
        cx.gridh = kr_cpu_scratch(s, SLOT_GRID_H, sizeof(float) * 5 * cx.cells);
        cx.bgrid = kr_cpu_scratch(s, SLOT_BGRID, sizeof(float) * 3 * cx.cells);
        float *w8 = kr_cpu_scratch(s, SLOT_LUT, sizeof(float) * (256 + 1021));
        int *runs = kr_cpu_scratch(s, SLOT_RUNS, sizeof(int) * 2 * ((size_t)job->gw + 1));
        float *fxs = kr_cpu_scratch(s, SLOT_XT0, sizeof(float) * 2 * (size_t)W);
        if (!cx.grid || !cx.gridh || !cx.bgrid || !w8 || !runs || !fxs)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                   "out of memory for the blur grid");
        for (unsigned i = 0; i < 256; i++)
            w8[i] = kr_blur_weight(kr_alpha_from8(i));
        for (unsigned i = 0; i < 1021; i++)
            w8[256 + i] = kr_blur_weight(kr_alpha_from_sum8(i));
        cx.w8 = w8;
        cx.wsum = w8 + 256;
        for (int l = 0; l < 2; l++) {
            int n = l ? job->src.ch[1].width : W, g = 0;
            int *run = runs + (size_t)l * ((size_t)job->gw + 1);
            float *fx = fxs + (size_t)l * (size_t)W, sc = kr_blur_grid_scale(job, l);
            run[0] = 0;
            for (int x = 0; x < n; x++) {
                int x0, x1;
                fx[x] = kr_axis_split(kr_up_coord(x, sc), job->gw, &x0, &x1);
                while (g < x0)
                    run[++g] = x;
            }
            while (g < job->gw)
                run[++g] = n;
            cx.run[l] = run;
            cx.fx[l] = fx;
        }
        int gt = cx.tasks < job->gh ? cx.tasks : job->gh;
        int saved = cx.tasks;
        cx.tasks = gt;
        kr_threadpool_parallel_for(s->pool, grid_task, &cx, (size_t)gt);
        kr_threadpool_parallel_for(s->pool, blur_h_task, &cx, (size_t)gt);
        kr_threadpool_parallel_for(s->pool, blur_v_task, &cx, (size_t)gt);
        cx.tasks = saved;
    }
    kr_threadpool_parallel_for(s->pool, blend_task, &cx, 2 * (size_t)cx.tasks);
    return KEYER_OK;
}
