/*
 * Rounds of a cropping model stage (internal, prefix kr_rounds_): the machinery that the face
 * mesh (mesh.c), the pose stage (pose_stage.c) and the people stage (people_stage.c) share,
 * written once; the cropping stage object (crop_stage.h) owns them with the model stage.
 *
 * Both run a landmark model on crops cut from the frames of a batch's items, across streams,
 * and a stream's frames depend on each other (tracking: a frame's crops come from the previous
 * frame's landmarks). So kr_rounds_run_batch() runs a batch in rounds of at most one frame per
 * stream, each stream's frames in order. Per round:
 *  - ready: CUDA items move to the CPU after a GPU failure (kr_item_demote with the stage's
 *    @c need), else the stage's stream waits for them; each item gets its stream's state (a
 *    tracker, an analyser: the owner's @c state op, made at the stream's first frame), NULL
 *    for items not run (failed, lost);
 *  - steps: the owner's steps on the round (its crops through kr_rounds_crops());
 *  - on an error the states are reset (tracking dropped, as the per-stream objects do on an
 *    error) and, when CUDA items took part and the error was the device's, the round is
 *    readied again (now on the CPU: kr_stage_device_error() marked the GPU failed) and runs
 *    once more; items that still fail are marked failed with the error;
 *  - the round's items go on to the next stage when it ends (kr_model_stage_hand_on), not
 *    at the batch's end, each stream's items in order; the steps may hand on a frame that is
 *    over before the round ends (kr_rounds_finish). Items not run go on when nothing of
 *    their stream is before them.
 *
 * kr_rounds_crops() runs one pass of a round's crops (crops that do not depend on each other):
 * the CUDA items' first, then the host items'. Host crops (and CUDA items' crops with a
 * CPU-only model: cropped on the GPU, brought down, run on the CPU) run through the runtime of
 * the largest power of two not above what is left, exactly as before. CUDA crops run through
 * the runtime of the smallest power of two holding them (at most the stage's batch; the rest
 * of that runtime's batch is padding, its outputs never read), each chunk queued on the
 * stage's stream with its outputs copied into the owner's page-locked host buffer at the
 * chunk's place, and the host waits once per pass (or when that buffer is full): one model
 * run and one synchronisation for a pass of up to batch crops.
 *
 * Thread safety: one object per stage, used by the stage's thread.
 */
#ifndef KEYER_PIPELINE_CROP_ROUNDS_H
#define KEYER_PIPELINE_CROP_ROUNDS_H

#include "keyer/pipeline.h"
#include "pipeline/model_stage.h"

/** What a cropping stage does in its rounds. */
typedef struct kr_rounds_ops {
    const char *name; /* "pose", "mesh": the failed items' errors */
    /* Clears what the stage writes into @p it, at the start of its batch. */
    void (*clear)(kr_item *it);
    /* The state (tracker, analyser) of stream @p id, made at its first frame, into *@p out.
     * Errors: as the state's create (prefixed with the stage's name). */
    keyer_status (*state)(void *opaque, int id, void **out, keyer_error *err);
    /* Runs the round: items round[0 .. k), each with states[j] (NULL: not run). An error
     * fails the round (the machinery resets the states and retries on the CPU after a GPU
     * failure). */
    keyer_status (*steps)(void *opaque, kr_model_stage *ms, kr_item *const *round,
                          void *const *states, int k, keyer_error *err);
    /* Drops the tracking of @p state (NULL accepted). */
    void (*reset)(void *state);
} kr_rounds_ops;

