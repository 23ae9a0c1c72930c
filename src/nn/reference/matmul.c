/* MATMUL: Y[..., m, n] = sum over k of A[..., m, k] * B[..., k, n] (ONNX MatMul at equal ranks),
 * the leading axes broadcast (an extent of 1 repeats); the sum in double, rounded once. */
#include "nn/reference/common.h"

void kr_ref_matmul(const kr_op_ctx *c)
{
    const kr_tensor *at = ref_in(c, 0), *bt = ref_in(c, 1), *yt = ref_out(c, 0);
    const float *a = c->in[0], *b = c->in[1];
    float *y = c->out[0];
    int r = yt->rank;
    int m = ref_dim(c, at, r - 2), k = ref_dim(c, at, r - 1), n = ref_dim(c, bt, r - 1);
    int lead[KR_MAX_DIMS], idx[KR_MAX_DIMS] = {0};
    size_t sa[KR_MAX_DIMS], sb[KR_MAX_DIMS], batches = 1;
    size_t stride_a = (size_t)m * k, stride_b = (size_t)k * n;
    for (int d = r - 3; d >= 0; d--) { /* leading axes: element strides, 0 when broadcast */
        lead[d] = ref_dim(c, yt, d);
        sa[d] = ref_dim(c, at, d) == 1 ? 0 : stride_a;
        sb[d] = ref_dim(c, bt, d) == 1 ? 0 : stride_b;
        stride_a *= (size_t)ref_dim(c, at, d);
        stride_b *= (size_t)ref_dim(c, bt, d);
        batches *= (size_t)lead[d];
    }
    for (size_t bi = 0; bi < batches; bi++) {
        size_t oa = 0, ob = 0;
        for (int d = 0; d < r - 2; d++) {
            oa += (size_t)idx[d] * sa[d];
            ob += (size_t)idx[d] * sb[d];
        }
        float *yp = y + bi * (size_t)m * n;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int q = 0; q < k; q++)
                    acc += (double)a[oa + (size_t)i * k + q] * b[ob + (size_t)q * n + j];
                yp[(size_t)i * n + j] = (float)acc;
            }
        for (int d = r - 3; d >= 0; d--) {
            if (++idx[d] < lead[d])
                break;
            idx[d] = 0;
        }
    }
}
