/*
 * GPU-to-GPU failover on CPU engines standing in for GPUs (label cpu; kr_session_fail_engine
 * marks an engine failed as a CUDA error does; the GPU side is test_pipeline_multigpu_gpu.c):
 *  - a standby takes over, and a moved stream moves again: three engines, two file streams,
 *    so engine 2 has none of its own. Stream 1's engine fails at its frame 5: the stream
 *    moves to the idle engine 2; that one fails at frame 15: the stream moves again, to
 *    engine 0 (which stays open to it after its own stream is done). Every frame of both
 *    streams comes out once, in order, equal (FNV-1a of its pixels) to the same streams on
 *    one engine; the one output file holds all 48 video frames and the audio.
 *  - pushed streams (keyer_session_send_frame): three engines, stream A pulled by the
 *    caller on engine 0, stream B written to a file on engine 1. Both engines fail before
 *    frame 4 is pushed: from then on both streams' frames go to engine 2 (the frames in
 *    flight come out first); engine 2 fails before frame 8: with no engine left they stay
 *    there, on the CPU. A's frames equal one engine's run, in order; B's file holds every
 *    frame.
 *  - a live input (the sample read as live at its frame rate): its engine fails at its frame
 *    5; the input is opened again on the standby engine and read from where the source is
 *    (a file: its start); the output gets every frame read and not dropped (a slow machine
 *    drops some, as live inputs do), numbered on and with distinct timestamps (the reopened
 *    source's shifted to follow), and the report counts the reopening as a reconnect.
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
#include <time.h>

#include <libavformat/avformat.h>

#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "pipeline/engines.h"
#include "testutil.h"

enum { FRAMES = 48, FAIL1 = 5, FAIL2 = 15 };

static char dir[3000], in0[4096], in1[4096];

static uint64_t fnv(const keyer_frame *f)
{
    uint64_t h = 1469598103934665603ull;
    int planes = keyer_pixel_format_planes(f->format);
    for (int p = 0; p < planes; p++) {
        int pw = 0, rows = 0, bpe = 0;
        if (keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &rows, &bpe, NULL))
            return 0;
        int w = pw * bpe;
        for (int y = 0; y < rows; y++)
            for (int x = 0; x < w; x++) {
                h ^= f->data[p][(size_t)y * (size_t)f->stride[p] + (size_t)x];
                h *= 1099511628211ull;
            }
    }
    return h;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Video packets of a file; *@p audio its audio packets; *@p increasing 1 when the video
 * packets' pts, in presentation order, are all different. */
static int count_packets(const char *path, int *audio, int *increasing)
{
    int video = 0;
    *audio = 0;
    *increasing = 1;
    AVFormatContext *fc = NULL;
    if (avformat_open_input(&fc, path, NULL, NULL) < 0 || avformat_find_stream_info(fc, NULL) < 0)
        fail_msg("%s: cannot open", path);
    AVPacket *pkt = av_packet_alloc();
    assert_non_null(pkt);
    int64_t *pts = NULL;
    while (av_read_frame(fc, pkt) >= 0) {
        enum AVMediaType t = fc->streams[pkt->stream_index]->codecpar->codec_type;
        if (t == AVMEDIA_TYPE_VIDEO) {
            int64_t *grown = realloc(pts, (size_t)(video + 1) * sizeof(*pts));
            assert_non_null(grown);
            pts = grown;
            pts[video++] = pkt->pts;
        }
        *audio += t == AVMEDIA_TYPE_AUDIO;
        av_packet_unref(pkt);
    }
    /* distinct pts (B-frames reorder them in decode order) */
    for (int i = 0; i < video; i++)
        for (int j = i + 1; j < video; j++)
            if (pts[i] == pts[j] || pts[i] == AV_NOPTS_VALUE)
                *increasing = 0;
    free(pts);
    av_packet_free(&pkt);
    avformat_close_input(&fc);
    return video;
}

