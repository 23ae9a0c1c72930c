/*
 * The reference backend (kr_backend_reference): every node runs its plain-C kernel (one file per
 * operator in this folder) on activations laid out in one host arena by the planner.
 *
 * create copies the plan's offsets, allocates the arena (keyer_calloc, KR_PLAN_ALIGNMENT-aligned,
 * zeroed so that a run on unset inputs is still deterministic) and builds one kr_op_ctx per node:
 * constants point at the graph's data, activations at arena + offset of their storage tensor (a
 * RESHAPE view points at its source's bytes, so the RESHAPE kernel sees in == out and does
 * nothing). run calls the kernels in node order and allocates nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"
#include "nn/backend.h"
#include "nn/reference/ops.h"

const kr_ref_op_fn kr_ref_ops[KR_OP_COUNT] = {
    [KR_OP_CONV_2D] = kr_ref_conv_2d,
    [KR_OP_DEPTHWISE_CONV_2D] = kr_ref_depthwise_conv_2d,
    [KR_OP_TRANSPOSE_CONV_BIAS] = kr_ref_transpose_conv_bias,
    [KR_OP_ADD] = kr_ref_add,
    [KR_OP_MUL] = kr_ref_mul,
    [KR_OP_RELU] = kr_ref_relu,
    [KR_OP_RELU6] = kr_ref_relu6,
    [KR_OP_HARD_SWISH] = kr_ref_hard_swish,
    [KR_OP_LOGISTIC] = kr_ref_logistic,
    [KR_OP_PRELU] = kr_ref_prelu,
    [KR_OP_AVERAGE_POOL_2D] = kr_ref_average_pool_2d,
    [KR_OP_MAX_POOL_2D] = kr_ref_max_pool_2d,
    [KR_OP_MEAN] = kr_ref_mean,
    [KR_OP_PAD] = kr_ref_pad,
    [KR_OP_RESIZE_BILINEAR] = kr_ref_resize_bilinear,
    [KR_OP_RESHAPE] = kr_ref_reshape,
    [KR_OP_CONCATENATION] = kr_ref_concatenation,
    [KR_OP_SUB] = kr_ref_sub,
    [KR_OP_DIV] = kr_ref_div,
    [KR_OP_TANH] = kr_ref_tanh,
    [KR_OP_EXP] = kr_ref_exp,
    [KR_OP_SQRT] = kr_ref_sqrt,
    [KR_OP_ELU] = kr_ref_elu,
    [KR_OP_LEAKY_RELU] = kr_ref_leaky_relu,
    [KR_OP_HARD_SIGMOID] = kr_ref_hard_sigmoid,
    [KR_OP_CLIP] = kr_ref_clip,
    [KR_OP_POW] = kr_ref_pow,
    [KR_OP_REDUCE_MAX] = kr_ref_reduce_max,
    [KR_OP_RESIZE] = kr_ref_resize,
    [KR_OP_TRANSPOSE] = kr_ref_transpose,
    [KR_OP_SLICE] = kr_ref_slice,
    [KR_OP_SOFTMAX] = kr_ref_softmax,
    [KR_OP_ARGMAX] = kr_ref_argmax,
    [KR_OP_MATMUL] = kr_ref_matmul,
    [KR_OP_GATHER] = kr_ref_gather,
    [KR_OP_TRANSPOSE_CONV] = kr_ref_transpose_conv,
};
_Static_assert(sizeof(kr_ref_ops) / sizeof(kr_ref_ops[0]) == KR_OP_COUNT,
               "kr_ref_ops must have an entry for every kr_op");

struct kr_backend_instance {
    const kr_graph *graph;
    unsigned char *arena; /* keyer_calloc'd, arena_bytes (at least KR_PLAN_ALIGNMENT) */
    size_t arena_bytes;
    size_t *offsets;      /* copy of the plan's offsets, per tensor */
    kr_op_ctx *ctx;       /* one per node, built at create */
};

/* Every operator has a kernel; the graph was validated, so every node can run. */
static int ref_supports(const kr_graph *g, const kr_node *node)
{
    (void)g;
    return (unsigned)node->op < KR_OP_COUNT && kr_ref_ops[node->op] != NULL;
}

