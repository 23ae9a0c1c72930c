/* Face and body analytics for the keyer tool (see analytics.h). */
#define _POSIX_C_SOURCE 200809L
#include "analytics.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GRAPH_POINTS (KEYER_FACES_MAX + KEYER_POSE_LANDMARKS)
#define POSE_ID_BASE 0x10000u
#define MAX_IDS 4096

typedef struct kc_stream {
    const char *input;
    keyer_faces *faces;
    keyer_pose *pose;
    keyer_knn_graph *graph;
    keyer_overlay *ov;
    keyer_faces_draw_params fdp;
    keyer_pose_draw_params pdp;
    int drawing_set;           /* fdp/pdp sized for the frame height */
    keyer_pose_result pr;
    int64_t frames, pose_frames;
    double busy_ms;
    uint32_t ids[MAX_IDS];     /* distinct confirmed face ids */
    int n_ids;
    char *line;                /* export line being built */
    size_t line_len, line_cap;
    int line_failed;           /* out of memory while building */
} kc_stream;

struct kc_analytics {
    kc_analytics_opts o;
    int n;
    kc_stream *st;
    FILE *exp;
    pthread_mutex_t lock;
    int export_failed;
};

/* ---- options ---------------------------------------------------------------------------- */

static int word_is(const char *w, size_t n, const char *s)
{
    return strlen(s) == n && !strncmp(w, s, n);
}

int kc_parse_detect(const char *text, kc_analytics_opts *o)
{
    o->faces = o->pose = 0;
    for (const char *w = text; *w;) {
        size_t n = strcspn(w, ",");
        if (word_is(w, n, "faces") || word_is(w, n, "faces:short")) {
            o->faces = 1;
        } else if (word_is(w, n, "faces:full")) {
            o->faces = 1;
            o->full_range = 1;
        } else if (word_is(w, n, "pose") || word_is(w, n, "pose:lite")) {
            o->pose = 1;
            o->pose_model = KEYER_POSE_MODEL_LITE;
        } else if (word_is(w, n, "pose:full")) {
            o->pose = 1;
            o->pose_model = KEYER_POSE_MODEL_FULL;
        } else if (word_is(w, n, "pose:heavy")) {
            o->pose = 1;
            o->pose_model = KEYER_POSE_MODEL_HEAVY;
        } else {
            fprintf(stderr, "keyer: --detect: unknown '%.*s' (faces, faces:full, pose, "
                            "pose:full, pose:heavy; comma-separated)\n", (int)n, w);
            return 2;
        }
        w += n;
        if (*w == ',')
            w++;
    }
    if (!o->faces && !o->pose) {
        fprintf(stderr, "keyer: --detect needs faces and/or pose\n");
        return 2;
    }
    return 0;
}

int kc_parse_draw(const char *text, kc_analytics_opts *o)
{
    o->draw = 0;
    for (const char *w = text; *w;) {
        size_t n = strcspn(w, ",");
        if (word_is(w, n, "boxes"))
            o->draw |= KC_DRAW_BOXES;
        else if (word_is(w, n, "ids"))
            o->draw |= KC_DRAW_IDS;
        else if (word_is(w, n, "keypoints"))
            o->draw |= KC_DRAW_KEYPOINTS;
        else if (word_is(w, n, "mesh"))
            o->draw |= KC_DRAW_MESH;
        else if (word_is(w, n, "skeleton"))
            o->draw |= KC_DRAW_SKELETON;
        else if (word_is(w, n, "all"))
            o->draw |= KC_DRAW_BOXES | KC_DRAW_IDS | KC_DRAW_KEYPOINTS | KC_DRAW_MESH |
                       KC_DRAW_SKELETON;
        else if (word_is(w, n, "none"))
            o->draw = 0;
        else if (word_is(w, n, "graph") || (n > 6 && !strncmp(w, "graph:", 6))) {
            o->draw |= KC_DRAW_GRAPH;
            o->knn = 5;
            if (n > 6) {
                const char *v = w + 6;
                if (!strncmp(v, "k=", 2))
                    v += 2;
                char k[16] = "";
                size_t len = (size_t)(w + n - v);
                if (len < sizeof(k))
                    memcpy(k, v, len);
                if (len >= sizeof(k) || keyer_parse_int(NULL, k, 1, 16, &o->knn, NULL)) {
                    fprintf(stderr, "keyer: --draw graph:k=K takes K in 1..16, not '%.*s'\n",
                            (int)n, w);
                    return 2;
                }
            }
        } else {
            fprintf(stderr, "keyer: --draw: unknown '%.*s' (boxes, ids, keypoints, mesh, "
                            "skeleton, graph[:k=K], all, none)\n", (int)n, w);
            return 2;
        }
        w += n;
        if (*w == ',')
            w++;
    }
    return 0;
}

