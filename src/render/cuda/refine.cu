/*
 * Mask refinement on CUDA, the same steps as render/cpu/refine.c with the per-sample
 * arithmetic of render/fx_math.h:
 *   grid: mask -> P, frame -> L (area-sampled luma), temporal smoothing against the stream's
 *         device history (scene cut from a device-side mean, no host round trip), guided
 *         filter coefficients A, B (horizontal then vertical box sums, in the CPU's order);
 *   full resolution: alpha = A * luma + B (bilinear, x then y) with the soft threshold, then
 *         dilate/erode (window max/min) and feather (two exact integer box passes per axis).
 * Every kernel is one thread per output sample; launches are queued on the job's stream.
 */
#include <cuda_runtime.h>

#include "render/cuda/cuda.h"

enum {
    SLOT_P = 1,
    SLOT_L = 2,
    SLOT_BOXH = 3, /* 4 channels */
    SLOT_AB0 = 4,  /* a, b before averaging */
    SLOT_AB = 5,   /* A, B */
    SLOT_SUM = 6,  /* scene-cut sum (double) */
    SLOT_M = 7,    /* 16-bit matte */
    SLOT_T = 8,    /* 16-bit matte */
    SLOT_U = 9,    /* 32-bit box sums */
};

#define CHECK(what)                                                                             \
    do {                                                                                        \
        keyer_status st_ = kr_cuda_check(what, err);                                            \
        if (st_)                                                                                \
            return st_;                                                                         \
    } while (0)

static dim3 grid2(int w, int h) { return dim3((unsigned)(w + 15) / 16, (unsigned)(h + 15) / 16); }

#define XY                                                                                      \
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y

/* ---- grid ------------------------------------------------------------------------------ */

__global__ static void mask_kernel(kr_refine_job j, float *P)
{
    XY;
    if (x >= j.gw || y >= j.gh)
        return;
    float v;
    if (j.region_is_mask) {
        const float *m = (const float *)(const void *)((const uint8_t *)j.mask + (ptrdiff_t)y * j.mask_stride);
        v = kr_mask_value(m[x]);
    } else {
        float my = j.region[1] + ((float)y + 0.5f) * (j.region[3] / (float)j.gh) - 0.5f;
        float mx = j.region[0] + ((float)x + 0.5f) * (j.region[2] / (float)j.gw) - 0.5f;
        v = kr_mask_bilinear(j.mask, j.mask_stride, j.mask_width, j.mask_height, mx, my);
    }
    P[(size_t)y * j.gw + x] = v;
}

__global__ static void luma_kernel(kr_refine_job j, float *L)
{
    XY;
    if (x >= j.gw || y >= j.gh)
        return;
    L[(size_t)y * j.gw + x] = kr_grid_luma(&j.grid, x, y);
}

