/*
 * keyer._keyer: the C extension of the Python package, written against keyer's public headers
 * (include/keyer/); Keyer is the library's keying chain (keyer/keying.h). Arrays cross the boundary
 * through the buffer protocol (NumPy arrays, memoryviews, anything exporting uint8 strided
 * buffers), so no NumPy headers are needed to build it; new arrays are made by calling
 * numpy.empty. The GIL is released around every call into keyer that does work.
 *
 * The Python layer (keyer/__init__.py) subclasses the types and turns keyword options into
 * the option tables' "name=value" text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <string.h>

#include "keyer/keyer.h"

/* ---- errors ------------------------------------------------------------------------------- */

static PyObject *Error;                    /* keyer.Error */
static PyObject *StatusErrors[KEYER_STATUS_COUNT_]; /* per status; NULL: Error itself */

/* Raises the exception of @p err's status with keyer's message; returns NULL. */
static PyObject *raise_keyer(keyer_status st, const keyer_error *err)
{
    PyObject *type = (st > 0 && st < KEYER_STATUS_COUNT_ && StatusErrors[st]) ? StatusErrors[st]
                                                                             : Error;
    const char *msg = err && err->message[0] ? err->message : keyer_status_name(st);
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc)
        return NULL;
    PyObject *name = PyUnicode_FromString(keyer_status_name(st));
    PyObject *text = PyUnicode_FromString(msg);
    if (name && text && !PyObject_SetAttrString(exc, "status", name) &&
        !PyObject_SetAttrString(exc, "message", text))
        PyErr_SetObject(type, exc);
    Py_XDECREF(name);
    Py_XDECREF(text);
    Py_DECREF(exc);
    return NULL;
}

/* Raises InvalidArgumentError with a formatted message (the checks of this module). */
static PyObject *raise_invalid(const char *fmt, ...)
{
    keyer_error e = {0};
    char buf[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    keyer_error_set(&e, KEYER_STATUS_INVALID_ARGUMENT, "%s", buf);
    return raise_keyer(KEYER_STATUS_INVALID_ARGUMENT, &e);
}

/* ---- option tables ------------------------------------------------------------------------ */

static const keyer_option *table_by_name(const char *name)
{
    if (!strcmp(name, "refine"))
        return keyer_refine_options();
    if (!strcmp(name, "composite"))
        return keyer_composite_options();
    if (!strcmp(name, "session"))
        return keyer_session_options();
    if (!strcmp(name, "prepare"))
        return keyer_prepare_options();
    return NULL;
}

static const char *option_type_name(keyer_option_type t)
{
    static const char *names[] = {"int", "float", "bool", "enum", "color", "string", "custom"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

/* options(table) -> list of (name, type, default, min, max, choices, help) */
static PyObject *py_options(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    const keyer_option *t = table_by_name(name);
    if (!t)
        return raise_invalid("unknown option table '%s' (refine, composite, session, prepare)",
                             name);
    PyObject *list = PyList_New(0);
    for (const keyer_option *o = t; list && o->name; o++) {
        PyObject *choices = PyTuple_New(0);
        if (o->choices) {
            Py_DECREF(choices);
            Py_ssize_t n = 0;
            while (o->choices[n].name)
                n++;
            choices = PyTuple_New(n);
            for (Py_ssize_t i = 0; choices && i < n; i++)
                PyTuple_SET_ITEM(choices, i, PyUnicode_FromString(o->choices[i].name));
        }
        PyObject *def;
        if (o->type == KEYER_OPTION_STRING || o->type == KEYER_OPTION_CUSTOM) {
            def = o->def_string ? PyUnicode_FromString(o->def_string) : Py_NewRef(Py_None);
        } else if (o->type == KEYER_OPTION_ENUM && o->choices) {
            def = Py_NewRef(Py_None);
            for (const keyer_option_choice *c = o->choices; c->name; c++)
                if (c->value == (int)o->def) {
                    Py_DECREF(def);
                    def = PyUnicode_FromString(c->name);
                    break;
                }
        } else if (o->type == KEYER_OPTION_FLOAT) {
            def = PyFloat_FromDouble(o->def);
        } else if (o->type == KEYER_OPTION_BOOL) {
            def = PyBool_FromLong(o->def != 0);
        } else {
            def = PyLong_FromLongLong((long long)o->def);
        }
        PyObject *row = Py_BuildValue("(ssNddNs)", o->name, option_type_name(o->type), def,
                                      o->min, o->max, choices, o->help ? o->help : "");
        if (!row || PyList_Append(list, row)) {
            Py_XDECREF(row);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(row);
    }
    return list;
}

/* Applies {name: text} to the tables in order (the first that has the name): returns 0, or
 * -1 with a Python exception. Names no table has are an error naming every table. */
static int apply_options(PyObject *dict, const keyer_option *const *tables, void *const *objs,
                         int ntables, const char *what)
{
    if (!dict || dict == Py_None)
        return 0;
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "options must be a dict");
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        const char *text = value == Py_None ? NULL : PyUnicode_AsUTF8(value);
        if (!name || (value != Py_None && !text))
            return -1;
        int t = 0;
        while (t < ntables && !keyer_option_find(tables[t], name))
            t++;
        if (t == ntables) {
            raise_invalid("unknown option '%s' (not a %s option)", name, what);
            return -1;
        }
        keyer_error e = {0};
        keyer_status st = keyer_option_set(tables[t], objs[t], name, text, &e);
        if (st) {
            raise_keyer(st, &e);
            return -1;
        }
    }
    return 0;
}

/* ---- arrays ------------------------------------------------------------------------------- */

static PyObject *numpy_empty; /* numpy.empty, imported on first use */

/* A new uint8 C-contiguous array of the shape (h, w) or (h, w, c) (c 0: two dimensions). */
static PyObject *new_array(Py_ssize_t h, Py_ssize_t w, Py_ssize_t c)
{
    if (!numpy_empty) {
        PyObject *np = PyImport_ImportModule("numpy");
        if (!np)
            return NULL;
        numpy_empty = PyObject_GetAttrString(np, "empty");
        Py_DECREF(np);
        if (!numpy_empty)
            return NULL;
    }
    PyObject *shape = c ? Py_BuildValue("(nnn)", h, w, c) : Py_BuildValue("(nn)", h, w);
    if (!shape)
        return NULL;
    PyObject *arr = PyObject_CallFunction(numpy_empty, "Os", shape, "uint8");
    Py_DECREF(shape);
    return arr;
}

/* The element type of @p obj as text, for messages ("float64", or the buffer's format). */
static void type_text(PyObject *obj, const Py_buffer *v, char *buf, size_t n)
{
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    PyObject *s = dt ? PyObject_Str(dt) : NULL;
    const char *t = s ? PyUnicode_AsUTF8(s) : NULL;
    snprintf(buf, n, "%s", t ? t : v && v->format ? v->format : "?");
    Py_XDECREF(s);
    Py_XDECREF(dt);
    PyErr_Clear();
}

/*
 * Gets @p obj's buffer as a uint8 image plane: 2 dimensions (h, w) or 3 (h, w, c) with
 * elements and pixels packed along the row (strides c and 1) and rows at a positive stride.
 * Fills @p v (release it with PyBuffer_Release) and *h, *w, *c (1 for 2 dimensions), *stride.
 * Returns 0, or -1 with InvalidArgumentError naming @p what.
 */
static int get_plane(PyObject *obj, int writable, const char *what, Py_buffer *v, int *h, int *w,
                     int *c, ptrdiff_t *stride)
{
    int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags)) {
        PyErr_Clear();
        Py_TYPE(obj)->tp_as_buffer && !writable
            ? (void)raise_invalid("%s: not a readable strided array", what)
            : (void)raise_invalid("%s: not a %sarray (a %s)", what, writable ? "writable " : "",
                                  Py_TYPE(obj)->tp_name);
        return -1;
    }
    char tbuf[64];
    if (v->itemsize != 1 || (v->format && strcmp(v->format, "B") && strcmp(v->format, "=B") &&
                             strcmp(v->format, "<B") && strcmp(v->format, "|B"))) {
        type_text(obj, v, tbuf, sizeof(tbuf));
        raise_invalid("%s: elements must be uint8, not %s", what, tbuf);
        goto fail;
    }
    if (v->ndim != 2 && v->ndim != 3) {
        raise_invalid("%s: expected 2 or 3 dimensions (height, width[, channels]), got %d", what,
                      v->ndim);
        goto fail;
    }
    *h = (int)v->shape[0];
    *w = (int)v->shape[1];
    *c = v->ndim == 3 ? (int)v->shape[2] : 1;
    if (v->shape[0] <= 0 || v->shape[1] <= 0 || v->shape[0] > 65536 || v->shape[1] > 65536 ||
        (v->ndim == 3 && (v->shape[2] <= 0 || v->shape[2] > 4))) {
        raise_invalid("%s: unsupported shape %s", what, v->ndim == 3 ? "(h, w, c)" : "(h, w)");
        goto fail;
    }
    if ((v->ndim == 3 && v->strides[2] != 1) || v->strides[1] != *c ||
        v->strides[0] < (Py_ssize_t)*w * *c) {
        raise_invalid("%s: pixels must be contiguous within each row (strides %zd, %zd%s), rows "
                      "at a positive stride of at least %d bytes; use numpy.ascontiguousarray",
                      what, v->strides[0], v->strides[1], v->ndim == 3 ? ", ..." : "",
                      *w * *c);
        goto fail;
    }
    *stride = v->strides[0];
    return 0;
fail:
    PyBuffer_Release(v);
    return -1;
}

