/* keyer.Session: several streams through one keyer session, with per-frame callbacks in order
 * per stream and the analysers of each stream (see kp.h). */
#include "kp.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    kp_job job;             /* job.s: made at init */
    PyObject *dispatch;     /* (stream, index, frame, raw detections) callable, or NULL */
    PyObject *progress;     /* the progress callable (job.progress borrows it) */
    PyObject *keep;         /* list of the str objects the session's parameters point into */
    int pixels;             /* frames go to dispatch as arrays (else None) */
    kp_layout layout;       /* their layout (rgb, bgr, rgba, bgra) */
    int detect;             /* analysers per stream */
    kp_analysers_params ap;
    kp_analysers **an;      /* per stream (max_streams) */
    int nstreams;
    int ran;                /* run() was called */
    PyObject *weakrefs;
} SessionObject;

/* ---- frames to Python and back --------------------------------------------------------------- */

/* Plane @p p of @p f: its rows of w * bpe bytes as a new array (h, w) or (h, w, bpe). */
static PyObject *plane_array(const keyer_frame *f, int p, int swap)
{
    int pw, ph, bpe;
    if (keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &ph, &bpe, NULL))
        return kp_raise_invalid("frame: format %s", keyer_pixel_format_name(f->format));
    PyObject *a = kp_new_array(ph, pw, bpe == 1 ? 0 : bpe);
    kp_plane v;
    if (!a || kp_plane_get(a, 1, "frame", NULL, &v)) {
        Py_XDECREF(a);
        return NULL;
    }
    if (swap)
        kp_swap_rb(v.data, v.stride, f->data[p], f->stride[p], pw, ph, bpe);
    else
        for (int y = 0; y < ph; y++)
            memcpy(v.data + y * v.stride, f->data[p] + y * f->stride[p], (size_t)pw * bpe);
    kp_plane_release(&v);
    return a;
}

/* Copies plane @p p back from the array @p a (the callback may have drawn on it). */
static int plane_back(keyer_frame *f, int p, PyObject *a, int swap)
{
    kp_plane v;
    int pw, ph, bpe;
    if (keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &ph, &bpe, NULL) ||
        kp_plane_get(a, 0, "frame", NULL, &v))
        return -1;
    int ok = v.h == ph && v.w * v.c == pw * bpe;
    if (ok && swap)
        kp_swap_rb(f->data[p], f->stride[p], v.data, v.stride, pw, ph, bpe);
    else if (ok)
        for (int y = 0; y < ph; y++)
            memcpy(f->data[p] + y * f->stride[p], v.data + y * v.stride, (size_t)pw * bpe);
    kp_plane_release(&v);
    if (!ok)
        kp_raise_invalid("on_frame: the frame's array was reshaped");
    return ok ? 0 : -1;
}

/* The output frame as arrays: one array for one plane, else a tuple (NV12: (y, uv)). */
static PyObject *frame_object(const SessionObject *so, const keyer_frame *f, int *swap)
{
    int planes = keyer_pixel_format_planes(f->format);
    *swap = (f->format == KEYER_PIXEL_FORMAT_RGB24 || f->format == KEYER_PIXEL_FORMAT_RGBA) &&
            (so->layout == KP_BGR || so->layout == KP_BGRA);
    if (planes == 1)
        return plane_array(f, 0, *swap);
    PyObject *t = PyTuple_New(planes);
    for (int p = 0; t && p < planes; p++) {
        PyObject *a = plane_array(f, p, 0);
        if (!a)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, p, a);
    }
    return t;
}

static int frame_back(keyer_frame *f, PyObject *obj, int swap)
{
    int planes = keyer_pixel_format_planes(f->format);
    if (planes == 1)
        return plane_back(f, 0, obj, swap);
    for (int p = 0; p < planes; p++)
        if (plane_back(f, p, PyTuple_GET_ITEM(obj, p), 0))
            return -1;
    return 0;
}

/* ---- the session's callbacks (on its writer threads) ----------------------------------------- */

