/*
 * CUDA overlay renderer. The host copies the primitive records (one transfer through pinned
 * staging memory, double-buffered so the next frame's records can be staged while this one
 * draws); everything else happens on the device, in two or three kernel launches per frame:
 *
 *  0. flatten_kernel (when the scene has curves): each quadratic Bézier record becomes its
 *     segment records, computed on the device (kr_ov_curve_segment, the host's float
 *     operations, so the segments are the CPU renderer's);
 *  1. bin_kernel: one thread block per 128x128 region (4x4 tiles) scans every primitive and
 *     writes, in primitive order, the indices of those that can touch the region
 *     (kr_ov_may_touch_rect).
 *  2. overlay_kernel: one thread block per 32x32 tile, one thread per 2x2 pixel block (so the
 *     chroma of 4:2:0 frames averages the block's coverage exactly as the CPU does). The block
 *     narrows its region's list to the tile, in order, then stages the primitives in shared
 *     memory in chunks; each warp (a 16x8 pixel block) culls the chunk against its own pixels
 *     with one ballot and shades only the primitives that can touch them.
 *
 * Culling only skips primitives that would add exactly nothing, and the order of the
 * primitives is kept at every step, so each pixel is the CPU renderer's (the same shading code,
 * overlay_internal.h, compiled for the device).
 *
 * Layout of a device file: device helpers, the kernels, the launcher taking a stream, the entry
 * point that checks arguments and stages the data.
 */
#include <cuda_runtime.h>

#include <new>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "overlay/backend.h"

namespace {

/* The device's own tiling (the binning is done here, so it need not be the CPU's 64x64): a
 * thread block draws a 32x32 tile, one thread per 2x2 pixels, one warp per 16x8 pixel block;
 * small blocks keep several resident per multiprocessor while others wait at a barrier. */
constexpr int kTile = 32;
constexpr int kBlock = (kTile / 2) * (kTile / 2); /* threads per drawing block: 256 */
constexpr int kRegionTiles = 4;                   /* binning regions are 4 x 4 tiles */
constexpr int kRegion = kTile * kRegionTiles;     /* 128 pixels */
constexpr int kBinBlock = 1024;                   /* threads per binning block */
constexpr int kChunk = 64; /* primitives staged in shared memory at a time (two per lane) */
constexpr int kWarpsX = kTile / KR_OV_BLOCK_W; /* warps across a tile: 2 */
static_assert(sizeof(kr_prim) % sizeof(int) == 0, "kr_prim is copied word by word");
static_assert(kWarpsX * (kTile / KR_OV_BLOCK_H) == kBlock / 32, "one warp per pixel block");
static_assert((KR_OV_BLOCK_W / 2) * (KR_OV_BLOCK_H / 2) == 32, "a warp's 2x2 blocks");

enum FrameKind { kRgba = 0, kNv12 = 1, kYuv420p = 2 };

struct FrameArgs {
    unsigned char *plane[3];
    ptrdiff_t stride[3];
    int width, height, kind;
    kr_ov_yuv yc;
};

struct State {
    int device;
    unsigned char *host[2];  /* pinned staging of the primitive records, used in turn */
    cudaEvent_t staged[2];   /* recorded after each staging buffer's copy */
    int pending[2];          /* a copy from that buffer was queued since the last wait */
    int events;              /* how many of staged[] were created */
    int next;                /* the staging buffer the next frame uses */
    kr_prim *prims;          /* device copy of the records */
    int *lists;              /* per region: up to `capacity` primitive indices, in order */
    int *counts;             /* per region: the list's length */
    int capacity;            /* records the buffers hold */
    int regions;             /* regions the list buffers hold */
};

/* ---- device ---------------------------------------------------------------------------- */

/* Block-wide ordered compaction: every thread offers `keep` for item `value`; the kept values
 * are written to out[base + rank] in thread order. Returns the number kept. All BLOCK threads
 * of the block must call it. warp_counts: shared scratch of BLOCK / 32 + 1 ints. */
template <int BLOCK>
__device__ int compact(bool keep, int value, int *out, int base, int *warp_counts)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned m = __ballot_sync(0xffffffffu, keep);
    if (lane == 0)
        warp_counts[warp] = __popc(m);
    __syncthreads();
    if (warp == 0) {
        int c = lane < BLOCK / 32 ? warp_counts[lane] : 0, incl = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int v = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o)
                incl += v;
        }
        if (lane < BLOCK / 32)
            warp_counts[lane] = incl - c;
        if (lane == 31)
            warp_counts[BLOCK / 32] = incl;
    }
    __syncthreads();
    if (keep)
        out[base + warp_counts[warp] + __popc(m & ((1u << lane) - 1u))] = value;
    const int total = warp_counts[BLOCK / 32];
    __syncthreads(); /* warp_counts may be reused at once */
    return total;
}

