/*
 * The `keyerdetect` element (see keyer_detect.h).
 *
 * Per buffer: the analysers run on the mapped frame (a BGRx frame is first swapped into an
 * RGBA copy made at caps time); then
 *  - each face becomes a GstVideoRegionOfInterestMeta of type "face" whose rectangle is the
 *    box rounded outwards to whole pixels and clipped to the frame, id the tracker's id, with
 *    a "keyer-face" parameter structure: id (guint), score, detected (gboolean), xmin, ymin,
 *    xmax, ymax (gdouble, frame pixels, unrounded), keypoints (GstValueArray of gdouble,
 *    x0, y0, x1, y1, ...), and with the face mesh presence and landmarks (x, y, z per point);
 *  - a found pose becomes a meta of type "pose" around its visible landmarks with a
 *    "keyer-pose" structure: presence, landmarks (x, y, z, visibility per point);
 *  - with draw=true the boxes, ids and skeleton are drawn on the frame (NV12, I420, RGBA,
 *    BGRx: caps negotiation leaves RGB out then, which keyer's overlay does not draw on);
 *  - with post-messages=true an element message "keyerdetect" carries the frame's running
 *    time, timestamp, frame number and the same structures (faces: a GstValueArray).
 * Models, runtimes, overlay and staging frame are made at start and at caps time, never per
 * frame.
 *
 * Where the faces are detected: on the CPU by keyer's analysers (keyer_faces_run,
 * keyer_pose_run) on the mapped frame; or, for faces without pose on a GPU (device=cuda, or
 * device=auto with a CUDA context), by a keyer session (detect_session.h: the batched detector
 * and face-mesh stage of `keyer --detect faces`) from the frame where it is: CUDA memory of
 * keyer's context (video/x-raw(memory:CUDAMemory)) is read on the device and drawn on there.
 * CUDA memory of another context, or with the CPU analysers, is mapped through host memory
 * (GStreamer's CUDA memory downloads it, and uploads what was drawn). The element is in place:
 * the memory out is the memory in (caps pass through), so each pad offers the other pad's.
 */
#include "keyer_detect.h"

#include <gst/video/gstvideofilter.h>
#include <gst/video/video.h>
#include <math.h>
#include <string.h>

#include "keyer/faces.h"
#include "keyer/overlay.h"
#include "keyer/pose.h"
#include "detect_session.h"
#include "gst_log.h"
#include "video_frames.h"
#ifdef KEYER_GST_CUDA
#include "cuda_memory.h"
#endif

GST_DEBUG_CATEGORY_STATIC(keyer_detect_debug);
#define GST_CAT_DEFAULT keyer_detect_debug

/* The pose model choices, and "none". */
enum { POSE_NONE = -1 };

typedef struct _GstKeyerDetect {
    GstVideoFilter parent;

    /* settings (object lock) */
    gboolean faces_on, full_range, landmarks, draw, post_messages;
    gint pose; /* POSE_NONE or a keyer_pose_model */
    gint max_faces, threads;
    gfloat min_score;
    gint device, cuda_device; /* keyer_device_kind, CUDA ordinal */

    /* streaming */
    keyer_faces *faces;
    keyer_pose *pose_an;
    keyer_overlay *overlay;
    keyer_frame *staging; /* BGRx as RGBA */
    gboolean swap, drawing;
    keyer_faces_draw_params fdp;
    keyer_pose_draw_params pdp;
    guint64 frames;
    kg_detect_session *session; /* faces through a keyer session (GPU), or NULL */
    keyer_logger logger;        /* the session's log, to GStreamer's */
    gboolean cuda_in;           /* the caps' memory is CUDA memory */
    gboolean warned_foreign;    /* CUDA memory of another context was reported */
    gchar detector_device[64];  /* where the faces were last detected (object lock) */
#ifdef KEYER_GST_CUDA
    kg_cuda *cuda; /* keyer's CUDA context wrapped for GStreamer (READY and up), or NULL */
#endif
} GstKeyerDetect;

typedef struct _GstKeyerDetectClass {
    GstVideoFilterClass parent;
} GstKeyerDetectClass;

G_DEFINE_TYPE(GstKeyerDetect, gst_keyer_detect, GST_TYPE_VIDEO_FILTER)

