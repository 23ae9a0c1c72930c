/*
 * Mask refinement on the CPU.
 *
 * Grid stage (the mask's resolution, ~65k cells for a 256x256 model): mask crop and clamp,
 * grid luma (separable area resampling of the frame), temporal smoothing with the stream's
 * history, and the guided filter's coefficients A, B (separable box sums, summed in the same
 * order as the CUDA kernels).
 * Full-resolution stage, rows split over the thread pool: alpha = A * luma + B with A, B
 * interpolated bilinearly (along x once per grid row, then along y per row), the soft
 * threshold, then optional dilate/erode (van Herk/Gil-Werman running max/min, exact) and
 * feather (a box blur applied twice, exact integer sums; the horizontal pass runs on each
 * row as it is made, the vertical pass streams rows and writes the output) on a 16-bit
 * matte. The innermost loops have SSE2 versions computing exactly the same values.
 */
#include <string.h>

#include "render/cpu/cpu.h"
#include "render/cpu/simd.h"

enum {
    SLOT_AXIS_X = 0, /* + 1 */
    SLOT_AXIS_Y = 2, /* + 1 */
    SLOT_FX = 4,
    SLOT_P = 5,
    SLOT_L = 6,
    SLOT_BOX_H = 7,
    SLOT_BOX_O = 8,
    SLOT_AB = 9,
    SLOT_ROWS = 10,
    SLOT_M = 11,
    SLOT_T = 12,
    SLOT_VHGW = 13,
    SLOT_FEATHER = 14,
    SLOT_RUNS = 15,
    SLOT_M16 = 16,
    SLOT_HAB = 17,
};

typedef struct refine_ctx {
    const kr_refine_job *job;
    kr_cpu_state *s;
    int tasks;
    /* grid luma */
    kr_axis ax, ay;
    float *L;
    /* full resolution */
    const int *run; /* gw + 1: pixels [run[g], run[g+1]) interpolate from cells g, g+1 */
    const float *fx;
    float *HA, *HB;  /* gh x W: A, B interpolated along x */
    uint16_t *m16;   /* per task: one 16-bit row */
    const float *A, *B;
    float *rows;     /* per task: 2 * W (luma and alpha of a row) */
    uint16_t *M, *T; /* 16-bit mattes */
    int direct;      /* write the output in the upsampling pass */
    /* dilate/feather pass parameters */
    int radius, is_max;
    uint16_t *src, *dst;
    uint16_t *vbuf; /* per task scratch for the vertical van Herk pass */
    int strip;      /* columns per vertical task */
    uint32_t mul, mul8; /* kr_box_mul, kr_box_mul8 of the feather's (2r+1)^2 */
    uint32_t *fbuf; /* feather: per task fper values */
    size_t fper;
    int fuse;       /* upsampling runs the horizontal feather pass on each row */
} refine_ctx;

static void range(int n, int tasks, size_t index, int *a, int *b)
{
    *a = (int)((size_t)n * index / (size_t)tasks);
    *b = (int)((size_t)n * (index + 1) / (size_t)tasks);
}

/* ---- grid luma ---------------------------------------------------------------------- */

static void luma_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    const kr_refine_job *job = cx->job;
    const kr_src *g = &job->guide;
    int y0, y1;
    range(job->gh, cx->tasks, index, &y0, &y1);
    int nch = g->chroma ? 1 : 3;
    for (int y = y0; y < y1; y++) {
        float *out = cx->L + (size_t)y * (size_t)job->gw;
        memset(out, 0, sizeof(float) * (size_t)job->gw);
        const float *wy = cx->ay.w + (size_t)y * (size_t)cx->ay.k;
        for (int c = 0; c < nch; c++)
            for (int j = 0; j < cx->ay.count[y]; j++)
                if (wy[j] != 0.0f)
                    kr_cpu_hresample_add(&g->ch[c], cx->ay.start[y] + j, &cx->ax,
                                         wy[j] * g->luma[c], out);
    }
}

/* ---- guided filter on the grid -------------------------------------------------------- */

/* Box means of radius r over nch planar channels of a gw x gh grid, edges clipped:
 * horizontal sums into h (box_h_task), then vertical sums into o divided by the clipped
 * window's area (box_v_task). Same summation order as the CUDA kernels. Tasks are
 * (channel, row range) pairs. */
typedef struct box_ctx {
    const float *in;
    float *h, *o;
    int nch, gw, gh, r, parts;
} box_ctx;

static void box_h_task(void *ctx, size_t index)
{
    const box_ctx *b = ctx;
    int c = (int)(index / (size_t)b->parts), y0, y1;
    range(b->gh, b->parts, index % (size_t)b->parts, &y0, &y1);
    size_t cells = (size_t)b->gw * (size_t)b->gh;
    const float *ic = b->in + c * cells;
    float *hc = b->h + c * cells;
    for (int y = y0; y < y1; y++)
        for (int x = 0; x < b->gw; x++) {
            int lo = x - b->r < 0 ? 0 : x - b->r, hi = x + b->r > b->gw - 1 ? b->gw - 1 : x + b->r;
            float sum = 0.0f;
            for (int i = lo; i <= hi; i++)
                sum += ic[(size_t)y * (size_t)b->gw + (size_t)i];
            hc[(size_t)y * (size_t)b->gw + (size_t)x] = sum;
        }
}

