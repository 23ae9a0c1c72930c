/*
 * Memory planner: every activation storage (a tensor that is not a view and not a constant)
 * gets a live interval [first node that writes it, last node that reads it or any of its
 * views]; graph inputs start before node 0 and graph outputs live to the end. Storages are
 * placed largest first, each at the lowest 64-byte-aligned offset that does not overlap a
 * placed storage whose interval intersects its own (first fit over sorted placements).
 */
#include "nn/planner.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct interval {
    int tensor;
    int start, end; /* inclusive node indices; -1 = before the first node */
    size_t size;
    size_t offset;
} interval;

static int by_size_desc(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->tensor - y->tensor;
}

static int by_offset(const void *a, const void *b)
{
    const interval *const *x = a, *const *y = b;
    if ((*x)->offset != (*y)->offset)
        return (*x)->offset < (*y)->offset ? -1 : 1;
    return 0;
}

keyer_status kr_plan_create(const kr_graph *g, int batch, kr_plan *out, keyer_error *err)
{
    if (!g || !out || batch < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "planner: %s", batch < 1 ? "batch must be >= 1" : "NULL argument");
    memset(out, 0, sizeof(*out));
    int nt = g->n_tensors;
    interval *iv = calloc(nt ? (size_t)nt : 1, sizeof(*iv));
    interval **placed = calloc(nt ? (size_t)nt : 1, sizeof(*placed));
    size_t *offsets = malloc((nt ? (size_t)nt : 1) * sizeof(size_t));
    if (!iv || !placed || !offsets) {
        free(iv);
        free(placed);
        free(offsets);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "planner: out of memory");
    }
    /* Live intervals per storage tensor. */
    int *slot = malloc((nt ? (size_t)nt : 1) * sizeof(int));
    if (!slot) {
        free(iv);
        free(placed);
        free(offsets);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "planner: out of memory");
    }
    int n_iv = 0;
    for (int t = 0; t < nt; t++) {
        slot[t] = -1;
        offsets[t] = SIZE_MAX;
        const kr_tensor *tensor = &g->tensors[t];
        if (kr_tensor_is_const(tensor) || tensor->view_of >= 0)
            continue;
        interval *v = &iv[n_iv];
        v->tensor = t;
        v->start = tensor->graph_input >= 0 ? -1 : tensor->producer;
        v->end = tensor->last_consumer;
        if (v->end < v->start)
            v->end = v->start;
        if (tensor->graph_output >= 0)
            v->end = g->n_nodes;
        size_t bytes = kr_tensor_bytes(tensor, batch);
        v->size = (bytes + KR_PLAN_ALIGNMENT - 1) & ~(size_t)(KR_PLAN_ALIGNMENT - 1);
        slot[t] = n_iv++;
    }
    /* Views extend their storage's lifetime. */
    for (int t = 0; t < nt; t++) {
        const kr_tensor *tensor = &g->tensors[t];
        if (kr_tensor_is_const(tensor) || tensor->view_of < 0)
            continue;
        int s = kr_tensor_storage(g, t);
        if (slot[s] < 0)
            continue;
        interval *v = &iv[slot[s]];
        if (tensor->last_consumer > v->end)
            v->end = tensor->last_consumer;
        if (tensor->graph_output >= 0)
            v->end = g->n_nodes;
    }
    qsort(iv, (size_t)n_iv, sizeof(*iv), by_size_desc);
    size_t arena = 0;
    int n_placed = 0;
    for (int i = 0; i < n_iv; i++) {
        interval *v = &iv[i];
        size_t offset = 0;
        /* placed[] is sorted by offset: walk it, skipping past every live-overlapping block. */
        for (int j = 0; j < n_placed; j++) {
            const interval *p = placed[j];
            if (p->end < v->start || v->end < p->start)
                continue; /* not alive at the same time */
            if (offset + v->size <= p->offset)
                break; /* fits in the gap before p */
            if (p->offset + p->size > offset)
                offset = p->offset + p->size;
        }
        v->offset = offset;
        placed[n_placed++] = v;
        qsort(placed, (size_t)n_placed, sizeof(*placed), by_offset);
        if (offset + v->size > arena)
            arena = offset + v->size;
    }
    for (int i = 0; i < n_iv; i++)
        offsets[iv[i].tensor] = iv[i].offset;
    for (int t = 0; t < nt; t++)
        if (!kr_tensor_is_const(&g->tensors[t]) && g->tensors[t].view_of >= 0)
            offsets[t] = offsets[kr_tensor_storage(g, t)];
    free(slot);
    free(iv);
    free(placed);
    out->batch = batch;
    out->arena_bytes = arena;
    out->offsets = offsets;
    out->n_tensors = nt;
    return KEYER_OK;
}

void kr_plan_destroy(kr_plan *plan)
{
    if (!plan)
        return;
    free(plan->offsets);
    memset(plan, 0, sizeof(*plan));
}
