/*
 * CUDA kNN graph (knn_backend.h): the graph of cpu/knn.c, edge for edge and in the same order
 * (the rules are in include/keyer/overlay.h), computed on the device:
 *
 *  1. grid: the extent of the finite points (one block: bounding box, narrowed by histograms
 *     past a few far points), a cell per point, counts, a prefix sum and a scatter (a counting
 *     sort of the points by cell);
 *  2. knn_kernel (knn_search.cuh): one thread per point searches rings of cells outward as
 *     the CPU does (neighbours ordered by (squared distance, index); IEEE round-to-nearest
 *     operations, no fused multiply-add, so every distance is the CPU's float); the few far
 *     points by hard_kernel, a block each;
 *  3. the previous frame's edges: ids found by binary search over the sorted ids (after a try
 *     at the index each had before), each edge kept or dropped by the hysteresis bound;
 *  4. candidates: one per joined pair, sorted by (length, a, b) with two stable radix sorts
 *     (by (a, b) as the ids' ranks in sorted order, 2 x 16 bits for 50,000 points, then by the
 *     length's bits);
 *  5. the degree cap. The CPU runs a sequential greedy over the list L = [kept previous edges
 *     in their order] ++ [candidates in their order] (a candidate that is also a previous
 *     edge is never added: the earlier copy either joined the pair or found a degree full).
 *     Edge r of L is taken iff, at both ends, fewer than max_degree edges of L before r were
 *     taken. The device decides this exactly by local rounds: every point walks its incident
 *     edges in L order (a stable sort by point), counts the taken ones of its decided prefix,
 *     and posts "my side agrees" on each following edge for as long as even all undecided
 *     edges before it being taken would leave room (or refuses the first undecided one once
 *     the count is full); an edge is taken when both ends agree. The first undecided edge of
 *     L is decided in every round, so the rounds end; a few grid-wide rounds, then one block
 *     loops until all are decided;
 *  6. the taken edges, in L order, compacted and copied to the host.
 *
 * That is the large path (about 40 launches). Up to 8,192 points and k <= 16 an update takes
 * the small path of knn_small.cuh instead: no grid (the neighbours by walking the points in x
 * order, knn_sweep.cuh), no CUB sort, two kernels of one block in shared memory. Either way
 * the points go in with one copy (after a small header: the number of previous edges, which
 * the small path's kernels read on the device) and the counters and edges come back with one
 * copy after one synchronisation. An update of the small path with as many points as the
 * update before is the replay of a CUDA graph (captured once per size and parity of the edge
 * buffers): one launch instead of about fifteen.
 *
 * Every buffer is allocated at create for max_points points; an update allocates nothing.
 * Layout: device helpers, kernels, the state, the small path (knn_small.cuh), the large path's
 * launcher, the entry points.
 */
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <new>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/cuda/pdl.cuh"
#include "overlay/knn_backend.h"
#include "overlay/cuda/knn_cap.cuh"
#include "overlay/cuda/knn_chain.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kBoxThreads = 1024;
constexpr int kLocalK = 16;    /* neighbour lists of k <= 16 are kept in thread-local arrays */
constexpr int kGridRounds = 6; /* grid-wide rounds of the degree cap before one block finishes */
constexpr int kBins = 1024;    /* histogram bins of the grid's extent (cpu/knn.c's KNN_BINS) */
constexpr int kHardRings = 32; /* rings a thread searches before hard_kernel takes the point */
constexpr int kHardBlocks = 128;
constexpr size_t kInBytes = 2 * sizeof(float) + sizeof(uint32_t); /* a point in: xy, id */
constexpr size_t kHdrBytes = 16; /* before the points: the number of previous edges (an int) */
constexpr int kOutHdr = 2; /* edges' room before the edges out: the counters (4 ints) */


struct GridParams {
    double x0, y0, s, inv;
    int gx, gy;
};

/* ---- device helpers ------------------------------------------------------------------- */

/* The CPU's float arithmetic: one rounding per operation, never fused. */
__device__ __forceinline__ float dist2_rn(float xi, float yi, float xj, float yj)
{
    const float dx = __fsub_rn(xj, xi), dy = __fsub_rn(yj, yi);
    return __fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy));
}

__device__ __forceinline__ bool finite2(float x, float y) { return isfinite(x) && isfinite(y); }

/* Offers j (squared distance d2) to a list ordered by (d2, index); returns the new count. */
__device__ __forceinline__ int offer(float *best, int *best_j, int n_best, int k, float d2, int j)
{
    if (!(d2 < INFINITY))
        return n_best;
    if (n_best == k && !(d2 < best[k - 1] || (d2 == best[k - 1] && j < best_j[k - 1])))
        return n_best;
    int at = n_best < k ? n_best++ : k - 1;
    while (at > 0 && (best[at - 1] > d2 || (best[at - 1] == d2 && best_j[at - 1] > j))) {
        best[at] = best[at - 1];
        best_j[at] = best_j[at - 1];
        at--;
    }
    best[at] = d2;
    best_j[at] = j;
    return n_best;
}

