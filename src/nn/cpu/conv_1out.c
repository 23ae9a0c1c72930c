/*
 * CONV_2D with one output channel (a saliency or matting head: u2netp's side outputs), any
 * kernel size, stride, dilation and padding: per output pixel, the dot product of the filter
 * with the window's taps, 16 input channels at a time in four independent sums (the additions'
 * latency bounds a single sum), reduced once at the end. XNNPACK 2022
 * runs these as a matrix product padded to 16 output channels, 16 times the work.
 *
 * Rows of the output are split over the pool. The 16-channel steps use GCC vector extensions,
 * compiled for AVX-512F and AVX2 (picked at run time) and portable C.
 */
#include <stdint.h>
#include <string.h>

#include "nn/cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define C1_X86 1
#else
#define C1_X86 0
#endif

#define LANES 16

typedef float v16 __attribute__((vector_size(64)));

typedef struct c1_job {
    const kr_op_ctx *ctx;
    int n, ih, iw, cin, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
    float lo, hi, bias;
    const float *w; /* [kh][kw][cin] */
} c1_job;

int kr_cpu_conv_1out_supports(const kr_graph *g, const kr_node *n)
{
    if (n->op != KR_OP_CONV_2D || n->n_inputs < 2 || n->n_outputs != 1)
        return 0;
    const kr_tensor *in = &g->tensors[n->inputs[0]], *f = &g->tensors[n->inputs[1]];
    const kr_tensor *out = &g->tensors[n->outputs[0]];
    if (kr_tensor_is_const(in) || kr_tensor_is_const(out) || in->dtype != KR_DTYPE_F32 ||
        out->dtype != KR_DTYPE_F32 || in->rank != 4 || out->rank != 4 ||
        !kr_tensor_is_const(f) || f->dtype != KR_DTYPE_F32 || f->rank != 4)
        return 0;
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
        const kr_tensor *b = &g->tensors[n->inputs[2]];
        if (!kr_tensor_is_const(b) || b->dtype != KR_DTYPE_F32 || kr_tensor_elements(b) != 1)
            return 0;
    }
    const kr_window_params *w = &n->p.window;
    return f->dims[0] == 1 && out->dims[3] == 1 && f->dims[3] == in->dims[3] &&
           f->dims[1] == w->kernel_h && f->dims[2] == w->kernel_w && w->stride_h >= 1 &&
           w->stride_w >= 1 && w->dilation_h >= 1 && w->dilation_w >= 1 &&
           in->dims[0] == out->dims[0];
}

static inline __attribute__((always_inline)) void c1_rows(const c1_job *j, size_t first,
                                                          size_t count)
{
    const float *x = j->ctx->in[0];
    float *y = j->ctx->out[0];
    int cin = j->cin, full = cin / LANES * LANES;
    for (size_t r = first; r < first + count; r++) {
        int b = (int)(r / (size_t)j->oh), oy = (int)(r % (size_t)j->oh);
        for (int ox = 0; ox < j->ow; ox++) {
            v16 acc = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0}; /* four independent sums */
            float tail = 0.0f;
            for (int ky = 0; ky < j->kh; ky++) {
                int iy = oy * j->sh - j->pt + ky * j->dh;
                if (iy < 0 || iy >= j->ih)
                    continue;
                for (int kx = 0; kx < j->kw; kx++) {
                    int ix = ox * j->sw - j->pl + kx * j->dw;
                    if (ix < 0 || ix >= j->iw)
                        continue;
                    const float *px = x + (((size_t)b * j->ih + iy) * j->iw + ix) * cin;
                    const float *pw = j->w + ((size_t)ky * j->kw + kx) * cin;
                    int c = 0;
                    for (; c + 4 * LANES <= full; c += 4 * LANES) {
                        v16 a0, f0, a1, f1, a2, f2, a3, f3;
                        memcpy(&a0, px + c, sizeof(v16));
                        memcpy(&f0, pw + c, sizeof(v16));
                        memcpy(&a1, px + c + LANES, sizeof(v16));
                        memcpy(&f1, pw + c + LANES, sizeof(v16));
                        memcpy(&a2, px + c + 2 * LANES, sizeof(v16));
                        memcpy(&f2, pw + c + 2 * LANES, sizeof(v16));
                        memcpy(&a3, px + c + 3 * LANES, sizeof(v16));
                        memcpy(&f3, pw + c + 3 * LANES, sizeof(v16));
                        acc += a0 * f0;
                        acc1 += a1 * f1;
                        acc2 += a2 * f2;
                        acc3 += a3 * f3;
                    }
                    for (; c < full; c += LANES) {
                        v16 a, f;
                        memcpy(&a, px + c, sizeof(v16));
                        memcpy(&f, pw + c, sizeof(v16));
                        acc += a * f;
                    }
                    for (c = full; c < cin; c++)
                        tail += px[c] * pw[c];
                }
            }
            float s = j->bias + tail;
            acc += acc1 + acc2 + acc3;
            for (int l = 0; l < LANES; l++)
                s += acc[l];
            s = s < j->lo ? j->lo : s;
            s = s > j->hi ? j->hi : s;
            y[r * (size_t)j->ow + (size_t)ox] = s;
        }
    }
}

static void c1_rows_generic(void *arg, size_t first, size_t count)
{
    c1_rows(arg, first, count);
}

#if C1_X86
__attribute__((target("avx2"))) static void c1_rows_avx2(void *arg, size_t first, size_t count)
{
    c1_rows(arg, first, count);
}

__attribute__((target("avx512f"))) static void c1_rows_avx512(void *arg, size_t first,
                                                              size_t count)
{
    c1_rows(arg, first, count);
}
#endif

pthreadpool_task_1d_tile_1d_t kr_cpu_conv_1out_pick(void)
{
#if C1_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return c1_rows_avx512;
    if (__builtin_cpu_supports("avx2"))
        return c1_rows_avx2;
#endif
    return c1_rows_generic;
}

void kr_cpu_conv_1out_run(const kr_op_ctx *ctx, pthreadpool_task_1d_tile_1d_t fn,
                          pthreadpool_t pool)
{
    const kr_graph *g = ctx->graph;
    const kr_node *n = ctx->node;
    const kr_tensor *in = &g->tensors[n->inputs[0]], *out = &g->tensors[n->outputs[0]];
    const kr_window_params *w = &n->p.window;
    c1_job j = {
        .ctx = ctx,
        .n = in->dims[0] * ctx->batch,
        .ih = in->dims[1],
        .iw = in->dims[2],
        .cin = in->dims[3],
        .oh = out->dims[1],
        .ow = out->dims[2],
        .kh = w->kernel_h,
        .kw = w->kernel_w,
        .sh = w->stride_h,
        .sw = w->stride_w,
        .dh = w->dilation_h,
        .dw = w->dilation_w,
        .pt = w->pad_top,
        .pl = w->pad_left,
        .w = ctx->in[1],
        .bias = n->n_inputs > 2 && ctx->in[2] ? *(const float *)ctx->in[2] : 0.0f,
    };
    kr_activation_range(n->activation, &j.lo, &j.hi);
    size_t rows = (size_t)j.n * (size_t)j.oh;
    if (pool)
        pthreadpool_parallelize_1d_tile_1d(pool, fn, &j, rows, 4, PTHREADPOOL_FLAG_YIELD_WORKERS);
    else
        fn(&j, 0, rows);
}
