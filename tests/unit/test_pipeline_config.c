/* Configuration files (YAML): settings in file order, lists, nested keys, and the messages of
 * malformed files. Skipped (77) when keyer was built without libyaml. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "keyer/config.h"
#include "testutil.h"

typedef struct seen {
    char keys[32][64];
    char values[32][128];
    int lines[32];
    int n;
    int fail_at; /* 1-based setting that the callback rejects; 0 none */
} seen;

static keyer_status collect(void *opaque, const char *key, const char *value, int line,
                            keyer_error *err)
{
    seen *s = opaque;
    if (s->n >= 32)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "too many");
    snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
    snprintf(s->values[s->n], sizeof(s->values[0]), "%s", value);
    s->lines[s->n] = line;
    s->n++;
    if (s->fail_at == s->n)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "bad value '%s' for %s",
                               value, key);
    return KEYER_OK;
}

static const char *write_tmp(const char *name, const char *text)
{
    static char path[4096 + 128];
    char dir[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_config");
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(kt_write_file(path, text, strlen(text)), 0);
    return path;
}

static void test_config_settings(void **state)
{
    (void)state;
    const char *path = write_tmp("ok.yaml", "# keyer settings\n"
                                            "model: selfie-landscape\n"
                                            "blur: 20\n"
                                            "alpha: false\n"
                                            "inputs: [a.mp4, \"b c.mov\"]\n"
                                            "refine:\n"
                                            "  feather: 3\n"
                                            "  temporal: mediapipe\n"
                                            "output: 'out/'\n"
                                            "empty:\n");
    seen s;
    memset(&s, 0, sizeof(s));
    keyer_error err = {0};
    keyer_status st = keyer_config_read(path, collect, &s, &err);
    if (st == KEYER_STATUS_UNSUPPORTED)
        skip();
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(s.n, 9);
    const char *want[9][2] = {{"model", "selfie-landscape"}, {"blur", "20"},
                              {"alpha", "false"},            {"inputs", "a.mp4"},
                              {"inputs", "b c.mov"},         {"refine.feather", "3"},
                              {"refine.temporal", "mediapipe"}, {"output", "out/"},
                              {"empty", ""}};
    for (int i = 0; i < 9; i++) {
        assert_string_equal(s.keys[i], want[i][0]);
        assert_string_equal(s.values[i], want[i][1]);
    }
    assert_int_equal(s.lines[0], 2);
    assert_int_equal(s.lines[5], 7);
}

static void test_config_empty_file(void **state)
{
    (void)state;
    seen s;
    memset(&s, 0, sizeof(s));
    keyer_error err = {0};
    keyer_status st = keyer_config_read(write_tmp("empty.yaml", ""), collect, &s, &err);
    if (st == KEYER_STATUS_UNSUPPORTED)
        skip();
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(keyer_config_read(write_tmp("comment.yaml", "# nothing\n---\n"), collect,
                                       &s, &err),
                     KEYER_OK);
    assert_int_equal(s.n, 0);
}

static void expect_bad(const char *name, const char *text, const char *fragment)
{
    seen s;
    memset(&s, 0, sizeof(s));
    keyer_error err = {0};
    const char *path = write_tmp(name, text);
    keyer_status st = keyer_config_read(path, collect, &s, &err);
    if (st == KEYER_STATUS_UNSUPPORTED)
        skip();
    assert_int_equal(st, KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, path));
    if (!strstr(err.message, fragment))
        fail_msg("message '%s' lacks '%s'", err.message, fragment);
}

static void test_config_malformed(void **state)
{
    (void)state;
    expect_bad("list.yaml", "- a\n- b\n", "must be a mapping");
    expect_bad("scalar.yaml", "just words\n", "must be a mapping");
    expect_bad("syntax.yaml", "a: [1, 2\nb: 3\n", ":");
    expect_bad("deep.yaml", "a:\n  b:\n    c: 1\n", "two levels");
    expect_bad("listmap.yaml", "a: [{b: 1}]\n", "plain values");
    expect_bad("alias.yaml", "a: &x 1\nb: *x\n", "aliases");
    expect_bad("twodocs.yaml", "a: 1\n---\nb: 2\n", "one YAML document");
    expect_bad("tab.yaml", "a:\n\tb: 1\n", ":2:");
}

static void test_config_callback_error_and_io(void **state)
{
    (void)state;
    seen s;
    memset(&s, 0, sizeof(s));
    s.fail_at = 2;
    keyer_error err = {0};
    keyer_status st = keyer_config_read(write_tmp("cb.yaml", "a: 1\nb: two\nc: 3\n"), collect, &s,
                                        &err);
    if (st == KEYER_STATUS_UNSUPPORTED)
        skip();
    assert_int_equal(st, KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s.n, 2); /* stopped at the rejected setting */
    assert_non_null(strstr(err.message, "bad value 'two' for b"));
    assert_int_equal(keyer_config_read("/nonexistent/keyer.yaml", collect, &s, &err),
                     KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/keyer.yaml"));
    assert_int_equal(keyer_config_read(NULL, collect, &s, &err), KEYER_STATUS_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_settings),
        cmocka_unit_test(test_config_empty_file),
        cmocka_unit_test(test_config_malformed),
        cmocka_unit_test(test_config_callback_error_and_io),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
