/*
 * The TFLite model reader: operator options (builtin options tables with their schema
 * defaults: SAME padding, dilation 1, activation NONE; the raw 12-byte options struct of the
 * custom operator Convolution2DTransposeBias; RESHAPE's new_shape checked against its tensors).
 */
#include <stdio.h>

#include "nn/tflite.h"
#include "nn/tflite_internal.h"

/* BuiltinOptions union tags (1-based position in the union). */
enum {
    OPT_CONV_2D = 1,
    OPT_DEPTHWISE_CONV_2D = 2,
    OPT_POOL_2D = 5,
    OPT_CONCATENATION = 10,
    OPT_ADD = 11,
    OPT_RESIZE_BILINEAR = 15,
    OPT_RESHAPE = 17,
    OPT_MUL = 21,
    OPT_PAD = 22,
    OPT_REDUCER = 27,
};

static keyer_status read_activation(const tfl_ctx *c, int v, size_t i, const char *op,
                                    kr_activation *out)
{
    switch (v) {
    case 0: *out = KR_ACT_NONE; return KEYER_OK;
    case 1: *out = KR_ACT_RELU; return KEYER_OK;
    case 2: *out = KR_ACT_RELU_N1_TO_1; return KEYER_OK;
    case 3: *out = KR_ACT_RELU6; return KEYER_OK;
    case 4:
    case 5:
        return UNSUPPORTED(&c->r, "operator %zu (%s): fused activation %s is not supported", i, op,
                           v == 4 ? "TANH" : "SIGN_BIT");
    default:
        return BAD(&c->r, "operator %zu (%s): fused activation %d is not a valid "
                   "ActivationFunctionType", i, op, v);
    }
}

static keyer_status read_padding(const tfl_ctx *c, int v, size_t i, const char *op, kr_padding *out)
{
    if (v != 0 && v != 1)
        return BAD(&c->r, "operator %zu (%s): padding %d is neither SAME (0) nor VALID (1)", i, op,
                   v);
    *out = v == 0 ? KR_PADDING_SAME : KR_PADDING_VALID;
    return KEYER_OK;
}

/* The operator's builtin options table if it has one of type @p expected. */
static keyer_status options_table(const tfl_ctx *c, size_t i, int expected, fb_table *t,
                                  int *present)
{
    const fb_reader *r = &c->r;
    const tfl_op *op = &c->ops[i];
    char where[48];
    snprintf(where, sizeof(where), "operator %zu", i);
    uint64_t tag;
    size_t pos;
    *present = 0;
    TRY(kr_fb_scalar(r, &op->t, 3, 1, 0, where, "builtin_options_type", &tag));
    if (tag == 0)
        return KEYER_OK;
    if (tag != (uint64_t)expected)
        return BAD(r, "operator %zu (%s) carries builtin options of type %d, but %s takes type %d",
                   i, tfl_kind_name(op->kind), (int)tag, tfl_kind_name(op->kind), expected);
    TRY(kr_fb_ref(r, &op->t, 4, where, "builtin_options", &pos));
    if (!pos)
        return KEYER_OK;
    TRY(kr_fb_table_at(r, pos, where, t));
    *present = 1;
    return KEYER_OK;
}

/* Option field @p id of @p size bytes (1 or 4), sign-extended, or @p def. */
static keyer_status opt_int(const tfl_ctx *c, const fb_table *t, int present, int id, size_t size,
                            int def, size_t i, const char *field, int *v)
{
    if (!present) {
        *v = def;
        return KEYER_OK;
    }
    char where[48];
    snprintf(where, sizeof(where), "operator %zu options", i);
    uint64_t raw;
    TRY(kr_fb_scalar(&c->r, t, id, size, (uint64_t)(uint32_t)def, where, field, &raw));
    *v = size == 1 ? fb_sext8(raw) : fb_i32((uint32_t)raw);
    return KEYER_OK;
}

