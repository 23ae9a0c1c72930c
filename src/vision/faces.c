/*
 * Face analysis: BlazeFace detection, face mesh on aligned crops, tracking by landmarks,
 * stable ids from the IoU/Kalman tracker (see keyer/faces.h). Built on the public API.
 */
#include "keyer/faces.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/faces_steps.h"
#include "vision/vmodel.h"

#define DECODE_CAPACITY 64

/* Face-mesh landmarks used for the ROI and the 6 face keypoints. */
enum {
    LM_RIGHT_EYE_OUTER = 33,
    LM_RIGHT_EYE_INNER = 133,
    LM_LEFT_EYE_OUTER = 263,
    LM_LEFT_EYE_INNER = 362,
    LM_NOSE_TIP = 1,
    LM_LIP_UPPER = 13,
    LM_LIP_LOWER = 14,
    LM_RIGHT_EDGE = 234,
    LM_LEFT_EDGE = 454,
};

struct keyer_faces {
    keyer_faces_params p;
    kr_vmodel det;
    kr_vmodel mesh;
    int det_boxes, det_scores;  /* detector output indices */
    int mesh_points, mesh_flag; /* face-mesh output indices */
    keyer_detector *decoder;
    keyer_tracker *tracker;
    keyer_detection dets[DECODE_CAPACITY];
    keyer_face *cur, *prev; /* this frame's faces and the previous frame's (swapped) */
    int n_cur, n_prev;
    keyer_detection *track_in; /* max_faces boxes, normalised, for the tracker */
    keyer_track *tracks;       /* tracker output, tracker.max_tracks */
    int *used;                 /* max_tracks flags for id matching */
    keyer_faces_stats stats;
    /* the frame being analysed (kr_faces_begin .. kr_faces_end, faces_steps.h) */
    int frame_w, frame_h;
    int lost;                  /* tracked faces lost in this frame */
};

keyer_faces_params keyer_faces_params_defaults(void)
{
    keyer_faces_params p;
    memset(&p, 0, sizeof(p));
    p.range = KEYER_FACE_RANGE_SHORT;
    p.landmarks = 1;
    p.detector = 1;
    p.max_faces = 4;
    p.detect_interval = 0;
    p.min_score = 0;
    p.min_presence = 0.5f;
    p.roi_scale = 1.5f;
    p.backend = KEYER_BACKEND_CPU;
    p.threads = 0;
    p.tracker = keyer_tracker_params_defaults();
    return p;
}

static float sigmoidf(float x)
{
    if (x < -80.0f)
        return 0.0f;
    if (x > 80.0f)
        return 1.0f;
    return 1.0f / (1.0f + expf(-x));
}

void keyer_faces_destroy(keyer_faces **pfa)
{
    if (!pfa || !*pfa)
        return;
    keyer_faces *fa = *pfa;
    kr_vmodel_close(&fa->det);
    kr_vmodel_close(&fa->mesh);
    keyer_detector_destroy(&fa->decoder);
    keyer_tracker_destroy(&fa->tracker);
    free(fa->cur);
    free(fa->prev);
    free(fa->track_in);
    free(fa->tracks);
    free(fa->used);
    free(fa);
    *pfa = NULL;
}

