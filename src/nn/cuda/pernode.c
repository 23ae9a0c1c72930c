/*
 * The per-node schedule (pernode.h): the operator table and the node-by-node queueing.
 */
#include "nn/cuda/pernode.h"

#include <stdint.h>

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
    [KR_OP_SUB] = kr_cuda_sub,
    [KR_OP_DIV] = kr_cuda_div,
    [KR_OP_TANH] = kr_cuda_tanh,
    [KR_OP_EXP] = kr_cuda_exp,
    [KR_OP_SQRT] = kr_cuda_sqrt,
    [KR_OP_ELU] = kr_cuda_elu,
    [KR_OP_LEAKY_RELU] = kr_cuda_leaky_relu,
    [KR_OP_HARD_SIGMOID] = kr_cuda_hard_sigmoid,
    [KR_OP_CLIP] = kr_cuda_clip,
    [KR_OP_POW] = kr_cuda_pow,
    [KR_OP_REDUCE_MAX] = kr_cuda_reduce_max,
    [KR_OP_RESIZE] = kr_cuda_resize,
    [KR_OP_TRANSPOSE] = kr_cuda_transpose,
    [KR_OP_SLICE] = kr_cuda_slice,
    [KR_OP_SOFTMAX] = kr_cuda_softmax,
    [KR_OP_ARGMAX] = kr_cuda_argmax,
    [KR_OP_MATMUL] = kr_cuda_matmul,
    [KR_OP_GATHER] = kr_cuda_gather,
    [KR_OP_TRANSPOSE_CONV] = kr_cuda_transpose_conv,
};
_Static_assert(sizeof(cuda_ops) / sizeof(cuda_ops[0]) == KR_OP_COUNT,
               "cuda_ops must have an entry for every kr_op");

int kr_cuda_pernode_supports(const kr_graph *g, const kr_node *node)
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
    /* int32 outputs: ARGMAX's only; GATHER's indices: a constant int32 */
    for (int o = 0; o < node->n_outputs; o++)
        if (node->outputs[o] >= 0 && (g->tensors[node->outputs[o]].dtype == KR_DTYPE_I32) !=
                                         (node->op == KR_OP_ARGMAX))
            return 0;
    if (node->op == KR_OP_GATHER &&
        (node->n_inputs != 2 || node->inputs[1] < 0 ||
         !kr_tensor_is_const(&g->tensors[node->inputs[1]]) ||
         g->tensors[node->inputs[1]].dtype != KR_DTYPE_I32 ||
         g->tensors[node->inputs[0]].dtype != KR_DTYPE_F32))
        return 0;
    if ((node->op == KR_OP_RESIZE || node->op == KR_OP_TRANSPOSE_CONV ||
         (node->op == KR_OP_CONV_2D && node->p.window.groups > 1)) &&
        g->tensors[node->inputs[0]].rank != 4)
        return 0;
    return 1;
}

/* The node that reads graph input @p t as its float staging (kr_cuda_op.x_f32), -1 when none. */
static int float_reader(const kr_graph *g, int t, float *const *io, const kr_cuda_op *ops,
                        const unsigned char *folded)
{
    for (int n = 0; n < g->n_nodes; n++)
        if (!folded[n] && ops[n].x_f32 && ops[n].in[0] == io[t])
            return n;
    return -1;
}

int kr_cuda_pernode_bind_inputs(const kr_cuda_mem *mem, float *const *io, kr_cuda_op *ops,
                                const unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    int bound = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const int t = g->inputs[i];
        if (g->tensors[t].dtype != KR_DTYPE_F32 || !io[t] || g->tensors[t].view_of >= 0)
            continue;
        int reader = -1, readers = 0;
        for (int n = 0; n < g->n_nodes; n++)
            for (int j = 0; j < g->nodes[n].n_inputs; j++)
                if (g->nodes[n].inputs[j] >= 0 &&
                    kr_tensor_storage(g, g->nodes[n].inputs[j]) == t)
                    reader = n, readers++;
        if (readers != 1 || folded[reader] || g->nodes[reader].op != KR_OP_CONV_2D ||
            g->nodes[reader].inputs[0] != t)
            continue;
        kr_cuda_op *op = &ops[reader];
        const void *half_in = op->in[0];
        op->in[0] = io[t];
        /* the kernels that read float themselves (3 input channels: no kernel kr_cuda_conv_2d
         * tries before the stems takes such a layer) */
        if (kr_cuda_conv_2d_stem_fits(op) || kr_cuda_conv_2d_stem_half_fits(op)) {
            op->x_f32 = 1;
            bound++;
        } else {
            op->in[0] = half_in;
        }
    }
    return bound;
}

