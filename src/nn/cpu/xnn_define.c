/*
 * Translation of kr_graph nodes into XNNPACK (2022-02) subgraph nodes, and the static checks
 * saying which nodes can be translated. Operator semantics follow
 * docs/models.md section 2; the notes below say how each maps.
 *
 *  CONV_2D              convolution_2d, filter OHWI as in TFLite; groups = C_in / filter C_in.
 *                       Explicit paddings from the graph (TF SAME puts the odd one after).
 *  DEPTHWISE_CONV_2D    depthwise_convolution_2d, filter [1,KH,KW,C*M] as in TFLite.
 *  TRANSPOSE_CONV_BIAS  K == S, no padding (the shipped models): 1x1 convolution to K*K*C_out
 *                       channels + depth_to_space(K). Otherwise deconvolution_2d. XNNPACK: out = S*(in-1) + K - pad_before - pad_after
 *                       (+ adjustment, here 0), tap (iy,ky) lands at iy*S - pad_before + ky, taps
 *                       outside the output dropped: MediaPipe's scatter exactly, with
 *                       P = S*(in-1) + K - out taken from the graph's shapes, pad_before = P/2.
 *  ADD, MUL             add2 / multiply2 (NumPy broadcasting), fused activation as min/max.
 *  RELU, RELU6          clamp [0, inf) / [0, 6] (XNNPACK fuses clamps into the producer).
 *  HARD_SWISH, LOGISTIC hardswish, sigmoid.
 *  PRELU                prelu with a constant slope of C values (alpha broadcast over N,H,W).
 *  AVERAGE_POOL_2D      global_average_pooling_2d when the window is the whole (unpadded) input,
 *                       else average_pooling_2d (divides by in-bounds taps, as TFLite).
 *  MAX_POOL_2D          max_pooling_2d.
 *  MEAN over H,W        global_average_pooling_2d (+ static_reshape when keep_dims is 0).
 *  PAD                  static_constant_pad with 0 (the batch dimension must not be padded).
 *  RESIZE_BILINEAR      static_resize_bilinear_2d: no flag = half-pixel centers,
 *                       XNN_FLAG_ALIGN_CORNERS, XNN_FLAG_TENSORFLOW_LEGACY_MODE = neither.
 *  RESHAPE              static_reshape (a copy inside the runtime).
 *  CONCATENATION        not in XNNPACK 2022: reference kernel.
 *
 * ONNX additions (see nn/graph.h):
 *  CONV_2D groups       convolution_2d's groups (the filter is [C_out, KH, KW, C_in/groups]).
 *  EXPLICIT padding     the graph's four pads; pools: ceil_mode's longer output is extra
 *                       bottom/right padding, which max pooling never picks (XNNPACK reads a
 *                       padded tap as an in-window edge pixel) and average pooling never counts.
 *  AVERAGE_POOL_2D      count_include_pad with non-zero pads: static_constant_pad with zeros,
 *                       then pooling without the model's pads (only ceil's extra ones).
 *  SUB, DIV             subtract / divide (NumPy broadcasting), fused activation as min/max.
 *  SQRT, ELU, LEAKY_RELU square_root, elu, leaky_relu.  CLIP: clamp.  POW 2: square.
 *  RESIZE               LINEAR with half_pixel (pytorch_half_pixel when both outputs are > 1),
 *                       align_corners (outputs > 1) or asymmetric, and scales equal to
 *                       out/in: static_resize_bilinear_2d as for RESIZE_BILINEAR.
 *  SOFTMAX              softmax over the last axis.
 *  MATMUL               A activation, B constant [.., K, N] (leading dims 1): fully_connected
 *                       with XNN_FLAG_TRANSPOSE_WEIGHTS.
 *  TRANSPOSE_CONV       deconvolution_2d (groups, dilation); the output size from the graph:
 *                       the far padding, or the adjustment when the output is longer.
 *  PAD                  CONSTANT mode with its value: static_constant_pad.
 *  Not in XNNPACK 2022 (reference kernels): TANH, EXP, HARD_SIGMOID, other POW exponents,
 *  REDUCE_MAX, RESIZE nearest and the other coordinate modes, TRANSPOSE, SLICE, ARGMAX,
 *  GATHER, PAD reflect/edge, MEAN over other axes.
 */
#include <math.h>
#include <string.h>

#include <xnnpack.h>

#include "nn/cpu/cpu.h"

/* ---- static checks --------------------------------------------------------------------- */

static const kr_tensor *tensor_at(const kr_graph *g, int t)
{
    return (t >= 0 && t < g->n_tensors) ? &g->tensors[t] : NULL;
}

/* A non-constant float32 tensor of rank 1..KR_MAX_DIMS. */
static int is_activation(const kr_tensor *t)
{
    return t && !kr_tensor_is_const(t) && t->dtype == KR_DTYPE_F32 && t->rank >= 1 &&
           t->rank <= KR_MAX_DIMS;
}

static int is_const_f32(const kr_tensor *t)
{
    return t && kr_tensor_is_const(t) && t->dtype == KR_DTYPE_F32;
}

static int is_rank4_activation(const kr_tensor *t)
{
    return is_activation(t) && t->rank == 4;
}

