/* Helpers shared by the graph validator's rule files (validate_internal.h). */
#include <stdarg.h>
#include <stdio.h>

#include "nn/validate_internal.h"

keyer_status kr_val_node_fail(const vctx *v, const kr_node *n, keyer_status status,
                              const char *fmt, ...)
{
    char msg[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return keyer_error_set(v->err, status, "%s: operator %d (%s): %s", v->g->name,
                           n->source_index, kr_op_name(n->op), msg);
}

keyer_status kr_val_graph_fail(const vctx *v, keyer_status status, const char *fmt, ...)
{
    char msg[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return keyer_error_set(v->err, status, "%s: %s", v->g->name, msg);
}

const char *kr_val_dims_str(int rank, const int *dims, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%d" : "%d", dims[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

const char *kr_val_shape_str(const kr_tensor *t, char *buf, size_t cap)
{
    return dims_str(t->rank, t->dims, buf, cap);
}

const char *kr_val_dtype_name(kr_dtype d)
{
    switch (d) {
    case KR_DTYPE_F32: return "FLOAT32";
    case KR_DTYPE_F16: return "FLOAT16";
    case KR_DTYPE_I32: return "INT32";
    }
    return "an unknown type";
}

keyer_status kr_val_want_input(const vctx *v, const kr_node *n, int i, int kind, kr_dtype dtype,
                               int rank, const char *role)
{
    if (i >= n->n_inputs || n->inputs[i] < 0)
        return node_fail(v, n, BAD, "input %d (%s) is missing", i, role);
    const kr_tensor *t = input(v, n, i);
    int is_const = kr_tensor_is_const(t);
    if (kind == WANT_ACT && is_const)
        return node_fail(v, n, UNSUP, "input %d (%s), tensor '%s', is a constant; keyer needs a "
                         "computed tensor here", i, role, t->name);
    if (kind == WANT_CONST && !is_const)
        return node_fail(v, n, UNSUP, "input %d (%s), tensor '%s', is not a constant; keyer "
                         "needs constant %s", i, role, t->name, role);
    if (t->dtype != dtype)
        return node_fail(v, n, BAD, "input %d (%s), tensor '%s', is %s; expected %s", i, role,
                         t->name, dtype_name(t->dtype), dtype_name(dtype));
    if (rank >= 0 && t->rank != rank)
        return node_fail(v, n, BAD, "input %d (%s), tensor '%s', has rank %d; expected %d", i,
                         role, t->name, t->rank, rank);
    return KEYER_OK;
}

keyer_status kr_val_want_inputs(const vctx *v, const kr_node *n, int min, int max)
{
    if (n->n_inputs < min || n->n_inputs > max) {
        if (min == max)
            return node_fail(v, n, BAD, "has %d inputs; it takes %d", n->n_inputs, min);
        return node_fail(v, n, BAD, "has %d inputs; it takes %d to %d", n->n_inputs, min, max);
    }
    return KEYER_OK;
}

keyer_status kr_val_expect_shape(const vctx *v, const kr_node *n, int rank, const int *dims)
{
    const kr_tensor *o = output(v, n);
    int same = o->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = o->dims[d] == dims[d];
    if (!same) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "output tensor '%s' has shape %s but the operator gives %s",
                         o->name, shape_str(o, a, sizeof(a)), dims_str(rank, dims, b, sizeof(b)));
    }
    return KEYER_OK;
}

keyer_status kr_val_broadcast(const vctx *v, const kr_node *n, const kr_tensor *a,
                              const kr_tensor *b, int *rank, int *dims)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int d = 0; d < r; d++) {
        int ia = d - (r - a->rank), ib = d - (r - b->rank);
        int da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return node_fail(v, n, BAD, "shapes %s ('%s') and %s ('%s') do not broadcast",
                             shape_str(a, sa, sizeof(sa)), a->name, shape_str(b, sb, sizeof(sb)),
                             b->name);
        }
        dims[d] = da == 1 ? db : da;
    }
    *rank = r;
    return KEYER_OK;
}

keyer_status kr_val_batch_axis(const vctx *v, const kr_node *n, const char *what)
{
    if (v->g->fixed_batch)
        return KEYER_OK;
    return node_fail(v, n, UNSUP, "%s the batch axis 0, which a runtime scales (a graph that "
                     "does so must be marked fixed_batch and runs at batch 1)", what);
}
