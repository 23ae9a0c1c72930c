/*
 * keyer_model_*: loading a TFLite file (tflite.c builds and validates the graph) or an ONNX file
 * (onnx/onnx_file.c reads it, onnx/import.c builds the graph), describing the result, and
 * converting tensors between a file's layout and the graph's.
 */
#define _POSIX_C_SOURCE 200809L
#include "nn/model.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import.h"
#include "nn/onnx/onnx_file.h"
#include "nn/tflite.h"

const kr_graph *kr_model_graph(const keyer_model *m)
{
    return m ? m->graph : NULL;
}

keyer_model_load_params keyer_model_load_params_defaults(void)
{
    keyer_model_load_params p;
    memset(&p, 0, sizeof(p));
    return p;
}

static int is_tflite(const void *data, size_t size)
{
    return size >= 8 && memcmp((const unsigned char *)data + 4, "TFL3", 4) == 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* An ONNX model from memory: read, checked and imported. */
static keyer_status load_onnx(const void *data, size_t size, const char *name, const char *dir,
                              const keyer_model_load_params *params, kr_graph **g,
                              kr_onnx_layout **layouts, keyer_error *err)
{
    kr_onnx_file *f = NULL;
    keyer_status st = kr_onnx_file_open_memory(data, size, name, dir, &f, err);
    if (st != KEYER_OK)
        return st;
    kr_onnx_import_params ip = kr_onnx_import_params_defaults();
    ip.height = params->height;
    ip.width = params->width;
    st = kr_onnx_import(f, &ip, g, layouts, err);
    kr_onnx_file_destroy(&f);
    return st;
}

/* Reads a TFLite or ONNX model (module comment of nn.h) and wraps it. @p dir: the folder of
 * an ONNX model's external data, NULL for none. */
static keyer_status load_model(const void *data, size_t size, const char *name, const char *dir,
                               const keyer_model_load_params *params, keyer_model **out,
                               keyer_error *err)
{
    kr_graph *g = NULL;
    kr_onnx_layout *layouts = NULL;
    keyer_status st;
    if (is_tflite(data, size) || size < 8) {
        st = kr_tflite_read(data, size, name, &g, err);
    } else if (ends_with(name, ".onnx") || ends_with(name, ".ONNX")) {
        st = load_onnx(data, size, name, dir, params, &g, &layouts, err);
    } else {
        keyer_error onnx_err = {0};
        st = load_onnx(data, size, name, dir, params, &g, &layouts, &onnx_err);
        if (st == KEYER_STATUS_BAD_DATA)
            st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: not a TFLite model (bytes 4-7 "
                                 "are not TFL3) and not an ONNX model (%s)", name,
                                 onnx_err.message);
        else if (st != KEYER_OK && err)
            *err = onnx_err;
    }
    if (st != KEYER_OK)
        return st;
    keyer_model *m = calloc(1, sizeof(*m));
    if (!m) {
        kr_graph_destroy(&g);
        free(layouts);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate the model",
                               name);
    }
    m->graph = g;
    m->layouts = layouts;
    m->macs = kr_graph_macs(g);
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        if (kr_tensor_is_const(x) && x->dtype == KR_DTYPE_F32)
            m->weight_bytes += kr_tensor_bytes(x, 1);
    }
    *out = m;
    return KEYER_OK;
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
    keyer_model_load_params p = keyer_model_load_params_defaults();
    return load_model(data, size, name, NULL, &p, out, err);
}

keyer_status keyer_model_load_file(const char *path, keyer_model **out, keyer_error *err)
{
    return keyer_model_load_file_params(path, NULL, out, err);
}

