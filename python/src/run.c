/* The jobs on keyer's session (keyer/pipeline.h): what keyer.run and keyer.Session share
 * (parameters from option dicts, files, callbacks, the statistics dict), and keyer.run, the
 * main job with the command line's analytics (see kp.h). */
#include "kp.h"

#include <string.h>

#include "analytics.h"

/* ---- parameters ------------------------------------------------------------------------------ */

int kp_job_init(kp_job *job, PyObject *sopts, PyObject *ropts, PyObject *copts, const char *model,
                const char *background, int passthrough, PyObject *progress, int interval_ms)
{
    memset(job, 0, sizeof(*job));
    keyer_session_params *sp = &job->sp;
    *sp = keyer_session_params_defaults();
    const keyer_option *st_tables[1] = {keyer_session_options()};
    void *st_objs[1] = {sp};
    const keyer_option *rt_tables[1] = {keyer_refine_options()};
    void *rt_objs[1] = {&sp->refine};
    const keyer_option *ct_tables[1] = {keyer_composite_options()};
    void *ct_objs[1] = {&sp->composite};
    if (kp_apply_options(sopts, st_tables, st_objs, 1, "session") ||
        kp_apply_options(ropts, rt_tables, rt_objs, 1, "refine") ||
        kp_apply_options(copts, ct_tables, ct_objs, 1, "composite"))
        return -1;
    sp->model = model;
    sp->background = background;
    sp->passthrough = passthrough;
    job->progress = progress != Py_None ? progress : NULL;
    /* the callback also notices Ctrl-C, so it runs even without a Python callable */
    sp->progress = kp_job_progress;
    sp->progress_opaque = job;
    if (interval_ms > 0)
        sp->progress_interval_ms = interval_ms;
    return 0;
}

/* A str item of a dict or NULL (absent or None); -1 on a non-str value. */
static int dict_text(PyObject *d, const char *key, const char **out)
{
    *out = NULL;
    PyObject *v = d && d != Py_None ? PyDict_GetItemString(d, key) : NULL;
    if (!v || v == Py_None)
        return 0;
    *out = PyUnicode_AsUTF8(v);
    return *out ? 0 : -1;
}

int kp_file_params(PyObject *input, PyObject *output, PyObject *writer, int copy_streams,
                   keyer_file_stream_params *fp)
{
    *fp = keyer_file_stream_params_defaults();
    fp->input = PyUnicode_AsUTF8(input);
    fp->output = output == Py_None ? NULL : PyUnicode_AsUTF8(output);
    if (!fp->input || (output != Py_None && !fp->output))
        return -1;
    fp->copy_streams = copy_streams;
    PyObject *q = writer && writer != Py_None ? PyDict_GetItemString(writer, "quality") : NULL;
    if (dict_text(writer, "codec", &fp->writer.codec) ||
        dict_text(writer, "preset", &fp->writer.preset) ||
        dict_text(writer, "pixel_format", &fp->writer.pixel_format) ||
        dict_text(writer, "format", &fp->writer.format) ||
        dict_text(writer, "codec_options", &fp->writer.codec_options))
        return -1;
    if (q && q != Py_None) {
        long v = PyLong_AsLong(q);
        if (v == -1 && PyErr_Occurred())
            return -1;
        fp->writer.quality = (int)v;
    }
    return 0;
}

/* ---- callbacks ------------------------------------------------------------------------------- */

void kp_job_failed(kp_job *job)
{
    if (!job->exc) {
        PyErr_Fetch(&job->exc_type, &job->exc, &job->exc_tb);
        if (!job->exc)
            job->exc = Py_NewRef(Py_None);
    } else {
        PyErr_Clear();
    }
    keyer_session_cancel(job->s);
}

void kp_job_progress(void *opaque, const keyer_session_progress *p)
{
    kp_job *job = opaque;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!job->exc) {
        PyObject *r = NULL;
        if (PyErr_CheckSignals() == 0 && job->progress) {
            PyObject *d = Py_BuildValue("{s:L,s:L,s:L,s:d,s:d,s:d}", "frames_done",
                                        (long long)p->frames_done, "frames_total",
                                        (long long)p->frames_total, "frames_read",
                                        (long long)p->frames_read, "elapsed", p->elapsed, "fps",
                                        p->fps, "remaining", p->remaining);
            r = d ? PyObject_CallOneArg(job->progress, d) : NULL;
            Py_XDECREF(d);
        } else if (!PyErr_Occurred()) {
            r = Py_NewRef(Py_None);
        }
        if (!r) {
            kp_job_failed(job);
        } else {
            if (r == Py_False) /* the callback asked to stop */
                keyer_session_cancel(job->s);
            Py_DECREF(r);
        }
    }
    PyGILState_Release(g);
}

