/* Rounds of a cropping model stage: ready, steps, retry on the CPU; a pass's crops in runs. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/crop_rounds.h"

#include <stdlib.h>

#include "pipeline/clock.h"

_Static_assert(sizeof(((keyer_rounds_report *)0)->runs_by_batch) / sizeof(int64_t) ==
                   KR_MAX_BATCH_LOG2 + 1,
               "keyer_rounds_report::runs_by_batch has a place per runtime batch");

struct kr_rounds {
    const kr_rounds_ops *ops;
    void *opaque;
    int batch;          /* items per batch at most */
    int crop_cap;       /* crops per pass at most */
    int out_cap;        /* deferred crops between two waits at most */
    int max_lg;         /* log2 of the largest power of two not above batch */
    kr_item **round;    /* batch: one round's items, one per stream */
    void **states;      /* batch: their states (NULL: not run) */
    int *at;            /* batch: their positions in the batch */
    int *finished;      /* batch: per round position, handed on already (kr_rounds_finish) */
    int *done;          /* batch: per position in the batch: taken into a round, or not run */
    int *over;          /* batch: per position in the batch: its frame's work is over */
    kr_item **items;    /* the batch being run (its handed-on items are NULL) */
    int n;              /* its items */
    int *order;         /* crop_cap: a pass's crops, CUDA items' first */
    kr_rounds_counters counters;
};

keyer_status kr_rounds_create(const kr_rounds_ops *ops, void *opaque, int batch, int crop_cap,
                              int out_cap, kr_rounds **out, keyer_error *err)
{
    *out = NULL;
    if (!ops || !ops->state || !ops->steps || !ops->clear || batch < 1 || crop_cap < 1 ||
        out_cap < batch)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: rounds of batch %d, %d crops, %d output places (>= batch)",
                               ops && ops->name ? ops->name : "rounds", batch, crop_cap, out_cap);
    kr_rounds *r = calloc(1, sizeof(*r));
    if (!r)
        goto oom;
    r->ops = ops;
    r->opaque = opaque;
    r->batch = batch;
    r->crop_cap = crop_cap;
    r->out_cap = out_cap;
    while (r->max_lg < KR_MAX_BATCH_LOG2 && (1 << (r->max_lg + 1)) <= batch)
        r->max_lg++;
    r->round = calloc((size_t)batch, sizeof(*r->round));
    r->states = calloc((size_t)batch, sizeof(*r->states));
    r->at = calloc((size_t)batch, sizeof(*r->at));
    r->finished = calloc((size_t)batch, sizeof(*r->finished));
    r->done = calloc((size_t)batch, sizeof(*r->done));
    r->over = calloc((size_t)batch, sizeof(*r->over));
    r->order = calloc((size_t)crop_cap, sizeof(*r->order));
    if (!r->round || !r->states || !r->at || !r->finished || !r->done || !r->over || !r->order)
        goto oom;
    *out = r;
    return KEYER_OK;
oom:
    kr_rounds_destroy(&r);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", ops->name);
}

void kr_rounds_destroy(kr_rounds **pr)
{
    if (!pr || !*pr)
        return;
    kr_rounds *r = *pr;
    free(r->round);
    free(r->states);
    free(r->at);
    free(r->finished);
    free(r->done);
    free(r->over);
    free(r->order);
    free(r);
    *pr = NULL;
}

void kr_rounds_note_pass(kr_rounds *r)
{
    atomic_fetch_add(&r->counters.passes, 1);
}

void kr_rounds_note_run(kr_rounds *r, int crops, int lg)
{
    atomic_fetch_add(&r->counters.runs, 1);
    atomic_fetch_add(&r->counters.runs_by_lg[lg], 1);
    atomic_fetch_add(&r->counters.crops, crops);
    atomic_fetch_add(&r->counters.padded, (1 << lg) - crops);
}

void kr_rounds_report_add(const kr_rounds *r, keyer_rounds_report *out)
{
    if (!r)
        return;
    const kr_rounds_counters *c = &r->counters;
    out->batches += atomic_load(&c->batches);
    out->rounds += atomic_load(&c->rounds);
    out->passes += atomic_load(&c->passes);
    out->runs += atomic_load(&c->runs);
    out->crops += atomic_load(&c->crops);
    out->padded += atomic_load(&c->padded);
    out->syncs += atomic_load(&c->syncs);
    for (int i = 0; i <= KR_MAX_BATCH_LOG2; i++)
        out->runs_by_batch[i] += atomic_load(&c->runs_by_lg[i]);
    out->round_seconds += (double)atomic_load(&c->round_ns) * 1e-9;
    out->wait_seconds += (double)atomic_load(&c->wait_ns) * 1e-9;
}

