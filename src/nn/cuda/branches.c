/*
 * Branches of the per-node schedule (branches.h): units, their byte ranges and dependencies,
 * the critical path, the two-stream order and its queueing.
 */
#include "nn/cuda/branches.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/pernode.h"

#define MAX_READS (KR_MAX_NODE_INPUTS + 10 + KR_CUDA_GCAT_MAX)
#define COST_BYTES (8.0 * 1024 * 1024) /* bytes moved in one dependent kernel's floor */

typedef struct range {
    uintptr_t lo, hi; /* [lo, hi); lo == hi: nothing */
} range;

typedef struct unit {
    int node;   /* the fused node, or the producer's node for an output's conversion */
    int output; /* graph output index of a conversion, -1 for a node */
    range rd[MAX_READS];
    int n_rd;
    range wr;
    double cost;
    int side;
    int fork_at, join_at; /* side units: node indices of their window (branches.h) */
} unit;

enum { STEP_UNIT, STEP_FORK, STEP_JOIN };

typedef struct step {
    int kind, side, unit;
} step;

struct kr_cuda_branches {
    const kr_graph *graph;
    int n_units, n_steps, n_side, n_forks, n_joins;
    unit *units;
    step *steps;
    cudaStream_t side;
    cudaEvent_t fork, join;
};

int kr_cuda_branches_enabled(void)
{
    const char *v = getenv(KR_CUDA_BRANCHES_ENV);
    return !(v && strcmp(v, "0") == 0);
}

typedef struct layout {
    const kr_cuda_mem *mem;
    uintptr_t arena, arena_end;
    float *const *io;
    const unsigned char *folded;
    unsigned char *mark; /* per node: in the unit being read (mark_unit) */
    int *nodes, n_marked;
} layout;

/* Whether node @p m reads tensor @p t. */
static int reads(const kr_node *m, int t)
{
    for (int i = 0; i < m->n_inputs; i++)
        if (m->inputs[i] == t)
            return 1;
    return 0;
}

/* Marks node @p n and every folded node joined to it by graph edges through folded nodes: the
 * nodes whose work its kernel may do (fusion.h folds a node into a producer or consumer of its
 * data), and so whose tensors its kernel arguments point at. */
static void mark_unit(layout *l, int n)
{
    const kr_graph *g = l->mem->graph;
    for (int i = 0; i < l->n_marked; i++)
        l->mark[l->nodes[i]] = 0;
    l->n_marked = 0;
    l->mark[n] = 1;
    l->nodes[l->n_marked++] = n;
    for (int k = 0; k < l->n_marked; k++) {
        const kr_node *x = &g->nodes[l->nodes[k]];
        for (int i = 0; i < x->n_inputs; i++) {
            int p = x->inputs[i] >= 0 ? g->tensors[x->inputs[i]].producer : -1;
            if (p >= 0 && l->folded[p] && !l->mark[p]) {
                l->mark[p] = 1;
                l->nodes[l->n_marked++] = p;
            }
        }
        for (int o = 0; o < x->n_outputs; o++)
            for (int m = 0; x->outputs[o] >= 0 && m < g->n_nodes; m++)
                if (l->folded[m] && !l->mark[m] && reads(&g->nodes[m], x->outputs[o])) {
                    l->mark[m] = 1;
                    l->nodes[l->n_marked++] = m;
                }
    }
}

/* The bytes pointer @p p of the marked unit stands for (branches.h): the largest of the tensors
 * stored there that a marked node names (of all stored there when none does; the whole arena
 * for a pointer inside a tensor). */
