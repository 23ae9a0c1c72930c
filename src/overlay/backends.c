/* The overlay renderers of this build (backend.h): the one place that knows whether keyer was
 * built with CUDA. */
#include "overlay/backend.h"
#include "overlay/knn_backend.h"

const kr_overlay_backend *kr_overlay_backend_for(keyer_memory_type memory)
{
    if (memory == KEYER_MEMORY_HOST)
        return &kr_overlay_cpu;
#ifdef KEYER_HAVE_CUDA
    if (memory == KEYER_MEMORY_CUDA)
        return &kr_overlay_cuda;
#endif
    return NULL;
}

const kr_knn_backend *kr_knn_backend_for(int cuda)
{
    if (cuda == 0)
        return &kr_knn_cpu;
#ifdef KEYER_HAVE_CUDA
    if (cuda == 1)
        return &kr_knn_cuda;
#endif
    return NULL;
}
