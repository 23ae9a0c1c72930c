/*
 * ONNX tensor-shaping operators onto keyer's graph: Concat, Slice, Split (one SLICE per
 * output), Softmax, ArgMax, ReduceMean / ReduceMax, Gather (constant indices), Pad (constant,
 * reflect, edge; negative pads crop with a SLICE first) keep the layout tag and remap their
 * axes; Reshape, Flatten, Squeeze, Unsqueeze work in ONNX order (a RESHAPE view of the tensor
 * in ONNX order); Transpose is composed with the layout permutation (no node when the result
 * is the identity); MatMul and Gemm (transA/transB, alpha and beta folded into the constants)
 * become MATMUL (+ ADD).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

static keyer_status act_input(kr_imp_ctx *c, int i, kr_imp_value **x)
{
    KR_IMP_TRY(kr_imp_input(c, i, x));
    if ((*x)->kind != KR_IMP_ACT)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input %d '%s' is not a computed tensor "
                           "(keyer needs every data input of this operator computed)", i,
                           (*x)->name);
    return KEYER_OK;
}

static void note_batch_axis(kr_imp_ctx *c, int graph_axis)
{
    if (graph_axis == 0)
        c->fixed_batch = 1;
}

/* Reshape, Flatten, Squeeze, Unsqueeze: a view of the ONNX-order tensor. */
static keyer_status map_view(kr_imp_ctx *c, const char *op)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    int rank;
    int64_t dims[KR_IMP_MAX_RANK];
    if (!strcmp(op, "Reshape")) {
        kr_imp_value *s;
        int64_t allowzero = 0;
        KR_IMP_TRY(kr_imp_input(c, 1, &s));
        if (c->opset < 5 || s->kind != KR_IMP_CONST)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "the shape is not a constant (a "
                               "shape subgraph keyer could not fold)");
        if (c->opset >= 14)
            KR_IMP_TRY(kr_imp_attr_int(c, "allowzero", 0, &allowzero));
        KR_IMP_TRY(kr_imp_reshape_dims(c, x->rank, x->dims, s, (int)allowzero, &rank, dims));
        if (rank < 1 || dims[0] != x->dims[0])
            c->fixed_batch = 1;
    } else if (!strcmp(op, "Flatten")) {
        int64_t axis_attr;
        int axis;
        KR_IMP_TRY(kr_imp_attr_int(c, "axis", 1, &axis_attr));
        KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, x->rank + 1, &axis));
        dims[0] = dims[1] = 1;
        for (int d = 0; d < x->rank; d++)
            dims[d < axis ? 0 : 1] *= x->dims[d];
        rank = 2;
        if (axis != 1)
            c->fixed_batch = 1;
    } else {
        KR_IMP_TRY(kr_imp_squeeze_dims(c, op[0] == 'U', x->rank, x->dims, &rank, dims));
        if (rank < 1 || dims[0] != x->dims[0])
            c->fixed_batch = 1;
    }
    if (rank < 1)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "makes a scalar of a computed tensor");
    int src, yt;
    KR_IMP_TRY(kr_imp_onnx_order(c, x, &src));
    KR_IMP_TRY(kr_imp_out_act(c, 0, rank, dims, 0, &yt));
    return kr_imp_emit(c, KR_OP_RESHAPE, 1, &src, yt) ? KEYER_OK : c->err->status;
}

