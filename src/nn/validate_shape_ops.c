/*
 * Shape rules of the operators that move data (validate_internal.h): PAD (constant, reflect,
 * edge), RESIZE_BILINEAR (TFLite), RESIZE (ONNX), RESHAPE (a view), CONCATENATION, TRANSPOSE,
 * SLICE and GATHER (constant indices).
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "nn/validate_internal.h"

keyer_status kr_val_check_pad(const vctx *v, kr_node *n)
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
    kr_pad_mode mode = n->p.pad.mode;
    float value = n->p.pad.value;
    if (mode != KR_PAD_CONSTANT && mode != KR_PAD_REFLECT && mode != KR_PAD_EDGE)
        return node_fail(v, n, BAD, "pad mode %d is not constant, reflect or edge", (int)mode);
    memset(&n->p.pad, 0, sizeof(n->p.pad));
    n->p.pad.mode = mode;
    n->p.pad.value = mode == KR_PAD_CONSTANT ? value : 0.0f;
    for (int d = 0; d < x->rank; d++) {
        int before = p[2 * d], after = p[2 * d + 1];
        if (before < 0 || after < 0 || before > MAX_EXTENT || after > MAX_EXTENT)
            return node_fail(v, n, BAD, "padding (%d, %d) of dimension %d is out of range",
                             before, after, d);
        if (d == 0 && (before || after))
            TRY(batch_axis(v, n, "pads"));
        if (mode == KR_PAD_REFLECT && (before >= x->dims[d] || after >= x->dims[d]))
            return node_fail(v, n, BAD, "reflect padding (%d, %d) of dimension %d needs both "
                             "below its extent %d", before, after, d, x->dims[d]);
        long long size = (long long)x->dims[d] + before + after;
        if (size > INT_MAX)
            return node_fail(v, n, BAD, "padded dimension %d is too large", d);
        n->p.pad.before[d] = before;
        n->p.pad.after[d] = after;
        dims[d] = (int)size;
    }
    return expect_shape(v, n, x->rank, dims);
}

keyer_status kr_val_check_resize_bilinear(const vctx *v, kr_node *n)
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
    int dims[4] = {x->dims[0], s[0], s[1], x->dims[3]};
    return expect_shape(v, n, 4, dims);
}

keyer_status kr_val_check_reshape(const vctx *v, kr_node *n)
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

keyer_status kr_val_check_concat(const vctx *v, kr_node *n)
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
        TRY(batch_axis(v, n, "concatenates along"));
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

/* ONNX Resize over H and W of NHWC: parameters in p.resize_onnx; input 0 is the data and any
 * further inputs (the model's roi, scales or sizes) must be constants, which are not read. */
keyer_status kr_val_check_resize(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 4));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, 4, "data"));
    for (int i = 1; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && !kr_tensor_is_const(input(v, n, i)))
            return node_fail(v, n, UNSUP, "input %d, tensor '%s', is not a constant; keyer "
                             "needs the roi, scales and sizes at load", i, input(v, n, i)->name);
    const kr_tensor *x = input(v, n, 0), *o = output(v, n);
    kr_resize_mode mode = n->p.resize_onnx.mode;
    kr_resize_coord coord = n->p.resize_onnx.coord;
    kr_nearest_mode nearest = n->p.resize_onnx.nearest;
    float sh = n->p.resize_onnx.scale_h, sw = n->p.resize_onnx.scale_w;
    if ((unsigned)mode > KR_RESIZE_LINEAR)
        return node_fail(v, n, UNSUP, "mode %d is neither nearest nor linear", (int)mode);
    if ((unsigned)coord > KR_COORD_HALF_PIXEL_SYMMETRIC)
        return node_fail(v, n, BAD, "coordinate transformation %d is unknown", (int)coord);
    if ((unsigned)nearest > KR_NEAREST_CEIL)
        return node_fail(v, n, BAD, "nearest mode %d is unknown", (int)nearest);
    if (!(sh > 0.0f) || !(sw > 0.0f) || !isfinite(sh) || !isfinite(sw))
        return node_fail(v, n, BAD, "scales %gx%g (HxW) are not positive and finite",
                         (double)sh, (double)sw);
    if (o->rank != 4 || o->dims[0] != x->dims[0] || o->dims[3] != x->dims[3]) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "output '%s' %s does not keep the batch and channels of the "
                         "input '%s' %s", o->name, shape_str(o, a, sizeof(a)), x->name,
                         shape_str(x, b, sizeof(b)));
    }
    if (coord == KR_COORD_TF_CROP_AND_RESIZE) {
        for (int i = 0; i < 4; i++)
            if (!isfinite(n->p.resize_onnx.roi[i]))
                return node_fail(v, n, BAD, "roi value %d (%g) is not finite", i,
                                 (double)n->p.resize_onnx.roi[i]);
        if (isnan(n->p.resize_onnx.extrapolation))
            return node_fail(v, n, BAD, "extrapolation value is NaN");
        return KEYER_OK;
    }
    /* Without a crop, out = floor(in * scale) (scales given), in * scale = out (sizes given) or
     * round(in * scale) (sizes with a kept aspect ratio): always less than 1 apart. */
    int in[2] = {x->dims[1], x->dims[2]}, out[2] = {o->dims[1], o->dims[2]};
    double s[2] = {sh, sw};
    for (int a = 0; a < 2; a++)
        if (fabs(in[a] * s[a] - out[a]) >= 1.0 + 1e-4 * out[a])
            return node_fail(v, n, BAD, "output size %d along %s does not match input %d times "
                             "scale %g", out[a], a ? "W" : "H", in[a], s[a]);
    return KEYER_OK;
}

