/*
 * GPU arrays for keyer._keyer (see kp.h): CUDA memory in through __cuda_array_interface__
 * (version 2 and 3) or DLPack (__dlpack__, legacy and versioned capsules), and out as
 * keyer.CudaArray, which owns a keyer frame in CUDA memory and exports both protocols, so
 * PyTorch, CuPy, JAX and Numba take it without a copy.
 *
 * The DLPack structures below are the ABI of the DLPack specification (dlpack.h, version 1.0),
 * declared here with this module's prefix.
 */
#include "kp.h"

#include <string.h>

enum {
    KP_DL_CPU = 1,
    KP_DL_CUDA = 2,
    KP_DL_CUDA_HOST = 3,
    KP_DL_CUDA_MANAGED = 13,
    KP_DL_UINT = 1,
};

typedef struct {
    int32_t device_type;
    int32_t device_id;
} kp_dl_device;

typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} kp_dl_dtype;

typedef struct {
    void *data;
    kp_dl_device device;
    int32_t ndim;
    kp_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} kp_dl_tensor;

typedef struct kp_dl_managed {
    kp_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct kp_dl_managed *self);
} kp_dl_managed;

typedef struct {
    uint32_t major, minor;
} kp_dl_version;

#define KP_DL_FLAG_READ_ONLY 1u

typedef struct kp_dl_managed_v {
    kp_dl_version version;
    void *manager_ctx;
    void (*deleter)(struct kp_dl_managed_v *self);
    uint64_t flags;
    kp_dl_tensor dl_tensor;
} kp_dl_managed_v;

/* ---- in -------------------------------------------------------------------------------------- */

/* (device_type, device_id) of a __dlpack__ object; 0, or -1 raised. */
static int dlpack_device(PyObject *obj, int *type, int *id)
{
    PyObject *d = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int rc = d && PyArg_ParseTuple(d, "ii", type, id) ? 0 : -1;
    Py_XDECREF(d);
    return rc;
}

/* A CUDA array where only host arrays are taken. */
static int host_only(const char *what)
{
    kp_raise_invalid("%s: a GPU array; this takes host arrays (NumPy)", what);
    return -1;
}

/* A tuple of ints into @p out (at most 3). */
static int int_tuple(PyObject *t, Py_ssize_t *out, int *n, const char *what, const char *key)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > 3 || PyTuple_GET_SIZE(t) < 1) {
        kp_raise_invalid("%s: __cuda_array_interface__ %s: a tuple of 1 to 3 ints", what, key);
        return -1;
    }
    *n = (int)PyTuple_GET_SIZE(t);
    for (int i = 0; i < *n; i++) {
        out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* An array through __cuda_array_interface__: memory CUDA on device @p device. */
static int cai_plane(PyObject *obj, int writable, const char *what, int device, kp_plane *p)
{
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (!cai)
        return -1;
    int rc = -1;
    Py_ssize_t shape[3], strides[3];
    int ndim = 0, nstrides = 0;
    PyObject *v;
    if (!PyDict_Check(cai)) {
        kp_raise_invalid("%s: __cuda_array_interface__ is not a dict", what);
        goto done;
    }
    const char *typestr = (v = PyDict_GetItemString(cai, "typestr")) ? PyUnicode_AsUTF8(v) : NULL;
    if (!typestr || (strcmp(typestr, "|u1") && strcmp(typestr, "<u1") && strcmp(typestr, ">u1"))) {
        PyErr_Clear();
        kp_raise_invalid("%s: elements must be uint8, not %s", what, typestr ? typestr : "?");
        goto done;
    }
    if ((v = PyDict_GetItemString(cai, "mask")) && v != Py_None) {
        kp_raise_invalid("%s: masked arrays are not supported", what);
        goto done;
    }
    if (!(v = PyDict_GetItemString(cai, "shape")) || int_tuple(v, shape, &ndim, what, "shape"))
        goto done;
    if ((v = PyDict_GetItemString(cai, "strides")) && v != Py_None) {
        if (int_tuple(v, strides, &nstrides, what, "strides"))
            goto done;
        if (nstrides != ndim) {
            kp_raise_invalid("%s: __cuda_array_interface__ strides do not match its shape", what);
            goto done;
        }
    } else { /* C-contiguous */
        Py_ssize_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            strides[i] = s;
            s *= shape[i];
        }
    }
    PyObject *data = PyDict_GetItemString(cai, "data");
    unsigned long long ptr;
    int readonly;
    if (!data || !PyArg_ParseTuple(data, "Kp", &ptr, &readonly)) {
        PyErr_Clear();
        kp_raise_invalid("%s: __cuda_array_interface__ data: (pointer, read-only)", what);
        goto done;
    }
    if (kp_plane_geometry(p, ndim, shape, strides, what))
        goto done;
    if (writable && readonly) {
        kp_raise_invalid("%s: a read-only array", what);
        goto done;
    }
    /* version 3: the producer's stream, which the consumer waits for (None: no wait needed) */
    if ((v = PyDict_GetItemString(cai, "stream")) && v != Py_None) {
        unsigned long long s = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred())
            goto done;
        p->stream = (void *)(uintptr_t)s;
        p->has_stream = 1;
    }
    p->data = (uint8_t *)(uintptr_t)ptr;
    p->memory = KEYER_MEMORY_CUDA;
    p->device = device;
    p->readonly = readonly;
    rc = 0;
