/* Element-wise activations: RELU, RELU6, HARD_SWISH, LOGISTIC (TFLite reference semantics;
 * LOGISTIC is computed as 1 / (1 + exp(-x)) in double, which agrees with TFLite's cut-offs at
 * 16.619 and -9 to float precision). */
#include <math.h>

#include "nn/reference/common.h"

#define UNARY(name, expr)                                                                          \
    void name(const kr_op_ctx *c)                                                                  \
    {                                                                                              \
        const float *x = c->in[0];                                                                 \
        float *y = c->out[0];                                                                      \
        size_t n = ref_elements(c, ref_out(c, 0));                                                 \
        for (size_t i = 0; i < n; i++) {                                                           \
            float v = x[i];                                                                        \
            y[i] = (expr);                                                                         \
        }                                                                                          \
    }

UNARY(kr_ref_relu, v > 0 ? v : 0.0f)
UNARY(kr_ref_relu6, v < 0 ? 0.0f : v > 6 ? 6.0f : v)
UNARY(kr_ref_hard_swish, v * ref_clamp(v + 3.0f, 0.0f, 6.0f) / 6.0f)
UNARY(kr_ref_logistic, (float)(1.0 / (1.0 + exp(-(double)v))))