/* ---- pixel layouts ------------------------------------------------------------------------ */

/* What the caller's arrays hold. */
typedef enum kp_layout {
    KP_RGB = 0, /* (h, w, 3) R, G, B */
    KP_BGR,     /* (h, w, 3) B, G, R (OpenCV) */
    KP_RGBA,    /* (h, w, 4) */
    KP_BGRA,    /* (h, w, 4) B, G, R, A (OpenCV) */
    KP_NV12,    /* a (y, uv) pair, or one (h * 3 / 2, w) array */
} kp_layout;

static const char *const layout_names[] = {"rgb", "bgr", "rgba", "bgra", "nv12", NULL};

static int layout_from_name(const char *name, kp_layout *out)
{
    for (int i = 0; layout_names[i]; i++)
        if (!strcmp(name, layout_names[i])) {
            *out = (kp_layout)i;
            return 0;
        }
    raise_invalid("format '%s': expected rgb, bgr, rgba, bgra or nv12", name);
    return -1;
}

/* Copies a packed picture swapping channels 0 and 2 (RGB <-> BGR, RGBA <-> BGRA). */
static void swap_rb(uint8_t *dst, ptrdiff_t ds, const uint8_t *src, ptrdiff_t ss, int w, int h,
                    int c)
{
    for (int y = 0; y < h; y++) {
        const uint8_t *s = src + y * ss;
        uint8_t *d = dst + y * ds;
        if (c == 3)
            for (int x = 0; x < w; x++, s += 3, d += 3) {
                uint8_t r = s[2], g = s[1], b = s[0];
                d[0] = r, d[1] = g, d[2] = b;
            }
        else
            for (int x = 0; x < w; x++, s += 4, d += 4) {
                uint8_t r = s[2], g = s[1], b = s[0], a = s[3];
                d[0] = r, d[1] = g, d[2] = b, d[3] = a;
            }
    }
}

