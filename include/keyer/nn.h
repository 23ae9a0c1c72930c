/**
 * @file keyer/nn.h
 * @brief The neural-net runtime: load a TFLite or ONNX vision model, create a runtime instance
 *        on a backend with a fixed batch size, fill inputs, run, read outputs.
 *
 * @code
 * keyer_error err = {0};
 * keyer_model *model = NULL;
 * keyer_runtime *rt = NULL;
 * keyer_runtime_params p = keyer_runtime_params_defaults();
 * p.backend = KEYER_BACKEND_CPU;
 * p.batch = 4;
 * if (keyer_model_load_file("models/selfie_segmentation.tflite", &model, &err) ||
 *     keyer_runtime_create(model, &p, &rt, &err))
 *     die(err.message);
 * float *in = keyer_runtime_input_data(rt, 0);   // [4,256,256,3] NHWC, host memory on CPU backends
 * ... fill in ...
 * if (keyer_runtime_run(rt, &err)) die(err.message);
 * const float *mask = keyer_runtime_output_data(rt, 0); // [4,256,256,1]
 * keyer_runtime_destroy(&rt);
 * keyer_model_destroy(&model);
 * @endcode
 *
 * Model files are untrusted input: every offset, size and shape is checked at load, and a
 * malformed file gives KEYER_STATUS_BAD_DATA with a message naming the file and the problem.
 * An operator no backend implements gives KEYER_STATUS_UNSUPPORTED naming it and its index.
 *
 * Ownership: a keyer_model is immutable after load and may be shared by any number of
 * runtimes (and threads); it must outlive them. A keyer_runtime is used by one thread at a time.
 */
#ifndef KEYER_NN_H
#define KEYER_NN_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/log.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A loaded model (graph + weights). Opaque. */
typedef struct keyer_model keyer_model;
/** A model prepared for inference on one backend at one batch size. Opaque. */
typedef struct keyer_runtime keyer_runtime;

/** Inference backends. */
typedef enum keyer_backend {
    KEYER_BACKEND_REFERENCE = 0, /**< plain C, float32: the oracle; slow */
    KEYER_BACKEND_CPU,           /**< fast CPU backend (XNNPACK + threads) */
    KEYER_BACKEND_CUDA,          /**< NVIDIA GPU (only when built with CUDA) */
} keyer_backend;

/** Name of a backend ("reference", "cpu", "cuda"). */
const char *keyer_backend_name(keyer_backend backend);
/** Parses a backend name; returns KEYER_OK and sets *out, or INVALID_ARGUMENT. */
keyer_status keyer_backend_from_name(const char *name, keyer_backend *out, keyer_error *err);

/** Element types of model tensors. */
typedef enum keyer_dtype { KEYER_DTYPE_F32 = 0, KEYER_DTYPE_F16, KEYER_DTYPE_I32 } keyer_dtype;

#define KEYER_TENSOR_MAX_DIMS 5

/**
 * Description of a model input or output.
 *
 * The runtime's tensors (keyer_runtime_input_data() and friends) are in the graph's layout:
 * NHWC for images. A model file may declare another: ONNX images are NCHW. file_rank,
 * file_dims and file_perm describe the tensor as the file declares it, so that callers can
 * feed and read tensors in the model's own layout (keyer_tensor_to_graph_layout() and
 * keyer_tensor_to_file_layout() convert). For TFLite models the two are the same (file_perm
 * is the identity).
 */
typedef struct keyer_tensor_info {
    const char *name; /**< owned by the model */
    keyer_dtype dtype;
    int rank;
    int dims[KEYER_TENSOR_MAX_DIMS]; /**< the graph's: NHWC for images; dims[0] is the batch */
    int file_rank;                        /**< the file's rank (== rank) */
    int file_dims[KEYER_TENSOR_MAX_DIMS]; /**< the file's order: NCHW for ONNX images */
    int file_perm[KEYER_TENSOR_MAX_DIMS]; /**< dims[d] == file_dims[file_perm[d]] */
} keyer_tensor_info;

