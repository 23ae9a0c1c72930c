/*
 * The `keyer` element (see keyer_filter.h).
 *
 * State: the settings (params, model, background) are guarded by the object lock and copied
 * into a session when one is created: at start (so bad settings and a missing model fail the
 * state change with the library's message) and again when a stream opens (the first buffer,
 * and the first after a drain or a flush), so the stream runs with the settings of that
 * moment. Everything else belongs to the streaming thread.
 *
 * Frames in flight: `pending` holds, in input order, what each frame sent to the session must
 * get back on output (timestamps, flags, metas, the time it came in); frames carry their
 * sequence number as pts through the session, so the two meet again by number. A frame that
 * the session's pool has no room for makes the element receive one processed frame first and
 * copy it into an output buffer (kept in `ready` until generate_output pushes it), which
 * frees its place in the pool.
 *
 * Latency: the time from a frame's arrival to its push is measured; the latency query adds the
 * largest of the recent ones (before any frame: one frame duration, the real-time budget), and
 * a latency message asks the pipeline to query again when the measured time grows past it.
 */
#include "keyer_filter.h"

#include <gst/base/gstbasetransform.h>
#include <gst/video/gstvideofilter.h>
#include <string.h>

#include "keyer/pipeline.h"
#include "gst_log.h"
#include "option_props.h"
#include "session_group.h"
#include "video_frames.h"
#ifdef KEYER_GST_CUDA
#include "cuda_memory.h"
#endif

GST_DEBUG_CATEGORY_STATIC(keyer_debug);
#define GST_CAT_DEFAULT keyer_debug

/* Output buffers made while sending (the session's pool was full: a processed frame is
 * received and copied out, which hands its memory back). One is enough in practice (a send
 * fails only until one frame leaves); a few more for safety. */
#define READY_MAX 16
/* Frames over which the largest latency is taken. */
#define LATENCY_WINDOW 64

typedef struct pending_frame {
    int64_t seq;
    GstClockTime pts, dts, duration;
    guint64 offset, offset_end;
    guint flags;
    GstBuffer *metas; /* an empty buffer holding the input's metas, or NULL */
    gint64 arrival;   /* monotonic microseconds */
} pending_frame;

typedef struct _GstKeyer {
    GstVideoFilter parent;

    /* settings (object lock) */
    keyer_session_params params;
    gchar *model;
    gchar *background;
    gchar *session_group; /* NULL: a session of its own */
    gchar **owned; /* copies of generated string properties, one slot per property */
    guint64 settings_serial; /* counts property changes */
    keyer_logger logger;

    /* streaming */
    kg_group *group;        /* the shared session's group, or NULL */
    keyer_session *session; /* the element's own, or the group's (borrowed) */
    int stream_id; /* -1: no stream open */
    GstVideoInfo in_info, out_info;
    gboolean swap_in;
    keyer_frame *staging; /* BGRx input as RGBA */
    keyer_frame *host_out; /* BGRx output of a GPU session, on its way down */
    gboolean cuda_in, cuda_out; /* the caps' memory is CUDA memory */
    gboolean warned_foreign;    /* CUDA memory of another context was reported */
#ifdef KEYER_GST_CUDA
    kg_cuda *cuda; /* keyer's CUDA context wrapped for GStreamer (READY and up), or NULL */
    gboolean cuda_tried; /* READY and up: kg_cuda_create() was tried (cuda says how it went) */
#endif
    /* the output buffers (made at caps time): GstVideoFilter runs the element in place, so
     * GstBaseTransform negotiates no pool for it */
    GstBufferPool *out_pool;
    keyer_frame *received; /* the frame being received */
    GstBuffer *ready[READY_MAX];
    int ready_head, ready_count;
    pending_frame *pending; /* ring */
    int pending_cap, pending_head, pending_count;
    int64_t seq;
    guint64 processed, dropped;
    gint64 latency_window_max, latency_window_frames; /* microseconds, frames */
    /* the element's own session has had no stream yet and was made from the settings of
     * this serial (the one made at start serves the first stream when nothing changed) */
    gboolean session_unused;
    guint64 session_serial;
    /* this stream's rate: frames out, the first frame's arrival and the last push (monotonic
     * microseconds), logged at its end (scripts/bench-gst.sh reads it) */
    gint64 stream_frames, stream_first_in, stream_last_out;

    /* latency and QoS (object lock) */
    GstClockTime reported_latency;
    GstClockTime earliest_time;
} GstKeyer;

typedef struct _GstKeyerClass {
    GstVideoFilterClass parent;
    kg_props props;
} GstKeyerClass;

G_DEFINE_TYPE(GstKeyer, gst_keyer, GST_TYPE_VIDEO_FILTER)

enum { PROP_0, PROP_MODEL, PROP_BACKGROUND, PROP_SESSION_GROUP, PROP_SESSION_SHARED_BY,
       PROP_GENERATED };

enum { TARGET_SESSION, TARGET_REFINE, TARGET_COMPOSITE };

/* GStreamer's CUDA memory (cuda_memory.h) */
#define CUDA_FEATURE "memory:CUDAMemory"
#ifdef KEYER_GST_CUDA
#define CUDA_CAPS GST_VIDEO_CAPS_MAKE_WITH_FEATURES(CUDA_FEATURE, KG_CUDA_FORMATS) "; "
#else
#define CUDA_CAPS
#endif

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS(CUDA_CAPS GST_VIDEO_CAPS_MAKE(KG_VIDEO_FORMATS)));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS(CUDA_CAPS GST_VIDEO_CAPS_MAKE("{ NV12, I420, RGBA, BGRx, RGB, GRAY8 }")));

/* ---- settings -------------------------------------------------------------------------- */

static void *target_of(GstKeyer *self, int target)
{
    switch (target) {
    case TARGET_REFINE:
        return &self->params.refine;
    case TARGET_COMPOSITE:
        return &self->params.composite;
    default:
        return &self->params;
    }
}

