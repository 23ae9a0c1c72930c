/*
 * CUDA against CPU for the frame effects, on the test photos at several sizes (odd sizes,
 * row pitches that are not multiples of 16) and in every frame format: preparation (f32,
 * f16, letterbox, rotated ROI, batch), refinement (guided/bilinear, dilate/erode, feather,
 * temporal, GRAY8/GRAYF32) and compositing (blur, colour, green, image, alpha, premultiplied,
 * mask). 8-bit outputs may differ by at most 1 code value per sample; tensors by 1e-3.
 *
 * Built by ctest (label gpu, cmocka) when keyer has CUDA; exits 77 without a device.
 * Built with -DKT_NO_CMOCKA (and tests/common/kt_effects.c) it is a plain program (for
 * machines without cmocka) that reads the photos as binary PPM files from $KT_PPM_DIR
 * (<photo>.ppm) instead of decoding JPEG.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "keyer/effects.h"
#include "kt_effects.h"

#ifndef KT_NO_CMOCKA
#include <setjmp.h>
#include <cmocka.h>
#include "keyer/image.h"
#include "testutil.h"
#define CHECK(cond) assert_true(cond)
#define NOTE(...) print_message(__VA_ARGS__)
#else
static int failures;
#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                     \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)
#define NOTE(...) printf(__VA_ARGS__)
#endif

static void die(const char *what, const keyer_error *err)
{
    fprintf(stderr, "test_effects_gpu: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

/* ---- photos -------------------------------------------------------------------------- */

static keyer_frame *load_photo(const char *name)
{
    keyer_frame *f = NULL;
    keyer_error err = {0};
    if (keyer_frame_create(&f, &err))
        die("frame", &err);
#ifndef KT_NO_CMOCKA
    char path[512], file[64];
    snprintf(file, sizeof(file), "%s.jpg", name);
    kt_data_path(path, sizeof(path), file);
    if (keyer_image_read(path, KEYER_PIXEL_FORMAT_RGB24, f, &err))
        die(path, &err);
#else
    char path[512];
    const char *dir = getenv("KT_PPM_DIR");
    snprintf(path, sizeof(path), "%s/%s.ppm", dir ? dir : ".", name);
    FILE *fp = fopen(path, "rb");
    int w, h, maxv;
    if (!fp || fscanf(fp, "P6 %d %d %d", &w, &h, &maxv) != 3 || fgetc(fp) == EOF)
        die(path, NULL);
    if (keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGB24, w, h, NULL, &err))
        die("alloc", &err);
    for (int y = 0; y < h; y++)
        if (fread(f->data[0] + y * f->stride[0], 3, (size_t)w, fp) != (size_t)w)
            die(path, NULL);
    fclose(fp);
#endif
    return f;
}

static float *load_mask(const char *name)
{
    char path[512];
    const char *dir = getenv("KEYER_TEST_DATA");
    snprintf(path, sizeof(path), "%s/reference/selfie/%s/activation_10.f32", dir ? dir : "tests/data",
             name);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        const char *sh = getenv("KEYER_SHARED_DIR");
        snprintf(path, sizeof(path), "%s/reference/outputs/selfie/%s/activation_10.f32",
                 sh ? sh : "../shared", name);
        fp = fopen(path, "rb");
    }
    float *m = malloc(sizeof(float) * 256 * 256);
    if (!fp || fread(m, sizeof(float), 256 * 256, fp) != 256 * 256) {
        /* no reference mask: a synthetic soft blob keeps the comparison meaningful */
        for (int y = 0; y < 256; y++)
            for (int x = 0; x < 256; x++)
                m[y * 256 + x] = (float)(1 / (1 + exp((hypot(x - 128.0, (y - 150.0) * 1.2) - 80) / 6)));
    }
    if (fp)
        fclose(fp);
    return m;
}

/* ---- frames on the device -------------------------------------------------------------- */

static void free_device(void *opaque, void *data)
{
    (void)opaque;
    cudaFree(data);
}

