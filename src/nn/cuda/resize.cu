/*
 * RESIZE (ONNX Resize and Upsample over H and W of NHWC; semantics in nn/graph.h, p.resize_onnx;
 * the reference in src/nn/reference/resize.c). Per output pixel and axis, the source coordinate
 * from the coordinate rule (in float, as ONNX Runtime computes it; the two double-precision steps
 * of the reference's too), then:
 *  - NEAREST: the coordinate rounded by the nearest mode, clamped to [0, n - 1];
 *  - LINEAR: the coordinate clamped to [0, n - 1], the two neighbours floor and floor + 1
 *    (clamped) weighted by the fractions:
 *    (1 - ly) * ((1 - lx) * v00 + lx * v01) + ly * ((1 - lx) * v10 + lx * v11);
 *  - TF_CROP_AND_RESIZE: a coordinate outside [0, n - 1] on either axis gives the extrapolation
 *    value instead.
 * One thread per output element, channel fastest; the node's epilogue after.
 */
#include <math.h>

#include "nn/cuda/common.cuh"

struct rs_axis {
    int in, out;
    float scale;            /* output/input as the rule uses it */
    float roi0, roi1;       /* TF_CROP_AND_RESIZE */
};

struct rs_shape {
    rs_axis h, w;
    int c, mode, coord, nearest;
    float extrapolation;
};

/* The source coordinate of output index @p x on axis @p a. */
__device__ __forceinline__ float rs_coord(int coord, const rs_axis &a, int x)
{
    const float xf = (float)x;
    switch (coord) {
    case KR_COORD_HALF_PIXEL: return (xf + 0.5f) / a.scale - 0.5f;
    case KR_COORD_PYTORCH_HALF_PIXEL: return a.out > 1 ? (xf + 0.5f) / a.scale - 0.5f : 0.0f;
    case KR_COORD_ALIGN_CORNERS:
        return a.out > 1 ? xf * (float)(a.in - 1) / (float)(a.out - 1) : 0.0f;
    case KR_COORD_ASYMMETRIC: return xf / a.scale;
    case KR_COORD_TF_HALF_PIXEL_FOR_NEAREST: return (xf + 0.5f) / a.scale;
    case KR_COORD_TF_CROP_AND_RESIZE:
        return a.out > 1 ? a.roi0 * (float)(a.in - 1) +
                               xf * (a.roi1 - a.roi0) * (float)(a.in - 1) / (float)(a.out - 1)
                         : (float)(0.5 * (a.roi0 + a.roi1) * (a.in - 1));
    default: { /* HALF_PIXEL_SYMMETRIC: the offset in float, the sum in double, as the reference */
        const float adjustment = (float)a.out / (a.scale * (float)a.in);
        const float offset = (float)a.in / 2 * (1 - adjustment);
        return (float)(offset + ((double)xf + 0.5) / a.scale - 0.5);
    }
    }
}

__device__ __forceinline__ int rs_nearest(int mode, float v, int n)
{
    float r;
    const float f = floorf(v);
    switch (mode) {
    case KR_NEAREST_ROUND_PREFER_FLOOR: r = v == f + 0.5f ? f : roundf(v); break;
    case KR_NEAREST_ROUND_PREFER_CEIL: r = v == f + 0.5f ? f + 1.0f : roundf(v); break;
    case KR_NEAREST_FLOOR: r = f; break;
    default: r = ceilf(v); break;
    }
    const int i = r < 0.0f ? 0 : (r > (float)(n - 1) ? n - 1 : (int)r);
    return i;
}

template <typename T, typename I>
__global__ void resize_kernel(const T *__restrict__ x, T *__restrict__ y, I total, rs_shape s,
                              kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        const int c = (int)(i % (I)s.c);
        const I p = i / (I)s.c;
        const int ox = (int)(p % (I)s.w.out);
        const I q = p / (I)s.w.out;
        const int oy = (int)(q % (I)s.h.out);
        const I b = q / (I)s.h.out;
        const float fy = rs_coord(s.coord, s.h, oy), fx = rs_coord(s.coord, s.w, ox);
        const T *img = x + b * (I)s.h.in * (I)s.w.in * (I)s.c + c;
        float v;
        if (s.coord == KR_COORD_TF_CROP_AND_RESIZE &&
            (fy < 0.0f || fy > (float)(s.h.in - 1) || fx < 0.0f || fx > (float)(s.w.in - 1))) {
            v = s.extrapolation;
        } else if (s.mode == KR_RESIZE_NEAREST) {
            const int iy = rs_nearest(s.nearest, fy, s.h.in), ix = rs_nearest(s.nearest, fx, s.w.in);
            v = kr_ld(img + ((I)iy * (I)s.w.in + (I)ix) * (I)s.c);
        } else {
            const float cy = fminf(fmaxf(fy, 0.0f), (float)(s.h.in - 1));
            const float cx = fminf(fmaxf(fx, 0.0f), (float)(s.w.in - 1));
            const int y0 = (int)floorf(cy), x0 = (int)floorf(cx);
            const int y1 = min(y0 + 1, s.h.in - 1), x1 = min(x0 + 1, s.w.in - 1);
            const float ly = cy - (float)y0, lx = cx - (float)x0;
            const float v00 = kr_ld(img + ((I)y0 * (I)s.w.in + (I)x0) * (I)s.c);
            const float v01 = kr_ld(img + ((I)y0 * (I)s.w.in + (I)x1) * (I)s.c);
            const float v10 = kr_ld(img + ((I)y1 * (I)s.w.in + (I)x0) * (I)s.c);
            const float v11 = kr_ld(img + ((I)y1 * (I)s.w.in + (I)x1) * (I)s.c);
            v = (1.0f - ly) * ((1.0f - lx) * v00 + lx * v01) +
                ly * ((1.0f - lx) * v10 + lx * v11);
        }
        v = kr_apply(e, v);
        kr_add_res<T, 1>(e, i, &v);
        kr_st(y + i, v);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    const kr_node *n = op->node;
    if (xt->rank != 4 || yt->rank != 4 || xt->dims[1] <= 0 || xt->dims[2] <= 0)
        return (int)cudaErrorInvalidValue;
    rs_shape s;
    s.h = {xt->dims[1], yt->dims[1], n->p.resize_onnx.scale_h, n->p.resize_onnx.roi[0],
           n->p.resize_onnx.roi[2]};
    s.w = {xt->dims[2], yt->dims[2], n->p.resize_onnx.scale_w, n->p.resize_onnx.roi[1],
           n->p.resize_onnx.roi[3]};
    s.c = xt->dims[3];
    s.mode = (int)n->p.resize_onnx.mode;
    s.coord = (int)n->p.resize_onnx.coord;
    s.nearest = (int)n->p.resize_onnx.nearest;
    s.extrapolation = n->p.resize_onnx.extrapolation;
    size_t total = kr_elems(op, yt);
    resize_kernel<T, I><<<kr_blocks(total, 256), 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (T *)op->out, (I)total, s, kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_resize(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
