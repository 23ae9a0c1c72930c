/*
 * Half-precision tensor-core pieces shared by the persistent kernel's and the cluster segment's
 * pointwise convolutions on compute 8.0+: mma.sync m16n8k16 with float accumulators, and the
 * split of a float pair into two half pairs (hi + lo) whose products, summed, are those of the
 * float operands to about 2^-22 relative, so that the tensor cores keep the steps' float
 * arithmetic (half weights alone moved the random-weight checks by up to 4e-2).
 *
 * Fragment layout (PTX ISA, mma.m16n8k16, .row.col): lane = 4 g + t. A (16 x 16, row major):
 * a[0] = rows g, k 2t..2t+1; a[1] = row g + 8, same k; a[2], a[3]: the same rows, k + 8.
 * B (16 x 8): b0 = k 2t..2t+1 of column g; b1 = k + 8. D (16 x 8, float): d[0..1] = row g,
 * columns 2t..2t+1; d[2..3] = row g + 8. mma.m16n8k8 (compute 7.5+): A = a[0], a[1] (k 2t..2t+1
 * of rows g, g + 8), B = b0; D the same.
 */
#ifndef KEYER_NN_CUDA_OPS_MMA_F16_CUH
#define KEYER_NN_CUDA_OPS_MMA_F16_CUH

#include <cuda_fp16.h>

/* A float pair as two half pairs: @p hi its rounding, @p lo the rounding of the rest. */
__device__ __forceinline__ void kr_mma_split(float a, float b, unsigned &hi, unsigned &lo)
{
    const __half2 h = __floats2half2_rn(a, b);
    const float2 back = __half22float2(h);
    const __half2 l = __floats2half2_rn(a - back.x, b - back.y);
    hi = *reinterpret_cast<const unsigned *>(&h);
    lo = *reinterpret_cast<const unsigned *>(&l);
}

/* D += A B: mma.sync m16n8k16, half inputs, float accumulators. Compute 8.0+ only (the cluster
 * segment, compute 9.0); below 8.0 this compiles to nothing. */
__device__ __forceinline__ void kr_mma_f16(float *d, const unsigned *a, unsigned b0, unsigned b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
#endif
}

/* D += A B: mma.sync m16n8k8, half inputs, float accumulators (@p a: 2 registers). Compute
 * 7.5+, every class keyer supports, so that a path built on it sums alike on all of them. */
__device__ __forceinline__ void kr_mma_f16_k8(float *d, const unsigned *a, unsigned b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b));
#else
    (void)d, (void)a, (void)b;
#endif
}

#endif
