/* The half-precision emulation shared by bench_nn_precision and bench_nn_half_layers: the
 * reference backend's float kernels run node by node on one float buffer per storage tensor,
 * with the cuda f16 instance's rounding points applied where asked (round to nearest even,
 * overflow to infinity):
 *  - the graph input;
 *  - every stored node output, except outputs that the per-node schedule never stores (read
 *    only by the next node when that is an activation, or a residual ADD after a convolution,
 *    depthwise, transpose, ADD or MUL node: the fused pairs) and the outputs of nodes kept in
 *    float32 (a per-node mask);
 *  - with half constants, the element-wise constants (everything but convolution weights and
 *    biases, which f16 instances keep in float).
 * Header only (static functions); the programs include it once. */
#ifndef KEYER_BENCH_HALF_SIM_H
#define KEYER_BENCH_HALF_SIM_H

#include <stdlib.h>
#include <string.h>

#include "nn/graph.h"
#include "nn/reference/ops.h"
#include "render/fx_math.h"

static inline float kb_round_half(float v) { return kr_half_to_float(kr_float_to_half(v)); }

typedef struct kb_sim {
    const kr_graph *g;
    float **buf;          /* per tensor: its storage's buffer (NULL for constants) */
    float **cst16;        /* per tensor: an element-wise constant rounded to half, or NULL */
    unsigned char *fused; /* per node: 1 when the per-node schedule never stores its output */
} kb_sim;

/* Called after every node of a run with its output 0 (@p n floats). */
typedef void (*kb_sim_hook)(void *ctx, int node, const float *y, size_t n);

static int kb_sim_is_activation(kr_op op)
{
    return op == KR_OP_RELU || op == KR_OP_RELU6 || op == KR_OP_HARD_SWISH ||
           op == KR_OP_LOGISTIC;
}

static int kb_sim_is_conv_weight(const kr_graph *g, int t)
{
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *nd = &g->nodes[n];
        if ((nd->op == KR_OP_CONV_2D || nd->op == KR_OP_DEPTHWISE_CONV_2D ||
             nd->op == KR_OP_TRANSPOSE_CONV_BIAS || nd->op == KR_OP_TRANSPOSE_CONV) &&
            ((nd->n_inputs > 1 && nd->inputs[1] == t) || (nd->n_inputs > 2 && nd->inputs[2] == t)))
            return 1;
    }
    return 0;
}

static void kb_sim_free(kb_sim *s)
{
    if (!s->g)
        return;
    for (int t = 0; t < s->g->n_tensors; t++) {
        if (s->buf && s->buf[t] && kr_tensor_storage(s->g, t) == t)
            free(s->buf[t]);
        if (s->cst16)
            free(s->cst16[t]);
    }
    free(s->buf);
    free(s->cst16);
    free(s->fused);
    memset(s, 0, sizeof(*s));
}

/* Sets up @p s for @p g (float activations only); @p half_constants: keep half copies of the
 * element-wise constants. Returns 0, -1 (out of memory or not a float model; @p s freed). */
static int kb_sim_init(kb_sim *s, const kr_graph *g, int half_constants)
{
    memset(s, 0, sizeof(*s));
    s->g = g;
    s->buf = calloc((size_t)g->n_tensors, sizeof(float *));
    s->cst16 = calloc((size_t)g->n_tensors, sizeof(float *));
    s->fused = calloc((size_t)g->n_nodes + 1, 1);
    if (!s->buf || !s->cst16 || !s->fused)
        goto fail;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        if (kr_tensor_is_const(tt)) {
            if (!half_constants || tt->dtype != KR_DTYPE_F32 || kb_sim_is_conv_weight(g, t))
                continue;
            size_t e = kr_tensor_elements(tt);
            s->cst16[t] = malloc((e + 1) * sizeof(float));
            if (!s->cst16[t])
                goto fail;
            for (size_t i = 0; i < e; i++)
                s->cst16[t][i] = kb_round_half(((const float *)tt->data)[i]);
            continue;
        }
        if (kr_tensor_storage(g, t) != t)
            continue;
        if (tt->dtype != KR_DTYPE_F32)
            goto fail;
        s->buf[t] = calloc(kr_tensor_elements(tt) + 16, sizeof(float));
        if (!s->buf[t])
            goto fail;
    }
    for (int t = 0; t < g->n_tensors; t++)
        if (!s->buf[t] && !kr_tensor_is_const(&g->tensors[t]))
            s->buf[t] = s->buf[kr_tensor_storage(g, t)];
    for (int k = 0; k + 1 < g->n_nodes; k++) {
        const kr_tensor *o = &g->tensors[g->nodes[k].outputs[0]];
        kr_op op = g->nodes[k].op, next = g->nodes[k + 1].op;
        if (o->last_consumer != k + 1 || o->graph_output >= 0)
            continue;
        if (kb_sim_is_activation(next) ||
            (next == KR_OP_ADD &&
             (op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D ||
              op == KR_OP_TRANSPOSE_CONV_BIAS || op == KR_OP_ADD || op == KR_OP_MUL)))
            s->fused[k] = 1;
    }
    return 0;
fail:
    kb_sim_free(s);
    return -1;
}

/* One run on @p x (@p n floats): @p half_input rounds the input, @p half_store the stored
 * outputs and (when kept) the constants of every node not marked in @p f32 (one byte per node,
 * 1 = float32; NULL: none); the input is not rounded when node 0 is in float32. @p hook (may
 * be NULL) sees every node's output 0. Returns graph output 0. */
static const float *kb_sim_run(kb_sim *s, const float *x, size_t n, int half_input,
                               int half_store, const unsigned char *f32, kb_sim_hook hook,
                               void *ctx)
{
    const kr_graph *g = s->g;
    float *in = s->buf[g->inputs[0]];
    int round_in = half_input && !(f32 && f32[0]);
    for (size_t i = 0; i < n; i++)
        in[i] = round_in ? kb_round_half(x[i]) : x[i];
    for (int k = 0; k < g->n_nodes; k++) {
        const kr_node *node = &g->nodes[k];
        int hk = half_store && !(f32 && f32[k]);
        kr_op_ctx c;
        memset(&c, 0, sizeof(c));
        c.graph = g;
        c.node = node;
        c.batch = 1;
        for (int i = 0; i < node->n_inputs; i++) {
            int t = node->inputs[i];
            if (t < 0)
                continue;
            if (kr_tensor_is_const(&g->tensors[t]))
                c.in[i] = hk && s->cst16[t] ? (const void *)s->cst16[t] : g->tensors[t].data;
            else
                c.in[i] = s->buf[t];
        }
        for (int i = 0; i < node->n_outputs; i++)
            c.out[i] = s->buf[node->outputs[i]];
        kr_ref_ops[node->op](&c);
        float *y = s->buf[node->outputs[0]];
        size_t e = kr_tensor_elements(&g->tensors[node->outputs[0]]);
        if (hk && !s->fused[k]) /* a fused output stays in the fused kernel's registers */
            for (size_t i = 0; i < e; i++)
                y[i] = kb_round_half(y[i]);
        if (hook)
            hook(ctx, k, y, e);
    }
    return s->buf[g->outputs[0]];
}

#endif