/* Index of id in the sorted ids (-1: absent); @p hint first. */
__device__ __forceinline__ int index_of(const uint32_t *__restrict__ ids,
                                        const uint32_t *__restrict__ sorted_ids,
                                        const int *__restrict__ sorted_idx, int n, uint32_t id,
                                        int hint)
{
    if (hint >= 0 && hint < n && ids[hint] == id)
        return hint;
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (sorted_ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted_ids[lo] == id ? sorted_idx[lo] : -1;
}

/* Whether point i's neighbour list holds j. */
__device__ __forceinline__ bool has_neighbour(const int *__restrict__ knn_j,
                                              const int *__restrict__ n_knn, int k, int i, int j)
{
    for (int r = 0; r < n_knn[i]; r++)
        if (knn_j[(size_t)i * k + r] == j)
            return true;
    return false;
}

/* Whether slot r of point i (its r-th neighbour j) is where the pair's candidate comes from:
 * from i, unless j also lists i and j has the smaller id (cpu/knn.c's rule). */
__device__ __forceinline__ bool emits(const uint32_t *__restrict__ ids,
                                      const int *__restrict__ knn_j,
                                      const int *__restrict__ n_knn, int k, int i, int j)
{
    return !(ids[j] < ids[i] && has_neighbour(knn_j, n_knn, k, j, i));
}

/* ---- kernels -------------------------------------------------------------------------- */

/* Bounding box of the finite points, narrowed to where most of them are, and the grid
 * (cpu/knn.c's grid_build and robust_extent), computed by one block of kBoxThreads threads
 * (all of them call it). Thread 0 writes the grid to *out and, when not NULL, *s_out (shared:
 * every thread may read it after a __syncthreads), and clears the frame's counters. */
__device__ void grid_block(const float2 *__restrict__ xy, int n, int max_cells, GridParams *out,
                           int *counters, GridParams *s_out)
{
    __shared__ double s_lo[2][kBoxThreads / 32], s_hi[2][kBoxThreads / 32];
    __shared__ int s_m[kBoxThreads / 32];
    __shared__ double s_ext[4]; /* lo x, hi x, lo y, hi y */
    __shared__ int s_total, s_stop;
    __shared__ int hist[kBins];
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    int m = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float2 p = xy[i];
        if (!finite2(p.x, p.y))
            continue;
        m++;
        lo[0] = fmin(lo[0], (double)p.x);
        hi[0] = fmax(hi[0], (double)p.x);
        lo[1] = fmin(lo[1], (double)p.y);
        hi[1] = fmax(hi[1], (double)p.y);
    }
    for (int o = 16; o > 0; o >>= 1) {
        for (int c = 0; c < 2; c++) {
            lo[c] = fmin(lo[c], __shfl_down_sync(0xffffffffu, lo[c], o));
            hi[c] = fmax(hi[c], __shfl_down_sync(0xffffffffu, hi[c], o));
        }
        m += __shfl_down_sync(0xffffffffu, m, o);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        for (int c = 0; c < 2; c++) {
            s_lo[c][warp] = lo[c];
            s_hi[c][warp] = hi[c];
        }
        s_m[warp] = m;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) {
            for (int c = 0; c < 2; c++) {
                lo[c] = fmin(lo[c], s_lo[c][w]);
                hi[c] = fmax(hi[c], s_hi[c][w]);
            }
            m += s_m[w];
        }
        s_ext[0] = lo[0];
        s_ext[1] = hi[0];
        s_ext[2] = lo[1];
        s_ext[3] = hi[1];
        s_total = m;
    }
    __syncthreads();
    /* The extent of each axis narrowed twice by a histogram (robust_extent). */
    for (int axis = 0; axis < 2 && s_total > 0; axis++)
        for (int pass = 0; pass < 2; pass++) {
            const double elo = s_ext[2 * axis], ehi = s_ext[2 * axis + 1];
            if (!(ehi > elo))
                break;
            for (int b = threadIdx.x; b < kBins; b += blockDim.x)
                hist[b] = 0;
            __syncthreads();
            const double bw = (ehi - elo) / kBins;
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
                const float2 p = xy[i];
                const double v = axis ? p.y : p.x;
                if (!finite2(p.x, p.y) || !(v >= elo && v <= ehi))
                    continue;
                const double b = (v - elo) / bw;
                atomicAdd(&hist[b >= kBins - 1 ? kBins - 1 : (int)b], 1);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                int in = 0;
                for (int b = 0; b < kBins; b++)
                    in += hist[b];
                int cut = in / 100, b0 = 0, b1 = kBins - 1;
                for (int sum = hist[0]; sum <= cut && b0 < kBins - 1;)
                    sum += hist[++b0];
                for (int sum = hist[kBins - 1]; sum <= cut && b1 > 0;)
                    sum += hist[--b1];
                s_stop = b1 < b0 || (double)(b1 + 1 - b0) >= 0.5 * kBins;
                if (!s_stop) {
                    s_ext[2 * axis] = elo + b0 * bw;
                    s_ext[2 * axis + 1] = elo + (b1 + 1) * bw;
                }
            }
            __syncthreads();
            if (s_stop)
                break;
        }
    if (threadIdx.x != 0)
        return; /* the rest is thread 0's */
    m = s_total;
    GridParams gr = {0, 0, 1, 1, 1, 1};
    if (m > 0) {
        const double w = s_ext[1] - s_ext[0], h = s_ext[3] - s_ext[2];
        double target = m / 2 > 1 ? (double)(m / 2) : 1.0;
        if (target > max_cells)
            target = max_cells;
        double s = w * h > 0 ? sqrt(w * h / target) : fmax(w, h) > 0 ? fmax(w, h) / target : 1.0;
        for (;;) {
            const double cx = floor(w / s) + 1, cy = floor(h / s) + 1;
            if (cx * cy <= (double)max_cells) {
                gr.gx = (int)cx;
                gr.gy = (int)cy;
                break;
            }
            s *= 1.25;
        }
        gr.x0 = s_ext[0];
        gr.y0 = s_ext[2];
        gr.s = s;
        gr.inv = 1.0 / s;
    }
    *out = gr;
    if (s_out)
        *s_out = gr;
    counters[0] = 0; /* a repeated id (bit 0), an internal limit exceeded (bits 1, 2) */
    counters[1] = 0; /* edges taken */
    counters[2] = 0; /* points left to hard_kernel */
}

/* The grid of the large path (grid_block), one block. */
__global__ void __launch_bounds__(kBoxThreads)
    grid_kernel(const float2 *__restrict__ xy, int n, int max_cells, GridParams *out,
                int *counters)
{
    grid_block(xy, n, max_cells, out, counters, nullptr);
}

/* Cell of each point (-1: not finite) and the count per cell; idx[i] = i (the values of the
 * ids' sort). */
