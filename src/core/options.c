/* Declarative option tables (keyer/options.h): defaults, parsing, validation, printing. */
#include "keyer/options.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A parsed value before it is stored: one of the field kinds. */
typedef struct option_value {
    int i;
    float f;
    uint32_t c;
    const char *s;
} option_value;

/* Whether the entry describes a field of its own (else a setter takes its values). */
static int has_field(const keyer_option *o)
{
    return !o->set && o->type != KEYER_OPTION_CUSTOM;
}

size_t keyer_options_count(const keyer_option *table)
{
    size_t n = 0;
    if (table)
        while (table[n].name)
            n++;
    return n;
}

const keyer_option *keyer_option_find(const keyer_option *table, const char *name)
{
    if (!table || !name)
        return NULL;
    for (const keyer_option *o = table; o->name; o++)
        if (!strcmp(o->name, name))
            return o;
    return NULL;
}

static const char *type_name(const keyer_option *o)
{
    switch (o->type) {
    case KEYER_OPTION_INT: return "int";
    case KEYER_OPTION_FLOAT: return "float";
    case KEYER_OPTION_BOOL: return "bool";
    case KEYER_OPTION_ENUM: return "enum";
    case KEYER_OPTION_COLOR: return "color";
    case KEYER_OPTION_STRING: return "string";
    case KEYER_OPTION_CUSTOM: return o->metavar ? o->metavar : "custom";
    }
    return "?";
}

static void store(const keyer_option *o, void *obj, const option_value *v)
{
    char *field = (char *)obj + o->offset;
    switch (o->type) {
    case KEYER_OPTION_INT:
    case KEYER_OPTION_BOOL:
    case KEYER_OPTION_ENUM: memcpy(field, &v->i, sizeof(int)); break;
    case KEYER_OPTION_FLOAT: memcpy(field, &v->f, sizeof(float)); break;
    case KEYER_OPTION_COLOR: memcpy(field, &v->c, sizeof(uint32_t)); break;
    case KEYER_OPTION_STRING: memcpy(field, &v->s, sizeof(const char *)); break;
    case KEYER_OPTION_CUSTOM: break;
    }
}

static option_value load(const keyer_option *o, const void *obj)
{
    option_value v = {0, 0.0f, 0, NULL};
    const char *field = (const char *)obj + o->offset;
    switch (o->type) {
    case KEYER_OPTION_INT:
    case KEYER_OPTION_BOOL:
    case KEYER_OPTION_ENUM: memcpy(&v.i, field, sizeof(int)); break;
    case KEYER_OPTION_FLOAT: memcpy(&v.f, field, sizeof(float)); break;
    case KEYER_OPTION_COLOR: memcpy(&v.c, field, sizeof(uint32_t)); break;
    case KEYER_OPTION_STRING: memcpy(&v.s, field, sizeof(const char *)); break;
    case KEYER_OPTION_CUSTOM: break;
    }
    return v;
}

/* The entry's default, converted for its own type only (a negative INT default has no
 * uint32_t value, so converting it for COLOR too would be undefined). */
static option_value default_of(const keyer_option *o)
{
    option_value v = {0, 0.0f, 0, NULL};
    switch (o->type) {
    case KEYER_OPTION_INT:
    case KEYER_OPTION_BOOL:
    case KEYER_OPTION_ENUM: v.i = (int)o->def; break;
    case KEYER_OPTION_FLOAT: v.f = (float)o->def; break;
    case KEYER_OPTION_COLOR: v.c = (uint32_t)o->def; break;
    case KEYER_OPTION_STRING:
    case KEYER_OPTION_CUSTOM: v.s = o->def_string; break;
    }
    return v;
}

keyer_status keyer_options_set_defaults(const keyer_option *table, void *obj, keyer_error *err)
{
    if (!table || !obj)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "options: %s is NULL", !table ? "table" : "object");
    for (const keyer_option *o = table; o->name; o++) {
        if (!has_field(o))
            continue;
        option_value v = default_of(o);
        store(o, obj, &v);
    }
    return KEYER_OK;
}

static const struct {
    const char *name;
    uint32_t rgb;
} color_names[] = {
    {"black", 0x000000}, {"white", 0xFFFFFF}, {"red", 0xFF0000},
    {"green", 0x00FF00}, {"blue", 0x0000FF}, {"gray", 0x808080},
};

