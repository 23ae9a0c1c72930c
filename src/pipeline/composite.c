/* The composite stage: W workers; the streams' reorder buffers restore the order. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/composite.h"

#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

/** A worker's objects: one per stream and device, made on first use. */
typedef struct worker {
    struct kr_composite_stage *stage;
    keyer_composite **comp[2]; /* [device][stream] */
    int *bg_set[2];            /* [device][stream]: still background already set */
    void *cuda_stream;
    pthread_t thread;
    int running;
    int track;
} worker;

struct kr_composite_stage {
    kr_composite_stage_params p;
    keyer_frame *still_cuda;   /* the still background on the device */
    kr_queue *in;
    worker workers[KR_MAX_COMPOSITE_WORKERS];
};

keyer_status kr_composite_stage_create(const kr_composite_stage_params *params,
                                       kr_composite_stage **out, keyer_error *err)
{
    *out = NULL;
    kr_composite_stage *cs = calloc(1, sizeof(*cs));
    if (!cs)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    cs->p = *params;
    const kr_device_fns *dev = params->dev;
    keyer_status st = kr_queue_create(params->capacity, &cs->in, err);
    for (int w = 0; w < params->workers && !st; w++) {
        worker *cw = &cs->workers[w];
        cw->stage = cs;
        for (int d = 0; d < 2; d++) {
            cw->comp[d] = calloc((size_t)params->max_streams, sizeof(*cw->comp[d]));
            cw->bg_set[d] = calloc((size_t)params->max_streams, sizeof(*cw->bg_set[d]));
            if (!cw->comp[d] || !cw->bg_set[d])
                st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        }
        if (!st && dev)
            st = dev->stream_create(params->ordinal, &cw->cuda_stream, err);
    }
    /* the still background on the device, once */
    if (!st && dev && params->still) {
        const keyer_frame *bg = params->still;
        if (!(st = keyer_frame_create(&cs->still_cuda, err)) &&
            !(st = kr_device_frame_alloc(dev, params->ordinal, cs->still_cuda, bg->format,
                                         bg->width, bg->height, err)))
            st = kr_device_frame_copy(dev, params->ordinal, cs->still_cuda, bg,
                                      cs->workers[0].cuda_stream, err);
    }
    if (st) {
        kr_composite_stage_destroy(&cs);
        return st;
    }
    *out = cs;
    return KEYER_OK;
}

void kr_composite_stage_trace(kr_composite_stage *cs)
{
    for (int w = 0; w < cs->p.workers; w++)
        cs->workers[w].track = kr_trace_thread(cs->p.ctx->trace, "composite", w);
}

void kr_composite_stage_cancel(kr_composite_stage *cs)
{
    if (cs)
        kr_queue_cancel(cs->in);
}

void kr_composite_stage_join(kr_composite_stage *cs)
{
    if (!cs)
        return;
    for (int w = 0; w < KR_MAX_COMPOSITE_WORKERS; w++)
        if (cs->workers[w].running)
            pthread_join(cs->workers[w].thread, NULL);
    for (int w = 0; w < KR_MAX_COMPOSITE_WORKERS; w++)
        cs->workers[w].running = 0;
    void *item;
    while (cs->in && kr_queue_drain(cs->in, &item))
        kr_item_release(item);
}

void kr_composite_stage_destroy(kr_composite_stage **pcs)
{
    if (!pcs || !*pcs)
        return;
    kr_composite_stage *cs = *pcs;
    kr_composite_stage_cancel(cs);
    kr_composite_stage_join(cs);
    for (int w = 0; w < KR_MAX_COMPOSITE_WORKERS; w++) {
        worker *cw = &cs->workers[w];
        for (int d = 0; d < 2; d++) {
            if (cw->comp[d]) {
                for (int i = 0; i < cs->p.max_streams; i++)
                    keyer_composite_destroy(&cw->comp[d][i]);
                free(cw->comp[d]);
            }
            free(cw->bg_set[d]);
        }
        if (cs->p.dev)
            cs->p.dev->stream_destroy(cs->p.ordinal, cw->cuda_stream);
    }
    keyer_frame_destroy(&cs->still_cuda);
    kr_queue_destroy(&cs->in);
    free(cs);
    *pcs = NULL;
}

