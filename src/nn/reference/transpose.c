/* TRANSPOSE: y[i_0, ..., i_{r-1}] = x at index j with j[perm[d]] = i_d, i.e. y's dimension d is
 * x's dimension perm[d] (ONNX Transpose). One pass over the output, last axis fastest. */
#include "nn/reference/common.h"

void kr_ref_transpose(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    const int *perm = c->node->p.transpose.perm;
    int rank = xt->rank, out_dims[KR_MAX_DIMS], idx[KR_MAX_DIMS] = {0};
    size_t in_stride[KR_MAX_DIMS], step[KR_MAX_DIMS];
    size_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        in_stride[d] = s;
        s *= (size_t)ref_dim(c, xt, d);
    }
    for (int d = 0; d < rank; d++) {
        out_dims[d] = ref_dim(c, yt, d);
        step[d] = in_stride[perm[d]];
    }
    size_t total = ref_elements(c, yt), off = 0;
    for (size_t o = 0; o < total; o++) {
        y[o] = x[off];
        for (int d = rank - 1; d >= 0; d--) {
            off += step[d];
            if (++idx[d] < out_dims[d])
                break;
            off -= step[d] * (size_t)out_dims[d];
            idx[d] = 0;
        }
    }
}
