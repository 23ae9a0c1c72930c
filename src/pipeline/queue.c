/* Bounded blocking FIFO between pipeline stages: a ring of (item, push time) pairs. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

typedef struct slot {
    void *item;
    int64_t pushed_ns;
} slot;

struct kr_queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    slot *ring;
    int capacity;
    int head;  /* index of the oldest item */
    int count; /* items inside */
    int closed;
    int cancelled;
    /* statistics */
    int max_depth;
    int64_t created_ns;
    int64_t last_change_ns;
    double depth_integral; /* sum of depth * ns */
    int64_t pushed, popped, dropped;
    int64_t push_wait_ns, pop_wait_ns;
    int64_t flushed_upto; /* q->pushed at the last kr_queue_flush */
    int64_t flushed_pops; /* batches that a flush released before their deadline */
};

keyer_status kr_queue_create(int capacity, kr_queue **out, keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "queue: out is NULL");
    *out = NULL;
    if (capacity < 1 || capacity > 65536)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "queue: capacity %d is outside 1..65536", capacity);
    kr_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "queue: out of memory");
    q->ring = calloc((size_t)capacity, sizeof(*q->ring));
    if (!q->ring) {
        free(q);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "queue: cannot allocate %d slots", capacity);
    }
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    if (ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0)
        ok = 0;
    int made = 0;
    if (ok && pthread_mutex_init(&q->lock, NULL) == 0) {
        made = 1;
        if (pthread_cond_init(&q->not_empty, &ca) == 0) {
            made = 2;
            if (pthread_cond_init(&q->not_full, &ca) == 0)
                made = 3;
        }
    }
    pthread_condattr_destroy(&ca);
    if (made < 3) {
        if (made >= 2)
            pthread_cond_destroy(&q->not_empty);
        if (made >= 1)
            pthread_mutex_destroy(&q->lock);
        free(q->ring);
        free(q);
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "queue: cannot create its mutex");
    }
    q->capacity = capacity;
    q->created_ns = q->last_change_ns = kr_clock_ns();
    *out = q;
    return KEYER_OK;
}

void kr_queue_destroy(kr_queue **q)
{
    if (!q || !*q)
        return;
    kr_queue *p = *q;
    pthread_cond_destroy(&p->not_full);
    pthread_cond_destroy(&p->not_empty);
    pthread_mutex_destroy(&p->lock);
    free(p->ring);
    free(p);
    *q = NULL;
}

/* Accounts the time spent at the current depth; call before changing count (lock held). */
static void note_depth(kr_queue *q, int64_t now)
{
    if (now > q->last_change_ns) {
        q->depth_integral += (double)q->count * (double)(now - q->last_change_ns);
        q->last_change_ns = now;
    }
}

static void append(kr_queue *q, void *item, int64_t now)
{
    note_depth(q, now);
    int tail = (q->head + q->count) % q->capacity;
    q->ring[tail].item = item;
    q->ring[tail].pushed_ns = now;
    q->count++;
    q->pushed++;
    if (q->count > q->max_depth)
        q->max_depth = q->count;
    pthread_cond_signal(&q->not_empty);
}

static void *remove_oldest(kr_queue *q, int64_t now)
{
    note_depth(q, now);
    void *item = q->ring[q->head].item;
    q->ring[q->head].item = NULL;
    q->head = (q->head + 1) % q->capacity;
    q->count--;
    pthread_cond_signal(&q->not_full);
    return item;
}

static keyer_status push_impl(kr_queue *q, void *item, int wait)
{
    pthread_mutex_lock(&q->lock);
    int64_t waited_from = 0;
    while (!q->cancelled && !q->closed && q->count == q->capacity) {
        if (!wait) {
            pthread_mutex_unlock(&q->lock);
            return KEYER_STATUS_AGAIN;
        }
        if (!waited_from)
            waited_from = kr_clock_ns();
        pthread_cond_wait(&q->not_full, &q->lock);
    }
    int64_t now = kr_clock_ns();
    if (waited_from)
        q->push_wait_ns += now - waited_from;
    keyer_status st = KEYER_OK;
    if (q->cancelled)
        st = KEYER_STATUS_INTERRUPTED;
    else if (q->closed)
        st = KEYER_STATUS_END;
    else
        append(q, item, now);
    pthread_mutex_unlock(&q->lock);
    return st;
}

keyer_status kr_queue_push(kr_queue *q, void *item)
{
    return push_impl(q, item, 1);
}

keyer_status kr_queue_try_push(kr_queue *q, void *item)
{
    return push_impl(q, item, 0);
}

keyer_status kr_queue_push_drop_oldest(kr_queue *q, void *item, void **dropped)
{
    *dropped = NULL;
    pthread_mutex_lock(&q->lock);
    keyer_status st = KEYER_OK;
    int64_t now = kr_clock_ns();
    if (q->cancelled) {
        st = KEYER_STATUS_INTERRUPTED;
    } else if (q->closed) {
        st = KEYER_STATUS_END;
    } else {
        if (q->count == q->capacity) {
            *dropped = remove_oldest(q, now);
            q->dropped++;
        }
        append(q, item, now);
    }
    pthread_mutex_unlock(&q->lock);
    return st;
}

