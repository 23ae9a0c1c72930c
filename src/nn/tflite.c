/*
 * TFLite model reader: a hand-written, bounds-checked FlatBuffer walk that builds a kr_graph.
 *
 * The file is untrusted. Nothing is cast in place and nothing is read before it has been
 * checked; multi-byte values are assembled byte by byte (little-endian, as the format says),
 * so the caller's buffer may have any alignment.
 *
 * Reading strategy (FlatBuffers layout: docs/models.md, section 1)
 *  1. Header: at least 8 bytes, identifier "TFL3" at bytes 4..7, root uoffset at byte 0.
 *  2. Every table is opened through kr_fb_table_at(): the table must be 4-byte aligned and its
 *     4-byte soffset inside the file; the vtable (table - soffset) must be 2-byte aligned, inside
 *     the file, with an even size >= 4 that fits; the inline table size from the vtable must be
 *     >= 4 and fit in the file. A field is read through field_at(): an id past the vtable or an
 *     entry of 0 means "absent, use the schema default"; otherwise the field must lie inside the
 *     inline table (after the soffset) and be aligned to its own size.
 *  3. References (tables, vectors, strings) are uoffsets relative to the field: non-zero and
 *     pointing inside the file. A vector's target must be 4-byte aligned, its length word
 *     inside the file, and length * element size must fit in the bytes that remain (checked by
 *     division, so huge lengths cannot overflow). A string is a byte vector that must also have
 *     its NUL terminator inside the file. Elements of vectors of tables are uoffsets checked
 *     the same way.
 *  4. Counts are bounded: at most 2^20 tensors and operators, at most KR_MAX_NODE_INPUTS inputs
 *     and exactly one output per operator, rank <= KR_MAX_DIMS, positive dimensions, at most
 *     KR_TFLITE_MAX_ELEMENTS elements per tensor; names are copied up to 255 bytes. Every index
 *     (operator code, tensor, buffer) is range-checked before use. There is no recursion; each
 *     loop runs over a vector whose length was checked against the file size, and each table is
 *     visited a bounded number of times, so loading is O(file size). The constant bytes copied
 *     are capped at 4x the file size (plus alignment), which bounds memory even when many tensors
 *     share one buffer.
 *
 * Graph construction
 *  - Operator code = max(builtin_code, deprecated_builtin_code) (older files leave builtin_code
 *    at 0). Operators are scanned in file order first, so an unsupported operator is reported
 *    (UNSUPPORTED, with its index and name) before any tensor is looked at.
 *  - DENSIFY of a constant sparse tensor (SparsityParameters: CSR and block-sparse) is expanded
 *    once at load into a dense constant (tflite_sparse.c: every length, index and segment
 *    checked) and the node is dropped; a sparse tensor read by any other operator is
 *    UNSUPPORTED. DENSIFY followed by DEQUANTIZE (FLOAT16 sparse weights) folds both.
 *  - DEPTH_TO_SPACE (NHWC, TFLite's DCR order) is lowered to RESHAPE [N,H,W,b,b*C'],
 *    TRANSPOSE (0,1,3,2,4) and RESHAPE [N,H*b,W*b,C'], operators every backend has; the two
 *    intermediate tensors are added after the file's.
 *  - DEQUANTIZE of a FLOAT16 constant is folded: its FLOAT32 output becomes a constant holding
 *    the converted values (kr_half_to_float, subnormals included) and the node is dropped, so
 *    consumers read the constant directly. FLOAT32 and INT32 constants are copied. Every
 *    constant lives in one block (g->const_storage), each 16-byte aligned.
 *  - Only tensors read or written by a kept node, or listed as graph inputs/outputs, enter the
 *    graph (FLOAT16 sources behind DEQUANTIZE do not); indices are renumbered in file order.
 *    Activations must be FLOAT32; constants FLOAT32 or INT32 (a FLOAT16 constant read directly
 *    by an operator is UNSUPPORTED). A constant's byte count must equal elements * type size.
 *  - Builtin options are read with schema defaults (SAME padding, dilation 1, activation NONE).
 *    The custom op Convolution2DTransposeBias carries a raw 12-byte struct (padding 1 = SAME,
 *    2 = VALID, stride_w, stride_h), not a FlexBuffer.
 *  - Shapes, operator rules, graph order and views are then checked by kr_graph_validate().
 *
 * Files: flatbuffer.c (the bounds-checked access of 2 and 3), tflite_options.c (operator
 * options), tflite_sparse.c (DENSIFY), this file (operator codes, operators, tensors,
 * DEQUANTIZE and DENSIFY folding, DEPTH_TO_SPACE lowering, the graph).
 */
#include "nn/tflite.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/flatbuffer.h"
#include "nn/tflite_internal.h"

#define TFL_SCHEMA_VERSION 3u
#define MAX_TENSORS ((size_t)1 << 20)
#define MAX_OPERATORS ((size_t)1 << 20)
#define MAX_NAME_BYTES 255
#define MAX_DESCRIPTION_BYTES 1023
#define CONST_ALIGN 16
#define STORAGE_ALIGN 64

/* TensorType (schema.fbs). */
enum { TFL_FLOAT32 = 0, TFL_FLOAT16 = 1, TFL_INT32 = 2 };

/* BuiltinOperator codes keyer maps (schema.fbs). */
enum {
    TFL_ADD = 0,
    TFL_AVERAGE_POOL_2D = 1,
    TFL_CONCATENATION = 2,
    TFL_CONV_2D = 3,
    TFL_DEPTHWISE_CONV_2D = 4,
    TFL_DEPTH_TO_SPACE = 5,
    TFL_DEQUANTIZE = 6,
    TFL_LOGISTIC = 14,
    TFL_MAX_POOL_2D = 17,
    TFL_MUL = 18,
    TFL_RELU = 19,
    TFL_RELU6 = 21,
    TFL_RESHAPE = 22,
    TFL_RESIZE_BILINEAR = 23,
    TFL_CUSTOM = 32,
    TFL_PAD = 34,
    TFL_MEAN = 40,
    TFL_PRELU = 54,
    TFL_HARD_SWISH = 117,
    TFL_DENSIFY = 124,
};

