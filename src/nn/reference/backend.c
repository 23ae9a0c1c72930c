/*
 * The reference backend: every node runs its plain-C kernel (one file per operator in this
 * folder) on activations laid out in one arena by the planner. All per-node argument blocks are
 * built at create, so run allocates nothing.
 */
#include <stdlib.h>
#include <string.h>

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
};
_Static_assert(sizeof(kr_ref_ops) / sizeof(kr_ref_ops[0]) == KR_OP_COUNT,
               "kr_ref_ops must have an entry for every kr_op");

struct kr_backend_instance {
    const kr_graph *graph;
    uint8_t *arena;
    size_t arena_bytes;
    size_t *offsets; /* copy of the plan's offsets */
    kr_op_ctx *ctx;  /* one per node */
};

static int ref_supports(const kr_graph *g, const kr_node *node)
{
    (void)g;
    return (unsigned)node->op < KR_OP_COUNT && kr_ref_ops[node->op] != NULL;
}

static void *tensor_ptr(kr_backend_instance *inst, int t)
{
    const kr_tensor *tensor = &inst->graph->tensors[t];
    if (kr_tensor_is_const(tensor))
        return (void *)tensor->data;
    int s = kr_tensor_storage(inst->graph, t);
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
    *out = NULL;
    kr_backend_instance *inst = calloc(1, sizeof(*inst));
    if (!inst)
        goto oom;
    inst->graph = g;
    inst->arena_bytes = plan->arena_bytes;
    inst->offsets = malloc((size_t)g->n_tensors * sizeof(size_t));
    inst->ctx = calloc(g->n_nodes ? (size_t)g->n_nodes : 1, sizeof(kr_op_ctx));
    inst->arena = keyer_alloc(NULL, plan->arena_bytes ? plan->arena_bytes : 64, 64);
    if (!inst->offsets || !inst->ctx || !inst->arena)
        goto oom;
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
oom:
    ref_destroy(&inst);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                           "%s: reference backend: cannot allocate the %zu-byte arena", g->name,
                           plan->arena_bytes);
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
    .arena_bytes = ref_arena_bytes,
    .destroy = ref_destroy,
};
