/*
 * SSD anchor generation, BlazeFace box/keypoint decoding and weighted non-maximum suppression,
 * following MediaPipe's SsdAnchorsCalculator, TensorsToDetectionsCalculator and
 * NonMaxSuppressionCalculator (WEIGHTED, IoU) as restated in
 * docs/models.md section 3.2.
 */
#include "keyer/detect.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct keyer_detector {
    keyer_detector_params p;
    int n_anchors;
    float *anchors;        /* [n_anchors][2] centres; w = h = 1 (fixed_anchor_size) */
    keyer_detection *raw;  /* decoded detections above the score threshold */
    int *order;            /* indices into raw, by descending score */
    int *remaining;        /* scratch for NMS */
};

keyer_detector_params keyer_detector_params_face_short(void)
{
    keyer_detector_params p = {0};
    p.input_width = p.input_height = 128;
    p.num_layers = 4;
    p.strides[0] = 8;
    p.strides[1] = p.strides[2] = p.strides[3] = 16;
    p.anchor_offset_x = p.anchor_offset_y = 0.5f;
    p.anchors_per_layer = 2; /* aspect ratio 1.0 + the interpolated anchor */
    p.num_coords = 16;
    p.num_keypoints = 6;
    p.x_scale = p.y_scale = p.w_scale = p.h_scale = 128.0f;
    p.score_clip = 100.0f;
    p.min_score = 0.5f;
    p.min_suppression_iou = 0.3f;
    return p;
}

keyer_detector_params keyer_detector_params_face_full(void)
{
    keyer_detector_params p = keyer_detector_params_face_short();
    p.input_width = p.input_height = 192;
    p.num_layers = 1;
    p.strides[0] = 4;
    p.anchors_per_layer = 1; /* interpolated anchor disabled */
    p.x_scale = p.y_scale = p.w_scale = p.h_scale = 192.0f;
    p.min_score = 0.6f;
    return p;
}

keyer_detector_params keyer_detector_params_pose(void)
{
    keyer_detector_params p = keyer_detector_params_face_short();
    p.input_width = p.input_height = 224;
    p.num_layers = 5;
    p.strides[0] = 8;
    p.strides[1] = 16;
    p.strides[2] = p.strides[3] = p.strides[4] = 32;
    p.anchors_per_layer = 2; /* aspect ratio 1.0 + the interpolated anchor */
    p.num_coords = 12;
    p.num_keypoints = 4;
    p.x_scale = p.y_scale = p.w_scale = p.h_scale = 224.0f;
    p.min_score = 0.5f;
    return p;
}

/* Counts (out == NULL) or writes anchor centres. */
static int make_anchors(const keyer_detector_params *p, float *out)
{
    int n = 0;
    for (int layer = 0; layer < p->num_layers;) {
        int last = layer;
        while (last < p->num_layers && p->strides[last] == p->strides[layer])
            last++;
        int per_cell = (last - layer) * p->anchors_per_layer;
        int stride = p->strides[layer];
        int fh = (p->input_height + stride - 1) / stride;
        int fw = (p->input_width + stride - 1) / stride;
        for (int y = 0; y < fh; y++)
            for (int x = 0; x < fw; x++)
                for (int a = 0; a < per_cell; a++, n++)
                    if (out) {
                        out[2 * n] = ((float)x + p->anchor_offset_x) / (float)fw;
                        out[2 * n + 1] = ((float)y + p->anchor_offset_y) / (float)fh;
                    }
        layer = last;
    }
    return n;
}

keyer_status keyer_detector_create(const keyer_detector_params *params, keyer_detector **out,
                                   keyer_error *err)
{
    if (!params || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "detector: NULL argument");
    *out = NULL;
    const keyer_detector_params *p = params;
    if (p->input_width <= 0 || p->input_height <= 0 || p->input_width > 4096 ||
        p->input_height > 4096)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detector: input size %dx%d is out of range", p->input_width,
                               p->input_height);
    if (p->num_layers < 1 || p->num_layers > KEYER_DETECTOR_MAX_LAYERS)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detector: %d layers (1..%d)", p->num_layers,
                               KEYER_DETECTOR_MAX_LAYERS);
    for (int i = 0; i < p->num_layers; i++)
        if (p->strides[i] < 1)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "detector: stride %d of layer %d", p->strides[i], i);
    if (p->anchors_per_layer < 1 || p->anchors_per_layer > 16)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detector: %d anchors per layer", p->anchors_per_layer);
    if (p->num_keypoints < 0 || p->num_keypoints > KEYER_DETECTION_MAX_KEYPOINTS ||
        p->num_coords < 4 + 2 * p->num_keypoints)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detector: %d coordinates cannot hold a box and %d keypoints",
                               p->num_coords, p->num_keypoints);
    if (!(p->x_scale > 0 && p->y_scale > 0 && p->w_scale > 0 && p->h_scale > 0))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detector: scales must be positive");
    keyer_detector *d = calloc(1, sizeof(*d));
    if (!d)
        goto oom;
    d->p = *p;
    d->n_anchors = make_anchors(p, NULL);
    size_t n = (size_t)d->n_anchors;
    d->anchors = malloc(n * 2 * sizeof(float));
    d->raw = malloc(n * sizeof(keyer_detection));
    d->order = malloc(n * sizeof(int));
    d->remaining = malloc(n * sizeof(int));
    if (!d->anchors || !d->raw || !d->order || !d->remaining)
        goto oom;
    make_anchors(p, d->anchors);
    *out = d;
    return KEYER_OK;