/* Bias: absent, or a constant float32 vector of @p n elements. */
static int bias_ok(const kr_graph *g, int t, int n)
{
    if (t < 0)
        return 1;
    const kr_tensor *b = tensor_at(g, t);
    return is_const_f32(b) && kr_tensor_elements(b) == (size_t)n;
}

static int window_ok(const kr_window_params *w)
{
    return w->kernel_h >= 1 && w->kernel_w >= 1 && w->stride_h >= 1 && w->stride_w >= 1 &&
           w->dilation_h >= 1 && w->dilation_w >= 1 && w->pad_top >= 0 && w->pad_bottom >= 0 &&
           w->pad_left >= 0 && w->pad_right >= 0;
}

/* A dilation as the graph gives it: 0 (pools from TFLite and ONNX without the attribute) is 1. */
static int dil(int d)
{
    return d ? d : 1;
}

/* Extra padding after the input on one axis making XNNPACK's output size, which rounds down,
 * the graph's @p out (longer with ceil_mode); -1 when no padding gives it. */
static int pool_extra_pad(int in, int out, int k_eff, int s, int before, int after)
{
    int need = (out - 1) * s + k_eff - (in + before + after);
    if (need < 0)
        need = 0;
    return (in + before + after + need - k_eff) / s + 1 == out ? need : -1;
}

/* The transpose convolution's total padding on one axis (negative: not expressible). */
static int deconv_total_pad(int in, int out, int k, int s)
{
    return s * (in - 1) + k - out;
}

static int supports_conv(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *f = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    if (n->n_inputs < 2 || !is_rank4_activation(in) || !is_rank4_activation(out) ||
        !is_const_f32(f) || f->rank != 4 || !window_ok(&n->p.window))
        return 0;
    int oc = f->dims[0], ic = f->dims[3];
    if (ic < 1 || oc < 1 || in->dims[3] % ic != 0 || out->dims[3] != oc)
        return 0;
    int groups = in->dims[3] / ic;
    if (oc % groups != 0 || f->dims[1] != n->p.window.kernel_h ||
        f->dims[2] != n->p.window.kernel_w)
        return 0;
    return bias_ok(g, n->n_inputs > 2 ? n->inputs[2] : -1, oc);
}

static int supports_depthwise(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *f = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    if (n->n_inputs < 2 || !is_rank4_activation(in) || !is_rank4_activation(out) ||
        !is_const_f32(f) || f->rank != 4 || f->dims[0] != 1 || !window_ok(&n->p.window))
        return 0;
    int c = in->dims[3], oc = out->dims[3];
    if (c < 1 || oc % c != 0 || f->dims[3] != oc || f->dims[1] != n->p.window.kernel_h ||
        f->dims[2] != n->p.window.kernel_w)
        return 0;
    return bias_ok(g, n->n_inputs > 2 ? n->inputs[2] : -1, oc);
}

static int supports_deconv(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *f = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    if (n->n_inputs < 2 || !is_rank4_activation(in) || !is_rank4_activation(out) ||
        !is_const_f32(f) || f->rank != 4)
        return 0;
    const kr_window_params *w = &n->p.window;
    int k_h = f->dims[1], k_w = f->dims[2];
    if (w->stride_h < 1 || w->stride_w < 1 || k_h < 1 || k_w < 1 || f->dims[3] != in->dims[3] ||
        f->dims[0] != out->dims[3])
        return 0;
    int ph = deconv_total_pad(in->dims[1], out->dims[1], k_h, w->stride_h);
    int pw = deconv_total_pad(in->dims[2], out->dims[2], k_w, w->stride_w);
    if (ph < 0 || pw < 0 || ph >= k_h || pw >= k_w)
        return 0;
    return bias_ok(g, n->n_inputs > 2 ? n->inputs[2] : -1, f->dims[0]);
}

static int supports_binary(const kr_graph *g, const kr_node *n)
{
    if (n->n_inputs != 2)
        return 0;
    const kr_tensor *a = tensor_at(g, n->inputs[0]), *b = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    if (!a || !b || !is_activation(out) || a->dtype != KR_DTYPE_F32 || b->dtype != KR_DTYPE_F32)
        return 0;
    if (kr_tensor_is_const(a) && kr_tensor_is_const(b))
        return 0; /* nothing to compute per inference; left to the reference kernel */
    /* A batched operand must have the output's rank, so that scaling dims[0] by the batch
     * keeps the NumPy broadcast right-aligned as at batch 1. Constants are not scaled. */
    if ((!kr_tensor_is_const(a) && a->rank != out->rank) ||
        (!kr_tensor_is_const(b) && b->rank != out->rank) || a->rank > out->rank ||
        b->rank > out->rank)
        return 0;
    if (kr_tensor_is_const(a) || kr_tensor_is_const(b)) {
        /* A constant broadcast along the batch needs dims[0] == 1 when it has the full rank. */
        const kr_tensor *c = kr_tensor_is_const(a) ? a : b;
        if (c->rank == out->rank && c->dims[0] != 1)
            return 0;
    }
    return 1;
}

static int supports_unary(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    return n->n_inputs >= 1 && is_activation(in) && is_activation(out) &&
           kr_tensor_elements(in) == kr_tensor_elements(out);
}

