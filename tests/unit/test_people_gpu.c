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

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keying.h"
#include "keyer/people.h"
#include "kt_people.h"
#include "testutil.h"
#include "kt_gpu.h"

/* CPU and CUDA on one frame; @p what names it. */
static void compare(kt_people_side *cpu, kt_people_side *gpu, const keyer_frame *f,
                    const char *what)
{
    kt_people_side_run(cpu, f);
    kt_people_side_run(gpu, f);
    kt_people_compare(cpu, gpu, what, "cpu", "cuda");
}

static void test_photos(void **state)
{
    (void)state;
    kt_people_side cpu = {0}, gpu = {0};
    kt_people_side_open(&cpu, KEYER_BACKEND_CPU);
    kt_people_side_open(&gpu, KEYER_BACKEND_CUDA);
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
    kt_people_side_close(&cpu);
    kt_people_side_close(&gpu);
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
    kt_people_side cpu = {0}, gpu = {0};
    kt_people_side_open(&cpu, KEYER_BACKEND_CPU);
    kt_people_side_open(&gpu, KEYER_BACKEND_CUDA);
    for (int i = 0; i < 4; i++) {
        char what[32];
        snprintf(what, sizeof(what), "vtest frame %d", i);
        assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
        compare(&cpu, &gpu, f, what);
    }
    assert_true(cpu.np >= 3);
    kt_people_side_close(&cpu);
    kt_people_side_close(&gpu);
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