static keyer_status map_transpose(kr_imp_ctx *c)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    const int64_t *perm;
    size_t n;
    KR_IMP_TRY(kr_imp_attr_ints(c, "perm", &perm, &n));
    int r = x->rank, q[KR_IMP_MAX_RANK];
    if (n && (int)n != r)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "perm has %zu entries for rank %d", n, r);
    unsigned seen = 0;
    for (int d = 0; d < r; d++) {
        int64_t v = n ? perm[d] : r - 1 - d;
        if (v < 0 || v >= r || (seen & (1u << v)))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "perm is not a permutation of 0..%d",
                               r - 1);
        seen |= 1u << v;
        q[d] = (int)v;
    }
    int64_t od[KR_IMP_MAX_RANK];
    for (int d = 0; d < r; d++)
        od[d] = x->dims[q[d]];
    /* graph y[i] = ONNX y[P[i]] = ONNX x[q[P[i]]] = graph x[Pinv[q[P[i]]]] */
    static const int P[4] = {0, 2, 3, 1}, Pinv[4] = {0, 3, 1, 2};
    int out_nhwc = r == 4, kp[KR_MAX_DIMS], identity = 1;
    for (int i = 0; i < r; i++) {
        int o = out_nhwc ? q[P[i]] : q[i];
        kp[i] = x->nhwc ? Pinv[o] : o;
        identity &= kp[i] == i;
    }
    if (identity)
        return kr_imp_set_act(c, 0, x->tensor, r, od, out_nhwc);
    if (kp[0] != 0)
        c->fixed_batch = 1;
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, r, od, out_nhwc, &yt));
    kr_node *nd = kr_imp_emit(c, KR_OP_TRANSPOSE, 1, &x->tensor, yt);
    if (!nd)
        return c->err->status;
    memcpy(nd->p.transpose.perm, kp, (size_t)r * sizeof(int));
    return KEYER_OK;
}

static keyer_status map_concat(kr_imp_ctx *c)
{
    int n = (int)c->node->n_input;
    kr_imp_value *first;
    KR_IMP_TRY(act_input(c, 0, &first));
    int64_t axis_attr;
    int axis, rank = first->rank;
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", c->opset < 4 ? 1 : 0, &axis_attr));
    KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, rank, &axis));
    if (n > KR_MAX_NODE_INPUTS)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%d inputs (keyer concatenates up to %d)",
                           n, KR_MAX_NODE_INPUTS);
    int nhwc = rank == 4; /* rank-4 inputs are taken in NHWC */
    int ins[KR_MAX_NODE_INPUTS];
    int64_t od[KR_IMP_MAX_RANK];
    memcpy(od, first->dims, sizeof(od));
    od[axis] = 0;
    for (int i = 0; i < n; i++) {
        kr_imp_value *v;
        KR_IMP_TRY(act_input(c, i, &v));
        if (v->rank != rank)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input %d has rank %d, not %d", i,
                               v->rank, rank);
        for (int d = 0; d < rank; d++)
            if (d != axis && v->dims[d] != first->dims[d])
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input %d '%s' differs from input "
                                   "0 in dimension %d", i, v->name, d);
        od[axis] += v->dims[axis];
        if (nhwc)
            KR_IMP_TRY(kr_imp_nhwc(c, v, &ins[i]));
        else
            ins[i] = v->tensor;
    }
    int ka = kr_imp_axis(rank, nhwc, axis);
    note_batch_axis(c, ka);
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, rank, od, nhwc, &yt));
    kr_node *nd = kr_imp_emit(c, KR_OP_CONCATENATION, n, ins, yt);
    if (!nd)
        return c->err->status;
    nd->p.concat.axis = ka;
    return KEYER_OK;
}

/* One SLICE of @p x into node output @p out with ONNX start/step/count per dimension. */
static keyer_status emit_slice(kr_imp_ctx *c, const kr_imp_value *x, int out,
                               const int64_t *start, const int64_t *step, const int64_t *count)
{
    for (int d = 0; d < x->rank; d++) {
        if (count[d] < 1)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "the result is empty along axis %d",
                               d);
        if (count[d] != x->dims[d] || step[d] != 1)
            note_batch_axis(c, kr_imp_axis(x->rank, x->nhwc, d));
    }
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, out, x->rank, count, x->nhwc, &yt));
    kr_node *nd = kr_imp_emit(c, KR_OP_SLICE, 1, &x->tensor, yt);
    if (!nd)
        return c->err->status;
    for (int d = 0; d < x->rank; d++) {
        int k = kr_imp_axis(x->rank, x->nhwc, d);
        nd->p.slice.start[k] = (int)start[d];
        nd->p.slice.step[k] = (int)step[d];
    }
    return KEYER_OK;
}

static keyer_status map_slice(kr_imp_ctx *c)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    int64_t start[KR_IMP_MAX_RANK], step[KR_IMP_MAX_RANK], count[KR_IMP_MAX_RANK];
    KR_IMP_TRY(kr_imp_slice_params(c, x->rank, x->dims, start, step, count));
    int whole = 1;
    for (int d = 0; d < x->rank; d++)
        whole &= start[d] == 0 && step[d] == 1 && count[d] == x->dims[d];
    if (whole)
        return kr_imp_set_act(c, 0, x->tensor, x->rank, x->dims, x->nhwc);
    return emit_slice(c, x, 0, start, step, count);
}

