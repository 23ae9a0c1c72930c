/*
 * The cluster segment kernel's last stages (segment.h): Y, the decoder's last block at 8h x 8W,
 * and Z, the transpose convolution to 16h x 16W, after W. Every value is computed as the
 * persistent steps they replace compute it (the resize-fed 1x1 convolution: each input pixel
 * resized with rs_blend, then the sums from 0 in channel order, + bias; the excited 1x1
 * convolution likewise; the depthwise from 0 over every tap, bias last, or for an EXPAND_DW step
 * from the bias; the transpose convolution's gather from 0, bias last), but for the pool, summed
 * as the segment sums every pool (a block's rows, then the blocks in order) and the
 * excitation's dense layers (excite).
 */
#ifndef KEYER_NN_CUDA_SEGMENT_STAGE_Y_CUH
#define KEYER_NN_CUDA_SEGMENT_STAGE_Y_CUH

#include "nn/cuda/segment/stage_u.cuh"
/* (after the segment's stages: step_common.cuh's CH macro would rename their template
 * parameter of that name) */
#include "nn/cuda/persistent/squeeze.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ float4 ld4(const float *p)
{
    return *reinterpret_cast<const float4 *>(p);
}

/* Y (with Z) after W (segment.h; its layouts kr_seg_y_layout, kr_seg_yf_layout): W's output
 * rows 4r .. 4r + 3 are in rows 1 .. 4 of @p wout ("H": the rest of U's stage buffer, whose
 * weights are at @p wu), @p fbuf is the buffer of Q's weights ("F"), m.xin .. the slots "G".
 * The skip's rows are copied into F on @p skip_bar (its third use). Synchronises the cluster
 * three times; the neighbours read F until the kernel's last cluster barrier. The kernel's
 * one instance: 16 channels throughout, one output channel (the finder checks). */
