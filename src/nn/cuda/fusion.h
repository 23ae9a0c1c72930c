/*
 * The cuda backend's fusion pass: the graph's nodes as every schedule runs them (kr_cuda_op,
 * ops.h: pointers bound to the instance's memory, with neighbouring nodes folded in).
 *
 *  - activations: a RELU, RELU6, HARD_SWISH or LOGISTIC node that directly follows the node
 *    producing its only input (a tensor nobody else reads, not a graph output, not viewed) is
 *    folded into that node as its post function, and the producer writes straight into the
 *    activation's output tensor. Skipped when the activation's output storage overlaps one of
 *    the producer's inputs (the planner may reuse memory across the two nodes), except where an
 *    element-wise producer's input occupies exactly the same bytes (an in-place update).
 *  - residual ADDs, after the activations: an ADD without activation whose operands both have
 *    its output's shape, one of them written by the (convolution, depthwise, transpose, ADD or
 *    MUL) node just before it and read by nobody else, the other ready before that node, is
 *    done in that node's epilogue (after its post function): the node writes the ADD's output
 *    and the intermediate tensor is never stored. Selfie's decoder: 11 of its 14 ADDs.
 *  - pool ADDs: an ADD (no activation, same-shape operands) read only by the global average
 *    pool right after it: the pool sums the two operands itself (addend; squeeze-and-excitation
 *    after a skip connection, selfie's decoder) and the sum is never stored.
 * Convolutions always apply bias and their fused clamp in their epilogue (ops/conv_2d.cuh).
 */
#ifndef KEYER_NN_CUDA_FUSION_H
#define KEYER_NN_CUDA_FUSION_H

#include "nn/cuda/mem.h"
#include "nn/cuda/ops.h"

/* Fills @p ops (one per node of m->graph, caller-owned) with every node's inputs and output
 * bound to @p mem, element type by @p f16 and batch mem->batch, then folds nodes as the file
 * comment says: a folded node is marked in @p folded (one byte per node, zeroed by the caller)
 * and its work is done by the node it was folded into. Returns the number of folded nodes. Never
 * fails; reads only the graph and @p mem. */
int kr_cuda_fuse(const kr_cuda_mem *mem, int f16, kr_cuda_op *ops, unsigned char *folded);

/* The per-node schedule's gather folds, after kr_cuda_fuse (the persistent schedule does not
 * read kr_cuda_op.cat, so only it calls this): a CONCATENATION of two rank-4 tensors along the
 * channels, read only by the CONV_2D right after it, is done by that convolution's gather
 * (kr_cuda_op.cat), and so is a RESIZE_BILINEAR (no activation, no post function) whose output
 * only the concatenation reads: the convolution samples the resize's input; a MAX_POOL_2D (no
 * activation, no post function) read only by the CONV_2D right after it is done by the
 * convolution's gather (kr_cuda_op.pool: window maxima of the pool's input). Only where the
 * tensor-core kernel takes the folded layer (kr_cuda_conv_2d_tc_fits) and no node from the
 * first folded one to the convolution writes over the sources (where only a residual ADD
 * folded into the convolution would, that ADD is unfolded and runs on its own again). Also a MUL of
 * a tensor by a per-item channel vector ([1,1,1,C]: an excitation's scales; with the ADD folded
 * into it) run just before the pointwise CONV_2D that alone reads its output is done by that
 * convolution's input load (kr_cuda_op.scale), where kr_cuda_conv_2d_pw_mma takes the layer
 * (f16 TFLite layers) and the convolution does not write over the MUL's operands; and so is a
 * RESIZE_BILINEAR (no activation) run just before such a convolution that alone reads its
 * output (kr_cuda_op.rs: the convolution samples the resize's input). Last, an ADD (with the
 * activation folded into it) run right after such a pointwise layer without other folds, or
 * after a channel PAD (zeros) of its other operand run right after it, is done in the layer's
 * epilogue (kr_cuda_op.add) when the layer's output is read by the ADD alone and the other
 * operand was written before the layer (BlazeFace's blocks: ADD + RELU, with the PAD where the
 * channels widen). And a CONCATENATION along the channels of 2 to KR_CUDA_GCAT_MAX one-channel
 * maps, read only by the 1x1 one-output CONV_2D right after it, is done by that convolution
 * reading each map where it lies (kr_cuda_op.gcat; u2netp's fuse layer over its six side maps),
 * where kr_cuda_conv_2d_one_gather_fits takes the layer and the convolution does not write over
 * the maps. The folded nodes are marked in @p folded; returns how many. Never fails. */
int kr_cuda_fuse_gathers(const kr_cuda_mem *mem, kr_cuda_op *ops, unsigned char *folded);

#endif
