/*
 * Body pose with the BlazePose landmark models: crop tracking from the auxiliary landmarks,
 * heatmap refinement, world landmarks and the body mask (see keyer/pose.h). Built on the
 * public API.
 */
#include "keyer/pose.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vision/pose_heatmap.h"
#include "vision/pose_heatmap_math.h"
#include "vision/pose_steps.h"
#include "vision/vmodel.h"

#define MODEL_POINTS KR_POSE_MODEL_POINTS
#define AUX_CENTER 33
#define AUX_SCALE 34

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Body crop from a face (keyer's estimate, see keyer/pose.h), in face sizes. */
#define FACE_TO_HIPS 3.0f
#define HIPS_TO_TOP 3.5f

struct keyer_pose {
    keyer_pose_params p;
    kr_vmodel m;
    keyer_faces *faces; /* face detector for seeding (seed_from_face) */
    int out_points, out_flag, out_seg, out_heat, out_world;
    int heat_w, heat_h;      /* heatmap grid */
    int seg_w, seg_h;        /* segmentation grid */
    int in_w, in_h;          /* the model's input */
    /* tracking */
    int has_roi;
    keyer_roi roi;
    /* scratch: one pass's landmarks (model's 39) in frame pixels */
    float pts[MODEL_POINTS][5];
    /* the last frame's mask */
    float *mask;             /* seg_w x seg_h probabilities */
    int mask_valid;          /* a frame was analysed */
    int mask_found;          /* ... and a person was found */
    float mask_inv[6];       /* frame pixels -> tensor pixels */
    int frame_w, frame_h;    /* size of the analysed frame */
    keyer_pose_stats stats;
};

static const char *const model_names[] = {"pose-lite", "pose-full", "pose-heavy"};

keyer_pose_params keyer_pose_params_defaults(void)
{
    keyer_pose_params p;
    memset(&p, 0, sizeof(p));
    p.model = KEYER_POSE_MODEL_LITE;
    p.backend = KEYER_BACKEND_CPU;
    p.min_presence = 0.5f;
    p.roi_scale = 1.25f;
    p.refine_heatmap = 1;
    p.segmentation = 1;
    p.seed_from_face = 1;
    return p;
}

static keyer_status check_params(const keyer_pose_params *p, keyer_error *err)
{
    if (p->model < KEYER_POSE_MODEL_LITE || p->model > KEYER_POSE_MODEL_HEAVY ||
        !(p->min_presence >= 0 && p->min_presence <= 1) ||
        !(p->roi_scale >= 1 && p->roi_scale <= 4) || p->threads < 0 ||
        (p->refine_heatmap != 0 && p->refine_heatmap != 1) ||
        (p->segmentation != 0 && p->segmentation != 1) ||
        (p->seed_from_face != 0 && p->seed_from_face != 1))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_create: a parameter is out of range (model 0..2, "
                               "min_presence 0..1, roi_scale 1..4, refine_heatmap, "
                               "segmentation and seed_from_face 0 or 1)");
    return KEYER_OK;
}

keyer_status kr_pose_create_external(const keyer_pose_params *params, const kr_pose_shape *shape,
                                     keyer_pose **out, keyer_error *err)
{
    *out = NULL;
    keyer_status st = check_params(params, err);
    if (st)
        return st;
    if (shape->width < 1 || shape->width != shape->height || shape->heat_w < 1 ||
        shape->heat_h < 1 || shape->seg_w < 1 || shape->seg_h < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "pose landmarks: a square input and non-empty heatmap and "
                               "segmentation grids are needed");
    keyer_pose *pose = calloc(1, sizeof(*pose));
    if (!pose ||
        !(pose->mask = calloc((size_t)shape->seg_w * (size_t)shape->seg_h, sizeof(float)))) {
        free(pose);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "pose landmarks: out of memory");
    }
    pose->p = *params;
    pose->p.model_path = NULL;
    pose->p.face_model = NULL;
    pose->in_w = shape->width;
    pose->in_h = shape->height;
    pose->heat_w = shape->heat_w;
    pose->heat_h = shape->heat_h;
    pose->seg_w = shape->seg_w;
    pose->seg_h = shape->seg_h;
    *out = pose;
    return KEYER_OK;
}

