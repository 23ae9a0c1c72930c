/*
 * Helpers of the ONNX importer shared by the driver (import.c), constant folding
 * (import_fold.c) and the operator mappings (import_ops_*.c): messages, host constants
 * (decoding ONNX tensors to int64 or float), the value table, attribute access, building the
 * graph under construction (tensors, constants, nodes) and layout changes (TRANSPOSE or a
 * RESHAPE view between NCHW and NHWC, constants re-laid for broadcasting). Calls nothing of
 * the other importer files.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

#define MAX_NAME_BYTES 255
#define MAX_GRAPH_ELEMENTS ((int64_t)1 << 28) /* per tensor, as the validator */

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

keyer_status kr_imp_load_tensor(kr_imp_ctx *c, const kr_onnx_tensor *t, kr_imp_const *k)
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

int kr_imp_find_value(const kr_imp_ctx *c, const char *name)
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

int kr_imp_add_value(kr_imp_ctx *c, const char *name)
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
    int v = kr_imp_find_value(c, name);
    if (v >= 0) {
        *out = &c->vals[v];
        return KEYER_OK;
    }
    const kr_onnx_tensor *t = kr_onnx_file_initializer(c->f, name);
    if (!t)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input '%s' is not defined", name);
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_load_tensor(c, t, &k));
    v = kr_imp_add_value(c, name);
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
    if (kr_imp_find_value(c, name) >= 0 || kr_onnx_file_initializer(c->f, name)) {
        kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "output '%s' is already defined", name);
        return -1;
    }
    return kr_imp_add_value(c, name);
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
