/*
 * The cluster segment kernel's decoder stages after Q (segment.h): U, and V and W after it.
 */
#ifndef KEYER_NN_CUDA_SEGMENT_STAGE_U_CUH
#define KEYER_NN_CUDA_SEGMENT_STAGE_U_CUH

#include "nn/cuda/segment/stages.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Channels 4g..4g+3 of a bilinear resize's output pixel from its two source rows @p r0, @p r1
 * ([..][ch], either block's shared memory), columns x0, x1 and weights dy, dx (rs_axis): the
 * four taps in the reference's order, then the epilogue lo..hi, post, as stored. */
template <typename T>
__device__ __forceinline__ float4 bilerp4(const float *r0, const float *r1, int x0, int x1,
                                          float dy, float dx, int ch, int g, float lo, float hi,
                                          int post)
{
    const float4 v00 = *reinterpret_cast<const float4 *>(r0 + x0 * ch + 4 * g);
    const float4 v10 = *reinterpret_cast<const float4 *>(r1 + x0 * ch + 4 * g);
    const float4 v01 = *reinterpret_cast<const float4 *>(r0 + x1 * ch + 4 * g);
    const float4 v11 = *reinterpret_cast<const float4 *>(r1 + x1 * ch + 4 * g);
    float4 r = epi4(kr_bilerp4(v00, v10, v01, v11, dy, dx), lo, hi, post);
    r.x = kr_stored<T>(r.x), r.y = kr_stored<T>(r.y);
    r.z = kr_stored<T>(r.z), r.w = kr_stored<T>(r.w);
    return r;
}

/* U's activations in EP (kr_seg_u_smem_layout). */
struct u_smem {
    float *q, *slots, *skip, *a, *p;
};

__device__ __forceinline__ u_smem u_regions(const kr_cuda_segment &s, const seg_smem &m)
{
    int o[KR_SEG_UM_N + 1];
    kr_seg_u_smem_layout(s.c, s.q_oc, s.u_c, s.u_e, o);
    const u_smem u = {m.EP + o[KR_SEG_UM_Q], m.EP + o[KR_SEG_UM_SLOTS], m.EP + o[KR_SEG_UM_SKIP],
                      m.EP + o[KR_SEG_UM_A], m.EP + o[KR_SEG_UM_P]};
    return u;
}

/* U's start, before Q (thread 0 issues its copies; every thread pushes): the skip's rows 2r
 * and 2r + 1 copied as they are stored (float: into u.skip; half: into u.a, converted later)
 * on @p skip_bar, and this block's sums of the segment's output row X pushed into every
 * block's u.slots. EP is free: every block is past the last pair's halo reads. */
template <typename T, int CC>
__device__ __forceinline__ void u_begin(const kr_cuda_segment &s, const seg_smem &m,
                                        cg::cluster_group &cl, unsigned long long *skip_bar,
                                        int img)
{
    const u_smem u = u_regions(s, m);
    const int C = CC ? CC : s.c, H = s.h, rank = (int)cl.block_rank();
    const int bytes = 2 * (2 * SW) * s.u_c * (int)sizeof(T);
    if (threadIdx.x == 0) {
        /* the async proxy's copy after the generic proxy's accesses: EP's (shared), and with E
         * the skip's rows, which this block's threads stored (global; a block barrier since) */
        asm volatile("fence.proxy.async;" ::: "memory");
        const T *src = (const T *)s.u_skip + ((size_t)img * 2 * H + 2 * rank) * (2 * SW) * s.u_c;
        bulk_load(sizeof(T) == 4 ? u.skip : u.a, (const float *)src, bytes, skip_bar);
    }
    row_pool<CC>(m.X, C, m.red, [&](int g, float4 v) {
        for (int r = 0; r < H; r++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(u.slots, r) + rank * C)[g] = v;
    });
}

/* V (segment.h), after U's depthwise (U's rows in u.a): its convolution of U's rows at 2h x 2W
 * with its bias (before the resize, whose weights add to 1) into m.D; its rows 4r .. 4r + 3
 * resized from the owners' rows 2r - 1 .. 2r + 2 (epilogue, as stored) into u.p (the expansion's
 * buffer) and, without W, out to v_y; each row's pool sums with the addend (a slice per row; its
 * rows copied into @p vskip on @p skip_bar) out to v_sums, or with W kept in m.red. */
template <typename T, int UE, int VO>
__device__ __forceinline__ void stage_v(const kr_cuda_segment &s, const float *wu, const int *o,
                                        const seg_smem &m, const u_smem &u, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, const float *vskip, int img,
                                        int ue, int vo, int we, int H, int rank, int t)
{
    constexpr int W2 = 2 * SW, W4 = 4 * SW;
    __syncthreads();
    pointwise_k<float, UE, VO, KR_CUDA_POST_NONE, 2 * W2>(u.a, ue, NULL, wu + o[KR_SEG_U_VW],
                                                          wu + o[KR_SEG_U_VB], vo, m.D, vo, NULL,
                                                          0, -INFINITY, INFINITY,
                                                          KR_CUDA_POST_NONE);
    cl.sync(); /* every block's rows of V's convolution (and every read of u.p done) */
    float *vy = u.p;
    {
        const int G = vo / 4;
        T *y = (T *)s.v_y + ((size_t)img * 4 * H + 4 * rank) * W4 * vo;
        for (int v = t; v < 4 * W4 * G; v += NT) {
            const int g = v % G, x = (v / G) % W4, j = v / (G * W4);
            int y0, y1, x0, x1;
            float dy, dx;
            rs_axis(2 * H, 4 * H, 0, s.v_half, 4 * rank + j, &y0, &y1, &dy);
            rs_axis(W2, W4, 0, s.v_half, x, &x0, &x1, &dx);
            const float4 r = bilerp4<T>(cl.map_shared_rank(m.D, y0 / 2) + (y0 % 2) * W2 * vo,
                                        cl.map_shared_rank(m.D, y1 / 2) + (y1 % 2) * W2 * vo,
                                        x0, x1, dy, dx, vo, g, s.v_lo, s.v_hi, s.v_post);
            *reinterpret_cast<float4 *>(vy + (j * W4 + x) * vo + 4 * g) = r;
            if (!we) { /* (with W, read by nothing after it) */
                const float st[4] = {r.x, r.y, r.z, r.w};
                kr_stv<4>(y + (j * W4 + x) * vo + 4 * g, st);
            }
        }
    }
    __syncthreads();
    bar_wait(skip_bar, 1); /* the addend's rows */
    { /* each row's sums: 16 adjacent lanes per (row, 4 channels), 4 pixels each, added with
       * shuffles in a fixed order */
        const int G = vo / 4, units = 4 * G * 16;
        float *dst = s.v_sums + ((size_t)img * 4 * H + 4 * rank) * vo;
        for (int v0 = 0; v0 < units; v0 += NT) {
            const int v = v0 + t, l = v % 16, g = (v / 16) % G, j = v / (16 * G);
            float4 a = make_float4(0, 0, 0, 0);
            if (v < units)
                for (int px = l; px < W4; px += 16) {
                    const int e = (j * W4 + px) * vo + 4 * g;
                    const float4 q = *reinterpret_cast<const float4 *>(vy + e);
                    float k[4];
                    kr_ldv<4>(reinterpret_cast<const T *>(vskip) + e, k);
                    a.x += q.x + k[0], a.y += q.y + k[1], a.z += q.z + k[2], a.w += q.w + k[3];
                }
#pragma unroll
            for (int off = 8; off > 0; off /= 2) {
                a.x += __shfl_xor_sync(0xffffffffu, a.x, off);
                a.y += __shfl_xor_sync(0xffffffffu, a.y, off);
                a.z += __shfl_xor_sync(0xffffffffu, a.z, off);
                a.w += __shfl_xor_sync(0xffffffffu, a.w, off);
            }
            if (v < units && l == 0) {
                if (!we)
                    *reinterpret_cast<float4 *>(dst + j * vo + 4 * g) = a;
                else /* with W: kept for the block's sums below */
                    reinterpret_cast<float4 *>(m.red)[j * G + g] = a;
            }
        }
    }
}

/* The rest of U's stage buffer after its weights (U's, V's, W's, Y's): Y's "H"
 * (kr_seg_yf_layout). */
__device__ __forceinline__ float *y_rest(const kr_cuda_segment &s, const float *wu)
{
    return const_cast<float *>(wu) + s.stage_floats[(s.s_ic > 0) + s.n_ir + 2];
}

/* W (segment.h), after V: the block's sums (its rows' in order) pushed into every block's slots
 * (u.a: U's output rows are dead), the means, the excitation; v = addend * e + V's output in
 * place (u.p); the expansion into the window's middle rows (@p wwin, in Q's weight buffer), its
 * halo rows from the neighbours, the depthwise (+ its input) out to w_y, or with Y as stored
 * into rows 1 .. 4 of y_rest's W rows. */
template <typename T, int VO, int WE>
__device__ __forceinline__ void stage_w(const kr_cuda_segment &s, const float *wu, const int *o,
                                        const seg_smem &m, const u_smem &u, cg::cluster_group &cl,
                                        const float *vskip, float *wwin, int img, int vo, int we,
                                        int H, int rank, int t)
{
    constexpr int W4 = 4 * SW;
    float *vy = u.p;
    /* W: the block's sums (its rows' in order) pushed into every block's slots (u.a: U's
     * output rows are dead), the means, the excitation; v = addend * e + V's output in place;
     * the expansion into the window's middle rows (in Q's weight buffer), its halo rows from
     * the neighbours, the depthwise (+ its input) out to w_y */
    __syncthreads();
    float *slots = u.a;
    if (t < vo / 4) {
        float4 r = reinterpret_cast<const float4 *>(m.red)[t];
        for (int j = 1; j < 4; j++) {
            const float4 q = reinterpret_cast<const float4 *>(m.red)[j * (vo / 4) + t];
            r.x += q.x, r.y += q.y, r.z += q.z, r.w += q.w;
        }
        for (int b = 0; b < H; b++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(slots, b) + rank * vo)[t] = r;
    }
    cl.sync(); /* every block's sums */
    if (t < vo) {
        float a = 0.0f;
        for (int b = 0; b < H; b++)
            a += slots[b * vo + t];
        m.mean[t] = a * (1.0f / (float)(4 * H * W4));
    }
    int ow[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(vo, s.w_hid, we, ow);
    const float *wq = wu + o[KR_SEG_U_WP];
    excite<VO>(s.wp, wq, ow, m.mean, m.hid, m.sc);
    for (int i = t; i < 4 * W4 * vo / 4; i += NT) {
        const float4 sv = *reinterpret_cast<const float4 *>(m.sc + (4 * i) % vo);
        float k[4];
        kr_ldv<4>(reinterpret_cast<const T *>(vskip) + 4 * i, k);
        float4 a = *reinterpret_cast<const float4 *>(vy + 4 * i);
        a.x = fmaf(k[0], sv.x, a.x), a.y = fmaf(k[1], sv.y, a.y);
        a.z = fmaf(k[2], sv.z, a.z), a.w = fmaf(k[3], sv.w, a.w);
        *reinterpret_cast<float4 *>(vy + 4 * i) = a;
    }
    __syncthreads();
    pointwise_pf<T, VO, WE, KR_CUDA_POST_RELU, 4 * W4>(vy, vo, NULL, wq + ow[KR_SEG_PJ_W],
                                                       wq + ow[KR_SEG_PJ_B], we, wwin + W4 * we,
                                                       we, NULL, 0, s.wp.lo, s.wp.hi, s.wp.post);
    cl.sync(); /* every block's expanded rows */
    halo_rows<4, W4>(wwin, we, cl, H);
    __syncthreads();
    T *yw = (T *)s.w_y + ((size_t)img * 4 * H + 4 * rank) * W4 * we;
    float *wout = s.y_oc ? y_rest(s, wu) : nullptr; /* with Y: rows 1 .. 4 of Y's W rows */
    dw3_rows<WE, 4, W4>(wwin, wu + o[KR_SEG_U_WD], wu + o[KR_SEG_U_WB], we, s.w_dlo, s.w_dhi,
                        s.w_dpost, s.w_res_mid, [&](int i, int x, int g, float4 a) {
                            if (wout) {
                                a.x = kr_stored<T>(a.x), a.y = kr_stored<T>(a.y);
                                a.z = kr_stored<T>(a.z), a.w = kr_stored<T>(a.w);
                                *reinterpret_cast<float4 *>(wout + ((i + 1) * W4 + x) * we +
                                                            4 * g) = a;
                            } else {
                                const float v[4] = {a.x, a.y, a.z, a.w};
                                kr_stv<4>(yw + (i * W4 + x) * we + 4 * g, v);
                            }
                        });
}

/* U after Q (Q's row in u.q; U's weights at @p wu; the skip's copy counted on @p skip_bar):
 * the excitation of the segment's output, a at h x W from Q's row (the convolution before the
 * resize), a's rows 2r, 2r + 1 resized from rows r - 1 .. r + 1 of the neighbours, the pool of
 * a + skip, its excitation, v = skip * e + a, the expansion p into the middle rows of u.p, its
 * halo rows from the neighbours, the depthwise (+ p) written to y3. Synchronises the cluster
 * four times; the neighbours read u.p until the kernel's last cluster barrier.
 * CC, QO, UC, UE: c, q_oc, u_c, u_e as constants (0 = run-time). */
template <typename T, int CC, int QO, int UC, int UE, int VO, int WE>
__device__ __forceinline__ void stage_u(const kr_cuda_segment &s, const float *wu,
                                        const seg_smem &m, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, int img, float *wwin)
{
    constexpr int W2 = 2 * SW;
    const int C = CC ? CC : s.c, qo = QO ? QO : s.q_oc, uc = UC ? UC : s.u_c;
    const int ue = UE ? UE : s.u_e, H = s.h, t = threadIdx.x, rank = (int)cl.block_rank();
    const u_smem u = u_regions(s, m);
    int o[KR_SEG_U_N + 1], op[KR_SEG_PJ_N + 1];
    kr_seg_u_layout(C, qo, uc, s.u_hid, ue, s.v_oc, s.w_hid, s.w_e, o);
    kr_seg_proj_layout(uc, s.u_hid, ue, op);
    cl.sync(); /* every block's sums pushed */
    if (t < C) { /* 1. the resize's excitation: means, one dense layer q_oc <- C (2 lanes each) */
        float a = 0.0f;
        for (int r = 0; r < H; r++)
            a += u.slots[r * C + t];
        m.mean[t] = a * (1.0f / (float)(H * SW));
    }
    __syncthreads();
    {
        const float *w = wu + o[KR_SEG_U_SW], *b = wu + o[KR_SEG_U_SB];
        const int h2 = t % 2;
        for (int j0 = 0; j0 < qo; j0 += NT / 2) {
            const int j = j0 + t / 2;
            float a = 0.0f;
            if (j < qo)
                for (int k = 4 * h2; k < C; k += 8) {
                    const float4 wv = *reinterpret_cast<const float4 *>(w + j * C + k);
                    const float4 x = *reinterpret_cast<const float4 *>(m.mean + k);
                    a = fmaf(wv.x, x.x, a), a = fmaf(wv.y, x.y, a);
                    a = fmaf(wv.z, x.z, a), a = fmaf(wv.w, x.w, a);
                }
            a += __shfl_xor_sync(0xffffffffu, a, 1);
            if (j < qo && h2 == 0)
                m.sc[j] = epi(a + b[j], s.u_se_lo, s.u_se_hi, s.u_se_post);
        }
    }
    __syncthreads();
    { /* 2. a at h x W: the convolution of Q's row scaled by the excitation, plus its bias
       * (before the resize, whose weights add to 1), into m.D; S lanes per unit over the
       * input channels where there are threads for them, their parts added in order */
        const float *w = wu + o[KR_SEG_U_AW], *b = wu + o[KR_SEG_U_AB];
        const int G = uc / 4, U = SW * G;
        int S = 1;
        while (2 * S * U <= NT && qo % (8 * S) == 0)
            S *= 2;
        const int cs = qo / S;
        float4 *red = reinterpret_cast<float4 *>(m.red);
        for (int v = t; v < S * U; v += NT) {
            const int un = v % U, l = v / U, g = un % G, px = un / G;
            const float *x = u.q + px * qo + l * cs, *sc = m.sc + l * cs;
            const float *wl = w + (size_t)l * cs * uc + 4 * g;
            float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll 4
            for (int c = 0; c < cs; c += 4) {
                const float4 xv = *reinterpret_cast<const float4 *>(x + c);
                const float4 sv = *reinterpret_cast<const float4 *>(sc + c);
                const float xs[4] = {xv.x * sv.x, xv.y * sv.y, xv.z * sv.z, xv.w * sv.w};
#pragma unroll
                for (int j = 0; j < 4; j++)
                    kr_fma4(acc, xs[j], *reinterpret_cast<const float4 *>(wl + (c + j) * uc));
            }
            if (S == 1) {
                const float4 bb = *reinterpret_cast<const float4 *>(b + 4 * g);
                acc.x += bb.x, acc.y += bb.y, acc.z += bb.z, acc.w += bb.w;
                *reinterpret_cast<float4 *>(m.D + px * uc + 4 * g) = acc;
            } else {
                red[l * U + un] = acc;
            }
        }
        if (S > 1) {
            __syncthreads();
            for (int v = t; v < U; v += NT) {
                float4 r = *reinterpret_cast<const float4 *>(b + 4 * (v % G));
                for (int l = 0; l < S; l++) {
                    const float4 q = red[l * U + v];
                    r.x += q.x, r.y += q.y, r.z += q.z, r.w += q.w;
                }
                *reinterpret_cast<float4 *>(m.D + (v / G) * uc + 4 * (v % G)) = r;
            }
        }
    }
    bar_wait(skip_bar, 0); /* the skip's rows, as stored */
    if (sizeof(T) == 2) { /* half in u.a -> float in u.skip */
        for (int i = t; i < 2 * W2 * uc / 4; i += NT) {
            float v[4];
            kr_ldv<4>(reinterpret_cast<const __half *>(u.a) + 4 * i, v);
            *reinterpret_cast<float4 *>(u.skip + 4 * i) = make_float4(v[0], v[1], v[2], v[3]);
        }
    }
    cl.sync(); /* every block's a at h x W */
    { /* 3. a's rows 2r, 2r + 1 (epilogue, as stored) resized from the owners' rows */
        const int G = uc / 4;
        for (int v = t; v < 2 * W2 * G; v += NT) {
            const int g = v % G, x = (v / G) % W2, i = v / (G * W2);
            int y0, y1, x0, x1;
            float dy, dx;
            rs_axis(H, 2 * H, s.u_align, s.u_half, 2 * rank + i, &y0, &y1, &dy);
            rs_axis(SW, W2, s.u_align, s.u_half, x, &x0, &x1, &dx);
            const float4 r = bilerp4<T>(cl.map_shared_rank(m.D, y0), cl.map_shared_rank(m.D, y1),
                                        x0, x1, dy, dx, uc, g, s.u_lo, s.u_hi, s.u_post);
            *reinterpret_cast<float4 *>(u.a + (i * W2 + x) * uc + 4 * g) = r;
        }
    }
    __syncthreads();
    /* 4. the pool of a + skip: every block's sums into every block's slots (free: every block
     * read them before the barrier above) */
    row_pool<UC, 2 * W2>(u.a, uc, m.red, [&](int g, float4 v) {
        for (int r = 0; r < H; r++)
            reinterpret_cast<float4 *>(cl.map_shared_rank(u.slots, r) + rank * uc)[g] = v;
    }, u.skip);
    cl.sync();
    if (t < uc) {
        float a = 0.0f;
        for (int r = 0; r < H; r++)
            a += u.slots[r * uc + t];
        m.mean[t] = a * (1.0f / (float)(2 * H * W2));
    }
    /* 5. its excitation; v = skip * e + a into u.a; the expansion p into u.p's middle rows */
    const float *wp = wu + o[KR_SEG_U_P];
    excite<UC>(s.up, wp, op, m.mean, m.hid, m.sc);
    for (int i = t; i < 2 * W2 * uc / 4; i += NT) {
        const float4 sv = *reinterpret_cast<const float4 *>(m.sc + (4 * i) % uc);
        const float4 k = *reinterpret_cast<const float4 *>(u.skip + 4 * i);
        float4 a = *reinterpret_cast<const float4 *>(u.a + 4 * i);
        a.x = fmaf(k.x, sv.x, a.x), a.y = fmaf(k.y, sv.y, a.y);
        a.z = fmaf(k.z, sv.z, a.z), a.w = fmaf(k.w, sv.w, a.w);
        *reinterpret_cast<float4 *>(u.a + 4 * i) = a;
    }
    __syncthreads();
    pointwise_pf<T, UC, UE, KR_CUDA_POST_RELU, 2 * W2>(u.a, uc, NULL, wp + op[KR_SEG_PJ_W],
                                                       wp + op[KR_SEG_PJ_B], ue, u.p + W2 * ue,
                                                       ue, NULL, 0, s.up.lo, s.up.hi,
                                                       s.up.post);
    cl.sync(); /* every block's p */
    const int vo = VO ? VO : s.v_oc, we = WE ? WE : s.w_e;
    constexpr int W4 = 4 * SW;
    float *vskip = m.EP; /* with V: its addend's rows as stored, copied meanwhile */
    if (vo && t == 0) { /* (EP's start is dead: Q's row, the sums, the skip) */
        asm volatile("fence.proxy.async;" ::: "memory");
        const T *src = (const T *)s.v_skip + ((size_t)img * 4 * H + 4 * rank) * W4 * vo;
        bulk_load(vskip, (const float *)src, 4 * W4 * vo * (int)sizeof(T), skip_bar);
    }
    halo_rows(u.p, ue, cl, H); /* 6. p's rows 2r - 1 and 2r + 2 */
    __syncthreads();
    { /* 7. the 3x3 depthwise of p (epilogue, plus p with res_mid) into y3's rows 2r, 2r + 1,
       * or with V into u.a (a's and v's rows are dead) */
        T *y = (T *)s.y3 + ((size_t)img * 2 * H + 2 * rank) * W2 * ue;
        dw3_rows<UE>(u.p, wu + o[KR_SEG_U_DW], wu + o[KR_SEG_U_DB], ue, s.u_dlo, s.u_dhi,
                      s.u_dpost, s.u_res_mid, [&](int i, int x, int g, float4 a) {
                          if (vo) {
                              a.x = kr_stored<T>(a.x), a.y = kr_stored<T>(a.y);
                              a.z = kr_stored<T>(a.z), a.w = kr_stored<T>(a.w);
                              *reinterpret_cast<float4 *>(u.a + (i * W2 + x) * ue + 4 * g) = a;
                          } else {
                              const float v[4] = {a.x, a.y, a.z, a.w};
                              kr_stv<4>(y + (i * W2 + x) * ue + 4 * g, v);
                          }
                      });
    }
    if (!vo)
        return;
    stage_v<T, UE, VO>(s, wu, o, m, u, cl, skip_bar, vskip, img, ue, vo, we, H, rank, t);
    if (!we)
        return;
    stage_w<T, VO, WE>(s, wu, o, m, u, cl, vskip, wwin, img, vo, we, H, rank, t);
}

/* stage_u with run-time shapes: one copy, called (not inlined). */
template <typename T>
__device__ __noinline__ void stage_u_rt(const kr_cuda_segment &s, const float *wu,
                                        const seg_smem m, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, int img, float *wwin)
{
    stage_u<T, 0, 0, 0, 0, 0, 0>(s, wu, m, cl, skip_bar, img, wwin);
}
#endif

#endif