static int supports_prelu(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    const kr_tensor *alpha = n->n_inputs >= 2 ? tensor_at(g, n->inputs[1]) : NULL;
    if (!is_rank4_activation(in) || !is_rank4_activation(out) || !is_const_f32(alpha))
        return 0;
    /* XNNPACK's slope is one value per channel: alpha must be [..., 1, C]. */
    if (alpha->rank < 1 || alpha->dims[alpha->rank - 1] != in->dims[3])
        return 0;
    for (int d = 0; d < alpha->rank - 1; d++)
        if (alpha->dims[d] != 1)
            return 0;
    return 1;
}

static int is_global_pool(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    const kr_window_params *w = &n->p.window;
    return w->kernel_h == in->dims[1] && w->kernel_w == in->dims[2] && w->pad_top == 0 &&
           w->pad_bottom == 0 && w->pad_left == 0 && w->pad_right == 0 && out->dims[1] == 1 &&
           out->dims[2] == 1;
}

/* Whether average pooling must count the model's pads (done as an explicit zero pad). */
static int pool_pads_counted(const kr_node *n)
{
    const kr_window_params *w = &n->p.window;
    return n->op == KR_OP_AVERAGE_POOL_2D && w->count_include_pad &&
           (w->pad_top || w->pad_bottom || w->pad_left || w->pad_right);
}

static int supports_pool(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    kr_window_params w = n->p.window;
    w.dilation_h = dil(w.dilation_h);
    w.dilation_w = dil(w.dilation_w);
    if (!is_rank4_activation(in) || !is_rank4_activation(out) || !window_ok(&w) ||
        in->dims[3] != out->dims[3] || in->dims[0] != out->dims[0])
        return 0;
    if (n->op == KR_OP_AVERAGE_POOL_2D && is_global_pool(g, n))
        return 1;
    /* XNNPACK rejects 1x1 pooling windows (an identity or a subsampling). */
    if (w.kernel_h * w.kernel_w <= 1 || w.dilation_h != 1 || w.dilation_w != 1)
        return 0;
    int eh = pool_extra_pad(in->dims[1], out->dims[1], w.kernel_h, w.stride_h, w.pad_top,
                            w.pad_bottom);
    int ew = pool_extra_pad(in->dims[2], out->dims[2], w.kernel_w, w.stride_w, w.pad_left,
                            w.pad_right);
    if (eh < 0 || ew < 0)
        return 0;
    /* Every window holds an input pixel: XNNPACK's max pooling reads a padded tap as the
     * nearest edge pixel, which is then one of the window's own. */
    return w.pad_top < w.kernel_h && w.pad_left < w.kernel_w &&
           (out->dims[1] - 1) * w.stride_h - w.pad_top <= in->dims[1] - 1 &&
           (out->dims[2] - 1) * w.stride_w - w.pad_left <= in->dims[2] - 1;
}

static int supports_mean(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    if (!is_rank4_activation(in) || !is_activation(out) || n->p.mean.axes_mask != 0x6u)
        return 0;
    if (n->p.mean.keep_dims)
        return out->rank == 4 && out->dims[1] == 1 && out->dims[2] == 1 &&
               out->dims[3] == in->dims[3];
    return out->rank == 2 && out->dims[1] == in->dims[3];
}

static int supports_pad(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    if (!is_activation(in) || !is_activation(out) || in->rank != out->rank)
        return 0;
    if (n->n_inputs > 2 && n->inputs[2] >= 0)
        return 0; /* an explicit pad value (PADV2) */
    if (n->p.pad.mode != KR_PAD_CONSTANT || !isfinite(n->p.pad.value))
        return 0;
    for (int d = 0; d < in->rank; d++)
        if (n->p.pad.before[d] < 0 || n->p.pad.after[d] < 0)
            return 0;
    return n->p.pad.before[0] == 0 && n->p.pad.after[0] == 0;
}

static int supports_resize(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    return is_rank4_activation(in) && is_rank4_activation(out) && in->dims[3] == out->dims[3] &&
           !(n->p.resize.align_corners && n->p.resize.half_pixel_centers);
}

/* A scale the model gave equals out/in (what XNNPACK's coordinate rules use). */
static int scale_is_ratio(float scale, int in, int out)
{
    float r = (float)out / (float)in;
    return fabsf(scale - r) <= 1e-6f * r;
}

static int supports_resize_onnx(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    if (!is_rank4_activation(in) || !is_rank4_activation(out) || in->dims[3] != out->dims[3] ||
        in->dims[0] != out->dims[0] || n->p.resize_onnx.mode != KR_RESIZE_LINEAR)
        return 0;
    int ih = in->dims[1], iw = in->dims[2], oh = out->dims[1], ow = out->dims[2];
    int ratio = scale_is_ratio(n->p.resize_onnx.scale_h, ih, oh) &&
                scale_is_ratio(n->p.resize_onnx.scale_w, iw, ow);
    switch (n->p.resize_onnx.coord) {
    case KR_COORD_HALF_PIXEL: return ratio;
    case KR_COORD_PYTORCH_HALF_PIXEL: return ratio && oh > 1 && ow > 1;
    case KR_COORD_ALIGN_CORNERS: return oh > 1 && ow > 1;
    case KR_COORD_ASYMMETRIC: return ratio;
    default: break;
    }
    return 0;
}

