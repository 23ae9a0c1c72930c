/*
 * A model stage (internal, prefix kr_): one neural network run on batches of items from all
 * streams, on one worker thread. The session makes one for the keying model (infer.c), one
 * for its detector (detect.c) and one for the face mesh (mesh.c, whose batch op crops the
 * faces itself); another model is one more instance.
 *
 * The stage owns the model, its runtimes for batch 1, 2, 4, ... on the CPU and on CUDA, its
 * input queue, its CUDA stream and its thread. Its input is one slot of every item (made by
 * prepare as its kr_model_input says). Per batch it groups the items by device, splits each
 * group into power-of-two chunks, gathers their inputs into the runtime's input and runs it;
 * what the outputs mean belongs to the owner, which reads them through kr_model_stage_ops.
 * CUDA items meet a CPU-only model (CUDA runtimes failed to build) in the hybrid path: the
 * inputs come down, the CPU runs, and upload_outputs (when given) puts the results back.
 * After a GPU failure the stage moves the CUDA items it receives to the CPU (kr_item_demote
 * with the @c need it was opened with) and runs them there; a chunk that fails on CUDA goes
 * again on the CPU.
 *
 * Life cycle: create (model, geometry) -> use_cuda and runtimes (while the session decides
 * its device and batch) -> open (batch, queue) -> start (thread) -> cancel, join -> destroy.
 *
 * Thread safety: set-up and tear-down from the session's thread; the queue from any thread.
 */
#ifndef KEYER_PIPELINE_MODEL_STAGE_H
#define KEYER_PIPELINE_MODEL_STAGE_H

#include "keyer/nn.h"
#include "pipeline/item.h"
#include "pipeline/queue.h"
#include "pipeline/stage.h"
#include "pipeline/stats.h"

/** Largest log2 of the batch: runtimes exist for batch 1, 2, 4, ... 64. */
#define KR_MAX_BATCH_LOG2 6

/** How prepare makes a model stage's input in each item. */
typedef struct kr_model_input {
    int slot;             /* the item's input slot; -1: none (the batch op makes the inputs) */
    int width, height;    /* the model's input (float H x W x 3) */
    int letterbox;        /* keep the aspect ratio (else stretch) */
    float scale, offset;  /* value = rgb * scale + offset */
    int threads;          /* CPU threads of its preparation; 0: a share of the session's */
    const char *what;     /* prefix of its preparation's errors ("detection: "), or "" */
    float mean[3], std[3]; /* then (value - mean[c]) / std[c]; std 0: none */
    int bgr;              /* 1: the tensor's channels are B, G, R */
} kr_model_input;

typedef struct kr_model_stage kr_model_stage;

/** What the stage's owner does with a run's outputs, and where items go next. */
typedef struct kr_model_stage_ops {
    /* Reads the outputs of CPU runtime @p rt, just run on @p n items (host buffers). */
    keyer_status (*cpu_outputs)(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                keyer_error *err);
    /* Takes the outputs of CUDA runtime @p rt, just queued on @p stream for @p n CUDA items;
     * what it leaves in the items' device buffers is ready when the items' events say so. */
    keyer_status (*cuda_outputs)(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                 void *stream, keyer_error *err);
    /* Optional (NULL: nothing): after a CPU run of CUDA items (cpu_outputs filled their host
     * buffers), moves what the next stages read to the device, on @p stream. */
    keyer_status (*upload_outputs)(void *opaque, kr_item **items, int n, void *stream,
                                   keyer_error *err);
    /* Hands a finished (or failed, or lost) item on; non-zero when the next stage is gone
     * (the item then stays the stage's, which returns it to its pool). */
    int (*forward)(void *opaque, kr_item *it);
    /* Optional (NULL: the stage gathers each item's input slot and calls cpu_outputs or
     * cuda_outputs): runs a whole batch itself, for models whose inputs are not one per item
     * (the face mesh: one crop per face). Called with the @p n items of a batch (CUDA items
     * of a session whose GPU failed already moved to the CPU; failed and lost items among
     * them, to be left alone); it reads the runtimes through kr_model_stage_runtime() and
     * marks the items it cannot finish with kr_item_fail(); it may hand finished items on
     * before the batch ends (kr_model_stage_hand_on). The other ops may then be NULL except
     * forward. */
    void (*batch)(void *opaque, kr_model_stage *ms, kr_item **items, int n);
    /* Optional (NULL: nothing): called once a batch's items have all been handed on
     * (forward), before the stage waits for its next batch. A stage whose next stage batches
     * from a queue flushes it here (kr_queue_flush): its items come in whole batches, so the
     * next stage need not wait for more of them (the next batch comes no sooner than this
     * stage's batch time). */
    void (*handed_on)(void *opaque);
} kr_model_stage_ops;

