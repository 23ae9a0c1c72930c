/*
 * The session's detector (keyer_session_params::detect): the model and its runtimes, the
 * detector input of each frame (made by the stream's prepare thread, next to the keying
 * input), the detect stage that runs it batched across streams and decodes the boxes, and the
 * drawing of what detect_fn adds, on the device where the output frame is.
 *
 * Per batch on CUDA: the frames' inputs are gathered into the runtime's input, the graph is
 * replayed, and only the raw outputs (896 x 17 floats per frame for face-short, 61 KB) come to
 * the host, where anchors are decoded and weighted NMS runs. The frames never leave the GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "keyer/alloc.h"
#include "keyer/registry.h"
#include "pipeline/session_internal.h"

/* ---- set-up ---------------------------------------------------------------------------------- */

static size_t elements(const keyer_tensor_info *t)
{
    size_t n = 1;
    for (int d = 1; d < t->rank; d++) /* dims[0] is the batch */
        n *= (size_t)(t->dims[d] > 0 ? t->dims[d] : 0);
    return n;
}

keyer_status kr_detect_load(keyer_session *s, keyer_error *err)
{
    int full = s->params.detect == KEYER_SESSION_DETECT_FACES_FULL;
    snprintf(s->det_name, sizeof(s->det_name), "%s", full ? "face-full" : "face-short");
    char path[4096];
    keyer_status st = keyer_registry_resolve(s->det_name, path, sizeof(path), err);
    if (!st)
        st = keyer_model_load_file(path, &s->det_model, err);
    if (st)
        return keyer_error_prefix(err, "detection: ");
    keyer_detector_params dp = full ? keyer_detector_params_face_full()
                                    : keyer_detector_params_face_short();
    if (s->params.detect_min_score > 0)
        dp.min_score = s->params.detect_min_score;
    keyer_tensor_info in;
    if ((st = keyer_model_input_info(s->det_model, 0, &in, err)))
        return st;
    if (in.rank != 4 || in.dtype != KEYER_DTYPE_F32 || in.dims[1] != dp.input_height ||
        in.dims[2] != dp.input_width || in.dims[3] != 3)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "detection: %s: the input is not a float [1,%d,%d,3] image", path,
                               dp.input_height, dp.input_width);
    if ((st = keyer_detector_create(&dp, &s->decoder, err)))
        return st;
    size_t anchors = (size_t)keyer_detector_anchor_count(s->decoder);
    s->det_boxes = s->det_scores = -1;
    for (int i = 0; i < keyer_model_output_count(s->det_model); i++) {
        keyer_tensor_info o;
        if ((st = keyer_model_output_info(s->det_model, i, &o, err)))
            return st;
        size_t n = elements(&o);
        if (o.dtype != KEYER_DTYPE_F32)
            continue;
        if (s->det_boxes < 0 && n == anchors * (size_t)dp.num_coords)
            s->det_boxes = i;
        else if (s->det_scores < 0 && n == anchors)
            s->det_scores = i;
    }
    if (s->det_boxes < 0 || s->det_scores < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "detection: %s: expected outputs of %zu x %d box values and %zu "
                               "scores", path, anchors, dp.num_coords, anchors);
    s->det_w = dp.input_width;
    s->det_h = dp.input_height;
    s->det_box_count = anchors * (size_t)dp.num_coords;
    s->det_score_count = anchors;
    s->det_tensor_bytes = (size_t)s->det_w * (size_t)s->det_h * 3 * sizeof(float);
    return KEYER_OK;
}

keyer_status kr_detect_runtimes(keyer_session *s, int cuda, int batch, keyer_error *err)
{
    keyer_status st = kr_session_runtimes(s, s->det_model, s->det_name, s->det_rt[cuda], cuda,
                                          batch, cuda ? s->detect_stream : NULL, 1, err);
    if (st)
        return keyer_error_prefix(err, "detection: ");
    if (cuda && !s->det_out) {
        s->det_out = keyer_alloc(NULL,
                                 (size_t)s->batch * (s->det_box_count + s->det_score_count) *
                                     sizeof(float),
                                 KEYER_ALIGNMENT);
        if (!s->det_out)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                   "detection: out of memory");
    }
    return KEYER_OK;
}

