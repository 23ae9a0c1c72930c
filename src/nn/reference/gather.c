/* GATHER along p.axis.axis with constant INT32 indices (ONNX Gather; the validator checked every
 * index): y[a, j, b] = x[a, indices[j], b], a over the axes before the axis, j over the indices'
 * elements, b over the axes after it. */
#include <stdint.h>
#include <string.h>

#include "nn/reference/common.h"

void kr_ref_gather(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *it = ref_in(c, 1);
    const float *x = c->in[0];
    const int32_t *indices = c->in[1];
    float *y = c->out[0];
    int axis = c->node->p.axis.axis;
    size_t outer = 1, inner = 1, len = (size_t)ref_dim(c, xt, axis);
    size_t count = kr_tensor_elements(it);
    for (int d = 0; d < axis; d++)
        outer *= (size_t)ref_dim(c, xt, d);
    for (int d = axis + 1; d < xt->rank; d++)
        inner *= (size_t)ref_dim(c, xt, d);
    for (size_t o = 0; o < outer; o++)
        for (size_t j = 0; j < count; j++)
            memcpy(y + (o * count + j) * inner, x + (o * len + (size_t)indices[j]) * inner,
                   inner * sizeof(float));
}