/* ---- rounds ------------------------------------------------------------------------------- */

/* Readies the round's items: CUDA items move to the CPU after a GPU failure, or the stage's
 * stream waits for them; each gets its stream's state (NULL when it is not run). */
static void round_ready(kr_rounds *r, kr_model_stage *ms, int k)
{
    const kr_stage_ctx *ctx = kr_model_stage_ctx(ms);
    void *stream = kr_model_stage_stream(ms);
    int need = kr_model_stage_get_run(ms)->need;
    for (int j = 0; j < k; j++) {
        kr_item *it = r->round[j];
        keyer_error e = {0};
        r->states[j] = NULL;
        if (r->finished[j])
            continue; /* handed on: not run again (a retry), and no longer the stage's */
        if (it->on_cuda && kr_stage_gpu_failed(ctx))
            kr_item_demote(it, need, stream);
        if (it->lost || it->failed)
            continue;
        keyer_status st = it->on_cuda ? kr_item_wait(it, stream, &e) : KEYER_OK;
        if (st && kr_stage_device_error(ctx, st, &e)) {
            kr_item_demote(it, need, stream);
            if (it->lost)
                continue;
            st = KEYER_OK;
        }
        if (!st)
            st = r->ops->state(r->opaque, it->stream, &r->states[j], &e);
        if (st)
            kr_item_fail(it, st, &e, r->ops->name);
    }
}

/* The frames start afresh: tracking dropped, as the per-stream objects do on an error. */
static void reset_states(kr_rounds *r, int k)
{
    if (r->ops->reset)
        for (int j = 0; j < k; j++)
            r->ops->reset(r->states[j]);
}

static void run_round(kr_rounds *r, kr_model_stage *ms, int k)
{
    const kr_stage_ctx *ctx = kr_model_stage_ctx(ms);
    round_ready(r, ms, k);
    keyer_error e = {0};
    atomic_fetch_add(&r->counters.rounds, 1);
    keyer_status st = r->ops->steps(r->opaque, ms, r->round, r->states, k, &e);
    if (!st)
        return;
    reset_states(r, k);
    int on_cuda = 0;
    for (int j = 0; j < k; j++)
        on_cuda |= r->states[j] && r->round[j]->on_cuda;
    if (on_cuda && kr_stage_device_error(ctx, st, &e)) {
        /* the GPU failed: the round goes again on the CPU */
        round_ready(r, ms, k);
        keyer_error_clear(&e);
        atomic_fetch_add(&r->counters.rounds, 1);
        st = r->ops->steps(r->opaque, ms, r->round, r->states, k, &e);
        if (!st)
            return;
        reset_states(r, k);
    }
    for (int j = 0; j < k; j++) {
        if (!r->states[j])
            continue;
        keyer_error ej = e;
        kr_item_fail(r->round[j], st, &ej, r->ops->name);
    }
}

/* Hands on every item whose frame's work is over and whose stream has no item before it in
 * the batch still here, in the batch's order. */
static void hand_on_over(kr_rounds *r, kr_model_stage *ms)
{
    for (int i = 0; i < r->n; i++) {
        if (!r->items[i] || !r->over[i])
            continue;
        int earlier = 0;
        for (int h = 0; h < i && !earlier; h++)
            earlier = r->items[h] && r->items[h]->stream == r->items[i]->stream;
        if (!earlier)
            kr_model_stage_hand_on(ms, &r->items[i]);
    }
}

void kr_rounds_finish(kr_rounds *r, kr_model_stage *ms, int j)
{
    if (j < 0 || j >= r->batch || r->finished[j] || !r->items)
        return;
    r->finished[j] = 1;
    r->states[j] = NULL; /* its state is kept as the frame left it: no reset, no retry */
    r->over[r->at[j]] = 1;
    hand_on_over(r, ms);
}

