/**
 * @file keyer/options.h
 * @brief Declarative option tables: one description of a parameter struct from which
 *        parsing ("name=value"), validation, printing and `--help` are all derived.
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
 * Field types: KEYER_OPTION_INT, _BOOL and _ENUM describe `int` fields, _FLOAT a `float`
 * field, _COLOR a `uint32_t` field holding 0xRRGGBB.
 *
 * Values accepted by the parser (all whitespace-free):
 *  - INT: a decimal integer ("-3"), within [min, max];
 *  - FLOAT: a decimal or exponent number ("0.25", "1e-3"), finite, within [min, max];
 *  - BOOL: 1/0, true/false, yes/no, on/off;
 *  - ENUM: one of the choice names, or the integer value of a choice;
 *  - COLOR: "#rrggbb", "0xrrggbb", "rrggbb" (hex) or one of the names black, white, red,
 *    green, blue, gray.
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
    KEYER_OPTION_ENUM,    /**< int holding one of keyer_option::choices' values */
    KEYER_OPTION_COLOR,   /**< uint32_t holding 0xRRGGBB */
} keyer_option_type;

/** One named value of an ENUM option. Arrays of choices end with a NULL name. */
typedef struct keyer_option_choice {
    const char *name; /**< what the user types */
    int value;        /**< what is stored in the field */
    const char *help; /**< one line; may be NULL */
} keyer_option_choice;

/** One field of a parameter struct. Tables end with an entry whose name is NULL. */
typedef struct keyer_option {
    const char *name;   /**< lower_case_with_underscores; unique within a table */
    const char *help;   /**< one line, shown by keyer_options_help() */
    size_t offset;      /**< offsetof(struct, field) */
    keyer_option_type type;
    double def;         /**< default value (COLOR: the 0xRRGGBB number; ENUM: a choice value) */
    double min;         /**< smallest valid value (INT, FLOAT; ignored otherwise) */
    double max;         /**< largest valid value (INT, FLOAT; ignored otherwise) */
    const keyer_option_choice *choices; /**< ENUM only: the valid values, NULL-name terminated */
} keyer_option;

/** Number of entries in @p table before its terminator (0 for NULL). */
size_t keyer_options_count(const keyer_option *table);

/** The entry called @p name, or NULL (also for NULL arguments). */
const keyer_option *keyer_option_find(const keyer_option *table, const char *name);

/**
 * Stores every option's default into @p obj. Fields not described by the table are left
 * alone. Errors: INVALID_ARGUMENT for NULL arguments.
 */
keyer_status keyer_options_set_defaults(const keyer_option *table, void *obj, keyer_error *err);

/**
 * Parses @p value for the option @p name and stores it into @p obj.
 * On any error @p obj is unchanged.
 * Errors: INVALID_ARGUMENT naming the option and the bad value (unknown option, malformed
 * number, value outside [min, max], unknown choice or colour name, NULL argument).
 */
keyer_status keyer_option_set(const keyer_option *table, void *obj, const char *name,
                              const char *value, keyer_error *err);

/**
 * Parses a list "name=value,name=value" (',' or ':' separate entries; empty entries are
 * skipped) and sets each option in turn. Every entry is checked before any is stored, so on
 * error @p obj is unchanged. Errors: as keyer_option_set(), plus an entry without '=' and
 * a list longer than 4095 bytes.
 */
keyer_status keyer_options_parse(const keyer_option *table, void *obj, const char *list,
                                 keyer_error *err);

/**
 * Checks every described field of @p obj: numbers finite and within [min, max], booleans
 * 0/1, enums one of their choices, colours within 0xFFFFFF. @p what names the struct in
 * the message ("refine parameters"). Errors: INVALID_ARGUMENT naming the field and value.
 */
keyer_status keyer_options_validate(const keyer_option *table, const void *obj, const char *what,
                                    keyer_error *err);

/**
 * Formats the current value of option @p name in @p obj into @p buf (size @p size, always
 * NUL-terminated when size > 0) in a form keyer_option_set() accepts.
 * Errors: INVALID_ARGUMENT (unknown name, NULL, buffer too small).
 */
keyer_status keyer_option_get(const keyer_option *table, const void *obj, const char *name,
                              char *buf, size_t size, keyer_error *err);

/**
 * Writes a help text, one block per option ("name  type  (default D, min..max)" then the
 * help line and the choices), into @p buf like snprintf: at most @p size bytes including
 * the NUL, and returns the length the whole text needs (excluding the NUL), so a caller can
 * size a buffer with keyer_options_help(t, NULL, 0) + 1.
 */
size_t keyer_options_help(const keyer_option *table, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_OPTIONS_H */
