/*
 * The per-node element-wise binary kernels shared by ADD, MUL, PRELU, SUB and DIV (the arithmetic per
 * element: ops/binary.cuh, kr_binary_out), with NumPy broadcasting (as
 * src/nn/reference/common.h): operand shapes are right-aligned to the output's rank; an operand
 * axis of extent 1 against a larger output extent does not advance.
 *
 * The launcher picks one of four index schemes on the host, so the kernels never walk a shape
 * they do not need to:
 *  - SAME: both operands have the output's shape (residual adds): flat.
 *  - CHAN_B / CHAN_A: one operand is full, the other varies at most along the last axis and the
 *    batch axis (per-channel scales of squeeze-and-excitation, scalars, PReLU alphas): its
 *    offset is (i / per_batch) * stride + i % C.
 *  - GENERAL: the broadcast walk over KR_MAX_DIMS axes (shapes left-padded with 1), unrolled so
 *    that the shape stays in kernel parameters (a loop with a run-time bound put the shape in
 *    local memory: 112 bytes per thread, and the kernels were bound by that traffic).
 * The flat and per-channel schemes move 4 elements per thread and iteration (float4, or four
 * halves in 8 bytes), or 8 halves in 16 bytes, when the sizes and pointers allow.
 */
#ifndef KEYER_NN_CUDA_BINARY_CUH
#define KEYER_NN_CUDA_BINARY_CUH

#include "nn/cuda/ops/binary.cuh"

enum { BIN_GENERAL = 0, BIN_SAME, BIN_CHAN_B, BIN_CHAN_A };

struct bcast {
    int dims[KR_MAX_DIMS];            /* output, left-padded with 1 */
    long long sa[KR_MAX_DIMS], sb[KR_MAX_DIMS];
    unsigned long long per_batch;     /* output elements per item of the first axis */
    int c;                            /* output's last extent */
    int cn;                           /* the per-channel operand's last extent (c or 1) */
    int batched;                      /* the per-channel operand advances along the first axis */
};

/* Strides of operand @p t against the padded output shape @p dims (0 on broadcast axes). */
static inline void bcast_strides(const kr_cuda_op *op, const kr_tensor *t, const int *dims,
                                 long long *strides)
{
    int shift = KR_MAX_DIMS - t->rank;
    long long s = 1;
    for (int d = KR_MAX_DIMS - 1; d >= 0; d--) {
        int td = d - shift;
        int extent = td >= 0 ? kr_dim(op, t, td) : 1;
        strides[d] = (extent == 1 && dims[d] != 1) ? 0 : s;
        s *= extent;
    }
}

/* Whether operand @p t, against output @p yt, varies only along the last axis and the first
 * axis; sets @p cn (its last extent) and @p batched. */
static inline int per_channel(const kr_cuda_op *op, const kr_tensor *t, const kr_tensor *yt,
                              int *cn, int *batched)
{
    if (t->rank > yt->rank || yt->rank < 1)
        return 0;
    int shift = yt->rank - t->rank;
    *cn = 1;
    *batched = 0;
    for (int d = 0; d < t->rank; d++) {
        int od = d + shift, e = kr_dim(op, t, d), oe = kr_dim(op, yt, od);
        if (e == 1 || e != oe)
            continue; /* e != oe cannot pass validation; treated as broadcast */
        if (od == yt->rank - 1)
            *cn = e;
        else if (od == 0)
            *batched = 1;
        else
            return 0;
    }
    return 1;
}

/* Chooses the scheme; returns the element count. */
static inline size_t bcast_init(const kr_cuda_op *op, bcast *w, int *mode, int commutative)
{
    const kr_tensor *yt = kr_out_t(op), *at = kr_in_t(op, 0), *bt = kr_in_t(op, 1);
    size_t total = kr_elems(op, yt);
    int shift = KR_MAX_DIMS - yt->rank;
    for (int d = 0; d < KR_MAX_DIMS; d++)
        w->dims[d] = d < shift ? 1 : kr_dim(op, yt, d - shift);
    bcast_strides(op, at, w->dims, w->sa);
    bcast_strides(op, bt, w->dims, w->sb);
    int c = yt->rank ? kr_dim(op, yt, yt->rank - 1) : 1;
    int n0 = yt->rank ? kr_dim(op, yt, 0) : 1;
    w->c = c;
    w->per_batch = total / (size_t)(n0 ? n0 : 1);
    if (kr_elems(op, at) == total && kr_elems(op, bt) == total) {
        *mode = BIN_SAME;
    } else if (kr_elems(op, at) == total && per_channel(op, bt, yt, &w->cn, &w->batched)) {
        *mode = BIN_CHAN_B;
    } else if (commutative && kr_elems(op, bt) == total &&
               per_channel(op, at, yt, &w->cn, &w->batched)) {
        *mode = BIN_CHAN_A;
    } else {
        *mode = BIN_GENERAL;
    }
    return total;
}

