/*
 * The pose stage on the GPU (label gpu; exits 77 without a device), against the CPU
 * (pose-lite; on CUDA the heatmap refinement runs on the device, vision/pose_heatmap.h).
 * Tracking feeds each frame's landmarks into the next crop, and BlazePose's landmarks move by
 * hundreds of pixels at 1080p for a code value of difference in the input (two encodings of
 * the same clip, both on the CPU: 278 px on landmarks visible in both, 1,230 px on the others
 * extrapolated outside the frame), so the landmarks are compared crop by crop: for every
 * frame with a pose, the CPU model on the same frame and the same crop, decoded by the same
 * steps (tests/common/kt_pose_session.h, ps_same_crops). The tracked results on both sides
 * are compared end to end for the frames with a person (at most 4 of 48 differ) and their
 * distances printed. The CPU test (test_pipeline_pose) shows the stage's tracking is
 * keyer_pose_run()'s exactly.
 *  - f32, two 1080p clips decoded on the CPU and pushed: per crop, 99% of the landmarks
 *    within 2e-3 of the crop side (the runtime's float32 tolerance is 1e-3 relative on
 *    outputs in tensor pixels; the heatmap refinement's window follows a truncated cell) and
 *    every landmark within 2e-2 (a landmark whose refinement flips at the 0.5 confidence);
 *  - f16 forced: 99% within 1e-2, all within 5e-2 (the same pose), and over the 1 px
 *    at 1080p only when the registry keeps the model in float32 under AUTO;
 *  - the clips read as files (NVDEC frames, crops made from them on the device: the tool's
 *    path), against the CPU model on the CPU decoder's frames: 99% within 5e-3, all 5e-2;
 *  - KEYER_FAIL_CUDA_AT_FRAME=6 on that file run, keyed (blur: the pose stage hands its
 *    items to the keying model): every frame written and reported with its pose, the same
 *    bounds;
 *  - three streams pushed (the first clip twice, its first 6 frames; 3 in the short mode):
 *    rounds of three crops run through the runtime of batch 4 with a crop of padding; f32's
 *    bounds.
 * KEYER_TEST_FILTER (a cmocka pattern) runs only the matching tests; KEYER_TEST_SHORT=1
 * (tests/common/kt_gpu.h: short runs under compute-sanitizer) makes the two clips 12 frames
 * long instead of 24 (the same pan, faster) and the three-stream test take their first 3
 * frames instead of 6 (9 pose runs in 3 rounds, not 18 in 6), with the same checks.
 * Written to be clean under compute-sanitizer --tool memcheck.
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
#include "kt_gpu.h"

enum { CLIPS = 2, FRAMES = 24 };

static char clips[CLIPS][4096];
static char dir[3000];
static keyer_frame *frames[CLIPS * FRAMES];
static int nf = FRAMES; /* frames per clip: FRAMES, or FRAMES / 2 in the short mode */
static ps_rec *ref;

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "pipeline_pose_gpu");
    const int sizes[CLIPS][2] = {{1920, 1080}, {1920, 1080}};
    nf = kt_test_short() ? FRAMES / 2 : FRAMES;
    ms_make_clips(dir, CLIPS, sizes, nf, clips);
    return 0;
}

static void reference(void)
{
    if (ref)
        return;
    ref = calloc(1, sizeof(*ref));
    assert_non_null(ref);
    for (int i = 0; i < CLIPS; i++) {
        ms_decode(clips[i], nf, KEYER_PIXEL_FORMAT_NV12, frames + i * nf);
        ps_reference(frames + i * nf, nf, i, KEYER_POSE_MODEL_LITE, ref);
    }
}

/* The end-to-end check (the same frames with a person, within @p mismatch) and the per-crop
 * check against the CPU model on the same crops (ps_same_crops), printed; returns nothing, the
 * bounds are the caller's. */
static void check_with(const ps_rec *want, keyer_frame *const *fr, int nframes,
                       const ps_rec *got, const char *what, int mismatch, double p99_bound,
                       double max_bound, double *max_px)
{
    int with = 0;
    double rel = 0, worst = ps_compare(want, got, mismatch, &rel, &with);
    double max_rel = 0, p99 = 0;
    int crops = ps_same_crops(got, fr, nframes, KEYER_POSE_MODEL_LITE, &max_rel, &p99, max_px);
    printf("  pose stage %s: a pose in %d frames (tracked on both sides: max landmark distance "
           "%.1f px, %.2e of the crop side); on the same %d crops as the CPU model: max %.3f "
           "px, %.2e of the crop side, 99th percentile %.2e\n", what, with, worst, rel, crops,
           *max_px, max_rel, p99);
    assert_true(with >= 8);
    assert_true(crops >= 8);
    assert_true(p99 <= p99_bound);
    assert_true(max_rel <= max_bound);
}