static void gst_keyer_set_property(GObject *object, guint id, const GValue *value,
                                   GParamSpec *pspec)
{
    GstKeyer *self = (GstKeyer *)object;
    GstKeyerClass *klass = G_TYPE_INSTANCE_GET_CLASS(object, GST_TYPE_KEYER, GstKeyerClass);
    GST_OBJECT_LOCK(self);
    self->settings_serial++;
    switch (id) {
    case PROP_MODEL:
        g_free(self->model);
        self->model = g_value_dup_string(value);
        break;
    case PROP_BACKGROUND:
        g_free(self->background);
        self->background = g_value_dup_string(value);
        break;
    case PROP_SESSION_GROUP:
        g_free(self->session_group);
        self->session_group = g_value_dup_string(value);
        break;
    default: {
        const kg_prop *p = kg_props_find(&klass->props, id);
        if (!p) {
            G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
            break;
        }
        keyer_error err = {0};
        guint slot = (guint)(p - klass->props.props);
        if (!kg_prop_set(p, target_of(self, p->target), value, &self->owned[slot], &err))
            GST_WARNING_OBJECT(self, "property %s: %s", pspec->name, err.message);
        break;
    }
    }
    GST_OBJECT_UNLOCK(self);
}

static void gst_keyer_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    GstKeyer *self = (GstKeyer *)object;
    GstKeyerClass *klass = G_TYPE_INSTANCE_GET_CLASS(object, GST_TYPE_KEYER, GstKeyerClass);
    GST_OBJECT_LOCK(self);
    switch (id) {
    case PROP_MODEL:
        g_value_set_string(value, self->model);
        break;
    case PROP_BACKGROUND:
        g_value_set_string(value, self->background);
        break;
    case PROP_SESSION_GROUP:
        g_value_set_string(value, self->session_group);
        break;
    case PROP_SESSION_SHARED_BY: /* self->group and self->session change under the lock */
        g_value_set_int(value, self->group ? kg_group_members(self->group) : self->session ? 1 : 0);
        break;
    default: {
        const kg_prop *p = kg_props_find(&klass->props, id);
        if (p)
            kg_prop_get(p, target_of(self, p->target), value);
        else
            G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
        break;
    }
    }
    GST_OBJECT_UNLOCK(self);
}

/* keyer's messages into the debug log (warnings and errors also as element warnings are too
 * noisy: the errors reach the bus through the calls' own failures) */
static void log_to_gst(void *opaque, keyer_log_level level, const char *message)
{
    GstKeyer *self = opaque;
    GST_CAT_LEVEL_LOG(keyer_debug, kg_gst_level(level), self, "%s", message);
}

/* ---- the session ------------------------------------------------------------------------ */

/* Creates the session from the settings, or joins the session group. FALSE after posting an
 * error. */
static gboolean session_create(GstKeyer *self)
{
    keyer_error err = {0};
    GST_OBJECT_LOCK(self);
    keyer_session_params sp = self->params;
    gchar *model = g_strdup(self->model), *background = g_strdup(self->background);
    gchar *group = g_strdup(self->session_group);
    guint64 serial = self->settings_serial;
    GST_OBJECT_UNLOCK(self);
    sp.model = model;
    sp.background = background;
    self->logger.level = kg_keyer_level(keyer_debug);
    sp.logger = &self->logger;
    keyer_status st = KEYER_OK;
    keyer_session *session = NULL;
    kg_group *joined = NULL;
    if (group && group[0]) {
        static const char *const skip[] = {"name", "parent", "qos", "session-group",
                                           "session-shared-by", NULL};
        gchar *settings = kg_settings_text(G_OBJECT(self), skip);
        joined = kg_group_join(group, &sp, settings, &err);
        g_free(settings);
        if (joined)
            session = kg_group_session(joined);
        else
            st = err.status ? err.status : KEYER_STATUS_INVALID_ARGUMENT;
    } else {
        st = keyer_session_create(&sp, &session, &err);
    }
    GST_OBJECT_LOCK(self);
    self->group = joined;
    self->session = session;
    GST_OBJECT_UNLOCK(self);
    self->session_unused = session != NULL;
    self->session_serial = serial;
    g_free(model); /* the session copied its strings */
    g_free(background);
    g_free(group);
    if (st) {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("keyer: %s", err.message),
                          ("keyer_session_create failed (%s)", keyer_status_name(st)));
        return FALSE;
    }
    return TRUE;
}

/* Destroys the element's own session (not a group's). */
static void session_destroy_own(GstKeyer *self)
{
    GST_OBJECT_LOCK(self);
    keyer_session *s = self->session;
    self->session = NULL;
    GST_OBJECT_UNLOCK(self);
    keyer_session_destroy(&s);
}

static void pending_clear(GstKeyer *self)
{
    for (int i = 0; i < self->pending_count; i++) {
        pending_frame *p = &self->pending[(self->pending_head + i) % self->pending_cap];
        gst_clear_buffer(&p->metas);
    }
    self->pending_head = self->pending_count = 0;
}

/* Frees the session and whatever was in flight (a flush, stop). A member of a session group
 * keeps the group's session: its stream is closed and what it still holds is received and
 * dropped (the session's stages must not wait on a stream nobody reads). */
static void session_discard(GstKeyer *self)
{
    if (self->group) {
        if (self->stream_id >= 0 && self->received) {
            keyer_error err = {0};
            keyer_status st = kg_group_close_stream(self->group, self->stream_id, &err);
            while (st == KEYER_OK) {
                st = keyer_session_receive_frame(self->session, self->stream_id, self->received,
                                                 -1, &err);
                if (st == KEYER_OK)
                    keyer_frame_unref(self->received);
            }
        }
    } else {
        session_destroy_own(self);
    }
    self->stream_id = -1;
    for (int i = 0; i < self->ready_count; i++)
        gst_buffer_unref(self->ready[(self->ready_head + i) % READY_MAX]);
    self->ready_head = self->ready_count = 0;
    if (self->received)
        keyer_frame_unref(self->received);
    pending_clear(self);
}

