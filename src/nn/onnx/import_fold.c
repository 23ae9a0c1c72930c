/*
 * Constant folding for the ONNX importer: nodes whose inputs are all constants (and Shape/Size
 * of any tensor, whose shape is static once the input sizes are fixed) are evaluated at load,
 * on the host, in int64 (every integer type and BOOL) or float. These are the shape subgraphs
 * PyTorch exports and the DequantizeLinear of quantized weights. The shape rules of Reshape,
 * Squeeze/Unsqueeze and Slice live here too; the mapping of those operators on computed
 * tensors (import_ops_tensor.c) uses them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

#define MAX_FOLD_ELEMENTS ((size_t)1 << 26)

static const char *const foldable_ops[] = {
    "Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice",
    "ConstantOfShape", "Range", "Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater",
    "Where", "Min", "Max", "Neg", "Abs", "Floor", "Ceil", "Sqrt", "Not", "Reciprocal",
    "Reshape", "Expand", "Identity", "Transpose", "Flatten", "DequantizeLinear",
    "QuantizeLinear", "Pow", "Mod", "And", "Or",
};

int kr_imp_foldable(const char *op)
{
    for (size_t i = 0; i < sizeof(foldable_ops) / sizeof(foldable_ops[0]); i++)
        if (strcmp(op, foldable_ops[i]) == 0)
            return 1;
    return 0;
}

static int is_float_type(int64_t t)
{
    return t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

static keyer_status need_const(kr_imp_ctx *c, int i, kr_imp_value **v)
{
    KR_IMP_TRY(kr_imp_input(c, i, v));
    if ((*v)->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input %d is missing", i);
    return KEYER_OK;
}

/* Offset into @p k of output element @p j of shape (orank, odims), NumPy broadcasting. */
static size_t bcast_offset(const kr_imp_const *k, int orank, const int64_t *odims, size_t j)
{
    size_t off = 0, stride = 1;
    for (int d = orank - 1; d >= 0; d--) {
        size_t idx = (size_t)(j % (size_t)odims[d]);
        j /= (size_t)odims[d];
        int kd = d - (orank - k->rank);
        if (kd >= 0) {
            if (k->dims[kd] != 1)
                off += idx * stride;
            stride *= (size_t)k->dims[kd];
        }
    }
    return off;
}

static keyer_status bcast_shape(kr_imp_ctx *c, const kr_imp_const *a, const kr_imp_const *b,
                                int *rank, int64_t *dims)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int d = 0; d < r; d++) {
        int ia = d - (r - a->rank), ib = d - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "constant shapes do not broadcast "
                               "(dimension %d: %lld and %lld)", d, (long long)da, (long long)db);
        dims[d] = da == 1 ? db : da;
    }
    *rank = r;
    return KEYER_OK;
}