static keyer_status map_split(kr_imp_ctx *c)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    int64_t axis_attr;
    int axis, n = kr_imp_n_outputs(c);
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", 0, &axis_attr));
    KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, x->rank, &axis));
    int64_t parts[64];
    int np = 0;
    if (n < 1 || n > 64)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%d outputs", n);
    if (c->opset < 13) {
        const int64_t *s;
        size_t ns;
        KR_IMP_TRY(kr_imp_attr_ints(c, "split", &s, &ns));
        if (ns > 64)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "split has %zu entries", ns);
        if (ns) /* an absent list is NULL */
            memcpy(parts, s, ns * sizeof(int64_t));
        np = (int)ns;
    } else {
        kr_imp_value *s;
        KR_IMP_TRY(kr_imp_input(c, 1, &s));
        if (s->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_ints(c, s, "split", parts, 64, &np));
    }
    int64_t len = x->dims[axis];
    if (np == 0) { /* equal parts; from opset 18 the last may be smaller */
        int64_t each = (len + n - 1) / n;
        if (c->opset < 18 && len % n)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%lld does not split into %d equal "
                               "parts", (long long)len, n);
        for (int i = 0; i < n; i++)
            parts[i] = i < n - 1 ? each : len - each * (n - 1);
        np = n;
    }
    int64_t sum = 0;
    for (int i = 0; i < np; i++) { /* each in 1..len first: then the sum cannot overflow */
        if (parts[i] < 1 || parts[i] > len)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "split part %d is %lld (of an axis of "
                               "%lld)", i, (long long)parts[i], (long long)len);
        sum += parts[i];
    }
    if (np != n || sum != len)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "split sizes do not add up to %lld in %d "
                           "parts", (long long)len, n);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t start[KR_IMP_MAX_RANK], step[KR_IMP_MAX_RANK], count[KR_IMP_MAX_RANK];
        for (int d = 0; d < x->rank; d++) {
            start[d] = 0;
            step[d] = 1;
            count[d] = x->dims[d];
        }
        start[axis] = at;
        count[axis] = parts[i];
        at += parts[i];
        if (!c->node->output[i][0])
            continue;
        KR_IMP_TRY(emit_slice(c, x, i, start, step, count));
    }
    return KEYER_OK;
}

static keyer_status map_softmax(kr_imp_ctx *c)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    int64_t axis_attr;
    int axis;
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", c->opset < 13 ? 1 : -1, &axis_attr));
    KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, x->rank, &axis));
    if (c->opset >= 13 || axis == x->rank - 1) {
        int ka = kr_imp_axis(x->rank, x->nhwc, axis);
        note_batch_axis(c, ka);
        int yt;
        KR_IMP_TRY(kr_imp_out_act(c, 0, x->rank, x->dims, x->nhwc, &yt));
        kr_node *nd = kr_imp_emit(c, KR_OP_SOFTMAX, 1, &x->tensor, yt);
        if (!nd)
            return c->err->status;
        nd->p.axis.axis = ka;
        return KEYER_OK;
    }
    /* Before opset 13: softmax over the flattened axes >= axis (a 2-D coercion). */
    int src;
    KR_IMP_TRY(kr_imp_onnx_order(c, x, &src));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < axis)
            outer *= x->dims[d];
        else
            inner *= x->dims[d];
    }
    if (axis == 0)
        c->fixed_batch = 1;
    int kd[2] = {(int)outer, (int)inner};
    char name[256];
    int flat = kr_imp_new_act(c, kr_imp_name(c, c->node->output[0], "flat", name, sizeof(name)),
                              2, kd);
    if (flat < 0 || !kr_imp_emit(c, KR_OP_RESHAPE, 1, &src, flat))
        return c->err->status;
    int soft = kr_imp_new_act(c, kr_imp_name(c, c->node->output[0], "softmax", name,
                                             sizeof(name)),
                              2, kd);
    kr_node *nd = soft < 0 ? NULL : kr_imp_emit(c, KR_OP_SOFTMAX, 1, &flat, soft);
    if (!nd)
        return c->err->status;
    nd->p.axis.axis = 1;
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, x->rank, x->dims, 0, &yt));
    return kr_imp_emit(c, KR_OP_RESHAPE, 1, &soft, yt) ? KEYER_OK : c->err->status;
}

