/*
 * DENSIFY of the TFLite reader: a constant sparse tensor (TFLite's SparsityParameters) expanded
 * once at load into a dense constant, so that the graph the backends see has no DENSIFY node.
 *
 * The format (schema.fbs, SparsityParameters and DimensionMetadata; TFLite's
 * FormatConverter restated):
 *  - A tensor of rank R may be split into blocks along some of its dimensions: block_map[k]
 *    (k < B) names the original dimension that block dimension k divides; the block's size is
 *    the dense_size of the metadata of level R + k. The tensor is then seen as R + B
 *    "expanded" dimensions: dimension d < R has dims[d] / block (blocked) or dims[d] extents,
 *    dimension R + k the block size.
 *  - traversal_order (length R + B) lists the expanded dimensions from the outermost level to
 *    the innermost; keyer requires the block dimensions to come last, in order (level R + k is
 *    block dimension k), as TFLite's converter writes them and assumes.
 *  - dim_metadata[level] says how that level is stored: DENSE (every index 0..dense_size-1,
 *    dense_size equal to the dimension's extent) or SPARSE_CSR (for each position p of the
 *    level above, the indices array_indices[array_segments[p] .. array_segments[p + 1]) are the
 *    present ones). Segments and indices are Int32Vector, Uint16Vector or Uint8Vector tables.
 *  - The buffer holds the present values in traversal order. Everything absent is zero.
 *
 * Checks (the file is untrusted; every failure is BAD_DATA or UNSUPPORTED naming the tensor):
 * the vector lengths (traversal order R + B <= 2 * KR_MAX_DIMS, block map B, metadata R + B),
 * traversal_order a permutation with the block levels last, block_map distinct dimensions
 * < R, block sizes >= 1 dividing their dimension, DENSE sizes equal to the extents, each CSR
 * level's segments of length (positions above + 1), starting at 0, non-decreasing and ending
 * at the number of indices, indices strictly increasing inside a segment and below the extent
 * (so no element is written twice and the positions never exceed the element count), and the
 * buffer's byte count equal to the values the walk reads. The walk is iterative (no
 * recursion) and visits each stored value once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/flatbuffer.h"
#include "nn/tflite_internal.h"

#define MAX_LEVELS (2 * KR_MAX_DIMS)

enum { FMT_DENSE = 0, FMT_SPARSE_CSR = 1 };
enum { IDX_NONE = 0, IDX_INT32 = 1, IDX_UINT16 = 2, IDX_UINT8 = 3 };

/* One level of the traversal. */
typedef struct level {
    int dim;        /* expanded dimension it walks */
    int extent;     /* that dimension's size */
    int csr;        /* 1: SPARSE_CSR */
    int seg_type, idx_type;
    fb_vec seg, idx; /* CSR: the segments and indices vectors */
    size_t count;   /* positions of this level (entries below the level above) */
} level;

static size_t elem_size(int type)
{
    return type == IDX_INT32 ? 4 : type == IDX_UINT16 ? 2 : 1;
}

static uint32_t vec_get(const fb_reader *r, const fb_vec *v, int type, size_t i)
{
    switch (type) {
    case IDX_INT32: return fb_u32(r, v->data + 4 * i);
    case IDX_UINT16: return fb_u16(r, v->data + 2 * i);
    default: return r->p[v->data + i];
    }
}

/* A SparseIndexVector union member: its type tag at field @p type_id, its table at @p id;
 * the table's field 0 is the values vector. */
static keyer_status read_index_vector(const tfl_ctx *c, const fb_table *dm, int type_id, int id,
                                      const char *where, const char *what, int *type, fb_vec *v)
{
    const fb_reader *r = &c->r;
    uint64_t tag;
    size_t target;
    TRY(kr_fb_scalar(r, dm, type_id, 1, 0, where, what, &tag));
    TRY(kr_fb_ref(r, dm, id, where, what, &target));
    if (tag < IDX_INT32 || tag > IDX_UINT8)
        return BAD(r, "%s: %s has index vector type %llu (expected 1 int32, 2 uint16 or 3 uint8)",
                   where, what, (unsigned long long)tag);
    if (!target)
        return BAD(r, "%s: %s is missing", where, what);
    fb_table t;
    TRY(kr_fb_table_at(r, target, where, &t));
    *type = (int)tag;
    TRY(kr_fb_vector(r, &t, 0, elem_size(*type), where, what, v));
    if (*type == IDX_INT32)
        for (size_t i = 0; i < v->len; i++)
            if (fb_u32(r, v->data + 4 * i) > INT32_MAX)
                return BAD(r, "%s: %s entry %zu is negative", where, what, i);
    return KEYER_OK;
}

