/* The session's reports: the summary, per-stream reports, the statistics and trace files. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/session.h"

/* ---- reports -------------------------------------------------------------------------------- */

static keyer_latency latency_of(const kr_histogram *h)
{
    keyer_latency l;
    l.count = h->count;
    l.mean = kr_histogram_mean(h) * 1e-6;
    l.p50 = kr_histogram_quantile(h, 0.50) * 1e-6;
    l.p95 = kr_histogram_quantile(h, 0.95) * 1e-6;
    l.p99 = kr_histogram_quantile(h, 0.99) * 1e-6;
    l.max = (double)h->max * 1e-6;
    return l;
}

/* The input queue of shared stage @p i, or NULL. */
static kr_queue *stage_queue(keyer_session *s, int i)
{
    switch (i) {
    case KR_ST_DETECT:
        return s->detect ? kr_model_stage_queue(kr_detect_stage(s->detect)) : NULL;
    case KR_ST_MESH:
        return s->mesh ? kr_model_stage_queue(kr_mesh_stage(s->mesh)) : NULL;
    case KR_ST_POSE:
        return s->pose ? kr_model_stage_queue(kr_pose_stage_model(s->pose)) : NULL;
    case KR_ST_INFER:
        return s->infer ? kr_model_stage_queue(kr_infer_stage(s->infer)) : NULL;
    case KR_ST_REFINE:
        return kr_refine_stage_queue(s->refine);
    case KR_ST_COMPOSITE:
        return kr_composite_stage_queue(s->composite);
    default:
        return NULL;
    }
}

/* The per-stage part of the report of @p ne engines (after the totals: it needs out->seconds):
 * the engines' counters summed, their latency histograms merged, their queues summed. */
static void stage_reports(keyer_session *const *engines, int ne, keyer_session_report *out)
{
    kr_stage_stats snaps[KR_ST_COUNT];
    memset(snaps, 0, sizeof(snaps));
    int read_workers = 0, prep_workers = 0, sinks = 0, workers[KR_ST_COUNT] = {0};
    int detect = 0, mesh = 0, pose = 0;
    for (int e = 0; e < ne; e++) {
        keyer_session *s = engines[e];
        int n = atomic_load(&s->stream_count);
        for (int i = 0; i < n; i++) {
            kr_stream *st = s->streams[i];
            read_workers += st->source == KR_SOURCE_READER && !st->open_failed;
            prep_workers++;
            sinks += st->sink != KR_SINK_PULL;
        }
        detect |= s->detect != NULL;
        mesh |= s->mesh != NULL;
        pose |= s->pose != NULL || s->people != NULL; /* the people stage: pose's slot */
        for (int i = 0; i < KR_ST_COUNT; i++) {
            kr_stage_stats one;
            kr_stage_stats_snapshot(&s->stages[i], &one);
            snaps[i].items += one.items;
            snaps[i].calls += one.calls;
            snaps[i].busy_ns += one.busy_ns;
            kr_histogram_merge(&snaps[i].latency, &one.latency);
            workers[i] += one.workers;
        }
    }
    for (int i = 0; i < KR_ST_COUNT; i++) {
        snaps[i].workers = workers[i];
        if (i == KR_ST_READ)
            snaps[i].workers = read_workers > 0 ? read_workers : 1;
        if (i == KR_ST_PREPARE)
            snaps[i].workers = prep_workers > 0 ? prep_workers : 1;
        if (i == KR_ST_WRITE)
            snaps[i].workers = sinks > 0 ? sinks : 1;
        if (snaps[i].workers < 1)
            snaps[i].workers = 1;
    }
    out->stage_count = pose ? KR_ST_COUNT : mesh ? KR_ST_POSE : detect ? KR_ST_MESH : KR_ST_DETECT;
    double wall = out->seconds;
    for (int i = 0; i < out->stage_count; i++) {
        keyer_stage_report *r = &out->stages[i];
        snprintf(r->name, sizeof(r->name), "%s", engines[0]->stages[i].name);
        r->workers = snaps[i].workers;
        r->frames = snaps[i].items;
        r->busy = (double)snaps[i].busy_ns * 1e-9;
        r->utilization = wall > 0 ? r->busy / (wall * r->workers) : 0.0;
        if (r->utilization > 1.0)
            r->utilization = 1.0;
        r->latency = latency_of(&snaps[i].latency);
        for (int e = 0; e < ne; e++) {
            keyer_session *s = engines[e];
            kr_queue *q = stage_queue(s, i);
            int n = atomic_load(&s->stream_count);
            if (q) {
                kr_queue_stats qs;
                kr_queue_stats_get(q, &qs);
                r->queue_capacity += qs.capacity;
                r->queue_mean += qs.mean_depth;
                r->queue_max += qs.max_depth;
            } else if (i == KR_ST_PREPARE) {
                /* the streams' ingest queues, summed */
                for (int k = 0; k < n; k++) {
                    if (!s->streams[k]->ingest)
                        continue;
                    kr_queue_stats qs;
                    kr_queue_stats_get(s->streams[k]->ingest, &qs);
                    r->queue_capacity += qs.capacity;
                    r->queue_mean += qs.mean_depth;
                    r->queue_max += qs.max_depth;
                }
            }
        }
    }
    out->bottleneck = kr_stage_stats_bottleneck(snaps, KR_ST_COUNT);
}