/* ArgMax, ReduceMean, ReduceMax: the kept dimensions stay in order in either layout unless a
 * permuted tensor loses an axis other than C; then it is taken in ONNX order. */
static keyer_status map_reduce(kr_imp_ctx *c, const char *op)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    int argmax = !strcmp(op, "ArgMax");
    int64_t keep, axes[KR_IMP_MAX_RANK];
    int n_axes = 0;
    KR_IMP_TRY(kr_imp_attr_int(c, "keepdims", 1, &keep));
    if (argmax) {
        int64_t a;
        KR_IMP_TRY(kr_imp_attr_int(c, "axis", 0, &a));
        axes[n_axes++] = a;
    } else {
        const int64_t *a;
        size_t n;
        KR_IMP_TRY(kr_imp_attr_ints(c, "axes", &a, &n));
        if (n > KR_IMP_MAX_RANK)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu axes", n);
        if (n) /* an absent list is NULL */
            memcpy(axes, a, n * sizeof(int64_t));
        n_axes = (int)n;
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_input(c, 1, &v));
        if (v->kind != KR_IMP_ABSENT && !(v->kind == KR_IMP_CONST && v->c.count == 0))
            KR_IMP_TRY(kr_imp_const_ints(c, v, "axes", axes, KR_IMP_MAX_RANK, &n_axes));
        if (n_axes == 0) {
            int64_t noop;
            KR_IMP_TRY(kr_imp_attr_int(c, "noop_with_empty_axes", 0, &noop));
            if (noop)
                return kr_imp_set_act(c, 0, x->tensor, x->rank, x->dims, x->nhwc);
            for (int d = 0; d < x->rank; d++)
                axes[n_axes++] = d;
        }
    }
    unsigned mask = 0;
    for (int k = 0; k < n_axes; k++) {
        int a;
        KR_IMP_TRY(kr_imp_norm_axis(c, axes[k], x->rank, &a));
        mask |= 1u << a;
    }
    int nhwc = x->nhwc && (keep || mask == 2u); /* only C dropped keeps N, H, W in order */
    int src = x->tensor;
    if (x->nhwc && !nhwc)
        KR_IMP_TRY(kr_imp_onnx_order(c, x, &src));
    int64_t od[KR_IMP_MAX_RANK];
    int rank = 0;
    int32_t kaxes[KR_MAX_DIMS];
    int nk = 0;
    for (int d = 0; d < x->rank; d++) {
        if (mask & (1u << d)) {
            kaxes[nk++] = kr_imp_axis(x->rank, nhwc, d);
            note_batch_axis(c, d);
            if (keep)
                od[rank++] = 1;
        } else {
            od[rank++] = x->dims[d];
        }
    }
    if (rank < 1)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "reduces to a scalar");
    int out_nhwc = nhwc && rank == 4;
    int kd[KR_MAX_DIMS];
    KR_IMP_TRY(kr_imp_dims(c, rank, od, out_nhwc, kd));
    int yt = argmax ? -1 : 0;
    if (argmax) { /* INT32 indices */
        yt = kr_imp_new_act(c, c->node->output[0], rank, kd);
        if (yt < 0)
            return c->err->status;
        c->tensors[yt].dtype = KR_DTYPE_I32;
        KR_IMP_TRY(kr_imp_set_act(c, 0, yt, rank, od, out_nhwc));
        kr_node *nd = kr_imp_emit(c, KR_OP_ARGMAX, 1, &src, yt);
        if (!nd)
            return c->err->status;
        int64_t last;
        KR_IMP_TRY(kr_imp_attr_int(c, "select_last_index", 0, &last));
        nd->p.argmax.axis = kaxes[0];
        nd->p.argmax.keep_dims = keep != 0;
        nd->p.argmax.select_last_index = last != 0;
        return KEYER_OK;
    }
    char name[256];
    int at = kr_imp_new_const_i32(c, kr_imp_name(c, c->node->output[0], "axes", name,
                                                 sizeof(name)),
                                  1, &nk, kaxes);
    if (at < 0)
        return c->err->status;
    KR_IMP_TRY(kr_imp_out_act(c, 0, rank, od, out_nhwc, &yt));
    int ins[2] = {src, at};
    kr_node *nd = kr_imp_emit(c, strcmp(op, "ReduceMax") ? KR_OP_MEAN : KR_OP_REDUCE_MAX, 2, ins,
                              yt);
    if (!nd)
        return c->err->status;
    nd->p.mean.keep_dims = keep != 0;
    return KEYER_OK;
}

