/* The keying model: loading and checking it, and reading each item's mask out of a run. */
#include "pipeline/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/detect.h"
#include "keyer/people.h"
#include "keyer/registry.h"
#include "vision/people_switch.h"
#include "vision/segmodel.h"

struct kr_infer {
    kr_infer_info info;
    kr_segmodel seg;         /* the model's geometry and mask kind (its model moves to the stage) */
    size_t mask_bytes;       /* one frame's mask (one channel) */
    kr_model_stage *stage;
    kr_queue *next;
    atomic_llong frames_cpu, frames_cuda;
    /* model people */
    int people;                  /* 1: the people keyer */
    keyer_people_params people_params;
    keyer_people **per_stream;   /* [max_streams], made at a stream's first frame */
    int max_streams;
    keyer_detector *decoder;     /* the detector's outputs */
    int det_boxes, det_scores;   /* their indices */
    size_t box_count, score_count; /* values per frame */
    int slot;                    /* the items' input slot */
    /* model people on CUDA frames (people_cuda >= 0) */
    float *boxes_host, *scores_host; /* a batch's raw detector outputs, brought down */
    keyer_frame *mask_host;      /* one frame's mask before it goes up (also the automatic
                                    model's people mask on CUDA) */
    /* the automatic model (params.auto_people) */
    int auto_people;
    /* on CUDA: the ring of CUDA runs whose selfie masks are on their way down, packed into
     * bits (auto_cuda): ring[(ring_head + i) % KR_INFER_AUTO_RING] for i < ring_count, oldest
     * first */
    struct auto_lag {
        void *dbits;             /* device: [ring_cap] packed masks */
        uint32_t *hbits;         /* page-locked: the same, brought down */
        int stream[1 << KR_MAX_BATCH_LOG2]; /* their streams */
        int n;                   /* masks */
        void *event;             /* recorded after the copy down */
    } ring[KR_INFER_AUTO_RING];
    int ring_head, ring_count;
    int ring_cap;                /* masks per entry; 0: the ring is not made yet */
    size_t bits_bytes;           /* one packed mask */
    const kr_device_fns *ring_dev;
    int ring_ordinal;
    kr_people_switch **switches; /* [max_streams], made at a stream's first frame */
    atomic_llong *people_frames; /* [max_streams]: frames keyed in people mode */
    int people_later;            /* model people: the people stage runs the keyers (the
                                  * detections wait in the items) */
};

/* ---- outputs ---------------------------------------------------------------------------------- */

/* Stream @p stream's switch (made at its first mask) takes this frame's selfie mask (@p selfie,
 * the mask's cells, or @p bits, the same packed: kr_people_switch_pack); returns in *people
 * what it says: 1 for people mode. Selfie mode resets the stream's people keyer (a later
 * switch starts afresh). */
static keyer_status auto_update(kr_infer *inf, int stream, const float *selfie,
                                const uint32_t *bits, int *people, keyer_error *err)
{
    *people = 0;
    if (stream < 0 || stream >= inf->max_streams)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "people: stream %d of %d", stream,
                               inf->max_streams);
    keyer_status st;
    kr_people_switch **sw = &inf->switches[stream];
    if (!*sw) {
        kr_people_switch_params sp = kr_people_switch_params_defaults();
        if ((st = kr_people_switch_create(&sp, inf->info.mask_w, inf->info.mask_h, sw, err)))
            return st;
    }
    *people = bits ? kr_people_switch_update_bits(*sw, bits)
                   : kr_people_switch_update(*sw, selfie);
    if (!*people)
        keyer_people_reset(inf->per_stream[stream]);
    return KEYER_OK;
}

/* A frame of stream @p stream in people mode: the stream's people keyer keys @p frame and
 * writes its mask into @p out (GRAYF32, the selfie mask's size: it covers the whole frame as
 * the selfie mask does); *keyed 1. A frame the people keyer cannot read (in CUDA memory of
 * another device, or with a CPU people keyer) keeps the selfie mask (*keyed 0). */
static keyer_status auto_key(kr_infer *inf, int stream, const keyer_frame *frame,
                             keyer_frame *out, int *keyed, keyer_error *err)
{
    *keyed = 0;
    keyer_status st;
    keyer_people **pp = &inf->per_stream[stream];
    const keyer_people_params *q = &inf->people_params;
    if (!frame || (frame->memory == KEYER_MEMORY_CUDA &&
                   (q->backend != KEYER_BACKEND_CUDA || frame->device != q->device)))
        return KEYER_OK;
    if (!*pp && (st = keyer_people_create(q, pp, err)))
        return keyer_error_prefix(err, "automatic people mode: ");
    int count = 0;
    if ((st = keyer_people_run(*pp, frame, NULL, 0, &count, err)) ||
        (st = keyer_people_mask(*pp, out, err)))
        return keyer_error_prefix(err, "automatic people mode: ");
    atomic_fetch_add(&inf->people_frames[stream], 1);
    *keyed = 1;
    return KEYER_OK;
}

/* The ring's runs whose packed selfie masks are down go through the switches, oldest first
 * (the order the runs were queued, so each switch takes its stream's masks in frame order):
 * the first @p wait entries whether their copies are done or not (the host waits for them),
 * the others while their events say done (polled, no wait); the first one still running
 * stops it. After a GPU failure every pending entry is dropped (the stage reports the failure
 * on its own run; the next frames update the switches). */
static keyer_status auto_drain(kr_infer *inf, int wait, keyer_error *err)
{
    size_t words = inf->bits_bytes / sizeof(uint32_t);
    keyer_status st = KEYER_OK;
    for (int k = 0; inf->ring_count > 0 && !st; k++) {
        struct auto_lag *e = &inf->ring[inf->ring_head];
        keyer_error ge = {0};
        int done = 1;
        keyer_status gs = k < wait ? inf->ring_dev->event_sync(inf->ring_ordinal, e->event, &ge)
                                   : inf->ring_dev->event_query(inf->ring_ordinal, e->event,
                                                                &done, &ge);
        if (gs != KEYER_OK) { /* the GPU failed */
            inf->ring_count = 0;
            return KEYER_OK;
        }
        if (!done)
            break;
        for (int i = 0; i < e->n && !st; i++) {
            int people = 0;
            st = auto_update(inf, e->stream[i], NULL, e->hbits + (size_t)i * words, &people,
                             err);
        }
        inf->ring_head = (inf->ring_head + 1) % KR_INFER_AUTO_RING;
        inf->ring_count--;
    }
    return st;
}

/* The automatic model on one item inferred on the CPU (a CPU item, or a CUDA item of a hybrid
 * run: its frame is complete, the stage waited for it before the inputs came down) whose
 * selfie mask is in it->host.mask: people mode replaces it there. */
static keyer_status auto_frame(kr_infer *inf, kr_item *it, keyer_error *err)
{
    int people = 0, keyed = 0;
    /* the CUDA runs before these frames (a hybrid run after CUDA ones) */
    keyer_status st = auto_drain(inf, inf->ring_count, err);
    if (!st)
        st = auto_update(inf, it->stream, it->host.mask, NULL, &people, err);
    if (!st && people)
        st = auto_key(inf, it->stream, it->src, it->host.mask_frame, &keyed, err);
    return st;
}

static keyer_status cpu_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                keyer_error *err)
{
    kr_infer *inf = opaque;
    const float *outp = keyer_runtime_output_data(rt, inf->seg.output);
    size_t cells = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h;
    size_t c = (size_t)inf->seg.mask_c;
    keyer_status st = KEYER_OK;
    for (int i = 0; i < n; i++)
        kr_segmask_cpu(&inf->seg, items[i]->host.mask, outp + (size_t)i * cells * c, cells);
    for (int i = 0; i < n && inf->auto_people && !st; i++)
        st = auto_frame(inf, items[i], err);
    if (!st)
        atomic_fetch_add(&inf->frames_cpu, n);
    return st;
}