static keyer_status fold_binary(kr_imp_ctx *c, const char *op)
{
    kr_imp_value *a, *b;
    KR_IMP_TRY(need_const(c, 0, &a));
    KR_IMP_TRY(need_const(c, 1, &b));
    int rank;
    int64_t dims[KR_IMP_MAX_RANK];
    KR_IMP_TRY(bcast_shape(c, &a->c, &b->c, &rank, dims));
    int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") ||
              !strcmp(op, "And") || !strcmp(op, "Or");
    int fl = !cmp && (a->c.is_float || b->c.is_float);
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, fl, rank, dims));
    if (fl)
        k.onnx_type = a->c.is_float ? a->c.onnx_type : b->c.onnx_type;
    else if (!cmp)
        k.onnx_type = a->c.onnx_type;
    else
        k.onnx_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    for (size_t j = 0; j < k.count; j++) {
        size_t ia = bcast_offset(&a->c, rank, dims, j), ib = bcast_offset(&b->c, rank, dims, j);
        if (fl) {
            double x = kr_imp_const_get(&a->c, ia), y = kr_imp_const_get(&b->c, ib), r;
            if (!strcmp(op, "Add")) r = x + y;
            else if (!strcmp(op, "Sub")) r = x - y;
            else if (!strcmp(op, "Mul")) r = x * y;
            else if (!strcmp(op, "Div")) r = x / y;
            else if (!strcmp(op, "Min")) r = x < y ? x : y;
            else if (!strcmp(op, "Max")) r = x > y ? x : y;
            else if (!strcmp(op, "Pow")) r = pow(x, y);
            else r = fmod(x, y); /* Mod (fmod=1 for floats) */
            k.f[j] = (float)r;
            continue;
        }
        int64_t x = kr_imp_const_geti(&a->c, ia), y = kr_imp_const_geti(&b->c, ib), r;
        if (cmp) {
            double fx = kr_imp_const_get(&a->c, ia), fy = kr_imp_const_get(&b->c, ib);
            if (!strcmp(op, "Equal")) r = fx == fy;
            else if (!strcmp(op, "Less")) r = fx < fy;
            else if (!strcmp(op, "Greater")) r = fx > fy;
            else if (!strcmp(op, "And")) r = x && y;
            else r = x || y;
        } else if (!strcmp(op, "Add")) r = (int64_t)((uint64_t)x + (uint64_t)y);
        else if (!strcmp(op, "Sub")) r = (int64_t)((uint64_t)x - (uint64_t)y);
        else if (!strcmp(op, "Mul")) r = (int64_t)((uint64_t)x * (uint64_t)y);
        else if (!strcmp(op, "Min")) r = x < y ? x : y;
        else if (!strcmp(op, "Max")) r = x > y ? x : y;
        else if (!strcmp(op, "Pow")) {
            double p = pow((double)x, (double)y);
            if (!(p > -9.2e18 && p < 9.2e18)) { /* casting it would be undefined */
                kr_imp_const_free(&k);
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "integer Pow %lld ^ %lld is not "
                                   "an int64", (long long)x, (long long)y);
            }
            r = (int64_t)p;
        } else {
            if (y == 0 || (x == INT64_MIN && y == -1)) {
                kr_imp_const_free(&k);
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "integer %s by %lld", op,
                                   (long long)y);
            }
            if (!strcmp(op, "Div"))
                r = x / y;
            else { /* Mod, fmod=0: the sign of the divisor */
                r = x % y;
                if (r != 0 && ((r < 0) != (y < 0)))
                    r += y;
            }
        }
        k.i[j] = r;
    }
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_unary(kr_imp_ctx *c, const char *op)
{
    kr_imp_value *a;
    KR_IMP_TRY(need_const(c, 0, &a));
    int fl = a->c.is_float || !strcmp(op, "Sqrt") || !strcmp(op, "Reciprocal");
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, fl, a->c.rank, a->c.dims));
    k.onnx_type = fl && !a->c.is_float ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : a->c.onnx_type;
    for (size_t j = 0; j < k.count; j++) {
        if (fl) {
            double x = kr_imp_const_get(&a->c, j), r;
            if (!strcmp(op, "Neg")) r = -x;
            else if (!strcmp(op, "Abs")) r = fabs(x);
            else if (!strcmp(op, "Floor")) r = floor(x);
            else if (!strcmp(op, "Ceil")) r = ceil(x);
            else if (!strcmp(op, "Sqrt")) r = sqrt(x);
            else if (!strcmp(op, "Reciprocal")) r = 1.0 / x;
            else r = x == 0; /* Not */
            k.f[j] = (float)r;
        } else {
            int64_t x = a->c.i[j];
            if (!strcmp(op, "Neg")) k.i[j] = (int64_t)(0 - (uint64_t)x);
            else if (!strcmp(op, "Abs")) k.i[j] = x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
            else if (!strcmp(op, "Not")) k.i[j] = x == 0;
            else k.i[j] = x; /* Floor, Ceil of integers */
        }
    }
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_shape(kr_imp_ctx *c, int size)
{
    kr_imp_value *a;
    KR_IMP_TRY(kr_imp_input(c, 0, &a));
    int rank = a->kind == KR_IMP_ACT ? a->rank : a->c.rank;
    const int64_t *dims = a->kind == KR_IMP_ACT ? a->dims : a->c.dims;
    if (a->kind == KR_IMP_ABSENT)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no input");
    kr_imp_const k;
    if (size) {
        KR_IMP_TRY(kr_imp_const_alloc(c, &k, 0, 0, NULL));
        k.i[0] = 1;
        for (int d = 0; d < rank; d++)
            k.i[0] *= dims[d];
        return kr_imp_set_const(c, 0, &k);
    }
    int64_t start, end;
    KR_IMP_TRY(kr_imp_attr_int(c, "start", 0, &start));
    KR_IMP_TRY(kr_imp_attr_int(c, "end", rank, &end));
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    int64_t n = end > start ? end - start : 0;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, 0, 1, &n));
    for (int64_t d = 0; d < n; d++)
        k.i[d] = dims[start + d];
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_gather(kr_imp_ctx *c)
{
    kr_imp_value *a, *idx;
    KR_IMP_TRY(need_const(c, 0, &a));
    KR_IMP_TRY(need_const(c, 1, &idx));
    int64_t axis_attr;
    int axis;
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", 0, &axis_attr));
    if (a->c.rank < 1)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "gathers from a scalar");
    KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, a->c.rank, &axis));
    int rank = a->c.rank + idx->c.rank - 1;
    if (rank > KR_IMP_MAX_RANK)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "result rank %d", rank);
    int64_t dims[KR_IMP_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++)
        dims[r++] = a->c.dims[d];
    for (int d = 0; d < idx->c.rank; d++)
        dims[r++] = idx->c.dims[d];
    for (int d = axis + 1; d < a->c.rank; d++)
        dims[r++] = a->c.dims[d];
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, a->c.is_float, rank, dims));
    k.onnx_type = a->c.onnx_type;
    size_t outer = 1, inner = 1, n = (size_t)a->c.dims[axis];
    for (int d = 0; d < axis; d++)
        outer *= (size_t)a->c.dims[d];
    for (int d = axis + 1; d < a->c.rank; d++)
        inner *= (size_t)a->c.dims[d];
    size_t j = 0;
    for (size_t o = 0; o < outer; o++)
        for (size_t q = 0; q < idx->c.count; q++) {
            int64_t i = kr_imp_const_geti(&idx->c, q);
            if (i < 0)
                i += (int64_t)n;
            if (i < 0 || i >= (int64_t)n) {
                kr_imp_const_free(&k);
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "index %lld is outside 0..%zu",
                                   (long long)kr_imp_const_geti(&idx->c, q), n - 1);
            }
            for (size_t in = 0; in < inner; in++, j++) {
                size_t src = (o * n + (size_t)i) * inner + in;
                if (k.is_float) k.f[j] = a->c.f[src];
                else k.i[j] = a->c.i[src];
            }
        }
    return kr_imp_set_const(c, 0, &k);
}