static keyer_status map_gather(kr_imp_ctx *c)
{
    kr_imp_value *x, *idx;
    KR_IMP_TRY(act_input(c, 0, &x));
    KR_IMP_TRY(kr_imp_input(c, 1, &idx));
    if (idx->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "indices '%s' are computed; keyer "
                           "gathers with constant indices", idx->name);
    int64_t axis_attr;
    int axis;
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", 0, &axis_attr));
    KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, x->rank, &axis));
    int rank = x->rank + idx->c.rank - 1;
    if (rank < 1 || rank > KR_MAX_DIMS || idx->c.count > ((size_t)1 << 24))
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "the result has rank %d", rank);
    int32_t *iv = malloc((idx->c.count ? idx->c.count : 1) * sizeof(int32_t));
    if (!iv)
        return kr_imp_oom(c);
    for (size_t j = 0; j < idx->c.count; j++) {
        int64_t i = kr_imp_const_geti(&idx->c, j);
        if (i < 0)
            i += x->dims[axis];
        if (i < 0 || i >= x->dims[axis]) {
            free(iv);
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "index %lld is outside 0..%lld",
                               (long long)kr_imp_const_geti(&idx->c, j),
                               (long long)x->dims[axis] - 1);
        }
        iv[j] = (int32_t)i;
    }
    int nhwc = x->nhwc && idx->c.rank == 1; /* rank kept: the layout too */
    int src = x->tensor;
    if (x->nhwc && !nhwc) {
        keyer_status st = kr_imp_onnx_order(c, x, &src);
        if (st != KEYER_OK) {
            free(iv);
            return st;
        }
    }
    int id[KR_MAX_DIMS];
    for (int d = 0; d < idx->c.rank; d++)
        id[d] = (int)idx->c.dims[d];
    int it = kr_imp_new_const_i32(c, idx->name, idx->c.rank, id, iv);
    free(iv);
    if (it < 0)
        return c->err->status;
    int64_t od[KR_IMP_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++)
        od[r++] = x->dims[d];
    for (int d = 0; d < idx->c.rank; d++)
        od[r++] = idx->c.dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        od[r++] = x->dims[d];
    int ka = kr_imp_axis(x->rank, nhwc, axis), yt;
    note_batch_axis(c, ka);
    KR_IMP_TRY(kr_imp_out_act(c, 0, rank, od, nhwc && rank == 4, &yt));
    int ins[2] = {src, it};
    kr_node *nd = kr_imp_emit(c, KR_OP_GATHER, 2, ins, yt);
    if (!nd)
        return c->err->status;
    nd->p.axis.axis = ka;
    return KEYER_OK;
}