/* The node that writes graph output tensor @p t as float into its staging (kr_cuda_op.y_f32),
 * -1 when none. */
static int float_writer(const kr_graph *g, int t, float *const *io, const kr_cuda_op *ops,
                        const unsigned char *folded)
{
    for (int n = 0; io && io[t] && n < g->n_nodes; n++)
        if (!folded[n] && ops[n].y_f32 && ops[n].out == io[t])
            return n;
    return -1;
}

int kr_cuda_pernode_output_bound(const kr_cuda_mem *mem, float *const *io, const kr_cuda_op *ops,
                                 const unsigned char *folded, int i)
{
    return float_writer(mem->graph, mem->graph->outputs[i], io, ops, folded) >= 0;
}

int kr_cuda_pernode_bind_outputs(const kr_cuda_mem *mem, float *const *io, kr_cuda_op *ops,
                                 const unsigned char *folded)
{
    const kr_graph *g = mem->graph;
    int bound = 0;
    for (int i = 0; i < g->n_outputs; i++) {
        const int t = g->outputs[i];
        const kr_tensor *tt = &g->tensors[t];
        if (tt->dtype != KR_DTYPE_F32 || !io[t] || tt->view_of >= 0 ||
            float_writer(g, t, io, ops, folded) >= 0)
            continue;
        int viewed = 0, read = 0, writer = -1;
        for (int v = 0; v < g->n_tensors; v++)
            viewed |= g->tensors[v].view_of == t;
        for (int n = 0; n < g->n_nodes; n++) {
            for (int j = 0; j < g->nodes[n].n_inputs; j++)
                read |= g->nodes[n].inputs[j] == t;
            if (!folded[n] && ops[n].out == kr_cuda_mem_ptr(mem, t))
                writer = n; /* the last one (earlier ones: tensors before t on its bytes) */
        }
        int p = tt->producer; /* the kernel doing the producer's work: it, or the one run last
                               * before it (a folded activation's) */
        while (p >= 0 && folded[p])
            p--;
        if (viewed || read || writer < 0 || writer != p || (uintptr_t)io[t] % 16 != 0)
            continue;
        /* the kernels that write float themselves: the gathered fuse layer, the activations */
        const kr_node *wn = &g->nodes[writer];
        const int gathered = wn->op == KR_OP_CONV_2D && kr_cuda_conv_2d_one_gather_fits(&ops[writer]);
        const int activation = kr_cuda_post_of(wn->op) != KR_CUDA_POST_NONE &&
                               ops[writer].post == KR_CUDA_POST_NONE && !ops[writer].residual &&
                               wn->outputs[0] == t;
        if (!gathered && !activation)
            continue;
        ops[writer].out = io[t];
        ops[writer].y_f32 = 1;
        bound++;
    }
    return bound;
}

keyer_status kr_cuda_pernode_inputs_to_half(const kr_cuda_mem *mem, float *const *io,
                                            const kr_cuda_op *ops, const unsigned char *folded,
                                            cudaStream_t stream, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    for (int i = 0; i < g->n_inputs; i++) {
        int t = g->inputs[i];
        if (g->tensors[t].dtype != KR_DTYPE_F32 || float_reader(g, t, io, ops, folded) >= 0)
            continue;
        cudaError_t e = (cudaError_t)kr_cuda_f32_to_f16(
            io[t], kr_cuda_mem_ptr(mem, t), kr_tensor_bytes(&g->tensors[t], mem->batch) / 4,
            stream);
        if (e != cudaSuccess)
            return kr_cuda_fail(err, g, "converting an input to half precision", e);
    }
    return KEYER_OK;
}

