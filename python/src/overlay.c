/* keyer.Overlay (keyer/overlay.h on arrays) and keyer.KnnGraph (see kp.h). */
#include "kp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- arguments ------------------------------------------------------------------------------- */

/* A colour: (r, g, b) or (r, g, b, a) with components in [0, 1], "#rrggbb[aa]", or None
 * (transparent, when @p none_ok). */
static int get_color(PyObject *obj, const char *what, int none_ok, keyer_color *c)
{
    if (obj == Py_None && none_ok) {
        *c = (keyer_color){0, 0, 0, 0};
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        unsigned v[4] = {0, 0, 0, 255};
        size_t n = s ? strlen(s) : 0;
        int ok = s && s[0] == '#' && (n == 7 || n == 9);
        for (size_t i = 1; ok && i < n; i++)
            ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
                 (s[i] >= 'A' && s[i] <= 'F');
        if (!ok) {
            kp_raise_invalid("%s: '%s' is not a colour (#rrggbb, #rrggbbaa or (r, g, b[, a]) in "
                             "0..1)", what, s ? s : "?");
            return -1;
        }
        for (size_t i = 0; 1 + 2 * i < n; i++) {
            char hex[3] = {s[1 + 2 * i], s[2 + 2 * i], 0};
            v[i] = (unsigned)strtoul(hex, NULL, 16);
        }
        *c = (keyer_color){(float)v[0] / 255.0f, (float)v[1] / 255.0f, (float)v[2] / 255.0f,
                           (float)v[3] / 255.0f};
        return 0;
    }
    PyObject *seq = PySequence_Check(obj) ? PySequence_Fast(obj, "") : NULL;
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    float v[4] = {0, 0, 0, 1};
    int ok = seq && (n == 3 || n == 4);
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        double d = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        ok = !(d == -1.0 && PyErr_Occurred()) && d >= 0 && d <= 1;
        v[i] = (float)d;
    }
    Py_XDECREF(seq);
    PyErr_Clear();
    if (!ok) {
        kp_raise_invalid("%s: a colour is (r, g, b) or (r, g, b, a) in 0..1, or \"#rrggbb[aa]\"",
                         what);
        return -1;
    }
    *c = (keyer_color){v[0], v[1], v[2], v[3]};
    return 0;
}

/* A float32 copy of @p obj, an array-like of exactly @p n floats (any shape): *out (PyMem). */
static int get_floats(PyObject *obj, const char *what, Py_ssize_t n_per_row, float **out,
                      Py_ssize_t *rows)
{
    *out = NULL;
    *rows = 0;
    PyObject *np = PyImport_ImportModule("numpy");
    PyObject *arr = np ? PyObject_CallMethod(np, "ascontiguousarray", "Os", obj, "float32")
                       : NULL;
    Py_XDECREF(np);
    if (!arr) {
        PyErr_Clear();
        kp_raise_invalid("%s: not an array of numbers", what);
        return -1;
    }
    Py_buffer v;
    int rc = -1;
    if (PyObject_GetBuffer(arr, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)) {
        Py_DECREF(arr);
        return -1;
    }
    Py_ssize_t count = v.len / (Py_ssize_t)sizeof(float);
    if (count % n_per_row || (v.ndim >= 1 && v.shape[v.ndim - 1] != n_per_row && v.ndim > 1)) {
        kp_raise_invalid("%s: expected (n, %zd) values", what, n_per_row);
    } else if (count == 0) {
        rc = 0;
    } else if ((*out = PyMem_Malloc((size_t)v.len))) {
        memcpy(*out, v.buf, (size_t)v.len);
        *rows = count / n_per_row;
        rc = 0;
    } else {
        PyErr_NoMemory();
    }
    PyBuffer_Release(&v);
    Py_DECREF(arr);
    return rc;
}

