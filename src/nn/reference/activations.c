/*
 * Element-wise activations (TFLite reference semantics, docs/models.md section 2.4):
 *   RELU       y = max(0, x)
 *   RELU6      y = min(max(0, x), 6)
 *   HARD_SWISH y = x * min(6, max(0, x + 3)) / 6
 *   LOGISTIC   y = 1 / (1 + exp(-x)), evaluated in double and rounded to float once.
 * LOGISTIC choice: TFLite's reference kernel returns 1 for x > 16.619047 and exp(x) for x < -9;
 * the plain formula differs from those cut-offs by less than 1e-7 absolute (above 16.6 it gives
 * 1 - 6e-8, below -9 it differs from exp(x) by exp(2x) < 2e-8), so we keep the formula, which
 * is also what XNNPACK's sigmoid approximates.
 */
#include <math.h>

#include "nn/reference/common.h"

void kr_ref_relu(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void kr_ref_relu6(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++)
        y[i] = ref_clamp(x[i], 0.0f, 6.0f);
}

void kr_ref_hard_swish(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * ref_clamp(x[i] + 3.0f, 0.0f, 6.0f) / 6.0f;
}

void kr_ref_logistic(const kr_op_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    size_t n = ref_elements(c, ref_out(c, 0));
    for (size_t i = 0; i < n; i++)
        y[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
}
