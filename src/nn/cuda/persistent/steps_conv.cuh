/*
 * The persistent kernel's convolution steps: the lane-split and group-4 convolutions (with the
 * resize-fed 1x1, rz), the stem + 1x1 pair (CONV_PW) and the pointwise + depthwise pair
 * (EXPAND_DW). Their sums and epilogues are ops/conv_2d.cuh's and ops/depthwise_conv_2d.cuh's
 * (the orders each one uses are listed there).
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_STEPS_CONV_CUH
#define KEYER_NN_CUDA_PERSISTENT_STEPS_CONV_CUH

#include "nn/cuda/ops/depthwise_conv_2d.cuh"
#include "nn/cuda/ops/resize_bilinear.cuh"
#include "nn/cuda/persistent/squeeze.cuh"

template <typename T, int KS, int IC, typename TX = T, bool PRE = false>
__device__ __noinline__ void step_conv_g4(const kr_cuda_step &s, unsigned begin, unsigned end,
                                          float *tile, const float *sc);
template <typename T, bool PRE>
__device__ __noinline__ void step_conv_split(const kr_cuda_step &s, unsigned begin,
                                             unsigned end, float *tile, const float *sc);

/* A convolution whose outputs are few (split lanes per output, one output per unit), or any
 * convolution the group-4 path cannot take. The producers of a pool tail (this, the group-4
 * convolution, the depthwise and the unary step) also write each output value, as stored, to
 * @p tile at (unit - begin) * values per unit (NULL: no tail). @p sc: the excitation of a
 * prologue, [batch][ic] (NULL: none). */
template <typename T>
__device__ __noinline__ void step_conv_rz(const kr_cuda_step &s, unsigned begin, unsigned end,
                                          float *tile);

/* The convolution step: picks the variant. Inlined (through run_units) into the step loop and
 * step_with_tail, one call level fewer per convolution step: 1-2 us less at batch 1
 * (docs/notes/cuda-persistent-schedule.md). */
template <typename T>
__device__ __forceinline__ void step_conv(const kr_cuda_step &s, unsigned begin, unsigned end,
                                          float *tile, const float *sc)
{
    if (s.rz) {
        step_conv_rz<T>(s, begin, end, tile);
        return;
    }
    if (s.group == 4) {
        if (s.kh == 1 && s.kw == 1 && s.res_pre)
            step_conv_g4<T, 1, 0, T, true>(s, begin, end, tile, sc);
        else if (s.kh == 1 && s.kw == 1)
            step_conv_g4<T, 1, 0>(s, begin, end, tile, sc);
        else if (s.kh == 3 && s.kw == 3 && s.ic == 3 && s.x_f32) /* from the float input */
            step_conv_g4<T, 3, 3, float>(s, begin, end, tile, sc);
        else if (s.kh == 3 && s.kw == 3 && s.ic == 3) /* an RGB stem: all 27 loads in flight */
            step_conv_g4<T, 3, 3>(s, begin, end, tile, sc);
        else if (s.kh == 5 && s.kw == 5 && s.ic == 3 && s.x_f32) /* BlazeFace's stem */
            step_conv_g4<T, 5, 3, float>(s, begin, end, tile, sc);
        else if (s.kh == 5 && s.kw == 5 && s.ic == 3) /* (a chain of 75 loads unrolled) */
            step_conv_g4<T, 5, 3>(s, begin, end, tile, sc);
        else
            step_conv_g4<T, 0, 0>(s, begin, end, tile, sc);
        return;
    }
    if (s.res_pre)
        step_conv_split<T, true>(s, begin, end, tile, sc);
    else
        step_conv_split<T, false>(s, begin, end, tile, sc);
}

/* A convolution whose every output is reduced by `split` lanes of a warp; with PRE, the
 * residual (conv_res) is added before the epilogue's clamp and post function (res_pre). */
