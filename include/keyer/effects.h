/**
 * @file keyer/effects.h
 * @brief Per-pixel stages around the neural net: model input preparation, mask refinement
 *        and compositing, on the CPU (host frames) and on CUDA (device frames).
 *
 * Three objects, each created once with its parameters and then run per frame:
 *  - ::keyer_prepare turns decoded frames (NV12, P010, YUV420P, RGB24, RGBA) into a batched
 *    model input tensor in one pass: region of interest with rotation, bilinear resize with
 *    area filtering when shrinking more than 2x, colour conversion following the frame's
 *    matrix and range, normalisation, letterbox or stretch, f32 or f16, NHWC or NCHW.
 *  - ::keyer_refine turns the model's low-resolution mask into a full-resolution alpha
 *    matte: edge-following upsampling (fast guided filter with the frame's luma as guide),
 *    soft threshold, dilate/erode, feather, and temporal smoothing per stream.
 *  - ::keyer_composite combines a frame and its matte: background blur without the
 *    person's colours bleeding into it, replacement by a colour, an image or another
 *    video's frames, green screen, alpha output (straight or premultiplied RGBA) and
 *    mask-only output, in the frame's own format (NV12 in, NV12 out; 8- and 10-bit).
 *
 * @code
 * keyer_prepare_params pp = keyer_prepare_params_defaults();
 * pp.width = 256; pp.height = 256;                    // selfie segmentation input
 * keyer_refine_params rp = keyer_refine_params_defaults();
 * keyer_composite_params cp = keyer_composite_params_defaults();
 * cp.mode = KEYER_COMPOSITE_BLUR;
 * keyer_prepare *prep = NULL; keyer_refine *ref = NULL; keyer_composite *comp = NULL;
 * if (keyer_prepare_create(&pp, &prep, &err) || keyer_refine_create(&rp, &ref, &err) ||
 *     keyer_composite_create(&cp, &comp, &err))
 *     die(err.message);
 * // per frame (frame: NV12 host frame; mask: GRAYF32 frame wrapping the model output)
 * const keyer_frame *frames[1] = {frame};
 * keyer_prepare_run(prep, frames, NULL, 1, keyer_runtime_input_data(rt, 0), NULL, &err);
 * keyer_runtime_run(rt, &err);
 * keyer_refine_run(ref, 0, frame, mask, NULL, alpha, &err);     // alpha: GRAY8, frame size
 * keyer_composite_run(comp, frame, alpha, out, &err);            // out: NV12, frame size
 * @endcode
 *
 * Memory: every frame and tensor passed to one call must live in the same memory
 * (keyer_frame::memory). Host memory runs the CPU implementation on the object's thread
 * pool; CUDA memory runs the CUDA implementation asynchronously on the stream given in
 * the parameters (the call returns once the work is queued; synchronise the stream before
 * reading results on the host). A CUDA frame given to a keyer built without CUDA gives
 * KEYER_STATUS_UNSUPPORTED.
 *
 * Allocation: objects allocate their scratch memory at create and when the geometry of
 * their inputs grows (a new frame size, format or tensor layout), never otherwise per
 * frame. CUDA scratch is allocated on the first CUDA call.
 *
 * Colour: a YUV frame's matrix and range come from keyer_frame::matrix and ::range
 * (UNSPECIFIED matrix: BT.601 below 720 lines, BT.709 otherwise; UNSPECIFIED range:
 * limited). 4:2:0 chroma is sited as in MPEG-2/H.264 (horizontally with the even luma
 * column, vertically between two luma rows) and interpolated bilinearly.
 *
 * Thread safety: an object is used by one thread at a time; different objects are
 * independent.
 */
#ifndef KEYER_EFFECTS_H
#define KEYER_EFFECTS_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/alloc.h"
#include "keyer/frame.h"
#include "keyer/nn.h"
#include "keyer/options.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A rectangle in continuous pixel coordinates (pixel i covers [i, i+1)). */
typedef struct keyer_rectf {
    float x, y;          /**< top-left corner */
    float width, height; /**< size; > 0 */
} keyer_rectf;

/* ================================================================================== */
/*  Model input preparation                                                           */
/* ================================================================================== */

/** How the region of interest is fitted into the tensor. */
typedef enum keyer_fit {
    KEYER_FIT_STRETCH = 0, /**< scale each axis independently to fill the tensor */
    KEYER_FIT_LETTERBOX,   /**< keep the aspect ratio, centre, fill the bars with the pad value */
} keyer_fit;
KEYER_OPTION_ENUM_CHECK(keyer_fit);

