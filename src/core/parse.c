/* The value parsers behind the option tables (keyer/options.h): integers, numbers, booleans. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/options.h"

keyer_status keyer_parse_int(const char *what, const char *text, int min, int max, int *out,
                             keyer_error *err)
{
    if (!what)
        what = "value";
    if (!text || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL %s", what,
                               !text ? "text" : "output");
    char *end = NULL;
    errno = 0;
    long x = strtol(text, &end, 10);
    int number = end != text && !*end && errno != ERANGE;
    if (number && x >= min && x <= max) {
        *out = (int)x;
        return KEYER_OK;
    }
    int closed = min > INT_MIN && max < INT_MAX;
    if (number && closed)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: %ld is outside %d..%d",
                               what, x, min, max);
    /* malformed, or outside a range open on one side: say which integers are wanted */
    char range[32] = "";
    if (!closed && min > INT_MIN)
        snprintf(range, sizeof(range), " >= %d", min);
    else if (!closed && max < INT_MAX)
        snprintf(range, sizeof(range), " <= %d", max);
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: '%s' is not an integer%s",
                           what, text, range);
}

keyer_status keyer_parse_number(const char *what, const char *text, double min, double max,
                                double *out, keyer_error *err)
{
    if (!what)
        what = "value";
    if (!text || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL %s", what,
                               !text ? "text" : "output");
    char *end = NULL;
    errno = 0;
    double x = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(x))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: '%s' is not a finite number", what, text);
    if (x < min || x > max) {
        if (isfinite(min) && isfinite(max))
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: %g is outside %g..%g",
                                   what, x, min, max);
        if (x < min)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: %g is less than %g",
                                   what, x, min);
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: %g is more than %g", what,
                               x, max);
    }
    *out = x;
    return KEYER_OK;
}

keyer_status keyer_parse_bool(const char *what, const char *text, int *out, keyer_error *err)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    if (!what)
        what = "value";
    if (!text || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL %s", what,
                               !text ? "text" : "output");
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcmp(text, yes[i])) {
            *out = 1;
            return KEYER_OK;
        }
        if (!strcmp(text, no[i])) {
            *out = 0;
            return KEYER_OK;
        }
    }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "%s: '%s' is not a boolean (1/0, true/false, yes/no, on/off)", what,
                           text);
}