static keyer_status map_pad(kr_imp_ctx *c)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, 0, &x));
    const char *mode_s;
    KR_IMP_TRY(kr_imp_attr_string(c, "mode", "constant", &mode_s));
    kr_pad_mode mode;
    if (!strcmp(mode_s, "constant")) mode = KR_PAD_CONSTANT;
    else if (!strcmp(mode_s, "reflect")) mode = KR_PAD_REFLECT;
    else if (!strcmp(mode_s, "edge")) mode = KR_PAD_EDGE;
    else return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "mode '%s'", mode_s);
    int r = x->rank;
    int64_t pads[2 * KR_IMP_MAX_RANK];
    int np;
    float value = 0;
    int64_t axes[KR_IMP_MAX_RANK];
    int na = 0;
    if (c->opset < 11) {
        const int64_t *p;
        size_t n;
        KR_IMP_TRY(kr_imp_attr_ints(c, c->opset < 2 ? "paddings" : "pads", &p, &n));
        if (n > 2 * KR_IMP_MAX_RANK)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu pads", n);
        if (n) /* an absent list is NULL */
            memcpy(pads, p, n * sizeof(int64_t));
        np = (int)n;
        KR_IMP_TRY(kr_imp_attr_float(c, "value", 0.0f, &value));
    } else {
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_input(c, 1, &v));
        KR_IMP_TRY(kr_imp_const_ints(c, v, "pads", pads, 2 * KR_IMP_MAX_RANK, &np));
        KR_IMP_TRY(kr_imp_input(c, 2, &v));
        if (v->kind != KR_IMP_ABSENT && !(v->kind == KR_IMP_CONST && v->c.count == 0))
            KR_IMP_TRY(kr_imp_const_scalar(c, v, "constant_value", &value));
        KR_IMP_TRY(kr_imp_input(c, 3, &v));
        if (v->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_ints(c, v, "axes", axes, KR_IMP_MAX_RANK, &na));
    }
    int64_t before[KR_IMP_MAX_RANK] = {0}, after[KR_IMP_MAX_RANK] = {0};
    int listed = na ? na : r;
    if (np != 2 * listed)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%d pads for %d axes", np, listed);
    for (int k = 0; k < listed; k++) {
        int a = k;
        if (na)
            KR_IMP_TRY(kr_imp_norm_axis(c, axes[k], r, &a));
        before[a] = pads[k];
        after[a] = pads[listed + k];
    }
    /* Negative pads crop: a SLICE first. */
    int crop = 0;
    int64_t start[KR_IMP_MAX_RANK], count[KR_IMP_MAX_RANK];
    for (int d = 0; d < r; d++) {
        /* range first, so the arithmetic below cannot overflow (a pad may be INT64_MIN) */
        if (before[d] > (1 << 24) || after[d] > (1 << 24))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "pads of axis %d are too large", d);
        if (before[d] < -x->dims[d] || after[d] < -x->dims[d])
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "negative pads of axis %d (%lld, %lld) "
                               "crop more than its %lld elements", d, (long long)before[d],
                               (long long)after[d], (long long)x->dims[d]);
        start[d] = before[d] < 0 ? -before[d] : 0;
        count[d] = x->dims[d] - start[d] - (after[d] < 0 ? -after[d] : 0);
        crop |= before[d] < 0 || after[d] < 0;
        if (count[d] < 1)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "negative pads remove all of axis %d",
                               d);
    }
    int src = x->tensor;
    kr_imp_value cropped = *x;
    if (crop) {
        int kd[KR_MAX_DIMS];
        char name[256];
        KR_IMP_TRY(kr_imp_dims(c, r, count, x->nhwc, kd));
        src = kr_imp_new_act(c, kr_imp_name(c, c->node->output[0], "crop", name, sizeof(name)), r,
                             kd);
        kr_node *nd = src < 0 ? NULL : kr_imp_emit(c, KR_OP_SLICE, 1, &x->tensor, src);
        if (!nd)
            return c->err->status;
        for (int d = 0; d < r; d++) {
            int k = kr_imp_axis(r, x->nhwc, d);
            nd->p.slice.start[k] = (int)start[d];
            nd->p.slice.step[k] = 1;
            if (count[d] != x->dims[d])
                note_batch_axis(c, k);
        }
        memcpy(cropped.dims, count, sizeof(count));
    }
    int32_t kp[2 * KR_MAX_DIMS];
    int64_t od[KR_IMP_MAX_RANK];
    int any = 0;
    for (int d = 0; d < r; d++) {
        int k = kr_imp_axis(r, x->nhwc, d);
        kp[2 * k] = (int32_t)(before[d] > 0 ? before[d] : 0);
        kp[2 * k + 1] = (int32_t)(after[d] > 0 ? after[d] : 0);
        od[d] = cropped.dims[d] + kp[2 * k] + kp[2 * k + 1];
        any |= kp[2 * k] || kp[2 * k + 1];
        if (k == 0 && (kp[0] || kp[1]))
            c->fixed_batch = 1;
    }
    if (!any) {
        if (!crop)
            return kr_imp_set_act(c, 0, x->tensor, r, x->dims, x->nhwc);
        return kr_imp_set_act(c, 0, src, r, cropped.dims, x->nhwc);
    }
    char name[256];
    int pd[2] = {r, 2};
    int pt = kr_imp_new_const_i32(c, kr_imp_name(c, c->node->output[0], "pads", name,
                                                 sizeof(name)),
                                  2, pd, kp);
    if (pt < 0)
        return c->err->status;
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, r, od, x->nhwc, &yt));
    int ins[2] = {src, pt};
    kr_node *nd = kr_imp_emit(c, KR_OP_PAD, 2, ins, yt);
    if (!nd)
        return c->err->status;
    nd->p.pad.mode = mode;
    nd->p.pad.value = value;
    return KEYER_OK;
}

