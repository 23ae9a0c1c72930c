/* keyer infer --image: a photo turned into a model input tensor with the public API. */
#ifndef KEYER_TOOLS_INFER_IMAGE_H
#define KEYER_TOOLS_INFER_IMAGE_H

#include "keyer/nn.h"
#include "keyer/status.h"

/**
 * Decodes @p image_path, stretches it to the NHWC float32 input described by @p info
 * (bilinear, area-filtered when shrinking more than 2x) and normalises it as the registry entry
 * @p model_name says (a file path or unknown name: [0,1]). Writes H*W*3 floats to @p dst.
 */
keyer_status keyer_infer_image_tensor(const char *image_path, const char *model_name,
                                      const keyer_tensor_info *info, float *dst,
                                      keyer_error *err);

#endif