static void box_v_task(void *ctx, size_t index)
{
    const box_ctx *b = ctx;
    int c = (int)(index / (size_t)b->parts), y0, y1;
    range(b->gh, b->parts, index % (size_t)b->parts, &y0, &y1);
    size_t cells = (size_t)b->gw * (size_t)b->gh;
    const float *hc = b->h + c * cells;
    float *oc = b->o + c * cells;
    for (int y = y0; y < y1; y++) {
        int lo = y - b->r < 0 ? 0 : y - b->r, hi = y + b->r > b->gh - 1 ? b->gh - 1 : y + b->r;
        for (int x = 0; x < b->gw; x++) {
            int xa = x - b->r < 0 ? 0 : x - b->r, xb = x + b->r > b->gw - 1 ? b->gw - 1 : x + b->r;
            float sum = 0.0f;
            for (int j = lo; j <= hi; j++)
                sum += hc[(size_t)j * (size_t)b->gw + (size_t)x];
            oc[(size_t)y * (size_t)b->gw + (size_t)x] = sum / (float)((hi - lo + 1) * (xb - xa + 1));
        }
    }
}

/* in may equal o: every horizontal sum is taken before any vertical one is written. */
static void box_filter(kr_threadpool *pool, const float *in, float *h, float *o, int nch, int gw,
                       int gh, int r)
{
    box_ctx b = {in, h, o, nch, gw, gh, r, gh < 8 ? gh : 8};
    kr_threadpool_parallel_for(pool, box_h_task, &b, (size_t)nch * (size_t)b.parts);
    kr_threadpool_parallel_for(pool, box_v_task, &b, (size_t)nch * (size_t)b.parts);
}

/* ---- feather: a box blur applied twice (tent) with clamped edges, exact integer sums --
 * box1[i] = sum of in[clamp(i + k)], |k| <= r; out[x] = round(sum of box1[clamp(x + j)],
 * |j| <= r, / (2r+1)^2) with kr_box_div. Horizontal (here, one row) then vertical. */
static void tent_h_row(const uint16_t *in, uint16_t *out, int W, int r, uint32_t mul, uint32_t *b1)
{
#ifdef KR_SSE2
    if (r <= 8 && W >= 4 * r + 8) {
        /* direct sums (exact integers, so the same as the running sums below) */
        for (int x = 0; x < W; x++) {
            if (x == r) {
                for (; x + 4 <= W - r; x += 4) {
                    __m128i acc = _mm_setzero_si128();
                    for (int k = -r; k <= r; k++)
                        acc = _mm_add_epi32(acc, kr_sse_load_u16x4(in + x + k));
                    _mm_storeu_si128((__m128i *)(void *)(b1 + x), acc);
                }
                if (x >= W)
                    break;
            }
            uint32_t sum = 0;
            for (int k = -r; k <= r; k++)
                sum += in[x + k < 0 ? 0 : x + k > W - 1 ? W - 1 : x + k];
            b1[x] = sum;
        }
        const __m128i vmul = _mm_set1_epi32((int)mul);
        for (int x = 0; x < W; x++) {
            if (x == r) {
                for (; x + 4 <= W - r; x += 4) {
                    __m128i acc = _mm_setzero_si128();
                    for (int k = -r; k <= r; k++)
                        acc = _mm_add_epi32(acc, _mm_loadu_si128((const __m128i *)(const void *)(b1 + x + k)));
                    kr_sse_store_u16x4(out + x, kr_sse_box_div(acc, vmul));
                }
                if (x >= W)
                    break;
            }
            uint32_t sum = 0;
            for (int k = -r; k <= r; k++)
                sum += b1[x + k < 0 ? 0 : x + k > W - 1 ? W - 1 : x + k];
            out[x] = (uint16_t)kr_box_div(sum, mul);
        }
        return;
    }
#endif
    uint32_t sum = 0;
    for (int i = -r; i <= r; i++)
        sum += in[i < 0 ? 0 : i > W - 1 ? W - 1 : i];
    for (int x = 0; x < W; x++) {
        b1[x] = sum;
        int add = x + r + 1, sub = x - r;
        if (sub >= 0 && add < W) { /* inside */
            sum += (uint32_t)in[add] - (uint32_t)in[sub];
            continue;
        }
        sum += in[add > W - 1 ? W - 1 : add];
        sum -= in[sub < 0 ? 0 : sub];
    }
    sum = 0;
    for (int i = -r; i <= r; i++)
        sum += b1[i < 0 ? 0 : i > W - 1 ? W - 1 : i];
    for (int x = 0; x < W; x++) {
        out[x] = (uint16_t)kr_box_div(sum, mul);
        int add = x + r + 1, sub = x - r;
        if (sub >= 0 && add < W) {
            sum += b1[add] - b1[sub];
            continue;
        }
        sum += b1[add > W - 1 ? W - 1 : add];
        sum -= b1[sub < 0 ? 0 : sub];
    }
}

