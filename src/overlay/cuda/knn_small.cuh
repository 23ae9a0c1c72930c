/*
 * The small path of the CUDA kNN graph (included by knn.cu only): for up to kSmallN points and
 * k <= kSweepK an update is a memset and thirteen kernels (one fewer on a first frame), two
 * of them one block of kSmallThreads threads, instead of the large path's forty launches and
 * CUB sorts:
 *
 *  1. the neighbours (knn_sweep.cuh): the ids' order and the x order by counting (n^2
 *     comparisons over the whole device), the points in x order, and a warp per point walking
 *     that order outward; hard_kernel (knn_search.cuh) for the few points whose walk is long;
 *  2. prev_kernel (when there are previous edges) of the large path;
 *  3. small_cand_kernel: every live edge of L (kept previous edges, then candidates) gets a
 *     64-bit key in L order (a previous edge: its rank e; a candidate: bit 63, its length's
 *     bits, the ranks of its ids: (length, a, b) order) and counts at both of its ends;
 *  4. each point's live edges listed (small_offsets_kernel, one block: a prefix sum of the
 *     counts; small_fill_kernel) and sorted by key (small_sort_kernel), so that each list is
 *     in L order as the degree cap needs;
 *  5. small_cap_kernel (one block): the degree cap's rounds (small_read, small_write:
 *     vertex_step_t's rules in a reading and a writing phase, a byte per edge and end in
 *     shared memory, the lists there too as far as they fit) until every edge is decided; then
 *     the taken previous edges' places in the output and the taken candidates' slots
 *     compacted (from shared memory only: the global reads of the output are left to the
 *     kernels over many blocks below);
 *  6. small_chunk_sort_kernel and small_merge_kernel: the taken previous edges to the output,
 *     and the taken candidates in key order after them, over several blocks (chunks of kChunk
 *     keys sorted, then each key's place: its place in its chunk plus the keys below it in
 *     the others, every key in shared memory where it fits).
 *
 * Limits (checked by the launcher, which otherwise takes the large path): n <= kSmallN (ranks
 * in 13 bits, kPerThread points per thread), k <= kSweepK, and two bytes per slot of L
 * (P + n k) in kSmallSmem bytes.
 */
#ifndef KEYER_OVERLAY_CUDA_KNN_SMALL_CUH
#define KEYER_OVERLAY_CUDA_KNN_SMALL_CUH

/* Included inside knn.cu's anonymous namespace. */

constexpr int kSmallN = 8192;           /* points at most (ranks of 13 bits in a key) */
constexpr int kSmallThreads = 1024;     /* threads of the one-block kernels */
constexpr int kSmallSmem = 220 * 1024;  /* dynamic shared memory of small_cap_kernel, at most */
constexpr int kRankBits = 13;
constexpr uint64_t kCandBit = 1ull << 63;
/* counters[] beyond the host's two: the kept previous edges and the taken candidates, from
 * small_cap_kernel to the output kernels */
constexpr int kCountKept = 4, kCountTaken = 5;

/* The smallest power of two >= v (v >= 1). */
__host__ __device__ __forceinline__ int pow2_at_least(long long v)
{
    int m = 1;
    while (m < v)
        m <<= 1;
    return m;
}

/* out[q] = in[0] + ... + in[q-1] for q <= len (out[len]: the total), by one block of
 * kSmallThreads threads, each over a contiguous chunk; @p s_part: kSmallThreads ints of shared
 * memory. in is read through L2 (it may have been filled by atomics of this block). */
__device__ void block_exclusive_scan(const int *in, int *out, int len, int *s_part)
{
    const int tid = threadIdx.x, per = (len + kSmallThreads - 1) / kSmallThreads;
    const int lo = min(tid * per, len), hi = min(lo + per, len);
    int sum = 0;
    for (int q = lo; q < hi; q++)
        sum += __ldcg(&in[q]);
    s_part[tid] = sum;
    __syncthreads();
    for (int off = 1; off < kSmallThreads; off <<= 1) {
        const int v = tid >= off ? s_part[tid - off] : 0;
        __syncthreads();
        s_part[tid] += v;
        __syncthreads();
    }
    int run = s_part[tid] - sum;
    for (int q = lo; q < hi; q++) {
        const int v = __ldcg(&in[q]);
        out[q] = run;
        run += v;
    }
    if (tid == kSmallThreads - 1)
        out[len] = s_part[tid];
    __syncthreads();
}

