/*
 * Cluster segments (segment.h), the kernel: one cluster per image, block r of it owns image row
 * r. Per stage: the stage's weights are in shared memory (a bulk copy issued while the stage
 * before ran: two buffers, an mbarrier each); the pointwise convolutions split the input
 * channels over up to 4 lanes when there are fewer (2 pixels x 4 channels) units than threads
 * and add the parts with shuffles; the depthwise convolution does 2 adjacent pixels x 4
 * channels per thread from a sliding window of K + stride inputs per kernel row; the halo rows
 * come from the neighbours' shared memory after a cluster barrier; each block pushes its pool
 * sums into every block's shared memory before one. S and Q (segment.h), where there are
 * they, are the first and the last stage: S reads its window's rows at twice the resolution
 * from its neighbours, Q computes its row into the expanded rows' buffer and writes it out;
 * U, V, W (stage_u.cuh) and Y, Z (stage_y.cuh) follow Q.
 * The packed weights' and shared memory's layouts are segment.h's (kr_seg_*_layout), the ones
 * the packer and kr_cuda_segment_smem use.
 */
#include <cuda_fp16.h>

#include "nn/cuda/segment/segment.h"
#include "nn/schedule_choice.h"

/* The device code needs sm_90 (thread-block clusters, distributed shared memory, bulk copies,
 * mbarriers with transaction counts, programmatic dependent launch): it is compiled for sm_90
 * and newer only. For older architectures the kernel's body traps; it is never launched there,
 * since kr_cuda_segment_prepare refuses devices (or emulated classes) below compute 9.0. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define KR_SEG_DEVICE_CODE 1
#include "nn/cuda/segment/stage_y.cuh"

/* pair() with run-time shapes: one copy, called (not inlined). */
template <typename T, int K>
__device__ __noinline__ void pair_rt(const kr_cuda_segment &s, int k, const float *we,
                                     const seg_smem m, cg::cluster_group &cl)
{
    pair<T, K, 0, 0>(s, k, we, m, cl);
}
#endif

template <typename T, int K>
__global__ void __launch_bounds__(KR_CUDA_PERSISTENT_THREADS, 1)
    segment_kernel(const __grid_constant__ kr_cuda_segment s)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) float sm[];
    __shared__ __align__(8) unsigned long long bar[3]; /* the stage buffers', U's skip copy */
    cg::cluster_group cl = cg::this_cluster();
    const int H = s.h, C = s.c, CI0 = s.p0.ci, t = threadIdx.x;
    const int rank = (int)cl.block_rank(), img = (int)blockIdx.x / H;
    int so[KR_SEG_SM_N + 1];
    kr_seg_smem_layout(&s, so);
    float *wbuf = sm + so[KR_SEG_SM_WBUF], *xin = sm + so[KR_SEG_SM_XIN], *X = sm + so[KR_SEG_SM_X];
    float *EP = sm + so[KR_SEG_SM_EP], *D = sm + so[KR_SEG_SM_D], *slots = sm + so[KR_SEG_SM_SLOTS];
    float *mean = sm + so[KR_SEG_SM_MEAN], *hid = sm + so[KR_SEG_SM_HID];
    float *sc = sm + so[KR_SEG_SM_SC], *red = sm + so[KR_SEG_SM_RED];
    const seg_smem m = {wbuf, xin, X, EP, D, slots, mean, hid, sc, red};

    /* S's stage (0 or 1 where there is one), P0's, the last one */
    const int S0 = s.s_ic > 0, last = S0 + s.n_ir + (s.q_oc > 0);
    /* P0's weights: in buffer S0, or with S (whose window is in buffer 1) in EP, which nothing
     * uses before pair 0 (the finder checks that they fit) */
    const float *wp0 = S0 ? EP : wbuf;
    if (t == 0) { /* stage 0's and stage 1's weights */
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[0])));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[1])));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[2])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        load_stage(s, 0, wbuf, bar);
        if (!s.e_ic) /* (with E, once E is done with EP) */
            load_stage(s, 1, S0 ? EP : wbuf + s.buf_floats, bar);
    }
    /* the weights are set-up data; the input is the kernel before's (kr_cuda_segment_launch's
     * after_kernel: wait for its writes) */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (S0) { /* S: P0's input row and its channel means without leaving the cluster */
        if (s.e_ic == 72 && s.s_ic == 24 && s.e_e == 88)
            stage_e<T, 72, 24, 88>(s, m, cl, bar, img);
        else if (s.e_ic)
            stage_e_rt<T>(s, m, cl, bar, img);
        if (s.s_ic == 24 && s.sd.e == 96)
            stage_s<T, K, 24, 96>(s, m, cl, bar, img);
        else
            stage_s_rt<T, K>(s, m, cl, bar, img);
    } else { /* this block's input row, and P0's channel means from the sums before it */
        load_rows((const T *)s.x + ((size_t)img * H + rank) * SW * CI0, SW * CI0, xin);
        const float *sums = s.x_sums + (size_t)img * s.x_slices * CI0;
        if (t < CI0) { /* slices in batches of 8 loads issued together, added in order */
            float a = 0.0f;
            for (int k0 = 0; k0 < s.x_slices; k0 += 8) {
                float v[8];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[k] = k0 + k < s.x_slices ? sums[(size_t)(k0 + k) * CI0 + t] : 0.0f;
#pragma unroll
                for (int k = 0; k < 8; k++)
                    a += v[k];
            }
            mean[t] = a * (1.0f / (float)s.x_pixels);
        }
    }
    __syncthreads(); /* also: the mbarriers are initialised */
    wait_stage(bar, S0); /* P0 */
    {
        int o[KR_SEG_PJ_N + 1];
        kr_seg_proj_layout(CI0, s.p0.hid, C, o);
        excite<0>(s.p0, wp0, o, mean, hid, sc);
        pointwise<T, 96, 32>(xin, CI0, sc, wp0 + o[KR_SEG_PJ_W], wp0 + o[KR_SEG_PJ_B], C, X, C,
                             NULL, 0, s.p0.lo, s.p0.hi, s.p0.post);
    }
    __syncthreads();