done:
    Py_DECREF(cai);
    return rc;
}

/* An array through DLPack, its producer making @p stream wait for its data. */
static int dlpack_plane(PyObject *obj, int writable, const char *what, const kp_cuda_ctx *ctx,
                        kp_plane *p)
{
    int type, id;
    if (dlpack_device(obj, &type, &id))
        return -1;
    int cuda = type == KP_DL_CUDA || type == KP_DL_CUDA_MANAGED;
    if (cuda && !ctx)
        return host_only(what);
    void *stream = cuda ? ctx->stream : NULL;
    if (!cuda && type != KP_DL_CPU && type != KP_DL_CUDA_HOST) {
        kp_raise_invalid("%s: DLPack device type %d (CPU or CUDA memory expected)", what, type);
        return -1;
    }
    /* stream: a CUDA consumer's stream (1: the legacy default one); host memory: None */
    PyObject *kw = cuda ? Py_BuildValue("{s:K}", "stream",
                                        (unsigned long long)(stream ? (uintptr_t)stream : 1))
                        : PyDict_New();
    PyObject *meth = kw ? PyObject_GetAttrString(obj, "__dlpack__") : NULL;
    PyObject *empty = meth ? PyTuple_New(0) : NULL;
    PyObject *cap = empty ? PyObject_Call(meth, empty, kw) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(meth);
    Py_XDECREF(kw);
    if (!cap)
        return -1;
    kp_dl_tensor *t = NULL;
    uint64_t flags = 0;
    int rc = -1;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        kp_dl_managed_v *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->version.major != 1) {
            kp_raise_invalid("%s: DLPack version %u (1 expected)", what, m->version.major);
            goto done;
        }
        PyCapsule_SetName(cap, "used_dltensor_versioned");
        p->dl = m;
        p->dl_versioned = 1;
        t = &m->dl_tensor;
        flags = m->flags;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        kp_dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        PyCapsule_SetName(cap, "used_dltensor");
        p->dl = m;
        t = &m->dl_tensor;
    } else {
        kp_raise_invalid("%s: __dlpack__ did not return a DLPack capsule", what);
        goto done;
    }
    if (t->dtype.code != KP_DL_UINT || t->dtype.bits != 8 || t->dtype.lanes != 1) {
        kp_raise_invalid("%s: elements must be uint8 (DLPack type code %d, %d bits)", what,
                         t->dtype.code, t->dtype.bits);
        goto done;
    }
    if (t->ndim < 1 || t->ndim > 3) {
        kp_raise_invalid("%s: expected 2 or 3 dimensions (height, width[, channels]), got %d",
                         what, (int)t->ndim);
        goto done;
    }
    Py_ssize_t shape[3], strides[3], s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        shape[i] = (Py_ssize_t)t->shape[i];
        strides[i] = t->strides ? (Py_ssize_t)t->strides[i] : s;
        s *= shape[i];
    }
    if (kp_plane_geometry(p, t->ndim, shape, strides, what))
        goto done;
    p->readonly = (flags & KP_DL_FLAG_READ_ONLY) != 0;
    if (writable && p->readonly) {
        kp_raise_invalid("%s: a read-only array", what);
        goto done;
    }
    p->data = (uint8_t *)t->data + t->byte_offset;
    p->memory = cuda ? KEYER_MEMORY_CUDA : KEYER_MEMORY_HOST;
    p->device = cuda ? t->device.device_id : 0;
    rc = 0;
done:
    Py_DECREF(cap); /* renamed: its destructor leaves the tensor to us */
    return rc;
}

int kp_cuda_plane_get(PyObject *obj, int writable, const char *what, const kp_cuda_ctx *cuda,
                      kp_plane *p)
{
    /* DLPack first: its producer orders its work with ours (PyTorch's and CuPy's objects speak
     * both; PyTorch's __cuda_array_interface__ names no stream) */
    int cai = !PyObject_HasAttrString(obj, "__dlpack__");
    if (cai && !cuda)
        return host_only(what);
    int rc = cai ? cai_plane(obj, writable, what, cuda->device, p)
                 : dlpack_plane(obj, writable, what, cuda, p);
    if (rc)
        kp_cuda_plane_release(p);
    return rc;
}