/* SUB and DIV as ADD; the activations below with parameters XNNPACK accepts. */
static int supports_unary_onnx(const kr_graph *g, const kr_node *n)
{
    if (!supports_unary(g, n))
        return 0;
    float a = n->p.unary.alpha, b = n->p.unary.beta;
    switch (n->op) {
    case KR_OP_SQRT: return 1;
    case KR_OP_ELU: return isnormal(a) && a > 0.0f;
    case KR_OP_LEAKY_RELU: return isfinite(a);
    case KR_OP_CLIP: return !isnan(a) && !isnan(b) && a < b;
    case KR_OP_POW: return a == 2.0f;
    default: break;
    }
    return 0;
}

static int supports_softmax(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *out = tensor_at(g, n->outputs[0]);
    return is_activation(in) && is_activation(out) && kr_tensor_same_dims(in, out) &&
           n->p.axis.axis == in->rank - 1;
}

static int supports_matmul(const kr_graph *g, const kr_node *n)
{
    if (n->n_inputs != 2)
        return 0;
    const kr_tensor *a = tensor_at(g, n->inputs[0]), *bt = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    if (!is_activation(a) || !is_const_f32(bt) || !is_activation(out) || a->rank < 2 ||
        bt->rank != a->rank || out->rank != a->rank)
        return 0;
    for (int d = 0; d < bt->rank - 2; d++)
        if (bt->dims[d] != 1)
            return 0;
    int k = bt->dims[bt->rank - 2], nn = bt->dims[bt->rank - 1];
    if (a->dims[a->rank - 1] != k || out->dims[out->rank - 1] != nn)
        return 0;
    for (int d = 0; d < a->rank - 1; d++)
        if (out->dims[d] != a->dims[d])
            return 0;
    return 1;
}

/* ONNX ConvTranspose on one axis: XNNPACK's far padding (>= 0) and adjustment (< stride)
 * giving the graph's output size @p out; 0 when none does. */
static int tconv_axis(int in, int out, int k, int s, int d, int before, int *after, int *adj)
{
    int r = s * (in - 1) + d * (k - 1) + 1 - before - out;
    *after = r > 0 ? r : 0;
    *adj = r < 0 ? -r : 0;
    return before >= 0 && *adj < s;
}

static int supports_tconv(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *f = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    if (n->n_inputs < 2 || !is_rank4_activation(in) || !is_rank4_activation(out) ||
        !is_const_f32(f) || f->rank != 4)
        return 0;
    const kr_window_params *w = &n->p.window;
    int groups = w->groups > 1 ? w->groups : 1, pb, adj;
    if (w->stride_h < 1 || w->stride_w < 1 || f->dims[1] < 1 || f->dims[2] < 1 ||
        f->dims[0] != out->dims[3] || f->dims[0] % groups != 0 ||
        in->dims[3] != groups * f->dims[3] || in->dims[0] != out->dims[0])
        return 0;
    if (!tconv_axis(in->dims[1], out->dims[1], f->dims[1], w->stride_h, dil(w->dilation_h),
                    w->pad_top, &pb, &adj) ||
        !tconv_axis(in->dims[2], out->dims[2], f->dims[2], w->stride_w, dil(w->dilation_w),
                    w->pad_left, &pb, &adj))
        return 0;
    return bias_ok(g, n->n_inputs > 2 ? n->inputs[2] : -1, f->dims[0]);
}

int kr_cpu_xnn_supports(const kr_graph *g, const kr_node *n)
{
    if (!g || !n || n->n_outputs != 1 || n->n_inputs < 1 || !tensor_at(g, n->inputs[0]) ||
        !is_activation(tensor_at(g, n->outputs[0])))
        return 0;
    switch (n->op) {
    case KR_OP_CONV_2D: return supports_conv(g, n);
    case KR_OP_DEPTHWISE_CONV_2D: return supports_depthwise(g, n);
    case KR_OP_TRANSPOSE_CONV_BIAS: return supports_deconv(g, n);
    case KR_OP_ADD:
    case KR_OP_MUL: return supports_binary(g, n);
    case KR_OP_RELU:
    case KR_OP_RELU6:
    case KR_OP_HARD_SWISH:
    case KR_OP_LOGISTIC: return supports_unary(g, n);
    case KR_OP_PRELU: return supports_prelu(g, n);
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D: return supports_pool(g, n);
    case KR_OP_MEAN: return supports_mean(g, n);
    case KR_OP_PAD: return supports_pad(g, n);
    case KR_OP_RESIZE_BILINEAR: return supports_resize(g, n);
    case KR_OP_RESHAPE: return supports_unary(g, n);
    case KR_OP_SUB:
    case KR_OP_DIV: return supports_binary(g, n);
    case KR_OP_SQRT:
    case KR_OP_ELU:
    case KR_OP_LEAKY_RELU:
    case KR_OP_CLIP:
    case KR_OP_POW: return supports_unary_onnx(g, n);
    case KR_OP_RESIZE: return supports_resize_onnx(g, n);
    case KR_OP_SOFTMAX: return supports_softmax(g, n);
    case KR_OP_MATMUL: return supports_matmul(g, n);
    case KR_OP_TRANSPOSE_CONV: return supports_tconv(g, n);
    case KR_OP_CONCATENATION:
    default: break;
    }
    return 0;
}

