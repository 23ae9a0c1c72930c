/*
 * Private to the graph validator (validate*.c): the context, the message helpers and the shape
 * helpers that the per-operator rule files share, and the rules themselves. kr_graph_validate()
 * (validate.c) checks the tensors and the node order and calls one kr_val_check_* per node:
 *   validate_window.c     CONV_2D, DEPTHWISE_CONV_2D, both transpose convolutions, pools
 *   validate_math.c       element-wise, MEAN / REDUCE_MAX, SOFTMAX, ARGMAX, MATMUL
 *   validate_shape_ops.c  PAD, RESIZE_BILINEAR, RESIZE, RESHAPE, CONCATENATION, TRANSPOSE,
 *                         SLICE, GATHER
 * The helpers live in validate_util.c, which calls none of the rule files.
 */
#ifndef KEYER_NN_VALIDATE_INTERNAL_H
#define KEYER_NN_VALIDATE_INTERNAL_H

#include <stddef.h>

#include "nn/graph.h"

#define KR_VAL_MAX_ELEMENTS ((size_t)1 << 28) /* per tensor; the TFLite reader's limit too */
#define KR_VAL_MAX_STRIDE (1 << 16)           /* strides and dilations */
#define KR_VAL_MAX_EXTENT (1 << 29)           /* dilated kernel extent, padded sizes */

typedef struct kr_vctx {
    kr_graph *g;
    keyer_error *err;
} kr_vctx;

#define KR_VAL_BAD KEYER_STATUS_BAD_DATA
#define KR_VAL_UNSUP KEYER_STATUS_UNSUPPORTED
#define KR_VAL_TRY(expr)                                                                          \
    do {                                                                                          \
        keyer_status try_status_ = (expr);                                                        \
        if (try_status_ != KEYER_OK)                                                              \
            return try_status_;                                                                   \
    } while (0)

/* Sets the error "<graph>: operator <source index> (<op>): <message>" and returns @p status. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
keyer_status kr_val_node_fail(const kr_vctx *v, const kr_node *n, keyer_status status,
                              const char *fmt, ...);

/* Sets the error "<graph>: <message>" and returns @p status. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
keyer_status kr_val_graph_fail(const kr_vctx *v, keyer_status status, const char *fmt, ...);

/* "[1,128,128,3]" into @p buf (cap bytes); returns buf. */
const char *kr_val_dims_str(int rank, const int *dims, char *buf, size_t cap);
const char *kr_val_shape_str(const kr_tensor *t, char *buf, size_t cap);
const char *kr_val_dtype_name(kr_dtype d);

static inline const kr_tensor *kr_val_input(const kr_vctx *v, const kr_node *n, int i)
{
    return &v->g->tensors[n->inputs[i]];
}

static inline kr_tensor *kr_val_output(const kr_vctx *v, const kr_node *n)
{
    return &v->g->tensors[n->outputs[0]];
}

/* What kr_val_want_input() accepts. */
enum { KR_VAL_ACT, KR_VAL_CONST, KR_VAL_ANY };

/* Input @p i must be present, of @p kind, @p dtype and rank @p rank (-1: any). */
keyer_status kr_val_want_input(const kr_vctx *v, const kr_node *n, int i, int kind,
                               kr_dtype dtype, int rank, const char *role);
/* The node has @p min to @p max inputs. */
keyer_status kr_val_want_inputs(const kr_vctx *v, const kr_node *n, int min, int max);
/* The output has exactly @p rank dims equal to @p dims. */
keyer_status kr_val_expect_shape(const kr_vctx *v, const kr_node *n, int rank, const int *dims);
/* NumPy broadcasting of @p a and @p b into (@p rank, @p dims), right-aligned. */
keyer_status kr_val_broadcast(const kr_vctx *v, const kr_node *n, const kr_tensor *a,
                              const kr_tensor *b, int *rank, int *dims);
/* An operation on the batch axis 0 (@p what says which): UNSUPPORTED unless the graph is
 * fixed_batch (it then runs at batch 1 only, where axis 0 is an ordinary axis). */
keyer_status kr_val_batch_axis(const kr_vctx *v, const kr_node *n, const char *what);

/* The per-operator rules: each checks the node's inputs, parameters and output shape and fills
 * the derived parameters that graph.h lists. */
keyer_status kr_val_check_conv(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_depthwise(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_transpose_conv_bias(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_transpose_conv(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_pool(const kr_vctx *v, kr_node *n);

keyer_status kr_val_check_binary(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_prelu(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_unary(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_reduce(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_softmax(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_argmax(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_matmul(const kr_vctx *v, kr_node *n);

keyer_status kr_val_check_pad(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_resize_bilinear(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_resize(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_reshape(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_concat(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_transpose(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_slice(const kr_vctx *v, kr_node *n);
keyer_status kr_val_check_gather(const kr_vctx *v, kr_node *n);

/* Short names inside the validator's files (this header is included by validate*.c only). */
#define BAD KR_VAL_BAD
#define UNSUP KR_VAL_UNSUP
#define TRY KR_VAL_TRY
#define MAX_ELEMENTS KR_VAL_MAX_ELEMENTS
#define MAX_STRIDE KR_VAL_MAX_STRIDE
#define MAX_EXTENT KR_VAL_MAX_EXTENT
#define WANT_ACT KR_VAL_ACT
#define WANT_CONST KR_VAL_CONST
#define WANT_ANY KR_VAL_ANY
#define node_fail kr_val_node_fail
#define graph_fail kr_val_graph_fail
#define dims_str kr_val_dims_str
#define shape_str kr_val_shape_str
#define dtype_name kr_val_dtype_name
#define input kr_val_input
#define output kr_val_output
#define want_input kr_val_want_input
#define want_inputs kr_val_want_inputs
#define expect_shape kr_val_expect_shape
#define broadcast kr_val_broadcast
#define batch_axis kr_val_batch_axis
typedef kr_vctx vctx;

#endif /* KEYER_NN_VALIDATE_INTERNAL_H */