/* ---- set-up ----------------------------------------------------------------------------- */

static void stream_free(kc_stream *s)
{
    keyer_faces_destroy(&s->faces);
    keyer_pose_destroy(&s->pose);
    keyer_knn_graph_destroy(&s->graph);
    keyer_overlay_destroy(&s->ov);
    free(s->line);
}

keyer_status kc_analytics_create(const kc_analytics_opts *o, int n, const char *const *inputs,
                                 kc_analytics **out, keyer_error *err)
{
    *out = NULL;
    kc_analytics *a = calloc(1, sizeof(*a));
    if (!a || !(a->st = calloc((size_t)n, sizeof(kc_stream)))) {
        free(a);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "analytics: out of memory");
    }
    a->o = *o;
    a->n = n;
    pthread_mutex_init(&a->lock, NULL);
    keyer_status st = KEYER_OK;
    for (int i = 0; i < n && !st; i++) {
        kc_stream *s = &a->st[i];
        s->input = inputs[i];
        if (o->faces && !o->session_mesh) {
            keyer_faces_params fp = keyer_faces_params_defaults();
            fp.range = o->full_range ? KEYER_FACE_RANGE_FULL : KEYER_FACE_RANGE_SHORT;
            fp.landmarks = (o->draw & KC_DRAW_MESH) != 0;
            fp.detector = !o->session_detect;
            fp.max_faces = KC_MESH_MAX_FACES;
            fp.detect_interval = fp.landmarks ? KC_MESH_DETECT_INTERVAL : 0;
            fp.backend = o->backend;
            fp.threads = o->threads;
            st = keyer_faces_create(&fp, &s->faces, err);
        }
        if (!st && o->pose && !o->session_pose) {
            keyer_pose_params pp = keyer_pose_params_defaults();
            pp.model = o->pose_model;
            pp.backend = o->backend;
            pp.threads = o->threads;
            pp.segmentation = 0;
            st = keyer_pose_create(&pp, &s->pose, err);
        }
        if (!st && (o->draw & KC_DRAW_GRAPH)) {
            keyer_knn_params kp = keyer_knn_params_defaults();
            kp.k = o->knn;
            kp.max_degree = o->knn + 1;
            st = keyer_knn_graph_create(&kp, GRAPH_POINTS, &s->graph, err);
        }
        if (!st && o->draw && !o->session_detect && !o->session_pose)
            st = keyer_overlay_create(1 << 16, &s->ov, err);
    }
    if (!st && o->export_path) {
        a->exp = !strcmp(o->export_path, "-") ? stdout : fopen(o->export_path, "w");
        if (!a->exp)
            st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot create the export file: %s",
                                 o->export_path, strerror(errno));
    }
    if (st) {
        kc_analytics_destroy(&a);
        return st;
    }
    *out = a;
    return KEYER_OK;
}

int kc_analytics_destroy(kc_analytics **pa)
{
    if (!pa || !*pa)
        return 0;
    kc_analytics *a = *pa;
    int rc = 0;
    if (a->exp) {
        int bad = a->export_failed || ferror(a->exp);
        if (a->exp == stdout ? fflush(a->exp) != 0 : fclose(a->exp) != 0)
            bad = 1;
        if (bad) {
            fprintf(stderr, "keyer: %s: the export could not be written completely\n",
                    a->o.export_path);
            rc = -1;
        }
    }
    for (int i = 0; i < a->n; i++)
        stream_free(&a->st[i]);
    pthread_mutex_destroy(&a->lock);
    free(a->st);
    free(a);
    *pa = NULL;
    return rc;
}

/* ---- per frame -------------------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Appends to the stream's export line (grown when needed, then reused). */
static void put(kc_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(kc_stream *s, const char *fmt, ...)
{
    if (s->line_failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->line_cap - s->line_len;
        int k = vsnprintf(s->line ? s->line + s->line_len : NULL, s->line ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            s->line_failed = 1;
            return;
        }
        if (s->line && (size_t)k < room) {
            s->line_len += (size_t)k;
            return;
        }
        size_t cap = s->line_cap ? s->line_cap : 4096;
        while (cap - s->line_len <= (size_t)k)
            cap *= 2;
        char *l = realloc(s->line, cap);
        if (!l) {
            s->line_failed = 1;
            return;
        }
        s->line = l;
        s->line_cap = cap;
    }
}

static void put_string(kc_stream *s, const char *v)
{
    put(s, "\"");
    for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(s, "\\%c", *c);
        else if (*c < 0x20)
            put(s, "\\u%04x", *c);
        else
            put(s, "%c", *c);
    }
    put(s, "\"");
}

