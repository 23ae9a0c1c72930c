/* The real frames that the half-precision measurements run on (tests/unit/test_precision_gpu.c,
 * bench/bench_nn_half_layers.c) and the preparation of a shipped model's input that they share.
 * Errors are returned, never failed, so that the bench (no cmocka test running) links these
 * too. */
#ifndef KEYER_KT_FRAMES_H
#define KEYER_KT_FRAMES_H

#include "keyer/effects.h"
#include "keyer/frame.h"
#include "keyer/registry.h"
#include "keyer/status.h"

/* Preparation parameters for registry entry @p e at its model input's @p width x @p height:
 * the entry's fit (letterbox or stretch), input_scale and input_offset, the defaults of
 * keyer_prepare_params_defaults() otherwise (no mean/std standardisation, RGB order). */
keyer_prepare_params kt_entry_prepare_params(const keyer_model_entry *e, int width, int height);

/* Called by kt_sample_frames with each frame read: @p f (the callee owns it: destroys it or
 * keeps it), the test-data file it comes from @p name, and its index in that clip @p index
 * (-1 for a photo). Returns 0 to go on, 1 to stop reading (enough frames), -1 on an error of
 * its own (it prints or records its message). */
typedef int (*kt_frame_fn)(keyer_frame *f, const char *name, int index, void *user);

/* Reads the test photos grace_hopper.jpg and messi5.jpg, then every @p step-th frame (frames
 * 0, step, 2 * step, ...) of the sample clips sample_hevc.mp4 and sample_hevc10.mp4 (decoded on
 * the CPU), from the test data (kt_data_path), as RGB24 host frames, and hands each to @p fn
 * with @p user, in that order, until the clips end or fn stops. Returns 0 when done or stopped;
 * -1 when a file cannot be read or decoded (the reason, naming the file, in @p err) or when fn
 * returned -1 (@p err untouched). */
int kt_sample_frames(int step, kt_frame_fn fn, void *user, keyer_error *err);

#endif