/* The ring's buffers for runs of up to @p cap masks on device @p ordinal (made at the first
 * CUDA run, when the device and the stage's batch are known; made again, larger, when a run
 * brings more masks: the ring is empty then). */
static keyer_status ring_create(kr_infer *inf, const kr_device_fns *dev, int ordinal, int cap,
                                keyer_error *err)
{
    keyer_status rs = KEYER_OK;
    size_t bytes = (size_t)cap * inf->bits_bytes;
    for (int r = 0; r < KR_INFER_AUTO_RING && !rs; r++) {
        struct auto_lag *e = &inf->ring[r];
        if (inf->ring_dev) {
            inf->ring_dev->free(inf->ring_ordinal, e->dbits);
            inf->ring_dev->host_free(inf->ring_ordinal, e->hbits);
            e->dbits = NULL;
            e->hbits = NULL;
        }
        void *h = NULL;
        if (!(rs = dev->alloc(ordinal, bytes, &e->dbits, err)) &&
            !(rs = dev->host_alloc(ordinal, bytes, &h, err)))
            e->hbits = h;
        if (!rs && !e->event)
            rs = dev->event_create(ordinal, &e->event, err);
    }
    inf->ring_dev = dev; /* what was made is freed at destroy */
    inf->ring_ordinal = ordinal;
    inf->ring_cap = rs ? 0 : cap;
    inf->ring_head = inf->ring_count = 0;
    return rs;
}

/* The automatic model on CUDA items whose selfie masks were just queued into their device masks
 * on @p stream, without the host waiting for this run's inference. First the ring's earlier
 * runs whose masks are down go through the switches (auto_drain: polled; the host waits for
 * the oldest only when all KR_INFER_AUTO_RING entries are in flight), and each item is keyed
 * in the mode its stream's switch is in then; this run's masks are packed into bits on the
 * device (kr_people_switch_pack_cuda) and go down asynchronously into the ring's next entry
 * (page-locked, an event after them) for a later run. On CUDA a frame's mask therefore moves
 * its switch before the 1st to KR_INFER_AUTO_RING-th CUDA run of the stage after its own, and
 * never for its own run, where the CPU decides on each frame's own mask (infer.h). A people
 * frame waits for its frame (kr_item_sync), the people keyer crops it on the device, and its
 * mask goes up over the selfie mask (after this run's packing in the stream's order). */
static keyer_status auto_cuda(kr_infer *inf, const kr_item_layout *l, kr_item **items, int n,
                              void *stream, keyer_error *err)
{
    const kr_device_fns *dev = l->dev;
    keyer_status rs = KEYER_OK;
    if (!inf->mask_host || n > (1 << KR_MAX_BATCH_LOG2))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "automatic people mode: CUDA frames without their buffers");
    if (inf->ring_dev && l->ordinal != inf->ring_ordinal) /* a session's items: one device */
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "automatic people mode: CUDA items on device %d, then %d",
                               inf->ring_ordinal, l->ordinal);
    if (n > inf->ring_cap) { /* the first CUDA run, or a larger one than the stage's batch */
        int cap = kr_model_stage_get_run(inf->stage)->batch;
        if ((rs = auto_drain(inf, inf->ring_count, err)) ||
            (rs = ring_create(inf, dev, l->ordinal, cap > n ? cap : n, err)))
            return rs;
    }
    /* the runs whose masks are down; the oldest waited for when no entry is free */
    if ((rs = auto_drain(inf, inf->ring_count == KR_INFER_AUTO_RING, err)))
        return rs;
    int people[1 << KR_MAX_BATCH_LOG2];
    const float *masks[1 << KR_MAX_BATCH_LOG2];
    struct auto_lag *e = &inf->ring[(inf->ring_head + inf->ring_count) % KR_INFER_AUTO_RING];
    for (int i = 0; i < n; i++) {
        int sid = items[i]->stream;
        if (sid < 0 || sid >= inf->max_streams)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "people: stream %d of %d", sid,
                                   inf->max_streams);
        people[i] = inf->switches[sid] && kr_people_switch_people(inf->switches[sid]);
        masks[i] = items[i]->cuda.mask;
        e->stream[i] = sid;
    }
    if ((rs = kr_people_switch_pack_cuda(l->ordinal, masks, n, inf->info.mask_w,
                                         inf->info.mask_h, e->dbits, stream, err)) ||
        (rs = dev->copy(l->ordinal, e->hbits, e->dbits, (size_t)n * inf->bits_bytes, stream,
                        err)) ||
        (rs = dev->event_record(l->ordinal, e->event, stream, err)))
        return rs;
    e->n = n;
    inf->ring_count++;
    for (int i = 0; i < n && !rs; i++) {
        int keyed = 0;
        if (!people[i])
            continue;
        rs = kr_item_sync(items[i], err); /* its frame, made by earlier stages */
        if (!rs)
            rs = auto_key(inf, items[i]->stream, items[i]->src, inf->mask_host, &keyed, err);
        /* the host mask is written again for the next item: each copy completes first */
        if (!rs && keyed)
            rs = dev->copy(l->ordinal, items[i]->cuda.mask, inf->mask_host->data[0],
                           inf->mask_bytes, stream, err);
        if (!rs && keyed)
            rs = dev->stream_sync(l->ordinal, stream, err);
    }
    return rs;
}