template <typename T, int F, typename I>
__global__ void binary_general(const T *__restrict__ a, const T *__restrict__ b,
                               T *__restrict__ y, I total, bcast w, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I ia = 0, ib = 0, r = i;
#pragma unroll
        for (int d = KR_MAX_DIMS - 1; d >= 0; d--) {
            I q = r / (I)w.dims[d];
            I x = r - q * (I)w.dims[d];
            ia += x * (I)w.sa[d];
            ib += x * (I)w.sb[d];
            r = q;
        }
        const float va = kr_ld(a + ia), vb = kr_ld(b + ib);
        float v;
        kr_binary_out<T, 1>(e, F, &va, &vb, i, &v);
        kr_st(y + i, v);
    }
}

/* SAME, CHAN_B or CHAN_A; V elements per step (1, 4, or 8 for halves). In CHAN_A the launcher passes the
 * operands swapped (full one first) and the kernel restores their order for the operation. */
template <typename T, int F, int MODE, int V, typename I>
__global__ void binary_flat(const T *__restrict__ full, const T *__restrict__ other,
                            T *__restrict__ y, I total, bcast w, kr_epilogue e)
{
    I step = (I)gridDim.x * blockDim.x * V;
    for (I i = (blockIdx.x * (I)blockDim.x + threadIdx.x) * V; i < total; i += step) {
        float va[V], vb[V], vy[V];
        kr_ldv<V>(full + i, va);
        if (MODE == BIN_SAME) {
            kr_ldv<V>(other + i, vb);
        } else {
            I base = w.batched ? (I)(i / (I)w.per_batch) * (I)w.cn : 0;
            kr_ld_chan<V>(other + base, (size_t)(i % (I)w.c), w.cn, vb);
        }
        if (MODE == BIN_CHAN_A)
            kr_binary_out<T, V>(e, F, vb, va, i, vy);
        else
            kr_binary_out<T, V>(e, F, va, vb, i, vy);
        kr_stv<V>(y + i, vy);
    }
}

template <typename T, int F, int MODE, typename I>
static void binary_flat_launch(const kr_cuda_op *op, const T *full, const T *other, size_t total,
                               const bcast &w, kr_epilogue e)
{
    cudaStream_t st = (cudaStream_t)op->stream;
    int vec = total % 4 == 0 && kr_aligned(full, 4 * sizeof(T)) &&
              kr_aligned(op->out, 4 * sizeof(T)) &&
              (!op->residual || kr_aligned(op->residual, 4 * sizeof(T))) &&
              (MODE == BIN_SAME ? kr_aligned(other, 4 * sizeof(T))
                                : (w.c % 4 == 0 && (w.cn == 1 || kr_aligned(other, 4 * sizeof(T)))));
    /* halves: 8 per step (16-byte accesses) where every access stays aligned */
    const int vec8 = sizeof(T) == 2 && total % 8 == 0 && kr_aligned(full, 16) &&
                     kr_aligned(op->out, 16) && (!op->residual || kr_aligned(op->residual, 16)) &&
                     (MODE == BIN_SAME ? kr_aligned(other, 16)
                                       : (w.c % 8 == 0 && (w.cn == 1 || (w.cn % 8 == 0 &&
                                                                         kr_aligned(other, 16)))));
    if (vec8)
        binary_flat<T, F, MODE, 8, I><<<kr_blocks(total / 8, 256), 256, 0, st>>>(
            full, other, (T *)op->out, (I)total, w, e);
    else if (vec)
        binary_flat<T, F, MODE, 4, I><<<kr_blocks(total / 4, 256), 256, 0, st>>>(
            full, other, (T *)op->out, (I)total, w, e);
    else
        binary_flat<T, F, MODE, 1, I><<<kr_blocks(total, 256), 256, 0, st>>>(
            full, other, (T *)op->out, (I)total, w, e);
}

/* F: 0 add, 1 mul, 2 prelu (b is alpha), 3 sub, 4 div (a - b, a / b). */
template <typename T, int F, typename I> static int binary_launch(const kr_cuda_op *op)
{
    bcast w;
    int mode;
    size_t total = bcast_init(op, &w, &mode, F != 2);
    const T *a = (const T *)op->in[0], *b = (const T *)op->in[1];
    kr_epilogue e = kr_make_epilogue(op, F != 2);
    switch (mode) {
    case BIN_SAME: binary_flat_launch<T, F, BIN_SAME, I>(op, a, b, total, w, e); break;
    case BIN_CHAN_B: binary_flat_launch<T, F, BIN_CHAN_B, I>(op, a, b, total, w, e); break;
    case BIN_CHAN_A: binary_flat_launch<T, F, BIN_CHAN_A, I>(op, b, a, total, w, e); break;
    default:
        binary_general<T, F, I><<<kr_blocks(total, 256), 256, 0, (cudaStream_t)op->stream>>>(
            a, b, (T *)op->out, (I)total, w, e);
    }
    return (int)cudaGetLastError();
}

#endif