__global__ void cell_kernel(const float2 *__restrict__ xy, int n, const GridParams *grp,
                            int *__restrict__ pt_cell, int *__restrict__ cell_count,
                            int *__restrict__ idx)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    idx[i] = i;
    const GridParams gr = *grp;
    const float2 p = xy[i];
    if (!finite2(p.x, p.y)) {
        pt_cell[i] = -1;
        return;
    }
    /* Clamped before the conversion: points beyond the extent go to the border cells. */
    const double fx = ((double)p.x - gr.x0) * gr.inv, fy = ((double)p.y - gr.y0) * gr.inv;
    const int cx = fx < 0 ? 0 : fx >= gr.gx ? gr.gx - 1 : (int)fx;
    const int cy = fy < 0 ? 0 : fy >= gr.gy ? gr.gy - 1 : (int)fy;
    pt_cell[i] = cy * gr.gx + cx;
    atomicAdd(&cell_count[cy * gr.gx + cx], 1);
}

/* Points scattered by cell (any order within a cell: the search orders by index itself). */
__global__ void scatter_kernel(const int *__restrict__ pt_cell, int n,
                               const int *__restrict__ cell_start, int *__restrict__ cell_fill,
                               int *__restrict__ cell_pts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || pt_cell[i] < 0)
        return;
    const int c = pt_cell[i];
    cell_pts[cell_start[c] + atomicAdd(&cell_fill[c], 1)] = i;
}

/* The neighbours of every point: the grid search (knn_kernel) and the few far points
 * (hard_kernel). */
#include "overlay/cuda/knn_search.cuh"

/* The previous frame's edges (hdr[0] of them: the update's header, knn_update): rank e of L
 * when kept by the hysteresis bound (else refused from the start), and the candidate slot of
 * the same pair marked dropped. */
__global__ void prev_kernel(const keyer_knn_edge *__restrict__ prev,
                            const int *__restrict__ prev_at, const int *__restrict__ hdr,
                            const uint32_t *__restrict__ ids, const float2 *__restrict__ xy,
                            int n, const uint32_t *__restrict__ sorted_ids,
                            const int *__restrict__ sorted_idx, const int *__restrict__ knn_j,
                            const int *__restrict__ n_knn, const float *__restrict__ kth, int k,
                            float max_dy, float hysteresis, unsigned char *__restrict__ drop,
                            int *__restrict__ l_u, int *__restrict__ l_v, int *__restrict__ st,
                            uint32_t *__restrict__ vkey, int *__restrict__ vval)
{
    kr_pdl_wait();
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= hdr[0])
        return;
    const int ia = index_of(ids, sorted_ids, sorted_idx, n, prev[e].a, prev_at[2 * e]);
    const int ib = index_of(ids, sorted_ids, sorted_idx, n, prev[e].b, prev_at[2 * e + 1]);
    bool keep = false;
    if (ia >= 0 && ib >= 0) {
        const float2 pa = xy[ia], pb = xy[ib];
        const float dy = __fsub_rn(pb.y, pa.y);
        float d2 = INFINITY;
        if (ia != ib && !(max_dy > 0 && fabsf(dy) > max_dy))
            d2 = dist2_rn(pa.x, pa.y, pb.x, pb.y);
        const float d = __fsqrt_rn(d2);
        const float bound = __fmul_rn(fmaxf(kth[ia], kth[ib]), __fadd_rn(1.0f, hysteresis));
        keep = isfinite(d) && !(d > bound);
        /* The pair's candidate slot, if either end lists the other. */
        for (int r = 0; r < n_knn[ia]; r++)
            if (knn_j[(size_t)ia * k + r] == ib && emits(ids, knn_j, n_knn, k, ia, ib))
                drop[(size_t)ia * k + r] = 1;
        for (int r = 0; r < n_knn[ib]; r++)
            if (knn_j[(size_t)ib * k + r] == ia && emits(ids, knn_j, n_knn, k, ib, ia))
                drop[(size_t)ib * k + r] = 1;
    }
    l_u[e] = keep ? ia : -1;
    l_v[e] = keep ? ib : -1;
    st[e] = keep ? 0 : kRefused;
    vkey[2 * e] = keep ? (uint32_t)ia : 0xffffffffu;
    vkey[2 * e + 1] = keep ? (uint32_t)ib : 0xffffffffu;
    vval[2 * e] = e;
    vval[2 * e + 1] = e;
}

/* Candidate keys: (rank of a << bits | rank of b) for the slot that emits a pair not in the
 * previous frame (ranks of the ids in sorted order, below 2^bits - 1: the order of (a, b)),
 * @p none (2^(2 bits) - 1, above every such key) otherwise. */
__global__ void cand_kernel(const uint32_t *__restrict__ ids, const int *__restrict__ rank,
                            int n, const int *__restrict__ knn_j, const int *__restrict__ n_knn,
                            int k, const unsigned char *__restrict__ drop, int bits,
                            uint64_t none, uint64_t *__restrict__ key, int *__restrict__ slot)
{
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= n * k)
        return;
    const int i = q / k, r = q % k;
    uint64_t kv = none;
    if (r < n_knn[i] && !drop[q]) {
        const int j = knn_j[q];
        if (emits(ids, knn_j, n_knn, k, i, j)) {
            const uint64_t ri = (uint64_t)rank[i], rj = (uint64_t)rank[j];
            kv = ids[i] < ids[j] ? (ri << bits) | rj : (rj << bits) | ri;
        }
    }
    key[q] = kv;
    slot[q] = q;
}

/* Length bits of the candidates in (a, b) order (invalid ones last). */
__global__ void len_kernel(const uint64_t *__restrict__ key, const int *__restrict__ slot,
                           int total, uint64_t none, const float *__restrict__ knn_d2,
                           uint32_t *__restrict__ len_key)
{
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= total)
        return;
    uint32_t bits = 0xffffffffu;
    if (key[q] != none)
        bits = __float_as_uint(__fsqrt_rn(knn_d2[slot[q]]));
    len_key[q] = bits;
}