keyer_status kr_imp_squeeze_dims(kr_imp_ctx *c, int unsqueeze, int rank, const int64_t *dims,
                                 int *out_rank, int64_t *out)
{
    int64_t axes[KR_IMP_MAX_RANK];
    int n = 0;
    if (c->opset < 13) {
        const int64_t *a;
        size_t count;
        KR_IMP_TRY(kr_imp_attr_ints(c, "axes", &a, &count));
        if (count > KR_IMP_MAX_RANK)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu axes", count);
        if (count) /* an absent list is NULL */
            memcpy(axes, a, count * sizeof(int64_t));
        n = (int)count;
    } else {
        kr_imp_value *a;
        KR_IMP_TRY(kr_imp_input(c, 1, &a));
        if (a->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_ints(c, a, "axes", axes, KR_IMP_MAX_RANK, &n));
    }
    unsigned mask = 0;
    int r = unsqueeze ? rank + n : rank;
    if (r > KR_IMP_MAX_RANK)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "result rank %d", r);
    for (int k = 0; k < n; k++) {
        int a;
        KR_IMP_TRY(kr_imp_norm_axis(c, axes[k], r, &a));
        if (mask & (1u << a))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "axis %d is listed twice", a);
        mask |= 1u << a;
    }
    int o = 0;
    if (unsqueeze) {
        for (int d = 0, s = 0; d < r; d++)
            out[o++] = mask & (1u << d) ? 1 : dims[s++];
    } else {
        for (int d = 0; d < rank; d++) {
            if (n == 0 ? dims[d] == 1 : (mask & (1u << d)) != 0) {
                if (dims[d] != 1)
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "squeezes dimension %d of size "
                                       "%lld", d, (long long)dims[d]);
                continue;
            }
            out[o++] = dims[d];
        }
    }
    *out_rank = o;
    return KEYER_OK;
}

keyer_status kr_imp_reshape_dims(kr_imp_ctx *c, int rank, const int64_t *dims,
                                 const kr_imp_value *shape, int allowzero, int *out_rank,
                                 int64_t *out)
{
    int64_t s[KR_IMP_MAX_RANK];
    int n;
    KR_IMP_TRY(kr_imp_const_ints(c, shape, "shape", s, KR_IMP_MAX_RANK, &n));
    int64_t total = 1, known = 1;
    const int64_t limit = (int64_t)1 << 40;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || (dims[d] && total > limit / dims[d]))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "the input's dimension %d is %lld "
                               "(negative, or too many elements)", d, (long long)dims[d]);
        total *= dims[d];
    }
    int infer = -1;
    for (int d = 0; d < n; d++) {
        int64_t v = s[d];
        if (v == 0 && !allowzero) {
            if (d >= rank)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "shape entry %d is 0 but the input "
                                   "has rank %d", d, rank);
            v = dims[d];
        }
        if (v == -1) {
            if (infer >= 0)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "shape has two -1 entries");
            infer = d;
            continue;
        }
        if (v < 0 || v > limit)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "shape entry %d is %lld", d,
                               (long long)v);
        out[d] = v;
        /* known and v are at most 2^40: check before multiplying (2^80 overflows int64) */
        if (v && known > limit / v)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "shape is too large (entry %d, %lld, "
                               "makes more than 2^40 elements)", d, (long long)v);
        known *= v;
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "cannot infer the -1 of the shape: %lld "
                               "elements into blocks of %lld", (long long)total, (long long)known);
        out[infer] = total / known;
    } else if (known != total) {
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "reshapes %lld elements to %lld",
                           (long long)total, (long long)known);
    }
    *out_rank = n;
    return KEYER_OK;
}

