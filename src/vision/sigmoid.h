/*
 * The logistic function over a model's mask logits (internal, prefix kr_): some models (the
 * pose models) output their person mask as logits; the refinement takes probabilities.
 * Each backend keeps its own expression: expf on the CPU, the __expf intrinsic on CUDA, so
 * that each path's output stays what it was.
 */
#ifndef KEYER_VISION_SIGMOID_H
#define KEYER_VISION_SIGMOID_H

#include <stddef.h>

#include "keyer/status.h"

/** dst[k] = 1 / (1 + expf(-src[k * stride])) for k < @p count, in host memory (@p stride
 *  floats between the values read; dst may equal src when stride is 1). Never fails. */
void kr_sigmoid_cpu(float *dst, const float *src, size_t count, size_t stride);

/**
 * dst[i] = 1 / (1 + __expf(-src[i])) for @p count floats in the memory of CUDA device
 * @p ordinal, queued on @p stream (a CUDA stream; the host does not wait). dst may equal src.
 * Errors: INVALID_ARGUMENT (NULL pointer), UNSUPPORTED (keyer built without CUDA), DEVICE.
 */
keyer_status kr_sigmoid_cuda(int ordinal, float *dst, const float *src, size_t count,
                             void *stream, keyer_error *err);

#endif
