/*
 * The cuda backend (kr_backend_cuda): every node runs a kernel from this folder (one .cu file
 * per operator, declared in nn/cuda/ops.h) on activations laid out in one device arena by the
 * planner, in float32 or float16 (cfg->f16: weights and activations stored as __half, float
 * accumulation).
 *
 * Set-up (create) does everything: device check, arena and weight allocation, weight upload
 * (element-wise operands converted to half once for f16; convolution weights stay float, see
 * ops.h), float32 staging buffers for the graph inputs and outputs of
 * f16 instances, pinned host buffers for keyer_runtime_set_input/get_output, the fusion pass,
 * one validation run that synchronises after every node (so that a failing kernel is reported
 * with its operator and node), and the capture of the whole inference as one CUDA graph on a
 * private stream. run replays that graph on the caller's stream (or the private one): one
 * launch, no allocation, no host synchronisation.
 *
 * Fusion: a RELU, RELU6, HARD_SWISH or LOGISTIC node that directly follows the node producing
 * its only input (a tensor nobody else reads, not a graph output, not viewed) is folded into
 * that node's kernel as its post function, and the producer writes straight into the
 * activation's output tensor. Convolutions always apply bias and their fused clamp in the
 * epilogue. The fold is skipped when the activation's output storage overlaps one of the
 * producer's inputs (the planner may reuse memory across the two nodes), except where an
 * element-wise producer's input occupies exactly the same bytes (an in-place update).
 * Then residual ADDs (plan_residual_folds): an ADD without activation whose operands both have
 * its output's shape, one of them written by the (convolution, depthwise, transpose, ADD or
 * MUL) node just before it and read by nobody else, the other ready before that node, is done
 * in that node's epilogue (after its post function): the node writes the ADD's output and the
 * intermediate tensor is never stored. Selfie's decoder: 11 of its 14 ADDs.
 *
 * Schedules (keyer_cuda_schedule): the graph captured above replays a kernel per fused node;
 * the persistent schedule (persistent.h, plan_persistent) captures instead one cooperative
 * kernel that walks the same fused nodes as steps (plus the f16 conversions), for small
 * batches. Both keep the validation run, the capture and the replay described above.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/log.h"
#include "keyer/nn.h"
#include "nn/backend.h"
#include "nn/cuda/ops.h"
#include "nn/cuda/persistent.h"
#include "nn/cuda/segment.h"

static const kr_cuda_op_fn cuda_ops[KR_OP_COUNT] = {
    [KR_OP_CONV_2D] = kr_cuda_conv_2d,
    [KR_OP_DEPTHWISE_CONV_2D] = kr_cuda_depthwise_conv_2d,
    [KR_OP_TRANSPOSE_CONV_BIAS] = kr_cuda_transpose_conv_bias,
    [KR_OP_ADD] = kr_cuda_add,
    [KR_OP_MUL] = kr_cuda_mul,
    [KR_OP_RELU] = kr_cuda_relu,
    [KR_OP_RELU6] = kr_cuda_relu6,
    [KR_OP_HARD_SWISH] = kr_cuda_hard_swish,
    [KR_OP_LOGISTIC] = kr_cuda_logistic,
    [KR_OP_PRELU] = kr_cuda_prelu,
    [KR_OP_AVERAGE_POOL_2D] = kr_cuda_average_pool_2d,
    [KR_OP_MAX_POOL_2D] = kr_cuda_max_pool_2d,
    [KR_OP_MEAN] = kr_cuda_mean,
    [KR_OP_PAD] = kr_cuda_pad,
    [KR_OP_RESIZE_BILINEAR] = kr_cuda_resize_bilinear,
    [KR_OP_RESHAPE] = kr_cuda_reshape,
    [KR_OP_CONCATENATION] = kr_cuda_concatenation,
};
_Static_assert(sizeof(cuda_ops) / sizeof(cuda_ops[0]) == KR_OP_COUNT,
               "cuda_ops must have an entry for every kr_op");

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
    unsigned char *const_half; /* per tensor: constant stored as half */
    float **io;                /* per tensor: f32 device staging of graph inputs/outputs (f16) */
    void *pinned;              /* host staging for copy_in/copy_out */
    size_t pinned_bytes;
    kr_cuda_op *ops;           /* per node */
    unsigned char *folded;     /* per node: 1 if folded into the previous node */
    int n_folded;
    kr_cuda_step *steps;       /* device: the persistent schedule's steps; NULL: per node */
    int n_steps;
    unsigned blocks;           /* of the persistent kernel */
    float *scratch;            /* device: its pools' sums */
    float *wt;                 /* device: its transposed convolution weights (persistent.h) */
    int has_seg;               /* 1: steps [seg.first, seg_end()) run as a cluster segment */
    kr_cuda_segment seg;       /* (segment.h); seg.w: device, its packed weights */
    void *seg_out;             /* device: that output buffer, or NULL */
    cudaGraph_t cgraph;
    cudaGraphExec_t exec;
};

static keyer_status cuda_fail(keyer_error *err, const kr_graph *g, const char *what, cudaError_t e)
{
    keyer_status st = (e == cudaErrorMemoryAllocation) ? KEYER_STATUS_OUT_OF_MEMORY
                                                       : KEYER_STATUS_DEVICE;
    return keyer_error_set(err, st, "%s: cuda backend: %s: %s (%s)", g->name, what,
                           cudaGetErrorString(e), cudaGetErrorName(e));
}

