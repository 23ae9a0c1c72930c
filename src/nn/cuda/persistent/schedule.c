/*
 * The persistent schedule of a backend instance (schedule.h): planning the steps, the cluster
 * segment, the uploads, the launches and the per-step profile.
 */
#include "nn/cuda/persistent/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "nn/cuda/tuning.h"
#include "nn/schedule_choice.h"

/* The first step after a cluster segment's kernel: seg.first + seg.count, or one less where the
 * segment's last slot holds the copy of its own output buffer (seg.shared_out, plan_segment). */
static int seg_end(const kr_cuda_psched *p)
{
    return p->seg.first + p->seg.count - p->seg.shared_out;
}

/* Queues the persistent schedule on @p stream: the persistent kernel over every step, or, with
 * a cluster segment, over the steps before it, the segment's kernel, the persistent kernel over
 * the steps after it. @p clocks: the persistent kernel's profile (4 per step) or NULL; @p ev:
 * NULL, or two events recorded around the segment's kernel (the profile). */
static cudaError_t launch_schedule(kr_cuda_psched *p, cudaStream_t stream,
                                   long long *clocks, cudaEvent_t *ev)
{
    if (!p->has_seg)
        return (cudaError_t)kr_cuda_persistent_launch(p->steps, p->n_steps, p->f16,
                                                      p->blocks, clocks, 0, stream);
    /* each kernel after the first is a programmatic dependent launch of the one before (not
     * when events are recorded between them): 1-1.5 us less per inference on the H100 */
    const int a = p->seg.first, b = seg_end(p), pdl = ev == NULL;
    cudaError_t e = cudaSuccess;
    if (a > 0)
        e = (cudaError_t)kr_cuda_persistent_launch(p->steps, a, p->f16, p->blocks,
                                                   clocks, 0, stream);
    if (e == cudaSuccess && ev)
        e = cudaEventRecord(ev[0], stream);
    if (e == cudaSuccess)
        e = (cudaError_t)kr_cuda_segment_launch(&p->seg, pdl && a > 0, stream);
    if (e == cudaSuccess && ev)
        e = cudaEventRecord(ev[1], stream);
    if (e == cudaSuccess && b < p->n_steps)
        e = (cudaError_t)kr_cuda_persistent_launch(p->steps + b, p->n_steps - b, p->f16,
                                                   p->blocks, clocks ? clocks + 4 * b : NULL,
                                                   pdl, stream);
    return e;
}

/* Whether step @p s reads its (first) convolution's weights transposed (`wt`): a group-4
 * convolution, alone or as the first half of a fused step. */
static int reads_transposed(const kr_cuda_step *s)
{
    return (s->kind == KR_STEP_CONV || s->kind == KR_STEP_EXPAND_DW ||
            s->kind == KR_STEP_CONV_PW) &&
           s->group == 4;
}

/* The [tap][ic][oc] copies of the weights of the persistent schedule's group-4 convolutions
 * (persistent.h), in one device buffer; sets each step's `wt`. */
static cudaError_t upload_transposed(kr_cuda_psched *p, kr_cuda_step *h, int k)
{
    const kr_graph *g = p->graph;
    size_t total = 0, most = 0;
    for (int i = 0; i < k; i++)
        if (reads_transposed(&h[i])) {
            size_t n = kr_tensor_elements(&g->tensors[h[i].w_tensor]);
            total += (n + 63) / 64 * 64; /* 256-byte aligned */
            most = n > most ? n : most;
        }
    if (!total)
        return cudaSuccess;
    float *t = malloc(most * sizeof(float));
    if (!t)
        return cudaErrorMemoryAllocation;
    cudaError_t e = cudaMalloc((void **)&p->wt, total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < k && e == cudaSuccess; i++) {
        if (!reads_transposed(&h[i]))
            continue;
        const kr_tensor *w = &g->tensors[h[i].w_tensor];
        const float *src = w->data; /* OHWI: [oc][kh][kw][ic] */
        size_t n = kr_tensor_elements(w), oc = (size_t)w->dims[0], kk = n / oc;
        for (size_t o = 0; o < oc; o++)
            for (size_t j = 0; j < kk; j++)
                t[j * oc + o] = src[o * kk + j];
        e = cudaMemcpy(p->wt + off, t, n * sizeof(float), cudaMemcpyHostToDevice);
        h[i].wt = p->wt + off;
        off += (n + 63) / 64 * 64;
    }
    free(t);
    return e;
}

