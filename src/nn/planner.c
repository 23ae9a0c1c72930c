/*
 * Memory planner (see planner.h).
 *
 * Liveness, over node indices: every storage tensor (an activation that is not a view) lives
 * from the node that writes it to the last node that reads it or any view of it (views share
 * their source's bytes, see kr_tensor_storage). Graph inputs live from before node 0, graph
 * outputs (and storages seen through an output view) until after the last node. Intervals are
 * inclusive, so a node's outputs never share bytes with its inputs: kernels need not support
 * in-place operation.
 *
 * Placement, greedy by size with best fit (the "greedy by size" strategy of TFLite's
 * ArenaPlanner and of Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
 * Inference", 2020): storages are taken largest first; for each, the placed storages whose
 * intervals intersect its own are walked in offset order, and it goes into the smallest gap
 * between them that holds it, or after the last of them when no gap does. Sizes are rounded up
 * to KR_PLAN_ALIGNMENT, so every offset is aligned.
 */
#include "nn/planner.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct interval {
    int tensor;
    int start, end;   /* inclusive node indices; -1: before node 0; n_nodes: after the last */
    int start0, end0; /* the same without the windows */
    int moved;        /* kept plan: placed again, above the kept arena */
    size_t size;      /* bytes at the batch, rounded up to KR_PLAN_ALIGNMENT */
    size_t offset;
} interval;

static int by_size_desc(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

static int by_offset(const void *a, const void *b)
{
    const interval *const *x = a, *const *y = b;
    if ((*x)->offset != (*y)->offset)
        return (*x)->offset < (*y)->offset ? -1 : 1;
    return (*x)->tensor < (*y)->tensor ? -1 : (*x)->tensor > (*y)->tensor;
}

static int overlap_in_time(const interval *a, const interval *b)
{
    return a->start <= b->end && b->start <= a->end;
}

/* A last use @p end extended by @p slack nodes, within the graph. */
static int with_slack(const kr_graph *g, int end, int slack)
{
    if (end >= g->n_nodes - 1)
        return end;
    return end + slack < g->n_nodes - 1 ? end + slack : g->n_nodes - 1;
}

keyer_status kr_plan_create(const kr_graph *g, int batch, int slack, kr_plan *out,
                            keyer_error *err)
{
    return kr_plan_create_windows(g, batch, slack, NULL, NULL, NULL, out, err);
}

/* Places iv[i] in the best-fitting gap among the placed iv[j] (j < i, moved ones only when
 * @p moved) alive with it, from @p base; returns the end of what it took. */
static size_t place(interval *iv, int i, interval **near, int moved, size_t base)
{
    interval *v = &iv[i];
    int n_near = 0;
    for (int j = 0; j < i; j++)
        if ((!moved || iv[j].moved) && overlap_in_time(&iv[j], v))
            near[n_near++] = &iv[j];
    qsort(near, (size_t)n_near, sizeof(*near), by_offset);
    size_t end = base, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int j = 0; j < n_near; j++) {
        if (near[j]->offset > end) {
            size_t gap = near[j]->offset - end;
            if (gap >= v->size && gap < best_gap) {
                best = end;
                best_gap = gap;
            }
        }
        if (near[j]->offset + near[j]->size > end)
            end = near[j]->offset + near[j]->size;
    }
    v->offset = best != SIZE_MAX ? best : end;
    return v->offset + v->size;
}

