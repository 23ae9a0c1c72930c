/*
 * kr_graph_validate(): checks a graph built by a model reader before any backend sees it.
 *
 *  - Tensors: rank 0..KR_MAX_DIMS, positive dimensions, at most MAX_ELEMENTS elements;
 *    constants are FLOAT32 or INT32 with data; activations are FLOAT32, rank >= 1, and have
 *    dims[0] == 1 (the batch axis a runtime scales). view_of is -1 or another tensor's index.
 *  - Graph inputs are distinct FLOAT32 activations; outputs are distinct, non-constant, written.
 *  - Order: nodes run in array order; every input is a constant, a graph input or the output of
 *    an earlier node (so the graph is acyclic); every output is written once, by one node, and
 *    is neither a constant nor a graph input.
 *  - Per operator: input count, kinds (activation / constant), types and ranks; weight layouts
 *    (CONV_2D and Convolution2DTransposeBias OHWI, DEPTHWISE_CONV_2D [1,KH,KW,C*M]); the output
 *    shape from the operator's rule (TFLite SAME/VALID sizes with the odd SAME pad after,
 *    transpose-conv size, NumPy broadcasting, PAD, CONCATENATION, MEAN, RESIZE_BILINEAR,
 *    RESHAPE) compared with the declared output shape. Operations along the batch axis (pad,
 *    reduce, concatenate on axis 0) are rejected, since a runtime scales that axis.
 *  - Derived parameters are filled in: window kernel sizes and resolved paddings, the depth
 *    multiplier, the concatenation axis (non-negative), MEAN's axes mask, PAD's amounts, and
 *    view_of for RESHAPE outputs; view chains are checked for cycles.
 * Then kr_graph_link() fills producers and consumers.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/graph.h"

#define MAX_ELEMENTS ((size_t)1 << 28) /* per tensor; the same limit as the TFLite reader */
#define MAX_STRIDE (1 << 16)           /* strides and dilations */
#define MAX_EXTENT (1 << 29)           /* dilated kernel extent, padded sizes */

