/*
 * The loaded model behind the public keyer_model handle (include/keyer/nn.h): the validated
 * graph (from tflite.c or the ONNX importer, onnx/import.h) plus figures computed once at load. Internal to keyer; the runtime reaches the graph
 * through kr_model_graph().
 */
#ifndef KEYER_NN_MODEL_H
#define KEYER_NN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/nn.h"
#include "nn/graph.h"
#include "nn/onnx/import.h"

struct keyer_model {
    kr_graph *graph;     /* owned; validated and linked; never modified after load */
    kr_onnx_layout *layouts; /* ONNX: the file layout of the inputs, then the outputs (owned);
                              * NULL for TFLite (the file's layout is the graph's) */
    uint64_t macs;       /* kr_graph_macs() at batch 1 */
    size_t weight_bytes; /* bytes of FLOAT32 constants (weights and biases) */
};

/* The model's graph (immutable; owned by the model). NULL for a NULL model. */
const kr_graph *kr_model_graph(const keyer_model *m);

#endif /* KEYER_NN_MODEL_H */
