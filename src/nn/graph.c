#include "nn/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {
    [KR_OP_CONV_2D] = "CONV_2D",
    [KR_OP_DEPTHWISE_CONV_2D] = "DEPTHWISE_CONV_2D",
    [KR_OP_TRANSPOSE_CONV_BIAS] = "Convolution2DTransposeBias",
    [KR_OP_ADD] = "ADD",
    [KR_OP_MUL] = "MUL",
    [KR_OP_RELU] = "RELU",
    [KR_OP_RELU6] = "RELU6",
    [KR_OP_HARD_SWISH] = "HARD_SWISH",
    [KR_OP_LOGISTIC] = "LOGISTIC",
    [KR_OP_PRELU] = "PRELU",
    [KR_OP_AVERAGE_POOL_2D] = "AVERAGE_POOL_2D",
    [KR_OP_MAX_POOL_2D] = "MAX_POOL_2D",
    [KR_OP_MEAN] = "MEAN",
    [KR_OP_PAD] = "PAD",
    [KR_OP_RESIZE_BILINEAR] = "RESIZE_BILINEAR",
    [KR_OP_RESHAPE] = "RESHAPE",
    [KR_OP_CONCATENATION] = "CONCATENATION",
    [KR_OP_SUB] = "SUB",
    [KR_OP_DIV] = "DIV",
    [KR_OP_TANH] = "TANH",
    [KR_OP_EXP] = "EXP",
    [KR_OP_SQRT] = "SQRT",
    [KR_OP_ELU] = "ELU",
    [KR_OP_LEAKY_RELU] = "LEAKY_RELU",
    [KR_OP_HARD_SIGMOID] = "HARD_SIGMOID",
    [KR_OP_CLIP] = "CLIP",
    [KR_OP_POW] = "POW",
    [KR_OP_REDUCE_MAX] = "REDUCE_MAX",
    [KR_OP_RESIZE] = "RESIZE",
    [KR_OP_TRANSPOSE] = "TRANSPOSE",
    [KR_OP_SLICE] = "SLICE",
    [KR_OP_SOFTMAX] = "SOFTMAX",
    [KR_OP_ARGMAX] = "ARG_MAX",
    [KR_OP_MATMUL] = "MATMUL",
    [KR_OP_GATHER] = "GATHER",
    [KR_OP_TRANSPOSE_CONV] = "TRANSPOSE_CONV",
};
_Static_assert(sizeof(op_names) / sizeof(op_names[0]) == KR_OP_COUNT,
               "op_names must name every kr_op");

const char *kr_op_name(kr_op op)
{
    if ((unsigned)op >= KR_OP_COUNT)
        return "unknown operator";
    return op_names[op];
}

void kr_activation_range(kr_activation act, float *lo, float *hi)
{
    switch (act) {
    case KR_ACT_RELU: *lo = 0.0f; *hi = INFINITY; return;
    case KR_ACT_RELU6: *lo = 0.0f; *hi = 6.0f; return;
    case KR_ACT_RELU_N1_TO_1: *lo = -1.0f; *hi = 1.0f; return;
    case KR_ACT_NONE: break;
    }
    *lo = -INFINITY;
    *hi = INFINITY;
}

size_t kr_dtype_size(kr_dtype dtype)
{
    return dtype == KR_DTYPE_F16 ? 2 : 4;
}

size_t kr_tensor_elements(const kr_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (size_t)t->dims[i];
    return n;
}

size_t kr_tensor_bytes(const kr_tensor *t, int batch)
{
    size_t n = kr_tensor_elements(t) * kr_dtype_size(t->dtype);
    return t->data ? n : n * (size_t)(batch < 1 ? 1 : batch);
}

int kr_tensor_storage(const kr_graph *g, int tensor)
{
    /* view_of chains are acyclic (checked at load); bound the walk anyway. */
    for (int hops = 0; hops < g->n_tensors && g->tensors[tensor].view_of >= 0; hops++)
        tensor = g->tensors[tensor].view_of;
    return tensor;
}