static int cuda_supports(const kr_graph *g, const kr_node *node)
{
    if ((unsigned)node->op >= KR_OP_COUNT || !cuda_ops[node->op])
        return 0;
    for (int i = 0; i < node->n_inputs; i++) { /* float activations; int32 only as constants */
        int t = node->inputs[i];
        if (t >= 0 && g->tensors[t].dtype != KR_DTYPE_F32 && !kr_tensor_is_const(&g->tensors[t]))
            return 0;
    }
    if (node->op == KR_OP_CONCATENATION && node->n_inputs > KR_MAX_NODE_INPUTS)
        return 0;
    return 1;
}

/* Device bytes of tensor @p t in the element type (the instance's arena or weights). */
static void *dev_ptr(const kr_backend_instance *inst, int t)
{
    const kr_graph *g = inst->graph;
    int s = kr_tensor_storage(g, t);
    if (kr_tensor_is_const(&g->tensors[s]))
        return inst->const_offsets[s] == SIZE_MAX ? NULL : inst->weights + inst->const_offsets[s];
    return inst->arena + inst->offsets[s];
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
    cudaFree(inst->arena);
    cudaFree(inst->weights);
    cudaFree(inst->steps);
    cudaFree(inst->scratch);
    cudaFree(inst->wt);
    cudaFree((void *)inst->seg.w);
    cudaFree(inst->seg_out);
    if (inst->pinned)
        cudaFreeHost(inst->pinned);
    if (inst->own)
        cudaStreamDestroy(inst->own);
    free(inst->io);
    free(inst->offsets);
    free(inst->const_offsets);
    free(inst->const_half);
    free(inst->ops);
    free(inst->folded);
    free(inst);
    *pinst = NULL;
}

static int takes_post(kr_op op)
{
    switch (op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_TRANSPOSE_CONV_BIAS:
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_PRELU:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
    case KR_OP_MEAN:
    case KR_OP_RESIZE_BILINEAR: return 1;
    default: return 0;
    }
}

/* Whether the arena bytes of tensors a and b overlap. */
static int overlaps(const kr_backend_instance *inst, int a, int b)
{
    const kr_graph *g = inst->graph;
    int sa = kr_tensor_storage(g, a), sb = kr_tensor_storage(g, b);
    if (kr_tensor_is_const(&g->tensors[sa]) || kr_tensor_is_const(&g->tensors[sb]))
        return 0;
    size_t a0 = inst->offsets[sa], a1 = a0 + kr_tensor_bytes(&g->tensors[sa], inst->batch) /
                                                 (4 / inst->esize);
    size_t b0 = inst->offsets[sb], b1 = b0 + kr_tensor_bytes(&g->tensors[sb], inst->batch) /
                                                 (4 / inst->esize);
    return a0 < b1 && b0 < a1;
}

/* Whether tensors a and b occupy exactly the same arena bytes (an element-wise kernel may then
 * read one and write the other: each element is read and written by the same thread). */
static int same_place(const kr_backend_instance *inst, int a, int b)
{
    const kr_graph *g = inst->graph;
    int sa = kr_tensor_storage(g, a), sb = kr_tensor_storage(g, b);
    return !kr_tensor_is_const(&g->tensors[sa]) && !kr_tensor_is_const(&g->tensors[sb]) &&
           inst->offsets[sa] == inst->offsets[sb] &&
           kr_tensor_bytes(&g->tensors[sa], inst->batch) ==
               kr_tensor_bytes(&g->tensors[sb], inst->batch);
}

static int is_elementwise(kr_op op)
{
    return op == KR_OP_ADD || op == KR_OP_MUL || op == KR_OP_PRELU;
}

/* Whether any tensor is a view of @p t. */
static int is_viewed(const kr_graph *g, int t)
{
    for (int v = 0; v < g->n_tensors; v++)
        if (g->tensors[v].view_of == t)
            return 1;
    return 0;
}

/* The fusion pass (see the file comment). */
static void plan_folds(kr_backend_instance *inst)
{
    const kr_graph *g = inst->graph;
    for (int n = 0; n + 1 < g->n_nodes; n++) {
        const kr_node *a = &g->nodes[n], *b = &g->nodes[n + 1];
        if (inst->folded[n] || !takes_post(a->op) || kr_cuda_post_of(b->op) == KR_CUDA_POST_NONE)
            continue;
        int t = a->outputs[0];
        const kr_tensor *tt = &g->tensors[t];
        if (b->inputs[0] != t || tt->last_consumer != n + 1 || tt->graph_output >= 0)
            continue;
        int viewed = is_viewed(g, t);
        int clash = 0;
        for (int i = 0; i < a->n_inputs && !clash; i++)
            clash = a->inputs[i] >= 0 && overlaps(inst, a->inputs[i], b->outputs[0]) &&
                    !(is_elementwise(a->op) && same_place(inst, a->inputs[i], b->outputs[0]));
        if (viewed || clash)
            continue;
        inst->ops[n].out = dev_ptr(inst, b->outputs[0]);
        inst->ops[n].post = kr_cuda_post_of(b->op);
        inst->folded[n + 1] = 1;
        inst->n_folded++;
    }
}

static int takes_residual(kr_op op)
{
    return op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D ||
           op == KR_OP_TRANSPOSE_CONV_BIAS || op == KR_OP_ADD || op == KR_OP_MUL;
}



/* Residual folds, after the activation folds (see the file comment): an ADD of two tensors of
 * its output's shape, one of them written by the node just before it (after folding) and read
 * by nobody else, is done in that node's epilogue. */
