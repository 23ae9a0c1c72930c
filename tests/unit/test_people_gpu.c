/*
 * Keying people on CUDA against the CPU: keyer_people with its two networks (the pose detector,
 * which keyer reads through DENSIFY and lowers DEPTH_TO_SPACE for, and pose-full batched over
 * the people) on the cuda backend in float32, and on the cpu backend, on the test photos and,
 * when Debian's opencv-doc is installed (or KEYER_VTEST names it), the first frames of
 * vtest.avi (several people, tiles):
 *  - the same detections (count; scores within 1e-3; boxes and keypoints within 0.5 pixel);
 *  - the same people (count, ids);
 *  - the people masks (GRAYF32 at the frame's size) agree: mean absolute difference <= 5e-3
 *    and the same side of 0.5 on >= 99.5% of pixels (the bounds keyer uses for half
 *    precision, registry.h half_ok, here for float32 against float32 on two backends).
 * Then the keying chain (keyer_keying, model people) with backend cuda on host frames runs.
 * KEYER_TEST_FILTER (a cmocka pattern) runs only the matching tests (a short run under
 * compute-sanitizer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keying.h"
#include "keyer/people.h"
#include "testutil.h"
#include "kt_gpu.h"

#define MAX_DETS 32

typedef struct side {
    keyer_people *pp;
    keyer_frame *mask;
    keyer_detection dets[MAX_DETS];
    keyer_person people[KEYER_PEOPLE_MAX];
    int nd, np;
} side;

static void side_open(side *s, keyer_backend backend)
{
    keyer_error err = {0};
    keyer_people_params p = keyer_people_params_defaults();
    p.backend = backend;
    p.threads = 4;
    keyer_status st = keyer_people_create(&p, &s->pp, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(keyer_frame_create(&s->mask, &err), KEYER_OK);
}

static void side_close(side *s)
{
    keyer_people_destroy(&s->pp);
    keyer_frame_destroy(&s->mask);
}

static void side_run(side *s, const keyer_frame *f)
{
    keyer_error err = {0};
    if (s->mask->width != f->width || s->mask->height != f->height) {
        keyer_frame_unref(s->mask);
        assert_int_equal(keyer_frame_alloc(s->mask, KEYER_PIXEL_FORMAT_GRAYF32, f->width,
                                           f->height, NULL, &err),
                         KEYER_OK);
    }
    assert_int_equal(keyer_people_detect(s->pp, f, s->dets, MAX_DETS, &s->nd, &err), KEYER_OK);
    keyer_status st = keyer_people_run(s->pp, f, s->people, KEYER_PEOPLE_MAX, &s->np, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(keyer_people_mask(s->pp, s->mask, &err), KEYER_OK);
}

/* CPU and CUDA on one frame; @p what names it. */
static void compare(side *cpu, side *gpu, const keyer_frame *f, const char *what)
{
    side_run(cpu, f);
    side_run(gpu, f);
    print_message("%s: %d detections, %d people (cpu), %d and %d (cuda)\n", what, cpu->nd,
                  cpu->np, gpu->nd, gpu->np);
    assert_int_equal(gpu->nd, cpu->nd);
    for (int i = 0; i < cpu->nd; i++) {
        const keyer_detection *a = &cpu->dets[i], *b = &gpu->dets[i];
        assert_float_equal(a->score, b->score, 1e-3);
        assert_float_equal(a->xmin, b->xmin, 0.5);
        assert_float_equal(a->ymin, b->ymin, 0.5);
        assert_float_equal(a->xmax, b->xmax, 0.5);
        assert_float_equal(a->ymax, b->ymax, 0.5);
        for (int k = 0; k < a->num_keypoints; k++) {
            assert_float_equal(a->keypoints[k][0], b->keypoints[k][0], 0.5);
            assert_float_equal(a->keypoints[k][1], b->keypoints[k][1], 0.5);
        }
    }
    assert_int_equal(gpu->np, cpu->np);
    for (int i = 0; i < cpu->np; i++)
        assert_int_equal(gpu->people[i].id, cpu->people[i].id);
    const keyer_frame *ma = cpu->mask, *mb = gpu->mask;
    double sum = 0;
    long differ = 0, n = (long)ma->width * ma->height;
    for (int y = 0; y < ma->height; y++) {
        const float *ra = (const float *)(ma->data[0] + y * ma->stride[0]);
        const float *rb = (const float *)(mb->data[0] + y * mb->stride[0]);
        for (int x = 0; x < ma->width; x++) {
            sum += fabs((double)ra[x] - (double)rb[x]);
            differ += (ra[x] >= 0.5f) != (rb[x] >= 0.5f);
        }
    }
    print_message("%s: mask mean |cpu - cuda| %.2e, %.3f%% of pixels on different sides of 0.5\n",
                  what, sum / (double)n, 100.0 * (double)differ / (double)n);
    assert_true(sum / (double)n <= 5e-3);
    assert_true((double)differ / (double)n <= 0.005);
}

