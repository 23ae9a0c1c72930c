/*
 * The session's internals, shared by session.c (set-up, devices, reports), stream.c (streams,
 * pools, file and pushed sources and sinks) and stages.c (the shared stage workers).
 *
 * Topology (one row per thread kind):
 *
 *   per stream   read ──ingest──▶ prepare ─┐                        ┌─▶ reorder ─▶ write
 *   shared                                 └─infer_q─▶ infer ─refine_q─▶ refine ─comp_q─▶ composite ×W
 *
 * With the session's detector (params.detect, detect.c), prepare also makes the detector's
 * input and hands the item to detect first (detect_q ─▶ detect, batched across streams), which
 * passes it to infer_q, or, in passthrough, straight to the stream's reorder buffer. The
 * writer calls detect_fn and draws its overlay on the output frame where that frame is.
 *
 * A frame travels as a kr_item taken from its stream's pool (allocated when the stream
 * starts) and returned by the sink. The per-stream prepare thread numbers frames (seq) after
 * the only point where a live input may drop frames, and everything up to refine is FIFO,
 * so refine sees each stream in order (its temporal state needs that); the composite workers
 * finish in any order and the reorder buffer restores it for the sink.
 *
 * Devices: an item is computed on CUDA (on_cuda) or on the CPU, decided by prepare. Each
 * stage holds CPU and CUDA objects, made when first needed. After a GPU failure
 * (gpu_failed), every stage downloads the inputs of CUDA items it receives and continues on
 * the CPU (demotion); a failed download marks the item lost.
 */
#ifndef KEYER_PIPELINE_SESSION_INTERNAL_H
#define KEYER_PIPELINE_SESSION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "keyer/effects.h"
#include "keyer/io.h"
#include "keyer/nn.h"
#include "keyer/pipeline.h"
#include "keyer/registry.h"
#include "core/device.h"
#include "pipeline/nvml.h"
#include "pipeline/queue.h"
#include "pipeline/reorder.h"
#include "pipeline/stats.h"
#include "pipeline/trace.h"

/* Stages, in report order. DETECT (the session's detector, params.detect) comes last so that
 * the report of a session without detection lists the first six only. */
enum { KR_ST_READ = 0, KR_ST_PREPARE, KR_ST_INFER, KR_ST_REFINE, KR_ST_COMPOSITE, KR_ST_WRITE,
       KR_ST_DETECT, KR_ST_COUNT };

/** Largest log2 of the batch: runtimes exist for batch 1, 2, 4, ... 64. */
#define KR_MAX_BATCH_LOG2 6
#define KR_MAX_COMPOSITE_WORKERS 16

struct kr_stream;

/** Buffers of one item in one memory (host or CUDA). */
typedef struct kr_item_bufs {
    void *tensor;            /* model input of one frame (float H x W x 3) */
    float *mask;             /* model mask of one frame (float mh x mw) */
    keyer_frame *mask_frame; /* GRAYF32 view of mask */
    keyer_frame *alpha;      /* GRAY8 matte, frame size */
    keyer_frame *out;        /* composite output */
    keyer_frame *staged;     /* the input frame copied into this memory when needed */
    keyer_frame *bg;         /* background video frame copied into this memory */
    void *det_tensor;        /* detector input of one frame (float det_h x det_w x 3) */
    int tensors_ready;       /* tensor, mask, mask_frame and det_tensor allocated */
    int ready;               /* everything allocated */
} kr_item_bufs;

typedef struct kr_item {
    struct kr_stream *stream;
    int64_t seq;             /* frame number in its stream (set by prepare) */
    keyer_frame *frame;      /* the input frame (a reference) */
    keyer_frame *input_copy; /* pushed frames without buffers are copied here (made once) */
    keyer_frame *bg_src;     /* background video frame (a reference), or empty */
    const keyer_frame *src;  /* what the stages process: frame, or bufs[...].staged */
    const keyer_frame *bg;   /* background frame for the composite, or NULL */
    kr_item_bufs host, cuda;
    int on_cuda;             /* computed on CUDA */
    int lost;                /* lost in a GPU failure: passed along, not written */
    int failed;              /* a stage failed on it: passed along, not written */
    keyer_prepare_geometry geom;
    keyer_prepare_geometry det_geom; /* where the frame went in the detector's input */
    int n_dets;              /* detections of this frame (frame pixels), best first */
    keyer_detection dets[KEYER_SESSION_MAX_DETECTIONS];
    int64_t t_in;            /* when it entered (read or sent) */
    int64_t t_start;         /* start of its current stage (for traces) */
} kr_item;