enum {
    PROP_0,
    PROP_FACES,
    PROP_FULL_RANGE,
    PROP_LANDMARKS,
    PROP_POSE,
    PROP_MAX_FACES,
    PROP_MIN_SCORE,
    PROP_THREADS,
    PROP_DRAW,
    PROP_POST_MESSAGES,
    PROP_DEVICE,
    PROP_CUDA_DEVICE,
    PROP_DETECTOR_DEVICE,
};

#define DRAW_FORMATS "{ NV12, I420, RGBA, BGRx }"
/* GStreamer's CUDA memory (cuda_memory.h): NV12, I420 and RGBA, which the overlay draws too */
#ifdef KEYER_GST_CUDA
#define CUDA_CAPS GST_VIDEO_CAPS_MAKE_WITH_FEATURES(KG_CAPS_FEATURE_CUDA, KG_CUDA_FORMATS) "; "
#else
#define CUDA_CAPS
#endif

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS,
                            GST_STATIC_CAPS(CUDA_CAPS GST_VIDEO_CAPS_MAKE(KG_VIDEO_FORMATS)));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS,
                            GST_STATIC_CAPS(CUDA_CAPS GST_VIDEO_CAPS_MAKE(KG_VIDEO_FORMATS)));

static GType device_type(void)
{
    static GType type = 0;
    static const GEnumValue values[] = {
        {KEYER_DEVICE_AUTO, "a GPU when the element has a CUDA context, else the CPU", "auto"},
        {KEYER_DEVICE_CPU, "the CPU", "cpu"},
        {KEYER_DEVICE_CUDA, "a CUDA GPU (the CPU when it cannot be used, logged)", "cuda"},
        {0, NULL, NULL},
    };
    if (g_once_init_enter(&type))
        g_once_init_leave(&type, g_enum_register_static("KeyerDetectDevice", values));
    return type;
}

static GType pose_type(void)
{
    static GType type = 0;
    static const GEnumValue values[] = {
        {POSE_NONE, "no pose", "none"},
        {KEYER_POSE_MODEL_LITE, "pose-lite", "lite"},
        {KEYER_POSE_MODEL_FULL, "pose-full", "full"},
        {KEYER_POSE_MODEL_HEAVY, "pose-heavy", "heavy"},
        {0, NULL, NULL},
    };
    if (g_once_init_enter(&type))
        g_once_init_leave(&type, g_enum_register_static("KeyerDetectPose", values));
    return type;
}

/* ---- properties ---------------------------------------------------------------------------- */

static void gst_keyer_detect_set_property(GObject *object, guint id, const GValue *value,
                                          GParamSpec *pspec)
{
    GstKeyerDetect *self = (GstKeyerDetect *)object;
    GST_OBJECT_LOCK(self);
    switch (id) {
    case PROP_FACES:
        self->faces_on = g_value_get_boolean(value);
        break;
    case PROP_FULL_RANGE:
        self->full_range = g_value_get_boolean(value);
        break;
    case PROP_LANDMARKS:
        self->landmarks = g_value_get_boolean(value);
        break;
    case PROP_POSE:
        self->pose = g_value_get_enum(value);
        break;
    case PROP_MAX_FACES:
        self->max_faces = g_value_get_int(value);
        break;
    case PROP_MIN_SCORE:
        self->min_score = g_value_get_float(value);
        break;
    case PROP_THREADS:
        self->threads = g_value_get_int(value);
        break;
    case PROP_DRAW:
        self->draw = g_value_get_boolean(value);
        break;
    case PROP_POST_MESSAGES:
        self->post_messages = g_value_get_boolean(value);
        break;
    case PROP_DEVICE:
        self->device = g_value_get_enum(value);
        break;
    case PROP_CUDA_DEVICE:
        self->cuda_device = g_value_get_int(value);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
        break;
    }
    GST_OBJECT_UNLOCK(self);
    if (id == PROP_DRAW) /* the formats it can take change */
        gst_base_transform_reconfigure_sink(GST_BASE_TRANSFORM(self));
}