keyer_status keyer_faces_create(const keyer_faces_params *params, keyer_faces **out,
                                keyer_error *err)
{
    keyer_status st;
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_create: %s is NULL", !params ? "params" : "out");
    *out = NULL;
    const keyer_faces_params *p = params;
    if ((p->range != KEYER_FACE_RANGE_SHORT && p->range != KEYER_FACE_RANGE_FULL) ||
        p->max_faces < 1 || p->max_faces > KEYER_FACES_MAX || p->detect_interval < 0 ||
        !(p->min_score < 1.0f) || !(p->min_presence >= 0.0f && p->min_presence <= 1.0f) ||
        !(p->roi_scale >= 1.0f && p->roi_scale <= 4.0f) || p->threads < 0 ||
        (p->landmarks != 0 && p->landmarks != 1) || (p->detector != 0 && p->detector != 1) ||
        (!p->detector && p->landmarks))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_create: a parameter is out of range (range 0..1, "
                               "max_faces 1..%d, detect_interval >= 0, min_score < 1, "
                               "min_presence 0..1, roi_scale 1..4, landmarks 0 or 1, detector 0 "
                               "or 1, landmarks need the detector)",
                               KEYER_FACES_MAX);
    keyer_faces *fa = calloc(1, sizeof(*fa));
    if (!fa)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keyer_faces_create: out of memory");
    fa->p = *p;
    fa->p.detector_model = NULL; /* the strings are only read here */
    fa->p.mesh_model = NULL;

    /* Detector: letterboxed whole frame, values in [-1,1], bars at -1. */
    int full = p->range == KEYER_FACE_RANGE_FULL;
    if (!p->detector)
        goto tracker; /* detections come from keyer_faces_track() */
    kr_vmodel_spec ds = {"face detector",
                         p->detector_model ? p->detector_model : full ? "face-full" : "face-short",
                         p->backend, p->threads, p->logger, KEYER_FIT_LETTERBOX, 2.0f, -1.0f, 2, 0};
    if ((st = kr_vmodel_open(&fa->det, &ds, err)))
        goto fail;
    keyer_detector_params dp = full ? keyer_detector_params_face_full()
                                    : keyer_detector_params_face_short();
    if (fa->det.width != dp.input_width || fa->det.height != dp.input_height) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "face detector: %s: input %dx%d, but the %s-range detector takes "
                             "%dx%d",
                             fa->det.path, fa->det.width, fa->det.height, full ? "full" : "short",
                             dp.input_width, dp.input_height);
        goto fail;
    }
    if (p->min_score > 0)
        dp.min_score = p->min_score;
    if ((st = keyer_detector_create(&dp, &fa->decoder, err)))
        goto fail;
    size_t anchors = (size_t)keyer_detector_anchor_count(fa->decoder);
    fa->det_boxes = kr_vmodel_find_output(&fa->det, anchors * (size_t)dp.num_coords, 0);
    fa->det_scores = kr_vmodel_find_output(&fa->det, anchors, 0);
    if (fa->det_boxes < 0 || fa->det_scores < 0) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "face detector: %s: expected outputs of %zu x %d box values and %zu "
                             "scores",
                             fa->det.path, anchors, dp.num_coords, anchors);
        goto fail;
    }

    if (p->landmarks) {
        kr_vmodel_spec ms = {"face mesh", p->mesh_model ? p->mesh_model : "face-mesh", p->backend,
                             p->threads, p->logger, KEYER_FIT_STRETCH, 1.0f, 0.0f, 2, 0};
        if ((st = kr_vmodel_open(&fa->mesh, &ms, err)))
            goto fail;
        fa->mesh_points = kr_vmodel_find_output(&fa->mesh, KEYER_FACE_MESH_POINTS * 3, 0);
        fa->mesh_flag = kr_vmodel_find_output(&fa->mesh, 1, 0);
        if (fa->mesh_points < 0 || fa->mesh_flag < 0) {
            st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                 "face mesh: %s: expected an output of %d x 3 landmarks and a "
                                 "1-element presence score",
                                 fa->mesh.path, KEYER_FACE_MESH_POINTS);
            goto fail;
        }
    }

tracker:
    if ((st = keyer_tracker_create(&p->tracker, &fa->tracker, err))) {
        keyer_error_prefix(err, "keyer_faces_create: ");
        goto fail;
    }
    fa->cur = calloc((size_t)p->max_faces, sizeof(keyer_face));
    fa->prev = calloc((size_t)p->max_faces, sizeof(keyer_face));
    fa->track_in = calloc((size_t)p->max_faces, sizeof(keyer_detection));
    fa->tracks = calloc((size_t)p->tracker.max_tracks, sizeof(keyer_track));
    fa->used = calloc((size_t)p->tracker.max_tracks, sizeof(int));
    if (!fa->cur || !fa->prev || !fa->track_in || !fa->tracks || !fa->used) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keyer_faces_create: out of memory");
        goto fail;
    }
    *out = fa;
    return KEYER_OK;
fail:
    keyer_faces_destroy(&fa);
    return st;
}

