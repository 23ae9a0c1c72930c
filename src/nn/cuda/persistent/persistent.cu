/*
 * The persistent kernel (see persistent.h): one cooperative launch walks the steps; every
 * block takes a contiguous share of every step's units (share_begin/share_end), or, for a step
 * with a pool tail, one (item, slice) after another, or, for EXPAND_DW, one (item, tile,
 * channel group) after another; then all wait at a grid barrier
 * (cooperative_groups grid sync, which also orders the memory: a step reads what the steps
 * before it wrote, from any multiprocessor). Every step function runs the units [begin, end)
 * given to its block.
 *
 * The per-step code follows the per-node kernels' arithmetic (float accumulation, the same
 * epilogue: clamp, post function, residual) with one difference: a convolution output may be
 * reduced by `split` lanes of a warp (interleaved 4-channel chunks, then a butterfly of
 * shuffles in fixed order), so that small layers use the whole GPU. Activations are read with
 * plain loads (never the read-only path: they are written during the kernel). Latency is what
 * counts at these sizes, so loads are issued together where they can be: a convolution loads
 * 16 input channels before using them, bias and residual before the sums. (Asking the L1 for
 * the next step's weights during the current one, prefetch.L1, cost 20 us in all: measured,
 * dropped.)
 */
#include <cfloat>

#include <cooperative_groups.h>

#include "nn/cuda/ops/binary.cuh"
#include "nn/cuda/ops/concatenation.cuh"
#include "nn/cuda/ops/conv_2d.cuh"
#include "nn/cuda/ops/depthwise_conv_2d.cuh"
#include "nn/cuda/ops/pad.cuh"
#include "nn/cuda/ops/pool_2d.cuh"
#include "nn/cuda/ops/resize_bilinear.cuh"
#include "nn/cuda/ops/transpose_conv_bias.cuh"
#include "nn/cuda/persistent/persistent.h"

namespace cg = cooperative_groups;

__device__ __forceinline__ kr_epilogue step_epilogue(const kr_cuda_step &s)
{
    kr_epilogue e;
    e.lo = s.lo;
    e.hi = s.hi;
    e.post = s.post;
    e.res = s.res;
    return e;
}

/* Finishes output element @p i: bias, epilogue, residual (T), store (TY). */
template <typename T, typename TY = T>
__device__ __forceinline__ void finish(const kr_cuda_step &s, unsigned i, float acc)
{
    kr_epilogue e = step_epilogue(s);
    float v = kr_apply(e, acc);
    kr_add_res<T, 1>(e, i, &v);
    kr_st((TY *)s.y + i, v);
}

/* Finishes the V output elements from @p idx: epilogue @p e (clamp, post function), its
 * residual, store (resize and max pool steps). */
template <typename T, int V>
__device__ __forceinline__ void finish_v(const kr_cuda_step &s, const kr_epilogue &e,
                                         unsigned idx, float *v)
{
#pragma unroll
    for (int k = 0; k < V; k++)
        v[k] = kr_apply(e, v[k]);
    kr_add_res<T, V>(e, idx, v);
    kr_stv<V>((T *)s.y + idx, v);
}

#define NT KR_CUDA_PERSISTENT_THREADS

/* This block's contiguous share [share_begin, share_end) of a step's @p units work units:
 * every block gets work, and a warp's units are neighbours (coalesced). A grid-stride loop put
 * all the units of a small step on the first blocks, so on a few multiprocessors. */
__device__ __forceinline__ unsigned share_begin(unsigned units)
{
    unsigned chunk = (units + gridDim.x - 1) / gridDim.x;
    return min(blockIdx.x * chunk, units);
}
__device__ __forceinline__ unsigned share_end(unsigned units)
{
    unsigned chunk = (units + gridDim.x - 1) / gridDim.x;
    return min(blockIdx.x * chunk + chunk, units);
}

/* Position of unit @p u of an output [batch][oh][ow][groups]: group, column, row, item. */
__device__ __forceinline__ void unit_pos(unsigned u, unsigned groups, const kr_cuda_step &s,
                                         int *gi, int *ox, int *oy, int *n)
{
    *gi = (int)(u % groups);
    unsigned p = u / groups;
    *ox = (int)(p % (unsigned)s.ow);
    unsigned q = p / (unsigned)s.ow;
    *oy = (int)(q % (unsigned)s.oh);
    *n = (int)(q / (unsigned)s.oh);
}