/* Transpose convolutions with K == S on both axes and no padding scatter each input pixel to
 * its own K x K output block: a 1x1 convolution to K*K*C_out channels ordered (ky, kx, oc)
 * followed by depth_to_space(K) computes exactly that, and far faster than XNNPACK's
 * deconvolution for C_out = 1 (the selfie models' last layer). */
static int deconv_as_depth_to_space(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *f = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    int k = f->dims[1];
    return k >= 2 && f->dims[2] == k && n->p.window.stride_h == k && n->p.window.stride_w == k &&
           out->dims[1] == in->dims[1] * k && out->dims[2] == in->dims[2] * k;
}

size_t kr_cpu_xnn_storage_needed(const kr_graph *g, const kr_node *n)
{
    int has_bias = n->n_inputs > 2 && n->inputs[2] >= 0;
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    size_t oc = out ? (size_t)out->dims[out->rank - 1] : 0;
    switch (n->op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_TRANSPOSE_CONV: return has_bias ? 0 : oc;
    case KR_OP_TRANSPOSE_CONV_BIAS:
        if (deconv_as_depth_to_space(g, n)) {
            const kr_tensor *f = tensor_at(g, n->inputs[1]);
            return kr_tensor_elements(f) + (size_t)f->dims[1] * (size_t)f->dims[2] * oc;
        }
        return has_bias ? 0 : oc;
    default: return 0;
    }
}

/* ---- definitions -------------------------------------------------------------------------- */

static void batched_dims(const kr_tensor *t, int batch, size_t *dims)
{
    for (int d = 0; d < t->rank; d++)
        dims[d] = (size_t)t->dims[d];
    if (t->rank > 0 && !kr_tensor_is_const(t))
        dims[0] *= (size_t)batch;
}

int kr_cpu_xnn_define_activation(kr_cpu_xnn_builder *b, int t, uint32_t external_id,
                                 uint32_t flags)
{
    size_t dims[KR_MAX_DIMS];
    const kr_tensor *tt = &b->g->tensors[t];
    batched_dims(tt, b->batch, dims);
    return (int)xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, (size_t)tt->rank, dims,
                                        NULL, external_id, flags, &b->ids[t]);
}

/* The value id of tensor @p t, defining it (constant or internal activation) on first use. */
static enum xnn_status value(kr_cpu_xnn_builder *b, int t, uint32_t *id)
{
    if (b->ids[t] == XNN_INVALID_VALUE_ID) {
        const kr_tensor *tt = &b->g->tensors[t];
        if (kr_tensor_is_const(tt)) {
            size_t dims[KR_MAX_DIMS];
            batched_dims(tt, b->batch, dims);
            enum xnn_status s =
                xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, (size_t)tt->rank, dims,
                                        tt->data, XNN_INVALID_VALUE_ID, 0, &b->ids[t]);
            if (s != xnn_status_success)
                return s;
        } else {
            enum xnn_status s =
                (enum xnn_status)kr_cpu_xnn_define_activation(b, t, XNN_INVALID_VALUE_ID, 0);
            if (s != xnn_status_success)
                return s;
        }
    }
    *id = b->ids[t];
    return xnn_status_success;
}

/* A static 1-D value of @p n floats at @p data (not cached in ids). */
static enum xnn_status static_vector(kr_cpu_xnn_builder *b, const float *data, size_t n,
                                     uint32_t *id)
{
    return xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 1, &n, data,
                                   XNN_INVALID_VALUE_ID, 0, id);
}

/* @p n floats of the builder's static storage, zeroed; NULL when it is exhausted. */
static float *take(kr_cpu_xnn_builder *b, size_t n)
{
    if (!b->storage || b->capacity - b->used < n)
        return NULL;
    float *p = b->storage + b->used;
    b->used += n;
    memset(p, 0, n * sizeof(float));
    return p;
}

/* Bias id: the graph's bias tensor, or zeros. */
static enum xnn_status bias_value(kr_cpu_xnn_builder *b, const kr_node *n, size_t channels,
                                  uint32_t *id)
{
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
        /* Declared as 1-D [C] whatever the file's rank (checked: C elements). */
        const kr_tensor *t = &b->g->tensors[n->inputs[2]];
        return static_vector(b, (const float *)t->data, channels, id);
    }
    float *zeros = take(b, channels);
    if (!zeros)
        return xnn_status_invalid_state;
    return static_vector(b, zeros, channels, id);
}

