/*
 * A session over two GPUs (label gpu; exits 77, saying why, with fewer than two CUDA
 * devices):
 *  - four streams over cuda:0,1 are placed two per GPU (equal loads: 0, 1, 0, 1), run from
 *    NVDEC to the output on their GPU, and give every frame of the same four streams run on
 *    cuda:0 alone: per element within 2 code values of the matte (batches of different
 *    streams meet on each GPU, and the runtimes of different batch sizes may round
 *    differently); the frames that are bit-identical are counted and printed;
 *  - KEYER_FAIL_CUDA_AT_FRAME=cuda:1@10 makes cuda:1 fail mid-run (batches of 4, queues of 4,
 *    so that its readers are still reading then): no frame is lost (every stream writes all
 *    its frames, each inferred once), the streams of cuda:0 are unchanged (same tolerance),
 *    those of cuda:1 move to cuda:0 (GPU-to-GPU failover): the frames cuda:1's pipeline held
 *    are finished on the CPU (PSNR >= 30 dB against the GPU run, the bound of the one-GPU
 *    failure test), the rest is read again from the next frame by NVDEC of cuda:0 and keyed
 *    there (within 2 code values of the GPU run, counted), and the reports name where each
 *    stream went.
 *  - one stream over cuda:0,1 (cuda:1 has none: it stands by) with cuda:0 failing at frame
 *    10 moves to cuda:1, nothing lost, every frame PSNR >= 30 dB against the GPU run;
 *  - KEYER_FAIL_CUDA_AT_FRAME=cuda:1@10,cuda:0@25: both fail; cuda:1's streams move to cuda:0
 *    (unless it failed first) and then go on on the CPU with it: nothing lost, every frame
 *    PSNR >= 30 dB, each stream's report naming where it ran;
 *  - one file split at keyframes over cuda:0,1 (split_gpus; 4 chunks of 24 frames, two per
 *    GPU, each decoded by its GPU's NVDEC) is written back complete and in order: every
 *    frame within 2 code values of the same file run on cuda:0 alone; one NVDEC session per
 *    lane, and only the decoders' reorder delay decoded twice (the lanes stop at their
 *    chunk's last frame).
 *  - decode_segments -1 (the default) with expected_files: two NVDEC sessions per file stream
 *    while a GPU gets fewer than 16, each opened once (decoder set-ups counted), on cuda:0
 *    and over cuda:0,1, the frames those of one session, complete and in order; one session
 *    at 16 or more per GPU.
 * Temporal smoothing is off so that a frame's matte depends on that frame alone.
 * KEYER_TEST_FILTER (a cmocka pattern) runs only the matching tests (a short run under
 * compute-sanitizer); a failure case run alone makes the failure-free two-GPU run it compares
 * with first.
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
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "pipeline/engines.h"
#include "testutil.h"

enum { STREAMS = 4, N = 40, W = 640, H = 360, FAIL_AT = 10 };

static char inputs[STREAMS][4096];

/* Two longer inputs (4 chunks of 24 frames each) for the decoder-session cases. */
enum { LONG = 2, LN = 96, LW = 320, LH = 180 };
static char long_inputs[LONG][4096];

/* The matte of every frame of every stream (GRAY8, W x H), and a count of calls. */
typedef struct mattes {
    uint8_t *px;
    int calls[STREAMS];
    int bad;
} mattes;

static uint8_t *frame_at(mattes *m, int stream, int frame)
{
    return m->px + ((size_t)stream * N + (size_t)frame) * (size_t)W * H;
}

static keyer_status on_frame(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                             keyer_frame *out, keyer_error *err)
{
    (void)in, (void)err;
    mattes *m = opaque;
    if (stream_id < 0 || stream_id >= STREAMS || index < 0 || index >= N || out->width != W ||
        out->height != H || out->format != KEYER_PIXEL_FORMAT_GRAY8 ||
        out->memory != KEYER_MEMORY_HOST) {
        m->bad = 1;
        return KEYER_OK;
    }
    for (int y = 0; y < H; y++)
        memcpy(frame_at(m, stream_id, (int)index) + (size_t)y * W,
               out->data[0] + (size_t)y * (size_t)out->stride[0], W);
    m->calls[stream_id]++;
    return KEYER_OK;
}

