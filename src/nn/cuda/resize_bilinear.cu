/*
 * RESIZE_BILINEAR exactly as src/nn/reference/resize_bilinear.c (resize_bilinear.cuh: TFLite's
 * reference kernel, in float). In half precision with a multiple of 8 channels, one thread per
 * output column and 8 channels walking a few output rows (resize_h8); else one thread per
 * output pixel and 4 channels (vector loads; every shipped model has a multiple of 4), else per
 * element. Every path computes each value alike (rs_axis, rs_blend). A folded following
 * activation (e.g. the segmentation models' final LOGISTIC) is applied in the epilogue.
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

/* resize_kernel's values for halves, 8 channels (16 bytes) per thread: thread i of a block
 * column takes output column ox = i / (ch / 8) and its channel group, computes the column's
 * source columns and weight once, then walks the block's rows (items x output rows, @p rpb of
 * them: one source-row computation and four 16-byte loads per row). The kernel before it (one
 * output row per block row) computed both axes twice per 8 channels with 8-byte loads:
 * selfie's upsample to 128 x 128 (16 channels, batch 256) took 157 us at 19% of DRAM
 * bandwidth, bound by instructions. */
template <typename I>
__global__ void __launch_bounds__(256)
    resize_h8(const __half *__restrict__ x, __half *__restrict__ y, int rows, int rpb,
              rs_shape s, kr_epilogue e)
{
    const int chv = s.ch / 8;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= s.ow * chv)
        return;
    const int ox = i / chv, k = (i - ox * chv) * 8;
    int x0, x1;
    float dx;
    rs_axis(s.iw, s.ow, s.align, s.half, ox, &x0, &x1, &dx);
    const I rstride = (I)s.iw * s.ch, c0 = (I)x0 * s.ch + k, c1 = (I)x1 * s.ch + k;
    const int r1 = min(rows, (int)(blockIdx.y + 1) * rpb);
#pragma unroll 2
    for (int row = blockIdx.y * rpb; row < r1; row++) {
        const int b = row / s.oh, oy = row - b * s.oh;
        int y0, y1;
        float dy;
        rs_axis(s.ih, s.oh, s.align, s.half, oy, &y0, &y1, &dy);
        const __half *p0 = x + ((I)b * s.ih + y0) * rstride;
        const __half *p1 = x + ((I)b * s.ih + y1) * rstride;
        float v00[8], v10[8], v01[8], v11[8], v[8];
        kr_ldv<8>(p0 + c0, v00);
        kr_ldv<8>(p1 + c0, v10);
        kr_ldv<8>(p0 + c1, v01);
        kr_ldv<8>(p1 + c1, v11);
        rs_blend<8>(v00, v10, v01, v11, dy, dx, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = kr_apply(e, v[j]);
        kr_stv<8>(y + ((I)row * s.ow + ox) * s.ch + k, v);
    }
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
        /* rows per block: up to 4 while that leaves 16 blocks per multiprocessor (the values
         * never depend on it), more where the grid's rows would pass 65535 */
        unsigned threads;
        const dim3 g1 = kr_row_units_grid(1, s.ow * (s.ch / 8), 256, &threads);
        const int sms = op->caps && op->caps->sms > 0 ? op->caps->sms : 132;
        long long rpb = (long long)rows * g1.x / (16LL * sms);
        rpb = rpb < 1 ? 1 : rpb > 4 ? 4 : rpb;
        if ((rows + rpb - 1) / rpb > 65535)
            rpb = (rows + 65534) / 65535;
        const dim3 grid(g1.x, (unsigned)((rows + rpb - 1) / rpb));
        resize_h8<I><<<grid, threads, 0, st>>>((const __half *)op->in[0], (__half *)op->out,
                                               rows, (int)rpb, s, kr_make_epilogue(op, 0));
    } else if (s.ch % 4 == 0 && kr_aligned(op->in[0], 4 * sizeof(T)) && kr_aligned(op->out, 4 * sizeof(T)))
        resize_kernel<T, 4, I><<<kr_blocks(total / 4, 256), 256, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 0));
    else
        resize_kernel<T, 1, I><<<kr_blocks(total, 256), 256, 0, st>>>(
            (const T *)op->in[0], (T *)op->out, total, s, kr_make_epilogue(op, 0));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_resize_bilinear(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
