/* NVDEC through keyer_reader (exits 77 without a CUDA device):
 *  - H.264 (made here with libx264), HEVC 8-bit and HEVC Main 10 (tests/data, made with
 *    keyer_video_write_sample + libx265): device frames (NV12 / P010, CUDA memory of the
 *    primary context, all held at once) are bit-identical to libavcodec's software decoder;
 *  - split decode over several NVDEC sessions gives the same frames in order;
 *  - the decoder knobs (the shared legacy stream instead of one per decoder, extra surfaces,
 *    decode-ahead, with and without the split decode) give the same frames;
 *  - split decode keeps its NVDEC sessions from chunk to chunk (IDR cuts); the automatic
 *    split (segments_auto) opens its sessions once, and one session for a short file;
 *  - fallback to the CPU, logged, for a profile (H.264 High 10) and a size (4112 wide) NVDEC
 *    does not take;
 *  - host output formats from NVDEC, and device frames given to a CPU encoder.
 * The HEVC files were made with: keyer_sample_params p = keyer_sample_params_defaults();
 * p.frames = 24; p.audio_codec = NULL; p.codec = "libx265"; p.preset = "medium"; p.keyint = 12;
 * p.bframes = 3; (p.pixel_format = "yuv420p10le" for the 10-bit one), image messi5.jpg. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "keyer/io.h"
#include "kt_io.h"

static char dir[512];
static char h264[1024];   /* 640x360, 48 frames, B-frames */
static char h264_long[1024]; /* 96 frames, keyint 12 */

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "io-nvdec");
    snprintf(h264, sizeof(h264), "%s/h264.mp4", dir);
    snprintf(h264_long, sizeof(h264_long), "%s/long.mp4", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = 640;
    p.height = 360;
    p.noise = 4;
    p.bframes = 3;
    kt_make_sample(h264, &p);
    p.frames = 96;
    p.audio_codec = NULL;
    kt_make_sample(h264_long, &p);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(h264);
    unlink(h264_long);
    rmdir(dir);
    return 0;
}

/* libavcodec's software decoder: the reference. */
typedef struct ref_frames {
    int n;
    AVFrame *f[KT_MAX_FRAMES];
} ref_frames;

static void decode_reference(const char *path, ref_frames *out)
{
    memset(out, 0, sizeof(*out));
    AVFormatContext *fc = NULL;
    assert_int_equal(avformat_open_input(&fc, path, NULL, NULL), 0);
    assert_true(avformat_find_stream_info(fc, NULL) >= 0);
    const AVCodec *codec = NULL;
    int vs = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    assert_true(vs >= 0);
    AVCodecContext *dec = avcodec_alloc_context3(codec);
    assert_int_equal(avcodec_parameters_to_context(dec, fc->streams[vs]->codecpar), 0);
    dec->thread_count = 1;
    dec->pkt_timebase = fc->streams[vs]->time_base;
    assert_int_equal(avcodec_open2(dec, codec, NULL), 0);
    AVPacket *pkt = av_packet_alloc();
    int eof = 0;
    for (;;) {
        AVFrame *f = av_frame_alloc();
        int ret = avcodec_receive_frame(dec, f);
        if (ret == 0) {
            assert_true(out->n < KT_MAX_FRAMES);
            out->f[out->n++] = f;
            continue;
        }
        av_frame_free(&f);
        if (ret == AVERROR_EOF)
            break;
        assert_int_equal(ret, AVERROR(EAGAIN));
        if (eof)
            break;
        if (av_read_frame(fc, pkt) < 0) {
            eof = 1;
            avcodec_send_packet(dec, NULL);
            continue;
        }
        if (pkt->stream_index == vs)
            assert_int_equal(avcodec_send_packet(dec, pkt), 0);
        av_packet_unref(pkt);
    }
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fc);
}

static void free_reference(ref_frames *r)
{
    for (int i = 0; i < r->n; i++)
        av_frame_free(&r->f[i]);
}

/* Downloads device frame @p f (NV12 or P010) on CUDA stream @p stream and compares it with
 * software frame @p ref (yuv420p or yuv420p10le): returns the number of differing samples. */
