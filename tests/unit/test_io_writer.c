/* Video writer round trips on real media (decode -> encode -> decode): frame count,
 * timestamps, size, frame rate and audio packets (checksums) survive; alpha outputs (ProRes
 * 4444, VP9 in WebM, PNG); y4m/raw on standard output; audio re-encoded only when the
 * container needs it; NVENC fallback; bad parameters; a full disk and an interrupted run
 * leave a valid file with every frame written before. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libavformat/avformat.h>

#include "keyer/io.h"
#include "kt_io.h"

/* libx265 3.5 leaks its frame filters when an encoder closes (inside the library, not keyer):
 * keep LeakSanitizer from reporting it. Read by ASan builds only. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libx265.so\n"; }

static char dir[512];
static char mp4[1024]; /* 48 frames 320x240 24 fps H.264 + AAC */
static char pcm_mkv[1024]; /* same with PCM audio in Matroska */

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "io-writer");
    snprintf(mp4, sizeof(mp4), "%s/sample.mp4", dir);
    snprintf(pcm_mkv, sizeof(pcm_mkv), "%s/pcm.mkv", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    kt_make_sample(mp4, &p);
    p.audio_codec = "pcm_s16le";
    kt_make_sample(pcm_mkv, &p);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(mp4);
    unlink(pcm_mkv);
    rmdir(dir);
    return 0;
}

static keyer_writer_params params_for(const keyer_video_info *vi)
{
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate;
    wp.time_base = vi->time_base;
    return wp;
}

/* Decodes @p in and encodes every frame to @p out with @p wp (copying its streams). */
static void transcode(const char *in, const char *out, keyer_writer_params wp,
                      const keyer_reader_params *rp)
{
    keyer_reader *r = NULL;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(in, rp ? rp : kt_cpu(), &r, &err))
        fail_msg("%s", err.message);
    const keyer_video_info *vi = keyer_reader_info(r);
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate;
    wp.time_base = vi->time_base;
    wp.copy_from = r;
    if (keyer_writer_open(out, &wp, &w, &err))
        fail_msg("%s", err.message);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    keyer_status st;
    while ((st = keyer_reader_read(r, f, &err)) == KEYER_OK)
        if (keyer_writer_write(w, f, &err))
            fail_msg("%s", err.message);
    assert_int_equal(st, KEYER_STATUS_END);
    if (keyer_writer_close(w, &err))
        fail_msg("%s", err.message);
    keyer_writer_destroy(&w);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
}

/* The first @p n timestamps of @p b equal those of @p a after rescaling to a's time base.
 * Matroska/WebM (@p exact 0) store milliseconds and cannot start before zero: when the
 * input's audio starts before its video (AAC priming, B-frame delay) every stream is shifted
 * by the same amount, so there the differences between frames must match to 1 ms. */
static void assert_same_times(const kt_stream *a, const kt_stream *b, int n, int exact)
{
    assert_true(a->n >= n && b->n >= n);
    AVRational ta = {a->info.time_base.num, a->info.time_base.den};
    AVRational tb = {b->info.time_base.num, b->info.time_base.den};
    for (int i = 0; i < n; i++) {
        if (exact) {
            int64_t t = av_rescale_q(b->pts[i], tb, ta);
            if (t != a->pts[i])
                fail_msg("frame %d: pts %lld, expected %lld", i, (long long)t, (long long)a->pts[i]);
        } else {
            int64_t da = av_rescale_q(a->pts[i] - a->pts[0], ta, AV_TIME_BASE_Q);
            int64_t db = av_rescale_q(b->pts[i] - b->pts[0], tb, AV_TIME_BASE_Q);
            int64_t shift = av_rescale_q(b->pts[0], tb, AV_TIME_BASE_Q) -
                            av_rescale_q(a->pts[0], ta, AV_TIME_BASE_Q);
            if (llabs(da - db) > 1000 || llabs(shift) > 100000)
                fail_msg("frame %d: at %lld us after the first, expected %lld (shift %lld us)", i,
                         (long long)db, (long long)da, (long long)shift);
        }
    }
}