/* BuiltinOptions tag of DepthToSpaceOptions (schema.fbs). */
#define TFL_OPTIONS_DEPTH_TO_SPACE 94
/* Largest DEPTH_TO_SPACE block keyer accepts. */
#define MAX_D2S_BLOCK 64

/* clang-format off */
static const char *const builtin_names[] = {
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D",
    "DEPTH_TO_SPACE", "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED",
    "HASHTABLE_LOOKUP", "L2_NORMALIZATION", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION",
    "LOGISTIC", "LSH_PROJECTION", "LSTM", "MAX_POOL_2D", "MUL", "RELU", "RELU_N1_TO_1", "RELU6",
    "RESHAPE", "RESIZE_BILINEAR", "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH",
    "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL", "CUSTOM", "EMBEDDING_LOOKUP_SPARSE", "PAD",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND",
    "TRANSPOSE", "MEAN", "SUB", "DIV", "SQUEEZE", "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP", "TOPK_V2", "SPLIT", "LOG_SOFTMAX",
    "DELEGATE", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU", "MAXIMUM", "ARG_MAX", "MINIMUM",
    "LESS", "NEG", "PADV2", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SELECT", "SLICE", "SIN",
    "TRANSPOSE_CONV", "SPARSE_TO_DENSE", "TILE", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL", "LOG",
    "SUM", "SQRT", "RSQRT", "SHAPE", "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD",
    "REDUCE_MAX", "PACK", "LOGICAL_OR", "ONE_HOT", "LOGICAL_AND", "LOGICAL_NOT", "UNPACK",
    "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY", "SQUARE", "ZEROS_LIKE", "FILL", "FLOOR_MOD",
    "RANGE", "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU", "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS",
    "SPLIT_V", "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N", "GATHER_ND", "COS", "WHERE", "RANK",
    "ELU", "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE", "MATRIX_SET_DIAG", "ROUND",
    "HARD_SWISH", "IF", "WHILE", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5",
    "SCATTER_ND", "SELECT_V2", "DENSIFY", "SEGMENT_SUM", "BATCH_MATMUL",
    "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM", "CALL_ONCE", "BROADCAST_TO", "RFFT2D",
    "CONV_3D", "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT",
    "HASHTABLE_SIZE", "REDUCE_ALL", "CONV_3D_TRANSPOSE", "VAR_HANDLE", "READ_VARIABLE",
    "ASSIGN_VARIABLE", "BROADCAST_ARGS", "RANDOM_STANDARD_NORMAL", "BUCKETIZE",
    "RANDOM_UNIFORM", "MULTINOMIAL", "GELU", "DYNAMIC_UPDATE_SLICE", "RELU_0_TO_1",
    "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_SUM", "ATAN2",
    "UNSORTED_SEGMENT_MIN", "SIGN", "BITCAST", "BITWISE_XOR", "RIGHT_SHIFT",
};
_Static_assert(sizeof(builtin_names) / sizeof(builtin_names[0]) == 162,
               "builtin_names must cover BuiltinOperator 0..161 (RIGHT_SHIFT)");

static const char *const type_names[] = {
    "FLOAT32", "FLOAT16", "INT32", "UINT8", "INT64", "STRING", "BOOL", "INT16",
    "COMPLEX64", "INT8", "FLOAT64", "COMPLEX128", "UINT64", "RESOURCE", "VARIANT", "UINT32",
    "UINT16", "INT4", "BFLOAT16", "INT2", "UINT4", "FLOAT8_E4M3FN", "FLOAT8_E5M2",
};
/* clang-format on */

const char *kr_tflite_builtin_name(int code)
{
    if (code < 0 || (size_t)code >= sizeof(builtin_names) / sizeof(builtin_names[0]))
        return NULL;
    return builtin_names[code];
}

static const char *type_name(int type)
{
    if (type < 0 || (size_t)type >= sizeof(type_names) / sizeof(type_names[0]))
        return "an unknown type";
    return type_names[type];
}

/* ---- operators and tensors ----------------------------------------------------------------- */

static size_t type_size(int type)
{
    return type == TFL_FLOAT16 ? 2 : 4;
}

static keyer_status read_opcodes(tfl_ctx *c, const fb_table *model)
{
    const fb_reader *r = &c->r;
    fb_vec v;
    TRY(kr_fb_vector(r, model, 1, 4, "model", "operator_codes", &v));
    c->n_codes = v.len;
    if (!v.len)
        return KEYER_OK;
    c->codes = calloc(v.len, sizeof(*c->codes));
    if (!c->codes)
        return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate %zu operator codes",
                          v.len);
    for (size_t i = 0; i < v.len; i++) {
        char where[48];
        snprintf(where, sizeof(where), "operator code %zu", i);
        fb_table t;
        uint64_t dep, bc;
        TRY(kr_fb_vector_table(r, &v, i, where, &t));
        TRY(kr_fb_scalar(r, &t, 0, 1, 0, where, "deprecated_builtin_code", &dep));
        TRY(kr_fb_string(r, &t, 1, where, "custom_code", &c->codes[i].custom,
                         &c->codes[i].custom_len));
        TRY(kr_fb_scalar(r, &t, 3, 4, 0, where, "builtin_code", &bc));
        int d = fb_sext8(dep), b = fb_i32((uint32_t)bc);
        c->codes[i].code = d > b ? d : b;
        if (c->codes[i].code < 0)
            return BAD(r, "%s: builtin code %d is negative", where, c->codes[i].code);
    }
    return KEYER_OK;
}

