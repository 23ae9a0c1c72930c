/*
 * GATHER (ONNX Gather; src/nn/reference/gather.c): data seen as [outer][n][inner] around axis
 * p.axis.axis, constant int32 indices (m of them, uploaded as int32 by the backend); output
 * [outer][m][inner] with y[o][j][i] = x[o][indices[j]][i]. One thread per output element. The
 * validator has checked the indices against n; they are clamped to [0, n) all the same, so
 * that no index can read outside the input.
 */
#include "nn/cuda/ops/axis_rows.cuh"

template <typename T, typename I>
__global__ void gather_kernel(const T *__restrict__ x, const int32_t *__restrict__ idx,
                              T *__restrict__ y, I total, kr_rows r, int m)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        const I q = i / (I)r.inner, in = i - q * (I)r.inner;
        const I o = q / (I)m;
        const int j = (int)(q - o * (I)m);
        const int k = min(max(idx[j], 0), r.n - 1);
        y[i] = x[(o * (I)r.n + (I)k) * (I)r.inner + in];
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *it = kr_in_t(op, 1);
    kr_rows r = kr_rows_of(op, kr_in_t(op, 0), op->node->p.axis.axis);
    const int m = (int)kr_tensor_elements(it);
    size_t total = kr_elems(op, kr_out_t(op));
    if (!op->in[1] || m <= 0 || r.n <= 0 || total != (size_t)(r.outer * m * r.inner))
        return (int)cudaErrorInvalidValue;
    gather_kernel<T, I><<<kr_blocks(total, 256), 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const int32_t *)op->in[1], (T *)op->out, (I)total, r, m);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_gather(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
