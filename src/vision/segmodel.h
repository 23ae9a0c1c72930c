/*
 * A segmentation model for keying (internal, prefix kr_): the model loaded as its description
 * says (keyer/registry.h: a registry entry's, or the user's for their own file), its input and
 * mask output found and checked, and the input preparation and mask reading resolved once.
 * The main job's inference stage (pipeline/infer.c) and the keying object (keying.c) use it.
 *
 * The mask output is read per cell from @c mask_c channels (interleaved, NHWC, as keyer's
 * graphs lay outputs out, or planes when @c mask_planar) by kr_segmask_cpu / kr_segmask_cuda.
 */
#ifndef KEYER_VISION_SEGMODEL_H
#define KEYER_VISION_SEGMODEL_H

#include <stddef.h>

#include "keyer/nn.h"
#include "keyer/registry.h"
#include "keyer/status.h"

typedef struct kr_segmodel {
    keyer_model *model;             /* owned: take it (set NULL) or kr_segmodel_close */
    const keyer_model_entry *entry; /* the registry's entry, or NULL for a user's file */
    keyer_model_desc desc;          /* what was used */
    int tflite;                     /* the file is TFLite (else ONNX) */
    int output;                     /* index of the mask output */
    int in_w, in_h;                 /* the input (float [1,H,W,3] in the runtime) */
    int mask_w, mask_h, mask_c;     /* the mask output: cells and channels per cell */
    int mask_planar;                /* 1: the output's channels are planes ([1,C,H,W], an
                                     * ONNX output the import left in the file's layout) */
    keyer_mask_kind kind;
    int channel;                    /* the channel read (CLASSES: the person's class) */
} kr_segmodel;

/*
 * Loads @p name_or_path (a registry name or a .tflite / .onnx file) and checks it as a keying
 * model: one float [1,H,W,3] image input (named desc->input when given), the mask output
 * (desc->output by name, else desc->output_index) of shape [1,H,W] or [1,H,W,C], with
 * person_class < C for CLASSES. @p desc: NULL for the registry's description of a shipped
 * model (a file outside the registry then gets keyer_model_desc_defaults(), NHWC for a
 * TFLite file); the file's declared input must have its 3 channels where desc->layout says
 * (a TFLite file described as NCHW is refused). desc->width and height fix an ONNX model's
 * dynamic input size (and must match a static one). A description
 * given for a registry name replaces the registry's. A registry model without a person mask
 * (face detection) is refused. On failure *m is zeroed and owns nothing.
 * Errors: those of keyer_registry_resolve and model loading; INVALID_ARGUMENT (a bad
 * description, no mask, an unknown input or output name: the message lists the model's, a
 * layout the file's input does not have),
 * UNSUPPORTED (the model is not an image-to-mask model: the message says what it has).
 */
keyer_status kr_segmodel_open(kr_segmodel *m, const char *name_or_path,
                              const keyer_model_desc *desc, keyer_error *err);

/* Frees the model if still owned; zeroes *m. Accepts a zeroed struct. */
void kr_segmodel_close(kr_segmodel *m);

/* The preparation that makes its input (size, fit, normalisation, channel order). */
void kr_segmodel_prepare_params(const kr_segmodel *m, keyer_prepare_params *pp);

/*
 * The person mask, one float per cell in [0,1] (as the model gives it for PROBABILITY), from
 * @p cells cells of the mask output @p src with @p m->mask_c channels each, in host memory.
 * @p dst may equal @p src only when mask_c is 1. Never fails.
 */
void kr_segmask_cpu(const kr_segmodel *m, float *dst, const float *src, size_t cells);

/*
 * The same in the memory of CUDA device @p ordinal, queued on @p stream. Errors:
 * UNSUPPORTED (built without CUDA), DEVICE.
 */
keyer_status kr_segmask_cuda(const kr_segmodel *m, int ordinal, float *dst, const float *src,
                             size_t cells, void *stream, keyer_error *err);

#endif
