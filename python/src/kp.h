/*
 * Internal interface of keyer._keyer, the C extension of the Python package (prefix kp_),
 * shared by its files:
 *   module.c    the module: errors, option tables, models, images, version;
 *   arrays.c    arrays in and out: NumPy arrays through the buffer protocol, pixel layouts,
 *               caller frames as keyer frame views;
 *   cuda.c      GPU arrays: __cuda_array_interface__ and DLPack in, keyer.CudaArray out;
 *   keyer_type.c  keyer.Keyer (the keying chain per frame);
 *   detect.c    keyer.Detector and the detection objects' raw data (faces, pose);
 *   overlay.c   keyer.Overlay;
 *   run.c       keyer.run and keyer.Session (the pipeline), the statistics dict.
 * Everything is written against keyer's public headers (include/keyer/) and CPython's C API.
 * Functions returning int return 0, or -1 with a Python exception set; functions returning
 * a PyObject * return a new reference, or NULL with an exception set.
 */
#ifndef KEYER_PYTHON_KP_H
#define KEYER_PYTHON_KP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "keyer/keyer.h"

/* ---- errors (module.c) ---------------------------------------------------------------------- */

/* Raises the keyer.Error subclass of @p st with @p err's message (or the status name);
 * returns NULL. */
PyObject *kp_raise(keyer_status st, const keyer_error *err);