static int setup(void **state)
{
    (void)state;
    char img[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_failover");
    snprintf(in0, sizeof(in0), "%s/a.mp4", dir);
    snprintf(in1, sizeof(in1), "%s/b.mp4", dir);
    const char *names[2] = {in0, in1};
    for (int i = 0; i < 2; i++) {
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = 160;
        p.height = 96;
        p.frames = FRAMES;
        p.frame_rate = (keyer_rational){24, 1};
        p.keyint = 12;
        p.preset = "ultrafast";
        p.noise = 3 * i;
        keyer_error err = {0};
        if (keyer_video_write_sample(names[i],
                                     kt_data_path(img, sizeof(img),
                                                  i ? "messi5.jpg" : "grace_hopper.jpg"),
                                     &p, &err)) {
            fprintf(stderr, "sample: %s\n", err.message);
            return -1;
        }
    }
    return 0;
}

static keyer_session_params cpu_params(const keyer_logger *lg)
{
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = lg;
    sp.model = "selfie-landscape";
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    sp.refine.temporal = KEYER_TEMPORAL_OFF;
    /* short queues on any machine, so that the readers are still reading at the failures */
    sp.queue_depth = 2;
    sp.composite_workers = 1;
    sp.refine_workers = 1;
    return sp;
}

static keyer_session *engines(const keyer_session_params *sp, int n)
{
    keyer_device_kind kinds[3] = {KEYER_DEVICE_CPU, KEYER_DEVICE_CPU, KEYER_DEVICE_CPU};
    int ordinals[3] = {0, 1, 2};
    keyer_session *s = NULL;
    keyer_error err = {0};
    if (kr_session_create_engines(sp, kinds, ordinals, n, &s, &err))
        fail_msg("create %d engines: %s", n, err.message);
    return s;
}

/* ---- a standby takes over; a moved stream moves again ------------------------------------ */

typedef struct fo_record {
    uint64_t sum[2][FRAMES];
    int calls[2];
    int bad;
    keyer_session *session;
    int failing;  /* 1: fail as the file comment says */
    int failures; /* done so far */
} fo_record;

static keyer_status fo_frame(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                             keyer_frame *out, keyer_error *err)
{
    (void)in, (void)err;
    fo_record *r = opaque;
    if (stream_id < 0 || stream_id > 1 || index < 0 || index >= FRAMES ||
        r->sum[stream_id][index]) {
        r->bad = 1;
        return KEYER_OK;
    }
    r->sum[stream_id][index] = fnv(out) | 1; /* 0 marks a frame not seen */
    r->calls[stream_id]++;
    if (r->failing && stream_id == 1 && index == FAIL1 && r->failures == 0) {
        r->failures = 1;
        kr_session_fail_engine(r->session, kr_session_stream_engine(r->session, 1));
    }
    if (r->failing && stream_id == 1 && index == FAIL2 && r->failures == 1) {
        r->failures = 2;
        /* where it runs now: the standby it moved to */
        kr_session_fail_engine(r->session, kr_session_stream_moved_to(r->session, 1));
    }
    return KEYER_OK;
}

static keyer_session *fo_run(int n, int failing, const char *out1, fo_record *rec,
                             keyer_session_report *rep)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = cpu_params(&lg);
    sp.frame_fn = fo_frame;
    sp.frame_opaque = rec;
    memset(rec, 0, sizeof(*rec));
    keyer_session *s = engines(&sp, n);
    const char *ins[2] = {in0, in1}, *outs[2] = {NULL, out1};
    keyer_error err = {0};
    for (int i = 0; i < 2; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = ins[i];
        fp.output = outs[i];
        if (keyer_session_add_file(s, &fp, NULL, &err))
            fail_msg("add %s: %s", ins[i], err.message);
    }
    rec->session = s;
    rec->failing = failing;
    if (keyer_session_run(s, &err))
        fail_msg("run over %d engine(s), failing %d: %s", n, failing, err.message);
    keyer_session_get_report(s, rep);
    return s;
}