static int setup(void **state)
{
    (void)state;
    char dir[3000], img[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu_gpu");
    for (int i = 0; i < STREAMS; i++) {
        snprintf(inputs[i], sizeof(inputs[i]), "%s/in%d.mp4", dir, i);
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = W;
        p.height = H;
        p.frames = N;
        p.frame_rate = (keyer_rational){30, 1};
        p.preset = "ultrafast";
        p.noise = 2 * i; /* four different streams */
        keyer_error err = {0};
        if (keyer_video_write_sample(inputs[i], kt_data_path(img, sizeof(img),
                                                             i % 2 ? "messi5.jpg"
                                                                   : "grace_hopper.jpg"),
                                     &p, &err)) {
            fprintf(stderr, "sample: %s\n", err.message);
            return -1;
        }
    }
    for (int i = 0; i < LONG; i++) {
        snprintf(long_inputs[i], sizeof(long_inputs[i]), "%s/long%d.mp4", dir, i);
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = LW;
        p.height = LH;
        p.frames = LN; /* a keyframe every 12 */
        p.frame_rate = (keyer_rational){30, 1};
        p.preset = "ultrafast";
        p.noise = 3 + i;
        keyer_error err = {0};
        if (keyer_video_write_sample(long_inputs[i], kt_data_path(img, sizeof(img),
                                                                  "grace_hopper.jpg"),
                                     &p, &err)) {
            fprintf(stderr, "sample: %s\n", err.message);
            return -1;
        }
    }
    return 0;
}

/* Runs the four inputs (null outputs) on the GPUs of @p devices (batches and queues of 4 with
 * @p small); mattes into @p m. */
static keyer_session *run_streams(uint64_t devices, int small, int streams, mattes *m,
                                  keyer_session_report *rep)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CUDA;
    sp.cuda_devices = devices;
    sp.logger = &lg;
    sp.model = "selfie-landscape";
    sp.precision = KEYER_PRECISION_F32;
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.refine.temporal = KEYER_TEMPORAL_OFF;
    sp.frame_fn = on_frame;
    sp.frame_opaque = m;
    if (small)
        sp.batch = sp.queue_depth = 4;
    memset(m->calls, 0, sizeof(m->calls));
    m->bad = 0;
    keyer_session *s = NULL;
    keyer_error err = {0};
    if (keyer_session_create(&sp, &s, &err))
        fail_msg("create: %s", err.message);
    for (int i = 0; i < streams; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = inputs[i];
        int id = -1;
        if (keyer_session_add_file(s, &fp, &id, &err))
            fail_msg("add %s: %s", inputs[i], err.message);
        assert_int_equal(id, i);
    }
    if (keyer_session_run(s, &err))
        fail_msg("run: %s", err.message);
    keyer_session_get_report(s, rep);
    printf("  %lld frames, %.1f fps, device %s, cuda %lld / cpu %lld inferred, lost %lld\n",
           (long long)rep->frames_written, rep->fps, rep->device,
           (long long)rep->frames_on_cuda, (long long)rep->frames_on_cpu,
           (long long)rep->frames_lost);
    for (int i = 0; i < streams; i++) {
        keyer_stream_report sr;
        assert_int_equal(keyer_session_get_stream_report(s, i, &sr, &err), KEYER_OK);
        printf("    stream %d: %lld frames on %s, NVDEC %d\n", i, (long long)sr.frames_written,
               sr.device, sr.hw_decode);
    }
    return s;
}

static keyer_session *run_with(uint64_t devices, int small, mattes *m, keyer_session_report *rep)
{
    return run_streams(devices, small, STREAMS, m, rep);
}

static keyer_session *run(uint64_t devices, mattes *m, keyer_session_report *rep)
{
    return run_with(devices, 0, m, rep);
}

/* Largest per-element difference between two frames; *psnr gets their PSNR. */
static int frame_diff(const uint8_t *a, const uint8_t *b, double *psnr)
{
    int worst = 0;
    double se = 0;
    for (size_t i = 0; i < (size_t)W * H; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        if (d > worst)
            worst = d;
        se += (double)d * d;
    }
    double mse = se / ((double)W * H);
    *psnr = mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
    return worst;
}

static mattes one, two, failed;
static int two_done; /* two holds the reference run on cuda:0,1 */

/* The reference the failure cases compare with: the four streams on cuda:0,1 without a
 * failure. test_two_gpus_equal_one makes it; a case run alone (KEYER_TEST_FILTER, e.g. under
 * compute-sanitizer) makes it here first: before, such a case compared its frames with
 * uninitialised memory and failed whatever the run did. */
