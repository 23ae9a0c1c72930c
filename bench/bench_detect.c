/*
 * bench_detect: face detection throughput at large batch, model to decoded faces.
 *
 *   bench_detect [--model face-short|face-full] [--backend cuda|cpu] [--precision f16|f32]
 *                [--batch N] [--runs N] [--threads T] [--json]
 *
 * The batch holds the test photos tests/data/grace_hopper.jpg and messi5.jpg in turn, each
 * prepared once as the detector's letterboxed [-1,1] input (input preparation is measured by
 * bench_effects). Then:
 *  - infer: runs queued back to back, synchronised at the end: frames/s of the network alone;
 *  - end to end: each batch run, its two outputs (boxes and scores) copied to the host, and
 *    every frame decoded (SSD anchors, weighted NMS) on T threads while the next batch runs on
 *    the GPU: frames/s of decoded faces. On CUDA the outputs are copied straight from the
 *    runtime's device buffers into pinned memory on the runtime's stream, two buffers in turn,
 *    so copies and decoding overlap the next batches. Faces per photo are printed as a check.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "keyer/detect.h"
#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/nn.h"
#include "keyer/registry.h"

#ifdef KEYER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_THREADS 64
#define MAX_FACES 16

static int die(const char *what, const keyer_error *err)
{
    fprintf(stderr, "bench_detect: %s: %s\n", what, err->message);
    return 1;
}

typedef struct job {
    keyer_detector *det;
    const float *boxes, *scores; /* the batch's outputs on the host */
    size_t box_stride, score_stride;
    int first, last;             /* frames [first, last) */
    int *faces;                  /* per frame */
    keyer_status st;
} job;

static void *decode_range(void *arg)
{
    job *j = arg;
    keyer_detection dets[MAX_FACES];
    keyer_error err = {0};
    for (int f = j->first; f < j->last && !j->st; f++) {
        int n = 0;
        j->st = keyer_detector_decode(j->det, j->boxes + (size_t)f * j->box_stride,
                                      j->scores + (size_t)f * j->score_stride, dets, MAX_FACES,
                                      &n, &err);
        j->faces[f] = n;
    }
    return NULL;
}

#ifdef KEYER_HAVE_CUDA
static cudaStream_t g_stream;
static cudaEvent_t g_copied[2];

/* Queues the copy of the two outputs into pinned buffers (slot k) after the queued run. */
static int queue_copy(keyer_runtime *rt, int ob, int os, float *boxes, float *scores, size_t bb,
                      size_t sb, int k)
{
    if (cudaMemcpyAsync(boxes, keyer_runtime_output_data(rt, ob), bb, cudaMemcpyDeviceToHost,
                        g_stream) != cudaSuccess ||
        cudaMemcpyAsync(scores, keyer_runtime_output_data(rt, os), sb, cudaMemcpyDeviceToHost,
                        g_stream) != cudaSuccess ||
        cudaEventRecord(g_copied[k], g_stream) != cudaSuccess) {
        fprintf(stderr, "bench_detect: output copy failed\n");
        return 1;
    }
    return 0;
}

static int wait_copy(int k)
{
    if (cudaEventSynchronize(g_copied[k]) != cudaSuccess) {
        fprintf(stderr, "bench_detect: a batch failed on the device\n");
        return 1;
    }
    return 0;
}
#else
static int queue_copy(keyer_runtime *rt, int ob, int os, float *boxes, float *scores, size_t bb,
                      size_t sb, int k)
{
    (void)rt, (void)ob, (void)os, (void)boxes, (void)scores, (void)bb, (void)sb, (void)k;
    return 1;
}

static int wait_copy(int k)
{
    (void)k;
    return 1;
}
#endif

#define PROG "bench_detect"

int main(int argc, char **argv)
{
    const char *model_name = "face-short", *backend_name = "cuda", *precision_name = "f16";
    int batch = 256, runs = 40, threads = 8, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "usage: bench_detect [--model NAME] [--backend B] [--precision P] "
                            "[--batch N] [--runs N] [--threads T] [--json]\n");
            return 2;
        }
        if (!strcmp(a, "--model"))
            model_name = v;
        else if (!strcmp(a, "--backend"))
            backend_name = v;
        else if (!strcmp(a, "--precision"))
            precision_name = v;
        else if (!strcmp(a, "--batch"))
            batch = kb_int_arg(PROG, "--batch", v);
        else if (!strcmp(a, "--runs"))
            runs = kb_int_arg(PROG, "--runs", v);
        else if (!strcmp(a, "--threads"))
            threads = kb_int_arg(PROG, "--threads", v);
        else {
            fprintf(stderr, "bench_detect: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (batch < 1 || runs < 2 || threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "bench_detect: need --batch >= 1, --runs >= 2, --threads 1..%d\n",
                MAX_THREADS);
        return 2;
    }
    keyer_error err = {0};
    int full = !strcmp(model_name, "face-full");
    keyer_detector_params dp = full ? keyer_detector_params_face_full()
                                    : keyer_detector_params_face_short();
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.batch = batch;
    rp.threads = 0;
