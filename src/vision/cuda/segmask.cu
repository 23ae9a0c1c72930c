// The person mask from a segmentation model's mask output in device memory, for each output
// kind (vision/segmodel.h): channel 0 of `channels` per cell (interleaved, or planes when
// `planar`) as it is, through a sigmoid (logits), clamped to [0,1] (alpha), or the softmax
// probability of class `channel`.
#include <cuda_runtime.h>

#include "keyer/status.h"

enum { KIND_PROBABILITY = 0, KIND_LOGITS, KIND_ALPHA, KIND_CLASSES }; // keyer_mask_kind

// Value j of the cell at s is s[j * js].
__device__ static float segmask_cell(const float *s, size_t js, int channels, int channel,
                                     int kind)
{
    switch (kind) {
    case KIND_LOGITS:
        return 1.0f / (1.0f + __expf(-s[0]));
    case KIND_ALPHA: {
        float v = s[0];
        return v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f;
    }
    case KIND_CLASSES: {
        float mx = s[0];
        for (int j = 1; j < channels; j++)
            mx = fmaxf(mx, s[j * js]);
        float sum = 0.0f;
        for (int j = 0; j < channels; j++)
            sum += expf(s[j * js] - mx);
        return expf(s[channel * js] - mx) / sum;
    }
    default:
        return s[0];
    }
}

__global__ static void segmask_kernel(float *dst, const float *src, size_t cells, int channels,
                                      int planar, int channel, int kind)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    size_t cs = planar ? 1 : (size_t)channels, js = planar ? cells : 1;
    for (; i < cells; i += step)
        dst[i] = segmask_cell(src + i * cs, js, channels, channel, kind);
}

static cudaError_t launch_segmask(float *dst, const float *src, size_t cells, int channels,
                                  int planar, int channel, int kind, cudaStream_t stream)
{
    const int threads = 256;
    size_t blocks = (cells + threads - 1) / threads;
    if (blocks > 4096)
        blocks = 4096;
    if (blocks == 0)
        return cudaSuccess;
    segmask_kernel<<<(unsigned)blocks, threads, 0, stream>>>(dst, src, cells, channels, planar,
                                                            channel, kind);
    return cudaGetLastError();
}

extern "C" keyer_status kr_cuda_segmask(int ordinal, float *dst, const float *src, size_t cells,
                                        int channels, int planar, int channel, int kind,
                                        void *stream, keyer_error *err)
{
    if (!dst || !src || channels < 1 || channel < 0 || channel >= channels)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "mask of a model output: bad arguments");
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = launch_segmask(dst, src, cells, channels, planar, channel, kind,
                           (cudaStream_t)stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "mask of %zu cells: %s", cells,
                               cudaGetErrorString(e));
    return KEYER_OK;
}
