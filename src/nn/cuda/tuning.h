/*
 * The cuda backend's tuning constants and the measurements behind them: where AUTO switches
 * schedules, where the per-node convolution picks its pointwise tile path, how the persistent
 * planner splits work, and the measured accuracy of f16 instances. Values here change speed
 * (and which kernel runs), never the arithmetic of a kernel: include/keyer/nn.h states what the
 * caller is guaranteed (an item's result does not depend on the batch size within a schedule;
 * the schedules round differently, within the backend's tolerances), this header the numbers.
 * Measured on an H100 (BENCHMARKS.md has the current tables; the measurements behind each
 * value: docs/notes/cuda-cluster-segment.md for AUTO's limits, cuda-per-node-kernels.md for
 * the tile path, f16-precision.md for f16).
 */
#ifndef KEYER_NN_CUDA_TUNING_H
#define KEYER_NN_CUDA_TUNING_H

/* ---- AUTO's schedule (keyer_cuda_schedule; persistent/schedule.c) -------------------------
 * KEYER_CUDA_SCHEDULE_AUTO runs the persistent kernel up to batch KEYER_CUDA_PERSISTENT_MAX_BATCH
 * (KEYER_CUDA_SEGMENT_MAX_BATCH when the model has a cluster segment on this device) and up
 * to KEYER_CUDA_PERSISTENT_MAX_MACS multiply-adds per batch, when the model's operators allow
 * it, else the per-node kernels. */

/* The largest batch AUTO runs with the persistent kernel. Measured: the persistent schedule is
 * faster for every shipped model up to batch 5, at batch 5 by 1.03x (pose-full f16) to 1.47x
 * (selfie-landscape f16); at batch 6 face-full and pose-full are faster per node. */
#define KEYER_CUDA_PERSISTENT_MAX_BATCH 5

/* The largest batch AUTO runs with the persistent kernel when the model has a cluster segment
 * on this device (selfie, selfie-landscape on sm_90); above KEYER_CUDA_PERSISTENT_MAX_BATCH a
 * model without one gets the per-node kernels. Measured: the persistent kernel with its
 * segment is faster than the per-node kernels at every batch from 6 to 14 (selfie f16 1.21x to
 * 2.08x, selfie-landscape f16 1.38x to 2.32x); at 15 and 16 the planner found no segment then
 * (the excitations of 15 items did not fit KR_CUDA_SE_FLOATS) and the persistent kernel alone
 * was half as fast as the per-node kernels. 16 since the excitation buffer holds 16 items: the
 * main job's batch (16 on CUDA), which ran its full batches as ~70 per-node kernels each. */
#define KEYER_CUDA_SEGMENT_MAX_BATCH 16

/* The most multiply-adds per batch (the model's per frame times the batch) that AUTO runs with
 * the persistent kernel: between pose-heavy's 1.9 G per frame, 1.36x faster persistent at
 * batch 1, and its 3.8 G at batch 2, slower persistent. */
#define KEYER_CUDA_PERSISTENT_MAX_MACS 2500000000.0

/* ---- the per-node convolution's pointwise tile path (conv_2d.cu, conv_pw_tile) ------------
 * Measured over every 1x1 layer of selfie, selfie-landscape, face-short, face-full and
 * face-mesh at batches 1, 15, 64 and 256, f32 and f16, against the GEMM and conv_pw_groups:
 * the tile path pays for layers of at most PW_TILE_MAX_KN weights (K x N) or at most
 * PW_TILE_ANY_KN_K inputs (with more of both, each thread's K x 32 multiply-adds make it slower
 * than the GEMM's 4 x 4 register tiles, up to 2x at 128 x 128), and at least PW_TILE_MIN_TILES
 * tiles (fewer leave most of the GPU idle). Both precisions. A tile's shared memory stays
 * within PW_TILE_MAX_SMEM (fewer pixels per thread above it). */
#define PW_TILE_MAX_KN 2304
#define PW_TILE_ANY_KN_K 32
#define PW_TILE_MIN_TILES 64
#define PW_TILE_MAX_SMEM (100 * 1024)

