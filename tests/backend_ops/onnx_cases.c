/*
 * Backend-ops cases for the ONNX operators and parameters (onnx_cases.h): grouped and
 * explicitly padded convolutions, pools with explicit pads / ceil_mode / count_include_pad /
 * dilation, every PAD mode, SUB and DIV with broadcasting, the unary operators with their
 * parameters, REDUCE_MAX, every RESIZE mode, coordinate transformation and nearest mode,
 * TRANSPOSE, SLICE, SOFTMAX, ARG_MAX, MATMUL, GATHER and TRANSPOSE_CONV (groups, dilation,
 * pads, output padding). Odd sizes and stride 2 throughout; the harness runs every case that is
 * not fixed_batch at batch 1 and 3.
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
#include "onnx_cases.h"

typedef struct ocase {
    kr_op op;
    int rank, dims[KR_MAX_DIMS];   /* input 0 */
    int rank2, dims2[KR_MAX_DIMS]; /* second operand (binary, MATMUL); GATHER: indices shape */
    int const1, const2;            /* operand 0 / 1 is a constant */
    kr_activation act;
    /* windows: kernel, stride, dilation (0 = 1), explicit pads t/b/l/r, ceil_mode,
     * count_include_pad, groups, output channels, TRANSPOSE_CONV output padding and no bias */
    int k[2], s[2], dil[2], pads[4], ceil, cip, groups, cout, out_pad[2], no_bias;
    float alpha, beta;             /* unary parameters */
    int pad[KR_MAX_DIMS][2];       /* PAD */
    kr_pad_mode mode;
    float value;
    int n_axes, axes[KR_MAX_DIMS], keep; /* REDUCE_MAX; ARG_MAX keep_dims */
    kr_resize_mode rmode;          /* RESIZE */
    kr_resize_coord coord;
    kr_nearest_mode nearest;
    int out[2];
    float scale[2];                /* 0: out / in */
    float roi[4], extrap;
    int perm[KR_MAX_DIMS];         /* TRANSPOSE */
    int start[KR_MAX_DIMS], step[KR_MAX_DIMS], len[KR_MAX_DIMS]; /* SLICE (step 0: whole) */
    int axis, last;                /* SOFTMAX, GATHER, ARG_MAX (select_last_index) */
    int32_t idx[12];               /* GATHER indices */
    int fixed;                     /* fixed_batch graph */
    float lo, hi;                  /* input range (both 0: [-1, 1)) */
} ocase;

#define D4(a, b, c, d) {a, b, c, d}
#define CONVG(H, W, CI, CO, K, S, DIL, PT, PB, PL, PR, G, A)                                       \
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, H, W, CI}, .cout = CO, .k = {K, K}, .s = {S, S}, \
     .dil = {DIL, DIL}, .pads = {PT, PB, PL, PR}, .groups = G, .act = KR_ACT_##A}
#define POOLX(OP, H, W, C, K, S, DIL, PT, PB, PL, PR, CEIL, CIP)                                    \
    {.op = KR_OP_##OP, .rank = 4, .dims = {1, H, W, C}, .k = {K, K}, .s = {S, S},                 \
     .dil = {DIL, DIL}, .pads = {PT, PB, PL, PR}, .ceil = CEIL, .cip = CIP}
#define TCONVX(H, W, CI, CO, K, S, DIL, P0, P1, OP, G, NB)                                         \
    {.op = KR_OP_TRANSPOSE_CONV, .rank = 4, .dims = {1, H, W, CI}, .cout = CO, .k = {K, K},       \
     .s = {S, S}, .dil = {DIL, DIL}, .pads = {P0, P1, P0, P1}, .out_pad = {OP, OP}, .groups = G,  \
     .no_bias = NB}