void kr_rounds_run_batch(kr_rounds *r, kr_model_stage *ms, kr_item **items, int n)
{
    if (n > r->batch) { /* the stage's batch is the rounds' (a set-up error) */
        keyer_error e = {0};
        keyer_error_set(&e, KEYER_STATUS_INTERNAL, "%s: a batch of %d items, at most %d",
                        r->ops->name, n, r->batch);
        for (int i = 0; i < n; i++)
            if (!items[i]->lost && !items[i]->failed) {
                keyer_error ei = e;
                kr_item_fail(items[i], KEYER_STATUS_INTERNAL, &ei, r->ops->name);
            }
        return;
    }
    atomic_fetch_add(&r->counters.batches, 1);
    r->items = items;
    r->n = n;
    for (int i = 0; i < n; i++) {
        r->ops->clear(items[i]);
        r->done[i] = r->over[i] = items[i]->lost || items[i]->failed;
    }
    for (;;) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (r->done[i])
                continue;
            int seen = 0;
            for (int j = 0; j < k && !seen; j++)
                seen = r->round[j]->stream == items[i]->stream;
            if (seen)
                continue; /* the next round: it depends on this round's frame */
            r->at[k] = i;
            r->finished[k] = 0;
            r->round[k++] = items[i];
            r->done[i] = 1;
        }
        if (!k)
            break;
        int64_t t0 = kr_clock_ns();
        run_round(r, ms, k);
        atomic_fetch_add(&r->counters.round_ns, kr_clock_ns() - t0);
        /* the round's frames are over: on to the next stage before the batch's next round */
        for (int j = 0; j < k; j++)
            r->over[r->at[j]] = 1;
        hand_on_over(r, ms);
    }
    /* every item went on after its round; a batch with nothing to run goes on at its end
     * (the model stage hands on the items still here) */
    r->items = NULL;
    r->n = 0;
}

/* ---- a pass's crops ------------------------------------------------------------------------ */

/* The host waits for the deferred chunks, then the last @p at crops before order[@p done]
 * take their outputs. */
static keyer_status flush(kr_rounds *r, kr_model_stage *ms, int done, int at,
                          const kr_crops_ops *cops, void *opaque, keyer_error *err)
{
    int64_t t0 = kr_clock_ns();
    keyer_status st = kr_model_stage_sync(ms, err);
    atomic_fetch_add(&r->counters.wait_ns, kr_clock_ns() - t0);
    atomic_fetch_add(&r->counters.syncs, 1);
    if (st)
        return st;
    return cops->take(opaque, r->order + done - at, at, err);
}

keyer_status kr_rounds_crops(kr_rounds *r, kr_model_stage *ms, const int *cuda, int n,
                             const kr_crops_ops *cops, void *opaque, keyer_error *err)
{
    if (n <= 0)
        return KEYER_OK;
    if (n > r->crop_cap)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: %d crops in a pass, at most %d",
                               r->ops->name, n, r->crop_cap);
    atomic_fetch_add(&r->counters.passes, 1);
    int k = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int c = 0; c < n; c++)
            if ((cuda[c] != 0) == pass)
                r->order[k++] = c;
    int models_cuda = kr_model_stage_get_run(ms)->cuda;
    int done = 0, at = 0; /* at: deferred crops queued since the last wait */
    keyer_status st;
    while (done < n) {
        int dev = cuda[r->order[done]] != 0;
        int same = 1;
        while (done + same < n && (cuda[r->order[done + same]] != 0) == dev)
            same++;
        int deferred = dev && models_cuda;
        int lg = 0, m;
        if (deferred) { /* the smallest runtime holding them, padded */
            while (lg < r->max_lg && (1 << lg) < same)
                lg++;
            m = same < (1 << lg) ? same : 1 << lg;
            if (at + m > r->out_cap) {
                if ((st = flush(r, ms, done, at, cops, opaque, err)))
                    return st;
                at = 0;
            }
        } else { /* the largest runtime not above them, exactly as the CPU runs them */
            while (lg < r->max_lg && (1 << (lg + 1)) <= same)
                lg++;
            m = 1 << lg;
        }
        if ((st = cops->chunk(opaque, r->order + done, m, lg, dev, deferred, at, err)))
            return st;
        kr_rounds_note_run(r, m, lg);
        done += m;
        if (!deferred)
            continue;
        at += m;
        /* the CUDA items' crops end here: one wait for all their runs */
        if (done == n || !cuda[r->order[done]]) {
            if ((st = flush(r, ms, done, at, cops, opaque, err)))
                return st;
            at = 0;
        }
    }
    return KEYER_OK;
}
