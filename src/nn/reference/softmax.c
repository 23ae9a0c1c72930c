/* SOFTMAX along p.axis.axis (ONNX Softmax, opset 13 form): y = exp(x - m) / sum exp(x - m) over
 * the axis, m the maximum along it; exponentials and the sum in double, rounded once. */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_softmax(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    int axis = c->node->p.axis.axis;
    size_t outer = 1, inner = 1, len = (size_t)ref_dim(c, xt, axis);
    for (int d = 0; d < axis; d++)
        outer *= (size_t)ref_dim(c, xt, d);
    for (int d = axis + 1; d < xt->rank; d++)
        inner *= (size_t)ref_dim(c, xt, d);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float m = xp[0];
            for (size_t k = 1; k < len; k++)
                m = xp[k * inner] > m ? xp[k * inner] : m;
            double sum = 0;
            for (size_t k = 0; k < len; k++)
                sum += exp((double)xp[k * inner] - m);
            for (size_t k = 0; k < len; k++)
                yp[k * inner] = (float)(exp((double)xp[k * inner] - m) / sum);
        }
}
