#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/graph.h" /* kr_half_to_float */
#include "keyer/image.h"

static void *counting_alloc(void *opaque, size_t size, size_t alignment)
{
    kt_alloc_state *s = opaque;
    s->calls++;
    if (s->fail_at && s->calls == s->fail_at)
        return NULL;
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    void *p = aligned_alloc(alignment, rounded);
    if (p)
        s->live++;
    return p;
}

static void counting_free(void *opaque, void *ptr)
{
    kt_alloc_state *s = opaque;
    if (ptr) {
        s->live--;
        free(ptr);
    }
}

keyer_allocator kt_counting_allocator(kt_alloc_state *state)
{
    keyer_allocator a = {counting_alloc, counting_free, state};
    return a;
}

static const char *env_path(char *buf, size_t n, const char *var, const char *fallback,
                            const char *file)
{
    const char *dir = getenv(var);
    if (!dir)
        dir = fallback;
    snprintf(buf, n, "%s/%s", dir, file);
    return buf;
}

const char *kt_model_path(char *buf, size_t n, const char *file)
{
    return env_path(buf, n, "KEYER_MODELS_DIR", "models", file);
}

const char *kt_data_path(char *buf, size_t n, const char *file)
{
    return env_path(buf, n, "KEYER_TEST_DATA", "tests/data", file);
}

const char *kt_shared_path(char *buf, size_t n, const char *file)
{
    env_path(buf, n, "KEYER_SHARED_DIR", "../shared", file);
    return kt_exists(buf) ? buf : NULL;
}

int kt_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void *kt_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    void *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            data = malloc(len ? (size_t)len : 1);
            if (data && fread(data, 1, (size_t)len, f) != (size_t)len) {
                free(data);
                data = NULL;
            } else if (data) {
                *size = (size_t)len;
            }
        }
    }
    fclose(f);
    return data;
}

float *kt_read_f16_file(const char *path, size_t *count)
{
    size_t size = 0;
    unsigned char *raw = kt_read_file(path, &size);
    if (!raw || size % 2) {
        free(raw);
        return NULL;
    }
    float *out = malloc(size ? size * 2 : 1);
    if (out) {
        for (size_t i = 0; i < size / 2; i++)
            out[i] = kr_half_to_float((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
        *count = size / 2;
    }
    free(raw);
    return out;
}

int kt_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, size, f);
    return (fclose(f) == 0 && w == size) ? 0 : -1;
}

double kt_max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d))
            return INFINITY;
        if (d > m)
            m = d;
    }
    return m;
}

const char *kt_tmpdir(char *buf, size_t n, const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, n, "%s/keyer-test-%s-%ld", t ? t : "/tmp", tag, (long)getpid());
    mkdir(buf, 0700);
    return buf;
}

int kt_golden_check(const keyer_frame *got, const char *name, int tolerance, char *msg, size_t n)
{
    char path[512], file[256];
    snprintf(file, sizeof(file), "golden/%s.png", name);
    kt_data_path(path, sizeof(path), file);
    keyer_error err = {0};
    const char *update = getenv("KEYER_UPDATE_GOLDEN");
    if (update && *update == '1') {
        if (keyer_image_write(path, got, &err)) {
            snprintf(msg, n, "%s", err.message);
            return -1;
        }
        snprintf(msg, n, "wrote %s", path);
        return 0;
    }
    keyer_frame *want = NULL;
    int rc = -1;
    if (keyer_frame_create(&want, &err) || keyer_image_read(path, got->format, want, &err)) {
        snprintf(msg, n, "golden image %s: %s (KEYER_UPDATE_GOLDEN=1 makes it)", path,
                 err.message);
        goto done;
    }
    rc = 1;
    if (want->width != got->width || want->height != got->height) {
        snprintf(msg, n, "%s: %dx%d, golden image %dx%d", name, got->width, got->height,
                 want->width, want->height);
        goto done;
    }
    int bpp = got->format == KEYER_PIXEL_FORMAT_GRAY8   ? 1
              : got->format == KEYER_PIXEL_FORMAT_RGB24 ? 3
                                                        : 4;
    int worst = 0, wx = 0, wy = 0;
    long differ = 0;
    for (int y = 0; y < got->height; y++)
        for (int x = 0; x < got->width * bpp; x++) {
            int d = abs(got->data[0][y * got->stride[0] + x] -
                        want->data[0][y * want->stride[0] + x]);
            if (d > worst) {
                worst = d;
                wx = x / bpp;
                wy = y;
            }
            differ += d != 0;
        }
    rc = worst > tolerance;
    if (!rc) {
        snprintf(msg, n, "%s: max difference %d, %ld samples differ", name, worst, differ);
    } else {
        snprintf(file, sizeof(file), "%s.got.png", name);
        int wrote = keyer_image_write(file, got, &err) == KEYER_OK;
        snprintf(msg, n, "%s: max difference %d (> %d) at (%d,%d), %ld samples differ%s%s", name,
                 worst, tolerance, wx, wy, differ, wrote ? "; rendered image: " : "",
                 wrote ? file : "");
    }
done:
    keyer_frame_destroy(&want);
    return rc;
}
