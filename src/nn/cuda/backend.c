/*
 * The cuda backend (kr_backend_cuda): activations laid out in one device arena by the planner,
 * in float32 or float16 (cfg->f16: weights and activations stored as __half, float
 * accumulation), run by one of two schedules (keyer_cuda_schedule):
 *  - per node (pernode.h): a kernel per fused node, from this folder's operator files; the
 *    nodes off the critical path on a second stream of the capture (branches.h), for which the
 *    arena is laid out again with their live windows;
 *  - persistent (persistent/schedule.h): one cooperative kernel that walks the same fused nodes
 *    as steps (plus the f16 conversions), for small batches, with the optional cluster segment
 *    (segment/segment.h) on sm_90.
 * Both run the same fused nodes (fusion.h) and the same per-operator device functions (ops/).
 * f16 instances follow the graph's mixed-precision plan (nn/precision_plan.h) under AUTO and the
 * per-node schedule: where it keeps nodes in float32 (the pose landmark models: every node the
 * landmarks, heatmaps and flags depend on), the arena keeps the float layout and the per-node
 * schedule runs with the conversions between the two types (mixed.h); a persistent schedule
 * asked by name runs such a graph all in half.
 *
 * Set-up (create) does everything: device check, arena and weight allocation, weight upload
 * (element-wise operands converted to half once for f16; convolution weights stay float, see
 * ops.h), float32 staging buffers for the graph inputs and outputs of f16 instances, pinned host
 * buffers for keyer_runtime_set_input/get_output, the fusion pass, the schedule, one validation
 * run that synchronises after every node (so that a failing kernel is reported with its operator
 * and node), and the capture of the whole inference as one CUDA graph on a private stream. run
 * replays that graph on the caller's stream (or the private one): one launch, no allocation, no
 * host synchronisation.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "keyer/log.h"
#include "keyer/nn.h"
#include "nn/backend.h"
#include "nn/cuda/branches.h"
#include "nn/cuda/fusion.h"
#include "nn/cuda/mem.h"
#include "nn/cuda/mixed.h"
#include "nn/cuda/pernode.h"
#include "nn/cuda/persistent/persistent.h" /* KR_CUDA_PLAN_SLACK */
#include "nn/cuda/persistent/schedule.h"
#include "nn/precision_plan.h"
#include "nn/schedule_choice.h"

#define WEIGHT_ALIGN 256

struct kr_backend_instance {
    const kr_graph *graph;
    const keyer_logger *logger;
    int batch, f16, device;
    size_t esize;              /* bytes per element: 4 or 2 */
    cudaStream_t own;          /* private stream: capture, and runs when the caller gave none */
    cudaStream_t stream;       /* where runs are queued */
    unsigned char *arena;      /* device */
    size_t arena_bytes;
    size_t *offsets;           /* per tensor, bytes in the arena (element type), SIZE_MAX: none */
    unsigned char *weights;    /* device, float constants in the element type */
    size_t weight_bytes;
    size_t *const_offsets;     /* per tensor, bytes in weights, SIZE_MAX: not uploaded */
    size_t *w16_offsets;       /* per tensor, bytes in weights of a half copy (mem.h) */
    unsigned char *const_half; /* per tensor: constant stored as half */
    kr_cuda_mem mem;           /* the view of the above that the schedules read */
    kr_gpu_caps caps;          /* the device's limits (an emulated class's), read at set-up */
    float **io;                /* per tensor: f32 device staging of graph inputs/outputs (f16) */
    void *pinned;              /* host staging for copy_in/copy_out */
    size_t pinned_bytes;
    kr_cuda_op *ops;           /* per node */
    unsigned char *folded;     /* per node: 1 if folded into the previous node */
    int n_folded;
    kr_cuda_psched *pers;      /* the persistent schedule; NULL: a kernel per node */
    kr_schedule_kind schedule; /* which of the schedules runs (keyer_runtime_schedule) */
    kr_precision_plan pplan;   /* f16 instances: the nodes kept in float32 (precision_plan.h) */
    kr_cuda_mixed *mixed;      /* f16 instances with such nodes: per-node, mixed.h; else NULL */
    kr_cuda_branches *branches; /* per node: units off the critical path on a second stream
                                 * (branches.h); NULL: every node in graph order */
    cudaGraph_t cgraph;
    cudaGraphExec_t exec;
};

static int cuda_supports(const kr_graph *g, const kr_node *node)
{
    return kr_cuda_pernode_supports(g, node);
}

