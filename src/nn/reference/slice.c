/* SLICE: y[i_0, ..., i_{r-1}] = x[start_0 + i_0 * step_0, ...] (p.slice; negative steps walk
 * backwards; the validator checked every index read). Output extents are the output tensor's.
 * In a batch-scalable graph axis 0 is sliced whole (start 0, step 1). */
#include "nn/reference/common.h"

void kr_ref_slice(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    int rank = xt->rank, out_dims[KR_MAX_DIMS], idx[KR_MAX_DIMS] = {0};
    size_t in_stride[KR_MAX_DIMS];
    size_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        in_stride[d] = s;
        s *= (size_t)ref_dim(c, xt, d);
        out_dims[d] = ref_dim(c, yt, d);
    }
    size_t total = ref_elements(c, yt);
    for (size_t o = 0; o < total; o++) {
        long long off = 0;
        for (int d = 0; d < rank; d++)
            off += ((long long)c->node->p.slice.start[d] +
                    (long long)idx[d] * c->node->p.slice.step[d]) * (long long)in_stride[d];
        y[o] = x[off];
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < out_dims[d])
                break;
            idx[d] = 0;
        }
    }
}
