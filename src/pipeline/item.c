/* Items: the pool, their buffers, moving frames between memories, demotion to the CPU. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/item.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/alloc.h"

/* ---- moving frames between memories ---------------------------------------------------------- */

keyer_status kr_frame_download(const kr_device_fns *dev, keyer_frame *dst,
                               const keyer_frame *src, void *stream, keyer_error *err)
{
    if (src->memory != KEYER_MEMORY_CUDA)
        return keyer_frame_copy(dst, src, err);
    if (!dev)
        dev = kr_device_cuda();
    if (dst->format != src->format || dst->width != src->width || dst->height != src->height ||
        dst->memory != KEYER_MEMORY_HOST) {
        keyer_status rs = keyer_frame_alloc(dst, src->format, src->width, src->height, NULL, err);
        if (rs)
            return rs;
    }
    return kr_device_frame_copy(dev, src->device, dst, src, stream, err);
}

/* Makes *@p slot a frame like @p src in CUDA memory of @p ordinal (@p cuda) or host memory,
 * keeping the one there when it already is. */
static keyer_status stage_slot(const kr_device_fns *dev, int ordinal, keyer_frame **slot,
                               const keyer_frame *src, int cuda, keyer_error *err)
{
    keyer_status rs = KEYER_OK;
    if (!*slot && (rs = keyer_frame_create(slot, err)))
        return rs;
    keyer_frame *d = *slot;
    keyer_memory_type want = cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    if (!d->data[0] || d->format != src->format || d->width != src->width ||
        d->height != src->height || d->memory != want) {
        if (cuda)
            rs = kr_device_frame_alloc(dev, ordinal, d, src->format, src->width, src->height,
                                       err);
        else
            rs = keyer_frame_alloc(d, src->format, src->width, src->height, NULL, err);
    }
    return rs;
}

keyer_status kr_frame_stage(const kr_device_fns *dev, int ordinal, keyer_frame **slot,
                            const keyer_frame *src, int cuda, void *stream, keyer_error *err)
{
    keyer_status rs = stage_slot(dev, ordinal, slot, src, cuda, err);
    if (rs)
        return rs;
    const kr_device_fns *copier = dev ? dev : kr_device_cuda();
    int on = src->memory == KEYER_MEMORY_CUDA ? src->device : ordinal;
    return kr_device_frame_copy(copier, on, *slot, src, stream, err);
}

/* As kr_frame_stage into CUDA memory, but the copy is only queued on @p stream (the host
 * does not wait; @p src must stay as it is until the copy is done). */
static keyer_status stage_to_device(const kr_device_fns *dev, int ordinal, keyer_frame **slot,
                                    const keyer_frame *src, void *stream, keyer_error *err)
{
    keyer_status rs = stage_slot(dev, ordinal, slot, src, 1, err);
    if (rs)
        return rs;
    int on = src->memory == KEYER_MEMORY_CUDA ? src->device : ordinal;
    return kr_device_frame_copy_async(dev, on, *slot, src, stream, err);
}

/* Stages @p src for the item: queued on the copy stream for a CUDA item (its ready event,
 * recorded by prepare after its own work, covers it), complete on return for a host item. */
static keyer_status stage_for(kr_item *it, keyer_frame **slot, const keyer_frame *src,
                              keyer_error *err)
{
    const kr_item_layout *l = &it->pool->layout;
    if (it->on_cuda)
        return stage_to_device(l->dev, l->ordinal, slot, src, l->copy_stream, err);
    return kr_frame_stage(l->dev, l->ordinal, slot, src, 0, l->copy_stream, err);
}

/* ---- buffers ---------------------------------------------------------------------------------- */

static keyer_status wrap_mask(const kr_item_layout *l, kr_item_bufs *b, int cuda,
                              keyer_error *err)
{
    keyer_status st = keyer_frame_create(&b->mask_frame, err);
    if (st)
        return st;
    keyer_frame *m = b->mask_frame;
    m->format = KEYER_PIXEL_FORMAT_GRAYF32;
    m->width = l->mask_w;
    m->height = l->mask_h;
    m->memory = cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    m->device = cuda ? l->ordinal : 0;
    m->data[0] = (uint8_t *)b->mask;
    m->stride[0] = (ptrdiff_t)l->mask_w * (ptrdiff_t)sizeof(float);
    return KEYER_OK;
}

static size_t mask_bytes(const kr_item_layout *l)
{
    return (size_t)l->mask_w * (size_t)l->mask_h * sizeof(float);
}

