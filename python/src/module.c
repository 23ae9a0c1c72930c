/*
 * keyer._keyer: the C extension of the Python package, written against keyer's public headers
 * (include/keyer/) and CPython's C API. This file: the module, its errors (keyer.Error and a
 * subclass per status), the option tables, images, models and version; the rest is listed in
 * kp.h. Arrays cross the boundary through the buffer protocol (NumPy arrays, memoryviews,
 * anything exporting uint8 strided buffers) and GPU array protocols, so no NumPy headers are
 * needed to build it; new arrays are made by calling numpy.empty. The GIL is released around
 * every call into keyer that does work.
 *
 * The Python layer (keyer/__init__.py) subclasses the types and turns keyword options into
 * the option tables' "name=value" text.
 */
#include "kp.h"

#include <stdio.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------- */

static PyObject *Error;                    /* keyer.Error */
static PyObject *StatusErrors[KEYER_STATUS_COUNT_]; /* per status; NULL: Error itself */

/* Raises the exception of @p err's status with keyer's message; returns NULL. */
PyObject *kp_raise(keyer_status st, const keyer_error *err)
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
PyObject *kp_raise_invalid(const char *fmt, ...)
{
    keyer_error e = {0};
    char buf[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    keyer_error_set(&e, KEYER_STATUS_INVALID_ARGUMENT, "%s", buf);
    return kp_raise(KEYER_STATUS_INVALID_ARGUMENT, &e);
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
        return kp_raise_invalid("unknown option table '%s' (refine, composite, session, prepare)",
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
int kp_apply_options(PyObject *dict, const keyer_option *const *tables, void *const *objs,
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
            kp_raise_invalid("unknown option '%s' (not a %s option)", name, what);
            return -1;
        }
        keyer_error e = {0};
        keyer_status st = keyer_option_set(tables[t], objs[t], name, text, &e);
        if (st) {
            kp_raise(st, &e);
            return -1;
        }
    }
    return 0;
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
        return kp_raise_invalid("read_image: format '%s': expected rgb, bgr, rgba, bgra or gray",
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
    kp_plane v;
    if (st) {
        kp_raise(st, &e);
    } else if ((arr = kp_new_array(f->height, f->width, c == 1 ? 0 : c)) &&
               !kp_plane_get(arr, 1, "image", NULL, &v)) {
        int swap = format[0] == 'b';
        if (swap)
            kp_swap_rb(v.data, v.stride, f->data[0], f->stride[0], v.w, v.h, c);
        else
            for (int y = 0; y < v.h; y++)
                memcpy(v.data + y * v.stride, f->data[0] + y * f->stride[0],
                       (size_t)v.w * (size_t)c);
        kp_plane_release(&v);
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
    kp_plane v;
    if (kp_plane_get(img, 0, "image", NULL, &v)) {
        Py_DECREF(path);
        return NULL;
    }
    int h = v.h, w = v.w, c = v.c;
    ptrdiff_t stride = v.stride;
    int swap = format[0] == 'b';
    keyer_frame *f = NULL;
    keyer_error e = {0};
    keyer_status st;
    keyer_pixel_format pf = c == 3 ? KEYER_PIXEL_FORMAT_RGB24
                            : c == 4 ? KEYER_PIXEL_FORMAT_RGBA
                            : c == 1 ? KEYER_PIXEL_FORMAT_GRAY8 : KEYER_PIXEL_FORMAT_NONE;
    if (pf == KEYER_PIXEL_FORMAT_NONE) {
        kp_plane_release(&v);
        Py_DECREF(path);
        return kp_raise_invalid("write_image: 1, 3 or 4 channels, not %d", c);
    }
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    st = keyer_frame_create(&f, &e);
    if (!st)
        st = keyer_frame_alloc(f, pf, w, h, NULL, &e);
    if (!st) {
        if (swap && c > 1)
            kp_swap_rb(f->data[0], f->stride[0], v.data, stride, w, h, c);
        else
            for (int y = 0; y < h; y++)
                memcpy(f->data[0] + y * f->stride[0], v.data + y * stride,
                       (size_t)w * (size_t)c);
        st = keyer_image_write(p, f, &e);
    }
    Py_END_ALLOW_THREADS
    keyer_frame_destroy(&f);
    kp_plane_release(&v);
    Py_DECREF(path);
    if (st)
        return kp_raise(st, &e);
    Py_RETURN_NONE;
}

/* ---- models, version ---------------------------------------------------------------------- */

static PyObject *py_models(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    static const char *tasks[] = {"segmentation", "face_detection", "pose_landmarks",
                                  "face_landmarks", "pose_detection"};
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
            (unsigned)m->task < 5 ? tasks[m->task] : "?", "input_size", m->input_width,
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

/* connections(which) -> ((a, b), ...): "pose" (skeleton) or "face_mesh" (contours) */
static PyObject *py_connections(PyObject *self, PyObject *args)
{
    (void)self;
    const char *which;
    if (!PyArg_ParseTuple(args, "s:connections", &which))
        return NULL;
    int n = 0;
    const int *pairs = !strcmp(which, "pose")        ? keyer_pose_connections(&n)
                       : !strcmp(which, "face_mesh") ? keyer_face_mesh_contours(&n)
                                                     : NULL;
    if (!pairs)
        return kp_raise_invalid("connections: '%s' (pose, face_mesh)", which);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *pair = Py_BuildValue("(ii)", pairs[2 * i], pairs[2 * i + 1]);
        if (!pair)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, pair);
    }
    return t;
}

/* Appends (key, value, line) to the list @p opaque. */
static keyer_status config_item(void *opaque, const char *key, const char *value, int line,
                                keyer_error *err)
{
    PyObject *t = Py_BuildValue("(ssi)", key, value, line);
    int rc = !t || PyList_Append(opaque, t);
    Py_XDECREF(t);
    if (rc) {
        PyErr_Clear();
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "configuration: out of memory");
    }
    return KEYER_OK;
}

/* read_config(path) -> [(key, value, line), ...]: a YAML configuration file's settings */
static PyObject *py_read_config(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *path = NULL;
    if (!PyArg_ParseTuple(args, "O&:read_config", PyUnicode_FSConverter, &path))
        return NULL;
    PyObject *list = PyList_New(0);
    keyer_error e = {0};
    keyer_status st = list ? keyer_config_read(PyBytes_AS_STRING(path), config_item, list, &e)
                           : KEYER_OK;
    Py_DECREF(path);
    if (st) {
        Py_CLEAR(list);
        kp_raise(st, &e);
    }
    return list;
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
    {"models", py_models, METH_NOARGS, "The shipped models (see keyer.models)."},
    {"version", py_version, METH_NOARGS, "keyer's version string."},
    {"read_config", py_read_config, METH_VARARGS,
     "read_config(path) -> [(key, value, line)]: the settings of a YAML configuration file"},
    {"connections", py_connections, METH_VARARGS,
     "connections(which) -> landmark index pairs: 'pose' (skeleton) or 'face_mesh' (contours)"},
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
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (add_errors(m) || kp_add_keyer(m) || kp_add_detect(m) || kp_add_overlay(m) ||
        kp_add_run(m) || kp_add_session(m) ||
        kp_add_cuda(m)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
