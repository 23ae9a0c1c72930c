/*
 * The keying chain object (keyer/keying.h) on a CUDA GPU (label gpu; exits 77 without a
 * device), against the CPU object on the same photo, within the tolerance between the CPU and
 * CUDA kernels (PSNR >= 30 dB, as test_pipeline_gpu.c):
 *  - CUDA frames with the network on CUDA: the output and matte allocated in CUDA memory, the
 *    mask in CUDA memory; the selfie model and pose-lite (logits, letterboxed);
 *  - the hybrid paths: CUDA frames with the network on the CPU, host frames with the network
 *    on CUDA;
 *  - a host background with CUDA frames (copied up once); a caller's stream; ordering with
 *    another stream (stream_wait, stream_signal); a second frame with its history.
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

#include "core/device.h"
#include "keyer/image.h"
#include "keyer/keying.h"
#include "kt_gpu.h"
#include "testutil.h"

static const kr_device_fns *dev;

static keyer_frame *read_photo(const char *file)
{
    char path[512];
    keyer_frame *f = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    if (keyer_image_read(kt_data_path(path, sizeof(path), file), KEYER_PIXEL_FORMAT_RGB24, f,
                         &err))
        fail_msg("%s", err.message);
    return f;
}

/* A copy of host frame @p h in CUDA memory of device 0. */
static keyer_frame *upload(const keyer_frame *h)
{
    keyer_frame *d = NULL;
    keyer_error err = {0};
    if (keyer_frame_create(&d, &err) ||
        kr_device_frame_alloc(dev, 0, d, h->format, h->width, h->height, &err) ||
        kr_device_frame_copy(dev, 0, d, h, NULL, &err))
        fail_msg("%s", err.message);
    return d;
}

/* A host copy of CUDA frame @p d. */
static keyer_frame *download(const keyer_frame *d)
{
    keyer_frame *h = NULL;
    keyer_error err = {0};
    assert_int_equal(d->memory, KEYER_MEMORY_CUDA);
    if (keyer_frame_create(&h, &err) ||
        keyer_frame_alloc(h, d->format, d->width, d->height, NULL, &err) ||
        kr_device_frame_copy(dev, d->device, h, d, NULL, &err))
        fail_msg("%s", err.message);
    return h;
}

/* PSNR of two host frames of one plane (RGB24, RGBA, GRAY8). */
static double psnr(const keyer_frame *a, const keyer_frame *b)
{
    assert_int_equal(a->format, b->format);
    assert_int_equal(a->width, b->width);
    assert_int_equal(a->height, b->height);
    int pw, ph, bpe;
    assert_int_equal(keyer_pixel_format_plane(a->format, a->width, a->height, 0, &pw, &ph, &bpe,
                                              NULL), KEYER_OK);
    double se = 0;
    for (int y = 0; y < ph; y++)
        for (int x = 0; x < pw * bpe; x++) {
            double d = (double)a->data[0][y * a->stride[0] + x] -
                       (double)b->data[0][y * b->stride[0] + x];
            se += d * d;
        }
    double mse = se / ((double)pw * ph * bpe);
    return mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
}

static keyer_keying *make(const char *model, keyer_backend backend, keyer_composite_mode mode,
                          void *stream)
{
    keyer_keying_params p = keyer_keying_params_defaults();
    p.model = model;
    p.backend = backend;
    p.composite.mode = mode;
    p.stream = stream;
    p.threads = 2;
    keyer_keying *k = NULL;
    keyer_error err = {0};
    if (keyer_keying_create(&p, &k, &err))
        fail_msg("%s", err.message);
    return k;
}

/* The CPU object's output and matte of @p photo (host frames). */
static void cpu_reference(const char *model, keyer_composite_mode mode, const keyer_frame *photo,
                          const keyer_frame *bg, keyer_frame **out, keyer_frame **matte)
{
    keyer_keying *k = make(model, KEYER_BACKEND_CPU, mode, NULL);
    keyer_error err = {0};
    *out = *matte = NULL;
    if ((bg && keyer_keying_set_background(k, bg, &err)) || keyer_frame_create(out, &err) ||
        keyer_frame_create(matte, &err) || keyer_keying_process(k, photo, *out, *matte, &err))
        fail_msg("%s", err.message);
    keyer_keying_destroy(&k);
}

/* Keys @p photo with @p backend, the frame in CUDA memory (@p cuda_frame) or host memory, and
 * compares with the CPU object. */
