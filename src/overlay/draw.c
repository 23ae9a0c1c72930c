/*
 * Analytics drawing helpers on top of the overlay primitives: keypoint dots and connections
 * between keypoints (skeletons, face-mesh contours).
 */
#include <math.h>

#include "keyer/overlay.h"
#include "overlay/overlay_internal.h"

keyer_status keyer_overlay_add_points(keyer_overlay *ov, const float *xy, int n, float radius,
                                      keyer_color color, keyer_error *err)
{
    if (!ov || n < 0 || (n > 0 && !xy) || !(radius > 0) || !isfinite(radius))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay points: needs an overlay, %d >= 0 points and a radius > 0",
                               n);
    int need = 0;
    for (int i = 0; i < n; i++)
        need += isfinite(xy[2 * i]) && isfinite(xy[2 * i + 1]);
    if (need > ov->capacity - ov->count)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "overlay: capacity of %d primitives reached (%d points)",
                               ov->capacity, need);
    for (int i = 0; i < n; i++) {
        if (!isfinite(xy[2 * i]) || !isfinite(xy[2 * i + 1]))
            continue;
        keyer_status st = keyer_overlay_add_dot(ov, xy[2 * i], xy[2 * i + 1], radius, color, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

keyer_status keyer_overlay_add_connections(keyer_overlay *ov, const float *xy, int n_points,
                                           const int *pairs, int n_pairs, float width,
                                           keyer_color color, keyer_error *err)
{
    if (!ov || n_points < 0 || n_pairs < 0 || (n_points > 0 && !xy) || (n_pairs > 0 && !pairs) ||
        !(width > 0) || !isfinite(width))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay connections: needs an overlay, points, pairs and a "
                               "width > 0");
    int need = 0;
    for (int i = 0; i < n_pairs; i++) {
        int a = pairs[2 * i], b = pairs[2 * i + 1];
        if (a < 0 || a >= n_points || b < 0 || b >= n_points)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "overlay connections: pair %d (%d, %d) outside 0..%d", i, a, b,
                                   n_points - 1);
        need += isfinite(xy[2 * a]) && isfinite(xy[2 * a + 1]) && isfinite(xy[2 * b]) &&
                isfinite(xy[2 * b + 1]);
    }
    if (need > ov->capacity - ov->count)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "overlay: capacity of %d primitives reached (%d connections)",
                               ov->capacity, need);
    for (int i = 0; i < n_pairs; i++) {
        const float *pa = &xy[2 * pairs[2 * i]], *pb = &xy[2 * pairs[2 * i + 1]];
        if (!isfinite(pa[0]) || !isfinite(pa[1]) || !isfinite(pb[0]) || !isfinite(pb[1]))
            continue;
        keyer_status st = keyer_overlay_add_line(ov, pa[0], pa[1], pb[0], pb[1], width, color, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

void keyer_overlay_truncate(keyer_overlay *ov, int count)
{
    if (ov && count >= 0 && count < ov->count)
        ov->count = count;
}