static void need_reference(void)
{
    if (two_done)
        return;
    keyer_session_report r;
    keyer_session *s = run(UINT64_C(3), &two, &r);
    assert_int_equal(two.bad, 0);
    for (int i = 0; i < STREAMS; i++)
        assert_int_equal(two.calls[i], N);
    keyer_session_destroy(&s);
    two_done = 1;
}

static void test_two_gpus_equal_one(void **state)
{
    (void)state;
    keyer_session_report r1, r2;
    keyer_session *s1 = run(UINT64_C(1), &one, &r1); /* cuda:0 alone */
    keyer_session *s2 = run(UINT64_C(3), &two, &r2); /* cuda:0,1 */
    assert_int_equal(one.bad, 0);
    assert_int_equal(two.bad, 0);
    assert_string_equal(r1.device, "cuda:0");
    assert_string_equal(r2.device, "cuda:0 + cuda:1");
    assert_int_equal(r2.frames_written, STREAMS * N);
    assert_int_equal(r2.frames_on_cuda, STREAMS * N);
    assert_int_equal(r2.frames_lost, 0);
    const char *expect[STREAMS] = {"cuda:0", "cuda:1", "cuda:0", "cuda:1"};
    int identical = 0, worst = 0;
    for (int i = 0; i < STREAMS; i++) {
        keyer_stream_report sr;
        keyer_error err = {0};
        assert_int_equal(keyer_session_get_stream_report(s2, i, &sr, &err), KEYER_OK);
        assert_string_equal(sr.device, expect[i]);
        assert_int_equal(sr.hw_decode, 1); /* NVDEC of its own GPU */
        assert_int_equal(one.calls[i], N);
        assert_int_equal(two.calls[i], N);
        for (int f = 0; f < N; f++) {
            double p;
            int d = frame_diff(frame_at(&one, i, f), frame_at(&two, i, f), &p);
            identical += d == 0;
            if (d > worst)
                worst = d;
            if (d > 2)
                fail_msg("stream %d frame %d: differs by %d code values between cuda:0 alone "
                         "and cuda:0,1", i, f, d);
        }
    }
    printf("  two GPUs vs one: %d of %d frames bit-identical, largest difference %d\n",
           identical, STREAMS * N, worst);
    two_done = 1; /* the reference of the failure cases */
    keyer_session_destroy(&s1);
    keyer_session_destroy(&s2);
}

static void test_one_gpu_fails(void **state)
{
    (void)state;
    keyer_session_report r;
    need_reference();
    setenv("KEYER_FAIL_CUDA_AT_FRAME", "cuda:1@10", 1);
    keyer_session *s = run_with(UINT64_C(3), 1, &failed, &r);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    assert_int_equal(failed.bad, 0);
    assert_int_equal(r.frames_written, STREAMS * N);
    assert_int_equal(r.frames_lost, 0);
    assert_int_equal(r.fell_back, 1);
    assert_int_equal(r.frames_on_cuda + r.frames_on_cpu, STREAMS * N); /* each inferred once */
    /* without the failover every later frame of cuda:1's two streams went to the CPU */
    assert_true(r.frames_on_cpu < 2 * (N - FAIL_AT));
    assert_true(r.warnings >= 3); /* the failure, and each stream's move */
    assert_string_equal(r.device, "cuda:0 + cuda:1 (failed: 2 streams moved to other GPUs)");
    double lowest = 99;
    int moved_close = 0;
    for (int i = 0; i < STREAMS; i++) {
        keyer_stream_report sr;
        keyer_error err = {0};
        assert_int_equal(keyer_session_get_stream_report(s, i, &sr, &err), KEYER_OK);
        printf("    stream %d: %lld frames read, %lld written on %s\n", i,
               (long long)sr.frames_read, (long long)sr.frames_written, sr.device);
        assert_int_equal(sr.frames_written, N);
        assert_int_equal(sr.frames_read, N);
        assert_int_equal(sr.frames_lost, 0);
        assert_int_equal(sr.status, KEYER_OK);
        assert_int_equal(failed.calls[i], N);
        assert_string_equal(sr.device, i % 2 ? "cuda:1, then cuda:0 (GPU failure)" : "cuda:0");
        assert_int_equal(kr_session_stream_moved_to(s, i), i % 2 ? 0 : -1);
        for (int f = 0; f < N; f++) {
            double p;
            int d = frame_diff(frame_at(&two, i, f), frame_at(&failed, i, f), &p);
            if (i % 2 == 0 && d > 2)
                fail_msg("stream %d (cuda:0) frame %d changed by %d with cuda:1 failing", i, f, d);
            if (i % 2 && p < lowest)
                lowest = p;
            if (i % 2 && p < 30.0)
                fail_msg("stream %d (cuda:1, then cuda:0) frame %d: PSNR %.2f dB < 30", i, f, p);
            if (i % 2 && f > FAIL_AT)
                moved_close += d <= 2;
        }
    }
    printf("  cuda:1 failed at frame %d: its streams moved to cuda:0 (%lld frames inferred on "
           "the CPU in between), min PSNR %.2f dB vs the GPU run, %d later frames within 2 "
           "code values\n", FAIL_AT, (long long)r.frames_on_cpu, lowest, moved_close);
    /* the frames keyed on cuda:0 after the move are GPU frames again */
    assert_true(moved_close >= 2 * (N - FAIL_AT - 1) - (int)r.frames_on_cpu);
    keyer_session_destroy(&s);
}

