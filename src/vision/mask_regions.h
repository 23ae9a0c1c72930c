/*
 * Connected regions of a probability mask (internal, prefix kr_): keeping a mask's regions of
 * at least a given size and dropping the rest, for masks in a crop's grid (people.c: the
 * fallback segmentation of a person's crop keeps its person-sized regions).
 *
 *   uint8_t *seen = malloc(w * h); int32_t *list = malloc(w * h * sizeof(int32_t));
 *   long kept = kr_mask_keep_regions(mask, w, h, min_cells, seen, list);
 *
 * Allocates nothing; the caller's scratch is overwritten. Thread-safe on distinct buffers.
 */
#ifndef KEYER_VISION_MASK_REGIONS_H
#define KEYER_VISION_MASK_REGIONS_H

#include <stdint.h>

/*
 * In @p m (w x h probabilities, row-major): every 4-connected region of cells at or above 0.5
 * with fewer than @p min_cells cells, and every cell below 0.5 (NaN included), set to 0; the
 * rest kept as they are. @p seen (w * h bytes) and @p list (w * h int32) are scratch. Returns
 * the number of cells kept. w, h >= 1 and w * h < 2^31.
 */
long kr_mask_keep_regions(float *m, int w, int h, long min_cells, uint8_t *seen, int32_t *list);

#endif