#ifdef KEYER_HAVE_CUDA
    if (!strcmp(backend_name, "cuda") &&
        (cudaStreamCreate(&g_stream) != cudaSuccess ||
         cudaEventCreate(&g_copied[0]) != cudaSuccess ||
         cudaEventCreate(&g_copied[1]) != cudaSuccess)) {
        fprintf(stderr, "bench_detect: CUDA set-up failed\n");
        return 1;
    }
    rp.stream = g_stream;
#endif
    char path[4096];
    keyer_model *model = NULL;
    keyer_runtime *rt = NULL;
    if (keyer_backend_from_name(backend_name, &rp.backend, &err) ||
        keyer_precision_from_name(precision_name, &rp.precision, &err))
        return die("options", &err);
    if (keyer_registry_resolve(model_name, path, sizeof(path), &err) ||
        keyer_model_load_file(path, &model, &err) || keyer_runtime_create(model, &rp, &rt, &err))
        return die(model_name, &err);
    /* outputs: boxes (anchors x coords) and scores (anchors) per frame */
    keyer_detector *probe = NULL;
    if (keyer_detector_create(&dp, &probe, &err))
        return die("decoder", &err);
    int anchors = keyer_detector_anchor_count(probe);
    keyer_detector_destroy(&probe);
    int out_boxes = -1, out_scores = -1;
    for (int o = 0; o < keyer_model_output_count(model); o++) {
        size_t per = keyer_runtime_output_bytes(rt, o) / sizeof(float) / (size_t)batch;
        if (per == (size_t)anchors * (size_t)dp.num_coords)
            out_boxes = o;
        else if (per == (size_t)anchors && out_scores < 0)
            out_scores = o;
    }
    if (out_boxes < 0 || out_scores < 0) {
        fprintf(stderr, "bench_detect: %s has no box/score outputs of %d anchors\n", path, anchors);
        return 1;
    }
    /* the input: the two photos, prepared once, in turn */
    const char *data = getenv("KEYER_TEST_DATA") ? getenv("KEYER_TEST_DATA") : "tests/data";
    const char *photos[2] = {"grace_hopper.jpg", "messi5.jpg"};
    size_t frame_floats = (size_t)dp.input_width * (size_t)dp.input_height * 3;
    float *input = malloc(keyer_runtime_input_bytes(rt, 0));
    float *one[2] = {malloc(frame_floats * sizeof(float)), malloc(frame_floats * sizeof(float))};
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = dp.input_width;
    pp.height = dp.input_height;
    pp.fit = KEYER_FIT_LETTERBOX;
    pp.scale = 2.0f;
    pp.offset = -1.0f;
    keyer_prepare *prep = NULL;
    if (!input || !one[0] || !one[1] || keyer_prepare_create(&pp, &prep, &err))
        return die("prepare", &err);
    for (int p = 0; p < 2; p++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s/%s", data, photos[p]);
        keyer_frame *f = NULL;
        if (keyer_frame_create(&f, &err) ||
            keyer_image_read(file, KEYER_PIXEL_FORMAT_RGB24, f, &err))
            return die(file, &err);
        const keyer_frame *frames[1] = {f};
        if (keyer_prepare_run(prep, frames, NULL, 1, one[p], NULL, &err))
            return die(file, &err);
        keyer_frame_destroy(&f);
    }
    for (int b = 0; b < batch; b++)
        memcpy(input + (size_t)b * frame_floats, one[b & 1], frame_floats * sizeof(float));
    if (keyer_runtime_set_input(rt, 0, input, keyer_runtime_input_bytes(rt, 0), &err))
        return die("input", &err);
    /* inference alone */
    if (keyer_runtime_run(rt, &err) || keyer_runtime_synchronize(rt, &err))
        return die("run", &err);
    double t0 = kb_now_s();
    for (int r = 0; r < runs; r++)
        if (keyer_runtime_run(rt, &err))
            return die("run", &err);
    if (keyer_runtime_synchronize(rt, &err))
        return die("run", &err);
    double infer_fps = (double)batch * runs / (kb_now_s() - t0);
    /* end to end, decoding batch i while batch i+1 runs */
    size_t bb = keyer_runtime_output_bytes(rt, out_boxes), sb = keyer_runtime_output_bytes(rt, out_scores);
    float *boxes[2] = {NULL, NULL}, *scores[2] = {NULL, NULL};
    int device_out = 0;