/* Index pairs (n, 2) as ints: *out (PyMem). */
static int get_pairs(PyObject *obj, const char *what, int **out, Py_ssize_t *n)
{
    *out = NULL;
    *n = 0;
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Clear();
        kp_raise_invalid("%s: a sequence of (a, b) index pairs", what);
        return -1;
    }
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    int *p = m ? PyMem_Malloc(sizeof(int) * 2 * (size_t)m) : NULL;
    if (m && !p) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *pair = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, i), "");
        long a = -1, b = -1;
        if (pair && PySequence_Fast_GET_SIZE(pair) == 2) {
            a = PyLong_AsLong(PySequence_Fast_GET_ITEM(pair, 0));
            b = PyLong_AsLong(PySequence_Fast_GET_ITEM(pair, 1));
        }
        Py_XDECREF(pair);
        if (PyErr_Occurred() || a < 0 || b < 0 || a > INT32_MAX || b > INT32_MAX) {
            PyErr_Clear();
            PyMem_Free(p);
            Py_DECREF(seq);
            kp_raise_invalid("%s: pair %zd is not two indices", what, i);
            return -1;
        }
        p[2 * i] = (int)a;
        p[2 * i + 1] = (int)b;
    }
    Py_DECREF(seq);
    *out = p;
    *n = m;
    return 0;
}

/* ---- keyer.Overlay --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    keyer_overlay *ov;
    kp_layout layout;      /* default frame layout */
    keyer_frame *rgba;     /* RGB, BGR and BGRA frames are drawn through this RGBA copy */
    keyer_face *faces;     /* KEYER_FACES_MAX faces for faces() (PyMem, on first use) */
    PyObject *weakrefs;
} OverlayObject;

static void Overlay_dealloc(OverlayObject *o)
{
    if (o->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)o);
    keyer_overlay_destroy(&o->ov);
    keyer_frame_destroy(&o->rgba);
    PyMem_Free(o->faces);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static int Overlay_init(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"capacity", "format", NULL};
    int capacity = 4096;
    const char *format = "rgb";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i$s:Overlay", kwlist, &capacity, &format) ||
        kp_layout_from_name(format, &o->layout))
        return -1;
    keyer_overlay_destroy(&o->ov);
    keyer_error e = {0};
    keyer_status st = keyer_overlay_create(capacity, &o->ov, &e);
    if (st)
        return kp_raise(st, &e), -1;
    return 0;
}

static int usable(OverlayObject *o)
{
    if (!o->ov)
        kp_raise_invalid("Overlay: closed");
    return o->ov != NULL;
}

static PyObject *Overlay_close(OverlayObject *o, PyObject *unused)
{
    (void)unused;
    keyer_overlay_destroy(&o->ov);
    keyer_frame_destroy(&o->rgba);
    PyMem_Free(o->faces);
    o->faces = NULL;
    Py_RETURN_NONE;
}

static PyObject *Overlay_enter(OverlayObject *o, PyObject *unused)
{
    (void)unused;
    if (!usable(o))
        return NULL;
    return Py_NewRef(o);
}

static PyObject *Overlay_exit(OverlayObject *o, PyObject *args)
{
    (void)args;
    Py_DECREF(Overlay_close(o, NULL));
    Py_RETURN_FALSE;
}

/* The result of an add: None, or the exception of its status. */
static PyObject *added(keyer_status st, keyer_error *e)
{
    if (st)
        return kp_raise(st, e);
    Py_RETURN_NONE;
}

static PyObject *Overlay_box(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"x0", "y0", "x1", "y1", "radius", "width", "color", "fill", NULL};
    float x0, y0, x1, y1, radius = 0, width = 2;
    PyObject *color = NULL, *fill = Py_None;
    keyer_color c = {1, 1, 1, 1}, f;
    keyer_error e = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ffff|$ffOO:box", kwlist, &x0, &y0, &x1, &y1,
                                     &radius, &width, &color, &fill) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)) ||
        get_color(fill, "fill", 1, &f))
        return NULL;
    return added(keyer_overlay_add_box(o->ov, x0, y0, x1, y1, radius, width, c, f, &e), &e);
}

static PyObject *Overlay_line(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"x0", "y0", "x1", "y1", "width", "color", NULL};
    float x0, y0, x1, y1, width = 2;
    PyObject *color = NULL;
    keyer_color c = {1, 1, 1, 1};
    keyer_error e = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ffff|$fO:line", kwlist, &x0, &y0, &x1, &y1,
                                     &width, &color) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)))
        return NULL;
    return added(keyer_overlay_add_line(o->ov, x0, y0, x1, y1, width, c, &e), &e);
}