/* Device bytes of tensor @p t in the element type (the instance's arena or weights). */
static void *dev_ptr(const kr_backend_instance *inst, int t)
{
    return kr_cuda_mem_ptr(&inst->mem, t);
}

static int is_io(const kr_tensor *t) { return t->graph_input >= 0 || t->graph_output >= 0; }

static void cuda_destroy(kr_backend_instance **pinst)
{
    if (!pinst || !*pinst)
        return;
    kr_backend_instance *inst = *pinst;
    const kr_graph *g = inst->graph;
    if (inst->own)
        cudaStreamSynchronize(inst->own);
    if (inst->stream && inst->stream != inst->own)
        cudaStreamSynchronize(inst->stream);
    if (inst->exec)
        cudaGraphExecDestroy(inst->exec);
    if (inst->cgraph)
        cudaGraphDestroy(inst->cgraph);
    if (inst->io)
        for (int t = 0; t < g->n_tensors; t++)
            if (inst->io[t])
                cudaFree(inst->io[t]);
    kr_cuda_psched_destroy(&inst->pers);
    kr_cuda_branches_destroy(&inst->branches);
    kr_cuda_mixed_destroy(&inst->mixed);
    kr_precision_plan_free(&inst->pplan);
    cudaFree(inst->arena);
    cudaFree(inst->weights);
    if (inst->pinned)
        cudaFreeHost(inst->pinned);
    if (inst->own)
        cudaStreamDestroy(inst->own);
    free(inst->io);
    free(inst->offsets);
    free(inst->const_offsets);
    free(inst->w16_offsets);
    free(inst->const_half);
    free(inst->ops);
    free(inst->folded);
    free(inst);
    *pinst = NULL;
}

/* Queues one inference on @p stream with the instance's schedule. With @p check, synchronises
 * after every node (per node) or after the schedule, and names what failed. */
static keyer_status enqueue(kr_backend_instance *inst, cudaStream_t stream, int check,
                            keyer_error *err)
{
    if (inst->pers) /* the conversions are steps of the persistent kernel */
        return kr_cuda_psched_enqueue(inst->pers, stream, check, err);
    if (inst->mixed)
        return kr_cuda_mixed_enqueue(inst->mixed, &inst->mem, inst->io, inst->ops, inst->folded,
                                     stream, check, err);
    if (inst->branches)
        return kr_cuda_branches_enqueue(inst->branches, &inst->mem, inst->f16, inst->io,
                                        inst->ops, inst->folded, stream, check, err);
    return kr_cuda_pernode_enqueue(&inst->mem, inst->f16, inst->io, inst->ops, inst->folded,
                                   stream, check, err);
}

static int is_conv(kr_op op)
{
    return op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D ||
           op == KR_OP_TRANSPOSE_CONV_BIAS || op == KR_OP_TRANSPOSE_CONV;
}

/* Whether constant @p t is read as GATHER indices (uploaded as int32). */
static int is_gather_indices(const kr_graph *g, int t)
{
    for (int n = 0; n < g->n_nodes; n++)
        if (g->nodes[n].op == KR_OP_GATHER && g->nodes[n].n_inputs > 1 &&
            g->nodes[n].inputs[1] == t)
            return 1;
    return 0;
}

/* Element size of constant @p t: float for convolution weights and biases, 4 for int32 (GATHER
 * indices), else the element type (see ops.h). 0 if the constant is read both ways (not
 * supported: no shipped model). */
static size_t const_esize(const kr_backend_instance *inst, int t)
{
    const kr_graph *g = inst->graph;
    if (g->tensors[t].dtype == KR_DTYPE_I32)
        return 4;
    int as_weight = 0, as_operand = 0;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < g->nodes[n].n_inputs; i++)
            if (g->nodes[n].inputs[i] == t) {
                if (is_conv(g->nodes[n].op) && i >= 1)
                    as_weight = 1;
                else
                    as_operand = 1;
            }
    if (as_weight && as_operand && inst->esize != 4)
        return 0;
    return as_weight ? 4 : inst->esize;
}

/* Whether constant @p t is the weights (input 1) of an ungrouped CONV_2D: f16 instances keep a
 * half copy of it and the remainders for the tensor-core kernels (kr_cuda_op.w16). */
static int is_conv_weight16(const kr_graph *g, int t)
{
    for (int n = 0; n < g->n_nodes; n++)
        if (g->nodes[n].op == KR_OP_CONV_2D && g->nodes[n].n_inputs > 1 &&
            g->nodes[n].inputs[1] == t && g->nodes[n].p.window.groups <= 1)
            return 1;
    return 0;
}

