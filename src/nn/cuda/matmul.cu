/*
 * MATMUL (ONNX MatMul with equal ranks; src/nn/reference/matmul.c): A[..., M, K] x B[..., K, N]
 * = Y[..., M, N], the leading axes broadcast (an extent of 1 does not advance). A plain
 * shared-memory tiled kernel: a 16 x 16 block computes a 16 x 16 tile of Y, stepping over K in
 * tiles of 16 staged in shared memory, the sum in float in index order of k; the grid's z
 * walks the leading index. The node's epilogue after.
 */
#include "nn/cuda/common.cuh"

#define MM_TILE 16
#define MM_LEAD (KR_MAX_DIMS - 2)

struct mm_shape {
    int m, n, k;
    int lead;                          /* leading output elements (product of lead_dims) */
    int lead_dims[MM_LEAD];            /* output's leading extents, left-padded with 1 */
    long long sa[MM_LEAD], sb[MM_LEAD]; /* A and B element strides per leading axis (0: broadcast) */
};

template <typename T>
__global__ void __launch_bounds__(MM_TILE *MM_TILE)
    matmul_kernel(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ y,
                  mm_shape s, kr_epilogue e)
{
    __shared__ float ta[MM_TILE][MM_TILE + 1], tb[MM_TILE][MM_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * MM_TILE + ty, col = blockIdx.x * MM_TILE + tx;
    for (int z = blockIdx.z; z < s.lead; z += gridDim.z) {
        long long oa = 0, ob = 0;
        int r = z;
#pragma unroll
        for (int d = MM_LEAD - 1; d >= 0; d--) {
            const int q = r / s.lead_dims[d], i = r - q * s.lead_dims[d];
            oa += i * s.sa[d];
            ob += i * s.sb[d];
            r = q;
        }
        const T *pa = a + oa, *pb = b + ob;
        float acc = 0.0f;
        for (int k0 = 0; k0 < s.k; k0 += MM_TILE) {
            const int ka = k0 + tx, kb = k0 + ty;
            ta[ty][tx] = row < s.m && ka < s.k ? kr_ld(pa + (long long)row * s.k + ka) : 0.0f;
            tb[ty][tx] = kb < s.k && col < s.n ? kr_ld(pb + (long long)kb * s.n + col) : 0.0f;
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < MM_TILE; kk++)
                acc = fmaf(ta[ty][kk], tb[kk][tx], acc);
            __syncthreads();
        }
        if (row < s.m && col < s.n) {
            const long long i = ((long long)z * s.m + row) * s.n + col;
            float v = kr_apply(e, acc);
            kr_add_res<T, 1>(e, i, &v);
            kr_st(y + i, v);
        }
    }
}

template <typename T> static int launch(const kr_cuda_op *op)
{
    const kr_tensor *at = kr_in_t(op, 0), *bt = kr_in_t(op, 1), *yt = kr_out_t(op);
    const int r = yt->rank;
    if (r < 2 || at->rank != r || bt->rank != r || r > KR_MAX_DIMS)
        return (int)cudaErrorInvalidValue;
    mm_shape s = {};
    s.m = kr_dim(op, at, r - 2), s.k = kr_dim(op, at, r - 1), s.n = kr_dim(op, bt, r - 1);
    if (kr_dim(op, yt, r - 2) != s.m || kr_dim(op, yt, r - 1) != s.n ||
        kr_dim(op, bt, r - 2) != s.k)
        return (int)cudaErrorInvalidValue;
    long long stride_a = (long long)s.m * s.k, stride_b = (long long)s.k * s.n;
    s.lead = 1;
    for (int d = MM_LEAD - 1; d >= 0; d--) {
        const int td = d - (MM_LEAD - (r - 2)); /* tensor axis of padded leading axis d */
        const int ey = td >= 0 ? kr_dim(op, yt, td) : 1;
        const int ea = td >= 0 ? kr_dim(op, at, td) : 1, eb = td >= 0 ? kr_dim(op, bt, td) : 1;
        s.lead_dims[d] = ey;
        s.sa[d] = ea == 1 && ey != 1 ? 0 : stride_a;
        s.sb[d] = eb == 1 && ey != 1 ? 0 : stride_b;
        stride_a *= ea;
        stride_b *= eb;
        s.lead *= ey;
    }
    if (s.lead <= 0 || s.m <= 0 || s.n <= 0)
        return (int)cudaErrorInvalidValue;
    dim3 block(MM_TILE, MM_TILE);
    dim3 grid((unsigned)((s.n + MM_TILE - 1) / MM_TILE), (unsigned)((s.m + MM_TILE - 1) / MM_TILE),
              (unsigned)(s.lead < 65535 ? s.lead : 65535));
    if (grid.y > 65535u)
        return (int)cudaErrorInvalidConfiguration;
    matmul_kernel<T><<<grid, block, 0, (cudaStream_t)op->stream>>>(
        (const T *)op->in[0], (const T *)op->in[1], (T *)op->out, s, kr_make_epilogue(op, 1));
    return (int)cudaGetLastError();
}

extern "C" int kr_cuda_matmul(const kr_cuda_op *op) { return KR_BY_TYPE(launch, op); }