static int parse_hex_color(const char *s, uint32_t *out)
{
    size_t n = strlen(s);
    if (n != 6)
        return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int d;
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            d = ch - 'A' + 10;
        else
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* The INT range of an entry: its double bounds rounded inwards and clamped to int. */
static int int_min(const keyer_option *o)
{
    double m = ceil(o->min);
    return m <= (double)INT_MIN ? INT_MIN : m >= (double)INT_MAX ? INT_MAX : (int)m;
}

static int int_max(const keyer_option *o)
{
    double m = floor(o->max);
    return m >= (double)INT_MAX ? INT_MAX : m <= (double)INT_MIN ? INT_MIN : (int)m;
}

static keyer_status parse_enum(const keyer_option *o, const char *value, option_value *v,
                               keyer_error *err)
{
    if (!o->choices)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "option %s: enum without choices",
                               o->name);
    for (const keyer_option_choice *c = o->choices; c->name; c++)
        if (!strcmp(c->name, value)) {
            v->i = c->value;
            return KEYER_OK;
        }
    int x;
    if (keyer_parse_int(NULL, value, INT_MIN, INT_MAX, &x, NULL) == KEYER_OK)
        for (const keyer_option_choice *c = o->choices; c->name; c++)
            if (c->value == x) {
                v->i = c->value;
                return KEYER_OK;
            }
    char names[256] = "";
    size_t used = 0;
    for (const keyer_option_choice *c = o->choices; c->name && used < sizeof(names); c++) {
        int n = snprintf(names + used, sizeof(names) - used, "%s%s",
                         c == o->choices ? "" : ", ", c->name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "option %s: '%s' is not one of: %s", o->name, value, names);
}

static keyer_status parse_color(const keyer_option *o, const char *value, option_value *v,
                                keyer_error *err)
{
    for (size_t i = 0; i < sizeof(color_names) / sizeof(color_names[0]); i++)
        if (!strcmp(color_names[i].name, value)) {
            v->c = color_names[i].rgb;
            return KEYER_OK;
        }
    const char *hex = value;
    if (hex[0] == '#')
        hex++;
    else if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X'))
        hex += 2;
    if (parse_hex_color(hex, &v->c))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: '%s' is not a colour (#rrggbb, 0xrrggbb or a name: "
                               "black, white, red, green, blue, gray)", o->name, value);
    return KEYER_OK;
}

/* Whether string @p s (NULL: unset) fits the entry's length bounds. */
static int string_fits(const keyer_option *o, const char *s)
{
    if (!s)
        return o->min <= 0;
    double len = (double)strlen(s);
    return len >= o->min && (o->max <= 0 || len <= o->max);
}

static keyer_status parse_string(const keyer_option *o, const char *value, option_value *v,
                                 keyer_error *err)
{
    if (!string_fits(o, value)) {
        if (o->max > 0)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "option %s: '%s' is %zu bytes long, not %.0f..%.0f", o->name,
                                   value, strlen(value), o->min, o->max);
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: '%s' is shorter than %.0f bytes", o->name, value,
                               o->min);
    }
    v->s = value;
    return KEYER_OK;
}

/* Parses @p value for @p o into @p v without storing. */
static keyer_status parse_value(const keyer_option *o, const char *value, option_value *v,
                                keyer_error *err)
{
    char what[96];
    snprintf(what, sizeof(what), "option %s", o->name);
    switch (o->type) {
    case KEYER_OPTION_INT:
        return keyer_parse_int(what, value, int_min(o), int_max(o), &v->i, err);
    case KEYER_OPTION_FLOAT: {
        double x;
        keyer_status st = keyer_parse_number(what, value, o->min, o->max, &x, err);
        if (st == KEYER_OK)
            v->f = (float)x;
        return st;
    }
    case KEYER_OPTION_BOOL: return keyer_parse_bool(what, value, &v->i, err);
    case KEYER_OPTION_ENUM: return parse_enum(o, value, v, err);
    case KEYER_OPTION_COLOR: return parse_color(o, value, v, err);
    case KEYER_OPTION_STRING: return parse_string(o, value, v, err);
    case KEYER_OPTION_CUSTOM: return KEYER_OK; /* the setter decides */
    }
    return keyer_error_set(err, KEYER_STATUS_INTERNAL, "option %s: unknown type %d", o->name,
                           (int)o->type);
}

/* Calls the entry's setter, making sure a failure comes with a message. */
static keyer_status call_setter(const keyer_option *o, void *obj, const char *value,
                                keyer_error *err)
{
    keyer_error mine = {0};
    keyer_status st = o->set(o, obj, value, &mine);
    if (st == KEYER_OK)
        return KEYER_OK;
    if (mine.status == KEYER_OK)
        return keyer_error_set(err, st, "option %s: '%s' was refused", o->name,
                               value ? value : "(no value)");
    if (err)
        *err = mine;
    return st;
}