static gboolean stream_open(GstKeyer *self)
{
    keyer_error err = {0};
    /* a fresh session from the settings as they are now: the one made at start serves the
     * first stream when no property changed since (start-up costs once), else properties set
     * since then take effect here; a group's session is the group's */
    GST_OBJECT_LOCK(self);
    gboolean reuse = self->session && self->session_unused &&
                     self->session_serial == self->settings_serial;
    GST_OBJECT_UNLOCK(self);
    if (!self->group && !reuse) {
        session_destroy_own(self);
        if (!session_create(self))
            return FALSE;
    }
    self->session_unused = FALSE;
    self->stream_frames = self->stream_first_in = self->stream_last_out = 0;
    gboolean swap;
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = GST_VIDEO_INFO_WIDTH(&self->in_info);
    stp.height = GST_VIDEO_INFO_HEIGHT(&self->in_info);
    stp.format = kg_keyer_format(GST_VIDEO_INFO_FORMAT(&self->in_info), &swap);
    stp.memory = self->cuda_in ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    if (GST_VIDEO_INFO_FPS_N(&self->in_info) > 0 && GST_VIDEO_INFO_FPS_D(&self->in_info) > 0)
        stp.frame_rate = (keyer_rational){GST_VIDEO_INFO_FPS_N(&self->in_info),
                                          GST_VIDEO_INFO_FPS_D(&self->in_info)};
    keyer_status st = self->group ? kg_group_open_stream(self->group, &stp, &self->stream_id,
                                                         &err)
                                  : keyer_session_open_stream(self->session, &stp,
                                                              &self->stream_id, &err);
    if (st) {
        GST_ELEMENT_ERROR(self, LIBRARY, INIT, ("keyer: %s", err.message), (NULL));
        self->stream_id = -1;
        return FALSE;
    }
    return TRUE;
}

/* ---- frames in flight --------------------------------------------------------------------- */

static gboolean pending_push(GstKeyer *self, const pending_frame *p)
{
    if (self->pending_count == self->pending_cap) { /* grows rarely: a deeper pipeline */
        int cap = self->pending_cap ? 2 * self->pending_cap : 64;
        pending_frame *n = g_try_new(pending_frame, cap);
        if (!n)
            return FALSE;
        for (int i = 0; i < self->pending_count; i++)
            n[i] = self->pending[(self->pending_head + i) % self->pending_cap];
        g_free(self->pending);
        self->pending = n;
        self->pending_cap = cap;
        self->pending_head = 0;
    }
    self->pending[(self->pending_head + self->pending_count) % self->pending_cap] = *p;
    self->pending_count++;
    return TRUE;
}

/* Takes the entry of frame @p seq out (entries before it are frames the session did not
 * return: forgotten). FALSE when there is none. */
static gboolean pending_take(GstKeyer *self, int64_t seq, pending_frame *out)
{
    while (self->pending_count > 0) {
        pending_frame *p = &self->pending[self->pending_head];
        self->pending_head = (self->pending_head + 1) % self->pending_cap;
        self->pending_count--;
        if (p->seq == seq) {
            *out = *p;
            return TRUE;
        }
        gst_clear_buffer(&p->metas);
    }
    return FALSE;
}

static void note_latency(GstKeyer *self, gint64 us)
{
    if (us > self->latency_window_max)
        self->latency_window_max = us;
    if (++self->latency_window_frames < LATENCY_WINDOW && self->processed > 8)
        return;
    /* the first frames, then once per window: compare with what was reported */
    GstClockTime measured = (GstClockTime)self->latency_window_max * GST_USECOND;
    gboolean grew = FALSE;
    GST_OBJECT_LOCK(self);
    if (measured > self->reported_latency) {
        self->reported_latency = measured + measured / 4; /* a margin against jitter */
        grew = TRUE;
    }
    GST_OBJECT_UNLOCK(self);
    if (grew) {
        GST_DEBUG_OBJECT(self, "latency grew to %" GST_TIME_FORMAT, GST_TIME_ARGS(measured));
        gst_element_post_message(GST_ELEMENT(self), gst_message_new_latency(GST_OBJECT(self)));
    }
    if (self->latency_window_frames >= LATENCY_WINDOW)
        self->latency_window_max = self->latency_window_frames = 0;
}

/* Makes the output buffer of the processed frame @p kf (unreferenced here). */
static GstFlowReturn make_output(GstKeyer *self, keyer_frame *kf, GstBuffer **out)
{
    pending_frame p;
    if (!pending_take(self, kf->pts, &p)) {
        keyer_frame_unref(kf);
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyer: a frame came back out of order"),
                          ("frame %" G_GINT64_FORMAT " has no pending entry", kf->pts));
        return GST_FLOW_ERROR;
    }
    GstBuffer *buf = NULL;
    GstFlowReturn ret = self->out_pool ? gst_buffer_pool_acquire_buffer(self->out_pool, &buf, NULL)
                                       : GST_FLOW_NOT_NEGOTIATED;
    if (ret != GST_FLOW_OK || !buf) {
        keyer_frame_unref(kf);
        gst_clear_buffer(&p.metas);
        return ret != GST_FLOW_OK ? ret : GST_FLOW_ERROR;
    }
    GstVideoFrame vf;
    char why[256] = "cannot map the output buffer";
    gboolean ok;
#ifdef KEYER_GST_CUDA
    if (self->cuda_out)
        ok = kg_cuda_frame_map(&vf, &self->out_info, buf, GST_MAP_WRITE);
    else
