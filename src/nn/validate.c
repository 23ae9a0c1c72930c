/*
 * kr_graph_validate(): checks a graph built by a model reader before any backend sees it.
 *
 *  - Tensors: rank 0..KR_MAX_DIMS, positive dimensions, at most MAX_ELEMENTS elements;
 *    constants are FLOAT32 or INT32 with data; activations are FLOAT32 (INT32 only as written
 *    by ARG_MAX), rank >= 1, and have dims[0] == 1 (the batch axis a runtime scales) unless the
 *    graph is fixed_batch. view_of is -1 or another tensor's index.
 *  - Graph inputs are distinct FLOAT32 activations; outputs are distinct, non-constant, written.
 *  - Order: nodes run in array order; every input is a constant, a graph input or the output of
 *    an earlier node (so the graph is acyclic); every output is written once, by one node, and
 *    is neither a constant nor a graph input.
 *  - Per operator (validate_window.c, validate_math.c, validate_shape_ops.c): input count,
 *    kinds (activation / constant), types and ranks; weight layouts; parameters; the output
 *    shape from the operator's rule compared with the declared output shape. Operations along
 *    the batch axis (pad, reduce, concatenate, transpose, slice, gather, softmax, arg-max on
 *    axis 0; a rank-2 MATMUL with a computed B) are rejected unless the graph is fixed_batch,
 *    since a runtime scales that axis.
 *  - Derived parameters are filled in: window kernel sizes and resolved paddings, the depth
 *    multiplier, the concatenation axis (non-negative), MEAN's axes mask, PAD's amounts, and
 *    view_of for RESHAPE outputs; view chains are checked for cycles.
 * Then kr_graph_link() fills producers and consumers.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/validate_internal.h"

/* Per-tensor marks while validating. */
enum { MARK_READABLE = 1, MARK_OUTPUT = 2 };

static keyer_status check_node(const vctx *v, kr_node *n)
{
    switch (n->op) {
    case KR_OP_CONV_2D: return kr_val_check_conv(v, n);
    case KR_OP_DEPTHWISE_CONV_2D: return kr_val_check_depthwise(v, n);
    case KR_OP_TRANSPOSE_CONV_BIAS: return kr_val_check_transpose_conv_bias(v, n);
    case KR_OP_TRANSPOSE_CONV: return kr_val_check_transpose_conv(v, n);
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D: return kr_val_check_pool(v, n);
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_SUB:
    case KR_OP_DIV: return kr_val_check_binary(v, n);
    case KR_OP_RELU:
    case KR_OP_RELU6:
    case KR_OP_HARD_SWISH:
    case KR_OP_LOGISTIC:
    case KR_OP_TANH:
    case KR_OP_EXP:
    case KR_OP_SQRT:
    case KR_OP_ELU:
    case KR_OP_LEAKY_RELU:
    case KR_OP_HARD_SIGMOID:
    case KR_OP_CLIP:
    case KR_OP_POW: return kr_val_check_unary(v, n);
    case KR_OP_PRELU: return kr_val_check_prelu(v, n);
    case KR_OP_MEAN:
    case KR_OP_REDUCE_MAX: return kr_val_check_reduce(v, n);
    case KR_OP_SOFTMAX: return kr_val_check_softmax(v, n);
    case KR_OP_ARGMAX: return kr_val_check_argmax(v, n);
    case KR_OP_MATMUL: return kr_val_check_matmul(v, n);
    case KR_OP_PAD: return kr_val_check_pad(v, n);
    case KR_OP_RESIZE_BILINEAR: return kr_val_check_resize_bilinear(v, n);
    case KR_OP_RESIZE: return kr_val_check_resize(v, n);
    case KR_OP_RESHAPE: return kr_val_check_reshape(v, n);
    case KR_OP_CONCATENATION: return kr_val_check_concat(v, n);
    case KR_OP_TRANSPOSE: return kr_val_check_transpose(v, n);
    case KR_OP_SLICE: return kr_val_check_slice(v, n);
    case KR_OP_GATHER: return kr_val_check_gather(v, n);
    case KR_OP_COUNT: break;
    }
    return node_fail(v, n, BAD, "unknown operator %d", (int)n->op);
}

static int has_fused_activation(kr_op op)
{
    switch (op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
    case KR_OP_SUB:
    case KR_OP_DIV:
    case KR_OP_TRANSPOSE_CONV: return 1;
    default: return 0;
    }
}

