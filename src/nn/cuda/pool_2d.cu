/*
 * AVERAGE_POOL_2D (mean of the taps inside the input: divided by their count, not the window
 * size; with count_include_pad by the count of taps inside [-pad_before, n + pad_after) per
 * axis) and MAX_POOL_2D, then the fused clamp (src/nn/reference/pool_2d.c). Dilation and the
 * explicit, ceil-mode windows of ONNX need nothing more: taps outside the input are skipped. One thread per
 * output element, channel fastest (the window: ops/pool_2d.cuh, kr_pool_window), or in half
 * precision with an even channel count 2 or 8 channels per thread (pool_half, the same values);
 * global pooling has its own reduction kernels (global_pool_h8 for halves over a multiple of 8
 * channels, global_pool_kernel otherwise; their orders: ops/pool_2d.cuh).
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
        int oy, ox, c;
        const I b = kr_nhwc_split(i, s.ic, s.ow, s.oh, &oy, &ox, &c);
        float acc;
        int count;
        kr_pool_window<T, 1, MAX != 0>(x, s, b, oy, ox, c, &acc, &count);
        if (!MAX && s.include_pad)
            count = taps_within(oy * s.sh - s.pt, s.kh, s.dh, -s.pt, s.ih + s.pb) *
                    taps_within(ox * s.sw - s.pl, s.kw, s.dw, -s.pl, s.iw + s.pr);
        kr_st(y + i, kr_apply(e, MAX ? acc : (count ? acc / (float)count : 0.0f)));
    }
}

/* Half precision, an even channel count, no count_include_pad: V (8 or 2) channels of one
 * output pixel per thread with 16- or 4-byte accesses, the block row (blockIdx.y) walking
 * items x output rows (kr_for_row_units: no per-thread division but by the channel groups);
 * each value as pool_kernel computes it (kr_pool_window; the average as sum / count).
 * BlazeFace's 2x2 max pools over 28, 42 and 88 channels ran one 2-byte element per thread. */
template <int MAX, int V, typename I>
__global__ void pool_half(const __half *__restrict__ x, __half *__restrict__ y, int rows,
                          pool_shape s, kr_epilogue e)
{
    const int cv = s.ic / V;
    kr_for_row_units(rows, s.oh, s.ow * cv, [&](int b, int oy, int row, int i) {
        const int ox = i / cv, c = (i - ox * cv) * V;
        float acc[V], o[V];
        int n;
        kr_pool_window<__half, V, MAX != 0>(x, s, (I)b, oy, ox, c, acc, &n);
#pragma unroll
        for (int k = 0; k < V; k++)
            o[k] = kr_apply(e, MAX ? acc[k] : (n ? acc[k] / (float)n : 0.0f));
        kr_stv<V>(y + ((I)row * s.ow + ox) * s.ic + c, o);
    });
}

