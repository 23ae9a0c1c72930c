/* NVENC by default on a CUDA GPU (label gpu; exits 77 without a device): a session's outputs
 * whose codec is left to keyer, computed on the GPU (device frames: NVENC would take them
 * directly, x264/x265 get a download) and on the CPU (host frames: FFmpeg uploads them to
 * NVENC), use NVENC exactly when the session's probe (CUDA frames of device 0's primary
 * context, as the writer opens NVENC) says it opens, else libx264 / libx265; one info line
 * names the choice and, for the fallback, the same reason a probe of its own gives; the output
 * holds every frame in the codec asked for. On a GPU without NVENC (the H100) this is the
 * fallback for real; on a GPU with NVENC (RTX, L4, ...) it is a real NVENC encode. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libavformat/avformat.h>

#include "core/device.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "kt_io.h"
#include "testutil.h"
#include "kt_gpu.h"

/* libx265 3.5 leaks its frame filters when an encoder closes (inside the library, not keyer):
 * keep LeakSanitizer from reporting it. Read by ASan builds only. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libx265.so\n"; }

enum { W = 640, H = 360, N = 30 };

static char dir[1024], sample[1200];
static char choice[4096];
static int choices;

static void capture(void *opaque, keyer_log_level level, const char *msg)
{
    (void)opaque;
    if (level == KEYER_LOG_INFO && strstr(msg, ": encoder: ")) {
        choices++;
        snprintf(choice, sizeof(choice), "%s", msg);
    }
}

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "io_encoder_gpu");
    snprintf(sample, sizeof(sample), "%s/in.mp4", dir);
    kt_make_clip(sample, W, H, N, 30);
    return 0;
}

/* Frames and codec of the video stream of @p path. */
static int64_t count_frames(const char *path, enum AVCodecID *id)
{
    AVFormatContext *fc = NULL;
    assert_int_equal(avformat_open_input(&fc, path, NULL, NULL), 0);
    assert_true(avformat_find_stream_info(fc, NULL) >= 0);
    int v = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    assert_true(v >= 0);
    *id = fc->streams[v]->codecpar->codec_id;
    AVPacket *pkt = av_packet_alloc();
    int64_t n = 0;
    while (av_read_frame(fc, pkt) >= 0) {
        n += pkt->stream_index == v;
        av_packet_unref(pkt);
    }
    av_packet_free(&pkt);
    avformat_close_input(&fc);
    return n;
}

static void run_case(keyer_device_kind device, const char *codec, const char *name)
{
    const char *nvenc = codec ? "hevc_nvenc" : "h264_nvenc";
    const char *sw = codec ? "libx265" : "libx264";
    enum AVCodecID want = codec ? AV_CODEC_ID_HEVC : AV_CODEC_ID_H264;
    if (!avcodec_find_encoder_by_name(sw) || !avcodec_find_encoder_by_name(nvenc)) {
        print_message("    libavcodec lacks %s or %s: skipped\n", sw, nvenc);
        return;
    }
    /* the answer of a probe of the test's own, on the same device */
    keyer_encoder_probe *probe = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_encoder_probe_create(0, &probe, &err), KEYER_OK);
    char why[512];
    int opens = keyer_encoder_probe_nvenc(probe, nvenc, why, sizeof(why));
    keyer_encoder_probe_destroy(&probe);
    print_message("    %s on cuda:0: %s%s\n", nvenc, opens ? "opens" : "does not open: ",
                  opens ? "" : why);

    char out[1200];
    snprintf(out, sizeof(out), "%s/%s", dir, name);
    keyer_logger lg = {KEYER_LOG_INFO, capture, NULL};
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = device;
    sp.logger = &lg;
    sp.model = "selfie-landscape";
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    keyer_session *s = NULL;
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = sample;
    fp.output = out;
    fp.writer.codec = codec;
    fp.writer.preset = "ultrafast"; /* p1 on NVENC */
    choices = 0;
    if (keyer_session_add_file(s, &fp, NULL, &err) || keyer_session_run(s, &err))
        fail_msg("%s: %s", name, err.message);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    keyer_stream_report sr;
    keyer_session_get_stream_report(s, 0, &sr, NULL);
    keyer_session_destroy(&s);
    print_message("    %s: device %s, encoder %s, %lld frames\n", name, rep.device, sr.encoder,
                  (long long)rep.frames_written);
    assert_int_equal(rep.frames_written, N);
    if (device == KEYER_DEVICE_CUDA)
        assert_int_equal(strncmp(rep.device, "cuda:", 5), 0);
    assert_string_equal(sr.encoder, opens ? nvenc : sw);
    assert_int_equal(choices, 1);
    char line[4096];
    if (opens)
        snprintf(line, sizeof(line), "%s: encoder: %s on cuda:0", out, nvenc);
    else
        snprintf(line, sizeof(line), "%s: encoder: %s (NVENC unavailable: %s)", out, sw, why);
    assert_string_equal(choice, line);
    enum AVCodecID id = AV_CODEC_ID_NONE;
    assert_int_equal(count_frames(out, &id), N);
    assert_int_equal(id, want);
    unlink(out);
}

static void test_cuda_compute(void **state)
{
    (void)state;
    run_case(KEYER_DEVICE_CUDA, NULL, "cuda_h264.mp4");
    run_case(KEYER_DEVICE_CUDA, "hevc", "cuda_hevc.mp4");
}

static void test_cpu_compute(void **state)
{
    (void)state;
    run_case(KEYER_DEVICE_CPU, NULL, "cpu_h264.mkv");
}

static int teardown(void **state)
{
    (void)state;
    unlink(sample);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_compute),
        cmocka_unit_test(test_cpu_compute),
    };
    return KT_GPU_RUN_GROUP(tests, setup, teardown);
}
