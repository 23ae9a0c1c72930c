/* PRELU: y = x >= 0 ? x : alpha * x, alpha broadcast against x (no fused activation). Kernels in binary.cuh, arithmetic in ops/binary.cuh. */
#include "nn/cuda/binary.cuh"

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    return binary_launch<T, 2, I>(op);
}

extern "C" int kr_cuda_prelu(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
