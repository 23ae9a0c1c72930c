/*
 * SSE2 helpers for the CPU effects (x86-64 always has SSE2). Every helper computes exactly
 * what the scalar fx_math.h function of the same purpose computes, four lanes at a time
 * (IEEE single operations in the same order, no fused multiply-add; the same integer
 * arithmetic), so results do not depend on which path ran. Without SSE2 the callers use
 * their scalar loops.
 */
#ifndef KEYER_RENDER_CPU_SIMD_H
#define KEYER_RENDER_CPU_SIMD_H

#if defined(__SSE2__)
#include <emmintrin.h>
#include <stdint.h>
#define KR_SSE2 1

/* kr_box_div on four lanes: (sum * mul + 2^31) >> 32. */
static inline __m128i kr_sse_box_div(__m128i sum, __m128i mul)
{
    const __m128i half = _mm_set1_epi64x(0x80000000ll);
    __m128i even = _mm_add_epi64(_mm_mul_epu32(sum, mul), half);
    __m128i odd = _mm_add_epi64(_mm_mul_epu32(_mm_srli_epi64(sum, 32), mul), half);
    even = _mm_srli_epi64(even, 32);                  /* results in lanes 0, 2 */
    odd = _mm_and_si128(odd, _mm_set1_epi64x((long long)0xFFFFFFFF00000000ull)); /* lanes 1, 3 */
    return _mm_or_si128(even, odd);
}

/* Four u16 at p widened to u32. */
static inline __m128i kr_sse_load_u16x4(const uint16_t *p)
{
    return _mm_unpacklo_epi16(_mm_loadl_epi64((const __m128i *)(const void *)p), _mm_setzero_si128());
}

/* Four u32 lanes (each <= 65535) narrowed and stored as u16. */
static inline void kr_sse_store_u16x4(uint16_t *p, __m128i v)
{
    const __m128i bias = _mm_set1_epi32(32768);
    __m128i s = _mm_packs_epi32(_mm_sub_epi32(v, bias), _mm_sub_epi32(v, bias));
    s = _mm_xor_si128(s, _mm_set1_epi16((short)0x8000));
    _mm_storel_epi64((__m128i *)(void *)p, s);
}

/* Four u32 lanes (each <= 255) stored as bytes. */
static inline void kr_sse_store_u8x4(uint8_t *p, __m128i v)
{
    __m128i s = _mm_packs_epi32(v, v);
    s = _mm_packus_epi16(s, s);
    int w = _mm_cvtsi128_si32(s);
    p[0] = (uint8_t)w;
    p[1] = (uint8_t)(w >> 8);
    p[2] = (uint8_t)(w >> 16);
    p[3] = (uint8_t)(w >> 24);
}
#endif

#endif
