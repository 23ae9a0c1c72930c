/*
 * Video decode and encode throughput through keyer_reader / keyer_writer.
 *
 * Makes its own inputs first (keyer_video_write_sample: a pan/zoom over tests/data's
 * grace_hopper.jpg with per-pixel noise of +-10 so the bitrate resembles camera footage,
 * libx264 preset veryfast, CRF 23 (about 7 Mbit/s at 1080p), keyint 60, 3 B-frames, 30 fps),
 * then measures, for 1080p and 4K H.264:
 *   - NVDEC, one session (device frames, no download)          [CUDA builds with a GPU]
 *   - NVDEC, N concurrent sessions on the same file (aggregate)
 *   - NVDEC split-file mode (one reader, N sessions, frames in order)
 *   - CPU decode (libavcodec threads), native frames
 *   - x264 encode at its default preset (medium) of decoded 1080p frames
 *
 * usage: bench_decode [--json] [--frames N] [--sessions N] [--dir DIR] [--image PATH]
 *                     [--no-4k] [--no-gpu] [--no-cpu] [--no-encode]
 * Frames per pass default to 600 (1080p) and 300 (4K); --frames sets the 1080p count (4K: half).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef KEYER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench_util.h"
#include "keyer/io.h"
#include "keyer/log.h"

static void die(const char *what, const keyer_error *err)
{
    fprintf(stderr, "bench_decode: %s: %s\n", what, err->message);
    exit(1);
}

typedef struct result {
    char name[96];
    double fps;
    long frames;
    double seconds;
    int sessions;
    char note[160];
} result;

static result results[32];
static int nresults;

static void add_result(const char *name, long frames, double seconds, int sessions, const char *note)
{
    result *r = &results[nresults++];
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->frames = frames;
    r->seconds = seconds;
    r->fps = seconds > 0 ? (double)frames / seconds : 0;
    r->sessions = sessions;
    snprintf(r->note, sizeof(r->note), "%s", note ? note : "");
    fprintf(stderr, "  %-44s %8.1f frames/s  (%ld frames, %.2f s)%s%s\n", name, r->fps, frames,
            seconds, note && *note ? "  " : "", note ? note : "");
}

static void sync_device(void)
{
#ifdef KEYER_HAVE_CUDA
    cudaDeviceSynchronize();
#endif
}

typedef struct job {
    const char *path;
    keyer_reader_params params;
    keyer_reader *reader;
    long frames;
    int on_gpu;
    keyer_error err;
    keyer_status status;
    pthread_barrier_t *start;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    keyer_frame *f = NULL;
    keyer_frame_create(&f, NULL);
    pthread_barrier_wait(j->start);
    keyer_status st;
    while ((st = keyer_reader_read(j->reader, f, &j->err)) == KEYER_OK) {
        j->frames++;
        j->on_gpu = f->memory == KEYER_MEMORY_CUDA;
    }
    j->status = st == KEYER_STATUS_END ? KEYER_OK : st;
    keyer_frame_destroy(&f);
    return NULL;
}

/* Opens @p sessions readers (each primes its first frame), then times reading all of them
 * concurrently; with @p with_open the time includes opening (split decode: planning the
 * chunks and starting its sessions, which decode ahead as soon as they start). */
static void measure(const char *label, const char *path, keyer_reader_params p, int sessions,
                    int with_open)
{
    double t_open = kb_now_s();
    job jobs[16];
    pthread_t threads[16];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)sessions + 1);
    memset(jobs, 0, sizeof(jobs));
    for (int i = 0; i < sessions; i++) {
        jobs[i].path = path;
        jobs[i].params = p;
        jobs[i].start = &start;
        if (keyer_reader_open(path, &p, &jobs[i].reader, &jobs[i].err))
            die(path, &jobs[i].err);
    }
    const keyer_video_info *vi = keyer_reader_info(jobs[0].reader);
    for (int i = 0; i < sessions; i++)
        pthread_create(&threads[i], NULL, run_job, &jobs[i]);
    pthread_barrier_wait(&start);
    double t0 = with_open ? t_open : kb_now_s();
    long frames = 0;
    for (int i = 0; i < sessions; i++) {
        pthread_join(threads[i], NULL);
        if (jobs[i].status)
            die(label, &jobs[i].err);
        frames += jobs[i].frames + 1; /* + the frame decoded when opening */
    }
    sync_device();
    double t = kb_now_s() - t0;
    char note[160];
    keyer_reader_stats rs;
    keyer_reader_stats_get(jobs[0].reader, &rs);
    snprintf(note, sizeof(note), "%s %s, %d decoder%s%s", vi->hw_decode ? "NVDEC" : "CPU",
             vi->memory == KEYER_MEMORY_CUDA ? "device frames" : "host frames",
             vi->segments * sessions, vi->segments * sessions == 1 ? "" : "s",
             rs.hw_fallback ? " (fell back)" : "");
    add_result(label, frames, t, sessions * vi->segments, note);
    for (int i = 0; i < sessions; i++)
        keyer_reader_destroy(&jobs[i].reader);
    pthread_barrier_destroy(&start);
}