/* Raises keyer.InvalidArgumentError with a formatted message; returns NULL. */
PyObject *kp_raise_invalid(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- option tables (module.c) --------------------------------------------------------------- */

/* Applies {name: text} to the first of @p ntables tables that has each name (their structs in
 * @p objs); an unknown name raises InvalidArgumentError naming @p what. None or NULL: nothing. */
int kp_apply_options(PyObject *dict, const keyer_option *const *tables, void *const *objs,
                     int ntables, const char *what);

/* ---- arrays (arrays.c) ---------------------------------------------------------------------- */

/* A new uint8 C-contiguous NumPy array (h, w, c), or (h, w) when c is 0 (numpy.empty). */
PyObject *kp_new_array(Py_ssize_t h, Py_ssize_t w, Py_ssize_t c);

/* A new float32 C-contiguous NumPy array of @p n elements in the shape (@p d0[, d1]) (d1 0:
 * one dimension) holding @p values. */
PyObject *kp_float_array(const float *values, Py_ssize_t d0, Py_ssize_t d1);

/* One plane of the caller's pixels: uint8, 2 dimensions (h, w) or 3 (h, w, c), elements and
 * pixels packed within each row, rows at a positive stride. In host memory (a buffer, or a
 * DLPack tensor of the CPU), or in CUDA memory (cuda.c). */
typedef struct kp_plane {
    uint8_t *data;
    int h, w, c, ndim;
    ptrdiff_t stride;
    keyer_memory_type memory;
    int device;           /* CUDA device (CUDA memory) */
    int readonly;
    Py_buffer view;       /* host: the buffer (has_view) */
    int has_view;
    void *dl;             /* through DLPack: the managed tensor, deleted at release */
    int dl_versioned;
    void *stream;         /* __cuda_array_interface__ 3: the stream to wait for (has_stream) */
    int has_stream;
} kp_plane;

/* Where GPU arrays may come from: the stream that will read them (a DLPack producer makes it
 * wait for their data) and the device assumed for __cuda_array_interface__ arrays (which do
 * not say theirs). NULL where only host arrays are taken. */
typedef struct kp_cuda_ctx {
    void *stream;
    int device;
} kp_cuda_ctx;

/* Fills @p p's shape and row stride from an array's (ndim, shape, strides in bytes): uint8
 * elements assumed; messages name @p what. */
int kp_plane_geometry(kp_plane *p, int ndim, const Py_ssize_t *shape, const Py_ssize_t *strides,
                      const char *what);

/* Gets @p obj as a plane (@p writable: the caller writes it). Host arrays come through the
 * buffer protocol or DLPack; with @p cuda, objects with __cuda_array_interface__ or
 * __dlpack__ in CUDA memory too. Messages name @p what. */
int kp_plane_get(PyObject *obj, int writable, const char *what, const kp_cuda_ctx *cuda,
                 kp_plane *p);

/* Releases what kp_plane_get took (accepts a zeroed plane). */
void kp_plane_release(kp_plane *p);

/* What the caller's pixel arrays hold. */
typedef enum kp_layout {
    KP_RGB = 0, /* (h, w, 3) R, G, B */
    KP_BGR,     /* (h, w, 3) B, G, R (OpenCV) */
    KP_RGBA,    /* (h, w, 4) */
    KP_BGRA,    /* (h, w, 4) B, G, R, A (OpenCV) */
    KP_NV12,    /* a (y, uv) pair, or one (h * 3 / 2, w) array */
} kp_layout;

extern const char *const kp_layout_names[];

/* The layout called @p name (rgb, bgr, rgba, bgra, nv12). */
int kp_layout_from_name(const char *name, kp_layout *out);

/* Copies a packed picture swapping channels 0 and 2 (RGB <-> BGR, RGBA <-> BGRA); c 3 or 4. */
void kp_swap_rb(uint8_t *dst, ptrdiff_t ds, const uint8_t *src, ptrdiff_t ss, int w, int h,
                int c);

/* A frame as the caller gave it: its planes and a keyer frame viewing them (no buffers). */
typedef struct kp_input {
    kp_plane planes[2];
    int nplanes;
    kp_layout layout;
    int stacked;       /* NV12 given as one array */
    keyer_frame frame; /* a view of the caller's pixels (BGR, BGRA: still swapped) */
} kp_input;

/* Describes the caller's frame @p obj in @p layout (@p cuda: kp_plane_get); @p what names it
 * in messages ("frame", "out"). Its planes are all in the same memory. */
int kp_input_get(PyObject *obj, kp_layout layout, int writable, const char *what,
                 const kp_cuda_ctx *cuda, kp_input *in);

/* Releases the caller's planes. */
void kp_input_release(kp_input *in);

/* Makes *@p f a host frame of the format and size; reallocated only when they change. */
keyer_status kp_scratch(keyer_frame **f, keyer_pixel_format fmt, int w, int h, keyer_error *err);

/* The caller's frame @p obj (layout @p layout) as a host RGB24/RGBA/NV12 keyer frame:
 * a view when possible, else (BGR, BGRA) swapped into *@p scratch. For the analysers and
 * the overlay. */
int kp_host_frame(PyObject *obj, kp_layout layout, int writable, kp_input *in,
                  keyer_frame **scratch, const keyer_frame **out);

/* ---- GPU arrays (cuda.c) -------------------------------------------------------------------- */

/* Gets the GPU (or DLPack) array @p obj as a plane (see kp_plane_get). */
int kp_cuda_plane_get(PyObject *obj, int writable, const char *what, const kp_cuda_ctx *cuda,
                      kp_plane *p);

/* Releases a plane's DLPack tensor (nothing for other planes). */
void kp_cuda_plane_release(kp_plane *p);

/* A new keyer.CudaArray viewing plane @p plane of the CUDA frame @p frame (a reference to its
 * buffers is taken), shaped (rows, width[, bytes per element]) with @p rows rows (0: the
 * plane's; more views the planes after it, as a stacked NV12 array), written on @p stream by
 * the keyer.Keyer @p keyer_obj (DLPack consumers are made to wait for it). */
PyObject *kp_cuda_array_new(const keyer_frame *frame, int plane, int rows, PyObject *keyer_obj,
                            void *stream);

/* Makes CUDA stream @p consumer wait for the work the keyer.Keyer @p keyer_obj has queued
 * (nothing when it is closed: closing waited for its work). */
int kp_keyer_signal(PyObject *keyer_obj, void *consumer);

int kp_add_cuda(PyObject *m);

/* ---- the types (keyer_type.c, detect.c, overlay.c, run.c, session.c) ----------------------- */

int kp_add_keyer(PyObject *m);
int kp_add_detect(PyObject *m);
int kp_add_overlay(PyObject *m);
int kp_add_run(PyObject *m);
int kp_add_session(PyObject *m);

/* ---- jobs on a keyer session (run.c) -------------------------------------------------------- */

/* A session and the Python callbacks around it (keyer.run, keyer.Session). */
typedef struct kp_job {
    keyer_session_params sp;
    keyer_session *s;
    PyObject *progress;                  /* progress callable (borrowed) or NULL */
    PyObject *exc_type, *exc, *exc_tb;   /* the first exception a callback raised */
} kp_job;

/* Fills @p job's session parameters from {name: text} dicts of the session, refinement and
 * compositing tables and the rest; the progress callback (@p progress, or None: Ctrl-C only)
 * is hooked in. The strings must outlive the job. */
int kp_job_init(kp_job *job, PyObject *sopts, PyObject *ropts, PyObject *copts,
                const char *model, const char *background, int passthrough, PyObject *progress,
                int interval_ms);

/* A file stream's parameters: @p input, @p output (str or None), @p writer ({codec, preset,
 * quality, pixel_format, format, codec_options} or None). The strings are the objects'. */
int kp_file_params(PyObject *input, PyObject *output, PyObject *writer, int copy_streams,
                   keyer_file_stream_params *fp);

/* Called with the GIL after a callback raised: keeps the first exception, stops the session. */
void kp_job_failed(kp_job *job);

/* The session's progress callback (opaque: the job). */
void kp_job_progress(void *opaque, const keyer_session_progress *p);

/* Runs job->s to its end (GIL released), writes the statistics and trace files when named:
 * the statistics dict, or NULL with the exception a callback raised or keyer's error. */
PyObject *kp_job_run(kp_job *job, const char *stats_path, const char *trace_path);

/* Destroys the session (GIL released) and drops a kept exception. */
void kp_job_clear(kp_job *job);

/* The session's statistics so far as a dict (keyer_session_report and each stream's). */
PyObject *kp_report_dict(keyer_session *s);

/* The analysers of one stream (detect.c): faces (boxes, ids, keypoints, optional mesh) and
 * body pose, as the main job's --detect makes them. */
typedef struct kp_analysers kp_analysers;

typedef struct kp_analysers_params {
    int faces, pose;       /* which */
    int mesh;              /* the 468-point face mesh (landmarks) */
    int full_range;        /* full-range face detector */
    int pose_model;        /* keyer_pose_model */
    int max_faces;         /* 1..KEYER_FACES_MAX */
    int session_detect;    /* faces come from a session's detector (kp_analysers_track) */
    keyer_backend backend;
    int threads;
} kp_analysers_params;

/* Creates the analysers. */
keyer_status kp_analysers_create(const kp_analysers_params *p, kp_analysers **out,
                                 keyer_error *err);
void kp_analysers_destroy(kp_analysers **a);

/* Analyses one host frame (keeps the results until the next call). Without the GIL. */
keyer_status kp_analysers_run(kp_analysers *a, const keyer_frame *frame, keyer_error *err);

/* Tracks the detections of a session's detector for a @p width x @p height frame. */
keyer_status kp_analysers_track(kp_analysers *a, const keyer_detection *dets, int n, int width,
                                int height, keyer_error *err);

/* The last results as the raw dict keyer.Detections is made from (with the GIL): stream,
 * index, width, height, time (when the frame has one), faces (a list of (id, score, detected,
 * box, keypoints, presence, landmarks) when faces are analysed), pose ((presence, landmarks,
 * world) or None, when the pose is analysed). @p frame gives the size and time. */
PyObject *kp_analysers_result(kp_analysers *a, int stream, int64_t index,
                              const keyer_frame *frame);

/* Forgets the tracked faces and pose. */
void kp_analysers_reset(kp_analysers *a);

/* Parses what=("faces", "pose", "faces:full", "pose:heavy", "mesh") into @p p. */
int kp_analysers_parse(PyObject *what, kp_analysers_params *p);

#endif
