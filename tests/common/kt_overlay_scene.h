/*
 * Deterministic random overlay scenes for the overlay tests and bench/bench_overlay.c: boxes,
 * segments, curves, dots, text labels and a kNN graph of random points (lines between the
 * neighbours, a dot on each point), spread over a w x h frame.
 */
#ifndef KT_OVERLAY_SCENE_H
#define KT_OVERLAY_SCENE_H

#include <stdint.h>

#include "keyer/overlay.h"

typedef struct kt_scene {
    int boxes, segments, curves, dots, labels, graph_points;
} kt_scene;

/** The scene of issue 8's benchmark: 100 boxes, 500 segments, 100 curves, 1,000-point k=5 graph. */
#define KT_SCENE_ACCEPTANCE {100, 500, 100, 0, 0, 1000}

/**
 * Clears @p ov and fills it with the scene @p sc for a @p w x @p h frame, the same primitives
 * for the same @p seed. Errors: those of the keyer_overlay_add_* calls (capacity), and
 * OUT_OF_MEMORY.
 */
keyer_status kt_overlay_scene(keyer_overlay *ov, const kt_scene *sc, int w, int h, uint32_t seed,
                              keyer_error *err);

/** The scenes' generator: a linear congruential step of @p state, uniform in [0, 1). Also for
 * tests that need the same random pixels as before the scene code was shared. */
float kt_scene_uniform(uint32_t *state);

#endif