#endif
        ok = gst_video_frame_map(&vf, &self->out_info, buf, GST_MAP_WRITE);
    if (ok) {
        ok = kg_frame_copy_out(kf, &vf, self->cuda_out, self->host_out, why, sizeof(why));
        gst_video_frame_unmap(&vf);
    }
    keyer_frame_unref(kf); /* the session may reuse its memory now */
    if (!ok) {
        gst_buffer_unref(buf);
        gst_clear_buffer(&p.metas);
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyer: cannot write the output frame"),
                          ("%s", why));
        return GST_FLOW_ERROR;
    }
    if (p.metas) {
        gst_buffer_copy_into(buf, p.metas, GST_BUFFER_COPY_META, 0, (gsize)-1);
        gst_buffer_unref(p.metas);
    }
    GST_BUFFER_PTS(buf) = p.pts;
    GST_BUFFER_DTS(buf) = p.dts;
    GST_BUFFER_DURATION(buf) = p.duration;
    GST_BUFFER_OFFSET(buf) = p.offset;
    GST_BUFFER_OFFSET_END(buf) = p.offset_end;
    GST_BUFFER_FLAGS(buf) = p.flags;
    self->processed++;
    self->stream_frames++;
    self->stream_last_out = g_get_monotonic_time();
    note_latency(self, g_get_monotonic_time() - p.arrival);
    *out = buf;
    return GST_FLOW_OK;
}

/* Closes the stream and pushes every frame still in the session (EOS, new caps). */
static GstFlowReturn drain(GstKeyer *self)
{
    if (self->stream_id < 0)
        return GST_FLOW_OK;
    keyer_error err = {0};
    GstFlowReturn ret = GST_FLOW_OK;
    keyer_status st = self->group ? kg_group_close_stream(self->group, self->stream_id, &err)
                                  : keyer_session_close_stream(self->session, self->stream_id,
                                                               &err);
    while (st == KEYER_OK && ret == GST_FLOW_OK) {
        GstBuffer *buf = NULL;
        if (self->ready_count) {
            buf = self->ready[self->ready_head];
            self->ready_head = (self->ready_head + 1) % READY_MAX;
            self->ready_count--;
        } else {
            st = keyer_session_receive_frame(self->session, self->stream_id, self->received, -1,
                                             &err);
            if (st == KEYER_OK)
                ret = make_output(self, self->received, &buf);
        }
        if (buf)
            ret = gst_pad_push(GST_BASE_TRANSFORM_SRC_PAD(self), buf);
    }
    if (st != KEYER_OK && st != KEYER_STATUS_END) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyer: %s", err.message), (NULL));
        ret = GST_FLOW_ERROR;
    }
    if (self->stream_frames > 1 && self->stream_last_out > self->stream_first_in) {
        double secs = (double)(self->stream_last_out - self->stream_first_in) / 1e6;
        GST_INFO_OBJECT(self,
                        "stream rate: %" G_GINT64_FORMAT " frames in %.3f s from the first "
                        "frame in to the last out: %.2f frames/s",
                        self->stream_frames, secs, (double)self->stream_frames / secs);
    }
    session_discard(self); /* the next stream gets a fresh session */
    return ret;
}

/* ---- GstBaseTransform -------------------------------------------------------------------- */

static void out_pool_clear(GstKeyer *self)
{
    if (!self->out_pool)
        return;
    gst_buffer_pool_set_active(self->out_pool, FALSE); /* buffers out are freed on return */
    gst_clear_object(&self->out_pool);
}

static gboolean gst_keyer_start(GstBaseTransform *trans)
{
    GstKeyer *self = (GstKeyer *)trans;
    keyer_error err = {0};
    self->stream_id = -1;
    self->seq = 0;
    self->processed = self->dropped = 0;
    self->latency_window_max = self->latency_window_frames = 0;
    GST_OBJECT_LOCK(self);
    self->reported_latency = GST_CLOCK_TIME_NONE;
    self->earliest_time = GST_CLOCK_TIME_NONE;
    GST_OBJECT_UNLOCK(self);
    if (!self->received && keyer_frame_create(&self->received, &err))
        goto fail;
    if (!self->staging && keyer_frame_create(&self->staging, &err))
        goto fail;
    if (!self->host_out && keyer_frame_create(&self->host_out, &err))
        goto fail;
    return session_create(self);
fail:
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("keyer: %s", err.message), (NULL));
    return FALSE;
}

static gboolean gst_keyer_stop(GstBaseTransform *trans)
{
    GstKeyer *self = (GstKeyer *)trans;
    session_discard(self);
    GST_OBJECT_LOCK(self);
    kg_group *g = self->group;
    self->group = NULL;
    self->session = NULL;
    GST_OBJECT_UNLOCK(self);
    kg_group_leave(&g);
    keyer_frame_destroy(&self->received);
    keyer_frame_destroy(&self->staging);
    keyer_frame_destroy(&self->host_out);
    out_pool_clear(self);
    g_free(self->pending);
    self->pending = NULL;
    self->pending_cap = 0;
    return TRUE;
}

