/* Float32 <-> float16 conversion (round to nearest even), for f16 instances' graph inputs and
 * outputs and for weights at set-up (also as hi + lo halves, for the tensor-core pointwise
 * kernel). */
#include "nn/cuda/common.cuh"

/* The graph inputs and outputs of f16 instances (selfie at batch 256: 50 M values each way in,
 * 8 M out) move 8 values per thread and step as 16-byte accesses of the halves (two of the
 * floats), two steps' loads issued before their stores; the scalar kernels (one 4- or 2-byte
 * access per value) ran at 30-50% of the copy bandwidth. Each value is converted as before
 * (round to nearest even), so the results are the same. The vector kernels need both pointers
 * 16-byte aligned; the last n % 8 values take the scalar loop. */
#define CVT_V 8 /* values per thread and step */
#define CVT_U 2 /* steps per thread */

__global__ void to_f16_vec(const float4 *__restrict__ s, uint4 *__restrict__ d, size_t groups)
{
    const size_t g0 = (blockIdx.x * (size_t)blockDim.x) * CVT_U + threadIdx.x;
    float4 v[CVT_U][2];
#pragma unroll
    for (int u = 0; u < CVT_U; u++) {
        const size_t g = g0 + (size_t)u * blockDim.x;
        if (g < groups)
            v[u][0] = s[2 * g], v[u][1] = s[2 * g + 1];
    }
#pragma unroll
    for (int u = 0; u < CVT_U; u++) {
        const size_t g = g0 + (size_t)u * blockDim.x;
        if (g >= groups)
            break;
        __half2 h[4] = {__floats2half2_rn(v[u][0].x, v[u][0].y),
                        __floats2half2_rn(v[u][0].z, v[u][0].w),
                        __floats2half2_rn(v[u][1].x, v[u][1].y),
                        __floats2half2_rn(v[u][1].z, v[u][1].w)};
        d[g] = *reinterpret_cast<const uint4 *>(h);
    }
}

__global__ void to_f32_vec(const uint4 *__restrict__ s, float4 *__restrict__ d, size_t groups)
{
    const size_t g0 = (blockIdx.x * (size_t)blockDim.x) * CVT_U + threadIdx.x;
    uint4 v[CVT_U];
#pragma unroll
    for (int u = 0; u < CVT_U; u++) {
        const size_t g = g0 + (size_t)u * blockDim.x;
        if (g < groups)
            v[u] = s[g];
    }
#pragma unroll
    for (int u = 0; u < CVT_U; u++) {
        const size_t g = g0 + (size_t)u * blockDim.x;
        if (g >= groups)
            break;
        const __half2 *h = reinterpret_cast<const __half2 *>(&v[u]);
        const float2 a = __half22float2(h[0]), b = __half22float2(h[1]);
        const float2 c = __half22float2(h[2]), e = __half22float2(h[3]);
        d[2 * g] = make_float4(a.x, a.y, b.x, b.y);
        d[2 * g + 1] = make_float4(c.x, c.y, e.x, e.y);
    }
}

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

/* Blocks of the vector kernels for @p groups groups of CVT_V values. */
static unsigned vec_grid(size_t groups)
{
    return (unsigned)((groups + 256 * CVT_U - 1) / (256 * CVT_U));
}

static int vec_ok(const void *a, const void *b, size_t n)
{
    /* 2^31 blocks of 256 x CVT_U groups: far past any tensor keyer allocates */
    return ((uintptr_t)a | (uintptr_t)b) % 16 == 0 && n / CVT_V / (256 * CVT_U) < ((size_t)1 << 31);
}

extern "C" int kr_cuda_f32_to_f16(const float *src, void *dst, size_t n, void *stream)
{
    size_t done = 0;
    if (vec_ok(src, dst, n) && n >= CVT_V) {
        const size_t groups = n / CVT_V;
        to_f16_vec<<<vec_grid(groups), 256, 0, (cudaStream_t)stream>>>(
            (const float4 *)src, (uint4 *)dst, groups);
        done = groups * CVT_V;
    }
    if (done < n)
        to_f16<<<grid(n - done), 256, 0, (cudaStream_t)stream>>>(src + done, (__half *)dst + done,
                                                                  n - done);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_f16_to_f32(const void *src, float *dst, size_t n, void *stream)
{
    size_t done = 0;
    if (vec_ok(src, dst, n) && n >= CVT_V) {
        const size_t groups = n / CVT_V;
        to_f32_vec<<<vec_grid(groups), 256, 0, (cudaStream_t)stream>>>(
            (const uint4 *)src, (float4 *)dst, groups);
        done = groups * CVT_V;
    }
    if (done < n)
        to_f32<<<grid(n - done), 256, 0, (cudaStream_t)stream>>>((const __half *)src + done,
                                                                  dst + done, n - done);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_f32_to_f16_hilo(const float *src, void *dst, size_t n, void *stream)
{
    to_f16_hilo<<<grid(n), 256, 0, (cudaStream_t)stream>>>(src, (__half *)dst, n);
    return (int)cudaGetLastError();
}