/* ---- full-resolution upsampling ----------------------------------------------------- */

/* Guide intensity of row y (kr_src_luma_pixel for each pixel, specialised). */
static void luma_row(const kr_src *g, int y, int w, float *out)
{
    const kr_chan *c0 = &g->ch[0];
    const uint8_t *r0 = c0->base + (ptrdiff_t)y * c0->stride;
    if (g->chroma && !c0->wide) {
        for (int x = 0; x < w; x++)
            out[x] = g->luma[0] * (float)r0[x];
    } else if (g->chroma) {
        const uint16_t *r = (const uint16_t *)(const void *)r0;
        for (int x = 0; x < w; x++)
            out[x] = g->luma[0] * (float)(r[x] >> c0->shift);
    } else {
        int step = c0->step;
        for (int x = 0; x < w; x++) {
            const uint8_t *p = r0 + (ptrdiff_t)x * step;
            out[x] = g->luma[0] * (float)p[0] + g->luma[1] * (float)p[1] + g->luma[2] * (float)p[2];
        }
    }
}

/* Grid rows of A and B interpolated along x to the frame's width (kr_grid_bilerp_xy's first
 * step), once per grid row. */
static void hinterp_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    const kr_refine_job *job = cx->job;
    const int gw = job->gw, W = job->width;
    int y0, y1;
    range(job->gh, cx->tasks, index, &y0, &y1);
    for (int gy = y0; gy < y1; gy++)
        for (int k = 0; k < 2; k++) {
            const float *g = (k ? cx->B : cx->A) + (size_t)gy * (size_t)gw;
            float *h = (k ? cx->HB : cx->HA) + (size_t)gy * (size_t)W;
            for (int c = 0; c < gw; c++) {
                const float v0 = g[c], dv = g[c + (c < gw - 1)] - g[c];
                for (int x = cx->run[c]; x < cx->run[c + 1]; x++)
                    h[x] = v0 + dv * cx->fx[x];
            }
        }
}

static void upsample_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    const kr_refine_job *job = cx->job;
    int y0, y1;
    range(job->height, cx->tasks, index, &y0, &y1);
    const int W = job->width, threshold = job->threshold;
    const float lo = job->lo, inv = job->inv_range;
    float *lum = cx->rows + index * 2 * (size_t)W, *q = lum + W;
    uint16_t *m16 = cx->m16 + index * (size_t)W;
    const float sy = (float)job->gh / (float)job->height;
    for (int y = y0; y < y1; y++) {
        int gy0, gy1;
        float fy = kr_axis_split(kr_up_coord(y, sy), job->gh, &gy0, &gy1);
        const float *a0 = cx->HA + (size_t)gy0 * (size_t)W, *a1 = cx->HA + (size_t)gy1 * (size_t)W;
        const float *b0 = cx->HB + (size_t)gy0 * (size_t)W, *b1 = cx->HB + (size_t)gy1 * (size_t)W;
        luma_row(&job->guide, y, W, lum);
        int x = 0;
#ifdef KR_SSE2
        {
            const __m128 vfy = _mm_set1_ps(fy), vlo = _mm_set1_ps(lo), vinv = _mm_set1_ps(inv);
            const __m128 z = _mm_setzero_ps(), one = _mm_set1_ps(1.0f), three = _mm_set1_ps(3.0f);
            const __m128 two = _mm_set1_ps(2.0f);
            for (; x + 4 <= W; x += 4) {
                __m128 va0 = _mm_loadu_ps(a0 + x), vb0 = _mm_loadu_ps(b0 + x);
                __m128 a = _mm_add_ps(va0, _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(a1 + x), va0), vfy));
                __m128 b = _mm_add_ps(vb0, _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(b1 + x), vb0), vfy));
                __m128 v = _mm_add_ps(_mm_mul_ps(a, _mm_loadu_ps(lum + x)), b);
                v = _mm_min_ps(_mm_max_ps(v, z), one);
                if (threshold) {
                    __m128 t = _mm_mul_ps(_mm_sub_ps(v, vlo), vinv);
                    t = _mm_min_ps(_mm_max_ps(t, z), one);
                    v = _mm_mul_ps(_mm_mul_ps(t, t), _mm_sub_ps(three, _mm_mul_ps(two, t)));
                }
                _mm_storeu_ps(q + x, v);
            }
        }
