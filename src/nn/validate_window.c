/*
 * Shape rules of the spatial window operators (validate_internal.h): CONV_2D (groups),
 * DEPTHWISE_CONV_2D, Convolution2DTransposeBias (MediaPipe), TRANSPOSE_CONV (ONNX ConvTranspose,
 * groups, dilation, explicit pads, output padding) and the pools (explicit pads, ceil_mode,
 * count_include_pad, dilation).
 *
 * Output sizes per spatial axis, k_eff = (k - 1) * dilation + 1:
 *   SAME / VALID   TFLite's rules (kr_window_out_size; the odd SAME pad after).
 *   EXPLICIT       floor((n + before + after - k_eff) / s) + 1; with ceil_mode (pools only) the
 *                  ceiling instead, less one when that last window would start at or past
 *                  n + before (inside the end padding; PyTorch's and ONNX's rule). Pools need
 *                  each pad smaller than the kernel (as ONNX Runtime does).
 *   TRANSPOSE_CONV base = s * (n - 1) + k_eff - before - after; the output may be base to
 *                  base + s - 1 (ONNX output_padding in [0, stride)).
 */
#include <limits.h>

#include "nn/validate_internal.h"

static keyer_status check_stride_dilation(const vctx *v, const kr_node *n)
{
    const kr_window_params *w = &n->p.window;
    if (w->stride_h < 1 || w->stride_w < 1 || w->stride_h > MAX_STRIDE ||
        w->stride_w > MAX_STRIDE)
        return node_fail(v, n, BAD, "stride %dx%d (HxW) is outside 1..%d", w->stride_h,
                         w->stride_w, MAX_STRIDE);
    if (w->dilation_h < 1 || w->dilation_w < 1 || w->dilation_h > MAX_STRIDE ||
        w->dilation_w > MAX_STRIDE)
        return node_fail(v, n, BAD, "dilation %dx%d (HxW) is outside 1..%d", w->dilation_h,
                         w->dilation_w, MAX_STRIDE);
    return KEYER_OK;
}

static keyer_status check_explicit_pads(const vctx *v, const kr_node *n)
{
    const kr_window_params *w = &n->p.window;
    int pads[4] = {w->pad_top, w->pad_bottom, w->pad_left, w->pad_right};
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > MAX_EXTENT)
            return node_fail(v, n, BAD, "explicit pads (top %d, bottom %d, left %d, right %d) "
                             "are outside 0..%d", pads[0], pads[1], pads[2], pads[3], MAX_EXTENT);
    return KEYER_OK;
}

/* Output size along one axis with explicit pads; 0 when the window does not fit. */
static int explicit_out(int n, int before, int after, int k_eff, int s, int ceil_mode)
{
    long long span = (long long)n + before + after - k_eff;
    if (span < 0)
        return 0;
    long long out = span / s + 1;
    if (ceil_mode) {
        out = (span + s - 1) / s + 1;
        if ((out - 1) * s >= (long long)n + before)
            out--;
    }
    return out > INT_MAX ? 0 : (int)out;
}

/* Checks strides, dilations, paddings and ceil_mode, computes the output size and fills the
 * kernel size and (SAME / VALID) the resolved paddings. */
static keyer_status window(const vctx *v, kr_node *n, int in_h, int in_w, int kh, int kw,
                           int is_pool, int *out_h, int *out_w)
{
    kr_window_params *w = &n->p.window;
    TRY(check_stride_dilation(v, n));
    if (kh < 1 || kw < 1)
        return node_fail(v, n, BAD, "window %dx%d (HxW) is empty", kh, kw);
    long long eh = (long long)(kh - 1) * w->dilation_h + 1;
    long long ew = (long long)(kw - 1) * w->dilation_w + 1;
    if (eh > MAX_EXTENT || ew > MAX_EXTENT)
        return node_fail(v, n, BAD, "dilated window %lldx%lld (HxW) is too large", eh, ew);
    if (w->ceil_mode && (!is_pool || w->padding != KR_PADDING_EXPLICIT))
        return node_fail(v, n, BAD, "ceil_mode is set; only pools with explicit padding take it");
    if (w->count_include_pad && n->op != KR_OP_AVERAGE_POOL_2D)
        return node_fail(v, n, BAD, "count_include_pad is set; only AVERAGE_POOL_2D takes it");
    switch (w->padding) {
    case KR_PADDING_SAME:
    case KR_PADDING_VALID:
        *out_h = kr_window_out_size(w->padding, in_h, kh, w->stride_h, w->dilation_h);
        *out_w = kr_window_out_size(w->padding, in_w, kw, w->stride_w, w->dilation_w);
        if (w->padding == KR_PADDING_SAME) {
            kr_window_same_pads(in_h, kh, w->stride_h, w->dilation_h, &w->pad_top,
                                &w->pad_bottom);
            kr_window_same_pads(in_w, kw, w->stride_w, w->dilation_w, &w->pad_left,
                                &w->pad_right);
        } else {
            w->pad_top = w->pad_bottom = w->pad_left = w->pad_right = 0;
        }
        break;
    case KR_PADDING_EXPLICIT:
        TRY(check_explicit_pads(v, n));
        if (is_pool && (w->pad_top >= kh || w->pad_bottom >= kh || w->pad_left >= kw ||
                        w->pad_right >= kw))
            return node_fail(v, n, BAD, "pads (top %d, bottom %d, left %d, right %d) are not "
                             "smaller than the %dx%d (HxW) window", w->pad_top, w->pad_bottom,
                             w->pad_left, w->pad_right, kh, kw);
        *out_h = explicit_out(in_h, w->pad_top, w->pad_bottom, (int)eh, w->stride_h,
                              w->ceil_mode);
        *out_w = explicit_out(in_w, w->pad_left, w->pad_right, (int)ew, w->stride_w,
                              w->ceil_mode);
        break;
    default:
        return node_fail(v, n, BAD, "padding %d is neither SAME, VALID nor EXPLICIT",
                         (int)w->padding);
    }
    if (*out_h <= 0 || *out_w <= 0)
        return node_fail(v, n, BAD, "the %lldx%lld (HxW) window does not fit the %dx%d input "
                         "with its padding", eh, ew, in_h, in_w);
    w->kernel_h = kh;
    w->kernel_w = kw;
    return KEYER_OK;
}

