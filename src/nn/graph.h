/*
 * The runtime's own graph: tensors (shape, type, NHWC), nodes (operator + parameters) and
 * constants. Built by a model reader (tflite.c) and never modified afterwards; every backend and
 * the planner read it. Internal to keyer (prefix kr_).
 *
 * Conventions
 *  - Activations are NHWC and dims[0] is the batch, which is 1 in the graph; a runtime created
 *    with batch N scales dims[0] of every non-constant tensor by N (kr_tensor_bytes(t, N)).
 *    In a fixed_batch graph dims[0] may be any extent (it runs at batch 1 only).
 *  - Activations are float32, except ARGMAX's outputs (int32), which no operator reads.
 *  - Constants are float32 (FLOAT16 weights behind DEQUANTIZE are converted at load and the
 *    DEQUANTIZE nodes removed) or int32 (shapes, paddings, axes). Their bytes live in the graph.
 *  - RESHAPE nodes are kept in the node list (so every backend sees the graph's shape changes)
 *    but their output is a view: kr_tensor.view_of names the tensor whose storage it shares.
 *  - Every node's output shape has been checked against the operator's shape rule at load, so
 *    backends may trust shapes, strides and paddings stored here.
 */
#ifndef KEYER_NN_GRAPH_H
#define KEYER_NN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/status.h"

#define KR_MAX_DIMS 5
#define KR_MAX_NODE_INPUTS 8
#define KR_MAX_NODE_OUTPUTS 2

/* Operators. Declared once here; each backend says which it supports. Keep kr_op_names in
 * graph.c in step (a static_assert checks the count). */
typedef enum kr_op {
    KR_OP_CONV_2D,
    KR_OP_DEPTHWISE_CONV_2D,
    KR_OP_TRANSPOSE_CONV_BIAS, /* MediaPipe custom Convolution2DTransposeBias */
    KR_OP_ADD,
    KR_OP_MUL,
    KR_OP_RELU,
    KR_OP_RELU6,
    KR_OP_HARD_SWISH,
    KR_OP_LOGISTIC,
    KR_OP_PRELU,
    KR_OP_AVERAGE_POOL_2D,
    KR_OP_MAX_POOL_2D,
    KR_OP_MEAN,
    KR_OP_PAD,
    KR_OP_RESIZE_BILINEAR,
    KR_OP_RESHAPE,
    KR_OP_CONCATENATION,
    /* Added for ONNX models (src/nn/onnx/). Shapes are NHWC for rank-4 activations as above;
     * other ranks are in the model's own order. Parameters in kr_node.p as noted. */
    KR_OP_SUB,            /* a - b, NumPy broadcasting like ADD */
    KR_OP_DIV,            /* a / b, NumPy broadcasting like ADD */
    KR_OP_TANH,
    KR_OP_EXP,
    KR_OP_SQRT,
    KR_OP_ELU,            /* x < 0 ? alpha * (exp(x) - 1) : x           (p.unary.alpha) */
    KR_OP_LEAKY_RELU,     /* x < 0 ? alpha * x : x                      (p.unary.alpha) */
    KR_OP_HARD_SIGMOID,   /* max(0, min(1, alpha * x + beta))           (p.unary.alpha, beta) */
    KR_OP_CLIP,           /* min(max(x, alpha), beta); +-INFINITY for an absent bound */
    KR_OP_POW,            /* powf(x, alpha): constant exponent          (p.unary.alpha) */
    KR_OP_REDUCE_MAX,     /* like MEAN (p.mean: axes_mask, keep_dims), maximum instead */
    KR_OP_RESIZE,         /* ONNX Resize/Upsample over H and W of NHWC  (p.resize_onnx);
                           * reads input 0 only (further inputs: constants, not read) */
    KR_OP_TRANSPOSE,      /* y dims[d] = x dims[perm[d]]                (p.transpose) */
    KR_OP_SLICE,          /* y[i] = x[start + i * step] per dimension   (p.slice) */
    KR_OP_SOFTMAX,        /* over one axis                              (p.axis.axis) */
    KR_OP_ARGMAX,         /* int32 output, index along one axis         (p.argmax) */
    KR_OP_MATMUL,         /* A[..., M, K] x B[..., K, N], leading dims broadcast (equal ranks) */
    KR_OP_GATHER,         /* data, constant int32 indices (non-negative) (p.axis.axis):
                           * y rank = data rank + indices rank - 1 (ONNX Gather) */
    KR_OP_TRANSPOSE_CONV, /* ONNX ConvTranspose: x, filter, optional bias (p.window, below) */
    KR_OP_COUNT
} kr_op;

