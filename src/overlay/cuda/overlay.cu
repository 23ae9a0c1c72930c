/*
 * CUDA overlay renderer: the same tile binning as the CPU renderer (done on the host by
 * kr_overlay_bin), the primitive records and tile lists copied in one transfer through pinned
 * staging memory, and one kernel launch that draws every primitive of the frame: one thread
 * block per non-empty 64x64 tile, one thread per 2x2 pixel block (so the chroma of 4:2:0 frames
 * averages the block's coverage exactly as the CPU does). Shading comes from
 * overlay_internal.h, compiled for the device from the same source as the CPU's.
 *
 * Layout of a device file: device helpers, the kernel, the launcher taking a stream, the entry
 * point that checks arguments and stages the data.
 */
#include <cuda_runtime.h>

#include <new>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "overlay/overlay_internal.h"

namespace {

constexpr int kThreads = KR_OV_TILE / 2; /* threads per tile side: 32 x 32 */
constexpr int kChunk = 64;               /* primitives staged in shared memory at a time */
static_assert(sizeof(kr_prim) % sizeof(int) == 0, "kr_prim is copied word by word");

enum FrameKind { kRgba = 0, kNv12 = 1, kYuv420p = 2 };

struct FrameArgs {
    unsigned char *plane[3];
    ptrdiff_t stride[3];
    int width, height, kind;
    kr_ov_yuv yc;
};

struct State {
    int device;
    unsigned char *host;   /* pinned staging: primitives, then tile starts, items, active tiles */
    unsigned char *dev;    /* the same layout on the device */
    size_t bytes;          /* capacity of both */
    cudaEvent_t staged;    /* recorded after the copy: staging may be rewritten once it fires */
    int event_ready;       /* the event was created */
    int pending;           /* a copy was queued since the last wait */
};

size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* ---- device ---------------------------------------------------------------------------- */

__global__ void __launch_bounds__(kThreads * kThreads) overlay_kernel(const kr_prim *__restrict__ prims, const int *__restrict__ tile_start,
                               const int *__restrict__ tile_items, const int *__restrict__ active,
                               int tiles_x, FrameArgs f)
{
    __shared__ kr_prim chunk[kChunk];
    const int tile = active[blockIdx.x];
    const int tx = tile % tiles_x, ty = tile / tiles_x;
    const int b = tile_start[tile], e = tile_start[tile + 1];
    const int x0 = tx * KR_OV_TILE, y0 = ty * KR_OV_TILE;
    const int x1 = min(x0 + KR_OV_TILE, f.width), y1 = min(y0 + KR_OV_TILE, f.height);
    const int x = x0 + 2 * (int)threadIdx.x, y = y0 + 2 * (int)threadIdx.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[i][c] = 0.0f;
    for (int base = b; base < e; base += kChunk) {
        const int n = min(kChunk, e - base);
        __syncthreads();
        /* Copy n records into shared memory, word by word. */
        const int words = n * (int)(sizeof(kr_prim) / sizeof(int));
        int *dst = reinterpret_cast<int *>(chunk);
        for (int w = tid; w < words; w += nthreads) {
            const int k = w / (int)(sizeof(kr_prim) / sizeof(int));
            const int off = w % (int)(sizeof(kr_prim) / sizeof(int));
            dst[w] = reinterpret_cast<const int *>(&prims[tile_items[base + k]])[off];
        }
        __syncthreads();
        if (x >= x1 || y >= y1)
            continue;
        for (int k = 0; k < n; k++) {
            const kr_prim *p = &chunk[k];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int px = x + (i & 1), py = y + (i >> 1);
                if (px < x1 && py < y1 && kr_ov_touches(p, px, py))
                    kr_ov_shade(p, px, py, acc[i]);
            }
        }
    }
    if (x >= x1 || y >= y1)
        return;
    float csum[4] = {0, 0, 0, 0};
    int ncov = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int px = x + (i & 1), py = y + (i >> 1);
        if (px >= x1 || py >= y1)
            continue;
        for (int c = 0; c < 4; c++)
            csum[c] += acc[i][c];
        ncov++;
        if (acc[i][3] <= 0)
            continue;
        if (f.kind == kRgba)
            kr_ov_blend_rgba(f.plane[0] + py * f.stride[0] + px * 4, acc[i]);
        else
            kr_ov_blend_luma(f.plane[0] + py * f.stride[0] + px, acc[i], &f.yc);
    }
    if (f.kind == kRgba || csum[3] <= 0)
        return;
    for (int c = 0; c < 4; c++)
        csum[c] /= (float)ncov;
    const int cx = x / 2, cy = y / 2;
    unsigned char *u, *v;
    if (f.kind == kNv12) {
        u = f.plane[1] + cy * f.stride[1] + cx * 2;
        v = u + 1;
    } else {
        u = f.plane[1] + cy * f.stride[1] + cx;
        v = f.plane[2] + cy * f.stride[2] + cx;
    }
    kr_ov_blend_chroma(u, v, csum, &f.yc);
}