/** Tensor memory layout. */
typedef enum keyer_tensor_layout {
    KEYER_TENSOR_LAYOUT_NHWC = 0, /**< [N][H][W][C]: TFLite's layout */
    KEYER_TENSOR_LAYOUT_NCHW,     /**< [N][C][H][W] */
} keyer_tensor_layout;
KEYER_OPTION_ENUM_CHECK(keyer_tensor_layout);
KEYER_OPTION_ENUM_CHECK(keyer_dtype);

/**
 * A possibly rotated region of a frame to sample, in the frame's pixel coordinates.
 * The region's own x axis points along (cos rotation, sin rotation) in image coordinates
 * (y down), so a positive rotation turns the region clockwise on screen. The region's
 * top-left corner lands on the tensor's top-left. width or height <= 0 selects the whole
 * frame (rotation ignored).
 */
typedef struct keyer_roi {
    float center_x, center_y; /**< centre, pixels (frame edges are 0 and width) */
    float width, height;      /**< size along the region's own axes, pixels */
    float rotation;           /**< radians, clockwise on screen */
} keyer_roi;

/** Where a frame's region went in the tensor (for mapping model outputs back). */
typedef struct keyer_prepare_geometry {
    /** The region's image within the tensor, in tensor pixels: the whole tensor when
     *  stretching; the area inside the bars when letterboxing. */
    keyer_rectf content;
    /** Affine map from tensor coordinates to frame coordinates (both continuous, pixel i
     *  covering [i, i+1)): fx = m[0]*tx + m[1]*ty + m[2], fy = m[3]*tx + m[4]*ty + m[5]. */
    float matrix[6];
} keyer_prepare_geometry;

/** Parameters of a ::keyer_prepare. Initialise with keyer_prepare_params_defaults(). */
typedef struct keyer_prepare_params {
    int width;       /**< tensor width (W), 1..16384; required (default 256) */
    int height;      /**< tensor height (H), 1..16384; required (default 256) */
    int max_batch;   /**< most frames per call, 1..256 (default 1) */
    keyer_dtype dtype;          /**< KEYER_DTYPE_F32 (default) or KEYER_DTYPE_F16 */
    keyer_tensor_layout layout; /**< default NHWC */
    keyer_fit fit;              /**< default STRETCH, as the selfie models expect */
    float scale;     /**< value = rgb * scale + offset with rgb in [0,1] (default 1) */
    float offset;    /**< (default 0); [-1,1] models: scale 2, offset -1 */
    float pad;       /**< letterbox bar colour in [0,1] before normalisation (default 0) */
    int area;        /**< 1: average all covered pixels when shrinking more than 2x (default 1) */
    int threads;     /**< CPU threads; 0: one per core (default 0) */
    void *stream;    /**< cudaStream_t for CUDA frames; NULL: the default stream */
    const keyer_allocator *allocator; /**< host scratch; NULL: system */
    /** Per-channel standardisation after scale and offset, in the tensor's channel order:
     *  value_c = (rgb_c * scale + offset - mean[c]) / std[c] (ImageNet-trained models:
     *  mean 0.485,0.456,0.406, std 0.229,0.224,0.225). A std[c] of 0 (the default) leaves
     *  channel c as it is. */
    float mean[3], std[3];
    int bgr;                          /**< 1: the tensor's channels are B, G, R (default 0) */
    void *reserved[4];                /**< zero */
} keyer_prepare_params;

/** Defaults as documented in ::keyer_prepare_params. */
keyer_prepare_params keyer_prepare_params_defaults(void);

/** Option table over ::keyer_prepare_params (width, height, max_batch, dtype, layout,
 *  fit, scale, offset, pad, area, threads, bgr; mean and std are set in the struct). */
const keyer_option *keyer_prepare_options(void);

/** Model input preparation. Opaque. */
typedef struct keyer_prepare keyer_prepare;

/**
 * Creates a preparation stage. The parameters are validated against
 * keyer_prepare_options() and copied. Errors: INVALID_ARGUMENT (a parameter out of range,
 * dtype not F32/F16), OUT_OF_MEMORY, INTERNAL (threads).
 */
keyer_status keyer_prepare_create(const keyer_prepare_params *params, keyer_prepare **out,
                                  keyer_error *err);