PyObject *kp_job_run(kp_job *job, const char *stats_path, const char *trace_path)
{
    keyer_error e = {0};
    keyer_status st;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_session_run(job->s, &e);
    Py_END_ALLOW_THREADS
    if (!job->exc) {
        keyer_error e2 = {0};
        keyer_status st2 = KEYER_OK;
        if (stats_path && (st == KEYER_OK || st == KEYER_STATUS_INTERRUPTED))
            st2 = keyer_session_write_stats(job->s, stats_path, &e2);
        if (!st2 && trace_path && (st == KEYER_OK || st == KEYER_STATUS_INTERRUPTED))
            st2 = keyer_session_write_trace(job->s, trace_path, &e2);
        if (st2 && !st) {
            st = st2;
            e = e2;
        }
    }
    if (job->exc) {
        PyErr_Restore(job->exc_type, job->exc, job->exc_tb);
        job->exc_type = job->exc = job->exc_tb = NULL;
        return NULL;
    }
    if (st)
        return kp_raise(st, &e);
    return kp_report_dict(job->s);
}

void kp_job_clear(kp_job *job)
{
    if (job->s) {
        Py_BEGIN_ALLOW_THREADS
        keyer_session_destroy(&job->s);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(job->exc_type);
    Py_CLEAR(job->exc);
    Py_CLEAR(job->exc_tb);
}

/* ---- the statistics -------------------------------------------------------------------------- */

static PyObject *latency_dict(const keyer_latency *l)
{
    return Py_BuildValue("{s:L,s:d,s:d,s:d,s:d,s:d}", "count", (long long)l->count, "mean",
                         l->mean, "p50", l->p50, "p95", l->p95, "p99", l->p99, "max", l->max);
}

/* The session's statistics as a dict (the fields of keyer_session_report and each stream's). */
PyObject *kp_report_dict(keyer_session *s)
{
    keyer_session_report r;
    keyer_session_get_report(s, &r);
    PyObject *stages = PyList_New(0), *streams = PyList_New(0);
    for (int i = 0; stages && i < r.stage_count; i++) {
        const keyer_stage_report *g = &r.stages[i];
        PyObject *d = Py_BuildValue("{s:s,s:i,s:L,s:d,s:d,s:N,s:i,s:d,s:i}", "name", g->name,
                                    "workers", g->workers, "frames", (long long)g->frames,
                                    "busy", g->busy, "utilization", g->utilization, "latency",
                                    latency_dict(&g->latency), "queue_capacity",
                                    g->queue_capacity, "queue_mean", g->queue_mean, "queue_max",
                                    g->queue_max);
        if (!d || PyList_Append(stages, d))
            Py_CLEAR(stages);
        Py_XDECREF(d);
    }
    int n = keyer_session_stream_count(s);
    for (int i = 0; streams && i < n; i++) {
        keyer_stream_report sr;
        if (keyer_session_get_stream_report(s, i, &sr, NULL))
            continue;
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:i,s:i,s:L,s:L,s:L,s:L,s:L,s:O,s:s,s:O}", "input", sr.input, "output",
            sr.output, "width", sr.width, "height", sr.height, "frames_read",
            (long long)sr.frames_read, "frames_written", (long long)sr.frames_written,
            "frames_dropped", (long long)sr.frames_dropped, "frames_damaged",
            (long long)sr.frames_damaged, "frames_lost", (long long)sr.frames_lost, "hw_decode",
            sr.hw_decode ? Py_True : Py_False, "encoder", sr.encoder, "has_audio",
            sr.has_audio ? Py_True : Py_False);
        if (!d || PyList_Append(streams, d))
            Py_CLEAR(streams);
        Py_XDECREF(d);
    }
    if (!stages || !streams) {
        Py_XDECREF(stages);
        Py_XDECREF(streams);
        return NULL;
    }
    PyObject *bottleneck = r.bottleneck >= 0 && r.bottleneck < r.stage_count
                               ? PyUnicode_FromString(r.stages[r.bottleneck].name)
                               : Py_NewRef(Py_None);
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:d,s:s,s:s,s:s,s:i,s:O,s:i,s:L,s:d,s:L,s:N,s:N,s:N,"
        "s:N,s:L,s:L,s:d}",
        "frames_read", (long long)r.frames_read, "frames_written", (long long)r.frames_written,
        "frames_dropped", (long long)r.frames_dropped, "frames_damaged",
        (long long)r.frames_damaged, "frames_lost", (long long)r.frames_lost, "frames_on_cpu",
        (long long)r.frames_on_cpu, "frames_on_cuda", (long long)r.frames_on_cuda, "seconds",
        r.seconds, "fps", r.fps, "device", r.device, "model", r.model, "detector", r.detector,
        "batch", r.batch, "fell_back", r.fell_back ? Py_True : Py_False, "warnings", r.warnings,
        "batches", (long long)r.batches, "batch_mean", r.batch_mean, "batches_full",
        (long long)r.batches_full, "latency", latency_dict(&r.latency), "stages", stages,
        "bottleneck", bottleneck, "streams", streams, "gpu_memory_used",
        (long long)r.gpu_memory_used, "gpu_memory_total", (long long)r.gpu_memory_total,
        "gpu_utilization", r.gpu_utilization);
}