typedef struct kr_model_stage_params {
    const char *name;           /* "infer", "detect": statistics, traces, item errors */
    const char *model_name;     /* the model's name, for messages */
    const char *what;           /* prefix of its runtimes' errors ("detection: "), or "" */
    kr_model_input input;
    const kr_stage_ctx *ctx;
    kr_stage_stats *stats;
    kr_batch_counters *counters; /* NULL: its batches are not counted */
    int threads;                /* CPU threads of its runtimes */
    int fail_cuda_at;           /* the CUDA path fails on the chunk holding this frame; -1 off */
    keyer_precision cuda_precision; /* F32 or F16: of its CUDA runtimes (CPU ones are F32) */
    int urgent;                 /* its CUDA stream has the device's highest priority
                                 * (kr_device_fns::stream_create_urgent): the detector and the
                                 * landmark stages, whose thread waits for every run while the
                                 * streams' frames queue for them */
    const kr_model_stage_ops *ops;
    void *opaque;               /* the ops' */
} kr_model_stage_params;

/** How the stage runs, decided once the session knows its device and batch. */
typedef struct kr_model_stage_run {
    int batch;          /* most items per batch (1..64) */
    int64_t wait_ns;    /* longest wait of an item for its batch */
    int capacity;       /* of the input queue */
    int need;           /* KR_NEED_* of a CUDA item moved to the CPU here */
    int cuda;           /* its CUDA runtimes exist (else CUDA items run hybrid) */
} kr_model_stage_run;

/** Creates a stage owning *@p model (taken: set to NULL, also on failure).
 *  Errors: OUT_OF_MEMORY. */
keyer_status kr_model_stage_create(const kr_model_stage_params *params, keyer_model **model,
                                   kr_model_stage **out, keyer_error *err);

/** Stops it (when running) and frees it with its runtimes and stream; accepts NULL; sets
 *  *ms NULL. */
void kr_model_stage_destroy(kr_model_stage **ms);

/** The stage may run on CUDA device @p ordinal of @p dev: makes its CUDA stream (of the
 *  device's highest priority when the stage is urgent). Errors: DEVICE. */
keyer_status kr_model_stage_use_cuda(kr_model_stage *ms, const kr_device_fns *dev, int ordinal,
                                     keyer_error *err);

/** Back to the CPU only: destroys its CUDA runtimes and stream. */
void kr_model_stage_drop_cuda(kr_model_stage *ms);

/**
 * Creates the missing runtimes for batch 1, 2, 4, ... @p batch on CUDA (@p cuda, queued on
 * the stage's stream) or the CPU, each run once on zeros when @p warm so that lazy set-up
 * does not delay the first frames. Errors (naming the model, device and batch):
 * OUT_OF_MEMORY, DEVICE, UNSUPPORTED (an operator the backend lacks), ...
 */
keyer_status kr_model_stage_runtimes(kr_model_stage *ms, int cuda, int batch, int warm,
                                     keyer_error *err);

/**
 * The schedules of its CUDA runtimes (keyer_runtime_schedule) into @p buf, by batch:
 * "persistent+cluster" when every batch runs the same one, else runs of batches with one
 * schedule, "persistent+cluster at batch 1-8, per-node at 16-64"; "" without CUDA runtimes.
 */
