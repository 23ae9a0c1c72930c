/* Video reader on real media made here from the test photos: stream properties before the
 * first frame, every frame with its timestamp, output formats checked against the photo,
 * seeking, image sequences, a real pipe on standard input, interrupts, and split decode
 * (bit-identical to one decoder, also with open GOPs; decoders kept over IDR cuts). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "kt_io.h"

static char dir[512];
static char mp4[1024];  /* 48 frames 320x240, 24 fps, H.264 (keyint 12, 2 B-frames) + AAC */
static char long_mp4[1024]; /* 96 frames, keyint 12 */
static char open_gop[1024]; /* 96 frames, open GOPs */

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "io-reader");
    snprintf(mp4, sizeof(mp4), "%s/sample.mp4", dir);
    snprintf(long_mp4, sizeof(long_mp4), "%s/long.mp4", dir);
    snprintf(open_gop, sizeof(open_gop), "%s/opengop.mkv", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    kt_make_sample(mp4, &p);
    p.frames = 96;
    p.audio_codec = NULL;
    kt_make_sample(long_mp4, &p);
    p.keyint = 16;
    p.bframes = 3;
    p.codec_options = "x264-params='open-gop=1:scenecut=0'";
    kt_make_sample(open_gop, &p);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(mp4);
    unlink(long_mp4);
    unlink(open_gop);
    rmdir(dir);
    return 0;
}

static void test_info_before_first_frame(void **state)
{
    (void)state;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(mp4, kt_cpu(), &r, &err))
        fail_msg("%s", err.message);
    const keyer_video_info *vi = keyer_reader_info(r);
    assert_int_equal(vi->width, 320);
    assert_int_equal(vi->height, 240);
    assert_int_equal(vi->frame_rate.num, 24);
    assert_int_equal(vi->frame_rate.den, 1);
    assert_true(vi->time_base.num > 0 && vi->time_base.den > 0);
    /* 48 frames at 24 fps: 2 s. */
    assert_int_equal(av_rescale_q(vi->duration, (AVRational){vi->time_base.num, vi->time_base.den},
                                  (AVRational){1, 1000}), 2000);
    assert_int_equal(vi->frame_count, 48);
    assert_int_equal(vi->frame_count_exact, 1);
    assert_int_equal(vi->start_pts, 0);
    assert_int_equal(vi->format, KEYER_PIXEL_FORMAT_YUV420P);
    assert_int_equal(vi->memory, KEYER_MEMORY_HOST);
    assert_int_equal(vi->matrix, KEYER_COLOR_MATRIX_BT601);
    assert_int_equal(vi->range, KEYER_COLOR_RANGE_LIMITED);
    assert_int_equal(vi->rotation, 0);
    assert_int_equal(vi->bit_depth, 8);
    assert_int_equal(vi->has_audio, 1);
    assert_int_equal(vi->audio_streams, 1);
    assert_int_equal(vi->hw_decode, 0);
    assert_int_equal(vi->segments, 1);
    assert_int_equal(vi->seekable, 1);
    assert_string_equal(vi->codec, "h264");
    assert_string_equal(vi->coded_format, "yuv420p");
    assert_non_null(strstr(vi->container, "mp4"));
    keyer_reader_destroy(&r);
    assert_null(r);
    keyer_reader_destroy(NULL);
}

static void test_every_frame_in_order(void **state)
{
    (void)state;
    kt_stream *s = kt_read_stream(mp4, NULL, 0);
    assert_int_equal(s->end, KEYER_STATUS_END);
    assert_int_equal(s->n, 48);
    int64_t step = s->info.time_base.den / 24 / s->info.time_base.num;
    for (int i = 0; i < s->n; i++) {
        assert_int_equal(s->pts[i], i * step);
        assert_false(s->flags[i] & KEYER_FRAME_FLAG_CORRUPT);
        /* keyint 12: keyframes at 0, 12, 24, 36 */
        assert_int_equal(!!(s->flags[i] & KEYER_FRAME_FLAG_KEY), i % 12 == 0);
    }
    assert_int_equal(s->stats.frames, 48);
    assert_int_equal(s->stats.corrupt_frames, 0);
    assert_int_equal(s->stats.dropped_packets, 0);
    kt_stream_free(&s);
}

/* Frame 0 shows the photo's top 512x384 scaled to 320x240: compare with libswscale's own
 * downscale of the photo (H.264 at CRF 23 keeps it above 30 dB). */
