/*
 * The keying session's state (internal, prefix kr_), shared by session.c (parameters, set-up,
 * the stages, running, the stream calls) and report.c (reports).
 * No stage sees it: stages get a kr_stage_ctx (stage.h), streams a kr_stream_env (stream.h).
 *
 * One such object is an *engine*: the whole pipeline on one device. The public keyer_session
 * functions (engines.c) forward to the kr_engine_* functions below for a session on one
 * device; a session over several GPUs is an engine that never starts and holds the engines
 * of its GPUs in @c group (engines.c owns it; nothing here touches it).
 *
 * Topology (one row per thread kind):
 *
 *   per stream   read ──ingest──▶ prepare ─┐                          ┌─▶ reorder ─▶ write
 *   shared                                 └─▶ [detect] ─▶ [mesh] ─▶ infer ─▶ refine ─▶ composite ×W
 *
 * The model stages (model_stage.h) are the keying model (infer.c), the session's detector
 * (detect.c, params.detect) and its face mesh (mesh.c, params.mesh); in passthrough the detector hands its items straight to the
 * streams' reorder buffers. The writer calls detect_fn and draws its overlay on the output
 * frame where that frame is (sink.c).
 */
#ifndef KEYER_PIPELINE_SESSION_H
#define KEYER_PIPELINE_SESSION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "keyer/pipeline.h"
#include "pipeline/composite.h"
#include "pipeline/detect.h"
#include "pipeline/infer.h"
#include "pipeline/mesh.h"
#include "pipeline/nvml.h"
#include "pipeline/people_stage.h"
#include "pipeline/pose_stage.h"
#include "pipeline/refine.h"
#include "pipeline/stats.h"
#include "pipeline/stream.h"
#include "pipeline/trace.h"

/* Stages, in report order. DETECT (the session's detector, params.detect), MESH (its face
 * mesh, params.mesh) and POSE (its pose landmarks, params.pose) come last so that the report
 * of a session without them lists the first six (seven, eight) only. */
enum { KR_ST_READ = 0, KR_ST_PREPARE, KR_ST_INFER, KR_ST_REFINE, KR_ST_COMPOSITE, KR_ST_WRITE,
       KR_ST_DETECT, KR_ST_MESH, KR_ST_POSE, KR_ST_COUNT };

struct keyer_session {
    keyer_session_params params;
    char *model_name;      /* copy of params.model, or NULL */
    char *background_path; /* copy of params.background, or NULL */
    keyer_model_desc model_desc; /* copy of *params.model_desc (params.model_desc points here) */
    const keyer_logger *logger;
    keyer_logger logger_copy;
    atomic_int warnings;
    atomic_int cancel;     /* stop reading */
    atomic_int gpu_failed; /* a GPU error moved the work to the CPU */
    int fail_cuda_at;      /* KEYER_FAIL_CUDA_AT_FRAME, -1: off */
    kr_stage_ctx ctx;      /* what the stages and streams get */
    kr_stream_env env;

    /* devices */
    const kr_device_fns *dev; /* CUDA table when computing on CUDA */
    int ordinal;
    int use_cuda;             /* the pixel stages run on CUDA */
    int infer_cuda;           /* the models run on CUDA too (else on the CPU, in between) */
    int fell_back;
    char device_name[64];
    kr_nvml *nvml;
    double gpu_util_sum;      /* GPU samples, under stats_lock */
    int64_t gpu_util_samples;
    int64_t gpu_mem_used, gpu_mem_total;

    /* stages */
    char model_used[64];      /* the keying model's name, or "none" */
    kr_infer *infer;          /* the keying model, or NULL (passthrough) */
    kr_detect *detect;        /* the session's detector, or NULL */
    kr_mesh *mesh;            /* the face mesh after it (params.mesh), or NULL */
    kr_pose_stage *pose;      /* the pose landmarks after it (params.pose), or NULL */
    kr_people_stage *people;  /* model people: the people's crops after the keying model's
                               * person detector, or NULL (its statistics: KR_ST_POSE's slot) */
    kr_refine_stage *refine;
    kr_composite_stage *composite;
    keyer_frame *bg_image;    /* still background (host), or NULL */
    int started;
    int batch, depth, workers, threads;
    int stream_depth;         /* each stream's input queue (depth, or a share of 4 batches) */
    int refine_workers;
    int serial_threads;       /* threads of the one-worker stages (models, refine) */
    int64_t batch_wait_ns;

    /* streams */
    kr_stream **streams;      /* max_streams entries */
    atomic_int stream_count;
    int run_called;

    /* statistics */
    kr_stage_stats stages[KR_ST_COUNT];
    int stages_ready;
    pthread_mutex_t stats_lock;
    kr_output_stats out;
    kr_batch_counters batches;
    kr_trace *trace;
    keyer_encoder_probe *encoder_probe; /* NVENC on the session's device, for its writers */

    /* completion of file sinks */
    pthread_mutex_t done_lock;
    pthread_cond_t done_cond;
    /* streams moved here from a failed GPU while running (kr_engine_add_continuation) */
    pthread_mutex_t accept_lock;
    int closing;              /* the run waits for no more streams: none is accepted */

