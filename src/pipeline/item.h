/*
 * Items: what every stage of the pipeline handles (internal, prefix kr_).
 *
 * A frame travels through the stages as a kr_item taken from its stream's pool (allocated
 * when the stream starts, nothing per frame) and handed back by the sink. An item holds the
 * input frame (a reference), the model inputs made by prepare (one slot per model stage), the
 * keying model's mask, the refined matte and the composite output, in host memory and, for
 * items computed on CUDA (on_cuda), in device memory. Which buffers exist and how large they
 * are is the pool's layout, decided by the session when the stages start.
 *
 * Devices: an item is computed on CUDA or on the CPU, decided by prepare. After a GPU failure
 * every stage moves the CUDA items it receives to the CPU (kr_item_demote: downloads what the
 * next stages read); an item that cannot leave the GPU is marked lost and passed along, not
 * written. A CUDA item's buffers carry an event (bufs.ready): the stage that queued work on
 * them records it on its CUDA stream before handing the item on, and the next stage makes
 * its own stream wait for it (kr_item_wait) instead of the host waiting.
 *
 * Thread safety: an item belongs to one stage at a time; the pool's take and release may be
 * called from any thread.
 */
#ifndef KEYER_PIPELINE_ITEM_H
#define KEYER_PIPELINE_ITEM_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "keyer/effects.h"
#include "keyer/pipeline.h"
#include "pipeline/queue.h"
#include "pipeline/reorder.h"
#include "pipeline/stage.h"

/** Most model inputs an item carries (one per model stage: keying, detection, ...). */
#define KR_ITEM_MAX_INPUTS 4

/* What a CUDA item must take along when it moves to the CPU (kr_item_demote): the model
 * inputs of the slots named, the keying mask, the matte. The frames always come along. */
#define KR_NEED_INPUT(slot) (1 << (slot))
enum { KR_NEED_MASK = 1 << 8, KR_NEED_ALPHA = 1 << 9 };

/** The buffers every item of a stream has: decided once, when the stream starts. */
typedef struct kr_item_layout {
    const kr_stage_ctx *ctx;     /* logging and failure reports */
    const kr_device_fns *dev;    /* the CUDA table when the session computes on CUDA, else NULL */
    int ordinal;                 /* the CUDA device */
    int stream;                  /* the stream's id, for messages */
    int inputs;                  /* model input slots 0 .. inputs - 1 */
    size_t input_bytes[KR_ITEM_MAX_INPUTS];
    int mask_w, mask_h;          /* the keying model's mask; 0: no keying (no mask, matte, output) */
    int width, height;           /* the stream's frames */
    keyer_pixel_format out_format; /* the composite output's format */
    void *copy_stream;           /* CUDA stream of the staging copies of the frames */
    int blocking_events;         /* CUDA: ready events block the waiting thread (cuda_sync block) */
} kr_item_layout;

/** Buffers of one item in one memory (host or CUDA). */
typedef struct kr_item_bufs {
    void *input[KR_ITEM_MAX_INPUTS]; /* model inputs of one frame (float H x W x 3 each) */
    float *mask;             /* keying mask of one frame (float mask_h x mask_w) */
    keyer_frame *mask_frame; /* GRAYF32 view of mask */
    keyer_frame *alpha;      /* GRAY8 matte, frame size */
    keyer_frame *out;        /* composite output */
    keyer_frame *staged;     /* the input frame copied into this memory when needed */
    keyer_frame *bg;         /* background video frame copied into this memory */
    void *ready;             /* CUDA: event recorded after the last work queued on the item */
    int inputs_ready;        /* input, mask, mask_frame and ready allocated */
    int ready_set;           /* CUDA: ready was recorded since the item was taken */
    int complete;            /* everything allocated */
} kr_item_bufs;

struct kr_item_pool;

typedef struct kr_item {
    struct kr_item_pool *pool; /* its stream's pool */
    int stream;              /* its stream's id */
    int64_t seq;             /* frame number in its stream (set by prepare) */
    keyer_frame *frame;      /* the input frame (a reference) */
    keyer_frame *input_copy; /* pushed frames without buffers are copied here (made once) */
    keyer_frame *bg_src;     /* background video frame (a reference), or empty */
    const keyer_frame *src;  /* what the stages process: frame, or bufs.staged */
    const keyer_frame *bg;   /* background frame for the composite, or NULL */
    kr_item_bufs host, cuda;
    int on_cuda;             /* computed on CUDA (device: the layout's ordinal) */
    int lost;                /* lost in a GPU failure: passed along, not written */
    int failed;              /* a stage failed on it: passed along, not written */
    keyer_prepare_geometry geom[KR_ITEM_MAX_INPUTS]; /* where the frame went in each input */
    int n_dets;              /* detections of this frame (frame pixels), best first */
    keyer_detection dets[KEYER_SESSION_MAX_DETECTIONS];
    int n_faces;             /* faces of this frame with their landmarks (face-mesh stage) */
    int faces_cap;           /* room in faces: grows to the most faces a frame had, kept */
    keyer_face *faces;       /* NULL until the face-mesh stage stores faces */
    keyer_pose_result pose;  /* this frame's body pose (pose stage) */
    int64_t t_in;            /* when it entered (read or sent) */
} kr_item;

typedef struct kr_pool_home kr_pool_home;

/** A stream's items. */
typedef struct kr_item_pool {
    kr_item_layout layout;
    kr_item *items;
    int count;
    kr_queue *free;          /* items not in use */
    kr_reorder *done;        /* where the last stage puts finished items (the stream's) */
    kr_pool_home *home;      /* returns received frames' items, even after the pool is gone */
} kr_item_pool;

