/*
 * kr_onnx_import(): the driver (see import.h). Values and their hash table, graph inputs with
 * their dynamic sizes, the node loop (Constant, folding, mapping), graph outputs, and packing
 * the graph under construction into a kr_graph that kr_graph_validate() then checks.
 * Helpers shared with import_fold.c and import_ops_*.c are here too: constants, graph
 * building, layout changes.
 */
#define _POSIX_C_SOURCE 200809L
#include "nn/onnx/import.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

#define MAX_NAME_BYTES 255
#define MAX_DESCRIPTION_BYTES 1023
#define MAX_GRAPH_ELEMENTS ((int64_t)1 << 28) /* per tensor, as the validator */
#define CONST_ALIGN 16
#define STORAGE_ALIGN 64

typedef Onnx__TensorProto__DataType onnx_type;

kr_onnx_import_params kr_onnx_import_params_defaults(void)
{
    kr_onnx_import_params p = {0, 0};
    return p;
}

/* ---- messages -------------------------------------------------------------------------------- */

keyer_status kr_imp_fail(kr_imp_ctx *c, keyer_status st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *file = kr_onnx_file_name(c->f);
    if (c->node)
        return keyer_error_set(c->err, st, "%s: node '%s' (op %s, opset %d): %s", file,
                               c->node->name ? c->node->name : "", c->node->op_type, c->opset,
                               msg);
    return keyer_error_set(c->err, st, "%s: %s", file, msg);
}

keyer_status kr_imp_oom(kr_imp_ctx *c)
{
    return kr_imp_fail(c, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
}

/* ---- constants ------------------------------------------------------------------------------- */

keyer_status kr_imp_const_alloc(kr_imp_ctx *c, kr_imp_const *k, int is_float, int rank,
                                const int64_t *dims)
{
    memset(k, 0, sizeof(*k));
    if (rank < 0 || rank > KR_IMP_MAX_RANK)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "a constant of rank %d (at most %d)",
                           rank, KR_IMP_MAX_RANK);
    size_t count = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || dims[d] > MAX_GRAPH_ELEMENTS ||
            (dims[d] && count > (size_t)MAX_GRAPH_ELEMENTS / (size_t)dims[d]))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "a constant's dimension %d is %lld "
                               "(too large or negative)", d, (long long)dims[d]);
        count *= (size_t)dims[d];
        k->dims[d] = dims[d];
    }
    k->rank = rank;
    k->count = count;
    k->is_float = is_float;
    k->onnx_type = is_float ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
                            : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    if (is_float)
        k->f = calloc(count ? count : 1, sizeof(float));
    else
        k->i = calloc(count ? count : 1, sizeof(int64_t));
    if (!k->f && !k->i)
        return kr_imp_oom(c);
    return KEYER_OK;
}

void kr_imp_const_free(kr_imp_const *k)
{
    free(k->f);
    free(k->i);
    k->f = NULL;
    k->i = NULL;
}

double kr_imp_const_get(const kr_imp_const *k, size_t j)
{
    return k->is_float ? (double)k->f[j] : (double)k->i[j];
}

int64_t kr_imp_const_geti(const kr_imp_const *k, size_t j)
{
    if (!k->is_float)
        return k->i[j];
    double v = k->f[j];
    if (!(v == v))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    if (v <= -9.2e18)
        return INT64_MIN;
    return (int64_t)v;
}

keyer_status kr_imp_const_ints(kr_imp_ctx *c, const kr_imp_value *v, const char *what,
                               int64_t *out, int max, int *count)
{
    if (v->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%s '%s' is computed at run time; keyer "
                           "needs a constant", what, v->name);
    if (v->c.rank > 1 || v->c.count > (size_t)max)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%s '%s' has %zu values in rank %d; "
                           "expected at most %d in rank 0 or 1", what, v->name, v->c.count,
                           v->c.rank, max);
    for (size_t j = 0; j < v->c.count; j++)
        out[j] = kr_imp_const_geti(&v->c, j);
    *count = (int)v->c.count;
    return KEYER_OK;
}

keyer_status kr_imp_const_scalar(kr_imp_ctx *c, const kr_imp_value *v, const char *what,
                                 float *out)
{
    if (v->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%s '%s' is computed at run time; keyer "
                           "needs a constant", what, v->name);
    if (v->c.count != 1)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%s '%s' has %zu values; keyer needs "
                           "one", what, v->name, v->c.count);
    *out = (float)kr_imp_const_get(&v->c, 0);
    return KEYER_OK;
}

