/* The streams' sinks: the writer thread, detect_fn and frame_fn, frames pulled by the caller. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "pipeline/clock.h"
#include "pipeline/handoff.h"
#include "pipeline/stream.h"

/* A frame left the pipeline: counted, and its latency recorded. */
static void account_out(kr_stream *st, kr_item *it)
{
    atomic_fetch_add(&st->frames_written, 1);
    kr_output_stats_add(st->env->out, it->t_in, kr_clock_ns());
}

/* A copy of @p f in *slot, in CUDA memory when @p cuda else host memory (made on the first
 * frame and when the size changes), on the sink's CUDA stream. */
static keyer_status copy_frame(kr_stream *st, keyer_frame **slot, const keyer_frame *f,
                               int cuda, keyer_error *err)
{
    const kr_item_layout *l = &st->env->layout;
    keyer_status rs = kr_frame_stage(l->dev, l->ordinal, slot, f, cuda, st->sink_stream, err);
    if (rs)
        return rs;
    keyer_frame *d = *slot;
    d->pts = f->pts;
    d->duration = f->duration;
    d->time_base = f->time_base;
    d->flags = f->flags;
    d->matrix = f->matrix;
    d->range = f->range;
    return KEYER_OK;
}

/* Calls the session's frame_fn with host frames; *out becomes the frame to write. */
static keyer_status call_frame_fn(kr_stream *st, kr_item *it, const keyer_frame **out,
                                  keyer_error *err)
{
    const keyer_session_params *p = st->env->params;
    const keyer_frame *in = it->frame && it->frame->data[0] ? it->frame : it->src;
    keyer_status rs = KEYER_OK;
    if (in->memory != KEYER_MEMORY_HOST) {
        if ((rs = copy_frame(st, &st->hook_in, in, 0, err)))
            return rs;
        in = st->hook_in;
    }
    keyer_frame *w = NULL;
    if ((p->passthrough && *out == it->src) || (*out)->memory != KEYER_MEMORY_HOST) {
        if ((rs = copy_frame(st, &st->hook_out, *out, 0, err)))
            return rs;
        w = st->hook_out;
    } else {
        w = (keyer_frame *)*out; /* the item's own composite buffer */
    }
    if ((rs = p->frame_fn(p->frame_opaque, st->id, it->seq + st->seq_base, in, w, err)))
        return rs;
    *out = w;
    return KEYER_OK;
}

/* Runs detect_fn for the item and draws what it added on *out (in place when @p own, else on
 * the stream's copy, which *out then points at), on the device where the frame is. */
static keyer_status draw_detections(kr_stream *st, kr_item *it, const keyer_frame **out,
                                    int own, keyer_error *err)
{
    const kr_stream_env *env = st->env;
    const keyer_session_params *p = env->params;
    keyer_overlay_clear(st->overlay);
    const keyer_frame *in = it->frame && it->frame->data[0] ? it->frame : it->src;
    keyer_status rs =
        p->pose   ? p->pose_fn(p->pose_opaque, st->id, it->seq + st->seq_base, in, it->dets,
                               it->n_dets, &it->pose, st->overlay, err)
        : p->mesh ? p->faces_fn(p->faces_opaque, st->id, it->seq + st->seq_base, in, it->faces,
                                it->n_faces, st->overlay, err)
                  : p->detect_fn(p->detect_opaque, st->id, it->seq + st->seq_base, in, it->dets,
                                 it->n_dets, st->overlay, err);
    if (rs || keyer_overlay_count(st->overlay) == 0)
        return rs;
    for (;;) {
        const keyer_frame *o = *out;
        int cuda = o->memory == KEYER_MEMORY_CUDA && !kr_stage_gpu_failed(env->ctx);
        keyer_frame *target = NULL;
        if (own && (o->memory == KEYER_MEMORY_HOST || cuda)) {
            target = (keyer_frame *)o; /* the item's own output buffer */
        } else {
            if ((rs = copy_frame(st, &st->drawn, o, cuda, err)))
                goto failed;
            target = st->drawn;
        }
        if ((rs = keyer_overlay_render(st->overlay, target, err)))
            goto failed;
        if (cuda &&
            (rs = env->layout.dev->stream_sync(env->layout.ordinal, st->sink_stream, err)))
            goto failed;
        *out = target;
        return KEYER_OK;
    failed:
        if (!cuda || (rs != KEYER_STATUS_DEVICE && rs != KEYER_STATUS_OUT_OF_MEMORY))
            return rs;
        /* the GPU failed: the frame is drawn on the host (when it can still come down) */
        kr_stage_gpu_failure(env->ctx, err);
        keyer_error_clear(err);
        own = 0;
    }
}