static int fetch_device(void *ctx, float *to, const float *src, size_t count)
{
    (void)ctx;
    return (int)cudaMemcpy(to, src, count * sizeof(float), cudaMemcpyDeviceToHost);
}

/* A cluster segment (segment.h) in the persistent steps @p h[0..k) (pointers bound, weights
 * uploaded), if the plan has one and the device can run it: its weights packed and uploaded,
 * p->has_seg set; with seg.shared_out, its own output buffer and the segment's last step
 * replaced by the copy from it. A run the planner or the device refuses is logged (debug) and
 * left to the persistent kernel. Returns a CUDA error only for a failed query, allocation or
 * copy. */
static cudaError_t plan_segment(kr_cuda_psched *p, kr_cuda_step *h, int k)
{
    const kr_graph *g = p->graph;
    kr_cuda_segment seg;
    const char *why = NULL;
    if (!kr_cuda_segment_find(g, h, k, p->mem->esize, &seg, &why)) {
        if (why)
            keyer_log(p->logger, KEYER_LOG_DEBUG, "%s: cuda backend: no cluster segment: %s",
                      g->name, why);
        return cudaSuccess;
    }
    cudaError_t e = (cudaError_t)kr_cuda_segment_prepare(&seg, p->mem->caps, &why);
    if (e != cudaSuccess || why) {
        if (why)
            keyer_log(p->logger, KEYER_LOG_DEBUG,
                      "%s: cuda backend: no cluster segment (steps %d-%d): %s", g->name,
                      seg.first, seg.first + seg.count - 1, why);
        return e;
    }
    float *packed = malloc(seg.weight_floats * sizeof(float)), *w = NULL;
    if (!packed)
        return cudaErrorMemoryAllocation;
    int pe = kr_cuda_segment_pack(&seg, h, packed, fetch_device, NULL);
    e = pe < 0 ? cudaErrorMemoryAllocation : (cudaError_t)pe;
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&w, seg.weight_floats * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMemcpy(w, packed, seg.weight_floats * sizeof(float), cudaMemcpyHostToDevice);
    free(packed);
    if (e != cudaSuccess) {
        cudaFree(w);
        return e;
    }
    seg.w = w;
    if (seg.shared_out) { /* its own output buffer, copied by a step in the last step's slot */
        const size_t elements = (size_t)seg.h * KR_CUDA_SEG_W * seg.c;
        e = cudaMalloc(&p->seg_out, (size_t)seg.batch * elements * p->mem->esize);
        if (e != cudaSuccess) {
            cudaFree(w);
            return e;
        }
        kr_cuda_step *last = &h[seg.first + seg.count - 1];
        kr_cuda_persistent_copy(last, last->node, seg.batch, p->seg_out, seg.y, elements);
        seg.y = p->seg_out;
    }
    p->seg = seg;
    p->has_seg = 1;
    keyer_log(p->logger, KEYER_LOG_DEBUG,
              "%s: cuda backend: steps %d-%d (%s%d expand/depthwise/excited-projection blocks at "
              "%dx%d%s) as a cluster segment: a cluster of %d blocks per item, %zu bytes of shared "
              "memory each, %.1f KB of weights%s",
              g->name, seg.first, seg.first + seg.count - 1,
              seg.s_ic ? "a stride-2 expand/depthwise step into them, " : "", seg.n_ir, seg.h,
              KR_CUDA_SEG_W,
              seg.y_oc ? ", then a 1x1 convolution, the decoder's blocks at twice, four and "
                         "eight times the size and the transpose convolution to the output"
              : seg.v_oc ? ", then a 1x1 convolution, the decoder's block at twice the size and "
                           "the 1x1 convolution after it at four times"
              : seg.u_c ? ", then a 1x1 convolution and the decoder's block at twice the size"
              : seg.q_oc ? ", then a 1x1 convolution" : "", seg.h,
              kr_cuda_segment_smem(&seg),
              seg.weight_floats * 4 / 1e3,
              seg.shared_out ? "; its output through a buffer of its own (the memory plan puts "
                               "an item's over another item's input)" : "");
    return cudaSuccess;
}