static float half_bits(const unsigned char *p)
{
    return kr_half_to_float((uint16_t)(p[0] | (p[1] << 8)));
}

/* A decoded ONNX tensor as a host constant. */
static keyer_status load_tensor(kr_imp_ctx *c, const kr_onnx_tensor *t, kr_imp_const *k)
{
    int is_float;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: is_float = 1; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: is_float = 0; break;
    default:
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "tensor '%s' has ONNX data type %d, "
                           "which keyer does not read", t->name, (int)t->data_type);
    }
    if (t->rank > KR_IMP_MAX_RANK)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "tensor '%s' has rank %d", t->name,
                           t->rank);
    KR_IMP_TRY(kr_imp_const_alloc(c, k, is_float, t->rank, t->dims));
    k->onnx_type = t->data_type;
    if (k->count != t->count || (k->count && !t->data)) {
        kr_imp_const_free(k);
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "tensor '%s' holds %zu elements for %zu",
                           t->name, t->count, k->count);
    }
    const unsigned char *p = t->data;
    for (size_t j = 0; j < k->count; j++, p += t->elem_size) {
        switch (t->data_type) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: memcpy(&k->f[j], p, 4); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: k->f[j] = half_bits(p); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: {
            uint32_t bits = (uint32_t)(p[0] | (p[1] << 8)) << 16;
            memcpy(&k->f[j], &bits, 4);
            break;
        }
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
            double d;
            memcpy(&d, p, 8);
            k->f[j] = (float)d;
            break;
        }
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: k->i[j] = p[0]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: k->i[j] = (int8_t)p[0]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: k->i[j] = (uint16_t)(p[0] | (p[1] << 8)); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: k->i[j] = (int16_t)(p[0] | (p[1] << 8)); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
            int32_t v;
            memcpy(&v, p, 4);
            k->i[j] = v;
            break;
        }
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: {
            uint32_t v;
            memcpy(&v, p, 4);
            k->i[j] = v;
            break;
        }
        default: { /* INT64, UINT64 */
            int64_t v;
            memcpy(&v, p, 8);
            k->i[j] = v;
            break;
        }
        }
    }
    return KEYER_OK;
}

/* ---- values ---------------------------------------------------------------------------------- */

static size_t hash_name(const char *s)
{
    size_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int find_value(const kr_imp_ctx *c, const char *name)
{
    if (!c->n_slots)
        return -1;
    for (size_t s = hash_name(name) & (c->n_slots - 1);; s = (s + 1) & (c->n_slots - 1)) {
        int v = c->slots[s];
        if (v < 0)
            return -1;
        if (strcmp(c->vals[v].name, name) == 0)
            return v;
    }
}

/* Adds a value called @p name (not yet present); returns its index or -1 (error set). */
static int add_value(kr_imp_ctx *c, const char *name)
{
    if (c->n_vals == c->cap_vals) {
        size_t cap = c->cap_vals ? 2 * c->cap_vals : 256;
        kr_imp_value *v = realloc(c->vals, cap * sizeof(*v));
        if (!v)
            return kr_imp_oom(c), -1;
        c->vals = v;
        c->cap_vals = cap;
    }
    if (2 * (c->n_vals + 1) > c->n_slots) {
        size_t n = c->n_slots ? 2 * c->n_slots : 512;
        int *slots = malloc(n * sizeof(int));
        if (!slots)
            return kr_imp_oom(c), -1;
        for (size_t s = 0; s < n; s++)
            slots[s] = -1;
        for (size_t v = 0; v < c->n_vals; v++) {
            size_t s = hash_name(c->vals[v].name) & (n - 1);
            while (slots[s] >= 0)
                s = (s + 1) & (n - 1);
            slots[s] = (int)v;
        }
        free(c->slots);
        c->slots = slots;
        c->n_slots = n;
    }
    size_t s = hash_name(name) & (c->n_slots - 1);
    while (c->slots[s] >= 0)
        s = (s + 1) & (c->n_slots - 1);
    int idx = (int)c->n_vals++;
    c->slots[s] = idx;
    memset(&c->vals[idx], 0, sizeof(c->vals[idx]));
    c->vals[idx].name = name;
    c->vals[idx].tensor = -1;
    c->vals[idx].other = -1;
    return idx;
}

keyer_status kr_imp_lookup(kr_imp_ctx *c, const char *name, kr_imp_value **out)
{
    *out = NULL;
    if (!name || !*name) {
        *out = &c->vals[0]; /* the absent value */
        return KEYER_OK;
    }
    int v = find_value(c, name);
    if (v >= 0) {
        *out = &c->vals[v];
        return KEYER_OK;
    }
    const kr_onnx_tensor *t = kr_onnx_file_initializer(c->f, name);
    if (!t)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input '%s' is not defined", name);
    kr_imp_const k;
    KR_IMP_TRY(load_tensor(c, t, &k));
    v = add_value(c, name);
    if (v < 0) {
        kr_imp_const_free(&k);
        return KEYER_STATUS_OUT_OF_MEMORY;
    }
    c->vals[v].kind = KR_IMP_CONST;
    c->vals[v].c = k;
    *out = &c->vals[v];
    return KEYER_OK;
}

keyer_status kr_imp_input(kr_imp_ctx *c, int i, kr_imp_value **out)
{
    if (i < 0 || (size_t)i >= c->node->n_input) {
        *out = &c->vals[0];
        return KEYER_OK;
    }
    return kr_imp_lookup(c, c->node->input[i], out);
}

int kr_imp_n_outputs(const kr_imp_ctx *c)
{
    return (int)c->node->n_output;
}

/* A new value for node output @p i; -1 with the error set. */
static int new_output(kr_imp_ctx *c, int i)
{
    if (i < 0 || (size_t)i >= c->node->n_output || !c->node->output[i][0]) {
        kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no output %d", i);
        return -1;
    }
    const char *name = c->node->output[i];
    if (find_value(c, name) >= 0 || kr_onnx_file_initializer(c->f, name)) {
        kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "output '%s' is already defined", name);
        return -1;
    }
    return add_value(c, name);
}

