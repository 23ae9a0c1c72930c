/*
 * `keyer infer` end to end: the CLI runs each model on the committed reference input tensor and
 * its outputs match the reference outputs; bad invocations fail with clear messages.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

/* Runs a shell command, captures its combined output into buf, returns the exit status. */
static int run(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *buf, size_t n, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t used = fread(buf, 1, n - 1, p);
    buf[used] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *keyer_bin(void)
{
    const char *b = getenv("KEYER_BIN");
    return b ? b : "keyer";
}

typedef struct {
    const char *model, *file, *outputs[5];
} case_t;

static const case_t cases[] = {
    {"selfie", "selfie_segmentation.tflite", {"activation_10"}},
    {"face-short", "face_detection_short_range.tflite", {"regressors", "classificators"}},
};

static void test_infer_matches_reference(void **state)
{
    (void)state;
    char tmp[512], out[8192];
    kt_tmpdir(tmp, sizeof(tmp), "cli-infer");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char model[1024], dir[1024], input[1024];
        kt_model_path(model, sizeof(model), cases[c].file);
        if (!kt_exists(model))
            skip();
        snprintf(dir, sizeof(dir), "reference/%s/grace_hopper/input.f32", cases[c].model);
        kt_data_path(input, sizeof(input), dir);
        for (int b = 0; b < 2; b++) {
            const char *backend = b ? "cpu" : "reference";
            double tol = b ? 1e-3 : 1e-4;
            snprintf(dir, sizeof(dir), "%s/%s-%s", tmp, cases[c].model, backend);
            int rc = run(out, sizeof(out), "%s infer --model %s --backend %s --input-tensor %s "
                         "--output-dir %s", keyer_bin(), cases[c].model, backend, input, dir);
            if (rc != 0)
                fprintf(stderr, "%s\n", out);
            assert_int_equal(rc, 0);
            for (int o = 0; o < 5 && cases[c].outputs[o]; o++) {
                char got_path[1200], want_path[1200], rel[512];
                snprintf(got_path, sizeof(got_path), "%s/%s.f32", dir, cases[c].outputs[o]);
                snprintf(rel, sizeof(rel), "reference/%s/grace_hopper/%s.f32", cases[c].model,
                         cases[c].outputs[o]);
                kt_data_path(want_path, sizeof(want_path), rel);
                size_t ng = 0, nw = 0;
                float *got = kt_read_file(got_path, &ng), *want = kt_read_file(want_path, &nw);
                assert_non_null(got);
                assert_non_null(want);
                assert_int_equal(ng, nw);
                /* Relative to the magnitude where values are large (score logits reach
                 * hundreds), as in test_reference_outputs.c. */
                double d = 0;
                for (size_t i = 0; i < ng / sizeof(float); i++) {
                    double e = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
                    d = e > d ? e : d;
                }
                printf("keyer infer %s %s %s: max diff %.3g\n", cases[c].model, backend,
                       cases[c].outputs[o], d);
                assert_true(d <= tol);
                free(got);
                free(want);
            }
            /* outputs.json lists every output. */
            char json_path[1200];
            snprintf(json_path, sizeof(json_path), "%s/outputs.json", dir);
            size_t nj = 0;
            char *json = kt_read_file(json_path, &nj);
            assert_non_null(json);
            json = realloc(json, nj + 1);
            json[nj] = 0;
            for (int o = 0; o < 5 && cases[c].outputs[o]; o++)
                assert_non_null(strstr(json, cases[c].outputs[o]));
            free(json);
        }
    }
}

static void test_infer_bad_invocations(void **state)
{
    (void)state;
    char out[8192], tmp[512], input[1024], model[1024];
    kt_tmpdir(tmp, sizeof(tmp), "cli-infer-bad");
    kt_model_path(model, sizeof(model), "selfie_segmentation.tflite");
    if (!kt_exists(model))
        skip();
    /* Unknown model name: lists the known ones. */
    assert_int_not_equal(run(out, sizeof(out), "%s infer --model nosuch --input-tensor x.f32 "
                             "--output-dir %s", keyer_bin(), tmp), 0);
    assert_non_null(strstr(out, "unknown model 'nosuch'"));
    assert_non_null(strstr(out, "selfie"));
    /* Missing model file. */
    assert_int_not_equal(run(out, sizeof(out), "%s infer --model %s/missing.tflite "
                             "--input-tensor x.f32 --output-dir %s", keyer_bin(), tmp, tmp), 0);
    assert_non_null(strstr(out, "missing.tflite"));
    /* Input tensor of the wrong size: names the file and both sizes. */
    kt_data_path(input, sizeof(input), "reference/face-short/grace_hopper/input.f32");
    assert_int_not_equal(run(out, sizeof(out), "%s infer --model selfie --input-tensor %s "
                             "--output-dir %s", keyer_bin(), input, tmp), 0);
    assert_non_null(strstr(out, "input.f32"));
    assert_non_null(strstr(out, "786432"));
    /* A file that is not a model. */
    assert_int_not_equal(run(out, sizeof(out), "%s infer --model %s --input-tensor %s "
                             "--output-dir %s", keyer_bin(), input, input, tmp), 0);
    /* Unknown backend. */
    assert_int_not_equal(run(out, sizeof(out), "%s infer --model selfie --backend tpu "
                             "--input-tensor %s --output-dir %s", keyer_bin(), input, tmp), 0);
    assert_non_null(strstr(out, "tpu"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_infer_matches_reference),
        cmocka_unit_test(test_infer_bad_invocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
