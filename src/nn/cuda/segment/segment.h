/*
 * Cluster segments: an optional fused schedule inside the persistent one (persistent/schedule.c
 * takes it only on sm_90, unless PERSISTENT_GRID, and only where the plan holds such a run:
 * selfie and selfie-landscape; the persistent kernel alone runs the same steps otherwise). A
 * run of persistent steps at a small resolution (the MobileNetV3 blocks at 1/16 of selfie's
 * input) done by ONE kernel in which each image is a thread-block cluster (Hopper), a block per
 * image row, every activation in shared memory.
 * Neighbouring rows (the depthwise halo) and the pools' sums are read from the other blocks'
 * shared memory (distributed shared memory), and a cluster barrier replaces the grid barrier
 * between steps; each stage's weights are copied into shared memory (bulk copies) while the
 * stage before it computes. The persistent kernel runs the steps before the segment, this
 * kernel the segment, the persistent kernel the steps after it.
 *
 * The run it takes (kr_cuda_segment_find):
 *   E (optional, with S) the three steps before S where they are the encoder's block at
 *                       2h x 2W that makes S's input: a plain 1x1 convolution (e_ic -> s_ic),
 *                       an expand/depthwise 3x3 "same" step (s_ic -> e_e, no excitation), a 1x1
 *                       convolution back to s_ic plus the first one's output (or nothing):
 *                       block r computes rows 2r and 2r + 1 (the depthwise's halo rows from
 *                       the neighbours), keeps them as S's input and writes them out (the
 *                       skip a later step reads); x is then the first convolution's input
 *   S (optional)        the step before P0 where it is a pointwise + depthwise step (EXPAND_DW)
 *                       of stride 2 from 2H x 2W pixels whose output's pool tail is P0's
 *                       excitation's: block r expands input rows 2r and 2r + 1, reads the other
 *                       rows of its window (kept in a stage buffer) from its neighbours, and
 *                       the output row and its pool never leave the cluster; P0's weights wait
 *                       in the expanded rows' buffer meanwhile
 *   P0                  a 1x1 convolution whose input is scaled by an excitation (a prologue
 *                       on the sums of the step before: a pool tail), no residual
 *   (D, P) x n_ir       D: a pointwise + depthwise step (EXPAND_DW: stride 1, K x K window,
 *                       "same" padding) whose output has a pool tail;
 *                       P: a 1x1 convolution of D's output scaled by the excitation of that
 *                       pool, plus D's input (the residual); the last one may have a pool tail
 *                       (the global pool of the segment's output) of at least H slices
 *   Q (optional)        a plain 1x1 convolution of the last P's output (no excitation, pool
 *                       tail or residual): its output is written too
 *   U (optional, after Q) the decoder's block at 2h x 2W that follows (selfie's): the bilinear
 *                       resize x2 of Q's output scaled by a one-layer excitation of the last
 *                       P's pool (a = u_c channels by a 1x1 convolution of that, whose pool
 *                       tail adds the skip tensor: the encoder's at 2h x 2W), then the
 *                       expand/depthwise step that scales the skip by the two-layer excitation
 *                       of that pool and adds a (v = skip * e + a), expands v (1x1, u_e
 *                       channels) and adds relu(depthwise 3x3) of that to it (res_mid) or not.
 *                       Block r owns rows 2r and 2r + 1; the convolution is done before the
 *                       resize (at h x W: the same sums, the resize's weights adding to 1), so
 *                       the resized 2h x 2W x q_oc tensor is never formed; only the last
 *                       output (y3) is written, not y, y2 or the pool sums, which the finder
 *                       checks no later step reads
 *   V (optional, after U) the 1x1 convolution of U's output resized x2 (4h x 4W; done before
 *                       the resize as U's), block r's rows 4r .. 4r + 3, with its pool tail
 *                       (a slice per row, plus an addend); U's output is then not written
 *   W (optional, after V) the excited expand/depthwise step after V, U's second half at
 *                       4h x 4W on V's output and addend, which are in shared memory already;
 *                       V's output and sums are then not written
 *   Y, Z (optional, after W, together) the decoder's last block at 8h x 8W and the transpose
 *                       convolution after it, the network's end: Y1 the 1x1 convolution of W's
 *                       output resized x2 as the persistent step computes it (each input pixel
 *                       resized, rs_pixel's arithmetic, then the sums), its pool tail plus an
 *                       addend (the skip); Y2 the 1x1 convolution of skip * (the two-layer
 *                       excitation of that pool) + Y1's output, then the 3x3 "same" depthwise of
 *                       that plus its input: two steps (CONV, DEPTHWISE with that residual, whose
 *                       sums start from 0, bias last) or one (EXPAND_DW with res_mid, from the
 *                       bias); Z the 2x2 stride-2 transpose convolution of the depthwise output
 *                       to 16h x 16W, written out (in float where the step writes the graph
 *                       output's float staging). Block r owns rows 8r .. 8r + 7 (W's output rows
 *                       4r - 1 .. 4r + 4 and the depthwise's halo rows from the neighbours);
 *                       W's output, Y's activations and sums are not written. One instance of
 *                       the kernel: 16 channels throughout (y_ic, y_oc, y_c), z_oc 1. Every
 *                       value is the persistent steps' bit for bit (their pool slices, means
 *                       and dense layers in their orders), so Y and Z are taken at batches of
 *                       KR_CUDA_SEG_Y_MIN_BATCH or more only
 * at H x KR_CUDA_SEG_W pixels (H <= KR_CUDA_SEG_MAX_ROWS: a block per row), every channel
 * count a multiple of 4 and every stage's weights fitting twice in shared memory. Only the
 * last P's output (and Q's) is written to global memory: the planner checks that no step after
 * the segment reads what its other steps wrote, nor the pool sums of S's or a D's output. An
 * item's output may lie on its own input (its cluster has read all of it before it writes) but
 * not on another item's, which another cluster may not have read yet: where the memory plan
 * puts the last P's there (shared_out), the caller gives the kernel an output buffer of its own
 * and copies it after the kernel (a COPY step, in the last step's slot: Q's where there is Q);
 * Q is taken only where its output lies on no other item's input.
 * The arithmetic is the steps' (f32 sums; in an f16 instance every value the steps store in
 * half is rounded to half where they store it); the order of some sums differs.
 */