#ifdef KEYER_HAVE_CUDA
    device_out = rp.backend == KEYER_BACKEND_CUDA;
    for (int k = 0; device_out && k < 2; k++)
        if (cudaMallocHost((void **)&boxes[k], bb) != cudaSuccess ||
            cudaMallocHost((void **)&scores[k], sb) != cudaSuccess) {
            fprintf(stderr, "bench_detect: cudaMallocHost failed\n");
            return 1;
        }
#endif
    for (int k = 0; !device_out && k < 2; k++) {
        boxes[k] = malloc(bb);
        scores[k] = malloc(sb);
    }
    int *faces = calloc((size_t)batch, sizeof(int));
    keyer_detector *dec[MAX_THREADS] = {0};
    if (!boxes[0] || !boxes[1] || !scores[0] || !scores[1] || !faces)
        return 1;
    for (int t = 0; t < threads; t++)
        if (keyer_detector_create(&dp, &dec[t], &err))
            return die("decoder", &err);
    job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    double t_decode = 0;
    t0 = kb_now_s();
    if (keyer_runtime_run(rt, &err) || (device_out && queue_copy(rt, out_boxes, out_scores,
                                                                 boxes[0], scores[0], bb, sb,
                                                                 0)))
        return die("run", &err);
    for (int r = 0; r < runs; r++) {
        int k = r & 1;
        if (device_out) {
            /* batch r+1 and its copy are queued before batch r's copy is waited for */
            if (r + 1 < runs && (keyer_runtime_run(rt, &err) ||
                                 queue_copy(rt, out_boxes, out_scores, boxes[1 - k],
                                            scores[1 - k], bb, sb, 1 - k)))
                return die("run", &err);
            if (wait_copy(k))
                return 1;
        } else {
            if (keyer_runtime_get_output(rt, out_boxes, boxes[k], bb, &err) ||
                keyer_runtime_get_output(rt, out_scores, scores[k], sb, &err))
                return die("outputs", &err);
            if (r + 1 < runs && keyer_runtime_run(rt, &err)) /* the next batch */
                return die("run", &err);
        }
        double d0 = kb_now_s();
        for (int t = 0; t < threads; t++) {
            jobs[t] = (job){dec[t], boxes[k], scores[k], (size_t)anchors * (size_t)dp.num_coords,
                            (size_t)anchors, batch * t / threads, batch * (t + 1) / threads, faces,
                            KEYER_OK};
            if (pthread_create(&tid[t], NULL, decode_range, &jobs[t])) {
                fprintf(stderr, "bench_detect: cannot start a thread\n");
                return 1;
            }
        }
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        t_decode += kb_now_s() - d0;
        for (int t = 0; t < threads; t++)
            if (jobs[t].st) {
                fprintf(stderr, "bench_detect: decode failed\n");
                return 1;
            }
    }
    double e2e_fps = (double)batch * runs / (kb_now_s() - t0);
    double decode_us = t_decode / runs / batch * 1e6 * threads; /* per frame, one thread */
    if (json)
        printf("{\"model\":\"%s\",\"backend\":\"%s\",\"precision\":\"%s\",\"batch\":%d,"
               "\"infer_fps\":%.1f,\"e2e_fps\":%.1f,\"decode_us_per_frame_thread\":%.2f,"
               "\"threads\":%d,\"faces\":[%d,%d]}\n",
               model_name, backend_name, precision_name, batch, infer_fps, e2e_fps, decode_us,
               threads, faces[0], batch > 1 ? faces[1] : -1);
    else
        printf("%s %s %s batch %d: inference %.0f frames/s; end to end (outputs to host, decode "
               "on %d threads, overlapped) %.0f frames/s; decode %.1f us per frame per thread; "
               "faces: %s %d, %s %d\n",
               model_name, backend_name, precision_name, batch, infer_fps, threads, e2e_fps,
               decode_us, photos[0], faces[0], photos[1], batch > 1 ? faces[1] : -1);
    for (int t = 0; t < threads; t++)
        keyer_detector_destroy(&dec[t]);
    free(faces);
    for (int k = 0; k < 2; k++) {
#ifdef KEYER_HAVE_CUDA
        if (device_out) {
            cudaFreeHost(boxes[k]);
            cudaFreeHost(scores[k]);
        }
#endif
        if (!device_out) {
            free(boxes[k]);
            free(scores[k]);
        }
        free(one[k]);
    }
    free(input);
    keyer_prepare_destroy(&prep);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
    return 0;
}