static keyer_status cuda_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                 void *stream, keyer_error *err)
{
    kr_infer *inf = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    const kr_device_fns *dev = l->dev;
    const char *outp = (const char *)keyer_runtime_output_data(rt, inf->seg.output);
    size_t cells = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++) {
        const char *src = outp + (size_t)i * cells * (size_t)inf->seg.mask_c * sizeof(float);
        float *mask = items[i]->cuda.mask;
        if (inf->seg.kind == KEYER_MASK_PROBABILITY &&
            (inf->seg.mask_c == 1 || inf->seg.mask_planar)) /* channel 0 is the first plane */
            rs = dev->copy(l->ordinal, mask, src, inf->mask_bytes, stream, err);
        else if (inf->seg.kind == KEYER_MASK_PROBABILITY) /* channel 0: 2-D copy of 4-byte rows */
            rs = dev->copy_2d(l->ordinal, mask, sizeof(float), src,
                              (size_t)inf->seg.mask_c * sizeof(float), sizeof(float), cells,
                              stream, err);
        else
            rs = kr_segmask_cuda(&inf->seg, l->ordinal, mask, (const float *)src, cells, stream,
                                 err);
    }
    if (!rs && inf->auto_people)
        rs = auto_cuda(inf, l, items, n, stream, err);
    /* refine waits for the masks on its own stream */
    for (int i = 0; i < n && !rs; i++)
        rs = kr_item_record(items[i], stream, err);
    if (!rs)
        atomic_fetch_add(&inf->frames_cuda, n);
    return rs;
}

/* CUDA items inferred on the CPU: the masks go up (small: the model's size). */
static keyer_status upload_outputs(void *opaque, kr_item **items, int n, void *stream,
                                   keyer_error *err)
{
    kr_infer *inf = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    keyer_status rs = KEYER_OK;
    for (int i = 0; i < n && !rs; i++)
        rs = l->dev->copy(l->ordinal, items[i]->cuda.mask, items[i]->host.mask, inf->mask_bytes,
                          stream, err);
    for (int i = 0; i < n && !rs; i++)
        rs = kr_item_record(items[i], stream, err);
    return rs;
}

static int forward(void *opaque, kr_item *it)
{
    kr_infer *inf = opaque;
    return kr_queue_push(inf->next, it) != KEYER_OK;
}

static const kr_model_stage_ops infer_ops = {cpu_outputs, cuda_outputs, upload_outputs, forward,
                                               NULL, NULL};

/* ---- model people ----------------------------------------------------------------------------- */