/* Allocates a frame in host or device memory. */
static keyer_status frame_alloc(const kr_item_layout *l, int cuda, keyer_frame **f,
                                keyer_pixel_format format, keyer_error *err)
{
    keyer_status st = KEYER_OK;
    if (!*f && (st = keyer_frame_create(f, err)))
        return st;
    if (cuda)
        return kr_device_frame_alloc(l->dev, l->ordinal, *f, format, l->width, l->height, err);
    return keyer_frame_alloc(*f, format, l->width, l->height, NULL, err);
}

static keyer_status inputs_cuda(const kr_item_layout *l, kr_item_bufs *b, keyer_error *err)
{
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < l->inputs && !rs; i++)
        rs = l->dev->alloc(l->ordinal, l->input_bytes[i], &b->input[i], err);
    if (!rs && l->mask_w)
        rs = l->dev->alloc(l->ordinal, mask_bytes(l), (void **)&b->mask, err);
    if (!rs)
        rs = l->blocking_events && l->dev->event_create_blocking
                 ? l->dev->event_create_blocking(l->ordinal, &b->ready, err)
                 : l->dev->event_create(l->ordinal, &b->ready, err);
    return rs;
}

static keyer_status inputs_host(const kr_item_layout *l, kr_item_bufs *b, keyer_error *err)
{
    int missing = 0;
    for (int i = 0; i < l->inputs; i++) {
        b->input[i] = keyer_alloc(NULL, l->input_bytes[i], KEYER_ALIGNMENT);
        missing |= !b->input[i];
    }
    if (l->mask_w) {
        b->mask = keyer_alloc(NULL, mask_bytes(l), KEYER_ALIGNMENT);
        missing |= !b->mask;
    }
    if (missing)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "stream %d: cannot allocate its frame buffers", l->stream);
    return KEYER_OK;
}

keyer_status kr_item_inputs_ensure(kr_item *it, int cuda, keyer_error *err)
{
    kr_item_bufs *b = cuda ? &it->cuda : &it->host;
    if (b->inputs_ready)
        return KEYER_OK;
    const kr_item_layout *l = &it->pool->layout;
    keyer_status rs = cuda ? inputs_cuda(l, b, err) : inputs_host(l, b, err);
    if (!rs && l->mask_w)
        rs = wrap_mask(l, b, cuda, err);
    if (rs) {
        keyer_error_prefix(err, "stream %d: ", l->stream);
        return rs;
    }
    b->inputs_ready = 1;
    return KEYER_OK;
}

keyer_status kr_item_bufs_ensure(kr_item *it, int cuda, keyer_error *err)
{
    kr_item_bufs *b = cuda ? &it->cuda : &it->host;
    if (b->complete)
        return KEYER_OK;
    const kr_item_layout *l = &it->pool->layout;
    keyer_status rs = kr_item_inputs_ensure(it, cuda, err);
    if (rs)
        return rs;
    if (!l->mask_w) { /* passthrough with detection: the frame itself is written */
        b->complete = 1;
        return KEYER_OK;
    }
    if ((rs = frame_alloc(l, cuda, &b->alpha, KEYER_PIXEL_FORMAT_GRAY8, err)) ||
        (rs = frame_alloc(l, cuda, &b->out, l->out_format, err)))
        return keyer_error_prefix(err, "stream %d: ", l->stream);
    b->complete = 1;
    return KEYER_OK;
}

static void bufs_free(const kr_item_layout *l, kr_item_bufs *b, int cuda)
{
    for (int i = 0; i < KR_ITEM_MAX_INPUTS; i++) {
        if (cuda && l->dev)
            l->dev->free(l->ordinal, b->input[i]);
        else if (!cuda)
            keyer_free(NULL, b->input[i]);
        b->input[i] = NULL;
    }
    if (cuda && l->dev) {
        l->dev->free(l->ordinal, b->mask);
        l->dev->event_destroy(l->ordinal, b->ready);
    } else if (!cuda) {
        keyer_free(NULL, b->mask);
    }
    b->mask = NULL;
    b->ready = NULL;
    keyer_frame_destroy(&b->mask_frame);
    keyer_frame_destroy(&b->alpha);
    keyer_frame_destroy(&b->out);
    keyer_frame_destroy(&b->staged);
    keyer_frame_destroy(&b->bg);
    b->complete = b->inputs_ready = b->ready_set = 0;
}

/* ---- the pool --------------------------------------------------------------------------------- */

/* Returns received frames' items to their pool, even after the pool is gone. */
struct kr_pool_home {
    atomic_int refs;
    pthread_mutex_t lock;
    int alive;
};

static void home_unref(kr_pool_home *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
}

