/* CONCATENATION along an axis: per outer index, each input contributes its block of
 * (extent on the axis x inner size) elements, in input order. */
#include <string.h>

#include "nn/reference/common.h"

void kr_ref_concatenation(const kr_op_ctx *c)
{
    const kr_tensor *yt = ref_out(c, 0);
    float *y = c->out[0];
    int axis = c->node->p.concat.axis;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)ref_dim(c, yt, d);
    for (int d = axis + 1; d < yt->rank; d++)
        inner *= (size_t)yt->dims[d];
    size_t out_block = (size_t)yt->dims[axis] * inner;
    size_t offset = 0;
    for (int i = 0; i < c->node->n_inputs; i++) {
        const kr_tensor *t = ref_in(c, i);
        const float *x = c->in[i];
        size_t block = (size_t)t->dims[axis] * inner;
        for (size_t o = 0; o < outer; o++)
            memcpy(y + o * out_block + offset, x + o * block, block * sizeof(float));
        offset += block;
    }
}
