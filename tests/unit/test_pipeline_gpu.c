/*
 * The keying session on a CUDA GPU (label gpu; exits 77 without a device):
 *  - a file run on CUDA (NVDEC frames staying on the GPU) gives the frames of the CPU run,
 *    within the tolerance between the CPU and CUDA kernels;
 *  - KEYER_FAIL_CUDA_AT_FRAME makes the CUDA path fail mid-run: the run finishes on the CPU
 *    with every frame written and none lost;
 *  - pushed host frames into a CUDA session and CUDA frames into it come out like the CPU's;
 *  - the session's face detector on CUDA finds the CPU's faces (tests/common/kt_detect_session.h).
 * Timings are printed for information. KEYER_TEST_FILTER (a cmocka pattern) runs only the
 * matching tests; KEYER_TEST_SHORT=1 (tests/common/kt_gpu.h: short runs under
 * compute-sanitizer) makes the detector's clips 8 frames long instead of 20, with the same
 * checks.
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

#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "core/device.h"
#include "kt_detect_session.h"
#include "kt_io.h"
#include "testutil.h"
#include "kt_gpu.h"

enum { W = 1280, H = 720, N = 60 };

static char sample[4096];

static keyer_logger quiet(void)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING;
    return lg;
}

static const char *tmp_path(char *buf, size_t n, const char *name)
{
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_gpu");
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static int setup(void **state)
{
    (void)state;
    tmp_path(sample, sizeof(sample), "in.mp4");
    kt_make_clip(sample, W, H, N, 30);
    return 0;
}

/* Runs the sample through a session; returns the report. */
static keyer_session_report run_file(int device, const char *out, int mode, double *seconds)
{
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = device;
    sp.logger = &lg;
    sp.model = "selfie-landscape";
    sp.composite.mode = mode;
    sp.refine.temporal = KEYER_TEMPORAL_OFF; /* frames independent: the fallback resets history */
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = sample;
    fp.output = out;
    fp.writer.preset = "ultrafast";
    fp.writer.quality = 12;
    if (keyer_session_add_file(s, &fp, NULL, &err) || keyer_session_run(s, &err))
        fail_msg("run on %s: %s", device == KEYER_DEVICE_CUDA ? "cuda" : "cpu", err.message);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    keyer_stream_report sr;
    keyer_session_get_stream_report(s, 0, &sr, NULL);
    printf("  %-34s %lld frames, %.1f fps, device %s, NVDEC %d, cuda %lld / cpu %lld inferred, "
           "lost %lld\n", out, (long long)rep.frames_written, rep.fps, rep.device, sr.hw_decode,
           (long long)rep.frames_on_cuda, (long long)rep.frames_on_cpu, (long long)rep.frames_lost);
    if (rep.frames_on_cuda > 0 && !rep.fell_back) { /* the CUDA runtimes' schedules, by batch */
        printf("  model %s (%s): %s\n", rep.model, rep.model_precision, rep.model_schedule);
        assert_true(strstr(rep.model_schedule, "per-node") ||
                    strstr(rep.model_schedule, "persistent"));
    }
    if (seconds)
        *seconds = rep.seconds;
    keyer_session_destroy(&s);
    return rep;
}

