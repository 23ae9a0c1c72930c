/*
 * The k nearest neighbours of every point, for the CUDA kNN graph (included by knn.cu only,
 * inside its anonymous namespace, after the helpers and the grid kernels):
 *
 *  - knn_kernel: one thread per point searches rings of cells outward exactly as cpu/knn.c
 *    does (neighbours ordered by (squared distance, index); IEEE round-to-nearest operations,
 *    no fused multiply-add, so every distance is the CPU's float);
 *  - hard_kernel: a point outside the grid's extent (one of the few far points the extent
 *    was narrowed past) or past kHardRings rings would keep one thread walking cell after cell
 *    (the mixed set's far point: every point, one after another); a block compares it with
 *    every point instead and merges its threads' lists: the same k smallest (d2, index).
 */
#ifndef KEYER_OVERLAY_CUDA_KNN_SEARCH_CUH
#define KEYER_OVERLAY_CUDA_KNN_SEARCH_CUH

__device__ __forceinline__ int scan_cell(const float2 *__restrict__ xy,
                                         const int *__restrict__ cell_start,
                                         const int *__restrict__ cell_pts, int i, float xi,
                                         float yi, float max_dy, int c, int n_best, int k,
                                         float *best, int *best_j)
{
    const int q1 = cell_start[c + 1];
    for (int q = cell_start[c]; q < q1; q++) {
        const int j = cell_pts[q];
        const float2 pj = xy[j];
        const float dy = __fsub_rn(pj.y, yi);
        if (j == i || (max_dy > 0 && fabsf(dy) > max_dy))
            continue;
        n_best = offer(best, best_j, n_best, k, dist2_rn(xi, yi, pj.x, pj.y), j);
    }
    return n_best;
}

/* The k nearest neighbours of the finite point i (cpu/knn.c's search, line for line); -1 when
 * more than @p max_rings rings of cells would be searched (a point far from the others: it
 * is left to hard_kernel, which compares it with every point). */
__device__ int search(const float2 *__restrict__ xy, const int *__restrict__ cell_start,
                      const int *__restrict__ cell_pts, const GridParams &gr, int cell, int i,
                      int k, float max_dy, float *best, int *best_j, int max_rings)
{
    const int ci = cell % gr.gx, cj = cell / gr.gx;
    const float xi = xy[i].x, yi = xy[i].y;
    const double x = xi, y = yi;
    const double eps = 1e-7 * (fabs(gr.x0) + fabs(gr.y0) + (gr.gx + gr.gy + 2) * gr.s);
    int rlo = 0, rhi = gr.gy - 1;
    if (max_dy > 0) {
        const double a = floor((y - max_dy - eps - gr.y0) * gr.inv);
        const double b = floor((y + max_dy + eps - gr.y0) * gr.inv);
        rlo = a < 0 ? 0 : a > rhi ? rhi : (int)a;
        rhi = b < 0 ? 0 : b > rhi ? rhi : (int)b;
    }
    int n_best = 0;
    for (int r = 0;; r++) {
        if (r > max_rings)
            return -1;
        const int ylo = max(cj - r, rlo), yhi = min(cj + r, rhi);
        const int xlo = max(ci - r, 0), xhi = min(ci + r, gr.gx - 1);
        for (int cy = ylo; cy <= yhi; cy++) {
            if (cy == cj - r || cy == cj + r) {
                for (int cx = xlo; cx <= xhi; cx++)
                    n_best = scan_cell(xy, cell_start, cell_pts, i, xi, yi, max_dy,
                                       cy * gr.gx + cx, n_best, k, best, best_j);
                continue;
            }
            if (ci - r >= 0)
                n_best = scan_cell(xy, cell_start, cell_pts, i, xi, yi, max_dy,
                                   cy * gr.gx + ci - r, n_best, k, best, best_j);
            if (ci + r < gr.gx)
                n_best = scan_cell(xy, cell_start, cell_pts, i, xi, yi, max_dy,
                                   cy * gr.gx + ci + r, n_best, k, best, best_j);
        }
        double lb = INFINITY;
        if (ci - r > 0)
            lb = fmin(lb, x - (gr.x0 + (ci - r) * gr.s));
        if (ci + r < gr.gx - 1)
            lb = fmin(lb, gr.x0 + (ci + r + 1) * gr.s - x);
        if (cj - r > rlo)
            lb = fmin(lb, y - (gr.y0 + (cj - r) * gr.s));
        if (cj + r < rhi)
            lb = fmin(lb, gr.y0 + (cj + r + 1) * gr.s - y);
        if (lb == INFINITY)
            return n_best;
        lb -= eps;
        if (n_best == k && lb > 0 && lb * lb * (1 - 1e-5) > (double)best[k - 1])
            return n_best;
    }
}

