/*
 * A chain of small tensor-core convolutions in one launch (compute 9.0+, f16 ONNX layers): the
 * per-node schedule's fusion pass (fusion.c) gives consecutive CONV_2D nodes that each take the
 * patch kernel with at most KR_CUDA_TC_CHAIN_ITEMS tiles (u2netp's 20 x 20 and 10 x 10 layers at
 * batch 1: 10 and 3 tiles, each layer a launch of its own that mostly waited: for its start, its
 * weights, the kernel before) to one launch of one thread-block cluster of 16 (else 8) blocks.
 * For each layer in order, block r of the cluster computes the layer's tiles r, r + 16, ...
 * (4 x 16 output pixels by 16 or 64 channels: tcp_tile of conv_2d_tc.cuh, the patch kernel's own
 * code, with every folded pool, resize, concatenation, activation and residual), then the
 * cluster waits at a barrier (release/acquire at cluster scope) before the next layer reads what
 * this one wrote. The activations are read from L2 (cp.async.cg, ld.global.cg): the blocks' L1
 * caches are not coherent within a launch. Before its first layer each block fetches a share of
 * the chain's weights into L2 (bulk prefetches), so that no layer waits for them from memory.
 *
 * Arithmetic: each layer's outputs are summed exactly as on the patch kernel (ops/conv_2d.cuh,
 * "tensor-core patch": the tile's height and width change no output's sum), so a chained layer's
 * result equals the unchained one bit for bit (test_backend_ops's test_tc_chains compares the two
 * on the device); the chain is chosen by the layers' shapes at the instance's batch only where
 * the result does not depend on it.
 *
 * The layers' descriptions travel in the launch's parameters (__grid_constant__, read in place).
 * Below compute 9.0 (or emulating it) no chain is planned: the layers keep their own launches.
 */
#include <cooperative_groups.h>

#include "nn/cuda/conv_2d_tc.cuh"

namespace cg = cooperative_groups;

#define TCC_TH 4 /* tile rows: the 4-warp instances of the patch kernel */

/* One layer of a chain as the kernel runs it. */
struct tcc_layer {
    const __half *x, *x1, *w;
    const float *bias;
    __half *y;
    tc_shape s;       /* with the 4-row tile geometry (tp_geometry) */
    kr_epilogue e;
    int bn;           /* output channels per tile: 16 or 64 */
    int tiles;        /* batch x tiles_y x tiles_x */
    int items;        /* tiles x output-channel tiles */
    unsigned wbytes;  /* the layer's half weights (a multiple of 16 bytes) */
};

struct tcc_chain {
    int n;
    tcc_layer l[KR_CUDA_TC_CHAIN_MAX];
};

__global__ void __launch_bounds__(128, 1) conv_tcc(const __grid_constant__ tcc_chain c)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ uint4 tcc_shared[];
    __half *const sm = reinterpret_cast<__half *>(tcc_shared);
    cg::cluster_group cl = cg::this_cluster();
    const int rank = (int)cl.block_rank(), cs = (int)cl.num_blocks();
    /* the weights are the layers' own (written once at set-up): fetched into L2 before waiting
     * for the kernel before, block r taking the layers r, r + cs, ... */
    if (threadIdx.x == 0)
        for (int l = rank; l < c.n; l += cs) {
            const char *wb = reinterpret_cast<const char *>(c.l[l].w);
            for (unsigned off = 0; off < c.l[l].wbytes; off += TP_PREFETCH) {
                const unsigned len =
                    c.l[l].wbytes - off < TP_PREFETCH ? c.l[l].wbytes - off : TP_PREFETCH;
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wb + off),
                             "r"(len)
                             : "memory");
            }
        }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int l = 0; l < c.n; l++) {
        const tcc_layer &L = c.l[l];
        if (l == c.n - 1) /* the next kernel may start its blocks during the last layer */
            asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        for (int item = rank; item < L.items; item += cs) {
            const int tile = item % L.tiles, nt = item / L.tiles;
            if (L.bn == 16)
                tcp_tile<TCC_TH, 16, 4, 1, 1, true>(sm, L.x, L.x1, L.w, L.bias, L.y, L.s, L.e,
                                                    tile, nt * 16);
            else
                tcp_tile<TCC_TH, 64, 2, 2, 1, true>(sm, L.x, L.x1, L.w, L.bias, L.y, L.s, L.e,
                                                    tile, nt * 64);
        }
        if (l + 1 < c.n) {
            asm volatile("" ::: "memory");
            cl.sync(); /* this layer's outputs are written (release) and seen (acquire) */
        }
    }
#else
    __trap(); /* no chain is planned below compute 9.0 */
#endif
}

/* The output channels per tile of a chained layer of @p oc outputs. */
static int tcc_bn(int oc) { return oc <= 16 ? 16 : 64; }

