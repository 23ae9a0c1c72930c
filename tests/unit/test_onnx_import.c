/*
 * ONNX import (src/nn/onnx/import*.c) and ONNX model loading (keyer_model_load_file_params):
 *  - u2netp (models/u2netp.onnx, fetched by scripts/setup.sh; skipped when absent) folds its
 *    PyTorch shape subgraphs (114 Shape, 76 Gather, 38 Cast, ...) into a static graph whose
 *    operator counts are the file's own (counted with python3-onnx: 119 Conv, 112 Relu,
 *    33 MaxPool, 38 Resize, 11 Add, 7 Sigmoid, Concat 127 of which 76 are shape arithmetic),
 *    and runs on the reference backend at 320x320;
 *  - the small graphs of tests/data/onnx_import/ (made by make_models.py there): a model with
 *    dynamic height and width run at two sizes against values computed here by hand, a
 *    PyTorch-style shape subgraph (Shape/Gather/Unsqueeze/Concat/Reshape) that folds, layouts
 *    of inputs and outputs, and an unsupported operator's message;
 *  - the structure of some of the oracle's operator graphs (tests/data/onnx/ops/): a
 *    BatchNormalization folded into its Conv, or MUL + ADD alone; a static batch of 2 kept in
 *    a fixed_batch graph. (Their numbers against ONNX Runtime: tests/golden/test_onnx_oracle.c.)
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
#include "nn/graph.h"
#include "nn/model.h"
#include "testutil.h"

static int count_op(const kr_graph *g, kr_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static keyer_model *load(const char *path, int h, int w, keyer_status want, keyer_error *err)
{
    keyer_model_load_params p = keyer_model_load_params_defaults();
    p.height = h;
    p.width = w;
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_file_params(path, &p, &m, err);
    if (st != want)
        print_message("%s: %s\n", path, err->message);
    assert_int_equal(st, want);
    return m;
}

static void test_u2netp_folds(void **state)
{
    (void)state;
    char path[1024];
    kt_model_path(path, sizeof(path), "u2netp.onnx");
    if (!kt_exists(path)) {
        print_message("model %s is missing: run scripts/setup.sh\n", path);
        skip();
        return;
    }
    keyer_error err = {0};
    keyer_model *m = load(path, 0, 0, KEYER_OK, &err);
    const kr_graph *g = kr_model_graph(m);
    assert_int_equal(count_op(g, KR_OP_CONV_2D), 119);
    assert_int_equal(count_op(g, KR_OP_RELU), 112);
    assert_int_equal(count_op(g, KR_OP_MAX_POOL_2D), 33);
    assert_int_equal(count_op(g, KR_OP_RESIZE) + count_op(g, KR_OP_RESIZE_BILINEAR), 38);
    /* Every resize of u2netp is linear pytorch_half_pixel to sizes > 1: the bilinear op. */
    assert_int_equal(count_op(g, KR_OP_RESIZE_BILINEAR), 38);
    assert_int_equal(count_op(g, KR_OP_CONCATENATION), 127 - 76);
    assert_int_equal(count_op(g, KR_OP_ADD), 11);
    assert_int_equal(count_op(g, KR_OP_LOGISTIC), 7);
    assert_int_equal(g->n_nodes, 119 + 112 + 33 + 38 + 51 + 11 + 7);
    assert_int_equal(g->fixed_batch, 0);
    /* Convs read explicit pads; pools use ceil_mode. */
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        if (n->op == KR_OP_CONV_2D || n->op == KR_OP_MAX_POOL_2D)
            assert_int_equal(n->p.window.padding, KR_PADDING_EXPLICIT);
        if (n->op == KR_OP_MAX_POOL_2D)
            assert_int_equal(n->p.window.ceil_mode, 1);
    }
    assert_int_equal(keyer_model_input_count(m), 1);
    assert_int_equal(keyer_model_output_count(m), 7);
    keyer_tensor_info in, out;
    assert_int_equal(keyer_model_input_info(m, 0, &in, &err), KEYER_OK);
    assert_string_equal(in.name, "input.1");
    int nhwc[4] = {1, 320, 320, 3}, nchw[4] = {1, 3, 320, 320}, perm[4] = {0, 2, 3, 1};
    assert_memory_equal(in.dims, nhwc, sizeof(nhwc));
    assert_int_equal(in.file_rank, 4);
    assert_memory_equal(in.file_dims, nchw, sizeof(nchw));
    assert_memory_equal(in.file_perm, perm, sizeof(perm));
    assert_int_equal(keyer_model_output_info(m, 0, &out, &err), KEYER_OK);
    assert_string_equal(out.name, "1959");
    int onhwc[4] = {1, 320, 320, 1}, onchw[4] = {1, 1, 320, 320};
    assert_memory_equal(out.dims, onhwc, sizeof(onhwc));
    assert_memory_equal(out.file_dims, onchw, sizeof(onchw));

    /* One inference on the reference backend: a smooth input, probabilities out. */
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = KEYER_BACKEND_REFERENCE;
    keyer_runtime *rt = NULL;
    keyer_status st = keyer_runtime_create(m, &rp, &rt, &err);
    if (st != KEYER_OK)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    float *x = keyer_runtime_input_data(rt, 0);
    for (int i = 0; i < 320 * 320 * 3; i++)
        x[i] = sinf((float)i * 0.001f);
    st = keyer_runtime_run(rt, &err);
    if (st != KEYER_OK)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    for (int o = 0; o < 7; o++) {
        const float *y = keyer_runtime_output_data(rt, o);
        float lo = 1, hi = 0;
        for (int i = 0; i < 320 * 320; i++) {
            assert_true(y[i] >= 0.0f && y[i] <= 1.0f);
            lo = fminf(lo, y[i]);
            hi = fmaxf(hi, y[i]);
        }
        assert_true(hi > lo); /* not a constant map */
    }
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&m);
}