typedef struct vctx {
    kr_graph *g;
    keyer_error *err;
} vctx;

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static keyer_status node_fail(const vctx *v, const kr_node *n, keyer_status status,
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

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static keyer_status graph_fail(const vctx *v, keyer_status status, const char *fmt, ...)
{
    char msg[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return keyer_error_set(v->err, status, "%s: %s", v->g->name, msg);
}

#define BAD KEYER_STATUS_BAD_DATA
#define UNSUP KEYER_STATUS_UNSUPPORTED
#define TRY(expr)                                                                                 \
    do {                                                                                          \
        keyer_status try_status_ = (expr);                                                        \
        if (try_status_ != KEYER_OK)                                                              \
            return try_status_;                                                                   \
    } while (0)

/* "[1,128,128,3]" into @p buf. */
static const char *dims_str(int rank, const int *dims, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%d" : "%d", dims[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

static const char *shape_str(const kr_tensor *t, char *buf, size_t cap)
{
    return dims_str(t->rank, t->dims, buf, cap);
}

static const char *dtype_name(kr_dtype d)
{
    switch (d) {
    case KR_DTYPE_F32: return "FLOAT32";
    case KR_DTYPE_F16: return "FLOAT16";
    case KR_DTYPE_I32: return "INT32";
    }
    return "an unknown type";
}

static const kr_tensor *input(const vctx *v, const kr_node *n, int i)
{
    return &v->g->tensors[n->inputs[i]];
}

static kr_tensor *output(const vctx *v, const kr_node *n)
{
    return &v->g->tensors[n->outputs[0]];
}

enum { WANT_ACT, WANT_CONST, WANT_ANY };

/* Per-tensor marks while validating. */
enum { MARK_READABLE = 1, MARK_OUTPUT = 2 };

/* Input @p i must be present, of @p kind, @p dtype and rank @p rank (-1: any). */
static keyer_status want_input(const vctx *v, const kr_node *n, int i, int kind, kr_dtype dtype,
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

static keyer_status want_inputs(const vctx *v, const kr_node *n, int min, int max)
{
    if (n->n_inputs < min || n->n_inputs > max) {
        if (min == max)
            return node_fail(v, n, BAD, "has %d inputs; it takes %d", n->n_inputs, min);
        return node_fail(v, n, BAD, "has %d inputs; it takes %d to %d", n->n_inputs, min, max);
    }
    return KEYER_OK;
}

/* The output must have exactly @p rank dims equal to @p dims. */
static keyer_status expect_shape(const vctx *v, const kr_node *n, int rank, const int *dims)
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

static keyer_status expect_same_shape(const vctx *v, const kr_node *n, const kr_tensor *t)
{
    return expect_shape(v, n, t->rank, t->dims);
}

/* Checks strides/dilations, computes the output size and fills kernel size and paddings. */
static keyer_status window(const vctx *v, kr_node *n, int in_h, int in_w, int kh, int kw,
                           int *out_h, int *out_w)
{
    kr_window_params *w = &n->p.window;
    if (w->stride_h < 1 || w->stride_w < 1 || w->stride_h > MAX_STRIDE ||
        w->stride_w > MAX_STRIDE)
        return node_fail(v, n, BAD, "stride %dx%d (HxW) is outside 1..%d", w->stride_h,
                         w->stride_w, MAX_STRIDE);
    if (w->dilation_h < 1 || w->dilation_w < 1 || w->dilation_h > MAX_STRIDE ||
        w->dilation_w > MAX_STRIDE)
        return node_fail(v, n, BAD, "dilation %dx%d (HxW) is outside 1..%d", w->dilation_h,
                         w->dilation_w, MAX_STRIDE);
    if (kh < 1 || kw < 1)
        return node_fail(v, n, BAD, "window %dx%d (HxW) is empty", kh, kw);
    long long eh = (long long)(kh - 1) * w->dilation_h + 1;
    long long ew = (long long)(kw - 1) * w->dilation_w + 1;
    if (eh > MAX_EXTENT || ew > MAX_EXTENT)
        return node_fail(v, n, BAD, "dilated window %lldx%lld (HxW) is too large", eh, ew);
    if (w->padding != KR_PADDING_SAME && w->padding != KR_PADDING_VALID)
        return node_fail(v, n, BAD, "padding %d is neither SAME nor VALID", (int)w->padding);
    *out_h = kr_window_out_size(w->padding, in_h, kh, w->stride_h, w->dilation_h);
    *out_w = kr_window_out_size(w->padding, in_w, kw, w->stride_w, w->dilation_w);
    if (*out_h <= 0 || *out_w <= 0)
        return node_fail(v, n, BAD, "the %lldx%lld (HxW) window does not fit the %dx%d input with "
                         "VALID padding", eh, ew, in_h, in_w);
    w->kernel_h = kh;
    w->kernel_w = kw;
    if (w->padding == KR_PADDING_SAME) {
        kr_window_same_pads(in_h, kh, w->stride_h, w->dilation_h, &w->pad_top, &w->pad_bottom);
        kr_window_same_pads(in_w, kw, w->stride_w, w->dilation_w, &w->pad_left, &w->pad_right);
    } else {
        w->pad_top = w->pad_bottom = w->pad_left = w->pad_right = 0;
    }
    return KEYER_OK;
}

static keyer_status check_bias(const vctx *v, const kr_node *n, int cout)
{
    if (n->n_inputs < 3 || n->inputs[2] < 0)
        return node_fail(v, n, UNSUP, "has no bias input; keyer needs one");
    TRY(want_input(v, n, 2, WANT_CONST, KR_DTYPE_F32, 1, "bias"));
    const kr_tensor *b = input(v, n, 2);
    if (b->dims[0] != cout)
        return node_fail(v, n, BAD, "bias '%s' has %d values for %d output channels", b->name,
                         b->dims[0], cout);
    return KEYER_OK;
}

static keyer_status check_conv(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 3));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_F32, 4, "weights"));
    const kr_tensor *x = input(v, n, 0), *w = input(v, n, 1);
    int cout = w->dims[0], kh = w->dims[1], kw = w->dims[2], cin = w->dims[3];
    if (x->dims[3] != cin) {
        char a[96], b[96];
        return node_fail(v, n, x->dims[3] % cin == 0 ? UNSUP : BAD,
                         "input '%s' %s has %d channels but the OHWI weights '%s' %s take %d%s",
                         x->name, shape_str(x, a, sizeof(a)), x->dims[3], w->name,
                         shape_str(w, b, sizeof(b)), cin,
                         x->dims[3] % cin == 0 ? " (grouped convolution is not supported)" : "");
    }
    TRY(check_bias(v, n, cout));
    int oh, ow;
    TRY(window(v, n, x->dims[1], x->dims[2], kh, kw, &oh, &ow));
    n->p.window.depth_multiplier = 0;
    int dims[4] = {1, oh, ow, cout};
    return expect_shape(v, n, 4, dims);
}

