/* Pipeline plumbing: the bounded queue (blocking, close, cancel, drop-oldest, batching with
 * a deadline, a producer's flush) and the in-order reassembly buffer. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "pipeline/clock.h"
#include "pipeline/queue.h"
#include "pipeline/reorder.h"

#define P(i) ((void *)(uintptr_t)(i))
#define I(p) ((int)(uintptr_t)(p))

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_queue_fifo_and_bounds(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_queue_create(0, &q, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_queue_create(70000, &q, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_queue_create(3, &q, &err), KEYER_OK);
    for (int i = 1; i <= 3; i++)
        assert_int_equal(kr_queue_try_push(q, P(i)), KEYER_OK);
    assert_int_equal(kr_queue_try_push(q, P(4)), KEYER_STATUS_AGAIN);
    assert_int_equal(kr_queue_size(q), 3);
    void *p;
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(kr_queue_try_pop(q, &p), KEYER_OK);
        assert_int_equal(I(p), i);
    }
    assert_int_equal(kr_queue_try_pop(q, &p), KEYER_STATUS_AGAIN);
    /* wrap around the ring several times */
    for (int round = 0; round < 10; round++) {
        assert_int_equal(kr_queue_push(q, P(100 + round)), KEYER_OK);
        assert_int_equal(kr_queue_push(q, P(200 + round)), KEYER_OK);
        assert_int_equal(kr_queue_pop(q, &p), KEYER_OK);
        assert_int_equal(I(p), 100 + round);
        assert_int_equal(kr_queue_pop(q, &p), KEYER_OK);
        assert_int_equal(I(p), 200 + round);
    }
    kr_queue_stats st;
    kr_queue_stats_get(q, &st);
    assert_int_equal(st.capacity, 3);
    assert_int_equal(st.max_depth, 3);
    assert_int_equal(st.pushed, 23);
    assert_int_equal(st.popped, 23);
    kr_queue_destroy(&q);
    assert_null(q);
    kr_queue_destroy(&q);
    kr_queue_destroy(NULL);
}

static void test_queue_close_drains(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(4, &q, NULL), KEYER_OK);
    kr_queue_push(q, P(1));
    kr_queue_push(q, P(2));
    kr_queue_close(q);
    kr_queue_close(q);
    assert_int_equal(kr_queue_push(q, P(3)), KEYER_STATUS_END);
    void *p;
    assert_int_equal(kr_queue_pop(q, &p), KEYER_OK);
    assert_int_equal(I(p), 1);
    assert_int_equal(kr_queue_pop(q, &p), KEYER_OK);
    assert_int_equal(I(p), 2);
    assert_int_equal(kr_queue_pop(q, &p), KEYER_STATUS_END);
    assert_int_equal(kr_queue_try_pop(q, &p), KEYER_STATUS_END);
    kr_queue_destroy(&q);
}

/* kr_queue_pop_timed: waits at least its timeout on an empty queue (AGAIN), takes what is
 * there at once, gets an item pushed while it waits, and END once closed and drained. */
typedef struct late_push {
    kr_queue *q;
} late_push;

static void *late_push_main(void *arg)
{
    late_push *lp = arg;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    kr_queue_push(lp->q, P(7));
    return NULL;
}

static void test_queue_pop_timed(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(4, &q, NULL), KEYER_OK);
    void *p = NULL;
    int64_t t0 = kr_clock_ns();
    assert_int_equal(kr_queue_pop_timed(q, &p, 30 * 1000000LL), KEYER_STATUS_AGAIN);
    assert_true(kr_clock_ns() - t0 >= 30 * 1000000LL);
    assert_int_equal(kr_queue_pop_timed(q, &p, 0), KEYER_STATUS_AGAIN);
    kr_queue_push(q, P(5));
    assert_int_equal(kr_queue_pop_timed(q, &p, 0), KEYER_OK);
    assert_int_equal(I(p), 5);
    late_push lp = {q};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, late_push_main, &lp), 0);
    /* the push comes after about 20 ms, well within 10 s */
    assert_int_equal(kr_queue_pop_timed(q, &p, 10 * 1000000000LL), KEYER_OK);
    assert_int_equal(I(p), 7);
    pthread_join(th, NULL);
    kr_queue_push(q, P(8));
    kr_queue_close(q);
    assert_int_equal(kr_queue_pop_timed(q, &p, 1000000LL), KEYER_OK);
    assert_int_equal(I(p), 8);
    assert_int_equal(kr_queue_pop_timed(q, &p, 1000000LL), KEYER_STATUS_END);
    kr_queue_destroy(&q);
}