static PyObject *Overlay_curve(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"x0", "y0", "x1", "y1", "bend", "width", "color", NULL};
    float x0, y0, x1, y1, bend = 0.2f, width = 2;
    PyObject *color = NULL;
    keyer_color c = {1, 1, 1, 1};
    keyer_error e = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ffff|$ffO:curve", kwlist, &x0, &y0, &x1, &y1,
                                     &bend, &width, &color) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)))
        return NULL;
    return added(keyer_overlay_add_curve(o->ov, x0, y0, x1, y1, bend, width, c, &e), &e);
}

static PyObject *Overlay_dot(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"x", "y", "radius", "color", NULL};
    float x, y, radius = 3;
    PyObject *color = NULL;
    keyer_color c = {1, 1, 1, 1};
    keyer_error e = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ff|$fO:dot", kwlist, &x, &y, &radius, &color) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)))
        return NULL;
    return added(keyer_overlay_add_dot(o->ov, x, y, radius, c, &e), &e);
}

/* polyline(points) and points(points): (n, 2) points. */
static PyObject *point_list(OverlayObject *o, PyObject *args, PyObject *kw, int dots)
{
    static char *kwlist_l[] = {"points", "width", "color", NULL};
    static char *kwlist_p[] = {"points", "radius", "color", NULL};
    PyObject *points, *color = NULL;
    float size = dots ? 3 : 2;
    keyer_color c = {1, 1, 1, 1};
    if (!PyArg_ParseTupleAndKeywords(args, kw, dots ? "O|$fO:points" : "O|$fO:polyline",
                                     dots ? kwlist_p : kwlist_l, &points, &size, &color) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)))
        return NULL;
    float *xy;
    Py_ssize_t n;
    if (get_floats(points, "points", 2, &xy, &n))
        return NULL;
    keyer_error e = {0};
    keyer_status st = dots ? keyer_overlay_add_points(o->ov, xy, (int)n, size, c, &e)
                           : keyer_overlay_add_polyline(o->ov, xy, (int)n, size, c, &e);
    PyMem_Free(xy);
    return added(st, &e);
}

static PyObject *Overlay_polyline(OverlayObject *o, PyObject *args, PyObject *kw)
{
    return point_list(o, args, kw, 0);
}

static PyObject *Overlay_points(OverlayObject *o, PyObject *args, PyObject *kw)
{
    return point_list(o, args, kw, 1);
}

/* connections(points, pairs) (bend 0 and no point radius) and graph(points, edges, bend=,
 * point_radius=): segments or curves joining index pairs of points, then the points. */
static PyObject *joined(OverlayObject *o, PyObject *args, PyObject *kw, int graph)
{
    static char *kwlist_c[] = {"points", "pairs", "width", "color", NULL};
    static char *kwlist_g[] = {"points", "edges", "width", "color", "bend", "point_radius", NULL};
    PyObject *points, *pairs, *color = NULL;
    float width = 2, bend = 0, radius = 0;
    keyer_color c = {1, 1, 1, 1};
    if (!(graph ? PyArg_ParseTupleAndKeywords(args, kw, "OO|$fOff:graph", kwlist_g, &points,
                                              &pairs, &width, &color, &bend, &radius)
                : PyArg_ParseTupleAndKeywords(args, kw, "OO|$fO:connections", kwlist_c, &points,
                                              &pairs, &width, &color)) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)))
        return NULL;
    float *xy = NULL;
    int *pr = NULL;
    Py_ssize_t n, m;
    if (get_floats(points, "points", 2, &xy, &n) || get_pairs(pairs, graph ? "edges" : "pairs",
                                                               &pr, &m)) {
        PyMem_Free(xy);
        return NULL;
    }
    keyer_error e = {0};
    keyer_status st = KEYER_OK;
    if (!graph) {
        st = keyer_overlay_add_connections(o->ov, xy, (int)n, pr, (int)m, width, c, &e);
    } else {
        int mark = keyer_overlay_count(o->ov);
        for (Py_ssize_t i = 0; !st && i < m; i++) {
            int a = pr[2 * i], b = pr[2 * i + 1];
            if (a >= n || b >= n) {
                st = keyer_error_set(&e, KEYER_STATUS_INVALID_ARGUMENT,
                                     "graph: edge %zd joins point %d and %d of %zd", i, a, b, n);
                break;
            }
            st = bend != 0 ? keyer_overlay_add_curve(o->ov, xy[2 * a], xy[2 * a + 1], xy[2 * b],
                                                     xy[2 * b + 1], bend, width, c, &e)
                           : keyer_overlay_add_line(o->ov, xy[2 * a], xy[2 * a + 1], xy[2 * b],
                                                    xy[2 * b + 1], width, c, &e);
        }
        if (!st && radius > 0)
            st = keyer_overlay_add_points(o->ov, xy, (int)n, radius, c, &e);
        if (st) /* all or nothing */
            keyer_overlay_truncate(o->ov, mark);
    }
    PyMem_Free(xy);
    PyMem_Free(pr);
    return added(st, &e);
}

