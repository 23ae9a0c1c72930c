/* LEAKY_RELU: y = x < 0 ? alpha * x : x (p.unary.alpha), in double, rounded once. */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_leaky_relu(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    const double alpha = c->node->p.unary.alpha;
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(v < 0 ? alpha * v : v);
    }
}
