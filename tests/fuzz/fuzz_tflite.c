/*
 * libFuzzer target for the TFLite reader (built with -DKEYER_FUZZ=ON and CC=clang):
 *   fuzz_tflite -max_total_time=60 tests/fuzz/corpus/tflite
 * Every input must either load (and then describe itself consistently) or fail with a non-OK
 * status and a message that names the file; crashes, leaks and undefined behaviour are findings.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "nn/graph.h"
#include "nn/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_memory(data, size, "fuzz.tflite", &m, &err);
    if (st != KEYER_OK) {
        if (m || strncmp(err.message, "fuzz.tflite: ", 13) != 0 || err.status != st)
            abort();
        return 0;
    }
    /* Touch what a runtime would read: every tensor referenced by every node. */
    const kr_graph *g = kr_model_graph(m);
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] < -1 || n->inputs[k] >= g->n_tensors)
                abort();
            if (n->inputs[k] >= 0 && g->tensors[n->inputs[k]].data) {
                const kr_tensor *t = &g->tensors[n->inputs[k]];
                volatile uint8_t sink = 0;
                const uint8_t *p = t->data;
                size_t bytes = kr_tensor_bytes(t, 1);
                sink ^= p[0];
                sink ^= p[bytes - 1];
                (void)sink;
            }
        }
        if (g->tensors[n->outputs[0]].producer != i)
            abort();
    }
    keyer_tensor_info info;
    for (int i = 0; i < keyer_model_input_count(m); i++)
        if (keyer_model_input_info(m, i, &info, &err) != KEYER_OK || !info.name)
            abort();
    for (int i = 0; i < keyer_model_output_count(m); i++)
        if (keyer_model_output_info(m, i, &info, &err) != KEYER_OK || !info.name)
            abort();
    (void)keyer_model_macs(m);
    keyer_model_destroy(&m);
    return 0;
}
