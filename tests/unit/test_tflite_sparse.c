/*
 * DENSIFY and DEPTH_TO_SPACE in the TFLite reader: hand-made models with sparse constants
 * (SPARSE_CSR with uint8 / uint16 / int32 segments and indices, and a block-sparse layout)
 * are densified at load into the values a dense file would hold; malformed sparsity fails
 * with BAD_DATA naming the tensor; DEPTH_TO_SPACE is lowered to RESHAPE, TRANSPOSE, RESHAPE and
 * computes TFLite's order; pose_detection.tflite (38 DENSIFY, 3 DEPTH_TO_SPACE) loads with
 * neither operator left in the graph.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keyer/nn.h"
#include "kt_tflite.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/tflite.h"
#include "testutil.h"

/* The dense weights of the test: [4,1,1,4] (C_out, kh, kw, C_in), half of them zero. */
static const float dense_w[16] = {
    1.0f, 0.0f, 2.0f, 0.0f,  /* row 0: columns 0, 2 */
    0.0f, 0.0f, 0.0f, 0.0f,  /* row 1: empty */
    0.0f, 3.0f, 4.0f, 5.0f,  /* row 2: columns 1, 2, 3 */
    -6.0f, 0.0f, 0.0f, 7.5f, /* row 3: columns 0, 3 */
};

/* The stored (non-zero) values in traversal order, FLOAT16 and FLOAT32. */
static const uint16_t csr_half[7] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0xc600, 0x4780};
static const float csr_f32[7] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, -6.0f, 7.5f};
static const int csr_seg[5] = {0, 2, 2, 5, 7};
static const int csr_idx[7] = {0, 2, 1, 2, 3, 0, 3};

/* CSR over dimension 3, the other levels dense (as pose_detection.tflite stores its 1x1
 * convolutions). */
static kt_sparsity csr_sparsity(int seg_type, int idx_type)
{
    kt_sparsity s;
    memset(&s, 0, sizeof(s));
    s.n_trav = 4;
    for (int i = 0; i < 4; i++)
        s.trav[i] = i;
    s.n_dims = 4;
    s.dims[0] = (kt_dim_meta){0, 4, 0, 0, NULL, 0, 0, NULL};
    s.dims[1] = (kt_dim_meta){0, 1, 0, 0, NULL, 0, 0, NULL};
    s.dims[2] = (kt_dim_meta){0, 1, 0, 0, NULL, 0, 0, NULL};
    s.dims[3] = (kt_dim_meta){1, 0, seg_type, 5, csr_seg, idx_type, 7, csr_idx};
    return s;
}

/* Block-sparse: dimension 3 in blocks of 2 (block_map {3}); the block rows of dimension 3
 * (2 of them) stored CSR per output channel, each present block dense. Blocks present: row 0
 * block 0 (1, 0) and block 1 (2, 0); row 2 blocks 0 (0, 3) and 1 (4, 5); row 3 blocks 0
 * (-6, 0) and 1 (0, 7.5). */
static const float block_f32[12] = {1, 0, 2, 0, 0, 3, 4, 5, -6, 0, 0, 7.5f};
static const int block_seg[5] = {0, 2, 2, 4, 6};
static const int block_idx[6] = {0, 1, 0, 1, 0, 1};

static kt_sparsity block_sparsity(void)
{
    kt_sparsity s;
    memset(&s, 0, sizeof(s));
    s.n_trav = 5;
    for (int i = 0; i < 5; i++)
        s.trav[i] = i;
    s.n_block = 1;
    s.block_map[0] = 3;
    s.n_dims = 5;
    s.dims[0] = (kt_dim_meta){0, 4, 0, 0, NULL, 0, 0, NULL};
    s.dims[1] = (kt_dim_meta){0, 1, 0, 0, NULL, 0, 0, NULL};
    s.dims[2] = (kt_dim_meta){0, 1, 0, 0, NULL, 0, 0, NULL};
    s.dims[3] = (kt_dim_meta){1, 0, 1, 5, block_seg, 2, 6, block_idx};
    s.dims[4] = (kt_dim_meta){0, 2, 0, 0, NULL, 0, 0, NULL};
    return s;
}

