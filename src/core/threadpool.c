/* sched_getaffinity and CPU_COUNT are GNU extensions of glibc. */
#define _GNU_SOURCE
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct kr_threadpool {
    int threads;
    pthread_t *workers;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t done;
    unsigned long generation; /* bumped for each job */
    int busy;                 /* workers still inside the current job */
    int stop;
    kr_task_fn fn;
    void *ctx;
    size_t count;
    atomic_size_t next; /* next index to hand out */
};

int kr_cpu_count(void)
{
    /* The CPUs this process may run on (taskset, a container's or a Slurm task's cpuset),
     * not every CPU of the machine. */
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

static void run_items(kr_threadpool *p)
{
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->count)
            break;
        p->fn(p->ctx, i);
    }
}

static void *worker_main(void *arg)
{
    kr_threadpool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        run_items(p);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

keyer_status kr_threadpool_create(int threads, kr_threadpool **out, keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "thread pool: out is NULL");
    *out = NULL;
    if (threads <= 0)
        threads = kr_cpu_count();
    kr_threadpool *p = calloc(1, sizeof(*p));
    if (!p)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "thread pool: out of memory");
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof(*p->workers));
        if (!p->workers) {
            kr_threadpool_destroy(&p);
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "thread pool: out of memory");
        }
        for (int i = 0; i < threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
                kr_threadpool_destroy(&p);
                return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                       "thread pool: cannot start thread %d of %d", i + 1, threads);
            }
            p->started++;
        }
    }
    *out = p;
    return KEYER_OK;
}

int kr_threadpool_threads(const kr_threadpool *pool) { return pool ? pool->threads : 1; }

void kr_threadpool_parallel_for(kr_threadpool *p, kr_task_fn fn, void *ctx, size_t count)
{
    if (count == 0)
        return;
    if (!p || p->started == 0 || count == 1) {
        for (size_t i = 0; i < count; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->count = count;
    atomic_store(&p->next, 0);
    p->busy = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    run_items(p);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void kr_threadpool_destroy(kr_threadpool **pool)
{
    if (!pool || !*pool)
        return;
    kr_threadpool *p = *pool;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->workers);
    free(p);
    *pool = NULL;
}
