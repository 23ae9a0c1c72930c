/*
 * kr_backend_cpu: partitions a graph into XNNPACK segments and reference-kernel segments, lays
 * out the arenas, binds every pointer once, and runs the segments in order. See nn/cpu/cpu.h
 * for the design.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pthreadpool.h>
#include <xnnpack.h>

#include "core/threadpool.h"
#include "keyer/alloc.h"
#include "keyer/log.h"
#include "nn/cpu/cpu.h"
#include "nn/cpu/kernels.h"
#include "nn/reference/ops.h"

#define ARENA_ALIGN 64

typedef struct segment {
    int first, last; /* inclusive node range */
    int xnn;         /* 1: XNNPACK runtime */
    xnn_runtime_t runtime;
    int n_ext;
    struct xnn_external_value *ext;
} segment;

/* One independent copy of the graph over images [batch_offset, batch_offset + batch). */
typedef struct lane {
    int batch, batch_offset;
    int n_segments;
    segment *segments;
    size_t *offsets;             /* per tensor: offset in arena, or SIZE_MAX */
    unsigned char *arena;        /* boundary tensors and reference-node tensors */
    size_t arena_bytes;
    size_t xnn_workspace_bytes;  /* estimate of the XNNPACK runtimes' activation memory */
    float *storage;              /* static data made here (zero biases, repacked weights) */
    size_t storage_floats;
    kr_op_ctx *ctx;              /* per node; filled for reference nodes */
    kr_cpu_kernel **kern;        /* per node: the CPU kernel running it (nn/cpu/kernels.h), or
                                  * NULL (XNNPACK or the reference kernel) */
    keyer_status status;         /* result of the lane's last run */
    keyer_error err;
} lane;

struct kr_backend_instance {
    const kr_graph *g;
    int batch;
    const keyer_logger *logger;
    kr_cpu_options opt;
    pthreadpool_t pool; /* NULL: one thread. One lane: XNNPACK's pool; more: runs the lanes */
    int threads;

    int n_lanes;
    lane *lanes;

    unsigned char *use_xnn; /* per node: 1 if it goes to XNNPACK */
    kr_cpu_node_plan *plan; /* per node: CPU kernel, fused neighbours (kernels.h) */
    int *mark;              /* per tensor: scratch for create */
    uint32_t *ids;          /* per tensor: scratch for create */

    size_t *io_offsets;     /* per tensor: offset in io (graph inputs and outputs), or SIZE_MAX */
    unsigned char *io;      /* graph inputs and outputs for the whole batch */
    size_t io_bytes;
};

static const char *xnn_status_text(enum xnn_status s)
{
    switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "XNNPACK not initialised";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
    }
    return "unknown XNNPACK status";
}

static keyer_status xnn_to_keyer(enum xnn_status s)
{
    switch (s) {
    case xnn_status_success: return KEYER_OK;
    case xnn_status_out_of_memory: return KEYER_STATUS_OUT_OF_MEMORY;
    case xnn_status_unsupported_hardware:
    case xnn_status_unsupported_parameter: return KEYER_STATUS_UNSUPPORTED;
    default: return KEYER_STATUS_INTERNAL;
    }
}

/* A rejection XNNPACK may give for a node it cannot run: move the node to the reference. */
static int is_rejection(enum xnn_status s)
{
    return s == xnn_status_invalid_parameter || s == xnn_status_unsupported_parameter ||
           s == xnn_status_invalid_state;
}

static const char *graph_name(const kr_graph *g)
{
    return g->name ? g->name : "model";
}

/* ---- arena packing ------------------------------------------------------------------------ */

typedef struct pack_item {
    int tensor;
    size_t size;
    int first, last; /* inclusive lifetime */
    size_t offset;
} pack_item;

static int cmp_size_desc(const void *a, const void *b)
{
    const pack_item *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->tensor - y->tensor;
}

static size_t align_up(size_t v)
{
    return (v + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

/* Greedy by size over live intervals: each item goes to the lowest offset where it overlaps
 * no placed item alive at the same time. Returns the total size. Sorts @p items. */
static size_t pack(pack_item *items, int n)
{
    size_t total = 0;
    qsort(items, (size_t)n, sizeof(*items), cmp_size_desc);
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int j = 0; j < i; j++) {
                if (items[j].last < items[i].first || items[i].last < items[j].first)
                    continue;
                if (off < items[j].offset + items[j].size && items[j].offset < off + items[i].size) {
                    off = items[j].offset + items[j].size;
                    moved = 1;
                }
            }
        }
        items[i].offset = off;
        if (off + items[i].size > total)
            total = off + items[i].size;
    }
    return total;
}

