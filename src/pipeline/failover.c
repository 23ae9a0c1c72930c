/* GPU-to-GPU failover within a group of engines (engines_group.h): a failed GPU's file, live
 * and pushed streams continue on another engine. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "pipeline/clock.h"
#include "pipeline/engines_group.h"
#include "pipeline/placement.h"

/* ---- GPU-to-GPU failover --------------------------------------------------------------------- */

/* Healthy engines to move a stream of engine @p k to: not @p k, started (@p need_started),
 * GPU not failed. */
static void healthy_engines(const kr_engines *g, int k, int need_started, int *healthy)
{
    for (int e = 0; e < g->count; e++)
        healthy[e] = e != k && (!need_started || g->engine[e]->started) &&
                     !atomic_load(&g->engine[e]->gpu_failed);
}

/* Records part @p p of session stream @p id: engine @p j, its id there @p local, the handoff
 * from the part before; moves the stream's load from engine @p k to @p j. Under
 * failover_lock. */
static void add_part(kr_engines *g, int id, int k, int j, int local, kr_handoff *h)
{
    stream_parts *sp = &g->parts[id];
    int p = atomic_load(&sp->n);
    g->global[(size_t)j * (size_t)g->max_streams + (size_t)local] = id;
    sp->engine[p] = j;
    sp->local[p] = local;
    sp->handoff[p] = h;
    g->load[j] += sp->load;
    g->load[k] -= sp->load;
    g->moved[k]++;
    atomic_store(&sp->n, p + 1); /* last: the reports read the parts without the lock */
}

/* kr_stream_env::failover of every engine: stream @p st (a file or a live input, first part
 * or a continuation that moved here before) of the engine whose GPU failed continues on the
 * least loaded healthy engine, from the frame after @p last_pts (a live input: reopened, from
 * where it is). Runs on that stream's reader thread. */
int kr_group_failover(void *opaque, kr_stream *st, int64_t last_pts, int64_t frames)
{
    const engine_slot *sl = opaque;
    kr_engines *g = sl->group;
    int k = sl->index;
    if (!st->live && frames > 0 && last_pts == INT64_MIN)
        return 0; /* without pts the place is unknown */
    pthread_mutex_lock(&g->failover_lock);
    int id = kr_group_global_id(sl, st->id);
    stream_parts *sp = &g->parts[id];
    int healthy[MAX_ENGINES];
    healthy_engines(g, k, 1, healthy);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = st->input;
    fp.output = st->output;
    fp.reader = st->reader_params;
    fp.writer = st->writer_params;
    fp.copy_streams = st->copy_streams;
    fp.live = st->live;
    kr_continuation c = {NULL, frames > 0 ? last_pts + 1 : st->resume_pts,
                         st->seq_base + frames, kr_clock_ns(), INT64_MIN};
    if (st->live) {
        /* the end of the last frame read, in the stream's time base */
        int64_t dur = st->frame_rate.num > 0 && st->time_base.num > 0
                          ? (int64_t)((double)st->frame_rate.den * st->time_base.den /
                                          ((double)st->frame_rate.num * st->time_base.num) +
                                      0.5)
                          : 1;
        c.switch_pts = frames > 0 && last_pts != INT64_MIN ? last_pts + (dur > 0 ? dur : 1)
                       : st->continuation ? st->switch_pts
                                          : INT64_MIN;
    }
    int moved = 0;
    for (int j; !moved && atomic_load(&sp->n) < MAX_ENGINES &&
                (j = kr_place_failover(g->load, healthy, g->count)) >= 0;) {
        healthy[j] = 0;
        keyer_error e = {0};
        int local = -1;
        if (kr_handoff_create(&c.handoff, &e) ||
            kr_engine_add_continuation(g->engine[j], &fp, &c, &local, &e)) {
            kr_handoff_destroy(&c.handoff);
            keyer_log(g->engine[k]->logger, KEYER_LOG_WARNING,
                      "stream %d (%s): cannot move to %s: %s", id, st->input,
                      g->engine[j]->device_name, e.message);
            continue;
        }
        st->handoff_out = c.handoff;
        add_part(g, id, k, j, local, c.handoff);
        moved = 1;
        kr_stage_warn(&g->engine[k]->ctx,
                      "stream %d (%s): %s failed; the stream moves to %s from frame %lld (the "
                      "frames before it finish here, on the CPU where the GPU no longer can)%s",
                      id, st->input, g->engine[k]->device_name, g->engine[j]->device_name,
                      (long long)c.seq_base,
                      st->live ? "; the live input is opened again there" : "");
    }
    pthread_mutex_unlock(&g->failover_lock);
    return moved;
}

/* A pushed stream whose current part's engine failed moves to the least loaded healthy engine
 * (started or not: opening a stream starts it): the frames pushed from now on go there, the
 * old part finishes what it holds (on the CPU) and its output (a file: handed over; pulled
 * frames: received before the new part's). Called by keyer_session_send_frame. */
void kr_group_move_pushed(kr_engines *g, int id)
{
    pthread_mutex_lock(&g->failover_lock);
    stream_parts *sp = &g->parts[id];
    int p = atomic_load(&sp->n) - 1;
    int k = sp->engine[p];
    keyer_session *old = g->engine[k];
    if (sp->stuck || !atomic_load(&old->gpu_failed) || p + 1 >= MAX_ENGINES) {
        pthread_mutex_unlock(&g->failover_lock);
        return;
    }
    kr_stream *st = old->streams[sp->local[p]];
    int healthy[MAX_ENGINES];
    healthy_engines(g, k, 0, healthy);
    kr_continuation c = {NULL, INT64_MIN, st->seq_base + atomic_load(&st->frames_read),
                         kr_clock_ns(), INT64_MIN};
    int moved = 0;
    for (int j; !moved && (j = kr_place_failover(g->load, healthy, g->count)) >= 0;) {
        healthy[j] = 0;
        keyer_error e = {0};
        int local = -1;
        if ((sp->push.output && kr_handoff_create(&c.handoff, &e)) ||
            kr_engine_open_continuation(g->engine[j], &sp->push, &c, &local, &e)) {
            kr_handoff_destroy(&c.handoff);
            keyer_log(old->logger, KEYER_LOG_WARNING,
                      "stream %d (pushed frames): cannot move to %s: %s", id,
                      g->engine[j]->device_name, e.message);
            continue;
        }
        /* the old part gives its writer when it has written what it holds */
        st->handoff_out = c.handoff;
        st->moved = 1;
        kr_engine_end_input(old, sp->local[p]);
        add_part(g, id, k, j, local, c.handoff);
        moved = 1;
        kr_stage_warn(&old->ctx,
                      "stream %d (pushed frames): %s failed; the frames pushed from frame %lld "
                      "go to %s (those before finish here, on the CPU where the GPU no longer "
                      "can)",
                      id, old->device_name, (long long)c.seq_base, g->engine[j]->device_name);
    }
    if (!moved)
        sp->stuck = 1; /* no GPU left: the CPU of the failed one, as with one GPU */
    pthread_mutex_unlock(&g->failover_lock);
}