void keyer_pose_destroy(keyer_pose **pp)
{
    if (!pp || !*pp)
        return;
    keyer_pose *pose = *pp;
    kr_vmodel_close(&pose->m);
    keyer_faces_destroy(&pose->faces);
    free(pose->mask);
    free(pose);
    *pp = NULL;
}

keyer_status keyer_pose_create(const keyer_pose_params *params, keyer_pose **out,
                               keyer_error *err)
{
    keyer_status st;
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_create: %s is NULL", !params ? "params" : "out");
    *out = NULL;
    const keyer_pose_params *p = params;
    if ((st = check_params(p, err)))
        return st;
    keyer_pose *pose = calloc(1, sizeof(*pose));
    if (!pose)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keyer_pose_create: out of memory");
    pose->p = *p;
    pose->p.model_path = NULL;
    pose->p.face_model = NULL;
    kr_vmodel_spec spec = {"pose landmarks", p->model_path ? p->model_path : model_names[p->model],
                           p->backend, p->threads, p->logger, KEYER_FIT_LETTERBOX, 1.0f, 0.0f, 5, 0};
    if ((st = kr_vmodel_open(&pose->m, &spec, err)))
        goto fail;
    kr_vmodel *m = &pose->m;
    pose->out_points = kr_vmodel_find_output(m, MODEL_POINTS * 5, 0);
    pose->out_flag = kr_vmodel_find_output(m, 1, 0);
    pose->out_world = kr_vmodel_find_output(m, MODEL_POINTS * 3, 0);
    pose->out_seg = pose->out_heat = -1;
    for (int i = 0; i < m->n_outputs; i++) {
        const keyer_tensor_info *t = &m->out_info[i];
        if (t->rank != 4 || t->dims[0] != 1)
            continue;
        if (t->dims[3] == 1 && pose->out_seg < 0) {
            pose->out_seg = i;
            pose->seg_h = t->dims[1];
            pose->seg_w = t->dims[2];
        } else if (t->dims[3] == MODEL_POINTS && pose->out_heat < 0) {
            pose->out_heat = i;
            pose->heat_h = t->dims[1];
            pose->heat_w = t->dims[2];
        }
    }
    if (pose->out_points < 0 || pose->out_flag < 0 || pose->out_world < 0 || pose->out_seg < 0 ||
        pose->out_heat < 0 || m->width != m->height) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "pose landmarks: %s: not a BlazePose landmark model (expected a "
                             "square input and outputs of %d x 5 landmarks, 1 presence, "
                             "[1,H,W,1] segmentation, [1,h,w,%d] heatmaps, %d x 3 world "
                             "landmarks)",
                             m->path, MODEL_POINTS, MODEL_POINTS, MODEL_POINTS);
        goto fail;
    }
    pose->in_w = m->width;
    pose->in_h = m->height;
    if (p->seed_from_face) {
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.range = KEYER_FACE_RANGE_FULL;
        fp.landmarks = 0;
        fp.max_faces = 1;
        fp.backend = p->backend;
        fp.threads = p->threads;
        fp.logger = p->logger;
        fp.detector_model = p->face_model;
        if ((st = keyer_faces_create(&fp, &pose->faces, err))) {
            keyer_error_prefix(err, "pose seeding: ");
            goto fail;
        }
    }
    pose->mask = calloc((size_t)pose->seg_w * (size_t)pose->seg_h, sizeof(float));
    if (!pose->mask) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keyer_pose_create: out of memory");
        goto fail;
    }
    *out = pose;
    return KEYER_OK;
fail:
    keyer_pose_destroy(&pose);
    return st;
}

void keyer_pose_reset(keyer_pose *pose)
{
    if (pose)
        pose->has_roi = 0;
}