void keyer_faces_reset(keyer_faces *fa)
{
    if (!fa)
        return;
    fa->n_prev = 0;
    fa->n_cur = 0;
    keyer_tracker_reset(fa->tracker);
}

keyer_status keyer_faces_get_stats(const keyer_faces *fa, keyer_faces_stats *out, keyer_error *err)
{
    if (!fa || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_get_stats: NULL argument");
    *out = fa->stats;
    return KEYER_OK;
}

static keyer_status check_frame(const keyer_frame *frame, const char *what, keyer_error *err)
{
    if (!frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: frame is NULL", what);
    if (keyer_frame_check(frame, err))
        return keyer_error_prefix(err, "%s: ", what);
    if (frame->memory != KEYER_MEMORY_HOST)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the frame is in CUDA memory; face analysis takes host frames",
                               what);
    return KEYER_OK;
}

/* Runs the detector on the whole frame; detections in frame pixels into fa->dets. */
static keyer_status detect(keyer_faces *fa, const keyer_frame *frame, int *count,
                           keyer_error *err)
{
    keyer_prepare_geometry geo;
    keyer_status st = kr_vmodel_run(&fa->det, frame, NULL, &geo, err);
    if (st)
        return st;
    fa->stats.detector_runs++;
    int n = 0;
    if ((st = keyer_detector_decode(fa->decoder, fa->det.out[fa->det_boxes],
                                    fa->det.out[fa->det_scores], fa->dets, DECODE_CAPACITY, &n,
                                    err)))
        return keyer_error_prefix(err, "face detector: ");
    float tw = (float)fa->det.width, th = (float)fa->det.height;
    keyer_letterbox lb = {geo.content.x / tw, geo.content.y / th,
                          (tw - geo.content.x - geo.content.width) / tw,
                          (th - geo.content.y - geo.content.height) / th};
    keyer_detections_to_pixels(fa->dets, n, &lb, frame->width, frame->height);
    *count = n;
    return KEYER_OK;
}

/* MediaPipe's RectTransformationCalculator with square_long: a square of the longer side. */
static keyer_roi square_roi(float cx, float cy, float w, float h, float rotation, float scale)
{
    float side = (w > h ? w : h) * scale;
    keyer_roi r = {cx, cy, side, side, rotation};
    return r;
}

static keyer_roi roi_from_detection(const keyer_detection *d, float scale)
{
    float dx = d->keypoints[1][0] - d->keypoints[0][0];
    float dy = d->keypoints[1][1] - d->keypoints[0][1];
    float rot = (dx == 0 && dy == 0) ? 0.0f : atan2f(dy, dx);
    return square_roi((d->xmin + d->xmax) / 2, (d->ymin + d->ymax) / 2, d->xmax - d->xmin,
                      d->ymax - d->ymin, rot, scale);
}

static void landmark_bounds(const keyer_face *f, float *x0, float *y0, float *x1, float *y1)
{
    *x0 = *y0 = INFINITY;
    *x1 = *y1 = -INFINITY;
    for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++) {
        *x0 = fminf(*x0, f->landmarks[i][0]);
        *x1 = fmaxf(*x1, f->landmarks[i][0]);
        *y0 = fminf(*y0, f->landmarks[i][1]);
        *y1 = fmaxf(*y1, f->landmarks[i][1]);
    }
}