/* Candidates at ranks n_prev + q of L, in sorted order. */
__global__ void cand_rank_kernel(const uint32_t *__restrict__ len_key,
                                 const int *__restrict__ slot, int total, int n_prev,
                                 const uint32_t *__restrict__ ids, const int *__restrict__ knn_j,
                                 int k, int *__restrict__ l_u, int *__restrict__ l_v,
                                 int *__restrict__ st, uint32_t *__restrict__ vkey,
                                 int *__restrict__ vval)
{
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= total)
        return;
    const int r = n_prev + q;
    const bool live = len_key[q] != 0xffffffffu;
    int u = -1, v = -1;
    if (live) {
        const int i = slot[q] / k, j = knn_j[slot[q]];
        u = ids[i] < ids[j] ? i : j;
        v = ids[i] < ids[j] ? j : i;
    }
    l_u[r] = u;
    l_v[r] = v;
    st[r] = live ? 0 : kRefused;
    vkey[2 * r] = live ? (uint32_t)u : 0xffffffffu;
    vkey[2 * r + 1] = live ? (uint32_t)v : 0xffffffffu;
    vval[2 * r] = r;
    vval[2 * r + 1] = r;
}

/* Each point's incident edges: the first index of point u in the sorted keys (v_off[u]). */
__global__ void offsets_kernel(const uint32_t *__restrict__ vkey_sorted, int entries, int n,
                               int *__restrict__ v_off, int *__restrict__ v_pos,
                               int *__restrict__ v_acc)
{
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u > n)
        return;
    int lo = 0, hi = entries;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (vkey_sorted[mid] < (uint32_t)u)
            lo = mid + 1;
        else
            hi = mid;
    }
    v_off[u] = lo;
    if (u < n) {
        v_pos[u] = lo;
        v_acc[u] = 0;
    }
}

__global__ void taken_kernel(const int *__restrict__ st, int total, int *__restrict__ flag)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < total)
        flag[r] = (st[r] & kTaken) ? 1 : 0;
}

/* The counters the host reads (error bits, edges) also written just before the edges out, so
 * that one copy brings both (by the update's last kernel, one thread). */
__device__ __forceinline__ void put_counters(keyer_knn_edge *next, int bits, int edges)
{
    int *h = reinterpret_cast<int *>(next - kOutHdr);
    h[0] = bits;
    h[1] = edges;
}

/* The taken edges in L order (ids a < b and their indices, for the next frame). */
__global__ void output_kernel(const int *__restrict__ flag, const int *__restrict__ at,
                              int total, const int *__restrict__ l_u, const int *__restrict__ l_v,
                              const uint32_t *__restrict__ ids, keyer_knn_edge *__restrict__ next,
                              int *__restrict__ next_at, int *counters)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= total)
        return;
    if (r == total - 1) {
        counters[1] = at[r] + flag[r];
        put_counters(next, counters[0], at[r] + flag[r]);
    }
    if (!flag[r])
        return;
    int u = l_u[r], v = l_v[r];
    if (ids[u] > ids[v]) {
        const int t = u;
        u = v;
        v = t;
    }
    keyer_knn_edge e;
    e.a = ids[u];
    e.b = ids[v];
    next[at[r]] = e;
    next_at[2 * at[r]] = u;
    next_at[2 * at[r] + 1] = v;
}

/* ---- state, launcher ------------------------------------------------------------------ */

struct State {
    int device;
    keyer_knn_params p;
    int max_points, max_cells, max_edges, max_l;
    cudaEvent_t done;
    bool event_made;
    /* pinned host staging: the points in (header, xy, ids: one copy); out (one copy): the
     * counters (h_counters, kOutHdr edges' room) and the edges (h_edges) of h_out */
    unsigned char *h_in;
    keyer_knn_edge *h_out;
    int *h_counters;
    keyer_knn_edge *h_edges;
    /* device: the header and the points (the frame's hdr, xy and ids point into in), ... */
    unsigned char *in;
    int *hdr;
    uint32_t *ids, *sorted_ids;
    float2 *xy;
    int *idx, *sorted_idx, *rank;
    GridParams *grid;
    int *counters;
    int *pt_cell, *cell_count, *cell_start, *cell_fill, *cell_pts;
    float *knn_d2, *kth;
    int *knn_j, *n_knn;
    unsigned char *drop;
    uint64_t *ckey, *ckey_sorted;
    int *cslot, *cslot_sorted, *cslot_final;
    uint32_t *len_key, *len_key_sorted;
    int *l_u, *l_v, *st;
    uint32_t *vkey, *vkey_sorted;
    int *vval, *v_rank;
    int *v_off, *v_pos, *v_acc;
    int *flag, *at;
    uint64_t *key; /* the small path: slots' keys in L order */
    int *deg;      /* ... and live edges per point */
    int *rank2;    /* ... each point's place in the ids' order (n), in the x order (n) */
    float2 *xs;    /* ... the points in x order */
    int *xs_idx;   /* ... and their indices */
    keyer_knn_edge *ebuf[2];     /* the two edge buffers, kOutHdr edges' room first */
    keyer_knn_edge *prev, *next; /* their edges (ebuf + kOutHdr), swapped every update */
    int *prev_at, *next_at;
    int n_prev;
    void *temp;
    size_t temp_bytes;
    int small_smem; /* dynamic shared memory small_cap_kernel may have (0: no small path) */
    int merge_smem; /* dynamic shared memory small_merge_kernel may have */
    bool chain;     /* compute capability 9.0 or later: the small path's kernels are chained by
                       programmatic dependent launches (chain_launch) */
    /* Replays of the small path: an update of the same number of points as the one before is
     * captured once (on cap_stream) as a CUDA graph and replayed, one per parity of the
     * previous/next edge buffers (edges0: the first prev). */
    cudaStream_t cap_stream;
    bool cap_stream_made;
    cudaGraphExec_t exec[2];
    int exec_n[2], exec_copy[2];
    keyer_knn_edge *edges0;
    int last_n;
};

