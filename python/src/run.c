/* keyer.run (the main job) and keyer.Session (streams with per-frame callbacks), both on
 * keyer's session (keyer/pipeline.h), and the statistics dict (see kp.h). */
#include "kp.h"

#include <string.h>

typedef struct run_ctx {
    PyObject *callback;  /* progress callable or NULL */
    PyObject *exc_type, *exc, *exc_tb; /* the exception it raised (exc: its value) */
    keyer_session *session;
} run_ctx;

static void run_progress(void *opaque, const keyer_session_progress *p)
{
    run_ctx *c = opaque;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!c->exc) {
        PyObject *r = NULL;
        if (PyErr_CheckSignals() == 0 && c->callback) {
            PyObject *d = Py_BuildValue("{s:L,s:L,s:L,s:d,s:d,s:d}", "frames_done",
                                        (long long)p->frames_done, "frames_total",
                                        (long long)p->frames_total, "frames_read",
                                        (long long)p->frames_read, "elapsed", p->elapsed, "fps",
                                        p->fps, "remaining", p->remaining);
            r = d ? PyObject_CallOneArg(c->callback, d) : NULL;
            Py_XDECREF(d);
        } else if (!PyErr_Occurred()) {
            r = Py_NewRef(Py_None);
        }
        if (!r) {
            PyErr_Fetch(&c->exc_type, &c->exc, &c->exc_tb);
            if (!c->exc)
                c->exc = Py_NewRef(Py_None);
            keyer_session_cancel(c->session);
        } else {
            if (r == Py_False) /* the callback asked to stop */
                keyer_session_cancel(c->session);
            Py_DECREF(r);
        }
    }
    PyGILState_Release(g);
}

static PyObject *latency_dict(const keyer_latency *l)
{
    return Py_BuildValue("{s:L,s:d,s:d,s:d,s:d,s:d}", "count", (long long)l->count, "mean",
                         l->mean, "p50", l->p50, "p95", l->p95, "p99", l->p99, "max", l->max);
}

/* The session's statistics as a dict (the fields of keyer_session_report and each stream's). */
static PyObject *report_dict(keyer_session *s)
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

/*
 * run(inputs, outputs, session, refine, composite, model, background, writer, copy_streams,
 *     progress, progress_interval_ms, stats_path, trace_path) -> dict
 * inputs: list of str; outputs: list of str or None (same length); session/refine/composite:
 * {name: text} for those tables; writer: {codec, preset, quality, pixel_format, format,
 * codec_options}.
 */
static PyObject *py_run(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *inputs, *outputs, *sopts, *ropts, *copts, *writer, *progress;
    const char *model, *background, *stats_path, *trace_path;
    int copy_streams, interval;
    if (!PyArg_ParseTuple(args, "O!O!OOOzzOpOizz:run", &PyList_Type, &inputs, &PyList_Type,
                          &outputs, &sopts, &ropts, &copts, &model, &background, &writer,
                          &copy_streams, &progress, &interval, &stats_path, &trace_path))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(inputs);
    if (n < 1 || n != PyList_GET_SIZE(outputs))
        return kp_raise_invalid("run: %s", n < 1 ? "no input given"
                                              : "one output (or None) per input needed");
    keyer_session_params sp = keyer_session_params_defaults();
    const keyer_option *st_tables[1] = {keyer_session_options()};
    void *st_objs[1] = {&sp};
    const keyer_option *rt_tables[1] = {keyer_refine_options()};
    void *rt_objs[1] = {&sp.refine};
    const keyer_option *ct_tables[1] = {keyer_composite_options()};
    void *ct_objs[1] = {&sp.composite};
    if (kp_apply_options(sopts, st_tables, st_objs, 1, "session") ||
        kp_apply_options(ropts, rt_tables, rt_objs, 1, "refine") ||
        kp_apply_options(copts, ct_tables, ct_objs, 1, "composite"))
        return NULL;
    sp.model = model;
    sp.background = background;
    run_ctx ctx = {progress != Py_None ? progress : NULL, NULL, NULL, NULL, NULL};
    /* the callback also notices Ctrl-C, so it runs even without a Python callable */
    sp.progress = run_progress;
    sp.progress_opaque = &ctx;
    if (interval > 0)
        sp.progress_interval_ms = interval;
    if (trace_path && sp.trace_events == 0)
        sp.trace_events = 1 << 20;
    keyer_file_stream_params fps[64];
    if (n > 64)
        return kp_raise_invalid("run: more than 64 inputs");
    for (Py_ssize_t i = 0; i < n; i++) {
        keyer_file_stream_params *fp = &fps[i];
        *fp = keyer_file_stream_params_defaults();
        PyObject *o = PyList_GET_ITEM(outputs, i);
        fp->input = PyUnicode_AsUTF8(PyList_GET_ITEM(inputs, i));
        fp->output = o == Py_None ? NULL : PyUnicode_AsUTF8(o);
        if (!fp->input || (o != Py_None && !fp->output))
            return NULL;
        fp->copy_streams = copy_streams;
        PyObject *q = writer && writer != Py_None ? PyDict_GetItemString(writer, "quality") : NULL;
        if (dict_text(writer, "codec", &fp->writer.codec) ||
            dict_text(writer, "preset", &fp->writer.preset) ||
            dict_text(writer, "pixel_format", &fp->writer.pixel_format) ||
            dict_text(writer, "format", &fp->writer.format) ||
            dict_text(writer, "codec_options", &fp->writer.codec_options))
            return NULL;
        if (q && q != Py_None) {
            long v = PyLong_AsLong(q);
            if (v == -1 && PyErr_Occurred())
                return NULL;
            fp->writer.quality = (int)v;
        }
    }
    keyer_error e = {0};
    keyer_status st;
    keyer_session *s = NULL;
    PyObject *ret = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_session_create(&sp, &s, &e);
    for (Py_ssize_t i = 0; !st && i < n; i++)
        st = keyer_session_add_file(s, &fps[i], NULL, &e);
    ctx.session = s;
    if (!st)
        st = keyer_session_run(s, &e);
    Py_END_ALLOW_THREADS
    if (s && !ctx.exc) {
        keyer_error e2 = {0};
        keyer_status st2 = KEYER_OK;
        if (stats_path && (st == KEYER_OK || st == KEYER_STATUS_INTERRUPTED))
            st2 = keyer_session_write_stats(s, stats_path, &e2);
        if (!st2 && trace_path && (st == KEYER_OK || st == KEYER_STATUS_INTERRUPTED))
            st2 = keyer_session_write_trace(s, trace_path, &e2);
        if (st2 && !st) {
            st = st2;
            e = e2;
        }
    }
    if (ctx.exc)
        PyErr_Restore(ctx.exc_type, ctx.exc, ctx.exc_tb);
    else if (st)
        kp_raise(st, &e);
    else
        ret = report_dict(s);
    Py_BEGIN_ALLOW_THREADS
    keyer_session_destroy(&s);
    Py_END_ALLOW_THREADS
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
