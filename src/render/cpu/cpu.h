/*
 * The CPU backend of the frame effects: its state (thread pool, scratch buffers, temporal
 * histories) and the entry points of each operation (one file per operation, beside the
 * CUDA file of the same name); the table in backend.c, the helpers the operations share
 * (scratch, tasks, the separable resampler) in common.c.
 */
#ifndef KEYER_RENDER_CPU_CPU_H
#define KEYER_RENDER_CPU_CPU_H

#include <stddef.h>

#include "core/threadpool.h"
#include "render/fx_backend.h"

/** Named scratch buffers; each operation uses its own slots of its object's state. */
enum {
    KR_CPU_SCRATCH_SLOTS = 24,
};

/** Temporal history of one stream (refine): previous output mask and grid luma. */
typedef struct kr_cpu_history {
    float *mask;
    float *luma;
    size_t cells; /* capacity of both */
} kr_cpu_history;

typedef struct kr_cpu_state {
    kr_threadpool *pool;
    int threads;                /* threads running each job */
    keyer_allocator allocator;  /* copy of the caller's, or zeroes for the system one */
    int has_allocator;
    void *scratch[KR_CPU_SCRATCH_SLOTS];
    size_t scratch_size[KR_CPU_SCRATCH_SLOTS];
    int max_streams;
    kr_cpu_history *history;    /* max_streams entries */
    /* composite: the background converted to the frame's format and size */
    keyer_frame *bg_cache;
    kr_src bg_src; /* what the blend reads: bg_cache, or the background itself */
} kr_cpu_state;

/** The state's allocator (NULL: system). */
const keyer_allocator *kr_cpu_allocator(const kr_cpu_state *s);

/** Scratch slot @p slot with at least @p bytes (64-byte aligned); grows it when needed (the
 *  contents are then lost). NULL when out of memory. */
void *kr_cpu_scratch(kr_cpu_state *s, int slot, size_t bytes);

/** Number of tasks a job over many rows is split into (a few per thread). */
int kr_cpu_tasks(const kr_cpu_state *s);

keyer_status kr_cpu_prepare(void *state, const kr_prepare_job *job, keyer_error *err);
keyer_status kr_cpu_refine(void *state, const kr_refine_job *job, keyer_error *err);
keyer_status kr_cpu_composite(void *state, const kr_composite_job *job, keyer_error *err);

/* ---- separable resampling shared by prepare, refine and composite --------------------- */

/** Weights of a 1-D resampling: output o (of n, starting at o0) reads input samples
 *  start[o] .. start[o] + count[o] - 1 with weights w[o * k + j]. */
typedef struct kr_axis {
    int n, o0, k;
    int *start;
    int *count;
    float *w;
} kr_axis;

/** Axis kinds: how an output coordinate becomes an input index coordinate. */
enum { KR_AXIS_LUMA = 0, KR_AXIS_CHROMA_X, KR_AXIS_CHROMA_Y };

/**
 * Builds the weights of outputs o0 .. o0+n-1 along one axis: output o averages ns bilinear
 * samples at continuous positions m * (o + (i + 0.5) / ns) + c (minus 0.5, mapped by @p kind)
 * of an input of @p size samples, clamped at its edges. Uses scratch slots @p slot and
 * @p slot + 1. Errors: OUT_OF_MEMORY.
 */
keyer_status kr_cpu_axis(kr_cpu_state *s, int slot, kr_axis *ax, int o0, int n, int ns, float m,
                         float c, int kind, int size, keyer_error *err);

/** Resamples one input row of channel @p ch (row @p r) along @p ax, adding wy times the result
 *  to acc[o - ax->o0] for every output o. */
void kr_cpu_hresample_add(const kr_chan *ch, int r, const kr_axis *ax, float wy, float *acc);

#endif
