/*
 * IoU + constant-velocity Kalman multi-object tracker (in the spirit of SORT).
 *
 * State per track: centre (cx, cy), size (w, h) and centre velocity (vx, vy). The centre and
 * its velocity follow a constant-velocity Kalman filter per axis (2x2 covariance per axis,
 * independent axes); the size follows a scalar filter with no velocity. Noise scales with the
 * box size so the filter behaves the same for near and far objects.
 */
#include "keyer/track.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct axis_filter { /* position p, velocity v, covariance [[a, b], [b, c]] */
    float p, v, a, b, c;
} axis_filter;

typedef struct track_state {
    int live;
    uint32_t id;
    axis_filter x, y;
    float w, h, size_var;
    keyer_detection last; /* last matched detection (keypoints, score) */
    int hits, age, misses, confirmed;
} track_state;

struct keyer_tracker {
    keyer_tracker_params p;
    track_state *tracks;
    uint32_t next_id;
    /* scratch, sized at create */
    int *det_used;
    float *pair_iou;
    int *pair_track, *pair_det;
    int pair_cap;
};

keyer_tracker_params keyer_tracker_params_defaults(void)
{
    keyer_tracker_params p;
    memset(&p, 0, sizeof(p));
    p.min_iou = 0.3f;
    p.min_hits = 3;
    p.max_misses = 5;
    p.max_tracks = 64;
    p.process_noise = 0.05f;
    p.measure_noise = 0.1f;
    return p;
}

/* Detections per frame that the tracker considers (extra ones are ignored, lowest score last). */
#define MAX_DETS 256

keyer_status keyer_tracker_create(const keyer_tracker_params *params, keyer_tracker **out,
                                  keyer_error *err)
{
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "tracker: NULL argument");
    *out = NULL;
    const keyer_tracker_params *p = params;
    if (!(p->min_iou >= 0 && p->min_iou <= 1) || p->min_hits < 1 || p->max_misses < 0 ||
        p->max_tracks < 1 || p->max_tracks > 4096 || !(p->process_noise > 0) ||
        !(p->measure_noise > 0))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "tracker: parameters out of range (min_iou %g in [0,1], min_hits %d "
                               ">= 1, max_misses %d >= 0, max_tracks %d in 1..4096, noises > 0)",
                               (double)p->min_iou, p->min_hits, p->max_misses, p->max_tracks);
    keyer_tracker *t = calloc(1, sizeof(*t));
    if (!t)
        goto oom;
    t->p = *p;
    t->next_id = 1;
    t->pair_cap = p->max_tracks * MAX_DETS;
    t->tracks = calloc((size_t)p->max_tracks, sizeof(*t->tracks));
    t->det_used = calloc(MAX_DETS, sizeof(int));
    t->pair_iou = malloc((size_t)t->pair_cap * sizeof(float));
    t->pair_track = malloc((size_t)t->pair_cap * sizeof(int));
    t->pair_det = malloc((size_t)t->pair_cap * sizeof(int));
    if (!t->tracks || !t->det_used || !t->pair_iou || !t->pair_track || !t->pair_det)
        goto oom;
    *out = t;
    return KEYER_OK;
oom:
    keyer_tracker_destroy(&t);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "tracker: out of memory");
}

void keyer_tracker_destroy(keyer_tracker **pt)
{
    if (!pt || !*pt)
        return;
    keyer_tracker *t = *pt;
    free(t->tracks);
    free(t->det_used);
    free(t->pair_iou);
    free(t->pair_track);
    free(t->pair_det);
    free(t);
    *pt = NULL;
}

void keyer_tracker_reset(keyer_tracker *t)
{
    if (t)
        memset(t->tracks, 0, (size_t)t->p.max_tracks * sizeof(*t->tracks));
}

static void axis_predict(axis_filter *f, float q)
{
    /* x' = F x with F = [[1,1],[0,1]];  P' = F P F^T + Q, Q = q^2 * diag(1/4, 1) */
    f->p += f->v;
    float a = f->a + 2 * f->b + f->c, b = f->b + f->c, c = f->c;
    f->a = a + 0.25f * q * q;
    f->b = b;
    f->c = c + q * q;
}

static void axis_correct(axis_filter *f, float z, float r)
{
    float s = f->a + r * r;          /* innovation covariance */
    float k0 = f->a / s, k1 = f->b / s; /* Kalman gain */
    float y = z - f->p;
    f->p += k0 * y;
    f->v += k1 * y;
    float a = (1 - k0) * f->a, b = (1 - k0) * f->b, c = f->c - k1 * f->b;
    f->a = a;
    f->b = b;
    f->c = c;
}

static keyer_detection predicted_box(const track_state *s)
{
    keyer_detection d = s->last;
    d.xmin = s->x.p - s->w / 2;
    d.xmax = s->x.p + s->w / 2;
    d.ymin = s->y.p - s->h / 2;
    d.ymax = s->y.p + s->h / 2;
    return d;
}