#ifndef KEYER_NN_CUDA_SEGMENT_H
#define KEYER_NN_CUDA_SEGMENT_H

#include <stddef.h>

#include "nn/cuda/persistent/persistent.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KR_CUDA_SEG_W 16        /* image columns (the kernel's one width) */
#define KR_CUDA_SEG_MAX_ROWS 16 /* image rows: blocks per cluster (16: non-portable size) */
#define KR_CUDA_SEG_MAX_IR 8    /* (D, P) pairs */
#define KR_CUDA_SEG_MAX_C 128   /* channels of any activation */
#define KR_CUDA_SEG_MAX_STAGES (KR_CUDA_SEG_MAX_IR + 4) /* S, P0, the pairs, Q, U */
/* The smallest batch at which the segment takes Y and Z (segment.h): its values are the
 * persistent steps' bit for bit, so the choice is free; per item they take the cluster's 16
 * or 9 multiprocessors where the persistent kernel spreads one item over all of them. H200,
 * session 13 (docs/notes/cuda-cluster-segment.md): batch 1 slower with them (selfie f16
 * 0.1426 -> 0.1655 ms), batch 8 faster (22,575 -> 23,414 frames/s; landscape 37,568 ->
 * 41,763), 14 and 16 faster (selfie f16 b14 26,654 -> 31,514, b16 24,818 -> 27,281).
 * A build may set it (-DKR_CUDA_SEG_Y_MIN_BATCH=1 in CMAKE_C_FLAGS) so that Y and Z run at the
 * small batches where compute-sanitizer's racecheck of the segment finishes
 * (docs/notes/compute-sanitizer.md). */
#ifndef KR_CUDA_SEG_Y_MIN_BATCH
#define KR_CUDA_SEG_Y_MIN_BATCH 8
#endif

