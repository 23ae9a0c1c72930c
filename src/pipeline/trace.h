/*
 * Chrome / Perfetto trace of the pipeline (internal, prefix kr_).
 *
 * Events ("complete" events: a start and a duration on one thread track) go into an array
 * allocated once at create; recording is one atomic increment and a store, so workers
 * record without locks. When the array is full further events are counted and dropped.
 * kr_trace_write() writes the JSON Trace Event Format that chrome://tracing and
 * ui.perfetto.dev open: one track per worker thread named after its stage, each event named
 * after the stage with the stream and frame numbers (or the batch size) in its args.
 *
 * Thread safety: kr_trace_add and kr_trace_thread may be called from any thread;
 * kr_trace_write after the workers stopped.
 */
#ifndef KEYER_PIPELINE_TRACE_H
#define KEYER_PIPELINE_TRACE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "keyer/status.h"

/** One event. */
typedef struct kr_trace_event {
    int64_t start_ns;
    int64_t end_ns;
    const char *name; /* static: the stage */
    int16_t track;    /* kr_trace_thread id */
    int16_t stream;   /* -1: none */
    int32_t count;    /* frames in a batch (infer), else 1 */
    int64_t frame;    /* frame number in its stream; -1: none */
} kr_trace_event;

#define KR_TRACE_MAX_TRACKS 512

typedef struct kr_trace {
    kr_trace_event *events;
    int64_t capacity;
    atomic_llong next;       /* index of the next event to fill */
    atomic_int tracks;       /* tracks named so far */
    const char *track_names[KR_TRACE_MAX_TRACKS];
    int track_index[KR_TRACE_MAX_TRACKS]; /* n-th worker of its stage */
    int64_t origin_ns;       /* time 0 of the trace */
} kr_trace;

/**
 * Creates a trace holding up to @p capacity (1..2^26) events, time 0 now.
 * Errors: INVALID_ARGUMENT, OUT_OF_MEMORY.
 */
keyer_status kr_trace_create(int64_t capacity, kr_trace **out, keyer_error *err);

/** Frees it; accepts NULL; sets *t NULL. */
void kr_trace_destroy(kr_trace **t);

/**
 * Registers a worker thread track named @p stage (static string) and returns its id, or
 * -1 when there are too many tracks (its events are then not recorded). NULL trace: -1.
 */
int kr_trace_thread(kr_trace *t, const char *stage, int index);

/**
 * Names the calling thread "kr-" @p stage (cut to the 15 characters Linux keeps) for
 * profilers and /proc/PID/task/TID/comm (bench/many-streams.sh groups the threads' CPU time
 * by it). Elsewhere than Linux it does nothing; so does a failure.
 */
void kr_thread_name(const char *stage);

/** Records one event; does nothing for a NULL trace or a track < 0. */
void kr_trace_add(kr_trace *t, int track, const char *name, int stream, int64_t frame, int count,
                  int64_t start_ns, int64_t end_ns);

/** Events recorded, and events dropped because the array was full. */
int64_t kr_trace_recorded(const kr_trace *t);
int64_t kr_trace_dropped(const kr_trace *t);

/** Writes the trace as JSON to @p f. Errors: IO (a write failed). */
keyer_status kr_trace_write(const kr_trace *t, FILE *f, keyer_error *err);

#endif