/* The item's output in host memory when the GPU failed, else where it is; NULL (error in
 * *err and *rs) when it cannot be had. */
static const keyer_frame *output_of(kr_stream *st, kr_item *it, keyer_error *err,
                                    keyer_status *rs)
{
    const kr_stream_env *env = st->env;
    *rs = KEYER_OK;
    if (env->params->passthrough)
        return it->src;
    if (!it->on_cuda)
        return it->host.out;
    if (!kr_stage_gpu_failed(env->ctx))
        return it->cuda.out;
    /* the GPU failed after this frame was composited there: bring it over */
    if ((*rs = kr_item_bufs_ensure(it, 0, err)) ||
        (*rs = kr_frame_download(env->layout.dev, it->host.out, it->cuda.out, st->sink_stream,
                                 err)))
        return NULL;
    return it->host.out;
}

/* The host waits for the device work on a CUDA item (the writer, frame_fn and the caller read
 * its frames). Returns 0 when that failed: a GPU failure, reported; the frame is lost. */
static int item_ready(kr_stream *st, kr_item *it)
{
    keyer_error e = {0};
    keyer_status rs = kr_item_sync(it, &e);
    if (!rs)
        return 1;
    kr_stage_device_error(st->env->ctx, rs, &e);
    atomic_fetch_add(&st->frames_lost, 1);
    keyer_log(st->env->ctx->logger, KEYER_LOG_ERROR, "stream %d: frame %lld lost: %s", st->id,
              (long long)it->seq, e.message);
    return 0;
}

/* Draws, calls frame_fn and writes one finished item; returns 0 when the stream stops
 * writing (after an error, reported). */
static int write_item(kr_stream *st, kr_item *it, int track)
{
    const kr_stream_env *env = st->env;
    int64_t t0 = kr_clock_ns();
    if (!item_ready(st, it))
        return 1;
    keyer_error e = {0};
    keyer_status rs = KEYER_OK;
    const keyer_frame *out = output_of(st, it, &e, &rs);
    if (!out) {
        atomic_fetch_add(&st->frames_lost, 1);
        keyer_log(env->ctx->logger, KEYER_LOG_ERROR, "stream %d: frame %lld lost: %s", st->id,
                  (long long)it->seq, e.message);
        return 1;
    }
    /* keyed outputs are the item's own buffers: drawn on in place */
    if (env->detect && (rs = draw_detections(st, it, &out, !env->params->passthrough, &e))) {
        keyer_error_prefix(&e, "stream %d, frame %lld: ", st->id, (long long)it->seq);
    } else if (env->params->frame_fn && (rs = call_frame_fn(st, it, &out, &e))) {
        keyer_error_prefix(&e, "stream %d, frame %lld: ", st->id, (long long)it->seq);
    } else if (st->writer && st->continuation && out->memory == KEYER_MEMORY_CUDA &&
               (rs = copy_frame(st, &st->hook_out, out, 0, &e))) {
        /* the writer came from a failed GPU (its encoder's device is not this one): it gets
         * host frames */
        keyer_error_prefix(&e, "stream %d, frame %lld: ", st->id, (long long)it->seq);
    } else if (st->writer &&
               (rs = keyer_writer_write(st->writer,
                                        st->continuation && out->memory == KEYER_MEMORY_CUDA
                                            ? st->hook_out
                                            : out,
                                        &e))) {
        keyer_error_prefix(&e, "writing %s: ", st->output);
    } else {
        int64_t t1 = kr_clock_ns();
        kr_stage_stats_record(env->write_stats, 1, t0, t1);
        kr_trace_add(env->ctx->trace, track, "write", st->id, it->seq, 1, t0, t1);
        account_out(st, it);
        return 1;
    }
    kr_stage_fail(env->ctx, st->id, rs, &e);
    return 0;
}

/* A continuation's sink: waits for the stream it continues to hand over its output (and to
 * have made every callback of its frames). Returns 0 when this stream must not write: that
 * stream failed, or the session stops. */
