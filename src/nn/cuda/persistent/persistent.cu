/*
 * The persistent kernel (see persistent.h): one cooperative launch walks the steps; every
 * block takes a contiguous share of every step's units (share_begin/share_end), or, for a step
 * with a pool tail, one (item, slice) after another, or, for EXPAND_DW, one (item, tile,
 * channel group) after another; then all wait at a grid barrier
 * (cooperative_groups grid sync, which also orders the memory: a step reads what the steps
 * before it wrote, from any multiprocessor). Every step function runs the units [begin, end)
 * given to its block.
 *
 * The steps (step_common.cuh, squeeze.cuh, steps_conv.cuh, steps.cuh) compute with the
 * operators' device functions (ops/: float accumulation, the same epilogue: clamp, post
 * function, residual), in the orders listed there; a convolution output may be reduced by
 * `split` lanes of a warp (interleaved 4-channel chunks, then a butterfly of shuffles in fixed
 * order), so that small layers use the whole GPU. Activations are read with
 * plain loads (never the read-only path: they are written during the kernel). Latency is what
 * counts at these sizes, so loads are issued together where they can be: a convolution loads
 * 16 input channels before using them, bias and residual before the sums. (Asking the L1 for
 * the next step's weights during the current one, prefetch.L1, cost 20 us in all: measured,
 * dropped.)
 */
#include <cooperative_groups.h>

#include "nn/cuda/persistent/steps.cuh"

namespace cg = cooperative_groups;

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

/* Whether this block works on item @p n in step @p s (a prologue computes only those items'
 * excitations): the block's contiguous share of the step's units, or for a step with a pool
 * tail and EXPAND_DW the (item, slice or tile) units blockIdx.x, + gridDim.x, ... */
__device__ __forceinline__ bool block_has_item(const kr_cuda_step &s, int n)
{
    unsigned per; /* units per item */
    bool strided = true;
    if (s.kind == KR_STEP_EXPAND_DW) {
        const unsigned tx_n = (unsigned)((s.ow + s.tile - 1) / s.tile);
        const unsigned ty_n = (unsigned)((s.oh + s.tile - 1) / s.tile);
        per = ty_n * tx_n * (unsigned)(s.oc / s.chan);
    } else if (s.tail) {
        per = (unsigned)s.tail_slices;
    } else {
        strided = false;
        per = step_units(s) / (unsigned)s.batch;
    }
    const unsigned lo = (unsigned)n * per, hi = lo + per;
    if (strided) { /* the block's first unit at or after lo */
        const unsigned G = gridDim.x, first = lo + (blockIdx.x + G - lo % G) % G;
        return first < hi;
    }
    const unsigned units = step_units(s);
    return lo < share_end(units) && share_begin(units) < hi;
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
     * would wait on SMs this one's need (measured slower, docs/notes/cuda-cluster-segment.md) */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    __syncthreads();
    for (int i = 0; i < n; i++) {
        const kr_cuda_step &s = desc[i % 3];
        if (timing)
            clocks[4 * i] = clock64();
        const float *sc =
            s.se_layers
                ? se_prologue(s, se_buf, red, [&](int item) { return block_has_item(s, item); })
                : NULL;
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

extern "C" int kr_cuda_persistent_occupancy(int f16, const kr_gpu_caps *caps, int *cuda_error)
{
    int blocks = 0;
    cudaError_t e = f16 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                              &blocks, persistent_kernel<__half>, KR_CUDA_PERSISTENT_THREADS, 0)
                        : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                              &blocks, persistent_kernel<float>, KR_CUDA_PERSISTENT_THREADS, 0);
    if (e == cudaSuccess && caps && caps->emulated) { /* the emulated class's limits too */
        cudaFuncAttributes fa;
        e = f16 ? cudaFuncGetAttributes(&fa, persistent_kernel<__half>)
                : cudaFuncGetAttributes(&fa, persistent_kernel<float>);
        if (e == cudaSuccess) {
            const int cls = kr_gpu_blocks_per_sm(caps, KR_CUDA_PERSISTENT_THREADS, fa.numRegs,
                                                 fa.sharedSizeBytes);
            blocks = cls < blocks ? cls : blocks;
        }
    }
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
