/*
 * The automatic choice between the selfie model and people mode (internal, prefix kr_), per
 * stream: the keying model the main job picks by itself (no model given) is a selfie model,
 * made for one person near the camera; on footage where no one is near (street scenes, people
 * 10-30 m away) it keys noise, and people mode (keyer/people.h) keys the people. The switch
 * watches the selfie model's mask of every frame: its largest connected region of cells at or
 * above 0.5 (4-neighbours) is the nearest person. When that region is under @c enter of the
 * mask's cells for @c enter_frames frames in a row, the stream goes to people mode; when it is
 * at least @c leave (larger than enter: hysteresis) for @c leave_frames frames in a row, it
 * goes back to the selfie model. A stream starts with the selfie model, so a clip with someone
 * near the camera from its first frame never leaves it.
 *
 *   kr_people_switch *sw = NULL;
 *   kr_people_switch_params p = kr_people_switch_params_defaults();
 *   if (kr_people_switch_create(&p, 256, 256, &sw, &err)) ...;
 *   for each frame: people = kr_people_switch_update(sw, selfie_mask);
 *   kr_people_switch_destroy(&sw);
 *
 * The region is found by runs (each row cut into runs of cells at or above 0.5, runs of
 * neighbouring rows sharing a column joined by union-find) on the mask packed into bits, one
 * bit a cell: on CUDA the bits are packed on the device (kr_people_switch_pack_cuda) and only
 * they come down.
 *
 * Everything is allocated at create; update allocates nothing. One object per stream, one
 * thread at a time; the pack functions need no object.
 */
#ifndef KEYER_VISION_PEOPLE_SWITCH_H
#define KEYER_VISION_PEOPLE_SWITCH_H

#include <stdint.h>

#include "keyer/status.h"

typedef struct kr_people_switch_params {
    float enter;      /* largest region under this fraction of the mask: no one large (0.08;
                       * the selfie model keys blobs of up to 5.3% of its mask on vtest.avi,
                       * a portrait near the camera 35-87%) */
    float leave;      /* largest region at least this fraction: someone large (0.15) */
    int enter_frames; /* frames in a row with no one large before people mode, 1..1000 (5) */
    int leave_frames; /* frames in a row with someone large before the selfie model again,
                       * 1..1000 (15) */
} kr_people_switch_params;

/* The defaults documented in kr_people_switch_params. */
kr_people_switch_params kr_people_switch_params_defaults(void);

typedef struct kr_people_switch kr_people_switch;

/*
 * A switch for masks of @p w x @p h cells, in selfie mode. Errors: INVALID_ARGUMENT (a
 * parameter out of range: 0 < enter <= leave <= 1, frames 1..1000, sizes 1..4096),
 * OUT_OF_MEMORY.
 */
keyer_status kr_people_switch_create(const kr_people_switch_params *p, int w, int h,
                                     kr_people_switch **out, keyer_error *err);

/* Frees it; accepts NULL; sets *sw NULL. */
void kr_people_switch_destroy(kr_people_switch **sw);

/*
 * One frame: @p mask (w x h probabilities, row-major, as made) is this frame's selfie mask.
 * Returns 1 when the frame is to be keyed in people mode, 0 for the selfie model's mask.
 */
int kr_people_switch_update(kr_people_switch *sw, const float *mask);

/*
 * As kr_people_switch_update(), on the mask packed into bits (kr_people_switch_pack: as the
 * CUDA masks come down, 32 times smaller than the floats). The same result on the same mask.
 */
int kr_people_switch_update_bits(kr_people_switch *sw, const uint32_t *bits);

/* Words (32 bits) of one packed row of @p w cells: (w + 31) / 32. */
int kr_people_switch_row_words(int w);

/*
 * Packs a mask of @p w x @p h probabilities (row-major) into bits: row y is the
 * kr_people_switch_row_words(w) words from bits + y * that, cell x bit x % 32 of its word x / 32
 * (least significant first), 1 where the cell is at or above 0.5 (NaN: 0), 0 past w.
 */
void kr_people_switch_pack(const float *mask, int w, int h, uint32_t *bits);

/*
 * The same for @p n masks (1..64) in the memory of CUDA device @p ordinal (masks[i]: w x h
 * floats, w and h 1..4096), into @p bits there (mask i from bits + i * h * row words), queued
 * on @p stream: the same bits as kr_people_switch_pack on the same floats. Errors:
 * INVALID_ARGUMENT, UNSUPPORTED (built without CUDA), DEVICE.
 */
keyer_status kr_people_switch_pack_cuda(int ordinal, const float *const *masks, int n, int w,
                                        int h, uint32_t *bits, void *stream, keyer_error *err);

/* What the last update returned: 1 in people mode (0 before the first update). */
int kr_people_switch_people(const kr_people_switch *sw);

/* The largest region of the last mask, as a fraction of its cells. */
float kr_people_switch_largest(const kr_people_switch *sw);

/* Frames given to update so far, and how many of them were in people mode. */
void kr_people_switch_counts(const kr_people_switch *sw, int64_t *frames, int64_t *people);

#endif
