/* The frame-effect backends of this build (fx_backend.h), the one place that knows whether
 * keyer was built with CUDA, and the per-object backend states. */
#include "render/fx_backend.h"

const kr_fx_backend *kr_fx_backend_for(keyer_memory_type memory)
{
    if (memory == KEYER_MEMORY_HOST)
        return &kr_fx_cpu;
#ifdef KEYER_HAVE_CUDA
    if (memory == KEYER_MEMORY_CUDA)
        return &kr_fx_cuda;
#endif
    return NULL;
}

keyer_status kr_fx_state(void *slots[KR_FX_BACKENDS], keyer_memory_type memory,
                         const kr_fx_config *config, const kr_fx_backend **backend,
                         void **state, keyer_error *err)
{
    const kr_fx_backend *b = kr_fx_backend_for(memory);
    if (!b || (unsigned)memory >= KR_FX_BACKENDS)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s memory is not supported by this build of keyer%s",
                               memory == KEYER_MEMORY_CUDA ? "CUDA" : "this kind of",
                               memory == KEYER_MEMORY_CUDA ? " (built without CUDA)" : "");
    if (!slots[memory]) {
        keyer_status st = b->state_create(config, &slots[memory], err);
        if (st)
            return st;
    }
    *backend = b;
    *state = slots[memory];
    return KEYER_OK;
}

void kr_fx_states_destroy(void *slots[KR_FX_BACKENDS])
{
    for (int m = 0; m < KR_FX_BACKENDS; m++) {
        const kr_fx_backend *b = kr_fx_backend_for((keyer_memory_type)m);
        if (b && slots[m])
            b->state_destroy(slots[m]);
        slots[m] = NULL;
    }
}
