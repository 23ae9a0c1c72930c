/* The main job's reports (see run.h): the progress bar, log lines below it, the summary. */
#include <stdio.h>
#include <string.h>

#include "run.h"

static void fmt_time(double s, char *buf, size_t n)
{
    if (s < 0 || s > 359999) {
        snprintf(buf, n, "--:--");
        return;
    }
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

void run_on_progress(void *opaque, const keyer_session_progress *p)
{
    run_progress *ps = opaque;
    if (!ps->enabled)
        return;
    char el[16], left[16], bar[32];
    fmt_time(p->elapsed, el, sizeof(el));
    fmt_time(p->remaining, left, sizeof(left));
    const int width = 24;
    double frac = p->frames_total > 0 ? (double)p->frames_done / (double)p->frames_total : 0.0;
    if (frac > 1)
        frac = 1;
    int fill = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    if (p->frames_total > 0)
        fprintf(stderr, "\r[%s] %3d%%  %lld/%lld frames  %.1f fps  %s elapsed  %s left   ", bar,
                (int)(frac * 100), (long long)p->frames_done, (long long)p->frames_total, p->fps,
                el, left);
    else
        fprintf(stderr, "\r%lld frames  %.1f fps  %s elapsed   ", (long long)p->frames_done,
                p->fps, el);
    fflush(stderr);
    ps->drawn = 1;
}

/* Errors and warnings, each on its own line after the progress bar. */
static void on_log(void *opaque, keyer_log_level level, const char *message)
{
    run_progress *progress = opaque;
    if (progress->drawn) {
        fputc('\n', stderr);
        progress->drawn = 0;
    }
    fprintf(stderr, "keyer: %s: %s\n", keyer_log_level_name(level), message);
}

keyer_logger run_logger(run_progress *progress, int verbosity)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = verbosity < 0 ? KEYER_LOG_ERROR : verbosity == 0 ? KEYER_LOG_WARNING
               : verbosity == 1                               ? KEYER_LOG_INFO
                                                              : KEYER_LOG_DEBUG;
    lg.callback = on_log;
    lg.opaque = progress;
    return lg;
}

/* With -v: each stage's times, utilisation and queue, and the latency per frame. */
static void summary_stages(const keyer_session_report *rep, FILE *f)
{
    fprintf(f, "  %-10s %7s %8s %8s %8s %8s %6s %8s\n", "stage", "workers", "mean ms", "p50",
            "p95", "p99", "busy", "queue");
    for (int i = 0; i < rep->stage_count; i++) {
        const keyer_stage_report *g = &rep->stages[i];
        fprintf(f, "  %-10s %7d %8.2f %8.2f %8.2f %8.2f %5.0f%% %4.1f/%-3d%s\n", g->name,
                g->workers, g->latency.mean, g->latency.p50, g->latency.p95, g->latency.p99,
                g->utilization * 100, g->queue_mean, g->queue_capacity,
                i == rep->bottleneck ? "  <- bottleneck" : "");
    }
    fprintf(f, "  latency per frame: mean %.1f ms, p99 %.1f ms; %lld batches of %.2f frames\n",
            rep->latency.mean, rep->latency.p99, (long long)rep->batches, rep->batch_mean);
}

/* A network input's reconnections, under its line. */
static void summary_reconnects(const keyer_stream_report *sr, FILE *f)
{
    if (sr->reconnects)
        fprintf(f, "    %lld reconnection%s: %lld frame%s missed in %.2f s disconnected\n",
                (long long)sr->reconnects, sr->reconnects == 1 ? "" : "s",
                (long long)sr->missed_frames, sr->missed_frames == 1 ? "" : "s",
                sr->disconnected_seconds);
}