template <typename T, bool PRE>
__device__ __noinline__ void step_conv_split(const kr_cuda_step &s, unsigned begin,
                                             unsigned end, float *tile, const float *sc)
{
    const unsigned S = (unsigned)s.split, lane = threadIdx.x % S;
    const unsigned first = (threadIdx.x & 31u) - lane;
    const unsigned mask = S == 32 ? 0xffffffffu : (((1u << S) - 1u) << first);
    const T *x = (const T *)s.x, *xa = (const T *)s.scale_add;
    for (unsigned u = begin + threadIdx.x / S; u < end; u += NT / S) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)s.oc, s, &co, &ox, &oy, &n);
        const float bz = s.bias ? s.bias[co] : 0.0f;
        float r;
        if (PRE)
            conv_res<T, 1>(s, u, &r);
        else
            early_res<T, 1>(s, u, &r);
        const float *scn = sc ? sc + n * s.ic : NULL;
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            int iy = oy * s.sh - s.pt + ky * s.dh;
            if ((unsigned)iy >= (unsigned)s.ih)
                continue;
            for (int kx = 0; kx < s.kw; kx++) {
                int ix = ox * s.sw - s.pl + kx * s.dw;
                if ((unsigned)ix >= (unsigned)s.iw)
                    continue;
                const unsigned pix = (unsigned)(n * s.ih + iy) * s.iw + ix;
                const T *xp = x + pix * s.ic, *xap = xa ? xa + pix * s.ic : NULL;
                const float *wp = s.w + ((unsigned)(co * s.kh + ky) * s.kw + kx) * s.ic;
                if (s.vec == 4) {
#pragma unroll 4
                    for (int c = (int)lane * 4; c < s.ic; c += 4 * (int)S) {
                        float a[4];
                        kr_ldv<4>(xp + c, a);
                        if (scn) {
                            a[0] *= scn[c], a[1] *= scn[c + 1];
                            a[2] *= scn[c + 2], a[3] *= scn[c + 3];
                        }
                        if (xap) {
                            float b[4];
                            kr_ldv<4>(xap + c, b);
                            a[0] += b[0], a[1] += b[1], a[2] += b[2], a[3] += b[3];
                        }
                        float4 w = *reinterpret_cast<const float4 *>(wp + c);
                        acc0 = fmaf(a[0], w.x, acc0);
                        acc1 = fmaf(a[1], w.y, acc1);
                        acc0 = fmaf(a[2], w.z, acc0);
                        acc1 = fmaf(a[3], w.w, acc1);
                    }
                } else {
                    for (int c = (int)lane; c < s.ic; c += (int)S) {
                        float a = kr_ld(xp + c) * (scn ? scn[c] : 1.0f);
                        if (xap)
                            a += kr_ld(xap + c);
                        acc0 = fmaf(a, wp[c], acc0);
                    }
                }
            }
        }
        float acc = acc0 + acc1;
        for (unsigned off = S >> 1; off > 0; off >>= 1)
            acc += __shfl_xor_sync(mask, acc, off);
        if (lane == 0) {
            kr_epilogue e = step_epilogue(s);
            /* PRE: an ADD's activation after the residual */
            const float v = kr_conv_out(acc, bz, r, PRE, [&] { return s.res != NULL; },
                                        [&](float a) { return kr_apply(e, a); });
            kr_st((T *)s.y + u, v);
            if (tile)
                tile[u - begin] = kr_stored<T>(v);
        }
    }
}

/* The sums of the group-4 unit at output channels co..co+3, (oy, ox) of item n: acc[0..4) over
 * the window, the input scaled by @p scn and added to as the step says (see step_conv_g4), from
 * the transposed weights s.wt, whose output channels are s.oc, or with PW (a CONV_PW step's
 * first convolution) s.cn. */
template <typename T, int KS, int IC, typename TX, bool PW = false>
__device__ __forceinline__ void g4_sums(const kr_cuda_step &s, int co, int ox, int oy, int n,
                                        const float *scn, float *acc)
{
    const int kh = KS ? KS : s.kh, kw = KS ? KS : s.kw, ic = IC ? IC : s.ic;
    const size_t wo = (size_t)(PW ? s.cn : s.oc); /* the weights' output channels */
    const TX *x = (const TX *)s.x;
    const T *xa = (const T *)s.scale_add;
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
#pragma unroll
    for (int ky = 0; ky < kh; ky++) {
#pragma unroll
        for (int kx = 0; kx < kw; kx++) {
            bool inside;
            const unsigned pix = tap_pixel(s, n, oy, ox, ky, kx, &inside);
            const TX *xp = x + pix * ic;
            const T *xap = xa ? xa + pix * ic : NULL;
            /* weights [tap][ic][oc]: the 4 outputs of a thread are one 16-byte load, and
             * the threads of a warp (neighbouring output groups) read neighbouring bytes */
            const float *wr = s.wt + (size_t)((ky * kw + kx) * ic) * wo + co;
            if (s.vec == 4) {
                int c0 = 0;
                for (; c0 + CH <= ic; c0 += CH) { /* CH loads in flight, then the sums */
                    float a[CH];
                    load_channels<T, CH, TX>(xp, xap, scn, c0, a);
#pragma unroll
                    for (int j = 0; j < CH; j++)
                        fma4(acc, inside ? a[j] : 0.0f, wr + (size_t)(c0 + j) * wo);
                }
#pragma unroll 2
                for (; c0 < ic; c0 += 4) {
                    float a[4];
                    load_channels<T, 4, TX>(xp, xap, scn, c0, a);
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        fma4(acc, inside ? a[j] : 0.0f, wr + (size_t)(c0 + j) * wo);
                }
            } else {
#pragma unroll
                for (int c = 0; c < ic; c++) {
                    float xv = kr_ld(xp + c) * (scn ? scn[c] : 1.0f);
                    if (xap)
                        xv += kr_ld(xap + c);
                    fma4(acc, inside ? xv : 0.0f, wr + (size_t)c * wo);
                }
            }
        }
    }
}