static range range_of(const layout *l, const void *p)
{
    const kr_graph *g = l->mem->graph;
    uintptr_t a = (uintptr_t)p;
    range r = {a, a};
    if (!p)
        return r;
    if (a >= l->arena && a < l->arena_end) {
        size_t near = 0, any = 0;
        for (int k = 0; k < l->n_marked; k++) {
            const kr_node *x = &g->nodes[l->nodes[k]];
            for (int i = 0; i < x->n_inputs + x->n_outputs; i++) {
                int t = i < x->n_inputs ? x->inputs[i] : x->outputs[i - x->n_inputs];
                if (t < 0 || kr_tensor_is_const(&g->tensors[t]))
                    continue;
                t = kr_tensor_storage(g, t);
                if (l->mem->offsets[t] != SIZE_MAX && l->arena + l->mem->offsets[t] == a &&
                    kr_cuda_mem_bytes(l->mem, t) > near)
                    near = kr_cuda_mem_bytes(l->mem, t);
            }
        }
        for (int t = 0; !near && t < g->n_tensors; t++) {
            const kr_tensor *x = &g->tensors[t];
            if (kr_tensor_is_const(x) || x->view_of >= 0 || l->mem->offsets[t] == SIZE_MAX ||
                l->arena + l->mem->offsets[t] != a)
                continue;
            size_t b = kr_cuda_mem_bytes(l->mem, t);
            any = b > any ? b : any;
        }
        if (!near && !any) /* not a tensor's start: assume anything */
            return (range){l->arena, l->arena_end};
        r.hi = a + (near ? near : any);
        return r;
    }
    for (int t = 0; l->io && t < g->n_tensors; t++)
        if (l->io[t] && (uintptr_t)l->io[t] == a) {
            r.hi = a + kr_tensor_bytes(&g->tensors[t], l->mem->batch);
            return r;
        }
    return r; /* a constant: read-only */
}

