/*
 * ONNX element-wise operators onto keyer's graph. Unary: Relu, Sigmoid (LOGISTIC), Tanh, Exp,
 * Sqrt, Elu, LeakyRelu, HardSigmoid, HardSwish, Clip (RELU for [0, inf), RELU6 for [0, 6],
 * else CLIP; bounds from attributes before opset 11, constant inputs after), Pow with a
 * constant scalar exponent, PRelu (slope re-laid like a channel constant). Binary with NumPy
 * broadcasting: Add, Sub, Mul, Div (ranks equalised by prepending 1s; a constant operand is
 * re-laid to the computed operand's layout, two computed operands are brought to one layout).
 * Aliases: Identity, Dropout (inference), Cast between float types (keyer's graph is float32
 * and the runtime picks its precision). All keep the input's layout tag.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

static keyer_status act_input(kr_imp_ctx *c, kr_imp_value **x)
{
    KR_IMP_TRY(kr_imp_input(c, 0, x));
    if ((*x)->kind != KR_IMP_ACT)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input 0 '%s' is not a computed tensor",
                           (*x)->name);
    return KEYER_OK;
}

static keyer_status unary(kr_imp_ctx *c, kr_op op, float alpha, float beta)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, &x));
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, x->rank, x->dims, x->nhwc, &yt));
    kr_node *n = kr_imp_emit(c, op, 1, &x->tensor, yt);
    if (!n)
        return c->err->status;
    n->p.unary.alpha = alpha;
    n->p.unary.beta = beta;
    return KEYER_OK;
}

static keyer_status alias(kr_imp_ctx *c)
{
    kr_imp_value *x;
    KR_IMP_TRY(act_input(c, &x));
    for (int i = 1; i < kr_imp_n_outputs(c); i++)
        if (kr_imp_output_uses(c, i))
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "output %d (a training mask) is used",
                               i);
    return kr_imp_set_act(c, 0, x->tensor, x->rank, x->dims, x->nhwc);
}

static keyer_status map_clip(kr_imp_ctx *c)
{
    float lo = -INFINITY, hi = INFINITY;
    if (c->opset < 11) {
        KR_IMP_TRY(kr_imp_attr_float(c, "min", -INFINITY, &lo));
        KR_IMP_TRY(kr_imp_attr_float(c, "max", INFINITY, &hi));
    } else {
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_input(c, 1, &v));
        if (v->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_scalar(c, v, "min", &lo));
        KR_IMP_TRY(kr_imp_input(c, 2, &v));
        if (v->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_scalar(c, v, "max", &hi));
    }
    /* float's lowest/max stand for "no bound" in exported models */
    if (lo <= -3.0e38f)
        lo = -INFINITY;
    if (hi >= 3.0e38f)
        hi = INFINITY;
    if (lo == 0 && hi == INFINITY)
        return unary(c, KR_OP_RELU, 0, 0);
    if (lo == 0 && hi == 6)
        return unary(c, KR_OP_RELU6, 0, 0);
    if (!(lo <= hi))
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "min %g is above max %g", (double)lo,
                           (double)hi);
    return unary(c, KR_OP_CLIP, lo, hi);
}

static keyer_status map_prelu(kr_imp_ctx *c)
{
    kr_imp_value *x, *s;
    KR_IMP_TRY(act_input(c, &x));
    KR_IMP_TRY(kr_imp_input(c, 1, &s));
    if (s->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "slope '%s' is not a constant", s->name);
    int st, yt;
    /* A slope of shape [C] on an N-C-... tensor is ONNX's usual per-channel form (unidirectional
     * broadcasting would read it as the last axis only when that axis has C entries too). */
    if (s->c.rank == 1 && x->rank >= 3 && s->c.dims[0] == x->dims[1] && s->c.dims[0] > 1 &&
        x->dims[x->rank - 1] != s->c.dims[0]) {
        float *vals = malloc(s->c.count * sizeof(float));
        if (!vals)
            return kr_imp_oom(c);
        for (size_t j = 0; j < s->c.count; j++)
            vals[j] = (float)kr_imp_const_get(&s->c, j);
        keyer_status r = kr_imp_channel_const(c, s->name, vals, (int)s->c.count, x->rank,
                                              x->nhwc, &st);
        free(vals);
        KR_IMP_TRY(r);
    } else {
        KR_IMP_TRY(kr_imp_const_operand(c, s, x->rank, x->nhwc, &st));
    }
    KR_IMP_TRY(kr_imp_out_act(c, 0, x->rank, x->dims, x->nhwc, &yt));
    int ins[2] = {x->tensor, st};
    return kr_imp_emit(c, KR_OP_PRELU, 2, ins, yt) ? KEYER_OK : c->err->status;
}

