/*
 * keyer's one view of a compute device (internal, prefix kr_): memory, copies, streams and
 * events behind a small table of function pointers, so that code outside the backends holds
 * no CUDA types and no #ifdef. kr_device_cuda() returns the CUDA table in CUDA builds
 * (src/core/cuda/device.c) and NULL otherwise. Every call that touches a device first makes
 * @p ordinal current on the calling thread, so any worker may call any slot.
 *
 * Streams and events are opaque pointers owned by the caller: what a *_create slot makes,
 * the matching *_destroy slot frees. Events follow ggml's pattern: the producer records an
 * event on its stream after the work that fills a buffer (event_record); a consumer on
 * another stream makes its later work wait for it (event_wait) without blocking the host;
 * the host waits only where it reads the data itself (event_sync or stream_sync).
 */
#ifndef KEYER_CORE_DEVICE_H
#define KEYER_CORE_DEVICE_H

#include <stddef.h>

#include "core/gpu_caps.h"
#include "keyer/frame.h"
#include "keyer/status.h"

typedef struct kr_device_fns {
    const char *name; /* "cuda" */

    /* Number of usable devices; 0 when the driver is missing or fails. Never fails. */
    int (*count)(void);

    /* Name and total memory of device @p ordinal. Errors: DEVICE. */
    keyer_status (*describe)(int ordinal, char *name, size_t name_size, size_t *total_bytes,
                             keyer_error *err);

    /* The capabilities and limits of device @p ordinal from its attributes (gpu_caps.h), into
     * @p caps; with @p emulate, the emulated older class that KEYER_CUDA_EMULATE_CC asks for
     * applied (kr_gpu_caps_from_env). Queried on each call: callers fill their struct once at
     * set-up. Errors: DEVICE, INVALID_ARGUMENT (a bad KEYER_CUDA_EMULATE_CC, named). */
    keyer_status (*caps)(int ordinal, int emulate, kr_gpu_caps *caps, keyer_error *err);

    /* Free and total memory of device @p ordinal. Errors: DEVICE. */
    keyer_status (*mem_info)(int ordinal, size_t *free_bytes, size_t *total_bytes,
                             keyer_error *err);

    /* Device memory of @p bytes on @p ordinal. Errors: OUT_OF_MEMORY, DEVICE. */
    keyer_status (*alloc)(int ordinal, size_t bytes, void **ptr, keyer_error *err);
    /* Frees memory from alloc; NULL accepted. */
    void (*free)(int ordinal, void *ptr);
    /* Page-locked host memory of @p bytes for device @p ordinal: copies to and from it are
     * asynchronous (a copy to pageable memory waits for the stream). Errors: OUT_OF_MEMORY,
     * DEVICE. */
    keyer_status (*host_alloc)(int ordinal, size_t bytes, void **ptr, keyer_error *err);
    /* Frees memory from host_alloc; NULL accepted. */
    void (*host_free)(int ordinal, void *ptr);

    /* A non-blocking stream on @p ordinal. Errors: DEVICE. */
    keyer_status (*stream_create)(int ordinal, void **stream, keyer_error *err);
    /* Destroys a stream; NULL accepted. */
    void (*stream_destroy)(int ordinal, void *stream);
    /* Waits for all work queued on @p stream. Errors: DEVICE (with the failure's text). */
    keyer_status (*stream_sync)(int ordinal, void *stream, keyer_error *err);

    /* Asynchronous 2-D copy on @p stream between any host/device pointers.
     * Errors: DEVICE. */
    keyer_status (*copy_2d)(int ordinal, void *dst, size_t dst_pitch, const void *src,
                            size_t src_pitch, size_t row_bytes, size_t rows, void *stream,
                            keyer_error *err);

    /* Asynchronous 1-D copy of @p bytes on @p stream between any host/device pointers.
     * Errors: DEVICE. */
    keyer_status (*copy)(int ordinal, void *dst, const void *src, size_t bytes, void *stream,
                         keyer_error *err);

    /* An event on @p ordinal (timing disabled). Errors: DEVICE. */
    keyer_status (*event_create)(int ordinal, void **event, keyer_error *err);
    /* Destroys an event; NULL accepted. */
    void (*event_destroy)(int ordinal, void *event);
    /* Records @p event after the work queued so far on @p stream. Errors: DEVICE. */
    keyer_status (*event_record)(int ordinal, void *event, void *stream, keyer_error *err);
    /* Work queued on @p stream after this call waits for @p event; the host does not wait.
     * Errors: DEVICE. */
    keyer_status (*event_wait)(int ordinal, void *stream, void *event, keyer_error *err);
    /* The host waits for @p event. Errors: DEVICE (with the failure's text). */
    keyer_status (*event_sync)(int ordinal, void *event, keyer_error *err);
    /* Whether the work before @p event is done, without waiting: *@p done 1 when it is (or
     * the event was never recorded), 0 while it runs. Errors: DEVICE (with the failure's
     * text; *@p done is then 0). */
    keyer_status (*event_query)(int ordinal, void *event, int *done, keyer_error *err);

    /* How host threads wait for device @p ordinal (stream_sync and the device's own waits):
     * 0 CUDA's default, 1 spin, 2 spin and yield, 3 block on an OS primitive. The device's
     * setting: every user of the device in the process gets it from then on. Errors: DEVICE.
     * May be NULL in a table (then the default stays). */
    keyer_status (*set_sync)(int ordinal, int mode, keyer_error *err);
    /* As event_create, but event_sync on it blocks the thread (sleeps) until the event
     * completes instead of spinning. Errors: DEVICE. May be NULL in a table. */
    keyer_status (*event_create_blocking)(int ordinal, void **event, keyer_error *err);
    /* As stream_create, with the device's highest stream priority: while its kernels' blocks
     * and other streams' wait for room on the device, the device starts its blocks first (it
     * does not stop blocks already running). For the shared model stages that every stream's
     * frames queue for and whose host thread waits for each run. Errors: DEVICE. May be NULL
     * in a table (then stream_create). */
    keyer_status (*stream_create_urgent)(int ordinal, void **stream, keyer_error *err);
} kr_device_fns;

