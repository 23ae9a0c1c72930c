/*
 * Keying people at a distance (keyer/people.h):
 *  - the pose detector's decoding (keyer_detector_params_pose) on hand-made raw outputs: anchor
 *    layout (2254 anchors: strides 8, 16, then three 32s merged) and known boxes and keypoints;
 *  - keyer_person_box of a known detection;
 *  - the detector and the people keyer on the test photo messi5.jpg (one player);
 *  - end to end on street footage (vtest.avi from Debian's opencv-doc; skipped when absent):
 *    the keying chain with model people (what `keyer IN -o OUT --model people` runs, pose-full)
 *    on the first two frames; on the second, the matte (>= 0.5) covers at least 30% of every
 *    person box (the bounds of the 33 landmarks pose-lite finds for each person with a
 *    detection >= 0.5, from a separate people keyer) and at most 2% of the frame outside all of
 *    them, and at most 2% outside the detector's body boxes;
 *  - two people side by side in one detection (the committed clip tests/data/street_vtest.mp4,
 *    frame 48): both keyed (test_street_pair).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keying.h"
#include "keyer/people.h"
#include "testutil.h"

#define ANCHORS 2254

static void test_pose_anchors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_detector *d = NULL;
    keyer_detector_params p = keyer_detector_params_pose();
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_OK);
    assert_int_equal(keyer_detector_anchor_count(d), ANCHORS);
    float x, y;
    /* stride 8: 28x28 cells, 2 anchors each */
    assert_int_equal(keyer_detector_anchor(d, 0, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 0.5f / 28, 1e-7);
    assert_float_equal(y, 0.5f / 28, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 2 * 29 + 1, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 1.5f / 28, 1e-7);
    assert_float_equal(y, 1.5f / 28, 1e-7);
    /* stride 16 from 1568: 14x14 cells, 2 each */
    assert_int_equal(keyer_detector_anchor(d, 1568, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 0.5f / 14, 1e-7);
    /* stride 32 from 1960: 7x7 cells, 3 layers x 2 = 6 each */
    assert_int_equal(keyer_detector_anchor(d, 1960, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 0.5f / 7, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 1960 + 5, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 0.5f / 7, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, 1960 + 6, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 1.5f / 7, 1e-7);
    assert_int_equal(keyer_detector_anchor(d, ANCHORS - 1, &x, &y, &err), KEYER_OK);
    assert_float_equal(x, 6.5f / 7, 1e-7);
    assert_float_equal(y, 6.5f / 7, 1e-7);
    keyer_detector_destroy(&d);
}

/* Two people written into raw outputs; decoding gives back their boxes and keypoints. */
static void test_pose_decode_known(void **state)
{
    (void)state;
    float *boxes = calloc(ANCHORS * 12, sizeof(float));
    float *scores = malloc(ANCHORS * sizeof(float));
    assert_non_null(boxes);
    assert_non_null(scores);
    for (int i = 0; i < ANCHORS; i++)
        scores[i] = -10.0f;
    /* person A at anchor 2 * (28 * 10 + 5) (stride 8, cell x 5, y 10): centre offset (+3, -2)
     * px, 40x40 box, hips 30 px below, body point 60 px above the hips */
    int a = 2 * (28 * 10 + 5);
    float *r = boxes + (size_t)a * 12;
    const float ra[12] = {3, -2, 40, 40, 3, 28, 3, -32, 1, 10, 2, -20};
    memcpy(r, ra, sizeof(ra));
    scores[a] = 2.0f; /* 0.881 */
    /* person B at anchor 1960 + 6 * (7 * 3 + 4) (stride 32, cell x 4, y 3) */
    int b = 1960 + 6 * (7 * 3 + 4);
    r = boxes + (size_t)b * 12;
    const float rb[12] = {-5, 4, 44, 44, -5, 40, -6, -50, -4, 12, -5, -30};
    memcpy(r, rb, sizeof(rb));
    scores[b] = 0.5f; /* 0.622 */
    scores[b + 1] = -0.1f; /* 0.475: under min_score 0.5 */
    keyer_error err = {0};
    keyer_detector *d = NULL;
    keyer_detector_params p = keyer_detector_params_pose();
    assert_int_equal(keyer_detector_create(&p, &d, &err), KEYER_OK);
    keyer_detection out[4];
    int n = 0;
    assert_int_equal(keyer_detector_decode(d, boxes, scores, out, 4, &n, &err), KEYER_OK);
    assert_int_equal(n, 2);
    const float ax = 5.5f / 28, ay = 10.5f / 28, bx = 4.5f / 7, by = 3.5f / 7;
    const float *raw[2] = {ra, rb};
    const float anc[2][2] = {{ax, ay}, {bx, by}};
    const float score[2] = {1.0f / (1.0f + expf(-2.0f)), 1.0f / (1.0f + expf(-0.5f))};
    for (int k = 0; k < 2; k++) {
        const keyer_detection *o = &out[k];
        float cx = raw[k][0] / 224 + anc[k][0], cy = raw[k][1] / 224 + anc[k][1];
        float w = raw[k][2] / 224, h = raw[k][3] / 224;
        assert_float_equal(o->score, score[k], 1e-6);
        assert_float_equal(o->xmin, cx - w / 2, 1e-6);
        assert_float_equal(o->ymin, cy - h / 2, 1e-6);
        assert_float_equal(o->xmax, cx + w / 2, 1e-6);
        assert_float_equal(o->ymax, cy + h / 2, 1e-6);
        assert_int_equal(o->num_keypoints, 4);
        for (int q = 0; q < 4; q++) {
            assert_float_equal(o->keypoints[q][0], raw[k][4 + 2 * q] / 224 + anc[k][0], 1e-6);
            assert_float_equal(o->keypoints[q][1], raw[k][5 + 2 * q] / 224 + anc[k][1], 1e-6);
        }
    }
    keyer_detector_destroy(&d);
    free(boxes);
    free(scores);
}

static void test_person_box(void **state)
{
    (void)state;
    keyer_detection d;
    memset(&d, 0, sizeof(d));
    d.num_keypoints = 4;
    /* upright: hips (100, 200), body point 80 above: a 160 x 65.6 box around the hips */
    d.keypoints[0][0] = 100;
    d.keypoints[0][1] = 200;
    d.keypoints[1][0] = 100;
    d.keypoints[1][1] = 120;
    float b[4];
    keyer_person_box(&d, b);
    assert_float_equal(b[0], 100 - 0.41f * 80, 1e-4);
    assert_float_equal(b[1], 120, 1e-4);
    assert_float_equal(b[2], 100 + 0.41f * 80, 1e-4);
    assert_float_equal(b[3], 280, 1e-4);
    /* lying along x: the box turns with it */
    d.keypoints[1][0] = 180;
    d.keypoints[1][1] = 200;
    keyer_person_box(&d, b);
    assert_float_equal(b[0], 20, 1e-4);
    assert_float_equal(b[2], 180, 1e-4);
    assert_float_equal(b[1], 200 - 0.41f * 80, 1e-4);
    /* no keypoints: the detection's box */
    d.num_keypoints = 0;
    d.xmin = 1, d.ymin = 2, d.xmax = 3, d.ymax = 4;
    keyer_person_box(&d, b);
    assert_true(b[0] == 1 && b[1] == 2 && b[2] == 3 && b[3] == 4);
}

static void test_params(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_people *pp = NULL;
    keyer_people_params p = keyer_people_params_defaults();
    assert_int_equal(p.model, KEYER_POSE_MODEL_FULL);
    assert_int_equal(p.max_people, 16);
    p.max_people = 0;
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(pp);
    p = keyer_people_params_defaults();
    p.batch = 17;
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_people_params_defaults();
    p.detector_model = "/nonexistent/pose_detection.tflite";
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/pose_detection.tflite"));
    p = keyer_people_params_defaults();
    p.detector_model = "face-short"; /* a detector, but not the pose detector */
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "not MediaPipe's pose detector"));
    p = keyer_people_params_defaults();
    p.weak_mask = 1.5f;
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_people_params_defaults();
    p.fallback_model = "/nonexistent/fallback.tflite";
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/fallback.tflite"));
    keyer_people_destroy(&pp);
    keyer_people_destroy(NULL);
    keyer_people_reset(NULL);
}