static keyer_status check_tensors(const vctx *v)
{
    const kr_graph *g = v->g;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        const char *name = x->name ? x->name : "";
        if (x->rank < 0 || x->rank > KR_MAX_DIMS)
            return graph_fail(v, BAD, "tensor %d '%s' has rank %d", t, name, x->rank);
        size_t elements = 1;
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d] <= 0)
                return graph_fail(v, BAD, "tensor %d '%s': dimension %d is %d", t, name, d,
                                  x->dims[d]);
            if ((size_t)x->dims[d] > MAX_ELEMENTS / elements)
                return graph_fail(v, BAD, "tensor %d '%s' has more than %zu elements", t, name,
                                  MAX_ELEMENTS);
            elements *= (size_t)x->dims[d];
        }
        if (x->view_of < -1 || x->view_of >= g->n_tensors || x->view_of == t)
            return graph_fail(v, BAD, "tensor %d '%s' is a view of tensor %d", t, name,
                              x->view_of);
        if (kr_tensor_is_const(x)) {
            if (x->dtype != KR_DTYPE_F32 && x->dtype != KR_DTYPE_I32)
                return graph_fail(v, UNSUP, "constant tensor %d '%s' is %s", t, name,
                                  dtype_name(x->dtype));
            if (x->view_of >= 0)
                return graph_fail(v, BAD, "constant tensor %d '%s' is a view", t, name);
        } else {
            /* INT32 activations: ARG_MAX's outputs (checked per node). */
            if (x->dtype != KR_DTYPE_F32 && x->dtype != KR_DTYPE_I32)
                return graph_fail(v, UNSUP, "tensor %d '%s' is a %s activation; keyer computes "
                                  "in FLOAT32", t, name, dtype_name(x->dtype));
            if (x->rank < 1 || (x->dims[0] != 1 && !g->fixed_batch)) {
                char a[96];
                return graph_fail(v, BAD, "activation tensor %d '%s' %s does not have batch 1 "
                                  "in dimension 0", t, name, shape_str(x, a, sizeof(a)));
            }
        }
    }
    return KEYER_OK;
}

static keyer_status check_io(const vctx *v, unsigned char *mark)
{
    const kr_graph *g = v->g;
    if (g->n_inputs < 1 || g->n_outputs < 1 || !g->inputs || !g->outputs)
        return graph_fail(v, BAD, "the graph has %d inputs and %d outputs; it needs at least one "
                          "of each", g->n_inputs, g->n_outputs);
    for (int i = 0; i < g->n_inputs; i++) {
        int t = g->inputs[i];
        if (t < 0 || t >= g->n_tensors)
            return graph_fail(v, BAD, "graph input %d is tensor %d, out of range", i, t);
        if (kr_tensor_is_const(&g->tensors[t]))
            return graph_fail(v, BAD, "graph input %d, tensor '%s', is a constant", i,
                              g->tensors[t].name);
        if (g->tensors[t].dtype != KR_DTYPE_F32)
            return graph_fail(v, UNSUP, "graph input %d, tensor '%s', is %s; keyer takes "
                              "FLOAT32 inputs", i, g->tensors[t].name,
                              dtype_name(g->tensors[t].dtype));
        if (mark[t] & MARK_READABLE)
            return graph_fail(v, BAD, "tensor '%s' is listed twice among the graph inputs",
                              g->tensors[t].name);
        mark[t] |= MARK_READABLE;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int t = g->outputs[i];
        if (t < 0 || t >= g->n_tensors)
            return graph_fail(v, BAD, "graph output %d is tensor %d, out of range", i, t);
        if (kr_tensor_is_const(&g->tensors[t]))
            return graph_fail(v, UNSUP, "graph output %d, tensor '%s', is a constant", i,
                              g->tensors[t].name);
        if (mark[t] & MARK_OUTPUT)
            return graph_fail(v, BAD, "tensor '%s' is listed twice among the graph outputs",
                              g->tensors[t].name);
        mark[t] |= MARK_OUTPUT;
    }
    return KEYER_OK;
}

