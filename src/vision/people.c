/*
 * Keying people at any distance (keyer/people.h): per-person crops tracked from the landmarks
 * of the person detector's detections (people_detect.c: the whole frame and its tiles), the
 * landmark model's body mask per crop batched over the people, per-person temporal smoothing,
 * and the masks combined into the frame's. Built on the public API and the vision helpers
 * (vmodel.h).
 */
#include "keyer/people.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/registry.h"
#include "keyer/track.h"
#include "render/fx_math.h"
#include "vision/mask_regions.h"
#include "vision/people_detect.h"
#include "vision/people_steps.h"
#include "vision/sigmoid.h"
#include "vision/vmodel.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define MODEL_POINTS 39 /* landmarks the model emits: 33 + 2 auxiliary + 4 unused */
#define AUX_CENTER 33
#define AUX_SCALE 34
#define MAX_BATCH 16
#define COMPANION_CELLS 0.3 /* fallback regions kept on a detected person's crop: at least
                             * this times the body mask's cells (a person beside it) */

/* One followed person (a slot per tracker id). */
typedef struct person_slot {
    uint32_t id;       /* 0: free */
    int seen;          /* touched this frame */
    int has_roi;       /* roi is from the previous frame's landmarks */
    keyer_roi roi;
    int has_mask;      /* mask is this person's last mask */
    int mask_now;      /* ... and it is part of the current frame's mask */
    float *mask;       /* seg_w x seg_h probabilities in the crop's grid */
    float inv[6];      /* frame pixels -> tensor pixels of the crop of mask */
} person_slot;

/* One crop to run. */
typedef struct job {
    int slot;
    keyer_roi roi;
    const keyer_frame *frame;
    float score;  /* the matched detection's, 0 without one */
    float box[4]; /* its box in pixels */
    int from_landmarks; /* roi is the slot's crop from the previous landmarks */
    int has_det_roi;    /* det_roi is the crop of this frame's matched detection */
    keyer_roi det_roi;
} job;

struct keyer_people {
    keyer_people_params p;
    kr_people_det det;            /* the person detector (people_detect.h) */
    keyer_tracker *tracker;
    /* landmarks */
    keyer_model *lm;
    keyer_runtime *rt[2];         /* batch 1 and batch p.batch (same when batch is 1) */
    int rt_batch[2];
    int host;                     /* the runtimes' tensors are in host memory */
    keyer_prepare *prep;
    int lm_w, lm_h;               /* its input */
    int out_points, out_flag, out_seg;
    int seg_w, seg_h;
    size_t out_count[3];          /* elements per item of points, flag, seg */
    float *in_staging;            /* device runtimes: batch inputs */
    float *out_staging[3];        /* device runtimes: batch outputs of points, flag, seg */
    /* state */
    person_slot slots[KEYER_PEOPLE_MAX];
    float *scratch;               /* seg_w x seg_h */
    float *fb_grid;               /* seg_w x seg_h: the fallback's mask in the crop's grid */
    uint8_t *seen;                /* seg_w x seg_h: kr_mask_keep_regions' scratch */
    int32_t *cell_list;           /* seg_w x seg_h: the same */
    keyer_track tracks[KEYER_PEOPLE_MAX * 2];
    job jobs[KEYER_PEOPLE_MAX];
    job retry[KEYER_PEOPLE_MAX]; /* crops to run again from their detection */
    int n_retry;
    keyer_prepare_geometry geos[MAX_BATCH];
    int frame_w, frame_h;         /* the analysed frame; 0: none yet */
    int n_jobs;                   /* this frame's crops in jobs */
    int external;                 /* no landmark runtimes: the caller runs the crops
                                   * (vision/people_steps.h) */
    /* the fallback segmentation of weak crops (p.fallback_model) */
    kr_vmodel fb;                 /* fb.model NULL: none */
    int fb_out;                   /* its mask output (fb.width x fb.height probabilities) */
};

static const char *const landmark_names[] = {"pose-lite", "pose-full", "pose-heavy"};

keyer_people_params keyer_people_params_defaults(void)
{
    keyer_people_params p;
    memset(&p, 0, sizeof(p));
    p.model = KEYER_POSE_MODEL_FULL;
    p.backend = KEYER_BACKEND_CPU;
    p.min_score = 0.5f;
    p.min_presence = 0.5f;
    p.max_people = 16;
    p.batch = 4;
    p.max_misses = 5;
    p.roi_scale = 1.25f;
    p.track_smoothing = 0.7f;
    p.tiles = 1;
    p.weak_mask = 0.04f;
    return p;
}

void keyer_people_destroy(keyer_people **pp)
{
    if (!pp || !*pp)
        return;
    keyer_people *k = *pp;
    /* the landmark runtimes and preparation first: they use the detector's CUDA stream */
    keyer_runtime_destroy(&k->rt[0]);
    keyer_runtime_destroy(&k->rt[1]);
    keyer_model_destroy(&k->lm);
    keyer_prepare_destroy(&k->prep);
    kr_people_det_close(&k->det);
    kr_vmodel_close(&k->fb);
    keyer_tracker_destroy(&k->tracker);
    free(k->in_staging);
    for (int i = 0; i < 3; i++)
        free(k->out_staging[i]);
    for (int i = 0; i < KEYER_PEOPLE_MAX; i++)
        free(k->slots[i].mask);
    free(k->scratch);
    free(k->fb_grid);
    free(k->seen);
    free(k->cell_list);
    free(k);
    *pp = NULL;
}

