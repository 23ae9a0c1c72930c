/*
 * The reference backend's operator kernels: plain, obviously-correct float32 C, one file per
 * operator (src/nn/reference/<op>.c), following the TFLite reference kernels' semantics as
 * written down in docs/models.md, and ONNX's operator specifications (with ONNX Runtime's
 * choices where they leave room) for the operators and parameters added for ONNX models. They are the oracle every other
 * backend is tested against, and other CPU code may call them for nodes it does not handle.
 */
#ifndef KEYER_NN_REFERENCE_OPS_H
#define KEYER_NN_REFERENCE_OPS_H

#include "nn/graph.h"

/* Everything one node needs at run time. Shapes come from graph->tensors (batch 1 in dims[0]);
 * the actual batch is @batch. in[i] is NULL for an absent optional input. */
typedef struct kr_op_ctx {
    const kr_graph *graph;
    const kr_node *node;
    int batch;
    const void *in[KR_MAX_NODE_INPUTS];
    void *out[KR_MAX_NODE_OUTPUTS];
} kr_op_ctx;

typedef void (*kr_ref_op_fn)(const kr_op_ctx *ctx);

void kr_ref_conv_2d(const kr_op_ctx *ctx);
void kr_ref_depthwise_conv_2d(const kr_op_ctx *ctx);
void kr_ref_transpose_conv_bias(const kr_op_ctx *ctx);
void kr_ref_add(const kr_op_ctx *ctx);
void kr_ref_mul(const kr_op_ctx *ctx);
void kr_ref_relu(const kr_op_ctx *ctx);
void kr_ref_relu6(const kr_op_ctx *ctx);
void kr_ref_hard_swish(const kr_op_ctx *ctx);
void kr_ref_logistic(const kr_op_ctx *ctx);
void kr_ref_prelu(const kr_op_ctx *ctx);
void kr_ref_average_pool_2d(const kr_op_ctx *ctx);
void kr_ref_max_pool_2d(const kr_op_ctx *ctx);
void kr_ref_mean(const kr_op_ctx *ctx);
void kr_ref_pad(const kr_op_ctx *ctx);
void kr_ref_resize_bilinear(const kr_op_ctx *ctx);
void kr_ref_reshape(const kr_op_ctx *ctx);
void kr_ref_concatenation(const kr_op_ctx *ctx);
void kr_ref_sub(const kr_op_ctx *ctx);
void kr_ref_div(const kr_op_ctx *ctx);
void kr_ref_tanh(const kr_op_ctx *ctx);
void kr_ref_exp(const kr_op_ctx *ctx);
void kr_ref_sqrt(const kr_op_ctx *ctx);
void kr_ref_elu(const kr_op_ctx *ctx);
void kr_ref_leaky_relu(const kr_op_ctx *ctx);
void kr_ref_hard_sigmoid(const kr_op_ctx *ctx);
void kr_ref_clip(const kr_op_ctx *ctx);
void kr_ref_pow(const kr_op_ctx *ctx);
void kr_ref_reduce_max(const kr_op_ctx *ctx);
void kr_ref_resize(const kr_op_ctx *ctx);
void kr_ref_transpose(const kr_op_ctx *ctx);
void kr_ref_slice(const kr_op_ctx *ctx);
void kr_ref_softmax(const kr_op_ctx *ctx);
void kr_ref_argmax(const kr_op_ctx *ctx);
void kr_ref_matmul(const kr_op_ctx *ctx);
void kr_ref_gather(const kr_op_ctx *ctx);
void kr_ref_transpose_conv(const kr_op_ctx *ctx);

/* Indexed by kr_op; every entry is non-NULL. */
extern const kr_ref_op_fn kr_ref_ops[KR_OP_COUNT];

#endif