static long compare_device_frame_on(const keyer_frame *f, const AVFrame *ref, cudaStream_t stream)
{
    int bps = f->format == KEYER_PIXEL_FORMAT_P010 ? 2 : 1;
    int w = f->width, h = f->height, cw = (w + 1) / 2, ch = (h + 1) / 2;
    uint8_t *y = malloc((size_t)w * h * bps), *uv = malloc((size_t)cw * 2 * ch * bps);
    assert_non_null(y);
    assert_non_null(uv);
    assert_int_equal(cudaMemcpy2DAsync(y, (size_t)w * bps, f->data[0], (size_t)f->stride[0],
                                       (size_t)w * bps, (size_t)h, cudaMemcpyDeviceToHost, stream),
                     cudaSuccess);
    assert_int_equal(cudaMemcpy2DAsync(uv, (size_t)cw * 2 * bps, f->data[1], (size_t)f->stride[1],
                                       (size_t)cw * 2 * bps, (size_t)ch, cudaMemcpyDeviceToHost,
                                       stream),
                     cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    long diff = 0;
    for (int r = 0; r < h; r++)
        for (int c = 0; c < w; c++) {
            int a = bps == 2 ? ((uint16_t *)y)[r * w + c] >> 6 : y[r * w + c];
            int b = bps == 2 ? ((const uint16_t *)(ref->data[0] + r * ref->linesize[0]))[c]
                             : ref->data[0][r * ref->linesize[0] + c];
            diff += a != b;
        }
    for (int r = 0; r < ch; r++)
        for (int c = 0; c < cw; c++)
            for (int k = 0; k < 2; k++) {
                int a = bps == 2 ? ((uint16_t *)uv)[(r * cw + c) * 2 + k] >> 6
                                 : uv[(r * cw + c) * 2 + k];
                const uint8_t *row = ref->data[1 + k] + r * ref->linesize[1 + k];
                int b = bps == 2 ? ((const uint16_t *)row)[c] : row[c];
                diff += a != b;
            }
    free(y);
    free(uv);
    return diff;
}

/* The same on the legacy default stream. */
static long compare_device_frame(const keyer_frame *f, const AVFrame *ref)
{
    return compare_device_frame_on(f, ref, cudaStreamLegacy);
}

/* The context that owns a device pointer is the device's primary context. */
static void assert_primary_context(const void *ptr, int ordinal)
{
    CUdevice dev;
    CUcontext primary = NULL, owner = NULL;
    assert_int_equal(cuDeviceGet(&dev, ordinal), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&primary, dev), CUDA_SUCCESS);
    assert_int_equal(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT,
                                           (CUdeviceptr)(uintptr_t)ptr), CUDA_SUCCESS);
    assert_ptr_equal(owner, primary);
    cuDevicePrimaryCtxRelease(dev);
}

/* Returns the reader's decoder set-ups (keyer_reader_stats::decoder_setups), and in
 * *@p decoded (when not NULL) the pictures its decoders were given (decoded_pictures). */
static int64_t check_bit_exact_counted(const char *path, keyer_pixel_format want, int frames,
                                       const keyer_reader_params *params, int64_t *decoded)
{
    ref_frames ref;
    decode_reference(path, &ref);
    assert_int_equal(ref.n, frames);
    keyer_reader_params p = *params;
    kt_stream *s = kt_read_stream(path, &p, 1); /* all frames held at once */
    assert_int_equal(s->info.hw_decode, 1);
    assert_int_equal(s->info.memory, KEYER_MEMORY_CUDA);
    assert_int_equal(s->info.format, want);
    assert_int_equal(s->stats.hw_fallback, 0);
    assert_int_equal(s->n, frames);
    long total = 0;
    for (int i = 0; i < s->n; i++) {
        const keyer_frame *f = s->frames[i];
        assert_int_equal(f->memory, KEYER_MEMORY_CUDA);
        assert_int_equal(f->format, want);
        assert_int_equal(f->device, 0);
        assert_int_equal(f->pts, ref.f[i]->best_effort_timestamp);
        total += compare_device_frame(f, ref.f[i]);
    }
    assert_primary_context(s->frames[0]->data[0], 0);
    print_message("    %s: %d NVDEC frames (%s), %ld samples differ from the CPU decoder\n", path,
                  s->n, keyer_pixel_format_name(want), total);
    assert_int_equal(total, 0);
    int64_t setups = s->stats.decoder_setups;
    if (decoded)
        *decoded = s->stats.decoded_pictures;
    kt_stream_free(&s);
    free_reference(&ref);
    return setups;
}

static int64_t check_bit_exact_with(const char *path, keyer_pixel_format want, int frames,
                                    const keyer_reader_params *params)
{
    return check_bit_exact_counted(path, want, frames, params, NULL);
}

static void check_bit_exact(const char *path, keyer_pixel_format want, int frames)
{
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    check_bit_exact_with(path, want, frames, &p);
}

