/*
 * Mixed precision in an f16 instance (mixed.h).
 */
#include "nn/cuda/mixed.h"

#include <stdlib.h>
#include <string.h>

#include "nn/cuda/pernode.h"

#define COPY_ALIGN 256

typedef struct {
    int before;      /* the fused node it runs before */
    int to_half;     /* 1: float -> half; 0: half -> float */
    const void *src;
    void *dst;
    size_t n;        /* elements */
} mx_step;

struct kr_cuda_mixed {
    const kr_graph *graph;
    mx_step *steps;
    int n_steps;
    void **copy;             /* per tensor: its copy in the other element type, or NULL */
    unsigned char *out_half; /* per graph output: stored as half (1) or float (0) */
    int f32_nodes;
};

void kr_cuda_mixed_destroy(kr_cuda_mixed **pmx)
{
    if (!pmx || !*pmx)
        return;
    kr_cuda_mixed *mx = *pmx;
    if (mx->copy)
        for (int t = 0; t < mx->graph->n_tensors; t++)
            if (mx->copy[t])
                cudaFree(mx->copy[t]);
    free(mx->copy);
    free(mx->steps);
    free(mx->out_half);
    free(mx);
    *pmx = NULL;
}

void kr_cuda_mixed_counts(const kr_cuda_mixed *mx, int *f32_nodes, int *steps)
{
    *f32_nodes = mx ? mx->f32_nodes : 0;
    *steps = mx ? mx->n_steps : 0;
}

static int is_conv(kr_op op)
{
    return op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D ||
           op == KR_OP_TRANSPOSE_CONV_BIAS || op == KR_OP_TRANSPOSE_CONV;
}

/* The fused node that does folded node @p f's work: the global pool right after it for an ADD
 * folded into that pool (fusion.h, pool ADDs), else the nearest node before it that is not
 * folded (activation and residual folds). */
static int host_of(const kr_graph *g, const kr_cuda_op *ops, const unsigned char *folded, int f)
{
    if (g->nodes[f].op == KR_OP_ADD && f + 1 < g->n_nodes && !folded[f + 1] &&
        ops[f + 1].addend && g->nodes[f + 1].inputs[0] == g->nodes[f].outputs[0])
        return f + 1;
    int h = f - 1;
    while (h > 0 && folded[h])
        h--;
    return h < 0 ? 0 : h;
}

/* Whether activation storage tensor @p s is stored as half: graph inputs are (their float copy
 * is the staging), the others in the type of the node that writes them. */
static int stored_half(const kr_graph *g, const unsigned char *half, int s)
{
    const kr_tensor *t = &g->tensors[s];
    if (t->graph_input >= 0 || t->producer < 0)
        return 1;
    return half[t->producer];
}

typedef struct {
    const kr_cuda_mem *mem;
    float *const *io;
    kr_cuda_mixed *mx;
    int cap_steps;
} mx_build;

/* The copy of tensor @p t (@p n elements, now stored in the other type) in type @p to_half
 * into @p *out, allocated and its conversion step recorded before node @p before on first use.
 * Errors: OUT_OF_MEMORY, DEVICE. */
static keyer_status copy_of(mx_build *b, int t, size_t n, int to_half, const void *src,
                            int before, void **out, keyer_error *err)
{
    kr_cuda_mixed *mx = b->mx;
    *out = mx->copy[t];
    if (*out)
        return KEYER_OK;
    if (mx->n_steps == b->cap_steps) {
        int cap = b->cap_steps ? 2 * b->cap_steps : 16;
        mx_step *s = realloc(mx->steps, (size_t)cap * sizeof(*s));
        if (!s)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                   mx->graph->name);
        mx->steps = s;
        b->cap_steps = cap;
    }
    size_t bytes = (n * (to_half ? 2 : 4) + COPY_ALIGN - 1) / COPY_ALIGN * COPY_ALIGN;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : COPY_ALIGN);
    if (e == cudaSuccess)
        e = cudaMemset(p, 0, bytes ? bytes : COPY_ALIGN);
    if (e != cudaSuccess) {
        if (p)
            cudaFree(p);
        return kr_cuda_fail(err, mx->graph, "allocating a mixed-precision copy", e);
    }
    mx->copy[t] = p;
    mx->steps[mx->n_steps++] = (mx_step){before, to_half, src, p, n};
    *out = p;
    return KEYER_OK;
}

