/*
 * The NumPy-broadcasting walk shared by ADD, MUL and PRELU (as src/nn/reference/common.h):
 * operand shapes are right-aligned to the output's rank; an operand axis of extent 1 against a
 * larger output extent has stride 0. One thread per output element; when both operands have the
 * output's shape the index walk is skipped.
 */
#ifndef KEYER_NN_CUDA_BINARY_CUH
#define KEYER_NN_CUDA_BINARY_CUH

#include "nn/cuda/common.cuh"

struct bcast {
    int rank;
    int dims[KR_MAX_DIMS];
    long long sa[KR_MAX_DIMS], sb[KR_MAX_DIMS];
    int mode; /* 0 general, 1 both operands have the output's shape */
};

static inline void bcast_strides(const kr_cuda_op *op, const kr_tensor *t, const bcast *w,
                                 long long *strides)
{
    int shift = w->rank - t->rank;
    long long s = 1;
    for (int d = w->rank - 1; d >= 0; d--) {
        int td = d - shift;
        int extent = td >= 0 ? kr_dim(op, t, td) : 1;
        strides[d] = (extent == 1 && w->dims[d] != 1) ? 0 : s;
        s *= extent;
    }
}

static inline size_t bcast_init(const kr_cuda_op *op, bcast *w)
{
    const kr_tensor *yt = kr_out_t(op);
    size_t total = 1;
    w->rank = yt->rank;
    for (int d = 0; d < w->rank; d++) {
        w->dims[d] = kr_dim(op, yt, d);
        total *= (size_t)w->dims[d];
    }
    bcast_strides(op, kr_in_t(op, 0), w, w->sa);
    bcast_strides(op, kr_in_t(op, 1), w, w->sb);
    int same = 1;
    long long s = 1;
    for (int d = w->rank - 1; d >= 0; d--) {
        if (w->sa[d] != s || w->sb[d] != s)
            same = 0;
        s *= w->dims[d];
    }
    w->mode = same ? 1 : 0;
    return total;
}

/* Offsets of output element i in a and b. */
template <typename I>
__device__ __forceinline__ void bcast_offsets(const bcast &w, I i, I *ia, I *ib)
{
    I a = 0, b = 0;
    for (int d = w.rank - 1; d >= 0; d--) {
        I q = i / (I)w.dims[d];
        I r = i - q * (I)w.dims[d];
        a += r * (I)w.sa[d];
        b += r * (I)w.sb[d];
        i = q;
    }
    *ia = a;
    *ib = b;
}

/* F: 0 add, 1 mul, 2 prelu (b is alpha). */
template <typename T, int F, typename I>
__global__ void binary_kernel(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ y,
                              I total, bcast w, kr_epilogue e)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I ia = i, ib = i;
        if (w.mode == 0)
            bcast_offsets(w, i, &ia, &ib);
        float va = kr_ld(a + ia), vb = kr_ld(b + ib), v;
        if (F == 0)
            v = va + vb;
        else if (F == 1)
            v = va * vb;
        else
            v = va >= 0.0f ? va : va * vb;
        kr_st(y + i, kr_apply(e, v));
    }
}

template <typename T, int F, typename I> static int binary_launch(const kr_cuda_op *op)
{
    bcast w;
    size_t total = bcast_init(op, &w);
    unsigned blocks = kr_blocks(total, 256);
    binary_kernel<T, F, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const T *)op->in[1], (T *)op->out, total, w,
        kr_make_epilogue(op, F != 2));
    return (int)cudaGetLastError();
}

#endif
