/**
 * @file keyer/config.h
 * @brief Configuration files (YAML) and the device names of command lines and files.
 *
 * keyer_config_read() walks a YAML file of settings and hands each one, as text, to a
 * callback; a program then sets its option tables from them (keyer/options.h), so a file
 * key means what the command line's option of the same name means:
 *
 * @code
 * static keyer_status setting(void *opaque, const char *key, const char *value, int line,
 *                             keyer_error *err)
 * {
 *     return keyer_option_set(keyer_refine_options(), opaque, key, value, err);
 * }
 * ...
 * keyer_refine_params rp = keyer_refine_params_defaults();
 * if (keyer_config_read("refine.yaml", setting, &rp, &err))
 *     fprintf(stderr, "keyer: %s\n", err.message);
 * @endcode
 *
 * keyer_device_parse() reads where to compute ("auto", "cpu", "cuda", "cuda:1").
 *
 * Thread safety: the functions touch only their arguments.
 */
#ifndef KEYER_CONFIG_H
#define KEYER_CONFIG_H

#include "keyer/options.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices ---------------------------------------------------------------------------- */

/** Where a session computes. */
typedef enum keyer_device_kind {
    KEYER_DEVICE_AUTO = 0, /**< CUDA when built, present and working, else the CPU */
    KEYER_DEVICE_CPU,      /**< the CPU only (decoding included) */
    KEYER_DEVICE_CUDA,     /**< a CUDA GPU; falls back to the CPU (logged) when it cannot */
} keyer_device_kind;
KEYER_OPTION_ENUM_CHECK(keyer_device_kind);

/**
 * Parses "auto", "cpu", "cuda" or "cuda:N" (N in 0..63) into a kind and a CUDA ordinal (0
 * unless given). Errors: INVALID_ARGUMENT naming the text ("unknown device 'gpu' (use auto,
 * cpu, cuda or cuda:N)"), NULL arguments.
 */
keyer_status keyer_device_parse(const char *text, keyer_device_kind *kind, int *ordinal,
                                keyer_error *err);

/* ---- configuration files ---------------------------------------------------------------- */

/**
 * Receives one setting of a configuration file: @p key (nested mappings give
 * "parent.child"), @p value as written (a scalar; each element of a sequence gives one
 * call with the same key), @p line (1-based) for messages. Both strings are valid only
 * during the call. Return KEYER_OK to go on, or a failure (with @p err filled) to stop
 * reading.
 */
typedef keyer_status (*keyer_config_fn)(void *opaque, const char *key, const char *value,
                                        int line, keyer_error *err);

/**
 * Reads a YAML configuration file whose top level is a mapping from keys to scalars,
 * sequences of scalars or mappings of those, and calls @p fn for each setting in file
 * order. An empty file has no settings. Errors: IO (cannot open @p path), BAD_DATA (not
 * YAML, or another structure: the message gives the path, line and column), UNSUPPORTED
 * (keyer was built without libyaml), INVALID_ARGUMENT (NULL @p path or @p fn), and whatever
 * @p fn returns (when @p fn leaves @p err empty, the message names the file, the line and
 * the key).
 */
keyer_status keyer_config_read(const char *path, keyer_config_fn fn, void *opaque,
                               keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_CONFIG_H */
