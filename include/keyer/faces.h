/**
 * @file keyer/faces.h
 * @brief Face analysis per video stream: BlazeFace detection (short or full range), the
 *        468-point face mesh on an aligned crop of each face, landmark tracking from frame to
 *        frame, and stable face ids from a ::keyer_tracker; plus drawing helpers.
 *
 * Per frame, keyer_faces_run():
 *  1. Tracking: every face that had landmarks in the previous frame is cropped again around
 *     those landmarks (MediaPipe's face_landmark_landmarks_to_roi: the landmarks' bounding box,
 *     rotated so that the line from landmark 33 to 263, the outer eye corners, is horizontal,
 *     squared on its longer side and scaled by roi_scale = 1.5) and the face mesh runs on that
 *     crop. A face whose presence probability falls below min_presence is lost.
 *  2. Detection runs on the whole frame when no face is tracked, when a face was lost in this
 *     frame, or every detect_interval frames: the frame is letterboxed into the detector's
 *     input (values in [-1,1], bars at -1), decoded (SSD anchors, weighted NMS, keyer/detect.h)
 *     and mapped back to frame pixels. Detections overlapping a tracked face are dropped; each
 *     remaining one seeds a face whose crop follows MediaPipe's
 *     face_detection_front_detection_to_roi: the box centre, rotation making the eye keypoints
 *     horizontal, the longer side times roi_scale. The face mesh then runs on that crop.
 *  3. Every face's box goes to the tracker, which gives it a stable id once confirmed.
 * With landmarks off, detection runs on every frame and only steps 2 and 3 happen.
 *
 * @code
 * keyer_faces_params p = keyer_faces_params_defaults();
 * p.range = KEYER_FACE_RANGE_FULL;
 * keyer_faces *fa = NULL;
 * if (keyer_faces_create(&p, &fa, &err)) die(err.message);
 * for each frame:
 *     const keyer_face *faces; int n;
 *     if (keyer_faces_run(fa, frame, &faces, &n, &err)) die(err.message);
 *     keyer_faces_draw(ov, faces, n, NULL, &err);   // boxes, ids, mesh contours
 * keyer_faces_destroy(&fa);
 * @endcode
 *
 * Coordinates are frame pixels (continuous: pixel i covers [i, i+1)). Models, runtimes and all
 * buffers are allocated at create; keyer_faces_run() allocates nothing. Frames must be host
 * frames (RGB24, RGBA, NV12, YUV420P, P010). One analyser per stream, used by one thread at a
 * time.
 */
#ifndef KEYER_FACES_H
#define KEYER_FACES_H

#include <stdint.h>

#include "keyer/detect.h"
#include "keyer/effects.h"
#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/nn.h"
#include "keyer/overlay.h"
#include "keyer/status.h"
#include "keyer/track.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Landmarks of the face mesh. */
#define KEYER_FACE_MESH_POINTS 468
/** Most faces one analyser follows. */
#define KEYER_FACES_MAX 64

/** Which BlazeFace model detects faces. */
typedef enum keyer_face_range {
    KEYER_FACE_RANGE_SHORT = 0, /**< "face-short": 128x128, faces within about 2 m */
    KEYER_FACE_RANGE_FULL,      /**< "face-full": 192x192, faces within about 5 m */
} keyer_face_range;
KEYER_OPTION_ENUM_CHECK(keyer_face_range);

/** Parameters of a face analyser. Initialise with keyer_faces_params_defaults(). */
typedef struct keyer_faces_params {
    keyer_face_range range;      /**< default SHORT */
    int landmarks;               /**< 1: run the face mesh and track by landmarks (default 1) */
    int detector;                /**< 1: load and run the detector (default 1); 0: none, the
                                      faces come from keyer_faces_track() (landmarks 0) */
    int max_faces;               /**< faces followed at most, 1..KEYER_FACES_MAX (default 4) */
    int detect_interval;         /**< > 0: also detect every this many frames to find new faces
                                      while others are tracked; 0: only when needed (default 0) */
    float min_score;             /**< detection threshold; <= 0: the model's (0.5 short, 0.6
                                      full) (default 0) */
    float min_presence;          /**< face-mesh presence below this loses the face (0.5) */
    float roi_scale;             /**< crop side / face size (1.5, MediaPipe's) */
    keyer_backend backend;       /**< inference backend (default CPU) */
    int threads;                 /**< CPU threads, 0: all cores (default 0) */
    const char *detector_model;  /**< registry name or path; NULL: "face-short"/"face-full" */
    const char *mesh_model;      /**< registry name or path; NULL: "face-mesh" */
    keyer_tracker_params tracker; /**< id tracker (default keyer_tracker_params_defaults()) */
    const keyer_logger *logger;  /**< NULL: default */
    void *reserved[4];           /**< zero */
} keyer_faces_params;

/** Defaults as documented in ::keyer_faces_params. */
keyer_faces_params keyer_faces_params_defaults(void);

/** One face in a frame. */
typedef struct keyer_face {
    uint32_t id;            /**< tracker id, stable while the face is followed; 0 until the
                                 tracker confirms it (tracker.min_hits frames) */
    keyer_detection box;    /**< frame pixels. With landmarks: their bounding box, score =
                                 presence, and 6 keypoints from the mesh (right eye centre,
                                 left eye centre, nose tip, mouth centre, right and left face
                                 edge at the ears: landmarks 33/133, 263/362, 1, 13/14, 234,
                                 454). Without: the detection. */
    int detected;           /**< 1: the detector found the face in this frame */
    keyer_detection detection; /**< frame pixels: the detection (box, score and its 6 keypoints:
                                 right eye, left eye, nose tip, mouth centre, right ear
                                 tragion, left ear tragion) when detected is 1 */
    int has_landmarks;      /**< 1: landmarks[] and presence are valid */
    float presence;         /**< face-mesh presence probability */
    keyer_roi roi;          /**< the crop the landmarks were computed on */
    float landmarks[KEYER_FACE_MESH_POINTS][3]; /**< x, y in frame pixels; z (depth, smaller is
                                 nearer) in pixels at the same scale as x */
} keyer_face;