static void test_formats_match_the_photo(void **state)
{
    (void)state;
    char img[1024];
    keyer_frame *photo = NULL, *ref = NULL;
    assert_int_equal(keyer_frame_create(&photo, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_create(&ref, NULL), KEYER_OK);
    assert_int_equal(keyer_image_read(kt_data_path(img, sizeof(img), "grace_hopper.jpg"),
                                      KEYER_PIXEL_FORMAT_RGB24, photo, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(ref, KEYER_PIXEL_FORMAT_RGB24, 320, 240, NULL, NULL), KEYER_OK);
    kr_converter conv = {0};
    kr_image src, dst;
    kr_image_from_frame(&src, photo);
    src.height = 384;
    kr_image_from_frame(&dst, ref);
    assert_int_equal(kr_convert(&conv, &src, &dst, NULL), KEYER_OK);
    kr_convert_free(&conv);

    keyer_pixel_format fmts[] = {KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_RGBA,
                                 KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_GRAY8,
                                 KEYER_PIXEL_FORMAT_YUV420P};
    keyer_frame *frame[5];
    for (int k = 0; k < 5; k++) {
        keyer_reader_params p = *kt_cpu();
        p.format = fmts[k];
        keyer_reader *r = NULL;
        keyer_error err = {0};
        if (keyer_reader_open(mp4, &p, &r, &err))
            fail_msg("%s", err.message);
        assert_int_equal(keyer_reader_info(r)->format, fmts[k]);
        assert_int_equal(keyer_frame_create(&frame[k], NULL), KEYER_OK);
        assert_int_equal(keyer_reader_read(r, frame[k], &err), KEYER_OK);
        assert_int_equal(frame[k]->format, fmts[k]);
        assert_int_equal(frame[k]->pts, 0);
        assert_int_equal(keyer_frame_check(frame[k], NULL), KEYER_OK);
        keyer_reader_destroy(&r); /* frames outlive their reader */
    }
    double psnr = kt_psnr_plane0(frame[0], ref, 3);
    print_message("    frame 0 vs photo: %.1f dB\n", psnr);
    assert_true(psnr > 30.0);
    /* RGBA = RGB + opaque alpha; NV12 luma = YUV420P luma; gray = full-range luma. */
    for (int y = 0; y < 240; y++)
        for (int x = 0; x < 320; x++) {
            assert_memory_equal(frame[1]->data[0] + y * frame[1]->stride[0] + 4 * x,
                                frame[0]->data[0] + y * frame[0]->stride[0] + 3 * x, 3);
            assert_int_equal(frame[1]->data[0][y * frame[1]->stride[0] + 4 * x + 3], 255);
            assert_int_equal(frame[3]->range, KEYER_COLOR_RANGE_FULL);
            int yl = frame[4]->data[0][y * frame[4]->stride[0] + x];
            assert_int_equal(frame[2]->data[0][y * frame[2]->stride[0] + x], yl);
            int g = frame[3]->data[0][y * frame[3]->stride[0] + x];
            int expect = (int)lround((yl - 16) * 255.0 / 219.0);
            expect = expect < 0 ? 0 : expect > 255 ? 255 : expect;
            if (abs(g - expect) > 1)
                fail_msg("gray %d at %d,%d; luma %d expects %d", g, x, y, yl, expect);
        }
    for (int k = 0; k < 5; k++)
        keyer_frame_destroy(&frame[k]);
    keyer_frame_destroy(&photo);
    keyer_frame_destroy(&ref);
}

static int64_t read_pts(keyer_reader *r)
{
    keyer_frame *f = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    keyer_status st = keyer_reader_read(r, f, &err);
    int64_t pts = st == KEYER_OK ? f->pts : (st == KEYER_STATUS_END ? -1 : -2);
    if (st && st != KEYER_STATUS_END)
        fail_msg("%s", err.message);
    keyer_frame_destroy(&f);
    return pts;
}

/* long_mp4 opened with P, seeked to frame 61 of its 24 frames/s timeline; every frame from 61
 * to its last (95) then the end must follow. Returns the open reader and one frame's step. */
static keyer_reader *open_long_seek_61(const keyer_reader_params *p, int64_t *step)
{
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(long_mp4, p, &r, &err))
        fail_msg("%s", err.message);
    *step = keyer_reader_info(r)->time_base.den / 24;
    assert_int_equal(keyer_reader_seek(r, 61 * *step, &err), KEYER_OK);
    return r;
}

static void read_to_end_from_61(keyer_reader *r, int64_t step)
{
    for (int i = 61; i < 96; i++)
        assert_int_equal(read_pts(r), i * step);
    assert_int_equal(read_pts(r), -1);
}

static void test_seek(void **state)
{
    (void)state;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(mp4, kt_cpu(), &r, &err))
        fail_msg("%s", err.message);
    int64_t step = keyer_reader_info(r)->time_base.den / 24;
    /* Exact frames, a B-frame, a keyframe, between two frames, back to 0, past the end. */
    int64_t targets[] = {20 * step, 13 * step, 24 * step, 7 * step + step / 3, 0, 47 * step};
    int64_t expect[] = {20 * step, 13 * step, 24 * step, 8 * step, 0, 47 * step};
    for (int i = 0; i < 6; i++) {
        if (keyer_reader_seek(r, targets[i], &err))
            fail_msg("%s", err.message);
        assert_int_equal(read_pts(r), expect[i]);
    }
    /* After a seek, reading goes on in order to the end. */
    assert_int_equal(keyer_reader_seek(r, 30 * step, &err), KEYER_OK);
    for (int i = 30; i < 48; i++)
        assert_int_equal(read_pts(r), i * step);
    assert_int_equal(read_pts(r), -1);
    assert_int_equal(read_pts(r), -1); /* END again */
    assert_int_equal(keyer_reader_seek(r, 100 * step, &err), KEYER_OK);
    assert_int_equal(read_pts(r), -1);
    assert_int_equal(keyer_reader_seek(r, 5 * step, &err), KEYER_OK);
    assert_int_equal(read_pts(r), 5 * step);
    keyer_reader_destroy(&r);
}

