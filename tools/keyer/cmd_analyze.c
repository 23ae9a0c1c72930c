/*
 * keyer analyze: draws analytics over a video, built on the public API only.
 *
 *   keyer analyze INPUT -o OUTPUT [--faces] [--full-range] [--mesh] [--pose [lite|full|heavy]]
 *                 [--knn K] [--backend reference|cpu] [--threads N] [--max-frames N]
 *
 * Decodes INPUT (anything keyer_reader_open() opens, a still image included), runs the chosen
 * analysers on every frame (faces: BlazeFace + tracker ids, with --mesh the 468-point mesh and
 * its contours; pose: BlazePose skeleton), draws boxes, id labels, contours, skeletons and,
 * with --knn K, a k-nearest-neighbour graph of the tracked points (face centres and visible
 * body keypoints) as curves, and encodes the result to OUTPUT with the input's audio. The
 * analysis and drawing are the main job's --detect (analytics.c), on one input.
 * Prints a summary (frames, distinct face ids, frames with a pose, milliseconds per frame).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytics.h"
#include "commands.h"
#include "keyer/faces.h"
#include "keyer/io.h"
#include "keyer/pose.h"

typedef struct analyze_args {
    const char *input, *output;
    int faces, full_range, mesh, pose, pose_model, knn, threads;
    long long max_frames;
    keyer_backend backend;
} analyze_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: keyer analyze INPUT -o OUTPUT [options]\n"
            "\n"
            "Draws face and body analytics over a video (or a still image).\n"
            "\n"
            "  -o, --output FILE   output video (container and codec from the extension)\n"
            "  --faces             detect and track faces: boxes and id labels\n"
            "  --full-range        use the full-range face detector (faces up to ~5 m)\n"
            "  --mesh              468-point face mesh and its contours (implies --faces)\n"
            "  --pose [MODEL]      body pose skeleton; MODEL lite (default), full or heavy\n"
            "  --knn K             k-nearest-neighbour graph of the tracked points, K >= 1\n"
            "  --backend NAME      inference backend: cpu (default) or reference\n"
            "  --threads N         CPU threads, 0 = all cores (default 0)\n"
            "  --max-frames N      stop after N frames\n"
            "\n"
            "Without --faces, --mesh or --pose, faces are analysed.\n");
}

static int parse_count(const char *opt, const char *s, long long min, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min || v > INT_MAX) {
        fprintf(stderr, "keyer analyze: %s needs an integer >= %lld (got '%s')\n", opt, min,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* 0: ok, 2: usage error, -1: --help printed. */
static int parse_args(int argc, char **argv, analyze_args *a)
{
    keyer_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n = 0;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!v) {
                fprintf(stderr, "keyer analyze: %s needs a file name\n", o);
                return 2;
            }
            a->output = v;
            i++;
        } else if (!strcmp(o, "--faces")) {
            a->faces = 1;
        } else if (!strcmp(o, "--full-range")) {
            a->full_range = 1;
        } else if (!strcmp(o, "--mesh")) {
            a->mesh = a->faces = 1;
        } else if (!strcmp(o, "--pose")) {
            a->pose = 1;
            if (v && (!strcmp(v, "lite") || !strcmp(v, "full") || !strcmp(v, "heavy"))) {
                a->pose_model = !strcmp(v, "lite")   ? KEYER_POSE_MODEL_LITE
                                : !strcmp(v, "full") ? KEYER_POSE_MODEL_FULL
                                                     : KEYER_POSE_MODEL_HEAVY;
                i++;
            }
        } else if (!strcmp(o, "--knn")) {
            if (parse_count(o, v, 1, &n))
                return 2;
            a->knn = (int)n;
            i++;
        } else if (!strcmp(o, "--backend")) {
            if (!v || keyer_backend_from_name(v, &a->backend, &err) != KEYER_OK) {
                fprintf(stderr, "keyer analyze: %s\n", v ? err.message : "--backend needs a value");
                return 2;
            }
            if (a->backend == KEYER_BACKEND_CUDA) {
                fprintf(stderr, "keyer analyze: the analysers take host frames; use --backend "
                                "cpu or reference\n");
                return 2;
            }
            i++;
        } else if (!strcmp(o, "--threads")) {
            if (parse_count(o, v, 0, &n))
                return 2;
            a->threads = (int)n;
            i++;
        } else if (!strcmp(o, "--max-frames")) {
            if (parse_count(o, v, 1, &n))
                return 2;
            a->max_frames = n;
            i++;
        } else if (o[0] == '-' && o[1]) {
            fprintf(stderr, "keyer analyze: unknown option '%s' (see keyer analyze --help)\n", o);
            return 2;
        } else if (!a->input) {
            a->input = o;
        } else {
            fprintf(stderr, "keyer analyze: more than one input ('%s', '%s')\n", a->input, o);
            return 2;
        }
    }
    if (!a->input || !a->output) {
        fprintf(stderr, "keyer analyze: an INPUT and -o OUTPUT are required (see --help)\n");
        return 2;
    }
    if (!a->faces && !a->pose)
        a->faces = 1;
    return 0;
}

int keyer_cmd_analyze(int argc, char **argv)
{
    analyze_args a;
    memset(&a, 0, sizeof(a));
    a.backend = KEYER_BACKEND_CPU;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;

    keyer_error err = {0};
    keyer_reader *in = NULL;
    keyer_writer *out = NULL;
    keyer_frame *frame = NULL, *canvas = NULL;
    kc_analytics *an = NULL;
    long long frames = 0;
    rc = 1;

    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_YUV420P;
    if (keyer_reader_open(a.input, &rp, &in, &err))
        goto fail;
    const keyer_video_info *vi = keyer_reader_info(in);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate.num > 0 && vi->frame_rate.den > 0 ? vi->frame_rate
                                                                      : (keyer_rational){25, 1};
    wp.time_base = vi->time_base;
    wp.matrix = vi->matrix;
    wp.range = vi->range;
    wp.copy_from = in;
    if (keyer_writer_open(a.output, &wp, &out, &err))
        goto fail;
    if (keyer_frame_create(&frame, &err) || keyer_frame_create(&canvas, &err) ||
        keyer_frame_alloc(canvas, KEYER_PIXEL_FORMAT_YUV420P, vi->width, vi->height, NULL, &err))
        goto fail;
    /* the analysers and their drawing: the main job's --detect (analytics.c) */
    kc_analytics_opts ao;
    memset(&ao, 0, sizeof(ao));
    ao.faces = a.faces;
    ao.full_range = a.full_range;
    ao.pose = a.pose;
    ao.pose_model = a.pose_model;
    ao.draw = KC_DRAW_BOXES | KC_DRAW_IDS | (a.mesh ? KC_DRAW_MESH : KC_DRAW_KEYPOINTS) |
              (a.pose ? KC_DRAW_SKELETON : 0) | (a.knn ? KC_DRAW_GRAPH : 0);
    ao.knn = a.knn;
    ao.backend = a.backend;
    ao.threads = a.threads;
    const char *names[1] = {a.input};
    if (kc_analytics_create(&ao, 1, names, &an, &err))
        goto fail;

    keyer_status st = KEYER_OK;
    while ((!a.max_frames || frames < a.max_frames) &&
           (st = keyer_reader_read(in, frame, &err)) == KEYER_OK) {
        /* Draw on a copy: decoded frames may share the decoder's reference pictures. */
        if (keyer_frame_copy(canvas, frame, &err) ||
            kc_analytics_frame(an, 0, frames, frame, canvas, &err) ||
            keyer_writer_write(out, canvas, &err))
            goto fail;
        frames++;
    }
    if (st != KEYER_OK && st != KEYER_STATUS_END && (!a.max_frames || frames < a.max_frames))
        goto fail;
    if (keyer_writer_close(out, &err))
        goto fail;
    printf("keyer analyze: %lld frames -> %s (%s)\n", frames, a.output, keyer_writer_codec(out));
    kc_analytics_summary(an, stdout);
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "keyer analyze: %s\n", err.message[0] ? err.message : "failed");
    kc_analytics_destroy(&an);
    keyer_frame_destroy(&canvas);
    keyer_frame_destroy(&frame);
    keyer_writer_destroy(&out);
    keyer_reader_destroy(&in);
    return rc;
}
