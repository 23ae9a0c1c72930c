#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
