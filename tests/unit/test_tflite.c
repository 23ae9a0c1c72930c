/*
 * TFLite reader, graph validation and keyer_model_* API.
 *
 * Expected figures come from docs/models.md (sections 1-4: tensor
 * names and shapes, operator counts, dense MACs, FP16 parameter counts, SAME paddings). For the
 * models that file does not cover (face_landmark, pose_landmark_full/heavy) the node counts,
 * dense MACs and parameter counts were measured with an independent Python walk of the
 * FlatBuffer (not keyer code), using the formulas of section 4 of that file.
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

/* ---- helpers -------------------------------------------------------------------------------- */

static keyer_model *load_model(const char *file)
{
    char path[1024];
    kt_model_path(path, sizeof(path), file);
    if (!kt_exists(path)) {
        print_message("model %s is missing: run scripts/setup.sh\n", path);
        return NULL;
    }
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_status st = keyer_model_load_file(path, &m, &err);
    if (st != KEYER_OK)
        print_message("%s: %s\n", file, err.message);
    assert_int_equal(st, KEYER_OK);
    assert_non_null(m);
    return m;
}

#define LOAD_OR_SKIP(var, file)                                                                   \
    keyer_model *var = load_model(file);                                                          \
    if (!var) {                                                                                   \
        skip();                                                                                   \
        return;                                                                                   \
    }

static int count_op(const kr_graph *g, kr_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static const kr_tensor *in_tensor(const kr_graph *g, const kr_node *n, int i)
{
    return &g->tensors[n->inputs[i]];
}

static const kr_tensor *out_tensor(const kr_graph *g, const kr_node *n)
{
    return &g->tensors[n->outputs[0]];
}

/* First node of @p op whose input 0 has height @p in_h and kernel @p k and stride @p s
 * (k or s < 0: any). */
static const kr_node *find_window_node(const kr_graph *g, kr_op op, int in_h, int k, int s)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        if (n->op != op || in_tensor(g, n, 0)->dims[1] != in_h)
            continue;
        if ((k < 0 || n->p.window.kernel_h == k) && (s < 0 || n->p.window.stride_h == s))
            return n;
    }
    return NULL;
}

static void assert_pads(const kr_node *n, int top, int bottom, int left, int right)
{
    assert_non_null(n);
    assert_int_equal(n->p.window.pad_top, top);
    assert_int_equal(n->p.window.pad_bottom, bottom);
    assert_int_equal(n->p.window.pad_left, left);
    assert_int_equal(n->p.window.pad_right, right);
}

static void assert_dims(const int *dims, int rank, const int *want, int want_rank)
{
    assert_int_equal(rank, want_rank);
    for (int d = 0; d < rank; d++)
        assert_int_equal(dims[d], want[d]);
}

/* ---- kr_half_to_float ----------------------------------------------------------------------- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static void test_half_to_float(void **state)
{
    (void)state;
    assert_true(kr_half_to_float(0x0000) == 0.0f && !signbit(kr_half_to_float(0x0000)));
    assert_true(kr_half_to_float(0x8000) == 0.0f && signbit(kr_half_to_float(0x8000)));
    assert_true(kr_half_to_float(0x3c00) == 1.0f);
    assert_true(kr_half_to_float(0xc000) == -2.0f);
    assert_true(kr_half_to_float(0x3555) == (1.0f + 341.0f / 1024.0f) * 0.25f); /* 0.33325 */
    /* Subnormals: m * 2^-24. */
    assert_true(kr_half_to_float(0x0001) == ldexpf(1.0f, -24));
    assert_true(kr_half_to_float(0x8001) == -ldexpf(1.0f, -24));
    assert_true(kr_half_to_float(0x0200) == ldexpf(1.0f, -15));
    assert_true(kr_half_to_float(0x03ff) == 1023.0f * ldexpf(1.0f, -24));
    assert_true(kr_half_to_float(0x0155) == 341.0f * ldexpf(1.0f, -24));
    /* Smallest normal, largest finite. */
    assert_true(kr_half_to_float(0x0400) == ldexpf(1.0f, -14));
    assert_true(kr_half_to_float(0x7bff) == 65504.0f);
    assert_true(kr_half_to_float(0xfbff) == -65504.0f);
    /* Infinities and NaNs (payload kept, quiet bit kept). */
    assert_true(isinf(kr_half_to_float(0x7c00)) && kr_half_to_float(0x7c00) > 0);
    assert_true(isinf(kr_half_to_float(0xfc00)) && kr_half_to_float(0xfc00) < 0);
    assert_true(isnan(kr_half_to_float(0x7e00)));
    assert_true(isnan(kr_half_to_float(0x7c01)));
    assert_true(isnan(kr_half_to_float(0xfe00)) && signbit(kr_half_to_float(0xfe00)));
    assert_int_equal(float_bits(kr_half_to_float(0x7e00)), 0x7fc00000u);
    /* Every finite half round-trips through float arithmetic: value = (-1)^s 2^(e-15) 1.m. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 31)
            continue;
        float want = e ? ldexpf(1.0f + m / 1024.0f, (int)e - 15) : ldexpf((float)m, -24);
        if (h & 0x8000)
            want = -want;
        assert_true(kr_half_to_float((uint16_t)h) == want);
    }
}

/* ---- the shipped models --------------------------------------------------------------------- */

