/* SUB: y = act(a - b) with NumPy broadcasting (as ADD). */
#include "nn/reference/common.h"

void kr_ref_sub(const kr_op_ctx *c)
{
    const float *a = c->in[0], *b = c->in[1];
    float *y = c->out[0];
    float lo, hi;
    kr_activation_range(c->node->activation, &lo, &hi);
    ref_bcast w;
    ref_bcast_init(c, &w);
    for (size_t i = 0; i < w.total; i++) {
        y[i] = ref_clamp(a[w.ia] - b[w.ib], lo, hi);
        ref_bcast_next(&w);
    }
}