static int overlap(range a, range b)
{
    return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

static void add_read(unit *u, range r)
{
    if (r.lo < r.hi && u->n_rd < MAX_READS)
        u->rd[u->n_rd++] = r;
}

static double range_bytes(range r) { return (double)(r.hi - r.lo); }

static void node_unit(layout *l, const kr_cuda_op *op, int n, unit *u)
{
    memset(u, 0, sizeof(*u));
    u->node = n;
    u->output = -1;
    mark_unit(l, n);
    for (int i = 0; i < KR_MAX_NODE_INPUTS; i++)
        add_read(u, range_of(l, op->in[i]));
    const void *more[] = {op->residual,  op->addend,    op->cat.src[0],   op->cat.src[1],
                          op->scale.src, op->scale.vec, op->scale.addend, op->rs.src,
                          op->add.src,   op->pool.src};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
        add_read(u, range_of(l, more[i]));
    for (int c = 0; c < op->gcat.n; c++)
        add_read(u, range_of(l, op->gcat.src[c]));
    u->wr = range_of(l, op->out);
    double bytes = range_bytes(u->wr);
    for (int i = 0; i < u->n_rd; i++)
        bytes += range_bytes(u->rd[i]) < range_bytes(u->wr) ? range_bytes(u->rd[i])
                                                            : range_bytes(u->wr);
    u->cost = 1.0 + bytes / COST_BYTES;
}

static int hazard(const unit *a, const unit *b)
{
    if (overlap(a->wr, b->wr))
        return 1;
    for (int i = 0; i < b->n_rd; i++)
        if (overlap(a->wr, b->rd[i]))
            return 1;
    for (int i = 0; i < a->n_rd; i++)
        if (overlap(a->rd[i], b->wr))
            return 1;
    return 0;
}

/* The plan's working arrays. */
typedef struct work {
    int n;
    unsigned char *dep; /* n x n: dep[j * n + i] = unit j depends on unit i (i < j) */
    double *head, *tail;
    int *need;      /* serial index of the first run-stream unit that needs a side unit; n: none */
    int *remaining; /* preds not yet queued */
    int *queued, *joined, *pending;
    int n_pending;
    int *sp_start, *sp; /* side predecessors of unit j: sp[sp_start[j] .. sp_start[j + 1]) */
} work;

static void work_free(work *w)
{
    free(w->dep);
    free(w->head);
    free(w->tail);
    free(w->need);
    free(w->remaining);
    free(w->queued);
    free(w->joined);
    free(w->pending);
    free(w->sp_start);
    free(w->sp);
}

typedef struct sim {
    kr_cuda_branches *b;
    work *w;
    int main_count;  /* run-stream units queued */
    int forked_main; /* main_count at the last fork, -1: no fork yet */
    int fork_node;   /* node index of the last run-stream unit before the last fork */
    int last_main_node;
    int *main_pos; /* per unit: its position on the run stream */
    double tm, ts; /* estimated finish times of the two streams */
} sim;

static void push_step(sim *s, int kind, int side, int u)
{
    s->b->steps[s->b->n_steps++] = (step){kind, side, u};
}

static void mark_queued(sim *s, int u)
{
    work *w = s->w;
    w->queued[u] = 1;
    for (int j = u + 1; j < w->n; j++)
        if (w->dep[(size_t)j * w->n + u] && --w->remaining[j] == 0 && s->b->units[j].side)
            w->pending[w->n_pending++] = j;
}

static void remove_pending(work *w, int u)
{
    for (int i = 0; i < w->n_pending; i++)
        if (w->pending[i] == u) {
            memmove(&w->pending[i], &w->pending[i + 1],
                    (size_t)(w->n_pending - i - 1) * sizeof(int));
            w->n_pending--;
            return;
        }
}

/* Queues side unit @p u (its side predecessors first). */
static void force(sim *s, int u)
{
    work *w = s->w;
    unit *units = s->b->units;
    if (w->queued[u])
        return;
    for (int i = 0; i < u; i++)
        if (w->dep[(size_t)u * w->n + i] && units[i].side && !w->queued[i])
            force(s, i);
    int need_fork = s->forked_main < 0;
    for (int i = 0; i < u && !need_fork; i++)
        if (w->dep[(size_t)u * w->n + i] && !units[i].side && s->main_pos[i] >= s->forked_main)
            need_fork = 1;
    if (need_fork) {
        push_step(s, STEP_FORK, 0, -1);
        s->b->n_forks++;
        s->forked_main = s->main_count;
        s->fork_node = s->last_main_node;
    }
    units[u].fork_at = s->fork_node;
    push_step(s, STEP_UNIT, 1, u);
    s->ts = (s->ts > s->tm ? s->ts : s->tm) + units[u].cost;
    remove_pending(w, u);
    mark_queued(s, u);
}

static void join_all(sim *s, int node)
{
    work *w = s->w;
    int any = 0;
    for (int i = 0; i < w->n; i++)
        if (w->queued[i] && s->b->units[i].side && !w->joined[i]) {
            w->joined[i] = 1;
            s->b->units[i].join_at = node;
            any = 1;
        }
    if (!any)
        return;
    push_step(s, STEP_JOIN, 0, -1);
    s->b->n_joins++;
    s->tm = s->tm > s->ts ? s->tm : s->ts;
}

/* The next run-stream unit after @p u that waits for a side unit not yet joined; n: none. */
static int next_join(const sim *s, int u)
{
    const work *w = s->w;
    const unit *units = s->b->units;
    for (int j = u + 1; j < w->n; j++) {
        if (units[j].side)
            continue;
        for (int k = w->sp_start[j]; k < w->sp_start[j + 1]; k++)
            if (!w->joined[w->sp[k]])
                return j;
    }
    return w->n;
}

/* After run-stream unit @p u: queues the ready side units that need no deferring. */
static void flush(sim *s, int u)
{
    work *w = s->w;
    const unit *units = s->b->units;
    int J = next_join(s, u);
    double before = 0; /* run-stream work before that join */
    for (int j = u + 1; j < J; j++)
        if (!units[j].side)
            before += units[j].cost;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int i = 0; i < w->n_pending; i++) {
            int v = w->pending[i];
            double end = (s->ts > s->tm ? s->ts : s->tm) + units[v].cost;
            if (w->need[v] <= J || J == w->n || end <= s->tm + before) {
                force(s, v);
                progress = 1;
                break;
            }
        }
    }
}