keyer_status kr_imp_slice_params(kr_imp_ctx *c, int rank, const int64_t *dims, int64_t *start,
                                 int64_t *step, int64_t *count)
{
    int64_t st[KR_IMP_MAX_RANK], en[KR_IMP_MAX_RANK], ax[KR_IMP_MAX_RANK], sp[KR_IMP_MAX_RANK];
    int ns, ne, na = -1, np = -1;
    if (c->opset < 10) {
        const int64_t *a;
        size_t n;
        KR_IMP_TRY(kr_imp_attr_ints(c, "starts", &a, &n));
        if (n > KR_IMP_MAX_RANK) return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu starts", n);
        if (n) /* an absent list is NULL */
            memcpy(st, a, n * sizeof(*a));
        ns = (int)n;
        KR_IMP_TRY(kr_imp_attr_ints(c, "ends", &a, &n));
        if (n > KR_IMP_MAX_RANK) return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu ends", n);
        if (n) /* an absent list is NULL */
            memcpy(en, a, n * sizeof(*a));
        ne = (int)n;
        KR_IMP_TRY(kr_imp_attr_ints(c, "axes", &a, &n));
        if (n > KR_IMP_MAX_RANK) return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu axes", n);
        if (n) {
            memcpy(ax, a, n * sizeof(*a));
            na = (int)n;
        }
    } else {
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_input(c, 1, &v));
        KR_IMP_TRY(kr_imp_const_ints(c, v, "starts", st, KR_IMP_MAX_RANK, &ns));
        KR_IMP_TRY(kr_imp_input(c, 2, &v));
        KR_IMP_TRY(kr_imp_const_ints(c, v, "ends", en, KR_IMP_MAX_RANK, &ne));
        KR_IMP_TRY(kr_imp_input(c, 3, &v));
        if (v->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_ints(c, v, "axes", ax, KR_IMP_MAX_RANK, &na));
        KR_IMP_TRY(kr_imp_input(c, 4, &v));
        if (v->kind != KR_IMP_ABSENT)
            KR_IMP_TRY(kr_imp_const_ints(c, v, "steps", sp, KR_IMP_MAX_RANK, &np));
    }
    if (ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "starts, ends, axes and steps differ in "
                           "length");
    for (int d = 0; d < rank; d++) {
        start[d] = 0;
        step[d] = 1;
        count[d] = dims[d];
    }
    unsigned seen = 0;
    for (int k = 0; k < ns; k++) {
        int a;
        KR_IMP_TRY(kr_imp_norm_axis(c, na >= 0 ? ax[k] : k, rank, &a));
        if (seen & (1u << a))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "axis %d is sliced twice", a);
        seen |= 1u << a;
        int64_t n = dims[a], s = st[k], e = en[k], p = np >= 0 ? sp[k] : 1;
        if (p == 0)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "step 0 on axis %d", a);
        /* A step longer than the axis reads one element at most: the same with |step| = n
         * (keeps the arithmetic below and the graph's int steps in range). */
        if (p > n)
            p = n > 0 ? n : 1;
        if (p < -n)
            p = -(n > 0 ? n : 1);
        if (s < 0) /* n is small: no overflow, even from INT64_MIN */
            s += n;
        if (e < 0)
            e += n;
        if (p > 0) { /* clamped into [0, n] */
            s = s < 0 ? 0 : s > n ? n : s;
            e = e < 0 ? 0 : e > n ? n : e;
            count[a] = e > s ? (e - s + p - 1) / p : 0;
        } else { /* start into [0, n-1], end into [-1, n-1] */
            s = s < 0 ? 0 : s > n - 1 ? n - 1 : s;
            e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
            count[a] = s > e ? (s - e + (-p) - 1) / (-p) : 0;
        }
        start[a] = s;
        step[a] = p;
    }
    return KEYER_OK;
}

/* Copies from @p a the elements whose per-dimension index is start + i * step into a new
 * constant of shape @p dims (the same rank). */