/* ---- storage of one tensor in one lane ----------------------------------------------------- */

static void *lane_ptr(const kr_backend_instance *inst, const lane *ln, int t)
{
    if (inst->io_offsets[t] != SIZE_MAX)
        return inst->io + inst->io_offsets[t] +
               (size_t)ln->batch_offset * kr_tensor_bytes(&inst->g->tensors[t], 1);
    if (ln->offsets[t] != SIZE_MAX)
        return ln->arena + ln->offsets[t];
    return NULL;
}

/* Whether tensor @p t crosses the boundary of node range [a, b]: an input produced before a, or
 * an output read after b or leaving the graph. */
static int crosses_in(const kr_tensor *t, int a)
{
    return !kr_tensor_is_const(t) && t->producer < a;
}

static int crosses_out(const kr_tensor *t, int b)
{
    return t->graph_output >= 0 || t->last_consumer > b;
}

/* ---- partition --------------------------------------------------------------------------- */

static void release_lane(lane *ln)
{
    for (int s = 0; s < ln->n_segments; s++) {
        if (ln->segments[s].runtime)
            xnn_delete_runtime(ln->segments[s].runtime);
        free(ln->segments[s].ext);
    }
    free(ln->segments);
    ln->segments = NULL;
    ln->n_segments = 0;
    keyer_free(NULL, ln->arena);
    ln->arena = NULL;
    ln->arena_bytes = 0;
    ln->xnn_workspace_bytes = 0;
    free(ln->storage);
    ln->storage = NULL;
    ln->storage_floats = 0;
}

static keyer_status partition(kr_backend_instance *inst, lane *ln, keyer_error *err)
{
    const kr_graph *g = inst->g;
    int n = 0;
    ln->segments = calloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1), sizeof(segment));
    if (!ln->segments)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "cpu backend: %s: no memory",
                               graph_name(g));
    for (int i = 0; i < g->n_nodes; i++) {
        int x = inst->use_xnn[i];
        if (n == 0 || ln->segments[n - 1].xnn != x || inst->opt.node_per_segment) {
            ln->segments[n].first = i;
            ln->segments[n].xnn = x;
            n++;
        }
        ln->segments[n - 1].last = i;
    }
    ln->n_segments = n;

    /* Static storage: enough for every XNNPACK node, twice (single-node probes after a failed
     * runtime creation define a segment's nodes once more). */
    size_t floats = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (inst->use_xnn[i])
            floats += 2 * kr_cpu_xnn_storage_needed(g, &g->nodes[i]);
    ln->storage = calloc(floats, sizeof(float));
    if (!ln->storage)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "cpu backend: %s: no memory",
                               graph_name(g));
    ln->storage_floats = floats;
    return KEYER_OK;
}

/* Lays out the lane's arena: tensors other than graph inputs/outputs needing host storage, with
 * their segment lifetimes. Also estimates the XNNPACK workspaces by packing their internal
 * tensors the same way (over node lifetimes). */
static keyer_status plan_arena(kr_backend_instance *inst, lane *ln, keyer_error *err)
{
    const kr_graph *g = inst->g;
    keyer_status st = KEYER_OK;
    size_t nt = (size_t)(g->n_tensors > 0 ? g->n_tensors : 1);
    pack_item *items = calloc(nt, sizeof(*items));
    int *first = malloc(sizeof(int) * nt), *last = malloc(sizeof(int) * nt);
    if (!items || !first || !last) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "cpu backend: no memory");
        goto done;
    }
    for (int t = 0; t < g->n_tensors; t++) {
        ln->offsets[t] = SIZE_MAX;
        first[t] = ln->n_segments;
        last[t] = -1;
        inst->mark[t] = 0; /* 1: needs arena storage */
    }
    for (int s = 0; s < ln->n_segments; s++) {
        const segment *seg = &ln->segments[s];
        for (int ni = seg->first; ni <= seg->last; ni++) {
            const kr_node *node = &g->nodes[ni];
            for (int k = 0; k < node->n_inputs + node->n_outputs; k++) {
                int is_in = k < node->n_inputs;
                int t = is_in ? node->inputs[k] : node->outputs[k - node->n_inputs];
                if (t < 0 || kr_tensor_is_const(&g->tensors[t]) ||
                    inst->io_offsets[t] != SIZE_MAX)
                    continue;
                if (seg->xnn && !(is_in ? crosses_in(&g->tensors[t], seg->first)
                                        : crosses_out(&g->tensors[t], seg->last)))
                    continue;
                inst->mark[t] = 1;
                if (first[t] > s)
                    first[t] = s;
                if (last[t] < s)
                    last[t] = s;
            }
        }
    }
    int n_items = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        if (!inst->mark[t])
            continue;
        items[n_items].tensor = t;
        items[n_items].size = align_up(kr_tensor_bytes(&g->tensors[t], ln->batch));
        items[n_items].first = first[t];
        items[n_items].last = last[t];
        n_items++;
    }
    ln->arena_bytes = pack(items, n_items);
    for (int i = 0; i < n_items; i++)
        ln->offsets[items[i].tensor] = items[i].offset;
    ln->arena = keyer_calloc(NULL, ln->arena_bytes ? ln->arena_bytes : ARENA_ALIGN, ARENA_ALIGN);
    if (!ln->arena) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                             "cpu backend: %s: cannot allocate the %zu-byte arena", graph_name(g),
                             ln->arena_bytes);
        goto done;
    }

    for (int s = 0; s < ln->n_segments; s++) {
        const segment *seg = &ln->segments[s];
        if (!seg->xnn)
            continue;
        n_items = 0;
        for (int ni = seg->first; ni <= seg->last; ni++) {
            int t = g->nodes[ni].outputs[0];
            if (inst->mark[t] || inst->io_offsets[t] != SIZE_MAX)
                continue;
            items[n_items].tensor = t;
            items[n_items].size = align_up(kr_tensor_bytes(&g->tensors[t], ln->batch));
            items[n_items].first = ni;
            items[n_items].last = g->tensors[t].last_consumer;
            n_items++;
        }
        ln->xnn_workspace_bytes += pack(items, n_items);
    }
