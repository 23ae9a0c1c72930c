/*
 * Face detection for the keyerdetect element through a keyer session (keyer/pipeline.h): the
 * session's batched detector (and, with landmarks, its face-mesh stage) run where the session
 * computes, on the GPU when it has one, from the frame where it is (CUDA memory is read on the
 * device), as `keyer --detect faces` does it. One pushed stream in latency mode with no keying
 * (passthrough): each frame is sent, received back at once, and the session's detections or
 * faces, reported while it is received, are the frame's faces, with tracker ids
 * (keyer_faces_track(), or the mesh stage's own tracking with landmarks).
 */
#ifndef KEYER_GST_DETECT_SESSION_H
#define KEYER_GST_DETECT_SESSION_H

#include "keyer/config.h"
#include "keyer/faces.h"
#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/status.h"

/** What to detect and where. Fill every field. */
typedef struct kg_detect_session_params {
    keyer_device_kind device;   /**< the session's device (AUTO, CPU, CUDA; CUDA falls back to
                                     the CPU, logged, when it cannot be used) */
    int cuda_device;            /**< CUDA ordinal */
    int full_range;             /**< 1: BlazeFace full range, 0: short range */
    int landmarks;              /**< 1: the face mesh, faces followed by their landmarks */
    int max_faces;              /**< 1..KEYER_FACES_MAX */
    float min_score;            /**< detection threshold; <= 0: the model's */
    int threads;                /**< the session's CPU threads per stage (0: its default) */
    const keyer_logger *logger; /**< the session's log (NULL: stderr) */
} kg_detect_session_params;

/** A detection session. Opaque. */
typedef struct kg_detect_session kg_detect_session;

/**
 * Creates the session (the models are checked here, loaded when the first frame comes) and,
 * without landmarks, the tracker giving the detections ids. Errors: those of
 * keyer_session_create() and keyer_faces_create() (INVALID_ARGUMENT, IO naming a missing
 * model file, OUT_OF_MEMORY).
 */
keyer_status kg_detect_session_create(const kg_detect_session_params *params,
                                      kg_detect_session **out, keyer_error *err);

/** Closes the stream, stops and frees the session; NULL and *s == NULL accepted; sets NULL. */
void kg_detect_session_destroy(kg_detect_session **s);

/**
 * Detects the faces of @p frame (host memory, or CUDA memory of the session's device; NV12,
 * YUV420P, RGB24 or RGBA; its pixels are copied by the session and not changed). The first
 * frame opens the session's stream (its stages start then), a frame of another size, format
 * or memory closes it and opens another. *@p faces points at *@p count faces (frame pixels,
 * ids as keyer_faces_run() gives them), valid until the next call or destroy.
 * Errors: those of keyer_session_open_stream(), _send_frame() and _receive_frame()
 * (INVALID_ARGUMENT for a frame the session cannot take, DEVICE, ...), INTERNAL when the
 * session returned the frame without its detections.
 */
keyer_status kg_detect_session_run(kg_detect_session *s, const keyer_frame *frame,
                                   const keyer_face **faces, int *count, keyer_error *err);

/**
 * The device the session computes on, as its report names it ("cpu", "cuda:0", ...; "" until
 * the first frame). The string lives as long as @p s.
 */
const char *kg_detect_session_device(kg_detect_session *s);

#endif
