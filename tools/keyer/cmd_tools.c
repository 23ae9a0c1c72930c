/*
 * Small media tools used by the demo, the tests and anyone checking results, all on the
 * public I/O API:
 *   keyer make-sample OUT.mp4 [--image PHOTO] [--size WxH] [--frames N] [--fps R] ...
 *   keyer probe FILE [--frame N --png OUT.png]
 *   keyer compare A B [--every K] [--min-psnr DB]
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keyer.h"

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static keyer_logger quiet_logger(void)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    return lg;
}

/* ---- make-sample ------------------------------------------------------------------------------ */

static void sample_usage(FILE *f)
{
    fprintf(f,
            "usage: keyer make-sample OUTPUT [--image PHOTO] [--size WxH] [--frames N] [--fps R]\n"
            "                         [--codec NAME] [--preset NAME] [--no-audio] [--noise N]\n"
            "                         [--bframes N] [--keyint N]\n"
            "Writes a short test video: a slow pan and zoom over PHOTO (default\n"
            "tests/data/grace_hopper.jpg) with a 440 Hz tone, H.264 + AAC by default\n"
            "(2 B-frames, a keyframe every 12 frames; --bframes 0 for a camera-like stream).\n");
}

int keyer_cmd_make_sample(int argc, char **argv)
{
    const char *out = NULL;
    const char *image = "tests/data/grace_hopper.jpg";
    keyer_sample_params sp = keyer_sample_params_defaults();
    sp.width = 1280;
    sp.height = 720;
    sp.frames = 90;
    sp.frame_rate = (keyer_rational){30, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            sample_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--image") && v) {
            image = v;
            i++;
        } else if (!strcmp(a, "--size") && v) {
            int w = 0, h = 0;
            if (sscanf(v, "%dx%d", &w, &h) != 2 || w < 16 || h < 16 || w > 8192 || h > 8192) {
                fprintf(stderr, "keyer make-sample: bad size '%s' (WxH, 16..8192)\n", v);
                return 2;
            }
            sp.width = w;
            sp.height = h;
            i++;
        } else if (!strcmp(a, "--frames") && v && !parse_long(v, 1, 100000, &n)) {
            sp.frames = (int)n;
            i++;
        } else if (!strcmp(a, "--fps") && v && !parse_long(v, 1, 240, &n)) {
            sp.frame_rate = (keyer_rational){(int)n, 1};
            i++;
        } else if (!strcmp(a, "--noise") && v && !parse_long(v, 0, 64, &n)) {
            sp.noise = (int)n;
            i++;
        } else if (!strcmp(a, "--bframes") && v && !parse_long(v, 0, 16, &n)) {
            sp.bframes = (int)n;
            i++;
        } else if (!strcmp(a, "--keyint") && v && !parse_long(v, 1, 100000, &n)) {
            sp.keyint = (int)n;
            i++;
        } else if (!strcmp(a, "--codec") && v) {
            sp.codec = v;
            i++;
        } else if (!strcmp(a, "--preset") && v) {
            sp.preset = v;
            i++;
        } else if (!strcmp(a, "--no-audio")) {
            sp.audio_codec = NULL;
        } else if (a[0] != '-' && !out) {
            out = a;
        } else {
            sample_usage(stderr);
            return 2;
        }
    }
    if (!out) {
        sample_usage(stderr);
        return 2;
    }
    keyer_error err = {0};
    if (keyer_video_write_sample(out, image, &sp, &err)) {
        fprintf(stderr, "keyer make-sample: %s\n", err.message);
        return 1;
    }
    return 0;
}

/* ---- probe ------------------------------------------------------------------------------------- */

static void probe_usage(FILE *f)
{
    fprintf(f, "usage: keyer probe FILE [--frame N --png OUT.png]\n"
               "Decodes every frame of FILE and prints key=value lines: frames (decoded),\n"
               "width, height, fps, duration (seconds), codec, format, audio streams, damaged\n"
               "frames. With --frame and --png, frame N (0-based) is also written as a PNG.\n");
}