/* Maps operator @p i's code to a kr_op (or KIND_DEQUANTIZE); UNSUPPORTED for anything else. */
static keyer_status op_kind(const tfl_ctx *c, size_t i, const tfl_opcode *oc, int *kind)
{
    const fb_reader *r = &c->r;
    switch (oc->code) {
    case TFL_ADD: *kind = KR_OP_ADD; return KEYER_OK;
    case TFL_AVERAGE_POOL_2D: *kind = KR_OP_AVERAGE_POOL_2D; return KEYER_OK;
    case TFL_CONCATENATION: *kind = KR_OP_CONCATENATION; return KEYER_OK;
    case TFL_CONV_2D: *kind = KR_OP_CONV_2D; return KEYER_OK;
    case TFL_DEPTHWISE_CONV_2D: *kind = KR_OP_DEPTHWISE_CONV_2D; return KEYER_OK;
    case TFL_DEQUANTIZE: *kind = KIND_DEQUANTIZE; return KEYER_OK;
    case TFL_DENSIFY: *kind = KIND_DENSIFY; return KEYER_OK;
    case TFL_DEPTH_TO_SPACE: *kind = KIND_DEPTH_TO_SPACE; return KEYER_OK;
    case TFL_LOGISTIC: *kind = KR_OP_LOGISTIC; return KEYER_OK;
    case TFL_MAX_POOL_2D: *kind = KR_OP_MAX_POOL_2D; return KEYER_OK;
    case TFL_MUL: *kind = KR_OP_MUL; return KEYER_OK;
    case TFL_RELU: *kind = KR_OP_RELU; return KEYER_OK;
    case TFL_RELU6: *kind = KR_OP_RELU6; return KEYER_OK;
    case TFL_RESHAPE: *kind = KR_OP_RESHAPE; return KEYER_OK;
    case TFL_RESIZE_BILINEAR: *kind = KR_OP_RESIZE_BILINEAR; return KEYER_OK;
    case TFL_PAD: *kind = KR_OP_PAD; return KEYER_OK;
    case TFL_MEAN: *kind = KR_OP_MEAN; return KEYER_OK;
    case TFL_PRELU: *kind = KR_OP_PRELU; return KEYER_OK;
    case TFL_HARD_SWISH: *kind = KR_OP_HARD_SWISH; return KEYER_OK;
    case TFL_CUSTOM: {
        if (!oc->custom)
            return BAD(r, "operator %zu has the CUSTOM operator code but no custom_code name", i);
        if (!strcmp(oc->custom, "Convolution2DTransposeBias")) {
            *kind = KR_OP_TRANSPOSE_CONV_BIAS;
            return KEYER_OK;
        }
        char label[72];
        kr_fb_printable(oc->custom, oc->custom_len, label, sizeof(label));
        return UNSUPPORTED(r, "operator %zu is custom operator '%s', which keyer does not support",
                           i, label);
    }
    default: {
        const char *name = kr_tflite_builtin_name(oc->code);
        if (name)
            return UNSUPPORTED(r, "operator %zu is %s (builtin %d), which keyer does not support",
                               i, name, oc->code);
        return UNSUPPORTED(r, "operator %zu has builtin code %d, which keyer does not know", i,
                           oc->code);
    }
    }
}

/* First pass over the operators: codes, kinds (UNSUPPORTED stops here), tensor indices. */
static keyer_status read_operators(tfl_ctx *c)
{
    const fb_reader *r = &c->r;
    for (size_t i = 0; i < c->n_ops; i++) {
        tfl_op *op = &c->ops[i];
        char where[48];
        snprintf(where, sizeof(where), "operator %zu", i);
        uint64_t code_index;
        TRY(kr_fb_vector_table(r, &c->operators, i, where, &op->t));
        TRY(kr_fb_scalar(r, &op->t, 0, 4, 0, where, "opcode_index", &code_index));
        if (code_index >= c->n_codes)
            return BAD(r, "operator %zu uses operator code %llu, but the model has %zu", i,
                       (unsigned long long)code_index, c->n_codes);
        TRY(op_kind(c, i, &c->codes[code_index], &op->kind));
        const char *name = tfl_kind_name(op->kind);
        fb_vec in, out;
        TRY(kr_fb_vector(r, &op->t, 1, 4, where, "inputs", &in));
        TRY(kr_fb_vector(r, &op->t, 2, 4, where, "outputs", &out));
        if (in.len > KR_MAX_NODE_INPUTS)
            return UNSUPPORTED(r, "operator %zu (%s) has %zu inputs; keyer handles at most %d", i,
                               name, in.len, KR_MAX_NODE_INPUTS);
        if (out.len != 1)
            return BAD(r, "operator %zu (%s) has %zu outputs; it must have exactly 1", i, name,
                       out.len);
        op->n_in = (int)in.len;
        op->n_out = 1;
        for (size_t k = 0; k < in.len; k++) {
            int32_t t = fb_vec_i32(r, &in, k);
            if (t != -1 && (t < 0 || (size_t)t >= c->n_tensors))
                return BAD(r, "operator %zu (%s): input %zu is tensor %d, but the subgraph has %zu "
                           "tensors", i, name, k, (int)t, c->n_tensors);
            op->in[k] = t;
        }
        int32_t t = fb_vec_i32(r, &out, 0);
        if (t < 0 || (size_t)t >= c->n_tensors)
            return BAD(r, "operator %zu (%s): output 0 is tensor %d, but the subgraph has %zu "
                       "tensors", i, name, (int)t, c->n_tensors);
        op->out[0] = t;
    }
    return KEYER_OK;
}

