/*
 * The cuda backend's choice of schedule (internal, prefix kr_): which of the per-node kernels,
 * the persistent kernel and the persistent kernel with a cluster segment runs a model, from the
 * schedule asked for, the batch, the model's multiply-adds, what the persistent planner and the
 * segment finder said, and the device's capabilities (core/gpu_caps.h: the real device's or an
 * emulated older class's). Plain C without CUDA types, so that the decisions are tested on the
 * CPU (tests/unit/test_gpu_caps.c); src/nn/cuda/persistent/schedule.c takes them in this order
 * at set-up:
 *   1. kr_schedule_per_node_by_config: KERNELS asked, or AUTO above its batch or multiply-add
 *      limits (src/nn/cuda/tuning.h): the per-node kernels, nothing planned;
 *   2. kr_schedule_persistent_refusal: after planning, why the persistent kernel cannot run on
 *      this device (no cooperative launch, no block fits a multiprocessor) or NULL;
 *   3. kr_schedule_segment_refusal: why a cluster segment the finder found cannot run here
 *      (compute below 9.0 or no cluster launch, too little shared memory per block) or NULL;
 *   4. kr_schedule_needs_segment: AUTO above KEYER_CUDA_PERSISTENT_MAX_BATCH keeps the
 *      persistent kernel only with a segment.
 * Before all of them, keyer_runtime_create() replaces an asked AUTO by the schedule that the
 * environment variable KEYER_CUDA_SCHEDULE names, when it is set (kr_schedule_from_env).
 */
#ifndef KEYER_NN_SCHEDULE_CHOICE_H
#define KEYER_NN_SCHEDULE_CHOICE_H

#include <stddef.h>

#include "core/gpu_caps.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The schedule an instance runs (kr_schedule_name gives its public name). */
typedef enum kr_schedule_kind {
    KR_SCHEDULE_PER_NODE = 0,          /* a kernel per fused node */
    KR_SCHEDULE_PERSISTENT,            /* one cooperative kernel walking the steps */
    KR_SCHEDULE_PERSISTENT_CLUSTER,    /* the persistent kernel with a cluster segment (sm_90+) */
} kr_schedule_kind;

/* "per-node", "persistent" or "persistent+cluster" (static strings). */
const char *kr_schedule_name(kr_schedule_kind kind);

/* 1 when the schedule asked for (@p asked, a keyer_cuda_schedule), @p batch and @p macs (one
 * item's multiply-adds) leave the model to the per-node kernels before anything is planned:
 * KERNELS, or AUTO above KEYER_CUDA_SEGMENT_MAX_BATCH or above KEYER_CUDA_PERSISTENT_MAX_MACS
 * multiply-adds per batch. */
int kr_schedule_per_node_by_config(int asked, int batch, double macs);

/* 1 when AUTO at @p batch keeps the persistent kernel only if it has a cluster segment (batch
 * above KEYER_CUDA_PERSISTENT_MAX_BATCH). */
int kr_schedule_needs_segment(int asked, int batch);

/* Why the persistent kernel cannot run on @p caps with @p blocks_per_sm of its blocks resident
 * per multiprocessor (kr_gpu_blocks_per_sm under the capabilities' limits), or NULL. */
const char *kr_schedule_persistent_refusal(const kr_gpu_caps *caps, int blocks_per_sm);

/* Why a cluster segment of @p cluster_blocks blocks with @p smem_bytes of dynamic shared memory
 * per block cannot run on @p caps, or NULL (the kernel-specific checks, cluster occupancy, are
 * made by kr_cuda_segment_prepare on the device). */
const char *kr_schedule_segment_refusal(const kr_gpu_caps *caps, int cluster_blocks,
                                        size_t smem_bytes);

/* The environment variable that replaces an asked AUTO by another schedule (keyer_cuda_schedule
 * in keyer/nn.h): "kernels", "persistent", "persistent-grid" or "auto". For the runs that need a
 * model's schedule fixed without changing the program: compute-sanitizer's racecheck runs the
 * network tests with "kernels" (scripts/sanitize-gpu-tests.sh). */
#define KR_SCHEDULE_ENV "KEYER_CUDA_SCHEDULE"

/* Parses @p spec ("kernels", "persistent", "persistent-grid", "auto") into *@p schedule (a
 * keyer_cuda_schedule); NULL or "" give AUTO. Errors: INVALID_ARGUMENT naming @p what (the
 * variable) and the value. */
keyer_status kr_schedule_parse(const char *spec, const char *what, int *schedule,
                               keyer_error *err);

/* The schedule a runtime asking for @p asked runs under: @p asked, except that AUTO becomes the
 * schedule KEYER_CUDA_SCHEDULE names when that is set and not empty. Errors: INVALID_ARGUMENT
 * (a value kr_schedule_parse refuses). */
keyer_status kr_schedule_from_env(int asked, int *schedule, keyer_error *err);

#ifdef __cplusplus
}
#endif

#endif
