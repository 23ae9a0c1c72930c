/*
 * SOFTMAX over axis p.axis.axis (src/nn/reference/softmax.c): y = exp(x - max) / sum of
 * exp(x - max) along the axis, in float. One thread per row (ops/axis_rows.cuh): three passes
 * over its n elements (maximum, sum, output), in index order.
 */
#include <math.h>

#include "nn/cuda/ops/axis_rows.cuh"

template <typename T>
__global__ void softmax_kernel(const T *__restrict__ x, T *__restrict__ y, kr_rows r,
                               kr_epilogue e)
{
    const long long rows = r.outer * r.inner;
    for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row < rows;
         row += (long long)gridDim.x * blockDim.x) {
        const long long o = row / r.inner, in = row - o * r.inner;
        const long long base = o * r.n * r.inner + in;
        float m = -INFINITY;
        for (int k = 0; k < r.n; k++)
            m = fmaxf(m, kr_ld(x + base + k * r.inner));
        float sum = 0.0f;
        for (int k = 0; k < r.n; k++)
            sum += expf(kr_ld(x + base + k * r.inner) - m);
        const float inv = 1.0f / sum;
        for (int k = 0; k < r.n; k++) {
            const long long at = base + k * r.inner;
            kr_st(y + at, kr_apply(e, expf(kr_ld(x + at) - m) * inv));
        }
    }
}

template <typename T> static int launch(const kr_cuda_op *op)
{
    kr_rows r = kr_rows_of(op, kr_in_t(op, 0), op->node->p.axis.axis);
    softmax_kernel<T><<<kr_blocks((size_t)(r.outer * r.inner), 128), 128, 0,
                        (cudaStream_t)op->stream>>>((const T *)op->in[0], (T *)op->out, r,
                                                    kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_softmax(const kr_cuda_op *op) { return KR_BY_TYPE(launch, op); }