keyer_status keyer_pose_get_stats(const keyer_pose *pose, keyer_pose_stats *out, keyer_error *err)
{
    if (!pose || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_get_stats: NULL argument");
    *out = pose->stats;
    return KEYER_OK;
}

/* One pass's outputs (see kr_pose_outputs): the presence and the model's 39 landmarks into
 * pose->pts (frame pixels, heatmap-refined when the heatmaps are given). */
static float decode_pass(keyer_pose *pose, const kr_pose_outputs *o,
                         const keyer_prepare_geometry *geo)
{
    float pr = o->presence;
    float presence = pr == pr ? fminf(fmaxf(pr, 0.0f), 1.0f) : 0.0f;
    const float *raw = o->points;
    float tw = (float)pose->in_w, th = (float)pose->in_h;
    float zscale = sqrtf(geo->matrix[0] * geo->matrix[0] + geo->matrix[3] * geo->matrix[3]);
    for (int i = 0; i < MODEL_POINTS; i++) {
        const float *v = &raw[i * 5];
        float xn = v[0] / tw, yn = v[1] / th;
        if (pose->p.refine_heatmap && o->heat)
            kr_pose_heatmap_refine(o->heat, pose->heat_w, pose->heat_h, MODEL_POINTS, i, &xn, &yn);
        kr_geo_apply(geo, xn * tw, yn * th, &pose->pts[i][0], &pose->pts[i][1]);
        pose->pts[i][2] = v[2] * zscale;
        pose->pts[i][3] = kr_pose_sigmoid(v[3]);
        pose->pts[i][4] = kr_pose_sigmoid(v[4]);
        for (int c = 0; c < 3; c++)
            if (!isfinite(pose->pts[i][c]))
                presence = 0.0f; /* a model producing NaN has found nothing */
    }
    return presence;
}

/* One inference on @p roi (NULL: the whole frame letterboxed), its outputs to *@p o. */
static keyer_status pass(keyer_pose *pose, const keyer_frame *frame, const keyer_roi *roi,
                         kr_pose_outputs *o, keyer_prepare_geometry *geo, keyer_error *err)
{
    keyer_status st = kr_vmodel_run(&pose->m, frame, roi, geo, err);
    if (st)
        return st;
    const kr_vmodel *m = &pose->m;
    o->points = m->out[pose->out_points];
    o->presence = m->out[pose->out_flag][0];
    o->world = m->out[pose->out_world];
    o->heat = m->out[pose->out_heat];
    o->seg = m->out[pose->out_seg];
    return KEYER_OK;
}

/* MediaPipe's pose ROI from two points: centre l33, side 2|l34 - l33| * scale, rotated so
 * that l33 -> l34 points up. */
static int roi_from_points(const keyer_pose *pose, int width, int height, float x0, float y0,
                           float x1, float y1, keyer_roi *roi)
{
    float side = 2.0f * sqrtf((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0)) * pose->p.roi_scale;
    double rot = M_PI / 2 - atan2(-(double)(y1 - y0), (double)(x1 - x0));
    rot = rot - 2 * M_PI * floor((rot + M_PI) / (2 * M_PI)); /* into [-pi, pi) */
    float limit = 4.0f * (float)(width > height ? width : height);
    if (!isfinite(x0) || !isfinite(y0) || !(side >= 8.0f && side <= limit) || !isfinite(rot))
        return 0;
    roi->center_x = x0;
    roi->center_y = y0;
    roi->width = roi->height = side;
    roi->rotation = (float)rot;
    return 1;
}

static int roi_from_aux(const keyer_pose *pose, keyer_roi *roi)
{
    return roi_from_points(pose, pose->frame_w, pose->frame_h, pose->pts[AUX_CENTER][0], pose->pts[AUX_CENTER][1],
                           pose->pts[AUX_SCALE][0], pose->pts[AUX_SCALE][1], roi);
}

/* A first body crop from face @p d (see keyer/pose.h); 0 when it gives none. */
static int roi_from_detection(const keyer_pose *pose, const keyer_detection *d, keyer_roi *roi)
{
    float s = fmaxf(d->xmax - d->xmin, d->ymax - d->ymin);
    float ex = d->keypoints[1][0] - d->keypoints[0][0], ey = d->keypoints[1][1] - d->keypoints[0][1];
    float el = sqrtf(ex * ex + ey * ey);
    /* The face's up direction: the eye line (right eye to left eye in the image) turned by
     * -90 degrees; straight up when the eyes coincide. */
    float ux = el > 0 ? ey / el : 0.0f, uy = el > 0 ? -ex / el : -1.0f;
    float cx = (d->xmin + d->xmax) / 2, cy = (d->ymin + d->ymax) / 2;
    float hx = cx - ux * FACE_TO_HIPS * s, hy = cy - uy * FACE_TO_HIPS * s;
    return roi_from_points(pose, pose->frame_w, pose->frame_h, hx, hy, hx + ux * HIPS_TO_TOP * s,
                           hy + uy * HIPS_TO_TOP * s, roi);
}

static void keep_mask(keyer_pose *pose, const float *seg, const keyer_prepare_geometry *geo,
                      int found)
{
    pose->mask_valid = 1;
    pose->mask_found = found && pose->p.segmentation && seg && kr_geo_invert(geo, pose->mask_inv);
    if (!pose->mask_found)
        return;
    size_t n = (size_t)pose->seg_w * (size_t)pose->seg_h;
    for (size_t i = 0; i < n; i++)
        pose->mask[i] = kr_pose_sigmoid(seg[i]);
}

/* ---- the steps of keyer_pose_run (vision/pose_steps.h) --------------------------------- */

int kr_pose_begin(keyer_pose *pose, int width, int height, keyer_pose_result *out,
                  keyer_roi *roi)
{
    memset(out, 0, sizeof(*out));
    pose->mask_valid = 0;
    pose->frame_w = width;
    pose->frame_h = height;
    if (!pose->has_roi)
        return 0;
    *roi = pose->roi;
    return 1;
}

int kr_pose_seed(keyer_pose *pose, const keyer_detection *face, keyer_pose_result *out,
                 keyer_roi *roi)
{
    int found = face && pose->p.seed_from_face && roi_from_detection(pose, face, roi);
    if (!found)
        memset(roi, 0, sizeof(*roi));
    out->seeded = found ? 2 : 1;
    pose->stats.seeds++;
    pose->stats.face_seeds += found;
    return found;
}

int kr_pose_add_seed(keyer_pose *pose, const kr_pose_outputs *o,
                     const keyer_prepare_geometry *geo, keyer_pose_result *out, keyer_roi *roi)
{
    pose->stats.inferences++;
    float presence = decode_pass(pose, o, geo);
    if (presence < pose->p.min_presence || !roi_from_aux(pose, roi)) {
        keep_mask(pose, o->seg, geo, 0);
        out->presence = presence;
        pose->stats.frames++;
        return 0;
    }
    return 1;
}

void kr_pose_add_final(keyer_pose *pose, const keyer_roi *roi, const kr_pose_outputs *o,
                       const keyer_prepare_geometry *geo, keyer_pose_result *out)
{
    pose->stats.inferences++;
    float presence = decode_pass(pose, o, geo);
    out->presence = presence;
    pose->stats.frames++;
    if (presence < pose->p.min_presence) {
        pose->has_roi = 0;
        keep_mask(pose, o->seg, geo, 0);
        return;
    }
    out->found = 1;
    out->roi = *roi;
    float c = cosf(roi->rotation), s = sinf(roi->rotation);
    const float *world = o->world;
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++) {
        keyer_pose_landmark *l = &out->landmarks[i];
        l->x = pose->pts[i][0];
        l->y = pose->pts[i][1];
        l->z = pose->pts[i][2];
        l->visibility = pose->pts[i][3];
        l->presence = pose->pts[i][4];
        float wx = world[3 * i], wy = world[3 * i + 1];
        out->world[i][0] = c * wx - s * wy;
        out->world[i][1] = s * wx + c * wy;
        out->world[i][2] = world[3 * i + 2];
    }
    keep_mask(pose, o->seg, geo, 1);
    pose->has_roi = roi_from_aux(pose, &pose->roi);
}

