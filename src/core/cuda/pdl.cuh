/*
 * The programmatic dependent launch (compute 9.0 and newer), shared by the kernels of every
 * module that launch with cudaLaunchAttributeProgrammaticStreamSerialization (the nn backend's
 * per-node convolutions, the overlay's k-nearest-neighbour chain): such a kernel may start
 * while the kernel before it in the stream is still running; it does its set-up work (weights,
 * index arithmetic) first, then calls kr_pdl_wait before it reads any activation or writes.
 */
#ifndef KEYER_CORE_CUDA_PDL_CUH
#define KEYER_CORE_CUDA_PDL_CUH

/* Waits until the kernel before this one in the stream has finished and its writes are
 * visible, then lets the kernel after this one start launching (its blocks take the
 * multiprocessors this grid leaves as it finishes, and wait in their own kr_pdl_wait). A no-op
 * for a kernel launched without the attribute, and before compute 9.0. */
__device__ __forceinline__ void kr_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif
