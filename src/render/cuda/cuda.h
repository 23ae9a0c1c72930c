/*
 * The CUDA backend of the frame effects: its state (device scratch, temporal histories, the
 * converted background) and the entry point of each operation, one .cu file per operation
 * beside the CPU file of the same name (render/cpu/); the table in backend.cu, the helpers the
 * operations share in common.cu. C linkage: included by the .cu files; the rest of keyer sees
 * only kr_fx_cuda (render/fx_backend.h).
 */
#ifndef KEYER_RENDER_CUDA_CUDA_H
#define KEYER_RENDER_CUDA_CUDA_H

#include <stddef.h>

#include "render/fx_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Device scratch slots; each operation uses its own. */
enum { KR_CUDA_SLOTS = 16 };

typedef struct kr_cuda_history {
    float *mask; /* device: previous output mask on the grid */
    float *luma; /* device: previous grid luma */
    size_t cells;
} kr_cuda_history;

typedef struct kr_cuda_state {
    int device;                  /* the CUDA device the scratch lives on */
    void *scratch[KR_CUDA_SLOTS];
    size_t scratch_size[KR_CUDA_SLOTS];
    int max_streams;
    kr_cuda_history *history;    /* host array of max_streams */
    /* composite: the background converted to the frame's format and size */
    void *bg_mem;
    size_t bg_size;
    kr_src bg_src;
} kr_cuda_state;

/** Device scratch slot @p slot of at least @p bytes (grown when needed; contents lost).
 *  Errors: OUT_OF_MEMORY. */
keyer_status kr_cuda_scratch(kr_cuda_state *s, int slot, size_t bytes, void **out,
                             keyer_error *err);

/** Makes @p device current and checks it is the state's. Errors: DEVICE, INVALID_ARGUMENT. */
keyer_status kr_cuda_enter(kr_cuda_state *s, int device, keyer_error *err);

/** DEVICE error naming @p what if the last launch failed (cudaGetLastError). */
keyer_status kr_cuda_check(const char *what, keyer_error *err);

keyer_status kr_cuda_prepare(void *state, const kr_prepare_job *job, keyer_error *err);
keyer_status kr_cuda_refine(void *state, const kr_refine_job *job, keyer_error *err);
keyer_status kr_cuda_composite(void *state, const kr_composite_job *job, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif
