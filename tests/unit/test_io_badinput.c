/* Bad input for the video reader: clear errors naming the path and the reason for files that
 * cannot be read (missing, directory, empty, text renamed .mp4, unknown codec, MP4 cut before
 * its moov); everything decodable from cut and corrupted files, with damaged frames and
 * rejected packets counted; randomly damaged files never crash; an output made from a damaged
 * input holds every good frame. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavformat/avformat.h>

#include "keyer/io.h"
#include "kt_io.h"

static char dir[512];
static char mp4[1024];  /* moov at the end (libavformat's default) */
static char frag[1024]; /* fragmented, written by keyer_writer */
static char mkv[1024];

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "io-bad");
    snprintf(mp4, sizeof(mp4), "%s/sample.mp4", dir);
    snprintf(frag, sizeof(frag), "%s/frag.mp4", dir);
    snprintf(mkv, sizeof(mkv), "%s/sample.mkv", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    kt_make_sample(mp4, &p);
    kt_make_sample(mkv, &p);
    /* A fragmented copy from the writer. */
    keyer_reader *r = NULL;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(mp4, kt_cpu(), &r, &err))
        fail_msg("%s", err.message);
    const keyer_video_info *vi = keyer_reader_info(r);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate;
    wp.time_base = vi->time_base;
    wp.copy_from = r;
    wp.codec_options = "x264-params='keyint=12'";
    if (keyer_writer_open(frag, &wp, &w, &err))
        fail_msg("%s", err.message);
    keyer_frame *f = NULL;
    keyer_frame_create(&f, NULL);
    while (keyer_reader_read(r, f, &err) == KEYER_OK)
        assert_int_equal(keyer_writer_write(w, f, &err), KEYER_OK);
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    keyer_writer_destroy(&w);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(mp4);
    unlink(frag);
    unlink(mkv);
    rmdir(dir);
    return 0;
}

static void expect_open_error(const char *path, keyer_status status, const char *reason)
{
    keyer_reader *r = NULL;
    keyer_error err = {0};
    keyer_status st = keyer_reader_open(path, kt_cpu(), &r, &err);
    if (st != status)
        fail_msg("%s: expected %s, got %s (%s)", path, keyer_status_name(status),
                 keyer_status_name(st), err.message);
    assert_null(r);
    if (!strstr(err.message, path))
        fail_msg("the message does not name %s: %s", path, err.message);
    if (reason && !strstr(err.message, reason))
        fail_msg("the message lacks \"%s\": %s", reason, err.message);
    print_message("    %s\n", err.message);
}

static void test_unreadable_inputs(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof(path), "%s/missing.mp4", dir);
    expect_open_error(path, KEYER_STATUS_IO, "No such file");
    expect_open_error(dir, KEYER_STATUS_IO, "directory");
    snprintf(path, sizeof(path), "%s/empty.mp4", dir);
    assert_int_equal(kt_write_file(path, "", 0), 0);
    expect_open_error(path, KEYER_STATUS_BAD_DATA, "empty");
    unlink(path);
    snprintf(path, sizeof(path), "%s/notes.mp4", dir);
    const char *text = "These are meeting notes, saved with the wrong extension.\n"
                       "1. Budget\n2. Schedule\n3. Any other business\n";
    assert_int_equal(kt_write_file(path, text, strlen(text)), 0);
    expect_open_error(path, KEYER_STATUS_BAD_DATA, "not a media file");
    unlink(path);
    /* Only audio: no video stream. */
    snprintf(path, sizeof(path), "%s/audio.wav", dir);
    {
        /* 0.1 s of 16-bit stereo silence in a WAV header. */
        uint8_t wav[44 + 19200] = {0};
        memcpy(wav, "RIFF", 4);
        uint32_t v = sizeof(wav) - 8;
        memcpy(wav + 4, &v, 4);
        memcpy(wav + 8, "WAVEfmt ", 8);
        v = 16;
        memcpy(wav + 16, &v, 4);
        uint16_t h = 1;
        memcpy(wav + 20, &h, 2);
        h = 2;
        memcpy(wav + 22, &h, 2);
        v = 48000;
        memcpy(wav + 24, &v, 4);
        v = 48000 * 4;
        memcpy(wav + 28, &v, 4);
        h = 4;
        memcpy(wav + 32, &h, 2);
        h = 16;
        memcpy(wav + 34, &h, 2);
        memcpy(wav + 36, "data", 4);
        v = 19200;
        memcpy(wav + 40, &v, 4);
        assert_int_equal(kt_write_file(path, wav, sizeof(wav)), 0);
    }
    expect_open_error(path, KEYER_STATUS_BAD_DATA, "no video stream");
    unlink(path);
}

