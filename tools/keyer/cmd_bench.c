/*
 * keyer bench: benchmarks built on the public API only.
 *
 *   keyer bench nn --model NAME|FILE.tflite [--backend reference|cpu|cuda] [--threads N]
 *                  [--batch N] [--iterations N] [--warmup N] [--json]
 *
 * Loads the model (a registry name such as "selfie", or a path to a .tflite file), creates a
 * runtime, fills every input with a fixed pattern, runs the warm-up iterations, then times each
 * iteration (run + synchronize) and reports the median, 90th- and 99th-percentile latency (nearest
 * rank: with fewer than 100 iterations the 99th percentile is the slowest run), frames per
 * second (batch / median), achieved GFLOP/s (2 * MACs * batch / median) and the runtime's
 * arena and weight bytes. It also reports the CPU time of the whole process per timed
 * inference (all threads, CLOCK_PROCESS_CPUTIME_ID), which unlike the wall-clock figures does
 * not depend on what else the machine runs (it includes the thread pool's spin-waiting).
 * --json prints one JSON object on stdout instead of the table. The options come from an
 * option table (args.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "keyer/keyer.h"

typedef struct bench_nn_args {
    const char *model;
    keyer_backend backend;
    int threads, batch, iterations, warmup, json;
} bench_nn_args;

#define OFF(f) offsetof(bench_nn_args, f)
static const keyer_option bench_nn_options[] = {
    {"model", "registry name (see 'keyer models') or path to a .tflite file; names are looked "
              "up in $KEYER_MODELS_DIR or the build's models/", OFF(model), KEYER_OPTION_STRING,
     0, 0, 0, NULL, NULL, NULL, "NAME|FILE", 0, 0u},
    {"backend", "reference, cpu (default) or cuda", OFF(backend), KEYER_OPTION_CUSTOM, 0, 0, 0,
     NULL, kc_set_backend, "cpu", "NAME", 0, 0u},
    {"threads", "CPU threads; 0 = all cores (default 0)", OFF(threads), KEYER_OPTION_INT, 0, 0,
     INT_MAX, NULL, NULL, NULL, "N", 0, 0u},
    {"batch", "frames per inference (default 1)", OFF(batch), KEYER_OPTION_INT, 1, 1, INT_MAX,
     NULL, NULL, NULL, "N", 0, 0u},
    {"iterations", "timed inferences (default 100)", OFF(iterations), KEYER_OPTION_INT, 100, 1,
     INT_MAX, NULL, NULL, NULL, "N", 0, 0u},
    {"warmup", "untimed inferences first (default 10)", OFF(warmup), KEYER_OPTION_INT, 10, 0,
     INT_MAX, NULL, NULL, NULL, "N", 0, 0u},
    {"json", "print one JSON object instead of a table", OFF(json), KEYER_OPTION_BOOL, 0, 0, 1,
     NULL, NULL, NULL, NULL, 0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};
#undef OFF

/* Returns 0 on success, 2 on a usage error, -1 when --help was printed. @p argv[0] is "nn". */
static int parse_args(int argc, char **argv, bench_nn_args *args)
{
    kc_table table = {bench_nn_options, args};
    kc_args a = {
        .prog = "keyer bench nn",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer bench nn --model NAME|FILE.tflite [options]\n"
                 "\n"
                 "Times inference of one model on one backend.\n"
                 "\n",
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? -1 : rc;
    if (!args->model)
        return kc_usage_error(&a, "--model is required");
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A JSON string literal of @p s (model names and paths: escape quotes, backslashes, controls). */
static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* Fills input @p index with a fixed pattern in [0, 1) through the host staging path. */
static keyer_status fill_input(keyer_runtime *rt, int index, keyer_error *err)
{
    size_t bytes = keyer_runtime_input_bytes(rt, index);
    size_t n = bytes / sizeof(float);
    float *host = malloc(bytes ? bytes : 1);
    if (!host)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "input %d: no memory", index);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)((((uint32_t)i * 2654435761u) >> 12) & 0xffffu) / 65536.0f;
    keyer_status st = keyer_runtime_set_input(rt, index, host, bytes, err);
    free(host);
    return st;
}