/* ---- launcher -------------------------------------------------------------------------- */

cudaError_t launch_overlay(const kr_prim *prims, const int *tile_start, const int *tile_items,
                           const int *active, int n_active, int tiles_x, const FrameArgs &f,
                           cudaStream_t stream)
{
    if (n_active == 0)
        return cudaSuccess;
    overlay_kernel<<<n_active, dim3(kThreads, kThreads), 0, stream>>>(prims, tile_start,
                                                                        tile_items, active,
                                                                        tiles_x, f);
    return cudaGetLastError();
}

keyer_status cuda_fail(keyer_error *err, const char *what, cudaError_t e)
{
    return keyer_error_set(err, KEYER_STATUS_DEVICE, "overlay render (cuda): %s failed: %s", what,
                           cudaGetErrorString(e));
}

/* Frees the staging and device buffers (after the work using them is done). */
void free_buffers(State *s)
{
    if (s->pending && s->event_ready)
        cudaEventSynchronize(s->staged);
    s->pending = 0;
    if (s->host)
        cudaFreeHost(s->host);
    if (s->dev)
        cudaFree(s->dev); /* synchronises the device: no kernel still reads the old buffer */
    s->host = NULL;
    s->dev = NULL;
    s->bytes = 0;
}

} // namespace

/* ---- entry points ---------------------------------------------------------------------- */

extern "C" void kr_overlay_cuda_free(void *state)
{
    State *s = static_cast<State *>(state);
    if (!s)
        return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(s->device);
    free_buffers(s);
    if (s->event_ready)
        cudaEventDestroy(s->staged);
    if (prev >= 0)
        cudaSetDevice(prev);
    delete s;
}