/* Flattens each curve record into its segments, in place: the curve's slot and the rest slots
 * after it (up to n). Other threads only read their own record's kind, which a write here
 * never turns into KR_PRIM_CURVE. */
__global__ void flatten_kernel(kr_prim *prims, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || prims[i].kind != KR_PRIM_CURVE)
        return;
    const kr_prim c = prims[i];
    for (int k = 1; k <= c.segs && i + k - 1 < n; k++) {
        kr_prim seg;
        kr_ov_curve_segment(&c, k, &seg);
        prims[i + k - 1] = seg;
    }
}

__global__ void __launch_bounds__(kBinBlock) bin_kernel(const kr_prim *__restrict__ prims, int n,
                                                     int regions_x, int width, int height,
                                                     int capacity, int *__restrict__ lists,
                                                     int *__restrict__ counts)
{
    __shared__ int warp_counts[kBinBlock / 32 + 1];
    const int rx = blockIdx.x % regions_x, ry = blockIdx.x / regions_x;
    const int x0 = rx * kRegion, y0 = ry * kRegion;
    const int x1 = min(x0 + kRegion, width), y1 = min(y0 + kRegion, height);
    int *list = lists + (size_t)blockIdx.x * (size_t)capacity;
    int total = 0;
    for (int base = 0; base < n; base += kBinBlock) {
        const int i = base + (int)threadIdx.x;
        const bool keep = i < n && kr_ov_may_touch_rect(&prims[i], x0, y0, x1, y1);
        total += compact<kBinBlock>(keep, i, list, total, warp_counts);
    }
    if (threadIdx.x == 0)
        counts[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kBlock, 4) overlay_kernel(const kr_prim *__restrict__ prims,
                                                         const int *__restrict__ lists,
                                                         const int *__restrict__ counts,
                                                         int capacity, int tiles_x, int regions_x,
                                                         FrameArgs f)
{
    __shared__ int tile_list[kBlock];
    __shared__ kr_prim chunk[kChunk];
    __shared__ int warp_counts[kBlock / 32 + 1];
    const int tx = blockIdx.x % tiles_x, ty = blockIdx.x / tiles_x;
    const int region = (ty / kRegionTiles) * regions_x + tx / kRegionTiles;
    const int *list = lists + (size_t)region * (size_t)capacity;
    const int n_region = counts[region];
    const int x0 = tx * kTile, y0 = ty * kTile;
    const int x1 = min(x0 + kTile, f.width), y1 = min(y0 + kTile, f.height);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    /* This warp's pixel block and this thread's 2x2 pixels in it. */
    const int wx0 = x0 + (warp % kWarpsX) * KR_OV_BLOCK_W, wy0 = y0 + (warp / kWarpsX) * KR_OV_BLOCK_H;
    const int wx1 = min(wx0 + KR_OV_BLOCK_W, x1), wy1 = min(wy0 + KR_OV_BLOCK_H, y1);
    const bool warp_in = wx0 < x1 && wy0 < y1;
    const int x = wx0 + 2 * (lane % (KR_OV_BLOCK_W / 2)), y = wy0 + 2 * (lane / (KR_OV_BLOCK_W / 2));
    const bool mine = warp_in && x < x1 && y < y1;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[i][c] = 0.0f;
    for (int rbase = 0; rbase < n_region; rbase += kBlock) {
        /* The region's primitives that can touch this tile, in order. */
        const int r = rbase + (int)threadIdx.x;
        const int idx = r < n_region ? list[r] : 0;
        const bool keep = r < n_region && kr_ov_may_touch_rect(&prims[idx], x0, y0, x1, y1);
        const int n_tile = compact<kBlock>(keep, idx, tile_list, 0, warp_counts);
        for (int base = 0; base < n_tile; base += kChunk) {
            const int n = min(kChunk, n_tile - base);
            /* Stage n records in shared memory, word by word. */
            const int words = n * (int)(sizeof(kr_prim) / sizeof(int));
            int *dst = reinterpret_cast<int *>(chunk);
            for (int w = threadIdx.x; w < words; w += kBlock) {
                const int k = w / (int)(sizeof(kr_prim) / sizeof(int));
                const int off = w % (int)(sizeof(kr_prim) / sizeof(int));
                dst[w] = reinterpret_cast<const int *>(&prims[tile_list[base + k]])[off];
            }
            __syncthreads();
            /* Which of the chunk's primitives can touch this warp's pixels (two per lane), and
             * which of those fill all of them (deep inside a filled box: a plain blend). */
            bool t0 = false, t1 = false, u0 = false, u1 = false;
            if (warp_in && lane < n && kr_ov_may_touch_rect(&chunk[lane], wx0, wy0, wx1, wy1)) {
                t0 = true;
                u0 = kr_ov_box_fills_rect(&chunk[lane], wx0, wy0, wx1, wy1);
            }
            if (warp_in && lane + 32 < n &&
                kr_ov_may_touch_rect(&chunk[lane + 32], wx0, wy0, wx1, wy1)) {
                t1 = true;
                u1 = kr_ov_box_fills_rect(&chunk[lane + 32], wx0, wy0, wx1, wy1);
            }
            const unsigned m0 = __ballot_sync(0xffffffffu, t0);
            const unsigned m1 = __ballot_sync(0xffffffffu, t1);
            const unsigned f0 = __ballot_sync(0xffffffffu, u0);
            const unsigned f1 = __ballot_sync(0xffffffffu, u1);
            if (mine) {
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    unsigned m = half ? m1 : m0;
                    const unsigned fills = half ? f1 : f0;
                    while (m) {
                        const int bit = __ffs(m) - 1;
                        m &= m - 1;
                        const kr_prim *p = &chunk[bit + 32 * half];
                        if (fills & (1u << bit)) {
#pragma unroll
                            for (int i = 0; i < 4; i++)
                                if (x + (i & 1) < x1 && y + (i >> 1) < y1)
                                    kr_ov_blend_fill(p, acc[i]);
                            continue;
                        }
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const int px = x + (i & 1), py = y + (i >> 1);
                            if (px < x1 && py < y1 && kr_ov_touches(p, px, py))
                                kr_ov_shade(p, px, py, acc[i]);
                        }
                    }
                }
            }
            __syncthreads(); /* the chunk is rewritten next */
        }
    }
    if (!mine)
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