static keyer_status check_params(const keyer_people_params *p, keyer_error *err)
{
    if (p->model < KEYER_POSE_MODEL_LITE || p->model > KEYER_POSE_MODEL_HEAVY ||
        !(p->min_score >= 0 && p->min_score <= 1) ||
        !(p->min_presence >= 0 && p->min_presence <= 1) || p->max_people < 1 ||
        p->max_people > KEYER_PEOPLE_MAX || p->batch < 1 || p->batch > MAX_BATCH ||
        p->max_misses < 0 || p->max_misses > 30 || !(p->roi_scale >= 1 && p->roi_scale <= 4) ||
        !(p->track_smoothing >= 0 && p->track_smoothing <= 0.99f) || p->threads < 0 ||
        (p->tiles != 0 && p->tiles != 1) || p->tile_size < 0 || p->tile_size > 8192 ||
        p->device < 0 || p->device > 63 || !(p->weak_mask >= 0 && p->weak_mask <= 1))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "people: a parameter is out of range (model 0..2, min_score and "
                               "min_presence 0..1, max_people 1..%d, batch 1..%d, max_misses "
                               "0..30, roi_scale 1..4, track_smoothing 0..0.99, threads >= 0, "
                               "device 0..63, tiles 0 or 1, tile_size 0..8192, weak_mask "
                               "0..1)", KEYER_PEOPLE_MAX, MAX_BATCH);
    return KEYER_OK;
}

/* The fallback segmentation model of weak crops (none with "none" or weak_mask 0). */
static keyer_status open_fallback(keyer_people *k, const char *name, keyer_error *err)
{
    const keyer_people_params *p = &k->p;
    if ((name && !strcmp(name, "none")) || p->weak_mask <= 0)
        return KEYER_OK;
    kr_vmodel_spec spec = {"people fallback segmentation", name ? name : "selfie", p->backend,
                           p->threads, p->logger, KEYER_FIT_LETTERBOX, 1.0f, 0.0f, 1,
                           p->device};
    keyer_status st = kr_vmodel_open(&k->fb, &spec, err);
    if (st)
        return st;
    k->fb_out = kr_vmodel_find_output(&k->fb, (size_t)k->fb.width * (size_t)k->fb.height, 0);
    if (k->fb_out < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "people fallback segmentation: %s: no output of %d x %d person "
                               "probabilities (its input's size)", k->fb.path, k->fb.width,
                               k->fb.height);
    return KEYER_OK;
}

/* The landmark model: its outputs, runtimes for batch 1 and p.batch, the preparation. */
static keyer_status open_landmarks(keyer_people *k, const char *model, keyer_error *err)
{
    const keyer_people_params *p = &k->p;
    const char *name = model ? model : landmark_names[p->model];
    char path[4096];
    keyer_status st;
    if ((st = keyer_registry_resolve(name, path, sizeof(path), err)) ||
        (st = keyer_model_load_file(path, &k->lm, err)))
        return keyer_error_prefix(err, "people landmarks: ");
    keyer_tensor_info in;
    int n_out = keyer_model_output_count(k->lm);
    k->out_points = k->out_flag = k->out_seg = -1;
    for (int i = 0; i < n_out; i++) {
        keyer_tensor_info t;
        if (keyer_model_output_info(k->lm, i, &t, NULL) != KEYER_OK)
            continue;
        size_t n = 1;
        for (int d = 0; d < t.rank; d++)
            n *= (size_t)t.dims[d];
        if (n == MODEL_POINTS * 5 && k->out_points < 0) {
            k->out_points = i;
            k->out_count[0] = n;
        } else if (n == 1 && k->out_flag < 0) {
            k->out_flag = i;
            k->out_count[1] = n;
        } else if (t.rank == 4 && t.dims[3] == 1 && t.dims[1] >= 8 && k->out_seg < 0) {
            k->out_seg = i;
            k->seg_h = t.dims[1];
            k->seg_w = t.dims[2];
            k->out_count[2] = n;
        }
    }
    if (keyer_model_input_count(k->lm) != 1 ||
        keyer_model_input_info(k->lm, 0, &in, NULL) != KEYER_OK || in.rank != 4 ||
        in.dims[3] != 3 || in.dims[1] != in.dims[2] || in.dims[1] < 8 || in.dims[1] > 4096 ||
        k->out_points < 0 || k->out_flag < 0 || k->out_seg < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "people landmarks: %s: not a BlazePose landmark model (expected "
                               "a square [1,H,W,3] input and outputs of %d x 5 landmarks, 1 "
                               "presence and a [1,H,W,1] segmentation)", path, MODEL_POINTS);
    k->lm_h = in.dims[1];
    k->lm_w = in.dims[2];
    if (k->external) { /* the caller runs the crops: only the model's grids are needed */
        keyer_model_destroy(&k->lm);
        k->host = k->det.net.host;
        return KEYER_OK;
    }
    k->rt_batch[0] = 1;
    k->rt_batch[1] = p->batch;
    for (int r = 0; r < 2; r++) {
        if (r == 1 && p->batch == 1)
            break;
        keyer_runtime_params rp = keyer_runtime_params_defaults();
        rp.backend = p->backend;
        rp.batch = k->rt_batch[r];
        rp.threads = p->threads;
        rp.device = p->device;
        rp.logger = p->logger;
        /* the crops of CUDA frames are made on it (CUDA: not NULL) */
        rp.stream = k->det.net.stream;
        if ((st = keyer_runtime_create(k->lm, &rp, &k->rt[r], err)))
            return keyer_error_prefix(err, "people landmarks: %s: ", path);
    }
    k->host = keyer_runtime_backend(k->rt[0]) != KEYER_BACKEND_CUDA;
    size_t b = (size_t)p->batch;
    if (!k->host) {
        if (!(k->in_staging = malloc(b * (size_t)k->lm_w * (size_t)k->lm_h * 3 * sizeof(float))))
            goto oom;
        for (int i = 0; i < 3; i++)
            if (!(k->out_staging[i] = malloc(b * k->out_count[i] * sizeof(float))))
                goto oom;
    }
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = k->lm_w;
    pp.height = k->lm_h;
    pp.fit = KEYER_FIT_LETTERBOX;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    pp.threads = p->threads;
    pp.max_batch = p->batch;
    pp.stream = k->det.net.stream;
    if ((st = keyer_prepare_create(&pp, &k->prep, err)))
        return keyer_error_prefix(err, "people landmarks: ");
    return KEYER_OK;
oom:
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people: out of memory");
}