/* dynamic.onnx: x [N,2,H,W] -> Conv(3x3, pads 1, weights w[o][i][ky][kx] = (o+1)*(i+1) *
 * (ky*3+kx+1) / 100, bias o / 10) -> Relu -> y [N,3,H,W]. Computed here in NCHW and compared
 * with keyer's output converted back to NCHW. */
static void run_dynamic(int h, int w)
{
    char path[1024];
    kt_data_path(path, sizeof(path), "onnx_import/dynamic.onnx");
    keyer_error err = {0};
    keyer_model *m = load(path, h, w, KEYER_OK, &err);
    keyer_tensor_info in, out;
    assert_int_equal(keyer_model_input_info(m, 0, &in, &err), KEYER_OK);
    assert_int_equal(keyer_model_output_info(m, 0, &out, &err), KEYER_OK);
    int fin[4] = {1, 2, h, w}, fout[4] = {1, 3, h, w};
    assert_memory_equal(in.file_dims, fin, sizeof(fin));
    assert_memory_equal(out.file_dims, fout, sizeof(fout));
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = KEYER_BACKEND_REFERENCE;
    keyer_runtime *rt = NULL;
    assert_int_equal(keyer_runtime_create(m, &rp, &rt, &err), KEYER_OK);
    size_t nin = (size_t)2 * h * w, nout = (size_t)3 * h * w;
    float *x = malloc(nin * sizeof(float)), *xg = malloc(nin * sizeof(float));
    float *yg = malloc(nout * sizeof(float)), *y = malloc(nout * sizeof(float));
    assert_non_null(x);
    assert_non_null(xg);
    assert_non_null(yg);
    assert_non_null(y);
    for (size_t i = 0; i < nin; i++)
        x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    assert_int_equal(keyer_tensor_to_graph_layout(&in, 1, x, xg, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_set_input(rt, 0, xg, nin * sizeof(float), &err), KEYER_OK);
    assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_get_output(rt, 0, yg, nout * sizeof(float), &err), KEYER_OK);
    assert_int_equal(keyer_tensor_to_file_layout(&out, 1, yg, y, &err), KEYER_OK);
    for (int o = 0; o < 3; o++)
        for (int yy = 0; yy < h; yy++)
            for (int xx = 0; xx < w; xx++) {
                double acc = o / 10.0;
                for (int i = 0; i < 2; i++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int sy = yy + ky - 1, sx = xx + kx - 1;
                            if (sy < 0 || sy >= h || sx < 0 || sx >= w)
                                continue;
                            double wt = (o + 1) * (i + 1) * (ky * 3 + kx + 1) / 100.0;
                            acc += wt * x[((size_t)i * h + sy) * w + sx];
                        }
                double want = acc > 0 ? acc : 0;
                double got = y[((size_t)o * h + yy) * w + xx];
                assert_true(fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want)));
            }
    free(x);
    free(xg);
    free(yg);
    free(y);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&m);
}

static void test_dynamic_two_sizes(void **state)
{
    (void)state;
    run_dynamic(5, 7);
    run_dynamic(12, 9);
    /* Without sizes the model cannot be imported: the message names input and dimension. */
    char path[1024];
    kt_data_path(path, sizeof(path), "onnx_import/dynamic.onnx");
    keyer_error err = {0};
    keyer_model *m = load(path, 0, 0, KEYER_STATUS_BAD_DATA, &err);
    assert_null(m);
    assert_non_null(strstr(err.message, "graph input 'x': dimension 2 (height) is dynamic"));
}

/* shape_subgraph.onnx: x [1,4,6,8] -> Shape -> Gather(0), Gather(1) -> Unsqueeze -> Concat with
 * -1 -> Reshape(x) -> [1, 4*6*8] -> Mul by 2 -> y. The shape arithmetic folds; what remains
 * is the layout change (NHWC to NCHW: a TRANSPOSE), the RESHAPE and the MUL. */
