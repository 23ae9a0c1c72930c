/*
 * GPU memory and utilisation through NVML (libnvidia-ml.so.1), loaded at run time with
 * dlopen so that keyer needs no NVML at build time and runs where it is absent
 * (internal, prefix kr_).
 */
#ifndef KEYER_PIPELINE_NVML_H
#define KEYER_PIPELINE_NVML_H

#include <stdint.h>

typedef struct kr_nvml kr_nvml;

/** Opens NVML for device @p ordinal; NULL when the library, the driver or the device is
 *  missing (never an error: statistics then say "unknown"). */
kr_nvml *kr_nvml_open(int ordinal);

/** Samples the device: memory used/total in bytes and GPU utilisation in percent (the
 *  driver's last sampling period). Returns 0 on success. */
int kr_nvml_sample(kr_nvml *n, int64_t *used, int64_t *total, int *utilization);

/** Closes NVML; NULL accepted; sets *n NULL. */
void kr_nvml_close(kr_nvml **n);

#endif