/** The stream's source and sink kinds. */
enum { KR_SOURCE_READER = 0, KR_SOURCE_PUSH };
enum { KR_SINK_WRITER = 0, KR_SINK_PULL, KR_SINK_DISCARD };

/** Returns received frames' items to their pool, even after the session is gone. */
typedef struct kr_pool_home {
    atomic_int refs;
    pthread_mutex_t lock;
    int alive;
    kr_queue *free_items;
} kr_pool_home;

typedef struct kr_stream {
    keyer_session *session;
    int id;
    int source, sink;
    int live;
    int started;
    /* geometry of the frames */
    int width, height;
    keyer_pixel_format format;
    keyer_memory_type memory; /* where the source delivers frames */
    keyer_rational time_base, frame_rate;
    /* reader source */
    char *input;
    keyer_reader *reader;       /* atomic-published for cancel: see reader_pub */
    _Atomic(keyer_reader *) reader_pub;
    keyer_reader_params reader_params;
    keyer_video_info info;
    keyer_reader *bg_reader;    /* background video, or NULL */
    int64_t bg_start_pts;
    /* writer sink */
    char *output;
    keyer_writer_params writer_params;
    int copy_streams;
    keyer_writer *writer;
    char encoder[32];
    /* pool and queues */
    kr_item *items;
    int nitems;
    kr_queue *free_items;
    kr_pool_home *home;         /* for received frames */
    kr_queue *ingest;           /* source -> prepare */
    kr_reorder *done;           /* composite -> sink */
    /* threads */
    pthread_t reader_thread, prepare_thread, sink_thread;
    int reader_running, prepare_running, sink_running;
    atomic_int sink_finished;
    /* per-stream stage objects */
    keyer_prepare *prep[2]; /* [0] CPU, [1] CUDA */
    keyer_prepare *det_prep[2]; /* the detector's input, [0] CPU, [1] CUDA */
    keyer_overlay *overlay; /* what detect_fn draws (params.detect) */
    keyer_frame *drawn;     /* passthrough: the input copied to draw on (made once) */
    void *prep_stream;      /* CUDA stream of prepare and its copies */
    void *sink_stream;      /* CUDA stream of the sink's downloads */
    int64_t next_seq;       /* prepare: number of the next frame */
    keyer_frame *hook_in;   /* host copies for frame_fn when a frame is on the GPU (made once) */
    keyer_frame *hook_out;
    int geometry_warned;    /* a frame of another size or format was skipped (logged once) */
    int bg_warned;          /* the background video could not be read (logged once) */
    int64_t last_pts;
    /* counters */
    atomic_llong frames_read, frames_written, frames_dropped, frames_damaged, frames_lost;
    atomic_int closed;      /* push: no more sends */
    /* first error of this stream */
    pthread_mutex_t err_lock;
    keyer_status status;
    keyer_error error;
} kr_stream;

/** A composite worker's objects: one per stream and device, made on first use. */
typedef struct kr_comp_worker {
    keyer_session *session;
    int index;
    keyer_composite **comp[2]; /* [device][stream] */
    int *bg_set[2];            /* [device][stream]: still background already set */
    void *cuda_stream;
    pthread_t thread;
    int running;
    int track;
} kr_comp_worker;

struct keyer_session {
    keyer_session_params params;
    char *model_name;      /* copy of params.model, or NULL */
    char *background_path; /* copy of params.background, or NULL */
    const keyer_logger *logger;
    keyer_logger logger_copy;
    atomic_int warnings;
    atomic_int cancel;     /* stop reading */
    atomic_int abort;      /* stop everything (destroy) */
    int fail_cuda_at;      /* KEYER_FAIL_CUDA_AT_FRAME, -1: off */

    /* devices */
    const kr_device_fns *dev; /* CUDA table when computing on CUDA */
    int ordinal;
    int use_cuda;             /* the pixel stages run on CUDA */
    int infer_cuda;           /* the inference runs on CUDA too (else on the CPU, in between) */
    atomic_int gpu_failed;    /* a GPU error moved the work to the CPU */
    int fell_back;
    char device_name[64];
    kr_nvml *nvml;
    double gpu_util_sum;
    int64_t gpu_util_samples;
    int64_t gpu_mem_used, gpu_mem_total;

    /* model */
    const keyer_model_entry *entry; /* registry entry, or NULL for a path */
    char model_used[64];
    keyer_model *model;
    int in_w, in_h;          /* model input */
    int mask_w, mask_h, mask_c, mask_index, mask_logit;
    size_t tensor_bytes;     /* one frame's input */
    size_t mask_bytes;       /* one frame's mask (one channel) */
    int letterbox;
    float in_scale, in_offset;