typedef struct blocker {
    kr_queue *q;
    int pop; /* 1: pop, 0: push */
    keyer_status result;
    void *item;
    atomic_int done;
} blocker;

static void *block_main(void *arg)
{
    blocker *b = arg;
    b->result = b->pop ? kr_queue_pop(b->q, &b->item) : kr_queue_push(b->q, P(99));
    atomic_store(&b->done, 1);
    return NULL;
}

static void test_queue_blocks_until_room(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(1, &q, NULL), KEYER_OK);
    kr_queue_push(q, P(1));
    blocker b = {q, 0, KEYER_STATUS_INTERNAL, NULL, 0};
    pthread_t t;
    pthread_create(&t, NULL, block_main, &b);
    sleep_ms(50);
    assert_int_equal(atomic_load(&b.done), 0); /* still waiting: the queue is full */
    void *p;
    assert_int_equal(kr_queue_pop(q, &p), KEYER_OK);
    pthread_join(t, NULL);
    assert_int_equal(b.result, KEYER_OK);
    assert_int_equal(kr_queue_pop(q, &p), KEYER_OK);
    assert_int_equal(I(p), 99);
    kr_queue_stats st;
    kr_queue_stats_get(q, &st);
    assert_true(st.push_wait_ns >= 30 * 1000000LL);
    kr_queue_destroy(&q);
}

static void test_queue_cancel_wakes_everyone(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(1, &q, NULL), KEYER_OK);
    /* a consumer blocked on an empty queue and, on a second queue, a producer on a full one */
    blocker consumer = {q, 1, KEYER_STATUS_INTERNAL, NULL, 0};
    kr_queue *full = NULL;
    assert_int_equal(kr_queue_create(1, &full, NULL), KEYER_OK);
    kr_queue_push(full, P(7));
    blocker producer = {full, 0, KEYER_STATUS_INTERNAL, NULL, 0};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, block_main, &consumer);
    pthread_create(&t2, NULL, block_main, &producer);
    sleep_ms(30);
    kr_queue_cancel(q);
    kr_queue_cancel(full);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(consumer.result, KEYER_STATUS_INTERRUPTED);
    assert_int_equal(producer.result, KEYER_STATUS_INTERRUPTED);
    /* the item stays for drain */
    void *p;
    assert_int_equal(kr_queue_pop(full, &p), KEYER_STATUS_INTERRUPTED);
    assert_int_equal(kr_queue_drain(full, &p), 1);
    assert_int_equal(I(p), 7);
    assert_int_equal(kr_queue_drain(full, &p), 0);
    kr_queue_destroy(&q);
    kr_queue_destroy(&full);
}

static void test_queue_drop_oldest(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(2, &q, NULL), KEYER_OK);
    void *dropped = P(1);
    assert_int_equal(kr_queue_push_drop_oldest(q, P(1), &dropped), KEYER_OK);
    assert_null(dropped);
    assert_int_equal(kr_queue_push_drop_oldest(q, P(2), &dropped), KEYER_OK);
    assert_null(dropped);
    assert_int_equal(kr_queue_push_drop_oldest(q, P(3), &dropped), KEYER_OK);
    assert_int_equal(I(dropped), 1);
    assert_int_equal(kr_queue_push_drop_oldest(q, P(4), &dropped), KEYER_OK);
    assert_int_equal(I(dropped), 2);
    void *p;
    kr_queue_pop(q, &p);
    assert_int_equal(I(p), 3);
    kr_queue_pop(q, &p);
    assert_int_equal(I(p), 4);
    kr_queue_stats st;
    kr_queue_stats_get(q, &st);
    assert_int_equal(st.dropped, 2);
    kr_queue_close(q);
    assert_int_equal(kr_queue_push_drop_oldest(q, P(5), &dropped), KEYER_STATUS_END);
    kr_queue_destroy(&q);
}