/* pool_half where it applies; 0 when it does not. */
template <int MAX, typename I>
static int try_pool_half(const kr_cuda_op *op, const pool_shape &s, size_t total)
{
    const int v = s.ic % 8 == 0 ? 8 : s.ic % 2 == 0 ? 2 : 0;
    const size_t al = v == 8 ? 16 : 4;
    if (!op->f16 || !v || s.include_pad || !kr_aligned(op->in[0], al) ||
        !kr_aligned(op->out, al) || total / ((size_t)s.ow * s.ic) > 0x7fffffffu)
        return 0;
    const int rows = (int)(total / ((size_t)s.ow * s.ic));
    unsigned threads;
    const dim3 grid = kr_row_units_grid(rows, s.ow * (s.ic / v), 128, &threads);
    if (v == 8)
        pool_half<MAX, 8, I><<<grid, threads, 0, (cudaStream_t)op->stream>>>(
            (const __half *)op->in[0], (__half *)op->out, rows, s, kr_make_epilogue(op, 1));
    else
        pool_half<MAX, 2, I><<<grid, threads, 0, (cudaStream_t)op->stream>>>(
            (const __half *)op->in[0], (__half *)op->out, rows, s, kr_make_epilogue(op, 1));
    return 1;
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

/* The 8 halves of @p q as floats. */
__device__ __forceinline__ void h8_to_float(uint4 q, float *v)
{
    const __half2 *h = reinterpret_cast<const __half2 *>(&q);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __half22float2(h[k]);
        v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
}

/* Threads of a global_pool_h8 block, at most. */
#define GP_THREADS 512

/* One pixel's 8 channels into global_pool_h8's accumulators: the addend's values @p a (NULL:
 * none) added to @p v first, then the maximum or the sum. */
template <int MAX>
__device__ __forceinline__ void gp_add8(float acc[8], float v[8], const float *a)
{
    if (a)
#pragma unroll
        for (int k = 0; k < 8; k++)
            v[k] += a[k];
#pragma unroll
    for (int k = 0; k < 8; k++)
        acc[k] = MAX ? fmaxf(acc[k], v[k]) : acc[k] + v[k];
}

/* Global pooling in half precision over a multiple of 8 channels (16-byte aligned tensors):
 * one block of T threads per item (T = 512, 256 or 128 from the item's size,
 * global_pool_h8_threads); thread t takes channel group g = t % cg (8 channels, cg = ch / 8)
 * of pixel rows r = t / cg (R = T / cg rows; the threads past R * cg idle) and adds pixels r,
 * r + R, r + 2R, ... in order, four pixels' 16-byte loads (and the addend's) in flight before
 * their sums; then the R rows' sums pairwise in shared memory: with n rows left,
 * h = ceil(n / 2), row j += row j + h for j < n - h, until one row is left. The order depends
 * only on the item's pixels and channels (ops/pool_2d.cuh). Selfie's squeeze pools over 16
 * channels ran global_pool_kernel's 32 x 32 block with half its lanes idle and 2-byte loads:
 * 128 x 128 x 16 plus an addend 127.5 us at batch 256 (44% of DRAM bandwidth), 65.2 us here
 * with 512 threads (86%). */
template <int MAX>
__global__ void __launch_bounds__(GP_THREADS, 2)
    global_pool_h8(const __half *__restrict__ x, const __half *__restrict__ addend,
                   __half *__restrict__ y, int pixels, int ch, kr_epilogue e)
{
    __shared__ float part[GP_THREADS * 8];
    const int cg = ch / 8, rows = (int)blockDim.x / cg;
    const int r = (int)threadIdx.x / cg, c = ((int)threadIdx.x - r * cg) * 8;
    const size_t item = (size_t)blockIdx.x * pixels * ch;
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; k++)
        acc[k] = MAX ? -FLT_MAX : 0.0f;
    if (r < rows) {
        const __half *xp = x + item + c, *ap = addend ? addend + item + c : NULL;
        const size_t step = (size_t)rows * ch;
        int p = r;
        for (; p + 3 * rows < pixels; p += 4 * rows) {
            uint4 q[4], qa[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                q[j] = *reinterpret_cast<const uint4 *>(xp + (size_t)p * ch + j * step);
            if (ap)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    qa[j] = *reinterpret_cast<const uint4 *>(ap + (size_t)p * ch + j * step);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float v[8], a[8];
                h8_to_float(q[j], v);
                if (ap)
                    h8_to_float(qa[j], a);
                gp_add8<MAX>(acc, v, ap ? a : NULL);
            }
        }
        for (; p < pixels; p += rows) {
            float v[8], a[8];
            kr_ldv<8>(xp + (size_t)p * ch, v);
            if (ap)
                kr_ldv<8>(ap + (size_t)p * ch, a);
            gp_add8<MAX>(acc, v, ap ? a : NULL);
        }
#pragma unroll
        for (int k = 0; k < 8; k++)
            part[r * ch + c + k] = acc[k];
    }
    for (int n = rows; n > 1;) {
        const int h = (n + 1) / 2;
        __syncthreads();
        for (int i = (int)threadIdx.x; i < (n - h) * ch; i += (int)blockDim.x)
            part[i] = MAX ? fmaxf(part[i], part[i + h * ch]) : part[i] + part[i + h * ch];
        n = h;
    }
    __syncthreads();
    for (int i = (int)threadIdx.x; i < ch; i += (int)blockDim.x)
        kr_st(y + (size_t)blockIdx.x * ch + i,
              kr_apply(e, MAX ? part[i] : part[i] / (float)pixels));
}

/* global_pool_h8's block size for an item of @p pixels x @p ch: 512 threads where each gets 8
 * or more 16-byte loads, else 256 or 128 (fewer rows to add up: selfie's 16 x 16 x 32 pool took
 * 7.0 us with 512 threads, two pixels per row, against 5.1 us for the old kernel), at least
 * ch / 8; 0 where ch / 8 > 512 (no such block). By the item's shape only, so the order of an
 * item's sum never depends on the batch. */
static int global_pool_h8_threads(int pixels, int ch)
{
    const long vecs = (long)pixels * (ch / 8);
    int t = vecs >= 8L * 512 ? 512 : vecs >= 8L * 256 ? 256 : 128;
    while (t < ch / 8 && t < GP_THREADS)
        t *= 2;
    return ch / 8 <= t ? t : 0;
}

/* The global kernel over @p op's input: every item's pixels (ih x iw) per channel. */
template <typename T, int MAX> static int launch_global(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    const int ch = xt->dims[3];
    const int pixels = xt->dims[1] * xt->dims[2];
    const int threads = ch % 8 == 0 ? global_pool_h8_threads(pixels, ch) : 0;
    if (sizeof(T) == 2 && threads && kr_aligned(op->in[0], 16) &&
        (!op->addend || kr_aligned(op->addend, 16))) {
        global_pool_h8<MAX><<<(unsigned)kr_dim(op, yt, 0), threads, 0,
                              (cudaStream_t)op->stream>>>(
            (const __half *)op->in[0], (const __half *)op->addend, (__half *)op->out,
            pixels, ch, kr_make_epilogue(op, 1));
        return (int)cudaGetLastError();
    }
    dim3 grid((unsigned)kr_dim(op, yt, 0), (unsigned)((ch + 31) / 32)), block(32, 32);
    global_pool_kernel<T, MAX><<<grid, block, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const T *)op->addend, (T *)op->out, pixels, ch,
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
    if (try_pool_half<MAX, I>(op, s, total))
        return (int)cudaGetLastError();
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
