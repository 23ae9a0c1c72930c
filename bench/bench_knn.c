/*
 * kNN graph per frame: the CPU graph (uniform grid) against the O(n^2) search it replaced
 * (the tests' oracle, only for small n), and the CUDA graph when keyer is built with CUDA and
 * a device exists. Points move a little every frame (the hysteresis path of a tracked scene).
 *
 * Usage: bench_knn [--frames F] [--k K] [--impl cpu-o(n^2)|cpu-grid|cuda] [--n N]
 *                  [--set uniform|clustered|mixed|faces|dense] [--vary] [--json]
 * Prints one line per (implementation, set, n): the median, best and worst wall-clock ms per
 * graph over F frames (the worst: one slow frame among fast ones shows there), and the median
 * CPU time of the calling thread (the one core's work on the CPU; on a
 * shared machine it is the steadier figure; for CUDA only the host's part). --impl times one
 * implementation only, --n one number of points (instead of 1,000, 5,000 and 50,000), --set one
 * set (e.g. for a profiler). The CUDA figure is what a caller gets: the points copied in, the graph
 * built, the edges back in host memory when keyer_knn_graph_update returns. --vary: every other
 * frame has one point fewer (points leaving and coming back: no two updates in a row of one
 * size, so the CUDA graph queues its launches one by one instead of replaying a captured
 * update). The faces set is real points: the face-mesh landmarks of the two test photos
 * (kt_knn_face_points: their models and photos from KEYER_MODELS_DIR and KEYER_TEST_DATA) as a
 * crowd of n / 468 faces over a 3840 x 2160 frame, moved as the uniform set is; it is left out
 * (with a message) where those files are missing. The dense set (kt_knn_points' KT_KNN_DENSE:
 * 95% of the points on 64 spots in a 4 x 4 px square, so a few cells of the grid hold nearly
 * all of them) is the uniform grid's worst case, run only when asked for (--set dense): its
 * CPU graph takes seconds at 50,000 points.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "keyer/faces.h"
#include "keyer/overlay.h"
#include "kt_knn.h"

typedef struct result {
    double median, best, worst, cpu;
    int n, edges; /* n: the points per frame (the faces set rounds down to whole faces) */
} result;

/* The faces set: not one of kt_knn_points' kinds. */
#define SET_FACES KT_KNN_SETS

static const char *set_name(kt_knn_set set)
{
    return set == SET_FACES ? "faces" : kt_knn_set_name(set);
}

/* Milliseconds of CPU time used by the calling thread. */
static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Times F frames of one implementation (cuda -1: the oracle); vary: every other frame has one
 * point fewer. */
static int run(int cuda, kt_knn_set set, int n, int k, int frames, int vary, result *out)
{
    uint32_t *ids = malloc((size_t)n * sizeof(uint32_t));
    float *xy = malloc((size_t)n * 2 * sizeof(float));
    keyer_knn_edge *edges = malloc((size_t)n * 4 * sizeof(keyer_knn_edge));
    double *ms = malloc((size_t)frames * sizeof(double));
    double *cpu = malloc((size_t)frames * sizeof(double));
    keyer_knn_params p = keyer_knn_params_defaults();
    p.k = k;
    p.cuda = cuda > 0;
    keyer_knn_graph *g = NULL;
    kt_knn_oracle *o = NULL;
    keyer_error err = {0};
    int rc = -1;
    if (!ids || !xy || !edges || !ms || !cpu)
        goto done;
    if (cuda >= 0 && keyer_knn_graph_create(&p, n, &g, &err)) {
        fprintf(stderr, "bench_knn: %s\n", err.message);
        goto done;
    }
    if (cuda < 0 && !(o = kt_knn_oracle_create(&p, n)))
        goto done;
    if (set == SET_FACES) {
        const int faces = n / KEYER_FACE_MESH_POINTS;
        if (faces < 1 || kt_knn_face_points(faces, ids, xy)) {
            fprintf(stderr, "bench_knn: faces set of %d points left out (fewer than %d points, "
                            "or the face models or test photos are missing)\n",
                    n, KEYER_FACE_MESH_POINTS);
            goto done;
        }
        n = faces * KEYER_FACE_MESH_POINTS;
    } else {
        kt_knn_points(set, n, 7, ids, xy);
    }
    out->n = n;
    for (int f = -2; f < frames; f++) { /* two warm-up frames */
        kt_knn_jitter(set == SET_FACES ? KT_KNN_UNIFORM : set, n, (uint32_t)(f + 3), xy);
        int ne = 0;
        const int m = vary && (f & 1) ? n - 1 : n;
        double t0 = kb_now_ms(), c0 = thread_cpu_ms();
        if (o)
            ne = kt_knn_oracle_update(o, ids, xy, m, edges);
        else if (keyer_knn_graph_update(g, ids, xy, m, edges, n * 4, &ne, &err)) {
            fprintf(stderr, "bench_knn: %s\n", err.message);
            goto done;
        }
        double t1 = kb_now_ms(), c1 = thread_cpu_ms();
        if (f >= 0) {
            ms[f] = t1 - t0;
            cpu[f] = c1 - c0;
        }
        out->edges = ne;
    }
    qsort(ms, (size_t)frames, sizeof(double), kb_cmp_double);
    out->median = ms[frames / 2];
    out->best = ms[0];
    out->worst = ms[frames - 1];
    qsort(cpu, (size_t)frames, sizeof(double), kb_cmp_double);
    out->cpu = cpu[frames / 2];
    rc = 0;
done:
    keyer_knn_graph_destroy(&g);
    kt_knn_oracle_destroy(&o);
    free(ids);
    free(xy);
    free(edges);
    free(ms);
    free(cpu);
    return rc;
}

