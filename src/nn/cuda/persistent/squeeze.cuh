/*
 * The persistent kernel's squeeze-and-excitation pieces: the block's column sums in a fixed order
 * (a pool tail's slice sums, a global pool's final sums, a prologue's means: the persistent
 * order of ops/pool_2d.cuh), the dense layers on shared memory, and the prologue that computes
 * an excitation from a pool tail's sums.
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_SQUEEZE_CUH
#define KEYER_NN_CUDA_PERSISTENT_SQUEEZE_CUH

#include "nn/cuda/persistent/step_common.cuh"

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
static __device__ __noinline__ void block_dense(const float *in, int K, float *out, int J,
                                                int batch, const float *W, const float *b,
                                                float lo, float hi, int post)
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
 * earlier step: read through L2. Only the items for which @p needed(n) holds (those the block
 * works on in this step) get their means; the others' are 0 and their excitation unused
 * (each item's means are a block_colsum, in sequence: two block barriers and an L2 round trip
 * each, 16 of them per block at batch 16 before). An item's values are the same whichever
 * items a block computes. */
template <typename F>
__device__ __noinline__ const float *se_prologue(const kr_cuda_step &s, float *buf, float *red,
                                                 F needed)
{
    const int C = s.se_c;
    float *pooled = buf;
    const float inv = 1.0f / (float)s.se_pixels;
    for (int n = 0; n < s.batch; n++) {
        if (!needed(n)) {
            for (int c = threadIdx.x; c < C; c += NT)
                pooled[n * C + c] = 0.0f;
            continue;
        }
        block_colsum<true, float, float>(s.se_partial + (size_t)n * s.se_slices * C,
                                         (const float *)NULL, s.se_slices, C, red,
                                         [&](int c, float v) { pooled[n * C + c] = v * inv; });
    }
    __syncthreads(); /* the zeros too, before the dense layers read them */
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

#endif
