/* The CUDA device table (CUDA builds only): memory, streams, copies and events. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "core/device.h"

static keyer_status fail(keyer_error *err, const char *what, cudaError_t e)
{
    return keyer_error_set(err, e == cudaErrorMemoryAllocation ? KEYER_STATUS_OUT_OF_MEMORY
                                                               : KEYER_STATUS_DEVICE,
                           "%s: %s", what, cudaGetErrorString(e));
}

static keyer_status use(int ordinal, keyer_error *err)
{
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess)
        return fail(err, "cudaSetDevice", e);
    return KEYER_OK;
}

static int count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error state */
        return 0;
    }
    return n;
}

static keyer_status describe(int ordinal, char *name, size_t name_size, size_t *total_bytes,
                             keyer_error *err)
{
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess)
        return fail(err, "cudaGetDeviceProperties", e);
    if (name && name_size)
        snprintf(name, name_size, "%s", prop.name);
    if (total_bytes)
        *total_bytes = prop.totalGlobalMem;
    return KEYER_OK;
}

static keyer_status caps(int ordinal, int emulate, kr_gpu_caps *out, keyer_error *err)
{
    /* the attribute for each field (gpu_caps.h), queried in this order */
    int v[14] = {0};
    static const enum cudaDeviceAttr attrs[14] = {
        cudaDevAttrComputeCapabilityMajor,
        cudaDevAttrComputeCapabilityMinor,
        cudaDevAttrMultiProcessorCount,
        cudaDevAttrMaxSharedMemoryPerBlock,
        cudaDevAttrMaxSharedMemoryPerBlockOptin,
        cudaDevAttrMaxSharedMemoryPerMultiprocessor,
        cudaDevAttrReservedSharedMemoryPerBlock,
        cudaDevAttrMaxRegistersPerBlock,
        cudaDevAttrMaxRegistersPerMultiprocessor,
        cudaDevAttrMaxThreadsPerBlock,
        cudaDevAttrMaxThreadsPerMultiProcessor,
        cudaDevAttrMaxBlocksPerMultiprocessor,
        cudaDevAttrCooperativeLaunch,
        cudaDevAttrClusterLaunch,
    };
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < 14; i++) {
        cudaError_t e = cudaDeviceGetAttribute(&v[i], attrs[i], ordinal);
        if (e != cudaSuccess) {
            keyer_status st = keyer_error_set(err, KEYER_STATUS_DEVICE,
                                              "device %d: cudaDeviceGetAttribute(%d): %s", ordinal,
                                              (int)attrs[i], cudaGetErrorString(e));
            cudaGetLastError();
            return st;
        }
    }
    kr_gpu_caps c = {
        .major = v[0],
        .minor = v[1],
        .real_major = v[0],
        .real_minor = v[1],
        .sms = v[2],
        .smem_block = (size_t)v[3],
        .smem_block_optin = (size_t)v[4],
        .smem_sm = (size_t)v[5],
        .smem_reserved_block = (size_t)v[6],
        .regs_block = v[7],
        .regs_sm = v[8],
        .threads_block = v[9],
        .threads_sm = v[10],
        .blocks_sm = v[11],
        .cooperative_launch = v[12] != 0,
        .cluster_launch = v[13] != 0,
    };
    if (!emulate) {
        *out = c;
        return KEYER_OK;
    }
    keyer_status st = kr_gpu_caps_from_env(&c, out, err);
    return st ? keyer_error_prefix(err, "device %d: ", ordinal) : KEYER_OK;
}

static keyer_status mem_info(int ordinal, size_t *free_bytes, size_t *total_bytes,
                             keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess)
        return fail(err, "cudaMemGetInfo", e);
    return KEYER_OK;
}

static keyer_status alloc(int ordinal, size_t bytes, void **ptr, keyer_error *err)
{
    *ptr = NULL;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
        *ptr = NULL;
        cudaGetLastError();
        return keyer_error_set(err, e == cudaErrorMemoryAllocation ? KEYER_STATUS_OUT_OF_MEMORY
                                                                   : KEYER_STATUS_DEVICE,
                               "cudaMalloc of %zu bytes on device %d: %s", bytes, ordinal,
                               cudaGetErrorString(e));
    }
    return KEYER_OK;
}

static void dfree(int ordinal, void *ptr)
{
    if (!ptr)
        return;
    cudaSetDevice(ordinal);
    cudaFree(ptr);
}

static keyer_status host_alloc(int ordinal, size_t bytes, void **ptr, keyer_error *err)
{
    *ptr = NULL;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaMallocHost(ptr, bytes);
    if (e != cudaSuccess) {
        *ptr = NULL;
        cudaGetLastError();
        return keyer_error_set(err, e == cudaErrorMemoryAllocation ? KEYER_STATUS_OUT_OF_MEMORY
                                                                   : KEYER_STATUS_DEVICE,
                               "cudaMallocHost of %zu bytes for device %d: %s", bytes, ordinal,
                               cudaGetErrorString(e));
    }
    return KEYER_OK;
}