/* Uploads every float constant (as float or in the element type, see const_esize) and the
 * int32 GATHER indices (as they are); f16 instances also the CONV_2D weights as hi and lo
 * halves (is_conv_weight16, kr_cuda_op.w16), converted once here. */
static keyer_status upload_weights(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    size_t total = 0, f32_total = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        inst->const_offsets[t] = SIZE_MAX;
        inst->const_half[t] = 0;
        if (!kr_tensor_is_const(tt) ||
            (tt->dtype != KR_DTYPE_F32 &&
             !(tt->dtype == KR_DTYPE_I32 && is_gather_indices(g, t))))
            continue;
        size_t es = const_esize(inst, t);
        if (!es)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: cuda backend: constant '%s' is both a convolution weight "
                                   "and an element-wise operand (not supported in f16)",
                                   g->name, tt->name);
        inst->const_half[t] = es == 2;
        inst->const_offsets[t] = total;
        size_t n = kr_tensor_elements(tt);
        total += (n * es + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        f32_total += (n * 4 + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        if (inst->w16_offsets && tt->dtype == KR_DTYPE_F32 && is_conv_weight16(g, t)) {
            inst->w16_offsets[t] = total; /* hi then lo halves (kr_cuda_op.w16) */
            total += (n * 4 + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
            f32_total += (n * 4 + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        }
    }
    inst->weight_bytes = total;
    if (!total)
        return KEYER_OK;
    cudaError_t e = cudaMalloc((void **)&inst->weights, total);
    inst->mem.weights = inst->weights;
    if (e != cudaSuccess)
        return kr_cuda_fail(err, g, "allocating the weights", e);
    float *staging = NULL;
    if (inst->f16) {
        e = cudaMalloc((void **)&staging, f32_total);
        if (e != cudaSuccess)
            return kr_cuda_fail(err, g, "allocating the weight staging buffer", e);
    }
    size_t f32_off = 0;
    for (int t = 0; t < g->n_tensors && e == cudaSuccess; t++) {
        const kr_tensor *tt = &g->tensors[t];
        if (inst->const_offsets[t] == SIZE_MAX)
            continue;
        size_t n = kr_tensor_elements(tt);
        if (!inst->const_half[t]) {
            e = cudaMemcpy(inst->weights + inst->const_offsets[t], tt->data, n * 4,
                           cudaMemcpyHostToDevice);
        } else {
            float *s = (float *)((unsigned char *)staging + f32_off);
            e = cudaMemcpy(s, tt->data, n * 4, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) /* the copy has arrived (see before the validation run) */
                e = cudaStreamSynchronize(cudaStreamLegacy);
            if (e == cudaSuccess)
                e = (cudaError_t)kr_cuda_f32_to_f16(s, inst->weights + inst->const_offsets[t], n,
                                                    inst->own);
            f32_off += (n * 4 + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        }
        if (e == cudaSuccess && inst->w16_offsets && inst->w16_offsets[t] != SIZE_MAX) {
            float *s = (float *)((unsigned char *)staging + f32_off);
            e = cudaMemcpy(s, tt->data, n * 4, cudaMemcpyHostToDevice);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(cudaStreamLegacy);
            if (e == cudaSuccess)
                e = (cudaError_t)kr_cuda_f32_to_f16_hilo(s, inst->weights + inst->w16_offsets[t],
                                                         n, inst->own);
            f32_off += (n * 4 + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        }
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(inst->own);
    cudaFree(staging);
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, g, "uploading the weights", e);
}

/* A new instance in @p out with its per-tensor and per-node arrays and its private stream.
 * Errors: OUT_OF_MEMORY, DEVICE (then nothing is left allocated). */
static keyer_status instance_new(const kr_graph *g, const kr_backend_config *cfg,
                                 kr_backend_instance **out, keyer_error *err)
{
    kr_backend_instance *inst = calloc(1, sizeof(*inst));
    if (!inst)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    inst->graph = g;
    inst->logger = cfg->logger;
    inst->batch = cfg->batch;
    inst->f16 = cfg->f16 != 0;
    inst->device = cfg->device;
    inst->esize = inst->f16 ? 2 : 4;
    size_t nt = g->n_tensors ? (size_t)g->n_tensors : 1, nn = g->n_nodes ? (size_t)g->n_nodes : 1;
    inst->offsets = malloc(nt * sizeof(size_t));
    inst->const_offsets = malloc(nt * sizeof(size_t));
    inst->const_half = calloc(nt, 1);
    if (inst->f16) {
        inst->w16_offsets = malloc(nt * sizeof(size_t));
        for (size_t t = 0; inst->w16_offsets && t < nt; t++)
            inst->w16_offsets[t] = SIZE_MAX;
    }
    inst->io = calloc(nt, sizeof(float *));
    inst->ops = calloc(nn, sizeof(kr_cuda_op));
    inst->folded = calloc(nn, 1);
    if (!inst->offsets || !inst->const_offsets || !inst->const_half || !inst->io || !inst->ops ||
        !inst->folded || (inst->f16 && !inst->w16_offsets)) {
        cuda_destroy(&inst);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    }
    cudaError_t e = cudaStreamCreateWithFlags(&inst->own, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cuda_destroy(&inst);
        return kr_cuda_fail(err, g, "creating a stream", e);
    }
    inst->stream = cfg->stream ? (cudaStream_t)cfg->stream : inst->own;
    inst->mem = (kr_cuda_mem){.graph = g,
                              .batch = inst->batch,
                              .esize = inst->esize,
                              .offsets = inst->offsets,
                              .const_offsets = inst->const_offsets,
                              .w16_offsets = inst->w16_offsets};
    *out = inst;
    return KEYER_OK;
}

/* The activation arena: the plan's layout, halved for f16 (every tensor shrinks by the same
 * factor, so non-overlap and 32-byte alignment are kept), zeroed. f16 instances with nodes in
 * float32 (precision_plan.h) keep the float layout: a tensor is stored in the type of the node
 * writing it (mixed.h). */
static keyer_status alloc_arena(kr_backend_instance *inst, const kr_plan *plan, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    size_t div = inst->pplan.n_f32 ? 1 : 4 / inst->esize;
    inst->mem.esize = 4 / div;
    for (int t = 0; t < g->n_tensors; t++)
        inst->offsets[t] = plan->offsets[t] == SIZE_MAX ? SIZE_MAX : plan->offsets[t] / div;
    inst->arena_bytes = plan->arena_bytes / div + 256;
    cudaError_t e = cudaMalloc((void **)&inst->arena, inst->arena_bytes);
    if (e == cudaSuccess)
        e = cudaMemset(inst->arena, 0, inst->arena_bytes);
    if (e != cudaSuccess) {
        keyer_status st = keyer_error_set(
            err, e == cudaErrorMemoryAllocation ? KEYER_STATUS_OUT_OF_MEMORY : KEYER_STATUS_DEVICE,
            "%s: cuda backend: cannot allocate the %.1f MB activation arena for batch %d on "
            "device %d: %s",
            g->name, inst->arena_bytes / 1e6, inst->batch, inst->device, cudaGetErrorString(e));
        cudaGetLastError(); /* clear a non-sticky allocation error */
        return st;
    }
    inst->mem.arena = inst->arena;
    return KEYER_OK;
}

/* The f32 device staging of the graph inputs and outputs (f16 instances), and the pinned host
 * buffer for copy_in/copy_out (the largest of them). */
static keyer_status alloc_io(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    size_t max_io = 0;
    cudaError_t e;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        if (!is_io(tt))
            continue;
        size_t bytes = kr_tensor_bytes(tt, inst->batch);
        max_io = bytes > max_io ? bytes : max_io;
        if (inst->f16) {
            e = cudaMalloc((void **)&inst->io[t], bytes);
            if (e == cudaSuccess)
                e = cudaMemset(inst->io[t], 0, bytes);
            if (e != cudaSuccess)
                return kr_cuda_fail(err, g, "allocating input/output buffers", e);
        }
    }
    inst->pinned_bytes = max_io ? max_io : 64;
    e = cudaMallocHost(&inst->pinned, inst->pinned_bytes);
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, g, "allocating pinned host memory", e);
}

/* One validation run node by node (after the set-up's uploads have arrived), then the
 * inference captured as one CUDA graph, instantiated and uploaded to the run stream. */
/* f16 instances: points ARGMAX's int32 output at its graph output's 4-byte staging (the arena
 * gives every tensor 2 bytes per element). Errors: UNSUPPORTED for an int32 tensor that is not
 * a graph output (its storage would not fit). */
static keyer_status bind_int_outputs(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    if (!inst->f16)
        return KEYER_OK;
    for (int n = 0; n < g->n_nodes; n++) {
        int t = g->nodes[n].outputs[0];
        if (t < 0 || g->tensors[t].dtype != KR_DTYPE_I32)
            continue;
        if (g->tensors[t].graph_output < 0 || !inst->io[t])
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: cuda backend: node %d (operator %d in the file, %s): an "
                                   "int32 result that is not a graph output is not supported in "
                                   "f16 (use f32)",
                                   g->name, n, g->nodes[n].source_index,
                                   kr_op_name(g->nodes[n].op));
        inst->ops[n].out = inst->io[t];
    }
    return KEYER_OK;
}

static keyer_status validate_and_capture(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    /* set-up's cudaMemcpy (from pageable memory: may return before the data has arrived) and
     * cudaMemset (asynchronous) run on the legacy default stream, which inst->own and the
     * caller's stream (non-blocking) do not wait for */
    cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess)
        return kr_cuda_fail(err, g, "finishing the uploads", e);
    keyer_status st = enqueue(inst, inst->own, 1, err); /* validation run, node by node */
    if (st)
        return st;
    e = cudaStreamBeginCapture(inst->own, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return kr_cuda_fail(err, g, "starting the graph capture", e);
    st = enqueue(inst, inst->own, 0, err);
    e = cudaStreamEndCapture(inst->own, &inst->cgraph);
    if ((st || e != cudaSuccess) && inst->branches) {
        /* the branched capture failed: the serial order instead (the arena's windows keep it
         * valid, planner.h) */
        keyer_log(inst->logger, KEYER_LOG_WARNING,
                  "%s: cuda backend: capturing the second stream failed (%s): every node in "
                  "graph order instead",
                  g->name, st && err ? err->message : cudaGetErrorString(e));
        cudaGetLastError();
        if (inst->cgraph)
            cudaGraphDestroy(inst->cgraph);
        inst->cgraph = NULL;
        kr_cuda_branches_destroy(&inst->branches);
        e = cudaStreamBeginCapture(inst->own, cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess)
            return kr_cuda_fail(err, g, "starting the graph capture", e);
        st = enqueue(inst, inst->own, 0, err);
        e = cudaStreamEndCapture(inst->own, &inst->cgraph);
    }
    if (st)
        return st;
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&inst->exec, inst->cgraph, 0);
    if (e == cudaSuccess)
        e = cudaGraphUpload(inst->exec, inst->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(inst->stream);
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, g, "building the CUDA graph", e);
}

