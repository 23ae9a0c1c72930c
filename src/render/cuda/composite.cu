/*
 * Compositing on CUDA, in the frame's own format (NV12 in, NV12 out: the luma and chroma
 * planes are blended where they are, no RGB round trip). The same steps and per-sample
 * arithmetic as render/cpu/composite.c (render/fx_composite.h, render/fx_math.h):
 *   blur: grid cells of mask-weighted sums -> Gaussian along x -> along y and divide ->
 *         blend each plane sample over the bilinearly interpolated background;
 *   colour / green screen / image: blend over a constant or the (converted) background;
 *   alpha (RGBA), mask outputs: one thread per pixel.
 */
#include <cuda_runtime.h>
#include <string.h>

#include "render/cuda/cuda.h"
#include "render/fx_composite.h"

enum {
    /* slot 0 is kr_cuda_prepare's (background conversion) */
    SLOT_GRID = 10,
    SLOT_GRIDH = 11,
    SLOT_BGRID = 12,
    SLOT_BGT = 13,
};

#define CHECK(what)                                                                             \
    do {                                                                                        \
        keyer_status st_ = kr_cuda_check(what, err);                                            \
        if (st_)                                                                                \
            return st_;                                                                         \
    } while (0)

#define XY                                                                                      \
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y

static dim3 grid2(int w, int h) { return dim3((unsigned)(w + 15) / 16, (unsigned)(h + 15) / 16); }

/* ---- blur grid ------------------------------------------------------------------------- */