#define RSZ(H, W, C, OH, OW, M, CO, NM)                                                             \
    {.op = KR_OP_RESIZE, .rank = 4, .dims = {1, H, W, C}, .out = {OH, OW},                        \
     .rmode = KR_RESIZE_##M, .coord = KR_COORD_##CO, .nearest = KR_NEAREST_##NM}
#define UNARY(OP, A, B, LO, HI)                                                                    \
    {.op = KR_OP_##OP, .rank = 4, .dims = D4(1, 7, 5, 3), .alpha = A, .beta = B, .lo = LO, .hi = HI}

static const ocase cases[] = {
    /* CONV_2D with explicit pads and groups: H, W, Cin, Cout, K, S, dilation, pads t/b/l/r,
     * groups, activation */
    CONVG(7, 5, 3, 4, 3, 2, 1, 1, 2, 0, 1, 1, NONE),
    CONVG(9, 7, 4, 6, 3, 1, 1, 1, 1, 1, 1, 2, RELU),
    CONVG(6, 7, 6, 3, 1, 1, 1, 0, 0, 0, 0, 3, NONE),
    CONVG(9, 8, 4, 8, 3, 2, 2, 2, 2, 2, 2, 4, NONE),  /* depthwise x2 written as groups */
    CONVG(8, 9, 8, 8, 3, 1, 1, 1, 1, 1, 1, 8, RELU6), /* depthwise as groups = C */
    CONVG(5, 6, 2, 3, 5, 1, 1, 0, 0, 0, 0, 1, NONE),  /* VALID written as explicit zeros */
    CONVG(11, 10, 6, 4, 3, 2, 3, 3, 3, 3, 3, 2, NONE), /* dilation 3, pads as dilation */
    /* f16 on the tensor cores (cuda conv_2d_tc, compute 8.0+; WMMA on 7.x where C % 16 == 0):
     * stride 2 with asymmetric pads; dilation 2; K = 72 (a partial 32-deep k step) with 72
     * outputs (a full and a partial 64-wide tile); more than 33,792 output pixels (128-row
     * tiles on a 132-multiprocessor GPU) at 16, 32 and 64 output channels */
    CONVG(19, 17, 16, 24, 3, 2, 1, 1, 0, 2, 1, 1, NONE),
    CONVG(11, 13, 24, 16, 3, 1, 2, 2, 1, 2, 1, 1, RELU),
    CONVG(13, 9, 8, 72, 3, 1, 1, 1, 1, 1, 1, 1, NONE),
    CONVG(190, 180, 16, 16, 3, 1, 1, 1, 1, 1, 1, 1, NONE),
    CONVG(185, 183, 16, 32, 1, 1, 1, 0, 0, 0, 0, 1, RELU6),
    CONVG(187, 181, 32, 40, 1, 1, 1, 0, 0, 0, 0, 1, NONE),
    /* f16, the patch kernel (conv_2d_tc.cu conv_tcp: 16-channel chunks, 8- or 4-row tiles of 16
     * pixels): 128 input channels (8 chunks) to 64 on partial tiles; 40 inputs (a half chunk
     * last) to 20 outputs with stride 2 and dilation 2; dilation 8 on 20 x 20 (a patch mostly
     * outside the input); a 5x5 window; one row; 4- and 8-row tiles at 64 outputs (130 x 100 at
     * batch 1 and 3); dilation 12 at 64 outputs (its patch over the kernel's shared-memory
     * bound: conv_tc takes it). The larger ones here read inputs in [-0.125, 0.125): with
     * [-1, 1) the cpu backend's Winograd transform errs by up to 2.3e-4 on them, past its 1e-4 */
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 23, 37, 128}, .cout = 64, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_RELU,
     .lo = -0.125f, .hi = 0.125f},
    CONVG(17, 21, 40, 20, 3, 2, 2, 2, 2, 2, 2, 1, NONE),
    CONVG(20, 20, 16, 16, 3, 1, 8, 8, 8, 8, 8, 1, RELU),
    CONVG(9, 10, 8, 16, 5, 1, 1, 2, 2, 2, 2, 1, NONE),
    CONVG(1, 40, 16, 16, 3, 1, 1, 1, 1, 1, 1, 1, NONE),
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 130, 100, 32}, .cout = 64, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_RELU,
     .lo = -0.125f, .hi = 0.125f},
    CONVG(13, 11, 16, 64, 3, 1, 12, 12, 12, 12, 12, 1, NONE),
    /* 16-row tiles (8 warps) where they still give two blocks per multiprocessor (at batch 3 on
     * a 132-multiprocessor GPU; 8-row tiles at batch 1): 64, 32 and 16 outputs */
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 190, 170, 16}, .cout = 64, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_RELU,
     .lo = -0.125f, .hi = 0.125f},
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 150, 170, 16}, .cout = 32, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_NONE,
     .lo = -0.125f, .hi = 0.125f},
    /* the 8-warp 16-output instance held to 64 registers (four blocks per multiprocessor;
     * conv_2d_tc.cu tp_min_blocks), 16-row tiles at batch 3 (8- and 4-row at batch 1): u2netp's
     * 64 -> 16 on odd sizes; 24 inputs (a half chunk last) with dilation 2 */
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 187, 171, 64}, .cout = 16, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_RELU,
     .lo = -0.125f, .hi = 0.125f},
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 161, 177, 24}, .cout = 16, .k = {3, 3},
     .s = {1, 1}, .dil = {2, 2}, .pads = {2, 2, 2, 2}, .groups = 1, .act = KR_ACT_NONE,
     .lo = -0.125f, .hi = 0.125f},
    /* narrower tiles on small grids (conv_2d_tc.cu: fewer 4-row tiles than multiprocessors, so
     * 16 or 32 output channels per block instead of 64): u2netp's deep levels at odd sizes,
     * 128 -> 64 (8 chunks) at 11 x 9, 64 -> 48 (three tiles of 16 channels, one partial tile of
     * 64 where not narrowed) with dilation 2 at 21 x 19, 32 -> 64 with dilation 4 at 10 x 10, 64 -> 40 with dilation 4 at
     * 20 x 20, 64 -> 64 at 41 x 39 (33 tiles at batch 1, 99 at batch 3) */
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 11, 9, 128}, .cout = 64, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_RELU,
     .lo = -0.125f, .hi = 0.125f},
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 21, 19, 64}, .cout = 48, .k = {3, 3},
     .s = {1, 1}, .dil = {2, 2}, .pads = {2, 2, 2, 2}, .groups = 1, .act = KR_ACT_NONE,
     .lo = -0.125f, .hi = 0.125f},
    CONVG(10, 10, 32, 64, 3, 1, 4, 4, 4, 4, 4, 1, RELU),
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 20, 20, 64}, .cout = 40, .k = {3, 3},
     .s = {1, 1}, .dil = {4, 4}, .pads = {4, 4, 4, 4}, .groups = 1, .act = KR_ACT_RELU,
     .lo = -0.125f, .hi = 0.125f},
    {.op = KR_OP_CONV_2D, .rank = 4, .dims = {1, 41, 39, 64}, .cout = 64, .k = {3, 3},
     .s = {1, 1}, .dil = {1, 1}, .pads = {1, 1, 1, 1}, .groups = 1, .act = KR_ACT_NONE,
     .lo = -0.125f, .hi = 0.125f},
    /* DEPTHWISE_CONV_2D with explicit asymmetric pads */
    {.op = KR_OP_DEPTHWISE_CONV_2D, .rank = 4, .dims = D4(1, 8, 7, 3), .cout = 6, .k = {3, 3},
     .s = {2, 2}, .pads = {0, 1, 1, 0}},
    /* pools: H, W, C, K, S, dilation, pads t/b/l/r, ceil_mode, count_include_pad */
    POOLX(MAX_POOL_2D, 7, 5, 3, 2, 2, 1, 0, 0, 0, 0, 1, 0),  /* U2-Net's pool on odd sizes */
    POOLX(MAX_POOL_2D, 9, 7, 2, 3, 2, 1, 1, 1, 1, 1, 1, 0),
    POOLX(MAX_POOL_2D, 8, 9, 3, 3, 1, 2, 2, 2, 1, 1, 0, 0),  /* dilated */
    POOLX(MAX_POOL_2D, 6, 7, 4, 2, 2, 1, 0, 1, 1, 0, 0, 0),  /* asymmetric pads */
    POOLX(MAX_POOL_2D, 10, 11, 2, 3, 3, 1, 0, 0, 0, 0, 1, 0),
    POOLX(AVERAGE_POOL_2D, 7, 5, 3, 3, 2, 1, 1, 1, 1, 1, 0, 1),
    POOLX(AVERAGE_POOL_2D, 7, 5, 3, 3, 2, 1, 1, 1, 1, 1, 0, 0),
    POOLX(AVERAGE_POOL_2D, 8, 7, 2, 3, 2, 1, 1, 1, 1, 1, 1, 0),
    POOLX(AVERAGE_POOL_2D, 7, 7, 3, 2, 2, 1, 0, 0, 0, 0, 1, 1), /* ceil window past the end */
    POOLX(AVERAGE_POOL_2D, 9, 9, 2, 3, 2, 1, 1, 1, 1, 1, 1, 1),
    POOLX(AVERAGE_POOL_2D, 9, 8, 2, 3, 1, 2, 2, 1, 0, 2, 0, 1), /* dilated */
    POOLX(AVERAGE_POOL_2D, 6, 6, 4, 2, 1, 1, 1, 0, 0, 1, 0, 1),
    /* PAD: constant with a value, reflect, edge; several axes, other ranks */
    {.op = KR_OP_PAD, .rank = 4, .dims = D4(1, 7, 5, 3), .pad = {{0, 0}, {1, 2}, {2, 1}},
     .mode = KR_PAD_CONSTANT, .value = 1.5f},
    {.op = KR_OP_PAD, .rank = 4, .dims = D4(1, 7, 5, 3), .pad = {{0, 0}, {1, 2}, {3, 4}},
     .mode = KR_PAD_REFLECT},
    {.op = KR_OP_PAD, .rank = 4, .dims = D4(1, 4, 6, 3), .pad = {{0, 0}, {3, 3}, {0, 0}, {1, 2}},
     .mode = KR_PAD_REFLECT},
    {.op = KR_OP_PAD, .rank = 4, .dims = D4(1, 7, 5, 3), .pad = {{0, 0}, {2, 1}, {4, 6}},
     .mode = KR_PAD_EDGE},
    {.op = KR_OP_PAD, .rank = 4, .dims = D4(1, 1, 5, 2), .pad = {{0, 0}, {2, 2}, {0, 0}, {1, 1}},
     .mode = KR_PAD_EDGE},
    {.op = KR_OP_PAD, .rank = 3, .dims = {1, 5, 4}, .pad = {{0, 0}, {2, 3}, {1, 1}},
     .mode = KR_PAD_REFLECT},
    {.op = KR_OP_PAD, .rank = 2, .dims = {1, 6}, .pad = {{0, 0}, {3, 2}}, .mode = KR_PAD_EDGE},
    {.op = KR_OP_PAD, .rank = 2, .dims = {1, 6}, .pad = {{0, 0}, {0, 4}},
     .mode = KR_PAD_CONSTANT, .value = -2.0f},
    /* SUB and DIV: same shapes, constant and computed broadcast operands, ranks 2..5 */
    {.op = KR_OP_SUB, .rank = 4, .dims = D4(1, 7, 5, 3), .rank2 = 4, .dims2 = D4(1, 7, 5, 3)},
    {.op = KR_OP_SUB, .rank = 4, .dims = D4(1, 7, 5, 3), .rank2 = 4, .dims2 = D4(1, 1, 1, 3),
     .const2 = 1, .act = KR_ACT_RELU},
    {.op = KR_OP_SUB, .rank = 4, .dims = D4(1, 1, 5, 1), .const1 = 1, .rank2 = 4,
     .dims2 = D4(1, 7, 5, 3)},
    {.op = KR_OP_SUB, .rank = 4, .dims = D4(1, 7, 1, 3), .rank2 = 4, .dims2 = D4(1, 1, 5, 3)},
    {.op = KR_OP_SUB, .rank = 5, .dims = {1, 2, 3, 4, 5}, .rank2 = 1, .dims2 = {5}, .const2 = 1},
    {.op = KR_OP_DIV, .rank = 4, .dims = D4(1, 7, 5, 3), .rank2 = 4, .dims2 = D4(1, 7, 5, 3),
     .lo = 0.5f, .hi = 2.0f},
    {.op = KR_OP_DIV, .rank = 4, .dims = D4(1, 7, 5, 3), .rank2 = 3, .dims2 = {1, 1, 3},
     .const2 = 1, .act = KR_ACT_RELU6},
    {.op = KR_OP_DIV, .rank = 3, .dims = {1, 5, 1}, .const1 = 1, .rank2 = 3, .dims2 = {1, 5, 4},
     .lo = 0.25f, .hi = 3.0f},
    {.op = KR_OP_DIV, .rank = 2, .dims = {1, 6}, .rank2 = 2, .dims2 = {1, 1}, .lo = 0.5f,
     .hi = 4.0f},
    /* unary operators: alpha, beta, input range */
    UNARY(TANH, 0, 0, -4, 4),
    {.op = KR_OP_TANH, .rank = 2, .dims = {1, 37}, .lo = -12, .hi = 12},
    UNARY(EXP, 0, 0, -6, 6),
    {.op = KR_OP_EXP, .rank = 3, .dims = {1, 9, 5}, .lo = -1, .hi = 1},
    UNARY(SQRT, 0, 0, 0, 9),
    {.op = KR_OP_SQRT, .rank = 2, .dims = {1, 37}, .lo = 0, .hi = 0.01f},
    UNARY(ELU, 1.0f, 0, -4, 4),
    UNARY(ELU, 0.5f, 0, -3, 1),
    UNARY(LEAKY_RELU, 0.1f, 0, -4, 4),
    UNARY(LEAKY_RELU, 0.01f, 0, -2, 1),
    UNARY(HARD_SIGMOID, 0.2f, 0.5f, -5, 5),
    UNARY(HARD_SIGMOID, 1.0f / 6.0f, 0.5f, -5, 5),
    UNARY(CLIP, 0.0f, 6.0f, -8, 8),
    UNARY(CLIP, -1.0f, INFINITY, -3, 3),
    UNARY(CLIP, -INFINITY, 0.5f, -3, 3),
    UNARY(POW, 2.0f, 0, -3, 3),
    UNARY(POW, 0.5f, 0, 0, 4),
    UNARY(POW, 3.0f, 0, -2, 2),
    {.op = KR_OP_POW, .rank = 2, .dims = {1, 37}, .alpha = 1.7f, .lo = 0.1f, .hi = 3},
    /* REDUCE_MAX */
    {.op = KR_OP_REDUCE_MAX, .rank = 4, .dims = D4(1, 7, 5, 3), .n_axes = 2, .axes = {1, 2},
     .keep = 1},
    {.op = KR_OP_REDUCE_MAX, .rank = 4, .dims = D4(1, 7, 5, 3), .n_axes = 1, .axes = {3},
     .keep = 1},
    {.op = KR_OP_REDUCE_MAX, .rank = 4, .dims = D4(1, 7, 5, 3), .n_axes = 1, .axes = {-1}},
    {.op = KR_OP_REDUCE_MAX, .rank = 3, .dims = {1, 4, 6}, .n_axes = 1, .axes = {1}},
    {.op = KR_OP_REDUCE_MAX, .rank = 5, .dims = {1, 3, 4, 5, 2}, .n_axes = 2, .axes = {2, 4},
     .keep = 1},
    /* RESIZE: H, W, C, OH, OW, mode, coordinate transformation, nearest mode */
    RSZ(3, 5, 2, 7, 4, NEAREST, HALF_PIXEL, ROUND_PREFER_FLOOR),
    RSZ(3, 5, 2, 6, 10, NEAREST, HALF_PIXEL, ROUND_PREFER_FLOOR),
    RSZ(3, 5, 2, 7, 4, NEAREST, HALF_PIXEL, ROUND_PREFER_CEIL),
    RSZ(4, 4, 3, 8, 8, NEAREST, ASYMMETRIC, FLOOR),
    RSZ(4, 5, 3, 6, 9, NEAREST, ASYMMETRIC, CEIL),
    RSZ(5, 7, 2, 3, 4, NEAREST, ALIGN_CORNERS, ROUND_PREFER_FLOOR),
    RSZ(5, 7, 2, 9, 3, NEAREST, TF_HALF_PIXEL_FOR_NEAREST, FLOOR),
    RSZ(5, 7, 2, 9, 3, NEAREST, PYTORCH_HALF_PIXEL, ROUND_PREFER_CEIL),
    RSZ(6, 6, 1, 1, 1, NEAREST, PYTORCH_HALF_PIXEL, ROUND_PREFER_FLOOR),
    RSZ(6, 5, 2, 4, 7, NEAREST, HALF_PIXEL_SYMMETRIC, ROUND_PREFER_FLOOR),
    RSZ(3, 5, 2, 7, 4, LINEAR, HALF_PIXEL, ROUND_PREFER_FLOOR),
    RSZ(4, 4, 3, 8, 8, LINEAR, PYTORCH_HALF_PIXEL, ROUND_PREFER_FLOOR), /* U2-Net's upsampling */
    RSZ(10, 10, 3, 5, 5, LINEAR, PYTORCH_HALF_PIXEL, ROUND_PREFER_FLOOR),
    RSZ(7, 5, 2, 1, 3, LINEAR, PYTORCH_HALF_PIXEL, ROUND_PREFER_FLOOR), /* out 1 -> 0 */
    RSZ(3, 5, 2, 7, 4, LINEAR, ALIGN_CORNERS, ROUND_PREFER_FLOOR),
    RSZ(1, 4, 2, 3, 9, LINEAR, ALIGN_CORNERS, ROUND_PREFER_FLOOR),
    RSZ(5, 7, 2, 3, 4, LINEAR, ASYMMETRIC, ROUND_PREFER_FLOOR),
    RSZ(4, 6, 2, 9, 13, LINEAR, ASYMMETRIC, ROUND_PREFER_FLOOR),
    RSZ(5, 7, 2, 8, 3, LINEAR, TF_HALF_PIXEL_FOR_NEAREST, ROUND_PREFER_FLOOR),
    RSZ(6, 5, 2, 4, 7, LINEAR, HALF_PIXEL_SYMMETRIC, ROUND_PREFER_FLOOR),
    RSZ(6, 9, 4, 12, 18, LINEAR, HALF_PIXEL, ROUND_PREFER_FLOOR),
    /* scales given, output floor(in * scale) */
    {.op = KR_OP_RESIZE, .rank = 4, .dims = D4(1, 3, 4, 2), .out = {7, 6}, .scale = {2.5f, 1.6f},
     .rmode = KR_RESIZE_LINEAR, .coord = KR_COORD_HALF_PIXEL},
    {.op = KR_OP_RESIZE, .rank = 4, .dims = D4(1, 3, 4, 2), .out = {7, 6}, .scale = {2.5f, 1.6f},
     .rmode = KR_RESIZE_NEAREST, .coord = KR_COORD_ASYMMETRIC, .nearest = KR_NEAREST_FLOOR},
    /* tf_crop_and_resize: roi y0, x0, y1, x1; samples outside the input extrapolate */
    {.op = KR_OP_RESIZE, .rank = 4, .dims = D4(1, 6, 7, 2), .out = {4, 5},
     .rmode = KR_RESIZE_LINEAR, .coord = KR_COORD_TF_CROP_AND_RESIZE,
     .roi = {0.2f, 0.1f, 0.8f, 0.9f}, .extrap = 0},
    {.op = KR_OP_RESIZE, .rank = 4, .dims = D4(1, 6, 7, 2), .out = {5, 6},
     .rmode = KR_RESIZE_LINEAR, .coord = KR_COORD_TF_CROP_AND_RESIZE,
     .roi = {-0.3f, 0.4f, 1.2f, 1.5f}, .extrap = 7.5f},
    {.op = KR_OP_RESIZE, .rank = 4, .dims = D4(1, 6, 7, 2), .out = {5, 6},
     .rmode = KR_RESIZE_NEAREST, .coord = KR_COORD_TF_CROP_AND_RESIZE,
     .nearest = KR_NEAREST_ROUND_PREFER_CEIL, .roi = {-0.3f, 0.4f, 1.2f, 1.5f}, .extrap = -1},
    {.op = KR_OP_RESIZE, .rank = 4, .dims = D4(1, 6, 7, 2), .out = {1, 1},
     .rmode = KR_RESIZE_LINEAR, .coord = KR_COORD_TF_CROP_AND_RESIZE,
     .roi = {0.1f, 0.2f, 0.7f, 0.5f}},
    /* TRANSPOSE */
    {.op = KR_OP_TRANSPOSE, .rank = 4, .dims = D4(1, 7, 5, 3), .perm = {0, 3, 1, 2}},
    {.op = KR_OP_TRANSPOSE, .rank = 4, .dims = D4(1, 7, 5, 3), .perm = {0, 2, 3, 1}},
    {.op = KR_OP_TRANSPOSE, .rank = 4, .dims = D4(1, 7, 5, 3), .perm = {0, 2, 1, 3}},
    {.op = KR_OP_TRANSPOSE, .rank = 3, .dims = {1, 4, 6}, .perm = {0, 2, 1}},
    {.op = KR_OP_TRANSPOSE, .rank = 5, .dims = {1, 2, 3, 4, 5}, .perm = {0, 4, 2, 1, 3}},
    {.op = KR_OP_TRANSPOSE, .rank = 3, .dims = {1, 4, 6}, .perm = {2, 0, 1}, .fixed = 1},
    /* SLICE: start, step (0: the whole axis), len */
    {.op = KR_OP_SLICE, .rank = 4, .dims = D4(1, 9, 7, 3), .start = {0, 1, 0, 0},
     .step = {0, 2, 0, 0}, .len = {0, 4, 0, 0}},
    {.op = KR_OP_SLICE, .rank = 4, .dims = D4(1, 9, 7, 3), .start = {0, 0, 6, 1},
     .step = {0, 0, -1, 1}, .len = {0, 0, 7, 2}},
    {.op = KR_OP_SLICE, .rank = 4, .dims = D4(1, 9, 7, 5), .start = {0, 8, 1, 4},
     .step = {0, -3, 3, -2}, .len = {0, 3, 2, 3}},
    {.op = KR_OP_SLICE, .rank = 3, .dims = {1, 6, 10}, .start = {0, 2, 3}, .step = {0, 1, 1},
     .len = {0, 3, 5}},
    {.op = KR_OP_SLICE, .rank = 3, .dims = {3, 4, 5}, .start = {2, 0, 0}, .step = {-1, 0, 2},
     .len = {2, 0, 3}, .fixed = 1},
    /* SOFTMAX */
    {.op = KR_OP_SOFTMAX, .rank = 4, .dims = D4(1, 7, 5, 3), .axis = 3, .lo = -8, .hi = 8},
    {.op = KR_OP_SOFTMAX, .rank = 4, .dims = D4(1, 7, 5, 3), .axis = 1, .lo = -3, .hi = 3},
    {.op = KR_OP_SOFTMAX, .rank = 2, .dims = {1, 37}, .axis = 1, .lo = -20, .hi = 20},
    {.op = KR_OP_SOFTMAX, .rank = 3, .dims = {1, 4, 21}, .axis = 2},
    {.op = KR_OP_SOFTMAX, .rank = 2, .dims = {3, 5}, .axis = 0, .fixed = 1},
    /* ARG_MAX (INT32 output) */
    {.op = KR_OP_ARGMAX, .rank = 4, .dims = D4(1, 7, 5, 3), .axis = 3, .keep = 1},
    {.op = KR_OP_ARGMAX, .rank = 4, .dims = D4(1, 7, 5, 21), .axis = 3},
    {.op = KR_OP_ARGMAX, .rank = 4, .dims = D4(1, 7, 5, 3), .axis = 1, .last = 1},
    {.op = KR_OP_ARGMAX, .rank = 3, .dims = {1, 6, 4}, .axis = 2, .keep = 1, .last = 1},
    /* MATMUL: A [.., M, K] x B [.., K, N] */
    {.op = KR_OP_MATMUL, .rank = 3, .dims = {1, 5, 7}, .rank2 = 3, .dims2 = {1, 7, 3},
     .const2 = 1},
    {.op = KR_OP_MATMUL, .rank = 4, .dims = D4(1, 2, 5, 7), .rank2 = 4, .dims2 = D4(1, 1, 7, 4),
     .const2 = 1},
    {.op = KR_OP_MATMUL, .rank = 3, .dims = {1, 5, 7}, .rank2 = 3, .dims2 = {1, 7, 6}},
    {.op = KR_OP_MATMUL, .rank = 3, .dims = {1, 4, 5}, .const1 = 1, .rank2 = 3,
     .dims2 = {1, 5, 3}},
    {.op = KR_OP_MATMUL, .rank = 2, .dims = {1, 40}, .rank2 = 2, .dims2 = {40, 9}, .const2 = 1},
    {.op = KR_OP_MATMUL, .rank = 4, .dims = D4(1, 3, 1, 6), .rank2 = 4, .dims2 = D4(1, 1, 6, 2)},
    {.op = KR_OP_MATMUL, .rank = 2, .dims = {4, 6}, .rank2 = 2, .dims2 = {6, 3}, .fixed = 1},
    /* GATHER (constant indices) */
    {.op = KR_OP_GATHER, .rank = 4, .dims = D4(1, 7, 5, 3), .axis = 3, .rank2 = 1, .dims2 = {4},
     .idx = {2, 0, 2, 1}},
    {.op = KR_OP_GATHER, .rank = 4, .dims = D4(1, 7, 5, 3), .axis = 1, .rank2 = 0,
     .idx = {4}},
    {.op = KR_OP_GATHER, .rank = 3, .dims = {1, 6, 4}, .axis = 2, .rank2 = 2, .dims2 = {2, 3},
     .idx = {3, 0, 1, 1, 2, 3}},
    {.op = KR_OP_GATHER, .rank = 3, .dims = {4, 3, 2}, .axis = 0, .rank2 = 1, .dims2 = {3},
     .idx = {3, 1, 3}, .fixed = 1},
    /* TRANSPOSE_CONV: H, W, Cin, Cout, K, S, dilation, pad before, pad after, output padding,
     * groups, no bias */
    TCONVX(4, 3, 3, 2, 2, 2, 1, 0, 0, 0, 1, 0),
    TCONVX(5, 4, 3, 2, 3, 2, 1, 1, 1, 1, 1, 0),
    TCONVX(4, 5, 2, 3, 4, 2, 1, 1, 1, 0, 1, 1),
    TCONVX(3, 4, 4, 6, 3, 1, 1, 1, 1, 0, 2, 0),
    TCONVX(4, 3, 2, 2, 3, 2, 2, 1, 0, 1, 1, 0),
    TCONVX(3, 3, 4, 4, 3, 3, 1, 0, 2, 2, 4, 1),
    TCONVX(5, 5, 6, 3, 5, 2, 1, 2, 2, 1, 3, 0),
    {.op = KR_OP_TRANSPOSE_CONV, .rank = 4, .dims = D4(1, 3, 4, 4), .cout = 2, .k = {2, 3},
     .s = {2, 1}, .pads = {0, 0, 1, 1}, .act = KR_ACT_RELU6}, /* fused clamp, unequal axes */
};
#define N_OCASES ((int)(sizeof(cases) / sizeof(cases[0])))