/* Reads tensor @p idx (once): shape, type, name, buffer; checks the constant's byte count. */
static keyer_status parse_tensor(tfl_ctx *c, size_t idx)
{
    const fb_reader *r = &c->r;
    tfl_tensor *ft = &c->ft[idx];
    if (ft->parsed)
        return KEYER_OK;
    char where[48];
    snprintf(where, sizeof(where), "tensor %zu", idx);
    fb_table t;
    fb_vec shape;
    uint64_t type, buffer, is_variable;
    size_t quant, sparsity;
    TRY(kr_fb_vector_table(r, &c->tensors, idx, where, &t));
    TRY(kr_fb_string(r, &t, 3, where, "name", &ft->name, &ft->name_len));
    kr_fb_printable(ft->name, ft->name_len, ft->label, sizeof(ft->label));
    TRY(kr_fb_vector(r, &t, 0, 4, where, "shape", &shape));
    TRY(kr_fb_scalar(r, &t, 1, 1, 0, where, "type", &type));
    TRY(kr_fb_scalar(r, &t, 2, 4, 0, where, "buffer", &buffer));
    TRY(kr_fb_ref(r, &t, 4, where, "quantization", &quant));
    TRY(kr_fb_scalar(r, &t, 5, 1, 0, where, "is_variable", &is_variable));
    TRY(kr_fb_ref(r, &t, 6, where, "sparsity", &sparsity));
    ft->type = fb_sext8(type);
    if (shape.len > KR_MAX_DIMS)
        return UNSUPPORTED(r, "tensor %zu '%s' has rank %zu; keyer handles at most %d dimensions",
                           idx, ft->label, shape.len, KR_MAX_DIMS);
    ft->rank = (int)shape.len;
    ft->elements = 1;
    for (int d = 0; d < ft->rank; d++) {
        int32_t dim = fb_vec_i32(r, &shape, (size_t)d);
        if (dim <= 0)
            return BAD(r, "tensor %zu '%s': dimension %d is %d; dimensions must be positive", idx,
                       ft->label, d, (int)dim);
        if ((size_t)dim > KR_TFLITE_MAX_ELEMENTS / ft->elements)
            return BAD(r, "tensor %zu '%s' has more than %zu elements (keyer's limit per tensor)",
                       idx, ft->label, KR_TFLITE_MAX_ELEMENTS);
        ft->dims[d] = dim;
        ft->elements *= (size_t)dim;
    }
    if (ft->type != TFL_FLOAT32 && ft->type != TFL_FLOAT16 && ft->type != TFL_INT32)
        return UNSUPPORTED(r, "tensor %zu '%s' has type %s (%d); keyer reads FLOAT32, FLOAT16 "
                           "and INT32 tensors", idx, ft->label, type_name(ft->type), ft->type);
    if (quant) {
        fb_table q;
        fb_vec scale, zero_point;
        TRY(kr_fb_table_at(r, quant, where, &q));
        TRY(kr_fb_vector(r, &q, 2, 4, where, "quantization.scale", &scale));
        TRY(kr_fb_vector(r, &q, 3, 8, where, "quantization.zero_point", &zero_point));
        if (scale.len || zero_point.len)
            return UNSUPPORTED(r, "tensor %zu '%s' is quantized; keyer runs float models", idx,
                               ft->label);
    }
    if (is_variable & 0xff)
        return UNSUPPORTED(r, "tensor %zu '%s' is a variable tensor, which keyer does not support",
                           idx, ft->label);
    ft->sparsity = sparsity; /* expanded by its DENSIFY (link_densify), refused elsewhere */
    if (buffer >= c->buffers.len)
        return BAD(r, "tensor %zu '%s' uses buffer %llu, but the model has %zu buffers", idx,
                   ft->label, (unsigned long long)buffer, c->buffers.len);
    ft->buffer = (uint32_t)buffer;
    char bwhere[48];
    snprintf(bwhere, sizeof(bwhere), "buffer %u", ft->buffer);
    fb_table b;
    fb_vec data;
    uint64_t offset;
    TRY(kr_fb_vector_table(r, &c->buffers, ft->buffer, bwhere, &b));
    TRY(kr_fb_vector(r, &b, 0, 1, bwhere, "data", &data));
    TRY(kr_fb_scalar(r, &b, 1, 8, 0, bwhere, "offset", &offset));
    if (offset > 1)
        return UNSUPPORTED(r, "buffer %u (tensor %zu '%s') keeps its data outside the FlatBuffer "
                           "(offset %llu), which keyer does not support", ft->buffer, idx,
                           ft->label, (unsigned long long)offset);
    ft->data = data.data;
    ft->data_len = data.len;
    if (data.len && !sparsity) {
        size_t need = ft->elements * type_size(ft->type);
        if (need != data.len)
            return BAD(r, "tensor %zu '%s' needs %zu bytes but buffer %u holds %zu", idx,
                       ft->label, need, ft->buffer, data.len);
    }
    ft->parsed = 1;
    return KEYER_OK;
}

/* Expands each DENSIFY: a sparse constant in, its dense output becomes a constant. */
static keyer_status link_densify(tfl_ctx *c)
{
    const fb_reader *r = &c->r;
    for (size_t i = 0; i < c->n_ops; i++) {
        const tfl_op *op = &c->ops[i];
        if (op->kind != KIND_DENSIFY)
            continue;
        if (op->n_in != 1 || op->in[0] < 0)
            return BAD(r, "operator %zu (DENSIFY) has %d inputs; it needs exactly 1", i,
                       op->n_in);
        TRY(parse_tensor(c, (size_t)op->in[0]));
        TRY(parse_tensor(c, (size_t)op->out[0]));
        const tfl_tensor *src = &c->ft[op->in[0]];
        tfl_tensor *dst = &c->ft[op->out[0]];
        if (dst->data_len || dst->sparsity || dst->dense)
            return BAD(r, "operator %zu (DENSIFY): output tensor %d '%s' already holds data, is "
                       "sparse or is written twice", i, op->out[0], dst->label);
        if (src->dense)
            return UNSUPPORTED(r, "operator %zu (DENSIFY): input tensor %d '%s' is itself "
                               "densified", i, op->in[0], src->label);
        TRY(kr_tfl_densify(c, i, src, dst, &dst->dense));
        dst->densify_op = (int)i;
    }
    return KEYER_OK;
}