/* One frame: the whole-frame detections decoded into frame pixels, the stream's people keyer
 * (made now at its first frame; it crops the item's frame where it is), its mask into
 * @p mask. */
static keyer_status people_frame(kr_infer *inf, kr_item *it, const float *boxes,
                                 const float *scores, keyer_frame *mask, keyer_error *err)
{
    keyer_detection dets[KEYER_SESSION_MAX_DETECTIONS];
    int n = 0;
    keyer_status st = keyer_detector_decode(inf->decoder, boxes, scores, dets,
                                            KEYER_SESSION_MAX_DETECTIONS, &n, err);
    if (st)
        return st;
    const keyer_prepare_geometry *g = &it->geom[inf->slot];
    float tw = (float)inf->info.in_w, th = (float)inf->info.in_h;
    keyer_letterbox lb = {g->content.x / tw, g->content.y / th,
                          (tw - g->content.x - g->content.width) / tw,
                          (th - g->content.y - g->content.height) / th};
    keyer_detections_to_pixels(dets, n, &lb, it->src->width, it->src->height);
    if (it->stream < 0 || it->stream >= inf->max_streams)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "people: stream %d of %d", it->stream,
                               inf->max_streams);
    if (inf->people_later) { /* the people stage (people_stage.h) keys the frame */
        memcpy(it->dets, dets, (size_t)n * sizeof(dets[0]));
        it->n_dets = n;
        atomic_fetch_add(&inf->people_frames[it->stream], 1);
        return KEYER_OK;
    }
    keyer_people **pp = &inf->per_stream[it->stream];
    if (!*pp && (st = keyer_people_create(&inf->people_params, pp, err)))
        return st;
    int count = 0;
    if ((st = keyer_people_run_detections(*pp, it->src, dets, n, NULL, 0, &count, err)) ||
        (st = keyer_people_mask(*pp, mask, err)))
        return st;
    atomic_fetch_add(&inf->people_frames[it->stream], 1);
    return KEYER_OK;
}

static keyer_status people_cpu_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                       keyer_error *err)
{
    kr_infer *inf = opaque;
    const float *boxes = keyer_runtime_output_data(rt, inf->det_boxes);
    const float *scores = keyer_runtime_output_data(rt, inf->det_scores);
    keyer_status st = KEYER_OK;
    for (int i = 0; i < n && !st; i++)
        st = people_frame(inf, items[i], boxes + (size_t)i * inf->box_count,
                          scores + (size_t)i * inf->score_count, items[i]->host.mask_frame, err);
    if (!st)
        atomic_fetch_add(&inf->frames_cpu, n);
    return st;
}

/* CUDA items (people keyers on CUDA): the detector's raw outputs come down (the frames are
 * then complete: the stage's stream waited for them before the run), each stream's people
 * keyer crops its people from the device frame, and the mask goes up into the item's. */
static keyer_status people_cuda_outputs(void *opaque, keyer_runtime *rt, kr_item **items, int n,
                                        void *stream, keyer_error *err)
{
    kr_infer *inf = opaque;
    const kr_item_layout *l = &items[0]->pool->layout;
    const kr_device_fns *dev = l->dev;
    if (!inf->boxes_host || n > (1 << KR_MAX_BATCH_LOG2))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "model people: CUDA frames without their buffers");
    keyer_status rs;
    if ((rs = dev->copy(l->ordinal, inf->boxes_host, keyer_runtime_output_data(rt, inf->det_boxes),
                        (size_t)n * inf->box_count * sizeof(float), stream, err)) ||
        (rs = dev->copy(l->ordinal, inf->scores_host,
                        keyer_runtime_output_data(rt, inf->det_scores),
                        (size_t)n * inf->score_count * sizeof(float), stream, err)) ||
        (rs = dev->stream_sync(l->ordinal, stream, err)))
        return rs;
    for (int i = 0; i < n && !rs; i++) {
        rs = people_frame(inf, items[i], inf->boxes_host + (size_t)i * inf->box_count,
                          inf->scores_host + (size_t)i * inf->score_count, inf->mask_host, err);
        /* the host mask is written again for the next item: each copy completes first */
        if (!rs && !inf->people_later)
            rs = dev->copy(l->ordinal, items[i]->cuda.mask, inf->mask_host->data[0],
                           inf->mask_bytes, stream, err);
        if (!rs && !inf->people_later)
            rs = dev->stream_sync(l->ordinal, stream, err);
    }
    for (int i = 0; i < n && !rs; i++)
        rs = kr_item_record(items[i], stream, err);
    if (!rs)
        atomic_fetch_add(&inf->frames_cuda, n);
    return rs;
}

