/* The stage workers: prepare (per stream), infer (batching), refine, composite. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/clock.h"
#include "pipeline/session_internal.h"
#include "vision/sigmoid.h"

/* ---- moving frames between memories -------------------------------------------------------- */

keyer_status kr_download_frame(keyer_session *s, keyer_frame *dst, const keyer_frame *src,
                               void *stream, keyer_error *err)
{
    if (src->memory != KEYER_MEMORY_CUDA)
        return keyer_frame_copy(dst, src, err);
    const kr_device_fns *dev = s->dev ? s->dev : kr_device_cuda();
    if (dst->format != src->format || dst->width != src->width || dst->height != src->height ||
        dst->memory != KEYER_MEMORY_HOST) {
        keyer_status rs = keyer_frame_alloc(dst, src->format, src->width, src->height, NULL, err);
        if (rs)
            return rs;
    }
    return kr_device_frame_copy(dev, src->device, dst, src, stream, err);
}

keyer_status kr_stage_copy(keyer_session *s, keyer_frame **slot, const keyer_frame *src,
                               int cuda, void *stream, keyer_error *err)
{
    keyer_status rs = KEYER_OK;
    if (!*slot && (rs = keyer_frame_create(slot, err)))
        return rs;
    keyer_frame *d = *slot;
    keyer_memory_type want = cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    if (!d->data[0] || d->format != src->format || d->width != src->width ||
        d->height != src->height || d->memory != want) {
        if (cuda)
            rs = kr_device_frame_alloc(s->dev, s->ordinal, d, src->format, src->width,
                                       src->height, err);
        else
            rs = keyer_frame_alloc(d, src->format, src->width, src->height, NULL, err);
        if (rs)
            return rs;
    }
    const kr_device_fns *dev = s->dev ? s->dev : kr_device_cuda();
    int ordinal = src->memory == KEYER_MEMORY_CUDA ? src->device : s->ordinal;
    return kr_device_frame_copy(dev, ordinal, d, src, stream, err);
}

keyer_status kr_item_place_source(kr_item *it, keyer_error *err)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    kr_item_bufs *b = it->on_cuda ? &it->cuda : &it->host;
    keyer_memory_type want = it->on_cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    keyer_status rs;
    if (it->frame->memory == want && (want == KEYER_MEMORY_HOST || it->frame->device == s->ordinal)) {
        it->src = it->frame;
    } else {
        if ((rs = kr_stage_copy(s, &b->staged, it->frame, it->on_cuda, st->prep_stream, err)))
            return rs;
        it->src = b->staged;
    }
    it->bg = NULL;
    if (it->bg_src->data[0]) {
        if (it->bg_src->memory == want) {
            it->bg = it->bg_src;
        } else {
            if ((rs = kr_stage_copy(s, &b->bg, it->bg_src, it->on_cuda, st->prep_stream, err)))
                return rs;
            it->bg = b->bg;
        }
    }
    return KEYER_OK;
}

/*
 * Moves a CUDA item to the CPU after a GPU failure: downloads what the next stage reads
 * (the tensor before infer, the mask before refine, the matte before composite) and the
 * frames. A failed download marks the item lost.
 */
void kr_item_demote(kr_item *it, int need, void *stream)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    keyer_error e = {0};
    keyer_status rs = kr_item_bufs_ensure(it, 0, &e);
    if (!rs && (need & KR_NEED_TENSOR))
        rs = s->dev->copy_2d(s->ordinal, it->host.tensor, s->tensor_bytes, it->cuda.tensor,
                             s->tensor_bytes, s->tensor_bytes, 1, stream, &e);
    if (!rs && (need & KR_NEED_DET))
        rs = s->dev->copy_2d(s->ordinal, it->host.det_tensor, s->det_tensor_bytes,
                             it->cuda.det_tensor, s->det_tensor_bytes, s->det_tensor_bytes, 1,
                             stream, &e);
    if (!rs && (need & KR_NEED_MASK))
        rs = s->dev->copy_2d(s->ordinal, it->host.mask, s->mask_bytes, it->cuda.mask,
                             s->mask_bytes, s->mask_bytes, 1, stream, &e);
    if (!rs && (need & KR_NEED_ALPHA))
        rs = kr_device_frame_copy(s->dev, s->ordinal, it->host.alpha, it->cuda.alpha, stream, &e);
    if (!rs)
        rs = s->dev->stream_sync(s->ordinal, stream, &e);
    if (!rs) {
        it->on_cuda = 0;
        rs = kr_item_place_source(it, &e);
    }
    if (rs) {
        it->lost = 1;
        keyer_log(s->logger, KEYER_LOG_ERROR,
                  "stream %d: frame %lld is lost: it could not be moved off the GPU: %s", st->id,
                  (long long)it->seq, e.message);
    }
}

