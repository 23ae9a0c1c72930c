/* NVML through dlopen: only the handful of entry points the statistics need. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>

/* NVML's ABI (nvml.h): opaque device handle, return code 0 = NVML_SUCCESS. */
typedef void *nvml_device;
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct nvml_utilization {
    unsigned int gpu, memory;
} nvml_utilization;

struct kr_nvml {
    void *lib;
    nvml_device device;
    int (*shutdown)(void);
    int (*memory_info)(nvml_device, nvml_memory *);
    int (*utilization)(nvml_device, nvml_utilization *);
};

kr_nvml *kr_nvml_open(int ordinal)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return NULL;
    kr_nvml *n = calloc(1, sizeof(*n));
    if (!n) {
        dlclose(lib);
        return NULL;
    }
    n->lib = lib;
    int (*init)(void) = NULL;
    int (*by_index)(unsigned int, nvml_device *) = NULL;
    /* POSIX dlsym returns void *; converting through a union keeps -Wpedantic quiet */
    union {
        void *p;
        int (*init)(void);
        int (*by_index)(unsigned int, nvml_device *);
        int (*memory_info)(nvml_device, nvml_memory *);
        int (*utilization)(nvml_device, nvml_utilization *);
    } u;
    if ((u.p = dlsym(lib, "nvmlInit_v2")))
        init = u.init;
    if ((u.p = dlsym(lib, "nvmlShutdown")))
        n->shutdown = u.init;
    if ((u.p = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2")))
        by_index = u.by_index;
    if ((u.p = dlsym(lib, "nvmlDeviceGetMemoryInfo")))
        n->memory_info = u.memory_info;
    if ((u.p = dlsym(lib, "nvmlDeviceGetUtilizationRates")))
        n->utilization = u.utilization;
    if (!init || !n->shutdown || !by_index || !n->memory_info || !n->utilization ||
        init() != 0) {
        dlclose(lib);
        free(n);
        return NULL;
    }
    if (ordinal < 0 || by_index((unsigned int)ordinal, &n->device) != 0) {
        n->shutdown();
        dlclose(lib);
        free(n);
        return NULL;
    }
    return n;
}

int kr_nvml_sample(kr_nvml *n, int64_t *used, int64_t *total, int *utilization)
{
    if (!n)
        return -1;
    nvml_memory m;
    nvml_utilization u;
    if (n->memory_info(n->device, &m) != 0 || n->utilization(n->device, &u) != 0)
        return -1;
    *used = (int64_t)m.used;
    *total = (int64_t)m.total;
    *utilization = (int)u.gpu;
    return 0;
}

void kr_nvml_close(kr_nvml **n)
{
    if (!n || !*n)
        return;
    (*n)->shutdown();
    dlclose((*n)->lib);
    free(*n);
    *n = NULL;
}