static keyer_roi roi_from_landmarks(const keyer_face *f, float scale)
{
    float x0, y0, x1, y1;
    landmark_bounds(f, &x0, &y0, &x1, &y1);
    float dx = f->landmarks[LM_LEFT_EYE_OUTER][0] - f->landmarks[LM_RIGHT_EYE_OUTER][0];
    float dy = f->landmarks[LM_LEFT_EYE_OUTER][1] - f->landmarks[LM_RIGHT_EYE_OUTER][1];
    float rot = (dx == 0 && dy == 0) ? 0.0f : atan2f(dy, dx);
    return square_roi((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0, rot, scale);
}

/* Whether a ROI is usable: finite, a positive size not absurdly larger than the frame. */
static int roi_ok(const keyer_roi *r, int width, int height)
{
    float limit = 4.0f * (float)(width > height ? width : height);
    return isfinite(r->center_x) && isfinite(r->center_y) && isfinite(r->rotation) &&
           r->width >= 4.0f && r->width <= limit;
}

/* Fills f from the face mesh's outputs on @p roi (@p pts: 468 x 3 tensor coordinates,
 * @p flag: the presence logit; @p geo: where the crop went): landmarks, presence, roi and
 * the landmark box with its 6 keypoints. */
static void fill_face(const float *pts, float flag, const keyer_roi *roi,
                      const keyer_prepare_geometry *geo, keyer_face *f)
{
    f->presence = sigmoidf(flag);
    f->roi = *roi;
    float zscale = sqrtf(geo->matrix[0] * geo->matrix[0] + geo->matrix[3] * geo->matrix[3]);
    int finite = 1;
    for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++) {
        kr_geo_apply(geo, pts[3 * i], pts[3 * i + 1], &f->landmarks[i][0], &f->landmarks[i][1]);
        f->landmarks[i][2] = pts[3 * i + 2] * zscale;
        finite &= isfinite(f->landmarks[i][0]) && isfinite(f->landmarks[i][1]) &&
                  isfinite(f->landmarks[i][2]);
    }
    if (!finite) /* a model that produces NaN has not found a face */
        f->presence = 0.0f;
    f->has_landmarks = 1;
    keyer_detection *b = &f->box;
    memset(b, 0, sizeof(*b));
    landmark_bounds(f, &b->xmin, &b->ymin, &b->xmax, &b->ymax);
    b->score = f->presence;
    b->num_keypoints = 6;
    const int pairs[6][2] = {{LM_RIGHT_EYE_OUTER, LM_RIGHT_EYE_INNER},
                             {LM_LEFT_EYE_OUTER, LM_LEFT_EYE_INNER},
                             {LM_NOSE_TIP, LM_NOSE_TIP},
                             {LM_LIP_UPPER, LM_LIP_LOWER},
                             {LM_RIGHT_EDGE, LM_RIGHT_EDGE},
                             {LM_LEFT_EDGE, LM_LEFT_EDGE}};
    for (int k = 0; k < 6; k++)
        for (int c = 0; c < 2; c++)
            b->keypoints[k][c] = (f->landmarks[pairs[k][0]][c] + f->landmarks[pairs[k][1]][c]) / 2;
}

/* Runs the face mesh on @p roi of a host frame: its outputs and where the crop went. */
static keyer_status run_mesh(keyer_faces *fa, const keyer_frame *frame, const keyer_roi *roi,
                             const float **pts, float *flag, keyer_prepare_geometry *geo,
                             keyer_error *err)
{
    keyer_status st = kr_vmodel_run(&fa->mesh, frame, roi, geo, err);
    if (st)
        return st;
    fa->stats.mesh_runs++;
    *pts = fa->mesh.out[fa->mesh_points];
    *flag = fa->mesh.out[fa->mesh_flag][0];
    return KEYER_OK;
}

/* Whether detection d is a face already followed (its centre inside a face's box). */
static int already_tracked(const keyer_faces *fa, const keyer_detection *d)
{
    float cx = (d->xmin + d->xmax) / 2, cy = (d->ymin + d->ymax) / 2;
    for (int i = 0; i < fa->n_cur; i++) {
        const keyer_detection *b = &fa->cur[i].box;
        if (cx >= b->xmin && cx <= b->xmax && cy >= b->ymin && cy <= b->ymax)
            return 1;
        if (keyer_detection_iou(b, d) > 0.3f)
            return 1;
    }
    return 0;
}