static void check(const char *model, keyer_backend backend, int cuda_frame,
                  keyer_composite_mode mode, const keyer_frame *bg, void *stream)
{
    keyer_frame *photo = read_photo("grace_hopper.jpg"), *ref_out, *ref_matte;
    cpu_reference(model, mode, photo, bg, &ref_out, &ref_matte);
    keyer_keying *k = make(model, backend, mode, stream);
    keyer_frame *in = cuda_frame ? upload(photo) : photo, *out = NULL, *matte = NULL;
    keyer_error err = {0};
    if ((bg && keyer_keying_set_background(k, bg, &err)) || keyer_frame_create(&out, &err) ||
        keyer_frame_create(&matte, &err) || keyer_keying_process(k, in, out, matte, &err) ||
        keyer_keying_synchronize(k, &err))
        fail_msg("%s", err.message);
    assert_int_equal(out->memory, in->memory);
    assert_int_equal(matte->memory, in->memory);
    assert_int_equal(keyer_keying_mask(k)->memory, in->memory);
    if (stream)
        assert_ptr_equal(keyer_keying_stream(k), stream);
    keyer_frame *ho = cuda_frame ? download(out) : out, *hm = cuda_frame ? download(matte) : matte;
    double po = psnr(ho, ref_out), pm = psnr(hm, ref_matte);
    print_message("%s, network on %s, frame in %s memory: output %.2f dB, matte %.2f dB\n", model,
                  keyer_backend_name(backend), cuda_frame ? "CUDA" : "host", po, pm);
    assert_true(po >= 30 && pm >= 30);
    if (cuda_frame) {
        keyer_frame_destroy(&ho);
        keyer_frame_destroy(&hm);
        keyer_frame_destroy(&in);
    }
    keyer_frame_destroy(&out);
    keyer_frame_destroy(&matte);
    keyer_frame_destroy(&ref_out);
    keyer_frame_destroy(&ref_matte);
    keyer_frame_destroy(&photo);
    keyer_keying_destroy(&k);
}

static void test_cuda_frames_cuda_network(void **state)
{
    (void)state;
    check("selfie", KEYER_BACKEND_CUDA, 1, KEYER_COMPOSITE_BLUR, NULL, NULL);
    check("selfie", KEYER_BACKEND_CUDA, 1, KEYER_COMPOSITE_ALPHA, NULL, NULL);
    check("pose-lite", KEYER_BACKEND_CUDA, 1, KEYER_COMPOSITE_MASK, NULL, NULL);
}

static void test_hybrid_paths(void **state)
{
    (void)state;
    check("selfie", KEYER_BACKEND_CPU, 1, KEYER_COMPOSITE_BLUR, NULL, NULL);
    check("selfie", KEYER_BACKEND_CUDA, 0, KEYER_COMPOSITE_BLUR, NULL, NULL);
    check("pose-lite", KEYER_BACKEND_CPU, 1, KEYER_COMPOSITE_MASK, NULL, NULL);
}

static void test_background_and_streams(void **state)
{
    (void)state;
    keyer_frame *bg = read_photo("messi5.jpg");
    check("selfie", KEYER_BACKEND_CUDA, 1, KEYER_COMPOSITE_IMAGE, bg, NULL); /* host bg */
    keyer_frame *dbg = upload(bg);
    check("selfie", KEYER_BACKEND_CPU, 0, KEYER_COMPOSITE_IMAGE, dbg, NULL); /* CUDA bg */
    keyer_frame_destroy(&dbg);
    keyer_frame_destroy(&bg);

    /* the caller's stream carries everything */
    keyer_error err = {0};
    void *s = NULL, *other = NULL;
    if (dev->stream_create(0, &s, &err) || dev->stream_create(0, &other, &err))
        fail_msg("%s", err.message);
    check("selfie", KEYER_BACKEND_CUDA, 1, KEYER_COMPOSITE_BLUR, NULL, s);

    /* another stream's frame: wait for it, process, make it wait for the result */
    keyer_keying *k = make("selfie", KEYER_BACKEND_CUDA, KEYER_COMPOSITE_BLUR, NULL);
    keyer_frame *photo = read_photo("grace_hopper.jpg"), *in = upload(photo), *out = NULL;
    assert_non_null(keyer_keying_stream(k));
    assert_ptr_not_equal(keyer_keying_stream(k), other);
    assert_int_equal(keyer_frame_create(&out, &err), KEYER_OK);
    for (int i = 0; i < 3; i++) { /* with the history of the frames before */
        if (keyer_keying_stream_wait(k, other, &err) ||
            keyer_keying_process(k, in, out, NULL, &err) ||
            keyer_keying_stream_signal(k, other, &err) || dev->stream_sync(0, other, &err))
            fail_msg("%s", err.message);
    }
    assert_int_equal(keyer_keying_stream_wait(k, keyer_keying_stream(k), &err), KEYER_OK);
    assert_int_equal(keyer_keying_synchronize(k, &err), KEYER_OK);
    keyer_frame_destroy(&out);
    keyer_frame_destroy(&in);
    keyer_frame_destroy(&photo);
    keyer_keying_destroy(&k);
    dev->stream_destroy(0, s);
    dev->stream_destroy(0, other);
}

int main(void)
{
    dev = kr_device_cuda();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_frames_cuda_network),
        cmocka_unit_test(test_hybrid_paths),
        cmocka_unit_test(test_background_and_streams),
    };
    return KT_GPU_RUN_GROUP(tests, NULL, NULL);
}
