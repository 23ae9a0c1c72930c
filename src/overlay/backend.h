/*
 * Overlay renderers: the boundary between keyer_overlay_render() (src/overlay/overlay.c),
 * which validates the frame and resolves everything a renderer needs into a job, and the
 * backends (CPU in cpu/, CUDA in cuda/), which only draw jobs. Both backends compute each pixel
 * with the shading functions of overlay_internal.h, so they agree to one code value.
 *
 * A backend is a table of function pointers (kr_overlay_backend). Its state lives in the
 * overlay (keyer_overlay.state[memory]), is created by the backend on its first render (so a
 * CPU-only user never touches CUDA) and is freed by keyer_overlay_destroy(). Host memory uses
 * kr_overlay_cpu; CUDA memory uses kr_overlay_cuda when keyer is built with CUDA
 * (kr_overlay_backend_for, src/overlay/backends.c, is the one place that knows which exist).
 */
#ifndef KEYER_OVERLAY_BACKEND_H
#define KEYER_OVERLAY_BACKEND_H

#include "keyer/frame.h"
#include "keyer/status.h"
#include "overlay/overlay_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One render: the primitives and the frame, resolved and checked by keyer_overlay_render. */
typedef struct kr_overlay_job {
    const kr_prim *prims; /* count > 0 records, in drawing order (the overlay's) */
    int count;
    int curves;           /* how many of them are curves (KR_PRIM_CURVE): the backend flattens
                             each into its segments (kr_ov_curve_segment) before drawing */
    keyer_frame *frame;   /* RGBA, NV12 or YUV420P in the backend's memory, drawn in place */
    int yuv;              /* 1: NV12 or YUV420P, 0: RGBA */
    kr_ov_yuv yc;         /* conversion constants of the frame's matrix and range */
    void *stream;         /* CUDA: the stream the render is queued on (NULL: default stream) */
} kr_overlay_job;

typedef struct kr_overlay_backend {
    const char *name;
    /**
     * Draws @p job. *@p state is this backend's state in the overlay: NULL on the first call,
     * when the backend creates it (and keeps it there, even when a later step of the call
     * fails); the backend owns it until state_destroy. Required.
     * Errors: OUT_OF_MEMORY, INVALID_ARGUMENT (CUDA: a frame on another device than the
     * overlay's earlier CUDA frames), DEVICE (a CUDA call failed).
     */
    keyer_status (*render)(void **state, const kr_overlay_job *job, keyer_error *err);
    /** Frees a state (CUDA: after the copies still reading its staging memory); accepts
     *  NULL. Required. */
    void (*state_destroy)(void *state);
} kr_overlay_backend;

/** The CPU renderer (src/overlay/cpu/overlay.c). */
extern const kr_overlay_backend kr_overlay_cpu;
/** The CUDA renderer (src/overlay/cuda/overlay.cu); defined only when keyer is built with
 *  CUDA. */
extern const kr_overlay_backend kr_overlay_cuda;

/** The renderer for @p memory, or NULL when this build has none (a CUDA frame in a keyer
 *  built without CUDA, an unknown memory type). */
const kr_overlay_backend *kr_overlay_backend_for(keyer_memory_type memory);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_OVERLAY_BACKEND_H */