/* 1, 2. The neighbours (knn_sweep.cuh). */
#include "overlay/cuda/knn_sweep.cuh"

/* 3. Slot t of L (t < P = hdr[0]: previous edge t, as prev_kernel left it; else candidate
 * slot t - P; P + n k slots): its key when live, its ends (l_u, l_v) and state, and a count at
 * each end of a live edge. */
__global__ void small_cand_kernel(const int *__restrict__ hdr, int n,
                                  const uint32_t *__restrict__ ids,
                                  const int *__restrict__ rank, const int *__restrict__ knn_j,
                                  const int *__restrict__ n_knn,
                                  const float *__restrict__ knn_d2, int k,
                                  const unsigned char *__restrict__ drop, int *l_u, int *l_v,
                                  int *st, uint64_t *__restrict__ key, int *deg)
{
    kr_pdl_wait();
    const int t = blockIdx.x * blockDim.x + threadIdx.x, n_prev = hdr[0];
    if (t >= n_prev + n * k)
        return;
    if (t < n_prev) {
        if (st[t] == 0) {
            key[t] = (uint64_t)t;
            atomicAdd(&deg[l_u[t]], 1);
            atomicAdd(&deg[l_v[t]], 1);
        }
        return;
    }
    const int q = t - n_prev, i = q / k, r = q % k;
    int u = -1, v = -1;
    if (r < n_knn[i] && !drop[q]) {
        const int j = knn_j[q];
        if (emits(ids, knn_j, n_knn, k, i, j)) {
            u = ids[i] < ids[j] ? i : j;
            v = ids[i] < ids[j] ? j : i;
        }
    }
    l_u[t] = u;
    l_v[t] = v;
    if (u < 0) {
        st[t] = kRefused;
        return;
    }
    st[t] = 0;
    key[t] = kCandBit | ((uint64_t)__float_as_uint(__fsqrt_rn(knn_d2[q])) << (2 * kRankBits)) |
             ((uint64_t)rank[u] << kRankBits) | (uint64_t)rank[v];
    atomicAdd(&deg[u], 1);
    atomicAdd(&deg[v], 1);
}

/* 4. Each point's live edges (v_list[v_off[u]..v_off[u+1])) in key order, as entries
 * (slot << 1 | end): end 0 when the point is the edge's l_u, 1 when it is its l_v. Three
 * kernels: the offsets (one block: a prefix sum of the counts), the fill (a thread per slot),
 * the sort (a thread per point). */

/* 4a. v_off: the prefix sum of deg (n + 1 entries); cur: a copy of its first n. */
__global__ void __launch_bounds__(kSmallThreads)
    small_offsets_kernel(int n, const int *deg, int *v_off, int *__restrict__ cur)
{
    kr_pdl_wait();
    __shared__ int s_part[kSmallThreads];
    block_exclusive_scan(deg, v_off, n, s_part);
    for (int u = threadIdx.x; u < n; u += kSmallThreads)
        cur[u] = __ldcg(&v_off[u]);
}

/* 4b. Each live slot of L (P = hdr[0] previous edges, then n k candidate slots) listed at both
 * of its ends, in any order. */
__global__ void small_fill_kernel(const int *__restrict__ hdr, int n, int k,
                                  const int *__restrict__ st, const int *__restrict__ l_u,
                                  const int *__restrict__ l_v, int *cur, int *__restrict__ v_list)
{
    kr_pdl_wait();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= hdr[0] + n * k || st[t] != 0)
        return;
    v_list[atomicAdd(&cur[l_u[t]], 1)] = t << 1;
    v_list[atomicAdd(&cur[l_v[t]], 1)] = (t << 1) | 1;
}

