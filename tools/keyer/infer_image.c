#include "infer_image.h"

#include "keyer/effects.h"
#include "keyer/frame.h"
#include "keyer/image.h"
#include "keyer/registry.h"

keyer_status keyer_infer_image_tensor(const char *image_path, const char *model_name,
                                      const keyer_tensor_info *info, float *dst,
                                      keyer_error *err)
{
    if (info->rank != 4 || info->dims[3] != 3 || info->dtype != KEYER_DTYPE_F32)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "--image needs a [1,H,W,3] float32 model input (use --input-tensor)");
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = info->dims[2];
    pp.height = info->dims[1];
    pp.fit = KEYER_FIT_STRETCH;
    const keyer_model_entry *e = keyer_registry_find(model_name);
    if (e) {
        pp.scale = e->input_scale;
        pp.offset = e->input_offset;
    }
    keyer_frame *frame = NULL;
    keyer_prepare *prep = NULL;
    keyer_status st;
    if ((st = keyer_frame_create(&frame, err)) ||
        (st = keyer_image_read(image_path, KEYER_PIXEL_FORMAT_RGB24, frame, err)) ||
        (st = keyer_prepare_create(&pp, &prep, err)))
        goto done;
    const keyer_frame *frames[1] = {frame};
    st = keyer_prepare_run(prep, frames, NULL, 1, dst, NULL, err);
done:
    keyer_prepare_destroy(&prep);
    keyer_frame_destroy(&frame);
    return st;
}
