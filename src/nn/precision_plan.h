/*
 * The mixed-precision plan of a half-precision (f16) instance: which nodes of a graph run and
 * store their outputs in float32 while the rest run in half. Decided once per graph, from the
 * graph alone (deterministic per model: never per frame or per batch); the cuda backend's f16
 * instances follow it (nn/cuda/mixed.h). The reference and cpu backends run float32 only.
 *
 * The rule: every node that an output other than a mask depends on (landmarks, presence, world
 * coordinates, heatmaps, detector boxes and scores) runs in float32; the nodes that only mask
 * outputs (float NHWC, one channel, more than one pixel) depend on run in half. A graph
 * without both kinds of output, or whose float32 part would hold more than
 * KR_PRECISION_PLAN_MAX_F32_SHARE of the activation elements (at batch 1), runs all in half as
 * before: of the shipped models, only the pose landmark models get a mixed plan (their
 * segmentation decoder, which only the body mask reads, is the half part). Said plainly: their
 * "f16" is then float32 with a half mask branch (landmarks, heatmaps and flags equal the
 * float32 per-node kernels' bit for bit); it runs per node only, so AUTO keeps them in float32
 * (at batches 1-5 float32 runs the faster persistent kernel).
 *
 * Why (bench/bench_nn_half_layers, pose-lite and pose-full on both test photos and every 6th
 * frame of the sample clips): the pose models' activations stay far inside half's range
 * (largest |x| 1,040 and 1,791: the segmentation logits), so neither float32 for out-of-range
 * layers nor scaling folded into the weights can help; what moves the landmarks is half's
 * 11-bit rounding of the stored activations all along the landmark path: all in half moves
 * them by 0.95 and 0.76 input pixels; in pose-lite no node alone moves them by more than 0.36,
 * float32 for the first half of the nodes still leaves 0.18, float32 for every output beyond
 * the RELU6 layers' 6.0 (the residual stream) 0.65. Half storage of the segmentation decoder,
 * which only the body mask reads, moves no landmark and no heatmap value
 * (docs/notes/f16-precision.md).
 */
#ifndef KEYER_NN_PRECISION_PLAN_H
#define KEYER_NN_PRECISION_PLAN_H

#include "keyer/status.h"
#include "nn/graph.h"

/* A plan whose float32 part would hold more than this share of the activation elements keeps
 * the whole graph in half (mixing would cost conversions for too little half). */
#define KR_PRECISION_PLAN_MAX_F32_SHARE 0.75

typedef struct kr_precision_plan {
    unsigned char *f32; /* per node (n_nodes): 1 = float32; NULL when n_f32 is 0 */
    int n_f32;          /* nodes kept in float32 */
    char summary[256];  /* one line: what the plan keeps in float32 and why */
} kr_precision_plan;

/* Makes @p plan for @p g (validated and linked). The caller frees it with
 * kr_precision_plan_free. Returns KEYER_STATUS_OUT_OF_MEMORY (plan left empty). */
keyer_status kr_precision_plan_make(const kr_graph *g, kr_precision_plan *plan, keyer_error *err);

/* Frees what kr_precision_plan_make allocated and empties @p plan; NULL accepted. */
void kr_precision_plan_free(kr_precision_plan *plan);

#endif
