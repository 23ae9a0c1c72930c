/*
 * AVERAGE_POOL_2D (mean of the taps inside the input: divided by their count, not the window
 * size) and MAX_POOL_2D, then the fused clamp (src/nn/reference/pool_2d.c). One thread per
 * output element, channel fastest; global pooling has its own reduction kernels (below).
 */
#include <float.h>

#include "nn/cuda/common.cuh"

struct pool_shape {
    int ih, iw, ch, oh, ow, kh, kw, sh, sw, pt, pl;
};

template <typename T, int MAX, typename I>
__global__ void pool_kernel(const T *__restrict__ x, T *__restrict__ y, I total, pool_shape s,
                            kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        int c = (int)(i % s.ch);
        I p = i / s.ch;
        int ox = (int)(p % s.ow);
        I q = p / s.ow;
        int oy = (int)(q % s.oh);
        I b = q / s.oh;
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

/* Global pooling (one output pixel whose window covers the whole input, the
 * squeeze-and-excitation "squeeze"), in two kernels so that a small batch still spreads over
 * the GPU: global_pool_part gives each block (item, slice of GP_SLICE pixels) and its threads
 * (channel, row): consecutive threads read consecutive channels of a pixel (coalesced), the
 * rows stride over the slice's pixels, and the slice's sum per channel goes to op->sums
 * [item][slice][channel]. global_pool_finish adds the slices in order, divides, applies the
 * epilogue and the folded squeeze-and-excitation layers (op->fc) and writes the output. The
 * order of every addition depends only on the shape, never on the batch or on timing, so
 * results are the same bit for bit from run to run and item by item at any batch. */
#define GP_SLICE 128

template <typename T>
__global__ void global_pool_part(const T *__restrict__ x, const T *__restrict__ addend,
                                 float *__restrict__ sums, int pixels, int ch, int per_block)
{
    extern __shared__ float part[]; /* blockDim.x */
    const int t = threadIdx.x, rows = blockDim.x / (ch < (int)blockDim.x ? ch : blockDim.x);
    const size_t item = (size_t)blockIdx.x * pixels * ch;
    const int p0 = blockIdx.y * per_block, p1 = p0 + per_block < pixels ? p0 + per_block : pixels;
    for (int c0 = 0; c0 < ch; c0 += blockDim.x) {
        const int cw = ch - c0 < (int)blockDim.x ? ch - c0 : (int)blockDim.x;
        const int c = c0 + t % cw, r = t / cw;
        /* 8 loads in flight per thread: one at a time, every add waited for its load (the
         * 16x16 pools took 37 us at batch 1) */
        float acc = 0.0f;
        if (r < rows && t < cw * rows)
            for (int p = p0 + r; p < p1; p += 8 * rows) {
                float v[8];
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    const int q = p + u * rows;
                    const size_t i = item + (size_t)q * ch + c;
                    v[u] = q < p1 ? kr_ld(x + i) + (addend ? kr_ld(addend + i) : 0.0f) : 0.0f;
                }
#pragma unroll
                for (int u = 0; u < 8; u++)
                    acc += v[u];
            }
        part[t] = acc;
        __syncthreads();
        if (t < cw) {
            float sum = 0.0f;
            for (int k = 0; k < rows; k++)
                sum += part[k * cw + t];
            sums[((size_t)blockIdx.x * gridDim.y + blockIdx.y) * ch + c0 + t] = sum;
        }
        __syncthreads();
    }
}

__device__ __forceinline__ float fc_apply(const kr_cuda_op::kr_cuda_fc &f, float v)
{
    kr_epilogue e = {f.lo, f.hi, f.post, NULL};
    return kr_apply(e, v);
}

/* One block per item: the mean of each channel, then the folded layers, then the output. */
template <typename T>
__global__ void global_pool_finish(const float *__restrict__ sums, T *__restrict__ y, int pixels,
                                   int ch, int slices, kr_epilogue e, int n_fc,
                                   kr_cuda_op::kr_cuda_fc fc0, kr_cuda_op::kr_cuda_fc fc1,
                                   int staged)
{
    /* blockDim.x partial sums, ch, each layer's output, then (staged) the layers' weights */
    extern __shared__ float smem[];
    float *part = smem, *v = smem + blockDim.x;
    const int t = threadIdx.x;
    if (staged) { /* all threads copy the weights to shared memory while the sums are read */
        float *w = v + ch + fc0.out + fc1.out;
        for (int i = t; i < fc0.in * fc0.out; i += blockDim.x)
            w[i] = fc0.w[i];
        for (int i = t; i < fc1.in * fc1.out; i += blockDim.x)
            w[fc0.in * fc0.out + i] = fc1.w[i];
        fc0.w = w;
        fc1.w = w + fc0.in * fc0.out;
    }
    const float *s = sums + (size_t)blockIdx.x * slices * ch;
    /* the slices' sums: threads (channel, row), rows striding over the slices, then the rows
     * added in order */
    for (int c0 = 0; c0 < ch; c0 += blockDim.x) {
        const int cw = ch - c0 < (int)blockDim.x ? ch - c0 : (int)blockDim.x;
        const int rows = blockDim.x / cw, c = c0 + t % cw, r = t / cw;
        float acc = 0.0f;
        if (r < rows)
            for (int k = r; k < slices; k += 4 * rows) {
                float v[4];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    v[u] = k + u * rows < slices ? s[(size_t)(k + u * rows) * ch + c] : 0.0f;
                acc += v[0] + v[1] + v[2] + v[3];
            }
        part[t] = acc;
        __syncthreads();
        if (t < cw) {
            float sum = 0.0f;
            for (int k = 0; k < rows; k++)
                sum += part[k * cw + t];
            v[c0 + t] = kr_apply(e, sum / (float)pixels);
        }
        __syncthreads();
    }
    float *in = v;
    int n = ch;
    const int lane = t % 32, warp = t / 32, warps = blockDim.x / 32;
    for (int l = 0; l < n_fc; l++) {
        /* a warp per output: the lanes read a weight row together (coalesced), then a
         * shuffle reduction in a fixed order */
        const kr_cuda_op::kr_cuda_fc &f = l ? fc1 : fc0;
        float *out = in + n;
        for (int j = warp; j < f.out; j += warps) {
            const float *w = f.w + (size_t)j * f.in;
            float acc = 0.0f;
            for (int c = lane; c < f.in; c += 32)
                acc = fmaf(in[c], w[c], acc);
            for (int o = 16; o > 0; o /= 2)
                acc += __shfl_down_sync(0xffffffffu, acc, o);
            if (lane == 0)
                out[j] = fc_apply(f, acc + (f.bias ? f.bias[j] : 0.0f));
        }
        __syncthreads();
        in = out;
        n = f.out;
    }
    for (int j = t; j < n; j += blockDim.x)
        kr_st(y + (size_t)blockIdx.x * n + j, in[j]);
}

