/*
 * CONCATENATION of float32 activations on the CPU backend: per outer index (the dimensions
 * before the axis) each input's block is copied in input order, as the reference kernel does,
 * with the outer rows split over the pool's threads.
 */
#include <string.h>

#include "nn/cpu/kernels.h"

typedef struct concat_job {
    const kr_op_ctx *ctx;
    size_t out_block;        /* floats per outer row of the output */
    size_t block[KR_MAX_NODE_INPUTS];
} concat_job;

int kr_cpu_concat_supports(const kr_graph *g, const kr_node *n)
{
    if (n->op != KR_OP_CONCATENATION || n->n_inputs < 1 || n->n_outputs != 1)
        return 0;
    const kr_tensor *y = &g->tensors[n->outputs[0]];
    if (kr_tensor_is_const(y) || y->dtype != KR_DTYPE_F32 || y->rank < 1)
        return 0;
    for (int i = 0; i < n->n_inputs; i++) {
        int t = n->inputs[i];
        /* Constants are not scaled by the batch: left to the reference kernel. */
        if (t < 0 || t >= g->n_tensors || kr_tensor_is_const(&g->tensors[t]) ||
            g->tensors[t].dtype != KR_DTYPE_F32 || g->tensors[t].rank != y->rank)
            return 0;
    }
    /* Axis 0 mixes the batch (such graphs run at batch 1): left to the reference kernel. */
    return n->p.concat.axis >= 1 && n->p.concat.axis < y->rank;
}

static void copy_rows(void *arg, size_t first, size_t count)
{
    const concat_job *j = arg;
    const kr_node *n = j->ctx->node;
    float *y = j->ctx->out[0];
    for (size_t o = first; o < first + count; o++) {
        size_t off = 0;
        for (int i = 0; i < n->n_inputs; i++) {
            const float *x = (const float *)j->ctx->in[i] + o * j->block[i];
            float *dst = y + o * j->out_block + off;
            if (j->block[i] < 16) /* a few channels per pixel: no call per block */
                for (size_t e = 0; e < j->block[i]; e++)
                    dst[e] = x[e];
            else
                memcpy(dst, x, j->block[i] * sizeof(float));
            off += j->block[i];
        }
    }
}

void kr_cpu_concat_run(const kr_op_ctx *ctx, pthreadpool_t pool)
{
    const kr_graph *g = ctx->graph;
    const kr_node *n = ctx->node;
    const kr_tensor *yt = &g->tensors[n->outputs[0]];
    int axis = n->p.concat.axis;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)yt->dims[d] * (d == 0 ? (size_t)ctx->batch : 1);
    for (int d = axis + 1; d < yt->rank; d++)
        inner *= (size_t)yt->dims[d];
    concat_job j = {.ctx = ctx, .out_block = (size_t)yt->dims[axis] * inner};
    for (int i = 0; i < n->n_inputs; i++)
        j.block[i] = (size_t)g->tensors[n->inputs[i]].dims[axis] * inner;
    /* Rows of at least 16 KB per task. */
    size_t row_bytes = j.out_block * sizeof(float);
    size_t tile = row_bytes >= 16384 ? 1 : 16384 / (row_bytes ? row_bytes : 1);
    if (pool && outer > tile)
        pthreadpool_parallelize_1d_tile_1d(pool, copy_rows, &j, outer, tile,
                                           PTHREADPOOL_FLAG_YIELD_WORKERS);
    else
        copy_rows(&j, 0, outer);
}
