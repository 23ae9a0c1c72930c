/*
 * CONV_2D 3x3, stride 1, as Winograd F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016): Y = A^T [(G g G^T) . (B^T d B)] A per 4x4 output tile,
 * 6x6 input tile d and channel pair, with the sum over input channels done in the transformed
 * domain as 36 matrix products [tiles x C_in] x [C_in x C_out]. A dilated convolution is
 * d_h x d_w interleaved undilated ones: a tile's 4x4 outputs are d apart and so are its 6x6
 * inputs, so the same code handles every dilation.
 *
 * The tiles are processed in blocks small enough for the level-2 cache (the block's transformed
 * inputs, products and the weights of one of the 36 points), one block at a time per thread:
 * input transform, 36 products, output transform with bias and the fused activation clamp.
 * Threads take blocks from a shared counter. The weights are transformed once at create (in
 * double) and packed as [36][C_out / 16][C_in][16] for the product's 16-wide columns.
 *
 * Code paths: AVX-512F and AVX2+FMA (x86-64, picked at create from the CPU), portable C. The
 * transforms are written once on 16-float vectors (GCC vector extensions) and compiled into
 * each path; the products have one micro-kernel per path.
 *
 * Rounding: the transforms scale by at most 5 (input) and 8 (output); on the shipped ONNX
 * model the outputs agree with the direct convolution to a few 1e-6 relative.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WINO_X86 1
#else
#define WINO_X86 0
#endif

#include "keyer/alloc.h"
#include "nn/cpu/kernels.h"

#define TILES 36 /* 6 x 6 transformed points */
#define LANES 16

typedef float v16 __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

typedef void (*block_fn)(const kr_cpu_winograd *k, int block, float *v, float *m);

struct kr_cpu_winograd {
    int batch, ih, iw, cin, oh, ow, cout;
    int dh, dw, pt, pl;
    float lo, hi;
    int tpi;         /* tiles per image */
    int n_tiles;     /* batch * tpi */
    int block;       /* tiles per block (multiple of 8) */
    int n_blocks;
    int *tile_oy, *tile_ox; /* per tile of one image: its first output pixel */
    float *u;        /* transformed weights [36][cout / 16][cin][16] */
    float *bias;     /* [cout] */
    float *zeros;    /* cin zeros: the taps outside the input */
    int n_slots;     /* scratch sets, one per thread */
    size_t slot_floats;
    float *scratch;  /* per slot: V [36][block][cin], then M [36][block][cout] */
    float res_lo, res_hi; /* the fused ADD's clamp */
    int residual;    /* 1: an ADD is fused (y = clamp(clamp(conv) + residual)) */
    int n_src;       /* 1, or the fused concatenation's inputs */
    int src_ch[KR_MAX_NODE_INPUTS]; /* channels of each (multiples of 16, summing to cin) */
    block_fn run_block;
    /* per run */
    atomic_int next;
    const float *src[KR_MAX_NODE_INPUTS];
    const float *res;
    float *y;
};

/* ---- transforms (one 16-channel slice of one tile) --------------------------------------- */

#define LOAD(dst, p) memcpy(&(dst), (p), sizeof(v16))
#define STORE(p, src) memcpy((p), &(src), sizeof(v16))

/* B^T of F(4x4, 3x3) applied to 6 values. */
#define BT6(o, d0, d1, d2, d3, d4, d5)                                                            \
    do {                                                                                          \
        (o)[0] = 4.0f * (d0) - 5.0f * (d2) + (d4);                                                \
        (o)[1] = -4.0f * ((d1) + (d2)) + (d3) + (d4);                                             \
        (o)[2] = 4.0f * ((d1) - (d2)) - (d3) + (d4);                                              \
        (o)[3] = 2.0f * ((d3) - (d1)) - (d2) + (d4);                                              \
        (o)[4] = 2.0f * ((d1) - (d3)) - (d2) + (d4);                                              \
        (o)[5] = 4.0f * (d1) - 5.0f * (d3) + (d5);                                                \
    } while (0)

