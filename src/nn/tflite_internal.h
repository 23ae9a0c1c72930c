/*
 * The TFLite model reader's state, shared by its files: tflite.c (operators, tensors, the
 * graph) and tflite_options.c (builtin and custom operator options). Internal to src/nn.
 */
#ifndef KEYER_NN_TFLITE_INTERNAL_H
#define KEYER_NN_TFLITE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/status.h"
#include "nn/flatbuffer.h"
#include "nn/graph.h"

/* Operator kinds beyond kr_op: folded (DEQUANTIZE, DENSIFY) or lowered (DEPTH_TO_SPACE into
 * RESHAPE, TRANSPOSE, RESHAPE) at load. */
#define KIND_DEQUANTIZE (-1)
#define KIND_DENSIFY (-2)
#define KIND_DEPTH_TO_SPACE (-3)

/** An operator code: the builtin code, or a custom operator's name. */
typedef struct tfl_opcode {
    int code;           /* max(builtin_code, deprecated_builtin_code) */
    const char *custom; /* custom_code inside the file (NUL-terminated), or NULL */
    size_t custom_len;
} tfl_opcode;

/** An operator of subgraph 0 (read_operators, in tflite.c). */
typedef struct tfl_op {
    fb_table t;
    int kind; /* a kr_op, or a KIND_* above */
    int n_in, n_out;
    int in[KR_MAX_NODE_INPUTS]; /* file tensor indices; -1 = absent */
    int out[KR_MAX_NODE_OUTPUTS];
} tfl_op;

/** A tensor of subgraph 0, parsed on first use. */
typedef struct tfl_tensor {
    int parsed;
    int used; /* read or written by a kept node, or a graph input/output */
    int type; /* TensorType */
    int rank;
    int dims[KR_MAX_DIMS];
    size_t elements;
    const char *name; /* inside the file, or NULL */
    size_t name_len;
    char label[72];   /* printable name for messages */
    uint32_t buffer;
    size_t data, data_len; /* constant bytes in the file; data_len 0: no data */
    int deq_source;        /* file tensor a DEQUANTIZE converts into this one, or -1 */
    int deq_op;            /* that DEQUANTIZE's operator index */
    size_t sparsity;       /* the SparsityParameters table, or 0 (a dense tensor) */
    uint8_t *dense;        /* DENSIFY's output: the densified bytes (owned by the reader, in
                            * the file's element encoding), or NULL */
    int densify_op;        /* the DENSIFY writing it, or -1 */
    int index;             /* index in the graph, or -1 */
} tfl_tensor;

/** Everything the reader knows about the file; arrays owned by kr_tflite_read(). */
typedef struct tfl_ctx {
    fb_reader r;
    fb_vec buffers, tensors, operators, g_inputs, g_outputs;
    tfl_opcode *codes;
    size_t n_codes;
    tfl_op *ops;
    size_t n_ops;
    tfl_tensor *ft;
    size_t n_tensors;
} tfl_ctx;

/** The name of an operator kind (a kr_op, or a KIND_*) for messages. */
static inline const char *tfl_kind_name(int kind)
{
    switch (kind) {
    case KIND_DEQUANTIZE: return "DEQUANTIZE";
    case KIND_DENSIFY: return "DENSIFY";
    case KIND_DEPTH_TO_SPACE: return "DEPTH_TO_SPACE";
    default: return kr_op_name((kr_op)kind);
    }
}

/**
 * DENSIFY (tflite_sparse.c): expands the sparse constant @p src (read by operator @p op, its
 * sparsity table at src->sparsity, its stored values at src->data) into *@p out, a malloc'd
 * array of src->elements values in the file's encoding (2 bytes for FLOAT16, else 4), zero
 * where absent; @p dst is the operator's output (same type and shape). Every length, index
 * and segment is checked first. Errors (in c->r.err, naming the operator and tensor):
 * BAD_DATA, UNSUPPORTED, OUT_OF_MEMORY.
 */
keyer_status kr_tfl_densify(const tfl_ctx *c, size_t op, const tfl_tensor *src,
                            const tfl_tensor *dst, uint8_t **out);

/**
 * Reads the options of operator @p i (its builtin options table, or the custom options of
 * Convolution2DTransposeBias) into @p node, whose op, inputs and outputs are set, with schema
 * defaults where the file leaves them out; checks a RESHAPE's new_shape against its tensors.
 * Errors (in c->r.err): BAD_DATA (options of the wrong type, out of range or malformed),
 * UNSUPPORTED (a fused activation or option keyer lacks).
 */
keyer_status kr_tfl_node_options(const tfl_ctx *c, size_t i, kr_node *node);

#endif /* KEYER_NN_TFLITE_INTERNAL_H */
