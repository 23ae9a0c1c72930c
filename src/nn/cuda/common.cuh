/*
 * Device helpers shared by the cuda backend's kernels: element loads/stores for float and
 * __half (arithmetic is always float), the fused clamp + post function epilogue, and shape
 * helpers on the host side. Included by the .cu files only; the per-operator device functions
 * built on these are in ops/.
 */
#ifndef KEYER_NN_CUDA_COMMON_CUH
#define KEYER_NN_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/cuda/pdl.cuh"
#include "nn/cuda/ops.h"

__device__ __forceinline__ float kr_ld(const float *p) { return *p; }
__device__ __forceinline__ float kr_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ void kr_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void kr_st(__half *p, float v) { *p = __float2half_rn(v); }

/* V consecutive elements (V = 1, 2 or 4, and 8 for __half; the caller guarantees V *
 * sizeof(T) alignment for 2, 4 and 8): one 4-, 8- or 16-byte access where V > 1, else per
 * element. */
template <int V> __device__ __forceinline__ void kr_ldv(const float *p, float *v)
{
    if (V == 4) {
        float4 q = *reinterpret_cast<const float4 *>(p);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else if (V == 2) {
        const float2 q = *reinterpret_cast<const float2 *>(p);
        v[0] = q.x, v[1] = q.y;
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = p[k];
    }
}
template <int V> __device__ __forceinline__ void kr_ldv(const __half *p, float *v)
{
    if (V == 8) {
        const uint4 q = *reinterpret_cast<const uint4 *>(p);
        const __half2 *h = reinterpret_cast<const __half2 *>(&q);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __half22float2(h[k]);
            v[2 * k] = f.x, v[2 * k + 1] = f.y;
        }
    } else if (V == 4) {
        uint2 q = *reinterpret_cast<const uint2 *>(p);
        float2 lo = __half22float2(*reinterpret_cast<const __half2 *>(&q.x));
        float2 hi = __half22float2(*reinterpret_cast<const __half2 *>(&q.y));
        v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
    } else if (V == 2) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(p));
        v[0] = f.x, v[1] = f.y;
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] = __half2float(p[k]);
    }
}
template <int V> __device__ __forceinline__ void kr_stv(float *p, const float *v)
{
    if (V == 4) {
        *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else if (V == 2) {
        *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            p[k] = v[k];
    }
}
template <int V> __device__ __forceinline__ void kr_stv(__half *p, const float *v)
{
    if (V == 8) {
        uint4 q;
        __half2 *h = reinterpret_cast<__half2 *>(&q);
#pragma unroll
        for (int k = 0; k < 4; k++)
            h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
        *reinterpret_cast<uint4 *>(p) = q;
    } else if (V == 4) {
        __half2 lo = __floats2half2_rn(v[0], v[1]), hi = __floats2half2_rn(v[2], v[3]);
        uint2 q;
        q.x = *reinterpret_cast<const unsigned *>(&lo);
        q.y = *reinterpret_cast<const unsigned *>(&hi);
        *reinterpret_cast<uint2 *>(p) = q;
    } else if (V == 2) {
        *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(v[0], v[1]);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            p[k] = __float2half_rn(v[k]);
    }
}

/* @p v as the element type T stores it: itself for float, rounded to half and back for __half
 * (where a fused kernel keeps a value that the unfused nodes would have stored). */
template <typename T> __device__ __forceinline__ float kr_stored(float v) { return v; }
template <> __device__ __forceinline__ float kr_stored<__half>(float v)
{
    return __half2float(__float2half_rn(v));
}

/* Unit @p g of an NHWC tensor walked with the channel groups fastest (@p cv groups a pixel,
 * @p ow pixels a row, @p oh rows an item) -> its item (returned), row *@p oy, column *@p ox and
 * channel group *@p cg: the flat index split of the one-thread-per-unit kernels. */
template <typename I>
__device__ __forceinline__ I kr_nhwc_split(I g, int cv, int ow, int oh, int *oy, int *ox, int *cg)
{
    *cg = (int)(g % cv);
    const I p = g / cv;
    *ox = (int)(p % ow);
    const I q = p / ow;
    *oy = (int)(q % oh);
    return q / oh;
}

/* The taps of a window inside the input, in (ky, kx) order: f(ky, kx, iy, ix) for each tap
 * (iy, ix) = (oy * sh - pt + ky * dh, ox * sw - pl + kx * dw) with 0 <= iy < ih and
 * 0 <= ix < iw; taps outside (padding) are skipped. @p s: any shape with the fields kh, kw, sh,
 * sw, dh, dw, pt, pl, ih, iw (the per-node window shapes, a persistent step). */
template <typename S, typename F>
__device__ __forceinline__ void kr_window_taps(const S &s, int oy, int ox, F f)
{
    for (int ky = 0; ky < s.kh; ky++) {
        const int iy = oy * s.sh - s.pt + ky * s.dh;
        if ((unsigned)iy >= (unsigned)s.ih)
            continue;
        for (int kx = 0; kx < s.kw; kx++) {
            const int ix = ox * s.sw - s.pl + kx * s.dw;
            if ((unsigned)ix < (unsigned)s.iw)
                f(ky, kx, iy, ix);
        }
    }
}

/* The walk of the kernels that take one output row per block row (the half-vector pool,
 * depthwise and resize kernels): block rows (blockIdx.y) stride over @p rows = items x output
 * rows (@p oh rows an item), the threads of a block row over the row's @p per_row units (a
 * unit: V channels of one or more output pixels), so that a thread divides only by its unit
 * size; f(b, oy, row, i) for item b, its output row oy, the row's index row and unit i. Launch
 * with kr_row_units_grid. */
template <typename F>
__device__ __forceinline__ void kr_for_row_units(int rows, int oh, int per_row, F f)
{
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        const int b = row / oh, oy = row - b * oh;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per_row;
             i += gridDim.x * blockDim.x)
            f(b, oy, row, i);
    }
}