/* Checks and selects device cfg->device; its capabilities into @p caps, with the emulated
 * older class of KEYER_CUDA_EMULATE_CC applied (core/gpu_caps.h), logged when emulated. */
static keyer_status select_device(const kr_graph *g, const kr_backend_config *cfg,
                                  kr_gpu_caps *caps, keyer_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "%s: cuda backend: no CUDA device available (%s)", g->name,
                               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (cfg->device >= count)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "%s: cuda backend: device %d does not exist (%d present)", g->name,
                               cfg->device, count);
    e = cudaSetDevice(cfg->device);
    if (e != cudaSuccess)
        return kr_cuda_fail(err, g, "selecting the device", e);
    const kr_device_fns *dev = kr_device_cuda();
    if (!dev || dev->caps(cfg->device, 1, caps, err))
        return dev ? keyer_error_prefix(err, "%s: cuda backend: ", g->name)
                   : keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: no CUDA device table",
                                     g->name);
    if (caps->emulated) {
        char line[400];
        kr_gpu_caps_describe(caps, line, sizeof(line));
        keyer_log(cfg->logger, KEYER_LOG_INFO,
                  "%s: cuda backend: device %d treated as %s (%s): the choices of schedule and "
                  "kernels and their limits are that class's; the code that runs is still the "
                  "device's own compute %d.%d machine code",
                  g->name, cfg->device, line, KR_GPU_EMULATE_ENV, caps->real_major,
                  caps->real_minor);
    }
    return KEYER_OK;
}

