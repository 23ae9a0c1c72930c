/*
 * The persistent schedule as a backend instance runs it: the steps planned from the fused nodes
 * (persistent.h) with the f16 conversions, uploaded with the pools' scratch and the transposed
 * convolution weights, and the optional cluster segment (segment/segment.h) taken out of them
 * where the device and the plan allow. Created once at set-up; enqueue queues one inference
 * (no allocation, no synchronisation), which the backend captures into its CUDA graph.
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_SCHEDULE_H
#define KEYER_NN_CUDA_PERSISTENT_SCHEDULE_H

#include "keyer/log.h"
#include "nn/backend.h"
#include "nn/cuda/mem.h"
#include "nn/cuda/persistent/persistent.h"
#include "nn/cuda/segment/segment.h"

typedef struct kr_cuda_psched {
    const kr_graph *graph;
    const kr_cuda_mem *mem;    /* the instance's, which outlives this */
    float *const *io;          /* per tensor: the f16 instance's float staging, or NULL */
    const keyer_logger *logger;
    int f16, device;
    kr_cuda_step *steps;       /* device */
    int n_steps;
    unsigned blocks;           /* of the persistent kernel */
    float *scratch;            /* device: the pools' sums */
    float *wt;                 /* device: the transposed convolution weights (persistent.h) */
    int has_seg;               /* 1: steps [seg.first, seg_end) run as a cluster segment */
    kr_cuda_segment seg;       /* seg.w: device, its packed weights */
    void *seg_out;             /* device: the segment's own output buffer, or NULL */
} kr_cuda_psched;

/* The persistent schedule for @p cfg (batch, device, f16, schedule, logger) over @p ops and
 * @p folded (kr_cuda_fuse's), tensors in @p mem, f16 staging in @p io (both kept by pointer:
 * they must outlive the schedule). *out is NULL, with KEYER_OK, when the per-node kernels run
 * instead: cfg->schedule is KERNELS, or AUTO and the batch or the multiply-adds are above
 * AUTO's limits (tuning.h), the model or the device cannot, or the batch needs a cluster
 * segment that was not taken (the reason is logged at debug level). Errors: UNSUPPORTED when
 * PERSISTENT or PERSISTENT_GRID was asked for and cannot run (naming why), OUT_OF_MEMORY,
 * DEVICE. Nothing is left allocated on an error. */
keyer_status kr_cuda_psched_create(const kr_cuda_mem *mem, float *const *io,
                                   const kr_cuda_op *ops, const unsigned char *folded,
                                   const kr_backend_config *cfg, kr_cuda_psched **out,
                                   keyer_error *err);

/* Frees the schedule's device memory and the object; accepts NULL and *p == NULL; sets *p to
 * NULL. The caller has synchronised the streams it was queued on. */
void kr_cuda_psched_destroy(kr_cuda_psched **p);

/* Queues one inference on @p stream (the persistent kernel, or with a segment the kernel over
 * the steps before it, the segment's kernel, the kernel over those after it). With @p check,
 * synchronises the stream after it. Errors: DEVICE, naming the schedule. */
keyer_status kr_cuda_psched_enqueue(kr_cuda_psched *p, cudaStream_t stream, int check,
                                    keyer_error *err);

/* The per-step profile of one inference on @p stream (synchronised): @p ms[n] per node in
 * milliseconds, -1 for nodes done inside another's step; every step is logged at debug level
 * (see schedule.c). Errors: OUT_OF_MEMORY, DEVICE. */
keyer_status kr_cuda_psched_profile(kr_cuda_psched *p, cudaStream_t stream, double *ms,
                                    keyer_error *err);

#endif
