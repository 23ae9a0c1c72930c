/*
 * The keying model (internal, prefix kr_): a segmentation (or pose) model whose person mask
 * the refinement turns into a matte. It loads and checks the model, and runs as a model stage
 * (model_stage.h) whose outputs are each item's mask, read from the mask output as its kind
 * says (probability, logits, alpha, classes: vision/segmodel.h). Finished items go to the
 * refine stage's queue.
 *
 * Model "people" (keyer/people.h, KEYER_PEOPLE_MODEL): the stage's network is the person
 * detector, run on every frame letterboxed (batched across streams); its outputs are decoded
 * and handed with the frame to the stream's people keyer (made at the stream's first frame),
 * which adds its tiles, tracks, runs the pose model per person and writes the mask
 * (KEYER_PEOPLE_MASK_SIDE square, stretched over the frame). Its networks run on the CPU or
 * on CUDA device params.people_cuda. On the CPU it needs host frames (info.host_frames); on
 * CUDA the session's frames stay on the device: the detector's raw outputs come down, the
 * people keyer crops the people from the device frame (its tiles and landmark crops made on
 * the GPU) and the mask goes up into the item's.
 *
 * The automatic model (params.auto_people: a selfie model the session chose): each stream's
 * selfie mask goes through a kr_people_switch (made at the stream's first frame); while it
 * says people mode, the stream's people keyer runs on the frame with its own detector and its
 * mask replaces the selfie model's (stretched over the frame, in the selfie mask's cells). On
 * CUDA the host never waits for the inference it just queued: each CUDA run's selfie masks
 * are packed into bits on the device (one bit a cell, kr_people_switch_pack_cuda: 32 times
 * smaller than the floats) and come down asynchronously into a ring of KR_INFER_AUTO_RING
 * entries (page-locked, an event after each). At each later CUDA run the switches take, in the
 * runs' order, the entries whose copies are done (the events are polled, no wait); the host
 * waits only for the oldest entry when all of them are in flight. Then the run's frames are
 * keyed in the modes their streams' switches are in. So on CUDA a frame's mask moves its
 * stream's switch before the 1st to the KR_INFER_AUTO_RING-th (3rd) CUDA run of the stage
 * after the frame's own run, never before its own run; which one depends on when the GPU
 * finished. The switch takes the same masks in the same order as on the CPU (its hysteresis
 * counts the same frames), but a switch acts on frames 1 to 3 runs later than on the CPU,
 * which decides on each frame's own mask: with batches of one frame 1 to 3 frames later, with
 * runs of 16 frames of one stream up to 48. A people mask goes up; the people keyer (its
 * networks on CUDA device params.people_cuda) crops the device frame.
 *
 * Thread safety: set-up from the session's thread; the stage runs on its own thread.
 */
#ifndef KEYER_PIPELINE_INFER_H
#define KEYER_PIPELINE_INFER_H

#include <stdatomic.h>

#include "keyer/people.h"
#include "pipeline/model_stage.h"

/** The automatic model on CUDA: CUDA runs whose packed selfie masks may be on their way down
 *  at once (infer.c, auto_cuda); a switch acts 1 to this many runs later than on the CPU. */
#define KR_INFER_AUTO_RING 3

typedef struct kr_infer_params {
    const char *model;           /* registry name or file of the model */
    const keyer_model_desc *desc; /* how to feed it and read its mask; NULL: the registry's */
    int slot;                    /* the items' input slot of its input */
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    kr_batch_counters *counters; /* NULL: its batches are not counted */
    int threads;                 /* CPU threads of its runtimes */
    int fail_cuda_at;            /* KEYER_FAIL_CUDA_AT_FRAME, -1: off */
    keyer_precision precision;   /* the session's; AUTO is resolved for the model here */
    /* model "people" (keyer/people.h): the stage runs the person detector on whole frames
     * (batched across streams), then each stream's people keyer makes the mask */
    int max_streams;             /* stream ids 0..max_streams-1 */
    int people_cuda;             /* the people keyers' networks on this CUDA device; -1: CPU */
    /* 1: the model was chosen automatically (a selfie model): a stream whose frames show no
     * one large switches to people mode and back (vision/people_switch.h), on the CPU and on
     * CUDA, with a model whose mask covers the whole frame */
    int auto_people;
} kr_infer_params;

/** What the session and the other stages need to know of the keying model. */
typedef struct kr_infer_info {
    char model[64];          /* the name it was loaded by */
    int in_w, in_h;          /* its input */
    int mask_w, mask_h;      /* its mask */
    int letterbox;           /* its input keeps the frame's aspect ratio */
    keyer_precision cuda_precision; /* of its CUDA runtimes (F32 or F16) */
    int host_frames;         /* 1: it needs the frames in host memory (model people) */
} kr_infer_info;

typedef struct kr_infer kr_infer;

/**
 * Loads the model of params->model as params->desc says and checks that it is an image model
 * with a person mask (vision/segmodel.h).
 * Errors: INVALID_ARGUMENT (unknown name, no mask, a bad description or tensor name), IO,
 * BAD_DATA, UNSUPPORTED, OUT_OF_MEMORY.
 */
keyer_status kr_infer_create(const kr_infer_params *params, kr_infer **out, keyer_error *err);

/**
 * Checks that the keying model @p name (a registry name, a file, or "people": its two
 * networks) resolves to files that exist. Errors: those of keyer_registry_resolve.
 */
keyer_status kr_infer_resolve(const char *name, keyer_error *err);

/** Frees it and its stage; accepts NULL; sets *inf NULL. */
void kr_infer_destroy(kr_infer **inf);

/** Its model stage (owned by it). */
kr_model_stage *kr_infer_stage(kr_infer *inf);

/** The model's geometry. */
const kr_infer_info *kr_infer_get_info(const kr_infer *inf);

/** Finished items go to @p next (the refine stage's queue); call before the stage starts. */
void kr_infer_connect(kr_infer *inf, kr_queue *next);

/** Model people: the people keyers' parameters (NULL in other modes, and for the automatic
 *  switch's keyers). */
const keyer_people_params *kr_infer_people_params(const kr_infer *inf);

/** Model people: a later stage (people_stage.h) runs the keyers; each item leaves with its
 *  whole-frame person detections (frame pixels) in kr_item::dets and no mask. Call before the
 *  stage starts. */
void kr_infer_people_later(kr_infer *inf);

/**
 * Stream @p stream's frames keyed in people mode so far: all of them with model people, the
 * switch's with params.auto_people, else 0. Safe while the stage runs.
 */
int64_t kr_infer_people_frames(const kr_infer *inf, int stream);

/** 1 when the stage switches streams to people mode by itself (params.auto_people took). */
int kr_infer_auto_people(const kr_infer *inf);

/** Frames inferred on the CPU (hybrid runs included) and on CUDA so far. */
void kr_infer_frames(kr_infer *inf, int64_t *cpu, int64_t *cuda);

#endif
