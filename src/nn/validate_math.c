/*
 * Shape rules of the element-wise and reducing operators (validate_internal.h): ADD, MUL, SUB,
 * DIV (NumPy broadcasting), PRELU, the unary operators and their parameters, MEAN and
 * REDUCE_MAX (constant axes), SOFTMAX, ARGMAX (INT32 output) and MATMUL.
 */
#include <math.h>

#include "nn/validate_internal.h"

keyer_status kr_val_check_binary(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ANY, KR_DTYPE_F32, -1, "lhs"));
    TRY(want_input(v, n, 1, WANT_ANY, KR_DTYPE_F32, -1, "rhs"));
    const kr_tensor *a = input(v, n, 0), *b = input(v, n, 1);
    if (kr_tensor_is_const(a) && kr_tensor_is_const(b))
        return node_fail(v, n, UNSUP, "both inputs are constants");
    int rank, dims[KR_MAX_DIMS];
    TRY(broadcast(v, n, a, b, &rank, dims));
    /* An activation operand must line up with the batch axis of the output. */
    for (int i = 0; i < 2; i++) {
        const kr_tensor *t = i ? b : a;
        if (!kr_tensor_is_const(t) && t->rank != rank)
            return node_fail(v, n, UNSUP, "input %d, tensor '%s', has rank %d but the result has "
                             "rank %d; computed operands must span the batch axis", i, t->name,
                             t->rank, rank);
    }
    return expect_shape(v, n, rank, dims);
}

keyer_status kr_val_check_prelu(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_F32, -1, "alpha"));
    const kr_tensor *x = input(v, n, 0), *alpha = input(v, n, 1);
    int rank, dims[KR_MAX_DIMS];
    TRY(broadcast(v, n, x, alpha, &rank, dims));
    int same = rank == x->rank;
    for (int d = 0; same && d < rank; d++)
        same = dims[d] == x->dims[d];
    if (!same) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "alpha '%s' %s is larger than the input '%s' %s", alpha->name,
                         shape_str(alpha, a, sizeof(a)), x->name, shape_str(x, b, sizeof(b)));
    }
    return expect_shape(v, n, x->rank, x->dims);
}

/* The parameters of the unary operators that take some (p.unary). */
static keyer_status check_unary_params(const vctx *v, const kr_node *n)
{
    float a = n->p.unary.alpha, b = n->p.unary.beta;
    switch (n->op) {
    case KR_OP_ELU:
    case KR_OP_LEAKY_RELU:
    case KR_OP_POW:
        if (!isfinite(a))
            return node_fail(v, n, BAD, "parameter alpha %g is not finite", (double)a);
        return KEYER_OK;
    case KR_OP_HARD_SIGMOID:
        if (!isfinite(a) || !isfinite(b))
            return node_fail(v, n, BAD, "alpha %g and beta %g are not both finite", (double)a,
                             (double)b);
        return KEYER_OK;
    case KR_OP_CLIP:
        if (isnan(a) || isnan(b) || a > b)
            return node_fail(v, n, BAD, "bounds [%g, %g] are not an interval (min <= max, "
                             "+-infinity for an absent bound)", (double)a, (double)b);
        return KEYER_OK;
    default:
        return KEYER_OK;
    }
}

keyer_status kr_val_check_unary(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    TRY(check_unary_params(v, n));
    const kr_tensor *x = input(v, n, 0);
    return expect_shape(v, n, x->rank, x->dims);
}

keyer_status kr_val_check_reduce(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_I32, -1, "axes"));
    const kr_tensor *x = input(v, n, 0), *axes = input(v, n, 1);
    if (axes->rank > 1)
        return node_fail(v, n, BAD, "axes tensor '%s' has rank %d; expected 0 or 1", axes->name,
                         axes->rank);
    const int32_t *ax = axes->data;
    size_t count = kr_tensor_elements(axes);
    unsigned mask = 0;
    for (size_t i = 0; i < count; i++) {
        int a = ax[i];
        if (a < -x->rank || a >= x->rank)
            return node_fail(v, n, BAD, "axis %d is outside the input's rank %d", a, x->rank);
        if (a < 0)
            a += x->rank;
        if (a == 0)
            TRY(batch_axis(v, n, "reduces"));
        mask |= 1u << a;
    }
    n->p.mean.keep_dims = n->p.mean.keep_dims != 0;
    n->p.mean.axes_mask = mask;
    int rank = 0, dims[KR_MAX_DIMS];
    for (int d = 0; d < x->rank; d++) {
        if (!(mask & (1u << d)))
            dims[rank++] = x->dims[d];
        else if (n->p.mean.keep_dims)
            dims[rank++] = 1;
    }
    return expect_shape(v, n, rank, dims);
}