/* The steps into @p h (room for 2 nodes + inputs + outputs + 1): the graph inputs' f16
 * conversions, the fused nodes, the outputs' conversions (a conversion is left out where the
 * step next to it reads the float input or writes the float output itself). Sets *k and the
 * pools' scratch floats; returns NULL or why the schedule cannot run the model. */
static const char *plan_steps(kr_cuda_psched *p, const kr_cuda_op *ops,
                              const unsigned char *folded, kr_cuda_step *h, int *steps,
                              size_t *scratch)
{
    const kr_graph *g = p->graph;
    int k = 0, n = 0;
    /* the fused nodes after room for the inputs' conversions */
    const char *why = kr_cuda_persistent_plan(g, ops, folded, p->mem->batch, h + g->n_inputs, &n,
                                              scratch);
    if (!why && p->f16) {
        kr_cuda_step *body = h + g->n_inputs;
        for (int i = 0; i < g->n_inputs; i++) {
            int t = g->inputs[i];
            int at = kr_cuda_persistent_input_step(g, t, kr_cuda_mem_ptr(p->mem, t), body, n);
            if (at >= 0) {
                body[at].x = p->io[t];
                body[at].x_f32 = 1;
            } else {
                kr_cuda_persistent_convert(&h[k++], 1, p->io[t], kr_cuda_mem_ptr(p->mem, t),
                                           kr_tensor_bytes(&g->tensors[t], p->mem->batch) / 4);
            }
        }
        for (int i = 0; i < g->n_outputs; i++) {
            int t = g->outputs[i];
            int at = kr_cuda_persistent_output_step(g, t, kr_cuda_mem_ptr(p->mem, t), body, n);
            if (at >= 0) {
                body[at].y = p->io[t];
                body[at].y_f32 = 1;
            } else {
                kr_cuda_persistent_convert(&body[n++], 0, kr_cuda_mem_ptr(p->mem, t), p->io[t],
                                           kr_tensor_bytes(&g->tensors[t], p->mem->batch) / 4);
            }
        }
    }
    if (!why && k < g->n_inputs) /* close the gap left by folded input conversions */
        memmove(h + k, h + g->n_inputs, (size_t)n * sizeof(*h));
    *steps = k + n;
    return why;
}

/* Whether AUTO or the caller's choice in @p cfg leaves graph @p g to the per-node kernels from
 * the start (tuning.h). */
static int per_node_by_config(const kr_graph *g, const kr_backend_config *cfg)
{
    return kr_schedule_per_node_by_config(cfg->schedule, cfg->batch, (double)kr_graph_macs(g));
}

/* Plans and uploads the schedule into @p p (see kr_cuda_psched_create); leaves p->steps NULL
 * when the per-node kernels run instead. What it allocated stays in @p p, also on an error. */