static void gst_keyer_detect_get_property(GObject *object, guint id, GValue *value,
                                          GParamSpec *pspec)
{
    GstKeyerDetect *self = (GstKeyerDetect *)object;
    GST_OBJECT_LOCK(self);
    switch (id) {
    case PROP_FACES:
        g_value_set_boolean(value, self->faces_on);
        break;
    case PROP_FULL_RANGE:
        g_value_set_boolean(value, self->full_range);
        break;
    case PROP_LANDMARKS:
        g_value_set_boolean(value, self->landmarks);
        break;
    case PROP_POSE:
        g_value_set_enum(value, self->pose);
        break;
    case PROP_MAX_FACES:
        g_value_set_int(value, self->max_faces);
        break;
    case PROP_MIN_SCORE:
        g_value_set_float(value, self->min_score);
        break;
    case PROP_THREADS:
        g_value_set_int(value, self->threads);
        break;
    case PROP_DRAW:
        g_value_set_boolean(value, self->draw);
        break;
    case PROP_POST_MESSAGES:
        g_value_set_boolean(value, self->post_messages);
        break;
    case PROP_DEVICE:
        g_value_set_enum(value, self->device);
        break;
    case PROP_CUDA_DEVICE:
        g_value_set_int(value, self->cuda_device);
        break;
    case PROP_DETECTOR_DEVICE:
        g_value_set_string(value, self->detector_device);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
        break;
    }
    GST_OBJECT_UNLOCK(self);
}

/* ---- start, stop, caps ---------------------------------------------------------------------- */

static void log_to_gst(void *opaque, keyer_log_level level, const char *message)
{
    GstKeyerDetect *self = opaque;
    GST_CAT_LEVEL_LOG(keyer_detect_debug, kg_gst_level(level), self, "%s", message);
}

/* Whether the faces are found by a keyer session: faces without pose (as `keyer --detect
 * faces`), on a GPU asked for or, with device=auto, when the element has keyer's CUDA
 * context (a GPU is there and GStreamer's CUDA memory is built in). */
static gboolean wants_session(GstKeyerDetect *self, gboolean faces_on, gint pose, gint device)
{
    if (!faces_on || pose != POSE_NONE || device == KEYER_DEVICE_CPU)
        return FALSE;
    if (device == KEYER_DEVICE_CUDA)
        return TRUE;
#ifdef KEYER_GST_CUDA
    return self->cuda != NULL;
#else
    (void)self;
    return FALSE;
#endif
}

static gboolean gst_keyer_detect_start(GstBaseTransform *trans)
{
    GstKeyerDetect *self = (GstKeyerDetect *)trans;
    keyer_error err = {0};
    keyer_status st = KEYER_OK;
    GST_OBJECT_LOCK(self);
    gboolean faces_on = self->faces_on, full = self->full_range, lm = self->landmarks;
    gboolean draw = self->draw;
    gint pose = self->pose, max_faces = self->max_faces, threads = self->threads;
    gint device = self->device, cuda_device = self->cuda_device;
    gfloat min_score = self->min_score;
    GST_OBJECT_UNLOCK(self);
    self->frames = 0;
    self->drawing = draw;
    self->warned_foreign = FALSE;
    if (!faces_on && pose == POSE_NONE) {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                          ("keyerdetect: nothing to detect (faces=false and pose=none)"), (NULL));
        return FALSE;
    }
    if (wants_session(self, faces_on, pose, device)) {
        self->logger.level = kg_keyer_level(keyer_detect_debug);
        kg_detect_session_params dp = {(keyer_device_kind)device,
                                       cuda_device,
                                       full,
                                       lm,
                                       max_faces,
                                       min_score,
                                       threads,
                                       &self->logger};
        st = kg_detect_session_create(&dp, &self->session, &err);
    } else if (faces_on) {
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.range = full ? KEYER_FACE_RANGE_FULL : KEYER_FACE_RANGE_SHORT;
        fp.landmarks = lm;
        fp.max_faces = max_faces;
        fp.detect_interval = lm ? 10 : 0; /* as keyer's --detect */
        fp.min_score = min_score;
        fp.threads = threads;
        st = keyer_faces_create(&fp, &self->faces, &err);
    }
    if (!st && pose != POSE_NONE) {
        keyer_pose_params pp = keyer_pose_params_defaults();
        pp.model = (keyer_pose_model)pose;
        pp.threads = threads;
        pp.segmentation = 0;
        st = keyer_pose_create(&pp, &self->pose_an, &err);
    }
    if (!st && draw)
        st = keyer_overlay_create(1 << 16, &self->overlay, &err);
    if (!st)
        st = keyer_frame_create(&self->staging, &err);
    if (st) {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("keyerdetect: %s", err.message),
                          ("%s", keyer_status_name(st)));
        kg_detect_session_destroy(&self->session);
        keyer_faces_destroy(&self->faces);
        keyer_pose_destroy(&self->pose_an);
        keyer_overlay_destroy(&self->overlay);
        return FALSE;
    }
    GST_OBJECT_LOCK(self);
    /* the CPU analysers' device is known now; a session's when its stages start */
    g_strlcpy(self->detector_device, self->session ? "" : "cpu", sizeof(self->detector_device));
    GST_OBJECT_UNLOCK(self);
    return TRUE;
}

