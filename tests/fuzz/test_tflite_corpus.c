/*
 * Robustness of the TFLite reader: broken variants of a real model (face_detection_short_range)
 * and hand-assembled FlatBuffers must each fail with a non-OK status and a message naming the
 * file and the problem, never crash (run this under -DKEYER_SANITIZE=ON too). Ends with a
 * deterministic, time-bounded mutation loop.
 *
 * With KEYER_WRITE_SEEDS=<dir> in the environment, the valid hand-assembled models are also
 * written to <dir> (that is how tests/fuzz/corpus/tflite/ was made).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "keyer/nn.h"
#include "kt_tflite.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "testutil.h"

#define NAME "corpus.tflite"

static uint8_t *face;    /* face_detection_short_range.tflite, or NULL when missing */
static size_t face_size;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Invariants backends rely on, for any graph the loader accepts. */
static void check_graph(const kr_graph *g)
{
    assert_true(g->n_inputs >= 1 && g->n_outputs >= 1);
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        assert_true(x->rank >= 0 && x->rank <= KR_MAX_DIMS);
        assert_true(kr_tensor_elements(x) <= ((size_t)1 << 28));
        if (x->data) {
            const uint8_t *lo = g->const_storage, *p = x->data;
            assert_true(p >= lo && p + kr_tensor_bytes(x, 1) <= lo + g->const_bytes);
        } else {
            assert_int_equal(x->dims[0], 1);
        }
        assert_true(x->view_of >= -1 && x->view_of < g->n_tensors);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            int t = n->inputs[k];
            assert_true(t >= -1 && t < g->n_tensors);
            if (t >= 0 && !g->tensors[t].data && g->tensors[t].graph_input < 0)
                assert_true(g->tensors[t].producer >= 0 && g->tensors[t].producer < i);
        }
        assert_int_equal(g->tensors[n->outputs[0]].producer, i);
    }
    (void)kr_graph_macs(g);
}

/* Loads @p d; expects failure with status @p want (or any failure when want < 0), a message
 * that starts with the file name and contains @p needle (when non-NULL). */
static void expect_fail(const void *d, size_t n, int want, const char *needle)
{
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_memory(d, n, NAME, &m, &err);
    if (st == KEYER_OK || (want >= 0 && st != (keyer_status)want) ||
        strncmp(err.message, NAME ": ", strlen(NAME ": ")) != 0 ||
        (needle && !strstr(err.message, needle)))
        print_message("status %s, message: %s\n(expected %s)\n", keyer_status_name(st),
                      err.message, needle ? needle : "any failure");
    assert_int_not_equal(st, KEYER_OK);
    if (want >= 0)
        assert_int_equal(st, want);
    assert_int_equal(err.status, st);
    assert_null(m);
    assert_int_equal(strncmp(err.message, NAME ": ", strlen(NAME ": ")), 0);
    if (needle)
        assert_non_null(strstr(err.message, needle));
}

static keyer_model *expect_ok(const void *d, size_t n)
{
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_memory(d, n, NAME, &m, &err);
    if (st != KEYER_OK)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    check_graph(kr_model_graph(m));
    return m;
}

/* A writable copy of the real model. */
static uint8_t *face_copy(void)
{
    uint8_t *d = malloc(face_size);
    assert_non_null(d);
    memcpy(d, face, face_size);
    return d;
}

#define NEED_FACE()                                                                               \
    if (!face) {                                                                                  \
        skip();                                                                                   \
        return;                                                                                   \
    }

/* ---- tiny and truncated files --------------------------------------------------------------- */

static void test_tiny_files(void **state)
{
    (void)state;
    expect_fail("", 0, KEYER_STATUS_BAD_DATA, "the file is 0 bytes");
    expect_fail("TFL", 3, KEYER_STATUS_BAD_DATA, "the file is 3 bytes");
    expect_fail("\x08\0\0\0TFL3", 8, KEYER_STATUS_BAD_DATA, "table at byte 8");
    expect_fail("\x00\0\0\0TFL3", 8, KEYER_STATUS_BAD_DATA, "vtable");
    expect_fail("\x04\0\0\0XXXX", 8, KEYER_STATUS_BAD_DATA, "not a TFLite model");
}

static void test_truncated(void **state)
{
    (void)state;
    NEED_FACE();
    for (size_t k = 0; k < 64; k++)
        expect_fail(face, face_size * k / 64, KEYER_STATUS_BAD_DATA, NULL);
    for (size_t n = 0; n < 256; n++)
        expect_fail(face, n, KEYER_STATUS_BAD_DATA, NULL);
    /* The last buffer's data ends within the final bytes: cutting them must be noticed. */
    expect_fail(face, face_size - 16, KEYER_STATUS_BAD_DATA, NULL);
    keyer_model *m = expect_ok(face, face_size);
    keyer_model_destroy(&m);
}

/* ---- targeted breaks in the real model ------------------------------------------------------- */

typedef struct layout {
    size_t root, sub, tensors, ops, codes, buffers, inputs;
    size_t in_tensor;  /* table of the graph input tensor */
    size_t deq_src;    /* table of the first DEQUANTIZE's FLOAT16 source */
} layout;