/* A frame's planes as the caller gave them (views, no buffers). */
typedef struct kp_input {
    Py_buffer views[2];
    int nviews;
    kp_layout layout;
    int stacked;       /* NV12 given as one array */
    keyer_frame frame; /* a view of the caller's pixels (BGR, BGRA: still swapped) */
} kp_input;

static void input_release(kp_input *in)
{
    for (int i = 0; i < in->nviews; i++)
        PyBuffer_Release(&in->views[i]);
    in->nviews = 0;
}

/* Describes the caller's frame @p obj in @p layout as a keyer frame view. 0, or -1 raised. */
static int input_get(PyObject *obj, kp_layout layout, kp_input *in)
{
    memset(in, 0, sizeof(*in));
    in->layout = layout;
    keyer_frame *f = &in->frame;
    f->memory = KEYER_MEMORY_HOST;
    f->pts = INT64_MIN;
    int h, w, c;
    ptrdiff_t stride;
    if (layout == KP_NV12) {
        if (PyTuple_Check(obj) || PyList_Check(obj)) {
            if (PySequence_Size(obj) != 2) {
                raise_invalid("frame: NV12 planes are a (y, uv) pair");
                return -1;
            }
            PyObject *y = PySequence_GetItem(obj, 0), *uv = PySequence_GetItem(obj, 1);
            int rc = -1, ch, cw, cc;
            ptrdiff_t cs;
            if (y && uv && !get_plane(y, 0, "frame (y plane)", &in->views[0], &h, &w, &c, &stride)) {
                in->nviews = 1;
                if (c != 1 || in->views[0].ndim != 2)
                    raise_invalid("frame (y plane): expected (height, width)");
                else if (!get_plane(uv, 0, "frame (uv plane)", &in->views[1], &ch, &cw, &cc, &cs)) {
                    in->nviews = 2;
                    /* (h/2, w/2, 2) or (h/2, w) with interleaved samples */
                    int cols = cc == 2 ? cw : cw / 2;
                    if (ch != (h + 1) / 2 || cols != (w + 1) / 2 || (cc != 2 && cc != 1) ||
                        (cc == 1 && cw % 2))
                        raise_invalid("frame (uv plane): expected (%d, %d, 2) or (%d, %d) for a "
                                      "%dx%d y plane", (h + 1) / 2, (w + 1) / 2, (h + 1) / 2,
                                      2 * ((w + 1) / 2), w, h);
                    else {
                        f->data[0] = in->views[0].buf;
                        f->stride[0] = stride;
                        f->data[1] = in->views[1].buf;
                        f->stride[1] = cs;
                        rc = 0;
                    }
                }
            }
            Py_XDECREF(y);
            Py_XDECREF(uv);
            if (rc) {
                input_release(in);
                return -1;
            }
        } else {
            int hh;
            if (get_plane(obj, 0, "frame", &in->views[0], &hh, &w, &c, &stride))
                return -1;
            in->nviews = 1;
            if (in->views[0].ndim != 2 || hh % 3 || w % 2) {
                raise_invalid("frame: NV12 in one array is (height * 3 / 2, width) with even "
                              "sizes, got %s", in->views[0].ndim != 2 ? "3 dimensions" : "odd sizes");
                input_release(in);
                return -1;
            }
            h = hh / 3 * 2;
            in->stacked = 1;
            f->data[0] = in->views[0].buf;
            f->stride[0] = stride;
            f->data[1] = (uint8_t *)in->views[0].buf + (ptrdiff_t)h * stride;
            f->stride[1] = stride;
        }
        f->format = KEYER_PIXEL_FORMAT_NV12;
        f->width = w;
        f->height = h;
        return 0;
    }
    if (get_plane(obj, 0, "frame", &in->views[0], &h, &w, &c, &stride))
        return -1;
    in->nviews = 1;
    int want = layout == KP_RGB || layout == KP_BGR ? 3 : 4;
    if (in->views[0].ndim != 3 || c != want) {
        raise_invalid("frame: format %s takes (height, width, %d) arrays, got %s%d channel%s",
                      layout_names[layout], want, in->views[0].ndim != 3 ? "2 dimensions, " : "",
                      in->views[0].ndim != 3 ? 1 : c, c == 1 ? "" : "s");
        input_release(in);
        return -1;
    }
    f->format = want == 3 ? KEYER_PIXEL_FORMAT_RGB24 : KEYER_PIXEL_FORMAT_RGBA;
    f->width = w;
    f->height = h;
    f->data[0] = in->views[0].buf;
    f->stride[0] = stride;
    return 0;
}

/* ---- keyer.Keyer -------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    keyer_keying *keying;
    keyer_composite_mode mode;
    kp_layout layout;    /* default input layout */
    int busy;            /* a call runs without the GIL */
    keyer_frame *rgb_in; /* BGR(A) input swapped to RGB(A) */
    keyer_frame *rgb_out; /* output before swapping back to BGR(A) */
    keyer_frame *alpha;  /* the matte when the caller does not want it */
    PyObject *weakrefs;
} KeyerObject;

/* Makes @p f a host frame of the format and size (reallocated only when they change). */
static keyer_status scratch(keyer_frame **f, keyer_pixel_format fmt, int w, int h,
                            keyer_error *err)
{
    keyer_status st;
    if (!*f && (st = keyer_frame_create(f, err)))
        return st;
    if ((*f)->format == fmt && (*f)->width == w && (*f)->height == h)
        return KEYER_OK;
    return keyer_frame_alloc(*f, fmt, w, h, NULL, err);
}

