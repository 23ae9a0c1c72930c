/*
 * The reference kernels of the ONNX operators and parameters against values computed by hand
 * (each case's comment shows the arithmetic), and the graph validator's shape rules for them:
 * graphs that break a rule fail with the status and a message naming the rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_graph.h"
#include "nn/backend.h"
#include "nn/graph.h"
#include "nn/planner.h"

/* ---- one-node graphs -------------------------------------------------------------------------- */

typedef struct one {
    kt_graph b;
    int x, x2, y;
    kr_node *node;
} one;

/* Starts a graph with activation x [rank, dims] and output y [out_rank, out_dims] (INT32 when
 * @p int_out) for operator @p op reading x and, when @p extra >= 0, tensor @p extra. */
static void one_begin(one *o, kr_op op, int rank, const int *dims, int out_rank,
                      const int *out_dims)
{
    kt_graph_begin(&o->b, kr_op_name(op), 8, 1, 4096);
    o->x = kt_graph_act(&o->b, rank, dims);
    o->y = kt_graph_act(&o->b, out_rank, out_dims);
    o->x2 = -1;
    o->node = NULL;
}

static kr_node *one_node(one *o, kr_op op, int second)
{
    int in[3] = {o->x, second, -1};
    o->node = kt_graph_node(&o->b, op, second >= 0 ? 2 : 1, in, o->y);
    memset(&o->node->p, 0, sizeof(o->node->p));
    return o->node;
}

static int f32_const(one *o, int rank, const int *dims, const float *v)
{
    return kt_graph_const(&o->b, KR_DTYPE_F32, rank, dims, v);
}

static int i32_const(one *o, int rank, const int *dims, const int32_t *v)
{
    return kt_graph_const(&o->b, KR_DTYPE_I32, rank, dims, v);
}

static keyer_status one_finish(one *o, kr_graph **g, keyer_error *err)
{
    kt_graph_input(&o->b, o->x);
    kt_graph_output(&o->b, o->y);
    return kt_graph_finish(&o->b, g, err);
}