/* The transpose convolution as 1x1 convolution + depth_to_space (see above). */
static enum xnn_status define_deconv_d2s(kr_cpu_xnn_builder *b, const kr_node *n, uint32_t x,
                                         uint32_t y)
{
    const kr_graph *g = b->g;
    const kr_tensor *in = &g->tensors[n->inputs[0]], *ft = &g->tensors[n->inputs[1]];
    size_t oc = (size_t)ft->dims[0], k = (size_t)ft->dims[1], ic = (size_t)ft->dims[3];
    size_t rows = k * k * oc;
    float *w = take(b, rows * ic), *bias = take(b, rows);
    if (!w || !bias)
        return xnn_status_invalid_state;
    const float *src = (const float *)ft->data;
    const float *src_bias =
        n->n_inputs > 2 && n->inputs[2] >= 0 ? (const float *)g->tensors[n->inputs[2]].data : NULL;
    /* Row (ky*k + kx)*oc + o of the 1x1 filter is W[o, ky, kx, :]. */
    for (size_t o = 0; o < oc; o++)
        for (size_t ky = 0; ky < k; ky++)
            for (size_t kx = 0; kx < k; kx++) {
                size_t row = (ky * k + kx) * oc + o;
                memcpy(w + row * ic, src + ((o * k + ky) * k + kx) * ic, ic * sizeof(float));
                bias[row] = src_bias ? src_bias[o] : 0.0f;
            }
    size_t wdims[4] = {rows, 1, 1, ic};
    size_t mdims[4] = {(size_t)in->dims[0] * (size_t)b->batch, (size_t)in->dims[1],
                       (size_t)in->dims[2], rows};
    uint32_t wid, bid, mid;
    enum xnn_status s = xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 4, wdims, w,
                                                XNN_INVALID_VALUE_ID, 0, &wid);
    if (s == xnn_status_success)
        s = static_vector(b, bias, rows, &bid);
    if (s == xnn_status_success)
        s = xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 4, mdims, NULL,
                                    XNN_INVALID_VALUE_ID, 0, &mid);
    if (s == xnn_status_success)
        s = xnn_define_convolution_2d(b->subgraph, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, ic, rows,
                                      -INFINITY, INFINITY, x, wid, bid, mid, 0);
    if (s == xnn_status_success)
        s = xnn_define_depth_to_space(b->subgraph, mid, y, (uint32_t)k, 0);
    return s;
}

#define TRY(expr)                                                                                 \
    do {                                                                                          \
        enum xnn_status s_ = (expr);                                                              \
        if (s_ != xnn_status_success)                                                             \
            return (int)s_;                                                                       \
    } while (0)