static void round_trip(const char *name, keyer_writer_params wp, int check_audio, int exact)
{
    char out[1024];
    snprintf(out, sizeof(out), "%s/%s", dir, name);
    transcode(mp4, out, wp, NULL);
    kt_stream *a = kt_read_stream(mp4, NULL, 1);
    kt_stream *b = kt_read_stream(out, NULL, 1);
    assert_int_equal(b->info.width, 320);
    assert_int_equal(b->info.height, 240);
    assert_int_equal(b->info.frame_rate.num, 24);
    assert_int_equal(b->info.frame_rate.den, 1);
    assert_int_equal(b->n, a->n);
    assert_same_times(a, b, a->n, exact);
    double worst = 99;
    for (int i = 0; i < a->n; i++) {
        double p = kt_psnr_plane0(a->frames[i], b->frames[i], 1);
        worst = p < worst ? p : worst;
    }
    print_message("    %s: %d frames, worst luma PSNR %.1f dB\n", name, b->n, worst);
    assert_true(worst > 30.0);
    assert_int_equal(b->stats.corrupt_frames, 0);
    if (check_audio) {
        kt_audio aa, ab;
        kt_audio_packets(mp4, &aa);
        kt_audio_packets(out, &ab);
        assert_true(aa.n > 90);
        assert_int_equal(ab.codec_id, aa.codec_id);
        assert_int_equal(ab.n, aa.n);
        assert_int_equal(ab.bytes, aa.bytes);
        assert_memory_equal(ab.sum, aa.sum, sizeof(uint32_t) * (size_t)aa.n);
        assert_int_equal(b->info.has_audio, 1);
    }
    kt_stream_free(&a);
    kt_stream_free(&b);
    unlink(out);
}

static void test_round_trip_mp4_fragmented(void **state)
{
    (void)state;
    round_trip("frag.mp4", keyer_writer_params_defaults(), 1, 1);
}

static void test_round_trip_mp4_moov(void **state)
{
    (void)state;
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.fragmented = 0;
    wp.preset = "veryfast";
    wp.quality = 20;
    round_trip("moov.mp4", wp, 1, 1);
}

static void test_round_trip_mkv_and_mov(void **state)
{
    (void)state;
    round_trip("copy.mkv", keyer_writer_params_defaults(), 1, 0);
    round_trip("copy.mov", keyer_writer_params_defaults(), 1, 1);
    if (avcodec_find_encoder_by_name("libx265")) {
        keyer_writer_params wp = keyer_writer_params_defaults();
        wp.codec = "libx265";
        wp.preset = "ultrafast";
        round_trip("hevc.mp4", wp, 1, 1);
    }
}

/* Split decode (2 sessions) feeding the writer: same frames, same times, audio copied. */
static void test_round_trip_split_reader(void **state)
{
    (void)state;
    char out[1024];
    snprintf(out, sizeof(out), "%s/split.mp4", dir);
    keyer_reader_params rp = *kt_cpu();
    rp.segments = 2;
    transcode(mp4, out, keyer_writer_params_defaults(), &rp);
    kt_stream *a = kt_read_stream(mp4, NULL, 0);
    kt_stream *b = kt_read_stream(out, NULL, 0);
    assert_int_equal(b->n, 48);
    assert_same_times(a, b, 48, 1);
    kt_audio aa, ab;
    kt_audio_packets(mp4, &aa);
    kt_audio_packets(out, &ab);
    assert_int_equal(ab.n, aa.n);
    assert_memory_equal(ab.sum, aa.sum, sizeof(uint32_t) * (size_t)aa.n);
    kt_stream_free(&a);
    kt_stream_free(&b);
    unlink(out);
}

/* PCM cannot go into MP4: it is re-encoded (AAC), its length kept; MKV copies it as is. */
static void test_audio_reencoded_only_when_needed(void **state)
{
    (void)state;
    char out[1024];
    kt_audio src, got;
    kt_audio_packets(pcm_mkv, &src);
    assert_int_equal(src.codec_id, AV_CODEC_ID_PCM_S16LE);
    snprintf(out, sizeof(out), "%s/pcm-to-aac.mp4", dir);
    transcode(pcm_mkv, out, keyer_writer_params_defaults(), NULL);
    kt_audio_packets(out, &got);
    assert_int_equal(got.codec_id, AV_CODEC_ID_AAC);
    int64_t src_len = src.samples_time_us - src.start_us, got_len = got.samples_time_us - got.start_us;
    print_message("    PCM %lld us -> AAC %lld us (with encoder priming and padding)\n",
                  (long long)src_len, (long long)got_len);
    assert_true(got_len >= src_len && got_len - src_len < 70000);
    kt_stream *s = kt_read_stream(out, NULL, 0);
    assert_int_equal(s->n, 48);
    kt_stream_free(&s);
    unlink(out);
    snprintf(out, sizeof(out), "%s/pcm-copy.mkv", dir);
    transcode(pcm_mkv, out, keyer_writer_params_defaults(), NULL);
    kt_audio_packets(out, &got);
    assert_int_equal(got.codec_id, AV_CODEC_ID_PCM_S16LE);
    assert_int_equal(got.n, src.n);
    assert_memory_equal(got.sum, src.sum, sizeof(uint32_t) * (size_t)src.n);
    unlink(out);
}