/* The layer of @p op as the chain runs it; 0, or cudaErrorInvalidValue past 32-bit indexing. */
static int tcc_layer_of(const kr_cuda_op *op, tcc_layer *L)
{
    const __half *x0, *x1;
    const float *bias;
    size_t batch;
    const int bad = tc_shape_of(op, &L->s, &x0, &x1, &bias, &batch);
    if (bad)
        return bad;
    tp_geometry(L->s, TCC_TH);
    L->x = x0, L->x1 = x1, L->w = (const __half *)op->w16, L->bias = bias;
    L->y = (__half *)op->out;
    L->e = kr_make_epilogue(op, 1);
    L->bn = tcc_bn(L->s.oc);
    const size_t tiles = batch * (size_t)L->s.tiles_y * (size_t)L->s.tiles_x;
    const size_t items = tiles * (size_t)((L->s.oc + L->bn - 1) / L->bn);
    const size_t wbytes = (size_t)L->s.oc * (size_t)L->s.K * sizeof(__half);
    if (items > (size_t)KR_CUDA_TC_CHAIN_ITEMS || wbytes >= ((size_t)1 << 31))
        return (int)cudaErrorInvalidValue;
    L->tiles = (int)tiles, L->items = (int)items, L->wbytes = (unsigned)wbytes;
    return 0;
}

extern "C" int kr_cuda_conv_2d_tc_chain_fits(const kr_cuda_op *op)
{
    /* (the caller checked kr_cuda_conv_2d_tc_fits and kr_cuda_conv_2d_one_fits: this file calls
     * neither, since conv_2d_tc.cu calls into it) */
    if (op->node->op != KR_OP_CONV_2D || !op->caps || !kr_gpu_has_clusters(op->caps) ||
        !op->f16 || !op->w16)
        return 0;
    tcc_layer L;
    if (tcc_layer_of(op, &L) || (L.s.oc & 1))
        return 0;
    /* the layer's own launch must be the patch kernel (the same sums) */
    tc_shape s = L.s;
    const int own_bn = s.oc <= 16 ? 16 : s.oc <= 32 ? 32 : 64;
    if (!tc_use_patch(op, s, own_bn))
        return 0;
    const size_t smem = tp_smem_bytes(L.s, L.bn);
    return smem <= op->caps->smem_block_optin;
}

/* The chain of @p op (its head) into @p c; the largest shared memory of its layers into
 * *smem. 0, or a CUDA error. */
static int tcc_build(const kr_cuda_op *op, tcc_chain *c, size_t *smem)
{
    c->n = 0;
    *smem = 0;
    for (int k = 0; k < op->chain; k++) {
        const kr_cuda_op *m = op + k;
        if (m->node->op != KR_OP_CONV_2D)
            continue;
        if (c->n == KR_CUDA_TC_CHAIN_MAX)
            return (int)cudaErrorInvalidValue;
        tcc_layer *L = &c->l[c->n++];
        const int bad = tcc_layer_of(m, L);
        if (bad)
            return bad;
        const size_t b = tp_smem_bytes(L->s, L->bn);
        *smem = b > *smem ? b : *smem;
    }
    return c->n >= 1 ? 0 : (int)cudaErrorInvalidValue;
}

/* The launch of @p c as one cluster of @p cs blocks on @p stream with @p smem bytes of dynamic
 * shared memory (a programmatic dependent launch); @p attr: room for its two attributes. */
static cudaLaunchConfig_t tcc_config(int cs, size_t smem, cudaStream_t stream,
                                     cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cs;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)cs);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 2;
    return cfg;
}

extern "C" int kr_cuda_conv_2d_tc_chain_prepare(kr_cuda_op *head)
{
    head->chain_cs = 0;
    if (head->chain < 2 || !head->caps || !kr_gpu_has_clusters(head->caps))
        return 0;
    tcc_chain *c = (tcc_chain *)malloc(sizeof(tcc_chain));
    if (!c)
        return 0;
    size_t smem = 0;
    int ok = tcc_build(head, c, &smem) == 0 && c->n >= 2;
    free(c);
    if (!ok || smem > head->caps->smem_block_optin)
        return 0;
    /* the allowance is the function's, shared by every instance: only ever raised */
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, conv_tcc);
    if (e == cudaSuccess && (size_t)fa.maxDynamicSharedSizeBytes < smem)
        e = cudaFuncSetAttribute(conv_tcc, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(conv_tcc, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    for (int cs = 16; e == cudaSuccess && cs >= 8; cs -= 8) {
        cudaLaunchAttribute attr[2];
        const cudaLaunchConfig_t cfg = tcc_config(cs, smem, 0, attr);
        int fits = 0;
        if (cudaOccupancyMaxActiveClusters(&fits, conv_tcc, &cfg) == cudaSuccess && fits >= 1) {
            head->chain_cs = cs;
            return 1;
        }
        (void)cudaGetLastError(); /* an unsupported cluster size is not sticky */
    }
    (void)cudaGetLastError();
    return 0;
}

extern "C" int kr_cuda_conv_2d_tc_chain(const kr_cuda_op *op)
{
    tcc_chain c;
    size_t smem = 0;
    const int bad = tcc_build(op, &c, &smem);
    if (bad)
        return bad;
    if (op->chain_cs < 1)
        return (int)cudaErrorInvalidValue;
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = tcc_config(op->chain_cs, smem, (cudaStream_t)op->stream, attr);
    return (int)cudaLaunchKernelEx(&cfg, conv_tcc, c);
}
