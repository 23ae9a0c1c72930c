/*
 * A bounded blocking FIFO of pointers between pipeline stages (internal, prefix kr_).
 *
 * The ring is allocated once by kr_queue_create; pushing and popping allocate nothing.
 * Every item remembers when it was pushed, so a consumer can form batches with a latency
 * deadline (kr_queue_pop_batch). Two ways to stop:
 *  - close: producers are done. Pushes fail with END; consumers drain what is left, then get
 *    END. This is how end of input and a graceful stop (SIGINT) travel down the pipeline.
 *  - cancel: stop now. Every blocked and later push/pop returns INTERRUPTED; the items still
 *    inside stay there for kr_queue_drain to hand back to their owner.
 * The queue records its depth over time (time-weighted mean, maximum) and how long producers
 * and consumers waited, for the pipeline's statistics.
 *
 * Thread safety: every function may be called from any thread, except destroy.
 */
#ifndef KEYER_PIPELINE_QUEUE_H
#define KEYER_PIPELINE_QUEUE_H

#include <stdint.h>

#include "keyer/status.h"

typedef struct kr_queue kr_queue;

/** Counters of a queue (see kr_queue_stats_get). */
typedef struct kr_queue_stats {
    int capacity;
    int depth;             /* items inside now */
    int max_depth;         /* most items inside at once */
    double mean_depth;     /* time-weighted mean depth since creation */
    int64_t pushed;        /* items accepted */
    int64_t popped;        /* items taken by pops (not by drain) */
    int64_t dropped;       /* items removed by kr_queue_push_drop_oldest */
    int64_t push_wait_ns;  /* time producers spent blocked on a full queue */
    int64_t pop_wait_ns;   /* time consumers spent blocked on an empty queue */
    int64_t flushed_pops;  /* kr_queue_pop_batch batches that kr_queue_flush released before
                            * they were full or their deadline came */
} kr_queue_stats;

/**
 * Creates a queue holding at most @p capacity (1..65536) items.
 * Errors: INVALID_ARGUMENT, OUT_OF_MEMORY, INTERNAL (pthread objects).
 */
keyer_status kr_queue_create(int capacity, kr_queue **out, keyer_error *err);

/** Frees the queue (items still inside are not touched); accepts NULL; sets *q NULL. */
void kr_queue_destroy(kr_queue **q);

/**
 * Appends @p item, waiting while the queue is full. Returns KEYER_OK, KEYER_STATUS_END when
 * the queue is closed (the item stays the caller's) or KEYER_STATUS_INTERRUPTED when it is
 * cancelled (likewise).
 */
keyer_status kr_queue_push(kr_queue *q, void *item);

/** As kr_queue_push but never waits: KEYER_STATUS_AGAIN when full. */
keyer_status kr_queue_try_push(kr_queue *q, void *item);

/**
 * Appends @p item without waiting; when the queue is full its oldest item is removed first
 * and returned in *@p dropped (else *dropped is NULL), counted as dropped. For live sources
 * that must not stall. Returns OK, END (closed) or INTERRUPTED (cancelled).
 */
keyer_status kr_queue_push_drop_oldest(kr_queue *q, void *item, void **dropped);

/**
 * Removes the oldest item into *@p item, waiting while the queue is empty and open.
 * Returns KEYER_OK, KEYER_STATUS_END (closed and empty) or KEYER_STATUS_INTERRUPTED.
 */
keyer_status kr_queue_pop(kr_queue *q, void **item);

/** As kr_queue_pop but never waits: KEYER_STATUS_AGAIN when empty and open. */
keyer_status kr_queue_try_pop(kr_queue *q, void **item);

/** As kr_queue_pop but waits at most @p timeout_ns (<= 0: not at all): KEYER_STATUS_AGAIN
 *  when the queue is still empty and open then. */
keyer_status kr_queue_pop_timed(kr_queue *q, void **item, int64_t timeout_ns);

/**
 * Forms a batch: waits for a first item (like kr_queue_pop), then keeps waiting until
 * @p max items are inside, or the oldest of them has been inside for @p budget_ns
 * nanoseconds, or the queue is closed; then removes up to @p max items (oldest first) into
 * @p items and sets *@p count (>= 1). budget_ns <= 0 takes what is there at once.
 * It also stops waiting when every item inside was pushed before the producer's last
 * kr_queue_flush (nothing more is coming for now).
 * *@p full is set to 1 when the batch left because it was full (else the deadline, a flush or
 * the close released it). Returns OK, END (closed and empty) or INTERRUPTED.
 */
keyer_status kr_queue_pop_batch(kr_queue *q, void **items, int max, int64_t budget_ns,
                                int *count, int *full);

/**
 * The producer has pushed everything it has for now (a batched stage after handing on its
 * batch's items): a consumer in kr_queue_pop_batch stops waiting for a fuller batch and takes
 * what is inside, unless items were pushed after the flush (the producer's next batch is
 * under way: their deadline or a later flush releases them). Without flushes (per-stream
 * producers) pop_batch waits as before. Accepts NULL.
 */
void kr_queue_flush(kr_queue *q);

/** No more pushes: producers get END, consumers drain then get END. Idempotent. */
void kr_queue_close(kr_queue *q);

/** Stops everything: blocked and later push/pop return INTERRUPTED. Idempotent. */
void kr_queue_cancel(kr_queue *q);

/** Removes the oldest item whatever the state (for cleanup). Returns 1 if one was removed. */
int kr_queue_drain(kr_queue *q, void **item);

/** Items inside now. */
int kr_queue_size(kr_queue *q);

/** Copies the queue's counters into @p out. */
void kr_queue_stats_get(kr_queue *q, kr_queue_stats *out);

#endif
