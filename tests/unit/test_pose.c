/*
 * Body pose on the test photos: presence, keypoints inside the frame and on the body, crop
 * tracking from the auxiliary landmarks, the body mask warped back to the frame, the three
 * model sizes, drawing, and errors.
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

#include "keyer/image.h"
#include "keyer/pose.h"
#include "kt_io.h"
#include "testutil.h"

static keyer_pose *make(int model)
{
    keyer_error err = {0};
    keyer_pose_params p = keyer_pose_params_defaults();
    p.model = model;
    p.threads = 2;
    keyer_pose *pose = NULL;
    if (keyer_pose_create(&p, &pose, &err))
        fail_msg("%s", err.message);
    return pose;
}

static keyer_frame *gray_frame(keyer_pixel_format fmt, int w, int h)
{
    keyer_frame *m = NULL;
    assert_int_equal(keyer_frame_create(&m, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(m, fmt, w, h, NULL, NULL), KEYER_OK);
    return m;
}

/* Mean of a GRAYF32 mask over a rectangle of frame pixels. */
static double mask_mean(const keyer_frame *m, int x0, int y0, int x1, int y1)
{
    double s = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            s += ((const float *)(m->data[0] + y * m->stride[0]))[x];
    return s / ((double)(x1 - x0) * (y1 - y0));
}

static int inside(const keyer_pose_landmark *l, const keyer_frame *f)
{
    return l->x >= 0 && l->y >= 0 && l->x < (float)f->width && l->y < (float)f->height;
}

static void test_grace_hopper(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_pose *pose = make(KEYER_POSE_MODEL_LITE);
    keyer_pose_result r;
    if (keyer_pose_run(pose, photo, &r, &err))
        fail_msg("%s", err.message);
    printf("  grace_hopper: presence %.3f, roi %.0f,%.0f side %.0f rot %.2f; nose %.0f,%.0f "
           "shoulders %.0f,%.0f %.0f,%.0f\n",
           (double)r.presence, (double)r.roi.center_x, (double)r.roi.center_y,
           (double)r.roi.width, (double)r.roi.rotation, (double)r.landmarks[0].x,
           (double)r.landmarks[0].y, (double)r.landmarks[11].x, (double)r.landmarks[11].y,
           (double)r.landmarks[12].x, (double)r.landmarks[12].y);
    assert_true(r.found);
    assert_int_equal(r.seeded, 2); /* from the face */
    assert_true(r.presence > 0.5f);
    /* Face points inside the face (its box, from the face detector's reference decode, is
     * x 175-358, y 135-349), visible, in the frame. */
    for (int i = 0; i <= 10; i++) {
        const keyer_pose_landmark *l = &r.landmarks[i];
        assert_true(inside(l, photo));
        assert_true(l->visibility > 0.5f);
        assert_true(l->x > 175 && l->x < 358 && l->y > 135 && l->y < 349);
    }
    /* Shoulders below the face and on the right sides: the person's left shoulder (11) is on
     * the image's right. */
    assert_true(r.landmarks[11].y > 300 && r.landmarks[12].y > 300);
    assert_true(r.landmarks[11].x > r.landmarks[12].x);
    assert_true(inside(&r.landmarks[11], photo) && inside(&r.landmarks[12], photo));
    /* World landmarks are metres around the hips. */
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++)
        for (int c = 0; c < 3; c++)
            assert_true(fabsf(r.world[i][c]) < 2.0f);
    /* The mask covers the person (face and chest) and not the sky at the top right. */
    keyer_frame *mask = gray_frame(KEYER_PIXEL_FORMAT_GRAYF32, photo->width, photo->height);
    assert_int_equal(keyer_pose_mask(pose, mask, &err), KEYER_OK);
    double face = mask_mean(mask, 200, 160, 330, 320), chest = mask_mean(mask, 150, 420, 400, 560);
    double sky = mask_mean(mask, 440, 10, 510, 120);
    printf("  mask mean: face %.3f, chest %.3f, sky %.3f\n", face, chest, sky);
    assert_true(face > 0.8 && chest > 0.8 && sky < 0.1);
    /* Second frame: tracked from the auxiliary landmarks, one inference, same landmarks. */
    keyer_pose_result r2;
    assert_int_equal(keyer_pose_run(pose, photo, &r2, &err), KEYER_OK);
    assert_true(r2.found && !r2.seeded);
    float drift = 0;
    for (int i = 0; i <= 12; i++)
        drift = fmaxf(drift, hypotf(r2.landmarks[i].x - r.landmarks[i].x,
                                    r2.landmarks[i].y - r.landmarks[i].y));
    keyer_pose_stats st;
    assert_int_equal(keyer_pose_get_stats(pose, &st, &err), KEYER_OK);
    /* The crop is about 4 times the picture (the hips are far below it), so one model input
     * pixel is about 8 frame pixels: allow 2 of them. */
    float tolerance = 2.0f * r2.roi.width / 256.0f;
    printf("  second frame: drift of points 0-12 %.2f px (tolerance %.1f); %lld inferences, "
           "%lld seeds\n",
           (double)drift, (double)tolerance, (long long)st.inferences, (long long)st.seeds);
    assert_true(drift < tolerance);
    assert_int_equal(st.frames, 2);
    assert_int_equal(st.inferences, 3);
    assert_int_equal(st.seeds, 1);
    assert_int_equal(st.face_seeds, 1);
    /* GRAY8 mask at a quarter size agrees with the float mask. */
    keyer_frame *small = gray_frame(KEYER_PIXEL_FORMAT_GRAY8, photo->width / 4, photo->height / 4);
    assert_int_equal(keyer_pose_mask(pose, small, &err), KEYER_OK);
    assert_true(small->data[0][(240 / 4) * small->stride[0] + 265 / 4] > 200);
    assert_true(small->data[0][(40 / 4) * small->stride[0] + 480 / 4] < 30);
    /* After a reset the next frame is seeded again. */
    keyer_pose_reset(pose);
    assert_int_equal(keyer_pose_run(pose, photo, &r2, &err), KEYER_OK);
    assert_true(r2.seeded);
    keyer_frame_destroy(&small);
    keyer_frame_destroy(&mask);
    keyer_pose_destroy(&pose);
    keyer_frame_destroy(&photo);
}

