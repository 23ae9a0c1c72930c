/*
 * TFLite model reader: a hand-written, bounds-checked FlatBuffer walk that builds a kr_graph.
 *
 * The file is untrusted. Nothing is cast in place and nothing is read before it has been
 * checked; multi-byte values are assembled byte by byte (little-endian, as the format says),
 * so the caller's buffer may have any alignment.
 *
 * Reading strategy (FlatBuffers layout: docs/models.md, section 1)
 *  1. Header: at least 8 bytes, identifier "TFL3" at bytes 4..7, root uoffset at byte 0.
 *  2. Every table is opened through table_at(): the table must be 4-byte aligned and its
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
 *    (UNSUPPORTED, with its index and name) before any tensor is looked at: sparse models fail
 *    on DENSIFY rather than on their sparse tensors.
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
 */
#include "nn/tflite.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

/* BuiltinOptions union tags (1-based position in the union). */
enum {
    OPT_CONV_2D = 1,
    OPT_DEPTHWISE_CONV_2D = 2,
    OPT_POOL_2D = 5,
    OPT_CONCATENATION = 10,
    OPT_ADD = 11,
    OPT_RESIZE_BILINEAR = 15,
    OPT_RESHAPE = 17,
    OPT_MUL = 21,
    OPT_PAD = 22,
    OPT_REDUCER = 27,
};

/* Operator kind beyond kr_op: folded at load. */
#define KIND_DEQUANTIZE (-1)

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

/* ---- bounds-checked FlatBuffer access ------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p;
    size_t n;
    const char *name;
    keyer_error *err;
} reader;

typedef struct fb_table {
    size_t pos;     /* byte offset of the table (its soffset) */
    size_t vt;      /* byte offset of its vtable */
    size_t vt_size; /* vtable bytes */
    size_t size;    /* inline table bytes */
} fb_table;

typedef struct fb_vec {
    size_t data; /* byte offset of element 0; 0 when the vector is absent */
    size_t len;  /* element count; 0 when absent */
} fb_vec;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static keyer_status fail(const reader *r, keyer_status status, const char *fmt, ...)
{
    char msg[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return keyer_error_set(r->err, status, "%s: %s", r->name, msg);
}

#define BAD(r, ...) fail((r), KEYER_STATUS_BAD_DATA, __VA_ARGS__)
#define UNSUPPORTED(r, ...) fail((r), KEYER_STATUS_UNSUPPORTED, __VA_ARGS__)
#define TRY(expr)                                                                                 \
    do {                                                                                          \
        keyer_status try_status_ = (expr);                                                        \
        if (try_status_ != KEYER_OK)                                                              \
            return try_status_;                                                                   \
    } while (0)

static int span_ok(const reader *r, size_t pos, size_t len)
{
    return pos <= r->n && len <= r->n - pos;
}

static uint16_t rd_u16(const reader *r, size_t pos)
{
    const uint8_t *b = r->p + pos;
    return (uint16_t)(b[0] | (b[1] << 8));
}

static uint32_t rd_u32(const reader *r, size_t pos)
{
    const uint8_t *b = r->p + pos;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int32_t to_i32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) - INT32_MAX - 1;
}

static int sext8(uint64_t v)
{
    return (int)(v & 0xff) - ((v & 0x80) ? 256 : 0);
}

static int32_t vec_i32(const reader *r, const fb_vec *v, size_t i)
{
    return to_i32(rd_u32(r, v->data + 4 * i));
}

static keyer_status table_at(const reader *r, size_t pos, const char *where, fb_table *t)
{
    if (pos % 4 != 0 || !span_ok(r, pos, 4))
        return BAD(r, "%s: table at byte %zu is misaligned or past the end of the file (%zu bytes)",
                   where, pos, r->n);
    long long vt = (long long)pos - (long long)to_i32(rd_u32(r, pos));
    if (vt < 0 || vt % 2 != 0 || !span_ok(r, (size_t)vt, 4))
        return BAD(r, "%s: the vtable of the table at byte %zu would be at byte %lld, which is "
                   "misaligned or outside the file", where, pos, vt);
    t->pos = pos;
    t->vt = (size_t)vt;
    t->vt_size = rd_u16(r, t->vt);
    t->size = rd_u16(r, t->vt + 2);
    if (t->vt_size < 4 || t->vt_size % 2 != 0 || !span_ok(r, t->vt, t->vt_size))
        return BAD(r, "%s: the vtable at byte %zu has an invalid size of %zu bytes", where, t->vt,
                   t->vt_size);
    if (t->size < 4 || !span_ok(r, pos, t->size))
        return BAD(r, "%s: the table at byte %zu claims %zu bytes, which do not fit in the file",
                   where, pos, t->size);
    return KEYER_OK;
}

