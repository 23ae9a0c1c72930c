#include "kt_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "kt_graph: %s\n", what);
    abort();
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (!p)
        die("out of memory");
    memcpy(p, s, n);
    return p;
}

void kt_graph_begin(kt_graph *b, const char *name, int max_tensors, int max_nodes,
                    size_t const_bytes)
{
    memset(b, 0, sizeof(*b));
    kr_graph *g = calloc(1, sizeof(*g));
    if (!g)
        die("out of memory");
    g->name = dup_string(name);
    b->max_tensors = max_tensors > 0 ? max_tensors : 1;
    b->max_nodes = max_nodes > 0 ? max_nodes : 1;
    b->max_io = b->max_tensors;
    b->const_cap = const_bytes ? const_bytes : 16;
    g->tensors = calloc((size_t)b->max_tensors, sizeof(kr_tensor));
    g->nodes = calloc((size_t)b->max_nodes, sizeof(kr_node));
    g->inputs = calloc((size_t)b->max_io, sizeof(int));
    g->outputs = calloc((size_t)b->max_io, sizeof(int));
    g->const_storage = aligned_alloc(16, (b->const_cap + 15) & ~(size_t)15);
    if (!g->tensors || !g->nodes || !g->inputs || !g->outputs || !g->const_storage)
        die("out of memory");
    b->g = g;
}

static int add_tensor(kt_graph *b, kr_dtype dtype, int rank, const int *dims)
{
    kr_graph *g = b->g;
    if (g->n_tensors >= b->max_tensors)
        die("too many tensors");
    if (rank < 0 || rank > KR_MAX_DIMS)
        die("bad rank");
    int t = g->n_tensors++;
    kr_tensor *x = &g->tensors[t];
    char name[32];
    snprintf(name, sizeof(name), "t%d", t);
    x->name = dup_string(name);
    x->dtype = dtype;
    x->rank = rank;
    for (int d = 0; d < rank; d++)
        x->dims[d] = dims[d];
    x->view_of = -1;
    x->producer = x->last_consumer = x->graph_input = x->graph_output = -1;
    return t;
}

int kt_graph_act(kt_graph *b, int rank, const int *dims)
{
    return add_tensor(b, KR_DTYPE_F32, rank, dims);
}

int kt_graph_const(kt_graph *b, kr_dtype dtype, int rank, const int *dims, const void *data)
{
    int t = add_tensor(b, dtype, rank, dims);
    kr_tensor *x = &b->g->tensors[t];
    size_t bytes = kr_tensor_elements(x) * kr_dtype_size(dtype);
    if (b->const_used + bytes > b->const_cap)
        die("constant storage exhausted");
    unsigned char *p = (unsigned char *)b->g->const_storage + b->const_used;
    memcpy(p, data, bytes);
    x->data = p;
    b->const_used += (bytes + 15) & ~(size_t)15;
    b->g->const_bytes = b->const_used;
    return t;
}

kr_node *kt_graph_node(kt_graph *b, kr_op op, int n_in, const int *in, int out)
{
    kr_graph *g = b->g;
    if (g->n_nodes >= b->max_nodes)
        die("too many nodes");
    if (n_in < 0 || n_in > KR_MAX_NODE_INPUTS)
        die("bad input count");
    kr_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->source_index = g->n_nodes++;
    n->n_inputs = n_in;
    for (int i = 0; i < n_in; i++)
        n->inputs[i] = in[i];
    for (int i = n_in; i < KR_MAX_NODE_INPUTS; i++)
        n->inputs[i] = -1;
    n->n_outputs = 1;
    n->outputs[0] = out;
    n->outputs[1] = -1;
    n->activation = KR_ACT_NONE;
    n->p.window.dilation_h = n->p.window.dilation_w = 1;
    return n;
}

void kt_graph_input(kt_graph *b, int tensor)
{
    if (b->g->n_inputs >= b->max_io)
        die("too many inputs");
    b->g->inputs[b->g->n_inputs++] = tensor;
}

void kt_graph_output(kt_graph *b, int tensor)
{
    if (b->g->n_outputs >= b->max_io)
        die("too many outputs");
    b->g->outputs[b->g->n_outputs++] = tensor;
}

keyer_status kt_graph_finish(kt_graph *b, kr_graph **out, keyer_error *err)
{
    kr_graph *g = b->g;
    b->g = NULL;
    *out = NULL;
    keyer_status st = kr_graph_validate(g, err);
    if (st != KEYER_OK) {
        kr_graph_destroy(&g);
        return st;
    }
    kr_graph_link(g);
    *out = g;
    return KEYER_OK;
}

kt_rng kt_rng_seed(uint32_t seed)
{
    kt_rng r = {seed ? seed : 0x9e3779b9u};
    for (int i = 0; i < 4; i++) /* decorrelate nearby seeds */
        kt_rng_next(&r);
    return r;
}

uint32_t kt_rng_next(kt_rng *r)
{
    uint32_t x = r->s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    r->s = x;
    return x;
}

float kt_rng_uniform(kt_rng *r, float lo, float hi)
{
    float u = (float)(kt_rng_next(r) >> 8) * (1.0f / 16777216.0f); /* [0, 1) */
    return lo + (hi - lo) * u;
}

void kt_rng_fill(kt_rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = kt_rng_uniform(r, lo, hi);
}

kr_graph *kt_graph_build(kt_graph *b)
{
    kr_graph *g = NULL;
    keyer_error err = {0};
    if (kt_graph_finish(b, &g, &err) != KEYER_OK)
        die(err.message);
    return g;
}