/* Name of an operator as TFLite spells it ("CONV_2D", ...). */
const char *kr_op_name(kr_op op);

typedef enum kr_dtype { KR_DTYPE_F32 = 0, KR_DTYPE_F16, KR_DTYPE_I32 } kr_dtype;

/* Fused activation, applied as a clamp after the operation. */
typedef enum kr_activation {
    KR_ACT_NONE = 0,
    KR_ACT_RELU,
    KR_ACT_RELU_N1_TO_1,
    KR_ACT_RELU6,
} kr_activation;

/* Clamp bounds of an activation (NONE gives -inf..inf). */
void kr_activation_range(kr_activation act, float *lo, float *hi);

/* SAME and VALID as TFLite resolves them; EXPLICIT (ONNX): pad_top/_bottom/_left/_right are
 * given by the model and the output size is (n + before + after - k_eff) / s + 1, rounded down,
 * or up with kr_window_params.ceil_mode. */
typedef enum kr_padding { KR_PADDING_SAME = 0, KR_PADDING_VALID, KR_PADDING_EXPLICIT } kr_padding;

typedef struct kr_tensor {
    char *name;                /* from the file; owned by the graph */
    kr_dtype dtype;
    int rank;                  /* 0..KR_MAX_DIMS */
    int dims[KR_MAX_DIMS];
    const void *data;          /* constants only (owned by the graph), else NULL */
    int view_of;               /* index of the tensor whose storage this one shares, or -1 */
    int producer;              /* index of the node writing it, -1 for constants and inputs */
    int last_consumer;         /* index of the last node reading it, -1 if none */
    int graph_input;           /* index in kr_graph.inputs or -1 */
    int graph_output;          /* index in kr_graph.outputs or -1 */
} kr_tensor;

/* Spatial window operators: convolution, depthwise, pooling. Paddings are resolved at load. */
typedef struct kr_window_params {
    int kernel_h, kernel_w; /* filter size (pooling: window; convs: from the weight shape) */
    int stride_h, stride_w;
    int dilation_h, dilation_w;
    kr_padding padding;
    int pad_top, pad_bottom, pad_left, pad_right; /* resolved (TF SAME puts the odd one after) */
    int depth_multiplier;                         /* depthwise only */
    /* ONNX additions (zero from TFLite, meaning the TFLite behaviour):
     *  groups: CONV_2D and TRANSPOSE_CONV; 0 or 1 = ungrouped (the validator stores 1).
     *    Filter layouts:
     *    CONV_2D        [C_out, kh, kw, C_in / groups]; group g's outputs
     *                   [g * C_out/groups, (g+1) * C_out/groups) read inputs
     *                   [g * C_in/groups, (g+1) * C_in/groups).
     *    TRANSPOSE_CONV [C_out, kh, kw, C_in / groups], bias [C_out]; grouped the same way;
     *                   y[o] += x[i] * w[k] where o = i * stride - pad_before + k * dilation;
     *                   the output size is the output tensor's (output_padding is implied).
     *  ceil_mode: pools; the output size may be the ceil of (n + pads - k_eff) / s + 1 (ONNX),
     *    less one where that last window would start at or past n + pad_before (as ONNX
     *    Runtime and PyTorch do); taps past n + pad_after are never read or counted.
     *  count_include_pad: AVERAGE_POOL_2D; 1: the divisor counts taps inside
     *    [-pad_before, n + pad_after) (padding included), 0: taps inside the input only.
     *  Pools honour dilation_h/_w (ONNX MaxPool opset 10+); 0 means 1. */
    int groups;
    int ceil_mode;
    int count_include_pad;
} kr_window_params;

