/*
 * Streams of a session (internal, prefix kr_): a source (a file read by its own thread, or
 * frames pushed by the caller), the stream's item pool, its prepare stage, its reorder buffer
 * and a sink (a file written by its own thread, frames pulled by the caller, or nothing).
 *
 *   per stream   source ──ingest──▶ prepare ─▶ (the session's shared stages) ─▶ reorder ─▶ sink
 *
 * Everything a stream needs from its session comes through one kr_stream_env, owned by the
 * session, filled in two steps: what opening a stream reads (context, parameters, statistics)
 * before any stream is added, the rest (devices, pool size, model inputs, first queue) when
 * the stages start, before any stream starts. Streams report errors and the end of their
 * sink through the context (stage.h); the session records a stream's error with
 * kr_stream_record_error.
 *
 * stream.c: opening, starting, stopping, the file source and pushed frames; sink.c: the
 * writer thread, frame_fn and detect_fn, and pulled frames.
 */
#ifndef KEYER_PIPELINE_STREAM_H
#define KEYER_PIPELINE_STREAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "keyer/io.h"
#include "keyer/overlay.h"
#include "keyer/pipeline.h"
#include "pipeline/item.h"
#include "pipeline/model_stage.h"
#include "pipeline/prepare.h"
#include "pipeline/stats.h"

struct kr_stream;
struct kr_handoff;

/** What the session hands its streams. */
typedef struct kr_stream_env {
    /* read when a stream opens */
    const kr_stage_ctx *ctx;
    const keyer_session_params *params; /* the session's */
    atomic_int *stream_count;  /* streams in the session */
    kr_stage_stats *read_stats, *prepare_stats, *write_stats;
    kr_output_stats *out;
    /* read when a stream starts */
    kr_item_layout layout;     /* devices, model inputs, mask (the stream adds its own part) */
    int use_cuda;              /* the stages compute on CUDA (layout.dev is the table) */
    int pool_size;             /* items per stream */
    int depth;                 /* of the ingest queue */
    int buffers;               /* the items need buffers (else the input frame is written) */
    kr_queue *first;           /* the first model stage's queue, or NULL */
    int inputs;                /* model inputs prepare makes, in this order */
    kr_model_input input[KR_ITEM_MAX_INPUTS];
    int threads;               /* CPU threads prepare's shared inputs divide among streams */
    int detect;                /* the session's detector runs: detect_fn draws an overlay */
    int bg_video;              /* the background is a video: one reader per stream */
    keyer_encoder_probe *encoder_probe; /* the session's: writers whose codec is left to keyer */
    /* several GPUs (engines.c): a file stream's reader calls this when its engine's GPU has
     * failed, with the pts of the last frame it read (INT64_MIN: none yet) and the number of
     * frames it read; 1: the rest of the stream moved to another GPU (a continuation there
     * reads on from the next frame and takes over the output: this stream's reader stops,
     * its frames so far are finished here); 0: the stream goes on here, on the CPU. NULL:
     * never moves. Read when the reader starts. */
    int (*failover)(void *opaque, struct kr_stream *st, int64_t last_pts, int64_t frames);
    void *failover_opaque;
} kr_stream_env;

/** Pictures each NVDEC session decodes ahead for a file stream when the session's
 *  decode_ahead is -1 (auto). */
#define KR_DECODE_AHEAD_FILES 4

/** decode_segments -1 (auto): a file stream on NVDEC gets two decoder sessions while its GPU
 *  gets fewer file streams than this (expected_files; 8 x 1080p on an H200: 4,239-4,421
 *  frames/s with two sessions each against 3,653-3,906 with one; 16 streams with one each
 *  already keep the decoders busy). */
#define KR_AUTO_SEGMENTS_BELOW 16