keyer_status kr_imp_set_const(kr_imp_ctx *c, int i, kr_imp_const *k)
{
    int v = new_output(c, i);
    if (v < 0) {
        kr_imp_const_free(k);
        return c->err ? c->err->status : KEYER_STATUS_BAD_DATA;
    }
    c->vals[v].kind = KR_IMP_CONST;
    c->vals[v].c = *k;
    memset(k, 0, sizeof(*k));
    return KEYER_OK;
}

keyer_status kr_imp_set_act(kr_imp_ctx *c, int i, int t, int rank, const int64_t *dims, int nhwc)
{
    int v = new_output(c, i);
    if (v < 0)
        return c->err ? c->err->status : KEYER_STATUS_BAD_DATA;
    kr_imp_value *x = &c->vals[v];
    x->kind = KR_IMP_ACT;
    x->tensor = t;
    x->rank = rank;
    memcpy(x->dims, dims, (size_t)rank * sizeof(int64_t));
    x->nhwc = nhwc && rank == 4;
    return KEYER_OK;
}

int kr_imp_output_uses(kr_imp_ctx *c, int i)
{
    if (i < 0 || (size_t)i >= c->node->n_output || !c->node->output[i][0])
        return 0;
    return kr_imp_uses(c, c->node->output[i]);
}

int kr_imp_uses(kr_imp_ctx *c, const char *name)
{
    int uses = 0;
    for (size_t n = 0; n < c->gp->n_node; n++)
        for (size_t k = 0; k < c->gp->node[n]->n_input; k++)
            uses += strcmp(c->gp->node[n]->input[k], name) == 0;
    for (size_t k = 0; k < c->gp->n_output; k++)
        uses += c->gp->output[k]->name && strcmp(c->gp->output[k]->name, name) == 0;
    return uses;
}

/* ---- attributes ------------------------------------------------------------------------------ */

keyer_status kr_imp_attr_int(kr_imp_ctx *c, const char *name, int64_t def, int64_t *out)
{
    return kr_onnx_attr_int(c->f, c->node, name, def, out, c->err);
}

keyer_status kr_imp_attr_float(kr_imp_ctx *c, const char *name, float def, float *out)
{
    return kr_onnx_attr_float(c->f, c->node, name, def, out, c->err);
}

keyer_status kr_imp_attr_string(kr_imp_ctx *c, const char *name, const char *def,
                                const char **out)
{
    return kr_onnx_attr_string(c->f, c->node, name, def, out, c->err);
}

keyer_status kr_imp_attr_ints(kr_imp_ctx *c, const char *name, const int64_t **out,
                              size_t *count)
{
    return kr_onnx_attr_ints(c->f, c->node, name, out, count, c->err);
}

