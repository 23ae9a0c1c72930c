// Logistic function over a mask in device memory: turns a model's mask logits into
// probabilities for the refinement stage (pose models output logits). vision/sigmoid.h.
#include <cuda_runtime.h>

#include "keyer/status.h"

__global__ void kr_sigmoid_kernel(float *dst, const float *src, size_t count)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (; i < count; i += step)
        dst[i] = 1.0f / (1.0f + __expf(-src[i]));
}

static cudaError_t launch_sigmoid(float *dst, const float *src, size_t count, cudaStream_t stream)
{
    const int threads = 256;
    size_t blocks = (count + threads - 1) / threads;
    if (blocks > 4096)
        blocks = 4096;
    if (blocks == 0)
        return cudaSuccess;
    kr_sigmoid_kernel<<<(unsigned)blocks, threads, 0, stream>>>(dst, src, count);
    return cudaGetLastError();
}

extern "C" keyer_status kr_cuda_sigmoid(int ordinal, float *dst, const float *src, size_t count,
                                        void *stream, keyer_error *err)
{
    if (!dst || !src)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "sigmoid: NULL pointer");
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = launch_sigmoid(dst, src, count, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "sigmoid of %zu mask values: %s", count,
                               cudaGetErrorString(e));
    return KEYER_OK;
}
