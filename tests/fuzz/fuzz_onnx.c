/*
 * libFuzzer target for the ONNX file reader and the import onto keyer's graph (built with
 * -DKEYER_FUZZ=ON and CC=clang):
 *   fuzz_onnx -max_total_time=60 tests/fuzz/corpus/onnx
 * Every input must either open (and then hold what onnx_file.h guarantees: decoded tensors of
 * the size their dims say, producers before their consumers) or fail with a non-OK status and
 * a message that names the file; an opened file must then import (into a graph whose tensors
 * and nodes are consistent) or fail the same way. Crashes, leaks and undefined behaviour are
 * findings. External data is refused (no folder), so the target never reads files.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/graph.h"
#include "nn/onnx/import.h"
#include "nn/onnx/onnx_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every byte of @p t, so that the sanitizers check its extent. */
static void touch(const kr_onnx_tensor *t)
{
    size_t count = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] < 0)
            abort();
        count *= (size_t)t->dims[d];
    }
    if (t->rank < 0 || t->rank > KR_ONNX_MAX_RANK || count != t->count ||
        (t->count && !t->data) || (!t->count && t->data))
        abort();
    volatile uint8_t sink = 0;
    const uint8_t *p = t->data;
    for (size_t i = 0; i < t->count * t->elem_size; i++)
        sink ^= p[i];
    (void)sink;
}

/* Imports @p f (dynamic sizes 16x16) and touches what a runtime would read. */
static void import(const kr_onnx_file *f)
{
    keyer_error err = {0};
    kr_graph *g = NULL;
    kr_onnx_layout *layouts = NULL;
    kr_onnx_import_params p = kr_onnx_import_params_defaults();
    p.height = 16;
    p.width = 16;
    keyer_status st = kr_onnx_import(f, &p, &g, &layouts, &err);
    if (st != KEYER_OK) {
        if (g || layouts || strncmp(err.message, "fuzz: ", 6) != 0 || err.status != st)
            abort();
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            int t = n->inputs[k];
            if (t < -1 || t >= g->n_tensors)
                abort();
            if (t >= 0 && g->tensors[t].data) {
                volatile uint8_t sink = 0;
                const uint8_t *q = g->tensors[t].data;
                size_t bytes = kr_tensor_bytes(&g->tensors[t], 1);
                sink ^= q[0];
                sink ^= q[bytes - 1];
                (void)sink;
            }
        }
        if (n->outputs[0] < 0 || n->outputs[0] >= g->n_tensors ||
            g->tensors[n->outputs[0]].producer != i)
            abort();
    }
    for (int i = 0; i < g->n_inputs + g->n_outputs; i++)
        if (layouts[i].rank < 0 || layouts[i].rank > KR_MAX_DIMS)
            abort();
    (void)kr_graph_macs(g);
    free(layouts);
    kr_graph_destroy(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    keyer_error err = {0};
    kr_onnx_file *f = NULL;
    keyer_status st = kr_onnx_file_open_memory(data, size, "fuzz", NULL, &f, &err);
    if (st != KEYER_OK) {
        if (f || strncmp(err.message, "fuzz: ", 6) != 0 || err.status != st)
            abort();
        return 0;
    }
    const Onnx__GraphProto *g = kr_onnx_file_graph(f);
    if (!g || kr_onnx_file_opset(f) < 7 || kr_onnx_file_opset(f) > 21)
        abort();
    for (size_t i = 0; i < g->n_initializer; i++) {
        const kr_onnx_tensor *t = kr_onnx_file_initializer(f, g->initializer[i]->name);
        if (!t)
            abort();
        touch(t);
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            int p = kr_onnx_file_producer(f, n->input[k]);
            if (n->input[k][0] && (p < -1 || p >= (int)i))
                abort();
        }
        const kr_onnx_tensor *c = kr_onnx_file_constant(f, n);
        if (c)
            touch(c);
        for (size_t k = 0; k < n->n_attribute; k++) {
            const Onnx__AttributeProto *a = n->attribute[k];
            keyer_error e = {0};
            int64_t iv;
            float fv;
            const char *sv;
            const int64_t *ints;
            const float *floats;
            size_t cnt;
            const kr_onnx_tensor *t;
            /* Every getter on every attribute: the matching one succeeds, the others refuse. */
            int ok = 0;
            ok += kr_onnx_attr_int(f, n, a->name, 0, &iv, &e) == KEYER_OK;
            ok += kr_onnx_attr_float(f, n, a->name, 0, &fv, &e) == KEYER_OK;
            if (kr_onnx_attr_string(f, n, a->name, NULL, &sv, &e) == KEYER_OK) {
                ok++;
                if (!sv)
                    abort();
                (void)strlen(sv);
            }
            ok += kr_onnx_attr_ints(f, n, a->name, &ints, &cnt, &e) == KEYER_OK;
            ok += kr_onnx_attr_floats(f, n, a->name, &floats, &cnt, &e) == KEYER_OK;
            if (kr_onnx_attr_tensor(f, n, a->name, &t, &e) == KEYER_OK) {
                ok++;
                if (!t)
                    abort();
                touch(t);
            }
            if (ok > 1)
                abort();
        }
    }
    import(f);
    kr_onnx_file_destroy(&f);
    return 0;
}