static gboolean gst_keyer_detect_stop(GstBaseTransform *trans)
{
    GstKeyerDetect *self = (GstKeyerDetect *)trans;
    kg_detect_session_destroy(&self->session);
    keyer_faces_destroy(&self->faces);
    keyer_pose_destroy(&self->pose_an);
    keyer_overlay_destroy(&self->overlay);
    keyer_frame_destroy(&self->staging);
    return TRUE;
}

static GstCaps *gst_keyer_detect_transform_caps(GstBaseTransform *trans, GstPadDirection dir,
                                                GstCaps *caps, GstCaps *filter)
{
    GstKeyerDetect *self = (GstKeyerDetect *)trans;
    GST_OBJECT_LOCK(self);
    gboolean draw = self->draw;
    GST_OBJECT_UNLOCK(self);
    GstCaps *res = gst_caps_copy(caps);
    if (draw) {
        GstCaps *drawable = gst_caps_from_string(CUDA_CAPS GST_VIDEO_CAPS_MAKE(DRAW_FORMATS));
        GstCaps *t = gst_caps_intersect_full(res, drawable, GST_CAPS_INTERSECT_FIRST);
        gst_caps_unref(drawable);
        gst_caps_unref(res);
        res = t;
    }
    if (filter) {
        GstCaps *t = gst_caps_intersect_full(filter, res, GST_CAPS_INTERSECT_FIRST);
        gst_caps_unref(res);
        res = t;
    }
    return res;
}

static gboolean gst_keyer_detect_set_info(GstVideoFilter *filter, GstCaps *incaps,
                                          GstVideoInfo *in_info, GstCaps *outcaps,
                                          GstVideoInfo *out_info)
{
    GstKeyerDetect *self = (GstKeyerDetect *)filter;
    gboolean swap;
    if (kg_keyer_format(GST_VIDEO_INFO_FORMAT(in_info), &swap) == KEYER_PIXEL_FORMAT_NONE)
        return FALSE;
    self->swap = swap;
    self->cuda_in = FALSE;
#ifdef KEYER_GST_CUDA
    self->cuda_in = kg_caps_are_cuda(incaps);
#endif
    if (swap) {
        keyer_error err = {0};
        if (keyer_frame_alloc(self->staging, KEYER_PIXEL_FORMAT_RGBA, GST_VIDEO_INFO_WIDTH(in_info),
                              GST_VIDEO_INFO_HEIGHT(in_info), NULL, &err)) {
            GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("keyerdetect: %s", err.message), (NULL));
            return FALSE;
        }
    }
    /* drawing sizes as keyer's --draw: scaled with the frame height */
    float unit = (float)GST_VIDEO_INFO_HEIGHT(in_info) / 480.0f;
    self->fdp = keyer_faces_draw_params_defaults();
    self->fdp.mesh = 0;
    self->fdp.text_scale = unit * 2 < 1 ? 1 : unit * 2 > 64 ? 64 : unit * 2;
    self->fdp.line_width = unit * 2 < 1 ? 1 : unit * 2;
    self->pdp = keyer_pose_draw_params_defaults();
    self->pdp.line_width = unit * 3 < 1 ? 1 : unit * 3;
    self->pdp.point_radius = unit * 4 < 1.5f ? 1.5f : unit * 4;
    if (swap) { /* the overlay draws RGBA: swap red and blue of every colour */
        keyer_color *colors[] = {&self->fdp.box_color,   &self->fdp.mesh_color,
                                 &self->fdp.point_color, &self->fdp.text_color,
                                 &self->pdp.line_color,  &self->pdp.left_color,
                                 &self->pdp.right_color};
        for (size_t i = 0; i < G_N_ELEMENTS(colors); i++) {
            float r = colors[i]->r;
            colors[i]->r = colors[i]->b;
            colors[i]->b = r;
        }
    }
    return TRUE;
}

/* ---- per frame ------------------------------------------------------------------------------ */