static keyer_status plan_persistent(kr_cuda_psched *p, const kr_cuda_op *ops,
                                    const unsigned char *folded, const kr_backend_config *cfg,
                                    keyer_error *err)
{
    const kr_graph *g = p->graph;
    /* AUTO above KEYER_CUDA_PERSISTENT_MAX_BATCH: only with a cluster segment (checked below) */
    const int needs_seg = kr_schedule_needs_segment(cfg->schedule, cfg->batch);
    size_t cap = 2 * (size_t)g->n_nodes + (size_t)g->n_inputs + (size_t)g->n_outputs + 1;
    kr_cuda_step *h = calloc(cap, sizeof(*h));
    if (!h)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    int k = 0;
    size_t scratch = 0;
    const char *why = plan_steps(p, ops, folded, h, &k, &scratch);
    /* its steps walk cfg->batch items of dims[0] == 1 each */
    if (!why && g->fixed_batch)
        why = "the model's first dimension is not a batch of items (fixed_batch)";
    /* the device's limits (or the emulated class's), read once at set-up (mem.h) */
    const kr_gpu_caps *caps = p->mem->caps;
    int ce = 0;
    const int sms = caps->sms, occupancy = kr_cuda_persistent_occupancy(p->f16, caps, &ce);
    cudaError_t e = (cudaError_t)ce;
    if (e != cudaSuccess) {
        free(h);
        return kr_cuda_fail(err, g, "querying the device for the persistent kernel", e);
    }
    if (!why)
        why = kr_schedule_persistent_refusal(caps, occupancy);
    if (why) {
        free(h);
        if (cfg->schedule == KEYER_CUDA_SCHEDULE_PERSISTENT ||
            cfg->schedule == KEYER_CUDA_SCHEDULE_PERSISTENT_GRID)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: cuda backend: no persistent schedule: %s", g->name, why);
        keyer_log(p->logger, KEYER_LOG_DEBUG,
                  "%s: cuda backend: kernels per node (no persistent schedule: %s)", g->name, why);
        return KEYER_OK;
    }
    /* two blocks per multiprocessor: enough threads for the 128x128 layers; a barrier over
     * more blocks costs more (1.2 us at 132 blocks, 1.7 us at 528 on the H100) */
    p->blocks = (unsigned)sms * (unsigned)(occupancy < 2 ? occupancy : 2);
    if (scratch) /* the pools' sums */
        e = cudaMalloc((void **)&p->scratch, scratch * sizeof(float));
    if (e == cudaSuccess)
        kr_cuda_persistent_bind(h, k, p->scratch);
    /* the segment first (its finder needs the bound pool sums, not the transposed weights), so
     * that AUTO, falling back, has uploaded nothing more than the sums */
    if (e == cudaSuccess && cfg->schedule != KEYER_CUDA_SCHEDULE_PERSISTENT_GRID)
        e = plan_segment(p, h, k);
    if (e == cudaSuccess && needs_seg && !p->has_seg) { /* back to the per-node kernels */
        keyer_log(p->logger, KEYER_LOG_DEBUG,
                  "%s: cuda backend: kernels per node (batch %d > %d without a cluster segment)",
                  g->name, cfg->batch, KEYER_CUDA_PERSISTENT_MAX_BATCH);
        free(h);
        return KEYER_OK;
    }
    if (e == cudaSuccess)
        e = upload_transposed(p, h, k);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->steps, (size_t)k * sizeof(*h));
    if (e == cudaSuccess)
        e = cudaMemcpy(p->steps, h, (size_t)k * sizeof(*h), cudaMemcpyHostToDevice);
    free(h);
    if (e != cudaSuccess)
        return kr_cuda_fail(err, g, "uploading the persistent schedule", e);
    p->n_steps = k;
    return KEYER_OK;
}


keyer_status kr_cuda_psched_create(const kr_cuda_mem *mem, float *const *io,
                                   const kr_cuda_op *ops, const unsigned char *folded,
                                   const kr_backend_config *cfg, kr_cuda_psched **out,
                                   keyer_error *err)
{
    const kr_graph *g = mem->graph;
    *out = NULL;
    if (per_node_by_config(g, cfg))
        return KEYER_OK;
    kr_cuda_psched *p = calloc(1, sizeof(*p));
    if (!p)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    p->graph = g;
    p->mem = mem;
    p->io = io;
    p->logger = cfg->logger;
    p->f16 = cfg->f16 != 0;
    p->device = cfg->device;
    keyer_status st = plan_persistent(p, ops, folded, cfg, err);
    if (st || !p->steps)
        kr_cuda_psched_destroy(&p);
    *out = p;
    return st;
}

void kr_cuda_psched_destroy(kr_cuda_psched **pp)
{
    if (!pp || !*pp)
        return;
    kr_cuda_psched *p = *pp;
    cudaFree(p->steps);
    cudaFree(p->scratch);
    cudaFree(p->wt);
    cudaFree((void *)p->seg.w);
    cudaFree(p->seg_out);
    free(p);
    *pp = NULL;
}

keyer_status kr_cuda_psched_enqueue(kr_cuda_psched *p, cudaStream_t stream, int check,
                                    keyer_error *err)
{
    cudaError_t e = launch_schedule(p, stream, NULL, NULL);
    if (e == cudaSuccess && check)
        e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
        return keyer_error_set(err, KEYER_STATUS_DEVICE,
                               "%s: cuda backend: the persistent kernel (%d steps, %u blocks%s) "
                               "failed: %s (%s)",
                               p->graph->name, p->n_steps, p->blocks,
                               p->has_seg ? ", with a cluster segment" : "",
                               cudaGetErrorString(e), cudaGetErrorName(e));
    return KEYER_OK;
}