keyer_status kr_cuda_pernode_outputs_to_float(const kr_cuda_mem *mem, float *const *io,
                                              const unsigned char *out_half,
                                              cudaStream_t stream, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    for (int i = 0; i < g->n_outputs; i++) {
        int t = g->outputs[i];
        if (g->tensors[t].dtype != KR_DTYPE_F32)
            continue; /* ARGMAX's int32: already in its staging */
        size_t bytes = kr_tensor_bytes(&g->tensors[t], mem->batch);
        cudaError_t e;
        if (!out_half || out_half[i]) {
            e = (cudaError_t)kr_cuda_f16_to_f32(kr_cuda_mem_ptr(mem, t), io[t], bytes / 4,
                                                stream);
            if (e != cudaSuccess)
                return kr_cuda_fail(err, g, "converting an output to single precision", e);
        } else {
            e = cudaMemcpyAsync(io[t], kr_cuda_mem_ptr(mem, t), bytes, cudaMemcpyDeviceToDevice,
                                stream);
            if (e != cudaSuccess)
                return kr_cuda_fail(err, g, "copying an output to its float staging", e);
        }
    }
    return KEYER_OK;
}

keyer_status kr_cuda_pernode_output_to_float(const kr_cuda_mem *mem, float *const *io, int i,
                                             cudaStream_t stream, int check, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    int t = g->outputs[i];
    cudaError_t e = (cudaError_t)kr_cuda_f16_to_f32(
        kr_cuda_mem_ptr(mem, t), io[t], kr_tensor_bytes(&g->tensors[t], mem->batch) / 4, stream);
    if (e == cudaSuccess && check)
        e = cudaStreamSynchronize(stream);
    return e == cudaSuccess
               ? KEYER_OK
               : kr_cuda_fail(err, g, "converting an output to single precision", e);
}

keyer_status kr_cuda_pernode_launch(const kr_graph *g, int n, kr_cuda_op *op,
                                    cudaStream_t stream, int check, keyer_error *err)
{
    op->stream = stream;
    cudaError_t e = (cudaError_t)cuda_ops[g->nodes[n].op](op);
    if (e == cudaSuccess && check)
        e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "%s: cuda backend: node %d (operator %d in the file, %s, %s) "
                               "failed: %s (%s)",
                               g->name, n, g->nodes[n].source_index, kr_op_name(g->nodes[n].op),
                               op->f16 ? "f16" : "f32", cudaGetErrorString(e),
                               cudaGetErrorName(e));
    return KEYER_OK;
}

keyer_status kr_cuda_pernode_enqueue(const kr_cuda_mem *mem, int f16, float *const *io,
                                     kr_cuda_op *ops, const unsigned char *folded,
                                     cudaStream_t stream, int check, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    keyer_status st;
    if (f16 && (st = kr_cuda_pernode_inputs_to_half(mem, io, ops, folded, stream, err)))
        return st;
    for (int n = 0; n < g->n_nodes; n++)
        if (!folded[n] && (st = kr_cuda_pernode_launch(g, n, &ops[n], stream, check, err)))
            return st;
    for (int i = 0; f16 && i < g->n_outputs; i++) /* float outputs not written as float */
        if (g->tensors[g->outputs[i]].dtype == KR_DTYPE_F32 &&
            !kr_cuda_pernode_output_bound(mem, io, ops, folded, i) &&
            (st = kr_cuda_pernode_output_to_float(mem, io, i, stream, check, err)))
            return st;
    return KEYER_OK;
}

keyer_status kr_cuda_pernode_profile(const kr_graph *g, kr_cuda_op *ops,
                                     const unsigned char *folded, cudaStream_t stream, double *ms,
                                     keyer_error *err)
{
    cudaEvent_t a = NULL, b = NULL;
    cudaError_t e = cudaEventCreate(&a);
    if (e == cudaSuccess)
        e = cudaEventCreate(&b);
    for (int n = 0; n < g->n_nodes && e == cudaSuccess; n++) {
        ms[n] = -1;
        if (folded[n])
            continue;
        ops[n].stream = stream;
        e = cudaEventRecord(a, stream);
        if (e == cudaSuccess)
            e = (cudaError_t)cuda_ops[g->nodes[n].op](&ops[n]);
        if (e == cudaSuccess)
            e = cudaEventRecord(b, stream);
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
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, g, "profiling", e);
}
