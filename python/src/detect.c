/* The analysers of one stream (faces, pose) and keyer.Detector on them (see kp.h). */
#include "kp.h"

#include <stdio.h>
#include <string.h>

struct kp_analysers {
    kp_analysers_params p;
    keyer_faces *faces;
    keyer_pose *pose;
    const keyer_face *fl; /* the last frame's faces (the analyser's array) */
    int nf;
    keyer_pose_result pr;
    int analysed;         /* a frame was analysed since create or reset */
};

keyer_status kp_analysers_create(const kp_analysers_params *p, kp_analysers **out,
                                 keyer_error *err)
{
    *out = NULL;
    kp_analysers *a = PyMem_RawCalloc(1, sizeof(*a));
    if (!a)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "analysers: out of memory");
    a->p = *p;
    keyer_status st = KEYER_OK;
    /* the settings of the main job's --detect (tools/keyer/analytics.c) */
    if (p->faces) {
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.range = p->full_range ? KEYER_FACE_RANGE_FULL : KEYER_FACE_RANGE_SHORT;
        fp.landmarks = p->mesh;
        fp.detector = !p->session_detect;
        fp.max_faces = p->max_faces;
        fp.detect_interval = fp.landmarks ? 10 : 0;
        fp.backend = p->backend;
        fp.threads = p->threads;
        st = keyer_faces_create(&fp, &a->faces, err);
    }
    if (!st && p->pose) {
        keyer_pose_params pp = keyer_pose_params_defaults();
        pp.model = (keyer_pose_model)p->pose_model;
        pp.backend = p->backend;
        pp.threads = p->threads;
        pp.segmentation = 0;
        st = keyer_pose_create(&pp, &a->pose, err);
    }
    if (st) {
        kp_analysers_destroy(&a);
        return st;
    }
    *out = a;
    return KEYER_OK;
}

void kp_analysers_destroy(kp_analysers **pa)
{
    if (!pa || !*pa)
        return;
    keyer_faces_destroy(&(*pa)->faces);
    keyer_pose_destroy(&(*pa)->pose);
    PyMem_RawFree(*pa);
    *pa = NULL;
}

keyer_status kp_analysers_run(kp_analysers *a, const keyer_frame *frame, keyer_error *err)
{
    keyer_status st;
    a->nf = 0;
    a->analysed = 0;
    memset(&a->pr, 0, sizeof(a->pr));
    if (a->faces && (st = keyer_faces_run(a->faces, frame, &a->fl, &a->nf, err)))
        return keyer_error_prefix(err, "face analysis: ");
    if (a->pose && (st = keyer_pose_run(a->pose, frame, &a->pr, err)))
        return keyer_error_prefix(err, "pose: ");
    a->analysed = 1;
    return KEYER_OK;
}

keyer_status kp_analysers_track(kp_analysers *a, const keyer_detection *dets, int n, int width,
                                int height, keyer_error *err)
{
    a->nf = 0;
    a->analysed = 0;
    keyer_status st = keyer_faces_track(a->faces, dets, n, width, height, &a->fl, &a->nf, err);
    if (st)
        return keyer_error_prefix(err, "face tracking: ");
    a->analysed = 1;
    return KEYER_OK;
}

void kp_analysers_reset(kp_analysers *a)
{
    keyer_faces_reset(a->faces);
    keyer_pose_reset(a->pose);
    a->nf = 0;
    a->analysed = 0;
}

/* (id, score, detected, (x0, y0, x1, y1), keypoints (k, 2), presence, landmarks (468, 3)) */
static PyObject *face_tuple(const keyer_face *f)
{
    const keyer_detection *b = &f->box;
    PyObject *kp = kp_float_array(&b->keypoints[0][0], b->num_keypoints, 2);
    PyObject *lm = !kp                ? NULL
                   : f->has_landmarks ? kp_float_array(&f->landmarks[0][0],
                                                       KEYER_FACE_MESH_POINTS, 3)
                                      : Py_NewRef(Py_None);
    PyObject *presence = !lm ? NULL
                         : f->has_landmarks ? PyFloat_FromDouble(f->presence)
                                            : Py_NewRef(Py_None);
    if (!presence) {
        Py_XDECREF(kp);
        Py_XDECREF(lm);
        return NULL;
    }
    return Py_BuildValue("(kdO(dddd)NNN)", (unsigned long)f->id, (double)b->score,
                         f->detected ? Py_True : Py_False, (double)b->xmin, (double)b->ymin,
                         (double)b->xmax, (double)b->ymax, kp, presence, lm);
}

