/* Helpers for the video I/O tests: see kt_io.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavformat/avformat.h>
#include <libavutil/adler32.h>

#include "keyer/image.h"
#include "kt_io.h"
#include "testutil.h"

/* Reader parameters for the CPU tests: decoding on the CPU even where a GPU exists, since
 * they check host frames (the GPU test covers NVDEC). */
const keyer_reader_params *kt_cpu(void)
{
    static keyer_reader_params p;
    p = keyer_reader_params_defaults();
    p.device = KEYER_DECODE_DEVICE_CPU;
    return &p;
}

/* Writes a sample video made from grace_hopper.jpg; fails the test on error. */
void kt_make_sample(const char *path, const keyer_sample_params *p)
{
    char img[1024];
    keyer_error err = {0};
    if (keyer_video_write_sample(path, kt_data_path(img, sizeof(img), "grace_hopper.jpg"), p, &err))
        fail_msg("making %s: %s", path, err.message);
}

keyer_frame *kt_read_image(const char *file, keyer_pixel_format fmt)
{
    char path[4096];
    keyer_error err = {0};
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    if (keyer_image_read(kt_data_path(path, sizeof(path), file), fmt, f, &err))
        fail_msg("%s", err.message);
    return f;
}

void kt_make_clip(const char *path, int width, int height, int frames, int fps)
{
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = width;
    p.height = height;
    p.frames = frames;
    p.frame_rate = (keyer_rational){fps, 1};
    p.preset = "ultrafast";
    kt_make_sample(path, &p);
}

/* Reads @p url to its end with @p p (NULL: kt_cpu()); keeps frames when @p keep. */
kt_stream *kt_read_stream(const char *url, const keyer_reader_params *p, int keep)
{
    kt_stream *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    keyer_error err = {0};
    keyer_reader *r = NULL;
    if (keyer_reader_open(url, p ? p : kt_cpu(), &r, &err))
        fail_msg("opening %s: %s", url, err.message);
    s->info = *keyer_reader_info(r);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    keyer_status st;
    while ((st = keyer_reader_read(r, f, &err)) == KEYER_OK) {
        assert_true(s->n < KT_MAX_FRAMES);
        s->pts[s->n] = f->pts;
        s->flags[s->n] = f->flags;
        if (keep) {
            assert_int_equal(keyer_frame_create(&s->frames[s->n], NULL), KEYER_OK);
            assert_int_equal(keyer_frame_ref(s->frames[s->n], f, NULL), KEYER_OK);
        }
        s->n++;
    }
    s->end = st;
    snprintf(s->message, sizeof(s->message), "%s", err.message);
    keyer_reader_stats_get(r, &s->stats);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    return s;
}

void kt_stream_free(kt_stream **ps)
{
    if (!*ps)
        return;
    for (int i = 0; i < (*ps)->n; i++)
        keyer_frame_destroy(&(*ps)->frames[i]);
    free(*ps);
    *ps = NULL;
}

void kt_audio_packets(const char *path, kt_audio *a)
{
    memset(a, 0, sizeof(*a));
    AVFormatContext *fc = NULL;
    assert_int_equal(avformat_open_input(&fc, path, NULL, NULL), 0);
    assert_true(avformat_find_stream_info(fc, NULL) >= 0);
    int as = av_find_best_stream(fc, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0);
    if (as >= 0) {
        a->codec_id = fc->streams[as]->codecpar->codec_id;
        AVPacket *pkt = av_packet_alloc();
        while (av_read_frame(fc, pkt) >= 0) {
            if (pkt->stream_index == as && a->n < 4096) {
                if (a->n == 0)
                    a->start_us = av_rescale_q(pkt->pts, fc->streams[as]->time_base, AV_TIME_BASE_Q);
                a->sum[a->n++] = (uint32_t)av_adler32_update(1, pkt->data, (size_t)pkt->size);
                a->bytes += pkt->size;
                int64_t end = pkt->pts + pkt->duration;
                a->samples_time_us = av_rescale_q(end, fc->streams[as]->time_base, AV_TIME_BASE_Q);
            }
            av_packet_unref(pkt);
        }
        av_packet_free(&pkt);
    }
    avformat_close_input(&fc);
}

/* PSNR (dB) of plane 0 of two host frames of the same size (8-bit samples). */
double kt_psnr_plane0(const keyer_frame *a, const keyer_frame *b, int bytes_per_px)
{
    double se = 0;
    long n = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width * bytes_per_px; x++) {
            double d = (double)a->data[0][y * a->stride[0] + x] - b->data[0][y * b->stride[0] + x];
            se += d * d;
            n++;
        }
    if (se == 0)
        return 99.0;
    return 10.0 * log10(255.0 * 255.0 * (double)n / se);
}

/* 1 when the planes of two host frames of the same format and size are identical. */
int kt_frames_equal(const keyer_frame *a, const keyer_frame *b)
{
    if (a->format != b->format || a->width != b->width || a->height != b->height)
        return 0;
    for (int p = 0; p < keyer_pixel_format_planes(a->format); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(a->format, a->width, a->height, p, &pw, &ph, &bpe, NULL);
        for (int y = 0; y < ph; y++)
            if (memcmp(a->data[p] + y * a->stride[p], b->data[p] + y * b->stride[p],
                       (size_t)pw * (size_t)bpe))
                return 0;
    }
    return 1;
}
