/*
 * Face detection decoding against the facts in docs/models.md 3.2:
 * anchor layout, and the decoded faces of the reference model outputs on the test photos.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/detect.h"
#include "testutil.h"

static void test_anchors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_detector *d = NULL;
    keyer_detector_params p = keyer_detector_params_face_short();
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_OK);
    assert_int_equal(keyer_detector_anchor_count(d), 896);
    float x, y;
    assert_int_equal(keyer_detector_anchor(d, 0, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 0.03125f, 1e-7);
    assert_float_equal(y, 0.03125f, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 1, &x, &y, &err), KEYER_OK); /* 2 per cell */
    assert_float_equal(x, 0.03125f, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 512, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 0.0625f, 1e-7);
    assert_float_equal(y, 0.0625f, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 512 + 6, &x, &y, &err), KEYER_OK); /* 6 per cell */
    assert_float_equal(x, 0.1875f, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 896, &x, &y, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_detector_destroy(&d);
    p = keyer_detector_params_face_full();
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_OK);
    assert_int_equal(keyer_detector_anchor_count(d), 2304);
    assert_int_equal(keyer_detector_anchor(d, 0, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 1.0f / 96.0f, 1e-7);
    keyer_detector_destroy(&d);
    keyer_detector_destroy(&d);
    /* Bad parameters fail cleanly. */
    p.num_coords = 8;
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "keypoints"));
    p = keyer_detector_params_face_full();
    p.num_layers = 0;
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(d);
}

/* Reads a reference output from tests/data/reference or ../shared; NULL if absent. */
static float *load_ref(const char *model, const char *photo, const char *name, size_t *n)
{
    char rel[512], path[1024];
    snprintf(rel, sizeof(rel), "reference/%s/%s/%s.f32", model, photo, name);
    kt_data_path(path, sizeof(path), rel);
    if (!kt_exists(path)) {
        snprintf(rel, sizeof(rel), "reference/outputs/%s/%s/%s.f32", model, photo, name);
        if (!kt_shared_path(path, sizeof(path), rel))
            return NULL;
    }
    size_t bytes = 0;
    float *f = kt_read_file(path, &bytes);
    *n = bytes / sizeof(float);
    return f;
}

typedef struct {
    const char *model, *photo, *boxes, *scores;
    int expect_faces;
    float score, xmin, xmax, ymin, ymax; /* from docs/models.md 3.2 "Sanity check" */
} face_case;

static const face_case cases[] = {
    {"face-short", "grace_hopper", "regressors", "classificators", 1, 0.911f, 0.343f, 0.700f,
     0.225f, 0.582f},
    {"face-full", "grace_hopper", "reshaped_regressor_face_4", "reshaped_classifier_face_4", 1,
     0.794f, 0.343f, 0.700f, 0.225f, 0.582f},
    {"face-short", "messi5", "regressors", "classificators", 0, 0, 0, 0, 0, 0},
    {"face-full", "messi5", "reshaped_regressor_face_4", "reshaped_classifier_face_4", 1, 0.641f,
     -1, -1, -1, -1},
};

static void test_decode_reference_outputs(void **state)
{
    (void)state;
    int ran = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const face_case *fc = &cases[c];
        size_t nb = 0, ns = 0;
        float *boxes = load_ref(fc->model, fc->photo, fc->boxes, &nb);
        float *scores = load_ref(fc->model, fc->photo, fc->scores, &ns);
        if (!boxes || !scores) {
            printf("skipping %s/%s: reference outputs not found\n", fc->model, fc->photo);
            free(boxes);
            free(scores);
            continue;
        }
        keyer_detector_params p = strcmp(fc->model, "face-short") ? keyer_detector_params_face_full()
                                                                   : keyer_detector_params_face_short();
        keyer_detector *d = NULL;
        keyer_error err = {0};
        assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_OK);
        assert_int_equal(ns, (size_t)keyer_detector_anchor_count(d));
        assert_int_equal(nb, ns * 16);
        keyer_detection dets[8];
        int n = -1;
        assert_int_equal(keyer_detector_decode(d, boxes, scores, dets, 8, &n, &err), KEYER_OK);
        printf("%s/%s: %d face(s)", fc->model, fc->photo, n);
        for (int i = 0; i < n; i++)
            printf(" [score %.3f x %.3f-%.3f y %.3f-%.3f]", dets[i].score, dets[i].xmin,
                   dets[i].xmax, dets[i].ymin, dets[i].ymax);
        printf("\n");
        assert_int_equal(n, fc->expect_faces);
        if (n == 1) {
            assert_float_equal(dets[0].score, fc->score, 0.0015);
            if (fc->xmin >= 0 && !strcmp(fc->model, "face-short")) {
                assert_float_equal(dets[0].xmin, fc->xmin, 0.0015);
                assert_float_equal(dets[0].xmax, fc->xmax, 0.0015);
                assert_float_equal(dets[0].ymin, fc->ymin, 0.0015);
                assert_float_equal(dets[0].ymax, fc->ymax, 0.0015);
            } else if (fc->xmin >= 0) { /* "almost the same place" as the short-range face */
                keyer_detection ref = {fc->xmin, fc->ymin, fc->xmax, fc->ymax, 1, 0, {{0}}};
                float iou = keyer_detection_iou(&dets[0], &ref);
                printf("  IoU with the short-range face: %.3f\n", iou);
                assert_true(iou > 0.7f);
            }
            /* Keypoints (eyes, nose, mouth) lie inside the box. */
            for (int k = 0; k < 4; k++) {
                assert_true(dets[0].keypoints[k][0] > dets[0].xmin);
                assert_true(dets[0].keypoints[k][0] < dets[0].xmax);
                assert_true(dets[0].keypoints[k][1] > dets[0].ymin);
                assert_true(dets[0].keypoints[k][1] < dets[0].ymax);
            }
        }
        /* Capacity 0 reports no detections and writes nothing. */
        assert_int_equal(keyer_detector_decode(d, boxes, scores, NULL, 0, &n, &err), KEYER_OK);
        assert_int_equal(n, 0);
        keyer_detector_destroy(&d);
        free(boxes);
        free(scores);
        ran++;
    }
    assert_true(ran >= 2); /* the committed grace_hopper fixtures always exist */
}