/* Bias: input 2, constant [cout]; absent allowed only when @p optional. */
static keyer_status check_bias(const vctx *v, const kr_node *n, int cout, int optional)
{
    if (n->n_inputs < 3 || n->inputs[2] < 0) {
        if (optional)
            return KEYER_OK;
        return node_fail(v, n, UNSUP, "has no bias input; keyer needs one");
    }
    TRY(want_input(v, n, 2, WANT_CONST, KR_DTYPE_F32, 1, "bias"));
    const kr_tensor *b = input(v, n, 2);
    if (b->dims[0] != cout)
        return node_fail(v, n, BAD, "bias '%s' has %d values for %d output channels", b->name,
                         b->dims[0], cout);
    return KEYER_OK;
}

/* groups 0 or 1 means ungrouped; sets it to 1. */
static keyer_status check_groups(const vctx *v, kr_node *n, int cin, int cout)
{
    kr_window_params *p = &n->p.window;
    if (p->groups == 0)
        p->groups = 1;
    if (p->groups < 1 || cin % p->groups != 0 || cout % p->groups != 0)
        return node_fail(v, n, BAD, "groups %d does not divide %d input and %d output channels",
                         p->groups, cin, cout);
    return KEYER_OK;
}

keyer_status kr_val_check_conv(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 3));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_F32, 4, "weights"));
    const kr_tensor *x = input(v, n, 0), *w = input(v, n, 1);
    int cout = w->dims[0], kh = w->dims[1], kw = w->dims[2], cin_g = w->dims[3];
    int groups = n->p.window.groups > 1 ? n->p.window.groups : 1;
    if (groups == 1 && x->dims[3] != cin_g) {
        /* A TFLite model (no groups parameter) whose channels are a multiple of the weights'
         * is a grouped convolution that TFLite infers from the shapes; keyer takes groups only
         * as a parameter (ONNX). */
        char a[96], b[96];
        return node_fail(v, n, x->dims[3] % cin_g == 0 ? UNSUP : BAD,
                         "input '%s' %s has %d channels but the OHWI weights '%s' %s take %d%s",
                         x->name, shape_str(x, a, sizeof(a)), x->dims[3], w->name,
                         shape_str(w, b, sizeof(b)), cin_g,
                         x->dims[3] % cin_g == 0 ? " (grouped convolution is not supported)" : "");
    }
    if ((long long)cin_g * groups != x->dims[3]) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "input '%s' %s has %d channels but the OHWI weights '%s' %s "
                         "take %d per group in %d groups", x->name, shape_str(x, a, sizeof(a)),
                         x->dims[3], w->name, shape_str(w, b, sizeof(b)), cin_g, groups);
    }
    TRY(check_groups(v, n, x->dims[3], cout));
    TRY(check_bias(v, n, cout, 0));
    int oh, ow;
    TRY(window(v, n, x->dims[1], x->dims[2], kh, kw, 0, &oh, &ow));
    n->p.window.depth_multiplier = 0;
    int dims[4] = {x->dims[0], oh, ow, cout};
    return expect_shape(v, n, 4, dims);
}

keyer_status kr_val_check_depthwise(const vctx *v, kr_node *n)
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
    if (n->p.window.groups > 1)
        return node_fail(v, n, BAD, "has groups %d; a depthwise convolution has none",
                         n->p.window.groups);
    TRY(check_bias(v, n, cout, 0));
    int oh, ow;
    TRY(window(v, n, x->dims[1], x->dims[2], kh, kw, 0, &oh, &ow));
    /* The option is redundant (schema comment); the shapes decide. */
    n->p.window.depth_multiplier = cout / cin;
    int dims[4] = {x->dims[0], oh, ow, cout};
    return expect_shape(v, n, 4, dims);
}

