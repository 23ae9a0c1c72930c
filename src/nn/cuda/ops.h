/*
 * The cuda backend's per-node operator kernels, one .cu file per operator (as src/nn/reference/),
 * behind this C header (the per-node schedule, pernode.h, runs them; their arithmetic is the
 * device functions of ops/, shared with the persistent and cluster-segment schedules), and the
 * node description every schedule runs (kr_cuda_op, made by the fusion pass, fusion.h). Each launcher queues its node's kernel(s) on op->stream and returns the CUDA
 * error of the launch (0 = cudaSuccess); it never synchronises and never allocates, so every
 * launcher may be captured into a CUDA graph. Shapes come from the graph (batch 1 in dims[0],
 * scaled by op->batch); activation pointers are device memory in the instance's element type
 * (float, or __half when op->f16). Convolution weights and biases (inputs 1 and 2 of CONV_2D,
 * DEPTHWISE_CONV_2D and the transpose convolutions) are always float: they are small and read
 * from cache, so half storage would save no memory traffic, only accuracy; other constants
 * (ADD/MUL/PRELU/SUB/DIV operands, MATMUL and GATHER data) are in the element type, except
 * GATHER's int32 indices.
 */
#ifndef KEYER_NN_CUDA_OPS_H
#define KEYER_NN_CUDA_OPS_H

