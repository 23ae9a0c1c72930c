/*
 * The degree cap of the CUDA kNN graph (included by knn.cu only): every point walks its
 * incident edges of L in order (v_rank[v_off[u]..v_off[u+1]), the ranks of its edges), counts
 * the taken ones of its decided prefix (v_pos, v_acc), and posts "my side agrees" on each
 * following edge for as long as even all undecided edges before it being taken would leave
 * room, or refuses the first undecided one once its count is full. An edge is taken when both
 * of its ends agree (st: the edge's state bits; l_u: its first end). The first undecided edge
 * of L is decided in every round, so the rounds end, and each decision is the one of the
 * sequential greedy (an end agrees only when fewer than max_degree edges before it can be
 * taken, and refuses only when max_degree are).
 */
#ifndef KEYER_OVERLAY_CUDA_KNN_CAP_CUH
#define KEYER_OVERLAY_CUDA_KNN_CAP_CUH

namespace {

/* Edge states of the degree cap (bits). */
constexpr int kOkU = 1, kOkV = 2, kTaken = 4, kRefused = 8;

/* An edge's state as another thread may be changing it: a volatile read (global memory), or an
 * atomic one (shared memory, where the race checker sees atomics as such). */
template <bool kAtomicRead> __device__ __forceinline__ int state_of(int *st, int r)
{
    if (kAtomicRead)
        return atomicOr(&st[r], 0);
    return static_cast<volatile int *>(st)[r];
}

/* One step of point u in the degree cap (see the file's comment). Returns whether u still has
 * undecided edges. kAtomicRead: read the states with atomics (st in shared memory). */
template <bool kAtomicRead>
__device__ bool vertex_step_t(int u, int max_degree, const int *__restrict__ v_off,
                              const int *__restrict__ v_rank, const int *__restrict__ l_u,
                              int *v_pos, int *v_acc, int *st)
{
    int pos = v_pos[u], acc = v_acc[u];
    const int end = v_off[u + 1];
    for (;;) {
        while (pos < end) {
            const int s = state_of<kAtomicRead>(st, v_rank[pos]);
            if (s & kTaken) {
                acc++;
                pos++;
            } else if (s & kRefused) {
                pos++;
            } else {
                break;
            }
        }
        if (pos < end && acc >= max_degree) { /* full: the next edge is refused here */
            atomicOr(&st[v_rank[pos]], kRefused);
            pos++;
            continue;
        }
        break;
    }
    v_pos[u] = pos;
    v_acc[u] = acc;
    if (pos == end)
        return false;
    int maybe = 0; /* undecided or taken edges passed beyond the decided prefix */
    for (int q = pos; q < end && acc + maybe < max_degree; q++) {
        const int r = v_rank[q];
        int s = state_of<kAtomicRead>(st, r);
        if (s & kRefused)
            continue;
        if (!(s & kTaken)) {
            const int mine = l_u[r] == u ? kOkU : kOkV, other = mine ^ (kOkU | kOkV);
            if (!(s & mine))
                s = atomicOr(&st[r], mine) | mine;
            if ((s & other) && !(s & kRefused))
                atomicOr(&st[r], kTaken);
        }
        maybe++;
    }
    return true;
}

/* The large path's step: states in global memory. */
__device__ __forceinline__ bool vertex_step(int u, int max_degree, const int *__restrict__ v_off,
                                            const int *__restrict__ v_rank,
                                            const int *__restrict__ l_u, int *v_pos, int *v_acc,
                                            int *st)
{
    return vertex_step_t<false>(u, max_degree, v_off, v_rank, l_u, v_pos, v_acc, st);
}

/* One round over all points (a thread per point). */
__global__ void round_kernel(int n, int max_degree, const int *__restrict__ v_off,
                             const int *__restrict__ v_rank, const int *__restrict__ l_u,
                             int *v_pos, int *v_acc, int *st)
{
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u < n)
        vertex_step(u, max_degree, v_off, v_rank, l_u, v_pos, v_acc, st);
}

/* The rounds left after the grid-wide ones, in one block, until every edge is decided. Each
 * round decides at least the first undecided edge of L, so @p total rounds (the edges of L)
 * always suffice: past them (a broken invariant, never expected) the block stops and sets
 * bit 2 of counters[0] (the host reports an internal error) instead of looping on. */
__global__ void __launch_bounds__(1024)
    finish_kernel(int n, int max_degree, const int *__restrict__ v_off,
                  const int *__restrict__ v_rank, const int *__restrict__ l_u, int *v_pos,
                  int *v_acc, int *st, int total, int *counters)
{
    for (int round = 0;; round++) {
        int pending = 0;
        for (int u = threadIdx.x; u < n; u += blockDim.x)
            pending |= vertex_step(u, max_degree, v_off, v_rank, l_u, v_pos, v_acc, st);
        if (!__syncthreads_or(pending))
            return;
        if (round > total) {
            if (threadIdx.x == 0)
                atomicOr(&counters[0], 4);
            return;
        }
    }
}

} // namespace

#endif /* KEYER_OVERLAY_CUDA_KNN_CAP_CUH */
