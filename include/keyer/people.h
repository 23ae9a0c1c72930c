/**
 * @file keyer/people.h
 * @brief Keying people at any distance, several at once: MediaPipe's person detector on the
 *        whole frame, a rotated crop per person, the BlazePose landmark model's body mask per
 *        crop (batched over the people), and the masks warped back and combined (maximum)
 *        into one mask of the frame, smoothed over time per tracked person.
 *
 * The selfie models see one person near the camera; on street footage, where people are a
 * few percent of the frame, they key noise. This object is what `--model people` runs
 * (keyer/keying.h, the main job).
 *
 * Per frame, keyer_people_run():
 *  1. Detection. pose_detection.tflite ("pose-detect") on the whole frame letterboxed into
 *     224x224 ([-1,1]), decoded by keyer_detector (keyer_detector_params_pose(): 2254 anchors,
 *     box + 4 keypoints, weighted NMS), detections with score >= min_score. The detector's
 *     box is the head (MediaPipe's detector finds a person by the face, with the hips and the
 *     body's size as keypoints), so a person 100 pixels tall in a 768x576 frame has a head of
 *     3 input pixels: too small. With @c tiles on, the detector also runs on square tiles of
 *     the frame (side tile_size, or half the frame's short side when that is at least twice
 *     the detector's input; overlapping, at most 3/4 of a tile apart), and the detections of
 *     all regions are merged: best first, one whose hips (keypoint 0) lie within 0.3 body radii
 *     (|kp1 - kp0|) of a better one's is the same person and dropped. The detector's box is of
 *     almost constant size (about a fifth of its input), so the weighted NMS inside each region
 *     merges boxes at IoU > 0.6 (MediaPipe's single-person graph: 0.3, which merges two people
 *     walking side by side). The best max_people are kept.
 *  2. Tracking. The detections go through a keyer_tracker (IoU association, min_hits 1,
 *     max_misses as given) whose ids name the people. A person followed on the previous frame
 *     (landmark presence >= min_presence) takes its crop from its previous landmarks (the
 *     auxiliary landmarks 33 and 34, as MediaPipe tracks a pose), also through frames where
 *     the detector misses it (up to max_misses); a new person takes it from the detection:
 *     centre = keypoint 0 (hips), side = 2 |kp1 - kp0| * roi_scale, rotated so that kp0 -> kp1
 *     points up (MediaPipe's pose_detection_to_roi).
 *  3. Landmarks. The landmark model (lite, full or heavy) runs on the crops, up to @c batch
 *     crops per inference. A crop whose presence is below min_presence gives no person and its
 *     person loses its landmark crop (the next frame starts from its detection again). When
 *     that crop came from the previous landmarks and the detector finds the person in this
 *     frame, the model runs once more on the detection's crop in the same frame; a person
 *     matched to a detection of this frame keeps its crop's body mask (step 4) even at low
 *     presence (the detector sees a person the landmark model half sees), without being
 *     listed among the frame's people.
 *  4. Mask. The segmentation output's sigmoid (in the crop's 256x256 grid), where it is weak
 *     combined with the fallback model's mask of the same crop, and on a detected person's
 *     crop with that mask's person-sized regions (see fallback_model), is
 *     blended with the
 *     same person's mask of the previous frame, resampled into the new crop:
 *     m = p + (q - p) * track_smoothing * u(p), with u MediaPipe's uncertainty (1 at p = 0.5,
 *     0 at 0 and 1), as MediaPipe's SegmentationSmoothingCalculator does on a whole frame.
 * keyer_people_mask() then warps every person's mask back into the frame (bilinear, 0 outside
 * the crop) and keeps the maximum: the person mask to refine and composite.
 *
 * @code
 * keyer_people_params p = keyer_people_params_defaults();
 * keyer_people *pp = NULL;
 * if (keyer_people_create(&p, &pp, &err)) die(err.message);
 * for each frame:
 *     keyer_person people[16]; int n = 0;
 *     if (keyer_people_run(pp, frame, people, 16, &n, &err)) die(err.message);
 *     keyer_people_mask(pp, mask, &err);      // GRAYF32 or GRAY8, any size, the whole frame
 * keyer_people_destroy(&pp);
 * @endcode
 *
 * Frames are host frames (RGB24, RGBA, NV12, YUV420P, P010), or with backend CUDA also frames
 * in CUDA memory of the parameters' device (complete: no work pending on them): the crops
 * are then made on the device straight into the networks' inputs, and only the networks'
 * outputs come to the host; host frames on CUDA go through host staging. The networks run on
 * the parameters' backend. Everything is allocated at create;
 * run and mask allocate nothing. One object per stream, one thread at a time.
 */
