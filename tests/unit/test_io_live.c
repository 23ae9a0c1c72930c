/* Live network inputs (src/io/live.c): which URLs reconnect by default, which failures are
 * breaks, and the timestamps over a gap: the first frame of a new connection (another time
 * base, timestamps starting elsewhere) follows the last frame returned by the gap's length in
 * whole frames, the frames the gap held are counted, later frames keep their spacing, and
 * kept audio packets move by the same time (and are dropped before the first frame). The
 * reconnection itself runs against real servers in tests/cli/run_reconnect.sh. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include <libavformat/avformat.h>

#include "io/io_internal.h"

static void test_live_urls(void **state)
{
    (void)state;
    AVFormatContext *fc = avformat_alloc_context();
    assert_non_null(fc);
    fc->duration = AV_NOPTS_VALUE;
    const char *live[] = {"rtsp://10.0.0.2:554/s", "RTMP://h/app/k", "rtmps://h/a/k",
                          "srt://h:9000",          "udp://127.0.0.1:5000", "rtp://h:5004",
                          "tcp://h:9000",          "http://h/live.ts",     "https://h/x.m3u8"};
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
        assert_true(kr_live_url(live[i], fc));
    const char *not_live[] = {"clip.mp4", "file:///clip.mp4", "/dev/video0", "-",
                              "frames/%05d.png", "ftp://h/clip.mp4"};
    for (size_t i = 0; i < sizeof(not_live) / sizeof(not_live[0]); i++)
        assert_false(kr_live_url(not_live[i], fc));
    fc->duration = 10 * AV_TIME_BASE; /* an HTTP file of known length is not live */
    assert_false(kr_live_url("http://h/clip.mp4", fc));
    assert_true(kr_live_url("rtsp://h/s", fc));
    assert_true(kr_live_url("cam.sdp", fc)); /* an RTP session */
    assert_true(kr_live_url("/srv/CAM.SDP", fc));
    assert_false(kr_live_url("cam.sdp.mp4", fc));
    avformat_free_context(fc);

    assert_true(kr_source_is_network("udp://127.0.0.1:5000"));
    assert_false(kr_source_is_network("file:///x.mp4"));
    /* an SDP file describes an RTP session: a live network input */
    assert_true(kr_source_is_sdp("cam.sdp"));
    assert_true(kr_source_is_sdp("/tmp/x/CAM.SDP"));
    assert_false(kr_source_is_sdp("http://h/cam.sdp")); /* a URL: opened as its scheme says */
    assert_false(kr_source_is_sdp(".sdp.mp4"));
    assert_false(kr_source_is_sdp("sdp"));
    assert_false(kr_source_is_sdp(NULL));
    assert_true(kr_source_is_network("cam.sdp"));
    assert_false(kr_source_is_network("cam.mp4"));
    assert_false(kr_source_is_network("x.mp4"));
    assert_false(kr_source_is_network("://x"));
}

static void test_breaks(void **state)
{
    (void)state;
    kr_live l;
    memset(&l, 0, sizeof(l));
    atomic_int stop;
    atomic_init(&stop, 0);
    assert_false(kr_live_is_break(&l, KEYER_STATUS_END, &stop)); /* off */
    l.on = 1;
    assert_true(kr_live_is_break(&l, KEYER_STATUS_END, &stop));
    assert_true(kr_live_is_break(&l, KEYER_STATUS_IO, NULL));
    assert_true(kr_live_is_break(&l, KEYER_STATUS_BAD_DATA, &stop));
    assert_false(kr_live_is_break(&l, KEYER_STATUS_INTERRUPTED, &stop));
    assert_false(kr_live_is_break(&l, KEYER_STATUS_OUT_OF_MEMORY, &stop));
    atomic_store(&stop, 1);
    assert_false(kr_live_is_break(&l, KEYER_STATUS_IO, &stop));
}

static void test_gap(void **state)
{
    (void)state;
    /* frames of the first connection: 24 fps in 1/12288 (MP4-like), one every 512 ticks */
    kr_live l;
    memset(&l, 0, sizeof(l));
    l.on = 1;
    l.tb = (AVRational){1, 12288};
    l.src_tb = (AVRational){1, 90000}; /* the new connection: MPEG-TS */
    l.resync = 1;
    l.gap_start_ns = kr_live_now_ns() - 1500000000LL; /* the last frame left 1.5 s ago */
    const int64_t last_pts = 3 * 12288, dur = 512;

    AVPacket *pkt = av_packet_alloc();
    assert_non_null(pkt);
    pkt->pts = pkt->dts = 48000;
    assert_false(kr_live_shift_packet(&l, pkt, (AVRational){1, 48000})); /* before the frame */

    AVFrame *pic = av_frame_alloc();
    assert_non_null(pic);
    pic->pts = pic->best_effort_timestamp = 900000; /* the new connection starts at 10 s */
    pic->pkt_duration = 3750;
    int64_t missed = -1;
    double gap = 0;
    assert_true(kr_live_map(&l, pic, last_pts, dur, (AVRational){24, 1}, &missed, &gap));
    assert_true(gap >= 1.5 && gap < 1.6);
    /* 1.5 s at 24 fps is 36 frame times: 35 frames missed (36 if this test was held up) */
    assert_true(missed == 35 || missed == 36);
    assert_int_equal(pic->pts, last_pts + (missed + 1) * dur);
    assert_int_equal(pic->best_effort_timestamp, pic->pts);
    assert_int_equal(pic->pkt_duration, dur);
    int64_t first = pic->pts;

    /* the next frame keeps its spacing, and no second gap is counted */
    pic->pts = pic->best_effort_timestamp = 900000 + 3750;
    missed = -1;
    assert_false(kr_live_map(&l, pic, first, dur, (AVRational){24, 1}, &missed, &gap));
    assert_int_equal(missed, -1);
    assert_int_equal(pic->pts, first + dur);

    /* audio of the new connection moves by the same time as its video: the packet at the
     * first frame's time lands at the first frame's output time */
    pkt->pts = pkt->dts = 10 * 48000;
    assert_true(kr_live_shift_packet(&l, pkt, (AVRational){1, 48000}));
    int64_t want = av_rescale_q(first, l.tb, (AVRational){1, 48000});
    assert_true(pkt->pts >= want - 1 && pkt->pts <= want + 1);
    assert_int_equal(pkt->dts, pkt->pts);
    av_packet_free(&pkt);
    av_frame_free(&pic);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_urls),
        cmocka_unit_test(test_breaks),
        cmocka_unit_test(test_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
