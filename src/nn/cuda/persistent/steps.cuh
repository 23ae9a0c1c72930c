/*
 * The persistent kernel's other steps: depthwise, transpose convolution, element-wise binary and
 * unary, copies and conversions, the global pool's final sums, bilinear resize, max pool, PAD,
 * CONCATENATION; each calls its operator's device functions (ops/).
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_STEPS_CUH
#define KEYER_NN_CUDA_PERSISTENT_STEPS_CUH

#include "nn/cuda/ops/binary.cuh"
#include "nn/cuda/ops/concatenation.cuh"
#include "nn/cuda/ops/pad.cuh"
#include "nn/cuda/ops/pool_2d.cuh"
#include "nn/cuda/ops/transpose_conv_bias.cuh"
#include "nn/cuda/persistent/steps_conv.cuh"

/* Depthwise: a thread per pixel and V channels; KS the kernel size when 3 or 5 (taps unrolled),
 * else 0: every tap's load can be in flight before the sums (taps outside the input read a
 * clamped pixel and add 0, without a branch). */
template <typename T, int V, int KS>
__device__ __noinline__ void step_depthwise_v(const kr_cuda_step &s, unsigned begin, unsigned end,
                                              float *tile)
{
    const int kh = KS ? KS : s.kh, kw = KS ? KS : s.kw;
    const int groups = s.oc / V, m = s.oc / s.ic;
    const T *x = (const T *)s.x;
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)groups, s, &co, &ox, &oy, &n);
        co *= V;
        float bz[V], r[V], acc[V];
#pragma unroll
        for (int k = 0; k < V; k++) {
            acc[k] = 0.0f;
            bz[k] = s.bias ? s.bias[co + k] : 0.0f;
        }
        early_res<T, V>(s, u * V, r);
#pragma unroll
        for (int ky = 0; ky < kh; ky++) {
#pragma unroll
            for (int kx = 0; kx < kw; kx++) {
                bool inside;
                const T *xp = x + tap_pixel(s, n, oy, ox, ky, kx, &inside) * s.ic;
                const float *wp = s.w + (ky * kw + kx) * s.oc + co;
                float a[V];
                if (V == 4) { /* multiplier 1: input channel = output channel */
                    kr_ldv<4>(xp + co, a); /* a clamped pixel outside the input, then 0 */
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        a[k] = inside ? a[k] : 0.0f;
                    kr_dw_fma(acc, a, *reinterpret_cast<const float4 *>(wp));
                } else {
                    a[0] = inside ? kr_ld(xp + co / m) : 0.0f;
                    acc[0] = fmaf(a[0], wp[0], acc[0]);
                }
            }
        }
        kr_epilogue e = step_epilogue(s);
        float v[V];
#pragma unroll
        for (int k = 0; k < V; k++) {
            v[k] = kr_conv_out(acc[k], bz[k], r[k], false, [&] { return s.res != NULL; },
                               [&](float a) { return kr_apply(e, a); });
            if (tile)
                tile[(u - begin) * V + k] = kr_stored<T>(v[k]);
        }
        kr_stv<V>((T *)s.y + u * V, v);
    }
}

template <typename T>
__device__ __noinline__ void step_tconv(const kr_cuda_step &s, unsigned begin, unsigned end)
{
    const T *x = (const T *)s.x;
    const tc_shape shape = {s.ih, s.iw, s.ic, s.oh, s.ow, s.oc, s.kh, s.kw, s.sh, s.sw, s.pt, s.pl};
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        int o, ox, oy, n;
        unit_pos(u, (unsigned)s.oc, s, &o, &ox, &oy, &n);
        float acc = s.vec == 4 ? tc_gather<T, 4, unsigned>(x, s.w, shape, (unsigned)n, oy, ox, o)
                               : tc_gather<T, 1, unsigned>(x, s.w, shape, (unsigned)n, oy, ox, o);
        if (s.y_f32) /* straight into the graph output's float staging */
            finish<T, float>(s, u, acc + (s.bias ? s.bias[o] : 0.0f));
        else
            finish<T>(s, u, acc + (s.bias ? s.bias[o] : 0.0f));
    }
}

template <typename T, int V>
__device__ __noinline__ void step_binary_v(const kr_cuda_step &s, unsigned begin, unsigned end,
                                           const float *sc)
{
    /* sc: an excitation as the per-channel operand, [batch][oc], or NULL */
    const unsigned per_item = (unsigned)s.count;
    const T *a = (const T *)s.x, *b = (const T *)s.x2;
    if (s.bmode == 2) { /* the per-channel operand first: swap (ADD and MUL commute) */
        const T *t = a;
        a = b;
        b = t;
    }
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        unsigned i = u * V;
        float va[V], vb[V], v[V];
        kr_ldv<V>(a + i, va);
        if (s.bmode == 0) {
            kr_ldv<V>(b + i, vb);
        } else if (s.bmode == 3) { /* b: the first cn channels (V divides cn), then zeros */
            const unsigned c = i % (unsigned)s.oc, pc = (unsigned)s.cn;
            if (c < pc) {
                kr_ldv<V>(b + i / (unsigned)s.oc * pc + c, vb);
            } else {
#pragma unroll
                for (int k = 0; k < V; k++)
                    vb[k] = 0.0f;
            }
        } else if (sc) {
            const float *scp = sc + (i / per_item) * (unsigned)s.oc + i % (unsigned)s.oc;
#pragma unroll
            for (int k = 0; k < V; k++)
                vb[k] = scp[k];
        } else {
            unsigned off = s.batched ? (i / per_item) * (unsigned)s.cn : 0u;
            kr_ld_chan<V>(b + off, i % (unsigned)s.oc, s.cn, vb);
        }
        kr_binary_out<T, V>(e, s.mul, va, vb, i, v);
        kr_stv<V>((T *)s.y + i, v);
    }
}

