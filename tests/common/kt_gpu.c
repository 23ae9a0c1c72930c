/* The GPU tests' shared main(): see kt_gpu.h. */
#include "kt_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"

int kt_gpu_run_group(const char *name, const struct CMUnitTest *tests, size_t count,
                     CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const kr_device_fns *dev = kr_device_cuda();
    if (!dev || dev->count() < 1) {
        printf("no CUDA device: skipped\n");
        return KT_SKIPPED;
    }
    kt_gpu_apply_filter();
    return _cmocka_run_group_tests(name, tests, count, setup, teardown);
}

void kt_gpu_apply_filter(void)
{
    const char *filter = getenv("KEYER_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
}

int kt_test_short(void)
{
    const char *s = getenv("KEYER_TEST_SHORT");
    return s && s[0] == '1' && s[1] == '\0';
}

int kt_test_model(const char *model)
{
    const char *list = getenv("KEYER_TEST_MODELS");
    if (!list || !*list)
        return 1;
    const size_t n = strlen(model);
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, model, n))
            return 1;
        if (!end)
            return 0;
        p = end + 1;
    }
}
