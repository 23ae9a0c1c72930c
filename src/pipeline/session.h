/*
 * The keying session's state (internal, prefix kr_), shared by session.c (parameters, set-up,
 * the stages, running, the public stream calls) and report.c (reports and statistics files).
 * No stage sees it: stages get a kr_stage_ctx (stage.h), streams a kr_stream_env (stream.h).
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
#include "pipeline/refine.h"
#include "pipeline/stats.h"
#include "pipeline/stream.h"
#include "pipeline/trace.h"

/* Stages, in report order. DETECT (the session's detector, params.detect) and MESH (its face
 * mesh, params.mesh) come last so that the report of a session without them lists the first
 * six (seven) only. */
enum { KR_ST_READ = 0, KR_ST_PREPARE, KR_ST_INFER, KR_ST_REFINE, KR_ST_COMPOSITE, KR_ST_WRITE,
       KR_ST_DETECT, KR_ST_MESH, KR_ST_COUNT };

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

    /* first fatal error */
    pthread_mutex_t err_lock;
    keyer_status status;
    keyer_error error;
};

#endif