template <typename T>
__device__ __noinline__ void step_unary(const kr_cuda_step &s, unsigned begin, unsigned end,
                                        float *tile)
{
    kr_epilogue e = step_epilogue(s);
    for (unsigned i = begin + threadIdx.x; i < end; i += NT) {
        float v = kr_apply(e, kr_ld((const T *)s.x + i));
        kr_st((T *)s.y + i, v);
        if (tile)
            tile[i - begin] = kr_stored<T>(v);
    }
}

template <typename S, typename D>
__device__ __noinline__ void step_copy(const kr_cuda_step &s, unsigned begin, unsigned end)
{
    for (unsigned i = begin + threadIdx.x; i < end; i += NT)
        kr_st((D *)s.y + i, kr_ld((const S *)s.x + i));
}

/* A block per item: the mean from the slices' sums of the partial step, through the epilogue. */
template <typename T> __device__ __noinline__ void step_pool_final(const kr_cuda_step &s, float *red)
{
    kr_epilogue e = step_epilogue(s);
    e.res = NULL;
    const float inv = 1.0f / (float)(s.ih * s.iw);
    for (unsigned n = blockIdx.x; n < (unsigned)s.batch; n += gridDim.x) {
        T *y = (T *)s.y + (size_t)n * s.ic;
        block_colsum<true, float, float>(s.tail_partial + (size_t)n * s.tail_slices * s.ic,
                                  (const float *)NULL, s.tail_slices, s.ic, red,
                                  [&](int c, float v) { kr_st(y + c, kr_apply(e, v * inv)); });
    }
}

template <typename T, int V>
__device__ __noinline__ void step_resize_v(const kr_cuda_step &s, unsigned begin, unsigned end,
                                           const float *sc)
{
    const int chv = s.oc / V;
    const T *x = (const T *)s.x;
    const rs_shape shape = {s.ih, s.iw, s.oc, s.oh, s.ow, s.align, s.half};
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        int k, ox, oy, n;
        unit_pos(u, (unsigned)chv, s, &k, &ox, &oy, &n);
        k *= V;
        float v[V];
        rs_pixel<T, V, unsigned>(x, shape, (unsigned)n, oy, ox, k, v);
        if (sc) { /* a folded excitation: the resize of x * sc, per channel */
            const float *scn = sc + n * s.oc + k;
#pragma unroll
            for (int j = 0; j < V; j++)
                v[j] *= scn[j];
        }
        finish_v<T, V>(s, e, u * V, v);
    }
}


/* MAX_POOL_2D: unit u is V channels of one output pixel; the largest of the window's taps
 * inside the input (padding is never a candidate), then the epilogue. */
template <typename T, int V>
__device__ __noinline__ void step_maxpool_v(const kr_cuda_step &s, unsigned begin, unsigned end)
{
    const T *x = (const T *)s.x;
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        int cg, ox, oy, n, count;
        unit_pos(u, (unsigned)(s.oc / V), s, &cg, &ox, &oy, &n);
        float m[V];
        kr_pool_window<T, V, true>(x, s, (unsigned)n, oy, ox, cg * V, m, &count);
        finish_v<T, V>(s, e, u * V, m);
    }
}

/* PAD of the channels: element u of the output [pixels][oc] is input [pixels][ic]'s channel
 * when it has it, else 0. */
template <typename T>
__device__ __noinline__ void step_pad(const kr_cuda_step &s, unsigned begin, unsigned end)
{
    const T *x = (const T *)s.x;
    for (unsigned u = begin + threadIdx.x; u < end; u += NT)
        kr_st((T *)s.y + u, kr_pad_channels(x, u, s.ic, s.oc, 0));
}

/* CONCATENATION of two operands that are one run per item: element i of item n's count is
 * x's (n, i) below cn, else x2's (n, i - cn). */
template <typename T>
__device__ __noinline__ void step_concat(const kr_cuda_step &s, unsigned begin, unsigned end)
{
    const unsigned per = (unsigned)s.count, a = (unsigned)s.cn;
    for (unsigned u = begin + threadIdx.x; u < end; u += NT)
        kr_st((T *)s.y + u, kr_ld(kr_concat2_src<T>(s.x, s.x2, u, per, a)));
}

#endif