/* Points @p *field (a read of fused node @p n, element type @p half, by node @p reader's
 * input @p i) at tensor @p t in the node's type. Errors: those of copy_of. */
static keyer_status bind_read(mx_build *b, const unsigned char *half, int n, int reader, int i, int t,
                     const void **field, keyer_error *err)
{
    const kr_graph *g = b->mem->graph;
    const kr_tensor *tt = &g->tensors[t];
    int want_half = half[n];
    if (tt->dtype != KR_DTYPE_F32)
        return KEYER_OK; /* int32 constants (GATHER indices): as they are */
    if (kr_tensor_is_const(tt)) {
        /* convolution weights and biases are float in every instance; other float constants
         * are half in f16 instances (backend.c, const_esize) */
        if (want_half || (is_conv(g->nodes[reader].op) && i >= 1))
            return KEYER_OK;
        void *c = NULL;
        keyer_status st = copy_of(b, t, kr_tensor_elements(tt), 0, *field, n, &c, err);
        if (!st)
            *field = c;
        return st;
    }
    int s = kr_tensor_storage(g, t);
    if (!want_half && g->tensors[s].graph_input >= 0 && b->io[s]) {
        *field = b->io[s]; /* the input's float staging */
        return KEYER_OK;
    }
    if (stored_half(g, half, s) == want_half)
        return KEYER_OK;
    void *c = NULL;
    keyer_status st = copy_of(b, s, kr_tensor_bytes(&g->tensors[s], b->mem->batch) / 4,
                              want_half, kr_cuda_mem_ptr(b->mem, s), n, &c, err);
    if (!st)
        *field = c;
    return st;
}

/* Which input of node @p reader (or of a node folded into fused node @p n) pointer @p p reads:
 * sets *reader and *index; returns the tensor, -1 when none. */
static int find_read(const kr_graph *g, const kr_cuda_mem *mem, const int *host, int n,
                     const void *p, int *reader, int *index)
{
    for (int m = 0; m < g->n_nodes; m++) {
        if (m != n && host[m] != n)
            continue;
        const kr_node *nd = &g->nodes[m];
        for (int i = 0; i < nd->n_inputs; i++) {
            int t = nd->inputs[i];
            if (t >= 0 && kr_cuda_mem_ptr(mem, t) == p) {
                *reader = m;
                *index = i;
                return t;
            }
        }
    }
    return -1;
}