static void plan_residual_folds(kr_backend_instance *inst)
{
    const kr_graph *g = inst->graph;
    for (int m = 1; m < g->n_nodes; m++) {
        const kr_node *add = &g->nodes[m];
        if (add->op != KR_OP_ADD || inst->folded[m] || add->activation != KR_ACT_NONE ||
            inst->ops[m].post != KR_CUDA_POST_NONE || add->n_inputs != 2)
            continue;
        int n = m - 1;
        while (n >= 0 && inst->folded[n])
            n--;
        if (n < 0 || !takes_residual(g->nodes[n].op) || inst->ops[n].residual)
            continue;
        const kr_node *prod = &g->nodes[n];
        int out = add->outputs[0];
        for (int side = 0; side < 2; side++) {
            int t = add->inputs[side], r = add->inputs[1 - side];
            const kr_tensor *tt = &g->tensors[t], *rt = &g->tensors[r];
            if (kr_tensor_is_const(tt) || kr_tensor_is_const(rt) ||
                !kr_tensor_same_dims(tt, &g->tensors[out]) || !kr_tensor_same_dims(rt, &g->tensors[out]) ||
                inst->ops[n].out != dev_ptr(inst, t) || tt->last_consumer != m ||
                tt->graph_output >= 0 || is_viewed(g, t) || t == r ||
                (rt->producer >= n) || is_viewed(g, out))
                continue;
            /* the node reads its inputs and r while writing the ADD's output: no partial
             * overlap (an element-wise node, and r, may share the exact bytes) */
            int clash = overlaps(inst, r, out) && !same_place(inst, r, out);
            for (int i = 0; i < prod->n_inputs && !clash; i++)
                clash = prod->inputs[i] >= 0 && overlaps(inst, prod->inputs[i], out) &&
                        !(is_elementwise(prod->op) && same_place(inst, prod->inputs[i], out));
            if (clash)
                continue;
            inst->ops[n].out = dev_ptr(inst, out);
            inst->ops[n].residual = dev_ptr(inst, r);
            inst->folded[m] = 1;
            inst->n_folded++;
            break;
        }
    }
}

/* (ops.h) */
int kr_cuda_is_global_pool(const kr_graph *g, const kr_node *node)
{
    if (node->n_inputs < 1 || node->inputs[0] < 0)
        return 0;
    const kr_tensor *x = &g->tensors[node->inputs[0]], *y = &g->tensors[node->outputs[0]];
    if (x->rank != 4 || y->rank != 4 || y->dims[1] != 1 || y->dims[2] != 1)
        return 0;
    if (node->op == KR_OP_MEAN)
        return node->p.mean.axes_mask == ((1u << 1) | (1u << 2)) && node->p.mean.keep_dims;
    const kr_window_params *p = &node->p.window;
    return node->op == KR_OP_AVERAGE_POOL_2D && p->pad_top <= 0 && p->pad_left <= 0 &&
           p->kernel_h - p->pad_top >= x->dims[1] && p->kernel_w - p->pad_left >= x->dims[2];
}

/* An ADD (no activation, same-shape operands) read only by the global average pool right
 * after it: the pool sums the two operands itself (squeeze-and-excitation after a skip
 * connection, selfie's decoder) and the sum is never stored. */
static void plan_pool_folds(kr_backend_instance *inst)
{
    const kr_graph *g = inst->graph;
    for (int m = 0; m + 1 < g->n_nodes; m++) {
        const kr_node *add = &g->nodes[m];
        if (add->op != KR_OP_ADD || inst->folded[m] || add->activation != KR_ACT_NONE ||
            inst->ops[m].post != KR_CUDA_POST_NONE || inst->ops[m].residual || add->n_inputs != 2)
            continue;
        const kr_node *pool = &g->nodes[m + 1];
        int out = add->outputs[0];
        const kr_tensor *ot = &g->tensors[out];
        if (inst->folded[m + 1] || !kr_cuda_is_global_pool(g, pool) || pool->inputs[0] != out ||
            ot->last_consumer != m + 1 || ot->graph_output >= 0 || is_viewed(g, out) ||
            inst->ops[m].out != dev_ptr(inst, out) || inst->ops[m + 1].addend)
            continue;
        const kr_tensor *a = &g->tensors[add->inputs[0]], *b = &g->tensors[add->inputs[1]];
        if (kr_tensor_is_const(a) || kr_tensor_is_const(b) || !kr_tensor_same_dims(a, ot) ||
            !kr_tensor_same_dims(b, ot))
            continue;
        inst->ops[m + 1].in[0] = dev_ptr(inst, add->inputs[0]);
        inst->ops[m + 1].addend = dev_ptr(inst, add->inputs[1]);
        inst->folded[m] = 1;
        inst->n_folded++;
    }
}

/* The first step after a cluster segment's kernel: seg.first + seg.count, or one less where the
 * segment's last slot holds the copy of its own output buffer (seg.shared_out, plan_segment). */
static int seg_end(const kr_backend_instance *inst)
{
    return inst->seg.first + inst->seg.count - inst->seg.shared_out;
}

/* Queues the persistent schedule on @p stream: the persistent kernel over every step, or, with
 * a cluster segment, over the steps before it, the segment's kernel, the persistent kernel over
 * the steps after it. @p clocks: the persistent kernel's profile (4 per step) or NULL; @p ev:
 * NULL, or two events recorded around the segment's kernel (the profile). */
