/*
 * The CPU backend (src/nn/cpu): partitioning into XNNPACK and reference segments, thread and
 * batch handling, the transpose-convolution rewrite, clean create-time failures.
 *
 * Graphs are built by hand and validated with kr_graph_validate(), as a model reader would.
 * The oracle is the same backend with kr_cpu_options.reference_only (every node on the
 * reference kernels, nn/reference/ops.h). On the shipped models every node's XNNPACK lowering is
 * checked against the reference kernel on the same inputs (one runtime per node), so a wrong
 * padding, flag or layout shows up at the node that has it. Synthetic cases per operator are
 * tests/backend_ops/test_backend_ops.c's job; end-to-end outputs are checked by
 * tests/golden/test_reference_outputs.c.
 */
/* sched_setaffinity and the CPU_* macros (test_threads) are GNU extensions of glibc. */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keyer/nn.h"
#include "nn/backend.h"
#include "nn/cpu/cpu.h"
#include "nn/cpu/kernels.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/reference/ops.h"
#include "testutil.h"

/* ---- a small graph builder -------------------------------------------------------------------- */

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

#define MAX_T 32
#define MAX_N 16
#define CONST_BYTES (1 << 18)

typedef struct gbuild {
    kr_graph *g;
    size_t used;
    uint32_t seed;
} gbuild;

static void gb_begin(gbuild *b, const char *name)
{
    kr_graph *g = calloc(1, sizeof(*g));
    assert_non_null(g);
    g->name = dup_string(name);
    g->tensors = calloc(MAX_T, sizeof(kr_tensor));
    g->nodes = calloc(MAX_N, sizeof(kr_node));
    g->inputs = calloc(8, sizeof(int));
    g->outputs = calloc(8, sizeof(int));
    g->const_storage = calloc(1, CONST_BYTES);
    assert_true(g->name && g->tensors && g->nodes && g->inputs && g->outputs && g->const_storage);
    b->g = g;
    b->used = 0;
    b->seed = 12345u;
}

static float next_weight(gbuild *b)
{
    b->seed = b->seed * 1664525u + 1013904223u;
    return (float)((b->seed >> 9) & 0xffff) / 32768.0f - 1.0f; /* [-1, 1) */
}

static int gb_tensor(gbuild *b, kr_dtype dtype, int rank, const int *dims)
{
    kr_graph *g = b->g;
    assert_true(g->n_tensors < MAX_T);
    int t = g->n_tensors++;
    kr_tensor *x = &g->tensors[t];
    char name[16];
    snprintf(name, sizeof(name), "t%d", t);
    x->name = dup_string(name);
    assert_non_null(x->name);
    x->dtype = dtype;
    x->rank = rank;
    for (int d = 0; d < rank; d++)
        x->dims[d] = dims[d];
    x->view_of = -1;
    return t;
}

static int gb_act(gbuild *b, int rank, const int *dims)
{
    return gb_tensor(b, KR_DTYPE_F32, rank, dims);
}

/* A constant; @p values NULL fills pseudo-random weights in [-1, 1). */
static int gb_const(gbuild *b, kr_dtype dtype, int rank, const int *dims, const void *values)
{
    int t = gb_tensor(b, dtype, rank, dims);
    kr_tensor *x = &b->g->tensors[t];
    size_t bytes = kr_tensor_elements(x) * 4;
    assert_true(b->used + bytes <= CONST_BYTES);
    unsigned char *p = (unsigned char *)b->g->const_storage + b->used;
    if (values)
        memcpy(p, values, bytes);
    else
        for (size_t i = 0; i < bytes / 4; i++)
            ((float *)p)[i] = next_weight(b);
    x->data = p;
    b->used += (bytes + 15) & ~(size_t)15;
    b->g->const_bytes = b->used;
    return t;
}

static kr_node *gb_node(gbuild *b, kr_op op, int n_in, const int *in, int out)
{
    kr_graph *g = b->g;
    assert_true(g->n_nodes < MAX_N);
    kr_node *n = &g->nodes[g->n_nodes];
    n->op = op;
    n->source_index = g->n_nodes;
    g->n_nodes++;
    n->n_inputs = n_in;
    for (int i = 0; i < n_in; i++)
        n->inputs[i] = in[i];
    n->n_outputs = 1;
    n->outputs[0] = out;
    return n;
}

static kr_window_params window(int kh, int kw, int stride, kr_padding padding)
{
    kr_window_params w = {.kernel_h = kh, .kernel_w = kw, .stride_h = stride, .stride_w = stride,
                          .dilation_h = 1, .dilation_w = 1, .padding = padding};
    return w;
}

/* A convolution (CONV_2D or DEPTHWISE_CONV_2D) with random weights and bias. */
static int gb_conv(gbuild *b, kr_op op, int x, int cout, int k, int stride, kr_padding pad,
                   kr_activation act)
{
    const kr_tensor *in = &b->g->tensors[x];
    int cin = in->dims[3];
    int wdims[4] = {op == KR_OP_DEPTHWISE_CONV_2D ? 1 : cout, k, k,
                    op == KR_OP_DEPTHWISE_CONV_2D ? cout : cin};
    int bdims[1] = {cout};
    int w = gb_const(b, KR_DTYPE_F32, 4, wdims, NULL);
    int bias = gb_const(b, KR_DTYPE_F32, 1, bdims, NULL);
    int oh = kr_window_out_size(pad, in->dims[1], k, stride, 1);
    int ow = kr_window_out_size(pad, in->dims[2], k, stride, 1);
    int odims[4] = {1, oh, ow, cout};
    int y = gb_act(b, 4, odims);
    kr_node *n = gb_node(b, op, 3, (int[]){x, w, bias}, y);
    n->p.window = window(k, k, stride, pad);
    n->activation = act;
    return y;
}

static int gb_unary(gbuild *b, kr_op op, int x)
{
    const kr_tensor *in = &b->g->tensors[x];
    int y = gb_act(b, in->rank, in->dims);
    gb_node(b, op, 1, (int[]){x}, y);
    return y;
}