static PyObject *Overlay_connections(OverlayObject *o, PyObject *args, PyObject *kw)
{
    return joined(o, args, kw, 0);
}

static PyObject *Overlay_graph(OverlayObject *o, PyObject *args, PyObject *kw)
{
    return joined(o, args, kw, 1);
}

/* text(x, y, text) and label(x, y, text, background=) */
static PyObject *text_item(OverlayObject *o, PyObject *args, PyObject *kw, int label)
{
    static char *kwlist_t[] = {"x", "y", "text", "scale", "color", NULL};
    static char *kwlist_l[] = {"x", "y", "text", "scale", "color", "background", NULL};
    float x, y, scale = 2;
    const char *text;
    PyObject *color = NULL, *background = NULL;
    keyer_color c = {1, 1, 1, 1}, bg = {0, 0, 0, 0.6f};
    if (!(label ? PyArg_ParseTupleAndKeywords(args, kw, "ffs|$fOO:label", kwlist_l, &x, &y, &text,
                                              &scale, &color, &background)
                : PyArg_ParseTupleAndKeywords(args, kw, "ffs|$fO:text", kwlist_t, &x, &y, &text,
                                              &scale, &color)) ||
        !usable(o) || (color && get_color(color, "color", 0, &c)) ||
        (background && get_color(background, "background", 1, &bg)))
        return NULL;
    keyer_error e = {0};
    return added(label ? keyer_overlay_add_label(o->ov, x, y, scale, text, c, bg, &e)
                       : keyer_overlay_add_text(o->ov, x, y, scale, text, c, &e), &e);
}

static PyObject *Overlay_text(OverlayObject *o, PyObject *args, PyObject *kw)
{
    return text_item(o, args, kw, 0);
}

static PyObject *Overlay_label(OverlayObject *o, PyObject *args, PyObject *kw)
{
    return text_item(o, args, kw, 1);
}

/* Copies exactly @p n floats of the array-like attribute @p name of @p obj into @p dst. */
static int attr_floats(PyObject *obj, const char *name, float *dst, Py_ssize_t n_per_row,
                       Py_ssize_t rows)
{
    PyObject *a = PyObject_GetAttrString(obj, name);
    if (!a)
        return -1;
    float *v;
    Py_ssize_t got;
    int rc = get_floats(a, name, n_per_row, &v, &got);
    Py_DECREF(a);
    if (rc)
        return -1;
    if (got != rows) {
        PyMem_Free(v);
        kp_raise_invalid("%s: expected (%zd, %zd) values, got %zd rows", name, rows, n_per_row,
                         got);
        return -1;
    }
    memcpy(dst, v, sizeof(float) * (size_t)(rows * n_per_row));
    PyMem_Free(v);
    return 0;
}

