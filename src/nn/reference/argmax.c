/* ARG_MAX along p.argmax.axis: the INT32 index of the largest element (ONNX ArgMax); ties go to
 * the first index, or the last with select_last_index. keep_dims only changes the output's
 * shape, not its layout. */
#include <stdint.h>

#include "nn/reference/common.h"

void kr_ref_argmax(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0);
    const float *x = c->in[0];
    int32_t *y = c->out[0];
    int axis = c->node->p.argmax.axis, last = c->node->p.argmax.select_last_index;
    size_t outer = 1, inner = 1, len = (size_t)ref_dim(c, xt, axis);
    for (int d = 0; d < axis; d++)
        outer *= (size_t)ref_dim(c, xt, d);
    for (int d = axis + 1; d < xt->rank; d++)
        inner *= (size_t)ref_dim(c, xt, d);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            size_t best = 0;
            for (size_t k = 1; k < len; k++) {
                float v = xp[k * inner], b = xp[best * inner];
                if (v > b || (last && v == b))
                    best = k;
            }
            y[o * inner + i] = (int32_t)best;
        }
}