static int gb_concat(gbuild *b, int n_in, const int *in, int axis)
{
    const kr_tensor *first = &b->g->tensors[in[0]];
    int dims[KR_MAX_DIMS];
    memcpy(dims, first->dims, sizeof(dims));
    dims[axis] = 0;
    for (int i = 0; i < n_in; i++)
        dims[axis] += b->g->tensors[in[i]].dims[axis];
    int y = gb_act(b, first->rank, dims);
    kr_node *n = gb_node(b, KR_OP_CONCATENATION, n_in, in, y);
    n->p.concat.axis = axis;
    return y;
}

/* Transpose convolution with K x K OHWI weights, stride S, SAME or VALID (MediaPipe rules). */
static int gb_transpose_conv(gbuild *b, int x, int cout, int k, int s, kr_padding pad)
{
    const kr_tensor *in = &b->g->tensors[x];
    int wdims[4] = {cout, k, k, in->dims[3]}, bdims[1] = {cout};
    int w = gb_const(b, KR_DTYPE_F32, 4, wdims, NULL);
    int bias = gb_const(b, KR_DTYPE_F32, 1, bdims, NULL);
    int out[2];
    for (int a = 0; a < 2; a++) {
        int n = in->dims[1 + a], total = 0;
        if (pad == KR_PADDING_SAME) {
            total = k - (n - 1) % s - 1;
            if (total < 0)
                total = 0;
        }
        out[a] = s * (n - 1) + k - total;
    }
    int odims[4] = {1, out[0], out[1], cout};
    int y = gb_act(b, 4, odims);
    kr_node *n = gb_node(b, KR_OP_TRANSPOSE_CONV_BIAS, 3, (int[]){x, w, bias}, y);
    n->p.window.stride_h = n->p.window.stride_w = s;
    n->p.window.padding = pad;
    return y;
}