static void export_frame(kc_analytics *a, kc_stream *s, int stream_id, int64_t index,
                         const keyer_frame *f, const keyer_face *faces, int nf)
{
    s->line_len = 0;
    put(s, "{\"stream\":%d,\"input\":", stream_id);
    put_string(s, s->input);
    put(s, ",\"frame\":%lld", (long long)index);
    if (f->pts != INT64_MIN && f->time_base.num > 0 && f->time_base.den > 0)
        put(s, ",\"time\":%.6f", (double)f->pts * f->time_base.num / f->time_base.den);
    put(s, ",\"width\":%d,\"height\":%d", f->width, f->height);
    if (a->o.faces) {
        put(s, ",\"faces\":[");
        for (int i = 0; i < nf; i++) {
            const keyer_face *fc = &faces[i];
            const keyer_detection *b = &fc->box;
            put(s, "%s{\"id\":%u,\"score\":%.4f,\"detected\":%d,\"box\":[%.2f,%.2f,%.2f,%.2f]",
                i ? "," : "", fc->id, b->score, fc->detected, b->xmin, b->ymin, b->xmax,
                b->ymax);
            put(s, ",\"keypoints\":[");
            for (int k = 0; k < b->num_keypoints; k++)
                put(s, "%s[%.2f,%.2f]", k ? "," : "", b->keypoints[k][0], b->keypoints[k][1]);
            put(s, "]");
            if (fc->has_landmarks) {
                put(s, ",\"presence\":%.4f,\"landmarks\":[", fc->presence);
                for (int k = 0; k < KEYER_FACE_MESH_POINTS; k++)
                    put(s, "%s[%.2f,%.2f,%.2f]", k ? "," : "", fc->landmarks[k][0],
                        fc->landmarks[k][1], fc->landmarks[k][2]);
                put(s, "]");
            }
            put(s, "}");
        }
        put(s, "]");
    }
    if (a->o.pose) {
        if (!s->pr.found) {
            put(s, ",\"pose\":null");
        } else {
            put(s, ",\"pose\":{\"presence\":%.4f,\"landmarks\":[", s->pr.presence);
            for (int k = 0; k < KEYER_POSE_LANDMARKS; k++) {
                const keyer_pose_landmark *l = &s->pr.landmarks[k];
                put(s, "%s[%.2f,%.2f,%.2f,%.4f]", k ? "," : "", l->x, l->y, l->z, l->visibility);
            }
            put(s, "]}");
        }
    }
    put(s, "}\n");
    pthread_mutex_lock(&a->lock);
    if (s->line_failed || fwrite(s->line, 1, s->line_len, a->exp) != s->line_len)
        a->export_failed = 1;
    pthread_mutex_unlock(&a->lock);
}

/* The kNN graph over face centres and visible body keypoints, drawn as curves. */
static keyer_status draw_graph(kc_stream *s, keyer_overlay *ov, const keyer_face *faces, int nf,
                               keyer_error *err)
{
    uint32_t ids[GRAPH_POINTS];
    float xy[2 * GRAPH_POINTS];
    keyer_knn_edge edges[4 * GRAPH_POINTS];
    int n = 0;
    for (int i = 0; i < nf && n < GRAPH_POINTS; i++) {
        if (!faces[i].id)
            continue;
        ids[n] = faces[i].id;
        xy[2 * n] = (faces[i].box.xmin + faces[i].box.xmax) / 2;
        xy[2 * n + 1] = (faces[i].box.ymin + faces[i].box.ymax) / 2;
        n++;
    }
    for (int i = 0; s->pr.found && i < KEYER_POSE_LANDMARKS && n < GRAPH_POINTS; i++) {
        if (s->pr.landmarks[i].visibility < 0.5f)
            continue;
        ids[n] = POSE_ID_BASE + (uint32_t)i;
        xy[2 * n] = s->pr.landmarks[i].x;
        xy[2 * n + 1] = s->pr.landmarks[i].y;
        n++;
    }
    int ne = 0;
    keyer_status st = keyer_knn_graph_update(s->graph, ids, xy, n, edges,
                                             (int)(sizeof(edges) / sizeof(edges[0])), &ne, err);
    if (st)
        return st;
    keyer_color c = {0.3f, 0.9f, 1.0f, 0.85f};
    float w = s->fdp.line_width * 0.75f;
    for (int e = 0; e < ne; e++) {
        int ia = -1, ib = -1;
        for (int i = 0; i < n; i++) {
            if (ids[i] == edges[e].a)
                ia = i;
            if (ids[i] == edges[e].b)
                ib = i;
        }
        if (ia < 0 || ib < 0)
            continue;
        if ((st = keyer_overlay_add_curve(ov, xy[2 * ia], xy[2 * ia + 1], xy[2 * ib],
                                          xy[2 * ib + 1], 0.15f, w, c, err)))
            return st;
    }
    return keyer_overlay_add_points(ov, xy, n, w * 2, c, err);
}