kr_queue *kr_composite_stage_queue(const kr_composite_stage *cs)
{
    return cs ? cs->in : NULL;
}

/* The worker's composite of the item's stream on one device, made on first use, with the
 * item's background set. */
static keyer_status composite_object(worker *cw, kr_item *it, int cuda, keyer_composite **out,
                                     keyer_error *err)
{
    const kr_composite_stage *cs = cw->stage;
    int id = it->stream;
    keyer_status rs;
    if (!cw->comp[cuda][id]) {
        keyer_composite_params cp = cs->p.composite;
        cp.threads = cs->p.threads / cs->p.workers;
        if (cp.threads < 1)
            cp.threads = 1;
        cp.stream = cuda ? cw->cuda_stream : NULL;
        if ((rs = keyer_composite_create(&cp, &cw->comp[cuda][id], err)))
            return rs;
        cw->bg_set[cuda][id] = 0;
    }
    keyer_composite *c = cw->comp[cuda][id];
    if (cs->p.composite.mode == KEYER_COMPOSITE_IMAGE) {
        if (it->bg) {
            if ((rs = keyer_composite_set_background(c, it->bg, err)))
                return rs;
            cw->bg_set[cuda][id] = 0;
        } else if (!cw->bg_set[cuda][id]) {
            const keyer_frame *still = cuda ? cs->still_cuda : cs->p.still;
            if (cuda && !still) {
                /* the session moved to CUDA-less operation before; not reachable */
                return keyer_error_set(err, KEYER_STATUS_INTERNAL, "no device background");
            }
            if (!still)
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "the background video gave no frame");
            if ((rs = keyer_composite_set_background(c, still, err)))
                return rs;
            cw->bg_set[cuda][id] = 1;
        }
    }
    *out = c;
    return KEYER_OK;
}

static keyer_status composite_item(worker *cw, kr_item *it, keyer_error *err)
{
    const kr_composite_stage *cs = cw->stage;
    const kr_stage_ctx *ctx = cs->p.ctx;
    for (;;) {
        if (it->on_cuda && kr_stage_gpu_failed(ctx)) {
            kr_item_demote(it, KR_NEED_ALPHA, cw->cuda_stream);
            if (it->lost)
                return KEYER_OK;
        }
        int cuda = it->on_cuda;
        kr_item_bufs *b = kr_item_bufs_of(it);
        keyer_composite *c = NULL;
        keyer_status rs = composite_object(cw, it, cuda, &c, err);
        if (!rs && cuda)
            rs = kr_item_wait(it, cw->cuda_stream, err);
        if (!rs)
            rs = keyer_composite_run(c, it->src, b->alpha, b->out, err);
        if (!rs && cuda) /* the sink waits for it before the output is read */
            rs = kr_item_record(it, cw->cuda_stream, err);
        if (rs && cuda && kr_stage_device_error(ctx, rs, err)) {
            keyer_error_clear(err);
            continue;
        }
        if (!rs) {
            b->out->pts = it->src->pts;
            b->out->duration = it->src->duration;
            b->out->time_base = it->src->time_base;
            b->out->flags = it->src->flags;
        }
        return rs;
    }
}

static void *worker_main(void *arg)
{
    worker *cw = arg;
    kr_composite_stage *cs = cw->stage;
    kr_thread_name("composite");
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(cs->in, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        if (!it->lost && !it->failed) {
            int64_t t0 = kr_clock_ns();
            keyer_error e = {0};
            keyer_status rs = composite_item(cw, it, &e);
            if (rs)
                kr_item_fail(it, rs, &e, "composite");
            int64_t t1 = kr_clock_ns();
            kr_stage_stats_record(cs->p.stats, 1, t0, t1);
            kr_trace_add(cs->p.ctx->trace, cw->track, "composite", it->stream, it->seq, 1, t0,
                         t1);
        }
        kr_item_done(it);
    }
    return NULL;
}

keyer_status kr_composite_stage_start(kr_composite_stage *cs, keyer_error *err)
{
    for (int w = 0; w < cs->p.workers; w++) {
        if (pthread_create(&cs->workers[w].thread, NULL, worker_main, &cs->workers[w]))
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
        cs->workers[w].running = 1;
    }
    return KEYER_OK;
}