/**
 * Rearranges one tensor of @p batch items (dims[0] and file_dims[0] scaled by @p batch) from
 * the file's layout (@p src, laid out as file_dims) to the graph's (@p dst, as dims), or back.
 * Elements are 4 bytes (float32 or int32). @p src and @p dst must not overlap.
 * Errors: INVALID_ARGUMENT (NULL pointers, batch < 1, a malformed @p info).
 */
keyer_status keyer_tensor_to_graph_layout(const keyer_tensor_info *info, int batch,
                                          const void *src, void *dst, keyer_error *err);
keyer_status keyer_tensor_to_file_layout(const keyer_tensor_info *info, int batch,
                                         const void *src, void *dst, keyer_error *err);

/**
 * Parameters of model loading. Initialise with keyer_model_load_params_defaults().
 * height and width fix the dynamic dimensions of an ONNX model's image inputs (dimensions 2
 * and 3 of NCHW); 0 takes them from the model, which must then declare them. A dynamic batch
 * is always 1 in the graph (a runtime sets the batch). TFLite models ignore these fields.
 */
typedef struct keyer_model_load_params {
    int height;      /**< default 0 */
    int width;       /**< default 0 */
    int reserved[6]; /**< zero: room to grow without breaking the ABI */
} keyer_model_load_params;

/** Default load parameters (everything 0). */
keyer_model_load_params keyer_model_load_params_defaults(void);

/**
 * Loads a model file: TFLite (recognised by its identifier "TFL3" at bytes 4..7, or a name
 * ending in .tflite) or ONNX (any other file: a file named *.onnx is read as ONNX; another name
 * is tried as ONNX and, if that fails, reported with both readers' messages). ONNX external data is read from the model's folder. ONNX models
 * are imported into the same graph (NCHW images become NHWC; shape subgraphs are folded for
 * the input sizes, so the model must have static sizes or be given them in @p params; NULL
 * means the defaults).
 * Errors: IO (cannot read @p path or its external data), BAD_DATA (malformed, or a dynamic
 * size not given), UNSUPPORTED (operator or tensor type keyer does not implement: the message
 * names the operator and its index, or for ONNX its node name and the opset), OUT_OF_MEMORY.
 */
keyer_status keyer_model_load_file_params(const char *path, const keyer_model_load_params *params,
                                          keyer_model **out, keyer_error *err);

/** keyer_model_load_file_params() with the default parameters. */
keyer_status keyer_model_load_file(const char *path, keyer_model **out, keyer_error *err);

/**
 * Loads a model from memory (TFLite or ONNX, as keyer_model_load_file_params() tells them
 * apart; an ONNX model from memory may not use external data). @p name labels messages. The
 * bytes are copied: the caller keeps ownership of @p data. Errors as keyer_model_load_file().
 */
keyer_status keyer_model_load_memory(const void *data, size_t size, const char *name,
                                     keyer_model **out, keyer_error *err);

/** Frees a model; accepts NULL and *model == NULL; sets *model to NULL. */
void keyer_model_destroy(keyer_model **model);

/** Number of graph inputs / outputs. */
int keyer_model_input_count(const keyer_model *model);
int keyer_model_output_count(const keyer_model *model);

/** Describes input / output @p index at batch 1. Errors: INVALID_ARGUMENT (index). */
keyer_status keyer_model_input_info(const keyer_model *model, int index, keyer_tensor_info *out,
                                    keyer_error *err);
keyer_status keyer_model_output_info(const keyer_model *model, int index, keyer_tensor_info *out,
                                     keyer_error *err);

/** Multiply-accumulate operations of one inference at batch 1 (convolutions). */
uint64_t keyer_model_macs(const keyer_model *model);
/** Number of operators (after DEQUANTIZE folding) and bytes of constant weights (float32). */
int keyer_model_node_count(const keyer_model *model);
/** Operator of node @p index (0 .. node count - 1) as keyer names it ("CONV_2D", ...); "" for a
 *  bad index or a NULL model. The string is static. */
const char *keyer_model_node_op_name(const keyer_model *model, int index);
size_t keyer_model_weight_bytes(const keyer_model *model);