static keyer_status schedule(kr_cuda_branches *b, work *w, keyer_error *err)
{
    const kr_graph *g = b->graph;
    int n = w->n;
    sim s = {.b = b, .w = w, .forked_main = -1, .fork_node = -1, .last_main_node = -1};
    s.main_pos = malloc((size_t)n * sizeof(int));
    b->steps = malloc((size_t)(3 * n + 2) * sizeof(step));
    if (!s.main_pos || !b->steps) {
        free(s.main_pos);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    }
    for (int u = 0; u < n; u++) {
        s.main_pos[u] = -1;
        w->remaining[u] = 0;
        for (int i = 0; i < u; i++)
            w->remaining[u] += w->dep[(size_t)u * n + i];
    }
    for (int u = 0; u < n; u++) /* side units ready from the start */
        if (b->units[u].side && w->remaining[u] == 0)
            w->pending[w->n_pending++] = u;
    flush(&s, -1);
    for (int u = 0; u < n; u++) {
        unit *x = &b->units[u];
        if (x->side)
            continue;
        int waits = 0;
        for (int i = 0; i < u; i++)
            if (w->dep[(size_t)u * n + i] && b->units[i].side && !w->joined[i]) {
                force(&s, i);
                waits = 1;
            }
        if (waits) {
            join_all(&s, x->node);
            /* the side units held back so as not to delay this join: forked now, beside u
             * (u2netp: d1's sigmoid beside the fuse layer, not after it) */
            flush(&s, u - 1);
        }
        push_step(&s, STEP_UNIT, 0, u);
        s.main_pos[u] = s.main_count++;
        s.last_main_node = x->node;
        s.tm += x->cost;
        mark_queued(&s, u);
        flush(&s, u);
    }
    for (int u = 0; u < n; u++)
        if (b->units[u].side)
            force(&s, u);
    join_all(&s, g->n_nodes);
    free(s.main_pos);
    return KEYER_OK;
}

/* Longest paths (costs) into and out of every unit; the side units are those off the longest. */
static int mark_side(kr_cuda_branches *b, work *w)
{
    int n = w->n;
    unit *units = b->units;
    double longest = 0;
    for (int j = 0; j < n; j++) {
        w->head[j] = 0;
        for (int i = 0; i < j; i++)
            if (w->dep[(size_t)j * n + i] && w->head[i] + units[i].cost > w->head[j])
                w->head[j] = w->head[i] + units[i].cost;
    }
    for (int i = n - 1; i >= 0; i--) {
        double t = 0;
        for (int j = i + 1; j < n; j++)
            if (w->dep[(size_t)j * n + i] && w->tail[j] > t)
                t = w->tail[j];
        w->tail[i] = units[i].cost + t;
        if (w->head[i] + w->tail[i] > longest)
            longest = w->head[i] + w->tail[i];
    }
    int side = 0;
    for (int i = 0; i < n; i++) {
        units[i].side = w->head[i] + w->tail[i] < longest - 1e-6;
        side += units[i].side;
    }
    for (int i = n - 1; i >= 0; i--) {
        w->need[i] = n;
        for (int j = i + 1; j < n; j++)
            if (w->dep[(size_t)j * n + i]) {
                int k = units[j].side ? w->need[j] : j;
                w->need[i] = k < w->need[i] ? k : w->need[i];
            }
    }
    return side;
}

/* Unit j reads what unit i wrote last before it (the data flows from i to j). */
static int flows(const unit *units, int i, int j)
{
    for (int r = 0; r < units[j].n_rd; r++) {
        if (!overlap(units[i].wr, units[j].rd[r]))
            continue;
        int last = 1; /* no unit between them writes over the bytes */
        for (int k = i + 1; k < j && last; k++)
            if (overlap(units[k].wr, units[j].rd[r]))
                last = 0;
        if (last)
            return 1;
    }
    return 0;
}

/* kr_cuda_branches_plan; with @p flow, the dependencies are the data's flow alone (no reuse of
 * memory between tensors: the order the windows are derived from, kr_cuda_branches_windows,
 * never run). */