/* A P stage: x [pixels][ci] (shared memory), scaled per channel by the excitation of its
 * pool (dense ci -> hid with clamp se_lo[0]..se_hi[0] and se_post[0], dense hid -> ci with
 * [1]), times the 1x1 weights, plus bias, epilogue lo..hi, post, and the residual (the pair's
 * input; res_pre: added before the clamp) where `res`. Packed weights at w_off:
 * w1 [hid][ci], b1 [hid], w2 [hid][ci] (transposed), b2 [ci], w [ci][c], b [c]. */
typedef struct kr_cuda_seg_proj {
    int ci, hid, res, res_pre;
    float se_lo[2], se_hi[2];
    int se_post[2];
    float lo, hi;
    int post;
    int w_off;
} kr_cuda_seg_proj;

/* A D stage: x [pixels][c] -> e channels (1x1 weights, bias, epilogue e_lo..e_hi, e_post),
 * then the K x K depthwise convolution of that (bias, epilogue lo..hi, post). Packed weights at
 * w_off: we [c][e], be [e], wd [K * K][e], bd [e], then the pair's P stage's. */
typedef struct kr_cuda_seg_dw {
    int e;
    float e_lo, e_hi;
    int e_post;
    float lo, hi;
    int post;
    int w_off;
} kr_cuda_seg_dw;

/* The kernel's parameters (passed by value). Stage 0 is S where there is one; then P0 (stage
 * s0 = s_ic > 0), pair i (stage s0 + 1 + i), and where q_oc > 0 Q (stage s0 + 1 + n_ir: packed
 * weights w [c][q_oc], b [q_oc]). */
