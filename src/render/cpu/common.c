/* The CPU backend's helpers shared by its operations: the state's allocator and scratch
 * buffers, the task count, and the separable resampler (axis weights, row resampling). */
#include <string.h>

#include "render/cpu/cpu.h"

const keyer_allocator *kr_cpu_allocator(const kr_cpu_state *s)
{
    return s->has_allocator ? &s->allocator : NULL;
}

void *kr_cpu_scratch(kr_cpu_state *s, int slot, size_t bytes)
{
    if (slot < 0 || slot >= KR_CPU_SCRATCH_SLOTS)
        return NULL;
    if (bytes == 0)
        bytes = 1;
    if (s->scratch_size[slot] >= bytes)
        return s->scratch[slot];
    const keyer_allocator *a = kr_cpu_allocator(s);
    keyer_free(a, s->scratch[slot]);
    s->scratch_size[slot] = 0;
    s->scratch[slot] = keyer_alloc(a, bytes, KEYER_ALIGNMENT);
    if (s->scratch[slot])
        s->scratch_size[slot] = bytes;
    return s->scratch[slot];
}

int kr_cpu_tasks(const kr_cpu_state *s)
{
    return s->threads > 1 ? s->threads * 4 : 1;
}

keyer_status kr_cpu_axis(kr_cpu_state *s, int slot, kr_axis *ax, int o0, int n, int ns, float m,
                         float c, int kind, int size, keyer_error *err)
{
    ax->n = n;
    ax->o0 = o0;
    ax->k = 1;
    float inv = 1.0f / (float)ns;
    float hi = (float)(size - 1);
    /* First pass: the widest span of input samples one output reads. */
    for (int o = 0; o < n; o++) {
        int lo_i = 0, hi_i = 0;
        for (int e = 0; e < 2; e++) {
            int i = e ? ns - 1 : 0;
            float t = (float)(o0 + o) + ((float)i + 0.5f) / (float)ns;
            float f = m * t + c - 0.5f;
            if (kind == KR_AXIS_CHROMA_X)
                f = kr_chroma_x(f);
            else if (kind == KR_AXIS_CHROMA_Y)
                f = kr_chroma_y(f);
            f = kr_clampf(f, 0.0f, hi);
            int i0 = (int)f;
            if (e == 0)
                lo_i = i0;
            else
                hi_i = i0 + (i0 < size - 1);
        }
        int span = hi_i - lo_i + 1;
        if (lo_i > hi_i) /* a negative scale: never produced by the callers */
            span = lo_i - hi_i + 2;
        if (span > ax->k)
            ax->k = span;
    }
    ax->w = kr_cpu_scratch(s, slot, sizeof(float) * (size_t)n * (size_t)ax->k);
    ax->start = kr_cpu_scratch(s, slot + 1, sizeof(int) * 2 * (size_t)n);
    if (!ax->w || !ax->start)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "CPU effects: out of memory for resampling weights");
    ax->count = ax->start + n;
    memset(ax->w, 0, sizeof(float) * (size_t)n * (size_t)ax->k);
    for (int o = 0; o < n; o++) {
        float *w = ax->w + (size_t)o * (size_t)ax->k;
        int first = -1, last = -1;
        for (int i = 0; i < ns; i++) {
            float t = (float)(o0 + o) + ((float)i + 0.5f) / (float)ns;
            float f = m * t + c - 0.5f;
            if (kind == KR_AXIS_CHROMA_X)
                f = kr_chroma_x(f);
            else if (kind == KR_AXIS_CHROMA_Y)
                f = kr_chroma_y(f);
            f = kr_clampf(f, 0.0f, hi);
            int i0 = (int)f;
            float fr = f - (float)i0;
            int i1 = i0 + (i0 < size - 1);
            if (first < 0)
                first = i0;
            int j0 = i0 - first, j1 = i1 - first;
            if (j0 < 0 || j1 >= ax->k) /* cannot happen for monotonic maps; stay in bounds */
                continue;
            w[j0] += (1.0f - fr) * inv;
            w[j1] += fr * inv;
            if (i1 > last)
                last = i1;
        }
        ax->start[o] = first;
        ax->count[o] = last - first + 1;
    }
    return KEYER_OK;
}

void kr_cpu_hresample_add(const kr_chan *ch, int r, const kr_axis *ax, float wy, float *acc)
{
    const uint8_t *row = ch->base + (ptrdiff_t)r * ch->stride;
    const int k = ax->k, step = ch->step;
    if (!ch->wide) {
        for (int o = 0; o < ax->n; o++) {
            const uint8_t *p = row + (ptrdiff_t)ax->start[o] * step;
            const float *w = ax->w + (size_t)o * (size_t)k;
            float sum = 0.0f;
            for (int j = 0; j < ax->count[o]; j++)
                sum += w[j] * (float)p[j * step];
            acc[o] += wy * sum;
        }
    } else {
        const int shift = ch->shift;
        for (int o = 0; o < ax->n; o++) {
            const uint8_t *p = row + (ptrdiff_t)ax->start[o] * step;
            const float *w = ax->w + (size_t)o * (size_t)k;
            float sum = 0.0f;
            for (int j = 0; j < ax->count[o]; j++)
                sum += w[j] * (float)(*(const uint16_t *)(const void *)(p + j * step) >> shift);
            acc[o] += wy * sum;
        }
    }
}