/* A convolution whose outputs alone fill the GPU (split 1, group 4): a thread per pixel and 4
 * output channels, so that each input value is loaded once for 4 dot products, with the
 * weights transposed at set-up (s.wt) so that a warp's weight loads are coalesced. KS, IC: the
 * kernel size and input channels when fixed at compile time (1x1 any; 3x3 on 3 channels, the
 * stem: every load unrolled), else 0. TX: the input's element type (float for a stem reading
 * the graph input's float staging in an f16 instance, x_f32). */
template <typename T, int KS, int IC, typename TX, bool PRE>
__device__ __noinline__ void step_conv_g4(const kr_cuda_step &s, unsigned begin, unsigned end,
                                          float *tile, const float *sc)
{
    const int groups = s.oc / 4;
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)groups, s, &co, &ox, &oy, &n);
        co *= 4;
        float bz[4], r[4];
        g4_bias(s, co, bz);
        if (PRE)
            conv_res<T, 4>(s, u * 4, r);
        else
            early_res<T, 4>(s, u * 4, r);
        const float *scn = sc ? sc + n * s.ic : NULL;
        float acc[4];
        g4_sums<T, KS, IC, TX>(s, co, ox, oy, n, scn, acc);
        g4_finish<T, PRE>(s, e, u, begin, acc, bz, r, tile);
    }
}

/* CONV_PW (persistent.h): a block does whole pixels, a pass of NT / max(cn, oc) * 4 of them at
 * a time: cn / 4 threads per pixel compute the first convolution (step_conv_g4's arithmetic,
 * its epilogue e_*) into @p mid as the element type would store it (and into y1, if set), then
 * oc / 4 threads per pixel the 1x1 convolution of those cn values with weights and biases from
 * shared memory (in step_conv_g4's order, so the result is that of the two steps). @p mid:
 * KR_CUDA_MID_FLOATS. */
template <typename T, int KS, int IC, typename TX>
__device__ __noinline__ void step_conv_pw(const kr_cuda_step &s, float *mid)
{
    const int tid = threadIdx.x, cn = s.cn, g1 = cn / 4, g2 = s.oc / 4, nw = cn * s.oc;
    const unsigned pixels = (unsigned)(s.batch * s.oh * s.ow);
    const unsigned begin = share_begin(pixels), end = share_end(pixels);
    const unsigned per = (unsigned)(NT / (g1 > g2 ? g1 : g2));
    float *wsm = mid + per * cn; /* the 1x1 weights as [cn][oc], then its biases */
    /* loaded before the first phase, stored after it (the planner keeps nw <= NT) */
    const float wv = tid < nw ? s.w2[tid] : 0.0f;
    const float bv = tid < s.oc && s.bias2 ? s.bias2[tid] : 0.0f;
    kr_epilogue e1;
    e1.lo = s.e_lo, e1.hi = s.e_hi, e1.post = s.e_post, e1.res = NULL;
    const kr_epilogue e2 = step_epilogue(s);
    bool weights = false;
    for (unsigned p0 = begin; p0 < end; p0 += per) {
        const unsigned np = min(per, end - p0);
        if ((unsigned)tid < np * g1) {
            int co, ox, oy, n;
            unit_pos(p0 * g1 + tid, (unsigned)g1, s, &co, &ox, &oy, &n);
            co *= 4;
            float bz[4], acc[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                bz[j] = s.e_bias ? s.e_bias[co + j] : 0.0f;
            g4_sums<T, KS, IC, TX, true>(s, co, ox, oy, n, (const float *)NULL, acc);
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                v[j] = kr_conv_out(acc[j], bz[j], 0.0f, false, kr_no_res(),
                                   [&](float a) { return kr_apply(e1, a); });
                mid[(tid / g1) * cn + co + j] = kr_stored<T>(v[j]);
            }
            if (s.y1) /* other nodes read it too */
                kr_stv<4>((T *)s.y1 + (p0 * g1 + tid) * 4, v);
        }
        if (!weights) {
            if (tid < nw)
                wsm[(tid % cn) * s.oc + tid / cn] = wv; /* from [oc][cn] */
            if (tid < s.oc)
                wsm[nw + tid] = bv;
            weights = true;
        }
        __syncthreads();
        if ((unsigned)tid < np * g2) {
            const int co = 4 * (tid % g2);
            const float *a = mid + (tid / g2) * cn;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int c = 0; c < cn; c++)
                fma4(acc, a[c], wsm + c * s.oc + co);
            g4_finish<T>(s, e2, p0 * g2 + tid, 0, acc, wsm + nw + co, r, (float *)NULL);
        }
        __syncthreads();
    }
}

