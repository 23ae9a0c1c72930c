/*
 * Keying people from frames in CUDA memory (label gpu; exits 77 without a device):
 *  - keyer_people with its networks on CUDA, once on host frames (the crops made on the CPU
 *    and staged up) and once on the same frames copied to the device (the crops made on the
 *    GPU straight into the networks' inputs), on three 1080p NV12 frames of a pan over
 *    messi5.jpg (several people; tiles): the same detections (count; scores within 1e-3;
 *    boxes and keypoints within 0.5 pixel), the same people (count, ids), and the people masks
 *    agree (mean absolute difference <= 5e-3, the same side of 0.5 on >= 99.5% of pixels:
 *    test_people_gpu's bounds for CPU against CUDA; here only the preparation differs, the
 *    CPU's and the GPU's evaluation of the same sampling, within 1e-4 per tensor element);
 *  - the session with model people on CUDA reading the clip as a file (NVDEC frames that stay
 *    on the device: the report says cuda and hardware decoding) writes every frame, and its
 *    mattes (composite mask) agree with the CPU session's on the CPU decoder's frames: mean
 *    absolute difference <= 2 code values, at most 1% of pixels more than 64 apart (the
 *    decoders differ by a code value, the refinement on the two devices by one).
 *  - the automatic model (no model given) on the street clip tests/data/street_vtest.mp4:
 *    the CUDA session switches to people mode 1 to KR_INFER_AUTO_RING runs of the stage after
 *    the CPU session, and the people frames' mattes agree (bounds at test_auto_people_cuda).
 * The figures are printed. Written to be clean under compute-sanitizer --tool memcheck.
 * KEYER_TEST_FILTER (a cmocka pattern) runs only the matching tests; KEYER_TEST_SHORT=1
 * (tests/common/kt_gpu.h: short runs under compute-sanitizer) keeps the device-frame test to
 * the first frame with the detector's tiles at 800 pixels (6 tiles, not 15; two people, so
 * the landmark model still runs a batch of crops), and the automatic model to the CPU run and
 * the CUDA run of batch 1 (the stricter of the two), with the same checks.
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

#include "core/device.h"
#include "keyer/io.h"
#include "keyer/people.h"
#include "keyer/pipeline.h"
#include "kt_mesh_session.h"
#include "kt_people.h"
#include "kt_session.h"
#include "pipeline/infer.h"
#include "testutil.h"
#include "kt_gpu.h"

/* SHORT_TILE: the detector's tile side in the short mode: 6 tiles of 800 pixels over the
 * frame instead of 15 of 540 (keyer/people.h, tiles), which still find two people in the
 * first frame (the defaults find five): the tiles' crops, and the landmark model's runtime of
 * batch 4 with two crops, run on both kinds of frames, with a third of the detector's runs. */
enum { FRAMES = 3, W = 1920, H = 1080, SHORT_TILE = 800 };

static char clip[4096];
static char dir[3000];

static void test_people_device_frames(void **state)
{
    (void)state;
    const kr_device_fns *dev = kr_device_cuda();
    keyer_error err = {0};
    const int shortened = kt_test_short(), nframes = shortened ? 1 : FRAMES;
    keyer_frame *host[FRAMES];
    ms_decode(clip, nframes, KEYER_PIXEL_FORMAT_NV12, host);
    kt_people_side a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    keyer_people_params pp = keyer_people_params_defaults();
    pp.backend = KEYER_BACKEND_CUDA;
    pp.threads = 4;
    if (shortened)
        pp.tile_size = SHORT_TILE;
    kt_people_side_open_with(&a, &pp);
    kt_people_side_open_with(&b, &pp);
    keyer_frame *d = NULL;
    assert_int_equal(keyer_frame_create(&d, &err), KEYER_OK);
    assert_int_equal(kr_device_frame_alloc(dev, 0, d, KEYER_PIXEL_FORMAT_NV12, W, H, &err),
                     KEYER_OK);
    int people = 0;
    for (int i = 0; i < nframes; i++) {
        /* the copy is complete when it returns: the frame is ready for any stream */
        assert_int_equal(kr_device_frame_copy(dev, 0, d, host[i], NULL, &err), KEYER_OK);
        kt_people_side_run(&a, host[i]);
        kt_people_side_run(&b, d);
        char what[32];
        snprintf(what, sizeof(what), "  frame %d", i);
        kt_people_compare(&a, &b, what, "host frame", "device frame");
        people += a.np;
    }
    assert_true(people >= nframes); /* the photo has people in it */
    if (shortened)
        assert_true(people >= 2); /* the landmark model's batch of several crops ran */
    keyer_frame_destroy(&d);
    kt_people_side_close(&a);
    kt_people_side_close(&b);
    for (int i = 0; i < nframes; i++)
        keyer_frame_destroy(&host[i]);
}