static int gpu_failed(keyer_session *s)
{
    return atomic_load(&s->gpu_failed);
}

/* A CUDA call failed on an item: a device error moves the session to the CPU and returns 1
 * (the caller demotes and retries); anything else is an error of the item. */
static int device_error(keyer_session *s, keyer_status rs, const keyer_error *e)
{
    if (rs == KEYER_STATUS_DEVICE || rs == KEYER_STATUS_OUT_OF_MEMORY) {
        kr_session_gpu_failure(s, e);
        return 1;
    }
    return 0;
}

void kr_item_fail(kr_item *it, keyer_status rs, keyer_error *e, const char *stage)
{
    it->failed = 1;
    keyer_error_prefix(e, "stream %d, frame %lld, %s: ", it->stream->id, (long long)it->seq,
                       stage);
    kr_stream_fail(it->stream, rs, e, 1);
}

/* ---- prepare (one thread per stream) ----------------------------------------------------------- */

static keyer_status prepare_object(kr_stream *st, int cuda, keyer_prepare **out,
                                   keyer_error *err)
{
    keyer_session *s = st->session;
    if (st->prep[cuda]) {
        *out = st->prep[cuda];
        return KEYER_OK;
    }
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = s->in_w;
    pp.height = s->in_h;
    pp.max_batch = 1;
    pp.fit = s->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp.scale = s->in_scale;
    pp.offset = s->in_offset;
    int n = atomic_load(&s->stream_count);
    pp.threads = s->threads / (n > 0 ? n : 1);
    if (pp.threads < 1)
        pp.threads = 1;
    pp.stream = cuda ? st->prep_stream : NULL;
    keyer_status rs = keyer_prepare_create(&pp, &st->prep[cuda], err);
    *out = st->prep[cuda];
    return rs;
}

static keyer_status prepare_item(kr_item *it, keyer_error *err)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    for (;;) {
        int cuda = s->use_cuda && !gpu_failed(s);
        it->on_cuda = cuda;
        keyer_prepare *prep = NULL;
        keyer_status rs = kr_item_bufs_ensure(it, cuda, err);
        if (!rs)
            rs = kr_item_place_source(it, err);
        if (!rs && s->model)
            rs = prepare_object(st, cuda, &prep, err);
        if (!rs && s->model) {
            kr_item_bufs *b = cuda ? &it->cuda : &it->host;
            const keyer_frame *frames[1] = {it->src};
            rs = keyer_prepare_run(prep, frames, NULL, 1, b->tensor, &it->geom, err);
        }
        if (!rs && s->det_model)
            rs = kr_detect_prepare(it, err);
        if (!rs && cuda)
            rs = s->dev->stream_sync(s->ordinal, st->prep_stream, err);
        if (rs && cuda && device_error(s, rs, err)) {
            keyer_error_clear(err);
            continue; /* again on the CPU */
        }
        return rs;
    }
}

void *kr_prepare_main(void *arg)
{
    kr_stream *st = arg;
    keyer_session *s = st->session;
    int track = kr_trace_thread(s->trace, "prepare", st->id);
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(st->ingest, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        it->seq = st->next_seq++;
        if (s->params.passthrough && !s->det_model) { /* straight to the writer, in order */
            it->src = it->frame;
            keyer_error e = {0};
            if (kr_reorder_put(st->done, it->seq, it, &e)) {
                keyer_log(s->logger, KEYER_LOG_ERROR, "%s", e.message);
                kr_item_release(it);
            }
            continue;
        }
        int64_t t0 = kr_clock_ns();
        keyer_error e = {0};
        keyer_status rs = prepare_item(it, &e);
        if (rs)
            kr_item_fail(it, rs, &e, "prepare");
        int64_t t1 = kr_clock_ns();
        kr_stage_stats_record(&s->stages[KR_ST_PREPARE], 1, t0, t1);
        kr_trace_add(s->trace, track, "prepare", st->id, it->seq, 1, t0, t1);
        if (kr_queue_push(s->det_model ? s->detect_q : s->infer_q, it)) {
            kr_item_release(it);
            break;
        }
    }
    kr_reorder_finish(st->done, st->next_seq);
    return NULL;
}