/* What the long inputs' frame_fn saw: each input frame's luma hash and pts, in call order. */
typedef struct seen {
    uint64_t hash[LONG][LN];
    int64_t pts[LONG][LN];
    int calls[LONG];
    int bad; /* a call out of order, for an unknown stream or past the end */
} seen;

static keyer_status on_seen(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                            keyer_frame *out, keyer_error *err)
{
    (void)out, (void)err;
    seen *v = opaque;
    if (stream_id < 0 || stream_id >= LONG || index != v->calls[stream_id] || index >= LN ||
        in->memory != KEYER_MEMORY_HOST || in->width != LW || in->height != LH) {
        v->bad = 1;
        return KEYER_OK;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the luma rows */
    for (int y = 0; y < LH; y++)
        for (int x = 0; x < LW; x++) {
            h ^= in->data[0][(size_t)y * (size_t)in->stride[0] + (size_t)x];
            h *= 1099511628211ull;
        }
    v->hash[stream_id][index] = h;
    v->pts[stream_id][index] = in->pts;
    v->calls[stream_id]++;
    return KEYER_OK;
}

/* Runs the long inputs on @p devices with @p segments as decode_segments (-1: the default)
 * and @p expected as expected_files; each stream's decoder set-ups into @p setups. */
static void run_long(uint64_t devices, int segments, int expected, seen *v, int64_t *setups)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING;
    keyer_session_params sp = keyer_session_params_defaults();
    assert_int_equal(sp.decode_segments, -1);
    sp.device = KEYER_DEVICE_CUDA;
    sp.cuda_devices = devices;
    sp.logger = &lg;
    sp.model = "selfie-landscape";
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.refine.temporal = KEYER_TEMPORAL_OFF;
    sp.decode_segments = segments;
    sp.expected_files = expected;
    sp.frame_fn = on_seen;
    sp.frame_opaque = v;
    memset(v, 0, sizeof(*v));
    keyer_session *s = NULL;
    keyer_error err = {0};
    if (keyer_session_create(&sp, &s, &err))
        fail_msg("create: %s", err.message);
    for (int i = 0; i < LONG; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = long_inputs[i];
        if (keyer_session_add_file(s, &fp, NULL, &err))
            fail_msg("add %s: %s", long_inputs[i], err.message);
    }
    if (keyer_session_run(s, &err))
        fail_msg("run: %s", err.message);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.frames_written, LONG * LN);
    assert_int_equal(rep.frames_lost, 0);
    for (int i = 0; i < LONG; i++) {
        keyer_stream_report sr;
        assert_int_equal(keyer_session_get_stream_report(s, i, &sr, &err), KEYER_OK);
        assert_int_equal(sr.frames_written, LN);
        assert_int_equal(sr.hw_decode, 1);
        setups[i] = sr.decoder_setups;
        printf("    decode_segments %d, expected_files %d, %s: stream %d on %s, %lld decoder "
               "set-ups\n", segments, expected, devices == 1 ? "cuda:0" : "cuda:0,1", i,
               sr.device, (long long)sr.decoder_setups);
    }
    keyer_session_destroy(&s);
    assert_int_equal(v->bad, 0);
}