static cudaError_t launch_schedule(kr_backend_instance *inst, cudaStream_t stream,
                                   long long *clocks, cudaEvent_t *ev)
{
    if (!inst->has_seg)
        return (cudaError_t)kr_cuda_persistent_launch(inst->steps, inst->n_steps, inst->f16,
                                                      inst->blocks, clocks, 0, stream);
    /* each kernel after the first is a programmatic dependent launch of the one before (not
     * when events are recorded between them): 1-1.5 us less per inference on the H100 */
    const int a = inst->seg.first, b = seg_end(inst), pdl = ev == NULL;
    cudaError_t e = cudaSuccess;
    if (a > 0)
        e = (cudaError_t)kr_cuda_persistent_launch(inst->steps, a, inst->f16, inst->blocks,
                                                   clocks, 0, stream);
    if (e == cudaSuccess && ev)
        e = cudaEventRecord(ev[0], stream);
    if (e == cudaSuccess)
        e = (cudaError_t)kr_cuda_segment_launch(&inst->seg, pdl && a > 0, stream);
    if (e == cudaSuccess && ev)
        e = cudaEventRecord(ev[1], stream);
    if (e == cudaSuccess && b < inst->n_steps)
        e = (cudaError_t)kr_cuda_persistent_launch(inst->steps + b, inst->n_steps - b, inst->f16,
                                                   inst->blocks, clocks ? clocks + 4 * b : NULL,
                                                   pdl, stream);
    return e;
}

/* Queues one inference on @p stream. With @p check, synchronises after every node and names
 * the node that failed. */
static keyer_status enqueue(kr_backend_instance *inst, cudaStream_t stream, int check,
                            keyer_error *err)
{
    const kr_graph *g = inst->graph;
    cudaError_t e;
    if (inst->steps) { /* the conversions are steps of the persistent kernel */
        e = launch_schedule(inst, stream, NULL, NULL);
        if (e == cudaSuccess && check)
            e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess)
            return keyer_error_set(err, KEYER_STATUS_DEVICE,
                                   "%s: cuda backend: the persistent kernel (%d steps, %u blocks%s) "
                                   "failed: %s (%s)",
                                   g->name, inst->n_steps, inst->blocks,
                                   inst->has_seg ? ", with a cluster segment" : "",
                                   cudaGetErrorString(e), cudaGetErrorName(e));
        return KEYER_OK;
    }
    if (inst->f16)
        for (int i = 0; i < g->n_inputs; i++) {
            int t = g->inputs[i];
            e = (cudaError_t)kr_cuda_f32_to_f16(inst->io[t], dev_ptr(inst, t),
                                                kr_tensor_bytes(&g->tensors[t], inst->batch) / 4,
                                                stream);
            if (e != cudaSuccess)
                return cuda_fail(err, g, "converting an input to half precision", e);
        }
    for (int n = 0; n < g->n_nodes; n++) {
        if (inst->folded[n])
            continue;
        inst->ops[n].stream = stream;
        e = (cudaError_t)cuda_ops[g->nodes[n].op](&inst->ops[n]);
        if (e == cudaSuccess && check)
            e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess)
            return keyer_error_set(err, KEYER_STATUS_DEVICE,
                                   "%s: cuda backend: node %d (operator %d in the file, %s) "
                                   "failed: %s (%s)",
                                   g->name, n, g->nodes[n].source_index,
                                   kr_op_name(g->nodes[n].op), cudaGetErrorString(e),
                                   cudaGetErrorName(e));
    }
    if (inst->f16)
        for (int i = 0; i < g->n_outputs; i++) {
            int t = g->outputs[i];
            e = (cudaError_t)kr_cuda_f16_to_f32(dev_ptr(inst, t), inst->io[t],
                                                kr_tensor_bytes(&g->tensors[t], inst->batch) / 4,
                                                stream);
            if (e != cudaSuccess)
                return cuda_fail(err, g, "converting an output to single precision", e);
        }
    return KEYER_OK;
}

static int is_conv(kr_op op)
{
    return op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D || op == KR_OP_TRANSPOSE_CONV_BIAS;
}

/* Element size of constant @p t: float for convolution weights and biases, else the element
 * type (see ops.h). 0 if the constant is read both ways (not supported: no shipped model). */
