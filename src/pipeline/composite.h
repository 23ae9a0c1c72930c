/*
 * The composite stage (internal, prefix kr_): W workers, each with its own keyer_composite per
 * stream and device (made on first use) and its own CUDA stream, turn each item's frame and
 * matte into the output frame (blurred or replaced background, alpha, matte). Workers finish
 * in any order: each item goes to its stream's reorder buffer, which restores the order.
 * Background pictures: the session's still image (uploaded to the device once), or each
 * item's background video frame.
 *
 * Thread safety: set-up and tear-down from the session's thread; the queue from any thread.
 */
#ifndef KEYER_PIPELINE_COMPOSITE_H
#define KEYER_PIPELINE_COMPOSITE_H

#include "keyer/effects.h"
#include "pipeline/item.h"
#include "pipeline/stats.h"

#define KR_MAX_COMPOSITE_WORKERS 16

typedef struct kr_composite_stage_params {
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    keyer_composite_params composite; /* the session's */
    int threads;                /* CPU threads, shared by the workers */
    int workers;                /* 1 .. KR_MAX_COMPOSITE_WORKERS */
    int max_streams;
    const keyer_frame *still;   /* still background in host memory, or NULL (not owned) */
    const kr_device_fns *dev;   /* non-NULL: CUDA items may come (CUDA streams, device still) */
    int ordinal;
    int capacity;               /* of its input queue */
} kr_composite_stage_params;

typedef struct kr_composite_stage kr_composite_stage;

/** Creates the stage, its queue, its workers' CUDA streams and the device copy of the still
 *  background. Errors: OUT_OF_MEMORY, INTERNAL, DEVICE. */
keyer_status kr_composite_stage_create(const kr_composite_stage_params *params,
                                       kr_composite_stage **out, keyer_error *err);

/** Registers one trace track per worker (named "composite", numbered from 0). */
void kr_composite_stage_trace(kr_composite_stage *cs);

/** Starts the workers' threads. Errors: INTERNAL. */
keyer_status kr_composite_stage_start(kr_composite_stage *cs, keyer_error *err);

/** Stops now: pushes and pops of its queue fail from here on. */
void kr_composite_stage_cancel(kr_composite_stage *cs);

/** Waits for the workers and returns the items still queued to their pools. */
void kr_composite_stage_join(kr_composite_stage *cs);

/** Stops it (when running) and frees it; accepts NULL; sets *cs NULL. */
void kr_composite_stage_destroy(kr_composite_stage **cs);

/** Its input queue. */
kr_queue *kr_composite_stage_queue(const kr_composite_stage *cs);

#endif
