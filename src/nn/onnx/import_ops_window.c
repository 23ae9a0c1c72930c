/*
 * ONNX window operators onto keyer's graph: Conv (CONV_2D, grouped, or DEPTHWISE_CONV_2D),
 * ConvTranspose (TRANSPOSE_CONV), BatchNormalization (folded into the preceding convolution,
 * else MUL + ADD), MaxPool / AveragePool (explicit pads, ceil_mode, count_include_pad,
 * dilations), GlobalAveragePool (MEAN over H, W) and GlobalMaxPool (REDUCE_MAX). 2-D only:
 * the data is a rank-4 NCHW tensor, taken in NHWC. Paddings are always EXPLICIT (auto_pad
 * SAME_UPPER / SAME_LOWER / VALID resolved here as ONNX defines them).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

#define MAX_WINDOW (1 << 16)

/* Two ints of an attribute (H, W), @p def when absent. */
static keyer_status attr_hw(kr_imp_ctx *c, const char *name, int def, int *h, int *w)
{
    const int64_t *v;
    size_t n;
    KR_IMP_TRY(kr_imp_attr_ints(c, name, &v, &n));
    if (n == 0) {
        *h = *w = def;
        return KEYER_OK;
    }
    if (n != 2)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "attribute %s has %zu values; keyer maps "
                           "2-D windows (2 values)", name, n);
    if (v[0] < 1 || v[1] < 1 || v[0] > MAX_WINDOW || v[1] > MAX_WINDOW)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "attribute %s is %lldx%lld", name,
                           (long long)v[0], (long long)v[1]);
    *h = (int)v[0];
    *w = (int)v[1];
    return KEYER_OK;
}

/* Strides, dilations and paddings (auto_pad resolved) of the current node for an input of
 * @p in_h x @p in_w and a kh x kw window; the ONNX output size in out_h, out_w. */
static keyer_status window_params(kr_imp_ctx *c, int in_h, int in_w, int kh, int kw,
                                  int ceil_mode, kr_window_params *w, int64_t *out_h,
                                  int64_t *out_w)
{
    memset(w, 0, sizeof(*w));
    w->kernel_h = kh;
    w->kernel_w = kw;
    w->padding = KR_PADDING_EXPLICIT;
    w->ceil_mode = ceil_mode;
    KR_IMP_TRY(attr_hw(c, "strides", 1, &w->stride_h, &w->stride_w));
    KR_IMP_TRY(attr_hw(c, "dilations", 1, &w->dilation_h, &w->dilation_w));
    const char *auto_pad;
    KR_IMP_TRY(kr_imp_attr_string(c, "auto_pad", "NOTSET", &auto_pad));
    int in[2] = {in_h, in_w}, k[2] = {kh, kw}, s[2] = {w->stride_h, w->stride_w};
    int d[2] = {w->dilation_h, w->dilation_w}, before[2] = {0, 0}, after[2] = {0, 0};
    int64_t out[2];
    if (!strcmp(auto_pad, "NOTSET")) {
        const int64_t *p;
        size_t n;
        KR_IMP_TRY(kr_imp_attr_ints(c, "pads", &p, &n));
        if (n != 0 && n != 4)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "pads has %zu values; keyer maps 2-D "
                               "windows (4 values)", n);
        for (int a = 0; n && a < 2; a++) {
            if (p[a] < 0 || p[a + 2] < 0 || p[a] > MAX_WINDOW || p[a + 2] > MAX_WINDOW)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "pads (%lld, %lld) are out of range",
                                   (long long)p[a], (long long)p[a + 2]);
            before[a] = (int)p[a];
            after[a] = (int)p[a + 2];
        }
    } else if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
        for (int a = 0; a < 2; a++) {
            int64_t o = (in[a] + s[a] - 1) / s[a];
            int64_t total = (o - 1) * s[a] + (int64_t)(k[a] - 1) * d[a] + 1 - in[a];
            if (total < 0)
                total = 0;
            int small = (int)(total / 2), big = (int)(total - total / 2);
            before[a] = auto_pad[5] == 'U' ? small : big;
            after[a] = auto_pad[5] == 'U' ? big : small;
        }
    } else if (strcmp(auto_pad, "VALID") != 0) {
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "auto_pad '%s' is not NOTSET, SAME_UPPER, "
                           "SAME_LOWER or VALID", auto_pad);
    }
    for (int a = 0; a < 2; a++) {
        int64_t span = (int64_t)in[a] + before[a] + after[a] - ((int64_t)(k[a] - 1) * d[a] + 1);
        if (span < 0)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "the window does not fit the padded "
                               "input along %s", a ? "W" : "H");
        out[a] = span / s[a] + 1;
        if (ceil_mode) {
            out[a] = (span + s[a] - 1) / s[a] + 1;
            if ((out[a] - 1) * s[a] >= in[a] + before[a])
                out[a]--;
        }
    }
    w->pad_top = before[0];
    w->pad_bottom = after[0];
    w->pad_left = before[1];
    w->pad_right = after[1];
    *out_h = out[0];
    *out_w = out[1];
    return KEYER_OK;
}