#ifndef KEYER_PEOPLE_H
#define KEYER_PEOPLE_H

#include <stdint.h>

#include "keyer/detect.h"
#include "keyer/effects.h"
#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/nn.h"
#include "keyer/pose.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most people one object follows (max_people's upper bound). */
#define KEYER_PEOPLE_MAX 64
/** The keying model name that selects this keyer (keyer_keying_params::model, `--model`). */
#define KEYER_PEOPLE_MODEL "people"
/** Side of the square people mask the keying chain and the main job make (stretched over the
 *  frame) and refine into the matte. */
#define KEYER_PEOPLE_MASK_SIDE 640

/** Parameters. Initialise with keyer_people_params_defaults(). */
typedef struct keyer_people_params {
    keyer_pose_model model;       /**< landmark model (default FULL) */
    const char *landmark_model;   /**< registry name or file; NULL: the model's registry name */
    const char *detector_model;   /**< registry name or file; NULL: "pose-detect" */
    keyer_backend backend;        /**< of both networks (default CPU) */
    int device;                   /**< CUDA device of the cuda backend (default 0) */
    int threads;                  /**< CPU threads, 0: all cores (default 0) */
    float min_score;              /**< detections below are dropped (0.5) */
    float min_presence;           /**< landmark presence below: no person (0.5) */
    int max_people;               /**< people keyed per frame, 1..KEYER_PEOPLE_MAX (16) */
    int batch;                    /**< crops per landmark inference, 1..16 (4) */
    int max_misses;               /**< frames a person is followed by its landmarks without a
                                       detection, 0..30 (5) */
    float roi_scale;              /**< crop side / (2 |kp1 - kp0|), 1..4 (1.25, MediaPipe's) */
    float track_smoothing;        /**< weight of a person's previous mask, 0..0.99 (0.7,
                                       MediaPipe's combine_with_previous_ratio); 0: off */
    int tiles;                    /**< 1: the detector also runs on tiles (see overview) (1) */
    int tile_size;                /**< tile side in pixels; 0: automatic (default 0) */
    const keyer_logger *logger;   /**< NULL: default */
    /** Segmentation model run on a person's crop when the landmark model's body mask there is
     *  weak (fewer than weak_mask of the crop's cells at or above 0.5: a person the landmark
     *  model half sees, far away, occluded or lying), its mask combined with the body mask
     *  (maximum) in the crop's grid. It also runs on the crop of every person matched to a
     *  detection of this frame, and there only its connected regions (cells >= 0.5) of at
     *  least 0.3 times the body mask's cells are combined: a second person the one detection
     *  holds (two people walking side by side, of whom the landmark model follows one) and
     *  the parts of the silhouette the body mask misses, not the model's small blobs.
     *  A model with a [1,H,W,3] input in [0,1] and an output of
     *  H x W person probabilities, run on the same rotated crop (letterboxed). Registry name
     *  or file; NULL: "selfie"; "none": no fallback (neither use). */
    const char *fallback_model;
    float weak_mask;              /**< 0..1 (0.04; a standing person fills about 9% of the
                                       crop); 0: no fallback at all */
    void *reserved[2];            /**< zero (fallback_model and weak_mask took 2 of 4) */
} keyer_people_params;

/** Defaults as documented in ::keyer_people_params. */
keyer_people_params keyer_people_params_defaults(void);

/** One person keyed in a frame. */
typedef struct keyer_person {
    uint32_t id;          /**< the tracker's id: stable while the person is followed */
    float score;          /**< detector score of this frame's matched detection, 0 when the
                               person was followed without one */
    float presence;       /**< landmark model's pose presence */
    int from_landmarks;   /**< 1: the crop came from the previous frame's landmarks */
    keyer_roi roi;        /**< the crop, frame pixels */
    float box[4];         /**< keyer_person_box() of the matched detection, or the crop's
                               axis-aligned bounds when none */
    float body[4];        /**< bounds of the 33 body landmarks (xmin, ymin, xmax, ymax, frame
                               pixels): the person's extent as the landmark model sees it (the
                               top of the head lies above the eyes and ears, so a little
                               outside) */
} keyer_person;

