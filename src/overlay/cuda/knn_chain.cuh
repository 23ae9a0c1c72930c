/*
 * The CUDA kNN graph's kernels in a chain (included by knn.cu only, inside its anonymous
 * namespace): programmatic dependent launches, by which each kernel of the small path starts
 * launching while the one before it runs (compute capability 9.0 and later).
 */
#ifndef KEYER_OVERLAY_CUDA_KNN_CHAIN_CUH
#define KEYER_OVERLAY_CUDA_KNN_CHAIN_CUH


/* Launches @p kernel on @p stream; with @p chain (a device of compute capability 9.0 or later)
 * as a programmatic dependent launch on the kernel before it (chain_wait). */
template <typename... Params, typename... Args>
cudaError_t chain_launch(bool chain, void (*kernel)(Params...), dim3 grid, dim3 block,
                         size_t smem, cudaStream_t stream, Args &&...args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = chain ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}

#endif /* KEYER_OVERLAY_CUDA_KNN_CHAIN_CUH */
