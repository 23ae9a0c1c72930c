/* The refine stage: mask to matte on W workers, each stream's frames in order on one of them. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/refine.h"

#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

/* One worker: its keyer_refine objects (their per-stream history), CUDA stream and thread. */
typedef struct refine_worker {
    kr_refine_stage *stage;
    keyer_refine *refine[2]; /* [0] CPU, [1] CUDA */
    void *stream;            /* its CUDA stream */
    kr_queue *in;            /* the stage's queue with one worker, else its own */
    pthread_t thread;
    int running;
    int track;
} refine_worker;

struct kr_refine_stage {
    kr_refine_stage_params p;
    kr_queue *in;            /* what the stage receives */
    int workers;
    refine_worker w[KR_MAX_REFINE_WORKERS];
    pthread_t router;        /* with several workers: stream s's items go to worker s % W */
    int router_running;
};

keyer_status kr_refine_stage_create(const kr_refine_stage_params *params,
                                    kr_refine_stage **out, keyer_error *err)
{
    *out = NULL;
    if (params->workers < 1 || params->workers > KR_MAX_REFINE_WORKERS)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "session: %d refine workers (1..%d)", params->workers,
                               KR_MAX_REFINE_WORKERS);
    kr_refine_stage *r = calloc(1, sizeof(*r));
    if (!r)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    r->p = *params;
    r->workers = params->workers;
    keyer_status st = kr_queue_create(params->capacity, &r->in, err);
    for (int i = 0; i < r->workers && !st; i++) {
        refine_worker *w = &r->w[i];
        w->stage = r;
        w->in = r->in;
        if (r->workers > 1)
            st = kr_queue_create(params->capacity, &w->in, err);
        if (!st && params->dev)
            st = params->dev->stream_create(params->ordinal, &w->stream, err);
    }
    if (st) {
        kr_refine_stage_destroy(&r);
        return st;
    }
    *out = r;
    return KEYER_OK;
}

void kr_refine_stage_cancel(kr_refine_stage *r)
{
    if (!r)
        return;
    kr_queue_cancel(r->in);
    for (int i = 0; i < r->workers; i++)
        kr_queue_cancel(r->w[i].in);
}

static void drain(kr_queue *q)
{
    void *item;
    while (q && kr_queue_drain(q, &item))
        kr_item_release(item);
}

void kr_refine_stage_join(kr_refine_stage *r)
{
    if (!r)
        return;
    if (r->router_running)
        pthread_join(r->router, NULL);
    r->router_running = 0;
    for (int i = 0; i < r->workers; i++) {
        if (r->w[i].running)
            pthread_join(r->w[i].thread, NULL);
        r->w[i].running = 0;
    }
    drain(r->in);
    for (int i = 0; i < r->workers; i++)
        if (r->w[i].in != r->in)
            drain(r->w[i].in);
}

void kr_refine_stage_destroy(kr_refine_stage **pr)
{
    if (!pr || !*pr)
        return;
    kr_refine_stage *r = *pr;
    kr_refine_stage_cancel(r);
    kr_refine_stage_join(r);
    for (int i = 0; i < r->workers; i++) {
        refine_worker *w = &r->w[i];
        keyer_refine_destroy(&w->refine[0]);
        keyer_refine_destroy(&w->refine[1]);
        if (r->p.dev && w->stream)
            r->p.dev->stream_destroy(r->p.ordinal, w->stream);
        if (w->in != r->in)
            kr_queue_destroy(&w->in);
    }
    kr_queue_destroy(&r->in);
    free(r);
    *pr = NULL;
}

kr_queue *kr_refine_stage_queue(const kr_refine_stage *r)
{
    return r ? r->in : NULL;
}

/* The worker's refinement for one device, made on first use. */
static keyer_status refine_object(refine_worker *w, int cuda, keyer_refine **out,
                                  keyer_error *err)
{
    if (!w->refine[cuda]) {
        keyer_refine_params rp = w->stage->p.refine;
        rp.stream = cuda ? w->stream : NULL;
        keyer_status rs = keyer_refine_create(&rp, &w->refine[cuda], err);
        if (rs)
            return rs;
    }
    *out = w->refine[cuda];
    return KEYER_OK;
}