keyer_status kr_tfl_densify(const tfl_ctx *c, size_t op, const tfl_tensor *src,
                            const tfl_tensor *dst, uint8_t **out)
{
    const fb_reader *r = &c->r;
    *out = NULL;
    char where[160];
    snprintf(where, sizeof(where), "operator %zu (DENSIFY): sparse tensor '%s'", op, src->label);
    if (!src->sparsity)
        return UNSUPPORTED(r, "%s has no sparsity parameters; keyer densifies sparse constants "
                           "only", where);
    if (!src->data_len && src->deq_source < 0)
        return UNSUPPORTED(r, "%s is not a constant; keyer densifies constants only", where);
    if (src->type != dst->type)
        return BAD(r, "%s is %d but the output '%s' is type %d", where, src->type, dst->label,
                   dst->type);
    if (!kr_dims_equal(src->rank, src->dims, dst->rank, dst->dims))
        return BAD(r, "%s and the output '%s' differ in shape", where, dst->label);
    fb_table sp;
    fb_vec trav, bmap, meta;
    TRY(kr_fb_table_at(r, src->sparsity, where, &sp));
    TRY(kr_fb_vector(r, &sp, 0, 4, where, "traversal_order", &trav));
    TRY(kr_fb_vector(r, &sp, 1, 4, where, "block_map", &bmap));
    TRY(kr_fb_vector(r, &sp, 2, 4, where, "dim_metadata", &meta));
    const int R = src->rank;
    if (R < 1)
        return BAD(r, "%s has rank 0", where);
    if (bmap.len > (size_t)R || trav.len != (size_t)R + bmap.len || meta.len != trav.len)
        return BAD(r, "%s: traversal_order has %zu entries, block_map %zu and dim_metadata %zu "
                   "(expected rank %d + blocks, the same count, rank + blocks)", where, trav.len,
                   bmap.len, meta.len, R);
    const int L = (int)trav.len, B = (int)bmap.len;
    if (L > MAX_LEVELS)
        return UNSUPPORTED(r, "%s has %d levels; keyer handles at most %d", where, L, MAX_LEVELS);

    /* block map and block sizes */
    int blocked[KR_MAX_DIMS] = {0}, extent[MAX_LEVELS];
    level lv[MAX_LEVELS];
    memset(lv, 0, sizeof(lv));
    fb_table dm[MAX_LEVELS];
    for (int l = 0; l < L; l++) {
        char w[200];
        snprintf(w, sizeof(w), "%s, dim_metadata %d", where, l);
        TRY(kr_fb_vector_table(r, &meta, (size_t)l, w, &dm[l]));
    }
    for (int d = 0; d < R; d++)
        extent[d] = src->dims[d];
    for (int k = 0; k < B; k++) {
        int32_t d = fb_vec_i32(r, &bmap, (size_t)k);
        if (d < 0 || d >= R || blocked[d])
            return BAD(r, "%s: block_map entry %d is %d (a dimension below %d, each once)",
                       where, k, (int)d, R);
        uint64_t fmt, size;
        TRY(kr_fb_scalar(r, &dm[R + k], 0, 1, 0, where, "dim_metadata.format", &fmt));
        TRY(kr_fb_scalar(r, &dm[R + k], 1, 4, 0, where, "dim_metadata.dense_size", &size));
        int32_t bs = fb_i32((uint32_t)size);
        if ((fmt & 0xff) != FMT_DENSE || bs < 1 || src->dims[d] % bs)
            return BAD(r, "%s: block %d of dimension %d has size %d (format %d); it must be "
                       "dense and divide the dimension's %d", where, k, (int)d, (int)bs,
                       (int)(fmt & 0xff), src->dims[d]);
        blocked[d] = 1;
        extent[d] = src->dims[d] / bs;
        extent[R + k] = bs;
    }
    /* traversal order: a permutation with the block levels last, in order */
    unsigned seen = 0;
    for (int l = 0; l < L; l++) {
        int32_t d = fb_vec_i32(r, &trav, (size_t)l);
        if (d < 0 || d >= L || (seen & (1u << d)) || (l < R) != (d < R) || (l >= R && d != l))
            return BAD(r, "%s: traversal_order entry %d is %d (a permutation of the %d original "
                       "dimensions, then the %d block dimensions in order)", where, l, (int)d,
                       R, B);
        seen |= 1u << d;
        lv[l].dim = d;
        lv[l].extent = extent[d];
    }
    /* the levels: dense sizes, CSR segments and indices */
    size_t count = 1; /* positions of the level above */
    for (int l = 0; l < L; l++) {
        level *v = &lv[l];
        char w[200];
        snprintf(w, sizeof(w), "%s, level %d", where, l);
        uint64_t fmt, size;
        TRY(kr_fb_scalar(r, &dm[l], 0, 1, 0, w, "format", &fmt));
        TRY(kr_fb_scalar(r, &dm[l], 1, 4, 0, w, "dense_size", &size));
        v->count = count;
        if ((fmt & 0xff) == FMT_DENSE) {
            if (fb_i32((uint32_t)size) != v->extent)
                return BAD(r, "%s: dense size %d, but the dimension has %d", w,
                           (int)fb_i32((uint32_t)size), v->extent);
            count *= (size_t)v->extent; /* <= the element count: no overflow */
            continue;
        }
        if ((fmt & 0xff) != FMT_SPARSE_CSR)
            return BAD(r, "%s: format %d (0 DENSE or 1 SPARSE_CSR)", w, (int)(fmt & 0xff));
        if (l >= R)
            return BAD(r, "%s: a block dimension stored as SPARSE_CSR", w);
        v->csr = 1;
        TRY(read_index_vector(c, &dm[l], 2, 3, w, "array_segments", &v->seg_type, &v->seg));
        TRY(read_index_vector(c, &dm[l], 4, 5, w, "array_indices", &v->idx_type, &v->idx));
        if (v->seg.len != count + 1)
            return BAD(r, "%s: %zu segments for %zu positions (expected %zu)", w, v->seg.len,
                       count, count + 1);
        if (vec_get(r, &v->seg, v->seg_type, 0) != 0 ||
            vec_get(r, &v->seg, v->seg_type, count) != v->idx.len)
            return BAD(r, "%s: the segments must start at 0 and end at the %zu indices", w,
                       v->idx.len);
        for (size_t p = 0; p < count; p++) {
            uint32_t a = vec_get(r, &v->seg, v->seg_type, p);
            uint32_t b = vec_get(r, &v->seg, v->seg_type, p + 1);
            if (b < a)
                return BAD(r, "%s: segment %zu ends (%u) before it starts (%u)", w, p, b, a);
            for (uint32_t i = a; i < b; i++) {
                uint32_t x = vec_get(r, &v->idx, v->idx_type, i);
                if (x >= (uint32_t)v->extent ||
                    (i > a && x <= vec_get(r, &v->idx, v->idx_type, i - 1)))
                    return BAD(r, "%s: index %u of segment %zu is %u (below %d, increasing)", w,
                               i, p, x, v->extent);
            }
        }
        count = v->idx.len;
    }
    size_t esize = src->type == 1 /* FLOAT16 */ ? 2 : 4;
    if (src->data_len != count * esize)
        return BAD(r, "%s: the sparsity gives %zu values (%zu bytes) but buffer %u holds %zu "
                   "bytes", where, count, count * esize, src->buffer, src->data_len);

    uint8_t *dense = calloc(src->elements ? src->elements : 1, esize);
    if (!dense)
        return kr_fb_fail(r, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", where,
                          src->elements * esize);
    /* row-major strides of the original shape */
    size_t stride[KR_MAX_DIMS];
    stride[R - 1] = 1;
    for (int d = R - 2; d >= 0; d--)
        stride[d] = stride[d + 1] * (size_t)src->dims[d + 1];
    int level_of[KR_MAX_DIMS], block_of[KR_MAX_DIMS]; /* block_of: level of d's block, -1 */
    for (int l = 0; l < L; l++)
        if (lv[l].dim < R)
            level_of[lv[l].dim] = l;
    for (int d = 0; d < R; d++)
        block_of[d] = -1;
    for (int k = 0; k < B; k++)
        block_of[fb_vec_i32(r, &bmap, (size_t)k)] = R + k;

    /* Iterative walk, an odometer over the levels: cur[l] runs over [lo[l], hi[l]), the
     * positions of level l below the current position of level l - 1 (dense: parent * extent
     * + index; CSR: the parent's segment, index = indices[cur]). */
    size_t lo[MAX_LEVELS], hi[MAX_LEVELS], cur[MAX_LEVELS];
    size_t index[MAX_LEVELS];
    size_t value = 0;
    int l = 0;
    lo[0] = 0;
    hi[0] = lv[0].csr ? vec_get(r, &lv[0].seg, lv[0].seg_type, 1) : (size_t)lv[0].extent;
    cur[0] = 0;
    for (;;) {
        if (cur[l] >= hi[l]) {
            if (l == 0)
                break;
            cur[--l]++;
            continue;
        }
        index[l] = lv[l].csr ? vec_get(r, &lv[l].idx, lv[l].idx_type, cur[l]) : cur[l] - lo[l];
        if (l + 1 < L) {
            size_t parent = cur[l++];
            if (lv[l].csr) {
                lo[l] = vec_get(r, &lv[l].seg, lv[l].seg_type, parent);
                hi[l] = vec_get(r, &lv[l].seg, lv[l].seg_type, parent + 1);
            } else {
                lo[l] = parent * (size_t)lv[l].extent;
                hi[l] = lo[l] + (size_t)lv[l].extent;
            }
            cur[l] = lo[l];
            continue;
        }
        if (value >= count)
            break; /* cannot happen after the checks above */
        size_t flat = 0;
        for (int d = 0; d < R; d++) {
            size_t i = index[level_of[d]];
            if (block_of[d] >= 0)
                i = i * (size_t)lv[block_of[d]].extent + index[block_of[d]];
            flat += i * stride[d];
        }
        memcpy(dense + flat * esize, r->p + src->data + value * esize, esize);
        value++;
        cur[l]++;
    }
    *out = dense;
    return KEYER_OK;
}