/* Sets inputs/outputs and validates (which also links). */
static kr_graph *gb_finish(gbuild *b, int n_in, const int *in, int n_out, const int *out)
{
    kr_graph *g = b->g;
    g->n_inputs = n_in;
    g->n_outputs = n_out;
    memcpy(g->inputs, in, sizeof(int) * (size_t)n_in);
    memcpy(g->outputs, out, sizeof(int) * (size_t)n_out);
    keyer_error err = {0};
    keyer_status st = kr_graph_validate(g, &err);
    if (st != KEYER_OK)
        print_message("validate: %s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    return g;
}

/* ---- running -------------------------------------------------------------------------------- */

static size_t io_floats(const kr_graph *g, int t, int batch)
{
    return kr_tensor_bytes(&g->tensors[t], batch) / sizeof(float);
}

/* Fills input @p t of @p inst: image i of the batch gets pattern seed + i. */
static void fill_inputs(const kr_graph *g, kr_backend_instance *inst, int batch, int first_image)
{
    for (int i = 0; i < g->n_inputs; i++) {
        int t = g->inputs[i];
        float *p = kr_backend_cpu.tensor_data(inst, t);
        assert_non_null(p);
        size_t per = io_floats(g, t, 1);
        for (int img = 0; img < batch; img++)
            for (size_t k = 0; k < per; k++) {
                uint32_t h = (uint32_t)(k * 2654435761u) ^ (uint32_t)((first_image + img + 1) *
                                                                      40503u + i * 7u);
                p[(size_t)img * per + k] = (float)((h >> 7) % 2001u) / 1000.0f - 1.0f;
            }
    }
}

typedef struct outputs {
    int n;
    float *data[4];
    size_t floats[4];
} outputs;

static void outputs_free(outputs *o)
{
    for (int i = 0; i < o->n; i++)
        free(o->data[i]);
    o->n = 0;
}

/* Creates, fills (images first_image..), runs once, copies every output. */
static void run_graph(const kr_graph *g, int batch, int threads, const kr_cpu_options *opt,
                      int first_image, outputs *out, kr_backend_instance **keep)
{
    kr_backend_config cfg = {.batch = batch, .threads = threads};
    kr_backend_instance *inst = NULL;
    keyer_error err = {0};
    keyer_status st = kr_cpu_create(g, &cfg, opt, &inst, &err);
    if (st != KEYER_OK)
        print_message("create: %s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    fill_inputs(g, inst, batch, first_image);
    st = kr_backend_cpu.run(inst, &err);
    if (st != KEYER_OK)
        print_message("run: %s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    out->n = g->n_outputs;
    for (int i = 0; i < g->n_outputs; i++) {
        out->floats[i] = io_floats(g, g->outputs[i], batch);
        out->data[i] = malloc(out->floats[i] * sizeof(float));
        assert_non_null(out->data[i]);
        memcpy(out->data[i], kr_backend_cpu.tensor_data(inst, g->outputs[i]),
               out->floats[i] * sizeof(float));
    }
    if (keep)
        *keep = inst;
    else
        kr_backend_cpu.destroy(&inst);
}

/* Largest |a - b| relative to max(1, |b|). */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* Runs @p g on the backend and on the reference kernels and compares every output. */
static void expect_matches_reference(const kr_graph *g, int batch, int threads, double tol)
{
    outputs fast = {0}, ref = {0};
    kr_cpu_options ref_only = {.reference_only = 1};
    run_graph(g, batch, threads, NULL, 0, &fast, NULL);
    run_graph(g, batch, 1, &ref_only, 0, &ref, NULL);
    for (int i = 0; i < fast.n; i++) {
        double d = max_rel_diff(fast.data[i], ref.data[i], fast.floats[i]);
        if (!(d <= tol))
            print_message("%s output %d: max relative difference %g > %g\n", g->name, i, d, tol);
        assert_true(d <= tol);
    }
    outputs_free(&fast);
    outputs_free(&ref);
}

/* ---- graphs ---------------------------------------------------------------------------------- */

/* conv 1x1 -> RELU, depthwise 3x3 (both from the input), CONCATENATION on channels, conv 1x1,
 * HARD_SWISH: XNNPACK [0..2], reference [3], XNNPACK [4..5]. */
static kr_graph *concat_in_the_middle(void)
{
    gbuild b;
    gb_begin(&b, "concat-in-the-middle");
    int x = gb_act(&b, 4, (int[]){1, 9, 7, 4});
    int c = gb_conv(&b, KR_OP_CONV_2D, x, 6, 1, 1, KR_PADDING_SAME, KR_ACT_NONE);
    int r = gb_unary(&b, KR_OP_RELU, c);
    int d = gb_conv(&b, KR_OP_DEPTHWISE_CONV_2D, x, 4, 3, 1, KR_PADDING_SAME, KR_ACT_RELU6);
    int cat = gb_concat(&b, 2, (int[]){r, d}, 3);
    int e = gb_conv(&b, KR_OP_CONV_2D, cat, 3, 1, 1, KR_PADDING_VALID, KR_ACT_NONE);
    int y = gb_unary(&b, KR_OP_HARD_SWISH, e);
    return gb_finish(&b, 1, (int[]){x}, 1, (int[]){y});
}

/* CONCATENATION first (of the graph input with itself) and last (a graph output), with an
 * XNNPACK segment between whose output is also a graph output. */
static kr_graph *concat_at_the_ends(void)
{
    gbuild b;
    gb_begin(&b, "concat-at-the-ends");
    int x = gb_act(&b, 4, (int[]){1, 5, 6, 2});
    int cat = gb_concat(&b, 2, (int[]){x, x}, 3);
    int r = gb_conv(&b, KR_OP_DEPTHWISE_CONV_2D, cat, 4, 3, 2, KR_PADDING_SAME, KR_ACT_NONE);
    int s = gb_unary(&b, KR_OP_LOGISTIC, r);
    int t = gb_conv(&b, KR_OP_CONV_2D, s, 4, 1, 1, KR_PADDING_SAME, KR_ACT_RELU);
    int y = gb_concat(&b, 3, (int[]){t, s, t}, 3);
    return gb_finish(&b, 1, (int[]){x}, 2, (int[]){y, s});
}

/* A small network: stride-2 conv, depthwise, SE-style gate (MEAN, conv, LOGISTIC, MUL), ADD. */
static kr_graph *small_net(void)
{
    gbuild b;
    gb_begin(&b, "small-net");
    int x = gb_act(&b, 4, (int[]){1, 16, 12, 3});
    int a = gb_conv(&b, KR_OP_CONV_2D, x, 8, 3, 2, KR_PADDING_SAME, KR_ACT_RELU);
    int d = gb_conv(&b, KR_OP_DEPTHWISE_CONV_2D, a, 8, 5, 1, KR_PADDING_SAME, KR_ACT_NONE);
    int32_t axes[2] = {1, 2};
    int ax = gb_const(&b, KR_DTYPE_I32, 1, (int[]){2}, axes);
    int m = gb_act(&b, 4, (int[]){1, 1, 1, 8});
    kr_node *mean = gb_node(&b, KR_OP_MEAN, 2, (int[]){d, ax}, m);
    mean->p.mean.keep_dims = 1;
    int gconv = gb_conv(&b, KR_OP_CONV_2D, m, 8, 1, 1, KR_PADDING_VALID, KR_ACT_NONE);
    int gate = gb_unary(&b, KR_OP_LOGISTIC, gconv);
    int scaled = gb_act(&b, 4, (int[]){1, 8, 6, 8});
    gb_node(&b, KR_OP_MUL, 2, (int[]){d, gate}, scaled);
    int sum = gb_act(&b, 4, (int[]){1, 8, 6, 8});
    gb_node(&b, KR_OP_ADD, 2, (int[]){scaled, a}, sum);
    int y = gb_conv(&b, KR_OP_CONV_2D, sum, 5, 1, 1, KR_PADDING_SAME, KR_ACT_NONE);
    return gb_finish(&b, 1, (int[]){x}, 1, (int[]){y});
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void expect_segment(const kr_backend_instance *inst, int index, int first, int last,
                           int xnnpack, int n_external)
{
    kr_cpu_segment_info info;
    keyer_error err = {0};
    assert_int_equal(kr_cpu_segment_get(inst, index, &info, &err), KEYER_OK);
    assert_int_equal(info.first_node, first);
    assert_int_equal(info.last_node, last);
    assert_int_equal(info.xnnpack, xnnpack);
    if (n_external >= 0)
        assert_int_equal(info.n_external, n_external);
}

static void test_partition_concat_in_the_middle(void **state)
{
    (void)state;
    kr_graph *g = concat_in_the_middle();
    assert_true(kr_cpu_xnn_supports(g, &g->nodes[0]));
    assert_false(kr_cpu_xnn_supports(g, &g->nodes[3])); /* CONCATENATION */
    for (int i = 0; i < g->n_nodes; i++)
        assert_true(kr_backend_cpu.supports_node(g, &g->nodes[i]));

    kr_backend_instance *inst = NULL;
    outputs out = {0};
    run_graph(g, 1, 1, NULL, 0, &out, &inst);
    assert_int_equal(kr_cpu_segment_count(inst), 3);
    /* Segment 0: the input in; the RELU and depthwise outputs out. Segment 2: concat in, y out. */
    expect_segment(inst, 0, 0, 2, 1, 3);
    expect_segment(inst, 1, 3, 3, 0, 0);
    expect_segment(inst, 2, 4, 5, 1, 2);
    /* Reading a tensor that is not a graph input or output gives NULL. */
    assert_null(kr_backend_cpu.tensor_data(inst, g->nodes[3].outputs[0]));
    assert_null(kr_backend_cpu.tensor_data(inst, -1));
    assert_null(kr_backend_cpu.tensor_data(inst, g->n_tensors));
    assert_true(kr_backend_cpu.arena_bytes(inst) >= kr_tensor_bytes(&g->tensors[0], 1));
    kr_backend_cpu.destroy(&inst);
    assert_null(inst);
    outputs_free(&out);

    expect_matches_reference(g, 1, 1, 1e-5);
    expect_matches_reference(g, 2, 2, 1e-5);
    kr_graph_destroy(&g);
}

static void test_partition_concat_at_the_ends(void **state)
{
    (void)state;
    kr_graph *g = concat_at_the_ends();
    kr_backend_instance *inst = NULL;
    outputs out = {0};
    run_graph(g, 1, 1, NULL, 0, &out, &inst);
    assert_int_equal(kr_cpu_segment_count(inst), 3);
    expect_segment(inst, 0, 0, 0, 0, 0);
    expect_segment(inst, 1, 1, 3, 1, 3); /* concat in; logistic and conv out */
    expect_segment(inst, 2, 4, 4, 0, 0);
    kr_backend_cpu.destroy(&inst);
    outputs_free(&out);
    expect_matches_reference(g, 1, 1, 1e-5);
    expect_matches_reference(g, 3, 2, 1e-5);
    kr_graph_destroy(&g);
}

static void test_node_per_segment(void **state)
{
    (void)state;
    kr_graph *g = small_net();
    kr_backend_instance *inst = NULL;
    kr_cpu_options split = {.node_per_segment = 1};
    outputs whole = {0}, parts = {0};
    run_graph(g, 1, 1, NULL, 0, &whole, &inst);
    assert_int_equal(kr_cpu_segment_count(inst), 1);
    kr_backend_cpu.destroy(&inst);
    run_graph(g, 1, 1, &split, 0, &parts, &inst);
    assert_int_equal(kr_cpu_segment_count(inst), g->n_nodes);
    /* Segments run one at a time give the same result as a whole run. */
    keyer_error err = {0};
    fill_inputs(g, inst, 1, 0);
    for (int s = 0; s < kr_cpu_segment_count(inst); s++)
        assert_int_equal(kr_cpu_run_segment(inst, s, &err), KEYER_OK);
    assert_int_equal(kr_cpu_run_segment(inst, g->n_nodes, &err), KEYER_STATUS_INVALID_ARGUMENT);
    const float *y = kr_backend_cpu.tensor_data(inst, g->outputs[0]);
    assert_true(max_rel_diff(y, whole.data[0], whole.floats[0]) <= 1e-5);
    assert_true(max_rel_diff(parts.data[0], whole.data[0], whole.floats[0]) <= 1e-5);
    kr_backend_cpu.destroy(&inst);
    outputs_free(&whole);
    outputs_free(&parts);
    expect_matches_reference(g, 1, 1, 1e-4);
    kr_graph_destroy(&g);
}

typedef struct log_capture {
    int warnings;
    char last[512];
} log_capture;

static void capture_log(void *opaque, keyer_log_level level, const char *message)
{
    log_capture *c = opaque;
    if (level == KEYER_LOG_WARNING) {
        c->warnings++;
        snprintf(c->last, sizeof(c->last), "%s", message);
    }
}

/* A node XNNPACK rejects (simulated) moves to the reference kernels, with a warning naming it,
 * and the partition is rebuilt around it; the results do not change. */
static void test_fallback_when_xnnpack_rejects(void **state)
{
    (void)state;
    kr_graph *g = concat_in_the_middle();
    outputs normal = {0};
    run_graph(g, 1, 1, NULL, 0, &normal, NULL);
    for (int mode = 0; mode < 2; mode++) {
        log_capture cap = {0};
        keyer_logger lg = {KEYER_LOG_WARNING, capture_log, &cap};
        kr_backend_config cfg = {.batch = 1, .threads = 1, .logger = &lg};
        kr_cpu_options opt = {0};
        if (mode == 0)
            opt.test_reject_define = 1 + 1; /* the RELU */
        else
            opt.test_reject_runtime = 4 + 1; /* the conv after the concatenation */
        kr_backend_instance *inst = NULL;
        keyer_error err = {0};
        assert_int_equal(kr_cpu_create(g, &cfg, &opt, &inst, &err), KEYER_OK);
        assert_int_equal(cap.warnings, 1);
        assert_non_null(strstr(cap.last, mode == 0 ? "node 1 (RELU" : "node 4 (CONV_2D"));
        if (mode == 0) {
            /* conv | RELU | depthwise | concat | conv, HARD_SWISH */
            assert_int_equal(kr_cpu_segment_count(inst), 5);
            expect_segment(inst, 0, 0, 0, 1, -1);
            expect_segment(inst, 1, 1, 1, 0, 0);
            expect_segment(inst, 2, 2, 2, 1, -1);
            expect_segment(inst, 3, 3, 3, 0, 0);
            expect_segment(inst, 4, 4, 5, 1, -1);
        } else {
            /* conv, RELU, depthwise | concat, conv | HARD_SWISH */
            assert_int_equal(kr_cpu_segment_count(inst), 3);
            expect_segment(inst, 0, 0, 2, 1, -1);
            expect_segment(inst, 1, 3, 4, 0, 0);
            expect_segment(inst, 2, 5, 5, 1, 2);
        }
        fill_inputs(g, inst, 1, 0);
        assert_int_equal(kr_backend_cpu.run(inst, &err), KEYER_OK);
        const float *y = kr_backend_cpu.tensor_data(inst, g->outputs[0]);
        assert_true(max_rel_diff(y, normal.data[0], normal.floats[0]) <= 1e-5);
        kr_backend_cpu.destroy(&inst);
    }
    outputs_free(&normal);
    kr_graph_destroy(&g);
}

static void test_threads(void **state)
{
    (void)state;
    kr_graph *g = small_net();
    outputs one = {0}, two = {0};
    kr_backend_instance *inst = NULL;
    run_graph(g, 1, 1, NULL, 0, &one, &inst);
    assert_int_equal(kr_cpu_threads(inst), 1);
    kr_backend_cpu.destroy(&inst);
    run_graph(g, 1, 2, NULL, 0, &two, &inst);
    assert_int_equal(kr_cpu_threads(inst), 2);
    assert_int_equal(kr_cpu_lane_count(inst), 1);
    /* Repeated runs give the same result. */
    keyer_error err = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(kr_backend_cpu.run(inst, &err), KEYER_OK);
    const float *y = kr_backend_cpu.tensor_data(inst, g->outputs[0]);
    assert_true(max_rel_diff(y, one.data[0], one.floats[0]) <= 1e-5);
    assert_true(max_rel_diff(two.data[0], one.data[0], one.floats[0]) <= 1e-5);
    kr_backend_cpu.destroy(&inst);
    /* Threads 0: one per CPU this process may run on (its affinity mask: taskset), not one per
     * CPU of the machine (32 workers spinning on 2 allowed cores of a 32-core machine made the
     * face models take a minute). Confined to one CPU: no pool; then the whole mask. */
    cpu_set_t all, single;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int first = 0;
    while (first < CPU_SETSIZE - 1 && !CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&single);
    CPU_SET(first, &single);
    assert_int_equal(sched_setaffinity(0, sizeof single, &single), 0);
    outputs zero = {0};
    run_graph(g, 1, 0, NULL, 0, &zero, &inst);
    const int confined = kr_cpu_threads(inst);
    kr_backend_cpu.destroy(&inst);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(confined, 1);
    assert_true(max_rel_diff(zero.data[0], one.data[0], one.floats[0]) <= 1e-5);
    outputs_free(&zero);
    run_graph(g, 1, 0, NULL, 0, &zero, &inst);
    assert_int_equal(kr_cpu_threads(inst), CPU_COUNT(&all));
    kr_backend_cpu.destroy(&inst);
    outputs_free(&zero);
    outputs_free(&one);
    outputs_free(&two);
    kr_graph_destroy(&g);
}

/* Batch 3 (one lane with 1 thread; lanes of 2 + 1 images with 2 threads) equals three single
 * runs on the same images. */
static void test_batch_equals_single_runs(void **state)
{
    (void)state;
    kr_graph *gs[2] = {small_net(), concat_in_the_middle()};
    for (int gi = 0; gi < 2; gi++) {
        kr_graph *g = gs[gi];
        outputs single[3];
        for (int i = 0; i < 3; i++) {
            memset(&single[i], 0, sizeof(single[i]));
            run_graph(g, 1, 1, NULL, i, &single[i], NULL);
        }
        for (int threads = 1; threads <= 2; threads++) {
            outputs batch = {0};
            kr_backend_instance *inst = NULL;
            run_graph(g, 3, threads, NULL, 0, &batch, &inst);
            assert_int_equal(kr_cpu_lane_count(inst), threads);
            kr_backend_cpu.destroy(&inst);
            for (int o = 0; o < g->n_outputs; o++)
                for (int i = 0; i < 3; i++) {
                    size_t per = single[i].floats[o];
                    assert_int_equal(batch.floats[o], 3 * per);
                    double d = max_rel_diff(batch.data[o] + (size_t)i * per, single[i].data[o],
                                            per);
                    if (!(d <= 1e-5))
                        print_message("%s threads %d image %d output %d: %g\n", g->name, threads,
                                      i, o, d);
                    assert_true(d <= 1e-5);
                }
            outputs_free(&batch);
        }
        for (int i = 0; i < 3; i++)
            outputs_free(&single[i]);
        kr_graph_destroy(&g);
    }
}

/* Both transpose-convolution paths: K == S without padding (1x1 conv + depth_to_space) and the
 * general one (XNNPACK deconvolution), against the reference kernel. */
static void test_transpose_conv(void **state)
{
    (void)state;
    static const struct {
        int h, w, cin, cout, k, s;
        kr_padding pad;
    } cases[] = {
        {8, 6, 16, 1, 2, 2, KR_PADDING_SAME},  /* the selfie models' layer */
        {5, 7, 3, 4, 2, 2, KR_PADDING_VALID},
        {4, 4, 5, 3, 3, 3, KR_PADDING_SAME},
        {6, 5, 4, 2, 3, 2, KR_PADDING_SAME},   /* P = 2 - (n-1) mod 2: padded, general path */
        {5, 6, 3, 2, 3, 2, KR_PADDING_SAME},   /* odd P along W */
        {5, 5, 3, 2, 3, 2, KR_PADDING_VALID},
        {4, 6, 2, 3, 4, 2, KR_PADDING_SAME},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gbuild b;
        gb_begin(&b, "transpose-conv");
        int x = gb_act(&b, 4, (int[]){1, cases[i].h, cases[i].w, cases[i].cin});
        int y = gb_transpose_conv(&b, x, cases[i].cout, cases[i].k, cases[i].s, cases[i].pad);
        kr_graph *g = gb_finish(&b, 1, (int[]){x}, 1, (int[]){y});
        assert_true(kr_cpu_xnn_supports(g, &g->nodes[0]));
        expect_matches_reference(g, 1, 1, 1e-5);
        expect_matches_reference(g, 2, 1, 1e-5);
        kr_graph_destroy(&g);
    }
}

/* A 3x3 stride-1 convolution with dilation @p d, random bias and random weights scaled by
 * 1 / sqrt(9 C_in) as trained layers' are (the outputs stay about as large as the inputs). */
static int gb_conv3_dilated(gbuild *b, int x, int cout, int d, kr_padding pad, kr_activation act)
{
    const kr_tensor *in = &b->g->tensors[x];
    int cin = in->dims[3];
    size_t nw = (size_t)cout * 9 * (size_t)cin;
    float *wv = malloc(nw * sizeof(float));
    assert_non_null(wv);
    for (size_t i = 0; i < nw; i++)
        wv[i] = next_weight(b) / sqrtf(9.0f * (float)cin);
    int w = gb_const(b, KR_DTYPE_F32, 4, (int[]){cout, 3, 3, cin}, wv);
    free(wv);
    int bias = gb_const(b, KR_DTYPE_F32, 1, (int[]){cout}, NULL);
    int oh = kr_window_out_size(pad, in->dims[1], 3, 1, d);
    int ow = kr_window_out_size(pad, in->dims[2], 3, 1, d);
    int y = gb_act(b, 4, (int[]){1, oh, ow, cout});
    kr_node *n = gb_node(b, KR_OP_CONV_2D, 3, (int[]){x, w, bias}, y);
    n->p.window = window(3, 3, 1, pad);
    n->p.window.dilation_h = n->p.window.dilation_w = d;
    n->activation = act;
    return y;
}

/* The Winograd F(4x4, 3x3) kernel (nn/cpu/conv_winograd.c): odd sizes (partial tiles), every
 * dilation u2netp uses, SAME and VALID, one and two 16-column panels, activations, batches split
 * over lanes or not; against the reference kernel, and the same graph without the CPU kernels
 * (XNNPACK). A concatenation feeding one runs on the CPU concat kernel. Tolerance 5e-5: the
 * transforms' rounding (about 1e-5 here with 576 terms; with unit-scale weights, 1.7e-4). */
static void test_winograd_conv(void **state)
{
    (void)state;
    static const struct {
        int h, w, cin, cout, d;
        kr_padding pad;
        kr_activation act;
    } cases[] = {
        {16, 16, 16, 16, 1, KR_PADDING_SAME, KR_ACT_RELU},
        {19, 23, 32, 16, 1, KR_PADDING_VALID, KR_ACT_NONE},
        {20, 20, 16, 32, 2, KR_PADDING_SAME, KR_ACT_RELU6},
        {21, 18, 16, 16, 4, KR_PADDING_SAME, KR_ACT_NONE},
        {33, 35, 16, 48, 8, KR_PADDING_SAME, KR_ACT_RELU},
        {40, 40, 64, 64, 1, KR_PADDING_SAME, KR_ACT_RELU},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gbuild b;
        gb_begin(&b, "winograd");
        int x = gb_act(&b, 4, (int[]){1, cases[i].h, cases[i].w, cases[i].cin / 2});
        int x2 = gb_act(&b, 4, (int[]){1, cases[i].h, cases[i].w, cases[i].cin / 2});
        int cat = gb_concat(&b, 2, (int[]){x, x2}, 3);
        int y = gb_conv3_dilated(&b, cat, cases[i].cout, cases[i].d, cases[i].pad, cases[i].act);
        /* Odd cases: a RELU node after the convolution (fused into the kernel). */
        if (i % 2)
            y = gb_unary(&b, KR_OP_RELU, y);
        kr_graph *g = gb_finish(&b, 2, (int[]){x, x2}, 1, (int[]){y});
        assert_true(kr_cpu_kernel_supports(g, &g->nodes[0])); /* the concat */
        assert_true(kr_cpu_kernel_supports(g, &g->nodes[1]));
        kr_backend_instance *inst = NULL;
        outputs fast = {0}, xnn = {0};
        run_graph(g, 1, 2, NULL, 0, &fast, &inst);
        assert_int_equal(kr_cpu_segment_count(inst), 1);
        expect_segment(inst, 0, 0, g->n_nodes - 1, 0, 0);
        kr_backend_cpu.destroy(&inst);
        kr_cpu_options no_kernels = {.no_kernels = 1};
        run_graph(g, 1, 2, &no_kernels, 0, &xnn, NULL);
        double dx = max_rel_diff(fast.data[0], xnn.data[0], fast.floats[0]);
        if (!(dx <= 5e-5))
            print_message("case %zu: Winograd vs XNNPACK %g\n", i, dx);
        assert_true(dx <= 5e-5);
        outputs_free(&fast);
        outputs_free(&xnn);
        expect_matches_reference(g, 1, 1, 5e-5);
        expect_matches_reference(g, 1, 2, 5e-5);
        expect_matches_reference(g, 3, 2, 5e-5); /* lanes */
        expect_matches_reference(g, 2, 1, 5e-5);
        kr_graph_destroy(&g);
    }
    /* Residual ADDs after a Winograd convolution (after its RELU, or directly; either operand
     * order; with the ADD's own activation), fused into its output stage. */
    for (int v = 0; v < 3; v++) {
        gbuild b;
        gb_begin(&b, "winograd-residual");
        int x = gb_act(&b, 4, (int[]){1, 18, 21, 16});
        int r = gb_act(&b, 4, (int[]){1, 18, 21, 32});
        int y = gb_conv3_dilated(&b, x, 32, v + 1, KR_PADDING_SAME, KR_ACT_NONE);
        if (v != 1)
            y = gb_unary(&b, KR_OP_RELU, y);
        int sum = gb_act(&b, 4, (int[]){1, 18, 21, 32});
        kr_node *add = gb_node(&b, KR_OP_ADD, 2, v == 2 ? (int[]){r, y} : (int[]){y, r}, sum);
        add->activation = v == 2 ? KR_ACT_RELU6 : KR_ACT_NONE;
        kr_graph *g = gb_finish(&b, 2, (int[]){x, r}, 1, (int[]){sum});
        kr_backend_instance *inst = NULL;
        outputs out = {0};
        run_graph(g, 1, 2, NULL, 0, &out, &inst);
        assert_int_equal(kr_cpu_segment_count(inst), 1); /* ADD and RELU taken by the kernel */
        kr_backend_cpu.destroy(&inst);
        outputs_free(&out);
        expect_matches_reference(g, 1, 2, 5e-5);
        expect_matches_reference(g, 3, 2, 5e-5);
        kr_graph_destroy(&g);
    }
    /* A concatenation used twice, and a RELU on a tensor that is also an output: not fused. */
    {
        gbuild b;
        gb_begin(&b, "winograd-unfused");
        int x = gb_act(&b, 4, (int[]){1, 17, 18, 16});
        int cat = gb_concat(&b, 2, (int[]){x, x}, 3);
        int y = gb_conv3_dilated(&b, cat, 16, 1, KR_PADDING_SAME, KR_ACT_NONE);
        int r = gb_unary(&b, KR_OP_RELU, y);
        int z = gb_conv3_dilated(&b, cat, 16, 2, KR_PADDING_SAME, KR_ACT_RELU);
        kr_graph *g = gb_finish(&b, 1, (int[]){x}, 3, (int[]){r, y, z});
        expect_matches_reference(g, 1, 2, 5e-5);
        expect_matches_reference(g, 2, 2, 5e-5);
        kr_graph_destroy(&g);
    }
    /* Below 16x16 outputs, or channels not multiples of 16: XNNPACK. */
    gbuild b;
    gb_begin(&b, "winograd-small");
    int x = gb_act(&b, 4, (int[]){1, 12, 12, 16});
    int y = gb_conv3_dilated(&b, x, 16, 1, KR_PADDING_SAME, KR_ACT_NONE);
    int z = gb_conv3_dilated(&b, y, 8, 1, KR_PADDING_SAME, KR_ACT_NONE);
    kr_graph *g = gb_finish(&b, 1, (int[]){x}, 1, (int[]){z});
    assert_false(kr_cpu_kernel_supports(g, &g->nodes[0]));
    assert_false(kr_cpu_kernel_supports(g, &g->nodes[1]));
    kr_graph_destroy(&g);
}

/* One-output-channel convolutions (nn/cpu/conv_1out.c): u2netp's heads (3x3 over 64 channels,
 * a 1x1 over a 6-channel concatenation of one-channel maps) and other windows, strides,
 * dilations, channel counts with a tail, batches; against the reference kernel. */
static void test_conv_1out(void **state)
{
    (void)state;
    static const struct {
        int h, w, cin, k, s, d;
        kr_padding pad;
        kr_activation act;
    } cases[] = {
        {20, 17, 64, 3, 1, 1, KR_PADDING_SAME, KR_ACT_NONE},
        {9, 11, 6, 1, 1, 1, KR_PADDING_VALID, KR_ACT_NONE},
        {13, 10, 20, 3, 2, 1, KR_PADDING_SAME, KR_ACT_RELU},
        {12, 12, 16, 3, 1, 2, KR_PADDING_SAME, KR_ACT_RELU6},
        {10, 9, 35, 5, 2, 1, KR_PADDING_VALID, KR_ACT_NONE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gbuild b;
        gb_begin(&b, "conv-1out");
        int x = gb_act(&b, 4, (int[]){1, cases[i].h, cases[i].w, cases[i].cin});
        int k = cases[i].k, d = cases[i].d;
        int w = gb_const(&b, KR_DTYPE_F32, 4, (int[]){1, k, k, cases[i].cin}, NULL);
        int bias = gb_const(&b, KR_DTYPE_F32, 1, (int[]){1}, NULL);
        int oh = kr_window_out_size(cases[i].pad, cases[i].h, k, cases[i].s, d);
        int ow = kr_window_out_size(cases[i].pad, cases[i].w, k, cases[i].s, d);
        int y = gb_act(&b, 4, (int[]){1, oh, ow, 1});
        kr_node *n = gb_node(&b, KR_OP_CONV_2D, 3, (int[]){x, w, bias}, y);
        n->p.window = window(k, k, cases[i].s, cases[i].pad);
        n->p.window.dilation_h = n->p.window.dilation_w = d;
        n->activation = cases[i].act;
        kr_graph *g = gb_finish(&b, 1, (int[]){x}, 1, (int[]){y});
        assert_true(kr_cpu_kernel_supports(g, &g->nodes[0]));
        expect_matches_reference(g, 1, 1, 1e-5);
        expect_matches_reference(g, 1, 2, 1e-5);
        expect_matches_reference(g, 3, 2, 1e-5);
        kr_graph_destroy(&g);
    }
    /* Six one-channel maps concatenated (the concat kernel's small blocks), then 1x1 to one. */
    gbuild b;
    gb_begin(&b, "heads");
    int maps[6];
    for (int i = 0; i < 6; i++)
        maps[i] = gb_act(&b, 4, (int[]){1, 7, 9, 1});
    int cat = gb_concat(&b, 6, maps, 3);
    int y = gb_conv(&b, KR_OP_CONV_2D, cat, 1, 1, 1, KR_PADDING_VALID, KR_ACT_NONE);
    kr_graph *g = gb_finish(&b, 6, maps, 2, (int[]){y, cat});
    assert_true(kr_cpu_kernel_supports(g, &g->nodes[0]));
    assert_true(kr_cpu_kernel_supports(g, &g->nodes[1]));
    expect_matches_reference(g, 1, 2, 1e-5);
    expect_matches_reference(g, 2, 1, 1e-5);
    kr_graph_destroy(&g);
}

static void test_create_failures(void **state)
{
    (void)state;
    keyer_error err = {0};
    kr_backend_instance *inst = NULL;
    kr_graph *g = small_net();
    kr_backend_config cfg = {.batch = 1, .threads = 1};

    /* Arguments. */
    assert_int_equal(kr_cpu_create(g, &cfg, NULL, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_cpu_create(NULL, &cfg, NULL, &inst, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(inst);
    cfg.batch = 0;
    assert_int_equal(kr_backend_cpu.create(g, NULL, &cfg, &inst, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(inst);
    assert_non_null(strstr(err.message, "batch 0"));
    cfg.batch = 1;

    /* An operator code no backend knows (a corrupted graph): UNSUPPORTED, nothing leaked. */
    kr_op saved = g->nodes[2].op;
    g->nodes[2].op = KR_OP_COUNT;
    assert_false(kr_backend_cpu.supports_node(g, &g->nodes[2]));
    assert_false(kr_cpu_xnn_supports(g, &g->nodes[2]));
    keyer_error_clear(&err);
    assert_int_equal(kr_backend_cpu.create(g, NULL, &cfg, &inst, &err), KEYER_STATUS_UNSUPPORTED);
    assert_null(inst);
    assert_non_null(strstr(err.message, "small-net"));
    assert_non_null(strstr(err.message, "node 2"));
    g->nodes[2].op = saved;

    /* A non-float32 activation: UNSUPPORTED naming the node and the tensor. */
    int t = g->nodes[1].outputs[0];
    g->tensors[t].dtype = KR_DTYPE_I32;
    assert_false(kr_backend_cpu.supports_node(g, &g->nodes[1]));
    keyer_error_clear(&err);
    assert_int_equal(kr_backend_cpu.create(g, NULL, &cfg, &inst, &err), KEYER_STATUS_UNSUPPORTED);
    assert_null(inst);
    assert_non_null(strstr(err.message, "node 1"));
    assert_non_null(strstr(err.message, g->tensors[t].name));
    g->tensors[t].dtype = KR_DTYPE_F32;

    /* And the graph still works afterwards. */
    assert_int_equal(kr_backend_cpu.create(g, NULL, &cfg, &inst, &err), KEYER_OK);
    assert_int_equal(kr_backend_cpu.run(inst, &err), KEYER_OK);
    kr_backend_cpu.destroy(&inst);
    assert_null(inst);
    kr_backend_cpu.destroy(&inst); /* NULL handle */
    kr_backend_cpu.destroy(NULL);
    assert_int_equal(kr_backend_cpu.run(NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    kr_graph_destroy(&g);
}

/* Every node of a real model, lowered to XNNPACK on its own, against the reference kernel on the
 * same input: |xnnpack - reference| <= 2e-5 * max(1, max |reference|) over the node's output
 * (float32 rounding of a different summation order; measured at most 5e-6). */
static void check_model_nodes(const char *file, const char *input_fixture)
{
    char path[1024], in_path[1024];
    kt_model_path(path, sizeof(path), file);
    if (!kt_exists(path)) {
        print_message("model %s is missing: run scripts/setup.sh\n", path);
        skip();
    }
    keyer_error err = {0};
    keyer_model *model = NULL;
    assert_int_equal(keyer_model_load_file(path, &model, &err), KEYER_OK);
    const kr_graph *g = kr_model_graph(model);
    kr_backend_config cfg = {.batch = 1, .threads = 1};
    kr_cpu_options split = {.node_per_segment = 1};
    kr_backend_instance *inst = NULL;
    assert_int_equal(kr_cpu_create(g, &cfg, &split, &inst, &err), KEYER_OK);
    /* One segment per XNNPACK node; consecutive reference nodes share one. */
    assert_true(kr_cpu_segment_count(inst) <= g->n_nodes);

    /* The reference photo's input when present, else a pattern. */
    float *in = kr_backend_cpu.tensor_data(inst, g->inputs[0]);
    size_t in_bytes = kr_tensor_bytes(&g->tensors[g->inputs[0]], 1), size = 0;
    void *photo = NULL;
    if (kt_shared_path(in_path, sizeof(in_path), input_fixture) && kt_exists(in_path))
        photo = kt_read_file(in_path, &size);
    if (photo && size == in_bytes)
        memcpy(in, photo, in_bytes);
    else
        fill_inputs(g, inst, 1, 0);
    free(photo);

    size_t max_out = 0;
    for (int t = 0; t < g->n_tensors; t++)
        if (!kr_tensor_is_const(&g->tensors[t]) && kr_tensor_bytes(&g->tensors[t], 1) > max_out)
            max_out = kr_tensor_bytes(&g->tensors[t], 1);
    float *want = malloc(max_out);
    assert_non_null(want);
    double worst = 0;
    int worst_node = -1;
    kr_cpu_segment_info info = {0};
    for (int s = 0, seg = -1; s < g->n_nodes; s++) {
        while (seg < 0 || info.last_node < s) {
            assert_int_equal(kr_cpu_run_segment(inst, ++seg, &err), KEYER_OK);
            assert_int_equal(kr_cpu_segment_get(inst, seg, &info, &err), KEYER_OK);
        }
        /* The segment's tensors stay valid until the next segment runs. */
        const kr_node *node = &g->nodes[s];
        kr_op_ctx c = {.graph = g, .node = node, .batch = 1};
        for (int k = 0; k < node->n_inputs; k++) {
            int t = node->inputs[k];
            c.in[k] = t < 0 ? NULL
                            : kr_tensor_is_const(&g->tensors[t]) ? g->tensors[t].data
                                                                  : kr_cpu_tensor_debug(inst, t);
            assert_true(t < 0 || c.in[k] != NULL);
        }
        c.out[0] = want;
        kr_ref_ops[node->op](&c);
        const float *got = kr_cpu_tensor_debug(inst, node->outputs[0]);
        assert_non_null(got);
        size_t n = kr_tensor_elements(&g->tensors[node->outputs[0]]);
        double scale = 1.0, diff = 0.0;
        for (size_t i = 0; i < n; i++)
            scale = fmax(scale, fabs((double)want[i]));
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)got[i] - (double)want[i]);
            if (!(d <= diff))
                diff = isnan(d) ? INFINITY : d;
        }
        if (diff / scale > worst) {
            worst = diff / scale;
            worst_node = s;
        }
        if (!(diff <= 2e-5 * scale))
            print_message("%s node %d (%s): max |xnnpack - reference| %g, max |reference| %g\n",
                          file, s, kr_op_name(node->op), diff, scale);
        assert_true(diff <= 2e-5 * scale);
    }
    print_message("%s: %d nodes, worst relative difference %.3g (node %d, %s)\n", file,
                  g->n_nodes, worst, worst_node,
                  worst_node >= 0 ? kr_op_name(g->nodes[worst_node].op) : "-");
    free(want);
    kr_backend_cpu.destroy(&inst);
    keyer_model_destroy(&model);
}

static void test_model_nodes_selfie(void **state)
{
    (void)state;
    check_model_nodes("selfie_segmentation.tflite",
                      "reference/outputs/selfie/grace_hopper/input.f32");
}

static void test_model_nodes_selfie_landscape(void **state)
{
    (void)state;
    check_model_nodes("selfie_segmentation_landscape.tflite",
                      "reference/outputs/selfie-landscape/grace_hopper/input.f32");
}

static void test_model_nodes_face(void **state)
{
    (void)state;
    check_model_nodes("face_detection_short_range.tflite",
                      "reference/outputs/face-short/grace_hopper/input.f32");
    check_model_nodes("face_detection_full_range.tflite",
                      "reference/outputs/face-full/grace_hopper/input.f32");
}

static void test_model_nodes_pose_lite(void **state)
{
    (void)state;
    check_model_nodes("pose_landmark_lite.tflite",
                      "reference/outputs/pose-lite/grace_hopper/input.f32");
}

static void test_model_nodes_face_mesh(void **state)
{
    (void)state;
    /* PRELU: only in face_landmark.tflite. No reference photo input: a pattern. */
    check_model_nodes("face_landmark.tflite", "reference/outputs/face-mesh/none/input.f32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_concat_in_the_middle),
        cmocka_unit_test(test_partition_concat_at_the_ends),
        cmocka_unit_test(test_node_per_segment),
        cmocka_unit_test(test_fallback_when_xnnpack_rejects),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_batch_equals_single_runs),
        cmocka_unit_test(test_transpose_conv),
        cmocka_unit_test(test_winograd_conv),
        cmocka_unit_test(test_conv_1out),
        cmocka_unit_test(test_create_failures),
        cmocka_unit_test(test_model_nodes_selfie),
        cmocka_unit_test(test_model_nodes_selfie_landscape),
        cmocka_unit_test(test_model_nodes_face),
        cmocka_unit_test(test_model_nodes_pose_lite),
        cmocka_unit_test(test_model_nodes_face_mesh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
