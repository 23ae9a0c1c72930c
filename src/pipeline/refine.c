/* The refine stage: mask to matte, one thread, each stream's frames in order. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/refine.h"

#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

struct kr_refine_stage {
    kr_refine_stage_params p;
    keyer_refine *refine[2]; /* [0] CPU, [1] CUDA */
    void *stream;            /* its CUDA stream */
    kr_queue *in;
    pthread_t thread;
    int running;
    int track;
};

keyer_status kr_refine_stage_create(const kr_refine_stage_params *params,
                                    kr_refine_stage **out, keyer_error *err)
{
    *out = NULL;
    kr_refine_stage *r = calloc(1, sizeof(*r));
    if (!r)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    r->p = *params;
    keyer_status st = kr_queue_create(params->capacity, &r->in, err);
    if (!st && params->dev)
        st = params->dev->stream_create(params->ordinal, &r->stream, err);
    if (st) {
        kr_refine_stage_destroy(&r);
        return st;
    }
    *out = r;
    return KEYER_OK;
}

void kr_refine_stage_cancel(kr_refine_stage *r)
{
    if (r)
        kr_queue_cancel(r->in);
}

void kr_refine_stage_join(kr_refine_stage *r)
{
    if (!r)
        return;
    if (r->running)
        pthread_join(r->thread, NULL);
    r->running = 0;
    void *item;
    while (r->in && kr_queue_drain(r->in, &item))
        kr_item_release(item);
}

void kr_refine_stage_destroy(kr_refine_stage **pr)
{
    if (!pr || !*pr)
        return;
    kr_refine_stage *r = *pr;
    kr_refine_stage_cancel(r);
    kr_refine_stage_join(r);
    keyer_refine_destroy(&r->refine[0]);
    keyer_refine_destroy(&r->refine[1]);
    if (r->p.dev)
        r->p.dev->stream_destroy(r->p.ordinal, r->stream);
    kr_queue_destroy(&r->in);
    free(r);
    *pr = NULL;
}

kr_queue *kr_refine_stage_queue(const kr_refine_stage *r)
{
    return r ? r->in : NULL;
}

/* The refinement of one device, made on first use. */
static keyer_status refine_object(kr_refine_stage *r, int cuda, keyer_refine **out,
                                  keyer_error *err)
{
    if (!r->refine[cuda]) {
        keyer_refine_params rp = r->p.refine;
        rp.stream = cuda ? r->stream : NULL;
        keyer_status rs = keyer_refine_create(&rp, &r->refine[cuda], err);
        if (rs)
            return rs;
    }
    *out = r->refine[cuda];
    return KEYER_OK;
}

static keyer_status refine_item(kr_refine_stage *r, kr_item *it, keyer_error *err)
{
    const kr_stage_ctx *ctx = r->p.ctx;
    for (;;) {
        if (it->on_cuda && kr_stage_gpu_failed(ctx)) {
            kr_item_demote(it, KR_NEED_MASK, r->stream);
            if (it->lost)
                return KEYER_OK;
        }
        int cuda = it->on_cuda;
        kr_item_bufs *b = kr_item_bufs_of(it);
        keyer_refine *ref = NULL;
        keyer_status rs = refine_object(r, cuda, &ref, err);
        if (!rs && cuda)
            rs = kr_item_wait(it, r->stream, err);
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
            rs = kr_item_record(it, r->stream, err);
        if (rs && cuda && kr_stage_device_error(ctx, rs, err)) {
            keyer_error_clear(err);
            continue;
        }
        return rs;
    }
}

static void *refine_main(void *arg)
{
    kr_refine_stage *r = arg;
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(r->in, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        if (!it->lost && !it->failed) {
            int64_t t0 = kr_clock_ns();
            keyer_error e = {0};
            keyer_status rs = refine_item(r, it, &e);
            if (rs)
                kr_item_fail(it, rs, &e, "refine");
            int64_t t1 = kr_clock_ns();
            kr_stage_stats_record(r->p.stats, 1, t0, t1);
            kr_trace_add(r->p.ctx->trace, r->track, "refine", it->stream, it->seq, 1, t0, t1);
        }
        if (kr_queue_push(r->p.next, it)) {
            kr_item_release(it);
            break;
        }
    }
    return NULL;
}

keyer_status kr_refine_stage_start(kr_refine_stage *r, int track, keyer_error *err)
{
    r->track = track;
    if (pthread_create(&r->thread, NULL, refine_main, r))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: cannot start a thread");
    r->running = 1;
    return KEYER_OK;
}
