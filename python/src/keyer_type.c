/* keyer.Keyer: the keying chain (keyer/keying.h) per frame, on arrays (see kp.h). */
#include "kp.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    keyer_keying *keying;
    keyer_composite_mode mode;
    kp_layout layout;    /* default input layout */
    int busy;            /* a call runs without the GIL */
    keyer_frame *rgb_in; /* BGR(A) input swapped to RGB(A) */
    keyer_frame *rgb_out; /* output before swapping back to BGR(A) */
    keyer_frame *alpha;  /* the matte when the caller does not want it */
    int device;          /* CUDA device of the network and of GPU arrays */
    PyObject *weakrefs;
} KeyerObject;

static PyTypeObject KeyerType;

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
        const char *fmt = fmt_obj && fmt_obj != Py_None ? PyUnicode_AsUTF8(fmt_obj) : NULL;
        if (fmt_obj && fmt_obj != Py_None && kp_layout_from_name(fmt ? fmt : "?", &layout))
            return -1;
        kp_input in;
        if (kp_input_get(bg, layout, 0, "background", NULL, &in))
            return -1;
        const keyer_frame *src = &in.frame;
        Py_BEGIN_ALLOW_THREADS
        st = keyer_frame_create(&f, &e);
        if (!st)
            st = keyer_frame_alloc(f, src->format, src->width, src->height, NULL, &e);
        if (!st) {
            if (layout == KP_BGR || layout == KP_BGRA)
                kp_swap_rb(f->data[0], f->stride[0], src->data[0], src->stride[0], src->width,
                        src->height, layout == KP_BGR ? 3 : 4);
            else
                st = keyer_frame_copy(f, src, &e);
        }
        if (!st)
            st = keyer_keying_set_background(k->keying, f, &e);
        Py_END_ALLOW_THREADS
        kp_input_release(&in);
        if (st)
            keyer_error_prefix(&e, "background: ");
    }
    keyer_frame_destroy(&f); /* the keying chain holds its own reference */
    if (st) {
        kp_raise(st, &e);
        return -1;
    }
    return 0;
}

static int Keyer_init(KeyerObject *k, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model", "backend", "precision", "threads", "options", "format",
                             "background", "device", "stream", NULL};
    const char *model = NULL, *backend = "cpu", *precision = "auto", *format = "rgb";
    int threads = 0, device = 0;
    unsigned long long stream = 0;
    PyObject *options = NULL, *background = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zssiOsOiK:Keyer", kwlist, &model, &backend,
                                     &precision, &threads, &options, &format, &background,
                                     &device, &stream))
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
    p.device = device;
    p.stream = (void *)(uintptr_t)stream;
    k->device = device;
    if (device < 0 || device > 63)
        return kp_raise_invalid("device: CUDA device %d is outside 0..63", device), -1;
    if (threads < 0 || threads > 256)
        return kp_raise_invalid("threads: %d is outside 0..256", threads), -1;
    if (kp_layout_from_name(format, &k->layout))
        return -1;
    if ((st = keyer_backend_from_name(backend, &p.backend, &e)) ||
        (st = keyer_precision_from_name(precision, &p.precision, &e)))
        return kp_raise(st, &e), -1;
    const keyer_option *tables[2] = {keyer_refine_options(), keyer_composite_options()};
    void *objs[2] = {&p.refine, &p.composite};
    if (kp_apply_options(options, tables, objs, 2, "refine or composite"))
        return -1;
    k->mode = p.composite.mode;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_keying_create(&p, &k->keying, &e);
    Py_END_ALLOW_THREADS
    if (st)
        return kp_raise(st, &e), -1;
    if (background != Py_None && set_background(k, background, NULL))
        return -1;
    if (k->mode == KEYER_COMPOSITE_IMAGE && background == Py_None) {
        kp_raise_invalid("effect image needs a background (a picture path or an array)");
        return -1;
    }
    return 0;
}

static int keyer_usable(KeyerObject *k)
{
    if (!k->keying) {
        kp_raise_invalid("Keyer: closed");
        return 0;
    }
    if (k->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Keyer: in use by another thread (use one Keyer "
                                            "per thread)");
        return 0;
    }
    return 1;
}