static void host_free(int ordinal, void *ptr)
{
    if (!ptr)
        return;
    cudaSetDevice(ordinal);
    cudaFreeHost(ptr);
}

static keyer_status stream_create(int ordinal, void **stream, keyer_error *err)
{
    *stream = NULL;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaStream_t s;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return fail(err, "cudaStreamCreateWithFlags", e);
    *stream = s;
    return KEYER_OK;
}

static keyer_status stream_create_urgent(int ordinal, void **stream, keyer_error *err)
{
    *stream = NULL;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    int least = 0, greatest = 0; /* greatest: the highest priority (the lowest number) */
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e != cudaSuccess)
        return fail(err, "cudaDeviceGetStreamPriorityRange", e);
    cudaStream_t s;
    e = cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest);
    if (e != cudaSuccess)
        return fail(err, "cudaStreamCreateWithPriority", e);
    *stream = s;
    return KEYER_OK;
}

static void stream_destroy(int ordinal, void *stream)
{
    if (!stream)
        return;
    cudaSetDevice(ordinal);
    cudaStreamDestroy((cudaStream_t)stream);
}

static keyer_status stream_sync(int ordinal, void *stream, keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess)
        return fail(err, "cudaStreamSynchronize", e);
    return KEYER_OK;
}

static keyer_status copy_2d(int ordinal, void *dst, size_t dst_pitch, const void *src,
                            size_t src_pitch, size_t row_bytes, size_t rows, void *stream,
                            keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows,
                                      cudaMemcpyDefault, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return fail(err, "cudaMemcpy2DAsync", e);
    return KEYER_OK;
}

static keyer_status copy(int ordinal, void *dst, const void *src, size_t bytes, void *stream,
                         keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return fail(err, "cudaMemcpyAsync", e);
    return KEYER_OK;
}

static keyer_status event_create(int ordinal, void **event, keyer_error *err)
{
    *event = NULL;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return fail(err, "cudaEventCreateWithFlags", e);
    *event = ev;
    return KEYER_OK;
}

static void event_destroy(int ordinal, void *event)
{
    if (!event)
        return;
    cudaSetDevice(ordinal);
    cudaEventDestroy((cudaEvent_t)event);
}

static keyer_status event_record(int ordinal, void *event, void *stream, keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return fail(err, "cudaEventRecord", e);
    return KEYER_OK;
}

static keyer_status event_wait(int ordinal, void *stream, void *event, keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0);
    if (e != cudaSuccess)
        return fail(err, "cudaStreamWaitEvent", e);
    return KEYER_OK;
}

static keyer_status event_sync(int ordinal, void *event, keyer_error *err)
{
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    if (e != cudaSuccess)
        return fail(err, "cudaEventSynchronize", e);
    return KEYER_OK;
}

static keyer_status event_query(int ordinal, void *event, int *done, keyer_error *err)
{
    *done = 0;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) {
        /* not an error: never left as the thread's last error for a later launch check */
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            (void)cudaGetLastError();
        return KEYER_OK;
    }
    if (e != cudaSuccess)
        return fail(err, "cudaEventQuery", e);
    *done = 1;
    return KEYER_OK;
}

static keyer_status set_sync(int ordinal, int mode, keyer_error *err)
{
    static const unsigned flags[4] = {cudaDeviceScheduleAuto, cudaDeviceScheduleSpin,
                                      cudaDeviceScheduleYield, cudaDeviceScheduleBlockingSync};
    if (mode < 0 || mode > 3)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "device %d: synchronisation mode %d is not 0..3", ordinal, mode);
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    /* an initialised device takes the new flags too (they replace the old ones) */
    cudaError_t e = cudaSetDeviceFlags(flags[mode]);
    if (e != cudaSuccess)
        return fail(err, "cudaSetDeviceFlags", e);
    return KEYER_OK;
}

static keyer_status event_create_blocking(int ordinal, void **event, keyer_error *err)
{
    *event = NULL;
    if (use(ordinal, err))
        return err ? err->status : KEYER_STATUS_DEVICE;
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventBlockingSync);
    if (e != cudaSuccess)
        return fail(err, "cudaEventCreateWithFlags", e);
    *event = ev;
    return KEYER_OK;
}

static const kr_device_fns cuda_fns = {
    .name = "cuda",
    .count = count,
    .describe = describe,
    .caps = caps,
    .mem_info = mem_info,
    .alloc = alloc,
    .free = dfree,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_sync = stream_sync,
    .copy_2d = copy_2d,
    .copy = copy,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_wait = event_wait,
    .event_sync = event_sync,
    .event_query = event_query,
    .set_sync = set_sync,
    .event_create_blocking = event_create_blocking,
    .stream_create_urgent = stream_create_urgent,
};

const kr_device_fns *kr_device_cuda_table(void)
{
    return &cuda_fns;
}
