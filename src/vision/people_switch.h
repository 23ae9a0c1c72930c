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
 * Everything is allocated at create; update allocates nothing. One object per stream, one
 * thread at a time.
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

/* What the last update returned: 1 in people mode (0 before the first update). */
int kr_people_switch_people(const kr_people_switch *sw);

/* The largest region of the last mask, as a fraction of its cells. */
float kr_people_switch_largest(const kr_people_switch *sw);

/* Frames given to update so far, and how many of them were in people mode. */
void kr_people_switch_counts(const kr_people_switch *sw, int64_t *frames, int64_t *people);

#endif
