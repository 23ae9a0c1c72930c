/*
 * Keyer sessions shared by several `keyer` elements of one process (the element's
 * `session-group` property): elements naming the same group, with the same settings, push
 * their frames into one session as separate streams, so that its batcher puts frames of every
 * stream into the same inference batches (the library's multi-stream path) and one set of
 * stage threads serves them all.
 *
 * The groups live in one table of the process (guarded by its own lock): a group is made by
 * its first member and freed, with its session, when its last member leaves. Each member
 * keeps one reference from kg_group_join() to kg_group_leave().
 *
 * Threads: a session's stream calls (open, close) are made under the group's lock; sending
 * and receiving on a member's own stream need no lock (the session allows them for different
 * streams on different threads), so a member waiting for its frames never blocks another.
 */
#ifndef KEYER_GST_SESSION_GROUP_H
#define KEYER_GST_SESSION_GROUP_H

#include <glib-object.h>

#include "keyer/pipeline.h"

G_BEGIN_DECLS

/**
 * The readable properties of @p object as text, "name=value;" for each except those named in
 * @p skip (NULL-terminated; may be NULL), in the class's order: the settings compared by
 * kg_group_join(). Freed with g_free.
 */
gchar *kg_settings_text(GObject *object, const char *const *skip);

/** A shared session. Opaque. */
typedef struct kg_group kg_group;

/**
 * Joins the group @p name. When the group has no members, its session is created from
 * @p params (strings copied; params->logger and the callbacks are replaced by the group's
 * own logger, which writes to GStreamer's debug log, so no member's pointers outlive it) and
 * @p settings is kept as the group's settings; otherwise @p settings must equal the group's
 * (a text of every property of the joining element that shapes the session). Returns the
 * group (one reference, the caller's) or NULL with @p err set: INVALID_ARGUMENT (settings
 * that differ from the group's, naming the group), or keyer_session_create()'s errors.
 */
kg_group *kg_group_join(const char *name, const keyer_session_params *params,
                        const char *settings, keyer_error *err);

/** The group's session (borrowed: valid until the caller leaves the group). */
keyer_session *kg_group_session(kg_group *group);

/** The number of elements in the group now (members that joined and have not left). */
int kg_group_members(const kg_group *group);

/** The group's name (borrowed, as kg_group_session()). */
const char *kg_group_name(const kg_group *group);

/**
 * keyer_session_open_stream() on the group's session under the group's lock.
 * Errors: those of keyer_session_open_stream().
 */
keyer_status kg_group_open_stream(kg_group *group, const keyer_stream_params *params,
                                  int *stream_id, keyer_error *err);

/**
 * keyer_session_close_stream() on the group's session under the group's lock (the frames
 * still in the stream must then be received until KEYER_STATUS_END, by the member).
 * Errors: those of keyer_session_close_stream().
 */
keyer_status kg_group_close_stream(kg_group *group, int stream_id, keyer_error *err);

/**
 * Leaves the group: drops the caller's reference; the last member destroys the session and
 * removes the group from the table. Every stream the caller opened must be closed and
 * received to its end first. Accepts NULL and *@p group == NULL; sets *@p group to NULL.
 */
void kg_group_leave(kg_group **group);

G_END_DECLS
#endif