void run_summary(keyer_session *s, const run_opts *r, FILE *f)
{
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    /* " (f16)", or on CUDA " (f16, persistent+cluster at batch 1-8, per-node at 16)" */
    char model_prec[128] = "", det_prec[128] = "";
    if (rep.model_precision[0])
        snprintf(model_prec, sizeof(model_prec), " (%s%s%s)", rep.model_precision,
                 rep.model_schedule[0] ? ", " : "", rep.model_schedule);
    if (rep.detector_precision[0])
        snprintf(det_prec, sizeof(det_prec), " (%s%s%s)", rep.detector_precision,
                 rep.detector_schedule[0] ? ", " : "", rep.detector_schedule);
    fprintf(f, "keyer: %lld frame%s in %.2f s (%.1f fps) on %s, model %s%s, batch %d%s%s%s\n",
            (long long)rep.frames_written, rep.frames_written == 1 ? "" : "s", rep.seconds, rep.fps,
            rep.device, rep.model, model_prec, rep.batch, rep.detector[0] ? ", detector " : "",
            rep.detector, det_prec);
    if (rep.auto_people && rep.frames_people > 0)
        fprintf(f, "  automatic model: %s where someone is large in the frame, people mode on "
                   "the other %lld frame%s (--model %s or --model people fixes one)\n",
                rep.model, (long long)rep.frames_people, rep.frames_people == 1 ? "" : "s",
                rep.model);
    int n = keyer_session_stream_count(s), failed = 0;
    /* several GPUs (the device lists them): each stream's line says where it ran */
    int several = strchr(rep.device, '+') != NULL;
    for (int i = 0; i < n; i++) {
        keyer_stream_report sr;
        if (keyer_session_get_stream_report(s, i, &sr, NULL))
            continue;
        if (sr.status) {
            fprintf(f, "  %s -> %s: FAILED after %lld frame%s: %s\n", sr.input,
                    sr.output[0] ? sr.output : "(discarded)", (long long)sr.frames_written,
                    sr.frames_written == 1 ? "" : "s", sr.error);
            summary_reconnects(&sr, f);
            failed++;
            continue;
        }
        char mode[64] = "";
        if (rep.auto_people && rep.frames_people > 0)
            snprintf(mode, sizeof(mode), ", people mode on %lld frame%s",
                     (long long)sr.frames_people, sr.frames_people == 1 ? "" : "s");
        fprintf(f, "  %s -> %s: %lld frames, %dx%d, %s decode, %s%s%s%s%s\n", sr.input,
                sr.output[0] ? sr.output : "(discarded)", (long long)sr.frames_written, sr.width,
                sr.height, sr.hw_decode ? "NVDEC" : "CPU", sr.encoder[0] ? sr.encoder : "no encoder",
                sr.has_audio ? (r->no_audio ? ", audio not copied" : ", audio copied") : "",
                several ? ", on " : "", several ? sr.device : "", mode);
        summary_reconnects(&sr, f);
    }
    if (failed)
        fprintf(f, "  %d of %d stream%s failed (the others ran to their end)\n", failed, n,
                n == 1 ? "" : "s");
    if (rep.frames_dropped || rep.frames_damaged || rep.frames_lost)
        fprintf(f, "  warning: %lld frame%s dropped (live input behind), %lld damaged in the "
                   "input, %lld lost\n",
                (long long)rep.frames_dropped, rep.frames_dropped == 1 ? "" : "s",
                (long long)rep.frames_damaged, (long long)rep.frames_lost);
    if (rep.frames_on_cuda && rep.frames_on_cpu)
        fprintf(f, "  %lld frames inferred on CUDA, %lld on the CPU\n",
                (long long)rep.frames_on_cuda, (long long)rep.frames_on_cpu);
    if (rep.fell_back)
        fprintf(f, "  warning: the GPU was not used for everything (see the warnings above)\n");
    if (rep.warnings)
        fprintf(f, "  %d warning%s\n", rep.warnings, rep.warnings == 1 ? "" : "s");
    if (r->verbosity > 0)
        summary_stages(&rep, f);
}