static void make_input(const char *path, const char *image, int w, int h, int frames)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size > 0) {
        fprintf(stderr, "  reusing %s\n", path);
        return;
    }
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = w;
    p.height = h;
    p.frames = frames;
    p.frame_rate = (keyer_rational){30, 1};
    p.preset = "veryfast";
    p.keyint = 60;
    p.bframes = 3;
    p.noise = 10;
    p.codec_options = "crf=23";
    p.audio_codec = NULL;
    keyer_error err = {0};
    double t0 = kb_now_s();
    if (keyer_video_write_sample(path, image, &p, &err))
        die(path, &err);
    stat(path, &sb);
    fprintf(stderr, "  made %s: %dx%d, %d frames, %.1f Mbit/s, in %.1f s\n", path, w, h, frames,
            (double)sb.st_size * 8 / 1e6 / (frames / 30.0), kb_now_s() - t0);
}

/* x264 at its default preset: frames decoded first, then timed through the writer. */
static void measure_encode(const char *label, const char *path, const char *dir, int frames)
{
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(path, &rp, &r, &err))
        die(path, &err);
    const keyer_video_info *vi = keyer_reader_info(r);
    keyer_frame **f = calloc((size_t)frames, sizeof(*f));
    int n = 0;
    while (n < frames) {
        keyer_frame_create(&f[n], NULL);
        if (keyer_reader_read(r, f[n], &err) != KEYER_OK)
            break;
        n++;
    }
    char out[1024];
    snprintf(out, sizeof(out), "%s/encode-out.mp4", dir);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = vi->width;
    wp.height = vi->height;
    wp.frame_rate = vi->frame_rate;
    wp.time_base = vi->time_base;
    wp.codec = "libx264";
    keyer_writer *w = NULL;
    if (keyer_writer_open(out, &wp, &w, &err))
        die(out, &err);
    double t0 = kb_now_s();
    for (int i = 0; i < n; i++)
        if (keyer_writer_write(w, f[i], &err))
            die(out, &err);
    if (keyer_writer_close(w, &err))
        die(out, &err);
    double t = kb_now_s() - t0;
    add_result(label, n, t, 1, "libx264 preset medium (default), CRF 23, yuv420p");
    keyer_writer_destroy(&w);
    unlink(out);
    for (int i = 0; i < frames; i++)
        keyer_frame_destroy(&f[i]);
    free(f);
    keyer_reader_destroy(&r);
}

#define PROG "bench_decode"