/* A^T of F(4x4, 3x3) applied to 6 values. */
#define AT6(o, m0, m1, m2, m3, m4, m5)                                                            \
    do {                                                                                          \
        (o)[0] = (m0) + (m1) + (m2) + (m3) + (m4);                                                \
        (o)[1] = (m1) - (m2) + 2.0f * ((m3) - (m4));                                              \
        (o)[2] = (m1) + (m2) + 4.0f * ((m3) + (m4));                                              \
        (o)[3] = (m1) - (m2) + 8.0f * ((m3) - (m4)) + (m5);                                       \
    } while (0)

/* One 16-channel slice: the taps at p[i] + ch, the 36 results at vt + ch + x * plane. Unrolled
 * by macros with constant indices so that the compiler keeps the values in registers. */
#define ICOL(j)                                                                                   \
    {                                                                                             \
        v16 d0, d1, d2, d3, d4, d5, o[6];                                                         \
        LOAD(d0, p[j] + ch);                                                                      \
        LOAD(d1, p[6 + (j)] + ch);                                                                \
        LOAD(d2, p[12 + (j)] + ch);                                                               \
        LOAD(d3, p[18 + (j)] + ch);                                                               \
        LOAD(d4, p[24 + (j)] + ch);                                                               \
        LOAD(d5, p[30 + (j)] + ch);                                                               \
        BT6(o, d0, d1, d2, d3, d4, d5);                                                           \
        t[j] = o[0];                                                                              \
        t[6 + (j)] = o[1];                                                                        \
        t[12 + (j)] = o[2];                                                                       \
        t[18 + (j)] = o[3];                                                                       \
        t[24 + (j)] = o[4];                                                                       \
        t[30 + (j)] = o[5];                                                                       \
    }
#define IROW(i)                                                                                   \
    {                                                                                             \
        v16 o[6];                                                                                 \
        BT6(o, t[6 * (i)], t[6 * (i) + 1], t[6 * (i) + 2], t[6 * (i) + 3], t[6 * (i) + 4],       \
            t[6 * (i) + 5]);                                                                      \
        STORE(vt + (size_t)(6 * (i) + 0) * plane + ch, o[0]);                                     \
        STORE(vt + (size_t)(6 * (i) + 1) * plane + ch, o[1]);                                     \
        STORE(vt + (size_t)(6 * (i) + 2) * plane + ch, o[2]);                                     \
        STORE(vt + (size_t)(6 * (i) + 3) * plane + ch, o[3]);                                     \
        STORE(vt + (size_t)(6 * (i) + 4) * plane + ch, o[4]);                                     \
        STORE(vt + (size_t)(6 * (i) + 5) * plane + ch, o[5]);                                     \
    }
#define R6(X) X(0) X(1) X(2) X(3) X(4) X(5)

static inline __attribute__((always_inline)) void input_slice(const float *const *p, int ch,
                                                              float *vt, size_t plane)
{
    v16 t[TILES];
    R6(ICOL)
    R6(IROW)
}

static inline __attribute__((always_inline)) void input_tile(const kr_cpu_winograd *k, int n,
                                                             int oy0, int ox0, float *vt,
                                                             size_t plane)
{
    ptrdiff_t pix[TILES]; /* input pixel of each tap, or -1 outside */
    for (int r = 0; r < 6; r++) {
        int iy = oy0 - k->pt + k->dh * r;
        for (int c = 0; c < 6; c++) {
            int ix = ox0 - k->pl + k->dw * c;
            pix[r * 6 + c] = iy >= 0 && iy < k->ih && ix >= 0 && ix < k->iw
                                 ? (ptrdiff_t)(((size_t)n * k->ih + iy) * k->iw + ix)
                                 : -1;
        }
    }
    for (int s = 0, base = 0; s < k->n_src; base += k->src_ch[s], s++) {
        const float *p[TILES];
        for (int i = 0; i < TILES; i++)
            p[i] = pix[i] >= 0 ? k->src[s] + (size_t)pix[i] * (size_t)k->src_ch[s] : k->zeros;
        for (int ch = 0; ch < k->src_ch[s]; ch += LANES)
            input_slice(p, ch, vt + base, plane);
    }
}