/* 4c. Each point's list sorted by key (a thread per point). */
constexpr int kListSort = 16; /* lists up to this long are sorted in registers */
__global__ void small_sort_kernel(int n, const int *__restrict__ v_off,
                                  const uint64_t *__restrict__ key, int *v_list)
{
    kr_pdl_wait();
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n)
        return;
    const int lo = v_off[u], hi = v_off[u + 1], d = hi - lo;
    if (d <= kListSort) { /* each entry's place: the keys below its own (keys differ) */
        uint64_t kk[kListSort];
        int ee[kListSort];
#pragma unroll
        for (int q = 0; q < kListSort; q++) {
            ee[q] = q < d ? v_list[lo + q] : 0;
            kk[q] = q < d ? key[ee[q] >> 1] : ~0ull;
        }
#pragma unroll
        for (int q = 0; q < kListSort; q++) {
            int below = 0;
#pragma unroll
            for (int r = 0; r < kListSort; r++)
                below += kk[r] < kk[q];
            if (q < d)
                v_list[lo + below] = ee[q];
        }
        return;
    }
    for (int a = lo + 1; a < hi; a++) { /* a long list: insertion sort in place */
        const int ea = v_list[a];
        const uint64_t ka = key[ea >> 1];
        int b = a - 1;
        for (; b >= lo; b--) {
            const int eb = v_list[b];
            if (key[eb >> 1] < ka)
                break;
            v_list[b + 1] = eb;
        }
        v_list[b + 1] = ea;
    }
}

/* Writes edge @p pos of the output: ends u, v (point indices), ids in ascending order. */
__device__ __forceinline__ void put_edge(const uint32_t *__restrict__ ids, int u, int v, int pos,
                                         keyer_knn_edge *__restrict__ next,
                                         int *__restrict__ next_at)
{
    if (ids[u] > ids[v]) {
        const int t = u;
        u = v;
        v = t;
    }
    keyer_knn_edge e;
    e.a = ids[u];
    e.b = ids[v];
    next[pos] = e;
    next_at[2 * pos] = u;
    next_at[2 * pos + 1] = v;
}

/* The degree cap's states in shared memory: a byte per slot of L for each end of the edge
 * (ends[2 t]: its l_u end's, ends[2 t + 1]: its l_v end's, so that a list's entry e = t << 1 |
 * end has its own mark at ends[e] and the edge's two in the 16 bits at ends[e & ~1]): 0
 * undecided, kEndOk (the end agrees), kEndNo (the end refuses; also a dead slot's). Each byte is written by one thread
 * only, the one that owns that end's point: reads and writes happen in phases separated by
 * barriers, so plain loads and stores suffice (no atomics). An edge is taken when both ends
 * agree, refused when either refuses (an end that agrees never refuses the same edge: it
 * agrees only when it has room even if every undecided edge before it is taken). */
constexpr unsigned char kEndOk = 1, kEndNo = 2;
enum EdgeState { kUndecided = 0, kIsTaken = 1, kIsRefused = 2 };

__device__ __forceinline__ int end_state(const unsigned char *ends, int t)
{
    /* both marks in one load; a refusal has bit 1 (kEndNo), agreement is 1 at both ends */
    const unsigned v = *reinterpret_cast<const unsigned short *>(ends + 2 * t);
    return (v & 0x0202u) ? kIsRefused : v == 0x0101u ? kIsTaken : kUndecided;
}

/* The lists' entries: the first cap in shared memory, the rest in global memory. */
struct ListView {
    const int *s, *g;
    int cap;
    __device__ __forceinline__ int operator[](int q) const { return q < cap ? s[q] : g[q]; }
};

/* vertex_step_t's rules (knn_cap.cuh) as one round's reading phase for one point: its decided
 * prefix passed (pos, acc), then what it writes in the writing phase: *mask (bit o: the entry
 * at pos + o, at most 32 of them) and *mark (kEndNo: it is full, it refuses them; kEndOk: it
 * agrees to them, each with room even if every undecided edge before it is taken). Returns
 * whether the point still has undecided edges. */
__device__ bool small_read(const ListView &list, int end, int max_degree,
                           const unsigned char *ends, int &pos, int &acc, unsigned &mask,
                           unsigned char &mark)
{
    mask = 0;
    while (pos < end) {
        const int s = end_state(ends, list[pos] >> 1);
        if (s == kUndecided)
            break;
        acc += s == kIsTaken;
        pos++;
    }
    if (pos == end)
        return false;
    if (acc >= max_degree) { /* full: every undecided edge from here is refused */
        mark = kEndNo;
        for (int o = 0; o < 32 && pos + o < end; o++) {
            const int e = list[pos + o], t = e >> 1;
            if (end_state(ends, t) == kUndecided && ends[e] == 0) /* (a mark never changes) */
                mask |= 1u << o;
        }
        return true;
    }
    mark = kEndOk;
    int maybe = 0; /* undecided or taken edges passed beyond the decided prefix */
    for (int o = 0; o < 32 && pos + o < end && acc + maybe < max_degree; o++) {
        const int e = list[pos + o], t = e >> 1;
        const int s = end_state(ends, t);
        if (s == kIsRefused)
            continue;
        if (s == kUndecided && ends[e] != kEndOk)
            mask |= 1u << o;
        maybe++;
    }
    return true;
}

