/*
 * AVERAGE_POOL_2D (mean of the taps inside the input: divided by their count, not the window
 * size; with count_include_pad by the count of taps inside [-pad_before, n + pad_after) per
 * axis) and MAX_POOL_2D, then the fused clamp (src/nn/reference/pool_2d.c). Dilation and the
 * explicit, ceil-mode windows of ONNX need nothing more: taps outside the input are skipped. One thread per
 * output element, channel fastest (the window: ops/pool_2d.cuh, kr_pool_window); global pooling
 * has its own reduction kernel (its order: ops/pool_2d.cuh).
 */
#include "nn/cuda/ops/pool_2d.cuh"

struct pool_shape {
    int ih, iw, ic, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw, pb, pr, include_pad;
};

/* Taps of a window starting at @p start (dilation @p d, @p k taps) inside [lo, hi). */
__device__ __forceinline__ int taps_within(int start, int k, int d, int lo, int hi)
{
    int n = 0;
    for (int t = 0; t < k; t++) {
        const int v = start + t * d;
        n += v >= lo && v < hi;
    }
    return n;
}

template <typename T, int MAX, typename I>
__global__ void pool_kernel(const T *__restrict__ x, T *__restrict__ y, I total, pool_shape s,
                            kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        int c = (int)(i % s.ic);
        I p = i / s.ic;
        int ox = (int)(p % s.ow);
        I q = p / s.ow;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
        float acc;
        int count;
        kr_pool_window<T, 1, MAX != 0>(x, s, b, oy, ox, c, &acc, &count);
        if (!MAX && s.include_pad)
            count = taps_within(oy * s.sh - s.pt, s.kh, s.dh, -s.pt, s.ih + s.pb) *
                    taps_within(ox * s.sw - s.pl, s.kw, s.dw, -s.pl, s.iw + s.pr);
        kr_st(y + i, kr_apply(e, MAX ? acc : (count ? acc / (float)count : 0.0f)));
    }
}

/* Global pooling (one output pixel whose window covers the whole input, the
 * squeeze-and-excitation "squeeze"): a 32 x 32 block per (batch item, 32 channels); lane x reads
 * channel c0 + x (coalesced), the 32 rows y stride over the pixels, then a shared-memory sum. */
template <typename T, int MAX>
__global__ void global_pool_kernel(const T *__restrict__ x, const T *__restrict__ addend,
                                   T *__restrict__ y, int pixels, int ch, kr_epilogue e)
{
    __shared__ float part[32][33];
    int c = blockIdx.y * 32 + threadIdx.x;
    const T *base = x + (size_t)blockIdx.x * pixels * ch;
    const T *abase = addend ? addend + (size_t)blockIdx.x * pixels * ch : NULL;
    float acc = MAX ? -FLT_MAX : 0.0f;
    if (c < ch)
        for (int p = threadIdx.y; p < pixels; p += 32) {
            float v = kr_ld(base + (size_t)p * ch + c);
            if (abase)
                v += kr_ld(abase + (size_t)p * ch + c);
            acc = MAX ? fmaxf(acc, v) : acc + v;
        }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < ch) {
        float r = part[0][threadIdx.x];
        for (int k = 1; k < 32; k++)
            r = MAX ? fmaxf(r, part[k][threadIdx.x]) : r + part[k][threadIdx.x];
        kr_st(y + (size_t)blockIdx.x * ch + c, kr_apply(e, MAX ? r : r / (float)pixels));
    }
}

/* The global kernel over @p op's input: every item's pixels (ih x iw) per channel. */
template <typename T, int MAX> static int launch_global(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    const int ch = xt->dims[3];
    dim3 grid((unsigned)kr_dim(op, yt, 0), (unsigned)((ch + 31) / 32)), block(32, 32);
    global_pool_kernel<T, MAX><<<grid, block, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const T *)op->addend, (T *)op->out, xt->dims[1] * xt->dims[2], ch,
        kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

template <typename T, int MAX, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    pool_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2],
                    p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_top, p->pad_left,
                    p->dilation_h > 0 ? p->dilation_h : 1, p->dilation_w > 0 ? p->dilation_w : 1,
                    p->pad_bottom, p->pad_right, !MAX && p->count_include_pad};
    if (s.oh == 1 && s.ow == 1 && s.pt <= 0 && s.pl <= 0 && s.kh - s.pt >= s.ih &&
        s.kw - s.pl >= s.iw && s.dh == 1 && s.dw == 1 &&
        !(s.include_pad && (s.pb > 0 || s.pr > 0))) /* every tap inside: count = pixels */
        return launch_global<T, MAX>(op);
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    pool_kernel<T, MAX, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (T *)op->out, (I)total, s, kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

template <int MAX> static int dispatch(const kr_cuda_op *op)
{
    if (kr_small_index(op))
        return op->f16 ? launch<__half, MAX, unsigned>(op) : launch<float, MAX, unsigned>(op);
    return op->f16 ? launch<__half, MAX, size_t>(op) : launch<float, MAX, size_t>(op);
}

extern "C" int kr_cuda_average_pool_2d(const kr_cuda_op *op) { return dispatch<0>(op); }
extern "C" int kr_cuda_max_pool_2d(const kr_cuda_op *op) { return dispatch<1>(op); }

extern "C" int kr_cuda_global_average_pool(const kr_cuda_op *op)
{
    return op->f16 ? launch_global<__half, 0>(op) : launch_global<float, 0>(op);
}