keyer_status cuda_fail(keyer_error *err, const char *what, cudaError_t e)
{
    return keyer_error_set(err, KEYER_STATUS_DEVICE, "knn graph (cuda): %s failed: %s", what,
                           cudaGetErrorString(e));
}

int blocks(long long n) { return (int)((n + kThreads - 1) / kThreads); }

/* The small path: its kernels, its plan and its launcher (they use the kernels above). */
#include "overlay/cuda/knn_small.cuh"

#define KNN_CHECK(x)                                                                           \
    do {                                                                                       \
        if ((e = (x)) != cudaSuccess)                                                          \
            return e;                                                                          \
    } while (0)
#define KNN_LAUNCHED() KNN_CHECK(cudaGetLastError())

/* Queues the large path's update of n points (on the device) on @p stream. */
cudaError_t launch_large(State *s, int n, cudaStream_t stream)
{
    const int k = s->p.k, nk = n * k, P = s->n_prev, total = P + nk;
    const int cells = s->max_cells;
    cudaError_t e;
    /* 1. grid */
    grid_kernel<<<1, kBoxThreads, 0, stream>>>(s->xy, n, cells, s->grid, s->counters);
    KNN_LAUNCHED();
    KNN_CHECK(cudaMemsetAsync(s->cell_count, 0, (size_t)(cells + 1) * sizeof(int), stream));
    KNN_CHECK(cudaMemsetAsync(s->cell_fill, 0, (size_t)cells * sizeof(int), stream));
    cell_kernel<<<blocks(n), kThreads, 0, stream>>>(s->xy, n, s->grid, s->pt_cell, s->cell_count,
                                                    s->idx);
    KNN_LAUNCHED();
    size_t tb = s->temp_bytes;
    KNN_CHECK(cub::DeviceScan::ExclusiveSum(s->temp, tb, s->cell_count, s->cell_start, cells + 1,
                                            stream));
    scatter_kernel<<<blocks(n), kThreads, 0, stream>>>(s->pt_cell, n, s->cell_start,
                                                       s->cell_fill, s->cell_pts);
    KNN_LAUNCHED();
    /* ids sorted (the previous frame's edges find their points there; the ranks order the
     * candidates; a repeated id is flagged by knn_kernel) */
    tb = s->temp_bytes;
    KNN_CHECK(cub::DeviceRadixSort::SortPairs(s->temp, tb, s->ids, s->sorted_ids, s->idx,
                                              s->sorted_idx, n, 0, 32, stream));
    /* 2. neighbours */
    knn_kernel<<<blocks(n), kThreads, 0, stream>>>(
        s->xy, n, s->grid, s->pt_cell, s->cell_start, s->cell_pts, k, s->p.max_dy, s->sorted_ids,
        s->sorted_idx, s->rank, s->counters, s->knn_d2, s->knn_j, s->n_knn, s->kth, s->drop,
        s->cell_fill);
    KNN_LAUNCHED();
    if (k <= kLocalK) {
        hard_kernel<<<kHardBlocks, kHardThreads, 0, stream>>>(s->xy, n, k, s->p.max_dy,
                                                              s->cell_fill, s->counters,
                                                              s->knn_d2, s->knn_j, s->n_knn,
                                                              s->kth);
        KNN_LAUNCHED();
    }
    /* 3. previous edges */
    if (P > 0) {
        prev_kernel<<<blocks(P), kThreads, 0, stream>>>(
            s->prev, s->prev_at, s->hdr, s->ids, s->xy, n, s->sorted_ids, s->sorted_idx, s->knn_j,
            s->n_knn, s->kth, k, s->p.max_dy, s->p.hysteresis, s->drop, s->l_u, s->l_v, s->st,
            s->vkey, s->vval);
        KNN_LAUNCHED();
    }
    /* 4. candidates by (a, b) (as ranks of bits bits: 2^bits - 1 > n - 1), then stably by
     * length */
    int bits = 1;
    while (bits < 31 && (1ll << bits) - 1 <= (long long)(n - 1))
        bits++;
    const uint64_t none = (1ull << (2 * bits)) - 1;
    cand_kernel<<<blocks(nk), kThreads, 0, stream>>>(s->ids, s->rank, n, s->knn_j, s->n_knn, k,
                                                     s->drop, bits, none, s->ckey, s->cslot);
    KNN_LAUNCHED();
    tb = s->temp_bytes;
    KNN_CHECK(cub::DeviceRadixSort::SortPairs(s->temp, tb, s->ckey, s->ckey_sorted, s->cslot,
                                              s->cslot_sorted, nk, 0, 2 * bits, stream));
    len_kernel<<<blocks(nk), kThreads, 0, stream>>>(s->ckey_sorted, s->cslot_sorted, nk, none,
                                                    s->knn_d2, s->len_key);
    KNN_LAUNCHED();
    tb = s->temp_bytes;
    KNN_CHECK(cub::DeviceRadixSort::SortPairs(s->temp, tb, s->len_key, s->len_key_sorted,
                                              s->cslot_sorted, s->cslot_final, nk, 0, 32,
                                              stream));
    cand_rank_kernel<<<blocks(nk), kThreads, 0, stream>>>(s->len_key_sorted, s->cslot_final, nk,
                                                          P, s->ids, s->knn_j, k, s->l_u, s->l_v,
                                                          s->st, s->vkey, s->vval);
    KNN_LAUNCHED();
    /* 5. degree cap: each point's edges in L order (point indices are below 2^bits - 1, the
     * low bits of the dead entries' key: those go last), then the rounds */
    tb = s->temp_bytes;
    KNN_CHECK(cub::DeviceRadixSort::SortPairs(s->temp, tb, s->vkey, s->vkey_sorted, s->vval,
                                              s->v_rank, 2 * total, 0, bits, stream));
    offsets_kernel<<<blocks(n + 1), kThreads, 0, stream>>>(s->vkey_sorted, 2 * total, n, s->v_off,
                                                           s->v_pos, s->v_acc);
    KNN_LAUNCHED();
    for (int r = 0; r < kGridRounds; r++) {
        round_kernel<<<blocks(n), kThreads, 0, stream>>>(n, s->p.max_degree, s->v_off, s->v_rank,
                                                         s->l_u, s->v_pos, s->v_acc, s->st);
        KNN_LAUNCHED();
    }
    finish_kernel<<<1, 1024, 0, stream>>>(n, s->p.max_degree, s->v_off, s->v_rank, s->l_u,
                                          s->v_pos, s->v_acc, s->st, total, s->counters);
    KNN_LAUNCHED();
    /* 6. the taken edges in order */
    taken_kernel<<<blocks(total), kThreads, 0, stream>>>(s->st, total, s->flag);
    KNN_LAUNCHED();
    tb = s->temp_bytes;
    KNN_CHECK(cub::DeviceScan::ExclusiveSum(s->temp, tb, s->flag, s->at, total, stream));
    output_kernel<<<blocks(total), kThreads, 0, stream>>>(s->flag, s->at, total, s->l_u, s->l_v,
                                                          s->ids, s->next, s->next_at,
                                                          s->counters);
    KNN_LAUNCHED();
    return cudaSuccess;
}