void kr_detect_free(keyer_session *s)
{
    for (int d = 0; d < 2; d++)
        for (int b = 0; b <= KR_MAX_BATCH_LOG2; b++)
            keyer_runtime_destroy(&s->det_rt[d][b]);
    keyer_free(NULL, s->det_out);
    s->det_out = NULL;
    keyer_detector_destroy(&s->decoder);
    keyer_model_destroy(&s->det_model);
}

/* ---- per frame: input and decoding ------------------------------------------------------------- */

keyer_status kr_detect_prepare(kr_item *it, keyer_error *err)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    int cuda = it->on_cuda;
    if (!st->det_prep[cuda]) {
        keyer_prepare_params pp = keyer_prepare_params_defaults();
        pp.width = s->det_w;
        pp.height = s->det_h;
        pp.max_batch = 1;
        pp.fit = KEYER_FIT_LETTERBOX; /* values in [-1, 1], bars at -1 (BlazeFace) */
        pp.scale = 2.0f;
        pp.offset = -1.0f;
        pp.threads = 1;
        pp.stream = cuda ? st->prep_stream : NULL;
        keyer_status rs = keyer_prepare_create(&pp, &st->det_prep[cuda], err);
        if (rs)
            return keyer_error_prefix(err, "detection: ");
    }
    kr_item_bufs *b = cuda ? &it->cuda : &it->host;
    const keyer_frame *frames[1] = {it->src};
    return keyer_prepare_run(st->det_prep[cuda], frames, NULL, 1, b->det_tensor, &it->det_geom,
                             err);
}

/* Decodes one frame's raw outputs into it->dets, in frame pixels. */
static keyer_status decode(keyer_session *s, kr_item *it, const float *boxes,
                           const float *scores, keyer_error *err)
{
    int n = 0;
    keyer_status st = keyer_detector_decode(s->decoder, boxes, scores, it->dets,
                                            KEYER_SESSION_MAX_DETECTIONS, &n, err);
    if (st)
        return st;
    const keyer_prepare_geometry *g = &it->det_geom;
    float tw = (float)s->det_w, th = (float)s->det_h;
    keyer_letterbox lb = {g->content.x / tw, g->content.y / th,
                          (tw - g->content.x - g->content.width) / tw,
                          (th - g->content.y - g->content.height) / th};
    keyer_detections_to_pixels(it->dets, n, &lb, it->src->width, it->src->height);
    it->n_dets = n;
    return KEYER_OK;
}

/* ---- the detect stage -------------------------------------------------------------------------- */

static keyer_status det_cpu_runtime(keyer_session *s, int lg, keyer_error *err)
{
    return kr_detect_runtimes(s, 0, 1 << lg, err);
}

static keyer_status det_run_cpu(keyer_session *s, kr_item **items, int n, int lg,
                                keyer_error *err)
{
    keyer_runtime *rt = s->det_rt[0][lg];
    char *in = (char *)keyer_runtime_input_data(rt, 0);
    for (int i = 0; i < n; i++)
        memcpy(in + (size_t)i * s->det_tensor_bytes, items[i]->host.det_tensor,
               s->det_tensor_bytes);
    keyer_status st = keyer_runtime_run(rt, err);
    const float *boxes = keyer_runtime_output_data(rt, s->det_boxes);
    const float *scores = keyer_runtime_output_data(rt, s->det_scores);
    for (int i = 0; i < n && !st; i++)
        st = decode(s, items[i], boxes + (size_t)i * s->det_box_count,
                    scores + (size_t)i * s->det_score_count, err);
    return st;
}

static keyer_status det_run_cuda(keyer_session *s, kr_item **items, int n, int lg,
                                 keyer_error *err)
{
    const kr_device_fns *dev = s->dev;
    keyer_runtime *rt = s->det_rt[1][lg];
    char *in = (char *)keyer_runtime_input_data(rt, 0);
    keyer_status st = KEYER_OK;
    for (int i = 0; i < n && !st; i++)
        st = dev->copy_2d(s->ordinal, in + (size_t)i * s->det_tensor_bytes, s->det_tensor_bytes,
                          items[i]->cuda.det_tensor, s->det_tensor_bytes, s->det_tensor_bytes,
                          1, s->detect_stream, err);
    if (!st)
        st = keyer_runtime_run(rt, err);
    float *boxes = s->det_out;
    float *scores = s->det_out + (size_t)n * s->det_box_count;
    size_t bb = (size_t)n * s->det_box_count * sizeof(float);
    size_t sb = (size_t)n * s->det_score_count * sizeof(float);
    if (!st)
        st = dev->copy_2d(s->ordinal, boxes, bb, keyer_runtime_output_data(rt, s->det_boxes), bb,
                          bb, 1, s->detect_stream, err);
    if (!st)
        st = dev->copy_2d(s->ordinal, scores, sb, keyer_runtime_output_data(rt, s->det_scores),
                          sb, sb, 1, s->detect_stream, err);
    if (!st)
        st = dev->stream_sync(s->ordinal, s->detect_stream, err);
    for (int i = 0; i < n && !st; i++)
        st = decode(s, items[i], boxes + (size_t)i * s->det_box_count,
                    scores + (size_t)i * s->det_score_count, err);
    return st;
}

