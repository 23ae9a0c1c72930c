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

#include <limits.h>
#include <math.h>

#include "keyer/config.h"
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
    KEYER_OPTION_FIELD("count", "how many", offsetof(demo, count), KEYER_OPTION_INT, 3, -5, 10,
                       NULL),
    KEYER_OPTION_FIELD("gain", "how much", offsetof(demo, gain), KEYER_OPTION_FLOAT, 0.5, 0, 2,
                       NULL),
    KEYER_OPTION_FIELD("enabled", "on or off", offsetof(demo, enabled), KEYER_OPTION_BOOL, 1, 0, 1,
                       NULL),
    KEYER_OPTION_FIELD("shape", "which shape", offsetof(demo, shape), KEYER_OPTION_ENUM, 1, 0, 0,
                       shapes),
    KEYER_OPTION_FIELD("colour", "which colour", offsetof(demo, colour), KEYER_OPTION_COLOR,
                       0x102030, 0, 0, NULL),
    KEYER_OPTION_END,
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

/* ---- string options ------------------------------------------------------------------- */

typedef struct named {
    const char *label;
    const char *path;
    int count;
} named;

static const keyer_option string_table[] = {
    {"label", "a short label", offsetof(named, label), KEYER_OPTION_STRING, 0, 1, 8, NULL, NULL,
     "abc", "TEXT", 'l', 0u},
    {"path", "any path, or none", offsetof(named, path), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL,
     NULL, "PATH", 0, 0u},
    KEYER_OPTION_FIELD("count", "how many", offsetof(named, count), KEYER_OPTION_INT, 2, 0, 9,
                       NULL),
    KEYER_OPTION_END,
};

