/*
 * The face mesh on the GPU (label gpu; exits 77 without a device), against the CPU:
 *  - crops: a batch of 16 rotated face crops (192x192, rgb in [0,1], NHWC; some reaching
 *    outside the frame, so the border handling counts) made by keyer_prepare from the same
 *    1080p frame in host memory and in CUDA memory, in NV12, YUV420P and P010: float32
 *    tensors agree within 1e-4 per element (both evaluate kr_prepare_pixel in float; only
 *    contraction into fused multiply-adds differs), float16 within 1e-3 (one half ulp below
 *    1 is 4.9e-4), geometries exactly;
 *  - the session's face-mesh stage on CUDA (keyer_session_params::mesh) on two 1080p clips
 *    decoded on the CPU and pushed (the same pixels on both sides), against keyer_faces_run()
 *    on those frames: in float32 the same faces and ids in every frame and every landmark
 *    within 1.5e-3 of its face's crop side (the runtime's float32 tolerance, 1e-3 relative on
 *    outputs, on landmark coordinates of up to 192 crop pixels: 1e-3 of the crop side per
 *    coordinate, sqrt(2) times that as a distance; about 0.7 px for a 500 px crop), end to end
 *    and crop by crop (below); in float16 (detector and mesh) at most 2 of the 48 frames with
 *    another face count, every landmark of the others within 5e-3 of the crop side end to end
 *    and crop by crop (against the CPU's float32 mesh on the same crops: half alone), and
 *    where a landmark moves by more than 1 px (issue 31's bound for half at 1080p) the
 *    registry must keep the mesh in float32 under AUTO;
 *  - the same clips read as files by the CUDA session (NVDEC frames, the mesh's crops made
 *    from them on the device, the tool's path), against the CPU decoder's frames (the decoders
 *    may differ by a code value): end to end against keyer_faces_run() at most 2 frames with
 *    another count (the distance printed), and crop by crop every landmark within 1 px;
 *  - KEYER_FAIL_CUDA_AT_FRAME=6 on that file run, keyed (blur: the mesh hands its items to
 *    the keying model): the GPU fails mid-run (in the detector, the first model stage), the
 *    face-mesh stage receives the later frames on the CPU and runs them there (its CPU
 *    runtimes made then); every frame is written and reported with its faces, within the
 *    same bounds.
 * Crop by crop (ms_same_crops, tests/common/kt_mesh_session.h): the CPU face mesh run on the
 * same frame and the same crop each GPU face's landmarks came from. Tracking feeds each
 * frame's landmarks into the next crop, so whole-run trajectories drift apart for input
 * differences far below the runtime's tolerance: a code value of decoding, or the detector's
 * batches, which follow the session's thread count (on 32 cores the file runs' end-to-end
 * distances were 1.27 and 1.21 px where 16 cores gave under 1 px), so the bounds on
 * landmarks are per crop (same crop in, same landmarks out); end to end the faces and their
 * counts per frame are compared. KEYER_TEST_FILTER (a cmocka pattern) runs only the matching
 * tests (a short run under compute-sanitizer); KEYER_TEST_SHORT=1 (tests/common/kt_gpu.h)
 * pushes each clip's first 8 frames instead of 24 in the f32 and f16 runs (the start of the
 * same pan: a face in all 16 frames, found by the detector's first batch of two, then
 * tracked in 8 rounds of two crops), with the same checks against the same reference.
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

#include "keyer/effects.h"
#include "keyer/registry.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "core/device.h"
#include "kt_mesh_session.h"
#include "testutil.h"
#include "kt_gpu.h"

enum { CLIPS = 2, FRAMES = 24, CROPS = 16, SIDE = 192, SHORT_FRAMES = 8 };

static char clips[CLIPS][4096];
static char dir[3000];

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "pipeline_mesh_gpu");
    const int sizes[CLIPS][2] = {{1920, 1080}, {1920, 1080}};
    ms_make_clips(dir, CLIPS, sizes, FRAMES, clips);
    return 0;
}

/* The value of an IEEE half. */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(m + 1024.0, e - 25);
    return h & 0x8000 ? -v : v;
}

/* ---- crops -------------------------------------------------------------------------------- */