#ifdef __cplusplus
extern "C" {
#endif

#include "core/gpu_caps.h"
#include "nn/graph.h" /* C declarations, also when included from the .cu files */

/* An element-wise function applied after the node's own fused clamp: the following RELU,
 * RELU6, HARD_SWISH or LOGISTIC node folded into this one (fusion.h). */
typedef enum kr_cuda_post {
    KR_CUDA_POST_NONE = 0,
    KR_CUDA_POST_RELU,
    KR_CUDA_POST_RELU6,
    KR_CUDA_POST_HARD_SWISH,
    KR_CUDA_POST_LOGISTIC,
} kr_cuda_post;

/* The post function of an activation node (NONE for other operators). */
static inline kr_cuda_post kr_cuda_post_of(kr_op op)
{
    switch (op) {
    case KR_OP_RELU: return KR_CUDA_POST_RELU;
    case KR_OP_RELU6: return KR_CUDA_POST_RELU6;
    case KR_OP_HARD_SWISH: return KR_CUDA_POST_HARD_SWISH;
    case KR_OP_LOGISTIC: return KR_CUDA_POST_LOGISTIC;
    default: return KR_CUDA_POST_NONE;
    }
}

/* The most one-channel maps a gathered concatenation (kr_cuda_op.gcat) reads. */
#define KR_CUDA_GCAT_MAX 8

typedef struct kr_cuda_op {
    const kr_graph *graph;
    const kr_node *node;
    int batch;
    int f16;                       /* element type: 0 float, 1 __half */
    const void *in[KR_MAX_NODE_INPUTS];
    void *out;
    kr_cuda_post post;
    /* A residual ADD folded into this node (fusion.h): the ADD's other operand,
     * of the output's shape, added to every output element after the post function; NULL when
     * none. Read and written at the same index by the same thread, so it may share the
     * output's storage exactly. */
    const void *residual;
    /* An ADD folded into the global pool reading it (kr_cuda_is_global_pool): the pool averages
     * in[0] + addend (both of the ADD's operands, of the same shape); NULL when none. */
    const void *addend;
    /* CONV_2D of an f16 instance: its weights (input 1) rounded to half once at set-up, OHWI
     * like the float ones, for the tensor-core kernels (kr_cuda_conv_2d_tc reads these n
     * halves); followed by n more, each weight's remainder half(w - hi) (kr_cuda_f32_to_f16_hilo,
     * for kr_cuda_conv_2d_pw_mma); NULL when the instance has none (f32, grouped layers). In the
     * weight buffer; not owned. */
    const void *w16;
    /* A CONCATENATION along the channels of two tensors folded into the CONV_2D reading it
     * (fusion.h): the convolution reads src[0] for its input channels [0, c0) and src[1] for the
     * rest, at the concatenation's h x w pixels, instead of in[0] (which is not written). With
     * rz = 0 or 1, that source is the input of a folded RESIZE_BILINEAR (rh x rw pixels,
     * align_corners, half_pixel_centers), sampled by the convolution; rz = -1: none. src[0] NULL:
     * no fold. Only the tensor-core kernel takes folded layers. */
    struct {
        const void *src[2];
        int c0, h, w;
        int rz, rh, rw, align, half;
    } cat;
    /* A MUL of a tensor by a per-item channel vector (an excitation's scales, [1,1,1,C]), with
     * the ADD folded into that MUL (its residual: addend), folded into the pointwise CONV_2D
     * reading its output (fusion.h, kr_cuda_fuse_gathers): the convolution reads
     * act(src x vec) + addend, rounded to the element type as the MUL would store it, instead of
     * in[0] (which is not written). src NULL: no fold. Only kr_cuda_conv_2d_pw_mma takes such
     * layers. */
    struct {
        const void *src, *vec, *addend;
        int vec_stride;     /* elements from one item's vector to the next: C, 0 for a constant */
        int pixels;         /* pixels per item */
        kr_activation act;  /* the MUL's fused activation */
        kr_cuda_post post;  /* and its folded post function */
    } scale;
    /* A RESIZE_BILINEAR (no activation) folded into the pointwise CONV_2D that alone reads its
     * output (fusion.h, kr_cuda_fuse_gathers): the convolution samples src (ih x iw pixels of
     * its input channels) as the resize computes each value (ops/resize_bilinear.cuh, rs_pixel;
     * then the resize's post function), rounded to the element type as the resize would store
     * it, instead of reading in[0] (which is not written). src NULL: no fold. Only
     * kr_cuda_conv_2d_pw_mma takes such layers. */
    struct {
        const void *src;
        int ih, iw, align, half;
        kr_cuda_post post;
    } rs;
    /* An ADD (with its activation and post function) of this pointwise CONV_2D's output and
     * another tensor, folded into the convolution (fusion.h, kr_cuda_fuse_gathers): the
     * convolution's value, rounded to the element type as it would be stored, plus src's (of
     * ch <= the output's channels; zeros past ch: a channel PAD of src folded too), through the
     * ADD's clamp and post function; out is the ADD's output. src NULL: no fold. Only
     * kr_cuda_conv_2d_pw_mma takes such layers (never with residual). */
    struct {
        const void *src;
        int ch;
        kr_activation act;
        kr_cuda_post post;
    } add;
    /* A MAX_POOL_2D folded into the CONV_2D reading its output (fusion.h): the convolution
     * takes each input pixel as the pool's window maximum over src (ih x iw pixels, the pool's
     * kernel, stride, dilation and leading pads; taps outside src are no candidates), instead of
     * reading in[0] (which is not written). src NULL: no fold. Only the tensor-core kernel takes
     * folded layers; never together with cat. */
    struct {
        const void *src;
        int ih, iw, kh, kw, sh, sw, dh, dw, pt, pl;
    } pool;
    /* A CONCATENATION along the channels of n one-channel tensors (2 <= n <= KR_CUDA_GCAT_MAX),
     * read only by the 1x1 CONV_2D of one output channel right after it, folded into that
     * convolution (fusion.h, kr_cuda_fuse_gathers): the convolution reads input channel c from
     * src[c] instead of in[0] (which is not written). n = 0: no fold. Only
     * kr_cuda_conv_2d_one_gather takes such layers. */
    struct {
        const void *src[KR_CUDA_GCAT_MAX];
        int n;
    } gcat;
    /* 1: in[0] is the float staging of the graph input this CONV_2D reads (an f16 instance's
     * io[t], whose conversion to half the per-node schedule then leaves out:
     * kr_cuda_pernode_bind_inputs); the kernel rounds each value to half as it loads it, as the
     * conversion would have. Only kr_cuda_conv_2d_stem and kr_cuda_conv_2d_stem_half take such
     * layers. 0 otherwise. */
    int x_f32;
    /* 1: out is the float staging of the graph output this CONV_2D writes (an f16 instance's
     * io[t], whose conversion to float the per-node schedule then leaves out:
     * kr_cuda_pernode_bind_outputs); the kernel stores each value rounded to half and widened
     * to float, the conversion's values. Only kr_cuda_conv_2d_one_gather and the activation
     * kernels (activations.cu) take such nodes. 0 otherwise. */
    int y_f32;
    void *stream;                  /* cudaStream_t */
    const kr_gpu_caps *caps;       /* the instance's (kr_cuda_mem.caps); NULL: launch nothing */
} kr_cuda_op;

typedef int (*kr_cuda_op_fn)(const kr_cuda_op *op);

int kr_cuda_conv_2d(const kr_cuda_op *op);
int kr_cuda_depthwise_conv_2d(const kr_cuda_op *op);
int kr_cuda_transpose_conv_bias(const kr_cuda_op *op);
int kr_cuda_add(const kr_cuda_op *op);
int kr_cuda_mul(const kr_cuda_op *op);
int kr_cuda_prelu(const kr_cuda_op *op);
int kr_cuda_relu(const kr_cuda_op *op);
int kr_cuda_relu6(const kr_cuda_op *op);
int kr_cuda_hard_swish(const kr_cuda_op *op);
int kr_cuda_logistic(const kr_cuda_op *op);
int kr_cuda_average_pool_2d(const kr_cuda_op *op);
/* The global average pool of @p op's node (kr_cuda_is_global_pool), whatever its operator:
 * every item's channel means over all its pixels, plus op->addend's if set. */
int kr_cuda_global_average_pool(const kr_cuda_op *op);
int kr_cuda_max_pool_2d(const kr_cuda_op *op);
int kr_cuda_mean(const kr_cuda_op *op);
int kr_cuda_pad(const kr_cuda_op *op);
int kr_cuda_resize_bilinear(const kr_cuda_op *op);
int kr_cuda_reshape(const kr_cuda_op *op);
int kr_cuda_concatenation(const kr_cuda_op *op);
/* Operators of ONNX models (per-node only; semantics in nn/graph.h). */
int kr_cuda_sub(const kr_cuda_op *op);
int kr_cuda_div(const kr_cuda_op *op);
int kr_cuda_tanh(const kr_cuda_op *op);
int kr_cuda_exp(const kr_cuda_op *op);
int kr_cuda_sqrt(const kr_cuda_op *op);
int kr_cuda_elu(const kr_cuda_op *op);
int kr_cuda_leaky_relu(const kr_cuda_op *op);
int kr_cuda_hard_sigmoid(const kr_cuda_op *op);
int kr_cuda_clip(const kr_cuda_op *op);
int kr_cuda_pow(const kr_cuda_op *op);
int kr_cuda_reduce_max(const kr_cuda_op *op);
int kr_cuda_resize(const kr_cuda_op *op);
int kr_cuda_transpose(const kr_cuda_op *op);
int kr_cuda_slice(const kr_cuda_op *op);
int kr_cuda_softmax(const kr_cuda_op *op);
/* ARGMAX writes int32 (op->out points at 4-byte elements in every instance, see backend.c). */
int kr_cuda_argmax(const kr_cuda_op *op);
int kr_cuda_matmul(const kr_cuda_op *op);
/* GATHER: op->in[1] is the constant int32 indices, uploaded as int32 (backend.c). */
int kr_cuda_gather(const kr_cuda_op *op);
int kr_cuda_transpose_conv(const kr_cuda_op *op);
/* CONV_2D with window.groups > 1 (kr_cuda_conv_2d calls it for such nodes). */
int kr_cuda_conv_2d_grouped(const kr_cuda_op *op);
/* Whether CONV_2D node @p op is an ONNX RGB stem that kr_cuda_conv_2d_stem takes: explicit
 * padding, no groups or folds, 3 input channels, a 3x3 or 5x5 window with strides and
 * dilations up to 4, 16, 32 or 64 output channels, float weights (and bias), a 16-byte aligned
 * output and weights; either element type, never chosen by batch. kr_cuda_conv_2d calls both
 * (conv_2d_stem.cu; its sums are those of conv_2d.cu's conv_stem, bit for bit). */
int kr_cuda_conv_2d_stem_fits(const kr_cuda_op *op);
/* Queues the stem of @p op (which kr_cuda_conv_2d_stem_fits accepted); with op->x_f32 (an f16
 * instance) in[0] is the float graph input, each value rounded to half as it is loaded (the
 * values kr_cuda_f32_to_f16 would have stored). Returns the launch's CUDA error,
 * cudaErrorInvalidValue for a batch past 2^31 tiles. */
int kr_cuda_conv_2d_stem(const kr_cuda_op *op);
/* Whether CONV_2D node @p op is a 3x3 RGB stem of stride 2 with 16 output channels in an f16
 * instance that kr_cuda_conv_2d_stem_half takes (the TFLite selfie models' node 0): 3 input
 * channels, dilation 1, float weights (and bias) as host constants, no residual or folds, a
 * 16-byte aligned input and output; any padding. Never chosen by batch. kr_cuda_conv_2d calls
 * both, after kr_cuda_conv_2d_stem_fits (conv_2d_stem.cu; its sums are those of conv_2d.cu's
 * conv_stem, bit for bit). */
int kr_cuda_conv_2d_stem_half_fits(const kr_cuda_op *op);
/* Queues the stem of @p op (which kr_cuda_conv_2d_stem_half_fits accepted); returns the launch's
 * CUDA error, cudaErrorInvalidValue for a batch past 2^31 tiles. */
int kr_cuda_conv_2d_stem_half(const kr_cuda_op *op);
/* Whether CONV_2D node @p op has one output channel and runs on kr_cuda_conv_2d_one: an f16
 * instance on compute 8.0+ (the device's or the emulated class's; 7.x keeps the WMMA kernel), an
 * ONNX layer (explicit padding), no groups or folds, a 1x1 or 3x3 window, 8, 16, 32, 64, 128 or 256
 * input channels, float weights (and bias), a 16-byte aligned input; never chosen by batch.
 * kr_cuda_conv_2d calls both, before the tensor-core kernels (conv_2d_one.cu). */
int kr_cuda_conv_2d_one_fits(const kr_cuda_op *op);
/* Queues the one-output convolution of @p op (which kr_cuda_conv_2d_one_fits accepted); returns
 * the launch's CUDA error, cudaErrorInvalidValue for a batch past 2^31 output pixels. */
int kr_cuda_conv_2d_one(const kr_cuda_op *op);
/* Whether CONV_2D node @p op is a gathered fuse layer that kr_cuda_conv_2d_one_gather runs: an
 * f16 instance on compute 8.0+ (the device's or the emulated class's), an ONNX layer (explicit
 * padding, all 0) with a 1x1 window of stride 1, one output channel, float weights (and bias) with host data, and a folded
 * concatenation of 2 to KR_CUDA_GCAT_MAX one-channel maps (kr_cuda_op.gcat), no other fold.
 * kr_cuda_conv_2d calls both first; the fusion pass asks before folding (conv_2d_one.cu). */
int kr_cuda_conv_2d_one_gather_fits(const kr_cuda_op *op);
/* Queues the gathered fuse layer of @p op (which kr_cuda_conv_2d_one_gather_fits accepted):
 * each output pixel from the n maps' values at that pixel, summed from 0 in channel order, then
 * the bias and the epilogue, the same values as the concatenation followed by the unfolded
 * layer's kernel; returns the launch's CUDA error, cudaErrorInvalidValue for a batch past 2^31
 * output pixels. */
int kr_cuda_conv_2d_one_gather(const kr_cuda_op *op);
/* Whether CONV_2D node @p op runs on the tensor cores (kr_cuda_conv_2d_mma): an f16 instance,
 * explicit padding (ONNX models), no groups, input channels a multiple of 16, 16-byte aligned
 * input and weights, compute capability 7 or more. kr_cuda_conv_2d calls both. */
int kr_cuda_conv_2d_mma_fits(const kr_cuda_op *op);
int kr_cuda_conv_2d_mma(const kr_cuda_op *op);
/* The warpgroup-MMA mode of kr_gpu_caps.wgmma for a device of capabilities @p caps: 0 unless
 * @p caps is a real (not emulated) compute 9.0 device and the loaded code of conv_2d_tc.cu was
 * built for sm_90a (a probe kernel's attributes, no launch); then 1, or what the environment
 * variable KEYER_CUDA_WGMMA asks: "0" none (the A/B switch of benchmarks), "all" every patch
 * convolution (the tests' coverage of every instance). Reads the environment; no errors (a
 * failing probe means 0, its CUDA error cleared). */
int kr_cuda_wgmma_mode(const kr_gpu_caps *caps);
/* The mode of kr_gpu_caps.vec_epilogue: 1, or 0 where the environment variable
 * KEYER_CUDA_VEC_EPILOGUE is "0". Reads the environment; no errors. */
int kr_cuda_vec_epilogue_mode(void);

/* Whether CONV_2D node @p op runs on the tensor cores with mma.sync (kr_cuda_conv_2d_tc): an f16
 * instance with half weights (op->w16), compute capability 8.0 or more (the device's or the
 * emulated class's), an ONNX layer (explicit padding), no groups, input channels a multiple of
 * 8, 16-byte aligned input(s) and weights; never chosen by batch. kr_cuda_conv_2d calls both,
 * before the WMMA kernel. */
int kr_cuda_conv_2d_tc_fits(const kr_cuda_op *op);
/* Queues the tensor-core convolution of @p op (which kr_cuda_conv_2d_tc_fits accepted);
 * returns the launch's CUDA error, cudaErrorInvalidValue for a layer past 32-bit indexing. */
int kr_cuda_conv_2d_tc(const kr_cuda_op *op);

/* Whether CONV_2D node @p op is a TFLite pointwise layer that kr_cuda_conv_2d_pw_mma takes: an
 * f16 instance with half weights (op->w16) on compute 7.5 or newer (the device's or the emulated
 * class's: all take it alike), SAME or VALID padding (not an ONNX layer), no groups or folded
 * concatenations or pools, 1x1 with stride 1 and the input's size, K and N within the limits of
 * tuning.h (PW_MMA_*), float bias; with a folded MUL or resize (op->scale, op->rs) K a
 * multiple of 8 and 16-byte aligned sources. Never chosen by batch.
 * kr_cuda_conv_2d calls both (conv_2d_pw_mma.cu). */
int kr_cuda_conv_2d_pw_mma_fits(const kr_cuda_op *op);
/* Queues the tensor-core pointwise layer of @p op (which kr_cuda_conv_2d_pw_mma_fits accepted);
 * returns the launch's CUDA error, cudaErrorInvalidValue for a batch past 2^31 pixels. */
int kr_cuda_conv_2d_pw_mma(const kr_cuda_op *op);

/* Whether @p node of @p g is a global average pool: an AVERAGE_POOL_2D with one output pixel
 * whose window covers the whole NHWC input, or a MEAN over H and W keeping them (the same
 * arithmetic: selfie-landscape's excitations). The fusion pass folds an ADD before either into
 * it (addend), and the persistent schedule takes both as its pools. (fusion.c) */
int kr_cuda_is_global_pool(const kr_graph *g, const kr_node *node);

/* Float32 <-> float16 conversion of @p n elements on @p stream (graph inputs and outputs in
 * f16 instances; weights at set-up). */
int kr_cuda_f32_to_f16(const float *src, void *dst, size_t n, void *stream);
int kr_cuda_f16_to_f32(const void *src, float *dst, size_t n, void *stream);
/* Each of @p n float weights @p src as two halves on @p stream: dst[i] = hi = half(w) and
 * dst[n + i] = half(w - hi) (w - hi is exact in float, so hi + lo is w to about 2^-22
 * relative); @p dst holds 2 n halves. Returns the launch's CUDA error. */
int kr_cuda_f32_to_f16_hilo(const float *src, void *dst, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
