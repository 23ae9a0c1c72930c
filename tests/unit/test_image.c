/* Still images: decoding the test photos into every output format, PNG round trips,
 * bad input (missing, directory, empty, truncated, text named .png) and failed writes. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keyer/frame.h"
#include "keyer/image.h"
#include "kt_io.h"
#include "testutil.h"

static keyer_frame *read_photo(const char *name, keyer_pixel_format fmt)
{
    keyer_frame *f = kt_read_image(name, fmt);
    assert_int_equal(keyer_frame_check(f, NULL), KEYER_OK);
    assert_int_equal(f->memory, KEYER_MEMORY_HOST);
    assert_int_equal(f->format, fmt);
    return f;
}

static int clamp255(double v) { return v < 0 ? 0 : v > 255 ? 255 : (int)(v + 0.5); }

/* Every format decodes at the photo's size, and the formats agree with each other:
 * RGBA = RGB24 + opaque alpha, NV12 and YUV420P hold the same samples, and RGB made
 * from the YUV samples with full-range BT.601 matches the decoder's RGB. */
static void test_read_formats_agree(void **state)
{
    (void)state;
    static const struct { const char *name; int w, h; } photos[] = {
        {"grace_hopper.jpg", 512, 600},
        {"messi5.jpg", 548, 342},
    };
    for (size_t i = 0; i < sizeof(photos) / sizeof(photos[0]); i++) {
        keyer_frame *rgb = read_photo(photos[i].name, KEYER_PIXEL_FORMAT_RGB24);
        keyer_frame *rgba = read_photo(photos[i].name, KEYER_PIXEL_FORMAT_RGBA);
        keyer_frame *gray = read_photo(photos[i].name, KEYER_PIXEL_FORMAT_GRAY8);
        keyer_frame *nv12 = read_photo(photos[i].name, KEYER_PIXEL_FORMAT_NV12);
        keyer_frame *yuv = read_photo(photos[i].name, KEYER_PIXEL_FORMAT_YUV420P);
        int w = photos[i].w, h = photos[i].h;
        keyer_frame *all[] = {rgb, rgba, gray, nv12, yuv};
        for (int k = 0; k < 5; k++) {
            assert_int_equal(all[k]->width, w);
            assert_int_equal(all[k]->height, h);
        }
        /* JPEG is full-range BT.601. */
        assert_int_equal(yuv->range, KEYER_COLOR_RANGE_FULL);
        assert_int_equal(yuv->matrix, KEYER_COLOR_MATRIX_BT601);
        assert_int_equal(nv12->range, KEYER_COLOR_RANGE_FULL);

        double sum_rgb_err = 0, sum_gray_err = 0, mean = 0;
        long n = 0;
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w; x++) {
                const uint8_t *p = rgb->data[0] + y * rgb->stride[0] + 3 * x;
                const uint8_t *q = rgba->data[0] + y * rgba->stride[0] + 4 * x;
                assert_memory_equal(p, q, 3);
                assert_int_equal(q[3], 255);
                int Y = yuv->data[0][y * yuv->stride[0] + x];
                assert_int_equal(Y, nv12->data[0][y * nv12->stride[0] + x]);
                int U = yuv->data[1][(y / 2) * yuv->stride[1] + x / 2];
                int V = yuv->data[2][(y / 2) * yuv->stride[2] + x / 2];
                assert_int_equal(U, nv12->data[1][(y / 2) * nv12->stride[1] + 2 * (x / 2)]);
                assert_int_equal(V, nv12->data[1][(y / 2) * nv12->stride[1] + 2 * (x / 2) + 1]);
                int r = clamp255(Y + 1.402 * (V - 128));
                int g = clamp255(Y - 0.344136 * (U - 128) - 0.714136 * (V - 128));
                int b = clamp255(Y + 1.772 * (U - 128));
                sum_rgb_err += abs(r - p[0]) + abs(g - p[1]) + abs(b - p[2]);
                int luma = clamp255(0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]);
                sum_gray_err += abs(luma - gray->data[0][y * gray->stride[0] + x]);
                mean += p[0] + p[1] + p[2];
                n++;
            }
        }
        mean /= 3.0 * (double)n;
        /* Chroma upsampling differs (nearest here, interpolated in the decoder). */
        assert_true(sum_rgb_err / (3.0 * (double)n) < 4.0);
        assert_true(sum_gray_err / (double)n < 2.0);
        /* A real photo: neither black nor white nor flat. */
        assert_true(mean > 40 && mean < 215);
        for (int k = 0; k < 5; k++)
            keyer_frame_destroy(&all[k]);
    }
}