static void check_crops(const keyer_frame *host, int dtype, const char *what)
{
    const kr_device_fns *dev = kr_device_cuda();
    keyer_error err = {0};
    keyer_frame *d = NULL;
    assert_int_equal(keyer_frame_create(&d, &err), KEYER_OK);
    assert_int_equal(kr_device_frame_alloc(dev, 0, d, host->format, host->width, host->height,
                                           &err), KEYER_OK);
    assert_int_equal(kr_device_frame_copy(dev, 0, d, host, NULL, &err), KEYER_OK);
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = SIDE;
    pp.height = SIDE;
    pp.max_batch = CROPS;
    pp.fit = KEYER_FIT_STRETCH;
    pp.dtype = dtype;
    keyer_prepare *prep = NULL;
    assert_int_equal(keyer_prepare_create(&pp, &prep, &err), KEYER_OK);
    keyer_roi rois[CROPS];
    const keyer_frame *fh[CROPS], *fd[CROPS];
    for (int i = 0; i < CROPS; i++) {
        /* faces from 60 to 960 px, all over the frame (some past its edges), every angle */
        rois[i].center_x = (float)host->width * (-0.05f + 1.1f * (float)((i * 7) % CROPS) / CROPS);
        rois[i].center_y = (float)host->height * (0.02f + 0.96f * (float)((i * 5) % CROPS) / CROPS);
        rois[i].width = rois[i].height = 60.0f + 60.0f * (float)i;
        rois[i].rotation = -3.0f + 6.0f * (float)i / (CROPS - 1);
        fh[i] = host;
        fd[i] = d;
    }
    size_t n = (size_t)CROPS * SIDE * SIDE * 3, es = dtype == KEYER_DTYPE_F16 ? 2 : 4;
    void *th = malloc(n * es), *back = malloc(n * es), *td = NULL;
    assert_non_null(th);
    assert_non_null(back);
    assert_int_equal(dev->alloc(0, n * es, &td, &err), KEYER_OK);
    keyer_prepare_geometry gh[CROPS], gd[CROPS];
    assert_int_equal(keyer_prepare_run(prep, fh, rois, CROPS, th, gh, &err), KEYER_OK);
    assert_int_equal(keyer_prepare_run(prep, fd, rois, CROPS, td, gd, &err), KEYER_OK);
    assert_int_equal(dev->copy(0, back, td, n * es, NULL, &err), KEYER_OK);
    assert_int_equal(dev->stream_sync(0, NULL, &err), KEYER_OK);
    double worst = 0;
    for (size_t k = 0; k < n; k++) {
        double a = es == 2 ? half_value(((uint16_t *)th)[k]) : ((float *)th)[k];
        double b = es == 2 ? half_value(((uint16_t *)back)[k]) : ((float *)back)[k];
        double e = fabs(a - b);
        if (isnan(e))
            e = INFINITY;
        worst = e > worst ? e : worst;
    }
    assert_memory_equal(gh, gd, sizeof(gh));
    printf("  crops %s %s: %d of %dx%d, max difference %.3g\n", what,
           dtype == KEYER_DTYPE_F16 ? "f16" : "f32", CROPS, SIDE, SIDE, worst);
    assert_true(worst <= (dtype == KEYER_DTYPE_F16 ? 1e-3 : 1e-4));
    dev->free(0, td);
    free(th);
    free(back);
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&d);
}

static void test_crops_cuda_equal_cpu(void **state)
{
    (void)state;
    const struct {
        int format;
        const char *name;
    } formats[] = {{KEYER_PIXEL_FORMAT_NV12, "nv12"},
                   {KEYER_PIXEL_FORMAT_YUV420P, "yuv420p"},
                   {KEYER_PIXEL_FORMAT_P010, "p010"}};
    for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
        keyer_frame *frame[1];
        ms_decode(clips[0], 1, formats[f].format, frame);
        check_crops(frame[0], KEYER_DTYPE_F32, formats[f].name);
        check_crops(frame[0], KEYER_DTYPE_F16, formats[f].name);
        keyer_frame_destroy(&frame[0]);
    }
}

/* ---- the session's face-mesh stage -------------------------------------------------------- */

static keyer_frame *frames[CLIPS * FRAMES];
static ms_rec *ref;

static void reference(void)
{
    if (ref)
        return;
    ref = calloc(1, sizeof(*ref));
    assert_non_null(ref);
    for (int i = 0; i < CLIPS; i++) {
        ms_decode(clips[i], FRAMES, KEYER_PIXEL_FORMAT_NV12, frames + i * FRAMES);
        ms_reference(frames + i * FRAMES, FRAMES, i, ref);
    }
}

/* The pushed runs' input: each clip's first nf frames (FRAMES; SHORT_FRAMES in the short mode:
 * the start of the same pan, where the face is in view) in ms_run_pushed's layout, and the
 * reference of those frames (keyer_faces_run() tracks forward only: the first nf frames of
 * the whole clip's reference). */
typedef struct pushed {
    int nf;
    keyer_frame *frames[CLIPS * FRAMES];
    ms_rec *ref;
} pushed;

static void pushed_open(pushed *p)
{
    reference();
    p->nf = kt_test_short() ? SHORT_FRAMES : FRAMES;
    for (int c = 0; c < CLIPS; c++)
        for (int i = 0; i < p->nf; i++)
            p->frames[c * p->nf + i] = frames[c * FRAMES + i];
    p->ref = malloc(sizeof(*p->ref));
    assert_non_null(p->ref);
    *p->ref = *ref;
    p->ref->frames = p->nf;
}