static layout find_layout(const uint8_t *d)
{
    layout l;
    l.root = kt_nav_root(d);
    l.sub = kt_nav_subgraph0(d);
    l.tensors = kt_nav_vec(d, l.sub, 0);
    l.inputs = kt_nav_vec(d, l.sub, 1);
    l.ops = kt_nav_vec(d, l.sub, 3);
    l.codes = kt_nav_vec(d, l.root, 1);
    l.buffers = kt_nav_vec(d, l.root, 4);
    l.in_tensor = kt_nav_elem(d, l.tensors, kt_nav_u32(d, l.inputs + 4));
    l.deq_src = 0;
    for (uint32_t i = 0; i < kt_nav_u32(d, l.ops) && !l.deq_src; i++) {
        size_t op = kt_nav_elem(d, l.ops, i);
        size_t ci = kt_nav_field(d, op, 0);
        size_t code = kt_nav_elem(d, l.codes, ci ? kt_nav_u32(d, ci) : 0);
        size_t dep = kt_nav_field(d, code, 0);
        if (dep && d[dep] == 6)
            l.deq_src = kt_nav_elem(d, l.tensors, kt_nav_u32(d, kt_nav_vec(d, op, 1) + 4));
    }
    assert_true(l.deq_src != 0);
    return l;
}

static size_t vtable_of(const uint8_t *d, size_t table)
{
    return table - (size_t)(int32_t)kt_nav_u32(d, table);
}

static void test_broken_face(void **state)
{
    (void)state;
    NEED_FACE();
    uint8_t *d = face_copy();
    const layout l = find_layout(d);
    size_t n = face_size;
    char msg[128];

    d[4] = 'X'; /* wrong magic */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "not a TFLite model: bytes 4-7 are not the file "
                "identifier TFL3");
    memcpy(d, face, n);

    kt_nav_set_u32(d, 0, (uint32_t)n + 100); /* root offset past the end */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "model: table at byte");
    kt_nav_set_u32(d, 0, (uint32_t)l.root + 2); /* misaligned root */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "is misaligned");
    memcpy(d, face, n);

    kt_nav_set_u32(d, l.root, (uint32_t)-(int32_t)n); /* vtable past the end */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "model: the vtable of the table at byte");
    memcpy(d, face, n);

    size_t vt = vtable_of(d, l.root);
    d[vt] = 0xff; /* odd vtable size */
    d[vt + 1] = 0xff;
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "has an invalid size");
    memcpy(d, face, n);
    d[vt + 4 + 2 * 2] = 0xf0; /* subgraphs field offset beyond the table */
    d[vt + 5 + 2 * 2] = 0x0f;
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "field 'subgraphs' (offset");
    memcpy(d, face, n);
    d[vt + 4 + 2 * 2] = (uint8_t)(d[vt + 4 + 2 * 2] + 1); /* misaligned field */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "field 'subgraphs' at byte");
    memcpy(d, face, n);

    kt_nav_set_u32(d, kt_nav_field(d, l.root, 0), 2); /* schema version */
    expect_fail(d, n, KEYER_STATUS_UNSUPPORTED, "schema version 2; keyer reads version 3");
    memcpy(d, face, n);

    kt_nav_set_u32(d, kt_nav_vec(d, l.root, 2), 2); /* two subgraphs */
    expect_fail(d, n, KEYER_STATUS_UNSUPPORTED, "the model has 2 subgraphs");
    kt_nav_set_u32(d, kt_nav_vec(d, l.root, 2), 0);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "the model has no subgraph");
    memcpy(d, face, n);

    kt_nav_set_u32(d, l.tensors, 0x7fffffff); /* huge vector length */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "vector 'tensors' at byte");
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "claims 2147483647 elements of 4 bytes");
    memcpy(d, face, n);
    kt_nav_set_u32(d, kt_nav_field(d, l.sub, 0), 0xfffffff0u); /* reference past the end */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "subgraph 0: field 'tensors' at byte");
    memcpy(d, face, n);

    size_t name = kt_nav_vec(d, l.in_tensor, 3); /* string without its NUL */
    d[name + 4 + kt_nav_u32(d, name)] = 'x';
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "string 'name' at byte");
    memcpy(d, face, n);
    kt_nav_set_u32(d, name, 0x7ffffff0u); /* string past the end */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "vector 'name' at byte");
    memcpy(d, face, n);

    size_t shape = kt_nav_vec(d, l.in_tensor, 0);
    kt_nav_set_u32(d, shape + 8, (uint32_t)-3); /* negative dimension */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "'input': dimension 1 is -3");
    kt_nav_set_u32(d, shape + 8, 1u << 20); /* huge dimensions */
    kt_nav_set_u32(d, shape + 12, 1u << 20);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "has more than 268435456 elements");
    memcpy(d, face, n);
    kt_nav_set_u32(d, shape, 7); /* rank 7 */
    expect_fail(d, n, KEYER_STATUS_UNSUPPORTED, "has rank 7");
    memcpy(d, face, n);
    assert_true(kt_nav_field(d, l.deq_src, 1) != 0);
    d[kt_nav_field(d, l.deq_src, 1)] = 9; /* an INT8 weight */
    expect_fail(d, n, KEYER_STATUS_UNSUPPORTED, "has type INT8 (9)");
    memcpy(d, face, n);

    /* A constant larger than its buffer, and a buffer index out of range. */
    size_t src_shape = kt_nav_vec(d, l.deq_src, 0);
    uint32_t dim0 = kt_nav_u32(d, src_shape + 4);
    uint32_t buffer = kt_nav_u32(d, kt_nav_field(d, l.deq_src, 2));
    size_t bytes = kt_nav_u32(d, kt_nav_vec(d, kt_nav_elem(d, l.buffers, buffer), 0));
    kt_nav_set_u32(d, src_shape + 4, dim0 + 1);
    snprintf(msg, sizeof(msg), "needs %zu bytes but buffer %u holds %zu",
             bytes / dim0 * (dim0 + 1), buffer, bytes);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, msg);
    memcpy(d, face, n);
    kt_nav_set_u32(d, kt_nav_field(d, l.deq_src, 2), 60000);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "uses buffer 60000, but the model has 88 buffers");
    memcpy(d, face, n);

    /* Operators: tensor index, output index, opcode index, unknown builtin. */
    size_t op0 = kt_nav_elem(d, l.ops, 0);
    kt_nav_set_u32(d, kt_nav_vec(d, op0, 1) + 4, 9999);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA,
                "operator 0 (DEQUANTIZE): input 0 is tensor 9999, but the subgraph has 250 tensors");
    memcpy(d, face, n);
    kt_nav_set_u32(d, kt_nav_vec(d, op0, 2) + 4, (uint32_t)-1);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "output 0 is tensor -1");
    memcpy(d, face, n);
    kt_nav_set_u32(d, kt_nav_vec(d, op0, 2), 2);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "operator 0 (DEQUANTIZE) has 2 outputs");
    memcpy(d, face, n);
    kt_nav_set_u32(d, l.inputs + 4, 5000);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "graph input 0 is tensor 5000");
    memcpy(d, face, n);
    int done = 0;
    for (uint32_t i = 0; i < kt_nav_u32(d, l.ops) && !done; i++) {
        size_t ci = kt_nav_field(d, kt_nav_elem(d, l.ops, i), 0);
        if (!ci)
            continue;
        kt_nav_set_u32(d, ci, 9999);
        snprintf(msg, sizeof(msg), "operator %u uses operator code 9999, but the model has %u",
                 i, kt_nav_u32(d, l.codes));
        expect_fail(d, n, KEYER_STATUS_BAD_DATA, msg);
        done = 1;
    }
    assert_true(done);
    memcpy(d, face, n);
    d[kt_nav_field(d, kt_nav_elem(d, l.codes, 0), 0)] = 25; /* SOFTMAX */
    expect_fail(d, n, KEYER_STATUS_UNSUPPORTED, "is SOFTMAX (builtin 25), which keyer does not "
                "support");
    /* A negative deprecated code loses to builtin_code (0 = ADD, absent here): max() rule. */
    d[kt_nav_field(d, kt_nav_elem(d, l.codes, 0), 0)] = 0x90; /* -112 */
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "(ADD) carries builtin options of type 1, but ADD "
                "takes type 11");
    free(d);
}