/* A device copy of host frame h whose rows are `pad` bytes longer than needed. */
static keyer_frame *to_device(const keyer_frame *h, int pad)
{
    keyer_frame *d = NULL;
    if (keyer_frame_create(&d, NULL))
        die("frame", NULL);
    d->format = h->format;
    d->width = h->width;
    d->height = h->height;
    d->memory = KEYER_MEMORY_CUDA;
    d->matrix = h->matrix;
    d->range = h->range;
    int planes = keyer_pixel_format_planes(h->format);
    size_t offs[4], total = 0, rows[4];
    int ph[4];
    for (int p = 0; p < planes; p++) {
        int pw, bpe;
        keyer_pixel_format_plane(h->format, h->width, h->height, p, &pw, &ph[p], &bpe, NULL);
        int unit = h->format == KEYER_PIXEL_FORMAT_GRAYF32 ? 4 : bpe >= 2 ? 2 : 1;
        rows[p] = (size_t)pw * bpe;
        d->stride[p] = (ptrdiff_t)(rows[p] + (size_t)(pad / unit * unit));
        offs[p] = total;
        total += (size_t)d->stride[p] * ph[p] + 256;
        total = (total + 255) & ~(size_t)255;
    }
    void *mem = NULL;
    if (cudaMalloc(&mem, total) != cudaSuccess)
        die("cudaMalloc", NULL);
    cudaMemset(mem, 0, total);
    if (keyer_buffer_wrap(mem, total, KEYER_MEMORY_CUDA, free_device, NULL, &d->buf[0], NULL))
        die("wrap", NULL);
    for (int p = 0; p < planes; p++) {
        d->data[p] = (uint8_t *)mem + offs[p];
        if (cudaMemcpy2D(d->data[p], (size_t)d->stride[p], h->data[p], (size_t)h->stride[p],
                         rows[p], (size_t)ph[p], cudaMemcpyHostToDevice) != cudaSuccess)
            die("cudaMemcpy2D", NULL);
    }
    return d;
}

/* A host copy of device frame d. */
static keyer_frame *to_host(const keyer_frame *d)
{
    keyer_frame *h = NULL;
    if (keyer_frame_create(&h, NULL) ||
        keyer_frame_alloc(h, d->format, d->width, d->height, NULL, NULL))
        die("host frame", NULL);
    cudaDeviceSynchronize();
    for (int p = 0; p < keyer_pixel_format_planes(d->format); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(d->format, d->width, d->height, p, &pw, &ph, &bpe, NULL);
        if (cudaMemcpy2D(h->data[p], (size_t)h->stride[p], d->data[p], (size_t)d->stride[p],
                         (size_t)pw * bpe, (size_t)ph, cudaMemcpyDeviceToHost) != cudaSuccess)
            die("cudaMemcpy2D back", NULL);
    }
    h->matrix = d->matrix;
    h->range = d->range;
    return h;
}

static keyer_frame *new_host(keyer_pixel_format fmt, int w, int h)
{
    keyer_frame *f = NULL;
    if (keyer_frame_create(&f, NULL) || keyer_frame_alloc(f, fmt, w, h, NULL, NULL))
        die("host frame", NULL);
    for (int p = 0; p < keyer_pixel_format_planes(fmt); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(fmt, w, h, p, &pw, &ph, &bpe, NULL);
        for (int y = 0; y < ph; y++)
            memset(f->data[p] + y * f->stride[p], 0, (size_t)pw * bpe);
    }
    return f;
}

/* Largest difference between two host frames of one format, per sample (codes; floats for
 * GRAYF32 in 1/255 units so that the same bound reads as "codes"). */
static double frame_diff(const keyer_frame *a, const keyer_frame *b, long *count)
{
    double worst = 0;
    long n = 0;
    for (int p = 0; p < keyer_pixel_format_planes(a->format); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(a->format, a->width, a->height, p, &pw, &ph, &bpe, NULL);
        for (int y = 0; y < ph; y++) {
            const uint8_t *ra = a->data[p] + y * a->stride[p], *rb = b->data[p] + y * b->stride[p];
            if (a->format == KEYER_PIXEL_FORMAT_GRAYF32) {
                for (int x = 0; x < pw; x++) {
                    double d = fabs(((const float *)(const void *)ra)[x] -
                                    ((const float *)(const void *)rb)[x]) * 255;
                    n += d > 0;
                    worst = d > worst ? d : worst;
                }
            } else if (a->format == KEYER_PIXEL_FORMAT_P010) {
                for (int x = 0; x < pw * bpe / 2; x++) {
                    double d = abs((((const uint16_t *)(const void *)ra)[x] >> 6) -
                                   (((const uint16_t *)(const void *)rb)[x] >> 6));
                    n += d > 0;
                    worst = d > worst ? d : worst;
                }
            } else {
                for (int x = 0; x < pw * bpe; x++) {
                    double d = abs(ra[x] - rb[x]);
                    n += d > 0;
                    worst = d > worst ? d : worst;
                }
            }
        }
    }
    if (count)
        *count = n;
    return worst;
}