static void test_standby_and_second_move(void **state)
{
    (void)state;
    char ref_out[4096], fo_out[4096];
    snprintf(ref_out, sizeof(ref_out), "%s/ref.mp4", dir);
    snprintf(fo_out, sizeof(fo_out), "%s/moved_twice.mp4", dir);
    static fo_record ref, moved;
    keyer_session_report r1, r3;
    keyer_session *s1 = fo_run(1, 0, ref_out, &ref, &r1);
    keyer_session *s3 = fo_run(3, 1, fo_out, &moved, &r3);
    assert_int_equal(ref.bad, 0);
    assert_int_equal(moved.bad, 0);
    assert_int_equal(moved.failures, 2);
    assert_int_equal(kr_session_stream_engine(s3, 0), 0);
    assert_int_equal(kr_session_stream_engine(s3, 1), 1);
    assert_int_equal(kr_session_stream_moved_to(s3, 0), -1);
    assert_int_equal(kr_session_stream_moved_to(s3, 1), 0); /* 1, then 2, then 0 */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ref.calls[i], FRAMES);
        assert_int_equal(moved.calls[i], FRAMES);
        for (int f = 0; f < FRAMES; f++)
            if (!moved.sum[i][f] || moved.sum[i][f] != ref.sum[i][f])
                fail_msg("stream %d frame %d differs after two moves", i, f);
    }
    assert_int_equal(r3.frames_written, 2 * FRAMES);
    assert_int_equal(r3.frames_lost, 0);
    printf("  session: %s\n", r3.device);
    /* the long form does not fit the report's 64 characters: the brief one */
    assert_string_equal(r3.device, "cpu + cpu (failed, 1 moved) + cpu (failed, 1 moved)");
    keyer_stream_report sr;
    keyer_error err = {0};
    assert_int_equal(keyer_session_get_stream_report(s3, 1, &sr, &err), KEYER_OK);
    printf("  stream 1: %lld frames read, %lld written on %s\n", (long long)sr.frames_read,
           (long long)sr.frames_written, sr.device);
    assert_string_equal(sr.device, "cpu, then cpu, then cpu (GPU failures)");
    assert_int_equal(sr.frames_read, FRAMES);
    assert_int_equal(sr.frames_written, FRAMES);
    assert_int_equal(sr.frames_lost, 0);
    assert_int_equal(sr.status, KEYER_OK);
    assert_int_equal(keyer_session_stream_status(s3, 1, &err), KEYER_OK);
    keyer_session_destroy(&s1);
    keyer_session_destroy(&s3);
    int a1 = 0, a3 = 0, inc = 0;
    int v1 = count_packets(ref_out, &a1, &inc);
    int v3 = count_packets(fo_out, &a3, &inc);
    printf("  output: %d video frames, %d audio packets (without failures: %d, %d)\n", v3, a3,
           v1, a1);
    assert_int_equal(v1, FRAMES);
    assert_int_equal(v3, FRAMES);
    assert_int_equal(inc, 1);
    assert_true(a1 > 0);
    assert_true(a3 >= a1 - 2 && a3 <= a1);
}

/* ---- pushed streams ---------------------------------------------------------------------- */

enum { PUSHED = 12 };

/* Frame @p f of the pushed streams: the photo with a 24x24 block of value 10 f + 5 in its
 * top left corner, so that every frame's output differs. */
static void make_frame(const keyer_frame *photo, int f, keyer_frame *out)
{
    keyer_error err = {0};
    assert_int_equal(keyer_frame_alloc(out, KEYER_PIXEL_FORMAT_RGBA, photo->width,
                                       photo->height, NULL, &err),
                     KEYER_OK);
    for (int y = 0; y < photo->height; y++)
        memcpy(out->data[0] + (size_t)y * (size_t)out->stride[0],
               photo->data[0] + (size_t)y * (size_t)photo->stride[0], (size_t)photo->width * 4);
    for (int y = 0; y < 24; y++)
        memset(out->data[0] + (size_t)y * (size_t)out->stride[0], 10 * f + 5, 24 * 4);
}

/* Sends until accepted (AGAIN: the stream's pool is full; @p pull: receive one first into
 * @p sums at *@p got). */
static void send_one(keyer_session *s, int id, const keyer_frame *f, int pull, keyer_frame *o,
                     uint64_t *sums, int *got)
{
    keyer_error err = {0};
    for (int tries = 0;; tries++) {
        keyer_status st = keyer_session_send_frame(s, id, f, &err);
        if (st == KEYER_OK)
            return;
        if (st != KEYER_STATUS_AGAIN || tries > 5000)
            fail_msg("send to stream %d: %s (%s)", id, keyer_status_name(st), err.message);
        if (pull) {
            assert_int_equal(keyer_session_receive_frame(s, id, o, -1, &err), KEYER_OK);
            sums[(*got)++] = fnv(o);
            keyer_frame_unref(o);
        } else {
            sleep_ms(1);
        }
    }
}

/* Stream A (pulled) and B (written to @p out_b) over @p n engines; with @p failing, engines
 * 0 and 1 fail before frame 4 and engine 2 before frame 8. A's outputs into @p sums. */