/* ---- graph building -------------------------------------------------------------------------- */

const char *kr_imp_name(kr_imp_ctx *c, const char *base, const char *what, char *buf, size_t n)
{
    snprintf(buf, n, "%.200s/%s%u", base, what, c->name_seq++);
    return buf;
}

static int new_tensor(kr_imp_ctx *c, const char *name, kr_dtype dtype, int rank, const int *dims)
{
    if (c->n_tensors == c->cap_tensors) {
        int cap = c->cap_tensors ? 2 * c->cap_tensors : 256;
        kr_tensor *t = realloc(c->tensors, (size_t)cap * sizeof(*t));
        if (!t)
            return kr_imp_oom(c), -1;
        c->tensors = t;
        void **d = realloc(c->tdata, (size_t)cap * sizeof(*d));
        if (!d)
            return kr_imp_oom(c), -1;
        c->tdata = d;
        c->cap_tensors = cap;
    }
    if (rank < 0 || rank > KR_MAX_DIMS) {
        kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "tensor '%s' has rank %d; keyer's graph holds "
                    "ranks up to %d", name, rank, KR_MAX_DIMS);
        return -1;
    }
    kr_tensor *t = &c->tensors[c->n_tensors];
    memset(t, 0, sizeof(*t));
    size_t len = strlen(name);
    if (len > MAX_NAME_BYTES)
        len = MAX_NAME_BYTES;
    t->name = malloc(len + 1);
    if (!t->name)
        return kr_imp_oom(c), -1;
    memcpy(t->name, name, len);
    t->name[len] = 0;
    t->dtype = dtype;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof(int));
    t->view_of = t->producer = t->last_consumer = t->graph_input = t->graph_output = -1;
    c->tdata[c->n_tensors] = NULL;
    return c->n_tensors++;
}

int kr_imp_new_act(kr_imp_ctx *c, const char *name, int rank, const int *dims)
{
    return new_tensor(c, name, KR_DTYPE_F32, rank, dims);
}

int kr_imp_new_const_f32(kr_imp_ctx *c, const char *name, int rank, const int *dims, float *data)
{
    int t = new_tensor(c, name, KR_DTYPE_F32, rank, dims);
    if (t < 0) {
        free(data);
        return -1;
    }
    c->tdata[t] = data;
    c->tensors[t].data = data;
    return t;
}

int kr_imp_new_const_i32(kr_imp_ctx *c, const char *name, int rank, const int *dims,
                         const int32_t *vals)
{
    size_t count = 1;
    for (int d = 0; d < rank; d++)
        count *= (size_t)dims[d];
    int32_t *data = malloc((count ? count : 1) * sizeof(int32_t));
    if (!data)
        return kr_imp_oom(c), -1;
    memcpy(data, vals, count * sizeof(int32_t));
    int t = new_tensor(c, name, KR_DTYPE_I32, rank, dims);
    if (t < 0) {
        free(data);
        return -1;
    }
    c->tdata[t] = data;
    c->tensors[t].data = data;
    return t;
}

kr_node *kr_imp_emit(kr_imp_ctx *c, kr_op op, int n_in, const int *inputs, int output)
{
    if (c->n_nodes == c->cap_nodes) {
        int cap = c->cap_nodes ? 2 * c->cap_nodes : 256;
        kr_node *n = realloc(c->nodes, (size_t)cap * sizeof(*n));
        if (!n)
            return kr_imp_oom(c), NULL;
        c->nodes = n;
        c->cap_nodes = cap;
    }
    if (n_in > KR_MAX_NODE_INPUTS) {
        kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%d inputs to a %s node; keyer takes at most %d",
                    n_in, kr_op_name(op), KR_MAX_NODE_INPUTS);
        return NULL;
    }
    kr_node *n = &c->nodes[c->n_nodes++];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->source_index = c->node_index;
    n->n_inputs = n_in;
    n->n_outputs = 1;
    memcpy(n->inputs, inputs, (size_t)n_in * sizeof(int));
    n->outputs[0] = output;
    n->activation = KR_ACT_NONE;
    return n;
}