int keyer_cmd_probe(int argc, char **argv)
{
    const char *path = NULL, *png = NULL;
    long want = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            probe_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--frame") && v && !parse_long(v, 0, 100000000, &want)) {
            i++;
        } else if (!strcmp(a, "--png") && v) {
            png = v;
            i++;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else {
            probe_usage(stderr);
            return 2;
        }
    }
    if (!path || (png && want < 0)) {
        probe_usage(stderr);
        return 2;
    }
    keyer_logger lg = quiet_logger();
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.keep_streams = 0;
    rp.logger = &lg;
    if (png)
        rp.format = KEYER_PIXEL_FORMAT_RGB24;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    keyer_error err = {0};
    int rc = 1;
    if (keyer_reader_open(path, &rp, &r, &err) || keyer_frame_create(&f, &err)) {
        fprintf(stderr, "keyer probe: %s\n", err.message);
        goto done;
    }
    const keyer_video_info *vi = keyer_reader_info(r);
    int64_t frames = 0, first = INT64_MIN, last = INT64_MIN, last_dur = 0;
    keyer_status st;
    int wrote = 0;
    while ((st = keyer_reader_read(r, f, &err)) == KEYER_OK) {
        if (first == INT64_MIN)
            first = f->pts;
        last = f->pts;
        last_dur = f->duration;
        if (png && frames == want) {
            if (keyer_image_write(png, f, &err)) {
                fprintf(stderr, "keyer probe: %s\n", err.message);
                goto done;
            }
            wrote = 1;
        }
        frames++;
    }
    if (st != KEYER_STATUS_END) {
        fprintf(stderr, "keyer probe: %s\n", err.message);
        goto done;
    }
    keyer_reader_stats rs;
    keyer_reader_stats_get(r, &rs);
    double tb = vi->time_base.den ? (double)vi->time_base.num / vi->time_base.den : 0.0;
    double fps = vi->frame_rate.den ? (double)vi->frame_rate.num / vi->frame_rate.den : 0.0;
    if (last_dur <= 0 && fps > 0 && tb > 0)
        last_dur = (int64_t)llround(1.0 / (fps * tb));
    double duration = first != INT64_MIN ? (double)(last - first + last_dur) * tb : 0.0;
    printf("file=%s\nframes=%lld\nwidth=%d\nheight=%d\nfps=%.3f\nduration=%.3f\ncodec=%s\n"
           "format=%s\naudio_streams=%d\nrotation=%d\ndamaged_frames=%lld\n",
           path, (long long)frames, vi->width, vi->height, fps, duration, vi->codec,
           keyer_pixel_format_name(vi->format), vi->audio_streams, vi->rotation,
           (long long)rs.corrupt_frames);
    if (png && !wrote) {
        fprintf(stderr, "keyer probe: %s has no frame %ld\n", path, want);
        goto done;
    }
    rc = 0;
done:
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    return rc;
}

/* ---- compare ------------------------------------------------------------------------------------ */

static void compare_usage(FILE *f)
{
    fprintf(f, "usage: keyer compare A B [--every K] [--min-psnr DB]\n"
               "Decodes two videos (or pictures, or image sequences) and compares frame i of A\n"
               "with frame i of B in RGB, every K-th frame (default 1). Prints the PSNR of each\n"
               "compared frame and a summary. Exits 1 when the frame counts or sizes differ, or\n"
               "when a PSNR is below --min-psnr (default: any difference is reported, none fails).\n");
}

