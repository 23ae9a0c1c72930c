/* Several GPUs in one session: stream loads, least-loaded placement, the fault switch. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/placement.h"

#include <stdio.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

double kr_place_load(int width, int height, keyer_rational rate)
{
    if (width <= 0 || height <= 0)
        return 0.0;
    double fps = rate.num > 0 && rate.den > 0 ? (double)rate.num / (double)rate.den
                                              : KR_PLACE_DEFAULT_FPS;
    return (double)width * (double)height * fps;
}

int kr_place_pick(const double *load, int n)
{
    if (!load || n < 1)
        return -1;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (load[i] < load[best])
            best = i;
    return best;
}

int kr_place_streams(const double *stream_load, int count, double *gpu_load, int gpus, int *out)
{
    if (gpus < 1 || count < 0 || !gpu_load || (count > 0 && (!stream_load || !out)))
        return -1;
    for (int i = 0; i < count; i++) {
        int g = kr_place_pick(gpu_load, gpus);
        out[i] = g;
        gpu_load[g] += stream_load[i];
    }
    return 0;
}

int kr_place_failover(const double *load, const int *healthy, int n)
{
    if (!load || !healthy)
        return -1;
    int best = -1;
    for (int i = 0; i < n; i++)
        if (healthy[i] && (best < 0 || load[i] < load[best]))
            best = i;
    return best;
}

/* A decimal integer filling [p, end) within 0..max, else -1. */
static long whole_number(const char *p, long max)
{
    if (!*p || *p < '0' || *p > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || !end || *end || v < 0 || v > max)
        return -1;
    return v;
}

int kr_fail_spec_parse(const char *text, int *ordinal, int *frame)
{
    if (!text || !ordinal || !frame)
        return -1;
    if (strncmp(text, "cuda:", 5)) {
        long f = whole_number(text, (1L << 30) - 1);
        if (f < 0)
            return -1;
        *ordinal = -1;
        *frame = (int)f;
        return 0;
    }
    const char *at = strchr(text + 5, '@');
    char num[8];
    size_t len = at ? (size_t)(at - (text + 5)) : 0;
    if (!at || len == 0 || len >= sizeof(num))
        return -1;
    memcpy(num, text + 5, len);
    num[len] = 0;
    long k = whole_number(num, 63), f = whole_number(at + 1, (1L << 30) - 1);
    if (k < 0 || f < 0)
        return -1;
    *ordinal = (int)k;
    *frame = (int)f;
    return 0;
}

int kr_fail_spec_frame(const char *text, int ordinal)
{
    if (!text || !*text)
        return -1;
    int found = -1;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof(item))
            return -1;
        memcpy(item, p, len);
        item[len] = 0;
        int dev = -1, frame = -1;
        if (kr_fail_spec_parse(item, &dev, &frame))
            return -1;
        if (found < 0 && (dev < 0 || dev == ordinal))
            found = frame;
        if (!comma)
            break;
        p = comma + 1;
    }
    return found;
}

keyer_status kr_set_cuda_devices(const keyer_option *o, void *obj, const char *value,
                                 keyer_error *err)
{
    keyer_session_params *p = obj;
    if (!value || !*value || !strcmp(value, "none")) {
        p->cuda_devices = 0;
        return KEYER_OK;
    }
    uint64_t set = 0;
    keyer_device_kind kind;
    int ordinal = 0;
    char text[256];
    keyer_status st = KEYER_OK;
    if (!strcmp(value, "all")) {
        set = KEYER_CUDA_DEVICES_ALL;
    } else if (!strchr(value, ',')) {
        st = keyer_parse_int("option cuda_devices", value, 0, 63, &ordinal, err);
        set = UINT64_C(1) << ordinal;
    } else if (snprintf(text, sizeof(text), "cuda:%s", value) >= (int)sizeof(text)) {
        st = keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "option %s: list too long",
                             o->name);
    } else {
        st = keyer_device_parse_list(text, &kind, &ordinal, &set, err);
    }
    if (st)
        return st;
    p->cuda_devices = set;
    return KEYER_OK;
}