/* Conv and ConvTranspose: data, constant weights, optional constant bias. */
static keyer_status map_conv(kr_imp_ctx *c, int transpose)
{
    kr_imp_value *x, *wv, *bv;
    KR_IMP_TRY(kr_imp_input(c, 0, &x));
    KR_IMP_TRY(kr_imp_input(c, 1, &wv));
    KR_IMP_TRY(kr_imp_input(c, 2, &bv));
    if (x->kind != KR_IMP_ACT || x->rank != 4)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input '%s' is not a computed rank-4 "
                           "tensor (keyer maps 2-D convolutions)", x->name);
    if (wv->kind != KR_IMP_CONST || wv->c.rank != 4)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "weights '%s' are not a rank-4 constant",
                           wv->name);
    if (bv->kind == KR_IMP_ACT)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "bias '%s' is computed", bv->name);
    int64_t group64;
    KR_IMP_TRY(kr_imp_attr_int(c, "group", 1, &group64));
    int64_t cin = x->dims[1], kh = wv->c.dims[2], kw = wv->c.dims[3];
    if (group64 < 1 || cin % group64)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "group %lld does not divide the %lld input "
                           "channels", (long long)group64, (long long)cin);
    int g = (int)group64;
    int64_t cout = transpose ? wv->c.dims[1] * g : wv->c.dims[0];
    int64_t w_in = transpose ? wv->c.dims[0] : wv->c.dims[1] * g;
    if (w_in != cin || cout < 1 || (!transpose && cout % g))
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "weights '%s' [%lld,%lld,%lld,%lld] do not "
                           "fit %lld input channels in %d groups", wv->name,
                           (long long)wv->c.dims[0], (long long)wv->c.dims[1], (long long)kh,
                           (long long)kw, (long long)cin, g);
    int ah, aw;
    KR_IMP_TRY(attr_hw(c, "kernel_shape", 0, &ah, &aw));
    if (ah && (ah != kh || aw != kw))
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "kernel_shape %dx%d differs from the "
                           "weights' %lldx%lld", ah, aw, (long long)kh, (long long)kw);
    if (bv->kind == KR_IMP_CONST && (bv->c.rank != 1 || bv->c.dims[0] != cout))
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "bias '%s' has %zu values for %lld output "
                           "channels", bv->name, bv->c.count, (long long)cout);
    kr_window_params w;
    int64_t oh, ow;
    if (!transpose) {
        KR_IMP_TRY(window_params(c, (int)x->dims[2], (int)x->dims[3], (int)kh, (int)kw, 0, &w,
                                 &oh, &ow));
    } else {
        /* ConvTranspose: pads, or output_shape with auto_pad deciding where the odd pad goes. */
        KR_IMP_TRY(window_params(c, 1, 1, 1, 1, 0, &w, &oh, &ow)); /* strides, dilations */
        const int64_t *p, *opad, *oshape;
        size_t np, nop, nos;
        const char *auto_pad;
        KR_IMP_TRY(kr_imp_attr_ints(c, "pads", &p, &np));
        KR_IMP_TRY(kr_imp_attr_ints(c, "output_padding", &opad, &nop));
        KR_IMP_TRY(kr_imp_attr_ints(c, "output_shape", &oshape, &nos));
        KR_IMP_TRY(kr_imp_attr_string(c, "auto_pad", "NOTSET", &auto_pad));
        if ((np && np != 4) || (nop && nop != 2) || (nos && nos != 2 && nos != 4))
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "pads, output_padding or "
                               "output_shape is not 2-D");
        int s[2] = {w.stride_h, w.stride_w}, d[2] = {w.dilation_h, w.dilation_w};
        int64_t k[2] = {kh, kw}, out[2], b[2], e[2];
        for (int a = 0; a < 2; a++) {
            int64_t in = x->dims[2 + a], op = nop ? opad[a] : 0;
            int64_t full = (int64_t)s[a] * (in - 1) + op + (k[a] - 1) * d[a] + 1;
            if (op < 0 || op > MAX_WINDOW)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "output_padding %lld",
                                   (long long)op);
            if (nos) {
                out[a] = oshape[nos - 2 + a];
                int64_t total = full - out[a];
                if (total < 0)
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "output_shape %lld is larger "
                                       "than the full output %lld", (long long)out[a],
                                       (long long)full);
                b[a] = !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
                e[a] = total - b[a];
            } else if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
                out[a] = in * s[a];
                int64_t total = full - out[a];
                if (total < 0)
                    total = 0;
                b[a] = auto_pad[5] == 'U' ? total / 2 : total - total / 2;
                e[a] = total - b[a];
            } else {
                b[a] = np && strcmp(auto_pad, "VALID") ? p[a] : 0;
                e[a] = np && strcmp(auto_pad, "VALID") ? p[a + 2] : 0;
                out[a] = full - b[a] - e[a];
            }
            if (b[a] < 0 || e[a] < 0 || b[a] > MAX_WINDOW || e[a] > MAX_WINDOW || out[a] < 1)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "pads (%lld, %lld) give output size "
                                   "%lld", (long long)b[a], (long long)e[a], (long long)out[a]);
        }
        w.kernel_h = (int)kh;
        w.kernel_w = (int)kw;
        w.pad_top = (int)b[0];
        w.pad_bottom = (int)e[0];
        w.pad_left = (int)b[1];
        w.pad_right = (int)e[1];
        oh = out[0];
        ow = out[1];
    }
    /* Weights, re-laid once. */
    int depthwise = !transpose && g > 1 && g == cin && wv->c.dims[1] == 1;
    int64_t cig = cin / g, cog = cout / g;
    size_t count = (size_t)cout * (size_t)(kh * kw) * (size_t)cig;
    float *wd = malloc(count * sizeof(float));
    if (!wd)
        return kr_imp_oom(c);
    const float *src = wv->c.is_float ? wv->c.f : NULL;
    if (!src) {
        free(wd);
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "weights '%s' are not float", wv->name);
    }
    for (int64_t o = 0; o < cout; o++)
        for (int64_t y = 0; y < kh; y++)
            for (int64_t xx = 0; xx < kw; xx++)
                for (int64_t i = 0; i < cig; i++) {
                    float v;
                    if (!transpose) /* OIHW [o][i][y][x] */
                        v = src[((o * cig + i) * kh + y) * kw + xx];
                    else { /* [I, O/g, kh, kw]: input channel (o/cog)*cig + i, local o % cog */
                        int64_t ci = (o / cog) * cig + i, ol = o % cog;
                        v = src[((ci * cog + ol) * kh + y) * kw + xx];
                    }
                    if (depthwise) /* [1, kh, kw, C*M] */
                        wd[(y * kw + xx) * cout + o] = v;
                    else /* [O, kh, kw, I/g] */
                        wd[((o * kh + y) * kw + xx) * cig + i] = v;
                }
    int wdims[4] = {(int)cout, (int)kh, (int)kw, (int)cig};
    if (depthwise) {
        wdims[0] = 1;
        wdims[3] = (int)cout;
    }
    int wt = kr_imp_new_const_f32(c, wv->name, 4, wdims, wd);
    if (wt < 0)
        return c->err->status;
    float *bd = calloc((size_t)cout, sizeof(float));
    if (!bd)
        return kr_imp_oom(c);
    for (int64_t o = 0; bv->kind == KR_IMP_CONST && o < cout; o++)
        bd[o] = (float)kr_imp_const_get(&bv->c, (size_t)o);
    char name[256];
    int bdim = (int)cout;
    int bt = kr_imp_new_const_f32(c, bv->kind == KR_IMP_CONST
                                         ? bv->name
                                         : kr_imp_name(c, c->node->output[0], "bias", name,
                                                       sizeof(name)),
                                  1, &bdim, bd);
    if (bt < 0)
        return c->err->status;
    int xt, yt;
    KR_IMP_TRY(kr_imp_nhwc(c, x, &xt));
    int64_t odims[4] = {x->dims[0], cout, oh, ow};
    KR_IMP_TRY(kr_imp_out_act(c, 0, 4, odims, 1, &yt));
    int ins[3] = {xt, wt, bt};
    kr_node *n = kr_imp_emit(c, transpose ? KR_OP_TRANSPOSE_CONV
                                : depthwise ? KR_OP_DEPTHWISE_CONV_2D
                                            : KR_OP_CONV_2D,
                             3, ins, yt);
    if (!n)
        return c->err->status;
    n->p.window = w;
    n->p.window.groups = depthwise ? 0 : g;
    n->p.window.depth_multiplier = depthwise ? (int)(cout / cin) : 0;
    return KEYER_OK;
}