static void test_mesh_stage_f32(void **state)
{
    (void)state;
    pushed in;
    pushed_open(&in);
    ms_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    ms_run_pushed(in.frames, CLIPS, in.nf, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F32, got);
    int faces = 0, with = 0;
    double rel = 0, worst = ms_compare(in.ref, got, 0, &rel, &faces, &with);
    double crop_rel = 0, crop_px = 0;
    int crops = ms_same_crops(got, in.frames, in.nf, &crop_rel, &crop_px);
    printf("  mesh stage cuda f32 (pushed NV12 1080p, %d frames per clip): %d faces in %d "
           "frames, max landmark distance %.4f px, %.2e of the crop side; on the same %d crops "
           "as the CPU: %.4f px, %.2e\n", in.nf, faces, with, worst, rel, crops, crop_px,
           crop_rel);
    assert_true(with >= 8);
    assert_true(rel <= 1.5e-3);
    assert_int_equal(crops, faces);
    assert_true(crop_rel <= 1.5e-3);
    free(got);
    free(in.ref);
}

static void test_mesh_stage_f16(void **state)
{
    (void)state;
    pushed in;
    pushed_open(&in);
    ms_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    ms_run_pushed(in.frames, CLIPS, in.nf, dir, KEYER_DEVICE_CUDA, KEYER_PRECISION_F16, got);
    int faces = 0, with = 0;
    double rel = 0, worst = ms_compare(in.ref, got, 2, &rel, &faces, &with);
    /* half alone, without tracking's drift: the CPU face mesh (float32) on the same crops */
    double crop_rel = 0, crop_px = 0;
    int crops = ms_same_crops(got, in.frames, in.nf, &crop_rel, &crop_px);
    printf("  mesh stage cuda f16 (pushed NV12 1080p, %d frames per clip): %d faces in %d "
           "frames, max landmark distance %.4f px, %.2e of the crop side; on the same %d crops "
           "as the CPU (f32): max %.4f px, %.2e\n", in.nf, faces, with, worst, rel, crops,
           crop_px, crop_rel);
    assert_true(with >= 8);
    assert_true(crops >= faces); /* every face recorded; the frames compared end to end hold
                                  * those of equal counts */
    /* Half precision's bound (issue 31) is 1 px at 1080p. face_landmark forced to f16 moved
     * a landmark by 2.54 px (1.97e-3 of the crop side) on the H100, so the registry keeps the
     * mesh in f32 under AUTO: a model over the bound, end to end or on the same crops, must
     * never run in half by default. The forced f16 run must still be the same mesh (5e-3 of
     * the crop side, both ways: a broken half path moves landmarks by tens of pixels). */
    if (worst > 1.0 || crop_px > 1.0) {
        const keyer_model_entry *e = keyer_registry_find("face-mesh");
        assert_non_null(e);
        assert_int_equal(keyer_registry_precision(e, KEYER_PRECISION_AUTO, 1), KEYER_PRECISION_F32);
    }
    assert_true(rel <= 5e-3);
    assert_true(crop_rel <= 5e-3);
    free(got);
    free(in.ref);
}

/* A file run @p got against the CPU decoder's frames: end to end at most 2 frames with another
 * face count than keyer_faces_run() (its distance printed), and crop by crop every landmark
 * within 1 px of the CPU face mesh's on the same crop. */
static void check_files(const ms_rec *got, const char *what)
{
    int faces = 0, with = 0;
    double rel = 0, worst = ms_compare(ref, got, 2, &rel, &faces, &with);
    double crop_rel = 0, crop_px = 0;
    int crops = ms_same_crops(got, frames, FRAMES, &crop_rel, &crop_px);
    printf("  mesh stage %s: %d faces in %d frames, end to end max landmark distance %.4f px; "
           "on the same %d crops as the CPU: max %.4f px, %.2e of the crop side\n", what,
           faces, with, worst, crops, crop_px, crop_rel);
    assert_true(with >= 8);
    assert_true(crops >= 8);
    assert_true(crop_px <= 1.0);
}

static void test_mesh_stage_nvdec_files(void **state)
{
    (void)state;
    reference();
    ms_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    const char *inputs[CLIPS] = {clips[0], clips[1]};
    ms_run_files(inputs, CLIPS, FRAMES, KEYER_DEVICE_CUDA, KEYER_PRECISION_AUTO, 0, 0, got);
    check_files(got, "cuda auto (files, NVDEC 1080p)");
    free(got);
}

static void test_mesh_stage_gpu_failure(void **state)
{
    (void)state;
    reference();
    ms_rec *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    const char *inputs[CLIPS] = {clips[0], clips[1]};
    setenv("KEYER_FAIL_CUDA_AT_FRAME", "6", 1);
    ms_run_files(inputs, CLIPS, FRAMES, KEYER_DEVICE_CUDA, KEYER_PRECISION_AUTO, 0, 1, got);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    check_files(got, "GPU failure at frame 6 (files, keyed)");
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crops_cuda_equal_cpu),
        cmocka_unit_test(test_mesh_stage_f32),
        cmocka_unit_test(test_mesh_stage_f16),
        cmocka_unit_test(test_mesh_stage_nvdec_files),
        cmocka_unit_test(test_mesh_stage_gpu_failure),
    };
    return KT_GPU_RUN_GROUP(tests, setup, teardown);
}
