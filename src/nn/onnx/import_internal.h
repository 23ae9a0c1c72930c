/*
 * Shared state of the ONNX importer (import.c, import_fold.c, import_ops_*.c; the helpers
 * declared here live in import_util.c). Internal to src/nn/onnx/ (prefix kr_imp_).
 *
 * Every ONNX value name the import meets gets an imp_value: absent (an empty optional input),
 * a constant held on the host (int64 or float, ONNX order), or an activation (a kr_graph
 * tensor, with its ONNX shape and the "permuted" tag: the graph tensor is the NHWC permutation
 * of the rank-4 ONNX tensor). The kr_graph is built in growing arrays and packed at the end.
 */
#ifndef KEYER_NN_ONNX_IMPORT_INTERNAL_H
#define KEYER_NN_ONNX_IMPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/graph.h"
#include "nn/onnx/import.h"
#include "nn/onnx/onnx_file.h"

#define KR_IMP_MAX_RANK KR_ONNX_MAX_RANK

enum { KR_IMP_ABSENT = 0, KR_IMP_CONST, KR_IMP_ACT };

/* A constant on the host. is_float: f holds count floats, else i holds count int64 (every
 * ONNX integer type and BOOL). onnx_type: the ONNX element type it stands for. */
typedef struct kr_imp_const {
    int is_float;
    int32_t onnx_type;
    int rank;
    int64_t dims[KR_IMP_MAX_RANK];
    size_t count;
    float *f;
    int64_t *i;
} kr_imp_const;

typedef struct kr_imp_value {
    const char *name; /* points into the parsed model */
    int kind;         /* KR_IMP_* */
    kr_imp_const c;   /* KR_IMP_CONST (owned) */
    int tensor;       /* KR_IMP_ACT: graph tensor index */
    int rank;         /* KR_IMP_ACT: ONNX shape */
    int64_t dims[KR_IMP_MAX_RANK];
    int nhwc;         /* KR_IMP_ACT: the graph tensor is the NHWC permutation (rank 4 only) */
    int other;        /* KR_IMP_ACT: the tensor in the other layout once made, else -1 */
} kr_imp_value;

typedef struct kr_imp_ctx {
    const kr_onnx_file *f;
    const Onnx__GraphProto *gp;
    int opset;
    kr_onnx_import_params params;
    keyer_error *err;
    const Onnx__NodeProto *node; /* the node being imported, for messages */
    int node_index;
    /* values: hash table of indices into vals */
    kr_imp_value *vals;
    size_t n_vals, cap_vals;
    int *slots;
    size_t n_slots;
    int *uses; /* per value: readers (node inputs and graph outputs) */
    /* the graph under construction */
    kr_tensor *tensors;
    void **tdata; /* per tensor: malloc'd constant bytes or NULL */
    int n_tensors, cap_tensors;
    kr_node *nodes;
    int n_nodes, cap_nodes;
    int *node_onnx; /* per kr node: the ONNX node index that made it */
    int fixed_batch;
    unsigned name_seq; /* for names of inserted tensors */
} kr_imp_ctx;

/* Formats "FILE: node 'NAME' (op OP, opset N): MESSAGE" into the error; returns @p st. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
keyer_status kr_imp_fail(kr_imp_ctx *c, keyer_status st, const char *fmt, ...);
/* OUT_OF_MEMORY naming the node. */
keyer_status kr_imp_oom(kr_imp_ctx *c);

/* Index of the value called @p name, or -1. */
int kr_imp_find_value(const kr_imp_ctx *c, const char *name);
/* Adds a value called @p name (not yet present; the name must outlive the import); returns
 * its index or -1 (error set). */
int kr_imp_add_value(kr_imp_ctx *c, const char *name);
/* A decoded ONNX tensor as a host constant (*k owns its arrays on success). */
keyer_status kr_imp_load_tensor(kr_imp_ctx *c, const kr_onnx_tensor *t, kr_imp_const *k);

