/*
 * GObject properties generated from keyer's option tables (keyer/options.h): one property per
 * table entry, so an element documents and sets every field the command line and the
 * configuration file know, with the same names ('_' written '-'), help, defaults, ranges and
 * choices. Used by the keyer element (keyer_filter.c) for the session's, refinement's and
 * compositing's tables.
 *
 * Types: INT -> gint, FLOAT -> gfloat, BOOL -> gboolean, ENUM -> a GEnum registered from the
 * entry's choices (type name "Keyer" + the given type prefix + the option's name in
 * CamelCase), COLOR -> guint 0xRRGGBB, STRING -> gchararray. Entries with a setter (no field)
 * and CUSTOM entries are not turned into properties.
 *
 * Values are stored by keyer_option_set() from their text form, so the library validates them
 * exactly as it validates a command line; GLib has already checked ranges and choices.
 */
#ifndef KEYER_GST_OPTION_PROPS_H
#define KEYER_GST_OPTION_PROPS_H

#include <glib-object.h>

#include "keyer/options.h"

G_BEGIN_DECLS

/** One table to turn into properties. */
typedef struct kg_prop_table {
    const keyer_option *table; /**< the library's table */
    int target;                /**< which struct of the element the table describes (passed
                                    back to kg_prop_target_fn) */
    const char *type_prefix;   /**< CamelCase prefix of its enum type names ("Refine") */
    const char *const *skip;   /**< NULL-terminated option names not to expose; may be NULL */
    const char *const *rename; /**< NULL-terminated pairs {option name, property name}; may be
                                    NULL (a property name is written with '-') */
} kg_prop_table;

/** One generated property. */
typedef struct kg_prop {
    const keyer_option *table;  /**< its table */
    const keyer_option *option; /**< its entry */
    int target;                 /**< kg_prop_table::target */
    guint id;                   /**< GObject property id */
} kg_prop;

/** The properties of one class, made by kg_props_install(); lives as long as the class. */
typedef struct kg_props {
    kg_prop *props;
    guint count;
} kg_props;

/**
 * Installs one property per exposed entry of @p tables (in order; a name already installed by
 * an earlier table, or by the class itself, is skipped) on @p klass with ids @p first_id,
 * @p first_id + 1, ...; flags G_PARAM_READWRITE | @p extra_flags. Fills @p out (its array is
 * allocated once and kept with the class). Returns the next free property id.
 */
guint kg_props_install(GObjectClass *klass, guint first_id, const kg_prop_table *tables,
                       int ntables, GParamFlags extra_flags, kg_props *out);

/** The generated property with id @p id, or NULL when @p id is not one of them. */
const kg_prop *kg_props_find(const kg_props *props, guint id);

/**
 * Stores @p value into the field of @p obj (the struct the property's table describes)
 * through keyer_option_set(). STRING values are copied into *@p owned (freed and replaced;
 * the field points at that copy; the caller frees *owned with g_free when @p obj goes away).
 * Returns FALSE with @p err filled when the library refuses the value.
 */
gboolean kg_prop_set(const kg_prop *p, void *obj, const GValue *value, char **owned,
                     keyer_error *err);

/** Reads the property's field of @p obj into @p value (initialised to the property's type). */
void kg_prop_get(const kg_prop *p, const void *obj, GValue *value);

G_END_DECLS
#endif
