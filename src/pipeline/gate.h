/*
 * A start gate for the engines of a session over several GPUs (internal, prefix kr_): each
 * engine's run, once its stages are up (models loaded, runtimes made), waits at the gate until
 * every engine has come, so that all GPUs start reading at the same moment and the session's
 * wall time (its frames per second) does not count one GPU's longer set-up as running time
 * of the others (a GPU's set-up is not counted in a one-GPU session either). The wait is
 * bounded (an engine that never comes does not hold the others for ever). Header-only.
 */
#ifndef KEYER_PIPELINE_GATE_H
#define KEYER_PIPELINE_GATE_H

#include <pthread.h>
#include <time.h>

#include "pipeline/clock.h"

typedef struct kr_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int expected, arrived;
    int64_t opened_ns; /* when the last one came (or the wait ended) */
} kr_gate;

/** A gate for @p expected engines; 0, or -1 when the mutex or condition cannot be made. */
static inline int kr_gate_init(kr_gate *g, int expected)
{
    g->expected = expected;
    g->arrived = 0;
    g->opened_ns = 0;
    if (pthread_mutex_init(&g->lock, NULL))
        return -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int r = pthread_cond_init(&g->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (r) {
        pthread_mutex_destroy(&g->lock);
        return -1;
    }
    return 0;
}

/** Arrives and waits until every engine has, at most @p max_ns; returns the opening time. */
static inline int64_t kr_gate_pass(kr_gate *g, int64_t max_ns)
{
    pthread_mutex_lock(&g->lock);
    g->arrived++;
    if (g->arrived >= g->expected) {
        g->opened_ns = kr_clock_ns();
        pthread_cond_broadcast(&g->cond);
    }
    struct timespec ts = kr_clock_deadline(kr_clock_ns() + max_ns);
    while (g->arrived < g->expected)
        if (pthread_cond_timedwait(&g->cond, &g->lock, &ts))
            break; /* timed out: go on alone */
    int64_t t = g->opened_ns ? g->opened_ns : kr_clock_ns();
    pthread_mutex_unlock(&g->lock);
    return t;
}

/** Frees what kr_gate_init made (after every engine has passed). */
static inline void kr_gate_destroy(kr_gate *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
}

#endif