static GstCaps *gst_keyer_transform_caps(GstBaseTransform *trans, GstPadDirection direction,
                                         GstCaps *caps, GstCaps *filter)
{
    GstKeyer *self = (GstKeyer *)trans;
    GST_OBJECT_LOCK(self);
    keyer_composite_mode mode = self->params.composite.mode;
    keyer_device_kind device = self->params.device;
    GST_OBJECT_UNLOCK(self);
    (void)device; /* read with CUDA memory only */
    const char *out_format = NULL; /* NULL: the input's */
    if (mode == KEYER_COMPOSITE_ALPHA || mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        out_format = "RGBA";
    else if (mode == KEYER_COMPOSITE_MASK)
        out_format = "GRAY8";
    GstCaps *res = gst_caps_copy(caps);
    if (out_format) {
        for (guint i = 0; i < gst_caps_get_size(res); i++) {
            GstStructure *s = gst_caps_get_structure(res, i);
            gst_structure_remove_fields(s, "format", "colorimetry", "chroma-site", NULL);
            if (direction == GST_PAD_SINK)
                gst_structure_set(s, "format", G_TYPE_STRING, out_format, NULL);
        }
    }
    /* either memory on the other side when the element has a CUDA context, system memory
     * only when it has none; the memory of this side first (no transfer: the cheapest path),
     * so CUDA memory in gives CUDA memory out where the next element takes it */
    GstCaps *both = gst_caps_new_empty();
    for (guint i = 0; i < gst_caps_get_size(res); i++) {
        gboolean cuda_first = FALSE, with_cuda = FALSE;
#ifdef KEYER_GST_CUDA
        GstCapsFeatures *f = gst_caps_get_features(res, i);
        /* before the context is tried (the NULL state, when pipelines are linked) CUDA memory
         * is offered unless the device is the CPU; then only with a context */
        with_cuda = self->cuda != NULL || (!self->cuda_tried && device != KEYER_DEVICE_CPU);
        cuda_first = with_cuda && f && gst_caps_features_contains(f, KG_CAPS_FEATURE_CUDA);
#endif
        for (int k = 0; k < 2; k++) {
            gboolean cuda = (k == 0) == cuda_first;
            if (cuda && !with_cuda)
                continue;
            GstStructure *c = gst_structure_copy(gst_caps_get_structure(res, i));
            /* no features: system memory */
            gst_caps_append_structure_full(both, c,
                                           cuda ? gst_caps_features_new(CUDA_FEATURE, NULL)
                                                : NULL);
        }
    }
    gst_caps_unref(res);
    res = both; /* not simplified: that would lose the order */
    /* the other pad's template: a mode changing the format accepts any input format */
    GstPad *other = direction == GST_PAD_SINK ? GST_BASE_TRANSFORM_SRC_PAD(trans)
                                              : GST_BASE_TRANSFORM_SINK_PAD(trans);
    GstCaps *templ = gst_pad_get_pad_template_caps(other);
    GstCaps *t = gst_caps_intersect_full(res, templ, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(templ);
    gst_caps_unref(res);
    res = t;
    if (!out_format && direction == GST_PAD_SRC) {
        /* the input's formats only (GRAY8 output needs mask mode) */
        GstCaps *sink_templ = gst_static_pad_template_get_caps(&sink_template);
        t = gst_caps_intersect_full(res, sink_templ, GST_CAPS_INTERSECT_FIRST);
        gst_caps_unref(sink_templ);
        gst_caps_unref(res);
        res = t;
    }
    if (filter) {
        t = gst_caps_intersect_full(filter, res, GST_CAPS_INTERSECT_FIRST);
        gst_caps_unref(res);
        res = t;
    }
    GST_DEBUG_OBJECT(self, "%s caps %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
                     direction == GST_PAD_SINK ? "sink" : "src", (void *)caps, (void *)res);
    return res;
}

/* The output buffers' pool for @p outcaps: CUDA memory of keyer's context for CUDA caps, else a
 * video buffer pool, active; FALSE after posting an error. */
static gboolean out_pool_make(GstKeyer *self, GstCaps *outcaps)
{
    out_pool_clear(self);
    guint size = (guint)GST_VIDEO_INFO_SIZE(&self->out_info);
    GstBufferPool *pool = NULL;
#ifdef KEYER_GST_CUDA
    if (self->cuda_out)
        pool = kg_cuda_pool_new(self->cuda, outcaps, size, 2);
#endif
    if (!self->cuda_out) {
        pool = gst_video_buffer_pool_new();
        GstStructure *config = gst_buffer_pool_get_config(pool);
        gst_buffer_pool_config_set_params(config, outcaps, size, 2, 0);
        gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
        if (!gst_buffer_pool_set_config(pool, config))
            gst_clear_object(&pool);
    }
    if (!pool || !gst_buffer_pool_set_active(pool, TRUE)) {
        gst_clear_object(&pool);
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("keyer: cannot make the output buffer pool"),
                          ("caps %" GST_PTR_FORMAT, (void *)outcaps));
        return FALSE;
    }
    self->out_pool = pool;
    return TRUE;
}

static gboolean gst_keyer_set_info(GstVideoFilter *filter, GstCaps *incaps, GstVideoInfo *in_info,
                                   GstCaps *outcaps, GstVideoInfo *out_info)
{
    GstKeyer *self = (GstKeyer *)filter;
    gboolean swap;
    if (kg_keyer_format(GST_VIDEO_INFO_FORMAT(in_info), &swap) == KEYER_PIXEL_FORMAT_NONE)
        return FALSE;
    self->in_info = *in_info;
    self->out_info = *out_info;
    self->swap_in = swap;
    self->cuda_in = self->cuda_out = FALSE;
#ifdef KEYER_GST_CUDA
    self->cuda_in = kg_caps_are_cuda(incaps) && self->cuda;
    self->cuda_out = kg_caps_are_cuda(outcaps) && self->cuda;
    if ((kg_caps_are_cuda(incaps) || kg_caps_are_cuda(outcaps)) && !self->cuda)
        return FALSE;
#endif
    if (swap) {
        keyer_error err = {0};
        if (keyer_frame_alloc(self->staging, KEYER_PIXEL_FORMAT_RGBA, GST_VIDEO_INFO_WIDTH(in_info),
                              GST_VIDEO_INFO_HEIGHT(in_info), NULL, &err)) {
            GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("keyer: %s", err.message), (NULL));
            return FALSE;
        }
    }
    if (!out_pool_make(self, outcaps))
        return FALSE;
    GST_OBJECT_LOCK(self);
    if (!GST_CLOCK_TIME_IS_VALID(self->reported_latency) && GST_VIDEO_INFO_FPS_N(in_info) > 0)
        self->reported_latency = gst_util_uint64_scale_int(
            GST_SECOND, GST_VIDEO_INFO_FPS_D(in_info), GST_VIDEO_INFO_FPS_N(in_info));
    GST_OBJECT_UNLOCK(self);
    return TRUE;
}

static gboolean gst_keyer_sink_event(GstBaseTransform *trans, GstEvent *event)
{
    GstKeyer *self = (GstKeyer *)trans;
    switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_EOS:
    case GST_EVENT_CAPS:
        if (drain(self) == GST_FLOW_ERROR) {
            gst_event_unref(event);
            return FALSE;
        }
        break;
    case GST_EVENT_FLUSH_STOP:
        session_discard(self);
        GST_OBJECT_LOCK(self);
        self->earliest_time = GST_CLOCK_TIME_NONE;
        GST_OBJECT_UNLOCK(self);
        break;
    default:
        break;
    }
    return GST_BASE_TRANSFORM_CLASS(gst_keyer_parent_class)->sink_event(trans, event);
}