/* decode_segments -1 (the default) decides each file's NVDEC sessions before its reader
 * opens, from expected_files shared out over the GPUs: two files on cuda:0, and one per GPU
 * on cuda:0,1, get two sessions each, opened once (2 set-ups per stream: no session is made
 * and dropped first, as the reverted switch of an open reader did); with 32 expected files
 * (16 or more per GPU) and with decode_segments 0, one (1 set-up). The frames keyed are the
 * decoder's frames, complete and in order: the same luma (hash) and pts at every index as
 * with one session. */
static void test_default_decode_segments(void **state)
{
    (void)state;
    static seen ref, v;
    int64_t su[LONG];
    run_long(UINT64_C(1), 0, LONG, &ref, su);
    for (int i = 0; i < LONG; i++)
        assert_int_equal(su[i], 1);
    const struct {
        uint64_t devices;
        int expected, setups;
    } cases[] = {{UINT64_C(1), LONG, 2}, {UINT64_C(3), LONG, 2}, {UINT64_C(1), 32, 1}};
    for (int c = 0; c < 3; c++) {
        run_long(cases[c].devices, -1, cases[c].expected, &v, su);
        for (int i = 0; i < LONG; i++) {
            assert_int_equal(su[i], cases[c].setups);
            assert_int_equal(v.calls[i], LN);
            for (int f = 0; f < LN; f++) {
                if (v.pts[i][f] != ref.pts[i][f] || v.hash[i][f] != ref.hash[i][f])
                    fail_msg("case %d stream %d frame %d: pts %lld, hash %016llx; one session: "
                             "pts %lld, hash %016llx", c, i, f, (long long)v.pts[i][f],
                             (unsigned long long)v.hash[i][f], (long long)ref.pts[i][f],
                             (unsigned long long)ref.hash[i][f]);
            }
        }
    }
    printf("  default decoder sessions: %d streams x %d frames, the same frames in order with "
           "two sessions per stream (cuda:0, cuda:0,1) as with one\n", LONG, LN);
}

/* Runs @p in on @p devices (split over them when @p split) writing PNG mattes to @p pattern. */
static void run_png(const char *in, const char *pattern, uint64_t devices, int split,
                    keyer_stream_report *sr)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CUDA;
    sp.cuda_devices = devices;
    sp.split_gpus = split;
    sp.logger = &lg;
    sp.model = "selfie-landscape";
    sp.precision = KEYER_PRECISION_F32;
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.refine.temporal = KEYER_TEMPORAL_OFF;
    keyer_session *s = NULL;
    keyer_error err = {0};
    if (keyer_session_create(&sp, &s, &err))
        fail_msg("create: %s", err.message);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = in;
    fp.output = pattern;
    if (keyer_session_add_file(s, &fp, NULL, &err) || keyer_session_run(s, &err))
        fail_msg("run (split %d): %s", split, err.message);
    assert_int_equal(keyer_session_get_stream_report(s, 0, sr, &err), KEYER_OK);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    printf("  %s: %lld frames, %.1f fps, device %s, NVDEC %d\n", split ? "split" : "one GPU",
           (long long)sr->frames_written, rep.fps, sr->device, sr->hw_decode);
    keyer_session_destroy(&s);
}

/* One stream over cuda:0,1: it is placed on cuda:0, and cuda:1, with no stream of its own,
 * stands by. cuda:0 fails at frame FAIL_AT: the stream moves to cuda:1, nothing lost. */