/* The decoder knobs change where and how NVDEC works, never the frames: the legacy default
 * stream shared by every decoder (the old way), 8 extra surfaces, and both with the split
 * decode (each session's stream its own) are bit-identical to the CPU decoder. */
static void test_decoder_knobs(void **state)
{
    (void)state;
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    p.hw_shared_stream = 1;
    check_bit_exact_with(h264, KEYER_PIXEL_FORMAT_NV12, 48, &p);
    p.hw_shared_stream = 0;
    p.hw_surfaces = 8;
    check_bit_exact_with(h264, KEYER_PIXEL_FORMAT_NV12, 48, &p);
    check_bit_exact_with(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p);
    p.hw_surfaces = 0;
    p.segments = 3;
    check_bit_exact_with(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p);
    p.hw_shared_stream = 1;
    check_bit_exact_with(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p);
    /* decode-ahead: 4 and 8 more pictures in each session's reorder buffer, alone and with
     * the split decode */
    p.hw_shared_stream = 0;
    p.segments = 0;
    p.decode_ahead = 4;
    check_bit_exact_with(h264, KEYER_PIXEL_FORMAT_NV12, 48, &p);
    p.decode_ahead = 8;
    check_bit_exact_with(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p);
    p.segments = 2;
    check_bit_exact_with(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p);
}

/* Split decode over two NVDEC sessions keeps each session from chunk to chunk (96 frames, an
 * IDR picture every 12, chunks of 24: each session decodes two chunks): two set-ups, not four
 * (a flush between chunks made libavcodec create the NVDEC session and its surface pool again,
 * which collapsed many-stream runs with --decode-segments). Each chunk ends with its own last
 * frame: at each of the 3 chunk boundaries a session decodes at most its reorder delay (2 for
 * these B-frames) of the next chunk's pictures, at least 1 (before: one more, 9 in all). */
static void test_split_keeps_sessions(void **state)
{
    (void)state;
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    p.segments = 2;
    int64_t decoded = 0;
    int64_t setups = check_bit_exact_counted(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p,
                                             &decoded);
    print_message("    split over 2 NVDEC sessions: %lld decoder set-ups, %lld pictures decoded "
                  "for 96 frames\n", (long long)setups, (long long)decoded);
    assert_int_equal(setups, 2);
    assert_true(decoded >= 96 + 3 && decoded <= 96 + 2 * 3);
}

/* The session's decode_segments -1 opens its readers with segments 2 and segments_auto:
 * the 96-frame file (4 chunks) is decoded by two NVDEC sessions created once each (2 set-ups:
 * no single-session decoder is made first, as the reverted switch of an open reader did),
 * bit-exact; the 48-frame file (2 chunks, fewer than two per session) by one (1 set-up). */
static void test_split_auto_sessions(void **state)
{
    (void)state;
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    p.segments = 2;
    p.segments_auto = 1;
    int64_t two = check_bit_exact_with(h264_long, KEYER_PIXEL_FORMAT_NV12, 96, &p);
    int64_t one = check_bit_exact_with(h264, KEYER_PIXEL_FORMAT_NV12, 48, &p);
    print_message("    automatic split: %lld NVDEC set-ups (96 frames), %lld (48 frames)\n",
                  (long long)two, (long long)one);
    assert_int_equal(two, 2);
    assert_int_equal(one, 1);
}

static void test_h264_bit_exact(void **state)
{
    (void)state;
    check_bit_exact(h264, KEYER_PIXEL_FORMAT_NV12, 48);
}

static void test_hevc_bit_exact(void **state)
{
    (void)state;
    char path[1024];
    check_bit_exact(kt_data_path(path, sizeof(path), "sample_hevc.mp4"), KEYER_PIXEL_FORMAT_NV12, 24);
    check_bit_exact(kt_data_path(path, sizeof(path), "sample_hevc10.mp4"), KEYER_PIXEL_FORMAT_P010,
                    24);
}

/* A frame is complete when keyer_reader_read() returns, also for work on a non-blocking stream
 * (which waits neither for the decoder's own stream nor for the legacy default stream, where
 * the copies out of the NVDEC surfaces run with hw_shared_stream): the legacy stream is kept
 * busy with memsets before every read, then the frame is downloaded on a non-blocking stream
 * at once. */