/* A float graph constant of @p k transposed (2-D, when @p trans) and scaled by @p scale, with
 * @p rank - 2 leading 1s. */
static keyer_status matrix_const(kr_imp_ctx *c, const kr_imp_value *v, int trans, float scale,
                                 int rank, int *tensor)
{
    const kr_imp_const *k = &v->c;
    if (k->rank < 2 && trans)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "'%s' is not a matrix", v->name);
    if (k->rank > rank || rank > KR_MAX_DIMS)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "'%s' has rank %d", v->name, k->rank);
    float *data = malloc((k->count ? k->count : 1) * sizeof(float));
    if (!data)
        return kr_imp_oom(c);
    int64_t rows = k->rank >= 2 ? k->dims[k->rank - 2] : 1, cols = k->dims[k->rank - 1];
    for (size_t j = 0; j < k->count; j++) {
        if (trans) { /* output [cols, rows] */
            size_t r0 = j / (size_t)rows, c0 = j % (size_t)rows;
            data[j] = scale * (float)kr_imp_const_get(k, c0 * (size_t)cols + r0);
        } else {
            data[j] = scale * (float)kr_imp_const_get(k, j);
        }
    }
    int dims[KR_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        dims[d] = d < rank - k->rank ? 1 : (int)k->dims[d - (rank - k->rank)];
    if (trans) {
        dims[rank - 2] = (int)cols;
        dims[rank - 1] = (int)rows;
    }
    *tensor = kr_imp_new_const_f32(c, v->name, rank, dims, data);
    return *tensor < 0 ? c->err->status : KEYER_OK;
}