/* ---- the session ---------------------------------------------------------------------------- */

typedef struct mattes {
    int frames;
    uint8_t *luma; /* FRAMES x W x H: plane 0 of each output */
} mattes;

static keyer_status keep_matte(void *opaque, int sid, int64_t index, const keyer_frame *input,
                               keyer_frame *output, keyer_error *err)
{
    (void)sid, (void)input, (void)err;
    mattes *m = opaque;
    if (index < 0 || index >= FRAMES || output->width != W || output->height != H)
        return KEYER_OK; /* counted: frames must be FRAMES */
    for (int y = 0; y < H; y++)
        memcpy(m->luma + ((size_t)index * H + (size_t)y) * W,
               output->data[0] + (size_t)y * (size_t)output->stride[0], W);
    m->frames++;
    return KEYER_OK;
}

/* Runs a session of @p sp on the file @p path to the end; its report and the stream's into
 * @p rep and @p sr. */
static void run_file(const keyer_session_params *sp, const char *path, keyer_session_report *rep,
                     keyer_stream_report *sr)
{
    keyer_session *s = kt_session_create(sp);
    kt_session_run_files(s, &path, 1);
    keyer_error err = {0};
    keyer_session_get_report(s, rep);
    assert_int_equal(keyer_session_get_stream_report(s, 0, sr, &err), KEYER_OK);
    keyer_session_destroy(&s);
}

static void run_session(keyer_device_kind device, mattes *m)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING; /* a fallback to the CPU says why */
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = device;
    sp.model = KEYER_PEOPLE_MODEL;
    sp.logger = &lg;
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.frame_fn = keep_matte;
    sp.frame_opaque = m;
    keyer_session_report rep;
    keyer_stream_report sr;
    run_file(&sp, clip, &rep, &sr);
    printf("  session %s: %lld frames, %s%s\n", device == KEYER_DEVICE_CUDA ? "cuda" : "cpu",
           (long long)rep.frames_written, rep.device, sr.hw_decode ? ", NVDEC" : "");
    assert_int_equal(rep.frames_written, FRAMES);
    assert_int_equal(rep.frames_lost, 0);
    if (device == KEYER_DEVICE_CUDA) {
        assert_non_null(strstr(rep.device, "cuda"));
        assert_null(strstr(rep.device, "cpu"));
    }
    assert_int_equal(m->frames, FRAMES);
}

static void test_people_session_cuda(void **state)
{
    (void)state;
    mattes cpu = {0, calloc((size_t)FRAMES * W * H, 1)};
    mattes gpu = {0, calloc((size_t)FRAMES * W * H, 1)};
    assert_non_null(cpu.luma);
    assert_non_null(gpu.luma);
    run_session(KEYER_DEVICE_CPU, &cpu);
    run_session(KEYER_DEVICE_CUDA, &gpu);
    size_t n = (size_t)FRAMES * W * H, far = 0, keyed = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)cpu.luma[i] - (int)gpu.luma[i]);
        sum += d;
        far += d > 64;
        keyed += cpu.luma[i] >= 128;
    }
    printf("  session mattes cuda against cpu: mean |difference| %.3f code values, %.3f%% of "
           "pixels more than 64 apart; %.1f%% of pixels keyed in (cpu)\n", sum / (double)n,
           100.0 * (double)far / (double)n, 100.0 * (double)keyed / (double)n);
    assert_true(keyed > n / 100); /* people were keyed at all */
    assert_true(sum / (double)n <= 2.0);
    assert_true((double)far / (double)n <= 0.01);
    free(cpu.luma);
    free(gpu.luma);
}