/* The fusion pass and the bindings of the per-node schedule on the instance's arena (again
 * after a new layout): kr_cuda_fuse, the int32 outputs, the per-node gather folds, a stem
 * reading the float input, a layer writing a float output. */
static keyer_status fuse_pernode(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    memset(inst->ops, 0, (size_t)g->n_nodes * sizeof(kr_cuda_op));
    memset(inst->folded, 0, (size_t)g->n_nodes);
    inst->n_folded = kr_cuda_fuse(&inst->mem, inst->f16, inst->ops, inst->folded);
    keyer_status st = bind_int_outputs(inst, err);
    if (st)
        return st;
    inst->n_folded += kr_cuda_fuse_gathers(&inst->mem, inst->ops, inst->folded);
    if (inst->f16) {
        kr_cuda_pernode_bind_inputs(&inst->mem, inst->io, inst->ops, inst->folded);
        kr_cuda_pernode_bind_outputs(&inst->mem, inst->io, inst->ops, inst->folded);
    }
    return KEYER_OK;
}

/* What the fusion pass decided for node @p n (folded, and which folds its kernel does), as bits:
 * equal for two layouts when the same kernels compute the same sums. */
static unsigned fold_signature(const kr_backend_instance *inst, int n)
{
    const kr_cuda_op *op = &inst->ops[n];
    return (unsigned)inst->folded[n] | (unsigned)op->post << 1 | !!op->residual << 4 |
           !!op->addend << 5 | !!op->cat.src[0] << 6 | !!op->scale.src << 7 | !!op->rs.src << 8 |
           !!op->add.src << 9 | !!op->pool.src << 10 | !!op->x_f32 << 11 |
           !!op->gcat.n << 12 | !!op->y_f32 << 13;
}

