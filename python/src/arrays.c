/* Arrays in and out of keyer._keyer: planes, pixel layouts, caller frames (see kp.h). */
#include "kp.h"

#include <stdio.h>
#include <string.h>

static PyObject *numpy_empty; /* numpy.empty, imported on first use */
static PyObject *numpy_frombuffer;

static int numpy_ready(void)
{
    if (numpy_empty)
        return 0;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np)
        return -1;
    numpy_empty = PyObject_GetAttrString(np, "empty");
    numpy_frombuffer = PyObject_GetAttrString(np, "frombuffer");
    Py_DECREF(np);
    if (!numpy_empty || !numpy_frombuffer) {
        Py_CLEAR(numpy_empty);
        Py_CLEAR(numpy_frombuffer);
        return -1;
    }
    return 0;
}

PyObject *kp_new_array(Py_ssize_t h, Py_ssize_t w, Py_ssize_t c)
{
    if (numpy_ready())
        return NULL;
    PyObject *shape = c ? Py_BuildValue("(nnn)", h, w, c) : Py_BuildValue("(nn)", h, w);
    if (!shape)
        return NULL;
    PyObject *arr = PyObject_CallFunction(numpy_empty, "Os", shape, "uint8");
    Py_DECREF(shape);
    return arr;
}

PyObject *kp_float_array(const float *values, Py_ssize_t d0, Py_ssize_t d1)
{
    if (numpy_ready())
        return NULL;
    Py_ssize_t n = d0 * (d1 ? d1 : 1);
    PyObject *bytes =
        PyBytes_FromStringAndSize((const char *)values, n * (Py_ssize_t)sizeof(float));
    if (!bytes)
        return NULL;
    /* frombuffer views the bytes (read-only); copy() makes a writable array of its own */
    PyObject *view = PyObject_CallFunction(numpy_frombuffer, "Os", bytes, "float32");
    Py_DECREF(bytes);
    PyObject *arr = NULL;
    if (view) {
        arr = d1 ? PyObject_CallMethod(view, "reshape", "(nn)", d0, d1)
                 : PyObject_CallMethod(view, "reshape", "(n)", d0);
        Py_DECREF(view);
    }
    if (arr) {
        PyObject *copy = PyObject_CallMethod(arr, "copy", NULL);
        Py_DECREF(arr);
        arr = copy;
    }
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

int kp_plane_geometry(kp_plane *p, int ndim, const Py_ssize_t *shape, const Py_ssize_t *strides,
                      const char *what)
{
    if (ndim != 2 && ndim != 3) {
        kp_raise_invalid("%s: expected 2 or 3 dimensions (height, width[, channels]), got %d",
                         what, ndim);
        return -1;
    }
    p->ndim = ndim;
    p->h = (int)shape[0];
    p->w = (int)shape[1];
    p->c = ndim == 3 ? (int)shape[2] : 1;
    if (shape[0] <= 0 || shape[1] <= 0 || shape[0] > 65536 || shape[1] > 65536 ||
        (ndim == 3 && (shape[2] <= 0 || shape[2] > 4))) {
        kp_raise_invalid("%s: unsupported shape %s", what, ndim == 3 ? "(h, w, c)" : "(h, w)");
        return -1;
    }
    if ((ndim == 3 && strides[2] != 1) || strides[1] != p->c ||
        strides[0] < (Py_ssize_t)p->w * p->c) {
        kp_raise_invalid("%s: pixels must be contiguous within each row (strides %zd, %zd%s), "
                         "rows at a positive stride of at least %d bytes; use "
                         "numpy.ascontiguousarray", what, strides[0], strides[1],
                         ndim == 3 ? ", ..." : "", p->w * p->c);
        return -1;
    }
    p->stride = strides[0];
    return 0;
}

/* A host plane through the buffer protocol. */
static int host_plane_get(PyObject *obj, int writable, const char *what, kp_plane *p)
{
    Py_buffer *v = &p->view;
    int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags)) {
        PyErr_Clear();
        Py_TYPE(obj)->tp_as_buffer && !writable
            ? (void)kp_raise_invalid("%s: not a readable strided array", what)
            : (void)kp_raise_invalid("%s: not a %sarray (a %s)", what,
                                     writable ? "writable " : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    p->has_view = 1;
    char tbuf[64];
    if (v->itemsize != 1 || (v->format && strcmp(v->format, "B") && strcmp(v->format, "=B") &&
                             strcmp(v->format, "<B") && strcmp(v->format, "|B"))) {
        type_text(obj, v, tbuf, sizeof(tbuf));
        kp_raise_invalid("%s: elements must be uint8, not %s", what, tbuf);
        goto fail;
    }
    if (kp_plane_geometry(p, v->ndim, v->shape, v->strides, what))
        goto fail;
    p->data = v->buf;
    p->memory = KEYER_MEMORY_HOST;
    p->readonly = v->readonly;
    return 0;
fail:
    kp_plane_release(p);
    return -1;
}

int kp_plane_get(PyObject *obj, int writable, const char *what, const kp_cuda_ctx *cuda,
                 kp_plane *p)
{
    memset(p, 0, sizeof(*p));
    /* CUDA arrays through __cuda_array_interface__ first (a CuPy array's type also has buffer
     * slots, which refuse); host arrays through the buffer protocol (NumPy arrays also speak
     * DLPack); the rest through DLPack (a PyTorch CPU tensor too) */
    if (PyObject_HasAttrString(obj, "__cuda_array_interface__") ||
        (!PyObject_CheckBuffer(obj) && PyObject_HasAttrString(obj, "__dlpack__")))
        return kp_cuda_plane_get(obj, writable, what, cuda, p);
    return host_plane_get(obj, writable, what, p);
}

void kp_plane_release(kp_plane *p)
{
    if (p->has_view)
        PyBuffer_Release(&p->view);
    kp_cuda_plane_release(p);
    memset(p, 0, sizeof(*p));
}

/* ---- pixel layouts --------------------------------------------------------------------------- */

const char *const kp_layout_names[] = {"rgb", "bgr", "rgba", "bgra", "nv12", NULL};

int kp_layout_from_name(const char *name, kp_layout *out)
{
    for (int i = 0; name && kp_layout_names[i]; i++)
        if (!strcmp(name, kp_layout_names[i])) {
            *out = (kp_layout)i;
            return 0;
        }
    kp_raise_invalid("format '%s': expected rgb, bgr, rgba, bgra or nv12", name ? name : "?");
    return -1;
}

void kp_swap_rb(uint8_t *dst, ptrdiff_t ds, const uint8_t *src, ptrdiff_t ss, int w, int h, int c)
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

void kp_input_release(kp_input *in)
{
    for (int i = 0; i < in->nplanes; i++)
        kp_plane_release(&in->planes[i]);
    in->nplanes = 0;
}

/* The NV12 planes of a (y, uv) pair. */
static int nv12_pair(PyObject *obj, int writable, const char *what, const kp_cuda_ctx *cuda,
                     kp_input *in, int *h, int *w)
{
    if (PySequence_Size(obj) != 2) {
        PyErr_Clear();
        kp_raise_invalid("%s: NV12 planes are a (y, uv) pair", what);
        return -1;
    }
    char wy[64], wuv[64];
    snprintf(wy, sizeof(wy), "%s (y plane)", what);
    snprintf(wuv, sizeof(wuv), "%s (uv plane)", what);
    PyObject *y = PySequence_GetItem(obj, 0), *uv = y ? PySequence_GetItem(obj, 1) : NULL;
    int rc = -1;
    kp_plane *py = &in->planes[0], *puv = &in->planes[1];
    if (!y || !uv || kp_plane_get(y, writable, wy, cuda, py))
        goto done;
    in->nplanes = 1;
    if (py->c != 1 || py->ndim != 2) {
        kp_raise_invalid("%s: expected (height, width)", wy);
        goto done;
    }
    if (kp_plane_get(uv, writable, wuv, cuda, puv))
        goto done;
    in->nplanes = 2;
    *h = py->h;
    *w = py->w;
    /* (h/2, w/2, 2), or (h/2, w) with interleaved samples */
    int cols = puv->c == 2 ? puv->w : puv->w / 2;
    if (puv->h != (*h + 1) / 2 || cols != (*w + 1) / 2 || (puv->c != 2 && puv->c != 1) ||
        (puv->c == 1 && puv->w % 2)) {
        kp_raise_invalid("%s: expected (%d, %d, 2) or (%d, %d) for a %dx%d y plane",
                         wuv, (*h + 1) / 2, (*w + 1) / 2, (*h + 1) / 2, 2 * ((*w + 1) / 2),
                         *w, *h);
        goto done;
    }
    if (py->memory != puv->memory || py->device != puv->device) {
        kp_raise_invalid("%s: the y and uv planes are in different memories", what);
        goto done;
    }
    rc = 0;
done:
    Py_XDECREF(y);
    Py_XDECREF(uv);
    return rc;
}

int kp_input_get(PyObject *obj, kp_layout layout, int writable, const char *what,
                 const kp_cuda_ctx *cuda, kp_input *in)
{
    memset(in, 0, sizeof(*in));
    in->layout = layout;
    keyer_frame *f = &in->frame;
    f->pts = INT64_MIN;
    int h, w;
    if (layout == KP_NV12) {
        if (PyTuple_Check(obj) || PyList_Check(obj)) {
            if (nv12_pair(obj, writable, what, cuda, in, &h, &w)) {
                kp_input_release(in);
                return -1;
            }
            f->data[0] = in->planes[0].data;
            f->stride[0] = in->planes[0].stride;
            f->data[1] = in->planes[1].data;
            f->stride[1] = in->planes[1].stride;
        } else {
            kp_plane *p = &in->planes[0];
            if (kp_plane_get(obj, writable, what, cuda, p))
                return -1;
            in->nplanes = 1;
            if (p->ndim != 2 || p->h % 3 || p->w % 2) {
                kp_raise_invalid("%s: NV12 in one array is (height * 3 / 2, width) with even "
                                 "sizes, got %s", what,
                                 p->ndim != 2 ? "3 dimensions" : "odd sizes");
                kp_input_release(in);
                return -1;
            }
            h = p->h / 3 * 2;
            w = p->w;
            in->stacked = 1;
            f->data[0] = p->data;
            f->stride[0] = p->stride;
            f->data[1] = p->data + (ptrdiff_t)h * p->stride;
            f->stride[1] = p->stride;
        }
        f->format = KEYER_PIXEL_FORMAT_NV12;
    } else {
        kp_plane *p = &in->planes[0];
        if (kp_plane_get(obj, writable, what, cuda, p))
            return -1;
        in->nplanes = 1;
        int want = layout == KP_RGB || layout == KP_BGR ? 3 : 4;
        if (p->ndim != 3 || p->c != want) {
            kp_raise_invalid("%s: format %s takes (height, width, %d) arrays, got %s%d channel%s",
                             what, kp_layout_names[layout], want,
                             p->ndim != 3 ? "2 dimensions, " : "", p->ndim != 3 ? 1 : p->c,
                             p->c == 1 ? "" : "s");
            kp_input_release(in);
            return -1;
        }
        f->format = want == 3 ? KEYER_PIXEL_FORMAT_RGB24 : KEYER_PIXEL_FORMAT_RGBA;
        f->data[0] = p->data;
        f->stride[0] = p->stride;
        h = p->h;
        w = p->w;
    }
    f->width = w;
    f->height = h;
    f->memory = in->planes[0].memory;
    f->device = in->planes[0].device;
    return 0;
}

keyer_status kp_scratch(keyer_frame **f, keyer_pixel_format fmt, int w, int h, keyer_error *err)
{
    keyer_status st;
    if (!*f && (st = keyer_frame_create(f, err)))
        return st;
    if ((*f)->format == fmt && (*f)->width == w && (*f)->height == h && (*f)->data[0])
        return KEYER_OK;
    return keyer_frame_alloc(*f, fmt, w, h, NULL, err);
}

int kp_host_frame(PyObject *obj, kp_layout layout, int writable, kp_input *in,
                  keyer_frame **scratch, const keyer_frame **out)
{
    if (kp_input_get(obj, layout, writable, "frame", NULL, in))
        return -1;
    *out = &in->frame;
    if (layout != KP_BGR && layout != KP_BGRA)
        return 0;
    const keyer_frame *src = &in->frame;
    keyer_error e = {0};
    keyer_status st = kp_scratch(scratch, src->format, src->width, src->height, &e);
    if (st) {
        kp_input_release(in);
        kp_raise(st, &e);
        return -1;
    }
    kp_swap_rb((*scratch)->data[0], (*scratch)->stride[0], src->data[0], src->stride[0],
               src->width, src->height, layout == KP_BGR ? 3 : 4);
    *out = *scratch;
    return 0;
}