#endif
        for (; x < W; x++) {
            float a = a0[x] + (a1[x] - a0[x]) * fy;
            float b = b0[x] + (b1[x] - b0[x]) * fy;
            float v = a * lum[x] + b;
            v = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
            q[x] = threshold ? kr_smoothstep(lo, inv, v) : v;
        }
        uint8_t *orow = job->out + (ptrdiff_t)y * job->out_stride;
        if (cx->direct) {
            if (job->out_f32)
                memcpy(orow, q, sizeof(float) * (size_t)W);
            else
                for (x = 0; x < W; x++)
                    orow[x] = (uint8_t)(q[x] * 255.0f + 0.5f);
            continue;
        }
        uint16_t *mrow = cx->fuse ? m16 : cx->M + (size_t)y * (size_t)W;
        x = 0;
#ifdef KR_SSE2
        {
            const __m128 s65535 = _mm_set1_ps(65535.0f), half = _mm_set1_ps(0.5f);
            for (; x + 4 <= W; x += 4)
                kr_sse_store_u16x4(mrow + x, _mm_cvttps_epi32(_mm_add_ps(
                                                 _mm_mul_ps(_mm_loadu_ps(q + x), s65535), half)));
        }
#endif
        for (; x < W; x++)
            mrow[x] = kr_alpha16(q[x]);
        if (cx->fuse)
            tent_h_row(mrow, cx->T + (size_t)y * (size_t)W, W, cx->radius, cx->mul,
                       cx->fbuf + index * cx->fper);
    }
}

/* ---- dilate / erode: van Herk/Gil-Werman running max (min) over 2r+1 ------------------- */

/* One line of n elements (element stride es, in uint16 units) into out; lanes contiguous
 * lanes side by side (lane stride 1). f and b hold (n + 2r) * lanes values. */
static void vhgw_lines(const uint16_t *in, uint16_t *out, ptrdiff_t es, int n, int lanes, int r,
                       int is_max, uint16_t *f, uint16_t *b)
{
    const uint16_t ident = is_max ? 0 : 0xFFFF;
    const int w = 2 * r + 1, np = n + 2 * r;
    /* Forward running extreme within blocks of w (padded index p; element p - r). */
    for (int p = 0; p < np; p++) {
        int e = p - r;
        uint16_t *fp = f + (size_t)p * (size_t)lanes;
        const uint16_t *src = e >= 0 && e < n ? in + (ptrdiff_t)e * es : NULL;
        if (p % w == 0) {
            for (int l = 0; l < lanes; l++)
                fp[l] = src ? src[l] : ident;
        } else {
            const uint16_t *prev = fp - lanes;
            for (int l = 0; l < lanes; l++) {
                uint16_t v = src ? src[l] : ident;
                fp[l] = is_max ? (v > prev[l] ? v : prev[l]) : (v < prev[l] ? v : prev[l]);
            }
        }
    }
    for (int p = np - 1; p >= 0; p--) {
        int e = p - r;
        uint16_t *bp = b + (size_t)p * (size_t)lanes;
        const uint16_t *src = e >= 0 && e < n ? in + (ptrdiff_t)e * es : NULL;
        if (p % w == w - 1 || p == np - 1) {
            for (int l = 0; l < lanes; l++)
                bp[l] = src ? src[l] : ident;
        } else {
            const uint16_t *next = bp + lanes;
            for (int l = 0; l < lanes; l++) {
                uint16_t v = src ? src[l] : ident;
                bp[l] = is_max ? (v > next[l] ? v : next[l]) : (v < next[l] ? v : next[l]);
            }
        }
    }
    /* Window of element e covers padded [e, e + 2r]: max(b[e], f[e + 2r]). */
    for (int e = 0; e < n; e++) {
        const uint16_t *bp = b + (size_t)e * (size_t)lanes;
        const uint16_t *fp = f + (size_t)(e + 2 * r) * (size_t)lanes;
        uint16_t *o = out + (ptrdiff_t)e * es;
        for (int l = 0; l < lanes; l++)
            o[l] = is_max ? (bp[l] > fp[l] ? bp[l] : fp[l]) : (bp[l] < fp[l] ? bp[l] : fp[l]);
    }
}

static void morph_h_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    int W = cx->job->width, y0, y1;
    range(cx->job->height, cx->tasks, index, &y0, &y1);
    size_t per = (size_t)(cx->job->height + 2 * cx->radius) * (size_t)cx->strip;
    if ((size_t)(W + 2 * cx->radius) > per)
        per = (size_t)(W + 2 * cx->radius);
    uint16_t *f = cx->vbuf + index * 2 * per, *b = f + per;
    for (int y = y0; y < y1; y++)
        vhgw_lines(cx->src + (size_t)y * (size_t)W, cx->dst + (size_t)y * (size_t)W, 1, W, 1,
                   cx->radius, cx->is_max, f, b);
}

static void morph_v_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    int W = cx->job->width, H = cx->job->height;
    int x0 = (int)index * cx->strip, x1 = x0 + cx->strip > W ? W : x0 + cx->strip;
    if (x0 >= x1)
        return;
    size_t per = (size_t)(H + 2 * cx->radius) * (size_t)cx->strip;
    if ((size_t)(W + 2 * cx->radius) > per)
        per = (size_t)(W + 2 * cx->radius);
    uint16_t *f = cx->vbuf + index * 2 * per, *b = f + per;
    vhgw_lines(cx->src + x0, cx->dst + x0, W, H, x1 - x0, cx->radius, cx->is_max, f, b);
}