/* Queues one update of n points on @p stream: one copy in (the header and the points, from the
 * pinned staging buffer), the small or the large path, one copy out (the counters, which the
 * last kernel put before the edges, and the first @p copy_edges edges, to h_out): one
 * synchronisation for the caller. */
cudaError_t queue_update(State *s, int n, int copy_edges, const SmallPlan &sp,
                         cudaStream_t stream)
{
    cudaError_t e;
    KNN_CHECK(cudaMemcpyAsync(s->in, s->h_in, kHdrBytes + (size_t)n * kInBytes,
                              cudaMemcpyHostToDevice, stream));
    KNN_CHECK(sp.ok ? launch_small(s, n, sp, stream) : launch_large(s, n, stream));
    KNN_CHECK(cudaMemcpyAsync(s->h_out, s->next - kOutHdr,
                              (size_t)(kOutHdr + copy_edges) * sizeof(keyer_knn_edge),
                              cudaMemcpyDeviceToHost, stream));
    return cudaSuccess;
}

/* The same update as queue_update, as the replay of a CUDA graph (sp.replay: the launches
 * hold for any number of previous edges the update can have): captured on first use for this
 * parity of the edge buffers, n and copy_edges, then launched on @p stream. */
cudaError_t replay_update(State *s, int n, int copy_edges, const SmallPlan &sp,
                          cudaStream_t stream)
{
    cudaError_t e;
    const int par = s->prev == s->edges0 ? 0 : 1;
    if (!s->exec[par] || s->exec_n[par] != n || s->exec_copy[par] != copy_edges) {
        if (s->exec[par]) {
            cudaGraphExecDestroy(s->exec[par]);
            s->exec[par] = nullptr;
        }
        cudaGraph_t g = nullptr;
        KNN_CHECK(cudaStreamBeginCapture(s->cap_stream, cudaStreamCaptureModeThreadLocal));
        const cudaError_t qe = queue_update(s, n, copy_edges, sp, s->cap_stream);
        const cudaError_t ce = cudaStreamEndCapture(s->cap_stream, &g);
        if (qe != cudaSuccess || ce != cudaSuccess) {
            if (g)
                cudaGraphDestroy(g);
            return qe != cudaSuccess ? qe : ce;
        }
        e = cudaGraphInstantiate(&s->exec[par], g, 0);
        cudaGraphDestroy(g);
        if (e != cudaSuccess) {
            s->exec[par] = nullptr;
            return e;
        }
        s->exec_n[par] = n;
        s->exec_copy[par] = copy_edges;
    }
    return cudaGraphLaunch(s->exec[par], stream);
}
#undef KNN_LAUNCHED
#undef KNN_CHECK

/* Device memory of n elements of T. */
template <typename T> cudaError_t dalloc(T **p, size_t n)
{
    return cudaMalloc(reinterpret_cast<void **>(p), (n > 0 ? n : 1) * sizeof(T));
}

/* Scratch bytes of the largest CUB call of an update at full size. */
cudaError_t temp_size(const State *s, size_t *out)
{
    const int n = s->max_points, nk = s->max_points * s->p.k;
    size_t need = 0, b = 0;
    cudaError_t e;
    if ((e = cub::DeviceScan::ExclusiveSum(nullptr, b, s->cell_count, s->cell_start,
                                           s->max_cells + 1)) != cudaSuccess)
        return e;
    need = b > need ? b : need;
    if ((e = cub::DeviceRadixSort::SortPairs(nullptr, b, s->ids, s->sorted_ids, s->idx,
                                             s->sorted_idx, n, 0, 32)) != cudaSuccess)
        return e;
    need = b > need ? b : need;
    if ((e = cub::DeviceRadixSort::SortPairs(nullptr, b, s->ckey, s->ckey_sorted, s->cslot,
                                             s->cslot_sorted, nk, 0, 64)) != cudaSuccess)
        return e;
    need = b > need ? b : need;
    if ((e = cub::DeviceRadixSort::SortPairs(nullptr, b, s->len_key, s->len_key_sorted,
                                             s->cslot_sorted, s->cslot_final, nk, 0, 32)) !=
        cudaSuccess)
        return e;
    need = b > need ? b : need;
    if ((e = cub::DeviceRadixSort::SortPairs(nullptr, b, s->vkey, s->vkey_sorted, s->vval,
                                             s->v_rank, 2 * s->max_l, 0, 32)) != cudaSuccess)
        return e;
    need = b > need ? b : need;
    if ((e = cub::DeviceScan::ExclusiveSum(nullptr, b, s->flag, s->at, s->max_l)) != cudaSuccess)
        return e;
    need = b > need ? b : need;
    *out = need;
    return cudaSuccess;
}

