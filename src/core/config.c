/* Configuration files (keyer/config.h): a YAML mapping of settings, read with libyaml's event
 * parser; and the device names of command lines and files. */
#define _POSIX_C_SOURCE 200809L
#include "keyer/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

keyer_status keyer_device_parse(const char *text, keyer_device_kind *kind, int *ordinal,
                                keyer_error *err)
{
    if (!text || !kind || !ordinal)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "device: NULL argument");
    if (!strcmp(text, "auto") || !strcmp(text, "cpu") || !strcmp(text, "cuda")) {
        *kind = text[0] == 'a' ? KEYER_DEVICE_AUTO : text[1] == 'p' ? KEYER_DEVICE_CPU
                                                                   : KEYER_DEVICE_CUDA;
        *ordinal = 0;
        return KEYER_OK;
    }
    if (!strncmp(text, "cuda:", 5) && text[5] >= '0' && text[5] <= '9') {
        char *end = NULL;
        errno = 0;
        long n = strtol(text + 5, &end, 10);
        if (!errno && end && !*end && n >= 0 && n <= 63) {
            *kind = KEYER_DEVICE_CUDA;
            *ordinal = (int)n;
            return KEYER_OK;
        }
    }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "unknown device '%s' (use auto, cpu, cuda or cuda:N)", text);
}

keyer_status keyer_device_parse_list(const char *text, keyer_device_kind *kind, int *ordinal,
                                     uint64_t *devices, keyer_error *err)
{
    if (!text || !kind || !ordinal || !devices)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "device: NULL argument");
    if (strncmp(text, "cuda:", 5) || (!strchr(text, ',') && strcmp(text + 5, "all"))) {
        keyer_status st = keyer_device_parse(text, kind, ordinal, err);
        if (st)
            return keyer_error_set(err, st,
                                   "unknown device '%s' (use auto, cpu, cuda, cuda:N, "
                                   "cuda:N,M,... or cuda:all)", text);
        *devices = 0;
        return KEYER_OK;
    }
    if (!strcmp(text + 5, "all")) {
        *kind = KEYER_DEVICE_CUDA;
        *ordinal = 0;
        *devices = KEYER_CUDA_DEVICES_ALL;
        return KEYER_OK;
    }
    uint64_t set = 0;
    int lowest = -1;
    const char *p = text + 5;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "device list '%s': an empty element", text);
        char num[8];
        int n = -1;
        if (len < sizeof(num)) {
            memcpy(num, p, len);
            num[len] = 0;
            char *end = NULL;
            errno = 0;
            long v = strtol(num, &end, 10);
            if (num[0] >= '0' && num[0] <= '9' && !errno && end && !*end && v >= 0 && v <= 63)
                n = (int)v;
        }
        if (n < 0)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "device list '%s': '%.*s' is not a CUDA ordinal 0..63", text,
                                   (int)(len < 32 ? len : 32), p);
        if (set & (UINT64_C(1) << n))
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "device list '%s': cuda:%d is listed twice", text, n);
        set |= UINT64_C(1) << n;
        if (lowest < 0 || n < lowest)
            lowest = n;
        if (!comma)
            break;
        p = comma + 1;
    }
    *kind = KEYER_DEVICE_CUDA;
    *ordinal = lowest;
    *devices = set;
    return KEYER_OK;
}

int keyer_device_list_format(uint64_t devices, char *buf, size_t size)
{
    if (devices == KEYER_CUDA_DEVICES_ALL)
        return snprintf(buf, size, "cuda:all");
    size_t len = 0;
    char tmp[4 * 64 + 8] = "";
    for (int i = 0; i < 64; i++) {
        if (!(devices & (UINT64_C(1) << i)))
            continue;
        int w = snprintf(tmp + len, sizeof(tmp) - len, "%s%d", len ? "," : "cuda:", i);
        if (w > 0)
            len += (size_t)w;
    }
    return snprintf(buf, size, "%s", tmp);
}

#ifdef KEYER_HAVE_YAML
#include <yaml.h>

/* Longest key, "parent.child" included. */
#define KEY_MAX 256
/* Deepest nesting: top mapping > mapping > sequence. */
#define MAX_DEPTH 2

typedef struct reader {
    yaml_parser_t parser;
    const char *path;
    keyer_config_fn fn;
    void *opaque;
    keyer_error *err;
} reader;

static keyer_status bad(reader *r, const yaml_event_t *ev, const char *what)
{
    return keyer_error_set(r->err, KEYER_STATUS_BAD_DATA, "%s:%zu:%zu: %s", r->path,
                           ev->start_mark.line + 1, ev->start_mark.column + 1, what);
}