static void test_nms_synthetic(void **state)
{
    (void)state;
    /* Two anchors predicting overlapping boxes merge (weighted), a distant one stays. */
    keyer_detector_params p = keyer_detector_params_face_short();
    keyer_detector *d = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_OK);
    int n = keyer_detector_anchor_count(d);
    float *boxes = calloc((size_t)n * 16, sizeof(float));
    float *scores = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        scores[i] = -50.0f;
    /* Anchors 0 and 1 share the centre (0.03125, 0.03125); anchor 2 is at x = 0.09375. */
    for (int i = 0; i < 3; i++) {
        boxes[i * 16 + 2] = 0.2f * 128; /* w = 0.2 */
        boxes[i * 16 + 3] = 0.2f * 128;
    }
    boxes[1 * 16 + 0] = 0.01f * 128;   /* shift anchor 1's box by 0.01 */
    boxes[2 * 16 + 0] = 0.5f * 128;    /* anchor 2's box far away */
    scores[0] = 3.0f;                  /* 0.9526 */
    scores[1] = 1.0f;                  /* 0.7311 */
    scores[2] = 2.0f;                  /* 0.8808 */
    keyer_detection dets[4];
    int got = 0;
    assert_int_equal(keyer_detector_decode(d, boxes, scores, dets, 4, &got, &err), KEYER_OK);
    assert_int_equal(got, 2);
    float s0 = 1 / (1 + expf(-3.0f)), s1 = 1 / (1 + expf(-1.0f));
    assert_float_equal(dets[0].score, s0, 1e-6);
    float want_xmin = (s0 * (0.03125f - 0.1f) + s1 * (0.03125f + 0.01f - 0.1f)) / (s0 + s1);
    assert_float_equal(dets[0].xmin, want_xmin, 1e-6);
    assert_float_equal(dets[1].score, 1 / (1 + expf(-2.0f)), 1e-6);
    /* NaN scores and negative sizes are dropped. */
    scores[0] = NAN;
    boxes[2 * 16 + 2] = -5;
    assert_int_equal(keyer_detector_decode(d, boxes, scores, dets, 4, &got, &err), KEYER_OK);
    assert_int_equal(got, 1);
    assert_float_equal(dets[0].score, s1, 1e-6);
    free(boxes);
    free(scores);
    keyer_detector_destroy(&d);
}

static void test_letterbox(void **state)
{
    (void)state;
    keyer_letterbox lb = keyer_letterbox_fit(640, 480, 128, 128);
    assert_float_equal(lb.pad_top, 0.125f, 1e-6);
    assert_float_equal(lb.pad_bottom, 0.125f, 1e-6);
    assert_float_equal(lb.pad_left, 0.0f, 1e-6);
    keyer_detection d = {0.25f, 0.125f, 0.75f, 0.875f, 1.0f, 1, {{0.5f, 0.5f}}};
    keyer_detections_remove_letterbox(&d, 1, &lb);
    assert_float_equal(d.ymin, 0.0f, 1e-6);
    assert_float_equal(d.ymax, 1.0f, 1e-6);
    assert_float_equal(d.keypoints[0][1], 0.5f, 1e-6);
    lb = keyer_letterbox_fit(480, 640, 192, 192);
    assert_float_equal(lb.pad_left, 0.125f, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_decode_reference_outputs),
        cmocka_unit_test(test_nms_synthetic),
        cmocka_unit_test(test_letterbox),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
