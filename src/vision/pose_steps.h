/*
 * The steps of keyer_pose_run() for a caller that runs the pose landmark model itself
 * (internal, prefix kr_): the session's pose stage (src/pipeline/pose_stage.c) batches the
 * crops of many streams on the GPU and hands each crop's outputs back here, so that the
 * seeding, the crop tracking (MediaPipe's pose_landmarks_to_roi from the auxiliary
 * landmarks), the heatmap refinement and the result are exactly those of keyer_pose_run(),
 * which runs the same steps with its own model one crop at a time.
 *
 * One frame:
 *   if (!kr_pose_begin(pose, w, h, &result, &roi)) {       0: the frame is seeded
 *       face = kr_pose_seed(pose, best_face_or_NULL, &result, &roi)
 *       run the model on roi (face 0: the whole frame letterboxed; roi is then all zero)
 *       if (!kr_pose_add_seed(pose, &outputs, &geo, &result, &roi))
 *           done (no person)
 *   }
 *   run the model on roi
 *   kr_pose_add_final(pose, &roi, &outputs, &geo, &result)   done
 *
 * @c geo is where the crop went (keyer_prepare_run's geometry; the preparation letterboxes,
 * as keyer_pose_run's does). On an error between the steps the caller drops the tracking
 * state with keyer_pose_reset(), as keyer_pose_run() does.
 *
 * Thread safety: one tracker is used by one thread at a time.
 */
#ifndef KEYER_VISION_POSE_STEPS_H
#define KEYER_VISION_POSE_STEPS_H

#include "keyer/pose.h"

/** Landmarks the model emits (33 + 2 auxiliary + 4 unused). */
#define KR_POSE_MODEL_POINTS 39

/** The model's input and output grids, for a tracker without a model. */
typedef struct kr_pose_shape {
    int width, height;   /* the model's input (square) */
    int heat_w, heat_h;  /* heatmap grid */
    int seg_w, seg_h;    /* segmentation grid */
} kr_pose_shape;

/** One run's outputs on one crop (read-only; the steps copy what they keep). */
typedef struct kr_pose_outputs {
    const float *points; /* 39 x 5: x, y (tensor pixels), z, visibility and presence logits */
    float presence;      /* the model's pose presence */
    const float *world;  /* 39 x 3 world landmarks */
    const float *heat;   /* heat_h x heat_w x 39 heatmap logits; NULL: x, y are refined
                          * already (or refinement is off) */
    const float *seg;    /* seg_h x seg_w segmentation logits; NULL: no mask kept */
} kr_pose_outputs;

/**
 * A tracker with no models of its own (only the steps below may run it; keyer_pose_run()
 * refuses it): @p params as for keyer_pose_create() (the model names, backend and threads
 * are ignored; seed_from_face says whether the faces handed to kr_pose_seed() are used),
 * @p shape the model's grids. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY.
 */
keyer_status kr_pose_create_external(const keyer_pose_params *params, const kr_pose_shape *shape,
                                     keyer_pose **out, keyer_error *err);

/** Starts a frame of @p width x @p height (clears *@p out). Returns 1 with the tracked crop in
 *  *@p roi, or 0 when the frame must be seeded. */
int kr_pose_begin(keyer_pose *pose, int width, int height, keyer_pose_result *out,
                  keyer_roi *roi);

/** Seeds the frame from @p face (the frame's best face, or NULL): returns 1 with the body
 *  crop it gives in *@p roi, or 0 with *@p roi zeroed (the whole frame). */
int kr_pose_seed(keyer_pose *pose, const keyer_detection *face, keyer_pose_result *out,
                 keyer_roi *roi);

/** The seeding run's outputs: returns 1 with the crop of the frame's final run in *@p roi,
 *  or 0 when no person was found (the frame is done). */
int kr_pose_add_seed(keyer_pose *pose, const kr_pose_outputs *o,
                     const keyer_prepare_geometry *geo, keyer_pose_result *out, keyer_roi *roi);

/** The final run's outputs on @p roi: the frame's result in *@p out; the next frame's crop
 *  is kept. */
void kr_pose_add_final(keyer_pose *pose, const keyer_roi *roi, const kr_pose_outputs *o,
                       const keyer_prepare_geometry *geo, keyer_pose_result *out);

#endif