static gboolean gst_keyer_src_event(GstBaseTransform *trans, GstEvent *event)
{
    GstKeyer *self = (GstKeyer *)trans;
    if (GST_EVENT_TYPE(event) == GST_EVENT_QOS) {
        GstQOSType type;
        gdouble proportion;
        GstClockTimeDiff diff;
        GstClockTime timestamp;
        gst_event_parse_qos(event, &type, &proportion, &diff, &timestamp);
        GST_OBJECT_LOCK(self);
        if (GST_CLOCK_TIME_IS_VALID(timestamp))
            self->earliest_time = diff > 0 ? timestamp + (GstClockTime)diff : timestamp;
        GST_OBJECT_UNLOCK(self);
    }
    return GST_BASE_TRANSFORM_CLASS(gst_keyer_parent_class)->src_event(trans, event);
}

static gboolean gst_keyer_query(GstBaseTransform *trans, GstPadDirection direction,
                                GstQuery *query)
{
    GstKeyer *self = (GstKeyer *)trans;
#ifdef KEYER_GST_CUDA
    if (GST_QUERY_TYPE(query) == GST_QUERY_CONTEXT &&
        kg_cuda_handle_context_query(self->cuda, GST_ELEMENT(self), query))
        return TRUE;
#endif
    gboolean ok = GST_BASE_TRANSFORM_CLASS(gst_keyer_parent_class)->query(trans, direction, query);
    if (ok && direction == GST_PAD_SRC && GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
        gboolean live;
        GstClockTime min, max;
        gst_query_parse_latency(query, &live, &min, &max);
        GST_OBJECT_LOCK(self);
        GstClockTime ours = self->reported_latency;
        GST_OBJECT_UNLOCK(self);
        if (GST_CLOCK_TIME_IS_VALID(ours)) {
            min += ours;
            if (GST_CLOCK_TIME_IS_VALID(max))
                max += ours;
        }
        GST_DEBUG_OBJECT(self, "latency: ours %" GST_TIME_FORMAT ", total min %" GST_TIME_FORMAT,
                         GST_TIME_ARGS(ours), GST_TIME_ARGS(min));
        gst_query_set_latency(query, live, min, max);
    }
    return ok;
}

/* Whether QoS says @p buf is too late to process (and posts the QoS message). */
static gboolean too_late(GstKeyer *self, GstBuffer *buf)
{
    GstBaseTransform *trans = GST_BASE_TRANSFORM(self);
    if (!gst_base_transform_is_qos_enabled(trans) || !GST_BUFFER_PTS_IS_VALID(buf))
        return FALSE;
    GstClockTime rt = gst_segment_to_running_time(&trans->segment, GST_FORMAT_TIME,
                                                  GST_BUFFER_PTS(buf));
    GST_OBJECT_LOCK(self);
    GstClockTime earliest = self->earliest_time;
    GST_OBJECT_UNLOCK(self);
    if (!GST_CLOCK_TIME_IS_VALID(rt) || !GST_CLOCK_TIME_IS_VALID(earliest) || rt > earliest)
        return FALSE;
    self->dropped++;
    GstClockTime stream_time =
        gst_segment_to_stream_time(&trans->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buf));
    GstMessage *m = gst_message_new_qos(GST_OBJECT(self), TRUE, rt, stream_time,
                                        GST_BUFFER_PTS(buf), GST_BUFFER_DURATION(buf));
    gst_message_set_qos_values(m, (gint64)(earliest - rt), 1.0, 1000000);
    gst_message_set_qos_stats(m, GST_FORMAT_BUFFERS, self->processed, self->dropped);
    gst_element_post_message(GST_ELEMENT(self), m);
    GST_DEBUG_OBJECT(self, "late frame dropped (running time %" GST_TIME_FORMAT ")",
                     GST_TIME_ARGS(rt));
    return TRUE;
}

/* Whether @p buf has metas its output carries: any but the video meta, which describes the
 * input's memory (the output buffer, from the element's pool, has its own). */
static gboolean has_meta(GstBuffer *buf)
{
    gpointer state = NULL;
    GstMeta *m;
    while ((m = gst_buffer_iterate_meta(buf, &state)))
        if (m->info->api != GST_VIDEO_META_API_TYPE)
            return TRUE;
    return FALSE;
}

/* Removes the video metas of @p buf. */
static void drop_video_metas(GstBuffer *buf)
{
    gpointer state = NULL;
    GstMeta *m;
    while ((m = gst_buffer_iterate_meta_filtered(buf, &state, GST_VIDEO_META_API_TYPE))) {
        gst_buffer_remove_meta(buf, m);
        state = NULL; /* the iteration starts again after a removal */
    }
}

static GstFlowReturn gst_keyer_submit_input_buffer(GstBaseTransform *trans, gboolean discont,
                                                   GstBuffer *buf)
{
    GstKeyer *self = (GstKeyer *)trans;
    keyer_error err = {0};
    GstFlowReturn ret = GST_FLOW_OK;
    if (too_late(self, buf)) {
        gst_buffer_unref(buf);
        return GST_FLOW_OK;
    }
    if (self->stream_id < 0 && !stream_open(self)) {
        gst_buffer_unref(buf);
        return GST_FLOW_ERROR;
    }
    GstVideoFrame vf;
    gboolean mapped;
#ifdef KEYER_GST_CUDA
    /* CUDA memory of keyer's context is read where it is; of another context (an element
     * that made its own), through host memory (GstCudaMemory downloads it when mapped) */
    gboolean on_device = self->cuda_in && kg_cuda_buffer_is_ours(self->cuda, buf);
    if (self->cuda_in && !on_device && !self->warned_foreign) {
        GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                            ("keyer: CUDA memory of another CUDA context is read through host "
                             "memory (one download per frame)"),
                            ("the upstream element did not take keyer's context"));
        self->warned_foreign = TRUE;
    }
    if (on_device)
        mapped = kg_cuda_frame_map(&vf, &self->in_info, buf, GST_MAP_READ);
    else