/* Byte offset of field @p id (@p size bytes) of @p t in *out, or 0 when the field is absent. */
static keyer_status field_at(const reader *r, const fb_table *t, int id, size_t size,
                             const char *where, const char *field, size_t *out)
{
    size_t entry = 4 + 2 * (size_t)id;
    *out = 0;
    if (entry + 2 > t->vt_size)
        return KEYER_OK;
    size_t off = rd_u16(r, t->vt + entry);
    if (off == 0)
        return KEYER_OK;
    if (off < 4 || off + size > t->size)
        return BAD(r, "%s: field '%s' (offset %zu, %zu bytes) lies outside its %zu-byte table",
                   where, field, off, size, t->size);
    if ((t->pos + off) % size != 0)
        return BAD(r, "%s: field '%s' at byte %zu is not aligned to %zu bytes", where, field,
                   t->pos + off, size);
    *out = t->pos + off;
    return KEYER_OK;
}

/* A scalar field of @p size bytes (1, 4 or 8), zero-extended, or @p def when absent. */
static keyer_status get_scalar(const reader *r, const fb_table *t, int id, size_t size,
                               uint64_t def, const char *where, const char *field, uint64_t *v)
{
    size_t pos;
    TRY(field_at(r, t, id, size, where, field, &pos));
    if (!pos) {
        *v = def;
        return KEYER_OK;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < size; i++)
        x |= (uint64_t)r->p[pos + i] << (8 * i);
    *v = x;
    return KEYER_OK;
}

/* Target of a reference field in *target, or 0 when absent. */
static keyer_status get_ref(const reader *r, const fb_table *t, int id, const char *where,
                            const char *field, size_t *target)
{
    size_t pos;
    TRY(field_at(r, t, id, 4, where, field, &pos));
    *target = 0;
    if (!pos)
        return KEYER_OK;
    uint32_t off = rd_u32(r, pos);
    if (off == 0 || off >= r->n - pos)
        return BAD(r, "%s: field '%s' at byte %zu points to byte %llu, outside the file (%zu "
                   "bytes)", where, field, pos, (unsigned long long)pos + off, r->n);
    *target = pos + off;
    return KEYER_OK;
}

static keyer_status vec_at(const reader *r, size_t pos, size_t elem, const char *where,
                           const char *field, fb_vec *v)
{
    if (pos % 4 != 0 || !span_ok(r, pos, 4))
        return BAD(r, "%s: vector '%s' at byte %zu is misaligned or past the end of the file",
                   where, field, pos);
    size_t len = rd_u32(r, pos);
    size_t data = pos + 4;
    if (len > (r->n - data) / elem)
        return BAD(r, "%s: vector '%s' at byte %zu claims %zu elements of %zu bytes, but only %zu "
                   "bytes remain in the file", where, field, pos, len, elem, r->n - data);
    v->data = data;
    v->len = len;
    return KEYER_OK;
}

static keyer_status get_vec(const reader *r, const fb_table *t, int id, size_t elem,
                            const char *where, const char *field, fb_vec *v)
{
    size_t target;
    v->data = 0;
    v->len = 0;
    TRY(get_ref(r, t, id, where, field, &target));
    if (!target)
        return KEYER_OK;
    return vec_at(r, target, elem, where, field, v);
}

/* A string field: *s points at its bytes inside the file (NUL-terminated), or NULL if absent. */
static keyer_status get_str(const reader *r, const fb_table *t, int id, const char *where,
                            const char *field, const char **s, size_t *len)
{
    fb_vec v;
    *s = NULL;
    *len = 0;
    TRY(get_vec(r, t, id, 1, where, field, &v));
    if (!v.data)
        return KEYER_OK;
    if (v.data + v.len >= r->n || r->p[v.data + v.len] != 0)
        return BAD(r, "%s: string '%s' at byte %zu (%zu bytes) has no NUL terminator inside the "
                   "file", where, field, v.data - 4, v.len);
    *s = (const char *)r->p + v.data;
    *len = v.len;
    return KEYER_OK;
}

/* Element @p i (< v->len) of a vector of tables. */
static keyer_status vec_table(const reader *r, const fb_vec *v, size_t i, const char *where,
                              fb_table *t)
{
    size_t pos = v->data + 4 * i;
    uint32_t off = rd_u32(r, pos);
    if (off == 0 || off >= r->n - pos)
        return BAD(r, "%s: its offset at byte %zu points to byte %llu, outside the file", where,
                   pos, (unsigned long long)pos + off);
    return table_at(r, pos + off, where, t);
}

/* Copies at most @p cap bytes of @p s, replacing non-printable bytes: safe for messages. */
static void printable(const char *s, size_t len, char *buf, size_t cap)
{
    size_t n = 0;
    if (s)
        for (; n < len && n + 1 < cap && s[n]; n++)
            buf[n] = (s[n] >= 0x20 && s[n] < 0x7f) ? s[n] : '?';
    buf[n] = '\0';
}

/* ---- model reading state ------------------------------------------------------------------- */

typedef struct opcode {
    int code;           /* max(builtin_code, deprecated_builtin_code) */
    const char *custom; /* custom_code inside the file (NUL-terminated), or NULL */
    size_t custom_len;
} opcode;

