/* The start of an engine (one device's pipeline): its models, the device it runs on, the
 * stages' batches, queues and workers, and their threads, set up once the streams are known. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "keyer/image.h"
#include "keyer/registry.h"
#include "pipeline/clock.h"
#include "pipeline/session.h"

static const char *auto_model(keyer_session *s)
{
    int n = atomic_load(&s->stream_count);
    if (n == 0)
        return "selfie";
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        if (st->open_failed)
            continue;
        int w = st->width, h = st->height;
        if (st->source == KR_SOURCE_READER && (st->info.rotation == 90 || st->info.rotation == 270)) {
            int t = w;
            w = h;
            h = t;
        }
        if (h <= 0 || (double)w / (double)h < 1.5)
            return "selfie";
    }
    return "selfie-landscape";
}

const char *kr_engine_auto_model(keyer_session *s)
{
    return s->model_name ? s->model_name : auto_model(s);
}


/* The model stages, in the order items pass them: the detector first, the face mesh, the pose
 * landmarks, then the keying model and the people stage (at most 4: the mesh and the pose
 * exclude each other, the people stage comes only without a detector). */
static int model_stages(keyer_session *s, kr_model_stage **out)
{
    int n = 0;
    if (s->detect)
        out[n++] = kr_detect_stage(s->detect);
    if (s->mesh)
        out[n++] = kr_mesh_stage(s->mesh);
    if (s->pose)
        out[n++] = kr_pose_stage_model(s->pose);
    if (s->infer)
        out[n++] = kr_infer_stage(s->infer);
    if (s->people)
        out[n++] = kr_people_stage_model(s->people);
    return n;
}

/* Loads the keying model (slot 0) and the detector (the next slot). */
static keyer_status load_models(keyer_session *s, keyer_error *err)
{
    const keyer_session_params *p = &s->params;
    keyer_status st;
    if (p->passthrough) {
        snprintf(s->model_used, sizeof(s->model_used), "none");
        snprintf(s->device_name, sizeof(s->device_name), "cpu");
    } else {
        const char *name = s->model_name ? s->model_name : auto_model(s);
        snprintf(s->model_used, sizeof(s->model_used), "%s", name);
        kr_infer_params ip = {name, p->model_desc, 0, &s->ctx, &s->stages[KR_ST_INFER],
                              &s->batches, s->serial_threads, s->fail_cuda_at, p->precision,
                              p->max_streams,
                              p->device == KEYER_DEVICE_CUDA ? p->cuda_device : -1,
                              /* no model given: a stream with no one large goes to people */
                              s->model_name == NULL};
        if ((st = kr_infer_create(&ip, &s->infer, err)))
            return st;
    }
    if (p->detect) {
        /* without keying the session's batch counters count the detector's batches */
        kr_detect_params dp = {p->detect == KEYER_SESSION_DETECT_FACES_FULL,
                               p->detect_min_score,
                               s->infer ? 1 : 0,
                               &s->ctx,
                               &s->stages[KR_ST_DETECT],
                               s->infer ? NULL : &s->batches,
                               s->serial_threads,
                               s->fail_cuda_at,
                               p->precision};
        if ((st = kr_detect_create(&dp, &s->detect, err)))
            return st;
    }
    if (p->mesh) {
        kr_mesh_params mp = {p->mesh_max_faces, p->mesh_detect_interval, p->max_streams,
                             &s->ctx, &s->stages[KR_ST_MESH], s->serial_threads, p->precision};
        if ((st = kr_mesh_create(&mp, &s->mesh, err)))
            return st;
    }
    if (p->pose) {
        kr_pose_stage_params pp = {(int)p->pose_model, p->max_streams, &s->ctx,
                                   &s->stages[KR_ST_POSE], s->serial_threads, p->precision};
        if ((st = kr_pose_stage_create(&pp, &s->pose, err)))
            return st;
    }
    /* model people: the people's crops of all streams in one stage (the session's detector
     * would share the items' detections: with one, each stream's keyer runs them) */
    const keyer_people_params *people = s->infer ? kr_infer_people_params(s->infer) : NULL;
    if (people && !s->detect) {
        kr_people_stage_params pp = {*people,
                                     p->max_streams,
                                     &s->ctx,
                                     &s->stages[KR_ST_POSE],
                                     s->serial_threads,
                                     kr_infer_get_info(s->infer)->mask_w,
                                     kr_infer_get_info(s->infer)->mask_h};
        if ((st = kr_people_stage_create(&pp, &s->people, err)))
            return st;
        s->stages[KR_ST_POSE].name = "people";
    }
    return KEYER_OK;
}

