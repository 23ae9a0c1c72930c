/**
 * @file keyer/options.h
 * @brief Declarative option tables: one description of a parameter struct from which
 *        parsing ("name=value"), validation, printing, `--help` and command lines are all
 *        derived; and the number, boolean parsers they use, for programs parsing their own
 *        arguments.
 *
 * Each effect or stage describes the fields of its parameter struct in a table of
 * ::keyer_option entries (name, help, byte offset of the field, type, default, minimum,
 * maximum), terminated by an entry whose name is NULL. The command line and the
 * configuration file set fields by name through these tables; the effect's create
 * function validates the struct against the same table.
 *
 * @code
 * keyer_refine_params p = keyer_refine_params_defaults();
 * keyer_error err = {0};
 * if (keyer_options_parse(keyer_refine_options(), &p, "feather=3,threshold_low=0.2", &err))
 *     fprintf(stderr, "keyer: %s\n", err.message);
 * char help[4096];
 * keyer_options_help(keyer_refine_options(), help, sizeof(help));
 * @endcode
 *
 * Field types: KEYER_OPTION_INT, _BOOL and _ENUM describe `int` fields (an enum-typed field
 * must be int-sized: see KEYER_OPTION_ENUM_CHECK), _FLOAT a `float` field, _COLOR a
 * `uint32_t` field holding 0xRRGGBB, _STRING a `const char *` field. _CUSTOM describes no
 * field: its keyer_option::set function takes the text.
 *
 * Values accepted by the parser (all whitespace-free):
 *  - INT: a decimal integer ("-3"), within [min, max];
 *  - FLOAT: a decimal or exponent number ("0.25", "1e-3"), finite, within [min, max];
 *  - BOOL: 1/0, true/false, yes/no, on/off;
 *  - ENUM: one of the choice names, or the integer value of a choice;
 *  - COLOR: "#rrggbb", "0xrrggbb", "rrggbb" (hex) or one of the names black, white, red,
 *    green, blue, gray;
 *  - STRING: any text whose length in bytes is at least min and, when max > 0, at most max.
 *    The field receives the pointer it is given, not a copy: whoever sets it keeps the text
 *    alive while the struct is in use (as for every string of a keyer parameter struct);
 *    a default is a string literal (keyer_option::def_string, NULL allowed);
 *  - CUSTOM: any text; keyer_option::set decides.
 *
 * Options that set several fields or need their own checks (such as a command line's
 * `--blur 16`, which selects the blur effect and sets its radius) carry a setter,
 * keyer_option::set: for a typed entry the value is first checked against the type, range
 * or choices, then handed to set() instead of being stored at keyer_option::offset; a
 * CUSTOM entry hands the text over unchecked. An entry with a setter has no field of its
 * own: keyer_options_set_defaults(), keyer_options_validate() and keyer_option_get() skip
 * or refuse it.
 *
 * A program's own table, with a string and a setter (KEYER_OPTION_FIELD writes a plain entry):
 *
 * @code
 * typedef struct args { const char *output; keyer_composite_params cp; } args;
 * static keyer_status set_blur(const keyer_option *o, void *obj, const char *value,
 *                              keyer_error *err)
 * {
 *     args *a = obj;      // value: checked as a FLOAT in 2..256 already, or NULL ("--blur")
 *     if (value && keyer_option_set(keyer_composite_options(), &a->cp, "blur_radius", value,
 *                                   err))
 *         return KEYER_STATUS_INVALID_ARGUMENT;
 *     a->cp.mode = KEYER_COMPOSITE_BLUR;
 *     return KEYER_OK;
 * }
 * static const keyer_option table[] = {
 *     {"output", "output file", offsetof(args, output), KEYER_OPTION_STRING, 0, 1, 0, NULL,
 *      NULL, NULL, "PATH", 'o', 0u},
 *     {"blur", "blur the background", 0, KEYER_OPTION_FLOAT, 12, 2, 256, NULL, set_blur, NULL,
 *      "SIGMA", 0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
 *     KEYER_OPTION_END,
 * };
 * @endcode
 *
 * Errors about a value name the option and the value, in the form "option NAME: <what is
 * wrong>" (the setters in keyer follow it too), so a program may replace the "option NAME"
 * part with how its user wrote the option ("--blur"). Other errors: "unknown option 'NAME'",
 * "options: ..." (a malformed list).
 *
 * Thread safety: tables are immutable; the functions touch only the object passed in.
 */