keyer_status keyer_model_load_file_params(const char *path, const keyer_model_load_params *params,
                                          keyer_model **out, keyer_error *err)
{
    if (!out || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_model_load_file needs a path and an output pointer");
    *out = NULL;
    keyer_model_load_params defaults = keyer_model_load_params_defaults();
    if (!params)
        params = &defaults;
    if (params->height < 0 || params->width < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: input size %dx%d is "
                               "negative", path, params->height, params->width);
    keyer_status st;
    void *data = NULL;
    char *dir = NULL;
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
    size_t max = KR_TFLITE_MAX_FILE_BYTES > KR_ONNX_MAX_FILE_BYTES ? KR_TFLITE_MAX_FILE_BYTES
                                                                   : KR_ONNX_MAX_FILE_BYTES;
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > max) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "%s: the file is %lld bytes; keyer reads models up to %zu bytes", path,
                             (long long)sb.st_size, max);
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
    /* The model's folder, for ONNX external data. */
    const char *slash = strrchr(path, '/');
    dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate a path", path);
        goto fail;
    }
    st = load_model(data, len, path, dir, params, out, err);
fail:
    if (f)
        fclose(f);
    free(data);
    free(dir);
    return st;
}

void keyer_model_destroy(keyer_model **model)
{
    if (!model || !*model)
        return;
    kr_graph_destroy(&(*model)->graph);
    free((*model)->layouts);
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
    out->file_rank = t->rank;
    const kr_onnx_layout *l = model->layouts ? &model->layouts[io ? g->n_inputs + index : index]
                                             : NULL;
    for (int d = 0; d < t->rank && d < KEYER_TENSOR_MAX_DIMS; d++) {
        out->file_perm[d] = l ? l->perm[d] : d;
        out->file_dims[d] = l ? l->dims[d] : t->dims[d];
    }
    return KEYER_OK;
}

/* Copies between the file layout (@p to_graph: src) and the graph's (module comment of nn.h). */
static keyer_status relayout(const keyer_tensor_info *info, int batch, const void *src,
                             void *dst, int to_graph, keyer_error *err)
{
    if (!info || !src || !dst || batch < 1 || info->rank < 0 ||
        info->rank > KEYER_TENSOR_MAX_DIMS || info->file_rank != info->rank)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_tensor_to_%s_layout: "
                               "bad arguments (a tensor info from keyer_model_*_info, a batch "
                               ">= 1 and two buffers are needed)", to_graph ? "graph" : "file");
    int r = info->rank, gd[KEYER_TENSOR_MAX_DIMS], fd[KEYER_TENSOR_MAX_DIMS];
    size_t fstride[KEYER_TENSOR_MAX_DIMS], count = 1;
    unsigned seen = 0;
    for (int d = 0; d < r; d++) {
        int p = info->file_perm[d];
        if (p < 0 || p >= r || (seen & (1u << p)) || info->dims[d] != info->file_dims[p] ||
            info->dims[d] < 1)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "tensor '%s': file_perm "
                                   "and the dimensions do not agree",
                                   info->name ? info->name : "");
        seen |= 1u << p;
        gd[d] = info->dims[d] * (d == 0 ? batch : 1);
        fd[p] = gd[d];
        count *= (size_t)gd[d];
    }
    for (int d = r - 1, s = 1; d >= 0; d--) {
        fstride[d] = (size_t)s;
        s *= fd[d];
    }
    const uint32_t *in = src;
    uint32_t *outp = dst;
    for (size_t j = 0; j < count; j++) {
        size_t rem = j, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            size_t i = rem % (size_t)gd[d];
            rem /= (size_t)gd[d];
            off += i * fstride[info->file_perm[d]];
        }
        if (to_graph)
            outp[j] = in[off];
        else
            outp[off] = in[j];
    }
    return KEYER_OK;
}

keyer_status keyer_tensor_to_graph_layout(const keyer_tensor_info *info, int batch,
                                          const void *src, void *dst, keyer_error *err)
{
    return relayout(info, batch, src, dst, 1, err);
}

keyer_status keyer_tensor_to_file_layout(const keyer_tensor_info *info, int batch,
                                         const void *src, void *dst, keyer_error *err)
{
    return relayout(info, batch, src, dst, 0, err);
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

const char *keyer_model_node_op_name(const keyer_model *model, int index)
{
    if (!model || index < 0 || index >= model->graph->n_nodes)
        return "";
    return kr_op_name(model->graph->nodes[index].op);
}

size_t keyer_model_weight_bytes(const keyer_model *model)
{
    return model ? model->weight_bytes : 0;
}