/* ---- hand-assembled models ------------------------------------------------------------------- */

static const uint16_t half_w[4 * 3 * 3 * 2] = {
    0x3c00, 0x0001, 0x8000, 0x7bff, 0x3800, 0xb800, 0x03ff, 0x0400, 0x3c00,
    0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00,
};
static const float f_bias4[4] = {0.1f, 0.2f, 0.3f, 0.4f};
static const float f_dw[1 * 3 * 3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3,
                                          4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6,
                                          7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9};
static const float f_scale[4] = {1, 2, 3, 4};
static const float f_alpha[4] = {0.25f, 0.5f, 0.75f, 1.0f};
static const int32_t i_axes[2] = {1, 2};
static const int32_t i_pads[8] = {0, 0, 1, 1, 1, 1, 0, 0};
static const int32_t i_size[2] = {6, 6};
static const float f_tw[1 * 2 * 2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const float f_tb[1] = {0.5f};
static const int32_t i_shape[2] = {1, -1};
static const uint8_t tconv_opts[12] = {1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0};

enum { F32 = 0, F16 = 1, I32 = 2 };

/* Every operator keyer supports, chained into one valid graph. */
static const kt_tensor all_tensors[] = {
    /* 0 */ {"in", F32, 4, {1, 4, 4, 2}, 0},
    /* 1 */ {"conv_w16", F16, 4, {4, 3, 3, 2}, 1},
    /* 2 */ {"conv_w", F32, 4, {4, 3, 3, 2}, 0},
    /* 3 */ {"conv_b", F32, 1, {4}, 2},
    /* 4 */ {"conv", F32, 4, {1, 2, 2, 4}, 0},
    /* 5 */ {"dw_w", F32, 4, {1, 3, 3, 4}, 3},
    /* 6 */ {"dw", F32, 4, {1, 2, 2, 4}, 0},
    /* 7 */ {"add", F32, 4, {1, 2, 2, 4}, 0},
    /* 8 */ {"scale", F32, 4, {1, 1, 1, 4}, 4},
    /* 9 */ {"mul", F32, 4, {1, 2, 2, 4}, 0},
    /* 10 */ {"relu", F32, 4, {1, 2, 2, 4}, 0},
    /* 11 */ {"relu6", F32, 4, {1, 2, 2, 4}, 0},
    /* 12 */ {"hswish", F32, 4, {1, 2, 2, 4}, 0},
    /* 13 */ {"sigmoid", F32, 4, {1, 2, 2, 4}, 0},
    /* 14 */ {"alpha", F32, 3, {1, 1, 4}, 5},
    /* 15 */ {"prelu", F32, 4, {1, 2, 2, 4}, 0},
    /* 16 */ {"avg", F32, 4, {1, 1, 1, 4}, 0},
    /* 17 */ {"max", F32, 4, {1, 2, 2, 4}, 0},
    /* 18 */ {"axes", I32, 1, {2}, 6},
    /* 19 */ {"mean", F32, 4, {1, 1, 1, 4}, 0},
    /* 20 */ {"pads", I32, 2, {4, 2}, 7},
    /* 21 */ {"pad", F32, 4, {1, 3, 3, 4}, 0},
    /* 22 */ {"size", I32, 1, {2}, 8},
    /* 23 */ {"resize", F32, 4, {1, 6, 6, 4}, 0},
    /* 24 */ {"tconv_w", F32, 4, {1, 2, 2, 4}, 9},
    /* 25 */ {"tconv_b", F32, 1, {1}, 10},
    /* 26 */ {"tconv", F32, 4, {1, 12, 12, 1}, 0},
    /* 27 */ {"shape", I32, 1, {2}, 11},
    /* 28 */ {"flat", F32, 2, {1, 144}, 0},
    /* 29 */ {"avg_flat", F32, 2, {1, 4}, 0},
    /* 30 */ {"concat", F32, 2, {1, 148}, 0},
    /* 31 */ {"dw_b", F32, 1, {4}, 2},
};

static const kt_buffer all_buffers[] = {
    {NULL, 0},
    {half_w, sizeof(half_w)},
    {f_bias4, sizeof(f_bias4)},
    {f_dw, sizeof(f_dw)},
    {f_scale, sizeof(f_scale)},
    {f_alpha, sizeof(f_alpha)},
    {i_axes, sizeof(i_axes)},
    {i_pads, sizeof(i_pads)},
    {i_size, sizeof(i_size)},
    {f_tw, sizeof(f_tw)},
    {f_tb, sizeof(f_tb)},
    {i_shape, sizeof(i_shape)},
};

#define N_ALL_OPS 19

static void all_ops(kt_op *ops)
{
    memset(ops, 0, sizeof(kt_op) * N_ALL_OPS);
    int i = 0;
    ops[i++] = (kt_op){.code = 6, .n_in = 1, .in = {1}, .n_out = 1, .out = {2}};
    ops[i++] = (kt_op){.code = 3, .n_in = 3, .in = {0, 2, 3}, .n_out = 1, .out = {4},
                       .opt_type = 1, .n_opt = 4,
                       .opt = {kt_i8(0), kt_i32(2), kt_i32(2), kt_i8(0)}};
    ops[i++] = (kt_op){.code = 4, .n_in = 3, .in = {4, 5, 31}, .n_out = 1, .out = {6},
                       .opt_type = 2, .n_opt = 5,
                       .opt = {kt_i8(0), kt_i32(1), kt_i32(1), kt_i32(1), kt_i8(0)}};
    ops[i++] = (kt_op){.code = 0, .n_in = 2, .in = {4, 6}, .n_out = 1, .out = {7},
                       .opt_type = 11, .n_opt = 1, .opt = {kt_i8(3)}};
    ops[i++] = (kt_op){.code = 18, .n_in = 2, .in = {7, 8}, .n_out = 1, .out = {9},
                       .opt_type = 21, .n_opt = 1, .opt = {kt_i8(0)}};
    ops[i++] = (kt_op){.code = 19, .n_in = 1, .in = {9}, .n_out = 1, .out = {10}};
    ops[i++] = (kt_op){.code = 21, .n_in = 1, .in = {10}, .n_out = 1, .out = {11}};
    ops[i++] = (kt_op){.code = 117, .n_in = 1, .in = {11}, .n_out = 1, .out = {12}};
    ops[i++] = (kt_op){.code = 14, .n_in = 1, .in = {12}, .n_out = 1, .out = {13}};
    ops[i++] = (kt_op){.code = 54, .n_in = 2, .in = {13, 14}, .n_out = 1, .out = {15}};
    ops[i++] = (kt_op){.code = 1, .n_in = 1, .in = {15}, .n_out = 1, .out = {16},
                       .opt_type = 5, .n_opt = 6,
                       .opt = {kt_i8(1), kt_i32(2), kt_i32(2), kt_i32(2), kt_i32(2), kt_i8(0)}};
    ops[i++] = (kt_op){.code = 17, .n_in = 1, .in = {15}, .n_out = 1, .out = {17},
                       .opt_type = 5, .n_opt = 6,
                       .opt = {kt_i8(0), kt_i32(1), kt_i32(1), kt_i32(2), kt_i32(2), kt_i8(0)}};
    ops[i++] = (kt_op){.code = 40, .n_in = 2, .in = {17, 18}, .n_out = 1, .out = {19},
                       .opt_type = 27, .n_opt = 1, .opt = {kt_i8(1)}};
    ops[i++] = (kt_op){.code = 34, .n_in = 2, .in = {19, 20}, .n_out = 1, .out = {21}};
    ops[i++] = (kt_op){.code = 23, .n_in = 2, .in = {21, 22}, .n_out = 1, .out = {23},
                       .opt_type = 15, .n_opt = 4,
                       .opt = {kt_absent(), kt_absent(), kt_i8(0), kt_i8(1)}};
    ops[i++] = (kt_op){.code = 32, .custom = "Convolution2DTransposeBias", .n_in = 3,
                       .in = {23, 24, 25}, .n_out = 1, .out = {26},
                       .custom_options = tconv_opts, .custom_options_len = 12};
    ops[i++] = (kt_op){.code = 22, .n_in = 2, .in = {26, 27}, .n_out = 1, .out = {28}};
    ops[i++] = (kt_op){.code = 22, .n_in = 1, .in = {16}, .n_out = 1, .out = {29}};
    ops[i++] = (kt_op){.code = 2, .n_in = 2, .in = {28, 29}, .n_out = 1, .out = {30},
                       .opt_type = 10, .n_opt = 2, .opt = {kt_i32(-1), kt_i8(0)}};
    assert_int_equal(i, N_ALL_OPS);
}

static kt_model all_model(const kt_op *ops, kt_tensor *tensors)
{
    memcpy(tensors, all_tensors, sizeof(all_tensors));
    kt_model m = {.n_tensors = (int)(sizeof(all_tensors) / sizeof(all_tensors[0])),
                  .tensors = tensors, .n_ops = N_ALL_OPS, .ops = ops,
                  .n_buffers = (int)(sizeof(all_buffers) / sizeof(all_buffers[0])),
                  .buffers = all_buffers, .n_inputs = 1, .inputs = {0}, .n_outputs = 1,
                  .outputs = {30}, .description = "every keyer operator"};
    return m;
}

static uint8_t *build(const kt_model *m, size_t *size)
{
    uint8_t *d = kt_tflite_build(m, size);
    assert_non_null(d);
    return d;
}

static void write_seed(const char *file, const uint8_t *d, size_t n)
{
    const char *dir = getenv("KEYER_WRITE_SEEDS");
    if (!dir || !*dir)
        return;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    assert_int_equal(kt_write_file(path, d, n), 0);
}

static void test_all_ops_model(void **state)
{
    (void)state;
    kt_op ops[N_ALL_OPS];
    kt_tensor tensors[sizeof(all_tensors) / sizeof(all_tensors[0])];
    all_ops(ops);
    kt_model km = all_model(ops, tensors);
    size_t n;
    uint8_t *d = build(&km, &n);
    write_seed("all_ops.tflite", d, n);
    keyer_model *m = expect_ok(d, n);
    const kr_graph *g = kr_model_graph(m);
    assert_int_equal(g->n_nodes, N_ALL_OPS - 1);
    /* every kr_op a TFLite file can name is there (those from KR_OP_SUB on come from ONNX) */
    for (int op = 0; op < KR_OP_SUB; op++) {
        int found = 0;
        for (int i = 0; i < g->n_nodes; i++)
            found |= g->nodes[i].op == (kr_op)op;
        assert_true(found);
    }
    const kr_node *conv = &g->nodes[0], *add = &g->nodes[2], *avg = &g->nodes[9];
    assert_int_equal(conv->p.window.pad_bottom, 1);
    assert_int_equal(add->activation, KR_ACT_RELU6);
    assert_int_equal(avg->p.window.padding, KR_PADDING_VALID);
    assert_int_equal(g->nodes[N_ALL_OPS - 2].p.concat.axis, 1); /* -1 normalised */
    assert_int_equal(g->nodes[11].p.mean.axes_mask, 6u);
    assert_int_equal(g->nodes[12].p.pad.before[1], 1);
    assert_int_equal(g->nodes[14].p.window.stride_h, 2);
    keyer_model_destroy(&m);
    free(d);
}

/* Builds the all-ops model after @p edit changed it, and expects failure. */
typedef void (*edit_fn)(kt_op *ops, kt_tensor *tensors, kt_model *m);

static void expect_edit_fails(edit_fn edit, int want, const char *needle)
{
    kt_op ops[N_ALL_OPS];
    kt_tensor tensors[sizeof(all_tensors) / sizeof(all_tensors[0])];
    all_ops(ops);
    kt_model km = all_model(ops, tensors);
    edit(ops, tensors, &km);
    size_t n;
    uint8_t *d = build(&km, &n);
    expect_fail(d, n, want, needle);
    free(d);
}

static void e_custom(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[15].custom = "MyOp"; }
static void e_builtin(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[5].code = 250; }
static void e_negative(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[5].code = -5; }
static void e_softmax(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[5].code = 25; }
static void e_cycle(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)t;
    (void)m;
    o[3].in[1] = 10; /* ADD reads the RELU output that comes later */
}
static void e_twice(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)t;
    (void)m;
    o[6].out[0] = 10; /* RELU6 writes RELU's output again */
}
static void e_int_input(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)m; t[0].type = I32; }
static void e_const_input(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)o;
    (void)m;
    t[0] = (kt_tensor){"in", F32, 1, {4}, 2};
}
static void e_tconv_short(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)t;
    (void)m;
    o[15].custom_options_len = 8;
}
static void e_tconv_pad(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)t;
    (void)m;
    static const uint8_t bad[12] = {7, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0};
    o[15].custom_options = bad;
}
static void e_f16_direct(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[1].in[1] = 1; }
static void e_deq_act(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[0].in[0] = 0; }
static void e_opt_type(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[1].opt_type = 5; }
static void e_tanh(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[1].opt[3] = kt_i8(4); }
static void e_act_bad(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[3].opt[0] = kt_i8(9); }
static void e_padding(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[1].opt[0] = kt_i8(3); }
static void e_conv_shape(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)m; t[4].dims[1] = 3; }
static void e_grouped(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)o;
    (void)m;
    t[0].dims[3] = 4; /* input has 4 channels, weights take 2 */
}
static void e_no_bias(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[1].in[2] = -1; }
static void e_dw_weights(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)o;
    (void)m;
    t[5].dims[0] = 2;
    t[5].dims[3] = 2; /* same byte count, wrong layout */
}
static void e_reshape(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)m; t[29].dims[1] = 5; }
static void e_mean_batch(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)t;
    (void)m;
    static const int32_t axes0[2] = {0, 2};
    static kt_buffer b[sizeof(all_buffers) / sizeof(all_buffers[0])];
    memcpy(b, all_buffers, sizeof(b));
    b[6].data = axes0;
    m->buffers = b;
    (void)o;
}
static void e_pad_shape(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)o;
    (void)m;
    t[20].dims[0] = 2;
    t[20].dims[1] = 4;
}
static void e_resize(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)m; t[23].dims[2] = 7; }
static void e_concat_axis(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[18].opt[0] = kt_i32(0); }
static void e_concat_act(kt_op *o, kt_tensor *t, kt_model *m) { (void)t; (void)m; o[18].opt[1] = kt_i8(1); }
static void e_out_const(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)t; m->outputs[0] = 8; }
static void e_no_outputs(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)t; m->n_outputs = 0; }
static void e_deq_shape(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)m; t[2].dims[0] = 2; t[2].dims[3] = 4; }
static void e_buffer_size(kt_op *o, kt_tensor *t, kt_model *m) { (void)o; (void)m; t[8].dims[3] = 5; }
static void e_nine_inputs(kt_op *o, kt_tensor *t, kt_model *m)
{
    (void)t;
    (void)m;
    o[18].n_in = 9;
    for (int i = 0; i < 9; i++)
        o[18].in[i] = 28;
}