done:
    free(items);
    free(first);
    free(last);
    return st;
}

/* ---- XNNPACK subgraphs --------------------------------------------------------------------- */

/* Marks the external values of node range [a, b] in inst->mark (bit 0: input, bit 1: output,
 * bits 2+: id + 1) and returns their number. */
static int mark_externals(kr_backend_instance *inst, int a, int b)
{
    const kr_graph *g = inst->g;
    int n = 0;
    for (int t = 0; t < g->n_tensors; t++)
        inst->mark[t] = 0;
    for (int ni = a; ni <= b; ni++) {
        const kr_node *node = &g->nodes[ni];
        for (int k = 0; k < node->n_inputs; k++) {
            int t = node->inputs[k];
            if (t >= 0 && !inst->mark[t] && crosses_in(&g->tensors[t], a))
                inst->mark[t] = 1 | 4 * (++n);
        }
        for (int k = 0; k < node->n_outputs; k++) {
            int t = node->outputs[k];
            if (!inst->mark[t] && crosses_out(&g->tensors[t], b))
                inst->mark[t] = 2 | 4 * (++n);
        }
    }
    return n;
}

/*
 * Builds the subgraph of node range [a, b] of lane @p ln and, with @p runtime non-NULL, its
 * runtime; @p ext receives the external values and their pointers, or is NULL for a probe (a
 * single node built only to see whether XNNPACK accepts it).
 * On a node-definition failure *bad_node is the node. Returns the XNNPACK status.
 */
static enum xnn_status build_subgraph(kr_backend_instance *inst, lane *ln, int a, int b,
                                      uint32_t flags, struct xnn_external_value *ext,
                                      xnn_runtime_t *runtime, int *bad_node)
{
    const kr_graph *g = inst->g;
    xnn_subgraph_t sg = NULL;
    int n = mark_externals(inst, a, b);
    enum xnn_status s = xnn_create_subgraph((uint32_t)n, 0, &sg);
    if (s != xnn_status_success)
        return s;
    for (int t = 0; t < g->n_tensors; t++)
        inst->ids[t] = XNN_INVALID_VALUE_ID;
    kr_cpu_xnn_builder bld = {
        .g = g,
        .batch = ln->batch,
        .subgraph = sg,
        .ids = inst->ids,
        .storage = ln->storage,
        .capacity = ln->storage_floats,
        .used = 0,
    };
    /* Storage already handed to earlier segments' runtimes stays theirs. */
    for (int si = 0; si < ln->n_segments && ln->segments[si].first < a; si++)
        if (ln->segments[si].xnn)
            for (int ni = ln->segments[si].first; ni <= ln->segments[si].last; ni++)
                bld.used += kr_cpu_xnn_storage_needed(g, &g->nodes[ni]);
    if (!ext) /* a single-node probe: the spare half */
        bld.used = ln->storage_floats / 2;
    for (int t = 0; s == xnn_status_success && t < g->n_tensors; t++) {
        if (!inst->mark[t])
            continue;
        uint32_t id = (uint32_t)(inst->mark[t] / 4 - 1);
        uint32_t vflags =
            (inst->mark[t] & 1) ? XNN_VALUE_FLAG_EXTERNAL_INPUT : XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
        s = (enum xnn_status)kr_cpu_xnn_define_activation(&bld, t, id, vflags);
        if (ext) {
            ext[id].id = id;
            ext[id].data = lane_ptr(inst, ln, t);
        }
    }
    for (int ni = a; s == xnn_status_success && ni <= b; ni++) {
        s = (enum xnn_status)kr_cpu_xnn_define_node(&bld, &g->nodes[ni]);
        if (inst->opt.test_reject_define == ni + 1)
            s = xnn_status_invalid_parameter;
        if (s != xnn_status_success)
            *bad_node = ni;
    }
    int reject = inst->opt.test_reject_runtime - 1;
    if (s == xnn_status_success && runtime)
        s = reject >= a && reject <= b
                ? xnn_status_unsupported_parameter
                : xnn_create_runtime_v2(sg, inst->n_lanes == 1 ? inst->pool : NULL, flags,
                                        runtime);
    xnn_delete_subgraph(sg);
    return s;
}

