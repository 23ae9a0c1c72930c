/*
 * Which nodes the CPU backend gives its own kernels (nn/cpu/kernels.h), and which neighbours
 * those kernels take over: the fusion plan the backend partitions and runs by.
 */
#include <math.h>

#include "nn/cpu/kernels.h"

/* The clamp of a RELU, RELU6 or CLIP node; 0 for other operators. */
static int clamp_of(const kr_node *n, float *lo, float *hi)
{
    switch (n->op) {
    case KR_OP_RELU: *lo = 0.0f; *hi = INFINITY; return 1;
    case KR_OP_RELU6: *lo = 0.0f; *hi = 6.0f; return 1;
    case KR_OP_CLIP: *lo = n->p.unary.alpha; *hi = n->p.unary.beta; return !(*lo > *hi);
    default: break;
    }
    return 0;
}

/* Whether tensor @p t is read by exactly one node and is not a graph output. */
static int single_use(const kr_graph *g, int t)
{
    if (t < 0 || t >= g->n_tensors || g->tensors[t].graph_output >= 0)
        return 0;
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            uses += g->nodes[i].inputs[k] == t;
    return uses == 1;
}

/* Gives Winograd convolutions the CONCATENATION just before them (reading its inputs in place
 * of the concatenated tensor), the RELU/RELU6/CLIP just after them and then a residual ADD
 * (writing the last one's output), when the tensors between are used only there. Adjacent
 * nodes only, so that the fused nodes share the kernel's segment and their tensors' arena
 * lifetimes. */
static void plan_fusions(const kr_graph *g, kr_cpu_node_plan *plan)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        if (!plan[i].kernel || !kr_cpu_winograd_supports(g, n))
            continue;
        if (i > 0 && !plan[i - 1].skip &&
            kr_cpu_winograd_can_read_concat(g, n, &g->nodes[i - 1]) &&
            single_use(g, n->inputs[0])) {
            plan[i].concat = i - 1;
            plan[i - 1].skip = 1;
        }
        if (i + 1 < g->n_nodes) {
            const kr_node *a = &g->nodes[i + 1];
            float lo, hi, nlo, nhi;
            kr_activation_range(n->activation, &nlo, &nhi);
            if (clamp_of(a, &lo, &hi) && a->n_inputs == 1 && a->n_outputs == 1 &&
                a->inputs[0] == n->outputs[0] && single_use(g, n->outputs[0]) &&
                kr_tensor_same_dims(&g->tensors[a->inputs[0]], &g->tensors[a->outputs[0]]) &&
                g->tensors[a->outputs[0]].dtype == KR_DTYPE_F32 &&
                (lo > nlo ? lo : nlo) <= (hi < nhi ? hi : nhi)) {
                plan[i].act = i + 1;
                plan[i + 1].skip = 1;
            }
        }
        /* y = conv (+ activation) + other: the ADD next, reading that result once. */
        int t = plan[i].act >= 0 ? g->nodes[i + 1].outputs[0] : n->outputs[0];
        int j = plan[i].act >= 0 ? i + 2 : i + 1;
        if (j < g->n_nodes && g->nodes[j].op == KR_OP_ADD && g->nodes[j].n_inputs == 2 &&
            g->nodes[j].n_outputs == 1 && single_use(g, t) &&
            (g->nodes[j].inputs[0] == t) != (g->nodes[j].inputs[1] == t)) {
            const kr_node *add = &g->nodes[j];
            int other = add->inputs[0] == t ? 1 : 0;
            const kr_tensor *o = &g->tensors[add->inputs[other]], *y = &g->tensors[add->outputs[0]];
            if (!kr_tensor_is_const(o) && o->dtype == KR_DTYPE_F32 && y->dtype == KR_DTYPE_F32 &&
                kr_tensor_same_dims(o, &g->tensors[t]) && kr_tensor_same_dims(y, o)) {
                plan[i].add = j;
                plan[i].add_other = other;
                plan[j].skip = 1;
            }
        }
    }
}

void kr_cpu_plan_nodes(const kr_graph *g, int kernels, int fusions, kr_cpu_node_plan *plan)
{
    for (int i = 0; i < g->n_nodes; i++) {
        plan[i].kernel = kernels && kr_cpu_kernel_supports(g, &g->nodes[i]);
        plan[i].skip = 0;
        plan[i].concat = plan[i].act = plan[i].add = plan[i].add_other = -1;
    }
    if (kernels && fusions)
        plan_fusions(g, plan);
}

void kr_cpu_fusion_of(const kr_graph *g, const kr_cpu_node_plan *p, kr_cpu_fusion *out)
{
    out->concat = p->concat >= 0 ? &g->nodes[p->concat] : NULL;
    out->lo = -INFINITY;
    out->hi = INFINITY;
    out->residual = 0;
    out->res_lo = -INFINITY;
    out->res_hi = INFINITY;
    if (p->act >= 0)
        clamp_of(&g->nodes[p->act], &out->lo, &out->hi);
    if (p->add >= 0) {
        out->residual = 1;
        kr_activation_range(g->nodes[p->add].activation, &out->res_lo, &out->res_hi);
    }
}
