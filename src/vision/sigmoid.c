/* The mask logits' sigmoid: the CPU loop, and the registration of the CUDA one. */
#include "vision/sigmoid.h"

#include <math.h>

#ifdef KEYER_HAVE_CUDA
keyer_status kr_cuda_sigmoid(int ordinal, float *dst, const float *src, size_t count,
                             void *stream, keyer_error *err); /* cuda/sigmoid.cu */
#endif

void kr_sigmoid_cpu(float *dst, const float *src, size_t count, size_t stride)
{
    for (size_t k = 0; k < count; k++)
        dst[k] = 1.0f / (1.0f + expf(-src[k * stride]));
}

keyer_status kr_sigmoid_cuda(int ordinal, float *dst, const float *src, size_t count,
                             void *stream, keyer_error *err)
{
#ifdef KEYER_HAVE_CUDA
    return kr_cuda_sigmoid(ordinal, dst, src, count, stream, err);
#else
    (void)ordinal, (void)dst, (void)src, (void)count, (void)stream;
    return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                           "sigmoid of a CUDA mask: keyer was built without CUDA");
#endif
}