/* Moves node @p ni to the reference kernels, with a warning. */
static void demote(kr_backend_instance *inst, int ni, enum xnn_status s)
{
    const kr_node *node = &inst->g->nodes[ni];
    inst->use_xnn[ni] = 0;
    keyer_log(inst->logger, KEYER_LOG_WARNING,
              "cpu backend: %s: node %d (%s, operator %d in the file): XNNPACK rejected it (%s); "
              "using the reference kernel",
              graph_name(inst->g), ni, kr_op_name(node->op), node->source_index,
              xnn_status_text(s));
}

/* Builds and binds every XNNPACK segment of a lane. *retry is set when a node was moved to the
 * reference kernels (the partition must then be rebuilt). */
static keyer_status build_runtimes(kr_backend_instance *inst, lane *ln, int *retry,
                                   keyer_error *err)
{
    const kr_graph *g = inst->g;
    *retry = 0;
    for (int si = 0; si < ln->n_segments; si++) {
        segment *seg = &ln->segments[si];
        if (!seg->xnn)
            continue;
        seg->n_ext = mark_externals(inst, seg->first, seg->last);
        seg->ext = calloc((size_t)(seg->n_ext > 0 ? seg->n_ext : 1), sizeof(*seg->ext));
        if (!seg->ext)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "cpu backend: no memory");
        /* The pool's workers sleep after each runtime instead of spinning: between runtimes
         * the CPU kernels or reference nodes run, and the CPU is shared with the rest of the
         * pipeline. Spinning workers there cost more than waking them: on a busy 2-core
         * machine u2netp with 2 threads took twice the wall and CPU time with spinning
         * workers (one runtime per segment, over 100 segments). */
        uint32_t flags = XNN_FLAG_YIELD_WORKERS;
        int bad = -1;
        enum xnn_status s =
            build_subgraph(inst, ln, seg->first, seg->last, flags, seg->ext, &seg->runtime, &bad);
        if (s == xnn_status_success) {
            s = xnn_setup_runtime(seg->runtime, (size_t)seg->n_ext, seg->ext);
            if (s != xnn_status_success)
                return keyer_error_set(err, xnn_to_keyer(s),
                                       "cpu backend: %s: binding nodes %d..%d failed: %s",
                                       graph_name(g), seg->first, seg->last, xnn_status_text(s));
            continue;
        }
        if (!is_rejection(s))
            return keyer_error_set(err, xnn_to_keyer(s),
                                   "cpu backend: %s: XNNPACK failed for nodes %d..%d: %s",
                                   graph_name(g), seg->first, seg->last, xnn_status_text(s));
        if (bad >= 0) {
            demote(inst, bad, s);
        } else {
            /* Creating the runtime (its operators) failed: find the nodes XNNPACK rejects alone. */
            int found = 0;
            for (int ni = seg->first; ni <= seg->last; ni++) {
                xnn_runtime_t probe = NULL;
                int bad_probe = -1;
                enum xnn_status ps = build_subgraph(inst, ln, ni, ni, 0, NULL, &probe, &bad_probe);
                if (probe)
                    xnn_delete_runtime(probe);
                if (ps == xnn_status_out_of_memory)
                    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                           "cpu backend: %s: XNNPACK out of memory",
                                           graph_name(g));
                if (ps != xnn_status_success) {
                    demote(inst, ni, ps);
                    found = 1;
                }
            }
            if (!found)
                for (int ni = seg->first; ni <= seg->last; ni++)
                    demote(inst, ni, s);
        }
        *retry = 1;
        return KEYER_OK;
    }
    return KEYER_OK;
}

