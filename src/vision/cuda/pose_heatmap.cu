// The pose landmark model's outputs gathered per crop on the device, the landmarks refined
// from the heatmaps with the CPU's code (vision/pose_heatmap_math.h): one thread per crop and
// landmark; only KR_POSE_GATHERED(points) floats per crop then come to the host.
#include <cuda_runtime.h>

#include "keyer/status.h"
#include "vision/pose_heatmap_math.h"

__global__ void kr_pose_gather_kernel(float *dst, const float *lm, const float *flag,
                                      const float *world, const float *heat, int n, int points,
                                      int hw, int hh, int tw, int th, int refine)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * points)
        return;
    int c = t / points, i = t % points;
    size_t per = (size_t)points * 8 + 1;
    float *o = dst + (size_t)c * per;
    const float *v = lm + ((size_t)c * points + i) * 5;
    float x = v[0], y = v[1];
    if (refine) {
        float xn = x / (float)tw, yn = y / (float)th;
        const float *h = heat + (size_t)c * hh * hw * points;
        float rx = xn, ry = yn;
        kr_pose_heatmap_refine_at(h, hw, hh, points, i, &rx, &ry);
        if (rx != xn || ry != yn) {
            x = rx * (float)tw;
            y = ry * (float)th;
        }
    }
    o[i * 5] = x;
    o[i * 5 + 1] = y;
    for (int k = 2; k < 5; k++)
        o[i * 5 + k] = v[k];
    for (int k = 0; k < 3; k++)
        o[(size_t)points * 5 + 1 + i * 3 + k] = world[((size_t)c * points + i) * 3 + k];
    if (i == 0)
        o[(size_t)points * 5] = flag[c];
}

extern "C" keyer_status kr_cuda_pose_gather(int ordinal, float *dst, const float *lm,
                                            const float *flag, const float *world,
                                            const float *heat, int n, int points, int hw, int hh,
                                            int tw, int th, int refine, void *stream,
                                            keyer_error *err)
{
    if (n == 0)
        return KEYER_OK;
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess) {
        const int threads = 128;
        int blocks = (n * points + threads - 1) / threads;
        kr_pose_gather_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(
            dst, lm, flag, world, heat, n, points, hw, hh, tw, th, refine);
        e = cudaGetLastError();
    }
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "pose landmarks of %d crops on CUDA: %s",
                               n, cudaGetErrorString(e));
    return KEYER_OK;
}