/* The value called @p name: a known value, else an initializer (loaded as a constant), else
 * NULL (BAD_DATA set) when nothing defines it. "" gives a value of kind ABSENT. */
keyer_status kr_imp_lookup(kr_imp_ctx *c, const char *name, kr_imp_value **out);
/* Node input @p i (ABSENT when past the end or empty). */
keyer_status kr_imp_input(kr_imp_ctx *c, int i, kr_imp_value **out);
/* Defines node output @p i: takes ownership of @p k's arrays (a constant). */
keyer_status kr_imp_set_const(kr_imp_ctx *c, int i, kr_imp_const *k);
/* Defines node output @p i as an activation: graph tensor @p t with ONNX shape and tag. */
keyer_status kr_imp_set_act(kr_imp_ctx *c, int i, int t, int rank, const int64_t *dims, int nhwc);
/* Uses of node output @p i (0 when absent). */
int kr_imp_output_uses(kr_imp_ctx *c, int i);
/* Readers of the value called @p name: node inputs and graph outputs. */
int kr_imp_uses(kr_imp_ctx *c, const char *name);
int kr_imp_n_outputs(const kr_imp_ctx *c);

/* Constants */
keyer_status kr_imp_const_alloc(kr_imp_ctx *c, kr_imp_const *k, int is_float, int rank,
                                const int64_t *dims);
void kr_imp_const_free(kr_imp_const *k);
/* Element @p j as double / int64 whatever the storage. */
double kr_imp_const_get(const kr_imp_const *k, size_t j);
int64_t kr_imp_const_geti(const kr_imp_const *k, size_t j);
/* A constant's values as int64 list (rank 0 or 1, at most @p max): BAD_DATA naming @p what. */
keyer_status kr_imp_const_ints(kr_imp_ctx *c, const kr_imp_value *v, const char *what,
                               int64_t *out, int max, int *count);
/* A scalar (one element) as float. */
keyer_status kr_imp_const_scalar(kr_imp_ctx *c, const kr_imp_value *v, const char *what,
                                 float *out);

/* Graph building. Tensor names are copied. Activation dims are the graph's (already permuted).
 * Each returns the tensor index or -1 (error set). */
int kr_imp_new_act(kr_imp_ctx *c, const char *name, int rank, const int *dims);
/* A float32 constant taking ownership of @p data (malloc'd, count = product of dims). */
int kr_imp_new_const_f32(kr_imp_ctx *c, const char *name, int rank, const int *dims, float *data);
/* An int32 constant copied from @p vals. */
int kr_imp_new_const_i32(kr_imp_ctx *c, const char *name, int rank, const int *dims,
                         const int32_t *vals);
/* Appends a node (fields zeroed, activation NONE); NULL on error. */
kr_node *kr_imp_emit(kr_imp_ctx *c, kr_op op, int n_in, const int *inputs, int output);
/* A unique name "<base>/<what>N" in @p buf. */
const char *kr_imp_name(kr_imp_ctx *c, const char *base, const char *what, char *buf, size_t n);

/* ONNX shape (int64) to graph dims (int), permuted to NHWC when @p nhwc; BAD_DATA when a
 * dimension is out of range. */
keyer_status kr_imp_dims(kr_imp_ctx *c, int rank, const int64_t *onnx, int nhwc, int *out);
/* The graph axis of ONNX axis @p a of a rank-@p rank tensor with tag @p nhwc. */
int kr_imp_axis(int rank, int nhwc, int a);
/* Normalises a possibly negative ONNX axis; BAD_DATA when out of range. */
keyer_status kr_imp_norm_axis(kr_imp_ctx *c, int64_t a, int rank, int *out);

/* A graph tensor holding @p v in ONNX order (inserting a TRANSPOSE or a RESHAPE view when v
 * is permuted). */
keyer_status kr_imp_onnx_order(kr_imp_ctx *c, const kr_imp_value *v, int *tensor);
/* A graph tensor holding rank-4 @p v permuted to NHWC. */
keyer_status kr_imp_nhwc(kr_imp_ctx *c, const kr_imp_value *v, int *tensor);
/* A new activation tensor for node output @p i with ONNX shape (rank, dims) and tag @p nhwc,
 * defined as the output value; returns its index in *t. */
keyer_status kr_imp_out_act(kr_imp_ctx *c, int i, int rank, const int64_t *dims, int nhwc,
                            int *t);
/* A float32 graph constant from constant @p v laid out for a rank-@p rank operand (1s
 * prepended), permuted to NHWC when @p nhwc. */
keyer_status kr_imp_const_operand(kr_imp_ctx *c, const kr_imp_value *v, int rank, int nhwc,
                                  int *tensor);

/* Constant folding (import_fold.c): whether the node's operator can be folded; then folds the
 * current node (all inputs constant, or Shape/Size). */
int kr_imp_foldable(const char *op);
keyer_status kr_imp_fold(kr_imp_ctx *c);

/* Shape rules shared by folding and mapping (import_fold.c). */
/* Reshape of (rank, dims) to the constant @p shape (0 copies a dimension unless @p allowzero,
 * -1 is inferred). */
keyer_status kr_imp_reshape_dims(kr_imp_ctx *c, int rank, const int64_t *dims,
                                 const kr_imp_value *shape, int allowzero, int *out_rank,
                                 int64_t *out);
/* Squeeze (@p unsqueeze 0) or Unsqueeze of (rank, dims), axes from the attribute (opset < 13)
 * or input 1. */
keyer_status kr_imp_squeeze_dims(kr_imp_ctx *c, int unsqueeze, int rank, const int64_t *dims,
                                 int *out_rank, int64_t *out);
/* ONNX Slice of (rank, dims) with the current node's starts/ends/axes/steps (attributes before
 * opset 10, inputs after): per dimension the first index, the step and the count. */
keyer_status kr_imp_slice_params(kr_imp_ctx *c, int rank, const int64_t *dims, int64_t *start,
                                 int64_t *step, int64_t *count);

/* Mapping onto graph operators (import_ops_*.c): the current node, with at least one
 * activation input. UNSUPPORTED for operators keyer does not map. */
keyer_status kr_imp_map(kr_imp_ctx *c);
keyer_status kr_imp_map_window(kr_imp_ctx *c, const char *op, int *done);
keyer_status kr_imp_map_elementwise(kr_imp_ctx *c, const char *op, int *done);
keyer_status kr_imp_map_tensor(kr_imp_ctx *c, const char *op, int *done);
keyer_status kr_imp_map_resize(kr_imp_ctx *c, const char *op, int *done);
/* A float32 graph constant broadcasting @p vals (@p n values) along ONNX axis 1 of a rank-@p rank
 * operand (shape [n,1,...] before the 1s prepended), laid out for tag @p nhwc. */
keyer_status kr_imp_channel_const(kr_imp_ctx *c, const char *name, const float *vals, int n,
                                  int rank, int nhwc, int *tensor);

/* Attributes of the current node. */
keyer_status kr_imp_attr_int(kr_imp_ctx *c, const char *name, int64_t def, int64_t *out);
keyer_status kr_imp_attr_float(kr_imp_ctx *c, const char *name, float def, float *out);
keyer_status kr_imp_attr_string(kr_imp_ctx *c, const char *name, const char *def,
                                const char **out);
keyer_status kr_imp_attr_ints(kr_imp_ctx *c, const char *name, const int64_t **out,
                              size_t *count);

#define KR_IMP_TRY(expr)                                                                          \
    do {                                                                                          \
        keyer_status st_ = (expr);                                                                \
        if (st_ != KEYER_OK)                                                                      \
            return st_;                                                                           \
    } while (0)

#endif /* KEYER_NN_ONNX_IMPORT_INTERNAL_H */