/* Input pixel index of tap (ky, kx) of output (oy, ox) of item n, clamped into the input, and
 * in *inside whether the tap really is inside (else it counts as 0). Taps outside read a
 * clamped pixel instead of branching, so the loads of all taps can be in flight together. */
__device__ __forceinline__ unsigned tap_pixel(const kr_cuda_step &s, int n, int oy, int ox,
                                              int ky, int kx, bool *inside)
{
    int iy = oy * s.sh - s.pt + ky * s.dh, ix = ox * s.sw - s.pl + kx * s.dw;
    *inside = (unsigned)iy < (unsigned)s.ih && (unsigned)ix < (unsigned)s.iw;
    int cy = min(max(iy, 0), s.ih - 1), cx = min(max(ix, 0), s.iw - 1);
    return (unsigned)(n * s.ih + cy) * s.iw + cx;
}

/* 4 consecutive values at @p p for block_colsum: through L2 only (CG: values other blocks
 * wrote during this run, float rows) or plain loads. */
template <bool CG> __device__ __forceinline__ void colsum_ld4(const float *p, float *v)
{
    float4 q = CG ? __ldcg(reinterpret_cast<const float4 *>(p))
                  : *reinterpret_cast<const float4 *>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
template <bool CG> __device__ __forceinline__ void colsum_ld4(const __half *p, float *v)
{
    kr_ldv<4>(p, v);
}

/* Rows a block_colsum lane loads before adding them, and float4 weight loads a block_dense
 * lane issues together: a loop whose count is known only at run time waits for each load
 * before the next (one L2 round trip each); these fixed, predicated batches keep them in
 * flight together. */
#define COLSUM_ROWS 4
#define DENSE_LOADS 4

/* Column sums of @p R rows of @p C values (row stride C, C a multiple of 4, rows 4-element
 * aligned; @p rows2, if not NULL, added element-wise; either may be shared memory) by the whole
 * block in a fixed order: the threads split into lanes per 4-column group, lane l adds rows l,
 * l + lanes, ... (COLSUM_ROWS loads issued before their sums), then one thread per group adds
 * the lanes' sums in order. Calls out(column, sum) from that thread for each of its 4 columns.
 * @p red: 4 * KR_CUDA_PERSISTENT_THREADS floats of shared memory. Every thread of the block
 * must call it (it synchronises the block). */
template <bool CG, typename TR, typename T2, typename F>
__device__ void block_colsum(const TR *rows, const T2 *rows2, int R, int C, float *red, F out)
{
    const int tid = threadIdx.x, groups = C / 4;
    for (int g0 = 0; g0 < groups; g0 += NT) {
        const int gw = min(groups - g0, NT), lanes = NT / gw, lane = tid / gw;
        const int c = 4 * (g0 + tid % gw);
        float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        /* COLSUM_ROWS rows per pass, loads first, then added in row order */
        for (int r0 = lane; lane < lanes && r0 < R; r0 += COLSUM_ROWS * lanes) {
            float v[COLSUM_ROWS][4];
#pragma unroll
            for (int i = 0; i < COLSUM_ROWS; i++) {
                const int r = r0 + i * lanes;
                v[i][0] = v[i][1] = v[i][2] = v[i][3] = 0.0f;
                if (r < R) {
                    colsum_ld4<CG>(rows + (size_t)r * C + c, v[i]);
                    if (rows2) {
                        float w[4];
                        colsum_ld4<false>(rows2 + (size_t)r * C + c, w);
                        v[i][0] += w[0], v[i][1] += w[1], v[i][2] += w[2], v[i][3] += w[3];
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < COLSUM_ROWS; i++)
                if (r0 + i * lanes < R)
                    a[0] += v[i][0], a[1] += v[i][1], a[2] += v[i][2], a[3] += v[i][3];
        }
        reinterpret_cast<float4 *>(red)[tid] = make_float4(a[0], a[1], a[2], a[3]);
        __syncthreads();
        if (tid < gw) {
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int l = 0; l < lanes; l++)
                for (int k = 0; k < 4; k++)
                    sum[k] += red[4 * (l * gw + tid) + k];
            for (int k = 0; k < 4; k++)
                out(c + k, sum[k]);
        }
        __syncthreads();
    }
}

/* A dense layer on shared memory, by the whole block: out[n][j] = epilogue(b[j] + sum_k
 * W[j][k] in[n][k]) for @p batch items; L lanes (a power of two) share a dot product and add
 * their parts with shuffles in a fixed order. Synchronises the block at the end. */
__device__ __noinline__ void block_dense(const float *in, int K, float *out, int J, int batch, const float *W,
                            const float *b, float lo, float hi, int post)
{
    /* lanes per output from one item's sizes, so that the order is the same at every batch */
    int lg = 0; /* L = 1 << lg: shifts and masks, no divisions */
    while (lg < 5 && J << (lg + 1) <= NT && 8 << lg <= K)
        lg++;
    const int L = 1 << lg, tid = threadIdx.x, lane = tid & (L - 1);
    const unsigned first = (unsigned)((tid & 31) - lane);
    const unsigned mask = L == 32 ? 0xffffffffu : (((1u << L) - 1u) << first);
    kr_epilogue e;
    e.lo = lo, e.hi = hi, e.post = post, e.res = NULL;
    /* units u = n * J + j over the thread groups (group g: u = g, g + NT / L, ...), n and j
     * stepped rather than divided */
    for (int n = 0, j = tid >> lg;; j += NT >> lg) {
        while (j >= J)
            j -= J, n++;
        if (n >= batch)
            break;
        const int u = n * J + j;
        const float *wr = W + (size_t)j * K, *xr = in + n * K;
        const float bias = b ? b[j] : 0.0f; /* loaded with the weights, not after them */
        float a0 = 0.0f, a1 = 0.0f;
        if (K % 4 == 0) { /* rows of 16-byte multiples: vector weight loads, DENSE_LOADS in
                             * flight together, added in k order */
            for (int k0 = lane * 4; k0 < K; k0 += DENSE_LOADS * 4 * L) {
                float4 w[DENSE_LOADS];
#pragma unroll
                for (int i = 0; i < DENSE_LOADS; i++) {
                    const int k = k0 + i * 4 * L;
                    w[i] = k < K ? *reinterpret_cast<const float4 *>(wr + k)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                }
#pragma unroll
                for (int i = 0; i < DENSE_LOADS; i++) {
                    const int k = k0 + i * 4 * L;
                    if (k < K) {
                        a0 = fmaf(w[i].x, xr[k], a0);
                        a1 = fmaf(w[i].y, xr[k + 1], a1);
                        a0 = fmaf(w[i].z, xr[k + 2], a0);
                        a1 = fmaf(w[i].w, xr[k + 3], a1);
                    }
                }
            }
        } else {
            for (int k = lane; k < K; k += L)
                a0 = fmaf(wr[k], xr[k], a0);
        }
        float a = a0 + a1;
        for (int off = L >> 1; off > 0; off >>= 1)
            a += __shfl_xor_sync(mask, a, off);
        if (lane == 0)
            out[u] = kr_apply(e, a + bias);
    }
    __syncthreads();
}

/* The squeeze-and-excitation prologue (persistent.h): returns the last layer's output,
 * [batch][se_out[se_layers - 1]], in @p buf. The sums were written by other blocks in an
 * earlier step: read through L2. */
__device__ __noinline__ const float *se_prologue(const kr_cuda_step &s, float *buf, float *red)
{
    const int C = s.se_c;
    float *pooled = buf;
    const float inv = 1.0f / (float)s.se_pixels;
    for (int n = 0; n < s.batch; n++)
        block_colsum<true, float, float>(s.se_partial + (size_t)n * s.se_slices * C,
                                         (const float *)NULL, s.se_slices, C, red,
                                         [&](int c, float v) { pooled[n * C + c] = v * inv; });
    const float *in = pooled;
    float *out = pooled + s.batch * C;
    int K = C;
    for (int l = 0; l < s.se_layers; l++) {
        block_dense(in, K, out, s.se_out[l], s.batch, s.se_w[l], s.se_b[l], s.se_lo[l],
                    s.se_hi[l], s.se_post[l]);
        in = out;
        K = s.se_out[l];
        out += s.batch * K;
    }
    return in;
}

/* Input channels a convolution thread loads before using them (registers: CH floats; 32
 * spilled under the 128-register limit of two blocks per multiprocessor). */
#define CH 16

/* a[0..N) = input channels [c0, c0 + N) of one pixel, times the excitation @p scn and plus
 * the folded ADD's operand @p xap where set; 4-element loads, all issued before any use. */
template <typename T, int N, typename TX>
__device__ __forceinline__ void load_channels(const TX *xp, const T *xap, const float *scn,
                                              int c0, float *a)
{
#pragma unroll
    for (int j = 0; j < N; j += 4)
        kr_ldv<4>(xp + c0 + j, a + j);
    if (scn) {
#pragma unroll
        for (int j = 0; j < N; j++)
            a[j] *= scn[c0 + j];
    }
    if (xap) {
#pragma unroll
        for (int j = 0; j < N; j += 4) {
            float b[4];
            kr_ldv<4>(xap + c0 + j, b);
            a[j] += b[0], a[j + 1] += b[1], a[j + 2] += b[2], a[j + 3] += b[3];
        }
    }
}

/* acc[0..4) += xv * the 4 weights at @p w (one 16-byte load; ops/conv_2d.cuh, kr_fma4). */
__device__ __forceinline__ void fma4(float *acc, float xv, const float *w)
{
    kr_fma4(acc, xv, *reinterpret_cast<const float4 *>(w));
}

/* The folded residual of @p V outputs at @p idx, loaded before the sums (0 without one). */
template <typename T, int V>
__device__ __forceinline__ void early_res(const kr_cuda_step &s, unsigned idx, float *r)
{
    if (s.res) {
        kr_ldv<V>((const T *)s.res + idx, r);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            r[k] = 0.0f;
    }
}

/* A convolution's residual (early_res), which may have only res_c of the oc channels (a
 * channel PAD's input; V divides res_c): the others are 0. */
template <typename T, int V>
__device__ __forceinline__ void conv_res(const kr_cuda_step &s, unsigned idx, float *r)
{
    if (!s.res_c) {
        early_res<T, V>(s, idx, r);
        return;
    }
    const unsigned c = idx % (unsigned)s.oc;
    if (c < (unsigned)s.res_c) {
        kr_ldv<V>((const T *)s.res + idx / (unsigned)s.oc * (unsigned)s.res_c + c, r);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            r[k] = 0.0f;
    }
}

/* The biases of output channels co..co+3 of a group-4 unit (0 without a bias). */
__device__ __forceinline__ void g4_bias(const kr_cuda_step &s, int co, float *bz)
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        bz[j] = s.bias ? s.bias[co + j] : 0.0f;
}

/* Finishes group-4 unit @p u (the block's units from @p begin): bias @p bz, epilogue @p e,
 * residual @p r (if the step has one), the values as stored into @p tile (a pool tail's slice,
 * if not NULL), stored. */
template <typename T, bool PRE = false>
__device__ __forceinline__ void g4_finish(const kr_cuda_step &s, const kr_epilogue &e, unsigned u,
                                          unsigned begin, const float *acc, const float *bz,
                                          const float *r, float *tile)
{
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) { /* PRE: an ADD's activation after the residual (res_pre) */
        v[j] = kr_conv_out(acc[j], bz[j], r[j], PRE, [&] { return s.res != NULL; },
                           [&](float a) { return kr_apply(e, a); });
        if (tile)
            tile[(u - begin) * 4 + j] = kr_stored<T>(v[j]);
    }
    kr_stv<4>((T *)s.y + u * 4, v);
}

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
 * (BENCHMARKS.md). */
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