typedef struct opinfo {
    fb_table t;
    int kind; /* a kr_op, or KIND_DEQUANTIZE */
    int n_in, n_out;
    int in[KR_MAX_NODE_INPUTS]; /* file tensor indices; -1 = absent */
    int out[KR_MAX_NODE_OUTPUTS];
} opinfo;

typedef struct ftensor {
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
    int index;             /* index in the graph, or -1 */
} ftensor;

typedef struct ctx {
    reader r;
    fb_vec buffers, tensors, operators, g_inputs, g_outputs;
    opcode *codes;
    size_t n_codes;
    opinfo *ops;
    size_t n_ops;
    ftensor *ft;
    size_t n_tensors;
} ctx;

static const char *kind_name(int kind)
{
    return kind == KIND_DEQUANTIZE ? "DEQUANTIZE" : kr_op_name((kr_op)kind);
}

static size_t type_size(int type)
{
    return type == TFL_FLOAT16 ? 2 : 4;
}

static keyer_status read_opcodes(ctx *c, const fb_table *model)
{
    const reader *r = &c->r;
    fb_vec v;
    TRY(get_vec(r, model, 1, 4, "model", "operator_codes", &v));
    c->n_codes = v.len;
    if (!v.len)
        return KEYER_OK;
    c->codes = calloc(v.len, sizeof(*c->codes));
    if (!c->codes)
        return fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate %zu operator codes", v.len);
    for (size_t i = 0; i < v.len; i++) {
        char where[48];
        snprintf(where, sizeof(where), "operator code %zu", i);
        fb_table t;
        uint64_t dep, bc;
        TRY(vec_table(r, &v, i, where, &t));
        TRY(get_scalar(r, &t, 0, 1, 0, where, "deprecated_builtin_code", &dep));
        TRY(get_str(r, &t, 1, where, "custom_code", &c->codes[i].custom,
                    &c->codes[i].custom_len));
        TRY(get_scalar(r, &t, 3, 4, 0, where, "builtin_code", &bc));
        int d = sext8(dep), b = to_i32((uint32_t)bc);
        c->codes[i].code = d > b ? d : b;
        if (c->codes[i].code < 0)
            return BAD(r, "%s: builtin code %d is negative", where, c->codes[i].code);
    }
    return KEYER_OK;
}