static keyer_status check_depthwise(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 3));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_F32, 4, "weights"));
    const kr_tensor *x = input(v, n, 0), *w = input(v, n, 1);
    int kh = w->dims[1], kw = w->dims[2], cout = w->dims[3], cin = x->dims[3];
    if (w->dims[0] != 1 || cout % cin != 0) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "weights '%s' %s are not [1,KH,KW,C*M] for input '%s' %s",
                         w->name, shape_str(w, a, sizeof(a)), x->name, shape_str(x, b, sizeof(b)));
    }
    TRY(check_bias(v, n, cout));
    int oh, ow;
    TRY(window(v, n, x->dims[1], x->dims[2], kh, kw, &oh, &ow));
    /* The option is redundant (schema comment); the shapes decide. */
    n->p.window.depth_multiplier = cout / cin;
    int dims[4] = {1, oh, ow, cout};
    return expect_shape(v, n, 4, dims);
}

static keyer_status check_transpose_conv(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 3));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_F32, 4, "weights"));
    const kr_tensor *x = input(v, n, 0), *w = input(v, n, 1);
    int cout = w->dims[0], kh = w->dims[1], kw = w->dims[2], cin = w->dims[3];
    if (x->dims[3] != cin) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "input '%s' %s has %d channels but the OHWI weights '%s' %s "
                         "take %d", x->name, shape_str(x, a, sizeof(a)), x->dims[3], w->name,
                         shape_str(w, b, sizeof(b)), cin);
    }
    TRY(check_bias(v, n, cout));
    kr_window_params *p = &n->p.window;
    if (p->stride_h < 1 || p->stride_w < 1 || p->stride_h > MAX_STRIDE ||
        p->stride_w > MAX_STRIDE)
        return node_fail(v, n, BAD, "stride %dx%d (HxW) is outside 1..%d", p->stride_h,
                         p->stride_w, MAX_STRIDE);
    if (p->padding != KR_PADDING_SAME && p->padding != KR_PADDING_VALID)
        return node_fail(v, n, BAD, "padding %d is neither SAME nor VALID", (int)p->padding);
    /* MediaPipe transpose_conv_bias.cc: P = max(0, K - ((n-1) mod S) - 1) for SAME, else 0;
     * out = S*(n-1) + K - P; the kernel offsets by P/2. */
    int in[2] = {x->dims[1], x->dims[2]}, k[2] = {kh, kw}, s[2] = {p->stride_h, p->stride_w};
    int pad[2], out[2];
    for (int a = 0; a < 2; a++) {
        int total = 0;
        if (p->padding == KR_PADDING_SAME) {
            total = k[a] - (in[a] - 1) % s[a] - 1;
            if (total < 0)
                total = 0;
        }
        long long o = (long long)s[a] * (in[a] - 1) + k[a] - total;
        if (o < 1 || o > INT_MAX)
            return node_fail(v, n, BAD, "output size %lld along %s is out of range", o,
                             a ? "W" : "H");
        pad[a] = total;
        out[a] = (int)o;
    }
    p->kernel_h = kh;
    p->kernel_w = kw;
    p->dilation_h = p->dilation_w = 1;
    p->pad_top = pad[0] / 2;
    p->pad_bottom = pad[0] - pad[0] / 2;
    p->pad_left = pad[1] / 2;
    p->pad_right = pad[1] - pad[1] / 2;
    p->depth_multiplier = 0;
    int dims[4] = {1, out[0], out[1], cout};
    return expect_shape(v, n, 4, dims);
}