/* Creates the runtimes of one device for batch 1, 2, 4, ... up to s->batch. */
static keyer_status create_runtimes(keyer_session *s, int cuda, keyer_error *err)
{
    kr_model_stage *ms[4];
    int n = model_stages(s, ms);
    for (int i = 0; i < n; i++) {
        keyer_status st = kr_model_stage_runtimes(ms[i], cuda, s->batch, 1, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

static void destroy_runtimes(keyer_session *s, int cuda)
{
    kr_model_stage *ms[4];
    int n = model_stages(s, ms);
    for (int i = 0; i < n; i++)
        kr_model_stage_drop_runtimes(ms[i], cuda);
}

/* Tries CUDA; on out-of-memory halves the batch; returns 1 when CUDA is usable. */
static int try_cuda(keyer_session *s, int asked)
{
    keyer_error e = {0};
    const kr_device_fns *dev = kr_device_cuda();
    if (!dev) {
        if (asked)
            kr_stage_warn(&s->ctx,
                          "CUDA was asked for but keyer was built without it; using the CPU");
        return 0;
    }
    int n = dev->count();
    if (n <= s->params.cuda_device) {
        if (asked || n > 0)
            kr_stage_warn(&s->ctx, "no CUDA device %d (%d found); using the CPU",
                          s->params.cuda_device, n);
        return 0;
    }
    s->dev = dev;
    s->ordinal = s->params.cuda_device;
    kr_model_stage *ms[4];
    int nms = model_stages(s, ms);
    for (int i = 0; i < nms; i++) {
        if (kr_model_stage_use_cuda(ms[i], dev, s->ordinal, &e)) {
            kr_stage_warn(&s->ctx, "CUDA device %d does not work (%s); using the CPU",
                          s->ordinal, e.message);
            goto off;
        }
    }
    s->infer_cuda = 1;
    for (;;) {
        keyer_error_clear(&e);
        keyer_status st = create_runtimes(s, 1, &e);
        if (!st)
            break;
        destroy_runtimes(s, 1);
        if (st == KEYER_STATUS_OUT_OF_MEMORY && s->batch > 1) {
            kr_stage_warn(&s->ctx, "out of GPU memory at batch %d, trying batch %d", s->batch,
                          s->batch / 2);
            s->batch /= 2;
            continue;
        }
        if (st == KEYER_STATUS_OUT_OF_MEMORY || st == KEYER_STATUS_DEVICE) {
            kr_stage_warn(&s->ctx, "cannot run on CUDA device %d (%s); using the CPU",
                          s->ordinal, e.message);
            goto off;
        }
        /* no CUDA inference for this model (backend not built, an operator it lacks): the
         * pixel stages stay on the GPU and the small model runs on the CPU in between */
        kr_stage_warn(&s->ctx, "inference on the CPU, pixel stages on CUDA device %d: %s",
                      s->ordinal, e.message);
        s->infer_cuda = 0;
        if (s->params.batch <= 0)
            s->batch = s->params.mode == KEYER_PIPELINE_LATENCY ? 1 : 4;
        break;
    }
    s->use_cuda = 1;
    snprintf(s->device_name, sizeof(s->device_name), "cuda:%d%s", s->ordinal,
             s->infer_cuda ? "" : " (inference on the cpu)");
    s->nvml = kr_nvml_open(s->ordinal);
    return 1;
off:
    /* infer_cuda may stay set: no item is on CUDA now, and the model stages then make their
     * CPU runtimes when first needed */
    for (int i = 0; i < nms; i++)
        kr_model_stage_drop_cuda(ms[i]);
    s->dev = NULL;
    return 0;
}

/* Decides the device and the batch: CUDA first when wanted, else (or when it fails) the CPU. */
static keyer_status choose_device(keyer_session *s, keyer_error *err)
{
    const keyer_session_params *p = &s->params;
    int latency = p->mode == KEYER_PIPELINE_LATENCY;
    int want_cuda = p->device != KEYER_DEVICE_CPU;
    /* the batch is decided per device; CUDA's is tried first */
    s->batch = p->batch > 0 ? p->batch : latency ? 1 : 16;
    if (p->passthrough && !p->detect)
        want_cuda = 0; /* nothing runs on the GPU */
    if (s->infer && kr_infer_get_info(s->infer)->host_frames)
        want_cuda = 0; /* model people: host frames; its networks run where it was told */
    if (want_cuda && !try_cuda(s, p->device == KEYER_DEVICE_CUDA)) {
        s->fell_back = p->device == KEYER_DEVICE_CUDA || kr_device_cuda() != NULL;
        if (s->fell_back && p->device == KEYER_DEVICE_AUTO && kr_device_cuda() &&
            kr_device_cuda()->count() == 0)
            s->fell_back = 0; /* AUTO without any GPU is not a fallback */
    }
    if (!s->use_cuda) {
        /* XNNPACK's time per frame does not drop with the batch: batch 1 keeps latency low */
        s->batch = p->batch > 0 ? p->batch : 1;
    } else if (p->cuda_sync != KEYER_CUDA_SYNC_AUTO && s->dev->set_sync) {
        /* how the threads wait for this GPU (the device's setting); the default stays when
         * it cannot be set */
        keyer_error e = {0};
        if (s->dev->set_sync(s->ordinal, (int)p->cuda_sync, &e))
            keyer_log(s->logger, KEYER_LOG_WARNING, "%s: cuda_sync is not applied: %s",
                      s->device_name, e.message);
    }
    if (!s->infer_cuda)
        return create_runtimes(s, 0, err);
    return KEYER_OK;
}

/* Fixes the batches and queues of the stages and connects them. */
static keyer_status open_stages(keyer_session *s, keyer_error *err)
{
    const keyer_session_params *p = &s->params;
    keyer_status st;
    int infer_cap = s->depth > s->batch ? s->depth : s->batch;
    const kr_device_fns *dev = s->use_cuda ? s->dev : NULL;
    int models_cuda = s->use_cuda && s->infer_cuda; /* the models' CUDA runtimes exist */
    kr_queue *keying = NULL;
    if (s->infer) {
        const kr_infer_info *ki = kr_infer_get_info(s->infer);
        kr_composite_stage_params cp = {&s->ctx,        &s->stages[KR_ST_COMPOSITE],
                                        p->composite,   s->threads,
                                        s->workers,     p->max_streams,
                                        s->bg_image,    dev,
                                        s->ordinal,     s->depth};
        if ((st = kr_composite_stage_create(&cp, &s->composite, err)))
            return st;
        keyer_refine_params rp = p->refine;
        rp.max_streams = p->max_streams;
        rp.threads = s->serial_threads / s->refine_workers > 0
                         ? s->serial_threads / s->refine_workers
                         : 1;
        kr_refine_stage_params fp = {&s->ctx,     &s->stages[KR_ST_REFINE],
                                     rp,          dev,
                                     s->ordinal,  0,
                                     ki->letterbox, ki->in_w,
                                     ki->in_h,    ki->mask_w,
                                     ki->mask_h,  s->depth,
                                     s->refine_workers,
                                     kr_composite_stage_queue(s->composite)};
        if ((st = kr_refine_stage_create(&fp, &s->refine, err)))
            return st;
        kr_model_stage_run run = {s->batch, s->batch_wait_ns, infer_cap, KR_NEED_INPUT(0),
                                  models_cuda};
        kr_model_stage *ms = kr_infer_stage(s->infer);
        if ((st = kr_model_stage_open(ms, &run, err)))
            return st;
        kr_queue *after = kr_refine_stage_queue(s->refine);
        if (s->people) {
            /* the people's crops between the person detector and refine */
            kr_model_stage *pm = kr_people_stage_model(s->people);
            kr_model_stage_run prun = {s->batch, s->batch_wait_ns, infer_cap, 0, models_cuda};
            if ((st = kr_model_stage_open(pm, &prun, err)) ||
                (st = kr_people_stage_connect(s->people, after, dev, s->ordinal,
                                              dev && !models_cuda, s->batch, err)))
                return st;
            kr_infer_people_later(s->infer);
            after = kr_model_stage_queue(pm);
            s->stages[KR_ST_POSE].workers = 1;
        }
        kr_infer_connect(s->infer, after);
        keying = kr_model_stage_queue(ms);
    }
    if (s->pose) {
        kr_model_stage *ms = kr_pose_stage_model(s->pose);
        int need = s->infer ? KR_NEED_INPUT(0) : 0;
        kr_model_stage_run run = {s->batch, s->batch_wait_ns, infer_cap, need, models_cuda};
        if ((st = kr_model_stage_open(ms, &run, err)) ||
            (st = kr_pose_stage_connect(s->pose, keying, dev, s->ordinal, dev && !models_cuda,
                                        s->batch, err)))
            return st;
        keying = kr_model_stage_queue(ms); /* the detector hands its items to the pose stage */
        s->stages[KR_ST_POSE].workers = 1;
    }
    if (s->mesh) {
        kr_model_stage *ms = kr_mesh_stage(s->mesh);
        int need = s->infer ? KR_NEED_INPUT(0) : 0;
        kr_model_stage_run run = {s->batch, s->batch_wait_ns, infer_cap, need, models_cuda};
        if ((st = kr_model_stage_open(ms, &run, err)) ||
            (st = kr_mesh_connect(s->mesh, keying, dev, s->ordinal, dev && !models_cuda,
                                  s->batch, err)))
            return st;
        keying = kr_model_stage_queue(ms); /* the detector hands its items to the mesh */
        s->stages[KR_ST_MESH].workers = 1;
    }
    if (s->detect) {
        kr_model_stage *ms = kr_detect_stage(s->detect);
        /* a CUDA item moved to the CPU here also needs its keying input there */
        int need = KR_NEED_INPUT(kr_model_stage_input(ms)->slot) | (s->infer ? KR_NEED_INPUT(0) : 0);
        kr_model_stage_run run = {s->batch, s->batch_wait_ns, infer_cap, need, models_cuda};
        if ((st = kr_model_stage_open(ms, &run, err)) ||
            (st = kr_detect_connect(s->detect, keying, models_cuda ? dev : NULL, s->ordinal,
                                   s->batch, err)))
            return st;
    }
    s->stages[KR_ST_INFER].workers = 1;
    s->stages[KR_ST_REFINE].workers = s->refine_workers;
    s->stages[KR_ST_COMPOSITE].workers = s->workers;
    return KEYER_OK;
}

/* What the streams need to start: devices, buffers, model inputs, the first queue. */
static void fill_stream_env(keyer_session *s)
{
    const keyer_session_params *p = &s->params;
    kr_stream_env *env = &s->env;
    kr_item_layout *l = &env->layout;
    l->ctx = &s->ctx;
    l->dev = s->dev;
    l->ordinal = s->ordinal;
    l->blocking_events = s->use_cuda && p->cuda_sync == KEYER_CUDA_SYNC_BLOCK;
    kr_model_stage *ms[4];
    int n = model_stages(s, ms);
    env->inputs = 0;
    l->inputs = 0;
    /* prepare makes the keying input first, then the detector's (the face mesh crops its own) */
    for (int i = n - 1; i >= 0; i--) {
        const kr_model_input *in = kr_model_stage_input(ms[i]);
        if (in->slot < 0)
            continue;
        l->inputs++;
        env->input[env->inputs++] = *in;
        l->input_bytes[in->slot] = (size_t)in->width * (size_t)in->height * 3 * sizeof(float);
    }
    if (s->infer) {
        l->mask_w = kr_infer_get_info(s->infer)->mask_w;
        l->mask_h = kr_infer_get_info(s->infer)->mask_h;
    }
    env->use_cuda = s->use_cuda;
    /* A pool big enough to keep every stage busy: the ingest queue, a batch, the composite
     * workers and the frames the shared queues may hold of this stream, plus slack. */
    env->pool_size = s->stream_depth + s->batch + s->workers + 4;
    if (p->mode != KEYER_PIPELINE_LATENCY)
        env->pool_size += s->stream_depth;
    env->depth = s->stream_depth;
    env->buffers = !(p->passthrough && !s->detect); /* else the input frame itself is written */
    env->first = n ? kr_model_stage_queue(ms[0]) : NULL;
    env->threads = s->threads;
    env->detect = s->detect != NULL;
    env->bg_video = p->composite.mode == KEYER_COMPOSITE_IMAGE && !s->bg_image;
}

/* Starts the shared stages' threads, tracing them as before: composite, infer, detect, refine. */
static keyer_status start_threads(keyer_session *s, keyer_error *err)
{
    int track_infer = -1, track_detect = -1, track_refine = -1;
    if (s->composite)
        kr_composite_stage_trace(s->composite);
    if (s->infer)
        track_infer = kr_trace_thread(s->trace, "infer", 0);
    if (s->detect)
        track_detect = kr_trace_thread(s->trace, "detect", 0);
    if (s->refine)
        track_refine = kr_trace_thread(s->trace, "refine", 0);
    s->out.t_start = s->out.t_last = kr_clock_ns();
    kr_histogram_reset(&s->out.e2e);
    keyer_status st;
    if (s->mesh &&
        (st = kr_model_stage_start(kr_mesh_stage(s->mesh), kr_trace_thread(s->trace, "mesh", 0),
                                   err)))
        return st;
    if (s->pose &&
        (st = kr_model_stage_start(kr_pose_stage_model(s->pose),
                                   kr_trace_thread(s->trace, "pose", 0), err)))
        return st;
    if (s->people &&
        (st = kr_model_stage_start(kr_people_stage_model(s->people),
                                   kr_trace_thread(s->trace, "people", 0), err)))
        return st;
    if (s->detect) {
        if ((st = kr_model_stage_start(kr_detect_stage(s->detect), track_detect, err)))
            return st;
        s->stages[KR_ST_DETECT].workers = 1;
    }
    if (s->infer && ((st = kr_model_stage_start(kr_infer_stage(s->infer), track_infer, err)) ||
                     (st = kr_refine_stage_start(s->refine, track_refine, err)) ||
                     (st = kr_composite_stage_start(s->composite, err))))
        return st;
    return KEYER_OK;
}

keyer_status kr_engine_start(keyer_session *s, keyer_error *err)
{
    if (s->started)
        return KEYER_OK;
    const keyer_session_params *p = &s->params;
    int latency = p->mode == KEYER_PIPELINE_LATENCY;
    /* Throughput: the stages run side by side and already fill the cores, so each works
     * single-threaded (threads inside a stage only contend with the other stages); latency:
     * one frame at a time, so a stage may spread over half the cores (the other stages and
     * the codecs keep the rest busy; measured: docs/notes/pipeline-throughput.md). */
    int cores = kr_cpu_count();
    s->threads = p->threads > 0 ? p->threads : latency && cores >= 4 ? cores / 2 : 1;
    /* inference and refinement have one worker each: on a large machine they get a share of
     * the cores so that they do not cap the many-stream throughput */
    s->serial_threads = p->threads > 0 ? p->threads : cores >= 8 ? cores / 4 : s->threads;
    keyer_status st;
    if ((st = load_models(s, err)) || (st = choose_device(s, err)))
        return st;
    s->depth = p->queue_depth > 0 ? p->queue_depth : latency ? 1 : 2 * s->batch;
    /* Many streams: when a shared stage is the bottleneck every stream's input queue fills,
     * and the frames waiting in them set the latency (32 streams with 32 each: 1,024 frames,
     * about 270 ms at 3,700 frames/s on the H100), so 4 batches are shared out instead. */
    int files = 0;
    for (int i = 0; i < atomic_load(&s->stream_count); i++)
        files += s->streams[i]->source == KR_SOURCE_READER && !s->streams[i]->open_failed;
    if (files < 1)
        files = 1;
    s->stream_depth = s->depth;
    if (p->queue_depth <= 0 && !latency) {
        int share = (4 * s->batch + files - 1) / files;
        s->stream_depth = share < 2 ? 2 : share > s->depth ? s->depth : share;
    }
    int64_t wait_us = p->batch_wait_us >= 0 ? p->batch_wait_us
                      : latency               ? 0
                      : s->use_cuda           ? 4000
                                              : 20000;
    s->batch_wait_ns = wait_us * 1000;
    s->workers = p->composite_workers > 0 ? p->composite_workers
                 : s->use_cuda            ? 1
                 : latency                ? 1
                                          : (cores < KR_MAX_COMPOSITE_WORKERS ? cores
                                                                              : KR_MAX_COMPOSITE_WORKERS);
    if (s->workers < 1)
        s->workers = 1;
    /* one refine worker launched about 4,000 frames/s of 1080p refinement on the H100 (0.16 to
     * 0.25 ms of host time per frame): one per 4 streams, so that 8 streams, which the
     * decoders can bring past 4,000 frames/s, have two */
    int rw = s->use_cuda ? files / 4 : cores >= 8 && files > 1 ? 2 : 1;
    s->refine_workers = p->refine_workers > 0 ? p->refine_workers
                        : rw < 1                ? 1
                        : rw > 4                ? 4
                                                : rw;
    if ((st = open_stages(s, err)))
        return st;
    fill_stream_env(s);
    if ((st = start_threads(s, err)))
        return st;
    s->started = 1;
    const kr_infer_info *ki = s->infer ? kr_infer_get_info(s->infer) : NULL;
    keyer_log(s->logger, KEYER_LOG_INFO,
              "pipeline: model %s (%dx%d), device %s, batch %d, queues %d (per stream %d), %d "
              "refine and %d composite worker%s%s%s",
              s->model_used, ki ? ki->in_w : 0, ki ? ki->in_h : 0, s->device_name, s->batch,
              s->depth, s->stream_depth, s->refine_workers, s->workers,
              s->workers == 1 ? "" : "s", s->detect ? ", detector " : "",
              s->detect ? kr_detect_name(s->detect) : "");
    return KEYER_OK;
}

/* ---- run -------------------------------------------------------------------------------------- */