static void frames_complete(int shared)
{
    ref_frames ref;
    decode_reference(h264, &ref);
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    p.hw_shared_stream = shared;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(h264, &p, &r, &err) || keyer_frame_create(&f, &err))
        fail_msg("%s: %s", h264, err.message);
    cudaStream_t other;
    assert_int_equal(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    const size_t busy_bytes = (size_t)1 << 30;
    void *busy = NULL;
    assert_int_equal(cudaMalloc(&busy, busy_bytes), cudaSuccess);
    long total = 0;
    int frames = 0;
    for (int i = 0; i < ref.n; i++) {
        for (int k = 0; k < 4; k++) /* ~1.4 ms of work ahead of the reader's copies */
            assert_int_equal(cudaMemsetAsync(busy, k, busy_bytes, cudaStreamLegacy), cudaSuccess);
        if (keyer_reader_read(r, f, &err))
            fail_msg("frame %d: %s", i, err.message);
        assert_int_equal(f->memory, KEYER_MEMORY_CUDA);
        total += compare_device_frame_on(f, ref.f[i], other);
        frames++;
    }
    print_message("    %d NVDEC frames (%s stream) read on a non-blocking stream right after "
                  "keyer_reader_read: %ld samples differ from the CPU decoder\n",
                  frames, shared ? "the shared legacy" : "the decoder's own", total);
    assert_int_equal(frames, 48);
    assert_int_equal(total, 0);
    assert_int_equal(cudaFree(busy), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(other), cudaSuccess);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    free_reference(&ref);
}

static void test_frames_complete_for_other_streams(void **state)
{
    (void)state;
    frames_complete(0);
    frames_complete(1);
}

static void test_split_sessions(void **state)
{
    (void)state;
    ref_frames ref;
    decode_reference(h264_long, &ref);
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    p.segments = 4;
    kt_stream *s = kt_read_stream(h264_long, &p, 1);
    assert_int_equal(s->info.segments, 4);
    assert_int_equal(s->info.memory, KEYER_MEMORY_CUDA);
    assert_int_equal(s->n, 96);
    long total = 0;
    for (int i = 0; i < s->n; i++) {
        assert_int_equal(s->pts[i], ref.f[i]->best_effort_timestamp);
        assert_int_equal(s->frames[i]->memory, KEYER_MEMORY_CUDA);
        total += compare_device_frame(s->frames[i], ref.f[i]);
    }
    print_message("    split over %d NVDEC sessions: %d frames, %ld samples differ\n",
                  s->info.segments, s->n, total);
    assert_int_equal(total, 0);
    kt_stream_free(&s);
    free_reference(&ref);
}

static int fallback_lines;
static void count_fallback(void *opaque, keyer_log_level level, const char *msg)
{
    (void)opaque;
    if (level <= KEYER_LOG_WARNING && strstr(msg, "NVDEC") && strstr(msg, "CPU")) {
        fallback_lines++;
        print_message("    logged: %s\n", msg);
    }
}

static void check_fallback(const char *path, int frames)
{
    keyer_logger lg = {KEYER_LOG_WARNING, count_fallback, NULL};
    keyer_reader_params p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CUDA;
    p.logger = &lg;
    fallback_lines = 0;
    kt_stream *s = kt_read_stream(path, &p, 0);
    assert_int_equal(s->n, frames);
    assert_int_equal(s->info.memory, KEYER_MEMORY_HOST);
    assert_int_equal(s->info.hw_decode, 0);
    assert_int_equal(s->stats.hw_fallback, 1);
    assert_int_equal(fallback_lines, 1);
    kt_stream_free(&s);
}

static void test_fallback_profile_and_size(void **state)
{
    (void)state;
    char path[1024];
    keyer_sample_params p = keyer_sample_params_defaults();
    p.audio_codec = NULL;
    p.frames = 6;
    /* H.264 High 10: NVDEC decodes 8-bit H.264 only. */
    snprintf(path, sizeof(path), "%s/high10.mkv", dir);
    p.pixel_format = "yuv420p10le";
    char img[1024];
    keyer_error err = {0};
    if (keyer_video_write_sample(path, kt_data_path(img, sizeof(img), "grace_hopper.jpg"), &p, &err)) {
        print_message("    no 10-bit libx264 (%s): profile fallback not tested\n", err.message);
    } else {
        check_fallback(path, 6);
        unlink(path);
    }
    /* 4112 pixels wide: above NVDEC's H.264 limit of 4096. */
    snprintf(path, sizeof(path), "%s/wide.mkv", dir);
    p.pixel_format = "yuv420p";
    p.width = 4112;
    p.height = 64;
    kt_make_sample(path, &p);
    check_fallback(path, 6);
    unlink(path);
    /* A codec without NVDEC (PNG): logged once, decoded on the CPU. */
    snprintf(path, sizeof(path), "%s/png.mkv", dir);
    p.codec = "png";
    p.pixel_format = "rgb24";
    p.width = 320;
    p.height = 240;
    kt_make_sample(path, &p);
    check_fallback(path, 6);
    unlink(path);
}