static keyer_status check_pool(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    const kr_tensor *x = input(v, n, 0);
    n->p.window.dilation_h = n->p.window.dilation_w = 1;
    n->p.window.depth_multiplier = 0;
    int oh, ow;
    TRY(window(v, n, x->dims[1], x->dims[2], n->p.window.kernel_h, n->p.window.kernel_w, &oh,
               &ow));
    int dims[4] = {1, oh, ow, x->dims[3]};
    return expect_shape(v, n, 4, dims);
}

/* NumPy broadcasting of @p a and @p b into @p dims (right-aligned). */
static keyer_status broadcast(const vctx *v, const kr_node *n, const kr_tensor *a,
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

static keyer_status check_binary(const vctx *v, kr_node *n)
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

static keyer_status check_prelu(const vctx *v, kr_node *n)
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
    return expect_same_shape(v, n, x);
}

static keyer_status check_unary(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    return expect_same_shape(v, n, input(v, n, 0));
}

static keyer_status check_mean(const vctx *v, kr_node *n)
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
            return node_fail(v, n, UNSUP, "reduces the batch axis 0");
        mask |= 1u << a;
    }
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

static keyer_status check_pad(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_I32, 2, "paddings"));
    const kr_tensor *x = input(v, n, 0), *pads = input(v, n, 1);
    if (pads->dims[0] != x->rank || pads->dims[1] != 2) {
        char a[96];
        return node_fail(v, n, BAD, "paddings '%s' %s are not [%d,2]", pads->name,
                         shape_str(pads, a, sizeof(a)), x->rank);
    }
    const int32_t *p = pads->data;
    int dims[KR_MAX_DIMS];
    memset(&n->p.pad, 0, sizeof(n->p.pad));
    for (int d = 0; d < x->rank; d++) {
        int before = p[2 * d], after = p[2 * d + 1];
        if (before < 0 || after < 0 || before > MAX_EXTENT || after > MAX_EXTENT)
            return node_fail(v, n, BAD, "padding (%d, %d) of dimension %d is out of range",
                             before, after, d);
        if (d == 0 && (before || after))
            return node_fail(v, n, UNSUP, "pads the batch axis 0");
        long long size = (long long)x->dims[d] + before + after;
        if (size > INT_MAX)
            return node_fail(v, n, BAD, "padded dimension %d is too large", d);
        n->p.pad.before[d] = before;
        n->p.pad.after[d] = after;
        dims[d] = (int)size;
    }
    return expect_shape(v, n, x->rank, dims);
}

static keyer_status check_resize(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_I32, 1, "size"));
    const kr_tensor *x = input(v, n, 0), *size = input(v, n, 1);
    if (size->dims[0] != 2)
        return node_fail(v, n, BAD, "size tensor '%s' has %d values; expected 2", size->name,
                         size->dims[0]);
    const int32_t *s = size->data;
    if (s[0] < 1 || s[1] < 1)
        return node_fail(v, n, BAD, "output size %dx%d is not positive", s[0], s[1]);
    if (n->p.resize.align_corners && n->p.resize.half_pixel_centers)
        return node_fail(v, n, BAD, "align_corners and half_pixel_centers are both set");
    int dims[4] = {1, s[0], s[1], x->dims[3]};
    return expect_shape(v, n, 4, dims);
}