keyer_status kr_imp_dims(kr_imp_ctx *c, int rank, const int64_t *onnx, int nhwc, int *out)
{
    if (rank > KR_MAX_DIMS)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "a tensor of rank %d; keyer's graph "
                           "holds ranks up to %d", rank, KR_MAX_DIMS);
    int64_t total = 1;
    for (int d = 0; d < rank; d++) {
        if (onnx[d] < 1 || onnx[d] > MAX_GRAPH_ELEMENTS || total * onnx[d] > MAX_GRAPH_ELEMENTS)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "dimension %d of a computed tensor is "
                               "%lld (empty or too large)", d, (long long)onnx[d]);
        total *= onnx[d];
    }
    static const int to_nhwc[4] = {0, 2, 3, 1};
    for (int d = 0; d < rank; d++)
        out[d] = (int)onnx[nhwc && rank == 4 ? to_nhwc[d] : d];
    return KEYER_OK;
}

int kr_imp_axis(int rank, int nhwc, int a)
{
    static const int from_nchw[4] = {0, 3, 1, 2};
    return nhwc && rank == 4 ? from_nchw[a] : a;
}

keyer_status kr_imp_norm_axis(kr_imp_ctx *c, int64_t a, int rank, int *out)
{
    if (a < -rank || a >= rank)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "axis %lld is outside rank %d", (long long)a,
                           rank);
    *out = (int)(a < 0 ? a + rank : a);
    return KEYER_OK;
}

keyer_status kr_imp_out_act(kr_imp_ctx *c, int i, int rank, const int64_t *dims, int nhwc,
                            int *t)
{
    int kd[KR_MAX_DIMS];
    KR_IMP_TRY(kr_imp_dims(c, rank, dims, nhwc, kd));
    if (i < 0 || (size_t)i >= c->node->n_output || !c->node->output[i][0])
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no output %d", i);
    *t = kr_imp_new_act(c, c->node->output[i], rank, kd);
    if (*t < 0)
        return c->err ? c->err->status : KEYER_STATUS_OUT_OF_MEMORY;
    return kr_imp_set_act(c, i, *t, rank, dims, nhwc);
}

/* Converts rank-4 @p v to the other layout (to_nhwc: ONNX order -> NHWC, else back). */
static keyer_status relayout(kr_imp_ctx *c, kr_imp_value *v, int to_nhwc, int *tensor)
{
    if (v->other >= 0) {
        *tensor = v->other;
        return KEYER_OK;
    }
    int kd[KR_MAX_DIMS];
    KR_IMP_TRY(kr_imp_dims(c, 4, v->dims, to_nhwc, kd));
    char name[256];
    int t = kr_imp_new_act(c, kr_imp_name(c, v->name, to_nhwc ? "nhwc" : "nchw", name,
                                          sizeof(name)), 4, kd);
    if (t < 0)
        return c->err->status;
    /* NCHW and NHWC hold the same bytes when C is 1 or H and W are both 1: a view. */
    int same = v->dims[1] == 1 || (v->dims[2] == 1 && v->dims[3] == 1);
    kr_node *n = kr_imp_emit(c, same ? KR_OP_RESHAPE : KR_OP_TRANSPOSE, 1, &v->tensor, t);
    if (!n)
        return c->err->status;
    if (!same) {
        static const int fwd[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
        memcpy(n->p.transpose.perm, to_nhwc ? fwd : back, sizeof(fwd));
    }
    v->other = t;
    *tensor = t;
    return KEYER_OK;
}

keyer_status kr_imp_onnx_order(kr_imp_ctx *c, const kr_imp_value *v, int *tensor)
{
    if (v->kind != KR_IMP_ACT)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "'%s' is not a computed tensor", v->name);
    if (!v->nhwc) {
        *tensor = v->tensor;
        return KEYER_OK;
    }
    return relayout(c, (kr_imp_value *)v, 0, tensor);
}

keyer_status kr_imp_nhwc(kr_imp_ctx *c, const kr_imp_value *v, int *tensor)
{
    if (v->kind != KR_IMP_ACT || v->rank != 4)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input '%s' is not a computed rank-4 "
                           "tensor (keyer maps this operator in 2-D only)", v->name);
    if (v->nhwc) {
        *tensor = v->tensor;
        return KEYER_OK;
    }
    return relayout(c, (kr_imp_value *)v, 1, tensor);
}

