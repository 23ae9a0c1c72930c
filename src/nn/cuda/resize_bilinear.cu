/*
 * RESIZE_BILINEAR exactly as src/nn/reference/resize_bilinear.c (resize_bilinear.cuh: TFLite's
 * reference kernel, in float). In half precision with a multiple of 8 channels, one thread per
 * output pixel and 8 channels, one block row per output row (resize_rows); else one thread per
 * output pixel and 4 channels (vector loads; every shipped model has a multiple of 4), else per
 * element. Every path computes each value alike (rs_pixel). A folded following activation
 * (e.g. the segmentation models' final LOGISTIC) is applied in the epilogue.
 */
#include "nn/cuda/ops/resize_bilinear.cuh"

template <typename T, int V, typename I>
__global__ void resize_kernel(const T *__restrict__ x, T *__restrict__ y, I total, rs_shape s,
                              kr_epilogue e)
{
    I groups = total / V;
    int chv = s.ch / V;
    for (I g = blockIdx.x * (I)blockDim.x + threadIdx.x; g < groups;
         g += (I)gridDim.x * blockDim.x) {
        int oy, ox, k;
        const I b = kr_nhwc_split(g, chv, s.ow, s.oh, &oy, &ox, &k);
        k *= V;
        float v[V];
        rs_pixel<T, V, I>(x, s, b, oy, ox, k, v);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = kr_apply(e, v[j]);
        kr_stv<V>(y + g * V, v);
    }
}

/* The same values as resize_kernel, one output row per block row (blockIdx.y over items x
 * output rows, so the item and row come without per-thread divisions) and V = 4 or 8 channels
 * per thread (8: halves, one 16-byte store; rs_pixel per 4 channels, its arithmetic
 * unchanged). For f16 layers of a multiple of 8 channels: at batch 256 selfie's upsample to
 * 128 x 128 ran at a quarter of its memory floor, bound by resize_kernel's index arithmetic
 * (six divisions and both axes per 4 channels). */
template <typename T, int V, typename I>
__global__ void resize_rows(const T *__restrict__ x, T *__restrict__ y, int rows, rs_shape s,
                            kr_epilogue e)
{
    const int chv = s.ch / V;
    kr_for_row_units(rows, s.oh, s.ow * chv, [&](int b, int oy, int row, int i) {
        const int ox = i / chv, k = (i - ox * chv) * V;
        float v[V];
#pragma unroll
        for (int h = 0; h < V; h += 4)
            rs_pixel<T, 4, I>(x, s, (I)b, oy, ox, k + h, v + h);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = kr_apply(e, v[j]);
        kr_stv<V>(y + ((I)row * s.ow + ox) * s.ch + k, v);
    });
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    rs_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2],
                  op->node->p.resize.align_corners, op->node->p.resize.half_pixel_centers};
    size_t total = kr_elems(op, yt);
    cudaStream_t st = (cudaStream_t)op->stream;
    const int rows = (int)(total / ((size_t)s.ow * s.ch)); /* items x output rows */
    const bool h8 = sizeof(T) == 2 && s.ch % 8 == 0 && kr_aligned(op->in[0], 16) &&
                    kr_aligned(op->out, 16);
    if (h8 && total / s.ch <= 0x7fffffffu) {
        unsigned threads;
        const dim3 grid = kr_row_units_grid(rows, s.ow * (s.ch / 8), 256, &threads);
        resize_rows<T, 8, I><<<grid, threads, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, rows, s, kr_make_epilogue(op, 0));
    } else if (s.ch % 4 == 0 && kr_aligned(op->in[0], 4 * sizeof(T)) && kr_aligned(op->out, 4 * sizeof(T)))
        resize_kernel<T, 4, I><<<kr_blocks(total / 4, 256), 256, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 0));
    else
        resize_kernel<T, 1, I><<<kr_blocks(total, 256), 256, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 0));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_resize_bilinear(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