/* The step's work units, all items (a split convolution's unit: one output, `split` threads).
 * Not for the steps with loops of their own (CONV_PW, EXPAND_DW, POOL_FINAL, tails). */
__device__ __forceinline__ unsigned step_units(const kr_cuda_step &s)
{
    const unsigned pixels = (unsigned)s.batch * s.oh * s.ow;
    switch (s.kind) {
    case KR_STEP_CONV: return pixels * (s.group == 4 ? s.oc / 4 : s.oc);
    case KR_STEP_DEPTHWISE: return pixels * (s.oc / s.vec);
    case KR_STEP_TCONV: return pixels * s.oc;
    case KR_STEP_BINARY: return (unsigned)s.count * s.batch / s.vec;
    case KR_STEP_RESIZE: return pixels * (s.oc / s.vec);
    case KR_STEP_MAXPOOL: return pixels * (s.oc / s.vec);
    case KR_STEP_PAD: return pixels * s.oc;
    case KR_STEP_CONCAT: return (unsigned)s.count * s.batch;
    case KR_STEP_UNARY:
    case KR_STEP_COPY:
    case KR_STEP_TO_F16:
    case KR_STEP_TO_F32: return (unsigned)s.count * s.batch;
    default: return 0;
    }
}

/* Units [begin, end) of step @p s by this block; @p tile, @p sc: see step_conv. */
template <typename T>
__device__ void run_units(const kr_cuda_step &s, unsigned begin, unsigned end, float *tile,
                          const float *sc)
{
    switch (s.kind) {
    case KR_STEP_CONV: step_conv<T>(s, begin, end, tile, sc); break;
    case KR_STEP_DEPTHWISE:
        if (s.vec == 4 && s.kh == 3 && s.kw == 3)
            step_depthwise_v<T, 4, 3>(s, begin, end, tile);
        else if (s.vec == 4 && s.kh == 5 && s.kw == 5)
            step_depthwise_v<T, 4, 5>(s, begin, end, tile);
        else if (s.vec == 4)
            step_depthwise_v<T, 4, 0>(s, begin, end, tile);
        else
            step_depthwise_v<T, 1, 0>(s, begin, end, tile);
        break;
    case KR_STEP_TCONV: step_tconv<T>(s, begin, end); break;
    case KR_STEP_BINARY:
        if (s.vec == 4)
            step_binary_v<T, 4>(s, begin, end, sc);
        else
            step_binary_v<T, 1>(s, begin, end, sc);
        break;
    case KR_STEP_UNARY: step_unary<T>(s, begin, end, tile); break;
    case KR_STEP_RESIZE:
        if (s.vec == 4)
            step_resize_v<T, 4>(s, begin, end, sc);
        else
            step_resize_v<T, 1>(s, begin, end, sc);
        break;
    case KR_STEP_COPY: step_copy<T, T>(s, begin, end); break;
    case KR_STEP_MAXPOOL:
        if (s.vec == 4)
            step_maxpool_v<T, 4>(s, begin, end);
        else
            step_maxpool_v<T, 1>(s, begin, end);
        break;
    case KR_STEP_PAD: step_pad<T>(s, begin, end); break;
    case KR_STEP_CONCAT: step_concat<T>(s, begin, end); break;
    case KR_STEP_TO_F16: step_copy<float, __half>(s, begin, end); break;
    case KR_STEP_TO_F32: step_copy<__half, float>(s, begin, end); break;
    default: break;
    }
}