void kp_cuda_plane_release(kp_plane *p)
{
    if (!p->dl)
        return;
    if (p->dl_versioned) {
        kp_dl_managed_v *m = p->dl;
        if (m->deleter)
            m->deleter(m);
    } else {
        kp_dl_managed *m = p->dl;
        if (m->deleter)
            m->deleter(m);
    }
    p->dl = NULL;
}

/* ---- out: keyer.CudaArray -------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    keyer_frame *frame;  /* a reference to the pixels (CUDA memory) */
    uint8_t *data;
    int ndim;
    Py_ssize_t shape[3], strides[3];
    int device;
    PyObject *keyer;     /* the keyer.Keyer whose stream wrote it */
    void *stream;        /* that stream */
} CudaArrayObject;

static PyTypeObject CudaArrayType;

PyObject *kp_cuda_array_new(const keyer_frame *frame, int plane, int rows, PyObject *keyer_obj,
                            void *stream)
{
    int pw, ph, bpe;
    keyer_error e = {0};
    keyer_status st = keyer_pixel_format_plane(frame->format, frame->width, frame->height, plane,
                                               &pw, &ph, &bpe, &e);
    if (st)
        return kp_raise(st, &e);
    CudaArrayObject *a = PyObject_New(CudaArrayObject, &CudaArrayType);
    if (!a)
        return NULL;
    a->frame = NULL;
    a->keyer = Py_XNewRef(keyer_obj);
    a->stream = stream;
    a->device = frame->device;
    a->data = frame->data[plane];
    a->ndim = bpe == 1 ? 2 : 3;
    a->shape[0] = rows ? rows : ph;
    a->shape[1] = pw;
    a->shape[2] = bpe;
    a->strides[0] = frame->stride[plane];
    a->strides[1] = bpe;
    a->strides[2] = 1;
    if (a->ndim == 2)
        a->strides[1] = 1;
    if ((st = keyer_frame_create(&a->frame, &e)) || (st = keyer_frame_ref(a->frame, frame, &e))) {
        Py_DECREF(a);
        return kp_raise(st, &e);
    }
    return (PyObject *)a;
}

static void CudaArray_dealloc(CudaArrayObject *a)
{
    keyer_frame_destroy(&a->frame); /* the last reference frees the device memory */
    Py_XDECREF(a->keyer);
    PyObject_Free(a);
}

static PyObject *shape_tuple(const CudaArrayObject *a, const Py_ssize_t *v)
{
    return a->ndim == 2 ? Py_BuildValue("(nn)", v[0], v[1])
                        : Py_BuildValue("(nnn)", v[0], v[1], v[2]);
}

/* The stream as __cuda_array_interface__ and DLPack name it: 1 for the legacy default. */
static unsigned long long stream_number(const CudaArrayObject *a)
{
    return a->stream ? (unsigned long long)(uintptr_t)a->stream : 1;
}

static PyObject *CudaArray_cai(CudaArrayObject *a, void *closure)
{
    (void)closure;
    return Py_BuildValue("{s:N,s:s,s:(KO),s:N,s:i,s:K}", "shape", shape_tuple(a, a->shape),
                         "typestr", "|u1", "data", (unsigned long long)(uintptr_t)a->data,
                         Py_False, "strides", shape_tuple(a, a->strides), "version", 3, "stream",
                         stream_number(a));
}

/* What a DLPack consumer holds: the array (a reference) and the tensor's shape. */
typedef struct {
    PyObject *owner;
    int64_t shape[3], strides[3];
    kp_dl_managed legacy;
    kp_dl_managed_v versioned;
} export_ctx;

static void export_free(export_ctx *c)
{
    PyGILState_STATE g = PyGILState_Ensure(); /* consumers may delete without the GIL */
    Py_XDECREF(c->owner);
    PyGILState_Release(g);
    PyMem_RawFree(c);
}

static void delete_legacy(kp_dl_managed *m)
{
    export_free(m->manager_ctx);
}

static void delete_versioned(kp_dl_managed_v *m)
{
    export_free(m->manager_ctx);
}