static const kr_model_stage_ops people_ops = {people_cpu_outputs, people_cuda_outputs,
                                              upload_outputs, forward, NULL, NULL};

/* The people keyers' parameters and the per-stream arrays (people keyers, switches, counts). */
static keyer_status per_stream_create(kr_infer *inf, const kr_infer_params *p, keyer_error *err)
{
    inf->max_streams = p->max_streams > 0 ? p->max_streams : 1;
    size_t n = (size_t)inf->max_streams;
    if (!(inf->per_stream = calloc(n, sizeof(*inf->per_stream))) ||
        !(inf->switches = calloc(n, sizeof(*inf->switches))) ||
        !(inf->people_frames = malloc(n * sizeof(*inf->people_frames))))
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    for (size_t i = 0; i < n; i++)
        atomic_init(&inf->people_frames[i], 0);
    keyer_people_params pp = keyer_people_params_defaults();
    pp.threads = p->threads;
    if (p->people_cuda >= 0) {
        pp.backend = KEYER_BACKEND_CUDA;
        pp.device = p->people_cuda;
    }
    inf->people_params = pp;
    return KEYER_OK;
}

/* mask_host: one frame's mask in host memory (GRAYF32, the mask's size, rows contiguous). */
static keyer_status host_mask_create(kr_infer *inf, keyer_error *err)
{
    if (keyer_frame_create(&inf->mask_host, NULL) != KEYER_OK ||
        keyer_frame_alloc(inf->mask_host, KEYER_PIXEL_FORMAT_GRAYF32, inf->info.mask_w,
                          inf->info.mask_h, NULL, NULL) != KEYER_OK)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    if ((size_t)inf->mask_host->stride[0] != (size_t)inf->info.mask_w * sizeof(float))
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "model %s: the mask's rows are not contiguous", inf->info.model);
    return KEYER_OK;
}