/* Walks every view chain; state: 0 unvisited, 2 on the current walk, 3 done. */
static keyer_status check_views(const vctx *v, unsigned char *state)
{
    const kr_graph *g = v->g;
    for (int t = 0; t < g->n_tensors; t++) {
        int cur = t;
        while (cur >= 0 && state[cur] != 3) {
            if (state[cur] == 2)
                return graph_fail(v, BAD, "the views of tensor %d '%s' form a cycle", t,
                                  g->tensors[t].name);
            state[cur] = 2;
            cur = g->tensors[cur].view_of;
        }
        for (cur = t; cur >= 0 && state[cur] == 2; cur = g->tensors[cur].view_of)
            state[cur] = 3;
    }
    return KEYER_OK;
}

static keyer_status validate(const vctx *v, unsigned char *mark)
{
    kr_graph *g = v->g;
    TRY(check_tensors(v));
    /* MARK_READABLE: a constant, a graph input or already written. */
    TRY(check_io(v, mark));
    for (int t = 0; t < g->n_tensors; t++)
        if (kr_tensor_is_const(&g->tensors[t]))
            mark[t] |= MARK_READABLE;
    for (int i = 0; i < g->n_nodes; i++) {
        kr_node *n = &g->nodes[i];
        if ((unsigned)n->op >= KR_OP_COUNT)
            return graph_fail(v, BAD, "node %d (operator %d) has unknown operator %d", i,
                              n->source_index, (int)n->op);
        if (n->n_inputs < 0 || n->n_inputs > KR_MAX_NODE_INPUTS || n->n_outputs != 1)
            return node_fail(v, n, BAD, "has %d inputs and %d outputs", n->n_inputs,
                             n->n_outputs);
        for (int k = 0; k < n->n_inputs; k++) {
            int t = n->inputs[k];
            if (t < -1 || t >= g->n_tensors)
                return node_fail(v, n, BAD, "input %d is tensor %d, out of range (%d tensors)", k,
                                 t, g->n_tensors);
            if (t >= 0 && !(mark[t] & MARK_READABLE))
                return node_fail(v, n, BAD, "input %d, tensor '%s', is read before any operator "
                                 "writes it", k, g->tensors[t].name);
        }
        int o = n->outputs[0];
        if (o < 0 || o >= g->n_tensors)
            return node_fail(v, n, BAD, "output is tensor %d, out of range (%d tensors)", o,
                             g->n_tensors);
        const kr_tensor *ot = &g->tensors[o];
        if (kr_tensor_is_const(ot))
            return node_fail(v, n, BAD, "writes constant tensor '%s'", ot->name);
        if (mark[o] & MARK_READABLE) {
            int is_input = 0;
            for (int k = 0; k < g->n_inputs; k++)
                is_input |= g->inputs[k] == o;
            return node_fail(v, n, BAD, "writes tensor '%s', which %s", ot->name,
                             is_input ? "is a graph input" : "an earlier operator already wrote");
        }
        if ((unsigned)n->activation > KR_ACT_RELU6 ||
            (n->activation != KR_ACT_NONE && !has_fused_activation(n->op)))
            return node_fail(v, n, BAD, "has fused activation %d, which it cannot take",
                             (int)n->activation);
        if ((ot->dtype == KR_DTYPE_I32) != (n->op == KR_OP_ARGMAX))
            return node_fail(v, n, BAD, "writes tensor '%s' of type %s", ot->name,
                             dtype_name(ot->dtype));
        TRY(check_node(v, n));
        mark[o] |= MARK_READABLE;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (!(mark[g->outputs[i]] & MARK_READABLE))
            return graph_fail(v, BAD, "graph output %d, tensor '%s', is never written", i,
                              g->tensors[g->outputs[i]].name);
    memset(mark, 0, (size_t)g->n_tensors);
    return check_views(v, mark);
}

keyer_status kr_graph_validate(kr_graph *g, keyer_error *err)
{
    if (!g)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "kr_graph_validate: no graph");
    if (!g->name)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_graph_validate: the graph has no name");
    vctx v = {g, err};
    if (g->n_tensors < 0 || g->n_nodes < 0 || (g->n_tensors && !g->tensors) ||
        (g->n_nodes && !g->nodes))
        return graph_fail(&v, BAD, "the graph has %d tensors and %d nodes", g->n_tensors,
                          g->n_nodes);
    unsigned char *mark = calloc((size_t)g->n_tensors + 1, 1);
    if (!mark)
        return graph_fail(&v, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate %d tensor marks",
                          g->n_tensors);
    keyer_status st = validate(&v, mark);
    free(mark);
    if (st == KEYER_OK)
        kr_graph_link(g);
    return st;
}