keyer_status kr_imp_const_operand(kr_imp_ctx *c, const kr_imp_value *v, int rank, int nhwc,
                                  int *tensor)
{
    const kr_imp_const *k = &v->c;
    if (v->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "'%s' is not a constant", v->name);
    if (k->rank > rank || rank > KR_MAX_DIMS)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "constant '%s' has rank %d, more than "
                           "the computed operand's %d", v->name, k->rank, rank);
    int64_t od[KR_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        od[d] = d < rank - k->rank ? 1 : k->dims[d - (rank - k->rank)];
    int kd[KR_MAX_DIMS];
    KR_IMP_TRY(kr_imp_dims(c, rank, od, nhwc, kd));
    float *data = malloc((k->count ? k->count : 1) * sizeof(float));
    if (!data)
        return kr_imp_oom(c);
    if (nhwc && rank == 4) {
        size_t C = (size_t)od[1], H = (size_t)od[2], W = (size_t)od[3];
        for (size_t n = 0; n < (size_t)od[0]; n++)
            for (size_t ch = 0; ch < C; ch++)
                for (size_t y = 0; y < H; y++)
                    for (size_t x = 0; x < W; x++)
                        data[((n * H + y) * W + x) * C + ch] =
                            (float)kr_imp_const_get(k, ((n * C + ch) * H + y) * W + x);
    } else {
        for (size_t j = 0; j < k->count; j++)
            data[j] = (float)kr_imp_const_get(k, j);
    }
    *tensor = kr_imp_new_const_f32(c, v->name, rank, kd, data);
    return *tensor < 0 ? c->err->status : KEYER_OK;
}

keyer_status kr_imp_channel_const(kr_imp_ctx *c, const char *name, const float *vals, int n,
                                  int rank, int nhwc, int *tensor)
{
    kr_imp_value v;
    memset(&v, 0, sizeof(v));
    v.name = name;
    v.kind = KR_IMP_CONST;
    int64_t dims[KR_IMP_MAX_RANK];
    int r = rank >= 2 ? rank - 1 : 1;
    dims[0] = n;
    for (int d = 1; d < r; d++)
        dims[d] = 1;
    KR_IMP_TRY(kr_imp_const_alloc(c, &v.c, 1, r, dims));
    memcpy(v.c.f, vals, (size_t)n * sizeof(float));
    keyer_status st = kr_imp_const_operand(c, &v, rank, nhwc, tensor);
    kr_imp_const_free(&v.c);
    return st;
}

/* ---- the import ------------------------------------------------------------------------------ */

static keyer_status read_inputs(kr_imp_ctx *c)
{
    const Onnx__GraphProto *gp = c->gp;
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *in = gp->input[k];
        const char *name = in->name ? in->name : "";
        if (kr_onnx_file_initializer(c->f, name))
            continue; /* older exports list initializers among the inputs */
        const Onnx__TypeProto *tp = in->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' is not a tensor",
                               name);
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        if (tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
            tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has ONNX element "
                               "type %d; keyer's model inputs are float (or float16, read as "
                               "float)", name, (int)tt->elem_type);
        if (!tt->shape)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has no shape",
                               name);
        int rank = (int)tt->shape->n_dim;
        if (rank < 1 || rank > KR_MAX_DIMS)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has rank %d; keyer "
                               "takes ranks 1 to %d", name, rank, KR_MAX_DIMS);
        int64_t dims[KR_MAX_DIMS];
        for (int d = 0; d < rank; d++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[d];
            int64_t v = dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                            ? dm->dim_value
                            : -1;
            if (v <= 0) {
                int given = rank == 4 && d == 2 ? c->params.height
                            : rank == 4 && d == 3 ? c->params.width
                                                  : 0;
                if (d == 0)
                    v = 1;
                else if (given > 0)
                    v = given;
                else
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA,
                                       "graph input '%s': dimension %d (%s) is dynamic and no "
                                       "size was given for it", name, d,
                                       rank == 4 && d == 2   ? "height"
                                       : rank == 4 && d == 3 ? "width"
                                                             : "not height or width");
            } else if (d == 0 && v != 1) {
                return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has a fixed "
                                   "batch of %lld; keyer's graph is per sample (batch 1) and "
                                   "a runtime sets the batch", name, (long long)v);
            }
            dims[d] = v;
        }
        if (find_value(c, name) >= 0)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "graph input '%s' is listed twice",
                               name);
        int kd[KR_MAX_DIMS];
        KR_IMP_TRY(kr_imp_dims(c, rank, dims, rank == 4, kd));
        int t = kr_imp_new_act(c, name, rank, kd);
        if (t < 0)
            return c->err->status;
        int v = add_value(c, name);
        if (v < 0)
            return KEYER_STATUS_OUT_OF_MEMORY;
        kr_imp_value *x = &c->vals[v];
        x->kind = KR_IMP_ACT;
        x->tensor = t;
        x->rank = rank;
        memcpy(x->dims, dims, sizeof(dims));
        x->nhwc = rank == 4;
    }
    return KEYER_OK;
}

