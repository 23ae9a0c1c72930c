/*
 * The pose stage on the GPU (label gpu; exits 77 without a device), against the CPU's
 * keyer_pose_run() on the same frames (pose-lite; the heatmap refinement then runs on the
 * device, vision/pose_heatmap.h):
 *  - the session's pose stage on CUDA in float32 on two 1080p clips decoded on the CPU and
 *    pushed (the same pixels on both sides): at most 2 of the 48 frames where only one side
 *    finds a person (the presence is a threshold at 0.5), every landmark of the others within
 *    5e-3 of the crop side (the runtime's float32 tolerance is 1e-3 relative on outputs of up
 *    to 256 tensor pixels, 1e-3 of the crop side per coordinate; the heatmap refinement
 *    truncates to a cell and tracking feeds each frame's landmarks into the next crop, so a
 *    few times that), and the skeleton drawn on the device;
 *  - the same forced to float16: the same bound on counts, every landmark within 2e-2 of the
 *    crop side (the same pose), and over the 1 px at 1080p only when the registry
 *    keeps the model in float32 under AUTO;
 *  - the clips read as files by the CUDA session (NVDEC frames, crops made from them on the
 *    device: the tool's path), against keyer_pose_run() on the CPU decoder's frames (the
 *    decoders may differ by a code value): within 1e-2 of the crop side, at most 2 frames
 *    with another outcome;
 *  - KEYER_FAIL_CUDA_AT_FRAME=6 on that file run, keyed (blur: the pose stage hands its
 *    items to the keying model): the GPU fails mid-run (in the detector, the first model
 *    stage), the pose stage receives the later frames on the CPU and runs them there; every
 *    frame is written and reported with its pose, within the same bounds.
 * The distances are printed. Written to be clean under compute-sanitizer --tool memcheck.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "keyer/registry.h"
#include "core/device.h"
#include "kt_mesh_session.h"
#include "kt_pose_session.h"
#include "testutil.h"

enum { CLIPS = 2, FRAMES = 24 };

static char clips[CLIPS][4096];
static char dir[3000];
static keyer_frame *frames[CLIPS * FRAMES];
static ps_rec *ref;

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "pipeline_pose_gpu");
    const int sizes[CLIPS][2] = {{1920, 1080}, {1920, 1080}};
    ms_make_clips(dir, CLIPS, sizes, FRAMES, clips);
    return 0;
}

static void reference(void)
{
    if (ref)
        return;
    ref = calloc(1, sizeof(*ref));
    assert_non_null(ref);
    for (int i = 0; i < CLIPS; i++) {
        ms_decode(clips[i], FRAMES, KEYER_PIXEL_FORMAT_NV12, frames + i * FRAMES);
        ps_reference(frames + i * FRAMES, FRAMES, i, KEYER_POSE_MODEL_LITE, ref);
    }
}

static void test_pose_stage_f32(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    ps_run_pushed(frames, CLIPS, FRAMES, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F32,
                  KEYER_POSE_MODEL_LITE, got);
    int with = 0;
    double rel = 0, worst = ps_compare(ref, got, 2, &rel, &with);
    printf("  pose stage cuda f32 (pushed NV12 1080p): a pose in %d frames, max landmark "
           "distance %.4f px, %.2e of the crop side\n", with, worst, rel);
    assert_true(with >= 8);
    assert_true(rel <= 5e-3);
    free(got);
}

static void test_pose_stage_f16(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    ps_run_pushed(frames, CLIPS, FRAMES, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F16,
                  KEYER_POSE_MODEL_LITE, got);
    int with = 0;
    double rel = 0, worst = ps_compare(ref, got, 2, &rel, &with);
    printf("  pose stage cuda f16 (pushed NV12 1080p): a pose in %d frames, max landmark "
           "distance %.4f px, %.2e of the crop side\n", with, worst, rel);
    assert_true(with >= 8);
    /* Half precision's bound (issue 31) is 1 px at 1080p: a model over it must never run in
     * half by default. The forced f16 run must still be the same pose (2e-2 of the crop side:
     * a broken half path moves landmarks by tens of pixels). */
    if (worst > 1.0) {
        const keyer_model_entry *e = keyer_registry_find("pose-lite");
        assert_non_null(e);
        assert_int_equal(keyer_registry_precision(e, KEYER_PRECISION_AUTO, 1), KEYER_PRECISION_F32);
    }
    assert_true(rel <= 2e-2);
    free(got);
}

static void test_pose_stage_nvdec_files(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    const char *inputs[CLIPS] = {clips[0], clips[1]};
    ps_run_files(inputs, CLIPS, FRAMES, KEYER_DEVICE_CUDA, KEYER_PRECISION_AUTO, 0, 0,
                 KEYER_POSE_MODEL_LITE, got);
    int with = 0;
    double rel = 0, worst = ps_compare(ref, got, 2, &rel, &with);
    printf("  pose stage cuda auto (files, NVDEC 1080p): a pose in %d frames, max landmark "
           "distance %.4f px, %.2e of the crop side\n", with, worst, rel);
    assert_true(with >= 8);
    assert_true(rel <= 1e-2);
    free(got);
}

static void test_pose_stage_gpu_failure(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    const char *inputs[CLIPS] = {clips[0], clips[1]};
    setenv("KEYER_FAIL_CUDA_AT_FRAME", "6", 1);
    ps_run_files(inputs, CLIPS, FRAMES, KEYER_DEVICE_CUDA, KEYER_PRECISION_AUTO, 0, 1,
                 KEYER_POSE_MODEL_LITE, got);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    int with = 0;
    double rel = 0, worst = ps_compare(ref, got, 2, &rel, &with);
    printf("  pose stage, GPU failure at frame 6 (files, keyed): a pose in %d frames, max "
           "landmark distance %.4f px, %.2e of the crop side\n", with, worst, rel);
    assert_true(with >= 8);
    assert_true(rel <= 1e-2);
    free(got);
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < CLIPS * FRAMES; i++)
        keyer_frame_destroy(&frames[i]);
    free(ref);
    ref = NULL;
    return 0;
}

int main(void)
{
    const kr_device_fns *dev = kr_device_cuda();
    if (!dev || dev->count() == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pose_stage_f32),
        cmocka_unit_test(test_pose_stage_f16),
        cmocka_unit_test(test_pose_stage_nvdec_files),
        cmocka_unit_test(test_pose_stage_gpu_failure),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