/* The output of process(): the caller's array(s) or new ones, as a keyer frame view; for a
 * GPU frame without out=, a keyer frame that keyer_keying_process allocates. */
typedef struct kp_output {
    kp_input arrays;   /* the output's planes (a frame described like an input) */
    keyer_frame frame; /* a view of them, in the output's format */
    keyer_frame *made; /* GPU: allocated by the keying (then wrapped in CudaArrays) */
    PyObject *result;  /* what is returned (made: set after the work) */
    int swap;          /* channels 0 and 2 are swapped into it from k->rgb_out */
} kp_output;

static void output_release(kp_output *o)
{
    kp_input_release(&o->arrays);
    keyer_frame_destroy(&o->made);
}

/* Channels of a packed output for the frame and mode; 0: gray; -1: NV12. */
static int output_channels(const KeyerObject *k, const kp_input *in)
{
    keyer_composite_mode m = k->mode;
    if (m == KEYER_COMPOSITE_MASK)
        return 0;
    if (m == KEYER_COMPOSITE_ALPHA || m == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        return 4;
    if (in->layout == KP_NV12)
        return -1;
    return in->layout == KP_RGB || in->layout == KP_BGR ? 3 : 4;
}

/* Checks or makes the output for frame @p in in the Keyer's mode. 0, or -1 raised. */
static int output_get(KeyerObject *k, const kp_input *in, PyObject *out, const kp_cuda_ctx *cuda,
                      kp_output *o)
{
    memset(o, 0, sizeof(*o));
    int w = in->frame.width, h = in->frame.height;
    int c = output_channels(k, in);
    int gpu = in->frame.memory == KEYER_MEMORY_CUDA;
    o->swap = c > 0 && (in->layout == KP_BGR || in->layout == KP_BGRA);
    if (gpu && out == Py_None) {
        keyer_error e = {0};
        keyer_status st = keyer_frame_create(&o->made, &e);
        return st ? (kp_raise(st, &e), -1) : 0;
    }
    int ch = (h + 1) / 2, cw = (w + 1) / 2;
    if (out != Py_None) {
        o->result = Py_NewRef(out);
    } else if (c >= 0) {
        o->result = kp_new_array(h, w, c);
    } else if (in->stacked) { /* NV12: the input's arrangement */
        o->result = kp_new_array(h + ch, w, 0);
    } else {
        PyObject *y = kp_new_array(h, w, 0), *uv = y ? kp_new_array(ch, cw, 2) : NULL;
        o->result = uv ? PyTuple_Pack(2, y, uv) : NULL;
        Py_XDECREF(y);
        Py_XDECREF(uv);
    }
    if (!o->result)
        return -1;
    keyer_frame *f = &o->frame;
    if (c >= 0) {
        kp_plane *p = &o->arrays.planes[0];
        if (kp_plane_get(o->result, 1, "out", cuda, p))
            goto fail;
        o->arrays.nplanes = 1;
        if (p->h != h || p->w != w || (c ? p->c != c || p->ndim != 3 : p->ndim != 2)) {
            kp_raise_invalid(c ? "out: expected shape (%d, %d, %d)"
                               : "out: expected shape (%d, %d)", h, w, c);
            goto fail;
        }
        memset(f, 0, sizeof(*f));
        f->format = c == 0   ? KEYER_PIXEL_FORMAT_GRAY8
                    : c == 3 ? KEYER_PIXEL_FORMAT_RGB24
                             : KEYER_PIXEL_FORMAT_RGBA;
        f->width = w;
        f->height = h;
        f->memory = p->memory;
        f->device = p->device;
        f->data[0] = p->data;
        f->stride[0] = p->stride;
        f->pts = INT64_MIN;
    } else {
        /* NV12: the same checks as an input, plus writability */
        if (kp_input_get(o->result, KP_NV12, 1, "out", cuda, &o->arrays))
            goto fail;
        if (o->arrays.frame.width != w || o->arrays.frame.height != h) {
            kp_raise_invalid("out: NV12 planes of %dx%d expected", w, h);
            goto fail;
        }
        *f = o->arrays.frame;
    }
    if (f->memory != in->frame.memory) {
        kp_raise_invalid("out: in %s memory, the frame in %s memory (give both as NumPy "
                         "arrays, or both on the GPU)", f->memory ? "CUDA" : "host",
                         in->frame.memory ? "CUDA" : "host");
        goto fail;
    }
    return 0;
fail:
    output_release(o);
    Py_CLEAR(o->result);
    return -1;
}

/* The matte target: the caller's (h, w) array, a new one (@p matte True: on the GPU, made by
 * the keying into *made), or the scratch (the keying's own for GPU frames). */
static int matte_get(KeyerObject *k, const kp_input *in, PyObject *matte, const kp_cuda_ctx *cuda,
                     kp_plane *view, PyObject **result, keyer_frame **alpha, keyer_frame *local,
                     keyer_frame **made, keyer_error *e)
{
    int w = in->frame.width, h = in->frame.height;
    int gpu = in->frame.memory == KEYER_MEMORY_CUDA;
    *result = NULL;
    *alpha = NULL;
    memset(view, 0, sizeof(*view));
    memset(local, 0, sizeof(*local));
    if (matte == Py_None || matte == Py_False) {
        if (gpu)
            return 0; /* the keying's own scratch */
        keyer_status st = kp_scratch(&k->alpha, KEYER_PIXEL_FORMAT_GRAY8, w, h, e);
        if (st)
            return kp_raise(st, e), -1;
        *alpha = k->alpha;
        return 0;
    }
    if (gpu && matte == Py_True) {
        keyer_status st = keyer_frame_create(made, e);
        if (st)
            return kp_raise(st, e), -1;
        *alpha = *made;
        return 0;
    }
    *result = matte == Py_True ? kp_new_array(h, w, 0) : Py_NewRef(matte);
    if (!*result)
        return -1;
    if (kp_plane_get(*result, 1, "matte", cuda, view)) {
        Py_CLEAR(*result);
        return -1;
    }
    int other_memory = view->memory != in->frame.memory;
    if (view->h != h || view->w != w || view->ndim != 2 || other_memory) {
        kp_plane_release(view);
        Py_CLEAR(*result);
        if (other_memory)
            kp_raise_invalid("matte: not in the frame's memory (give both as NumPy arrays, or "
                             "both on the GPU)");
        else
            kp_raise_invalid("matte: expected shape (%d, %d)", h, w);
        return -1;
    }
    local->format = KEYER_PIXEL_FORMAT_GRAY8;
    local->width = w;
    local->height = h;
    local->memory = view->memory;
    local->device = view->device;
    local->data[0] = view->data;
    local->stride[0] = view->stride;
    local->pts = INT64_MIN;
    *alpha = local;
    return 0;
}

/* The work of process() and matte() without the GIL. */
static keyer_status keyer_work(KeyerObject *k, kp_input *in, keyer_frame *alpha, kp_output *o,
                               keyer_error *e)
{
    const keyer_frame *src = &in->frame;
    keyer_status st;
    if (src->memory == KEYER_MEMORY_CUDA) /* no swapping on the GPU (refused before) */
        return keyer_keying_process(k->keying, src, o ? (o->made ? o->made : &o->frame) : NULL,
                                    alpha, e);
    if (in->layout == KP_BGR || in->layout == KP_BGRA) {
        if ((st = kp_scratch(&k->rgb_in, src->format, src->width, src->height, e)))
            return st;
        kp_swap_rb(k->rgb_in->data[0], k->rgb_in->stride[0], src->data[0], src->stride[0],
                   src->width, src->height, in->layout == KP_BGR ? 3 : 4);
        src = k->rgb_in;
    }
    if (!o)
        return keyer_keying_process(k->keying, src, NULL, alpha, e);
    if (!o->swap)
        return keyer_keying_process(k->keying, src, &o->frame, alpha, e);
    if ((st = kp_scratch(&k->rgb_out, o->frame.format, src->width, src->height, e)) ||
        (st = keyer_keying_process(k->keying, src, k->rgb_out, alpha, e)))
        return st;
    kp_swap_rb(o->frame.data[0], o->frame.stride[0], k->rgb_out->data[0], k->rgb_out->stride[0],
               src->width, src->height, o->frame.format == KEYER_PIXEL_FORMAT_RGB24 ? 3 : 4);
    return KEYER_OK;
}

/* A frame the keying allocated on the GPU as CudaArrays: one array, or NV12 as the input was
 * given (one stacked array when its planes follow each other, else a (y, uv) pair). */
static PyObject *gpu_result(KeyerObject *k, const keyer_frame *f, int stacked)
{
    void *stream = keyer_keying_stream(k->keying);
    if (f->format != KEYER_PIXEL_FORMAT_NV12)
        return kp_cuda_array_new(f, 0, 0, (PyObject *)k, stream);
    if (stacked && f->stride[1] == f->stride[0] &&
        f->data[1] == f->data[0] + (ptrdiff_t)f->height * f->stride[0])
        return kp_cuda_array_new(f, 0, f->height + (f->height + 1) / 2, (PyObject *)k, stream);
    PyObject *y = kp_cuda_array_new(f, 0, 0, (PyObject *)k, stream);
    PyObject *uv = y ? kp_cuda_array_new(f, 1, 0, (PyObject *)k, stream) : NULL;
    PyObject *t = uv ? PyTuple_Pack(2, y, uv) : NULL;
    Py_XDECREF(y);
    Py_XDECREF(uv);
    return t;
}

/* Whether @p obj (or the first of a pair of planes) is a DLPack producer in CUDA memory, which
 * must be given the keying's stream when it is asked for its tensor. Arrays seen only through
 * __cuda_array_interface__ get the stream after they are parsed (see keyer_call), so that a
 * malformed one is refused before any CUDA call. */
static int dlpack_on_gpu(PyObject *obj)
{
    if ((PyTuple_Check(obj) || PyList_Check(obj)) && PySequence_Size(obj) > 0) {
        PyObject *first = PySequence_GetItem(obj, 0);
        int r = first && dlpack_on_gpu(first);
        Py_XDECREF(first);
        PyErr_Clear();
        return r;
    }
    if (PyObject_CheckBuffer(obj) || !PyObject_HasAttrString(obj, "__dlpack__"))
        return 0;
    PyObject *d = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int type = 0, id = 0;
    int ok = d && PyArg_ParseTuple(d, "ii", &type, &id);
    Py_XDECREF(d);
    PyErr_Clear();
    return ok && (type == 2 || type == 13); /* kDLCUDA, kDLCUDAManaged */
}

/* Makes the keying's stream (once, for the first GPU array) and puts it in @p ctx. */
static int cuda_stream(KeyerObject *k, kp_cuda_ctx *ctx)
{
    if (ctx->stream)
        return 0;
    keyer_error e = {0};
    keyer_status st = keyer_keying_stream_wait(k->keying, NULL, &e);
    if (st)
        return kp_raise(st, &e), -1;
    ctx->stream = keyer_keying_stream(k->keying);
    return 0;
}

/* The GPU context of a call: the keying's stream (made now for a DLPack producer in CUDA
 * memory, otherwise when the first GPU array has been parsed). */
static int cuda_context(KeyerObject *k, PyObject *frame, kp_cuda_ctx *ctx)
{
    ctx->stream = keyer_keying_stream(k->keying);
    ctx->device = k->device;
    if (ctx->stream || !keyer_built_with_cuda() || !dlpack_on_gpu(frame))
        return 0;
    return cuda_stream(k, ctx);
}

/* The keying's later work waits for @p stream's work so far. */
static int wait_stream(KeyerObject *k, void *stream)
{
    keyer_error e = {0};
    keyer_status st = keyer_keying_stream_wait(k->keying, stream, &e);
    return st ? (kp_raise(st, &e), -1) : 0;
}

/* The streams of the __cuda_array_interface__ arrays of a GPU frame or output, which the
 * keying waits for before reading or writing them. */
static int wait_producers(KeyerObject *k, const kp_input *in)
{
    for (int i = 0; i < in->nplanes; i++)
        if (in->planes[i].has_stream && wait_stream(k, in->planes[i].stream))
            return -1;
    return 0;
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
    kp_cuda_ctx cuda;
    if ((format && kp_layout_from_name(format, &layout)) || cuda_context(k, frame, &cuda))
        return NULL;
    kp_input in;
    if (kp_input_get(frame, layout, 0, "frame", &cuda, &in))
        return NULL;
    int gpu = in.frame.memory == KEYER_MEMORY_CUDA;
    if (gpu && (layout == KP_BGR || layout == KP_BGRA)) {
        kp_input_release(&in);
        keyer_error e = {0};
        keyer_error_set(&e, KEYER_STATUS_UNSUPPORTED, "frame: format %s on the GPU: use rgb, "
                        "rgba or nv12", kp_layout_names[layout]);
        return kp_raise(KEYER_STATUS_UNSUPPORTED, &e);
    }
    if (gpu && cuda_stream(k, &cuda)) {
        kp_input_release(&in);
        return NULL;
    }
    keyer_error e = {0};
    kp_output o;
    keyer_frame *alpha, local_alpha, *made_matte = NULL;
    kp_plane mview;
    memset(&mview, 0, sizeof(mview));
    memset(&o, 0, sizeof(o));
    PyObject *mresult = NULL, *ret = NULL;
    if ((gpu && wait_producers(k, &in)) ||
        (composite && output_get(k, &in, out, &cuda, &o))) {
        kp_input_release(&in);
        return NULL;
    }
    if (matte_get(k, &in, matte, &cuda, &mview, &mresult, &alpha, &local_alpha, &made_matte, &e) ||
        (gpu && (wait_producers(k, &o.arrays) ||
                 (mview.has_stream && wait_stream(k, mview.stream)))))
        goto done;
    keyer_status st;
    k->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_work(k, &in, alpha, composite ? &o : NULL, &e);
    Py_END_ALLOW_THREADS
    k->busy = 0;
    if (st) {
        kp_raise(st, &e);
        goto done;
    }
    if (o.made && !(o.result = gpu_result(k, o.made, in.stacked)))
        goto done;
    if (made_matte && !(mresult = gpu_result(k, made_matte, 0)))
        goto done;
    /* the caller's __cuda_array_interface__ outputs: their streams wait for keyer's */
    for (int i = 0; gpu && i < o.arrays.nplanes; i++)
        if (o.arrays.planes[i].has_stream &&
            kp_keyer_signal((PyObject *)k, o.arrays.planes[i].stream))
            goto done;
    if (gpu && mview.has_stream && kp_keyer_signal((PyObject *)k, mview.stream))
        goto done;
    if (!composite)
        ret = Py_NewRef(mresult);
    else if (mresult)
        ret = PyTuple_Pack(2, o.result, mresult);
    else
        ret = Py_NewRef(o.result);
done:
    kp_plane_release(&mview);
    keyer_frame_destroy(&made_matte);
    Py_XDECREF(mresult);
    if (composite) {
        output_release(&o);
        Py_XDECREF(o.result);
    }
    kp_input_release(&in);
    return ret;
}

int kp_keyer_signal(PyObject *obj, void *consumer)
{
    if (!obj || !PyObject_TypeCheck(obj, &KeyerType) || !((KeyerObject *)obj)->keying)
        return 0;
    keyer_error e = {0};
    keyer_status st = keyer_keying_stream_signal(((KeyerObject *)obj)->keying, consumer, &e);
    return st ? (kp_raise(st, &e), -1) : 0;
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

static PyObject *Keyer_synchronize(KeyerObject *k, PyObject *unused)
{
    (void)unused;
    if (!keyer_usable(k))
        return NULL;
    keyer_error e = {0};
    keyer_status st;
    Py_BEGIN_ALLOW_THREADS
    st = keyer_keying_synchronize(k->keying, &e);
    Py_END_ALLOW_THREADS
    if (st)
        return kp_raise(st, &e);
    Py_RETURN_NONE;
}

static PyObject *Keyer_get_stream(KeyerObject *k, void *closure)
{
    (void)closure;
    void *s = k->keying ? keyer_keying_stream(k->keying) : NULL;
    if (!s)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)s);
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
    {"synchronize", (PyCFunction)Keyer_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWaits for the GPU work the Keyer has queued."},
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
    {"stream", (getter)Keyer_get_stream, NULL,
     "the CUDA stream (cudaStream_t as an int) the Keyer queues its GPU work on; None before "
     "it has one", NULL},
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


int kp_add_keyer(PyObject *m)
{
    if (PyType_Ready(&KeyerType))
        return -1;
    return PyModule_AddObjectRef(m, "Keyer", (PyObject *)&KeyerType);
}