keyer_status keyer_pose_run(keyer_pose *pose, const keyer_frame *frame, keyer_pose_result *out,
                            keyer_error *err)
{
    if (!pose || !frame || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_run: NULL argument");
    memset(out, 0, sizeof(*out));
    if (keyer_frame_check(frame, err))
        return keyer_error_prefix(err, "keyer_pose_run: ");
    if (frame->memory != KEYER_MEMORY_HOST)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "keyer_pose_run: the frame is in CUDA memory; pose takes host "
                               "frames");
    if (!pose->m.rt)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_run: the tracker has no model of its own");
    keyer_status st;
    kr_pose_outputs o;
    keyer_prepare_geometry geo;
    keyer_roi roi;
    if (!kr_pose_begin(pose, frame->width, frame->height, out, &roi)) {
        /* Seed from a face or the whole frame (keyer/pose.h), then refine on the crop that
         * result gives. */
        keyer_detection d;
        int n = 0;
        if (pose->faces && (st = keyer_faces_detect(pose->faces, frame, &d, 1, &n, err)))
            goto fail;
        int face = kr_pose_seed(pose, n > 0 ? &d : NULL, out, &roi);
        if ((st = pass(pose, frame, face ? &roi : NULL, &o, &geo, err)))
            goto fail;
        if (!kr_pose_add_seed(pose, &o, &geo, out, &roi))
            return KEYER_OK;
    }
    if ((st = pass(pose, frame, &roi, &o, &geo, err)))
        goto fail;
    kr_pose_add_final(pose, &roi, &o, &geo, out);
    return KEYER_OK;
fail:
    pose->has_roi = 0;
    return st;
}