static keyer_status read_window_options(const tfl_ctx *c, size_t i, kr_node *node)
{
    const char *op = tfl_kind_name(node->op);
    kr_window_params *w = &node->p.window;
    fb_table t;
    int present, padding, act, dm;
    w->dilation_h = w->dilation_w = 1;
    switch (node->op) {
    case KR_OP_CONV_2D:
        TRY(options_table(c, i, OPT_CONV_2D, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "padding", &padding));
        TRY(opt_int(c, &t, present, 1, 4, 0, i, "stride_w", &w->stride_w));
        TRY(opt_int(c, &t, present, 2, 4, 0, i, "stride_h", &w->stride_h));
        TRY(opt_int(c, &t, present, 3, 1, 0, i, "fused_activation_function", &act));
        TRY(opt_int(c, &t, present, 4, 4, 1, i, "dilation_w_factor", &w->dilation_w));
        TRY(opt_int(c, &t, present, 5, 4, 1, i, "dilation_h_factor", &w->dilation_h));
        break;
    case KR_OP_DEPTHWISE_CONV_2D:
        TRY(options_table(c, i, OPT_DEPTHWISE_CONV_2D, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "padding", &padding));
        TRY(opt_int(c, &t, present, 1, 4, 0, i, "stride_w", &w->stride_w));
        TRY(opt_int(c, &t, present, 2, 4, 0, i, "stride_h", &w->stride_h));
        TRY(opt_int(c, &t, present, 3, 4, 0, i, "depth_multiplier", &dm));
        TRY(opt_int(c, &t, present, 4, 1, 0, i, "fused_activation_function", &act));
        TRY(opt_int(c, &t, present, 5, 4, 1, i, "dilation_w_factor", &w->dilation_w));
        TRY(opt_int(c, &t, present, 6, 4, 1, i, "dilation_h_factor", &w->dilation_h));
        /* Redundant with the shapes (schema comment); validate derives it from them. */
        w->depth_multiplier = dm;
        break;
    default: /* pools */
        TRY(options_table(c, i, OPT_POOL_2D, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "padding", &padding));
        TRY(opt_int(c, &t, present, 1, 4, 0, i, "stride_w", &w->stride_w));
        TRY(opt_int(c, &t, present, 2, 4, 0, i, "stride_h", &w->stride_h));
        TRY(opt_int(c, &t, present, 3, 4, 0, i, "filter_width", &w->kernel_w));
        TRY(opt_int(c, &t, present, 4, 4, 0, i, "filter_height", &w->kernel_h));
        TRY(opt_int(c, &t, present, 5, 1, 0, i, "fused_activation_function", &act));
        break;
    }
    TRY(read_padding(c, padding, i, op, &w->padding));
    return read_activation(c, act, i, op, &node->activation);
}

/* MediaPipe's Convolution2DTransposeBias: custom_options is a raw TfLiteTransposeConvParams
 * prefix (int32 padding with 1 = SAME, 2 = VALID; int32 stride_w; int32 stride_h). */
static keyer_status read_transpose_conv_options(const tfl_ctx *c, size_t i, kr_node *node)
{
    const fb_reader *r = &c->r;
    char where[48];
    snprintf(where, sizeof(where), "operator %zu", i);
    fb_vec v;
    TRY(kr_fb_vector(r, &c->ops[i].t, 5, 1, where, "custom_options", &v));
    if (v.len < 12)
        return BAD(r, "operator %zu (Convolution2DTransposeBias): custom options are %zu bytes; "
                   "it needs 12 (padding, stride_w, stride_h)", i, v.len);
    int32_t padding = fb_i32(fb_u32(r, v.data));
    kr_window_params *w = &node->p.window;
    if (padding != 1 && padding != 2)
        return BAD(r, "operator %zu (Convolution2DTransposeBias): padding %d is neither SAME (1) "
                   "nor VALID (2)", i, (int)padding);
    w->padding = padding == 1 ? KR_PADDING_SAME : KR_PADDING_VALID;
    w->stride_w = fb_i32(fb_u32(r, v.data + 4));
    w->stride_h = fb_i32(fb_u32(r, v.data + 8));
    w->dilation_h = w->dilation_w = 1;
    return KEYER_OK;
}