/* Records each DEQUANTIZE: a FLOAT16 constant in, a FLOAT32 tensor of the same shape out. */
static keyer_status link_dequantize(tfl_ctx *c)
{
    const fb_reader *r = &c->r;
    for (size_t i = 0; i < c->n_ops; i++) {
        const tfl_op *op = &c->ops[i];
        if (op->kind != KIND_DEQUANTIZE)
            continue;
        if (op->n_in != 1 || op->in[0] < 0)
            return BAD(r, "operator %zu (DEQUANTIZE) has %d inputs; it needs exactly 1", i,
                       op->n_in);
        TRY(parse_tensor(c, (size_t)op->in[0]));
        TRY(parse_tensor(c, (size_t)op->out[0]));
        const tfl_tensor *src = &c->ft[op->in[0]];
        tfl_tensor *dst = &c->ft[op->out[0]];
        if (src->sparsity)
            return UNSUPPORTED(r, "operator %zu (DEQUANTIZE): input tensor %d '%s' is sparse; "
                               "keyer densifies sparse tensors only through DENSIFY", i,
                               op->in[0], src->label);
        if (!src->data_len && !src->dense)
            return UNSUPPORTED(r, "operator %zu (DEQUANTIZE): input tensor %d '%s' is not a "
                               "constant; keyer folds DEQUANTIZE of constants only", i,
                               op->in[0], src->label);
        if (src->type != TFL_FLOAT16)
            return UNSUPPORTED(r, "operator %zu (DEQUANTIZE): input tensor %d '%s' is %s; keyer "
                               "dequantizes FLOAT16 only", i, op->in[0], src->label,
                               type_name(src->type));
        if (dst->type != TFL_FLOAT32)
            return BAD(r, "operator %zu (DEQUANTIZE): output tensor %d '%s' is %s, not FLOAT32",
                       i, op->out[0], dst->label, type_name(dst->type));
        if (dst->data_len || dst->dense)
            return BAD(r, "operator %zu (DEQUANTIZE): output tensor %d '%s' already holds "
                       "constant data", i, op->out[0], dst->label);
        if (!kr_dims_equal(src->rank, src->dims, dst->rank, dst->dims))
            return BAD(r, "operator %zu (DEQUANTIZE): output tensor %d '%s' does not have the "
                       "shape of input tensor %d '%s'", i, op->out[0], dst->label, op->in[0],
                       src->label);
        if (dst->deq_source >= 0)
            return BAD(r, "tensor %d '%s' is written by operators %d and %zu", op->out[0],
                       dst->label, dst->deq_op, i);
        dst->deq_source = op->in[0];
        dst->deq_op = (int)i;
    }
    return KEYER_OK;
}

/* ---- graph construction -------------------------------------------------------------------- */