/* Prepends 1s to computed @p v (ONNX order) up to @p rank: a RESHAPE view. */
static keyer_status rank_up(kr_imp_ctx *c, kr_imp_value *v, int rank, int *tensor, int *nhwc)
{
    if (v->rank == rank) {
        *tensor = v->tensor;
        *nhwc = v->nhwc;
        return KEYER_OK;
    }
    int src;
    KR_IMP_TRY(kr_imp_onnx_order(c, v, &src));
    int64_t od[KR_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        od[d] = d < rank - v->rank ? 1 : v->dims[d - (rank - v->rank)];
    int kd[KR_MAX_DIMS];
    KR_IMP_TRY(kr_imp_dims(c, rank, od, 0, kd));
    char name[256];
    int t = kr_imp_new_act(c, kr_imp_name(c, v->name, "rank", name, sizeof(name)), rank, kd);
    if (t < 0 || !kr_imp_emit(c, KR_OP_RESHAPE, 1, &src, t))
        return c->err->status;
    if (rank == 4) { /* a rank-4 operand: to NHWC like the other */
        kr_imp_value tmp = *v;
        tmp.tensor = t;
        tmp.rank = 4;
        memcpy(tmp.dims, od, sizeof(int64_t) * 4);
        tmp.nhwc = 0;
        tmp.other = -1;
        KR_IMP_TRY(kr_imp_nhwc(c, &tmp, tensor));
        *nhwc = 1;
        return KEYER_OK;
    }
    *tensor = t;
    *nhwc = 0;
    return KEYER_OK;
}

static keyer_status map_binary(kr_imp_ctx *c, kr_op op)
{
    kr_imp_value *a, *b;
    KR_IMP_TRY(kr_imp_input(c, 0, &a));
    KR_IMP_TRY(kr_imp_input(c, 1, &b));
    if (a->kind == KR_IMP_ABSENT || b->kind == KR_IMP_ABSENT)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "an operand is missing");
    int ra = a->kind == KR_IMP_ACT ? a->rank : a->c.rank;
    int rb = b->kind == KR_IMP_ACT ? b->rank : b->c.rank;
    int rank = ra > rb ? ra : rb;
    const int64_t *da = a->kind == KR_IMP_ACT ? a->dims : a->c.dims;
    const int64_t *db = b->kind == KR_IMP_ACT ? b->dims : b->c.dims;
    int64_t od[KR_IMP_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        int ia = d - (rank - ra), ib = d - (rank - rb);
        int64_t x = ia >= 0 ? da[ia] : 1, y = ib >= 0 ? db[ib] : 1;
        if (x != y && x != 1 && y != 1)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "shapes of '%s' and '%s' do not "
                               "broadcast (dimension %d: %lld and %lld)", a->name, b->name, d,
                               (long long)x, (long long)y);
        od[d] = x == 1 ? y : x;
    }
    /* A constant scalar exponent of Pow is an operator parameter. */
    int ta, tb, na = 0, nb = 0;
    if (a->kind == KR_IMP_ACT)
        KR_IMP_TRY(rank_up(c, a, rank, &ta, &na));
    if (b->kind == KR_IMP_ACT)
        KR_IMP_TRY(rank_up(c, b, rank, &tb, &nb));
    int nhwc = rank == 4 && (a->kind == KR_IMP_ACT ? na : 1) && (b->kind == KR_IMP_ACT ? nb : 1);
    if (rank == 4 && a->kind == KR_IMP_ACT && b->kind == KR_IMP_ACT && na != nb) {
        /* one layout for both: NHWC */
        if (!na) KR_IMP_TRY(kr_imp_nhwc(c, a, &ta));
        if (!nb) KR_IMP_TRY(kr_imp_nhwc(c, b, &tb));
        nhwc = 1;
    }
    if (rank == 4 && (a->kind != KR_IMP_ACT || b->kind != KR_IMP_ACT))
        nhwc = a->kind == KR_IMP_ACT ? na : nb;
    if (a->kind == KR_IMP_CONST)
        KR_IMP_TRY(kr_imp_const_operand(c, a, rank, nhwc, &ta));
    if (b->kind == KR_IMP_CONST)
        KR_IMP_TRY(kr_imp_const_operand(c, b, rank, nhwc, &tb));
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, rank, od, nhwc, &yt));
    int ins[2] = {ta, tb};
    return kr_imp_emit(c, op, 2, ins, yt) ? KEYER_OK : c->err->status;
}

