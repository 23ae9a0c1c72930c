/*
 * The persistent schedule of the cuda backend: the whole inference as ONE cooperative kernel
 * that walks a list of steps (one per node left after fusion, plus the f16 conversions), every
 * block of the grid working on every step and a grid-wide barrier between steps.
 *
 * Why: at small batches every node's kernel is latency bound (a few blocks, a chain of dependent
 * loads) and a graph of ~80 of them costs ~5.5 us per node
 * (docs/notes/cuda-persistent-schedule.md); a barrier costs ~1.2 us and every step gets all the
 * multiprocessors.
 *
 * Squeeze-and-excitation blocks (global pool, one or two dense layers, MUL) take no step of
 * their own: the step that writes the pooled tensor (or, when that is not possible, a pool step)
 * has a "pool tail": its blocks work slice by slice (a slice: whole pixels of one item) and
 * write each slice's channel sums to scratch; the MUL is folded into the next step (a pointwise
 * convolution scales its input channels, and adds a folded ADD's operand; a resize scales its
 * output; or else the MUL's own step), whose blocks each compute the pool's means from the
 * sums and the dense layers in shared memory first (a prologue). Each step's work is split by
 * the sizes of ONE batch item (the lanes that share a convolution's reduction, the pixel slices
 * of a pool), so an item's result does not depend on the batch size, and the arithmetic order
 * is fixed (no atomics): runs are bit-for-bit repeatable.
 *
 * kr_cuda_persistent_plan() (plan.c, with fuse.c and plan_util.c: host) turns the fused node
 * list into steps, or says why it cannot; kr_cuda_persistent_launch() (persistent.cu, with the
 * step files it includes) queues the kernel over a range of them; schedule.h runs it for a
 * backend instance. A run of steps that the cluster kernel (segment/segment.h), the optional
 * fused schedule, can do is left to it: the kernel is then launched over the steps before the
 * run and over those after it. Every step's arithmetic is its operator's device functions
 * (ops/), which the per-node kernels call too.
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_H
#define KEYER_NN_CUDA_PERSISTENT_H

#include <stddef.h>

#include "nn/cuda/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cuda backend's planner slack (planner.h): a fused kernel or step writes the output of a
 * node up to 3 after the first one while it still reads that node's inputs: a residual fold
 * two after (an activation between them), and BlazeFace's relu(conv(x) + pad(y)), where the
 * convolution's step also does the PAD's ADD and the RELU three nodes later (with a slack of
 * 2 the memory plan put the RELU's output on the convolution's input, which kept 5 of
 * face-short's ADDs as steps of their own). */
#define KR_CUDA_PLAN_SLACK 3

typedef enum kr_cuda_step_kind {
    KR_STEP_CONV = 0,     /* CONV_2D: any window, stride, dilation; `split` lanes per output */
    KR_STEP_DEPTHWISE,    /* DEPTHWISE_CONV_2D, any multiplier */
    KR_STEP_TCONV,        /* the transpose convolution (gather form, as transpose_conv_bias.cu) */
    KR_STEP_BINARY,       /* ADD, MUL or PRELU, same shapes or one operand per channel /
                           * scalar */
    KR_STEP_UNARY,        /* a standalone RELU, RELU6, HARD_SWISH or LOGISTIC (post) */
    KR_STEP_POOL_PARTIAL, /* global average pool, first half: only a pool tail (below) over
                           * the pool's input (+ addend) */
    KR_STEP_POOL_FINAL,   /* second half, when no excitation follows: a block per item adds
                           * the slices' sums (tail_partial, tail_slices of the partial step) */
    KR_STEP_RESIZE,       /* RESIZE_BILINEAR, as resize_bilinear.cu */
    KR_STEP_COPY,         /* RESHAPE that is not a view */
    KR_STEP_TO_F16,       /* graph input staging (float) -> arena (half) */
    KR_STEP_TO_F32,       /* arena (half) -> graph output staging (float) */
    KR_STEP_EXPAND_DW,    /* a pointwise convolution and the depthwise convolution of its
                           * output, tile by tile (below); the pointwise output is not stored */
    KR_STEP_MAXPOOL,      /* MAX_POOL_2D: the window's largest input (taps inside only) */
    KR_STEP_PAD,          /* PAD of the channels only, after them, with zeros: ic -> oc */
    KR_STEP_CONCAT,       /* CONCATENATION of x and x2 where each is one run per item: count
                           * elements per item, the first cn of them from x */
    KR_STEP_CONV_PW,      /* a convolution (group-4 path) and the 1x1 convolution of its
                           * output, pixel by pixel (below); the first output is stored only
                           * where other nodes read it */
} kr_cuda_step_kind;

