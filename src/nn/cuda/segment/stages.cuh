/*
 * The cluster segment kernel's stages before U (segment.h): a (D, P) pair, S, E, and the
 * halo rows and 3x3 depthwise rows that E, U and W share.
 */
#ifndef KEYER_NN_CUDA_SEGMENT_STAGES_CUH
#define KEYER_NN_CUDA_SEGMENT_STAGES_CUH

#include "nn/cuda/segment/blocks.cuh"

/* Pair k of the segment (stage k + 1, or k + 2 after S; weights at @p we): expand into EP's middle row, the halo
 * rows from the neighbours, the depthwise row, the pool, the excitation, the projection plus
 * the residual back into X. CC, EE: c and e as constants (0 = run-time). */
template <typename T, int K, int CC, int EE>
__device__ __forceinline__ void pair(const kr_cuda_segment &s, int k, const float *we,
                                     const seg_smem &m, cg::cluster_group &cl)
{
    constexpr int PAD = K / 2;
    const kr_cuda_seg_dw &d = s.d[k];
    const kr_cuda_seg_proj &p = s.p[k];
    const int E = EE ? EE : d.e, C = CC ? CC : s.c, H = s.h, t = threadIdx.x;
    const int rank = (int)cl.block_rank();
    int od[KR_SEG_DW_N + 1], op[KR_SEG_PJ_N + 1];
    kr_seg_dw_layout(C, E, K, od);
    kr_seg_proj_layout(E, p.hid, C, op);
    const float *be = we + od[KR_SEG_DW_BE], *wd = we + od[KR_SEG_DW_WD];
    const float *bd = we + od[KR_SEG_DW_BD], *wp = we + od[KR_SEG_DW_N];
    /* 1. the expanded row into EP's middle row */
    pointwise_pf<T, CC, EE, KR_CUDA_POST_HARD_SWISH>(m.X, C, NULL, we, be, E, m.EP + PAD * SW * E,
                                                     E, NULL, 0, d.e_lo, d.e_hi, d.e_post);
    cl.sync(); /* every row expanded (and the last stage's reads of EP done) */
    { /* 2. the halo rows from their owners, zeros outside the image: loads first */
        const int q4 = SW * E / 4, total = 2 * PAD * q4;
        float4 v[8];
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int i = t + n * NT, hr = i / q4, r = hr < PAD ? hr : hr + 1;
            const int iy = rank - PAD + r;
            v[n] = make_float4(0, 0, 0, 0);
            if (i < total && iy >= 0 && iy < H)
                v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(m.EP, iy) +
                                                        PAD * SW * E)[i % q4];
        }
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int i = t + n * NT, hr = i / q4, r = hr < PAD ? hr : hr + 1;
            if (i < total)
                reinterpret_cast<float4 *>(m.EP + r * SW * E)[i % q4] = v[n];
        }
    }
    __syncthreads();
    /* 3. the depthwise row */
    if (EE)
        if (d.post == KR_CUDA_POST_HARD_SWISH)
            depthwise_k<T, K, EE, KR_CUDA_POST_HARD_SWISH>(m.EP, wd, bd, E, PAD, m.D, d);
        else
            depthwise_k<T, K, EE>(m.EP, wd, bd, E, PAD, m.D, d);
    else
        depthwise_rt<T, K>(m.EP, wd, bd, E, m.D, d);
    __syncthreads();
    /* 4. the pool: the channel means */
    cluster_pool<EE>(m.D, E, m, cl, H);
    /* 5. the excitation, then the projection plus the residual, back into X */
    excite<EE>(p, wp, op, m.mean, m.hid, m.sc);
    const float *pw = wp + op[KR_SEG_PJ_W], *pb = wp + op[KR_SEG_PJ_B];
    pointwise_pf<T, EE, CC, KR_CUDA_POST_NONE>(m.D, E, m.sc, pw, pb, C, m.X, C,
                                               p.res ? m.X : NULL, p.res_pre, p.lo, p.hi, p.post);
    __syncthreads();
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* S (stage 0, weights in buffer 0): this block's input rows 2r, 2r + 1 into m.xin, expanded
 * into the window (buffer 1: [K][2 SW][E], own rows at pt and pt + 1), the window's other rows
 * from their owners (zeros outside the image) after a cluster barrier, the stride-2 depthwise
 * row into m.xin (P0's input), then (thread 0) pair 0's weights into buffer 0, and S's pool:
 * every block's sums in m.slots, the means in m.mean. Synchronises the cluster; on return no
 * block reads another's window any more.
 * CI, EE: s_ic and the output channels as constants (0 = run-time). */
template <typename T, int K, int CI, int EE>
__device__ __forceinline__ void stage_s(const kr_cuda_segment &s, const seg_smem &m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    constexpr int IW = 2 * SW;
    const int ci = CI ? CI : s.s_ic, E = EE ? EE : s.sd.e, H = s.h, pt = s.s_pt, t = threadIdx.x;
    const int rank = (int)cl.block_rank();
    float *win = m.wbuf + s.buf_floats;
    if (!s.e_ic) /* the input rows (with E, in m.xin already) */
        load_rows((const T *)s.x + ((size_t)img * 2 * H + 2 * rank) * IW * ci, 2 * IW * ci,
                  m.xin);
    __syncthreads();
    wait_stage(bar, 0);
    int o[KR_SEG_DW_N + 1];
    kr_seg_dw_layout(ci, E, K, o);
    const float *we = m.wbuf + o[KR_SEG_DW_WE], *be = m.wbuf + o[KR_SEG_DW_BE];
    pointwise_pf<T, CI, EE, KR_CUDA_POST_HARD_SWISH, 2 * IW>(m.xin, ci, NULL, we, be, E,
                                                             win + pt * IW * E, E, NULL, 0,
                                                             s.sd.e_lo, s.sd.e_hi, s.sd.e_post);
    cl.sync(); /* every block's rows expanded */
    { /* the window's other rows: row j is image row y = 2r - pt + j, block y / 2's row pt + y % 2 */
        const int q4 = IW * E / 4, total = K * q4;
        for (int i0 = t; i0 < total; i0 += 8 * NT) {
            float4 v[8];
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const int i = i0 + n * NT, j = i / q4, y = 2 * rank - pt + j;
                v[n] = make_float4(0, 0, 0, 0);
                if (i < total && (j < pt || j > pt + 1) && y >= 0 && y < 2 * H)
                    v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(win, y / 2))
                        [(pt + y % 2) * q4 + i % q4];
            }
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const int i = i0 + n * NT, j = i / q4;
                if (i < total && (j < pt || j > pt + 1))
                    reinterpret_cast<float4 *>(win)[i] = v[n];
            }
        }
    }
    __syncthreads();
    const float *wd = m.wbuf + o[KR_SEG_DW_WD], *bd = m.wbuf + o[KR_SEG_DW_BD];
    if (s.sd.post == KR_CUDA_POST_HARD_SWISH)
        depthwise_k<T, K, EE, KR_CUDA_POST_HARD_SWISH, 2>(win, wd, bd, E, s.s_pl, m.xin, s.sd);
    else
        depthwise_k<T, K, EE, -1, 2>(win, wd, bd, E, s.s_pl, m.xin, s.sd);
    __syncthreads();
    if (t == 0) { /* stage 2 (pair 0) over S's weights, which no thread reads any more */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        load_stage(s, 2, m.wbuf, bar);
    }
    /* the pool: the channel means (the cluster barrier in it also ends every block's reads of
     * the others' windows) */
    cluster_pool<EE>(m.xin, E, m, cl, H);
}