static double psnr(const keyer_frame *a, const keyer_frame *b)
{
    double se = 0;
    for (int y = 0; y < a->height; y++) {
        const uint8_t *pa = a->data[0] + y * a->stride[0];
        const uint8_t *pb = b->data[0] + y * b->stride[0];
        for (int x = 0; x < a->width * 3; x++) {
            double d = (double)pa[x] - (double)pb[x];
            se += d * d;
        }
    }
    double mse = se / ((double)a->width * a->height * 3);
    return mse <= 0 ? 99.0 : 10.0 * log10(255.0 * 255.0 / mse);
}

int keyer_cmd_compare(int argc, char **argv)
{
    const char *pa = NULL, *pb = NULL;
    long every = 1;
    double min_psnr = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            compare_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--every") && v && !parse_long(v, 1, 1000000, &every)) {
            i++;
        } else if (!strcmp(a, "--min-psnr") && v) {
            min_psnr = atof(v);
            i++;
        } else if (a[0] != '-' && !pa) {
            pa = a;
        } else if (a[0] != '-' && !pb) {
            pb = a;
        } else {
            compare_usage(stderr);
            return 2;
        }
    }
    if (!pa || !pb) {
        compare_usage(stderr);
        return 2;
    }
    keyer_logger lg = quiet_logger();
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.keep_streams = 0;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.logger = &lg;
    keyer_reader *ra = NULL, *rb = NULL;
    keyer_frame *fa = NULL, *fb = NULL;
    keyer_error err = {0};
    int rc = 1;
    if (keyer_reader_open(pa, &rp, &ra, &err) || keyer_reader_open(pb, &rp, &rb, &err) ||
        keyer_frame_create(&fa, &err) || keyer_frame_create(&fb, &err)) {
        fprintf(stderr, "keyer compare: %s\n", err.message);
        goto done;
    }
    int64_t na = 0, nb = 0, compared = 0;
    double lo = 1e9, sum = 0;
    int size_mismatch = 0;
    for (;;) {
        keyer_status sa = keyer_reader_read(ra, fa, &err);
        if (sa && sa != KEYER_STATUS_END) {
            fprintf(stderr, "keyer compare: %s\n", err.message);
            goto done;
        }
        keyer_status sb = keyer_reader_read(rb, fb, &err);
        if (sb && sb != KEYER_STATUS_END) {
            fprintf(stderr, "keyer compare: %s\n", err.message);
            goto done;
        }
        na += sa == KEYER_OK;
        nb += sb == KEYER_OK;
        if (sa || sb) {
            /* count the rest of the longer one */
            while (!sa && (sa = keyer_reader_read(ra, fa, &err)) == KEYER_OK)
                na++;
            while (!sb && (sb = keyer_reader_read(rb, fb, &err)) == KEYER_OK)
                nb++;
            break;
        }
        if (fa->width != fb->width || fa->height != fb->height) {
            size_mismatch = 1;
            continue;
        }
        if ((na - 1) % every)
            continue;
        double p = psnr(fa, fb);
        printf("frame %lld psnr %.2f\n", (long long)(na - 1), p);
        compared++;
        sum += p;
        if (p < lo)
            lo = p;
    }
    printf("frames_a=%lld\nframes_b=%lld\ncompared=%lld\nmin_psnr=%.2f\nmean_psnr=%.2f\n",
           (long long)na, (long long)nb, (long long)compared, compared ? lo : 0.0,
           compared ? sum / (double)compared : 0.0);
    if (na != nb)
        fprintf(stderr, "keyer compare: %s has %lld frames, %s has %lld\n", pa, (long long)na, pb,
                (long long)nb);
    else if (size_mismatch)
        fprintf(stderr, "keyer compare: the frames differ in size\n");
    else if (min_psnr >= 0 && compared && lo < min_psnr)
        fprintf(stderr, "keyer compare: PSNR %.2f dB is below %.2f dB\n", lo, min_psnr);
    else
        rc = 0;
done:
    keyer_frame_destroy(&fa);
    keyer_frame_destroy(&fb);
    keyer_reader_destroy(&ra);
    keyer_reader_destroy(&rb);
    return rc;
}