/* Waits until an item is inside or the queue is closed/cancelled (lock held). */
static keyer_status wait_item(kr_queue *q, int wait)
{
    int64_t waited_from = 0;
    while (!q->cancelled && q->count == 0 && !q->closed) {
        if (!wait)
            return KEYER_STATUS_AGAIN;
        if (!waited_from)
            waited_from = kr_clock_ns();
        pthread_cond_wait(&q->not_empty, &q->lock);
    }
    if (waited_from)
        q->pop_wait_ns += kr_clock_ns() - waited_from;
    if (q->cancelled)
        return KEYER_STATUS_INTERRUPTED;
    if (q->count == 0)
        return KEYER_STATUS_END;
    return KEYER_OK;
}

static keyer_status pop_impl(kr_queue *q, void **item, int wait)
{
    pthread_mutex_lock(&q->lock);
    keyer_status st = wait_item(q, wait);
    if (st == KEYER_OK) {
        *item = remove_oldest(q, kr_clock_ns());
        q->popped++;
    }
    pthread_mutex_unlock(&q->lock);
    return st;
}

keyer_status kr_queue_pop(kr_queue *q, void **item)
{
    return pop_impl(q, item, 1);
}

keyer_status kr_queue_try_pop(kr_queue *q, void **item)
{
    return pop_impl(q, item, 0);
}

keyer_status kr_queue_pop_timed(kr_queue *q, void **item, int64_t timeout_ns)
{
    pthread_mutex_lock(&q->lock);
    if (q->count == 0 && !q->cancelled && !q->closed && timeout_ns > 0) {
        struct timespec ts = kr_clock_deadline(kr_clock_ns() + timeout_ns);
        int64_t t0 = kr_clock_ns();
        while (q->count == 0 && !q->cancelled && !q->closed &&
               pthread_cond_timedwait(&q->not_empty, &q->lock, &ts) != ETIMEDOUT) {
        }
        q->pop_wait_ns += kr_clock_ns() - t0;
    }
    keyer_status st = wait_item(q, 0);
    if (st == KEYER_OK) {
        *item = remove_oldest(q, kr_clock_ns());
        q->popped++;
    }
    pthread_mutex_unlock(&q->lock);
    return st;
}

keyer_status kr_queue_pop_batch(kr_queue *q, void **items, int max, int64_t budget_ns,
                                int *count, int *full)
{
    *count = 0;
    *full = 0;
    if (max < 1)
        max = 1;
    pthread_mutex_lock(&q->lock);
    int64_t now = 0;
    for (;;) {
        keyer_status st = wait_item(q, 1);
        if (st != KEYER_OK) {
            pthread_mutex_unlock(&q->lock);
            return st;
        }
        /* The oldest item sets the deadline: it may not wait longer than the budget. */
        int64_t deadline = q->ring[q->head].pushed_ns + (budget_ns > 0 ? budget_ns : 0);
        int64_t waited_from = 0;
        /* nothing more is coming for now once every item inside was pushed before the
         * producer's last flush */
        while (!q->cancelled && !q->closed && q->count > 0 && q->count < max &&
               q->count < q->capacity && q->flushed_upto != q->pushed) {
            now = kr_clock_ns();
            if (now >= deadline)
                break;
            if (!waited_from)
                waited_from = now;
            struct timespec ts = kr_clock_deadline(deadline);
            if (pthread_cond_timedwait(&q->not_empty, &q->lock, &ts) == ETIMEDOUT)
                break;
        }
        now = kr_clock_ns();
        if (waited_from)
            q->pop_wait_ns += now - waited_from;
        if (q->cancelled) {
            pthread_mutex_unlock(&q->lock);
            return KEYER_STATUS_INTERRUPTED;
        }
        if (q->count > 0)
            break;
        /* another consumer took the items while this one waited: start again */
    }
    int n = q->count < max ? q->count : max;
    *full = n == max;
    if (!*full && budget_ns > 0 && q->flushed_upto == q->pushed && !q->closed &&
        q->count < q->capacity &&
        now < q->ring[q->head].pushed_ns + budget_ns)
        q->flushed_pops++;
    for (int i = 0; i < n; i++)
        items[i] = remove_oldest(q, now);
    q->popped += n;
    *count = n;
    /* Several slots may have been freed: wake every waiting producer. */
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return KEYER_OK;
}

void kr_queue_flush(kr_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->flushed_upto = q->pushed;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

void kr_queue_close(kr_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}

void kr_queue_cancel(kr_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->cancelled = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}

int kr_queue_drain(kr_queue *q, void **item)
{
    pthread_mutex_lock(&q->lock);
    int got = q->count > 0;
    if (got)
        *item = remove_oldest(q, kr_clock_ns());
    pthread_mutex_unlock(&q->lock);
    return got;
}

int kr_queue_size(kr_queue *q)
{
    pthread_mutex_lock(&q->lock);
    int n = q->count;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void kr_queue_stats_get(kr_queue *q, kr_queue_stats *out)
{
    pthread_mutex_lock(&q->lock);
    int64_t now = kr_clock_ns();
    note_depth(q, now);
    out->capacity = q->capacity;
    out->depth = q->count;
    out->max_depth = q->max_depth;
    out->mean_depth = now > q->created_ns ? q->depth_integral / (double)(now - q->created_ns) : 0.0;
    out->pushed = q->pushed;
    out->popped = q->popped;
    out->dropped = q->dropped;
    out->push_wait_ns = q->push_wait_ns;
    out->pop_wait_ns = q->pop_wait_ns;
    out->flushed_pops = q->flushed_pops;
    pthread_mutex_unlock(&q->lock);
}