/**
 * Arithmetic precision of a runtime instance. Inputs and outputs are float32 in every case;
 * F16 keeps weights and activations in IEEE half precision inside the backend and accumulates
 * in float32 (the cuda backend only; reference and cpu reject F16 with UNSUPPORTED).
 * Convolution weights stay float32 (they are small and cached). F16 outputs are checked against
 * the reference backend by tests/unit/test_nn_cuda_gpu.c (masks within 0.02 and on the same
 * side of 0.5 on >= 99.5% of pixels, the same faces after decoding). Mixed precision: in a
 * graph with both mask outputs and other outputs (the pose landmark models), F16 under the AUTO
 * and per-node schedules keeps every node the other outputs (landmarks, heatmaps, flags)
 * depend on in float32 and runs only the mask's own nodes in half, because half storage anywhere
 * on the landmark path moves the landmarks by up to a model input pixel (src/nn/precision_plan.h);
 * a persistent schedule asked by name runs such a model all in half.
 * AUTO is a choice for sessions and keying objects, made per model: F16 on CUDA for models
 * whose registry entry says half_ok (measured by tests/unit/test_precision_gpu.c), F32
 * otherwise and on the CPU. A runtime needs F32 or F16 and refuses AUTO.
 */
typedef enum keyer_precision {
    KEYER_PRECISION_F32 = 0, /**< float32 throughout (default of a runtime) */
    KEYER_PRECISION_F16,     /**< half-precision weights and activations, float32 accumulation */
    KEYER_PRECISION_AUTO,    /**< sessions and keying objects: per model (see above) */
} keyer_precision;

/** Name of a precision ("f32", "f16", "auto"). */
const char *keyer_precision_name(keyer_precision precision);
/** Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16" or "auto". Errors: INVALID_ARGUMENT. */
keyer_status keyer_precision_from_name(const char *name, keyer_precision *out, keyer_error *err);

/**
 * How the cuda backend schedules one inference (ignored by the other backends).
 * KERNELS: one kernel per node (after fusion), captured as one CUDA graph: best for throughput
 * at large batches. PERSISTENT: the whole inference as one cooperative kernel whose blocks walk
 * the nodes with a grid-wide barrier between them: best for latency at small batches (at batch
 * 1 every node is too small to fill the GPU and a launch per node dominates). An item's result
 * does not depend on the batch size within one schedule; the two schedules round differently
 * (both within the backend's tolerances). AUTO: PERSISTENT at small batches (a limit on the
 * batch, higher when the model has a cluster segment, below, and on the multiply-adds per
 * batch; measured where the persistent schedule is the faster one) when the model's operators
 * allow it (convolutions, depthwise and transpose convolutions, global average pools
 * (AVERAGE_POOL_2D over the whole input, or MEAN over H and W), MAX_POOL_2D, ADD, MUL and PRELU
 * broadcasting per channel at most, PAD of the channels, or spatially when one convolution reads
 * it, bilinear resize, RELU/RELU6/HARD_SWISH/LOGISTIC, RESHAPE, CONCATENATION of two operands
 * that are one run per item: every shipped model), else KERNELS.
 * On a GPU with thread-block clusters (compute 9.0 and newer), PERSISTENT (and AUTO when it picks
 * it) runs a run of inverted-residual blocks with excitations at a small resolution (at most 16 x
 * 16: selfie's and selfie-landscape's at 1/16 of the input, with the encoder block before them and
 * the 1x1 convolution and decoder blocks after them, up to 1/4 of the input) as one kernel with a
 * cluster of blocks per item and the activations in shared memory, between two launches of the
 * persistent kernel; PERSISTENT_GRID leaves every step to the persistent kernel.
 * The environment variable KEYER_CUDA_SCHEDULE ("kernels", "persistent", "persistent-grid" or
 * "auto"), when set, replaces AUTO for every cuda runtime that asks for AUTO (a schedule asked by
 * name stays), so that a program's models can be run under a fixed schedule without changing the
 * program (compute-sanitizer's racecheck does so: docs/notes/compute-sanitizer.md); a bad value
 * makes keyer_runtime_create() fail with INVALID_ARGUMENT naming it.
 */