static char *dup_bytes(const char *s, size_t len, size_t cap)
{
    if (!s)
        len = 0;
    if (len > cap)
        len = cap;
    char *d = malloc(len + 1);
    if (!d)
        return NULL;
    if (len)
        memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

/* Little-endian reads of a constant's bytes: the densified copy, or the file. */
static uint16_t const_u16(const tfl_ctx *c, const tfl_tensor *ft, size_t e)
{
    if (ft->dense)
        return (uint16_t)(ft->dense[2 * e] | ft->dense[2 * e + 1] << 8);
    return fb_u16(&c->r, ft->data + 2 * e);
}

static uint32_t const_u32(const tfl_ctx *c, const tfl_tensor *ft, size_t e)
{
    if (ft->dense) {
        const uint8_t *b = ft->dense + 4 * e;
        return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    }
    return fb_u32(&c->r, ft->data + 4 * e);
}

/* Copies constant @p ft into @p dst as float32 (FLOAT16 converted) or int32. */
static void copy_constant(const tfl_ctx *c, const tfl_tensor *ft, void *dst)
{
    uint8_t *out = dst;
    if (ft->deq_source >= 0) {
        const tfl_tensor *src = &c->ft[ft->deq_source];
        for (size_t e = 0; e < src->elements; e++) {
            float f = kr_half_to_float(const_u16(c, src, e));
            memcpy(out + 4 * e, &f, 4);
        }
    } else {
        for (size_t e = 0; e < ft->elements; e++) {
            uint32_t u = const_u32(c, ft, e);
            memcpy(out + 4 * e, &u, 4);
        }
    }
}

static int is_const(const tfl_tensor *ft)
{
    return ft->deq_source >= 0 || ft->data_len > 0 || ft->dense;
}

static int folded(int kind)
{
    return kind == KIND_DEQUANTIZE || kind == KIND_DENSIFY;
}

/* The block size of DEPTH_TO_SPACE operator @p i, and its input and output checked: NHWC rank
 * 4, batch 1, channels divisible by block^2, the output [1, H*b, W*b, C/b^2]. */
static keyer_status depth_to_space_block(tfl_ctx *c, size_t i, int *block)
{
    const fb_reader *r = &c->r;
    const tfl_op *op = &c->ops[i];
    char where[48];
    snprintf(where, sizeof(where), "operator %zu (DEPTH_TO_SPACE)", i);
    if (op->n_in != 1 || op->in[0] < 0)
        return BAD(r, "%s has %d inputs; it needs exactly 1", where, op->n_in);
    uint64_t tag, size;
    size_t target;
    TRY(kr_fb_scalar(r, &op->t, 3, 1, 0, where, "builtin_options_type", &tag));
    TRY(kr_fb_ref(r, &op->t, 4, where, "builtin_options", &target));
    if (tag != TFL_OPTIONS_DEPTH_TO_SPACE || !target)
        return BAD(r, "%s has no DepthToSpaceOptions (options type %llu)", where,
                   (unsigned long long)tag);
    fb_table t;
    TRY(kr_fb_table_at(r, target, where, &t));
    TRY(kr_fb_scalar(r, &t, 0, 4, 0, where, "block_size", &size));
    int32_t b = fb_i32((uint32_t)size);
    if (b < 1 || b > MAX_D2S_BLOCK)
        return BAD(r, "%s: block size %d (1..%d)", where, (int)b, MAX_D2S_BLOCK);
    TRY(parse_tensor(c, (size_t)op->in[0]));
    TRY(parse_tensor(c, (size_t)op->out[0]));
    const tfl_tensor *x = &c->ft[op->in[0]], *y = &c->ft[op->out[0]];
    if (x->rank != 4 || y->rank != 4 || x->dims[3] % (b * b) || y->dims[0] != x->dims[0] ||
        (int64_t)y->dims[1] != (int64_t)x->dims[1] * b ||
        (int64_t)y->dims[2] != (int64_t)x->dims[2] * b || y->dims[3] != x->dims[3] / (b * b))
        return BAD(r, "%s: input '%s' and output '%s' do not have the shapes [N,H,W,C] and "
                   "[N,H*%d,W*%d,C/%d]", where, x->label, y->label, (int)b, (int)b,
                   (int)(b * b));
    *block = (int)b;
    return KEYER_OK;
}

/* DEPTH_TO_SPACE (block b, NHWC [N,H,W,C] -> [N,H*b,W*b,C/b^2], TFLite's DCR order: output
 * (h*b + i, w*b + j, k) = input (h, w, (i*b + j) * C/b^2 + k)) as three nodes the backends
 * have: RESHAPE to [N,H,W,b,b*C'], TRANSPOSE (0,1,3,2,4) to [N,H,b,W,b*C'], RESHAPE to the
 * output. Two new tensors at *extra (named after the output); nodes at *n. */
static keyer_status lower_depth_to_space(tfl_ctx *c, size_t i, kr_graph *g, size_t *n,
                                         size_t *extra)
{
    const fb_reader *r = &c->r;
    const tfl_op *op = &c->ops[i];
    int b = 1;
    TRY(depth_to_space_block(c, i, &b));
    const tfl_tensor *x = &c->ft[op->in[0]], *y = &c->ft[op->out[0]];
    int cp = x->dims[3] / (b * b);
    int t1 = (int)(*extra)++, t2 = (int)(*extra)++;
    const int shapes[2][5] = {{x->dims[0], x->dims[1], x->dims[2], b, b * cp},
                              {x->dims[0], x->dims[1], b, x->dims[2], b * cp}};
    for (int k = 0; k < 2; k++) {
        kr_tensor *kt = &g->tensors[k ? t2 : t1];
        kt->view_of = -1;
        kt->producer = kt->last_consumer = kt->graph_input = kt->graph_output = -1;
        char name[MAX_NAME_BYTES + 1];
        snprintf(name, sizeof(name), "%.200s/depth_to_space_%d", y->name ? y->label : "", k);
        kt->name = dup_bytes(name, strlen(name), MAX_NAME_BYTES);
        if (!kt->name)
            return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate a tensor name");
        kt->rank = 5;
        memcpy(kt->dims, shapes[k], sizeof(shapes[k]));
        kt->dtype = KR_DTYPE_F32;
    }
    const int ins[3] = {x->index, t1, t2}, outs[3] = {t1, t2, y->index};
    for (int k = 0; k < 3; k++) {
        kr_node *node = &g->nodes[(*n)++];
        node->op = k == 1 ? KR_OP_TRANSPOSE : KR_OP_RESHAPE;
        node->source_index = (int)i;
        node->n_inputs = 1;
        node->n_outputs = 1;
        node->activation = KR_ACT_NONE;
        node->inputs[0] = ins[k];
        node->outputs[0] = outs[k];
        if (k == 1) {
            const int perm[5] = {0, 1, 3, 2, 4};
            memcpy(node->p.transpose.perm, perm, sizeof(perm));
        }
    }
    return KEYER_OK;
}

static keyer_status build_graph(tfl_ctx *c, const fb_table *model, kr_graph *g)
{
    const fb_reader *r = &c->r;

    /* Tensors read or written by kept nodes, and the graph's inputs and outputs. */
    size_t n_nodes = 0, n_d2s = 0;
    for (size_t i = 0; i < c->n_ops; i++) {
        const tfl_op *op = &c->ops[i];
        if (folded(op->kind))
            continue;
        n_nodes++;
        if (op->kind == KIND_DEPTH_TO_SPACE) {
            n_nodes += 2; /* RESHAPE, TRANSPOSE, RESHAPE */
            n_d2s++;
        }
        for (int k = 0; k < op->n_in; k++)
            if (op->in[k] >= 0)
                c->ft[op->in[k]].used = 1;
        c->ft[op->out[0]].used = 1;
    }
    for (size_t k = 0; k < c->g_inputs.len; k++)
        c->ft[fb_vec_i32(r, &c->g_inputs, k)].used = 1;
    for (size_t k = 0; k < c->g_outputs.len; k++)
        c->ft[fb_vec_i32(r, &c->g_outputs, k)].used = 1;

    /* Graph inputs first, for a precise message. */
    for (size_t k = 0; k < c->g_inputs.len; k++) {
        int t = fb_vec_i32(r, &c->g_inputs, k);
        TRY(parse_tensor(c, (size_t)t));
        const tfl_tensor *ft = &c->ft[t];
        if (is_const(ft))
            return BAD(r, "graph input %zu (tensor %d '%s') is a constant", k, t, ft->label);
        if (ft->type != TFL_FLOAT32)
            return UNSUPPORTED(r, "graph input %zu (tensor %d '%s') is %s; keyer's model inputs "
                               "must be FLOAT32", k, t, ft->label, type_name(ft->type));
    }

    /* Parse and number the kept tensors; size the constant block. */
    size_t n_used = 0, n_const = 0, total = 0;
    for (size_t t = 0; t < c->n_tensors; t++) {
        tfl_tensor *ft = &c->ft[t];
        if (!ft->used)
            continue;
        TRY(parse_tensor(c, t));
        ft->index = (int)n_used++;
        if (ft->sparsity)
            return UNSUPPORTED(r, "tensor %zu '%s' is sparse and read directly by an operator; "
                               "keyer densifies sparse tensors only through DENSIFY", t,
                               ft->label);
        if (ft->deq_source >= 0 && (ft->data_len || ft->dense))
            return BAD(r, "operator %d (DEQUANTIZE) writes constant tensor %zu '%s'", ft->deq_op,
                       t, ft->label);
        if (!is_const(ft)) {
            if (ft->type != TFL_FLOAT32)
                return UNSUPPORTED(r, "tensor %zu '%s' is a %s activation; keyer computes "
                                   "activations in FLOAT32", t, ft->label, type_name(ft->type));
            continue;
        }
        if (ft->deq_source < 0 && ft->type == TFL_FLOAT16)
            return UNSUPPORTED(r, "tensor %zu '%s' is a FLOAT16 constant read directly by an "
                               "operator; keyer converts FLOAT16 weights only behind DEQUANTIZE",
                               t, ft->label);
        n_const++;
        total += (ft->elements * 4 + CONST_ALIGN - 1) / CONST_ALIGN * CONST_ALIGN;
        /* Each term is <= 2^30 and there are <= 2^20 of them: no overflow in 64 bits, and the
         * budget below is checked as we go so 32-bit size_t stays in range too. */
        if (total > 4 * (r->n + CONST_ALIGN * n_const) + 4096)
            return BAD(r, "constant tensors need more than %zu bytes, over 4 times the file size: "
                       "buffers are shared by too many tensors", total);
    }

    size_t n_file_used = n_used;
    n_used += 2 * n_d2s; /* DEPTH_TO_SPACE's two intermediate tensors, after the file's */
    g->tensors = calloc(n_used ? n_used : 1, sizeof(*g->tensors));
    g->nodes = calloc(n_nodes ? n_nodes : 1, sizeof(*g->nodes));
    g->inputs = calloc(c->g_inputs.len ? c->g_inputs.len : 1, sizeof(int));
    g->outputs = calloc(c->g_outputs.len ? c->g_outputs.len : 1, sizeof(int));
    if (total) {
        size_t alloc = (total + STORAGE_ALIGN - 1) / STORAGE_ALIGN * STORAGE_ALIGN;
        g->const_storage = aligned_alloc(STORAGE_ALIGN, alloc);
        g->const_bytes = total;
    }
    if (!g->tensors || !g->nodes || !g->inputs || !g->outputs || (total && !g->const_storage))
        return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate the graph (%zu "
                          "tensors, %zu nodes, %zu constant bytes)", n_used, n_nodes, total);
    /* Counts only once the arrays exist, so that kr_graph_destroy() can always walk them. */
    g->n_tensors = (int)n_used;
    g->n_nodes = (int)n_nodes;
    g->n_inputs = (int)c->g_inputs.len;
    g->n_outputs = (int)c->g_outputs.len;

    size_t offset = 0;
    for (size_t t = 0; t < c->n_tensors; t++) {
        const tfl_tensor *ft = &c->ft[t];
        if (!ft->used)
            continue;
        kr_tensor *kt = &g->tensors[ft->index];
        kt->view_of = -1;
        kt->producer = kt->last_consumer = kt->graph_input = kt->graph_output = -1;
        kt->name = dup_bytes(ft->name, ft->name_len, MAX_NAME_BYTES);
        if (!kt->name)
            return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate a tensor name");
        kt->rank = ft->rank;
        memcpy(kt->dims, ft->dims, sizeof(kt->dims));
        kt->dtype = ft->type == TFL_INT32 && ft->deq_source < 0 ? KR_DTYPE_I32 : KR_DTYPE_F32;
        if (is_const(ft)) {
            void *dst = (uint8_t *)g->const_storage + offset;
            copy_constant(c, ft, dst);
            kt->data = dst;
            offset += (ft->elements * 4 + CONST_ALIGN - 1) / CONST_ALIGN * CONST_ALIGN;
        }
    }

    size_t n = 0, extra = n_file_used;
    for (size_t i = 0; i < c->n_ops; i++) {
        const tfl_op *op = &c->ops[i];
        if (folded(op->kind))
            continue;
        if (op->kind == KIND_DEPTH_TO_SPACE) {
            TRY(lower_depth_to_space(c, i, g, &n, &extra));
            continue;
        }
        kr_node *node = &g->nodes[n++];
        node->op = (kr_op)op->kind;
        node->source_index = (int)i;
        node->n_inputs = op->n_in;
        node->n_outputs = op->n_out;
        node->activation = KR_ACT_NONE;
        for (int k = 0; k < op->n_in; k++)
            node->inputs[k] = op->in[k] >= 0 ? c->ft[op->in[k]].index : -1;
        node->outputs[0] = c->ft[op->out[0]].index;
        TRY(kr_tfl_node_options(c, i, node));
    }
    for (size_t k = 0; k < c->g_inputs.len; k++)
        g->inputs[k] = c->ft[fb_vec_i32(r, &c->g_inputs, k)].index;
    for (size_t k = 0; k < c->g_outputs.len; k++)
        g->outputs[k] = c->ft[fb_vec_i32(r, &c->g_outputs, k)].index;

    const char *desc;
    size_t desc_len;
    TRY(kr_fb_string(r, model, 3, "model", "description", &desc, &desc_len));
    if (desc) {
        g->description = dup_bytes(desc, desc_len, MAX_DESCRIPTION_BYTES);
        if (!g->description)
            return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY,
                              "cannot allocate the model description");
    }
    return KEYER_OK;
}