/* Lays the arena out as @p plan says (a new allocation, zeroed) and binds the per-node
 * schedule's nodes to it again. Errors: OUT_OF_MEMORY, DEVICE. */
static keyer_status relayout(kr_backend_instance *inst, const kr_plan *plan, keyer_error *err)
{
    cudaError_t e = cudaFree(inst->arena);
    inst->arena = NULL;
    inst->mem.arena = NULL;
    if (e != cudaSuccess)
        return kr_cuda_fail(err, inst->graph, "freeing the activation arena", e);
    keyer_status st = alloc_arena(inst, plan, err);
    return st ? st : fuse_pernode(inst, err);
}

/* The per-node schedule's branches (branches.h): their live windows on the runtime's layout;
 * where some units go to the second stream, lays the arena out again with those windows
 * (kr_plan_create_windows), fuses and binds again, and plans the branches on the new layout
 * (the ones that run), or goes back to the runtime's layout @p serial when none is left.
 * Nothing changes when KR_CUDA_BRANCHES_ENV is "0" or no unit is off the critical path.
 * Errors: OUT_OF_MEMORY, DEVICE. */
static keyer_status setup_branches(kr_backend_instance *inst, const kr_plan *serial,
                                   keyer_error *err)
{
    const kr_graph *g = inst->graph;
    if (!kr_cuda_branches_enabled())
        return KEYER_OK;
    size_t nt = g->n_tensors ? (size_t)g->n_tensors : 1;
    int *from = malloc(nt * sizeof(int)), *to = malloc(nt * sizeof(int)), any = 0;
    kr_plan plan = {0};
    keyer_status st = KEYER_OK;
    if (!from || !to)
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    if (!st)
        st = kr_cuda_branches_windows(&inst->mem, inst->arena_bytes, inst->io, inst->ops,
                                      inst->folded, from, to, &any, err);
    if (!st && any)
        st = kr_plan_create_windows(g, inst->batch, KR_CUDA_PLAN_SLACK, serial, from, to, &plan,
                                    err);
    free(from);
    free(to);
    if (st || !any)
        return st;
    size_t serial_bytes = inst->arena_bytes;
    unsigned *sig = malloc((size_t)(g->n_nodes + 1) * sizeof(unsigned));
    if (!sig) {
        kr_plan_destroy(&plan);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    }
    for (int n = 0; n < g->n_nodes; n++)
        sig[n] = fold_signature(inst, n);
    st = relayout(inst, &plan, err);
    kr_plan_destroy(&plan);
    int same = 1; /* the folds depend on overlaps: the same kernels, or no branches */
    for (int n = 0; !st && n < g->n_nodes; n++)
        same &= sig[n] == fold_signature(inst, n);
    free(sig);
    if (!st && !same)
        keyer_log(inst->logger, KEYER_LOG_DEBUG,
                  "%s: cuda backend: the layout for a second stream changes the fusion pass's "
                  "folds: every node in graph order",
                  g->name);
    if (!st && same)
        st = kr_cuda_branches_plan(&inst->mem, inst->arena_bytes, inst->io, inst->ops,
                                   inst->folded, &inst->branches, err);
    if (!st && inst->branches)
        st = kr_cuda_branches_prepare(inst->branches, err);
    else if (!st) /* nothing off the critical path (or other folds): the runtime's layout */
        st = relayout(inst, serial, err);
    if (st)
        return st;
    int side = 0, forks = 0, joins = 0;
    kr_cuda_branches_counts(inst->branches, &side, &forks, &joins);
    keyer_log(inst->logger, KEYER_LOG_DEBUG,
              "%s: cuda backend: %d fused nodes and conversions off the critical path on a "
              "second stream (%d forks, %d joins); arena %.1f MB (%.1f MB in graph order)",
              g->name, side, forks, joins, inst->arena_bytes / 1e6, serial_bytes / 1e6);
    return KEYER_OK;
}

