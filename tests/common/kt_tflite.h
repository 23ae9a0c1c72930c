/*
 * A small TFLite FlatBuffer writer for tests: assembles tiny models (valid or deliberately
 * broken) from plain descriptions, so reader tests do not depend on external tools.
 *
 * Layout: objects are written front to back, each parent before its children, so every
 * uoffset points forward, as FlatBuffers requires; vtables sit right before their tables.
 * Each operator gets its own OperatorCode entry (opcode_index = operator index).
 */
#ifndef KEYER_KT_TFLITE_H
#define KEYER_KT_TFLITE_H

#include <stddef.h>
#include <stdint.h>

#define KT_MAX_FIELDS 12

/* One scalar field of a table; size 0 = absent (schema default applies). */
typedef struct kt_field {
    int size;       /* 1, 2, 4 or 8 bytes; 0: absent */
    uint64_t value; /* little-endian bits */
} kt_field;

/* One level of a sparse tensor's traversal (TFLite DimensionMetadata). */
typedef struct kt_dim_meta {
    int format;     /* 0 DENSE, 1 SPARSE_CSR */
    int dense_size;
    int seg_type;   /* SparseIndexVector: 1 int32, 2 uint16, 3 uint8 (CSR only) */
    int n_seg;
    const int *seg;
    int idx_type;
    int n_idx;
    const int *idx;
} kt_dim_meta;

/* TFLite SparsityParameters. */
typedef struct kt_sparsity {
    int n_trav;
    int trav[12];
    int n_block;
    int block_map[6];
    int n_dims;
    kt_dim_meta dims[12];
} kt_sparsity;

typedef struct kt_tensor {
    const char *name; /* NULL: no name field */
    int type;         /* TensorType: 0 FLOAT32, 1 FLOAT16, 2 INT32 */
    int rank;
    int dims[6];
    int buffer; /* index into kt_model.buffers */
} kt_tensor;

typedef struct kt_op {
    int code;            /* builtin code (32 = CUSTOM) */
    const char *custom;  /* custom_code for CUSTOM */
    int deprecated_only; /* write only deprecated_builtin_code (as old files do) */
    int n_in, n_out;
    int in[10], out[3];
    int opt_type;                /* BuiltinOptions union tag; 0: none */
    int n_opt;                   /* fields of the options table (ids 0..n_opt-1) */
    kt_field opt[KT_MAX_FIELDS];
    const uint8_t *custom_options; /* raw bytes, or NULL */
    size_t custom_options_len;
} kt_op;

typedef struct kt_buffer {
    const void *data; /* NULL: empty buffer (no data field) */
    size_t size;
} kt_buffer;

typedef struct kt_model {
    uint32_t version; /* 0: write 3 */
    int n_tensors, n_ops, n_buffers, n_inputs, n_outputs;
    const kt_tensor *tensors;
    const kt_op *ops;
    const kt_buffer *buffers;
    const kt_sparsity *const *sparsity; /* NULL, or one per tensor (NULL: a dense tensor) */
    int inputs[8], outputs[8];
    const char *description;
} kt_model;

/* Serialises @p m; returns malloc'd bytes (free()) and their count in *size, or NULL on OOM. */
uint8_t *kt_tflite_build(const kt_model *m, size_t *size);

/*
 * Unchecked navigation of a well-formed file (tests use it to find the bytes to break in real
 * models). Positions are byte offsets; 0 means "absent".
 */
uint32_t kt_nav_u32(const uint8_t *d, size_t pos);
void kt_nav_set_u32(uint8_t *d, size_t pos, uint32_t v);
/* The Model table. */
size_t kt_nav_root(const uint8_t *d);
/* Position of field @p id of @p table, or 0 when absent. */
size_t kt_nav_field(const uint8_t *d, size_t table, int id);
/* Position of the length word of vector field @p id, or 0 when absent. */
size_t kt_nav_vec(const uint8_t *d, size_t table, int id);
/* Table element @p i of the vector whose length word is at @p vec. */
size_t kt_nav_elem(const uint8_t *d, size_t vec, uint32_t i);
/* Subgraph 0 of the model. */
size_t kt_nav_subgraph0(const uint8_t *d);

/* Shorthands for option fields. */
static inline kt_field kt_i8(int v) { kt_field f = {1, (uint64_t)(uint8_t)(int8_t)v}; return f; }
static inline kt_field kt_i32(int32_t v) { kt_field f = {4, (uint64_t)(uint32_t)v}; return f; }
static inline kt_field kt_absent(void) { kt_field f = {0, 0}; return f; }

#endif