/* "cuda:1", or "cuda:1, then cpu (GPU failure)" when its GPU failed while running. */
static void engine_device(const keyer_session *s, char *buf, size_t size)
{
    if (s->use_cuda && atomic_load((atomic_int *)&s->gpu_failed))
        snprintf(buf, size, "%.16s, then cpu (GPU failure)", s->device_name);
    else
        snprintf(buf, size, "%s", s->device_name);
}

void kr_engines_get_report(keyer_session *const *engines, int ne, keyer_session_report *out)
{
    memset(out, 0, sizeof(*out));
    out->bottleneck = -1;
    out->gpu_memory_used = out->gpu_memory_total = -1;
    out->gpu_utilization = -1;
    if (!engines || ne < 1 || !engines[0])
        return;
    kr_histogram e2e;
    kr_histogram_reset(&e2e);
    int64_t t_start = INT64_MAX, t_last = INT64_MIN, batch_frames = 0;
    int started = 0, ready = 1, failed = 0, util_engines = 0;
    double util = 0;
    size_t dlen = 0;
    for (int e = 0; e < ne; e++) {
        keyer_session *s = engines[e];
        int n = atomic_load(&s->stream_count);
        for (int i = 0; i < n; i++) {
            kr_stream *st = s->streams[i];
            out->frames_read += atomic_load(&st->frames_read);
            out->frames_written += atomic_load(&st->frames_written);
            out->frames_dropped += atomic_load(&st->frames_dropped);
            out->frames_damaged += atomic_load(&st->frames_damaged);
            out->frames_lost += atomic_load(&st->frames_lost);
            out->frames_people += kr_infer_people_frames(s->infer, i);
        }
        out->auto_people |= kr_infer_auto_people(s->infer);
        if (s->mesh)
            kr_rounds_report_add(kr_mesh_rounds(s->mesh), &out->landmark_rounds);
        if (s->pose)
            kr_rounds_report_add(kr_pose_stage_rounds(s->pose), &out->landmark_rounds);
        if (s->people)
            kr_rounds_report_add(kr_people_stage_rounds(s->people), &out->landmark_rounds);
        int64_t on_cpu = 0, on_cuda = 0;
        kr_infer_frames(s->infer, &on_cpu, &on_cuda);
        out->frames_on_cpu += on_cpu;
        out->frames_on_cuda += on_cuda;
        failed |= s->use_cuda && atomic_load(&s->gpu_failed);
        if (ne == 1) {
            snprintf(out->device, sizeof(out->device), "%s",
                     failed ? "cpu (after a GPU failure)" : s->device_name);
        } else if (dlen + 1 < sizeof(out->device)) {
            /* "cuda:0 + cuda:1, then cpu (GPU failure)" */
            char one[64];
            engine_device(s, one, sizeof(one));
            int w = snprintf(out->device + dlen, sizeof(out->device) - dlen, "%s%s",
                             e ? " + " : "", one);
            dlen = w < 0 ? dlen : dlen + (size_t)w;
            if (dlen >= sizeof(out->device))
                dlen = sizeof(out->device) - 1;
        }
        out->fell_back |= s->fell_back || atomic_load(&s->gpu_failed);
        out->warnings += atomic_load(&s->warnings);
        out->batches += atomic_load(&s->batches.batches);
        batch_frames += atomic_load(&s->batches.frames);
        out->batches_full += atomic_load(&s->batches.full);
        pthread_mutex_lock(&s->out.lock);
        kr_histogram_merge(&e2e, &s->out.e2e);
        if (s->started) {
            started = 1;
            if (s->out.t_start < t_start)
                t_start = s->out.t_start;
            if (s->out.t_last > t_last)
                t_last = s->out.t_last;
        }
        pthread_mutex_unlock(&s->out.lock);
        pthread_mutex_lock(&s->stats_lock);
        if (s->gpu_mem_used >= 0) {
            out->gpu_memory_used = (out->gpu_memory_used < 0 ? 0 : out->gpu_memory_used) +
                                   s->gpu_mem_used;
            out->gpu_memory_total = (out->gpu_memory_total < 0 ? 0 : out->gpu_memory_total) +
                                    s->gpu_mem_total;
        }
        if (s->gpu_util_samples) {
            util += s->gpu_util_sum / (double)s->gpu_util_samples;
            util_engines++;
        }
        pthread_mutex_unlock(&s->stats_lock);
        ready &= s->stages_ready;
    }
    keyer_session *s0 = engines[0];
    snprintf(out->model, sizeof(out->model), "%s", s0->model_used);
    snprintf(out->detector, sizeof(out->detector), "%s",
             s0->detect ? kr_detect_name(s0->detect) : "");
    /* CUDA runtimes ran in their precision; the CPU (also after a GPU failure) in float32 */
    int on_cuda = s0->use_cuda && !failed;
    snprintf(out->model_precision, sizeof(out->model_precision), "%s",
             !s0->infer ? ""
             : keyer_precision_name(on_cuda ? kr_infer_get_info(s0->infer)->cuda_precision
                                            : KEYER_PRECISION_F32));
    snprintf(out->detector_precision, sizeof(out->detector_precision), "%s",
             !s0->detect ? ""
             : keyer_precision_name(on_cuda ? kr_detect_cuda_precision(s0->detect)
                                            : KEYER_PRECISION_F32));
    out->model_schedule[0] = out->detector_schedule[0] = 0;
    if (on_cuda && s0->infer) /* engine 0's: its device's choices */
        kr_model_stage_schedules(kr_infer_stage(s0->infer), out->model_schedule,
                                 sizeof(out->model_schedule));
    if (on_cuda && s0->detect)
        kr_model_stage_schedules(kr_detect_stage(s0->detect), out->detector_schedule,
                                 sizeof(out->detector_schedule));
    if (on_cuda && (s0->mesh || s0->pose || s0->people))
        kr_model_stage_schedules(s0->mesh   ? kr_mesh_stage(s0->mesh)
                                 : s0->pose ? kr_pose_stage_model(s0->pose)
                                            : kr_people_stage_model(s0->people),
                                 out->landmark_rounds.schedule,
                                 sizeof(out->landmark_rounds.schedule));
    out->batch = s0->batch;
    out->batch_mean = out->batches ? (double)batch_frames / (double)out->batches : 0.0;
    /* GPU utilisation: the mean over the GPUs */
    if (util_engines)
        out->gpu_utilization = util / (double)util_engines;
    out->latency = latency_of(&e2e);
    out->seconds = started && t_last > t_start ? (double)(t_last - t_start) * 1e-9 : 0.0;
    out->fps = out->seconds > 0 ? (double)out->frames_written / out->seconds : 0.0;
    if (!ready)
        return;
    stage_reports(engines, ne, out);
}