/* ---- infer (one thread, batches across streams) ------------------------------------------------ */

/* Runs @p n CPU items through the runtime of batch n (a power of two). */
static keyer_status infer_cpu(keyer_session *s, kr_item **items, int n, int lg,
                              keyer_error *err)
{
    keyer_runtime *rt = s->rt[0][lg];
    float *in = keyer_runtime_input_data(rt, 0);
    for (int i = 0; i < n; i++)
        memcpy((char *)in + (size_t)i * s->tensor_bytes, items[i]->host.tensor, s->tensor_bytes);
    keyer_status rs = keyer_runtime_run(rt, err);
    if (rs)
        return rs;
    const float *outp = keyer_runtime_output_data(rt, s->mask_index);
    size_t cells = (size_t)s->mask_w * (size_t)s->mask_h;
    for (int i = 0; i < n; i++) {
        const float *src = outp + (size_t)i * cells * (size_t)s->mask_c;
        float *dst = items[i]->host.mask;
        if (s->mask_logit)
            kr_sigmoid_cpu(dst, src, cells, (size_t)s->mask_c);
        else if (s->mask_c == 1)
            memcpy(dst, src, s->mask_bytes);
        else
            for (size_t k = 0; k < cells; k++)
                dst[k] = src[k * (size_t)s->mask_c];
    }
    atomic_fetch_add(&s->frames_cpu, n);
    return KEYER_OK;
}

static keyer_status infer_cuda(keyer_session *s, kr_item **items, int n, int lg,
                               keyer_error *err)
{
    const kr_device_fns *dev = s->dev;
    keyer_runtime *rt = s->rt[1][lg];
    char *in = (char *)keyer_runtime_input_data(rt, 0);
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++)
        rs = dev->copy_2d(s->ordinal, in + (size_t)i * s->tensor_bytes, s->tensor_bytes,
                          items[i]->cuda.tensor, s->tensor_bytes, s->tensor_bytes, 1,
                          s->infer_stream, err);
    if (!rs)
        rs = keyer_runtime_run(rt, err);
    const char *outp = (const char *)keyer_runtime_output_data(rt, s->mask_index);
    size_t cells = (size_t)s->mask_w * (size_t)s->mask_h;
    for (int i = 0; i < n && !rs; i++) {
        const char *src = outp + (size_t)i * cells * (size_t)s->mask_c * sizeof(float);
        if (s->mask_c == 1)
            rs = dev->copy_2d(s->ordinal, items[i]->cuda.mask, s->mask_bytes, src, s->mask_bytes,
                              s->mask_bytes, 1, s->infer_stream, err);
        else /* channel 0 of each cell: a 2-D copy of 4-byte rows */
            rs = dev->copy_2d(s->ordinal, items[i]->cuda.mask, sizeof(float), src,
                              (size_t)s->mask_c * sizeof(float), sizeof(float), cells,
                              s->infer_stream, err);
        if (!rs && s->mask_logit)
            rs = kr_sigmoid_cuda(s->ordinal, items[i]->cuda.mask, items[i]->cuda.mask, cells,
                                 s->infer_stream, err);
    }
    if (!rs)
        rs = dev->stream_sync(s->ordinal, s->infer_stream, err);
    if (!rs)
        atomic_fetch_add(&s->frames_cuda, n);
    return rs;
}

