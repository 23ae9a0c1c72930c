/*
 * Reading an ONNX model file (the protobuf ModelProto, parsed with Debian's protobuf-c and the
 * generated code in proto/) into a checked, read-only form the importer (import.h) turns into
 * keyer's graph. Everything in a model file is untrusted: kr_onnx_file_open checks what it
 * returns, so the importer may rely on the guarantees below. Internal to keyer (prefix kr_).
 *
 *   keyer_error err = {0};
 *   kr_onnx_file *f = NULL;
 *   if (kr_onnx_file_open("model.onnx", &f, &err) != KEYER_OK)
 *       return err.status;                        // err.message names the file and the fault
 *   const Onnx__GraphProto *g = kr_onnx_file_graph(f);
 *   for (size_t i = 0; i < g->n_node; i++) {
 *       int64_t group;
 *       if (kr_onnx_attr_int(f, g->node[i], "group", 1, &group, &err) != KEYER_OK) ...
 *       const kr_onnx_tensor *w = kr_onnx_file_initializer(f, g->node[i]->input[1]); ...
 *   }
 *   kr_onnx_file_destroy(&f);
 *
 * Guarantees after a successful open
 *  - The model has a graph; the default-domain ("" or "ai.onnx") opset is within 7..21 and no
 *    node uses another domain (such a node is refused, naming it).
 *  - Every initializer's and Constant node's tensor is decoded once (raw_data, the typed
 *    repeated fields, or external data) into little-endian packed elements whose count equals
 *    the product of its dims; dims are 0 or more and the element count and byte size do not
 *    overflow (each tensor at most KR_ONNX_MAX_TENSOR_BYTES).
 *  - External data ("location" relative to the model's folder) is read at open; a location
 *    that is absolute or leaves that folder (.., symbolic links resolving outside) is refused,
 *    as is a missing or short file.
 *  - Every node input names a graph input, an initializer or an earlier node's output (so the
 *    nodes are in topological order: a cycle or an unproduced tensor is an error naming the
 *    node), every value is produced once, and names are NUL-terminated strings.
 *  - Every node has an operator type; its attributes have names (no two alike) and types;
 *    STRING attributes hold no NUL byte; TENSOR attributes are decoded like initializers.
 *  - Protobuf structure: nesting is bounded, and the parsed model takes at most 4 times the
 *    file's size plus 256 MiB of memory (a small hostile file cannot make the parse allocate
 *    without bound).
 *  - Decoded tensor data is aligned for its element type. The unpacked model is never changed
 *    after open: every function below only reads, so threads may share an opened file.
 *  - Not checked: subgraphs (If/Loop bodies, which keyer does not run) beyond their protobuf
 *    structure; their Constant nodes and tensor attributes are not decoded.
 *
 * Errors (status + keyer_error, message naming the file and what is wrong): IO (the file or
 * an external data file missing or unreadable; keyer_status has no separate "not found"),
 * BAD_DATA (malformed protobuf, inconsistent tensor, bad graph),
 * UNSUPPORTED (opset, domain, tensor data type), OUT_OF_MEMORY.
 */
#ifndef KEYER_NN_ONNX_FILE_H
#define KEYER_NN_ONNX_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/status.h"
#include "nn/onnx/proto/onnx.pb-c.h"

#define KR_ONNX_MAX_RANK 8
#define KR_ONNX_MAX_TENSOR_BYTES ((size_t)1 << 31)
/* Largest model file read (protobuf's own limit is 2 GiB; bigger models use external data). */
#define KR_ONNX_MAX_FILE_BYTES ((size_t)1 << 31)

typedef struct kr_onnx_file kr_onnx_file;

