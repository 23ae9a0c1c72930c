/*
 * A cropping model stage (internal, prefix kr_crop_stage_): what the face mesh (mesh.c), the
 * pose stage (pose_stage.c) and the people stage (people_stage.c) share around their rounds
 * (crop_rounds.h), written once. Each of them gives only what differs: its model (registry
 * name, check of its input and outputs), its rounds' ops (the per-stream state and the steps
 * of a round) and its crops' ops (what a run's outputs mean).
 *
 * The object owns:
 *  - the model stage (model_stage.h), made from the model it loads and checks, with the ops
 *    of every cropping stage: each batch runs in rounds (kr_rounds_run_batch) and a finished
 *    item goes to the next queue (kr_model_stage_pass_on);
 *  - from connect: the rounds, the crops' preparation (keyer_prepare, on the model stage's
 *    CUDA stream when the session computes on CUDA), a run's frames, regions and geometry,
 *    the owner's host output places (page-locked with CUDA) with the deferred crops'
 *    geometry by host place, an optional device buffer of the owner's, and (CUDA items with
 *    CPU runtimes) the device buffer the crops are made in before they come down.
 *
 * kr_crop_stage_run() runs one chunk of crops, the part of a kr_crops_ops::chunk that the
 * stages share: the owner fills the run's frames and regions, the run crops them into the
 * runtime's input and runs it (on CUDA only queued); the owner then reads or copies down the
 * outputs.
 *
 * Life cycle: create (in the owner's create) -> connect (after the model stage is opened)
 * -> the model stage runs -> destroy (first in the owner's destroy: it stops the thread that
 * calls the owner's ops).
 *
 * Thread safety: set-up and tear-down from the session's thread; kr_crop_stage_run(),
 * kr_crop_stage_copy() and the buffers from the stage's thread only.
 */
#ifndef KEYER_PIPELINE_CROP_STAGE_H
#define KEYER_PIPELINE_CROP_STAGE_H

#include "keyer/effects.h"
#include "pipeline/crop_rounds.h"
#include "pipeline/model_stage.h"

/** What a cropping stage is, given at create. */
typedef struct kr_crop_stage_params {
    const char *name;           /* "mesh", "pose", "people": the model stage's name */
    const char *what;           /* prefix of its errors: "face mesh: " */
    const char *model_name;     /* the registry's name of its model */
    keyer_precision cuda_precision; /* of its CUDA runtimes */
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    int threads;                /* CPU threads of its runtimes and crops */
    /* Checks the loaded @p model (from file @p path), finds the owner's outputs and sets the
     * crops' size (the model's input) in *@p width x *@p height. Errors: the owner's,
     * BAD_DATA naming @p path for a model that is not the stage's. */
    keyer_status (*check_model)(void *opaque, keyer_model *model, const char *path, int *width,
                                int *height, keyer_error *err);
    const kr_rounds_ops *rounds; /* the rounds' ops (kept), with @c opaque */
    void *opaque;               /* the owner: check_model's and the rounds' */
} kr_crop_stage_params;

/** How a cropping stage runs, given at connect. */
typedef struct kr_crop_stage_run_params {
    kr_queue *next;             /* where finished items go; NULL: their stream's reorder buffer */
    const kr_device_fns *dev;   /* the session's CUDA table, or NULL (CPU only) */
    int ordinal;                /* its device */
    int hybrid;                 /* CUDA items meet CPU runtimes: a device buffer for the crops */
    int batch;                  /* items per batch (the model stage's), >= 1 */
    int crop_cap;               /* crops per pass at most (kr_rounds_create) */
    int out_cap;                /* deferred crops between two waits (>= batch) */
    int run_cap;                /* crops per run at most (>= batch): the preparation's batch */
    keyer_fit fit;              /* how a region fills a crop */
    size_t out_floats;          /* the owner's host output places, in floats (>= 1) */
    size_t dev_floats;          /* with @c dev: a device buffer of the owner's (0: none) */
} kr_crop_stage_run_params;

