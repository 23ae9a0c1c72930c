/* Pipeline statistics and traces: histogram percentiles against exact ones, stage counters
 * and the bottleneck, the trace's JSON (checked by a small JSON parser). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_json.h"
#include "pipeline/stats.h"
#include "pipeline/trace.h"
#include "testutil.h"

/* ---- histogram --------------------------------------------------------------------------------- */

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_histogram_bins(void **state)
{
    (void)state;
    /* bins are contiguous and increasing: the low edge of bin(v) is <= v < low edge of next */
    int64_t vals[] = {0, 1, 31, 32, 33, 63, 64, 65, 1000, 123456, 1000000007LL, 1LL << 39};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        int b = kr_histogram_bin(vals[i]);
        assert_true(b >= 0 && b < KR_HIST_BINS);
        assert_true(kr_histogram_bin_low(b) <= vals[i]);
        if (b + 1 < KR_HIST_BINS)
            assert_true(vals[i] < kr_histogram_bin_low(b + 1));
    }
    for (int b = 1; b < KR_HIST_BINS; b++)
        assert_true(kr_histogram_bin_low(b) > kr_histogram_bin_low(b - 1));
    assert_int_equal(kr_histogram_bin(-5), 0);
    assert_int_equal(kr_histogram_bin(INT64_MAX), KR_HIST_BINS - 1);
}

static void test_histogram_quantiles(void **state)
{
    (void)state;
    enum { N = 20000 };
    int64_t *v = malloc(N * sizeof(*v));
    assert_non_null(v);
    kr_histogram h;
    kr_histogram_reset(&h);
    assert_true(kr_histogram_quantile(&h, 0.5) == 0.0);
    /* a skewed, latency-like distribution: mostly ~2 ms, a tail to ~80 ms */
    uint64_t x = 88172645463325252ULL;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        int64_t ns = (int64_t)(2e6 * (1.0 + 0.2 * u) + (u > 0.97 ? 78e6 * (u - 0.97) / 0.03 : 0));
        v[i] = ns;
        sum += (double)ns;
        kr_histogram_add(&h, ns);
    }
    qsort(v, N, sizeof(*v), cmp64);
    double qs[] = {0.5, 0.9, 0.95, 0.99, 0.999};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        int64_t exact = v[(size_t)ceil(qs[i] * N) - 1];
        double got = kr_histogram_quantile(&h, qs[i]);
        assert_true(fabs(got - (double)exact) <= 0.035 * (double)exact);
    }
    assert_true(fabs(kr_histogram_mean(&h) - sum / N) < 1.0);
    assert_int_equal(h.min, v[0]);
    assert_int_equal(h.max, v[N - 1]);
    assert_true(kr_histogram_quantile(&h, 1.0) == (double)v[N - 1]);
    assert_true(kr_histogram_quantile(&h, 0.0) == (double)v[0]);
    /* merging two halves gives the same as one */
    kr_histogram a, b;
    kr_histogram_reset(&a);
    kr_histogram_reset(&b);
    for (int i = 0; i < N; i++)
        kr_histogram_add(i % 2 ? &a : &b, v[i]);
    kr_histogram_merge(&a, &b);
    assert_int_equal(a.count, h.count);
    assert_true(kr_histogram_quantile(&a, 0.99) == kr_histogram_quantile(&h, 0.99));
    free(v);
}

typedef struct rec {
    kr_stage_stats *s;
    int n;
} rec;

static void *record_main(void *arg)
{
    rec *r = arg;
    for (int i = 0; i < r->n; i++)
        kr_stage_stats_record(r->s, 2, 1000, 1000 + 500);
    return NULL;
}