/* RGBA frames with a real alpha ramp. */
static kt_stream *rgba_frames(int n)
{
    keyer_reader_params rp = *kt_cpu();
    rp.format = KEYER_PIXEL_FORMAT_RGBA;
    kt_stream *s = kt_read_stream(mp4, &rp, 1);
    assert_true(s->n >= n);
    for (int i = 0; i < n; i++) {
        keyer_frame *f = s->frames[i];
        for (int y = 0; y < f->height; y++)
            for (int x = 0; x < f->width; x++)
                f->data[0][y * f->stride[0] + 4 * x + 3] = (uint8_t)((x * 255) / (f->width - 1));
    }
    return s;
}

/* Writes @p n RGBA frames with alpha to @p name and returns the largest mean alpha error. */
static double alpha_round_trip(const char *name, const char *codec, int n, const char *want_codec)
{
    char out[1024];
    snprintf(out, sizeof(out), "%s/%s", dir, name);
    kt_stream *src = rgba_frames(n);
    keyer_writer_params wp = params_for(&src->info);
    wp.alpha = 1;
    wp.codec = codec;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_writer_open(out, &wp, &w, &err))
        fail_msg("%s", err.message);
    for (int i = 0; i < n; i++)
        if (keyer_writer_write(w, src->frames[i], &err))
            fail_msg("%s", err.message);
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    keyer_writer_destroy(&w);
    keyer_reader_params rp = *kt_cpu();
    rp.format = KEYER_PIXEL_FORMAT_RGBA;
    kt_stream *back = kt_read_stream(out, &rp, 1);
    assert_int_equal(back->n, n);
    assert_int_equal(back->info.has_alpha, 1);
    assert_string_equal(back->info.codec, want_codec);
    assert_same_times(src, back, n, strstr(name, ".webm") == NULL);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        const keyer_frame *a = src->frames[i], *b = back->frames[i];
        for (int y = 0; y < a->height; y++)
            for (int x = 0; x < a->width; x++)
                sum += abs(a->data[0][y * a->stride[0] + 4 * x + 3] -
                           b->data[0][y * b->stride[0] + 4 * x + 3]);
        sum /= (double)(a->width * a->height);
        worst = sum > worst ? sum : worst;
    }
    print_message("    %s: alpha mean error %.3f\n", name, worst);
    kt_stream_free(&back);
    kt_stream_free(&src);
    unlink(out);
    return worst;
}

static void test_alpha_outputs(void **state)
{
    (void)state;
    /* ProRes 4444 (10-bit alpha) and VP9 alpha; codec chosen from the extension. */
    if (avcodec_find_decoder(AV_CODEC_ID_PRORES))
        assert_true(alpha_round_trip("alpha.mov", NULL, 6, "prores") < 1.0);
    else
        print_message("    libavcodec has no ProRes decoder: ProRes alpha not tested\n");
    if (avcodec_find_encoder_by_name("libvpx-vp9") && avcodec_find_decoder_by_name("libvpx-vp9"))
        assert_true(alpha_round_trip("alpha.webm", NULL, 6, "vp9") < 2.0);
    else
        print_message("    libvpx-vp9 missing: VP9 alpha not tested\n");
    /* Alpha where the container cannot keep it. */
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = 320;
    wp.height = 240;
    wp.frame_rate = (keyer_rational){24, 1};
    wp.alpha = 1;
    char out[1024];
    snprintf(out, sizeof(out), "%s/alpha.mp4", dir);
    keyer_writer *w = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_STATUS_UNSUPPORTED);
    assert_non_null(strstr(err.message, "alpha"));
    assert_false(kt_exists(out));
}

