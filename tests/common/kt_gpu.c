/* The GPU tests' shared main(): see kt_gpu.h. */
#include "kt_gpu.h"

#include <stdio.h>
#include <stdlib.h>

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