/* Fraction of the GRAY8 matte >= 128 inside @p b, and of the frame covered outside all
 * @p n boxes. */
static double box_coverage(const keyer_frame *m, const float *b)
{
    long in = 0, area = 0;
    for (int y = (int)fmaxf(floorf(b[1]), 0); y < (int)fminf(ceilf(b[3]), (float)m->height); y++)
        for (int x = (int)fmaxf(floorf(b[0]), 0); x < (int)fminf(ceilf(b[2]), (float)m->width);
             x++) {
            area++;
            in += m->data[0][y * m->stride[0] + x] >= 128;
        }
    return area ? (double)in / (double)area : 1.0;
}

static double outside(const keyer_frame *m, const float (*b)[4], int n)
{
    long out = 0;
    for (int y = 0; y < m->height; y++)
        for (int x = 0; x < m->width; x++) {
            if (m->data[0][y * m->stride[0] + x] < 128)
                continue;
            int inside = 0;
            for (int k = 0; k < n && !inside; k++)
                inside = x >= b[k][0] && x < b[k][2] && y >= b[k][1] && y < b[k][3];
            out += !inside;
        }
    return (double)out / ((double)m->width * (double)m->height);
}

static int have_models(void)
{
    char a[1024], b[1024];
    kt_model_path(a, sizeof(a), "pose_detection.tflite");
    kt_model_path(b, sizeof(b), "pose_landmark_full.tflite");
    return kt_exists(a) && kt_exists(b);
}