static const float bias4[4] = {0, 0, 0, 0};

/* input [1,2,2,4] -> CONV_2D 1x1 with weights DENSIFY(sparse) [-> DEQUANTIZE when half]. */
static uint8_t *build_sparse_conv(const kt_sparsity *sp, int half, const void *values,
                                  size_t bytes, size_t *size)
{
    kt_tensor tensors[6] = {
        {"in", 0, 4, {1, 2, 2, 4}, 0},
        {"w_sparse", half ? 1 : 0, 4, {4, 1, 1, 4}, 1},
        {"w_dense", half ? 1 : 0, 4, {4, 1, 1, 4}, 0},
        {"w", 0, 4, {4, 1, 1, 4}, 0},
        {"b", 0, 1, {4}, 2},
        {"out", 0, 4, {1, 2, 2, 4}, 0},
    };
    kt_buffer buffers[3] = {{NULL, 0}, {values, bytes}, {bias4, sizeof(bias4)}};
    kt_op ops[3];
    memset(ops, 0, sizeof(ops));
    int n = 0;
    ops[n++] = (kt_op){.code = 124, .n_in = 1, .in = {1}, .n_out = 1, .out = {2}};
    if (half)
        ops[n++] = (kt_op){.code = 6, .n_in = 1, .in = {2}, .n_out = 1, .out = {3}};
    kt_op conv = {.code = 3, .n_in = 3, .in = {0, half ? 3 : 2, 4}, .n_out = 1, .out = {5}};
    conv.opt_type = 1;
    conv.n_opt = 4;
    conv.opt[0] = kt_absent();
    conv.opt[1] = kt_i32(1);
    conv.opt[2] = kt_i32(1);
    conv.opt[3] = kt_i8(0);
    ops[n++] = conv;
    const kt_sparsity *sparsity[6] = {NULL, sp, NULL, NULL, NULL, NULL};
    kt_model m = {.n_tensors = 6, .tensors = tensors, .n_ops = n, .ops = ops, .n_buffers = 3,
                  .buffers = buffers, .sparsity = sparsity, .n_inputs = 1, .inputs = {0}, .n_outputs = 1,
                  .outputs = {5}};
    return kt_tflite_build(&m, size);
}

/* Loads, checks the graph has only the convolution and that its weights are dense_w. */
static void expect_dense(const kt_sparsity *sp, int half, const void *values, size_t bytes)
{
    size_t size;
    uint8_t *d = build_sparse_conv(sp, half, values, bytes, &size);
    assert_non_null(d);
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_memory(d, size, "sparse.tflite", &m, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    free(d);
    const kr_graph *g = kr_model_graph(m);
    assert_int_equal(g->n_nodes, 1); /* DENSIFY (and DEQUANTIZE) folded */
    assert_int_equal(g->nodes[0].op, KR_OP_CONV_2D);
    const kr_tensor *w = &g->tensors[g->nodes[0].inputs[1]];
    assert_non_null(w->data);
    const float *wf = w->data;
    for (int i = 0; i < 16; i++)
        assert_true(wf[i] == dense_w[i]);
    /* and it runs: out = in x W^T */
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = KEYER_BACKEND_REFERENCE;
    keyer_runtime *rt = NULL;
    assert_int_equal(keyer_runtime_create(m, &rp, &rt, &err), KEYER_OK);
    float *in = keyer_runtime_input_data(rt, 0);
    for (int i = 0; i < 16; i++)
        in[i] = (float)(i % 5) - 1.5f;
    assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
    const float *out = keyer_runtime_output_data(rt, 0);
    for (int p = 0; p < 4; p++)
        for (int o = 0; o < 4; o++) {
            float want = 0;
            for (int c = 0; c < 4; c++)
                want += in[p * 4 + c] * dense_w[o * 4 + c];
            assert_float_equal(out[p * 4 + o], want, 1e-5);
        }
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&m);
}

