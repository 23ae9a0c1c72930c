/* A stream's output passed from a failed GPU's engine to another (handoff.h). */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/handoff.h"

#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

enum { WAITING = 0, GIVEN, FAILED };

struct kr_handoff {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int state;
    keyer_writer *writer; /* given, not yet taken */
};

keyer_status kr_handoff_create(kr_handoff **out, keyer_error *err)
{
    kr_handoff *h = calloc(1, sizeof(*h));
    if (!h)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "failover: out of memory");
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    *out = h;
    return KEYER_OK;
}

void kr_handoff_give(kr_handoff *h, keyer_writer *writer, int ok)
{
    pthread_mutex_lock(&h->lock);
    h->state = ok ? GIVEN : FAILED;
    h->writer = ok ? writer : NULL;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

int kr_handoff_take(kr_handoff *h, const atomic_int *cancel, keyer_writer **writer)
{
    *writer = NULL;
    pthread_mutex_lock(&h->lock);
    while (h->state == WAITING) {
        if (cancel && atomic_load(cancel)) {
            pthread_mutex_unlock(&h->lock);
            return -1;
        }
        struct timespec ts = kr_clock_deadline(kr_clock_ns() + 50 * 1000000LL);
        pthread_cond_timedwait(&h->cond, &h->lock, &ts);
    }
    int ok = h->state == GIVEN;
    *writer = h->writer;
    h->writer = NULL;
    pthread_mutex_unlock(&h->lock);
    return ok;
}

void kr_handoff_destroy(kr_handoff **hp)
{
    if (!hp || !*hp)
        return;
    kr_handoff *h = *hp;
    if (h->writer) {
        keyer_error e = {0};
        keyer_writer_close(h->writer, &e);
        keyer_writer_destroy(&h->writer);
    }
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->lock);
    free(h);
    *hp = NULL;
}