/* ---- feather (see tent_h_row) ---------------------------------------------------------- */

static void tent_h_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    int W = cx->job->width, y0, y1;
    range(cx->job->height, cx->tasks, index, &y0, &y1);
    for (int y = y0; y < y1; y++)
        tent_h_row(cx->src + (size_t)y * (size_t)W, cx->dst + (size_t)y * (size_t)W, W, cx->radius,
                   cx->mul, cx->fbuf + index * cx->fper);
}

/* acc += add - sub over n lanes (u16 rows into u32 sums). */
static void lanes_addsub16(uint32_t *acc, const uint16_t *add, const uint16_t *sub, int n)
{
    int l = 0;
#ifdef KR_SSE2
    for (; l + 4 <= n; l += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(acc + l));
        v = _mm_sub_epi32(_mm_add_epi32(v, kr_sse_load_u16x4(add + l)), kr_sse_load_u16x4(sub + l));
        _mm_storeu_si128((__m128i *)(void *)(acc + l), v);
    }
#endif
    for (; l < n; l++)
        acc[l] += (uint32_t)add[l] - (uint32_t)sub[l];
}

static void lanes_addsub32(uint32_t *acc, const uint32_t *add, const uint32_t *sub, int n)
{
    int l = 0;
#ifdef KR_SSE2
    for (; l + 4 <= n; l += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(acc + l));
        v = _mm_add_epi32(v, _mm_loadu_si128((const __m128i *)(const void *)(add + l)));
        v = _mm_sub_epi32(v, _mm_loadu_si128((const __m128i *)(const void *)(sub + l)));
        _mm_storeu_si128((__m128i *)(void *)(acc + l), v);
    }
#endif
    for (; l < n; l++)
        acc[l] += add[l] - sub[l];
}

/* Vertical tent over a strip of columns, streaming rows: box1 rows (running sums over the
 * source rows) go through a ring of 2r + 2 rows, box2 is a running sum over them; the last
 * step writes the output (8-bit or float). */
static void tent_v_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    const kr_refine_job *job = cx->job;
    const int W = job->width, H = job->height, r = cx->radius, R = 2 * r + 2;
    const int x0 = (int)index * cx->strip, x1 = x0 + cx->strip > W ? W : x0 + cx->strip;
    if (x0 >= x1)
        return;
    const int n = x1 - x0;
    uint32_t *acc1 = cx->fbuf + index * cx->fper, *acc2 = acc1 + n, *ring = acc2 + n;
#define SRC(i) (cx->src + (size_t)((i) < 0 ? 0 : (i) > H - 1 ? H - 1 : (i)) * (size_t)W + x0)
#define RING(i) (ring + (size_t)((i) % R) * (size_t)n)
    memset(acc1, 0, sizeof(uint32_t) * (size_t)n);
    for (int k = -r; k <= r; k++) {
        const uint16_t *row = SRC(k);
        for (int l = 0; l < n; l++)
            acc1[l] += row[l];
    }
    int next = 0; /* next box1 row to put in the ring */
    /* box1 rows 0 .. min(r + 1, H - 1) */
    for (; next <= r + 1 && next < H; next++) {
        memcpy(RING(next), acc1, sizeof(uint32_t) * (size_t)n);
        lanes_addsub16(acc1, SRC(next + r + 1), SRC(next - r), n);
    }
    memset(acc2, 0, sizeof(uint32_t) * (size_t)n);
    for (int j = -r; j <= r; j++) {
        const uint32_t *row = RING(j < 0 ? 0 : j > H - 1 ? H - 1 : j);
        for (int l = 0; l < n; l++)
            acc2[l] += row[l];
    }
    for (int y = 0; y < H; y++) {
        uint8_t *o8 = job->out + (ptrdiff_t)y * job->out_stride;
        int l = 0;
        if (job->out_f32) {
            float *of = (float *)(void *)o8 + x0;
            for (; l < n; l++)
                of[l] = (float)kr_box_div(acc2[l], cx->mul) * (1.0f / 65535.0f);
        } else {
#ifdef KR_SSE2
            const __m128i mul8 = _mm_set1_epi32((int)cx->mul8);
            for (; l + 4 <= n; l += 4)
                kr_sse_store_u8x4(o8 + x0 + l,
                                  kr_sse_box_div(_mm_loadu_si128((const __m128i *)(const void *)(acc2 + l)), mul8));
#endif
            for (; l < n; l++)
                o8[x0 + l] = (uint8_t)kr_box_div(acc2[l], cx->mul8);
        }
        if (y == H - 1)
            break;
        /* box2(y + 1) = box2(y) + box1(clamp(y + r + 1)) - box1(clamp(y - r)) */
        int ia = y + r + 1 > H - 1 ? H - 1 : y + r + 1, is = y - r < 0 ? 0 : y - r;
        for (; next <= ia; next++) {
            memcpy(RING(next), acc1, sizeof(uint32_t) * (size_t)n);
            lanes_addsub16(acc1, SRC(next + r + 1), SRC(next - r), n);
        }
        lanes_addsub32(acc2, RING(ia), RING(is), n);
    }