static void keyer_free_all(KeyerObject *k)
{
    keyer_keying_destroy(&k->keying);
    keyer_frame_destroy(&k->rgb_in);
    keyer_frame_destroy(&k->rgb_out);
    keyer_frame_destroy(&k->alpha);
}

static void Keyer_dealloc(KeyerObject *k)
{
    if (k->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)k);
    keyer_free_all(k);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

/* Copies the caller's background picture into a keyer frame and sets it. 0, or -1 raised. */
static int set_background(KeyerObject *k, PyObject *bg, PyObject *fmt_obj)
{
    keyer_error e = {0};
    keyer_status st;
    keyer_frame *f = NULL;
    if (PyUnicode_Check(bg) || PyBytes_Check(bg) || PyObject_HasAttrString(bg, "__fspath__")) {
        PyObject *path = NULL;
        if (!PyUnicode_FSConverter(bg, &path))
            return -1;
        const char *p = PyBytes_AS_STRING(path);
        Py_BEGIN_ALLOW_THREADS
        st = keyer_frame_create(&f, &e);
        if (!st)
            st = keyer_image_read(p, KEYER_PIXEL_FORMAT_RGB24, f, &e);
        if (!st)
            st = keyer_keying_set_background(k->keying, f, &e);
        Py_END_ALLOW_THREADS
        if (st)
            keyer_error_prefix(&e, "background %s: ", p);
        Py_DECREF(path);
    } else {
        kp_layout layout = k->layout;
        if (fmt_obj && fmt_obj != Py_None &&
            layout_from_name(PyUnicode_AsUTF8(fmt_obj) ? PyUnicode_AsUTF8(fmt_obj) : "?", &layout))
            return -1;
        kp_input in;
        if (input_get(bg, layout, &in))
            return -1;
        const keyer_frame *src = &in.frame;
        Py_BEGIN_ALLOW_THREADS
        st = keyer_frame_create(&f, &e);
        if (!st)
            st = keyer_frame_alloc(f, src->format, src->width, src->height, NULL, &e);
        if (!st) {
            if (layout == KP_BGR || layout == KP_BGRA)
                swap_rb(f->data[0], f->stride[0], src->data[0], src->stride[0], src->width,
                        src->height, layout == KP_BGR ? 3 : 4);
            else
                st = keyer_frame_copy(f, src, &e);
        }
        if (!st)
            st = keyer_keying_set_background(k->keying, f, &e);
        Py_END_ALLOW_THREADS
        input_release(&in);
        if (st)
            keyer_error_prefix(&e, "background: ");
    }
    keyer_frame_destroy(&f); /* the keying chain holds its own reference */
    if (st) {
        raise_keyer(st, &e);
        return -1;
    }
    return 0;
}

static int Keyer_init(KeyerObject *k, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model", "backend", "precision", "threads", "options", "format",
                             "background", NULL};
    const char *model = NULL, *backend = "cpu", *precision = "f32", *format = "rgb";
    int threads = 0;
    PyObject *options = NULL, *background = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zssiOsO:Keyer", kwlist, &model, &backend,
                                     &precision, &threads, &options, &format, &background))
        return -1;
    if (k->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Keyer: in use by another thread");
        return -1;
    }
    keyer_free_all(k);
    keyer_error e = {0};
    keyer_status st;
    keyer_keying_params p = keyer_keying_params_defaults();
    p.model = model;
    p.threads = threads;
    if (threads < 0 || threads > 256)
        return raise_invalid("threads: %d is outside 0..256", threads), -1;
    if (layout_from_name(format, &k->layout))
        return -1;
    if ((st = keyer_backend_from_name(backend, &p.backend, &e)) ||
        (st = keyer_precision_from_name(precision, &p.precision, &e)))
        return raise_keyer(st, &e), -1;
    const keyer_option *tables[2] = {keyer_refine_options(), keyer_composite_options()};
    void *objs[2] = {&p.refine, &p.composite};
    if (apply_options(options, tables, objs, 2, "refine or composite"))
        return -1;
    k->mode = p.composite.mode;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_keying_create(&p, &k->keying, &e);
    Py_END_ALLOW_THREADS
    if (st)
        return raise_keyer(st, &e), -1;
    if (background != Py_None && set_background(k, background, NULL))
        return -1;
    if (k->mode == KEYER_COMPOSITE_IMAGE && background == Py_None) {
        raise_invalid("effect image needs a background (a picture path or an array)");
        return -1;
    }
    return 0;
}

static int keyer_usable(KeyerObject *k)
{
    if (!k->keying) {
        raise_invalid("Keyer: closed");
        return 0;
    }
    if (k->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Keyer: in use by another thread (use one Keyer "
                                            "per thread)");
        return 0;
    }
    return 1;
}

/* The output's array shape for the frame and mode: (h, w, c), c 0 for two dimensions; NV12
 * outputs are planes (see out_views). */
typedef struct kp_output {
    Py_buffer views[2];
    int nviews;
    keyer_frame frame; /* a view of the caller's (or a new) array */
    PyObject *result;  /* what is returned */
    int swap;          /* channels 0 and 2 are swapped into it from k->rgb_out */
} kp_output;

static void output_release(kp_output *o)
{
    for (int i = 0; i < o->nviews; i++)
        PyBuffer_Release(&o->views[i]);
    o->nviews = 0;
}

