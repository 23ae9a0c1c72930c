/* Keyer sessions shared by several elements (see session_group.h). */
#include "session_group.h"

#include <gst/gst.h>
#include <string.h>

#include "gst_log.h"

GST_DEBUG_CATEGORY_STATIC(group_debug);
#define GST_CAT_DEFAULT group_debug

struct kg_group {
    gchar *name;
    gchar *settings;
    int members; /* under table_lock */
    GMutex lock; /* the session's open and close calls */
    keyer_session *session;
    keyer_logger logger;
};

/* The process's groups by name (table_lock). */
static GMutex table_lock;
static GHashTable *table;

static void log_to_gst(void *opaque, keyer_log_level level, const char *message)
{
    const kg_group *g = opaque;
    GST_CAT_LEVEL_LOG(group_debug, kg_gst_level(level), NULL, "session-group %s: %s", g->name,
                      message);
}

static gboolean skipped(const char *const *skip, const char *name)
{
    for (; skip && *skip; skip++)
        if (!strcmp(*skip, name))
            return TRUE;
    return FALSE;
}

gchar *kg_settings_text(GObject *object, const char *const *skip)
{
    guint n = 0;
    GParamSpec **specs = g_object_class_list_properties(G_OBJECT_GET_CLASS(object), &n);
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < n; i++) {
        const char *name = g_param_spec_get_name(specs[i]);
        if (!(specs[i]->flags & G_PARAM_READABLE) || skipped(skip, name))
            continue;
        GValue v = G_VALUE_INIT;
        g_value_init(&v, G_PARAM_SPEC_VALUE_TYPE(specs[i]));
        g_object_get_property(object, name, &v);
        gchar *text = g_strdup_value_contents(&v);
        g_string_append_printf(s, "%s=%s;", name, text);
        g_free(text);
        g_value_unset(&v);
    }
    g_free(specs);
    return g_string_free(s, FALSE);
}

static void group_free(kg_group *g)
{
    keyer_session_destroy(&g->session);
    g_mutex_clear(&g->lock);
    g_free(g->name);
    g_free(g->settings);
    g_free(g);
}

kg_group *kg_group_join(const char *name, const keyer_session_params *params,
                        const char *settings, keyer_error *err)
{
    static gsize once = 0;
    if (g_once_init_enter(&once)) {
        GST_DEBUG_CATEGORY_INIT(group_debug, "keyergroup", 0, "keyer shared sessions");
        g_once_init_leave(&once, 1);
    }
    if (!name || !name[0] || !params || !settings) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "session-group: no name");
        return NULL;
    }
    g_mutex_lock(&table_lock);
    if (!table)
        table = g_hash_table_new(g_str_hash, g_str_equal);
    kg_group *g = g_hash_table_lookup(table, name);
    if (g) {
        if (strcmp(g->settings, settings) != 0) {
            keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                            "session-group %s: this element's settings differ from the "
                            "group's (every element of a group needs the same properties)",
                            name);
            GST_DEBUG("group %s has [%s], joining element [%s]", name, g->settings, settings);
            g = NULL;
        } else {
            g->members++;
        }
        g_mutex_unlock(&table_lock);
        return g;
    }
    g = g_new0(kg_group, 1);
    g->name = g_strdup(name);
    g->settings = g_strdup(settings);
    g_mutex_init(&g->lock);
    g->logger = (keyer_logger){params->logger ? params->logger->level : KEYER_LOG_WARNING,
                               log_to_gst, g};
    keyer_session_params sp = *params;
    sp.logger = &g->logger;
    sp.frame_fn = NULL;
    sp.detect_fn = NULL;
    sp.progress = NULL;
    sp.max_streams = 1024; /* every stream a member opens (one per caps, flush) */
    if (keyer_session_create(&sp, &g->session, err)) {
        group_free(g);
        g_mutex_unlock(&table_lock);
        return NULL;
    }
    g->members = 1;
    g_hash_table_insert(table, g->name, g);
    g_mutex_unlock(&table_lock);
    GST_INFO("session-group %s created", name);
    return g;
}

keyer_session *kg_group_session(kg_group *group)
{
    return group->session;
}

int kg_group_members(const kg_group *group)
{
    g_mutex_lock(&table_lock);
    int n = group->members;
    g_mutex_unlock(&table_lock);
    return n;
}

const char *kg_group_name(const kg_group *group)
{
    return group->name;
}

keyer_status kg_group_open_stream(kg_group *group, const keyer_stream_params *params,
                                  int *stream_id, keyer_error *err)
{
    g_mutex_lock(&group->lock);
    keyer_status st = keyer_session_open_stream(group->session, params, stream_id, err);
    g_mutex_unlock(&group->lock);
    return st;
}

keyer_status kg_group_close_stream(kg_group *group, int stream_id, keyer_error *err)
{
    g_mutex_lock(&group->lock);
    keyer_status st = keyer_session_close_stream(group->session, stream_id, err);
    g_mutex_unlock(&group->lock);
    return st;
}

void kg_group_leave(kg_group **group)
{
    if (!group || !*group)
        return;
    kg_group *g = *group;
    *group = NULL;
    g_mutex_lock(&table_lock);
    gboolean last = --g->members == 0;
    if (last) {
        g_hash_table_remove(table, g->name);
        if (g_hash_table_size(table) == 0)
            g_clear_pointer(&table, g_hash_table_destroy);
    }
    g_mutex_unlock(&table_lock);
    if (last) {
        GST_INFO("session-group %s: last member left", g->name);
        group_free(g);
    }
}
