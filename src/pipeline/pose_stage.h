/*
 * The session's pose stage (keyer_session_params::pose; internal, prefix kr_pose_stage_): a
 * BlazePose landmark model (pose-lite, -full or -heavy) run as a model stage (model_stage.h)
 * after the detector, on the body crops of all items of a batch, across streams.
 *
 * Per stream it keeps a tracker made with kr_pose_create_external() (vision/pose_steps.h),
 * so that the seeding (from the best of the item's face detections, else the whole frame
 * letterboxed), the crops tracked from the previous frame's auxiliary landmarks, the heatmap
 * refinement and the results are those of keyer_pose_run(). A stream's frames depend on each
 * other (tracking), so a batch is run in rounds of at most one frame per stream (the rounds,
 * the retry on the CPU and the passes' runs are crop_rounds.h's, the model stage, crops and
 * buffers crop_stage.h's, shared with the face mesh and the people stage);
 * each round runs as few passes as its frames allow: the seeding crops and the tracked crops
 * together, then the final crops of the frames just seeded (a frame is tracked, or seeded
 * and found empty, in one pass; only a frame seeded with a person takes two, and the frames
 * over after the first pass go on to the next stage before the second: kr_rounds_finish).
 * The crops are
 * made by keyer_prepare from the frames where they are (render's CUDA prepare kernel for CUDA
 * items: a batch of rotated regions, letterboxed as on the CPU, straight into the runtime's
 * input); on CUDA a pass's crops run through one runtime (the smallest power of two holding
 * them, padded), the landmarks are refined from the heatmaps on the device
 * (vision/pose_heatmap.h) and only the landmarks, the presence and the world landmarks (313
 * floats per crop) come to the host, into page-locked memory, with one wait of the host per
 * pass; the tracker takes them there. Each item's result goes into the item (kr_item::pose)
 * for the sink's pose_fn.
 *
 * CPU items are cropped and run on the CPU exactly as keyer_pose_run() does (same
 * preparation, batch 1 runtimes at the session's CPU batch of 1; at a larger batch the runtime
 * of the largest power of two not above the crops left). CUDA items with a CPU-only
 * model are cropped on the GPU and their crops come down. After a GPU failure the round
 * moves to the CPU: its streams lose their tracking for that frame (seeded again, as after
 * keyer_pose_reset()).
 *
 * Thread safety: set-up from the session's thread; the stage runs on its own thread.
 */
#ifndef KEYER_PIPELINE_POSE_STAGE_H
#define KEYER_PIPELINE_POSE_STAGE_H

#include "pipeline/crop_rounds.h"
#include "pipeline/model_stage.h"

typedef struct kr_pose_stage_params {
    int model;                   /* keyer_pose_model */
    int max_streams;             /* stream ids are below this */
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    int threads;                 /* CPU threads of its runtimes and crops */
    keyer_precision precision;   /* the session's; AUTO is resolved for the model here */
} kr_pose_stage_params;

typedef struct kr_pose_stage kr_pose_stage;

/**
 * Loads the landmark model (the registry's "pose-lite", "pose-full" or "pose-heavy") and
 * checks its input ([1,S,S,3] float) and outputs (39 x 5 landmarks, a presence, 39 x 3 world
 * landmarks, [1,h,w,39] heatmaps, [1,H,W,1] segmentation). Errors (prefixed "pose
 * landmarks: "): INVALID_ARGUMENT, IO, BAD_DATA, OUT_OF_MEMORY.
 */
keyer_status kr_pose_stage_create(const kr_pose_stage_params *params, kr_pose_stage **out,
                                  keyer_error *err);

/** Frees it, its model stage and its trackers; accepts NULL; sets *ps NULL. */
void kr_pose_stage_destroy(kr_pose_stage **ps);

/** Its model stage (owned by it). */
kr_model_stage *kr_pose_stage_model(kr_pose_stage *ps);

/** The landmark model's registry name. */
const char *kr_pose_stage_name(const kr_pose_stage *ps);

/**
 * Finished items go to @p next (the next model stage's queue), or with NULL straight to their
 * stream's reorder buffer (passthrough). Makes the crops' buffers for @p batch frames (the
 * stage's batch) and, when the session computes on CUDA (@p dev not NULL), the preparation's
 * CUDA side on the stage's stream, the device buffer of the gathered outputs and, with
 * @p hybrid (CUDA items, CPU runtimes), a device buffer for the crops. Call after the stage
 * is opened, before it starts. Errors: OUT_OF_MEMORY, DEVICE.
 */
keyer_status kr_pose_stage_connect(kr_pose_stage *ps, kr_queue *next, const kr_device_fns *dev,
                                   int ordinal, int hybrid, int batch, keyer_error *err);

/** Its rounds (NULL before connect): their counters for the session's report. */
const kr_rounds *kr_pose_stage_rounds(const kr_pose_stage *ps);

#endif