static void test_csr_index_types(void **state)
{
    (void)state;
    /* every combination of segment and index vector types, FLOAT16 behind DEQUANTIZE */
    for (int seg = 1; seg <= 3; seg++)
        for (int idx = 1; idx <= 3; idx++) {
            kt_sparsity sp = csr_sparsity(seg, idx);
            expect_dense(&sp, 1, csr_half, sizeof(csr_half));
        }
    /* FLOAT32 sparse weights read by the convolution straight from DENSIFY */
    kt_sparsity sp = csr_sparsity(3, 3);
    expect_dense(&sp, 0, csr_f32, sizeof(csr_f32));
}

static void test_block_sparse(void **state)
{
    (void)state;
    kt_sparsity sp = block_sparsity();
    expect_dense(&sp, 0, block_f32, sizeof(block_f32));
}

/* Loading must fail with @p status and a message holding @p needle. */
static void expect_fail(const kt_sparsity *sp, const void *values, size_t bytes,
                        keyer_status status, const char *needle)
{
    size_t size;
    uint8_t *d = build_sparse_conv(sp, 0, values, bytes, &size);
    assert_non_null(d);
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_memory(d, size, "bad.tflite", &m, &err);
    free(d);
    if (st != status || !strstr(err.message, needle))
        print_message("status %d: %s (wanted '%s')\n", (int)st, err.message, needle);
    assert_int_equal(st, status);
    assert_null(m);
    assert_non_null(strstr(err.message, "bad.tflite: operator 0 (DENSIFY): sparse tensor "
                                        "'w_sparse'"));
    assert_non_null(strstr(err.message, needle));
}

static void test_malformed(void **state)
{
    (void)state;
    static const int idx_far[7] = {0, 2, 1, 2, 4, 0, 3};       /* 4 >= extent 4 */
    static const int idx_unsorted[7] = {2, 0, 1, 2, 3, 0, 3}; /* decreasing in a segment */
    static const int seg_short[4] = {0, 2, 2, 5};
    static const int seg_end[5] = {0, 2, 2, 5, 6};            /* ends before the 7 indices */
    static const int seg_down[5] = {0, 2, 1, 5, 7};
    kt_sparsity sp = csr_sparsity(3, 3);
    sp.dims[3].idx = idx_far;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "below 4, increasing");
    sp.dims[3].idx = idx_unsorted;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "below 4, increasing");
    sp = csr_sparsity(3, 3);
    sp.dims[3].seg = seg_short;
    sp.dims[3].n_seg = 4;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "4 segments for 4");
    sp = csr_sparsity(3, 3);
    sp.dims[3].seg = seg_end;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "end at the 7 indices");
    sp = csr_sparsity(2, 3);
    sp.dims[3].seg = seg_down;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "ends (1) before");
    /* the buffer must hold exactly the stored values */
    sp = csr_sparsity(3, 3);
    expect_fail(&sp, csr_f32, 6 * sizeof(float), KEYER_STATUS_BAD_DATA,
                "gives 7 values (28 bytes) but buffer 1 holds 24");
    /* dense sizes must match the shape; traversal orders must be permutations */
    sp = csr_sparsity(3, 3);
    sp.dims[0].dense_size = 5;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "dense size 5");
    sp = csr_sparsity(3, 3);
    sp.trav[1] = 0;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "traversal_order entry 1");
    sp = csr_sparsity(3, 3);
    sp.n_dims = 3;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "dim_metadata 3");
    sp = csr_sparsity(3, 3);
    sp.dims[3].seg_type = 7;
    expect_fail(&sp, csr_f32, sizeof(csr_f32), KEYER_STATUS_BAD_DATA, "index vector type 7");
    /* blocks: the size must divide the dimension; the block map must name a dimension */
    sp = block_sparsity();
    sp.dims[4].dense_size = 3;
    expect_fail(&sp, block_f32, sizeof(block_f32), KEYER_STATUS_BAD_DATA, "block 0 of dimension 3");
    sp = block_sparsity();
    sp.block_map[0] = 4;
    expect_fail(&sp, block_f32, sizeof(block_f32), KEYER_STATUS_BAD_DATA, "block_map entry 0");
    sp = block_sparsity();
    sp.dims[4].format = 1;
    expect_fail(&sp, block_f32, sizeof(block_f32), KEYER_STATUS_BAD_DATA, "must be dense");
}

