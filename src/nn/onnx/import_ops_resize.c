/*
 * ONNX Resize (opset 10: scales; 11-12: roi, scales, sizes; 13+: the same, optional; 18+: axes,
 * keep_aspect_ratio_policy, antialias) and Upsample (opset 7: scales attribute; 9: input) onto
 * KR_OP_RESIZE, or RESIZE_BILINEAR where the two compute the same thing, which keeps the fused
 * CPU and CUDA resize paths:
 *   TFLite RESIZE_BILINEAR (half_pixel_centers) samples src = (o + 0.5) * in/out - 0.5 with the
 *   taps clamped to [0, in-1]; ONNX linear half_pixel samples (o + 0.5) / scale - 0.5 with the
 *   coordinate clamped to [0, in-1], and pytorch_half_pixel the same while out > 1. They agree
 *   when the scale the model gives is out/in (sizes given, or a scale equal to out/in in float),
 *   and antialias is off. align_corners (out > 1 on both axes) and asymmetric likewise map to
 *   align_corners and to no flag.
 * Only H and W may be resized (scales of N and C must be 1).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

static keyer_status parse_coord(kr_imp_ctx *c, const char *s, kr_resize_coord *out)
{
    static const struct {
        const char *name;
        kr_resize_coord coord;
    } modes[] = {
        {"half_pixel", KR_COORD_HALF_PIXEL},
        {"pytorch_half_pixel", KR_COORD_PYTORCH_HALF_PIXEL},
        {"align_corners", KR_COORD_ALIGN_CORNERS},
        {"asymmetric", KR_COORD_ASYMMETRIC},
        {"tf_half_pixel_for_nearest", KR_COORD_TF_HALF_PIXEL_FOR_NEAREST},
        {"tf_crop_and_resize", KR_COORD_TF_CROP_AND_RESIZE},
        {"half_pixel_symmetric", KR_COORD_HALF_PIXEL_SYMMETRIC},
    };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        if (!strcmp(s, modes[i].name)) {
            *out = modes[i].coord;
            return KEYER_OK;
        }
    return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "coordinate_transformation_mode '%s'", s);
}

static keyer_status parse_nearest(kr_imp_ctx *c, const char *s, kr_nearest_mode *out)
{
    if (!strcmp(s, "round_prefer_floor")) *out = KR_NEAREST_ROUND_PREFER_FLOOR;
    else if (!strcmp(s, "round_prefer_ceil")) *out = KR_NEAREST_ROUND_PREFER_CEIL;
    else if (!strcmp(s, "floor")) *out = KR_NEAREST_FLOOR;
    else if (!strcmp(s, "ceil")) *out = KR_NEAREST_CEIL;
    else return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "nearest_mode '%s'", s);
    return KEYER_OK;
}

/* A constant input that may be absent or empty: count 0 then. */
static keyer_status opt_floats(kr_imp_ctx *c, int i, const char *what, double *out, int *count)
{
    kr_imp_value *v;
    *count = 0;
    KR_IMP_TRY(kr_imp_input(c, i, &v));
    if (v->kind == KR_IMP_ABSENT || (v->kind == KR_IMP_CONST && v->c.count == 0))
        return KEYER_OK;
    if (v->kind != KR_IMP_CONST)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "%s '%s' is computed at run time; keyer "
                           "needs it at load (a shape subgraph it could not fold?)", what,
                           v->name);
    if (v->c.rank != 1 || v->c.count > 2 * KR_IMP_MAX_RANK)
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%s '%s' is not a short list", what,
                           v->name);
    for (size_t j = 0; j < v->c.count; j++)
        out[j] = kr_imp_const_get(&v->c, j);
    *count = (int)v->c.count;
    return KEYER_OK;
}