/* dst = min(max(v, lo), hi) per lane (a macro: vectors are not passed by value). */
#define CLAMP16(dst, v, lo, hi)                                                                   \
    do {                                                                                          \
        v16i below_ = (v) < (lo), above_ = (v) > (hi);                                            \
        v16i r_ = ((v16i)(v) & ~below_) | ((v16i)(lo) & below_);                                  \
        (dst) = (v16)((r_ & ~above_) | ((v16i)(hi) & above_));                                    \
    } while (0)

#define OCOL(j)                                                                                   \
    {                                                                                             \
        v16 m0, m1, m2, m3, m4, m5, o[4];                                                         \
        LOAD(m0, mt + (size_t)(j) * plane + co);                                                  \
        LOAD(m1, mt + (size_t)(6 + (j)) * plane + co);                                            \
        LOAD(m2, mt + (size_t)(12 + (j)) * plane + co);                                           \
        LOAD(m3, mt + (size_t)(18 + (j)) * plane + co);                                           \
        LOAD(m4, mt + (size_t)(24 + (j)) * plane + co);                                           \
        LOAD(m5, mt + (size_t)(30 + (j)) * plane + co);                                           \
        AT6(o, m0, m1, m2, m3, m4, m5);                                                           \
        s[j] = o[0];                                                                              \
        s[6 + (j)] = o[1];                                                                        \
        s[12 + (j)] = o[2];                                                                       \
        s[18 + (j)] = o[3];                                                                       \
    }
#define OPUT(j)                                                                                   \
    if ((j) < cols) {                                                                             \
        size_t at_ = (size_t)(ox0 + k->dw * (j)) * k->cout + co;                                  \
        v16 sum = o[j] + bias, val;                                                               \
        CLAMP16(val, sum, lo, hi);                                                                \
        if (res_row) {                                                                            \
            v16 res_;                                                                             \
            LOAD(res_, res_row + at_);                                                            \
            sum = val + res_;                                                                     \
            CLAMP16(val, sum, rlo, rhi);                                                          \
        }                                                                                         \
        STORE(row + at_, val);                                                                    \
    }
#define OROW(i)                                                                                   \
    if ((i) < rows) {                                                                             \
        v16 o[4];                                                                                 \
        AT6(o, s[6 * (i)], s[6 * (i) + 1], s[6 * (i) + 2], s[6 * (i) + 3], s[6 * (i) + 4],       \
            s[6 * (i) + 5]);                                                                      \
        size_t row_at_ = (((size_t)n * k->oh + (size_t)(oy0 + k->dh * (i))) * k->ow) *           \
                         (size_t)k->cout;                                                         \
        float *row = k->y + row_at_;                                                              \
        const float *res_row = k->res ? k->res + row_at_ : NULL;                                  \
        OPUT(0) OPUT(1) OPUT(2) OPUT(3)                                                           \
    }

static inline __attribute__((always_inline)) void output_tile(const kr_cpu_winograd *k, int n,
                                                              int oy0, int ox0, const float *mt,
                                                              size_t plane)
{
    v16 lo, hi, rlo, rhi;
    for (int l = 0; l < LANES; l++) {
        lo[l] = k->lo;
        hi[l] = k->hi;
        rlo[l] = k->res_lo;
        rhi[l] = k->res_hi;
    }
    int rows = 0, cols = 0;
    while (rows < 4 && oy0 + k->dh * rows < k->oh)
        rows++;
    while (cols < 4 && ox0 + k->dw * cols < k->ow)
        cols++;
    for (int co = 0; co < k->cout; co += LANES) {
        v16 s[24], bias;
        LOAD(bias, k->bias + co);
        R6(OCOL)
        OROW(0) OROW(1) OROW(2) OROW(3)
    }
}

