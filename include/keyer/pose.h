/**
 * @file keyer/pose.h
 * @brief Body pose per video stream with the BlazePose landmark models (lite, full, heavy):
 *        33 keypoints with visibility and presence, world coordinates, optional heatmap
 *        refinement, and the body segmentation mask warped back to the frame for keying;
 *        plus the 35 skeleton connections and a drawing helper.
 *
 * Region of interest. MediaPipe finds the person with its pose detector
 * (pose_detection.tflite) on the first frame and after a loss. keyer reads that file (its
 * sparse weights are densified at load) and keys people with it (keyer/people.h); this
 * single-person tracker seeds itself without it, on the first frame and after a loss
 * ("seeding"):
 *  - with seed_from_face (the default), the full-range face detector looks for faces on the
 *    whole frame; the best face gives a first body crop: the hips 3 face sizes below the face
 *    centre along the face's up direction, the top of the body 3.5 face sizes above the hips,
 *    tilted with the eyes (keyer's own estimate, not MediaPipe's). This matters for close-ups
 *    (webcams, portraits) whose hips are outside the frame: on the whole frame the model then
 *    takes the head and shoulders for a small standing person;
 *  - without a face (or with seed_from_face off), the landmark model runs on the whole frame
 *    letterboxed into its square input.
 * When that pass finds a person (presence >= min_presence), a second pass runs in the same
 * frame on the crop its auxiliary landmarks give. The crop of every later frame comes from the
 * previous frame's auxiliary landmarks 33 (centre) and 34 (size and rotation), as MediaPipe's
 * pose_landmarks_to_roi does: centre = landmark 33, side = 2 |l34 - l33| * roi_scale (1.25),
 * rotation making l33 -> l34 point up.
 *
 * Model outputs (see docs/models.md 3.3): landmarks (39 x 5: x, y,
 * z, visibility and presence logits), the pose presence (already a probability), the
 * segmentation logits (256 x 256), heatmaps (64 x 64 x 39) and world landmarks (39 x 3,
 * metres, origin between the hips).
 *
 * @code
 * keyer_pose_params p = keyer_pose_params_defaults();
 * keyer_pose *pose = NULL;
 * if (keyer_pose_create(&p, &pose, &err)) die(err.message);
 * for each frame:
 *     keyer_pose_result r;
 *     if (keyer_pose_run(pose, frame, &r, &err)) die(err.message);
 *     if (r.found) {
 *         keyer_pose_mask(pose, mask, &err);          // GRAYF32, any size: the body matte
 *         keyer_pose_draw(ov, &r, NULL, &err);        // skeleton and keypoints
 *     }
 * keyer_pose_destroy(&pose);
 * @endcode
 *
 * Coordinates are frame pixels (continuous: pixel i covers [i, i+1)). All memory is
 * allocated at create; keyer_pose_run() and keyer_pose_mask() allocate nothing. Frames must
 * be host frames (RGB24, RGBA, NV12, YUV420P, P010). One object per stream, used by one
 * thread at a time.
 */
#ifndef KEYER_POSE_H
#define KEYER_POSE_H

#include <stdint.h>

#include "keyer/effects.h"
#include "keyer/faces.h"
#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/nn.h"
#include "keyer/overlay.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Body landmarks reported (MediaPipe's 33; the model's 34..39 are internal). */
#define KEYER_POSE_LANDMARKS 33
/** Skeleton connections of keyer_pose_connections(). */
#define KEYER_POSE_CONNECTIONS 35