static size_t const_esize(const kr_backend_instance *inst, int t)
{
    const kr_graph *g = inst->graph;
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

/* Uploads every float constant (as float or in the element type, see const_esize). */
static keyer_status upload_weights(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    size_t total = 0, f32_total = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        inst->const_offsets[t] = SIZE_MAX;
        inst->const_half[t] = 0;
        if (!kr_tensor_is_const(tt) || tt->dtype != KR_DTYPE_F32)
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
    }
    inst->weight_bytes = total;
    if (!total)
        return KEYER_OK;
    cudaError_t e = cudaMalloc((void **)&inst->weights, total);
    if (e != cudaSuccess)
        return cuda_fail(err, g, "allocating the weights", e);
    float *staging = NULL;
    if (inst->f16) {
        e = cudaMalloc((void **)&staging, f32_total);
        if (e != cudaSuccess)
            return cuda_fail(err, g, "allocating the weight staging buffer", e);
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
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(inst->own);
    cudaFree(staging);
    return e == cudaSuccess ? KEYER_OK : cuda_fail(err, g, "uploading the weights", e);
}

/* Whether step @p s reads its (first) convolution's weights transposed (`wt`): a group-4
 * convolution, alone or as the first half of a fused step. */
static int reads_transposed(const kr_cuda_step *s)
{
    return (s->kind == KR_STEP_CONV || s->kind == KR_STEP_EXPAND_DW ||
            s->kind == KR_STEP_CONV_PW) &&
           s->group == 4;
}

/* The [tap][ic][oc] copies of the weights of the persistent schedule's group-4 convolutions
 * (persistent.h), in one device buffer; sets each step's `wt`. */
static cudaError_t upload_transposed(kr_backend_instance *inst, kr_cuda_step *h, int k)
{
    const kr_graph *g = inst->graph;
    size_t total = 0, most = 0;
    for (int i = 0; i < k; i++)
        if (reads_transposed(&h[i])) {
            size_t n = kr_tensor_elements(&g->tensors[h[i].w_tensor]);
            total += (n + 63) / 64 * 64; /* 256-byte aligned */
            most = n > most ? n : most;
        }
    if (!total)
        return cudaSuccess;
    float *t = malloc(most * sizeof(float));
    if (!t)
        return cudaErrorMemoryAllocation;
    cudaError_t e = cudaMalloc((void **)&inst->wt, total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < k && e == cudaSuccess; i++) {
        if (!reads_transposed(&h[i]))
            continue;
        const kr_tensor *w = &g->tensors[h[i].w_tensor];
        const float *src = w->data; /* OHWI: [oc][kh][kw][ic] */
        size_t n = kr_tensor_elements(w), oc = (size_t)w->dims[0], kk = n / oc;
        for (size_t o = 0; o < oc; o++)
            for (size_t j = 0; j < kk; j++)
                t[j * oc + o] = src[o * kk + j];
        e = cudaMemcpy(inst->wt + off, t, n * sizeof(float), cudaMemcpyHostToDevice);
        h[i].wt = inst->wt + off;
        off += (n + 63) / 64 * 64;
    }
    free(t);
    return e;
}

static int fetch_device(void *ctx, float *to, const float *src, size_t count)
{
    (void)ctx;
    return (int)cudaMemcpy(to, src, count * sizeof(float), cudaMemcpyDeviceToHost);
}

/* A cluster segment (segment.h) in the persistent steps @p h[0..k) (pointers bound, weights
 * uploaded), if the plan has one and the device can run it: its weights packed and uploaded,
 * inst->has_seg set; with seg.shared_out, its own output buffer and the segment's last step
 * replaced by the copy from it. A run the planner or the device refuses is logged (debug) and
 * left to the persistent kernel. Returns a CUDA error only for a failed query, allocation or
 * copy. */
static cudaError_t plan_segment(kr_backend_instance *inst, kr_cuda_step *h, int k)
{
    const kr_graph *g = inst->graph;
    kr_cuda_segment seg;
    const char *why = NULL;
    if (!kr_cuda_segment_find(g, h, k, inst->esize, &seg, &why)) {
        if (why)
            keyer_log(inst->logger, KEYER_LOG_DEBUG, "%s: cuda backend: no cluster segment: %s",
                      g->name, why);
        return cudaSuccess;
    }
    cudaError_t e = (cudaError_t)kr_cuda_segment_prepare(&seg, &why);
    if (e != cudaSuccess || why) {
        if (why)
            keyer_log(inst->logger, KEYER_LOG_DEBUG,
                      "%s: cuda backend: no cluster segment (steps %d-%d): %s", g->name,
                      seg.first, seg.first + seg.count - 1, why);
        return e;
    }
    float *packed = malloc(seg.weight_floats * sizeof(float)), *w = NULL;
    if (!packed)
        return cudaErrorMemoryAllocation;
    int pe = kr_cuda_segment_pack(&seg, h, packed, fetch_device, NULL);
    e = pe < 0 ? cudaErrorMemoryAllocation : (cudaError_t)pe;
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&w, seg.weight_floats * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMemcpy(w, packed, seg.weight_floats * sizeof(float), cudaMemcpyHostToDevice);
    free(packed);
    if (e != cudaSuccess) {
        cudaFree(w);
        return e;
    }
    seg.w = w;
    if (seg.shared_out) { /* its own output buffer, copied by a step in the last step's slot */
        const size_t elements = (size_t)seg.h * KR_CUDA_SEG_W * seg.c;
        e = cudaMalloc(&inst->seg_out, (size_t)seg.batch * elements * inst->esize);
        if (e != cudaSuccess) {
            cudaFree(w);
            return e;
        }
        kr_cuda_step *last = &h[seg.first + seg.count - 1];
        kr_cuda_persistent_copy(last, last->node, seg.batch, inst->seg_out, seg.y, elements);
        seg.y = inst->seg_out;
    }
    inst->seg = seg;
    inst->has_seg = 1;
    keyer_log(inst->logger, KEYER_LOG_DEBUG,
              "%s: cuda backend: steps %d-%d (%s%d expand/depthwise/excited-projection blocks at "
              "%dx%d%s) as a cluster segment: a cluster of %d blocks per item, %zu bytes of shared "
              "memory each, %.1f KB of weights%s",
              g->name, seg.first, seg.first + seg.count - 1,
              seg.s_ic ? "a stride-2 expand/depthwise step into them, " : "", seg.n_ir, seg.h,
              KR_CUDA_SEG_W,
              seg.v_oc ? ", then a 1x1 convolution, the decoder's block at twice the size and "
                         "the 1x1 convolution after it at four times"
              : seg.u_c ? ", then a 1x1 convolution and the decoder's block at twice the size"
              : seg.q_oc ? ", then a 1x1 convolution" : "", seg.h,
              kr_cuda_segment_smem(&seg),
              seg.weight_floats * 4 / 1e3,
              seg.shared_out ? "; its output through a buffer of its own (the memory plan puts "
                               "an item's over another item's input)" : "");
    return cudaSuccess;
}

/* The persistent schedule (persistent.h), when cfg->schedule asks for it or leaves it to the
 * batch size: the steps (f16 conversions of the graph inputs, the fused nodes, conversions of
 * the outputs; a conversion is left out where the step next to it reads the float input or
 * writes the float output itself) uploaded with the pools' scratch, and a cluster segment
 * (plan_segment) unless PERSISTENT_GRID. Keeps the per-node kernels (inst->steps NULL)
 * when AUTO and the model or the device cannot, or when AUTO's batch is above
 * KEYER_CUDA_PERSISTENT_MAX_BATCH and no cluster segment was taken; UNSUPPORTED when
 * PERSISTENT or PERSISTENT_GRID was asked for. */
_Static_assert(KEYER_CUDA_SEGMENT_MAX_BATCH >= KEYER_CUDA_PERSISTENT_MAX_BATCH,
               "AUTO's two batch limits");
static keyer_status plan_persistent(kr_backend_instance *inst, const kr_backend_config *cfg,
                                    keyer_error *err)
{
    const kr_graph *g = inst->graph;
    const int auto_ = cfg->schedule == KEYER_CUDA_SCHEDULE_AUTO;
    if (cfg->schedule == KEYER_CUDA_SCHEDULE_KERNELS ||
        (auto_ && (cfg->batch > KEYER_CUDA_SEGMENT_MAX_BATCH ||
                   (double)kr_graph_macs(g) * cfg->batch > KEYER_CUDA_PERSISTENT_MAX_MACS)))
        return KEYER_OK;
    /* AUTO above KEYER_CUDA_PERSISTENT_MAX_BATCH: only with a cluster segment (checked below) */
    const int needs_seg = auto_ && cfg->batch > KEYER_CUDA_PERSISTENT_MAX_BATCH;
    size_t cap = 2 * (size_t)g->n_nodes + (size_t)g->n_inputs + (size_t)g->n_outputs + 1;
    kr_cuda_step *h = calloc(cap, sizeof(*h));
    if (!h)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    int k = 0, n = 0;
    size_t scratch = 0;
    /* the fused nodes after room for the inputs' conversions; a conversion the step next to
     * it can do itself (reading or writing float) is left out */
    const char *why = kr_cuda_persistent_plan(g, inst->ops, inst->folded, inst->batch,
                                              h + g->n_inputs, &n, &scratch);
    if (!why && inst->f16) {
        kr_cuda_step *body = h + g->n_inputs;
        for (int i = 0; i < g->n_inputs; i++) {
            int t = g->inputs[i];
            int at = kr_cuda_persistent_input_step(g, t, dev_ptr(inst, t), body, n);
            if (at >= 0) {
                body[at].x = inst->io[t];
                body[at].x_f32 = 1;
            } else {
                kr_cuda_persistent_convert(&h[k++], 1, inst->io[t], dev_ptr(inst, t),
                                           kr_tensor_bytes(&g->tensors[t], inst->batch) / 4);
            }
        }
        for (int i = 0; i < g->n_outputs; i++) {
            int t = g->outputs[i];
            int at = kr_cuda_persistent_output_step(g, t, dev_ptr(inst, t), body, n);
            if (at >= 0) {
                body[at].y = inst->io[t];
                body[at].y_f32 = 1;
            } else {
                kr_cuda_persistent_convert(&body[n++], 0, dev_ptr(inst, t), inst->io[t],
                                           kr_tensor_bytes(&g->tensors[t], inst->batch) / 4);
            }
        }
    }
    if (!why && k < g->n_inputs) /* close the gap left by folded input conversions */
        memmove(h + k, h + g->n_inputs, (size_t)n * sizeof(*h));
    k += n;
    int sms = 0, coop = 0, ce = 0, occupancy = 0;
    cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, inst->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, inst->device);
    if (e == cudaSuccess) {
        occupancy = kr_cuda_persistent_occupancy(inst->f16, &ce);
        e = (cudaError_t)ce;
    }
    if (e != cudaSuccess) {
        free(h);
        return cuda_fail(err, g, "querying the device for the persistent kernel", e);
    }
    if (!why && !coop)
        why = "the device has no cooperative launch";
    if (!why && occupancy < 1)
        why = "the kernel does not fit on a multiprocessor";
    if (why) {
        free(h);
        if (cfg->schedule == KEYER_CUDA_SCHEDULE_PERSISTENT ||
            cfg->schedule == KEYER_CUDA_SCHEDULE_PERSISTENT_GRID)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: cuda backend: no persistent schedule: %s", g->name, why);
        keyer_log(inst->logger, KEYER_LOG_DEBUG,
                  "%s: cuda backend: kernels per node (no persistent schedule: %s)", g->name, why);
        return KEYER_OK;
    }
    /* two blocks per multiprocessor: enough threads for the 128x128 layers; a barrier over
     * more blocks costs more (1.2 us at 132 blocks, 1.7 us at 528 on the H100) */
    inst->blocks = (unsigned)sms * (unsigned)(occupancy < 2 ? occupancy : 2);
    if (scratch) /* the pools' sums */
        e = cudaMalloc((void **)&inst->scratch, scratch * sizeof(float));
    if (e == cudaSuccess)
        kr_cuda_persistent_bind(h, k, inst->scratch);
    /* the segment first (its finder needs the bound pool sums, not the transposed weights), so
     * that AUTO, falling back, has uploaded nothing more than the sums */
    if (e == cudaSuccess && cfg->schedule != KEYER_CUDA_SCHEDULE_PERSISTENT_GRID)
        e = plan_segment(inst, h, k);
    if (e == cudaSuccess && needs_seg && !inst->has_seg) { /* back to the per-node kernels */
        keyer_log(inst->logger, KEYER_LOG_DEBUG,
                  "%s: cuda backend: kernels per node (batch %d > %d without a cluster segment)",
                  g->name, cfg->batch, KEYER_CUDA_PERSISTENT_MAX_BATCH);
        free(h);
        cudaFree(inst->scratch);
        inst->scratch = NULL;
        inst->blocks = 0;
        return KEYER_OK;
    }
    if (e == cudaSuccess)
        e = upload_transposed(inst, h, k);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&inst->steps, (size_t)k * sizeof(*h));
    if (e == cudaSuccess)
        e = cudaMemcpy(inst->steps, h, (size_t)k * sizeof(*h), cudaMemcpyHostToDevice);
    free(h);
    if (e != cudaSuccess)
        return cuda_fail(err, g, "uploading the persistent schedule", e);
    inst->n_steps = k;
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
        return cuda_fail(err, g, "selecting the device", e);

    keyer_status st = KEYER_OK;
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
    inst->io = calloc(nt, sizeof(float *));
    inst->ops = calloc(nn, sizeof(kr_cuda_op));
    inst->folded = calloc(nn, 1);
    if (!inst->offsets || !inst->const_offsets || !inst->const_half || !inst->io || !inst->ops || !inst->folded) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
        goto fail;
    }
    e = cudaStreamCreateWithFlags(&inst->own, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        st = cuda_fail(err, g, "creating a stream", e);
        goto fail;
    }
    inst->stream = cfg->stream ? (cudaStream_t)cfg->stream : inst->own;

    /* activations: the plan's layout, halved for f16 (every tensor shrinks by the same factor,
     * so non-overlap and 32-byte alignment are kept) */
    for (int t = 0; t < g->n_tensors; t++)
        inst->offsets[t] = plan->offsets[t] == SIZE_MAX ? SIZE_MAX
                                                        : plan->offsets[t] / (4 / inst->esize);
    inst->arena_bytes = plan->arena_bytes / (4 / inst->esize) + 256;
    e = cudaMalloc((void **)&inst->arena, inst->arena_bytes);
    if (e == cudaSuccess)
        e = cudaMemset(inst->arena, 0, inst->arena_bytes);
    if (e != cudaSuccess) {
        st = keyer_error_set(err, e == cudaErrorMemoryAllocation ? KEYER_STATUS_OUT_OF_MEMORY
                                                                 : KEYER_STATUS_DEVICE,
                             "%s: cuda backend: cannot allocate the %.1f MB activation arena for "
                             "batch %d on device %d: %s",
                             g->name, inst->arena_bytes / 1e6, cfg->batch, cfg->device,
                             cudaGetErrorString(e));
        cudaGetLastError(); /* clear a non-sticky allocation error */
        goto fail;
    }
    st = upload_weights(inst, err);
    if (st)
        goto fail;

    size_t max_io = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        if (!is_io(tt))
            continue;
        size_t bytes = kr_tensor_bytes(tt, cfg->batch);
        max_io = bytes > max_io ? bytes : max_io;
        if (inst->f16) {
            e = cudaMalloc((void **)&inst->io[t], bytes);
            if (e == cudaSuccess)
                e = cudaMemset(inst->io[t], 0, bytes);
            if (e != cudaSuccess) {
                st = cuda_fail(err, g, "allocating input/output buffers", e);
                goto fail;
            }
        }
    }
    inst->pinned_bytes = max_io ? max_io : 64;
    e = cudaMallocHost(&inst->pinned, inst->pinned_bytes);
    if (e != cudaSuccess) {
        st = cuda_fail(err, g, "allocating pinned host memory", e);
        goto fail;
    }

    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        kr_cuda_op *op = &inst->ops[n];
        op->graph = g;
        op->node = node;
        op->batch = cfg->batch;
        op->f16 = inst->f16;
        for (int i = 0; i < node->n_inputs; i++)
            op->in[i] = node->inputs[i] >= 0 ? dev_ptr(inst, node->inputs[i]) : NULL;
        op->out = dev_ptr(inst, node->outputs[0]);
        op->post = KR_CUDA_POST_NONE;
    }
    plan_folds(inst);
    plan_residual_folds(inst);
    plan_pool_folds(inst);
    st = plan_persistent(inst, cfg, err);
    if (st)
        goto fail;

    /* set-up's cudaMemcpy (from pageable memory: may return before the data has arrived) and
     * cudaMemset (asynchronous) run on the legacy default stream, which inst->own and the
     * caller's stream (non-blocking) do not wait for */
    e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess) {
        st = cuda_fail(err, g, "finishing the uploads", e);
        goto fail;
    }
    st = enqueue(inst, inst->own, 1, err); /* validation run, node by node */
    if (st)
        goto fail;
    e = cudaStreamBeginCapture(inst->own, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        st = cuda_fail(err, g, "starting the graph capture", e);
        goto fail;
    }
    st = enqueue(inst, inst->own, 0, err);
    e = cudaStreamEndCapture(inst->own, &inst->cgraph);
    if (st)
        goto fail;
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&inst->exec, inst->cgraph, 0);
    if (e == cudaSuccess)
        e = cudaGraphUpload(inst->exec, inst->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(inst->stream);
    if (e != cudaSuccess) {
        st = cuda_fail(err, g, "building the CUDA graph", e);
        goto fail;
    }
    keyer_log(cfg->logger, KEYER_LOG_DEBUG,
              "%s: cuda backend: device %d, %s, batch %d, arena %.1f MB, weights %.1f MB, %d "
              "nodes (%d activations and residual ADDs folded into their producers), one CUDA graph "
              "of %s",
              g->name, cfg->device, inst->f16 ? "f16" : "f32", cfg->batch,
              inst->arena_bytes / 1e6, inst->weight_bytes / 1e6, g->n_nodes, inst->n_folded,
              inst->steps ? "one persistent kernel" : "a kernel per node");
    *out = inst;
    return KEYER_OK;
fail:
    cuda_destroy(&inst);
    return st;
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
    return cuda_fail(err, inst->graph, "replaying the CUDA graph", e);
}

