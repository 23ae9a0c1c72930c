/*
 * TRANSPOSE_CONV (ONNX ConvTranspose; semantics in nn/graph.h, src/nn/reference/): x, filter
 * [C_out, kh, kw, C_in / groups], optional bias [C_out]; y[o] += x[i] * w[k] where
 * o = i * stride - pad_before + k * dilation per axis, grouped as CONV_2D; the output size is
 * the output tensor's. Gather form: one thread per output element (output channel fastest)
 * sums, over (ky, kx, ci) in that order, the taps whose input pixel
 * i = (o + pad_before - k * dilation) / stride is whole and inside the input; then the bias and
 * the epilogue (fused clamp, folded post function and residual).
 */
#include "nn/cuda/window_shape.cuh"

template <typename T, typename I>
__global__ void tconv_general(const T *__restrict__ x, const float *__restrict__ w,
                              const float *__restrict__ bias, T *__restrict__ y, I total,
                              kr_win_shape s, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        int oy, ox, o;
        const I b = kr_win_split(i, s, &oy, &ox, &o);
        const int c0 = (o / s.cog) * s.cig;
        float acc = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            const int ty = oy + s.pt - ky * s.dh;
            if (ty < 0 || ty % s.sh)
                continue;
            const int iy = ty / s.sh;
            if (iy >= s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                const int tx = ox + s.pl - kx * s.dw;
                if (tx < 0 || tx % s.sw)
                    continue;
                const int ix = tx / s.sw;
                if (ix < s.iw)
                    acc = kr_win_tap(x, w, s, b, iy, ix, c0, o, ky, kx, acc);
            }
        }
        float v = kr_apply(e, acc + (bias ? bias[o] : 0.0f));
        kr_add_res<T, 1>(e, i, &v);
        kr_st(y + i, v);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    kr_win_shape s;
    if (int bad = kr_win_shape_of(op, &s))
        return bad;
    const float *bias =
        op->node->n_inputs > 2 && op->node->inputs[2] >= 0 ? (const float *)op->in[2] : NULL;
    size_t total = kr_elems(op, kr_out_t(op));
    tconv_general<T, I><<<kr_blocks(total, 128), 128, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], bias, (T *)op->out, (I)total, s,
        kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_transpose_conv(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