/* A keyer.Face as a keyer_face (what keyer_faces_draw reads). */
static int face_from(PyObject *f, keyer_face *out)
{
    memset(out, 0, sizeof(*out));
    PyObject *id = PyObject_GetAttrString(f, "id"), *score = PyObject_GetAttrString(f, "score");
    PyObject *box = PyObject_GetAttrString(f, "box"), *kp = PyObject_GetAttrString(f, "keypoints");
    PyObject *lm = PyObject_GetAttrString(f, "landmarks");
    int rc = -1;
    float b[4];
    Py_ssize_t nkp = 0;
    float *k = NULL;
    if (!id || !score || !box || !kp || !lm)
        goto done;
    out->id = (uint32_t)PyLong_AsUnsignedLong(id);
    out->box.score = (float)PyFloat_AsDouble(score);
    if (PyErr_Occurred() || attr_floats(f, "box", b, 4, 1) || get_floats(kp, "keypoints", 2, &k,
                                                                          &nkp))
        goto done;
    if (nkp > KEYER_DETECTION_MAX_KEYPOINTS) {
        kp_raise_invalid("keypoints: at most %d", KEYER_DETECTION_MAX_KEYPOINTS);
        goto done;
    }
    out->box.xmin = b[0];
    out->box.ymin = b[1];
    out->box.xmax = b[2];
    out->box.ymax = b[3];
    out->box.num_keypoints = (int)nkp;
    if (nkp)
        memcpy(out->box.keypoints, k, sizeof(float) * 2 * (size_t)nkp);
    if (lm != Py_None) {
        if (attr_floats(f, "landmarks", &out->landmarks[0][0], 3, KEYER_FACE_MESH_POINTS))
            goto done;
        out->has_landmarks = 1;
    }
    rc = 0;
done:
    PyMem_Free(k);
    Py_XDECREF(id);
    Py_XDECREF(score);
    Py_XDECREF(box);
    Py_XDECREF(kp);
    Py_XDECREF(lm);
    return rc;
}

static PyObject *Overlay_faces(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"faces", "boxes", "ids", "keypoints", "mesh", "line_width",
                             "text_scale", "color", NULL};
    keyer_faces_draw_params p = keyer_faces_draw_params_defaults();
    PyObject *faces, *color = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$ppppffO:faces", kwlist, &faces, &p.boxes,
                                     &p.ids, &p.keypoints, &p.mesh, &p.line_width, &p.text_scale,
                                     &color) ||
        !usable(o) || (color && get_color(color, "color", 0, &p.box_color)))
        return NULL;
    PyObject *seq = PySequence_Fast(faces, "faces: a sequence of keyer.Face");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > KEYER_FACES_MAX) {
        Py_DECREF(seq);
        return kp_raise_invalid("faces: at most %d at a time", KEYER_FACES_MAX);
    }
    if (!o->faces && !(o->faces = PyMem_Malloc(sizeof(keyer_face) * KEYER_FACES_MAX))) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (face_from(PySequence_Fast_GET_ITEM(seq, i), &o->faces[i])) {
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    keyer_error e = {0};
    return added(keyer_faces_draw(o->ov, o->faces, (int)n, &p, &e), &e);
}

static PyObject *Overlay_pose(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"pose", "skeleton", "keypoints", "min_visibility", "line_width",
                             "point_radius", "color", NULL};
    keyer_pose_draw_params p = keyer_pose_draw_params_defaults();
    PyObject *pose, *color = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$ppfffO:pose", kwlist, &pose, &p.skeleton,
                                     &p.keypoints, &p.min_visibility, &p.line_width,
                                     &p.point_radius, &color) ||
        !usable(o) || (color && get_color(color, "color", 0, &p.line_color)))
        return NULL;
    if (pose == Py_None)
        Py_RETURN_NONE;
    keyer_pose_result r;
    memset(&r, 0, sizeof(r));
    float lm[KEYER_POSE_LANDMARKS][5];
    PyObject *presence = PyObject_GetAttrString(pose, "presence");
    if (!presence)
        return NULL;
    r.presence = (float)PyFloat_AsDouble(presence);
    Py_DECREF(presence);
    if (PyErr_Occurred() || attr_floats(pose, "landmarks", &lm[0][0], 5, KEYER_POSE_LANDMARKS))
        return NULL;
    r.found = 1;
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++)
        r.landmarks[i] = (keyer_pose_landmark){lm[i][0], lm[i][1], lm[i][2], lm[i][3], lm[i][4]};
    keyer_error e = {0};
    return added(keyer_pose_draw(o->ov, &r, &p, &e), &e);
}