/* PNG sequence out and in: lossless, so frames come back bit for bit. */
static void test_image_sequence(void **state)
{
    (void)state;
    char pattern[1024], first[1024];
    snprintf(pattern, sizeof(pattern), "%s/frame_%%05d.png", dir);
    keyer_reader_params rp = *kt_cpu();
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    kt_stream *src = kt_read_stream(mp4, &rp, 1);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = 320;
    wp.height = 240;
    wp.frame_rate = (keyer_rational){24, 1};
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_writer_open(pattern, &wp, &w, &err))
        fail_msg("%s", err.message);
    assert_string_equal(keyer_writer_codec(w), "png");
    for (int i = 0; i < 10; i++) {
        src->frames[i]->pts = INT64_MIN; /* consecutive timestamps */
        assert_int_equal(keyer_writer_write(w, src->frames[i], &err), KEYER_OK);
    }
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    keyer_writer_destroy(&w);
    snprintf(first, sizeof(first), "%s/frame_00001.png", dir);
    assert_true(kt_exists(first));

    kt_stream *back = kt_read_stream(pattern, &rp, 1);
    assert_int_equal(back->n, 10);
    assert_string_equal(back->info.codec, "png");
    for (int i = 0; i < 10; i++) {
        assert_true(kt_frames_equal(back->frames[i], src->frames[i]));
        assert_int_equal(back->pts[i], i);
    }
    /* The sequence's first file alone reads as a one-frame video. */
    kt_stream *one = kt_read_stream(first, &rp, 1);
    assert_int_equal(one->n, 1);
    assert_true(kt_frames_equal(one->frames[0], src->frames[0]));
    for (int i = 1; i <= 10; i++) {
        char f[1024];
        snprintf(f, sizeof(f), "%s/frame_%05d.png", dir, i);
        unlink(f);
    }
    kt_stream_free(&one);
    kt_stream_free(&back);
    kt_stream_free(&src);
}