/* A sparse tensor read directly by an operator (no DENSIFY) is refused. */
static void test_sparse_without_densify(void **state)
{
    (void)state;
    kt_sparsity sp = csr_sparsity(3, 3);
    kt_tensor tensors[4] = {
        {"in", 0, 4, {1, 2, 2, 4}, 0},
        {"w_sparse", 0, 4, {4, 1, 1, 4}, 1},
        {"b", 0, 1, {4}, 2},
        {"out", 0, 4, {1, 2, 2, 4}, 0},
    };
    kt_buffer buffers[3] = {{NULL, 0}, {csr_f32, sizeof(csr_f32)}, {bias4, sizeof(bias4)}};
    kt_op conv = {.code = 3, .n_in = 3, .in = {0, 1, 2}, .n_out = 1, .out = {3}};
    conv.opt_type = 1;
    conv.n_opt = 4;
    conv.opt[1] = kt_i32(1);
    conv.opt[2] = kt_i32(1);
    const kt_sparsity *sparsity[4] = {NULL, &sp, NULL, NULL};
    kt_model m = {.n_tensors = 4, .tensors = tensors, .n_ops = 1, .ops = &conv, .n_buffers = 3,
                  .buffers = buffers, .sparsity = sparsity, .n_inputs = 1, .inputs = {0}, .n_outputs = 1,
                  .outputs = {3}};
    size_t size;
    uint8_t *d = kt_tflite_build(&m, &size);
    keyer_error err = {0};
    keyer_model *model = NULL;
    assert_int_equal(keyer_model_load_memory(d, size, "x.tflite", &model, &err),
                     KEYER_STATUS_UNSUPPORTED);
    assert_non_null(strstr(err.message, "tensor 1 'w_sparse' is sparse and read directly"));
    free(d);
}

/* DEPTH_TO_SPACE, block 2: [1,2,3,8] -> [1,4,6,2], against TFLite's definition
 * out[h*b + i][w*b + j][k] = in[h][w][(i*b + j) * C' + k]. */
