#include "kt_overlay_scene.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct rng {
    uint32_t s;
} rng;

float kt_scene_uniform(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 16777216.0f;
}

static float frand(rng *r) { return kt_scene_uniform(&r->s); }

static keyer_color rcolor(rng *r)
{
    keyer_color c = {frand(r), frand(r), frand(r), 0.3f + 0.7f * frand(r)};
    return c;
}

static keyer_status add_graph(keyer_overlay *ov, int n_points, int w, int h, rng *r,
                              keyer_error *err)
{
    keyer_knn_params kp = keyer_knn_params_defaults();
    kp.k = 5;
    kp.max_degree = 5;
    keyer_knn_graph *g = NULL;
    keyer_status st = keyer_knn_graph_create(&kp, n_points, &g, err);
    if (st)
        return st;
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)n_points);
    float *xy = malloc(sizeof(float) * 2 * (size_t)n_points);
    int cap = n_points * 5, n = 0;
    keyer_knn_edge *edges = malloc(sizeof(keyer_knn_edge) * (size_t)cap);
    if (!ids || !xy || !edges) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "scene: out of memory");
        goto done;
    }
    for (int i = 0; i < n_points; i++) {
        ids[i] = (uint32_t)i + 1;
        xy[2 * i] = frand(r) * (float)w;
        xy[2 * i + 1] = frand(r) * (float)h;
    }
    if ((st = keyer_knn_graph_update(g, ids, xy, n_points, edges, cap, &n, err)))
        goto done;
    keyer_color ec = {0.2f, 0.9f, 1, 0.8f};
    for (int i = 0; i < n && !st; i++) {
        const float *a = &xy[2 * (edges[i].a - 1)], *b = &xy[2 * (edges[i].b - 1)];
        st = keyer_overlay_add_line(ov, a[0], a[1], b[0], b[1], 1.5f, ec, err);
    }
    if (!st)
        st = keyer_overlay_add_points(ov, xy, n_points, 2.5f, ec, err);
done:
    free(edges);
    free(xy);
    free(ids);
    keyer_knn_graph_destroy(&g);
    return st;
}

keyer_status kt_overlay_scene(keyer_overlay *ov, const kt_scene *sc, int w, int h, uint32_t seed,
                              keyer_error *err)
{
    rng r = {seed};
    keyer_status st = KEYER_OK;
    keyer_overlay_clear(ov);
    for (int i = 0; i < sc->boxes && !st; i++) {
        float x0 = frand(&r) * (float)w - 20, y0 = frand(&r) * (float)h - 20;
        float bw = 4 + frand(&r) * (float)w / 4, bh = 4 + frand(&r) * (float)h / 4;
        keyer_color fill = rcolor(&r);
        fill.a *= 0.4f;
        float radius = frand(&r) * 20, stroke_w = frand(&r) * 6;
        st = keyer_overlay_add_box(ov, x0, y0, x0 + bw, y0 + bh, radius, stroke_w, rcolor(&r),
                                   fill, err);
    }
    for (int i = 0; i < sc->segments && !st; i++) {
        float x0 = frand(&r) * (float)w, y0 = frand(&r) * (float)h;
        float x1 = frand(&r) * (float)w, y1 = frand(&r) * (float)h;
        float width = 0.5f + frand(&r) * 5;
        st = keyer_overlay_add_line(ov, x0, y0, x1, y1, width, rcolor(&r), err);
    }
    for (int i = 0; i < sc->curves && !st; i++) {
        float x0 = frand(&r) * (float)w, y0 = frand(&r) * (float)h;
        float x1 = frand(&r) * (float)w, y1 = frand(&r) * (float)h;
        float bend = frand(&r) - 0.5f, width = 1 + frand(&r) * 3;
        st = keyer_overlay_add_curve(ov, x0, y0, x1, y1, bend, width, rcolor(&r), err);
    }
    for (int i = 0; i < sc->dots && !st; i++) {
        float x = frand(&r) * (float)w, y = frand(&r) * (float)h, radius = 0.5f + frand(&r) * 6;
        st = keyer_overlay_add_dot(ov, x, y, radius, rcolor(&r), err);
    }
    for (int i = 0; i < sc->labels && !st; i++) {
        char text[32];
        snprintf(text, sizeof(text), "id %d %.2f", i, (double)frand(&r));
        keyer_color bg = {0, 0, 0, 0.5f};
        float x = frand(&r) * (float)w, y = frand(&r) * (float)h, scale = 1 + frand(&r) * 2;
        st = keyer_overlay_add_label(ov, x, y, scale, text, rcolor(&r), bg, err);
    }
    if (!st && sc->graph_points > 0)
        st = add_graph(ov, sc->graph_points, w, h, &r, err);
    return st;
}
