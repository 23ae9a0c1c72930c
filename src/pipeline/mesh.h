/*
 * The session's face-mesh stage (keyer_session_params::mesh; internal, prefix kr_): the
 * face_landmark model (468 points) run as a model stage (model_stage.h) after the detector,
 * on the crops of all faces of all items of a batch, across streams.
 *
 * Per stream it keeps an analyser made with kr_faces_create_external() (vision/faces_steps.h),
 * so that the crops (from the previous frame's landmarks, or from the item's detections when
 * keyer_faces_run() would detect), the acceptance of faces and the ids are those of
 * keyer_faces_run(). A stream's frames depend on each other (tracking), so a batch is run in
 * rounds of at most one frame per stream (the rounds, the retry on the CPU and the passes'
 * runs are crop_rounds.h's, the model stage, crops and buffers crop_stage.h's, shared with
 * the pose and people stages); each round runs the tracked crops of
 * all its frames, then the detections' crops. The crops are made by keyer_prepare from the
 * frames where they are (render's CUDA prepare kernel for CUDA items: a batch of rotated
 * regions, bilinear or area-averaged as on the CPU, straight into the runtime's input); on
 * CUDA a pass's crops run through the smallest runtimes holding them (padded), only the
 * landmarks and the presence scores (1,405 floats per face) come to the host, into
 * page-locked memory, and the host waits once per pass (or per 4 batches of crops); there the
 * analyser takes them. On the CPU the runtime of the largest power of two not above the crops
 * left runs them.
 * Each item's faces are copied into the item (kr_item::faces) for the sink's faces_fn.
 *
 * CPU items are cropped and run on the CPU exactly as keyer_faces_run() does (same
 * preparation code, batch 1 runtimes at the session's CPU batch of 1). CUDA items with a
 * CPU-only model are cropped on the GPU and their crops come down. After a GPU failure the
 * round moves to the CPU: its streams lose their tracking for that frame (their faces come
 * from the detections, as after keyer_faces_reset()).
 *
 * Thread safety: set-up from the session's thread; the stage runs on its own thread.
 */
#ifndef KEYER_PIPELINE_MESH_H
#define KEYER_PIPELINE_MESH_H

#include "pipeline/crop_rounds.h"
#include "pipeline/model_stage.h"

typedef struct kr_mesh_params {
    int max_faces;               /* faces followed per stream, 1..KEYER_FACES_MAX */
    int detect_interval;         /* keyer_faces_params::detect_interval */
    int max_streams;             /* stream ids are below this */
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    int threads;                 /* CPU threads of its runtimes and crops */
    keyer_precision precision;   /* the session's; AUTO is resolved for the model here */
} kr_mesh_params;

typedef struct kr_mesh kr_mesh;

/**
 * Loads the face mesh ("face-mesh" from the registry) and checks its input ([1,H,W,3] float)
 * and outputs (468 x 3 landmarks, a presence score). Errors (prefixed "face mesh: "):
 * INVALID_ARGUMENT, IO, BAD_DATA, OUT_OF_MEMORY.
 */
keyer_status kr_mesh_create(const kr_mesh_params *params, kr_mesh **out, keyer_error *err);

/** Frees it, its stage and its analysers; accepts NULL; sets *m NULL. */
void kr_mesh_destroy(kr_mesh **m);

/** Its model stage (owned by it). */
kr_model_stage *kr_mesh_stage(kr_mesh *m);

/**
 * Finished items go to @p next (the keying model's queue), or with NULL straight to their
 * stream's reorder buffer (passthrough). Makes the crops' buffers for @p batch frames (the
 * stage's batch) and, when the session computes on CUDA (@p dev not NULL), the preparation's
 * CUDA side on the stage's stream and, with @p hybrid (CUDA items, CPU runtimes), a device
 * buffer for the crops. Call after the stage is opened, before it starts.
 * Errors: OUT_OF_MEMORY, DEVICE.
 */
keyer_status kr_mesh_connect(kr_mesh *m, kr_queue *next, const kr_device_fns *dev, int ordinal,
                             int hybrid, int batch, keyer_error *err);

/** Its rounds (NULL before connect): their counters for the session's report. */
const kr_rounds *kr_mesh_rounds(const kr_mesh *m);

#endif