keyer_status keyer_pose_mask(const keyer_pose *pose, keyer_frame *mask, keyer_error *err)
{
    if (!pose || !mask)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_pose_mask: NULL argument");
    if (!pose->p.segmentation)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_mask: segmentation is off in the parameters");
    if (!pose->mask_valid)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_mask: no frame has been analysed");
    if (keyer_frame_check(mask, err))
        return keyer_error_prefix(err, "keyer_pose_mask: ");
    if (mask->memory != KEYER_MEMORY_HOST || (mask->format != KEYER_PIXEL_FORMAT_GRAYF32 &&
                                              mask->format != KEYER_PIXEL_FORMAT_GRAY8))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_mask: the mask must be a host gray8 or grayf32 frame "
                               "(got %s)",
                               keyer_pixel_format_name(mask->format));
    int w = mask->width, h = mask->height, f32 = mask->format == KEYER_PIXEL_FORMAT_GRAYF32;
    const float *inv = pose->mask_inv;
    float sx = (float)pose->frame_w / (float)w, sy = (float)pose->frame_h / (float)h;
    /* tensor pixels -> segmentation cells */
    float kx = (float)pose->seg_w / (float)pose->in_w, ky = (float)pose->seg_h / (float)pose->in_h;
    for (int j = 0; j < h; j++) {
        uint8_t *row = mask->data[0] + (ptrdiff_t)j * mask->stride[0];
        for (int i = 0; i < w; i++) {
            float v = 0.0f;
            if (pose->mask_found) {
                float fx = ((float)i + 0.5f) * sx, fy = ((float)j + 0.5f) * sy;
                float tx = inv[0] * fx + inv[1] * fy + inv[2];
                float ty = inv[3] * fx + inv[4] * fy + inv[5];
                float u = tx * kx - 0.5f, q = ty * ky - 0.5f;
                if (u > -1.0f && q > -1.0f && u < (float)pose->seg_w && q < (float)pose->seg_h) {
                    int x0 = (int)floorf(u), y0 = (int)floorf(q);
                    float ax = u - (float)x0, ay = q - (float)y0;
                    for (int dy = 0; dy < 2; dy++)
                        for (int dx = 0; dx < 2; dx++) {
                            int xx = x0 + dx, yy = y0 + dy;
                            if (xx < 0 || yy < 0 || xx >= pose->seg_w || yy >= pose->seg_h)
                                continue; /* zero outside the crop */
                            float wgt = (dx ? ax : 1 - ax) * (dy ? ay : 1 - ay);
                            v += wgt * pose->mask[(size_t)yy * (size_t)pose->seg_w + (size_t)xx];
                        }
                }
            }
            if (f32)
                ((float *)row)[i] = v;
            else
                row[i] = (uint8_t)(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f + 0.5f);
        }
    }
    return KEYER_OK;
}

/* ---- connections and drawing ----------------------------------------------------------- */