static keyer_status check_io(const tfl_ctx *c, const fb_vec *v, const char *what)
{
    const fb_reader *r = &c->r;
    if (!v->len)
        return BAD(r, "subgraph 0 has no %ss", what);
    if (v->len > 4096)
        return UNSUPPORTED(r, "subgraph 0 has %zu %ss; keyer handles at most 4096", v->len, what);
    for (size_t k = 0; k < v->len; k++) {
        int32_t t = fb_vec_i32(r, v, k);
        if (t < 0 || (size_t)t >= c->n_tensors)
            return BAD(r, "graph %s %zu is tensor %d, but the subgraph has %zu tensors", what, k,
                       (int)t, c->n_tensors);
    }
    return KEYER_OK;
}

static keyer_status read_model(tfl_ctx *c, kr_graph *g)
{
    const fb_reader *r = &c->r;
    if (r->n < 8)
        return BAD(r, "the file is %zu bytes, too small for a TFLite model", r->n);
    if (memcmp(r->p + 4, "TFL3", 4) != 0)
        return BAD(r, "not a TFLite model: bytes 4-7 are not the file identifier TFL3");
    fb_table model, sub;
    TRY(kr_fb_table_at(r, fb_u32(r, 0), "model", &model));
    uint64_t version;
    TRY(kr_fb_scalar(r, &model, 0, 4, 0, "model", "version", &version));
    if (version != TFL_SCHEMA_VERSION)
        return UNSUPPORTED(r, "schema version %llu; keyer reads version %u",
                           (unsigned long long)version, TFL_SCHEMA_VERSION);
    TRY(read_opcodes(c, &model));
    fb_vec subgraphs;
    TRY(kr_fb_vector(r, &model, 2, 4, "model", "subgraphs", &subgraphs));
    if (subgraphs.len == 0)
        return BAD(r, "the model has no subgraph");
    if (subgraphs.len > 1)
        return UNSUPPORTED(r, "the model has %zu subgraphs; keyer runs single-subgraph models",
                           subgraphs.len);
    TRY(kr_fb_vector(r, &model, 4, 4, "model", "buffers", &c->buffers));
    TRY(kr_fb_vector_table(r, &subgraphs, 0, "subgraph 0", &sub));
    TRY(kr_fb_vector(r, &sub, 0, 4, "subgraph 0", "tensors", &c->tensors));
    TRY(kr_fb_vector(r, &sub, 1, 4, "subgraph 0", "inputs", &c->g_inputs));
    TRY(kr_fb_vector(r, &sub, 2, 4, "subgraph 0", "outputs", &c->g_outputs));
    TRY(kr_fb_vector(r, &sub, 3, 4, "subgraph 0", "operators", &c->operators));
    c->n_tensors = c->tensors.len;
    c->n_ops = c->operators.len;
    if (c->n_tensors > MAX_TENSORS)
        return UNSUPPORTED(r, "subgraph 0 has %zu tensors; keyer handles at most %zu",
                           c->n_tensors, MAX_TENSORS);
    if (c->n_ops > MAX_OPERATORS)
        return UNSUPPORTED(r, "subgraph 0 has %zu operators; keyer handles at most %zu", c->n_ops,
                           MAX_OPERATORS);
    if (c->n_ops == 0)
        return BAD(r, "subgraph 0 has no operators");
    c->ops = calloc(c->n_ops, sizeof(*c->ops));
    c->ft = calloc(c->n_tensors ? c->n_tensors : 1, sizeof(*c->ft));
    if (!c->ops || !c->ft)
        return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY,
                          "cannot allocate %zu operators and %zu tensors", c->n_ops, c->n_tensors);
    for (size_t t = 0; t < c->n_tensors; t++) {
        c->ft[t].deq_source = -1;
        c->ft[t].deq_op = -1;
        c->ft[t].densify_op = -1;
        c->ft[t].index = -1;
    }
    TRY(read_operators(c));
    TRY(check_io(c, &c->g_inputs, "input"));
    TRY(check_io(c, &c->g_outputs, "output"));
    TRY(link_densify(c));
    TRY(link_dequantize(c));
    return build_graph(c, &model, g);
}