static void add_double(GValue *array, double v)
{
    GValue x = G_VALUE_INIT;
    g_value_init(&x, G_TYPE_DOUBLE);
    g_value_set_double(&x, v);
    gst_value_array_append_and_take_value(array, &x);
}

static GstStructure *face_structure(const keyer_face *f)
{
    const keyer_detection *b = &f->box;
    GstStructure *s = gst_structure_new(
        "keyer-face", "id", G_TYPE_UINT, f->id, "score", G_TYPE_DOUBLE, (double)b->score,
        "detected", G_TYPE_BOOLEAN, f->detected != 0, "xmin", G_TYPE_DOUBLE, (double)b->xmin,
        "ymin", G_TYPE_DOUBLE, (double)b->ymin, "xmax", G_TYPE_DOUBLE, (double)b->xmax, "ymax",
        G_TYPE_DOUBLE, (double)b->ymax, NULL);
    GValue kp = G_VALUE_INIT;
    gst_value_array_init(&kp, (guint)(2 * b->num_keypoints));
    for (int k = 0; k < b->num_keypoints; k++) {
        add_double(&kp, b->keypoints[k][0]);
        add_double(&kp, b->keypoints[k][1]);
    }
    gst_structure_take_value(s, "keypoints", &kp);
    if (f->has_landmarks) {
        gst_structure_set(s, "presence", G_TYPE_DOUBLE, (double)f->presence, NULL);
        GValue lm = G_VALUE_INIT;
        gst_value_array_init(&lm, 3 * KEYER_FACE_MESH_POINTS);
        for (int k = 0; k < KEYER_FACE_MESH_POINTS; k++)
            for (int c = 0; c < 3; c++)
                add_double(&lm, f->landmarks[k][c]);
        gst_structure_take_value(s, "landmarks", &lm);
    }
    return s;
}

static GstStructure *pose_structure(const keyer_pose_result *r)
{
    GstStructure *s =
        gst_structure_new("keyer-pose", "presence", G_TYPE_DOUBLE, (double)r->presence, NULL);
    GValue lm = G_VALUE_INIT;
    gst_value_array_init(&lm, 4 * KEYER_POSE_LANDMARKS);
    for (int k = 0; k < KEYER_POSE_LANDMARKS; k++) {
        const keyer_pose_landmark *l = &r->landmarks[k];
        add_double(&lm, l->x);
        add_double(&lm, l->y);
        add_double(&lm, l->z);
        add_double(&lm, l->visibility);
    }
    gst_structure_take_value(s, "landmarks", &lm);
    return s;
}

/* A region of interest meta for the box [x0, x1) x [y0, y1) (frame pixels), rounded outwards
 * and clipped to the frame, holding @p params (taken). */
static void add_roi(GstBuffer *buf, const char *type, int id, double x0, double y0, double x1,
                    double y1, int width, int height, GstStructure *params)
{
    double l = floor(x0), t = floor(y0), r = ceil(x1), b = ceil(y1);
    l = l < 0 ? 0 : l > width ? width : l;
    r = r < l ? l : r > width ? width : r;
    t = t < 0 ? 0 : t > height ? height : t;
    b = b < t ? t : b > height ? height : b;
    GstVideoRegionOfInterestMeta *m = gst_buffer_add_video_region_of_interest_meta(
        buf, type, (guint)l, (guint)t, (guint)(r - l), (guint)(b - t));
    m->id = id;
    gst_video_region_of_interest_meta_add_param(m, params);
}

static GstFlowReturn gst_keyer_detect_transform_ip(GstBaseTransform *trans, GstBuffer *buf)
{
    GstKeyerDetect *self = (GstKeyerDetect *)trans;
    GstVideoFilter *filter = GST_VIDEO_FILTER(trans);
    keyer_error err = {0};
    GST_OBJECT_LOCK(self);
    gboolean post = self->post_messages;
    GST_OBJECT_UNLOCK(self);
    GstVideoFrame vf;
    GstMapFlags flags = self->drawing ? GST_MAP_READWRITE : GST_MAP_READ;
    gboolean mapped;
#ifdef KEYER_GST_CUDA
    /* CUDA memory of keyer's context is read (and drawn on) where it is by the session; of
     * another context, or for the CPU analysers, through host memory */
    gboolean on_device =
        self->session && self->cuda_in && kg_cuda_buffer_is_ours(self->cuda, buf);
    if (self->session && self->cuda_in && !on_device && !self->warned_foreign) {
        GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                            ("keyerdetect: CUDA memory of another CUDA context is read through "
                             "host memory (one download per frame)"),
                            ("the upstream element did not take keyer's context"));
        self->warned_foreign = TRUE;
    }
    if (on_device)
        mapped = kg_cuda_frame_map(&vf, &filter->in_info, buf, flags);
    else