extern "C" keyer_status kr_overlay_render_cuda(keyer_overlay *ov, keyer_frame *f, keyer_error *err)
{
    if (ov->count == 0)
        return KEYER_OK;
    FrameArgs fa;
    memset(&fa, 0, sizeof(fa));
    fa.width = f->width;
    fa.height = f->height;
    fa.kind = f->format == KEYER_PIXEL_FORMAT_RGBA   ? kRgba
              : f->format == KEYER_PIXEL_FORMAT_NV12 ? kNv12
                                                      : kYuv420p;
    int planes = fa.kind == kRgba ? 1 : fa.kind == kNv12 ? 2 : 3;
    for (int i = 0; i < planes; i++) {
        fa.plane[i] = f->data[i];
        fa.stride[i] = f->stride[i];
    }
    fa.yc = kr_overlay_yuv_coeffs(f);

    int tiles_x = 0, tiles_y = 0;
    keyer_status st = kr_overlay_bin(ov, f->width, f->height, &tiles_x, &tiles_y, err);
    if (st)
        return st;
    const size_t n_tiles = (size_t)tiles_x * (size_t)tiles_y;
    const size_t n_items = (size_t)ov->tile_start[n_tiles];
    size_t n_active = 0;
    for (size_t t = 0; t < n_tiles; t++)
        n_active += ov->tile_start[t] != ov->tile_start[t + 1];
    if (n_active == 0)
        return KEYER_OK;
    const size_t off_start = align16((size_t)ov->count * sizeof(kr_prim));
    const size_t off_items = off_start + align16((n_tiles + 1) * sizeof(int));
    const size_t off_active = off_items + align16(n_items * sizeof(int));
    const size_t total = off_active + align16(n_active * sizeof(int));

    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaGetDevice", e);
    if (prev != f->device && (e = cudaSetDevice(f->device)) != cudaSuccess)
        return cuda_fail(err, "cudaSetDevice", e);
    State *s = static_cast<State *>(ov->cuda);
    if (s && s->device != f->device) {
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                             "overlay render (cuda): frame on device %d, overlay used on device %d",
                             f->device, s->device);
        goto done;
    }
    if (!s) {
        s = new (std::nothrow) State();
        if (!s) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay render (cuda): out of memory");
            goto done;
        }
        s->device = f->device;
        if ((e = cudaEventCreateWithFlags(&s->staged, cudaEventDisableTiming)) != cudaSuccess) {
            delete s;
            st = cuda_fail(err, "cudaEventCreate", e);
            goto done;
        }
        s->event_ready = 1;
        ov->cuda = s;
    }
    /* The previous frame's copy must have read the staging buffer before it is rewritten. */
    if (s->pending) {
        if ((e = cudaEventSynchronize(s->staged)) != cudaSuccess) {
            st = cuda_fail(err, "cudaEventSynchronize", e);
            goto done;
        }
        s->pending = 0;
    }
    if (total > s->bytes) {
        free_buffers(s);
        size_t want = total + total / 2;
        if ((e = cudaMallocHost(reinterpret_cast<void **>(&s->host), want)) != cudaSuccess) {
            s->host = NULL;
            st = cuda_fail(err, "cudaMallocHost (staging)", e);
            goto done;
        }
        if ((e = cudaMalloc(reinterpret_cast<void **>(&s->dev), want)) != cudaSuccess) {
            s->dev = NULL;
            free_buffers(s);
            st = cuda_fail(err, "cudaMalloc (primitives)", e);
            goto done;
        }
        s->bytes = want;
    }
    {
        memcpy(s->host, ov->prims, (size_t)ov->count * sizeof(kr_prim));
        memcpy(s->host + off_start, ov->tile_start, (n_tiles + 1) * sizeof(int));
        memcpy(s->host + off_items, ov->tile_items, n_items * sizeof(int));
        int *act = reinterpret_cast<int *>(s->host + off_active);
        size_t k = 0;
        for (size_t t = 0; t < n_tiles; t++)
            if (ov->tile_start[t] != ov->tile_start[t + 1])
                act[k++] = (int)t;
        cudaStream_t stream = static_cast<cudaStream_t>(ov->cuda_stream);
        if ((e = cudaMemcpyAsync(s->dev, s->host, total, cudaMemcpyHostToDevice, stream)) !=
            cudaSuccess) {
            st = cuda_fail(err, "cudaMemcpyAsync (primitives)", e);
            goto done;
        }
        if ((e = cudaEventRecord(s->staged, stream)) != cudaSuccess) {
            st = cuda_fail(err, "cudaEventRecord", e);
            goto done;
        }
        s->pending = 1;
        e = launch_overlay(reinterpret_cast<const kr_prim *>(s->dev),
                           reinterpret_cast<const int *>(s->dev + off_start),
                           reinterpret_cast<const int *>(s->dev + off_items),
                           reinterpret_cast<const int *>(s->dev + off_active), (int)n_active,
                           tiles_x, fa, stream);
        if (e != cudaSuccess)
            st = cuda_fail(err, "overlay kernel launch", e);
    }
done:
    if (prev >= 0 && prev != f->device)
        cudaSetDevice(prev);
    return st;
}
