/*
 * The CPU backend's own kernels: nodes it runs faster than XNNPACK 2022 can (or that XNNPACK
 * 2022 lacks and the reference kernels run slowly), between the XNNPACK segments.
 *
 *  CONV_2D 3x3, stride 1     Winograd F(4x4, 3x3) (conv_winograd.c): 36 multiplications per
 *                            4x4 output tile and channel pair instead of 144. Any dilation
 *                            (as interleaved undilated convolutions) and padding; channel
 *                            counts multiples of 16; big enough outputs (kr_cpu_kernel_supports).
 *  CONV_2D, 1 output channel direct dot products per output pixel (conv_1out.c): XNNPACK
 *                            pads the output channels to 16.
 *  CONCATENATION             any axis but the batch: blocks copied per outer index, the outer
 *                            indices split over the pool (concat.c).
 *
 * A kernel object is made per node and lane at create (weights transformed and packed, scratch
 * allocated); running it allocates nothing. Each run is one parallel region of the pool, after
 * which its workers sleep (PTHREADPOOL_FLAG_YIELD_WORKERS, as the backend's XNNPACK runtimes).
 * Internal to keyer (prefix kr_cpu_).
 */
#ifndef KEYER_NN_CPU_KERNELS_H
#define KEYER_NN_CPU_KERNELS_H

#include <pthreadpool.h>

#include "keyer/status.h"
#include "nn/graph.h"
#include "nn/reference/ops.h"

typedef struct kr_cpu_kernel kr_cpu_kernel;

/* Neighbouring nodes a kernel takes over (the backend then skips them). Winograd convolutions
 * only:
 *  concat: a CONCATENATION on the channel axis whose only consumer is the convolution: it reads
 *    the concatenation's inputs in place of its own input (each a multiple of 16 channels), so
 *    the concatenated tensor is never written.
 *  lo, hi: the clamp of a RELU, RELU6 or CLIP that is the only consumer of the output, applied
 *    with the node's own activation (the intersection; the backend checks it is not empty);
 *    the kernel then writes the activation node's output. -INFINITY, INFINITY: none.
 *  residual: an ADD (no broadcasting) of that result and another tensor of its shape, the
 *    ADD's only input from the convolution: y = clamp(clamp(conv) + other, res_lo, res_hi)
 *    with the ADD's fused activation; the kernel then writes the ADD's output. */
typedef struct kr_cpu_fusion {
    const kr_node *concat;
    float lo, hi;
    int residual;
    float res_lo, res_hi;
} kr_cpu_fusion;

/* Where a fused kernel's run reads and writes (NULL members: not fused). */
typedef struct kr_cpu_fused_io {
    const kr_op_ctx *concat; /* the fused CONCATENATION's bound inputs */
    float *out;              /* the last fused node's output (NULL: the node's own) */
    const float *residual;   /* the fused ADD's other input */
} kr_cpu_fused_io;

/* Whether the Winograd convolution @p conv can read the inputs of @p concat (its input's
 * producer) in place of the concatenated tensor. */
int kr_cpu_winograd_can_read_concat(const kr_graph *g, const kr_node *conv,
                                    const kr_node *concat);

/* Non-zero if one of the kernels above runs @p node (a validated graph's node). */
int kr_cpu_kernel_supports(const kr_graph *g, const kr_node *node);

/* Makes the kernel of @p node for @p batch images computed by up to @p threads threads (the
 * pool given to run), with the fused neighbours @p fusion (NULL: none; a concat only for a
 * Winograd convolution that kr_cpu_winograd_can_read_concat() accepts). The graph must outlive
 * the kernel. Errors: OUT_OF_MEMORY, UNSUPPORTED (the node is not one kr_cpu_kernel_supports()
 * accepts, or the fusion does not apply). */
keyer_status kr_cpu_kernel_create(const kr_graph *g, const kr_node *node, int batch, int threads,
                                  const kr_cpu_fusion *fusion, kr_cpu_kernel **out,
                                  keyer_error *err);

/* Runs the node on the pointers of @p ctx (ctx->batch images) with @p pool (NULL: this
 * thread); @p io (NULL when nothing is fused) gives the fused nodes' pointers. Not thread-safe
 * per kernel: one run at a time. */
void kr_cpu_kernel_run(kr_cpu_kernel *k, const kr_op_ctx *ctx, const kr_cpu_fused_io *io,
                       pthreadpool_t pool);

/* Frees a kernel; sets *k to NULL. NULL accepted. */
void kr_cpu_kernel_destroy(kr_cpu_kernel **k);

/* ---- the plan (fusion.c), for the backend --------------------------------------------------- */

/* What the backend does with one node besides XNNPACK and the reference kernels. */
typedef struct kr_cpu_node_plan {
    unsigned char kernel; /* 1: a CPU kernel runs it */
    unsigned char skip;   /* 1: a neighbour's kernel does its work (it is not run) */
    int concat;           /* kernel nodes: the fused CONCATENATION, or -1 */
    int act;              /* kernel nodes: the fused RELU/RELU6/CLIP, or -1 */
    int add;              /* kernel nodes: the fused residual ADD, or -1 */
    int add_other;        /* that ADD's input index of the other operand, or -1 */
} kr_cpu_node_plan;

/* Fills @p plan (g->n_nodes entries): with @p kernels, which nodes a CPU kernel runs; with
 * @p fusions too, the neighbours they take over (kr_cpu_fusion's rules). */
void kr_cpu_plan_nodes(const kr_graph *g, int kernels, int fusions, kr_cpu_node_plan *plan);

/* The kr_cpu_fusion to create node @p p's kernel with. */
void kr_cpu_fusion_of(const kr_graph *g, const kr_cpu_node_plan *p, kr_cpu_fusion *out);

/* ---- between kernels.c and the kernel files ---------------------------------------------- */

typedef struct kr_cpu_winograd kr_cpu_winograd;
int kr_cpu_winograd_supports(const kr_graph *g, const kr_node *node);
keyer_status kr_cpu_winograd_create(const kr_graph *g, const kr_node *node, int batch,
                                    int threads, const kr_cpu_fusion *fusion,
                                    kr_cpu_winograd **out, keyer_error *err);
/* @p src: the input, or the fused concatenation's inputs in order; @p residual: the fused
 * ADD's other input (NULL when none is fused). */
void kr_cpu_winograd_run(kr_cpu_winograd *k, const float *const *src, const float *residual,
                         float *y, pthreadpool_t pool);
void kr_cpu_winograd_destroy(kr_cpu_winograd **k);

int kr_cpu_conv_1out_supports(const kr_graph *g, const kr_node *node);
/* The row function for this CPU (AVX-512F, AVX2 or portable), picked once at create. */
pthreadpool_task_1d_tile_1d_t kr_cpu_conv_1out_pick(void);
void kr_cpu_conv_1out_run(const kr_op_ctx *ctx, pthreadpool_task_1d_tile_1d_t rows,
                          pthreadpool_t pool);

int kr_cpu_concat_supports(const kr_graph *g, const kr_node *node);
void kr_cpu_concat_run(const kr_op_ctx *ctx, pthreadpool_t pool);

#endif /* KEYER_NN_CPU_KERNELS_H */