keyer_status kr_plan_create_windows(const kr_graph *g, int batch, int slack, const kr_plan *keep,
                                    const int *live_from, const int *live_to, kr_plan *out,
                                    keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "planner: NULL plan");
    memset(out, 0, sizeof(*out));
    if (!g || (g->n_tensors > 0 && !g->tensors) || g->n_tensors < 0 || g->n_nodes < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "planner: no graph");
    if (batch < 1 || slack < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "planner: %s: batch %d must be >= 1 and slack %d >= 0", g->name,
                               batch, slack);
    keyer_status st = KEYER_OK;
    size_t nt = (size_t)g->n_tensors, cap = nt ? nt : 1;
    interval *iv = calloc(cap, sizeof(*iv));
    interval **near = calloc(cap, sizeof(*near)); /* time-overlapping placed storages */
    int *slot = malloc(cap * sizeof(*slot));      /* tensor -> index in iv, or -1 */
    size_t *offsets = malloc(cap * sizeof(*offsets));
    if (!iv || !near || !slot || !offsets) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "planner: %s: out of memory",
                             g->name);
        goto fail;
    }

    /* Live intervals of the storage tensors. */
    int n_iv = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        slot[t] = -1;
        offsets[t] = SIZE_MAX;
        if (kr_tensor_is_const(x) || x->view_of >= 0)
            continue;
        interval *v = &iv[n_iv];
        v->tensor = t;
        v->start = x->graph_input >= 0 ? -1 : x->producer;
        v->end = x->last_consumer > v->start ? x->last_consumer : v->start;
        v->end = with_slack(g, v->end, slack);
        if (x->graph_output >= 0 || x->graph_input >= 0) /* inputs survive a run: run again */
            v->end = g->n_nodes;
        size_t bytes = kr_tensor_bytes(x, batch);
        if (bytes / (size_t)batch != kr_tensor_bytes(x, 1) ||
            bytes > SIZE_MAX / 2 - KR_PLAN_ALIGNMENT) {
            st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                 "planner: %s: tensor '%s' is too large at batch %d", g->name,
                                 x->name ? x->name : "", batch);
            goto fail;
        }
        v->size = (bytes + KR_PLAN_ALIGNMENT - 1) & ~(size_t)(KR_PLAN_ALIGNMENT - 1);
        slot[t] = n_iv++;
    }
    /* Views extend their storage's lifetime to their own last reader (or the end). */
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        if (kr_tensor_is_const(x) || x->view_of < 0)
            continue;
        int s = kr_tensor_storage(g, t);
        if (slot[s] < 0)
            continue;
        interval *v = &iv[slot[s]];
        if (with_slack(g, x->last_consumer, slack) > v->end)
            v->end = with_slack(g, x->last_consumer, slack);
        if (x->graph_output >= 0)
            v->end = g->n_nodes;
    }

    for (int i = 0; i < n_iv; i++) {
        iv[i].start0 = iv[i].start;
        iv[i].end0 = iv[i].end;
    }
    if (keep && (keep->n_tensors != g->n_tensors || keep->batch != batch || !keep->offsets)) {
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                             "planner: %s: the plan to keep is not this graph's at batch %d",
                             g->name, batch);
        goto fail;
    }

    /* Windows of out-of-order schedules (planner.h): on the storage. */
    for (int t = 0; live_from && live_to && t < g->n_tensors; t++) {
        if (kr_tensor_is_const(&g->tensors[t]) || live_from[t] > live_to[t])
            continue;
        if (live_from[t] < -1 || live_to[t] > g->n_nodes) {
            st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                 "planner: %s: tensor '%s' has the live window [%d, %d] outside "
                                 "[-1, %d]",
                                 g->name, g->tensors[t].name ? g->tensors[t].name : "",
                                 live_from[t], live_to[t], g->n_nodes);
            goto fail;
        }
        int s = kr_tensor_storage(g, t);
        if (slot[s] < 0)
            continue;
        interval *v = &iv[slot[s]];
        v->start = live_from[t] < v->start ? live_from[t] : v->start;
        v->end = live_to[t] > v->end ? live_to[t] : v->end;
    }

    /* Largest first, each into the best-fitting gap among the storages alive with it; with a
     * plan to keep, every storage stays where it is unless its window makes it meet another
     * (then it moves above the kept arena, placed the same way among the moved ones). */
    qsort(iv, (size_t)n_iv, sizeof(*iv), by_size_desc);
    size_t arena = keep ? keep->arena_bytes : 0;
    for (int i = 0; keep && i < n_iv; i++)
        iv[i].offset = keep->offsets[iv[i].tensor];
    /* while a storage whose window grew meets another one in place: the smaller of the two
     * moves (the larger ones, such as the decoder stages' outputs, keep their places) */
    for (int moved = 1; keep && moved;) {
        moved = 0;
        for (int i = 0; i < n_iv && !moved; i++) {
            interval *v = &iv[i];
            if (v->moved || (v->start == v->start0 && v->end == v->end0))
                continue;
            for (int j = 0; j < n_iv && !moved; j++) {
                interval *u = &iv[j];
                if (j == i || u->moved || !overlap_in_time(u, v) ||
                    !(u->offset < v->offset + v->size && v->offset < u->offset + u->size))
                    continue;
                (u->size < v->size || (u->size == v->size && j > i) ? u : v)->moved = 1;
                moved = 1;
            }
        }
    }
    size_t base = keep ? (keep->arena_bytes + KR_PLAN_ALIGNMENT - 1) &
                             ~(size_t)(KR_PLAN_ALIGNMENT - 1)
                       : 0;
    for (int i = 0; i < n_iv; i++) {
        interval *v = &iv[i];
        if (keep && !v->moved)
            continue;
        size_t end = place(iv, i, near, keep != NULL, base);
        if (v->offset > SIZE_MAX / 2 - v->size) {
            st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                 "planner: %s: the arena exceeds the address space at batch %d",
                                 g->name, batch);
            goto fail;
        }
        if (end > arena)
            arena = end;
    }
    for (int i = 0; i < n_iv; i++)
        offsets[iv[i].tensor] = iv[i].offset;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        if (!kr_tensor_is_const(x) && x->view_of >= 0)
            offsets[t] = offsets[kr_tensor_storage(g, t)];
    }
    out->batch = batch;
    out->arena_bytes = arena;
    out->offsets = offsets;
    out->n_tensors = g->n_tensors;
    offsets = NULL;
fail:
    free(offsets);
    free(slot);
    free(near);
    free(iv);
    return st;
}

void kr_plan_destroy(kr_plan *plan)
{
    if (!plan)
        return;
    free(plan->offsets);
    memset(plan, 0, sizeof(*plan));
}
