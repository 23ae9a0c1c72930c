/* Core types: status/error messages, frames and buffers, allocation failure, thread pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/threadpool.h"
#include "keyer/keyer.h"
#include "testutil.h"

static void test_status_names(void **state)
{
    (void)state;
    for (int s = 0; s < KEYER_STATUS_COUNT_; s++)
        assert_non_null(keyer_status_name((keyer_status)s));
    assert_string_equal(keyer_status_name(KEYER_OK), "ok");
    assert_string_equal(keyer_status_name((keyer_status)999), "unknown status");
}

static void test_error_set_and_prefix(void **state)
{
    (void)state;
    keyer_error err = {0};
    assert_int_equal(keyer_error_set(&err, KEYER_STATUS_IO, "cannot open %s", "a.mp4"),
                     KEYER_STATUS_IO);
    assert_string_equal(err.message, "cannot open a.mp4");
    assert_int_equal(keyer_error_prefix(&err, "reader: "), KEYER_STATUS_IO);
    assert_string_equal(err.message, "reader: cannot open a.mp4");
    /* Truncation keeps the string terminated. */
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    keyer_error_set(&err, KEYER_STATUS_BAD_DATA, "%s", big);
    assert_int_equal(strlen(err.message), KEYER_ERROR_MESSAGE_MAX - 1);
    keyer_error_clear(&err);
    assert_int_equal(err.status, KEYER_OK);
    assert_string_equal(err.message, "");
    /* NULL error pointers are accepted. */
    assert_int_equal(keyer_error_set(NULL, KEYER_STATUS_IO, "x"), KEYER_STATUS_IO);
}

static int log_calls;
static char log_last[256];
static void capture_log(void *opaque, keyer_log_level level, const char *msg)
{
    (void)opaque;
    (void)level;
    log_calls++;
    snprintf(log_last, sizeof(log_last), "%s", msg);
}

static void test_log_levels(void **state)
{
    (void)state;
    keyer_logger lg = {KEYER_LOG_INFO, capture_log, NULL};
    log_calls = 0;
    keyer_log(&lg, KEYER_LOG_DEBUG, "hidden");
    keyer_log(&lg, KEYER_LOG_INFO, "shown %d", 42);
    keyer_log(&lg, KEYER_LOG_ERROR, "error");
    assert_int_equal(log_calls, 2);
    assert_string_equal(log_last, "error");
    lg.level = KEYER_LOG_QUIET;
    keyer_log(&lg, KEYER_LOG_ERROR, "quiet");
    assert_int_equal(log_calls, 2);
}

static void test_frame_alloc_formats(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    static const int sizes[][2] = {{1, 1}, {3, 5}, {1919, 1079}, {1920, 1080}, {64, 2}};
    for (int fmt = 1; fmt < KEYER_PIXEL_FORMAT_COUNT_; fmt++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            int w = sizes[s][0], h = sizes[s][1];
            assert_int_equal(keyer_frame_alloc(f, (keyer_pixel_format)fmt, w, h, NULL, &err),
                             KEYER_OK);
            assert_int_equal(keyer_frame_check(f, &err), KEYER_OK);
            for (int p = 0; p < keyer_pixel_format_planes(f->format); p++) {
                int pw, ph, bpe;
                assert_int_equal(keyer_pixel_format_plane(f->format, w, h, p, &pw, &ph, &bpe, &err),
                                 KEYER_OK);
                assert_true(f->stride[p] >= pw * bpe);
                assert_int_equal(f->stride[p] % KEYER_ALIGNMENT, 0);
                /* Every byte of every plane is writable (ASan catches overruns). */
                for (int y = 0; y < ph; y++)
                    memset(f->data[p] + y * f->stride[p], 0xab, (size_t)pw * bpe);
            }
            assert_string_equal(keyer_pixel_format_name(f->format),
                                keyer_pixel_format_name(
                                    keyer_pixel_format_from_name(keyer_pixel_format_name(f->format))));
        }
    }
    keyer_frame_destroy(&f);
    assert_null(f);
    keyer_frame_destroy(&f); /* NULL accepted */
}

static void test_frame_bad_sizes(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NV12, 0, 10, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "0x10"));
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGBA, 10, -3, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGBA, 100000, 100000, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_frame_alloc(f, (keyer_pixel_format)77, 10, 10, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "unknown pixel format"));
    assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NONE, 10, 10, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    /* A failed allocation leaves an empty frame. */
    assert_null(f->data[0]);
    assert_int_equal(f->width, 0);
    keyer_frame_destroy(&f);
}

static void test_frame_check_strides(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame f;
    memset(&f, 0, sizeof(f));
    _Alignas(16) static uint8_t pixels[64 * 64 * 4 + 16];
    f.format = KEYER_PIXEL_FORMAT_RGBA;
    f.width = 16;
    f.height = 16;
    f.data[0] = pixels;
    f.stride[0] = 63; /* below 16 * 4 */
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "stride"));
    f.stride[0] = 64;
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_OK);
    f.format = KEYER_PIXEL_FORMAT_GRAYF32;
    f.stride[0] = 66; /* not a multiple of 4-byte floats */
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "multiple"));
    f.stride[0] = 64;
    f.data[0] = pixels + 2; /* float plane not aligned to its sample */
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "aligned"));
    f.data[0] = NULL;
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    f.format = KEYER_PIXEL_FORMAT_NV12;
    f.data[0] = pixels;
    f.stride[0] = 16;
    f.data[1] = NULL; /* missing chroma plane */
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "plane 1"));
    f.data[1] = pixels + 512;
    f.stride[1] = 17; /* NV12 chroma samples are single bytes: an odd stride is fine */
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_OK);
    f.format = KEYER_PIXEL_FORMAT_P010;
    f.stride[0] = 32;
    f.stride[1] = 33; /* odd stride for 16-bit samples */
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "multiple"));
    f.width = 0;
    assert_int_equal(keyer_frame_check(&f, &err), KEYER_STATUS_INVALID_ARGUMENT);
}

