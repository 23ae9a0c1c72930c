/*
 * kNN graph tests' helpers: the oracle (every pair compared, the graph's rules written once
 * more in the plainest way: the O(n^2) implementation the grid replaced) and the point sets
 * the CPU and CUDA graphs are checked on.
 */
#ifndef KT_KNN_H
#define KT_KNN_H

#include <stdint.h>

#include "keyer/overlay.h"

typedef struct kt_knn_oracle kt_knn_oracle;

/** An oracle graph for up to @p max_points points (NULL when out of memory). */
kt_knn_oracle *kt_knn_oracle_create(const keyer_knn_params *p, int max_points);
void kt_knn_oracle_destroy(kt_knn_oracle **o);
/** One frame, as keyer_knn_graph_update (ids distinct); returns the number of edges written
 *  (all of them: @p edges holds max_points * max_degree). */
int kt_knn_oracle_update(kt_knn_oracle *o, const uint32_t *ids, const float *xy, int n,
                         keyer_knn_edge *edges);

/** Kinds of point sets. */
typedef enum kt_knn_set {
    KT_KNN_UNIFORM = 0, /* uniform over a 1920 x 1080 frame */
    KT_KNN_CLUSTERED,   /* gaussian clusters of 20..200 points */
    KT_KNN_LATTICE,     /* integer lattice with spacing 4: exact ties everywhere */
    KT_KNN_DUPLICATES,  /* uniform, each position used by 1..4 points */
    KT_KNN_MIXED,       /* uniform with NaN / infinite points, a far outlier, a collinear row */
    KT_KNN_DENSE,       /* 95% on 64 spots of a 0.5 px raster in a 4 x 4 px square, 5% uniform:
                           a few cells of the grid hold nearly every point, each spot many exact
                           duplicates (the uniform grid's worst case) */
    KT_KNN_SETS
} kt_knn_set;

/** Fills n points of set @p kind (seed: reproducible) and distinct ids (shuffled). */
void kt_knn_points(kt_knn_set kind, int n, uint32_t seed, uint32_t *ids, float *xy);
const char *kt_knn_set_name(kt_knn_set kind);

/** Moves every finite point by a small random step (frame-to-frame motion; lattice and dense
 *  points by whole raster steps, a few of them per frame, so ties and duplicates stay exact). */
void kt_knn_jitter(kt_knn_set kind, int n, uint32_t seed, float *xy);

/**
 * Face-mesh landmarks of the test photos (grace_hopper.jpg, messi5.jpg: 468 points per face,
 * found with keyer_faces), copied as a crowd of @p faces faces on a grid over a 3840 x 2160
 * frame at scales 0.3..1 (clusters of 468 points). Writes faces * 468 points (ids distinct).
 * Returns 0, or -1 when the models or photos are missing or no face was found.
 */
int kt_knn_face_points(int faces, uint32_t *ids, float *xy);

/**
 * The face crowd of the tests: kt_knn_face_points() of @p faces faces into new arrays *@p ids
 * and *@p xy (faces * 468 points; the caller frees both with free()). For a running cmocka
 * test: fails it when out of memory, and skips it (nothing left allocated) when the face
 * models or test photos are missing or no face was found.
 */
void kt_knn_face_crowd(int faces, uint32_t **ids, float **xy);

/** Index of the first differing edge of two edge lists (-1: equal, counts included). */
int kt_knn_first_difference(const keyer_knn_edge *a, int na, const keyer_knn_edge *b, int nb);

#endif
