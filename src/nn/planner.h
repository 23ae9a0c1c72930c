/*
 * Memory planner: places every activation tensor of a graph in one arena, at batch N, so that
 * tensors whose lifetimes do not overlap share memory (greedy by size over live intervals).
 * Graph inputs live from the start to the end (a second run on the same inputs gives the same
 * outputs), graph outputs until the end; views (RESHAPE outputs) share
 * their source's storage and extend its lifetime. Constants are not placed. A backend that
 * fuses a node into the one before it (the cuda backend: activations and residual ADDs) asks
 * for a slack: every tensor stays live that many nodes after its last reader, so the output of
 * a node up to `slack` later never shares memory with the inputs a fused kernel still reads.
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
/* Frees the plan's arrays; the struct may be reused. */
void kr_plan_destroy(kr_plan *plan);

#endif