static keyer_status cuda_create(const kr_graph *g, const kr_plan *plan,
                                const kr_backend_config *cfg, kr_backend_instance **out,
                                keyer_error *err)
{
    *out = NULL;
    if (plan->n_tensors != g->n_tensors || plan->batch != cfg->batch)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "%s: cuda backend: the plan does not match the graph", g->name);
    if (g->fixed_batch && cfg->batch != 1) /* its axis 0 is not a batch axis (graph.h) */
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: cuda backend: the model runs at batch 1 only (its operators "
                               "move or mix axis 0), batch %d asked",
                               g->name, cfg->batch);
    kr_gpu_caps caps;
    keyer_status st = select_device(g, cfg, &caps, err);
    if (st)
        return st;
    kr_backend_instance *inst = NULL;
    st = instance_new(g, cfg, &inst, err);
    if (st)
        return st;
    inst->caps = caps;
    inst->caps.wgmma = kr_cuda_wgmma_mode(&caps);
    inst->caps.vec_epilogue = kr_cuda_vec_epilogue_mode();
    inst->mem.caps = &inst->caps;
    /* mixed precision (precision_plan.h, mixed.h) under AUTO and the per-node schedule; a
     * persistent schedule asked by name runs the graph all in half */
    if (inst->f16 &&
        (cfg->schedule == KEYER_CUDA_SCHEDULE_AUTO || cfg->schedule == KEYER_CUDA_SCHEDULE_KERNELS))
        st = kr_precision_plan_make(g, &inst->pplan, err);
    if (!st)
        st = alloc_arena(inst, plan, err);
    if (!st)
        st = upload_weights(inst, err);
    if (!st)
        st = alloc_io(inst, err);
    if (!st) {
        inst->n_folded = kr_cuda_fuse(&inst->mem, inst->f16, inst->ops, inst->folded);
        st = bind_int_outputs(inst, err);
    }
    if (!st && inst->pplan.n_f32) /* mixed precision: the per-node schedule only */
        st = kr_cuda_mixed_create(&inst->mem, inst->io, inst->ops, inst->folded, inst->pplan.f32,
                                  &inst->mixed, err);
    else if (!st) {
        st = kr_cuda_psched_create(&inst->mem, inst->io, inst->ops, inst->folded, cfg,
                                   &inst->pers, err);
        inst->schedule = !inst->pers           ? KR_SCHEDULE_PER_NODE
                         : inst->pers->has_seg ? KR_SCHEDULE_PERSISTENT_CLUSTER
                                               : KR_SCHEDULE_PERSISTENT;
        if (!st && !inst->pers) /* the per-node schedule's own folds (fusion.h) */
            inst->n_folded += kr_cuda_fuse_gathers(&inst->mem, inst->ops, inst->folded);
        if (!st && !inst->pers && inst->f16) { /* a stem that reads the float input itself, */
            kr_cuda_pernode_bind_inputs(&inst->mem, inst->io, inst->ops, inst->folded);
            /* a layer that writes a float output itself */
            kr_cuda_pernode_bind_outputs(&inst->mem, inst->io, inst->ops, inst->folded);
        }
        if (!st && !inst->pers) /* units off the critical path on a second stream */
            st = setup_branches(inst, plan, err);
    }
    if (!st)
        st = validate_and_capture(inst, err);
    if (st) {
        cuda_destroy(&inst);
        return st;
    }
    keyer_log(cfg->logger, KEYER_LOG_DEBUG,
              "%s: cuda backend: device %d (compute %d.%d%s), %s, batch %d, arena %.1f MB, "
              "weights %.1f MB, %d nodes (%d activations, residual ADDs, resizes, "
              "concatenations and pools folded into other nodes), one CUDA graph of the %s "
              "schedule",
              g->name, cfg->device, inst->caps.major, inst->caps.minor,
              inst->caps.emulated ? ", emulated" : "",
              !inst->f16 ? "f32" : inst->mixed ? "f16 with float32 nodes" : "f16", cfg->batch,
              inst->arena_bytes / 1e6, inst->weight_bytes / 1e6, g->n_nodes, inst->n_folded,
              kr_schedule_name(inst->schedule));
    if (inst->mixed) {
        int nf = 0, steps = 0;
        kr_cuda_mixed_counts(inst->mixed, &nf, &steps);
        keyer_log(cfg->logger, KEYER_LOG_DEBUG,
                  "%s: cuda backend: mixed precision: %d fused nodes in float32, %d conversions "
                  "per run; %s",
                  g->name, nf, steps, inst->pplan.summary);
    }
    *out = inst;
    return KEYER_OK;
}

