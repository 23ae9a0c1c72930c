/*
 * Face analysis on the test photos: BlazeFace detection into frame pixels, the face mesh on
 * the aligned crop, landmark tracking and stable ids on a synthetic pan, detection-only mode,
 * drawing, and argument/model errors.
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

#include "keyer/faces.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "kt_io.h"
#include "testutil.h"

/* A frame showing the w x h window of @p src at (x, y) (no copy). */
static void crop_view(keyer_frame *view, const keyer_frame *src, int x, int y, int w, int h)
{
    assert_int_equal(keyer_frame_ref(view, src, NULL), KEYER_OK);
    view->data[0] += (ptrdiff_t)y * src->stride[0] + (ptrdiff_t)x * 3;
    view->width = w;
    view->height = h;
}

static keyer_faces *make(int range, int landmarks)
{
    keyer_error err = {0};
    keyer_faces_params p = keyer_faces_params_defaults();
    p.range = range;
    p.landmarks = landmarks;
    p.threads = 2;
    keyer_faces *fa = NULL;
    if (keyer_faces_create(&p, &fa, &err))
        fail_msg("%s", err.message);
    return fa;
}

static float dist(float ax, float ay, float bx, float by)
{
    return sqrtf((ax - bx) * (ax - bx) + (ay - by) * (ay - by));
}

static float box_iou(float a0, float a1, float a2, float a3, float b0, float b1, float b2, float b3)
{
    keyer_detection a = {a0, a1, a2, a3, 0, 0, {{0}}}, b = {b0, b1, b2, b3, 0, 0, {{0}}};
    return keyer_detection_iou(&a, &b);
}

/* grace_hopper, short range: one face whose box matches the decoded reference output, with
 * 468 landmarks inside the crop, eye and nose landmarks at the detector's keypoints. */
static void test_grace_hopper(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_faces *fa = make(KEYER_FACE_RANGE_SHORT, 1);
    const keyer_face *faces = NULL;
    int n = -1;
    if (keyer_faces_run(fa, photo, &faces, &n, &err))
        fail_msg("%s", err.message);
    assert_int_equal(n, 1);
    const keyer_face *f = &faces[0];
    assert_true(f->detected && f->has_landmarks);
    const keyer_detection *d = &f->detection;
    float W = (float)photo->width, H = (float)photo->height;
    /* docs/models.md 3.2: the reference output decodes to a face at
     * x 0.343-0.700, y 0.225-0.582 (a stretched input; ours is letterboxed). */
    float iou = box_iou(d->xmin, d->ymin, d->xmax, d->ymax, 0.343f * W, 0.225f * H, 0.700f * W,
                        0.582f * H);
    float bw = d->xmax - d->xmin, bh = d->ymax - d->ymin;
    printf("  detection %.1f,%.1f-%.1f,%.1f score %.3f, IoU with the reference %.3f, mesh "
           "presence %.3f\n",
           (double)d->xmin, (double)d->ymin, (double)d->xmax, (double)d->ymax, (double)d->score,
           (double)iou, (double)f->presence);
    assert_true(d->score > 0.75f);
    assert_true(iou > 0.8f);
    assert_true(f->presence > 0.9f);
    /* Landmarks: all inside the crop, nearly all inside the detection box grown by 20%. */
    int in_box = 0;
    float half = f->roi.width / 2 * 1.4143f;
    for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++) {
        float x = f->landmarks[i][0], y = f->landmarks[i][1];
        assert_true(dist(x, y, f->roi.center_x, f->roi.center_y) <= half);
        in_box += x >= d->xmin - 0.2f * bw && x <= d->xmax + 0.2f * bw &&
                  y >= d->ymin - 0.2f * bh && y <= d->ymax + 0.2f * bh;
    }
    printf("  %d of 468 landmarks inside the detection box grown by 20%%\n", in_box);
    assert_true(in_box >= 460);
    /* Eyes and nose of the mesh against the detector's keypoints (right eye, left eye, nose). */
    float re = dist((f->landmarks[33][0] + f->landmarks[133][0]) / 2,
                    (f->landmarks[33][1] + f->landmarks[133][1]) / 2, d->keypoints[0][0],
                    d->keypoints[0][1]);
    float le = dist((f->landmarks[263][0] + f->landmarks[362][0]) / 2,
                    (f->landmarks[263][1] + f->landmarks[362][1]) / 2, d->keypoints[1][0],
                    d->keypoints[1][1]);
    float no = dist(f->landmarks[1][0], f->landmarks[1][1], d->keypoints[2][0], d->keypoints[2][1]);
    printf("  eye/nose landmark distance to the detector keypoints: %.1f %.1f %.1f px (box %.0f "
           "px)\n",
           (double)re, (double)le, (double)no, (double)bw);
    assert_true(re < 0.08f * bw && le < 0.08f * bw && no < 0.1f * bw);
    /* The right eye (image left) is left of the left eye; the crop is nearly upright. */
    assert_true(f->landmarks[33][0] < f->landmarks[263][0]);
    assert_true(fabsf(f->roi.rotation) < 0.2f);
    /* The face box is the landmarks' bounding box; its keypoints come from the mesh. */
    assert_true(f->box.xmin <= f->landmarks[234][0] && f->box.xmax >= f->landmarks[454][0]);
    assert_true(dist(f->box.keypoints[2][0], f->box.keypoints[2][1], f->landmarks[1][0],
                     f->landmarks[1][1]) < 1e-3f);
    /* keyer_faces_detect agrees with the detection inside the analysis. */
    keyer_detection dets[4];
    int nd = 0;
    assert_int_equal(keyer_faces_detect(fa, photo, dets, 4, &nd, &err), KEYER_OK);
    assert_int_equal(nd, 1);
    assert_true(keyer_detection_iou(&dets[0], d) > 0.999f);
    keyer_faces_destroy(&fa);
    assert_null(fa);
    keyer_frame_destroy(&photo);
}