static void test_broken_hand_models(void **state)
{
    (void)state;
    const int B = KEYER_STATUS_BAD_DATA, U = KEYER_STATUS_UNSUPPORTED;
    expect_edit_fails(e_custom, U, "operator 15 is custom operator 'MyOp', which keyer does not "
                      "support");
    expect_edit_fails(e_builtin, U, "operator 5 has builtin code 250, which keyer does not know");
    expect_edit_fails(e_negative, B, "operator code 5: builtin code -5 is negative");
    expect_edit_fails(e_softmax, U, "operator 5 is SOFTMAX (builtin 25), which keyer does not "
                      "support");
    expect_edit_fails(e_cycle, B, "operator 3 (ADD): input 1, tensor 'relu', is read before any "
                      "operator writes it");
    expect_edit_fails(e_twice, B, "operator 6 (RELU6): writes tensor 'relu', which an earlier "
                      "operator already wrote");
    expect_edit_fails(e_int_input, U, "graph input 0 (tensor 0 'in') is INT32; keyer's model "
                      "inputs must be FLOAT32");
    expect_edit_fails(e_const_input, B, "graph input 0 (tensor 0 'in') is a constant");
    expect_edit_fails(e_tconv_short, B, "operator 15 (Convolution2DTransposeBias): custom "
                      "options are 8 bytes");
    expect_edit_fails(e_tconv_pad, B, "padding 7 is neither SAME (1) nor VALID (2)");
    expect_edit_fails(e_f16_direct, U, "tensor 1 'conv_w16' is a FLOAT16 constant read directly");
    expect_edit_fails(e_deq_act, U, "operator 0 (DEQUANTIZE): input tensor 0 'in' is not a "
                      "constant");
    expect_edit_fails(e_opt_type, B, "operator 1 (CONV_2D) carries builtin options of type 5");
    expect_edit_fails(e_tanh, U, "operator 1 (CONV_2D): fused activation TANH is not supported");
    expect_edit_fails(e_act_bad, B, "operator 3 (ADD): fused activation 9 is not a valid");
    expect_edit_fails(e_padding, B, "operator 1 (CONV_2D): padding 3 is neither SAME (0) nor "
                      "VALID (1)");
    expect_edit_fails(e_conv_shape, B, "operator 1 (CONV_2D): output tensor 'conv' has shape "
                      "[1,3,2,4] but the operator gives [1,2,2,4]");
    expect_edit_fails(e_grouped, U, "grouped convolution is not supported");
    expect_edit_fails(e_no_bias, U, "operator 1 (CONV_2D): has no bias input");
    expect_edit_fails(e_dw_weights, B, "operator 2 (DEPTHWISE_CONV_2D): weights 'dw_w' "
                      "[2,3,3,2] are not [1,KH,KW,C*M]");
    expect_edit_fails(e_reshape, B, "operator 17 (RESHAPE): input 'avg' [1,1,1,4] and output "
                      "'avg_flat' [1,5] differ in element count");
    expect_edit_fails(e_mean_batch, U, "operator 12 (MEAN): reduces the batch axis 0");
    expect_edit_fails(e_pad_shape, B, "operator 13 (PAD): paddings 'pads' [2,4] are not [4,2]");
    expect_edit_fails(e_resize, B, "operator 14 (RESIZE_BILINEAR): output tensor 'resize' has "
                      "shape [1,6,7,4] but the operator gives [1,6,6,4]");
    expect_edit_fails(e_concat_axis, U, "operator 18 (CONCATENATION): concatenates along the "
                      "batch axis 0");
    expect_edit_fails(e_concat_act, U, "operator 18 (CONCATENATION) has a fused activation");
    expect_edit_fails(e_out_const, U, "graph output 0, tensor 'scale', is a constant");
    expect_edit_fails(e_no_outputs, B, "subgraph 0 has no outputs");
    expect_edit_fails(e_deq_shape, B, "operator 0 (DEQUANTIZE): output tensor 2 'conv_w' does "
                      "not have the shape of input tensor 1 'conv_w16'");
    expect_edit_fails(e_buffer_size, B, "tensor 8 'scale' needs 20 bytes but buffer 4 holds 16");
    expect_edit_fails(e_nine_inputs, U, "operator 18 (CONCATENATION) has 9 inputs; keyer "
                      "handles at most 8");
}