typedef struct kr_cuda_segment {
    int first, count;     /* the steps it replaces: [first, first + count) */
    int batch, h, c, k, n_ir;
    int f16;              /* element type of x and y */
    const void *x;        /* input [batch][h][W][p0.ci] */
    const float *x_sums;  /* P0's pool sums [batch][x_slices][p0.ci], over x_pixels pixels */
    int x_slices, x_pixels;
    int s_ic;             /* S's input channels; 0: no S. With S, x is S's input
                           * [batch][2h][2W][s_ic], x_sums unused; stages shift by one */
    int s_pt, s_pl;       /* S's padding before (rows, columns) */
    kr_cuda_seg_dw sd;    /* S: s_ic -> sd.e (p0.ci) channels, stride 2, weights as a D's */
    int e_ic, e_e;        /* E's input and expansion channels; 0: no E. With E, x is E's
                           * input [batch][2h][2W][e_ic], its weights follow S's in stage 0
                           * (at e_w_off: kr_seg_e_layout) */
    float e1_lo, e1_hi, e3_lo, e3_hi;
    int e1_post, e3_post, e3_res, e3_res_pre; /* E's two 1x1 convolutions' epilogues; the second's
                           * residual (the first's output; res_pre: before the clamp) */
    kr_cuda_seg_dw ed;    /* E's expand/depthwise (e = e_e, 3x3) */
    int e_w_off;
    void *e_y;            /* E's output (S's input, the skip) [batch][2h][2W][s_ic] */

    void *y;              /* output [batch][h][W][c] */
    float *y_sums;        /* or NULL: the last P's pool tail [batch][y_slices][c], y_slices
                           * >= h (row r's sums in slice r, zeros in the others) */
    int y_slices;
    int shared_out;       /* 1: an item's output overlaps another item's input (above) */
    int q_oc;             /* Q's output channels, 0: no Q */
    float q_lo, q_hi;
    int q_post;
    void *y2;             /* Q's output [batch][h][W][q_oc] */
    int u_c;              /* U's convolution's output channels; 0: no U. With U, stage
                           * s0 + 2 + n_ir (packed weights: kr_seg_u_layout) */
    int u_e, u_hid;       /* U's expansion's channels, its excitation's hidden units */
    int u_align, u_half;  /* U's resize: align_corners, half_pixel_centers */
    float u_se_lo, u_se_hi;
    int u_se_post;        /* U's resize's excitation (one dense layer q_oc <- c) */
    float u_lo, u_hi;
    int u_post;           /* U's convolution's epilogue */
    kr_cuda_seg_proj up;  /* U's expansion: its excitation (ci = u_c, hid = u_hid) and epilogue */
    float u_dlo, u_dhi;
    int u_dpost, u_res_mid; /* U's depthwise: epilogue; 1: plus its input (else nothing) */
    const void *u_skip;   /* the skip tensor [batch][2h][2W][u_c] */
    void *y3;             /* U's output [batch][2h][2W][u_e] (not written with V) */
    int v_oc;             /* V's output channels; 0: no V. V (with U): the 1x1 convolution of
                           * U's output resized x2 (4h x 4W; the convolution before the resize),
                           * its pool tail over slices of a row (plus v_skip) written as sums;
                           * weights after U's (kr_seg_u_layout) */
    int v_half;           /* its resize's half_pixel_centers (no align_corners) */
    float v_lo, v_hi;
    int v_post;
    const void *v_skip;   /* its pool tail's addend [batch][4h][4W][v_oc] */
    void *v_y;            /* its output [batch][4h][4W][v_oc] */
    float *v_sums;        /* its pool tail's sums [batch][4h][v_oc], a slice per row (not
                           * written with W) */
    int w_e, w_hid;       /* W's expansion's channels (0: no W), its excitation's hidden units.
                           * W (with V): the expand/depthwise step after V, as U's at 4h x 4W:
                           * the addend scaled by the excitation of V's pool plus V's output,
                           * expanded (1x1), plus relu(depthwise 3x3) of that (res_mid) or not;
                           * V's output and sums are then not written; weights after V's */
    kr_cuda_seg_proj wp;  /* W's expansion: its excitation (ci = v_oc) and epilogue */
    float w_dlo, w_dhi;
    int w_dpost, w_res_mid;
    void *w_y;            /* W's output [batch][4h][4W][w_e] (not written with Y) */
    int y_oc;             /* Y1's output channels (its input's: w_e); 0: no Y and Z. Weights
                           * after U's, V's and W's in U's stage (kr_seg_y_layout) */
    int y_half;           /* Y1's resize's half_pixel_centers (no align_corners) */
    int y_tail;           /* Y1's pool tail's pixels per slice (its step's tail_pixels) */
    float y_lo, y_hi;
    int y_post;           /* Y1's epilogue */
    const void *y_skip;   /* Y1's pool tail's addend, Y2's input [batch][8h][8W][y_oc] */
    kr_cuda_seg_proj yp;  /* Y2's 1x1 convolution: its excitation (ci = y_oc) and epilogue */
    int y_c;              /* its output channels, the depthwise's */
    float y_dlo, y_dhi;
    int y_dpost;          /* the depthwise's epilogue */
    int y_dbf;            /* 1: the depthwise's sums from the bias (EXPAND_DW, its residual the
                           * convolution's output: res_mid); 0: from 0, bias last (DEPTHWISE) */
    int y_res;            /* 1: the depthwise's output plus its input */
    int z_oc;             /* Z's output channels */
    float z_lo, z_hi;
    int z_post;           /* Z's epilogue */
    int z_f32;            /* 1: z_y is float (the graph output's staging), else the element type */
    void *z_y;            /* Z's output [batch][16h][16W][z_oc] */
    kr_cuda_seg_proj p0;
    kr_cuda_seg_dw d[KR_CUDA_SEG_MAX_IR];
    kr_cuda_seg_proj p[KR_CUDA_SEG_MAX_IR];
    int stage_off[KR_CUDA_SEG_MAX_STAGES], stage_floats[KR_CUDA_SEG_MAX_STAGES];
    int buf_floats;       /* the largest stage's packed weights (a multiple of 4) */
    size_t weight_floats; /* all stages' */
    const float *w;       /* device: the packed weights (16-byte aligned) */
} kr_cuda_segment;

/* Looks for a segment in @p steps[0..n), the persistent plan of @p g (batch
 * `steps[i].batch`, element size @p esize: 2 for f16). Fills @p seg (all but `w`) and returns
 * 1 for the first run found; returns 0 with @p why (static text) naming the reason the first
 * candidate was refused, or NULL when no step starts a candidate. */
int kr_cuda_segment_find(const kr_graph *g, const kr_cuda_step *steps, int n, size_t esize,
                         kr_cuda_segment *seg, const char **why);

/* Fills @p dst (seg->weight_floats floats) with the segment's packed weights, read through
 * @p fetch (copies @p count floats at @p src, a step's weight pointer, to @p to; returns 0 on
 * success) from @p steps, the list @p seg was found in. Returns 0, or fetch's error. */
