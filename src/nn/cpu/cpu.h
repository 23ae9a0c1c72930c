/*
 * The fast CPU backend (kr_backend_cpu): XNNPACK subgraphs for runs of nodes XNNPACK can
 * execute, the reference kernels (nn/reference/ops.h) for the nodes between them.
 *
 * How a graph is run
 *  - create partitions the node list into segments: maximal runs of consecutive nodes that
 *    XNNPACK supports (each becomes one xnn_subgraph -> one xnn_runtime sharing the instance's
 *    pthreadpool) and runs of the remaining nodes (run one by one with kr_ref_ops).
 *  - Tensors that cross a segment boundary, graph inputs and outputs, and every tensor a
 *    reference node touches live in one host arena allocated at create; tensors produced and
 *    consumed inside one XNNPACK segment live in that runtime's own workspace. The arena is
 *    packed greedily by size over segment lifetimes, so boundary tensors share memory.
 *  - All pointers are bound at create (xnn_setup_runtime once); run only invokes the runtimes
 *    and the reference kernels in order, and allocates nothing.
 *  - Threads. With batch >= 2 and threads >= 2 the batch is split into min(batch, threads)
 *    lanes: contiguous slices of the batch, each with its own single-threaded runtimes and
 *    arena, run side by side (one pthreadpool task per lane). With batch 1 the one lane's
 *    runtimes share the pool for XNNPACK's per-operator parallelism. Splitting the batch avoids
 *    XNNPACK's fine-grained per-operator synchronisation, which costs more than it gains on
 *    small models on few cores (see BENCHMARKS.md). Each lane packs its own weights.
 *    After each runtime and each CPU kernel the pool's workers sleep rather than spin until
 *    the next one (XNN_FLAG_YIELD_WORKERS / PTHREADPOOL_FLAG_YIELD_WORKERS): a graph of many
 *    segments (an ONNX model) otherwise spends its CPU spinning when the cores are shared.
 *  - Graph inputs and outputs live in one block for the whole batch (batch outermost); each
 *    lane reads and writes its slice of it.
 *  - Some nodes run on the backend's own kernels instead (nn/cpu/kernels.h: Winograd 3x3
 *    convolutions, multi-threaded concatenation); they sit in the non-XNNPACK segments beside
 *    the reference nodes, with the same host storage, and use the pool when there is one lane.
 *  - If XNNPACK rejects a node (defining it or creating its operator fails with an invalid or
 *    unsupported parameter), that node is moved to the reference kernels and the partition is
 *    rebuilt; a warning names the node. Out-of-memory is reported, not worked around.
 *
 * XNNPACK initialisation: xnn_initialize(NULL) is called by every create. In XNNPACK 2022 it is
 * guarded by pthread_once, so concurrent and repeated calls are safe and cheap; keyer never calls
 * xnn_deinitialize (which would be process-wide).
 *
 * Internal to keyer (prefix kr_cpu_).
 */
#ifndef KEYER_NN_CPU_H
#define KEYER_NN_CPU_H

#include <stdint.h>

#include "keyer/status.h"
#include "nn/backend.h"
#include "nn/graph.h"

/* Options beyond kr_backend_config, for tests and profiling. Zero-initialise. */
typedef struct kr_cpu_options {
    int node_per_segment; /* 1: every node its own segment (per-operator profiling; disables
                             XNNPACK's cross-node fusions and the CPU kernels' fusions) */
    int reference_only;   /* 1: run every node with the reference kernels (one segment) */
    /* Tests of the fallback path: node index + 1 whose XNNPACK definition (reject_define) or
     * runtime creation (reject_runtime, also when probed alone) fails as if XNNPACK rejected
     * it; 0: none. */
    int test_reject_define;
    int test_reject_runtime;
    int no_kernels;       /* 1: no CPU kernel (kernels.h): XNNPACK or the reference only */
    int reserved[3];
} kr_cpu_options;

/* Creates an instance like kr_backend_cpu.create with extra options (@p opt may be NULL). */
keyer_status kr_cpu_create(const kr_graph *g, const kr_backend_config *cfg,
                           const kr_cpu_options *opt, kr_backend_instance **out, keyer_error *err);

/* Non-zero if XNNPACK (as wrapped here) can run @p node; other nodes use the reference kernels. */
int kr_cpu_xnn_supports(const kr_graph *g, const kr_node *node);

/* One segment of an instance's partition. */
typedef struct kr_cpu_segment_info {
    int first_node, last_node; /* inclusive range in g->nodes */
    int xnnpack;               /* 1: an XNNPACK runtime, 0: reference kernels */
    int n_external;            /* XNNPACK: external values bound (inputs + outputs), else 0 */
} kr_cpu_segment_info;

/* Introspection and per-segment runs look at lane 0. Number of segments; fills @p out for segment @p index (0 <= index < count). */
int kr_cpu_segment_count(const kr_backend_instance *inst);
keyer_status kr_cpu_segment_get(const kr_backend_instance *inst, int index,
                                kr_cpu_segment_info *out, keyer_error *err);

/* Runs segment @p index alone (segments must be run in order for a meaningful result); for
 * per-segment timing. Errors: INVALID_ARGUMENT (index), INTERNAL (XNNPACK failed). */
keyer_status kr_cpu_run_segment(kr_backend_instance *inst, int index, keyer_error *err);

/* Lane 0's storage of tensor @p tensor when it lives in host memory the backend owns (graph
 * inputs/outputs, tensors crossing segments, tensors of reference nodes; with node_per_segment
 * or reference_only that is every activation); NULL for tensors inside an XNNPACK runtime.
 * For tests and debugging: the contents are those left by the last run. */
const float *kr_cpu_tensor_debug(const kr_backend_instance *inst, int tensor);

/* Threads the instance computes with (1 when it has no pool). */
int kr_cpu_threads(const kr_backend_instance *inst);

/* Lanes: independent copies of the graph, each over a contiguous slice of the batch. */
int kr_cpu_lane_count(const kr_backend_instance *inst);

/* ---- between backend.c and xnn_define.c ---------------------------------------------------- */

struct xnn_subgraph;

/* What defining nodes into one subgraph needs. ids[] maps graph tensors to XNNPACK value ids
 * (XNN_INVALID_VALUE_ID until defined); constants and internal activations are defined on first
 * use. Static data the backend makes itself (zero biases, repacked weights) is carved from
 * storage[used..capacity), which the caller allocates at create and keeps until the runtimes
 * are deleted (XNNPACK keeps pointers to static data). */
typedef struct kr_cpu_xnn_builder {
    const kr_graph *g;
    int batch;
    struct xnn_subgraph *subgraph;
    uint32_t *ids;
    float *storage;
    size_t capacity; /* floats */
    size_t used;     /* floats */
} kr_cpu_xnn_builder;

/* Floats of static storage kr_cpu_xnn_define_node() takes for @p node (0 for most nodes). */
size_t kr_cpu_xnn_storage_needed(const kr_graph *g, const kr_node *node);

/* Defines tensor @p t as an activation value (dims[0] scaled by the batch) with external id
 * @p external_id (XNN_INVALID_VALUE_ID: internal) and XNN_VALUE_FLAG_* @p flags.
 * Returns the xnn_status (as int) and records the id in b->ids. */
int kr_cpu_xnn_define_activation(kr_cpu_xnn_builder *b, int t, uint32_t external_id,
                                 uint32_t flags);

/* Defines @p node in b->subgraph. Returns the xnn_status (as int; 0 = success). */
int kr_cpu_xnn_define_node(kr_cpu_xnn_builder *b, const kr_node *node);

#endif /* KEYER_NN_CPU_H */