#pragma unroll 1
    for (int k = 0; k < s.n_ir; k++) {
        const int st = S0 + 1 + k, b = st % 2;
        if (t == 0 && st + 1 <= last) { /* into the other buffer (stage st - 1's, or at pair 0
                                         * after S S's window), which every thread left */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            load_stage(s, st + 1, wbuf + (1 - b) * s.buf_floats, bar);
        }
        wait_stage(bar, st);
        const float *we = wbuf + b * s.buf_floats;
        const int E = s.d[k].e;
        if (C == 32 && E == 128)
            pair<T, K, 32, 128>(s, k, we, m, cl);
        else if (C == 32 && E == 96)
            pair<T, K, 32, 96>(s, k, we, m, cl);
        else
            pair_rt<T, K>(s, k, we, m, cl);
    }
    if (!s.u_c) { /* with U, neither the output nor its pool's sums leave the cluster */
        T *y = (T *)s.y + ((size_t)img * H + rank) * SW * C;
        for (int i = t; i < SW * C / 4; i += NT)
            kr_stv<4>(y + 4 * i, X + 4 * i);
    }
    if (s.y_sums && !s.u_c) { /* the output's pool tail: block r's row sums in slice r, zeros in slices
                     * r + h, r + 2h, ... (the planner asks for y_slices >= h) */
        float *dst = s.y_sums + (size_t)img * s.y_slices * C;
        row_pool<0>(X, C, red, [&](int g, float4 v) {
            reinterpret_cast<float4 *>(dst + (size_t)rank * C)[g] = v;
        });
        for (int i = t; i < (s.y_slices - 1) / H * C; i += NT) {
            const int k = rank + H * (1 + i / C);
            if (k < s.y_slices)
                dst[(size_t)k * C + i % C] = 0.0f;
        }
    }
    if (s.q_oc) { /* Q: the row into EP (free: every block is past the last halo reads), then
                   * y2, or U */
        const int b = last % 2, QO = s.q_oc;
        if (s.u_c) { /* U's weights into the last pair's buffer, which every thread left */
            if (t == 0) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                load_stage(s, last + 1, wbuf + (1 - b) * s.buf_floats, bar);
            }
            if (C == 32)
                u_begin<T, 32>(s, m, cl, &bar[2], img);
            else
                u_begin<T, 0>(s, m, cl, &bar[2], img);
        }
        wait_stage(bar, last);
        int o[KR_SEG_Q_N + 1];
        kr_seg_q_layout(C, QO, o);
        const float *wq = wbuf + b * s.buf_floats + o[KR_SEG_Q_W];
        const float *bq = wbuf + b * s.buf_floats + o[KR_SEG_Q_B];
        if (C == 32 && QO == 128 && s.q_post == KR_CUDA_POST_RELU)
            pointwise_k<T, 32, 128, KR_CUDA_POST_RELU>(X, C, NULL, wq, bq, QO, EP, QO, NULL, 0,
                                                       s.q_lo, s.q_hi, s.q_post);
        else
            pointwise_rt<T>(X, C, NULL, wq, bq, QO, EP, QO, NULL, 0, s.q_lo, s.q_hi, s.q_post);
        __syncthreads();
        if (s.u_c) {
            wait_stage(bar, last + 1);
            const float *wu = wbuf + (1 - b) * s.buf_floats;
            float *qbuf = wbuf + b * s.buf_floats; /* Q's weights: dead, W's window */
            if (C == 32 && QO == 128 && s.u_c == 24 && s.u_e == 24 && s.v_oc == 16 &&
                s.w_e == 16)
                stage_u<T, 32, 128, 24, 24, 16, 16>(s, wu, m, cl, &bar[2], img, qbuf);
            else
                stage_u_rt<T>(s, wu, m, cl, &bar[2], img, qbuf);
            if (s.y_oc) /* Y and Z: the network's end */
                stage_y<T>(s, wu, y_rest(s, wu), m, cl, &bar[2], img, qbuf);
        } else {
            T *y2 = (T *)s.y2 + ((size_t)img * H + rank) * SW * QO;
            for (int i = t; i < SW * QO / 4; i += NT)
                kr_stv<4>(y2 + 4 * i, EP + 4 * i);
        }
    }
    cl.sync(); /* no block leaves while another may read its shared memory */