static void sizes_for(kc_stream *s, const kc_analytics_opts *o, int height)
{
    float unit = (float)(height > 0 ? height : 480) / 480.0f;
    s->fdp = keyer_faces_draw_params_defaults();
    s->fdp.boxes = (o->draw & KC_DRAW_BOXES) != 0;
    s->fdp.ids = (o->draw & KC_DRAW_IDS) != 0;
    s->fdp.keypoints = (o->draw & KC_DRAW_KEYPOINTS) != 0;
    s->fdp.mesh = (o->draw & KC_DRAW_MESH) != 0;
    s->fdp.text_scale = unit * 2 < 1 ? 1 : unit * 2 > 64 ? 64 : unit * 2;
    s->fdp.line_width = unit * 2 < 1 ? 1 : unit * 2;
    s->pdp = keyer_pose_draw_params_defaults();
    s->pdp.skeleton = (o->draw & KC_DRAW_SKELETON) != 0;
    s->pdp.keypoints = (o->draw & (KC_DRAW_SKELETON | KC_DRAW_KEYPOINTS)) != 0;
    s->pdp.line_width = unit * 3 < 1 ? 1 : unit * 3;
    s->pdp.point_radius = unit * 4 < 1.5f ? 1.5f : unit * 4;
    s->drawing_set = 1;
}

static void add_id(kc_stream *s, uint32_t id)
{
    for (int i = 0; i < s->n_ids; i++)
        if (s->ids[i] == id)
            return;
    if (s->n_ids < MAX_IDS)
        s->ids[s->n_ids++] = id;
}

/* Counts ids, adds the drawing to @p ov (when not NULL) and exports the frame. */
static keyer_status finish_frame(kc_analytics *a, kc_stream *s, int stream_id, int64_t index,
                                 const keyer_frame *frame, const keyer_face *faces, int nf,
                                 keyer_overlay *ov, keyer_error *err)
{
    keyer_status st = KEYER_OK;
    for (int i = 0; i < nf; i++)
        if (faces[i].id)
            add_id(s, faces[i].id);
    if (ov && a->o.draw) {
        if ((a->o.faces && (a->o.draw & (KC_DRAW_BOXES | KC_DRAW_IDS | KC_DRAW_KEYPOINTS |
                                       KC_DRAW_MESH)) &&
             (st = keyer_faces_draw(ov, faces, nf, &s->fdp, err))) ||
            (a->o.pose && (a->o.draw & (KC_DRAW_SKELETON | KC_DRAW_KEYPOINTS)) &&
             (st = keyer_pose_draw(ov, &s->pr, &s->pdp, err))) ||
            (s->graph && (st = draw_graph(s, ov, faces, nf, err))))
            return keyer_error_prefix(err, "%s: drawing: ", s->input);
    }
    if (a->exp)
        export_frame(a, s, stream_id, index, frame, faces, nf);
    s->frames++;
    return KEYER_OK;
}