/* The persistent kernel's per-step times: the first block's SM clock from a step's start to
 * the end of its grid barrier (so a step's time includes the wait for the slowest block),
 * converted at the device's nominal clock rate, summed per node; nodes done inside another
 * step (pools in a pool tail, excitations and MULs in their consumer's prologue), and folded
 * nodes, get -1; the f16 conversions are not nodes and are left
 * out. At debug level every step is logged with its parts: the first thread's own work, the
 * rest of its block, the grid barrier. A cluster segment is timed as a whole (events around its
 * kernel, so with its launch) and counted on its first step's node. */
keyer_status kr_cuda_psched_profile(kr_cuda_psched *p, cudaStream_t stream, double *ms,
                                    keyer_error *err)
{
    static const char *const kinds[] = {"conv", "depthwise", "tconv", "binary", "unary",
                                        "pool-partial", "pool-final", "resize", "copy",
                                        "to-f16", "to-f32", "expand-dw", "maxpool", "pad",
                                        "concat", "conv-pw"};
    const kr_graph *g = p->graph;
    size_t n4 = 4 * (size_t)p->n_steps;
    long long *dev = NULL, *host = malloc(n4 * sizeof(long long));
    kr_cuda_step *steps = malloc((size_t)p->n_steps * sizeof(*steps));
    int khz = 0;
    cudaError_t e = host && steps ? cudaMalloc((void **)&dev, n4 * sizeof(*dev))
                                  : cudaErrorMemoryAllocation;
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, p->device);
    cudaEvent_t ev[2] = {NULL, NULL};
    float seg_ms = 0;
    if (e == cudaSuccess)
        e = cudaMemsetAsync(dev, 0, n4 * sizeof(*dev), stream);
    if (e == cudaSuccess && p->has_seg)
        e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess && p->has_seg)
        e = cudaEventCreate(&ev[1]);
    if (e == cudaSuccess)
        e = launch_schedule(p, stream, dev, p->has_seg ? ev : NULL);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(host, dev, n4 * sizeof(*dev), cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(steps, p->steps, (size_t)p->n_steps * sizeof(*steps),
                            cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess && p->has_seg)
        e = cudaEventElapsedTime(&seg_ms, ev[0], ev[1]);
    if (e == cudaSuccess) {
        double us = 1e3 / (double)(khz > 0 ? khz : 1); /* microseconds per clock */
        for (int n = 0; n < g->n_nodes; n++)
            ms[n] = -1;
        for (int i = 0; i < p->n_steps; i++) {
            const long long *c = host + 4 * (size_t)i;
            int n = steps[i].node;
            const kr_cuda_step *s = &steps[i];
            if (p->has_seg && i >= p->seg.first && i < seg_end(p)) {
                if (i > p->seg.first)
                    continue;
                keyer_log(p->logger, KEYER_LOG_DEBUG,
                          "%s: persistent steps %d-%d node %3d cluster segment: %.2f us (its "
                          "kernel with its launch, events)",
                          g->name, i, seg_end(p) - 1, n, (double)seg_ms * 1e3);
                if (n >= 0)
                    ms[n] = seg_ms;
                continue;
            }
            keyer_log(p->logger, KEYER_LOG_DEBUG,
                      "%s: persistent step %2d node %3d %-12s %s%s%s out %dx%dx%d split %d group "
                      "%d: %.2f us (own work %.2f, block %.2f, grid barrier %.2f)",
                      g->name, i, n,
                      (unsigned)s->kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[s->kind] : "?",
                      s->tail ? "+pool" : "", s->se_layers ? "+se" : "", s->res ? "+res" : "",
                      s->oh, s->ow, s->oc,
                      s->split, s->group, (double)(c[3] - c[0]) * us, (double)(c[1] - c[0]) * us,
                      (double)(c[2] - c[1]) * us, (double)(c[3] - c[2]) * us);
            if (n >= 0)
                ms[n] = (ms[n] < 0 ? 0 : ms[n]) + (double)(c[3] - c[0]) * us * 1e-3;
        }
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    cudaFree(dev);
    free(host);
    free(steps);
    return e == cudaSuccess ? KEYER_OK : kr_cuda_fail(err, g, "profiling the persistent kernel", e);
}