/* Maps operator @p i's code to a kr_op (or KIND_DEQUANTIZE); UNSUPPORTED for anything else. */
static keyer_status op_kind(const ctx *c, size_t i, const opcode *oc, int *kind)
{
    const reader *r = &c->r;
    switch (oc->code) {
    case TFL_ADD: *kind = KR_OP_ADD; return KEYER_OK;
    case TFL_AVERAGE_POOL_2D: *kind = KR_OP_AVERAGE_POOL_2D; return KEYER_OK;
    case TFL_CONCATENATION: *kind = KR_OP_CONCATENATION; return KEYER_OK;
    case TFL_CONV_2D: *kind = KR_OP_CONV_2D; return KEYER_OK;
    case TFL_DEPTHWISE_CONV_2D: *kind = KR_OP_DEPTHWISE_CONV_2D; return KEYER_OK;
    case TFL_DEQUANTIZE: *kind = KIND_DEQUANTIZE; return KEYER_OK;
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
        printable(oc->custom, oc->custom_len, label, sizeof(label));
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
static keyer_status read_operators(ctx *c)
{
    const reader *r = &c->r;
    for (size_t i = 0; i < c->n_ops; i++) {
        opinfo *op = &c->ops[i];
        char where[48];
        snprintf(where, sizeof(where), "operator %zu", i);
        uint64_t code_index;
        TRY(vec_table(r, &c->operators, i, where, &op->t));
        TRY(get_scalar(r, &op->t, 0, 4, 0, where, "opcode_index", &code_index));
        if (code_index >= c->n_codes)
            return BAD(r, "operator %zu uses operator code %llu, but the model has %zu", i,
                       (unsigned long long)code_index, c->n_codes);
        TRY(op_kind(c, i, &c->codes[code_index], &op->kind));
        const char *name = kind_name(op->kind);
        fb_vec in, out;
        TRY(get_vec(r, &op->t, 1, 4, where, "inputs", &in));
        TRY(get_vec(r, &op->t, 2, 4, where, "outputs", &out));
        if (in.len > KR_MAX_NODE_INPUTS)
            return UNSUPPORTED(r, "operator %zu (%s) has %zu inputs; keyer handles at most %d", i,
                               name, in.len, KR_MAX_NODE_INPUTS);
        if (out.len != 1)
            return BAD(r, "operator %zu (%s) has %zu outputs; it must have exactly 1", i, name,
                       out.len);
        op->n_in = (int)in.len;
        op->n_out = 1;
        for (size_t k = 0; k < in.len; k++) {
            int32_t t = vec_i32(r, &in, k);
            if (t != -1 && (t < 0 || (size_t)t >= c->n_tensors))
                return BAD(r, "operator %zu (%s): input %zu is tensor %d, but the subgraph has %zu "
                           "tensors", i, name, k, (int)t, c->n_tensors);
            op->in[k] = t;
        }
        int32_t t = vec_i32(r, &out, 0);
        if (t < 0 || (size_t)t >= c->n_tensors)
            return BAD(r, "operator %zu (%s): output 0 is tensor %d, but the subgraph has %zu "
                       "tensors", i, name, (int)t, c->n_tensors);
        op->out[0] = t;
    }
    return KEYER_OK;
}

/* Reads tensor @p idx (once): shape, type, name, buffer; checks the constant's byte count. */
static keyer_status parse_tensor(ctx *c, size_t idx)
{
    const reader *r = &c->r;
    ftensor *ft = &c->ft[idx];
    if (ft->parsed)
        return KEYER_OK;
    char where[48];
    snprintf(where, sizeof(where), "tensor %zu", idx);
    fb_table t;
    fb_vec shape;
    uint64_t type, buffer, is_variable;
    size_t quant, sparsity;
    TRY(vec_table(r, &c->tensors, idx, where, &t));
    TRY(get_str(r, &t, 3, where, "name", &ft->name, &ft->name_len));
    printable(ft->name, ft->name_len, ft->label, sizeof(ft->label));
    TRY(get_vec(r, &t, 0, 4, where, "shape", &shape));
    TRY(get_scalar(r, &t, 1, 1, 0, where, "type", &type));
    TRY(get_scalar(r, &t, 2, 4, 0, where, "buffer", &buffer));
    TRY(get_ref(r, &t, 4, where, "quantization", &quant));
    TRY(get_scalar(r, &t, 5, 1, 0, where, "is_variable", &is_variable));
    TRY(get_ref(r, &t, 6, where, "sparsity", &sparsity));
    ft->type = sext8(type);
    if (shape.len > KR_MAX_DIMS)
        return UNSUPPORTED(r, "tensor %zu '%s' has rank %zu; keyer handles at most %d dimensions",
                           idx, ft->label, shape.len, KR_MAX_DIMS);
    ft->rank = (int)shape.len;
    ft->elements = 1;
    for (int d = 0; d < ft->rank; d++) {
        int32_t dim = vec_i32(r, &shape, (size_t)d);
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
        TRY(table_at(r, quant, where, &q));
        TRY(get_vec(r, &q, 2, 4, where, "quantization.scale", &scale));
        TRY(get_vec(r, &q, 3, 8, where, "quantization.zero_point", &zero_point));
        if (scale.len || zero_point.len)
            return UNSUPPORTED(r, "tensor %zu '%s' is quantized; keyer runs float models", idx,
                               ft->label);
    }
    if (is_variable & 0xff)
        return UNSUPPORTED(r, "tensor %zu '%s' is a variable tensor, which keyer does not support",
                           idx, ft->label);
    if (sparsity)
        return UNSUPPORTED(r, "tensor %zu '%s' is sparse, which keyer does not support", idx,
                           ft->label);
    if (buffer >= c->buffers.len)
        return BAD(r, "tensor %zu '%s' uses buffer %llu, but the model has %zu buffers", idx,
                   ft->label, (unsigned long long)buffer, c->buffers.len);
    ft->buffer = (uint32_t)buffer;
    char bwhere[48];
    snprintf(bwhere, sizeof(bwhere), "buffer %u", ft->buffer);
    fb_table b;
    fb_vec data;
    uint64_t offset;
    TRY(vec_table(r, &c->buffers, ft->buffer, bwhere, &b));
    TRY(get_vec(r, &b, 0, 1, bwhere, "data", &data));
    TRY(get_scalar(r, &b, 1, 8, 0, bwhere, "offset", &offset));
    if (offset > 1)
        return UNSUPPORTED(r, "buffer %u (tensor %zu '%s') keeps its data outside the FlatBuffer "
                           "(offset %llu), which keyer does not support", ft->buffer, idx,
                           ft->label, (unsigned long long)offset);
    ft->data = data.data;
    ft->data_len = data.len;
    if (data.len) {
        size_t need = ft->elements * type_size(ft->type);
        if (need != data.len)
            return BAD(r, "tensor %zu '%s' needs %zu bytes but buffer %u holds %zu", idx,
                       ft->label, need, ft->buffer, data.len);
    }
    ft->parsed = 1;
    return KEYER_OK;
}

/* Records each DEQUANTIZE: a FLOAT16 constant in, a FLOAT32 tensor of the same shape out. */
static keyer_status link_dequantize(ctx *c)
{
    const reader *r = &c->r;
    for (size_t i = 0; i < c->n_ops; i++) {
        const opinfo *op = &c->ops[i];
        if (op->kind != KIND_DEQUANTIZE)
            continue;
        if (op->n_in != 1 || op->in[0] < 0)
            return BAD(r, "operator %zu (DEQUANTIZE) has %d inputs; it needs exactly 1", i,
                       op->n_in);
        TRY(parse_tensor(c, (size_t)op->in[0]));
        TRY(parse_tensor(c, (size_t)op->out[0]));
        const ftensor *src = &c->ft[op->in[0]];
        ftensor *dst = &c->ft[op->out[0]];
        if (!src->data_len)
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
        if (dst->data_len)
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

static keyer_status read_activation(const ctx *c, int v, size_t i, const char *op,
                                    kr_activation *out)
{
    switch (v) {
    case 0: *out = KR_ACT_NONE; return KEYER_OK;
    case 1: *out = KR_ACT_RELU; return KEYER_OK;
    case 2: *out = KR_ACT_RELU_N1_TO_1; return KEYER_OK;
    case 3: *out = KR_ACT_RELU6; return KEYER_OK;
    case 4:
    case 5:
        return UNSUPPORTED(&c->r, "operator %zu (%s): fused activation %s is not supported", i, op,
                           v == 4 ? "TANH" : "SIGN_BIT");
    default:
        return BAD(&c->r, "operator %zu (%s): fused activation %d is not a valid "
                   "ActivationFunctionType", i, op, v);
    }
}

static keyer_status read_padding(const ctx *c, int v, size_t i, const char *op, kr_padding *out)
{
    if (v != 0 && v != 1)
        return BAD(&c->r, "operator %zu (%s): padding %d is neither SAME (0) nor VALID (1)", i, op,
                   v);
    *out = v == 0 ? KR_PADDING_SAME : KR_PADDING_VALID;
    return KEYER_OK;
}

/* The operator's builtin options table if it has one of type @p expected. */
static keyer_status options_table(const ctx *c, size_t i, int expected, fb_table *t,
                                  int *present)
{
    const reader *r = &c->r;
    const opinfo *op = &c->ops[i];
    char where[48];
    snprintf(where, sizeof(where), "operator %zu", i);
    uint64_t tag;
    size_t pos;
    *present = 0;
    TRY(get_scalar(r, &op->t, 3, 1, 0, where, "builtin_options_type", &tag));
    if (tag == 0)
        return KEYER_OK;
    if (tag != (uint64_t)expected)
        return BAD(r, "operator %zu (%s) carries builtin options of type %d, but %s takes type %d",
                   i, kind_name(op->kind), (int)tag, kind_name(op->kind), expected);
    TRY(get_ref(r, &op->t, 4, where, "builtin_options", &pos));
    if (!pos)
        return KEYER_OK;
    TRY(table_at(r, pos, where, t));
    *present = 1;
    return KEYER_OK;
}

/* Option field @p id of @p size bytes (1 or 4), sign-extended, or @p def. */
static keyer_status opt_int(const ctx *c, const fb_table *t, int present, int id, size_t size,
                            int def, size_t i, const char *field, int *v)
{
    if (!present) {
        *v = def;
        return KEYER_OK;
    }
    char where[48];
    snprintf(where, sizeof(where), "operator %zu options", i);
    uint64_t raw;
    TRY(get_scalar(&c->r, t, id, size, (uint64_t)(uint32_t)def, where, field, &raw));
    *v = size == 1 ? sext8(raw) : to_i32((uint32_t)raw);
    return KEYER_OK;
}

static keyer_status read_window_options(const ctx *c, size_t i, kr_node *node)
{
    const char *op = kind_name(node->op);
    kr_window_params *w = &node->p.window;
    fb_table t;
    int present, padding, act, dm;
    w->dilation_h = w->dilation_w = 1;
    switch (node->op) {
    case KR_OP_CONV_2D:
        TRY(options_table(c, i, OPT_CONV_2D, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "padding", &padding));
        TRY(opt_int(c, &t, present, 1, 4, 0, i, "stride_w", &w->stride_w));
        TRY(opt_int(c, &t, present, 2, 4, 0, i, "stride_h", &w->stride_h));
        TRY(opt_int(c, &t, present, 3, 1, 0, i, "fused_activation_function", &act));
        TRY(opt_int(c, &t, present, 4, 4, 1, i, "dilation_w_factor", &w->dilation_w));
        TRY(opt_int(c, &t, present, 5, 4, 1, i, "dilation_h_factor", &w->dilation_h));
        break;
    case KR_OP_DEPTHWISE_CONV_2D:
        TRY(options_table(c, i, OPT_DEPTHWISE_CONV_2D, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "padding", &padding));
        TRY(opt_int(c, &t, present, 1, 4, 0, i, "stride_w", &w->stride_w));
        TRY(opt_int(c, &t, present, 2, 4, 0, i, "stride_h", &w->stride_h));
        TRY(opt_int(c, &t, present, 3, 4, 0, i, "depth_multiplier", &dm));
        TRY(opt_int(c, &t, present, 4, 1, 0, i, "fused_activation_function", &act));
        TRY(opt_int(c, &t, present, 5, 4, 1, i, "dilation_w_factor", &w->dilation_w));
        TRY(opt_int(c, &t, present, 6, 4, 1, i, "dilation_h_factor", &w->dilation_h));
        /* Redundant with the shapes (schema comment); validate derives it from them. */
        w->depth_multiplier = dm;
        break;
    default: /* pools */
        TRY(options_table(c, i, OPT_POOL_2D, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "padding", &padding));
        TRY(opt_int(c, &t, present, 1, 4, 0, i, "stride_w", &w->stride_w));
        TRY(opt_int(c, &t, present, 2, 4, 0, i, "stride_h", &w->stride_h));
        TRY(opt_int(c, &t, present, 3, 4, 0, i, "filter_width", &w->kernel_w));
        TRY(opt_int(c, &t, present, 4, 4, 0, i, "filter_height", &w->kernel_h));
        TRY(opt_int(c, &t, present, 5, 1, 0, i, "fused_activation_function", &act));
        break;
    }
    TRY(read_padding(c, padding, i, op, &w->padding));
    return read_activation(c, act, i, op, &node->activation);
}

/* MediaPipe's Convolution2DTransposeBias: custom_options is a raw TfLiteTransposeConvParams
 * prefix (int32 padding with 1 = SAME, 2 = VALID; int32 stride_w; int32 stride_h). */
static keyer_status read_transpose_conv_options(const ctx *c, size_t i, kr_node *node)
{
    const reader *r = &c->r;
    char where[48];
    snprintf(where, sizeof(where), "operator %zu", i);
    fb_vec v;
    TRY(get_vec(r, &c->ops[i].t, 5, 1, where, "custom_options", &v));
    if (v.len < 12)
        return BAD(r, "operator %zu (Convolution2DTransposeBias): custom options are %zu bytes; "
                   "it needs 12 (padding, stride_w, stride_h)", i, v.len);
    int32_t padding = to_i32(rd_u32(r, v.data));
    kr_window_params *w = &node->p.window;
    if (padding != 1 && padding != 2)
        return BAD(r, "operator %zu (Convolution2DTransposeBias): padding %d is neither SAME (1) "
                   "nor VALID (2)", i, (int)padding);
    w->padding = padding == 1 ? KR_PADDING_SAME : KR_PADDING_VALID;
    w->stride_w = to_i32(rd_u32(r, v.data + 4));
    w->stride_h = to_i32(rd_u32(r, v.data + 8));
    w->dilation_h = w->dilation_w = 1;
    return KEYER_OK;
}

/* Resolves a RESHAPE new_shape (one -1 allowed) and compares it with the output tensor. */
static keyer_status check_new_shape(const ctx *c, size_t i, const fb_vec *shape,
                                    const ftensor *in, const ftensor *out)
{
    const reader *r = &c->r;
    if (shape->len != (size_t)out->rank)
        return BAD(r, "operator %zu (RESHAPE): new_shape has %zu entries but output tensor '%s' "
                   "has rank %d", i, shape->len, out->label, out->rank);
    size_t known = 1;
    int infer = -1;
    for (size_t d = 0; d < shape->len; d++) {
        int32_t v = vec_i32(r, shape, d);
        if (v == -1 && infer < 0) {
            infer = (int)d;
        } else if (v <= 0 || (size_t)v > KR_TFLITE_MAX_ELEMENTS / known) {
            return BAD(r, "operator %zu (RESHAPE): new_shape entry %zu is %d", i, d, (int)v);
        } else {
            known *= (size_t)v;
        }
    }
    for (size_t d = 0; d < shape->len; d++) {
        int32_t v = vec_i32(r, shape, d);
        size_t want = (int)d == infer ? (known ? in->elements / known : 0) : (size_t)v;
        if ((int)d == infer && known * want != in->elements)
            return BAD(r, "operator %zu (RESHAPE): new_shape cannot hold the input's %zu elements",
                       i, in->elements);
        if (want != (size_t)out->dims[d])
            return BAD(r, "operator %zu (RESHAPE): new_shape entry %zu gives %zu but output "
                       "tensor '%s' has %d", i, d, want, out->label, out->dims[d]);
    }
    return KEYER_OK;
}

static keyer_status read_node_options(const ctx *c, size_t i, kr_node *node)
{
    const reader *r = &c->r;
    const opinfo *op = &c->ops[i];
    fb_table t;
    int present, v;
    switch (node->op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
        return read_window_options(c, i, node);
    case KR_OP_TRANSPOSE_CONV_BIAS:
        return read_transpose_conv_options(c, i, node);
    case KR_OP_ADD:
    case KR_OP_MUL:
        TRY(options_table(c, i, node->op == KR_OP_ADD ? OPT_ADD : OPT_MUL, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "fused_activation_function", &v));
        return read_activation(c, v, i, kind_name(node->op), &node->activation);
    case KR_OP_CONCATENATION:
        TRY(options_table(c, i, OPT_CONCATENATION, &t, &present));
        TRY(opt_int(c, &t, present, 0, 4, 0, i, "axis", &node->p.concat.axis));
        TRY(opt_int(c, &t, present, 1, 1, 0, i, "fused_activation_function", &v));
        TRY(read_activation(c, v, i, "CONCATENATION", &node->activation));
        if (node->activation != KR_ACT_NONE)
            return UNSUPPORTED(r, "operator %zu (CONCATENATION) has a fused activation, which "
                               "keyer does not support", i);
        return KEYER_OK;
    case KR_OP_RESIZE_BILINEAR:
        TRY(options_table(c, i, OPT_RESIZE_BILINEAR, &t, &present));
        TRY(opt_int(c, &t, present, 2, 1, 0, i, "align_corners", &v));
        node->p.resize.align_corners = v != 0;
        TRY(opt_int(c, &t, present, 3, 1, 0, i, "half_pixel_centers", &v));
        node->p.resize.half_pixel_centers = v != 0;
        return KEYER_OK;
    case KR_OP_MEAN:
        TRY(options_table(c, i, OPT_REDUCER, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "keep_dims", &v));
        node->p.mean.keep_dims = v != 0;
        return KEYER_OK;
    case KR_OP_PAD:
        return options_table(c, i, OPT_PAD, &t, &present);
    case KR_OP_RESHAPE:
        TRY(options_table(c, i, OPT_RESHAPE, &t, &present));
        if (present && (op->n_in < 2 || op->in[1] < 0) && op->n_in >= 1 && op->in[0] >= 0) {
            char where[48];
            snprintf(where, sizeof(where), "operator %zu options", i);
            fb_vec shape;
            TRY(get_vec(r, &t, 0, 4, where, "new_shape", &shape));
            if (shape.data)
                return check_new_shape(c, i, &shape, &c->ft[op->in[0]], &c->ft[op->out[0]]);
        }
        return KEYER_OK;
    default:
        return KEYER_OK; /* RELU, RELU6, HARD_SWISH, LOGISTIC, PRELU: no options */
    }
}

/* Copies constant @p ft into @p dst as float32 (FLOAT16 converted) or int32. */
static void copy_constant(const ctx *c, const ftensor *ft, void *dst)
{
    const reader *r = &c->r;
    uint8_t *out = dst;
    if (ft->deq_source >= 0) {
        const ftensor *src = &c->ft[ft->deq_source];
        for (size_t e = 0; e < src->elements; e++) {
            float f = kr_half_to_float(rd_u16(r, src->data + 2 * e));
            memcpy(out + 4 * e, &f, 4);
        }
    } else {
        for (size_t e = 0; e < ft->elements; e++) {
            uint32_t u = rd_u32(r, ft->data + 4 * e);
            memcpy(out + 4 * e, &u, 4);
        }
    }
}

static int is_const(const ftensor *ft)
{
    return ft->deq_source >= 0 || ft->data_len > 0;
}

static keyer_status build_graph(ctx *c, const fb_table *model, kr_graph *g)
{
    const reader *r = &c->r;

    /* Tensors read or written by kept nodes, and the graph's inputs and outputs. */
    size_t n_nodes = 0;
    for (size_t i = 0; i < c->n_ops; i++) {
        const opinfo *op = &c->ops[i];
        if (op->kind == KIND_DEQUANTIZE)
            continue;
        n_nodes++;
        for (int k = 0; k < op->n_in; k++)
            if (op->in[k] >= 0)
                c->ft[op->in[k]].used = 1;
        c->ft[op->out[0]].used = 1;
    }
    for (size_t k = 0; k < c->g_inputs.len; k++)
        c->ft[vec_i32(r, &c->g_inputs, k)].used = 1;
    for (size_t k = 0; k < c->g_outputs.len; k++)
        c->ft[vec_i32(r, &c->g_outputs, k)].used = 1;

    /* Graph inputs first, for a precise message. */
    for (size_t k = 0; k < c->g_inputs.len; k++) {
        int t = vec_i32(r, &c->g_inputs, k);
        TRY(parse_tensor(c, (size_t)t));
        const ftensor *ft = &c->ft[t];
        if (is_const(ft))
            return BAD(r, "graph input %zu (tensor %d '%s') is a constant", k, t, ft->label);
        if (ft->type != TFL_FLOAT32)
            return UNSUPPORTED(r, "graph input %zu (tensor %d '%s') is %s; keyer's model inputs "
                               "must be FLOAT32", k, t, ft->label, type_name(ft->type));
    }

    /* Parse and number the kept tensors; size the constant block. */
    size_t n_used = 0, n_const = 0, total = 0;
    for (size_t t = 0; t < c->n_tensors; t++) {
        ftensor *ft = &c->ft[t];
        if (!ft->used)
            continue;
        TRY(parse_tensor(c, t));
        ft->index = (int)n_used++;
        if (ft->deq_source >= 0 && ft->data_len)
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
        return fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate the graph (%zu tensors, %zu "
                    "nodes, %zu constant bytes)", n_used, n_nodes, total);
    /* Counts only once the arrays exist, so that kr_graph_destroy() can always walk them. */
    g->n_tensors = (int)n_used;
    g->n_nodes = (int)n_nodes;
    g->n_inputs = (int)c->g_inputs.len;
    g->n_outputs = (int)c->g_outputs.len;

    size_t offset = 0;
    for (size_t t = 0; t < c->n_tensors; t++) {
        const ftensor *ft = &c->ft[t];
        if (!ft->used)
            continue;
        kr_tensor *kt = &g->tensors[ft->index];
        kt->view_of = -1;
        kt->producer = kt->last_consumer = kt->graph_input = kt->graph_output = -1;
        kt->name = dup_bytes(ft->name, ft->name_len, MAX_NAME_BYTES);
        if (!kt->name)
            return fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate a tensor name");
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

    size_t n = 0;
    for (size_t i = 0; i < c->n_ops; i++) {
        const opinfo *op = &c->ops[i];
        if (op->kind == KIND_DEQUANTIZE)
            continue;
        kr_node *node = &g->nodes[n++];
        node->op = (kr_op)op->kind;
        node->source_index = (int)i;
        node->n_inputs = op->n_in;
        node->n_outputs = op->n_out;
        node->activation = KR_ACT_NONE;
        for (int k = 0; k < op->n_in; k++)
            node->inputs[k] = op->in[k] >= 0 ? c->ft[op->in[k]].index : -1;
        node->outputs[0] = c->ft[op->out[0]].index;
        TRY(read_node_options(c, i, node));
    }
    for (size_t k = 0; k < c->g_inputs.len; k++)
        g->inputs[k] = c->ft[vec_i32(r, &c->g_inputs, k)].index;
    for (size_t k = 0; k < c->g_outputs.len; k++)
        g->outputs[k] = c->ft[vec_i32(r, &c->g_outputs, k)].index;

    const char *desc;
    size_t desc_len;
    TRY(get_str(r, model, 3, "model", "description", &desc, &desc_len));
    if (desc) {
        g->description = dup_bytes(desc, desc_len, MAX_DESCRIPTION_BYTES);
        if (!g->description)
            return fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate the model description");
    }
    return KEYER_OK;
}

static keyer_status check_io(const ctx *c, const fb_vec *v, const char *what)
{
    const reader *r = &c->r;
    if (!v->len)
        return BAD(r, "subgraph 0 has no %ss", what);
    if (v->len > 4096)
        return UNSUPPORTED(r, "subgraph 0 has %zu %ss; keyer handles at most 4096", v->len, what);
    for (size_t k = 0; k < v->len; k++) {
        int32_t t = vec_i32(r, v, k);
        if (t < 0 || (size_t)t >= c->n_tensors)
            return BAD(r, "graph %s %zu is tensor %d, but the subgraph has %zu tensors", what, k,
                       (int)t, c->n_tensors);
    }
    return KEYER_OK;
}

static keyer_status read_model(ctx *c, kr_graph *g)
{
    const reader *r = &c->r;
    if (r->n < 8)
        return BAD(r, "the file is %zu bytes, too small for a TFLite model", r->n);
    if (memcmp(r->p + 4, "TFL3", 4) != 0)
        return BAD(r, "not a TFLite model: bytes 4-7 are not the file identifier TFL3");
    fb_table model, sub;
    TRY(table_at(r, rd_u32(r, 0), "model", &model));
    uint64_t version;
    TRY(get_scalar(r, &model, 0, 4, 0, "model", "version", &version));
    if (version != TFL_SCHEMA_VERSION)
        return UNSUPPORTED(r, "schema version %llu; keyer reads version %u",
                           (unsigned long long)version, TFL_SCHEMA_VERSION);
    TRY(read_opcodes(c, &model));
    fb_vec subgraphs;
    TRY(get_vec(r, &model, 2, 4, "model", "subgraphs", &subgraphs));
    if (subgraphs.len == 0)
        return BAD(r, "the model has no subgraph");
    if (subgraphs.len > 1)
        return UNSUPPORTED(r, "the model has %zu subgraphs; keyer runs single-subgraph models",
                           subgraphs.len);
    TRY(get_vec(r, &model, 4, 4, "model", "buffers", &c->buffers));
    TRY(vec_table(r, &subgraphs, 0, "subgraph 0", &sub));
    TRY(get_vec(r, &sub, 0, 4, "subgraph 0", "tensors", &c->tensors));
    TRY(get_vec(r, &sub, 1, 4, "subgraph 0", "inputs", &c->g_inputs));
    TRY(get_vec(r, &sub, 2, 4, "subgraph 0", "outputs", &c->g_outputs));
    TRY(get_vec(r, &sub, 3, 4, "subgraph 0", "operators", &c->operators));
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
        return fail(r, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate %zu operators and %zu tensors",
                    c->n_ops, c->n_tensors);
    for (size_t t = 0; t < c->n_tensors; t++) {
        c->ft[t].deq_source = -1;
        c->ft[t].deq_op = -1;
        c->ft[t].index = -1;
    }
    TRY(read_operators(c));
    TRY(check_io(c, &c->g_inputs, "input"));
    TRY(check_io(c, &c->g_outputs, "output"));
    TRY(link_dequantize(c));
    return build_graph(c, &model, g);
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
    ctx c = {.r = {.p = data, .n = size, .name = name, .err = err}};
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
    free(c.codes);
    free(c.ops);
    free(c.ft);
    *out = g;
    return KEYER_OK;

fail:
    free(c.codes);
    free(c.ops);
    free(c.ft);
    kr_graph_destroy(&g);
    return st;
}
