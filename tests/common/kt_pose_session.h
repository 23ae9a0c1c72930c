/*
 * The session's pose stage (keyer_session_params::pose), checked against the per-stream
 * tracker, shared by the CPU test (test_pipeline_pose) and the CUDA test
 * (test_pipeline_pose_gpu):
 *  - ps_run_files / ps_run_pushed run a session with detect faces_full + pose on clips and
 *    record what pose_fn receives per stream and frame (in order, every frame once), drawing
 *    the skeleton on the frame's device as the tool does;
 *  - ps_reference runs keyer_pose_run() (CPU, default parameters, no mask) on the same frames;
 *  - ps_compare checks the same frames have a pose and returns the largest distance between
 *    corresponding landmarks (x, y in frame pixels).
 * Clips: the pans over grace_hopper.jpg of kt_mesh_session.h (ms_make_clips): the person is
 * in view for the first frames and gone at the end, so seeding, tracking and loss all happen.
 */
#ifndef KEYER_KT_POSE_SESSION_H
#define KEYER_KT_POSE_SESSION_H

#include "keyer/frame.h"
#include "keyer/pose.h"

#define PS_STREAMS 3
#define PS_FRAMES 24

/** What pose_fn (or the reference) saw. */
typedef struct ps_rec {
    int streams, frames;
    int calls, out_of_order;
    int next[PS_STREAMS];
    int found[PS_STREAMS][PS_FRAMES];
    int seeded[PS_STREAMS][PS_FRAMES];
    float side[PS_STREAMS][PS_FRAMES]; /* the crop's side (frame pixels) */
    keyer_roi roi[PS_STREAMS][PS_FRAMES]; /* the crop the landmarks come from */
    float lm[PS_STREAMS][PS_FRAMES][KEYER_POSE_LANDMARKS][4]; /* x, y, z, visibility */
} ps_rec;

/** Runs a session on @p device (keyer_device_kind) at @p precision (keyer_precision) with
 *  batch @p batch (0: the session's) and landmark model @p model (keyer_pose_model) over the
 *  @p n files, records into @p rec. With @p keying the frames are also keyed (blur): the pose
 *  stage hands its items to the keying model instead of the writers. */
void ps_run_files(const char *const *inputs, int n, int frames, int device, int precision,
                  int batch, int keying, int model, ps_rec *rec);

/** Pushes @p n streams of @p nframes host frames each (frames[i * nframes + k]) into a
 *  session on @p device at @p precision, each stream writing to @p dir/ps_push<i>.mp4;
 *  records. */
void ps_run_pushed(keyer_frame *const *frames, int n, int nframes, const char *dir, int device,
                   int precision, int model, ps_rec *rec);

/** keyer_pose_run() with landmark model @p model on @p nframes host frames as stream @p sid
 *  of @p rec. */
void ps_reference(keyer_frame *const *frames, int nframes, int sid, int model, ps_rec *rec);

/** Compares @p a and @p b frame by frame. Frames where one found a pose and the other did
 *  not are counted (more than @p max_mismatch fails the running test; with 0 the seeding must
 *  be the same too); in the others, returns
 *  the largest distance between corresponding landmarks (x, y in frame pixels) and puts in
 *  *@p worst_rel (when not NULL) the largest of those distances divided by the crop's side;
 *  counts the frames with a pose in both in *@p with_pose. */
double ps_compare(const ps_rec *a, const ps_rec *b, int max_mismatch, double *worst_rel,
                  int *with_pose);

/**
 * The per-crop check of @p got (a GPU run): for every frame where it found a pose, the CPU
 * landmark model (@p model, float32, batch 1) is run on the same frame (@p frames[s * nframes
 * + i], host frames) and the same crop (got->roi) and decoded by the same steps
 * (kr_pose_add_final, heatmap refinement on the CPU); no tracking feeds one frame's
 * differences into the next. Puts the largest distance between corresponding landmarks
 * (x, y) divided by the crop's side in *@p max_rel, the 99th percentile of those in
 * *@p p99_rel, the largest distance in pixels in *@p max_px; returns the crops compared.
 */
int ps_same_crops(const ps_rec *got, keyer_frame *const *frames, int nframes, int model,
                  double *max_rel, double *p99_rel, double *max_px);

#endif