/* Smallest PSNR (RGB) over the frames of two videos with the same frame count. */
static double min_psnr(const char *a, const char *b, int64_t *frames)
{
    keyer_logger lg = quiet();
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.logger = &lg;
    keyer_reader *ra = NULL, *rb = NULL;
    keyer_frame *fa = NULL, *fb = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_reader_open(a, &rp, &ra, &err), KEYER_OK);
    assert_int_equal(keyer_reader_open(b, &rp, &rb, &err), KEYER_OK);
    keyer_frame_create(&fa, NULL);
    keyer_frame_create(&fb, NULL);
    double lo = 99;
    int64_t n = 0;
    for (;;) {
        keyer_status sa = keyer_reader_read(ra, fa, &err);
        keyer_status sb = keyer_reader_read(rb, fb, &err);
        assert_int_equal(sa, sb);
        if (sa)
            break;
        double se = 0;
        for (int y = 0; y < fa->height; y++)
            for (int x = 0; x < fa->width * 3; x++) {
                double d = (double)fa->data[0][y * fa->stride[0] + x] -
                           (double)fb->data[0][y * fb->stride[0] + x];
                se += d * d;
            }
        double mse = se / ((double)fa->width * fa->height * 3);
        double p = mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
        if (p < lo)
            lo = p;
        n++;
    }
    *frames = n;
    keyer_frame_destroy(&fa);
    keyer_frame_destroy(&fb);
    keyer_reader_destroy(&ra);
    keyer_reader_destroy(&rb);
    return lo;
}

static void test_cuda_file_matches_cpu(void **state)
{
    (void)state;
    char cpu[4096], gpu[4096];
    tmp_path(cpu, sizeof(cpu), "cpu.mp4");
    tmp_path(gpu, sizeof(gpu), "gpu.mp4");
    for (int m = 0; m < 2; m++) {
        int mode = m ? KEYER_COMPOSITE_BLUR : KEYER_COMPOSITE_MASK;
        keyer_session_report c = run_file(KEYER_DEVICE_CPU, cpu, mode, NULL);
        keyer_session_report g = run_file(KEYER_DEVICE_CUDA, gpu, mode, NULL);
        assert_int_equal(c.frames_written, N);
        assert_int_equal(g.frames_written, N);
        assert_int_equal(strncmp(g.device, "cuda:", 5), 0);
        assert_int_equal(g.frames_on_cuda + g.frames_on_cpu, N);
        assert_int_equal(g.frames_lost, 0);
        int64_t frames = 0;
        double p = min_psnr(cpu, gpu, &frames);
        printf("  %s: CPU vs CUDA, min PSNR %.2f dB over %lld frames\n", m ? "blur" : "mask", p,
               (long long)frames);
        assert_int_equal(frames, N);
        assert_true(p >= 30.0);
    }
}

static void test_forced_gpu_failure_loses_nothing(void **state)
{
    (void)state;
    char cpu[4096], gpu[4096];
    tmp_path(cpu, sizeof(cpu), "cpu-mask.mp4");
    tmp_path(gpu, sizeof(gpu), "failed.mp4");
    run_file(KEYER_DEVICE_CPU, cpu, KEYER_COMPOSITE_MASK, NULL);
    setenv("KEYER_FAIL_CUDA_AT_FRAME", "20", 1);
    keyer_session_report g = run_file(KEYER_DEVICE_CUDA, gpu, KEYER_COMPOSITE_MASK, NULL);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    assert_int_equal(g.frames_written, N);
    assert_int_equal(g.frames_lost, 0);
    assert_int_equal(g.fell_back, 1);
    assert_true(g.frames_on_cpu >= N - 20);
    assert_int_equal(g.frames_on_cpu + g.frames_on_cuda, N); /* each frame inferred once */
    assert_true(g.warnings >= 1);
    int64_t frames = 0;
    double p = min_psnr(cpu, gpu, &frames);
    printf("  forced failure at frame 20: min PSNR vs CPU %.2f dB\n", p);
    assert_int_equal(frames, N);
    assert_true(p >= 30.0);
}

