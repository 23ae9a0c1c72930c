/*
 * The CUDA kNN graph's kernels in a chain (included by knn.cu only, inside its anonymous
 * namespace): programmatic dependent launches, by which each kernel of the small path starts
 * launching while the one before it runs (compute capability 9.0 and later).
 */
#ifndef KEYER_OVERLAY_CUDA_KNN_CHAIN_CUH
#define KEYER_OVERLAY_CUDA_KNN_CHAIN_CUH

/* Programmatic dependent launch (compute capability 9.0, where the small path's launcher asks
 * for it: chain_launch): the kernel waits here until the kernel before it in the stream has
 * finished and its writes are visible, then lets the next one start launching, so that each
 * launch overlaps the kernel before it. Called first by every kernel of the small path; a no-op
 * for a kernel launched without it, and before 9.0. */
__device__ __forceinline__ void chain_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

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