static keyer_status check_reshape(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 2));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    const kr_tensor *x = input(v, n, 0);
    kr_tensor *o = output(v, n);
    if (kr_tensor_elements(x) != kr_tensor_elements(o)) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "input '%s' %s and output '%s' %s differ in element count",
                         x->name, shape_str(x, a, sizeof(a)), o->name, shape_str(o, b, sizeof(b)));
    }
    if (n->n_inputs == 2 && n->inputs[1] >= 0) {
        TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_I32, 1, "shape"));
        const kr_tensor *shape = input(v, n, 1);
        const int32_t *s = shape->data;
        if (shape->dims[0] != o->rank)
            return node_fail(v, n, BAD, "shape tensor '%s' has %d entries but output '%s' has "
                             "rank %d", shape->name, shape->dims[0], o->name, o->rank);
        size_t known = 1;
        int infer = -1;
        for (int d = 0; d < o->rank; d++) {
            if (s[d] == -1 && infer < 0)
                infer = d;
            else if (s[d] <= 0 || (size_t)s[d] > MAX_ELEMENTS / known)
                return node_fail(v, n, BAD, "shape entry %d is %d", d, s[d]);
            else
                known *= (size_t)s[d];
        }
        size_t elements = kr_tensor_elements(x);
        for (int d = 0; d < o->rank; d++) {
            size_t want = d == infer ? elements / known : (size_t)s[d];
            if (d == infer && want * known != elements)
                return node_fail(v, n, BAD, "shape tensor '%s' cannot hold %zu elements",
                                 shape->name, elements);
            if (want != (size_t)o->dims[d])
                return node_fail(v, n, BAD, "shape entry %d gives %zu but output '%s' has %d", d,
                                 want, o->name, o->dims[d]);
        }
    }
    o->view_of = n->inputs[0];
    return KEYER_OK;
}

static keyer_status check_concat(const vctx *v, kr_node *n)
{
    if (n->n_inputs < 1)
        return node_fail(v, n, BAD, "has no inputs");
    const kr_tensor *o = output(v, n);
    int axis = n->p.concat.axis;
    if (axis < -o->rank || axis >= o->rank)
        return node_fail(v, n, BAD, "axis %d is outside the output's rank %d", axis, o->rank);
    if (axis < 0)
        axis += o->rank;
    if (axis == 0)
        return node_fail(v, n, UNSUP, "concatenates along the batch axis 0");
    n->p.concat.axis = axis;
    int dims[KR_MAX_DIMS];
    long long sum = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        TRY(want_input(v, n, i, WANT_ACT, KR_DTYPE_F32, o->rank, "data"));
        const kr_tensor *t = input(v, n, i);
        for (int d = 0; d < o->rank; d++) {
            if (d == axis)
                continue;
            if (i == 0)
                dims[d] = t->dims[d];
            else if (t->dims[d] != dims[d]) {
                char a[96];
                return node_fail(v, n, BAD, "input %d '%s' %s differs from input 0 outside axis "
                                 "%d", i, t->name, shape_str(t, a, sizeof(a)), axis);
            }
        }
        sum += t->dims[axis];
    }
    if (sum > INT_MAX)
        return node_fail(v, n, BAD, "concatenated size %lld is too large", sum);
    dims[axis] = (int)sum;
    return expect_shape(v, n, o->rank, dims);
}

static keyer_status check_node(const vctx *v, kr_node *n)
{
    switch (n->op) {
    case KR_OP_CONV_2D: return check_conv(v, n);
    case KR_OP_DEPTHWISE_CONV_2D: return check_depthwise(v, n);
    case KR_OP_TRANSPOSE_CONV_BIAS: return check_transpose_conv(v, n);
    case KR_OP_ADD:
    case KR_OP_MUL: return check_binary(v, n);
    case KR_OP_RELU:
    case KR_OP_RELU6:
    case KR_OP_HARD_SWISH:
    case KR_OP_LOGISTIC: return check_unary(v, n);
    case KR_OP_PRELU: return check_prelu(v, n);
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D: return check_pool(v, n);
    case KR_OP_MEAN: return check_mean(v, n);
    case KR_OP_PAD: return check_pad(v, n);
    case KR_OP_RESIZE_BILINEAR: return check_resize(v, n);
    case KR_OP_RESHAPE: return check_reshape(v, n);
    case KR_OP_CONCATENATION: return check_concat(v, n);
    default: break;
    }
    if ((unsigned)n->op < KR_OP_COUNT)
        return node_fail(v, n, KEYER_STATUS_UNSUPPORTED, "operator %s has no shape rule in this "
                         "build", kr_op_name(n->op));
    return node_fail(v, n, BAD, "unknown operator %d", (int)n->op);
}