/* One step. Activations are in the instance's element type; weights and biases float (ops.h).
 * Shapes are NHWC of one item; `batch` items. */
typedef struct kr_cuda_step {
    int kind;
    int node;           /* graph node, for messages; -1 for conversions */
    int batch;
    int ih, iw, ic, oh, ow, oc;
    int kh, kw, sh, sw, dh, dw, pt, pl;
    int split;          /* CONV: lanes sharing one output's reduction (1..32, power of two) */
    int group;          /* CONV with split 1: 4 output channels per thread (4), else 1 */
    int vec;            /* 4: channel loops use 4-element loads (sizes and pointers allow), else 1 */
    int mul;            /* BINARY: 0 ADD, 1 MUL, 2 PRELU (x2 the slopes; kr_bin_op) */
    int bmode;          /* BINARY: 0 same shapes; 1 x2 per channel; 2 x per channel; 3 x2
                         * holds the first cn of the oc channels, the others count as 0 (a
                         * channel PAD folded into the ADD reading it) */
    int cn, batched;    /* BINARY: the per-channel operand's last extent (oc or 1), or bmode
                         * 3's channels of x2; per item. CONCAT: x's elements per item */
    int align, half;    /* RESIZE: align_corners, half_pixel_centers */
    /* Pool tail (CONV, DEPTHWISE, UNARY, POOL_PARTIAL): the step's units are done slice by
     * slice, a block per (item, slice) at a time: slice k of item n is pixels
     * [k * tail_pixels, (k + 1) * tail_pixels) of the output (of the input for POOL_PARTIAL),
     * `tail_units` units per pixel (at most KR_CUDA_PERSISTENT_THREADS / threads per unit per
     * slice: one pass). Then the block adds the slice's channels (output as stored + tail_add,
     * if set) into tail_partial[n][k][tail_c]. */
    int tail;           /* 0: no tail */
    int tail_slices, tail_pixels, tail_units, tail_c;
    const void *tail_add;
    float *tail_partial; size_t tail_partial_off;
    /* Squeeze-and-excitation prologue (CONV, RESIZE, BINARY): before its own work every block
     * computes, for every item, the channel means of a pool tail's sums (se_slices slices of
     * se_c channels over se_pixels pixels), then 1 or 2 dense layers (1x1 convolutions on one
     * pixel, each with clamp and post function), into shared memory: the excitation sc[n][c].
     * CONV multiplies input channel c of item n by it, then adds scale_add (same shape as its
     * input, a folded ADD after the MUL) if set; RESIZE multiplies its output channel c by it;
     * BINARY uses it as its per-channel operand (instead of x2). */
    int se_layers;      /* 0: no prologue */
    int se_c, se_slices, se_pixels;
    const float *se_partial; size_t se_partial_off;
    int se_out[2];      /* output channels of each dense layer */
    const float *se_w[2], *se_b[2];
    float se_lo[2], se_hi[2];
    int se_post[2];
    const void *scale_add;
    int post;           /* kr_cuda_post */
    float lo, hi;       /* the node's fused activation as a clamp */
    long long count;    /* elements of one item's output (BINARY, UNARY, COPY, conversions) */
    const void *x, *x2; /* inputs; x2: BINARY's second operand, POOL's folded addend */
    const void *res;    /* folded residual ADD operand or NULL */
    void *y;
    const float *w, *bias;
    const float *wt;    /* CONV with group 4: the weights as [kh][kw][ic][oc] (set by the caller
                         * from w_tensor), so that a thread's 4 outputs are one 16-byte load */
    int w_tensor;       /* CONV, EXPAND_DW: the graph's (pointwise) weight tensor */
    /* EXPAND_DW: the pointwise convolution x [ih][iw][ic] -> oc channels (weights wt, bias
     * e_bias, clamp e_lo..e_hi, post e_post; the input scaled and added to as CONV's), then the
     * depthwise convolution of that (weights w2 [kh][kw][oc], bias2, the window fields, clamp
     * lo..hi, post, residual res, or with res_mid the pointwise output itself). A block does
     * tile x tile outputs of `chan` channels at a time, from the pointwise outputs of their
     * window (halo) in shared memory; a pool tail's slices are the tiles. */
    int tile, chan, res_mid, e_post;
    /* CONV_PW: the convolution x -> cn channels (weights wt, bias e_bias, the window fields,
     * clamp e_lo..e_hi, post e_post; no excitation, folded ADD or residual), then the 1x1
     * convolution cn -> oc of each pixel (weights w2 as [oc][cn], bias bias2, clamp lo..hi,
     * post) into y; the first output is also stored into y1 when other nodes read it (NULL
     * otherwise). cn * oc <= KR_CUDA_PERSISTENT_THREADS; the planner makes one only of a 3x3
     * stem on 3 channels (the kernel's one variant) with oc == cn (the shape run on the GPU). */
    void *y1;
    /* f16 instances: x is float (a graph input's float staging, whose conversion step was
     * folded into this step: kr_cuda_persistent_input_step), y is float (a graph output's
     * float staging: kr_cuda_persistent_output_step). 0 otherwise. */
    int x_f32, y_f32;
    /* CONV (1x1, group 4): 1 when its input is the bilinear resize of x ([rz_ih][rz_iw][ic],
     * with `align` and `half` as RESIZE), computed as the convolution loads it: a resize read
     * only by this convolution takes no step of its own. */
    int rz, rz_ih, rz_iw;
    /* CONV: res_c > 0: the residual res has res_c of the oc channels, the others count as 0
     * (a channel PAD's input); res_pre 1: the residual is added before the clamp and post
     * function (an ADD with an activation folded in: act(conv + res)), else after them. */
    int res_c, res_pre;
    float e_lo, e_hi;
    const float *e_bias, *w2, *bias2;
} kr_cuda_step;

