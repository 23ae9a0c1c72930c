/*
 * libFuzzer target for configuration files (keyer_config_read, YAML through libyaml), built
 * with -DKEYER_FUZZ=ON and CC=clang:
 *   fuzz_config -max_total_time=60 tests/fuzz/corpus/config
 * Every input must either be read (each setting delivered with a non-empty key and a line
 * number inside the file) or fail with BAD_DATA and a message naming the file; crashes, leaks
 * and undefined behaviour are findings.
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keyer/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct check {
    int limit; /* no line number can exceed this (one line per input byte, plus one) */
} check;

static keyer_status setting(void *opaque, const char *key, const char *value, int line,
                            keyer_error *err)
{
    check *c = opaque;
    (void)err;
    if (!key || !key[0] || !value || line < 1 || line > c->limit)
        abort();
    /* touch every byte */
    volatile size_t n = strlen(key) + strlen(value);
    (void)n;
    return KEYER_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/keyer-fuzz-config-%ld.yaml", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    check c = {(int)(size < 1000000 ? size : 1000000) + 1};
    keyer_error err = {0};
    keyer_status st = keyer_config_read(path, setting, &c, &err);
    if (st != KEYER_OK && (st != KEYER_STATUS_BAD_DATA || !strstr(err.message, path)))
        abort();
    return 0;
}
