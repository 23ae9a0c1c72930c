/* Copies between host and device planes for keyer's video I/O (CUDA builds only; internal to
 * src/io/cuda, the rest of io reaches it as kr_io_cuda()->copy_2d). */
#ifndef KEYER_IO_CUDA_TRANSFER_H
#define KEYER_IO_CUDA_TRANSFER_H

#include <stddef.h>

#include "keyer/status.h"

/**
 * 2-D copy of @p rows rows of @p row_bytes bytes, between any host/device pointers
 * (cudaMemcpy2D with cudaMemcpyDefault), complete when it returns (device-to-device copies too:
 * the legacy default stream is waited for). Errors: DEVICE.
 */
keyer_status kr_io_cuda_copy_2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                size_t row_bytes, size_t rows, keyer_error *err);

/**
 * The same copy queued on CUDA stream @p stream (a cudaStream_t / CUstream of the device's
 * primary context) without waiting: complete once kr_io_cuda_stream_sync(@p stream) returns.
 * Errors: DEVICE.
 */
keyer_status kr_io_cuda_copy_2d_async(void *dst, size_t dst_pitch, const void *src,
                                      size_t src_pitch, size_t row_bytes, size_t rows,
                                      void *stream, keyer_error *err);

/** Waits for the work queued on @p stream. Errors: DEVICE. */
keyer_status kr_io_cuda_stream_sync(void *stream, keyer_error *err);

#endif
