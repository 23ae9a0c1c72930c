/*
 * Internal to the vision analysers (faces.c, pose.c, people.c): one image model with its
 * runtime and input preparation, run on one region of a frame at a time, built on the public
 * API (keyer/nn.h, keyer/effects.h, keyer/registry.h) and, for a CUDA stream shared by the
 * preparation and the runtime, core/device.h.
 *
 * On host backends the model input is prepared straight into the runtime's input tensor and
 * the outputs are read in place; on device backends host frames are prepared into a host
 * staging buffer, CUDA frames straight into the runtime's input on the model's own stream,
 * and the outputs come down into host staging buffers allocated at open. Nothing is
 * allocated per run.
 */
#ifndef KEYER_VISION_VMODEL_H
#define KEYER_VISION_VMODEL_H

#include <stddef.h>

#include "keyer/effects.h"
#include "keyer/nn.h"
#include "keyer/status.h"

#define KR_VMODEL_MAX_OUTPUTS 8

typedef struct kr_vmodel {
    keyer_model *model;
    keyer_runtime *rt;
    keyer_prepare *prep;
    const char *what;         /* label for messages ("face detector", ...), static */
    char path[512];           /* the model file */
    int width, height;        /* input tensor size */
    int host;                 /* 1: the runtime's tensors are in host memory */
    void *stream;             /* device backends: the CUDA stream of the preparation and runtime */
    int device;               /* device backends: the CUDA ordinal */
    float *in_staging;        /* device backends: the prepared input */
    int n_outputs;
    size_t out_count[KR_VMODEL_MAX_OUTPUTS];     /* elements of each output (batch 1) */
    keyer_tensor_info out_info[KR_VMODEL_MAX_OUTPUTS];
    float *out_staging[KR_VMODEL_MAX_OUTPUTS];   /* device backends */
    const float *out[KR_VMODEL_MAX_OUTPUTS];     /* host view of each output after a run */
} kr_vmodel;

/* How to open a model. */
typedef struct kr_vmodel_spec {
    const char *what;         /* label for messages, static */
    const char *name_or_path; /* registry name or file path */
    keyer_backend backend;
    int threads;
    const keyer_logger *logger;
    int fit;                  /* keyer_fit */
    float scale, offset;      /* tensor = rgb * scale + offset */
    int min_outputs;          /* the model must have at least this many outputs */
    int device;               /* CUDA ordinal of a CUDA backend (0 when left out) */
} kr_vmodel_spec;

/*
 * Loads the model, checks it has one [1,H,W,3] float input and at least min_outputs outputs,
 * creates a batch-1 runtime and a preparation stage. On failure everything is released and
 * *m is zeroed. Errors: those of keyer_registry_resolve, keyer_model_load_file,
 * keyer_runtime_create, keyer_prepare_create; BAD_DATA for a model of the wrong shape.
 */
keyer_status kr_vmodel_open(kr_vmodel *m, const kr_vmodel_spec *spec, keyer_error *err);

/* Releases everything (accepts a zeroed or half-opened struct) and zeroes it. */
void kr_vmodel_close(kr_vmodel *m);

/*
 * Prepares @p roi of @p frame (NULL: the whole frame) into the input, runs the model and
 * makes m->out[] point at host copies of the outputs. @p geo receives where the region went.
 * @p frame is a host frame, or a CUDA frame (of the model's device, ready for any stream)
 * when the runtime is on CUDA. Errors: UNSUPPORTED (a CUDA frame for a host runtime); those
 * of keyer_prepare_run and keyer_runtime_run.
 */
keyer_status kr_vmodel_run(kr_vmodel *m, const keyer_frame *frame, const keyer_roi *roi,
                           keyer_prepare_geometry *geo, keyer_error *err);

/* Index of the first output with exactly @p count elements at or after @p from, or -1. */
int kr_vmodel_find_output(const kr_vmodel *m, size_t count, int from);

/* Maps tensor point (tx, ty) to frame pixels through @p geo. */
static inline void kr_geo_apply(const keyer_prepare_geometry *geo, float tx, float ty, float *fx,
                                float *fy)
{
    *fx = geo->matrix[0] * tx + geo->matrix[1] * ty + geo->matrix[2];
    *fy = geo->matrix[3] * tx + geo->matrix[4] * ty + geo->matrix[5];
}

/* Inverse of @p geo's affine map into @p inv (6 floats); 0 when singular. */
int kr_geo_invert(const keyer_prepare_geometry *geo, float inv[6]);

#endif /* KEYER_VISION_VMODEL_H */