static void start_track(keyer_tracker *t, track_state *s, const keyer_detection *d)
{
    memset(s, 0, sizeof(*s));
    s->live = 1;
    s->id = t->next_id++;
    float w = d->xmax - d->xmin, h = d->ymax - d->ymin, size = fmaxf(w, h);
    float r = t->p.measure_noise * size;
    s->x = (axis_filter){(d->xmin + d->xmax) / 2, 0, r * r, 0, size * size};
    s->y = (axis_filter){(d->ymin + d->ymax) / 2, 0, r * r, 0, size * size};
    s->w = w;
    s->h = h;
    s->size_var = r * r;
    s->last = *d;
    s->hits = 1;
    s->confirmed = t->p.min_hits <= 1;
}

keyer_status keyer_tracker_update(keyer_tracker *t, const keyer_detection *dets, int n_dets,
                                  keyer_track *out, int capacity, int *count, keyer_error *err)
{
    if (!t || !count || n_dets < 0 || capacity < 0 || (n_dets > 0 && !dets) ||
        (capacity > 0 && !out))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "tracker update: NULL argument or negative count");
    if (n_dets > MAX_DETS)
        n_dets = MAX_DETS;
    const keyer_tracker_params *p = &t->p;

    /* 1. Predict. */
    for (int i = 0; i < p->max_tracks; i++) {
        track_state *s = &t->tracks[i];
        if (!s->live)
            continue;
        float size = fmaxf(s->w, s->h);
        axis_predict(&s->x, p->process_noise * size);
        axis_predict(&s->y, p->process_noise * size);
        s->size_var += (p->process_noise * size) * (p->process_noise * size);
        s->age++;
    }

    /* 2. Greedy association by descending IoU. */
    int n_pairs = 0;
    for (int i = 0; i < p->max_tracks; i++) {
        if (!t->tracks[i].live)
            continue;
        keyer_detection pred = predicted_box(&t->tracks[i]);
        for (int j = 0; j < n_dets; j++) {
            float iou = keyer_detection_iou(&pred, &dets[j]);
            if (iou >= p->min_iou && iou > 0 && n_pairs < t->pair_cap) {
                t->pair_iou[n_pairs] = iou;
                t->pair_track[n_pairs] = i;
                t->pair_det[n_pairs] = j;
                n_pairs++;
            }
        }
    }
    /* Insertion sort: pair counts are small (tracks x overlapping detections). */
    for (int a = 1; a < n_pairs; a++) {
        float v = t->pair_iou[a];
        int tr = t->pair_track[a], de = t->pair_det[a], b = a - 1;
        while (b >= 0 && t->pair_iou[b] < v) {
            t->pair_iou[b + 1] = t->pair_iou[b];
            t->pair_track[b + 1] = t->pair_track[b];
            t->pair_det[b + 1] = t->pair_det[b];
            b--;
        }
        t->pair_iou[b + 1] = v;
        t->pair_track[b + 1] = tr;
        t->pair_det[b + 1] = de;
    }
    memset(t->det_used, 0, MAX_DETS * sizeof(int));
    for (int i = 0; i < p->max_tracks; i++)
        t->tracks[i].misses += t->tracks[i].live; /* cleared below when matched */
    for (int k = 0; k < n_pairs; k++) {
        track_state *s = &t->tracks[t->pair_track[k]];
        int j = t->pair_det[k];
        if (t->det_used[j] || s->misses == 0)
            continue; /* detection taken, or track already matched this frame */
        t->det_used[j] = 1;
        const keyer_detection *d = &dets[j];
        float w = d->xmax - d->xmin, h = d->ymax - d->ymin;
        float r = p->measure_noise * fmaxf(w, h);
        axis_correct(&s->x, (d->xmin + d->xmax) / 2, r);
        axis_correct(&s->y, (d->ymin + d->ymax) / 2, r);
        float k_size = s->size_var / (s->size_var + r * r);
        s->w += k_size * (w - s->w);
        s->h += k_size * (h - s->h);
        s->size_var *= 1 - k_size;
        s->last = *d;
        s->misses = 0;
        s->hits++;
        if (s->hits >= p->min_hits)
            s->confirmed = 1;
    }

    /* 3. Remove lost tracks; unconfirmed tracks die at their first miss. */
    for (int i = 0; i < p->max_tracks; i++) {
        track_state *s = &t->tracks[i];
        if (s->live && (s->misses > p->max_misses || (!s->confirmed && s->misses > 0)))
            s->live = 0;
    }

    /* 4. Births. */
    for (int j = 0; j < n_dets; j++) {
        if (t->det_used[j])
            continue;
        for (int i = 0; i < p->max_tracks; i++)
            if (!t->tracks[i].live) {
                start_track(t, &t->tracks[i], &dets[j]);
                break;
            }
    }

    /* 5. Report confirmed tracks sorted by id. */
    int n = 0;
    uint32_t last_id = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < p->max_tracks; i++) {
            const track_state *s = &t->tracks[i];
            if (s->live && s->confirmed && s->id > last_id &&
                (best < 0 || s->id < t->tracks[best].id))
                best = i;
        }
        if (best < 0 || n >= capacity)
            break;
        const track_state *s = &t->tracks[best];
        out[n].id = s->id;
        out[n].box = predicted_box(s);
        out[n].vx = s->x.v;
        out[n].vy = s->y.v;
        out[n].age = s->age;
        out[n].misses = s->misses;
        last_id = s->id;
        n++;
    }
    *count = n;
    return KEYER_OK;
}