static void check(const ps_rec *got, const char *what, int mismatch, double p99_bound,
                  double max_bound, double *max_px)
{
    check_with(ref, frames, nf, got, what, mismatch, p99_bound, max_bound, max_px);
}

static void test_pose_stage_f32(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    ps_run_pushed(frames, CLIPS, nf, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F32,
                  KEYER_POSE_MODEL_LITE, got);
    double px = 0;
    check(got, "cuda f32 (pushed NV12 1080p)", 4, 2e-3, 2e-2, &px);
    free(got);
}

static void test_pose_stage_f16(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    ps_run_pushed(frames, CLIPS, nf, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F16,
                  KEYER_POSE_MODEL_LITE, got);
    double px = 0;
    /* the same pose: a broken half path moves landmarks by tens of percent of the crop */
    check(got, "cuda f16 (pushed NV12 1080p)", 4, 1e-2, 5e-2, &px);
    /* Half precision's bound (issue 31) is 1 px at 1080p: a model over it must never run in
     * half by default. */
    if (px > 1.0) {
        const keyer_model_entry *e = keyer_registry_find("pose-lite");
        assert_non_null(e);
        assert_int_equal(keyer_registry_precision(e, KEYER_PRECISION_AUTO, 1), KEYER_PRECISION_F32);
    }
    free(got);
}

static void test_pose_stage_nvdec_files(void **state)
{
    (void)state;
    reference();
    ps_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    const char *inputs[CLIPS] = {clips[0], clips[1]};
    ps_run_files(inputs, CLIPS, nf, KEYER_DEVICE_CUDA, KEYER_PRECISION_AUTO, 0, 0,
                 KEYER_POSE_MODEL_LITE, got);
    double px = 0;
    /* the CPU model on the CPU decoder's frames: the decoders may differ by a code value */
    check(got, "cuda auto (files, NVDEC 1080p)", 4, 5e-3, 5e-2, &px);
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
    ps_run_files(inputs, CLIPS, nf, KEYER_DEVICE_CUDA, KEYER_PRECISION_AUTO, 0, 1,
                 KEYER_POSE_MODEL_LITE, got);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    double px = 0;
    check(got, "GPU failure at frame 6 (files, keyed)", 4, 5e-3, 5e-2, &px);
    free(got);
}

/* Three streams (the first clip twice, round robin; their first quarter, kept short for
 * compute-sanitizer; their first 3 frames in the short mode, where the person is in view and
 * found in every frame: a round seeded by the detector, then two from the landmarks): rounds
 * of three frames, whose CUDA crops run through the runtime of batch 4 with a crop of padding
 * (pipeline/crop_rounds.h); the same bounds as f32 above, the reference the first clip's for
 * the third stream (tracking makes the first frames' results those of the whole run's). */
static void test_pose_stage_three_streams(void **state)
{
    (void)state;
    enum { NF_MAX = FRAMES / 4, NF_SHORT = 3 };
    const int n3 = kt_test_short() ? NF_SHORT : NF_MAX;
    reference();
    ps_rec *want = calloc(1, sizeof(*want)), *got = calloc(1, sizeof(*got));
    assert_non_null(want);
    assert_non_null(got);
    want->streams = 3;
    want->frames = n3;
    for (int s = 0; s < 3; s++) {
        int from = s == 1 ? 1 : 0;
        want->next[s] = n3;
        memcpy(want->found[s], ref->found[from], sizeof(want->found[0]));
        memcpy(want->seeded[s], ref->seeded[from], sizeof(want->seeded[0]));
        memcpy(want->side[s], ref->side[from], sizeof(want->side[0]));
        memcpy(want->roi[s], ref->roi[from], sizeof(want->roi[0]));
        memcpy(want->lm[s], ref->lm[from], sizeof(want->lm[0]));
    }
    keyer_frame *three[3 * NF_MAX];
    for (int i = 0; i < n3; i++) {
        three[i] = frames[i];
        three[n3 + i] = frames[nf + i];
        three[2 * n3 + i] = frames[i];
    }
    ps_run_pushed(three, 3, n3, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F32,
                  KEYER_POSE_MODEL_LITE, got);
    double px = 0;
    check_with(want, three, n3, got, "cuda f32 (three streams pushed, padded runs)", 6, 2e-3,
               2e-2, &px);
    free(want);
    free(got);
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < CLIPS * nf; i++)
        keyer_frame_destroy(&frames[i]);
    free(ref);
    ref = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pose_stage_f32),
        cmocka_unit_test(test_pose_stage_f16),
        cmocka_unit_test(test_pose_stage_nvdec_files),
        cmocka_unit_test(test_pose_stage_gpu_failure),
        cmocka_unit_test(test_pose_stage_three_streams),
    };
    return KT_GPU_RUN_GROUP(tests, setup, teardown);
}