/* Many tensors sharing one buffer must not make the loader allocate beyond O(file size). */
static void test_shared_buffer_budget(void **state)
{
    (void)state;
    enum { N = 400, ELEMS = 2048 };
    static float big[ELEMS];
    kt_tensor *t = calloc(2 * N + 1, sizeof(*t));
    kt_op *o = calloc(N, sizeof(*o));
    assert_non_null(t);
    assert_non_null(o);
    kt_buffer b[2] = {{NULL, 0}, {big, sizeof(big)}};
    t[0] = (kt_tensor){"in", F32, 2, {1, ELEMS}, 0};
    for (int i = 0; i < N; i++) {
        t[1 + 2 * i] = (kt_tensor){NULL, F32, 2, {1, ELEMS}, 1};
        t[2 + 2 * i] = (kt_tensor){NULL, F32, 2, {1, ELEMS}, 0};
        o[i] = (kt_op){.code = 0, .n_in = 2, .in = {2 * i, 1 + 2 * i}, .n_out = 1,
                       .out = {2 + 2 * i}};
    }
    kt_model m = {.n_tensors = 2 * N + 1, .tensors = t, .n_ops = N, .ops = o, .n_buffers = 2,
                  .buffers = b, .n_inputs = 1, .inputs = {0}, .n_outputs = 1,
                  .outputs = {2 * N}};
    size_t n;
    uint8_t *d = build(&m, &n);
    expect_fail(d, n, KEYER_STATUS_BAD_DATA, "over 4 times the file size");
    free(d);
    /* The same graph with few sharers loads. */
    m.n_ops = 4;
    m.outputs[0] = 8;
    d = build(&m, &n);
    keyer_model *km = expect_ok(d, n);
    assert_int_equal(keyer_model_node_count(km), 4);
    keyer_model_destroy(&km);
    free(d);
    free(t);
    free(o);
}

