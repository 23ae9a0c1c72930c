/*
 * RESIZE_BILINEAR exactly as src/nn/reference/resize_bilinear.c (resize_bilinear.cuh: TFLite's
 * reference kernel, in float). One thread per output pixel and 4 channels (vector loads; every
 * shipped model has a multiple of 4), else per element; a folded following activation
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
        int k = (int)(g % chv) * V;
        I p = g / chv;
        int ox = (int)(p % s.ow);
        I q = p / s.ow;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
        float v[V];
        rs_pixel<T, V, I>(x, s, b, oy, ox, k, v);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = kr_apply(e, v[j]);
        kr_stv<V>(y + g * V, v);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    rs_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2],
                  op->node->p.resize.align_corners, op->node->p.resize.half_pixel_centers};
    size_t total = kr_elems(op, yt);
    cudaStream_t st = (cudaStream_t)op->stream;
    if (s.ch % 4 == 0 && kr_aligned(op->in[0], 4 * sizeof(T)) && kr_aligned(op->out, 4 * sizeof(T)))
        resize_kernel<T, 4, I><<<kr_blocks(total / 4, 256), 256, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 0));
    else
        resize_kernel<T, 1, I><<<kr_blocks(total, 256), 256, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 0));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_resize_bilinear(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