/* Runs @p g (one input) on the reference backend at batch 1; output 0's bytes into @p out. */
static void run_ref(const kr_graph *g, const float *input, void *out)
{
    const kr_backend_ops *ops = &kr_backend_reference;
    kr_plan plan;
    kr_backend_instance *inst = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_plan_create(g, 1, ops->plan_slack, &plan, &err), KEYER_OK);
    kr_backend_config cfg = {.batch = 1, .threads = 1};
    if (ops->create(g, &plan, &cfg, &inst, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    int xi = g->inputs[0], yi = g->outputs[0];
    memcpy(ops->tensor_data(inst, xi), input, kr_tensor_bytes(&g->tensors[xi], 1));
    assert_int_equal(ops->run(inst, &err), KEYER_OK);
    memcpy(out, ops->tensor_data(inst, yi), kr_tensor_bytes(&g->tensors[yi], 1));
    ops->destroy(&inst);
    kr_plan_destroy(&plan);
}

/* Validates @p o, runs it on @p input and compares with @p want (1e-6 relative). */
static void expect_f32(one *o, const char *what, const float *input, const float *want, size_t n)
{
    kr_graph *g = NULL;
    keyer_error err = {0};
    if (one_finish(o, &g, &err) != KEYER_OK)
        fail_msg("%s: %s", what, err.message);
    assert_int_equal(kr_tensor_elements(&g->tensors[g->outputs[0]]), n);
    float got[256];
    assert_true(n <= 256);
    run_ref(g, input, got);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= !(fabs((double)got[i] - want[i]) <= 1e-6 * fmax(1.0, fabs((double)want[i])));
    printf("  %-60s %s\n", what, bad ? "FAIL" : "ok");
    if (bad) {
        for (size_t i = 0; i < n; i++)
            printf("    [%zu] got %.8g want %.8g\n", i, got[i], want[i]);
        fail_msg("%s differs from the hand-computed values", what);
    }
    kr_graph_destroy(&g);
}

static void expect_i32(one *o, const char *what, const float *input, const int32_t *want,
                       size_t n)
{
    kr_graph *g = NULL;
    keyer_error err = {0};
    if (one_finish(o, &g, &err) != KEYER_OK)
        fail_msg("%s: %s", what, err.message);
    int32_t got[64];
    assert_true(n <= 64);
    run_ref(g, input, got);
    printf("  %-60s\n", what);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
    kr_graph_destroy(&g);
}

/* Finishes @p o, which must fail with @p status and a message containing @p needle. */
static void expect_invalid(one *o, keyer_status status, const char *needle)
{
    kr_graph *g = NULL;
    keyer_error err = {0};
    keyer_status st = one_finish(o, &g, &err);
    printf("  refused: %s\n", err.message);
    assert_null(g);
    assert_int_equal(st, status);
    if (!strstr(err.message, needle))
        fail_msg("message '%s' lacks '%s'", err.message, needle);
}

static void set_window(kr_node *n, int k, int s, int d, int pt, int pb, int pl, int pr)
{
    kr_window_params *w = &n->p.window;
    w->kernel_h = w->kernel_w = k;
    w->stride_h = w->stride_w = s;
    w->dilation_h = w->dilation_w = d;
    w->padding = KR_PADDING_EXPLICIT;
    w->pad_top = pt;
    w->pad_bottom = pb;
    w->pad_left = pl;
    w->pad_right = pr;
}

/* ---- hand-computed values --------------------------------------------------------------------- */

static const float x9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* a 3x3 image, row-major */

static void test_pools(void **state)
{
    (void)state;
    one o;
    /* MAX k2 s2 ceil_mode on 3x3: out ceil((3 - 2) / 2) + 1 = 2; windows {1,2,4,5} {3,6}
     * {7,8} {9}. */
    one_begin(&o, KR_OP_MAX_POOL_2D, 4, (int[]){1, 3, 3, 1}, 4, (int[]){1, 2, 2, 1});
    set_window(one_node(&o, KR_OP_MAX_POOL_2D, -1), 2, 2, 1, 0, 0, 0, 0);
    o.node->p.window.ceil_mode = 1;
    expect_f32(&o, "MAX_POOL k2 s2 ceil_mode 3x3", x9, (const float[]){5, 6, 8, 9}, 4);
    /* AVERAGE, the same windows with count_include_pad: taps past n + pad_after = 3 are not
     * counted: (1+2+4+5)/4 = 3, (3+6)/2 = 4.5, (7+8)/2 = 7.5, 9/1. */
    one_begin(&o, KR_OP_AVERAGE_POOL_2D, 4, (int[]){1, 3, 3, 1}, 4, (int[]){1, 2, 2, 1});
    set_window(one_node(&o, KR_OP_AVERAGE_POOL_2D, -1), 2, 2, 1, 0, 0, 0, 0);
    o.node->p.window.ceil_mode = 1;
    o.node->p.window.count_include_pad = 1;
    expect_f32(&o, "AVERAGE_POOL k2 s2 ceil_mode count_include_pad", x9,
               (const float[]){3, 4.5f, 7.5f, 9}, 4);
    /* AVERAGE k3 s1 pads 1 on 2x2 {1,2,3,4}: every window holds all four values (sum 10) and
     * 9 taps inside [-1, 3): 10/9 with count_include_pad, 10/4 without. */
    static const float x4[4] = {1, 2, 3, 4};
    one_begin(&o, KR_OP_AVERAGE_POOL_2D, 4, (int[]){1, 2, 2, 1}, 4, (int[]){1, 2, 2, 1});
    set_window(one_node(&o, KR_OP_AVERAGE_POOL_2D, -1), 3, 1, 1, 1, 1, 1, 1);
    o.node->p.window.count_include_pad = 1;
    expect_f32(&o, "AVERAGE_POOL k3 pads 1 count_include_pad", x4,
               (const float[]){10 / 9.0f, 10 / 9.0f, 10 / 9.0f, 10 / 9.0f}, 4);
    one_begin(&o, KR_OP_AVERAGE_POOL_2D, 4, (int[]){1, 2, 2, 1}, 4, (int[]){1, 2, 2, 1});
    set_window(one_node(&o, KR_OP_AVERAGE_POOL_2D, -1), 3, 1, 1, 1, 1, 1, 1);
    expect_f32(&o, "AVERAGE_POOL k3 pads 1", x4, (const float[]){2.5f, 2.5f, 2.5f, 2.5f}, 4);
    /* MAX k2 dilation 2 on 3x3: one window, taps (0,0) (0,2) (2,0) (2,2) = max(1,3,7,9). */
    one_begin(&o, KR_OP_MAX_POOL_2D, 4, (int[]){1, 3, 3, 1}, 4, (int[]){1, 1, 1, 1});
    set_window(one_node(&o, KR_OP_MAX_POOL_2D, -1), 2, 1, 2, 0, 0, 0, 0);
    expect_f32(&o, "MAX_POOL k2 dilation 2", (const float[]){1, 2, 3, 4, 5, 6, 7, 0, 2}, 
               (const float[]){7}, 1);
}

static void test_convs(void **state)
{
    (void)state;
    one o;
    /* Grouped 1x1 CONV, 4 channels in 2 groups -> 2 outputs: W [2,1,1,2] = {1,1 | 1,-1}:
     * y0 = 1 + 2 = 3, y1 = 3 - 4 = -1, bias {0.5, 0}. */
    one_begin(&o, KR_OP_CONV_2D, 4, (int[]){1, 1, 1, 4}, 4, (int[]){1, 1, 1, 2});
    int w = f32_const(&o, 4, (int[]){2, 1, 1, 2}, (const float[]){1, 1, 1, -1});
    int bias = f32_const(&o, 1, (int[]){2}, (const float[]){0.5f, 0});
    {
        int in[3] = {o.x, w, bias};
        o.node = kt_graph_node(&o.b, KR_OP_CONV_2D, 3, in, o.y);
        set_window(o.node, 1, 1, 1, 0, 0, 0, 0);
        o.node->p.window.groups = 2;
    }
    expect_f32(&o, "CONV_2D 1x1 groups 2", (const float[]){1, 2, 3, 4},
               (const float[]){3.5f, -1}, 2);
    /* CONV 2x2 ones, explicit pads top 1 / left 1 only, 2x2 input {1,2,3,4}: output 2x2,
     * y00 = 1 (only (0,0) inside), y01 = 1+2, y10 = 1+3, y11 = 10. */
    one_begin(&o, KR_OP_CONV_2D, 4, (int[]){1, 2, 2, 1}, 4, (int[]){1, 2, 2, 1});
    w = f32_const(&o, 4, (int[]){1, 2, 2, 1}, (const float[]){1, 1, 1, 1});
    bias = f32_const(&o, 1, (int[]){1}, (const float[]){0});
    {
        int in[3] = {o.x, w, bias};
        o.node = kt_graph_node(&o.b, KR_OP_CONV_2D, 3, in, o.y);
        set_window(o.node, 2, 1, 1, 1, 0, 1, 0);
    }
    expect_f32(&o, "CONV_2D 2x2 pads top/left 1", (const float[]){1, 2, 3, 4},
               (const float[]){1, 3, 4, 10}, 4);
    /* TRANSPOSE_CONV k2 s1 ones, no pads, 2x2 {1,2,3,4} -> 3x3: y[o] = sum of x[i] with
     * o - i in {0,1} per axis: {1,3,2, 4,10,6, 3,7,4}, bias 0.5. */
    one_begin(&o, KR_OP_TRANSPOSE_CONV, 4, (int[]){1, 2, 2, 1}, 4, (int[]){1, 3, 3, 1});
    w = f32_const(&o, 4, (int[]){1, 2, 2, 1}, (const float[]){1, 1, 1, 1});
    bias = f32_const(&o, 1, (int[]){1}, (const float[]){0.5f});
    {
        int in[3] = {o.x, w, bias};
        o.node = kt_graph_node(&o.b, KR_OP_TRANSPOSE_CONV, 3, in, o.y);
        set_window(o.node, 2, 1, 1, 0, 0, 0, 0);
    }
    expect_f32(&o, "TRANSPOSE_CONV k2 s1", (const float[]){1, 2, 3, 4},
               (const float[]){1.5f, 3.5f, 2.5f, 4.5f, 10.5f, 6.5f, 3.5f, 7.5f, 4.5f}, 9);
    /* TRANSPOSE_CONV k2 s2 pads 1/0, output padding 1, W {1,2,3,4}, 1x2 input {1,10}:
     * full 2x4 {1,2,10,20 / 3,4,30,40}; pads remove the first row and column: out 2 = 2*0+2-1+1
     * rows, 4 = 2*1+2-1+1 columns: {4,30,40,0 / 0,0,0,0} (the output padding row and column
     * get only the (absent) bias). */
    one_begin(&o, KR_OP_TRANSPOSE_CONV, 4, (int[]){1, 1, 2, 1}, 4, (int[]){1, 2, 4, 1});
    w = f32_const(&o, 4, (int[]){1, 2, 2, 1}, (const float[]){1, 2, 3, 4});
    {
        int in[2] = {o.x, w};
        o.node = kt_graph_node(&o.b, KR_OP_TRANSPOSE_CONV, 2, in, o.y);
        set_window(o.node, 2, 2, 1, 1, 0, 1, 0);
    }
    expect_f32(&o, "TRANSPOSE_CONV k2 s2 pads 1/0 output padding 1", (const float[]){1, 10},
               (const float[]){4, 30, 40, 0, 0, 0, 0, 0}, 8);
    /* TRANSPOSE_CONV 1x1, 2 groups: W [2,1,1,1] = {2, 3}: y0 = 2*x0, y1 = 3*x1. */
    one_begin(&o, KR_OP_TRANSPOSE_CONV, 4, (int[]){1, 1, 1, 2}, 4, (int[]){1, 1, 1, 2});
    w = f32_const(&o, 4, (int[]){2, 1, 1, 1}, (const float[]){2, 3});
    {
        int in[2] = {o.x, w};
        o.node = kt_graph_node(&o.b, KR_OP_TRANSPOSE_CONV, 2, in, o.y);
        set_window(o.node, 1, 1, 1, 0, 0, 0, 0);
        o.node->p.window.groups = 2;
    }
    expect_f32(&o, "TRANSPOSE_CONV 1x1 groups 2", (const float[]){5, 7},
               (const float[]){10, 21}, 2);
}

static void test_pad_modes(void **state)
{
    (void)state;
    static const float x[3] = {1, 2, 3};
    static const int32_t pads[4] = {0, 0, 2, 2};
    const struct {
        kr_pad_mode mode;
        float value;
        const char *what;
        float want[7];
    } c[] = {
        {KR_PAD_CONSTANT, 9, "PAD constant 9 [1,2,3] by 2/2", {9, 9, 1, 2, 3, 9, 9}},
        {KR_PAD_REFLECT, 0, "PAD reflect [1,2,3] by 2/2", {3, 2, 1, 2, 3, 2, 1}},
        {KR_PAD_EDGE, 0, "PAD edge [1,2,3] by 2/2", {1, 1, 1, 2, 3, 3, 3}},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        one o;
        one_begin(&o, KR_OP_PAD, 2, (int[]){1, 3}, 2, (int[]){1, 7});
        int p = i32_const(&o, 2, (int[]){2, 2}, pads);
        kr_node *n = one_node(&o, KR_OP_PAD, p);
        n->p.pad.mode = c[i].mode;
        n->p.pad.value = c[i].value;
        expect_f32(&o, c[i].what, x, c[i].want, 7);
    }
}

/* RESIZE of a 1 x W one-channel row to 1 x OW. */
static void resize_row(const char *what, kr_resize_mode mode, kr_resize_coord coord,
                       kr_nearest_mode nearest, const float *x, int w, const float *want, int ow,
                       const float *roi, float extrapolation)
{
    one o;
    one_begin(&o, KR_OP_RESIZE, 4, (int[]){1, 1, w, 1}, 4, (int[]){1, 1, ow, 1});
    kr_node *n = one_node(&o, KR_OP_RESIZE, -1);
    n->p.resize_onnx.mode = mode;
    n->p.resize_onnx.coord = coord;
    n->p.resize_onnx.nearest = nearest;
    n->p.resize_onnx.scale_h = 1;
    n->p.resize_onnx.scale_w = (float)ow / (float)w;
    if (roi)
        memcpy(n->p.resize_onnx.roi, roi, 4 * sizeof(float));
    n->p.resize_onnx.extrapolation = extrapolation;
    expect_f32(&o, what, x, want, (size_t)ow);
}

static void test_resize(void **state)
{
    (void)state;
    static const float x2[2] = {0, 1}, x3[3] = {1, 2, 3};
    /* linear half_pixel / pytorch_half_pixel 2 -> 4: coordinates (x + 0.5) / 2 - 0.5 =
     * -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1). */
    resize_row("RESIZE linear half_pixel 2 -> 4", KR_RESIZE_LINEAR, KR_COORD_HALF_PIXEL, 0, x2,
               2, (const float[]){0, 0.25f, 0.75f, 1}, 4, NULL, 0);
    resize_row("RESIZE linear pytorch_half_pixel 2 -> 4", KR_RESIZE_LINEAR,
               KR_COORD_PYTORCH_HALF_PIXEL, 0, x2, 2, (const float[]){0, 0.25f, 0.75f, 1}, 4,
               NULL, 0);
    /* pytorch_half_pixel to one sample: coordinate 0 (half_pixel would give 0.5 * 3 - 0.5 = 1). */
    resize_row("RESIZE linear pytorch_half_pixel 3 -> 1", KR_RESIZE_LINEAR,
               KR_COORD_PYTORCH_HALF_PIXEL, 0, x3, 3, (const float[]){1}, 1, NULL, 0);
    resize_row("RESIZE linear half_pixel 3 -> 1", KR_RESIZE_LINEAR, KR_COORD_HALF_PIXEL, 0, x3,
               3, (const float[]){2}, 1, NULL, 0);
    /* align_corners 2 -> 4: x * 1 / 3. */
    resize_row("RESIZE linear align_corners 2 -> 4", KR_RESIZE_LINEAR, KR_COORD_ALIGN_CORNERS, 0,
               x2, 2, (const float[]){0, 1 / 3.0f, 2 / 3.0f, 1}, 4, NULL, 0);
    /* asymmetric 3 -> 6: coordinates 0, 0.5, 1, ..., 2.5: ties at every odd index. */
    resize_row("RESIZE nearest asymmetric round_prefer_floor 3 -> 6", KR_RESIZE_NEAREST,
               KR_COORD_ASYMMETRIC, KR_NEAREST_ROUND_PREFER_FLOOR, x3, 3,
               (const float[]){1, 1, 2, 2, 3, 3}, 6, NULL, 0);
    resize_row("RESIZE nearest asymmetric round_prefer_ceil 3 -> 6", KR_RESIZE_NEAREST,
               KR_COORD_ASYMMETRIC, KR_NEAREST_ROUND_PREFER_CEIL, x3, 3,
               (const float[]){1, 2, 2, 3, 3, 3}, 6, NULL, 0);
    resize_row("RESIZE nearest asymmetric ceil 3 -> 6", KR_RESIZE_NEAREST, KR_COORD_ASYMMETRIC,
               KR_NEAREST_CEIL, x3, 3, (const float[]){1, 2, 2, 3, 3, 3}, 6, NULL, 0);
    /* half_pixel 3 -> 2 (scale 2/3): (x + 0.5) * 1.5 - 0.5 = 0.25, 1.75: floor 0, 1. */
    resize_row("RESIZE nearest half_pixel floor 3 -> 2", KR_RESIZE_NEAREST, KR_COORD_HALF_PIXEL,
               KR_NEAREST_FLOOR, x3, 3, (const float[]){1, 2}, 2, NULL, 0);
    /* tf_half_pixel_for_nn 3 -> 2: (x + 0.5) * 1.5 = 0.75, 2.25: round 1, 2. */
    resize_row("RESIZE nearest tf_half_pixel_for_nn 3 -> 2", KR_RESIZE_NEAREST,
               KR_COORD_TF_HALF_PIXEL_FOR_NEAREST, KR_NEAREST_ROUND_PREFER_FLOOR, x3, 3,
               (const float[]){2, 3}, 2, NULL, 0);
    /* tf_crop_and_resize {0,10,20}, roi x 0.5..1.5, 2 samples: 0.5 * 2 + x * 1 * 2 / 1 = 1, 3;
     * 3 is outside [0, 2]: the extrapolation value -1. */
    static const float row[3] = {0, 10, 20};
    resize_row("RESIZE linear tf_crop_and_resize roi 0.5..1.5", KR_RESIZE_LINEAR,
               KR_COORD_TF_CROP_AND_RESIZE, 0, row, 3, (const float[]){10, -1}, 2,
               (const float[]){0, 0.5f, 1, 1.5f}, -1);
    /* one sample: (0.25 + 0.75) / 2 * 2 = 1 -> 10. */
    resize_row("RESIZE linear tf_crop_and_resize to 1", KR_RESIZE_LINEAR,
               KR_COORD_TF_CROP_AND_RESIZE, 0, row, 3, (const float[]){10}, 1,
               (const float[]){0, 0.25f, 1, 0.75f}, -1);
    /* half_pixel_symmetric 2 -> 4 (scale 2): offset 1 * (1 - 4 / 4) = 0: as half_pixel. */
    resize_row("RESIZE linear half_pixel_symmetric 2 -> 4", KR_RESIZE_LINEAR,
               KR_COORD_HALF_PIXEL_SYMMETRIC, 0, x2, 2, (const float[]){0, 0.25f, 0.75f, 1}, 4,
               NULL, 0);
}

static void test_data_movement(void **state)
{
    (void)state;
    one o;
    static const float x6[6] = {0, 1, 2, 3, 4, 5};
    /* TRANSPOSE [1,2,3] perm {0,2,1}: y[0][j][i] = x[0][i][j]. */
    one_begin(&o, KR_OP_TRANSPOSE, 3, (int[]){1, 2, 3}, 3, (int[]){1, 3, 2});
    memcpy(one_node(&o, KR_OP_TRANSPOSE, -1)->p.transpose.perm, (int[]){0, 2, 1},
           3 * sizeof(int));
    expect_f32(&o, "TRANSPOSE [1,2,3] perm 0,2,1", x6, (const float[]){0, 3, 1, 4, 2, 5}, 6);
    /* SLICE [1,6] from 5 by -2, 3 elements: 5, 3, 1. */
    one_begin(&o, KR_OP_SLICE, 2, (int[]){1, 6}, 2, (int[]){1, 3});
    kr_node *n = one_node(&o, KR_OP_SLICE, -1);
    n->p.slice.step[0] = 1;
    n->p.slice.start[1] = 5;
    n->p.slice.step[1] = -2;
    expect_f32(&o, "SLICE [1,6] 5:-2:3", x6, (const float[]){5, 3, 1}, 3);
    /* GATHER [1,6] axis 1 indices {3,0,3}. */
    one_begin(&o, KR_OP_GATHER, 2, (int[]){1, 6}, 2, (int[]){1, 3});
    int idx = i32_const(&o, 1, (int[]){3}, (const int32_t[]){3, 0, 3});
    one_node(&o, KR_OP_GATHER, idx)->p.axis.axis = 1;
    expect_f32(&o, "GATHER [1,6] axis 1 {3,0,3}", x6, (const float[]){3, 0, 3}, 3);
    /* GATHER [1,2,3] axis 1 with a scalar index 1: the second row, rank 2. */
    one_begin(&o, KR_OP_GATHER, 3, (int[]){1, 2, 3}, 2, (int[]){1, 3});
    idx = i32_const(&o, 0, (int[]){1}, (const int32_t[]){1});
    one_node(&o, KR_OP_GATHER, idx)->p.axis.axis = 1;
    expect_f32(&o, "GATHER [1,2,3] axis 1 scalar 1", x6, (const float[]){3, 4, 5}, 3);
}

static void test_math(void **state)
{
    (void)state;
    one o;
    /* SOFTMAX of {0, ln 2, ln 4}: exp = 1, 2, 4 over 7. */
    one_begin(&o, KR_OP_SOFTMAX, 2, (int[]){1, 3}, 2, (int[]){1, 3});
    one_node(&o, KR_OP_SOFTMAX, -1)->p.axis.axis = 1;
    expect_f32(&o, "SOFTMAX {0, ln 2, ln 4}", (const float[]){0, logf(2), logf(4)},
               (const float[]){1 / 7.0f, 2 / 7.0f, 4 / 7.0f}, 3);
    /* ARG_MAX of {3,7,7,1}: the first 7 at 1, the last at 2. */
    for (int last = 0; last <= 1; last++) {
        one_begin(&o, KR_OP_ARGMAX, 2, (int[]){1, 4}, 1, (int[]){1});
        o.b.g->tensors[o.y].dtype = KR_DTYPE_I32;
        kr_node *n = one_node(&o, KR_OP_ARGMAX, -1);
        n->p.argmax.axis = 1;
        n->p.argmax.select_last_index = last;
        const int32_t want = last ? 2 : 1;
        expect_i32(&o, last ? "ARG_MAX ties, last index" : "ARG_MAX ties, first index",
                   (const float[]){3, 7, 7, 1}, &want, 1);
    }
    /* MATMUL {1,2,3 / 4,5,6} x {1,0 / 0,1 / 1,1} = {4,5 / 10,11}. */
    one_begin(&o, KR_OP_MATMUL, 3, (int[]){1, 2, 3}, 3, (int[]){1, 2, 2});
    int b = f32_const(&o, 3, (int[]){1, 3, 2}, (const float[]){1, 0, 0, 1, 1, 1});
    one_node(&o, KR_OP_MATMUL, b);
    expect_f32(&o, "MATMUL [1,2,3] x [1,3,2]", (const float[]){1, 2, 3, 4, 5, 6},
               (const float[]){4, 5, 10, 11}, 4);
    /* REDUCE_MAX [1,2,3] over axis 2: {max(1,5,2), max(-1,-3,-2)}. */
    one_begin(&o, KR_OP_REDUCE_MAX, 3, (int[]){1, 2, 3}, 2, (int[]){1, 2});
    int axes = i32_const(&o, 1, (int[]){1}, (const int32_t[]){2});
    one_node(&o, KR_OP_REDUCE_MAX, axes);
    expect_f32(&o, "REDUCE_MAX axis 2", (const float[]){1, 5, 2, -1, -3, -2},
               (const float[]){5, -1}, 2);
    /* SUB x - {1, 2} and DIV x / {2, 4} broadcast over rows. */
    one_begin(&o, KR_OP_SUB, 2, (int[]){2, 2}, 2, (int[]){2, 2});
    one_node(&o, KR_OP_SUB, f32_const(&o, 1, (int[]){2}, (const float[]){1, 2}));
    o.b.g->fixed_batch = 1;
    expect_f32(&o, "SUB [2,2] - [2]", (const float[]){5, 7, 1, 0},
               (const float[]){4, 5, 0, -2}, 4);
    one_begin(&o, KR_OP_DIV, 2, (int[]){1, 2}, 2, (int[]){1, 2});
    one_node(&o, KR_OP_DIV, f32_const(&o, 1, (int[]){2}, (const float[]){2, 4}));
    expect_f32(&o, "DIV [1,2] / [2]", (const float[]){6, 9}, (const float[]){3, 2.25f}, 2);
    /* The unary operators at a few points. */
    const struct {
        kr_op op;
        float alpha, beta;
        float x[3], want[3];
    } u[] = {
        {KR_OP_TANH, 0, 0, {0, 1, -1}, {0, 0.76159416f, -0.76159416f}},
        {KR_OP_EXP, 0, 0, {0, 1, -1}, {1, 2.7182818f, 0.36787944f}},
        {KR_OP_SQRT, 0, 0, {16, 2, 0}, {4, 1.4142135f, 0}},
        {KR_OP_ELU, 2, 0, {-1, 0, 3}, {-1.2642411f, 0, 3}},   /* 2 * (e^-1 - 1) */
        {KR_OP_LEAKY_RELU, 0.1f, 0, {-2, 0, 3}, {-0.2f, 0, 3}},
        {KR_OP_HARD_SIGMOID, 0.2f, 0.5f, {-3, 0, 1}, {0, 0.5f, 0.7f}},
        {KR_OP_CLIP, -1, 1, {-2, 0.5f, 2}, {-1, 0.5f, 1}},
        {KR_OP_POW, 2, 0, {-3, 0.5f, 2}, {9, 0.25f, 4}},
        {KR_OP_POW, 0.5f, 0, {9, 0.25f, 2}, {3, 0.5f, 1.4142135f}},
    };
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
        one_begin(&o, u[i].op, 2, (int[]){1, 3}, 2, (int[]){1, 3});
        kr_node *n = one_node(&o, u[i].op, -1);
        n->p.unary.alpha = u[i].alpha;
        n->p.unary.beta = u[i].beta;
        char what[64];
        snprintf(what, sizeof(what), "%s alpha %g beta %g", kr_op_name(u[i].op),
                 (double)u[i].alpha, (double)u[i].beta);
        expect_f32(&o, what, u[i].x, u[i].want, 3);
    }
}