int kr_cuda_segment_pack(const kr_cuda_segment *seg, const kr_cuda_step *steps, float *dst,
                         int (*fetch)(void *ctx, float *to, const float *src, size_t count),
                         void *ctx);

/* Bytes of shared memory the kernel needs per block for @p seg. */
size_t kr_cuda_segment_smem(const kr_cuda_segment *seg);

/* Prepares the kernel for @p seg on the current device, whose capabilities (or the emulated
 * class's) are @p caps: refuses a device below compute 9.0 or without clusters, or with too
 * little shared memory per block (kr_schedule_segment_refusal); raises the kernel's
 * shared-memory allowance to what @p seg needs, never lowers it (the allowance is the
 * kernel's, for every instance); allows the cluster size and checks that one cluster fits.
 * Returns the CUDA error of a failed query (0 otherwise), and in @p why a static reason when
 * it cannot run (the caller then keeps the persistent kernel). */
int kr_cuda_segment_prepare(const kr_cuda_segment *seg, const kr_gpu_caps *caps,
                            const char **why);

/* Queues the kernel on @p stream: a cluster of seg->h blocks per image. @p after_kernel: the
 * launch follows a kernel on the stream and is a programmatic dependent launch of it (set up
 * while that kernel runs; the kernel issues its weights' loads, then waits for that kernel's
 * writes before reading its input). Returns the CUDA error of the launch. */
int kr_cuda_segment_launch(const kr_cuda_segment *seg, int after_kernel, void *stream);

#ifdef __cplusplus
}
#endif

/* ---- the layouts, written once for the packer (segment.c) and the kernel (segment.cu) ------
 * Offsets in floats; every part starts 4-aligned; o[N] is the end. */
#ifdef __CUDACC__
#define KR_SEG_HD static __host__ __device__ __forceinline__
#else
#define KR_SEG_HD static inline
#endif

KR_SEG_HD int kr_seg_r4(int v) { return (v + 3) & ~3; }

/* o[0] = 0, o[i + 1] = o[i] + sizes[i] rounded up to 4. */
KR_SEG_HD void kr_seg_layout(const int *sizes, int n, int *o)
{
    o[0] = 0;
    for (int i = 0; i < n; i++)
        o[i + 1] = o[i] + kr_seg_r4(sizes[i]);
}

/* A P stage's packed weights (kr_cuda_seg_proj): ci -> hid -> ci excitation, ci -> c. */
enum { KR_SEG_PJ_W1, KR_SEG_PJ_B1, KR_SEG_PJ_W2, KR_SEG_PJ_B2, KR_SEG_PJ_W, KR_SEG_PJ_B, KR_SEG_PJ_N };
KR_SEG_HD void kr_seg_proj_layout(int ci, int hid, int c, int o[KR_SEG_PJ_N + 1])
{
    const int sizes[KR_SEG_PJ_N] = {hid * ci, hid, hid * ci, ci, ci * c, c};
    kr_seg_layout(sizes, KR_SEG_PJ_N, o);
}

/* A D stage's (kr_cuda_seg_dw): c -> e expansion, K x K depthwise; its P stage follows at o[N]. */
enum { KR_SEG_DW_WE, KR_SEG_DW_BE, KR_SEG_DW_WD, KR_SEG_DW_BD, KR_SEG_DW_N };
KR_SEG_HD void kr_seg_dw_layout(int c, int e, int k, int o[KR_SEG_DW_N + 1])
{
    const int sizes[KR_SEG_DW_N] = {c * e, e, k * k * e, e};
    kr_seg_layout(sizes, KR_SEG_DW_N, o);
}

/* E's: ic -> c 1x1, c -> e expansion, 3x3 depthwise, e -> c 1x1. */
enum { KR_SEG_E_W1, KR_SEG_E_B1, KR_SEG_E_WE, KR_SEG_E_BE, KR_SEG_E_WD, KR_SEG_E_BD, KR_SEG_E_W3,
       KR_SEG_E_B3, KR_SEG_E_N };