/* ---- the per-node pointwise layers on the tensor cores (conv_2d_pw_mma.cu) ------------------
 * f16 TFLite 1x1 layers run as mma.sync.m16n8k8 tiles (every class from 7.5 alike) where
 * K <= PW_MMA_MAX_K, N <= PW_MMA_MAX_N, the layer has at least
 * PW_MMA_MIN_PIXELS pixels per item (not the excitations' 1x1 layers) and a block's shared
 * memory stays within PW_MMA_SMEM (48 KB, no opt-in) where a layout fits there, else within
 * PW_MMA_MAX_SMEM (64 KB: the opt-in of compute 7.5, the smallest of the classes keyer
 * supports, so the choice is the same on every device; with the weights as hi + lo halves the
 * face models' 72 -> 80 ... 96 -> 96 layers need it). A choice by shape only: never by batch
 * or device. */
#define PW_MMA_MAX_K 128
#define PW_MMA_MAX_N 256
#define PW_MMA_MIN_PIXELS 16
#define PW_MMA_SMEM (48 * 1024)
#define PW_MMA_MAX_SMEM (64 * 1024)
/* Measured (H200, selfie and face-short f16 at batch 256, per-node profile of the session-8
 * trial): the 16 -> 16 layers at 64x64 and 128x128 ran slower here than on conv_narrow (0.157
 * against 0.110 ms at 128x128), so layers of at most PW_MMA_MIN_KN weights keep the CUDA-core
 * path; the 3x3 RGB stem too (0.271 against 0.213 ms; the 5x5 one 0.120 against 0.287 ms:
 * stems of a PW_MMA_STEM_MIN_K-wide window or more). */
#define PW_MMA_MIN_KN 256
#define PW_MMA_STEM_MIN_K 5

/* ---- the 16 -> 16 pointwise layers on the tensor cores (conv_2d.cu, conv_narrow_mma) --------
 * f16 16 -> 16 1x1 layers of at least NARROW_MMA_MIN_PIXELS pixels per item (not the
 * excitations' 1x1 layers, which keep conv_narrow); a warp takes NARROW_MMA_TILES tiles of 16
 * rows per step, all their loads issued first (8 bytes per lane and row: 128 bytes in flight per
 * lane), in a grid of at most NARROW_MMA_MAX_BLOCKS blocks of 128 threads striding over the rows
 * (the weights' fragments loaded once per warp). The grid's shape only: every row the same sum. */
#define NARROW_MMA_MIN_PIXELS 16
#define NARROW_MMA_TILES 4
#define NARROW_MMA_MAX_BLOCKS 8192
/* A layer with fewer tiles than PW_MMA_SPLIT_TILES_PER_SM per multiprocessor (the 8 x 8 and
 * 16 x 16 layers at batch 256, every layer up to 32 x 32 at batch 64) runs in groups of 32
 * output channels, each block staging only its group's weights (conv_2d_pw_mma.cu,
 * pwm_groups): with a few tiles per block, staging all the weights was most of a block's time.
 * The grid's shape only (every value the same sum either way). */
#define PW_MMA_SPLIT_TILES_PER_SM 8

/* ---- the persistent planner (persistent/plan.c) -------------------------------------------- */

/* Threads the lane split of a convolution aims to fill, per batch item (fixed, not the GPU's
 * size, so that results do not depend on the device). */
#define KR_CUDA_SPLIT_BUDGET 65536
/* Rows (pixels, or slice sums) each thread of a block adds in a global pool's column sums. */
#define KR_CUDA_POOL_ROWS_PER_THREAD 8

/* ---- f16 instances: measured accuracy (keyer_precision) ------------------------------------
 * Against the reference backend (tests/unit/test_nn_cuda_gpu.c, bench/bench_nn_precision.c):
 * segmentation masks within 0.03 on the test photo and up to 0.068 on 22 variants of it (a few
 * pixels of the outline, where these models turn a relative change of 2^-12 into a few
 * hundredths; half storage with exact arithmetic does the same), with >= 99.98% of pixels on
 * the same side of 0.5; faces identical after decoding; face mesh within 0.07 px. The pose
 * landmark models' activations stay inside half's range, but half storage on their landmark
 * path moves the landmarks by up to ~1 input pixel: f16 instances keep that path in float32
 * (nn/precision_plan.h). */

#endif
