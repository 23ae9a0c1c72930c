/*
 * Importing an ONNX model (read and checked by onnx_file.h) into keyer's graph (nn/graph.h).
 * Internal to keyer (prefix kr_).
 *
 *   kr_onnx_file *f = NULL;
 *   kr_graph *g = NULL;
 *   kr_onnx_import_params p = kr_onnx_import_params_defaults();
 *   p.height = 320; p.width = 320;          // only needed when the model leaves them dynamic
 *   if (kr_onnx_file_open("u2netp.onnx", &f, &err) || kr_onnx_import(f, &p, &g, &err)) ...
 *   kr_onnx_file_destroy(&f);               // the graph owns copies of everything it needs
 *
 * What the import does
 *  - Sizes: every graph input's shape is fixed first. A dynamic batch (dimension 0, a
 *    dim_param or absent value) becomes 1: keyer's graph is per sample and a runtime scales
 *    dimension 0. Dynamic height and width (dimensions 2 and 3 of a rank-4 input) come from
 *    the parameters; any other dynamic dimension, or height/width the parameters leave at 0,
 *    is an error naming the input and the dimension. A static batch other than 1 stays in the
 *    graph, which is then marked fixed_batch (it runs at runtime batch 1 with the model's own
 *    batch inside), as is a graph whose operators move, reduce or slice axis 0.
 *  - Static shapes and constant folding: shapes are inferred node by node. A node whose inputs
 *    are all constants (initializers, Constant nodes, folded results), and Shape/Size of any
 *    tensor, is evaluated at load in int64 or float (import_fold.c): the shape subgraphs
 *    PyTorch exports (Shape, Gather, Unsqueeze, Concat, Cast, Slice, ConstantOfShape, Range,
 *    arithmetic on shapes, Reshape/Expand/Where/Equal...) become constants, so the graph is
 *    static. DequantizeLinear of constant weights (and QuantizeLinear of constants) fold the
 *    same way, to float. float16 initializers are converted to float32.
 *  - Layout: ONNX is NCHW; keyer's rank-4 activations are NHWC. Each imported tensor carries a
 *    tag "permuted" (its graph tensor holds the NHWC permutation of the ONNX tensor). Spatial
 *    operators (Conv, pools, Resize, ...) take permuted tensors; Reshape, Flatten, Squeeze,
 *    Unsqueeze and MatMul take ONNX order, and a TRANSPOSE (or a RESHAPE view when the two
 *    orders coincide in memory) is inserted where a tensor's tag does not suit its consumer.
 *    Axes (Concat, Softmax, Slice, Split, Gather, ArgMax, Reduce*, Pad) are remapped; Transpose
 *    nodes are composed with the layout permutation; constants of element-wise operators are
 *    re-laid to broadcast against the permuted operand. Graph inputs of rank 4 are permuted;
 *    graph outputs keep whatever tag they have: the layouts kr_onnx_import returns tell which.
 *  - Operators: mapped onto kr ops (import_ops_*.c; the list is in import_ops.c). Conv
 *    weights are re-laid once (OIHW -> OHWI, depthwise -> [1,KH,KW,C*M], ConvTranspose
 *    [I,O/g,KH,KW] -> [O,KH,KW,I/g]); BatchNormalization after a Conv that is its only consumer
 *    is folded into the weights; Relu stays a RELU node (not fused: the planner fuses).
 *  - The result is checked with kr_graph_validate (which also links it).
 *
 * Errors (message naming the file, and the node, operator and opset where one is at fault):
 * UNSUPPORTED (an operator, attribute value or layout keyer does not map: "node 'Conv_12'
 * (op NonMaxSuppression, opset 11) is not supported"), BAD_DATA (inconsistent shapes,
 * out-of-range attributes, a dynamic size left unknown), INVALID_ARGUMENT (NULL arguments,
 * negative sizes), OUT_OF_MEMORY.
 */
#ifndef KEYER_NN_ONNX_IMPORT_H
#define KEYER_NN_ONNX_IMPORT_H

#include "keyer/status.h"
#include "nn/graph.h"
#include "nn/onnx/onnx_file.h"

/* Sizes for the dynamic dimensions of the model's rank-4 image inputs (0: take them from the
 * model; an error if the model leaves them dynamic). */
typedef struct kr_onnx_import_params {
    int height; /* dimension 2 of an NCHW input */
    int width;  /* dimension 3 of an NCHW input */
} kr_onnx_import_params;

/* Both sizes 0. */
kr_onnx_import_params kr_onnx_import_params_defaults(void);

/* How a graph input or output relates to the file's declared tensor. */
typedef struct kr_onnx_layout {
    int rank;              /* the file's rank (== the graph tensor's) */
    int dims[KR_MAX_DIMS]; /* the file's order (NCHW for images), sizes as imported */
    int perm[KR_MAX_DIMS]; /* graph dims[d] = file dims[perm[d]]: {0,2,3,1} for a permuted
                            * rank-4 tensor, the identity otherwise */
} kr_onnx_layout;

/*
 * Builds the validated, linked graph of @p f (see above). @p p may be NULL (defaults). On
 * success *out is a new graph owned by the caller (kr_graph_destroy); it holds copies of every
 * name and constant, so @p f may be destroyed first. When @p layouts is not NULL, *layouts
 * receives a malloc'd array (the caller frees it) of g->n_inputs + g->n_outputs entries, the
 * inputs' layouts first, then the outputs'. On failure *out (and *layouts) are NULL.
 */
keyer_status kr_onnx_import(const kr_onnx_file *f, const kr_onnx_import_params *p, kr_graph **out,
                            kr_onnx_layout **layouts, keyer_error *err);

#endif /* KEYER_NN_ONNX_IMPORT_H */
