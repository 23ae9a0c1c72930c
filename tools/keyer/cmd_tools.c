/*
 * Small media tools used by the demo, the tests and anyone checking results, all on the
 * public I/O API:
 *   keyer make-sample OUT.mp4 [--image PHOTO] [--size WxH] [--frames N] [--fps R] ...
 *   keyer probe FILE [--frame N --png OUT.png]
 *   keyer compare A B [--every K] [--min-psnr DB]
 * Their options come from option tables (args.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keyer.h"

static keyer_logger quiet_logger(void)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    return lg;
}

/* ---- make-sample ------------------------------------------------------------------------------ */

typedef struct sample_args {
    const char *out;
    const char *image;
    int fps;
    keyer_sample_params sp;
} sample_args;

/* --size WxH */
static keyer_status set_size(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    sample_args *a = obj;
    int w = 0, h = 0;
    if (sscanf(value, "%dx%d", &w, &h) != 2 || w < 16 || h < 16 || w > 8192 || h > 8192)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: '%s' is not WxH with sides in 16..8192", o->name, value);
    a->sp.width = w;
    a->sp.height = h;
    return KEYER_OK;
}

/* --no-audio */
static keyer_status set_no_audio(const keyer_option *o, void *obj, const char *value,
                                 keyer_error *err)
{
    sample_args *a = obj;
    if (kc_switch_value(value))
        a->sp.audio_codec = NULL;
    return KEYER_OK;
}

