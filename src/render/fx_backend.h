/*
 * Frame effects: the boundary between the public functions (src/vision/prepare.c,
 * src/render/refine.c, src/render/composite.c), which validate their arguments and resolve
 * every geometric and colour detail into the job structs below, and the backends (CPU in
 * cpu/, CUDA in cuda/), which only execute jobs. Both backends compute each sample with the
 * functions of fx_math.h.
 *
 * A backend is a table of function pointers (kr_fx_backend). Each slot takes the object's
 * backend-private state (created on first use, so a CPU-only user never touches CUDA) and a
 * job. Host memory uses kr_fx_cpu; CUDA memory uses kr_fx_cuda when keyer is built with CUDA.
 */
#ifndef KEYER_RENDER_FX_BACKEND_H
#define KEYER_RENDER_FX_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/alloc.h"
#include "keyer/effects.h"
#include "keyer/frame.h"
#include "keyer/status.h"
#include "render/fx_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- jobs ------------------------------------------------------------------------------ */

/** Fill a batched tensor. */
typedef struct kr_prepare_job {
    const kr_prepare_item *items; /* count resolved frames (host memory) */
    int count;
    int max_count;     /* most frames a call of this preparation gets (its max_batch): the
                        * CUDA backend sizes its copy of the items for it once, so that a
                        * larger batch later allocates nothing mid-stream */
    int width, height; /* tensor W, H */
    int dtype;         /* KEYER_DTYPE_F32 or _F16 */
    int layout;        /* keyer_tensor_layout */
    float scale[3], offset[3]; /* per tensor channel: value = rgb[src[c]] * scale + offset */
    float pad_value[3];        /* the pad colour normalised */
    int src[3];                /* the rgb channel each tensor channel takes (BGR: 2, 1, 0) */
    void *tensor;      /* in the frames' memory */
    void *stream;
    int device;        /* CUDA device of the frames (CUDA memory only) */
} kr_prepare_job;

/** Most taps of the composite's Gaussian (radius 3 sigma with sigma < 2 grid cells). */
#define KR_BLUR_MAX_TAPS 13

/** Refine one frame's mask into a matte. */
typedef struct kr_refine_job {
    kr_src guide;          /* the frame */
    int width, height;     /* frame size */
    const float *mask;     /* first row of the mask */
    ptrdiff_t mask_stride; /* bytes */
    int mask_width, mask_height;
    float region[4];       /* x, y, w, h: part of the mask covering the frame (continuous) */
    int gw, gh;            /* working grid: round(region w, h) */
    int region_is_mask;    /* 1: region is exactly the whole mask and gw, gh its size */
    kr_prepare_item grid;  /* area sampling of the frame onto the grid (for the luma guide) */
    int need_luma;         /* the grid luma is needed (guided upsampling or temporal) */
    int upsample;          /* keyer_upsample */
    int radius;            /* guided window radius, grid cells */
    float eps;
    int threshold;
    float lo, inv_range;   /* smoothstep from lo to lo + 1 / inv_range */
    int dilate, feather;
    kr_temporal temporal;  /* mode 0: off */
    float scene_cut;
    int stream_id;
    int history_valid;     /* 0: the stream's history must not be used (and is rewritten) */
    uint8_t *out;          /* alpha plane */
    ptrdiff_t out_stride;
    int out_f32;           /* 1: GRAYF32 out, else GRAY8 */
    void *stream;
    int device;            /* CUDA device of the frames (CUDA memory only) */
} kr_refine_job;

/** Composite one frame. */
typedef struct kr_composite_job {
    int mode;              /* keyer_composite_mode */
    kr_src src;            /* the frame */
    const uint8_t *src_alpha_chan; /* RGBA frames: their alpha bytes (step 4), else NULL */
    ptrdiff_t src_alpha_stride;
    int width, height;
    const uint8_t *alpha;  /* matte plane */
    ptrdiff_t alpha_stride;
    int alpha_f32;
    /* output */
    int out_kind;          /* see KR_OUT_* */
    kr_src dst;            /* same-format outputs: the output's channels (writable) */
    uint8_t *dst_alpha_chan; /* RGBA outputs: their alpha bytes (step 4) */
    uint8_t *out;          /* GRAY8/GRAYF32/RGBA outputs: plane 0 */
    ptrdiff_t out_stride;
    int dither;
    float bg_codes[3];     /* COLOR, GREEN_SCREEN: background in the frame's codes */
    /* IMAGE: the background and how it covers the frame (tensor = frame size, stretch) */
    kr_prepare_item bg;
    int bg_dirty;          /* 1: the converted background must be rebuilt */
    int bg_direct;         /* 1: the background has the frame's format, size and colour: blend
                              bg.src directly, no conversion */
    /* BLUR */
    int factor;            /* grid cell = factor x factor frame pixels (power of two >= 2) */
    int gw, gh;            /* grid size */
    int taps;              /* Gaussian taps (odd), centre at taps / 2 */
    float kernel[KR_BLUR_MAX_TAPS];
    void *stream;
    int device;            /* CUDA device of the frames (CUDA memory only) */
} kr_composite_job;