/** The CUDA table, or NULL when keyer was built without CUDA. */
const kr_device_fns *kr_device_cuda(void);

/**
 * Allocates device planes for a @p format frame of @p width x @p height on @p ordinal (rows
 * aligned to 256 bytes, one allocation) and makes @p frame describe them (memory CUDA,
 * device @p ordinal; the buffer frees the memory with the last reference).
 * Errors: INVALID_ARGUMENT, OUT_OF_MEMORY, DEVICE.
 */
keyer_status kr_device_frame_alloc(const kr_device_fns *dev, int ordinal, keyer_frame *frame,
                                   keyer_pixel_format format, int width, int height,
                                   keyer_error *err);

/**
 * Copies the pixels of @p src into @p dst (same format and size, any memories) on
 * @p stream and waits for the copy. Metadata is copied. Host-to-host copies need no device
 * (@p dev may then be NULL). Errors: INVALID_ARGUMENT (mismatch), DEVICE.
 */
keyer_status kr_device_frame_copy(const kr_device_fns *dev, int ordinal, keyer_frame *dst,
                                  const keyer_frame *src, void *stream, keyer_error *err);

/**
 * As kr_device_frame_copy(), but a copy that involves device memory is only queued on
 * @p stream: the host does not wait, and @p src must stay as it is until the copy is done
 * (record an event after it). Host-to-host copies are done at once. Metadata is copied.
 * Errors: as kr_device_frame_copy().
 */
keyer_status kr_device_frame_copy_async(const kr_device_fns *dev, int ordinal, keyer_frame *dst,
                                        const keyer_frame *src, void *stream, keyer_error *err);

#endif