void free_all(State *s)
{
    if (s->event_made)
        cudaEventSynchronize(s->done);
    for (int par = 0; par < 2; par++)
        if (s->exec[par])
            cudaGraphExecDestroy(s->exec[par]);
    if (s->cap_stream_made)
        cudaStreamDestroy(s->cap_stream);
    cudaFreeHost(s->h_in);
    cudaFreeHost(s->h_out);
    void *dev[] = {s->in,         s->sorted_ids,   s->key,         s->idx,     s->sorted_idx,
                   s->deg,        s->rank2,        s->xs,          s->xs_idx,
                   s->rank,
                   s->grid,       s->counters,     s->pt_cell,     s->cell_count,
                   s->cell_start, s->cell_fill,    s->cell_pts,    s->knn_d2,  s->kth,
                   s->knn_j,      s->n_knn,        s->drop,        s->ckey,    s->ckey_sorted,
                   s->cslot,      s->cslot_sorted, s->cslot_final, s->len_key,
                   s->len_key_sorted, s->l_u,      s->l_v,         s->st,      s->vkey,
                   s->vkey_sorted, s->vval,        s->v_rank,      s->v_off,   s->v_pos,
                   s->v_acc,      s->flag,         s->at,          s->ebuf[0], s->ebuf[1],
                   s->prev_at,    s->next_at,      s->temp};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        if (dev[i])
            cudaFree(dev[i]);
    if (s->event_made)
        cudaEventDestroy(s->done);
}

/* ---- entry points --------------------------------------------------------------------- */

void knn_destroy(void *state)
{
    State *s = static_cast<State *>(state);
    if (!s)
        return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(s->device);
    free_all(s);
    if (prev >= 0)
        cudaSetDevice(prev);
    delete s;
}

keyer_status knn_create(const keyer_knn_params *p, int max_points, void **state,
                        keyer_error *err)
{
    int prev = -1, count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaGetDeviceCount", e);
    if (p->cuda_device >= count)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "knn graph (cuda): no CUDA device %d (%d found)", p->cuda_device,
                               count);
    if ((e = cudaGetDevice(&prev)) != cudaSuccess)
        return cuda_fail(err, "cudaGetDevice", e);
    if (prev != p->cuda_device && (e = cudaSetDevice(p->cuda_device)) != cudaSuccess)
        return cuda_fail(err, "cudaSetDevice", e);
    keyer_status st = KEYER_OK;
    State *s = new (std::nothrow) State();
    if (!s) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "knn graph (cuda): out of memory");
        goto done;
    }
    s->device = p->cuda_device;
    s->p = *p;
    s->max_points = max_points;
    s->max_cells = max_points;
    s->max_edges = max_points * p->max_degree; /* at most n * max_degree / 2 are taken */
    s->max_l = s->max_edges + max_points * p->k;
    {
        const size_t n = (size_t)max_points, nk = n * (size_t)p->k, ml = (size_t)s->max_l;
        const size_t me = (size_t)s->max_edges;
        if ((e = cudaMallocHost(reinterpret_cast<void **>(&s->h_in), kHdrBytes + n * kInBytes)) ||
            (e = cudaMallocHost(reinterpret_cast<void **>(&s->h_out),
                                (kOutHdr + me) * sizeof(keyer_knn_edge))) ||
            (e = dalloc(&s->in, kHdrBytes + n * kInBytes)) || (e = dalloc(&s->sorted_ids, n)) ||
            (e = dalloc(&s->key, ml)) || (e = dalloc(&s->deg, n)) ||
            (e = dalloc(&s->rank2, 2 * n)) || (e = dalloc(&s->xs, n)) ||
            (e = dalloc(&s->xs_idx, n)) || (e = dalloc(&s->idx, n)) ||
            (e = dalloc(&s->sorted_idx, n)) || (e = dalloc(&s->rank, n)) ||
            (e = dalloc(&s->grid, 1)) ||
            (e = dalloc(&s->counters, 8)) || (e = dalloc(&s->pt_cell, n)) ||
            (e = dalloc(&s->cell_count, n + 1)) || (e = dalloc(&s->cell_start, n + 1)) ||
            (e = dalloc(&s->cell_fill, n)) || (e = dalloc(&s->cell_pts, n)) ||
            (e = dalloc(&s->knn_d2, nk)) || (e = dalloc(&s->kth, n)) ||
            (e = dalloc(&s->knn_j, nk)) || (e = dalloc(&s->n_knn, n)) ||
            (e = dalloc(&s->drop, nk)) || (e = dalloc(&s->ckey, nk)) ||
            (e = dalloc(&s->ckey_sorted, nk)) || (e = dalloc(&s->cslot, nk)) ||
            (e = dalloc(&s->cslot_sorted, nk)) || (e = dalloc(&s->cslot_final, nk)) ||
            (e = dalloc(&s->len_key, nk)) || (e = dalloc(&s->len_key_sorted, nk)) ||
            (e = dalloc(&s->l_u, ml)) || (e = dalloc(&s->l_v, ml)) || (e = dalloc(&s->st, ml)) ||
            (e = dalloc(&s->vkey, 2 * ml)) || (e = dalloc(&s->vkey_sorted, 2 * ml)) ||
            (e = dalloc(&s->vval, 2 * ml)) || (e = dalloc(&s->v_rank, 2 * ml)) ||
            (e = dalloc(&s->v_off, n + 1)) || (e = dalloc(&s->v_pos, n)) ||
            (e = dalloc(&s->v_acc, n)) || (e = dalloc(&s->flag, ml)) || (e = dalloc(&s->at, ml)) ||
            (e = dalloc(&s->ebuf[0], kOutHdr + me)) || (e = dalloc(&s->ebuf[1], kOutHdr + me)) ||
            (e = dalloc(&s->prev_at, 2 * me)) || (e = dalloc(&s->next_at, 2 * me))) {
            st = cuda_fail(err, "allocation", e);
            goto done;
        }
    }
    if ((e = temp_size(s, &s->temp_bytes)) != cudaSuccess ||
        (e = cudaMalloc(&s->temp, s->temp_bytes > 0 ? s->temp_bytes : 1)) != cudaSuccess) {
        st = cuda_fail(err, "scratch allocation", e);
        goto done;
    }
    if ((e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming)) != cudaSuccess) {
        st = cuda_fail(err, "cudaEventCreate", e);
        goto done;
    }
    s->event_made = true;
    if ((e = cudaStreamCreateWithFlags(&s->cap_stream, cudaStreamNonBlocking)) != cudaSuccess) {
        st = cuda_fail(err, "cudaStreamCreate", e);
        goto done;
    }
    s->cap_stream_made = true;
    s->hdr = reinterpret_cast<int *>(s->in);
    s->xy = reinterpret_cast<float2 *>(s->in + kHdrBytes);
    s->ids = reinterpret_cast<uint32_t *>(s->in + kHdrBytes +
                                          2 * sizeof(float) * (size_t)max_points);
    s->h_counters = reinterpret_cast<int *>(s->h_out);
    s->h_edges = s->h_out + kOutHdr;
    s->prev = s->ebuf[0] + kOutHdr;
    s->next = s->ebuf[1] + kOutHdr;
    s->edges0 = s->prev;
    s->last_n = -1;
    if ((e = small_path_setup(s)) != cudaSuccess) {
        st = cuda_fail(err, "kernel attributes", e);
        goto done;
    }
