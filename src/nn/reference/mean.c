/*
 * MEAN over the axes in axes_mask (reference/reduce.h): each output element is the sum of the
 * input elements that differ from it only along reduced axes, divided by their count. The sum
 * is accumulated in double (TFLite sums in float; double makes the oracle the more accurate of
 * the two). The output holds the kept axes in order (keep_dims only adds extents of 1, which do
 * not change the layout). Nothing is allocated: indices are decomposed per element (ref_reduce).
 */
#include "nn/reference/common.h"

void kr_ref_mean(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    ref_reduce w;
    ref_reduce_init(c, &w);
    for (size_t o = 0; o < w.n_out; o++) {
        size_t base = ref_reduce_base(&w, o);
        double sum = 0.0;
        for (size_t r = 0; r < w.n_reduced; r++)
            sum += x[base + ref_reduce_offset(&w, r)];
        y[o] = (float)(sum / (double)w.n_reduced);
    }
}
