#include "keyer/log.h"

#include <stdio.h>

keyer_logger keyer_logger_default(void)
{
    keyer_logger lg = {KEYER_LOG_WARNING, NULL, NULL};
    return lg;
}

const char *keyer_log_level_name(keyer_log_level level)
{
    switch (level) {
    case KEYER_LOG_QUIET: return "quiet";
    case KEYER_LOG_ERROR: return "error";
    case KEYER_LOG_WARNING: return "warning";
    case KEYER_LOG_INFO: return "info";
    case KEYER_LOG_DEBUG: return "debug";
    case KEYER_LOG_TRACE: return "trace";
    }
    return "unknown";
}

void keyer_logv(const keyer_logger *logger, keyer_log_level level, const char *fmt, va_list ap)
{
    keyer_logger def = keyer_logger_default();
    if (!logger)
        logger = &def;
    if (level < KEYER_LOG_ERROR || level > logger->level)
        return;
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    if (logger->callback)
        logger->callback(logger->opaque, level, line);
    else
        fprintf(stderr, "keyer: %s: %s\n", keyer_log_level_name(level), line);
}

void keyer_log(const keyer_logger *logger, keyer_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    keyer_logv(logger, level, fmt, ap);
    va_end(ap);
}