#endif
        mapped = gst_video_frame_map(&vf, &filter->in_info, buf, flags);
    if (!mapped) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyerdetect: cannot map the frame"), (NULL));
        return GST_FLOW_ERROR;
    }
    keyer_frame view;
    kg_frame_view(&vf, &view);
#ifdef KEYER_GST_CUDA
    if (on_device) { /* device pointers of keyer's device */
        view.memory = KEYER_MEMORY_CUDA;
        view.device = kg_cuda_device(self->cuda);
    }
#endif
    const keyer_frame *analysed = &view;
    if (self->swap) {
        kg_swap_rb(&view, self->staging);
        analysed = self->staging;
    }
    const keyer_face *faces = NULL;
    int nf = 0;
    keyer_pose_result pr;
    memset(&pr, 0, sizeof(pr));
    keyer_status st = KEYER_OK;
    if (self->session) {
        st = kg_detect_session_run(self->session, analysed, &faces, &nf, &err);
        if (!st && self->frames == 0) {
            GST_INFO_OBJECT(self, "faces detected by a keyer session on %s",
                            kg_detect_session_device(self->session));
            GST_OBJECT_LOCK(self);
            g_strlcpy(self->detector_device, kg_detect_session_device(self->session),
                      sizeof(self->detector_device));
            GST_OBJECT_UNLOCK(self);
        }
    } else if (self->faces) {
        st = keyer_faces_run(self->faces, analysed, &faces, &nf, &err);
    }
    if (!st && self->pose_an)
        st = keyer_pose_run(self->pose_an, analysed, &pr, &err);
    if (!st && self->overlay) {
        keyer_overlay_clear(self->overlay);
        if (self->faces)
            st = keyer_faces_draw(self->overlay, faces, nf, &self->fdp, &err);
        if (!st && pr.found)
            st = keyer_pose_draw(self->overlay, &pr, &self->pdp, &err);
        if (!st) /* a BGRx frame is drawn as RGBA with red and blue swapped in the colours */
            st = keyer_overlay_render(self->overlay, &view, &err);
#ifdef KEYER_GST_CUDA
        char why[256];
        if (!st && on_device && !kg_cuda_sync(view.device, why, sizeof(why)))
            st = keyer_error_set(&err, KEYER_STATUS_DEVICE, "drawing: %s", why);
#endif
    }
    gst_video_frame_unmap(&vf);
    if (st) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyerdetect: %s", err.message),
                          ("%s", keyer_status_name(st)));
        return GST_FLOW_ERROR;
    }

    int w = view.width, h = view.height;
    GValue face_list = G_VALUE_INIT;
    if (post)
        gst_value_array_init(&face_list, (guint)nf);
    for (int i = 0; i < nf; i++) {
        const keyer_face *f = &faces[i];
        GstStructure *s = face_structure(f);
        if (post) {
            GValue v = G_VALUE_INIT;
            g_value_init(&v, GST_TYPE_STRUCTURE);
            g_value_set_boxed(&v, s);
            gst_value_array_append_and_take_value(&face_list, &v);
        }
        add_roi(buf, "face", (int)f->id, f->box.xmin, f->box.ymin, f->box.xmax, f->box.ymax, w, h,
                s);
    }
    GstStructure *pose_s = NULL;
    if (pr.found) {
        double x0 = w, y0 = h, x1 = 0, y1 = 0;
        for (int k = 0; k < KEYER_POSE_LANDMARKS; k++) {
            const keyer_pose_landmark *l = &pr.landmarks[k];
            if (l->visibility < 0.5f)
                continue;
            x0 = fmin(x0, l->x);
            y0 = fmin(y0, l->y);
            x1 = fmax(x1, l->x);
            y1 = fmax(y1, l->y);
        }
        pose_s = pose_structure(&pr);
        add_roi(buf, "pose", 0, x0, y0, x1 < x0 ? x0 : x1, y1 < y0 ? y0 : y1, w, h,
                post ? gst_structure_copy(pose_s) : pose_s);
    }
    if (post) {
        GstClockTime pts = GST_BUFFER_PTS(buf);
        GstStructure *m = gst_structure_new(
            "keyerdetect", "frame", G_TYPE_UINT64, self->frames, "timestamp", G_TYPE_UINT64, pts,
            "running-time", G_TYPE_UINT64,
            gst_segment_to_running_time(&trans->segment, GST_FORMAT_TIME, pts), "width",
            G_TYPE_INT, w, "height", G_TYPE_INT, h, NULL);
        gst_structure_take_value(m, "faces", &face_list);
        if (pose_s) {
            GValue v = G_VALUE_INIT;
            g_value_init(&v, GST_TYPE_STRUCTURE);
            g_value_take_boxed(&v, pose_s);
            gst_structure_take_value(m, "pose", &v);
        }
        gst_element_post_message(GST_ELEMENT(self),
                                 gst_message_new_element(GST_OBJECT(self), m));
    }
    self->frames++;
    return GST_FLOW_OK;
}

