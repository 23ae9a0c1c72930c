/*
 * The person detector of a people keyer (internal, prefix kr_; keyer/people.h): MediaPipe's
 * pose detector run on the whole frame (letterboxed) and, on frames whose short side is at
 * least twice its input, on overlapping square tiles, so that people far from the camera are
 * found too; the detections of all regions are merged best first, a detection of a person
 * already kept (hips within 0.3 body radius; without keypoints boxes of IoU > 0.6) dropped.
 * The caller may give the whole-frame detections itself (the session's batched detector);
 * the tiles are still run here.
 *
 *   kr_people_det d;
 *   if (kr_people_det_open(&d, &params, NULL, &err)) ...;       (closed again on failure too)
 *   per frame: kr_people_det_run(&d, frame, NULL, 0, &n, &err); d.dets[0 .. n)
 *   kr_people_det_close(&d);
 *
 * A value type as kr_vmodel (vmodel.h), embedded in its keyer; its network's tensors, stream
 * and device are d.net's (the keyer's landmark runtimes share that stream). Thread safety:
 * one thread at a time.
 */
#ifndef KEYER_VISION_PEOPLE_DETECT_H
#define KEYER_VISION_PEOPLE_DETECT_H

#include "keyer/detect.h"
#include "keyer/people.h"
#include "vision/vmodel.h"

#define KR_PEOPLE_MAX_DETECTIONS 64 /* kept per frame */
#define KR_PEOPLE_MAX_ALL 256       /* detections of all regions before merging */

typedef struct kr_people_det {
    kr_vmodel net;     /* the detector, batch 1 */
    int boxes, scores; /* its outputs */
    keyer_detector *decoder;
    float min_score;                                /* keyer_people_params' */
    int tiles, tile_size;                           /* keyer_people_params' */
    keyer_detection dets[KR_PEOPLE_MAX_DETECTIONS]; /* the last run's, frame pixels */
    keyer_detection all[KR_PEOPLE_MAX_ALL];         /* its regions' before merging */
    int n_all;
} kr_people_det;

/*
 * Opens the detector @p name (registry name or file; NULL: "pose-detect") on @p p's backend,
 * device, threads and logger, with its min_score, tiles and tile_size (@p p checked by the
 * caller). Errors: those of kr_vmodel_open() and keyer_detector_create(); BAD_DATA when the
 * model is not MediaPipe's pose detector (input size, outputs). On failure the caller still
 * closes it.
 */
keyer_status kr_people_det_open(kr_people_det *d, const keyer_people_params *p, const char *name,
                                keyer_error *err);

/* Releases everything; accepts a zeroed or half-opened struct. */
void kr_people_det_close(kr_people_det *d);

/*
 * The detections of @p frame (checked by the caller; host or CUDA memory as the network
 * reads): the caller's whole-frame detections @p given (frame pixels, those under min_score
 * or not finite dropped), or with @p given NULL the network on the whole frame; then the
 * tiles; merged into d->dets[0 .. *count), best first. Errors: those of the network's run and
 * the decoder.
 */
keyer_status kr_people_det_run(kr_people_det *d, const keyer_frame *frame,
                               const keyer_detection *given, int n_given, int *count,
                               keyer_error *err);

#endif
