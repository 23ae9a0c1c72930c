/* FFmpeg's own log lines go through keyer's logger: a reader opened on a damaged MP4 with a
 * capturing logger receives FFmpeg's messages ("ffmpeg: [<context>] <text>", no newline, at
 * the mapped level, filtered by the logger's level); while two readers are open the one
 * opened last receives them; after the readers are destroyed their loggers are never called
 * again (the test poisons them and makes FFmpeg log). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavformat/avformat.h>
#include <libavutil/log.h>

#include "keyer/io.h"
#include "keyer/log.h"
#include "kt_io.h"

#define MAX_LINES 256

/* A logger sink that keeps the lines (decoder threads may log at the same time). */
typedef struct capture {
    pthread_mutex_t lock;
    int n;
    int poisoned; /* set after its reader is destroyed: any further call is a failure */
    int calls_after_poison;
    keyer_log_level levels[MAX_LINES];
    char lines[MAX_LINES][256];
} capture;

static void capture_line(void *opaque, keyer_log_level level, const char *message)
{
    capture *c = opaque;
    pthread_mutex_lock(&c->lock);
    if (c->poisoned)
        c->calls_after_poison++;
    else if (c->n < MAX_LINES) {
        c->levels[c->n] = level;
        snprintf(c->lines[c->n], sizeof(c->lines[c->n]), "%s", message);
        c->n++;
    }
    pthread_mutex_unlock(&c->lock);
}

static keyer_logger capture_logger(capture *c, keyer_log_level level)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    keyer_logger lg = keyer_logger_default();
    lg.level = level;
    lg.callback = capture_line;
    lg.opaque = c;
    return lg;
}

/* Number of captured lines starting with "ffmpeg: " and containing @p what (NULL: any),
 * counting from line @p from; *last: the index of the last such line (-1: none). */
static int ffmpeg_lines_from(capture *c, int from, const char *what, int *last)
{
    int k = 0, at = -1, bad = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = from; i < c->n; i++) {
        const char *l = c->lines[i];
        size_t len = strlen(l);
        bad |= len == 0 || l[len - 1] == '\n';
        if (!strncmp(l, "ffmpeg: ", 8) && (!what || strstr(l, what))) {
            k++;
            at = i;
        }
    }
    pthread_mutex_unlock(&c->lock);
    assert_false(bad); /* no empty lines, no trailing newlines */
    if (last)
        *last = at;
    return k;
}

static int ffmpeg_lines(capture *c, const char *what)
{
    return ffmpeg_lines_from(c, 0, what, NULL);
}

