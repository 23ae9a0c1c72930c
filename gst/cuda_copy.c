/* Plane copies between host and CUDA memory for the GStreamer elements (see video_frames.h). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "video_frames.h"

gboolean kg_cuda_copy_planes(const keyer_frame *src, uint8_t *const dst[4],
                             const gint dst_stride[4], gboolean dst_on_device, int device,
                             char *why, size_t why_size)
{
    (void)dst_on_device; /* unified addressing: the runtime tells the pointers apart */
    cudaError_t e = cudaSetDevice(device);
    const char *what = "cudaSetDevice";
    for (int p = 0; e == cudaSuccess && p < keyer_pixel_format_planes(src->format); p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(src->format, src->width, src->height, p, &pw, &ph, &bpe,
                                     NULL)) {
            snprintf(why, why_size, "no plane %d in a %s frame", p,
                     keyer_pixel_format_name(src->format));
            return FALSE;
        }
        e = cudaMemcpy2DAsync(dst[p], (size_t)dst_stride[p], src->data[p], (size_t)src->stride[p],
                              (size_t)pw * (size_t)bpe, (size_t)ph, cudaMemcpyDefault, 0);
        what = "cudaMemcpy2DAsync";
    }
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(0);
        what = "cudaStreamSynchronize";
    }
    if (e != cudaSuccess) {
        snprintf(why, why_size, "%s on cuda:%d: %s", what, device, cudaGetErrorString(e));
        return FALSE;
    }
    return TRUE;
}

gboolean kg_cuda_sync(int device, char *why, size_t why_size)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0);
    if (e != cudaSuccess) {
        snprintf(why, why_size, "waiting for cuda:%d: %s", device, cudaGetErrorString(e));
        return FALSE;
    }
    return TRUE;
}