int kt_onnx_case_count(void) { return N_OCASES; }

static void shape_str(const kr_tensor *t, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%d" : "%d", t->dims[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* A constant of @p n floats uniform [-1, 1) from @p rng. */
static int add_weights(kt_graph *b, kt_rng *rng, int rank, const int *dims)
{
    size_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= (size_t)dims[d];
    float *w = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(w);
    kt_rng_fill(rng, w, n, -1.0f, 1.0f);
    int t = kt_graph_const(b, KR_DTYPE_F32, rank, dims, w);
    free(w);
    return t;
}

/* Output size of an explicitly padded window along one axis (graph.h, validate_window.c). */
static int window_out(int n, int k, int s, int d, int before, int after, int ceil_mode)
{
    int span = n + before + after - ((k - 1) * d + 1);
    int out = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    if (ceil_mode && (out - 1) * s >= n + before)
        out--;
    return out;
}

static const char *pad_mode_name(kr_pad_mode m)
{
    return m == KR_PAD_REFLECT ? "reflect" : m == KR_PAD_EDGE ? "edge" : "constant";
}

static const char *coord_name(kr_resize_coord c)
{
    static const char *const names[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn",
                                        "tf_crop_and_resize", "half_pixel_symmetric"};
    return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

static const char *nearest_name(kr_nearest_mode m)
{
    static const char *const names[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil"};
    return (unsigned)m < 4 ? names[m] : "?";
}

kr_graph *kt_onnx_case_build(int i, uint32_t seed, char *desc, size_t desc_cap, float *lo,
                             float *hi)
{
    assert_true(i >= 0 && i < N_OCASES);
    const ocase *c = &cases[i];
    kt_graph b;
    kt_graph_begin(&b, kr_op_name(c->op), 16, 1, 1 << 20);
    kt_rng rng = kt_rng_seed(seed * 2654435761u + 7);
    int x = c->const1 ? add_weights(&b, &rng, c->rank, c->dims)
                      : kt_graph_act(&b, c->rank, c->dims);
    int in[KR_MAX_NODE_INPUTS] = {x, -1, -1, -1, -1, -1, -1, -1}, n_in = 1;
    int out_rank = c->rank, od[KR_MAX_DIMS];
    memcpy(od, c->dims, sizeof(od));
    int dil[2] = {c->dil[0] ? c->dil[0] : 1, c->dil[1] ? c->dil[1] : 1};
    char extra[128] = "";
    switch (c->op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D: {
        int dw = c->op == KR_OP_DEPTHWISE_CONV_2D, groups = c->groups ? c->groups : 1;
        int wd[4] = {dw ? 1 : c->cout, c->k[0], c->k[1], dw ? c->cout : c->dims[3] / groups};
        in[1] = add_weights(&b, &rng, 4, wd);
        in[2] = add_weights(&b, &rng, 1, &c->cout);
        n_in = 3;
        od[1] = window_out(c->dims[1], c->k[0], c->s[0], dil[0], c->pads[0], c->pads[1], 0);
        od[2] = window_out(c->dims[2], c->k[1], c->s[1], dil[1], c->pads[2], c->pads[3], 0);
        od[3] = c->cout;
        snprintf(extra, sizeof(extra), " k%d s%d d%d pads %d/%d/%d/%d groups %d", c->k[0],
                 c->s[0], dil[0], c->pads[0], c->pads[1], c->pads[2], c->pads[3], groups);
        break;
    }
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
        od[1] = window_out(c->dims[1], c->k[0], c->s[0], dil[0], c->pads[0], c->pads[1], c->ceil);
        od[2] = window_out(c->dims[2], c->k[1], c->s[1], dil[1], c->pads[2], c->pads[3], c->ceil);
        snprintf(extra, sizeof(extra), " k%d s%d d%d pads %d/%d/%d/%d%s%s", c->k[0], c->s[0],
                 dil[0], c->pads[0], c->pads[1], c->pads[2], c->pads[3],
                 c->ceil ? " ceil_mode" : "", c->cip ? " count_include_pad" : "");
        break;
    case KR_OP_TRANSPOSE_CONV: {
        int groups = c->groups ? c->groups : 1;
        int wd[4] = {c->cout, c->k[0], c->k[1], c->dims[3] / groups};
        in[1] = add_weights(&b, &rng, 4, wd);
        n_in = 2;
        if (!c->no_bias) {
            in[2] = add_weights(&b, &rng, 1, &c->cout);
            n_in = 3;
        }
        for (int a = 0; a < 2; a++) /* ONNX ConvTranspose's output size */
            od[1 + a] = c->s[a] * (c->dims[1 + a] - 1) + c->out_pad[a] +
                        (c->k[a] - 1) * dil[a] + 1 - c->pads[2 * a] - c->pads[2 * a + 1];
        od[3] = c->cout;
        snprintf(extra, sizeof(extra), " k%dx%d s%dx%d d%d pads %d/%d/%d/%d output_padding %d "
                 "groups %d%s%s", c->k[0], c->k[1], c->s[0], c->s[1], dil[0], c->pads[0],
                 c->pads[1], c->pads[2], c->pads[3], c->out_pad[0], groups,
                 c->no_bias ? " no bias" : "", c->act == KR_ACT_RELU6 ? " RELU6" : "");
        break;
    }
    case KR_OP_PAD: {
        int32_t p[2 * KR_MAX_DIMS];
        int pd[2] = {c->rank, 2};
        size_t n = (size_t)snprintf(extra, sizeof(extra), " %s", pad_mode_name(c->mode));
        if (c->mode == KR_PAD_CONSTANT)
            n += (size_t)snprintf(extra + n, sizeof(extra) - n, " %g", (double)c->value);
        for (int d = 0; d < c->rank; d++) {
            p[2 * d] = c->pad[d][0];
            p[2 * d + 1] = c->pad[d][1];
            od[d] = c->dims[d] + c->pad[d][0] + c->pad[d][1];
            n += (size_t)snprintf(extra + n, sizeof(extra) - n, " %d/%d", p[2 * d], p[2 * d + 1]);
        }
        in[1] = kt_graph_const(&b, KR_DTYPE_I32, 2, pd, p);
        n_in = 2;
        break;
    }
    case KR_OP_SUB:
    case KR_OP_DIV:
    case KR_OP_MATMUL: {
        int second = c->const2 ? add_weights(&b, &rng, c->rank2, c->dims2)
                               : kt_graph_act(&b, c->rank2, c->dims2);
        in[1] = second;
        n_in = 2;
        if (c->op == KR_OP_MATMUL) {
            for (int d = 0; d < c->rank - 2; d++)
                od[d] = c->dims[d] == 1 ? c->dims2[d] : c->dims[d];
            od[c->rank - 1] = c->dims2[c->rank - 1];
        } else {
            out_rank = c->rank > c->rank2 ? c->rank : c->rank2;
            for (int d = 0; d < out_rank; d++) {
                int ia = d - (out_rank - c->rank), ib = d - (out_rank - c->rank2);
                int da = ia >= 0 ? c->dims[ia] : 1, db = ib >= 0 ? c->dims2[ib] : 1;
                od[d] = da == 1 ? db : da;
            }
        }
        char s2[48];
        shape_str(&b.g->tensors[second], s2, sizeof(s2));
        snprintf(extra, sizeof(extra), " %s %s%s%s", c->const1 ? "(const) with" : "with", s2,
                 c->const2 ? " (const)" : "", c->act == KR_ACT_RELU ? " RELU"
                                              : c->act == KR_ACT_RELU6 ? " RELU6" : "");
        break;
    }
    case KR_OP_REDUCE_MAX: {
        int32_t axes[KR_MAX_DIMS];
        unsigned mask = 0;
        size_t n = 0;
        for (int a = 0; a < c->n_axes; a++) {
            axes[a] = c->axes[a];
            mask |= 1u << (c->axes[a] < 0 ? c->axes[a] + c->rank : c->axes[a]);
            n += (size_t)snprintf(extra + n, sizeof(extra) - n, a ? ",%d" : " axes [%d",
                                  c->axes[a]);
        }
        snprintf(extra + n, sizeof(extra) - n, "]%s", c->keep ? " keep_dims" : "");
        in[1] = kt_graph_const(&b, KR_DTYPE_I32, 1, &c->n_axes, axes);
        n_in = 2;
        out_rank = 0;
        for (int d = 0; d < c->rank; d++) {
            if (!(mask & (1u << d)))
                od[out_rank++] = c->dims[d];
            else if (c->keep)
                od[out_rank++] = 1;
        }
        break;
    }
    case KR_OP_RESIZE:
        od[1] = c->out[0];
        od[2] = c->out[1];
        snprintf(extra, sizeof(extra), " %s %s%s%s", c->rmode == KR_RESIZE_LINEAR ? "linear"
                                                                                  : "nearest",
                 coord_name(c->coord), c->rmode == KR_RESIZE_NEAREST ? " " : "",
                 c->rmode == KR_RESIZE_NEAREST ? nearest_name(c->nearest) : "");
        break;
    case KR_OP_TRANSPOSE:
        for (int d = 0; d < c->rank; d++)
            od[d] = c->dims[c->perm[d]];
        snprintf(extra, sizeof(extra), " perm %d,%d,%d,%d,%d", c->perm[0], c->perm[1],
                 c->perm[2], c->perm[3], c->perm[4]);
        break;
    case KR_OP_SLICE: {
        size_t n = (size_t)snprintf(extra, sizeof(extra), " start:step:len");
        for (int d = 0; d < c->rank; d++) {
            od[d] = c->step[d] ? c->len[d] : c->dims[d];
            n += (size_t)snprintf(extra + n, sizeof(extra) - n, " %d:%d:%d", c->start[d],
                                  c->step[d] ? c->step[d] : 1, od[d]);
        }
        break;
    }
    case KR_OP_SOFTMAX: snprintf(extra, sizeof(extra), " axis %d", c->axis); break;
    case KR_OP_ARGMAX:
        out_rank = 0;
        for (int d = 0; d < c->rank; d++)
            if (d != c->axis || c->keep)
                od[out_rank++] = d == c->axis ? 1 : c->dims[d];
        snprintf(extra, sizeof(extra), " axis %d%s%s", c->axis, c->keep ? " keep_dims" : "",
                 c->last ? " select_last_index" : "");
        break;
    case KR_OP_GATHER: {
        in[1] = kt_graph_const(&b, KR_DTYPE_I32, c->rank2, c->dims2, c->idx);
        n_in = 2;
        out_rank = 0;
        for (int d = 0; d < c->axis; d++)
            od[out_rank++] = c->dims[d];
        for (int d = 0; d < c->rank2; d++)
            od[out_rank++] = c->dims2[d];
        for (int d = c->axis + 1; d < c->rank; d++)
            od[out_rank++] = c->dims[d];
        snprintf(extra, sizeof(extra), " axis %d, %d-d indices", c->axis, c->rank2);
        break;
    }
    default:
        if (c->op == KR_OP_ELU || c->op == KR_OP_LEAKY_RELU || c->op == KR_OP_POW)
            snprintf(extra, sizeof(extra), " alpha %g", (double)c->alpha);
        else if (c->op == KR_OP_HARD_SIGMOID || c->op == KR_OP_CLIP)
            snprintf(extra, sizeof(extra), " %g, %g", (double)c->alpha, (double)c->beta);
        break;
    }
    int y = kt_graph_act(&b, out_rank, od);
    if (c->op == KR_OP_ARGMAX)
        b.g->tensors[y].dtype = KR_DTYPE_I32;
    kr_node *node = kt_graph_node(&b, c->op, n_in, in, y);
    node->activation = c->act;
    switch (c->op) {
    case KR_OP_CONV_2D:
    case KR_OP_DEPTHWISE_CONV_2D:
    case KR_OP_AVERAGE_POOL_2D:
    case KR_OP_MAX_POOL_2D:
    case KR_OP_TRANSPOSE_CONV: {
        kr_window_params *w = &node->p.window;
        w->kernel_h = c->k[0];
        w->kernel_w = c->k[1];
        w->stride_h = c->s[0];
        w->stride_w = c->s[1];
        w->dilation_h = dil[0];
        w->dilation_w = dil[1];
        w->padding = KR_PADDING_EXPLICIT;
        w->pad_top = c->pads[0];
        w->pad_bottom = c->pads[1];
        w->pad_left = c->pads[2];
        w->pad_right = c->pads[3];
        w->groups = c->groups;
        w->ceil_mode = c->ceil;
        w->count_include_pad = c->cip;
        break;
    }
    case KR_OP_PAD:
        node->p.pad.mode = c->mode;
        node->p.pad.value = c->value;
        break;
    case KR_OP_REDUCE_MAX: node->p.mean.keep_dims = c->keep; break;
    case KR_OP_RESIZE:
        node->p.resize_onnx.mode = c->rmode;
        node->p.resize_onnx.coord = c->coord;
        node->p.resize_onnx.nearest = c->nearest;
        node->p.resize_onnx.scale_h = c->scale[0] > 0 ? c->scale[0]
                                                      : (float)c->out[0] / (float)c->dims[1];
        node->p.resize_onnx.scale_w = c->scale[1] > 0 ? c->scale[1]
                                                      : (float)c->out[1] / (float)c->dims[2];
        memcpy(node->p.resize_onnx.roi, c->roi, sizeof(c->roi));
        node->p.resize_onnx.extrapolation = c->extrap;
        break;
    case KR_OP_TRANSPOSE: memcpy(node->p.transpose.perm, c->perm, sizeof(c->perm)); break;
    case KR_OP_SLICE:
        for (int d = 0; d < c->rank; d++) {
            node->p.slice.start[d] = c->start[d];
            node->p.slice.step[d] = c->step[d] ? c->step[d] : 1;
        }
        break;
    case KR_OP_SOFTMAX:
    case KR_OP_GATHER: node->p.axis.axis = c->axis; break;
    case KR_OP_ARGMAX:
        node->p.argmax.axis = c->axis;
        node->p.argmax.keep_dims = c->keep;
        node->p.argmax.select_last_index = c->last;
        break;
    default:
        node->p.unary.alpha = c->alpha;
        node->p.unary.beta = c->beta;
        break;
    }
    for (int k = 0; k < n_in; k++)
        if (in[k] >= 0 && !kr_tensor_is_const(&b.g->tensors[in[k]]))
            kt_graph_input(&b, in[k]);
    kt_graph_output(&b, y);
    b.g->fixed_batch = c->fixed;
    kr_graph *g = NULL;
    keyer_error err = {0};
    if (kt_graph_finish(&b, &g, &err) != KEYER_OK)
        fail_msg("onnx case %d %s: %s", i, kr_op_name(c->op), err.message);
    char si[48], so[48];
    shape_str(&g->tensors[g->nodes[0].inputs[0]], si, sizeof(si));
    shape_str(&g->tensors[y], so, sizeof(so));
    snprintf(desc, desc_cap, "%s %s%s -> %s%s", kr_op_name(c->op), si, extra, so,
             c->fixed ? " (fixed_batch)" : "");
    *lo = c->lo == 0 && c->hi == 0 ? -1.0f : c->lo;
    *hi = c->lo == 0 && c->hi == 0 ? 1.0f : c->hi;
    return g;
}