done:
    if (st && s) {
        free_all(s);
        delete s;
        s = NULL;
    }
    if (prev >= 0 && prev != p->cuda_device)
        cudaSetDevice(prev);
    if (!st)
        *state = s;
    return st;
}

keyer_status knn_update(void *state, const uint32_t *ids, const float *xy, int n,
                        keyer_knn_edge *edges, int capacity, int *count, void *stream_ptr,
                        keyer_error *err)
{
    State *s = static_cast<State *>(state);
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaGetDevice", e);
    if (prev != s->device && (e = cudaSetDevice(s->device)) != cudaSuccess)
        return cuda_fail(err, "cudaSetDevice", e);
    keyer_status st = KEYER_OK;
    int taken = 0, copied = 0;
    if (n == 0) { /* no point: every previous edge goes */
        s->n_prev = 0;
        s->last_n = 0;
        *count = 0;
        goto done;
    }
    /* At most n max_degree / 2 edges are taken (each uses two of the n points' max_degree
     * places): that many come back with the counters, after one synchronisation. */
    {
        const long long most = (long long)n * s->p.max_degree / 2;
        copied = most < capacity ? (int)most : capacity;
    }
    /* The previous update's copies out of the staging buffers are done (it synchronised). The
     * header and the points go in with one copy: the number of previous edges, xy, ids. */
    s->xy = reinterpret_cast<float2 *>(s->in + kHdrBytes);
    s->ids = reinterpret_cast<uint32_t *>(s->in + kHdrBytes + 2 * sizeof(float) * (size_t)n);
    {
        int hdr[kHdrBytes / sizeof(int)] = {s->n_prev};
        memcpy(s->h_in, hdr, kHdrBytes);
    }
    memcpy(s->h_in + kHdrBytes, xy, (size_t)n * 2 * sizeof(float));
    memcpy(s->h_in + kHdrBytes + 2 * sizeof(float) * (size_t)n, ids, (size_t)n * sizeof(uint32_t));
    {
        /* An update of as many points as the last one is a CUDA graph's replay when the small
         * path's launches allow it; otherwise (and for a first size) the launches are queued
         * one by one. */
        const SmallPlan sp = small_plan(s, n);
        if ((e = sp.ok && sp.replay && n == s->last_n ? replay_update(s, n, copied, sp, stream)
                                                      : queue_update(s, n, copied, sp, stream)) !=
                cudaSuccess ||
            (e = cudaEventRecord(s->done, stream)) != cudaSuccess ||
            (e = cudaEventSynchronize(s->done)) != cudaSuccess) {
            st = cuda_fail(err, "update", e);
            goto done;
        }
    }
    s->last_n = n;
    if (s->h_counters[0] & 6) {
        st = keyer_error_set(err, KEYER_STATUS_DEVICE, "knn graph (cuda): %s (an internal error)",
                             s->h_counters[0] & 2 ? "more edges taken than the points allow"
                                                  : "the degree cap did not end in as many "
                                                    "rounds as edges");
        goto done;
    }
    if (s->h_counters[0]) {
        /* Find the repeated id on the host for the message (rare: an error path). */
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                             "knn graph: an id appears twice in one frame");
        for (int i = 0; i < n && i < 4096; i++)
            for (int j = i + 1; j < n; j++)
                if (ids[i] == ids[j]) {
                    st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                         "knn graph: id %u appears twice in one frame",
                                         (unsigned)ids[i]);
                    i = n;
                    break;
                }
        goto done;
    }
    taken = s->h_counters[1];
    {
        const int n_out = taken < capacity ? taken : capacity;
        if (n_out > copied && /* never expected: the rest of the edges */
            ((e = cudaMemcpyAsync(s->h_edges + copied, s->next + copied,
                                  (size_t)(n_out - copied) * sizeof(keyer_knn_edge),
                                  cudaMemcpyDeviceToHost, stream)) != cudaSuccess ||
             (e = cudaEventRecord(s->done, stream)) != cudaSuccess ||
             (e = cudaEventSynchronize(s->done)) != cudaSuccess)) {
            st = cuda_fail(err, "copy of the edges", e);
            goto done;
        }
        if (n_out > 0)
            memcpy(edges, s->h_edges, (size_t)n_out * sizeof(keyer_knn_edge));
        *count = n_out;
    }
    {
        keyer_knn_edge *t = s->prev;
        s->prev = s->next;
        s->next = t;
        int *ta = s->prev_at;
        s->prev_at = s->next_at;
        s->next_at = ta;
        s->n_prev = taken;
    }
done:
    if (prev >= 0 && prev != s->device)
        cudaSetDevice(prev);
    return st;
}

} // namespace

extern "C" const kr_knn_backend kr_knn_cuda = {"cuda", knn_create, knn_update, knn_destroy};