/* KR_OP_PAD modes. */
typedef enum kr_pad_mode { KR_PAD_CONSTANT = 0, KR_PAD_REFLECT, KR_PAD_EDGE } kr_pad_mode;

/* KR_OP_RESIZE (ONNX Resize, every opset; Upsample maps onto it). */
typedef enum kr_resize_mode { KR_RESIZE_NEAREST = 0, KR_RESIZE_LINEAR } kr_resize_mode;
typedef enum kr_resize_coord {
    KR_COORD_HALF_PIXEL = 0,       /* (x + 0.5) / scale - 0.5 */
    KR_COORD_PYTORCH_HALF_PIXEL,   /* out > 1 ? (x + 0.5) / scale - 0.5 : 0 */
    KR_COORD_ALIGN_CORNERS,        /* out > 1 ? x * (in - 1) / (out - 1) : 0 */
    KR_COORD_ASYMMETRIC,           /* x / scale */
    KR_COORD_TF_HALF_PIXEL_FOR_NEAREST, /* (x + 0.5) / scale */
    KR_COORD_TF_CROP_AND_RESIZE,   /* from roi, out-of-range samples = extrapolation */
    KR_COORD_HALF_PIXEL_SYMMETRIC, /* opset 19 */
} kr_resize_coord;
typedef enum kr_nearest_mode {
    KR_NEAREST_ROUND_PREFER_FLOOR = 0,
    KR_NEAREST_ROUND_PREFER_CEIL,
    KR_NEAREST_FLOOR,
    KR_NEAREST_CEIL,
} kr_nearest_mode;

typedef struct kr_node {
    kr_op op;
    int source_index; /* operator index in the model file, for messages */
    int n_inputs, n_outputs;
    int inputs[KR_MAX_NODE_INPUTS];   /* tensor indices; -1 for an absent optional input */
    int outputs[KR_MAX_NODE_OUTPUTS];
    kr_activation activation;         /* fused activation: CONV_2D, DEPTHWISE_CONV_2D, ADD,
                                       * MUL, SUB, DIV, the pools, TRANSPOSE_CONV; NONE for
                                       * every other operator */
    union {
        kr_window_params window;      /* CONV_2D, DEPTHWISE_CONV_2D, pools, TRANSPOSE_CONV_BIAS */
        struct {
            int align_corners, half_pixel_centers;
        } resize;                     /* RESIZE_BILINEAR (output size = output tensor's shape) */
        struct {
            int axis;                 /* non-negative, < rank */
        } concat;
        struct {
            int before[KR_MAX_DIMS], after[KR_MAX_DIMS]; /* per dimension of the input */
            kr_pad_mode mode;         /* CONSTANT from TFLite */
            float value;              /* CONSTANT mode's fill (0 from TFLite) */
        } pad;
        struct {
            unsigned axes_mask;       /* bit d set: dimension d is reduced */
            int keep_dims;
        } mean;                       /* MEAN and REDUCE_MAX */
        struct {
            float alpha, beta;        /* see the operator's line in kr_op */
        } unary;
        struct {
            kr_resize_mode mode;
            kr_resize_coord coord;
            kr_nearest_mode nearest;
            float scale_h, scale_w;   /* output/input as the coordinate rule uses it: the
                                       * model's scales, or out/in when it gave sizes */
            float roi[4];             /* TF_CROP_AND_RESIZE: y0, x0, y1, x1 (normalised) */
            float extrapolation;      /* TF_CROP_AND_RESIZE */
        } resize_onnx;                /* output size = output tensor's shape */
        struct {
            int perm[KR_MAX_DIMS];
        } transpose;
        struct {
            int start[KR_MAX_DIMS];   /* first index read, in range */
            int step[KR_MAX_DIMS];    /* non-zero; negative walks backwards */
        } slice;                      /* output size = output tensor's shape */
        struct {
            int axis;                 /* non-negative, < rank */
        } axis;                       /* SOFTMAX, GATHER */
        struct {
            int axis;                 /* non-negative, < rank */
            int keep_dims;
            int select_last_index;    /* ties: 0 first index, 1 last */
        } argmax;
    } p;
} kr_node;