void kr_engine_get_report(keyer_session *s, keyer_session_report *out)
{
    kr_engines_get_report(&s, 1, out);
}

int kr_engine_stream_count(const keyer_session *s)
{
    return s ? atomic_load((atomic_int *)&s->stream_count) : 0;
}

keyer_status kr_engine_get_stream_report(keyer_session *s, int id, keyer_stream_report *out,
                                             keyer_error *err)
{
    if (!s || !out || id < 0 || id >= atomic_load(&s->stream_count))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_get_stream_report: no stream %d", id);
    kr_stream *st = s->streams[id];
    memset(out, 0, sizeof(*out));
    snprintf(out->input, sizeof(out->input), "%s", st->input ? st->input : "");
    snprintf(out->output, sizeof(out->output), "%s", st->output ? st->output : "");
    out->width = st->width;
    out->height = st->height;
    out->frames_read = atomic_load(&st->frames_read);
    out->frames_written = atomic_load(&st->frames_written);
    out->frames_dropped = atomic_load(&st->frames_dropped);
    out->frames_damaged = atomic_load(&st->frames_damaged);
    out->frames_lost = atomic_load(&st->frames_lost);
    out->hw_decode = st->source == KR_SOURCE_READER ? st->info.hw_decode : 0;
    if (st->source == KR_SOURCE_READER && st->reader) {
        keyer_reader_stats rs;
        keyer_reader_stats_get(st->reader, &rs);
        out->reconnects = rs.reconnects;
        out->missed_frames = rs.missed_frames;
        out->disconnected_seconds = rs.disconnected_seconds;
        out->decoder_setups = rs.decoder_setups;
        out->decoded_pictures = rs.decoded_pictures;
    }
    if (st->continuation && st->live) { /* reopened on this GPU after a GPU failure */
        out->reconnects += 1;
        out->missed_frames += atomic_load(&st->switch_missed);
        out->disconnected_seconds += st->shift_known ? st->switch_seconds : 0.0;
    }
    out->has_audio = st->source == KR_SOURCE_READER ? st->info.has_audio : 0;
    snprintf(out->encoder, sizeof(out->encoder), "%s", st->encoder);
    engine_device(s, out->device, sizeof(out->device));
    out->frames_people = kr_infer_people_frames(s->infer, id);
    keyer_error se = {0};
    out->status = kr_stream_status(st, &se);
    if (out->status)
        snprintf(out->error, sizeof(out->error), "%s", se.message);
    return KEYER_OK;
}

keyer_status kr_engine_write_trace(keyer_session *s, const char *path, keyer_error *err)
{
    if (!s || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_write_trace: NULL argument");
    if (!s->trace)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_write_trace: tracing is off (trace_events is 0)");
    FILE *f = fopen(path, "w");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot create: %s", path,
                               strerror(errno));
    keyer_status st = kr_trace_write(s->trace, f, err);
    if (fclose(f) && !st)
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: writing the trace failed", path);
    else if (st)
        keyer_error_prefix(err, "%s: ", path);
    return st;
}
