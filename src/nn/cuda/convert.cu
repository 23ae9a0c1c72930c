/* Float32 <-> float16 conversion (round to nearest even), for f16 instances' graph inputs and
 * outputs and for weights at set-up (also as hi + lo halves, for the tensor-core pointwise
 * kernel). */
#include "nn/cuda/common.cuh"

__global__ void to_f16(const float *__restrict__ s, __half *__restrict__ d, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = __float2half_rn(s[i]);
}

__global__ void to_f32(const __half *__restrict__ s, float *__restrict__ d, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = __half2float(s[i]);
}

__global__ void to_f16_hilo(const float *__restrict__ s, __half *__restrict__ d, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const __half hi = __float2half_rn(s[i]);
        d[i] = hi;
        d[n + i] = __float2half_rn(s[i] - __half2float(hi));
    }
}

static unsigned grid(size_t n)
{
    unsigned b = kr_blocks(n, 256);
    return b > 65536u ? 65536u : b;
}

extern "C" int kr_cuda_f32_to_f16(const float *src, void *dst, size_t n, void *stream)
{
    to_f16<<<grid(n), 256, 0, (cudaStream_t)stream>>>(src, (__half *)dst, n);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_f16_to_f32(const void *src, float *dst, size_t n, void *stream)
{
    to_f32<<<grid(n), 256, 0, (cudaStream_t)stream>>>((const __half *)src, dst, n);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_f32_to_f16_hilo(const float *src, void *dst, size_t n, void *stream)
{
    to_f16_hilo<<<grid(n), 256, 0, (cudaStream_t)stream>>>(src, (__half *)dst, n);
    return (int)cudaGetLastError();
}
