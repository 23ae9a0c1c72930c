/*
 * Mixed precision in an f16 instance of the cuda backend: the nodes that the graph's precision
 * plan (nn/precision_plan.h) keeps in float32 run their float kernels and store their outputs
 * as float, the others run in half as in any f16 instance. Decided once at set-up from the
 * graph (never per frame or per batch); runs on the per-node schedule only.
 *
 * Layout: the instance's arena keeps the plan's float32 layout (every tensor has room for its
 * float elements), so a tensor is stored in the element type of the node that writes it (a
 * folded node's: the node it is folded into). Where a node reads a tensor stored in the other
 * type, a conversion step (kr_cuda_f32_to_f16 / kr_cuda_f16_to_f32) writes a copy in the
 * node's type into a buffer of its own, once per run, right before the first node that needs
 * it; the node reads the copy. A float node reading a graph input reads the input's float
 * staging directly. Constants stored as half (element-wise operands) read by a float node are
 * converted the same way (their values are then those of the half copy). Graph outputs stored
 * as float are copied to their float staging; those stored as half converted, as in any f16
 * instance.
 */
#ifndef KEYER_NN_CUDA_MIXED_H
#define KEYER_NN_CUDA_MIXED_H

#include "nn/cuda/mem.h"
#include "nn/cuda/ops.h"

typedef struct kr_cuda_mixed kr_cuda_mixed;

/* Sets up mixed precision for the instance whose memory is @p mem (an f16 instance whose
 * arena has the float32 layout: mem->esize 4), graph input/output staging @p io (per tensor,
 * float), after kr_cuda_fuse filled @p ops and @p folded: @p f32 (one byte per node, 1 =
 * float32; the plan's) decides each fused node's element type (a folded node follows the node
 * it is folded into); sets ops[n].f16 (and drops the half weights of float nodes), points
 * every read of a tensor stored in the other type at its converted copy, allocates those
 * copies (device memory, owned by the result) and records the conversion steps. @p *out is
 * NULL on failure. Errors: OUT_OF_MEMORY, DEVICE (allocating the copies), naming the graph. */
keyer_status kr_cuda_mixed_create(const kr_cuda_mem *mem, float *const *io, kr_cuda_op *ops,
                                  const unsigned char *folded, const unsigned char *f32,
                                  kr_cuda_mixed **out, keyer_error *err);

/* Queues one inference on @p stream as kr_cuda_pernode_enqueue does (the inputs' conversions
 * to half, every fused node's kernel, the outputs' conversions or copies to their float
 * staging), with the conversion steps of @p mx before the nodes that need them. Never
 * allocates; with @p check it synchronises after every kernel and names a failing node.
 * Errors: DEVICE, naming the node or the conversion. */
keyer_status kr_cuda_mixed_enqueue(const kr_cuda_mixed *mx, const kr_cuda_mem *mem,
                                   float *const *io, kr_cuda_op *ops,
                                   const unsigned char *folded, cudaStream_t stream, int check,
                                   keyer_error *err);

/* How many fused nodes run in float32 and how many conversion steps a run has. */
void kr_cuda_mixed_counts(const kr_cuda_mixed *mx, int *f32_nodes, int *steps);

/* Frees @p *mx (its device copies; call after the instance's work has finished) and sets it to
 * NULL; NULL accepted. */
void kr_cuda_mixed_destroy(kr_cuda_mixed **mx);

#endif