static void bind_reference_nodes(kr_backend_instance *inst, lane *ln)
{
    const kr_graph *g = inst->g;
    for (int si = 0; si < ln->n_segments; si++) {
        const segment *seg = &ln->segments[si];
        if (seg->xnn)
            continue;
        for (int ni = seg->first; ni <= seg->last; ni++) {
            const kr_node *node = &g->nodes[ni];
            kr_op_ctx *c = &ln->ctx[ni];
            memset(c, 0, sizeof(*c));
            c->graph = g;
            c->node = node;
            c->batch = ln->batch;
            for (int k = 0; k < node->n_inputs; k++) {
                int t = node->inputs[k];
                if (t < 0)
                    c->in[k] = NULL;
                else if (kr_tensor_is_const(&g->tensors[t]))
                    c->in[k] = g->tensors[t].data;
                else
                    c->in[k] = lane_ptr(inst, ln, t);
            }
            for (int k = 0; k < node->n_outputs; k++)
                c->out[k] = lane_ptr(inst, ln, node->outputs[k]);
        }
    }
}

/* ---- checks before building --------------------------------------------------------------- */

/* Whether the backend can hold non-constant tensor @p t: float32, or the int32 class indices
 * an ARG_MAX writes (the reference kernel computes them; XNNPACK never sees them). */
static int activation_dtype_ok(const kr_graph *g, int t)
{
    const kr_tensor *tt = &g->tensors[t];
    if (kr_tensor_is_const(tt) || tt->dtype == KR_DTYPE_F32)
        return 1;
    return tt->dtype == KR_DTYPE_I32 && tt->producer >= 0 && tt->producer < g->n_nodes &&
           g->nodes[tt->producer].op == KR_OP_ARGMAX;
}

static keyer_status check_graph(const kr_graph *g, keyer_error *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *node = &g->nodes[i];
        if ((unsigned)node->op >= KR_OP_COUNT)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "cpu backend: %s: node %d (operator %d in the file): unknown "
                                   "operator code %d",
                                   graph_name(g), i, node->source_index, (int)node->op);
        if (node->n_outputs < 1 || node->n_outputs > KR_MAX_NODE_OUTPUTS ||
            node->n_inputs < 0 || node->n_inputs > KR_MAX_NODE_INPUTS)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "cpu backend: %s: node %d (%s): bad input/output counts",
                                   graph_name(g), i, kr_op_name(node->op));
        for (int k = 0; k < node->n_inputs + node->n_outputs; k++) {
            int t = k < node->n_inputs ? node->inputs[k] : node->outputs[k - node->n_inputs];
            if (t < 0 && k < node->n_inputs)
                continue;
            if (t < 0 || t >= g->n_tensors)
                return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                       "cpu backend: %s: node %d (%s): tensor index %d out of "
                                       "range",
                                       graph_name(g), i, kr_op_name(node->op), t);
            const kr_tensor *tt = &g->tensors[t];
            if (!activation_dtype_ok(g, t))
                return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                       "cpu backend: %s: node %d (%s, operator %d in the file): "
                                       "tensor '%s' is not float32; the CPU backend computes "
                                       "float32 activations (and ARG_MAX's int32) only",
                                       graph_name(g), i, kr_op_name(node->op),
                                       node->source_index, tt->name ? tt->name : "?");
        }
    }
    for (int i = 0; i < g->n_inputs + g->n_outputs; i++) {
        int t = i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs];
        if (t < 0 || t >= g->n_tensors)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "cpu backend: %s: graph input/output tensor %d out of range",
                                   graph_name(g), t);
        if (kr_tensor_is_const(&g->tensors[t]) || !activation_dtype_ok(g, t))
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "cpu backend: %s: graph input/output '%s' is a constant or not "
                                   "float32 (or an ARG_MAX's int32)",
                                   graph_name(g), g->tensors[t].name ? g->tensors[t].name : "?");
    }
    return KEYER_OK;
}

/* ---- the backend table ---------------------------------------------------------------------- */

static void cpu_destroy(kr_backend_instance **pinst)
{
    if (!pinst || !*pinst)
        return;
    kr_backend_instance *inst = *pinst;
    for (int l = 0; inst->lanes && l < inst->n_lanes; l++) {
        lane *ln = &inst->lanes[l];
        release_lane(ln);
        for (int i = 0; ln->kern && i < inst->g->n_nodes; i++)
            kr_cpu_kernel_destroy(&ln->kern[i]);
        free(ln->kern);
        free(ln->offsets);
        free(ln->ctx);
    }
    free(inst->lanes);
    if (inst->pool)
        pthreadpool_destroy(inst->pool);
    free(inst->use_xnn);
    free(inst->plan);
    free(inst->mark);
    free(inst->ids);
    free(inst->io_offsets);
    keyer_free(NULL, inst->io);
    free(inst);
    *pinst = NULL;
}