oom:
    keyer_detector_destroy(&d);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "detector: out of memory");
}

void keyer_detector_destroy(keyer_detector **pd)
{
    if (!pd || !*pd)
        return;
    keyer_detector *d = *pd;
    free(d->anchors);
    free(d->raw);
    free(d->order);
    free(d->remaining);
    free(d);
    *pd = NULL;
}

int keyer_detector_anchor_count(const keyer_detector *d) { return d ? d->n_anchors : 0; }

keyer_status keyer_detector_anchor(const keyer_detector *d, int i, float *x, float *y,
                                   keyer_error *err)
{
    if (!d || i < 0 || i >= d->n_anchors || !x || !y)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "detector: no anchor %d", i);
    *x = d->anchors[2 * i];
    *y = d->anchors[2 * i + 1];
    return KEYER_OK;
}

float keyer_detection_iou(const keyer_detection *a, const keyer_detection *b)
{
    float ix0 = fmaxf(a->xmin, b->xmin), iy0 = fmaxf(a->ymin, b->ymin);
    float ix1 = fminf(a->xmax, b->xmax), iy1 = fminf(a->ymax, b->ymax);
    if (ix1 <= ix0 || iy1 <= iy0)
        return 0.0f;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    float ua = (a->xmax - a->xmin) * (a->ymax - a->ymin) + (b->xmax - b->xmin) * (b->ymax - b->ymin) -
               inter;
    return ua > 0 ? inter / ua : 0.0f;
}

/* Insertion of index i into the descending-score order (stable: earlier anchors first). */
static void sort_by_score(const keyer_detection *raw, int *order, int n)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    /* Shell sort, stable enough for equal scores because ties compare by index. */
    for (int gap = n / 2; gap > 0; gap /= 2)
        for (int i = gap; i < n; i++) {
            int v = order[i], j = i;
            while (j >= gap && (raw[order[j - gap]].score < raw[v].score ||
                                (raw[order[j - gap]].score == raw[v].score && order[j - gap] > v))) {
                order[j] = order[j - gap];
                j -= gap;
            }
            order[j] = v;
        }
}