cudaError_t launch_overlay(const State *s, int n, int curves, const FrameArgs &f,
                           cudaStream_t stream)
{
    if (curves > 0) {
        flatten_kernel<<<(n + 255) / 256, 256, 0, stream>>>(s->prims, n);
        const cudaError_t fe = cudaGetLastError();
        if (fe != cudaSuccess)
            return fe;
    }
    const int tiles_x = (f.width + kTile - 1) / kTile;
    const int tiles_y = (f.height + kTile - 1) / kTile;
    const int regions_x = (tiles_x + kRegionTiles - 1) / kRegionTiles;
    const int regions_y = (tiles_y + kRegionTiles - 1) / kRegionTiles;
    bin_kernel<<<regions_x * regions_y, kBinBlock, 0, stream>>>(s->prims, n, regions_x, f.width,
                                                             f.height, s->capacity, s->lists,
                                                             s->counts);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    overlay_kernel<<<tiles_x * tiles_y, kBlock, 0, stream>>>(s->prims, s->lists, s->counts,
                                                             s->capacity, tiles_x, regions_x, f);
    return cudaGetLastError();
}

keyer_status cuda_fail(keyer_error *err, const char *what, cudaError_t e)
{
    return keyer_error_set(err, KEYER_STATUS_DEVICE, "overlay render (cuda): %s failed: %s", what,
                           cudaGetErrorString(e));
}

/* Waits for the copies still reading the staging buffers, then frees every buffer. */
void free_buffers(State *s)
{
    for (int b = 0; b < 2; b++) {
        if (s->pending[b] && b < s->events)
            cudaEventSynchronize(s->staged[b]);
        s->pending[b] = 0;
        if (s->host[b])
            cudaFreeHost(s->host[b]);
        s->host[b] = NULL;
    }
    /* cudaFree synchronises the device: no kernel still reads the old buffers. */
    if (s->prims)
        cudaFree(s->prims);
    if (s->lists)
        cudaFree(s->lists);
    if (s->counts)
        cudaFree(s->counts);
    s->prims = NULL;
    s->lists = NULL;
    s->counts = NULL;
    s->capacity = 0;
    s->regions = 0;
}

/* Records the buffers hold at least: a frame's skeleton, boxes and ids fit without a
 * second allocation (a growth frees the old buffers, and cudaFree waits for the whole
 * device: a stall of the drawing stream mid-run, and of every stream behind it). 48 KB of
 * records per staging buffer, and cap x regions list entries (270 KB at 1080p). */
constexpr int kMinRecords = 512;