/* The launch shape of a kr_for_row_units kernel: *@p threads per block (@p max_threads, or the
 * row's @p per_row units rounded up to whole warps when fewer), blocks to cover a row times
 * @p rows block rows (at most 65535; the walk strides over the rest). */
static inline dim3 kr_row_units_grid(int rows, int per_row, int max_threads, unsigned *threads)
{
    const int t = per_row >= max_threads ? max_threads : (per_row + 31) / 32 * 32;
    *threads = (unsigned)t;
    return dim3((unsigned)((per_row + t - 1) / t), (unsigned)(rows < 65535 ? rows : 65535));
}

static inline int kr_aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

/* The node's own fused activation as a clamp, then the folded following activation, then the
 * folded residual ADD (res: the ADD's other operand in the element type, or NULL). */
struct kr_epilogue {
    float lo, hi;
    int post;
    const void *res;
};

/* @p v / 6 without a division: the product by the rounded 1/6, corrected once by its residual
 * (fused multiply-adds). Equal to the IEEE quotient for every float whose quotient is a normal
 * number (checked exhaustively); a subnormal quotient may differ in its last bit. The hard
 * swish's division was a measurable part of the small-batch latency
 * (docs/notes/cuda-cluster-segment.md). */
__device__ __forceinline__ float kr_div6(float v)
{
    const float q = v * (1.0f / 6.0f);
    return fmaf(fmaf(-q, 6.0f, v), 1.0f / 6.0f, q);
}

__device__ __forceinline__ float kr_apply(const kr_epilogue &e, float v)
{
    v = fminf(fmaxf(v, e.lo), e.hi);
    switch (e.post) {
    case KR_CUDA_POST_RELU: return fmaxf(v, 0.0f);
    case KR_CUDA_POST_RELU6: return fminf(fmaxf(v, 0.0f), 6.0f);
    case KR_CUDA_POST_HARD_SWISH: return kr_div6(v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f));
    case KR_CUDA_POST_LOGISTIC: return 1.0f / (1.0f + expf(-v));
    default: return v;
    }
}

/* The activation P (KR_CUDA_POST_*) as a type, for kr_with_post. */
template <int P> struct kr_post_c {
    static constexpr int value = P;
};

/* Calls @p f with kr_post_c<P>() for the activation @p post (KR_CUDA_POST_*; another value as
 * NONE), so that the body of @p f (a generic lambda: decltype(pc)::value) has it as a constant:
 * one copy of that body per activation, not a switch per value. */
template <typename F> __device__ __forceinline__ void kr_with_post(int post, F &&f)
{
    switch (post) {
    case KR_CUDA_POST_RELU: f(kr_post_c<KR_CUDA_POST_RELU>()); break;
    case KR_CUDA_POST_RELU6: f(kr_post_c<KR_CUDA_POST_RELU6>()); break;
    case KR_CUDA_POST_HARD_SWISH: f(kr_post_c<KR_CUDA_POST_HARD_SWISH>()); break;
    case KR_CUDA_POST_LOGISTIC: f(kr_post_c<KR_CUDA_POST_LOGISTIC>()); break;
    default: f(kr_post_c<KR_CUDA_POST_NONE>());
    }
}