/* ---- deterministic mutation loop ------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

typedef struct mutation_stats {
    long runs, loaded;
} mutation_stats;

/* @p iterations mutations of @p d (1-4 bytes each; 3 in 4 drawn from @p hot positions when
 * given), each loaded and checked, bounded by @p seconds. */
static mutation_stats mutate(uint8_t *d, size_t n, const size_t *hot, size_t n_hot,
                             long iterations, double seconds, uint64_t seed)
{
    mutation_stats s = {0, 0};
    double end = now_s() + seconds;
    for (long it = 0; it < iterations && now_s() < end; it++) {
        size_t pos[4];
        uint8_t old[4];
        int k = 1 + (int)(rng_next(&seed) % 4);
        for (int j = 0; j < k; j++) {
            uint64_t r = rng_next(&seed);
            pos[j] = (hot && r % 4 != 0) ? hot[(r >> 8) % n_hot] : (size_t)((r >> 8) % n);
            old[j] = d[pos[j]];
            uint64_t v = rng_next(&seed);
            switch (v % 4) {
            case 0: d[pos[j]] ^= (uint8_t)(1u << ((v >> 8) % 8)); break;
            case 1: d[pos[j]] = (uint8_t)(v >> 16); break;
            case 2: d[pos[j]] = 0; break;
            default: d[pos[j]] = 0xff; break;
            }
        }
        keyer_error err = {0};
        keyer_model *m = NULL;
        keyer_status st = keyer_model_load_memory(d, n, NAME, &m, &err);
        if (st == KEYER_OK) {
            check_graph(kr_model_graph(m));
            keyer_model_destroy(&m);
            s.loaded++;
        } else {
            assert_null(m);
            assert_int_equal(strncmp(err.message, NAME ": ", strlen(NAME ": ")), 0);
        }
        for (int j = k - 1; j >= 0; j--)
            d[pos[j]] = old[j];
        s.runs++;
    }
    return s;
}

