/*
 * The prepare stage of one stream (internal, prefix kr_): numbers the stream's frames, decides
 * where each is computed (CUDA unless the session is on the CPU or the GPU failed), moves the
 * frame there and makes every model's input from it (kr_model_input, in the order given), on
 * one thread per stream. Prepared items go to the first model stage's queue; without one
 * (passthrough without detection) they go straight to the stream's reorder buffer.
 *
 * Frames are numbered here, after the only point where a live input may drop frames, and
 * everything up to refine is FIFO, so refine sees each stream in order.
 *
 * Thread safety: create, start, join and destroy from the stream's owner.
 */
#ifndef KEYER_PIPELINE_PREPARE_H
#define KEYER_PIPELINE_PREPARE_H

#include <stdatomic.h>

#include "pipeline/model_stage.h"
#include "pipeline/reorder.h"

typedef struct kr_prepare_stage_params {
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    int stream;                 /* the stream's id */
    kr_queue *in;               /* the stream's ingest queue (not owned) */
    kr_queue *out;              /* the first model stage's queue, or NULL (not owned) */
    kr_reorder *done;           /* the stream's reorder buffer (not owned) */
    int inputs;                 /* model inputs to make, in this order */
    kr_model_input input[KR_ITEM_MAX_INPUTS];
    int use_cuda;               /* items are computed on CUDA (until a GPU failure) */
    const kr_device_fns *dev;   /* with use_cuda */
    int ordinal;
    void *cuda_stream;          /* the stream's prepare CUDA stream (not owned) */
    int threads;                /* CPU threads an input with threads 0 shares ... */
    atomic_int *streams;        /* ... with this many streams (read when first needed) */
} kr_prepare_stage_params;

typedef struct kr_prepare_stage kr_prepare_stage;

/** Creates the stage (its preparation objects are made on first use). Errors: OUT_OF_MEMORY. */
keyer_status kr_prepare_stage_create(const kr_prepare_stage_params *params,
                                     kr_prepare_stage **out, keyer_error *err);

/** Starts its thread. Errors: INTERNAL. */
keyer_status kr_prepare_stage_start(kr_prepare_stage *ps, keyer_error *err);

/** Waits for its thread (it ends when its input queue is closed and empty, or cancelled). */
void kr_prepare_stage_join(kr_prepare_stage *ps);

/** Joins it and frees it; accepts NULL; sets *ps NULL. */
void kr_prepare_stage_destroy(kr_prepare_stage **ps);

#endif