typedef struct io_fact {
    const char *name;
    int rank;
    int dims[4];
} io_fact;

typedef struct model_fact {
    const char *file;
    int n_nodes;
    uint64_t macs;
    size_t params;
    int n_in, n_out;
    io_fact in[1], out[5];
} model_fact;

static const model_fact facts[] = {
    {"selfie_segmentation.tflite", 246 - 110, 59215744, 106401, 1, 1,
     {{"input_1", 4, {1, 256, 256, 3}}},
     {{"activation_10", 4, {1, 256, 256, 1}}}},
    {"selfie_segmentation_landscape.tflite", 246 - 110, 33324928, 106401, 1, 1,
     {{"input_1", 4, {1, 144, 256, 3}}},
     {{"segment_back", 4, {1, 144, 256, 1}}}},
    {"face_detection_short_range.tflite", 164 - 74, 30760960, 101390, 1, 2,
     {{"input", 4, {1, 128, 128, 3}}},
     {{"regressors", 3, {1, 896, 16}}, {"classificators", 3, {1, 896, 1}}}},
    {"face_detection_full_range.tflite", 354 - 178, 105671232, 514069, 1, 2,
     {{"input", 4, {1, 192, 192, 3}}},
     {{"reshaped_regressor_face_4", 3, {1, 2304, 16}},
      {"reshaped_classifier_face_4", 3, {1, 2304, 1}}}},
    {"pose_landmark_lite.tflite", 305 - 176, 197822208, 1363089, 1, 5,
     {{"input_1", 4, {1, 256, 256, 3}}},
     {{"Identity", 2, {1, 195}},
      {"Identity_1", 2, {1, 1}},
      {"Identity_2", 4, {1, 256, 256, 1}},
      {"Identity_3", 4, {1, 64, 64, 39}},
      {"Identity_4", 2, {1, 117}}}},
    /* Measured with the independent Python walk (see the top of this file). */
    {"pose_landmark_full.tflite", 332 - 192, 386148736, 3169489, 1, 5,
     {{"input_1", 4, {1, 256, 256, 3}}},
     {{"Identity", 2, {1, 195}},
      {"Identity_1", 2, {1, 1}},
      {"Identity_2", 4, {1, 256, 256, 1}},
      {"Identity_3", 4, {1, 64, 64, 39}},
      {"Identity_4", 2, {1, 117}}}},
    {"pose_landmark_heavy.tflite", 689 - 396, 1927318656, 13751073, 1, 5,
     {{"input_1", 4, {1, 256, 256, 3}}},
     {{"Identity", 2, {1, 195}},
      {"Identity_1", 2, {1, 1}},
      {"Identity_2", 4, {1, 256, 256, 1}},
      {"Identity_3", 4, {1, 64, 64, 39}},
      {"Identity_4", 2, {1, 117}}}},
    {"face_landmark.tflite", 210 - 113, 34979040, 604685, 1, 2,
     {{"input_1", 4, {1, 192, 192, 3}}},
     {{"conv2d_21", 4, {1, 1, 1, 1404}}, {"conv2d_31", 4, {1, 1, 1, 1}}}},
};