static inline kr_epilogue kr_make_epilogue(const kr_cuda_op *op, int use_activation)
{
    kr_epilogue e;
    kr_activation_range(use_activation ? op->node->activation : KR_ACT_NONE, &e.lo, &e.hi);
    e.post = (int)op->post;
    e.res = op->residual;
    return e;
}

/* v[0..V) += the folded residual at output element @p idx (V = 4 needs idx % 4 == 0). */
template <typename T, int V, typename I>
__device__ __forceinline__ void kr_add_res(const kr_epilogue &e, I idx, float *v)
{
    if (e.res) {
        float r[V];
        kr_ldv<V>((const T *)e.res + idx, r);
#pragma unroll
        for (int k = 0; k < V; k++)
            v[k] += r[k];
    }
}

static inline const kr_tensor *kr_in_t(const kr_cuda_op *op, int i)
{
    return &op->graph->tensors[op->node->inputs[i]];
}
static inline const kr_tensor *kr_out_t(const kr_cuda_op *op)
{
    return &op->graph->tensors[op->node->outputs[0]];
}
/* Extent of dimension @p d at the run's batch (constants are not scaled). */
static inline int kr_dim(const kr_cuda_op *op, const kr_tensor *t, int d)
{
    return (d == 0 && !kr_tensor_is_const(t)) ? t->dims[0] * op->batch : t->dims[d];
}
static inline size_t kr_elems(const kr_cuda_op *op, const kr_tensor *t)
{
    size_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= (size_t)kr_dim(op, t, d);
    return n;
}
/* Blocks for @p n elements at @p threads per block, at most 524288: the element-wise kernels
 * stride over the grid, so larger tensors take several passes instead of more blocks. */
static inline unsigned kr_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65536u * 8 ? 65536u * 8 : (b ? b : 1));
}

/* Whether every activation tensor of the node has fewer than 2^31 elements at the run's batch:
 * then kernels do their index arithmetic in 32 bits (64-bit division is several times slower
 * on the GPU and dominated the element-wise kernels). */
static inline int kr_small_index(const kr_cuda_op *op)
{
    size_t limit = (size_t)1 << 31;
    if (kr_elems(op, kr_out_t(op)) >= limit)
        return 0;
    for (int i = 0; i < op->node->n_inputs; i++)
        if (op->node->inputs[i] >= 0 && kr_elems(op, kr_in_t(op, i)) >= limit)
            return 0;
    return 1;
}

/* Runs LAUNCH<T, I>(op) for the instance's element type T and index type I. */
#define KR_BY_TYPE_IDX(LAUNCH, op)                                                                 \
    (kr_small_index(op) ? ((op)->f16 ? LAUNCH<__half, unsigned>(op) : LAUNCH<float, unsigned>(op)) \
                        : ((op)->f16 ? LAUNCH<__half, size_t>(op) : LAUNCH<float, size_t>(op)))

/* Runs LAUNCH<T>(op) for the instance's element type. */
#define KR_BY_TYPE(LAUNCH, op) ((op)->f16 ? LAUNCH<__half>(op) : LAUNCH<float>(op))

/* ---- shared memory and the tensor cores' fragment loads (conv_2d_tc.cu, conv_2d_pw_mma.cu) */

/* The shared-memory address (the 32-bit one cp.async and ldmatrix take) of @p p. */
__device__ __forceinline__ unsigned kr_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* ldmatrix.x4: four 8 x 8 matrices of halves from shared memory into @p r (lanes 8 i to
 * 8 i + 7 give the row addresses of matrix i). Compute 7.5 and newer; elsewhere nothing (the
 * callers' kernels exist only there). */
__device__ __forceinline__ void kr_ldsm_x4(unsigned *r, unsigned addr)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

/* cp.async.commit_group: the thread's cp.async copies issued since the last commit become one
 * group (waited for with cp.async.wait_group). Compute 8.0 and newer; elsewhere nothing. */
__device__ __forceinline__ void kr_cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* mma.sync m16n8k8: c += a (16 x 8 halves, two registers) x b (8 x 8 halves, one register) with
 * float accumulation, in the fragment layouts of the PTX ISA. Compute 7.5 and newer; elsewhere
 * nothing (the callers' kernels exist only there). conv_2d.cu's narrow 16 -> 16 kernel and
 * conv_2d_pw_mma.cu use it. */
__device__ __forceinline__ void kr_mma_16x8x8(float *c, unsigned a0, unsigned a1, unsigned b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(b));
#endif
}

/* ---- Hopper's warpgroup MMA (wgmma, sm_90a: compiled only where __CUDA_ARCH_FEAT_SM90_ALL is
 * defined, i.e. for the architecture-specific target 90a; conv_2d_tc.cu's patch kernel). A
 * warpgroup is 4 consecutive warps (warp % 4 = its rank); each wgmma.mma_async computes a
 * 64 x N x 16 product of the whole warpgroup, asynchronously. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KR_HAVE_WGMMA 1

/* wgmma.fence: orders the warpgroup's earlier register writes (accumulators, A fragments)
 * before the wgmma.mma_async after it. */
__device__ __forceinline__ void kr_wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

/* wgmma.commit_group: the wgmma.mma_async issued since the last commit become one group. */
__device__ __forceinline__ void kr_wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* wgmma.wait_group N: until at most N of the warpgroup's committed groups are pending (0:
 * every wgmma finished, its accumulators written and its shared-memory operands read). */