/** Width / height of keyer_person_box() for an upright person: 0.41, the aspect ratio to
 *  which pedestrian benchmarks (Caltech Pedestrians, CityPersons) standardise person boxes. */
#define KEYER_PERSON_BOX_ASPECT 0.41f

/**
 * The whole person's box (xmin, ymin, xmax, ymax) from a pose detection (frame pixels, as
 * keyer_people_detect() gives them). The detector's own box is not the person's extent (it is
 * of almost constant size, about a fifth of its input); its keypoints are: keypoint 0 is the
 * hips' centre and keypoint 1 lies on the circle around the whole body centred there
 * (MediaPipe's full-body alignment points). The person is taken as the rectangle centred on
 * the hips, 2 |kp1 - kp0| long along kp0 -> kp1 and KEYER_PERSON_BOX_ASPECT times that wide;
 * the box is its axis-aligned bounds. A detection with fewer than 2 keypoints gives its box.
 */
void keyer_person_box(const keyer_detection *d, float box[4]);

/** A people keyer. Opaque. */
typedef struct keyer_people keyer_people;

/**
 * Loads both models and creates their runtimes (landmarks: batch 1 and @c batch), input
 * preparation, detector decoding and tracker. Errors: INVALID_ARGUMENT (a parameter out of
 * range), IO (a model file missing), BAD_DATA (not a pose detector / BlazePose landmark model),
 * UNSUPPORTED, OUT_OF_MEMORY, DEVICE.
 */
keyer_status keyer_people_create(const keyer_people_params *params, keyer_people **out,
                                 keyer_error *err);

/** Frees; accepts NULL and *people == NULL; sets it to NULL. */
void keyer_people_destroy(keyer_people **people);

/**
 * Finds and keys the people of @p frame (see the overview); writes at most @p capacity of
 * them to @p out (may be NULL with capacity 0) and how many to *count. No one found is not an
 * error. Errors: INVALID_ARGUMENT (NULL, a frame failing keyer_frame_check or of another
 * format), UNSUPPORTED (a CUDA frame with the CPU backend), inference errors (DEVICE,
 * INTERNAL); on error the tracking is dropped.
 */
keyer_status keyer_people_run(keyer_people *people, const keyer_frame *frame,
                              keyer_person *out, int capacity, int *count, keyer_error *err);

/**
 * keyer_people_run() with the whole-frame detection done by the caller: @p dets (@p n_dets of
 * them, frame pixels, as keyer_people_detect() or the pose detector's outputs decoded with
 * keyer_detector_params_pose() and keyer_detections_to_pixels() give them; those under
 * min_score are ignored; NULL with 0: none) replace the whole-frame pass; the tiles (when on)
 * still run here. Lets a pipeline batch the whole-frame detector across streams.
 * Errors: as keyer_people_run().
 */
keyer_status keyer_people_run_detections(keyer_people *people, const keyer_frame *frame,
                                         const keyer_detection *dets, int n_dets,
                                         keyer_person *out, int capacity, int *count,
                                         keyer_error *err);

/**
 * The detector alone on @p frame: detections with score >= min_score in frame pixels (boxes
 * and the 4 keypoints), best first, at most @p capacity; *count gets how many. Does not touch
 * the tracking. Errors: as keyer_people_run().
 */
keyer_status keyer_people_detect(keyer_people *people, const keyer_frame *frame,
                                 keyer_detection *out, int capacity, int *count,
                                 keyer_error *err);

/**
 * Writes the people mask of the last keyer_people_run() into @p mask, a host GRAYF32 (0..1)
 * or GRAY8 (0..255) frame of any size covering the whole analysed frame (mask pixel (i, j)
 * samples frame point ((i + 0.5) * W / w, (j + 0.5) * H / h)): the maximum over the people of
 * their masks warped back through their crops. All zero when no one was found.
 * Errors: INVALID_ARGUMENT (NULL, a bad frame or format, no frame analysed yet).
 */
keyer_status keyer_people_mask(const keyer_people *people, keyer_frame *mask, keyer_error *err);

/** Forgets every person (a new clip, a seek). NULL accepted. */
void keyer_people_reset(keyer_people *people);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_PEOPLE_H */