static void test_stage_stats_and_bottleneck(void **state)
{
    (void)state;
    kr_stage_stats s[3];
    assert_int_equal(kr_stage_stats_init(&s[0], "decode", 1), 0);
    assert_int_equal(kr_stage_stats_init(&s[1], "infer", 1), 0);
    assert_int_equal(kr_stage_stats_init(&s[2], "composite", 4), 0);
    /* several threads recording into one stage */
    pthread_t t[4];
    rec r = {&s[0], 1000};
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, record_main, &r);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    kr_stage_stats_record(&s[1], 8, 0, 3000000);  /* 3 ms busy, one worker */
    kr_stage_stats_record(&s[2], 1, 0, 8000000);  /* 8 ms busy over four workers: 2 ms each */
    kr_stage_stats snaps[3];
    for (int i = 0; i < 3; i++)
        kr_stage_stats_snapshot(&s[i], &snaps[i]);
    assert_int_equal(snaps[0].items, 8000);
    assert_int_equal(snaps[0].calls, 4000);
    assert_int_equal(snaps[0].busy_ns, 4000 * 500);
    assert_int_equal(snaps[1].items, 8);
    /* decode: 2 ms, infer: 3 ms, composite: 8 ms / 4 = 2 ms per worker -> infer */
    assert_int_equal(kr_stage_stats_bottleneck(snaps, 3), 1);
    kr_stage_stats idle[2];
    memset(idle, 0, sizeof(idle));
    assert_int_equal(kr_stage_stats_bottleneck(idle, 2), -1);
    for (int i = 0; i < 3; i++)
        kr_stage_stats_fini(&s[i]);
}

/* ---- trace ------------------------------------------------------------------------------------ */

static char *slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return NULL;
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    return buf;
}

static void test_trace_json(void **state)
{
    (void)state;
    kr_trace *t = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_trace_create(0, &t, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_trace_create(5, &t, &err), KEYER_OK);
    int a = kr_trace_thread(t, "infer", 0);
    int b = kr_trace_thread(t, "composite", 1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    int64_t o = t->origin_ns;
    kr_trace_add(t, a, "infer", -1, -1, 4, o + 1000, o + 3500);
    kr_trace_add(t, b, "composite", 2, 17, 1, o + 4000, o + 5000);
    kr_trace_add(t, -1, "ignored", 0, 0, 1, o, o + 1); /* no track: not recorded */
    for (int i = 0; i < 5; i++)
        kr_trace_add(t, b, "composite", 0, i, 1, o + 6000 + i, o + 7000 + i);
    assert_int_equal(kr_trace_recorded(t), 5);
    assert_int_equal(kr_trace_dropped(t), 2);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(kr_trace_write(t, f, &err), KEYER_OK);
    char *text = slurp(f);
    fclose(f);
    assert_non_null(text);
    assert_true(json_objects(text) > 0);
    assert_int_equal(count(text, "\"ph\":\"X\""), 5);
    assert_int_equal(count(text, "\"thread_name\""), 2);
    assert_non_null(strstr(text, "\"name\":\"infer 0\""));
    assert_non_null(strstr(text, "\"name\":\"composite 1\""));
    /* the infer event: 1 us after the origin, 2.5 us long, a batch of 4 */
    assert_non_null(strstr(text, "\"ts\":1.000,\"dur\":2.500,\"args\":{\"frames\":4}"));
    assert_non_null(strstr(text, "\"stream\":2,\"frame\":17,\"frames\":1"));
    assert_non_null(strstr(text, "\"dropped_events\":2"));
    free(text);
    kr_trace_destroy(&t);
    assert_null(t);
    assert_int_equal(kr_trace_thread(NULL, "x", 0), -1);
    kr_trace_add(NULL, 0, "x", 0, 0, 1, 0, 1);
}

static void test_json_checker_rejects(void **state)
{
    (void)state;
    /* the checker itself must be able to fail, or the trace test proves nothing */
    assert_int_equal(json_objects("{\"a\":1}"), 1);
    assert_int_equal(json_objects("{\"a\":[1,2,{\"b\":null}]}"), 2);
    assert_int_equal(json_objects("{\"a\":1,}"), -1);
    assert_int_equal(json_objects("{\"a\" 1}"), -1);
    assert_int_equal(json_objects("[1,2"), -1);
    assert_int_equal(json_objects("{\"a\":nan}"), -1);
    assert_int_equal(json_objects("{\"a\":\"x\ny\"}"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histogram_bins),
        cmocka_unit_test(test_histogram_quantiles),
        cmocka_unit_test(test_stage_stats_and_bottleneck),
        cmocka_unit_test(test_trace_json),
        cmocka_unit_test(test_json_checker_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