static void check_model_facts(const model_fact *f)
{
    LOAD_OR_SKIP(m, f->file);
    const kr_graph *g = kr_model_graph(m);
    assert_non_null(g);
    assert_int_equal(keyer_model_node_count(m), f->n_nodes);
    assert_int_equal(keyer_model_macs(m), f->macs);
    assert_int_equal(keyer_model_weight_bytes(m), 4 * f->params);
    assert_int_equal(keyer_model_input_count(m), f->n_in);
    assert_int_equal(keyer_model_output_count(m), f->n_out);
    keyer_error err = {0};
    keyer_tensor_info info;
    for (int i = 0; i < f->n_in; i++) {
        assert_int_equal(keyer_model_input_info(m, i, &info, &err), KEYER_OK);
        assert_string_equal(info.name, f->in[i].name);
        assert_int_equal(info.dtype, KEYER_DTYPE_F32);
        assert_dims(info.dims, info.rank, f->in[i].dims, f->in[i].rank);
    }
    for (int i = 0; i < f->n_out; i++) {
        assert_int_equal(keyer_model_output_info(m, i, &info, &err), KEYER_OK);
        assert_string_equal(info.name, f->out[i].name);
        assert_int_equal(info.dtype, KEYER_DTYPE_F32);
        assert_dims(info.dims, info.rank, f->out[i].dims, f->out[i].rank);
    }
    assert_int_equal(keyer_model_input_info(m, f->n_in, &info, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_model_output_info(m, -1, &info, &err), KEYER_STATUS_INVALID_ARGUMENT);

    /* Folding: no FLOAT16 left; constants aligned inside the one block; links filled. */
    const uint8_t *lo = g->const_storage, *hi = lo + g->const_bytes;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *x = &g->tensors[t];
        assert_int_not_equal(x->dtype, KR_DTYPE_F16);
        if (!x->data) {
            assert_int_equal(x->dims[0], 1);
            continue;
        }
        const uint8_t *p = x->data;
        assert_true(p >= lo && p + kr_tensor_bytes(x, 1) <= hi);
        assert_int_equal((uintptr_t)p % 16, 0);
        assert_int_equal(x->producer, -1);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        assert_int_equal(out_tensor(g, &g->nodes[i])->producer, i);
        assert_true(i == 0 || g->nodes[i].source_index > g->nodes[i - 1].source_index);
    }
    keyer_model_destroy(&m);
    assert_null(m);
}

static void test_selfie(void **state) { (void)state; check_model_facts(&facts[0]); }
static void test_selfie_landscape(void **state) { (void)state; check_model_facts(&facts[1]); }
static void test_face_short(void **state) { (void)state; check_model_facts(&facts[2]); }
static void test_face_full(void **state) { (void)state; check_model_facts(&facts[3]); }
static void test_pose_lite(void **state) { (void)state; check_model_facts(&facts[4]); }
static void test_pose_full(void **state) { (void)state; check_model_facts(&facts[5]); }
static void test_pose_heavy(void **state) { (void)state; check_model_facts(&facts[6]); }
static void test_face_mesh(void **state) { (void)state; check_model_facts(&facts[7]); }

static void expect_unsupported(const char *file, const char *needle)
{
    char path[1024];
    kt_model_path(path, sizeof(path), file);
    if (!kt_exists(path)) {
        skip();
        return;
    }
    keyer_error err = {0};
    keyer_model *m = NULL;
    assert_int_equal(keyer_model_load_file(path, &m, &err), KEYER_STATUS_UNSUPPORTED);
    assert_null(m);
    print_message("%s\n", err.message);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, needle));
}

static void test_unsupported_models(void **state)
{
    (void)state;
    expect_unsupported("face_landmark_with_attention.tflite",
                       "operator 192 is custom operator 'Landmarks2TransformMatrix'");
    /* pose_detection.tflite (DENSIFY, DEPTH_TO_SPACE) loads since DENSIFY is expanded at
     * load: test_tflite_sparse.c checks its graph. */
}

/* Operator mix of section 2.11; face-short decodes only through deprecated_builtin_code. */
static void test_operator_mix(void **state)
{
    (void)state;
    LOAD_OR_SKIP(selfie, "selfie_segmentation.tflite");
    const kr_graph *g = kr_model_graph(selfie);
    assert_int_equal(count_op(g, KR_OP_CONV_2D), 43);
    assert_int_equal(count_op(g, KR_OP_DEPTHWISE_CONV_2D), 11);
    assert_int_equal(count_op(g, KR_OP_HARD_SWISH), 11);
    assert_int_equal(count_op(g, KR_OP_RELU), 22);
    assert_int_equal(count_op(g, KR_OP_LOGISTIC), 11);
    assert_int_equal(count_op(g, KR_OP_MUL), 10);
    assert_int_equal(count_op(g, KR_OP_ADD), 14);
    assert_int_equal(count_op(g, KR_OP_RESIZE_BILINEAR), 3);
    assert_int_equal(count_op(g, KR_OP_TRANSPOSE_CONV_BIAS), 1);
    assert_int_equal(count_op(g, KR_OP_AVERAGE_POOL_2D), 10);
    keyer_model_destroy(&selfie);

    LOAD_OR_SKIP(face, "face_detection_short_range.tflite");
    g = kr_model_graph(face);
    assert_int_equal(count_op(g, KR_OP_CONV_2D), 21);
    assert_int_equal(count_op(g, KR_OP_DEPTHWISE_CONV_2D), 16);
    assert_int_equal(count_op(g, KR_OP_MAX_POOL_2D), 3);
    assert_int_equal(count_op(g, KR_OP_PAD), 11);
    assert_int_equal(count_op(g, KR_OP_ADD), 16);
    assert_int_equal(count_op(g, KR_OP_RELU), 17);
    assert_int_equal(count_op(g, KR_OP_RESHAPE), 4);
    assert_int_equal(count_op(g, KR_OP_CONCATENATION), 2);
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        if (n->op == KR_OP_CONCATENATION)
            assert_int_equal(n->p.concat.axis, 1);
        if (n->op == KR_OP_RESHAPE)
            assert_int_equal(out_tensor(g, n)->view_of, n->inputs[0]);
        if (n->op == KR_OP_PAD) { /* channel zero-fill [[0,0],[0,0],[0,0],[0,k]], k in 4,6,8 */
            for (int d = 0; d < 4; d++)
                assert_int_equal(n->p.pad.before[d], 0);
            for (int d = 0; d < 3; d++)
                assert_int_equal(n->p.pad.after[d], 0);
            int k = n->p.pad.after[3];
            assert_true(k == 4 || k == 6 || k == 8);
        }
    }
    keyer_model_destroy(&face);

    LOAD_OR_SKIP(mesh, "face_landmark.tflite");
    g = kr_model_graph(mesh);
    assert_int_equal(count_op(g, KR_OP_PRELU), 23);
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        if (n->op != KR_OP_PRELU)
            continue;
        const kr_tensor *alpha = in_tensor(g, n, 1);
        assert_non_null(alpha->data);
        assert_int_equal(alpha->rank, 3);
        assert_int_equal(alpha->dims[2], in_tensor(g, n, 0)->dims[3]);
    }
    keyer_model_destroy(&mesh);
}

