/*
 * RESIZE_BILINEAR exactly as src/nn/reference/resize_bilinear.c (TFLite's reference kernel, in
 * float): per axis scale = in/out, or (in-1)/(out-1) with align_corners; source coordinate with
 * or without half-pixel centres; i0 = max(floor, 0), i1 = min(ceil, in-1); the four taps
 * weighted in the same order. One thread per output pixel and 4 channels (vector loads; every
 * shipped model has a multiple of 4), else per element; a folded following activation
 * (e.g. the segmentation models' final LOGISTIC) is applied in the epilogue.
 */
#include "nn/cuda/common.cuh"

struct rs_shape {
    int ih, iw, ch, oh, ow, align, half;
};

__device__ __forceinline__ void rs_axis(int in, int out, int align, int half, int o, int *i0,
                                        int *i1, float *f)
{
    float scale = (float)in / (float)out;
    if (align && out > 1)
        scale = (float)(in - 1) / (float)(out - 1);
    float src = half ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
    int lo = (int)floorf(src);
    *i0 = lo < 0 ? 0 : lo;
    int hi = (int)ceilf(src);
    *i1 = hi < in - 1 ? hi : in - 1;
    *f = src - (float)*i0;
}

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
        int y0, y1, x0, x1;
        float dy, dx;
        rs_axis(s.ih, s.oh, s.align, s.half, oy, &y0, &y1, &dy);
        rs_axis(s.iw, s.ow, s.align, s.half, ox, &x0, &x1, &dx);
        const T *r0 = x + (b * s.ih + y0) * (I)s.iw * s.ch;
        const T *r1 = x + (b * s.ih + y1) * (I)s.iw * s.ch;
        float v00[V], v10[V], v01[V], v11[V], v[V];
        kr_ldv<V>(r0 + (I)x0 * s.ch + k, v00);
        kr_ldv<V>(r1 + (I)x0 * s.ch + k, v10);
        kr_ldv<V>(r0 + (I)x1 * s.ch + k, v01);
        kr_ldv<V>(r1 + (I)x1 * s.ch + k, v11);
#pragma unroll
        for (int j = 0; j < V; j++)
            v[j] = kr_apply(e, v00[j] * (1 - dy) * (1 - dx) + v10[j] * dy * (1 - dx) +
                                   v01[j] * (1 - dy) * dx + v11[j] * dy * dx);
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