/* keyer_people_create(), with landmark runtimes of its own unless @p external. */
static keyer_status create(const keyer_people_params *params, int external, keyer_people **out,
                           keyer_error *err)
{
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_create: %s is NULL", !params ? "params" : "out");
    *out = NULL;
    keyer_status st = check_params(params, err);
    if (st)
        return st;
    keyer_people *k = calloc(1, sizeof(*k));
    if (!k)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people: out of memory");
    k->p = *params;
    k->external = external;
    k->p.landmark_model = k->p.detector_model = k->p.fallback_model = NULL; /* not kept */
    keyer_tracker_params tp = keyer_tracker_params_defaults();
    tp.min_hits = 1;
    tp.max_misses = params->max_misses;
    tp.max_tracks = 2 * KEYER_PEOPLE_MAX;
    if ((st = kr_people_det_open(&k->det, &k->p, params->detector_model, err)) ||
        (st = open_landmarks(k, params->landmark_model, err)) ||
        (st = open_fallback(k, params->fallback_model, err)) ||
        (st = keyer_tracker_create(&tp, &k->tracker, err)))
        goto fail;
    size_t cells = (size_t)k->seg_w * (size_t)k->seg_h;
    if (!(k->scratch = malloc(cells * sizeof(float))) ||
        !(k->fb_grid = malloc(cells * sizeof(float))) || !(k->seen = malloc(cells)) ||
        !(k->cell_list = malloc(cells * sizeof(int32_t))))
        goto oom;
    for (int i = 0; i < params->max_people; i++)
        if (!(k->slots[i].mask = calloc(cells, sizeof(float))))
            goto oom;
    *out = k;
    return KEYER_OK;
oom:
    st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people: out of memory");
fail:
    keyer_people_destroy(&k);
    return st;
}

keyer_status keyer_people_create(const keyer_people_params *params, keyer_people **out,
                                 keyer_error *err)
{
    return create(params, 0, out, err);
}

void keyer_people_reset(keyer_people *k)
{
    if (!k)
        return;
    keyer_tracker_reset(k->tracker);
    for (int i = 0; i < KEYER_PEOPLE_MAX; i++) {
        k->slots[i].id = 0;
        k->slots[i].has_roi = k->slots[i].has_mask = k->slots[i].mask_now = 0;
    }
}

static keyer_status check_frame(const keyer_people *k, const keyer_frame *frame, const char *fn,
                                keyer_error *err)
{
    if (keyer_frame_check(frame, err))
        return keyer_error_prefix(err, "%s: ", fn);
    if (frame->memory != KEYER_MEMORY_HOST && (k->host || k->det.net.host))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the frame is in CUDA memory; people keying on the CPU takes "
                               "host frames", fn);
    return KEYER_OK;
}

keyer_status keyer_people_detect(keyer_people *k, const keyer_frame *frame, keyer_detection *out,
                                 int capacity, int *count, keyer_error *err)
{
    if (!k || !frame || !count || capacity < 0 || (capacity > 0 && !out))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_detect: NULL argument or negative capacity");
    *count = 0;
    int n = 0;
    keyer_status st = check_frame(k, frame, "keyer_people_detect", err);
    if (st || (st = kr_people_det_run(&k->det, frame, NULL, 0, &n, err)))
        return st;
    n = n < capacity ? n : capacity;
    memcpy(out, k->det.dets, (size_t)n * sizeof(*out));
    *count = n;
    return KEYER_OK;
}

