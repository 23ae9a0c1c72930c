/*
 * AVERAGE_POOL_2D (mean of the taps inside the input: divided by their count, not the window
 * size) and MAX_POOL_2D, then the fused clamp (src/nn/reference/pool_2d.c). One thread per
 * output element, channel fastest.
 */
#include <float.h>

#include "nn/cuda/common.cuh"

struct pool_shape {
    int ih, iw, ch, oh, ow, kh, kw, sh, sw, pt, pl;
};

template <typename T, int MAX>
__global__ void pool_kernel(const T *__restrict__ x, T *__restrict__ y, size_t total, pool_shape s,
                            kr_epilogue e)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % s.ch);
        size_t p = i / s.ch;
        int ox = (int)(p % s.ow);
        size_t q = p / s.ow;
        int oy = (int)(q % s.oh);
        size_t b = q / s.oh;
        float sum = 0.0f, mx = -FLT_MAX;
        int count = 0;
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = oy * s.sh - s.pt + ky;
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                int ix = ox * s.sw - s.pl + kx;
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                float v = kr_ld(x + ((b * s.ih + iy) * s.iw + ix) * s.ch + c);
                sum += v;
                mx = fmaxf(mx, v);
                count++;
            }
        }
        kr_st(y + i, kr_apply(e, MAX ? mx : (count ? sum / (float)count : 0.0f)));
    }
}

template <typename T, int MAX> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    pool_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2],
                    p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_top, p->pad_left};
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    if (blocks > 65536u * 8)
        blocks = 65536u * 8;
    pool_kernel<T, MAX><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_average_pool_2d(const kr_cuda_op *op)
{
    return op->f16 ? launch<__half, 0>(op) : launch<float, 0>(op);
}
extern "C" int kr_cuda_max_pool_2d(const kr_cuda_op *op)
{
    return op->f16 ? launch<__half, 1>(op) : launch<float, 1>(op);
}