/* The person detector as the stage's network, the decoder, the people keyers' parameters. */
static keyer_status people_create(kr_infer *inf, const kr_infer_params *p, keyer_model **model,
                                  keyer_error *err)
{
    char path[4096];
    keyer_status st;
    if ((st = keyer_registry_resolve("pose-detect", path, sizeof(path), err)) ||
        (st = keyer_model_load_file(path, model, err)))
        return keyer_error_prefix(err, "model people: ");
    keyer_detector_params dp = keyer_detector_params_pose();
    if ((st = keyer_detector_create(&dp, &inf->decoder, err)))
        return st;
    inf->box_count = (size_t)keyer_detector_anchor_count(inf->decoder) * (size_t)dp.num_coords;
    inf->score_count = (size_t)keyer_detector_anchor_count(inf->decoder);
    inf->det_boxes = inf->det_scores = -1;
    for (int i = 0; i < keyer_model_output_count(*model); i++) {
        keyer_tensor_info t;
        if (keyer_model_output_info(*model, i, &t, NULL) != KEYER_OK)
            continue;
        size_t c = 1;
        for (int d = 0; d < t.rank; d++)
            c *= (size_t)t.dims[d];
        if (c == inf->box_count && inf->det_boxes < 0)
            inf->det_boxes = i;
        else if (c == inf->score_count && inf->det_scores < 0)
            inf->det_scores = i;
    }
    if (inf->det_boxes < 0 || inf->det_scores < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "model people: %s is not the pose detector", path);
    if ((st = per_stream_create(inf, p, err)))
        return st;
    inf->people = 1;
    inf->slot = p->slot;
    inf->info.in_w = dp.input_width;
    inf->info.in_h = dp.input_height;
    inf->info.mask_w = inf->info.mask_h = KEYER_PEOPLE_MASK_SIDE;
    inf->info.letterbox = 0; /* the mask covers the whole frame */
    inf->info.cuda_precision = KEYER_PRECISION_F32;
    /* with its networks on CUDA the people keyers crop the device frames; else host frames */
    inf->info.host_frames = p->people_cuda < 0;
    inf->mask_bytes = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h * sizeof(float);
    if (p->people_cuda >= 0) {
        size_t most = (size_t)1 << KR_MAX_BATCH_LOG2;
        inf->boxes_host = malloc(most * inf->box_count * sizeof(float));
        inf->scores_host = malloc(most * inf->score_count * sizeof(float));
        if (!inf->boxes_host || !inf->scores_host)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
        if ((st = host_mask_create(inf, err)))
            return st;
    }
    kr_model_stage_params mp = {
        .name = "infer",
        .model_name = inf->info.model,
        .what = "people detection: ",
        /* values in [-1, 1], bars at -1 (MediaPipe's pose detector) */
        .input = {.slot = p->slot, .width = dp.input_width, .height = dp.input_height,
                  .letterbox = 1, .scale = 2.0f, .offset = -1.0f, .what = ""},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = p->counters,
        .threads = p->threads,
        .fail_cuda_at = p->fail_cuda_at,
        .cuda_precision = KEYER_PRECISION_F32,
        .ops = &people_ops,
        .opaque = inf,
    };
    return kr_model_stage_create(&mp, model, &inf->stage, err);
}

/* ---- set-up ----------------------------------------------------------------------------------- */

keyer_status kr_infer_create(const kr_infer_params *p, kr_infer **out, keyer_error *err)
{
    *out = NULL;
    const char *name = p->model;
    kr_infer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "session: out of memory");
    atomic_init(&inf->frames_cpu, 0);
    atomic_init(&inf->frames_cuda, 0);
    snprintf(inf->info.model, sizeof(inf->info.model), "%s", name);
    keyer_status st;
    if (!strcmp(name, KEYER_PEOPLE_MODEL)) {
        keyer_model *model = NULL;
        st = people_create(inf, p, &model, err);
        keyer_model_destroy(&model); /* NULL once the stage took it */
        if (st)
            goto fail;
        *out = inf;
        return KEYER_OK;
    }
    st = kr_segmodel_open(&inf->seg, name, p->desc, err);
    if (st)
        goto fail;
    inf->info.in_w = inf->seg.in_w;
    inf->info.in_h = inf->seg.in_h;
    inf->info.mask_w = inf->seg.mask_w;
    inf->info.mask_h = inf->seg.mask_h;
    inf->info.letterbox = inf->seg.desc.letterbox;
    inf->info.cuda_precision = keyer_registry_precision(inf->seg.entry, p->precision, 1);
    inf->mask_bytes = (size_t)inf->info.mask_w * (size_t)inf->info.mask_h * sizeof(float);
    /* the automatic model: a probability mask over the whole frame can switch to people */
    if (p->auto_people && !inf->info.letterbox && inf->seg.kind == KEYER_MASK_PROBABILITY) {
        if ((st = per_stream_create(inf, p, err)))
            goto fail;
        inf->auto_people = 1;
        inf->bits_bytes = (size_t)kr_people_switch_row_words(inf->info.mask_w) *
                          (size_t)inf->info.mask_h * sizeof(uint32_t);
        /* on CUDA the people masks go up from here (auto_cuda; its ring for the packed
         * selfie masks is made at the first CUDA run, when the device is known) */
        if (p->people_cuda >= 0 && (st = host_mask_create(inf, err)))
            goto fail;
    }
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    kr_segmodel_prepare_params(&inf->seg, &pp);
    kr_model_stage_params mp = {
        .name = "infer",
        .model_name = inf->info.model,
        .what = "",
        .input = {p->slot, inf->info.in_w, inf->info.in_h, inf->info.letterbox, pp.scale,
                  pp.offset, 0, "", {pp.mean[0], pp.mean[1], pp.mean[2]},
                  {pp.std[0], pp.std[1], pp.std[2]}, pp.bgr},
        .ctx = p->ctx,
        .stats = p->stats,
        .counters = p->counters,
        .threads = p->threads,
        .fail_cuda_at = p->fail_cuda_at,
        .cuda_precision = inf->info.cuda_precision,
        .ops = &infer_ops,
        .opaque = inf,
    };
    /* the stage takes the model */
    if ((st = kr_model_stage_create(&mp, &inf->seg.model, &inf->stage, err)))
        goto fail;
    *out = inf;
    return KEYER_OK;
