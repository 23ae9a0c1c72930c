/*
 * A small fixed-size thread pool with one operation: a parallel for-loop.
 * Internal to keyer (prefix kr_). Threads are created once in
 * kr_threadpool_create and sleep between jobs; kr_threadpool_parallel_for
 * allocates nothing.
 */
#ifndef KEYER_CORE_THREADPOOL_H
#define KEYER_CORE_THREADPOOL_H

#include <stddef.h>

#include "keyer/status.h"

typedef struct kr_threadpool kr_threadpool;

/** Work item: called once for each index in [0, count). */
typedef void (*kr_task_fn)(void *ctx, size_t index);

/**
 * Creates a pool that runs jobs on @p threads threads in total (the calling
 * thread counts as one, so threads - 1 workers are started). threads <= 0
 * means one per online CPU. Errors: OUT_OF_MEMORY, INTERNAL (thread start).
 */
keyer_status kr_threadpool_create(int threads, kr_threadpool **out, keyer_error *err);

/** Number of threads that run a job (workers + the caller). 1 for NULL. */
int kr_threadpool_threads(const kr_threadpool *pool);

/**
 * Calls fn(ctx, i) for every i in [0, count), spread over the pool, and
 * returns when all calls have returned. A NULL pool runs serially.
 * Not re-entrant: one job at a time per pool.
 */
void kr_threadpool_parallel_for(kr_threadpool *pool, kr_task_fn fn, void *ctx, size_t count);

/** Stops and joins the workers, frees the pool, sets *pool to NULL. NULL accepted. */
void kr_threadpool_destroy(kr_threadpool **pool);

/** Number of CPUs this process may run on: its CPU affinity (taskset, a cpuset), else the
 *  online CPUs; at least 1. */
int kr_cpu_count(void);

#endif
