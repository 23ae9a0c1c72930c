/*
 * Dispatch of the ONNX operators the importer maps onto keyer's graph (a node with at least
 * one computed input; constant-only nodes are folded by import_fold.c):
 *   import_ops_window.c  Conv, ConvTranspose, BatchNormalization, MaxPool, AveragePool,
 *                        GlobalAveragePool, GlobalMaxPool
 *   import_ops_resize.c  Resize, Upsample
 *   import_ops_elem.c    Relu, Sigmoid, Tanh, Exp, Sqrt, Elu, LeakyRelu, HardSigmoid, HardSwish,
 *                        Clip, Pow, PRelu, Add, Sub, Mul, Div, Identity, Dropout, Cast
 *   import_ops_tensor.c  Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Slice, Split,
 *                        Softmax, ArgMax, ReduceMean, ReduceMax, Gather, Pad, MatMul, Gemm
 * Anything else is UNSUPPORTED, naming the node, the operator and the opset.
 */
#include "nn/onnx/import_internal.h"

keyer_status kr_imp_map(kr_imp_ctx *c)
{
    const char *op = c->node->op_type;
    int done = 0;
    KR_IMP_TRY(kr_imp_map_window(c, op, &done));
    if (!done)
        KR_IMP_TRY(kr_imp_map_resize(c, op, &done));
    if (!done)
        KR_IMP_TRY(kr_imp_map_elementwise(c, op, &done));
    if (!done)
        KR_IMP_TRY(kr_imp_map_tensor(c, op, &done));
    if (!done)
        return keyer_error_set(c->err, KEYER_STATUS_UNSUPPORTED,
                               "%s: node '%s' (op %s, opset %d) is not supported",
                               kr_onnx_file_name(c->f), c->node->name ? c->node->name : "", op,
                               c->opset);
    return KEYER_OK;
}