/* Places every graph input and output, for the whole batch, in the io block. */
static keyer_status plan_io(kr_backend_instance *inst, keyer_error *err)
{
    const kr_graph *g = inst->g;
    size_t off = 0;
    for (int t = 0; t < g->n_tensors; t++)
        inst->io_offsets[t] = SIZE_MAX;
    for (int i = 0; i < g->n_inputs + g->n_outputs; i++) {
        int t = i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs];
        if (inst->io_offsets[t] != SIZE_MAX)
            continue;
        inst->io_offsets[t] = off;
        off += align_up(kr_tensor_bytes(&g->tensors[t], inst->batch));
    }
    inst->io_bytes = off;
    inst->io = keyer_calloc(NULL, off ? off : ARENA_ALIGN, ARENA_ALIGN);
    if (!inst->io)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "cpu backend: %s: cannot allocate %zu bytes of inputs/outputs",
                               graph_name(g), off);
    return KEYER_OK;
}

keyer_status kr_cpu_create(const kr_graph *g, const kr_backend_config *cfg,
                           const kr_cpu_options *opt, kr_backend_instance **out, keyer_error *err)
{
    keyer_status st = KEYER_OK;
    kr_backend_instance *inst = NULL;
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "cpu backend: out is NULL");
    *out = NULL;
    if (!g || !cfg)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "cpu backend: graph or config is NULL");
    if (cfg->batch < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "cpu backend: %s: batch %d (must be >= 1)", graph_name(g),
                               cfg->batch);
    st = check_graph(g, err);
    if (st != KEYER_OK)
        return st;

    enum xnn_status xs = xnn_initialize(NULL);
    if (xs != xnn_status_success)
        return keyer_error_set(err, xnn_to_keyer(xs), "cpu backend: XNNPACK initialisation: %s",
                               xnn_status_text(xs));

    size_t nn = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    size_t nt = (size_t)(g->n_tensors > 0 ? g->n_tensors : 1);
    inst = calloc(1, sizeof(*inst));
    if (!inst)
        goto oom;
    inst->g = g;
    inst->batch = cfg->batch;
    inst->logger = cfg->logger;
    if (opt)
        inst->opt = *opt;
    inst->use_xnn = calloc(nn, 1);
    inst->plan = calloc(nn, sizeof(kr_cpu_node_plan));
    inst->mark = calloc(nt, sizeof(int));
    inst->ids = calloc(nt, sizeof(uint32_t));
    inst->io_offsets = calloc(nt, sizeof(size_t));
    if (!inst->use_xnn || !inst->plan || !inst->mark || !inst->ids || !inst->io_offsets)
        goto oom;
    kr_cpu_plan_nodes(g, !inst->opt.reference_only && !inst->opt.no_kernels,
                      !inst->opt.node_per_segment, inst->plan);
    for (int i = 0; i < g->n_nodes; i++)
        inst->use_xnn[i] = !inst->opt.reference_only && !inst->plan[i].kernel &&
                           !inst->plan[i].skip && kr_cpu_xnn_supports(g, &g->nodes[i]);
    st = plan_io(inst, err);
    if (st != KEYER_OK)
        goto fail;

    /* Threads: a batch of at least two images is split into lanes, one per thread, each
     * running its own single-threaded runtimes (no per-operator synchronisation); a single
     * image uses XNNPACK's per-operator parallelism. */
    inst->threads = 1;
    if (cfg->threads != 1) {
        /* 0: the CPUs this process may run on (kr_cpu_count: taskset, a cpuset), not
         * pthreadpool's own 0, every CPU of the machine: 32 workers confined to 2 cores of a
         * 32-core machine made the face models take a minute instead of a second. */
        inst->pool = pthreadpool_create((size_t)(cfg->threads > 0 ? cfg->threads
                                                                  : kr_cpu_count()));
        if (!inst->pool) {
            st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                 "cpu backend: cannot create a pool of %d threads", cfg->threads);
            goto fail;
        }
        inst->threads = (int)pthreadpool_get_threads_count(inst->pool);
        if (inst->threads <= 1) {
            pthreadpool_destroy(inst->pool);
            inst->pool = NULL;
            inst->threads = 1;
        }
    }
    inst->n_lanes = inst->batch >= 2 && inst->threads >= 2
                        ? (inst->batch < inst->threads ? inst->batch : inst->threads)
                        : 1;
    inst->lanes = calloc((size_t)inst->n_lanes, sizeof(lane));
    if (!inst->lanes)
        goto oom;
    for (int l = 0, offset = 0; l < inst->n_lanes; l++) {
        lane *ln = &inst->lanes[l];
        ln->batch = inst->batch / inst->n_lanes + (l < inst->batch % inst->n_lanes);
        ln->batch_offset = offset;
        offset += ln->batch;
        ln->offsets = calloc(nt, sizeof(size_t));
        ln->ctx = calloc(nn, sizeof(kr_op_ctx));
        ln->kern = calloc(nn, sizeof(kr_cpu_kernel *));
        if (!ln->offsets || !ln->ctx || !ln->kern)
            goto oom;
        /* A lane of its own (batch split) computes on one thread; one lane uses the pool. */
        for (int i = 0; i < g->n_nodes; i++)
            if (inst->plan[i].kernel && !inst->plan[i].skip) {
                kr_cpu_fusion fu;
                kr_cpu_fusion_of(g, &inst->plan[i], &fu);
                st = kr_cpu_kernel_create(g, &g->nodes[i], ln->batch,
                                          inst->n_lanes == 1 ? inst->threads : 1, &fu,
                                          &ln->kern[i], err);
                if (st != KEYER_OK)
                    goto fail;
            }
    }

    /* Every demotion moves one more node to the reference kernels, so this ends. */
    for (int attempt = 0;; attempt++) {
        int retry = 0;
        for (int l = 0; l < inst->n_lanes && !retry; l++) {
            lane *ln = &inst->lanes[l];
            st = partition(inst, ln, err);
            if (st == KEYER_OK)
                st = plan_arena(inst, ln, err);
            if (st == KEYER_OK)
                st = build_runtimes(inst, ln, &retry, err);
            if (st != KEYER_OK)
                goto fail;
        }
        if (!retry)
            break;
        for (int l = 0; l < inst->n_lanes; l++)
            release_lane(&inst->lanes[l]);
        if (attempt > g->n_nodes) {
            st = keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                 "cpu backend: %s: partitioning did not settle", graph_name(g));
            goto fail;
        }
    }
    for (int l = 0; l < inst->n_lanes; l++)
        bind_reference_nodes(inst, &inst->lanes[l]);
    *out = inst;
    return KEYER_OK;
