/*
 * The pose heatmap refinement's arithmetic (internal, prefix kr_pose_), written once and
 * compiled both as C11 (vision/pose_heatmap.c, vision/pose.c) and as CUDA C++
 * (vision/cuda/pose_heatmap.cu), so that the CPU and the device refine a landmark with the
 * same code; each backend keeps its own expf, so the two agree within float rounding. Only
 * static inline functions of numbers and pointers.
 */
#ifndef KEYER_VISION_POSE_HEATMAP_MATH_H
#define KEYER_VISION_POSE_HEATMAP_MATH_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define KR_POSE_FN static __host__ __device__ __forceinline__
#else
#define KR_POSE_FN static inline
#endif

/** The heatmap window's side (cells) and the best confidence in it that moves a landmark. */
#define KR_POSE_HEATMAP_KERNEL 7
#define KR_POSE_HEATMAP_MIN_CONFIDENCE 0.5f

/** The logistic function of @p x: 0 for NaN and below -80, 1 above 80. */
KR_POSE_FN float kr_pose_sigmoid(float x)
{
    if (!(x == x))
        return 0.0f;
    if (x < -80.0f)
        return 0.0f;
    if (x > 80.0f)
        return 1.0f;
    return 1.0f / (1.0f + expf(-x));
}

/** Refines landmark @p i (normalised tensor coordinates *@p xn, *@p yn) from @p heat (hh x hw x
 *  @p channels logits, in the caller's memory): the confidence-weighted mean cell of the
 *  KR_POSE_HEATMAP_KERNEL window around its cell replaces it when the window's best
 *  confidence is at least KR_POSE_HEATMAP_MIN_CONFIDENCE; else (or with its cell outside the
 *  heatmap) it is left as it is. */
KR_POSE_FN void kr_pose_heatmap_refine_at(const float *heat, int hw, int hh, int channels, int i,
                                          float *xn, float *yn)
{
    float fx = *xn * (float)hw, fy = *yn * (float)hh;
    /* The centre is the truncated cell index; landmarks whose centre is outside are skipped
     * (the range test comes first so that the conversion is always defined). */
    if (!(fx > -1.0f && fx < (float)hw && fy > -1.0f && fy < (float)hh))
        return;
    int cx = (int)fx, cy = (int)fy;
    int r = KR_POSE_HEATMAP_KERNEL / 2;
    float sum = 0, sx = 0, sy = 0, best = 0;
    for (int row = cy - r; row <= cy + r; row++) {
        if (row < 0 || row >= hh)
            continue;
        for (int col = cx - r; col <= cx + r; col++) {
            if (col < 0 || col >= hw)
                continue;
            float conf = kr_pose_sigmoid(heat[((size_t)row * (size_t)hw + (size_t)col) *
                                                  (size_t)channels + (size_t)i]);
            sum += conf;
            sx += (float)col * conf;
            sy += (float)row * conf;
            if (conf > best)
                best = conf;
        }
    }
    if (best >= KR_POSE_HEATMAP_MIN_CONFIDENCE && sum > 0) {
        *xn = sx / sum / (float)hw;
        *yn = sy / sum / (float)hh;
    }
}

#endif