typedef enum keyer_cuda_schedule {
    KEYER_CUDA_SCHEDULE_AUTO = 0,   /**< by batch size (default) */
    KEYER_CUDA_SCHEDULE_KERNELS,    /**< a kernel per node */
    KEYER_CUDA_SCHEDULE_PERSISTENT, /**< one persistent kernel (with a cluster segment where the
                                         model and device allow); UNSUPPORTED if the model can't */
    KEYER_CUDA_SCHEDULE_PERSISTENT_GRID, /**< PERSISTENT without cluster segments */
} keyer_cuda_schedule;

/** Parameters of a runtime instance. Initialise with keyer_runtime_params_defaults(). */
typedef struct keyer_runtime_params {
    keyer_backend backend;       /**< default KEYER_BACKEND_CPU */
    int batch;                   /**< frames per run, >= 1; default 1 */
    int threads;                 /**< CPU threads; <= 0: one per core this process may run
                                      on (its affinity: taskset, a cpuset) (default 0) */
    int device;                  /**< CUDA device ordinal (default 0) */
    void *stream;                /**< CUDA stream (cudaStream_t) or NULL (default) */
    const keyer_logger *logger;  /**< NULL: default logger */
    keyer_precision precision;   /**< default KEYER_PRECISION_F32 */
    keyer_cuda_schedule cuda_schedule; /**< default KEYER_CUDA_SCHEDULE_AUTO */
    int reserved[6];             /**< zero: room to grow without breaking the ABI */
} keyer_runtime_params;

/** Default runtime parameters. */
keyer_runtime_params keyer_runtime_params_defaults(void);

/**
 * Prepares @p model for inference: plans the activation arena, allocates it and the weights,
 * and chooses kernels. Nothing is allocated after this call.
 * Errors: INVALID_ARGUMENT (batch < 1, backend not built), UNSUPPORTED (an operator the backend
 * lacks), OUT_OF_MEMORY, DEVICE.
 */
keyer_status keyer_runtime_create(const keyer_model *model, const keyer_runtime_params *params,
                                  keyer_runtime **out, keyer_error *err);

/** Frees a runtime; accepts NULL and *rt == NULL; sets *rt to NULL. */
void keyer_runtime_destroy(keyer_runtime **rt);

/** The runtime's batch size and backend. */
int keyer_runtime_batch(const keyer_runtime *rt);
keyer_backend keyer_runtime_backend(const keyer_runtime *rt);

/**
 * Storage of input / output @p index for the whole batch (batch outermost, NHWC), in the
 * backend's memory (host for reference/cpu, device for cuda). Valid until destroy; written by
 * the caller (inputs) and by keyer_runtime_run() (outputs). NULL for a bad index.
 */
float *keyer_runtime_input_data(keyer_runtime *rt, int index);
const float *keyer_runtime_output_data(keyer_runtime *rt, int index);

/** Bytes of input / output @p index for the whole batch (0 for a bad index). */
size_t keyer_runtime_input_bytes(const keyer_runtime *rt, int index);
size_t keyer_runtime_output_bytes(const keyer_runtime *rt, int index);

/**
 * Copies host floats into input @p index (exactly keyer_runtime_input_bytes() bytes), or
 * output @p index into host memory; works on every backend (device backends stage through
 * pinned memory). Errors: INVALID_ARGUMENT (index, size), DEVICE.
 */
keyer_status keyer_runtime_set_input(keyer_runtime *rt, int index, const float *data, size_t bytes,
                                     keyer_error *err);
keyer_status keyer_runtime_get_output(keyer_runtime *rt, int index, float *data, size_t bytes,
                                      keyer_error *err);

/**
 * Runs one inference of the whole batch. Synchronous on CPU backends; on CUDA it is queued on
 * the runtime's stream (call keyer_runtime_synchronize() before reading outputs on the host;
 * keyer_runtime_get_output() synchronises itself). Allocates nothing.
 * Errors: DEVICE (a kernel failed: the message names the operator and node), INTERNAL.
 */