static keyer_status map_matmul(kr_imp_ctx *c, int gemm)
{
    kr_imp_value *a, *b, *bias = NULL;
    KR_IMP_TRY(act_input(c, 0, &a));
    KR_IMP_TRY(kr_imp_input(c, 1, &b));
    int64_t ta = 0, tb = 0;
    float alpha = 1, beta = 1;
    if (gemm) {
        KR_IMP_TRY(kr_imp_attr_int(c, "transA", 0, &ta));
        KR_IMP_TRY(kr_imp_attr_int(c, "transB", 0, &tb));
        KR_IMP_TRY(kr_imp_attr_float(c, "alpha", 1.0f, &alpha));
        KR_IMP_TRY(kr_imp_attr_float(c, "beta", 1.0f, &beta));
        KR_IMP_TRY(kr_imp_input(c, 2, &bias));
        if (a->rank != 2)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "A '%s' has rank %d, not 2", a->name,
                               a->rank);
        if (b->kind != KR_IMP_CONST || (bias->kind == KR_IMP_ACT))
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "B or C is computed; keyer maps Gemm "
                               "with constant B and C");
    }
    if (a->rank < 2)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "A '%s' has rank %d (keyer multiplies "
                           "rank 2 and more)", a->name, a->rank);
    kr_imp_value at_val; /* transA: A^T through a TRANSPOSE (axis 0 moves: fixed batch) */
    if (ta) {
        int64_t td[2] = {a->dims[1], a->dims[0]};
        int kd[2] = {(int)td[0], (int)td[1]};
        char name[256];
        int t = kr_imp_new_act(c, kr_imp_name(c, a->name, "T", name, sizeof(name)), 2, kd);
        kr_node *nd = t < 0 ? NULL : kr_imp_emit(c, KR_OP_TRANSPOSE, 1, &a->tensor, t);
        if (!nd)
            return c->err->status;
        nd->p.transpose.perm[0] = 1;
        nd->p.transpose.perm[1] = 0;
        c->fixed_batch = 1;
        at_val = *a;
        at_val.tensor = t;
        at_val.dims[0] = td[0];
        at_val.dims[1] = td[1];
        at_val.other = -1;
        a = &at_val;
    }
    int brank = b->kind == KR_IMP_ACT ? b->rank : b->c.rank;
    if (brank < 2)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "B '%s' has rank %d", b->name, brank);
    const int64_t *bd = b->kind == KR_IMP_ACT ? b->dims : b->c.dims;
    int rank = a->rank > brank ? a->rank : brank;
    int64_t K = a->dims[a->rank - 1], M = a->dims[a->rank - 2];
    int64_t KB = tb ? bd[brank - 1] : bd[brank - 2], N = tb ? bd[brank - 2] : bd[brank - 1];
    if (K != KB)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "A has %lld columns and B %lld rows",
                           (long long)K, (long long)KB);
    if (a->rank != rank)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "A '%s' has a lower rank than B",
                           a->name);
    int at, bt;
    KR_IMP_TRY(kr_imp_onnx_order(c, a, &at));
    if (b->kind == KR_IMP_CONST)
        KR_IMP_TRY(matrix_const(c, b, (int)tb, alpha, rank, &bt));
    else if (b->rank != rank)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "computed B '%s' has rank %d, not %d",
                           b->name, b->rank, rank);
    else
        KR_IMP_TRY(kr_imp_onnx_order(c, b, &bt));
    int64_t od[KR_IMP_MAX_RANK];
    for (int d = 0; d < rank - 2; d++) {
        int64_t x = a->dims[d], y = bd[d - (rank - brank)];
        if (d - (rank - brank) < 0)
            y = 1;
        if (x != y && x != 1 && y != 1)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "leading dimensions do not broadcast");
        od[d] = x == 1 ? y : x;
    }
    od[rank - 2] = M;
    od[rank - 1] = N;
    /* A rank-2 product with a computed B mixes rows of both operands; with a constant B each
     * row of A is independent, so axis 0 stays a batch axis (the validator's rule too). */
    if (rank == 2 && b->kind != KR_IMP_CONST)
        c->fixed_batch = 1;
    int has_bias = gemm && bias->kind == KR_IMP_CONST && beta != 0;
    int yt;
    if (has_bias) {
        int kd[KR_MAX_DIMS];
        char name[256];
        KR_IMP_TRY(kr_imp_dims(c, rank, od, 0, kd));
        yt = kr_imp_new_act(c, kr_imp_name(c, c->node->output[0], "matmul", name, sizeof(name)),
                            rank, kd);
        if (yt < 0)
            return c->err->status;
    } else {
        KR_IMP_TRY(kr_imp_out_act(c, 0, rank, od, 0, &yt));
    }
    int ins[2] = {at, bt};
    if (!kr_imp_emit(c, KR_OP_MATMUL, 2, ins, yt))
        return c->err->status;
    if (!has_bias)
        return KEYER_OK;
    int ct, zt;
    KR_IMP_TRY(matrix_const(c, bias, 0, beta, bias->c.rank < 1 ? 1 : bias->c.rank, &ct));
    if (bias->c.rank < 1)
        c->tensors[ct].rank = 0;
    KR_IMP_TRY(kr_imp_out_act(c, 0, rank, od, 0, &zt));
    int in2[2] = {yt, ct};
    return kr_imp_emit(c, KR_OP_ADD, 2, in2, zt) ? KEYER_OK : c->err->status;
}

keyer_status kr_imp_map_tensor(kr_imp_ctx *c, const char *op, int *done)
{
    *done = 1;
    if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
        !strcmp(op, "Unsqueeze"))
        return map_view(c, op);
    if (!strcmp(op, "Transpose")) return map_transpose(c);
    if (!strcmp(op, "Concat")) return map_concat(c);
    if (!strcmp(op, "Slice")) return map_slice(c);
    if (!strcmp(op, "Split")) return map_split(c);
    if (!strcmp(op, "Softmax")) return map_softmax(c);
    if (!strcmp(op, "ArgMax") || !strcmp(op, "ReduceMean") || !strcmp(op, "ReduceMax"))
        return map_reduce(c, op);
    if (!strcmp(op, "Gather")) return map_gather(c);
    if (!strcmp(op, "Pad")) return map_pad(c);
    if (!strcmp(op, "MatMul")) return map_matmul(c, 0);
    if (!strcmp(op, "Gemm")) return map_matmul(c, 1);
    *done = 0;
    return KEYER_OK;
}