KR_SEG_HD void kr_seg_e_layout(int ic, int c, int e, int o[KR_SEG_E_N + 1])
{
    const int sizes[KR_SEG_E_N] = {ic * c, c, c * e, e, 9 * e, e, e * c, c};
    kr_seg_layout(sizes, KR_SEG_E_N, o);
}

/* Q's: c -> oc. */
enum { KR_SEG_Q_W, KR_SEG_Q_B, KR_SEG_Q_N };
KR_SEG_HD void kr_seg_q_layout(int c, int oc, int o[KR_SEG_Q_N + 1])
{
    const int sizes[KR_SEG_Q_N] = {c * oc, oc};
    kr_seg_layout(sizes, KR_SEG_Q_N, o);
}

/* U's: the resize's excitation w [q_oc][c] and b [q_oc], the convolution [q_oc][u_c] and its
 * bias [u_c], the expansion as a P stage's (kr_seg_proj_layout(u_c, u_hid, u_e)), the 3x3
 * depthwise [9][u_e] and its bias [u_e]; V's convolution [u_e][v_oc] and bias [v_oc]; W's
 * expansion as a P stage's (kr_seg_proj_layout(v_oc, w_hid, w_e)), its depthwise [9][w_e] and
 * bias [w_e] (each empty without V or W). */
enum { KR_SEG_U_SW, KR_SEG_U_SB, KR_SEG_U_AW, KR_SEG_U_AB, KR_SEG_U_P, KR_SEG_U_DW, KR_SEG_U_DB,
       KR_SEG_U_VW, KR_SEG_U_VB, KR_SEG_U_WP, KR_SEG_U_WD, KR_SEG_U_WB, KR_SEG_U_N };