/* MediaPipe's pose crop from two points: centre (x0, y0), side 2 |p1 - p0| * scale, rotated
 * so that p0 -> p1 points up; 0 when degenerate. */
static int roi_from_points(const keyer_people *k, float x0, float y0, float x1, float y1,
                           keyer_roi *roi)
{
    float side = 2.0f * sqrtf((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0)) * k->p.roi_scale;
    double rot = M_PI / 2 - atan2(-(double)(y1 - y0), (double)(x1 - x0));
    rot = rot - 2 * M_PI * floor((rot + M_PI) / (2 * M_PI)); /* into [-pi, pi) */
    float limit = 4.0f * (float)(k->frame_w > k->frame_h ? k->frame_w : k->frame_h);
    if (!isfinite(x0) || !isfinite(y0) || !(side >= 4.0f && side <= limit) || !isfinite(rot))
        return 0;
    roi->center_x = x0;
    roi->center_y = y0;
    roi->width = roi->height = side;
    roi->rotation = (float)rot;
    return 1;
}

static person_slot *slot_of(keyer_people *k, uint32_t id, int make)
{
    for (int i = 0; i < k->p.max_people; i++)
        if (k->slots[i].id == id)
            return &k->slots[i];
    if (!make)
        return NULL;
    for (int i = 0; i < k->p.max_people; i++)
        if (!k->slots[i].id) {
            person_slot *s = &k->slots[i];
            s->id = id;
            s->has_roi = s->has_mask = s->mask_now = 0;
            return s;
        }
    return NULL;
}

/* Bilinear sample of a seg_w x seg_h grid at index coordinates (u, q); 0 outside. */
static float sample_grid(const float *g, int w, int h, float u, float q)
{
    if (!(u > -1.0f && q > -1.0f && u < (float)w && q < (float)h))
        return 0.0f;
    int x0 = (int)floorf(u), y0 = (int)floorf(q);
    float ax = u - (float)x0, ay = q - (float)y0, v = 0.0f;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            int xx = x0 + dx, yy = y0 + dy;
            if (xx < 0 || yy < 0 || xx >= w || yy >= h)
                continue;
            v += (dx ? ax : 1 - ax) * (dy ? ay : 1 - ay) * g[(size_t)yy * (size_t)w + (size_t)xx];
        }
    return v;
}

/* The fallback model on crop @p jb (geometry @p geo), its mask combined (maximum) cell by cell
 * with the body mask in k->scratch through both geometries: where the body mask is weak, all
 * of it; on the crop of a person the detector finds in this frame, its regions of at least
 * COMPANION_CELLS of the body mask's cells (a second person the detection holds, beside the one
 * the landmark model follows; the parts of the silhouette the body mask misses), not its
 * smaller blobs. */
static keyer_status fallback(keyer_people *k, const job *jb, const keyer_prepare_geometry *geo,
                             keyer_error *err)
{
    int w = k->seg_w, h = k->seg_h;
    size_t cells = (size_t)w * (size_t)h, on = 0;
    for (size_t c = 0; c < cells; c++)
        on += k->scratch[c] >= 0.5f;
    int weak = (double)on < (double)k->p.weak_mask * (double)cells;
    if (!k->fb.model || (!weak && !(jb->score > 0)))
        return KEYER_OK;
    keyer_prepare_geometry fg;
    float finv[6];
    keyer_status st = kr_vmodel_run(&k->fb, jb->frame, &jb->roi, &fg, err);
    if (st)
        return keyer_error_prefix(err, "people: ");
    if (!kr_geo_invert(&fg, finv))
        return KEYER_OK;
    const float *fm = k->fb.out[k->fb_out];
    float tx = (float)k->lm_w / (float)w, ty = (float)k->lm_h / (float)h;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            /* cell -> crop tensor -> frame -> fallback tensor (= its mask's cells) */
            float fx, fy;
            kr_geo_apply(geo, ((float)i + 0.5f) * tx, ((float)j + 0.5f) * ty, &fx, &fy);
            float u = finv[0] * fx + finv[1] * fy + finv[2];
            float q = finv[3] * fx + finv[4] * fy + finv[5];
            k->fb_grid[(size_t)j * (size_t)w + (size_t)i] =
                sample_grid(fm, k->fb.width, k->fb.height, u - 0.5f, q - 0.5f);
        }
    if (!weak)
        kr_mask_keep_regions(k->fb_grid, w, h, (long)ceil(COMPANION_CELLS * (double)on),
                             k->seen, k->cell_list);
    for (size_t c = 0; c < cells; c++) {
        float v = k->fb_grid[c];
        k->scratch[c] = v > k->scratch[c] ? v : k->scratch[c]; /* NaN never wins */
    }
    return KEYER_OK;
}