static void push_run(int n, int failing, const char *out_b, uint64_t *sums)
{
    keyer_frame *photo = NULL, *frames[PUSHED], *o = NULL;
    char path[4096];
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&photo, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(kt_data_path(path, sizeof(path), "grace_hopper.jpg"),
                                      KEYER_PIXEL_FORMAT_RGBA, photo, &err),
                     KEYER_OK);
    for (int f = 0; f < PUSHED; f++) {
        assert_int_equal(keyer_frame_create(&frames[f], &err), KEYER_OK);
        make_frame(photo, f, frames[f]);
    }
    assert_int_equal(keyer_frame_create(&o, &err), KEYER_OK);
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = cpu_params(&lg);
    keyer_session *s = engines(&sp, n);
    keyer_stream_params a = keyer_stream_params_defaults();
    a.width = photo->width;
    a.height = photo->height;
    a.format = KEYER_PIXEL_FORMAT_RGBA;
    a.frame_rate = (keyer_rational){25, 1};
    keyer_stream_params b = a;
    b.output = out_b;
    b.writer.preset = "ultrafast";
    int ia = -1, ib = -1;
    assert_int_equal(keyer_session_open_stream(s, &a, &ia, &err), KEYER_OK);
    assert_int_equal(keyer_session_open_stream(s, &b, &ib, &err), KEYER_OK);
    assert_int_equal(kr_session_stream_engine(s, ia), 0);
    assert_int_equal(kr_session_stream_engine(s, ib), n > 1 ? 1 : 0);
    int got = 0;
    for (int f = 0; f < PUSHED; f++) {
        if (failing && f == 4) {
            kr_session_fail_engine(s, 0);
            kr_session_fail_engine(s, 1);
        }
        if (failing && f == 8)
            kr_session_fail_engine(s, 2);
        send_one(s, ia, frames[f], 1, o, sums, &got);
        send_one(s, ib, frames[f], 0, o, sums, &got);
        if (f == 5 && failing) { /* A and B moved to engine 2 at frame 4 */
            assert_int_equal(kr_session_stream_moved_to(s, ia), 2);
            assert_int_equal(kr_session_stream_moved_to(s, ib), 2);
        }
        /* frames in flight on the failed engines when the streams move: two at a time */
        if (f % 2 && got < f + 1) {
            while (got < f + 1) {
                assert_int_equal(keyer_session_receive_frame(s, ia, o, -1, &err), KEYER_OK);
                sums[got++] = fnv(o);
                keyer_frame_unref(o);
            }
        }
    }
    assert_int_equal(keyer_session_close_stream(s, ia, &err), KEYER_OK);
    while (got < PUSHED) {
        if (keyer_session_receive_frame(s, ia, o, -1, &err) != KEYER_OK)
            fail_msg("stream A: frame %d did not come out: %s", got, err.message);
        sums[got++] = fnv(o);
        keyer_frame_unref(o);
    }
    assert_int_equal(keyer_session_receive_frame(s, ia, o, -1, &err), KEYER_STATUS_END);
    if (keyer_session_close_stream(s, ib, &err))
        fail_msg("close stream B: %s", err.message);
    keyer_stream_report ra, rb;
    assert_int_equal(keyer_session_get_stream_report(s, ia, &ra, &err), KEYER_OK);
    assert_int_equal(keyer_session_get_stream_report(s, ib, &rb, &err), KEYER_OK);
    printf("  %d engine(s)%s: A %lld frames out on %s; B %lld written on %s\n", n,
           failing ? ", failing" : "", (long long)ra.frames_written, ra.device,
           (long long)rb.frames_written, rb.device);
    assert_int_equal(ra.frames_written, PUSHED);
    assert_int_equal(rb.frames_written, PUSHED);
    assert_int_equal(ra.frames_lost + rb.frames_lost, 0);
    assert_int_equal(ra.status, KEYER_OK);
    assert_int_equal(rb.status, KEYER_OK);
    if (failing) {
        assert_string_equal(ra.device, "cpu, then cpu (GPU failure)");
        assert_string_equal(rb.device, "cpu, then cpu (GPU failure)");
        /* engine 2 failed too: nothing left to move to, they stayed */
        assert_int_equal(kr_session_stream_moved_to(s, ia), 2);
    }
    keyer_session_destroy(&s);
    for (int f = 0; f < PUSHED; f++)
        keyer_frame_destroy(&frames[f]);
    keyer_frame_destroy(&o);
    keyer_frame_destroy(&photo);
}

