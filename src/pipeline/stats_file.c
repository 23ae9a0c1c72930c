/* The session's statistics file (keyer_session_write_stats): JSON made from the public reports,
 * so a session over one device and one over several write the same fields. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/engines.h"
#include "pipeline/session.h"

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

/* The entries of a "stages" array, each line starting with @p indent. */
static void json_stages(FILE *f, const keyer_session_report *r, const char *indent)
{
    for (int i = 0; i < r->stage_count; i++) {
        const keyer_stage_report *g = &r->stages[i];
        fprintf(f, "%s{\"name\": ", indent);
        json_string(f, g->name);
        fprintf(f, ", \"workers\": %d, \"frames\": %lld, \"busy_seconds\": %.4f, "
                   "\"utilization\": %.4f, \"latency_ms\": ",
                g->workers, (long long)g->frames, finite_or_zero(g->busy),
                finite_or_zero(g->utilization));
        json_latency(f, &g->latency);
        fprintf(f, ", \"queue\": {\"capacity\": %d, \"mean_depth\": %.3f, \"max_depth\": %d}}%s\n",
                g->queue_capacity, finite_or_zero(g->queue_mean), g->queue_max,
                i + 1 < r->stage_count ? "," : "");
    }
}

/* A session over several devices: ",\n  \"devices\": [...]", each device's own report (its
 * frames, seconds from its first frame read to its last written, stages, bottleneck), so that
 * an uneven split of the work or a device's own bottleneck shows; nothing for one device. */
static void json_devices(FILE *f, keyer_session *s)
{
    keyer_session *eng[64];
    int n = kr_session_engines(s, eng, 64);
    if (n < 1)
        return;
    fprintf(f, ",\n  \"devices\": [\n");
    for (int e = 0; e < n; e++) {
        keyer_session_report r;
        kr_engine_get_report(eng[e], &r);
        fprintf(f, "    {\"device\": ");
        json_string(f, r.device);
        fprintf(f, ", \"seconds\": %.4f, \"fps\": %.3f, \"frames_written\": %lld, "
                   "\"batches\": %lld, \"batch_mean\": %.3f, \"bottleneck\": ",
                finite_or_zero(r.seconds), finite_or_zero(r.fps), (long long)r.frames_written,
                (long long)r.batches, finite_or_zero(r.batch_mean));
        if (r.bottleneck >= 0)
            json_string(f, r.stages[r.bottleneck].name);
        else
            fprintf(f, "null");
        fprintf(f, ",\n     \"stages\": [\n");
        json_stages(f, &r, "       ");
        fprintf(f, "     ]}%s\n", e + 1 < n ? "," : "");
    }
    fprintf(f, "  ]");
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
        fprintf(f, ", \"device\": ");
        json_string(f, sr.device);
        fprintf(f, ", \"frames_people\": %lld", (long long)sr.frames_people);
        fprintf(f, ", \"reconnects\": %lld, \"missed_frames\": %lld, "
                   "\"disconnected_seconds\": %.3f, \"decoder_setups\": %lld, "
                   "\"decoded_pictures\": %lld",
                (long long)sr.reconnects, (long long)sr.missed_frames,
                finite_or_zero(sr.disconnected_seconds), (long long)sr.decoder_setups,
                (long long)sr.decoded_pictures);
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
    fprintf(f, ",\n  \"auto_people\": %s,\n  \"frames_people\": %lld",
            r.auto_people ? "true" : "false", (long long)r.frames_people);
    fprintf(f, ",\n  \"model_precision\": ");
    json_string(f, r.model_precision);
    fprintf(f, ",\n  \"detector\": ");
    json_string(f, r.detector);
    fprintf(f, ",\n  \"detector_precision\": ");
    json_string(f, r.detector_precision);
    fprintf(f, ",\n  \"model_schedule\": ");
    json_string(f, r.model_schedule);
    fprintf(f, ",\n  \"detector_schedule\": ");
    json_string(f, r.detector_schedule);
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
    const keyer_rounds_report *lr = &r.landmark_rounds;
    fprintf(f, "  \"landmark_rounds\": {\"batches\": %lld, \"rounds\": %lld, \"passes\": %lld, "
               "\"runs\": %lld, \"crops\": %lld, \"padded\": %lld, \"syncs\": %lld, "
               "\"round_seconds\": %.4f, \"wait_seconds\": %.4f, \"schedule\": ",
            (long long)lr->batches, (long long)lr->rounds, (long long)lr->passes,
            (long long)lr->runs, (long long)lr->crops, (long long)lr->padded,
            (long long)lr->syncs, finite_or_zero(lr->round_seconds),
            finite_or_zero(lr->wait_seconds));
    json_string(f, lr->schedule);
    fprintf(f, ", \"runs_by_batch\": [");
    for (int i = 0; i < 7; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)lr->runs_by_batch[i]);
    fprintf(f, "]},\n");
    fprintf(f, "  \"latency_ms\": ");
    json_latency(f, &r.latency);
    fprintf(f, ",\n  \"stages\": [\n");
    json_stages(f, &r, "    ");
    fprintf(f, "  ],\n  \"bottleneck\": ");
    if (r.bottleneck >= 0)
        json_string(f, r.stages[r.bottleneck].name);
    else
        fprintf(f, "null");
    json_devices(f, s);
    fprintf(f, ",\n  \"gpu\": {\"memory_used_bytes\": %lld, \"memory_total_bytes\": %lld, "
               "\"utilization_percent\": %.1f},\n",
            (long long)r.gpu_memory_used, (long long)r.gpu_memory_total,
            finite_or_zero(r.gpu_utilization));
    int failed = 0;
    for (int i = 0; i < keyer_session_stream_count(s); i++)
        failed += keyer_session_stream_status(s, i, NULL) != KEYER_OK;
    fprintf(f, "  \"warnings\": %d,\n  \"failed_streams\": %d,\n  \"streams\": [\n",
            r.warnings, failed);
    json_streams(f, s);
    fprintf(f, "  ]\n}\n");
    int bad = ferror(f);
    if (fclose(f) || bad)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: writing the statistics failed", path);
    return KEYER_OK;
}