static keyer_status import_node(kr_imp_ctx *c)
{
    const Onnx__NodeProto *node = c->node;
    const char *op = node->op_type ? node->op_type : "";
    if (strcmp(op, "Constant") == 0) {
        const kr_onnx_tensor *t = kr_onnx_file_constant(c->f, node);
        if (!t)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no value");
        kr_imp_const k;
        KR_IMP_TRY(load_tensor(c, t, &k));
        return kr_imp_set_const(c, 0, &k);
    }
    int all_const = 1, any_act = 0;
    for (size_t i = 0; i < node->n_input; i++) {
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_lookup(c, node->input[i], &v));
        all_const &= v->kind != KR_IMP_ACT;
        any_act |= v->kind == KR_IMP_ACT;
    }
    if (kr_imp_foldable(op) &&
        (all_const || strcmp(op, "Shape") == 0 || strcmp(op, "Size") == 0))
        return kr_imp_fold(c);
    if (!any_act)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "is not supported with constant inputs "
                           "only (keyer folds shape arithmetic, not this operator)");
    return kr_imp_map(c);
}

static keyer_status read_outputs(kr_imp_ctx *c, kr_graph *g, kr_onnx_layout *layouts)
{
    const Onnx__GraphProto *gp = c->gp;
    for (size_t k = 0; k < gp->n_output; k++) {
        const char *name = gp->output[k]->name ? gp->output[k]->name : "";
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_lookup(c, name, &v));
        if (v->kind != KR_IMP_ACT)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph output '%s' is a constant "
                               "(it does not depend on the inputs)", name);
        kr_tensor *t = &c->tensors[v->tensor];
        for (size_t j = 0; j < k; j++)
            if (g->outputs[j] == v->tensor)
                return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph outputs '%s' and '%s' "
                                   "are the same tensor", c->tensors[g->outputs[j]].name, name);
        if (strcmp(t->name, name) != 0) { /* an alias (Identity, Cast): the file's name wins */
            size_t len = strlen(name) > MAX_NAME_BYTES ? MAX_NAME_BYTES : strlen(name);
            char *s = malloc(len + 1);
            if (!s)
                return kr_imp_oom(c);
            memcpy(s, name, len);
            s[len] = 0;
            free(t->name);
            t->name = s;
        }
        g->outputs[k] = v->tensor;
        kr_onnx_layout *l = &layouts[g->n_inputs + (int)k];
        l->rank = v->rank;
        for (int d = 0; d < v->rank && d < KR_MAX_DIMS; d++) {
            l->dims[d] = (int)v->dims[d];
            l->perm[d] = d;
        }
        if (v->nhwc) {
            static const int fwd[4] = {0, 2, 3, 1};
            memcpy(l->perm, fwd, sizeof(fwd));
        }
    }
    return KEYER_OK;
}

/* Moves the graph under construction into @p g. */
static keyer_status pack(kr_imp_ctx *c, kr_graph *g)
{
    size_t total = 0;
    for (int t = 0; t < c->n_tensors; t++)
        if (c->tdata[t])
            total += (kr_tensor_bytes(&c->tensors[t], 1) + CONST_ALIGN - 1) / CONST_ALIGN *
                     CONST_ALIGN;
    if (total) {
        size_t alloc = (total + STORAGE_ALIGN - 1) / STORAGE_ALIGN * STORAGE_ALIGN;
        g->const_storage = aligned_alloc(STORAGE_ALIGN, alloc);
        if (!g->const_storage)
            return kr_imp_oom(c);
        g->const_bytes = total;
    }
    size_t offset = 0;
    for (int t = 0; t < c->n_tensors; t++) {
        if (!c->tdata[t])
            continue;
        size_t bytes = kr_tensor_bytes(&c->tensors[t], 1);
        void *dst = (unsigned char *)g->const_storage + offset;
        memcpy(dst, c->tdata[t], bytes);
        c->tensors[t].data = dst;
        free(c->tdata[t]);
        c->tdata[t] = NULL;
        offset += (bytes + CONST_ALIGN - 1) / CONST_ALIGN * CONST_ALIGN;
    }
    g->tensors = c->tensors;
    g->n_tensors = c->n_tensors;
    c->tensors = NULL;
    c->n_tensors = 0;
    g->nodes = c->nodes ? c->nodes : calloc(1, sizeof(kr_node));
    g->n_nodes = c->n_nodes;
    c->nodes = NULL;
    c->n_nodes = 0;
    g->fixed_batch = c->fixed_batch;
    return g->nodes ? KEYER_OK : kr_imp_oom(c);
}

static void ctx_free(kr_imp_ctx *c)
{
    for (size_t v = 0; v < c->n_vals; v++)
        kr_imp_const_free(&c->vals[v].c);
    free(c->vals);
    free(c->slots);
    for (int t = 0; t < c->n_tensors; t++) {
        free(c->tensors[t].name);
        free(c->tdata[t]);
    }
    free(c->tensors);
    free(c->tdata);
    free(c->nodes);
}

static char *dup_capped(const char *s, size_t cap)
{
    size_t len = strlen(s);
    if (len > cap)
        len = cap;
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = 0;
    }
    return d;
}

keyer_status kr_onnx_import(const kr_onnx_file *f, const kr_onnx_import_params *p, kr_graph **out,
                            kr_onnx_layout **layouts, keyer_error *err)
{
    if (out)
        *out = NULL;
    if (layouts)
        *layouts = NULL;
    if (!f || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_onnx_import needs a file and an output pointer");
    kr_imp_ctx c;
    memset(&c, 0, sizeof(c));
    c.f = f;
    c.gp = kr_onnx_file_graph(f);
    c.opset = kr_onnx_file_opset(f);
    c.params = p ? *p : kr_onnx_import_params_defaults();
    c.err = err;
    c.node_index = -1;
    if (c.params.height < 0 || c.params.width < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: input size %dx%d is "
                               "negative", kr_onnx_file_name(f), c.params.height, c.params.width);
    kr_graph *g = NULL;
    kr_onnx_layout *lay = NULL;
    keyer_status st;
    if (add_value(&c, "") != 0) { /* value 0: absent */
        st = KEYER_STATUS_OUT_OF_MEMORY;
        goto fail;
    }
    g = calloc(1, sizeof(*g));
    if (!g || !(g->name = dup_capped(kr_onnx_file_name(f), 4095))) {
        st = kr_imp_oom(&c);
        goto fail;
    }
    const Onnx__ModelProto *mp = kr_onnx_file_model(f);
    if (mp->doc_string && mp->doc_string[0] &&
        !(g->description = dup_capped(mp->doc_string, MAX_DESCRIPTION_BYTES))) {
        st = kr_imp_oom(&c);
        goto fail;
    }
    if ((st = read_inputs(&c)) != KEYER_OK)
        goto fail;
    int n_in = c.n_tensors; /* the graph inputs are tensors 0..n_in-1 */
    for (size_t n = 0; n < c.gp->n_node; n++) {
        c.node = c.gp->node[n];
        c.node_index = (int)n;
        if ((st = import_node(&c)) != KEYER_OK)
            goto fail;
    }
    c.node = NULL;
    c.node_index = -1;
    size_t n_out = c.gp->n_output;
    g->inputs = calloc(n_in ? (size_t)n_in : 1, sizeof(int));
    g->outputs = calloc(n_out ? n_out : 1, sizeof(int));
    lay = calloc((size_t)n_in + n_out + 1, sizeof(*lay));
    if (!g->inputs || !g->outputs || !lay) {
        st = kr_imp_oom(&c);
        goto fail;
    }
    g->n_inputs = n_in;
    g->n_outputs = (int)n_out;
    for (int i = 0; i < n_in; i++) {
        g->inputs[i] = i;
        const kr_imp_value *v = &c.vals[1 + i]; /* read_inputs added them in this order */
        lay[i].rank = v->rank;
        for (int d = 0; d < v->rank; d++) {
            lay[i].dims[d] = (int)v->dims[d];
            lay[i].perm[d] = d;
        }
        if (v->nhwc) {
            static const int fwd[4] = {0, 2, 3, 1};
            memcpy(lay[i].perm, fwd, sizeof(fwd));
        }
    }
    if ((st = read_outputs(&c, g, lay)) != KEYER_OK || (st = pack(&c, g)) != KEYER_OK)
        goto fail;
    if ((st = kr_graph_validate(g, err)) != KEYER_OK)
        goto fail;
    ctx_free(&c);
    *out = g;
    if (layouts)
        *layouts = lay;
    else
        free(lay);
    return KEYER_OK;
fail:
    ctx_free(&c);
    kr_graph_destroy(&g);
    free(lay);
    return st;
}