/* Checks or makes the output for frame @p in in the Keyer's mode. 0, or -1 raised. */
static int output_get(KeyerObject *k, const kp_input *in, PyObject *out, kp_output *o)
{
    memset(o, 0, sizeof(*o));
    int w = in->frame.width, h = in->frame.height;
    keyer_frame *f = &o->frame;
    f->memory = KEYER_MEMORY_HOST;
    f->width = w;
    f->height = h;
    f->pts = INT64_MIN;
    int c; /* channels of a packed output; 0: gray; -1: NV12 */
    keyer_composite_mode m = k->mode;
    if (m == KEYER_COMPOSITE_MASK)
        c = 0;
    else if (m == KEYER_COMPOSITE_ALPHA || m == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        c = 4;
    else if (in->layout == KP_NV12)
        c = -1;
    else
        c = in->layout == KP_RGB || in->layout == KP_BGR ? 3 : 4;
    o->swap = c > 0 && (in->layout == KP_BGR || in->layout == KP_BGRA);
    f->format = c == 0 ? KEYER_PIXEL_FORMAT_GRAY8
                : c == 3 ? KEYER_PIXEL_FORMAT_RGB24
                : c == 4 ? KEYER_PIXEL_FORMAT_RGBA
                         : KEYER_PIXEL_FORMAT_NV12;
    if (c >= 0) {
        if (out == Py_None) {
            o->result = new_array(h, w, c);
            if (!o->result)
                return -1;
        } else {
            o->result = Py_NewRef(out);
        }
        int oh, ow, oc;
        ptrdiff_t os;
        if (get_plane(o->result, 1, "out", &o->views[0], &oh, &ow, &oc, &os))
            goto fail;
        o->nviews = 1;
        if (oh != h || ow != w || (c ? oc != c || o->views[0].ndim != 3 : o->views[0].ndim != 2)) {
            raise_invalid(c ? "out: expected shape (%d, %d, %d)" : "out: expected shape (%d, %d)",
                          h, w, c);
            goto fail;
        }
        f->data[0] = o->views[0].buf;
        f->stride[0] = os;
        return 0;
    }
    /* NV12: the input's arrangement (one array, or a (y, uv) pair of (h, w), (h/2, w/2, 2)) */
    int ch = (h + 1) / 2, cw = (w + 1) / 2;
    if (out == Py_None) {
        if (in->stacked)
            o->result = new_array(h + ch, w, 0);
        else {
            PyObject *y = new_array(h, w, 0), *uv = y ? new_array(ch, cw, 2) : NULL;
            o->result = uv ? PyTuple_Pack(2, y, uv) : NULL;
            Py_XDECREF(y);
            Py_XDECREF(uv);
        }
        if (!o->result)
            return -1;
    } else {
        o->result = Py_NewRef(out);
    }
    kp_input tmp;
    /* the same checks as an input, plus writability */
    if (input_get(o->result, KP_NV12, &tmp))
        goto fail;
    if (tmp.frame.width != w || tmp.frame.height != h) {
        input_release(&tmp);
        raise_invalid("out: NV12 planes of %dx%d expected", w, h);
        goto fail;
    }
    for (int i = 0; i < tmp.nviews; i++) {
        if (tmp.views[i].readonly) {
            input_release(&tmp);
            raise_invalid("out: read-only array");
            goto fail;
        }
        o->views[i] = tmp.views[i];
    }
    o->nviews = tmp.nviews;
    for (int i = 0; i < 2; i++) {
        f->data[i] = tmp.frame.data[i];
        f->stride[i] = tmp.frame.stride[i];
    }
    return 0;
fail:
    output_release(o);
    Py_CLEAR(o->result);
    return -1;
}

/* The matte target: the caller's (h, w) array, a new one (@p want True), or the scratch. */
static int matte_get(KeyerObject *k, const kp_input *in, PyObject *matte, Py_buffer *view,
                     int *has_view, PyObject **result, keyer_frame *alpha, keyer_error *e)
{
    int w = in->frame.width, h = in->frame.height;
    *has_view = 0;
    *result = NULL;
    memset(alpha, 0, sizeof(*alpha));
    if (matte == Py_None || matte == Py_False) {
        keyer_status st = scratch(&k->alpha, KEYER_PIXEL_FORMAT_GRAY8, w, h, e);
        if (st)
            return raise_keyer(st, e), -1;
        *alpha = *k->alpha;
        memset(alpha->buf, 0, sizeof(alpha->buf)); /* a view: the scratch keeps the buffer */
        return 0;
    }
    *result = matte == Py_True ? new_array(h, w, 0) : Py_NewRef(matte);
    if (!*result)
        return -1;
    int mh, mw, mc;
    ptrdiff_t ms;
    if (get_plane(*result, 1, "matte", view, &mh, &mw, &mc, &ms)) {
        Py_CLEAR(*result);
        return -1;
    }
    *has_view = 1;
    if (mh != h || mw != w || view->ndim != 2) {
        PyBuffer_Release(view);
        *has_view = 0;
        Py_CLEAR(*result);
        raise_invalid("matte: expected shape (%d, %d)", h, w);
        return -1;
    }
    alpha->format = KEYER_PIXEL_FORMAT_GRAY8;
    alpha->width = w;
    alpha->height = h;
    alpha->memory = KEYER_MEMORY_HOST;
    alpha->data[0] = view->buf;
    alpha->stride[0] = ms;
    alpha->pts = INT64_MIN;
    return 0;
}

/* The work of process() and matte() without the GIL. */
static keyer_status keyer_work(KeyerObject *k, kp_input *in, keyer_frame *alpha, kp_output *o,
                               keyer_error *e)
{
    const keyer_frame *src = &in->frame;
    keyer_status st;
    if (in->layout == KP_BGR || in->layout == KP_BGRA) {
        if ((st = scratch(&k->rgb_in, src->format, src->width, src->height, e)))
            return st;
        swap_rb(k->rgb_in->data[0], k->rgb_in->stride[0], src->data[0], src->stride[0],
                src->width, src->height, in->layout == KP_BGR ? 3 : 4);
        src = k->rgb_in;
    }
    if (!o)
        return keyer_keying_process(k->keying, src, NULL, alpha, e);
    if (!o->swap)
        return keyer_keying_process(k->keying, src, &o->frame, alpha, e);
    if ((st = scratch(&k->rgb_out, o->frame.format, src->width, src->height, e)) ||
        (st = keyer_keying_process(k->keying, src, k->rgb_out, alpha, e)))
        return st;
    swap_rb(o->frame.data[0], o->frame.stride[0], k->rgb_out->data[0], k->rgb_out->stride[0],
            src->width, src->height, o->frame.format == KEYER_PIXEL_FORMAT_RGB24 ? 3 : 4);
    return KEYER_OK;
}

/* process() (@p composite 1) and matte() (0). */
static PyObject *keyer_call(KeyerObject *k, PyObject *args, PyObject *kw, int composite)
{
    static char *kwlist_p[] = {"frame", "out", "matte", "format", NULL};
    static char *kwlist_m[] = {"frame", "out", "format", NULL};
    PyObject *frame, *out = Py_None, *matte = Py_None;
    const char *format = NULL;
    if (composite ? !PyArg_ParseTupleAndKeywords(args, kw, "O|O$Oz:process", kwlist_p, &frame,
                                                 &out, &matte, &format)
                  : !PyArg_ParseTupleAndKeywords(args, kw, "O|O$z:matte", kwlist_m, &frame,
                                                 &matte, &format))
        return NULL;
    if (!composite && matte == Py_None)
        matte = Py_True;
    if (!keyer_usable(k))
        return NULL;
    kp_layout layout = k->layout;
    if (format && layout_from_name(format, &layout))
        return NULL;
    kp_input in;
    if (input_get(frame, layout, &in))
        return NULL;
    keyer_error e = {0};
    kp_output o;
    keyer_frame alpha;
    Py_buffer mview;
    int has_mview = 0;
    PyObject *mresult = NULL, *ret = NULL;
    if (composite && output_get(k, &in, out, &o)) {
        input_release(&in);
        return NULL;
    }
    if (matte_get(k, &in, matte, &mview, &has_mview, &mresult, &alpha, &e))
        goto done;
    keyer_status st;
    k->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_work(k, &in, &alpha, composite ? &o : NULL, &e);
    Py_END_ALLOW_THREADS
    k->busy = 0;
    if (st) {
        raise_keyer(st, &e);
        goto done;
    }
    if (!composite)
        ret = Py_NewRef(mresult);
    else if (mresult)
        ret = PyTuple_Pack(2, o.result, mresult);
    else
        ret = Py_NewRef(o.result);
done:
    if (has_mview)
        PyBuffer_Release(&mview);
    Py_XDECREF(mresult);
    if (composite) {
        output_release(&o);
        Py_XDECREF(o.result);
    }
    input_release(&in);
    return ret;
}

static PyObject *Keyer_process(KeyerObject *k, PyObject *args, PyObject *kw)
{
    return keyer_call(k, args, kw, 1);
}

static PyObject *Keyer_matte(KeyerObject *k, PyObject *args, PyObject *kw)
{
    return keyer_call(k, args, kw, 0);
}

static PyObject *Keyer_set_background(KeyerObject *k, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"background", "format", NULL};
    PyObject *bg, *fmt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$O:set_background", kwlist, &bg, &fmt) ||
        !keyer_usable(k) || set_background(k, bg, fmt))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Keyer_reset(KeyerObject *k, PyObject *unused)
{
    (void)unused;
    if (!keyer_usable(k))
        return NULL;
    keyer_keying_reset(k->keying);
    Py_RETURN_NONE;
}