oom:
    st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "cpu backend: %s: out of memory",
                         graph_name(g));
fail:
    cpu_destroy(&inst);
    return st;
}

static int cpu_supports_node(const kr_graph *g, const kr_node *node)
{
    /* Every operator runs: on XNNPACK where kr_cpu_xnn_supports() says so, else on the
     * reference kernels. Only float32 activations are computed. */
    if (!g || !node || (unsigned)node->op >= KR_OP_COUNT)
        return 0;
    for (int k = 0; k < node->n_inputs + node->n_outputs; k++) {
        int t = k < node->n_inputs ? node->inputs[k] : node->outputs[k - node->n_inputs];
        if (t < 0)
            continue;
        if (t >= g->n_tensors)
            return 0;
        const kr_tensor *tt = &g->tensors[t];
        int argmax_out = node->op == KR_OP_ARGMAX && k >= node->n_inputs;
        if (!kr_tensor_is_const(tt) && tt->dtype != KR_DTYPE_F32 &&
            !(argmax_out && tt->dtype == KR_DTYPE_I32))
            return 0;
    }
    return 1;
}

static keyer_status cpu_create(const kr_graph *g, const kr_plan *plan,
                               const kr_backend_config *cfg, kr_backend_instance **out,
                               keyer_error *err)
{
    (void)plan; /* the CPU backend plans only its boundary tensors; XNNPACK plans the rest */
    return kr_cpu_create(g, cfg, NULL, out, err);
}

static void *cpu_tensor_data(kr_backend_instance *inst, int tensor)
{
    if (!inst || tensor < 0 || tensor >= inst->g->n_tensors ||
        inst->io_offsets[tensor] == SIZE_MAX)
        return NULL;
    return inst->io + inst->io_offsets[tensor];
}

static keyer_status run_segment(kr_backend_instance *inst, lane *ln, const segment *seg,
                                keyer_error *err)
{
    if (seg->xnn) {
        enum xnn_status s = xnn_invoke_runtime(seg->runtime);
        if (s != xnn_status_success)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "cpu backend: %s: XNNPACK failed running nodes %d..%d: %s",
                                   graph_name(inst->g), seg->first, seg->last,
                                   xnn_status_text(s));
        return KEYER_OK;
    }
    /* Every tensor has its own storage here, so RESHAPE copies (kr_ref_reshape does). */
    pthreadpool_t pool = inst->n_lanes == 1 ? inst->pool : NULL;
    for (int ni = seg->first; ni <= seg->last; ni++) {
        const kr_cpu_node_plan *p = &inst->plan[ni];
        if (p->skip)
            continue;
        if (ln->kern[ni]) {
            kr_cpu_fused_io io = {.concat = p->concat >= 0 ? &ln->ctx[p->concat] : NULL};
            if (p->act >= 0)
                io.out = ln->ctx[p->act].out[0];
            if (p->add >= 0) {
                io.out = ln->ctx[p->add].out[0];
                io.residual = ln->ctx[p->add].in[p->add_other];
            }
            kr_cpu_kernel_run(ln->kern[ni], &ln->ctx[ni], &io, pool);
        } else
            kr_ref_ops[ln->ctx[ni].node->op](&ln->ctx[ni]);
    }
    return KEYER_OK;
}