/* Feeds the faces' boxes to the tracker and copies the confirmed ids back. */
static keyer_status assign_ids(keyer_faces *fa, float fw, float fh, keyer_error *err)
{
    for (int i = 0; i < fa->n_cur; i++) {
        keyer_detection d = fa->cur[i].box;
        d.xmin /= fw;
        d.xmax /= fw;
        d.ymin /= fh;
        d.ymax /= fh;
        for (int k = 0; k < d.num_keypoints; k++) {
            d.keypoints[k][0] /= fw;
            d.keypoints[k][1] /= fh;
        }
        fa->track_in[i] = d;
        fa->cur[i].id = 0;
    }
    int nt = 0;
    keyer_status st = keyer_tracker_update(fa->tracker, fa->track_in, fa->n_cur, fa->tracks,
                                           fa->p.tracker.max_tracks, &nt, err);
    if (st)
        return keyer_error_prefix(err, "face tracker: ");
    /* Greedy matching of faces to the tracks updated in this frame, best IoU first. */
    memset(fa->used, 0, sizeof(int) * (size_t)fa->p.tracker.max_tracks);
    for (int round = 0; round < fa->n_cur; round++) {
        float best = 0.3f;
        int bi = -1, bt = -1;
        for (int i = 0; i < fa->n_cur; i++) {
            if (fa->cur[i].id)
                continue;
            for (int t = 0; t < nt; t++) {
                if (fa->used[t] || fa->tracks[t].misses != 0)
                    continue;
                float iou = keyer_detection_iou(&fa->track_in[i], &fa->tracks[t].box);
                if (iou > best) {
                    best = iou;
                    bi = i;
                    bt = t;
                }
            }
        }
        if (bi < 0)
            break;
        fa->cur[bi].id = fa->tracks[bt].id;
        fa->used[bt] = 1;
    }
    return KEYER_OK;
}

/* ---- the steps of one frame (faces_steps.h; keyer_faces_run runs them with its own models) */

int kr_faces_begin(keyer_faces *fa, int width, int height, keyer_roi *rois)
{
    keyer_face *t = fa->prev;
    fa->prev = fa->cur;
    fa->cur = t;
    fa->n_prev = fa->n_cur;
    fa->n_cur = 0;
    fa->lost = 0;
    fa->frame_w = width;
    fa->frame_h = height;
    int n = 0;
    for (int i = 0; i < fa->n_prev && fa->p.landmarks; i++) {
        keyer_roi roi = roi_from_landmarks(&fa->prev[i], fa->p.roi_scale);
        if (!roi_ok(&roi, width, height)) {
            fa->lost++;
            continue;
        }
        rois[n++] = roi;
    }
    return n;
}

void kr_faces_add_tracked(keyer_faces *fa, const keyer_roi *roi, const float *points,
                          float logit, const keyer_prepare_geometry *geo)
{
    keyer_face *f = &fa->cur[fa->n_cur];
    memset(f, 0, sizeof(*f));
    fill_face(points, logit, roi, geo, f);
    if (f->presence < fa->p.min_presence)
        fa->lost++;
    else
        fa->n_cur++;
}

int kr_faces_wants_detection(keyer_faces *fa)
{
    int interval = fa->p.detect_interval > 0 && fa->stats.frames % fa->p.detect_interval == 0;
    return fa->n_cur < fa->p.max_faces &&
           (!fa->p.landmarks || fa->n_cur == 0 || fa->lost > 0 || interval);
}

int kr_faces_detection_rois(keyer_faces *fa, const keyer_detection *dets, int n,
                            keyer_roi *rois, int *index)
{
    int k = 0;
    for (int j = 0; j < n; j++) {
        if (already_tracked(fa, &dets[j]))
            continue;
        keyer_roi roi = roi_from_detection(&dets[j], fa->p.roi_scale);
        if (!roi_ok(&roi, fa->frame_w, fa->frame_h))
            continue;
        rois[k] = roi;
        index[k++] = j;
    }
    return k;
}

void kr_faces_add_detected(keyer_faces *fa, const keyer_detection *d, const keyer_roi *roi,
                           const float *points, float logit,
                           const keyer_prepare_geometry *geo)
{
    /* the faces accepted before this one may cover it now */
    if (fa->n_cur >= fa->p.max_faces || already_tracked(fa, d))
        return;
    keyer_face *f = &fa->cur[fa->n_cur];
    memset(f, 0, sizeof(*f));
    f->detected = 1;
    f->detection = *d;
    fill_face(points, logit, roi, geo, f);
    if (f->presence >= fa->p.min_presence) /* else the mesh sees no face there */
        fa->n_cur++;
}