/* SAME paddings of section 2.0 (TF puts the odd one after) and the transpose conv. */
static void test_paddings(void **state)
{
    (void)state;
    LOAD_OR_SKIP(selfie, "selfie_segmentation.tflite");
    const kr_graph *g = kr_model_graph(selfie);
    const kr_node *n = find_window_node(g, KR_OP_CONV_2D, 256, 3, 2);
    assert_pads(n, 0, 1, 0, 1);
    assert_int_equal(n->p.window.padding, KR_PADDING_SAME);
    assert_int_equal(out_tensor(g, n)->dims[1], 128);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 128, 3, 2), 0, 1, 0, 1);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 64, 3, 2), 0, 1, 0, 1);
    n = find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 32, 5, 2);
    assert_pads(n, 1, 2, 1, 2);
    assert_int_equal(n->p.window.depth_multiplier, 1);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 16, 5, 1), 2, 2, 2, 2);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 32, 3, 1), 1, 1, 1, 1);
    for (int i = 0; i < g->n_nodes; i++) {
        n = &g->nodes[i];
        if (n->op == KR_OP_RESIZE_BILINEAR) {
            assert_int_equal(n->p.resize.align_corners, 0);
            assert_int_equal(n->p.resize.half_pixel_centers, 1);
            assert_int_equal(out_tensor(g, n)->dims[1], 2 * in_tensor(g, n, 0)->dims[1]);
        }
        if (n->op == KR_OP_AVERAGE_POOL_2D) { /* global average: VALID, window = input */
            assert_int_equal(n->p.window.padding, KR_PADDING_VALID);
            assert_int_equal(n->p.window.kernel_h, in_tensor(g, n, 0)->dims[1]);
            assert_int_equal(out_tensor(g, n)->dims[1], 1);
        }
        if (n->op != KR_OP_TRANSPOSE_CONV_BIAS)
            continue;
        /* custom options 01 00 00 00 02 00 00 00 02 00 00 00: SAME, stride 2x2; K=2 -> P=0 */
        const kr_window_params *w = &n->p.window;
        assert_int_equal(w->padding, KR_PADDING_SAME);
        assert_int_equal(w->stride_h, 2);
        assert_int_equal(w->stride_w, 2);
        assert_int_equal(w->kernel_h, 2);
        assert_int_equal(w->kernel_w, 2);
        assert_pads(n, 0, 0, 0, 0);
        static const int win[] = {1, 128, 128, 16}, wout[] = {1, 256, 256, 1};
        static const int ww[] = {1, 2, 2, 16}, wb[] = {1};
        assert_dims(in_tensor(g, n, 0)->dims, in_tensor(g, n, 0)->rank, win, 4);
        assert_dims(in_tensor(g, n, 1)->dims, in_tensor(g, n, 1)->rank, ww, 4);
        assert_dims(in_tensor(g, n, 2)->dims, in_tensor(g, n, 2)->rank, wb, 1);
        assert_dims(out_tensor(g, n)->dims, out_tensor(g, n)->rank, wout, 4);
    }
    keyer_model_destroy(&selfie);

    LOAD_OR_SKIP(land, "selfie_segmentation_landscape.tflite");
    g = kr_model_graph(land);
    assert_pads(find_window_node(g, KR_OP_CONV_2D, 144, 3, 2), 0, 1, 0, 1);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 18, 5, 2), 1, 2, 1, 2);
    assert_int_equal(count_op(g, KR_OP_MEAN), 10);
    for (int i = 0; i < g->n_nodes; i++) {
        n = &g->nodes[i];
        if (n->op == KR_OP_MEAN) {
            assert_int_equal(n->p.mean.axes_mask, (1u << 1) | (1u << 2));
            assert_int_equal(n->p.mean.keep_dims, 1);
            assert_int_equal(out_tensor(g, n)->dims[1], 1);
        }
    }
    keyer_model_destroy(&land);

    LOAD_OR_SKIP(face, "face_detection_short_range.tflite");
    g = kr_model_graph(face);
    assert_pads(find_window_node(g, KR_OP_CONV_2D, 128, 5, 2), 1, 2, 1, 2);
    for (int h = 64; h >= 16; h /= 2)
        assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, h, 3, 2), 0, 1, 0, 1);
    n = find_window_node(g, KR_OP_MAX_POOL_2D, 64, 2, 2);
    assert_pads(n, 0, 0, 0, 0);
    assert_int_equal(n->p.window.padding, KR_PADDING_SAME);
    keyer_model_destroy(&face);

    LOAD_OR_SKIP(full, "face_detection_full_range.tflite");
    g = kr_model_graph(full);
    assert_pads(find_window_node(g, KR_OP_CONV_2D, 192, 3, 2), 0, 1, 0, 1);
    keyer_model_destroy(&full);

    LOAD_OR_SKIP(pose, "pose_landmark_lite.tflite");
    g = kr_model_graph(pose);
    /* Explicit symmetric PAD then VALID stride-2 conv: 258 -> 128. */
    n = find_window_node(g, KR_OP_CONV_2D, 258, 3, 2);
    assert_pads(n, 0, 0, 0, 0);
    assert_int_equal(n->p.window.padding, KR_PADDING_VALID);
    assert_int_equal(n->activation, KR_ACT_RELU6);
    assert_int_equal(out_tensor(g, n)->dims[1], 128);
    const kr_tensor *padded = in_tensor(g, n, 0);
    const kr_node *pad = &g->nodes[padded->producer];
    assert_int_equal(pad->op, KR_OP_PAD);
    assert_int_equal(pad->p.pad.before[1], 1);
    assert_int_equal(pad->p.pad.after[1], 1);
    assert_int_equal(pad->p.pad.before[2], 1);
    assert_int_equal(pad->p.pad.after[2], 1);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 8, 3, 2), 0, 1, 0, 1);
    assert_pads(find_window_node(g, KR_OP_DEPTHWISE_CONV_2D, 20, 5, 2), 0, 0, 0, 0);
    for (int i = 0; i < g->n_nodes; i++) {
        n = &g->nodes[i];
        if (n->op == KR_OP_RESHAPE) { /* [-1,195]-style shape input, a view */
            assert_int_equal(n->n_inputs, 2);
            assert_int_equal(out_tensor(g, n)->rank, 2);
            assert_int_equal(out_tensor(g, n)->view_of, n->inputs[0]);
            assert_int_equal(kr_tensor_storage(g, n->outputs[0]), n->inputs[0]);
        }
    }
    keyer_model_destroy(&pose);
}