static void test_messi(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("messi5.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_pose *pose = make(KEYER_POSE_MODEL_LITE);
    keyer_pose_result r;
    assert_int_equal(keyer_pose_run(pose, photo, &r, &err), KEYER_OK);
    int visible = 0;
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++)
        visible += inside(&r.landmarks[i], photo) && r.landmarks[i].visibility > 0.5f;
    printf("  messi5: presence %.3f, %d visible landmarks in the frame, nose %.0f,%.0f, hips "
           "%.0f,%.0f\n",
           (double)r.presence, visible, (double)r.landmarks[0].x, (double)r.landmarks[0].y,
           (double)r.landmarks[23].x, (double)r.landmarks[23].y);
    assert_true(r.found && r.presence > 0.5f);
    assert_int_equal(r.seeded, 2);
    assert_true(visible >= 20);
    /* Nose on the head (x 200-275, y 55-125), hips below it on the shorts (y 190-270). */
    assert_true(r.landmarks[0].x > 200 && r.landmarks[0].x < 275);
    assert_true(r.landmarks[0].y > 55 && r.landmarks[0].y < 125);
    assert_true(r.landmarks[23].y > 190 && r.landmarks[23].y < 270);
    keyer_frame *mask = gray_frame(KEYER_PIXEL_FORMAT_GRAYF32, photo->width, photo->height);
    assert_int_equal(keyer_pose_mask(pose, mask, &err), KEYER_OK);
    double shirt = mask_mean(mask, 215, 130, 265, 180), grass = mask_mean(mask, 20, 290, 150, 330);
    printf("  mask mean: shirt %.3f, grass %.3f\n", shirt, grass);
    assert_true(shirt > 0.8 && grass < 0.1);
    keyer_frame_destroy(&mask);
    keyer_pose_destroy(&pose);
    keyer_frame_destroy(&photo);
}

/* The full and heavy models share the contract. */
static void test_full_and_heavy(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    for (int m = KEYER_POSE_MODEL_FULL; m <= KEYER_POSE_MODEL_HEAVY; m++) {
        keyer_pose *pose = make(m);
        keyer_pose_result r;
        assert_int_equal(keyer_pose_run(pose, photo, &r, &err), KEYER_OK);
        printf("  %s: presence %.3f, nose %.0f,%.0f\n", m == KEYER_POSE_MODEL_FULL ? "full" : "heavy",
               (double)r.presence, (double)r.landmarks[0].x, (double)r.landmarks[0].y);
        assert_true(r.found);
        assert_true(r.landmarks[0].x > 175 && r.landmarks[0].x < 358);
        assert_true(r.landmarks[0].y > 135 && r.landmarks[0].y < 349);
        keyer_pose_destroy(&pose);
    }
    keyer_frame_destroy(&photo);
}

/* Seeding from the whole frame (no face detector): on the portrait the model finds the
 * person, with the face points on the face, but (hips being outside the picture) takes the
 * head and shoulders for a small standing person: the shoulders come out at the chin. */
static void test_whole_frame_seed(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_pose_params p = keyer_pose_params_defaults();
    p.seed_from_face = 0;
    p.threads = 2;
    keyer_pose *pose = NULL;
    assert_int_equal(keyer_pose_create(&p, &pose, &err), KEYER_OK);
    keyer_pose_result r;
    assert_int_equal(keyer_pose_run(pose, photo, &r, &err), KEYER_OK);
    printf("  whole-frame seed: presence %.3f, nose %.0f,%.0f, shoulders at y %.0f %.0f\n",
           (double)r.presence, (double)r.landmarks[0].x, (double)r.landmarks[0].y,
           (double)r.landmarks[11].y, (double)r.landmarks[12].y);
    assert_true(r.found && r.seeded == 1 && r.presence > 0.5f);
    for (int i = 0; i <= 10; i++) {
        assert_true(inside(&r.landmarks[i], photo));
        assert_true(r.landmarks[i].x > 175 && r.landmarks[i].x < 358);
        assert_true(r.landmarks[i].y > 135 && r.landmarks[i].y < 349);
    }
    keyer_pose_stats st;
    assert_int_equal(keyer_pose_get_stats(pose, &st, &err), KEYER_OK);
    assert_int_equal(st.face_seeds, 0);
    keyer_pose_destroy(&pose);
    keyer_frame_destroy(&photo);
}