/* (presence, landmarks (33, 5): x, y, z, visibility, presence, world (33, 3)) */
static PyObject *pose_tuple(const keyer_pose_result *r)
{
    float lm[KEYER_POSE_LANDMARKS][5];
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++) {
        const keyer_pose_landmark *l = &r->landmarks[i];
        lm[i][0] = l->x;
        lm[i][1] = l->y;
        lm[i][2] = l->z;
        lm[i][3] = l->visibility;
        lm[i][4] = l->presence;
    }
    PyObject *a = kp_float_array(&lm[0][0], KEYER_POSE_LANDMARKS, 5);
    PyObject *w = a ? kp_float_array(&r->world[0][0], KEYER_POSE_LANDMARKS, 3) : NULL;
    if (!w) {
        Py_XDECREF(a);
        return NULL;
    }
    return Py_BuildValue("(dNN)", (double)r->presence, a, w);
}

PyObject *kp_analysers_result(kp_analysers *a, int stream, int64_t index,
                              const keyer_frame *frame)
{
    PyObject *d = Py_BuildValue("{s:i,s:L,s:i,s:i}", "stream", stream, "index", (long long)index,
                                "width", frame->width, "height", frame->height);
    if (!d)
        return NULL;
    if (frame->pts != INT64_MIN && frame->time_base.num > 0 && frame->time_base.den > 0) {
        PyObject *t = PyFloat_FromDouble((double)frame->pts * frame->time_base.num /
                                         frame->time_base.den);
        if (!t || PyDict_SetItemString(d, "time", t)) {
            Py_XDECREF(t);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(t);
    }
    if (a->faces) {
        PyObject *faces = PyList_New(a->analysed ? a->nf : 0);
        for (int i = 0; faces && a->analysed && i < a->nf; i++) {
            PyObject *f = face_tuple(&a->fl[i]);
            if (!f)
                Py_CLEAR(faces);
            else
                PyList_SET_ITEM(faces, i, f);
        }
        if (!faces || PyDict_SetItemString(d, "faces", faces)) {
            Py_XDECREF(faces);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(faces);
    }
    if (a->pose) {
        PyObject *p = a->analysed && a->pr.found ? pose_tuple(&a->pr) : Py_NewRef(Py_None);
        if (!p || PyDict_SetItemString(d, "pose", p)) {
            Py_XDECREF(p);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(p);
    }
    return d;
}

/* One word of what=: faces, faces:short, faces:full, pose, pose:lite, pose:full, pose:heavy. */
static int parse_word(const char *w, size_t n, kp_analysers_params *p)
{
    static const struct {
        const char *word;
        int faces, full_range, pose, pose_model;
    } words[] = {
        {"faces", 1, 0, 0, 0},
        {"faces:short", 1, 0, 0, 0},
        {"faces:full", 1, 1, 0, 0},
        {"pose", 0, 0, 1, KEYER_POSE_MODEL_LITE},
        {"pose:lite", 0, 0, 1, KEYER_POSE_MODEL_LITE},
        {"pose:full", 0, 0, 1, KEYER_POSE_MODEL_FULL},
        {"pose:heavy", 0, 0, 1, KEYER_POSE_MODEL_HEAVY},
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i].word) != n || strncmp(words[i].word, w, n))
            continue;
        if (words[i].faces) {
            p->faces = 1;
            p->full_range = words[i].full_range;
        } else {
            p->pose = 1;
            p->pose_model = words[i].pose_model;
        }
        return 0;
    }
    kp_raise_invalid("what: unknown '%.*s' (faces, faces:full, pose, pose:full, pose:heavy)",
                     (int)n, w);
    return -1;
}

int kp_analysers_parse(PyObject *what, kp_analysers_params *p)
{
    p->faces = p->pose = 0;
    PyObject *seq = PyUnicode_Check(what)
                        ? PyTuple_Pack(1, what)
                        : PySequence_Fast(what, "what: a str or a sequence of str");
    if (!seq)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; !rc && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (!s) {
            if (!PyErr_Occurred())
                kp_raise_invalid("what: a str or a sequence of str");
            rc = -1;
            break;
        }
        for (const char *w = s; !rc && *w;) { /* also "faces,pose" */
            size_t n = strcspn(w, ",");
            rc = n ? parse_word(w, n, p) : 0;
            w += n;
            if (*w == ',')
                w++;
        }
    }
    Py_DECREF(seq);
    if (!rc && !p->faces && !p->pose) {
        kp_raise_invalid("what: faces and/or pose");
        rc = -1;
    }
    return rc;
}

/* ---- keyer.Detector -------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    kp_analysers *a;
    kp_layout layout;     /* default input layout */
    int busy;             /* a call runs without the GIL */
    keyer_frame *rgb;     /* BGR(A) input swapped to RGB(A) */
    PyObject *weakrefs;
} DetectorObject;

static void detector_free(DetectorObject *d)
{
    kp_analysers_destroy(&d->a);
    keyer_frame_destroy(&d->rgb);
}