/* The FLOAT16 weights behind each DEQUANTIZE land, converted and in order, in the constant. */
static void test_dequantize_folding(void **state)
{
    (void)state;
    char path[1024];
    kt_model_path(path, sizeof(path), "face_detection_short_range.tflite");
    size_t size;
    uint8_t *d = kt_read_file(path, &size);
    if (!d) {
        skip();
        return;
    }
    keyer_model *m = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_model_load_memory(d, size, "face-short", &m, &err), KEYER_OK);
    const kr_graph *g = kr_model_graph(m);
    size_t root = kt_nav_root(d), sg = kt_nav_subgraph0(d);
    size_t tensors = kt_nav_vec(d, sg, 0), ops = kt_nav_vec(d, sg, 3);
    size_t codes = kt_nav_vec(d, root, 1), buffers = kt_nav_vec(d, root, 4);
    int checked = 0;
    for (uint32_t i = 0; i < kt_nav_u32(d, ops); i++) {
        size_t op = kt_nav_elem(d, ops, i);
        size_t ci = kt_nav_field(d, op, 0);
        size_t code = kt_nav_elem(d, codes, ci ? kt_nav_u32(d, ci) : 0);
        size_t dep = kt_nav_field(d, code, 0), bc = kt_nav_field(d, code, 3);
        assert_true(!bc || kt_nav_u32(d, bc) == 0); /* this file keeps codes in the old field */
        if (!dep || d[dep] != 6)
            continue;
        size_t in = kt_nav_vec(d, op, 1), out = kt_nav_vec(d, op, 2);
        size_t src = kt_nav_elem(d, tensors, kt_nav_u32(d, in + 4));
        size_t dst = kt_nav_elem(d, tensors, kt_nav_u32(d, out + 4));
        size_t name = kt_nav_vec(d, dst, 3);
        const char *dst_name = (const char *)d + name + 4;
        size_t bf = kt_nav_field(d, src, 2);
        size_t data = kt_nav_vec(d, kt_nav_elem(d, buffers, kt_nav_u32(d, bf)), 0);
        size_t count = kt_nav_u32(d, data) / 2;
        const kr_tensor *t = NULL;
        for (int k = 0; k < g->n_tensors && !t; k++)
            if (!strcmp(g->tensors[k].name, dst_name))
                t = &g->tensors[k];
        assert_non_null(t);
        assert_non_null(t->data);
        assert_int_equal(t->dtype, KR_DTYPE_F32);
        assert_int_equal(kr_tensor_elements(t), count);
        const float *f = t->data;
        for (size_t e = 0; e < count; e++) {
            uint16_t h = (uint16_t)(d[data + 4 + 2 * e] | d[data + 5 + 2 * e] << 8);
            assert_true(f[e] == kr_half_to_float(h));
        }
        checked++;
    }
    assert_int_equal(checked, 74);
    keyer_model_destroy(&m);
    free(d);
}