typedef struct feeder {
    kr_queue *q;
    int count;
    int gap_ms;
} feeder;

static void *feed_main(void *arg)
{
    feeder *f = arg;
    for (int i = 0; i < f->count; i++) {
        if (f->gap_ms)
            sleep_ms(f->gap_ms);
        kr_queue_push(f->q, P(i + 1));
    }
    return NULL;
}

static void test_batch_leaves_when_full(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(16, &q, NULL), KEYER_OK);
    for (int i = 1; i <= 6; i++)
        kr_queue_push(q, P(i));
    void *items[4];
    int n = 0, full = 0;
    int64_t t0 = kr_clock_ns();
    /* a huge budget: only fullness may release the batch */
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 10LL * 1000000000, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 < 1000000000LL);
    assert_int_equal(n, 4);
    assert_int_equal(full, 1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(I(items[i]), i + 1);
    /* two left, budget 0: they leave at once, not full */
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 0, &n, &full), KEYER_OK);
    assert_int_equal(n, 2);
    assert_int_equal(full, 0);
    assert_int_equal(I(items[0]), 5);
    kr_queue_destroy(&q);
}

static void test_batch_leaves_at_deadline(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(16, &q, NULL), KEYER_OK);
    /* one item, then a slow trickle: the batch must leave ~50 ms after the first item's
     * arrival, not wait for four */
    feeder f = {q, 3, 40};
    pthread_t t;
    kr_queue_push(q, P(100));
    int64_t pushed = kr_clock_ns();
    pthread_create(&t, NULL, feed_main, &f);
    void *items[4];
    int n = 0, full = 0;
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 50 * 1000000LL, &n, &full), KEYER_OK);
    int64_t waited = kr_clock_ns() - pushed;
    assert_int_equal(full, 0);
    assert_true(n >= 1 && n <= 3);
    int first = n;
    assert_int_equal(I(items[0]), 100);
    assert_true(waited >= 45 * 1000000LL);  /* waited its budget */
    assert_true(waited < 400 * 1000000LL);  /* and not much longer */
    pthread_join(t, NULL);
    /* the rest: an item that already waited longer than the budget leaves at once */
    sleep_ms(60);
    int64_t t0 = kr_clock_ns();
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 50 * 1000000LL, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 < 20 * 1000000LL);
    assert_int_equal(n, 4 - first); /* everything that was left */
    assert_int_equal(full, 0);
    kr_queue_destroy(&q);
}

static void test_batch_close_and_cancel(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(8, &q, NULL), KEYER_OK);
    kr_queue_push(q, P(1));
    kr_queue_close(q);
    void *items[4];
    int n = 0, full = 0;
    int64_t t0 = kr_clock_ns();
    /* closed: what is there leaves without waiting for the deadline */
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 5LL * 1000000000, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 < 1000000000LL);
    assert_int_equal(n, 1);
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 0, &n, &full), KEYER_STATUS_END);
    assert_int_equal(n, 0);
    kr_queue_destroy(&q);
    assert_int_equal(kr_queue_create(8, &q, NULL), KEYER_OK);
    kr_queue_cancel(q);
    assert_int_equal(kr_queue_pop_batch(q, items, 4, 0, &n, &full), KEYER_STATUS_INTERRUPTED);
    kr_queue_destroy(&q);
}

/* A batched producer's flush: the consumer stops waiting for a fuller batch once everything
 * inside was pushed before the flush, and only then. */