/* Neighbours and kth of every point; clears the point's candidate-drop flags. Also, at
 * position i of the sorted ids: the rank of that point's id (rank[point] = i) and a repeated
 * id (the sorted ids side by side) into counters[0]. */
__global__ void knn_kernel(const float2 *__restrict__ xy, int n, const GridParams *grp,
                           const int *__restrict__ pt_cell, const int *__restrict__ cell_start,
                           const int *__restrict__ cell_pts, int k, float max_dy,
                           const uint32_t *__restrict__ sorted_ids,
                           const int *__restrict__ sorted_idx, int *__restrict__ rank,
                           int *counters, float *__restrict__ knn_d2, int *__restrict__ knn_j,
                           int *__restrict__ n_knn, float *__restrict__ kth,
                           unsigned char *__restrict__ drop, int *__restrict__ hard)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    rank[sorted_idx[i]] = i;
    if (i > 0 && sorted_ids[i] == sorted_ids[i - 1])
        atomicOr(&counters[0], 1);
    const GridParams gr = *grp;
    float *gd = knn_d2 + (size_t)i * k;
    int *gj = knn_j + (size_t)i * k;
    for (int r = 0; r < k; r++)
        drop[(size_t)i * k + r] = 0;
    int found = 0;
    if (pt_cell[i] >= 0) {
        if (k <= kLocalK) {
            /* A point outside the grid's extent (one of the few far ones robust_extent cut off)
             * would search ring after ring: it goes to hard_kernel at once. */
            const double fx = ((double)xy[i].x - gr.x0) * gr.inv;
            const double fy = ((double)xy[i].y - gr.y0) * gr.inv;
            float best[kLocalK];
            int best_j[kLocalK];
            found = fx < 0 || fx >= gr.gx || fy < 0 || fy >= gr.gy
                        ? -1
                        : search(xy, cell_start, cell_pts, gr, pt_cell[i], i, k, max_dy, best,
                                 best_j, kHardRings);
            if (found < 0) { /* hard_kernel's */
                hard[atomicAdd(&counters[2], 1)] = i;
                return;
            }
            for (int r = 0; r < found; r++) {
                gd[r] = best[r];
                gj[r] = best_j[r];
            }
        } else {
            found = search(xy, cell_start, cell_pts, gr, pt_cell[i], i, k, max_dy, gd, gj,
                           0x7fffffff);
        }
    }
    n_knn[i] = found;
    kth[i] = found > 0 ? __fsqrt_rn(gd[found - 1]) : INFINITY;
}

/* The 32 lanes' keys sorted over the warp, ascending by lane (a bitonic sort: 15 exchanges).
 * All 32 lanes call it. */
__device__ __forceinline__ uint64_t warp_sort32(uint64_t v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            const uint64_t o = __shfl_xor_sync(0xffffffffu, v, stride);
            /* ascending where lane & size is 0 (all of the last merge), the lower lane of a
             * pair keeping the smaller there */
            const bool keep_min = ((lane & stride) == 0) == ((lane & size) == 0);
            v = keep_min ? (o < v ? o : v) : (o < v ? v : o);
        }
    return v;
}

/* A warp's list of the k nearest (k <= kLocalK): lane r < k holds the r-th smallest key
 * (squared distance bits << 32 | index: the order (d2, index), d2 >= 0), ~0 where empty (and
 * on every lane from k on). Offers the key of every lane with @p ok set (keys not in the list
 * already) and returns this lane's new entry: the k smallest of the list and the offered keys
 * below its k-th. Up to four offers are inserted one by one; more (a walk's first step, a
 * dense cluster) are sorted over the warp and merged with the list at once. All 32 lanes call
 * it. */