/* ---- the automatic switch on CUDA ------------------------------------------------------------- */

enum { STREET_FRAMES = 49, SW = 768, SH = 576, SWITCH_AT = 4, SETTLE = 2 };

typedef struct street {
    int frames;
    uint8_t *luma; /* STREET_FRAMES x SW x SH: plane 0 of each matte */
} street;

static keyer_status keep_street(void *opaque, int sid, int64_t index, const keyer_frame *input,
                                keyer_frame *output, keyer_error *err)
{
    (void)sid, (void)input, (void)err;
    street *m = opaque;
    if (index < 0 || index >= STREET_FRAMES || output->width != SW || output->height != SH)
        return KEYER_OK; /* counted: frames must be STREET_FRAMES */
    for (int y = 0; y < SH; y++)
        memcpy(m->luma + ((size_t)index * SH + (size_t)y) * SW,
               output->data[0] + (size_t)y * (size_t)output->stride[0], SW);
    m->frames++;
    return KEYER_OK;
}

/* The street clip keyed without a model (the automatic choice) on @p device: returns the
 * frames the stream spent in people mode. */
static int64_t run_auto(const char *path, keyer_device_kind device, int batch, street *m)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = device;
    sp.model = NULL; /* the automatic model: selfie, people mode when no one is large */
    sp.batch = batch;
    sp.logger = &lg;
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.frame_fn = keep_street;
    sp.frame_opaque = m;
    keyer_session_report rep;
    keyer_stream_report sr;
    run_file(&sp, path, &rep, &sr);
    printf("  automatic model, %s, batch %d: %lld frames, %s, %lld in people mode\n",
           device == KEYER_DEVICE_CUDA ? "cuda" : "cpu", batch, (long long)rep.frames_written,
           rep.device, (long long)sr.frames_people);
    assert_int_equal(rep.frames_written, STREET_FRAMES);
    assert_int_equal(rep.frames_lost, 0);
    assert_int_equal(rep.auto_people, 1);
    if (device == KEYER_DEVICE_CUDA) {
        assert_non_null(strstr(rep.device, "cuda"));
        assert_null(strstr(rep.device, "cpu"));
    }
    assert_int_equal(m->frames, STREET_FRAMES);
    return sr.frames_people;
}

/* Without --model the CUDA session switches a street clip to people mode 1 to
 * KR_INFER_AUTO_RING (3) runs of the infer stage later than the CPU session (on CUDA the
 * switches take a run's packed selfie masks at a later run, when their copies are done, so
 * that the host does not wait for the inference; infer.h, auto_cuda): with batches of one
 * frame 1 to 3 frames later (42 to 44 of the CPU's 45 people frames), with the default batch
 * (16) at least one frame and at most 3 runs of 16 later (the clip's one stream; the switch
 * goes one way on this clip: no one comes near the camera, so the counts of people frames
 * give the switch frames). Where both key people the mattes agree: from the third frame that
 * both key as people on every matte covers 0.2% to 5% of the frame on both devices (the selfie
 * model's blobs are larger, people 10-30 m away smaller), and the CUDA mattes of the frames
 * both key as people agree with the CPU's (test_people_session_cuda's bounds: mean
 * |difference| <= 2 code values, at most 1% of pixels more than 64 apart). */