keyer_status kr_cuda_mixed_create(const kr_cuda_mem *mem, float *const *io, kr_cuda_op *ops,
                                  const unsigned char *folded, const unsigned char *f32,
                                  kr_cuda_mixed **out, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    *out = NULL;
    size_t nn = g->n_nodes ? (size_t)g->n_nodes : 1, nt = g->n_tensors ? (size_t)g->n_tensors : 1;
    kr_cuda_mixed *mx = calloc(1, sizeof(*mx));
    int *host = malloc(nn * sizeof(int));
    unsigned char *half = malloc(nn);
    if (mx) {
        mx->graph = g;
        mx->copy = calloc(nt, sizeof(void *));
        mx->out_half = calloc(g->n_outputs ? (size_t)g->n_outputs : 1, 1);
    }
    if (!mx || !host || !half || !mx->copy || !mx->out_half) {
        kr_cuda_mixed_destroy(&mx);
        free(host);
        free(half);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    }
    for (int n = 0; n < g->n_nodes; n++)
        host[n] = folded[n] ? host_of(g, ops, folded, n) : n;
    for (int n = 0; n < g->n_nodes; n++) {
        half[n] = !f32[host[n]];
        /* a RESHAPE whose output is a view of its input moves nothing: its output is stored
         * as its input is (a copy in the other type would be written over the source) */
        const kr_node *nd = &g->nodes[n];
        if (nd->op == KR_OP_RESHAPE && !folded[n] && nd->n_inputs > 0 && nd->inputs[0] >= 0 &&
            g->tensors[nd->outputs[0]].view_of >= 0)
            half[n] = (unsigned char)stored_half(g, half, kr_tensor_storage(g, nd->inputs[0]));
    }
    for (int n = 0; n < g->n_nodes; n++) {
        if (folded[n])
            continue;
        ops[n].f16 = half[n];
        if (!half[n]) {
            ops[n].w16 = NULL;
            mx->f32_nodes++;
        }
    }
    mx_build b = {mem, io, mx, 0};
    keyer_status st = KEYER_OK;
    for (int n = 0; n < g->n_nodes && !st; n++) {
        if (folded[n])
            continue;
        kr_cuda_op *op = &ops[n];
        const void **fields[KR_MAX_NODE_INPUTS + 2];
        int nf = 0;
        for (int i = 0; i < g->nodes[n].n_inputs && i < KR_MAX_NODE_INPUTS; i++)
            fields[nf++] = &op->in[i];
        fields[nf++] = &op->residual;
        fields[nf++] = &op->addend;
        for (int k = 0; k < nf && !st; k++) {
            if (!*fields[k])
                continue;
            int reader = n, index = 0;
            int t = find_read(g, mem, host, n, *fields[k], &reader, &index);
            if (t < 0) {
                if (k < g->nodes[n].n_inputs && g->nodes[n].inputs[k] >= 0 &&
                    g->tensors[g->nodes[n].inputs[k]].dtype != KR_DTYPE_F32)
                    continue; /* an int32 operand: as it is */
                st = keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                     "%s: cuda backend: mixed precision: node %d (%s) reads "
                                     "memory of no tensor it has",
                                     g->name, n, kr_op_name(g->nodes[n].op));
                break;
            }
            st = bind_read(&b, half, n, reader, index, t, fields[k], err);
        }
    }
    for (int i = 0; i < g->n_outputs && !st; i++) {
        int t = g->outputs[i];
        if (g->tensors[t].dtype == KR_DTYPE_F32)
            mx->out_half[i] = (unsigned char)stored_half(g, half, kr_tensor_storage(g, t));
    }
    free(host);
    free(half);
    if (st) {
        kr_cuda_mixed_destroy(&mx);
        return st;
    }
    *out = mx;
    return KEYER_OK;
}

keyer_status kr_cuda_mixed_enqueue(const kr_cuda_mixed *mx, const kr_cuda_mem *mem,
                                   float *const *io, kr_cuda_op *ops,
                                   const unsigned char *folded, cudaStream_t stream, int check,
                                   keyer_error *err)
{
    const kr_graph *g = mem->graph;
    keyer_status st = kr_cuda_pernode_inputs_to_half(mem, io, ops, folded, stream, err);
    int si = 0;
    for (int n = 0; n < g->n_nodes && !st; n++) {
        if (folded[n])
            continue;
        cudaError_t e = cudaSuccess;
        for (; si < mx->n_steps && mx->steps[si].before == n && e == cudaSuccess; si++) {
            const mx_step *s = &mx->steps[si];
            e = (cudaError_t)(s->to_half
                                  ? kr_cuda_f32_to_f16((const float *)s->src, s->dst, s->n, stream)
                                  : kr_cuda_f16_to_f32(s->src, (float *)s->dst, s->n, stream));
        }
        if (e != cudaSuccess)
            return kr_cuda_fail(err, g, "converting a tensor between half and float", e);
        st = kr_cuda_pernode_launch(g, n, &ops[n], stream, check, err);
    }
    return st ? st : kr_cuda_pernode_outputs_to_float(mem, io, mx->out_half, stream, err);
}
