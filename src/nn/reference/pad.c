/* PAD with zeros: output[i] = input[i - before] inside, 0 elsewhere (per dimension). */
#include <string.h>

#include "nn/reference/common.h"

void kr_ref_pad(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    int rank = xt->rank, in_dims[KR_MAX_DIMS], out_dims[KR_MAX_DIMS];
    size_t out_stride[KR_MAX_DIMS];
    for (int d = 0; d < rank; d++) {
        in_dims[d] = ref_dim(c, xt, d);
        out_dims[d] = ref_dim(c, yt, d);
    }
    size_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        out_stride[d] = s;
        s *= (size_t)out_dims[d];
    }
    memset(y, 0, ref_elements(c, yt) * sizeof(float));
    size_t total = ref_elements(c, xt);
    int idx[KR_MAX_DIMS] = {0};
    for (size_t i = 0; i < total; i++) {
        size_t o = 0;
        for (int d = 0; d < rank; d++)
            o += (size_t)(idx[d] + c->node->p.pad.before[d]) * out_stride[d];
        y[o] = x[i];
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < in_dims[d])
                break;
            idx[d] = 0;
        }
    }
}
