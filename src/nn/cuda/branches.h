/*
 * Branches of the per-node schedule (pernode.h): the fused nodes that are off the graph's
 * critical path run on a second stream of the capture, forked from and joined back to the run
 * stream with events, so that the CUDA graph runs them beside the critical path instead of
 * after it (u2netp: the side outputs of the decoder stages, their resizes, the sigmoids of the
 * six side maps and the conversions of the graph outputs to float).
 *
 * Units: every fused node (not folded) and, in f16 instances, every float graph output's
 * conversion to its float staging, placed right after the last node writing the output (none
 * for an output that a layer writes as float itself, kr_cuda_pernode_bind_outputs). Each
 * unit's memory is read from its kr_cuda_op (the pointers fusion bound: inputs, output,
 * residual, addend, gather sources) as byte ranges: an arena pointer covers the largest
 * tensor stored at that offset among those named by the unit's node or a folded node joined to
 * it through folded nodes (fusion.h folds a node into a producer or consumer of its data; all
 * tensors stored there when none is; a pointer inside a tensor covers the whole arena), an
 * output's conversion its tensor, a staging pointer its staging buffer; constants are
 * read-only and ignored. Unit j depends on an earlier
 * unit i when their ranges overlap and one of them writes (read after write, write after read,
 * write after write): the dependencies hold for the arena as it is laid out, whatever the
 * planner did, so any schedule that keeps them gives the serial order's results bit for bit
 * (the same kernels on the same values).
 *
 * Critical path: each unit costs 1 (a dependent kernel's floor) plus its bytes written and read
 * over 8 MiB (what a kernel moves in that time at the copy bandwidth); a unit whose longest
 * path through it is shorter than the graph's longest path goes to the second stream. From the
 * graph alone, never by model name; the same at every batch.
 *
 * Order: the run stream queues the critical units in graph order; a side unit is queued when
 * its inputs are ready (graph order among those ready), after a fork (event recorded on the run
 * stream after its last producer there, waited on by the side stream), unless it would still
 * be running when the run stream reaches a unit that must wait for earlier side work (then it
 * is forked right after that join, beside the unit that needed the join: d1's sigmoid beside
 * the fuse layer that reads the six maps). A run-stream unit that reads what a side unit
 * wrote (or overwrites what it reads) waits for the side stream (a join: event recorded on the
 * side stream, waited on by the run stream); the last join closes the capture's fork.
 *
 * Memory: a side unit runs at some time between its fork and its join, not at its node's
 * place, so kr_cuda_branches_windows gives the planner (kr_plan_create_windows) the window
 * [fork, join] for each tensor a side unit (or a node folded next to it) touches, from the
 * order planned with the data's flow alone as dependencies (the layout's reuse of memory would
 * otherwise hold the side units back where the serial layout put their outputs on bytes still
 * in use); the backend lays the arena out again with them (keeping the serial plan's places
 * where the windows allow), binds and fuses the nodes again, and plans the branches on the new
 * layout with every dependency, only when every node is fused as on the serial layout (the
 * fusion pass's folds depend on overlaps, and a fold can change f16 sums).
 *
 * KR_CUDA_BRANCHES_ENV=0 turns the branches off (the serial order of kr_cuda_pernode_enqueue);
 * the GPU tests compare both byte for byte.
 */
#ifndef KEYER_NN_CUDA_BRANCHES_H
#define KEYER_NN_CUDA_BRANCHES_H

#include "nn/cuda/mem.h"
#include "nn/cuda/ops.h"

/* "0": no second stream (the per-node schedule queues every node in graph order). */
#define KR_CUDA_BRANCHES_ENV "KEYER_CUDA_BRANCHES"

typedef struct kr_cuda_branches kr_cuda_branches;

/* Whether KR_CUDA_BRANCHES_ENV allows branches (unset or anything but "0"). */
int kr_cuda_branches_enabled(void);

/* Plans the branches of the per-node schedule of the instance whose memory is @p mem
 * (@p arena_bytes: its arena's size), @p io its float staging per tensor (f16 instances; NULL
 * entries otherwise), after the folds and bindings (@p ops, @p folded: as the per-node schedule
 * runs them). Host work only (no CUDA call: kr_cuda_branches_prepare makes the stream). @p *out
 * is NULL when no unit is off the critical path (then run the serial order). Errors:
 * OUT_OF_MEMORY naming the graph. */
keyer_status kr_cuda_branches_plan(const kr_cuda_mem *mem, size_t arena_bytes, float *const *io,
                                   const kr_cuda_op *ops, const unsigned char *folded,
                                   kr_cuda_branches **out, keyer_error *err);

/* Creates @p b's second stream and its fork and join events (once, at set-up). Errors: DEVICE
 * naming the graph. */
keyer_status kr_cuda_branches_prepare(kr_cuda_branches *b, keyer_error *err);

/* The number of units @p b runs on the second stream, and of forks and joins. */
void kr_cuda_branches_counts(const kr_cuda_branches *b, int *side, int *forks, int *joins);

/* Live windows for the planner (kr_plan_create_windows), for the instance and fused nodes of
 * kr_cuda_branches_plan: the branches planned with the data's flow alone as dependencies (as
 * if no two tensors shared memory), and for each tensor of the graph @p live_from[t] ..
 * @p live_to[t] (node indices, -1 .. n_nodes) covering the fork and the join of every side unit
 * of that order touching it (its node's inputs and outputs, and those of the nodes folded next
 * to it); live_from[t] > live_to[t] where there is none. Both arrays: one int per tensor,
 * caller-owned. @p *any: 0 when no unit is off the critical path (no window). Host work only.
 * Errors: OUT_OF_MEMORY naming the graph. */
keyer_status kr_cuda_branches_windows(const kr_cuda_mem *mem, size_t arena_bytes, float *const *io,
                                      const kr_cuda_op *ops, const unsigned char *folded,
                                      int *live_from, int *live_to, int *any, keyer_error *err);

/* One step of @p b's order, for the tests: @p i in [0, kr_cuda_branches_steps(b)). @p kind: 0
 * a unit, 1 a fork, 2 a join; @p side: 1 if the unit runs on the second stream; @p node: the
 * unit's node, or -1 - i for graph output i's conversion. */
int kr_cuda_branches_steps(const kr_cuda_branches *b);
void kr_cuda_branches_step(const kr_cuda_branches *b, int i, int *kind, int *side, int *node);

/* Queues one inference on @p stream (the capture's or the run stream) in @p b's order: the
 * inputs' conversions to half (f16), the units on @p stream or the second stream with the
 * forks and joins between them, every fork joined before returning. With @p check, everything
 * runs in that order on @p stream alone with a synchronisation after every unit (so that a
 * failure names its node), no event. Never allocates. Errors: DEVICE naming the node or the
 * conversion, or the fork or join. */
keyer_status kr_cuda_branches_enqueue(kr_cuda_branches *b, const kr_cuda_mem *mem, int f16,
                                      float *const *io, kr_cuda_op *ops,
                                      const unsigned char *folded, cudaStream_t stream, int check,
                                      keyer_error *err);

/* Frees @p *b (its stream and events; NULL allowed) and sets it to NULL. */
void kr_cuda_branches_destroy(kr_cuda_branches **b);

#endif