static keyer_status refine_item(refine_worker *w, kr_item *it, keyer_error *err)
{
    const kr_refine_stage *r = w->stage;
    const kr_stage_ctx *ctx = r->p.ctx;
    for (;;) {
        if (it->on_cuda && kr_stage_gpu_failed(ctx)) {
            kr_item_demote(it, KR_NEED_MASK, w->stream);
            if (it->lost)
                return KEYER_OK;
        }
        int cuda = it->on_cuda;
        kr_item_bufs *b = kr_item_bufs_of(it);
        keyer_refine *ref = NULL;
        keyer_status rs = refine_object(w, cuda, &ref, err);
        if (!rs && cuda)
            rs = kr_item_wait(it, w->stream, err);
        if (!rs) {
            /* the part of the mask covering the frame (letterboxed models) */
            keyer_rectf region, *rp = NULL;
            if (r->p.letterbox) {
                const keyer_prepare_geometry *g = &it->geom[r->p.slot];
                float sx = (float)r->p.mask_w / (float)r->p.in_w;
                float sy = (float)r->p.mask_h / (float)r->p.in_h;
                region.x = g->content.x * sx;
                region.y = g->content.y * sy;
                region.width = g->content.width * sx;
                region.height = g->content.height * sy;
                rp = &region;
            }
            /* a jump in the stream (KEYER_FRAME_FLAG_DISCONTINUITY): no history */
            if (it->frame->flags & KEYER_FRAME_FLAG_DISCONTINUITY)
                rs = keyer_refine_reset(ref, it->stream, err);
            if (!rs)
                rs = keyer_refine_run(ref, it->stream, it->src, b->mask_frame, rp, b->alpha,
                                      err);
        }
        if (!rs && cuda) /* composite waits for it on its own stream */
            rs = kr_item_record(it, w->stream, err);
        if (rs && cuda && kr_stage_device_error(ctx, rs, err)) {
            keyer_error_clear(err);
            continue;
        }
        return rs;
    }
}

static void *refine_main(void *arg)
{
    refine_worker *w = arg;
    const kr_refine_stage *r = w->stage;
    kr_thread_name("refine");
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(w->in, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        if (!it->lost && !it->failed) {
            int64_t t0 = kr_clock_ns();
            keyer_error e = {0};
            keyer_status rs = refine_item(w, it, &e);
            if (rs)
                kr_item_fail(it, rs, &e, "refine");
            int64_t t1 = kr_clock_ns();
            kr_stage_stats_record(r->p.stats, 1, t0, t1);
            kr_trace_add(r->p.ctx->trace, w->track, "refine", it->stream, it->seq, 1, t0, t1);
        }
        if (kr_queue_push(r->p.next, it)) {
            kr_item_release(it);
            break;
        }
    }
    return NULL;
}

/* Several workers: each stream's items go to one worker, in order (its temporal history). */
static void *route_main(void *arg)
{
    kr_refine_stage *r = arg;
    kr_thread_name("route");
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(r->in, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        int k = (it->stream >= 0 ? it->stream : 0) % r->workers;
        if (kr_queue_push(r->w[k].in, it)) {
            kr_item_release(it);
            break;
        }
    }
    return NULL;
}

keyer_status kr_refine_stage_start(kr_refine_stage *r, int track, keyer_error *err)
{
    for (int i = 0; i < r->workers; i++) {
        refine_worker *w = &r->w[i];
        w->track = i == 0 ? track : kr_trace_thread(r->p.ctx->trace, "refine", i);
        if (pthread_create(&w->thread, NULL, refine_main, w))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
        w->running = 1;
    }
    if (r->workers > 1) {
        if (pthread_create(&r->router, NULL, route_main, r))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
        r->router_running = 1;
    }
    return KEYER_OK;
}