/* A step with a pool tail (persistent.h): (item, slice) after (item, slice), the slice's units
 * (none for POOL_PARTIAL), which also go to @p tile (shared memory: the slice's outputs as
 * stored, rows of tail_c), then its channel sums (+ the pool's addend from global memory; for
 * POOL_PARTIAL both from global memory). @p sc: as run_units. */
template <typename T>
__device__ __noinline__ void step_with_tail(const kr_cuda_step &s, float *red, float *tile,
                                            const float *sc)
{
    const bool pool = s.kind == KR_STEP_POOL_PARTIAL;
    const unsigned pairs = (unsigned)s.batch * s.tail_slices;
    const unsigned pixels = pool ? (unsigned)(s.ih * s.iw) : (unsigned)(s.oh * s.ow);
    const T *add = (const T *)s.tail_add;
    const int C = s.tail_c;
    for (unsigned p = blockIdx.x; p < pairs; p += gridDim.x) {
        const unsigned n = p / s.tail_slices, k = p % s.tail_slices;
        const unsigned p0 = k * (unsigned)s.tail_pixels;
        const int count = (int)min((unsigned)s.tail_pixels, pixels - p0);
        const size_t off = ((size_t)n * pixels + p0) * C;
        float *dst = s.tail_partial + (size_t)p * C;
        auto store = [&](int c, float v) { dst[c] = v; };
        const T *add_rows = add ? add + off : (const T *)NULL;
        if (pool) {
            block_colsum<false, T, T>((const T *)s.x + off, add_rows, count, C, red, store);
        } else {
            unsigned begin = (n * pixels + p0) * (unsigned)s.tail_units;
            run_units<T>(s, begin, begin + (unsigned)count * s.tail_units, tile, sc);
            __syncthreads(); /* the block's outputs in the tile, before it adds them */
            block_colsum<false, float, T>(tile, add_rows, count, C, red, store);
        }
    }
}