static void test_string_option(void **state)
{
    (void)state;
    named n = {"junk", "junk", -1};
    keyer_error err = {0};
    assert_int_equal(keyer_options_set_defaults(string_table, &n, &err), KEYER_OK);
    assert_ptr_equal(n.label, string_table[0].def_string); /* the literal itself */
    assert_null(n.path);
    assert_int_equal(n.count, 2);
    assert_int_equal(keyer_options_validate(string_table, &n, "named", &err), KEYER_OK);
    /* the field takes the caller's pointer, not a copy */
    char text[] = "hello";
    assert_int_equal(keyer_option_set(string_table, &n, "label", text, &err), KEYER_OK);
    assert_ptr_equal(n.label, text);
    assert_int_equal(keyer_option_set(string_table, &n, "path", "", &err), KEYER_OK);
    assert_string_equal(n.path, "");
    /* bad values: too short, too long, missing; the struct is unchanged */
    named before = n;
    assert_int_equal(keyer_option_set(string_table, &n, "label", "", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option label: '' is 0 bytes long, not 1..8"));
    assert_int_equal(keyer_option_set(string_table, &n, "label", "ninebytes", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "'ninebytes' is 9 bytes long"));
    assert_int_equal(keyer_option_set(string_table, &n, "label", NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option label: no value given"));
    assert_memory_equal(&n, &before, sizeof(n));
    /* get gives the text back ("" for an unset string) */
    char buf[16];
    assert_int_equal(keyer_option_get(string_table, &n, "label", buf, sizeof(buf), &err), KEYER_OK);
    assert_string_equal(buf, "hello");
    n.path = NULL;
    assert_int_equal(keyer_option_get(string_table, &n, "path", buf, sizeof(buf), &err), KEYER_OK);
    assert_string_equal(buf, "");
    assert_int_equal(keyer_option_get(string_table, &n, "label", buf, 3, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    /* validate: an unset string is valid only when no length is required */
    assert_int_equal(keyer_options_validate(string_table, &n, "named", &err), KEYER_OK);
    n.label = NULL;
    assert_int_equal(keyer_options_validate(string_table, &n, "named", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "named: label is unset (it needs at least 1 bytes)");
    n.label = "far too long";
    assert_int_equal(keyer_options_validate(string_table, &n, "named", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "named: label = 'far too long' is not 1..8 bytes long");
    /* a list cannot set a string (its field would point into a temporary copy) */
    n = before;
    assert_int_equal(keyer_options_parse(string_table, &n, "count=3,label=abc", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option label: a string cannot be set from a list"));
    assert_memory_equal(&n, &before, sizeof(n));
    assert_int_equal(keyer_options_parse(string_table, &n, "count=3", &err), KEYER_OK);
    assert_int_equal(n.count, 3);
    /* help: type, default, length bounds */
    char help[1024];
    size_t need = keyer_options_help(string_table, help, sizeof(help));
    assert_true(need < sizeof(help));
    assert_non_null(strstr(help, "  label                string default abc, length 1..8\n"));
    assert_non_null(strstr(help, "  path                 string default (none)\n"));
}

/* ---- setters ---------------------------------------------------------------------------- */

typedef struct effect {
    int mode;   /* 0 none, 1 blur, 2 soft preset, 3 hard preset */
    float radius;
    int calls;  /* setter calls that changed something */
} effect;

static keyer_status set_blur(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    effect *e = obj;
    double r = e->radius;
    /* the table checked the number already; the setter still parses it itself */
    if (value && keyer_parse_number(o->name, value, -INFINITY, INFINITY, &r, err))
        return KEYER_STATUS_INTERNAL;
    e->mode = 1;
    e->radius = (float)r;
    e->calls++;
    return KEYER_OK;
}

static keyer_status set_preset(const keyer_option *o, void *obj, const char *value,
                               keyer_error *err)
{
    effect *e = obj;
    if (!strcmp(value, "soft") || !strcmp(value, "hard")) {
        e->mode = value[0] == 's' ? 2 : 3;
        e->radius = value[0] == 's' ? 24.0f : 4.0f;
        e->calls++;
        return KEYER_OK;
    }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "option %s: '%s' is not soft or hard", o->name, value);
}

static keyer_status set_silent_failure(const keyer_option *o, void *obj, const char *value,
                                       keyer_error *err)
{
    (void)o, (void)obj, (void)value, (void)err;
    return KEYER_STATUS_INVALID_ARGUMENT; /* breaks the contract: no message */
}

static const keyer_option effect_table[] = {
    {"blur", "blur, optionally with a radius", 0, KEYER_OPTION_FLOAT, 12, 2, 256, NULL, set_blur,
     NULL, "SIGMA", 'b', KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    {"preset", "soft or hard", 0, KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, set_preset, "soft",
     "soft|hard", 0, 0u},
    {"silent", "fails without saying why", 0, KEYER_OPTION_CUSTOM, 0, 0, 0, NULL,
     set_silent_failure, NULL, NULL, 0, 0u},
    KEYER_OPTION_FIELD("radius", "the radius itself", offsetof(effect, radius), KEYER_OPTION_FLOAT,
                       12, 2, 256, NULL),
    KEYER_OPTION_END,
};

static void test_custom_setter(void **state)
{
    (void)state;
    effect e = {7, 99.0f, 0};
    keyer_error err = {0};
    /* defaults and validation skip the setters: only "radius" is a field */
    assert_int_equal(keyer_options_set_defaults(effect_table, &e, &err), KEYER_OK);
    assert_int_equal(e.mode, 7);
    assert_float_equal(e.radius, 12.0f, 0);
    assert_int_equal(keyer_options_validate(effect_table, &e, "effect", &err), KEYER_OK);
    /* a typed entry with a setter: given alone, with a value, with bad values */
    assert_int_equal(keyer_option_set(effect_table, &e, "blur", NULL, &err), KEYER_OK);
    assert_int_equal(e.mode, 1);
    assert_float_equal(e.radius, 12.0f, 0);
    assert_int_equal(keyer_option_set(effect_table, &e, "blur", "16", &err), KEYER_OK);
    assert_float_equal(e.radius, 16.0f, 0);
    assert_int_equal(e.calls, 2);
    effect before = e;
    assert_int_equal(keyer_option_set(effect_table, &e, "blur", "300", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option blur: 300 is outside 2..256"));
    assert_int_equal(keyer_option_set(effect_table, &e, "blur", "x", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option blur: 'x' is not a finite number"));
    assert_memory_equal(&e, &before, sizeof(e)); /* the setter never ran */
    /* a custom entry: the setter alone judges the text; it needs a value */
    assert_int_equal(keyer_option_set(effect_table, &e, "preset", "hard", &err), KEYER_OK);
    assert_int_equal(e.mode, 3);
    assert_float_equal(e.radius, 4.0f, 0);
    before = e;
    assert_int_equal(keyer_option_set(effect_table, &e, "preset", "medium", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "option preset: 'medium' is not soft or hard");
    assert_int_equal(keyer_option_set(effect_table, &e, "preset", NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option preset: no value given"));
    assert_memory_equal(&e, &before, sizeof(e));
    /* a setter that fails without a message still gives one naming the option and value */
    assert_int_equal(keyer_option_set(effect_table, &e, "silent", "x", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "option silent: 'x' was refused");
    /* an entry with a setter has no field to read */
    char buf[32];
    assert_int_equal(keyer_option_get(effect_table, &e, "blur", buf, sizeof(buf), &err),
                     KEYER_STATUS_UNSUPPORTED);
    assert_int_equal(keyer_option_get(effect_table, &e, "radius", buf, sizeof(buf), &err),
                     KEYER_OK);
    assert_string_equal(buf, "4");
    /* lists: typed values are checked before anything is stored */
    assert_int_equal(keyer_options_parse(effect_table, &e, "preset=soft,blur=20", &err), KEYER_OK);
    assert_int_equal(e.mode, 1);
    assert_float_equal(e.radius, 20.0f, 0);
    before = e;
    assert_int_equal(keyer_options_parse(effect_table, &e, "preset=hard,blur=1", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_memory_equal(&e, &before, sizeof(e));
    assert_int_equal(keyer_options_parse(effect_table, &e, "radius=30,preset=medium", &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "'medium'"));
    /* help: the metavar names a custom entry's type; defaults as given */
    char help[1024];
    keyer_options_help(effect_table, help, sizeof(help));
    assert_non_null(strstr(help, "  blur                 float  default 12, range 2..256\n"));
    assert_non_null(strstr(help, "  preset               soft|hard default soft\n"));
    assert_non_null(strstr(help, "  silent               custom default (none)\n"));
}

/* Options whose value may be left out: BOOL stores 1, others their default. */
static void test_optional_values(void **state)
{
    (void)state;
    static const keyer_option optional[] = {
        {"enabled", "", offsetof(demo, enabled), KEYER_OPTION_BOOL, 0, 0, 1, NULL, NULL, NULL,
         NULL, 0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
        {"count", "", offsetof(demo, count), KEYER_OPTION_INT, 3, -5, 10, NULL, NULL, NULL, NULL,
         0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
        KEYER_OPTION_FIELD("gain", "", offsetof(demo, gain), KEYER_OPTION_FLOAT, 0.5, 0, 2, NULL),
        KEYER_OPTION_END,
    };
    demo d = defaults();
    keyer_error err = {0};
    d.enabled = 0;
    d.count = 9;
    assert_int_equal(keyer_option_set(optional, &d, "enabled", NULL, &err), KEYER_OK);
    assert_int_equal(d.enabled, 1);
    assert_int_equal(keyer_option_set(optional, &d, "enabled", "off", &err), KEYER_OK);
    assert_int_equal(d.enabled, 0);
    assert_int_equal(keyer_option_set(optional, &d, "count", NULL, &err), KEYER_OK);
    assert_int_equal(d.count, 3);
    assert_int_equal(keyer_option_set(optional, &d, "gain", NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "option gain: no value given"));
}

/* The parsers behind the tables, as programs use them for their own arguments. */
static void test_parsers(void **state)
{
    (void)state;
    keyer_error err = {0};
    int i = 42;
    assert_int_equal(keyer_parse_int("--n", "-7", -10, 10, &i, &err), KEYER_OK);
    assert_int_equal(i, -7);
    struct {
        const char *text;
        int min, max;
        const char *expect;
    } bad[] = {
        {"11", -10, 10, "--n: 11 is outside -10..10"},
        {"1.5", -10, 10, "--n: '1.5' is not an integer"},
        {"", 0, 10, "--n: '' is not an integer"},
        {"0", 1, INT_MAX, "--n: '0' is not an integer >= 1"},
        {"x", 1, INT_MAX, "--n: 'x' is not an integer >= 1"},
        {"5", INT_MIN, 4, "--n: '5' is not an integer <= 4"},
        {"99999999999999999999", INT_MIN, INT_MAX, "--n: '99999999999999999999' is not an "
                                                   "integer"},
        {"3000000000", INT_MIN, INT_MAX, "is not an integer"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        assert_int_equal(keyer_parse_int("--n", bad[k].text, bad[k].min, bad[k].max, &i, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        if (!strstr(err.message, bad[k].expect))
            fail_msg("'%s': message '%s' lacks '%s'", bad[k].text, err.message, bad[k].expect);
        assert_int_equal(i, -7);
    }
    double x = 1;
    assert_int_equal(keyer_parse_number("--x", "2.5e1", 0, 100, &x, &err), KEYER_OK);
    assert_true(x == 25.0);
    assert_int_equal(keyer_parse_number("--x", "101", 0, 100, &x, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "--x: 101 is outside 0..100");
    assert_int_equal(keyer_parse_number("--x", "-1", 0, INFINITY, &x, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "--x: -1 is less than 0");
    assert_int_equal(keyer_parse_number("--x", "7", -INFINITY, 5, &x, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err.message, "--x: 7 is more than 5");
    assert_int_equal(keyer_parse_number("--x", "nan", -INFINITY, INFINITY, &x, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "'nan' is not a finite number"));
    assert_int_equal(keyer_parse_number("--x", "1e999", -INFINITY, INFINITY, &x, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_true(x == 25.0);
    int b = 5;
    assert_int_equal(keyer_parse_bool("--b", "on", &b, &err), KEYER_OK);
    assert_int_equal(b, 1);
    assert_int_equal(keyer_parse_bool("--b", "nope", &b, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "--b: 'nope' is not a boolean"));
    assert_int_equal(b, 1);
    assert_int_equal(keyer_parse_int("--n", NULL, 0, 1, &i, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_parse_number("--x", "1", 0, 1, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
}

/* Enum-typed fields of the public structs are set through ENUM entries as ints. */
static void test_enum_fields(void **state)
{
    (void)state;
    keyer_composite_params cp = keyer_composite_params_defaults();
    keyer_error err = {0};
    assert_int_equal(keyer_option_set(keyer_composite_options(), &cp, "mode", "premultiplied", &err),
                     KEYER_OK);
    assert_true(cp.mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED);
    keyer_device_kind kind = KEYER_DEVICE_CPU;
    int ordinal = -1;
    assert_int_equal(keyer_device_parse("cuda:2", &kind, &ordinal, &err), KEYER_OK);
    assert_true(kind == KEYER_DEVICE_CUDA);
    assert_int_equal(ordinal, 2);
    assert_int_equal(keyer_device_parse("cuda:64", &kind, &ordinal, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "unknown device 'cuda:64'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_find),   cmocka_unit_test(test_set_each_type),
        cmocka_unit_test(test_bad_values),          cmocka_unit_test(test_parse_list_is_atomic),
        cmocka_unit_test(test_validate_and_get),    cmocka_unit_test(test_help),
        cmocka_unit_test(test_effect_tables),      cmocka_unit_test(test_string_option),
        cmocka_unit_test(test_custom_setter),      cmocka_unit_test(test_optional_values),
        cmocka_unit_test(test_parsers),            cmocka_unit_test(test_enum_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
