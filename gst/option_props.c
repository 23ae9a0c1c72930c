/* GObject properties generated from keyer's option tables (see option_props.h). */
#include "option_props.h"

#include <stdio.h>
#include <string.h>

static gboolean in_list(const char *const *list, const char *name)
{
    for (; list && *list; list++)
        if (!strcmp(*list, name))
            return TRUE;
    return FALSE;
}

/* The property name of option @p name: the renamed one, else @p name with '-' for '_'. */
static gchar *prop_name(const kg_prop_table *t, const char *name)
{
    for (const char *const *r = t->rename; r && r[0]; r += 2)
        if (!strcmp(r[0], name))
            return g_strdup(r[1]);
    gchar *s = g_strdup(name);
    g_strdelimit(s, "_", '-');
    return s;
}

/* "blur_radius" -> "BlurRadius" */
static gchar *camel(const char *name)
{
    GString *s = g_string_new(NULL);
    gboolean up = TRUE;
    for (const char *c = name; *c; c++) {
        if (*c == '_' || *c == '-') {
            up = TRUE;
            continue;
        }
        g_string_append_c(s, up ? g_ascii_toupper(*c) : *c);
        up = FALSE;
    }
    return g_string_free(s, FALSE);
}

/* The GEnum type of an ENUM entry, registered once from its choices (kept for the program's
 * life, as every registered type is). */
static GType enum_type(const kg_prop_table *t, const keyer_option *o)
{
    gchar *cname = camel(o->name);
    gchar *tname = g_strdup_printf("Keyer%s%s", t->type_prefix, cname);
    g_free(cname);
    GType type = g_type_from_name(tname);
    if (type) {
        g_free(tname);
        return type;
    }
    int n = 0;
    while (o->choices[n].name)
        n++;
    GEnumValue *values = g_new0(GEnumValue, n + 1);
    for (int i = 0; i < n; i++) {
        values[i].value = o->choices[i].value;
        values[i].value_name = g_strdup(o->choices[i].help ? o->choices[i].help
                                                            : o->choices[i].name);
        values[i].value_nick = g_strdup(o->choices[i].name);
    }
    type = g_enum_register_static(tname, values); /* the name is copied; values are kept */
    g_free(tname);
    return type;
}

static GParamSpec *make_spec(const kg_prop_table *t, const keyer_option *o, const gchar *name,
                             GParamFlags flags)
{
    const char *help = o->help ? o->help : o->name;
    switch (o->type) {
    case KEYER_OPTION_INT:
        return g_param_spec_int(name, o->name, help, (gint)o->min, (gint)o->max, (gint)o->def,
                                flags);
    case KEYER_OPTION_FLOAT:
        return g_param_spec_float(name, o->name, help, (gfloat)o->min, (gfloat)o->max,
                                  (gfloat)o->def, flags);
    case KEYER_OPTION_BOOL:
        return g_param_spec_boolean(name, o->name, help, o->def != 0, flags);
    case KEYER_OPTION_ENUM:
        return g_param_spec_enum(name, o->name, help, enum_type(t, o), (gint)o->def, flags);
    case KEYER_OPTION_COLOR: {
        gchar *blurb = g_strdup_printf("%s (0xRRGGBB)", help);
        GParamSpec *s = g_param_spec_uint(name, o->name, blurb, 0, 0xFFFFFF, (guint)o->def,
                                          flags);
        g_free(blurb);
        return s;
    }
    case KEYER_OPTION_STRING:
        return g_param_spec_string(name, o->name, help, o->def_string, flags);
    case KEYER_OPTION_CUSTOM:
        break;
    }
    return NULL;
}

guint kg_props_install(GObjectClass *klass, guint first_id, const kg_prop_table *tables,
                       int ntables, GParamFlags extra_flags, kg_props *out)
{
    guint total = 0;
    for (int i = 0; i < ntables; i++)
        total += (guint)keyer_options_count(tables[i].table);
    out->props = g_new0(kg_prop, total ? total : 1);
    out->count = 0;
    guint id = first_id;
    for (int i = 0; i < ntables; i++) {
        const kg_prop_table *t = &tables[i];
        for (const keyer_option *o = t->table; o->name; o++) {
            if (o->set || o->type == KEYER_OPTION_CUSTOM || in_list(t->skip, o->name))
                continue;
            gchar *name = prop_name(t, o->name);
            if (g_object_class_find_property(klass, name)) {
                g_free(name);
                continue;
            }
            GParamSpec *spec = make_spec(t, o, name, G_PARAM_READWRITE | extra_flags);
            g_free(name);
            if (!spec)
                continue;
            g_object_class_install_property(klass, id, spec);
            out->props[out->count++] = (kg_prop){t->table, o, t->target, id};
            id++;
        }
    }
    return id;
}

const kg_prop *kg_props_find(const kg_props *props, guint id)
{
    for (guint i = 0; i < props->count; i++)
        if (props->props[i].id == id)
            return &props->props[i];
    return NULL;
}

gboolean kg_prop_set(const kg_prop *p, void *obj, const GValue *value, char **owned,
                     keyer_error *err)
{
    const keyer_option *o = p->option;
    char text[64];
    const char *v = text;
    switch (o->type) {
    case KEYER_OPTION_INT:
        snprintf(text, sizeof(text), "%d", g_value_get_int(value));
        break;
    case KEYER_OPTION_FLOAT:
        snprintf(text, sizeof(text), "%.9g", (double)g_value_get_float(value));
        break;
    case KEYER_OPTION_BOOL:
        snprintf(text, sizeof(text), "%d", g_value_get_boolean(value) ? 1 : 0);
        break;
    case KEYER_OPTION_ENUM:
        snprintf(text, sizeof(text), "%d", g_value_get_enum(value));
        break;
    case KEYER_OPTION_COLOR:
        snprintf(text, sizeof(text), "0x%06x", g_value_get_uint(value));
        break;
    case KEYER_OPTION_STRING: {
        const char *s = g_value_get_string(value);
        if (!s) { /* unset: the field goes back to NULL */
            *(const char **)((char *)obj + o->offset) = NULL;
            g_free(*owned);
            *owned = NULL;
            return TRUE;
        }
        gchar *copy = g_strdup(s);
        if (keyer_option_set(p->table, obj, o->name, copy, err)) {
            g_free(copy);
            return FALSE;
        }
        g_free(*owned);
        *owned = copy;
        return TRUE;
    }
    case KEYER_OPTION_CUSTOM:
        return FALSE;
    }
    return keyer_option_set(p->table, obj, o->name, v, err) == KEYER_OK;
}

void kg_prop_get(const kg_prop *p, const void *obj, GValue *value)
{
    const keyer_option *o = p->option;
    const char *field = (const char *)obj + o->offset;
    switch (o->type) {
    case KEYER_OPTION_INT:
        g_value_set_int(value, *(const int *)field);
        break;
    case KEYER_OPTION_FLOAT:
        g_value_set_float(value, *(const float *)field);
        break;
    case KEYER_OPTION_BOOL:
        g_value_set_boolean(value, *(const int *)field != 0);
        break;
    case KEYER_OPTION_ENUM:
        g_value_set_enum(value, *(const int *)field);
        break;
    case KEYER_OPTION_COLOR:
        g_value_set_uint(value, *(const uint32_t *)field);
        break;
    case KEYER_OPTION_STRING:
        g_value_set_string(value, *(const char *const *)field);
        break;
    case KEYER_OPTION_CUSTOM:
        break;
    }
}
