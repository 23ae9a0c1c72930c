/*
 * The session's detector (keyer_session_params::detect; internal, prefix kr_): a BlazeFace
 * model run as a model stage (model_stage.h) batched across streams. Its input is made by
 * each stream's prepare next to the keying input; its outputs are decoded into each item's
 * detections (anchors, weighted NMS, letterbox removed, frame pixels).
 *
 * Per batch on CUDA: the frames' inputs are gathered into the runtime's input, the graph is
 * replayed, and only the raw outputs (896 x 17 floats per frame for face-short, 61 KB) come to
 * the host, where they are decoded. The frames never leave the GPU.
 *
 * Thread safety: set-up from the session's thread; the stage runs on its own thread.
 */
#ifndef KEYER_PIPELINE_DETECT_H
#define KEYER_PIPELINE_DETECT_H

#include "pipeline/model_stage.h"

typedef struct kr_detect_params {
    int full;                    /* face-full (else face-short) */
    float min_score;             /* > 0: replaces the model's default score threshold */
    int slot;                    /* the items' input slot of its input */
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    kr_batch_counters *counters; /* NULL: its batches are not counted */
    int threads;                 /* CPU threads of its runtimes */
    int fail_cuda_at;            /* KEYER_FAIL_CUDA_AT_FRAME, -1: off */
    keyer_precision precision;   /* the session's; AUTO is resolved for the model here */
} kr_detect_params;

typedef struct kr_detect kr_detect;

/**
 * Loads the detector and checks its input ([1,H,W,3] float) and outputs (boxes and scores
 * per anchor). Errors (prefixed "detection: " where they concern the file): INVALID_ARGUMENT,
 * IO, BAD_DATA, OUT_OF_MEMORY.
 */
keyer_status kr_detect_create(const kr_detect_params *params, kr_detect **out,
                              keyer_error *err);

/** Frees it and its stage; accepts NULL; sets *det NULL. */
void kr_detect_destroy(kr_detect **det);

/** Its model stage (owned by it). */
kr_model_stage *kr_detect_stage(kr_detect *det);

/** The detector's name ("face-short", "face-full"). */
const char *kr_detect_name(const kr_detect *det);

/** The precision of its CUDA runtimes (F32 or F16; its CPU runtimes are F32). */
keyer_precision kr_detect_cuda_precision(const kr_detect *det);

/**
 * Finished items go to @p next (the keying model's queue), or with NULL straight to their
 * stream's reorder buffer (passthrough). With @p dev (its CUDA runtimes exist, on device
 * @p ordinal of that table) it makes the host buffer of a batch's raw outputs for @p batch
 * frames, page-locked when the table can. Call before the stage starts.
 * Errors: OUT_OF_MEMORY, DEVICE.
 */
keyer_status kr_detect_connect(kr_detect *det, kr_queue *next, const kr_device_fns *dev,
                               int ordinal, int batch, keyer_error *err);

#endif
