/*
 * The CPU backend's own kernels behind one handle (nn/cpu/kernels.h): which node goes to which
 * kernel, and their create/run/destroy.
 */
#include <math.h>
#include <stdlib.h>

#include "nn/cpu/kernels.h"

typedef enum kernel_kind { KERNEL_WINOGRAD, KERNEL_CONV_1OUT, KERNEL_CONCAT } kernel_kind;

struct kr_cpu_kernel {
    kernel_kind kind;
    kr_cpu_winograd *winograd;
    pthreadpool_task_1d_tile_1d_t rows; /* CONV_1OUT */
};

int kr_cpu_kernel_supports(const kr_graph *g, const kr_node *node)
{
    if (!g || !node)
        return 0;
    switch (node->op) {
    case KR_OP_CONV_2D:
        return kr_cpu_winograd_supports(g, node) || kr_cpu_conv_1out_supports(g, node);
    case KR_OP_CONCATENATION: return kr_cpu_concat_supports(g, node);
    default: break;
    }
    return 0;
}

keyer_status kr_cpu_kernel_create(const kr_graph *g, const kr_node *node, int batch, int threads,
                                  const kr_cpu_fusion *fusion, kr_cpu_kernel **out,
                                  keyer_error *err)
{
    *out = NULL;
    if (!kr_cpu_kernel_supports(g, node))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "cpu backend: %s: node (%s, operator %d in the file) has no CPU "
                               "kernel",
                               g && g->name ? g->name : "model", kr_op_name(node->op),
                               node->source_index);
    kr_cpu_kernel *k = calloc(1, sizeof(*k));
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "cpu backend: no memory");
    if (node->op == KR_OP_CONV_2D && !kr_cpu_winograd_supports(g, node)) {
        if (fusion && (fusion->concat || fusion->residual || fusion->lo != -INFINITY ||
                       fusion->hi != INFINITY)) {
            free(k);
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "cpu backend: the one-channel convolution fuses nothing");
        }
        k->kind = KERNEL_CONV_1OUT;
        k->rows = kr_cpu_conv_1out_pick();
    } else if (node->op == KR_OP_CONV_2D) {
        k->kind = KERNEL_WINOGRAD;
        keyer_status st =
            kr_cpu_winograd_create(g, node, batch, threads, fusion, &k->winograd, err);
        if (st != KEYER_OK) {
            free(k);
            return st;
        }
    } else {
        if (fusion && (fusion->concat || fusion->residual || fusion->lo != -INFINITY ||
                       fusion->hi != INFINITY)) {
            free(k);
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "cpu backend: the concatenation kernel fuses nothing");
        }
        k->kind = KERNEL_CONCAT;
    }
    *out = k;
    return KEYER_OK;
}

void kr_cpu_kernel_run(kr_cpu_kernel *k, const kr_op_ctx *ctx, const kr_cpu_fused_io *io,
                       pthreadpool_t pool)
{
    switch (k->kind) {
    case KERNEL_WINOGRAD: {
        const float *src[KR_MAX_NODE_INPUTS] = {ctx->in[0]};
        if (io && io->concat)
            for (int i = 0; i < io->concat->node->n_inputs; i++)
                src[i] = io->concat->in[i];
        kr_cpu_winograd_run(k->winograd, src, io ? io->residual : NULL,
                            io && io->out ? io->out : ctx->out[0], pool);
        break;
    }
    case KERNEL_CONV_1OUT: kr_cpu_conv_1out_run(ctx, k->rows, pool); break;
    case KERNEL_CONCAT: kr_cpu_concat_run(ctx, pool); break;
    }
}

void kr_cpu_kernel_destroy(kr_cpu_kernel **pk)
{
    if (!pk || !*pk)
        return;
    kr_cpu_winograd_destroy(&(*pk)->winograd);
    free(*pk);
    *pk = NULL;
}