static void ticket_free(void *opaque, void *data)
{
    kr_pool_home *h = opaque;
    pthread_mutex_lock(&h->lock);
    if (h->alive)
        kr_item_release(data);
    pthread_mutex_unlock(&h->lock);
    home_unref(h);
}

keyer_status kr_item_ticket(kr_item *it, keyer_buffer **ticket, keyer_error *err)
{
    kr_pool_home *h = it->pool->home;
    keyer_status rs = keyer_buffer_wrap(it, 1, KEYER_MEMORY_HOST, ticket_free, h, ticket, err);
    if (!rs)
        atomic_fetch_add(&h->refs, 1);
    return rs;
}

keyer_status kr_item_pool_create(const kr_item_layout *layout, int count, int buffers, int cuda,
                                 kr_reorder *done, kr_item_pool **out, keyer_error *err)
{
    *out = NULL;
    kr_item_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "stream %d: out of memory",
                               layout->stream);
    p->layout = *layout;
    p->done = done;
    p->items = calloc((size_t)count, sizeof(*p->items));
    p->home = calloc(1, sizeof(*p->home));
    keyer_status rs;
    if (!p->items || !p->home) {
        free(p->home);
        p->home = NULL;
        rs = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "stream %d: out of memory",
                             layout->stream);
        goto fail;
    }
    p->count = count;
    pthread_mutex_init(&p->home->lock, NULL);
    atomic_init(&p->home->refs, 1);
    p->home->alive = 1;
    if ((rs = kr_queue_create(count, &p->free, err)))
        goto fail;
    const kr_stage_ctx *ctx = layout->ctx;
    for (int i = 0; i < count; i++) {
        kr_item *it = &p->items[i];
        it->pool = p;
        it->stream = layout->stream;
        it->seq = -1;
        if ((rs = keyer_frame_create(&it->frame, err)) ||
            (rs = keyer_frame_create(&it->bg_src, err)))
            goto fail;
        if (buffers) {
            int on_cuda = cuda && !kr_stage_gpu_failed(ctx);
            rs = kr_item_bufs_ensure(it, on_cuda, err);
            if (rs == KEYER_STATUS_OUT_OF_MEMORY && on_cuda) {
                /* no room on the GPU for this stream's frames: the session goes on on the CPU */
                kr_stage_gpu_failure(ctx, err);
                keyer_error_clear(err);
                rs = kr_item_bufs_ensure(it, 0, err);
            }
            if (rs)
                goto fail;
        }
        kr_queue_try_push(p->free, it);
    }
    *out = p;
    return KEYER_OK;
fail:
    kr_item_pool_destroy(&p);
    return rs;
}

void kr_item_pool_cancel(kr_item_pool *pool)
{
    if (pool)
        kr_queue_cancel(pool->free);
}

void kr_item_pool_destroy(kr_item_pool **pp)
{
    if (!pp || !*pp)
        return;
    kr_item_pool *p = *pp;
    if (p->home) {
        pthread_mutex_lock(&p->home->lock);
        p->home->alive = 0;
        pthread_mutex_unlock(&p->home->lock);
        home_unref(p->home);
    }
    if (p->items) {
        for (int i = 0; i < p->count; i++) {
            kr_item *it = &p->items[i];
            keyer_frame_destroy(&it->frame);
            keyer_frame_destroy(&it->bg_src);
            keyer_frame_destroy(&it->input_copy);
            bufs_free(&p->layout, &it->host, 0);
            bufs_free(&p->layout, &it->cuda, 1);
            free(it->faces);
        }
        free(p->items);
    }
    kr_queue_destroy(&p->free);
    free(p);
    *pp = NULL;
}

kr_item *kr_item_pool_take(kr_item_pool *pool, int wait)
{
    void *p = NULL;
    if (wait ? kr_queue_pop(pool->free, &p) : kr_queue_try_pop(pool->free, &p))
        return NULL;
    return p;
}

kr_item *kr_item_pool_take_timed(kr_item_pool *pool, int64_t timeout_ns, int *stopped)
{
    void *p = NULL;
    keyer_status st = kr_queue_pop_timed(pool->free, &p, timeout_ns);
    *stopped = st != KEYER_OK && st != KEYER_STATUS_AGAIN;
    return st ? NULL : p;
}

void kr_item_release(kr_item *it)
{
    keyer_frame_unref(it->frame);
    keyer_frame_unref(it->bg_src);
    it->src = NULL;
    it->bg = NULL;
    it->lost = it->failed = 0;
    it->cuda.ready_set = 0;
    it->n_faces = 0;
    it->seq = -1;
    /* the free list holds every item, so it is never full */
    kr_queue_try_push(it->pool->free, it);
}