int main(int argc, char **argv)
{
    int frames = 20, k = 5, json = 0, only_n = -1, vary = 0;
    const char *only = NULL, *only_set = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--frames") && i + 1 < argc)
            frames = kb_int_arg(argv[0], "--frames", argv[++i]);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc)
            k = kb_int_arg(argv[0], "--k", argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--vary"))
            vary = 1;
        else if (!strcmp(argv[i], "--impl") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            only_n = kb_int_arg(argv[0], "--n", argv[++i]);
        else if (!strcmp(argv[i], "--set") && i + 1 < argc)
            only_set = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--frames F] [--k K] [--impl NAME] [--n N] [--set NAME] [--vary] "
                    "[--json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (frames < 1 || k < 1 || only_n == 0 || only_n < -1 || (vary && only_n == 1)) {
        fprintf(stderr, "%s: --frames and --k must be >= 1, --n >= 1 (>= 2 with --vary)\n",
                argv[0]);
        return 2;
    }
    static const struct {
        const char *name;
        int cuda, max_n;
    } impls[] = {{"cpu-o(n^2)", -1, 5000}, {"cpu-grid", 0, 1 << 30},
#ifdef KEYER_HAVE_CUDA
                 {"cuda", 1, 1 << 30},
#endif
    };
    int known = !only;
    for (size_t m = 0; m < sizeof(impls) / sizeof(impls[0]); m++)
        known |= only && !strcmp(only, impls[m].name);
    if (!known) {
        fprintf(stderr, "%s: --impl %s: not one of this build's implementations\n", argv[0],
                only);
        return 2;
    }
    const int all_sizes[] = {1000, 5000, 50000}, one_size[] = {only_n};
    const int *sizes = only_n > 0 ? one_size : all_sizes;
    const size_t n_sizes = only_n > 0 ? 1 : 3;
    static const kt_knn_set sets[] = {KT_KNN_UNIFORM, KT_KNN_CLUSTERED, KT_KNN_MIXED, SET_FACES,
                                      KT_KNN_DENSE};
    int set_known = !only_set;
    for (size_t q = 0; q < sizeof(sets) / sizeof(sets[0]); q++)
        set_known |= only_set && !strcmp(only_set, set_name(sets[q]));
    if (!set_known) {
        fprintf(stderr, "%s: --set %s: not uniform, clustered, mixed, faces or dense\n", argv[0],
                only_set);
        return 2;
    }
    if (json)
        printf("[\n");
    int first = 1;
    for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++)
        for (size_t z = 0; z < n_sizes; z++)
            for (size_t m = 0; m < sizeof(impls) / sizeof(impls[0]); m++) {
                if (sizes[z] > impls[m].max_n || (only && strcmp(only, impls[m].name)) ||
                    (only_set && strcmp(only_set, set_name(sets[s]))) ||
                    (!only_set && sets[s] == KT_KNN_DENSE))
                    continue;
                result r = {0, 0, 0, 0, 0, 0};
                if (run(impls[m].cuda, sets[s], sizes[z], k, frames, vary, &r))
                    continue;
                if (json)
                    printf("%s  {\"impl\": \"%s\", \"set\": \"%s\", \"n\": %d, \"k\": %d, "
                           "\"vary\": %d, \"median_ms\": %.4f, \"best_ms\": %.4f, "
                           "\"worst_ms\": %.4f, \"thread_cpu_ms\": %.4f, \"edges\": %d}",
                           first ? "" : ",\n", impls[m].name, set_name(sets[s]), r.n, k, vary,
                           r.median, r.best, r.worst, r.cpu, r.edges);
                else
                    printf("%-11s %-10s n=%-6d k=%d  %9.3f ms/graph (median of %d), best %9.3f, "
                           "worst %9.3f, thread CPU %9.3f ms, %d edges%s\n",
                           impls[m].name, set_name(sets[s]), r.n, k, r.median, frames,
                           r.best, r.worst, r.cpu, r.edges, vary ? " (n varies)" : "");
                first = 0;
                fflush(stdout);
            }
    if (json)
        printf("\n]\n");
    return 0;
}