static void test_mutations(void **state)
{
    (void)state;
    NEED_FACE();
    uint8_t *d = face_copy();
    /* Hot positions: every byte outside the constant buffers' data (the FlatBuffer structure). */
    const layout l = find_layout(d);
    uint8_t *is_data = calloc(face_size, 1);
    size_t *hot = malloc(face_size * sizeof(*hot));
    assert_non_null(is_data);
    assert_non_null(hot);
    for (uint32_t b = 0; b < kt_nav_u32(d, l.buffers); b++) {
        size_t v = kt_nav_vec(d, kt_nav_elem(d, l.buffers, b), 0);
        if (v)
            memset(is_data + v + 4, 1, kt_nav_u32(d, v));
    }
    size_t n_hot = 0;
    for (size_t i = 0; i < face_size; i++)
        if (!is_data[i])
            hot[n_hot++] = i;
    mutation_stats s = mutate(d, face_size, hot, n_hot, 20000, 20.0, 0x6b657965721234ull);
    print_message("face_detection_short_range: %ld mutations (%zu structural bytes), %ld "
                  "still loaded\n", s.runs, n_hot, s.loaded);
    assert_int_equal(memcmp(d, face, face_size), 0);
    assert_true(s.runs >= 1000);

    kt_op ops[N_ALL_OPS];
    kt_tensor tensors[sizeof(all_tensors) / sizeof(all_tensors[0])];
    all_ops(ops);
    kt_model km = all_model(ops, tensors);
    size_t n;
    uint8_t *a = build(&km, &n);
    s = mutate(a, n, NULL, 0, 20000, 10.0, 0x1234567ull);
    print_message("all_ops: %ld mutations, %ld still loaded\n", s.runs, s.loaded);
    assert_true(s.runs >= 1000);
    free(a);
    free(hot);
    free(is_data);
    free(d);
}

static void test_write_seeds(void **state)
{
    (void)state;
    /* A small valid model per family, for the libFuzzer corpus. */
    static const uint16_t w16[6] = {0x3c00, 0x0001, 0x7bff, 0x8000, 0x3800, 0xc000};
    static const float bias[3] = {1, 2, 3};
    static const kt_tensor t[] = {
        {"in", F32, 4, {1, 4, 4, 2}, 0}, {"w16", F16, 4, {3, 1, 1, 2}, 1},
        {"w", F32, 4, {3, 1, 1, 2}, 0},  {"b", F32, 1, {3}, 2},
        {"out", F32, 4, {1, 4, 4, 3}, 0},
    };
    kt_buffer b[] = {{NULL, 0}, {w16, sizeof(w16)}, {bias, sizeof(bias)}};
    kt_op o[2] = {{.code = 6, .deprecated_only = 1, .n_in = 1, .in = {1}, .n_out = 1, .out = {2}},
                  {.code = 3, .deprecated_only = 1, .n_in = 3, .in = {0, 2, 3}, .n_out = 1,
                   .out = {4}, .opt_type = 1, .n_opt = 3,
                   .opt = {kt_i8(1), kt_i32(1), kt_i32(1)}}};
    kt_model m = {.n_tensors = 5, .tensors = t, .n_ops = 2, .ops = o, .n_buffers = 3,
                  .buffers = b, .n_inputs = 1, .inputs = {0}, .n_outputs = 1, .outputs = {4}};
    size_t n;
    uint8_t *d = build(&m, &n);
    keyer_model *km = expect_ok(d, n);
    assert_int_equal(kr_model_graph(km)->nodes[0].p.window.padding, KR_PADDING_VALID);
    keyer_model_destroy(&km);
    write_seed("tiny_conv.tflite", d, n);
    free(d);
}

