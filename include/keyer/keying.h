/**
 * @file keyer/keying.h
 * @brief The keying chain as one object, for programs that key frames one at a time: model
 *        input preparation, the segmentation network, the person mask, matte refinement with
 *        temporal smoothing and compositing, as the main job (keyer INPUT -o OUTPUT) does to
 *        each frame of a video.
 *
 * Per frame, keyer_keying_process():
 *  1. the frame becomes the network's input (keyer_prepare: the registry's normalisation of
 *     the model, the frame stretched or letterboxed into the input, see ::keyer_keying_fit);
 *  2. the network runs (keyer_runtime on the chosen backend);
 *  3. the person mask is read from the model's mask output (channel 0 when it has several;
 *     1 / (1 + exp(-v)) for models whose mask is logits, the pose models);
 *  4. keyer_refine makes the matte at the frame's size (the part of the mask covering the
 *     frame when letterboxed), smoothed over the frames given so far;
 *  5. keyer_composite makes the output frame (blur, replacement, green screen, alpha, mask).
 * These are the session's decisions (src/pipeline), so a frame keyed here equals the frame
 * the main job writes for the same input, settings and history.
 *
 * @code
 * keyer_keying_params p = keyer_keying_params_defaults();      // selfie, CPU, background blur
 * p.composite.blur_radius = 16;
 * keyer_keying *k = NULL;
 * if (keyer_keying_create(&p, &k, &err)) die(err.message);
 * keyer_frame *out = NULL;
 * keyer_frame_create(&out, &err);                             // empty: allocated by the call
 * for each frame:                                             // RGB24, RGBA, NV12, ...
 *     if (keyer_keying_process(k, frame, out, NULL, &err)) die(err.message);
 *     ... out: the frame's format and size, background blurred ...
 * keyer_frame_destroy(&out);
 * keyer_keying_destroy(&k);
 * @endcode
 *
 * Memory. Frames may be in host or CUDA memory (keyer_frame::memory), frame by frame: the
 * effects (preparation, refinement, compositing) run where the frame is (the CPU on the
 * object's threads, or CUDA), the network on its backend; when the two differ, the model's
 * input and its mask (both the model's size, small) are copied between them. The output and
 * the matte are in the frame's memory. CUDA work is queued on one stream, the parameters'
 * @c stream or, when that is NULL, a stream the object creates (non-blocking, on the first
 * CUDA use); keyer_keying_process() returns once it is queued, without waiting, except where
 * the host reads device data itself (a host runtime fed from a CUDA frame, a CUDA runtime
 * feeding a host frame). keyer_keying_stream_wait() and keyer_keying_stream_signal() order
 * this work with another stream without the host waiting; keyer_keying_synchronize() waits.
 *
 * Allocation: everything is allocated at create, at the first frame in CUDA memory (the
 * CUDA-side effects and scratch) and when the frame size changes (a matte scratch when the
 * caller passes none), never otherwise per frame, except an output or matte frame the caller
 * passes empty (allocated by that call, so the caller decides whether to reuse it).
 *
 * Thread safety: one thread at a time per object; objects are independent.
 */
#ifndef KEYER_KEYING_H
#define KEYER_KEYING_H

#include "keyer/effects.h"
#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/nn.h"
#include "keyer/options.h"
#include "keyer/registry.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

KEYER_OPTION_ENUM_CHECK(keyer_backend);
KEYER_OPTION_ENUM_CHECK(keyer_precision);

/** How a frame is fitted into the network's input. */
typedef enum keyer_keying_fit {
    KEYER_KEYING_FIT_MODEL = 0,  /**< as the model's registry entry says (letterbox for the pose
                                      models, stretch for selfie; stretch for a file outside the
                                      registry), as the main job does */
    KEYER_KEYING_FIT_STRETCH,    /**< stretch the frame over the input */
    KEYER_KEYING_FIT_LETTERBOX,  /**< keep its aspect ratio; the mask's bars are left out */
} keyer_keying_fit;
KEYER_OPTION_ENUM_CHECK(keyer_keying_fit);