/* The writing phase of a round for one point: its mark on the entries of mask. */
__device__ __forceinline__ void small_write(const ListView &list, unsigned char *ends, int pos,
                                            unsigned mask, unsigned char mark)
{
    while (mask) {
        const int o = __ffs(mask) - 1;
        mask &= mask - 1;
        ends[list[pos + o]] = mark;
    }
}

/* 5. The degree cap; each previous edge's place in the output (prev_pos: its rank among the
 * taken previous edges, -1 when not taken), the taken candidates' slots (taken_slot,
 * compacted in slot order; their number and the kept edges' in counters[]):
 * small_chunk_sort_kernel and small_merge_kernel write the output over many blocks, so that
 * this block reads only shared memory after its rounds. More taken than n max_degree / 2 sets
 * bit 1 of counters[0]. Dynamic shared memory: @p smem bytes (the marks: a byte per slot and
 * end; then as many of the lists' first entries as fit, the rest read from v_list). */
constexpr int kPerThread = kSmallN / kSmallThreads; /* points per thread */
__global__ void __launch_bounds__(kSmallThreads)
    small_cap_kernel(int n, int k, const int *__restrict__ hdr, int max_degree, int smem,
                     const int *__restrict__ v_off, const int *__restrict__ v_list,
                     const int *__restrict__ st, int *__restrict__ prev_pos,
                     int *__restrict__ taken_slot, int *counters)
{
    kr_pdl_wait();
    extern __shared__ __align__(16) uint64_t s_mem[];
    unsigned char *ends = reinterpret_cast<unsigned char *>(s_mem);
    __shared__ int s_part[kSmallThreads];
    const int tid = threadIdx.x, n_prev = hdr[0], total = n_prev + n * k;
    const int slots = (total + 15) / 16 * 16, st_bytes = 2 * slots; /* both ends' marks */
    const int entries = v_off[n];
    const int in_smem = max(0, min(entries, (smem - st_bytes) / 4));
    int *s_list = reinterpret_cast<int *>(ends + st_bytes);
    const ListView list = {s_list, v_list, in_smem};
    /* The marks: a dead slot (st: kRefused) refused at its first end; a kept previous edge
     * (a live slot below n_prev) taken at once, both ends agreeing: the previous frame gave
     * each point at most max_degree edges, so each point has at most max_degree kept ones,
     * all before its candidates in L, and the greedy takes every one of them; a candidate
     * undecided. Four slots per load and store (st is 16-byte aligned, slots a multiple of
     * 16). */
    {
        const int4 *st4 = reinterpret_cast<const int4 *>(st);
        uint2 *marks4 = reinterpret_cast<uint2 *>(ends); /* 8 bytes: 4 slots x 2 ends */
        const int whole = total / 4;
#pragma unroll 4
        for (int t4 = tid; t4 < slots / 4; t4 += kSmallThreads) {
            int v[4] = {1, 1, 1, 1}; /* st of the four slots (past total: dead) */
            if (t4 < whole) {
                const int4 q = st4[t4];
                v[0] = q.x;
                v[1] = q.y;
                v[2] = q.z;
                v[3] = q.w;
            } else {
                for (int b = 0; b < 4; b++)
                    if (4 * t4 + b < total)
                        v[b] = st[4 * t4 + b];
            }
            uint32_t m[2] = {0, 0};
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const bool kept = v[b] == 0 && 4 * t4 + b < n_prev;
                const uint32_t u_end = v[b] != 0 ? kEndNo : kept ? kEndOk : 0;
                const uint32_t v_end = kept ? kEndOk : 0;
                m[b >> 1] |= (u_end | v_end << 8) << (16 * (b & 1));
            }
            marks4[t4] = make_uint2(m[0], m[1]);
        }
    }
    { /* the lists' first in_smem entries: 16 bytes per load (both 16-byte aligned), two in
       * flight */
        const int quads = in_smem / 4;
        const int4 *src = reinterpret_cast<const int4 *>(v_list);
        int4 *dst = reinterpret_cast<int4 *>(s_list);
        for (int q0 = tid; q0 < quads; q0 += 2 * kSmallThreads) {
            const int q1 = q0 + kSmallThreads;
            const int4 x = src[q0], y = q1 < quads ? src[q1] : x;
            dst[q0] = x;
            if (q1 < quads)
                dst[q1] = y;
        }
        for (int q = 4 * quads + tid; q < in_smem; q += kSmallThreads)
            s_list[q] = v_list[q];
    }
    int pos[kPerThread], end[kPerThread], acc[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; j++) {
        const int u = tid + j * kSmallThreads;
        pos[j] = u < n ? v_off[u] : 0;
        end[j] = u < n ? v_off[u + 1] : 0;
        acc[j] = 0;
    }
    __syncthreads();
    /* Rounds: every point reads (its edges' marks, as the last round left them), a barrier,
     * every point writes its own marks, a barrier. The first undecided edge of L is decided in
     * every round (both its ends have passed every edge before it), so the rounds end. */
    for (;;) {
        unsigned mask[kPerThread];
        unsigned char mark[kPerThread];
        int pending = 0;
#pragma unroll
        for (int j = 0; j < kPerThread; j++) {
            mask[j] = 0;
            mark[j] = 0;
            if (pos[j] < end[j])
                pending |= small_read(list, end[j], max_degree, ends, pos[j], acc[j],
                                      mask[j], mark[j]);
        }
        if (!__syncthreads_or(pending))
            break;
#pragma unroll
        for (int j = 0; j < kPerThread; j++)
            if (mask[j])
                small_write(list, ends, pos[j], mask[j], mark[j]);
        __syncthreads();
    }
    /* The taken previous edges, in their order: a count per contiguous chunk, a scan. */
    const int per = (n_prev + kSmallThreads - 1) / kSmallThreads;
    const int lo = min(tid * per, n_prev), hi = min(lo + per, n_prev);
    int mine = 0;
    for (int t = lo; t < hi; t++)
        mine += end_state(ends, t) == kIsTaken;
    s_part[tid] = mine;
    __syncthreads();
    for (int off = 1; off < kSmallThreads; off <<= 1) {
        const int v = tid >= off ? s_part[tid - off] : 0;
        __syncthreads();
        s_part[tid] += v;
        __syncthreads();
    }
    const int kept = s_part[kSmallThreads - 1];
    int at = s_part[tid] - mine;
    for (int t = lo; t < hi; t++)
        prev_pos[t] = end_state(ends, t) == kIsTaken ? at++ : -1;
    __syncthreads(); /* every thread has read s_part */
    /* The taken candidates' slots, compacted in slot order (a count per contiguous range of
     * slots, a scan): small_chunk_sort_kernel and small_merge_kernel put them in key order. */
    const int n_cand = total - n_prev, cper = (n_cand + kSmallThreads - 1) / kSmallThreads;
    const int clo = min(tid * cper, n_cand), chi = min(clo + cper, n_cand);
    int cmine = 0;
    for (int c = clo; c < chi; c++)
        cmine += end_state(ends, n_prev + c) == kIsTaken;
    s_part[tid] = cmine;
    __syncthreads();
    for (int off = 1; off < kSmallThreads; off <<= 1) {
        const int v = tid >= off ? s_part[tid - off] : 0;
        __syncthreads();
        s_part[tid] += v;
        __syncthreads();
    }
    const int taken = s_part[kSmallThreads - 1];
    if ((long long)kept + taken > (long long)n * max_degree / 2) {
        /* cannot happen: each taken edge uses two of the n points' max_degree places */
        if (tid == 0) {
            atomicOr(&counters[0], 2);
            counters[kCountKept] = kept;
            counters[kCountTaken] = 0;
        }
        return;
    }
    int cat = s_part[tid] - cmine;
    for (int c = clo; c < chi; c++)
        if (end_state(ends, n_prev + c) == kIsTaken)
            taken_slot[cat++] = n_prev + c;
    if (tid == 0) {
        counters[kCountKept] = kept;
        counters[kCountTaken] = taken;
    }
}