KR_SEG_HD void kr_seg_u_layout(int c, int qo, int uc, int hid, int ue, int vo, int whid, int we,
                               int o[KR_SEG_U_N + 1])
{
    int op[KR_SEG_PJ_N + 1], ow[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(uc, hid, ue, op);
    kr_seg_proj_layout(vo, whid, we, ow);
    const int sizes[KR_SEG_U_N] = {qo * c, qo, qo * uc, uc, op[KR_SEG_PJ_N], 9 * ue, ue,
                                   ue * vo, vo, we ? ow[KR_SEG_PJ_N] : 0, 9 * we, we};
    kr_seg_layout(sizes, KR_SEG_U_N, o);
}

/* Y's and Z's, after U's (kr_seg_u_layout) in U's stage: Y1's convolution [ic][oc] and its
 * bias [oc], Y2's as a P stage's (kr_seg_proj_layout(oc, hid, c)) but for its excitation's
 * second layer, as the step's [oc][hid] (block_dense's), the 3x3 depthwise [9][c] and its
 * bias [c], Z's weights as the step's [zo][2][2][c] and its bias [zo]. */
enum { KR_SEG_Y_W1, KR_SEG_Y_B1, KR_SEG_Y_P, KR_SEG_Y_DW, KR_SEG_Y_DB, KR_SEG_Y_ZW, KR_SEG_Y_ZB,
       KR_SEG_Y_N };
KR_SEG_HD void kr_seg_y_layout(int ic, int oc, int hid, int c, int zo, int o[KR_SEG_Y_N + 1])
{
    int op[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(oc, hid, c, op);
    const int sizes[KR_SEG_Y_N] = {ic * oc, oc, op[KR_SEG_PJ_N], 9 * c, c, zo * 4 * c, zo};
    kr_seg_layout(sizes, KR_SEG_Y_N, o);
}

/* Y's activations (segment.h; floats, from three dead regions): "G", from the input row's
 * buffer to the end of the pool slots (XIN .. SLOTS), Y1's output rows [8][8W][y_oc] (then
 * Y2's input in place); "F", the buffer of Q's weights (W's window before): the skip's rows
 * as stored [8][8W][y_oc] (elements of T), then Y2's convolution's rows [8][8W][y_c], and at
 * KR_SEG_YF_TOP the block's pool slice sums [8 * 8W / y_tail][y_oc], then the top halo row
 * [8W][y_c]; "H", the rest of U's stage buffer after its weights: W's output rows
 * 4r - 1 .. 4r + 4 [6][4W][y_ic] (own rows 1 .. 4), then every block's slice sums
 * [h * 8 * 8W / y_tail][y_oc], then the bottom halo row [8W][y_c]. */
enum { KR_SEG_YF_ROWS, KR_SEG_YF_TOP, KR_SEG_YF_N };
KR_SEG_HD void kr_seg_yf_layout(int oc, int c, size_t esize, int o[KR_SEG_YF_N + 1])
{
    const int w8 = 8 * KR_CUDA_SEG_W, skip = (int)((size_t)8 * w8 * oc * esize / 4);
    const int sizes[KR_SEG_YF_N] = {skip > 8 * w8 * c ? skip : 8 * w8 * c, w8 * c};
    kr_seg_layout(sizes, KR_SEG_YF_N, o);
}

/* U's activations in a block's expanded rows' buffer (EP, free by then): Q's row [W][q_oc],
 * every block's pool sums [KR_CUDA_SEG_MAX_ROWS][max(c, u_c)], the skip's two rows
 * [2][2W][u_c], a's (then v's) [2][2W][u_c], the expansion's rows 2r - 1 .. 2r + 2
 * [4][2W][u_e] (own rows in the middle). With V, after U's expansion's last barrier: V's
 * addend's rows [4][4W][v_oc] as stored (from the start of EP: Q's row, the sums and the skip
 * are dead), U's output rows in a's place, V's output rows [4][4W][v_oc] from the expansion's.
 * W's pool sums in a's place, its expanded rows [6][4W][w_e] (own rows 1 .. 4) in Q's weight
 * buffer. */
enum { KR_SEG_UM_Q, KR_SEG_UM_SLOTS, KR_SEG_UM_SKIP, KR_SEG_UM_A, KR_SEG_UM_P, KR_SEG_UM_N };
KR_SEG_HD void kr_seg_u_smem_layout(int c, int qo, int uc, int ue, int o[KR_SEG_UM_N + 1])
{
    const int w2 = 2 * KR_CUDA_SEG_W;
    const int sizes[KR_SEG_UM_N] = {KR_CUDA_SEG_W * qo, KR_CUDA_SEG_MAX_ROWS * (c > uc ? c : uc),
                                    2 * w2 * uc, 2 * w2 * uc, 4 * w2 * ue};
    kr_seg_layout(sizes, KR_SEG_UM_N, o);
}

/* The most channels of any activation row of @p seg (its buffers' row size). */
KR_SEG_HD int kr_seg_emax(const kr_cuda_segment *seg)
{
    int emax = seg->p0.ci > seg->c ? seg->p0.ci : seg->c;
    for (int i = 0; i < seg->n_ir; i++)
        emax = seg->d[i].e > emax ? seg->d[i].e : emax;
    return emax;
}

/* A block's shared memory: two weight buffers of buf_floats, the input row [W][p0.ci], the
 * residual stream's row X [W][c], the expanded rows EP [1 + 2 pad][W][emax] (own row in the
 * middle), the depthwise row D [W][emax], every block's pool sums [KR_CUDA_SEG_MAX_ROWS][emax],
 * means, hidden units and scales [emax] each, a reduction's lanes [4 threads]. */
enum { KR_SEG_SM_WBUF, KR_SEG_SM_XIN, KR_SEG_SM_X, KR_SEG_SM_EP, KR_SEG_SM_D, KR_SEG_SM_SLOTS,
       KR_SEG_SM_MEAN, KR_SEG_SM_HID, KR_SEG_SM_SC, KR_SEG_SM_RED, KR_SEG_SM_N };
KR_SEG_HD void kr_seg_smem_layout(const kr_cuda_segment *seg, int o[KR_SEG_SM_N + 1])
{
    const int w = KR_CUDA_SEG_W, emax = kr_seg_emax(seg), pad = seg->k / 2;
    const int sizes[KR_SEG_SM_N] = {2 * seg->buf_floats, w * seg->p0.ci, w * seg->c,
                                    (1 + 2 * pad) * w * emax, w * emax,
                                    KR_CUDA_SEG_MAX_ROWS * emax, emax, emax, emax,
                                    4 * KR_CUDA_PERSISTENT_THREADS};
    kr_seg_layout(sizes, KR_SEG_SM_N, o);
}
#endif
