/* ADD, MUL and PRELU with NumPy-style broadcasting (shapes right-aligned, extent-1 axes
 * repeated), followed by the fused activation clamp. */
#include "nn/reference/common.h"

typedef enum { BIN_ADD, BIN_MUL, BIN_PRELU } bin_kind;

/* Strides (in elements) of tensor t broadcast against the output's rank and extents. */
static void broadcast_strides(const kr_op_ctx *c, const kr_tensor *t, int rank, const int *odims,
                              size_t *strides)
{
    int shift = rank - t->rank;
    size_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int td = d - shift;
        int extent = td >= 0 ? ref_dim(c, t, td) : 1;
        strides[d] = (extent == 1 && odims[d] != 1) ? 0 : s;
        s *= (size_t)extent;
    }
}

static void binary(const kr_op_ctx *c, bin_kind kind)
{
    const kr_tensor *at = ref_in(c, 0), *bt = ref_in(c, 1), *yt = ref_out(c, 0);
    const float *a = c->in[0], *b = c->in[1];
    float *y = c->out[0];
    int rank = yt->rank, odims[KR_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        odims[d] = ref_dim(c, yt, d);
    size_t sa[KR_MAX_DIMS], sb[KR_MAX_DIMS];
    broadcast_strides(c, at, rank, odims, sa);
    broadcast_strides(c, bt, rank, odims, sb);
    float lo, hi;
    kr_activation_range(c->node->activation, &lo, &hi);
    size_t total = ref_elements(c, yt);
    int idx[KR_MAX_DIMS] = {0};
    size_t ia = 0, ib = 0;
    for (size_t i = 0; i < total; i++) {
        float va = a[ia], vb = b[ib], v;
        switch (kind) {
        case BIN_ADD: v = va + vb; break;
        case BIN_MUL: v = va * vb; break;
        default: v = va >= 0 ? va : va * vb; break;
        }
        y[i] = ref_clamp(v, lo, hi);
        /* Advance the multi-index (last axis fastest). */
        for (int d = rank - 1; d >= 0; d--) {
            ia += sa[d];
            ib += sb[d];
            if (++idx[d] < odims[d])
                break;
            ia -= sa[d] * (size_t)odims[d];
            ib -= sb[d] * (size_t)odims[d];
            idx[d] = 0;
        }
    }
}

void kr_ref_add(const kr_op_ctx *c) { binary(c, BIN_ADD); }
void kr_ref_mul(const kr_op_ctx *c) { binary(c, BIN_MUL); }
void kr_ref_prelu(const kr_op_ctx *c) { binary(c, BIN_PRELU); }