/* A 1x1 convolution on the group-4 path whose input is the bilinear resize of s.x (rz): each
 * 4 input channels of the pixel are the resize's arithmetic (resize_bilinear.cuh), then summed
 * in the same order as step_conv_g4. @p tile: as step_conv. */
template <typename T>
__device__ __noinline__ void step_conv_rz(const kr_cuda_step &s, unsigned begin, unsigned end,
                                          float *tile)
{
    const int ic = s.ic, groups = s.oc / 4;
    const T *x = (const T *)s.x;
    const rs_shape rs = {s.rz_ih, s.rz_iw, ic, s.oh, s.ow, s.align, s.half};
    kr_epilogue e = step_epilogue(s);
    for (unsigned u = begin + threadIdx.x; u < end; u += NT) {
        int co, ox, oy, n;
        unit_pos(u, (unsigned)groups, s, &co, &ox, &oy, &n);
        co *= 4;
        float bz[4], r[4], acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        g4_bias(s, co, bz);
        early_res<T, 4>(s, u * 4, r);
        const float *wr = s.wt + co; /* [ic][oc] */
#pragma unroll 2
        for (int c0 = 0; c0 < ic; c0 += 4) {
            float a[4];
            rs_pixel<T, 4, unsigned>(x, rs, (unsigned)n, oy, ox, c0, a);
#pragma unroll
            for (int j = 0; j < 4; j++)
                fma4(acc, a[j], wr + (size_t)(c0 + j) * s.oc);
        }
        g4_finish<T>(s, e, u, begin, acc, bz, r, tile);
    }
}


/* EXPAND_DW (persistent.h): a block per (item, output tile, channel group) at a time. First
 * the pointwise outputs of the tile's window (its halo: the rows and columns its taps reach) for
 * the group's channels, into @p mid (0 outside the image: the depthwise convolution's padding);
 * then the depthwise outputs from @p mid, with their epilogue, stored; with a pool tail, also
 * into @p tbuf, whose column sums (the tile's pixels) go to the tile's row of sums for these
 * channels. @p sc: a prologue's excitation (scales the pointwise input), or NULL. */