#elif defined(__CUDA_ARCH__)
    __trap(); /* below sm_90: never launched (see above) */
#endif
}

typedef void (*segment_fn)(const kr_cuda_segment);

/* The kernel for @p seg's element type and window. */
static segment_fn pick(const kr_cuda_segment *seg)
{
    if (seg->k == 5)
        return seg->f16 ? segment_kernel<__half, 5> : segment_kernel<float, 5>;
    return seg->f16 ? segment_kernel<__half, 3> : segment_kernel<float, 3>;
}

/* The launch of @p items clusters of seg->h blocks on @p stream (a programmatic dependent one
 * with @p after_kernel); @p attr: room for its two attributes. */
static cudaLaunchConfig_t launch_config(const kr_cuda_segment *seg, int items, int after_kernel,
                                        cudaStream_t stream, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)seg->h;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)(seg->h * items));
    cfg.blockDim = dim3(KR_CUDA_PERSISTENT_THREADS);
    cfg.dynamicSmemBytes = kr_cuda_segment_smem(seg);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = after_kernel ? 2 : 1;
    return cfg;
}

extern "C" int kr_cuda_segment_prepare(const kr_cuda_segment *seg, const kr_gpu_caps *caps,
                                       const char **why)
{
    int fits = 0;
    *why = kr_schedule_segment_refusal(caps, seg->h, kr_cuda_segment_smem(seg));
    if (*why) /* below sm_90 (or emulating it): the kernel is not even compiled for it */
        return 0;
    cudaError_t e = cudaSuccess;
    /* the kernel's shared-memory allowance is the function's, shared by every instance: only
     * ever raised, so that an instance with a smaller segment never lowers another's */
    const segment_fn fn = pick(seg);
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, fn);
    if (e == cudaSuccess && (size_t)fa.maxDynamicSharedSizeBytes < kr_cuda_segment_smem(seg))
        e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)kr_cuda_segment_smem(seg));
    if (e == cudaSuccess && seg->h > 8)
        e = cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = launch_config(seg, 1, 0, 0, attr);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveClusters(&fits, fn, &cfg);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an unsupported cluster size is not sticky */
        *why = "the device refuses the cluster size or shared memory";
        return 0;
    }
    if (fits < 1)
        *why = "one cluster does not fit on the device";
    return 0;
}

extern "C" int kr_cuda_segment_launch(const kr_cuda_segment *seg, int after_kernel, void *stream)
{
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = launch_config(seg, seg->batch, after_kernel,
                                                 (cudaStream_t)stream, attr);
    return (int)cudaLaunchKernelEx(&cfg, pick(seg), *seg);
}