/* ---- hand-assembled models ------------------------------------------------------------------ */

/* input [1,4,4,2] -> CONV_2D(1x1, weights FLOAT16 via DEQUANTIZE, bias FLOAT32) -> [1,4,4,3]
 * -> RELU6 (builtin 21) -> output. */
static const uint16_t conv_w_half[6] = {0x0001, 0x8000, 0x7bff, 0x03ff, 0x3c00, 0xc000};
static const float conv_bias[3] = {0.5f, -1.0f, 2.0f};

static uint8_t *build_conv(size_t *size, int deprecated_only, int with_options)
{
    static const kt_tensor tensors[] = {
        {"in", 0, 4, {1, 4, 4, 2}, 0},   {"w16", 1, 4, {3, 1, 1, 2}, 1},
        {"w", 0, 4, {3, 1, 1, 2}, 0},    {"b", 0, 1, {3}, 2},
        {"conv", 0, 4, {1, 4, 4, 3}, 0}, {"out", 0, 4, {1, 4, 4, 3}, 0},
    };
    kt_buffer buffers[] = {{NULL, 0}, {conv_w_half, sizeof(conv_w_half)},
                           {conv_bias, sizeof(conv_bias)}};
    kt_op ops[3] = {
        {.code = 6, .n_in = 1, .in = {1}, .n_out = 1, .out = {2}},
        {.code = 3, .n_in = 3, .in = {0, 2, 3}, .n_out = 1, .out = {4}},
        {.code = 21, .n_in = 1, .in = {4}, .n_out = 1, .out = {5}},
    };
    /* Conv2DOptions with padding and dilations absent: defaults SAME and 1. */
    ops[1].opt_type = 1;
    ops[1].n_opt = 4;
    ops[1].opt[0] = kt_absent();
    ops[1].opt[1] = kt_i32(1);
    ops[1].opt[2] = kt_i32(1);
    ops[1].opt[3] = kt_i8(0);
    if (!with_options)
        ops[1].opt_type = 0;
    for (int i = 0; i < 3; i++)
        ops[i].deprecated_only = deprecated_only;
    kt_model m = {.n_tensors = 6, .tensors = tensors, .n_ops = 3, .ops = ops, .n_buffers = 3,
                  .buffers = buffers, .n_inputs = 1, .inputs = {0}, .n_outputs = 1,
                  .outputs = {5}, .description = "tiny conv"};
    return kt_tflite_build(&m, size);
}

