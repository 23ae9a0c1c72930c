/*
 * Every kernel a CUDA program runs, with its start and end on the GPU, written to a file when
 * the program exits: a CUPTI activity-tracing library that the CUDA driver loads into an
 * unchanged program (CUDA_INJECTION64_PATH=<this library>). Unlike Nsight Compute it does not
 * serialise or replay kernels, so the program runs at nearly its own speed and forms the same
 * batches. Used by scripts/bench-gpu-share.sh, which builds it:
 *   cc -shared -fPIC -O2 -I<cuda>/include gpu-kernel-times.c -L<cupti dir> -lcupti -o libkt.so
 * Environment: KEYER_KERNEL_TIMES, the output file (one line per kernel: start and end in ns of
 * the GPU's clock, then the kernel's (mangled) name, tab-separated). Errors go to stderr; the
 * traced program is not stopped by them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cupti.h>

#define KT_BUFFER_BYTES (8u << 20)

/* the kernel record of this CUPTI (CUDA 13: version 10; CUDA 12: version 9) */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kt_kernel;
#else
typedef CUpti_ActivityKernel9 kt_kernel;
#endif

static FILE *kt_out;

static void kt_check(CUptiResult r, const char *what)
{
    if (r != CUPTI_SUCCESS) {
        const char *s = NULL;
        cuptiGetResultString(r, &s);
        fprintf(stderr, "gpu-kernel-times: %s: %s\n", what, s ? s : "unknown CUPTI error");
    }
}

static void CUPTIAPI kt_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, KT_BUFFER_BYTES);
    *size = *buffer ? KT_BUFFER_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

static void CUPTIAPI kt_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (buffer && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
            rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const kt_kernel *k = (const kt_kernel *)rec;
        if (kt_out)
            fprintf(kt_out, "%llu\t%llu\t%s\n", (unsigned long long)k->start,
                    (unsigned long long)k->end, k->name ? k->name : "?");
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "gpu-kernel-times: %zu records dropped\n", dropped);
    free(buffer);
}

static void kt_finish(void)
{
    kt_check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flushing the records");
    if (kt_out) {
        fclose(kt_out);
        kt_out = NULL;
    }
}

/* Called by the CUDA driver when it loads the library named by CUDA_INJECTION64_PATH. */
int InitializeInjection(void);
int InitializeInjection(void)
{
    const char *path = getenv("KEYER_KERNEL_TIMES");
    kt_out = fopen(path ? path : "kernel-times.tsv", "w");
    if (!kt_out) {
        perror("gpu-kernel-times: KEYER_KERNEL_TIMES");
        return 0;
    }
    kt_check(cuptiActivityRegisterCallbacks(kt_buffer_requested, kt_buffer_completed),
             "registering the buffers");
    kt_check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "tracing kernels");
    atexit(kt_finish);
    return 1;
}
