/**
 * @file keyer/track.h
 * @brief Multi-object tracking with stable ids: IoU association of detections to tracks whose
 *        boxes follow a constant-velocity Kalman filter; tracks are confirmed after
 *        `min_hits` matched frames and removed after `max_misses` unmatched frames.
 *
 * One tracker per stream. keyer_tracker_update() takes the frame's detections and returns the
 * confirmed tracks, with ids that stay the same while an object is followed.
 *
 * @code
 * keyer_tracker_params tp = keyer_tracker_params_defaults();
 * keyer_tracker *t = NULL;
 * keyer_tracker_create(&tp, &t, &err);
 * for each frame:
 *     keyer_track tracks[32]; int n;
 *     keyer_tracker_update(t, dets, n_dets, tracks, 32, &n, &err);
 * keyer_tracker_destroy(&t);
 * @endcode
 *
 * Allocation happens at create (capacity max_tracks); update allocates nothing.
 */
#ifndef KEYER_TRACK_H
#define KEYER_TRACK_H

#include <stdint.h>

#include "keyer/detect.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Tracker settings. */
typedef struct keyer_tracker_params {
    float min_iou;        /**< association needs IoU >= this with the predicted box (0.3) */
    int min_hits;         /**< consecutive matches before a track is reported (3) */
    int max_misses;       /**< frames without a match before a track is removed (5) */
    int max_tracks;       /**< capacity (64) */
    float process_noise;  /**< Kalman process noise on position (relative to box size, 0.05) */
    float measure_noise;  /**< Kalman measurement noise (relative to box size, 0.1) */
    int reserved[4];      /**< zero */
} keyer_tracker_params;

/** Defaults listed above. */
keyer_tracker_params keyer_tracker_params_defaults(void);

/** A tracked object as reported for a frame. */
typedef struct keyer_track {
    uint32_t id;              /**< stable, starts at 1, never reused within a tracker */
    keyer_detection box;      /**< filtered box (keypoints: those of the last matched detection) */
    float vx, vy;             /**< centre velocity in normalised units per frame */
    int age;                  /**< frames since the track was born */
    int misses;               /**< consecutive frames without a matched detection (0 if matched) */
} keyer_track;

typedef struct keyer_tracker keyer_tracker;

/** Creates a tracker. Errors: INVALID_ARGUMENT (ranges), OUT_OF_MEMORY. */
keyer_status keyer_tracker_create(const keyer_tracker_params *params, keyer_tracker **out,
                                  keyer_error *err);

/** Frees a tracker; NULL accepted; sets *t to NULL. */
void keyer_tracker_destroy(keyer_tracker **t);

/**
 * Advances one frame: predicts every track, associates @p dets greedily by descending IoU
 * (pairs with IoU >= min_iou), corrects matched tracks, starts tracks for unmatched detections
 * (while capacity lasts), ages and removes unmatched ones. Writes the confirmed tracks
 * (min_hits reached, including those coasting through misses) to @p out, at most @p capacity,
 * sorted by id; *count gets how many were written.
 * Errors: INVALID_ARGUMENT (NULL pointers with non-zero counts).
 */
keyer_status keyer_tracker_update(keyer_tracker *t, const keyer_detection *dets, int n_dets,
                                  keyer_track *out, int capacity, int *count, keyer_error *err);

/** Forgets every track (e.g. on a scene cut); ids keep increasing. */
void keyer_tracker_reset(keyer_tracker *t);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_TRACK_H */
