/* Command lines and configuration files from option tables (see args.h). */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"

/* Longest option name on a command line (longer ones are unknown). */
#define OPTION_NAME_MAX 64

keyer_status kc_option_only_on_command_line(const keyer_option *o, void *obj, const char *value,
                                            keyer_error *err)
{
    (void)obj;
    (void)value;
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "option %s: only on the command line", o->name);
}

keyer_status kc_set_backend(const keyer_option *o, void *obj, const char *value,
                            keyer_error *err)
{
    keyer_backend backend;
    keyer_status st = keyer_backend_from_name(value, &backend, err);
    if (st == KEYER_OK)
        memcpy((char *)obj + o->offset, &backend, sizeof(backend));
    return st;
}

keyer_status kc_set_size(const keyer_option *o, void *obj, const char *value, keyer_error *err)
{
    char *end;
    errno = 0;
    long h = strtol(value, &end, 10);
    long w = (*end == 'x' || *end == 'X') ? strtol(end + 1, &end, 10) : -1;
    if (errno || *end || h < 1 || w < 1 || h > 65536 || w > 65536)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: '%s' is not HxW (two sizes 1..65536)", o->name, value);
    kc_size size = {(int)h, (int)w};
    memcpy((char *)obj + o->offset, &size, sizeof(size));
    return KEYER_OK;
}

int kc_choice_value(const keyer_option *o, const char *value)
{
    for (const keyer_option_choice *c = o->choices; c && c->name; c++)
        if (!strcmp(c->name, value))
            return c->value;
    int number = 0;
    keyer_parse_int(NULL, value, INT_MIN, INT_MAX, &number, NULL);
    return number;
}

int kc_switch_value(const char *value)
{
    int on = 1; /* given alone; a value was checked by the table, so it parses */
    if (value)
        keyer_parse_bool(NULL, value, &on, NULL);
    return on;
}

int kc_usage_error(const kc_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", a->prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see %s --help)\n", a->prog);
    va_end(ap);
    return 2;
}

/* Whether @p given names option @p name: '-' and '_' are alike. */
static int same_name(const char *given, const char *name)
{
    for (; *given && *name; given++, name++) {
        char g = *given == '-' ? '_' : *given, n = *name == '-' ? '_' : *name;
        if (g != n)
            return 0;
    }
    return !*given && !*name;
}

const keyer_option *kc_args_find(const kc_args *a, const char *name, const kc_table **table)
{
    for (int t = 0; t < a->ntables; t++)
        for (const keyer_option *o = a->tables[t].options; o->name; o++)
            if (same_name(name, o->name)) {
                *table = &a->tables[t];
                return o;
            }
    return NULL;
}

static const keyer_option *find_short(const kc_args *a, char c, const kc_table **table)
{
    for (int t = 0; t < a->ntables; t++)
        for (const keyer_option *o = a->tables[t].options; o->name; o++)
            if (o->short_name == c) {
                *table = &a->tables[t];
                return o;
            }
    return NULL;
}

static int value_optional(const keyer_option *o)
{
    return (o->flags & KEYER_OPTION_FLAG_VALUE_OPTIONAL) != 0;
}

static int is_help(const keyer_option *o)
{
    return !strcmp(o->name, "help");
}

/* Whether @p arg, the argument after option @p o whose value may be left out, is its value. */
static int looks_like_value(const keyer_option *o, const char *arg)
{
    double x;
    int number = keyer_parse_number(NULL, arg, -1e9, 1e9, &x, NULL) == KEYER_OK;
    switch (o->type) {
    case KEYER_OPTION_INT:
    case KEYER_OPTION_FLOAT: return number;
    case KEYER_OPTION_COLOR: return number || arg[0] == '#';
    case KEYER_OPTION_ENUM:
        for (const keyer_option_choice *c = o->choices; c && c->name; c++)
            if (!strcmp(c->name, arg))
                return 1;
        return 0;
    case KEYER_OPTION_BOOL:
    case KEYER_OPTION_STRING:
    case KEYER_OPTION_CUSTOM: return 0;
    }
    return 0;
}