static PyObject *Keyer_close(KeyerObject *k, PyObject *unused)
{
    (void)unused;
    if (k->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Keyer: in use by another thread");
        return NULL;
    }
    keyer_free_all(k);
    Py_RETURN_NONE;
}

static PyObject *Keyer_enter(KeyerObject *k, PyObject *unused)
{
    (void)unused;
    if (!keyer_usable(k))
        return NULL;
    return Py_NewRef(k);
}

static PyObject *Keyer_exit(KeyerObject *k, PyObject *args)
{
    (void)args;
    PyObject *r = Keyer_close(k, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *Keyer_get_closed(KeyerObject *k, void *closure)
{
    (void)closure;
    return PyBool_FromLong(k->keying == NULL);
}

static PyObject *Keyer_get_model(KeyerObject *k, void *closure)
{
    (void)closure;
    const keyer_model_entry *e = keyer_keying_model_entry(k->keying);
    if (!e)
        Py_RETURN_NONE;
    return PyUnicode_FromString(e->name);
}

static PyMethodDef Keyer_methods[] = {
    {"process", (PyCFunction)(void (*)(void))Keyer_process, METH_VARARGS | METH_KEYWORDS,
     "process(frame, out=None, *, matte=None, format=None)\n--\n\n"
     "Keys one frame: returns the composited frame, or (frame, matte) when matte is True or an "
     "array to fill."},
    {"matte", (PyCFunction)(void (*)(void))Keyer_matte, METH_VARARGS | METH_KEYWORDS,
     "matte(frame, out=None, *, format=None)\n--\n\nThe refined matte alone (uint8, h x w)."},
    {"set_background", (PyCFunction)(void (*)(void))Keyer_set_background,
     METH_VARARGS | METH_KEYWORDS,
     "set_background(background, *, format=None)\n--\n\nThe picture of effect 'image'."},
    {"reset", (PyCFunction)Keyer_reset, METH_NOARGS,
     "reset()\n--\n\nForgets the temporal history (a new clip, a seek)."},
    {"close", (PyCFunction)Keyer_close, METH_NOARGS,
     "close()\n--\n\nFrees the C objects now; the Keyer cannot be used afterwards."},
    {"__enter__", (PyCFunction)Keyer_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Keyer_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Keyer_getset[] = {
    {"closed", (getter)Keyer_get_closed, NULL, "True after close()", NULL},
    {"model", (getter)Keyer_get_model, NULL, "the registry name of the model (None for a file)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KeyerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keyer._keyer.Keyer",
    .tp_basicsize = sizeof(KeyerObject),
    .tp_dealloc = (destructor)Keyer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The per-frame keying chain (see keyer.Keyer).",
    .tp_weaklistoffset = offsetof(KeyerObject, weakrefs),
    .tp_methods = Keyer_methods,
    .tp_getset = Keyer_getset,
    .tp_init = (initproc)Keyer_init,
    .tp_new = PyType_GenericNew,
};

/* ---- keyer.run ---------------------------------------------------------------------------- */

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
        return raise_invalid("run: %s", n < 1 ? "no input given"
                                              : "one output (or None) per input needed");
    keyer_session_params sp = keyer_session_params_defaults();
    const keyer_option *st_tables[1] = {keyer_session_options()};
    void *st_objs[1] = {&sp};
    const keyer_option *rt_tables[1] = {keyer_refine_options()};
    void *rt_objs[1] = {&sp.refine};
    const keyer_option *ct_tables[1] = {keyer_composite_options()};
    void *ct_objs[1] = {&sp.composite};
    if (apply_options(sopts, st_tables, st_objs, 1, "session") ||
        apply_options(ropts, rt_tables, rt_objs, 1, "refine") ||
        apply_options(copts, ct_tables, ct_objs, 1, "composite"))
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
        return raise_invalid("run: more than 64 inputs");
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
        raise_keyer(st, &e);
    else
        ret = report_dict(s);
    Py_BEGIN_ALLOW_THREADS
    keyer_session_destroy(&s);
    Py_END_ALLOW_THREADS
    return ret;
}


/* ---- images ------------------------------------------------------------------------------- */

/* read_image(path, format="rgb") -> (h, w, 3|4) or (h, w) uint8 array */
static PyObject *py_read_image(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"path", "format", NULL};
    PyObject *path = NULL;
    const char *format = "rgb";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|s:read_image", kwlist, PyUnicode_FSConverter,
                                     &path, &format))
        return NULL;
    int c = !strcmp(format, "rgb") || !strcmp(format, "bgr") ? 3
            : !strcmp(format, "rgba") || !strcmp(format, "bgra") ? 4
            : !strcmp(format, "gray") ? 1 : 0;
    if (!c) {
        Py_DECREF(path);
        return raise_invalid("read_image: format '%s': expected rgb, bgr, rgba, bgra or gray",
                             format);
    }
    keyer_pixel_format pf = c == 3 ? KEYER_PIXEL_FORMAT_RGB24
                            : c == 4 ? KEYER_PIXEL_FORMAT_RGBA : KEYER_PIXEL_FORMAT_GRAY8;
    const char *p = PyBytes_AS_STRING(path);
    keyer_error e = {0};
    keyer_frame *f = NULL;
    keyer_status st;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_frame_create(&f, &e);
    if (!st)
        st = keyer_image_read(p, pf, f, &e);
    Py_END_ALLOW_THREADS
    PyObject *arr = NULL;
    Py_buffer v;
    int h, w, cc;
    ptrdiff_t stride;
    if (st) {
        raise_keyer(st, &e);
    } else if ((arr = new_array(f->height, f->width, c == 1 ? 0 : c)) &&
               !get_plane(arr, 1, "image", &v, &h, &w, &cc, &stride)) {
        int swap = format[0] == 'b';
        if (swap)
            swap_rb(v.buf, stride, f->data[0], f->stride[0], w, h, c);
        else
            for (int y = 0; y < h; y++)
                memcpy((uint8_t *)v.buf + y * stride, f->data[0] + y * f->stride[0],
                       (size_t)w * (size_t)c);
        PyBuffer_Release(&v);
    } else {
        Py_CLEAR(arr);
    }
    keyer_frame_destroy(&f);
    Py_DECREF(path);
    return arr;
}

/* write_image(path, array, format="rgb"): PNG of an (h, w, 3|4) or (h, w) uint8 array */
static PyObject *py_write_image(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"path", "image", "format", NULL};
    PyObject *path = NULL, *img;
    const char *format = "rgb";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|s:write_image", kwlist,
                                     PyUnicode_FSConverter, &path, &img, &format))
        return NULL;
    Py_buffer v;
    int h, w, c;
    ptrdiff_t stride;
    if (get_plane(img, 0, "image", &v, &h, &w, &c, &stride)) {
        Py_DECREF(path);
        return NULL;
    }
    int swap = format[0] == 'b';
    keyer_frame *f = NULL;
    keyer_error e = {0};
    keyer_status st;
    keyer_pixel_format pf = c == 3 ? KEYER_PIXEL_FORMAT_RGB24
                            : c == 4 ? KEYER_PIXEL_FORMAT_RGBA
                            : c == 1 ? KEYER_PIXEL_FORMAT_GRAY8 : KEYER_PIXEL_FORMAT_NONE;
    if (pf == KEYER_PIXEL_FORMAT_NONE) {
        PyBuffer_Release(&v);
        Py_DECREF(path);
        return raise_invalid("write_image: 1, 3 or 4 channels, not %d", c);
    }
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    st = keyer_frame_create(&f, &e);
    if (!st)
        st = keyer_frame_alloc(f, pf, w, h, NULL, &e);
    if (!st) {
        if (swap && c > 1)
            swap_rb(f->data[0], f->stride[0], v.buf, stride, w, h, c);
        else
            for (int y = 0; y < h; y++)
                memcpy(f->data[0] + y * f->stride[0], (const uint8_t *)v.buf + y * stride,
                       (size_t)w * (size_t)c);
        st = keyer_image_write(p, f, &e);
    }
    Py_END_ALLOW_THREADS
    keyer_frame_destroy(&f);
    PyBuffer_Release(&v);
    Py_DECREF(path);
    if (st)
        return raise_keyer(st, &e);
    Py_RETURN_NONE;
}

