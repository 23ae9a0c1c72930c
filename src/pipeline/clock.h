/* Monotonic time in nanoseconds for the pipeline's queues, statistics and traces. */
#ifndef KEYER_PIPELINE_CLOCK_H
#define KEYER_PIPELINE_CLOCK_H

#include <stdint.h>
#include <time.h>

/** CLOCK_MONOTONIC in nanoseconds. */
static inline int64_t kr_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/** The CLOCK_MONOTONIC instant @p abs_ns (nanoseconds) as a timespec for timed waits. */
static inline struct timespec kr_clock_deadline(int64_t abs_ns)
{
    struct timespec ts;
    if (abs_ns < 0)
        abs_ns = 0;
    ts.tv_sec = (time_t)(abs_ns / 1000000000);
    ts.tv_nsec = (long)(abs_ns % 1000000000);
    return ts;
}

#endif