static keyer_status map_resize(kr_imp_ctx *c, int upsample)
{
    kr_imp_value *x;
    KR_IMP_TRY(kr_imp_input(c, 0, &x));
    if (x->kind != KR_IMP_ACT || x->rank != 4)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "input '%s' is not a computed rank-4 "
                           "tensor (keyer resizes H and W of images)", x->name);
    const char *mode_s, *coord_s = "asymmetric", *nearest_s = "round_prefer_floor";
    KR_IMP_TRY(kr_imp_attr_string(c, "mode", "nearest", &mode_s));
    int legacy = upsample || c->opset < 11; /* Upsample and Resize-10: asymmetric, "simple" */
    if (!legacy) {
        KR_IMP_TRY(kr_imp_attr_string(c, "coordinate_transformation_mode", "half_pixel",
                                      &coord_s));
        KR_IMP_TRY(kr_imp_attr_string(c, "nearest_mode", "round_prefer_floor", &nearest_s));
    }
    kr_node p;
    memset(&p, 0, sizeof(p));
    if (!strcmp(mode_s, "nearest"))
        p.p.resize_onnx.mode = KR_RESIZE_NEAREST;
    else if (!strcmp(mode_s, "linear") || (upsample && !strcmp(mode_s, "bilinear")))
        p.p.resize_onnx.mode = KR_RESIZE_LINEAR;
    else
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "mode '%s' (keyer resizes nearest and "
                           "linear)", mode_s);
    KR_IMP_TRY(parse_coord(c, coord_s, &p.p.resize_onnx.coord));
    KR_IMP_TRY(parse_nearest(c, nearest_s, &p.p.resize_onnx.nearest));
    int64_t antialias = 0, exclude = 0;
    float extrap = 0;
    const char *policy = "stretch";
    const int64_t *axes_attr = NULL;
    size_t n_axes = 0;
    if (!legacy) {
        KR_IMP_TRY(kr_imp_attr_int(c, "antialias", 0, &antialias));
        KR_IMP_TRY(kr_imp_attr_int(c, "exclude_outside", 0, &exclude));
        KR_IMP_TRY(kr_imp_attr_float(c, "extrapolation_value", 0.0f, &extrap));
        KR_IMP_TRY(kr_imp_attr_string(c, "keep_aspect_ratio_policy", "stretch", &policy));
        KR_IMP_TRY(kr_imp_attr_ints(c, "axes", &axes_attr, &n_axes));
    }
    if (antialias || exclude)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "antialias or exclude_outside is set");
    /* Per-axis scales and sizes over the 4 axes (or the axes listed). */
    double scales[4] = {1, 1, 1, 1}, roi[8] = {0, 0, 0, 0, 1, 1, 1, 1}, v[2 * KR_IMP_MAX_RANK];
    int64_t sizes[4] = {0, 0, 0, 0};
    int ax[4] = {0, 1, 2, 3}, nax = 4, have_sizes = 0, n;
    for (size_t k = 0; k < n_axes; k++) {
        if (n_axes > 4)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "%zu axes", n_axes);
        KR_IMP_TRY(kr_imp_norm_axis(c, axes_attr[k], 4, &ax[k]));
        nax = (int)n_axes;
    }
    if (upsample && c->opset < 9) {
        const float *sf;
        size_t ns;
        KR_IMP_TRY(kr_onnx_attr_floats(c->f, c->node, "scales", &sf, &ns, c->err));
        if (ns != 4)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "scales has %zu values, not 4", ns);
        for (int a = 0; a < 4; a++)
            scales[a] = sf[a];
    } else {
        int scales_in = upsample || c->opset < 11 ? 1 : 2;
        KR_IMP_TRY(opt_floats(c, scales_in, "scales", v, &n));
        if (n) {
            if (n != nax)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "scales has %d values for %d axes",
                                   n, nax);
            for (int k = 0; k < n; k++)
                scales[ax[k]] = v[k];
        }
        if (!upsample && c->opset >= 11) {
            int ns;
            KR_IMP_TRY(opt_floats(c, 3, "sizes", v, &ns));
            if (ns) {
                if (n)
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has both scales and sizes");
                if (ns != nax)
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "sizes has %d values for %d "
                                       "axes", ns, nax);
                for (int a = 0; a < 4; a++)
                    sizes[a] = x->dims[a];
                for (int k = 0; k < ns; k++) {
                    /* in range before the cast (NaN or 2^63 would be undefined) */
                    if (!(v[k] >= 1 && v[k] <= (1 << 24)))
                        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "sizes entry %d is %g "
                                           "(1 to 2^24)", k, v[k]);
                    sizes[ax[k]] = (int64_t)v[k];
                }
                have_sizes = 1;
            } else if (!n) {
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has neither scales nor sizes");
            }
            int nr;
            KR_IMP_TRY(opt_floats(c, 1, "roi", v, &nr));
            if (nr && nr != 2 * nax)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "roi has %d values for %d axes",
                                   nr, nax);
            for (int k = 0; k < nr / 2; k++) {
                roi[ax[k]] = v[k];
                roi[4 + ax[k]] = v[nr / 2 + k];
            }
        }
    }
    int64_t out[4];
    if (have_sizes) {
        int keep = strcmp(policy, "stretch") != 0;
        if (keep && strcmp(policy, "not_larger") && strcmp(policy, "not_smaller"))
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "keep_aspect_ratio_policy '%s'",
                               policy);
        double s = policy[4] == 'l' ? INFINITY : 0; /* not_larger: min; not_smaller: max */
        for (int k = 0; keep && k < nax; k++) {
            double r = (double)sizes[ax[k]] / (double)x->dims[ax[k]];
            s = policy[4] == 'l' ? fmin(s, r) : fmax(s, r);
        }
        for (int a = 0; a < 4; a++) {
            int listed = 0;
            for (int k = 0; k < nax; k++)
                listed |= ax[k] == a;
            if (keep && listed) {
                scales[a] = s;
                double o = floor((double)x->dims[a] * s + 0.5);
                if (!(o >= 0 && o <= (double)(1 << 30)))
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "resizes axis %d of %lld to "
                                       "%g", a, (long long)x->dims[a], o);
                out[a] = (int64_t)o;
            } else {
                out[a] = sizes[a];
                scales[a] = (double)sizes[a] / (double)x->dims[a];
            }
        }
    } else {
        for (int a = 0; a < 4; a++) {
            if (!(scales[a] > 0) || scales[a] > 65536)
                return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "scale %g of axis %d", scales[a],
                                   a);
            /* in float, as ONNX Runtime sizes it: floor(0.7f * 10) is 7 */
            out[a] = (int64_t)floorf((float)x->dims[a] * (float)scales[a]);
        }
    }
    if (out[0] != x->dims[0] || out[1] != x->dims[1])
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "resizes the batch or channel axis "
                           "(keyer resizes H and W)");
    if (legacy && p.p.resize_onnx.mode == KR_RESIZE_NEAREST)
        p.p.resize_onnx.nearest = scales[2] >= 1 && scales[3] >= 1 ? KR_NEAREST_FLOOR
                                                                   : KR_NEAREST_CEIL;
    p.p.resize_onnx.scale_h = (float)scales[2];
    p.p.resize_onnx.scale_w = (float)scales[3];
    p.p.resize_onnx.roi[0] = (float)roi[2];
    p.p.resize_onnx.roi[1] = (float)roi[3];
    p.p.resize_onnx.roi[2] = (float)roi[6];
    p.p.resize_onnx.roi[3] = (float)roi[7];
    p.p.resize_onnx.extrapolation = extrap;

    int xt, yt;
    KR_IMP_TRY(kr_imp_nhwc(c, x, &xt));
    KR_IMP_TRY(kr_imp_out_act(c, 0, 4, out, 1, &yt));
    /* RESIZE_BILINEAR where it is the same computation (see the top of the file). */
    kr_resize_coord co = p.p.resize_onnx.coord;
    int exact = (float)scales[2] == (float)out[2] / (float)x->dims[2] &&
                (float)scales[3] == (float)out[3] / (float)x->dims[3];
    int big = out[2] > 1 && out[3] > 1;
    if (p.p.resize_onnx.mode == KR_RESIZE_LINEAR && exact &&
        (co == KR_COORD_HALF_PIXEL || co == KR_COORD_ASYMMETRIC ||
         ((co == KR_COORD_PYTORCH_HALF_PIXEL || co == KR_COORD_ALIGN_CORNERS) && big))) {
        int32_t size[2] = {(int32_t)out[2], (int32_t)out[3]};
        int two = 2;
        char name[256];
        int st = kr_imp_new_const_i32(c, kr_imp_name(c, c->node->output[0], "size", name,
                                                     sizeof(name)),
                                      1, &two, size);
        if (st < 0)
            return c->err->status;
        int ins[2] = {xt, st};
        kr_node *nd = kr_imp_emit(c, KR_OP_RESIZE_BILINEAR, 2, ins, yt);
        if (!nd)
            return c->err->status;
        nd->p.resize.align_corners = co == KR_COORD_ALIGN_CORNERS;
        nd->p.resize.half_pixel_centers = co == KR_COORD_HALF_PIXEL ||
                                          co == KR_COORD_PYTORCH_HALF_PIXEL;
        return KEYER_OK;
    }
    kr_node *nd = kr_imp_emit(c, KR_OP_RESIZE, 1, &xt, yt);
    if (!nd)
        return c->err->status;
    nd->p.resize_onnx = p.p.resize_onnx;
    return KEYER_OK;
}

keyer_status kr_imp_map_resize(kr_imp_ctx *c, const char *op, int *done)
{
    *done = 1;
    if (!strcmp(op, "Resize")) return map_resize(c, 0);
    if (!strcmp(op, "Upsample")) return map_resize(c, 1);
    *done = 0;
    return KEYER_OK;
}