static keyer_status plan(const kr_cuda_mem *mem, size_t arena_bytes, float *const *io,
                         const kr_cuda_op *ops, const unsigned char *folded, int flow,
                         kr_cuda_branches **out, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    *out = NULL;
    layout l = {
        mem, (uintptr_t)mem->arena, (uintptr_t)mem->arena + arena_bytes, io, folded, NULL, NULL, 0};
    int f16 = mem->esize == 2;
    work w = {0};
    keyer_status st = KEYER_OK;
    kr_cuda_branches *b = calloc(1, sizeof(*b));
    int cap = g->n_nodes + g->n_outputs + 1;
    l.mark = calloc((size_t)cap, 1);
    l.nodes = malloc((size_t)cap * sizeof(int));
    if (!b || !(b->units = calloc((size_t)cap, sizeof(unit))) || !l.mark || !l.nodes)
        goto oom;
    b->graph = g;
    /* the units in serial order: every fused node, each output's conversion after the last
     * node writing it */
    unit *nodes = malloc((size_t)(g->n_nodes + 1) * sizeof(unit));
    unit *outs = calloc((size_t)(g->n_outputs + 1), sizeof(unit));
    int *last_writer = malloc((size_t)(g->n_outputs + 1) * sizeof(int));
    if (!nodes || !outs || !last_writer) {
        free(nodes);
        free(outs);
        free(last_writer);
        goto oom;
    }
    for (int n = 0; n < g->n_nodes; n++)
        if (!folded[n])
            node_unit(&l, &ops[n], n, &nodes[n]);
    for (int i = 0; i < g->n_outputs; i++) {
        int t = g->outputs[i];
        last_writer[i] = -2; /* no conversion */
        if (!f16 || g->tensors[t].dtype != KR_DTYPE_F32 || !io || !io[t] ||
            kr_cuda_pernode_output_bound(mem, io, ops, folded, i))
            continue; /* (no conversion: a layer writes the float output itself) */
        unit *u = &outs[i];
        u->output = i;
        uintptr_t a = (uintptr_t)kr_cuda_mem_ptr(mem, t);
        add_read(u, (range){a, a + kr_cuda_mem_bytes(mem, t)});
        u->wr = range_of(&l, io[t]);
        u->cost = 1.0 + 3.0 * (double)kr_tensor_bytes(&g->tensors[t], mem->batch) / 2 / COST_BYTES;
        last_writer[i] = -1;
        for (int n = 0; n < g->n_nodes; n++)
            for (int r = 0; !folded[n] && r < u->n_rd; r++)
                if (overlap(nodes[n].wr, u->rd[r]))
                    last_writer[i] = n;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (last_writer[i] == -1) {
            outs[i].node = -1;
            b->units[b->n_units++] = outs[i];
        }
    for (int n = 0; n < g->n_nodes; n++) {
        if (folded[n])
            continue;
        b->units[b->n_units++] = nodes[n];
        for (int i = 0; i < g->n_outputs; i++)
            if (last_writer[i] == n) {
                outs[i].node = n;
                b->units[b->n_units++] = outs[i];
            }
    }
    free(nodes);
    free(outs);
    free(last_writer);

    int n = b->n_units;
    w.n = n;
    size_t nn = (size_t)n * (size_t)n;
    w.dep = calloc(nn ? nn : 1, 1);
    w.head = malloc((size_t)(n + 1) * sizeof(double));
    w.tail = malloc((size_t)(n + 1) * sizeof(double));
    w.need = malloc((size_t)(n + 1) * sizeof(int));
    w.remaining = malloc((size_t)(n + 1) * sizeof(int));
    w.queued = calloc((size_t)(n + 1), sizeof(int));
    w.joined = calloc((size_t)(n + 1), sizeof(int));
    w.pending = malloc((size_t)(n + 1) * sizeof(int));
    if (!w.dep || !w.head || !w.tail || !w.need || !w.remaining || !w.queued || !w.joined ||
        !w.pending)
        goto oom;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < j; i++)
            w.dep[(size_t)j * n + i] = (unsigned char)(flow ? flows(b->units, i, j)
                                                            : hazard(&b->units[i], &b->units[j]));
    free(l.mark);
    free(l.nodes);
    l.mark = NULL;
    l.nodes = NULL;
    b->n_side = mark_side(b, &w);
    if (b->n_side) { /* side predecessors, for next_join */
        size_t m = 0;
        for (size_t k = 0; k < nn; k++)
            m += w.dep[k] && b->units[k % (size_t)n].side;
        w.sp_start = malloc((size_t)(n + 1) * sizeof(int));
        w.sp = malloc((m + 1) * sizeof(int));
        if (!w.sp_start || !w.sp)
            goto oom;
        m = 0;
        for (int j = 0; j < n; j++) {
            w.sp_start[j] = (int)m;
            for (int i = 0; i < j; i++)
                if (w.dep[(size_t)j * n + i] && b->units[i].side)
                    w.sp[m++] = i;
        }
        w.sp_start[n] = (int)m;
    }
    if (!b->n_side) {
        work_free(&w);
        kr_cuda_branches_destroy(&b);
        return KEYER_OK;
    }
    st = schedule(b, &w, err);
    work_free(&w);
    if (st) {
        kr_cuda_branches_destroy(&b);
        return st;
    }
    *out = b;
    return KEYER_OK;
oom:
    free(l.mark);
    free(l.nodes);
    work_free(&w);
    kr_cuda_branches_destroy(&b);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
}

