/*
 * The steps of keyer_faces_run() for a caller that runs the face mesh itself (internal,
 * prefix kr_): the session's face-mesh stage (src/pipeline/mesh.c) batches the crops of many
 * faces and streams on the GPU and hands each crop's outputs back here, so that tracking,
 * the choice of crops, the acceptance of faces and the ids are exactly those of
 * keyer_faces_run(), which runs the same steps with its own models one crop at a time.
 *
 * One frame:
 *   n = kr_faces_begin(fa, w, h, rois)           crops of the faces followed (their landmarks)
 *   for each of the n crops, in order:  kr_faces_add_tracked(fa, roi, points, logit, geo)
 *   if (kr_faces_wants_detection(fa)) {
 *       k = kr_faces_detection_rois(fa, dets, nd, rois, index)   crops of new detections
 *       for each of the k crops, in order: kr_faces_add_detected(fa, &dets[index[i]], ...)
 *   }
 *   kr_faces_end(fa, &faces, &count, err)         ids; the frame's faces
 *
 * @c points are the mesh's 468 x 3 outputs in tensor pixels, @c logit its presence output
 * (before the sigmoid) and @c geo where the crop went (keyer_prepare_run's geometry of the
 * crop). The adds take their arguments as read-only and copy what they keep.
 *
 * Thread safety: one analyser is used by one thread at a time.
 */
#ifndef KEYER_VISION_FACES_STEPS_H
#define KEYER_VISION_FACES_STEPS_H

#include "keyer/faces.h"

/** Crops the steps need at most per call: max_faces tracked crops, or one per detection
 *  handed to kr_faces_detection_rois() (at most this many). */
#define KR_FACES_MAX_CROPS 64

/**
 * An analyser with landmarks and ids but no models of its own (only the steps below may run
 * it; keyer_faces_run() refuses it as one without a detector). @p params as for
 * keyer_faces_create() (detector, landmarks and the model names are ignored).
 * Errors: as keyer_faces_create() (INVALID_ARGUMENT, OUT_OF_MEMORY).
 */
keyer_status kr_faces_create_external(const keyer_faces_params *params, keyer_faces **out,
                                      keyer_error *err);

/** Starts a frame of @p width x @p height: the previous frame's faces become the tracking
 *  state; writes the crops of the faces followed to @p rois (room for max_faces) and returns
 *  how many. */
int kr_faces_begin(keyer_faces *fa, int width, int height, keyer_roi *rois);

/** The mesh's outputs on the next tracked crop (in the order kr_faces_begin gave them). */
void kr_faces_add_tracked(keyer_faces *fa, const keyer_roi *roi, const float *points,
                          float logit, const keyer_prepare_geometry *geo);

/** 1 when the frame needs the detections (no face followed, one lost, the interval). */
int kr_faces_wants_detection(keyer_faces *fa);

/** Of the @p n detections (frame pixels, best first, n <= KR_FACES_MAX_CROPS), the ones not
 *  followed already with a usable crop: their crops to @p rois, their indices in @p dets to
 *  @p index; returns how many. */
int kr_faces_detection_rois(keyer_faces *fa, const keyer_detection *dets, int n,
                            keyer_roi *rois, int *index);

/** The mesh's outputs on the crop of detection @p d (in the order kr_faces_detection_rois
 *  gave them); dropped when max_faces are found or a face accepted since covers it. */
void kr_faces_add_detected(keyer_faces *fa, const keyer_detection *d, const keyer_roi *roi,
                           const float *points, float logit, const keyer_prepare_geometry *geo);

/** Ends the frame: ids from the tracker; *@p faces, *@p count as keyer_faces_run() gives
 *  them. Errors: those of the tracker (the tracking state is then dropped). */
keyer_status kr_faces_end(keyer_faces *fa, const keyer_face **faces, int *count,
                          keyer_error *err);

#endif
