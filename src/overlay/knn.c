/*
 * k-nearest-neighbour graph of tracked points with hysteresis: edges from the previous frame
 * are kept (by point id) while they stay short enough, so the drawn graph does not flicker.
 */
#include "keyer/overlay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A candidate edge: point indices ia < ib by id order, and its length. */
typedef struct kr_knn_cand {
    keyer_knn_edge e;
    int ia, ib;
    float len;
} kr_knn_cand;

typedef struct kr_knn_id {
    uint32_t id;
    int index;
} kr_knn_id;

struct keyer_knn_graph {
    keyer_knn_params p;
    int max_points;
    keyer_knn_edge *prev; /* previous frame's edges */
    int n_prev;
    /* scratch */
    float *kth_scratch;   /* k squared distances */
    float *kth;           /* per point: distance to its k-th nearest neighbour (within max_dy) */
    int *degree;
    kr_knn_cand *cand;    /* candidate edges, n x k at most */
    int *order;
    int *nbr;             /* per point: indices of its kept neighbours (max_degree each) */
    kr_knn_id *by_id;     /* the points' ids, sorted, with their indices */
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
    g->kth_scratch = malloc((size_t)params->k * sizeof(float));
    g->kth = malloc(n * sizeof(float));
    g->degree = malloc(n * sizeof(int));
    g->cand = malloc(n * (size_t)params->k * sizeof(kr_knn_cand));
    g->order = malloc((n > (size_t)params->k ? n : (size_t)params->k) * sizeof(int));
    g->nbr = malloc(max_edges * sizeof(int));
    g->by_id = malloc(n * sizeof(kr_knn_id));
    if (!g->prev || !g->kth_scratch || !g->kth || !g->degree || !g->cand || !g->order || !g->nbr ||
        !g->by_id)
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
    free(g->kth_scratch);
    free(g->kth);
    free(g->degree);
    free(g->cand);
    free(g->order);
    free(g->nbr);
    free(g->by_id);
    free(g);
    *pg = NULL;
}

/* Squared distance of points i and j; infinite for a point with itself (or the same id) and
 * beyond max_dy vertically. */
static float dist2(const keyer_knn_params *p, const uint32_t *ids, const float *xy, int i, int j)
{
    float dx = xy[2 * j] - xy[2 * i], dy = xy[2 * j + 1] - xy[2 * i + 1];
    if (i == j || ids[i] == ids[j] || (p->max_dy > 0 && fabsf(dy) > p->max_dy))
        return INFINITY;
    return dx * dx + dy * dy;
}

static int cmp_id(const void *a, const void *b)
{
    const kr_knn_id *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Shortest first; equal lengths by ids, so the order never depends on the sort. */
static int cmp_cand(const void *a, const void *b)
{
    const kr_knn_cand *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->e.a != y->e.a)
        return x->e.a < y->e.a ? -1 : 1;
    return (x->e.b > y->e.b) - (x->e.b < y->e.b);
}

/* The index of the point with id @p id (g->by_id sorted over n points), or -1. */
static int index_of(const keyer_knn_graph *g, int n, uint32_t id)
{
    kr_knn_id key = {id, 0};
    const kr_knn_id *hit = bsearch(&key, g->by_id, (size_t)n, sizeof(kr_knn_id), cmp_id);
    return hit ? hit->index : -1;
}

/* Whether points ia and ib are already joined in this frame's graph. */
static int joined(const keyer_knn_graph *g, int ia, int ib)
{
    const int *nb = &g->nbr[(size_t)ia * (size_t)g->p.max_degree];
    for (int i = 0; i < g->degree[ia]; i++)
        if (nb[i] == ib)
            return 1;
    return 0;
}

/* Joins ia and ib (their degrees are below max_degree). */
static void join(keyer_knn_graph *g, int ia, int ib)
{
    size_t md = (size_t)g->p.max_degree;
    g->nbr[(size_t)ia * md + (size_t)g->degree[ia]++] = ib;
    g->nbr[(size_t)ib * md + (size_t)g->degree[ib]++] = ia;
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
    /* k nearest per point: one pass over the others, keeping the k best in order (by squared
     * distance, then index). */
    int n_cand = 0, k = p->k;
    for (int i = 0; i < nn; i++) {
        float *best = g->kth_scratch;
        int *best_j = g->order, n_best = 0;
        for (int j = 0; j < nn; j++) {
            float d2 = dist2(p, ids, xy, i, j);
            if (!(d2 < INFINITY) || (n_best == k && !(d2 < best[k - 1])))
                continue;
            int at = n_best < k ? n_best++ : k - 1;
            while (at > 0 && best[at - 1] > d2) {
                best[at] = best[at - 1];
                best_j[at] = best_j[at - 1];
                at--;
            }
            best[at] = d2;
            best_j[at] = j;
        }
        g->kth[i] = n_best > 0 ? sqrtf(best[n_best - 1]) : INFINITY;
        for (int r = 0; r < n_best; r++) {
            int j = best_j[r];
            uint32_t a = ids[i], b = ids[j];
            kr_knn_cand c = {{a < b ? a : b, a < b ? b : a}, a < b ? i : j, a < b ? j : i,
                             sqrtf(best[r])};
            g->cand[n_cand++] = c;
        }
    }
    /* Shortest first; an edge found from both ends appears twice, side by side: keep one. */
    qsort(g->cand, (size_t)n_cand, sizeof(kr_knn_cand), cmp_cand);
    int n_unique = 0;
    for (int c = 0; c < n_cand; c++)
        if (n_unique == 0 || g->cand[n_unique - 1].e.a != g->cand[c].e.a ||
            g->cand[n_unique - 1].e.b != g->cand[c].e.b)
            g->cand[n_unique++] = g->cand[c];
    n_cand = n_unique;
    for (int i = 0; i < nn; i++) {
        g->by_id[i].id = ids[i];
        g->by_id[i].index = i;
    }
    qsort(g->by_id, (size_t)nn, sizeof(kr_knn_id), cmp_id);
    memset(g->degree, 0, (size_t)nn * sizeof(int));
    int n_out = 0;
    keyer_knn_edge *next = g->prev; /* rebuilt in place below: copy kept edges first */
    int n_next = 0;
    /* 1. Keep previous edges that are still short enough (hysteresis). */
    for (int e = 0; e < g->n_prev; e++) {
        int ia = index_of(g, nn, g->prev[e].a), ib = index_of(g, nn, g->prev[e].b);
        if (ia < 0 || ib < 0 || joined(g, ia, ib))
            continue;
        float d = sqrtf(dist2(p, ids, xy, ia, ib));
        float bound = fmaxf(g->kth[ia], g->kth[ib]) * (1 + p->hysteresis);
        if (!isfinite(d) || d > bound || g->degree[ia] >= p->max_degree ||
            g->degree[ib] >= p->max_degree)
            continue;
        join(g, ia, ib);
        next[n_next++] = g->prev[e];
    }
    /* 2. Add new candidate edges, shortest first, while degrees allow. */
    for (int c = 0; c < n_cand; c++) {
        int ia = g->cand[c].ia, ib = g->cand[c].ib;
        if (joined(g, ia, ib) || g->degree[ia] >= p->max_degree || g->degree[ib] >= p->max_degree)
            continue;
        join(g, ia, ib);
        next[n_next++] = g->cand[c].e;
    }
    g->n_prev = n_next;
    for (int e = 0; e < n_next && n_out < capacity; e++)
        edges[n_out++] = next[e];
    *count = n_out;
    return KEYER_OK;
}