keyer_status kr_cuda_branches_plan(const kr_cuda_mem *mem, size_t arena_bytes, float *const *io,
                                   const kr_cuda_op *ops, const unsigned char *folded,
                                   kr_cuda_branches **out, keyer_error *err)
{
    return plan(mem, arena_bytes, io, ops, folded, 0, out, err);
}

keyer_status kr_cuda_branches_prepare(kr_cuda_branches *b, keyer_error *err)
{
    cudaError_t e = cudaSuccess;
    if (!b->side)
        e = cudaStreamCreateWithFlags(&b->side, cudaStreamNonBlocking);
    if (e == cudaSuccess && !b->fork)
        e = cudaEventCreateWithFlags(&b->fork, cudaEventDisableTiming);
    if (e == cudaSuccess && !b->join)
        e = cudaEventCreateWithFlags(&b->join, cudaEventDisableTiming);
    return e == cudaSuccess ? KEYER_OK
                            : kr_cuda_fail(err, b->graph, "creating the second stream", e);
}

void kr_cuda_branches_counts(const kr_cuda_branches *b, int *side, int *forks, int *joins)
{
    *side = b ? b->n_side : 0;
    *forks = b ? b->n_forks : 0;
    *joins = b ? b->n_joins : 0;
}

static void widen(int t, int from, int to, int *live_from, int *live_to)
{
    if (t < 0)
        return;
    if (live_from[t] > live_to[t]) {
        live_from[t] = from;
        live_to[t] = to;
        return;
    }
    live_from[t] = from < live_from[t] ? from : live_from[t];
    live_to[t] = to > live_to[t] ? to : live_to[t];
}

static void widen_node(const kr_graph *g, int n, int from, int to, int *live_from, int *live_to)
{
    const kr_node *x = &g->nodes[n];
    for (int i = 0; i < x->n_inputs; i++)
        widen(x->inputs[i], from, to, live_from, live_to);
    for (int o = 0; o < x->n_outputs; o++)
        widen(x->outputs[o], from, to, live_from, live_to);
}

