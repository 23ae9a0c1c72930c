/* The person detector of a people keyer (people_detect.h): the network on the whole frame and
 * its tiles, the detections of one person merged. */
#include "vision/people_detect.h"

#include <math.h>
#include <string.h>

#define SAME_PERSON 0.3f     /* hips closer than this times the body radius: one person */
#define SAME_PERSON_IOU 0.6f /* without keypoints: boxes overlapping more than this */
#define NMS_IOU 0.6f         /* the decoder's weighted NMS (MediaPipe's single-person graph:
                              * 0.3), so that people side by side stay apart */

keyer_status kr_people_det_open(kr_people_det *d, const keyer_people_params *p, const char *name,
                                keyer_error *err)
{
    memset(d, 0, sizeof(*d));
    d->min_score = p->min_score;
    d->tiles = p->tiles;
    d->tile_size = p->tile_size;
    kr_vmodel_spec spec = {"person detector", name ? name : "pose-detect",
                           p->backend, p->threads, p->logger, KEYER_FIT_LETTERBOX, 2.0f, -1.0f, 2,
                           p->device};
    keyer_status st = kr_vmodel_open(&d->net, &spec, err);
    if (st)
        return st;
    keyer_detector_params dp = keyer_detector_params_pose();
    dp.min_score = p->min_score;
    dp.min_suppression_iou = NMS_IOU;
    if ((st = keyer_detector_create(&dp, &d->decoder, err)))
        return st;
    size_t anchors = (size_t)keyer_detector_anchor_count(d->decoder);
    d->boxes = kr_vmodel_find_output(&d->net, anchors * (size_t)dp.num_coords, 0);
    d->scores = kr_vmodel_find_output(&d->net, anchors, 0);
    if (d->boxes < 0 || d->scores < 0 || d->net.width != dp.input_width ||
        d->net.height != dp.input_height)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "person detector: %s: not MediaPipe's pose detector (expected a "
                               "%dx%d input and outputs of %zu x %d boxes and %zu scores)",
                               d->net.path, dp.input_width, dp.input_height, anchors, dp.num_coords,
                               anchors);
    return KEYER_OK;
}

void kr_people_det_close(kr_people_det *d)
{
    kr_vmodel_close(&d->net);
    keyer_detector_destroy(&d->decoder);
}

/* The detector on @p roi of @p frame (NULL: the whole frame letterboxed); its detections in
 * frame pixels appended to d->all (at most KR_PEOPLE_MAX_ALL). */
static keyer_status detect_region(kr_people_det *d, const keyer_frame *frame, const keyer_roi *roi,
                                  keyer_error *err)
{
    keyer_prepare_geometry geo;
    keyer_status st = kr_vmodel_run(&d->net, frame, roi, &geo, err);
    if (st)
        return st;
    int n = 0;
    if ((st = keyer_detector_decode(d->decoder, d->net.out[d->boxes], d->net.out[d->scores],
                                    d->dets, KR_PEOPLE_MAX_DETECTIONS, &n, err)))
        return st;
    /* normalised tensor coordinates -> frame pixels through the region's geometry */
    float tw = (float)d->net.width, th = (float)d->net.height;
    for (int i = 0; i < n && d->n_all < KR_PEOPLE_MAX_ALL; i++) {
        keyer_detection e = d->dets[i];
        float x0, y0, x1, y1;
        kr_geo_apply(&geo, e.xmin * tw, e.ymin * th, &x0, &y0);
        kr_geo_apply(&geo, e.xmax * tw, e.ymax * th, &x1, &y1);
        e.xmin = fminf(x0, x1);
        e.xmax = fmaxf(x0, x1);
        e.ymin = fminf(y0, y1);
        e.ymax = fmaxf(y0, y1);
        for (int j = 0; j < e.num_keypoints; j++)
            kr_geo_apply(&geo, e.keypoints[j][0] * tw, e.keypoints[j][1] * th, &e.keypoints[j][0],
                         &e.keypoints[j][1]);
        if (!isfinite(e.xmin + e.xmax + e.ymin + e.ymax))
            continue;
        d->all[d->n_all++] = e;
    }
    return KEYER_OK;
}

/* The tile side for a W x H frame: 0 (no tiles) when the frame's short side is under twice
 * the detector's input, else half the short side (or p.tile_size). */
static int tile_side(const kr_people_det *d, int w, int h)
{
    if (!d->tiles)
        return 0;
    int s = w < h ? w : h;
    if (d->tile_size > 0)
        return d->tile_size < s ? d->tile_size : 0;
    return s >= 2 * d->net.width ? s / 2 : 0;
}

