/*
 * keyer_model_*: loading a TFLite file (tflite.c builds and validates the graph) and
 * describing the result.
 */
#define _POSIX_C_SOURCE 200809L
#include "nn/model.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/tflite.h"

const kr_graph *kr_model_graph(const keyer_model *m)
{
    return m ? m->graph : NULL;
}

keyer_status keyer_model_load_memory(const void *data, size_t size, const char *name,
                                     keyer_model **out, keyer_error *err)
{
    if (!name)
        name = "model";
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: keyer_model_load_memory needs an output pointer", name);
    *out = NULL;
    if (!data && size)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL data of %zu bytes",
                               name, size);
    kr_graph *g = NULL;
    keyer_status st = kr_tflite_read(data, size, name, &g, err);
    if (st != KEYER_OK)
        return st;
    keyer_model *m = calloc(1, sizeof(*m));
    if (!m) {
        kr_graph_destroy(&g);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate the model",
                               name);
    }
    m->graph = g;
    m->macs = kr_graph_macs(g);
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        if (kr_tensor_is_const(x) && x->dtype == KR_DTYPE_F32)
            m->weight_bytes += kr_tensor_bytes(x, 1);
    }
    *out = m;
    return KEYER_OK;
}

keyer_status keyer_model_load_file(const char *path, keyer_model **out, keyer_error *err)
{
    if (!out || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_model_load_file needs a path and an output pointer");
    *out = NULL;
    keyer_status st;
    void *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot open: %s", path,
                               strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: not a regular file", path);
        goto fail;
    }
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > KR_TFLITE_MAX_FILE_BYTES) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "%s: the file is %lld bytes; keyer reads models up to %zu bytes", path,
                             (long long)sb.st_size, KR_TFLITE_MAX_FILE_BYTES);
        goto fail;
    }
    size_t len = (size_t)sb.st_size;
    data = malloc(len ? len : 1);
    if (!data) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes",
                             path, len);
        goto fail;
    }
    if (fread(data, 1, len, f) != len) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot read %zu bytes%s", path, len,
                             ferror(f) ? "" : " (the file shrank while reading)");
        goto fail;
    }
    fclose(f);
    f = NULL;
    st = keyer_model_load_memory(data, len, path, out, err);
fail:
    if (f)
        fclose(f);
    free(data);
    return st;
}

void keyer_model_destroy(keyer_model **model)
{
    if (!model || !*model)
        return;
    kr_graph_destroy(&(*model)->graph);
    free(*model);
    *model = NULL;
}

int keyer_model_input_count(const keyer_model *model)
{
    return model ? model->graph->n_inputs : 0;
}

int keyer_model_output_count(const keyer_model *model)
{
    return model ? model->graph->n_outputs : 0;
}

static keyer_status tensor_info(const keyer_model *model, int index, int io,
                                keyer_tensor_info *out, keyer_error *err)
{
    const char *what = io ? "output" : "input";
    if (!model || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_model_%s_info needs a model and an output", what);
    const kr_graph *g = model->graph;
    int count = io ? g->n_outputs : g->n_inputs;
    if (index < 0 || index >= count)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: %s %d does not exist (the model has %d)", g->name, what,
                               index, count);
    const kr_tensor *t = &g->tensors[io ? g->outputs[index] : g->inputs[index]];
    memset(out, 0, sizeof(*out));
    out->name = t->name;
    out->dtype = t->dtype == KR_DTYPE_I32 ? KEYER_DTYPE_I32
                 : t->dtype == KR_DTYPE_F16 ? KEYER_DTYPE_F16
                                            : KEYER_DTYPE_F32;
    out->rank = t->rank;
    for (int d = 0; d < t->rank && d < KEYER_TENSOR_MAX_DIMS; d++)
        out->dims[d] = t->dims[d];
    return KEYER_OK;
}

keyer_status keyer_model_input_info(const keyer_model *model, int index, keyer_tensor_info *out,
                                    keyer_error *err)
{
    return tensor_info(model, index, 0, out, err);
}

keyer_status keyer_model_output_info(const keyer_model *model, int index, keyer_tensor_info *out,
                                     keyer_error *err)
{
    return tensor_info(model, index, 1, out, err);
}

uint64_t keyer_model_macs(const keyer_model *model)
{
    return model ? model->macs : 0;
}

int keyer_model_node_count(const keyer_model *model)
{
    return model ? model->graph->n_nodes : 0;
}

size_t keyer_model_weight_bytes(const keyer_model *model)
{
    return model ? model->weight_bytes : 0;
}
