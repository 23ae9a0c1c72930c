/*
 * Sessions over several GPUs: the group of engines (internal to engines.c, which owns it, and
 * failover.c, which moves a failed GPU's streams within it). See engines.c.
 */
#ifndef KEYER_PIPELINE_ENGINES_GROUP_H
#define KEYER_PIPELINE_ENGINES_GROUP_H

#include <pthread.h>
#include <stdatomic.h>

#include "pipeline/engines.h"
#include "pipeline/handoff.h"

#define MAX_ENGINES KR_MAX_ENGINES

struct kr_split_gpus;

typedef struct kr_engines kr_engines;

/* A session stream in parts: part 0 where it was placed, one more each time a GPU it ran on
 * failed and its rest moved to another (each engine fails once: at most one part per
 * engine). n is written last, under failover_lock; readers without the lock see whole parts. */
typedef struct stream_parts {
    atomic_int n;
    int engine[MAX_ENGINES], local[MAX_ENGINES];
    kr_handoff *handoff[MAX_ENGINES]; /* [p]: part p-1's output to part p (NULL: none) */
    int recv;                         /* pushed and pulled: the part receive_frame reads */
    int stuck;                        /* pushed: no GPU to move to; it stays on the CPU */
    double load;
    keyer_stream_params push;         /* pushed: as opened (output: push_output) */
    char *push_output;
} stream_parts;

/* What an engine's callbacks get: the group and the engine's index. */
typedef struct engine_slot {
    kr_engines *group;
    int index;
} engine_slot;

struct kr_engines {
    int count;                           /* engines, one per GPU, in ordinal order */
    keyer_session *engine[MAX_ENGINES];
    int ordinal[MAX_ENGINES];
    double load[MAX_ENGINES];            /* pixels per second placed on each */
    engine_slot slot[MAX_ENGINES];
    int max_streams;
    int *where;                          /* session stream id -> engine index */
    int *local;                          /* session stream id -> the engine's stream id */
    int *global;                         /* engine e's id i -> session id: [e * max + i] */
    atomic_int streams;
    int run_called, model_fixed;
    keyer_session_params user;           /* the caller's callbacks */
    struct kr_split_gpus *split;         /* split_gpus: the one input, split over the engines */
    pthread_mutex_t progress_lock;
    keyer_session_progress progress[MAX_ENGINES];
    /* GPU-to-GPU failover: per session stream id, its parts */
    pthread_mutex_t failover_lock;
    stream_parts *parts;
    int moved[MAX_ENGINES];              /* streams each engine gave away */
    atomic_int working;                  /* engines still working in the run (session.h) */
};

/* Session stream id of engine @p sl's stream @p local. */
static inline int kr_group_global_id(const engine_slot *sl, int local)
{
    return sl->group->global[(size_t)sl->index * (size_t)sl->group->max_streams + (size_t)local];
}

/**
 * kr_stream_env::failover of every engine of a group (@p opaque: its engine_slot): stream
 * @p st (a file or a live input, a first part or a continuation) of the engine whose GPU
 * failed continues on the least loaded healthy engine, from the frame after @p last_pts (a
 * live input: opened again, read from where it is). Runs on that stream's reader thread.
 * Returns 1 when it moved (a continuation there), 0 when it goes on here, on the CPU.
 */
int kr_group_failover(void *opaque, kr_stream *st, int64_t last_pts, int64_t frames);

/**
 * A pushed stream @p id whose current part's engine failed moves to the least loaded healthy
 * engine (started or not: opening a stream starts it): the frames pushed from now on go
 * there; the old part finishes what it holds (on the CPU) and gives its output (a file:
 * handed over; pulled frames: received before the new part's). Where no engine is left the
 * stream stays (stuck: it is not tried again). Called by keyer_session_send_frame.
 */
void kr_group_move_pushed(kr_engines *g, int id);

#endif
