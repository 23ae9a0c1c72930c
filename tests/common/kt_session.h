/*
 * Session set-ups and drivers the landmark-stage tests share (kt_mesh_session.c,
 * kt_pose_session.c): the common parameters, files run to the end, and pushed streams fed
 * round robin. Every failure fails the running cmocka test with the call's message.
 */
#ifndef KEYER_KT_SESSION_H
#define KEYER_KT_SESSION_H

#include "keyer/frame.h"
#include "keyer/pipeline.h"

/** The shared parameters: @p device (keyer_device_kind), @p precision (keyer_precision),
 *  @p batch (0: the session's), keying with a blurred background (passthrough without
 *  @p keying), logging errors only through *@p lg (the caller's, alive with the session). */
keyer_session_params kt_session_params(int device, int precision, int batch, int keying,
                                       keyer_logger *lg);

/** The session of @p sp. */
keyer_session *kt_session_create(const keyer_session_params *sp);

/** Adds the @p n files @p inputs (no outputs) and runs the session to the end. */
void kt_session_run_files(keyer_session *s, const char *const *inputs, int n);

/** Opens @p n pushed streams (the size and format of frames[i * nframes], 25 frames/s, written
 *  to @p dir/<prefix><i>.mp4 with the ultrafast preset; n <= 16), sends their @p nframes
 *  frames each round robin over the streams as cameras deliver (retrying after AGAIN), and
 *  closes them. */
void kt_session_push_round_robin(keyer_session *s, keyer_frame *const *frames, int n,
                                 int nframes, const char *dir, const char *prefix);

#endif
