/*
 * The backend interface of the neural-net runtime: a small private table of function pointers
 * (in the spirit of ggml-backend-impl.h and libplacebo's pl_gpu_fns). A runtime instance owns one
 * backend instance for one (graph, batch); keyer_runtime_* in runtime.c validates arguments and
 * dispatches here. No CPU assumptions: a backend says where its tensors live, and takes an
 * opaque stream (the CUDA backend's cudaStream_t; CPU backends ignore it).
 *
 * Lifecycle: create (all allocation, weight packing, kernel choice) -> run* -> destroy.
 * run allocates nothing.
 */
#ifndef KEYER_NN_BACKEND_H
#define KEYER_NN_BACKEND_H

#include <stddef.h>

#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/status.h"
#include "nn/graph.h"
#include "nn/planner.h"

typedef struct kr_backend_instance kr_backend_instance; /* defined by each backend */

/* What a backend is created with. */
typedef struct kr_backend_config {
    int batch;                  /* >= 1 */
    int threads;                /* CPU threads; <= 0: one per core */
    int device;                 /* CUDA device ordinal */
    void *stream;               /* CUDA stream or NULL */
    const keyer_logger *logger; /* may be NULL */
    int f16;                    /* non-zero: half-precision weights and activations */
    int schedule;               /* keyer_cuda_schedule (cuda only) */
} kr_backend_config;

typedef struct kr_backend_ops {
    const char *name;               /* "reference", "cpu", "cuda" */
    keyer_memory_type memory;       /* where kr_backend_ops.tensor_data pointers live */
    int plan_slack;                 /* the planner's slack for this backend (planner.h) */

    /* Required. Non-zero if this backend can run @p node of @p g. */
    int (*supports_node)(const kr_graph *g, const kr_node *node);

    /* Required. Prepares @p g for repeated runs at cfg->batch: allocates the activation arena
     * laid out by @p plan (or its own), converts/packs weights. Errors: OUT_OF_MEMORY,
     * UNSUPPORTED (naming node and operator), DEVICE. */
    keyer_status (*create)(const kr_graph *g, const kr_plan *plan, const kr_backend_config *cfg,
                           kr_backend_instance **out, keyer_error *err);

    /* Required. Storage of tensor @p tensor (a graph input or output) for the whole batch,
     * NHWC with the batch outermost. Valid until destroy. */
    void *(*tensor_data)(kr_backend_instance *inst, int tensor);

    /* Required. Runs the graph once on the current inputs. Allocates nothing.
     * May be asynchronous on the configured stream (then outputs are ready when it completes). */
    keyer_status (*run)(kr_backend_instance *inst, keyer_error *err);

    /* Optional (NULL: memcpy, for host-memory backends). Copies @p bytes of host memory into
     * graph input @p tensor / out of graph output @p tensor (whole batch), synchronising as
     * needed (device backends stage through pinned buffers). Errors: DEVICE. */
    keyer_status (*copy_in)(kr_backend_instance *inst, int tensor, const void *src, size_t bytes,
                            keyer_error *err);
    keyer_status (*copy_out)(kr_backend_instance *inst, int tensor, void *dst, size_t bytes,
                             keyer_error *err);

    /* Optional (NULL: no-op). Waits until the last run has finished. */
    keyer_status (*synchronize)(kr_backend_instance *inst, keyer_error *err);

    /* Optional (NULL: plan->arena_bytes). Bytes of activation memory the instance holds. */
    size_t (*arena_bytes)(const kr_backend_instance *inst);

    /* Optional (NULL: the graph's constant bytes). Bytes of weights the instance holds. */
    size_t (*weight_bytes)(const kr_backend_instance *inst);

    /* Optional (NULL: UNSUPPORTED). Runs the graph once node by node, timing each node (device
     * time for device backends) into ms[node] (a node folded into its predecessor gets -1).
     * Not for hot paths: may create and destroy timing objects. Errors: DEVICE. */
    keyer_status (*profile)(kr_backend_instance *inst, double *ms, keyer_error *err);

    /* Optional (NULL: ""). The name of the schedule the instance runs (cuda: "per-node",
     * "persistent" or "persistent+cluster"; nn/schedule_choice.h); static storage. */
    const char *(*schedule_name)(const kr_backend_instance *inst);

    /* Required. Frees everything; sets *inst to NULL; NULL accepted. */
    void (*destroy)(kr_backend_instance **inst);
} kr_backend_ops;

/* The backends. kr_backend_cuda is defined only with KEYER_HAVE_CUDA_NN (CUDA build with
 * src/nn/cuda/backend.c present); runtime.c's backend_ops() is the one place that registers
 * the backends of a build and names it only then. */
extern const kr_backend_ops kr_backend_reference;
extern const kr_backend_ops kr_backend_cpu;
extern const kr_backend_ops kr_backend_cuda;

#endif /* KEYER_NN_BACKEND_H */