/* CUDA items, CPU inference: tensors come down, masks go up (small: the model's size). */
static keyer_status infer_hybrid(keyer_session *s, kr_item **items, int n, int lg,
                                 keyer_error *err)
{
    const kr_device_fns *dev = s->dev;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++) {
        rs = kr_item_tensors_ensure(items[i], 0, err);
        if (!rs)
            rs = dev->copy_2d(s->ordinal, items[i]->host.tensor, s->tensor_bytes,
                              items[i]->cuda.tensor, s->tensor_bytes, s->tensor_bytes, 1,
                              s->infer_stream, err);
    }
    if (!rs)
        rs = dev->stream_sync(s->ordinal, s->infer_stream, err);
    if (!rs)
        rs = infer_cpu(s, items, n, lg, err);
    for (int i = 0; i < n && !rs; i++)
        rs = dev->copy_2d(s->ordinal, items[i]->cuda.mask, s->mask_bytes, items[i]->host.mask,
                          s->mask_bytes, s->mask_bytes, 1, s->infer_stream, err);
    if (!rs)
        rs = dev->stream_sync(s->ordinal, s->infer_stream, err);
    return rs;
}

/* Infers one device-uniform group, split into power-of-two runtimes. */
/* The CPU runtime of batch 2^lg, made when first needed (after a GPU failure). */
static keyer_status cpu_runtime(keyer_session *s, int lg, keyer_error *err)
{
    return kr_session_runtimes(s, s->model, s->model_used, s->rt[0], 0, 1 << lg, NULL, 0, err);
}

/* KEYER_FAIL_CUDA_AT_FRAME: the CUDA path fails on the batch holding that frame number. */
static keyer_status injected_failure(keyer_session *s, kr_item **items, int n, keyer_error *err)
{
    if (s->fail_cuda_at < 0)
        return KEYER_OK;
    for (int i = 0; i < n; i++)
        if (items[i]->seq == s->fail_cuda_at)
            return keyer_error_set(err, KEYER_STATUS_DEVICE,
                                   "CUDA inference failed at frame %lld of stream %d "
                                   "(KEYER_FAIL_CUDA_AT_FRAME)",
                                   (long long)items[i]->seq, items[i]->stream->id);
    return KEYER_OK;
}

/* Moves the CUDA items of @p items to the CPU and drops the ones that could not leave the GPU
 * (marked lost); returns how many remain, compacted at the front. */
static int demote_all(const kr_batch_stage *bs, kr_item **items, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (items[i]->on_cuda)
            kr_item_demote(items[i], bs->need, bs->stream);
        if (!items[i]->lost)
            items[k++] = items[i];
    }
    return k;
}

/* Runs one device-uniform group, split into power-of-two runtimes. */
static void run_group(keyer_session *s, const kr_batch_stage *bs, kr_item **items, int n)
{
    int done = 0;
    while (done < n) {
        /* the GPU failed on an earlier chunk of this group: the rest moves to the CPU too */
        if (items[done]->on_cuda && gpu_failed(s)) {
            n = done + demote_all(bs, items + done, n - done);
            if (done >= n)
                break;
        }
        int lg = 0;
        while (lg < KR_MAX_BATCH_LOG2 && (1 << (lg + 1)) <= n - done && (1 << (lg + 1)) <= s->batch)
            lg++;
        int m = 1 << lg;
        kr_item **chunk = items + done;
        done += m;
        keyer_error e = {0};
        keyer_status rs;
        if (chunk[0]->on_cuda) { /* the check above demoted them if the GPU had failed */
            rs = injected_failure(s, chunk, m, &e);
            if (!rs && !bs->cuda)
                rs = bs->cpu_runtime(s, lg, &e);
            if (!rs)
                rs = bs->cuda ? bs->run_cuda(s, chunk, m, lg, &e)
                              : bs->run_hybrid(s, chunk, m, lg, &e);
            if (rs && device_error(s, rs, &e)) {
                /* the chunk goes again, on the CPU; items that cannot leave the GPU are lost */
                int k = demote_all(bs, chunk, m);
                if (k)
                    run_group(s, bs, chunk, k);
                continue;
            }
        } else {
            rs = bs->cpu_runtime(s, lg, &e);
            if (!rs)
                rs = bs->run_cpu(s, chunk, m, lg, &e);
        }
        if (rs)
            for (int i = 0; i < m; i++)
                kr_item_fail(chunk[i], rs, &e, bs->name);
    }
}