/* Threads per block of the persistent kernel (512, one block per multiprocessor: 1% faster at
 * batch 1, within noise; measured, not kept). */
#define KR_CUDA_PERSISTENT_THREADS 256
/* Floats of shared memory for a pool tail's slice: the planner gives a step a tail only if its
 * slices' outputs fit (tail_pixels * tail_c; EXPAND_DW: tile * tile * chan). */
#define KR_CUDA_TILE_FLOATS (4 * KR_CUDA_PERSISTENT_THREADS)
/* Floats of shared memory for an EXPAND_DW block's pointwise outputs (halo pixels x chan). */
#define KR_CUDA_MID_FLOATS 2560
/* Floats of shared memory for an EXPAND_DW block's depthwise weights and biases
 * ((kh * kw + 1) * chan must fit). */
#define KR_CUDA_DWW_FLOATS 256
/* Floats of shared memory for a squeeze-and-excitation prologue: batch * (se_c + se_out[0] +
 * se_out[1]) must fit (else the planner leaves those nodes as steps, and the cluster segment
 * finder, which expects them fused, finds no segment). 4,608: 16 items of selfie's 128-channel
 * blocks (128 + 32 + 128 floats each), so that AUTO's batch limit with a segment
 * (KEYER_CUDA_SEGMENT_MAX_BATCH, tuning.h) reaches the main job's batch of 16. */