/* y4m through a real pipe on standard input ("-"). */
static void test_stdin_pipe(void **state)
{
    (void)state;
    char y4m[1024];
    snprintf(y4m, sizeof(y4m), "%s/clip.y4m", dir);
    kt_stream *src = kt_read_stream(mp4, NULL, 1);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = 320;
    wp.height = 240;
    wp.frame_rate = (keyer_rational){24, 1};
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_writer_open(y4m, &wp, &w, &err))
        fail_msg("%s", err.message);
    for (int i = 0; i < 12; i++) {
        src->frames[i]->pts = INT64_MIN;
        assert_int_equal(keyer_writer_write(w, src->frames[i], &err), KEYER_OK);
    }
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    keyer_writer_destroy(&w);

    size_t size = 0;
    uint8_t *data = kt_read_file(y4m, &size);
    assert_non_null(data);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        size_t off = 0;
        while (off < size) { /* small writes: the reader sees a slow pipe */
            size_t n = size - off < 4096 ? size - off : 4096;
            ssize_t k = write(fds[1], data + off, n);
            if (k <= 0)
                _exit(1);
            off += (size_t)k;
        }
        _exit(0);
    }
    close(fds[1]);
    int saved = dup(0);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fds[0], 0), 0);
    close(fds[0]);
    kt_stream *in = kt_read_stream("-", NULL, 1);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    int wst = 0;
    waitpid(pid, &wst, 0);
    assert_int_equal(in->n, 12);
    assert_int_equal(in->info.seekable, 0);
    assert_int_equal(in->info.frame_rate.num, 24);
    for (int i = 0; i < 12; i++) /* y4m is raw: identical pixels */
        assert_true(kt_frames_equal(in->frames[i], src->frames[i]));
    free(data);
    unlink(y4m);
    kt_stream_free(&in);
    kt_stream_free(&src);
}

static void test_interrupt(void **state)
{
    (void)state;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(mp4, kt_cpu(), &r, &err))
        fail_msg("%s", err.message);
    assert_true(read_pts(r) >= 0);
    keyer_reader_interrupt(r);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_reader_read(r, f, &err), KEYER_STATUS_INTERRUPTED);
    assert_non_null(strstr(err.message, mp4));
    keyer_reader_interrupt(NULL);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
}

/* Split decode gives exactly the frames of one decoder, in order, with the same timestamps. */
static void check_split(const char *path, int segments, int expect_frames)
{
    kt_stream *one = kt_read_stream(path, NULL, 1);
    keyer_reader_params p = *kt_cpu();
    p.segments = segments;
    kt_stream *many = kt_read_stream(path, &p, 1);
    print_message("    %s: %d frames, %d sessions\n", path, many->n, many->info.segments);
    assert_int_equal(one->n, expect_frames);
    assert_int_equal(many->n, one->n);
    assert_true(many->info.segments > 1);
    for (int i = 0; i < one->n; i++) {
        assert_int_equal(many->pts[i], one->pts[i]);
        if (!kt_frames_equal(many->frames[i], one->frames[i]))
            fail_msg("frame %d differs between split and single decode", i);
    }
    assert_int_equal(many->stats.corrupt_frames, 0);
    kt_stream_free(&many);
    kt_stream_free(&one);
}

static void test_split_decode(void **state)
{
    (void)state;
    check_split(long_mp4, 3, 96);
    check_split(open_gop, 4, 96);
}

static void test_split_seek(void **state)
{
    (void)state;
    keyer_reader_params p = *kt_cpu();
    p.segments = 3;
    int64_t step = 0;
    keyer_reader *r = open_long_seek_61(&p, &step);
    read_to_end_from_61(r, step);
    keyer_error err = {0};
    assert_int_equal(keyer_reader_seek(r, 3 * step, &err), KEYER_OK);
    assert_int_equal(read_pts(r), 3 * step);
    keyer_reader_destroy(&r);
}

/* Split decode keeps each worker's decoder from chunk to chunk where the next chunk starts
 * with an IDR picture (x264's closed GOPs), and sets it up again where it does not (open GOPs
 * start at recovery points): libavcodec's set-ups are counted (with NVDEC each is a new
 * decoder session). long.mp4: 96 frames, IDR every 12, chunks of 24: two workers take chunks
 * 0, 2 and 1, 3. opengop.mkv: keyframes every 16, chunks of 32: worker 0 takes chunks 0 and
 * 2, chunk 2 starting at a recovery point. The frames stay those of one decoder. */
static void test_split_keeps_decoders(void **state)
{
    (void)state;
    keyer_reader_params p = *kt_cpu();
    p.segments = 2;
    check_split(long_mp4, 2, 96);
    kt_stream *idr = kt_read_stream(long_mp4, &p, 0);
    assert_int_equal(idr->n, 96);
    assert_int_equal(idr->info.segments, 2);
    assert_int_equal(idr->stats.decoder_setups, 2); /* was 4: one per chunk */
    check_split(open_gop, 2, 96);
    kt_stream *open = kt_read_stream(open_gop, &p, 0);
    assert_int_equal(open->n, 96);
    assert_int_equal(open->stats.decoder_setups, 3); /* chunk 2 needs a flush */
    print_message("    decoder set-ups: %lld (IDR chunks), %lld (open GOPs)\n",
                  (long long)idr->stats.decoder_setups, (long long)open->stats.decoder_setups);
    kt_stream_free(&idr);
    kt_stream_free(&open);
}