__global__ static void grid_kernel(kr_composite_job j, float *grid, int gch)
{
    XY;
    if (x >= j.gw || y >= j.gh)
        return;
    float acc[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    kr_blur_cell(&j, x, y, acc);
    size_t cells = (size_t)j.gw * j.gh, i = (size_t)y * j.gw + x;
    for (int c = 0; c < gch; c++)
        grid[c * cells + i] = acc[c];
}

__global__ static void blur_h_kernel(kr_composite_job j, const float *grid, float *gh_, int gch)
{
    XY;
    if (x >= j.gw || y >= j.gh)
        return;
    size_t cells = (size_t)j.gw * j.gh, row = (size_t)y * j.gw;
    for (int c = 0; c < gch; c++)
        gh_[c * cells + row + x] = kr_blur_h_at(grid + c * cells + row, j.gw, x, j.kernel, j.taps);
}

__global__ static void blur_v_kernel(kr_composite_job j, const float *gh_, float *bgrid, int gch)
{
    XY;
    if (x >= j.gw || y >= j.gh)
        return;
    size_t cells = (size_t)j.gw * j.gh, i = (size_t)y * j.gw + x;
    float v[5];
    for (int c = 0; c < gch; c++)
        v[c] = kr_blur_v_at(gh_ + c * cells, j.gw, j.gh, x, y, j.kernel, j.taps);
    for (int c = 0; c < 3; c++)
        bgrid[c * cells + i] = v[c] / v[3 + j.src.ch[c].level];
}

/* ---- blending -------------------------------------------------------------------------- */

/* One sample (x, y) of every channel at `level`; bg: the converted background (IMAGE). */
__global__ static void blend_kernel(kr_composite_job j, int level, const float *bgrid,
                                    kr_src bg)
{
    XY;
    const kr_chan *c0 = &j.src.ch[level ? 1 : 0];
    if (x >= c0->width || y >= c0->height)
        return;
    float a = level ? kr_alpha_chroma(j.alpha, j.alpha_stride, j.alpha_f32, j.width, j.height, x, y)
                    : kr_alpha_at(j.alpha, j.alpha_stride, j.alpha_f32, x, y);
    float d = kr_dither(j.dither, x, y);
    size_t cells = (size_t)j.gw * j.gh;
    int gx0 = 0, gx1 = 0, gy0 = 0, gy1 = 0;
    float fx = 0.0f, fy = 0.0f;
    if (j.mode == KEYER_COMPOSITE_BLUR) {
        float sc = kr_blur_grid_scale(&j, level);
        fx = kr_axis_split(kr_up_coord(x, sc), j.gw, &gx0, &gx1);
        fy = kr_axis_split(kr_up_coord(y, sc), j.gh, &gy0, &gy1);
    }
    for (int c = 0; c < 3; c++) {
        const kr_chan *ch = &j.src.ch[c];
        if (ch->level != level)
            continue;
        float b;
        if (j.mode == KEYER_COMPOSITE_BLUR)
            b = kr_grid_bilerp(bgrid + c * cells, j.gw, gy0, gy1, fy, gx0, gx1, fx);
        else if (j.mode == KEYER_COMPOSITE_IMAGE)
            b = kr_chan_load(&bg.ch[c], x, y);
        else
            b = j.bg_codes[c];
        float v = kr_blend(kr_chan_load(ch, x, y), b, a);
        kr_chan_store(&j.dst.ch[c], x, y, kr_quantise(v, d, j.src.maxcode));
    }
    if (!level && j.src_alpha_chan && j.dst_alpha_chan && j.src_alpha_chan != j.dst_alpha_chan)
        j.dst_alpha_chan[(ptrdiff_t)y * j.dst.ch[0].stride + 4 * x] =
            j.src_alpha_chan[(ptrdiff_t)y * j.src_alpha_stride + 4 * x];
}

__global__ static void rgba_kernel(kr_composite_job j)
{
    XY;
    if (x >= j.width || y >= j.height)
        return;
    kr_comp_rgba(&j, x, y, j.mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED,
                 j.out + (ptrdiff_t)y * j.out_stride + 4 * x);
}

__global__ static void mask_kernel(kr_composite_job j, int level)
{
    XY;
    if (j.out_kind == KR_OUT_GRAY8 || j.out_kind == KR_OUT_GRAYF32) {
        if (x >= j.width || y >= j.height)
            return;
        float a = kr_alpha_at(j.alpha, j.alpha_stride, j.alpha_f32, x, y);
        uint8_t *row = j.out + (ptrdiff_t)y * j.out_stride;
        if (j.out_kind == KR_OUT_GRAYF32)
            ((float *)(void *)row)[x] = a;
        else
            row[x] = (uint8_t)kr_quantise(a * 255.0f, 0.5f, 255);
        return;
    }
    const kr_chan *c0 = &j.dst.ch[level ? 1 : 0];
    if (x >= c0->width || y >= c0->height)
        return;
    float a = level ? kr_alpha_chroma(j.alpha, j.alpha_stride, j.alpha_f32, j.width, j.height, x, y)
                    : kr_alpha_at(j.alpha, j.alpha_stride, j.alpha_f32, x, y);
    for (int c = 0; c < 3; c++)
        if (j.dst.ch[c].level == level)
            kr_chan_store(&j.dst.ch[c], x, y, kr_comp_mask_code(&j, c, a));
    if (!level && j.dst_alpha_chan)
        j.dst_alpha_chan[(ptrdiff_t)y * j.dst.ch[0].stride + 4 * x] = 255;
}

/* The background's RGB tensor (W x H x 3) encoded into the cache's channels: full-resolution
 * channels from their pixel, chroma from the mean of its 2x2 block (as the CPU). */
__global__ static void bg_encode_kernel(const float *t, kr_src d, int W, int H, int level)
{
    XY;
    const kr_chan *c0 = &d.ch[level ? 1 : 0];
    if (x >= c0->width || y >= c0->height)
        return;
    float rgb[3];
    if (!level) {
        const float *p = t + ((size_t)y * W + x) * 3;
        rgb[0] = p[0];
        rgb[1] = p[1];
        rgb[2] = p[2];
    } else {
        int xa = 2 * x, ya = 2 * y;
        int xb = xa + 1 < W ? xa + 1 : xa, yb = ya + 1 < H ? ya + 1 : ya;
        const float *p00 = t + ((size_t)ya * W + xa) * 3, *p01 = t + ((size_t)ya * W + xb) * 3;
        const float *p10 = t + ((size_t)yb * W + xa) * 3, *p11 = t + ((size_t)yb * W + xb) * 3;
        for (int i = 0; i < 3; i++)
            rgb[i] = (p00[i] + p01[i] + p10[i] + p11[i]) * 0.25f;
    }
    float codes[3];
    kr_src_encode(&d, rgb, codes);
    for (int c = 0; c < 3; c++)
        if (d.ch[c].level == level)
            kr_chan_store(&d.ch[c], x, y, kr_quantise(codes[c], 0.5f, d.maxcode));
}

/* ---- the job --------------------------------------------------------------------------- */

/* The frame's format as the cache needs it, from the frame's channels. */
static keyer_pixel_format format_of(const kr_src *s)
{
    if (!s->chroma)
        return s->ch[0].step == 4 ? KEYER_PIXEL_FORMAT_RGBA : KEYER_PIXEL_FORMAT_RGB24;
    if (s->maxcode == 1023)
        return KEYER_PIXEL_FORMAT_P010;
    return s->ch[1].step == 2 ? KEYER_PIXEL_FORMAT_NV12 : KEYER_PIXEL_FORMAT_YUV420P;
}

static keyer_status build_background(kr_cuda_state *s, const kr_composite_job *job,
                                     cudaStream_t stream, keyer_error *err)
{
    const int W = job->width, H = job->height;
    keyer_pixel_format fmt = format_of(&job->src);
    /* the cache: planes laid out as keyer_frame_alloc would, in one device allocation */
    keyer_frame layout;
    memset(&layout, 0, sizeof(layout));
    layout.format = fmt;
    layout.width = W;
    layout.height = H;
    size_t offs[KEYER_FRAME_MAX_PLANES], total = 0;
    int planes = keyer_pixel_format_planes(fmt);
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        keyer_status st = keyer_pixel_format_plane(fmt, W, H, p, &pw, &ph, &bpe, err);
        if (st)
            return st;
        size_t row = ((size_t)pw * (size_t)bpe + 255) & ~(size_t)255;
        layout.stride[p] = (ptrdiff_t)row;
        offs[p] = total;
        total += row * (size_t)ph;
    }
    if (s->bg_size < total) {
        cudaFree(s->bg_mem);
        s->bg_mem = NULL;
        s->bg_size = 0;
        if (cudaMalloc(&s->bg_mem, total) != cudaSuccess) {
            cudaGetLastError();
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                   "cudaMalloc of %zu bytes for the background", total);
        }
        s->bg_size = total;
    }
    for (int p = 0; p < planes; p++)
        layout.data[p] = (uint8_t *)s->bg_mem + offs[p];
    kr_src ch;
    keyer_status st = kr_fx_src_init(&ch, &layout, err);
    if (st)
        return st;
    kr_src d = job->src; /* the frame's colour conversion, the cache's channels */
    for (int i = 0; i < 3; i++)
        d.ch[i] = ch.ch[i];
    void *t;
    if ((st = kr_cuda_scratch(s, SLOT_BGT, sizeof(float) * 3 * (size_t)W * H, &t, err)))
        return st;
    kr_prepare_job pj;
    memset(&pj, 0, sizeof(pj));
    pj.items = &job->bg;
    pj.count = 1;
    pj.width = W;
    pj.height = H;
    pj.dtype = KEYER_DTYPE_F32;
    pj.layout = KEYER_TENSOR_LAYOUT_NHWC;
    for (int k = 0; k < 3; k++) {
        pj.scale[k] = 1.0f;
        pj.src[k] = k;
    }
    pj.tensor = t;
    pj.stream = job->stream;
    pj.device = job->device;
    if ((st = kr_cuda_prepare(s, &pj, err)))
        return st;
    dim3 b16(16, 16);
    for (int level = 0; level <= d.chroma; level++) {
        const kr_chan *c0 = &d.ch[level ? 1 : 0];
        bg_encode_kernel<<<grid2(c0->width, c0->height), b16, 0, stream>>>((const float *)t, d, W,
                                                                            H, level);
    }
    CHECK("background conversion kernel");
    s->bg_src = d;
    return KEYER_OK;
}