/* Input transform of the block's tiles into V [36][block][cin] (rows past the last tile are left
 * as they are: their products are computed and never read). */
static inline __attribute__((always_inline)) void input_block(const kr_cpu_winograd *k, int b,
                                                              float *v)
{
    size_t plane = (size_t)k->block * k->cin;
    int first = b * k->block, end = first + k->block;
    if (end > k->n_tiles)
        end = k->n_tiles;
    for (int t = first; t < end; t++) {
        int n = t / k->tpi, l = t % k->tpi;
        input_tile(k, n, k->tile_oy[l], k->tile_ox[l], v + (size_t)(t - first) * k->cin, plane);
    }
}

static inline __attribute__((always_inline)) void output_block(const kr_cpu_winograd *k, int b,
                                                               const float *m)
{
    size_t plane = (size_t)k->block * k->cout;
    int first = b * k->block, end = first + k->block;
    if (end > k->n_tiles)
        end = k->n_tiles;
    for (int t = first; t < end; t++) {
        int n = t / k->tpi, l = t % k->tpi;
        output_tile(k, n, k->tile_oy[l], k->tile_ox[l], m + (size_t)(t - first) * k->cout, plane);
    }
}

/* ---- the products: M[x] = V[x] (block x cin) * U[x] (cin x cout), x = 0..35 --------------- */

static void block_generic(const kr_cpu_winograd *k, int b, float *v, float *m)
{
    input_block(k, b, v);
    int rows = k->block, cin = k->cin, cout = k->cout;
    for (int x = 0; x < TILES; x++) {
        const float *vx = v + (size_t)x * rows * cin;
        float *mx = m + (size_t)x * rows * cout;
        for (int p = 0; p < cout / LANES; p++) {
            const float *up = k->u + ((size_t)x * (cout / LANES) + p) * cin * LANES;
            for (int r = 0; r < rows; r++) {
                float acc[LANES] = {0};
                for (int c = 0; c < cin; c++)
                    for (int l = 0; l < LANES; l++)
                        acc[l] += vx[(size_t)r * cin + c] * up[c * LANES + l];
                memcpy(mx + (size_t)r * cout + p * LANES, acc, sizeof(acc));
            }
        }
    }
    output_block(k, b, m);
}

#if WINO_X86
__attribute__((target("avx2,fma"))) static void block_avx2(const kr_cpu_winograd *k, int b,
                                                           float *v, float *m)
{
    input_block(k, b, v);
    int rows = k->block, cin = k->cin, cout = k->cout;
    for (int x = 0; x < TILES; x++) {
        const float *vx = v + (size_t)x * rows * cin;
        float *mx = m + (size_t)x * rows * cout;
        for (int p = 0; p < cout / LANES; p++) {
            const float *up = k->u + ((size_t)x * (cout / LANES) + p) * cin * LANES;
            for (int r = 0; r < rows; r += 4) { /* 4 rows x 16 columns: 8 accumulators */
                const float *a = vx + (size_t)r * cin;
                __m256 c0a = _mm256_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a;
                __m256 c2a = c0a, c2b = c0a, c3a = c0a, c3b = c0a;
                for (int c = 0; c < cin; c++) {
                    __m256 ba = _mm256_loadu_ps(up + c * LANES);
                    __m256 bb = _mm256_loadu_ps(up + c * LANES + 8);
                    __m256 a0 = _mm256_broadcast_ss(a + c);
                    __m256 a1 = _mm256_broadcast_ss(a + cin + c);
                    __m256 a2 = _mm256_broadcast_ss(a + 2 * cin + c);
                    __m256 a3 = _mm256_broadcast_ss(a + 3 * cin + c);
                    c0a = _mm256_fmadd_ps(a0, ba, c0a);
                    c0b = _mm256_fmadd_ps(a0, bb, c0b);
                    c1a = _mm256_fmadd_ps(a1, ba, c1a);
                    c1b = _mm256_fmadd_ps(a1, bb, c1b);
                    c2a = _mm256_fmadd_ps(a2, ba, c2a);
                    c2b = _mm256_fmadd_ps(a2, bb, c2b);
                    c3a = _mm256_fmadd_ps(a3, ba, c3a);
                    c3b = _mm256_fmadd_ps(a3, bb, c3b);
                }
                float *o = mx + (size_t)r * cout + p * LANES;
                _mm256_storeu_ps(o, c0a);
                _mm256_storeu_ps(o + 8, c0b);
                _mm256_storeu_ps(o + cout, c1a);
                _mm256_storeu_ps(o + cout + 8, c1b);
                _mm256_storeu_ps(o + 2 * cout, c2a);
                _mm256_storeu_ps(o + 2 * cout + 8, c2b);
                _mm256_storeu_ps(o + 3 * cout, c3a);
                _mm256_storeu_ps(o + 3 * cout + 8, c3b);
            }
        }
    }
    output_block(k, b, m);
}

