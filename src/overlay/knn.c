/*
 * k-nearest-neighbour graph of tracked points with hysteresis: edges from the previous frame
 * are kept (by point id) while they stay short enough, so the drawn graph does not flicker.
 */
#include "keyer/overlay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct keyer_knn_graph {
    keyer_knn_params p;
    int max_points;
    keyer_knn_edge *prev; /* previous frame's edges */
    int n_prev;
    /* scratch */
    float *dist;          /* n x n distances */
    float *kth;           /* per point: distance to its k-th nearest neighbour (within max_dy) */
    int *degree;
    keyer_knn_edge *cand;
    float *cand_len;
    int *order;
};

keyer_knn_params keyer_knn_params_defaults(void)
{
    keyer_knn_params p;
    memset(&p, 0, sizeof(p));
    p.k = 3;
    p.max_dy = 0;
    p.max_degree = 4;
    p.hysteresis = 0.2f;
    return p;
}

keyer_status keyer_knn_graph_create(const keyer_knn_params *params, int max_points,
                                    keyer_knn_graph **out, keyer_error *err)
{
    if (!params || !out || max_points < 1 || max_points > 4096 || params->k < 1 ||
        params->max_degree < 1 || !(params->hysteresis >= 0) || !isfinite(params->max_dy))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "knn graph: need 1 <= max_points <= 4096, k >= 1, max_degree >= 1, "
                               "hysteresis >= 0");
    *out = NULL;
    keyer_knn_graph *g = calloc(1, sizeof(*g));
    if (!g)
        goto oom;
    g->p = *params;
    g->max_points = max_points;
    size_t n = (size_t)max_points, max_edges = n * (size_t)params->max_degree;
    g->prev = malloc(max_edges * sizeof(keyer_knn_edge));
    g->dist = malloc(n * n * sizeof(float));
    g->kth = malloc(n * sizeof(float));
    g->degree = malloc(n * sizeof(int));
    g->cand = malloc(n * (size_t)params->k * 2 * sizeof(keyer_knn_edge));
    g->cand_len = malloc(n * (size_t)params->k * 2 * sizeof(float));
    g->order = malloc(n * sizeof(int));
    if (!g->prev || !g->dist || !g->kth || !g->degree || !g->cand || !g->cand_len || !g->order)
        goto oom;
    *out = g;
    return KEYER_OK;
oom:
    keyer_knn_graph_destroy(&g);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "knn graph: out of memory");
}

void keyer_knn_graph_destroy(keyer_knn_graph **pg)
{
    if (!pg || !*pg)
        return;
    keyer_knn_graph *g = *pg;
    free(g->prev);
    free(g->dist);
    free(g->kth);
    free(g->degree);
    free(g->cand);
    free(g->cand_len);
    free(g->order);
    free(g);
    *pg = NULL;
}

static int index_of(const uint32_t *ids, int n, uint32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return i;
    return -1;
}

static int has_edge(const keyer_knn_edge *e, int n, uint32_t a, uint32_t b)
{
    for (int i = 0; i < n; i++)
        if (e[i].a == a && e[i].b == b)
            return 1;
    return 0;
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
    const keyer_knn_params *p = &g->p;
    int nn = n;
    /* Distances; pairs beyond max_dy are "infinitely" far. */
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < nn; j++) {
            float dx = xy[2 * j] - xy[2 * i], dy = xy[2 * j + 1] - xy[2 * i + 1];
            float d = sqrtf(dx * dx + dy * dy);
            if (i == j || (p->max_dy > 0 && fabsf(dy) > p->max_dy) || ids[i] == ids[j])
                d = INFINITY;
            g->dist[i * nn + j] = d;
        }
    /* k nearest per point (selection by repeated minimum; k and n are small). */
    int n_cand = 0;
    for (int i = 0; i < nn; i++) {
        g->kth[i] = INFINITY;
        for (int j = 0; j < nn; j++)
            g->order[j] = j;
        for (int r = 0; r < p->k && r < nn; r++) {
            int best = r;
            for (int j = r + 1; j < nn; j++)
                if (g->dist[i * nn + g->order[j]] < g->dist[i * nn + g->order[best]])
                    best = j;
            int tmp = g->order[r];
            g->order[r] = g->order[best];
            g->order[best] = tmp;
            float d = g->dist[i * nn + g->order[r]];
            if (!isfinite(d))
                break;
            g->kth[i] = d;
            uint32_t a = ids[i], b = ids[g->order[r]];
            keyer_knn_edge e = {a < b ? a : b, a < b ? b : a};
            if (!has_edge(g->cand, n_cand, e.a, e.b)) {
                g->cand[n_cand] = e;
                g->cand_len[n_cand] = d;
                n_cand++;
            }
        }
    }
    memset(g->degree, 0, (size_t)nn * sizeof(int));
    int n_out = 0;
    keyer_knn_edge *next = g->prev; /* rebuilt in place below: copy kept edges first */
    int n_next = 0;
    /* 1. Keep previous edges that are still short enough (hysteresis). */
    for (int e = 0; e < g->n_prev; e++) {
        int ia = index_of(ids, nn, g->prev[e].a), ib = index_of(ids, nn, g->prev[e].b);
        if (ia < 0 || ib < 0)
            continue;
        float d = g->dist[ia * nn + ib];
        float bound = fmaxf(g->kth[ia], g->kth[ib]) * (1 + p->hysteresis);
        if (!isfinite(d) || d > bound || g->degree[ia] >= p->max_degree ||
            g->degree[ib] >= p->max_degree)
            continue;
        g->degree[ia]++;
        g->degree[ib]++;
        next[n_next++] = g->prev[e];
    }
    /* 2. Add new candidate edges, shortest first, while degrees allow. */
    for (int r = 0; r < n_cand; r++) {
        int best = r;
        for (int j = r + 1; j < n_cand; j++)
            if (g->cand_len[j] < g->cand_len[best])
                best = j;
        keyer_knn_edge te = g->cand[r];
        float tl = g->cand_len[r];
        g->cand[r] = g->cand[best];
        g->cand_len[r] = g->cand_len[best];
        g->cand[best] = te;
        g->cand_len[best] = tl;
        keyer_knn_edge e = g->cand[r];
        if (has_edge(next, n_next, e.a, e.b))
            continue;
        int ia = index_of(ids, nn, e.a), ib = index_of(ids, nn, e.b);
        if (g->degree[ia] >= p->max_degree || g->degree[ib] >= p->max_degree)
            continue;
        g->degree[ia]++;
        g->degree[ib]++;
        next[n_next++] = e;
    }
    g->n_prev = n_next;
    for (int e = 0; e < n_next && n_out < capacity; e++)
        edges[n_out++] = next[e];
    *count = n_out;
    return KEYER_OK;
}