/** Parameters of a ::keyer_keying. Initialise with keyer_keying_params_defaults(). */
typedef struct keyer_keying_params {
    const char *model;          /**< registry name or .tflite / .onnx path (default and NULL:
                                     "selfie"); a model with a person mask: selfie,
                                     selfie-landscape, u2netp, pose-lite, pose-full,
                                     pose-heavy, or a file described by model_desc; or
                                     "people" (KEYER_PEOPLE_MODEL, keyer/people.h: the person
                                     detector and a pose body mask per person, its mask
                                     KEYER_PEOPLE_MASK_SIDE square over the frame; host frames
                                     only, its networks on the backend; model_desc, fit and
                                     precision do not apply) */
    keyer_backend backend;      /**< where the network runs (default CPU) */
    keyer_precision precision;  /**< of the network (default AUTO: keyer_registry_precision();
                                     F16 on CUDA only) */
    int device;                 /**< CUDA device of a CUDA backend, 0..63 (default 0); CUDA
                                     frames must be on it */
    keyer_keying_fit fit;       /**< default MODEL */
    int threads;                /**< CPU threads of the network and of every effect; 0: one per
                                     core (default 0). Replaces refine.threads and
                                     composite.threads */
    void *stream;               /**< cudaStream_t of all CUDA work; NULL: the object's own */
    const keyer_logger *logger; /**< the runtime's messages; NULL: the default logger */
    /** The matte's refinement (keyer_refine_options()); max_streams, threads and stream are
     *  set by the object (one stream of frames). Default: keyer_refine_params_defaults(). */
    keyer_refine_params refine;
    /** The compositing (keyer_composite_options()); threads and stream are set by the object.
     *  Default: keyer_composite_params_defaults() (background blur). */
    keyer_composite_params composite;
    /** How to feed @ref model and read its mask (keyer/registry.h), copied at create; NULL
     *  (default): the registry's description, or the defaults for a file. With fit MODEL its
     *  fit decides stretch or letterbox. */
    const keyer_model_desc *model_desc;
    void *reserved[4];          /**< zero */
} keyer_keying_params;

/** Defaults as documented in ::keyer_keying_params. */
keyer_keying_params keyer_keying_params_defaults(void);

/**
 * Option table over the fields of ::keyer_keying_params that are not structs: model,
 * backend (reference, cpu, cuda), precision (f32, f16, auto), device, fit (model, stretch,
 * letterbox), threads. The refinement and compositing fields are set through their own
 * tables on &params.refine and &params.composite.
 */
const keyer_option *keyer_keying_options(void);

/** The keying chain. Opaque. */
typedef struct keyer_keying keyer_keying;

/**
 * Creates the chain: validates the parameters (against keyer_keying_options() and the
 * refinement's and compositing's own checks), resolves and loads the model, checks that it
 * maps an image to a mask, creates its runtime on the backend (with a CUDA backend also the
 * object's stream, when params->stream is NULL) and the host effects. The model file's path
 * and the parameters are copied; params->model need not outlive the call.
 * Errors: INVALID_ARGUMENT (a parameter out of range; a registry model without a person mask;
 * an unknown model name), IO (the model file is missing), BAD_DATA (a malformed model),
 * UNSUPPORTED (a model that is not image-to-mask; a backend keyer was built without; F16 on a
 * host backend), OUT_OF_MEMORY, DEVICE.
 */
keyer_status keyer_keying_create(const keyer_keying_params *params, keyer_keying **out,
                                 keyer_error *err);

/** Frees the chain (after waiting for its CUDA work) and its own stream; accepts NULL; sets
 *  *keying to NULL. */
void keyer_keying_destroy(keyer_keying **keying);

