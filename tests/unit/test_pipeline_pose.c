/*
 * The session's pose stage on the CPU (keyer_session_params::pose): batched across three
 * streams, it gives every frame the pose of keyer_pose_run() on the same frames: the same
 * frames with a person, the same seeding, landmarks equal (the same crops, the same CPU
 * runtime of batch 1 and the same steps: 1e-4 px allows for nothing but the float printing of
 * a rounding; a batch of 4 runs another runtime, whose sums may round differently: 1e-3 px).
 * The clips are decoded to NV12 and pushed, then read as files by the session's decoder and
 * keyed (the pose stage then hands its items to the keying model); 3 streams of 12 frames
 * (kept short: the test runs under the sanitizers in CI). Bad parameters are
 * refused. The GPU side is test_pipeline_pose_gpu.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/pipeline.h"
#include "kt_mesh_session.h"
#include "kt_pose_session.h"
#include "kt_session.h"
#include "testutil.h"

enum { STREAMS = 3, FRAMES = 12 };

static keyer_status no_pose(void *opaque, int sid, int64_t index, const keyer_frame *frame,
                            const keyer_detection *dets, int count,
                            const keyer_pose_result *pose, keyer_overlay *ov, keyer_error *err)
{
    (void)opaque, (void)sid, (void)index, (void)frame, (void)dets, (void)count, (void)pose;
    (void)ov, (void)err;
    return KEYER_OK;
}

static void test_session_pose_cpu(void **state)
{
    (void)state;
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_pose");
    const int sizes[STREAMS][2] = {{480, 360}, {640, 360}, {360, 480}};
    char paths[STREAMS][4096];
    ms_make_clips(dir, STREAMS, sizes, FRAMES, paths);
    ps_rec *ref = calloc(1, sizeof(*ref)), *got = calloc(1, sizeof(*got));
    keyer_frame *frames[STREAMS * FRAMES];
    assert_non_null(ref);
    assert_non_null(got);
    for (int i = 0; i < STREAMS; i++) {
        ms_decode(paths[i], FRAMES, KEYER_PIXEL_FORMAT_NV12, frames + i * FRAMES);
        ps_reference(frames + i * FRAMES, FRAMES, i, KEYER_POSE_MODEL_LITE, ref);
    }
    ps_run_pushed(frames, STREAMS, FRAMES, dir, KEYER_DEVICE_CPU, KEYER_PRECISION_AUTO,
                  KEYER_POSE_MODEL_LITE, got);
    int with = 0;
    double worst = ps_compare(ref, got, 0, NULL, &with);
    print_message("  pose stage (cpu, pushed): a pose in %d frames, max landmark distance "
                  "%.6f px\n", with, worst);
    assert_true(with >= 6);
    assert_true(with < STREAMS * FRAMES); /* the person leaves the view: loss and seeding */
    assert_true(worst <= 1e-4);
    /* the GPU test's per-crop check (the CPU model on each recorded crop) gives the stage's
     * landmarks exactly on the CPU */
    double max_rel = 1, p99 = 1, max_px = 1;
    int crops = ps_same_crops(got, frames, FRAMES, KEYER_POSE_MODEL_LITE, &max_rel, &p99, &max_px);
    print_message("  pose stage (cpu, pushed) on the same %d crops: max %.6f px\n", crops, max_px);
    assert_int_equal(crops, with);
    assert_true(max_px <= 1e-4);
    /* files, keyed, batch 4: decoded by the session's reader; the reference on the same
     * decoder's frames; the pose stage hands its items to the keying model */
    const char *inputs[STREAMS] = {paths[0], paths[1], paths[2]};
    ps_run_files(inputs, STREAMS, FRAMES, KEYER_DEVICE_CPU, KEYER_PRECISION_AUTO, 4, 1,
                 KEYER_POSE_MODEL_LITE, got);
    worst = ps_compare(ref, got, 0, NULL, &with);
    print_message("  pose stage (cpu, files, batch 4, keyed): max landmark distance %.6f px\n",
                  worst);
    assert_true(worst <= 1e-3);
    for (int i = 0; i < STREAMS * FRAMES; i++)
        keyer_frame_destroy(&frames[i]);
    free(ref);
    free(got);
}

/* Bad pose parameters are refused, each naming pose. */
static void test_session_pose_errors(void **state)
{
    (void)state;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.passthrough = 1;
    sp.pose = 1;
    keyer_session *s = NULL;
    keyer_error err = {0};
    /* no detect, no pose_fn */
    kt_session_refused(&sp, &s, "pose");
    sp.pose_fn = no_pose;
    kt_session_refused(&sp, &s, NULL);
    /* the short-range detector does not seed */
    sp.detect = KEYER_SESSION_DETECT_FACES;
    kt_session_refused(&sp, &s, NULL);
    sp.detect = KEYER_SESSION_DETECT_FACES_FULL;
    sp.pose_model = (keyer_pose_model)3;
    kt_session_refused(&sp, &s, NULL);
    sp.pose_model = KEYER_POSE_MODEL_FULL;
    sp.pose = 2;
    kt_session_refused(&sp, &s, NULL);
    sp.pose = 1;
    /* not with the face mesh */
    sp.mesh = 1;
    sp.faces_fn = (keyer_faces_fn)1; /* never called: create fails first */
    kt_session_refused(&sp, &s, "pose");
    assert_null(s);
    /* and the right ones are taken */
    sp.mesh = 0;
    sp.faces_fn = NULL;
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    keyer_session_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_pose_errors),
        cmocka_unit_test(test_session_pose_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
