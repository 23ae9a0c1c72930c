/* PAD per dimension d, output index o, input extent n, i = o - before[d]:
 *   CONSTANT  x[i] where 0 <= i < n, else the node's value (0 from TFLite);
 *   REFLECT   i mirrored about the first and last element without repeating them
 *             (-1 -> 1, n -> n - 2; the validator keeps pads below n);
 *   EDGE      i clamped to [0, n - 1].
 * (ONNX Pad's modes.) Each output element is computed from its own index: no scratch. */
#include "nn/reference/common.h"

/* Source index along one axis, or -1 for a constant fill. */
static int source(kr_pad_mode mode, int i, int n)
{
    if (i >= 0 && i < n)
        return i;
    switch (mode) {
    case KR_PAD_REFLECT:
        if (n == 1)
            return 0;
        while (i < 0 || i >= n) /* one reflection suffices when pads < n; loop for clarity */
            i = i < 0 ? -i : 2 * (n - 1) - i;
        return i;
    case KR_PAD_EDGE: return i < 0 ? 0 : n - 1;
    case KR_PAD_CONSTANT: break;
    }
    return -1;
}

void kr_ref_pad(const kr_op_ctx *c)
{
    const kr_tensor *xt = ref_in(c, 0), *yt = ref_out(c, 0);
    const float *x = c->in[0];
    float *y = c->out[0];
    kr_pad_mode mode = c->node->p.pad.mode;
    int rank = xt->rank, in_dims[KR_MAX_DIMS], out_dims[KR_MAX_DIMS], idx[KR_MAX_DIMS] = {0};
    size_t in_stride[KR_MAX_DIMS];
    for (int d = 0; d < rank; d++) {
        in_dims[d] = ref_dim(c, xt, d);
        out_dims[d] = ref_dim(c, yt, d);
    }
    size_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        in_stride[d] = s;
        s *= (size_t)in_dims[d];
    }
    size_t total = ref_elements(c, yt);
    for (size_t o = 0; o < total; o++) {
        size_t off = 0;
        int fill = 0;
        for (int d = 0; d < rank && !fill; d++) {
            int i = source(mode, idx[d] - c->node->p.pad.before[d], in_dims[d]);
            if (i < 0)
                fill = 1;
            else
                off += (size_t)i * in_stride[d];
        }
        y[o] = fill ? c->node->p.pad.value : x[off];
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < out_dims[d])
                break;
            idx[d] = 0;
        }
    }
}