static void test_frame_ref_and_copy(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_frame *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(keyer_frame_create(&a, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&b, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&c, &err), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(a, KEYER_PIXEL_FORMAT_YUV420P, 33, 17, NULL, &err), KEYER_OK);
    a->pts = 1234;
    a->matrix = KEYER_COLOR_MATRIX_BT709;
    for (int p = 0; p < 3; p++)
        memset(a->data[p], 10 + p, (size_t)a->stride[p] * (p ? 9 : 17));
    assert_int_equal(keyer_frame_ref(b, a, &err), KEYER_OK);
    assert_ptr_equal(b->data[0], a->data[0]);
    assert_int_equal(keyer_frame_ref(a, a, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&a); /* b still holds the pixels */
    assert_int_equal(b->data[2][0], 12);
    assert_int_equal(keyer_frame_alloc(c, KEYER_PIXEL_FORMAT_YUV420P, 33, 17, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_frame_copy(c, b, &err), KEYER_OK);
    assert_int_equal(c->data[1][16], 11);
    assert_int_equal(c->pts, 1234);
    assert_int_equal(c->matrix, KEYER_COLOR_MATRIX_BT709);
    assert_int_equal(keyer_frame_alloc(c, KEYER_PIXEL_FORMAT_YUV420P, 32, 17, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_frame_copy(c, b, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&b);
    keyer_frame_destroy(&c);
}

static void test_out_of_memory_injection(void **state)
{
    (void)state;
    /* Fail each allocation in turn: every path returns OUT_OF_MEMORY and leaks nothing. */
    for (long fail = 1; fail <= 3; fail++) {
        kt_alloc_state st = {0, 0, fail};
        keyer_allocator a = kt_counting_allocator(&st);
        keyer_error err = {0};
        keyer_frame *f = NULL;
        assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
        keyer_status s = keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NV12, 640, 480, &a, &err);
        if (fail <= 2) {
            assert_int_equal(s, KEYER_STATUS_OUT_OF_MEMORY);
            assert_non_null(strstr(err.message, "nv12 640x480"));
            assert_null(f->data[0]);
        } else {
            assert_int_equal(s, KEYER_OK);
        }
        keyer_frame_destroy(&f);
        assert_int_equal(st.live, 0);
    }
    /* Huge requests fail cleanly with the system allocator too. */
    keyer_buffer *buf = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_buffer_create(SIZE_MAX - 8, NULL, &buf, &err), KEYER_STATUS_OUT_OF_MEMORY);
    assert_null(buf);
    assert_int_equal(keyer_buffer_create(0, NULL, &buf, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(keyer_alloc(NULL, 16, 3)); /* alignment not a power of two */
}

static int freed_count;
static void count_free(void *opaque, void *data)
{
    (void)opaque;
    (void)data;
    freed_count++;
}

static void test_buffer_wrap_refcount(void **state)
{
    (void)state;
    static char mem[32];
    keyer_buffer *b = NULL;
    keyer_error err = {0};
    freed_count = 0;
    assert_int_equal(keyer_buffer_wrap(mem, sizeof(mem), KEYER_MEMORY_CUDA, count_free, NULL, &b, &err),
                     KEYER_OK);
    assert_int_equal(keyer_buffer_memory(b), KEYER_MEMORY_CUDA);
    keyer_buffer *b2 = keyer_buffer_ref(b);
    keyer_buffer_unref(&b);
    assert_null(b);
    assert_int_equal(freed_count, 0);
    assert_ptr_equal(keyer_buffer_data(b2), mem);
    keyer_buffer_unref(&b2);
    assert_int_equal(freed_count, 1);
    keyer_buffer_unref(&b2);
    assert_int_equal(keyer_buffer_wrap(NULL, 4, KEYER_MEMORY_HOST, NULL, NULL, &b, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
}

typedef struct {
    atomic_int hits[1000];
} pool_ctx;

static void mark(void *ctx, size_t i)
{
    pool_ctx *c = ctx;
    atomic_fetch_add(&c->hits[i], 1);
}

static void test_threadpool(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        kr_threadpool *pool = NULL;
        keyer_error err = {0};
        assert_int_equal(kr_threadpool_create(threads, &pool, &err), KEYER_OK);
        assert_int_equal(kr_threadpool_threads(pool), threads);
        for (int round = 0; round < 20; round++) {
            static pool_ctx ctx;
            memset(&ctx, 0, sizeof(ctx));
            size_t n = (size_t)(round * 50);
            kr_threadpool_parallel_for(pool, mark, &ctx, n);
            for (size_t i = 0; i < 1000; i++)
                assert_int_equal(atomic_load(&ctx.hits[i]), i < n ? 1 : 0);
        }
        kr_threadpool_destroy(&pool);
        assert_null(pool);
    }
    assert_true(kr_cpu_count() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_error_set_and_prefix),
        cmocka_unit_test(test_log_levels),
        cmocka_unit_test(test_frame_alloc_formats),
        cmocka_unit_test(test_frame_bad_sizes),
        cmocka_unit_test(test_frame_check_strides),
        cmocka_unit_test(test_frame_ref_and_copy),
        cmocka_unit_test(test_out_of_memory_injection),
        cmocka_unit_test(test_buffer_wrap_refcount),
        cmocka_unit_test(test_threadpool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