/* The new mask of slot @p s from the segmentation logits @p seg of its crop @p jb (geometry
 * @p geo): sigmoid, the fallback where weak, blended with its previous mask resampled into
 * this crop. */
static keyer_status update_mask(keyer_people *k, person_slot *s, const float *seg,
                                const job *jb, const keyer_prepare_geometry *geo,
                                keyer_error *err)
{
    int w = k->seg_w, h = k->seg_h;
    size_t cells = (size_t)w * (size_t)h;
    float inv[6];
    if (!kr_geo_invert(geo, inv)) {
        s->has_mask = s->mask_now = 0;
        return KEYER_OK;
    }
    kr_sigmoid_cpu(k->scratch, seg, cells, 1);
    keyer_status st = fallback(k, jb, geo, err);
    if (st)
        return st;
    if (s->has_mask && k->p.track_smoothing > 0) {
        /* cell (i, j) of the new crop -> tensor -> frame -> previous tensor -> previous cell */
        float tx = (float)k->lm_w / (float)w, ty = (float)k->lm_h / (float)h;
        float kx = 1.0f / tx, ky = 1.0f / ty;
        const float *pi = s->inv;
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++) {
                float fx, fy;
                kr_geo_apply(geo, ((float)i + 0.5f) * tx, ((float)j + 0.5f) * ty, &fx, &fy);
                float px = pi[0] * fx + pi[1] * fy + pi[2], py = pi[3] * fx + pi[4] * fy + pi[5];
                float q = sample_grid(s->mask, w, h, px * kx - 0.5f, py * ky - 0.5f);
                float p = k->scratch[(size_t)j * (size_t)w + (size_t)i];
                k->scratch[(size_t)j * (size_t)w + (size_t)i] =
                    p + (q - p) * k->p.track_smoothing * kr_mediapipe_uncertainty(p);
            }
    }
    memcpy(s->mask, k->scratch, cells * sizeof(float));
    memcpy(s->inv, inv, sizeof(inv));
    s->has_mask = s->mask_now = 1;
    return KEYER_OK;
}

/* The landmark model's outputs on job @p jb's crop (geometry @p geo): @p pts (39 x 5), the
 * presence @p pr, the segmentation logits @p seg; updates its slot, and lists the person in
 * @p out when found (at most @p capacity). */
static keyer_status take_crop(keyer_people *k, const job *jb, const keyer_prepare_geometry *geo,
                              const float *pts, float pr, const float *seg, keyer_person *out,
                              int capacity, int *count, keyer_error *err)
{
    person_slot *s = &k->slots[jb->slot];
    float presence = pr == pr ? fminf(fmaxf(pr, 0.0f), 1.0f) : 0.0f;
    keyer_status st;
    float ax, ay, bx, by;
    kr_geo_apply(geo, pts[AUX_CENTER * 5], pts[AUX_CENTER * 5 + 1], &ax, &ay);
    kr_geo_apply(geo, pts[AUX_SCALE * 5], pts[AUX_SCALE * 5 + 1], &bx, &by);
    int from_landmarks = jb->from_landmarks;
    if (!(presence >= k->p.min_presence)) {
        s->has_roi = 0;
        if (jb->from_landmarks && jb->has_det_roi && k->n_retry < KEYER_PEOPLE_MAX) {
            /* the crop followed the landmarks off the person while the detector still
             * finds it: this frame again from the detection's crop */
            job *rj = &k->retry[k->n_retry++];
            *rj = *jb;
            rj->roi = jb->det_roi;
            rj->from_landmarks = 0;
            return KEYER_OK;
        }
        if (jb->score > 0) { /* the detector sees a person here: its body mask counts */
            if ((st = update_mask(k, s, seg, jb, geo, err)))
                return st;
        } else {
            s->has_mask = s->mask_now = 0;
        }
        return KEYER_OK;
    }
    s->has_roi = roi_from_points(k, ax, ay, bx, by, &s->roi);
    if ((st = update_mask(k, s, seg, jb, geo, err)))
        return st;
    if (*count < capacity) {
        keyer_person *ps = &out[*count];
        ps->id = s->id;
        ps->presence = presence;
        ps->from_landmarks = from_landmarks;
        ps->roi = jb->roi;
        ps->score = jb->score;
        ps->body[0] = ps->body[1] = INFINITY;
        ps->body[2] = ps->body[3] = -INFINITY;
        for (int q = 0; q < KEYER_POSE_LANDMARKS; q++) {
            float lx, ly;
            kr_geo_apply(geo, pts[q * 5], pts[q * 5 + 1], &lx, &ly);
            ps->body[0] = fminf(ps->body[0], lx);
            ps->body[1] = fminf(ps->body[1], ly);
            ps->body[2] = fmaxf(ps->body[2], lx);
            ps->body[3] = fmaxf(ps->body[3], ly);
        }
        if (jb->score > 0) {
            memcpy(ps->box, jb->box, sizeof(ps->box));
        } else { /* the crop's axis-aligned bounds */
            float hw = jb->roi.width * 0.5f * (fabsf(cosf(jb->roi.rotation)) +
                                               fabsf(sinf(jb->roi.rotation)));
            ps->box[0] = jb->roi.center_x - hw;
            ps->box[1] = jb->roi.center_y - hw;
            ps->box[2] = jb->roi.center_x + hw;
            ps->box[3] = jb->roi.center_y + hw;
        }
        (*count)++;
    }
    return KEYER_OK;
}

