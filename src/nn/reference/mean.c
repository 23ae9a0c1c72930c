/* MEAN over the axes in axes_mask: sum of the reduced elements divided by their count. */
#include "nn/reference/common.h"

void kr_ref_mean(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    unsigned mask = c->node->p.mean.axes_mask;
    int rank = xt->rank, dims[KR_MAX_DIMS];
    size_t out_stride[KR_MAX_DIMS], reduced = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = ref_dim(c, xt, d);
        if (mask & (1u << d))
            reduced *= (size_t)dims[d];
    }
    /* Output strides over the kept axes (reduced axes contribute 0). */
    size_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        out_stride[d] = (mask & (1u << d)) ? 0 : s;
        if (!(mask & (1u << d)))
            s *= (size_t)dims[d];
    }
    size_t n_out = ref_elements(c, yt);
    /* Accumulate in the output buffer (float, as TFLite's reference kernel does); nothing is
     * allocated at run time. */
    for (size_t i = 0; i < n_out; i++)
        y[i] = 0;
    size_t total = ref_elements(c, xt);
    int idx[KR_MAX_DIMS] = {0};
    size_t o = 0;
    for (size_t i = 0; i < total; i++) {
        y[o] += x[i];
        for (int d = rank - 1; d >= 0; d--) {
            o += out_stride[d];
            if (++idx[d] < dims[d])
                break;
            o -= out_stride[d] * (size_t)dims[d];
            idx[d] = 0;
        }
    }
    for (size_t i = 0; i < n_out; i++)
        y[i] = (float)((double)y[i] / (double)reduced);
}
