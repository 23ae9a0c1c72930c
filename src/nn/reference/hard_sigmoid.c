/* HARD_SIGMOID: y = max(0, min(1, alpha * x + beta)) (p.unary.alpha, beta), in double. */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_hard_sigmoid(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    const double alpha = c->node->p.unary.alpha, beta = c->node->p.unary.beta;
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(fmax(0.0, fmin(1.0, alpha * v + beta)));
    }
}
