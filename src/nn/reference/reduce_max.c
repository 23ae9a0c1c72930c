/*
 * REDUCE_MAX over the axes in axes_mask (ONNX ReduceMax): each output element is the maximum of
 * the input elements that differ from it only along reduced axes (a NaN among them gives NaN,
 * as ONNX Runtime's Eigen maxCoeff does not promise; the test inputs have none). Walks the
 * indices as MEAN does (mean.c); the output holds the kept axes in order.
 */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_reduce_max(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    unsigned mask = c->node->p.mean.axes_mask;
    int kept_dims[KR_MAX_DIMS], red_dims[KR_MAX_DIMS], n_kept = 0, n_red = 0;
    size_t kept_stride[KR_MAX_DIMS], red_stride[KR_MAX_DIMS];
    size_t n_out = 1, n_reduced = 1, stride = 1;
    for (int d = xt->rank - 1; d >= 0; d--) { /* innermost first */
        int extent = ref_dim(c, xt, d);
        if (mask & (1u << d)) {
            red_dims[n_red] = extent;
            red_stride[n_red++] = stride;
            n_reduced *= (size_t)extent;
        } else {
            kept_dims[n_kept] = extent;
            kept_stride[n_kept++] = stride;
            n_out *= (size_t)extent;
        }
        stride *= (size_t)extent;
    }
    for (size_t o = 0; o < n_out; o++) {
        size_t base = 0, rest = o;
        for (int k = 0; k < n_kept; k++) { /* kept axes, innermost first */
            base += (rest % (size_t)kept_dims[k]) * kept_stride[k];
            rest /= (size_t)kept_dims[k];
        }
        float mx = -INFINITY;
        for (size_t r = 0; r < n_reduced; r++) {
            size_t off = base;
            rest = r;
            for (int k = 0; k < n_red; k++) {
                off += (rest % (size_t)red_dims[k]) * red_stride[k];
                rest /= (size_t)red_dims[k];
            }
            float v = x[off];
            mx = (v > mx || isnan(v)) ? v : mx;
        }
        y[o] = mx;
    }
}
