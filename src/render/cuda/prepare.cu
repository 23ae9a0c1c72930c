/*
 * Model input preparation on CUDA: one kernel per batch. Each thread computes one tensor pixel
 * of one frame with kr_prepare_pixel (render/fx_math.h), reading NV12/P010/YUV420P/RGB
 * directly, and stores the normalised value as f32 or f16 in NHWC or NCHW. The resolved
 * frames (kr_prepare_item) are copied to device memory once per call.
 */
#include <cuda_runtime.h>

#include "render/cuda/cuda.h"

enum { SLOT_ITEMS = 0 };

struct prepare_args {
    const kr_prepare_item *items; /* device */
    int count, width, height, dtype, layout;
    float scale[3], offset[3], pad_value[3];
    int src[3];
    void *tensor;
};

/* Device functions ------------------------------------------------------------------------ */

__device__ static void store(const prepare_args &a, int n, int x, int y, const float v[3])
{
    size_t hw = (size_t)a.width * (size_t)a.height, base, step;
    if (a.layout == KEYER_TENSOR_LAYOUT_NCHW) {
        base = (size_t)n * 3 * hw + (size_t)y * (size_t)a.width + (size_t)x;
        step = hw;
    } else {
        base = (((size_t)n * (size_t)a.height + (size_t)y) * (size_t)a.width + (size_t)x) * 3;
        step = 1;
    }
    if (a.dtype == KEYER_DTYPE_F16) {
        uint16_t *t = (uint16_t *)a.tensor;
        for (int c = 0; c < 3; c++)
            t[base + (size_t)c * step] = kr_float_to_half(v[c]);
    } else {
        float *t = (float *)a.tensor;
        for (int c = 0; c < 3; c++)
            t[base + (size_t)c * step] = v[c];
    }
}

/* Kernel ---------------------------------------------------------------------------------- */

__global__ static void prepare_kernel(prepare_args a)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int n = blockIdx.z;
    if (x >= a.width || y >= a.height)
        return;
    const kr_prepare_item *it = &a.items[n];
    float v[3];
    if (x < it->x0 || x >= it->x1 || y < it->y0 || y >= it->y1) {
        for (int c = 0; c < 3; c++)
            v[c] = a.pad_value[c];
    } else {
        float rgb[3];
        kr_prepare_pixel(it, x, y, rgb);
        for (int c = 0; c < 3; c++)
            v[c] = rgb[a.src[c]] * a.scale[c] + a.offset[c];
    }
    store(a, n, x, y, v);
}

/* Launcher and entry point ------------------------------------------------------------------ */

static keyer_status launch(const prepare_args &a, cudaStream_t stream, keyer_error *err)
{
    dim3 block(16, 16, 1);
    dim3 grid((unsigned)(a.width + 15) / 16, (unsigned)(a.height + 15) / 16, (unsigned)a.count);
    prepare_kernel<<<grid, block, 0, stream>>>(a);
    return kr_cuda_check("prepare kernel", err);
}

extern "C" keyer_status kr_cuda_prepare(void *state, const kr_prepare_job *job, keyer_error *err)
{
    kr_cuda_state *s = (kr_cuda_state *)state;
    keyer_status st = kr_cuda_enter(s, job->device, err);
    if (st)
        return st;
    cudaStream_t stream = (cudaStream_t)job->stream;
    void *items = NULL;
    size_t bytes = sizeof(kr_prepare_item) * (size_t)job->count;
    /* sized for the preparation's largest batch at its first call: growing it later (a
     * cudaFree, which waits for the whole device, and a cudaMalloc) would stall the calling
     * stage mid-stream, each time a batch is larger than any before */
    size_t cap = sizeof(kr_prepare_item) * (size_t)(job->max_count > job->count ? job->max_count
                                                                              : job->count);
    if ((st = kr_cuda_scratch(s, SLOT_ITEMS, cap, &items, err)))
        return st;
    /* from pageable memory: the call returns once the source has been read */
    cudaError_t e = cudaMemcpyAsync(items, job->items, bytes, cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "copying %d frame descriptions: %s",
                               job->count, cudaGetErrorString(e));
    prepare_args a;
    a.items = (const kr_prepare_item *)items;
    a.count = job->count;
    a.width = job->width;
    a.height = job->height;
    a.dtype = job->dtype;
    a.layout = job->layout;
    for (int c = 0; c < 3; c++) {
        a.scale[c] = job->scale[c];
        a.offset[c] = job->offset[c];
        a.pad_value[c] = job->pad_value[c];
        a.src[c] = job->src[c];
    }
    a.tensor = job->tensor;
    return launch(a, stream, err);
}
