/*
 * CONV_2D with groups > 1 (ONNX Conv's group attribute; src/nn/reference/conv_2d.c): filter
 * [C_out, kh, kw, C_in / groups]; output channel o of group g = o / (C_out / groups) reads input
 * channels [g * C_in / groups, (g + 1) * C_in / groups). y = bias + the sum over (ky, kx, ci) in
 * that order of x * w, taps outside the input skipped (zero padding); then the epilogue (fused
 * clamp, folded post function and residual). One thread per output element, output channel
 * fastest. kr_cuda_conv_2d hands grouped nodes here.
 */
#include "nn/cuda/window_shape.cuh"

template <typename T, typename I>
__global__ void conv_grouped_kernel(const T *__restrict__ x, const float *__restrict__ w,
                                    const float *__restrict__ bias, T *__restrict__ y, I total,
                                    kr_win_shape s, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        int oy, ox, o;
        const I b = kr_win_split(i, s, &oy, &ox, &o);
        const int c0 = (o / s.cog) * s.cig;
        float acc = bias ? bias[o] : 0.0f;
        kr_window_taps(s, oy, ox, [&](int ky, int kx, int iy, int ix) {
            acc = kr_win_tap(x, w, s, b, iy, ix, c0, o, ky, kx, acc);
        });
        float v = kr_apply(e, acc);
        kr_add_res<T, 1>(e, i, &v);
        kr_st(y + i, v);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    kr_win_shape s;
    if (int bad = kr_win_shape_of(op, &s))
        return bad;
    const float *bias = op->node->n_inputs > 2 ? (const float *)op->in[2] : NULL;
    size_t total = kr_elems(op, kr_out_t(op));
    conv_grouped_kernel<T, I><<<kr_blocks(total, 128), 128, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const float *)op->in[1], bias, (T *)op->out, (I)total, s,
        kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_conv_2d_grouped(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