/** How one pass's chunks run and come back (see kr_rounds_crops()). */
typedef struct kr_crops_ops {
    /* Runs crops ord[0 .. n) of the pass (all of items on CUDA when @p cuda, else on the
     * host) through the runtime of batch 2^lg (n <= 2^lg; n < 2^lg only when @p deferred).
     * @p deferred (CUDA items, CUDA runtime): the work is only queued on the stage's stream,
     * the outputs copied to host places at .. at + n of the owner's page-locked buffer, read
     * by take after the stream is synchronised; else the outputs are handed to the crops
     * before it returns. */
    keyer_status (*chunk)(void *opaque, const int *ord, int n, int lg, int cuda, int deferred,
                          int at, keyer_error *err);
    /* Hands crops ord[0 .. n) the outputs at host places 0 .. n (the stream is synchronised). */
    keyer_status (*take)(void *opaque, const int *ord, int n, keyer_error *err);
} kr_crops_ops;

/** Counters of a stage's rounds (read when the stage has stopped, or approximately). */
typedef struct kr_rounds_counters {
    atomic_llong batches; /* batches run */
    atomic_llong rounds;  /* rounds run (a retry on the CPU counts again) */
    atomic_llong passes;  /* kr_rounds_crops() calls with crops */
    atomic_llong runs;    /* model runs (chunks) */
    atomic_llong crops;   /* crops run */
    atomic_llong padded;  /* padding crops in the CUDA runs */
    atomic_llong syncs;   /* host waits for the stage's stream */
    atomic_llong runs_by_lg[KR_MAX_BATCH_LOG2 + 1]; /* runs by log2 of the runtime's batch */
    atomic_llong round_ns; /* time in rounds */
    atomic_llong wait_ns;  /* of it, in the host waits */
} kr_rounds_counters;

typedef struct kr_rounds kr_rounds;

/** A stage's rounds for batches of up to @p batch items (>= 1), passes of up to @p crop_cap
 *  crops (>= 1) and up to @p out_cap deferred crops between two waits (>= 1: the owner's host
 *  output places); @p ops and @p opaque are kept. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY. */
keyer_status kr_rounds_create(const kr_rounds_ops *ops, void *opaque, int batch, int crop_cap,
                              int out_cap, kr_rounds **out, keyer_error *err);

/** Frees it; accepts NULL; sets *r NULL. */
void kr_rounds_destroy(kr_rounds **r);

/**
 * The model stage's batch op for a cropping stage: clears the @p n items (ops->clear), then
 * runs them in rounds as the file comment says, handing them on as they are over (their
 * places in @p items become NULL; the model stage hands on the rest at the batch's end).
 * Items already failed or lost are left alone; items that fail are marked with
 * kr_item_fail(). Never fails itself.
 */
void kr_rounds_run_batch(kr_rounds *r, kr_model_stage *ms, kr_item **items, int n);

/**
 * Runs one pass of @p n crops (0 .. crop_cap):
 * crop c belongs to an item on CUDA when cuda[c]. The chunks go to @p cops as the file comment
 * says (the stage's batch caps a run), CUDA items' first. Returns the first error (the pass
 * stops there).
 */
keyer_status kr_rounds_crops(kr_rounds *r, kr_model_stage *ms, const int *cuda, int n,
                             const kr_crops_ops *cops, void *opaque, keyer_error *err);

/**
 * For the owner's steps: the frame of round position @p j is over (its result is in its item;
 * its state as the frame left it) before the round ends: the item goes on to the next stage
 * now (kr_model_stage_hand_on), after the items of its stream before it in the batch. The
 * round's state at @p j becomes NULL (the steps must not touch the item again): a failure of
 * the rest of the round neither resets that state nor runs that frame again. The other
 * positions go on when their round ends (each round's items are handed on then, before the
 * batch's next round).
 */
void kr_rounds_finish(kr_rounds *r, kr_model_stage *ms, int j);

/** Counts a pass, or a model run of @p crops crops on the runtime of batch 2^@p lg, that the
 *  owner ran itself (not through kr_rounds_crops()). */
void kr_rounds_note_pass(kr_rounds *r);
void kr_rounds_note_run(kr_rounds *r, int crops, int lg);

/** Adds its counters into @p out (NULL @p r: nothing). */
void kr_rounds_report_add(const kr_rounds *r, keyer_rounds_report *out);

#endif