/**
 * Fills @p tensor with @p count frames (1..max_batch), frame i into batch item i.
 *
 * @p frames: NV12, P010, YUV420P, RGB24 or RGBA frames, any sizes, all in the same memory.
 * @p rois: NULL (whole frames) or @p count regions.
 * @p tensor: count x height x width x 3 elements of the params' dtype in the params'
 * layout, in the frames' memory (device memory for CUDA frames); written completely.
 * @p geometry: NULL or @p count entries that receive where each region went.
 *
 * Sampling: tensor pixel (x, y) of the region's image covers [x, x+1) x [y, y+1) in tensor
 * coordinates; its centre is mapped to the frame and the frame is sampled bilinearly (OpenCV
 * INTER_LINEAR's convention for an axis-aligned region), clamping at the frame's edges. When
 * a tensor pixel covers s > 2 frame pixels along one of its axes and area filtering is on,
 * ceil(s) (at most 128) evenly spaced bilinear samples along that axis are averaged instead,
 * which for an integer s is the box average of the covered pixels. Colour is converted after sampling and
 * clamped to [0,1]; then normalised. Letterbox bars (tensor pixels whose centre lies
 * outside the region's image) receive pad * scale + offset.
 *
 * Errors: INVALID_ARGUMENT (NULL, count out of range, a frame fails keyer_frame_check, an
 * unsupported pixel format, a non-finite or empty ROI, mixed memory), UNSUPPORTED (CUDA
 * frames without CUDA support), DEVICE (a CUDA call failed), OUT_OF_MEMORY.
 */
keyer_status keyer_prepare_run(keyer_prepare *prep, const keyer_frame *const *frames,
                               const keyer_roi *rois, int count, void *tensor,
                               keyer_prepare_geometry *geometry, keyer_error *err);

/** Frees the stage and its scratch (host and device); accepts NULL; sets *prep to NULL. */
void keyer_prepare_destroy(keyer_prepare **prep);

/* ================================================================================== */
/*  Mask refinement                                                                   */
/* ================================================================================== */

/** Upsampling of the low-resolution mask to the frame. */
typedef enum keyer_upsample {
    KEYER_UPSAMPLE_BILINEAR = 0, /**< plain bilinear (what MediaPipe does) */
    KEYER_UPSAMPLE_GUIDED,       /**< fast guided filter with the frame's luma as guide */
} keyer_upsample;
KEYER_OPTION_ENUM_CHECK(keyer_upsample);

/** Temporal smoothing of the mask per stream. */
typedef enum keyer_temporal {
    KEYER_TEMPORAL_OFF = 0,   /**< none */
    KEYER_TEMPORAL_ADAPTIVE,  /**< moving average whose weight drops where frame or mask move */
    KEYER_TEMPORAL_MEDIAPIPE, /**< MediaPipe SegmentationSmoothingCalculator's formula */
} keyer_temporal;
KEYER_OPTION_ENUM_CHECK(keyer_temporal);

/**
 * Parameters of a ::keyer_refine. Initialise with keyer_refine_params_defaults().
 *
 * The steps, each optional, in order:
 *  1. temporal smoothing of the mask at its own resolution. ADAPTIVE: out = p + (q - p) * k
 *     with p the new mask, q the previous output, k = temporal_strength *
 *     max(0, 1 - |dI| / motion_tolerance) * max(0, 1 - |p - q| / mask_tolerance) and dI the
 *     change of the frame's luma (averaged to the mask's grid) since the previous frame.
 *     MEDIAPIPE: k = temporal_strength * u(p), u the uncertainty polynomial of MediaPipe's
 *     SegmentationSmoothingCalculator. Both reset (k = 0) on the first frame of a stream, when
 *     the mean |dI| over the frame exceeds scene_cut, and after keyer_refine_reset().
 *  2. upsampling to the frame's size: bilinear, or guided (He & Sun's fast guided filter:
 *     linear coefficients a, b fitted per window of radius guided_radius mask pixels with
 *     regulariser guided_eps, then alpha = a * luma + b at full resolution).
 *  3. soft threshold: smoothstep(threshold_low, threshold_high, alpha) when threshold is 1.
 *  4. dilate (dilate > 0) or erode (dilate < 0) by |dilate| pixels (square window).
 *  5. feather: a box blur of radius feather pixels, applied twice (a tent-shaped kernel).
 * Defaults were chosen by looking at the results on the project's test photos with the
 * selfie model's mask (tests/data/golden/ holds them) and, for the temporal weights, by the
 * flicker / motion-lag trade-off measured in tests/unit/test_effects_refine.c.
 */
