/*
 * ARGMAX along p.argmax.axis (src/nn/reference/argmax.c): the int32 index of the largest
 * element of each row, the first of equal maxima (or the last with select_last_index); the
 * output is the rows in order whether or not keep_dims keeps the axis. One thread per row
 * (ops/axis_rows.cuh). The output is int32 in every instance: in an f16 instance the backend
 * points it at the graph output's 4-byte staging (backend.c).
 */
#include "nn/cuda/ops/axis_rows.cuh"

template <typename T>
__global__ void argmax_kernel(const T *__restrict__ x, int32_t *__restrict__ y, kr_rows r,
                              int last)
{
    const long long rows = r.outer * r.inner;
    for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row < rows;
         row += (long long)gridDim.x * blockDim.x) {
        const long long o = row / r.inner, in = row - o * r.inner;
        const long long base = o * r.n * r.inner + in;
        float best = kr_ld(x + base);
        int at = 0;
        for (int k = 1; k < r.n; k++) {
            const float v = kr_ld(x + base + k * r.inner);
            if (v > best || (last && v == best)) {
                best = v;
                at = k;
            }
        }
        y[row] = at;
    }
}

template <typename T> static int launch(const kr_cuda_op *op)
{
    kr_rows r = kr_rows_of(op, kr_in_t(op, 0), op->node->p.argmax.axis);
    argmax_kernel<T><<<kr_blocks((size_t)(r.outer * r.inner), 128), 128, 0,
                       (cudaStream_t)op->stream>>>((const T *)op->in[0], (int32_t *)op->out, r,
                                                   op->node->p.argmax.select_last_index);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_argmax(const kr_cuda_op *op) { return KR_BY_TYPE(launch, op); }