/* A seek forward to an IDR keyframe keeps the decoder: the frames of the old position it
 * still holds are dropped, the frames from the target on equal one decoder's (bit for bit);
 * a seek back sets the decoder up again. @p path: 96 frames, an IDR picture every 12. */
static void check_seeks_keep_decoder(const char *path)
{
    kt_stream *one = kt_read_stream(path, kt_cpu(), 1);
    assert_int_equal(one->n, 96);
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(path, kt_cpu(), &r, &err))
        fail_msg("%s", err.message);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
        assert_int_equal(f->pts, one->pts[i]);
    }
    keyer_reader_stats st;
    keyer_reader_stats_get(r, &st);
    assert_int_equal(st.decoder_setups, 1);
    /* forward to frame 62: the IDR at 60, frames 60 and 61 decoded and skipped */
    assert_int_equal(keyer_reader_seek(r, one->pts[62], &err), KEYER_OK);
    for (int i = 62; i < 96; i++) {
        assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
        assert_int_equal(f->pts, one->pts[i]);
        if (!kt_frames_equal(f, one->frames[i]))
            fail_msg("%s: frame %d after a forward seek differs from one decoder's", path, i);
    }
    assert_int_equal(keyer_reader_read(r, f, &err), KEYER_STATUS_END);
    keyer_reader_stats_get(r, &st);
    assert_int_equal(st.decoder_setups, 1);
    assert_int_equal(st.dropped_packets, 0);
    /* back to frame 13: a flush, a new set-up */
    assert_int_equal(keyer_reader_seek(r, one->pts[13], &err), KEYER_OK);
    assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
    assert_int_equal(f->pts, one->pts[13]);
    assert_true(kt_frames_equal(f, one->frames[13]));
    /* forward again from the middle of a GOP (14.. were sent): the IDR at 36 */
    assert_int_equal(keyer_reader_seek(r, one->pts[36], &err), KEYER_OK);
    for (int i = 36; i < 50; i++) {
        assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
        assert_int_equal(f->pts, one->pts[i]);
        if (!kt_frames_equal(f, one->frames[i]))
            fail_msg("%s: frame %d after the second forward seek differs from one decoder's",
                     path, i);
    }
    keyer_reader_stats_get(r, &st);
    print_message("    %s: %lld decoder set-ups over 3 seeks\n", path,
                  (long long)st.decoder_setups);
    assert_int_equal(st.decoder_setups, 2);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    kt_stream_free(&one);
}

static void test_seek_keeps_decoder(void **state)
{
    (void)state;
    check_seeks_keep_decoder(long_mp4);
}

/* The clean-cut test on every video packet of a file: 1 exactly for the IDR pictures (every
 * 12th of 96 frames here), with length-prefixed NAL units (MP4: avcC) and with start codes
 * (MPEG-TS: Annex B, where in-band SPS/PPS and SEI come first). */
static int count_clean_cuts(const char *path, int *packets)
{
    AVFormatContext *fc = NULL;
    assert_int_equal(avformat_open_input(&fc, path, NULL, NULL), 0);
    assert_true(avformat_find_stream_info(fc, NULL) >= 0);
    int vs = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    assert_true(vs >= 0);
    AVCodecContext *dec = avcodec_alloc_context3(NULL);
    assert_non_null(dec);
    assert_true(avcodec_parameters_to_context(dec, fc->streams[vs]->codecpar) >= 0);
    AVPacket *pkt = av_packet_alloc();
    int cuts = 0, n = 0;
    while (av_read_frame(fc, pkt) >= 0) {
        if (pkt->stream_index == vs) {
            int cut = kr_source_clean_cut(dec, pkt);
            if (cut && n % 12 != 0)
                fail_msg("%s: packet %d is not an IDR picture", path, n);
            cuts += cut;
            n++;
        }
        av_packet_unref(pkt);
    }
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fc);
    *packets = n;
    return cuts;
}

