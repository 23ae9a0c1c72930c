/*
 * In-order reassembly of one stream's frames (internal, prefix kr_).
 *
 * Workers finish frames in any order and put them here under their sequence number
 * (0, 1, 2, ... per stream); the consumer takes them strictly in sequence. The window
 * holds @p capacity numbers: a frame may be put only while seq < next + capacity, which the
 * pipeline guarantees because a stream never has more frames in flight than its pool holds.
 * kr_reorder_finish() tells how many frames the stream will have in total, so the consumer
 * gets END after the last one. Allocation happens in create only.
 *
 * Thread safety: every function may be called from any thread, except destroy.
 */
#ifndef KEYER_PIPELINE_REORDER_H
#define KEYER_PIPELINE_REORDER_H

#include <stdint.h>

#include "keyer/status.h"

typedef struct kr_reorder kr_reorder;

/** Creates a window of @p capacity (1..65536). Errors: INVALID_ARGUMENT, OUT_OF_MEMORY, INTERNAL. */
keyer_status kr_reorder_create(int capacity, kr_reorder **out, keyer_error *err);

/** Frees it (items inside are not touched); accepts NULL; sets *r NULL. */
void kr_reorder_destroy(kr_reorder **r);

/**
 * Stores @p item as number @p seq. Errors: INTERNAL when seq was already taken, is already
 * present, lies beyond the window, or is at or past the total given to kr_reorder_finish.
 */
keyer_status kr_reorder_put(kr_reorder *r, int64_t seq, void *item, keyer_error *err);

/**
 * Takes the next item in sequence into *@p item. With @p wait, blocks until it is there.
 * Returns OK, AGAIN (not there and !wait), END (every item up to the finished total was
 * taken) or INTERRUPTED (cancelled).
 */
keyer_status kr_reorder_take(kr_reorder *r, void **item, int wait);

/**
 * As kr_reorder_take with a wait of at most @p timeout_ns: AGAIN when it ran out.
 */
keyer_status kr_reorder_take_timed(kr_reorder *r, void **item, int64_t timeout_ns);

/** The stream has @p total items in all (numbers 0..total-1). */
void kr_reorder_finish(kr_reorder *r, int64_t total);

/** Wakes the consumer: takes return INTERRUPTED from now on. */
void kr_reorder_cancel(kr_reorder *r);

/** Removes any one item still inside (cleanup). Returns 1 if one was removed. */
int kr_reorder_drain(kr_reorder *r, void **item);

/** The next sequence number the consumer will take. */
int64_t kr_reorder_next(kr_reorder *r);

/** Items inside, waiting for an earlier number. */
int kr_reorder_held(kr_reorder *r);

#endif