static keyer_status map_batchnorm(kr_imp_ctx *c)
{
    kr_imp_value *x, *v[4];
    KR_IMP_TRY(kr_imp_input(c, 0, &x));
    static const char *const what[4] = {"scale", "B", "mean", "var"};
    for (int i = 0; i < 4; i++) {
        KR_IMP_TRY(kr_imp_input(c, 1 + i, &v[i]));
        if (v[i]->kind != KR_IMP_CONST)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%s '%s' is not a constant", what[i],
                               v[i]->name);
    }
    if (x->kind != KR_IMP_ACT || x->rank < 2)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input '%s' is not a computed tensor of "
                           "rank 2 or more", x->name);
    int64_t C = x->dims[1];
    for (int i = 0; i < 4; i++)
        if (v[i]->c.count != (size_t)C)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%s '%s' has %zu values for %lld "
                               "channels", what[i], v[i]->name, v[i]->c.count, (long long)C);
    for (int i = 1; i < kr_imp_n_outputs(c); i++)
        if (kr_imp_output_uses(c, i))
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "output %d (training statistics) is "
                               "used; keyer runs inference", i);
    float eps;
    KR_IMP_TRY(kr_imp_attr_float(c, "epsilon", 1e-5f, &eps));
    float *scale = malloc((size_t)C * sizeof(float)), *shift = malloc((size_t)C * sizeof(float));
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return kr_imp_oom(c);
    }
    for (int64_t ch = 0; ch < C; ch++) {
        double s = kr_imp_const_get(&v[0]->c, (size_t)ch) /
                   sqrt(kr_imp_const_get(&v[3]->c, (size_t)ch) + (double)eps);
        scale[ch] = (float)s;
        shift[ch] = (float)(kr_imp_const_get(&v[1]->c, (size_t)ch) -
                            kr_imp_const_get(&v[2]->c, (size_t)ch) * s);
    }
    /* Fold into the convolution that wrote x when nothing else reads x. */
    kr_node *conv = NULL;
    for (int i = c->n_nodes - 1; i >= 0; i--)
        if (c->nodes[i].outputs[0] == x->tensor) {
            conv = &c->nodes[i];
            break;
        }
    keyer_status st = KEYER_OK;
    if (conv && x->nhwc && kr_imp_uses(c, x->name) == 1 &&
        (conv->op == KR_OP_CONV_2D || conv->op == KR_OP_DEPTHWISE_CONV_2D ||
         conv->op == KR_OP_TRANSPOSE_CONV) &&
        c->tdata[conv->inputs[1]] && c->tdata[conv->inputs[2]]) {
        kr_tensor *wt = &c->tensors[conv->inputs[1]];
        float *w = c->tdata[conv->inputs[1]], *b = c->tdata[conv->inputs[2]];
        size_t per = kr_tensor_elements(wt) / (size_t)C;
        for (size_t j = 0; j < kr_tensor_elements(wt); j++) {
            size_t ch = conv->op == KR_OP_DEPTHWISE_CONV_2D ? j % (size_t)C : j / per;
            w[j] *= scale[ch];
        }
        for (int64_t ch = 0; ch < C; ch++)
            b[ch] = b[ch] * scale[ch] + shift[ch];
        st = kr_imp_set_act(c, 0, x->tensor, x->rank, x->dims, x->nhwc);
    } else {
        int st_t, sh_t, mid, yt;
        char name[256];
        if ((st = kr_imp_channel_const(c, kr_imp_name(c, c->node->output[0], "scale", name,
                                                      sizeof(name)),
                                       scale, (int)C, x->rank, x->nhwc, &st_t)) == KEYER_OK &&
            (st = kr_imp_channel_const(c, kr_imp_name(c, c->node->output[0], "shift", name,
                                                      sizeof(name)),
                                       shift, (int)C, x->rank, x->nhwc, &sh_t)) == KEYER_OK) {
            int kd[KR_MAX_DIMS];
            st = kr_imp_dims(c, x->rank, x->dims, x->nhwc, kd);
            mid = st == KEYER_OK ? kr_imp_new_act(c, kr_imp_name(c, c->node->output[0], "mul",
                                                                 name, sizeof(name)),
                                                  x->rank, kd)
                                 : -1;
            int in1[2] = {x->tensor, st_t};
            if (mid < 0 || !kr_imp_emit(c, KR_OP_MUL, 2, in1, mid))
                st = c->err->status;
            else if ((st = kr_imp_out_act(c, 0, x->rank, x->dims, x->nhwc, &yt)) == KEYER_OK) {
                int in2[2] = {mid, sh_t};
                if (!kr_imp_emit(c, KR_OP_ADD, 2, in2, yt))
                    st = c->err->status;
            }
        }
    }
    free(scale);
    free(shift);
    return st;
}