static void capsule_destructor(PyObject *cap)
{
    /* a capsule nobody consumed still owns its tensor */
    if (PyCapsule_IsValid(cap, "dltensor")) {
        kp_dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        kp_dl_managed_v *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        m->deleter(m);
    }
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) */
static PyObject *CudaArray_dlpack(CudaArrayObject *a, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_device, &copy))
        return NULL;
    if (copy == Py_True)
        return kp_raise_invalid("__dlpack__: copy=True is not supported (the array is shared)");
    int versioned = 0;
    if (max_version != Py_None) {
        unsigned major = 0, minor = 0;
        if (!PyArg_ParseTuple(max_version, "II", &major, &minor))
            return NULL;
        versioned = major >= 1;
    }
    /* the consumer's stream waits for ours (None: the legacy default stream; -1: no wait) */
    long long number = 1;
    if (stream != Py_None) {
        number = PyLong_AsLongLong(stream);
        if (number == -1 && PyErr_Occurred()) { /* a pointer above LLONG_MAX */
            PyErr_Clear();
            number = (long long)PyLong_AsUnsignedLongLong(stream);
            if (PyErr_Occurred())
                return NULL;
        }
    }
    if (number != -1 && kp_keyer_signal(a->keyer, (void *)(uintptr_t)number))
        return NULL;
    export_ctx *c = PyMem_RawCalloc(1, sizeof(*c));
    if (!c)
        return PyErr_NoMemory();
    c->owner = Py_NewRef(a);
    for (int i = 0; i < a->ndim; i++) {
        c->shape[i] = a->shape[i];
        c->strides[i] = a->strides[i];
    }
    kp_dl_tensor t = {a->data, {KP_DL_CUDA, a->device}, a->ndim, {KP_DL_UINT, 8, 1}, c->shape,
                      c->strides, 0};
    PyObject *cap;
    if (versioned) {
        c->versioned = (kp_dl_managed_v){{1, 0}, c, delete_versioned, 0, t};
        cap = PyCapsule_New(&c->versioned, "dltensor_versioned", capsule_destructor);
    } else {
        c->legacy = (kp_dl_managed){t, c, delete_legacy};
        cap = PyCapsule_New(&c->legacy, "dltensor", capsule_destructor);
    }
    if (!cap)
        export_free(c);
    return cap;
}

static PyObject *CudaArray_dlpack_device(CudaArrayObject *a, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", KP_DL_CUDA, a->device);
}

static PyObject *CudaArray_get_shape(CudaArrayObject *a, void *closure)
{
    (void)closure;
    return shape_tuple(a, a->shape);
}

static PyObject *CudaArray_get_ptr(CudaArrayObject *a, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)a->data);
}

static PyObject *CudaArray_get_device(CudaArrayObject *a, void *closure)
{
    (void)closure;
    return PyLong_FromLong(a->device);
}

static PyObject *CudaArray_get_stream(CudaArrayObject *a, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(stream_number(a));
}

static PyObject *CudaArray_repr(CudaArrayObject *a)
{
    return a->ndim == 2 ? PyUnicode_FromFormat("CudaArray((%zd, %zd), uint8, cuda:%d)",
                                               a->shape[0], a->shape[1], a->device)
                        : PyUnicode_FromFormat("CudaArray((%zd, %zd, %zd), uint8, cuda:%d)",
                                               a->shape[0], a->shape[1], a->shape[2],
                                               a->device);
}

static PyMethodDef CudaArray_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))CudaArray_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule of the array (no copy); the consumer's stream waits for keyer's."},
    {"__dlpack_device__", (PyCFunction)CudaArray_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n(2, device): CUDA memory."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CudaArray_getset[] = {
    {"__cuda_array_interface__", (getter)CudaArray_cai, NULL,
     "Numba's CUDA array interface, version 3 (stream: keyer's stream that wrote the array)",
     NULL},
    {"shape", (getter)CudaArray_get_shape, NULL, "(height, width[, channels])", NULL},
    {"ptr", (getter)CudaArray_get_ptr, NULL, "the device pointer of the first element", NULL},
    {"device", (getter)CudaArray_get_device, NULL, "the CUDA device ordinal", NULL},
    {"stream", (getter)CudaArray_get_stream, NULL,
     "the CUDA stream (cudaStream_t as an int; 1: the legacy default) that writes it", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CudaArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keyer.CudaArray",
    .tp_basicsize = sizeof(CudaArrayObject),
    .tp_dealloc = (destructor)CudaArray_dealloc,
    .tp_repr = (reprfunc)CudaArray_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A uint8 array in CUDA memory made by keyer (a frame or a matte): give it to "
              "torch.from_dlpack, cupy.from_dlpack or anything reading "
              "__cuda_array_interface__; it owns its memory.",
    .tp_methods = CudaArray_methods,
    .tp_getset = CudaArray_getset,
};

int kp_add_cuda(PyObject *m)
{
    if (PyType_Ready(&CudaArrayType))
        return -1;
    return PyModule_AddObjectRef(m, "CudaArray", (PyObject *)&CudaArrayType);
}