/** Counters since create (or the last reset). */
typedef struct keyer_faces_stats {
    int64_t frames;          /**< keyer_faces_run() calls */
    int64_t detector_runs;   /**< detector inferences */
    int64_t mesh_runs;       /**< face-mesh inferences */
    int64_t lost;            /**< tracked faces lost (presence below min_presence) */
} keyer_faces_stats;

/** A face analyser. Opaque. */
typedef struct keyer_faces keyer_faces;

/**
 * Loads the models, creates their runtimes on params->backend, the input preparation stages
 * and the tracker. Errors: INVALID_ARGUMENT (a parameter out of range), IO (a model file is
 * missing), BAD_DATA (a model that is not a BlazeFace detector of the chosen range or not a
 * face mesh: wrong input or output shapes), UNSUPPORTED, OUT_OF_MEMORY, DEVICE.
 */
keyer_status keyer_faces_create(const keyer_faces_params *params, keyer_faces **out,
                                keyer_error *err);

/** Frees the analyser; accepts NULL and *fa == NULL; sets *fa to NULL. */
void keyer_faces_destroy(keyer_faces **fa);

/**
 * Analyses one frame of the stream (see the overview). *@p faces points at the analyser's
 * array of *@p count faces (faces tracked from the previous frame first, then new detections,
 * best first), valid until the next run, reset or destroy.
 * Errors: INVALID_ARGUMENT (NULL, a frame failing keyer_frame_check, an unsupported format,
 * an analyser made without a detector), UNSUPPORTED (a CUDA frame), errors of inference
 * (DEVICE, INTERNAL). On error *count is 0
 * and the tracking state is dropped (the next frame starts afresh).
 */
keyer_status keyer_faces_run(keyer_faces *fa, const keyer_frame *frame, const keyer_face **faces,
                             int *count, keyer_error *err);

/** Forgets tracked faces and tracker state (e.g. after a seek or a scene cut); ids keep
 *  increasing. Statistics are kept. NULL is accepted. */
void keyer_faces_reset(keyer_faces *fa);

/** Counters since create. Errors: INVALID_ARGUMENT. */
keyer_status keyer_faces_get_stats(const keyer_faces *fa, keyer_faces_stats *out, keyer_error *err);

/**
 * Tracks detections made elsewhere (for example by a session's batched detector,
 * keyer_session_params::detect) as keyer_faces_run() tracks its own without landmarks: the
 * first max_faces of the @p n detections (frame pixels of a @p width x @p height frame, best
 * first) become the frame's faces (detected 1, box = detection) and get tracker ids.
 * *@p faces points at the analyser's array, valid until the next run, track, reset or destroy.
 * Errors: INVALID_ARGUMENT (NULL, negative n, an empty frame size, an analyser made with
 * landmarks 1). On error *count is 0 and the tracking state is dropped.
 */
keyer_status keyer_faces_track(keyer_faces *fa, const keyer_detection *dets, int n, int width,
                               int height, const keyer_face **faces, int *count,
                               keyer_error *err);

/**
 * Runs only the detector on @p frame (whole frame, letterboxed) and writes at most
 * @p capacity detections in frame pixels, best first, to @p out (*count set). Does not touch
 * the tracking state. Errors as keyer_faces_run().
 */
keyer_status keyer_faces_detect(keyer_faces *fa, const keyer_frame *frame, keyer_detection *out,
                                int capacity, int *count, keyer_error *err);

/**
 * The face-mesh contours MediaPipe draws (lips, eyes, eyebrows, face oval) as landmark index
 * pairs: returns a static array of 2 * *count ints (for keyer_overlay_add_connections()).
 */
const int *keyer_face_mesh_contours(int *count);

/** What keyer_faces_draw() draws. Initialise with keyer_faces_draw_params_defaults(). */
typedef struct keyer_faces_draw_params {
    int boxes;             /**< rounded face boxes (default 1) */
    int keypoints;         /**< the 6 box keypoints as dots (default 0) */
    int mesh;              /**< face-mesh contours (default 1) */
    int mesh_points;       /**< all 468 landmarks as dots (default 0) */
    int ids;               /**< "id N" labels above the boxes; unconfirmed faces get none
                                (default 1) */
    float line_width;      /**< pixels (default 2) */
    float text_scale;      /**< pixels per font unit, 1..64 (default 2) */
    keyer_color box_color; /**< default opaque green */
    keyer_color mesh_color;  /**< default white at 0.8 */
    keyer_color point_color; /**< default red */
    keyer_color text_color;  /**< default white; plate black at 0.6 */
    int reserved[4];
} keyer_faces_draw_params;

/** Defaults as documented in ::keyer_faces_draw_params. */
keyer_faces_draw_params keyer_faces_draw_params_defaults(void);

/**
 * Adds @p n faces to the overlay as chosen by @p params (NULL: defaults). Each face is added
 * whole or not at all; faces that do not fit give OUT_OF_MEMORY after the earlier ones were
 * added. Errors: INVALID_ARGUMENT (NULL with n > 0, bad params), OUT_OF_MEMORY (capacity).
 */
keyer_status keyer_faces_draw(keyer_overlay *ov, const keyer_face *faces, int n,
                              const keyer_faces_draw_params *params, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_FACES_H */
