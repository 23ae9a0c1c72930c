// The automatic switch's masks packed into bits on the device (vision/people_switch.h,
// kr_people_switch_pack_cuda): one bit a cell, 1 at or above 0.5, rows of (w + 31) / 32 words,
// so that a frame's decision input comes down 32 times smaller than its floats. The CPU twin
// is kr_people_switch_pack (people_switch.c): the same comparison on the same floats.
#include <cuda_runtime.h>
#include <stdint.h>

#include "keyer/status.h"

enum { MOST_MASKS = 64 };

// The masks of one launch, by value (512 bytes of kernel parameters).
struct pack_masks {
    const float *p[MOST_MASKS];
};

// One thread a cell of the rows padded to whole words; a warp is one word (32 cells of one
// row: a row's padded cells are a multiple of 32 and blocks start at multiples of 32), its
// ballot the word. blockIdx.y: the mask.
__global__ static void pack_kernel(pack_masks m, int w, int h, int words, uint32_t *bits)
{
    size_t padded = (size_t)words * 32;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)h * padded) // whole warps leave together (see above)
        return;
    int y = (int)(i / padded), x = (int)(i % padded);
    const float *row = m.p[blockIdx.y] + (size_t)y * (size_t)w;
    bool on = x < w && row[x] >= 0.5f;
    unsigned b = __ballot_sync(0xffffffffu, on);
    if ((threadIdx.x & 31) == 0)
        bits[((size_t)blockIdx.y * (size_t)h + (size_t)y) * (size_t)words + (size_t)(x / 32)] = b;
}

static cudaError_t launch_pack(const pack_masks &m, int n, int w, int h, uint32_t *bits,
                               cudaStream_t stream)
{
    const int threads = 256;
    int words = (w + 31) / 32;
    size_t cells = (size_t)h * (size_t)words * 32;
    dim3 grid((unsigned)((cells + threads - 1) / threads), (unsigned)n);
    pack_kernel<<<grid, threads, 0, stream>>>(m, w, h, words, bits);
    return cudaGetLastError();
}

extern "C" keyer_status kr_cuda_people_switch_pack(int ordinal, const float *const *masks, int n,
                                                   int w, int h, uint32_t *bits, void *stream,
                                                   keyer_error *err)
{
    if (!masks || !bits || n < 1 || n > MOST_MASKS || w < 1 || h < 1 || w > 4096 || h > 4096)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "people switch: packing %d masks of %dx%d: bad arguments", n, w,
                               h);
    pack_masks m;
    for (int i = 0; i < n; i++) {
        if (!masks[i])
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "people switch: mask %d of %d is NULL", i, n);
        m.p[i] = masks[i];
    }
    for (int i = n; i < MOST_MASKS; i++)
        m.p[i] = NULL;
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = launch_pack(m, n, w, h, bits, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "people switch: packing %d masks: %s",
                               n, cudaGetErrorString(e));
    return KEYER_OK;
}
