/*
 * Command lines and configuration files of the keyer tool, driven by option tables
 * (keyer/options.h). Every subcommand describes its options in keyer_option tables over its
 * own argument struct, often followed by the library's tables (session, refinement,
 * compositing); this module turns argv into keyer_option_set() calls, prints the usage text
 * from the same tables and applies configuration-file settings with the command line's
 * meaning.
 *
 * Command lines: `--name VALUE`, `--name=VALUE`, `-x VALUE`, `-xVALUE`, grouped flags
 * (`-yv`), `--` (everything after it is positional) and positional arguments (anything not
 * starting with '-', and "-" itself). Names match with '-' and '_' alike (`--pix-fmt`,
 * `--pix_fmt`). An option whose value may be left out (KEYER_OPTION_FLAG_VALUE_OPTIONAL)
 * takes the next argument only when it looks like a value (see options.h); the others
 * always take it. `--help`/`-h` print the usage at once.
 *
 * Messages: "PROG: [FROM: ]--name: WHAT IS WRONG (see PROG --help)"; the library's
 * "option NAME: " is replaced by the option as the user writes it.
 */
#ifndef KEYER_TOOLS_ARGS_H
#define KEYER_TOOLS_ARGS_H

#include <stdio.h>

#include "keyer/options.h"

/* One option table and the struct its entries write. */
typedef struct kc_table {
    const keyer_option *options;
    void *obj;
} kc_table;

/* A command's options and help. */
typedef struct kc_args {
    const char *prog;        /* "keyer", "keyer analyze": starts every message */
    const kc_table *tables;  /* searched in order: the first table naming an option wins */
    int ntables;
    int help_tables;         /* --help lists the options of the first help_tables tables */
    const char *usage;       /* printed before the option list: synopsis and description */
    const char *footer;      /* printed after it; NULL: nothing */
    /* Each positional argument, in order: returns 0, or 2 after printing why (with
     * kc_usage_error). NULL: positional arguments are a usage error. */
    int (*positional)(const struct kc_args *a, const char *arg);
    void *opaque;            /* for positional: the command's argument struct */
} kc_args;

/* The entry every command's table holds for --help/-h (it only prints the usage). */
#define KC_OPTION_HELP                                                                             \
    {"help", "this help", 0, KEYER_OPTION_BOOL, 0, 0, 1, NULL, kc_option_only_on_command_line,    \
     NULL, NULL, 'h', KEYER_OPTION_FLAG_VALUE_OPTIONAL}

/* Setter of options that act on the command line only (--help): refuses everywhere else. */
keyer_status kc_option_only_on_command_line(const keyer_option *o, void *obj, const char *value,
                                            keyer_error *err);

/* The option called @p name ('-' and '_' alike), its table in *@p table; NULL if none. */
const keyer_option *kc_args_find(const kc_args *a, const char *name, const kc_table **table);

/*
 * Called by kc_args_walk for each option (@p o, its @p table, @p value or NULL when given
 * alone) and, with @p o NULL, each positional argument (@p value). Returns 0 to go on, 1 to
 * stop with success (help printed), 2 for a usage error (printed).
 */
typedef int (*kc_visit_fn)(void *opaque, const kc_args *a, const keyer_option *o,
                           const kc_table *table, const char *value);

/* Walks argv[1..argc-1], checking the syntax (unknown options, missing values) and calling
 * @p visit; --help prints the usage to stdout and returns 1. Returns 0, 1 or 2. */
int kc_args_walk(const kc_args *a, int argc, char **argv, kc_visit_fn visit, void *opaque);

/* kc_args_walk that applies every option (kc_args_apply, from "") and hands positional
 * arguments to a->positional. Returns 0, 1 (help printed) or 2 (usage error printed). */
int kc_args_parse(const kc_args *a, int argc, char **argv);

/* Sets option @p o of @p table to @p value (NULL: given alone). @p from names where the
 * value came from in messages ("command line", "FILE:LINE"; "" for none). Returns 0, or 2
 * after printing the error. */
int kc_args_apply(const kc_args *a, const keyer_option *o, const kc_table *table,
                  const char *value, const char *from);

/*
 * Applies a configuration-file setting: @p name as a long option, @p value as written.
 * Switches (BOOL options whose value may be left out) take the value as a boolean; other
 * options whose value may be left out take true (given alone) or false (nothing to do),
 * or a value. Returns 0, or 2 after printing the error (unknown option included).
 */
int kc_args_apply_setting(const kc_args *a, const char *name, const char *value,
                          const char *from);

/* Prints the usage: a->usage, one line per option of the help tables, a->footer. */
void kc_args_usage(const kc_args *a, FILE *f);

/* Prints "PROG: MESSAGE (see PROG --help)" to stderr and returns 2. */
int kc_usage_error(const kc_args *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Setter of a keyer_backend field at the entry's offset, by name (reference, cpu, cuda). */
keyer_status kc_set_backend(const keyer_option *o, void *obj, const char *value,
                            keyer_error *err);

/* A height and a width given together as "HxW" (each 1..65536). */
typedef struct kc_size {
    int height, width;
} kc_size;

/* Setter of a kc_size field at the entry's offset from "HxW" ("480x640"); INVALID_ARGUMENT
 * naming the option for anything else. */
keyer_status kc_set_size(const keyer_option *o, void *obj, const char *value, keyer_error *err);

/* The value of ENUM entry @p o's choice @p value (a name or a number the table accepted). */
int kc_choice_value(const keyer_option *o, const char *value);

/* The boolean of a switch's value: 1 when given alone (NULL), else the parsed text (which
 * the table has already checked). */
int kc_switch_value(const char *value);

#endif