void kr_batch_stage_run(keyer_session *s, const kr_batch_stage *bs, int track)
{
    kr_item *items[64];
    kr_item *run[64], *run_cpu[64];
    for (;;) {
        int n = 0, full = 0;
        void **slots = (void **)items;
        if (kr_queue_pop_batch(bs->in, slots, s->batch, s->batch_wait_ns, &n, &full) != KEYER_OK)
            break;
        int64_t t0 = kr_clock_ns();
        /* after a GPU failure, CUDA items come over to the CPU first */
        if (gpu_failed(s))
            for (int i = 0; i < n; i++)
                if (items[i]->on_cuda && !items[i]->lost && !items[i]->failed)
                    kr_item_demote(items[i], bs->need, bs->stream);
        /* group by device (both groups first: a failing CUDA group moves its items to the
         * CPU and runs them there itself), keeping failed and lost items out of the runs */
        int ncuda = 0, ncpu = 0;
        for (int i = 0; i < n; i++)
            if (!items[i]->lost && !items[i]->failed) {
                if (items[i]->on_cuda)
                    run[ncuda++] = items[i];
                else
                    run_cpu[ncpu++] = items[i];
            }
        if (ncuda)
            run_group(s, bs, run, ncuda);
        if (ncpu)
            run_group(s, bs, run_cpu, ncpu);
        int64_t t1 = kr_clock_ns();
        if (bs->count_batches) {
            atomic_fetch_add(&s->batches, 1);
            atomic_fetch_add(&s->batch_frames, n);
            if (full)
                atomic_fetch_add(&s->batches_full, 1);
        }
        kr_stage_stats_record(&s->stages[bs->stage], n, t0, t1);
        kr_trace_add(s->trace, track, bs->name, n == 1 ? items[0]->stream->id : -1,
                     n == 1 ? items[0]->seq : -1, n, t0, t1);
        for (int i = 0; i < n; i++) {
            if (bs->forward(s, items[i])) {
                for (int k = i; k < n; k++)
                    kr_item_release(items[k]);
                return;
            }
        }
    }
}

static int to_refine(keyer_session *s, kr_item *it)
{
    return kr_queue_push(s->refine_q, it) != KEYER_OK;
}

void *kr_infer_main(void *arg)
{
    keyer_session *s = arg;
    kr_batch_stage bs = {"infer", KR_ST_INFER, KR_NEED_TENSOR, s->infer_q, s->infer_stream,
                         s->infer_cuda, 1, cpu_runtime, infer_cpu, infer_cuda, infer_hybrid,
                         to_refine};
    kr_batch_stage_run(s, &bs, s->track_infer);
    return NULL;
}

/* ---- refine (one thread: each stream's frames in order) ----------------------------------------- */

static keyer_status refine_object(keyer_session *s, int cuda, keyer_refine **out,
                                  keyer_error *err)
{
    if (!s->refine[cuda]) {
        keyer_refine_params rp = s->params.refine;
        rp.max_streams = s->params.max_streams;
        rp.threads = s->serial_threads;
        rp.stream = cuda ? s->refine_stream : NULL;
        keyer_status rs = keyer_refine_create(&rp, &s->refine[cuda], err);
        if (rs)
            return rs;
    }
    *out = s->refine[cuda];
    return KEYER_OK;
}

static keyer_status refine_item(keyer_session *s, kr_item *it, keyer_error *err)
{
    for (;;) {
        if (it->on_cuda && gpu_failed(s)) {
            kr_item_demote(it, KR_NEED_MASK, s->refine_stream);
            if (it->lost)
                return KEYER_OK;
        }
        int cuda = it->on_cuda;
        kr_item_bufs *b = cuda ? &it->cuda : &it->host;
        keyer_refine *ref = NULL;
        keyer_status rs = refine_object(s, cuda, &ref, err);
        if (!rs) {
            /* the part of the mask covering the frame (letterboxed models) */
            keyer_rectf region, *rp = NULL;
            if (s->letterbox) {
                float sx = (float)s->mask_w / (float)s->in_w;
                float sy = (float)s->mask_h / (float)s->in_h;
                region.x = it->geom.content.x * sx;
                region.y = it->geom.content.y * sy;
                region.width = it->geom.content.width * sx;
                region.height = it->geom.content.height * sy;
                rp = &region;
            }
            rs = keyer_refine_run(ref, it->stream->id, it->src, b->mask_frame, rp, b->alpha, err);
        }
        if (!rs && cuda)
            rs = s->dev->stream_sync(s->ordinal, s->refine_stream, err);
        if (rs && cuda && device_error(s, rs, err)) {
            keyer_error_clear(err);
            continue;
        }
        return rs;
    }
}

