/**
 * @file keyer/status.h
 * @brief Status codes and error messages shared by every keyer call.
 *
 * Every keyer function that can fail returns a ::keyer_status and takes, as
 * its last parameter, an optional `keyer_error *`. On failure the error is
 * filled with the status and a message that names the object, file or
 * operator and the condition that failed. Passing NULL discards the message.
 *
 * @code
 * keyer_error err = {0};
 * keyer_frame *f = NULL;
 * if (keyer_frame_create(&params, &f, &err) != KEYER_OK)
 *     fprintf(stderr, "keyer: %s\n", err.message);
 * @endcode
 *
 * Thread safety: a keyer_error belongs to its caller; use one per thread.
 */
#ifndef KEYER_STATUS_H
#define KEYER_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/** Result of a keyer call. KEYER_OK is zero; every failure is non-zero. */
typedef enum keyer_status {
    KEYER_OK = 0,
    KEYER_STATUS_INVALID_ARGUMENT, /**< a parameter is out of range or NULL */
    KEYER_STATUS_OUT_OF_MEMORY,    /**< host or device allocation failed */
    KEYER_STATUS_IO,               /**< a file or stream could not be read or written */
    KEYER_STATUS_BAD_DATA,         /**< input data (model, video, config) is malformed */
    KEYER_STATUS_UNSUPPORTED,      /**< valid but not supported (operator, codec, format) */
    KEYER_STATUS_DEVICE,           /**< a GPU or driver call failed */
    KEYER_STATUS_AGAIN,            /**< send/receive: switch direction and call again */
    KEYER_STATUS_END,              /**< end of stream: no more data */
    KEYER_STATUS_INTERRUPTED,      /**< stopped on request (signal, cancel) */
    KEYER_STATUS_INTERNAL,         /**< a broken internal invariant: a bug in keyer */
    KEYER_STATUS_COUNT_            /**< number of statuses; not a status */
} keyer_status;

/** Capacity of keyer_error::message, terminating NUL included. */
#define KEYER_ERROR_MESSAGE_MAX 512

/** An error report: the status and a human-readable message. Zero-initialise. */
typedef struct keyer_error {
    keyer_status status;                   /**< KEYER_OK when no error was recorded */
    char message[KEYER_ERROR_MESSAGE_MAX]; /**< NUL-terminated, truncated if longer */
} keyer_error;

/** Short constant name of a status ("ok", "invalid argument", ...). Never NULL. */
const char *keyer_status_name(keyer_status status);

/**
 * Records a failure in @p err (if non-NULL) with a printf-style message and
 * returns @p status, so that `return keyer_error_set(err, ...);` is one line.
 * A message longer than KEYER_ERROR_MESSAGE_MAX - 1 bytes is truncated.
 */
keyer_status keyer_error_set(keyer_error *err, keyer_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/**
 * Prefixes the message already in @p err with a printf-style context
 * ("reading model.tflite: " + old message). Keeps the status. Returns it.
 * Does nothing and returns KEYER_OK when @p err is NULL.
 */
keyer_status keyer_error_prefix(keyer_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** Resets @p err to KEYER_OK with an empty message. NULL is accepted. */
void keyer_error_clear(keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_STATUS_H */
