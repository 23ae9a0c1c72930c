/**
 * @file keyer/log.h
 * @brief Levelled logging through a caller-owned logger.
 *
 * keyer has no global logger. Objects that log take a `const keyer_logger *`
 * in their parameters; NULL means "warnings and errors to stderr".
 *
 * @code
 * keyer_logger lg = keyer_logger_default();
 * lg.level = KEYER_LOG_DEBUG;
 * keyer_log(&lg, KEYER_LOG_INFO, "decoding %s", path);
 * @endcode
 *
 * Thread safety: keyer_log may be called from any thread; the callback must
 * be thread-safe (the default one writes each line with a single fprintf).
 */
#ifndef KEYER_LOG_H
#define KEYER_LOG_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Severity, most severe first. A logger prints messages with level <= its level. */
typedef enum keyer_log_level {
    KEYER_LOG_QUIET = -1, /**< as a logger level: print nothing */
    KEYER_LOG_ERROR = 0,
    KEYER_LOG_WARNING,
    KEYER_LOG_INFO,
    KEYER_LOG_DEBUG,
    KEYER_LOG_TRACE,
} keyer_log_level;

/** Receives one formatted message (no trailing newline). */
typedef void (*keyer_log_fn)(void *opaque, keyer_log_level level, const char *message);

/** A logger: a threshold and a sink. Copyable; owns nothing. */
typedef struct keyer_logger {
    keyer_log_level level; /**< messages above this level are dropped */
    keyer_log_fn callback; /**< NULL: write "keyer: <level>: <message>\n" to stderr */
    void *opaque;          /**< passed to callback */
} keyer_logger;

/** A logger printing warnings and errors to stderr. */
keyer_logger keyer_logger_default(void);

/** Name of a level ("error", "warning", "info", "debug", "trace"). */
const char *keyer_log_level_name(keyer_log_level level);

/** Formats and emits a message if @p logger's level admits it. @p logger may be NULL. */
void keyer_log(const keyer_logger *logger, keyer_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** va_list form of keyer_log(). */
void keyer_logv(const keyer_logger *logger, keyer_log_level level, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 0)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif /* KEYER_LOG_H */
