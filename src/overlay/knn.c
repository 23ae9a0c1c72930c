/*
 * The k-nearest-neighbour graph object (include/keyer/overlay.h): checks arguments and hands
 * each frame to its backend (knn_backend.h: the CPU in cpu/knn.c, CUDA in cuda/knn.cu), which
 * keeps the previous frame's edges for the hysteresis.
 */
#include "keyer/overlay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "overlay/knn_backend.h"

struct keyer_knn_graph {
    const kr_knn_backend *backend;
    void *state;
    int max_points;
    void *stream; /* cudaStream_t of a CUDA graph (NULL: the default stream) */
};

keyer_knn_params keyer_knn_params_defaults(void)
{
    keyer_knn_params p;
    memset(&p, 0, sizeof(p));
    p.k = 3;
    p.max_dy = 0;
    p.max_degree = 4;
    p.hysteresis = 0.2f;
    p.cuda = 0;
    p.cuda_device = 0;
    return p;
}

keyer_status keyer_knn_graph_create(const keyer_knn_params *params, int max_points,
                                    keyer_knn_graph **out, keyer_error *err)
{
    if (!params || !out || max_points < 1 || params->k < 1 || params->max_degree < 1 ||
        !(params->hysteresis >= 0) || !isfinite(params->hysteresis) ||
        !isfinite(params->max_dy) || (params->cuda != 0 && params->cuda != 1) ||
        params->cuda_device < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "knn graph: need max_points >= 1, k >= 1, max_degree >= 1, "
                               "finite hysteresis >= 0, finite max_dy, cuda 0 or 1, "
                               "cuda_device >= 0");
    /* Buffers of max_points x k candidates and max_points x max_degree edges. */
    if ((size_t)max_points * (size_t)(params->k > params->max_degree ? params->k
                                                                      : params->max_degree) >
        (size_t)1 << 28)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "knn graph: %d points x k %d / max_degree %d is too large",
                               max_points, params->k, params->max_degree);
    *out = NULL;
    const kr_knn_backend *b = kr_knn_backend_for(params->cuda);
    if (!b)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "knn graph: cuda requested, but keyer was built without CUDA");
    keyer_knn_graph *g = calloc(1, sizeof(*g));
    if (!g)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "knn graph: out of memory");
    g->backend = b;
    g->max_points = max_points;
    keyer_status st = b->create(params, max_points, &g->state, err);
    if (st) {
        free(g);
        return st;
    }
    *out = g;
    return KEYER_OK;
}

void keyer_knn_graph_destroy(keyer_knn_graph **pg)
{
    if (!pg || !*pg)
        return;
    keyer_knn_graph *g = *pg;
    g->backend->destroy(g->state);
    free(g);
    *pg = NULL;
}

keyer_status keyer_knn_graph_set_stream(keyer_knn_graph *g, void *cuda_stream, keyer_error *err)
{
    if (!g)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "knn graph is NULL");
    g->stream = cuda_stream;
    return KEYER_OK;
}

keyer_status keyer_knn_graph_update(keyer_knn_graph *g, const uint32_t *ids, const float *xy,
                                    int n, keyer_knn_edge *edges, int capacity, int *count,
                                    keyer_error *err)
{
    if (!g || !count || n < 0 || capacity < 0 || (n > 0 && (!ids || !xy)) ||
        (capacity > 0 && !edges))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "knn graph: bad arguments");
    if (n > g->max_points)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "knn graph: %d points but the graph was made for %d", n,
                               g->max_points);
    return g->backend->update(g->state, ids, xy, n, edges, capacity, count, g->stream, err);
}