/**
 * Creates a pool of @p count items laid out as @p layout (copied), finished items going to
 * @p done (not owned). With @p buffers, every item gets its buffers now: in CUDA memory when
 * @p cuda and no GPU failure was reported (a GPU out of memory is reported as a GPU failure
 * and the item gets host buffers instead), else host memory.
 * Errors: OUT_OF_MEMORY, INTERNAL, DEVICE.
 */
keyer_status kr_item_pool_create(const kr_item_layout *layout, int count, int buffers, int cuda,
                                 kr_reorder *done, kr_item_pool **out, keyer_error *err);

/** Wakes and fails every wait for a free item (the stream stops). */
void kr_item_pool_cancel(kr_item_pool *pool);

/**
 * Frees the items and their buffers (the items must be back, or held by received frames:
 * those are freed when the caller drops them). Accepts NULL; sets *pool NULL.
 */
void kr_item_pool_destroy(kr_item_pool **pool);

/** A free item, waiting for one when @p wait; NULL when none (or the pool was cancelled). */
kr_item *kr_item_pool_take(kr_item_pool *pool, int wait);

/** A free item, waiting at most @p timeout_ns; NULL when none came, *@p stopped then 1 when
 *  none will (the pool was cancelled), else 0. */
kr_item *kr_item_pool_take_timed(kr_item_pool *pool, int64_t timeout_ns, int *stopped);

/** Returns an item to its pool (drops its frame references, clears its state). */
void kr_item_release(kr_item *it);

/**
 * A buffer that returns @p it to its pool when its last reference goes (even after the pool
 * was destroyed: then it only frees its bookkeeping), for frames handed to a caller.
 * Errors: OUT_OF_MEMORY.
 */
keyer_status kr_item_ticket(kr_item *it, keyer_buffer **ticket, keyer_error *err);

/** Makes sure the item's buffers in CUDA (@p cuda) or host memory exist: all of them, or the
 *  model inputs and the mask only (kr_item_inputs_ensure). Errors: OUT_OF_MEMORY, DEVICE. */
keyer_status kr_item_bufs_ensure(kr_item *it, int cuda, keyer_error *err);
keyer_status kr_item_inputs_ensure(kr_item *it, int cuda, keyer_error *err);

/** The item's buffers in the memory it is computed in. */
static inline kr_item_bufs *kr_item_bufs_of(kr_item *it)
{
    return it->on_cuda ? &it->cuda : &it->host;
}

/**
 * Moves the item's frame (and background frame) to the memory of its device: it->src and
 * it->bg become the frames themselves or staging copies, on the layout's copy stream.
 * Downloads for CPU items are complete on return; uploads for CUDA items are only queued
 * (the ready event that prepare records on that stream after its own work covers them).
 * Errors: OUT_OF_MEMORY, DEVICE, UNSUPPORTED.
 */
keyer_status kr_item_place_source(kr_item *it, keyer_error *err);

/**
 * A CUDA stage about to queue work on a CUDA item on @p stream: the stream waits for the
 * item's ready event (when one was recorded); the host does not wait. Errors: DEVICE.
 */
keyer_status kr_item_wait(kr_item *it, void *stream, keyer_error *err);

/**
 * A CUDA stage handing a CUDA item on: records the item's ready event after the work queued
 * so far on @p stream. Errors: DEVICE.
 */
keyer_status kr_item_record(kr_item *it, void *stream, keyer_error *err);

/** The host waits until the work on a CUDA item is done (nothing for host items or when no
 *  event was recorded). Errors: DEVICE. */
keyer_status kr_item_sync(kr_item *it, keyer_error *err);

/**
 * Moves a CUDA item to the CPU after a GPU failure: downloads what @p need names (KR_NEED_*)
 * on @p stream after the item's ready event, waits for it, and places the frames in host
 * memory. An item that cannot leave the GPU is marked lost (logged).
 */
void kr_item_demote(kr_item *it, int need, void *stream);

/** Marks the item failed and reports the error (prefixed with stream, frame and @p stage) as
 *  its stream's fatal error. */
void kr_item_fail(kr_item *it, keyer_status status, keyer_error *err, const char *stage);

/** Hands a finished (or failed, or lost) item to its stream's reorder buffer; when that is
 *  gone the error is logged and the item goes back to its pool. */
void kr_item_done(kr_item *it);

/**
 * Copies @p src into *@p slot, which is created, or allocated in CUDA memory of @p ordinal
 * when @p cuda else host memory, when missing or of another format, size or memory; on
 * @p stream (CUDA frames are read on their own device), complete on return. @p dev: the
 * CUDA table or NULL (then the CUDA table when built). Metadata is copied.
 * Errors: OUT_OF_MEMORY, DEVICE, UNSUPPORTED.
 */
keyer_status kr_frame_stage(const kr_device_fns *dev, int ordinal, keyer_frame **slot,
                            const keyer_frame *src, int cuda, void *stream, keyer_error *err);

/**
 * Copies a frame into host frame @p dst (reallocated when its format, size or memory
 * differ): CUDA frames are downloaded on @p stream, complete on return. @p dev as for
 * kr_frame_stage. Errors: OUT_OF_MEMORY, DEVICE, UNSUPPORTED.
 */
keyer_status kr_frame_download(const kr_device_fns *dev, keyer_frame *dst,
                               const keyer_frame *src, void *stream, keyer_error *err);

#endif