static void test_pushed_frames_on_cuda(void **state)
{
    (void)state;
    const kr_device_fns *dev = kr_device_cuda();
    keyer_logger lg = quiet();
    keyer_frame *photo = NULL, *host = NULL, *devf = NULL;
    char path[4096];
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&photo, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(kt_data_path(path, sizeof(path), "grace_hopper.jpg"),
                                      KEYER_PIXEL_FORMAT_RGBA, photo, &err),
                     KEYER_OK);
    keyer_frame_create(&devf, NULL);
    assert_int_equal(kr_device_frame_alloc(dev, 0, devf, KEYER_PIXEL_FORMAT_RGBA, photo->width,
                                           photo->height, &err),
                     KEYER_OK);
    assert_int_equal(kr_device_frame_copy(dev, 0, devf, photo, NULL, &err), KEYER_OK);
    keyer_frame *outs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        /* k 0: CPU session; 1: CUDA session, host frames; 2: CUDA session, CUDA frames */
        keyer_session_params sp = keyer_session_params_defaults();
        sp.device = k ? KEYER_DEVICE_CUDA : KEYER_DEVICE_CPU;
        sp.model = "selfie";
        sp.composite.mode = KEYER_COMPOSITE_MASK;
        sp.logger = &lg;
        keyer_session *s = NULL;
        assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
        keyer_stream_params stp = keyer_stream_params_defaults();
        stp.width = photo->width;
        stp.height = photo->height;
        stp.format = KEYER_PIXEL_FORMAT_RGBA;
        stp.memory = k == 2 ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
        int id;
        assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
        assert_int_equal(keyer_session_send_frame(s, id, k == 2 ? devf : photo, &err), KEYER_OK);
        keyer_frame *o = NULL;
        keyer_frame_create(&o, NULL);
        assert_int_equal(keyer_session_receive_frame(s, id, o, -1, &err), KEYER_OK);
        keyer_frame_create(&outs[k], NULL);
        if (o->memory == KEYER_MEMORY_CUDA) {
            assert_int_equal(keyer_frame_alloc(outs[k], o->format, o->width, o->height, NULL, &err),
                             KEYER_OK);
            assert_int_equal(kr_device_frame_copy(dev, o->device, outs[k], o, NULL, &err), KEYER_OK);
        } else {
            assert_int_equal(keyer_frame_ref(outs[k], o, &err), KEYER_OK);
        }
        keyer_frame_destroy(&o);
        keyer_session_destroy(&s);
    }
    for (int k = 1; k < 3; k++) {
        double se = 0;
        for (int y = 0; y < outs[0]->height; y++)
            for (int x = 0; x < outs[0]->width; x++) {
                double d = (double)outs[0]->data[0][y * outs[0]->stride[0] + x] -
                           (double)outs[k]->data[0][y * outs[k]->stride[0] + x];
                se += d * d;
            }
        double mse = se / ((double)outs[0]->width * outs[0]->height);
        double p = mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
        printf("  pushed %s frames, matte vs CPU: PSNR %.2f dB\n", k == 2 ? "CUDA" : "host", p);
        assert_true(p >= 30.0);
    }
    for (int k = 0; k < 3; k++)
        keyer_frame_destroy(&outs[k]);
    keyer_frame_destroy(&photo);
    keyer_frame_destroy(&host);
    keyer_frame_destroy(&devf);
}

/* keyer_session_params::detect on CUDA: frames decoded by NVDEC, the detector batched on the
 * GPU, boxes drawn on the device frames; the same faces as the CPU per-frame detector on the
 * same clip decoded on the CPU (IoU >= 0.9: the decoders may differ by a code value). Clips of
 * DS_FRAMES (20) frames, or SHORT_FRAMES in the short mode (the same pan, faster: a face in 5
 * and 7 of the two clips' 8 frames, none in 3 and 1), with the same checks. */
static void test_session_detect_on_cuda(void **state)
{
    (void)state;
    enum { SHORT_FRAMES = 8 };
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_gpu");
    ds_check_session_detect(dir, KEYER_DEVICE_CUDA, 0.9f,
                            kt_test_short() ? SHORT_FRAMES : DS_FRAMES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_file_matches_cpu),
        cmocka_unit_test(test_forced_gpu_failure_loses_nothing),
        cmocka_unit_test(test_pushed_frames_on_cuda),
        cmocka_unit_test(test_session_detect_on_cuda),
    };
    return KT_GPU_RUN_GROUP(tests, setup, NULL);
}