extern "C" int kr_global_pool_slices(int pixels) { return (pixels + GP_SLICE - 1) / GP_SLICE; }

template <typename T> static void launch_global_average(const kr_cuda_op *op, const pool_shape &s)
{
    cudaStream_t stream = (cudaStream_t)op->stream;
    int items = kr_dim(op, kr_out_t(op), 0), pixels = s.ih * s.iw;
    int slices = kr_global_pool_slices(pixels), per_block = GP_SLICE;
    unsigned threads = s.ch >= 256 ? 256 : (unsigned)(256 / s.ch * s.ch);
    global_pool_part<T><<<dim3((unsigned)items, (unsigned)slices), threads,
                          threads * sizeof(float), stream>>>(
        (const T *)op->in[0], (const T *)op->addend, op->sums, pixels, s.ch, per_block);
    unsigned fthreads = 256; /* 8 warps: a warp per layer output */
    size_t smem = (size_t)fthreads + (size_t)s.ch, weights = 0;
    for (int l = 0; l < op->n_fc; l++) {
        smem += (size_t)op->fc[l].out;
        weights += (size_t)op->fc[l].in * (size_t)op->fc[l].out;
    }
    /* weights read from shared memory when they fit (selfie's largest pair: 8,192 floats):
     * from global memory every warp waited on a chain of dependent loads */
    int staged = op->n_fc > 0 && (smem + weights) * sizeof(float) <= 40 * 1024;
    if (staged)
        smem += weights;
    kr_cuda_op::kr_cuda_fc none = {NULL, NULL, 0, 0, 0, 0, 0};
    global_pool_finish<T><<<(unsigned)items, fthreads, smem * sizeof(float), stream>>>(
        op->sums, (T *)op->out, pixels, s.ch, slices, kr_make_epilogue(op, 1), op->n_fc,
        op->n_fc > 0 ? op->fc[0] : none, op->n_fc > 1 ? op->fc[1] : none, staged);
}

/* Max pooling over the whole input (no shipped model; kept simple): a 32 x 32 block per
 * (item, 32 channels), a shared-memory reduction. */
template <typename T>
__global__ void global_max_kernel(const T *__restrict__ x, T *__restrict__ y, int pixels, int ch,
                                  kr_epilogue e)
{
    __shared__ float part[32][33];
    int c = blockIdx.y * 32 + threadIdx.x;
    const T *base = x + (size_t)blockIdx.x * pixels * ch;
    float acc = -FLT_MAX;
    if (c < ch)
        for (int p = threadIdx.y; p < pixels; p += 32)
            acc = fmaxf(acc, kr_ld(base + (size_t)p * ch + c));
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < ch) {
        float r = part[0][threadIdx.x];
        for (int k = 1; k < 32; k++)
            r = fmaxf(r, part[k][threadIdx.x]);
        kr_st(y + (size_t)blockIdx.x * ch + c, kr_apply(e, r));
    }
}

template <typename T, int MAX, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    const kr_window_params *p = &op->node->p.window;
    pool_shape s = {xt->dims[1], xt->dims[2], xt->dims[3], yt->dims[1], yt->dims[2],
                    p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_top, p->pad_left};
    cudaStream_t stream = (cudaStream_t)op->stream;
    if (s.oh == 1 && s.ow == 1 && s.pt <= 0 && s.pl <= 0 && s.kh - s.pt >= s.ih &&
        s.kw - s.pl >= s.iw) { /* every tap inside: count = pixels */
        if (!MAX && op->sums) {
            launch_global_average<T>(op, s);
            return (int)cudaGetLastError();
        }
        if (MAX) {
            dim3 grid((unsigned)kr_dim(op, yt, 0), (unsigned)((s.ch + 31) / 32)), block(32, 32);
            global_max_kernel<T><<<grid, block, 0, stream>>>((const T *)op->in[0], (T *)op->out,
                                                             s.ih * s.iw, s.ch,
                                                             kr_make_epilogue(op, 1));
            return (int)cudaGetLastError();
        }
        /* an average without its sums (not reached: the backend gives every global average
         * pool its sums): the general kernel */
    }
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    pool_kernel<T, MAX, I><<<blocks, 256, 0, stream>>>((const T *)op->in[0], (T *)op->out,
                                                       (I)total, s, kr_make_epilogue(op, 1));
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