/* ---- keyer.run ------------------------------------------------------------------------------- */

/*
 * run(inputs, outputs, session, refine, composite, model, background, passthrough, writer,
 *     copy_streams, progress, progress_interval_ms, stats_path, trace_path, detect, draw,
 *     export) -> dict
 * inputs: list of str; outputs: list of str or None (same length); session/refine/composite:
 * {name: text} for those tables; writer: {codec, preset, quality, pixel_format, format,
 * codec_options}; detect, draw, export: the command line's --detect, --draw, --export, checked
 * by keyer/__init__.py (the command's analytics, tools/keyer/analytics.c, do the work).
 */
static PyObject *py_run(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *inputs, *outputs, *sopts, *ropts, *copts, *writer, *progress;
    const char *model, *background, *stats_path, *trace_path, *detect, *draw, *export_path;
    int copy_streams, interval, passthrough;
    if (!PyArg_ParseTuple(args, "O!O!OOOzzpOpOizzzzz:run", &PyList_Type, &inputs, &PyList_Type,
                          &outputs, &sopts, &ropts, &copts, &model, &background, &passthrough,
                          &writer, &copy_streams, &progress, &interval, &stats_path,
                          &trace_path, &detect, &draw, &export_path))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(inputs);
    if (n < 1 || n != PyList_GET_SIZE(outputs))
        return kp_raise_invalid("run: %s", n < 1 ? "no input given"
                                                 : "one output (or None) per input needed");
    if (n > 64)
        return kp_raise_invalid("run: more than 64 inputs");
    kp_job job;
    if (kp_job_init(&job, sopts, ropts, copts, model, background, passthrough, progress,
                    interval))
        return NULL;
    keyer_session_params *sp = &job.sp;
    if (trace_path && sp->trace_events == 0)
        sp->trace_events = 1 << 20;
    keyer_file_stream_params fps[64];
    const char *names[64];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kp_file_params(PyList_GET_ITEM(inputs, i), PyList_GET_ITEM(outputs, i), writer,
                           copy_streams, &fps[i]))
            return NULL;
        names[i] = fps[i].input;
    }
    /* --detect: the command's analytics, hooked into the session as the command does */
    kc_analytics_opts ao;
    memset(&ao, 0, sizeof(ao));
    if (detect && (kc_parse_detect(detect, &ao) || kc_parse_draw(draw ? draw : "", &ao)))
        return kp_raise_invalid("run: detect '%s' or draw '%s' not understood", detect,
                                draw ? draw : "");
    ao.export_path = export_path;
    ao.backend = KEYER_BACKEND_CPU;
    ao.threads = sp->threads > 0 ? sp->threads : 1; /* as the command: one per stream */
    ao.session_detect = kc_analytics_session_can_detect(&ao);
    kc_analytics *an = NULL;
    keyer_error e = {0};
    keyer_status st = KEYER_OK;
    PyObject *ret = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (detect)
        st = kc_analytics_create(&ao, (int)n, names, &an, &e);
    if (!st && an && ao.session_detect) {
        sp->detect = ao.full_range ? KEYER_SESSION_DETECT_FACES_FULL : KEYER_SESSION_DETECT_FACES;
        sp->detect_fn = kc_analytics_detections;
        sp->detect_opaque = an;
    } else if (!st && an) {
        sp->frame_fn = kc_analytics_frame;
        sp->frame_opaque = an;
    }
    if (sp->expected_files == 0) /* decode_segments -1 decides by it, as in the keyer program */
        sp->expected_files = (int)n;
    if (!st)
        st = keyer_session_create(sp, &job.s, &e);
    for (Py_ssize_t i = 0; !st && i < n; i++)
        st = keyer_session_add_file(job.s, &fps[i], NULL, &e);
    Py_END_ALLOW_THREADS
    if (st)
        kp_raise(st, &e);
    else
        ret = kp_job_run(&job, stats_path, trace_path);
    kp_job_clear(&job); /* its threads call the analytics: destroyed after it */
    if (an && kc_analytics_destroy(&an) && ret) {
        Py_CLEAR(ret);
        keyer_error_set(&e, KEYER_STATUS_IO, "%s: the export could not be written completely",
                        export_path);
        kp_raise(KEYER_STATUS_IO, &e);
    }
    return ret;
}

static PyMethodDef run_methods[] = {
    {"run", py_run, METH_VARARGS, "The main job (see keyer.run)."},
    {NULL, NULL, 0, NULL},
};

int kp_add_run(PyObject *m)
{
    return PyModule_AddFunctions(m, run_methods);
}
