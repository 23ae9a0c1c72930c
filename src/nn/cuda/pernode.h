/*
 * The per-node schedule of the cuda backend (KEYER_CUDA_SCHEDULE_KERNELS): the fused nodes
 * (fusion.h) run one kernel each, from the operator table below, with the f16 conversions of
 * the graph inputs and outputs around them. The backend captures what kr_cuda_pernode_enqueue
 * queues as one CUDA graph and replays it. The kernels are the operator files of this folder
 * (one .cu per operator, declared in ops.h), built on the device functions of ops/.
 */
#ifndef KEYER_NN_CUDA_PERNODE_H
#define KEYER_NN_CUDA_PERNODE_H

#include "nn/cuda/mem.h"
#include "nn/cuda/ops.h"

/* Whether the per-node kernels (and so the backend) can run @p node of @p g: an operator in
 * the table, float activations (int32 only as constants, and as ARGMAX's output), GATHER with
 * constant int32 indices, 4-D RESIZE, TRANSPOSE_CONV and grouped CONV_2D, at most
 * KR_MAX_NODE_INPUTS operands of a CONCATENATION. */
int kr_cuda_pernode_supports(const kr_graph *g, const kr_node *node);

/* Queues one inference on @p stream: the graph inputs' conversions to half from their float
 * staging @p io[t] (f16 instances: @p f16), the kernel of every node not marked in @p folded
 * (@p ops as kr_cuda_fuse left them; their stream field is set), the outputs' conversions
 * (float outputs only: an int32 output is written straight to its staging, see backend.c; and
 * none for an output a layer writes as float itself, kr_cuda_pernode_bind_outputs).
 * Never allocates or synchronises, except with @p check: then it synchronises after every
 * kernel, so that a failure names its node. Errors: DEVICE (or OUT_OF_MEMORY) naming the node
 * or the conversion. */
keyer_status kr_cuda_pernode_enqueue(const kr_cuda_mem *mem, int f16, float *const *io,
                                     kr_cuda_op *ops, const unsigned char *folded,
                                     cudaStream_t stream, int check, keyer_error *err);

/* Queues the conversions of @p mem's graph inputs (float ones; an int32 input is written
 * straight to its activation, see backend.c) from their float staging @p io[t] to their half
 * activations in @p mem, on @p stream; an input that a node of @p ops (not @p folded) reads
 * as float itself (kr_cuda_op.x_f32, kr_cuda_pernode_bind_inputs) is left out. For the f16
 * schedules (this one and mixed.h). Errors: DEVICE naming the conversion. */
keyer_status kr_cuda_pernode_inputs_to_half(const kr_cuda_mem *mem, float *const *io,
                                            const kr_cuda_op *ops, const unsigned char *folded,
                                            cudaStream_t stream, keyer_error *err);

/* f16 instances on this schedule, at set-up after the folds: points the convolution that
 * alone reads a float graph input (its input 0, no view or fold between) at the input's float
 * staging @p io[t] (ops[n].in[0], kr_cuda_op.x_f32) where the kernel it gets reads float
 * itself (kr_cuda_conv_2d_stem_fits: the ONNX RGB stems, u2netp's 3 -> 64;
 * kr_cuda_conv_2d_stem_half_fits: selfie's and selfie-landscape's 3x3 stride-2 stem),
 * so that the input's conversion to half is no kernel of its own: the stem rounds each value
 * to half as it loads it, the same values as the conversion. A choice by the graph's shapes,
 * never by batch. Returns the number of inputs bound. */
int kr_cuda_pernode_bind_inputs(const kr_cuda_mem *mem, float *const *io, kr_cuda_op *ops,
                                const unsigned char *folded);

/* f16 instances on this schedule, after kr_cuda_pernode_bind_inputs: points the layer that
 * writes a float graph output (its kernel's out is the output's half storage; the output not
 * viewed, read by no node) at the output's float staging @p io[t] (ops[n].out,
 * kr_cuda_op.y_f32) where its kernel writes float itself (a gathered fuse layer,
 * kr_cuda_conv_2d_one_gather_fits: u2netp's d0; an activation node, RELU, RELU6, HARD_SWISH or
 * LOGISTIC: u2netp's d1 .. d6), so that the output's conversion to float is no kernel of its
 * own: the layer stores the values the conversion would. A choice by the graph's
 * shapes and folds, never by batch. Returns the number of outputs bound. */
int kr_cuda_pernode_bind_outputs(const kr_cuda_mem *mem, float *const *io, kr_cuda_op *ops,
                                 const unsigned char *folded);

/* Whether graph output @p i of @p mem's graph is written as float by a node of @p ops (not
 * @p folded) itself (kr_cuda_op.y_f32, kr_cuda_pernode_bind_outputs): then it has no
 * conversion. */
int kr_cuda_pernode_output_bound(const kr_cuda_mem *mem, float *const *io, const kr_cuda_op *ops,
                                 const unsigned char *folded, int i);

/* Queues, on @p stream, the copies of @p mem's float graph outputs to their float staging
 * @p io[t]: graph output i converted from half where @p out_half is NULL or out_half[i] is
 * non-zero, copied as float otherwise (an output the mixed plan keeps in float). int32 outputs
 * are skipped (already in their staging). Errors: DEVICE naming the conversion or copy. */
keyer_status kr_cuda_pernode_outputs_to_float(const kr_cuda_mem *mem, float *const *io,
                                              const unsigned char *out_half,
                                              cudaStream_t stream, keyer_error *err);

/* Queues the conversion of @p mem's graph output @p i (a float output stored as half) to its
 * float staging @p io[t] on @p stream; with @p check, synchronises after it. For the branches
 * of this schedule (branches.h), which convert each output right after the node writing it.
 * Errors: DEVICE naming the conversion. */
keyer_status kr_cuda_pernode_output_to_float(const kr_cuda_mem *mem, float *const *io, int i,
                                             cudaStream_t stream, int check, keyer_error *err);

/* Queues the kernel of fused node @p n of @p g (@p op: its entry of the fused ops, ops.h; its
 * stream field is set to @p stream); with @p check, synchronises after it. For the schedules
 * that interleave other steps (mixed.h). Errors: DEVICE naming the node, its operator and
 * precision. */
keyer_status kr_cuda_pernode_launch(const kr_graph *g, int n, kr_cuda_op *op,
                                    cudaStream_t stream, int check, keyer_error *err);

/* Times every node's kernel on @p stream with events, synchronising after each: @p ms[n] in
 * milliseconds, -1 for folded nodes (@p ms: one per node). Errors: DEVICE. */
keyer_status kr_cuda_pernode_profile(const kr_graph *g, kr_cuda_op *ops,
                                     const unsigned char *folded, cudaStream_t stream, double *ms,
                                     keyer_error *err);

#endif