/* messi5.jpg: one player, found by the detector (hips below the head) and keyed. */
static void test_photo(void **state)
{
    (void)state;
    char path[1024];
    kt_data_path(path, sizeof(path), "messi5.jpg");
    if (!have_models() || !kt_exists(path)) {
        print_message("skipped: models or %s missing\n", path);
        skip();
    }
    keyer_error err = {0};
    keyer_frame *img = NULL, *mask = NULL;
    assert_int_equal(keyer_frame_create(&img, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, img, &err), KEYER_OK);
    keyer_people_params p = keyer_people_params_defaults();
    p.threads = 2;
    keyer_people *pp = NULL;
    assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_OK);
    assert_int_equal(keyer_people_mask(pp, img, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_detection dets[8];
    int n = 0;
    assert_int_equal(keyer_people_detect(pp, img, dets, 8, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    assert_true(dets[0].score > 0.8f);
    /* the head box lies inside the photo's upper half; the hips below its centre */
    float hx = 0.5f * (dets[0].xmin + dets[0].xmax), hy = 0.5f * (dets[0].ymin + dets[0].ymax);
    assert_true(hx > 0 && hx < (float)img->width && hy > 0 && hy < 0.5f * (float)img->height);
    assert_true(dets[0].keypoints[0][1] > hy);
    assert_true(dets[0].keypoints[1][1] < dets[0].keypoints[0][1]); /* body point above */
    keyer_person people[4];
    assert_int_equal(keyer_people_run(pp, img, people, 4, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    assert_true(people[0].presence >= 0.5f && people[0].score > 0.8f);
    assert_int_equal(people[0].from_landmarks, 0);
    assert_int_equal(keyer_frame_create(&mask, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(mask, KEYER_PIXEL_FORMAT_GRAY8, img->width, img->height,
                                       NULL, &err),
                     KEYER_OK);
    assert_int_equal(keyer_people_mask(pp, mask, &err), KEYER_OK);
    /* the body mask fills its landmarks' box and little else */
    double cov = box_coverage(mask, people[0].body);
    double out = outside(mask, (const float(*)[4])people[0].body, 1);
    print_message("messi5: coverage %.3f, outside %.4f\n", cov, out);
    assert_true(cov >= 0.25); /* a sliding player: the box spans the stretched limbs */
    assert_true(out <= 0.05);
    /* the second frame follows the person from its landmarks */
    assert_int_equal(keyer_people_run(pp, img, people, 4, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    assert_int_equal(people[0].from_landmarks, 1);
    /* a CUDA or bad mask is refused */
    keyer_frame bad = *mask;
    bad.format = KEYER_PIXEL_FORMAT_RGB24;
    assert_int_equal(keyer_people_mask(pp, &bad, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_people_destroy(&pp);
    assert_null(pp);
    keyer_frame_destroy(&mask);
    keyer_frame_destroy(&img);
}

/* The fallback segmentation of weak crops: forced on every crop (weak_mask 1) its mask only
 * adds to the body mask (the maximum of both, first frame: no temporal blend), and it adds
 * something; off ("none") the mask is the body mask alone. */
static void test_fallback(void **state)
{
    (void)state;
    char path[1024], selfie[1024];
    kt_data_path(path, sizeof(path), "messi5.jpg");
    kt_model_path(selfie, sizeof(selfie), "selfie_segmentation.tflite");
    if (!have_models() || !kt_exists(path) || !kt_exists(selfie)) {
        print_message("skipped: models or %s missing\n", path);
        skip();
    }
    keyer_error err = {0};
    keyer_frame *img = NULL, *m[2] = {NULL, NULL};
    assert_int_equal(keyer_frame_create(&img, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, img, &err), KEYER_OK);
    for (int v = 0; v < 2; v++) {
        keyer_people_params p = keyer_people_params_defaults();
        p.threads = 2;
        p.fallback_model = v ? "selfie" : "none";
        p.weak_mask = 1.0f;
        keyer_people *pp = NULL;
        keyer_person people[4];
        int n = 0;
        assert_int_equal(keyer_people_create(&p, &pp, &err), KEYER_OK);
        assert_int_equal(keyer_people_run(pp, img, people, 4, &n, &err), KEYER_OK);
        assert_int_equal(n, 1);
        assert_int_equal(keyer_frame_create(&m[v], &err), KEYER_OK);
        assert_int_equal(keyer_frame_alloc(m[v], KEYER_PIXEL_FORMAT_GRAYF32, img->width,
                                           img->height, NULL, &err),
                         KEYER_OK);
        assert_int_equal(keyer_people_mask(pp, m[v], &err), KEYER_OK);
        keyer_people_destroy(&pp);
    }
    double added = 0;
    for (int y = 0; y < img->height; y++) {
        const float *a = (const float *)(m[0]->data[0] + (ptrdiff_t)y * m[0]->stride[0]);
        const float *b = (const float *)(m[1]->data[0] + (ptrdiff_t)y * m[1]->stride[0]);
        for (int x = 0; x < img->width; x++) {
            if (b[x] < a[x] - 1e-6f)
                fail_msg("pixel (%d,%d): %g with the fallback, %g without", x, y, (double)b[x],
                         (double)a[x]);
            added += b[x] - a[x];
        }
    }
    print_message("messi5: the fallback adds %.1f pixels of mask\n", added);
    assert_true(added > 1.0);
    keyer_frame_destroy(&m[0]);
    keyer_frame_destroy(&m[1]);
    keyer_frame_destroy(&img);
}

/* A clip's case: its frames decoded on the CPU as RGB24, the keying chain with model people
 * (2 threads) and a reference people keyer with pose-lite (2 threads), whose boxes are checked
 * against the chain's matte. */
typedef struct clip_case {
    keyer_reader *r;
    keyer_frame *f, *matte;
    keyer_keying *k;
    keyer_people *ref;
} clip_case;

static void clip_open(clip_case *c, const char *path)
{
    keyer_error err = {0};
    memset(c, 0, sizeof(*c));
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.keep_streams = 0;
    assert_int_equal(keyer_reader_open(path, &rp, &c->r, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&c->f, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&c->matte, &err), KEYER_OK);
    keyer_keying_params kp = keyer_keying_params_defaults();
    kp.model = KEYER_PEOPLE_MODEL;
    kp.threads = 2;
    assert_int_equal(keyer_keying_create(&kp, &c->k, &err), KEYER_OK);
    keyer_people_params pp = keyer_people_params_defaults();
    pp.threads = 2;
    pp.model = KEYER_POSE_MODEL_LITE; /* the boxes from another landmark model than the mask's */
    assert_int_equal(keyer_people_create(&pp, &c->ref, &err), KEYER_OK);
}

static void clip_close(clip_case *c)
{
    keyer_people_destroy(&c->ref);
    keyer_keying_destroy(&c->k);
    keyer_reader_destroy(&c->r);
    keyer_frame_destroy(&c->f);
    keyer_frame_destroy(&c->matte);
}

/* The body boxes of the reference's people with a score >= 0.5 into @p boxes (their count
 * returned), each covered by the matte (>= 0.5) for at least 30% (printed after @p what). */
static int covered_boxes(const keyer_frame *matte, const keyer_person *people, int np,
                         const char *what, float boxes[][4])
{
    int nb = 0;
    for (int i = 0; i < np; i++) {
        if (people[i].score < 0.5f)
            continue;
        memcpy(boxes[nb], people[i].body, sizeof(boxes[nb]));
        double cov = box_coverage(matte, boxes[nb]);
        print_message("%sperson %u: box %.0f,%.0f %.0fx%.0f, coverage %.3f\n", what,
                      people[i].id, boxes[nb][0], boxes[nb][1], boxes[nb][2] - boxes[nb][0],
                      boxes[nb][3] - boxes[nb][1], cov);
        assert_true(cov >= 0.30);
        nb++;
    }
    return nb;
}

/* Two people walking side by side whom the detector sees as one (the committed start of
 * vtest.avi, tests/data/street_vtest.mp4, frame 48: a woman close beside a man): the keying
 * chain with model people from frame 40 keys both; on frame 48 the matte (>= 0.5) covers at
 * least 30% of every landmark box (pose-lite's bounds of each person with a detection >= 0.5,
 * from a separate keyer run from frame 40, which follows her), hers included (0% before the
 * fallback segmentation's person-sized regions were added to a detected person's crop), and
 * at most 2% of the frame outside them. */
static void test_street_pair(void **state)
{
    (void)state;
    char path[1024];
    kt_data_path(path, sizeof(path), "street_vtest.mp4");
    if (!have_models() || !kt_exists(path)) {
        print_message("skipped: models or %s missing\n", path);
        skip();
    }
    keyer_error err = {0};
    clip_case c;
    clip_open(&c, path);
    keyer_person people[KEYER_PEOPLE_MAX];
    int np = 0;
    for (int i = 0; i <= 48; i++) {
        assert_int_equal(keyer_reader_read(c.r, c.f, &err), KEYER_OK);
        if (i < 40)
            continue;
        assert_int_equal(keyer_keying_process(c.k, c.f, NULL, c.matte, &err), KEYER_OK);
        assert_int_equal(keyer_people_run(c.ref, c.f, people, KEYER_PEOPLE_MAX, &np, &err),
                         KEYER_OK);
    }
    float boxes[KEYER_PEOPLE_MAX][4];
    int nb = covered_boxes(c.matte, people, np, "frame 48, ", boxes), pair = 0;
    for (int i = 0; i < nb; i++) /* the woman: about 560,224 30x81 */
        pair |= fabsf(boxes[i][0] - 560.0f) < 12.0f && fabsf(boxes[i][1] - 224.0f) < 12.0f;
    assert_true(pair); /* the reference keyer follows her */
    double out = outside(c.matte, (const float(*)[4])boxes, nb);
    print_message("%d people, outside their boxes %.4f of the frame\n", nb, out);
    assert_true(out <= 0.02);
    clip_close(&c);
}

/* vtest.avi: see the file comment. */
static void test_vtest_end_to_end(void **state)
{
    (void)state;
    const char *env = getenv("KEYER_VTEST");
    const char *path = env && *env ? env : "/usr/share/doc/opencv-doc/examples/data/vtest.avi";
    if (!have_models() || !kt_exists(path)) {
        print_message("skipped: models or %s missing (Debian's opencv-doc; scripts/setup.sh)\n",
                      path);
        skip();
    }
    keyer_error err = {0};
    clip_case c; /* the reference boxes: c.ref */
    clip_open(&c, path);
    const int frames = 2; /* the second keys from the first's landmarks */
    keyer_person people[KEYER_PEOPLE_MAX];
    keyer_detection dets[KEYER_PEOPLE_MAX];
    int np = 0, nd = 0;
    for (int i = 0; i < frames; i++) {
        assert_int_equal(keyer_reader_read(c.r, c.f, &err), KEYER_OK);
        assert_int_equal(keyer_keying_process(c.k, c.f, NULL, c.matte, &err), KEYER_OK);
        assert_int_equal(keyer_people_run(c.ref, c.f, people, KEYER_PEOPLE_MAX, &np, &err),
                         KEYER_OK);
    }
    assert_int_equal(keyer_people_detect(c.ref, c.f, dets, KEYER_PEOPLE_MAX, &nd, &err),
                     KEYER_OK);
    float boxes[KEYER_PEOPLE_MAX][4];
    int nb = covered_boxes(c.matte, people, np, "", boxes);
    assert_true(nb >= 3); /* the first frames show three people walking */
    double out = outside(c.matte, (const float(*)[4])boxes, nb);
    print_message("%d people, outside their boxes %.4f of the frame\n", nb, out);
    assert_true(out <= 0.02);
    float dboxes[KEYER_PEOPLE_MAX][4];
    for (int i = 0; i < nd; i++)
        keyer_person_box(&dets[i], dboxes[i]);
    double dout = outside(c.matte, (const float(*)[4])dboxes, nd);
    print_message("%d detections, outside their body boxes %.4f of the frame\n", nd, dout);
    assert_true(nd >= 3);
    assert_true(dout <= 0.02);
    clip_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pose_anchors),
        cmocka_unit_test(test_pose_decode_known),
        cmocka_unit_test(test_person_box),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_photo),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_vtest_end_to_end),
        cmocka_unit_test(test_street_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