static PyObject *Overlay_clear(OverlayObject *o, PyObject *unused)
{
    (void)unused;
    if (!usable(o))
        return NULL;
    keyer_overlay_clear(o->ov);
    Py_RETURN_NONE;
}

static Py_ssize_t Overlay_len(OverlayObject *o)
{
    return o->ov ? keyer_overlay_count(o->ov) : 0;
}

/* render(frame, *, format=None): draws on the frame in place; returns it. */
static PyObject *Overlay_render(OverlayObject *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"frame", "format", NULL};
    PyObject *frame;
    const char *format = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$z:render", kwlist, &frame, &format) ||
        !usable(o))
        return NULL;
    kp_layout layout = o->layout;
    if (format && kp_layout_from_name(format, &layout))
        return NULL;
    kp_input in;
    if (kp_input_get(frame, layout, 1, "frame", NULL, &in))
        return NULL;
    keyer_frame *f = &in.frame;
    keyer_error e = {0};
    keyer_status st = KEYER_OK;
    int via_rgba = layout == KP_RGB || layout == KP_BGR || layout == KP_BGRA;
    Py_BEGIN_ALLOW_THREADS
    if (via_rgba) {
        /* the renderer draws on RGBA: through an opaque RGBA copy (the colour channels come
         * out as they would on an RGBA frame with the same pixels) */
        st = kp_scratch(&o->rgba, KEYER_PIXEL_FORMAT_RGBA, f->width, f->height, &e);
        keyer_frame *r = o->rgba;
        for (int y = 0; !st && y < f->height; y++) {
            const uint8_t *s = f->data[0] + y * f->stride[0];
            uint8_t *d = r->data[0] + y * r->stride[0];
            int c = layout == KP_BGRA ? 4 : 3, swap = layout != KP_RGB;
            for (int x = 0; x < f->width; x++, s += c, d += 4) {
                d[0] = s[swap ? 2 : 0];
                d[1] = s[1];
                d[2] = s[swap ? 0 : 2];
                d[3] = c == 4 ? s[3] : 255;
            }
        }
        if (!st)
            st = keyer_overlay_render(o->ov, r, &e);
        for (int y = 0; !st && y < f->height; y++) {
            const uint8_t *s = r->data[0] + y * r->stride[0];
            uint8_t *d = f->data[0] + y * f->stride[0];
            int c = layout == KP_BGRA ? 4 : 3, swap = layout != KP_RGB;
            for (int x = 0; x < f->width; x++, s += 4, d += c) {
                d[0] = s[swap ? 2 : 0];
                d[1] = s[1];
                d[2] = s[swap ? 0 : 2];
                if (c == 4)
                    d[3] = s[3];
            }
        }
    } else {
        st = keyer_overlay_render(o->ov, f, &e);
    }
    Py_END_ALLOW_THREADS
    kp_input_release(&in);
    if (st)
        return kp_raise(st, &e);
    return Py_NewRef(frame);
}

