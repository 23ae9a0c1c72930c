/* Declarative option tables: defaults, parsing, validation, get, help, and the effects'
 * own tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/effects.h"
#include "keyer/options.h"

typedef struct demo {
    int count;
    float gain;
    int enabled;
    int shape;
    uint32_t colour;
    int untouched;
} demo;

static const keyer_option_choice shapes[] = {
    {"square", 0, "four corners"}, {"circle", 1, "round"}, {"star", 7, NULL}, {NULL, 0, NULL},
};

static const keyer_option table[] = {
    {"count", "how many", offsetof(demo, count), KEYER_OPTION_INT, 3, -5, 10, NULL},
    {"gain", "how much", offsetof(demo, gain), KEYER_OPTION_FLOAT, 0.5, 0, 2, NULL},
    {"enabled", "on or off", offsetof(demo, enabled), KEYER_OPTION_BOOL, 1, 0, 1, NULL},
    {"shape", "which shape", offsetof(demo, shape), KEYER_OPTION_ENUM, 1, 0, 0, shapes},
    {"colour", "which colour", offsetof(demo, colour), KEYER_OPTION_COLOR, 0x102030, 0, 0, NULL},
    {NULL, NULL, 0, KEYER_OPTION_INT, 0, 0, 0, NULL},
};

static demo defaults(void)
{
    demo d;
    memset(&d, 0, sizeof(d));
    d.untouched = 42;
    assert_int_equal(keyer_options_set_defaults(table, &d, NULL), KEYER_OK);
    return d;
}

static void test_defaults_and_find(void **state)
{
    (void)state;
    demo d = defaults();
    assert_int_equal(d.count, 3);
    assert_float_equal(d.gain, 0.5f, 0);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(d.shape, 1);
    assert_int_equal(d.colour, 0x102030);
    assert_int_equal(d.untouched, 42);
    assert_int_equal(keyer_options_count(table), 5);
    assert_int_equal(keyer_options_count(NULL), 0);
    assert_ptr_equal(keyer_option_find(table, "gain"), &table[1]);
    assert_null(keyer_option_find(table, "nope"));
    assert_null(keyer_option_find(NULL, "gain"));
    assert_int_equal(keyer_options_validate(table, &d, "demo", NULL), KEYER_OK);
}

static void test_set_each_type(void **state)
{
    (void)state;
    demo d = defaults();
    keyer_error err = {0};
    assert_int_equal(keyer_option_set(table, &d, "count", "-5", &err), KEYER_OK);
    assert_int_equal(d.count, -5);
    assert_int_equal(keyer_option_set(table, &d, "gain", "1.5e0", &err), KEYER_OK);
    assert_float_equal(d.gain, 1.5f, 0);
    assert_int_equal(keyer_option_set(table, &d, "enabled", "off", &err), KEYER_OK);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(keyer_option_set(table, &d, "enabled", "yes", &err), KEYER_OK);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(keyer_option_set(table, &d, "shape", "star", &err), KEYER_OK);
    assert_int_equal(d.shape, 7);
    assert_int_equal(keyer_option_set(table, &d, "shape", "0", &err), KEYER_OK);
    assert_int_equal(d.shape, 0);
    assert_int_equal(keyer_option_set(table, &d, "colour", "#00FF80", &err), KEYER_OK);
    assert_int_equal(d.colour, 0x00FF80);
    assert_int_equal(keyer_option_set(table, &d, "colour", "0xabcdef", &err), KEYER_OK);
    assert_int_equal(d.colour, 0xABCDEF);
    assert_int_equal(keyer_option_set(table, &d, "colour", "white", &err), KEYER_OK);
    assert_int_equal(d.colour, 0xFFFFFF);
    assert_int_equal(d.untouched, 42);
}

static void test_bad_values(void **state)
{
    (void)state;
    demo d = defaults(), before = d;
    keyer_error err = {0};
    struct {
        const char *name, *value, *expect;
    } bad[] = {
        {"count", "11", "outside"},       {"count", "1.5", "not an integer"},
        {"count", "", "not an integer"},  {"count", "99999999999999999999", "not an integer"},
        {"gain", "-0.1", "outside"},      {"gain", "nan", "finite"},
        {"gain", "inf", "finite"},        {"gain", "1x", "finite"},
        {"enabled", "maybe", "boolean"},  {"shape", "triangle", "square, circle, star"},
        {"shape", "3", "not one of"},     {"colour", "#12345", "not a colour"},
        {"colour", "#1234567", "colour"}, {"colour", "#12345g", "colour"},
        {"missing", "1", "unknown option 'missing'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(keyer_option_set(table, &d, bad[i].name, bad[i].value, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        if (!strstr(err.message, bad[i].expect))
            fail_msg("%s=%s: message '%s' lacks '%s'", bad[i].name, bad[i].value, err.message,
                     bad[i].expect);
        assert_memory_equal(&d, &before, sizeof(d));
    }
    assert_int_equal(keyer_option_set(NULL, &d, "count", "1", &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_option_set(table, NULL, "count", "1", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_option_set(table, &d, NULL, "1", &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_option_set(table, &d, "count", NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
}

static void test_parse_list_is_atomic(void **state)
{
    (void)state;
    demo d = defaults();
    keyer_error err = {0};
    assert_int_equal(keyer_options_parse(table, &d, "count=7,gain=2:shape=square,,colour=black", &err),
                     KEYER_OK);
    assert_int_equal(d.count, 7);
    assert_float_equal(d.gain, 2.0f, 0);
    assert_int_equal(d.shape, 0);
    assert_int_equal(d.colour, 0);
    demo before = d;
    assert_int_equal(keyer_options_parse(table, &d, "count=1,gain=9", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_memory_equal(&d, &before, sizeof(d));
    assert_int_equal(keyer_options_parse(table, &d, "count=1,gain", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "name=value"));
    assert_int_equal(keyer_options_parse(table, &d, "count=1,bogus=2", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_memory_equal(&d, &before, sizeof(d));
    assert_int_equal(keyer_options_parse(table, &d, "", &err), KEYER_OK);
    char *big = malloc(5000);
    memset(big, 'a', 4999);
    big[4999] = 0;
    assert_int_equal(keyer_options_parse(table, &d, big, &err), KEYER_STATUS_INVALID_ARGUMENT);
    free(big);
}

static void test_validate_and_get(void **state)
{
    (void)state;
    demo d = defaults();
    keyer_error err = {0};
    char buf[64];
    assert_int_equal(keyer_option_get(table, &d, "gain", buf, sizeof(buf), &err), KEYER_OK);
    assert_string_equal(buf, "0.5");
    assert_int_equal(keyer_option_get(table, &d, "shape", buf, sizeof(buf), &err), KEYER_OK);
    assert_string_equal(buf, "circle");
    assert_int_equal(keyer_option_get(table, &d, "colour", buf, sizeof(buf), &err), KEYER_OK);
    assert_string_equal(buf, "#102030");
    assert_int_equal(keyer_option_get(table, &d, "enabled", buf, sizeof(buf), &err), KEYER_OK);
    assert_string_equal(buf, "true");
    assert_int_equal(keyer_option_get(table, &d, "count", buf, 1, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    /* every formatted value parses back to itself */
    for (const keyer_option *o = table; o->name; o++) {
        demo e = defaults();
        assert_int_equal(keyer_option_get(table, &d, o->name, buf, sizeof(buf), &err), KEYER_OK);
        assert_int_equal(keyer_option_set(table, &e, o->name, buf, &err), KEYER_OK);
        assert_memory_equal(&e, &d, sizeof(d));
    }
    d.count = 11;
    assert_int_equal(keyer_options_validate(table, &d, "demo", &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "demo: count = 11"));
    d = defaults();
    d.enabled = 2;
    assert_int_equal(keyer_options_validate(table, &d, "demo", &err), KEYER_STATUS_INVALID_ARGUMENT);
    d = defaults();
    d.shape = 3;
    assert_int_equal(keyer_options_validate(table, &d, "demo", &err), KEYER_STATUS_INVALID_ARGUMENT);
    d = defaults();
    d.colour = 0x1000000;
    assert_int_equal(keyer_options_validate(table, &d, "demo", &err), KEYER_STATUS_INVALID_ARGUMENT);
}