/* ---- CUDA context --------------------------------------------------------------------------- */

#ifdef KEYER_GST_CUDA
/* keyer's CUDA context, given to the neighbours that ask (decoders, uploaders), so that their
 * CUDA memory is memory the session reads on the device */
static gboolean gst_keyer_detect_query(GstBaseTransform *trans, GstPadDirection direction,
                                       GstQuery *query)
{
    GstKeyerDetect *self = (GstKeyerDetect *)trans;
    if (GST_QUERY_TYPE(query) == GST_QUERY_CONTEXT &&
        kg_cuda_handle_context_query(self->cuda, GST_ELEMENT(self), query))
        return TRUE;
    return GST_BASE_TRANSFORM_CLASS(gst_keyer_detect_parent_class)->query(trans, direction, query);
}

/* CUDA memory in (and out: in place): upstream is offered a CUDA pool of keyer's context, so
 * that its buffers are read by the session on the device */
static gboolean gst_keyer_detect_propose_allocation(GstBaseTransform *trans,
                                                    GstQuery *decide_query, GstQuery *query)
{
    GstKeyerDetect *self = (GstKeyerDetect *)trans;
    return kg_cuda_propose_or_parent(
        self->cuda, GST_BASE_TRANSFORM_CLASS(gst_keyer_detect_parent_class), trans,
        decide_query, query);
}

/* The context exists from READY on (the neighbours opening in NULL->READY ask for it), when
 * the device is not the CPU and a GPU is there */
static GstStateChangeReturn gst_keyer_detect_change_state(GstElement *element,
                                                          GstStateChange transition)
{
    GstKeyerDetect *self = (GstKeyerDetect *)element;
    if (transition == GST_STATE_CHANGE_NULL_TO_READY && !self->cuda) {
        GST_OBJECT_LOCK(self);
        gint device = self->device, ordinal = self->cuda_device;
        GST_OBJECT_UNLOCK(self);
        self->cuda = kg_cuda_open(element, keyer_detect_debug, device == KEYER_DEVICE_CPU,
                                  ordinal);
    }
    GstStateChangeReturn ret =
        GST_ELEMENT_CLASS(gst_keyer_detect_parent_class)->change_state(element, transition);
    if (transition == GST_STATE_CHANGE_READY_TO_NULL)
        kg_cuda_destroy(&self->cuda);
    return ret;
}

static void gst_keyer_detect_finalize(GObject *object)
{
    GstKeyerDetect *self = (GstKeyerDetect *)object;
    kg_cuda_destroy(&self->cuda);
    G_OBJECT_CLASS(gst_keyer_detect_parent_class)->finalize(object);
}
#endif

/* ---- GObject -------------------------------------------------------------------------------- */

static void gst_keyer_detect_init(GstKeyerDetect *self)
{
    self->faces_on = TRUE;
    self->pose = POSE_NONE;
    self->max_faces = 16;
    self->post_messages = TRUE;
    self->device = KEYER_DEVICE_AUTO;
    self->logger = (keyer_logger){KEYER_LOG_DEBUG, log_to_gst, self};
    gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}