static keyer_status strided_copy(kr_imp_ctx *c, const kr_imp_const *a, const int64_t *start,
                                 const int64_t *step, const int64_t *dims, kr_imp_const *k)
{
    KR_IMP_TRY(kr_imp_const_alloc(c, k, a->is_float, a->rank, dims));
    k->onnx_type = a->onnx_type;
    for (size_t j = 0; j < k->count; j++) {
        size_t rem = j, off = 0, stride = 1;
        for (int d = a->rank - 1; d >= 0; d--) {
            size_t i = rem % (size_t)dims[d];
            rem /= (size_t)dims[d];
            off += (size_t)(start[d] + (int64_t)i * step[d]) * stride;
            stride *= (size_t)a->dims[d];
        }
        if (k->is_float) k->f[j] = a->f[off];
        else k->i[j] = a->i[off];
    }
    return KEYER_OK;
}

static keyer_status fold_slice(kr_imp_ctx *c)
{
    kr_imp_value *a;
    KR_IMP_TRY(need_const(c, 0, &a));
    int64_t start[KR_IMP_MAX_RANK], step[KR_IMP_MAX_RANK], count[KR_IMP_MAX_RANK];
    KR_IMP_TRY(kr_imp_slice_params(c, a->c.rank, a->c.dims, start, step, count));
    kr_imp_const k;
    KR_IMP_TRY(strided_copy(c, &a->c, start, step, count, &k));
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_transpose(kr_imp_ctx *c)
{
    kr_imp_value *a;
    KR_IMP_TRY(need_const(c, 0, &a));
    const int64_t *perm;
    size_t n;
    KR_IMP_TRY(kr_imp_attr_ints(c, "perm", &perm, &n));
    int r = a->c.rank, p[KR_IMP_MAX_RANK];
    if (n && (int)n != r)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "perm has %zu entries for rank %d", n, r);
    unsigned seen = 0;
    for (int d = 0; d < r; d++) {
        int64_t v = n ? perm[d] : r - 1 - d;
        if (v < 0 || v >= r || (seen & (1u << v)))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "perm is not a permutation");
        seen |= 1u << v;
        p[d] = (int)v;
    }
    int64_t dims[KR_IMP_MAX_RANK], stride[KR_IMP_MAX_RANK];
    for (int d = r - 1, s = 1; d >= 0; d--) {
        stride[d] = s;
        s *= (int)a->c.dims[d];
    }
    for (int d = 0; d < r; d++)
        dims[d] = a->c.dims[p[d]];
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, a->c.is_float, r, dims));
    k.onnx_type = a->c.onnx_type;
    for (size_t j = 0; j < k.count; j++) {
        size_t rem = j, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            size_t i = rem % (size_t)dims[d];
            rem /= (size_t)dims[d];
            off += i * (size_t)stride[p[d]];
        }
        if (k.is_float) k.f[j] = a->c.f[off];
        else k.i[j] = a->c.i[off];
    }
    return kr_imp_set_const(c, 0, &k);
}

/* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Expand: new shape, same (or broadcast) data. */
static keyer_status fold_view(kr_imp_ctx *c, const char *op)
{
    kr_imp_value *a;
    KR_IMP_TRY(need_const(c, 0, &a));
    int rank = a->c.rank;
    int64_t dims[KR_IMP_MAX_RANK];
    memcpy(dims, a->c.dims, sizeof(dims));
    if (!strcmp(op, "Reshape")) {
        kr_imp_value *s;
        int64_t allowzero;
        KR_IMP_TRY(need_const(c, 1, &s));
        KR_IMP_TRY(kr_imp_attr_int(c, "allowzero", 0, &allowzero));
        KR_IMP_TRY(kr_imp_reshape_dims(c, a->c.rank, a->c.dims, s, (int)allowzero, &rank, dims));
    } else if (!strcmp(op, "Flatten")) {
        int64_t axis_attr;
        int axis;
        KR_IMP_TRY(kr_imp_attr_int(c, "axis", 1, &axis_attr));
        KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, a->c.rank + 1, &axis));
        dims[0] = dims[1] = 1;
        for (int d = 0; d < a->c.rank; d++)
            dims[d < axis ? 0 : 1] *= a->c.dims[d];
        rank = 2;
    } else if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze")) {
        KR_IMP_TRY(kr_imp_squeeze_dims(c, op[0] == 'U', a->c.rank, a->c.dims, &rank, dims));
    } else if (!strcmp(op, "Expand")) {
        kr_imp_value *s;
        KR_IMP_TRY(need_const(c, 1, &s));
        kr_imp_const shape;
        int64_t sd[KR_IMP_MAX_RANK];
        int n;
        KR_IMP_TRY(kr_imp_const_ints(c, s, "shape", sd, KR_IMP_MAX_RANK, &n));
        memset(&shape, 0, sizeof(shape));
        shape.rank = n;
        memcpy(shape.dims, sd, (size_t)n * sizeof(int64_t));
        KR_IMP_TRY(bcast_shape(c, &a->c, &shape, &rank, dims));
        kr_imp_const k;
        KR_IMP_TRY(kr_imp_const_alloc(c, &k, a->c.is_float, rank, dims));
        k.onnx_type = a->c.onnx_type;
        if (k.count > MAX_FOLD_ELEMENTS) {
            kr_imp_const_free(&k);
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "expands a constant to %zu elements",
                               k.count);
        }
        for (size_t j = 0; j < k.count; j++) {
            size_t o = bcast_offset(&a->c, rank, dims, j);
            if (k.is_float) k.f[j] = a->c.f[o];
            else k.i[j] = a->c.i[o];
        }
        return kr_imp_set_const(c, 0, &k);
    }
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, a->c.is_float, rank, dims));
    k.onnx_type = a->c.onnx_type;
    if (k.count != a->c.count) {
        kr_imp_const_free(&k);
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "changes the element count");
    }
    if (k.is_float) memcpy(k.f, a->c.f, k.count * sizeof(float));
    else memcpy(k.i, a->c.i, k.count * sizeof(int64_t));
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_concat(kr_imp_ctx *c)
{
    int n = (int)c->node->n_input;
    kr_imp_value *first;
    KR_IMP_TRY(need_const(c, 0, &first));
    int64_t axis_attr;
    int axis, rank = first->c.rank, fl = 0;
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", 0, &axis_attr));
    if (rank < 1)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "concatenates scalars");
    KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, rank, &axis));
    int64_t dims[KR_IMP_MAX_RANK];
    memcpy(dims, first->c.dims, sizeof(dims));
    dims[axis] = 0;
    for (int i = 0; i < n; i++) {
        kr_imp_value *v;
        KR_IMP_TRY(need_const(c, i, &v));
        if (v->c.rank != rank)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input %d has rank %d, not %d", i,
                               v->c.rank, rank);
        for (int d = 0; d < rank; d++)
            if (d != axis && v->c.dims[d] != dims[d])
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "input %d differs in dimension %d",
                                   i, d);
        dims[axis] += v->c.dims[axis];
        fl |= v->c.is_float;
    }
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, fl, rank, dims));
    k.onnx_type = first->c.onnx_type;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)dims[d];
    for (int d = axis + 1; d < rank; d++)
        inner *= (size_t)dims[d];
    size_t j = 0;
    for (size_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            kr_imp_value *v = NULL;
            KR_IMP_TRY(kr_imp_input(c, i, &v));
            size_t block = (size_t)v->c.dims[axis] * inner;
            for (size_t e = 0; e < block; e++, j++) {
                if (fl) k.f[j] = (float)kr_imp_const_get(&v->c, o * block + e);
                else k.i[j] = v->c.i[o * block + e];
            }
        }
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_cast(kr_imp_ctx *c)
{
    kr_imp_value *a;
    KR_IMP_TRY(need_const(c, 0, &a));
    int64_t to;
    KR_IMP_TRY(kr_imp_attr_int(c, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &to));
    int fl = is_float_type(to);
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, fl, a->c.rank, a->c.dims));
    k.onnx_type = (int32_t)to;
    for (size_t j = 0; j < k.count; j++) {
        if (fl)
            k.f[j] = (float)kr_imp_const_get(&a->c, j);
        else if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
            k.i[j] = kr_imp_const_get(&a->c, j) != 0;
        else
            k.i[j] = kr_imp_const_geti(&a->c, j);
    }
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_constant_of_shape(kr_imp_ctx *c)
{
    kr_imp_value *s;
    KR_IMP_TRY(need_const(c, 0, &s));
    int64_t dims[KR_IMP_MAX_RANK];
    int n;
    KR_IMP_TRY(kr_imp_const_ints(c, s, "shape", dims, KR_IMP_MAX_RANK, &n));
    const kr_onnx_tensor *value;
    KR_IMP_TRY(kr_onnx_attr_tensor(c->f, c->node, "value", &value, c->err));
    kr_imp_const k;
    int fl = !value || is_float_type(value->data_type);
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, fl, n, dims));
    if (k.count > MAX_FOLD_ELEMENTS) {
        kr_imp_const_free(&k);
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "makes a constant of %zu elements",
                           k.count);
    }
    if (value) {
        if (value->count != 1) {
            kr_imp_const_free(&k);
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "value has %zu elements, not 1",
                               value->count);
        }
        k.onnx_type = value->data_type;
        const unsigned char *p = value->data;
        double v = 0;
        if (value->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
            float f;
            memcpy(&f, p, 4);
            v = f;
        } else if (value->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
            int64_t i;
            memcpy(&i, p, 8);
            for (size_t j = 0; j < k.count && !fl; j++)
                k.i[j] = i;
        } else if (value->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
            int32_t i;
            memcpy(&i, p, 4);
            v = i;
        } else if (value->elem_size == 1) {
            v = p[0];
        } else if (value->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16) {
            v = kr_half_to_float((uint16_t)(p[0] | (p[1] << 8)));
        } else {
            kr_imp_const_free(&k);
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "value of ONNX type %d",
                               (int)value->data_type);
        }
        if (value->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
            for (size_t j = 0; j < k.count; j++) {
                if (fl) k.f[j] = (float)v;
                else k.i[j] = (int64_t)v;
            }
    }
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_range(kr_imp_ctx *c)
{
    kr_imp_value *s, *l, *d;
    KR_IMP_TRY(need_const(c, 0, &s));
    KR_IMP_TRY(need_const(c, 1, &l));
    KR_IMP_TRY(need_const(c, 2, &d));
    if (s->c.count != 1 || l->c.count != 1 || d->c.count != 1)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "start, limit and delta must be scalars");
    double start = kr_imp_const_get(&s->c, 0), limit = kr_imp_const_get(&l->c, 0),
           delta = kr_imp_const_get(&d->c, 0);
    if (delta == 0)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "delta is 0");
    double n = ceil((limit - start) / delta);
    if (!(n >= 0)) n = 0;
    if (n > (double)MAX_FOLD_ELEMENTS)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "a range of %.0f elements", n);
    int64_t count = (int64_t)n;
    /* Integers: the last element (n is rounded in double) must be an int64 too; then every
     * element is, and wrapping arithmetic computes each exactly (j * delta may overflow). */
    if (!s->c.is_float && count > 0 &&
        !(fabs(start + (double)(count - 1) * delta) < 9.2e18))
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "a range from %.0f by %.0f to %.0f "
                           "leaves int64", start, delta, limit);
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, s->c.is_float, 1, &count));
    k.onnx_type = s->c.onnx_type;
    uint64_t di = (uint64_t)kr_imp_const_geti(&d->c, 0);
    for (int64_t j = 0; j < count; j++) {
        if (k.is_float) k.f[j] = (float)(start + (double)j * delta);
        else k.i[j] = (int64_t)((uint64_t)s->c.i[0] + (uint64_t)j * di);
    }
    return kr_imp_set_const(c, 0, &k);
}