/** The session's decoder knobs (decode_segments, decode_surfaces, decode_ahead,
 *  decode_shared_stream) in @p rp, where the stream's own reader parameters leave them at 0.
 *  @p live: the stream is live, paced (realtime) or in latency mode (decode_ahead -1 gives
 *  it none: it delays each frame; decode_segments -1 one session). decode_segments -1 is
 *  decided here, before the reader opens: two sessions (rp->segments_auto set) for a
 *  stream that NVDEC may decode (rp->device not CPU) when @p sp->expected_files, this
 *  engine's share of the file streams, is 1..KR_AUTO_SEGMENTS_BELOW - 1. */
static inline void kr_stream_decoder_knobs(const keyer_session_params *sp, int live,
                                           keyer_reader_params *rp)
{
    if (rp->segments == 0 && sp->decode_segments > 1)
        rp->segments = sp->decode_segments;
    if (rp->segments == 0 && sp->decode_segments < 0 && !live &&
        rp->device != KEYER_DECODE_DEVICE_CPU && sp->expected_files > 0 &&
        sp->expected_files < KR_AUTO_SEGMENTS_BELOW) {
        rp->segments = 2;
        rp->segments_auto = 1;
    }
    if (rp->hw_surfaces == 0)
        rp->hw_surfaces = sp->decode_surfaces;
    if (rp->decode_ahead == 0)
        rp->decode_ahead = sp->decode_ahead >= 0 ? sp->decode_ahead
                           : live                ? 0
                                                 : KR_DECODE_AHEAD_FILES;
    if (sp->decode_shared_stream)
        rp->hw_shared_stream = 1;
}

/** The stream's source and sink kinds. */
enum { KR_SOURCE_READER = 0, KR_SOURCE_PUSH };
enum { KR_SINK_WRITER = 0, KR_SINK_PULL, KR_SINK_DISCARD };

typedef struct kr_stream {
    const kr_stream_env *env;
    int id;
    int source, sink;
    int live;
    int started;
    int open_failed;        /* the input could not be opened: the stream never starts */
    atomic_int stop;        /* this stream stops reading (its first error was recorded) */
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
    /* items and queues */
    kr_item_pool *pool;
    kr_queue *ingest;           /* source -> prepare */
    kr_reorder *done;           /* last stage -> sink */
    kr_prepare_stage *prepare;
    /* threads */
    pthread_t reader_thread, sink_thread;
    int reader_running, sink_running;
    atomic_int sink_finished;
    /* the sink's objects */
    keyer_overlay *overlay; /* what detect_fn draws (params.detect) */
    keyer_frame *drawn;     /* passthrough: the input copied to draw on (made once) */
    void *prep_stream;      /* CUDA stream of prepare and its copies */
    void *sink_stream;      /* CUDA stream of the sink's downloads */
    keyer_frame *hook_in;   /* host copies for frame_fn when a frame is on the GPU (made once) */
    keyer_frame *hook_out;
    int geometry_warned;    /* a frame of another size or format was skipped (logged once) */
    int bg_warned;          /* the background video could not be read (logged once) */
    /* GPU-to-GPU failover (handoff.h): the handoff this stream takes its output from
     * (continuation 1; NULL: it has no output to take) and the one it gives its output
     * through (moved 1). A continuation may move again: it then has both. */
    struct kr_handoff *handoff_in, *handoff_out;
    int moved;              /* the rest of the input went to a continuation on another GPU */
    int continuation;       /* reads on from resume_pts; its writer comes from handoff_in */
    int64_t resume_pts;     /* continuation: its first frame is the first with pts >= this */
    int64_t seq_base;       /* frame number of its first frame (what the callbacks see) */
    /* a live continuation: the source reopened on this GPU; its frames' pts are shifted to
     * follow the last frame the failed GPU's stream read (switch_pts, its end) by the
     * wall-clock time of the switch (from switch_ns) in whole frames, and the frames that
     * time held are counted as missed, as after a disconnect */
    int64_t switch_ns, switch_pts, pts_shift;
    int shift_known;
    atomic_llong switch_missed;
    double switch_seconds;
    /* counters */
    atomic_llong frames_read, frames_written, frames_dropped, frames_damaged, frames_lost;
    atomic_int closed;      /* push: no more sends */
    /* first error of this stream */
    pthread_mutex_t err_lock;
    keyer_status status;
    keyer_error error;
} kr_stream;

