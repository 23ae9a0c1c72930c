/* PRELU: y = x >= 0 ? x : alpha * x, alpha broadcast NumPy-style against x (reference/prelu.h). */
#include "nn/reference/common.h"

void kr_ref_prelu(const kr_op_ctx *c)
{
    const float *x = c->in[0], *alpha = c->in[1];
    float *y = c->out[0];
    ref_bcast w;
    ref_bcast_init(c, &w);
    for (size_t i = 0; i < w.total; i++) {
        float v = x[w.ia];
        y[i] = v >= 0.0f ? v : v * alpha[w.ib];
        ref_bcast_next(&w);
    }
}
