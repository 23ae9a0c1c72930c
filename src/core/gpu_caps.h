/*
 * What a CUDA device can do, as keyer's run-time choices see it (internal, prefix kr_): the
 * compute capability and the limits that kernels' launch configurations and the choice of
 * schedule read (shared memory per block and per multiprocessor, registers, threads, blocks,
 * cooperative launches, thread-block clusters), filled once per device at set-up by the device
 * table's caps slot (core/device.h; cuda/device.c queries the device's attributes) and then
 * read, never queried again per frame.
 *
 * Emulation. Setting the environment variable KEYER_CUDA_EMULATE_CC to an older compute
 * capability than the device's (for example 8.6 on an H100) makes keyer treat the device as
 * that class: the capability the choices test is the emulated one, and each limit is the
 * smaller of the device's and the class's (the numbers of the CUDA C++ Programming Guide's
 * table "Technical Specifications per Compute Capability"; kr_gpu_class_limits). So every code
 * path an RTX 3090 (8.6), an A100 (8.0), an L4/RTX 4090 (8.9) or a T4 (7.5) takes runs on the
 * H100. What it cannot emulate: the device still runs its own architecture's machine code
 * (sm_90 SASS on an H100; the sm_86 SASS is never executed), so instruction availability,
 * register allocation and speed are the device's; the multiprocessor count stays the
 * device's. scripts/check-cuda-resources.sh checks the other architectures' registers and
 * shared memory at build time.
 *
 * Pure C with no CUDA types: the parsing, the class table and the emulation are tested on the
 * CPU (tests/unit/test_gpu_caps.c).
 */
#ifndef KEYER_CORE_GPU_CAPS_H
#define KEYER_CORE_GPU_CAPS_H

#include <stddef.h>

#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The environment variable that asks for an emulated compute capability. */
#define KR_GPU_EMULATE_ENV "KEYER_CUDA_EMULATE_CC"

typedef struct kr_gpu_caps {
    int major, minor;           /* the compute capability the choices take (emulated or real) */
    int real_major, real_minor; /* the device's own */
    int emulated;               /* 1: major.minor is an emulated older class */
    int sms;                    /* multiprocessors (the device's, also when emulating) */
    size_t smem_block;          /* shared memory per block without opting in (bytes) */
    size_t smem_block_optin;    /* the most a kernel may opt in to per block (bytes) */
    size_t smem_sm;             /* per multiprocessor (bytes) */
    size_t smem_reserved_block; /* reserved by the system per resident block (bytes) */
    int regs_block, regs_sm;    /* 32-bit registers per block, per multiprocessor */
    int threads_block, threads_sm;
    int blocks_sm;              /* resident blocks per multiprocessor */
    int cooperative_launch;     /* grid-wide barriers (the persistent schedule) */
    int cluster_launch;         /* thread-block clusters (compute 9.0+; the cluster segment) */
    /* Hopper's warpgroup MMA for the nn cuda backend's patch convolutions (set by that backend
     * at set-up, kr_cuda_wgmma_mode; 0 here): 0 none (another class, an emulated one, code built
     * without sm_90a, or KEYER_CUDA_WGMMA=0), 1 for the layers its rule picks, 2 for every
     * such layer (KEYER_CUDA_WGMMA=all) */
    int wgmma;
    /* Whether the nn cuda backend's patch convolutions may stage a tile's results in shared
     * memory and store them as 16-byte vectors (conv_2d_tc.cu's tp_store_vec; set by that
     * backend at set-up, kr_cuda_vec_epilogue_mode; 0 here): 1, or 0 with
     * KEYER_CUDA_VEC_EPILOGUE=0 (the other epilogue, whose values are the same bit for bit:
     * the A/B switch of benchmarks and tests) */
    int vec_epilogue;
} kr_gpu_caps;

/* A compute-capability class keyer is built for and its limits (the Programming Guide's
 * table): 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 12.0. Fills @p out's major, minor and limits
 * (real_* = the class, emulated 0, sms 0). Returns 0 for a class not in the table. */
int kr_gpu_class_limits(int major, int minor, kr_gpu_caps *out);

/* Parses an emulation request: "8.6", "86" or "sm_86" (and "compute_86") into *major and
 * *minor. NULL or "" asks for nothing: *major = *minor = 0, KEYER_OK. Errors:
 * INVALID_ARGUMENT for anything else or a class not in the table, with a message naming
 * @p what (the variable or parameter) and the classes it accepts. */
keyer_status kr_gpu_emulate_parse(const char *spec, const char *what, int *major, int *minor,
                                  keyer_error *err);

/* @p real treated as compute capability @p major.@p minor: the capability replaced, every
 * limit the smaller of the device's and the class's, clusters only from 9.0; emulated = 1.
 * @p major = 0 copies @p real unchanged. Errors: INVALID_ARGUMENT when the class is not in
 * the table or is newer than the device (its instructions would be missing: only older
 * classes can be emulated). */
keyer_status kr_gpu_caps_emulate(const kr_gpu_caps *real, int major, int minor, kr_gpu_caps *out,
                                 keyer_error *err);

/* The emulation asked for by KR_GPU_EMULATE_ENV applied to @p real (kr_gpu_emulate_parse, then
 * kr_gpu_caps_emulate); unset or empty: a copy of @p real. Errors: INVALID_ARGUMENT, naming
 * the variable and its value. */
keyer_status kr_gpu_caps_from_env(const kr_gpu_caps *real, kr_gpu_caps *out, keyer_error *err);

/* One line describing @p c for logs: "compute 8.6 (emulated on a 9.0 device), 82 SMs, 99 KB
 * shared memory per block, 100 KB per SM, ...". */
void kr_gpu_caps_describe(const kr_gpu_caps *c, char *buf, size_t size);

/* Resident blocks per multiprocessor of a kernel of @p threads threads per block, @p regs
 * registers per thread and @p smem_bytes of shared memory per block (static + dynamic) under
 * @p caps's limits (threads, blocks, registers in units of 256 per warp, shared memory with the
 * system's reservation per block); 0 when one block does not fit. */
int kr_gpu_blocks_per_sm(const kr_gpu_caps *caps, int threads, int regs, size_t smem_bytes);

/* Features the run-time choices test (each from the capability the choices take). */
static inline int kr_gpu_cc(const kr_gpu_caps *c) { return c->major * 10 + c->minor; }
/* Thread-block clusters, distributed shared memory, cp.async.bulk, programmatic dependent
 * launch: compute 9.0 and newer, and the device says so. */
static inline int kr_gpu_has_clusters(const kr_gpu_caps *c)
{
    return kr_gpu_cc(c) >= 90 && c->cluster_launch;
}
/* Half-precision tensor cores through WMMA (16x16x16, float accumulation): compute 7.0+. */
static inline int kr_gpu_has_wmma_f16(const kr_gpu_caps *c) { return kr_gpu_cc(c) >= 70; }
/* mma.sync m16n8k16 with half inputs and float accumulation, ldmatrix and cp.async (the
 * tensor-core convolution, nn/cuda/conv_2d_tc.cu): compute 8.0+. */
static inline int kr_gpu_has_mma_sync(const kr_gpu_caps *c) { return kr_gpu_cc(c) >= 80; }

#ifdef __cplusplus
}
#endif

#endif
