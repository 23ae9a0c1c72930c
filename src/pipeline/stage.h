/*
 * What the session hands every stage and stream (internal, prefix kr_): logging, tracing,
 * the shared GPU-failure flag, and one function through which failures travel back up.
 *
 * A stage never calls the session: it reports a fatal error (of one stream or of the whole
 * session), a GPU failure (after which every stage moves its items to the CPU) or the end of
 * a file sink through @c report, and reads @c gpu_failed and @c cancel. The session owns the
 * context and everything it points to, and keeps them alive until every stage has stopped.
 *
 *     kr_stage_fail(ctx, it->stream, status, &err);   // the stream's and session's error
 *     if (kr_stage_gpu_failed(ctx)) ...               // move CUDA items to the CPU
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef KEYER_PIPELINE_STAGE_H
#define KEYER_PIPELINE_STAGE_H

#include <stdatomic.h>

#include "keyer/log.h"
#include "keyer/status.h"
#include "pipeline/trace.h"

/** What a stage reports to the session. */
typedef enum kr_report {
    /** A fatal error, of stream @p stream when >= 0: the stream's and the session's first
     *  errors record it, and the session stops reading everywhere. */
    KR_REPORT_ERROR = 0,
    /** A GPU failure: the session sets gpu_failed (once, with a warning) so that every stage
     *  moves to the CPU. */
    KR_REPORT_GPU_FAILURE,
    /** The file sink of stream @p stream finished (no error: status is KEYER_OK). */
    KR_REPORT_SINK_DONE,
} kr_report;

typedef struct kr_stage_ctx {
    const keyer_logger *logger; /* may be NULL */
    kr_trace *trace;            /* may be NULL */
    atomic_int *warnings;       /* warnings logged so far (kr_stage_warn counts them) */
    atomic_int *gpu_failed;     /* non-zero once a GPU failure was reported */
    atomic_int *cancel;         /* non-zero once reading must stop */
    /* Takes a report; @p err may be NULL. Called from any thread; returns at once. */
    void (*report)(void *opaque, kr_report what, int stream, keyer_status status,
                   const keyer_error *err);
    void *opaque;
} kr_stage_ctx;

/** Non-zero once a GPU failure was reported: CUDA items move to the CPU. */
static inline int kr_stage_gpu_failed(const kr_stage_ctx *ctx)
{
    return atomic_load(ctx->gpu_failed);
}

/** Non-zero once the session stops reading. */
static inline int kr_stage_cancelled(const kr_stage_ctx *ctx)
{
    return atomic_load(ctx->cancel);
}

/** Reports a fatal error (of stream @p stream when >= 0). */
static inline void kr_stage_fail(const kr_stage_ctx *ctx, int stream, keyer_status status,
                                 const keyer_error *err)
{
    ctx->report(ctx->opaque, KR_REPORT_ERROR, stream, status, err);
}

/** Reports a GPU failure. */
static inline void kr_stage_gpu_failure(const kr_stage_ctx *ctx, const keyer_error *err)
{
    ctx->report(ctx->opaque, KR_REPORT_GPU_FAILURE, -1, KEYER_STATUS_DEVICE, err);
}

/**
 * A CUDA call failed with @p status: a device error (DEVICE, OUT_OF_MEMORY) is reported as a
 * GPU failure and returns 1 (the caller moves its work to the CPU and tries again); any other
 * status returns 0 (an error of the item).
 */
static inline int kr_stage_device_error(const kr_stage_ctx *ctx, keyer_status status,
                                        const keyer_error *err)
{
    if (status == KEYER_STATUS_DEVICE || status == KEYER_STATUS_OUT_OF_MEMORY) {
        kr_stage_gpu_failure(ctx, err);
        return 1;
    }
    return 0;
}

/** Logs a warning and counts it. */
void kr_stage_warn(const kr_stage_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