static int bench_nn(int argc, char **argv)
{
    bench_nn_args a = {.backend = KEYER_BACKEND_CPU, .threads = 0, .batch = 1,
                       .iterations = 100, .warmup = 10};
    int pr = parse_args(argc, argv, &a);
    if (pr)
        return pr < 0 ? 0 : pr;

    int rc = 1;
    keyer_error err = {0};
    keyer_model *model = NULL;
    keyer_runtime *rt = NULL;
    double *samples = NULL;
    char path[4096];
    if (keyer_registry_resolve(a.model, path, sizeof(path), &err) != KEYER_OK ||
        keyer_model_load_file(path, &model, &err) != KEYER_OK) {
        fprintf(stderr, "keyer bench nn: %s\n", err.message);
        goto done;
    }
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = a.backend;
    p.batch = a.batch;
    p.threads = a.threads;
    if (keyer_runtime_create(model, &p, &rt, &err) != KEYER_OK) {
        fprintf(stderr, "keyer bench nn: %s on %s: %s\n", a.model, keyer_backend_name(a.backend),
                err.message);
        goto done;
    }
    for (int i = 0; i < keyer_model_input_count(model); i++)
        if (fill_input(rt, i, &err) != KEYER_OK) {
            fprintf(stderr, "keyer bench nn: %s\n", err.message);
            goto done;
        }
    samples = malloc(sizeof(double) * (size_t)a.iterations);
    if (!samples) {
        fprintf(stderr, "keyer bench nn: out of memory\n");
        goto done;
    }
    double cpu0 = 0.0;
    for (int i = 0; i < a.warmup + a.iterations; i++) {
        if (i == a.warmup)
            cpu0 = cpu_s();
        double t0 = now_s();
        if (keyer_runtime_run(rt, &err) != KEYER_OK ||
            keyer_runtime_synchronize(rt, &err) != KEYER_OK) {
            fprintf(stderr, "keyer bench nn: %s: %s\n", a.model, err.message);
            goto done;
        }
        double dt = now_s() - t0;
        if (i >= a.warmup)
            samples[i - a.warmup] = dt;
    }
    double cpu_ms = (cpu_s() - cpu0) / a.iterations * 1e3;
    qsort(samples, (size_t)a.iterations, sizeof(double), cmp_double);
    double median = a.iterations % 2 ? samples[a.iterations / 2]
                                     : 0.5 * (samples[a.iterations / 2 - 1] +
                                              samples[a.iterations / 2]);
    size_t i90 = (size_t)ceil(0.9 * a.iterations), i99 = (size_t)ceil(0.99 * a.iterations);
    double p90 = samples[i90 > 0 ? i90 - 1 : 0], p99 = samples[i99 > 0 ? i99 - 1 : 0];
    double fps = median > 0 ? a.batch / median : 0.0;
    uint64_t macs = keyer_model_macs(model);
    double gflops = median > 0 ? 2.0 * (double)macs * a.batch / median * 1e-9 : 0.0;
    size_t arena = keyer_runtime_arena_bytes(rt), weights = keyer_runtime_weight_bytes(rt);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = a.threads > 0 ? a.threads : (int)(cores > 0 ? cores : 1);
    if (a.backend == KEYER_BACKEND_REFERENCE)
        threads = 1; /* the reference kernels are single-threaded */

    if (a.json) {
        printf("{\"model\": ");
        json_string(stdout, a.model);
        printf(", \"file\": ");
        json_string(stdout, path);
        printf(", \"backend\": \"%s\", \"threads\": %d, \"batch\": %d, \"iterations\": %d, "
               "\"warmup\": %d, \"median_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, "
               "\"min_ms\": %.4f, \"cpu_ms\": %.4f, \"fps\": %.2f, \"macs\": %llu, "
               "\"gflops\": %.2f, \"arena_bytes\": %zu, \"weight_bytes\": %zu}\n",
               keyer_backend_name(a.backend), threads, a.batch, a.iterations, a.warmup,
               median * 1e3, p90 * 1e3, p99 * 1e3, samples[0] * 1e3, cpu_ms, fps,
               (unsigned long long)macs, gflops, arena, weights);
    } else {
        printf("model       %s (%s)\n", a.model, path);
        printf("backend     %s, %d thread%s, batch %d\n", keyer_backend_name(a.backend), threads,
               threads == 1 ? "" : "s", a.batch);
        printf("latency     median %.3f ms, p90 %.3f ms, p99 %.3f ms, min %.3f ms (%d runs after "
               "%d warm-up)\n",
               median * 1e3, p90 * 1e3, p99 * 1e3, samples[0] * 1e3, a.iterations, a.warmup);
        printf("cpu time    %.3f ms per inference (all threads)\n", cpu_ms);
        printf("throughput  %.1f frames/s\n", fps);
        printf("compute     %.1f M MACs per frame, %.1f GFLOP/s\n", (double)macs * 1e-6, gflops);
        printf("memory      arena %.2f MiB, weights %.2f MiB\n", (double)arena / 1048576.0,
               (double)weights / 1048576.0);
    }
    rc = 0;
done:
    free(samples);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
    return rc;
}

int keyer_cmd_bench(int argc, char **argv)
{
    /* argv[0] is "bench". */
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *out = argc < 2 ? stderr : stdout;
        fprintf(out, "usage: keyer bench nn [options]   (keyer bench nn --help for the options)\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "nn"))
        return bench_nn(argc - 1, argv + 1);
    fprintf(stderr, "keyer bench: unknown benchmark '%s' (known: nn)\n", argv[1]);
    return 2;
}
