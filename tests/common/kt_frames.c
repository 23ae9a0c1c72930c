/* The sample frames and a shipped model's input preparation for the precision measurements
 * (kt_frames.h). */
#include "kt_frames.h"

#include <stddef.h>

#include "keyer/image.h"
#include "keyer/io.h"
#include "testutil.h"

keyer_prepare_params kt_entry_prepare_params(const keyer_model_entry *e, int width, int height)
{
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = width;
    pp.height = height;
    pp.fit = e->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp.scale = e->input_scale;
    pp.offset = e->input_offset;
    return pp;
}

/* Every @p step-th frame of the clip @p name to @p fn: 0 at its end, 1 when fn stops, -1 on an
 * error. */
static int clip_frames(const char *name, int step, kt_frame_fn fn, void *user, keyer_error *err)
{
    char path[1024];
    kt_data_path(path, sizeof(path), name);
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    keyer_reader *r = NULL;
    if (keyer_reader_open(path, &rp, &r, err))
        return -1;
    int rc = 0;
    for (int i = 0; !rc; i++) {
        keyer_frame *f = NULL;
        if (keyer_frame_create(&f, err)) {
            rc = -1;
            break;
        }
        keyer_status st = keyer_reader_read(r, f, err);
        if (st == KEYER_STATUS_END) {
            keyer_frame_destroy(&f);
            break;
        }
        if (st) {
            rc = -1;
            keyer_frame_destroy(&f);
        } else if (i % step) {
            keyer_frame_destroy(&f);
        } else {
            rc = fn(f, name, i, user);
        }
    }
    keyer_reader_destroy(&r);
    return rc;
}

int kt_sample_frames(int step, kt_frame_fn fn, void *user, keyer_error *err)
{
    static const char *const photos[] = {"grace_hopper.jpg", "messi5.jpg"};
    static const char *const clips[] = {"sample_hevc.mp4", "sample_hevc10.mp4"};
    char path[1024];
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof(photos) / sizeof(photos[0]); i++) {
        keyer_frame *f = NULL;
        kt_data_path(path, sizeof(path), photos[i]);
        if (keyer_frame_create(&f, err) ||
            keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, f, err)) {
            keyer_frame_destroy(&f);
            return -1;
        }
        rc = fn(f, photos[i], -1, user);
    }
    for (size_t c = 0; !rc && c < sizeof(clips) / sizeof(clips[0]); c++)
        rc = clip_frames(clips[c], step, fn, user, err);
    return rc < 0 ? -1 : 0;
}