    /* the session's detector (params.detect) */
    char det_name[32];
    keyer_model *det_model;
    keyer_detector *decoder;  /* anchors, decoding, weighted NMS */
    int det_w, det_h;         /* its input */
    int det_boxes, det_scores; /* output indices */
    size_t det_box_count, det_score_count; /* values per frame */
    size_t det_tensor_bytes;
    int det_cuda;             /* CUDA runtimes exist for it */
    keyer_runtime *det_rt[2][KR_MAX_BATCH_LOG2 + 1];
    float *det_out;           /* host copy of a CUDA batch's outputs */
    kr_queue *detect_q;
    void *detect_stream;
    pthread_t detect_thread;
    int detect_running;
    int track_detect;

    /* shared stages */
    int started;
    int batch, depth, workers, threads;
    int serial_threads;       /* threads of the one-worker stages (infer, refine) */
    int64_t batch_wait_ns;
    kr_queue *infer_q, *refine_q, *comp_q;
    keyer_runtime *rt[2][KR_MAX_BATCH_LOG2 + 1]; /* [device][log2 batch] */
    void *infer_stream;
    keyer_refine *refine[2];
    void *refine_stream;
    kr_comp_worker comp_workers[KR_MAX_COMPOSITE_WORKERS];
    pthread_t infer_thread, refine_thread;
    int infer_running, refine_running;
    keyer_frame *bg_image[2]; /* still background, host [0] and device [1] copies */

    /* streams */
    kr_stream **streams;      /* max_streams entries */
    atomic_int stream_count;
    int run_called;

    /* statistics */
    kr_stage_stats stages[KR_ST_COUNT];
    int stages_ready;
    pthread_mutex_t stats_lock;
    kr_histogram e2e;
    int64_t t_start, t_last;
    atomic_llong batches, batch_frames, batches_full;
    atomic_llong frames_cpu, frames_cuda;
    kr_trace *trace;
    int track_infer, track_refine;

    /* completion of file sinks */
    pthread_mutex_t done_lock;
    pthread_cond_t done_cond;

    /* first fatal error */
    pthread_mutex_t err_lock;
    keyer_status status;
    keyer_error error;
};

/* ---- session.c -------------------------------------------------------------------------- */