void *kr_refine_main(void *arg)
{
    keyer_session *s = arg;
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(s->refine_q, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        if (!it->lost && !it->failed) {
            int64_t t0 = kr_clock_ns();
            keyer_error e = {0};
            keyer_status rs = refine_item(s, it, &e);
            if (rs)
                kr_item_fail(it, rs, &e, "refine");
            int64_t t1 = kr_clock_ns();
            kr_stage_stats_record(&s->stages[KR_ST_REFINE], 1, t0, t1);
            kr_trace_add(s->trace, s->track_refine, "refine", it->stream->id, it->seq, 1, t0, t1);
        }
        if (kr_queue_push(s->comp_q, it)) {
            kr_item_release(it);
            break;
        }
    }
    return NULL;
}

/* ---- composite (W workers; the reorder buffer restores the order) -------------------------------- */

static keyer_status composite_object(kr_comp_worker *cw, kr_item *it, int cuda,
                                     keyer_composite **out, keyer_error *err)
{
    keyer_session *s = cw->session;
    int id = it->stream->id;
    keyer_status rs;
    if (!cw->comp[cuda][id]) {
        keyer_composite_params cp = s->params.composite;
        cp.threads = s->threads / s->workers;
        if (cp.threads < 1)
            cp.threads = 1;
        cp.stream = cuda ? cw->cuda_stream : NULL;
        if ((rs = keyer_composite_create(&cp, &cw->comp[cuda][id], err)))
            return rs;
        cw->bg_set[cuda][id] = 0;
    }
    keyer_composite *c = cw->comp[cuda][id];
    if (s->params.composite.mode == KEYER_COMPOSITE_IMAGE) {
        if (it->bg) {
            if ((rs = keyer_composite_set_background(c, it->bg, err)))
                return rs;
            cw->bg_set[cuda][id] = 0;
        } else if (!cw->bg_set[cuda][id]) {
            const keyer_frame *still = s->bg_image[cuda];
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

static keyer_status composite_item(kr_comp_worker *cw, kr_item *it, keyer_error *err)
{
    keyer_session *s = cw->session;
    for (;;) {
        if (it->on_cuda && gpu_failed(s)) {
            kr_item_demote(it, KR_NEED_ALPHA, cw->cuda_stream);
            if (it->lost)
                return KEYER_OK;
        }
        int cuda = it->on_cuda;
        kr_item_bufs *b = cuda ? &it->cuda : &it->host;
        keyer_composite *c = NULL;
        keyer_status rs = composite_object(cw, it, cuda, &c, err);
        if (!rs)
            rs = keyer_composite_run(c, it->src, b->alpha, b->out, err);
        if (!rs && cuda)
            rs = s->dev->stream_sync(s->ordinal, cw->cuda_stream, err);
        if (rs && cuda && device_error(s, rs, err)) {
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

void *kr_composite_main(void *arg)
{
    kr_comp_worker *cw = arg;
    keyer_session *s = cw->session;
    for (;;) {
        void *p = NULL;
        if (kr_queue_pop(s->comp_q, &p) != KEYER_OK)
            break;
        kr_item *it = p;
        if (!it->lost && !it->failed) {
            int64_t t0 = kr_clock_ns();
            keyer_error e = {0};
            keyer_status rs = composite_item(cw, it, &e);
            if (rs)
                kr_item_fail(it, rs, &e, "composite");
            int64_t t1 = kr_clock_ns();
            kr_stage_stats_record(&s->stages[KR_ST_COMPOSITE], 1, t0, t1);
            kr_trace_add(s->trace, cw->track, "composite", it->stream->id, it->seq, 1, t0, t1);
        }
        keyer_error e = {0};
        if (kr_reorder_put(it->stream->done, it->seq, it, &e)) {
            keyer_log(s->logger, KEYER_LOG_ERROR, "%s", e.message);
            kr_item_release(it);
        }
    }
    return NULL;
}
