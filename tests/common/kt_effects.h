/*
 * Helpers for the frame-effects tests (no cmocka): frames with odd strides, deterministic
 * random content, and straightforward double-precision reference implementations written
 * from the definitions in keyer/effects.h, independent of src/render/.
 */
#ifndef KEYER_KT_EFFECTS_H
#define KEYER_KT_EFFECTS_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/effects.h"
#include "keyer/frame.h"
#include "testutil.h" /* kt_rng */

/* The next number of the generator (xorshift32; state 0 is replaced by a fixed constant). */
uint32_t kt_next(kt_rng *r);

/* A host frame whose rows are `pad` bytes longer than needed (pad keeps sample alignment),
 * so strides are not multiples of 16. NULL on failure. */
keyer_frame *kt_frame_padded(keyer_pixel_format fmt, int w, int h, int pad);

/* Fills every sample with random codes (P010: 10-bit codes in the high bits). `smooth` > 0
 * makes a smooth random field plus noise instead of white noise. */
void kt_fill_random(keyer_frame *f, uint32_t seed, int smooth);

/* ---- reference colour and sampling, double precision ------------------------------------ */

/* Kr and Kb of the frame's colour matrix (unspecified: BT.601 below 720 rows, else BT.709). */
void kt_kr_kb(const keyer_frame *f, double *kr, double *kb);

/* 1 for the YUV formats (NV12, P010, YUV420P). */
int kt_is_yuv(keyer_pixel_format f);

/* Code of component c (0..2) at sample (x, y) of its own plane. */
double kt_code(const keyer_frame *f, int c, int x, int y);

/* Bilinear sample of component c at index coordinates of its own plane (edges clamped). */
double kt_bilinear(const keyer_frame *f, int c, double x, double y);

/* Codes at luma index coordinates (x, y): chroma sited with even luma columns, between rows. */
void kt_sample(const keyer_frame *f, double x, double y, double c[3]);

/* Codes to RGB in [0,1], clamped: BT.601/709/2020 equations, limited or full range. */
void kt_rgb(const keyer_frame *f, const double c[3], double rgb[3]);

/* Reference preparation of one frame into out (th x tw x 3, NHWC, float), from the
 * definitions: ROI (NULL: whole frame), stretch or letterbox, centre mapping, area
 * supersampling when a tensor pixel covers more than 2 frame pixels along an axis. */
void kt_ref_prepare(const keyer_frame *f, const keyer_roi *roi, int tw, int th,
                    int letterbox, int area, double scale, double offset,
                    double pad, float *out);

/* Largest |a - b| over n floats. */
double kt_maxdiff(const float *a, const float *b, size_t n, size_t *where);

#endif