/* y4m and raw video written to standard output. */
static void test_stdout(void **state)
{
    (void)state;
    char out[1024];
    kt_stream *src = kt_read_stream(mp4, NULL, 1);
    const char *formats[] = {"y4m", "raw"};
    for (int k = 0; k < 2; k++) {
        snprintf(out, sizeof(out), "%s/stdout.%s", dir, formats[k]);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        fflush(stdout);
        int saved = dup(1);
        assert_int_equal(dup2(fd, 1), 1);
        close(fd);
        keyer_writer_params wp = params_for(&src->info);
        wp.format = formats[k];
        keyer_writer *w = NULL;
        keyer_error err = {0};
        keyer_status st = keyer_writer_open("-", &wp, &w, &err);
        for (int i = 0; st == KEYER_OK && i < 10; i++)
            st = keyer_writer_write(w, src->frames[i], &err);
        keyer_status cst = w ? keyer_writer_close(w, &err) : KEYER_OK;
        keyer_writer_destroy(&w);
        dup2(saved, 1);
        close(saved);
        if (st || cst)
            fail_msg("%s", err.message);
        keyer_reader_params rp = *kt_cpu();
        if (k == 1) {
            rp.input_format = "rawvideo";
            rp.input_options = "video_size=320x240:pixel_format=yuv420p:framerate=24";
        }
        kt_stream *back = kt_read_stream(out, &rp, 1);
        assert_int_equal(back->n, 10);
        for (int i = 0; i < 10; i++)
            assert_true(kt_frames_equal(back->frames[i], src->frames[i]));
        if (k == 1) {
            struct stat sb;
            assert_int_equal(stat(out, &sb), 0);
            assert_int_equal(sb.st_size, 10 * 320 * 240 * 3 / 2);
        }
        kt_stream_free(&back);
        unlink(out);
    }
    /* "-" needs a container name. */
    keyer_writer_params wp = params_for(&src->info);
    keyer_writer *w = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_writer_open("-", &wp, &w, &err), KEYER_STATUS_INVALID_ARGUMENT);
    kt_stream_free(&src);
}

static char last_log[512];
static int nvenc_lines;
static void capture(void *opaque, keyer_log_level level, const char *msg)
{
    (void)opaque;
    if (level == KEYER_LOG_WARNING && strstr(msg, "nvenc")) {
        nvenc_lines++;
        snprintf(last_log, sizeof(last_log), "%s", msg);
    }
}

/* Without an NVENC engine (no GPU here, none on an H100) h264_nvenc falls back to libx264
 * with one log line, and the file is still written. */
static void test_nvenc_fallback(void **state)
{
    (void)state;
    if (!avcodec_find_encoder_by_name("h264_nvenc")) {
        print_message("    libavcodec has no h264_nvenc: nothing to fall back from\n");
        return;
    }
    char out[1024];
    snprintf(out, sizeof(out), "%s/nvenc.mp4", dir);
    keyer_logger lg = {KEYER_LOG_WARNING, capture, NULL};
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.codec = "h264_nvenc";
    wp.preset = "p4";
    wp.quality = 25;
    wp.logger = &lg;
    nvenc_lines = 0;
    keyer_reader *r = NULL;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_reader_open(mp4, kt_cpu(), &r, &err), KEYER_OK);
    const keyer_video_info *vi = keyer_reader_info(r);
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate;
    wp.time_base = vi->time_base;
    if (keyer_writer_open(out, &wp, &w, &err))
        fail_msg("%s", err.message);
    if (!strcmp(keyer_writer_codec(w), "h264_nvenc")) {
        print_message("    this machine has NVENC: no fallback to test\n");
    } else {
        assert_string_equal(keyer_writer_codec(w), "libx264");
        assert_int_equal(nvenc_lines, 1);
        print_message("    logged: %s\n", last_log);
    }
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    while (keyer_reader_read(r, f, &err) == KEYER_OK)
        assert_int_equal(keyer_writer_write(w, f, &err), KEYER_OK);
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    assert_int_equal(keyer_writer_frames(w), 48);
    keyer_writer_destroy(&w);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    kt_stream *s = kt_read_stream(out, NULL, 0);
    assert_int_equal(s->n, 48);
    kt_stream_free(&s);
    unlink(out);
}