/* Runs the landmark model on jobs [first, first + n) with runtime @p r; updates their slots. */
static keyer_status run_chunk(keyer_people *k, int r, int first, int n, keyer_person *out,
                              int capacity, int *count, keyer_error *err)
{
    keyer_runtime *rt = k->rt[r];
    size_t in_bytes = (size_t)k->rt_batch[r] * (size_t)k->lm_w * (size_t)k->lm_h * 3 *
                      sizeof(float);
    const keyer_frame *frames[MAX_BATCH];
    keyer_roi rois[MAX_BATCH];
    for (int i = 0; i < n; i++) {
        frames[i] = k->jobs[first + i].frame;
        rois[i] = k->jobs[first + i].roi;
    }
    /* CUDA frames: cropped on the device straight into the runtime's input (unused items of
     * the batch keep what they held: their outputs are not read) */
    int device_frames = frames[0]->memory == KEYER_MEMORY_CUDA;
    float *in = k->host || device_frames ? keyer_runtime_input_data(rt, 0) : k->in_staging;
    keyer_status st;
    if (n < k->rt_batch[r] && !device_frames) /* unused items of the batch: zeros */
        memset(in, 0, in_bytes);
    if ((st = keyer_prepare_run(k->prep, frames, rois, n, in, k->geos, err)) ||
        (!k->host && !device_frames &&
         (st = keyer_runtime_set_input(rt, 0, in, in_bytes, err))) ||
        (st = keyer_runtime_run(rt, err)))
        return keyer_error_prefix(err, "people landmarks: ");
    const int idx[3] = {k->out_points, k->out_flag, k->out_seg};
    const float *o[3];
    for (int i = 0; i < 3; i++) {
        if (k->host) {
            o[i] = keyer_runtime_output_data(rt, idx[i]);
        } else {
            size_t bytes = (size_t)k->rt_batch[r] * k->out_count[i] * sizeof(float);
            if ((st = keyer_runtime_get_output(rt, idx[i], k->out_staging[i], bytes, err)))
                return keyer_error_prefix(err, "people landmarks: ");
            o[i] = k->out_staging[i];
        }
        if (!o[i])
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "people landmarks: output %d has no data", idx[i]);
    }
    for (int i = 0; i < n; i++) {
        const float *seg = o[2] + (size_t)i * k->out_count[2];
        if ((st = take_crop(k, &k->jobs[first + i], &k->geos[i], o[0] + (size_t)i * k->out_count[0],
                            o[1][(size_t)i * k->out_count[1]], seg, out, capacity, count, err)))
            return st;
    }
    return KEYER_OK;
}

/* The landmark model on jobs [0, n): in chunks of the batch, the rest one by one. */
static keyer_status run_jobs(keyer_people *k, int n_jobs, keyer_person *out, int capacity,
                             int *count, keyer_error *err)
{
    int done = 0;
    while (done < n_jobs) {
        int left = n_jobs - done;
        int r = (k->rt[1] && left >= 2) ? 1 : 0;
        int n = left < k->rt_batch[r] ? left : k->rt_batch[r];
        keyer_status st = run_chunk(k, r, done, n, out, capacity, count, err);
        if (st)
            return st;
        done += n;
    }
    return KEYER_OK;
}

/* A frame's steps before the landmarks: detection (the caller's whole-frame detections and the
 * tiles), tracking, this frame's crops in k->jobs[0 .. k->n_jobs); the tracking state is
 * dropped on an error. */
