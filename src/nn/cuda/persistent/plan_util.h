/*
 * What the persistent planner's files share (plan.c: steps of the nodes; fuse.c: the merges
 * across nodes; plan_util.c: the planner's state and helpers): not a public interface.
 */
#ifndef KEYER_NN_CUDA_PERSISTENT_PLAN_UTIL_H
#define KEYER_NN_CUDA_PERSISTENT_PLAN_UTIL_H

#include <stdint.h>

#include "nn/cuda/persistent/persistent.h"

/* What became of a node in the merges (kr_pp_ctx.fuse): a step of its own, none (done inside
 * another step), or a pool step that only writes its slices' sums (an excitation reads them). */
enum { KR_PP_FUSE_NONE = 0, KR_PP_FUSE_SKIP, KR_PP_FUSE_POOL_PARTIAL };

/* A squeeze-and-excitation block found at a MUL (fuse.c). */

typedef struct kr_pp_se_match {
    int pool, layers, fc[2], post[2]; /* fc[0] reads the pool */
    int skip[4], n_skip;              /* nodes done in the consumer's prologue */
} kr_pp_se_match;

/* The planner's state across nodes. */
typedef struct kr_pp_ctx {
    const kr_graph *g;
    const kr_cuda_op *ops;
    const unsigned char *folded;
    int batch;
    unsigned char *fuse;   /* per node: KR_PP_FUSE_* */
    int *se_at;            /* per node: the MUL whose excitation it consumes, or -1 */
    int *se_full;          /* per node: that MUL's full operand (input side) */
    int *tail_at;          /* per node: the MUL whose pool its step's tail computes, or -1 */
    const void **tail_add; /* per node: the other operand of that pool's folded ADD, or NULL */
    int *se_slices;        /* per MUL node: the slices of its pool's tail */
    size_t *se_partial_off; /* per MUL node: the offset of its pool's sums in scratch */
    kr_pp_se_match *matches; /* per MUL node */
    int *pad_at;           /* per ADD node: the channel PAD folded into it (bmode 3), or -1 */
    int *spad_at;          /* per conv node: the spatial PAD folded into its window, or -1 */
    size_t scratch;        /* floats of scratch so far */
} kr_pp_ctx;

/* ---- small helpers ------------------------------------------------------------------------ */

/* Whether @p p (NULL counts) is a multiple of @p a. */
static inline int kr_pp_aligned(const void *p, size_t a)
{
    return p == NULL || ((uintptr_t)p % a) == 0;
}

static inline const kr_tensor *kr_pp_in(const kr_cuda_op *op, int i)
{
    return &op->graph->tensors[op->node->inputs[i]];
}
static inline const kr_tensor *kr_pp_out(const kr_cuda_op *op)
{
    return &op->graph->tensors[op->node->outputs[0]];
}

static inline int kr_pp_is_global_pool(const kr_cuda_op *op)
{
    return kr_cuda_is_global_pool(op->graph, op->node);
}

/* Whether [a, a + na) and [b, b + nb) share a byte (device addresses). */
static inline int kr_pp_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && x < y + nb && y < x + na;
}

/* Bytes of activation tensor @p t in the arena: its elements at the batch, in the instance's
 * element type (half for f16: sizing at 4 bytes would see overlaps between neighbours). */
static inline size_t kr_pp_arena_bytes(const kr_pp_ctx *c, int t)
{
    return kr_tensor_elements(&c->g->tensors[t]) * (size_t)c->batch * (c->ops[0].f16 ? 2 : 4);
}

/* Bytes of @p elements elements of one item at the batch, in the instance's element type. */
static inline size_t kr_pp_item_bytes(const kr_pp_ctx *c, size_t elements)
{
    return elements * (size_t)c->batch * (c->ops[0].f16 ? 2 : 4);
}


/* ---- plan_util.c ---------------------------------------------------------------------------- */

void kr_pp_common(kr_cuda_step *s, const kr_cuda_op *op, int n, int batch, int use_activation);

void kr_pp_window(kr_cuda_step *s, const kr_cuda_op *op, int kh, int kw);

int kr_pp_readers(const kr_graph *g, int t);

/* Whether a RESHAPE view of tensor @p t exists. */
int kr_pp_has_view(const kr_graph *g, int t);

/* A tensor only @p reader-side code ever sees: activation, read once, no view, not an output. */
int kr_pp_private(const kr_graph *g, int t);

/* The pool tail of step @p s (persistent.h): its slicing from the step's own work split; for an
 * excitation (@p m >= 0, the MUL), where its consumer's prologue finds the sums. */
void kr_pp_set_tail(kr_pp_ctx *c, kr_cuda_step *s, int m, int pool, const void *add);

/* The squeeze-and-excitation prologue of step @p s, the consumer of MUL @p m's excitation. */
void kr_pp_set_prologue(kr_pp_ctx *c, kr_cuda_step *s, int m);

/* The CONV_2D, DEPTHWISE_CONV_2D and transpose convolution set-up: shapes, window, weights. */
const char *kr_pp_conv_like(kr_cuda_step *s, const kr_cuda_op *op, int n, int batch, int kind,
                             int use_activation);