static uint8_t *find(uint8_t *data, size_t size, const char *what)
{
    size_t n = strlen(what);
    for (size_t i = 0; i + n <= size; i++)
        if (!memcmp(data + i, what, n))
            return data + i;
    return NULL;
}

/* An AVI whose video FourCC nobody decodes. */
static void test_unsupported_codec(void **state)
{
    (void)state;
    char avi[1024];
    if (!av_guess_format("avi", NULL, NULL) || !avcodec_find_encoder_by_name("mpeg4")) {
        print_message("    no AVI muxer or MPEG-4 encoder in this libav: not tested\n");
        return;
    }
    snprintf(avi, sizeof(avi), "%s/odd.avi", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.codec = "mpeg4";
    p.audio_codec = NULL;
    p.frames = 4;
    kt_make_sample(avi, &p);
    size_t size = 0;
    uint8_t *data = kt_read_file(avi, &size);
    assert_non_null(data);
    int patched = 0;
    for (uint8_t *q; (q = find(data, size, "FMP4")); patched++)
        memcpy(q, "QZX9", 4);
    assert_true(patched >= 1);
    assert_int_equal(kt_write_file(avi, data, size), 0);
    free(data);
    expect_open_error(avi, KEYER_STATUS_UNSUPPORTED, "QZX9");
    unlink(avi);
}

static void write_prefix(const char *src, const char *dst, size_t keep)
{
    size_t size = 0;
    uint8_t *data = kt_read_file(src, &size);
    assert_non_null(data);
    assert_true(keep < size);
    assert_int_equal(kt_write_file(dst, data, keep), 0);
    free(data);
}

static void test_truncated(void **state)
{
    (void)state;
    char cut[1024];
    size_t size = 0;
    free(kt_read_file(mp4, &size));
    /* moov at the end, cut before it: nothing can be decoded, and the error says why. */
    snprintf(cut, sizeof(cut), "%s/cut-moov.mp4", dir);
    write_prefix(mp4, cut, size * 6 / 10);
    expect_open_error(cut, KEYER_STATUS_BAD_DATA, "moov");
    unlink(cut);
    /* Fragmented MP4 and Matroska cut in the middle of the data: the frames before the cut. */
    const char *srcs[] = {frag, mkv};
    const char *names[] = {"cut-frag.mp4", "cut.mkv"};
    for (int k = 0; k < 2; k++) {
        free(kt_read_file(srcs[k], &size));
        snprintf(cut, sizeof(cut), "%s/%s", dir, names[k]);
        write_prefix(srcs[k], cut, size / 2);
        kt_stream *s = kt_read_stream(cut, NULL, 0);
        kt_stream *whole = kt_read_stream(srcs[k], NULL, 0);
        print_message("    %s: %d of %d frames, %lld damaged, %lld packets rejected, "
                      "truncated %d\n", names[k], s->n, whole->n, (long long)s->stats.corrupt_frames,
                      (long long)s->stats.dropped_packets, s->stats.truncated);
        assert_int_equal(s->end, KEYER_STATUS_END);
        assert_true(s->n >= 12 && s->n < whole->n);
        for (int i = 0; i < s->n; i++)
            assert_int_equal(s->pts[i], whole->pts[i]);
        kt_stream_free(&s);
        kt_stream_free(&whole);
        unlink(cut);
    }
}

/* Garbage over three places in the middle of the video data: decoding goes on to the end,
 * damaged frames and rejected packets are counted, timestamps stay in order. */
static void test_corrupt_packets(void **state)
{
    (void)state;
    char bad[1024];
    snprintf(bad, sizeof(bad), "%s/corrupt.mp4", dir);
    size_t size = 0;
    uint8_t *data = kt_read_file(mp4, &size);
    assert_non_null(data);
    uint8_t *moov = find(data, size, "moov");
    uint8_t *mdat = find(data, size, "mdat");
    assert_non_null(moov);
    assert_non_null(mdat);
    size_t start = (size_t)(mdat - data) + 8, end = (size_t)(moov - data);
    assert_true(end > start + 30000);
    for (int k = 1; k <= 3; k++) {
        size_t at = start + (end - start) * (size_t)k / 4;
        for (size_t i = 0; i < 600; i++)
            data[at + i] = (uint8_t)(0x5A ^ (i * 37));
    }
    assert_int_equal(kt_write_file(bad, data, size), 0);
    free(data);
    kt_stream *s = kt_read_stream(bad, NULL, 0);
    print_message("    %d frames, %lld flagged damaged, %lld packets rejected\n", s->n,
                  (long long)s->stats.corrupt_frames, (long long)s->stats.dropped_packets);
    assert_int_equal(s->end, KEYER_STATUS_END);
    assert_true(s->n >= 30);
    /* Every packet is a frame or counted as dropped (frame threads may report a damaged
     * frame late, so allow for one or two counted in both ways or neither). */
    assert_true(s->n + s->stats.dropped_packets >= 46 && s->n + s->stats.dropped_packets <= 49);
    assert_true(s->stats.corrupt_frames + s->stats.dropped_packets >= 1);
    long flagged = 0;
    for (int i = 0; i < s->n; i++) {
        if (i > 0 && s->pts[i] <= s->pts[i - 1])
            fail_msg("frame %d: pts %lld after %lld", i, (long long)s->pts[i], (long long)s->pts[i - 1]);
        flagged += (s->flags[i] & KEYER_FRAME_FLAG_CORRUPT) != 0;
    }
    assert_int_equal(flagged, s->stats.corrupt_frames);

    /* Transcoding the damaged file keeps every frame the reader produced. */
    char out[1024];
    snprintf(out, sizeof(out), "%s/from-corrupt.mkv", dir);
    keyer_reader *r = NULL;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_reader_open(bad, kt_cpu(), &r, &err), KEYER_OK);
    const keyer_video_info *vi = keyer_reader_info(r);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate;
    wp.time_base = vi->time_base;
    wp.copy_from = r;
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_OK);
    keyer_frame *f = NULL;
    keyer_frame_create(&f, NULL);
    while (keyer_reader_read(r, f, &err) == KEYER_OK)
        assert_int_equal(keyer_writer_write(w, f, &err), KEYER_OK);
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    keyer_writer_destroy(&w);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    kt_stream *o = kt_read_stream(out, NULL, 0);
    assert_int_equal(o->n, s->n);
    kt_stream_free(&o);
    kt_stream_free(&s);
    unlink(out);
    unlink(bad);
}

