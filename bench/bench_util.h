/* Helpers shared by the benchmark programs: a monotonic clock and sorting of timing samples. */
#ifndef KEYER_BENCH_UTIL_H
#define KEYER_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double kb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds on the monotonic clock. */
static inline double kb_now_ms(void)
{
    return kb_now_s() * 1e3;
}

/* qsort comparator of doubles, ascending. */
static inline int kb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