/* A group of short options ("-o FILE", "-oFILE", "-yv"); *@p i may move past a value. */
static int walk_short(const kc_args *a, int argc, char **argv, int *i, kc_visit_fn visit,
                      void *opaque)
{
    for (const char *p = argv[*i] + 1; *p; p++) {
        const kc_table *table = NULL;
        const keyer_option *o = find_short(a, *p, &table);
        if (!o)
            return kc_usage_error(a, "unknown option '-%c'", *p);
        if (is_help(o)) {
            kc_args_usage(a, stdout);
            return 1;
        }
        if (!value_optional(o)) {
            const char *value = p[1] ? p + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
            if (!value)
                return kc_usage_error(a, "option -%c needs a value", *p);
            return visit(opaque, a, o, table, value);
        }
        int rc = visit(opaque, a, o, table, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* A long option ("--name", "--name=VALUE", "--name VALUE"); *@p i may move past a value. */
static int walk_long(const kc_args *a, int argc, char **argv, int *i, kc_visit_fn visit,
                     void *opaque)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg + 2, '=');
    size_t len = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
    char name[OPTION_NAME_MAX];
    if (len >= sizeof(name))
        return kc_usage_error(a, "unknown option '%s'", arg);
    memcpy(name, arg + 2, len);
    name[len] = '\0';
    const kc_table *table = NULL;
    const keyer_option *o = kc_args_find(a, name, &table);
    if (!o)
        return kc_usage_error(a, "unknown option '--%s'", name);
    if (is_help(o)) {
        kc_args_usage(a, stdout);
        return 1;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value && !value_optional(o)) {
        if (*i + 1 >= argc)
            return kc_usage_error(a, "option --%s needs a value", name);
        value = argv[++*i];
    } else if (!value && *i + 1 < argc && looks_like_value(o, argv[*i + 1])) {
        value = argv[++*i];
    }
    return visit(opaque, a, o, table, value);
}

int kc_args_walk(const kc_args *a, int argc, char **argv, kc_visit_fn visit, void *opaque)
{
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (!only_positional && !strcmp(arg, "--")) {
            only_positional = 1;
            continue;
        }
        if (only_positional || arg[0] != '-' || !strcmp(arg, "-"))
            rc = visit(opaque, a, NULL, NULL, arg);
        else if (arg[1] != '-')
            rc = walk_short(a, argc, argv, &i, visit, opaque);
        else
            rc = walk_long(a, argc, argv, &i, visit, opaque);
        if (rc)
            return rc;
    }
    return 0;
}

/* The option as the user writes it: "--pix-fmt" for pix_fmt. */
static void dashed(const char *name, char *out, size_t size)
{
    size_t i = 0;
    out[i++] = '-';
    out[i++] = '-';
    for (; *name && i + 1 < size; name++)
        out[i++] = *name == '_' ? '-' : *name;
    out[i] = '\0';
}

int kc_args_apply(const kc_args *a, const keyer_option *o, const kc_table *table,
                  const char *value, const char *from)
{
    keyer_error e = {0};
    if (keyer_option_set(table->options, table->obj, o->name, value, &e) == KEYER_OK)
        return 0;
    /* "option NAME: what" becomes "--name: what" */
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "option %s: ", o->name);
    const char *what = e.message;
    if (!strncmp(what, prefix, strlen(prefix)))
        what += strlen(prefix);
    char shown[OPTION_NAME_MAX + 4];
    dashed(o->name, shown, sizeof(shown));
    return kc_usage_error(a, "%s%s%s: %s", from, from[0] ? ": " : "", shown, what);
}

static int visit_apply(void *opaque, const kc_args *a, const keyer_option *o,
                       const kc_table *table, const char *value)
{
    (void)opaque;
    if (o)
        return kc_args_apply(a, o, table, value, "");
    if (!a->positional)
        return kc_usage_error(a, "unexpected argument '%s'", value);
    return a->positional(a, value);
}

int kc_args_parse(const kc_args *a, int argc, char **argv)
{
    return kc_args_walk(a, argc, argv, visit_apply, NULL);
}