static void test_help(void **state)
{
    (void)state;
    size_t need = keyer_options_help(table, NULL, 0);
    assert_true(need > 100);
    char *buf = malloc(need + 1);
    assert_int_equal(keyer_options_help(table, buf, need + 1), need);
    assert_int_equal(strlen(buf), need);
    assert_non_null(strstr(buf, "count"));
    assert_non_null(strstr(buf, "range -5..10"));
    assert_non_null(strstr(buf, "default circle"));
    assert_non_null(strstr(buf, "star"));
    assert_non_null(strstr(buf, "#102030"));
    char small[16];
    assert_int_equal(keyer_options_help(table, small, sizeof(small)), need);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    free(buf);
}

/* The effects' tables: their defaults validate, their *_defaults() agree with them, and every
 * option can be set from its own formatted value. */
static void test_effect_tables(void **state)
{
    (void)state;
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    keyer_refine_params rp = keyer_refine_params_defaults();
    keyer_composite_params cp = keyer_composite_params_defaults();
    struct {
        const keyer_option *t;
        void *obj;
        size_t size;
    } e[] = {{keyer_prepare_options(), &pp, sizeof(pp)},
             {keyer_refine_options(), &rp, sizeof(rp)},
             {keyer_composite_options(), &cp, sizeof(cp)}};
    assert_int_equal(pp.width, 256);
    assert_int_equal(rp.upsample, KEYER_UPSAMPLE_GUIDED);
    assert_int_equal(cp.key_color, 0x00B140);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(keyer_options_validate(e[i].t, e[i].obj, "effect", NULL), KEYER_OK);
        char buf[64];
        for (const keyer_option *o = e[i].t; o->name; o++) {
            assert_non_null(o->help);
            assert_int_equal(keyer_option_get(e[i].t, e[i].obj, o->name, buf, sizeof(buf), NULL),
                             KEYER_OK);
            assert_int_equal(keyer_option_set(e[i].t, e[i].obj, o->name, buf, NULL), KEYER_OK);
        }
    }
    keyer_error err = {0};
    assert_int_equal(keyer_options_parse(keyer_composite_options(), &cp, "mode=green,blur_radius=20",
                                         &err), KEYER_OK);
    assert_int_equal(cp.mode, KEYER_COMPOSITE_GREEN_SCREEN);
    assert_int_equal(keyer_options_parse(keyer_refine_options(), &rp, "temporal=mediapipe,dilate=-3",
                                         &err), KEYER_OK);
    assert_int_equal(rp.temporal, KEYER_TEMPORAL_MEDIAPIPE);
    assert_int_equal(rp.dilate, -3);
    assert_int_equal(keyer_options_parse(keyer_prepare_options(), &pp, "dtype=f16,fit=letterbox",
                                         &err), KEYER_OK);
    assert_int_equal(pp.dtype, KEYER_DTYPE_F16);
    assert_int_equal(pp.fit, KEYER_FIT_LETTERBOX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_find),   cmocka_unit_test(test_set_each_type),
        cmocka_unit_test(test_bad_values),          cmocka_unit_test(test_parse_list_is_atomic),
        cmocka_unit_test(test_validate_and_get),    cmocka_unit_test(test_help),
        cmocka_unit_test(test_effect_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