template <int N> __device__ __forceinline__ void kr_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* fence.proxy.async for shared memory: the thread's generic-proxy writes to shared memory
 * (st.shared, completed cp.async) become visible to the async proxy that wgmma reads its
 * shared-memory operands through (before the barrier that lets them be read). */
__device__ __forceinline__ void kr_fence_proxy_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* An empty use and definition of register @p v: the compiler may not move its reads or writes
 * across this point (the accumulators of wgmma, written asynchronously until kr_wgmma_wait). */
__device__ __forceinline__ void kr_reg_fence(float &v) { asm volatile("" : "+f"(v)::"memory"); }

/* Calls @p f on each of the MI x NI x 4 accumulators of a warp's tensor-core fragments (i, j, q
 * in order, all unrolled): zeroing them, fencing them after a wgmma wait. */
template <int MI, int NI, typename F>
__device__ __forceinline__ void kr_each_acc(float (&acc)[MI][NI][4], F f)
{
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                f(acc[i][j][q]);
}

/* The shared-memory matrix descriptor of a K-major operand of 16 k (32 bytes a row) in the
 * 32-byte swizzle (Swizzle<1, 4, 3>: a row's two 16-byte halves swapped in rows 4-7 of every 8,
 * the 8-row core matrices 256 bytes apart), starting at shared address @p addr (a multiple of
 * 256): start address >> 4 (bits 0-13), leading byte offset 1 (unused for a swizzled K-major
 * operand one swizzle wide, bits 16-29), stride byte offset 256 >> 4 (bits 32-45), base offset 0
 * (bits 49-51), layout 3 = 32-byte swizzle (bits 62-63; 1 = 128-byte, 2 = 64-byte). */
__device__ __forceinline__ unsigned long long kr_wgmma_desc_sw32(unsigned addr)
{
    return (unsigned long long)((addr >> 4) & 0x3FFF) | (1ull << 16) | (16ull << 32) | (3ull << 62);
}

/* wgmma.mma_async m64nNk16, f16 inputs, f32 accumulation: d += a x b. @p a: this warp's 16 rows
 * of the 64 x 16 A in registers (warp % 4 supplies rows 16 (warp % 4) .. + 15, in mma.sync
 * m16n8k16's A fragment layout: ldmatrix.x4 of rows 0-15 at k 0 and 8); @p desc: B, 16 k x N,
 * K-major in shared memory (kr_wgmma_desc_sw32). d[j][0..3]: mma.sync's C fragment of the
 * warp's 16 rows and columns 8 j .. 8 j + 7. Asynchronous: the registers of a and d and the
 * shared memory of b must be left alone until kr_wgmma_wait says the group is done. */
template <int N>
__device__ __forceinline__ void kr_wgmma_f16(float (&d)[N / 8][4], const unsigned (&a)[4],
                                             unsigned long long desc);
template <>
__device__ __forceinline__ void kr_wgmma_f16<16>(float (&d)[2][4], const unsigned (&a)[4],
                                                  unsigned long long desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7"
                 "}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
                   "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
template <>
__device__ __forceinline__ void kr_wgmma_f16<32>(float (&d)[4][4], const unsigned (&a)[4],
                                                  unsigned long long desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,"
                 "%8,%9,%10,%11,%12,%13,%14,%15"
                 "}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
                   "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
                   "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
                   "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
template <>
__device__ __forceinline__ void kr_wgmma_f16<64>(float (&d)[8][4], const unsigned (&a)[4],
                                                  unsigned long long desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,"
                 "%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,"
                 "%24,%25,%26,%27,%28,%29,%30,%31"
                 "}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
                   "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
                   "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
                   "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
                   "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                   "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
                   "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
                   "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
#endif

#endif