int kr_cpu_xnn_define_node(kr_cpu_xnn_builder *b, const kr_node *n)
{
    const kr_graph *g = b->g;
    const kr_tensor *in = &g->tensors[n->inputs[0]];
    const kr_tensor *out = &g->tensors[n->outputs[0]];
    const kr_window_params *w = &n->p.window;
    float lo, hi;
    kr_activation_range(n->activation, &lo, &hi);
    uint32_t x, y, f, bias, a2;
    TRY(value(b, n->inputs[0], &x));
    TRY(value(b, n->outputs[0], &y));

    switch (n->op) {
    case KR_OP_CONV_2D: {
        const kr_tensor *ft = &g->tensors[n->inputs[1]];
        size_t gic = (size_t)ft->dims[3];
        uint32_t groups = (uint32_t)((size_t)in->dims[3] / gic);
        size_t goc = (size_t)ft->dims[0] / groups;
        TRY(value(b, n->inputs[1], &f));
        TRY(bias_value(b, n, (size_t)ft->dims[0], &bias));
        return (int)xnn_define_convolution_2d(
            b->subgraph, (uint32_t)w->pad_top, (uint32_t)w->pad_right, (uint32_t)w->pad_bottom,
            (uint32_t)w->pad_left, (uint32_t)ft->dims[1], (uint32_t)ft->dims[2],
            (uint32_t)w->stride_h, (uint32_t)w->stride_w, (uint32_t)w->dilation_h,
            (uint32_t)w->dilation_w, groups, gic, goc, lo, hi, x, f, bias, y, 0);
    }
    case KR_OP_DEPTHWISE_CONV_2D: {
        const kr_tensor *ft = &g->tensors[n->inputs[1]];
        uint32_t m = (uint32_t)(out->dims[3] / in->dims[3]);
        TRY(value(b, n->inputs[1], &f));
        TRY(bias_value(b, n, (size_t)out->dims[3], &bias));
        return (int)xnn_define_depthwise_convolution_2d(
            b->subgraph, (uint32_t)w->pad_top, (uint32_t)w->pad_right, (uint32_t)w->pad_bottom,
            (uint32_t)w->pad_left, (uint32_t)ft->dims[1], (uint32_t)ft->dims[2],
            (uint32_t)w->stride_h, (uint32_t)w->stride_w, (uint32_t)w->dilation_h,
            (uint32_t)w->dilation_w, m, (size_t)in->dims[3], lo, hi, x, f, bias, y, 0);
    }
    case KR_OP_TRANSPOSE_CONV_BIAS: {
        const kr_tensor *ft = &g->tensors[n->inputs[1]];
        int kh = ft->dims[1], kw = ft->dims[2];
        if (deconv_as_depth_to_space(g, n))
            return (int)define_deconv_d2s(b, n, x, y);
        int ph = deconv_total_pad(in->dims[1], out->dims[1], kh, w->stride_h);
        int pw = deconv_total_pad(in->dims[2], out->dims[2], kw, w->stride_w);
        TRY(value(b, n->inputs[1], &f));
        TRY(bias_value(b, n, (size_t)ft->dims[0], &bias));
        /* MediaPipe: offset = floor(P / 2) before; the rest of P falls off the far edge. */
        return (int)xnn_define_deconvolution_2d(
            b->subgraph, (uint32_t)(ph / 2), (uint32_t)(pw - pw / 2), (uint32_t)(ph - ph / 2),
            (uint32_t)(pw / 2), 0, 0, (uint32_t)kh, (uint32_t)kw, (uint32_t)w->stride_h,
            (uint32_t)w->stride_w, 1, 1, 1, (size_t)ft->dims[3], (size_t)ft->dims[0], lo, hi, x,
            f, bias, y, 0);
    }
    case KR_OP_ADD:
    case KR_OP_MUL:
        TRY(value(b, n->inputs[1], &a2));
        if (n->op == KR_OP_ADD)
            return (int)xnn_define_add2(b->subgraph, lo, hi, x, a2, y, 0);
        return (int)xnn_define_multiply2(b->subgraph, lo, hi, x, a2, y, 0);
    case KR_OP_RELU: return (int)xnn_define_clamp(b->subgraph, 0.0f, INFINITY, x, y, 0);
    case KR_OP_RELU6: return (int)xnn_define_clamp(b->subgraph, 0.0f, 6.0f, x, y, 0);
    case KR_OP_HARD_SWISH: return (int)xnn_define_hardswish(b->subgraph, x, y, 0);
    case KR_OP_LOGISTIC: return (int)xnn_define_sigmoid(b->subgraph, x, y, 0);
    case KR_OP_PRELU: {
        const kr_tensor *alpha = &g->tensors[n->inputs[1]];
        TRY(static_vector(b, (const float *)alpha->data, (size_t)in->dims[3], &a2));
        return (int)xnn_define_prelu(b->subgraph, x, a2, y, 0);
    }
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D: {
        if (n->op == KR_OP_AVERAGE_POOL_2D && is_global_pool(g, n))
            return (int)xnn_define_global_average_pooling_2d(b->subgraph, lo, hi, x, y, 0);
        uint32_t pt = (uint32_t)w->pad_top, pb = (uint32_t)w->pad_bottom;
        uint32_t pl = (uint32_t)w->pad_left, pr = (uint32_t)w->pad_right;
        /* ceil_mode: the rest of the output from extra padding that is never picked/counted */
        pb += (uint32_t)pool_extra_pad(in->dims[1], out->dims[1], w->kernel_h, w->stride_h,
                                       w->pad_top, w->pad_bottom);
        pr += (uint32_t)pool_extra_pad(in->dims[2], out->dims[2], w->kernel_w, w->stride_w,
                                       w->pad_left, w->pad_right);
        if (n->op == KR_OP_MAX_POOL_2D)
            return (int)xnn_define_max_pooling_2d(b->subgraph, pt, pr, pb, pl,
                                                  (uint32_t)w->kernel_h, (uint32_t)w->kernel_w,
                                                  (uint32_t)w->stride_h, (uint32_t)w->stride_w, 1,
                                                  1, lo, hi, x, y, 0);
        if (pool_pads_counted(n)) {
            /* count_include_pad: the model's pads as zeros the pooling counts */
            size_t pre[4] = {0, pt, pl, 0}, post[4] = {0, (size_t)w->pad_bottom,
                                                       (size_t)w->pad_right, 0};
            size_t pdims[4] = {(size_t)in->dims[0] * (size_t)b->batch,
                               (size_t)(in->dims[1] + w->pad_top + w->pad_bottom),
                               (size_t)(in->dims[2] + w->pad_left + w->pad_right),
                               (size_t)in->dims[3]};
            uint32_t padded;
            TRY(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 4, pdims, NULL,
                                        XNN_INVALID_VALUE_ID, 0, &padded));
            TRY(xnn_define_static_constant_pad(b->subgraph, pre, post, 0.0f, x, padded, 0));
            x = padded;
            pb -= (uint32_t)w->pad_bottom;
            pr -= (uint32_t)w->pad_right;
            pt = pl = 0;
        }
        return (int)xnn_define_average_pooling_2d(b->subgraph, pt, pr, pb, pl,
                                                  (uint32_t)w->kernel_h, (uint32_t)w->kernel_w,
                                                  (uint32_t)w->stride_h, (uint32_t)w->stride_w,
                                                  lo, hi, x, y, 0);
    }
    case KR_OP_MEAN: {
        if (n->p.mean.keep_dims)
            return (int)xnn_define_global_average_pooling_2d(b->subgraph, -INFINITY, INFINITY,
                                                             x, y, 0);
        /* [N,1,1,C] internal value, then reshaped to the output's [N,C]. */
        size_t dims4[4] = {(size_t)in->dims[0] * (size_t)b->batch, 1, 1, (size_t)in->dims[3]};
        size_t dims2[2] = {(size_t)out->dims[0] * (size_t)b->batch, (size_t)out->dims[1]};
        uint32_t mid;
        TRY(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 4, dims4, NULL,
                                    XNN_INVALID_VALUE_ID, 0, &mid));
        TRY(xnn_define_global_average_pooling_2d(b->subgraph, -INFINITY, INFINITY, x, mid, 0));
        return (int)xnn_define_static_reshape(b->subgraph, 2, dims2, mid, y, 0);
    }
    case KR_OP_PAD: {
        size_t pre[KR_MAX_DIMS], post[KR_MAX_DIMS];
        for (int d = 0; d < in->rank; d++) {
            pre[d] = (size_t)n->p.pad.before[d];
            post[d] = (size_t)n->p.pad.after[d];
        }
        return (int)xnn_define_static_constant_pad(b->subgraph, pre, post, n->p.pad.value, x,
                                                   y, 0);
    }
    case KR_OP_RESIZE_BILINEAR: {
        uint32_t flags = 0;
        if (n->p.resize.align_corners)
            flags = XNN_FLAG_ALIGN_CORNERS;
        else if (!n->p.resize.half_pixel_centers)
            flags = XNN_FLAG_TENSORFLOW_LEGACY_MODE;
        return (int)xnn_define_static_resize_bilinear_2d(
            b->subgraph, (size_t)out->dims[1], (size_t)out->dims[2], x, y, flags);
    }
    case KR_OP_RESHAPE: {
        size_t dims[KR_MAX_DIMS];
        batched_dims(out, b->batch, dims);
        return (int)xnn_define_static_reshape(b->subgraph, (size_t)out->rank, dims, x, y, 0);
    }
    case KR_OP_SUB:
    case KR_OP_DIV:
        TRY(value(b, n->inputs[1], &a2));
        if (n->op == KR_OP_SUB)
            return (int)xnn_define_subtract(b->subgraph, lo, hi, x, a2, y, 0);
        return (int)xnn_define_divide(b->subgraph, lo, hi, x, a2, y, 0);
    case KR_OP_SQRT: return (int)xnn_define_square_root(b->subgraph, x, y, 0);
    case KR_OP_ELU: return (int)xnn_define_elu(b->subgraph, n->p.unary.alpha, x, y, 0);
    case KR_OP_LEAKY_RELU:
        return (int)xnn_define_leaky_relu(b->subgraph, n->p.unary.alpha, x, y, 0);
    case KR_OP_CLIP:
        return (int)xnn_define_clamp(b->subgraph, n->p.unary.alpha, n->p.unary.beta, x, y, 0);
    case KR_OP_POW: return (int)xnn_define_square(b->subgraph, x, y, 0); /* exponent 2 */
    case KR_OP_RESIZE: {
        uint32_t flags = 0;
        if (n->p.resize_onnx.coord == KR_COORD_ALIGN_CORNERS)
            flags = XNN_FLAG_ALIGN_CORNERS;
        else if (n->p.resize_onnx.coord == KR_COORD_ASYMMETRIC)
            flags = XNN_FLAG_TENSORFLOW_LEGACY_MODE;
        return (int)xnn_define_static_resize_bilinear_2d(
            b->subgraph, (size_t)out->dims[1], (size_t)out->dims[2], x, y, flags);
    }
    case KR_OP_SOFTMAX: return (int)xnn_define_softmax(b->subgraph, x, y, 0);
    case KR_OP_MATMUL: {
        const kr_tensor *bt = &g->tensors[n->inputs[1]];
        size_t fdims[2] = {(size_t)bt->dims[bt->rank - 2], (size_t)bt->dims[bt->rank - 1]};
        TRY(xnn_define_tensor_value(b->subgraph, xnn_datatype_fp32, 2, fdims, bt->data,
                                    XNN_INVALID_VALUE_ID, 0, &f));
        return (int)xnn_define_fully_connected(b->subgraph, lo, hi, x, f, XNN_INVALID_VALUE_ID, y,
                                               XNN_FLAG_TRANSPOSE_WEIGHTS);
    }
    case KR_OP_TRANSPOSE_CONV: {
        const kr_tensor *ft = &g->tensors[n->inputs[1]];
        uint32_t groups = (uint32_t)(w->groups > 1 ? w->groups : 1);
        int dh = dil(w->dilation_h), dw = dil(w->dilation_w), pb, pr, ah, aw;
        tconv_axis(in->dims[1], out->dims[1], ft->dims[1], w->stride_h, dh, w->pad_top, &pb, &ah);
        tconv_axis(in->dims[2], out->dims[2], ft->dims[2], w->stride_w, dw, w->pad_left, &pr,
                   &aw);
        TRY(value(b, n->inputs[1], &f));
        TRY(bias_value(b, n, (size_t)ft->dims[0], &bias));
        return (int)xnn_define_deconvolution_2d(
            b->subgraph, (uint32_t)w->pad_top, (uint32_t)pr, (uint32_t)pb, (uint32_t)w->pad_left,
            (uint32_t)ah, (uint32_t)aw, (uint32_t)ft->dims[1], (uint32_t)ft->dims[2],
            (uint32_t)w->stride_h, (uint32_t)w->stride_w, (uint32_t)dh, (uint32_t)dw, groups,
            (size_t)ft->dims[3], (size_t)ft->dims[0] / groups, lo, hi, x, f, bias, y, 0);
    }
    case KR_OP_CONCATENATION:
    default: break;
    }
    return (int)xnn_status_unsupported_parameter;
}