/* Bytes of tensor @p t: a constant's data, or the arena at its storage tensor's offset. */
static void *tensor_ptr(const kr_backend_instance *inst, int t)
{
    const kr_graph *g = inst->graph;
    int s = kr_tensor_storage(g, t);
    if (kr_tensor_is_const(&g->tensors[s]))
        return (void *)g->tensors[s].data;
    return inst->arena + inst->offsets[s];
}

static void ref_destroy(kr_backend_instance **pinst)
{
    if (!pinst || !*pinst)
        return;
    kr_backend_instance *inst = *pinst;
    keyer_free(NULL, inst->arena);
    free(inst->offsets);
    free(inst->ctx);
    free(inst);
    *pinst = NULL;
}

static keyer_status ref_create(const kr_graph *g, const kr_plan *plan, const kr_backend_config *cfg,
                               kr_backend_instance **out, keyer_error *err)
{
    keyer_status st = KEYER_OK;
    *out = NULL;
    if (plan->n_tensors != g->n_tensors || plan->batch != cfg->batch)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "%s: reference backend: the plan (%d tensors, batch %d) does not "
                               "match the graph (%d tensors, batch %d)",
                               g->name, plan->n_tensors, plan->batch, g->n_tensors, cfg->batch);
    kr_backend_instance *inst = calloc(1, sizeof(*inst));
    if (inst) {
        inst->graph = g;
        inst->arena_bytes = plan->arena_bytes ? plan->arena_bytes : KR_PLAN_ALIGNMENT;
        inst->offsets = malloc((g->n_tensors ? (size_t)g->n_tensors : 1) * sizeof(size_t));
        inst->ctx = calloc(g->n_nodes ? (size_t)g->n_nodes : 1, sizeof(kr_op_ctx));
        inst->arena = keyer_calloc(NULL, inst->arena_bytes, KR_PLAN_ALIGNMENT);
    }
    if (!inst || !inst->offsets || !inst->ctx || !inst->arena) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                             "%s: reference backend: cannot allocate the %zu-byte activation "
                             "arena and per-node tables (batch %d)",
                             g->name, plan->arena_bytes, cfg->batch);
        goto fail;
    }
    if (g->n_tensors)
        memcpy(inst->offsets, plan->offsets, (size_t)g->n_tensors * sizeof(size_t));
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        kr_op_ctx *c = &inst->ctx[n];
        c->graph = g;
        c->node = node;
        c->batch = cfg->batch;
        for (int i = 0; i < node->n_inputs; i++)
            c->in[i] = node->inputs[i] >= 0 ? tensor_ptr(inst, node->inputs[i]) : NULL;
        for (int i = 0; i < node->n_outputs; i++)
            c->out[i] = tensor_ptr(inst, node->outputs[i]);
    }
    *out = inst;
    return KEYER_OK;
fail:
    ref_destroy(&inst);
    return st;
}

static void *ref_tensor_data(kr_backend_instance *inst, int tensor)
{
    return tensor_ptr(inst, tensor);
}

static keyer_status ref_run(kr_backend_instance *inst, keyer_error *err)
{
    (void)err;
    for (int n = 0; n < inst->graph->n_nodes; n++)
        kr_ref_ops[inst->graph->nodes[n].op](&inst->ctx[n]);
    return KEYER_OK;
}

static size_t ref_arena_bytes(const kr_backend_instance *inst) { return inst->arena_bytes; }

const kr_backend_ops kr_backend_reference = {
    .name = "reference",
    .memory = KEYER_MEMORY_HOST,
    .supports_node = ref_supports,
    .create = ref_create,
    .tensor_data = ref_tensor_data,
    .run = ref_run,
    .copy_in = NULL,     /* host memory: memcpy */
    .copy_out = NULL,
    .synchronize = NULL, /* synchronous */
    .arena_bytes = ref_arena_bytes,
    .weight_bytes = NULL, /* uses the graph's constants in place */
    .destroy = ref_destroy,
};