/* A decoded tensor (initializer, Constant node value or tensor attribute). */
typedef struct kr_onnx_tensor {
    const char *name;  /* "" when the tensor has none */
    int32_t data_type; /* ONNX__TENSOR_PROTO__DATA_TYPE__* (FLOAT, FLOAT16, DOUBLE, INT64,
                        * INT32, INT8, UINT8, BOOL, ...) */
    int rank;          /* 0..KR_ONNX_MAX_RANK */
    int64_t dims[KR_ONNX_MAX_RANK];
    size_t count;      /* elements: product of dims (1 for rank 0) */
    size_t elem_size;  /* bytes per element */
    const void *data;  /* count * elem_size bytes, owned by the kr_onnx_file; NULL when count 0 */
} kr_onnx_tensor;

/*
 * Opens and checks the model at @p path (see the guarantees above); external data is read
 * from @p path's folder and messages start with @p path. On success *out owns the parsed model
 * and every decoded tensor; free it with kr_onnx_file_destroy. On failure *out is NULL. Files
 * over KR_ONNX_MAX_FILE_BYTES are UNSUPPORTED.
 */
keyer_status kr_onnx_file_open(const char *path, kr_onnx_file **out, keyer_error *err);

/*
 * Like kr_onnx_file_open on @p size bytes at @p data (copied; the caller keeps its buffer).
 * @p name is used in messages. @p dir is the folder external data is read from; NULL refuses
 * every external reference (the fuzz target uses that).
 */
keyer_status kr_onnx_file_open_memory(const void *data, size_t size, const char *name,
                                      const char *dir, kr_onnx_file **out, keyer_error *err);

/* The parsed model (owned by @p f, valid until destroy). */
const Onnx__ModelProto *kr_onnx_file_model(const kr_onnx_file *f);

/* The model's graph (never NULL after a successful open). */
const Onnx__GraphProto *kr_onnx_file_graph(const kr_onnx_file *f);

/* The default-domain opset version (7..21). */
int kr_onnx_file_opset(const kr_onnx_file *f);

/* The name given at open, for messages. */
const char *kr_onnx_file_name(const kr_onnx_file *f);

/* The decoded initializer called @p name, or NULL if there is none. */
const kr_onnx_tensor *kr_onnx_file_initializer(const kr_onnx_file *f, const char *name);

/* The decoded value of a Constant node (its "value" or value_* attribute as a tensor), or NULL
 * if @p node is not a Constant node of this file's graph. */
const kr_onnx_tensor *kr_onnx_file_constant(const kr_onnx_file *f, const Onnx__NodeProto *node);

/* Index of the node whose output is @p name, -1 for graph inputs and initializers, -2 when
 * nothing produces it. */
int kr_onnx_file_producer(const kr_onnx_file *f, const char *name);

/*
 * Attribute access for the importer. Each looks up @p attr_name on @p node; when absent it
 * stores @p def (or, for lists, count 0) and returns KEYER_OK. Present with the wrong type:
 * BAD_DATA naming the node, operator and attribute. Strings are NUL-terminated copies owned by
 * @p f; lists point into the parsed model, and an empty or absent list is count 0 with a
 * non-NULL pointer (so that memcpy(dst, list, 0) is defined).
 */
keyer_status kr_onnx_attr_int(const kr_onnx_file *f, const Onnx__NodeProto *node,
                              const char *attr_name, int64_t def, int64_t *out, keyer_error *err);
keyer_status kr_onnx_attr_float(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                const char *attr_name, float def, float *out, keyer_error *err);
keyer_status kr_onnx_attr_string(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                 const char *attr_name, const char *def, const char **out,
                                 keyer_error *err);
keyer_status kr_onnx_attr_ints(const kr_onnx_file *f, const Onnx__NodeProto *node,
                               const char *attr_name, const int64_t **out, size_t *count,
                               keyer_error *err);
keyer_status kr_onnx_attr_floats(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                 const char *attr_name, const float **out, size_t *count,
                                 keyer_error *err);
/* A tensor attribute, decoded at open (NULL when absent). */
keyer_status kr_onnx_attr_tensor(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                 const char *attr_name, const kr_onnx_tensor **out,
                                 keyer_error *err);

/* Frees everything @p *f owns; sets *f to NULL. NULL accepted. */
void kr_onnx_file_destroy(kr_onnx_file **f);

#endif /* KEYER_NN_ONNX_FILE_H */
