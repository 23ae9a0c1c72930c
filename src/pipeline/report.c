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

/* The per-stage part of the report (after the totals: it needs out->seconds). */
static void stage_reports(keyer_session *s, int n, keyer_session_report *out)
{
    kr_stage_stats snaps[KR_ST_COUNT];
    int read_workers = 0, prep_workers = 0, sinks = 0;
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        read_workers += st->source == KR_SOURCE_READER && !st->open_failed;
        prep_workers++;
        sinks += st->sink != KR_SINK_PULL;
    }
    for (int i = 0; i < KR_ST_COUNT; i++) {
        kr_stage_stats_snapshot(&s->stages[i], &snaps[i]);
        if (i == KR_ST_READ)
            snaps[i].workers = read_workers > 0 ? read_workers : 1;
        if (i == KR_ST_PREPARE)
            snaps[i].workers = prep_workers > 0 ? prep_workers : 1;
        if (i == KR_ST_WRITE)
            snaps[i].workers = sinks > 0 ? sinks : 1;
    }
    out->stage_count = s->mesh ? KR_ST_COUNT : s->detect ? KR_ST_MESH : KR_ST_DETECT;
    double wall = out->seconds;
    for (int i = 0; i < out->stage_count; i++) {
        keyer_stage_report *r = &out->stages[i];
        snprintf(r->name, sizeof(r->name), "%s", s->stages[i].name);
        r->workers = snaps[i].workers;
        r->frames = snaps[i].items;
        r->busy = (double)snaps[i].busy_ns * 1e-9;
        r->utilization = wall > 0 ? r->busy / (wall * r->workers) : 0.0;
        if (r->utilization > 1.0)
            r->utilization = 1.0;
        r->latency = latency_of(&snaps[i].latency);
        kr_queue *q = stage_queue(s, i);
        if (q) {
            kr_queue_stats qs;
            kr_queue_stats_get(q, &qs);
            r->queue_capacity = qs.capacity;
            r->queue_mean = qs.mean_depth;
            r->queue_max = qs.max_depth;
        } else if (i == KR_ST_PREPARE && n > 0) {
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
    out->bottleneck = kr_stage_stats_bottleneck(snaps, KR_ST_COUNT);
}

void keyer_session_get_report(keyer_session *s, keyer_session_report *out)
{
    memset(out, 0, sizeof(*out));
    out->bottleneck = -1;
    out->gpu_memory_used = out->gpu_memory_total = -1;
    out->gpu_utilization = -1;
    if (!s)
        return;
    int n = atomic_load(&s->stream_count);
    for (int i = 0; i < n; i++) {
        kr_stream *st = s->streams[i];
        out->frames_read += atomic_load(&st->frames_read);
        out->frames_written += atomic_load(&st->frames_written);
        out->frames_dropped += atomic_load(&st->frames_dropped);
        out->frames_damaged += atomic_load(&st->frames_damaged);
        out->frames_lost += atomic_load(&st->frames_lost);
    }
    kr_infer_frames(s->infer, &out->frames_on_cpu, &out->frames_on_cuda);
    snprintf(out->device, sizeof(out->device), "%s",
             s->use_cuda && atomic_load(&s->gpu_failed) ? "cpu (after a GPU failure)"
                                                        : s->device_name);
    snprintf(out->model, sizeof(out->model), "%s", s->model_used);
    snprintf(out->detector, sizeof(out->detector), "%s", s->detect ? kr_detect_name(s->detect) : "");
    /* CUDA runtimes ran in their precision; the CPU (also after a GPU failure) in float32 */
    int on_cuda = s->use_cuda && !atomic_load(&s->gpu_failed);
    snprintf(out->model_precision, sizeof(out->model_precision), "%s",
             !s->infer ? ""
             : keyer_precision_name(on_cuda ? kr_infer_get_info(s->infer)->cuda_precision
                                            : KEYER_PRECISION_F32));
    snprintf(out->detector_precision, sizeof(out->detector_precision), "%s",
             !s->detect ? ""
             : keyer_precision_name(on_cuda ? kr_detect_cuda_precision(s->detect)
                                            : KEYER_PRECISION_F32));
    out->batch = s->batch;
    out->fell_back = s->fell_back || atomic_load(&s->gpu_failed);
    out->warnings = atomic_load(&s->warnings);
    out->batches = atomic_load(&s->batches.batches);
    out->batch_mean = out->batches
                          ? (double)atomic_load(&s->batches.frames) / (double)out->batches
                          : 0.0;
    out->batches_full = atomic_load(&s->batches.full);
    pthread_mutex_lock(&s->out.lock);
    kr_histogram e2e = s->out.e2e;
    int64_t t_start = s->out.t_start, t_last = s->out.t_last;
    pthread_mutex_unlock(&s->out.lock);
    pthread_mutex_lock(&s->stats_lock);
    out->gpu_memory_used = s->gpu_mem_used;
    out->gpu_memory_total = s->gpu_mem_total;
    if (s->gpu_util_samples)
        out->gpu_utilization = s->gpu_util_sum / (double)s->gpu_util_samples;
    pthread_mutex_unlock(&s->stats_lock);
    out->latency = latency_of(&e2e);
    out->seconds = s->started && t_last > t_start ? (double)(t_last - t_start) * 1e-9 : 0.0;
    out->fps = out->seconds > 0 ? (double)out->frames_written / out->seconds : 0.0;
    if (!s->stages_ready)
        return;
    stage_reports(s, n, out);
}

int keyer_session_stream_count(const keyer_session *s)
{
    return s ? atomic_load((atomic_int *)&s->stream_count) : 0;
}

keyer_status keyer_session_get_stream_report(keyer_session *s, int id, keyer_stream_report *out,
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
    }
    out->has_audio = st->source == KR_SOURCE_READER ? st->info.has_audio : 0;
    snprintf(out->encoder, sizeof(out->encoder), "%s", st->encoder);
    keyer_error se = {0};
    out->status = kr_stream_status(st, &se);
    if (out->status)
        snprintf(out->error, sizeof(out->error), "%s", se.message);
    return KEYER_OK;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static double finite_or_zero(double v)
{
    return isfinite(v) ? v : 0.0;
}

static void json_latency(FILE *f, const keyer_latency *l)
{
    fprintf(f, "{\"count\":%lld,\"mean\":%.4f,\"p50\":%.4f,\"p95\":%.4f,\"p99\":%.4f,\"max\":%.4f}",
            (long long)l->count, finite_or_zero(l->mean), finite_or_zero(l->p50),
            finite_or_zero(l->p95), finite_or_zero(l->p99), finite_or_zero(l->max));
}

/* The "streams" array's entries. */
static void json_streams(FILE *f, keyer_session *s)
{
    int n = keyer_session_stream_count(s);
    for (int i = 0; i < n; i++) {
        keyer_stream_report sr;
        if (keyer_session_get_stream_report(s, i, &sr, NULL))
            continue;
        fprintf(f, "    {\"id\": %d, \"input\": ", i);
        json_string(f, sr.input);
        fprintf(f, ", \"output\": ");
        json_string(f, sr.output);
        fprintf(f, ", \"width\": %d, \"height\": %d, \"frames_read\": %lld, "
                   "\"frames_written\": %lld, \"dropped\": %lld, \"damaged\": %lld, "
                   "\"lost\": %lld, \"hw_decode\": %s, \"encoder\": ",
                sr.width, sr.height, (long long)sr.frames_read, (long long)sr.frames_written,
                (long long)sr.frames_dropped, (long long)sr.frames_damaged,
                (long long)sr.frames_lost, sr.hw_decode ? "true" : "false");
        json_string(f, sr.encoder);
        fprintf(f, ", \"reconnects\": %lld, \"missed_frames\": %lld, "
                   "\"disconnected_seconds\": %.3f",
                (long long)sr.reconnects, (long long)sr.missed_frames,
                finite_or_zero(sr.disconnected_seconds));
        fprintf(f, ", \"audio\": %s, \"status\": ", sr.has_audio ? "true" : "false");
        json_string(f, sr.status ? keyer_status_name(sr.status) : "ok");
        fprintf(f, ", \"error\": ");
        json_string(f, sr.error);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
}

keyer_status keyer_session_write_stats(keyer_session *s, const char *path, keyer_error *err)
{
    if (!s || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_session_write_stats: NULL argument");
    keyer_session_report r;
    keyer_session_get_report(s, &r);
    FILE *f = fopen(path, "w");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot create: %s", path,
                               strerror(errno));
    fprintf(f, "{\n  \"keyer_stats_version\": 1,\n  \"device\": ");
    json_string(f, r.device);
    fprintf(f, ",\n  \"model\": ");
    json_string(f, r.model);
    fprintf(f, ",\n  \"model_precision\": ");
    json_string(f, r.model_precision);
    fprintf(f, ",\n  \"detector\": ");
    json_string(f, r.detector);
    fprintf(f, ",\n  \"detector_precision\": ");
    json_string(f, r.detector_precision);
    fprintf(f, ",\n  \"mode\": \"%s\",\n  \"batch\": %d,\n  \"fell_back\": %s,\n",
            s->params.mode == KEYER_PIPELINE_LATENCY ? "latency" : "throughput", r.batch,
            r.fell_back ? "true" : "false");
    fprintf(f, "  \"seconds\": %.4f,\n  \"fps\": %.3f,\n", finite_or_zero(r.seconds),
            finite_or_zero(r.fps));
    fprintf(f, "  \"frames\": {\"read\": %lld, \"written\": %lld, \"dropped\": %lld, "
               "\"damaged\": %lld, \"lost\": %lld, \"on_cpu\": %lld, \"on_cuda\": %lld},\n",
            (long long)r.frames_read, (long long)r.frames_written, (long long)r.frames_dropped,
            (long long)r.frames_damaged, (long long)r.frames_lost, (long long)r.frames_on_cpu,
            (long long)r.frames_on_cuda);
    fprintf(f, "  \"batches\": {\"count\": %lld, \"mean_frames\": %.3f, \"full\": %lld},\n",
            (long long)r.batches, finite_or_zero(r.batch_mean), (long long)r.batches_full);
    fprintf(f, "  \"latency_ms\": ");
    json_latency(f, &r.latency);
    fprintf(f, ",\n  \"stages\": [\n");
    for (int i = 0; i < r.stage_count; i++) {
        const keyer_stage_report *g = &r.stages[i];
        fprintf(f, "    {\"name\": ");
        json_string(f, g->name);
        fprintf(f, ", \"workers\": %d, \"frames\": %lld, \"busy_seconds\": %.4f, "
                   "\"utilization\": %.4f, \"latency_ms\": ",
                g->workers, (long long)g->frames, finite_or_zero(g->busy),
                finite_or_zero(g->utilization));
        json_latency(f, &g->latency);
        fprintf(f, ", \"queue\": {\"capacity\": %d, \"mean_depth\": %.3f, \"max_depth\": %d}}%s\n",
                g->queue_capacity, finite_or_zero(g->queue_mean), g->queue_max,
                i + 1 < r.stage_count ? "," : "");
    }
    fprintf(f, "  ],\n  \"bottleneck\": ");
    if (r.bottleneck >= 0)
        json_string(f, r.stages[r.bottleneck].name);
    else
        fprintf(f, "null");
    fprintf(f, ",\n  \"gpu\": {\"memory_used_bytes\": %lld, \"memory_total_bytes\": %lld, "
               "\"utilization_percent\": %.1f},\n",
            (long long)r.gpu_memory_used, (long long)r.gpu_memory_total,
            finite_or_zero(r.gpu_utilization));
    int failed = 0;
    for (int i = 0; i < keyer_session_stream_count(s); i++)
        failed += kr_stream_status(s->streams[i], NULL) != KEYER_OK;
    fprintf(f, "  \"warnings\": %d,\n  \"failed_streams\": %d,\n  \"streams\": [\n",
            r.warnings, failed);
    json_streams(f, s);
    fprintf(f, "  ]\n}\n");
    int bad = ferror(f);
    if (fclose(f) || bad)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: writing the statistics failed", path);
    return KEYER_OK;
}

keyer_status keyer_session_write_trace(keyer_session *s, const char *path, keyer_error *err)
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
