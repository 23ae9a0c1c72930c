/*
 * A stream's output passed from one engine to another (internal, prefix kr_): GPU-to-GPU
 * failover (engines.c). When a GPU fails, each of its file streams stops reading; the frames
 * it read are finished where they are (on the CPU), and the rest of the input is read again
 * from the next frame by a *continuation* stream on a healthy GPU. Both streams hold one
 * handoff: the first stream's sink, once it wrote its last frame, gives its writer (NULL
 * when it has no output) to the continuation's sink, which waits for it before writing or
 * calling back anything, so the output and the callbacks see the frames in order.
 *
 * Thread-safety: give and take are called from the two sinks' threads; the owner (the
 * session's group) destroys the handoff after both streams finished.
 */
#ifndef KEYER_PIPELINE_HANDOFF_H
#define KEYER_PIPELINE_HANDOFF_H

#include <stdatomic.h>
#include <stdint.h>

#include "keyer/io.h"

typedef struct kr_handoff kr_handoff;

/** A handoff waiting for its first stream. Errors: OUT_OF_MEMORY. */
keyer_status kr_handoff_create(kr_handoff **out, keyer_error *err);

/**
 * The first stream is done: hands over @p writer (may be NULL: no output; ownership passes
 * to the taker) with @p ok 1, or with @p ok 0 that stream failed and the continuation must
 * not write (the writer stays with the giver). Wakes the taker.
 */
void kr_handoff_give(kr_handoff *h, keyer_writer *writer, int ok);

/**
 * Waits (in steps of 50 ms, returning -1 when *@p cancel becomes non-zero) until the first
 * stream gave; then *@p writer receives the writer (may be NULL) and the result is 1, or 0
 * when the first stream failed (nothing handed over).
 */
int kr_handoff_take(kr_handoff *h, const atomic_int *cancel, keyer_writer **writer);

/** Frees the handoff and a writer given but never taken (closed first). NULL accepted; sets
 *  *@p h to NULL. */
void kr_handoff_destroy(kr_handoff **h);

#endif