#endif
        mapped = gst_video_frame_map(&vf, &self->in_info, buf, GST_MAP_READ);
    if (!mapped) {
        gst_buffer_unref(buf);
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyer: cannot map the input frame"), (NULL));
        return GST_FLOW_ERROR;
    }
    keyer_frame view;
    kg_frame_view(&vf, &view);
#ifdef KEYER_GST_CUDA
    if (on_device) { /* device pointers of keyer's device: copied by the session */
        view.memory = KEYER_MEMORY_CUDA;
        view.device = kg_cuda_device(self->cuda);
    }
#endif
    if (self->swap_in) {
        kg_swap_rb(&view, self->staging);
        view = *self->staging;
        memset(view.buf, 0, sizeof(view.buf)); /* sent without buffers: copied */
    }
    view.pts = self->seq;
    if (!self->stream_first_in)
        self->stream_first_in = g_get_monotonic_time();
    pending_frame p = {self->seq,
                       GST_BUFFER_PTS(buf),
                       GST_BUFFER_DTS(buf),
                       GST_BUFFER_DURATION(buf),
                       GST_BUFFER_OFFSET(buf),
                       GST_BUFFER_OFFSET_END(buf),
                       GST_BUFFER_FLAGS(buf),
                       NULL,
                       g_get_monotonic_time()};
    if (has_meta(buf)) {
        p.metas = gst_buffer_new();
        gst_buffer_copy_into(p.metas, buf, GST_BUFFER_COPY_META, 0, (gsize)-1);
        drop_video_metas(p.metas);
    }
    keyer_status st;
    for (;;) {
        st = keyer_session_send_frame(self->session, self->stream_id, &view, &err);
        if (st != KEYER_STATUS_AGAIN || self->ready_count == READY_MAX)
            break;
        /* the session's pool is full: take a processed frame out first */
        st = keyer_session_receive_frame(self->session, self->stream_id, self->received, -1,
                                         &err);
        if (st)
            break;
        GstBuffer *done = NULL;
        ret = make_output(self, self->received, &done);
        if (ret != GST_FLOW_OK)
            break;
        self->ready[(self->ready_head + self->ready_count) % READY_MAX] = done;
        self->ready_count++;
    }
    gst_video_frame_unmap(&vf);
    gst_buffer_unref(buf);
    if (ret != GST_FLOW_OK) { /* making an output buffer failed (posted) or flushing */
        gst_clear_buffer(&p.metas);
        return ret;
    }
    if (st == KEYER_OK && !pending_push(self, &p)) {
        st = keyer_error_set(&err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
        gst_clear_buffer(&p.metas);
    } else if (st) {
        gst_clear_buffer(&p.metas);
    }
    if (st) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyer: %s", err.message[0] ? err.message :
                                                 "the session's frame pool stays full"), (NULL));
        ret = GST_FLOW_ERROR;
    } else {
        self->seq++;
    }
    return ret;
}

static GstFlowReturn gst_keyer_generate_output(GstBaseTransform *trans, GstBuffer **out)
{
    GstKeyer *self = (GstKeyer *)trans;
    *out = NULL;
    if (self->ready_count) {
        *out = self->ready[self->ready_head];
        self->ready_head = (self->ready_head + 1) % READY_MAX;
        self->ready_count--;
        return GST_FLOW_OK;
    }
    if (self->stream_id < 0 || self->pending_count <= 0)
        return GST_FLOW_OK;
    GST_OBJECT_LOCK(self);
    gboolean wait = self->params.mode == KEYER_PIPELINE_LATENCY;
    GST_OBJECT_UNLOCK(self);
    keyer_error err = {0};
    keyer_frame *kf = self->received;
    keyer_status st =
        keyer_session_receive_frame(self->session, self->stream_id, kf, wait ? -1 : 0, &err);
    if (st == KEYER_STATUS_AGAIN)
        return GST_FLOW_OK;
    if (st) {
        GST_ELEMENT_ERROR(self, STREAM, FAILED, ("keyer: %s", err.message), (NULL));
        return GST_FLOW_ERROR;
    }
    return make_output(self, kf, out);
}

#ifdef KEYER_GST_CUDA
/* CUDA memory in: upstream is offered a CUDA pool of keyer's context */
static gboolean gst_keyer_propose_allocation(GstBaseTransform *trans, GstQuery *decide_query,
                                             GstQuery *query)
{
    GstKeyer *self = (GstKeyer *)trans;
    return kg_cuda_propose_or_parent(self->cuda, GST_BASE_TRANSFORM_CLASS(gst_keyer_parent_class),
                                     trans, decide_query, query);
}

/* keyer's CUDA context exists from READY on, so that the neighbours opening in NULL->READY
 * (decoders, uploaders, encoders) find it through the context query */
static GstStateChangeReturn gst_keyer_change_state(GstElement *element, GstStateChange transition)
{
    GstKeyer *self = (GstKeyer *)element;
    if (transition == GST_STATE_CHANGE_NULL_TO_READY && !self->cuda) {
        GST_OBJECT_LOCK(self);
        keyer_device_kind device = self->params.device;
        int ordinal = self->params.cuda_device;
        GST_OBJECT_UNLOCK(self);
        self->cuda = kg_cuda_open(element, keyer_debug, device == KEYER_DEVICE_CPU, ordinal);
        self->cuda_tried = TRUE;
    }
    GstStateChangeReturn ret =
        GST_ELEMENT_CLASS(gst_keyer_parent_class)->change_state(element, transition);
    if (transition == GST_STATE_CHANGE_READY_TO_NULL) {
        kg_cuda_destroy(&self->cuda);
        self->cuda_tried = FALSE;
    }
    return ret;
}
#endif

/* ---- GObject ------------------------------------------------------------------------------ */