/* ---- stream.c --------------------------------------------------------------------------- */

/**
 * Opens stream @p id reading params->input (the reader opens now, so that a bad file is
 * reported at once). Errors: INVALID_ARGUMENT, IO, BAD_DATA, UNSUPPORTED, OUT_OF_MEMORY.
 */
keyer_status kr_stream_open_file(const kr_stream_env *env, int id,
                                 const keyer_file_stream_params *params, kr_stream **out,
                                 keyer_error *err);

/**
 * Makes stream @p id for an input that could not be opened (@p status, @p cause): it holds
 * the input and output names and that error, never starts and writes nothing.
 * Errors: OUT_OF_MEMORY.
 */
keyer_status kr_stream_open_failed(const kr_stream_env *env, int id,
                                   const keyer_file_stream_params *params, keyer_status status,
                                   const keyer_error *cause, kr_stream **out, keyer_error *err);

/** Opens stream @p id taking pushed frames as @p params describes them.
 *  Errors: INVALID_ARGUMENT, UNSUPPORTED, OUT_OF_MEMORY. */
keyer_status kr_stream_open_push(const kr_stream_env *env, int id,
                                 const keyer_stream_params *params, kr_stream **out,
                                 keyer_error *err);

/** Allocates the stream's pool, queues, stage objects, output; starts its threads (the
 *  session's stages must be started). Errors: OUT_OF_MEMORY, IO, DEVICE, INTERNAL, ... */
keyer_status kr_stream_start(kr_stream *st, keyer_error *err);

/** Interrupts a blocking read of its source (cancel). */
void kr_stream_interrupt(kr_stream *st);

/** Unblocks everything waiting on its queues and pool (stop now). */
void kr_stream_cancel(kr_stream *st);

/** Whether its file sink is still writing. */
int kr_stream_sink_pending(kr_stream *st);

/**
 * The end of a file stream: joins its threads, closes its writer, and sets *@p first and
 * *@p first_err to the writer's or the stream's error when *first is still KEYER_OK.
 */
void kr_stream_finish(kr_stream *st, keyer_status *first, keyer_error *first_err);

/** Stops and joins the stream's threads (after the shared stages were cancelled or drained),
 *  finalises its output and frees everything. Accepts NULL; sets *st NULL. */
void kr_stream_destroy(kr_stream **st);

/** Records the stream's first error (later ones are ignored) and stops the stream alone: its
 *  source stops reading, the frames already read go on to its sink, which stops writing at
 *  the first failed frame; the output is finalised when the stream finishes. */
void kr_stream_record_error(kr_stream *st, keyer_status status, const keyer_error *err);

/** The stream's first error (copied into *err when there is one), or KEYER_OK. */
static inline keyer_status kr_stream_status(kr_stream *st, keyer_error *err)
{
    pthread_mutex_lock(&st->err_lock);
    keyer_status failed = st->status;
    if (failed && err)
        *err = st->error;
    pthread_mutex_unlock(&st->err_lock);
    return failed;
}

/** keyer_session_send_frame on a pushed stream. */
keyer_status kr_stream_send(kr_stream *st, const keyer_frame *frame, keyer_error *err);

/** keyer_session_close_stream on a pushed stream. */
keyer_status kr_stream_close(kr_stream *st, keyer_error *err);

/* ---- sink.c ----------------------------------------------------------------------------- */

/** The sink thread of a stream writing to a file or discarding (arg: the kr_stream). */
void *kr_sink_main(void *arg);

/** keyer_session_receive_frame on a pushed stream without an output file. */
keyer_status kr_sink_receive(kr_stream *st, keyer_frame *out, int64_t timeout_us,
                             keyer_error *err);

#endif
