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
 * keyer_device_parse() reads where to compute ("auto", "cpu", "cuda", "cuda:1");
 * keyer_device_parse_list() also reads several GPUs ("cuda:all", "cuda:0,2").
 *
 * Thread safety: the functions touch only their arguments.
 */
#ifndef KEYER_CONFIG_H
#define KEYER_CONFIG_H

#include <stdint.h>

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

/** A CUDA device list meaning every CUDA device present (keyer_session_params::cuda_devices). */
#define KEYER_CUDA_DEVICES_ALL UINT64_MAX

/**
 * Parses what keyer_device_parse() reads, and lists of GPUs: "cuda:all" (every CUDA device
 * present: *@p devices = KEYER_CUDA_DEVICES_ALL) and "cuda:N,M,..." (ordinals 0..63, each
 * at most once: bit N of *@p devices set). *@p kind is KEYER_DEVICE_CUDA for both and
 * *@p ordinal the lowest ordinal listed (0 for "all"). A single device ("cuda:2", "cuda",
 * "cpu", "auto") sets *@p devices to 0 and *@p kind, *@p ordinal as keyer_device_parse()
 * does. Whether the devices exist is checked by keyer_session_create(), not here.
 * Errors: INVALID_ARGUMENT naming the text and the reason (unknown name, an ordinal that is
 * not a number in 0..63, an empty element, an ordinal listed twice), NULL arguments.
 */
keyer_status keyer_device_parse_list(const char *text, keyer_device_kind *kind, int *ordinal,
                                     uint64_t *devices, keyer_error *err);

/**
 * Writes @p devices (a keyer_session_params::cuda_devices value) as text that
 * keyer_device_parse_list() reads back: "cuda:all", "cuda:0,2"; 0 gives "". Returns the
 * length written (like snprintf, the length needed when @p size is too small).
 */
int keyer_device_list_format(uint64_t devices, char *buf, size_t size);

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