static void test_depth_to_space(void **state)
{
    (void)state;
    for (int batch = 1; batch <= 2; batch++) {
        const int H = 2, W = 3, b = 2, C = 8, Cp = C / (b * b);
        kt_tensor tensors[2] = {{"in", 0, 4, {1, H, W, C}, 0},
                                {"out", 0, 4, {1, H * b, W * b, Cp}, 0}};
        kt_buffer buffers[1] = {{NULL, 0}};
        kt_op op = {.code = 5, .n_in = 1, .in = {0}, .n_out = 1, .out = {1}};
        op.opt_type = 94;
        op.n_opt = 1;
        op.opt[0] = kt_i32(b);
        kt_model m = {.n_tensors = 2, .tensors = tensors, .n_ops = 1, .ops = &op,
                      .n_buffers = 1, .buffers = buffers, .n_inputs = 1, .inputs = {0},
                      .n_outputs = 1, .outputs = {1}};
        size_t size;
        uint8_t *d = kt_tflite_build(&m, &size);
        keyer_error err = {0};
        keyer_model *model = NULL;
        keyer_status st = keyer_model_load_memory(d, size, "d2s.tflite", &model, &err);
        if (st)
            print_message("%s\n", err.message);
        assert_int_equal(st, KEYER_OK);
        free(d);
        const kr_graph *g = kr_model_graph(model);
        assert_int_equal(g->n_nodes, 3);
        assert_int_equal(g->nodes[0].op, KR_OP_RESHAPE);
        assert_int_equal(g->nodes[1].op, KR_OP_TRANSPOSE);
        assert_int_equal(g->nodes[2].op, KR_OP_RESHAPE);
        for (int backend = 0; backend < 2; backend++) {
            keyer_runtime_params rp = keyer_runtime_params_defaults();
            rp.backend = backend ? KEYER_BACKEND_CPU : KEYER_BACKEND_REFERENCE;
            rp.threads = 1;
            rp.batch = batch;
            keyer_runtime *rt = NULL;
            assert_int_equal(keyer_runtime_create(model, &rp, &rt, &err), KEYER_OK);
            float *in = keyer_runtime_input_data(rt, 0);
            int per = H * W * C;
            for (int i = 0; i < batch * per; i++)
                in[i] = (float)i;
            assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
            const float *out = keyer_runtime_output_data(rt, 0);
            for (int n = 0; n < batch; n++)
                for (int h = 0; h < H; h++)
                    for (int w = 0; w < W; w++)
                        for (int i = 0; i < b; i++)
                            for (int j = 0; j < b; j++)
                                for (int k = 0; k < Cp; k++) {
                                    float want = in[n * per + (h * W + w) * C + (i * b + j) * Cp + k];
                                    int oy = h * b + i, ox = w * b + j;
                                    float got = out[n * per + (oy * W * b + ox) * Cp + k];
                                    assert_true(got == want);
                                }
            keyer_runtime_destroy(&rt);
        }
        keyer_model_destroy(&model);
    }
    /* a wrong output shape is refused, naming the operator */
    kt_tensor tensors[2] = {{"in", 0, 4, {1, 2, 2, 8}, 0},
                            {"out", 0, 4, {1, 4, 4, 3}, 0}};
    kt_buffer buffers[1] = {{NULL, 0}};
    kt_op op = {.code = 5, .n_in = 1, .in = {0}, .n_out = 1, .out = {1}};
    op.opt_type = 94;
    op.n_opt = 1;
    op.opt[0] = kt_i32(2);
    kt_model m = {.n_tensors = 2, .tensors = tensors, .n_ops = 1, .ops = &op, .n_buffers = 1,
                  .buffers = buffers, .n_inputs = 1, .inputs = {0}, .n_outputs = 1,
                  .outputs = {1}};
    size_t size;
    uint8_t *d = kt_tflite_build(&m, &size);
    keyer_error err = {0};
    keyer_model *model = NULL;
    assert_int_equal(keyer_model_load_memory(d, size, "d2s.tflite", &model, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "operator 0 (DEPTH_TO_SPACE)"));
    free(d);
}

/* The shipped pose detector: no DENSIFY, DEQUANTIZE or DEPTH_TO_SPACE reaches the graph. */
static void test_pose_detection_model(void **state)
{
    (void)state;
    char path[1024];
    kt_model_path(path, sizeof(path), "pose_detection.tflite");
    if (!kt_exists(path)) {
        print_message("skipped: %s missing (scripts/setup.sh fetches it)\n", path);
        skip();
    }
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_file(path, &m, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    const kr_graph *g = kr_model_graph(m);
    int transposes = 0;
    for (int i = 0; i < g->n_nodes; i++)
        transposes += g->nodes[i].op == KR_OP_TRANSPOSE;
    assert_int_equal(transposes, 3); /* one per DEPTH_TO_SPACE */
    /* 45 convolutions, 28 depthwise, 15 adds, 8 pads, 6 reshapes + 6 from the lowering,
     * 2 resizes, 2 concatenations and the 3 transposes */
    assert_int_equal(g->n_nodes, 45 + 28 + 15 + 8 + 12 + 2 + 2 + 3);
    assert_int_equal(g->n_outputs, 2);
    assert_int_equal(g->tensors[g->outputs[0]].dims[1], 2254);
    assert_int_equal(g->tensors[g->outputs[0]].dims[2], 12);
    keyer_model_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csr_index_types),
        cmocka_unit_test(test_block_sparse),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_sparse_without_densify),
        cmocka_unit_test(test_depth_to_space),
        cmocka_unit_test(test_pose_detection_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
