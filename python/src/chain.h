/*
 * The per-frame keying chain of the Python package (prefix kp_), on keyer's public API only:
 *
 *   frame -> keyer_prepare -> keyer_runtime -> mask (sigmoid for logit models)
 *         -> keyer_refine (matte, temporal state) -> keyer_composite -> output frame
 *
 * It takes each step's decisions as the session's stages do (src/pipeline: prepare.c,
 * infer.c, refine.c): the registry's input normalisation and letterboxing, the mask region
 * of a letterboxed model, channel 0 of a multi-channel mask output, 1 / (1 + expf(-v)) for
 * logit masks. Everything is allocated at create or when the frame size changes (the matte
 * scratch in the caller's frames), never otherwise per frame. Host frames only (the CPU and
 * reference backends).
 *
 * Thread safety: one thread at a time per chain.
 */
#ifndef KEYER_PYTHON_CHAIN_H
#define KEYER_PYTHON_CHAIN_H

#include "keyer/keyer.h"

typedef struct kp_chain_params {
    const char *model;         /* registry name or .tflite path; NULL: "selfie" */
    keyer_backend backend;     /* KEYER_BACKEND_CPU (default) or _REFERENCE */
    keyer_precision precision; /* KEYER_PRECISION_F32 */
    int threads;               /* CPU threads of every step; 0: one per core */
    keyer_refine_params refine;       /* threads and max_streams are set by the chain */
    keyer_composite_params composite; /* threads set by the chain */
} kp_chain_params;

/* Defaults: selfie, CPU backend, f32, the effects' own defaults. */
kp_chain_params kp_chain_params_defaults(void);

typedef struct kp_chain kp_chain;

/* Creates a chain: resolves and loads the model (it must have a person mask: a segmentation
 * or pose model), creates its runtime and the three effect objects. Errors: those of
 * keyer_registry_resolve, keyer_model_load_file, keyer_runtime_create and the effects'
 * create functions; INVALID_ARGUMENT for a model without a person mask. */
keyer_status kp_chain_create(const kp_chain_params *params, kp_chain **out, keyer_error *err);

/* Frees the chain; accepts NULL; sets *chain to NULL. */
void kp_chain_destroy(kp_chain **chain);

/* The model's registry entry (NULL for a model given as a path not in the registry). */
const keyer_model_entry *kp_chain_model_entry(const kp_chain *chain);

/* Makes @p alpha (GRAY8 frame of @p frame's size, caller-allocated) from @p frame (NV12,
 * P010, YUV420P, RGB24 or RGBA host frame): model input, inference, refinement with the
 * temporal history of the chain's one stream. Errors: those of keyer_prepare_run,
 * keyer_runtime_run and keyer_refine_run (INVALID_ARGUMENT for a bad frame). */
keyer_status kp_chain_matte(kp_chain *chain, const keyer_frame *frame, keyer_frame *alpha,
                            keyer_error *err);

/* Composites @p frame with @p alpha into @p out (see keyer_composite_run for the formats).
 * Errors: those of keyer_composite_run. */
keyer_status kp_chain_composite(kp_chain *chain, const keyer_frame *frame,
                                const keyer_frame *alpha, keyer_frame *out, keyer_error *err);

/* The background of composite mode IMAGE (keyer_composite_set_background: a reference is
 * taken). Errors: INVALID_ARGUMENT. */
keyer_status kp_chain_set_background(kp_chain *chain, const keyer_frame *background,
                                     keyer_error *err);

/* Forgets the temporal history (a new clip, a seek). */
void kp_chain_reset(kp_chain *chain);

#endif