/* A sparse model: 1x1 convolution weights stored block-sparse (FLOAT16, int32 segments, uint16
 * indices, blocks of 2 along the input channels) behind DENSIFY and DEQUANTIZE, then
 * DEPTH_TO_SPACE; written as a seed and mutated (the densifier's checks under fire). */
static uint8_t *sparse_model(size_t *n)
{
    static const uint16_t vals[12] = {0x3c00, 0, 0x4000, 0, 0, 0x4200, 0x4400, 0x4500, 0xc600, 0,
                                      0, 0x4780};
    static const float bias[4] = {0, 1, 2, 3};
    static const int seg[5] = {0, 2, 2, 4, 6};
    static const int idx[6] = {0, 1, 0, 1, 0, 1};
    static kt_sparsity sp;
    memset(&sp, 0, sizeof(sp));
    sp.n_trav = 5;
    for (int i = 0; i < 5; i++)
        sp.trav[i] = i;
    sp.n_block = 1;
    sp.block_map[0] = 3;
    sp.n_dims = 5;
    sp.dims[0] = (kt_dim_meta){0, 4, 0, 0, NULL, 0, 0, NULL};
    sp.dims[1] = (kt_dim_meta){0, 1, 0, 0, NULL, 0, 0, NULL};
    sp.dims[2] = (kt_dim_meta){0, 1, 0, 0, NULL, 0, 0, NULL};
    sp.dims[3] = (kt_dim_meta){1, 0, 1, 5, seg, 2, 6, idx};
    sp.dims[4] = (kt_dim_meta){0, 2, 0, 0, NULL, 0, 0, NULL};
    static const kt_tensor t[] = {
        {"in", F32, 4, {1, 2, 2, 4}, 0},  {"w_sparse", F16, 4, {4, 1, 1, 4}, 1},
        {"w16", F16, 4, {4, 1, 1, 4}, 0}, {"w", F32, 4, {4, 1, 1, 4}, 0},
        {"b", F32, 1, {4}, 2},            {"conv", F32, 4, {1, 2, 2, 4}, 0},
        {"out", F32, 4, {1, 4, 4, 1}, 0},
    };
    static const kt_sparsity *sparsity[7] = {NULL, &sp, NULL, NULL, NULL, NULL, NULL};
    kt_buffer b[] = {{NULL, 0}, {vals, sizeof(vals)}, {bias, sizeof(bias)}};
    kt_op o[4] = {{.code = 124, .n_in = 1, .in = {1}, .n_out = 1, .out = {2}},
                  {.code = 6, .n_in = 1, .in = {2}, .n_out = 1, .out = {3}},
                  {.code = 3, .n_in = 3, .in = {0, 3, 4}, .n_out = 1, .out = {5}, .opt_type = 1,
                   .n_opt = 3, .opt = {kt_i8(1), kt_i32(1), kt_i32(1)}},
                  {.code = 5, .n_in = 1, .in = {5}, .n_out = 1, .out = {6}, .opt_type = 94,
                   .n_opt = 1, .opt = {kt_i32(2)}}};
    kt_model m = {.n_tensors = 7, .tensors = t, .n_ops = 4, .ops = o, .n_buffers = 3,
                  .buffers = b, .sparsity = sparsity, .n_inputs = 1, .inputs = {0},
                  .n_outputs = 1, .outputs = {6}};
    return build(&m, n);
}

static void test_sparse_model(void **state)
{
    (void)state;
    size_t n;
    uint8_t *d = sparse_model(&n);
    keyer_model *km = expect_ok(d, n);
    const kr_graph *g = kr_model_graph(km);
    assert_int_equal(g->n_nodes, 4); /* CONV_2D, RESHAPE, TRANSPOSE, RESHAPE */
    const float *w = g->tensors[g->nodes[0].inputs[1]].data;
    assert_true(w[0] == 1.0f && w[1] == 0.0f && w[2] == 2.0f && w[15] == 7.5f);
    keyer_model_destroy(&km);
    write_seed("sparse_conv.tflite", d, n);
    mutation_stats s = mutate(d, n, NULL, 0, 20000, 10.0, 0x5ba45eull);
    print_message("sparse_conv: %ld mutations, %ld still loaded\n", s.runs, s.loaded);
    assert_true(s.runs >= 1000);
    free(d);
}

static int setup(void **state)
{
    (void)state;
    char path[1024];
    kt_model_path(path, sizeof(path), "face_detection_short_range.tflite");
    face = kt_read_file(path, &face_size);
    if (!face)
        print_message("%s is missing (run scripts/setup.sh): real-model cases are skipped\n",
                      path);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(face);
    face = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_files),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_broken_face),
        cmocka_unit_test(test_all_ops_model),
        cmocka_unit_test(test_broken_hand_models),
        cmocka_unit_test(test_shared_buffer_budget),
        cmocka_unit_test(test_write_seeds),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_sparse_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
