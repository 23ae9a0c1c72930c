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
 * Its options come from an option table (args.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analytics.h"
#include "args.h"
#include "commands.h"
#include "keyer/faces.h"
#include "keyer/io.h"
#include "keyer/pose.h"

typedef struct analyze_args {
    const char *input, *output;
    int faces, full_range, mesh, pose, knn, threads, max_frames;
    keyer_pose_model pose_model;
    keyer_backend backend;
} analyze_args;

/* --mesh: the face mesh, which implies --faces */
static keyer_status set_mesh(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    analyze_args *a = obj;
    if (kc_switch_value(value))
        a->mesh = a->faces = 1;
    return KEYER_OK;
}

/* --pose [MODEL] */
static keyer_status set_pose(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    analyze_args *a = obj;
    a->pose = 1;
    if (value)
        a->pose_model = (keyer_pose_model)kc_choice_value(o, value);
    return KEYER_OK;
}

/* --backend: the analysers take host frames */
static keyer_status set_backend(const keyer_option *o, void *obj, const char *value,
                                keyer_error *err)
{
    analyze_args *a = obj;
    keyer_backend backend;
    keyer_status st = keyer_backend_from_name(value, &backend, err);
    if (st)
        return st;
    if (backend == KEYER_BACKEND_CUDA)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: the analysers take host frames; use --backend cpu or "
                               "reference", o->name);
    a->backend = backend;
    return KEYER_OK;
}

static const keyer_option_choice pose_models[] = {
    {"lite", KEYER_POSE_MODEL_LITE, "pose-lite"},
    {"full", KEYER_POSE_MODEL_FULL, "pose-full"},
    {"heavy", KEYER_POSE_MODEL_HEAVY, "pose-heavy"},
    {NULL, 0, NULL},
};

#define OFF(f) offsetof(analyze_args, f)
#define OPT KEYER_OPTION_FLAG_VALUE_OPTIONAL
static const keyer_option analyze_options[] = {
    {"output", "output video (container and codec from the extension)", OFF(output),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "FILE", 'o', 0u},
    {"faces", "detect and track faces: boxes and id labels", OFF(faces), KEYER_OPTION_BOOL, 0, 0,
     1, NULL, NULL, NULL, NULL, 0, OPT},
    {"full_range", "use the full-range face detector (faces up to ~5 m)", OFF(full_range),
     KEYER_OPTION_BOOL, 0, 0, 1, NULL, NULL, NULL, NULL, 0, OPT},
    {"mesh", "468-point face mesh and its contours (implies --faces)", 0, KEYER_OPTION_BOOL, 0, 0,
     1, NULL, set_mesh, NULL, NULL, 0, OPT},
    {"pose", "body pose skeleton; MODEL lite (default), full or heavy", 0, KEYER_OPTION_ENUM,
     KEYER_POSE_MODEL_LITE, 0, 0, pose_models, set_pose, NULL, "MODEL", 0, OPT},
    {"knn", "k-nearest-neighbour graph of the tracked points, K >= 1", OFF(knn),
     KEYER_OPTION_INT, 0, 1, INT_MAX, NULL, NULL, NULL, "K", 0, 0u},
    {"backend", "inference backend: cpu (default) or reference", 0, KEYER_OPTION_CUSTOM, 0, 0, 0,
     NULL, set_backend, "cpu", "NAME", 0, 0u},
    {"threads", "CPU threads, 0 = all cores (default 0)", OFF(threads), KEYER_OPTION_INT, 0, 0,
     INT_MAX, NULL, NULL, NULL, "N", 0, 0u},
    {"max_frames", "stop after N frames", OFF(max_frames), KEYER_OPTION_INT, 0, 1, INT_MAX, NULL,
     NULL, NULL, "N", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};
#undef OFF
#undef OPT

static int analyze_input(const kc_args *a, const char *arg)
{
    analyze_args *args = a->opaque;
    if (args->input)
        return kc_usage_error(a, "more than one input ('%s', '%s')", args->input, arg);
    args->input = arg;
    return 0;
}

/* 0: ok, 2: usage error, -1: --help printed. */
static int parse_args(int argc, char **argv, analyze_args *args)
{
    kc_table table = {analyze_options, args};
    kc_args a = {
        .prog = "keyer analyze",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer analyze INPUT -o OUTPUT [options]\n"
                 "\n"
                 "Draws face and body analytics over a video (or a still image).\n"
                 "\n",
        .footer = "\nWithout --faces, --mesh or --pose, faces are analysed.\n",
        .positional = analyze_input,
        .opaque = args,
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? -1 : rc;
    if (!args->input || !args->output)
        return kc_usage_error(&a, "an INPUT and -o OUTPUT are required");
    if (!args->faces && !args->pose)
        args->faces = 1;
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