static void test_bad_parameters(void **state)
{
    (void)state;
    char out[1024];
    keyer_writer *w = NULL;
    keyer_error err = {0};
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = 320;
    wp.height = 240;
    wp.frame_rate = (keyer_rational){24, 1};

    snprintf(out, sizeof(out), "%s/x.mp4", dir);
    keyer_writer_params bad = wp;
    bad.codec = "no-such-encoder";
    assert_int_equal(keyer_writer_open(out, &bad, &w, &err), KEYER_STATUS_UNSUPPORTED);
    assert_non_null(strstr(err.message, "no-such-encoder"));
    assert_non_null(strstr(err.message, out));
    assert_false(kt_exists(out));
    bad = wp;
    bad.codec = "prores_ks"; /* MP4 cannot hold ProRes */
    assert_int_equal(keyer_writer_open(out, &bad, &w, &err), KEYER_STATUS_UNSUPPORTED);
    assert_false(kt_exists(out));
    bad = wp;
    bad.pixel_format = "nonsense";
    assert_int_equal(keyer_writer_open(out, &bad, &w, &err), KEYER_STATUS_INVALID_ARGUMENT);
    bad = wp;
    bad.frame_rate = (keyer_rational){0, 1};
    assert_int_equal(keyer_writer_open(out, &bad, &w, &err), KEYER_STATUS_INVALID_ARGUMENT);
    bad = wp;
    bad.rotation = 45;
    assert_int_equal(keyer_writer_open(out, &bad, &w, &err), KEYER_STATUS_INVALID_ARGUMENT);
    snprintf(out, sizeof(out), "%s/x.unknownext", dir);
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_STATUS_UNSUPPORTED);
    assert_non_null(strstr(err.message, out));
    /* Unwritable place: a directory that does not exist, a parent that is a file. */
    snprintf(out, sizeof(out), "%s/missing/dir/x.mp4", dir);
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, out));
    assert_null(w);
    snprintf(out, sizeof(out), "%s/x.mp4/y.mp4", dir);
    char file[1024];
    snprintf(file, sizeof(file), "%s/x.mp4", dir);
    assert_int_equal(kt_write_file(file, "x", 1), 0);
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_STATUS_IO);
    unlink(file);
    /* Frames of another size; writes after close. */
    snprintf(out, sizeof(out), "%s/size.mkv", dir);
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_OK);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGB24, 64, 48, NULL, NULL), KEYER_OK);
    assert_int_equal(keyer_writer_write(w, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "64x48"));
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    assert_int_equal(keyer_writer_write(w, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_writer_destroy(&w);
    keyer_writer_destroy(NULL);
    keyer_frame_destroy(&f);
    unlink(out);
}

/* Writes the sample to @p out in this process; returns 0, or 1 when a write or close failed
 * (message in @p msg). Stops after @p stop_after frames when > 0 (as an interrupted run). */
static int write_until(const char *out, int fragmented, char *msg, size_t n)
{
    keyer_reader *r = NULL;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(mp4, kt_cpu(), &r, &err))
        return snprintf(msg, n, "%s", err.message), 2;
    keyer_writer_params wp = params_for(keyer_reader_info(r));
    wp.copy_from = r;
    wp.fragmented = fragmented;
    wp.codec_options = "x264-params='keyint=6'";
    if (keyer_writer_open(out, &wp, &w, &err)) {
        keyer_reader_destroy(&r);
        return snprintf(msg, n, "%s", err.message), 1;
    }
    keyer_frame *f = NULL;
    keyer_frame_create(&f, NULL);
    int failed = 0;
    while (keyer_reader_read(r, f, &err) == KEYER_OK)
        if (keyer_writer_write(w, f, &err)) {
            failed = 1;
            snprintf(msg, n, "%s", err.message);
            break;
        }
    keyer_error cerr = {0};
    if (keyer_writer_close(w, &cerr) && !failed) {
        failed = 1;
        snprintf(msg, n, "%s", cerr.message);
    }
    keyer_writer_destroy(&w);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    return failed;
}

/* A disk that fills up (a file-size limit in a child process): the write fails with an error
 * naming the file, and what was written is a valid file with the first frames. */
