/**
 * @file keyer/detect.h
 * @brief Decoding SSD-style detector outputs (BlazeFace) into boxes with keypoints:
 *        anchor generation, box/keypoint decoding, weighted non-maximum suppression and
 *        letterbox removal, exactly as MediaPipe specifies them
 *        (docs/models.md section 3.2).
 *
 * @code
 * keyer_detector_params p = keyer_detector_params_face_short();
 * keyer_detector *d = NULL;
 * keyer_detector_create(&p, &d, &err);
 * keyer_detection dets[16];
 * int n = 0;
 * keyer_detector_decode(d, regressors, scores, dets, 16, &n, &err);  // model outputs 0 and 1
 * keyer_detections_remove_letterbox(dets, n, &letterbox);            // into image coordinates
 * keyer_detector_destroy(&d);
 * @endcode
 *
 * Coordinates are normalised to [0,1] of the model input (after decode) or of the image (after
 * letterbox removal). The detector allocates its anchors and scratch space at create;
 * decode allocates nothing. A detector is used by one thread at a time.
 */
#ifndef KEYER_DETECT_H
#define KEYER_DETECT_H

#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KEYER_DETECTION_MAX_KEYPOINTS 8
#define KEYER_DETECTOR_MAX_LAYERS 8

/** Anchor and decoding settings (MediaPipe's SsdAnchorsCalculator + TensorsToDetections). */
typedef struct keyer_detector_params {
    int input_width, input_height;       /**< model input size in pixels */
    int num_layers;                      /**< SSD layers (consecutive equal strides merge) */
    int strides[KEYER_DETECTOR_MAX_LAYERS];
    float anchor_offset_x, anchor_offset_y; /**< 0.5: anchors at cell centres */
    int anchors_per_layer;               /**< aspect ratios (1) + interpolated anchor (1 or 0) */
    int num_coords;                      /**< values per anchor row (16 for BlazeFace) */
    int num_keypoints;                   /**< keypoints per detection (6) */
    float x_scale, y_scale, w_scale, h_scale; /**< divide raw values by these */
    float score_clip;                    /**< logits clamped to [-clip, clip] before the sigmoid */
    float min_score;                     /**< detections below are dropped */
    float min_suppression_iou;           /**< weighted NMS overlap threshold (0.3) */
} keyer_detector_params;

/** BlazeFace short range (128x128, 896 anchors, min score 0.5). */
keyer_detector_params keyer_detector_params_face_short(void);
/** BlazeFace full range (192x192, 2304 anchors, min score 0.6). */
keyer_detector_params keyer_detector_params_face_full(void);
/** BlazePose person detector (pose_detection.tflite, MediaPipe's pose_detection_cpu.pbtxt):
 *  224x224, strides 8, 16, 32, 32, 32 with 2 anchors each (2254), 12 values per anchor (box
 *  and 4 keypoints: 0 hip centre, 1 full-body size and rotation, 2 shoulder centre, 3 upper-body
 *  size and rotation), scales 224, score clip 100, min score 0.5, weighted NMS at IoU 0.3. */
keyer_detector_params keyer_detector_params_pose(void);

/** One detection. */
typedef struct keyer_detection {
    float xmin, ymin, xmax, ymax; /**< box corners, normalised */
    float score;                  /**< probability in [0,1] */
    int num_keypoints;
    float keypoints[KEYER_DETECTION_MAX_KEYPOINTS][2]; /**< (x, y) normalised */
} keyer_detection;

typedef struct keyer_detector keyer_detector;

/**
 * Generates the anchors for @p params and allocates scratch space for decoding.
 * Errors: INVALID_ARGUMENT (sizes, layer count, coords too few for the keypoints),
 * OUT_OF_MEMORY.
 */
keyer_status keyer_detector_create(const keyer_detector_params *params, keyer_detector **out,
                                   keyer_error *err);

/** Frees a detector; NULL accepted; sets *d to NULL. */
void keyer_detector_destroy(keyer_detector **d);

/** Number of anchors (rows the model's outputs must have). */
int keyer_detector_anchor_count(const keyer_detector *d);

/** Centre (x, y) of anchor @p i (normalised), for tests and debugging. */
keyer_status keyer_detector_anchor(const keyer_detector *d, int i, float *x, float *y,
                                   keyer_error *err);

/**
 * Decodes raw model outputs: @p boxes is [anchors, num_coords] and @p scores [anchors] logits,
 * float32, as the model emits them. Keeps detections with score >= min_score, runs weighted
 * NMS and writes at most @p capacity detections (best first) to @p out; *count gets how many.
 * Errors: INVALID_ARGUMENT (NULL pointers, capacity < 0).
 */
keyer_status keyer_detector_decode(keyer_detector *d, const float *boxes, const float *scores,
                                   keyer_detection *out, int capacity, int *count,
                                   keyer_error *err);

/** Letterbox padding of a model input, as fractions of the tensor size on each side. */
typedef struct keyer_letterbox {
    float pad_left, pad_top, pad_right, pad_bottom;
} keyer_letterbox;

/**
 * The letterbox MediaPipe uses to fit an image of @p image_width x @p image_height into a
 * tensor of @p tensor_width x @p tensor_height keeping the aspect ratio (centred padding).
 */
keyer_letterbox keyer_letterbox_fit(int image_width, int image_height, int tensor_width,
                                    int tensor_height);

/** Maps detections from letterboxed tensor coordinates to image coordinates, in place. */
void keyer_detections_remove_letterbox(keyer_detection *dets, int count,
                                       const keyer_letterbox *lb);

/** Maps detections from letterboxed tensor coordinates to pixels of a @p width x @p height
 *  image, in place: keyer_detections_remove_letterbox(), then boxes and keypoints scaled to the
 *  image. NULL pointers and non-positive sizes leave the detections as they are. */
void keyer_detections_to_pixels(keyer_detection *dets, int count, const keyer_letterbox *lb,
                                int width, int height);

/** Intersection over union of two boxes (0 when they do not intersect). */
float keyer_detection_iou(const keyer_detection *a, const keyer_detection *b);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_DETECT_H */