int kr_window_out_size(kr_padding padding, int n, int k, int s, int d)
{
    if (s <= 0 || d <= 0 || k <= 0 || n <= 0)
        return 0;
    int k_eff = (k - 1) * d + 1;
    if (padding == KR_PADDING_SAME)
        return (n + s - 1) / s;
    if (n < k_eff)
        return 0;
    return (n - k_eff) / s + 1;
}

void kr_window_same_pads(int n, int k, int s, int d, int *before, int *after)
{
    int out = (n + s - 1) / s;
    int k_eff = (k - 1) * d + 1;
    int total = (out - 1) * s + k_eff - n;
    if (total < 0)
        total = 0;
    *before = total / 2;
    *after = total - total / 2;
}

void kr_graph_link(kr_graph *g)
{
    for (int t = 0; t < g->n_tensors; t++) {
        g->tensors[t].producer = -1;
        g->tensors[t].last_consumer = -1;
        g->tensors[t].graph_input = -1;
        g->tensors[t].graph_output = -1;
    }
    for (int i = 0; i < g->n_inputs; i++)
        g->tensors[g->inputs[i]].graph_input = i;
    for (int i = 0; i < g->n_outputs; i++)
        g->tensors[g->outputs[i]].graph_output = i;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        for (int i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0)
                g->tensors[node->inputs[i]].last_consumer = n;
        for (int i = 0; i < node->n_outputs; i++)
            g->tensors[node->outputs[i]].producer = n;
    }
}

uint64_t kr_graph_macs(const kr_graph *g)
{
    uint64_t macs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        const kr_tensor *out = &g->tensors[node->outputs[0]];
        const kr_tensor *in = &g->tensors[node->inputs[0]];
        uint64_t o = kr_tensor_elements(out);
        const kr_window_params *w = &node->p.window;
        switch (node->op) {
        case KR_OP_CONV_2D: /* per output: the taps of one group's input channels */
            macs += o * (uint64_t)w->kernel_h * (uint64_t)w->kernel_w *
                    (uint64_t)g->tensors[node->inputs[1]].dims[3];
            break;
        case KR_OP_TRANSPOSE_CONV: /* per input: every tap of one group's output channels */
            macs += kr_tensor_elements(in) * (uint64_t)w->kernel_h * (uint64_t)w->kernel_w *
                    (uint64_t)(out->dims[3] / (w->groups > 1 ? w->groups : 1));
            break;
        case KR_OP_MATMUL: /* per output: K products */
            macs += o * (uint64_t)in->dims[in->rank - 1];
            break;
        case KR_OP_DEPTHWISE_CONV_2D:
            macs += o * (uint64_t)w->kernel_h * (uint64_t)w->kernel_w;
            break;
        case KR_OP_TRANSPOSE_CONV_BIAS:
            macs += kr_tensor_elements(in) * (uint64_t)w->kernel_h * (uint64_t)w->kernel_w *
                    (uint64_t)out->dims[3];
            break;
        default:
            break;
        }
    }
    return macs;
}

void kr_graph_destroy(kr_graph **pg)
{
    if (!pg || !*pg)
        return;
    kr_graph *g = *pg;
    for (int t = 0; t < g->n_tensors; t++)
        free(g->tensors[t].name);
    free(g->tensors);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->const_storage);
    free(g->name);
    free(g->description);
    free(g);
    *pg = NULL;
}

float kr_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

int kr_dims_equal(int rank_a, const int *a, int rank_b, const int *b)
{
    if (rank_a != rank_b)
        return 0;
    for (int d = 0; d < rank_a; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

int kr_tensor_same_dims(const kr_tensor *a, const kr_tensor *b)
{
    return kr_dims_equal(a->rank, a->dims, b->rank, b->dims);
}
