/*
 * Where a cuda backend instance keeps its tensors on the device, as its parts see it (backend.c
 * fills it at set-up; the fusion pass, the per-node and the persistent schedules read it), and
 * the error helper they share. Header only: static inline functions.
 */
#ifndef KEYER_NN_CUDA_MEM_H
#define KEYER_NN_CUDA_MEM_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "core/gpu_caps.h"
#include "keyer/status.h"
#include "nn/graph.h"

/* The instance's device memory: activations in one arena laid out by the planner, float
 * constants in one weight buffer, both in the element type (esize bytes per element: 4, or 2
 * for f16 instances; convolution weights stay float). Owned by the instance; this is a view. */
typedef struct kr_cuda_mem {
    const kr_graph *graph;
    int batch;
    size_t esize;
    unsigned char *arena;
    const size_t *offsets;       /* per tensor: bytes into arena (element type), SIZE_MAX: none */
    unsigned char *weights;
    const size_t *const_offsets; /* per tensor: bytes into weights, SIZE_MAX: not uploaded */
    /* f16 instances: per tensor, bytes into weights of the half copy of a CONV_2D weight tensor
     * (kr_cuda_op.w16), SIZE_MAX: none; NULL for f32 instances. */
    const size_t *w16_offsets;
    /* The device's capabilities and limits, filled once at set-up with an emulated older class
     * applied (core/gpu_caps.h): what every choice of kernel or schedule and every launch
     * configuration that depends on the device reads. NULL only in the CPU tests of the
     * planner, which launch nothing. */
    const kr_gpu_caps *caps;
} kr_cuda_mem;

/* Device address of tensor @p t (its storage's, for a view): in the arena, or in the weights
 * (NULL for a constant that was not uploaded). */
static inline void *kr_cuda_mem_ptr(const kr_cuda_mem *m, int t)
{
    const kr_graph *g = m->graph;
    int s = kr_tensor_storage(g, t);
    if (kr_tensor_is_const(&g->tensors[s]))
        return m->const_offsets[s] == SIZE_MAX ? NULL : m->weights + m->const_offsets[s];
    return m->arena + m->offsets[s];
}

/* Bytes of activation tensor @p t's storage in the arena at the instance's batch and element
 * size. */
static inline size_t kr_cuda_mem_bytes(const kr_cuda_mem *m, int t)
{
    const kr_graph *g = m->graph;
    return kr_tensor_bytes(&g->tensors[kr_tensor_storage(g, t)], m->batch) / (4 / m->esize);
}

/* Sets @p err for CUDA error @p e while doing @p what (OUT_OF_MEMORY for a failed allocation,
 * else DEVICE), naming the graph; returns the status. */
static inline keyer_status kr_cuda_fail(keyer_error *err, const kr_graph *g, const char *what,
                                        cudaError_t e)
{
    keyer_status st = (e == cudaErrorMemoryAllocation) ? KEYER_STATUS_OUT_OF_MEMORY
                                                       : KEYER_STATUS_DEVICE;
    return keyer_error_set(err, st, "%s: cuda backend: %s: %s (%s)", g->name, what,
                           cudaGetErrorString(e), cudaGetErrorName(e));
}

#endif
