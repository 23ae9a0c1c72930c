/* MUL: y = act(a * b) with NumPy broadcasting (also the squeeze-and-excitation scale). Kernels in binary.cuh, arithmetic in ops/binary.cuh. */
#include "nn/cuda/binary.cuh"

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    return binary_launch<T, 1, I>(op);
}

extern "C" int kr_cuda_mul(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