    /* first fatal error */
    pthread_mutex_t err_lock;
    keyer_status status;
    keyer_error error;

    /* several GPUs: their engines (engines.c); NULL for a session on one device */
    struct kr_engines *group;
    /* several GPUs: the engines' common start (gate.h), set by engines.c for the run; NULL */
    struct kr_gate *start_gate;
};

/* The engine's calls: each is the public keyer_session_* function of the same name for a
 * session on one device (documented in keyer/pipeline.h), on one engine. */
keyer_status kr_engine_create(const keyer_session_params *params, keyer_session **out,
                              keyer_error *err);
void kr_engine_destroy(keyer_session **session);
void kr_engine_cancel(keyer_session *session);
keyer_status kr_engine_add_file(keyer_session *session, const keyer_file_stream_params *params,
                                int *stream_id, keyer_error *err);
keyer_status kr_engine_run(keyer_session *session, keyer_error *err);
keyer_status kr_engine_stream_status(keyer_session *session, int stream_id, keyer_error *err);
keyer_status kr_engine_open_stream(keyer_session *session, const keyer_stream_params *params,
                                   int *stream_id, keyer_error *err);
keyer_status kr_engine_send_frame(keyer_session *session, int stream_id,
                                  const keyer_frame *frame, keyer_error *err);
keyer_status kr_engine_receive_frame(keyer_session *session, int stream_id, keyer_frame *out,
                                     int64_t timeout_us, keyer_error *err);
keyer_status kr_engine_close_stream(keyer_session *session, int stream_id, keyer_error *err);
void kr_engine_get_report(keyer_session *session, keyer_session_report *out);
int kr_engine_stream_count(const keyer_session *session);
keyer_status kr_engine_get_stream_report(keyer_session *session, int stream_id,
                                         keyer_stream_report *out, keyer_error *err);
keyer_status kr_engine_write_trace(keyer_session *session, const char *path, keyer_error *err);

/** Where a continuation stream starts (kr_engine_add_continuation). */
typedef struct kr_continuation {
    struct kr_handoff *handoff; /* shared with the stream it continues (not owned) */
    int64_t resume_pts;         /* its first frame: the first with pts >= this */
    int64_t seq_base;           /* that frame's number in the stream (for the callbacks) */
} kr_continuation;

/**
 * GPU-to-GPU failover: adds to a *running* engine a file stream that continues a stream of
 * a failed GPU's engine (@p params: the same input and output), reading on NVDEC of this
 * engine from @p c->resume_pts, numbering its frames from @p c->seq_base and writing with the
 * writer the first stream hands over through @p c->handoff (its own output is not opened).
 * The engine's run waits for it. *@p stream_id receives the engine's id for it.
 * Errors: UNSUPPORTED (the engine has not started, its run is finishing, its own GPU failed,
 * it was cancelled, or it holds max_streams streams), and those of opening the input.
 */
keyer_status kr_engine_add_continuation(keyer_session *session,
                                        const keyer_file_stream_params *params,
                                        const kr_continuation *c, int *stream_id,
                                        keyer_error *err);

/** Sets the failover hook of the engine's file streams (kr_stream_env::failover); before its
 *  run. */
void kr_engine_set_failover(keyer_session *session,
                            int (*fn)(void *opaque, kr_stream *st, int64_t last_pts,
                                      int64_t frames),
                            void *opaque);

/** Marks the engine's device failed, as a CUDA error in a stage does (a warning naming
 *  @p why; CUDA items move to the CPU, file streams to another GPU through the hook). For
 *  tests of the failover on engines without a GPU. */
void kr_engine_mark_failed(keyer_session *session, const char *why);

/**
 * The report of @p count engines together (report.c): frames, batches and warnings summed,
 * latency and stage histograms merged, the wall time from the first engine's start to the
 * last frame of any, the device "cuda:0 + cuda:1" (each engine's, with its GPU failure),
 * model and batch of the first engine. keyer_session_get_report() of one engine is this with
 * @p count 1.
 */
void kr_engines_get_report(keyer_session *const *engines, int count, keyer_session_report *out);

/**
 * The keying model an engine would choose by aspect ratio from its streams so far (its own
 * params.model when set): "selfie" or "selfie-landscape".
 */
const char *kr_engine_auto_model(keyer_session *session);

/**
 * Sets the keying model of an engine that has not started (several GPUs choose one model
 * for all). Errors: INVALID_ARGUMENT (already started), OUT_OF_MEMORY.
 */
keyer_status kr_engine_set_model(keyer_session *session, const char *name, keyer_error *err);

/**
 * Starts an engine's shared stages once its streams are known (engine_start.c): loads its
 * models, chooses its device (CUDA, else the CPU when AUTO), fixes batches, queues and
 * workers, fills the streams' environment and starts the stages' threads. Does nothing when
 * already started. Errors: those of loading the models, the device and the stages.
 */
keyer_status kr_engine_start(keyer_session *session, keyer_error *err);

#endif