static void test_idle_gpu_takes_over(void **state)
{
    (void)state;
    keyer_session_report r;
    need_reference();
    setenv("KEYER_FAIL_CUDA_AT_FRAME", "cuda:0@10", 1);
    keyer_session *s = run_streams(UINT64_C(3), 1, 1, &failed, &r);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    assert_int_equal(failed.bad, 0);
    assert_int_equal(r.frames_written, N);
    assert_int_equal(r.frames_lost, 0);
    assert_int_equal(r.frames_on_cuda + r.frames_on_cpu, N);
    assert_string_equal(r.device, "cuda:0 (failed: 1 stream moved to other GPUs) + cuda:1");
    keyer_stream_report sr;
    keyer_error err = {0};
    assert_int_equal(keyer_session_get_stream_report(s, 0, &sr, &err), KEYER_OK);
    assert_int_equal(sr.frames_written, N);
    assert_int_equal(sr.frames_read, N);
    assert_int_equal(sr.status, KEYER_OK);
    assert_string_equal(sr.device, "cuda:0, then cuda:1 (GPU failure)");
    assert_int_equal(kr_session_stream_moved_to(s, 0), 1);
    assert_int_equal(failed.calls[0], N);
    double lowest = 99;
    int within = 0;
    for (int f = 0; f < N; f++) {
        double p;
        int d = frame_diff(frame_at(&two, 0, f), frame_at(&failed, 0, f), &p);
        if (p < lowest)
            lowest = p;
        if (p < 30.0)
            fail_msg("stream 0 (cuda:0, then cuda:1) frame %d: PSNR %.2f dB < 30", f, p);
        within += f > FAIL_AT && d <= 2;
    }
    printf("  cuda:0 failed at frame %d: the stream moved to the idle cuda:1 (%lld frames on "
           "the CPU in between), min PSNR %.2f dB, %d later frames within 2 code values\n",
           FAIL_AT, (long long)r.frames_on_cpu, lowest, within);
    assert_true(within >= N - FAIL_AT - 1 - (int)r.frames_on_cpu);
    keyer_session_destroy(&s);
}

/* Both GPUs fail, cuda:1 at frame 10 and cuda:0 at frame 25 (KEYER_FAIL_CUDA_AT_FRAME per
 * device): cuda:1's streams move to cuda:0, then, with no GPU left, everything goes on on the
 * CPU. Nothing is lost and every frame stays within the CPU fallback's bound. */
static void test_both_gpus_fail(void **state)
{
    (void)state;
    keyer_session_report r;
    need_reference();
    setenv("KEYER_FAIL_CUDA_AT_FRAME", "cuda:1@10,cuda:0@25", 1);
    keyer_session *s = run_with(UINT64_C(3), 1, &failed, &r);
    unsetenv("KEYER_FAIL_CUDA_AT_FRAME");
    assert_int_equal(failed.bad, 0);
    assert_int_equal(r.frames_written, STREAMS * N);
    assert_int_equal(r.frames_lost, 0);
    assert_int_equal(r.frames_on_cuda + r.frames_on_cpu, STREAMS * N);
    double lowest = 99;
    for (int i = 0; i < STREAMS; i++) {
        keyer_stream_report sr;
        keyer_error err = {0};
        assert_int_equal(keyer_session_get_stream_report(s, i, &sr, &err), KEYER_OK);
        assert_int_equal(sr.frames_written, N);
        assert_int_equal(sr.frames_read, N);
        assert_int_equal(sr.frames_lost, 0);
        assert_int_equal(sr.status, KEYER_OK);
        assert_int_equal(failed.calls[i], N);
        /* cuda:0 fails too, so every part ends on the CPU; a stream of cuda:1 moves to cuda:0
         * unless cuda:0 failed first (each GPU counts its own frames: which comes first is
         * not fixed) */
        printf("    stream %d: %s\n", i, sr.device);
        if (i % 2 == 0)
            assert_string_equal(sr.device, "cuda:0, then cpu (GPU failure)");
        else if (strcmp(sr.device, "cuda:1, then cuda:0, then cpu (GPU failures)") &&
                 strcmp(sr.device, "cuda:1, then cpu (GPU failure)"))
            fail_msg("stream %d: ran on %s", i, sr.device);
        for (int f = 0; f < N; f++) {
            double p;
            frame_diff(frame_at(&two, i, f), frame_at(&failed, i, f), &p);
            if (p < lowest)
                lowest = p;
            if (p < 30.0)
                fail_msg("stream %d frame %d: PSNR %.2f dB < 30 with both GPUs failing", i, f, p);
        }
    }
    printf("  both GPUs failed: %lld frames on the CPU, min PSNR %.2f dB, session %s\n",
           (long long)r.frames_on_cpu, lowest, r.device);
    keyer_session_destroy(&s);
}

