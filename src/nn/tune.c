/*
 * keyer_runtime_best_batch: throughput-optimal batch size by measurement (see keyer/nn.h).
 * Built only on the public runtime API; wall-clock timing with CLOCK_MONOTONIC around
 * run + synchronize, median of the runs.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyer/nn.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms per run of @p rt over @p runs runs (after one warm-up). */
static keyer_status time_runtime(keyer_runtime *rt, int runs, double *samples, double *median,
                                 keyer_error *err)
{
    keyer_status st = keyer_runtime_run(rt, err);
    if (!st)
        st = keyer_runtime_synchronize(rt, err);
    for (int i = 0; i < runs && !st; i++) {
        double t0 = now_ms();
        st = keyer_runtime_run(rt, err);
        if (!st)
            st = keyer_runtime_synchronize(rt, err);
        samples[i] = now_ms() - t0;
    }
    if (st)
        return st;
    qsort(samples, (size_t)runs, sizeof(double), cmp_double);
    *median = samples[runs / 2];
    return KEYER_OK;
}

keyer_status keyer_runtime_best_batch(const keyer_model *model, const keyer_runtime_params *params,
                                      int max_batch, int runs, int *best,
                                      keyer_batch_timing *timings, int capacity, int *count,
                                      keyer_error *err)
{
    if (!model || !best || max_batch < 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_runtime_best_batch: %s",
                               !model ? "model is NULL" : !best ? "best is NULL"
                                                                : "max_batch must be >= 1");
    if (runs < 3)
        runs = 3;
    double *samples = malloc((size_t)runs * sizeof(double));
    if (!samples)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "keyer_runtime_best_batch: out "
                                                                "of memory");
    keyer_runtime_params p = params ? *params : keyer_runtime_params_defaults();
    double best_fps = 0;
    int n = 0, stalls = 0;
    keyer_status st = KEYER_OK;
    *best = 1;
    for (int batch = 1; batch <= max_batch; batch = batch < max_batch && batch * 2 > max_batch
                                                        ? max_batch
                                                        : batch * 2) {
        p.batch = batch;
        keyer_runtime *rt = NULL;
        keyer_error local = {0};
        st = keyer_runtime_create(model, &p, &rt, &local);
        if (st == KEYER_STATUS_OUT_OF_MEMORY && batch > 1) {
            st = KEYER_OK; /* the largest size that fits ends the search */
            break;
        }
        if (st) {
            if (err)
                *err = local;
            break;
        }
        double ms = 0;
        st = time_runtime(rt, runs, samples, &ms, err);
        keyer_runtime_destroy(&rt);
        if (st)
            break;
        double fps = ms > 0 ? batch * 1e3 / ms : 0;
        if (timings && n < capacity)
            timings[n] = (keyer_batch_timing){batch, ms, fps};
        n++;
        if (fps > best_fps * 1.03) {
            stalls = 0;
        } else if (++stalls >= 2) {
            if (fps > best_fps) {
                best_fps = fps;
                *best = batch;
            }
            break;
        }
        if (fps > best_fps) {
            best_fps = fps;
            *best = batch;
        }
        if (batch == max_batch)
            break;
    }
    free(samples);
    if (count)
        *count = n;
    return st;
}
