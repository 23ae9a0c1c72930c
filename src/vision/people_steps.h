/*
 * The steps of keyer_people_run() for a caller that runs the landmark model itself (internal,
 * prefix kr_): the session's people stage (src/pipeline/people_stage.c) batches the people's
 * crops of many streams on the GPU and hands each crop's outputs back here, so that the
 * detection, tracking, crops, masks and their smoothing are exactly those of
 * keyer_people_run(), which runs the same steps with its own landmark runtimes.
 *
 * One frame:
 *   kr_people_begin(k, frame, dets, n, &jobs, &err)      detection (+ tiles), tracking, crops
 *   for each job i < jobs: run the model on kr_people_job(k, i, &roi) (its crop of @c frame,
 *       letterboxed as keyer_prepare does) and hand its outputs to kr_people_add(k, i, ...)
 *   retries = kr_people_retries(k)                         crops that lost their person, from
 *   for each job i < retries: the same                     their detections (a second pass)
 *   keyer_people_mask(k, mask, &err)
 * The jobs of one pass do not depend on each other (any order). On an error between the steps
 * the caller drops the tracking state with keyer_people_reset(), as keyer_people_run() does.
 *
 * Thread safety: one object is used by one thread at a time.
 */
#ifndef KEYER_VISION_PEOPLE_STEPS_H
#define KEYER_VISION_PEOPLE_STEPS_H

#include "keyer/people.h"

/**
 * A people keyer with no landmark runtimes of its own (only the steps below run its crops;
 * keyer_people_run() refuses it): @p params as for keyer_people_create() (its detector, for
 * the tiles, and the fallback model are made as there; the landmark model is read for its
 * grids only). Errors: as keyer_people_create().
 */
keyer_status kr_people_create_external(const keyer_people_params *params, keyer_people **out,
                                       keyer_error *err);

/** The landmark model's input side (square) and segmentation grid of @p k. */
void kr_people_grids(const keyer_people *k, int *input, int *seg_w, int *seg_h);

/**
 * Starts a frame: detection (the caller's whole-frame detections @p dets, frame pixels as
 * keyer_people_run_detections() takes them, and the tiles), tracking and this frame's crops;
 * their number in *@p jobs (0 .. max_people). Errors: as keyer_people_run_detections() (the
 * tracking state is then dropped).
 */
keyer_status kr_people_begin(keyer_people *k, const keyer_frame *frame,
                             const keyer_detection *dets, int n_dets, int *jobs,
                             keyer_error *err);

/** Job @p i's crop (frame pixels) into *@p roi, its frame into *@p frame (the frame given to
 *  kr_people_begin, which must stay valid until the frame's steps end). */
void kr_people_job(const keyer_people *k, int i, keyer_roi *roi, const keyer_frame **frame);

/**
 * The landmark model's outputs on job @p i's crop, made with geometry @p geo: @p points
 * (39 x 5, tensor pixels), the presence @p presence and the segmentation logits @p seg
 * (seg_h x seg_w); read only during the call. Errors: from the fallback model (see
 * keyer_people_params::fallback_model).
 */
keyer_status kr_people_add(keyer_people *k, int i, const float *points, float presence,
                           const float *seg, const keyer_prepare_geometry *geo,
                           keyer_error *err);

/** After every job's kr_people_add(): the crops to run once more (from their detections),
 *  which become jobs 0 .. the returned count - 1 (0: the frame's crops are done). Never
 *  fails. */
int kr_people_retries(keyer_people *k);

#endif