static void test_tiny_conv(void **state)
{
    (void)state;
    for (int dep = 0; dep < 2; dep++) {
        size_t size;
        uint8_t *d = build_conv(&size, dep, 1);
        assert_non_null(d);
        keyer_error err = {0};
        keyer_model *m = NULL;
        keyer_status st = keyer_model_load_memory(d, size, "tiny.tflite", &m, &err);
        if (st)
            print_message("%s\n", err.message);
        assert_int_equal(st, KEYER_OK);
        free(d); /* the model keeps nothing of the caller's bytes */
        const kr_graph *g = kr_model_graph(m);
        assert_string_equal(g->description, "tiny conv");
        assert_int_equal(g->n_nodes, 2);
        assert_int_equal(g->n_tensors, 5); /* the FLOAT16 source is not kept */
        const kr_node *conv = &g->nodes[0], *relu6 = &g->nodes[1];
        assert_int_equal(conv->op, KR_OP_CONV_2D);
        assert_int_equal(conv->source_index, 1);
        assert_int_equal(relu6->op, KR_OP_RELU6);
        assert_int_equal(relu6->source_index, 2);
        assert_int_equal(conv->p.window.padding, KR_PADDING_SAME);
        assert_int_equal(conv->p.window.dilation_h, 1);
        assert_int_equal(conv->p.window.dilation_w, 1);
        assert_int_equal(conv->p.window.kernel_h, 1);
        const kr_tensor *w = in_tensor(g, conv, 1), *b = in_tensor(g, conv, 2);
        assert_string_equal(w->name, "w");
        const float *wf = w->data, *bf = b->data;
        for (int i = 0; i < 6; i++)
            assert_true(memcmp(&wf[i], &(float){kr_half_to_float(conv_w_half[i])}, 4) == 0);
        assert_true(wf[0] == ldexpf(1.0f, -24) && signbit(wf[1]) && wf[2] == 65504.0f);
        for (int i = 0; i < 3; i++)
            assert_true(bf[i] == conv_bias[i]);
        assert_int_equal(keyer_model_macs(m), 16 * 3 * 2);
        assert_int_equal(keyer_model_weight_bytes(m), 4 * (6 + 3));
        keyer_model_destroy(&m);
    }
    /* No options at all: stride defaults to 0, which validation rejects naming the node. */
    size_t size;
    uint8_t *d = build_conv(&size, 0, 0);
    keyer_error err = {0};
    keyer_model *m = NULL;
    assert_int_equal(keyer_model_load_memory(d, size, "tiny.tflite", &m, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "tiny.tflite: operator 1 (CONV_2D): stride 0x0"));
    free(d);
}

