/* The pose heatmap refinement on the CPU, and the registration of the CUDA gather. */
#include "vision/pose_heatmap.h"

#include <math.h>

#ifdef KEYER_HAVE_CUDA
keyer_status kr_cuda_pose_gather(int ordinal, float *dst, const float *lm, const float *flag,
                                 const float *world, const float *heat, int n, int points,
                                 int hw, int hh, int tw, int th, int refine, void *stream,
                                 keyer_error *err); /* cuda/pose_heatmap.cu */
#endif

static float sigmoidf(float x)
{
    if (!(x == x))
        return 0.0f;
    if (x < -80.0f)
        return 0.0f;
    if (x > 80.0f)
        return 1.0f;
    return 1.0f / (1.0f + expf(-x));
}

void kr_pose_heatmap_refine(const float *heat, int hw, int hh, int channels, int i, float *xn,
                            float *yn)
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
            float conf = sigmoidf(heat[((size_t)row * (size_t)hw + (size_t)col) *
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

keyer_status kr_pose_gather_cuda(int ordinal, float *dst, const float *lm, const float *flag,
                                 const float *world, const float *heat, int n, int points,
                                 int hw, int hh, int tw, int th, int refine, void *stream,
                                 keyer_error *err)
{
    if (!dst || !lm || !flag || !world || (refine && !heat))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "pose landmarks on CUDA: NULL pointer");
    if (n < 0 || points < 1 || hw < 1 || hh < 1 || tw < 1 || th < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "pose landmarks on CUDA: bad sizes (%d crops, %d points, heatmap "
                               "%dx%d, input %dx%d)", n, points, hw, hh, tw, th);
#ifdef KEYER_HAVE_CUDA
    return kr_cuda_pose_gather(ordinal, dst, lm, flag, world, heat, n, points, hw, hh, tw, th,
                               refine, stream, err);
#else
    (void)ordinal, (void)stream;
    return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                           "pose landmarks on CUDA: keyer was built without CUDA");
#endif
}
