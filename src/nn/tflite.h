/*
 * TFLite model reader: turns the bytes of a .tflite FlatBuffer (untrusted) into a validated
 * kr_graph. Internal to keyer (prefix kr_); the public entry points are keyer_model_load_*().
 */
#ifndef KEYER_NN_TFLITE_H
#define KEYER_NN_TFLITE_H

#include <stddef.h>

#include "keyer/status.h"
#include "nn/graph.h"

/* Largest model file keyer reads (bytes). */
#define KR_TFLITE_MAX_FILE_BYTES ((size_t)1 << 30)
/* Largest number of elements of one tensor (activations and constants). */
#define KR_TFLITE_MAX_ELEMENTS ((size_t)1 << 28)

/*
 * Reads subgraph 0 of the TFLite model in @p data (@p size bytes; any alignment) into a new
 * graph: tensors referenced by the kept operators, nodes in file order with DEQUANTIZE folded
 * into float32 constants, every constant copied into g->const_storage. Then calls
 * kr_graph_validate(), so the graph returned is checked and linked. @p name labels messages
 * ("<name>: ..."); NULL means "model". Nothing in @p data is referenced after the call.
 * On success *out owns the graph (free with kr_graph_destroy); on failure *out is NULL.
 * Errors: BAD_DATA (malformed file: the message names what is wrong and where),
 * UNSUPPORTED (operator, tensor type, feature keyer lacks: names the operator and its index),
 * INVALID_ARGUMENT (NULL @p out, or NULL @p data with a non-zero size), OUT_OF_MEMORY.
 */
keyer_status kr_tflite_read(const void *data, size_t size, const char *name, kr_graph **out,
                            keyer_error *err);

/* Name of a TFLite BuiltinOperator code ("CONV_2D"), or NULL for a code keyer does not know. */
const char *kr_tflite_builtin_name(int code);

#endif /* KEYER_NN_TFLITE_H */