keyer_status keyer_runtime_run(keyer_runtime *rt, keyer_error *err);

/** Waits for the last run to finish (no-op on CPU backends). */
keyer_status keyer_runtime_synchronize(keyer_runtime *rt, keyer_error *err);

/**
 * The schedule the runtime runs, chosen at keyer_runtime_create() from the cuda_schedule asked
 * for, the batch, the model and the device's compute capability (see keyer_cuda_schedule):
 * "per-node" (a kernel per node), "persistent" (one cooperative kernel) or "persistent+cluster"
 * (the persistent kernel with a cluster segment: compute 9.0 and newer only). "" for the
 * reference and cpu backends and for NULL. Static storage; never NULL. The device's compute
 * capability is its own unless the environment variable KEYER_CUDA_EMULATE_CC names an older
 * class (7.5, 8.0, 8.6, 8.7, 8.9): then every choice and limit is that class's, so that the
 * schedules and kernels an older GPU runs are tested on a newer one (a bad value makes
 * keyer_runtime_create() fail with INVALID_ARGUMENT naming it).
 */
const char *keyer_runtime_schedule(const keyer_runtime *rt);

/** Bytes of activation memory (the planned arena) and of weights held by the runtime. */
size_t keyer_runtime_arena_bytes(const keyer_runtime *rt);
size_t keyer_runtime_weight_bytes(const keyer_runtime *rt);

/** Time of one operator of a profiled run (keyer_runtime_profile()). */
typedef struct keyer_node_timing {
    int node;             /**< index in the runtime's graph (execution order) */
    int source_index;     /**< operator index in the model file */
    const char *op;       /**< operator name, e.g. "CONV_2D" (static storage) */
    int output_dims[KEYER_TENSOR_MAX_DIMS]; /**< output shape at batch 1 (NHWC), zeros past rank */
    double ms;            /**< time of its kernel(s); -1: folded into the previous operator, or
                               (cuda persistent schedule) computed in another operator's step */
} keyer_node_timing;

/**
 * Runs one inference operator by operator and reports each operator's time (device time on
 * cuda): the per-operator profiles of docs/notes/ (cuda-per-node-kernels.md,
 * cuda-persistent-schedule.md). With the cuda persistent schedule, one run of the persistent
 * kernel: an operator's time is its step's span on the first block's clock,
 * barrier wait included. Slower than keyer_runtime_run() and not for hot paths. Writes min(capacity, nodes) entries to @p out and the node count to *count.
 * Errors: INVALID_ARGUMENT, UNSUPPORTED (a backend without profiling: reference, cpu), DEVICE.
 */
keyer_status keyer_runtime_profile(keyer_runtime *rt, keyer_node_timing *out, int capacity,
                                   int *count, keyer_error *err);

/** Result of keyer_runtime_best_batch(): one measured batch size. */
typedef struct keyer_batch_timing {
    int batch;            /**< batch size tried */
    double ms_per_run;    /**< median wall time of one run (queue + wait), milliseconds */
    double frames_per_s;  /**< batch / median run time */
} keyer_batch_timing;

/**
 * Finds the throughput-optimal batch size of @p model on the backend, device and precision of
 * @p params (its batch is ignored) by measurement: batch sizes 1, 2, 4, ... up to @p max_batch
 * are created, run @p runs times each (at least 3) on zero inputs and timed; the search stops
 * early when a size gains less than 3% over the best so far twice in a row, or when a size no
 * longer fits in memory (OUT_OF_MEMORY is not an error here: the largest size that fits ends
 * the search). *best gets the batch with the highest frames/s; @p timings (may be NULL) gets up
 * to @p capacity measured sizes and *count (may be NULL) how many were measured.
 * Errors: INVALID_ARGUMENT (NULL model or best, max_batch < 1), and whatever creating the
 * batch-1 runtime returns (UNSUPPORTED, DEVICE, ...).
 */
keyer_status keyer_runtime_best_batch(const keyer_model *model, const keyer_runtime_params *params,
                                      int max_batch, int runs, int *best,
                                      keyer_batch_timing *timings, int capacity, int *count,
                                      keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_NN_H */