#undef SRC
#undef RING
}

static void output_task(void *ctx, size_t index)
{
    const refine_ctx *cx = ctx;
    const kr_refine_job *job = cx->job;
    int y0, y1;
    range(job->height, cx->tasks, index, &y0, &y1);
    for (int y = y0; y < y1; y++) {
        const uint16_t *m = cx->M + (size_t)y * (size_t)job->width;
        uint8_t *o = job->out + (ptrdiff_t)y * job->out_stride;
        if (job->out_f32)
            for (int x = 0; x < job->width; x++)
                ((float *)(void *)o)[x] = (float)m[x] * (1.0f / 65535.0f);
        else
            for (int x = 0; x < job->width; x++)
                o[x] = kr_alpha16_to8(m[x]);
    }
}

/* ---- the job ------------------------------------------------------------------------- */

static keyer_status oom(keyer_error *err, const char *what)
{
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory for the %s", what);
}

/* 1. The mask on the grid: the mask itself when the region is exactly the mask, else the
 *    region resampled bilinearly at the grid's cell centres. */
static void mask_on_grid(const kr_refine_job *job, float *P)
{
    const int gw = job->gw, gh = job->gh;
    for (int y = 0; y < gh; y++) {
        float *o = P + (size_t)y * (size_t)gw;
        if (job->region_is_mask) {
            const float *m = (const float *)(const void *)((const uint8_t *)job->mask +
                                                           (ptrdiff_t)y * job->mask_stride);
            for (int x = 0; x < gw; x++)
                o[x] = kr_mask_value(m[x]);
        } else {
            float my = job->region[1] + ((float)y + 0.5f) * (job->region[3] / (float)gh) - 0.5f;
            for (int x = 0; x < gw; x++) {
                float mx = job->region[0] + ((float)x + 0.5f) * (job->region[2] / (float)gw) - 0.5f;
                o[x] = kr_mask_bilinear(job->mask, job->mask_stride, job->mask_width,
                                        job->mask_height, mx, my);
            }
        }
    }
}

/* 2. The frame's luma on the grid (separable area resampling, rows over the pool): cx->L. */
static keyer_status grid_luma(refine_ctx *cx, keyer_error *err)
{
    kr_cpu_state *s = cx->s;
    const kr_refine_job *job = cx->job;
    const int gw = job->gw, gh = job->gh, W = job->width, H = job->height;
    float *L = kr_cpu_scratch(s, SLOT_L, sizeof(float) * (size_t)gw * (size_t)gh);
    if (!L)
        return oom(err, "luma grid");
    keyer_status st;
    const kr_prepare_item *g = &job->grid;
    if ((st = kr_cpu_axis(s, SLOT_AXIS_X, &cx->ax, 0, gw, g->nx, g->m[0], g->m[2], KR_AXIS_LUMA,
                          W, err)) ||
        (st = kr_cpu_axis(s, SLOT_AXIS_Y, &cx->ay, 0, gh, g->ny, g->m[4], g->m[5], KR_AXIS_LUMA,
                          H, err)))
        return st;
    cx->L = L;
    cx->tasks = kr_cpu_tasks(s) < gh ? kr_cpu_tasks(s) : gh;
    kr_threadpool_parallel_for(s->pool, luma_task, cx, (size_t)cx->tasks);
    return KEYER_OK;
}

/* 3. Temporal smoothing of the grid mask @p P with the stream's history (unless the mean luma
 *    change says the scene was cut), then the history takes this frame's mask and luma. */
static keyer_status temporal_smoothing(kr_cpu_state *s, const kr_refine_job *job, float *P,
                                       const float *L, keyer_error *err)
{
    const size_t cells = (size_t)job->gw * (size_t)job->gh;
    kr_cpu_history *h = &s->history[job->stream_id];
    const keyer_allocator *a = kr_cpu_allocator(s);
    if (h->cells < cells) {
        keyer_free(a, h->mask);
        keyer_free(a, h->luma);
        h->cells = 0;
        h->mask = keyer_alloc(a, sizeof(float) * cells, KEYER_ALIGNMENT);
        h->luma = keyer_alloc(a, sizeof(float) * cells, KEYER_ALIGNMENT);
        if (!h->mask || !h->luma)
            return oom(err, "temporal history");
        h->cells = cells;
    }
    int use = job->history_valid;
    if (use) {
        double total = 0;
        for (size_t i = 0; i < cells; i++)
            total += (double)fabsf(L[i] - h->luma[i]);
        use = (float)(total / (double)cells) <= job->scene_cut;
    }
    if (use)
        for (size_t i = 0; i < cells; i++)
            P[i] = kr_temporal_blend(&job->temporal, P[i], h->mask[i], L[i] - h->luma[i]);
    memcpy(h->mask, P, sizeof(float) * cells);
    memcpy(h->luma, L, sizeof(float) * cells);
    return KEYER_OK;
}