static void test_png_round_trip(void **state)
{
    (void)state;
    char dir[512], path[1024];
    kt_tmpdir(dir, sizeof(dir), "image");
    keyer_pixel_format fmts[] = {KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_RGBA,
                                 KEYER_PIXEL_FORMAT_GRAY8};
    for (int k = 0; k < 3; k++) {
        keyer_frame *src = read_photo("messi5.jpg", fmts[k]);
        if (fmts[k] == KEYER_PIXEL_FORMAT_RGBA) /* a real alpha channel: a diagonal ramp */
            for (int y = 0; y < src->height; y++)
                for (int x = 0; x < src->width; x++)
                    src->data[0][y * src->stride[0] + 4 * x + 3] = (uint8_t)((x + y) & 255);
        snprintf(path, sizeof(path), "%s/out_%s.png", dir, keyer_pixel_format_name(fmts[k]));
        keyer_error err = {0};
        if (keyer_image_write(path, src, &err))
            fail_msg("%s", err.message);
        /* The same format comes back bit for bit (PNG is lossless). */
        keyer_frame *again = NULL;
        assert_int_equal(keyer_frame_create(&again, NULL), KEYER_OK);
        if (keyer_image_read(path, fmts[k], again, &err))
            fail_msg("%s", err.message);
        assert_int_equal(again->width, src->width);
        assert_int_equal(again->height, src->height);
        int bpp = fmts[k] == KEYER_PIXEL_FORMAT_RGB24 ? 3 : fmts[k] == KEYER_PIXEL_FORMAT_RGBA ? 4 : 1;
        for (int y = 0; y < src->height; y++)
            assert_memory_equal(again->data[0] + y * again->stride[0],
                                src->data[0] + y * src->stride[0], (size_t)(src->width * bpp));
        /* No temporary file is left beside it. */
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d)))
            assert_null(strstr(e->d_name, ".tmp-"));
        closedir(d);
        /* Overwriting an existing file works. */
        if (keyer_image_write(path, src, &err))
            fail_msg("%s", err.message);
        unlink(path);
        keyer_frame_destroy(&again);
        keyer_frame_destroy(&src);
    }
    rmdir(dir);
}

/* Expects @p path to fail with @p status and a message naming the path and @p reason. */
static void expect_read_error(const char *path, keyer_status status, const char *reason)
{
    keyer_frame *f = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    keyer_status st = keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, f, &err);
    if (st != status)
        fail_msg("%s: expected status %s, got %s (%s)", path, keyer_status_name(status),
                 keyer_status_name(st), err.message);
    if (!strstr(err.message, path))
        fail_msg("message does not name %s: %s", path, err.message);
    if (reason && !strstr(err.message, reason))
        fail_msg("message lacks \"%s\": %s", reason, err.message);
    print_message("    %s\n", err.message);
    assert_null(f->data[0]);
    assert_int_equal(f->format, KEYER_PIXEL_FORMAT_NONE);
    keyer_frame_destroy(&f);
}

