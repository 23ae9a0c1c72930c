/* Registration of the pipeline's CUDA mask sigmoid (pipeline/device.h). */
#include "pipeline/device.h"

#ifdef KEYER_HAVE_CUDA
keyer_status kr_pipeline_cuda_sigmoid(int ordinal, float *dst, const float *src, size_t count,
                                      void *stream, keyer_error *err); /* cuda/sigmoid.cu */
#endif

kr_pipeline_sigmoid_fn kr_pipeline_sigmoid_cuda(void)
{
#ifdef KEYER_HAVE_CUDA
    return kr_pipeline_cuda_sigmoid;
#else
    return NULL;
#endif
}
