/*
 * kNN graph backends: the boundary between the public keyer_knn_graph_* functions
 * (src/overlay/knn.c), which check arguments and own the graph object, and the backends that
 * build each frame's graph (CPU in cpu/knn.c, CUDA in cuda/knn.cu). Both compute the same
 * graph, edge for edge, in the same order (the rules are written in include/keyer/overlay.h).
 *
 * A backend is a table of function pointers. Its state (buffers sized at create, and the
 * previous frame's edges for the hysteresis) belongs to the graph object and is freed with it.
 * kr_knn_backend_for (src/overlay/backends.c) is the one place that knows which exist.
 */
#ifndef KEYER_OVERLAY_KNN_BACKEND_H
#define KEYER_OVERLAY_KNN_BACKEND_H

#include <stdint.h>

#include "keyer/overlay.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_knn_backend {
    const char *name;
    /**
     * Creates the state for graphs of up to @p max_points points with the checked params @p p
     * (every buffer allocated here). Required.
     * Errors: OUT_OF_MEMORY, DEVICE (CUDA: a CUDA call failed, or no such device).
     */
    keyer_status (*create)(const keyer_knn_params *p, int max_points, void **state,
                           keyer_error *err);
    /**
     * One frame (arguments checked by keyer_knn_graph_update: n <= max_points, non-NULL
     * arrays): writes up to @p capacity edges and sets *count. @p stream is the CUDA stream
     * of keyer_knn_graph_set_stream (the CPU ignores it). On an error the previous frame's
     * edges are kept. Required.
     * Errors: INVALID_ARGUMENT (an id twice), DEVICE.
     */
    keyer_status (*update)(void *state, const uint32_t *ids, const float *xy, int n,
                           keyer_knn_edge *edges, int capacity, int *count, void *stream,
                           keyer_error *err);
    /** Frees a state; accepts NULL. Required. */
    void (*destroy)(void *state);
} kr_knn_backend;

/** The CPU graph (src/overlay/cpu/knn.c). */
extern const kr_knn_backend kr_knn_cpu;
/** The CUDA graph (src/overlay/cuda/knn.cu); defined only when keyer is built with CUDA. */
extern const kr_knn_backend kr_knn_cuda;

/** The CPU backend for @p cuda 0, the CUDA backend for 1 (NULL when this build has none). */
const kr_knn_backend *kr_knn_backend_for(int cuda);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_OVERLAY_KNN_BACKEND_H */
