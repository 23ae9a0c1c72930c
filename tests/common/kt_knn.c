#include "kt_knn.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/faces.h"
#include "keyer/image.h"
#include "testutil.h"

/* ---- the oracle: keyer's kNN graph before the grid (every pair compared) ---------------- */

typedef struct oracle_cand {
    keyer_knn_edge e;
    int ia, ib;
    float len;
} oracle_cand;

typedef struct oracle_id {
    uint32_t id;
    int index;
} oracle_id;

struct kt_knn_oracle {
    keyer_knn_params p;
    keyer_knn_edge *prev;
    int n_prev;
    float *kth_scratch, *kth;
    int *degree, *order, *nbr;
    oracle_cand *cand;
    oracle_id *by_id;
};

void kt_knn_oracle_destroy(kt_knn_oracle **po)
{
    if (!po || !*po)
        return;
    kt_knn_oracle *g = *po;
    free(g->prev);
    free(g->kth_scratch);
    free(g->kth);
    free(g->degree);
    free(g->cand);
    free(g->order);
    free(g->nbr);
    free(g->by_id);
    free(g);
    *po = NULL;
}

kt_knn_oracle *kt_knn_oracle_create(const keyer_knn_params *p, int max_points)
{
    kt_knn_oracle *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->p = *p;
    size_t n = (size_t)max_points, max_edges = n * (size_t)p->max_degree;
    g->prev = malloc(max_edges * sizeof(keyer_knn_edge));
    g->kth_scratch = malloc((size_t)p->k * sizeof(float));
    g->kth = malloc(n * sizeof(float));
    g->degree = malloc(n * sizeof(int));
    g->cand = malloc(n * (size_t)p->k * sizeof(oracle_cand));
    g->order = malloc((n > (size_t)p->k ? n : (size_t)p->k) * sizeof(int));
    g->nbr = malloc(max_edges * sizeof(int));
    g->by_id = malloc(n * sizeof(oracle_id));
    if (!g->prev || !g->kth_scratch || !g->kth || !g->degree || !g->cand || !g->order ||
        !g->nbr || !g->by_id)
        kt_knn_oracle_destroy(&g);
    return g;
}

static float dist2(const keyer_knn_params *p, const uint32_t *ids, const float *xy, int i, int j)
{
    float dx = xy[2 * j] - xy[2 * i], dy = xy[2 * j + 1] - xy[2 * i + 1];
    if (i == j || ids[i] == ids[j] || (p->max_dy > 0 && fabsf(dy) > p->max_dy))
        return INFINITY;
    return dx * dx + dy * dy;
}

static int cmp_id(const void *a, const void *b)
{
    const oracle_id *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_cand(const void *a, const void *b)
{
    const oracle_cand *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->e.a != y->e.a)
        return x->e.a < y->e.a ? -1 : 1;
    return (x->e.b > y->e.b) - (x->e.b < y->e.b);
}

static int index_of(const kt_knn_oracle *g, int n, uint32_t id)
{
    oracle_id key = {id, 0};
    const oracle_id *hit = bsearch(&key, g->by_id, (size_t)n, sizeof(oracle_id), cmp_id);
    return hit ? hit->index : -1;
}

static int joined(const kt_knn_oracle *g, int ia, int ib)
{
    const int *nb = &g->nbr[(size_t)ia * (size_t)g->p.max_degree];
    for (int i = 0; i < g->degree[ia]; i++)
        if (nb[i] == ib)
            return 1;
    return 0;
}

static void join(kt_knn_oracle *g, int ia, int ib)
{
    size_t md = (size_t)g->p.max_degree;
    g->nbr[(size_t)ia * md + (size_t)g->degree[ia]++] = ib;
    g->nbr[(size_t)ib * md + (size_t)g->degree[ib]++] = ia;
}

