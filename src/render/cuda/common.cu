/* The CUDA backend's helpers shared by its operations: entering the state's device, its
 * device scratch, launch checks. */
#include <cuda_runtime.h>

#include "render/cuda/cuda.h"

extern "C" keyer_status kr_cuda_enter(kr_cuda_state *s, int device, keyer_error *err)
{
    if (s->device >= 0 && s->device != device)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "frames on CUDA device %d, but this stage already works on device %d",
                               device, s->device);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "cudaSetDevice(%d): %s", device,
                               cudaGetErrorString(e));
    s->device = device;
    return KEYER_OK;
}

extern "C" keyer_status kr_cuda_scratch(kr_cuda_state *s, int slot, size_t bytes, void **out,
                                        keyer_error *err)
{
    if (slot < 0 || slot >= KR_CUDA_SLOTS)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "CUDA scratch slot %d", slot);
    if (bytes == 0)
        bytes = 1;
    if (s->scratch_size[slot] < bytes) {
        cudaFree(s->scratch[slot]);
        s->scratch[slot] = NULL;
        s->scratch_size[slot] = 0;
        cudaError_t e = cudaMalloc(&s->scratch[slot], bytes);
        if (e != cudaSuccess) {
            s->scratch[slot] = NULL;
            cudaGetLastError();
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                   "cudaMalloc of %zu bytes of effect scratch: %s", bytes,
                                   cudaGetErrorString(e));
        }
        s->scratch_size[slot] = bytes;
    }
    *out = s->scratch[slot];
    return KEYER_OK;
}

extern "C" keyer_status kr_cuda_check(const char *what, keyer_error *err)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "%s: %s", what, cudaGetErrorString(e));
    return KEYER_OK;
}
