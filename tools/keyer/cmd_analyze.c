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
 * body keypoints) as curves, and encodes the result to OUTPUT with the input's audio.
 * Prints a summary (frames, distinct face ids, frames with a pose, milliseconds per frame).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "keyer/faces.h"
#include "keyer/io.h"
#include "keyer/overlay.h"
#include "keyer/pose.h"

#define MAX_GRAPH_POINTS (KEYER_FACES_MAX + KEYER_POSE_LANDMARKS)
#define POSE_ID_BASE 0x10000u

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

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Distinct ids seen (a small set; ids grow, so a sorted insert keeps it simple). */
typedef struct id_set {
    uint32_t ids[4096];
    int n;
} id_set;

static void id_add(id_set *s, uint32_t id)
{
    for (int i = 0; i < s->n; i++)
        if (s->ids[i] == id)
            return;
    if (s->n < (int)(sizeof(s->ids) / sizeof(s->ids[0])))
        s->ids[s->n++] = id;
}

/* The kNN graph over face centres and visible body keypoints, drawn as curves. */
static keyer_status draw_graph(keyer_overlay *ov, keyer_knn_graph *g, const keyer_face *faces,
                               int n_faces, const keyer_pose_result *pose, keyer_error *err)
{
    uint32_t ids[MAX_GRAPH_POINTS];
    float xy[2 * MAX_GRAPH_POINTS];
    keyer_knn_edge edges[4 * MAX_GRAPH_POINTS];
    int n = 0;
    for (int i = 0; i < n_faces && n < MAX_GRAPH_POINTS; i++) {
        if (!faces[i].id)
            continue;
        ids[n] = faces[i].id;
        xy[2 * n] = (faces[i].box.xmin + faces[i].box.xmax) / 2;
        xy[2 * n + 1] = (faces[i].box.ymin + faces[i].box.ymax) / 2;
        n++;
    }
    for (int i = 0; pose && pose->found && i < KEYER_POSE_LANDMARKS && n < MAX_GRAPH_POINTS; i++) {
        if (pose->landmarks[i].visibility < 0.5f)
            continue;
        ids[n] = POSE_ID_BASE + (uint32_t)i;
        xy[2 * n] = pose->landmarks[i].x;
        xy[2 * n + 1] = pose->landmarks[i].y;
        n++;
    }
    int ne = 0;
    keyer_status st = keyer_knn_graph_update(g, ids, xy, n, edges,
                                             (int)(sizeof(edges) / sizeof(edges[0])), &ne, err);
    if (st)
        return st;
    keyer_color c = {0.3f, 0.9f, 1.0f, 0.85f};
    for (int e = 0; e < ne; e++) {
        int a = -1, b = -1;
        for (int i = 0; i < n; i++) {
            if (ids[i] == edges[e].a)
                a = i;
            if (ids[i] == edges[e].b)
                b = i;
        }
        if (a < 0 || b < 0)
            continue;
        if ((st = keyer_overlay_add_curve(ov, xy[2 * a], xy[2 * a + 1], xy[2 * b], xy[2 * b + 1],
                                          0.15f, 1.5f, c, err)))
            return st;
    }
    return keyer_overlay_add_points(ov, xy, n, 3.0f, c, err);
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
    keyer_faces *faces = NULL;
    keyer_pose *pose = NULL;
    keyer_overlay *ov = NULL;
    keyer_knn_graph *graph = NULL;
    id_set seen; /* 16 KiB */
    seen.n = 0;
    long long frames = 0, pose_frames = 0;
    double busy = 0;
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
        keyer_frame_alloc(canvas, KEYER_PIXEL_FORMAT_YUV420P, vi->width, vi->height, NULL, &err) ||
        keyer_overlay_create(1 << 16, &ov, &err))
        goto fail;
    if (a.faces) {
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.range = a.full_range ? KEYER_FACE_RANGE_FULL : KEYER_FACE_RANGE_SHORT;
        fp.landmarks = a.mesh;
        fp.max_faces = 16;
        fp.detect_interval = a.mesh ? 10 : 0;
        fp.backend = a.backend;
        fp.threads = a.threads;
        if (keyer_faces_create(&fp, &faces, &err))
            goto fail;
    }
    if (a.pose) {
        keyer_pose_params pp = keyer_pose_params_defaults();
        pp.model = a.pose_model;
        pp.backend = a.backend;
        pp.threads = a.threads;
        pp.segmentation = 0;
        if (keyer_pose_create(&pp, &pose, &err))
            goto fail;
    }
    if (a.knn) {
        keyer_knn_params kp = keyer_knn_params_defaults();
        kp.k = a.knn;
        kp.max_degree = a.knn + 1;
        if (keyer_knn_graph_create(&kp, MAX_GRAPH_POINTS, &graph, &err))
            goto fail;
    }
    keyer_faces_draw_params fdp = keyer_faces_draw_params_defaults();
    fdp.mesh = a.mesh;
    fdp.keypoints = !a.mesh;
    float unit = (float)(vi->height > 0 ? vi->height : 480) / 480.0f;
    fdp.text_scale = unit * 2 < 1 ? 1 : unit * 2 > 64 ? 64 : unit * 2;
    fdp.line_width = unit * 2 < 1 ? 1 : unit * 2;
    keyer_pose_draw_params pdp = keyer_pose_draw_params_defaults();
    pdp.line_width = unit * 3 < 1 ? 1 : unit * 3;
    pdp.point_radius = unit * 4 < 1.5f ? 1.5f : unit * 4;

    keyer_status st = KEYER_OK;
    while ((!a.max_frames || frames < a.max_frames) &&
           (st = keyer_reader_read(in, frame, &err)) == KEYER_OK) {
        double t0 = now_ms();
        /* Draw on a copy: decoded frames may share the decoder's reference pictures. */
        if (keyer_frame_copy(canvas, frame, &err))
            goto fail;
        keyer_overlay_clear(ov);
        const keyer_face *fl = NULL;
        int nf = 0;
        keyer_pose_result pr;
        memset(&pr, 0, sizeof(pr));
        if (faces && (keyer_faces_run(faces, canvas, &fl, &nf, &err) ||
                      keyer_faces_draw(ov, fl, nf, &fdp, &err)))
            goto fail;
        for (int i = 0; i < nf; i++)
            if (fl[i].id)
                id_add(&seen, fl[i].id);
        if (pose && (keyer_pose_run(pose, canvas, &pr, &err) || keyer_pose_draw(ov, &pr, &pdp, &err)))
            goto fail;
        pose_frames += pr.found;
        if (graph && draw_graph(ov, graph, fl, nf, pose ? &pr : NULL, &err))
            goto fail;
        if (keyer_overlay_render(ov, canvas, &err))
            goto fail;
        busy += now_ms() - t0;
        if (keyer_writer_write(out, canvas, &err))
            goto fail;
        frames++;
    }
    if (st != KEYER_OK && st != KEYER_STATUS_END && (!a.max_frames || frames < a.max_frames))
        goto fail;
    if (keyer_writer_close(out, &err))
        goto fail;
    printf("keyer analyze: %lld frames -> %s (%s)", frames, a.output, keyer_writer_codec(out));
    if (faces)
        printf(", %d face ids", seen.n);
    if (pose)
        printf(", pose in %lld frames", pose_frames);
    printf(", %.1f ms per frame of analysis and drawing\n", frames ? busy / (double)frames : 0.0);
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "keyer analyze: %s\n", err.message[0] ? err.message : "failed");
    keyer_knn_graph_destroy(&graph);
    keyer_overlay_destroy(&ov);
    keyer_pose_destroy(&pose);
    keyer_faces_destroy(&faces);
    keyer_frame_destroy(&canvas);
    keyer_frame_destroy(&frame);
    keyer_writer_destroy(&out);
    keyer_reader_destroy(&in);
    return rc;
}