/** Landmark indices (MediaPipe's order; left/right are the person's). */
typedef enum keyer_pose_landmark_index {
    KEYER_POSE_NOSE = 0,
    KEYER_POSE_LEFT_EYE_INNER, KEYER_POSE_LEFT_EYE, KEYER_POSE_LEFT_EYE_OUTER,
    KEYER_POSE_RIGHT_EYE_INNER, KEYER_POSE_RIGHT_EYE, KEYER_POSE_RIGHT_EYE_OUTER,
    KEYER_POSE_LEFT_EAR, KEYER_POSE_RIGHT_EAR,
    KEYER_POSE_MOUTH_LEFT, KEYER_POSE_MOUTH_RIGHT,
    KEYER_POSE_LEFT_SHOULDER, KEYER_POSE_RIGHT_SHOULDER,
    KEYER_POSE_LEFT_ELBOW, KEYER_POSE_RIGHT_ELBOW,
    KEYER_POSE_LEFT_WRIST, KEYER_POSE_RIGHT_WRIST,
    KEYER_POSE_LEFT_PINKY, KEYER_POSE_RIGHT_PINKY,
    KEYER_POSE_LEFT_INDEX, KEYER_POSE_RIGHT_INDEX,
    KEYER_POSE_LEFT_THUMB, KEYER_POSE_RIGHT_THUMB,
    KEYER_POSE_LEFT_HIP, KEYER_POSE_RIGHT_HIP,
    KEYER_POSE_LEFT_KNEE, KEYER_POSE_RIGHT_KNEE,
    KEYER_POSE_LEFT_ANKLE, KEYER_POSE_RIGHT_ANKLE,
    KEYER_POSE_LEFT_HEEL, KEYER_POSE_RIGHT_HEEL,
    KEYER_POSE_LEFT_FOOT_INDEX, KEYER_POSE_RIGHT_FOOT_INDEX,
} keyer_pose_landmark_index;

/** Which landmark model runs. */
typedef enum keyer_pose_model {
    KEYER_POSE_MODEL_LITE = 0, /**< "pose-lite" */
    KEYER_POSE_MODEL_FULL,     /**< "pose-full" */
    KEYER_POSE_MODEL_HEAVY,    /**< "pose-heavy" */
} keyer_pose_model;
KEYER_OPTION_ENUM_CHECK(keyer_pose_model);

/** Parameters. Initialise with keyer_pose_params_defaults(). */
typedef struct keyer_pose_params {
    keyer_pose_model model;   /**< default LITE */
    const char *model_path;   /**< registry name or file; NULL: the model's registry name */
    keyer_backend backend;    /**< default CPU */
    int threads;              /**< CPU threads, 0: all cores (default 0) */
    float min_presence;       /**< pose presence below this: no pose, tracking lost (0.5) */
    float roi_scale;          /**< crop side / (2 |l34 - l33|) (1.25, MediaPipe's) */
    int refine_heatmap;       /**< 1: refine x, y from the heatmaps as MediaPipe does (7x7
                                   window, confidence >= 0.5) (default 1) */
    int segmentation;         /**< 1: keep the body mask for keyer_pose_mask() (default 1) */
    int seed_from_face;       /**< 1: seed the crop from the best face (see above) (default 1) */
    const char *face_model;   /**< face detector for seeding: registry name or file; NULL:
                                   "face-full" (full range) */
    const keyer_logger *logger; /**< NULL: default */
    void *reserved[4];        /**< zero */
} keyer_pose_params;

/** Defaults as documented in ::keyer_pose_params. */
keyer_pose_params keyer_pose_params_defaults(void);

/** One landmark in frame coordinates. */
typedef struct keyer_pose_landmark {
    float x, y;        /**< frame pixels */
    float z;           /**< depth relative to the hips, pixels at the scale of x; smaller is nearer */
    float visibility;  /**< probability that the point is visible (not occluded) */
    float presence;    /**< probability that the point is inside the frame */
} keyer_pose_landmark;

/** Result of one frame. */
typedef struct keyer_pose_result {
    int found;                /**< 1: a person (presence >= min_presence); else the rest is 0 */
    float presence;           /**< pose presence probability */
    int seeded;               /**< 1: this frame started afresh (first frame or after a loss):
                                   2: from a face, 1: from the whole frame */
    keyer_roi roi;            /**< the crop the landmarks come from */
    keyer_pose_landmark landmarks[KEYER_POSE_LANDMARKS];
    float world[KEYER_POSE_LANDMARKS][3]; /**< metres, origin between the hips, rotated into the
                                               frame's orientation */
} keyer_pose_result;