/* Calls dispatch(stream, index, frame, detections) with the GIL. */
static keyer_status call_dispatch(SessionObject *so, int sid, int64_t index,
                                  const keyer_frame *input, keyer_frame *output,
                                  keyer_error *err)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int failed = so->job.exc != NULL;
    PyObject *frame = NULL, *raw = NULL;
    int swap = 0;
    if (!failed) {
        kp_analysers *a = so->detect && sid < so->nstreams ? so->an[sid] : NULL;
        frame = so->pixels && output ? frame_object(so, output, &swap) : Py_NewRef(Py_None);
        raw = !frame ? NULL : a ? kp_analysers_result(a, sid, index, input) : Py_NewRef(Py_None);
        PyObject *r = raw ? PyObject_CallFunction(so->dispatch, "iLOO", sid, (long long)index,
                                                  frame, raw)
                          : NULL;
        if (r && frame != Py_None && frame_back(output, frame, swap))
            Py_CLEAR(r);
        if (!r) {
            kp_job_failed(&so->job);
            failed = 1;
        }
        Py_XDECREF(r);
    }
    Py_XDECREF(frame);
    Py_XDECREF(raw);
    PyGILState_Release(g);
    if (failed)
        return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                               "stream %d: stopped: a callback raised an exception", sid);
    return KEYER_OK;
}

/* keyer_frame_fn: the stream's analysers on the decoded frame, then on_frame. */
static keyer_status session_frame(void *opaque, int sid, int64_t index, const keyer_frame *input,
                                  keyer_frame *output, keyer_error *err)
{
    SessionObject *so = opaque;
    if (so->detect && !so->ap.session_detect && sid < so->nstreams) {
        keyer_status st = kp_analysers_run(so->an[sid], input, err);
        if (st)
            return st;
    }
    return so->dispatch ? call_dispatch(so, sid, index, input, output, err) : KEYER_OK;
}

/* keyer_detect_fn: the session's detections tracked by the stream's face analyser (on_frame
 * follows in session_frame, on the same thread). */
static keyer_status session_detections(void *opaque, int sid, int64_t index,
                                       const keyer_frame *frame, const keyer_detection *dets,
                                       int count, keyer_overlay *overlay, keyer_error *err)
{
    (void)index;
    (void)overlay;
    SessionObject *so = opaque;
    if (sid >= so->nstreams)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "session: no stream %d", sid);
    return kp_analysers_track(so->an[sid], dets, count, frame->width, frame->height, err);
}

/* ---- the type -------------------------------------------------------------------------------- */

static void session_free(SessionObject *so)
{
    kp_job_clear(&so->job); /* its threads call the analysers: destroyed after it */
    for (int i = 0; so->an && i < so->nstreams; i++)
        kp_analysers_destroy(&so->an[i]);
    PyMem_Free(so->an);
    so->an = NULL;
    so->nstreams = 0;
    Py_CLEAR(so->dispatch);
    Py_CLEAR(so->progress);
    Py_CLEAR(so->keep);
}

static void Session_dealloc(SessionObject *so)
{
    PyObject_GC_UnTrack(so);
    if (so->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)so);
    session_free(so);
    Py_TYPE(so)->tp_free((PyObject *)so);
}

/* The callables may hold the Session (an on_frame closure over it): the cycle collector sees
 * them through these two. */
static int Session_traverse(SessionObject *so, visitproc visit, void *arg)
{
    Py_VISIT(so->dispatch);
    Py_VISIT(so->progress);
    return 0;
}

/* Breaks such a cycle; the session itself goes in dealloc. */
static int Session_clear(SessionObject *so)
{
    Py_CLEAR(so->dispatch);
    Py_CLEAR(so->progress);
    so->job.progress = NULL;
    return 0;
}

