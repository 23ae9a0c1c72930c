/* Chrome Trace Event Format writer over a preallocated event array. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "pipeline/clock.h"

void kr_thread_name(const char *stage)
{
#ifdef __linux__
    char name[16];
    snprintf(name, sizeof(name), "kr-%s", stage ? stage : "");
    (void)prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
#else
    (void)stage;
#endif
}

keyer_status kr_trace_create(int64_t capacity, kr_trace **out, keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "trace: out is NULL");
    *out = NULL;
    if (capacity < 1 || capacity > ((int64_t)1 << 26))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "trace: capacity %lld is outside 1..2^26", (long long)capacity);
    kr_trace *t = calloc(1, sizeof(*t));
    if (!t)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "trace: out of memory");
    t->events = malloc((size_t)capacity * sizeof(*t->events));
    if (!t->events) {
        free(t);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "trace: cannot allocate %lld events", (long long)capacity);
    }
    t->capacity = capacity;
    atomic_init(&t->next, 0);
    atomic_init(&t->tracks, 0);
    t->origin_ns = kr_clock_ns();
    *out = t;
    return KEYER_OK;
}

void kr_trace_destroy(kr_trace **t)
{
    if (!t || !*t)
        return;
    free((*t)->events);
    free(*t);
    *t = NULL;
}

int kr_trace_thread(kr_trace *t, const char *stage, int index)
{
    if (!t)
        return -1;
    int id = atomic_fetch_add(&t->tracks, 1);
    if (id >= KR_TRACE_MAX_TRACKS)
        return -1;
    t->track_names[id] = stage;
    t->track_index[id] = index;
    return id;
}

void kr_trace_add(kr_trace *t, int track, const char *name, int stream, int64_t frame, int count,
                  int64_t start_ns, int64_t end_ns)
{
    if (!t || track < 0)
        return;
    long long i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
    if (i >= t->capacity)
        return;
    kr_trace_event *e = &t->events[i];
    e->start_ns = start_ns;
    e->end_ns = end_ns;
    e->name = name;
    e->track = (int16_t)track;
    e->stream = (int16_t)stream;
    e->count = count;
    e->frame = frame;
}

int64_t kr_trace_recorded(const kr_trace *t)
{
    long long n = atomic_load((atomic_llong *)&t->next);
    return n < t->capacity ? n : t->capacity;
}

int64_t kr_trace_dropped(const kr_trace *t)
{
    long long n = atomic_load((atomic_llong *)&t->next);
    return n > t->capacity ? n - t->capacity : 0;
}

keyer_status kr_trace_write(const kr_trace *t, FILE *f, keyer_error *err)
{
    int tracks = atomic_load((atomic_int *)&t->tracks);
    if (tracks > KR_TRACE_MAX_TRACKS)
        tracks = KR_TRACE_MAX_TRACKS;
    int64_t n = kr_trace_recorded(t);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"keyer\","
               "\"dropped_events\":%lld},\"traceEvents\":[\n",
            (long long)kr_trace_dropped(t));
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
               "\"args\":{\"name\":\"keyer pipeline\"}}");
    for (int i = 0; i < tracks; i++) {
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s %d\"}}",
                i + 1, t->track_names[i] ? t->track_names[i] : "?", t->track_index[i]);
        fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"sort_index\":%d}}",
                i + 1, i + 1);
    }
    for (int64_t i = 0; i < n; i++) {
        const kr_trace_event *e = &t->events[i];
        double ts = (double)(e->start_ns - t->origin_ns) / 1000.0;
        double dur = (double)(e->end_ns - e->start_ns) / 1000.0;
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"stage\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
                   "\"ts\":%.3f,\"dur\":%.3f,\"args\":{",
                e->name ? e->name : "?", e->track + 1, ts, dur < 0 ? 0.0 : dur);
        int comma = 0;
        if (e->stream >= 0) {
            fprintf(f, "\"stream\":%d", e->stream);
            comma = 1;
        }
        if (e->frame >= 0) {
            fprintf(f, "%s\"frame\":%lld", comma ? "," : "", (long long)e->frame);
            comma = 1;
        }
        fprintf(f, "%s\"frames\":%d}}", comma ? "," : "", e->count);
    }
    fprintf(f, "\n]}\n");
    if (ferror(f))
        return keyer_error_set(err, KEYER_STATUS_IO, "trace: writing the trace failed");
    return KEYER_OK;
}
