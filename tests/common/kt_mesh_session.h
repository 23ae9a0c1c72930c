/*
 * The session's face-mesh stage (keyer_session_params::mesh), checked against the per-frame
 * face analyser, shared by the CPU test (test_pipeline_session) and the CUDA test
 * (test_pipeline_mesh_gpu):
 *  - ms_run_files / ms_run_pushed run a session with detect faces + mesh on clips and record
 *    what faces_fn receives per stream and frame (in order, every frame once);
 *  - ms_reference runs keyer_faces_run() (CPU, same tracking parameters) on the same frames;
 *  - ms_compare checks the same faces per frame (count, ids) and returns the largest distance
 *    between corresponding landmarks (x, y in frame pixels);
 *  - ms_same_crops runs the CPU face mesh (float32) on each crop a run's landmarks came from,
 *    on the same frames, and returns the largest distance to them: tracking feeds each frame's
 *    landmarks into the next crop, so end-to-end trajectories drift apart for differences far
 *    below the runtime's tolerance (a code value of decoding, a batch's kernel schedule),
 *    while the same crop in must give the same landmarks out.
 * Clips: pans over grace_hopper.jpg (keyer_video_write_sample): the face is in view for the
 * first frames and gone at the end, so tracking, loss and detection all happen.
 */
#ifndef KEYER_KT_MESH_SESSION_H
#define KEYER_KT_MESH_SESSION_H

#include "keyer/faces.h"
#include "keyer/frame.h"
#include "keyer/nn.h"

#define MS_STREAMS 3
#define MS_FRAMES 24
#define MS_KEEP 4          /* faces kept per frame (the tracking's max_faces) */
#define MS_INTERVAL 10     /* detect_interval */

/** What faces_fn (or the reference) saw. */
typedef struct ms_rec {
    int streams, frames;
    int calls, out_of_order;
    int next[MS_STREAMS];
    int n[MS_STREAMS][MS_FRAMES];
    uint32_t ids[MS_STREAMS][MS_FRAMES][MS_KEEP];
    float presence[MS_STREAMS][MS_FRAMES][MS_KEEP];
    float side[MS_STREAMS][MS_FRAMES][MS_KEEP]; /* the crop's side (frame pixels) */
    keyer_roi roi[MS_STREAMS][MS_FRAMES][MS_KEEP]; /* the crop the landmarks come from */
    float lm[MS_STREAMS][MS_FRAMES][MS_KEEP][KEYER_FACE_MESH_POINTS][2];
} ms_rec;

/** Writes @p n sample clips of @p frames frames into @p dir ("ms_in<i>.mp4"), the i-th of
 *  sizes[i] (w, h); their paths to @p paths (room for 4096 bytes each). */
void ms_make_clips(const char *dir, int n, const int sizes[][2], int frames,
                   char paths[][4096]);

/** Runs a session on @p device (keyer_device_kind) at @p precision (keyer_precision) with
 *  batch @p batch (0: the session's) over the @p n files, records into @p rec. With
 *  @p keying the frames are also keyed (blur): the face mesh hands its items to the keying
 *  model instead of the writers. */
void ms_run_files(const char *const *inputs, int n, int frames, int device, int precision,
                  int batch, int keying, ms_rec *rec);

/** Pushes @p n streams of @p frames host frames each (frames[i * frames + k]) into a session
 *  on @p device at @p precision, each stream writing to @p dir/ms_push<i>.mp4; records. */
void ms_run_pushed(keyer_frame *const *frames, int n, int nframes, const char *dir, int device,
                   int precision, ms_rec *rec);

/** Decodes the first @p nframes frames of @p input on the CPU into @p out (made here), in
 *  @p format (keyer_pixel_format: NV12, YUV420P, P010, ...). */
void ms_decode(const char *input, int nframes, int format, keyer_frame **out);

/** keyer_faces_run() on @p nframes host frames as stream @p sid of @p rec. */
void ms_reference(keyer_frame *const *frames, int nframes, int sid, ms_rec *rec);

/** Compares the faces of @p a and @p b frame by frame. Frames whose face counts differ are
 *  counted (more than @p max_mismatch fails the running test; with 0 the ids must be equal
 *  too); in the others, returns the largest distance between corresponding landmarks (x, y in
 *  frame pixels) and puts in *@p worst_rel the largest of those distances divided by the
 *  face's crop side; counts the faces compared in *@p faces and the frames with a face in
 *  *@p with_faces. */
double ms_compare(const ms_rec *a, const ms_rec *b, int max_mismatch, double *worst_rel,
                  int *faces, int *with_faces);

/**
 * The per-crop check of @p got (a GPU run): for every face it recorded, the CPU face mesh
 * (float32, batch 1) on the same frame (@p frames[s * nframes + i], host frames) and the same
 * crop (got->roi; prepared as the mesh stage prepares it: stretched, rgb in [0, 1]), its
 * landmarks mapped to frame pixels as keyer_faces_run() maps them; no tracking feeds one
 * frame's differences into the next. Puts the largest distance between corresponding
 * landmarks (x, y) in *@p max_px and that divided by the crop's side in *@p max_rel (the
 * largest such ratio); returns the crops compared.
 */
int ms_same_crops(const ms_rec *got, keyer_frame *const *frames, int nframes, double *max_rel,
                  double *max_px);

#endif