/** Counters since create. */
typedef struct keyer_pose_stats {
    int64_t frames;     /**< keyer_pose_run() calls */
    int64_t inferences; /**< model runs (seeded frames take two) */
    int64_t seeds;      /**< frames that started afresh (first frame, after a loss) */
    int64_t face_seeds; /**< ... of which started from a face */
} keyer_pose_stats;

/** A pose tracker. Opaque. */
typedef struct keyer_pose keyer_pose;

/**
 * Loads the model and creates its runtime and input preparation. Errors: INVALID_ARGUMENT,
 * IO (model file missing), BAD_DATA (not a BlazePose landmark model: wrong input or outputs),
 * UNSUPPORTED, OUT_OF_MEMORY, DEVICE.
 */
keyer_status keyer_pose_create(const keyer_pose_params *params, keyer_pose **out,
                               keyer_error *err);

/** Frees; accepts NULL and *pose == NULL; sets *pose to NULL. */
void keyer_pose_destroy(keyer_pose **pose);

/**
 * Finds the pose in @p frame (see the overview) into @p out. Not finding a person is not an
 * error (out->found = 0; the next frame starts from the whole frame).
 * Errors: INVALID_ARGUMENT (NULL, a frame failing keyer_frame_check or of an unsupported
 * format), UNSUPPORTED (a CUDA frame), inference errors (DEVICE, INTERNAL); on error the
 * tracking state is dropped.
 */
keyer_status keyer_pose_run(keyer_pose *pose, const keyer_frame *frame, keyer_pose_result *out,
                            keyer_error *err);

/**
 * Writes the body mask of the last keyer_pose_run() into @p mask, a host GRAYF32 (values
 * 0..1) or GRAY8 (0..255) frame of any size covering the whole analysed frame (mask pixel
 * (i, j) samples frame point ((i + 0.5) * W / w, (j + 0.5) * H / h)): the sigmoid of the
 * model's segmentation output, warped back through the crop (bilinear, 0 outside the crop),
 * so it can be passed to keyer_refine_run() as the person mask. All zero when no person was
 * found. Errors: INVALID_ARGUMENT (NULL, a bad frame or format, segmentation off, no frame
 * analysed yet).
 */
keyer_status keyer_pose_mask(const keyer_pose *pose, keyer_frame *mask, keyer_error *err);

/** Forgets the tracked crop: the next frame starts from the whole frame. NULL accepted. */
void keyer_pose_reset(keyer_pose *pose);

/** Counters since create. Errors: INVALID_ARGUMENT. */
keyer_status keyer_pose_get_stats(const keyer_pose *pose, keyer_pose_stats *out,
                                  keyer_error *err);

/**
 * The 35 BlazePose skeleton connections as landmark index pairs: a static array of
 * 2 * KEYER_POSE_CONNECTIONS ints; *count (if non-NULL) receives KEYER_POSE_CONNECTIONS.
 */
const int *keyer_pose_connections(int *count);

/** What keyer_pose_draw() draws. Initialise with keyer_pose_draw_params_defaults(). */
typedef struct keyer_pose_draw_params {
    int skeleton;            /**< the 35 connections (default 1) */
    int keypoints;           /**< the 33 landmarks as dots (default 1) */
    float min_visibility;    /**< landmarks below are hidden with their connections (0.5) */
    float line_width;        /**< pixels (default 3) */
    float point_radius;      /**< pixels (default 4) */
    keyer_color line_color;  /**< default white */
    keyer_color left_color;  /**< person's left side points, default orange */
    keyer_color right_color; /**< right side points, default cyan; centre points use line_color */
    int reserved[4];
} keyer_pose_draw_params;

/** Defaults as documented in ::keyer_pose_draw_params. */
keyer_pose_draw_params keyer_pose_draw_params_defaults(void);

/**
 * Adds the pose to the overlay (nothing when result->found is 0), all or nothing.
 * Errors: INVALID_ARGUMENT (NULL, bad params), OUT_OF_MEMORY (capacity).
 */
keyer_status keyer_pose_draw(keyer_overlay *ov, const keyer_pose_result *result,
                             const keyer_pose_draw_params *params, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_POSE_H */