static void test_bad_input(void **state)
{
    (void)state;
    char dir[512], path[1024], src[1024];
    kt_tmpdir(dir, sizeof(dir), "image-bad");

    snprintf(path, sizeof(path), "%s/missing.jpg", dir);
    expect_read_error(path, KEYER_STATUS_IO, "No such file");
    expect_read_error(dir, KEYER_STATUS_IO, "directory");

    snprintf(path, sizeof(path), "%s/empty.jpg", dir);
    assert_int_equal(kt_write_file(path, "", 0), 0);
    expect_read_error(path, KEYER_STATUS_BAD_DATA, "empty");
    unlink(path);

    size_t size = 0;
    uint8_t *jpeg = kt_read_file(kt_data_path(src, sizeof(src), "grace_hopper.jpg"), &size);
    assert_non_null(jpeg);
    assert_true(size > 10000);
    /* Cut at 10%, half and 97%: the picture is incomplete each time. */
    size_t cuts[] = {size / 10, size / 2, size - size / 32};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/truncated%d.jpg", dir, i);
        assert_int_equal(kt_write_file(path, jpeg, cuts[i]), 0);
        expect_read_error(path, KEYER_STATUS_BAD_DATA, NULL);
        unlink(path);
    }
    /* A JPEG header followed by noise. */
    for (size_t i = 2000; i < size; i++)
        jpeg[i] = (uint8_t)(i * 7919u >> 3);
    snprintf(path, sizeof(path), "%s/noise.jpg", dir);
    assert_int_equal(kt_write_file(path, jpeg, size), 0);
    expect_read_error(path, KEYER_STATUS_BAD_DATA, NULL);
    unlink(path);
    free(jpeg);

    snprintf(path, sizeof(path), "%s/notes.png", dir);
    const char *text = "This is a plain text file, not a PNG image.\nSecond line.\n";
    assert_int_equal(kt_write_file(path, text, strlen(text)), 0);
    expect_read_error(path, KEYER_STATUS_BAD_DATA, NULL);
    unlink(path);
    rmdir(dir);

    /* Arguments. */
    keyer_frame *f = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_image_read(NULL, KEYER_PIXEL_FORMAT_RGB24, f, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_image_read(kt_data_path(src, sizeof(src), "messi5.jpg"),
                                      KEYER_PIXEL_FORMAT_GRAYF32, f, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "grayf32"));
    assert_int_equal(keyer_image_read(src, KEYER_PIXEL_FORMAT_RGB24, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&f);
}

static void test_write_errors(void **state)
{
    (void)state;
    char dir[512], path[1024];
    keyer_error err = {0};
    kt_tmpdir(dir, sizeof(dir), "image-werr");
    keyer_frame *img = read_photo("grace_hopper.jpg", KEYER_PIXEL_FORMAT_RGB24);

    /* Directory does not exist; parent is a regular file. */
    snprintf(path, sizeof(path), "%s/no/such/dir/out.png", dir);
    assert_int_equal(keyer_image_write(path, img, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, path));
    assert_false(kt_exists(path));
    char file[1024];
    snprintf(file, sizeof(file), "%s/plain", dir);
    assert_int_equal(kt_write_file(file, "x", 1), 0);
    snprintf(path, sizeof(path), "%s/plain/out.png", dir);
    assert_int_equal(keyer_image_write(path, img, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, path));
    unlink(file);

    /* Disk full, simulated with a file-size limit in a child: an error and no file. */
    snprintf(path, sizeof(path), "%s/full.png", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        keyer_error e = {0};
        keyer_status st = keyer_image_write(path, img, &e);
        int ok = st == KEYER_STATUS_IO && strstr(e.message, path) && !kt_exists(path);
        DIR *d = opendir(dir);
        struct dirent *ent;
        while (d && (ent = readdir(d)))
            if (strstr(ent->d_name, ".tmp-"))
                ok = 0;
        if (d)
            closedir(d);
        if (!ok)
            fprintf(stderr, "disk-full write: status %s, %s\n", keyer_status_name(st), e.message);
        _exit(ok ? 0 : 1);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_false(kt_exists(path));

    /* Formats PNG does not take, device frames, NULLs. */
    keyer_frame *nv12 = read_photo("grace_hopper.jpg", KEYER_PIXEL_FORMAT_NV12);
    snprintf(path, sizeof(path), "%s/nv12.png", dir);
    assert_int_equal(keyer_image_write(path, nv12, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "nv12"));
    assert_false(kt_exists(path));
    keyer_frame fake = *img;
    fake.memory = KEYER_MEMORY_CUDA;
    assert_int_equal(keyer_image_write(path, &fake, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_image_write(NULL, img, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_image_write(path, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&nv12);
    keyer_frame_destroy(&img);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_formats_agree),
        cmocka_unit_test(test_png_round_trip),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