static keyer_status run_lane(kr_backend_instance *inst, lane *ln, keyer_error *err)
{
    for (int s = 0; s < ln->n_segments; s++) {
        keyer_status st = run_segment(inst, ln, &ln->segments[s], err);
        if (st != KEYER_OK)
            return st;
    }
    return KEYER_OK;
}

static void lane_task(void *arg, size_t index)
{
    kr_backend_instance *inst = arg;
    lane *ln = &inst->lanes[index];
    ln->status = run_lane(inst, ln, &ln->err);
}

static keyer_status cpu_run(kr_backend_instance *inst, keyer_error *err)
{
    if (!inst)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "cpu backend: NULL instance");
    if (inst->n_lanes == 1)
        return run_lane(inst, &inst->lanes[0], err);
    pthreadpool_parallelize_1d(inst->pool, lane_task, inst, (size_t)inst->n_lanes,
                               PTHREADPOOL_FLAG_YIELD_WORKERS);
    for (int l = 0; l < inst->n_lanes; l++)
        if (inst->lanes[l].status != KEYER_OK) {
            if (err)
                *err = inst->lanes[l].err;
            return inst->lanes[l].status;
        }
    return KEYER_OK;
}

static size_t cpu_arena_bytes(const kr_backend_instance *inst)
{
    if (!inst)
        return 0;
    size_t n = inst->io_bytes;
    for (int l = 0; l < inst->n_lanes; l++)
        n += inst->lanes[l].arena_bytes + inst->lanes[l].xnn_workspace_bytes;
    return n;
}

static size_t cpu_weight_bytes(const kr_backend_instance *inst)
{
    /* Each lane's runtimes hold their own packed copy of the weights (about the graph's
     * constant bytes each); the graph's own copy is counted by the model. */
    return inst ? inst->g->const_bytes * (size_t)inst->n_lanes : 0;
}

const kr_backend_ops kr_backend_cpu = {
    .name = "cpu",
    .memory = KEYER_MEMORY_HOST,
    .supports_node = cpu_supports_node,
    .create = cpu_create,
    .tensor_data = cpu_tensor_data,
    .run = cpu_run,
    .synchronize = NULL,
    .arena_bytes = cpu_arena_bytes,
    .weight_bytes = cpu_weight_bytes,
    .destroy = cpu_destroy,
};

/* ---- introspection (lane 0) ----------------------------------------------------------------- */

int kr_cpu_segment_count(const kr_backend_instance *inst)
{
    return inst ? inst->lanes[0].n_segments : 0;
}

keyer_status kr_cpu_segment_get(const kr_backend_instance *inst, int index,
                                kr_cpu_segment_info *out, keyer_error *err)
{
    if (!inst || !out || index < 0 || index >= inst->lanes[0].n_segments)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "cpu backend: segment %d out of range", index);
    const segment *seg = &inst->lanes[0].segments[index];
    out->first_node = seg->first;
    out->last_node = seg->last;
    out->xnnpack = seg->xnn;
    out->n_external = seg->xnn ? seg->n_ext : 0;
    return KEYER_OK;
}

keyer_status kr_cpu_run_segment(kr_backend_instance *inst, int index, keyer_error *err)
{
    if (!inst || inst->n_lanes != 1 || index < 0 || index >= inst->lanes[0].n_segments)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "cpu backend: segment %d out of range (or the batch is split "
                               "over threads)",
                               index);
    return run_segment(inst, &inst->lanes[0], &inst->lanes[0].segments[index], err);
}

const float *kr_cpu_tensor_debug(const kr_backend_instance *inst, int tensor)
{
    if (!inst || tensor < 0 || tensor >= inst->g->n_tensors)
        return NULL;
    return lane_ptr(inst, &inst->lanes[0], tensor);
}

int kr_cpu_threads(const kr_backend_instance *inst)
{
    return inst ? inst->threads : 0;
}

int kr_cpu_lane_count(const kr_backend_instance *inst)
{
    return inst ? inst->n_lanes : 0;
}