/* 4. The coefficient grids AB (A, then B): the guided filter's with luma @p L as the guide,
 *    or A = 0, B = the mask for bilinear upsampling. */
static keyer_status coefficients(kr_cpu_state *s, const kr_refine_job *job, const float *P,
                                 const float *L, float *AB, keyer_error *err)
{
    const int gw = job->gw, gh = job->gh;
    const size_t cells = (size_t)gw * (size_t)gh;
    if (job->upsample == KEYER_UPSAMPLE_GUIDED) {
        float *in = kr_cpu_scratch(s, SLOT_BOX_O, sizeof(float) * 4 * cells);
        float *hb = kr_cpu_scratch(s, SLOT_BOX_H, sizeof(float) * 4 * cells);
        if (!in || !hb)
            return oom(err, "guided filter");
        /* Means of I, p, I*p, I*I (box sums into hb, then back into the inputs' place). */
        float *src4 = in;
        for (size_t i = 0; i < cells; i++) {
            src4[i] = L[i];
            src4[cells + i] = P[i];
            src4[2 * cells + i] = L[i] * P[i];
            src4[3 * cells + i] = L[i] * L[i];
        }
        box_filter(s->pool, src4, hb, src4, 4, gw, gh, job->radius);
        float *ab = hb; /* a, b before averaging */
        for (size_t i = 0; i < cells; i++) {
            kr_guided_coeffs(src4[i], src4[cells + i], src4[2 * cells + i], src4[3 * cells + i],
                             job->eps, &ab[i], &ab[cells + i]);
        }
        box_filter(s->pool, ab, src4, AB, 2, gw, gh, job->radius);
    } else {
        memset(AB, 0, sizeof(float) * cells);
        memcpy(AB + cells, P, sizeof(float) * cells);
    }
    return KEYER_OK;
}

/* 5a. The full-resolution passes' tables and buffers: the x interpolation runs, the per-task
 *     rows, the 16-bit mattes when a dilate or feather pass follows, the vertical strips
 *     (cx->strip, *vtasks, *ntask) and the feather's constants. */
static keyer_status full_resolution_setup(refine_ctx *cx, float *AB, int *vtasks, int *ntask,
                                          keyer_error *err)
{
    kr_cpu_state *s = cx->s;
    const kr_refine_job *job = cx->job;
    const int gw = job->gw, gh = job->gh, W = job->width, H = job->height;
    const size_t cells = (size_t)gw * (size_t)gh;
    float *fxs = kr_cpu_scratch(s, SLOT_FX, sizeof(float) * (size_t)W);
    int *run = kr_cpu_scratch(s, SLOT_RUNS, sizeof(int) * ((size_t)gw + 1));
    cx->tasks = kr_cpu_tasks(s) < H ? kr_cpu_tasks(s) : H;
    cx->rows = kr_cpu_scratch(s, SLOT_ROWS, sizeof(float) * 2 * (size_t)W * (size_t)cx->tasks);
    cx->m16 = kr_cpu_scratch(s, SLOT_M16, sizeof(uint16_t) * (size_t)W * (size_t)cx->tasks);
    cx->HA = kr_cpu_scratch(s, SLOT_HAB, sizeof(float) * 2 * (size_t)W * (size_t)gh);
    if (!fxs || !run || !cx->rows || !cx->m16 || !cx->HA)
        return oom(err, "upsampling tables");
    cx->HB = cx->HA + (size_t)W * (size_t)gh;
    float sx = (float)gw / (float)W;
    int g = 0;
    run[0] = 0;
    for (int x = 0; x < W; x++) {
        int x0, x1;
        fxs[x] = kr_axis_split(kr_up_coord(x, sx), gw, &x0, &x1);
        while (g < x0)
            run[++g] = x;
    }
    while (g < gw)
        run[++g] = W;
    cx->run = run;
    cx->fx = fxs;
    cx->A = AB;
    cx->B = AB + cells;
    cx->direct = job->dilate == 0 && job->feather == 0;
    cx->fuse = job->dilate == 0 && job->feather > 0;
    int r = job->dilate < 0 ? -job->dilate : job->dilate;
    /* vertical passes: strips of whole cache lines, a few per thread */
    cx->strip = (W + 2 * s->threads - 1) / (2 * s->threads);
    cx->strip = (cx->strip + 15) & ~15;
    *vtasks = (W + cx->strip - 1) / cx->strip;
    *ntask = *vtasks > cx->tasks ? *vtasks : cx->tasks;
    if (!cx->direct) {
        cx->T = kr_cpu_scratch(s, SLOT_T, sizeof(uint16_t) * (size_t)W * (size_t)H);
        if (r > 0)
            cx->M = kr_cpu_scratch(s, SLOT_M, sizeof(uint16_t) * (size_t)W * (size_t)H);
        if (!cx->T || (r > 0 && !cx->M))
            return oom(err, "16-bit matte");
    }
    if (job->feather > 0) {
        uint32_t n = (uint32_t)(2 * job->feather + 1);
        cx->mul = kr_box_mul(n * n);
        cx->mul8 = kr_box_mul8(n * n);
        cx->fper = (size_t)(2 * job->feather + 4) * (size_t)cx->strip;
        if (cx->fper < (size_t)W)
            cx->fper = (size_t)W;
        cx->fbuf = kr_cpu_scratch(s, SLOT_FEATHER, sizeof(uint32_t) * cx->fper * (size_t)*ntask);
        if (!cx->fbuf)
            return oom(err, "feather rows");
        cx->radius = job->feather;
    }
    return KEYER_OK;
}

