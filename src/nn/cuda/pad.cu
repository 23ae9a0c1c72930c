/* PAD (src/nn/reference/pad.c; per element: ops/pad.cuh): one thread per output element; an
 * output index minus the padding before it is either inside the input (copied) or not: then
 * CONSTANT mode writes the fill value (0 from TFLite), REFLECT reads the input index mirrored
 * about the edge (-i, 2 (n - 1) - i; the validator keeps the pads below n), EDGE the nearest
 * edge's. Shapes are left-padded to KR_MAX_DIMS axes and the walk is unrolled, so they stay in
 * kernel parameters instead of local memory. */
#include "nn/cuda/ops/pad.cuh"

struct pad_shape {
    int in_dims[KR_MAX_DIMS], out_dims[KR_MAX_DIMS], before[KR_MAX_DIMS];
    int mode;    /* kr_pad_mode */
    float value; /* CONSTANT's fill */
};

/* The input index of padded index @p idx on an axis of @p n (REFLECT, EDGE), always in range. */
__device__ __forceinline__ int pad_source(int mode, int idx, int n)
{
    if (mode == KR_PAD_EDGE)
        return idx < 0 ? 0 : (idx >= n ? n - 1 : idx);
    if (n == 1)
        return 0;
    const int period = 2 * (n - 1);
    int r = idx % period; /* reflect with period 2 (n - 1), also for pads >= n */
    if (r < 0)
        r += period;
    return r < n ? r : period - r;
}

template <typename T, typename I>
__global__ void pad_kernel(const T *__restrict__ x, T *__restrict__ y, I total, pad_shape s)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I rest = i, off = 0, in_stride = 1;
        int inside = 1;
#pragma unroll
        for (int d = KR_MAX_DIMS - 1; d >= 0; d--) {
            int idx = (int)(rest % (I)s.out_dims[d]) - s.before[d];
            rest /= (I)s.out_dims[d];
            if (idx < 0 || idx >= s.in_dims[d]) {
                if (s.mode == KR_PAD_CONSTANT)
                    inside = 0;
                else
                    idx = pad_source(s.mode, idx, s.in_dims[d]);
            }
            off += (I)idx * in_stride;
            in_stride *= (I)s.in_dims[d];
        }
        kr_st(y + i, inside ? kr_ld(x + off) : s.value);
    }
}

/* Padding of the last axis only (the face detectors widen their channels this way before a
 * residual add): one division per element instead of the walk. */
template <typename T, typename I>
__global__ void pad_channels(const T *__restrict__ x, T *__restrict__ y, I total, int ic, int oc,
                             int before)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x)
        kr_st(y + i, kr_pad_channels(x, i, ic, oc, before));
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    pad_shape s = {};
    int shift = KR_MAX_DIMS - xt->rank;
    for (int d = 0; d < KR_MAX_DIMS; d++) {
        int sd = d - shift;
        s.in_dims[d] = sd >= 0 ? kr_dim(op, xt, sd) : 1;
        s.out_dims[d] = sd >= 0 ? kr_dim(op, yt, sd) : 1;
        s.before[d] = sd >= 0 ? op->node->p.pad.before[sd] : 0;
    }
    s.mode = (int)op->node->p.pad.mode;
    s.value = s.mode == KR_PAD_CONSTANT ? op->node->p.pad.value : 0.0f;
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    int last_only = 1;
    for (int d = 0; d + 1 < KR_MAX_DIMS; d++)
        last_only &= s.in_dims[d] == s.out_dims[d] && s.before[d] == 0;
    if (last_only && s.mode == KR_PAD_CONSTANT && s.value == 0.0f) {
        pad_channels<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>(
            (const T *)op->in[0], (T *)op->out, total, s.in_dims[KR_MAX_DIMS - 1],
            s.out_dims[KR_MAX_DIMS - 1], s.before[KR_MAX_DIMS - 1]);
        return (int)cudaGetLastError();
    }
    pad_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>((const T *)op->in[0], (T *)op->out,
                                                                total, s);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_pad(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