static int take_output(kr_stream *st)
{
    keyer_writer *w = NULL;
    int ok = kr_handoff_take(st->handoff_in, st->env->ctx->cancel, &w);
    if (ok <= 0) {
        if (ok == 0) {
            keyer_error e = {0};
            keyer_error_set(&e, KEYER_STATUS_IO,
                            "%s: the part read before the GPU failure did not complete; the "
                            "rest is not written", st->input);
            kr_stage_fail(st->env->ctx, st->id, KEYER_STATUS_IO, &e);
        }
        return 0;
    }
    st->writer = w;
    /* audio from here on; not for a reopened live source, whose audio pts are not shifted
     * (stream.h) */
    if (w && st->reader && !st->live) {
        keyer_error e = {0};
        keyer_writer_set_copy_source(w, st->reader, &e);
    }
    return 1;
}

void *kr_sink_main(void *arg)
{
    kr_stream *st = arg;
    const kr_stage_ctx *ctx = st->env->ctx;
    kr_thread_name("write");
    int track = kr_trace_thread(ctx->trace, "write", st->id);
    int writing = 1;
    if (st->continuation && st->handoff_in)
        writing = take_output(st);
    for (;;) {
        void *p = NULL;
        if (kr_reorder_take(st->done, &p, 1) != KEYER_OK)
            break;
        kr_item *it = p;
        if (it->lost)
            atomic_fetch_add(&st->frames_lost, 1);
        if (it->failed)
            writing = 0; /* the stream failed at this frame: its output ends before it */
        if (!it->lost && !it->failed && writing)
            writing = write_item(st, it, track);
        kr_item_release(it);
    }
    if (st->moved && st->handoff_out) {
        /* the rest of the input went to another GPU: its continuation writes on */
        int ok = !kr_stream_status(st, NULL) && writing;
        kr_handoff_give(st->handoff_out, ok ? st->writer : NULL, ok);
        if (ok)
            st->writer = NULL;
    }
    atomic_store(&st->sink_finished, 1);
    ctx->report(ctx->opaque, KR_REPORT_SINK_DONE, st->id, KEYER_OK, NULL);
    return NULL;
}

keyer_status kr_sink_receive(kr_stream *st, keyer_frame *out, int64_t timeout_us,
                             keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_receive_frame: out is NULL");
    if (st->sink != KR_SINK_PULL)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_receive_frame: stream %d writes to %s", st->id,
                               st->output);
    int64_t deadline = timeout_us > 0 ? kr_clock_ns() + timeout_us * 1000 : 0;
    for (;;) {
        void *p = NULL;
        keyer_status rs;
        if (timeout_us < 0) {
            rs = kr_reorder_take(st->done, &p, 1);
        } else {
            int64_t left = deadline ? deadline - kr_clock_ns() : 0;
            rs = kr_reorder_take_timed(st->done, &p, left > 0 ? left : 0);
        }
        if (rs == KEYER_STATUS_END) {
            keyer_status failed = kr_stream_status(st, err);
            return failed ? failed : KEYER_STATUS_END;
        }
        if (rs == KEYER_STATUS_INTERRUPTED)
            return keyer_error_set(err, rs, "keyer_session_receive_frame: the session stopped");
        if (rs)
            return rs; /* AGAIN */
        kr_item *it = p;
        if (it->lost || it->failed) {
            if (it->lost)
                atomic_fetch_add(&st->frames_lost, 1);
            kr_item_release(it);
            continue;
        }
        if (!item_ready(st, it)) { /* lost (counted) */
            kr_item_release(it);
            continue;
        }
        keyer_error e = {0};
        const keyer_frame *res = output_of(st, it, &e, &rs);
        if (!res) {
            atomic_fetch_add(&st->frames_lost, 1);
            kr_item_release(it);
            continue;
        }
        /* the session's detections are reported on the caller's thread, as the writer
         * reports them for the other streams; a failure fails the stream */
        if (st->env->detect &&
            (rs = draw_detections(st, it, &res, !st->env->params->passthrough, &e))) {
            keyer_error_prefix(&e, "stream %d, frame %lld: ", st->id, (long long)it->seq);
            kr_item_release(it);
            kr_stage_fail(st->env->ctx, st->id, rs, &e);
            if (err)
                *err = e;
            return rs;
        }
        /* out refers to the item's pixels; a ticket in an unused buffer slot returns the
         * item to the pool when the caller drops the frame */
        keyer_buffer *ticket = NULL;
        if ((rs = keyer_frame_ref(out, res, err)) || (rs = kr_item_ticket(it, &ticket, err))) {
            keyer_frame_unref(out);
            kr_item_release(it);
            return rs;
        }
        keyer_buffer_unref(&out->buf[KEYER_FRAME_MAX_PLANES - 1]);
        out->buf[KEYER_FRAME_MAX_PLANES - 1] = ticket;
        account_out(st, it);
        return KEYER_OK;
    }
}