static keyer_status begin(keyer_people *k, const keyer_frame *frame,
                          const keyer_detection *given, int n_given, keyer_error *err)
{
    k->n_jobs = 0;
    keyer_status st = check_frame(k, frame, "keyer_people_run", err);
    if (st)
        return st;
    if (k->frame_w != frame->width || k->frame_h != frame->height)
        keyer_people_reset(k); /* a new geometry: nothing carries over */
    k->frame_w = frame->width;
    k->frame_h = frame->height;
    int n_dets = 0, n_tracks = 0;
    if ((st = kr_people_det_run(&k->det, frame, given, n_given, &n_dets, err)))
        goto fail;
    if (n_dets > k->p.max_people)
        n_dets = k->p.max_people;
    /* the tracker works in normalised coordinates */
    keyer_detection norm[KR_PEOPLE_MAX_DETECTIONS];
    float fw = (float)frame->width, fh = (float)frame->height;
    for (int i = 0; i < n_dets; i++) {
        norm[i] = k->det.dets[i];
        norm[i].xmin /= fw;
        norm[i].xmax /= fw;
        norm[i].ymin /= fh;
        norm[i].ymax /= fh;
        for (int j = 0; j < norm[i].num_keypoints; j++) {
            norm[i].keypoints[j][0] /= fw;
            norm[i].keypoints[j][1] /= fh;
        }
    }
    int cap = (int)(sizeof(k->tracks) / sizeof(k->tracks[0]));
    if ((st = keyer_tracker_update(k->tracker, norm, n_dets, k->tracks, cap, &n_tracks, err)))
        goto fail;
    for (int i = 0; i < k->p.max_people; i++)
        k->slots[i].seen = k->slots[i].mask_now = 0;
    /* this frame's crops: matched tracks first (their detection or landmarks), then tracks
     * followed by their landmarks alone */
    int n_jobs = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < n_tracks && n_jobs < k->p.max_people; t++) {
            const keyer_track *tr = &k->tracks[t];
            if ((tr->misses == 0) != (pass == 0))
                continue;
            person_slot *s = slot_of(k, tr->id, pass == 0);
            if (!s || (pass == 1 && !s->has_roi))
                continue;
            job *jb = &k->jobs[n_jobs];
            jb->slot = (int)(s - k->slots);
            jb->frame = frame;
            const keyer_detection *d = &tr->box;
            jb->has_det_roi = pass == 0 &&
                              roi_from_points(k, d->keypoints[0][0] * fw, d->keypoints[0][1] * fh,
                                              d->keypoints[1][0] * fw, d->keypoints[1][1] * fh,
                                              &jb->det_roi);
            jb->from_landmarks = s->has_roi;
            if (!s->has_roi) {
                if (!jb->has_det_roi)
                    continue;
                jb->roi = jb->det_roi;
            } else {
                jb->roi = s->roi;
            }
            s->seen = 1;
            jb->score = pass == 0 ? tr->box.score : 0.0f;
            keyer_detection px = tr->box; /* back to pixels */
            px.xmin *= fw;
            px.xmax *= fw;
            px.ymin *= fh;
            px.ymax *= fh;
            for (int q = 0; q < px.num_keypoints; q++) {
                px.keypoints[q][0] *= fw;
                px.keypoints[q][1] *= fh;
            }
            keyer_person_box(&px, jb->box);
            n_jobs++;
        }
    /* people no longer tracked free their slots */
    for (int i = 0; i < k->p.max_people; i++)
        if (k->slots[i].id && !k->slots[i].seen) {
            int alive = 0;
            for (int t = 0; t < n_tracks && !alive; t++)
                alive = k->tracks[t].id == k->slots[i].id;
            if (!alive)
                k->slots[i].id = 0;
            k->slots[i].has_mask = alive && k->slots[i].has_mask;
        }
    k->n_jobs = n_jobs;
    k->n_retry = 0;
    return KEYER_OK;
fail:
    keyer_people_reset(k);
    return st;
}

static keyer_status run(keyer_people *k, const keyer_frame *frame, const keyer_detection *given,
                        int n_given, keyer_person *out, int capacity, int *count,
                        keyer_error *err)
{
    if (!k || !frame || !count || capacity < 0 || (capacity > 0 && !out) || n_given < 0 ||
        (n_given > 0 && !given))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_run: NULL argument or negative count");
    *count = 0;
    if (k->external)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_run: this keyer has no landmark model of its own");
    keyer_status st = begin(k, frame, given, n_given, err);
    if (st)
        return st;
    /* landmarks in chunks of the batch, the rest one by one; then once more the crops that
     * lost their person, from their detections */
    if ((st = run_jobs(k, k->n_jobs, out, capacity, count, err)))
        goto fail;
    if (k->n_retry > 0) {
        int n_retry = k->n_retry;
        memcpy(k->jobs, k->retry, (size_t)n_retry * sizeof(k->jobs[0]));
        if ((st = run_jobs(k, n_retry, out, capacity, count, err)))
            goto fail;
    }
    return KEYER_OK;
fail:
    keyer_people_reset(k);
    return st;
}

keyer_status keyer_people_run(keyer_people *k, const keyer_frame *frame, keyer_person *out,
                              int capacity, int *count, keyer_error *err)
{
    return run(k, frame, NULL, 0, out, capacity, count, err);
}

keyer_status keyer_people_run_detections(keyer_people *k, const keyer_frame *frame,
                                         const keyer_detection *dets, int n_dets,
                                         keyer_person *out, int capacity, int *count,
                                         keyer_error *err)
{
    static const keyer_detection none[1];
    return run(k, frame, dets ? dets : none, dets ? n_dets : 0, out, capacity, count, err);
}