static void gst_keyer_detect_class_init(GstKeyerDetectClass *klass)
{
    GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
    GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
    GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
    GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS(klass);

    gobject_class->set_property = gst_keyer_detect_set_property;
    gobject_class->get_property = gst_keyer_detect_get_property;
#ifdef KEYER_GST_CUDA
    gobject_class->finalize = gst_keyer_detect_finalize;
    element_class->change_state = GST_DEBUG_FUNCPTR(gst_keyer_detect_change_state);
    trans_class->query = GST_DEBUG_FUNCPTR(gst_keyer_detect_query);
    trans_class->propose_allocation = GST_DEBUG_FUNCPTR(gst_keyer_detect_propose_allocation);
#endif

    GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
    g_object_class_install_property(
        gobject_class, PROP_FACES,
        g_param_spec_boolean("faces", "faces", "detect and track faces", TRUE, flags));
    g_object_class_install_property(
        gobject_class, PROP_FULL_RANGE,
        g_param_spec_boolean("full-range", "full range",
                             "the full-range face detector (faces up to about 5 m)", FALSE,
                             flags));
    g_object_class_install_property(
        gobject_class, PROP_LANDMARKS,
        g_param_spec_boolean("landmarks", "landmarks",
                             "the 468-point face mesh, tracked from frame to frame", FALSE,
                             flags));
    g_object_class_install_property(
        gobject_class, PROP_POSE,
        g_param_spec_enum("pose", "pose", "body pose model, or none", pose_type(), POSE_NONE,
                          flags));
    g_object_class_install_property(
        gobject_class, PROP_MAX_FACES,
        g_param_spec_int("max-faces", "max faces", "faces followed at most", 1, KEYER_FACES_MAX,
                         16, flags));
    g_object_class_install_property(
        gobject_class, PROP_MIN_SCORE,
        g_param_spec_float("min-score", "min score",
                           "face detection threshold; 0: the model's (0.5 short, 0.6 full)", 0,
                           1, 0, flags));
    g_object_class_install_property(
        gobject_class, PROP_THREADS,
        g_param_spec_int("threads", "threads", "CPU threads of the analysers; 0: one per core",
                         0, 256, 0, flags));
    g_object_class_install_property(
        gobject_class, PROP_DRAW,
        g_param_spec_boolean("draw", "draw",
                             "draw boxes, ids and the skeleton on the frames (not on RGB)",
                             FALSE, flags));
    g_object_class_install_property(
        gobject_class, PROP_POST_MESSAGES,
        g_param_spec_boolean("post-messages", "post messages",
                             "post each frame's detections as an element message", TRUE,
                             G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                 GST_PARAM_MUTABLE_PLAYING));
    g_object_class_install_property(
        gobject_class, PROP_DEVICE,
        g_param_spec_enum("device", "device",
                          "where faces are detected without pose: on a GPU by a keyer session "
                          "(from CUDA memory where it is), or on the CPU; pose is on the CPU",
                          device_type(), KEYER_DEVICE_AUTO, flags));
    g_object_class_install_property(
        gobject_class, PROP_DETECTOR_DEVICE,
        g_param_spec_string("detector-device", "detector device",
                            "where the faces are detected: \"cpu\" (the CPU analysers, or a "
                            "session on the CPU) or the session's GPU (\"cuda:0\"), known from "
                            "the first frame on; \"\" before the first start",
                            "", G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
    g_object_class_install_property(
        gobject_class, PROP_CUDA_DEVICE,
        g_param_spec_int("cuda-device", "CUDA device", "the CUDA device's ordinal", 0, 63, 0,
                         flags));

    gst_element_class_set_static_metadata(
        element_class, "keyer detection", "Filter/Analyzer/Video",
        "Face and body pose detection with tracking: region-of-interest metas, overlay, "
        "bus messages",
        "keyer");
    gst_element_class_add_static_pad_template(element_class, &sink_template);
    gst_element_class_add_static_pad_template(element_class, &src_template);

    trans_class->start = GST_DEBUG_FUNCPTR(gst_keyer_detect_start);
    trans_class->stop = GST_DEBUG_FUNCPTR(gst_keyer_detect_stop);
    trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_keyer_detect_transform_caps);
    trans_class->transform = NULL; /* in place only (GstVideoFilter sets both) */
    trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_keyer_detect_transform_ip);
    trans_class->transform_ip_on_passthrough = FALSE;
    filter_class->set_info = GST_DEBUG_FUNCPTR(gst_keyer_detect_set_info);

    GST_DEBUG_CATEGORY_INIT(keyer_detect_debug, "keyerdetect", 0, "keyer face and pose detection");
}

gboolean gst_keyer_detect_register(GstPlugin *plugin)
{
    return gst_element_register(plugin, "keyerdetect", GST_RANK_NONE, GST_TYPE_KEYER_DETECT);
}