static void gst_keyer_finalize(GObject *object)
{
    GstKeyer *self = (GstKeyer *)object;
    GstKeyerClass *klass = G_TYPE_INSTANCE_GET_CLASS(object, GST_TYPE_KEYER, GstKeyerClass);
    session_discard(self);
    kg_group_leave(&self->group);
    self->session = NULL;
    keyer_frame_destroy(&self->received);
    keyer_frame_destroy(&self->staging);
    keyer_frame_destroy(&self->host_out);
    out_pool_clear(self);
#ifdef KEYER_GST_CUDA
    kg_cuda_destroy(&self->cuda);
#endif
    g_free(self->pending);
    g_free(self->model);
    g_free(self->background);
    g_free(self->session_group);
    for (guint i = 0; i < klass->props.count; i++)
        g_free(self->owned[i]);
    g_free(self->owned);
    G_OBJECT_CLASS(gst_keyer_parent_class)->finalize(object);
}

static void gst_keyer_init(GstKeyer *self)
{
    GstKeyerClass *klass = G_TYPE_INSTANCE_GET_CLASS(self, GST_TYPE_KEYER, GstKeyerClass);
    self->params = keyer_session_params_defaults();
    self->owned = g_new0(gchar *, klass->props.count ? klass->props.count : 1);
    self->logger = (keyer_logger){KEYER_LOG_DEBUG, log_to_gst, self};
    self->stream_id = -1;
    self->reported_latency = GST_CLOCK_TIME_NONE;
    self->earliest_time = GST_CLOCK_TIME_NONE;
    gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), TRUE);
}

/* Session options an element with one pushed stream has no use for: max_streams (one
 * stream), live (drops by the session: QoS drops late frames here), realtime (files only),
 * trace_events and progress_interval_ms (no trace file, no progress callback), cuda_devices
 * and split_gpus (several GPUs: streams placed over them, a file split over them). */
static const char *const session_skip[] = {"max_streams", "live", "realtime", "trace_events",
                                           "progress_interval_ms", "cuda_devices", "split_gpus",
                                           NULL};
/* Set by the session from its own: the stream count and the stage threads. */
static const char *const effects_skip[] = {"max_streams", "threads", NULL};
/* The compositing mode is the element's effect (the session has a "mode" of its own). */
static const char *const composite_rename[] = {"mode", "effect", NULL};

static void gst_keyer_class_init(GstKeyerClass *klass)
{
    GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
    GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
    GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
    GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS(klass);

    gobject_class->set_property = gst_keyer_set_property;
    gobject_class->get_property = gst_keyer_get_property;
    gobject_class->finalize = gst_keyer_finalize;

    GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
    g_object_class_install_property(
        gobject_class, PROP_MODEL,
        g_param_spec_string("model", "model",
                            "segmentation model: a registry name (selfie, selfie-landscape, "
                            "pose-lite, ...) or a .tflite path; unset: chosen by aspect ratio",
                            NULL, flags));
    g_object_class_install_property(
        gobject_class, PROP_BACKGROUND,
        g_param_spec_string("background", "background",
                            "picture or video replacing the background with effect=image",
                            NULL, flags));
    g_object_class_install_property(
        gobject_class, PROP_SESSION_GROUP,
        g_param_spec_string("session-group", "session group",
                            "name of a session shared with the other keyer elements of this "
                            "process that give the same name: each is one stream of it, their "
                            "frames batched together (all of them need the same other "
                            "properties); unset: a session of its own",
                            NULL, flags));
    g_object_class_install_property(
        gobject_class, PROP_SESSION_SHARED_BY,
        g_param_spec_int("session-shared-by", "session shared by",
                         "elements using this element's session now: 1 for a session of its "
                         "own, the members of its session group, 0 while stopped",
                         0, G_MAXINT, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
    const kg_prop_table tables[] = {
        {keyer_session_options(), TARGET_SESSION, "Session", session_skip, NULL},
        {keyer_refine_options(), TARGET_REFINE, "Refine", effects_skip, NULL},
        {keyer_composite_options(), TARGET_COMPOSITE, "Composite", effects_skip,
         composite_rename},
    };
    kg_props_install(gobject_class, PROP_GENERATED, tables, 3, GST_PARAM_MUTABLE_READY,
                     &klass->props);

    gst_element_class_set_static_metadata(
        element_class, "keyer", "Filter/Effect/Video",
        "Person segmentation: background blurred or replaced, green screen, alpha, matte",
        "keyer");
    gst_element_class_add_static_pad_template(element_class, &sink_template);
    gst_element_class_add_static_pad_template(element_class, &src_template);

    trans_class->start = GST_DEBUG_FUNCPTR(gst_keyer_start);
    trans_class->stop = GST_DEBUG_FUNCPTR(gst_keyer_stop);
    trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_keyer_transform_caps);
    trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_keyer_sink_event);
    trans_class->src_event = GST_DEBUG_FUNCPTR(gst_keyer_src_event);
    trans_class->query = GST_DEBUG_FUNCPTR(gst_keyer_query);
    trans_class->submit_input_buffer = GST_DEBUG_FUNCPTR(gst_keyer_submit_input_buffer);
    trans_class->generate_output = GST_DEBUG_FUNCPTR(gst_keyer_generate_output);
    trans_class->passthrough_on_same_caps = FALSE;
    filter_class->set_info = GST_DEBUG_FUNCPTR(gst_keyer_set_info);
#ifdef KEYER_GST_CUDA
    trans_class->propose_allocation = GST_DEBUG_FUNCPTR(gst_keyer_propose_allocation);
    element_class->change_state = GST_DEBUG_FUNCPTR(gst_keyer_change_state);
#endif

    GST_DEBUG_CATEGORY_INIT(keyer_debug, "keyer", 0, "keyer video filter");
}

gboolean gst_keyer_register(GstPlugin *plugin)
{
    return gst_element_register(plugin, "keyer", GST_RANK_NONE, GST_TYPE_KEYER);
}