#define OFF(f) offsetof(sample_args, f)
static const keyer_option sample_options[] = {
    {"image", "the photo to pan over (default tests/data/grace_hopper.jpg)", OFF(image),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, "tests/data/grace_hopper.jpg", "PHOTO", 0, 0u},
    {"size", "frame size (default 1280x720)", 0, KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, set_size,
     "1280x720", "WxH", 0, 0u},
    {"frames", "number of frames, 1..100000 (default 90)", OFF(sp.frames), KEYER_OPTION_INT, 90,
     1, 100000, NULL, NULL, NULL, "N", 0, 0u},
    {"fps", "frame rate, 1..240 (default 30)", OFF(fps), KEYER_OPTION_INT, 30, 1, 240, NULL, NULL,
     NULL, "R", 0, 0u},
    {"codec", "video encoder (default libx264)", OFF(sp.codec), KEYER_OPTION_STRING, 0, 0, 0, NULL,
     NULL, NULL, "NAME", 0, 0u},
    {"preset", "encoder preset", OFF(sp.preset), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL,
     "NAME", 0, 0u},
    {"no_audio", "no audio track", 0, KEYER_OPTION_BOOL, 0, 0, 1, NULL, set_no_audio, NULL, NULL,
     0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    {"noise", "noise added to each frame, 0..64 (default 0)", OFF(sp.noise), KEYER_OPTION_INT, 0,
     0, 64, NULL, NULL, NULL, "N", 0, 0u},
    {"bframes", "B-frames, 0..16 (default 2)", OFF(sp.bframes), KEYER_OPTION_INT, 2, 0, 16, NULL,
     NULL, NULL, "N", 0, 0u},
    {"keyint", "frames between keyframes, 1..100000 (default 12)", OFF(sp.keyint),
     KEYER_OPTION_INT, 12, 1, 100000, NULL, NULL, NULL, "N", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};
#undef OFF

static int sample_output(const kc_args *a, const char *arg)
{
    sample_args *args = a->opaque;
    if (args->out)
        return kc_usage_error(a, "one output at a time (got %s and %s)", args->out, arg);
    args->out = arg;
    return 0;
}

int keyer_cmd_make_sample(int argc, char **argv)
{
    sample_args args;
    memset(&args, 0, sizeof(args));
    args.image = "tests/data/grace_hopper.jpg";
    args.fps = 30;
    args.sp = keyer_sample_params_defaults();
    args.sp.width = 1280;
    args.sp.height = 720;
    args.sp.frames = 90;
    kc_table table = {sample_options, &args};
    kc_args a = {
        .prog = "keyer make-sample",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer make-sample OUTPUT [options]\n"
                 "Writes a short test video: a slow pan and zoom over PHOTO with a 440 Hz tone,\n"
                 "H.264 + AAC by default (2 B-frames, a keyframe every 12 frames; --bframes 0 for\n"
                 "a camera-like stream).\n\n",
        .positional = sample_output,
        .opaque = &args,
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!args.out)
        return kc_usage_error(&a, "no OUTPUT given");
    keyer_sample_params sp = args.sp;
    sp.frame_rate = (keyer_rational){args.fps, 1};
    const char *out = args.out, *image = args.image;
    keyer_error err = {0};
    if (keyer_video_write_sample(out, image, &sp, &err)) {
        fprintf(stderr, "keyer make-sample: %s\n", err.message);
        return 1;
    }
    return 0;
}

/* ---- probe ------------------------------------------------------------------------------------- */

typedef struct probe_args {
    const char *path;
    const char *png;
    int frame; /* -1: none */
} probe_args;

static const keyer_option probe_options[] = {
    {"frame", "with --png: the frame (0-based) to write", offsetof(probe_args, frame),
     KEYER_OPTION_INT, -1, 0, 100000000, NULL, NULL, NULL, "N", 0, 0u},
    {"png", "write frame N there as a PNG", offsetof(probe_args, png), KEYER_OPTION_STRING, 0, 0,
     0, NULL, NULL, NULL, "OUT.png", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};

static int probe_input(const kc_args *a, const char *arg)
{
    probe_args *args = a->opaque;
    if (args->path)
        return kc_usage_error(a, "one file at a time (got %s and %s)", args->path, arg);
    args->path = arg;
    return 0;
}

int keyer_cmd_probe(int argc, char **argv)
{
    probe_args args = {NULL, NULL, -1};
    kc_table table = {probe_options, &args};
    kc_args a = {
        .prog = "keyer probe",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer probe FILE [--frame N --png OUT.png]\n"
                 "Decodes every frame of FILE and prints key=value lines: frames (decoded),\n"
                 "width, height, fps, duration (seconds), codec, format, audio streams, damaged\n"
                 "frames. With --frame and --png, frame N (0-based) is also written as a PNG.\n\n",
        .positional = probe_input,
        .opaque = &args,
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!args.path)
        return kc_usage_error(&a, "no FILE given");
    if (args.png && args.frame < 0)
        return kc_usage_error(&a, "--png needs --frame N");
    const char *path = args.path, *png = args.png;
    long want = args.frame;
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
    rc = 1;
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

typedef struct compare_args {
    const char *a, *b;
    int every;
    double min_psnr; /* < 0: any difference is reported, none fails */
} compare_args;

/* --min-psnr: kept as a double (the table's FLOAT is a float field). */
static keyer_status set_min_psnr(const keyer_option *o, void *obj, const char *value,
                                 keyer_error *err)
{
    compare_args *c = obj;
    return keyer_parse_number(o->name, value, o->min, o->max, &c->min_psnr, err);
}

static const keyer_option compare_options[] = {
    {"every", "compare every K-th frame (default 1)", offsetof(compare_args, every),
     KEYER_OPTION_INT, 1, 1, 1000000, NULL, NULL, NULL, "K", 0, 0u},
    {"min_psnr", "fail when a frame's PSNR is below DB (default: none fails)", 0,
     KEYER_OPTION_FLOAT, -1, -1e9, 1e9, NULL, set_min_psnr, NULL, "DB", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};

static int compare_input(const kc_args *a, const char *arg)
{
    compare_args *args = a->opaque;
    if (args->a && args->b)
        return kc_usage_error(a, "two inputs to compare (got a third, %s)", arg);
    *(args->a ? &args->b : &args->a) = arg;
    return 0;
}

int keyer_cmd_compare(int argc, char **argv)
{
    compare_args args = {NULL, NULL, 1, -1};
    kc_table table = {compare_options, &args};
    kc_args a = {
        .prog = "keyer compare",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer compare A B [--every K] [--min-psnr DB]\n"
                 "Decodes two videos (or pictures, or image sequences) and compares frame i of A\n"
                 "with frame i of B in RGB, every K-th frame (default 1). Prints the PSNR of each\n"
                 "compared frame and a summary. Exits 1 when the frame counts or sizes differ, or\n"
                 "when a PSNR is below --min-psnr (default: any difference is reported, none "
                 "fails).\n\n",
        .positional = compare_input,
        .opaque = &args,
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!args.b)
        return kc_usage_error(&a, "two inputs A and B are needed");
    const char *pa = args.a, *pb = args.b;
    long every = args.every;
    double min_psnr = args.min_psnr;
    keyer_logger lg = quiet_logger();
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.keep_streams = 0;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.logger = &lg;
    keyer_reader *ra = NULL, *rb = NULL;
    keyer_frame *fa = NULL, *fb = NULL;
    keyer_error err = {0};
    rc = 1;
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
