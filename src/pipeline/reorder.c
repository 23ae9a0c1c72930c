/* In-order reassembly: a ring indexed by sequence number modulo the window. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/reorder.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

struct kr_reorder {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    void **slots;
    unsigned char *present;
    int capacity;
    int held;
    int64_t next;  /* number the consumer takes next */
    int64_t total; /* -1 until finished */
    int cancelled;
};

keyer_status kr_reorder_create(int capacity, kr_reorder **out, keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "reorder: out is NULL");
    *out = NULL;
    if (capacity < 1 || capacity > 65536)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "reorder: capacity %d is outside 1..65536", capacity);
    kr_reorder *r = calloc(1, sizeof(*r));
    if (!r)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "reorder: out of memory");
    r->slots = calloc((size_t)capacity, sizeof(*r->slots));
    r->present = calloc((size_t)capacity, 1);
    if (!r->slots || !r->present) {
        free(r->slots);
        free(r->present);
        free(r);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "reorder: out of memory");
    }
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    int made = 0;
    if (ok && pthread_mutex_init(&r->lock, NULL) == 0) {
        made = 1;
        if (pthread_cond_init(&r->ready, &ca) == 0)
            made = 2;
    }
    pthread_condattr_destroy(&ca);
    if (made < 2) {
        if (made)
            pthread_mutex_destroy(&r->lock);
        free(r->slots);
        free(r->present);
        free(r);
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "reorder: cannot create its mutex");
    }
    r->capacity = capacity;
    r->total = -1;
    *out = r;
    return KEYER_OK;
}

void kr_reorder_destroy(kr_reorder **r)
{
    if (!r || !*r)
        return;
    kr_reorder *p = *r;
    pthread_cond_destroy(&p->ready);
    pthread_mutex_destroy(&p->lock);
    free(p->slots);
    free(p->present);
    free(p);
    *r = NULL;
}

keyer_status kr_reorder_put(kr_reorder *r, int64_t seq, void *item, keyer_error *err)
{
    pthread_mutex_lock(&r->lock);
    keyer_status st = KEYER_OK;
    int idx = (int)(seq % r->capacity);
    if (seq < r->next || seq >= r->next + r->capacity || (r->total >= 0 && seq >= r->total)) {
        st = keyer_error_set(err, KEYER_STATUS_INTERNAL,
                             "reorder: frame %lld is outside the window [%lld, %lld)",
                             (long long)seq, (long long)r->next,
                             (long long)(r->next + r->capacity));
    } else if (r->present[idx]) {
        st = keyer_error_set(err, KEYER_STATUS_INTERNAL, "reorder: frame %lld was put twice",
                             (long long)seq);
    } else {
        r->slots[idx] = item;
        r->present[idx] = 1;
        r->held++;
        if (seq == r->next)
            pthread_cond_broadcast(&r->ready);
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

/* deadline_ns: -1 waits forever, 0 does not wait, else an absolute CLOCK_MONOTONIC time. */
static keyer_status take_impl(kr_reorder *r, void **item, int64_t deadline_ns)
{
    pthread_mutex_lock(&r->lock);
    keyer_status st;
    for (;;) {
        int idx = (int)(r->next % r->capacity);
        if (r->cancelled) {
            st = KEYER_STATUS_INTERRUPTED;
            break;
        }
        if (r->present[idx]) {
            *item = r->slots[idx];
            r->slots[idx] = NULL;
            r->present[idx] = 0;
            r->held--;
            r->next++;
            st = KEYER_OK;
            break;
        }
        if (r->total >= 0 && r->next >= r->total) {
            st = KEYER_STATUS_END;
            break;
        }
        if (deadline_ns == 0) {
            st = KEYER_STATUS_AGAIN;
            break;
        }
        if (deadline_ns < 0) {
            pthread_cond_wait(&r->ready, &r->lock);
        } else {
            struct timespec ts = kr_clock_deadline(deadline_ns);
            if (pthread_cond_timedwait(&r->ready, &r->lock, &ts) == ETIMEDOUT &&
                kr_clock_ns() >= deadline_ns) {
                idx = (int)(r->next % r->capacity);
                if (!r->present[idx] && !r->cancelled &&
                    !(r->total >= 0 && r->next >= r->total)) {
                    st = KEYER_STATUS_AGAIN;
                    break;
                }
            }
        }
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

keyer_status kr_reorder_take(kr_reorder *r, void **item, int wait)
{
    return take_impl(r, item, wait ? -1 : 0);
}

keyer_status kr_reorder_take_timed(kr_reorder *r, void **item, int64_t timeout_ns)
{
    if (timeout_ns <= 0)
        return take_impl(r, item, 0);
    return take_impl(r, item, kr_clock_ns() + timeout_ns);
}

void kr_reorder_finish(kr_reorder *r, int64_t total)
{
    pthread_mutex_lock(&r->lock);
    r->total = total < 0 ? 0 : total;
    pthread_cond_broadcast(&r->ready);
    pthread_mutex_unlock(&r->lock);
}

void kr_reorder_cancel(kr_reorder *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->cancelled = 1;
    pthread_cond_broadcast(&r->ready);
    pthread_mutex_unlock(&r->lock);
}

int kr_reorder_drain(kr_reorder *r, void **item)
{
    pthread_mutex_lock(&r->lock);
    int got = 0;
    for (int i = 0; i < r->capacity && !got; i++) {
        if (r->present[i]) {
            *item = r->slots[i];
            r->slots[i] = NULL;
            r->present[i] = 0;
            r->held--;
            got = 1;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return got;
}

int64_t kr_reorder_next(kr_reorder *r)
{
    pthread_mutex_lock(&r->lock);
    int64_t n = r->next;
    pthread_mutex_unlock(&r->lock);
    return n;
}

int kr_reorder_held(kr_reorder *r)
{
    pthread_mutex_lock(&r->lock);
    int n = r->held;
    pthread_mutex_unlock(&r->lock);
    return n;
}