/* text_size(text, scale=2) -> (width, height) in pixels */
static PyObject *Overlay_text_size(PyObject *cls, PyObject *args, PyObject *kw)
{
    (void)cls;
    static char *kwlist[] = {"text", "scale", NULL};
    const char *text;
    float scale = 2, w, h;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|f:text_size", kwlist, &text, &scale))
        return NULL;
    keyer_overlay_text_size(text, scale, &w, &h);
    return Py_BuildValue("(dd)", (double)w, (double)h);
}

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)
static PyMethodDef Overlay_methods[] = {
    {"box", FN(Overlay_box), KW,
     "box(x0, y0, x1, y1, *, radius=0, width=2, color=white, fill=None)\n--\n\n"
     "A rounded rectangle: a stroke of width pixels centred on the outline (0: none), filled "
     "with fill (None: not filled)."},
    {"line", FN(Overlay_line), KW,
     "line(x0, y0, x1, y1, *, width=2, color=white)\n--\n\nA segment with round caps."},
    {"polyline", FN(Overlay_polyline), KW,
     "polyline(points, *, width=2, color=white)\n--\n\nSegments through (n, 2) points."},
    {"curve", FN(Overlay_curve), KW,
     "curve(x0, y0, x1, y1, *, bend=0.2, width=2, color=white)\n--\n\n"
     "A quadratic curve whose control point is the chord's midpoint pushed sideways by bend "
     "times the chord's length."},
    {"dot", FN(Overlay_dot), KW, "dot(x, y, *, radius=3, color=white)\n--\n\nA filled disc."},
    {"points", FN(Overlay_points), KW,
     "points(points, *, radius=3, color=white)\n--\n\nDots at (n, 2) points (NaN hides one)."},
    {"connections", FN(Overlay_connections), KW,
     "connections(points, pairs, *, width=2, color=white)\n--\n\n"
     "Segments joining index pairs of (n, 2) points (e.g. keyer.POSE_CONNECTIONS)."},
    {"graph", FN(Overlay_graph), KW,
     "graph(points, edges, *, width=2, color=white, bend=0, point_radius=0)\n--\n\n"
     "A graph: edges (index pairs) as segments, or curves with bend, and the points as dots "
     "of point_radius (0: none); all or nothing."},
    {"text", FN(Overlay_text), KW,
     "text(x, y, text, *, scale=2, color=white)\n--\n\n"
     "Text in the 5x7 bitmap font, its top-left corner at (x, y), scale pixels per font unit."},
    {"label", FN(Overlay_label), KW,
     "label(x, y, text, *, scale=2, color=white, background=(0, 0, 0, 0.6))\n--\n\n"
     "Text on a rounded plate whose top-left corner is at (x, y)."},
    {"faces", FN(Overlay_faces), KW,
     "faces(faces, *, boxes=True, ids=True, keypoints=False, mesh=True, line_width=2, "
     "text_scale=2, color=green)\n--\n\nkeyer.Face objects: boxes, id labels, keypoints, "
     "face-mesh contours."},
    {"pose", FN(Overlay_pose), KW,
     "pose(pose, *, skeleton=True, keypoints=True, min_visibility=0.5, line_width=3, "
     "point_radius=4, color=white)\n--\n\nA keyer.Pose: skeleton and keypoints (None: "
     "nothing)."},
    {"clear", (PyCFunction)Overlay_clear, METH_NOARGS,
     "clear()\n--\n\nRemoves every primitive (the start of a frame)."},
    {"render", FN(Overlay_render), KW,
     "render(frame, *, format=None)\n--\n\nDraws every primitive on the frame in place and "
     "returns it."},
    {"close", (PyCFunction)Overlay_close, METH_NOARGS,
     "close()\n--\n\nFrees the C objects now; the Overlay cannot be used afterwards."},
    {"__enter__", (PyCFunction)Overlay_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Overlay_exit, METH_VARARGS, NULL},
    {"text_size", FN(Overlay_text_size), KW | METH_STATIC,
     "text_size(text, scale=2)\n--\n\n(width, height) of text drawn at scale, in pixels."},
    {NULL, NULL, 0, NULL},
};
#undef FN
#undef KW

static PySequenceMethods Overlay_seq = {.sq_length = (lenfunc)Overlay_len};

static PyTypeObject OverlayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keyer._keyer.Overlay",
    .tp_basicsize = sizeof(OverlayObject),
    .tp_dealloc = (destructor)Overlay_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Overlays drawn on frames (see keyer.Overlay).",
    .tp_weaklistoffset = offsetof(OverlayObject, weakrefs),
    .tp_methods = Overlay_methods,
    .tp_as_sequence = &Overlay_seq,
    .tp_init = (initproc)Overlay_init,
    .tp_new = PyType_GenericNew,
};

/* ---- keyer.KnnGraph -------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    keyer_knn_graph *g;
    int max_points;
    keyer_knn_edge *edges; /* PyMem: 4 * max_points */
} KnnGraphObject;

