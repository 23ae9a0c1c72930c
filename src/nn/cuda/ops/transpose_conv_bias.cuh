/*
 * The transpose convolution's gather, shared by its general kernel (transpose_conv_bias.cu)
 * and the persistent schedule's TCONV step (persistent/steps.cuh): from 0 over the taps reaching
 * the output in (ky, kx) order and each tap's channels in order; the caller adds the bias last.
 * (The per-node kernel for kernel == stride, tconv_tiles, sums from the bias instead.)
 */
#ifndef KEYER_NN_CUDA_TRANSPOSE_CONV_BIAS_CUH
#define KEYER_NN_CUDA_TRANSPOSE_CONV_BIAS_CUH

#include "nn/cuda/common.cuh"

struct tc_shape {
    int ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, pt, pl;
};

/* Sum over the taps reaching output (b, oy, ox, o): input pixels (iy, ix) with oy = iy*S -
 * pad_top + ky (likewise x) inside the input, channels in order, V per load (4: ic % 4 == 0
 * and x aligned to 4 elements). No bias, no epilogue. */
template <typename T, int V, typename I>
__device__ __forceinline__ float tc_gather(const T *x, const float *w, const tc_shape &s, I b,
                                           int oy, int ox, int o)
{
    float acc = 0.0f;
    for (int ky = 0; ky < s.kh; ky++) {
        int ty = oy + s.pt - ky;
        if (ty < 0 || ty % s.sh)
            continue;
        int iy = ty / s.sh;
        if (iy >= s.ih)
            continue;
        for (int kx = 0; kx < s.kw; kx++) {
            int tx = ox + s.pl - kx;
            if (tx < 0 || tx % s.sw)
                continue;
            int ix = tx / s.sw;
            if (ix >= s.iw)
                continue;
            const T *xp = x + ((b * s.ih + iy) * s.iw + ix) * s.ic;
            const float *wp = w + (((I)o * s.kh + ky) * s.kw + kx) * s.ic;
            for (int c = 0; c < s.ic; c += V) {
                float a[V];
                kr_ldv<V>(xp + c, a);
#pragma unroll
                for (int k = 0; k < V; k++)
                    acc = fmaf(a[k], kr_ld(wp + c + k), acc);
            }
        }
    }
    return acc;
}

#endif
