/* Face detection for keyerdetect through a keyer session (see detect_session.h). */
#include "detect_session.h"

#include <stdlib.h>
#include <string.h>

#include "keyer/pipeline.h"

struct kg_detect_session {
    keyer_session *session;
    keyer_faces *tracker; /* without landmarks: ids for the session's detections */
    keyer_frame *received;
    int stream_id;     /* -1: no stream open */
    int width, height; /* of the open stream */
    keyer_pixel_format format;
    keyer_memory_type memory;
    int64_t sent; /* frames sent on the open stream */
    /* what the session reported for the frame being received */
    int64_t reported;  /* its frame index; -1: nothing reported */
    keyer_face *faces; /* landmarks: copies of the mesh stage's faces (max_faces) */
    int max_faces;
    const keyer_face *result;
    int count;
    char device[64];
};

/* keyer_detect_fn: the detections get tracker ids (keyer_faces_track keeps the faces). */
static keyer_status on_detections(void *opaque, int stream_id, int64_t frame_index,
                                  const keyer_frame *frame, const keyer_detection *dets, int count,
                                  keyer_overlay *overlay, keyer_error *err)
{
    (void)stream_id;
    (void)overlay; /* the element draws on its own buffer */
    kg_detect_session *s = opaque;
    keyer_status st = keyer_faces_track(s->tracker, dets, count, frame->width, frame->height,
                                        &s->result, &s->count, err);
    if (st)
        return keyer_error_prefix(err, "face tracking: ");
    s->reported = frame_index;
    return KEYER_OK;
}

/* keyer_faces_fn: the mesh stage's faces, copied (they are valid during the call only). */
static keyer_status on_faces(void *opaque, int stream_id, int64_t frame_index,
                             const keyer_frame *frame, const keyer_face *faces, int count,
                             keyer_overlay *overlay, keyer_error *err)
{
    (void)stream_id;
    (void)frame;
    (void)overlay;
    kg_detect_session *s = opaque;
    if (count < 0 || count > s->max_faces)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%d faces reported, %d expected at most",
                               count, s->max_faces);
    if (count > 0)
        memcpy(s->faces, faces, (size_t)count * sizeof(*faces));
    s->result = s->faces;
    s->count = count;
    s->reported = frame_index;
    return KEYER_OK;
}

keyer_status kg_detect_session_create(const kg_detect_session_params *params,
                                      kg_detect_session **out, keyer_error *err)
{
    if (!params || !out || params->max_faces < 1 || params->max_faces > KEYER_FACES_MAX)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detection session: bad parameters");
    kg_detect_session *s = calloc(1, sizeof(*s));
    if (!s || !(s->faces = calloc((size_t)params->max_faces, sizeof(keyer_face)))) {
        free(s);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    s->stream_id = -1;
    s->max_faces = params->max_faces;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = params->device;
    sp.cuda_device = params->cuda_device;
    sp.mode = KEYER_PIPELINE_LATENCY;
    sp.passthrough = 1;
    sp.max_streams = 1;
    sp.threads = params->threads;
    sp.logger = params->logger;
    sp.detect = params->full_range ? KEYER_SESSION_DETECT_FACES_FULL : KEYER_SESSION_DETECT_FACES;
    sp.detect_min_score = params->min_score;
    keyer_status st = KEYER_OK;
    if (params->landmarks) { /* as keyer's --detect faces with the mesh drawn */
        sp.mesh = 1;
        sp.mesh_max_faces = params->max_faces;
        sp.mesh_detect_interval = 10;
        sp.faces_fn = on_faces;
        sp.faces_opaque = s;
    } else {
        sp.detect_fn = on_detections;
        sp.detect_opaque = s;
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.range = params->full_range ? KEYER_FACE_RANGE_FULL : KEYER_FACE_RANGE_SHORT;
        fp.landmarks = 0;
        fp.detector = 0;
        fp.max_faces = params->max_faces;
        fp.logger = params->logger;
        st = keyer_faces_create(&fp, &s->tracker, err);
    }
    if (!st)
        st = keyer_frame_create(&s->received, err);
    if (!st)
        st = keyer_session_create(&sp, &s->session, err);
    if (st) {
        kg_detect_session_destroy(&s);
        return st;
    }
    *out = s;
    return KEYER_OK;
}

/* Closes the open stream (nothing is in flight between two runs: one END to receive). */
static void stream_close(kg_detect_session *s)
{
    if (s->stream_id < 0)
        return;
    keyer_error e = {0};
    if (keyer_session_close_stream(s->session, s->stream_id, &e) == KEYER_OK)
        while (keyer_session_receive_frame(s->session, s->stream_id, s->received, -1, &e) ==
               KEYER_OK)
            keyer_frame_unref(s->received);
    s->stream_id = -1;
}

void kg_detect_session_destroy(kg_detect_session **sp)
{
    if (!sp || !*sp)
        return;
    kg_detect_session *s = *sp;
    if (s->session)
        stream_close(s);
    keyer_session_destroy(&s->session);
    keyer_faces_destroy(&s->tracker);
    keyer_frame_destroy(&s->received);
    free(s->faces);
    free(s);
    *sp = NULL;
}

keyer_status kg_detect_session_run(kg_detect_session *s, const keyer_frame *frame,
                                   const keyer_face **faces, int *count, keyer_error *err)
{
    *faces = NULL;
    *count = 0;
    keyer_status st = KEYER_OK;
    if (s->stream_id >= 0 && (frame->width != s->width || frame->height != s->height ||
                              frame->format != s->format || frame->memory != s->memory))
        stream_close(s);
    if (s->stream_id < 0) {
        keyer_stream_params stp = keyer_stream_params_defaults();
        stp.width = frame->width;
        stp.height = frame->height;
        stp.format = frame->format;
        stp.memory = frame->memory;
        if ((st = keyer_session_open_stream(s->session, &stp, &s->stream_id, err))) {
            s->stream_id = -1;
            return st;
        }
        s->width = frame->width;
        s->height = frame->height;
        s->format = frame->format;
        s->memory = frame->memory;
        s->sent = 0;
    }
    keyer_frame view = *frame;
    memset(view.buf, 0, sizeof(view.buf)); /* sent without buffers: copied by the session */
    view.pts = s->sent;
    s->reported = -1;
    if ((st = keyer_session_send_frame(s->session, s->stream_id, &view, err)))
        return st;
    int64_t index = s->sent++;
    /* latency mode, one frame in flight: it comes back now, its detections reported */
    if ((st = keyer_session_receive_frame(s->session, s->stream_id, s->received, -1, err)))
        return st;
    keyer_frame_unref(s->received);
    if (!s->device[0]) {
        keyer_session_report r;
        keyer_session_get_report(s->session, &r);
        memcpy(s->device, r.device, sizeof(s->device));
        s->device[sizeof(s->device) - 1] = 0;
    }
    if (s->reported != index)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "the session returned frame %lld without its detections",
                               (long long)index);
    *faces = s->result;
    *count = s->count;
    return KEYER_OK;
}

const char *kg_detect_session_device(kg_detect_session *s) { return s->device; }