typedef struct keyer_refine_params {
    keyer_upsample upsample; /**< default GUIDED */
    int guided_radius;       /**< window radius in mask pixels, 1..16 (default 2) */
    float guided_eps;        /**< regulariser on luma variance (luma in [0,1]), (default 1e-3) */
    int threshold;           /**< 1: apply the smoothstep threshold (default 1) */
    float threshold_low;     /**< alpha below maps to 0 (default 0.25) */
    float threshold_high;    /**< alpha above maps to 1; > threshold_low (default 0.75) */
    int dilate;              /**< pixels, -64..64; negative erodes (default 0) */
    int feather;             /**< box radius in pixels, 0..64 (default 1) */
    keyer_temporal temporal; /**< default ADAPTIVE */
    float temporal_strength; /**< weight of the previous mask, 0..0.99 (default 0.8) */
    float motion_tolerance;  /**< luma change (0..1) where the weight reaches 0 (default 0.05) */
    float mask_tolerance;    /**< mask change where the weight reaches 0 (default 0.25) */
    float scene_cut;         /**< mean luma change that resets the history (default 0.15) */
    int max_streams;         /**< stream ids 0..max_streams-1, 1..1024 (default 1) */
    int threads;             /**< CPU threads; 0: one per core (default 0) */
    void *stream;            /**< cudaStream_t for CUDA frames; NULL: the default stream */
    const keyer_allocator *allocator; /**< host scratch; NULL: system */
    void *reserved[4];                /**< zero */
} keyer_refine_params;

/** Defaults as documented in ::keyer_refine_params. */
keyer_refine_params keyer_refine_params_defaults(void);

/** Option table over ::keyer_refine_params. */
const keyer_option *keyer_refine_options(void);

/** Mask refinement with per-stream temporal state. Opaque. */
typedef struct keyer_refine keyer_refine;

/**
 * Creates a refinement stage. Parameters are validated (keyer_refine_options(), and
 * threshold_low < threshold_high) and copied. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY,
 * INTERNAL (threads).
 */
keyer_status keyer_refine_create(const keyer_refine_params *params, keyer_refine **out,
                                 keyer_error *err);

/**
 * Makes the full-resolution matte @p alpha for @p frame from the model's @p mask.
 *
 * @p stream_id: 0..max_streams-1, whose temporal history is used and updated.
 * @p frame: the guide, NV12, P010, YUV420P, RGB24 or RGBA.
 * @p mask: GRAYF32 (person probability; values are clamped to [0,1], NaN counts as 0).
 * @p mask_region: NULL when the whole mask covers the whole frame (stretch), else the part
 * of the mask that covers the frame (keyer_prepare_geometry::content when letterboxed),
 * inside the mask.
 * @p alpha: GRAY8 or GRAYF32 frame of @p frame's size, allocated by the caller, written.
 * All three in the same memory.
 *
 * Errors: INVALID_ARGUMENT (NULL, bad stream id, format or size mismatch, a region outside
 * the mask, mixed memory), UNSUPPORTED (CUDA without CUDA support), DEVICE, OUT_OF_MEMORY.
 */
keyer_status keyer_refine_run(keyer_refine *refine, int stream_id, const keyer_frame *frame,
                              const keyer_frame *mask, const keyer_rectf *mask_region,
                              keyer_frame *alpha, keyer_error *err);

/** Forgets the temporal history of @p stream_id (-1: of every stream), e.g. after a seek.
 *  Errors: INVALID_ARGUMENT (NULL, bad id). */
keyer_status keyer_refine_reset(keyer_refine *refine, int stream_id, keyer_error *err);

/** Frees the stage; accepts NULL; sets *refine to NULL. */
void keyer_refine_destroy(keyer_refine **refine);

/* ================================================================================== */
/*  Compositing                                                                       */
/* ================================================================================== */

