/*
 * libFuzzer target for option lists and values (keyer_options_parse, keyer_option_set and the
 * number parsers behind them) over the library's tables, built with -DKEYER_FUZZ=ON and
 * CC=clang:
 *   fuzz_options -max_total_time=60 tests/fuzz/corpus/options
 * The first byte picks a table (prepare, refine, compositing, session); the rest is a list
 * "name=value,...". Invariants: a list either sets the struct to values the table validates
 * or fails with INVALID_ARGUMENT, a message and the struct untouched (unless an entry applied
 * by a setter refused its value, as keyer_options_parse() allows); every value read back
 * with keyer_option_get() sets the same value again (entries with a setter have none). Crashes, leaks and undefined behaviour
 * are findings.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/effects.h"
#include "keyer/options.h"
#include "keyer/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef union params {
    keyer_prepare_params prepare;
    keyer_refine_params refine;
    keyer_composite_params composite;
    keyer_session_params session;
} params;

static const keyer_option *pick(uint8_t which, params *p)
{
    memset(p, 0, sizeof(*p));
    switch (which % 4) {
    case 0: p->prepare = keyer_prepare_params_defaults(); return keyer_prepare_options();
    case 1: p->refine = keyer_refine_params_defaults(); return keyer_refine_options();
    case 2: p->composite = keyer_composite_params_defaults(); return keyer_composite_options();
    default: p->session = keyer_session_params_defaults(); return keyer_session_options();
    }
}

/* 1 when @p message is an error of an entry applied by a setter ("option NAME: ..."). */
static int refused_by_setter(const keyer_option *table, const char *message)
{
    for (const keyer_option *o = table; o->name; o++) {
        size_t n = strlen(o->name);
        if (o->set && !strncmp(message, "option ", 7) && !strncmp(message + 7, o->name, n) &&
            message[7 + n] == ':')
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    params p, before;
    const keyer_option *table = pick(data[0], &p);
    before = p;
    char *list = malloc(size);
    if (!list)
        return 0;
    memcpy(list, data + 1, size - 1);
    list[size - 1] = '\0';
    keyer_error err = {0};
    keyer_status st = keyer_options_parse(table, &p, list, &err);
    if (st != KEYER_OK) {
        if (st != KEYER_STATUS_INVALID_ARGUMENT || !err.message[0])
            abort();
        /* the struct is untouched, except when a setter refused its value after earlier
         * entries were stored (keyer_options_parse's contract): its error names it */
        if (memcmp(&p, &before, sizeof(p)) && !refused_by_setter(table, err.message))
            abort();
    } else if (keyer_options_validate(table, &p, "fuzz", NULL) != KEYER_OK) {
        abort();
    }
    /* every value formatted by get parses back to itself (entries applied by a setter have no
     * field to read: keyer_option_get() refuses them) */
    for (const keyer_option *o = table; o->name; o++) {
        if (o->set)
            continue;
        char buf[128];
        params q = p;
        if (keyer_option_get(table, &p, o->name, buf, sizeof(buf), NULL) != KEYER_OK ||
            keyer_option_set(table, &q, o->name, buf, NULL) != KEYER_OK ||
            memcmp(&p, &q, sizeof(p)))
            abort();
    }
    /* the text as one value of each parser */
    int i;
    double x;
    if (keyer_parse_int("fuzz", list, -100, 100, &i, NULL) == KEYER_OK && (i < -100 || i > 100))
        abort();
    if (keyer_parse_number("fuzz", list, -1, 1, &x, NULL) == KEYER_OK && !(x >= -1 && x <= 1))
        abort();
    free(list);
    return 0;
}