/* CUDA items, CPU detector: the inputs come down (small: the model's size). */
static keyer_status det_run_hybrid(keyer_session *s, kr_item **items, int n, int lg,
                                   keyer_error *err)
{
    keyer_status st = KEYER_OK;
    for (int i = 0; i < n && !st; i++) {
        st = kr_item_tensors_ensure(items[i], 0, err);
        if (!st)
            st = s->dev->copy_2d(s->ordinal, items[i]->host.det_tensor, s->det_tensor_bytes,
                                 items[i]->cuda.det_tensor, s->det_tensor_bytes,
                                 s->det_tensor_bytes, 1, s->detect_stream, err);
    }
    if (!st)
        st = s->dev->stream_sync(s->ordinal, s->detect_stream, err);
    if (!st)
        st = det_run_cpu(s, items, n, lg, err);
    return st;
}

/* Keying: on to the inference; passthrough: to the writer, which restores the order. */
static int det_forward(keyer_session *s, kr_item *it)
{
    if (s->model)
        return kr_queue_push(s->infer_q, it) != KEYER_OK;
    keyer_error e = {0};
    if (kr_reorder_put(it->stream->done, it->seq, it, &e)) {
        keyer_log(s->logger, KEYER_LOG_ERROR, "%s", e.message);
        kr_item_release(it);
    }
    return 0;
}

void *kr_detect_main(void *arg)
{
    keyer_session *s = arg;
    /* a CUDA item moved to the CPU here also needs its keying input there; without keying the
     * session's batch counters count the detector's batches */
    kr_batch_stage bs = {"detect", KR_ST_DETECT, KR_NEED_DET | (s->model ? KR_NEED_TENSOR : 0),
                         s->detect_q, s->detect_stream, s->det_cuda, !s->model, det_cpu_runtime,
                         det_run_cpu, det_run_cuda, det_run_hybrid, det_forward};
    kr_batch_stage_run(s, &bs, s->track_detect);
    return NULL;
}

/* ---- drawing ----------------------------------------------------------------------------------- */

keyer_status kr_detect_draw(kr_item *it, const keyer_frame **out, int own, keyer_error *err)
{
    kr_stream *st = it->stream;
    keyer_session *s = st->session;
    keyer_overlay_clear(st->overlay);
    const keyer_frame *in = it->frame && it->frame->data[0] ? it->frame : it->src;
    keyer_status rs = s->params.detect_fn(s->params.detect_opaque, st->id, it->seq, in, it->dets,
                                          it->n_dets, st->overlay, err);
    if (rs || keyer_overlay_count(st->overlay) == 0)
        return rs;
    for (;;) {
        const keyer_frame *o = *out;
        int cuda = o->memory == KEYER_MEMORY_CUDA && !atomic_load(&s->gpu_failed);
        keyer_frame *target = NULL;
        if (own && (o->memory == KEYER_MEMORY_HOST || cuda)) {
            target = (keyer_frame *)o; /* the item's own output buffer */
        } else {
            if ((rs = kr_stream_copy_frame(st, &st->drawn, o, cuda, err)))
                goto failed;
            target = st->drawn;
        }
        if ((rs = keyer_overlay_render(st->overlay, target, err)))
            goto failed;
        if (cuda && (rs = s->dev->stream_sync(s->ordinal, st->sink_stream, err)))
            goto failed;
        *out = target;
        return KEYER_OK;
    failed:
        if (!cuda || (rs != KEYER_STATUS_DEVICE && rs != KEYER_STATUS_OUT_OF_MEMORY))
            return rs;
        /* the GPU failed: the frame is drawn on the host (when it can still come down) */
        kr_session_gpu_failure(s, err);
        keyer_error_clear(err);
        own = 0;
    }
}