static keyer_status next(reader *r, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&r->parser, ev)) {
        const char *problem = r->parser.problem ? r->parser.problem : "malformed YAML";
        return keyer_error_set(r->err, KEYER_STATUS_BAD_DATA, "%s:%zu:%zu: %s", r->path,
                               r->parser.problem_mark.line + 1,
                               r->parser.problem_mark.column + 1, problem);
    }
    return KEYER_OK;
}

static keyer_status emit(reader *r, const char *key, const yaml_event_t *ev)
{
    const char *value = (const char *)ev->data.scalar.value;
    keyer_status st = r->fn(r->opaque, key, value, (int)ev->start_mark.line + 1, r->err);
    if (st && r->err && r->err->status == KEYER_OK)
        keyer_error_set(r->err, st, "%s:%zu: setting '%s' was rejected", r->path,
                        ev->start_mark.line + 1, key);
    return st;
}

/* Reads the value of @p key whose first event is @p ev (consumed by the caller). */
static keyer_status read_value(reader *r, const char *key, yaml_event_t *ev, int depth)
{
    keyer_status st = KEYER_OK;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        return emit(r, key, ev);
    case YAML_SEQUENCE_START_EVENT:
        for (;;) {
            yaml_event_t item;
            if ((st = next(r, &item)))
                return st;
            if (item.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&item);
                return KEYER_OK;
            }
            if (item.type != YAML_SCALAR_EVENT)
                st = bad(r, &item, "a list may hold only plain values");
            else
                st = emit(r, key, &item);
            yaml_event_delete(&item);
            if (st)
                return st;
        }
    case YAML_MAPPING_START_EVENT:
        if (depth >= MAX_DEPTH)
            return bad(r, ev, "settings nest at most two levels deep");
        for (;;) {
            yaml_event_t k;
            if ((st = next(r, &k)))
                return st;
            if (k.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&k);
                return KEYER_OK;
            }
            if (k.type != YAML_SCALAR_EVENT) {
                st = bad(r, &k, "a key must be a plain name");
                yaml_event_delete(&k);
                return st;
            }
            char full[KEY_MAX];
            int n = snprintf(full, sizeof(full), "%s%s%s", key, key[0] ? "." : "",
                             (const char *)k.data.scalar.value);
            if (n < 0 || (size_t)n >= sizeof(full) || k.data.scalar.length == 0) {
                st = bad(r, &k, "a key is empty or too long");
                yaml_event_delete(&k);
                return st;
            }
            yaml_event_delete(&k);
            yaml_event_t v;
            if ((st = next(r, &v)))
                return st;
            st = read_value(r, full, &v, depth + 1);
            yaml_event_delete(&v);
            if (st)
                return st;
        }
    case YAML_ALIAS_EVENT:
        return bad(r, ev, "aliases are not supported");
    default:
        return bad(r, ev, "unexpected YAML structure");
    }
}

keyer_status keyer_config_read(const char *path, keyer_config_fn fn, void *opaque,
                               keyer_error *err)
{
    if (!path || !fn)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_config_read: path or callback is NULL");
    FILE *f = fopen(path, "rb");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    reader r = {.path = path, .fn = fn, .opaque = opaque, .err = err};
    if (!yaml_parser_initialize(&r.parser)) {
        fclose(f);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot start libyaml", path);
    }
    yaml_parser_set_input_file(&r.parser, f);
    keyer_status st = KEYER_OK;
    int documents = 0;
    for (;;) {
        yaml_event_t ev;
        if ((st = next(&r, &ev)))
            break;
        yaml_event_type_t type = ev.type;
        if (type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (type == YAML_DOCUMENT_START_EVENT && ++documents > 1) {
            st = bad(&r, &ev, "one YAML document expected");
        } else if (type == YAML_MAPPING_START_EVENT) {
            st = read_value(&r, "", &ev, 0);
        } else if (type == YAML_SCALAR_EVENT) {
            /* an empty document ("" or "~") has no settings */
            if (ev.data.scalar.length != 0 && strcmp((const char *)ev.data.scalar.value, "~") &&
                strcmp((const char *)ev.data.scalar.value, "null"))
                st = bad(&r, &ev, "the configuration must be a mapping of settings");
        } else if (type == YAML_SEQUENCE_START_EVENT || type == YAML_ALIAS_EVENT) {
            st = bad(&r, &ev, "the configuration must be a mapping of settings");
        }
        yaml_event_delete(&ev);
        if (st)
            break;
    }
    yaml_parser_delete(&r.parser);
    fclose(f);
    return st;
}

#else /* !KEYER_HAVE_YAML */

keyer_status keyer_config_read(const char *path, keyer_config_fn fn, void *opaque,
                               keyer_error *err)
{
    (void)fn;
    (void)opaque;
    return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                           "%s: keyer was built without libyaml (libyaml-dev)",
                           path ? path : "(null)");
}

#endif