keyer_status kr_cuda_branches_windows(const kr_cuda_mem *mem, size_t arena_bytes, float *const *io,
                                      const kr_cuda_op *ops, const unsigned char *folded,
                                      int *live_from, int *live_to, int *any, keyer_error *err)
{
    const kr_graph *g = mem->graph;
    kr_cuda_branches *b = NULL;
    *any = 0;
    keyer_status st = plan(mem, arena_bytes, io, ops, folded, 1, &b, err);
    if (st || !b)
        return st;
    *any = 1;
    for (int t = 0; t < g->n_tensors; t++) {
        live_from[t] = 1;
        live_to[t] = 0;
    }
    for (int u = 0; u < b->n_units; u++) {
        const unit *x = &b->units[u];
        if (!x->side)
            continue;
        int from = x->fork_at, to = x->join_at;
        if (x->output >= 0) {
            widen(g->outputs[x->output], from, to, live_from, live_to);
            continue;
        }
        widen_node(g, x->node, from, to, live_from, live_to);
        for (int m = x->node + 1; m < g->n_nodes && folded[m]; m++)
            widen_node(g, m, from, to, live_from, live_to);
        for (int m = x->node - 1; m >= 0 && folded[m]; m--)
            widen_node(g, m, from, to, live_from, live_to);
    }
    for (int t = 0; t < g->n_tensors; t++) /* constants have no place in the arena */
        if (kr_tensor_is_const(&g->tensors[t])) {
            live_from[t] = 1;
            live_to[t] = 0;
        }
    kr_cuda_branches_destroy(&b);
    return KEYER_OK;
}

int kr_cuda_branches_steps(const kr_cuda_branches *b) { return b->n_steps; }

void kr_cuda_branches_step(const kr_cuda_branches *b, int i, int *kind, int *side, int *node)
{
    const step *s = &b->steps[i];
    *kind = s->kind;
    *side = s->side;
    *node = -1;
    if (s->kind == STEP_UNIT) {
        const unit *u = &b->units[s->unit];
        *node = u->output >= 0 ? -1 - u->output : u->node;
    }
}

keyer_status kr_cuda_branches_enqueue(kr_cuda_branches *b, const kr_cuda_mem *mem, int f16,
                                      float *const *io, kr_cuda_op *ops,
                                      const unsigned char *folded, cudaStream_t stream, int check,
                                      keyer_error *err)
{
    const kr_graph *g = mem->graph;
    keyer_status st;
    if (f16 && (st = kr_cuda_pernode_inputs_to_half(mem, io, ops, folded, stream, err)))
        return st;
    for (int i = 0; i < b->n_steps; i++) {
        const step *s = &b->steps[i];
        cudaError_t e = cudaSuccess;
        if (s->kind == STEP_FORK && !check) {
            e = cudaEventRecord(b->fork, stream);
            if (e == cudaSuccess)
                e = cudaStreamWaitEvent(b->side, b->fork, 0);
            if (e != cudaSuccess)
                return kr_cuda_fail(err, g, "forking the second stream", e);
        } else if (s->kind == STEP_JOIN && !check) {
            e = cudaEventRecord(b->join, b->side);
            if (e == cudaSuccess)
                e = cudaStreamWaitEvent(stream, b->join, 0);
            if (e != cudaSuccess)
                return kr_cuda_fail(err, g, "joining the second stream", e);
        } else if (s->kind == STEP_UNIT) {
            const unit *u = &b->units[s->unit];
            cudaStream_t on = s->side && !check ? b->side : stream;
            if (u->output < 0)
                st = kr_cuda_pernode_launch(g, u->node, &ops[u->node], on, check, err);
            else
                st = kr_cuda_pernode_output_to_float(mem, io, u->output, on, check, err);
            if (st)
                return st;
        }
    }
    return KEYER_OK;
}

void kr_cuda_branches_destroy(kr_cuda_branches **pb)
{
    if (!pb || !*pb)
        return;
    kr_cuda_branches *b = *pb;
    if (b->side) {
        cudaStreamSynchronize(b->side);
        cudaStreamDestroy(b->side);
    }
    if (b->fork)
        cudaEventDestroy(b->fork);
    if (b->join)
        cudaEventDestroy(b->join);
    free(b->units);
    free(b->steps);
    free(b);
    *pb = NULL;
}