/* Sum of |L - L_prev| into *sum (double). */
__global__ static void absdiff_kernel(const float *L, const float *Lp, size_t n, double *sum)
{
    __shared__ double part[256];
    double acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc += (double)fabsf(L[i] - Lp[i]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(sum, part[0]);
}

/* Smooths P with the history (unless there is none or the scene cut), then stores the new
 * history. */
__global__ static void temporal_kernel(kr_refine_job j, float *P, const float *L, float *hm,
                                       float *hl, const double *sum, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float p = P[i];
    if (j.history_valid && (float)(*sum / (double)n) <= j.scene_cut)
        p = kr_temporal_blend(&j.temporal, p, hm[i], L[i] - hl[i]);
    P[i] = p;
    hm[i] = p;
    hl[i] = L[i];
}

/* Horizontal box sums over 4 channels built from L and P: I, p, I*p, I*I (CPU order). */
__global__ static void guided_h_kernel(const float *L, const float *P, float *H, int gw, int gh,
                                       int r)
{
    XY;
    if (x >= gw || y >= gh)
        return;
    size_t cells = (size_t)gw * gh, row = (size_t)y * gw;
    int lo = x - r < 0 ? 0 : x - r, hi = x + r > gw - 1 ? gw - 1 : x + r;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    for (int i = lo; i <= hi; i++) {
        float l = L[row + i], p = P[row + i];
        s0 += l;
        s1 += p;
        s2 += l * p;
        s3 += l * l;
    }
    H[row + x] = s0;
    H[cells + row + x] = s1;
    H[2 * cells + row + x] = s2;
    H[3 * cells + row + x] = s3;
}

/* Vertical sums of the 4 channels, means, and the linear coefficients a, b. */
__global__ static void guided_v_kernel(const float *H, float *AB0, int gw, int gh, int r, float eps)
{
    XY;
    if (x >= gw || y >= gh)
        return;
    size_t cells = (size_t)gw * gh;
    int lo = y - r < 0 ? 0 : y - r, hi = y + r > gh - 1 ? gh - 1 : y + r;
    int xa = x - r < 0 ? 0 : x - r, xb = x + r > gw - 1 ? gw - 1 : x + r;
    float area = (float)((hi - lo + 1) * (xb - xa + 1));
    float m[4];
    for (int c = 0; c < 4; c++) {
        float s = 0.0f;
        for (int k = lo; k <= hi; k++)
            s += H[c * cells + (size_t)k * gw + x];
        m[c] = s / area;
    }
    kr_guided_coeffs(m[0], m[1], m[2], m[3], eps, &AB0[(size_t)y * gw + x],
                     &AB0[cells + (size_t)y * gw + x]);
}

/* Box means of nch channels: horizontal sums, then vertical sums / area. */
__global__ static void box_h_kernel(const float *in, float *H, int nch, int gw, int gh, int r)
{
    XY;
    if (x >= gw || y >= gh)
        return;
    size_t cells = (size_t)gw * gh, row = (size_t)y * gw;
    int lo = x - r < 0 ? 0 : x - r, hi = x + r > gw - 1 ? gw - 1 : x + r;
    for (int c = 0; c < nch; c++) {
        float s = 0.0f;
        for (int i = lo; i <= hi; i++)
            s += in[c * cells + row + i];
        H[c * cells + row + x] = s;
    }
}

__global__ static void box_v_kernel(const float *H, float *out, int nch, int gw, int gh, int r)
{
    XY;
    if (x >= gw || y >= gh)
        return;
    size_t cells = (size_t)gw * gh;
    int lo = y - r < 0 ? 0 : y - r, hi = y + r > gh - 1 ? gh - 1 : y + r;
    int xa = x - r < 0 ? 0 : x - r, xb = x + r > gw - 1 ? gw - 1 : x + r;
    for (int c = 0; c < nch; c++) {
        float s = 0.0f;
        for (int k = lo; k <= hi; k++)
            s += H[c * cells + (size_t)k * gw + x];
        out[c * cells + (size_t)y * gw + x] = s / (float)((hi - lo + 1) * (xb - xa + 1));
    }
}

/* ---- full resolution ------------------------------------------------------------------- */

/* alpha of pixel (x, y): to the output (direct) or to the 16-bit matte M. */
__global__ static void upsample_kernel(kr_refine_job j, const float *A, const float *B,
                                       uint16_t *M, int direct)
{
    XY;
    if (x >= j.width || y >= j.height)
        return;
    int gx0, gx1, gy0, gy1;
    float fx = kr_axis_split(kr_up_coord(x, (float)j.gw / (float)j.width), j.gw, &gx0, &gx1);
    float fy = kr_axis_split(kr_up_coord(y, (float)j.gh / (float)j.height), j.gh, &gy0, &gy1);
    float a = kr_grid_bilerp_xy(A, j.gw, gy0, gy1, fy, gx0, gx1, fx);
    float b = kr_grid_bilerp_xy(B, j.gw, gy0, gy1, fy, gx0, gx1, fx);
    float q = kr_refine_alpha(a, b, kr_src_luma_pixel(&j.guide, x, y), j.threshold, j.lo,
                              j.inv_range);
    if (!direct) {
        M[(size_t)y * j.width + x] = kr_alpha16(q);
        return;
    }
    uint8_t *row = j.out + (ptrdiff_t)y * j.out_stride;
    if (j.out_f32)
        ((float *)(void *)row)[x] = q;
    else
        row[x] = (uint8_t)(q * 255.0f + 0.5f);
}

/* Running max (is_max) or min over 2r+1 along x (dir 0) or y (dir 1), edges clipped. */
__global__ static void morph_kernel(const uint16_t *in, uint16_t *out, int W, int H, int r,
                                    int is_max, int dir)
{
    XY;
    if (x >= W || y >= H)
        return;
    int n = dir ? H : W, c = dir ? y : x;
    int lo = c - r < 0 ? 0 : c - r, hi = c + r > n - 1 ? n - 1 : c + r;
    unsigned e = is_max ? 0u : 0xFFFFu;
    for (int i = lo; i <= hi; i++) {
        unsigned v = dir ? in[(size_t)i * W + x] : in[(size_t)y * W + i];
        e = is_max ? (v > e ? v : e) : (v < e ? v : e);
    }
    out[(size_t)y * W + x] = (uint16_t)e;
}

/* box1: sum of in[clamp(c + k)], |k| <= r, along x (dir 0) or y (dir 1). */
__global__ static void box1_kernel(const uint16_t *in, uint32_t *out, int W, int H, int r, int dir)
{
    XY;
    if (x >= W || y >= H)
        return;
    int n = dir ? H : W, c = dir ? y : x;
    uint32_t s = 0;
    for (int k = -r; k <= r; k++) {
        int i = c + k < 0 ? 0 : c + k > n - 1 ? n - 1 : c + k;
        s += dir ? in[(size_t)i * W + x] : in[(size_t)y * W + i];
    }
    out[(size_t)y * W + x] = s;
}

/* box2 of the box1 sums, divided: to a 16-bit matte (out16) or to the alpha output. */
__global__ static void box2_kernel(const uint32_t *in, uint16_t *out16, kr_refine_job j, int r,
                                   int dir, uint32_t mul, uint32_t mul8)
{
    XY;
    int W = j.width, H = j.height;
    if (x >= W || y >= H)
        return;
    int n = dir ? H : W, c = dir ? y : x;
    uint32_t s = 0;
    for (int k = -r; k <= r; k++) {
        int i = c + k < 0 ? 0 : c + k > n - 1 ? n - 1 : c + k;
        s += dir ? in[(size_t)i * W + x] : in[(size_t)y * W + i];
    }
    if (out16) {
        out16[(size_t)y * W + x] = (uint16_t)kr_box_div(s, mul);
        return;
    }
    uint8_t *row = j.out + (ptrdiff_t)y * j.out_stride;
    if (j.out_f32)
        ((float *)(void *)row)[x] = (float)kr_box_div(s, mul) * (1.0f / 65535.0f);
    else
        row[x] = (uint8_t)kr_box_div(s, mul8);
}

__global__ static void output_kernel(const uint16_t *M, kr_refine_job j)
{
    XY;
    if (x >= j.width || y >= j.height)
        return;
    uint16_t m = M[(size_t)y * j.width + x];
    uint8_t *row = j.out + (ptrdiff_t)y * j.out_stride;
    if (j.out_f32)
        ((float *)(void *)row)[x] = (float)m * (1.0f / 65535.0f);
    else
        row[x] = kr_alpha16_to8(m);
}

/* ---- the job --------------------------------------------------------------------------- */

static keyer_status history(kr_cuda_state *s, int id, size_t cells, kr_cuda_history **out,
                            keyer_error *err)
{
    kr_cuda_history *h = &s->history[id];
    if (h->cells < cells) {
        cudaFree(h->mask);
        cudaFree(h->luma);
        h->mask = h->luma = NULL;
        h->cells = 0;
        if (cudaMalloc(&h->mask, sizeof(float) * cells) != cudaSuccess ||
            cudaMalloc(&h->luma, sizeof(float) * cells) != cudaSuccess) {
            cudaGetLastError();
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                   "cudaMalloc of the temporal history of stream %d", id);
        }
        h->cells = cells;
    }
    *out = h;
    return KEYER_OK;
}