static keyer_status cuda_synchronize(kr_backend_instance *inst, keyer_error *err)
{
    cudaError_t e = cudaStreamSynchronize(inst->stream);
    return e == cudaSuccess ? KEYER_OK : cuda_fail(err, inst->graph, "running the graph", e);
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
    return e == cudaSuccess ? KEYER_OK : cuda_fail(err, inst->graph, "copying an input", e);
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
    return e == cudaSuccess ? KEYER_OK : cuda_fail(err, inst->graph, "copying an output", e);
}

/* The persistent kernel's per-step times: the first block's SM clock from a step's start to
 * the end of its grid barrier (so a step's time includes the wait for the slowest block),
 * converted at the device's nominal clock rate, summed per node; nodes done inside another
 * step (pools in a pool tail, excitations and MULs in their consumer's prologue), and folded
 * nodes, get -1; the f16 conversions are not nodes and are left
 * out. At debug level every step is logged with its parts: the first thread's own work, the
 * rest of its block, the grid barrier. A cluster segment is timed as a whole (events around its
 * kernel, so with its launch) and counted on its first step's node. */
static keyer_status profile_persistent(kr_backend_instance *inst, double *ms, keyer_error *err)
{
    static const char *const kinds[] = {"conv", "depthwise", "tconv", "binary", "unary",
                                        "pool-partial", "pool-final", "resize", "copy",
                                        "to-f16", "to-f32", "expand-dw", "maxpool", "pad",
                                        "concat", "conv-pw"};
    const kr_graph *g = inst->graph;
    size_t n4 = 4 * (size_t)inst->n_steps;
    long long *dev = NULL, *host = malloc(n4 * sizeof(long long));
    kr_cuda_step *steps = malloc((size_t)inst->n_steps * sizeof(*steps));
    int khz = 0;
    cudaError_t e = host && steps ? cudaMalloc((void **)&dev, n4 * sizeof(*dev))
                                  : cudaErrorMemoryAllocation;
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, inst->device);
    cudaEvent_t ev[2] = {NULL, NULL};
    float seg_ms = 0;
    if (e == cudaSuccess)
        e = cudaMemsetAsync(dev, 0, n4 * sizeof(*dev), inst->stream);
    if (e == cudaSuccess && inst->has_seg)
        e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess && inst->has_seg)
        e = cudaEventCreate(&ev[1]);
    if (e == cudaSuccess)
        e = launch_schedule(inst, inst->stream, dev, inst->has_seg ? ev : NULL);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(host, dev, n4 * sizeof(*dev), cudaMemcpyDeviceToHost, inst->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(steps, inst->steps, (size_t)inst->n_steps * sizeof(*steps),
                            cudaMemcpyDeviceToHost, inst->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(inst->stream);
    if (e == cudaSuccess && inst->has_seg)
        e = cudaEventElapsedTime(&seg_ms, ev[0], ev[1]);
    if (e == cudaSuccess) {
        double us = 1e3 / (double)(khz > 0 ? khz : 1); /* microseconds per clock */
        for (int n = 0; n < g->n_nodes; n++)
            ms[n] = -1;
        for (int i = 0; i < inst->n_steps; i++) {
            const long long *c = host + 4 * (size_t)i;
            int n = steps[i].node;
            const kr_cuda_step *s = &steps[i];
            if (inst->has_seg && i >= inst->seg.first && i < seg_end(inst)) {
                if (i > inst->seg.first)
                    continue;
                keyer_log(inst->logger, KEYER_LOG_DEBUG,
                          "%s: persistent steps %d-%d node %3d cluster segment: %.2f us (its "
                          "kernel with its launch, events)",
                          g->name, i, seg_end(inst) - 1, n, (double)seg_ms * 1e3);
                if (n >= 0)
                    ms[n] = seg_ms;
                continue;
            }
            keyer_log(inst->logger, KEYER_LOG_DEBUG,
                      "%s: persistent step %2d node %3d %-12s %s%s%s out %dx%dx%d split %d group "
                      "%d: %.2f us (own work %.2f, block %.2f, grid barrier %.2f)",
                      g->name, i, n,
                      (unsigned)s->kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[s->kind] : "?",
                      s->tail ? "+pool" : "", s->se_layers ? "+se" : "", s->res ? "+res" : "",
                      s->oh, s->ow, s->oc,
                      s->split, s->group, (double)(c[3] - c[0]) * us, (double)(c[1] - c[0]) * us,
                      (double)(c[2] - c[1]) * us, (double)(c[3] - c[2]) * us);
            if (n >= 0)
                ms[n] = (ms[n] < 0 ? 0 : ms[n]) + (double)(c[3] - c[0]) * us * 1e-3;
        }
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    cudaFree(dev);
    free(host);
    free(steps);
    return e == cudaSuccess ? KEYER_OK : cuda_fail(err, g, "profiling the persistent kernel", e);
}

static keyer_status cuda_profile(kr_backend_instance *inst, double *ms, keyer_error *err)
{
    const kr_graph *g = inst->graph;
    if (inst->steps)
        return profile_persistent(inst, ms, err);
    cudaEvent_t a = NULL, b = NULL;
    cudaError_t e = cudaEventCreate(&a);
    if (e == cudaSuccess)
        e = cudaEventCreate(&b);
    for (int n = 0; n < g->n_nodes && e == cudaSuccess; n++) {
        ms[n] = -1;
        if (inst->folded[n])
            continue;
        inst->ops[n].stream = inst->stream;
        e = cudaEventRecord(a, inst->stream);
        if (e == cudaSuccess)
            e = (cudaError_t)cuda_ops[g->nodes[n].op](&inst->ops[n]);
        if (e == cudaSuccess)
            e = cudaEventRecord(b, inst->stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(b);
        float t = 0;
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&t, a, b);
        ms[n] = t;
    }
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    return e == cudaSuccess ? KEYER_OK : cuda_fail(err, g, "profiling", e);
}

static size_t cuda_arena_bytes(const kr_backend_instance *inst) { return inst->arena_bytes; }
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
    .destroy = cuda_destroy,
};