static int has_fused_activation(kr_op op)
{
    switch (op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_ADD:
    case KR_OP_MUL:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D: return 1;
    default: return 0;
    }
}

static keyer_status check_tensors(const vctx *v)
{
    const kr_graph *g = v->g;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        const char *name = x->name ? x->name : "";
        if (x->rank < 0 || x->rank > KR_MAX_DIMS)
            return graph_fail(v, BAD, "tensor %d '%s' has rank %d", t, name, x->rank);
        size_t elements = 1;
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d] <= 0)
                return graph_fail(v, BAD, "tensor %d '%s': dimension %d is %d", t, name, d,
                                  x->dims[d]);
            if ((size_t)x->dims[d] > MAX_ELEMENTS / elements)
                return graph_fail(v, BAD, "tensor %d '%s' has more than %zu elements", t, name,
                                  MAX_ELEMENTS);
            elements *= (size_t)x->dims[d];
        }
        if (x->view_of < -1 || x->view_of >= g->n_tensors || x->view_of == t)
            return graph_fail(v, BAD, "tensor %d '%s' is a view of tensor %d", t, name,
                              x->view_of);
        if (kr_tensor_is_const(x)) {
            if (x->dtype != KR_DTYPE_F32 && x->dtype != KR_DTYPE_I32)
                return graph_fail(v, UNSUP, "constant tensor %d '%s' is %s", t, name,
                                  dtype_name(x->dtype));
            if (x->view_of >= 0)
                return graph_fail(v, BAD, "constant tensor %d '%s' is a view", t, name);
        } else {
            if (x->dtype != KR_DTYPE_F32)
                return graph_fail(v, UNSUP, "tensor %d '%s' is a %s activation; keyer computes "
                                  "in FLOAT32", t, name, dtype_name(x->dtype));
            if (x->rank < 1 || x->dims[0] != 1) {
                char a[96];
                return graph_fail(v, BAD, "activation tensor %d '%s' %s does not have batch 1 "
                                  "in dimension 0", t, name, shape_str(x, a, sizeof(a)));
            }
        }
    }
    return KEYER_OK;
}

static keyer_status check_io(const vctx *v, unsigned char *mark)
{
    const kr_graph *g = v->g;
    if (g->n_inputs < 1 || g->n_outputs < 1 || !g->inputs || !g->outputs)
        return graph_fail(v, BAD, "the graph has %d inputs and %d outputs; it needs at least one "
                          "of each", g->n_inputs, g->n_outputs);
    for (int i = 0; i < g->n_inputs; i++) {
        int t = g->inputs[i];
        if (t < 0 || t >= g->n_tensors)
            return graph_fail(v, BAD, "graph input %d is tensor %d, out of range", i, t);
        if (kr_tensor_is_const(&g->tensors[t]))
            return graph_fail(v, BAD, "graph input %d, tensor '%s', is a constant", i,
                              g->tensors[t].name);
        if (mark[t] & MARK_READABLE)
            return graph_fail(v, BAD, "tensor '%s' is listed twice among the graph inputs",
                              g->tensors[t].name);
        mark[t] |= MARK_READABLE;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int t = g->outputs[i];
        if (t < 0 || t >= g->n_tensors)
            return graph_fail(v, BAD, "graph output %d is tensor %d, out of range", i, t);
        if (kr_tensor_is_const(&g->tensors[t]))
            return graph_fail(v, UNSUP, "graph output %d, tensor '%s', is a constant", i,
                              g->tensors[t].name);
        if (mark[t] & MARK_OUTPUT)
            return graph_fail(v, BAD, "tensor '%s' is listed twice among the graph outputs",
                              g->tensors[t].name);
        mark[t] |= MARK_OUTPUT;
    }
    return KEYER_OK;
}

/* Walks every view chain; state: 0 unvisited, 2 on the current walk, 3 done. */
static keyer_status check_views(const vctx *v, unsigned char *state)
{
    const kr_graph *g = v->g;
    for (int t = 0; t < g->n_tensors; t++) {
        int cur = t;
        while (cur >= 0 && state[cur] != 3) {
            if (state[cur] == 2)
                return graph_fail(v, BAD, "the views of tensor %d '%s' form a cycle", t,
                                  g->tensors[t].name);
            state[cur] = 2;
            cur = g->tensors[cur].view_of;
        }
        for (cur = t; cur >= 0 && state[cur] == 2; cur = g->tensors[cur].view_of)
            state[cur] = 3;
    }
    return KEYER_OK;
}