extern "C" keyer_status kr_cuda_refine(void *state, const kr_refine_job *job, keyer_error *err)
{
    kr_cuda_state *s = (kr_cuda_state *)state;
    keyer_status st = kr_cuda_enter(s, job->device, err);
    if (st)
        return st;
    cudaStream_t stream = (cudaStream_t)job->stream;
    const kr_refine_job &j = *job;
    const int gw = j.gw, gh = j.gh, W = j.width, H = j.height;
    const size_t cells = (size_t)gw * gh, pixels = (size_t)W * H;
    void *P, *L, *HB, *AB0, *AB, *sum;
    if ((st = kr_cuda_scratch(s, SLOT_P, sizeof(float) * cells, &P, err)) ||
        (st = kr_cuda_scratch(s, SLOT_L, sizeof(float) * cells, &L, err)) ||
        (st = kr_cuda_scratch(s, SLOT_BOXH, sizeof(float) * 4 * cells, &HB, err)) ||
        (st = kr_cuda_scratch(s, SLOT_AB0, sizeof(float) * 2 * cells, &AB0, err)) ||
        (st = kr_cuda_scratch(s, SLOT_AB, sizeof(float) * 2 * cells, &AB, err)) ||
        (st = kr_cuda_scratch(s, SLOT_SUM, sizeof(double), &sum, err)))
        return st;
    dim3 b16(16, 16), gg = grid2(gw, gh), gf = grid2(W, H);
    mask_kernel<<<gg, b16, 0, stream>>>(j, (float *)P);
    CHECK("refine mask kernel");
    if (j.need_luma) {
        luma_kernel<<<gg, b16, 0, stream>>>(j, (float *)L);
        CHECK("refine luma kernel");
    }
    if (j.temporal.mode != KEYER_TEMPORAL_OFF) {
        kr_cuda_history *h = NULL;
        if ((st = history(s, j.stream_id, cells, &h, err)))
            return st;
        if (cudaMemsetAsync(sum, 0, sizeof(double), stream) != cudaSuccess)
            return keyer_error_set(err, KEYER_STATUS_DEVICE, "cudaMemsetAsync failed");
        if (j.history_valid) {
            int blocks = (int)((cells + 255) / 256);
            blocks = blocks > 256 ? 256 : blocks;
            absdiff_kernel<<<blocks, 256, 0, stream>>>((const float *)L, h->luma, cells,
                                                       (double *)sum);
            CHECK("refine scene-cut kernel");
        }
        temporal_kernel<<<(unsigned)((cells + 255) / 256), 256, 0, stream>>>(
            j, (float *)P, (const float *)L, h->mask, h->luma, (const double *)sum, cells);
        CHECK("refine temporal kernel");
    }
    float *A = (float *)AB, *B = (float *)AB + cells;
    if (j.upsample == KEYER_UPSAMPLE_GUIDED) {
        guided_h_kernel<<<gg, b16, 0, stream>>>((const float *)L, (const float *)P, (float *)HB,
                                                gw, gh, j.radius);
        CHECK("refine guided kernel");
        guided_v_kernel<<<gg, b16, 0, stream>>>((const float *)HB, (float *)AB0, gw, gh, j.radius,
                                                j.eps);
        CHECK("refine guided kernel");
        box_h_kernel<<<gg, b16, 0, stream>>>((const float *)AB0, (float *)HB, 2, gw, gh, j.radius);
        CHECK("refine box kernel");
        box_v_kernel<<<gg, b16, 0, stream>>>((const float *)HB, A, 2, gw, gh, j.radius);
        CHECK("refine box kernel");
    } else {
        if (cudaMemsetAsync(A, 0, sizeof(float) * cells, stream) != cudaSuccess ||
            cudaMemcpyAsync(B, P, sizeof(float) * cells, cudaMemcpyDeviceToDevice, stream) !=
                cudaSuccess)
            return keyer_error_set(err, KEYER_STATUS_DEVICE, "copying the mask grid failed");
    }
    int direct = j.dilate == 0 && j.feather == 0;
    void *M = NULL, *T = NULL, *U = NULL;
    if (!direct &&
        ((st = kr_cuda_scratch(s, SLOT_M, sizeof(uint16_t) * pixels, &M, err)) ||
         (st = kr_cuda_scratch(s, SLOT_T, sizeof(uint16_t) * pixels, &T, err)) ||
         (st = kr_cuda_scratch(s, SLOT_U, sizeof(uint32_t) * pixels, &U, err))))
        return st;
    upsample_kernel<<<gf, b16, 0, stream>>>(j, A, B, (uint16_t *)M, direct);
    CHECK("refine upsample kernel");
    if (direct)
        return KEYER_OK;
    if (j.dilate) {
        int r = j.dilate < 0 ? -j.dilate : j.dilate;
        morph_kernel<<<gf, b16, 0, stream>>>((const uint16_t *)M, (uint16_t *)T, W, H, r,
                                             j.dilate > 0, 0);
        morph_kernel<<<gf, b16, 0, stream>>>((const uint16_t *)T, (uint16_t *)M, W, H, r,
                                             j.dilate > 0, 1);
        CHECK("refine dilate kernel");
    }
    if (j.feather) {
        uint32_t n = (uint32_t)(2 * j.feather + 1);
        uint32_t mul = kr_box_mul(n * n), mul8 = kr_box_mul8(n * n);
        box1_kernel<<<gf, b16, 0, stream>>>((const uint16_t *)M, (uint32_t *)U, W, H, j.feather, 0);
        box2_kernel<<<gf, b16, 0, stream>>>((const uint32_t *)U, (uint16_t *)T, j, j.feather, 0,
                                            mul, mul8);
        box1_kernel<<<gf, b16, 0, stream>>>((const uint16_t *)T, (uint32_t *)U, W, H, j.feather, 1);
        box2_kernel<<<gf, b16, 0, stream>>>((const uint32_t *)U, NULL, j, j.feather, 1, mul, mul8);
        CHECK("refine feather kernel");
        return KEYER_OK;
    }
    output_kernel<<<gf, b16, 0, stream>>>((const uint16_t *)M, j);
    CHECK("refine output kernel");
    return KEYER_OK;
}
