/*
 * The mixed-precision plan of f16 instances (precision_plan.h).
 */
#include "nn/precision_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether graph output tensor @p t is a mask: float, NHWC with one channel and more than one
 * pixel. */
static int is_mask_output(const kr_tensor *t)
{
    return t->dtype == KR_DTYPE_F32 && t->rank == 4 && t->dims[3] == 1 &&
           (size_t)t->dims[1] * (size_t)t->dims[2] > 1;
}

keyer_status kr_precision_plan_make(const kr_graph *g, kr_precision_plan *plan, keyer_error *err)
{
    memset(plan, 0, sizeof(*plan));
    size_t nn = g->n_nodes ? (size_t)g->n_nodes : 1, nt = g->n_tensors ? (size_t)g->n_tensors : 1;
    unsigned char *need = calloc(nn, 1), *tneed = calloc(nt, 1);
    if (!need || !tneed) {
        free(need);
        free(tneed);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    }
    int others = 0, masks = 0;
    for (int i = 0; i < g->n_outputs; i++) {
        const kr_tensor *t = &g->tensors[g->outputs[i]];
        if (is_mask_output(t)) {
            masks++;
        } else {
            tneed[g->outputs[i]] = 1;
            others++;
        }
    }
    /* every node that an output other than a mask depends on, walking the nodes backwards */
    double all = 0, kept = 0;
    int n_need = 0;
    for (int n = g->n_nodes - 1; n >= 0; n--) {
        const kr_node *node = &g->nodes[n];
        double e = 0;
        for (int o = 0; o < node->n_outputs; o++)
            if (node->outputs[o] >= 0) {
                e += (double)kr_tensor_elements(&g->tensors[node->outputs[o]]);
                need[n] |= tneed[node->outputs[o]];
            }
        all += e;
        if (!need[n])
            continue;
        kept += e;
        n_need++;
        for (int i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0 && !kr_tensor_is_const(&g->tensors[node->inputs[i]]))
                tneed[node->inputs[i]] = 1;
    }
    free(tneed);
    double share = all > 0 ? kept / all : 1.0;
    if (!others || !masks || share > KR_PRECISION_PLAN_MAX_F32_SHARE) {
        free(need);
        if (!others)
            snprintf(plan->summary, sizeof(plan->summary), "all half (mask outputs only)");
        else if (!masks)
            snprintf(plan->summary, sizeof(plan->summary), "all half (no mask output)");
        else
            snprintf(plan->summary, sizeof(plan->summary),
                     "all half (the float32 part would hold %.0f%% of the activations)",
                     100.0 * share);
        return KEYER_OK;
    }
    plan->f32 = need;
    plan->n_f32 = n_need;
    snprintf(plan->summary, sizeof(plan->summary),
             "float32 for the %d of %d nodes that the %d outputs other than masks depend on "
             "(%.0f%% of the activation elements), half for the %d nodes only the %d mask "
             "output%s depend on",
             n_need, g->n_nodes, others, 100.0 * share, g->n_nodes - n_need, masks,
             masks == 1 ? "" : "s");
    return KEYER_OK;
}

void kr_precision_plan_free(kr_precision_plan *plan)
{
    if (!plan)
        return;
    free(plan->f32);
    memset(plan, 0, sizeof(*plan));
}
