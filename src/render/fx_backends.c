/* The frame-effect backends of this build (fx_backend.h): the one place that knows whether
 * keyer was built with CUDA. */
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