keyer_status keyer_people_mask(const keyer_people *k, keyer_frame *mask, keyer_error *err)
{
    if (!k || !mask)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_mask: NULL argument");
    if (!k->frame_w)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_mask: no frame has been analysed");
    if (keyer_frame_check(mask, err))
        return keyer_error_prefix(err, "keyer_people_mask: ");
    if (mask->memory != KEYER_MEMORY_HOST || (mask->format != KEYER_PIXEL_FORMAT_GRAYF32 &&
                                              mask->format != KEYER_PIXEL_FORMAT_GRAY8))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_people_mask: the mask must be a host gray8 or grayf32 "
                               "frame (got %s)", keyer_pixel_format_name(mask->format));
    int w = mask->width, h = mask->height, f32 = mask->format == KEYER_PIXEL_FORMAT_GRAYF32;
    for (int j = 0; j < h; j++)
        memset(mask->data[0] + (ptrdiff_t)j * mask->stride[0], 0,
               (size_t)w * (f32 ? sizeof(float) : 1));
    float sx = (float)k->frame_w / (float)w, sy = (float)k->frame_h / (float)h;
    float kx = (float)k->seg_w / (float)k->lm_w, ky = (float)k->seg_h / (float)k->lm_h;
    for (int n = 0; n < k->p.max_people; n++) {
        const person_slot *s = &k->slots[n];
        if (!s->id || !s->mask_now)
            continue;
        /* the crop's corners in mask pixels: tensor corners -> frame (the inverse's inverse) */
        keyer_prepare_geometry g;
        memset(&g, 0, sizeof(g));
        float inv2[6];
        keyer_prepare_geometry ig = {{0, 0, 0, 0}, {s->inv[0], s->inv[1], s->inv[2], s->inv[3],
                                                    s->inv[4], s->inv[5]}};
        if (!kr_geo_invert(&ig, inv2))
            continue;
        memcpy(g.matrix, inv2, sizeof(inv2));
        float lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
        for (int c = 0; c < 4; c++) {
            float fx, fy;
            kr_geo_apply(&g, (c & 1) ? (float)k->lm_w : 0.0f, (c & 2) ? (float)k->lm_h : 0.0f,
                         &fx, &fy);
            lo_x = fminf(lo_x, fx / sx);
            hi_x = fmaxf(hi_x, fx / sx);
            lo_y = fminf(lo_y, fy / sy);
            hi_y = fmaxf(hi_y, fy / sy);
        }
        if (!(hi_x > 0 && hi_y > 0 && lo_x < (float)w && lo_y < (float)h))
            continue;
        int i0 = (int)fmaxf(floorf(lo_x), 0.0f), i1 = (int)fminf(ceilf(hi_x), (float)w);
        int j0 = (int)fmaxf(floorf(lo_y), 0.0f), j1 = (int)fminf(ceilf(hi_y), (float)h);
        const float *inv = s->inv;
        for (int j = j0; j < j1; j++) {
            uint8_t *row = mask->data[0] + (ptrdiff_t)j * mask->stride[0];
            for (int i = i0; i < i1; i++) {
                float fx = ((float)i + 0.5f) * sx, fy = ((float)j + 0.5f) * sy;
                float tx = inv[0] * fx + inv[1] * fy + inv[2];
                float ty = inv[3] * fx + inv[4] * fy + inv[5];
                float v = sample_grid(s->mask, k->seg_w, k->seg_h, tx * kx - 0.5f,
                                      ty * ky - 0.5f);
                if (f32) {
                    float *d = (float *)row + i;
                    *d = v > *d ? v : *d;
                } else {
                    uint8_t q = (uint8_t)(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f + 0.5f);
                    row[i] = q > row[i] ? q : row[i];
                }
            }
        }
    }
    return KEYER_OK;
}

/* ---- the steps for an external landmark model (vision/people_steps.h) ------------------------ */

keyer_status kr_people_create_external(const keyer_people_params *params, keyer_people **out,
                                       keyer_error *err)
{
    return create(params, 1, out, err);
}

void kr_people_grids(const keyer_people *k, int *input, int *seg_w, int *seg_h)
{
    *input = k->lm_w;
    *seg_w = k->seg_w;
    *seg_h = k->seg_h;
}

keyer_status kr_people_begin(keyer_people *k, const keyer_frame *frame,
                             const keyer_detection *dets, int n_dets, int *jobs,
                             keyer_error *err)
{
    static const keyer_detection none[1];
    *jobs = 0;
    if (!frame || n_dets < 0 || (n_dets > 0 && !dets))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_people_begin: NULL frame or bad detections");
    keyer_status st = begin(k, frame, dets ? dets : none, dets ? n_dets : 0, err);
    if (!st)
        *jobs = k->n_jobs;
    return st;
}

void kr_people_job(const keyer_people *k, int i, keyer_roi *roi, const keyer_frame **frame)
{
    *roi = k->jobs[i].roi;
    *frame = k->jobs[i].frame;
}

keyer_status kr_people_add(keyer_people *k, int i, const float *points, float presence,
                           const float *seg, const keyer_prepare_geometry *geo,
                           keyer_error *err)
{
    int count = 0;
    return take_crop(k, &k->jobs[i], geo, points, presence, seg, NULL, 0, &count, err);
}

int kr_people_retries(keyer_people *k)
{
    int n = k->n_retry;
    if (n > 0)
        memcpy(k->jobs, k->retry, (size_t)n * sizeof(k->jobs[0]));
    k->n_retry = 0;
    k->n_jobs = n;
    return n;
}