extern "C" keyer_status kr_cuda_composite(void *state, const kr_composite_job *job,
                                          keyer_error *err)
{
    kr_cuda_state *s = (kr_cuda_state *)state;
    keyer_status st = kr_cuda_enter(s, job->device, err);
    if (st)
        return st;
    cudaStream_t stream = (cudaStream_t)job->stream;
    const kr_composite_job &j = *job;
    dim3 b16(16, 16);
    if (j.out_kind == KR_OUT_RGBA) {
        rgba_kernel<<<grid2(j.width, j.height), b16, 0, stream>>>(j);
        CHECK("composite rgba kernel");
        return KEYER_OK;
    }
    if (j.mode == KEYER_COMPOSITE_MASK) {
        if (j.out_kind != KR_OUT_SAME) {
            mask_kernel<<<grid2(j.width, j.height), b16, 0, stream>>>(j, 0);
        } else {
            for (int level = 0; level <= j.dst.chroma; level++) {
                const kr_chan *c0 = &j.dst.ch[level ? 1 : 0];
                mask_kernel<<<grid2(c0->width, c0->height), b16, 0, stream>>>(j, level);
            }
        }
        CHECK("composite mask kernel");
        return KEYER_OK;
    }
    kr_src bg;
    memset(&bg, 0, sizeof(bg));
    void *bgrid = NULL;
    if (j.mode == KEYER_COMPOSITE_IMAGE) {
        if (j.bg_direct) {
            bg = j.bg.src;
        } else {
            if (j.bg_dirty && (st = build_background(s, job, stream, err)))
                return st;
            bg = s->bg_src;
        }
    }
    if (j.mode == KEYER_COMPOSITE_BLUR) {
        int gch = kr_blur_channels(job);
        size_t cells = (size_t)j.gw * j.gh;
        void *grid, *gridh;
        if ((st = kr_cuda_scratch(s, SLOT_GRID, sizeof(float) * 5 * cells, &grid, err)) ||
            (st = kr_cuda_scratch(s, SLOT_GRIDH, sizeof(float) * 5 * cells, &gridh, err)) ||
            (st = kr_cuda_scratch(s, SLOT_BGRID, sizeof(float) * 3 * cells, &bgrid, err)))
            return st;
        dim3 gg = grid2(j.gw, j.gh);
        grid_kernel<<<gg, b16, 0, stream>>>(j, (float *)grid, gch);
        blur_h_kernel<<<gg, b16, 0, stream>>>(j, (const float *)grid, (float *)gridh, gch);
        blur_v_kernel<<<gg, b16, 0, stream>>>(j, (const float *)gridh, (float *)bgrid, gch);
        CHECK("composite blur kernels");
    }
    for (int level = 0; level <= j.src.chroma; level++) {
        const kr_chan *c0 = &j.src.ch[level ? 1 : 0];
        blend_kernel<<<grid2(c0->width, c0->height), b16, 0, stream>>>(j, level,
                                                                         (const float *)bgrid, bg);
    }
    CHECK("composite blend kernel");
    return KEYER_OK;
}