/* Copies step @p src into shared memory with the block's first threads (8-byte words). */
__device__ __forceinline__ void load_step(kr_cuda_step *dst, const kr_cuda_step *src)
{
    const int words = (int)(sizeof(kr_cuda_step) / 8);
    if ((int)threadIdx.x < words)
        reinterpret_cast<unsigned long long *>(dst)[threadIdx.x] =
            reinterpret_cast<const unsigned long long *>(src)[threadIdx.x];
}

template <typename T>
__global__ void __launch_bounds__(NT, 2)
    persistent_kernel(const kr_cuda_step *__restrict__ steps, int n, long long *clocks)
{
    static_assert(sizeof(kr_cuda_step) % 8 == 0 && sizeof(kr_cuda_step) / 8 <= NT,
                  "a step is copied by one 8-byte word per thread");
    /* steps i, i + 1 and i + 2 in shared memory: step i + 2 is fetched before barrier i, so no
     * step waits for its descriptor */
    __shared__ kr_cuda_step desc[3];
    __shared__ __align__(16) float red[4 * NT];
    __shared__ float se_buf[KR_CUDA_SE_FLOATS];
    __shared__ __align__(16) float tile[KR_CUDA_TILE_FLOATS];
    __shared__ __align__(16) float mid[KR_CUDA_MID_FLOATS];
    __shared__ float dww[KR_CUDA_DWW_FLOATS];
    static_assert(KR_CUDA_DWW_FLOATS <= NT, "an EXPAND_DW step loads one depthwise weight per thread");
    cg::grid_group grid = cg::this_grid();
    const int timing = clocks && blockIdx.x == 0 && threadIdx.x == 0;
    load_step(&desc[0], &steps[0]);
    if (n > 1)
        load_step(&desc[1], &steps[1]);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* after_kernel: wait for the kernel before to end and its writes to be visible (a no-op
     * without a programmatic dependence). No early trigger for the kernel after: its blocks
     * would wait on SMs this one's need (measured slower, BENCHMARKS.md) */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    __syncthreads();
    for (int i = 0; i < n; i++) {
        const kr_cuda_step &s = desc[i % 3];
        if (timing)
            clocks[4 * i] = clock64();
        const float *sc = s.se_layers ? se_prologue(s, se_buf, red) : NULL;
        if (s.kind == KR_STEP_POOL_FINAL) {
            step_pool_final<T>(s, red);
        } else if (s.kind == KR_STEP_EXPAND_DW) {
            step_expand_dw<T>(s, red, tile, mid, dww, sc);
        } else if (s.kind == KR_STEP_CONV_PW) { /* the planner: a 3x3 RGB stem only */
            if (s.x_f32)
                step_conv_pw<T, 3, 3, float>(s, mid);
            else
                step_conv_pw<T, 3, 3, T>(s, mid);
        } else if (s.tail) {
            step_with_tail<T>(s, red, tile, sc);
        } else {
            const unsigned units = step_units(s);
            run_units<T>(s, share_begin(units), share_end(units), (float *)NULL, sc);
        }
        if (clocks) { /* the profile: the first thread's own work, the block, the grid */
            if (timing)
                clocks[4 * i + 1] = clock64();
            __syncthreads();
            if (timing)
                clocks[4 * i + 2] = clock64();
        }
        if (i + 2 < n)
            load_step(&desc[(i + 2) % 3], &steps[i + 2]);
        if (i + 1 < n)
            grid.sync(); /* also a block barrier: the fetched descriptor is visible */
        if (timing)
            clocks[4 * i + 3] = clock64();
    }
}

extern "C" int kr_cuda_persistent_occupancy(int f16, int *cuda_error)
{
    int blocks = 0;
    cudaError_t e = f16 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                              &blocks, persistent_kernel<__half>, KR_CUDA_PERSISTENT_THREADS, 0)
                        : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                              &blocks, persistent_kernel<float>, KR_CUDA_PERSISTENT_THREADS, 0);
    *cuda_error = (int)e;
    return e == cudaSuccess ? blocks : 0;
}

extern "C" int kr_cuda_persistent_launch(const kr_cuda_step *steps, int n, int f16,
                                         unsigned blocks, long long *clocks, int after_kernel,
                                         void *stream)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(KR_CUDA_PERSISTENT_THREADS);
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    cfg.numAttrs = after_kernel ? 2 : 1;
    cudaError_t e = f16 ? cudaLaunchKernelEx(&cfg, persistent_kernel<__half>, steps, n, clocks)
                        : cudaLaunchKernelEx(&cfg, persistent_kernel<float>, steps, n, clocks);
    return (int)e;
}