keyer_status keyer_detector_decode(keyer_detector *d, const float *boxes, const float *scores,
                                   keyer_detection *out, int capacity, int *count,
                                   keyer_error *err)
{
    if (!d || !boxes || !scores || !count || capacity < 0 || (capacity > 0 && !out))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "detector decode: NULL argument or negative capacity");
    const keyer_detector_params *p = &d->p;
    *count = 0;
    int n_raw = 0;
    /* Most anchors score far below the threshold: compare their logits first (with a margin,
     * so the exact test below still decides) and skip the exponential. */
    float min_logit = -INFINITY;
    if (p->min_score > 0 && p->min_score < 1)
        min_logit = logf(p->min_score / (1 - p->min_score)) - 1e-3f;
    for (int i = 0; i < d->n_anchors; i++) {
        float logit = scores[i];
        if (isnan(logit) || logit < min_logit)
            continue;
        logit = fminf(fmaxf(logit, -p->score_clip), p->score_clip);
        float score = 1.0f / (1.0f + expf(-logit));
        if (score < p->min_score)
            continue;
        const float *r = boxes + (size_t)i * (size_t)p->num_coords;
        float ax = d->anchors[2 * i], ay = d->anchors[2 * i + 1];
        float cx = r[0] / p->x_scale + ax, cy = r[1] / p->y_scale + ay;
        float w = r[2] / p->w_scale, h = r[3] / p->h_scale;
        if (!(w >= 0.0f) || !(h >= 0.0f) || isnan(cx) || isnan(cy))
            continue;
        keyer_detection *det = &d->raw[n_raw++];
        det->xmin = cx - w / 2;
        det->ymin = cy - h / 2;
        det->xmax = cx + w / 2;
        det->ymax = cy + h / 2;
        det->score = score;
        det->num_keypoints = p->num_keypoints;
        for (int k = 0; k < p->num_keypoints; k++) {
            det->keypoints[k][0] = r[4 + 2 * k] / p->x_scale + ax;
            det->keypoints[k][1] = r[5 + 2 * k] / p->y_scale + ay;
        }
    }
    sort_by_score(d->raw, d->order, n_raw);

    /* Weighted NMS: each round takes the best remaining detection T; every remaining detection
     * overlapping T by more than the threshold (T included) is averaged into it, weighted by
     * score, and removed. The output keeps T's own score. */
    int n_rem = n_raw;
    memcpy(d->remaining, d->order, (size_t)n_raw * sizeof(int));
    int n_out = 0;
    while (n_rem > 0) {
        const keyer_detection *top = &d->raw[d->remaining[0]];
        keyer_detection acc = {0};
        float wsum = 0;
        int kept = 0;
        for (int i = 0; i < n_rem; i++) {
            const keyer_detection *c = &d->raw[d->remaining[i]];
            if (keyer_detection_iou(c, top) > p->min_suppression_iou || i == 0) {
                float w = c->score;
                acc.xmin += c->xmin * w;
                acc.ymin += c->ymin * w;
                acc.xmax += c->xmax * w;
                acc.ymax += c->ymax * w;
                for (int k = 0; k < c->num_keypoints; k++) {
                    acc.keypoints[k][0] += c->keypoints[k][0] * w;
                    acc.keypoints[k][1] += c->keypoints[k][1] * w;
                }
                wsum += w;
            } else {
                d->remaining[kept++] = d->remaining[i];
            }
        }
        keyer_detection res = *top;
        if (wsum > 0) {
            res.xmin = acc.xmin / wsum;
            res.ymin = acc.ymin / wsum;
            res.xmax = acc.xmax / wsum;
            res.ymax = acc.ymax / wsum;
            for (int k = 0; k < top->num_keypoints; k++) {
                res.keypoints[k][0] = acc.keypoints[k][0] / wsum;
                res.keypoints[k][1] = acc.keypoints[k][1] / wsum;
            }
        }
        if (n_out < capacity)
            out[n_out] = res;
        n_out++;
        n_rem = kept;
    }
    *count = n_out < capacity ? n_out : capacity;
    return KEYER_OK;
}

keyer_letterbox keyer_letterbox_fit(int image_width, int image_height, int tensor_width,
                                    int tensor_height)
{
    keyer_letterbox lb = {0, 0, 0, 0};
    if (image_width <= 0 || image_height <= 0 || tensor_width <= 0 || tensor_height <= 0)
        return lb;
    float r_t = (float)tensor_height / (float)tensor_width;
    float r_roi = (float)image_height / (float)image_width;
    if (r_t > r_roi) {
        float pad = (1.0f - r_roi / r_t) / 2.0f;
        lb.pad_top = lb.pad_bottom = pad;
    } else {
        float pad = (1.0f - r_t / r_roi) / 2.0f;
        lb.pad_left = lb.pad_right = pad;
    }
    return lb;
}

void keyer_detections_remove_letterbox(keyer_detection *dets, int count, const keyer_letterbox *lb)
{
    if (!dets || !lb)
        return;
    float sx = 1.0f - lb->pad_left - lb->pad_right, sy = 1.0f - lb->pad_top - lb->pad_bottom;
    if (sx <= 0 || sy <= 0)
        return;
    for (int i = 0; i < count; i++) {
        keyer_detection *d = &dets[i];
        d->xmin = (d->xmin - lb->pad_left) / sx;
        d->xmax = (d->xmax - lb->pad_left) / sx;
        d->ymin = (d->ymin - lb->pad_top) / sy;
        d->ymax = (d->ymax - lb->pad_top) / sy;
        for (int k = 0; k < d->num_keypoints; k++) {
            d->keypoints[k][0] = (d->keypoints[k][0] - lb->pad_left) / sx;
            d->keypoints[k][1] = (d->keypoints[k][1] - lb->pad_top) / sy;
        }
    }
}

void keyer_detections_to_pixels(keyer_detection *dets, int count, const keyer_letterbox *lb,
                                int width, int height)
{
    if (!dets || !lb || width < 1 || height < 1)
        return;
    keyer_detections_remove_letterbox(dets, count, lb);
    float fw = (float)width, fh = (float)height;
    for (int i = 0; i < count; i++) {
        keyer_detection *d = &dets[i];
        d->xmin *= fw;
        d->xmax *= fw;
        d->ymin *= fh;
        d->ymax *= fh;
        for (int k = 0; k < d->num_keypoints; k++) {
            d->keypoints[k][0] *= fw;
            d->keypoints[k][1] *= fh;
        }
    }
}