static void test_shape_subgraph_folds(void **state)
{
    (void)state;
    char path[1024];
    kt_data_path(path, sizeof(path), "onnx_import/shape_subgraph.onnx");
    keyer_error err = {0};
    keyer_model *m = load(path, 0, 0, KEYER_OK, &err);
    const kr_graph *g = kr_model_graph(m);
    assert_int_equal(g->n_nodes, 3);
    assert_int_equal(g->nodes[0].op, KR_OP_TRANSPOSE);
    assert_int_equal(g->nodes[1].op, KR_OP_RESHAPE);
    assert_int_equal(g->nodes[2].op, KR_OP_MUL);
    keyer_tensor_info out;
    assert_int_equal(keyer_model_output_info(m, 0, &out, &err), KEYER_OK);
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dims[1], 4 * 6 * 8);
    /* y is x in NCHW order, doubled. */
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = KEYER_BACKEND_REFERENCE;
    keyer_runtime *rt = NULL;
    keyer_status st = keyer_runtime_create(m, &rp, &rt, &err);
    if (st != KEYER_OK)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    keyer_tensor_info in;
    assert_int_equal(keyer_model_input_info(m, 0, &in, &err), KEYER_OK);
    float x[192], xg[192], y[192];
    for (int i = 0; i < 192; i++)
        x[i] = (float)i;
    assert_int_equal(keyer_tensor_to_graph_layout(&in, 1, x, xg, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_set_input(rt, 0, xg, sizeof(xg), &err), KEYER_OK);
    assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_get_output(rt, 0, y, sizeof(y), &err), KEYER_OK);
    for (int i = 0; i < 192; i++)
        assert_true(y[i] == 2.0f * (float)i);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&m);
}

static void test_unsupported_operator(void **state)
{
    (void)state;
    char path[1024];
    kt_data_path(path, sizeof(path), "onnx_import/unsupported.onnx");
    keyer_error err = {0};
    keyer_model *m = load(path, 0, 0, KEYER_STATUS_UNSUPPORTED, &err);
    assert_null(m);
    assert_non_null(strstr(err.message, "node 'topk_0' (op TopK, opset 13) is not supported"));
}

/* Graphs of the ONNX oracle's set (tests/data/onnx/ops/, tests/onnx/make_graphs.py): the
 * import's structure, which the oracle test does not look at. */
static const kr_graph *load_op_graph(const char *name, keyer_model **m)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof(rel), "onnx/ops/%s/model.onnx", name);
    kt_data_path(path, sizeof(path), rel);
    keyer_error err = {0};
    *m = load(path, 0, 0, KEYER_OK, &err);
    return kr_model_graph(*m);
}

static void test_batchnorm_folds_and_batch(void **state)
{
    (void)state;
    keyer_model *m;
    /* Conv + BatchNormalization: one CONV_2D, the normalisation in its weights. */
    const kr_graph *g = load_op_graph("conv_batchnorm", &m);
    assert_int_equal(g->n_nodes, 1);
    assert_int_equal(g->nodes[0].op, KR_OP_CONV_2D);
    assert_int_equal(g->fixed_batch, 0);
    keyer_model_destroy(&m);
    /* BatchNormalization alone (a dynamic batch): MUL + ADD with per-channel constants. */
    g = load_op_graph("batchnorm_alone", &m);
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(g->nodes[0].op, KR_OP_MUL);
    assert_int_equal(g->nodes[1].op, KR_OP_ADD);
    assert_int_equal(g->fixed_batch, 0);
    assert_int_equal(g->tensors[g->inputs[0]].dims[0], 1);
    keyer_model_destroy(&m);
    /* A static batch of 2 stays in the graph, which is marked fixed_batch. */
    g = load_op_graph("conv_static_batch2", &m);
    assert_int_equal(g->fixed_batch, 1);
    assert_int_equal(g->tensors[g->inputs[0]].dims[0], 2);
    keyer_tensor_info in;
    keyer_error err = {0};
    assert_int_equal(keyer_model_input_info(m, 0, &in, &err), KEYER_OK);
    assert_int_equal(in.file_dims[0], 2);
    keyer_model_destroy(&m);
}

static void test_not_a_model(void **state)
{
    (void)state;
    /* Neither TFLite nor ONNX: both are named. */
    static const unsigned char junk[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    keyer_error err = {0};
    keyer_model *m = NULL;
    assert_int_equal(keyer_model_load_memory(junk, sizeof(junk), "junk.bin", &m, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_null(m);
    assert_non_null(strstr(err.message, "not a TFLite model: bytes 4-7 are not the file "
                                        "identifier TFL3"));
    assert_non_null(strstr(err.message, "and not an ONNX model: junk.bin:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dynamic_two_sizes),
        cmocka_unit_test(test_shape_subgraph_folds),
        cmocka_unit_test(test_unsupported_operator),
        cmocka_unit_test(test_not_a_model),
        cmocka_unit_test(test_batchnorm_folds_and_batch),
        cmocka_unit_test(test_u2netp_folds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
