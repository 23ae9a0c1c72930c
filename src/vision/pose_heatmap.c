/* The pose heatmap refinement on the CPU, and the registration of the CUDA gather. */
#include "vision/pose_heatmap.h"

#include "vision/pose_heatmap_math.h"

#ifdef KEYER_HAVE_CUDA
keyer_status kr_cuda_pose_gather(int ordinal, float *dst, const float *lm, const float *flag,
                                 const float *world, const float *heat, int n, int points,
                                 int hw, int hh, int tw, int th, int refine, void *stream,
                                 keyer_error *err); /* cuda/pose_heatmap.cu */
#endif

void kr_pose_heatmap_refine(const float *heat, int hw, int hh, int channels, int i, float *xn,
                            float *yn)
{
    kr_pose_heatmap_refine_at(heat, hw, hh, channels, i, xn, yn);
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
