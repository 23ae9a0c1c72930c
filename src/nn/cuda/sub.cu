/* SUB: y = act(a - b) with NumPy broadcasting. Kernels in binary.cuh (CHAN_A keeps the
 * operands' order), arithmetic in ops/binary.cuh. */
#include "nn/cuda/binary.cuh"

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    return binary_launch<T, 3, I>(op);
}

extern "C" int kr_cuda_sub(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