/*
 * Session(session, refine, composite, model, background, passthrough, what, mesh, max_faces,
 *         dispatch, format, progress, progress_interval_ms)
 * session/refine/composite: {name: text}; what: None or the analysers (keyer.Detector's);
 * dispatch: None or a callable (stream, index, frame, raw detections); format: None (no
 * pixels for dispatch) or the layout of the frames it gets (rgb, bgr, rgba, bgra).
 */
static int Session_init(SessionObject *so, PyObject *args, PyObject *kw)
{
    PyObject *sopts, *ropts, *copts, *what, *dispatch, *progress;
    const char *model, *background, *format;
    int passthrough, mesh, max_faces, interval;
    if (!PyArg_ParseTuple(args, "OOOzzpOpiOzOi:Session", &sopts, &ropts, &copts, &model,
                          &background, &passthrough, &what, &mesh, &max_faces, &dispatch,
                          &format, &progress, &interval))
        return -1;
    session_free(so);
    so->keep = PyList_New(0);
    if (!so->keep)
        return -1;
    so->dispatch = dispatch != Py_None ? Py_NewRef(dispatch) : NULL;
    so->progress = progress != Py_None ? Py_NewRef(progress) : NULL;
    so->pixels = format != NULL;
    if (format && kp_layout_from_name(format, &so->layout))
        return -1;
    if (so->pixels && so->layout == KP_NV12)
        return kp_raise_invalid("Session: format nv12: the frames are rgb, bgr, rgba or bgra"),
               -1;
    if (kp_job_init(&so->job, sopts, ropts, copts, model, background, passthrough,
                    so->progress ? so->progress : Py_None, interval))
        return -1;
    keyer_session_params *sp = &so->job.sp;
    memset(&so->ap, 0, sizeof(so->ap));
    so->detect = what != Py_None;
    if (so->detect) {
        if (kp_analysers_parse(what, &so->ap))
            return -1;
        if (max_faces < 1 || max_faces > KEYER_FACES_MAX)
            return kp_raise_invalid("max_faces: %d is outside 1..%d", max_faces,
                                    KEYER_FACES_MAX), -1;
        so->ap.mesh = mesh;
        so->ap.max_faces = max_faces;
        so->ap.backend = KEYER_BACKEND_CPU;
        so->ap.threads = sp->threads > 0 ? sp->threads : 1; /* one per stream, as the command */
        /* faces alone: detected by the session, batched across streams on its device */
        so->ap.session_detect = so->ap.faces && !so->ap.pose && !mesh;
        if (so->ap.session_detect) {
            sp->detect = so->ap.full_range ? KEYER_SESSION_DETECT_FACES_FULL
                                           : KEYER_SESSION_DETECT_FACES;
            sp->detect_fn = session_detections;
            sp->detect_opaque = so;
        }
        so->an = PyMem_Calloc((size_t)sp->max_streams, sizeof(*so->an));
        if (!so->an)
            return PyErr_NoMemory(), -1;
    }
    if (so->dispatch || (so->detect && !so->ap.session_detect)) {
        sp->frame_fn = session_frame;
        sp->frame_opaque = so;
    }
    keyer_error e = {0};
    keyer_status st;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_session_create(sp, &so->job.s, &e);
    Py_END_ALLOW_THREADS
    if (st)
        return kp_raise(st, &e), -1;
    return 0;
}

static int usable(SessionObject *so)
{
    if (!so->job.s)
        kp_raise_invalid("Session: closed");
    else if (so->ran)
        kp_raise_invalid("Session: already run (make a new one)");
    return so->job.s && !so->ran;
}

/* Keeps the str values of @p d (and @p more) alive as long as the session. */
static int keep_strings(SessionObject *so, PyObject *d, PyObject *a, PyObject *b)
{
    if (a != Py_None && PyList_Append(so->keep, a))
        return -1;
    if (b != Py_None && PyList_Append(so->keep, b))
        return -1;
    if (d != Py_None && PyList_Append(so->keep, d))
        return -1;
    return 0;
}