keyer_status kr_faces_end(keyer_faces *fa, const keyer_face **faces, int *count,
                          keyer_error *err)
{
    fa->stats.lost += fa->lost;
    keyer_status st = assign_ids(fa, (float)fa->frame_w, (float)fa->frame_h, err);
    if (st) {
        keyer_faces_reset(fa);
        *faces = NULL;
        *count = 0;
        return st;
    }
    fa->stats.frames++;
    *faces = fa->cur;
    *count = fa->n_cur;
    return KEYER_OK;
}

keyer_status kr_faces_create_external(const keyer_faces_params *params, keyer_faces **out,
                                      keyer_error *err)
{
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_faces_create_external: NULL argument");
    keyer_faces_params p = *params;
    p.detector = 0; /* no model is loaded: the caller runs them */
    p.landmarks = 0;
    keyer_status st = keyer_faces_create(&p, out, err);
    if (!st)
        (*out)->p.landmarks = 1;
    return st;
}

/* One frame with the analyser's own models, one region at a time. */
static keyer_status run_frame(keyer_faces *fa, const keyer_frame *frame, keyer_error *err)
{
    keyer_status st;
    keyer_roi rois[DECODE_CAPACITY];
    int index[DECODE_CAPACITY];
    const float *pts;
    float flag;
    keyer_prepare_geometry geo;
    /* 1. Follow the previous frame's faces by their landmarks. */
    int n = kr_faces_begin(fa, frame->width, frame->height, rois);
    for (int i = 0; i < n; i++) {
        if ((st = run_mesh(fa, frame, &rois[i], &pts, &flag, &geo, err)))
            return st;
        kr_faces_add_tracked(fa, &rois[i], pts, flag, &geo);
    }
    /* 2. Detect when nothing is followed, a face was lost, or at the interval. */
    if (kr_faces_wants_detection(fa)) {
        int nd = 0;
        if ((st = detect(fa, frame, &nd, err)))
            return st;
        if (!fa->p.landmarks) {
            for (int j = 0; j < nd && fa->n_cur < fa->p.max_faces; j++) {
                keyer_face *f = &fa->cur[fa->n_cur++];
                memset(f, 0, sizeof(*f));
                f->detected = 1;
                f->detection = fa->dets[j];
                f->box = fa->dets[j];
            }
        } else {
            int nc = kr_faces_detection_rois(fa, fa->dets, nd, rois, index);
            for (int i = 0; i < nc && fa->n_cur < fa->p.max_faces; i++) {
                if (already_tracked(fa, &fa->dets[index[i]]))
                    continue; /* covered by a face accepted in this loop: no mesh run */
                if ((st = run_mesh(fa, frame, &rois[i], &pts, &flag, &geo, err)))
                    return st;
                kr_faces_add_detected(fa, &fa->dets[index[i]], &rois[i], pts, flag, &geo);
            }
        }
    }
    /* 3. Stable ids (kr_faces_end, by the caller). */
    return KEYER_OK;
}

keyer_status keyer_faces_run(keyer_faces *fa, const keyer_frame *frame, const keyer_face **faces,
                             int *count, keyer_error *err)
{
    if (count)
        *count = 0;
    if (faces)
        *faces = NULL;
    if (!fa || !faces || !count)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_run: NULL argument");
    keyer_status st = check_frame(frame, "keyer_faces_run", err);
    if (st)
        return st;
    if (!fa->p.detector)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_run: the analyser has no detector (use "
                               "keyer_faces_track)");
    /* The previous frame's faces become the tracking state (kr_faces_begin). */
    if ((st = run_frame(fa, frame, err))) {
        keyer_faces_reset(fa);
        return st;
    }
    return kr_faces_end(fa, faces, count, err);
}

keyer_status keyer_faces_detect(keyer_faces *fa, const keyer_frame *frame, keyer_detection *out,
                                int capacity, int *count, keyer_error *err)
{
    if (count)
        *count = 0;
    if (!fa || !count || capacity < 0 || (capacity > 0 && !out))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_detect: NULL argument or negative capacity");
    keyer_status st = check_frame(frame, "keyer_faces_detect", err);
    if (st)
        return st;
    if (!fa->p.detector)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_detect: the analyser has no detector");
    int n = 0;
    if ((st = detect(fa, frame, &n, err)))
        return st;
    if (n > capacity)
        n = capacity;
    memcpy(out, fa->dets, sizeof(keyer_detection) * (size_t)n);
    *count = n;
    return KEYER_OK;
}

