/*
 * Face and body analytics for the keyer tool, built on the public API: per-stream analysers
 * (faces with ids, optional mesh; body pose), the overlays they draw, a kNN graph of the
 * tracked points, and a JSON-lines export. Used by the main job through the session's frame
 * callback (keyer INPUT -o OUTPUT --detect ...) and by `keyer analyze`.
 */
#ifndef KEYER_TOOLS_ANALYTICS_H
#define KEYER_TOOLS_ANALYTICS_H

#include <stdint.h>
#include <stdio.h>

#include "keyer/faces.h"
#include "keyer/overlay.h"
#include "keyer/pipeline.h"
#include "keyer/pose.h"

/* What is drawn (--draw). */
enum {
    KC_DRAW_BOXES = 1,
    KC_DRAW_IDS = 2,
    KC_DRAW_KEYPOINTS = 4,
    KC_DRAW_MESH = 8,
    KC_DRAW_GRAPH = 16,
    KC_DRAW_SKELETON = 32,
};

typedef struct kc_analytics_opts {
    int faces, pose;        /* analysers (--detect faces,pose) */
    int pose_model;         /* keyer_pose_model */
    int full_range;         /* full-range face detector */
    unsigned draw;          /* KC_DRAW_* (0: nothing drawn) */
    int knn;                /* k of the graph (with KC_DRAW_GRAPH) */
    const char *export_path; /* JSON lines, or NULL */
    keyer_backend backend;
    int threads;
    /* faces come from the session's batched detector (keyer_session_params::detect) through
     * kc_analytics_detections; no detector per stream */
    int session_detect;
    /* with session_detect and the mesh drawn: the session's face-mesh stage
     * (keyer_session_params::mesh) tracks the faces and hands them to kc_analytics_faces */
    int session_mesh;
    /* pose without faces, not on --device cpu: the session's detector (full range, for the
     * seeding) and pose stage (keyer_session_params::pose) hand each frame's pose to
     * kc_analytics_pose; no tracker per stream */
    int session_pose;
} kc_analytics_opts;

/* Faces followed per stream and the detection interval of the face mesh (the analyser's and
 * the session's face-mesh stage's). */
#define KC_MESH_MAX_FACES 16
#define KC_MESH_DETECT_INTERVAL 10

typedef struct kc_analytics kc_analytics;

/* Parses --detect (faces, pose, pose:lite|full|heavy, faces:full, comma-separated) into @p o.
 * Returns 0, or 2 after printing why. */
int kc_parse_detect(const char *text, kc_analytics_opts *o);
/* Parses --draw (boxes, ids, keypoints, mesh, skeleton, graph[:k=K], all, none). */
int kc_parse_draw(const char *text, kc_analytics_opts *o);

/* Creates the analysers of @p n streams (@p inputs names them in the export) and opens the
 * export file. Errors: those of keyer_faces_create / keyer_pose_create, IO (export file). */
keyer_status kc_analytics_create(const kc_analytics_opts *o, int n, const char *const *inputs,
                                 kc_analytics **out, keyer_error *err);
/* Analyses @p input, draws on @p output and exports the frame: a keyer_frame_fn
 * (opaque = the kc_analytics). Streams may call it from different threads. */
keyer_status kc_analytics_frame(void *opaque, int stream_id, int64_t index,
                                const keyer_frame *input, keyer_frame *output, keyer_error *err);
/* Tracks the session's detections of a frame, adds the drawing to @p overlay and exports the
 * frame: a keyer_detect_fn (opaque = the kc_analytics; needs session_detect). */
keyer_status kc_analytics_detections(void *opaque, int stream_id, int64_t index,
                                     const keyer_frame *frame, const keyer_detection *dets,
                                     int count, keyer_overlay *overlay, keyer_error *err);
/* Adds the drawing of the session's faces (landmarks, ids) to @p overlay and exports the
 * frame: a keyer_faces_fn (opaque = the kc_analytics; needs session_mesh). */
keyer_status kc_analytics_faces(void *opaque, int stream_id, int64_t index,
                                const keyer_frame *frame, const keyer_face *faces, int count,
                                keyer_overlay *overlay, keyer_error *err);
/* Adds the drawing of the session's pose (skeleton, keypoints) to @p overlay and exports the
 * frame: a keyer_pose_fn (opaque = the kc_analytics; needs session_pose). */
keyer_status kc_analytics_pose(void *opaque, int stream_id, int64_t index,
                               const keyer_frame *frame, const keyer_detection *dets, int count,
                               const keyer_pose_result *pose, keyer_overlay *overlay,
                               keyer_error *err);
/* Whether the options can use the session's detector (and face mesh): faces, no pose. */
int kc_analytics_session_can_detect(const kc_analytics_opts *o);
/* Whether the options can use the session's pose stage: pose without faces. */
int kc_analytics_session_can_pose(const kc_analytics_opts *o);
/* One line per stream: frames, distinct face ids, frames with a pose, ms per frame. */
void kc_analytics_summary(const kc_analytics *a, FILE *f);
/* Closes the export (flushing it) and frees everything; accepts NULL. Returns 0, or -1 when
 * the export could not be written completely (reported on stderr). */
int kc_analytics_destroy(kc_analytics **a);

#endif