static void KnnGraph_dealloc(KnnGraphObject *k)
{
    keyer_knn_graph_destroy(&k->g);
    PyMem_Free(k->edges);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static int KnnGraph_init(KnnGraphObject *k, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"k", "max_points", "max_dy", "max_degree", "hysteresis", NULL};
    keyer_knn_params p = keyer_knn_params_defaults();
    int max_points = 256;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i$ifif:KnnGraph", kwlist, &p.k, &max_points,
                                     &p.max_dy, &p.max_degree, &p.hysteresis))
        return -1;
    if (max_points < 1 || max_points > 1 << 20)
        return kp_raise_invalid("max_points: %d is outside 1..%d", max_points, 1 << 20), -1;
    keyer_knn_graph_destroy(&k->g);
    PyMem_Free(k->edges);
    k->edges = PyMem_Malloc(sizeof(keyer_knn_edge) * 4 * (size_t)max_points);
    if (!k->edges)
        return PyErr_NoMemory(), -1;
    k->max_points = max_points;
    keyer_error e = {0};
    keyer_status st = keyer_knn_graph_create(&p, max_points, &k->g, &e);
    if (st)
        return kp_raise(st, &e), -1;
    return 0;
}

/* update(ids, points) -> [(a, b), ...] edges between ids */
static PyObject *KnnGraph_update(KnnGraphObject *k, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ids", "points", NULL};
    PyObject *ids_obj, *points;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:update", kwlist, &ids_obj, &points))
        return NULL;
    if (!k->g)
        return kp_raise_invalid("KnnGraph: not initialised");
    float *xy;
    Py_ssize_t n;
    if (get_floats(points, "points", 2, &xy, &n))
        return NULL;
    PyObject *seq = PySequence_Fast(ids_obj, "ids: a sequence of ints");
    uint32_t *ids = n ? PyMem_Malloc(sizeof(uint32_t) * (size_t)n) : NULL;
    PyObject *ret = NULL;
    if (!seq || (n && !ids)) {
        if (seq)
            PyErr_NoMemory();
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(seq) != n || n > k->max_points) {
        kp_raise_invalid("update: %zd ids for %zd points (at most %d)",
                         PySequence_Fast_GET_SIZE(seq), n, k->max_points);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred() || v > UINT32_MAX) {
            PyErr_Clear();
            kp_raise_invalid("ids: %zd is not an id (0..2**32-1)", i);
            goto done;
        }
        ids[i] = (uint32_t)v;
    }
    int ne = 0;
    keyer_error e = {0};
    keyer_status st = keyer_knn_graph_update(k->g, ids, xy, (int)n, k->edges, 4 * k->max_points,
                                             &ne, &e);
    if (st) {
        kp_raise(st, &e);
        goto done;
    }
    ret = PyList_New(ne);
    for (int i = 0; ret && i < ne; i++) {
        PyObject *pair = Py_BuildValue("(kk)", (unsigned long)k->edges[i].a,
                                       (unsigned long)k->edges[i].b);
        if (!pair)
            Py_CLEAR(ret);
        else
            PyList_SET_ITEM(ret, i, pair);
    }
done:
    Py_XDECREF(seq);
    PyMem_Free(ids);
    PyMem_Free(xy);
    return ret;
}

static PyMethodDef KnnGraph_methods[] = {
    {"update", (PyCFunction)(void (*)(void))KnnGraph_update, METH_VARARGS | METH_KEYWORDS,
     "update(ids, points)\n--\n\nThis frame's points ((n, 2), with ids stable across frames): "
     "the graph's edges as (id_a, id_b) pairs, id_a < id_b."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KnnGraphType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keyer._keyer.KnnGraph",
    .tp_basicsize = sizeof(KnnGraphObject),
    .tp_dealloc = (destructor)KnnGraph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "KnnGraph(k=3, *, max_points=256, max_dy=0, max_degree=4, hysteresis=0.2)\n--\n\n"
              "A k-nearest-neighbour graph of tracked points whose edges do not flicker "
              "(hysteresis).",
    .tp_methods = KnnGraph_methods,
    .tp_init = (initproc)KnnGraph_init,
    .tp_new = PyType_GenericNew,
};

int kp_add_overlay(PyObject *m)
{
    if (PyType_Ready(&OverlayType) || PyType_Ready(&KnnGraphType))
        return -1;
    return PyModule_AddObjectRef(m, "Overlay", (PyObject *)&OverlayType) ||
                   PyModule_AddObjectRef(m, "KnnGraph", (PyObject *)&KnnGraphType)
               ? -1
               : 0;
}