#define KR_CUDA_SE_FLOATS 4608

/* Builds the steps of the fused node list: @p ops and @p folded per node as kr_cuda_fuse left
 * them (a folded node has no step). Writes at most 2 * g->n_nodes steps to @p steps, sets
 * @p n_steps and @p scratch_floats (the pools' sums: the caller allocates them, calls
 * kr_cuda_persistent_bind, and uploads `wt` for every CONV step with group 4). Returns NULL on
 * success, else a static string naming what the schedule does not support (the caller then
 * keeps the per-node kernels). */
const char *kr_cuda_persistent_plan(const kr_graph *g, const kr_cuda_op *ops,
                                    const unsigned char *folded, int batch, kr_cuda_step *steps,
                                    int *n_steps, size_t *scratch_floats);

/* f16 instances: the step of @p steps[0..n) that can read graph input @p t (stored at
 * @p t_arena) from its float staging itself, so that the input needs no conversion step: a
 * convolution on the group-4 path with a 3x3 or 5x5 window on 3 channels (the models' stem)
 * reading it as x, without an excitation or a folded ADD, and no other node of @p g reads the
 * input.
 * Returns its index, or -1. */
int kr_cuda_persistent_input_step(const kr_graph *g, int t, const void *t_arena,
                                  const kr_cuda_step *steps, int n);

/* f16 instances: the step of @p steps[0..n) that can write graph output @p t (stored at
 * @p t_arena) straight into its float staging, so that the output needs no conversion step:
 * the last step writing there (steps before it may write other tensors at the same place: the
 * memory plan reuses it), a transpose convolution without a pool tail that does not read
 * there, and no node of @p g reads the output. Returns its index, or -1. */
int kr_cuda_persistent_output_step(const kr_graph *g, int t, const void *t_arena,
                                   const kr_cuda_step *steps, int n);

/* Sets the scratch pointers of @p n steps (the pools' sums) from their offsets into
 * @p scratch, device memory of the planned size. */
void kr_cuda_persistent_bind(kr_cuda_step *steps, int n, float *scratch);

/* A conversion step of @p count elements (all items) between float staging and the arena. */
void kr_cuda_persistent_convert(kr_cuda_step *s, int to_f16, const void *src, void *dst,
                                size_t count);

/* A COPY step of @p count elements per item, @p batch items, in the element type, for graph
 * node @p node (messages). */
void kr_cuda_persistent_copy(kr_cuda_step *s, int node, int batch, const void *src, void *dst,
                             size_t count);

/* Blocks per multiprocessor the kernel can keep resident (element type by @p f16): the
 * device's occupancy query, and when @p caps is an emulated class, no more than that class's
 * limits allow (kr_gpu_blocks_per_sm with the kernel's registers and static shared memory as
 * compiled for this device); 0 with the CUDA error in @p cuda_error when a query fails. */
int kr_cuda_persistent_occupancy(int f16, const kr_gpu_caps *caps, int *cuda_error);

/* Queues the kernel over @p n steps in device memory, @p blocks blocks of
 * KR_CUDA_PERSISTENT_THREADS, as a cooperative launch (every block resident) on @p stream.
 * @p clocks: NULL, or device memory for 4 * n values, the per-step profile: for step i the
 * first block's SM clock (clock64) at its start, when the block's first thread finished its
 * own share, when the whole block had (an extra block barrier, in profiled runs only), and
 * after the grid barrier. @p after_kernel: the launch follows a kernel of this inference on the
 * stream and is a programmatic dependent launch of it (set up while that kernel runs, started
 * when it ends; the kernel waits for its writes before its first step). Returns the CUDA error of the launch
 * (0 = success). */
int kr_cuda_persistent_launch(const kr_cuda_step *steps, int n, int f16, unsigned blocks,
                              long long *clocks, int after_kernel, void *stream);

#ifdef __cplusplus
}
#endif
#endif