static void free_ctx(tfl_ctx *c)
{
    for (size_t t = 0; c->ft && t < c->n_tensors; t++)
        free(c->ft[t].dense);
    free(c->codes);
    free(c->ops);
    free(c->ft);
}

keyer_status kr_tflite_read(const void *data, size_t size, const char *name, kr_graph **out,
                            keyer_error *err)
{
    if (!name)
        name = "model";
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: no output pointer", name);
    *out = NULL;
    if (!data && size)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL data of %zu bytes",
                               name, size);
    if (size > KR_TFLITE_MAX_FILE_BYTES)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the file is %zu bytes; keyer reads models up to %zu bytes",
                               name, size, KR_TFLITE_MAX_FILE_BYTES);
    tfl_ctx c = {.r = {.p = data, .n = size, .name = name, .err = err}};
    kr_graph *g = calloc(1, sizeof(*g));
    keyer_status st;
    if (!g || !(g->name = dup_bytes(name, strlen(name), 4095))) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate a graph", name);
        goto fail;
    }
    st = read_model(&c, g);
    if (st != KEYER_OK)
        goto fail;
    st = kr_graph_validate(g, err);
    if (st != KEYER_OK)
        goto fail;
    free_ctx(&c);
    *out = g;
    return KEYER_OK;

fail:
    free_ctx(&c);
    kr_graph_destroy(&g);
    return st;
}