/* Tile positions along an extent @p n for side @p t: evenly spread from 0 to n - t, at most
 * 3/4 of a tile apart. */
static int tile_count(int n, int t)
{
    int step = 3 * t / 4;
    return n <= t ? 1 : (n - t + step - 1) / step + 1;
}

/* Two detections of one person: hips (keypoint 0) closer than SAME_PERSON times the smaller
 * body radius |kp1 - kp0|. (The detector's boxes are of almost constant size, so their overlap
 * says little about two people walking side by side.) */
static int same_person(const keyer_detection *a, const keyer_detection *b)
{
    if (a->num_keypoints < 2 || b->num_keypoints < 2)
        return keyer_detection_iou(a, b) > SAME_PERSON_IOU;
    float ra = hypotf(a->keypoints[1][0] - a->keypoints[0][0],
                      a->keypoints[1][1] - a->keypoints[0][1]);
    float rb = hypotf(b->keypoints[1][0] - b->keypoints[0][0],
                      b->keypoints[1][1] - b->keypoints[0][1]);
    float d = hypotf(a->keypoints[0][0] - b->keypoints[0][0],
                     a->keypoints[0][1] - b->keypoints[0][1]);
    return d < SAME_PERSON * fminf(ra, rb);
}

keyer_status kr_people_det_run(kr_people_det *d, const keyer_frame *frame,
                               const keyer_detection *given, int n_given, int *count,
                               keyer_error *err)
{
    d->n_all = 0;
    keyer_status st = KEYER_OK;
    if (given) { /* the caller's whole-frame detections */
        for (int i = 0; i < n_given && d->n_all < KR_PEOPLE_MAX_ALL; i++)
            if (given[i].score >= d->min_score &&
                isfinite(given[i].xmin + given[i].xmax + given[i].ymin + given[i].ymax))
                d->all[d->n_all++] = given[i];
    } else {
        st = detect_region(d, frame, NULL, err);
    }
    int t = tile_side(d, frame->width, frame->height);
    if (!st && t > 0) {
        int nx = tile_count(frame->width, t), ny = tile_count(frame->height, t);
        for (int j = 0; j < ny && !st; j++)
            for (int i = 0; i < nx && !st; i++) {
                float x0 = nx > 1 ? (float)i * (float)(frame->width - t) / (float)(nx - 1) : 0;
                float y0 = ny > 1 ? (float)j * (float)(frame->height - t) / (float)(ny - 1) : 0;
                keyer_roi roi = {x0 + 0.5f * (float)t, y0 + 0.5f * (float)t, (float)t, (float)t,
                                 0.0f};
                st = detect_region(d, frame, &roi, err);
            }
    }
    if (st)
        return st;
    /* best first (stable), then greedy suppression */
    for (int i = 1; i < d->n_all; i++) {
        keyer_detection v = d->all[i];
        int j = i;
        for (; j > 0 && d->all[j - 1].score < v.score; j--)
            d->all[j] = d->all[j - 1];
        d->all[j] = v;
    }
    int kept = 0;
    for (int i = 0; i < d->n_all && kept < KR_PEOPLE_MAX_DETECTIONS; i++) {
        int dup = 0;
        for (int j = 0; j < kept && !dup; j++)
            dup = same_person(&d->all[i], &d->dets[j]);
        if (!dup)
            d->dets[kept++] = d->all[i];
    }
    *count = kept;
    return KEYER_OK;
}

void keyer_person_box(const keyer_detection *d, float box[4])
{
    if (d->num_keypoints < 2) { /* no body keypoints: the detector's box */
        box[0] = d->xmin;
        box[1] = d->ymin;
        box[2] = d->xmax;
        box[3] = d->ymax;
        return;
    }
    float cx = d->keypoints[0][0], cy = d->keypoints[0][1];
    float ux = d->keypoints[1][0] - cx, uy = d->keypoints[1][1] - cy; /* half the body axis */
    /* the rectangle: +-u along the body, +-aspect * |u| across it; its axis-aligned bounds */
    float hx = fabsf(ux) + KEYER_PERSON_BOX_ASPECT * fabsf(uy);
    float hy = fabsf(uy) + KEYER_PERSON_BOX_ASPECT * fabsf(ux);
    box[0] = cx - hx;
    box[1] = cy - hy;
    box[2] = cx + hx;
    box[3] = cy + hy;
}