/* Grows the buffers to hold n records and `regions` region lists (never shrinks). */
keyer_status reserve(State *s, int n, int regions, keyer_error *err)
{
    if (n <= s->capacity && regions <= s->regions)
        return KEYER_OK;
    int cap = n > s->capacity ? n + n / 2 : s->capacity;
    if (cap < kMinRecords)
        cap = kMinRecords;
    const int reg = regions > s->regions ? regions : s->regions;
    free_buffers(s);
    cudaError_t e;
    for (int b = 0; b < 2; b++)
        if ((e = cudaMallocHost(reinterpret_cast<void **>(&s->host[b]),
                                (size_t)cap * sizeof(kr_prim))) != cudaSuccess) {
            s->host[b] = NULL;
            free_buffers(s);
            return cuda_fail(err, "cudaMallocHost (staging)", e);
        }
    if ((e = cudaMalloc(reinterpret_cast<void **>(&s->prims), (size_t)cap * sizeof(kr_prim))) !=
            cudaSuccess ||
        (e = cudaMalloc(reinterpret_cast<void **>(&s->lists),
                        (size_t)cap * (size_t)reg * sizeof(int))) != cudaSuccess ||
        (e = cudaMalloc(reinterpret_cast<void **>(&s->counts), (size_t)reg * sizeof(int))) !=
            cudaSuccess) {
        free_buffers(s);
        return cuda_fail(err, "cudaMalloc (primitives and tile lists)", e);
    }
    s->capacity = cap;
    s->regions = reg;
    return KEYER_OK;
}

/* ---- entry points ---------------------------------------------------------------------- */

void state_destroy(void *state)
{
    State *s = static_cast<State *>(state);
    if (!s)
        return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(s->device);
    free_buffers(s);
    for (int b = 0; b < s->events; b++)
        cudaEventDestroy(s->staged[b]);
    if (prev >= 0)
        cudaSetDevice(prev);
    delete s;
}

keyer_status render(void **state, const kr_overlay_job *job, keyer_error *err)
{
    const keyer_frame *f = job->frame;
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
    fa.yc = job->yc;
    const int tiles_x = (f->width + kTile - 1) / kTile;
    const int tiles_y = (f->height + kTile - 1) / kTile;
    const int regions = ((tiles_x + kRegionTiles - 1) / kRegionTiles) *
                        ((tiles_y + kRegionTiles - 1) / kRegionTiles);
    cudaStream_t stream = static_cast<cudaStream_t>(job->stream);
    keyer_status st = KEYER_OK;
    int b = 0;

    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaGetDevice", e);
    if (prev != f->device && (e = cudaSetDevice(f->device)) != cudaSuccess)
        return cuda_fail(err, "cudaSetDevice", e);
    State *s = static_cast<State *>(*state);
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
        *state = s;
        for (; s->events < 2; s->events++)
            if ((e = cudaEventCreateWithFlags(&s->staged[s->events], cudaEventDisableTiming)) !=
                cudaSuccess) {
                st = cuda_fail(err, "cudaEventCreate", e);
                goto done;
            }
    }
    if (s->events < 2) {
        st = keyer_error_set(err, KEYER_STATUS_DEVICE, "overlay render (cuda): set-up failed earlier");
        goto done;
    }
    if ((st = reserve(s, job->count, regions, err)))
        goto done;
    /* The copy that last read this staging buffer (two frames ago) must be done. */
    b = s->next;
    if (s->pending[b]) {
        if ((e = cudaEventSynchronize(s->staged[b])) != cudaSuccess) {
            st = cuda_fail(err, "cudaEventSynchronize", e);
            goto done;
        }
        s->pending[b] = 0;
    }
    memcpy(s->host[b], job->prims, (size_t)job->count * sizeof(kr_prim));
    if ((e = cudaMemcpyAsync(s->prims, s->host[b], (size_t)job->count * sizeof(kr_prim),
                             cudaMemcpyHostToDevice, stream)) != cudaSuccess) {
        st = cuda_fail(err, "cudaMemcpyAsync (primitives)", e);
        goto done;
    }
    if ((e = cudaEventRecord(s->staged[b], stream)) != cudaSuccess) {
        st = cuda_fail(err, "cudaEventRecord", e);
        goto done;
    }
    s->pending[b] = 1;
    s->next = 1 - b;
    if ((e = launch_overlay(s, job->count, job->curves, fa, stream)) != cudaSuccess)
        st = cuda_fail(err, "overlay kernel launch", e);
done:
    if (prev >= 0 && prev != f->device)
        cudaSetDevice(prev);
    return st;
}

} // namespace

extern "C" const kr_overlay_backend kr_overlay_cuda = {"cuda", render, state_destroy};
