/* POW: y = pow(x, alpha) with a constant exponent (p.unary.alpha), C's pow in double,
 * rounded once (x < 0 with a non-integer exponent gives NaN, as ONNX Runtime). */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_pow(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    const double alpha = c->node->p.unary.alpha;
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(pow(v, alpha));
    }
}
