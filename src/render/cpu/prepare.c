/*
 * Model input preparation on the CPU. An axis-aligned region is resampled separably: per
 * tensor row, the frame rows it covers are each resampled horizontally with precomputed
 * weights and summed with the row's vertical weights (the same mean of bilinear samples as
 * kr_prepare_pixel, reordered). A rotated region takes kr_prepare_pixel per tensor pixel.
 * Tensor rows are split over the thread pool.
 */
#include <string.h>

#include "render/cpu/cpu.h"

/* Scratch slots of the prepare state. */
enum {
    SLOT_AXES = 0,  /* 4 axes x 2 slots: luma x, luma y, chroma x, chroma y */
    SLOT_ROWS = 8,  /* per-task accumulators */
};

typedef struct prepare_ctx {
    const kr_prepare_job *job;
    const kr_prepare_item *it;
    int n;                  /* batch index */
    int separable;
    kr_axis ax[4];          /* luma x, luma y, chroma x, chroma y */
    float *rows;            /* per task: 3 accumulator rows of job->width */
    int tasks;
} prepare_ctx;

static void store(const kr_prepare_job *job, int n, int x, int y, const float v[3])
{
    size_t hw = (size_t)job->width * (size_t)job->height;
    size_t base, step;
    if (job->layout == KEYER_TENSOR_LAYOUT_NCHW) {
        base = (size_t)n * 3 * hw + (size_t)y * (size_t)job->width + (size_t)x;
        step = hw;
    } else {
        base = (((size_t)n * (size_t)job->height + (size_t)y) * (size_t)job->width + (size_t)x) * 3;
        step = 1;
    }
    if (job->dtype == KEYER_DTYPE_F16) {
        uint16_t *t = job->tensor;
        for (int c = 0; c < 3; c++)
            t[base + (size_t)c * step] = kr_float_to_half(v[c]);
    } else {
        float *t = job->tensor;
        for (int c = 0; c < 3; c++)
            t[base + (size_t)c * step] = v[c];
    }
}

static void normalise(const kr_prepare_job *job, const float rgb[3], float v[3])
{
    for (int c = 0; c < 3; c++)
        v[c] = rgb[job->src[c]] * job->scale[c] + job->offset[c];
}

static void prepare_row(const prepare_ctx *cx, int y, float *acc)
{
    const kr_prepare_job *job = cx->job;
    const kr_prepare_item *it = cx->it;
    const float *pad = job->pad_value;
    int inside = y >= it->y0 && y < it->y1;
    int x0 = inside ? it->x0 : job->width, x1 = inside ? it->x1 : job->width;
    for (int x = 0; x < x0; x++)
        store(job, cx->n, x, y, pad);
    for (int x = x1; x < job->width; x++)
        store(job, cx->n, x, y, pad);
    if (!inside || x0 >= x1)
        return;
    if (!cx->separable) {
        for (int x = x0; x < x1; x++) {
            float rgb[3], v[3];
            kr_prepare_pixel(it, x, y, rgb);
            normalise(job, rgb, v);
            store(job, cx->n, x, y, v);
        }
        return;
    }
    int w = x1 - x0;
    for (int c = 0; c < 3; c++) {
        const kr_chan *ch = &it->src.ch[c];
        const kr_axis *axx = &cx->ax[ch->level ? 2 : 0], *axy = &cx->ax[ch->level ? 3 : 1];
        float *a = acc + (size_t)c * (size_t)job->width;
        memset(a, 0, sizeof(float) * (size_t)w);
        int o = y - axy->o0;
        const float *wy = axy->w + (size_t)o * (size_t)axy->k;
        for (int j = 0; j < axy->count[o]; j++)
            if (wy[j] != 0.0f)
                kr_cpu_hresample_add(ch, axy->start[o] + j, axx, wy[j], a);
    }
    for (int x = 0; x < w; x++) {
        float codes[3] = {acc[x], acc[job->width + x], acc[2 * job->width + x]}, rgb[3], v[3];
        kr_src_rgb(&it->src, codes, rgb);
        normalise(job, rgb, v);
        store(job, cx->n, x0 + x, y, v);
    }
}

static void prepare_task(void *ctx, size_t index)
{
    const prepare_ctx *cx = ctx;
    int h = cx->job->height;
    int y0 = (int)((size_t)h * index / (size_t)cx->tasks);
    int y1 = (int)((size_t)h * (index + 1) / (size_t)cx->tasks);
    float *acc = cx->rows + index * 3 * (size_t)cx->job->width;
    for (int y = y0; y < y1; y++)
        prepare_row(cx, y, acc);
}

keyer_status kr_cpu_prepare(void *state, const kr_prepare_job *job, keyer_error *err)
{
    kr_cpu_state *s = state;
    prepare_ctx cx;
    memset(&cx, 0, sizeof(cx));
    cx.job = job;
    cx.tasks = kr_cpu_tasks(s);
    if (cx.tasks > job->height)
        cx.tasks = job->height;
    cx.rows = kr_cpu_scratch(s, SLOT_ROWS, sizeof(float) * 3 * (size_t)job->width * (size_t)cx.tasks);
    if (!cx.rows)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory for %d rows",
                               3 * cx.tasks);
    for (int n = 0; n < job->count; n++) {
        const kr_prepare_item *it = &job->items[n];
        cx.it = it;
        cx.n = n;
        cx.separable = it->m[1] == 0.0f && it->m[3] == 0.0f && it->m[0] > 0.0f &&
                       it->m[4] > 0.0f;
        if (cx.separable && it->x1 > it->x0 && it->y1 > it->y0) {
            int nxo = it->x1 - it->x0, nyo = it->y1 - it->y0;
            const kr_chan *l = &it->src.ch[0], *c = &it->src.ch[1];
            keyer_status st;
            if ((st = kr_cpu_axis(s, SLOT_AXES + 0, &cx.ax[0], it->x0, nxo, it->nx, it->m[0],
                                  it->m[2], KR_AXIS_LUMA, l->width, err)) ||
                (st = kr_cpu_axis(s, SLOT_AXES + 2, &cx.ax[1], it->y0, nyo, it->ny, it->m[4],
                                  it->m[5], KR_AXIS_LUMA, l->height, err)))
                return st;
            if (c->level &&
                ((st = kr_cpu_axis(s, SLOT_AXES + 4, &cx.ax[2], it->x0, nxo, it->nx, it->m[0],
                                   it->m[2], KR_AXIS_CHROMA_X, c->width, err)) ||
                 (st = kr_cpu_axis(s, SLOT_AXES + 6, &cx.ax[3], it->y0, nyo, it->ny, it->m[4],
                                   it->m[5], KR_AXIS_CHROMA_Y, c->height, err))))
                return st;
        }
        kr_threadpool_parallel_for(s->pool, prepare_task, &cx, (size_t)cx.tasks);
    }
    return KEYER_OK;
}