/* Host formats from NVDEC (downloaded, converted) match the CPU decoder's. */
static void test_host_formats(void **state)
{
    (void)state;
    keyer_reader_params gpu = keyer_reader_params_defaults();
    gpu.device = KEYER_DECODE_DEVICE_CUDA;
    gpu.format = KEYER_PIXEL_FORMAT_NV12;
    keyer_reader_params cpu = gpu;
    cpu.device = KEYER_DECODE_DEVICE_CPU;
    kt_stream *a = kt_read_stream(h264, &gpu, 1);
    kt_stream *b = kt_read_stream(h264, &cpu, 1);
    assert_int_equal(a->info.hw_decode, 1);
    assert_int_equal(a->info.memory, KEYER_MEMORY_HOST);
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++)
        assert_true(kt_frames_equal(a->frames[i], b->frames[i]));
    kt_stream_free(&a);
    kt_stream_free(&b);
    gpu.format = cpu.format = KEYER_PIXEL_FORMAT_RGB24;
    a = kt_read_stream(h264, &gpu, 1);
    b = kt_read_stream(h264, &cpu, 1);
    double worst = 99;
    for (int i = 0; i < a->n; i++) {
        double p = kt_psnr_plane0(a->frames[i], b->frames[i], 3);
        worst = p < worst ? p : worst;
    }
    print_message("    RGB from NVDEC vs from the CPU decoder: worst PSNR %.1f dB\n", worst);
    assert_true(worst > 45.0);
    kt_stream_free(&a);
    kt_stream_free(&b);
}

/* Device frames into a CPU encoder (libx264) and into h264_nvenc, which the H100 lacks. */
static void test_device_frames_to_writer(void **state)
{
    (void)state;
    const char *codecs[] = {"libx264", "h264_nvenc"};
    for (int k = 0; k < 2; k++) {
        char out[1024];
        snprintf(out, sizeof(out), "%s/from-gpu-%d.mkv", dir, k);
        keyer_reader_params rp = keyer_reader_params_defaults();
        rp.device = KEYER_DECODE_DEVICE_CUDA;
        keyer_reader *r = NULL;
        keyer_writer *w = NULL;
        keyer_error err = {0};
        if (keyer_reader_open(h264, &rp, &r, &err))
            fail_msg("%s", err.message);
        const keyer_video_info *vi = keyer_reader_info(r);
        keyer_writer_params wp = keyer_writer_params_defaults();
        wp.width = vi->width;
        wp.height = vi->height;
        wp.frame_rate = vi->frame_rate;
        wp.time_base = vi->time_base;
        wp.copy_from = r;
        wp.codec = codecs[k];
        if (keyer_writer_open(out, &wp, &w, &err))
            fail_msg("%s", err.message);
        print_message("    %s requested: encoding with %s\n", codecs[k], keyer_writer_codec(w));
        keyer_frame *f = NULL;
        keyer_frame_create(&f, NULL);
        int n = 0;
        while (keyer_reader_read(r, f, &err) == KEYER_OK) {
            assert_int_equal(f->memory, KEYER_MEMORY_CUDA);
            if (keyer_writer_write(w, f, &err))
                fail_msg("%s", err.message);
            n++;
        }
        assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
        keyer_writer_destroy(&w);
        keyer_frame_destroy(&f);
        keyer_reader_destroy(&r);
        kt_stream *s = kt_read_stream(out, NULL, 0);
        assert_int_equal(s->n, n);
        assert_int_equal(s->n, 48);
        kt_stream_free(&s);
        unlink(out);
    }
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h264_bit_exact),
        cmocka_unit_test(test_hevc_bit_exact),
        cmocka_unit_test(test_frames_complete_for_other_streams),
        cmocka_unit_test(test_split_sessions),
        cmocka_unit_test(test_decoder_knobs),
        cmocka_unit_test(test_split_keeps_sessions),
        cmocka_unit_test(test_split_auto_sessions),
        cmocka_unit_test(test_fallback_profile_and_size),
        cmocka_unit_test(test_host_formats),
        cmocka_unit_test(test_device_frames_to_writer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