template <typename T>
__device__ __forceinline__ void stage_y(const kr_cuda_segment &s, const float *wu, float *wout,
                                        const seg_smem &m, cg::cluster_group &cl,
                                        unsigned long long *skip_bar, int img, float *fbuf)
{
    constexpr int YI = 16, YO = 16, YC = 16, W4 = 4 * SW, W8 = 8 * SW, PX = 8 * W8;
    const int H = s.h, t = threadIdx.x, rank = (int)cl.block_rank();
    int o[KR_SEG_U_N + 1], oy[KR_SEG_Y_N + 1], op[KR_SEG_PJ_N + 1], of[KR_SEG_YF_N + 1];
    kr_seg_u_layout(s.c, s.q_oc, s.u_c, s.u_hid, s.u_e, s.v_oc, s.w_hid, s.w_e, o);
    kr_seg_y_layout(YI, YO, s.yp.hid, YC, 1, oy);
    kr_seg_proj_layout(YO, s.yp.hid, YC, op);
    kr_seg_yf_layout(YO, YC, sizeof(T), of);
    const float *yw = wu + o[KR_SEG_U_N];
    float *a = m.xin;                                      /* Y1's rows, then Y2's input */
    T *skip = reinterpret_cast<T *>(fbuf + of[KR_SEG_YF_ROWS]); /* the skip's rows, as stored */
    float *c2 = fbuf + of[KR_SEG_YF_ROWS];                  /* then Y2's convolution's rows */
    float *top = fbuf + of[KR_SEG_YF_TOP]; /* the slice sums, then the top halo row */
    float *bot = wout; /* (once every block has read W's rows) */
    __syncthreads();
    cl.sync(); /* every block's W rows; every block past its reads of the others' W windows (F) */
    if (t == 0) {
        asm volatile("fence.proxy.async;" ::: "memory");
        const T *src = (const T *)s.y_skip + ((size_t)img * 8 * H + 8 * rank) * W8 * YO;
        bulk_load(reinterpret_cast<float *>(skip), (const float *)src,
                  PX * YO * (int)sizeof(T), skip_bar);
    }
    halo_rows<4, W4>(wout, YI, cl, H); /* W's rows 4r - 1 and 4r + 4 */
    __syncthreads();
    { /* 1. Y1: 4 lanes per pixel, lane g resizing input channels 4g .. 4g + 3 (rs_pixel's
       * arithmetic), the 16 values gathered by shuffles, then lane g's outputs 4g .. 4g + 3:
       * the sums from 0 in channel order, + bias, epilogue, as stored */
        const float *w1 = yw + oy[KR_SEG_Y_W1], *b1 = yw + oy[KR_SEG_Y_B1];
        const int g = t % 4, lane0 = (t % 32) & ~3;
        for (int u = t; u < 4 * PX; u += NT) { /* (every lane of a warp in every pass) */
            const int p = u / 4, x = p % W8, i = p / W8;
            int y0, y1, x0, x1;
            float dy, dx;
            rs_axis(4 * H, 8 * H, 0, s.y_half, 8 * rank + i, &y0, &y1, &dy);
            rs_axis(W4, W8, 0, s.y_half, x, &x0, &x1, &dx);
            const float *r0 = wout + (y0 - 4 * rank + 1) * W4 * YI + 4 * g;
            const float *r1 = wout + (y1 - 4 * rank + 1) * W4 * YI + 4 * g;
            const float4 v00 = ld4(r0 + x0 * YI), v10 = ld4(r1 + x0 * YI);
            const float4 v01 = ld4(r0 + x1 * YI), v11 = ld4(r1 + x1 * YI);
            const float av[4] = {rs_blend(v00.x, v10.x, v01.x, v11.x, dy, dx),
                                 rs_blend(v00.y, v10.y, v01.y, v11.y, dy, dx),
                                 rs_blend(v00.z, v10.z, v01.z, v11.z, dy, dx),
                                 rs_blend(v00.w, v10.w, v01.w, v11.w, dy, dx)};
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int c = 0; c < YI; c++) {
                const float xv = __shfl_sync(0xffffffffu, av[c % 4], lane0 + c / 4);
                kr_fma4(acc, xv, ld4(w1 + c * YO + 4 * g));
            }
            float4 r;
            r.x = kr_stored<T>(epi(acc[0] + b1[4 * g], s.y_lo, s.y_hi, s.y_post));
            r.y = kr_stored<T>(epi(acc[1] + b1[4 * g + 1], s.y_lo, s.y_hi, s.y_post));
            r.z = kr_stored<T>(epi(acc[2] + b1[4 * g + 2], s.y_lo, s.y_hi, s.y_post));
            r.w = kr_stored<T>(epi(acc[3] + b1[4 * g + 3], s.y_lo, s.y_hi, s.y_post));
            *reinterpret_cast<float4 *>(a + p * YO + 4 * g) = r;
        }
    }
    __syncthreads();
    bar_wait(skip_bar, 0); /* the skip's rows (the barrier's third phase) */
    { /* 2. the pool's sums as the persistent step's tail makes them: each slice of y_tail
       * pixels (16 of them in this block's 1,024) summed in pixel order from 0 (block_colsum
       * with a pixel per lane: y_tail <= its lanes, the finder checks), into top */
        const int tp = s.y_tail, spb = PX / tp;
        for (int v = t; v < spb * (YO / 4); v += NT) {
            const int g = v % (YO / 4), k = v / (YO / 4);
            float4 sum = make_float4(0, 0, 0, 0);
            for (int p = k * tp; p < (k + 1) * tp; p++) {
                const float4 q = ld4(a + p * YO + 4 * g);
                float kk[4];
                kr_ldv<4>(skip + p * YO + 4 * g, kk);
                sum.x += q.x + kk[0], sum.y += q.y + kk[1];
                sum.z += q.z + kk[2], sum.w += q.w + kk[3];
            }
            *reinterpret_cast<float4 *>(top + k * YO + 4 * g) = sum;
        }
    }
    cl.sync(); /* every block's slice sums (and every block past its reads of W's rows: H is
                * free) */
    { /* the means as the persistent prologue makes them (se_prologue): every slice's sums in
       * order into H, block_colsum over them, times 1 / pixels; then its dense layers
       * (block_dense) */
        const int spb = PX / s.y_tail, ns = H * spb;
        float *all = wout;
        for (int v = t; v < ns * (YO / 4); v += NT) {
            const int k = v / (YO / 4);
            reinterpret_cast<float4 *>(all)[v] = reinterpret_cast<const float4 *>(
                cl.map_shared_rank(top, k / spb) + (k % spb) * YO)[v % (YO / 4)];
        }
        __syncthreads();
        const float inv = 1.0f / (float)(8 * H * W8);
        block_colsum<false, float, float>(all, (const float *)NULL, ns, YO, m.red,
                                          [&](int c, float v) { m.mean[c] = v * inv; });
    }
    const float *wp = yw + oy[KR_SEG_Y_P];
    block_dense(m.mean, YO, m.hid, s.yp.hid, 1, wp + op[KR_SEG_PJ_W1], wp + op[KR_SEG_PJ_B1],
                s.yp.se_lo[0], s.yp.se_hi[0], s.yp.se_post[0]);
    block_dense(m.hid, s.yp.hid, m.sc, YO, 1, wp + op[KR_SEG_PJ_W2], wp + op[KR_SEG_PJ_B2],
                s.yp.se_lo[1], s.yp.se_hi[1], s.yp.se_post[1]);
    /* 3. Y2's input in place: skip * e + Y1 as the persistent step's load_channels computes
     * it, the product rounded, then the sum (its multiply and add sit behind separate run-time
     * tests of their pointers there, so they are not contracted into one fma; the intrinsics
     * keep them apart here, where nothing separates them) */
    for (int i = t; i < PX * YO / 4; i += NT) {
        const float4 sv = ld4(m.sc + (4 * i) % YO), v = ld4(a + 4 * i);
        float k[4];
        kr_ldv<4>(skip + 4 * i, k);
        const float4 r = make_float4(__fadd_rn(__fmul_rn(k[0], sv.x), v.x),
                                     __fadd_rn(__fmul_rn(k[1], sv.y), v.y),
                                     __fadd_rn(__fmul_rn(k[2], sv.z), v.z),
                                     __fadd_rn(__fmul_rn(k[3], sv.w), v.w));
        *reinterpret_cast<float4 *>(a + 4 * i) = r;
    }
    __syncthreads();
    { /* 4. Y2's 1x1 convolution, 4 lanes per pixel (lane g: outputs 4g .. 4g + 3, the inputs
       * gathered by shuffles): from 0 in channel order, + bias, epilogue, as stored, over the
       * skip's rows (read above) */
        const float *w = wp + op[KR_SEG_PJ_W], *b = wp + op[KR_SEG_PJ_B];
        const int g = t % 4, lane0 = (t % 32) & ~3;
        for (int u = t; u < 4 * PX; u += NT) {
            const int p = u / 4;
            const float4 xv = ld4(a + p * YO + 4 * g);
            const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int c = 0; c < YO; c++)
                kr_fma4(acc, __shfl_sync(0xffffffffu, xs[c % 4], lane0 + c / 4),
                        ld4(w + c * YC + 4 * g));
            float4 r;
            r.x = kr_stored<T>(epi(acc[0] + b[4 * g], s.yp.lo, s.yp.hi, s.yp.post));
            r.y = kr_stored<T>(epi(acc[1] + b[4 * g + 1], s.yp.lo, s.yp.hi, s.yp.post));
            r.z = kr_stored<T>(epi(acc[2] + b[4 * g + 2], s.yp.lo, s.yp.hi, s.yp.post));
            r.w = kr_stored<T>(epi(acc[3] + b[4 * g + 3], s.yp.lo, s.yp.hi, s.yp.post));
            *reinterpret_cast<float4 *>(c2 + p * YC + 4 * g) = r;
        }
    }
    cl.sync(); /* every block's convolution rows */
    { /* 5. its halo rows: block r - 1's last into top (every block has read the slice sums
       * there: block barriers in block_colsum, then the cluster barrier above), block r + 1's
       * first into bot (zeros outside the image); loads first */
        constexpr int q4 = W8 * YC / 4;
        for (int i0 = t; i0 < 2 * q4; i0 += 4 * NT) {
            float4 v[4];
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const int i = i0 + n * NT, up = i < q4, nb = up ? rank - 1 : rank + 1;
                v[n] = make_float4(0, 0, 0, 0);
                if (i < 2 * q4 && nb >= 0 && nb < H)
                    v[n] = reinterpret_cast<const float4 *>(cl.map_shared_rank(c2, nb) +
                                                            (up ? 7 : 0) * W8 * YC)[i % q4];
            }
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const int i = i0 + n * NT;
                if (i < 2 * q4)
                    reinterpret_cast<float4 *>(i < q4 ? top : bot)[i % q4] = v[n];
            }
        }
    }
    __syncthreads();
    { /* 6. the depthwise, 4 lanes per pixel (lane g: channels 4g .. 4g + 3; every tap in
       * (ky, kx) order, a tap outside adding 0 x w) plus its input, as stored; the pixel's 16
       * values gathered by shuffles, lane g then Z's output (2y + g / 2, 2x + g % 2): the
       * gather from 0 in channel order, + bias, epilogue, out to z_y */
        const float *wd = yw + oy[KR_SEG_Y_DW], *bd = yw + oy[KR_SEG_Y_DB];
        const float *zw = yw + oy[KR_SEG_Y_ZW], zb = yw[oy[KR_SEG_Y_ZB]];
        const int OW = 16 * SW, g = t % 4, lane0 = (t % 32) & ~3;
        const float4 bz = ld4(bd + 4 * g);
        for (int u = t; u < 4 * PX; u += NT) {
            const int p = u / 4, x = p % W8, i = p / W8;
            const float *rows[3] = {i == 0 ? top : c2 + (i - 1) * W8 * YC, c2 + i * W8 * YC,
                                    i == 7 ? bot : c2 + (i + 1) * W8 * YC};
            float4 acc = s.y_dbf ? bz : make_float4(0, 0, 0, 0);
#pragma unroll
            for (int ky = 0; ky < 3; ky++)
#pragma unroll
                for (int kx = 0; kx < 3; kx++) {
                    const int xx = x - 1 + kx;
                    const float4 in = xx >= 0 && xx < W8 ? ld4(rows[ky] + xx * YC + 4 * g)
                                                         : make_float4(0, 0, 0, 0);
                    kr_dw_fma(acc, in, ld4(wd + (ky * 3 + kx) * YC + 4 * g));
                }
            const float4 r = ld4(rows[1] + x * YC + 4 * g);
            const auto act = [&](float4 v) { return epi4(v, s.y_dlo, s.y_dhi, s.y_dpost); };
            const auto res = [&] { return s.y_res != 0; };
            const float4 v = s.y_dbf ? kr_conv_out_bf(acc, r, res, act)
                                     : kr_conv_out(acc, bz, r, false, res, act);
            const float d[4] = {kr_stored<T>(v.x), kr_stored<T>(v.y), kr_stored<T>(v.z),
                                kr_stored<T>(v.w)};
            float z = 0.0f;
#pragma unroll
            for (int c = 0; c < YC; c++)
                z = fmaf(__shfl_sync(0xffffffffu, d[c % 4], lane0 + c / 4), zw[g * YC + c], z);
            const float zv = epi(z + zb, s.z_lo, s.z_hi, s.z_post);
            const size_t oi = ((size_t)img * 16 * H + 2 * (8 * rank + i) + g / 2) * OW + 2 * x +
                              g % 2;
            if (s.z_f32)
                kr_st((float *)s.z_y + oi, zv);
            else
                kr_st((T *)s.z_y + oi, zv);
        }
    }
}
#endif

#endif