void kr_item_done(kr_item *it)
{
    keyer_error e = {0};
    if (kr_reorder_put(it->pool->done, it->seq, it, &e)) {
        keyer_log(it->pool->layout.ctx->logger, KEYER_LOG_ERROR, "%s", e.message);
        kr_item_release(it);
    }
}

void kr_item_fail(kr_item *it, keyer_status status, keyer_error *err, const char *stage)
{
    it->failed = 1;
    keyer_error_prefix(err, "stream %d, frame %lld, %s: ", it->stream, (long long)it->seq, stage);
    kr_stage_fail(it->pool->layout.ctx, it->stream, status, err);
}

/* ---- devices ---------------------------------------------------------------------------------- */

keyer_status kr_item_place_source(kr_item *it, keyer_error *err)
{
    const kr_item_layout *l = &it->pool->layout;
    kr_item_bufs *b = kr_item_bufs_of(it);
    keyer_memory_type want = it->on_cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    keyer_status rs;
    if (it->frame->memory == want &&
        (want == KEYER_MEMORY_HOST || it->frame->device == l->ordinal)) {
        it->src = it->frame;
    } else {
        if ((rs = stage_for(it, &b->staged, it->frame, err)))
            return rs;
        it->src = b->staged;
    }
    it->bg = NULL;
    if (it->bg_src->data[0]) {
        if (it->bg_src->memory == want) {
            it->bg = it->bg_src;
        } else {
            if ((rs = stage_for(it, &b->bg, it->bg_src, err)))
                return rs;
            it->bg = b->bg;
        }
    }
    return KEYER_OK;
}

keyer_status kr_item_wait(kr_item *it, void *stream, keyer_error *err)
{
    if (!it->on_cuda || !it->cuda.ready_set)
        return KEYER_OK;
    const kr_item_layout *l = &it->pool->layout;
    return l->dev->event_wait(l->ordinal, stream, it->cuda.ready, err);
}

keyer_status kr_item_record(kr_item *it, void *stream, keyer_error *err)
{
    const kr_item_layout *l = &it->pool->layout;
    keyer_status rs = l->dev->event_record(l->ordinal, it->cuda.ready, stream, err);
    if (!rs)
        it->cuda.ready_set = 1;
    return rs;
}

keyer_status kr_item_sync(kr_item *it, keyer_error *err)
{
    if (!it->on_cuda || !it->cuda.ready_set)
        return KEYER_OK;
    const kr_item_layout *l = &it->pool->layout;
    return l->dev->event_sync(l->ordinal, it->cuda.ready, err);
}

/* One device-to-host copy of @p bytes on @p stream. */
static keyer_status download(const kr_item_layout *l, void *dst, const void *src, size_t bytes,
                             void *stream, keyer_error *err)
{
    return l->dev->copy(l->ordinal, dst, src, bytes, stream, err);
}

/*
 * Moves a CUDA item to the CPU after a GPU failure: downloads what the next stage reads
 * (the inputs before a model stage, the mask before refine, the matte before composite) and
 * the frames. A failed download marks the item lost.
 */
void kr_item_demote(kr_item *it, int need, void *stream)
{
    const kr_item_layout *l = &it->pool->layout;
    keyer_error e = {0};
    keyer_status rs = kr_item_bufs_ensure(it, 0, &e);
    if (!rs)
        rs = kr_item_wait(it, stream, &e);
    for (int i = 0; i < l->inputs && !rs; i++)
        if (need & KR_NEED_INPUT(i))
            rs = download(l, it->host.input[i], it->cuda.input[i], l->input_bytes[i], stream,
                          &e);
    if (!rs && (need & KR_NEED_MASK))
        rs = download(l, it->host.mask, it->cuda.mask, mask_bytes(l), stream, &e);
    if (!rs && (need & KR_NEED_ALPHA))
        rs = kr_device_frame_copy(l->dev, l->ordinal, it->host.alpha, it->cuda.alpha, stream,
                                  &e);
    if (!rs)
        rs = l->dev->stream_sync(l->ordinal, stream, &e);
    if (!rs) {
        it->on_cuda = 0;
        rs = kr_item_place_source(it, &e);
    }
    if (rs) {
        it->lost = 1;
        keyer_log(l->ctx->logger, KEYER_LOG_ERROR,
                  "stream %d: frame %lld is lost: it could not be moved off the GPU: %s",
                  it->stream, (long long)it->seq, e.message);
    }
}
