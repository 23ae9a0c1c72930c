/*
 * The session's people stage (internal, prefix kr_people_stage_): in people mode
 * (`--model people`) the crops of every person of every stream of a batch go through one
 * pose landmark model run as a model stage (model_stage.h) after the person detector (the
 * keying model stage, infer.c, which leaves each item's whole-frame detections in the item),
 * batched across people and streams.
 *
 * Per stream it keeps a people keyer made with kr_people_create_external()
 * (vision/people_steps.h), so that the detection (the item's detections and the keyer's
 * tiles), tracking, crops, masks and their smoothing are those of keyer_people_run(). A
 * stream's frames depend on each other (tracking), so a batch runs in rounds of at most one
 * frame per stream (crop_rounds.h; the model stage, crops and buffers crop_stage.h's, shared
 * with the face mesh and the pose stage); each round
 * runs every person's crop of its frames in one pass, then the crops that lost their person
 * again from their detections, then each frame's mask (keyer_people_mask) goes into its item.
 *
 * CUDA items (people keyers on CUDA: frames on the device): the crops are made from the
 * device frames straight into the stage's CUDA runtime's input, one padded run per pass, and
 * only the landmarks, presences and segmentation logits come down (page-locked), with one wait
 * of the host per pass; the mask goes up into the item's. Host items: each frame's crops run
 * exactly as keyer_people_run() runs them (chunks of the keyer's batch, the rest one by one,
 * float32 CPU runtimes), so the CPU results are the per-stream keyer's. After a GPU failure a
 * round moves to the CPU: its streams lose their tracking for that frame.
 *
 * Thread safety: set-up from the session's thread; the stage runs on its own thread.
 */
#ifndef KEYER_PIPELINE_PEOPLE_STAGE_H
#define KEYER_PIPELINE_PEOPLE_STAGE_H

#include "keyer/people.h"
#include "pipeline/crop_rounds.h"
#include "pipeline/model_stage.h"

typedef struct kr_people_stage_params {
    keyer_people_params people;  /* the per-stream keyers' (model, backend and device of their
                                  * tile detector and fallback model, thresholds, batch) */
    int max_streams;             /* stream ids are below this */
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    int threads;                 /* CPU threads of its runtimes and crops */
    int mask_w, mask_h;          /* the items' masks (float, whole frame) */
} kr_people_stage_params;

typedef struct kr_people_stage kr_people_stage;

/**
 * Loads the landmark model (the registry's name for params.people.model, or
 * params.people.landmark_model) and checks its input ([1,S,S,3] float) and outputs (39 x 5
 * landmarks, a presence, a [1,H,W,1] segmentation). Errors (prefixed "people landmarks: "):
 * INVALID_ARGUMENT, IO, BAD_DATA, OUT_OF_MEMORY.
 */
keyer_status kr_people_stage_create(const kr_people_stage_params *params,
                                    kr_people_stage **out, keyer_error *err);

/** Frees it, its model stage and its keyers; accepts NULL; sets *ps NULL. */
void kr_people_stage_destroy(kr_people_stage **ps);

/** Its model stage (owned by it). */
kr_model_stage *kr_people_stage_model(kr_people_stage *ps);

/** Its rounds (NULL before connect): their counters for the session's report. */
const kr_rounds *kr_people_stage_rounds(const kr_people_stage *ps);

/**
 * Finished items go to @p next (the refine stage's queue). Makes the crops' buffers for
 * @p batch frames (the stage's batch) and, when the session computes on CUDA (@p dev not
 * NULL), the preparation's CUDA side on the stage's stream, the page-locked outputs and, with
 * @p hybrid (CUDA items, CPU runtimes), a device buffer for the crops. Call after the stage
 * is opened, before it starts. Errors: OUT_OF_MEMORY, DEVICE.
 */
keyer_status kr_people_stage_connect(kr_people_stage *ps, kr_queue *next,
                                     const kr_device_fns *dev, int ordinal, int hybrid,
                                     int batch, keyer_error *err);

#endif