/* 4 when step @p s can work on 4 channels at a time (oc a multiple of 4, x, y and the
 * residual 16-byte aligned at @p esize bytes per element), else 1. */
int kr_pp_channel_vec(const kr_cuda_step *s, size_t esize);

/* Whether PAD node @p node fills with zeros (CONSTANT mode, value 0): the only PAD the
 * persistent schedule does or folds. */
static inline int kr_pp_zero_pad(const kr_node *node)
{
    return node->p.pad.mode == KR_PAD_CONSTANT && node->p.pad.value == 0.0f;
}

/* Whether PAD node @p node pads only the channels of an NHWC tensor, after them. */
int kr_pp_channel_pad(const kr_graph *g, const kr_node *node);

/* Whether PAD node @p node pads only H and W of an NHWC tensor. */
int kr_pp_spatial_pad(const kr_graph *g, const kr_node *node);

/* ---- fuse.c: merges across nodes ------------------------------------------------------------ */

/* Squeeze-and-excitation blocks (persistent.h): the step writing the pooled tensor, when it is
 * the one right before the pool and can (a convolution or an activation whose slice of outputs
 * fits the tile), or else the pool's own step, gets the pool tail that writes the sums; the
 * excitation's consumer computes it in its prologue; marks what has no step of its own. */
void kr_pp_plan_excitations(kr_pp_ctx *c);

/* A standalone activation node @p n (RELU, RELU6, HARD_SWISH, LOGISTIC) done as the post
 * function of the step before it, @p prev, when that step writes the activation's input and
 * nothing else reads it (the backend folds only an activation right after its producer in node
 * order; an excitation's skipped nodes may sit between). The step then writes the activation's
 * output, which must not overlap what the step reads. Returns whether it did. */
int kr_pp_absorb_activation(const kr_pp_ctx *c, kr_cuda_step *prev, int n);

/* A RESIZE step @p prev whose output only the 1x1 group-4 convolution @p cur reads is done by
 * the convolution as it loads its input (persistent.h, rz); @p cur then takes @p prev's place.
 * Not when the resize scales by an excitation, adds a residual, has a pool tail, or when the
 * convolution's output overlaps the resize's input (the memory plan may put it there: that
 * tensor's life ended at the resize). Returns 1 if merged. */
int kr_pp_absorb_resize(const kr_pp_ctx *c, kr_cuda_step *prev, const kr_cuda_step *cur);

/* An ADD step @p cur, one of whose operands only the convolution step @p prev writes and only
 * the ADD reads, is done by that convolution: the other operand becomes its residual, added
 * before the ADD's activation (res_pre; BlazeFace's blocks are relu(conv + x), which the
 * backend's residual fold, activation first, does not take); with a folded channel PAD
 * (bmode 3) the residual has the PAD input's cn channels (res_c). Not when the convolution has
 * a residual, tail, activation or post function of its own, when the group-4 path would read
 * the residual across the channel boundary or unaligned, or when the ADD's output overlaps
 * what the convolution reads (its input, or the residual other than in place). @p cur then
 * takes no step. Returns 1 if merged. */
int kr_pp_absorb_add(const kr_pp_ctx *c, kr_cuda_step *prev, const kr_cuda_step *cur);

/* Gives 1x1 convolution node @p n to step @p prev when prev is a 3x3 convolution on 3 channels
 * (the models' RGB stem) whose output n reads, pixel by pixel: the two become one CONV_PW step
 * (selfie: one step and one grid barrier fewer); the stem's output is stored only if other
 * nodes read it too (selfie's decoder does). Refused where n has anything folded into it (a
 * residual, an excitation, a pool tail, a pad), where n's output channels differ from the
 * stem's (the one shape run on the GPU is selfie's 16 -> 16; a version for other shapes and
 * 1x1 first convolutions was tried and dropped, docs/notes/cuda-persistent-schedule.md), where
 * their weights do not fit the step's shared memory, where the stem's output is a graph output
 * or has a view, or where n's output overlaps the stem's input or output. Returns whether it
 * did. */
int kr_pp_absorb_pointwise(const kr_pp_ctx *c, kr_cuda_step *prev, int n);

/* A depthwise convolution node @p n done in the step before it, @p prev, when that is a
 * pointwise convolution (1x1, stride 1, no residual or tail) whose output only the depthwise
 * convolution reads (and its folded residual ADD): the two become one EXPAND_DW step and the
 * pointwise output is never stored. The depthwise output must not overlap what the step reads.
 * Returns whether it did. */
int kr_pp_absorb_depthwise(const kr_pp_ctx *c, kr_cuda_step *prev, int n);

/* A channel PAD read only by an ADD of its output's shape is done by that ADD (BINARY bmode
 * 3: the padded operand read with its own channels, zero beyond), unless the ADD's output
 * overlaps the PAD's input (the memory plan may put it there: that tensor's life ended at the
 * PAD). */
void kr_pp_plan_pads(kr_pp_ctx *c);

#endif