/* ---- models, version ---------------------------------------------------------------------- */

static PyObject *py_models(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    static const char *tasks[] = {"segmentation", "face_detection", "pose_landmarks",
                                  "face_landmarks"};
    int count = 0;
    const keyer_model_entry *list = keyer_registry_list(&count);
    const char *dir = keyer_registry_models_dir();
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < count; i++) {
        const keyer_model_entry *m = &list[i];
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, m->file);
        FILE *f = fopen(path, "rb");
        int present = f != NULL;
        if (f)
            fclose(f);
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:s,s:s,s:s,s:(ii),s:f,s:f,s:O,s:O,s:s,s:O}", "name", m->name, "file",
            m->file, "path", path, "package", m->package, "task",
            (unsigned)m->task < 4 ? tasks[m->task] : "?", "input_size", m->input_width,
            m->input_height, "input_scale", (double)m->input_scale, "input_offset",
            (double)m->input_offset, "letterbox", m->letterbox ? Py_True : Py_False, "has_mask",
            (m->mask_output >= 0 || m->task == KEYER_TASK_SEGMENTATION) ? Py_True : Py_False,
            "description", m->description ? m->description : "", "present",
            present ? Py_True : Py_False);
        if (!d || PyList_Append(out, d))
            Py_CLEAR(out);
        Py_XDECREF(d);
    }
    return out;
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(keyer_version());
}