/* stage_s with run-time shapes: one copy, called (not inlined). */
template <typename T, int K>
__device__ __noinline__ void stage_s_rt(const kr_cuda_segment &s, const seg_smem m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    stage_s<T, K, 0, 0>(s, m, cl, bar, img);
}
#endif

/* Rows 0 and R + 1 of @p buf [R + 2][W2][ch] (the block's R image rows in rows 1 .. R) from
 * the neighbours' rows R (block r - 1's last) and 1 (block r + 1's first), zeros outside the
 * image's @p h blocks: loads first. Every block's rows must be published (a cluster barrier). */
template <int R = 2, int W2 = 2 * SW>
__device__ __forceinline__ void halo_rows(float *buf, int ch, cg::cluster_group &cl, int h)
{
    const int q4 = W2 * ch / 4, rank = (int)cl.block_rank();
    for (int i0 = threadIdx.x; i0 < 2 * q4; i0 += 4 * NT) {
        float4 v[4];
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int i = i0 + n * NT, top = i < q4, nb = top ? rank - 1 : rank + 1;
            v[n] = make_float4(0, 0, 0, 0);
            if (i < 2 * q4 && nb >= 0 && nb < h)
                v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(buf, nb) +
                                                        (top ? R : 1) * W2 * ch)[i % q4];
        }
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int i = i0 + n * NT;
            if (i < 2 * q4)
                reinterpret_cast<float4 *>(buf + (i < q4 ? 0 : R + 1) * W2 * ch)[i % q4] = v[n];
        }
    }
}

/* The 3x3 "same" depthwise of rows 1 .. R of @p buf [R + 2][W2][ch] (halo rows 0, R + 1),
 * bias, epilogue lo..hi, post, plus the input pixel where @p res_mid: out(i, x, g, value) for
 * row i < R, column x, channels 4g..4g+3. CH: ch as a constant (0 = run-time). */
