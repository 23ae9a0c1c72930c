/*
 * REDUCE_MAX over the axes in axes_mask (ONNX ReduceMax): each output element is the maximum of
 * the input elements that differ from it only along reduced axes (a NaN among them gives NaN,
 * as ONNX Runtime's Eigen maxCoeff does not promise; the test inputs have none). Walks the
 * indices with ref_reduce (common.h), as MEAN does; the output holds the kept axes in order.
 */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_reduce_max(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    ref_reduce w;
    ref_reduce_init(c, &w);
    for (size_t o = 0; o < w.n_out; o++) {
        size_t base = ref_reduce_base(&w, o);
        float mx = -INFINITY;
        for (size_t r = 0; r < w.n_reduced; r++) {
            float v = x[base + ref_reduce_offset(&w, r)];
            mx = (v > mx || isnan(v)) ? v : mx;
        }
        y[o] = mx;
    }
}
