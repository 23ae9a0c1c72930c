/* Helpers for the video I/O tests (test_io_*.c) and the tests that read the test photos:
 * sample media made from the test photos, the photos themselves, reading whole streams, audio
 * packet checksums with libavformat, frame comparison. Failures inside a helper fail the
 * running cmocka test. */
#ifndef KEYER_KT_IO_H
#define KEYER_KT_IO_H

#include <stdint.h>

#include "keyer/io.h"
#include "testutil.h"

#define KT_MAX_FRAMES 512

/* Reader parameters for the CPU tests: decoding on the CPU even where a GPU exists, since
 * they check host frames (the GPU test covers NVDEC). */
const keyer_reader_params *kt_cpu(void);

/* Writes a sample video made from grace_hopper.jpg; fails the test on error. */
void kt_make_sample(const char *path, const keyer_sample_params *p);

/* A new host frame holding the test-data image @p file (tests/data/@p file, kt_data_path)
 * decoded as @p fmt by keyer_image_read(); fails the test with the reader's message when it
 * cannot be read. The caller destroys the frame. */
keyer_frame *kt_read_image(const char *file, keyer_pixel_format fmt);

/* kt_make_sample() of a @p width x @p height clip of @p frames frames at @p fps frames/s with
 * x264's ultrafast preset, the sample's defaults otherwise. */
void kt_make_clip(const char *path, int width, int height, int frames, int fps);

/* Everything read from one input. */
typedef struct kt_stream {
    keyer_video_info info;
    keyer_reader_stats stats;
    int n;
    int64_t pts[KT_MAX_FRAMES];
    int flags[KT_MAX_FRAMES];
    keyer_frame *frames[KT_MAX_FRAMES]; /* kept when asked */
    keyer_status end;                   /* status that ended reading */
    char message[KEYER_ERROR_MESSAGE_MAX];
} kt_stream;

/* Reads @p url to its end with @p p (NULL: kt_cpu()); keeps frames when @p keep. */
kt_stream *kt_read_stream(const char *url, const keyer_reader_params *p, int keep);
/* Frees *@p ps with the frames it kept and sets it to NULL (accepts a NULL *ps). */
void kt_stream_free(kt_stream **ps);

/* Audio packets of a file, straight from libavformat: count, Adler-32 of each, total bytes. */
typedef struct kt_audio {
    int n;
    uint32_t sum[4096];
    int64_t bytes;
    int codec_id;
    int64_t samples_time_us; /* end time of the last packet, microseconds */
    int64_t start_us;        /* pts of the first packet, microseconds */
} kt_audio;

/* Fills @p a with the audio packets of the file at @p path (fails the test when it cannot
 * be opened). */
void kt_audio_packets(const char *path, kt_audio *a);

/* PSNR (dB) of plane 0 of two host frames of the same size (8-bit samples). */
double kt_psnr_plane0(const keyer_frame *a, const keyer_frame *b, int bytes_per_px);

/* 1 when the planes of two host frames of the same format and size are identical. */
int kt_frames_equal(const keyer_frame *a, const keyer_frame *b);

#endif