template <int CH, int R = 2, int W2 = 2 * SW, typename F>
__device__ __forceinline__ void dw3_rows(const float *buf, const float *wd, const float *bd,
                                         int ch_rt, float lo, float hi, int post, int res_mid,
                                         F out)
{
    const int ch = CH ? CH : ch_rt, G = ch / 4;
    for (int v = threadIdx.x; v < R * W2 * G; v += NT) {
        const int g = v % G, x = (v / G) % W2, i = v / (G * W2);
        float4 a = *reinterpret_cast<const float4 *>(bd + 4 * g);
#pragma unroll
        for (int ky = 0; ky < 3; ky++)
#pragma unroll
            for (int kx = 0; kx < 3; kx++) {
                const int xx = x - 1 + kx;
                if (xx < 0 || xx >= W2)
                    continue;
                const float4 in = *reinterpret_cast<const float4 *>(buf + ((i + ky) * W2 + xx) * ch +
                                                                    4 * g);
                const float4 wv = *reinterpret_cast<const float4 *>(wd + (ky * 3 + kx) * ch + 4 * g);
                kr_dw_fma(a, in, wv);
            }
        a = post == KR_CUDA_POST_RELU ? epi4c<KR_CUDA_POST_RELU>(a, lo, hi, post)
                                      : epi4(a, lo, hi, post);
        if (res_mid) {
            const float4 r = *reinterpret_cast<const float4 *>(buf + ((i + 1) * W2 + x) * ch + 4 * g);
            a.x += r.x, a.y += r.y, a.z += r.z, a.w += r.w;
        }
        out(i, x, g, a);
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* E (segment.h), before S (stage 0's weights, E's after S's, in buffer 0): this block's input
 * rows 2r, 2r + 1 into buffer 1, the first convolution into D, the expansion into the window's
 * middle rows (at buffer 1's end: S's own rows, written before S's first cluster barrier, stay
 * below the rows the neighbours read), its halo rows from the neighbours, the depthwise into EP,
 * the second convolution (+ the first's output) into m.xin (S's input) and out to e_y; then
 * (thread 0) P0's weights into EP. Synchronises the cluster once.
 * IC, CC, EE: e_ic, s_ic and e_e as constants (0 = run-time). */
template <typename T, int IC, int CC, int EE>
__device__ __forceinline__ void stage_e(const kr_cuda_segment &s, const seg_smem &m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    constexpr int W2 = 2 * SW, NPX = 2 * W2;
    const int ic = IC ? IC : s.e_ic, c = CC ? CC : s.s_ic, e = EE ? EE : s.e_e, H = s.h;
    const int t = threadIdx.x, rank = (int)cl.block_rank();
    float *xr = m.wbuf + s.buf_floats, *win = m.wbuf + 2 * s.buf_floats - 4 * W2 * e;
    load_rows((const T *)s.x + ((size_t)img * 2 * H + 2 * rank) * W2 * ic, 2 * W2 * ic, xr);
    __syncthreads();
    wait_stage(bar, 0);
    int o[KR_SEG_E_N + 1];
    kr_seg_e_layout(ic, c, e, o);
    const float *w = m.wbuf + s.e_w_off - s.stage_off[0];
    pointwise_pf<T, IC, CC, KR_CUDA_POST_NONE, NPX>(xr, ic, NULL, w + o[KR_SEG_E_W1],
                                                    w + o[KR_SEG_E_B1], c, m.D, c, NULL, 0,
                                                    s.e1_lo, s.e1_hi, s.e1_post);
    __syncthreads();
    pointwise_pf<T, CC, EE, KR_CUDA_POST_RELU, NPX>(m.D, c, NULL, w + o[KR_SEG_E_WE],
                                                    w + o[KR_SEG_E_BE], e, win + W2 * e, e, NULL,
                                                    0, s.ed.e_lo, s.ed.e_hi, s.ed.e_post);
    cl.sync(); /* every block's expanded rows */
    halo_rows(win, e, cl, H);
    __syncthreads();
    float *dd = m.EP;
    dw3_rows<EE>(win, w + o[KR_SEG_E_WD], w + o[KR_SEG_E_BD], e, s.ed.lo, s.ed.hi, s.ed.post, 0,
                  [&](int i, int x, int g, float4 a) {
                      a.x = kr_stored<T>(a.x), a.y = kr_stored<T>(a.y);
                      a.z = kr_stored<T>(a.z), a.w = kr_stored<T>(a.w);
                      *reinterpret_cast<float4 *>(dd + (i * W2 + x) * e + 4 * g) = a;
                  });
    __syncthreads();
    pointwise_pf<T, EE, CC, KR_CUDA_POST_NONE, NPX>(dd, e, NULL, w + o[KR_SEG_E_W3],
                                                    w + o[KR_SEG_E_B3], c, m.xin, c,
                                                    s.e3_res ? m.D : NULL, s.e3_res_pre,
                                                    s.e3_lo, s.e3_hi, s.e3_post);
    __syncthreads();
    if (t == 0) { /* P0's weights into EP, which no thread reads any more */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        load_stage(s, 1, m.EP, bar);
    }
    T *y = (T *)s.e_y + ((size_t)img * 2 * H + 2 * rank) * W2 * c;
    for (int i = t; i < 2 * W2 * c / 4; i += NT)
        kr_stv<4>(y + 4 * i, m.xin + 4 * i);
}

/* stage_e with run-time shapes: one copy, called (not inlined). */
template <typename T>
__device__ __noinline__ void stage_e_rt(const kr_cuda_segment &s, const seg_smem m,
                                        cg::cluster_group &cl, unsigned long long *bar, int img)
{
    stage_e<T, 0, 0, 0>(s, m, cl, bar, img);
}

#endif

#endif