/* The same photo decoded to NV12 (video's usual format) gives the same face. */
static void test_nv12_input(void **state)
{
    (void)state;
    keyer_error err = {0};
    char path[4096];
    keyer_frame *rgb = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24), *nv12 = NULL;
    assert_int_equal(keyer_frame_create(&nv12, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(kt_data_path(path, sizeof(path), "grace_hopper.jpg"),
                                      KEYER_PIXEL_FORMAT_NV12, nv12, &err),
                     KEYER_OK);
    keyer_faces *fa = make(KEYER_FACE_RANGE_SHORT, 1);
    const keyer_face *faces = NULL;
    int n = 0;
    assert_int_equal(keyer_faces_run(fa, rgb, &faces, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    keyer_face a = faces[0];
    keyer_faces_reset(fa);
    assert_int_equal(keyer_faces_run(fa, nv12, &faces, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    float worst = 0;
    for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++)
        worst = fmaxf(worst, dist(a.landmarks[i][0], a.landmarks[i][1], faces[0].landmarks[i][0],
                                  faces[0].landmarks[i][1]));
    printf("  NV12 vs RGB: detection IoU %.3f, largest landmark distance %.2f px\n",
           (double)keyer_detection_iou(&a.detection, &faces[0].detection), (double)worst);
    assert_true(keyer_detection_iou(&a.detection, &faces[0].detection) > 0.95f);
    assert_true(worst < 3.0f);
    keyer_faces_destroy(&fa);
    keyer_frame_destroy(&nv12);
    keyer_frame_destroy(&rgb);
}

/* messi5: the short-range model misses the small face; the full-range model finds it. */
static void test_messi_full_range(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("messi5.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_faces *full = make(KEYER_FACE_RANGE_FULL, 1), *shrt = make(KEYER_FACE_RANGE_SHORT, 0);
    keyer_detection dets[8];
    int ns = -1, nf = -1;
    assert_int_equal(keyer_faces_detect(shrt, photo, dets, 8, &ns, &err), KEYER_OK);
    assert_int_equal(keyer_faces_detect(full, photo, dets, 8, &nf, &err), KEYER_OK);
    printf("  messi5: short range %d faces, full range %d\n", ns, nf);
    assert_true(nf >= 1);
    /* The best full-range face is Messi's: small, in the upper middle of the picture. */
    const keyer_detection *d = &dets[0];
    float cx = (d->xmin + d->xmax) / 2, cy = (d->ymin + d->ymax) / 2;
    printf("  best face %.1f,%.1f-%.1f,%.1f score %.3f\n", (double)d->xmin, (double)d->ymin,
           (double)d->xmax, (double)d->ymax, (double)d->score);
    assert_true(d->xmax - d->xmin < 0.15f * (float)photo->width);
    assert_true(cx > 180 && cx < 300 && cy > 40 && cy < 140);
    const keyer_face *faces = NULL;
    int n = 0;
    assert_int_equal(keyer_faces_run(full, photo, &faces, &n, &err), KEYER_OK);
    assert_true(n >= 1);
    assert_true(faces[0].has_landmarks && faces[0].presence > 0.5f);
    keyer_faces_destroy(&full);
    keyer_faces_destroy(&shrt);
    keyer_frame_destroy(&photo);
}

/* A synthetic pan (360x360 windows of the photo moving by (4, 3) px per frame), then a blank
 * frame, then the pan again: one detection, landmark tracking, the same id throughout. */
static void test_tracking_pan(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_frame *view = NULL, *blank = NULL;
    assert_int_equal(keyer_frame_create(&view, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&blank, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(blank, KEYER_PIXEL_FORMAT_RGB24, 360, 360, NULL, &err),
                     KEYER_OK);
    for (int y = 0; y < 360; y++)
        memset(blank->data[0] + y * blank->stride[0], 128, 360 * 3);
    keyer_faces *fa = make(KEYER_FACE_RANGE_SHORT, 1);
    const int frames = 24, gap = 16;
    uint32_t first_id = 0;
    int swaps = 0;
    /* Nose tip in photo pixels: in frame 0 (crop from the detection) and frame 1 (the first
     * crop from landmarks); the largest distance to frame 0's over all frames and to frame
     * 1's over the tracked frames. */
    float nose0x = 0, nose0y = 0, nose1x = 0, nose1y = 0, worst = 0, worst_tracked = 0;
    for (int i = 0; i < frames; i++) {
        const keyer_face *faces = NULL;
        int n = 0;
        int ox = 40 + 4 * i, oy = 40 + 3 * i;
        if (i == gap) {
            assert_int_equal(keyer_faces_run(fa, blank, &faces, &n, &err), KEYER_OK);
            assert_int_equal(n, 0);
            continue;
        }
        crop_view(view, photo, ox, oy, 360, 360);
        if (keyer_faces_run(fa, view, &faces, &n, &err))
            fail_msg("frame %d: %s", i, err.message);
        assert_int_equal(n, 1);
        const keyer_face *f = &faces[0];
        /* Detected on the first frame and right after the gap; tracked otherwise. */
        assert_int_equal(f->detected, i == 0 || i == gap + 1);
        /* The nose tip stays on the same photo pixel. */
        float nx = f->landmarks[1][0] + (float)ox, ny = f->landmarks[1][1] + (float)oy;
        if (i == 0) {
            nose0x = nx;
            nose0y = ny;
        }
        if (i == 1) {
            nose1x = nx;
            nose1y = ny;
        }
        worst = fmaxf(worst, dist(nx, ny, nose0x, nose0y));
        if (i >= 1 && !f->detected)
            worst_tracked = fmaxf(worst_tracked, dist(nx, ny, nose1x, nose1y));
        if (f->id) {
            if (!first_id)
                first_id = f->id;
            swaps += f->id != first_id;
        } else {
            /* Unconfirmed only during the tracker's first min_hits - 1 frames. */
            assert_true(i < keyer_tracker_params_defaults().min_hits - 1);
        }
    }
    keyer_faces_stats st;
    assert_int_equal(keyer_faces_get_stats(fa, &st, &err), KEYER_OK);
    printf("  pan: %lld frames, %lld detector runs, %lld mesh runs, %lld lost, id %u, %d swaps, "
           "nose drift %.2f px (tracked frames: %.2f px)\n",
           (long long)st.frames, (long long)st.detector_runs, (long long)st.mesh_runs,
           (long long)st.lost, (unsigned)first_id, swaps, (double)worst, (double)worst_tracked);
    assert_true(first_id != 0);
    assert_int_equal(swaps, 0);
    assert_int_equal(st.frames, frames);
    /* Frame 0, the blank frame (lost) and the frame after it. */
    assert_int_equal(st.detector_runs, 3);
    assert_int_equal(st.lost, 1);
    assert_true(worst < 5.0f);
    assert_true(worst_tracked < 1.5f);
    keyer_faces_destroy(&fa);
    keyer_frame_destroy(&view);
    keyer_frame_destroy(&blank);
    keyer_frame_destroy(&photo);
}

/* A real encoded clip (keyer_video_write_sample: a slow pan and zoom over the photo, H.264,
 * the face moving up by about 7 px per frame): one face in every frame, found by one detector
 * run and tracked by landmarks after it, one id from the tracker's confirmation on, no swaps. */
static void test_tracking_clip(void **state)
{
    (void)state;
    keyer_error err = {0};
    char dir[4096], clip[4200], photo[4096];
    kt_tmpdir(dir, sizeof(dir), "faces_clip");
    snprintf(clip, sizeof(clip), "%s/pan.mp4", dir);
    keyer_sample_params sp = keyer_sample_params_defaults();
    sp.width = 480;
    sp.height = 360;
    sp.frames = 48; /* the pan takes the face out through the top edge near the end */
    const int analysed = 36; /* frames analysed: the face is inside until then */
    sp.audio_codec = NULL;
    keyer_status st = keyer_video_write_sample(clip, kt_data_path(photo, sizeof(photo),
                                                                  "grace_hopper.jpg"),
                                               &sp, &err);
    if (st == KEYER_STATUS_UNSUPPORTED) {
        printf("  no H.264 encoder here (%s): skipped\n", err.message);
        skip();
    }
    assert_int_equal(st, KEYER_OK);
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    keyer_reader *in = NULL;
    if (keyer_reader_open(clip, &rp, &in, &err))
        fail_msg("%s", err.message);
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    keyer_faces *fa = make(KEYER_FACE_RANGE_SHORT, 1);
    int frames = 0, swaps = 0, missing = 0;
    uint32_t id = 0;
    st = KEYER_OK;
    while (frames < analysed && (st = keyer_reader_read(in, f, &err)) == KEYER_OK) {
        const keyer_face *faces = NULL;
        int n = 0;
        if (keyer_faces_run(fa, f, &faces, &n, &err))
            fail_msg("frame %d: %s", frames, err.message);
        missing += n != 1;
        if (n >= 1 && faces[0].id) {
            if (!id)
                id = faces[0].id;
            swaps += faces[0].id != id;
        }
        frames++;
    }
    assert_int_equal(st, KEYER_OK);
    keyer_faces_stats fs;
    assert_int_equal(keyer_faces_get_stats(fa, &fs, &err), KEYER_OK);
    printf("  clip: %d frames (%s), %d without exactly one face, id %u, %d swaps, %lld detector "
           "runs\n",
           frames, keyer_pixel_format_name(keyer_reader_info(in)->format), missing, (unsigned)id,
           swaps, (long long)fs.detector_runs);
    assert_int_equal(frames, analysed);
    assert_int_equal(missing, 0);
    assert_true(id != 0);
    assert_int_equal(swaps, 0);
    assert_int_equal(fs.detector_runs, 1);
    keyer_faces_destroy(&fa);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&in);
    remove(clip);
}

/* Detection only: the detector runs on every frame and faces carry the detection. */
static void test_detection_only(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_faces *fa = make(KEYER_FACE_RANGE_SHORT, 0);
    for (int i = 0; i < 4; i++) {
        const keyer_face *faces = NULL;
        int n = 0;
        assert_int_equal(keyer_faces_run(fa, photo, &faces, &n, &err), KEYER_OK);
        assert_int_equal(n, 1);
        assert_false(faces[0].has_landmarks);
        assert_true(faces[0].detected);
        assert_true(keyer_detection_iou(&faces[0].box, &faces[0].detection) > 0.999f);
        assert_int_equal(faces[0].id != 0, i >= 2); /* confirmed after min_hits = 3 */
    }
    keyer_faces_stats st;
    assert_int_equal(keyer_faces_get_stats(fa, &st, &err), KEYER_OK);
    assert_int_equal(st.detector_runs, 4);
    assert_int_equal(st.mesh_runs, 0);
    keyer_faces_destroy(&fa);
    keyer_frame_destroy(&photo);
}

/* keyer_faces_track: detections made elsewhere (here by keyer_faces_detect on the photo) give
 * the same faces and ids as keyer_faces_run without landmarks; an analyser without a detector
 * refuses keyer_faces_run and keyer_faces_detect; landmarks need the detector. */
static void test_track_external(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_faces *det = make(KEYER_FACE_RANGE_SHORT, 0);
    keyer_detection d[4];
    int nd = 0;
    assert_int_equal(keyer_faces_detect(det, photo, d, 4, &nd, &err), KEYER_OK);
    assert_int_equal(nd, 1);
    keyer_faces_params p = keyer_faces_params_defaults();
    p.landmarks = 0;
    p.detector = 0;
    p.max_faces = 1;
    keyer_faces *fa = NULL;
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_OK);
    uint32_t id = 0;
    for (int i = 0; i < 5; i++) {
        const keyer_face *faces = NULL;
        int n = 0;
        /* a second detection beyond max_faces is dropped */
        keyer_detection two[2] = {d[0], d[0]};
        assert_int_equal(keyer_faces_track(fa, two, 2, photo->width, photo->height, &faces, &n,
                                           &err),
                         KEYER_OK);
        assert_int_equal(n, 1);
        assert_true(faces[0].detected);
        assert_true(keyer_detection_iou(&faces[0].box, &d[0]) > 0.999f);
        assert_int_equal(faces[0].id != 0, i >= 2); /* confirmed after min_hits = 3 */
        if (i == 2)
            id = faces[0].id;
        if (i > 2)
            assert_int_equal(faces[0].id, id);
    }
    const keyer_face *faces = NULL;
    int n = 0;
    assert_int_equal(keyer_faces_track(fa, NULL, 0, photo->width, photo->height, &faces, &n, &err),
                     KEYER_OK);
    assert_int_equal(n, 0);
    assert_int_equal(keyer_faces_run(fa, photo, &faces, &n, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_faces_detect(fa, photo, d, 4, &nd, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_faces_track(fa, d, 1, 0, 10, &faces, &n, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_faces_destroy(&fa);
    p.landmarks = 1;
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_faces *mesh = make(KEYER_FACE_RANGE_SHORT, 1);
    assert_int_equal(keyer_faces_track(mesh, d, 1, photo->width, photo->height, &faces, &n, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_faces_destroy(&mesh);
    keyer_faces_destroy(&det);
    keyer_frame_destroy(&photo);
}

/* Drawing: box, 124 contour segments, an id label; pixels land on the face. */
static void test_draw(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *photo = kt_read_image("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);
    keyer_faces *fa = make(KEYER_FACE_RANGE_SHORT, 1);
    const keyer_face *faces = NULL;
    int n = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(keyer_faces_run(fa, photo, &faces, &n, &err), KEYER_OK);
    assert_int_equal(n, 1);
    assert_true(faces[0].id != 0);
    int nc = 0;
    const int *pairs = keyer_face_mesh_contours(&nc);
    assert_int_equal(nc, 124);
    for (int i = 0; i < 2 * nc; i++)
        assert_true(pairs[i] >= 0 && pairs[i] < KEYER_FACE_MESH_POINTS);
    keyer_overlay *ov = NULL;
    assert_int_equal(keyer_overlay_create(400, &ov, &err), KEYER_OK);
    keyer_faces_draw_params dp = keyer_faces_draw_params_defaults();
    assert_int_equal(keyer_faces_draw(ov, faces, n, &dp, &err), KEYER_OK);
    /* box + contours + plate + "id N" glyphs */
    char label[16];
    snprintf(label, sizeof(label), "id %u", (unsigned)faces[0].id);
    int glyphs = (int)strlen(label) - 1;
    assert_int_equal(keyer_overlay_count(ov), 1 + 124 + 1 + glyphs);
    keyer_frame *canvas = NULL;
    assert_int_equal(keyer_frame_create(&canvas, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(canvas, KEYER_PIXEL_FORMAT_RGBA, photo->width,
                                       photo->height, NULL, &err),
                     KEYER_OK);
    for (int y = 0; y < canvas->height; y++)
        memset(canvas->data[0] + y * canvas->stride[0], 0, (size_t)canvas->width * 4);
    assert_int_equal(keyer_overlay_render(ov, canvas, &err), KEYER_OK);
    /* The box's left edge at mid-height is green. */
    const keyer_detection *b = &faces[0].box;
    int x = (int)b->xmin, y = (int)((b->ymin + b->ymax) / 2);
    const uint8_t *px = canvas->data[0] + y * canvas->stride[0] + x * 4;
    assert_true(px[1] > 200 && px[3] > 200);
    /* Too small an overlay: nothing of the face is added. */
    keyer_overlay *small = NULL;
    assert_int_equal(keyer_overlay_create(50, &small, &err), KEYER_OK);
    assert_int_equal(keyer_faces_draw(small, faces, n, &dp, &err), KEYER_STATUS_OUT_OF_MEMORY);
    assert_int_equal(keyer_overlay_count(small), 0);
    keyer_overlay_destroy(&small);
    keyer_frame_destroy(&canvas);
    keyer_overlay_destroy(&ov);
    keyer_faces_destroy(&fa);
    keyer_frame_destroy(&photo);
}

static void test_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_faces *fa = NULL;
    keyer_faces_params p = keyer_faces_params_defaults();
    p.max_faces = 0;
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_faces_params_defaults();
    p.roi_scale = NAN;
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p = keyer_faces_params_defaults();
    p.detector_model = "/nonexistent/face.tflite";
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "face detector"));
    /* The full-range model where the short-range one is expected. */
    char path[4096];
    p = keyer_faces_params_defaults();
    p.detector_model = kt_model_path(path, sizeof(path), "face_detection_full_range.tflite");
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "192x192"));
    /* A pose model as the face mesh. */
    p = keyer_faces_params_defaults();
    p.mesh_model = "pose-lite";
    assert_int_equal(keyer_faces_create(&p, &fa, &err), KEYER_STATUS_BAD_DATA);
    assert_null(fa);
    keyer_faces_destroy(&fa); /* NULL is fine */
    keyer_faces_destroy(NULL);

    fa = make(KEYER_FACE_RANGE_SHORT, 1);
    const keyer_face *faces = NULL;
    int n = 5;
    assert_int_equal(keyer_faces_run(fa, NULL, &faces, &n, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(n, 0);
    /* A CUDA frame is refused before any pixel is read. */
    keyer_frame *dev = NULL;
    assert_int_equal(keyer_frame_create(&dev, &err), KEYER_OK);
    static uint8_t fake[64 * 64 * 3];
    dev->format = KEYER_PIXEL_FORMAT_RGB24;
    dev->width = dev->height = 64;
    dev->data[0] = fake;
    dev->stride[0] = 64 * 3;
    dev->memory = KEYER_MEMORY_CUDA;
    assert_int_equal(keyer_faces_run(fa, dev, &faces, &n, &err), KEYER_STATUS_UNSUPPORTED);
    /* A GRAY8 frame is not a picture keyer_prepare takes. */
    dev->memory = KEYER_MEMORY_HOST;
    dev->format = KEYER_PIXEL_FORMAT_GRAY8;
    dev->stride[0] = 64;
    assert_true(keyer_faces_run(fa, dev, &faces, &n, &err) != KEYER_OK);
    dev->data[0] = NULL;
    keyer_frame_destroy(&dev);
    keyer_faces_destroy(&fa);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grace_hopper),     cmocka_unit_test(test_nv12_input),
        cmocka_unit_test(test_messi_full_range),
        cmocka_unit_test(test_tracking_pan),     cmocka_unit_test(test_tracking_clip),
        cmocka_unit_test(test_detection_only),  cmocka_unit_test(test_track_external),
        cmocka_unit_test(test_draw),             cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