/** The buffers of a connected stage (see the file comment). */
typedef struct kr_crop_buffers {
    const keyer_frame **frames;  /* run_cap: a run's frames, filled by the owner */
    keyer_roi *rois;             /* run_cap: their regions, filled by the owner */
    keyer_prepare_geometry *geo; /* run_cap: the geometry of a run that is not deferred */
    keyer_prepare_geometry *out_geo; /* out_cap: the deferred crops' geometry, by host place */
    float *out;                  /* out_floats: the owner's host places (page-locked on CUDA) */
    float *dev_out;              /* dev_floats on the device, or NULL */
} kr_crop_buffers;

typedef struct kr_crop_stage kr_crop_stage;

/**
 * Loads the model params->model_name from the registry, checks it with params->check_model
 * and makes the model stage (slot -1: its inputs are the owner's crops). Errors (prefixed
 * with params->what): INVALID_ARGUMENT, IO, BAD_DATA, OUT_OF_MEMORY, and check_model's.
 */
keyer_status kr_crop_stage_create(const kr_crop_stage_params *params, kr_crop_stage **out,
                                  keyer_error *err);

/** Stops and frees its model stage (first: the owner's ops are not called after), then its
 *  rounds and buffers; accepts NULL; sets *cs NULL. */
void kr_crop_stage_destroy(kr_crop_stage **cs);

/**
 * Connects it (after the model stage is opened, before it starts; again: what the last connect
 * made is freed first): makes the rounds
 * (kr_rounds_create with the rounds' ops), the preparation (the crops' size, @c fit, rgb in
 * [0, 1]; on the model stage's stream with @c dev) and the buffers. Errors (prefixed with
 * the stage's @c what): INVALID_ARGUMENT (caps), OUT_OF_MEMORY, DEVICE.
 */
keyer_status kr_crop_stage_connect(kr_crop_stage *cs, const kr_crop_stage_run_params *run,
                                   keyer_error *err);

/**
 * Crops frames 0 .. @p n of the buffers (their regions) into the input of the runtime of
 * batch 2^@p lg (n <= 2^lg, n <= run_cap) and runs it:
 *  - @p deferred (CUDA items, CUDA runtime): cropped on the device straight into the input,
 *    the geometry into out_geo[@p at ..], the run only queued on the model stage's stream;
 *    the padding keeps what the input held (those outputs are never read);
 *  - @p cuda without @p deferred (CUDA items, CPU runtime): cropped on the device, the crops
 *    come down (the host waits), the CPU runs; geometry into geo;
 *  - else on the host, the unused places of the input zeros; geometry into geo.
 * *@p rt: the runtime that ran (its outputs the owner's to read: on the host unless deferred).
 * Errors: INTERNAL (caps, a runtime whose input is not the crops'), the runtime's and the
 * preparation's.
 */
keyer_status kr_crop_stage_run(kr_crop_stage *cs, int n, int lg, int cuda, int deferred,
                               int at, keyer_runtime **rt, keyer_error *err);

/** Copies @p bytes between host and device on the model stage's stream (asynchronous into
 *  page-locked memory). Errors: DEVICE, INTERNAL (not connected to a device). */
keyer_status kr_crop_stage_copy(kr_crop_stage *cs, void *dst, const void *src, size_t bytes,
                                keyer_error *err);

/** Its buffers (valid from connect to destroy). */
const kr_crop_buffers *kr_crop_stage_buffers(const kr_crop_stage *cs);

/** Its model stage (owned by it). */
kr_model_stage *kr_crop_stage_model(kr_crop_stage *cs);

/** Its rounds (NULL before connect). */
kr_rounds *kr_crop_stage_rounds(const kr_crop_stage *cs);

/** Its CUDA device's ordinal (as connected). */
int kr_crop_stage_ordinal(const kr_crop_stage *cs);

#endif
