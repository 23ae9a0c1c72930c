/*
 * The neighbours of the CUDA kNN graph's small path (included by knn_small.cuh only, inside
 * knn.cu's anonymous namespace): no grid, no one-block kernel, three launches over the whole
 * device.
 *
 *  1. sweep_rank_kernel: every point's place in two orders, by counting the points below it
 *     (n^2 comparisons in tiles of kRankChunk points: a few microseconds at 5,000 points): the
 *     ids' order ((id, index): a permutation, equal ids side by side) and the x order of the
 *     finite points ((x, index), every point with a NaN or infinite coordinate after them);
 *  2. sweep_order_kernel: the sorted ids and their points (prev_kernel's look-ups, the
 *     candidates' keys), the points in x order, the counters and per-point counts cleared;
 *  3. sweep_knn_kernel: a warp per point walks the x order outward from the point, 16 places
 *     to the left and 16 to the right per step, and keeps its k nearest as a list spread over
 *     the lanes (lane r holds the r-th: (squared distance, index) as one 64-bit key, so that
 *     the order is cpu/knn.c's, ties by index; many points of a step, as in the first step,
 *     sorted over the warp and merged at once, a few inserted one by one). A side stops once a point's squared x
 *     distance alone exceeds the k-th squared distance found: x differences grow along the
 *     order, and the rounded square of a difference never exceeds the rounded distance that
 *     adds a square to it, so every point beyond is farther. Which points are offered does not
 *     change the list (the k smallest keys of all points win), so the result is the exact one
 *     of the CPU's grid search, whatever the set: clusters, ties, a point far away.
 *
 * A point whose walk is long (one far from all others: every point is about as far in x as
 * in distance) is handed to hard_kernel (knn_search.cuh) after kSweepSteps steps, or as soon as
 * its pace shows that it cannot end within them. Each step's points are loaded while the
 * step before is offered. k <= kSweepK; larger k take the large path.
 */
#ifndef KEYER_OVERLAY_CUDA_KNN_SWEEP_CUH
#define KEYER_OVERLAY_CUDA_KNN_SWEEP_CUH

constexpr int kSweepK = kLocalK;  /* neighbours at most (hard_kernel's limit; a lane each) */
constexpr int kSweepSteps = 16;   /* steps of 16 places per side before hard_kernel takes over */
constexpr int kRankChunk = 256;   /* points per tile of sweep_rank_kernel */
constexpr int kSweepThreads = 256; /* 8 warps: 8 points per block of sweep_knn_kernel */

/* A point's key in the x order: the float's bits made to sort as the numbers do (for finite
 * x; -0 and +0 are equal numbers, either order is fine), 0xffffffff for a point with a NaN or
 * infinite coordinate (after every finite one). */
__device__ __forceinline__ uint32_t x_key(float2 p)
{
    if (!finite2(p.x, p.y))
        return 0xffffffffu;
    const uint32_t u = __float_as_uint(p.x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* 1. rank2[i] += the points j of this block's tile with (ids[j], j) < (ids[i], i), and
 * rank2[n + i] += those with (x_key[j], j) < (x_key[i], i) (rank2 cleared before: a grid of
 * point tiles x chunks). Summed over the chunks: point i's place in each order. */
__global__ void __launch_bounds__(kRankChunk)
    sweep_rank_kernel(const uint32_t *__restrict__ ids, const float2 *__restrict__ xy, int n,
                      int *rank2)
{
    kr_pdl_wait();
    __shared__ uint2 s_key[kRankChunk]; /* (id, x key) of the tile's points */
    const int j0 = blockIdx.y * kRankChunk, j1 = min(j0 + kRankChunk, n);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (j0 + (int)threadIdx.x < j1)
        s_key[threadIdx.x] = make_uint2(ids[j0 + threadIdx.x], x_key(xy[j0 + threadIdx.x]));
    __syncthreads();
    if (i >= n)
        return;
    const uint32_t id = ids[i], xk = x_key(xy[i]);
    int c_id = 0, c_x = 0;
    if (j1 - j0 == kRankChunk && i >= j1) { /* a whole tile before i: equal keys count */
#pragma unroll 8
        for (int q = 0; q < kRankChunk; q++) {
            const uint2 o = s_key[q];
            c_id += o.x <= id;
            c_x += o.y <= xk;
        }
    } else if (j1 - j0 == kRankChunk && i < j0) { /* a whole tile after i: they do not */
#pragma unroll 8
        for (int q = 0; q < kRankChunk; q++) {
            const uint2 o = s_key[q];
            c_id += o.x < id;
            c_x += o.y < xk;
        }
    } else {
        for (int j = j0; j < j1; j++) {
            const uint2 o = s_key[j - j0];
            c_id += o.x < id || (o.x == id && j < i);
            c_x += o.y < xk || (o.y == xk && j < i);
        }
    }
    if (c_id)
        atomicAdd(&rank2[i], c_id);
    if (c_x)
        atomicAdd(&rank2[n + i], c_x);
}

/* 2. The sorted ids and their points (at rank2[i]), rank[i] (the id's place), the points in x
 * order (xs, xs_idx at rank2[n + i]); deg[] and the frame's counters cleared. */
__global__ void sweep_order_kernel(const uint32_t *__restrict__ ids,
                                   const float2 *__restrict__ xy, int n,
                                   const int *__restrict__ rank2, uint32_t *__restrict__ sorted_ids,
                                   int *__restrict__ sorted_idx, int *__restrict__ rank,
                                   float2 *__restrict__ xs, int *__restrict__ xs_idx,
                                   int *__restrict__ deg, int *counters)
{
    kr_pdl_wait();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        counters[0] = 0; /* a repeated id (bit 0), an internal limit exceeded (bit 1) */
        counters[1] = 0; /* edges taken */
        counters[2] = 0;
    }
    if (i >= n)
        return;
    const int r = rank2[i], rx = rank2[n + i];
    sorted_ids[r] = ids[i];
    sorted_idx[r] = i;
    rank[i] = r;
    xs[rx] = xy[i];
    xs_idx[rx] = i;
    deg[i] = 0;
}

/* 3. The k nearest neighbours of every point (a warp each; see the file's comment) into knn_d2
 * and knn_j (nearest first), n_knn and kth; the point's candidate-drop flags cleared; a
 * repeated id (the sorted ids side by side) into counters[0]. A point whose walk takes more
 * than kSweepSteps steps (one far from the others, or a narrow max_dy) is left to hard_kernel
 * (hard[], counters[2]), which compares it with every point. k <= kSweepK. */
__global__ void __launch_bounds__(kSweepThreads)
    sweep_knn_kernel(const float2 *__restrict__ xy, const float2 *__restrict__ xs,
                     const int *__restrict__ xs_idx, const int *__restrict__ rank2,
                     const uint32_t *__restrict__ sorted_ids, const int *__restrict__ rank, int n,
                     int k, float max_dy, int *counters, float *__restrict__ knn_d2,
                     int *__restrict__ knn_j, int *__restrict__ n_knn, float *__restrict__ kth,
                     unsigned char *__restrict__ drop, int *__restrict__ hard)
{
    kr_pdl_wait();
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int i = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);
    if (i >= n)
        return; /* the whole warp */
    if (lane < k)
        drop[(size_t)i * k + lane] = 0;
    if (lane == 0) {
        const int r = rank[i];
        if (r > 0 && sorted_ids[r - 1] == sorted_ids[r])
            atomicOr(&counters[0], 1);
    }
    const float2 pi = xy[i];
    uint64_t mine = ~0ull; /* lane r < k: the r-th nearest as (d2 bits << 32 | index) */
    if (finite2(pi.x, pi.y)) {
        const int p = rank2[n + i];
        const bool right = lane >= 16;
        const int off = lane & 15;
        bool done_l = p == 0, done_r = p + 1 >= n;
        /* this step's place of the lane, and its point loaded one step ahead */
        int q = right ? p + 1 + off : p - 1 - off;
        bool in = right ? q < n : q >= 0;
        float2 pj = make_float2(0.f, 0.f);
        int j = 0;
        if (in) {
            pj = xs[q];
            j = xs_idx[q];
        }
        for (int step = 0;; step++) {
            const bool side_done = right ? done_r : done_l;
            const int qn = right ? q + 16 : q - 16;
            const bool in_next = !side_done && (right ? qn < n : qn >= 0);
            float2 pn = make_float2(0.f, 0.f);
            int jn = 0;
            if (in_next) { /* the next step's point, in flight while this one is offered */
                pn = xs[qn];
                jn = xs_idx[qn];
            }
            /* the non-finite points end the x order */
            const bool live = in && !side_done && finite2(pj.x, pj.y);
            float dx2 = INFINITY, d2 = INFINITY;
            if (live) {
                const float dx = __fsub_rn(pj.x, pi.x), dy = __fsub_rn(pj.y, pi.y);
                dx2 = __fmul_rn(dx, dx);
                if (!(max_dy > 0 && fabsf(dy) > max_dy))
                    d2 = __fadd_rn(dx2, __fmul_rn(dy, dy));
            }
            /* offered: a finite squared distance whose key is below the k-th's */
            const uint64_t key = ((uint64_t)__float_as_uint(d2) << 32) | (uint32_t)j;
            mine = warp_offer(mine, key, live && d2 < INFINITY, k);
            const uint64_t last = __shfl_sync(full, mine, k - 1);
            const float thr = last == ~0ull ? INFINITY : __uint_as_float((uint32_t)(last >> 32));
            /* A side ends at its end, at a non-finite point, or past the k-th distance. */
            const unsigned stops = __ballot_sync(full, !live || dx2 > thr);
            if (stops & 0x0000ffffu)
                done_l = true;
            if (stops & 0xffff0000u)
                done_r = true;
            if (done_l && done_r)
                break;
            /* A walk that cannot end within kSweepSteps steps goes to hard_kernel: at the
             * last step, or earlier when a side's pace so far (the x distance its farthest
             * point has reached in step + 1 steps) needs more than twice the steps left to
             * pass the k-th distance (a point far from the others, such as the mixed set's
             * outlier). Only the time depends on this choice, never the neighbours. */
            bool give_up = step + 1 == kSweepSteps;
            if (!give_up && step >= 2 && thr < INFINITY) {
                const float far_l = __shfl_sync(full, dx2, 15), far_r = __shfl_sync(full, dx2, 31);
                const float reach = sqrtf(thr), left = (float)(kSweepSteps - 1 - step);
                const float wl = sqrtf(far_l), wr = sqrtf(far_r);
                give_up = (!done_l && wl > 0 && (reach - wl) * (float)(step + 1) > 2 * left * wl) ||
                          (!done_r && wr > 0 && (reach - wr) * (float)(step + 1) > 2 * left * wr);
            }
            if (give_up) {
                if (lane == 0)
                    hard[atomicAdd(&counters[2], 1)] = i;
                return;
            }
            q = qn;
            in = in_next;
            pj = pn;
            j = jn;
        }
    }
    warp_put_list(mine, i, k, knn_d2, knn_j, n_knn, kth);
}

#endif /* KEYER_OVERLAY_CUDA_KNN_SWEEP_CUH */