/* The photo resampled to w x h with the CPU prepare, then converted to `fmt` with the CPU
 * compositor (image replacement under a zero matte). */
static keyer_frame *photo_as(const keyer_frame *photo, keyer_pixel_format fmt, int w, int h)
{
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = w;
    pp.height = h;
    keyer_prepare *prep = NULL;
    keyer_error err = {0};
    if (keyer_prepare_create(&pp, &prep, &err))
        die("prepare", &err);
    float *t = malloc(sizeof(float) * 3 * (size_t)w * h);
    const keyer_frame *frames[1] = {photo};
    if (keyer_prepare_run(prep, frames, NULL, 1, t, NULL, &err))
        die("prepare run", &err);
    keyer_frame *rgb = new_host(KEYER_PIXEL_FORMAT_RGB24, w, h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < 3 * w; x++)
            rgb->data[0][y * rgb->stride[0] + x] = (uint8_t)lrintf(t[(size_t)y * 3 * w + x] * 255);
    free(t);
    keyer_prepare_destroy(&prep);
    if (fmt == KEYER_PIXEL_FORMAT_RGB24)
        return rgb;
    keyer_frame *out = new_host(fmt, w, h), *zero = new_host(KEYER_PIXEL_FORMAT_GRAY8, w, h);
    out->matrix = h >= 720 ? KEYER_COLOR_MATRIX_BT709 : KEYER_COLOR_MATRIX_BT601;
    out->range = KEYER_COLOR_RANGE_LIMITED;
    keyer_composite_params cp = keyer_composite_params_defaults();
    cp.mode = KEYER_COMPOSITE_IMAGE;
    keyer_composite *c = NULL;
    if (keyer_composite_create(&cp, &c, &err) || keyer_composite_set_background(c, rgb, &err) ||
        keyer_composite_run(c, out, zero, out, &err))
        die("conversion", &err);
    keyer_composite_destroy(&c);
    keyer_frame_destroy(&rgb);
    keyer_frame_destroy(&zero);
    if (fmt == KEYER_PIXEL_FORMAT_RGBA) /* a non-trivial alpha channel to keep */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                out->data[0][y * out->stride[0] + 4 * x + 3] = (uint8_t)(x * 7 + y);
    return out;
}

/* ---- the comparisons ----------------------------------------------------------------- */

static const keyer_pixel_format formats[] = {
    KEYER_PIXEL_FORMAT_NV12, KEYER_PIXEL_FORMAT_P010, KEYER_PIXEL_FORMAT_YUV420P,
    KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_RGBA,
};
static const int sizes[][3] = {{512, 600, 0}, {333, 211, 6}, {1920, 1080, 10}, {97, 61, 2}};

/* The value of an IEEE half. */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(m + 1024.0, e - 25);
    return h & 0x8000 ? -v : v;
}