static PyObject *py_built_with_cuda(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(keyer_built_with_cuda());
}

static PyMethodDef module_methods[] = {
    {"options", py_options, METH_VARARGS,
     "options(table) -> [(name, type, default, min, max, choices, help)]"},
    {"run", py_run, METH_VARARGS, "The main job (see keyer.run)."},
    {"models", py_models, METH_NOARGS, "The shipped models (see keyer.models)."},
    {"version", py_version, METH_NOARGS, "keyer's version string."},
    {"built_with_cuda", py_built_with_cuda, METH_NOARGS,
     "Whether keyer was built with its CUDA backends."},
    {"read_image", (PyCFunction)(void (*)(void))py_read_image, METH_VARARGS | METH_KEYWORDS,
     "read_image(path, format='rgb')\n--\n\nDecodes a still image (JPEG, PNG, ...) into a "
     "uint8 array."},
    {"write_image", (PyCFunction)(void (*)(void))py_write_image, METH_VARARGS | METH_KEYWORDS,
     "write_image(path, image, format='rgb')\n--\n\nWrites a uint8 array as a PNG."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "keyer._keyer", "C extension of the keyer package.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

/* keyer.Error and one subclass per status, each also deriving from the matching builtin. */
static int add_errors(PyObject *m)
{
    static const struct {
        keyer_status st;
        const char *name;
        const char *doc;
    } defs[] = {
        {KEYER_STATUS_INVALID_ARGUMENT, "InvalidArgumentError", "a parameter is out of range"},
        {KEYER_STATUS_OUT_OF_MEMORY, "OutOfMemoryError", "host or device allocation failed"},
        {KEYER_STATUS_IO, "InputOutputError", "a file or stream could not be read or written"},
        {KEYER_STATUS_BAD_DATA, "BadDataError", "input data (model, video) is malformed"},
        {KEYER_STATUS_UNSUPPORTED, "UnsupportedError", "valid but not supported"},
        {KEYER_STATUS_DEVICE, "DeviceError", "a GPU or driver call failed"},
        {KEYER_STATUS_AGAIN, "AgainError", "send/receive: switch direction"},
        {KEYER_STATUS_END, "EndError", "end of stream"},
        {KEYER_STATUS_INTERRUPTED, "CancelledError", "stopped on request"},
        {KEYER_STATUS_INTERNAL, "InternalError", "a broken invariant inside keyer (a bug)"},
    };
    Error = PyErr_NewExceptionWithDoc("keyer.Error",
                                      "A failed keyer call: .status is keyer's status name, "
                                      ".message its message.", NULL, NULL);
    if (!Error || PyModule_AddObjectRef(m, "Error", Error))
        return -1;
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        PyObject *extra = defs[i].st == KEYER_STATUS_INVALID_ARGUMENT ? PyExc_ValueError
                          : defs[i].st == KEYER_STATUS_OUT_OF_MEMORY  ? PyExc_MemoryError
                          : defs[i].st == KEYER_STATUS_IO             ? PyExc_OSError
                                                                      : NULL;
        PyObject *bases = extra ? PyTuple_Pack(2, Error, extra) : PyTuple_Pack(1, Error);
        char full[64];
        snprintf(full, sizeof(full), "keyer.%s", defs[i].name);
        PyObject *t = bases ? PyErr_NewExceptionWithDoc(full, defs[i].doc, bases, NULL) : NULL;
        Py_XDECREF(bases);
        if (!t || PyModule_AddObjectRef(m, defs[i].name, t)) {
            Py_XDECREF(t);
            return -1;
        }
        StatusErrors[defs[i].st] = t;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__keyer(void)
{
    if (PyType_Ready(&KeyerType))
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (add_errors(m) || PyModule_AddObjectRef(m, "Keyer", (PyObject *)&KeyerType)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