int kt_knn_oracle_update(kt_knn_oracle *g, const uint32_t *ids, const float *xy, int nn,
                         keyer_knn_edge *edges)
{
    const keyer_knn_params *p = &g->p;
    int n_cand = 0, k = p->k;
    for (int i = 0; i < nn; i++) {
        float *best = g->kth_scratch;
        int *best_j = g->order, n_best = 0;
        for (int j = 0; j < nn; j++) {
            float d2 = dist2(p, ids, xy, i, j);
            if (!(d2 < INFINITY) || (n_best == k && !(d2 < best[k - 1])))
                continue;
            int at = n_best < k ? n_best++ : k - 1;
            while (at > 0 && best[at - 1] > d2) {
                best[at] = best[at - 1];
                best_j[at] = best_j[at - 1];
                at--;
            }
            best[at] = d2;
            best_j[at] = j;
        }
        g->kth[i] = n_best > 0 ? sqrtf(best[n_best - 1]) : INFINITY;
        for (int r = 0; r < n_best; r++) {
            int j = best_j[r];
            uint32_t a = ids[i], b = ids[j];
            oracle_cand c = {{a < b ? a : b, a < b ? b : a}, a < b ? i : j, a < b ? j : i,
                             sqrtf(best[r])};
            g->cand[n_cand++] = c;
        }
    }
    qsort(g->cand, (size_t)n_cand, sizeof(oracle_cand), cmp_cand);
    int n_unique = 0;
    for (int c = 0; c < n_cand; c++)
        if (n_unique == 0 || g->cand[n_unique - 1].e.a != g->cand[c].e.a ||
            g->cand[n_unique - 1].e.b != g->cand[c].e.b)
            g->cand[n_unique++] = g->cand[c];
    n_cand = n_unique;
    for (int i = 0; i < nn; i++) {
        g->by_id[i].id = ids[i];
        g->by_id[i].index = i;
    }
    qsort(g->by_id, (size_t)nn, sizeof(oracle_id), cmp_id);
    memset(g->degree, 0, (size_t)nn * sizeof(int));
    keyer_knn_edge *next = g->prev;
    int n_next = 0;
    for (int e = 0; e < g->n_prev; e++) {
        int ia = index_of(g, nn, g->prev[e].a), ib = index_of(g, nn, g->prev[e].b);
        if (ia < 0 || ib < 0 || joined(g, ia, ib))
            continue;
        float d = sqrtf(dist2(p, ids, xy, ia, ib));
        float bound = fmaxf(g->kth[ia], g->kth[ib]) * (1 + p->hysteresis);
        if (!isfinite(d) || d > bound || g->degree[ia] >= p->max_degree ||
            g->degree[ib] >= p->max_degree)
            continue;
        join(g, ia, ib);
        next[n_next++] = g->prev[e];
    }
    for (int c = 0; c < n_cand; c++) {
        int ia = g->cand[c].ia, ib = g->cand[c].ib;
        if (joined(g, ia, ib) || g->degree[ia] >= p->max_degree || g->degree[ib] >= p->max_degree)
            continue;
        join(g, ia, ib);
        next[n_next++] = g->cand[c].e;
    }
    g->n_prev = n_next;
    memcpy(edges, next, (size_t)n_next * sizeof(keyer_knn_edge));
    return n_next;
}

/* ---- point sets ------------------------------------------------------------------------ */

static float uni(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f;
}

static float gauss(uint32_t *s)
{
    float u = uni(s) + 1e-7f, v = uni(s);
    return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v);
}

const char *kt_knn_set_name(kt_knn_set kind)
{
    static const char *names[KT_KNN_SETS] = {"uniform", "clustered", "lattice", "duplicates",
                                             "mixed",   "dense"};
    return kind >= 0 && kind < KT_KNN_SETS ? names[kind] : "?";
}