/* keyer_option_set() for a known entry. */
static keyer_status set_entry(const keyer_option *o, void *obj, const char *value,
                              keyer_error *err)
{
    if (!value && !(o->flags & KEYER_OPTION_FLAG_VALUE_OPTIONAL))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "option %s: no value given",
                               o->name);
    if (o->set) {
        option_value scratch = {0, 0.0f, 0, NULL};
        keyer_status st = value ? parse_value(o, value, &scratch, err) : KEYER_OK;
        return st ? st : call_setter(o, obj, value, err);
    }
    if (o->type == KEYER_OPTION_CUSTOM)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "option %s: custom without a setter",
                               o->name);
    option_value v = load(o, obj);
    if (!value) {
        v = default_of(o);
        if (o->type == KEYER_OPTION_BOOL)
            v.i = 1;
    } else {
        keyer_status st = parse_value(o, value, &v, err);
        if (st)
            return st;
    }
    store(o, obj, &v);
    return KEYER_OK;
}

keyer_status keyer_option_set(const keyer_option *table, void *obj, const char *name,
                              const char *value, keyer_error *err)
{
    if (!table || !obj || !name)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "options: NULL %s",
                               !table ? "table" : !obj ? "object" : "name");
    const keyer_option *o = keyer_option_find(table, name);
    if (!o)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "unknown option '%s'", name);
    return set_entry(o, obj, value, err);
}

#define LIST_MAX 4096

/* Pass 0 of keyer_options_parse: checks one entry's value without storing it. */
static keyer_status check_entry(const keyer_option *o, const char *value, keyer_error *err)
{
    if (o->type == KEYER_OPTION_STRING && !o->set)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: a string cannot be set from a list (name=value,...)",
                               o->name);
    option_value scratch = {0, 0.0f, 0, NULL};
    return parse_value(o, value, &scratch, err);
}

keyer_status keyer_options_parse(const keyer_option *table, void *obj, const char *list,
                                 keyer_error *err)
{
    if (!table || !obj || !list)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "options: NULL %s",
                               !table ? "table" : !obj ? "object" : "list");
    size_t len = strlen(list);
    if (len >= LIST_MAX)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "options: list of %zu bytes is longer than %d", len, LIST_MAX - 1);
    char copy[LIST_MAX];
    memcpy(copy, list, len + 1);
    /* Two passes: check every entry, then store; so a bad entry changes nothing. */
    for (int pass = 0; pass < 2; pass++) {
        char *p = copy;
        while (*p) {
            char *end = p + strcspn(p, ",:");
            char saved = *end;
            *end = '\0';
            if (*p) {
                char *eq = strchr(p, '=');
                if (!eq) {
                    if (pass == 0)
                        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                               "options: '%s' is not name=value", p);
                } else {
                    *eq = '\0';
                    const keyer_option *o = keyer_option_find(table, p);
                    keyer_status st = KEYER_OK;
                    if (!o)
                        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                             "unknown option '%s'", p);
                    else if (pass == 0)
                        st = check_entry(o, eq + 1, err);
                    else
                        st = set_entry(o, obj, eq + 1, err);
                    *eq = '=';
                    if (st)
                        return st;
                }
            }
            *end = saved;
            p = saved ? end + 1 : end;
        }
    }
    return KEYER_OK;
}

/* Checks one described field; see keyer_options_validate(). */
static keyer_status validate_field(const keyer_option *o, const void *obj, const char *what,
                                   keyer_error *err)
{
    option_value v = load(o, obj);
    switch (o->type) {
    case KEYER_OPTION_INT:
        if ((double)v.i < o->min || (double)v.i > o->max)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s = %d is outside %g..%g", what, o->name, v.i, o->min,
                                   o->max);
        break;
    case KEYER_OPTION_FLOAT:
        if (!isfinite(v.f) || (double)v.f < o->min || (double)v.f > o->max)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s = %g is outside %g..%g", what, o->name, (double)v.f,
                                   o->min, o->max);
        break;
    case KEYER_OPTION_BOOL:
        if (v.i != 0 && v.i != 1)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s = %d is not a boolean (0 or 1)", what, o->name, v.i);
        break;
    case KEYER_OPTION_ENUM: {
        int ok = 0;
        for (const keyer_option_choice *c = o->choices; c && c->name; c++)
            ok |= c->value == v.i;
        if (!ok)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s = %d is not one of its choices", what, o->name, v.i);
        break;
    }
    case KEYER_OPTION_COLOR:
        if (v.c > 0xFFFFFFu)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s = 0x%08x is not 0xRRGGBB", what, o->name,
                                   (unsigned)v.c);
        break;
    case KEYER_OPTION_STRING:
        if (string_fits(o, v.s))
            break;
        if (!v.s)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s is unset (it needs at least %.0f bytes)", what,
                                   o->name, o->min);
        if (o->max > 0)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s: %s = '%s' is not %.0f..%.0f bytes long", what, o->name,
                                   v.s, o->min, o->max);
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: %s = '%s' is shorter than %.0f bytes", what, o->name, v.s,
                               o->min);
    case KEYER_OPTION_CUSTOM: break;
    }
    return KEYER_OK;
}

