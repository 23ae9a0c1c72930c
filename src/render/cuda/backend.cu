/* The CUDA backend's table and state: device scratch that grows with the geometry, the
 * refinement's per-stream histories, the compositor's converted background. */
#include <cuda_runtime.h>
#include <stdlib.h>

#include "render/cuda/cuda.h"

static void cuda_state_destroy(void *state)
{
    kr_cuda_state *s = (kr_cuda_state *)state;
    if (!s)
        return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(s->device);
    for (int i = 0; i < KR_CUDA_SLOTS; i++)
        cudaFree(s->scratch[i]);
    if (s->history) {
        for (int i = 0; i < s->max_streams; i++) {
            cudaFree(s->history[i].mask);
            cudaFree(s->history[i].luma);
        }
        free(s->history);
    }
    cudaFree(s->bg_mem);
    if (prev >= 0)
        cudaSetDevice(prev);
    free(s);
}

static keyer_status cuda_state_create(const kr_fx_config *config, void **out, keyer_error *err)
{
    kr_cuda_state *s = (kr_cuda_state *)calloc(1, sizeof(*s));
    if (!s)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "CUDA effects: out of memory");
    s->device = -1;
    s->max_streams = config->max_streams > 0 ? config->max_streams : 1;
    s->history = (kr_cuda_history *)calloc((size_t)s->max_streams, sizeof(*s->history));
    if (!s->history) {
        free(s);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "CUDA effects: out of memory");
    }
    *out = s;
    return KEYER_OK;
}

extern "C" const kr_fx_backend kr_fx_cuda = {
    "cuda", cuda_state_create, cuda_state_destroy, kr_cuda_prepare, kr_cuda_refine,
    kr_cuda_composite,
};