static keyer_status map_pow(kr_imp_ctx *c)
{
    kr_imp_value *e;
    KR_IMP_TRY(kr_imp_input(c, 1, &e));
    if (e->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "exponent '%s' is computed; keyer takes "
                           "a constant exponent", e->name);
    float alpha;
    KR_IMP_TRY(kr_imp_const_scalar(c, e, "exponent", &alpha));
    return unary(c, KR_OP_POW, alpha, 0);
}

static keyer_status map_cast(kr_imp_ctx *c)
{
    int64_t to;
    KR_IMP_TRY(kr_imp_attr_int(c, "to", 0, &to));
    if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 &&
        to != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "casts a computed tensor to ONNX type "
                           "%lld; keyer computes in float", (long long)to);
    return alias(c);
}

keyer_status kr_imp_map_elementwise(kr_imp_ctx *c, const char *op, int *done)
{
    *done = 1;
    float a, b;
    if (!strcmp(op, "Relu")) return unary(c, KR_OP_RELU, 0, 0);
    if (!strcmp(op, "Sigmoid")) return unary(c, KR_OP_LOGISTIC, 0, 0);
    if (!strcmp(op, "Tanh")) return unary(c, KR_OP_TANH, 0, 0);
    if (!strcmp(op, "Exp")) return unary(c, KR_OP_EXP, 0, 0);
    if (!strcmp(op, "Sqrt")) return unary(c, KR_OP_SQRT, 0, 0);
    if (!strcmp(op, "HardSwish")) return unary(c, KR_OP_HARD_SWISH, 0, 0);
    if (!strcmp(op, "Elu")) {
        KR_IMP_TRY(kr_imp_attr_float(c, "alpha", 1.0f, &a));
        return unary(c, KR_OP_ELU, a, 0);
    }
    if (!strcmp(op, "LeakyRelu")) {
        KR_IMP_TRY(kr_imp_attr_float(c, "alpha", 0.01f, &a));
        return unary(c, KR_OP_LEAKY_RELU, a, 0);
    }
    if (!strcmp(op, "HardSigmoid")) {
        KR_IMP_TRY(kr_imp_attr_float(c, "alpha", 0.2f, &a));
        KR_IMP_TRY(kr_imp_attr_float(c, "beta", 0.5f, &b));
        return unary(c, KR_OP_HARD_SIGMOID, a, b);
    }
    if (!strcmp(op, "Clip")) return map_clip(c);
    if (!strcmp(op, "PRelu")) return map_prelu(c);
    if (!strcmp(op, "Pow")) return map_pow(c);
    if (!strcmp(op, "Add")) return map_binary(c, KR_OP_ADD);
    if (!strcmp(op, "Sub")) return map_binary(c, KR_OP_SUB);
    if (!strcmp(op, "Mul")) return map_binary(c, KR_OP_MUL);
    if (!strcmp(op, "Div")) return map_binary(c, KR_OP_DIV);
    if (!strcmp(op, "Identity") || !strcmp(op, "Dropout")) return alias(c);
    if (!strcmp(op, "Cast")) return map_cast(c);
    *done = 0;
    return KEYER_OK;
}