void kr_model_stage_schedules(const kr_model_stage *ms, char *buf, size_t size);

/** Destroys the runtimes of one device. */
void kr_model_stage_drop_runtimes(kr_model_stage *ms, int cuda);

/** Fixes how it runs and makes its input queue. Errors: OUT_OF_MEMORY, INTERNAL. */
keyer_status kr_model_stage_open(kr_model_stage *ms, const kr_model_stage_run *run,
                                 keyer_error *err);

/** Starts its thread, its events traced on @p track. Errors: INTERNAL. */
keyer_status kr_model_stage_start(kr_model_stage *ms, int track, keyer_error *err);

/** Stops now: pushes and pops of its queue fail from here on. */
void kr_model_stage_cancel(kr_model_stage *ms);

/** Waits for its thread (after cancel, or after its queue was closed and drained) and
 *  returns the items still queued to their pools. */
void kr_model_stage_join(kr_model_stage *ms);

/** Its input queue (NULL before open): where the previous stage pushes items. */
kr_queue *kr_model_stage_queue(const kr_model_stage *ms);

/** For an owner's forward op: hands @p it to @p next, or, when @p next is NULL (nothing after
 *  the owner), to its stream's reorder buffer (kr_item_done). Non-zero when @p next is gone
 *  (the item is then still the caller's). */
int kr_model_stage_pass_on(kr_queue *next, kr_item *it);

/**
 * For a batch op (kr_model_stage_ops::batch): hands the finished item *@p slot (one of the
 * batch's items) on now through the forward op, before the rest of its batch, and sets
 * *@p slot NULL so that the stage does not hand it on again when the batch ends (NULL: nothing).
 * The caller must not touch the item afterwards. When the next stage is gone the item goes
 * back to its pool, and so do the batch's other items; the stage stops after the batch.
 * The caller keeps each stream's items in order: an item goes on only after the items of its
 * stream before it in the batch.
 */
void kr_model_stage_hand_on(kr_model_stage *ms, kr_item **slot);

/** Values per item of a model tensor: the product of its dimensions after the batch (a
 *  dynamic dimension, negative, counts 0). */
size_t kr_model_stage_item_elements(const keyer_tensor_info *t);

/** Checks that @p model takes one float [1,S,S,3] image with 8 <= S <= 4096 (the BlazePose
 *  landmark models' crop input) and sets *side to S. Errors: the model's own from reading its
 *  input; BAD_DATA "WHAT: PATH: the input is not one float [1,S,S,3] image" otherwise (*side
 *  unchanged). */
keyer_status kr_model_stage_square_image(keyer_model *model, const char *what, const char *path,
                                         int *side, keyer_error *err);

/** How prepare makes its input. */
const kr_model_input *kr_model_stage_input(const kr_model_stage *ms);

/** Its model. */
keyer_model *kr_model_stage_model(const kr_model_stage *ms);

/** Its runtime of batch 2^@p lg on CUDA (@p cuda) or the CPU, made when missing (the CPU's
 *  after a GPU failure); for the batch op. Errors: as kr_model_stage_runtimes(). */
keyer_status kr_model_stage_runtime(kr_model_stage *ms, int cuda, int lg, keyer_runtime **rt,
                                    keyer_error *err);

/** How it runs (set by open). */
const kr_model_stage_run *kr_model_stage_get_run(const kr_model_stage *ms);

/** Its CUDA stream (NULL before use_cuda or without CUDA). */
void *kr_model_stage_stream(const kr_model_stage *ms);

/** The host waits for the work queued on its CUDA stream. Errors: DEVICE (the failure's
 *  text), INTERNAL (no CUDA stream). */
keyer_status kr_model_stage_sync(kr_model_stage *ms, keyer_error *err);

/** Its parameters' stage context. */
const kr_stage_ctx *kr_model_stage_ctx(const kr_model_stage *ms);

#endif