/* Distinct ids in shuffled order (a random permutation of base + 7 * i). */
static void shuffled_ids(int n, uint32_t *s, uint32_t *ids)
{
    for (int i = 0; i < n; i++)
        ids[i] = 1000 + 7u * (uint32_t)i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(uni(s) * (float)(i + 1));
        j = j > i ? i : j;
        uint32_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
}

void kt_knn_points(kt_knn_set kind, int n, uint32_t seed, uint32_t *ids, float *xy)
{
    uint32_t s = seed * 2654435761u + 12345u;
    shuffled_ids(n, &s, ids);
    switch (kind) {
    case KT_KNN_CLUSTERED: {
        int i = 0;
        while (i < n) {
            int size = 20 + (int)(uni(&s) * 180);
            float cx = uni(&s) * 1920, cy = uni(&s) * 1080, sd = 3 + uni(&s) * 30;
            for (int c = 0; c < size && i < n; c++, i++) {
                xy[2 * i] = cx + sd * gauss(&s);
                xy[2 * i + 1] = cy + sd * gauss(&s);
            }
        }
        break;
    }
    case KT_KNN_LATTICE: {
        int w = (int)ceilf(sqrtf((float)n * 16.0f / 9.0f));
        for (int i = 0; i < n; i++) {
            int q = (int)(uni(&s) * (float)n); /* points in random order, lattice cells shared */
            q = q >= n ? n - 1 : q;
            xy[2 * i] = 4.0f * (float)(q % w) + 100;
            xy[2 * i + 1] = 4.0f * (float)(q / w) + 50;
        }
        break;
    }
    case KT_KNN_DUPLICATES:
        for (int i = 0; i < n;) {
            float x = uni(&s) * 1920, y = uni(&s) * 1080;
            int copies = 1 + (int)(uni(&s) * 4);
            for (int c = 0; c < copies && i < n; c++, i++) {
                xy[2 * i] = x;
                xy[2 * i + 1] = y;
            }
        }
        break;
    case KT_KNN_MIXED:
        for (int i = 0; i < n; i++) {
            xy[2 * i] = uni(&s) * 1920;
            xy[2 * i + 1] = uni(&s) * 1080;
            float r = uni(&s);
            if (r < 0.02f)
                xy[2 * i] = NAN;
            else if (r < 0.03f)
                xy[2 * i + 1] = INFINITY;
            else if (r < 0.1f)
                xy[2 * i + 1] = 500; /* a horizontal row */
        }
        if (n > 2) {
            xy[0] = 1e6f; /* a far outlier */
            xy[1] = -3e5f;
        }
        break;
    case KT_KNN_DENSE:
        /* The 5% spread over the frame keep the grid's extent (and so its cells, about 9 px
         * at 50,000 points) the frame's: the square falls in one to four cells. */
        for (int i = 0; i < n; i++) {
            if (uni(&s) < 0.05f) {
                xy[2 * i] = uni(&s) * 1920;
                xy[2 * i + 1] = uni(&s) * 1080;
            } else {
                int q = (int)(uni(&s) * 64.0f);
                q = q > 63 ? 63 : q;
                xy[2 * i] = 958.0f + 0.5f * (float)(q % 8);
                xy[2 * i + 1] = 538.0f + 0.5f * (float)(q / 8);
            }
        }
        break;
    default:
        for (int i = 0; i < n; i++) {
            xy[2 * i] = uni(&s) * 1920;
            xy[2 * i + 1] = uni(&s) * 1080;
        }
    }
}

void kt_knn_jitter(kt_knn_set kind, int n, uint32_t seed, float *xy)
{
    uint32_t s = seed * 2246822519u + 7u;
    for (int i = 0; i < 2 * n; i++) {
        if (!isfinite(xy[i]))
            continue;
        float r = uni(&s);
        if (kind == KT_KNN_LATTICE)
            xy[i] += r < 0.05f ? -4.0f : r > 0.95f ? 4.0f : 0.0f;
        else if (kind == KT_KNN_DENSE)
            xy[i] += r < 0.05f ? -0.5f : r > 0.95f ? 0.5f : 0.0f;
        else
            xy[i] += (r - 0.5f) * 3.0f;
    }
}

