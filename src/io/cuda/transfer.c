/* Copies between host and device planes for keyer's video I/O (CUDA builds only). */
#include <cuda_runtime.h>

#include "io/cuda/transfer.h"

keyer_status kr_io_cuda_copy_2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                size_t row_bytes, size_t rows, keyer_error *err)
{
    cudaError_t e = cudaMemcpy2D(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault);
    /* cudaMemcpy2D returns before a device-to-device copy is done: it runs on the legacy
     * default stream, which keyer's pipeline streams (non-blocking) do not wait for. A decoded
     * frame handed on while its copy out of the NVDEC surface (and NVDEC's own copy into that
     * surface, earlier in the same stream) still runs could be read half written by the next
     * stage's kernels, so the copy is waited for here. */
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "cudaMemcpy2D of %zu rows of %zu bytes: %s",
                               rows, row_bytes, cudaGetErrorString(e));
    return KEYER_OK;
}

keyer_status kr_io_cuda_copy_2d_async(void *dst, size_t dst_pitch, const void *src,
                                      size_t src_pitch, size_t row_bytes, size_t rows,
                                      void *stream, keyer_error *err)
{
    cudaError_t e = cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows,
                                      cudaMemcpyDefault, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "cudaMemcpy2DAsync of %zu rows of %zu bytes: %s", rows, row_bytes,
                               cudaGetErrorString(e));
    return KEYER_OK;
}

keyer_status kr_io_cuda_stream_sync(void *stream, keyer_error *err)
{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "cudaStreamSynchronize: %s",
                               cudaGetErrorString(e));
    return KEYER_OK;
}