template <typename T>
__device__ __noinline__ void step_expand_dw(const kr_cuda_step &s, float *red, float *tbuf,
                                            float *mid, float *dww, const float *sc)
{
    const int TS = s.tile, G = s.chan, Q = G / 4, oc = s.oc, ic = s.ic;
    const int tx_n = (s.ow + TS - 1) / TS, ty_n = (s.oh + TS - 1) / TS, groups = oc / G;
    const int hh = (TS - 1) * s.sh + (s.kh - 1) * s.dh + 1;
    const int hw = (TS - 1) * s.sw + (s.kw - 1) * s.dw + 1;
    const unsigned units = (unsigned)s.batch * ty_n * tx_n * groups;
    const T *x = (const T *)s.x, *xa = (const T *)s.scale_add;
    kr_epilogue pe; /* the pointwise epilogue */
    pe.lo = s.e_lo, pe.hi = s.e_hi, pe.post = s.e_post, pe.res = NULL;
    kr_epilogue de = step_epilogue(s); /* the depthwise one */
    for (unsigned p = blockIdx.x; p < units; p += gridDim.x) {
        const int g = (int)(p % groups), t = (int)(p / groups) % (ty_n * tx_n);
        const int n = (int)(p / groups / (ty_n * tx_n)), ty = t / tx_n, tx = t % tx_n;
        const int oy0 = ty * TS, ox0 = tx * TS, c0 = g * G;
        const int iy0 = oy0 * s.sh - s.pt, ix0 = ox0 * s.sw - s.pl;
        const float *scn = sc ? sc + n * ic : NULL;
        /* the depthwise weights and biases of these channels, [tap][G] then [G], one per
         * thread (the planner keeps them within KR_CUDA_DWW_FLOATS): loaded now, stored into
         * shared memory after the pointwise phase, so that the loads overlap it and the
         * depthwise phase reads no global memory (its taps' loads were a chain of L2 trips) */
        const int taps = s.kh * s.kw, wq = (int)threadIdx.x;
        float wv = 0.0f;
        if (wq < taps * G)
            wv = s.w2[(wq / G) * oc + c0 + wq % G];
        else if (wq < (taps + 1) * G && s.bias2)
            wv = s.bias2[c0 + wq % G];
        /* the halo's pointwise outputs, 4 channels per unit */
        for (int q = threadIdx.x; q < hh * hw * Q; q += NT) {
            const int quad = q % Q, hp = q / Q, iy = iy0 + hp / hw, ix = ix0 + hp % hw;
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if ((unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw) {
                const unsigned pix = (unsigned)(n * s.ih + iy) * s.iw + ix;
                const T *xp = x + pix * ic, *xap = xa ? xa + pix * ic : NULL;
                const float *wr = s.wt + c0 + quad * 4; /* [ic][oc] */
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                int c = 0;
                for (; c + CH <= ic; c += CH) {
                    float a[CH];
                    load_channels<T, CH, T>(xp, xap, scn, c, a);
#pragma unroll
                    for (int j = 0; j < CH; j++)
                        fma4(acc, a[j], wr + (size_t)(c + j) * oc);
                }
                for (; c < ic; c += 4) {
                    float a[4];
                    load_channels<T, 4, T>(xp, xap, scn, c, a);
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        fma4(acc, a[j], wr + (size_t)(c + j) * oc);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) /* as stored between the two nodes */
                    v[j] = kr_stored<T>(kr_conv_out(
                        acc[j], s.e_bias ? s.e_bias[c0 + quad * 4 + j] : 0.0f, 0.0f, false,
                        kr_no_res(), [&](float a) { return kr_apply(pe, a); }));
            }
            *reinterpret_cast<float4 *>(mid + hp * G + quad * 4) = make_float4(v[0], v[1], v[2], v[3]);
        }
        if (wq < (taps + 1) * G)
            dww[wq] = wv;
        __syncthreads();
        /* the tile's depthwise outputs, one channel per thread */
        for (int q = threadIdx.x; q < TS * TS * G; q += NT) {
            const int c = q % G, op = q / G, ly = op / TS, lx = op % TS;
            const int oy = oy0 + ly, ox = ox0 + lx;
            float v = 0.0f;
            if (oy < s.oh && ox < s.ow) {
                float acc = dww[taps * G + c];
                const float *m = mid + (ly * s.sh * hw + lx * s.sw) * G + c;
                for (int ky = 0; ky < s.kh; ky++)
#pragma unroll 5
                    for (int kx = 0; kx < s.kw; kx++)
                        acc = fmaf(m[(ky * s.dh * hw + kx * s.dw) * G],
                                   dww[(ky * s.kw + kx) * G + c], acc);
                const unsigned o = ((unsigned)(n * s.oh + oy) * s.ow + ox) * oc + c0 + c;
                float r;
                if (s.res_mid) /* the residual is the depthwise input at this pixel */
                    r = mid[((ly + s.pt) * hw + lx + s.pl) * G + c];
                else
                    early_res<T, 1>(s, o, &r);
                v = kr_conv_out_bf(acc, r, [&] { return s.res || s.res_mid; },
                                   [&](float a) { return kr_apply(de, a); });
                kr_st((T *)s.y + o, v);
                v = kr_stored<T>(v);
            }
            if (s.tail)
                tbuf[op * G + c] = v;
        }
        __syncthreads();
        if (s.tail) { /* the tile's sums of these channels: its row of the pool's sums */
            float *dst = s.tail_partial + ((size_t)n * s.tail_slices + t) * oc + c0;
            block_colsum<false, float, float>(tbuf, (const float *)NULL, TS * TS, G, red,
                                              [&](int c, float v) { dst[c] = v; });
        }
    }
}

#endif
