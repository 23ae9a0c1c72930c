/*
 * MEAN and REDUCE_MAX over the axes in axes_mask (src/nn/reference/mean.c): each output element
 * is the mean (the maximum) of the input elements that differ from it only along reduced axes. One warp per output element;
 * lanes stride over the reduced elements (global average pooling reads each channel's H x W
 * values with the channel as the output index), float sum (maximum from -inf) reduced by
 * shuffles.
 */
#include <math.h>

#include "nn/cuda/common.cuh"

struct mean_shape {
    int n_kept, n_red;
    int kept_dims[KR_MAX_DIMS], red_dims[KR_MAX_DIMS]; /* innermost first */
    long long kept_stride[KR_MAX_DIMS], red_stride[KR_MAX_DIMS];
    long long n_out, n_reduced;
};

template <typename T, bool MAX>
__global__ void mean_kernel(const T *__restrict__ x, T *__restrict__ y, mean_shape s, kr_epilogue e)
{
    long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long o = warp; o < s.n_out; o += warps) {
        long long base = 0, rest = o;
        for (int k = 0; k < s.n_kept; k++) {
            base += (rest % s.kept_dims[k]) * s.kept_stride[k];
            rest /= s.kept_dims[k];
        }
        float sum = MAX ? -INFINITY : 0.0f;
        for (long long r = lane; r < s.n_reduced; r += 32) {
            long long off = base, q = r;
            for (int k = 0; k < s.n_red; k++) {
                off += (q % s.red_dims[k]) * s.red_stride[k];
                q /= s.red_dims[k];
            }
            sum = MAX ? fmaxf(sum, kr_ld(x + off)) : sum + kr_ld(x + off);
        }
        for (int d = 16; d > 0; d /= 2) {
            const float other = __shfl_down_sync(0xffffffffu, sum, d);
            sum = MAX ? fmaxf(sum, other) : sum + other;
        }
        if (lane == 0)
            kr_st(y + o, kr_apply(e, MAX ? sum : sum / (float)s.n_reduced));
    }
}

template <typename T, bool MAX> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0);
    unsigned mask = op->node->p.mean.axes_mask;
    mean_shape s = {};
    s.n_out = s.n_reduced = 1;
    long long stride = 1;
    for (int d = xt->rank - 1; d >= 0; d--) {
        int extent = kr_dim(op, xt, d);
        if (mask & (1u << d)) {
            s.red_dims[s.n_red] = extent;
            s.red_stride[s.n_red++] = stride;
            s.n_reduced *= extent;
        } else {
            s.kept_dims[s.n_kept] = extent;
            s.kept_stride[s.n_kept++] = stride;
            s.n_out *= extent;
        }
        stride *= extent;
    }
    unsigned blocks = kr_blocks((size_t)s.n_out * 32, 256);
    if (blocks > 65536u)
        blocks = 65536u;
    mean_kernel<T, MAX><<<blocks, 256, 0, (cudaStream_t)op->stream>>>((const T *)op->in[0], (T *)op->out, s,
                                                                 kr_make_epilogue(op, 0));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_mean(const kr_cuda_op *op)
{
    /* over H and W: the global pool's kernel (faster, and it adds a folded ADD's addend) */
    if (kr_cuda_is_global_pool(op->graph, op->node))
        return kr_cuda_global_average_pool(op);
    return op->f16 ? launch<__half, false>(op) : launch<float, false>(op);
}

extern "C" int kr_cuda_reduce_max(const kr_cuda_op *op)
{
    return op->f16 ? launch<__half, true>(op) : launch<float, true>(op);
}