static void test_pushed_streams_move(void **state)
{
    (void)state;
    char ref_b[4096], fo_b[4096];
    snprintf(ref_b, sizeof(ref_b), "%s/pushed_ref.mp4", dir);
    snprintf(fo_b, sizeof(fo_b), "%s/pushed_moved.mp4", dir);
    uint64_t ref[PUSHED], moved[PUSHED];
    push_run(1, 0, ref_b, ref);
    push_run(3, 1, fo_b, moved);
    for (int f = 0; f < PUSHED; f++) {
        for (int g = 0; g < f; g++)
            if (ref[f] == ref[g])
                fail_msg("pushed frames %d and %d have the same output", g, f);
        if (moved[f] != ref[f])
            fail_msg("pushed stream A, frame %d differs after the move", f);
    }
    int audio = 0, inc = 0;
    assert_int_equal(count_packets(ref_b, &audio, &inc), PUSHED);
    assert_int_equal(count_packets(fo_b, &audio, &inc), PUSHED);
    assert_int_equal(inc, 1);
}

/* ---- a live input ------------------------------------------------------------------------ */

typedef struct live_record {
    keyer_session *session;
    int calls, failed, bad;
    int64_t last;
} live_record;

static keyer_status live_frame(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                               keyer_frame *out, keyer_error *err)
{
    (void)in, (void)out, (void)err;
    live_record *r = opaque;
    /* numbered on across the move; a live input may drop frames when the pipeline is behind
     * (a slow machine), so the numbers increase but may skip */
    if (stream_id != 0 || index <= r->last)
        r->bad = 1;
    r->last = index;
    r->calls++;
    if (index >= FAIL1 && !r->failed) {
        r->failed = 1;
        kr_session_fail_engine(r->session, 0);
    }
    return KEYER_OK;
}

static void test_live_input_reopens(void **state)
{
    (void)state;
    char out[4096];
    snprintf(out, sizeof(out), "%s/live.mp4", dir);
    static live_record rec;
    memset(&rec, 0, sizeof(rec));
    rec.last = -1;
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = cpu_params(&lg);
    sp.realtime = 1; /* read at its rate, as a camera delivers: nothing is dropped */
    sp.frame_fn = live_frame;
    sp.frame_opaque = &rec;
    keyer_session *s = engines(&sp, 2);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = in0;
    fp.output = out;
    fp.live = 1;
    keyer_error err = {0};
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_OK);
    rec.session = s;
    if (keyer_session_run(s, &err))
        fail_msg("live run: %s", err.message);
    keyer_stream_report sr;
    assert_int_equal(keyer_session_get_stream_report(s, 0, &sr, &err), KEYER_OK);
    printf("  live: %lld frames read, %lld written, %lld dropped, %lld reconnects, %lld missed "
           "on %s\n", (long long)sr.frames_read, (long long)sr.frames_written,
           (long long)sr.frames_dropped, (long long)sr.reconnects, (long long)sr.missed_frames,
           sr.device);
    assert_int_equal(rec.failed, 1);
    assert_int_equal(rec.bad, 0);
    assert_int_equal(kr_session_stream_moved_to(s, 0), 1); /* to the standby */
    assert_string_equal(sr.device, "cpu, then cpu (GPU failure)");
    assert_int_equal(sr.status, KEYER_OK);
    assert_int_equal(sr.frames_lost, 0);
    assert_true(sr.reconnects >= 1);
    assert_true(sr.missed_frames >= 0);
    /* the reopened file is read from its start: all of it after the frames before the move */
    assert_true(sr.frames_read >= FRAMES + FAIL1 + 1);
    assert_int_equal(sr.frames_written, sr.frames_read - sr.frames_dropped);
    assert_int_equal(rec.calls, sr.frames_written);
    keyer_session_destroy(&s);
    int audio = 0, inc = 0;
    int video = count_packets(out, &audio, &inc);
    assert_int_equal(video, sr.frames_written);
    assert_int_equal(inc, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standby_and_second_move),
        cmocka_unit_test(test_pushed_streams_move),
        cmocka_unit_test(test_live_input_reopens),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