keyer_status kc_analytics_frame(void *opaque, int stream_id, int64_t index,
                                const keyer_frame *input, keyer_frame *output, keyer_error *err)
{
    kc_analytics *a = opaque;
    if (stream_id < 0 || stream_id >= a->n)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "analytics: no stream %d", stream_id);
    kc_stream *s = &a->st[stream_id];
    double t0 = now_ms();
    keyer_status st = KEYER_OK;
    const keyer_face *faces = NULL;
    int nf = 0;
    if (!s->drawing_set)
        sizes_for(s, &a->o, input->height);
    if (s->faces && (st = keyer_faces_run(s->faces, input, &faces, &nf, err)))
        return keyer_error_prefix(err, "%s: face analysis: ", s->input);
    memset(&s->pr, 0, sizeof(s->pr));
    if (s->pose && (st = keyer_pose_run(s->pose, input, &s->pr, err)))
        return keyer_error_prefix(err, "%s: pose: ", s->input);
    s->pose_frames += s->pr.found;
    if (s->ov)
        keyer_overlay_clear(s->ov);
    if ((st = finish_frame(a, s, stream_id, index, input, faces, nf, s->ov, err)))
        return st;
    if (s->ov && (st = keyer_overlay_render(s->ov, output, err)))
        return keyer_error_prefix(err, "%s: drawing: ", s->input);
    s->busy_ms += now_ms() - t0;
    return KEYER_OK;
}

keyer_status kc_analytics_detections(void *opaque, int stream_id, int64_t index,
                                     const keyer_frame *frame, const keyer_detection *dets,
                                     int count, keyer_overlay *overlay, keyer_error *err)
{
    kc_analytics *a = opaque;
    if (stream_id < 0 || stream_id >= a->n)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "analytics: no stream %d", stream_id);
    kc_stream *s = &a->st[stream_id];
    double t0 = now_ms();
    const keyer_face *faces = NULL;
    int nf = 0;
    if (!s->drawing_set)
        sizes_for(s, &a->o, frame->height);
    keyer_status st = keyer_faces_track(s->faces, dets, count, frame->width, frame->height,
                                        &faces, &nf, err);
    if (st)
        return keyer_error_prefix(err, "%s: face tracking: ", s->input);
    if ((st = finish_frame(a, s, stream_id, index, frame, faces, nf, overlay, err)))
        return st;
    s->busy_ms += now_ms() - t0;
    return KEYER_OK;
}

void kc_analytics_summary(const kc_analytics *a, FILE *f)
{
    for (int i = 0; i < a->n; i++) {
        const kc_stream *s = &a->st[i];
        fprintf(f, "  analytics %s: %lld frames", s->input, (long long)s->frames);
        if (a->o.faces)
            fprintf(f, ", %d face id%s", s->n_ids, s->n_ids == 1 ? "" : "s");
        if (a->o.pose)
            fprintf(f, ", a pose in %lld frames", (long long)s->pose_frames);
        fprintf(f, ", %.1f ms per frame\n", s->frames ? s->busy_ms / (double)s->frames : 0.0);
    }
    if (a->o.export_path && strcmp(a->o.export_path, "-"))
        fprintf(f, "  export: %s (one JSON object per frame)\n", a->o.export_path);
}

keyer_status kc_analytics_faces(void *opaque, int stream_id, int64_t index,
                                const keyer_frame *frame, const keyer_face *faces, int count,
                                keyer_overlay *overlay, keyer_error *err)
{
    kc_analytics *a = opaque;
    if (stream_id < 0 || stream_id >= a->n)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "analytics: no stream %d", stream_id);
    kc_stream *s = &a->st[stream_id];
    double t0 = now_ms();
    if (!s->drawing_set)
        sizes_for(s, &a->o, frame->height);
    keyer_status st = finish_frame(a, s, stream_id, index, frame, faces, count, overlay, err);
    if (st)
        return st;
    s->busy_ms += now_ms() - t0;
    return KEYER_OK;
}

keyer_status kc_analytics_pose(void *opaque, int stream_id, int64_t index,
                               const keyer_frame *frame, const keyer_detection *dets, int count,
                               const keyer_pose_result *pose, keyer_overlay *overlay,
                               keyer_error *err)
{
    (void)dets, (void)count;
    kc_analytics *a = opaque;
    if (stream_id < 0 || stream_id >= a->n)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "analytics: no stream %d", stream_id);
    kc_stream *s = &a->st[stream_id];
    double t0 = now_ms();
    if (!s->drawing_set)
        sizes_for(s, &a->o, frame->height);
    s->pr = *pose;
    s->pose_frames += s->pr.found;
    keyer_status st = finish_frame(a, s, stream_id, index, frame, NULL, 0, overlay, err);
    if (st)
        return st;
    s->busy_ms += now_ms() - t0;
    return KEYER_OK;
}

int kc_analytics_session_can_detect(const kc_analytics_opts *o)
{
    return o->faces && !o->pose;
}

int kc_analytics_session_can_pose(const kc_analytics_opts *o)
{
    return o->pose && !o->faces;
}