/* 5b. Upsampling: A, B interpolated along x once per grid row, then each full-resolution row
 *     (along y, alpha = A * luma + B, threshold), into the output, cx->M or cx->T. */
static void upsample(refine_ctx *cx)
{
    int gh = cx->job->gh;
    int htasks = cx->tasks < gh ? cx->tasks : gh;
    int saved = cx->tasks;
    cx->tasks = htasks;
    kr_threadpool_parallel_for(cx->s->pool, hinterp_task, cx, (size_t)htasks);
    cx->tasks = saved;
    kr_threadpool_parallel_for(cx->s->pool, upsample_task, cx, (size_t)cx->tasks);
}

/* 6, 7. Dilate/erode (horizontal then vertical van Herk/Gil-Werman pass), feather (whose last
 *       pass writes the output), or the plain output pass. */
static keyer_status dilate_feather(refine_ctx *cx, int vtasks, int ntask, keyer_error *err)
{
    kr_cpu_state *s = cx->s;
    const kr_refine_job *job = cx->job;
    const int W = job->width, H = job->height;
    int r = job->dilate < 0 ? -job->dilate : job->dilate;
    int rmax = r > job->feather ? r : job->feather;
    if (r > 0) {
        size_t per = (size_t)(H + 2 * rmax) * (size_t)cx->strip;
        if ((size_t)(W + 2 * rmax) > per)
            per = (size_t)(W + 2 * rmax);
        cx->vbuf = kr_cpu_scratch(s, SLOT_VHGW, sizeof(uint16_t) * 2 * per * (size_t)ntask);
        if (!cx->vbuf)
            return oom(err, "dilate rows");
        cx->radius = r;
        cx->is_max = job->dilate > 0;
        cx->src = cx->M;
        cx->dst = cx->T;
        kr_threadpool_parallel_for(s->pool, morph_h_task, cx, (size_t)cx->tasks);
        cx->src = cx->T;
        cx->dst = cx->M;
        kr_threadpool_parallel_for(s->pool, morph_v_task, cx, (size_t)vtasks);
        if (job->feather > 0) {
            cx->radius = job->feather;
            cx->src = cx->M;
            cx->dst = cx->T;
            kr_threadpool_parallel_for(s->pool, tent_h_task, cx, (size_t)cx->tasks);
        }
    }
    if (job->feather > 0) {
        cx->src = cx->T;
        kr_threadpool_parallel_for(s->pool, tent_v_task, cx, (size_t)vtasks);
        return KEYER_OK;
    }
    kr_threadpool_parallel_for(s->pool, output_task, cx, (size_t)cx->tasks);
    return KEYER_OK;
}

keyer_status kr_cpu_refine(void *state, const kr_refine_job *job, keyer_error *err)
{
    kr_cpu_state *s = state;
    refine_ctx cx;
    memset(&cx, 0, sizeof(cx));
    cx.job = job;
    cx.s = s;
    const size_t cells = (size_t)job->gw * (size_t)job->gh;
    keyer_status st;

    float *P = kr_cpu_scratch(s, SLOT_P, sizeof(float) * cells);
    if (!P)
        return oom(err, "mask grid");
    mask_on_grid(job, P);
    if (job->need_luma && (st = grid_luma(&cx, err)))
        return st;
    if (job->temporal.mode != KEYER_TEMPORAL_OFF &&
        (st = temporal_smoothing(s, job, P, cx.L, err)))
        return st;
    float *AB = kr_cpu_scratch(s, SLOT_AB, sizeof(float) * 2 * cells);
    if (!AB)
        return oom(err, "coefficient grids");
    if ((st = coefficients(s, job, P, cx.L, AB, err)))
        return st;
    int vtasks = 0, ntask = 0;
    if ((st = full_resolution_setup(&cx, AB, &vtasks, &ntask, err)))
        return st;
    upsample(&cx);
    if (cx.direct)
        return KEYER_OK;
    return dilate_feather(&cx, vtasks, ntask, err);
}