/* A featureless frame: no person, mask all zero, nothing drawn. */
static void test_no_person_and_draw(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_pose *pose = make(KEYER_POSE_MODEL_LITE);
    keyer_frame *mask = gray_frame(KEYER_PIXEL_FORMAT_GRAYF32, 64, 48);
    assert_int_equal(keyer_pose_mask(pose, mask, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame *blank = gray_frame(KEYER_PIXEL_FORMAT_RGB24, 320, 240);
    for (int y = 0; y < 240; y++)
        memset(blank->data[0] + y * blank->stride[0], 90, 320 * 3);
    keyer_pose_result r;
    assert_int_equal(keyer_pose_run(pose, blank, &r, &err), KEYER_OK);
    printf("  blank frame: presence %.3f\n", (double)r.presence);
    assert_false(r.found);
    assert_true(r.presence < 0.5f);
    assert_int_equal(keyer_pose_mask(pose, mask, &err), KEYER_OK);
    assert_true(mask_mean(mask, 0, 0, 64, 48) == 0.0);
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(200, &ov, &err), KEYER_OK);
    assert_int_equal(keyer_pose_draw(ov, &r, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), 0);

    /* Drawing a pose: connections among visible points and one dot per visible point. */
    int n = 0;
    const int *c = keyer_pose_connections(&n);
    assert_int_equal(n, KEYER_POSE_CONNECTIONS);
    for (int i = 0; i < 2 * n; i++)
        assert_true(c[i] >= 0 && c[i] < KEYER_POSE_LANDMARKS);
    keyer_pose_result fake;
    memset(&fake, 0, sizeof(fake));
    fake.found = 1;
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++) {
        fake.landmarks[i].x = 10.0f + 3.0f * (float)i;
        fake.landmarks[i].y = 20.0f;
        fake.landmarks[i].visibility = i < 23 ? 0.9f : 0.1f; /* legs hidden */
    }
    int expect_lines = 0;
    for (int i = 0; i < n; i++)
        expect_lines += c[2 * i] < 23 && c[2 * i + 1] < 23;
    assert_int_equal(keyer_pose_draw(ov, &fake, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_overlay_count(ov), expect_lines + 23);
    keyer_overlay *tiny = NULL;
    assert_int_equal(keyer_overlay_create(10, &tiny, &err), KEYER_OK);
    assert_int_equal(keyer_pose_draw(tiny, &fake, NULL, &err), KEYER_STATUS_OUT_OF_MEMORY);
    assert_int_equal(keyer_overlay_count(tiny), 0);
    keyer_overlay_destroy(&tiny);
    keyer_overlay_destroy(&ov);
    keyer_frame_destroy(&blank);
    keyer_frame_destroy(&mask);
    keyer_pose_destroy(&pose);
}

static void test_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_pose *pose = NULL;
    keyer_pose_params p = keyer_pose_params_defaults();
    p.model = 7;
    assert_int_equal(keyer_pose_create(&p, &pose, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* The person detector loads (its DENSIFY is expanded) but is not a landmark model. */
    char path[4096];
    p = keyer_pose_params_defaults();
    p.model_path = kt_model_path(path, sizeof(path), "pose_detection.tflite");
    keyer_status st = keyer_pose_create(&p, &pose, &err);
    printf("  pose_detection.tflite: %s\n", err.message);
    assert_int_equal(st, KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "pose_detection.tflite: 2 outputs"));
    assert_null(pose);
    /* A face model is not a pose model. */
    p.model_path = "face-mesh";
    assert_int_equal(keyer_pose_create(&p, &pose, &err), KEYER_STATUS_BAD_DATA);
    assert_null(pose);
    p = keyer_pose_params_defaults();
    p.segmentation = 0;
    p.threads = 2;
    assert_int_equal(keyer_pose_create(&p, &pose, &err), KEYER_OK);
    keyer_frame *mask = gray_frame(KEYER_PIXEL_FORMAT_GRAYF32, 8, 8);
    assert_int_equal(keyer_pose_mask(pose, mask, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_pose_result r;
    assert_int_equal(keyer_pose_run(pose, NULL, &r, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&mask);
    keyer_pose_destroy(&pose);
    keyer_pose_destroy(&pose);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grace_hopper), cmocka_unit_test(test_messi),
        cmocka_unit_test(test_full_and_heavy), cmocka_unit_test(test_whole_frame_seed),
        cmocka_unit_test(test_no_person_and_draw),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