static void check_prepare(const keyer_frame *h, const keyer_frame *d, const char *what)
{
    const struct {
        int w, h, fit, dtype;
        float scale, offset;
        keyer_roi roi;
        int use_roi;
    } cases[] = {
        {256, 256, KEYER_FIT_STRETCH, KEYER_DTYPE_F32, 1, 0, {0, 0, 0, 0, 0}, 0},
        {128, 128, KEYER_FIT_LETTERBOX, KEYER_DTYPE_F32, 2, -1, {0, 0, 0, 0, 0}, 0},
        {256, 144, KEYER_FIT_STRETCH, KEYER_DTYPE_F16, 1, 0, {0, 0, 0, 0, 0}, 0},
        {96, 112, KEYER_FIT_STRETCH, KEYER_DTYPE_F32, 1, 0, {0, 0, 0, 0, 0.5f}, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        keyer_prepare_params p = keyer_prepare_params_defaults();
        p.width = cases[i].w;
        p.height = cases[i].h;
        p.fit = cases[i].fit;
        p.dtype = cases[i].dtype;
        p.scale = cases[i].scale;
        p.offset = cases[i].offset;
        p.max_batch = 2;
        keyer_prepare *prep = NULL;
        keyer_error err = {0};
        if (keyer_prepare_create(&p, &prep, &err))
            die("prepare", &err);
        keyer_roi rois[2] = {cases[i].roi, cases[i].roi};
        rois[0].center_x = h->width * 0.45f;
        rois[0].center_y = h->height * 0.4f;
        rois[0].width = h->width * 0.5f;
        rois[0].height = h->height * 0.6f;
        rois[1] = rois[0];
        rois[1].rotation = -1.0f;
        size_t n = 2 * (size_t)p.width * p.height * 3, es = p.dtype == KEYER_DTYPE_F16 ? 2 : 4;
        void *th = malloc(n * es), *td = NULL, *back = malloc(n * es);
        if (cudaMalloc(&td, n * es) != cudaSuccess)
            die("cudaMalloc", NULL);
        const keyer_frame *fh[2] = {h, h}, *fd[2] = {d, d};
        if (keyer_prepare_run(prep, fh, cases[i].use_roi ? rois : NULL, 2, th, NULL, &err))
            die("prepare cpu", &err);
        if (keyer_prepare_run(prep, fd, cases[i].use_roi ? rois : NULL, 2, td, NULL, &err))
            die("prepare cuda", &err);
        cudaMemcpy(back, td, n * es, cudaMemcpyDeviceToHost);
        double worst = 0;
        for (size_t k = 0; k < n; k++) {
            double a, b;
            if (es == 2) {
                a = half_value(((uint16_t *)th)[k]);
                b = half_value(((uint16_t *)back)[k]);
            } else {
                a = ((float *)th)[k];
                b = ((float *)back)[k];
            }
            double dd = fabs(a - b);
            worst = dd > worst ? dd : worst;
        }
        if (worst > 1e-3)
            NOTE("prepare %s case %zu: max diff %g\n", what, i, worst);
        CHECK(worst <= 1e-3);
        free(th);
        free(back);
        cudaFree(td);
        keyer_prepare_destroy(&prep);
    }
}

static double worst_refine, worst_composite;

static void check_refine(const keyer_frame *h, const keyer_frame *d, float *mask, const char *what,
                         keyer_frame **alpha_out)
{
    const char *variants[] = {
        "", /* defaults: guided, threshold, feather 1, adaptive temporal */
        "upsample=bilinear,threshold=0,feather=0,temporal=off",
        "dilate=3,feather=0,temporal=mediapipe",
        "dilate=-2,feather=3,guided_radius=4,guided_eps=0.01",
    };
    keyer_frame mh;
    memset(&mh, 0, sizeof(mh));
    mh.format = KEYER_PIXEL_FORMAT_GRAYF32;
    mh.width = 256;
    mh.height = 256;
    mh.data[0] = (uint8_t *)mask;
    mh.stride[0] = 1024;
    keyer_frame *md = to_device(&mh, 12);
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
        for (int f32 = 0; f32 < 2; f32++) {
            keyer_refine_params rp = keyer_refine_params_defaults();
            keyer_error err = {0};
            if (keyer_options_parse(keyer_refine_options(), &rp, variants[v], &err))
                die("options", &err);
            keyer_refine *r = NULL, *rd = NULL; /* one per backend: each keeps its history */
            if (keyer_refine_create(&rp, &r, &err) || keyer_refine_create(&rp, &rd, &err))
                die("refine", &err);
            keyer_pixel_format af = f32 ? KEYER_PIXEL_FORMAT_GRAYF32 : KEYER_PIXEL_FORMAT_GRAY8;
            keyer_frame *ah = new_host(af, h->width, h->height);
            keyer_frame *ad = to_device(ah, 5);
            /* two frames so that temporal smoothing has a history (stream 0 on both) */
            for (int t = 0; t < 2; t++) {
                if (keyer_refine_run(r, 0, h, &mh, NULL, ah, &err))
                    die("refine cpu", &err);
                if (keyer_refine_run(rd, 0, d, md, NULL, ad, &err))
                    die("refine cuda", &err);
            }
            keyer_frame *back = to_host(ad);
            long n = 0;
            double w = frame_diff(ah, back, &n);
            worst_refine = w > worst_refine ? w : worst_refine;
            if (w > 1)
                NOTE("refine %s '%s' %s: max diff %g (%ld samples differ)\n", what, variants[v],
                     f32 ? "f32" : "u8", w, n);
            CHECK(w <= 1);
            if (v == 0 && !f32 && alpha_out)
                *alpha_out = ah;
            else
                keyer_frame_destroy(&ah);
            keyer_frame_destroy(&ad);
            keyer_frame_destroy(&back);
            keyer_refine_destroy(&r);
            keyer_refine_destroy(&rd);
        }
    keyer_frame_destroy(&md);
}

static void check_composite(const keyer_frame *h, const keyer_frame *d, const keyer_frame *alpha,
                            const keyer_frame *bg_photo, const char *what)
{
    const char *modes[] = {"mode=blur", "mode=blur,blur_radius=40,dither=0", "mode=color,color=#3060c0",
                           "mode=green", "mode=image", "mode=image", "mode=alpha",
                           "mode=premultiplied", "mode=mask", "mode=mask"};
    keyer_frame *alpha_d = to_device(alpha, 3);
    /* backgrounds: another photo (scaled to cover), and a frame of the same format/size */
    keyer_frame *bg_same = photo_as(bg_photo, h->format, h->width, h->height);
    keyer_frame *bg_h[2] = {(keyer_frame *)bg_photo, bg_same};
    keyer_frame *bg_d[2] = {to_device(bg_photo, 4), to_device(bg_same, 8)};
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        keyer_composite_params cp = keyer_composite_params_defaults();
        keyer_error err = {0};
        if (keyer_options_parse(keyer_composite_options(), &cp, modes[m], &err))
            die("options", &err);
        keyer_composite *ch = NULL, *cd = NULL;
        if (keyer_composite_create(&cp, &ch, &err) || keyer_composite_create(&cp, &cd, &err))
            die("composite", &err);
        int which = m == 5;
        if (cp.mode == KEYER_COMPOSITE_IMAGE &&
            (keyer_composite_set_background(ch, bg_h[which], &err) ||
             keyer_composite_set_background(cd, bg_d[which], &err)))
            die("background", &err);
        keyer_pixel_format of = h->format;
        if (cp.mode == KEYER_COMPOSITE_ALPHA || cp.mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
            of = KEYER_PIXEL_FORMAT_RGBA;
        if (m == 9)
            of = KEYER_PIXEL_FORMAT_GRAY8;
        keyer_frame *oh = new_host(of, h->width, h->height);
        keyer_frame *od = to_device(oh, 7);
        if (keyer_composite_run(ch, h, alpha, oh, &err))
            die("composite cpu", &err);
        if (keyer_composite_run(cd, d, alpha_d, od, &err))
            die("composite cuda", &err);
        keyer_frame *back = to_host(od);
        long n = 0;
        double w = frame_diff(oh, back, &n);
        worst_composite = w > worst_composite ? w : worst_composite;
        if (w > 1)
            NOTE("composite %s '%s': max diff %g (%ld samples differ)\n", what, modes[m], w, n);
        CHECK(w <= 1);
        keyer_frame_destroy(&oh);
        keyer_frame_destroy(&od);
        keyer_frame_destroy(&back);
        keyer_composite_destroy(&ch);
        keyer_composite_destroy(&cd);
    }
    keyer_frame_destroy(&alpha_d);
    keyer_frame_destroy(&bg_same);
    keyer_frame_destroy(&bg_d[0]);
    keyer_frame_destroy(&bg_d[1]);
}

static void run_all(void)
{
    const char *photos[] = {"grace_hopper", "messi5"};
    for (int pi = 0; pi < 2; pi++) {
        keyer_frame *photo = load_photo(photos[pi]);
        keyer_frame *other = load_photo(photos[1 - pi]);
        float *mask = load_mask(photos[pi]);
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (size_t fi = 0; fi < sizeof(formats) / sizeof(formats[0]); fi++) {
                int w = sizes[si][0], hh = sizes[si][1], pad = sizes[si][2];
                keyer_frame *h = photo_as(photo, formats[fi], w, hh);
                keyer_frame *d = to_device(h, pad + (int)fi * 2 + 1);
                char what[96];
                snprintf(what, sizeof(what), "%s %s %dx%d", photos[pi],
                         keyer_pixel_format_name(formats[fi]), w, hh);
                check_prepare(h, d, what);
                keyer_frame *alpha = NULL;
                check_refine(h, d, mask, what, &alpha);
                check_composite(h, d, alpha, other, what);
                keyer_frame_destroy(&alpha);
                keyer_frame_destroy(&h);
                keyer_frame_destroy(&d);
            }
        free(mask);
        keyer_frame_destroy(&photo);
        keyer_frame_destroy(&other);
    }
    NOTE("CUDA vs CPU: worst refine difference %g, worst composite difference %g (codes)\n",
         worst_refine, worst_composite);
}

static int have_device(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#ifndef KT_NO_CMOCKA
static void test_cuda_matches_cpu(void **state)
{
    (void)state;
    run_all();
}

int main(void)
{
    if (!have_device()) {
        fprintf(stderr, "test_effects_gpu: no CUDA device, skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cuda_matches_cpu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    if (!have_device()) {
        fprintf(stderr, "test_effects_gpu: no CUDA device, skipped\n");
        return 77;
    }
    run_all();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
#endif