static void test_clean_cuts(void **state)
{
    (void)state;
    char ts[1024];
    snprintf(ts, sizeof(ts), "%s/long.ts", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.frames = 96;
    p.audio_codec = NULL;
    kt_make_sample(ts, &p);
    int n = 0;
    assert_int_equal(count_clean_cuts(long_mp4, &n), 8);
    assert_int_equal(n, 96);
    assert_int_equal(count_clean_cuts(ts, &n), 8);
    assert_int_equal(n, 96);
    unlink(ts);
    /* open GOPs: only the first keyframe is an IDR picture */
    assert_int_equal(count_clean_cuts(open_gop, &n), 1);
    assert_int_equal(n, 96);
}

/* A pipe cannot be split: one decoder is used and the reason is logged. */
static int log_hits;
static char log_last[512]; /* the last such line */
static void count_split_log(void *opaque, keyer_log_level level, const char *msg)
{
    (void)opaque;
    (void)level;
    if (strstr(msg, "split decode is not possible")) {
        log_hits++;
        snprintf(log_last, sizeof(log_last), "%s", msg);
    }
}

static void test_split_fallback(void **state)
{
    (void)state;
    char mkv[1024];
    snprintf(mkv, sizeof(mkv), "%s/onekey.mkv", dir);
    keyer_sample_params sp = keyer_sample_params_defaults();
    sp.keyint = 100; /* one keyframe: nothing to split */
    sp.frames = 20;
    kt_make_sample(mkv, &sp);
    keyer_logger lg = {KEYER_LOG_WARNING, count_split_log, NULL};
    keyer_reader_params p = *kt_cpu();
    p.segments = 4;
    p.logger = &lg;
    log_hits = 0;
    kt_stream *s = kt_read_stream(mkv, &p, 0);
    assert_int_equal(s->n, 20);
    assert_int_equal(s->info.segments, 1);
    assert_int_equal(log_hits, 1);
    kt_stream_free(&s);
    unlink(mkv);
}

/* segments_auto (keyer's own choice, the session's decode_segments -1): long.mp4 (96 frames,
 * 4 chunks of 24) is split over two sessions opened once each (2 set-ups: the reader makes
 * no single-session decoder first), its frames those of one decoder in order, and a seek
 * restarts the same split, also with sessions decoding at most 5 frames ahead; a file of
 * open GOPs (chunks not starting with IDR pictures) keeps one decoder; test.mp4
 * (48 frames: 2 chunks, fewer than two per session) keeps
 * one decoder without a warning (a debug line), while the same split asked for explicitly
 * goes ahead on 2 chunks. */
static void test_split_auto(void **state)
{
    (void)state;
    kt_stream *one = kt_read_stream(long_mp4, NULL, 1);
    keyer_reader_params p = *kt_cpu();
    p.segments = 2;
    p.segments_auto = 1;
    kt_stream *two = kt_read_stream(long_mp4, &p, 1);
    print_message("    auto split of %s: %d frames, %d sessions, %lld decoder set-ups\n",
                  long_mp4, two->n, two->info.segments, (long long)two->stats.decoder_setups);
    assert_int_equal(one->n, 96);
    assert_int_equal(two->n, 96);
    assert_int_equal(two->info.segments, 2);
    assert_int_equal(two->stats.decoder_setups, 2);
    for (int i = 0; i < one->n; i++) {
        assert_int_equal(two->pts[i], one->pts[i]);
        if (!kt_frames_equal(two->frames[i], one->frames[i]))
            fail_msg("frame %d differs between the automatic split and one decoder", i);
    }
    kt_stream_free(&two);
    /* sessions that may decode only 5 frames ahead (chunks of 24): the same frames */
    p.segment_queue = 5;
    two = kt_read_stream(long_mp4, &p, 1);
    assert_int_equal(two->n, 96);
    assert_int_equal(two->info.segments, 2);
    for (int i = 0; i < one->n; i++)
        if (two->pts[i] != one->pts[i] || !kt_frames_equal(two->frames[i], one->frames[i]))
            fail_msg("frame %d differs with 5 frames ahead per session", i);
    kt_stream_free(&two);
    p.segment_queue = 0;
    kt_stream_free(&one);
    int64_t step = 0;
    keyer_reader *r = open_long_seek_61(&p, &step);
    assert_int_equal(keyer_reader_info(r)->segments, 2);
    read_to_end_from_61(r, step);
    keyer_reader_destroy(&r);
    keyer_error err = {0};
    /* too short for an automatic split: one decoder, no warning */
    keyer_logger lg = {KEYER_LOG_WARNING, count_split_log, NULL};
    p.logger = &lg;
    log_hits = 0;
    kt_stream *short_auto = kt_read_stream(mp4, &p, 0);
    assert_int_equal(short_auto->n, 48);
    assert_int_equal(short_auto->info.segments, 1);
    assert_int_equal(short_auto->stats.decoder_setups, 1);
    assert_int_equal(log_hits, 0);
    lg.level = KEYER_LOG_DEBUG;
    kt_stream_free(&short_auto);
    short_auto = kt_read_stream(mp4, &p, 0);
    assert_int_equal(log_hits, 1); /* the debug line says why */
    kt_stream_free(&short_auto);
    p.segments_auto = 0;
    kt_stream *asked = kt_read_stream(mp4, &p, 0);
    assert_int_equal(asked->n, 48);
    assert_int_equal(asked->info.segments, 2);
    kt_stream_free(&asked);
    /* open GOPs (keyframes every 16 that are not IDR pictures, 192 frames: 6 chunks): each
     * chunk after the first would set its decoder up again, so the automatic split keeps one
     * decoder (1 set-up), while the split asked for goes ahead and sets decoders up again */
    char longer_open[1100];
    snprintf(longer_open, sizeof(longer_open), "%s/opengop192.mkv", dir);
    keyer_sample_params sp = keyer_sample_params_defaults();
    sp.frames = 192;
    sp.audio_codec = NULL;
    sp.keyint = 16;
    sp.bframes = 3;
    sp.codec_options = "x264-params='open-gop=1:scenecut=0'";
    kt_make_sample(longer_open, &sp);
    p.segments_auto = 1;
    log_hits = 0;
    kt_stream *og = kt_read_stream(longer_open, &p, 0);
    assert_int_equal(og->n, 192);
    assert_int_equal(og->info.segments, 1);
    assert_int_equal(og->stats.decoder_setups, 1);
    assert_int_equal(log_hits, 1); /* at debug level, saying why */
    assert_non_null(strstr(log_last, "IDR"));
    kt_stream_free(&og);
    p.segments_auto = 0;
    og = kt_read_stream(longer_open, &p, 0);
    assert_int_equal(og->n, 192);
    assert_int_equal(og->info.segments, 2);
    assert_true(og->stats.decoder_setups > 2);
    print_message("    open GOPs: the automatic split keeps one decoder; asked for, %lld set-ups\n",
                  (long long)og->stats.decoder_setups);
    kt_stream_free(&og);
    unlink(longer_open);
    p.segments_auto = 2;
    assert_int_equal(keyer_reader_open(mp4, &p, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(r);
    /* the bound on each automatic session's frames ahead: about 256 MB of NV12 / P010
     * frames, at least 8, as "the chunk, at most N" (negative); an explicit queue wins */
    AVCodecParameters *par = avcodec_parameters_alloc();
    assert_non_null(par);
    par->format = AV_PIX_FMT_YUV420P;
    const int sizes[4][3] = {{1920, 1080, -86}, {3840, 2160, -21}, {7680, 4320, -8},
                             {320, 240, -2330}};
    for (int k = 0; k < 4; k++) {
        par->width = sizes[k][0];
        par->height = sizes[k][1];
        assert_int_equal(kr_split_auto_queue(par, 0), sizes[k][2]);
    }
    par->width = 3840;
    par->height = 2160;
    par->format = AV_PIX_FMT_YUV420P10LE;
    assert_int_equal(kr_split_auto_queue(par, 0), -10);
    assert_int_equal(kr_split_auto_queue(par, 7), 7);
    avcodec_parameters_free(&par);
}

/* Decoded against delivered pictures (keyer_reader_stats::decoded_pictures), 300 frames of
 * 320x240 with an IDR picture every 12 and 2 B-frames (a reorder delay of 1 or 2), decoded
 * on one thread (as NVDEC decodes): one decoder is given exactly the 300 pictures. At each chunk's end a split worker takes the
 * next chunk's first pictures, which the next worker decodes again: at most the reorder delay
 * (2) per chunk boundary now that a chunk counted exactly ends with its own last frame (before:
 * one more, to see the next chunk's first frame), and at least 1. keyer's own split
 * (segments_auto) makes long chunks: 4 here (a multiple of its 2 sessions, at least 2 each;
 * 3 boundaries), where the split asked for keeps chunks of 24 (12 and one of 12: 12
 * boundaries).
 * Both give the frames of one decoder, complete and in order. */
static void test_split_decoded_pictures(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof(path), "%s/long300.mp4", dir);
    keyer_sample_params sp = keyer_sample_params_defaults();
    sp.frames = 300;
    sp.audio_codec = NULL;
    kt_make_sample(path, &sp);
    keyer_reader_params p = *kt_cpu();
    p.threads = 1; /* as on NVDEC: frame threads would delay the output by more pictures */
    kt_stream *one = kt_read_stream(path, &p, 1);
    assert_int_equal(one->n, 300);
    assert_int_equal(one->stats.decoded_pictures, 300);
    p.segments = 2;
    int64_t extra[2] = {0, 0};
    for (int a = 0; a < 2; a++) {
        p.segments_auto = a;
        kt_stream *two = kt_read_stream(path, &p, 1);
        assert_int_equal(two->n, 300);
        assert_int_equal(two->info.segments, 2);
        assert_int_equal(two->stats.decoder_setups, 2);
        for (int i = 0; i < one->n; i++)
            if (two->pts[i] != one->pts[i] || !kt_frames_equal(two->frames[i], one->frames[i]))
                fail_msg("%s split: frame %d differs from one decoder's", a ? "auto" : "asked",
                         i);
        extra[a] = two->stats.decoded_pictures - two->n;
        kt_stream_free(&two);
    }
    print_message("    300 frames on 2 sessions: %lld pictures decoded twice with chunks of 24 "
                  "(12 boundaries), %lld with keyer's long chunks (3 boundaries)\n",
                  (long long)extra[0], (long long)extra[1]);
    assert_true(extra[0] >= 12 && extra[0] <= 2 * 12);
    assert_true(extra[1] >= 3 && extra[1] <= 2 * 3);
    kt_stream_free(&one);
    unlink(path);
}

static void test_params(void **state)
{
    (void)state;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    keyer_reader_params p = keyer_reader_params_defaults();
    assert_int_equal(p.device, KEYER_DECODE_DEVICE_AUTO);
    assert_int_equal(p.format, KEYER_PIXEL_FORMAT_NONE);
    assert_int_equal(p.keep_streams, 1);
    p.segments = -1;
    assert_int_equal(keyer_reader_open(mp4, &p, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(r);
    p = *kt_cpu();
    p.format = KEYER_PIXEL_FORMAT_GRAYF32;
    assert_int_equal(keyer_reader_open(mp4, &p, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_reader_params_defaults();
    p.input_options = "nonsense";
    assert_int_equal(keyer_reader_open(mp4, &p, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_reader_params_defaults();
    p.input_format = "no-such-demuxer";
    assert_int_equal(keyer_reader_open(mp4, &p, &r, &err), KEYER_STATUS_UNSUPPORTED);
    assert_non_null(strstr(err.message, "no-such-demuxer"));
    assert_int_equal(keyer_reader_open(NULL, kt_cpu(), &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_reader_open(mp4, NULL, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_decode_device d;
    assert_int_equal(keyer_decode_device_from_name("cuda", &d, NULL), KEYER_OK);
    assert_int_equal(d, KEYER_DECODE_DEVICE_CUDA);
    assert_string_equal(keyer_decode_device_name(KEYER_DECODE_DEVICE_CPU), "cpu");
    assert_int_equal(keyer_decode_device_from_name("gpu", &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* CPU decoding asked for explicitly, and NVDEC asked for in a build or machine without it:
     * frames come from the CPU either way. */
    p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CPU;
    p.threads = 2;
    kt_stream *s = kt_read_stream(mp4, &p, 0);
    assert_int_equal(s->n, 48);
    assert_int_equal(s->stats.hw_fallback, 0);
    kt_stream_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info_before_first_frame),
        cmocka_unit_test(test_every_frame_in_order),
        cmocka_unit_test(test_formats_match_the_photo),
        cmocka_unit_test(test_seek),
        cmocka_unit_test(test_image_sequence),
        cmocka_unit_test(test_stdin_pipe),
        cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_split_decode),
        cmocka_unit_test(test_split_seek),
        cmocka_unit_test(test_split_keeps_decoders),
        cmocka_unit_test(test_seek_keeps_decoder),
        cmocka_unit_test(test_clean_cuts),
        cmocka_unit_test(test_split_fallback),
        cmocka_unit_test(test_split_auto),
        cmocka_unit_test(test_split_decoded_pictures),
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