static keyer_status map_pool(kr_imp_ctx *c, int max)
{
    kr_imp_value *x;
    KR_IMP_TRY(kr_imp_input(c, 0, &x));
    if (x->kind != KR_IMP_ACT || x->rank != 4)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input '%s' is not a computed rank-4 "
                           "tensor (keyer maps 2-D pools)", x->name);
    if (max && kr_imp_output_uses(c, 1))
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "the Indices output is used");
    int kh, kw;
    int64_t ceil_mode = 0, cip = 0, oh, ow;
    KR_IMP_TRY(attr_hw(c, "kernel_shape", 0, &kh, &kw));
    if (!kh)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no kernel_shape");
    if (c->opset >= 10)
        KR_IMP_TRY(kr_imp_attr_int(c, "ceil_mode", 0, &ceil_mode));
    if (!max)
        KR_IMP_TRY(kr_imp_attr_int(c, "count_include_pad", 0, &cip));
    kr_window_params w;
    KR_IMP_TRY(window_params(c, (int)x->dims[2], (int)x->dims[3], kh, kw, ceil_mode != 0, &w,
                             &oh, &ow));
    w.count_include_pad = cip != 0;
    int xt, yt;
    KR_IMP_TRY(kr_imp_nhwc(c, x, &xt));
    int64_t odims[4] = {x->dims[0], x->dims[1], oh, ow};
    KR_IMP_TRY(kr_imp_out_act(c, 0, 4, odims, 1, &yt));
    kr_node *n = kr_imp_emit(c, max ? KR_OP_MAX_POOL_2D : KR_OP_AVERAGE_POOL_2D, 1, &xt, yt);
    if (!n)
        return c->err->status;
    n->p.window = w;
    return KEYER_OK;
}