keyer_status kr_val_check_transpose(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    const kr_tensor *x = input(v, n, 0);
    const int *perm = n->p.transpose.perm;
    unsigned seen = 0;
    int dims[KR_MAX_DIMS];
    for (int d = 0; d < x->rank; d++) {
        if (perm[d] < 0 || perm[d] >= x->rank || (seen & (1u << perm[d]))) {
            char a[96];
            return node_fail(v, n, BAD, "perm %s is not a permutation of 0..%d",
                             dims_str(x->rank, perm, a, sizeof(a)), x->rank - 1);
        }
        seen |= 1u << perm[d];
        dims[d] = x->dims[perm[d]];
    }
    if (x->rank > 0 && perm[0] != 0)
        TRY(batch_axis(v, n, "moves"));
    return expect_shape(v, n, x->rank, dims);
}

/* y[i] = x[start + i * step] per dimension; the output's extents are the output tensor's. */
keyer_status kr_val_check_slice(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 1, 1));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    const kr_tensor *x = input(v, n, 0), *o = output(v, n);
    if (o->rank != x->rank) {
        char a[96], b[96];
        return node_fail(v, n, BAD, "output '%s' %s does not have the rank of input '%s' %s",
                         o->name, shape_str(o, a, sizeof(a)), x->name, shape_str(x, b, sizeof(b)));
    }
    for (int d = 0; d < x->rank; d++) {
        int start = n->p.slice.start[d], step = n->p.slice.step[d], len = o->dims[d];
        if (step == 0 || step < -MAX_EXTENT || step > MAX_EXTENT)
            return node_fail(v, n, BAD, "step %d of dimension %d is zero or too large", step, d);
        long long last = (long long)start + (long long)(len - 1) * step;
        if (start < 0 || start >= x->dims[d] || last < 0 || last >= x->dims[d])
            return node_fail(v, n, BAD, "dimension %d reads indices %d to %lld (step %d) of %d",
                             d, start, last, step, x->dims[d]);
        if (d == 0 && (start != 0 || step != 1 || len != x->dims[0]))
            TRY(batch_axis(v, n, "slices"));
    }
    return KEYER_OK;
}

keyer_status kr_val_check_gather(const vctx *v, kr_node *n)
{
    TRY(want_inputs(v, n, 2, 2));
    TRY(want_input(v, n, 0, WANT_ACT, KR_DTYPE_F32, -1, "data"));
    TRY(want_input(v, n, 1, WANT_CONST, KR_DTYPE_I32, -1, "indices"));
    const kr_tensor *x = input(v, n, 0), *idx = input(v, n, 1);
    int axis = n->p.axis.axis;
    if (axis < 0 || axis >= x->rank)
        return node_fail(v, n, BAD, "axis %d is outside 0..%d", axis, x->rank - 1);
    if (axis == 0)
        TRY(batch_axis(v, n, "gathers along"));
    int rank = x->rank + idx->rank - 1;
    if (rank < 1 || rank > KR_MAX_DIMS)
        return node_fail(v, n, UNSUP, "the output would have rank %d (data rank %d, indices "
                         "rank %d)", rank, x->rank, idx->rank);
    const int32_t *ix = idx->data;
    size_t count = kr_tensor_elements(idx);
    for (size_t i = 0; i < count; i++)
        if (ix[i] < 0 || ix[i] >= x->dims[axis])
            return node_fail(v, n, BAD, "index %d (element %zu of '%s') is outside 0..%d", ix[i],
                             i, idx->name, x->dims[axis] - 1);
    int dims[KR_MAX_DIMS], r = 0;
    for (int d = 0; d < axis; d++)
        dims[r++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++)
        dims[r++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        dims[r++] = x->dims[d];
    return expect_shape(v, n, rank, dims);
}