static void test_disk_full(void **state)
{
    (void)state;
    char out[1024], msg[512] = "";
    snprintf(out, sizeof(out), "%s/full.mp4", dir);
    assert_int_equal(write_until(out, 1, msg, sizeof(msg)), 0);
    struct stat sb;
    assert_int_equal(stat(out, &sb), 0);
    unlink(out);
    off_t limit = sb.st_size * 55 / 100;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
        setrlimit(RLIMIT_FSIZE, &rl);
        int rc = write_until(out, 1, msg, sizeof(msg));
        fprintf(stderr, "    child: %s\n", msg);
        _exit(rc == 1 && strstr(msg, out) ? 0 : 3);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_int_equal(stat(out, &sb), 0);
    assert_true(sb.st_size <= limit);
    kt_stream *full = kt_read_stream(mp4, NULL, 0);
    kt_stream *part = kt_read_stream(out, NULL, 0);
    print_message("    %lld of %lld bytes: %d good frames of 48, %lld damaged\n",
                  (long long)sb.st_size, (long long)(limit * 100 / 55), part->n,
                  (long long)part->stats.corrupt_frames);
    assert_true(part->n >= 12 && part->n < 48);
    assert_same_times(full, part, part->n, 1);
    kt_stream_free(&part);
    kt_stream_free(&full);
    unlink(out);
}

/* An interrupted run (SIGINT while transcoding): reading stops, close finalises the file,
 * which holds exactly the frames processed (both fragmented and moov-at-end MP4). */
static keyer_reader *interrupt_target;
static void on_sigint(int sig)
{
    (void)sig;
    keyer_reader_interrupt(interrupt_target);
}

static void test_interrupted_run(void **state)
{
    (void)state;
    for (int frag = 0; frag < 2; frag++) {
        char out[1024];
        snprintf(out, sizeof(out), "%s/interrupted%d.mp4", dir, frag);
        keyer_reader *r = NULL;
        keyer_writer *w = NULL;
        keyer_error err = {0};
        assert_int_equal(keyer_reader_open(mp4, kt_cpu(), &r, &err), KEYER_OK);
        keyer_writer_params wp = params_for(keyer_reader_info(r));
        wp.copy_from = r;
        wp.fragmented = frag;
        assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_OK);
        interrupt_target = r;
        struct sigaction sa, old;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_sigint;
        sigaction(SIGINT, &sa, &old);
        keyer_frame *f = NULL;
        assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
        keyer_status st;
        int n = 0;
        while ((st = keyer_reader_read(r, f, &err)) == KEYER_OK) {
            assert_int_equal(keyer_writer_write(w, f, &err), KEYER_OK);
            if (++n == 20)
                raise(SIGINT);
        }
        sigaction(SIGINT, &old, NULL);
        assert_int_equal(st, KEYER_STATUS_INTERRUPTED);
        assert_int_equal(n, 20);
        assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
        keyer_writer_destroy(&w);
        keyer_frame_destroy(&f);
        keyer_reader_destroy(&r);
        kt_stream *full = kt_read_stream(mp4, NULL, 0);
        kt_stream *part = kt_read_stream(out, NULL, 0);
        assert_int_equal(part->n, 20);
        assert_int_equal(part->stats.corrupt_frames, 0);
        assert_same_times(full, part, 20, 1);
        kt_stream_free(&part);
        kt_stream_free(&full);
        unlink(out);
    }
}

/* Rotation and colour metadata are written and read back. */
static void test_metadata(void **state)
{
    (void)state;
    char out[1024];
    snprintf(out, sizeof(out), "%s/rotated.mp4", dir);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.rotation = 90;
    wp.matrix = KEYER_COLOR_MATRIX_BT709;
    transcode(mp4, out, wp, NULL);
    kt_stream *s = kt_read_stream(out, NULL, 1);
    assert_int_equal(s->info.rotation, 90);
    assert_int_equal(s->frames[0]->rotation, 90);
    assert_int_equal(s->info.matrix, KEYER_COLOR_MATRIX_BT709);
    assert_int_equal(s->frames[0]->matrix, KEYER_COLOR_MATRIX_BT709);
    assert_int_equal(s->frames[0]->range, KEYER_COLOR_RANGE_LIMITED);
    assert_int_equal(s->n, 48);
    kt_stream_free(&s);
    unlink(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_mp4_fragmented),
        cmocka_unit_test(test_round_trip_mp4_moov),
        cmocka_unit_test(test_round_trip_mkv_and_mov),
        cmocka_unit_test(test_round_trip_split_reader),
        cmocka_unit_test(test_audio_reencoded_only_when_needed),
        cmocka_unit_test(test_alpha_outputs),
        cmocka_unit_test(test_stdout),
        cmocka_unit_test(test_nvenc_fallback),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_interrupted_run),
        cmocka_unit_test(test_metadata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