/* Resolves a RESHAPE new_shape (one -1 allowed) and compares it with the output tensor. */
static keyer_status check_new_shape(const tfl_ctx *c, size_t i, const fb_vec *shape,
                                    const tfl_tensor *in, const tfl_tensor *out)
{
    const fb_reader *r = &c->r;
    if (shape->len != (size_t)out->rank)
        return BAD(r, "operator %zu (RESHAPE): new_shape has %zu entries but output tensor '%s' "
                   "has rank %d", i, shape->len, out->label, out->rank);
    size_t known = 1;
    int infer = -1;
    for (size_t d = 0; d < shape->len; d++) {
        int32_t v = fb_vec_i32(r, shape, d);
        if (v == -1 && infer < 0) {
            infer = (int)d;
        } else if (v <= 0 || (size_t)v > KR_TFLITE_MAX_ELEMENTS / known) {
            return BAD(r, "operator %zu (RESHAPE): new_shape entry %zu is %d", i, d, (int)v);
        } else {
            known *= (size_t)v;
        }
    }
    for (size_t d = 0; d < shape->len; d++) {
        int32_t v = fb_vec_i32(r, shape, d);
        size_t want = (int)d == infer ? (known ? in->elements / known : 0) : (size_t)v;
        if ((int)d == infer && known * want != in->elements)
            return BAD(r, "operator %zu (RESHAPE): new_shape cannot hold the input's %zu elements",
                       i, in->elements);
        if (want != (size_t)out->dims[d])
            return BAD(r, "operator %zu (RESHAPE): new_shape entry %zu gives %zu but output "
                       "tensor '%s' has %d", i, d, want, out->label, out->dims[d]);
    }
    return KEYER_OK;
}

keyer_status kr_tfl_node_options(const tfl_ctx *c, size_t i, kr_node *node)
{
    const fb_reader *r = &c->r;
    const tfl_op *op = &c->ops[i];
    fb_table t;
    int present, v;
    switch (node->op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
        return read_window_options(c, i, node);
    case KR_OP_TRANSPOSE_CONV_BIAS:
        return read_transpose_conv_options(c, i, node);
    case KR_OP_ADD:
    case KR_OP_MUL:
        TRY(options_table(c, i, node->op == KR_OP_ADD ? OPT_ADD : OPT_MUL, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "fused_activation_function", &v));
        return read_activation(c, v, i, tfl_kind_name(node->op), &node->activation);
    case KR_OP_CONCATENATION:
        TRY(options_table(c, i, OPT_CONCATENATION, &t, &present));
        TRY(opt_int(c, &t, present, 0, 4, 0, i, "axis", &node->p.concat.axis));
        TRY(opt_int(c, &t, present, 1, 1, 0, i, "fused_activation_function", &v));
        TRY(read_activation(c, v, i, "CONCATENATION", &node->activation));
        if (node->activation != KR_ACT_NONE)
            return UNSUPPORTED(r, "operator %zu (CONCATENATION) has a fused activation, which "
                               "keyer does not support", i);
        return KEYER_OK;
    case KR_OP_RESIZE_BILINEAR:
        TRY(options_table(c, i, OPT_RESIZE_BILINEAR, &t, &present));
        TRY(opt_int(c, &t, present, 2, 1, 0, i, "align_corners", &v));
        node->p.resize.align_corners = v != 0;
        TRY(opt_int(c, &t, present, 3, 1, 0, i, "half_pixel_centers", &v));
        node->p.resize.half_pixel_centers = v != 0;
        return KEYER_OK;
    case KR_OP_MEAN:
        TRY(options_table(c, i, OPT_REDUCER, &t, &present));
        TRY(opt_int(c, &t, present, 0, 1, 0, i, "keep_dims", &v));
        node->p.mean.keep_dims = v != 0;
        return KEYER_OK;
    case KR_OP_PAD:
        return options_table(c, i, OPT_PAD, &t, &present);
    case KR_OP_RESHAPE:
        TRY(options_table(c, i, OPT_RESHAPE, &t, &present));
        if (present && (op->n_in < 2 || op->in[1] < 0) && op->n_in >= 1 && op->in[0] >= 0) {
            char where[48];
            snprintf(where, sizeof(where), "operator %zu options", i);
            fb_vec shape;
            TRY(kr_fb_vector(r, &t, 0, 4, where, "new_shape", &shape));
            if (shape.data)
                return check_new_shape(c, i, &shape, &c->ft[op->in[0]], &c->ft[op->out[0]]);
        }
        return KEYER_OK;
    default:
        return KEYER_OK; /* RELU, RELU6, HARD_SWISH, LOGISTIC, PRELU: no options */
    }
}