static void *cuda_tensor_data(kr_backend_instance *inst, int tensor)
{
    if (inst->f16 && inst->io[tensor])
        return inst->io[tensor];
    return dev_ptr(inst, tensor);
}

static keyer_status cuda_run(kr_backend_instance *inst, keyer_error *err)
{
    cudaError_t e = cudaGraphLaunch(inst->exec, inst->stream);
    if (e == cudaSuccess)
        return KEYER_OK;
    /* find the node: replay node by node (works for errors that are not sticky) */
    keyer_status st = enqueue(inst, inst->stream, 1, err);
    if (st)
        return st;
    return kr_cuda_fail(err, inst->graph, "replaying the CUDA graph", e);
}

static keyer_status cuda_synchronize(kr_backend_instance *inst, keyer_error *err)
{
    cudaError_t e = cudaStreamSynchronize(inst->stream);
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, inst->graph, "running the graph", e);
}

static keyer_status cuda_copy_in(kr_backend_instance *inst, int tensor, const void *src,
                                 size_t bytes, keyer_error *err)
{
    if (bytes > inst->pinned_bytes)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: cuda backend: %zu bytes exceed the staging buffer",
                               inst->graph->name, bytes);
    cudaError_t e = cudaStreamSynchronize(inst->stream); /* the staging buffer may be in use */
    if (e == cudaSuccess) {
        memcpy(inst->pinned, src, bytes);
        e = cudaMemcpyAsync(cuda_tensor_data(inst, tensor), inst->pinned, bytes,
                            cudaMemcpyHostToDevice, inst->stream);
    }
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, inst->graph, "copying an input", e);
}

static keyer_status cuda_copy_out(kr_backend_instance *inst, int tensor, void *dst, size_t bytes,
                                  keyer_error *err)
{
    if (bytes > inst->pinned_bytes)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: cuda backend: %zu bytes exceed the staging buffer",
                               inst->graph->name, bytes);
    cudaError_t e = cudaMemcpyAsync(inst->pinned, cuda_tensor_data(inst, tensor), bytes,
                                    cudaMemcpyDeviceToHost, inst->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(inst->stream);
    if (e == cudaSuccess)
        memcpy(dst, inst->pinned, bytes);
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, inst->graph, "copying an output", e);
}

static keyer_status cuda_profile(kr_backend_instance *inst, double *ms, keyer_error *err)
{
    if (inst->pers)
        return kr_cuda_psched_profile(inst->pers, inst->stream, ms, err);
    return kr_cuda_pernode_profile(inst->graph, inst->ops, inst->folded, inst->stream, ms, err);
}

static size_t cuda_arena_bytes(const kr_backend_instance *inst) { return inst->arena_bytes; }
static const char *cuda_schedule_name(const kr_backend_instance *inst)
{
    return kr_schedule_name(inst->schedule);
}
static size_t cuda_weight_bytes(const kr_backend_instance *inst) { return inst->weight_bytes; }

const kr_backend_ops kr_backend_cuda = {
    .name = "cuda",
    .memory = KEYER_MEMORY_CUDA,
    .plan_slack = KR_CUDA_PLAN_SLACK,
    .supports_node = cuda_supports,
    .create = cuda_create,
    .tensor_data = cuda_tensor_data,
    .run = cuda_run,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
    .synchronize = cuda_synchronize,
    .arena_bytes = cuda_arena_bytes,
    .weight_bytes = cuda_weight_bytes,
    .profile = cuda_profile,
    .schedule_name = cuda_schedule_name,
    .destroy = cuda_destroy,
};
