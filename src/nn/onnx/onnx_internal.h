/*
 * Private to the ONNX file reader (onnx_file.c, onnx_tensor.c, onnx_attr.c): tensor decoding
 * and the per-attribute data onnx_file.c prepares at open for the attribute getters.
 * Calls go one way: onnx_attr.c -> onnx_file.c -> onnx_tensor.c, onnx_wire.c.
 */
#ifndef KEYER_NN_ONNX_INTERNAL_H
#define KEYER_NN_ONNX_INTERNAL_H

#include <stddef.h>

#include "nn/onnx/onnx_file.h"

/*
 * Decodes @p tp into @p out (see the guarantees in onnx_file.h). @p what names the tensor in
 * messages ("initializer 'w'", "node 'Constant_3' (Constant): attribute 'value'"); @p file
 * names the model. External data is read from @p dir (NULL refuses it). When the decoded
 * elements needed a buffer of their own, *owned receives it (the caller frees it with free()
 * after the tensor's last use); otherwise *owned is NULL and out->data points into @p tp,
 * which must outlive @p out. out->name points to tp->name (or "").
 * Errors: BAD_DATA (inconsistent or out-of-range data, bad external reference), UNSUPPORTED
 * (data type, rank, external data without a folder), IO (external file missing or
 * unreadable), OUT_OF_MEMORY; the message starts with "@p file: @p what".
 */
keyer_status kr_onnx_tensor_decode(const Onnx__TensorProto *tp, const char *file,
                                   const char *what, const char *dir, kr_onnx_tensor *out,
                                   void **owned, keyer_error *err);

/*
 * Walks the protobuf wire format of @p size bytes at @p data as an ONNX ModelProto before
 * protobuf-c parses it: BAD_DATA (naming @p name, the message, field and byte offset) on a
 * truncated field, a wrong wire type for a known field, groups, or messages nested deeper
 * than protobuf-c's recursion should go. KEYER_OK otherwise (protobuf-c still checks the rest).
 */
keyer_status kr_onnx_wire_check(const void *data, size_t size, const char *name,
                                keyer_error *err);

/* Bytes per element of ONNX data type @p data_type; 0 for types keyer does not decode
 * (STRING, COMPLEX64, COMPLEX128, UNDEFINED and unknown values). */
size_t kr_onnx_elem_size(int32_t data_type);

/* Name of ONNX data type @p data_type ("FLOAT", "INT64", ...; "unknown" otherwise). */
const char *kr_onnx_type_name(int32_t data_type);

/* Name of attribute type @p type ("INT", "FLOATS", ...; "UNDEFINED" otherwise). */
const char *kr_onnx_attr_type_name(int type);

/*
 * Writes "node 'NAME' (OP)" or, for a node without a name, "node #INDEX (OP)" into @p buf
 * (@p size bytes, truncated, always NUL-terminated). Returns @p buf.
 */
const char *kr_onnx_node_label(const Onnx__NodeProto *node, int index, char *buf, size_t size);

/* Index of @p node in the file's graph, or -1 when it is not one of its nodes. */
int kr_onnx_file_node_index(const kr_onnx_file *f, const Onnx__NodeProto *node);

/* The data prepared at open for attribute @p attr (0 <= attr < n_attribute) of node @p node
 * (a valid index): its decoded tensor (TENSOR attributes) or its NUL-terminated string
 * (STRING attributes); NULL for other attributes. */
const kr_onnx_tensor *kr_onnx_file_attr_tensor_at(const kr_onnx_file *f, int node, size_t attr);
const char *kr_onnx_file_attr_string_at(const kr_onnx_file *f, int node, size_t attr);

#endif /* KEYER_NN_ONNX_INTERNAL_H */