static keyer_status fold_where(kr_imp_ctx *c)
{
    kr_imp_value *cond, *x, *y;
    KR_IMP_TRY(need_const(c, 0, &cond));
    KR_IMP_TRY(need_const(c, 1, &x));
    KR_IMP_TRY(need_const(c, 2, &y));
    int r1, rank;
    int64_t d1[KR_IMP_MAX_RANK], dims[KR_IMP_MAX_RANK];
    KR_IMP_TRY(bcast_shape(c, &x->c, &y->c, &r1, d1));
    kr_imp_const xy;
    memset(&xy, 0, sizeof(xy));
    xy.rank = r1;
    memcpy(xy.dims, d1, sizeof(d1));
    KR_IMP_TRY(bcast_shape(c, &cond->c, &xy, &rank, dims));
    int fl = x->c.is_float || y->c.is_float;
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, fl, rank, dims));
    k.onnx_type = x->c.onnx_type;
    for (size_t j = 0; j < k.count; j++) {
        int take_x = kr_imp_const_get(&cond->c, bcast_offset(&cond->c, rank, dims, j)) != 0;
        const kr_imp_const *src = take_x ? &x->c : &y->c;
        size_t o = bcast_offset(src, rank, dims, j);
        if (fl) k.f[j] = (float)kr_imp_const_get(src, o);
        else k.i[j] = src->i[o];
    }
    return kr_imp_set_const(c, 0, &k);
}