/** What keyer_composite_run() produces. */
typedef enum keyer_composite_mode {
    KEYER_COMPOSITE_BLUR = 0,            /**< background blurred; out: the frame's format */
    KEYER_COMPOSITE_COLOR,               /**< background replaced by `color`; frame's format */
    KEYER_COMPOSITE_IMAGE,               /**< by the background frame (scaled to cover) */
    KEYER_COMPOSITE_GREEN_SCREEN,        /**< by `key_color`, for downstream keying */
    KEYER_COMPOSITE_ALPHA,               /**< RGBA with straight alpha */
    KEYER_COMPOSITE_ALPHA_PREMULTIPLIED, /**< RGBA with colour multiplied by alpha */
    KEYER_COMPOSITE_MASK,                /**< the matte alone: GRAY8, or grey in the frame's format */
} keyer_composite_mode;
KEYER_OPTION_ENUM_CHECK(keyer_composite_mode);

/** Parameters of a ::keyer_composite. Initialise with keyer_composite_params_defaults(). */
typedef struct keyer_composite_params {
    keyer_composite_mode mode; /**< default BLUR */
    /** Gaussian sigma of the background blur in pixels, 2..256 (default 12). The blur runs on
     *  a grid of f x f pixel cells, f the largest power of two <= blur_radius, and is
     *  interpolated back bilinearly. */
    float blur_radius;
    uint32_t color;     /**< 0xRRGGBB for COLOR (default 0x000000) */
    uint32_t key_color; /**< 0xRRGGBB for GREEN_SCREEN (default 0x00B140, chroma-key green) */
    int dither;         /**< 1: ordered dither when rounding blended samples (default 1) */
    int threads;        /**< CPU threads; 0: one per core (default 0) */
    void *stream;       /**< cudaStream_t for CUDA frames; NULL: the default stream */
    const keyer_allocator *allocator; /**< host scratch; NULL: system */
    void *reserved[4];                /**< zero */
} keyer_composite_params;

/** Defaults as documented in ::keyer_composite_params. */
keyer_composite_params keyer_composite_params_defaults(void);

/** Option table over ::keyer_composite_params (mode, blur_radius, color, key_color,
 *  dither, threads). */
const keyer_option *keyer_composite_options(void);

/** Compositing. Opaque. */
typedef struct keyer_composite keyer_composite;

/**
 * Creates a compositing stage. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY, INTERNAL.
 */
keyer_status keyer_composite_create(const keyer_composite_params *params,
                                    keyer_composite **out, keyer_error *err);

/**
 * Sets the background for KEYER_COMPOSITE_IMAGE: the stage takes a new reference to
 * @p background's pixels (keyer_frame_ref), so the caller may drop its own; NULL releases
 * it. Any supported format and size; it is scaled to cover the frame (aspect kept, centred,
 * overflow cropped) and converted to the frame's format at the next run. For frames of
 * another video call this before each run. It must be in the memory of the frames it will
 * be composited with. Errors: INVALID_ARGUMENT (NULL stage, invalid frame or format).
 */
keyer_status keyer_composite_set_background(keyer_composite *comp, const keyer_frame *background,
                                            keyer_error *err);

/**
 * Composites @p frame with its matte @p alpha into @p out.
 *
 * @p frame: NV12, P010, YUV420P, RGB24 or RGBA. @p alpha: GRAY8 or GRAYF32 of the
 * frame's size (1 = person). @p out: allocated by the caller, frame's size:
 *  - BLUR, COLOR, IMAGE, GREEN_SCREEN: the frame's format; may be @p frame itself
 *    (in place). Metadata (pts, colour) is copied from @p frame.
 *  - ALPHA, ALPHA_PREMULTIPLIED: RGBA (8-bit; P010 frames are reduced to 8 bits).
 *  - MASK: GRAY8, GRAYF32, or the frame's format (grey picture of the matte).
 * RGBA frames keep their own alpha channel in the replacement modes.
 * Samples are blended in floating point and rounded once (with a 4x4 ordered dither when
 * `dither` is 1), so 10-bit frames keep 10 bits and gradients are not banded.
 *
 * Errors: INVALID_ARGUMENT (NULL, format or size mismatch, IMAGE mode without a background,
 * mixed memory), UNSUPPORTED (CUDA without CUDA support), DEVICE, OUT_OF_MEMORY.
 */
keyer_status keyer_composite_run(keyer_composite *comp, const keyer_frame *frame,
                                 const keyer_frame *alpha, keyer_frame *out, keyer_error *err);

/** Frees the stage and drops its background reference; accepts NULL; sets *comp to NULL. */
void keyer_composite_destroy(keyer_composite **comp);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_EFFECTS_H */