keyer_status keyer_faces_track(keyer_faces *fa, const keyer_detection *dets, int n, int width,
                               int height, const keyer_face **faces, int *count,
                               keyer_error *err)
{
    if (count)
        *count = 0;
    if (faces)
        *faces = NULL;
    if (!fa || !faces || !count || n < 0 || (n > 0 && !dets) || width < 1 || height < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_track: NULL argument, negative count or empty frame");
    if (fa->p.landmarks)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_track: the analyser runs the face mesh (landmarks 1)");
    keyer_face *t = fa->prev;
    fa->prev = fa->cur;
    fa->cur = t;
    fa->n_prev = fa->n_cur;
    fa->n_cur = 0;
    for (int i = 0; i < n && fa->n_cur < fa->p.max_faces; i++) {
        keyer_face *f = &fa->cur[fa->n_cur++];
        memset(f, 0, sizeof(*f));
        f->detected = 1;
        f->detection = dets[i];
        f->box = dets[i];
    }
    keyer_status st = assign_ids(fa, (float)width, (float)height, err);
    if (st) {
        keyer_faces_reset(fa);
        return st;
    }
    fa->stats.frames++;
    *faces = fa->cur;
    *count = fa->n_cur;
    return KEYER_OK;
}

/* ---- drawing --------------------------------------------------------------------------- */

static const int mesh_contours[] = {
    /* lips, outer lower */
    61, 146, 146, 91, 91, 181, 181, 84, 84, 17, 17, 314, 314, 405, 405, 321, 321, 375, 375, 291,
    /* lips, outer upper */
    61, 185, 185, 40, 40, 39, 39, 37, 37, 0, 0, 267, 267, 269, 269, 270, 270, 409, 409, 291,
    /* lips, inner lower */
    78, 95, 95, 88, 88, 178, 178, 87, 87, 14, 14, 317, 317, 402, 402, 318, 318, 324, 324, 308,
    /* lips, inner upper */
    78, 191, 191, 80, 80, 81, 81, 82, 82, 13, 13, 312, 312, 311, 311, 310, 310, 415, 415, 308,
    /* left eye, lower */
    263, 249, 249, 390, 390, 373, 373, 374, 374, 380, 380, 381, 381, 382, 382, 362,
    /* left eye, upper */
    263, 466, 466, 388, 388, 387, 387, 386, 386, 385, 385, 384, 384, 398, 398, 362,
    /* left eyebrow */
    276, 283, 283, 282, 282, 295, 295, 285,
    300, 293, 293, 334, 334, 296, 296, 336,
    /* right eye, lower */
    33, 7, 7, 163, 163, 144, 144, 145, 145, 153, 153, 154, 154, 155, 155, 133,
    /* right eye, upper */
    33, 246, 246, 161, 161, 160, 160, 159, 159, 158, 158, 157, 157, 173, 173, 133,
    /* right eyebrow */
    46, 53, 53, 52, 52, 65, 65, 55,
    70, 63, 63, 105, 105, 66, 66, 107,
    /* face oval */
    10, 338, 338, 297, 297, 332, 332, 284, 284, 251, 251, 389, 389, 356, 356, 454, 454, 323,
    323, 361, 361, 288, 288, 397, 397, 365, 365, 379, 379, 378, 378, 400, 400, 377, 377, 152,
    152, 148, 148, 176, 176, 149, 149, 150, 150, 136, 136, 172, 172, 58, 58, 132, 132, 93,
    93, 234, 234, 127, 127, 162, 162, 21, 21, 54, 54, 103, 103, 67, 67, 109, 109, 10,
};

const int *keyer_face_mesh_contours(int *count)
{
    if (count)
        *count = (int)(sizeof(mesh_contours) / sizeof(mesh_contours[0]) / 2);
    return mesh_contours;
}

keyer_faces_draw_params keyer_faces_draw_params_defaults(void)
{
    keyer_faces_draw_params p;
    memset(&p, 0, sizeof(p));
    p.boxes = 1;
    p.keypoints = 0;
    p.mesh = 1;
    p.mesh_points = 0;
    p.ids = 1;
    p.line_width = 2.0f;
    p.text_scale = 2.0f;
    p.box_color = (keyer_color){0.1f, 0.9f, 0.3f, 1.0f};
    p.mesh_color = (keyer_color){1.0f, 1.0f, 1.0f, 0.8f};
    p.point_color = (keyer_color){1.0f, 0.2f, 0.2f, 1.0f};
    p.text_color = (keyer_color){1.0f, 1.0f, 1.0f, 1.0f};
    return p;
}

static keyer_status draw_face(keyer_overlay *ov, const keyer_face *f,
                              const keyer_faces_draw_params *p, keyer_error *err)
{
    keyer_status st;
    const keyer_detection *b = &f->box;
    keyer_color none = {0, 0, 0, 0};
    if (p->boxes) {
        float side = fminf(b->xmax - b->xmin, b->ymax - b->ymin);
        if ((st = keyer_overlay_add_box(ov, b->xmin, b->ymin, b->xmax, b->ymax,
                                        fmaxf(side * 0.08f, 0.0f), p->line_width, p->box_color,
                                        none, err)))
            return st;
    }
    if (f->has_landmarks && (p->mesh || p->mesh_points)) {
        float xy[KEYER_FACE_MESH_POINTS * 2];
        for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++) {
            xy[2 * i] = f->landmarks[i][0];
            xy[2 * i + 1] = f->landmarks[i][1];
        }
        int n = 0;
        const int *pairs = keyer_face_mesh_contours(&n);
        if (p->mesh && (st = keyer_overlay_add_connections(ov, xy, KEYER_FACE_MESH_POINTS, pairs,
                                                           n, p->line_width * 0.5f,
                                                           p->mesh_color, err)))
            return st;
        if (p->mesh_points &&
            (st = keyer_overlay_add_points(ov, xy, KEYER_FACE_MESH_POINTS, p->line_width * 0.5f,
                                           p->mesh_color, err)))
            return st;
    }
    if (p->keypoints) {
        float xy[KEYER_DETECTION_MAX_KEYPOINTS * 2];
        int n = b->num_keypoints > KEYER_DETECTION_MAX_KEYPOINTS ? KEYER_DETECTION_MAX_KEYPOINTS
                                                                  : b->num_keypoints;
        for (int k = 0; k < n; k++) {
            xy[2 * k] = b->keypoints[k][0];
            xy[2 * k + 1] = b->keypoints[k][1];
        }
        if ((st = keyer_overlay_add_points(ov, xy, n, p->line_width * 1.5f, p->point_color, err)))
            return st;
    }
    if (p->ids && f->id) {
        char text[24];
        snprintf(text, sizeof(text), "id %u", (unsigned)f->id);
        float w, h;
        keyer_overlay_text_size(text, p->text_scale, &w, &h);
        float y = b->ymin - h - 4 * p->text_scale - p->line_width;
        keyer_color plate = {0, 0, 0, 0.6f};
        if ((st = keyer_overlay_add_label(ov, b->xmin, y, p->text_scale, text, p->text_color,
                                          plate, err)))
            return st;
    }
    return KEYER_OK;
}

keyer_status keyer_faces_draw(keyer_overlay *ov, const keyer_face *faces, int n,
                              const keyer_faces_draw_params *params, keyer_error *err)
{
    keyer_faces_draw_params def = keyer_faces_draw_params_defaults();
    const keyer_faces_draw_params *p = params ? params : &def;
    if (!ov || n < 0 || (n > 0 && !faces))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_draw: NULL overlay or faces");
    if (!(p->line_width > 0) || !isfinite(p->line_width) ||
        !(p->text_scale >= 1 && p->text_scale <= 64))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_faces_draw: line_width must be > 0 and text_scale 1..64");
    for (int i = 0; i < n; i++) {
        int mark = keyer_overlay_count(ov);
        keyer_status st = draw_face(ov, &faces[i], p, err);
        if (st) {
            keyer_overlay_truncate(ov, mark);
            return keyer_error_prefix(err, "keyer_faces_draw: face %d: ", i);
        }
    }
    return KEYER_OK;
}