keyer_status kr_val_check_softmax(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    const kr_tensor *x = input(v, n, 0);
    int axis = n->p.axis.axis;
    if (axis < 0 || axis >= x->rank)
        return node_fail(v, n, BAD, "axis %d is outside 0..%d", axis, x->rank - 1);
    if (axis == 0)
        TRY(batch_axis(v, n, "normalises along"));
    return expect_shape(v, n, x->rank, x->dims);
}

keyer_status kr_val_check_argmax(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    const kr_tensor *x = input(v, n, 0), *o = output(v, n);
    int axis = n->p.argmax.axis;
    if (axis < 0 || axis >= x->rank)
        return node_fail(v, n, BAD, "axis %d is outside 0..%d", axis, x->rank - 1);
    if (axis == 0)
        TRY(batch_axis(v, n, "searches along"));
    if ((unsigned)n->p.argmax.keep_dims > 1 || (unsigned)n->p.argmax.select_last_index > 1)
        return node_fail(v, n, BAD, "keep_dims %d and select_last_index %d are not 0 or 1",
                         n->p.argmax.keep_dims, n->p.argmax.select_last_index);
    if (o->dtype != KR_DTYPE_I32)
        return node_fail(v, n, BAD, "output '%s' is %s; ARG_MAX writes INT32 indices", o->name,
                         dtype_name(o->dtype));
    int rank = 0, dims[KR_MAX_DIMS];
    for (int d = 0; d < x->rank; d++) {
        if (d != axis)
            dims[rank++] = x->dims[d];
        else if (n->p.argmax.keep_dims)
            dims[rank++] = 1;
    }
    return expect_shape(v, n, rank, dims);
}

keyer_status kr_val_check_matmul(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ANY, KR_DTYPE_F32, -1, "A"));
    TRY(want_input(v, n, 1, WANT_ANY, KR_DTYPE_F32, -1, "B"));
    const kr_tensor *a = input(v, n, 0), *b = input(v, n, 1);
    if (kr_tensor_is_const(a) && kr_tensor_is_const(b))
        return node_fail(v, n, UNSUP, "both inputs are constants");
    int r = a->rank;
    if (r < 2 || b->rank != r) {
        char sa[96], sb[96];
        return node_fail(v, n, BAD, "A '%s' %s and B '%s' %s do not have one rank of at least 2",
                         a->name, shape_str(a, sa, sizeof(sa)), b->name,
                         shape_str(b, sb, sizeof(sb)));
    }
    int m = a->dims[r - 2], k = a->dims[r - 1], kb = b->dims[r - 2], nn = b->dims[r - 1];
    if (k != kb) {
        char sa[96], sb[96];
        return node_fail(v, n, BAD, "A '%s' %s has K = %d but B '%s' %s has %d rows", a->name,
                         shape_str(a, sa, sizeof(sa)), k, b->name, shape_str(b, sb, sizeof(sb)),
                         kb);
    }
    /* At rank 2, axis 0 is M of A and K of B: B (or A) computed means axis 0 is not a batch. */
    if (r == 2 && (kr_tensor_is_const(a) || !kr_tensor_is_const(b)))
        TRY(batch_axis(v, n, "multiplies along"));
    int dims[KR_MAX_DIMS];
    for (int d = 0; d < r - 2; d++) {
        int da = a->dims[d], db = b->dims[d];
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return node_fail(v, n, BAD, "leading dimensions of A '%s' %s and B '%s' %s do not "
                             "broadcast", a->name, shape_str(a, sa, sizeof(sa)), b->name,
                             shape_str(b, sb, sizeof(sb)));
        }
        dims[d] = da == 1 ? db : da;
    }
    dims[r - 2] = m;
    dims[r - 1] = nn;
    return expect_shape(v, n, r, dims);
}