keyer_status kr_val_check_transpose_conv_bias(const vctx *v, kr_node *n)
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
    TRY(check_bias(v, n, cout, 0));
    kr_window_params *p = &n->p.window;
    if (p->stride_h < 1 || p->stride_w < 1 || p->stride_h > MAX_STRIDE ||
        p->stride_w > MAX_STRIDE)
        return node_fail(v, n, BAD, "stride %dx%d (HxW) is outside 1..%d", p->stride_h,
                         p->stride_w, MAX_STRIDE);
    if (p->padding != KR_PADDING_SAME && p->padding != KR_PADDING_VALID)
        return node_fail(v, n, BAD, "padding %d is neither SAME nor VALID", (int)p->padding);
    if (p->groups > 1 || p->ceil_mode || p->count_include_pad)
        return node_fail(v, n, BAD, "has groups, ceil_mode or count_include_pad set; it takes "
                         "none of them");
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
    int dims[4] = {x->dims[0], out[0], out[1], cout};
    return expect_shape(v, n, 4, dims);
}

keyer_status kr_val_check_transpose_conv(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 3));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_F32, 4, "weights"));
    const kr_tensor *x = input(v, n, 0), *w = input(v, n, 1);
    const kr_tensor *o = output(v, n);
    kr_window_params *p = &n->p.window;
    int cout = w->dims[0], kh = w->dims[1], kw = w->dims[2], cin_g = w->dims[3];
    int groups = p->groups > 1 ? p->groups : 1;
    if ((long long)cin_g * groups != x->dims[3]) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "input '%s' %s has %d channels but the [C_out,KH,KW,C_in/"
                         "groups] weights '%s' %s take %d per group in %d group(s)", x->name,
                         shape_str(x, a, sizeof(a)), x->dims[3], w->name,
                         shape_str(w, b, sizeof(b)), cin_g, groups);
    }
    TRY(check_groups(v, n, x->dims[3], cout));
    TRY(check_bias(v, n, cout, 1));
    TRY(check_stride_dilation(v, n));
    if (p->ceil_mode || p->count_include_pad)
        return node_fail(v, n, BAD, "has ceil_mode or count_include_pad set; it takes neither");
    if (p->padding == KR_PADDING_VALID)
        p->pad_top = p->pad_bottom = p->pad_left = p->pad_right = 0;
    else if (p->padding != KR_PADDING_EXPLICIT)
        return node_fail(v, n, BAD, "padding %d is neither VALID nor EXPLICIT (the importer "
                         "resolves ONNX auto_pad into explicit pads)", (int)p->padding);
    TRY(check_explicit_pads(v, n));
    if (o->rank != 4 || o->dims[0] != x->dims[0] || o->dims[3] != cout) {
        char a[96];
        return node_fail(v, n, BAD, "output '%s' %s is not [%d,H,W,%d]", o->name,
                         shape_str(o, a, sizeof(a)), x->dims[0], cout);
    }
    int k[2] = {kh, kw}, s[2] = {p->stride_h, p->stride_w};
    int d[2] = {p->dilation_h, p->dilation_w};
    int before[2] = {p->pad_top, p->pad_left}, after[2] = {p->pad_bottom, p->pad_right};
    for (int a = 0; a < 2; a++) {
        long long base = (long long)s[a] * (x->dims[1 + a] - 1) + (long long)(k[a] - 1) * d[a] +
                         1 - before[a] - after[a];
        long long got = o->dims[1 + a];
        if (base < 1 || got < base || got > base + s[a] - 1)
            return node_fail(v, n, BAD, "output size %lld along %s is outside %lld..%lld "
                             "(stride %d, kernel %d, dilation %d, pads %d/%d; output_padding "
                             "must be below the stride)", got, a ? "W" : "H", base,
                             base + s[a] - 1, s[a], k[a], d[a], before[a], after[a]);
    }
    p->kernel_h = kh;
    p->kernel_w = kw;
    p->depth_multiplier = 0;
    return KEYER_OK;
}

keyer_status kr_val_check_pool(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    const kr_tensor *x = input(v, n, 0);
    kr_window_params *p = &n->p.window;
    if (p->dilation_h == 0)
        p->dilation_h = 1;
    if (p->dilation_w == 0)
        p->dilation_w = 1;
    if (p->groups > 1)
        return node_fail(v, n, BAD, "has groups %d; a pool has none", p->groups);
    p->depth_multiplier = 0;
    int oh, ow;
    TRY(window(v, n, x->dims[1], x->dims[2], p->kernel_h, p->kernel_w, 1, &oh, &ow));
    int dims[4] = {x->dims[0], oh, ow, x->dims[3]};
    return expect_shape(v, n, 4, dims);
}