static void test_api_arguments(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_model *m = NULL;
    assert_int_equal(keyer_model_load_file("/nonexistent/model.tflite", &m, &err),
                     KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/model.tflite: cannot open"));
    char dir[1024];
    kt_tmpdir(dir, sizeof(dir), "tflite");
    assert_int_equal(keyer_model_load_file(dir, &m, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "not a regular file"));
    assert_int_equal(keyer_model_load_memory(NULL, 10, "x", &m, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_model_load_memory("TFL3", 4, "x", NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_model_load_memory("12345678", 8, NULL, &m, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "model: not a TFLite model"));
    assert_null(m);
    keyer_model_destroy(NULL);
    keyer_model_destroy(&m);
    assert_int_equal(keyer_model_input_count(NULL), 0);
    assert_int_equal(keyer_model_output_count(NULL), 0);
    assert_int_equal(keyer_model_node_count(NULL), 0);
    assert_int_equal(keyer_model_macs(NULL), 0);
    assert_int_equal(keyer_model_weight_bytes(NULL), 0);
    assert_null(kr_model_graph(NULL));
    keyer_tensor_info info;
    assert_int_equal(keyer_model_input_info(NULL, 0, &info, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(kr_tflite_builtin_name(25), "SOFTMAX");
    assert_string_equal(kr_tflite_builtin_name(124), "DENSIFY");
    assert_null(kr_tflite_builtin_name(-1));
    assert_null(kr_tflite_builtin_name(1000));
}

/* ---- kr_graph_validate on hand-built graphs --------------------------------------------------- */

typedef struct small_graph {
    kr_graph g;
    kr_tensor t[4];
    kr_node n[2];
    int inputs[2], outputs[1];
    char names[4][8];
} small_graph;

/* t0 (input) -RELU-> t1 (output); t2, t3 spare activations [1,2]. */
static void small_graph_init(small_graph *s)
{
    memset(s, 0, sizeof(*s));
    s->g.name = "hand";
    s->g.n_tensors = 4;
    s->g.tensors = s->t;
    s->g.n_nodes = 1;
    s->g.nodes = s->n;
    s->g.n_inputs = s->g.n_outputs = 1;
    s->g.inputs = s->inputs;
    s->g.outputs = s->outputs;
    s->inputs[0] = 0;
    s->outputs[0] = 1;
    for (int i = 0; i < 4; i++) {
        snprintf(s->names[i], sizeof(s->names[i]), "t%d", i);
        s->t[i] = (kr_tensor){.name = s->names[i], .dtype = KR_DTYPE_F32, .rank = 2,
                              .dims = {1, 2}, .view_of = -1};
    }
    s->n[0] = (kr_node){.op = KR_OP_RELU, .source_index = 7, .n_inputs = 1, .n_outputs = 1,
                        .inputs = {0}, .outputs = {1}};
}

static void expect_invalid(small_graph *s, keyer_status want, const char *needle)
{
    keyer_error err = {0};
    assert_int_equal(kr_graph_validate(&s->g, &err), want);
    print_message("%s\n", err.message);
    assert_non_null(strstr(err.message, needle));
}

static void test_validate(void **state)
{
    (void)state;
    small_graph s;
    keyer_error err = {0};
    small_graph_init(&s);
    assert_int_equal(kr_graph_validate(&s.g, &err), KEYER_OK);
    assert_int_equal(s.t[1].producer, 0);
    assert_int_equal(s.t[0].last_consumer, 0);
    assert_int_equal(s.t[0].graph_input, 0);
    assert_int_equal(s.t[1].graph_output, 0);

    small_graph_init(&s); /* a cycle of views */
    s.t[2].view_of = 3;
    s.t[3].view_of = 2;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "hand: the views of tensor 2 't2' form a cycle");

    small_graph_init(&s);
    s.t[2].view_of = 2;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "is a view of tensor 2");

    small_graph_init(&s); /* read before written */
    s.n[0].inputs[0] = 2;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA,
                   "hand: operator 7 (RELU): input 0, tensor 't2', is read before any operator "
                   "writes it");

    small_graph_init(&s); /* written twice */
    s.g.n_nodes = 2;
    s.n[1] = s.n[0];
    s.n[1].source_index = 8;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA,
                   "operator 8 (RELU): writes tensor 't1', which an earlier operator already "
                   "wrote");

    small_graph_init(&s); /* writes a graph input */
    s.n[0].outputs[0] = 0;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "writes tensor 't0', which is a graph input");

    small_graph_init(&s);
    s.n[0].inputs[0] = 9;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "input 0 is tensor 9, out of range");

    small_graph_init(&s);
    s.t[1].dims[1] = 3;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA,
                   "operator 7 (RELU): output tensor 't1' has shape [1,3] but the operator gives "
                   "[1,2]");

    small_graph_init(&s);
    s.t[2].dims[0] = 2;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "does not have batch 1");

    small_graph_init(&s);
    s.t[3].dims[1] = -4;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "tensor 3 't3': dimension 1 is -4");

    small_graph_init(&s);
    s.t[3].dims[0] = 1;
    s.t[3].dims[1] = 1 << 29;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "more than 268435456 elements");

    small_graph_init(&s); /* graph output never written */
    s.outputs[0] = 2;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "graph output 0, tensor 't2', is never written");

    small_graph_init(&s); /* fused activation on an op without one */
    s.n[0].activation = KR_ACT_RELU6;
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "has fused activation");

    small_graph_init(&s); /* ADD: broadcasting, and computed operands must span the batch */
    s.g.n_inputs = 2;
    s.inputs[1] = 2;
    s.n[0] = (kr_node){.op = KR_OP_ADD, .source_index = 3, .n_inputs = 2, .n_outputs = 1,
                       .inputs = {0, 2}, .outputs = {1}};
    assert_int_equal(kr_graph_validate(&s.g, &err), KEYER_OK);
    s.t[2].dims[1] = 1; /* [1,2] + [1,1] -> [1,2] */
    assert_int_equal(kr_graph_validate(&s.g, &err), KEYER_OK);
    s.t[1].dims[1] = 4; /* but not [1,4] */
    expect_invalid(&s, KEYER_STATUS_BAD_DATA,
                   "hand: operator 3 (ADD): output tensor 't1' has shape [1,4] but the operator "
                   "gives [1,2]");
    s.t[1].dims[1] = 2;
    s.t[2].rank = 1; /* a rank-1 activation would not follow the batch axis */
    expect_invalid(&s, KEYER_STATUS_UNSUPPORTED, "computed operands must span the batch axis");
    s.t[2].rank = 2;
    s.t[2].dims[1] = 3; /* [1,2] + [1,3] */
    expect_invalid(&s, KEYER_STATUS_BAD_DATA, "shapes [1,2] ('t0') and [1,3] ('t2') do not "
                   "broadcast");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_to_float),
        cmocka_unit_test(test_selfie),
        cmocka_unit_test(test_selfie_landscape),
        cmocka_unit_test(test_face_short),
        cmocka_unit_test(test_face_full),
        cmocka_unit_test(test_pose_lite),
        cmocka_unit_test(test_pose_full),
        cmocka_unit_test(test_pose_heavy),
        cmocka_unit_test(test_face_mesh),
        cmocka_unit_test(test_unsupported_models),
        cmocka_unit_test(test_operator_mix),
        cmocka_unit_test(test_paddings),
        cmocka_unit_test(test_dequantize_folding),
        cmocka_unit_test(test_tiny_conv),
        cmocka_unit_test(test_api_arguments),
        cmocka_unit_test(test_validate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
