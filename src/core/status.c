#include "keyer/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
    [KEYER_OK] = "ok",
    [KEYER_STATUS_INVALID_ARGUMENT] = "invalid argument",
    [KEYER_STATUS_OUT_OF_MEMORY] = "out of memory",
    [KEYER_STATUS_IO] = "I/O error",
    [KEYER_STATUS_BAD_DATA] = "malformed data",
    [KEYER_STATUS_UNSUPPORTED] = "unsupported",
    [KEYER_STATUS_DEVICE] = "device error",
    [KEYER_STATUS_AGAIN] = "try again",
    [KEYER_STATUS_END] = "end of stream",
    [KEYER_STATUS_INTERRUPTED] = "interrupted",
    [KEYER_STATUS_INTERNAL] = "internal error",
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == KEYER_STATUS_COUNT_,
               "status_names must name every keyer_status");

const char *keyer_status_name(keyer_status status)
{
    if ((unsigned)status >= KEYER_STATUS_COUNT_)
        return "unknown status";
    return status_names[status];
}

keyer_status keyer_error_set(keyer_error *err, keyer_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

keyer_status keyer_error_prefix(keyer_error *err, const char *fmt, ...)
{
    if (!err)
        return KEYER_OK;
    char prefix[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    char old[KEYER_ERROR_MESSAGE_MAX];
    memcpy(old, err->message, sizeof(old));
    old[sizeof(old) - 1] = '\0';
    size_t np = strlen(prefix), no = strlen(old), cap = sizeof(err->message) - 1;
    if (np > cap)
        np = cap;
    if (no > cap - np)
        no = cap - np;
    memcpy(err->message, prefix, np);
    memcpy(err->message + np, old, no);
    err->message[np + no] = '\0';
    return err->status;
}

void keyer_error_clear(keyer_error *err)
{
    if (err) {
        err->status = KEYER_OK;
        err->message[0] = '\0';
    }
}