fail:
    kr_infer_destroy(&inf);
    return st;
}

keyer_status kr_infer_resolve(const char *name, keyer_error *err)
{
    char path[4096];
    keyer_status st;
    if (strcmp(name, KEYER_PEOPLE_MODEL))
        return keyer_registry_resolve(name, path, sizeof(path), err);
    if ((st = keyer_registry_resolve("pose-detect", path, sizeof(path), err)) ||
        (st = keyer_registry_resolve("pose-full", path, sizeof(path), err)))
        return keyer_error_prefix(err, "model people: ");
    return KEYER_OK;
}

void kr_infer_destroy(kr_infer **pinf)
{
    if (!pinf || !*pinf)
        return;
    kr_infer *inf = *pinf;
    kr_model_stage_destroy(&inf->stage);
    kr_segmodel_close(&inf->seg);
    for (int i = 0; inf->per_stream && i < inf->max_streams; i++)
        keyer_people_destroy(&inf->per_stream[i]);
    for (int i = 0; inf->switches && i < inf->max_streams; i++)
        kr_people_switch_destroy(&inf->switches[i]);
    free(inf->per_stream);
    free(inf->switches);
    free(inf->people_frames);
    keyer_detector_destroy(&inf->decoder);
    free(inf->boxes_host);
    free(inf->scores_host);
    for (int r = 0; inf->ring_dev && r < KR_INFER_AUTO_RING; r++) {
        inf->ring_dev->free(inf->ring_ordinal, inf->ring[r].dbits);
        inf->ring_dev->host_free(inf->ring_ordinal, inf->ring[r].hbits);
        inf->ring_dev->event_destroy(inf->ring_ordinal, inf->ring[r].event);
    }
    keyer_frame_destroy(&inf->mask_host);
    free(*pinf);
    *pinf = NULL;
}

kr_model_stage *kr_infer_stage(kr_infer *inf)
{
    return inf->stage;
}

const kr_infer_info *kr_infer_get_info(const kr_infer *inf)
{
    return &inf->info;
}

void kr_infer_connect(kr_infer *inf, kr_queue *next)
{
    inf->next = next;
}

const keyer_people_params *kr_infer_people_params(const kr_infer *inf)
{
    return inf && inf->people ? &inf->people_params : NULL;
}

void kr_infer_people_later(kr_infer *inf)
{
    inf->people_later = 1;
}

int64_t kr_infer_people_frames(const kr_infer *inf, int stream)
{
    if (!inf || !inf->people_frames || stream < 0 || stream >= inf->max_streams)
        return 0;
    return atomic_load(&inf->people_frames[stream]);
}

int kr_infer_auto_people(const kr_infer *inf)
{
    return inf && inf->auto_people;
}

void kr_infer_frames(kr_infer *inf, int64_t *cpu, int64_t *cuda)
{
    *cpu = inf ? atomic_load(&inf->frames_cpu) : 0;
    *cuda = inf ? atomic_load(&inf->frames_cuda) : 0;
}