/** Logs a warning and counts it. */
void kr_session_warn(keyer_session *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** Records the session's first fatal error and stops reading everywhere. */
void kr_session_fail(keyer_session *s, keyer_status st, const keyer_error *err);

/** Records a GPU failure (once: logs it) so that every stage moves to the CPU. */
void kr_session_gpu_failure(keyer_session *s, const keyer_error *err);

/** Creates the missing runtimes of @p model for batch 1, 2, 4, ... @p batch into @p rts
 *  (indexed by log2 batch) on CUDA or the CPU, queued on @p stream, and with @p warm runs each
 *  once so that lazy set-up does not delay the first frames. Errors name the model (@p name),
 *  the device and the batch. */
keyer_status kr_session_runtimes(keyer_session *s, keyer_model *model, const char *name,
                                 keyer_runtime **rts, int cuda, int batch, void *stream,
                                 int warm, keyer_error *err);

/** Starts the shared stages (device, model, runtimes, threads) once the streams are known. */
keyer_status kr_session_start(keyer_session *s, keyer_error *err);

/** Wakes keyer_session_run() (a file sink finished). */
void kr_session_notify(keyer_session *s);

/* ---- stream.c ---------------------------------------------------------------------------- */

/** Allocates the stream's pool, queues, stage objects, output; starts its threads. */
keyer_status kr_stream_start(kr_stream *st, keyer_error *err);

/** Stops and joins the stream's threads (after the shared stages were cancelled or drained),
 *  finalises its output and frees everything. Sets *st NULL. */
void kr_stream_destroy(kr_stream **st);

/** Records the stream's first error (and the session's when fatal). */
void kr_stream_fail(kr_stream *st, keyer_status status, const keyer_error *err, int fatal);

/** Returns an item to its stream's pool (drops its frame references). */
void kr_item_release(kr_item *it);

/** Makes sure the item's buffers in the given memory exist (all, or the tensor and mask). */
keyer_status kr_item_bufs_ensure(kr_item *it, int cuda, keyer_error *err);
keyer_status kr_item_tensors_ensure(kr_item *it, int cuda, keyer_error *err);

/** Copies @p f (pixels, pts, duration, time base, flags, colour) into *@p slot in CUDA memory
 *  when @p cuda, else host memory, on the stream's sink CUDA stream (synchronised when the
 *  copy ends on the host). The slot is made or reallocated as kr_stage_copy does. */
keyer_status kr_stream_copy_frame(kr_stream *st, keyer_frame **slot, const keyer_frame *f,
                                  int cuda, keyer_error *err);

/** The stream's sink: takes finished items in order; used by the sink thread and receive. */
void kr_stream_account_out(kr_stream *st, kr_item *it);

/* ---- stages.c ---------------------------------------------------------------------------- */

/* What a CUDA item must take along when it moves to the CPU (kr_item_demote). */
enum { KR_NEED_TENSOR = 1, KR_NEED_MASK = 2, KR_NEED_ALPHA = 4, KR_NEED_DET = 8 };

/** A batched inference stage (infer, detect): its queue, its runs per device, where items go
 *  next. The runs take a device-uniform chunk of 2^lg items. */
typedef struct kr_batch_stage {
    const char *name;           /* "infer", "detect" */
    int stage;                  /* KR_ST_* */
    int need;                   /* KR_NEED_* of its input */
    kr_queue *in;
    void *stream;               /* its CUDA stream */
    int cuda;                   /* CUDA runtimes exist (else CUDA items run hybrid) */
    int count_batches;          /* adds to the session's batch counters */
    keyer_status (*cpu_runtime)(keyer_session *s, int lg, keyer_error *err);
    keyer_status (*run_cpu)(keyer_session *s, kr_item **items, int n, int lg, keyer_error *err);
    keyer_status (*run_cuda)(keyer_session *s, kr_item **items, int n, int lg, keyer_error *err);
    keyer_status (*run_hybrid)(keyer_session *s, kr_item **items, int n, int lg,
                               keyer_error *err);
    /* passes a finished item on; non-zero when the next stage is gone */
    int (*forward)(keyer_session *s, kr_item *it);
} kr_batch_stage;

/** Runs a batched stage until its queue is cancelled or closed and empty. */
void kr_batch_stage_run(keyer_session *s, const kr_batch_stage *bs, int track);

/** Moves a CUDA item to the CPU (downloads what @p need names and the frames); marks it lost
 *  when it cannot leave the GPU. */
void kr_item_demote(kr_item *it, int need, void *stream);

/** Marks the item failed and records the error (prefixed with stream, frame and stage). */
void kr_item_fail(kr_item *it, keyer_status rs, keyer_error *e, const char *stage);

/* ---- detect.c ---------------------------------------------------------------------------- */

/** Loads the detector of params.detect and checks its shape. */
keyer_status kr_detect_load(keyer_session *s, keyer_error *err);

/** Creates the detector's runtimes of one device for batch 1, 2, 4, ... @p batch (those
 *  missing), each run once; CUDA also gets the host buffer of a batch's outputs. */
keyer_status kr_detect_runtimes(keyer_session *s, int cuda, int batch, keyer_error *err);

/** Frees the detector, its runtimes and buffers. */
void kr_detect_free(keyer_session *s);

/** Prepares the detector's input of an item whose source is placed (on its device). */
keyer_status kr_detect_prepare(kr_item *it, keyer_error *err);

/** The detect worker (one thread, batches across streams). */
void *kr_detect_main(void *arg);

/** Runs detect_fn for the item and draws what it added on *out (in place when @p own, else on
 *  the stream's copy, which *out then points at). */
keyer_status kr_detect_draw(kr_item *it, const keyer_frame **out, int own, keyer_error *err);

/** Entry points of the shared workers. */
void *kr_infer_main(void *arg);
void *kr_refine_main(void *arg);
void *kr_composite_main(void *arg);

/** The per-stream prepare worker. */
void *kr_prepare_main(void *arg);

/** Moves the item's frame to the memory of its device (staging copy), downloading CUDA
 *  frames for CPU items and uploading host frames for CUDA items. */
keyer_status kr_item_place_source(kr_item *it, keyer_error *err);

/** Downloads one CUDA frame into a host frame (allocated as needed). */
/** Copies @p src into @p *slot (created, and allocated in CUDA memory when @p cuda else host
 *  memory, when missing or of another format, size or memory), on @p stream. */
keyer_status kr_stage_copy(keyer_session *s, keyer_frame **slot, const keyer_frame *src,
                           int cuda, void *stream, keyer_error *err);

keyer_status kr_download_frame(keyer_session *s, keyer_frame *dst, const keyer_frame *src,
                               void *stream, keyer_error *err);

#endif