/* Randomly damaged files (headers included): open fails cleanly or reading ends cleanly. */
static void test_random_damage(void **state)
{
    (void)state;
    const char *srcs[] = {mp4, frag, mkv};
    char bad[1024];
    int opened = 0, failed = 0;
    for (int k = 0; k < 3; k++) {
        size_t size = 0;
        uint8_t *orig = kt_read_file(srcs[k], &size);
        assert_non_null(orig);
        uint8_t *data = malloc(size);
        assert_non_null(data);
        for (uint32_t seed = 1; seed <= 12; seed++) {
            memcpy(data, orig, size);
            uint32_t x = seed * 2654435761u;
            int flips = 1 + (int)(seed % 4) * 8;
            for (int i = 0; i < flips; i++) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                /* half the damage in the first 4 KiB, where the headers are */
                size_t at = (i & 1) ? x % (size < 4096 ? size : 4096) : x % size;
                data[at] ^= (uint8_t)(1u << (x >> 29));
            }
            snprintf(bad, sizeof(bad), "%s/damaged%d-%u.bin", dir, k, seed);
            assert_int_equal(kt_write_file(bad, data, size), 0);
            keyer_reader *r = NULL;
            keyer_error err = {0};
            if (keyer_reader_open(bad, kt_cpu(), &r, &err)) {
                assert_true(strlen(err.message) > 0);
                failed++;
            } else {
                keyer_frame *f = NULL;
                keyer_frame_create(&f, NULL);
                keyer_status st;
                int n = 0;
                while ((st = keyer_reader_read(r, f, &err)) == KEYER_OK && n < 1000)
                    n++;
                assert_true(st == KEYER_STATUS_END || st == KEYER_STATUS_IO ||
                            st == KEYER_STATUS_BAD_DATA);
                keyer_frame_destroy(&f);
                keyer_reader_destroy(&r);
                opened++;
            }
            unlink(bad);
        }
        free(data);
        free(orig);
    }
    print_message("    36 damaged files: %d opened and read to the end, %d refused\n", opened,
                  failed);
    assert_int_equal(opened + failed, 36);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unreadable_inputs),
        cmocka_unit_test(test_unsupported_codec),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt_packets),
        cmocka_unit_test(test_random_damage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