typedef struct kr_graph {
    char *name;          /* file name or caller-given name, for messages */
    char *description;   /* Model.description, may be NULL */
    int n_tensors;
    kr_tensor *tensors;
    int n_nodes;
    kr_node *nodes;      /* in execution order, DEQUANTIZE removed */
    int n_inputs, n_outputs;
    int *inputs, *outputs; /* tensor indices */
    void *const_storage; /* one block holding every constant's bytes (16-byte aligned each) */
    size_t const_bytes;
    /* Non-zero when dims[0] is not an independent batch axis (an ONNX model whose operators
     * move, reduce or mix axis 0): such a graph runs only at runtime batch 1. */
    int fixed_batch;
} kr_graph;

/* Whether the shapes (@p rank_a, @p a) and (@p rank_b, @p b) are the same: rank and extents. */
int kr_dims_equal(int rank_a, const int *a, int rank_b, const int *b);

/* Whether @p a and @p b have the same rank and extents. */
int kr_tensor_same_dims(const kr_tensor *a, const kr_tensor *b);

/* Elements of a tensor at batch 1 (product of dims; 1 for rank 0). */
size_t kr_tensor_elements(const kr_tensor *t);
/* Bytes of a tensor at batch @p batch (constants ignore batch). */
size_t kr_tensor_bytes(const kr_tensor *t, int batch);
/* Bytes of one element of @p dtype. */
size_t kr_dtype_size(kr_dtype dtype);
/* Follows view_of to the tensor that owns the storage. */
int kr_tensor_storage(const kr_graph *g, int tensor);
/* Whether a tensor is a constant (has data). */
static inline int kr_tensor_is_const(const kr_tensor *t) { return t->data != NULL; }

/*
 * TFLite output size and SAME padding for one spatial axis (padding.h rules):
 *   SAME: out = ceil(n / s); total = max(0, (out-1)*s + k_eff - n); before = total/2.
 *   VALID: out = (n - k_eff) / s + 1 (0 or less means invalid).
 */
int kr_window_out_size(kr_padding padding, int n, int k, int s, int d);
void kr_window_same_pads(int n, int k, int s, int d, int *before, int *after);

/*
 * Checks every node's input/output shapes against its operator's rule and fills derived
 * parameters (kernel sizes, resolved paddings). Called by readers after building a graph.
 * Errors: BAD_DATA naming the node (file operator index), operator and the mismatch.
 */
keyer_status kr_graph_validate(kr_graph *g, keyer_error *err);

/* Fills producer/last_consumer/graph_input/graph_output of every tensor. */
void kr_graph_link(kr_graph *g);

/* Frees a graph and everything it owns; sets *g to NULL. NULL accepted. */
void kr_graph_destroy(kr_graph **g);

/* Multiply-accumulates of one inference at batch 1 (convolutions, grouped ones included, the
 * transpose convolutions and MATMUL), for benchmarks. */
uint64_t kr_graph_macs(const kr_graph *g);

/* IEEE binary16 to binary32, subnormals included. */
float kr_half_to_float(uint16_t h);

#endif /* KEYER_NN_GRAPH_H */