/* GlobalAveragePool / GlobalMaxPool: MEAN / REDUCE_MAX over every axis after the channels. */
static keyer_status map_global_pool(kr_imp_ctx *c, int max)
{
    kr_imp_value *x;
    KR_IMP_TRY(kr_imp_input(c, 0, &x));
    if (x->kind != KR_IMP_ACT || x->rank < 3)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input '%s' is not a computed tensor of "
                           "rank 3 or more", x->name);
    int32_t axes[KR_MAX_DIMS];
    int n_axes = 0;
    int64_t odims[KR_IMP_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        odims[d] = d < 2 ? x->dims[d] : 1;
        if (d >= 2)
            axes[n_axes++] = kr_imp_axis(x->rank, x->nhwc, d);
    }
    char name[256];
    int at = kr_imp_new_const_i32(c, kr_imp_name(c, c->node->output[0], "axes", name,
                                                 sizeof(name)),
                                  1, &n_axes, axes);
    if (at < 0)
        return c->err->status;
    int yt;
    KR_IMP_TRY(kr_imp_out_act(c, 0, x->rank, odims, x->nhwc, &yt));
    int ins[2] = {x->tensor, at};
    kr_node *n = kr_imp_emit(c, max ? KR_OP_REDUCE_MAX : KR_OP_MEAN, 2, ins, yt);
    if (!n)
        return c->err->status;
    n->p.mean.keep_dims = 1;
    return KEYER_OK;
}

keyer_status kr_imp_map_window(kr_imp_ctx *c, const char *op, int *done)
{
    *done = 1;
    if (!strcmp(op, "Conv")) return map_conv(c, 0);
    if (!strcmp(op, "ConvTranspose")) return map_conv(c, 1);
    if (!strcmp(op, "BatchNormalization")) return map_batchnorm(c);
    if (!strcmp(op, "MaxPool")) return map_pool(c, 1);
    if (!strcmp(op, "AveragePool")) return map_pool(c, 0);
    if (!strcmp(op, "GlobalAveragePool")) return map_global_pool(c, 0);
    if (!strcmp(op, "GlobalMaxPool")) return map_global_pool(c, 1);
    *done = 0;
    return KEYER_OK;
}