__device__ __forceinline__ uint64_t warp_offer(uint64_t mine, uint64_t key, bool ok, int k)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const uint64_t kth_key = __shfl_sync(full, mine, k - 1);
    const bool offered = ok && key < kth_key;
    unsigned offers = __ballot_sync(full, offered);
    if (__popc(offers) > 4) {
        /* the offered keys sorted; the list (lanes 0-15, ascending) and the 16 smallest of
         * them in descending order (lanes 16-31) make a bitonic sequence, which a bitonic
         * merge sorts: the first k lanes are then the k smallest of both */
        const uint64_t v = warp_sort32(offered ? key : ~0ull);
        const uint64_t rev = __shfl_sync(full, v, 31 - lane);
        uint64_t w = lane < 16 ? mine : rev;
#pragma unroll
        for (int stride = 16; stride > 0; stride >>= 1) {
            const uint64_t o = __shfl_xor_sync(full, w, stride);
            w = (lane & stride) == 0 ? (o < w ? o : w) : (o < w ? w : o);
        }
        return lane < k ? w : ~0ull;
    }
    while (offers) {
        const int src = __ffs(offers) - 1;
        offers &= offers - 1;
        const uint64_t x = __shfl_sync(full, key, src);
        const unsigned above = __ballot_sync(full, lane < k && x < mine);
        const uint64_t up = __shfl_up_sync(full, mine, 1);
        if (above) { /* from the first entry above x, each moves up one place */
            const int at = __ffs(above) - 1;
            if (lane > at && lane < k)
                mine = up;
            else if (lane == at)
                mine = x;
        }
    }
    return mine;
}

/* A warp's list (warp_offer) written out as point i's neighbours: knn_d2, knn_j (nearest
 * first), n_knn and kth. All 32 lanes call it. */
__device__ __forceinline__ void warp_put_list(uint64_t mine, int i, int k,
                                              float *__restrict__ knn_d2, int *__restrict__ knn_j,
                                              int *__restrict__ n_knn, float *__restrict__ kth)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int found = __popc(__ballot_sync(full, lane < k && mine != ~0ull));
    const uint64_t last = __shfl_sync(full, mine, found > 0 ? found - 1 : 0);
    if (lane < found) {
        knn_d2[(size_t)i * k + lane] = __uint_as_float((uint32_t)(mine >> 32));
        knn_j[(size_t)i * k + lane] = (int)(uint32_t)mine;
    }
    if (lane == 0) {
        n_knn[i] = found;
        kth[i] = found > 0 ? __fsqrt_rn(__uint_as_float((uint32_t)(last >> 32))) : INFINITY;
    }
}

/* The points knn_kernel or sweep_knn_kernel left (hard[0..counters[2])), a block each in
 * turn: every warp keeps the k smallest (d2, index) of a stride of all n points (scan_cell's
 * rules: the same set the grid search would find) as a warp_offer list, four loads in flight;
 * then warp 0 offers the other warps' lists to its own. k <= kLocalK. */
constexpr int kHardThreads = 1024;
__global__ void __launch_bounds__(kHardThreads)
    hard_kernel(const float2 *__restrict__ xy, int n, int k, float max_dy,
                const int *__restrict__ hard, const int *counters, float *__restrict__ knn_d2,
                int *__restrict__ knn_j, int *__restrict__ n_knn, float *__restrict__ kth)
{
    kr_pdl_wait();
    constexpr int kWarps = kHardThreads / 32;
    __shared__ uint64_t s_key[kWarps * kLocalK];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, hards = counters[2];
    for (int h = blockIdx.x; h < hards; h += gridDim.x) {
        const int i = hard[h];
        const float xi = xy[i].x, yi = xy[i].y;
        uint64_t mine = ~0ull;
#pragma unroll 4
        for (int j0 = warp * 32; j0 < n; j0 += kHardThreads) { /* j0: the same in the warp */
            const int j = j0 + lane;
            bool ok = false;
            uint64_t key = 0;
            if (j < n && j != i) {
                const float2 pj = xy[j];
                const float dy = __fsub_rn(pj.y, yi);
                if (!(max_dy > 0 && fabsf(dy) > max_dy)) {
                    const float d2 = dist2_rn(xi, yi, pj.x, pj.y);
                    ok = d2 < INFINITY;
                    key = ((uint64_t)__float_as_uint(d2) << 32) | (uint32_t)j;
                }
            }
            mine = warp_offer(mine, key, ok, k);
        }
        if (lane < k)
            s_key[warp * kLocalK + lane] = mine;
        __syncthreads();
        if (warp == 0) {
            /* the other warps' entries f = w k + r (w >= 1, r < k), 32 at a time */
            for (int f0 = k; f0 < kWarps * k; f0 += 32) {
                const int f = f0 + lane;
                const uint64_t key = f < kWarps * k ? s_key[(f / k) * kLocalK + f % k] : ~0ull;
                mine = warp_offer(mine, key, key != ~0ull, k);
            }
            warp_put_list(mine, i, k, knn_d2, knn_j, n_knn, kth);
        }
        __syncthreads(); /* s_key is read before the next point's lists */
    }
}

#endif /* KEYER_OVERLAY_CUDA_KNN_SEARCH_CUH */
