/*
 * Pooling per output unit, as the schedules compute it.
 *
 * Window pools (AVERAGE_POOL_2D, MAX_POOL_2D; src/nn/reference/pool_2d.c): kr_pool_window, the
 * per-node kernel's (pool_2d.cu) and the persistent MAXPOOL step's: the taps (dilated by dh, dw)
 * inside the input only (padding is never a candidate), in (ky, kx) order; the maximum from
 * -FLT_MAX, the average as the sum from 0 divided by the count of taps inside the input, or
 * with count_include_pad (ONNX; per-node only) by the count of taps inside the padded extent.
 *
 * Global average pools (a window over the whole input, or MEAN over H and W) sum each channel
 * over every pixel of an item, plus a folded ADD's other operand per pixel where there is one;
 * each schedule splits the pixels its own way, so the orders differ:
 *  - per node, f32 or a channel count that is no multiple of 8 (pool_2d.cu,
 *    global_pool_kernel): 32 rows of threads, row y adding pixels y, y + 32, ... in order,
 *    then the 32 rows' sums in row order; the mean as sum / pixels;
 *  - per node, f16 over a multiple of 8 channels (pool_2d.cu, global_pool_h8): R = T / (ch /
 *    8) rows (integer division; T = 512, 256 or 128 threads from the item's pixels and
 *    channels, global_pool_h8_threads), row r adding pixels r, r + R, r + 2R, ... in order,
 *    then the rows' sums pairwise: with n rows left and h = ceil(n / 2), row j += row j + h for
 *    j < n - h, until one is left; the mean as sum / pixels;
 *  - persistent (pool tails and POOL_FINAL, block_colsum in persistent/squeeze.cuh): per slice
 *    of whole pixels, lanes adding rows l, l + lanes, ..., the lanes' sums in order, then the
 *    slices' sums in order; the mean as sum * (1 / pixels);
 *  - cluster segment (row_pool and cluster_pool in segment/): per image row, lanes over the
 *    row's pixels, then the rows' sums in row order; the mean as sum * (1 / pixels).
 * Within a schedule the split comes from one item's sizes, so an item's result is the same at
 * every batch size.
 */
#ifndef KEYER_NN_CUDA_OPS_POOL_2D_CUH
#define KEYER_NN_CUDA_OPS_POOL_2D_CUH

#include <float.h>

#include "nn/cuda/common.cuh"

/* The window of pooled output (oy, ox) of item @p b, channels [c, c + V): input x [b][ih][iw]
 * [ic] with the window of @p s (fields kh, kw, sh, sw, dh, dw, pt, pl, ih, iw, ic: the per-node
 * shape or a persistent step; dh, dw >= 1). MAX: acc[k] the largest tap; else acc[k] their sum and *count the taps
 * inside. */
template <typename T, int V, bool MAX, typename I, typename S>
__device__ __forceinline__ void kr_pool_window(const T *x, const S &s, I b, int oy, int ox, int c,
                                               float *acc, int *count)
{
#pragma unroll
    for (int k = 0; k < V; k++)
        acc[k] = MAX ? -FLT_MAX : 0.0f;
    int n = 0;
    kr_window_taps(s, oy, ox, [&](int, int, int iy, int ix) {
        float v[V];
        kr_ldv<V>(x + ((b * s.ih + iy) * s.iw + ix) * s.ic + c, v);
#pragma unroll
        for (int k = 0; k < V; k++)
            acc[k] = MAX ? fmaxf(acc[k], v[k]) : acc[k] + v[k];
        n++;
    });
    *count = n;
}

#endif