static void test_photos(void **state)
{
    (void)state;
    side cpu = {0}, gpu = {0};
    side_open(&cpu, KEYER_BACKEND_CPU);
    side_open(&gpu, KEYER_BACKEND_CUDA);
    const char *photos[] = {"messi5.jpg", "grace_hopper.jpg"};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        kt_data_path(path, sizeof(path), photos[i]);
        keyer_error err = {0};
        keyer_frame *img = NULL;
        assert_int_equal(keyer_frame_create(&img, &err), KEYER_OK);
        assert_int_equal(keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, img, &err), KEYER_OK);
        keyer_people_reset(cpu.pp);
        keyer_people_reset(gpu.pp);
        compare(&cpu, &gpu, img, photos[i]);
        compare(&cpu, &gpu, img, photos[i]); /* the second frame: crops from the landmarks */
        keyer_frame_destroy(&img);
    }
    side_close(&cpu);
    side_close(&gpu);
}

static void test_vtest(void **state)
{
    (void)state;
    const char *env = getenv("KEYER_VTEST");
    const char *path = env && *env ? env : "/usr/share/doc/opencv-doc/examples/data/vtest.avi";
    if (!kt_exists(path)) {
        print_message("skipped: %s missing (Debian's opencv-doc; or set KEYER_VTEST)\n", path);
        skip();
    }
    keyer_error err = {0};
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.keep_streams = 0;
    keyer_status st = keyer_reader_open(path, &rp, &r, &err);
    if (st == KEYER_STATUS_UNSUPPORTED) {
        /* vtest.avi is MS-MPEG4 v3: an FFmpeg built without that decoder (the GPU machine's
         * minimal bundle) cannot read it */
        print_message("skipped: %s\n", err.message);
        skip();
    }
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    side cpu = {0}, gpu = {0};
    side_open(&cpu, KEYER_BACKEND_CPU);
    side_open(&gpu, KEYER_BACKEND_CUDA);
    for (int i = 0; i < 4; i++) {
        char what[32];
        snprintf(what, sizeof(what), "vtest frame %d", i);
        assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
        compare(&cpu, &gpu, f, what);
    }
    assert_true(cpu.np >= 3);
    side_close(&cpu);
    side_close(&gpu);
    keyer_reader_destroy(&r);
    keyer_frame_destroy(&f);
}

/* The keying chain with model people and the cuda backend keys host frames. */
static void test_keying(void **state)
{
    (void)state;
    char path[1024];
    kt_data_path(path, sizeof(path), "messi5.jpg");
    keyer_error err = {0};
    keyer_frame *img = NULL, *matte = NULL;
    assert_int_equal(keyer_frame_create(&img, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&matte, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, img, &err), KEYER_OK);
    keyer_keying_params kp = keyer_keying_params_defaults();
    kp.model = KEYER_PEOPLE_MODEL;
    kp.backend = KEYER_BACKEND_CUDA;
    keyer_keying *k = NULL;
    keyer_status st = keyer_keying_create(&kp, &k, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(keyer_keying_process(k, img, NULL, matte, &err), KEYER_OK);
    long on = 0;
    for (int y = 0; y < matte->height; y++)
        for (int x = 0; x < matte->width; x++)
            on += matte->data[0][y * matte->stride[0] + x] >= 128;
    double frac = (double)on / ((double)matte->width * matte->height);
    print_message("messi5 keyed on cuda: %.3f of the frame is person\n", frac);
    assert_true(frac > 0.05 && frac < 0.6);
    keyer_keying_destroy(&k);
    keyer_frame_destroy(&img);
    keyer_frame_destroy(&matte);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_photos),
        cmocka_unit_test(test_vtest),
        cmocka_unit_test(test_keying),
    };
    return KT_GPU_RUN_GROUP(tests, NULL, NULL);
}
