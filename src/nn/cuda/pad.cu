/* PAD with zeros (src/nn/reference/pad.c): one thread per output element; an output index
 * minus the padding before it is either inside the input (copied) or not (zero). */
#include "nn/cuda/common.cuh"

struct pad_shape {
    int rank;
    int in_dims[KR_MAX_DIMS], out_dims[KR_MAX_DIMS], before[KR_MAX_DIMS];
};

template <typename T, typename I>
__global__ void pad_kernel(const T *__restrict__ x, T *__restrict__ y, I total, pad_shape s)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
         i += (I)gridDim.x * blockDim.x) {
        I rest = i, off = 0, in_stride = 1;
        int inside = 1;
        for (int d = s.rank - 1; d >= 0; d--) {
            int idx = (int)(rest % (I)s.out_dims[d]) - s.before[d];
            rest /= (I)s.out_dims[d];
            if (idx < 0 || idx >= s.in_dims[d])
                inside = 0;
            off += (I)idx * in_stride;
            in_stride *= (I)s.in_dims[d];
        }
        kr_st(y + i, inside ? kr_ld(x + off) : 0.0f);
    }
}

template <typename T, typename I> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *xt = kr_in_t(op, 0), *yt = kr_out_t(op);
    pad_shape s = {};
    s.rank = xt->rank;
    for (int d = 0; d < s.rank; d++) {
        s.in_dims[d] = kr_dim(op, xt, d);
        s.out_dims[d] = kr_dim(op, yt, d);
        s.before[d] = op->node->p.pad.before[d];
    }
    size_t total = kr_elems(op, yt);
    unsigned blocks = kr_blocks(total, 256);
    pad_kernel<T, I><<<blocks, 256, 0, (cudaStream_t)op->stream>>>((const T *)op->in[0], (T *)op->out,
                                                                total, s);
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_pad(const kr_cuda_op *op) { return KR_BY_TYPE_IDX(launch, op); }