/* _add(input, output, writer, copy_streams) -> stream id */
static PyObject *Session_add(SessionObject *so, PyObject *args)
{
    PyObject *input, *output, *writer;
    int copy_streams;
    if (!PyArg_ParseTuple(args, "UOOp:_add", &input, &output, &writer, &copy_streams) ||
        !usable(so))
        return NULL;
    keyer_file_stream_params fp;
    if (kp_file_params(input, output, writer, copy_streams, &fp) ||
        keep_strings(so, writer, input, output))
        return NULL;
    if (so->pixels) /* frames for on_frame: decoded as RGB(A) */
        fp.reader.format = so->layout == KP_RGB || so->layout == KP_BGR ? KEYER_PIXEL_FORMAT_RGB24
                                                                          : KEYER_PIXEL_FORMAT_RGBA;
    int n = keyer_session_stream_count(so->job.s);
    if (so->detect && n >= so->job.sp.max_streams)
        return kp_raise_invalid("Session: more than %d streams (max_streams)",
                                so->job.sp.max_streams);
    keyer_error e = {0};
    keyer_status st = KEYER_OK;
    int id = -1;
    Py_BEGIN_ALLOW_THREADS
    if (so->detect)
        st = kp_analysers_create(&so->ap, &so->an[n], &e);
    if (!st)
        st = keyer_session_add_file(so->job.s, &fp, &id, &e);
    Py_END_ALLOW_THREADS
    if (so->detect && so->an[n])
        so->nstreams = n + 1;
    if (st)
        return kp_raise(st, &e);
    return PyLong_FromLong(id);
}

/* _run(stats_path, trace_path) -> the statistics dict */
static PyObject *Session_run(SessionObject *so, PyObject *args)
{
    const char *stats_path, *trace_path;
    if (!PyArg_ParseTuple(args, "zz:_run", &stats_path, &trace_path) || !usable(so))
        return NULL;
    so->ran = 1;
    return kp_job_run(&so->job, stats_path, trace_path);
}

static PyObject *Session_cancel(SessionObject *so, PyObject *unused)
{
    (void)unused;
    keyer_session_cancel(so->job.s); /* any thread, even while run() runs */
    Py_RETURN_NONE;
}

static PyObject *Session_close(SessionObject *so, PyObject *unused)
{
    (void)unused;
    session_free(so);
    Py_RETURN_NONE;
}

static PyObject *Session_report(SessionObject *so, PyObject *unused)
{
    (void)unused;
    if (!so->job.s)
        return kp_raise_invalid("Session: closed");
    return kp_report_dict(so->job.s);
}

static PyObject *Session_get_closed(SessionObject *so, void *closure)
{
    (void)closure;
    return PyBool_FromLong(so->job.s == NULL);
}

static PyMethodDef Session_methods[] = {
    {"_add", (PyCFunction)Session_add, METH_VARARGS, NULL},
    {"_run", (PyCFunction)Session_run, METH_VARARGS, NULL},
    {"cancel", (PyCFunction)Session_cancel, METH_NOARGS,
     "cancel()\n--\n\nStops reading (any thread); run() then finishes the frames read so far "
     "and raises keyer.CancelledError."},
    {"close", (PyCFunction)Session_close, METH_NOARGS,
     "close()\n--\n\nFrees the session, its streams and analysers now."},
    {"report", (PyCFunction)Session_report, METH_NOARGS,
     "report()\n--\n\nThe statistics so far (the dict run() returns)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Session_getset[] = {
    {"closed", (getter)Session_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keyer._keyer.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Streams through one keying session (see keyer.Session).",
    .tp_traverse = (traverseproc)Session_traverse,
    .tp_clear = (inquiry)Session_clear,
    .tp_weaklistoffset = offsetof(SessionObject, weakrefs),
    .tp_methods = Session_methods,
    .tp_getset = Session_getset,
    .tp_init = (initproc)Session_init,
    .tp_new = PyType_GenericNew,
};

int kp_add_session(PyObject *m)
{
    if (PyType_Ready(&SessionType))
        return -1;
    return PyModule_AddObjectRef(m, "Session", (PyObject *)&SessionType);
}
