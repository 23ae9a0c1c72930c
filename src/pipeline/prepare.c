/* The per-stream prepare stage: frame numbers, device choice, the models' inputs. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/prepare.h"

#include <pthread.h>
#include <stdlib.h>

#include "pipeline/clock.h"

struct kr_prepare_stage {
    kr_prepare_stage_params p;
    keyer_prepare *prep[KR_ITEM_MAX_INPUTS][2]; /* [input][device: 0 CPU, 1 CUDA] */
    int64_t next_seq;       /* number of the next frame */
    pthread_t thread;
    int running;
};

keyer_status kr_prepare_stage_create(const kr_prepare_stage_params *params,
                                     kr_prepare_stage **out, keyer_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "stream %d: out of memory",
                               params->stream);
    (*out)->p = *params;
    return KEYER_OK;
}

void kr_prepare_stage_join(kr_prepare_stage *ps)
{
    if (ps && ps->running)
        pthread_join(ps->thread, NULL);
    if (ps)
        ps->running = 0;
}

void kr_prepare_stage_destroy(kr_prepare_stage **pps)
{
    if (!pps || !*pps)
        return;
    kr_prepare_stage *ps = *pps;
    kr_prepare_stage_join(ps);
    for (int i = 0; i < KR_ITEM_MAX_INPUTS; i++)
        for (int d = 0; d < 2; d++)
            keyer_prepare_destroy(&ps->prep[i][d]);
    free(ps);
    *pps = NULL;
}

/* The preparation object of input @p i on one device, made on first use. */
static keyer_status prepare_object(kr_prepare_stage *ps, int i, int cuda, keyer_prepare **out,
                                   keyer_error *err)
{
    if (ps->prep[i][cuda]) {
        *out = ps->prep[i][cuda];
        return KEYER_OK;
    }
    const kr_model_input *in = &ps->p.input[i];
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = in->width;
    pp.height = in->height;
    pp.max_batch = 1;
    pp.fit = in->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp.scale = in->scale;
    pp.offset = in->offset;
    for (int c = 0; c < 3; c++) {
        pp.mean[c] = in->mean[c];
        pp.std[c] = in->std[c];
    }
    pp.bgr = in->bgr;
    if (in->threads > 0) {
        pp.threads = in->threads;
    } else {
        int n = atomic_load(ps->p.streams);
        pp.threads = ps->p.threads / (n > 0 ? n : 1);
        if (pp.threads < 1)
            pp.threads = 1;
    }
    pp.stream = cuda ? ps->p.cuda_stream : NULL;
    keyer_status rs = keyer_prepare_create(&pp, &ps->prep[i][cuda], err);
    *out = ps->prep[i][cuda];
    if (rs && in->what[0])
        keyer_error_prefix(err, "%s", in->what);
    return rs;
}

static keyer_status prepare_item(kr_prepare_stage *ps, kr_item *it, keyer_error *err)
{
    const kr_stage_ctx *ctx = ps->p.ctx;
    for (;;) {
        int cuda = ps->p.use_cuda && !kr_stage_gpu_failed(ctx);
        it->on_cuda = cuda;
        keyer_status rs = kr_item_bufs_ensure(it, cuda, err);
        if (!rs)
            rs = kr_item_place_source(it, err);
        kr_item_bufs *b = kr_item_bufs_of(it);
        for (int i = 0; i < ps->p.inputs && !rs; i++) {
            keyer_prepare *prep = NULL;
            int slot = ps->p.input[i].slot;
            const keyer_frame *frames[1] = {it->src};
            rs = prepare_object(ps, i, cuda, &prep, err);
            if (!rs)
                rs = keyer_prepare_run(prep, frames, NULL, 1, b->input[slot], &it->geom[slot],
                                       err);
        }
        if (!rs && cuda) /* the next stage waits for it on its own stream */
            rs = kr_item_record(it, ps->p.cuda_stream, err);
        if (rs && cuda && kr_stage_device_error(ctx, rs, err)) {
            keyer_error_clear(err);
            continue; /* again on the CPU */
        }
        return rs;
    }
}

static void *prepare_main(void *arg)
{
    kr_prepare_stage *ps = arg;
    const kr_stage_ctx *ctx = ps->p.ctx;
    kr_thread_name("prepare");
    int track = kr_trace_thread(ctx->trace, "prepare", ps->p.stream);
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(ps->p.in, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        it->seq = ps->next_seq++;
        if (!ps->p.out) { /* no model: straight to the writer, in order */
            it->src = it->frame;
            kr_item_done(it);
            continue;
        }
        int64_t t0 = kr_clock_ns();
        keyer_error e = {0};
        keyer_status rs = prepare_item(ps, it, &e);
        if (rs)
            kr_item_fail(it, rs, &e, "prepare");
        int64_t t1 = kr_clock_ns();
        kr_stage_stats_record(ps->p.stats, 1, t0, t1);
        kr_trace_add(ctx->trace, track, "prepare", ps->p.stream, it->seq, 1, t0, t1);
        if (kr_queue_push(ps->p.out, it)) {
            kr_item_release(it);
            break;
        }
    }
    kr_reorder_finish(ps->p.done, ps->next_seq);
    return NULL;
}

keyer_status kr_prepare_stage_start(kr_prepare_stage *ps, keyer_error *err)
{
    if (pthread_create(&ps->thread, NULL, prepare_main, ps))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream %d: cannot start a thread",
                               ps->p.stream);
    ps->running = 1;
    return KEYER_OK;
}