/* 6a. The taken candidates' keys (counters[kCountTaken] of them: key[taken_slot[..]]) sorted
 * in chunks of kChunk, a block each (bitonic in shared memory): chunk c is sorted[c kChunk ..]. */
constexpr int kChunk = 1024;
constexpr int kChunkThreads = kChunk / 2;
__global__ void __launch_bounds__(kChunkThreads)
    small_chunk_sort_kernel(const int *__restrict__ taken_slot, const uint64_t *__restrict__ key,
                            const int *counters, uint64_t *__restrict__ sorted)
{
    kr_pdl_wait();
    __shared__ uint64_t s_k[kChunk];
    const int c0 = blockIdx.x * kChunk, m = min(kChunk, counters[kCountTaken] - c0);
    if (m <= 0)
        return;
    const int len = pow2_at_least(m);
    for (int i = threadIdx.x; i < len; i += kChunkThreads)
        s_k[i] = i < m ? key[taken_slot[c0 + i]] : ~0ull;
    __syncthreads();
    for (int size = 2; size <= len; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int p = threadIdx.x; p < (len >> 1); p += kChunkThreads) {
                const int i = ((p & ~(stride - 1)) << 1) | (p & (stride - 1)), j = i | stride;
                const uint64_t x = s_k[i], y = s_k[j];
                if ((x > y) == ((i & size) == 0)) {
                    s_k[i] = y;
                    s_k[j] = x;
                }
            }
            __syncthreads();
        }
    for (int i = threadIdx.x; i < m; i += kChunkThreads)
        sorted[c0 + i] = s_k[i];
}