keyer_status keyer_options_validate(const keyer_option *table, const void *obj, const char *what,
                                    keyer_error *err)
{
    if (!what)
        what = "parameters";
    if (!table || !obj)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL %s", what,
                               !table ? "option table" : "object");
    for (const keyer_option *o = table; o->name; o++) {
        if (!has_field(o))
            continue;
        keyer_status st = validate_field(o, obj, what, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

static int format_value(const keyer_option *o, option_value v, char *buf, size_t size)
{
    switch (o->type) {
    case KEYER_OPTION_INT: return snprintf(buf, size, "%d", v.i);
    case KEYER_OPTION_FLOAT: return snprintf(buf, size, "%.9g", (double)v.f);
    case KEYER_OPTION_BOOL: return snprintf(buf, size, "%s", v.i ? "true" : "false");
    case KEYER_OPTION_ENUM:
        for (const keyer_option_choice *c = o->choices; c && c->name; c++)
            if (c->value == v.i)
                return snprintf(buf, size, "%s", c->name);
        return snprintf(buf, size, "%d", v.i);
    case KEYER_OPTION_COLOR: return snprintf(buf, size, "#%06x", (unsigned)v.c);
    case KEYER_OPTION_STRING:
    case KEYER_OPTION_CUSTOM: return snprintf(buf, size, "%s", v.s ? v.s : "");
    }
    return snprintf(buf, size, "?");
}

keyer_status keyer_option_get(const keyer_option *table, const void *obj, const char *name,
                              char *buf, size_t size, keyer_error *err)
{
    if (!table || !obj || !name || !buf || size == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "options: NULL or empty %s",
                               !table ? "table" : !obj ? "object" : !name ? "name" : "buffer");
    const keyer_option *o = keyer_option_find(table, name);
    if (!o)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "unknown option '%s'", name);
    if (!has_field(o))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "option %s is applied by a function: it has no field to read",
                               name);
    int n = format_value(o, load(o, obj), buf, size);
    if (n < 0 || (size_t)n >= size)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: a buffer of %zu bytes is too small", name, size);
    return KEYER_OK;
}

/* snprintf into buf at *used, tracking the total length wanted even when buf is full. */
static void append(char *buf, size_t size, size_t *used, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void append(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = buf && *used < size ? buf + *used : NULL;
    size_t room = dst ? size - *used : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n;
}

/* The default as help shows it: the typed value, a string, or "(none)". */
static void format_default(const keyer_option *o, char *buf, size_t size)
{
    if ((o->type == KEYER_OPTION_STRING || o->type == KEYER_OPTION_CUSTOM) && !o->def_string)
        snprintf(buf, size, "(none)");
    else
        format_value(o, default_of(o), buf, size);
}

size_t keyer_options_help(const keyer_option *table, char *buf, size_t size)
{
    size_t used = 0;
    if (buf && size)
        buf[0] = '\0';
    if (!table)
        return 0;
    for (const keyer_option *o = table; o->name; o++) {
        char def[64];
        format_default(o, def, sizeof(def));
        append(buf, size, &used, "  %-20s %-6s default %s", o->name, type_name(o), def);
        if (o->type == KEYER_OPTION_INT || o->type == KEYER_OPTION_FLOAT)
            append(buf, size, &used, ", range %g..%g", o->min, o->max);
        else if (o->type == KEYER_OPTION_STRING && o->max > 0)
            append(buf, size, &used, ", length %g..%g", o->min, o->max);
        else if (o->type == KEYER_OPTION_STRING && o->min > 0)
            append(buf, size, &used, ", length >= %g", o->min);
        append(buf, size, &used, "\n      %s\n", o->help ? o->help : "");
        if (o->type == KEYER_OPTION_ENUM)
            for (const keyer_option_choice *c = o->choices; c && c->name; c++)
                append(buf, size, &used, "        %-12s %s\n", c->name, c->help ? c->help : "");
    }
    if (buf && size && used >= size)
        buf[size - 1] = '\0';
    return used;
}