static int lines_now(capture *c)
{
    pthread_mutex_lock(&c->lock);
    int n = c->n;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static char dir[512];
static char mp4[1024]; /* moov at the end */
static char cut[1024]; /* the same cut before its moov */

static int setup(void **state)
{
    (void)state;
    kt_tmpdir(dir, sizeof(dir), "io-log");
    snprintf(mp4, sizeof(mp4), "%s/sample.mp4", dir);
    snprintf(cut, sizeof(cut), "%s/cut.mp4", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.frames = 12;
    p.audio_codec = NULL;
    kt_make_sample(mp4, &p);
    size_t size = 0;
    uint8_t *data = kt_read_file(mp4, &size);
    assert_non_null(data);
    assert_int_equal(kt_write_file(cut, data, size * 6 / 10), 0);
    free(data);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(mp4);
    unlink(cut);
    rmdir(dir);
    return 0;
}

/* Makes FFmpeg log an error of its own without keyer: the mov demuxer on the cut file.
 * FFmpeg's default callback is silenced meanwhile so the test output stays clean. */
static void ffmpeg_logs_alone(void)
{
    int old = av_log_get_level();
    av_log_set_level(AV_LOG_QUIET);
    AVFormatContext *fc = NULL;
    assert_true(avformat_open_input(&fc, cut, NULL, NULL) < 0);
    av_log(NULL, AV_LOG_ERROR, "a line from nobody's reader\n");
    av_log_set_level(old);
}

static void test_lines_reach_the_logger(void **state)
{
    (void)state;
    capture *c = malloc(sizeof(*c));
    assert_non_null(c);
    keyer_logger lg = capture_logger(c, KEYER_LOG_WARNING);
    keyer_reader_params p = *kt_cpu();
    p.logger = &lg;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_reader_open(cut, &p, &r, &err), KEYER_STATUS_BAD_DATA);
    assert_null(r);
    for (int i = 0; i < c->n; i++)
        print_message("    %s: %s\n", keyer_log_level_name(c->levels[i]), c->lines[i]);
    /* libavformat's mov demuxer says it, as an error, naming itself. */
    assert_true(ffmpeg_lines(c, "moov atom not found") >= 1);
    assert_true(ffmpeg_lines(c, "[mov,mp4") >= 1);
    for (int i = 0; i < c->n; i++)
        if (strstr(c->lines[i], "moov atom not found"))
            assert_int_equal(c->levels[i], KEYER_LOG_ERROR);

    /* The reader is gone: its logger is never called again. */
    c->poisoned = 1;
    ffmpeg_logs_alone();
    assert_int_equal(c->calls_after_poison, 0);
    pthread_mutex_destroy(&c->lock);
    free(c);

    /* A logger at level QUIET receives nothing. */
    capture *q = malloc(sizeof(*q));
    assert_non_null(q);
    keyer_logger ql = capture_logger(q, KEYER_LOG_QUIET);
    p.logger = &ql;
    assert_int_equal(keyer_reader_open(cut, &p, &r, &err), KEYER_STATUS_BAD_DATA);
    assert_int_equal(q->n, 0);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* Two readers open: FFmpeg's lines go to the one opened last, then back to the first. */
static void test_newest_reader_gets_the_lines(void **state)
{
    (void)state;
    capture *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    keyer_logger la = capture_logger(a, KEYER_LOG_TRACE);
    keyer_logger lb = capture_logger(b, KEYER_LOG_WARNING);
    keyer_reader_params p = *kt_cpu();
    p.logger = &la;
    keyer_reader *ra = NULL, *rb = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_reader_open(mp4, &p, &ra, &err), KEYER_OK);
    /* At TRACE the first reader also sees FFmpeg's verbose and debug lines. */
    int a_opened = lines_now(a);
    print_message("    %d lines at trace level while opening a good file\n", a_opened);
    assert_true(ffmpeg_lines(a, NULL) >= 1);

    p.logger = &lb;
    assert_int_equal(keyer_reader_open(cut, &p, &rb, &err), KEYER_STATUS_BAD_DATA);
    assert_true(ffmpeg_lines(b, "moov atom not found") >= 1);
    assert_int_equal(ffmpeg_lines_from(a, a_opened, "moov atom not found", NULL), 0);

    /* The second one is gone (its open failed): the first one gets FFmpeg's lines again. */
    b->poisoned = 1;
    av_log(NULL, AV_LOG_ERROR, "hello from ffmpeg %d\n", 42);
    assert_int_equal(b->calls_after_poison, 0);
    int at = -1;
    assert_int_equal(ffmpeg_lines_from(a, 0, "hello from ffmpeg 42", &at), 1);
    assert_string_equal(a->lines[at], "ffmpeg: hello from ffmpeg 42"); /* no [context] */
    assert_int_equal(a->levels[at], KEYER_LOG_ERROR);
    /* the newest logger (again the first one, at TRACE) takes FFmpeg's trace lines too */
    av_log(NULL, AV_LOG_TRACE, "a trace line %d\n", 7);
    assert_int_equal(ffmpeg_lines_from(a, 0, "a trace line 7", &at), 1);
    assert_int_equal(a->levels[at], KEYER_LOG_TRACE);
    /* with a WARNING logger newest, trace and debug lines go nowhere (dropped before the
     * registry's lock), warnings still reach it */
    capture *w = malloc(sizeof(*w));
    assert_non_null(w);
    keyer_logger lw = capture_logger(w, KEYER_LOG_WARNING);
    keyer_reader *rw = NULL;
    p.logger = &lw;
    assert_int_equal(keyer_reader_open(mp4, &p, &rw, &err), KEYER_OK);
    int w_opened = lines_now(w), a_now = lines_now(a);
    av_log(NULL, AV_LOG_TRACE, "another trace line\n");
    av_log(NULL, AV_LOG_DEBUG, "a debug line\n");
    av_log(NULL, AV_LOG_WARNING, "a warning line\n");
    assert_int_equal(ffmpeg_lines_from(w, w_opened, "another trace line", NULL), 0);
    assert_int_equal(ffmpeg_lines_from(w, w_opened, "a debug line", NULL), 0);
    assert_int_equal(ffmpeg_lines_from(a, a_now, "another trace line", NULL), 0);
    assert_int_equal(ffmpeg_lines_from(w, w_opened, "a warning line", NULL), 1);
    keyer_reader_destroy(&rw);
    pthread_mutex_destroy(&w->lock);
    free(w);
    /* w detached: the first one is the newest again and gets trace lines */
    av_log(NULL, AV_LOG_TRACE, "a third trace line\n");
    assert_int_equal(ffmpeg_lines_from(a, a_now, "a third trace line", NULL), 1);

    /* Reading to the end and destroying: afterwards nobody's logger is called. */
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    int frames = 0;
    while (keyer_reader_read(ra, f, &err) == KEYER_OK)
        frames++;
    assert_int_equal(frames, 12);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&ra);
    a->poisoned = 1;
    ffmpeg_logs_alone();
    assert_int_equal(a->calls_after_poison, 0);
    pthread_mutex_destroy(&a->lock);
    pthread_mutex_destroy(&b->lock);
    free(a);
    free(b);
}

/* A writer routes FFmpeg's lines too (libx264 reports its settings at info level). */
static void test_writer_lines(void **state)
{
    (void)state;
    capture *c = malloc(sizeof(*c));
    assert_non_null(c);
    keyer_logger lg = capture_logger(c, KEYER_LOG_INFO);
    char out[1024];
    snprintf(out, sizeof(out), "%s/out.mkv", dir);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = 64;
    wp.height = 48;
    wp.frame_rate = (keyer_rational){24, 1};
    wp.logger = &lg;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_writer_open(out, &wp, &w, &err), KEYER_OK);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGB24, 64, 48, NULL, &err), KEYER_OK);
    for (int i = 0; i < 4; i++) {
        memset(f->data[0], 40 * i, (size_t)f->stride[0] * 48);
        f->pts = i;
        f->time_base = (keyer_rational){1, 24};
        assert_int_equal(keyer_writer_write(w, f, &err), KEYER_OK);
    }
    assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
    keyer_writer_destroy(&w);
    keyer_frame_destroy(&f);
    print_message("    %d lines at info level from the writer, %d from FFmpeg\n", c->n,
                  ffmpeg_lines(c, NULL));
    assert_true(ffmpeg_lines(c, NULL) >= 1);
    c->poisoned = 1;
    ffmpeg_logs_alone();
    assert_int_equal(c->calls_after_poison, 0);
    pthread_mutex_destroy(&c->lock);
    free(c);
    unlink(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_reach_the_logger),
        cmocka_unit_test(test_newest_reader_gets_the_lines),
        cmocka_unit_test(test_writer_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