static void test_split_over_two_gpus(void **state)
{
    (void)state;
    enum { SF = 96 };
    char dir[3000], in[4096], img[4096], pa[4096], pb[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu_gpu_split");
    snprintf(in, sizeof(in), "%s/long.mp4", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = W;
    p.height = H;
    p.frames = SF;
    p.frame_rate = (keyer_rational){30, 1};
    p.keyint = 12;
    p.preset = "ultrafast";
    keyer_error err = {0};
    assert_int_equal(keyer_video_write_sample(in, kt_data_path(img, sizeof(img), "messi5.jpg"),
                                              &p, &err),
                     KEYER_OK);
    snprintf(pa, sizeof(pa), "%s/one_%%05d.png", dir);
    snprintf(pb, sizeof(pb), "%s/split_%%05d.png", dir);
    keyer_stream_report ra, rb;
    run_png(in, pa, UINT64_C(1), 0, &ra);
    run_png(in, pb, UINT64_C(3), 1, &rb);
    assert_int_equal(ra.frames_written, SF);
    assert_int_equal(rb.frames_written, SF);
    assert_int_equal(rb.status, KEYER_OK);
    assert_string_equal(rb.device, "cuda:0 + cuda:1 (split)");
    assert_int_equal(rb.hw_decode, 1);
    /* The lanes decode exactly their chunks (4 lanes, 4 chunks of 24): one NVDEC session each
     * (the seeks to IDR pictures keep them; the first lane does not seek back to the file's
     * start), and the decoders' delay D = 2 (the sample's 2 B-frames) as the only pictures
     * decoded twice: D into the next chunk at each of the 3 chunk ends, 1 + D at the opening
     * of each lane but the first (21 before: D + 1 per chunk end, and 1 + D more for the
     * first lane's seek back) */
    int64_t extra = rb.decoded_pictures - rb.frames_read;
    printf("  split: %lld pictures decoded for %lld frames read, %lld NVDEC set-ups\n",
           (long long)rb.decoded_pictures, (long long)rb.frames_read,
           (long long)rb.decoder_setups);
    assert_int_equal(rb.frames_read, SF);
    assert_int_equal(rb.decoder_setups, 4);
    assert_true(extra >= 3 && extra <= 3 * 3 + 3 * 2);
    keyer_frame *fa = NULL, *fb = NULL;
    keyer_frame_create(&fa, NULL);
    keyer_frame_create(&fb, NULL);
    int identical = 0, worst = 0;
    for (int f = 0; f <= SF; f++) {
        char a[4096], b[4096];
        snprintf(a, sizeof(a), "%s/one_%05d.png", dir, f + 1);
        snprintf(b, sizeof(b), "%s/split_%05d.png", dir, f + 1);
        if (f == SF) {
            assert_false(kt_exists(b)); /* nothing more */
            break;
        }
        assert_int_equal(keyer_image_read(a, KEYER_PIXEL_FORMAT_GRAY8, fa, &err), KEYER_OK);
        assert_int_equal(keyer_image_read(b, KEYER_PIXEL_FORMAT_GRAY8, fb, &err), KEYER_OK);
        assert_int_equal(fa->width, fb->width);
        assert_int_equal(fa->height, fb->height);
        int d = 0;
        for (int y = 0; y < fa->height; y++)
            for (int x = 0; x < fa->width; x++) {
                int v = abs((int)fa->data[0][y * fa->stride[0] + x] -
                            (int)fb->data[0][y * fb->stride[0] + x]);
                if (v > d)
                    d = v;
            }
        identical += d == 0;
        if (d > worst)
            worst = d;
        if (d > 2)
            fail_msg("frame %d: the split run differs by %d from cuda:0 alone", f, d);
    }
    printf("  split vs one GPU: %d of %d frames bit-identical, largest difference %d\n",
           identical, SF, worst);
    keyer_frame_destroy(&fa);
    keyer_frame_destroy(&fb);
}

int main(void)
{
    const kr_device_fns *dev = kr_device_cuda();
    int count = dev ? dev->count() : 0;
    if (count < 2) {
        printf("skipped: %d CUDA device%s (this test needs two)\n", count, count == 1 ? "" : "s");
        return 77;
    }
    size_t bytes = (size_t)STREAMS * N * W * H;
    one.px = malloc(bytes);
    two.px = malloc(bytes);
    failed.px = malloc(bytes);
    if (!one.px || !two.px || !failed.px)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_gpus_equal_one),
        cmocka_unit_test(test_one_gpu_fails),
        cmocka_unit_test(test_idle_gpu_takes_over),
        cmocka_unit_test(test_both_gpus_fail),
        cmocka_unit_test(test_split_over_two_gpus),
        cmocka_unit_test(test_default_decode_segments),
    };
    /* KEYER_TEST_FILTER: only the tests matching it (a short run under compute-sanitizer) */
    const char *filter = getenv("KEYER_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    free(one.px);
    free(two.px);
    free(failed.px);
    return rc;
}
