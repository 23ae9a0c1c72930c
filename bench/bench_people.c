/*
 * bench_people: how well a keying model keys people far from the camera, measured against the
 * person detector's boxes, and a contact sheet.
 *
 *   bench_people [--model NAME]... [--frames N] [--every K] [--backend cpu|cuda] [--threads T]
 *                [--sheet OUT.png] [--rows R] [--json] [--verbose] [--silhouette] INPUT
 *
 * Every frame of INPUT (up to N, default all) is keyed in order by the keying chain of each
 * --model (keyer/keying.h: the main job's chain, background blur, default models selfie and
 * people), so the mattes are the temporally smoothed ones the main job makes. Every K-th frame
 * (default 1) is measured: the person detector (pose-detect, keyer_people_detect) finds the
 * person boxes with score >= 0.5 in the frame, and with the matte thresholded at 0.5:
 *  - box coverage: the fraction of a box's area (clipped to the frame) the matte covers; the
 *    table gives the minimum over all boxes of all measured frames, and the mean;
 *  - outside: the fraction of the frame's pixels that lie outside every box and are covered;
 *    the table gives the mean and the maximum over the measured frames.
 * The detector's box is the one MediaPipe's pose detector emits for a person (its SSD box, with
 * the hip and body keypoints that the crop comes from).
 * --silhouette adds a row "body-mask": the reference people keyer's own mask (pose-lite's
 * body masks combined, keyer_people_mask, without the fallback segmentation, no refinement or
 * smoothing of the keying chain)
 * thresholded at 0.5 at frame resolution, measured the same way: how much of each box a
 * person's silhouette as the landmark model sees it fills.
 * --verbose prints every box's coverage and its area in the frame (pixels of the box inside
 * the frame; scripts/people-boxes.sh tabulates them). Also the keying time per frame (all
 * steps of keyer_keying_process, this machine).
 * --sheet writes a PNG: R rows (default 3) of frames spread over the measured range, one
 * column per model, each tile at half size: the frame in grey, the matte tinted green, the
 * detector's boxes in red.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keying.h"
#include "keyer/people.h"

#define MAX_MODELS 4
#define BODY_MASK "body-mask" /* --silhouette's row */
#define MAX_BOXES 64
#define MAX_ROWS 16

enum { SET_DETECTOR = 0, SET_LANDMARKS = 1, SETS = 2 };
static const char *const set_names[SETS] = {"detector", "landmarks"};

typedef struct box_stats {
    double min_cov, sum_cov, sum_out, max_out;
    long n_boxes, n_frames;
} box_stats;

typedef struct model_run {
    const char *name;
    keyer_keying *keying;
    keyer_frame *matte;
    box_stats set[SETS];
    double ms;
} model_run;

static int die(const char *what, const keyer_error *err)
{
    fprintf(stderr, "bench_people: %s: %s\n", what, err->message);
    return 1;
}

/* Box coverage of each of the @p n boxes (xmin, ymin, xmax, ymax) and the outside fraction
 * of @p matte (GRAY8) added to @p bs. */
static void measure(const keyer_frame *matte, const float (*boxes)[4], int n, box_stats *bs,
                    long frame, const char *what, int verbose)
{
    int w = matte->width, h = matte->height;
    long out = 0;
    for (int b = 0; b < n; b++) {
        int x0 = (int)fmaxf(floorf(boxes[b][0]), 0), x1 = (int)fminf(ceilf(boxes[b][2]), (float)w);
        int y0 = (int)fmaxf(floorf(boxes[b][1]), 0), y1 = (int)fminf(ceilf(boxes[b][3]), (float)h);
        long in = 0, area = 0;
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                area++;
                in += matte->data[0][y * matte->stride[0] + x] >= 128;
            }
        double cov = area ? (double)in / (double)area : 1.0;
        if (verbose)
            printf("frame %ld %s: box %d (%.0f,%.0f %.0fx%.0f): %ld px in the frame, coverage "
                   "%.1f%%\n", frame, what, b, boxes[b][0], boxes[b][1],
                   boxes[b][2] - boxes[b][0], boxes[b][3] - boxes[b][1], area, 100.0 * cov);
        bs->min_cov = cov < bs->min_cov ? cov : bs->min_cov;
        bs->sum_cov += cov;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            if (matte->data[0][y * matte->stride[0] + x] < 128)
                continue;
            int inside = 0;
            for (int b = 0; b < n && !inside; b++)
                inside = x >= boxes[b][0] && x < boxes[b][2] && y >= boxes[b][1] &&
                         y < boxes[b][3];
            out += !inside;
        }
    double outside = (double)out / ((double)w * (double)h);
    bs->n_boxes += n;
    bs->sum_out += outside;
    bs->max_out = outside > bs->max_out ? outside : bs->max_out;
    bs->n_frames++;
}

/* Tile (col, row) of the sheet: @p frame (RGB24) at half size in grey, the matte green, boxes
 * red. */
static void draw_tile(keyer_frame *sheet, int col, int row, const keyer_frame *frame,
                      const keyer_frame *matte, const float (*boxes)[4], int n)
{
    int tw = frame->width / 2, th = frame->height / 2;
    for (int y = 0; y < th; y++) {
        uint8_t *d = sheet->data[0] + (ptrdiff_t)(row * th + y) * sheet->stride[0] +
                     3 * (ptrdiff_t)col * tw;
        for (int x = 0; x < tw; x++, d += 3) {
            float g = 0, a = 0;
            for (int j = 0; j < 2; j++)
                for (int i = 0; i < 2; i++) {
                    const uint8_t *s = frame->data[0] + (2 * y + j) * frame->stride[0] +
                                       3 * (2 * x + i);
                    g += 0.299f * s[0] + 0.587f * s[1] + 0.114f * s[2];
                    a += matte->data[0][(2 * y + j) * matte->stride[0] + 2 * x + i];
                }
            g /= 4.0f;
            a /= 4.0f * 255.0f;
            float r = g * (1 - a * 0.6f), gg = g * (1 - a * 0.6f) + 255.0f * a * 0.6f;
            d[0] = (uint8_t)lrintf(r);
            d[1] = (uint8_t)lrintf(fminf(gg, 255.0f));
            d[2] = (uint8_t)lrintf(r);
        }
    }
    for (int b = 0; b < n; b++) {
        const float *bx = boxes[b];
        int x0 = (int)(bx[0] / 2), x1 = (int)(bx[2] / 2);
        int y0 = (int)(bx[1] / 2), y1 = (int)(bx[3] / 2);
        for (int y = y0; y <= y1; y++)
            for (int x = x0; x <= x1; x++) {
                if (x < 0 || y < 0 || x >= tw || y >= th ||
                    (x != x0 && x != x1 && y != y0 && y != y1))
                    continue;
                uint8_t *d = sheet->data[0] + (ptrdiff_t)(row * th + y) * sheet->stride[0] +
                             3 * ((ptrdiff_t)col * tw + x);
                d[0] = 255;
                d[1] = d[2] = 40;
            }
    }
}

int main(int argc, char **argv)
{
    const char *prog = "bench_people", *input = NULL, *sheet_path = NULL;
    const char *names[MAX_MODELS];
    int n_models = 0, frames = 0, every = 1, threads = 0, rows = 3, json = 0, verbose = 0;
    int silhouette = 0;
    keyer_backend backend = KEYER_BACKEND_CPU;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--model") && i + 1 < argc && n_models < MAX_MODELS)
            names[n_models++] = argv[++i];
        else if (!strcmp(a, "--frames") && i + 1 < argc)
            frames = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--every") && i + 1 < argc)
            every = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--threads") && i + 1 < argc)
            threads = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--rows") && i + 1 < argc)
            rows = kb_int_arg(prog, a, argv[++i]);
        else if (!strcmp(a, "--sheet") && i + 1 < argc)
            sheet_path = argv[++i];
        else if (!strcmp(a, "--backend") && i + 1 < argc) {
            const char *b = argv[++i];
            backend = !strcmp(b, "cuda") ? KEYER_BACKEND_CUDA : KEYER_BACKEND_CPU;
        } else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (!strcmp(a, "--silhouette"))
            silhouette = 1;
        else if (a[0] != '-' && !input)
            input = a;
        else {
            input = NULL;
            break;
        }
    }
    if (!input || every < 1 || frames < 0 || rows < 1 || rows > MAX_ROWS || threads < 0) {
        fprintf(stderr, "usage: %s [--model NAME]... [--frames N] [--every K] [--backend cpu|cuda] "
                        "[--threads T] [--sheet OUT.png] [--rows R (1..%d)] [--json] [--verbose] "
                        "[--silhouette] INPUT\n",
                prog, MAX_ROWS);
        return 2;
    }
    if (!n_models) {
        names[n_models++] = "selfie";
        names[n_models++] = KEYER_PEOPLE_MODEL;
    }
    keyer_error err = {0};
    model_run runs[MAX_MODELS + 1]; /* the models, then --silhouette's row */
    memset(runs, 0, sizeof(runs));
    keyer_people *det = NULL;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL, *sheet = NULL;
    int rc = 1;
    keyer_people_params pp = keyer_people_params_defaults();
    pp.model = KEYER_POSE_MODEL_LITE; /* the reference boxes (and --silhouette's mask) */
    pp.fallback_model = "none";       /* --silhouette: the landmark model's own masks */
    pp.threads = threads;
    pp.backend = backend;
    if (keyer_people_create(&pp, &det, &err))
        return die("person detector", &err);
    for (int m = 0; m < n_models; m++) {
        keyer_keying_params kp = keyer_keying_params_defaults();
        kp.model = names[m];
        kp.backend = backend;
        kp.threads = threads;
        runs[m].name = names[m];
        runs[m].set[0].min_cov = runs[m].set[1].min_cov = 1.0;
        if (keyer_keying_create(&kp, &runs[m].keying, &err) ||
            keyer_frame_create(&runs[m].matte, &err)) {
            die(names[m], &err);
            goto done;
        }
    }
    int n_rows = n_models; /* rows of the table */
    if (silhouette) {
        runs[n_rows].name = BODY_MASK;
        runs[n_rows].set[0].min_cov = runs[n_rows].set[1].min_cov = 1.0;
        if (keyer_frame_create(&runs[n_rows].matte, &err)) {
            die(BODY_MASK, &err);
            goto done;
        }
        n_rows++;
    }
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.keep_streams = 0;
    if (keyer_reader_open(input, &rp, &r, &err) || keyer_frame_create(&f, &err)) {
        die(input, &err);
        goto done;
    }
    const keyer_video_info *vi = keyer_reader_info(r);
    long total = frames > 0 ? frames : vi->frame_count > 0 ? (long)vi->frame_count : 0;
    if (sheet_path) {
        if (total < 1) {
            fprintf(stderr, "%s: --sheet needs --frames N or an input that says its frame count\n",
                    prog);
            goto done;
        }
        if (keyer_frame_create(&sheet, &err) ||
            keyer_frame_alloc(sheet, KEYER_PIXEL_FORMAT_RGB24, n_models * (vi->width / 2),
                              rows * (vi->height / 2), NULL, &err)) {
            die("sheet", &err);
            goto done;
        }
        memset(sheet->data[0], 0, (size_t)sheet->stride[0] * (size_t)sheet->height);
    }
    keyer_detection dets[MAX_BOXES];
    keyer_person people[MAX_BOXES];
    float boxes[SETS][MAX_BOXES][4];
    int nb[SETS];
    keyer_status st;
    long i = 0, measured = 0;
    int row = 0;
    while ((frames == 0 || i < frames) && (st = keyer_reader_read(r, f, &err)) == KEYER_OK) {
        int n = 0, np = 0, want = (int)(i % every == 0);
        long sheet_at = rows > 1 && total > 1 ? (long)row * (total - 1) / (rows - 1) : 0;
        int draw = sheet && row < rows && i == sheet_at;
        /* the reference boxes: the detector's (every detection), the landmarks' (people found
         * with a detection >= 0.5); the people keyer runs every frame to track */
        if (keyer_people_run(det, f, people, MAX_BOXES, &np, &err) ||
            ((want || draw) && keyer_people_detect(det, f, dets, MAX_BOXES, &n, &err))) {
            die(input, &err);
            goto done;
        }
        nb[SET_DETECTOR] = n;
        for (int b = 0; b < n; b++)
            keyer_person_box(&dets[b], boxes[SET_DETECTOR][b]);
        nb[SET_LANDMARKS] = 0;
        for (int b = 0; b < np; b++)
            if (people[b].score >= 0.5f)
                memcpy(boxes[SET_LANDMARKS][nb[SET_LANDMARKS]++], people[b].body,
                       sizeof(people[b].body));
        for (int m = 0; m < n_models; m++) {
            model_run *mr = &runs[m];
            double t0 = kb_now_ms();
            if (keyer_keying_process(mr->keying, f, NULL, mr->matte, &err)) {
                die(mr->name, &err);
                goto done;
            }
            mr->ms += kb_now_ms() - t0;
            if (want)
                for (int set = 0; set < SETS; set++) {
                    char what[96];
                    snprintf(what, sizeof(what), "%s %s", mr->name, set_names[set]);
                    measure(mr->matte, (const float(*)[4])boxes[set], nb[set], &mr->set[set], i,
                            what, verbose);
                }
            if (draw)
                draw_tile(sheet, m, row, f, mr->matte, (const float(*)[4])boxes[SET_DETECTOR],
                          nb[SET_DETECTOR]);
        }
        if (silhouette && want) {
            model_run *mr = &runs[n_models]; /* ms/frame stays 0: no keying */
            if (keyer_frame_alloc(mr->matte, KEYER_PIXEL_FORMAT_GRAY8, f->width, f->height, NULL,
                                  &err) ||
                keyer_people_mask(det, mr->matte, &err)) {
                die(BODY_MASK, &err);
                goto done;
            }
            for (int set = 0; set < SETS; set++) {
                char what[96];
                snprintf(what, sizeof(what), "%s %s", mr->name, set_names[set]);
                measure(mr->matte, (const float(*)[4])boxes[set], nb[set], &mr->set[set], i,
                        what, verbose);
            }
        }
        measured += want;
        row += draw;
        i++;
    }
    if (sheet && (err.message[0] = 0, keyer_image_write(sheet_path, sheet, &err))) {
        die(sheet_path, &err);
        goto done;
    }
    if (json) {
        printf("{\"input\": \"%s\", \"frames\": %ld, \"measured\": %ld, \"results\": [", input,
               i, measured);
    } else {
        printf("%s: %ld frames keyed, %ld measured (every %d); person boxes of detections with "
               "score >= 0.5\n", input, i, measured, every);
        printf("| model | boxes | count | min box coverage | mean box coverage | mean outside | "
               "max outside | ms/frame |\n|---|---|---|---|---|---|---|---|\n");
    }
    for (int m = 0; m < n_rows; m++)
        for (int set = 0; set < SETS; set++) {
            const model_run *mr = &runs[m];
            const box_stats *b = &mr->set[set];
            double minc = b->n_boxes ? b->min_cov : 0.0;
            double meanc = b->n_boxes ? b->sum_cov / (double)b->n_boxes : 0.0;
            double meano = b->n_frames ? b->sum_out / (double)b->n_frames : 0.0;
            double ms = i ? mr->ms / (double)i : 0.0;
            if (json)
                printf("%s{\"model\": \"%s\", \"boxes\": \"%s\", \"count\": %ld, "
                       "\"min_box_coverage\": %.4f, \"mean_box_coverage\": %.4f, "
                       "\"mean_outside\": %.5f, \"max_outside\": %.5f, \"ms_per_frame\": %.1f}",
                       m || set ? ", " : "", mr->name, set_names[set], b->n_boxes, minc, meanc,
                       meano, b->max_out, ms);
            else
                printf("| %s | %s | %ld | %.1f%% | %.1f%% | %.2f%% | %.2f%% | %.1f |\n", mr->name,
                       set_names[set], b->n_boxes, 100.0 * minc, 100.0 * meanc, 100.0 * meano,
                       100.0 * b->max_out, ms);
        }
    if (json)
        printf("]}\n");
    rc = 0;
done:
    for (int m = 0; m < MAX_MODELS + 1; m++) {
        keyer_keying_destroy(&runs[m].keying);
        keyer_frame_destroy(&runs[m].matte);
    }
    keyer_people_destroy(&det);
    keyer_reader_destroy(&r);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&sheet);
    return rc;
}
