/*
 * The refine stage (internal, prefix kr_): turns each item's keying mask into the frame-size
 * matte (keyer_refine: thresholds, guided filter, temporal smoothing per stream) on W worker
 * threads, each with its own keyer_refine objects and CUDA stream. Stream s's items all go to
 * worker s % W (a router thread hands them out when W > 1), so each stream's frames are
 * refined in order against its own history. Refined items go to the composite stage's queue
 * (whose streams' reorder buffers restore the order across workers); failed and lost items
 * pass through.
 *
 * Thread safety: set-up and tear-down from the session's thread; the queue from any thread.
 */
#ifndef KEYER_PIPELINE_REFINE_H
#define KEYER_PIPELINE_REFINE_H

#include "keyer/effects.h"
#include "pipeline/item.h"
#include "pipeline/stats.h"

/** Most refine workers. */
#define KR_MAX_REFINE_WORKERS 8

typedef struct kr_refine_stage_params {
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    keyer_refine_params refine; /* of its keyer_refine objects (max_streams, threads set) */
    const kr_device_fns *dev;   /* non-NULL: CUDA items may come (it makes a CUDA stream) */
    int ordinal;
    int slot;                   /* the keying model's input slot (its geometry) */
    int letterbox;              /* the keying input is letterboxed: refine its content only */
    int in_w, in_h;             /* the keying model's input */
    int mask_w, mask_h;         /* and mask */
    int capacity;               /* of its input queue (and each worker's) */
    int workers;                /* 1 .. KR_MAX_REFINE_WORKERS */
    kr_queue *next;             /* the composite stage's queue (not owned) */
} kr_refine_stage_params;

typedef struct kr_refine_stage kr_refine_stage;

/** Creates the stage and its queues (its keyer_refine objects are made on first use).
 *  Errors: INVALID_ARGUMENT (workers out of range), OUT_OF_MEMORY, INTERNAL, DEVICE. */
keyer_status kr_refine_stage_create(const kr_refine_stage_params *params,
                                    kr_refine_stage **out, keyer_error *err);

/** Starts its threads, worker 0's events traced on @p track (the others on tracks of their
 *  own). Errors: INTERNAL. */
keyer_status kr_refine_stage_start(kr_refine_stage *rs, int track, keyer_error *err);

/** Stops now: pushes and pops of its queue fail from here on. */
void kr_refine_stage_cancel(kr_refine_stage *rs);

/** Waits for its threads and returns the items still queued to their pools. */
void kr_refine_stage_join(kr_refine_stage *rs);

/** Stops it (when running) and frees it; accepts NULL; sets *rs NULL. */
void kr_refine_stage_destroy(kr_refine_stage **rs);

/** Its input queue. */
kr_queue *kr_refine_stage_queue(const kr_refine_stage *rs);

#endif
