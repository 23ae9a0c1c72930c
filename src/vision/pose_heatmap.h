/*
 * The pose landmark model's heatmap refinement (internal, prefix kr_): MediaPipe's
 * RefineLandmarksFromHeatmapCalculator (a 7x7 window around each landmark's heatmap cell;
 * the confidence-weighted mean cell replaces the landmark when the best confidence in the
 * window is >= 0.5), on the CPU for keyer_pose_run() and on CUDA for the session's pose
 * stage, which refines a batch of crops on the device so that only the landmarks come to
 * the host. Both run the arithmetic of vision/pose_heatmap_math.h; each backend keeps its own
 * expf, so the two agree within float rounding.
 */
#ifndef KEYER_VISION_POSE_HEATMAP_H
#define KEYER_VISION_POSE_HEATMAP_H

#include <stddef.h>

#include "keyer/status.h"

/** Refines landmark @p i of @p points (normalised tensor coordinates *@p xn, *@p yn) from
 *  @p heat (hh x hw x @p channels logits, host memory) with kr_pose_heatmap_refine_at()
 *  (vision/pose_heatmap_math.h, the device's code too). Never fails. */
void kr_pose_heatmap_refine(const float *heat, int hw, int hh, int channels, int i, float *xn,
                            float *yn);

/** Values per crop of kr_pose_gather_cuda()'s output: @p points x 5 landmarks, 1 presence,
 *  @p points x 3 world landmarks. */
#define KR_POSE_GATHERED(points) ((size_t)(points) * 8 + 1)

/**
 * For @p n crops of a batch run of the pose landmark model on CUDA device @p ordinal, gathers
 * into @p dst (n x KR_POSE_GATHERED(points) floats, device memory) each crop's @p points x 5
 * landmarks from @p lm (x and y, in tensor pixels of a @p tw x @p th input, refined from
 * @p heat, n x hh x hw x points logits, when @p refine), its presence from @p flag and its
 * world landmarks from @p world (points x 3), queued on @p stream (the host does not wait).
 * Errors: INVALID_ARGUMENT (NULL pointer, bad sizes), UNSUPPORTED (built without CUDA),
 * DEVICE.
 */
keyer_status kr_pose_gather_cuda(int ordinal, float *dst, const float *lm, const float *flag,
                                 const float *world, const float *heat, int n, int points,
                                 int hw, int hh, int tw, int th, int refine, void *stream,
                                 keyer_error *err);

#endif