typedef struct flusher {
    kr_queue *q;
    int delay_ms;
} flusher;

static void *flush_main(void *arg)
{
    flusher *f = arg;
    sleep_ms(f->delay_ms);
    kr_queue_push(f->q, P(7));
    kr_queue_push(f->q, P(8));
    kr_queue_flush(f->q);
    return NULL;
}

static void test_batch_flush(void **state)
{
    (void)state;
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(16, &q, NULL), KEYER_OK);
    kr_queue_flush(NULL); /* accepted */
    void *items[8];
    int n = 0, full = 0;
    kr_queue_stats st;
    /* three items, flushed: they leave at once although the budget is ten seconds */
    for (int i = 1; i <= 3; i++)
        kr_queue_push(q, P(i));
    kr_queue_flush(q);
    int64_t t0 = kr_clock_ns();
    assert_int_equal(kr_queue_pop_batch(q, items, 8, 10LL * 1000000000, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 < 1000000000LL);
    assert_int_equal(n, 3);
    assert_int_equal(full, 0);
    assert_int_equal(I(items[0]), 1);
    assert_int_equal(I(items[2]), 3);
    kr_queue_stats_get(q, &st);
    assert_int_equal(st.flushed_pops, 1);
    /* pushed after the last flush (the producer's next batch under way): they wait for their
     * deadline as without flushes */
    kr_queue_push(q, P(4));
    kr_queue_push(q, P(5));
    t0 = kr_clock_ns();
    assert_int_equal(kr_queue_pop_batch(q, items, 8, 50 * 1000000LL, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 >= 45 * 1000000LL);
    assert_int_equal(n, 2);
    assert_int_equal(full, 0);
    /* a flush covers the items inside then, not a later one: the later one waits, and the
     * earlier leave with it at the deadline */
    kr_queue_push(q, P(5));
    kr_queue_flush(q);
    kr_queue_push(q, P(6));
    t0 = kr_clock_ns();
    assert_int_equal(kr_queue_pop_batch(q, items, 8, 50 * 1000000LL, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 >= 45 * 1000000LL);
    assert_int_equal(n, 2);
    kr_queue_stats_get(q, &st);
    assert_int_equal(st.flushed_pops, 1);
    /* a consumer already waiting is woken by the flush (ten-second budget) */
    kr_queue_push(q, P(6));
    flusher f = {q, 20};
    pthread_t t;
    pthread_create(&t, NULL, flush_main, &f);
    t0 = kr_clock_ns();
    assert_int_equal(kr_queue_pop_batch(q, items, 8, 10LL * 1000000000, &n, &full), KEYER_OK);
    assert_true(kr_clock_ns() - t0 < 1000000000LL);
    pthread_join(t, NULL);
    /* it waited through the pushes (not covered yet) and left at the flush, with all three */
    assert_int_equal(n, 3);
    assert_int_equal(I(items[0]), 6);
    assert_int_equal(I(items[2]), 8);
    /* fullness still comes first */
    for (int i = 0; i < 10; i++)
        kr_queue_push(q, P(i));
    kr_queue_flush(q);
    assert_int_equal(kr_queue_pop_batch(q, items, 8, 10LL * 1000000000, &n, &full), KEYER_OK);
    assert_int_equal(n, 8);
    assert_int_equal(full, 1);
    assert_int_equal(kr_queue_pop_batch(q, items, 8, 10LL * 1000000000, &n, &full), KEYER_OK);
    assert_int_equal(n, 2);
    assert_int_equal(full, 0);
    kr_queue_destroy(&q);
}

/* Many producers and consumers: every item arrives exactly once. */
typedef struct mpmc {
    kr_queue *q;
    int base, count;
    atomic_int *seen;
    int batch;
} mpmc;

static void *mp_producer(void *arg)
{
    mpmc *m = arg;
    for (int i = 0; i < m->count; i++)
        assert_int_equal(kr_queue_push(m->q, P(m->base + i + 1)), KEYER_OK);
    return NULL;
}

static void *mp_consumer(void *arg)
{
    mpmc *m = arg;
    void *items[8];
    for (;;) {
        int n = 0, full = 0;
        keyer_status st = m->batch ? kr_queue_pop_batch(m->q, items, 8, 100000, &n, &full)
                                   : kr_queue_pop(m->q, items);
        if (st == KEYER_STATUS_END)
            break;
        assert_int_equal(st, KEYER_OK);
        if (!m->batch)
            n = 1;
        for (int i = 0; i < n; i++)
            atomic_fetch_add(&m->seen[I(items[i]) - 1], 1);
    }
    return NULL;
}

static void test_queue_many_threads(void **state)
{
    (void)state;
    enum { PRODUCERS = 4, CONSUMERS = 3, EACH = 2000 };
    kr_queue *q = NULL;
    assert_int_equal(kr_queue_create(5, &q, NULL), KEYER_OK);
    atomic_int *seen = calloc(PRODUCERS * EACH, sizeof(*seen));
    assert_non_null(seen);
    mpmc prod[PRODUCERS], cons[CONSUMERS];
    pthread_t tp[PRODUCERS], tc[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) {
        cons[i] = (mpmc){q, 0, 0, seen, i % 2};
        pthread_create(&tc[i], NULL, mp_consumer, &cons[i]);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        prod[i] = (mpmc){q, i * EACH, EACH, seen, 0};
        pthread_create(&tp[i], NULL, mp_producer, &prod[i]);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(tp[i], NULL);
    kr_queue_close(q);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_join(tc[i], NULL);
    for (int i = 0; i < PRODUCERS * EACH; i++)
        assert_int_equal(atomic_load(&seen[i]), 1);
    kr_queue_stats st;
    kr_queue_stats_get(q, &st);
    assert_int_equal(st.pushed, PRODUCERS * EACH);
    assert_true(st.max_depth <= 5);
    assert_true(st.mean_depth >= 0.0 && st.mean_depth <= 5.0);
    free(seen);
    kr_queue_destroy(&q);
}

/* ---- reorder ---------------------------------------------------------------------------------- */

static void test_reorder_in_order(void **state)
{
    (void)state;
    kr_reorder *r = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_reorder_create(0, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_reorder_create(4, &r, &err), KEYER_OK);
    void *p;
    assert_int_equal(kr_reorder_take(r, &p, 0), KEYER_STATUS_AGAIN);
    assert_int_equal(kr_reorder_put(r, 2, P(12), &err), KEYER_OK);
    assert_int_equal(kr_reorder_put(r, 1, P(11), &err), KEYER_OK);
    assert_int_equal(kr_reorder_take(r, &p, 0), KEYER_STATUS_AGAIN); /* 0 missing */
    assert_int_equal(kr_reorder_held(r), 2);
    assert_int_equal(kr_reorder_put(r, 0, P(10), &err), KEYER_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kr_reorder_take(r, &p, 0), KEYER_OK);
        assert_int_equal(I(p), 10 + i);
    }
    assert_int_equal(kr_reorder_next(r), 3);
    /* outside the window, twice, or already taken: internal errors, nothing stored */
    assert_int_equal(kr_reorder_put(r, 7, P(1), &err), KEYER_STATUS_INTERNAL);
    assert_int_equal(kr_reorder_put(r, 1, P(1), &err), KEYER_STATUS_INTERNAL);
    assert_int_equal(kr_reorder_put(r, 3, P(13), &err), KEYER_OK);
    assert_int_equal(kr_reorder_put(r, 3, P(13), &err), KEYER_STATUS_INTERNAL);
    kr_reorder_finish(r, 4);
    assert_int_equal(kr_reorder_take(r, &p, 1), KEYER_OK);
    assert_int_equal(I(p), 13);
    assert_int_equal(kr_reorder_take(r, &p, 1), KEYER_STATUS_END);
    assert_int_equal(kr_reorder_put(r, 4, P(1), &err), KEYER_STATUS_INTERNAL); /* past the end */
    kr_reorder_destroy(&r);
    assert_null(r);
    kr_reorder_destroy(NULL);
}

typedef struct shuffler {
    kr_reorder *r;
    int count;
    atomic_int taken;   /* items the consumer has taken */
    atomic_int failed;  /* a put failed (checked by the main thread: no cmocka here) */
} shuffler;

static void *shuffle_main(void *arg)
{
    shuffler *s = arg;
    /* put in blocks of 4 reversed: 3 2 1 0 7 6 5 4 ...; a block goes in once the consumer has
     * taken the previous one (the window holds 4: the pipeline's bounded queues guarantee the
     * same, and a put beyond the window is an error by design) */
    for (int b = 0; b < s->count; b += 4) {
        while (atomic_load(&s->taken) < b)
            sleep_ms(1);
        for (int k = 3; k >= 0; k--)
            if (b + k < s->count && kr_reorder_put(s->r, b + k, P(b + k + 1), NULL) != KEYER_OK)
                atomic_store(&s->failed, 1);
        sleep_ms(1);
    }
    kr_reorder_finish(s->r, s->count);
    return NULL;
}

static void test_reorder_threads_and_timeout(void **state)
{
    (void)state;
    kr_reorder *r = NULL;
    assert_int_equal(kr_reorder_create(4, &r, NULL), KEYER_OK);
    void *p;
    int64_t t0 = kr_clock_ns();
    assert_int_equal(kr_reorder_take_timed(r, &p, 30 * 1000000LL), KEYER_STATUS_AGAIN);
    assert_true(kr_clock_ns() - t0 >= 25 * 1000000LL);
    shuffler s = {r, 102, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, shuffle_main, &s);
    int got = 0;
    keyer_status st;
    while ((st = kr_reorder_take(r, &p, 1)) == KEYER_OK) {
        assert_int_equal(I(p), got + 1);
        got++;
        atomic_store(&s.taken, got);
    }
    assert_int_equal(atomic_load(&s.failed), 0);
    assert_int_equal(st, KEYER_STATUS_END);
    assert_int_equal(got, 102);
    pthread_join(t, NULL);
    kr_reorder_cancel(r);
    assert_int_equal(kr_reorder_take(r, &p, 1), KEYER_STATUS_INTERRUPTED);
    kr_reorder_destroy(&r);
}

static void test_reorder_drain(void **state)
{
    (void)state;
    kr_reorder *r = NULL;
    assert_int_equal(kr_reorder_create(8, &r, NULL), KEYER_OK);
    kr_reorder_put(r, 3, P(3), NULL);
    kr_reorder_put(r, 5, P(5), NULL);
    void *p;
    int sum = 0, n = 0;
    while (kr_reorder_drain(r, &p)) {
        sum += I(p);
        n++;
    }
    assert_int_equal(n, 2);
    assert_int_equal(sum, 8);
    assert_int_equal(kr_reorder_held(r), 0);
    kr_reorder_destroy(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_fifo_and_bounds),
        cmocka_unit_test(test_queue_close_drains),
        cmocka_unit_test(test_queue_pop_timed),
        cmocka_unit_test(test_queue_blocks_until_room),
        cmocka_unit_test(test_queue_cancel_wakes_everyone),
        cmocka_unit_test(test_queue_drop_oldest),
        cmocka_unit_test(test_batch_leaves_when_full),
        cmocka_unit_test(test_batch_leaves_at_deadline),
        cmocka_unit_test(test_batch_close_and_cancel),
        cmocka_unit_test(test_batch_flush),
        cmocka_unit_test(test_queue_many_threads),
        cmocka_unit_test(test_reorder_in_order),
        cmocka_unit_test(test_reorder_threads_and_timeout),
        cmocka_unit_test(test_reorder_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