/* DequantizeLinear (to float) and QuantizeLinear (saturating, round half to even). */
static keyer_status fold_quant(kr_imp_ctx *c, int quantize)
{
    kr_imp_value *x, *scale, *zp;
    KR_IMP_TRY(need_const(c, 0, &x));
    KR_IMP_TRY(need_const(c, 1, &scale));
    KR_IMP_TRY(kr_imp_input(c, 2, &zp));
    int64_t axis_attr;
    int axis = 0;
    KR_IMP_TRY(kr_imp_attr_int(c, "axis", 1, &axis_attr));
    int per_axis = scale->c.count > 1 || scale->c.rank == 1;
    if (per_axis) {
        KR_IMP_TRY(kr_imp_norm_axis(c, axis_attr, x->c.rank, &axis));
        if (scale->c.rank != 1 || scale->c.dims[0] != x->c.dims[axis])
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "the scale has %zu values for axis %d "
                               "of size %lld", scale->c.count, axis, (long long)x->c.dims[axis]);
    }
    if (zp->kind == KR_IMP_CONST && zp->c.count != scale->c.count)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "the zero point has %zu values and the "
                           "scale %zu", zp->c.count, scale->c.count);
    size_t inner = 1;
    for (int d = axis + 1; per_axis && d < x->c.rank; d++)
        inner *= (size_t)x->c.dims[d];
    kr_imp_const k;
    KR_IMP_TRY(kr_imp_const_alloc(c, &k, !quantize, x->c.rank, x->c.dims));
    int32_t qt = zp->kind == KR_IMP_CONST ? zp->c.onnx_type : ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    double lo = qt == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ? -128 : 0;
    double hi = qt == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ? 127 : 255;
    if (quantize && qt != ONNX__TENSOR_PROTO__DATA_TYPE__INT8 &&
        qt != ONNX__TENSOR_PROTO__DATA_TYPE__UINT8) {
        kr_imp_const_free(&k);
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "quantizes to ONNX type %d (keyer folds "
                           "QuantizeLinear to INT8 or UINT8 only)", (int)qt);
    }
    if (quantize)
        k.onnx_type = qt;
    for (size_t j = 0; j < k.count; j++) {
        size_t q = per_axis ? (j / inner) % (size_t)x->c.dims[axis] : 0;
        double s = kr_imp_const_get(&scale->c, q);
        double z = zp->kind == KR_IMP_CONST ? kr_imp_const_get(&zp->c, q) : 0;
        if (quantize) {
            /* x / s must be a number to saturate: a zero or NaN scale, or a NaN input, has no
             * uint8/int8 value (casting NaN to an integer is undefined) */
            double xv = kr_imp_const_get(&x->c, j);
            double v = nearbyint(xv / s) + z;
            if (s == 0 || isnan(v)) {
                kr_imp_const_free(&k);
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "quantizes %g with the scale %g "
                                   "and zero point %g (value %zu): the scale must be non-zero "
                                   "and the result a number", xv, s, z, j);
            }
            k.i[j] = (int64_t)(v < lo ? lo : v > hi ? hi : v);
        } else {
            k.f[j] = (float)((kr_imp_const_get(&x->c, j) - z) * s);
        }
    }
    return kr_imp_set_const(c, 0, &k);
}

keyer_status kr_imp_fold(kr_imp_ctx *c)
{
    const char *op = c->node->op_type;
    if (!strcmp(op, "Shape")) return fold_shape(c, 0);
    if (!strcmp(op, "Size")) return fold_shape(c, 1);
    if (!strcmp(op, "Gather")) return fold_gather(c);
    if (!strcmp(op, "Concat")) return fold_concat(c);
    if (!strcmp(op, "Cast")) return fold_cast(c);
    if (!strcmp(op, "Slice")) return fold_slice(c);
    if (!strcmp(op, "ConstantOfShape")) return fold_constant_of_shape(c);
    if (!strcmp(op, "Range")) return fold_range(c);
    if (!strcmp(op, "Where")) return fold_where(c);
    if (!strcmp(op, "Transpose")) return fold_transpose(c);
    if (!strcmp(op, "DequantizeLinear")) return fold_quant(c, 0);
    if (!strcmp(op, "QuantizeLinear")) return fold_quant(c, 1);
    if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
        !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity") || !strcmp(op, "Expand"))
        return fold_view(c, op);
    if (!strcmp(op, "Neg") || !strcmp(op, "Abs") || !strcmp(op, "Floor") ||
        !strcmp(op, "Ceil") || !strcmp(op, "Sqrt") || !strcmp(op, "Not") ||
        !strcmp(op, "Reciprocal"))
        return fold_unary(c, op);
    if ((!strcmp(op, "Min") || !strcmp(op, "Max")) && c->node->n_input == 1)
        return fold_view(c, "Identity");
    if ((!strcmp(op, "Min") || !strcmp(op, "Max")) && c->node->n_input > 2)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "folding %zu inputs (keyer folds two)",
                           c->node->n_input);
    return fold_binary(c, op);
}