int main(int argc, char **argv)
{
    int json = 0, frames = 600, sessions = 7, do_4k = 1, do_gpu = 1, do_cpu = 1, do_enc = 1;
    const char *dir = "/tmp/keyer-bench-decode";
    const char *image = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--frames") && i + 1 < argc)
            frames = kb_int_arg(PROG, "--frames", argv[++i]);
        else if (!strcmp(argv[i], "--sessions") && i + 1 < argc)
            sessions = kb_int_arg(PROG, "--sessions", argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--image") && i + 1 < argc)
            image = argv[++i];
        else if (!strcmp(argv[i], "--no-4k"))
            do_4k = 0;
        else if (!strcmp(argv[i], "--no-gpu"))
            do_gpu = 0;
        else if (!strcmp(argv[i], "--no-cpu"))
            do_cpu = 0;
        else if (!strcmp(argv[i], "--no-encode"))
            do_enc = 0;
        else {
            fprintf(stderr, "usage: %s [--json] [--frames N] [--sessions N] [--dir DIR] "
                            "[--image PATH] [--no-4k] [--no-gpu] [--no-cpu] [--no-encode]\n",
                    argv[0]);
            return 2;
        }
    }
    if (frames < 60 || sessions < 1 || sessions > 16) {
        fprintf(stderr, "bench_decode: --frames must be >= 60, --sessions 1..16\n");
        return 2;
    }
    char img[1024];
    if (!image) {
        const char *d = getenv("KEYER_TEST_DATA");
        snprintf(img, sizeof(img), "%s/grace_hopper.jpg", d ? d : "tests/data");
        image = img;
    }
    mkdir(dir, 0755);
    int gpu = 0;
#ifdef KEYER_HAVE_CUDA
    int n = 0;
    gpu = do_gpu && cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    if (gpu) /* keep the primary context alive as keyer's CUDA code does */
        cudaFree(0);
#endif
    if (do_gpu && !gpu)
        fprintf(stderr, "bench_decode: no CUDA device (or a build without CUDA): NVDEC skipped\n");

    struct { const char *name; int w, h, frames; } sizes[] = {
        {"1080p", 1920, 1080, frames},
        {"4K", 3840, 2160, frames / 2},
    };
    char path[2][1024];
    for (int s = 0; s < (do_4k ? 2 : 1); s++) {
        snprintf(path[s], sizeof(path[s]), "%s/%s-%d.mp4", dir, sizes[s].name, sizes[s].frames);
        make_input(path[s], image, sizes[s].w, sizes[s].h, sizes[s].frames);
    }
    keyer_logger quiet = keyer_logger_default();
    if (gpu) { /* create the primary context and load NVDEC once, outside the timings */
        keyer_reader_params p = keyer_reader_params_defaults();
        p.device = KEYER_DECODE_DEVICE_CUDA;
        keyer_reader *r = NULL;
        keyer_error err = {0};
        if (keyer_reader_open(path[0], &p, &r, &err))
            die(path[0], &err);
        keyer_reader_destroy(&r);
    }
    for (int s = 0; s < (do_4k ? 2 : 1); s++) {
        char label[96];
        keyer_reader_params p = keyer_reader_params_defaults();
        p.logger = &quiet;
        if (gpu) {
            p.device = KEYER_DECODE_DEVICE_CUDA;
            snprintf(label, sizeof(label), "%s H.264 NVDEC, 1 session", sizes[s].name);
            measure(label, path[s], p, 1, 0);
            snprintf(label, sizeof(label), "%s H.264 NVDEC, %d sessions", sizes[s].name, sessions);
            measure(label, path[s], p, sessions, 0);
            p.segments = sessions;
            snprintf(label, sizeof(label), "%s H.264 NVDEC, split file, %d sessions",
                     sizes[s].name, sessions);
            measure(label, path[s], p, 1, 1);
            p.segments = 0;
        }
        if (do_cpu) {
            p.device = KEYER_DECODE_DEVICE_CPU;
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            snprintf(label, sizeof(label), "%s H.264 CPU decode (%ld cores)", sizes[s].name, cores);
            measure(label, path[s], p, 1, 0);
        }
    }
    if (do_enc) {
        char label[96];
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(label, sizeof(label), "1080p x264 encode (%ld cores)", cores);
        measure_encode(label, path[0], dir, frames < 120 ? frames : 120);
    }
    if (json) {
        printf("{\"bench\": \"decode\", \"results\": [");
        for (int i = 0; i < nresults; i++)
            printf("%s\n  {\"name\": \"%s\", \"fps\": %.1f, \"frames\": %ld, \"seconds\": %.3f, "
                   "\"sessions\": %d, \"note\": \"%s\"}", i ? "," : "", results[i].name,
                   results[i].fps, results[i].frames, results[i].seconds, results[i].sessions,
                   results[i].note);
        printf("\n]}\n");
    } else {
        printf("%-46s %12s %8s %8s\n", "case", "frames/s", "frames", "seconds");
        for (int i = 0; i < nresults; i++)
            printf("%-46s %12.1f %8ld %8.2f  %s\n", results[i].name, results[i].fps,
                   results[i].frames, results[i].seconds, results[i].note);
    }
    return 0;
}
