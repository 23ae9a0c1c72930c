/*
 * Session set-ups and drivers the session tests share (the landmark-stage ones through
 * kt_mesh_session.c and kt_pose_session.c): the common parameters, files run to the end,
 * pushed streams fed round robin, session options set by name and refused parameters. Every
 * failure fails the running cmocka test with the call's message.
 */
#ifndef KEYER_KT_SESSION_H
#define KEYER_KT_SESSION_H

#include "keyer/frame.h"
#include "keyer/nn.h"
#include "keyer/pipeline.h"

/** The shared parameters: @p device (keyer_device_kind), @p precision (keyer_precision),
 *  @p batch (0: the session's), keying with a blurred background (passthrough without
 *  @p keying), logging errors only through *@p lg (the caller's, alive with the session). */
keyer_session_params kt_session_params(int device, int precision, int batch, int keying,
                                       keyer_logger *lg);

/** The session of @p sp. */
keyer_session *kt_session_create(const keyer_session_params *sp);

/** Checks that keyer_session_create() refuses @p sp with KEYER_STATUS_INVALID_ARGUMENT and,
 *  when @p word is not NULL, that its error message contains @p word. @p s is the caller's
 *  handle, passed to the call as it is (the caller checks that a refusal leaves it NULL). */
void kt_session_refused(const keyer_session_params *sp, keyer_session **s, const char *word);

/** Sets the session option @p name of *@p p to @p value through keyer_session_options()'
 *  table (keyer_option_set) and returns its status (the error message is dropped). */
keyer_status kt_session_option(keyer_session_params *p, const char *name, const char *value);

/** Adds the @p n files @p inputs (no outputs) and runs the session to the end. */
void kt_session_run_files(keyer_session *s, const char *const *inputs, int n);

/** Opens @p n pushed streams (the size and format of frames[i * nframes], 25 frames/s, written
 *  to @p dir/<prefix><i>.mp4 with the ultrafast preset; n <= 16), sends their @p nframes
 *  frames each round robin over the streams as cameras deliver (retrying after AGAIN), and
 *  closes them. */
void kt_session_push_round_robin(keyer_session *s, keyer_frame *const *frames, int n,
                                 int nframes, const char *dir, const char *prefix);

/** Feeds @p s and runs it to the end: the @p n files @p inputs when @p inputs is not NULL
 *  (kt_session_run_files), else @p n pushed streams of @p nframes frames each
 *  (kt_session_push_round_robin into @p dir with @p prefix). */
void kt_session_feed(keyer_session *s, const char *const *inputs, keyer_frame *const *frames,
                     int n, int nframes, const char *dir, const char *prefix);

/** Ends a landmark-stage run: checks the report of *@p s (run to the end on @p device) has
 *  @p frames written and none lost, @p stages stages, the last named @p stage with all the
 *  frames; on CUDA its device says "cuda", or "GPU failure" while KEYER_FAIL_CUDA_AT_FRAME
 *  forces one. Puts the report in *@p rep, destroys the session (*@p s becomes NULL). */
void kt_session_finish(keyer_session **s, int device, int frames, int stages, const char *stage,
                       keyer_session_report *rep);

/** Folds the distances between the @p n corresponding points of @p a and @p b (x then y at
 *  the start of each point, @p stride floats from one point to the next) into *@p worst (the
 *  largest, in the points' unit) and *@p rel (the largest divided by @p side, taken as 1 when
 *  smaller); a NaN distance counts as infinite. */
void kt_points_distance(const float *a, const float *b, int n, int stride, double side,
                        double *worst, double *rel);

/** The registry's model @p name loaded into *@p m with a CPU runtime (float32, 4 threads) in
 *  *@p rt: the oracle of the per-crop checks. The caller destroys both. */
void kt_cpu_model(const char *name, keyer_model **m, keyer_runtime **rt);

/** After the session is gone: its stage callback was called @p calls times, once per frame
 *  (@p frames), and @p out_of_order of them came out of order (must be 0). */
void kt_session_check_calls(int calls, int out_of_order, int frames);

#endif