/**
 * Keys @p frame: makes its matte and composites it.
 *
 * @p frame: NV12, P010, YUV420P, RGB24 or RGBA, host or CUDA memory (CUDA: on
 * params.device when the backend is CUDA, on any device otherwise, one device per object).
 * It is read, never written (unless @p out is @p frame itself, see below).
 * @p out: NULL (no compositing: the matte alone), or the composited frame in the frame's
 * memory and size: an allocated frame in the format keyer_composite_run() takes for the mode
 * (BLUR, COLOR, IMAGE, GREEN_SCREEN: the frame's format, and it may be @p frame itself;
 * ALPHA, ALPHA_PREMULTIPLIED: RGBA; MASK: GRAY8, GRAYF32 or the frame's format), or an empty
 * frame (no data, as keyer_frame_create() makes it), which this call allocates in the frame's
 * memory in the mode's first format (the frame's, RGBA, GRAY8) and then fills; the frame
 * holds its buffers until the caller unrefs it. Metadata (pts, colour) is copied from @p frame.
 * @p matte: NULL (the object keeps the matte in its own scratch), or a GRAY8 or GRAYF32 frame
 * of the frame's size in its memory, allocated, or empty (allocated GRAY8 by this call): it
 * receives the refined matte (255 or 1.0 = person).
 * The frame's matte history (temporal smoothing) is updated either way.
 *
 * On CUDA the work is queued on the object's stream (see the overview); the outputs are
 * ready once that stream reaches this point.
 *
 * Errors: INVALID_ARGUMENT (NULL keying or frame, a frame failing keyer_frame_check, an
 * unsupported format, an output or matte of the wrong size, format or memory, a CUDA frame
 * on another device, IMAGE mode without a background), UNSUPPORTED (a CUDA frame in a keyer
 * built without CUDA), OUT_OF_MEMORY, DEVICE (a CUDA call failed), and the errors of the
 * network run.
 */
keyer_status keyer_keying_process(keyer_keying *keying, const keyer_frame *frame,
                                  keyer_frame *out, keyer_frame *matte, keyer_error *err);

/**
 * The person mask of the last keyer_keying_process(): a GRAYF32 frame of the model's mask
 * size (probabilities; the whole mask, bars included when letterboxed), in the memory of that
 * call's frame (on CUDA: ready when the object's stream reaches the end of that call). It
 * views the object's memory (no buffers): valid until the next process, reset or destroy.
 * NULL before the first frame, after a failed one, and for NULL @p keying.
 */
const keyer_frame *keyer_keying_mask(const keyer_keying *keying);

/**
 * Sets the background picture of composite mode IMAGE (any supported format and size, host or
 * CUDA; scaled to cover the frame): the object takes a reference to its pixels
 * (keyer_frame_ref), so the caller may drop its own; NULL releases it. A background in
 * other memory than the frames is copied there once, at the first frame that needs it (CUDA:
 * on the object's stream, waiting for the copy). Errors: INVALID_ARGUMENT (NULL keying, a
 * frame failing keyer_frame_check or of an unsupported format), OUT_OF_MEMORY.
 */
keyer_status keyer_keying_set_background(keyer_keying *keying, const keyer_frame *background,
                                         keyer_error *err);

/** Forgets the matte's history (a new clip, a seek): the next frame is keyed as a first one.
 *  NULL is accepted. */
void keyer_keying_reset(keyer_keying *keying);

/** The model's registry entry; NULL for a model file outside the registry or a NULL
 *  @p keying. */
const keyer_model_entry *keyer_keying_model_entry(const keyer_keying *keying);

/** The CUDA stream the object queues its work on: params.stream, or its own once made (with
 *  a CUDA backend at create, else at the first CUDA frame); NULL before that. */
void *keyer_keying_stream(const keyer_keying *keying);

/**
 * Makes the object's later CUDA work wait for the work queued so far on @p stream (a
 * cudaStream_t, or NULL for the legacy default stream), without the host waiting: an event
 * recorded on @p stream and waited for on the object's stream. Use it before processing a CUDA
 * frame another stream produced. Nothing happens when @p stream is the object's stream.
 * Makes the object's stream first when it has none yet (on params.device).
 * Errors: INVALID_ARGUMENT (NULL keying), UNSUPPORTED (keyer built without CUDA), DEVICE.
 */
keyer_status keyer_keying_stream_wait(keyer_keying *keying, void *stream, keyer_error *err);

/**
 * Makes work queued later on @p stream (a cudaStream_t, NULL: the legacy default stream)
 * wait for the CUDA work the object has queued so far (an event recorded on the object's
 * stream), without the host waiting: use it before another stream reads an output. Nothing
 * happens when @p stream is the object's stream or the object has queued no CUDA work.
 * Errors: INVALID_ARGUMENT (NULL keying), UNSUPPORTED (keyer built without CUDA), DEVICE.
 */
keyer_status keyer_keying_stream_signal(keyer_keying *keying, void *stream, keyer_error *err);

/** Waits for the CUDA work the object has queued (nothing to do without any).
 *  Errors: INVALID_ARGUMENT (NULL keying), DEVICE (with the failure's text). */
keyer_status keyer_keying_synchronize(keyer_keying *keying, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_KEYING_H */