static void Detector_dealloc(DetectorObject *d)
{
    if (d->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)d);
    detector_free(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static int Detector_init(DetectorObject *d, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"what", "mesh", "max_faces", "backend", "threads", "format", NULL};
    PyObject *what = NULL;
    int mesh = 0, max_faces = 16, threads = 0;
    const char *backend = "cpu", *format = "rgb";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pisis:Detector", kwlist, &what, &mesh,
                                     &max_faces, &backend, &threads, &format))
        return -1;
    if (d->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Detector: in use by another thread");
        return -1;
    }
    detector_free(d);
    kp_analysers_params p;
    memset(&p, 0, sizeof(p));
    keyer_error e = {0};
    keyer_status st;
    if (kp_analysers_parse(what, &p) || kp_layout_from_name(format, &d->layout))
        return -1;
    if (max_faces < 1 || max_faces > KEYER_FACES_MAX)
        return kp_raise_invalid("max_faces: %d is outside 1..%d", max_faces, KEYER_FACES_MAX), -1;
    if (threads < 0 || threads > 256)
        return kp_raise_invalid("threads: %d is outside 0..256", threads), -1;
    if ((st = keyer_backend_from_name(backend, &p.backend, &e)))
        return kp_raise(st, &e), -1;
    p.mesh = mesh;
    p.max_faces = max_faces;
    p.threads = threads;
    Py_BEGIN_ALLOW_THREADS
    st = kp_analysers_create(&p, &d->a, &e);
    Py_END_ALLOW_THREADS
    if (st)
        return kp_raise(st, &e), -1;
    return 0;
}

static int detector_usable(DetectorObject *d)
{
    if (!d->a) {
        kp_raise_invalid("Detector: closed");
        return 0;
    }
    if (d->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Detector: in use by another thread (use one "
                                            "Detector per thread)");
        return 0;
    }
    return 1;
}

/* detect(frame, *, format=None, index=0) -> the raw result dict (keyer.Detections wraps it) */
static PyObject *Detector_detect(DetectorObject *d, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"frame", "format", "index", NULL};
    PyObject *frame;
    const char *format = NULL;
    long long index = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$zL:detect", kwlist, &frame, &format, &index) ||
        !detector_usable(d))
        return NULL;
    kp_layout layout = d->layout;
    if (format && kp_layout_from_name(format, &layout))
        return NULL;
    kp_input in;
    const keyer_frame *f;
    if (kp_host_frame(frame, layout, 0, &in, &d->rgb, &f))
        return NULL;
    keyer_error e = {0};
    keyer_status st;
    d->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = kp_analysers_run(d->a, f, &e);
    Py_END_ALLOW_THREADS
    d->busy = 0;
    PyObject *ret = st ? kp_raise(st, &e) : kp_analysers_result(d->a, 0, index, f);
    kp_input_release(&in);
    return ret;
}

static PyObject *Detector_reset(DetectorObject *d, PyObject *unused)
{
    (void)unused;
    if (!detector_usable(d))
        return NULL;
    kp_analysers_reset(d->a);
    Py_RETURN_NONE;
}

static PyObject *Detector_close(DetectorObject *d, PyObject *unused)
{
    (void)unused;
    if (d->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Detector: in use by another thread");
        return NULL;
    }
    detector_free(d);
    Py_RETURN_NONE;
}

static PyObject *Detector_get_closed(DetectorObject *d, void *closure)
{
    (void)closure;
    return PyBool_FromLong(d->a == NULL);
}

static PyMethodDef Detector_methods[] = {
    {"_detect", (PyCFunction)(void (*)(void))Detector_detect, METH_VARARGS | METH_KEYWORDS,
     "_detect(frame, *, format=None, index=0)\n--\n\nAnalyses one frame: the raw result."},
    {"reset", (PyCFunction)Detector_reset, METH_NOARGS,
     "reset()\n--\n\nForgets the tracked faces and pose (a new clip, a seek)."},
    {"close", (PyCFunction)Detector_close, METH_NOARGS,
     "close()\n--\n\nFrees the C objects now; the Detector cannot be used afterwards."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Detector_getset[] = {
    {"closed", (getter)Detector_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DetectorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keyer._keyer.Detector",
    .tp_basicsize = sizeof(DetectorObject),
    .tp_dealloc = (destructor)Detector_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Face and pose analysers of one stream (see keyer.Detector).",
    .tp_weaklistoffset = offsetof(DetectorObject, weakrefs),
    .tp_methods = Detector_methods,
    .tp_getset = Detector_getset,
    .tp_init = (initproc)Detector_init,
    .tp_new = PyType_GenericNew,
};

int kp_add_detect(PyObject *m)
{
    if (PyType_Ready(&DetectorType))
        return -1;
    return PyModule_AddObjectRef(m, "Detector", (PyObject *)&DetectorType);
}