static void test_auto_people_cuda(void **state)
{
    (void)state;
    char path[4096];
    kt_data_path(path, sizeof(path), "street_vtest.mp4");
    street cpu = {0, calloc((size_t)STREET_FRAMES * SW * SH, 1)};
    street gpu = {0, calloc((size_t)STREET_FRAMES * SW * SH, 1)};
    assert_non_null(cpu.luma);
    assert_non_null(gpu.luma);
    int64_t on_cpu = run_auto(path, KEYER_DEVICE_CPU, 0, &cpu);
    /* five frames in a row with no one large, then people mode: from frame SWITCH_AT on */
    assert_int_equal(on_cpu, STREET_FRAMES - SWITCH_AT);
    /* the default batch: the switch 1 frame to 3 runs of 16 later, within the clip (not in
     * the short mode) */
    if (!kt_test_short()) {
        gpu.frames = 0;
        int64_t on_gpu16 = run_auto(path, KEYER_DEVICE_CUDA, 0, &gpu);
        assert_true(on_gpu16 <= on_cpu - 1 && on_gpu16 >= on_cpu - 16 * KR_INFER_AUTO_RING &&
                    on_gpu16 >= 1);
    }
    gpu.frames = 0;
    int64_t on_gpu = run_auto(path, KEYER_DEVICE_CUDA, 1, &gpu);
    /* batches of one frame: 1 to KR_INFER_AUTO_RING frames later */
    assert_true(on_gpu <= on_cpu - 1 && on_gpu >= on_cpu - KR_INFER_AUTO_RING);
    int first = (int)(STREET_FRAMES - on_gpu); /* the first frame both key as people */
    size_t plane = (size_t)SW * SH, far = 0;
    double sum = 0, min_cov = 1, max_cov = 0;
    for (int f = first; f < STREET_FRAMES; f++) {
        const uint8_t *a = cpu.luma + (size_t)f * plane, *b = gpu.luma + (size_t)f * plane;
        size_t keyed_a = 0, keyed_b = 0;
        for (size_t i = 0; i < plane; i++) {
            int d = abs((int)a[i] - (int)b[i]);
            sum += d;
            far += d > 64;
            keyed_a += a[i] >= 128;
            keyed_b += b[i] >= 128;
        }
        double ca = (double)keyed_a / (double)plane, cb = (double)keyed_b / (double)plane;
        if (f >= first + SETTLE) { /* the matte's temporal smoothing has let go of the
                                    * selfie model's blobs */
            min_cov = fmin(min_cov, fmin(ca, cb));
            max_cov = fmax(max_cov, fmax(ca, cb));
        }
    }
    size_t n = plane * (size_t)(STREET_FRAMES - first);
    printf("  people frames from frame %d on both: mattes cover %.2f%% to %.2f%% of the frame; "
           "cuda against cpu: mean |difference| %.3f code values, %.3f%% of pixels more than "
           "64 apart\n", first, 100.0 * min_cov, 100.0 * max_cov, sum / (double)n,
           100.0 * (double)far / (double)n);
    assert_true(min_cov >= 0.002 && max_cov <= 0.05);
    assert_true(sum / (double)n <= 2.0);
    assert_true((double)far / (double)n <= 0.01);
    free(cpu.luma);
    free(gpu.luma);
}

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "people_device_gpu");
    snprintf(clip, sizeof(clip), "%s/people_1080p.mp4", dir);
    char img[4096];
    keyer_error err = {0};
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = W;
    p.height = H;
    p.frames = FRAMES;
    p.frame_rate = (keyer_rational){25, 1};
    p.preset = "ultrafast";
    p.bframes = 0;
    if (keyer_video_write_sample(clip, kt_data_path(img, sizeof(img), "messi5.jpg"), &p, &err))
        fail_msg("sample: %s", err.message);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_people_device_frames),
        cmocka_unit_test(test_people_session_cuda),
        cmocka_unit_test(test_auto_people_cuda),
    };
    return KT_GPU_RUN_GROUP(tests, setup, NULL);
}