int kc_args_apply_setting(const kc_args *a, const char *name, const char *value,
                          const char *from)
{
    const kc_table *table = NULL;
    const keyer_option *o = kc_args_find(a, name, &table);
    if (!o)
        return kc_usage_error(a, "%s: unknown option '%s'", from, name);
    int on;
    if (value_optional(o) && o->type != KEYER_OPTION_BOOL &&
        keyer_parse_bool(NULL, value, &on, NULL) == KEYER_OK) {
        /* "blur: true" is --blur alone; "blur: false" leaves it out */
        if (!on)
            return 0;
        value = NULL;
    }
    return kc_args_apply(a, o, table, value, from);
}

/* What a usage line shows for the option's value ("PATH", "[SIGMA]"; "" for switches). */
static void value_text(const keyer_option *o, char *buf, size_t size)
{
    if (o->type == KEYER_OPTION_BOOL && value_optional(o)) {
        buf[0] = '\0';
        return;
    }
    char meta[128];
    if (o->metavar) {
        snprintf(meta, sizeof(meta), "%s", o->metavar);
    } else if (o->type == KEYER_OPTION_ENUM) {
        size_t used = 0;
        meta[0] = '\0';
        for (const keyer_option_choice *c = o->choices; c && c->name && used < sizeof(meta); c++) {
            int n = snprintf(meta + used, sizeof(meta) - used, "%s%s", c == o->choices ? "" : "|",
                             c->name);
            if (n < 0)
                break;
            used += (size_t)n;
        }
    } else {
        snprintf(meta, sizeof(meta), "%s", o->type == KEYER_OPTION_INT     ? "N"
                                           : o->type == KEYER_OPTION_FLOAT ? "X"
                                           : o->type == KEYER_OPTION_COLOR ? "COLOR"
                                           : o->type == KEYER_OPTION_BOOL  ? "BOOL"
                                                                           : "TEXT");
    }
    snprintf(buf, size, value_optional(o) ? " [%s]" : " %s", meta);
}

/* The left column of an option's usage line: "-o, --output PATH" or "    --blur [SIGMA]". */
static void left_text(const keyer_option *o, char *buf, size_t size)
{
    char name[OPTION_NAME_MAX + 4], value[160];
    dashed(o->name, name, sizeof(name));
    value_text(o, value, sizeof(value));
    if (o->short_name)
        snprintf(buf, size, "-%c, %s%s", o->short_name, name, value);
    else
        snprintf(buf, size, "    %s%s", name, value);
}

/* Prints @p text from column @p indent on, wrapped at 100 columns at spaces. */
static void print_wrapped(FILE *f, const char *text, int indent)
{
    enum { WIDTH = 100 };
    int room = WIDTH - indent > 20 ? WIDTH - indent : 20;
    while ((int)strlen(text) > room) {
        int cut = room;
        while (cut > 0 && text[cut] != ' ')
            cut--;
        if (cut == 0)
            break; /* one long word: print it whole */
        fprintf(f, "%.*s\n%*s", cut, text, indent, "");
        text += cut + 1;
    }
    fprintf(f, "%s\n", text);
}

void kc_args_usage(const kc_args *a, FILE *f)
{
    enum { MAX_COLUMN = 30 };
    char left[256];
    int column = 0;
    for (int t = 0; t < a->help_tables && t < a->ntables; t++)
        for (const keyer_option *o = a->tables[t].options; o->name; o++) {
            left_text(o, left, sizeof(left));
            int n = (int)strlen(left);
            if (n + 1 > column && n <= MAX_COLUMN)
                column = n + 1 < MAX_COLUMN ? n + 1 : MAX_COLUMN; /* two spaces apart */
        }
    fputs(a->usage, f);
    for (int t = 0; t < a->help_tables && t < a->ntables; t++)
        for (const keyer_option *o = a->tables[t].options; o->name; o++) {
            left_text(o, left, sizeof(left));
            if ((int)strlen(left) > column)
                fprintf(f, "  %s\n  %-*s ", left, column, "");
            else
                fprintf(f, "  %-*s ", column, left);
            print_wrapped(f, o->help ? o->help : "", 2 + column + 1);
        }
    if (a->footer)
        fputs(a->footer, f);
}
