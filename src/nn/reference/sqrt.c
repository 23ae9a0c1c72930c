/* SQRT: y = sqrt(x) (correctly rounded; NaN for x < 0, as ONNX Runtime). */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_sqrt(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(sqrt(v));
    }
}