/* ---- shape rules ------------------------------------------------------------------------------ */

static void test_rules(void **state)
{
    (void)state;
    one o;
    /* TRANSPOSE perm not a permutation */
    one_begin(&o, KR_OP_TRANSPOSE, 3, (int[]){1, 2, 3}, 3, (int[]){1, 3, 3});
    memcpy(one_node(&o, KR_OP_TRANSPOSE, -1)->p.transpose.perm, (int[]){0, 2, 2},
           3 * sizeof(int));
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "not a permutation");
    /* TRANSPOSE moving the batch axis needs fixed_batch */
    one_begin(&o, KR_OP_TRANSPOSE, 3, (int[]){1, 1, 3}, 3, (int[]){1, 1, 3});
    memcpy(one_node(&o, KR_OP_TRANSPOSE, -1)->p.transpose.perm, (int[]){1, 0, 2},
           3 * sizeof(int));
    expect_invalid(&o, KEYER_STATUS_UNSUPPORTED, "fixed_batch");
    /* SLICE reading past the end; a zero step */
    one_begin(&o, KR_OP_SLICE, 2, (int[]){1, 6}, 2, (int[]){1, 3});
    kr_node *n = one_node(&o, KR_OP_SLICE, -1);
    n->p.slice.step[0] = 1;
    n->p.slice.start[1] = 2;
    n->p.slice.step[1] = 2;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "reads indices 2 to 6");
    one_begin(&o, KR_OP_SLICE, 2, (int[]){1, 6}, 2, (int[]){1, 3});
    one_node(&o, KR_OP_SLICE, -1)->p.slice.step[0] = 1;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "step 0");
    /* reflect padding as large as the dimension */
    one_begin(&o, KR_OP_PAD, 2, (int[]){1, 3}, 2, (int[]){1, 6});
    int p = i32_const(&o, 2, (int[]){2, 2}, (const int32_t[]){0, 0, 3, 0});
    one_node(&o, KR_OP_PAD, p)->p.pad.mode = KR_PAD_REFLECT;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "reflect padding");
    /* GATHER index out of range */
    one_begin(&o, KR_OP_GATHER, 2, (int[]){1, 6}, 2, (int[]){1, 2});
    int idx = i32_const(&o, 1, (int[]){2}, (const int32_t[]){1, 6});
    one_node(&o, KR_OP_GATHER, idx)->p.axis.axis = 1;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "index 6");
    /* TRANSPOSE_CONV output 2 rows past the base size with stride 2 (output padding 2) */
    one_begin(&o, KR_OP_TRANSPOSE_CONV, 4, (int[]){1, 2, 2, 1}, 4, (int[]){1, 6, 4, 1});
    int w = f32_const(&o, 4, (int[]){1, 2, 2, 1}, (const float[]){1, 1, 1, 1});
    set_window(one_node(&o, KR_OP_TRANSPOSE_CONV, w), 2, 2, 1, 0, 0, 0, 0);
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "output size 6 along H is outside 4..5");
    /* ceil_mode on a convolution */
    one_begin(&o, KR_OP_CONV_2D, 4, (int[]){1, 3, 3, 1}, 4, (int[]){1, 2, 2, 1});
    w = f32_const(&o, 4, (int[]){1, 2, 2, 1}, (const float[]){1, 1, 1, 1});
    {
        int in[3] = {o.x, w, f32_const(&o, 1, (int[]){1}, (const float[]){0})};
        o.node = kt_graph_node(&o.b, KR_OP_CONV_2D, 3, in, o.y);
        set_window(o.node, 2, 2, 1, 0, 0, 0, 0);
        o.node->p.window.ceil_mode = 1;
    }
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "ceil_mode");
    /* pool pads not smaller than the kernel */
    one_begin(&o, KR_OP_MAX_POOL_2D, 4, (int[]){1, 3, 3, 1}, 4, (int[]){1, 5, 5, 1});
    set_window(one_node(&o, KR_OP_MAX_POOL_2D, -1), 2, 1, 1, 2, 2, 2, 2);
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "not smaller than");
    /* ceil_mode drops a window that would start past the input (4 wide, k1 s2: the ceiling
     * ceil(3 / 2) + 1 = 3 would start its third window at 4): 2, not 3 */
    one_begin(&o, KR_OP_MAX_POOL_2D, 4, (int[]){1, 4, 4, 1}, 4, (int[]){1, 3, 3, 1});
    set_window(one_node(&o, KR_OP_MAX_POOL_2D, -1), 1, 2, 1, 0, 0, 0, 0);
    o.node->p.window.ceil_mode = 1;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "operator gives [1,2,2,1]");
    /* grouped CONV_2D whose groups do not divide the output channels */
    one_begin(&o, KR_OP_CONV_2D, 4, (int[]){1, 1, 1, 4}, 4, (int[]){1, 1, 1, 3});
    w = f32_const(&o, 4, (int[]){3, 1, 1, 2}, (const float[]){1, 1, 1, 1, 1, 1});
    {
        int in[3] = {o.x, w, f32_const(&o, 1, (int[]){3}, (const float[]){0, 0, 0})};
        o.node = kt_graph_node(&o.b, KR_OP_CONV_2D, 3, in, o.y);
        set_window(o.node, 1, 1, 1, 0, 0, 0, 0);
        o.node->p.window.groups = 2;
    }
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "groups 2 does not divide");
    /* SOFTMAX along the batch axis needs fixed_batch */
    one_begin(&o, KR_OP_SOFTMAX, 2, (int[]){1, 3}, 2, (int[]){1, 3});
    one_node(&o, KR_OP_SOFTMAX, -1);
    expect_invalid(&o, KEYER_STATUS_UNSUPPORTED, "batch axis");
    /* ARG_MAX writing FLOAT32 */
    one_begin(&o, KR_OP_ARGMAX, 2, (int[]){1, 3}, 2, (int[]){1, 1});
    n = one_node(&o, KR_OP_ARGMAX, -1);
    n->p.argmax.axis = 1;
    n->p.argmax.keep_dims = 1;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "FLOAT32");
    /* CLIP with min above max */
    one_begin(&o, KR_OP_CLIP, 2, (int[]){1, 3}, 2, (int[]){1, 3});
    n = one_node(&o, KR_OP_CLIP, -1);
    n->p.unary.alpha = 2;
    n->p.unary.beta = 1;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "not an interval");
    /* RESIZE whose output is not input x scale */
    one_begin(&o, KR_OP_RESIZE, 4, (int[]){1, 2, 2, 1}, 4, (int[]){1, 4, 6, 1});
    n = one_node(&o, KR_OP_RESIZE, -1);
    n->p.resize_onnx.scale_h = 2;
    n->p.resize_onnx.scale_w = 2;
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "does not match");
    /* MATMUL with mismatched K */
    one_begin(&o, KR_OP_MATMUL, 3, (int[]){1, 2, 3}, 3, (int[]){1, 2, 2});
    one_node(&o, KR_OP_MATMUL, f32_const(&o, 3, (int[]){1, 2, 2}, (const float[]){1, 2, 3, 4}));
    expect_invalid(&o, KEYER_STATUS_BAD_DATA, "K = 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pools),         cmocka_unit_test(test_convs),
        cmocka_unit_test(test_pad_modes),     cmocka_unit_test(test_resize),
        cmocka_unit_test(test_data_movement), cmocka_unit_test(test_math),
        cmocka_unit_test(test_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