int kt_knn_face_points(int faces, uint32_t *ids, float *xy)
{
    static const char *photos[2] = {"grace_hopper.jpg", "messi5.jpg"};
    float mesh[2][KEYER_FACE_MESH_POINTS][2];
    float lo[2][2], hi[2][2];
    keyer_error err = {0};
    for (int p = 0; p < 2; p++) {
        char path[4096];
        keyer_frame *f = NULL;
        keyer_faces *fa = NULL;
        keyer_faces_params fp = keyer_faces_params_defaults();
        fp.range = p == 0 ? KEYER_FACE_RANGE_SHORT : KEYER_FACE_RANGE_FULL;
        fp.landmarks = 1;
        const keyer_face *found = NULL;
        int n = 0, ok = keyer_frame_create(&f, &err) == KEYER_OK &&
                        keyer_image_read(kt_data_path(path, sizeof(path), photos[p]),
                                         KEYER_PIXEL_FORMAT_RGB24, f, &err) == KEYER_OK &&
                        keyer_faces_create(&fp, &fa, &err) == KEYER_OK &&
                        keyer_faces_run(fa, f, &found, &n, &err) == KEYER_OK && n > 0 &&
                        found[0].has_landmarks;
        if (ok) {
            lo[p][0] = lo[p][1] = INFINITY;
            hi[p][0] = hi[p][1] = -INFINITY;
            for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++)
                for (int c = 0; c < 2; c++) {
                    mesh[p][i][c] = found[0].landmarks[i][c];
                    lo[p][c] = fminf(lo[p][c], mesh[p][i][c]);
                    hi[p][c] = fmaxf(hi[p][c], mesh[p][i][c]);
                }
        }
        keyer_faces_destroy(&fa);
        keyer_frame_destroy(&f);
        if (!ok)
            return -1;
    }
    int cols = (int)ceilf(sqrtf((float)faces * 16.0f / 9.0f));
    float cell = 3840.0f / (float)cols;
    uint32_t s = 99;
    for (int face = 0; face < faces; face++) {
        int p = face % 2;
        float size = fmaxf(hi[p][0] - lo[p][0], hi[p][1] - lo[p][1]);
        float scale = cell / size * (0.3f + 0.7f * uni(&s));
        float ox = (float)(face % cols) * cell, oy = (float)(face / cols) * cell;
        for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++) {
            int q = face * KEYER_FACE_MESH_POINTS + i;
            ids[q] = (uint32_t)face * 1000u + (uint32_t)i;
            xy[2 * q] = ox + (mesh[p][i][0] - lo[p][0]) * scale;
            xy[2 * q + 1] = oy + (mesh[p][i][1] - lo[p][1]) * scale;
        }
    }
    return 0;
}

void kt_knn_face_crowd(int faces, uint32_t **ids, float **xy)
{
    const size_t n = (size_t)faces * KEYER_FACE_MESH_POINTS;
    *ids = malloc(n * sizeof(uint32_t));
    *xy = malloc(n * 2 * sizeof(float));
    if (!*ids || !*xy || kt_knn_face_points(faces, *ids, *xy)) {
        const int out_of_memory = !*ids || !*xy;
        free(*ids);
        free(*xy);
        *ids = NULL;
        *xy = NULL;
        if (out_of_memory)
            fail_msg("face crowd of %d faces: out of memory", faces);
        skip(); /* the face models or test photos are missing, or no face was found */
    }
}

int kt_knn_first_difference(const keyer_knn_edge *a, int na, const keyer_knn_edge *b, int nb)
{
    int n = na < nb ? na : nb;
    for (int i = 0; i < n; i++)
        if (a[i].a != b[i].a || a[i].b != b[i].b)
            return i;
    return na == nb ? -1 : n;
}