/* 8 rows x 16 columns per micro-tile; with two column panels, 8 x 32 (the broadcasts shared).
 * Accumulators are named variables (GCC at -O2 does not unroll loops over an array of them). */
#define R8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define DECL2(i) __m512 c##i##a = _mm512_setzero_ps(), c##i##b = _mm512_setzero_ps();
#define FMA2(i)                                                                                   \
    {                                                                                             \
        __m512 a_ = _mm512_set1_ps(a[(size_t)(i) * cin + c]);                                     \
        c##i##a = _mm512_fmadd_ps(a_, b0, c##i##a);                                               \
        c##i##b = _mm512_fmadd_ps(a_, b1, c##i##b);                                               \
    }
#define STORE2(i)                                                                                 \
    _mm512_storeu_ps(o + (size_t)(i) * cout, c##i##a);                                            \
    _mm512_storeu_ps(o + (size_t)(i) * cout + LANES, c##i##b);
#define DECL1(i) __m512 c##i = _mm512_setzero_ps();
#define FMA1(i) c##i = _mm512_fmadd_ps(_mm512_set1_ps(a[(size_t)(i) * cin + c]), b0, c##i);
#define STORE1(i) _mm512_storeu_ps(o + (size_t)(i) * cout, c##i);

__attribute__((target("avx512f"))) static void block_avx512(const kr_cpu_winograd *k, int b,
                                                            float *v, float *m)
{
    input_block(k, b, v);
    int rows = k->block, cin = k->cin, cout = k->cout, panels = cout / LANES;
    for (int x = 0; x < TILES; x++) {
        const float *vx = v + (size_t)x * rows * cin;
        float *mx = m + (size_t)x * rows * cout;
        const float *ux = k->u + (size_t)x * panels * cin * LANES;
        int p = 0;
        for (; p + 2 <= panels; p += 2) {
            const float *u0 = ux + (size_t)p * cin * LANES, *u1 = u0 + (size_t)cin * LANES;
            for (int r = 0; r < rows; r += 8) {
                const float *a = vx + (size_t)r * cin;
                R8(DECL2)
                for (int c = 0; c < cin; c++) {
                    __m512 b0 = _mm512_loadu_ps(u0 + c * LANES);
                    __m512 b1 = _mm512_loadu_ps(u1 + c * LANES);
                    R8(FMA2)
                }
                float *o = mx + (size_t)r * cout + p * LANES;
                R8(STORE2)
            }
        }
        for (; p < panels; p++) {
            const float *u0 = ux + (size_t)p * cin * LANES;
            for (int r = 0; r < rows; r += 8) {
                const float *a = vx + (size_t)r * cin;
                R8(DECL1)
                for (int c = 0; c < cin; c++) {
                    __m512 b0 = _mm512_loadu_ps(u0 + c * LANES);
                    R8(FMA1)
                }
                float *o = mx + (size_t)r * cout + p * LANES;
                R8(STORE1)
            }
        }
    }
    output_block(k, b, m);
}
#endif

/* ---- create / run ------------------------------------------------------------------------- */

static const kr_tensor *tensor_at(const kr_graph *g, int t)
{
    return (t >= 0 && t < g->n_tensors) ? &g->tensors[t] : NULL;
}

int kr_cpu_winograd_supports(const kr_graph *g, const kr_node *n)
{
    if (n->op != KR_OP_CONV_2D || n->n_inputs < 2 || n->n_outputs != 1)
        return 0;
    const kr_tensor *in = tensor_at(g, n->inputs[0]), *f = tensor_at(g, n->inputs[1]);
    const kr_tensor *out = tensor_at(g, n->outputs[0]);
    const kr_tensor *bias = n->n_inputs > 2 ? tensor_at(g, n->inputs[2]) : NULL;
    if (!in || !f || !out || kr_tensor_is_const(in) || kr_tensor_is_const(out) ||
        in->dtype != KR_DTYPE_F32 || out->dtype != KR_DTYPE_F32 || in->rank != 4 ||
        out->rank != 4 || !kr_tensor_is_const(f) || f->dtype != KR_DTYPE_F32 || f->rank != 4)
        return 0;
    if (bias && (!kr_tensor_is_const(bias) || bias->dtype != KR_DTYPE_F32 ||
                 kr_tensor_elements(bias) != (size_t)f->dims[0]))
        return 0;
    const kr_window_params *w = &n->p.window;
    int cin = in->dims[3], cout = out->dims[3];
    if (f->dims[0] != cout || f->dims[1] != 3 || f->dims[2] != 3 || f->dims[3] != cin ||
        w->stride_h != 1 || w->stride_w != 1 || w->dilation_h < 1 || w->dilation_w < 1 ||
        w->pad_top < 0 || w->pad_bottom < 0 || w->pad_left < 0 || w->pad_right < 0 ||
        cin % LANES != 0 || cout % LANES != 0 || in->dims[0] != out->dims[0])
        return 0;
    if (out->dims[1] != in->dims[1] + w->pad_top + w->pad_bottom - 2 * w->dilation_h ||
        out->dims[2] != in->dims[2] + w->pad_left + w->pad_right - 2 * w->dilation_w)
        return 0;
    /* Below 16x16 outputs the transforms and blocks cost more than they save. */
    return out->dims[1] * out->dims[2] >= 256;
}

void kr_cpu_winograd_destroy(kr_cpu_winograd **pk)
{
    if (!pk || !*pk)
        return;
    kr_cpu_winograd *k = *pk;
    free(k->tile_oy);
    free(k->tile_ox);
    keyer_free(NULL, k->u);
    free(k->bias);
    free(k->zeros);
    keyer_free(NULL, k->scratch);
    free(k);
    *pk = NULL;
}

/* U = G g G^T per (output, input) channel pair, in double. */
static void transform_weights(kr_cpu_winograd *k, const float *w)
{
    static const double G[6][3] = {{1.0 / 4, 0, 0},
                                   {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                   {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                   {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                   {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                   {0, 0, 1}};
    int cin = k->cin, panels = k->cout / LANES;
    for (int o = 0; o < k->cout; o++)
        for (int c = 0; c < cin; c++) {
            double g[3][3], t[6][3];
            for (int a = 0; a < 3; a++)
                for (int bb = 0; bb < 3; bb++)
                    g[a][bb] = w[(((size_t)o * 3 + a) * 3 + bb) * cin + c];
            for (int i = 0; i < 6; i++)
                for (int bb = 0; bb < 3; bb++)
                    t[i][bb] = G[i][0] * g[0][bb] + G[i][1] * g[1][bb] + G[i][2] * g[2][bb];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++) {
                    double u = G[j][0] * t[i][0] + G[j][1] * t[i][1] + G[j][2] * t[i][2];
                    size_t x = (size_t)i * 6 + j;
                    k->u[((x * panels + (size_t)(o / LANES)) * cin + c) * LANES + o % LANES] =
                        (float)u;
                }
        }
}

int kr_cpu_winograd_can_read_concat(const kr_graph *g, const kr_node *conv,
                                    const kr_node *concat)
{
    if (!kr_cpu_winograd_supports(g, conv) || concat->op != KR_OP_CONCATENATION ||
        concat->n_outputs != 1 || concat->outputs[0] != conv->inputs[0] ||
        concat->n_inputs < 1 || concat->n_inputs > KR_MAX_NODE_INPUTS)
        return 0;
    const kr_tensor *cat = &g->tensors[concat->outputs[0]];
    if (cat->rank != 4 || concat->p.concat.axis != 3)
        return 0;
    for (int i = 0; i < concat->n_inputs; i++) {
        int t = concat->inputs[i];
        if (t < 0 || t >= g->n_tensors)
            return 0;
        const kr_tensor *x = &g->tensors[t];
        if (kr_tensor_is_const(x) || x->dtype != KR_DTYPE_F32 || x->rank != 4 ||
            x->dims[0] != cat->dims[0] || x->dims[1] != cat->dims[1] ||
            x->dims[2] != cat->dims[2] || x->dims[3] % LANES != 0)
            return 0;
    }
    return 1;
}

keyer_status kr_cpu_winograd_create(const kr_graph *g, const kr_node *n, int batch, int threads,
                                    const kr_cpu_fusion *fusion, kr_cpu_winograd **out,
                                    keyer_error *err)
{
    *out = NULL;
    if (!kr_cpu_winograd_supports(g, n) ||
        (fusion && fusion->concat && !kr_cpu_winograd_can_read_concat(g, n, fusion->concat)))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "cpu backend: node %d (%s): not a Winograd convolution",
                               n->source_index, kr_op_name(n->op));
    kr_cpu_winograd *k = calloc(1, sizeof(*k));
    if (!k)
        goto oom;
    const kr_tensor *in = &g->tensors[n->inputs[0]], *o = &g->tensors[n->outputs[0]];
    const kr_window_params *w = &n->p.window;
    k->batch = batch;
    k->ih = in->dims[1];
    k->iw = in->dims[2];
    k->cin = in->dims[3];
    k->oh = o->dims[1];
    k->ow = o->dims[2];
    k->cout = o->dims[3];
    k->dh = w->dilation_h;
    k->dw = w->dilation_w;
    k->pt = w->pad_top;
    k->pl = w->pad_left;
    kr_activation_range(n->activation, &k->lo, &k->hi);
    if (fusion) {
        k->lo = fusion->lo > k->lo ? fusion->lo : k->lo;
        k->hi = fusion->hi < k->hi ? fusion->hi : k->hi;
    }
    k->res_lo = -INFINITY;
    k->res_hi = INFINITY;
    if (fusion && fusion->residual) {
        k->residual = 1;
        k->res_lo = fusion->res_lo;
        k->res_hi = fusion->res_hi;
    }
    k->n_src = 1;
    k->src_ch[0] = k->cin;
    if (fusion && fusion->concat) {
        k->n_src = fusion->concat->n_inputs;
        for (int i = 0; i < k->n_src; i++)
            k->src_ch[i] = g->tensors[fusion->concat->inputs[i]].dims[3];
    }

    /* Tiles: per phase (py, px) of the dilation, 4x4 outputs d apart. */
    int tpi = 0;
    for (int py = 0; py < k->dh && py < k->oh; py++)
        for (int px = 0; px < k->dw && px < k->ow; px++) {
            int hp = (k->oh - py + k->dh - 1) / k->dh, wp = (k->ow - px + k->dw - 1) / k->dw;
            tpi += ((hp + 3) / 4) * ((wp + 3) / 4);
        }
    k->tpi = tpi;
    k->n_tiles = tpi * (in->dims[0] * batch);
    k->tile_oy = malloc(sizeof(int) * (size_t)tpi);
    k->tile_ox = malloc(sizeof(int) * (size_t)tpi);
    if (!k->tile_oy || !k->tile_ox)
        goto oom;
    int t = 0;
    for (int py = 0; py < k->dh && py < k->oh; py++)
        for (int px = 0; px < k->dw && px < k->ow; px++) {
            int hp = (k->oh - py + k->dh - 1) / k->dh, wp = (k->ow - px + k->dw - 1) / k->dw;
            for (int ty = 0; ty < (hp + 3) / 4; ty++)
                for (int tx = 0; tx < (wp + 3) / 4; tx++) {
                    k->tile_oy[t] = py + k->dh * 4 * ty;
                    k->tile_ox[t] = px + k->dw * 4 * tx;
                    t++;
                }
        }

    /* Block: V and M of one block within about 1 MB, 8..128 tiles, at least 4 blocks per
     * thread when the layer has that many tiles. */
    int blk = (int)((1u << 18) / ((unsigned)TILES * (unsigned)(k->cin + k->cout)));
    int per_thread = k->n_tiles / (4 * (threads > 0 ? threads : 1));
    if (blk > per_thread)
        blk = per_thread;
    if (blk > 128)
        blk = 128;
    blk = blk / 8 * 8;
    if (blk < 8)
        blk = 8;
    k->block = blk;
    k->n_blocks = (k->n_tiles + blk - 1) / blk;
    k->n_slots = threads > 1 ? threads : 1;
    k->slot_floats = (size_t)TILES * (size_t)blk * (size_t)(k->cin + k->cout);
    k->scratch = keyer_calloc(NULL, k->slot_floats * sizeof(float) * (size_t)k->n_slots, 64);
    k->u = keyer_calloc(NULL, (size_t)TILES * (size_t)k->cin * (size_t)k->cout * sizeof(float),
                        64);
    k->bias = calloc((size_t)k->cout, sizeof(float));
    k->zeros = calloc((size_t)k->cin, sizeof(float));
    if (!k->scratch || !k->u || !k->bias || !k->zeros)
        goto oom;
    transform_weights(k, (const float *)g->tensors[n->inputs[1]].data);
    if (n->n_inputs > 2 && n->inputs[2] >= 0)
        memcpy(k->bias, g->tensors[n->inputs[2]].data, sizeof(float) * (size_t)k->cout);

    k->run_block = block_generic;
#if WINO_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        k->run_block = block_avx512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        k->run_block = block_avx2;
#endif
    *out = k;
    return KEYER_OK;
oom:
    kr_cpu_winograd_destroy(&k);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                           "cpu backend: node %d (CONV_2D): no memory for the Winograd kernel",
                           n->source_index);
}

static void slot_task(void *arg, size_t slot)
{
    kr_cpu_winograd *k = arg;
    float *v = k->scratch + slot * k->slot_floats;
    float *m = v + (size_t)TILES * (size_t)k->block * (size_t)k->cin;
    for (;;) {
        int b = atomic_fetch_add_explicit(&k->next, 1, memory_order_relaxed);
        if (b >= k->n_blocks)
            break;
        k->run_block(k, b, v, m);
    }
}

void kr_cpu_winograd_run(kr_cpu_winograd *k, const float *const *src, const float *residual,
                         float *y, pthreadpool_t pool)
{
    k->res = k->residual ? residual : NULL;
    for (int i = 0; i < k->n_src; i++)
        k->src[i] = src[i];
    k->y = y;
    atomic_store_explicit(&k->next, 0, memory_order_relaxed);
    if (pool && k->n_slots > 1)
        pthreadpool_parallelize_1d(pool, slot_task, k, (size_t)k->n_slots,
                                   PTHREADPOOL_FLAG_YIELD_WORKERS);
    else
        slot_task(k, 0);
}