static keyer_status validate(const vctx *v, unsigned char *mark)
{
    kr_graph *g = v->g;
    TRY(check_tensors(v));
    /* MARK_READABLE: a constant, a graph input or already written. */
    TRY(check_io(v, mark));
    for (int t = 0; t < g->n_tensors; t++)
        if (kr_tensor_is_const(&g->tensors[t]))
            mark[t] |= MARK_READABLE;
    for (int i = 0; i < g->n_nodes; i++) {
        kr_node *n = &g->nodes[i];
        if ((unsigned)n->op >= KR_OP_COUNT)
            return graph_fail(v, BAD, "node %d (operator %d) has unknown operator %d", i,
                              n->source_index, (int)n->op);
        if (n->n_inputs < 0 || n->n_inputs > KR_MAX_NODE_INPUTS || n->n_outputs != 1)
            return node_fail(v, n, BAD, "has %d inputs and %d outputs", n->n_inputs,
                             n->n_outputs);
        for (int k = 0; k < n->n_inputs; k++) {
            int t = n->inputs[k];
            if (t < -1 || t >= g->n_tensors)
                return node_fail(v, n, BAD, "input %d is tensor %d, out of range (%d tensors)", k,
                                 t, g->n_tensors);
            if (t >= 0 && !(mark[t] & MARK_READABLE))
                return node_fail(v, n, BAD, "input %d, tensor '%s', is read before any operator "
                                 "writes it", k, g->tensors[t].name);
        }
        int o = n->outputs[0];
        if (o < 0 || o >= g->n_tensors)
            return node_fail(v, n, BAD, "output is tensor %d, out of range (%d tensors)", o,
                             g->n_tensors);
        const kr_tensor *ot = &g->tensors[o];
        if (kr_tensor_is_const(ot))
            return node_fail(v, n, BAD, "writes constant tensor '%s'", ot->name);
        if (mark[o] & MARK_READABLE) {
            int is_input = 0;
            for (int k = 0; k < g->n_inputs; k++)
                is_input |= g->inputs[k] == o;
            return node_fail(v, n, BAD, "writes tensor '%s', which %s", ot->name,
                             is_input ? "is a graph input" : "an earlier operator already wrote");
        }
        if ((unsigned)n->activation > KR_ACT_RELU6 ||
            (n->activation != KR_ACT_NONE && !has_fused_activation(n->op)))
            return node_fail(v, n, BAD, "has fused activation %d, which it cannot take",
                             (int)n->activation);
        TRY(check_node(v, n));
        mark[o] |= MARK_READABLE;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (!(mark[g->outputs[i]] & MARK_READABLE))
            return graph_fail(v, BAD, "graph output %d, tensor '%s', is never written", i,
                              g->tensors[g->outputs[i]].name);
    memset(mark, 0, (size_t)g->n_tensors);
    return check_views(v, mark);
}

keyer_status kr_graph_validate(kr_graph *g, keyer_error *err)
{
    if (!g)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "kr_graph_validate: no graph");
    if (!g->name)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_graph_validate: the graph has no name");
    vctx v = {g, err};
    if (g->n_tensors < 0 || g->n_nodes < 0 || (g->n_tensors && !g->tensors) ||
        (g->n_nodes && !g->nodes))
        return graph_fail(&v, BAD, "the graph has %d tensors and %d nodes", g->n_tensors,
                          g->n_nodes);
    unsigned char *mark = calloc((size_t)g->n_tensors + 1, 1);
    if (!mark)
        return graph_fail(&v, KEYER_STATUS_OUT_OF_MEMORY, "cannot allocate %d tensor marks",
                          g->n_tensors);
    keyer_status st = validate(&v, mark);
    free(mark);
    if (st == KEYER_OK)
        kr_graph_link(g);
    return st;
}