#ifndef KEYER_OPTIONS_H
#define KEYER_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Type of the field an option describes. */
typedef enum keyer_option_type {
    KEYER_OPTION_INT = 0, /**< int */
    KEYER_OPTION_FLOAT,   /**< float */
    KEYER_OPTION_BOOL,    /**< int holding 0 or 1 */
    KEYER_OPTION_ENUM,    /**< int (or an int-sized enum) holding one of the choices' values */
    KEYER_OPTION_COLOR,   /**< uint32_t holding 0xRRGGBB */
    KEYER_OPTION_STRING,  /**< const char *, the caller's text (not copied) */
    KEYER_OPTION_CUSTOM,  /**< no field: keyer_option::set parses and stores the text */
} keyer_option_type;

/**
 * Compile-time check that the enum type @p type can back a KEYER_OPTION_ENUM field: the
 * tables read and write such fields as `int`. Used after every enum that a public
 * parameter struct holds (a program built with -fshort-enums fails here instead of
 * disagreeing with the library about the struct's layout).
 */
#ifdef __cplusplus
#define KEYER_OPTION_ENUM_CHECK(type)                                                              \
    static_assert(sizeof(type) == sizeof(int), #type " must be int-sized (option tables)")
#else
#define KEYER_OPTION_ENUM_CHECK(type)                                                              \
    _Static_assert(sizeof(type) == sizeof(int), #type " must be int-sized (option tables)")
#endif

/** One named value of an ENUM option. Arrays of choices end with a NULL name. */
typedef struct keyer_option_choice {
    const char *name; /**< what the user types */
    int value;        /**< what is stored in the field */
    const char *help; /**< one line; may be NULL */
} keyer_option_choice;

/**
 * keyer_option::flags: the value may be left out. keyer_option_set() with a NULL value then
 * stores 1 (BOOL), the default (other types) or calls set() with NULL. On a command line
 * (see tools/keyer) such an option is given alone ("--alpha", "--blur") and takes the next
 * argument as its value only when it looks like one: a number for INT and FLOAT, a number
 * or a '#' colour for COLOR, a choice name for ENUM, never for BOOL, STRING and CUSTOM
 * ("--alpha=false", "--blur=16" always work).
 */
#define KEYER_OPTION_FLAG_VALUE_OPTIONAL 1u

struct keyer_option;

/**
 * Setter of an option (keyer_option::set): applies @p value (the text as given; NULL when
 * the option's value was left out, see KEYER_OPTION_FLAG_VALUE_OPTIONAL) to @p obj, the
 * struct the table describes. Called only with a value that passed the entry's type check
 * (CUSTOM: unchecked). On failure it leaves @p obj unchanged and fills @p err with a message
 * "option NAME: ..." naming the value. @p value belongs to the caller and may not outlive
 * the call (keyer_options_parse() passes a temporary copy); keep a copy if needed.
 */
typedef keyer_status (*keyer_option_set_fn)(const struct keyer_option *option, void *obj,
                                            const char *value, keyer_error *err);

/**
 * One field (or one setter) of a parameter struct. Tables end with an entry whose name is
 * NULL. Fields after @ref choices were added later: tables written before them leave them
 * zero, which keeps their meaning (no setter, no flags, ...).
 */
typedef struct keyer_option {
    const char *name;   /**< lower_case_with_underscores; unique within a table */
    const char *help;   /**< one line, shown by keyer_options_help() */
    size_t offset;      /**< offsetof(struct, field); with a setter, the library ignores it
                         *   (a setter may use it: the field it writes) */
    keyer_option_type type;
    double def;         /**< default value (COLOR: the 0xRRGGBB number; ENUM: a choice value) */
    double min;         /**< smallest valid value (INT, FLOAT), shortest length (STRING) */
    double max;         /**< largest valid value (INT, FLOAT), longest length (STRING; 0: any) */
    const keyer_option_choice *choices; /**< ENUM only: the valid values, NULL-name terminated */
    keyer_option_set_fn set;  /**< NULL: the value goes to the field at @ref offset */
    const char *def_string;   /**< STRING: the default (a literal, or NULL); CUSTOM: the default
                               *   help shows (NULL: none) */
    const char *metavar;      /**< how a usage line shows the value ("PATH"); NULL: from the type */
    char short_name;          /**< one-letter alias on command lines ('o' for -o); 0: none */
    unsigned flags;           /**< KEYER_OPTION_FLAG_* */
} keyer_option;

/**
 * A table entry for a plain field: the first eight members, with no setter, default string,
 * metavar, short name or flags. Tables written with it keep compiling as members are added.
 */
#define KEYER_OPTION_FIELD(name, help, offset, type, def, min, max, choices)                       \
    {(name), (help), (offset), (type), (def), (min), (max), (choices), NULL, NULL, NULL, 0, 0u}

/** The entry that ends a table. */
#define KEYER_OPTION_END {NULL, NULL, 0, KEYER_OPTION_INT, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0u}

/** Number of entries in @p table before its terminator (0 for NULL). */
size_t keyer_options_count(const keyer_option *table);

/** The entry called @p name, or NULL (also for NULL arguments). */
const keyer_option *keyer_option_find(const keyer_option *table, const char *name);

/**
 * Stores every option's default into @p obj (STRING: the def_string pointer). Fields not
 * described by the table, and entries with a setter, are left alone.
 * Errors: INVALID_ARGUMENT for NULL arguments.
 */
keyer_status keyer_options_set_defaults(const keyer_option *table, void *obj, keyer_error *err);

/**
 * Parses @p value for the option @p name and stores it into @p obj (through the entry's
 * setter when it has one). A STRING field receives @p value itself. @p value may be NULL
 * only for an option with KEYER_OPTION_FLAG_VALUE_OPTIONAL (see there).
 * On any error @p obj is unchanged.
 * Errors: INVALID_ARGUMENT naming the option and the bad value (unknown option, malformed
 * number, value outside [min, max], unknown choice or colour name, a string of the wrong
 * length, a missing value, NULL argument), and whatever the setter returns.
 */
keyer_status keyer_option_set(const keyer_option *table, void *obj, const char *name,
                              const char *value, keyer_error *err);

/**
 * Parses a list "name=value,name=value" (',' or ':' separate entries; empty entries are
 * skipped) and sets each option in turn. Every entry is checked before any is stored, so on
 * error @p obj is unchanged, except that a setter (checked only against its type before)
 * may still refuse its value after earlier entries were stored. Errors: as
 * keyer_option_set(), plus an entry without '=', a STRING option (its field would point into
 * a temporary copy of @p list: set it with keyer_option_set()) and a list longer than 4095
 * bytes.
 */
keyer_status keyer_options_parse(const keyer_option *table, void *obj, const char *list,
                                 keyer_error *err);

/**
 * Checks every described field of @p obj: numbers finite and within [min, max], booleans
 * 0/1, enums one of their choices, colours within 0xFFFFFF, strings of a length within
 * their bounds (NULL counts as unset: valid when min is 0). Entries with a setter are
 * skipped. @p what names the struct in the message ("refine parameters").
 * Errors: INVALID_ARGUMENT naming the field and value.
 */
keyer_status keyer_options_validate(const keyer_option *table, const void *obj, const char *what,
                                    keyer_error *err);

/**
 * Formats the current value of option @p name in @p obj into @p buf (size @p size, always
 * NUL-terminated when size > 0) in a form keyer_option_set() accepts (a NULL string gives
 * ""). Errors: INVALID_ARGUMENT (unknown name, NULL, buffer too small), UNSUPPORTED (an
 * entry with a setter: it has no field to read).
 */
keyer_status keyer_option_get(const keyer_option *table, const void *obj, const char *name,
                              char *buf, size_t size, keyer_error *err);

/**
 * Writes a help text, one block per option ("name  type  default D, range min..max" then
 * the help line and the choices), into @p buf like snprintf: at most @p size bytes
 * including the NUL, and returns the length the whole text needs (excluding the NUL), so a
 * caller can size a buffer with keyer_options_help(t, NULL, 0) + 1. The type column shows
 * the metavar of a CUSTOM entry ("custom" without one).
 */
size_t keyer_options_help(const keyer_option *table, char *buf, size_t size);

/* ---- the parsers the tables use, for programs reading their own arguments ---------------- */

/**
 * Parses @p text, all of it, as a decimal integer within [@p min, @p max] into *@p out
 * (unchanged on error). @p what names the value in the message ("option batch",
 * "--iterations"). Errors: INVALID_ARGUMENT "WHAT: 'TEXT' is not an integer" (with the range
 * when it is open on one side: "... is not an integer >= 1"), "WHAT: N is outside MIN..MAX";
 * NULL @p text or @p out.
 */
keyer_status keyer_parse_int(const char *what, const char *text, int min, int max, int *out,
                             keyer_error *err);

/**
 * Parses @p text, all of it, as a finite decimal or exponent number within [@p min, @p max]
 * (either may be infinite) into *@p out (unchanged on error). Errors: INVALID_ARGUMENT
 * "WHAT: 'TEXT' is not a finite number", "WHAT: X is outside MIN..MAX" (or "is less than
 * MIN" / "is more than MAX" when the range is open on one side); NULL arguments.
 */
keyer_status keyer_parse_number(const char *what, const char *text, double min, double max,
                                double *out, keyer_error *err);

/**
 * Parses 1/0, true/false, yes/no or on/off into *@p out (1 or 0; unchanged on error).
 * Errors: INVALID_ARGUMENT "WHAT: 'TEXT' is not a boolean (...)"; NULL arguments.
 */
keyer_status keyer_parse_bool(const char *what, const char *text, int *out, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_OPTIONS_H */