/* 6b. The output. The taken previous edges at their places (prev_pos, from small_cap_kernel;
 * hdr[0] slots), over the whole grid. Each taken candidate's place among the taken ones is its
 * place in its own sorted chunk plus, for every other chunk, the number of its keys below (a
 * binary search; the keys are distinct): with every sorted key in dynamic shared memory when
 * @p smem bytes hold them (one load, no barrier per chunk), else chunk by chunk through a
 * static buffer. Written after the kept previous edges; counters[1]: the number of edges. A
 * block of kChunk threads per chunk. */
__global__ void __launch_bounds__(kChunk)
    small_merge_kernel(const uint64_t *__restrict__ sorted, const uint32_t *__restrict__ ids,
                       const int *__restrict__ sorted_idx, const int *__restrict__ hdr,
                       const int *__restrict__ prev_pos, const int *__restrict__ l_u,
                       const int *__restrict__ l_v, int smem, keyer_knn_edge *__restrict__ next,
                       int *__restrict__ next_at, int *counters)
{
    kr_pdl_wait();
    extern __shared__ __align__(16) uint64_t s_all[];
    __shared__ uint64_t s_k[kChunk];
    const int kept = counters[kCountKept], taken = counters[kCountTaken];
    const int c = blockIdx.x, p = threadIdx.x, m = min(kChunk, taken - c * kChunk);
    if (c == 0 && p == 0) {
        counters[1] = kept + taken;
        put_counters(next, counters[0], kept + taken);
    }
    for (int t = c * kChunk + p, n_prev = hdr[0]; t < n_prev; t += gridDim.x * kChunk) {
        const int at = prev_pos[t];
        if (at >= 0)
            put_edge(ids, l_u[t], l_v[t], at, next, next_at);
    }
    if (m <= 0)
        return;
    const uint64_t x = p < m ? sorted[c * kChunk + p] : 0;
    int place = p;
    const int chunks = (taken + kChunk - 1) / kChunk;
    if ((long long)taken * (long long)sizeof(uint64_t) <= (long long)smem) {
        for (int i = p; i < taken; i += kChunk)
            s_all[i] = sorted[i];
        __syncthreads();
        for (int o = 0; o < chunks; o++) {
            if (o == c)
                continue;
            const uint64_t *ck = s_all + o * kChunk;
            int lo = 0, hi = min(kChunk, taken - o * kChunk);
            while (lo < hi) {
                const int mid = (lo + hi) >> 1;
                if (ck[mid] < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            place += lo;
        }
    } else {
        for (int o = 0; o < chunks; o++) {
            if (o == c)
                continue;
            const int mo = min(kChunk, taken - o * kChunk);
            __syncthreads(); /* the previous chunk's searches are done */
            for (int i = p; i < mo; i += kChunk)
                s_k[i] = sorted[o * kChunk + i];
            __syncthreads();
            int lo = 0, hi = mo;
            while (lo < hi) {
                const int mid = (lo + hi) >> 1;
                if (s_k[mid] < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            place += lo;
        }
    }
    if (p >= m)
        return;
    const uint64_t rank_mask = (1ull << kRankBits) - 1;
    const int u = sorted_idx[(int)((x >> kRankBits) & rank_mask)];
    const int v = sorted_idx[(int)(x & rank_mask)];
    put_edge(ids, u, v, kept + place, next, next_at);
}

/* ---- plan, launcher ------------------------------------------------------------------- */

/* The small path's sizes for an update of n points (ok: it applies; knn_small.cuh's limits). */
struct SmallPlan {
    bool ok;
    bool replay;       /* the launches below hold for any number of previous edges up to
                          n max_degree / 2 (and this update has no more): a captured update of
                          n points can be replayed */
    int p_grid;        /* previous edges the grids cover (P, or n max_degree / 2 for a replay) */
    int chunks;        /* blocks of the output's sort: kChunk keys each, for every edge that can
                          be taken (at most n max_degree / 2, and at most the n k candidates) */
    size_t cap_smem;   /* small_cap_kernel's dynamic shared memory */
    size_t merge_smem; /* small_merge_kernel's: every taken key (0: it goes chunk by chunk) */
};

SmallPlan small_plan(const State *s, int n)
{
    SmallPlan sp = {false, false, 0, 0, 0, 0};
    const long long nk = (long long)n * s->p.k, total = (long long)s->n_prev + nk;
    const long long half = (long long)n * s->p.max_degree / 2;
    /* the degree cap's marks: two bytes per slot of L (16-byte aligned) */
    if (n > kSmallN || s->p.k > kSweepK || s->small_smem <= 0 || 2 * (total + 16) > s->small_smem)
        return sp;
    sp.replay = s->n_prev <= half && 2 * (half + nk + 16) <= s->small_smem;
    sp.p_grid = sp.replay ? (int)half : s->n_prev;
    const long long most = half < nk ? half : nk;
    sp.chunks = (int)((most + kChunk - 1) / kChunk);
    if (sp.chunks < 1)
        sp.chunks = 1;
    sp.cap_smem = (size_t)s->small_smem; /* the lists go there too when they fit */
    const long long keys = most * (long long)sizeof(uint64_t);
    sp.merge_smem = keys <= s->merge_smem ? (size_t)keys : 0;
    sp.ok = true;
    return sp;
}

/* Queues the small path's update of n points (on the device) on @p stream (knn_small.cuh).
 * The number of previous edges is read on the device (s->hdr[0]); the grids cover sp.p_grid. */
cudaError_t launch_small(State *s, int n, const SmallPlan &sp, cudaStream_t stream)
{
    const int k = s->p.k, nk = n * k;
    cudaError_t e;
#define KNN_SMALL_CHECK(x)                                                                     \
    do {                                                                                       \
        if ((e = (x)) != cudaSuccess)                                                          \
            return e;                                                                          \
    } while (0)
#define KNN_SMALL_LAUNCHED() KNN_SMALL_CHECK(cudaGetLastError())
    KNN_SMALL_CHECK(cudaMemsetAsync(s->rank2, 0, 2 * (size_t)n * sizeof(int), stream));
    const unsigned tiles = (unsigned)((n + kRankChunk - 1) / kRankChunk);
    sweep_rank_kernel<<<dim3(tiles, tiles), kRankChunk, 0, stream>>>(s->ids, s->xy, n, s->rank2);
    KNN_SMALL_LAUNCHED();
    /* the kernels from here on chained (chain_launch) */
    const bool ch = s->chain;
    KNN_SMALL_CHECK(chain_launch(ch, sweep_order_kernel, blocks(n), kThreads, 0, stream, s->ids,
                                 s->xy, n, s->rank2, s->sorted_ids, s->sorted_idx, s->rank, s->xs,
                                 s->xs_idx, s->deg, s->counters));
    KNN_SMALL_CHECK(chain_launch(ch, sweep_knn_kernel,
                                 (unsigned)((n + kSweepThreads / 32 - 1) / (kSweepThreads / 32)),
                                 kSweepThreads, 0, stream, s->xy, s->xs, s->xs_idx, s->rank2,
                                 s->sorted_ids, s->rank, n, k, s->p.max_dy, s->counters, s->knn_d2,
                                 s->knn_j, s->n_knn, s->kth, s->drop, s->cell_fill));
    /* the far points (cell_fill: their list) */
    KNN_SMALL_CHECK(chain_launch(ch, hard_kernel, kHardBlocks, kHardThreads, 0, stream, s->xy, n, k,
                                 s->p.max_dy, s->cell_fill, s->counters, s->knn_d2, s->knn_j,
                                 s->n_knn, s->kth));
    if (sp.p_grid > 0)
        KNN_SMALL_CHECK(chain_launch(ch, prev_kernel, blocks(sp.p_grid), kThreads, 0, stream,
                                     s->prev, s->prev_at, s->hdr, s->ids, s->xy, n, s->sorted_ids,
                                     s->sorted_idx, s->knn_j, s->n_knn, s->kth, k, s->p.max_dy,
                                     s->p.hysteresis, s->drop, s->l_u, s->l_v, s->st, s->vkey,
                                     s->vval));
    KNN_SMALL_CHECK(chain_launch(ch, small_cand_kernel, blocks((long long)sp.p_grid + nk), kThreads,
                                 0, stream, s->hdr, n, s->ids, s->rank, s->knn_j, s->n_knn,
                                 s->knn_d2, k, s->drop, s->l_u, s->l_v, s->st, s->key, s->deg));
    /* the lists (v_rank), their offsets (v_off); v_pos: the fill's cursors */
    KNN_SMALL_CHECK(chain_launch(ch, small_offsets_kernel, 1, kSmallThreads, 0, stream, n, s->deg,
                                 s->v_off, s->v_pos));
    KNN_SMALL_CHECK(chain_launch(ch, small_fill_kernel, blocks((long long)sp.p_grid + nk), kThreads,
                                 0, stream, s->hdr, n, k, s->st, s->l_u, s->l_v, s->v_pos,
                                 s->v_rank));
    KNN_SMALL_CHECK(chain_launch(ch, small_sort_kernel, blocks(n), kThreads, 0, stream, n, s->v_off,
                                 s->key, s->v_rank));
    /* s->flag: the previous edges' places; s->at: the taken candidates' slots */
    KNN_SMALL_CHECK(chain_launch(ch, small_cap_kernel, 1, kSmallThreads, sp.cap_smem, stream, n, k,
                                 s->hdr, s->p.max_degree, (int)sp.cap_smem, s->v_off, s->v_rank,
                                 s->st, s->flag, s->at, s->counters));
    KNN_SMALL_CHECK(chain_launch(ch, small_chunk_sort_kernel, sp.chunks, kChunkThreads, 0, stream,
                                 s->at, s->key, s->counters, s->ckey_sorted));
    KNN_SMALL_CHECK(chain_launch(ch, small_merge_kernel, sp.chunks, kChunk, sp.merge_smem, stream,
                                 s->ckey_sorted, s->ids, s->sorted_idx, s->hdr, s->flag, s->l_u,
                                 s->l_v, (int)sp.merge_smem, s->next, s->next_at, s->counters));
#undef KNN_SMALL_LAUNCHED
#undef KNN_SMALL_CHECK
    return cudaSuccess;
}

/* The small path's shared memory: s->small_smem set to what small_cap_kernel may have on this
 * device (0: none; then every update takes the large path), s->merge_smem to what
 * small_merge_kernel may have (0: its chunk-by-chunk way only). */
cudaError_t small_path_setup(State *s)
{
    int optin = 0;
    cudaFuncAttributes fa, fm;
    cudaError_t e;
    s->small_smem = 0;
    s->merge_smem = 0;
    s->chain = false;
    int major = 0;
    if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, s->device)) !=
        cudaSuccess)
        return e;
    s->chain = major >= 9;
    if ((e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                    s->device)) != cudaSuccess ||
        (e = cudaFuncGetAttributes(&fa, small_cap_kernel)) != cudaSuccess ||
        (e = cudaFuncGetAttributes(&fm, small_merge_kernel)) != cudaSuccess)
        return e;
    const long long merge_room = (long long)optin - (long long)fm.sharedSizeBytes - 1024;
    if (merge_room >= kChunk * (long long)sizeof(uint64_t)) {
        if ((e = cudaFuncSetAttribute(small_merge_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)merge_room)) != cudaSuccess)
            return e;
        s->merge_smem = (int)merge_room;
    }
    long long room = (long long)optin - (long long)fa.sharedSizeBytes - 1024;
    if (room > kSmallSmem)
        room = kSmallSmem;
    if (room < kSmallN * (long long)sizeof(uint64_t))
        return cudaSuccess; /* a small device: the large path only */
    if ((e = cudaFuncSetAttribute(small_cap_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)room)) != cudaSuccess)
        return e;
    s->small_smem = (int)room;
    return cudaSuccess;
}

#endif /* KEYER_OVERLAY_CUDA_KNN_SMALL_CUH */