static const int connections[KEYER_POSE_CONNECTIONS * 2] = {
    0, 1, 1, 2, 2, 3, 3, 7,          /* nose, left eye, left ear */
    0, 4, 4, 5, 5, 6, 6, 8,          /* nose, right eye, right ear */
    9, 10,                           /* mouth */
    11, 12,                          /* shoulders */
    11, 13, 13, 15, 15, 17, 15, 19, 15, 21, 17, 19, /* left arm and hand */
    12, 14, 14, 16, 16, 18, 16, 20, 16, 22, 18, 20, /* right arm and hand */
    11, 23, 12, 24, 23, 24,          /* torso */
    23, 25, 25, 27, 27, 29, 29, 31, 27, 31, /* left leg and foot */
    24, 26, 26, 28, 28, 30, 30, 32, 28, 32, /* right leg and foot */
};

const int *keyer_pose_connections(int *count)
{
    if (count)
        *count = KEYER_POSE_CONNECTIONS;
    return connections;
}

keyer_pose_draw_params keyer_pose_draw_params_defaults(void)
{
    keyer_pose_draw_params p;
    memset(&p, 0, sizeof(p));
    p.skeleton = 1;
    p.keypoints = 1;
    p.min_visibility = 0.5f;
    p.line_width = 3.0f;
    p.point_radius = 4.0f;
    p.line_color = (keyer_color){1, 1, 1, 1};
    p.left_color = (keyer_color){1.0f, 0.55f, 0.1f, 1};
    p.right_color = (keyer_color){0.1f, 0.8f, 1.0f, 1};
    return p;
}

/* 0: centre (nose), 1: the person's left, 2: right. */
static int side_of(int i)
{
    if (i == 0)
        return 0;
    if (i <= 10) /* 1-3, 7, 9 left; 4-6, 8, 10 right */
        return (i <= 3 || i == 7 || i == 9) ? 1 : 2;
    return (i % 2) ? 1 : 2;
}

static keyer_status draw_pose(keyer_overlay *ov, const keyer_pose_result *r,
                              const keyer_pose_draw_params *p, keyer_error *err)
{
    float xy[KEYER_POSE_LANDMARKS * 2];
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++) {
        int shown = r->landmarks[i].visibility >= p->min_visibility;
        xy[2 * i] = shown ? r->landmarks[i].x : NAN;
        xy[2 * i + 1] = shown ? r->landmarks[i].y : NAN;
    }
    keyer_status st;
    if (p->skeleton && (st = keyer_overlay_add_connections(ov, xy, KEYER_POSE_LANDMARKS,
                                                           connections, KEYER_POSE_CONNECTIONS,
                                                           p->line_width, p->line_color, err)))
        return st;
    if (!p->keypoints)
        return KEYER_OK;
    for (int side = 0; side < 3; side++) {
        float sel[KEYER_POSE_LANDMARKS * 2];
        for (int i = 0; i < KEYER_POSE_LANDMARKS; i++) {
            int mine = side_of(i) == side;
            sel[2 * i] = mine ? xy[2 * i] : NAN;
            sel[2 * i + 1] = mine ? xy[2 * i + 1] : NAN;
        }
        keyer_color c = side == 0 ? p->line_color : side == 1 ? p->left_color : p->right_color;
        if ((st = keyer_overlay_add_points(ov, sel, KEYER_POSE_LANDMARKS, p->point_radius, c, err)))
            return st;
    }
    return KEYER_OK;
}

keyer_status keyer_pose_draw(keyer_overlay *ov, const keyer_pose_result *result,
                             const keyer_pose_draw_params *params, keyer_error *err)
{
    keyer_pose_draw_params def = keyer_pose_draw_params_defaults();
    const keyer_pose_draw_params *p = params ? params : &def;
    if (!ov || !result)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_draw: NULL overlay or result");
    if (!(p->line_width > 0) || !isfinite(p->line_width) || !(p->point_radius > 0) ||
        !isfinite(p->point_radius))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_pose_draw: line_width and point_radius must be > 0");
    if (!result->found)
        return KEYER_OK;
    int mark = keyer_overlay_count(ov);
    keyer_status st = draw_pose(ov, result, p, err);
    if (st) {
        keyer_overlay_truncate(ov, mark);
        return keyer_error_prefix(err, "keyer_pose_draw: ");
    }
    return KEYER_OK;
}