enum {
    KR_OUT_SAME = 0, /* the frame's format */
    KR_OUT_RGBA,     /* RGBA 8-bit */
    KR_OUT_GRAY8,
    KR_OUT_GRAYF32,
};

/* ---- backends ------------------------------------------------------------------------- */

/** Settings a backend's state is created with. */
typedef struct kr_fx_config {
    int threads;                  /* CPU threads, 0: one per core */
    const keyer_allocator *allocator;
    int max_streams;              /* refine: number of temporal histories */
} kr_fx_config;

typedef struct kr_fx_backend {
    const char *name;
    /** Creates the state an object keeps for this backend (scratch, threads). Required. */
    keyer_status (*state_create)(const kr_fx_config *config, void **state, keyer_error *err);
    /** Frees a state; accepts NULL. Required. */
    void (*state_destroy)(void *state);
    /** Fills a tensor. Required. */
    keyer_status (*prepare)(void *state, const kr_prepare_job *job, keyer_error *err);
    /** Refines a mask. Required. */
    keyer_status (*refine)(void *state, const kr_refine_job *job, keyer_error *err);
    /** Composites. Required. */
    keyer_status (*composite)(void *state, const kr_composite_job *job, keyer_error *err);
} kr_fx_backend;

/** The CPU backend (src/render/cpu/). */
extern const kr_fx_backend kr_fx_cpu;
/** The CUDA backend (src/render/cuda/); defined only when keyer is built with CUDA. */
extern const kr_fx_backend kr_fx_cuda;

/** The backend for @p memory, or NULL when keyer was built without it (fx_backends.c). */
const kr_fx_backend *kr_fx_backend_for(keyer_memory_type memory);

/** Per-backend state slots of an effect object, indexed by keyer_memory_type. */
#define KR_FX_BACKENDS 2

/** Gets (creating on first use) the state of the backend for @p memory in @p slots
 *  (fx_backends.c). Errors: UNSUPPORTED (no such backend in this build), whatever
 *  state_create returns. */
keyer_status kr_fx_state(void *slots[KR_FX_BACKENDS], keyer_memory_type memory,
                         const kr_fx_config *config, const kr_fx_backend **backend,
                         void **state, keyer_error *err);

/** Destroys every state in @p slots. */
void kr_fx_states_destroy(void *slots[KR_FX_BACKENDS]);

/* ---- shared resolution helpers (src/render/fx_common.c) -------------------------------- */

/** Fills @p s for frame @p f (NV12, P010, YUV420P, RGB24, RGBA): channels, conversion to
 *  and from RGB for the frame's matrix and range. Errors: INVALID_ARGUMENT (format). */
keyer_status kr_fx_src_init(kr_src *s, const keyer_frame *f, keyer_error *err);

/** 1 if @p format is one of the five frame formats the effects read. */
int kr_fx_format_supported(keyer_pixel_format format);

/** Checks that every frame is valid and in @p memory. @p what names the argument. */
keyer_status kr_fx_check_frame(const keyer_frame *f, const char *what, keyer_error *err);

/** Resolves the sampling of @p roi (NULL: whole frame) of a w x h frame into a tensor
 *  tw x th: fills it->m, nx, ny, x0..y1 and @p geometry (may be NULL).
 *  Errors: INVALID_ARGUMENT (non-finite or degenerate ROI). */
keyer_status kr_fx_resolve_sampling(int w, int h, const keyer_roi *roi, int tw, int th,
                                    int letterbox, int area, kr_prepare_item *it,
                                    keyer_prepare_geometry *geometry, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif
