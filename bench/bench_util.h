/* Helpers shared by the benchmark programs: a monotonic clock, sorting of timing samples, and
 * the numbers of their command lines (read with the library's parsers, keyer/options.h). */
#ifndef KEYER_BENCH_UTIL_H
#define KEYER_BENCH_UTIL_H

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyer/options.h"

/* Seconds on the monotonic clock. */
static inline double kb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds on the monotonic clock. */
static inline double kb_now_ms(void)
{
    return kb_now_s() * 1e3;
}

/* qsort comparator of doubles, ascending. */
static inline int kb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The integer @p text given to @p option of program @p prog; on a bad one, prints the parser's
 * message (naming the option and the value) and exits with status 2. */
static inline int kb_int_arg(const char *prog, const char *option, const char *text)
{
    int v = 0;
    keyer_error err = {0};
    if (keyer_parse_int(option, text, INT_MIN, INT_MAX, &v, &err)) {
        fprintf(stderr, "%s: %s\n", prog, err.message);
        exit(2);
    }
    return v;
}

/* The finite number @p text given to @p option, as kb_int_arg. */
static inline double kb_number_arg(const char *prog, const char *option, const char *text)
{
    double v = 0;
    keyer_error err = {0};
    if (keyer_parse_number(option, text, -INFINITY, INFINITY, &v, &err)) {
        fprintf(stderr, "%s: %s\n", prog, err.message);
        exit(2);
    }
    return v;
}

/* The comma-separated integers @p text given to @p option ("1,8,64") into @p out (at most
 * @p cap); returns how many. On a bad item or too many, prints why and exits with status 2. */
static inline int kb_int_list_arg(const char *prog, const char *option, const char *text,
                                  int *out, int cap)
{
    int n = 0;
    for (const char *s = text; *s || n == 0;) {
        size_t len = strcspn(s, ",");
        char item[32] = "";
        if (len < sizeof(item))
            memcpy(item, s, len);
        if (n == cap || len >= sizeof(item)) {
            fprintf(stderr, "%s: %s: '%s' has more than %d values or a value too long\n", prog,
                    option, text, cap);
            exit(2);
        }
        out[n++] = kb_int_arg(prog, option, item);
        s += len;
        if (*s == ',')
            s++;
        else
            break;
    }
    return n;
}

#endif
