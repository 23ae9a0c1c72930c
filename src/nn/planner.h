/*
 * Memory planner: places every activation tensor of a graph in one arena, at batch N, so that
 * tensors whose lifetimes do not overlap share memory (greedy by size over live intervals).
 * Graph inputs live from the start to the end (a second run on the same inputs gives the same
 * outputs), graph outputs until the end; views (RESHAPE outputs) share
 * their source's storage and extend its lifetime. Constants are not placed. A backend that
 * fuses a node into the one before it (the cuda backend: activations and residual ADDs) asks
 * for a slack: every tensor stays live that many nodes after its last reader, so the output of
 * a node up to `slack` later never shares memory with the inputs a fused kernel still reads.
 *
 * The contract: every node runs in index order, one after the other. A schedule that runs some
 * nodes out of that order (the cuda per-node schedule's second stream, nn/cuda/branches.h)
 * passes live windows (kr_plan_create_windows): a tensor given a window [from, to] is also live
 * over those node indices, so it shares no bytes with any tensor live at any of them.
 */
#ifndef KEYER_NN_PLANNER_H
#define KEYER_NN_PLANNER_H

#include <stddef.h>

#include "keyer/status.h"
#include "nn/graph.h"

#define KR_PLAN_ALIGNMENT 64

typedef struct kr_plan {
    int batch;
    size_t arena_bytes;  /* total arena size */
    size_t *offsets;     /* per tensor: byte offset in the arena, SIZE_MAX for constants */
    int n_tensors;
} kr_plan;

/* Plans @p g at @p batch with @p slack (>= 0, see above). Errors: INVALID_ARGUMENT,
 * OUT_OF_MEMORY. */
keyer_status kr_plan_create(const kr_graph *g, int batch, int slack, kr_plan *out,
                            keyer_error *err);
/* As kr_plan_create, with every activation tensor t that @p live_from and @p live_to (one entry
 * per tensor of @p g, or both NULL: none) give a window (live_from[t] <= live_to[t]; -1 and
 * g->n_nodes allowed, an entry with live_from[t] > live_to[t] is no window) also live from node
 * live_from[t] to node live_to[t] inclusive. A view's window extends its storage's life. With
 * @p keep (a plan of @p g at @p batch with @p slack, or NULL), every tensor keeps its offset in
 * @p keep unless its window makes it meet a tensor it now lives with; those move above keep's
 * arena (so tensors that kept their place overlap exactly as in @p keep: decisions taken from
 * the overlaps, such as the cuda fusion pass's, stay the same for them). Errors: as
 * kr_plan_create; INVALID_ARGUMENT for a window outside [-1, g->n_nodes] or a @p keep of another
 * graph or batch. */
keyer_status kr_plan_create_windows(const kr_graph *g, int batch, int slack, const kr_plan *keep,
                                    const int *live_from, const int *live_to, kr_plan *out,
                                    keyer_error *err);
/* Frees the plan's arrays; the struct may be reused. */
void kr_plan_destroy(kr_plan *plan);

#endif
