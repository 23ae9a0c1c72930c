#include "kt_tflite.h"

#include <stdlib.h>
#include <string.h>

typedef struct fb {
    uint8_t *p;
    size_t n, cap;
    int oom;
} fb;

static void grow(fb *b, size_t extra)
{
    if (b->oom || b->n + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + extra)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    memset(p + b->cap, 0, cap - b->cap);
    b->p = p;
    b->cap = cap;
}

/* Pads with zeros so that (n + bias) is a multiple of @p align; returns the new end. */
static size_t pad(fb *b, size_t align, size_t bias)
{
    while ((b->n + bias) % align) {
        grow(b, 1);
        if (b->oom)
            return b->n;
        b->p[b->n++] = 0;
    }
    return b->n;
}

static size_t put(fb *b, const void *data, size_t len)
{
    size_t pos = b->n;
    grow(b, len);
    if (b->oom)
        return pos;
    if (data && len)
        memcpy(b->p + b->n, data, len);
    else if (len)
        memset(b->p + b->n, 0, len);
    b->n += len;
    return pos;
}

static void set_le(fb *b, size_t pos, uint64_t v, int size)
{
    if (b->oom)
        return;
    for (int i = 0; i < size; i++)
        b->p[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static size_t put_u32(fb *b, uint32_t v)
{
    pad(b, 4, 0);
    size_t pos = put(b, NULL, 4);
    set_le(b, pos, v, 4);
    return pos;
}

/* uoffset at @p field_pos pointing at @p target (written later, so target > field_pos). */
static void ref(fb *b, size_t field_pos, size_t target)
{
    set_le(b, field_pos, (uint64_t)(target - field_pos), 4);
}

/* A table with scalar/ref fields; refs are 4-byte placeholders (size 4) patched with ref().
 * Returns the table position and each field's position in @p pos (0 when absent). */
static size_t table(fb *b, int n, const kt_field *f, size_t *pos)
{
    /* Inline layout: soffset, then fields in order, each aligned to its size. */
    size_t off[KT_MAX_FIELDS + 8], size = 4;
    for (int i = 0; i < n; i++) {
        off[i] = 0;
        if (!f[i].size)
            continue;
        size = (size + (size_t)f[i].size - 1) / (size_t)f[i].size * (size_t)f[i].size;
        off[i] = size;
        size += (size_t)f[i].size;
    }
    size_t vt_size = 4 + 2 * (size_t)n;
    pad(b, 2, 0);
    size_t vt = put(b, NULL, vt_size);
    set_le(b, vt, vt_size, 2);
    set_le(b, vt + 2, size, 2);
    for (int i = 0; i < n; i++)
        set_le(b, vt + 4 + 2 * (size_t)i, off[i], 2);
    pad(b, 8, 0);
    size_t t = put(b, NULL, size);
    set_le(b, t, (uint64_t)(uint32_t)(int32_t)(t - vt), 4);
    for (int i = 0; i < n; i++) {
        if (pos)
            pos[i] = f[i].size ? t + off[i] : 0;
        if (f[i].size)
            set_le(b, t + off[i], f[i].value, f[i].size);
    }
    return t;
}

static size_t vec(fb *b, size_t count, size_t elem, const void *data, size_t align)
{
    pad(b, align > 4 ? align : 4, 4);
    size_t pos = put_u32(b, (uint32_t)count);
    put(b, data, count * elem);
    return pos;
}

static size_t vec_i32(fb *b, int count, const int *v)
{
    size_t pos = put_u32(b, (uint32_t)count);
    for (int i = 0; i < count; i++)
        put_u32(b, (uint32_t)v[i]);
    return pos;
}

static size_t str(fb *b, const char *s)
{
    size_t len = strlen(s);
    size_t pos = put_u32(b, (uint32_t)len);
    put(b, s, len);
    put(b, NULL, 1);
    return pos;
}

static kt_field placeholder(int present)
{
    kt_field f = {present ? 4 : 0, 0};
    return f;
}

static void write_opcode(fb *b, size_t slot, const kt_op *op)
{
    int dep = op->code < 127 ? op->code : 127;
    kt_field f[4] = {{1, (uint64_t)(uint8_t)dep}, placeholder(op->custom != NULL), {0, 0},
                     {op->deprecated_only ? 0 : 4, (uint64_t)(uint32_t)op->code}};
    size_t pos[4];
    size_t t = table(b, 4, f, pos);
    ref(b, slot, t);
    if (op->custom)
        ref(b, pos[1], str(b, op->custom));
}

/* A SparseIndexVector table (Int32Vector, Uint16Vector or Uint8Vector) referenced from @p slot. */
static void write_index_vector(fb *b, size_t slot, int type, int n, const int *v)
{
    kt_field f[1] = {placeholder(1)};
    size_t pos[1];
    size_t t = table(b, 1, f, pos);
    ref(b, slot, t);
    size_t elem = type == 1 ? 4 : type == 2 ? 2 : 1;
    pad(b, 4, 0);
    size_t vp = put_u32(b, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        size_t at = put(b, NULL, elem);
        set_le(b, at, (uint64_t)(uint32_t)v[i], (int)elem);
    }
    ref(b, pos[0], vp);
}

static void write_sparsity(fb *b, size_t slot, const kt_sparsity *sp)
{
    kt_field f[3] = {placeholder(1), placeholder(sp->n_block > 0), placeholder(1)};
    size_t pos[3];
    size_t t = table(b, 3, f, pos);
    ref(b, slot, t);
    pad(b, 4, 0);
    ref(b, pos[0], vec_i32(b, sp->n_trav, sp->trav));
    if (sp->n_block)
        ref(b, pos[1], vec_i32(b, sp->n_block, sp->block_map));
    size_t dims = put_u32(b, (uint32_t)sp->n_dims);
    put(b, NULL, 4 * (size_t)sp->n_dims);
    ref(b, pos[2], dims);
    for (int i = 0; i < sp->n_dims; i++) {
        const kt_dim_meta *d = &sp->dims[i];
        int csr = d->format == 1;
        kt_field df[6] = {{1, (uint64_t)(uint8_t)d->format}, {4, (uint64_t)(uint32_t)d->dense_size},
                          {csr ? 1 : 0, (uint64_t)(uint8_t)d->seg_type}, placeholder(csr),
                          {csr ? 1 : 0, (uint64_t)(uint8_t)d->idx_type}, placeholder(csr)};
        size_t dpos[6];
        size_t dt = table(b, 6, df, dpos);
        ref(b, dims + 4 + 4 * (size_t)i, dt);
        if (csr) {
            write_index_vector(b, dpos[3], d->seg_type, d->n_seg, d->seg);
            write_index_vector(b, dpos[5], d->idx_type, d->n_idx, d->idx);
        }
    }
}

static void write_tensor(fb *b, size_t slot, const kt_tensor *x, const kt_sparsity *sparsity)
{
    kt_field f[7] = {placeholder(1), {1, (uint64_t)(uint8_t)x->type}, {4, (uint64_t)x->buffer},
                     placeholder(x->name != NULL), {0, 0}, {0, 0},
                     placeholder(sparsity != NULL)};
    size_t pos[7];
    size_t t = table(b, 7, f, pos);
    ref(b, slot, t);
    ref(b, pos[0], vec_i32(b, x->rank, x->dims));
    if (x->name)
        ref(b, pos[3], str(b, x->name));
    if (sparsity)
        write_sparsity(b, pos[6], sparsity);
}

static void write_op(fb *b, size_t slot, int index, const kt_op *op)
{
    kt_field f[6] = {{4, (uint64_t)index}, placeholder(1), placeholder(1),
                     {op->opt_type ? 1 : 0, (uint64_t)op->opt_type},
                     placeholder(op->opt_type != 0), placeholder(op->custom_options != NULL)};
    size_t pos[6];
    size_t t = table(b, 6, f, pos);
    ref(b, slot, t);
    ref(b, pos[1], vec_i32(b, op->n_in, op->in));
    ref(b, pos[2], vec_i32(b, op->n_out, op->out));
    if (op->opt_type)
        ref(b, pos[4], table(b, op->n_opt, op->opt, NULL));
    if (op->custom_options)
        ref(b, pos[5], vec(b, op->custom_options_len, 1, op->custom_options, 4));
}

uint8_t *kt_tflite_build(const kt_model *m, size_t *size)
{
    fb b = {0};
    size_t root = put(&b, NULL, 4);
    put(&b, "TFL3", 4);
    kt_field mf[5] = {{4, m->version ? m->version : 3}, placeholder(1), placeholder(1),
                      placeholder(m->description != NULL), placeholder(1)};
    size_t mpos[5];
    size_t model = table(&b, 5, mf, mpos);
    ref(&b, root, model);

    size_t codes = put_u32(&b, (uint32_t)m->n_ops);
    put(&b, NULL, 4 * (size_t)m->n_ops);
    ref(&b, mpos[1], codes);
    for (int i = 0; i < m->n_ops; i++)
        write_opcode(&b, codes + 4 + 4 * (size_t)i, &m->ops[i]);

    size_t subs = put_u32(&b, 1);
    put(&b, NULL, 4);
    ref(&b, mpos[2], subs);
    kt_field sf[4] = {placeholder(1), placeholder(1), placeholder(1), placeholder(1)};
    size_t spos[4];
    size_t sub = table(&b, 4, sf, spos);
    ref(&b, subs + 4, sub);
    size_t tensors = put_u32(&b, (uint32_t)m->n_tensors);
    put(&b, NULL, 4 * (size_t)m->n_tensors);
    ref(&b, spos[0], tensors);
    for (int i = 0; i < m->n_tensors; i++)
        write_tensor(&b, tensors + 4 + 4 * (size_t)i, &m->tensors[i],
                     m->sparsity ? m->sparsity[i] : NULL);
    ref(&b, spos[1], vec_i32(&b, m->n_inputs, m->inputs));
    ref(&b, spos[2], vec_i32(&b, m->n_outputs, m->outputs));
    size_t ops = put_u32(&b, (uint32_t)m->n_ops);
    put(&b, NULL, 4 * (size_t)m->n_ops);
    ref(&b, spos[3], ops);
    for (int i = 0; i < m->n_ops; i++)
        write_op(&b, ops + 4 + 4 * (size_t)i, i, &m->ops[i]);

    if (m->description)
        ref(&b, mpos[3], str(&b, m->description));

    size_t bufs = put_u32(&b, (uint32_t)m->n_buffers);
    put(&b, NULL, 4 * (size_t)m->n_buffers);
    ref(&b, mpos[4], bufs);
    for (int i = 0; i < m->n_buffers; i++) {
        const kt_buffer *kb = &m->buffers[i];
        kt_field bf[1] = {placeholder(kb->data != NULL)};
        size_t bpos[1];
        size_t t = table(&b, 1, bf, bpos);
        ref(&b, bufs + 4 + 4 * (size_t)i, t);
        if (kb->data)
            ref(&b, bpos[0], vec(&b, kb->size, 1, kb->data, 16));
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *size = b.n;
    return b.p;
}

uint32_t kt_nav_u32(const uint8_t *d, size_t pos)
{
    return (uint32_t)d[pos] | (uint32_t)d[pos + 1] << 8 | (uint32_t)d[pos + 2] << 16 |
           (uint32_t)d[pos + 3] << 24;
}

void kt_nav_set_u32(uint8_t *d, size_t pos, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        d[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
}

size_t kt_nav_root(const uint8_t *d)
{
    return kt_nav_u32(d, 0);
}

size_t kt_nav_field(const uint8_t *d, size_t table, int id)
{
    size_t vt = table - (size_t)(int32_t)kt_nav_u32(d, table);
    size_t vt_size = (size_t)(d[vt] | d[vt + 1] << 8);
    size_t e = 4 + 2 * (size_t)id;
    if (e + 2 > vt_size)
        return 0;
    size_t off = (size_t)(d[vt + e] | d[vt + e + 1] << 8);
    return off ? table + off : 0;
}

size_t kt_nav_vec(const uint8_t *d, size_t table, int id)
{
    size_t f = kt_nav_field(d, table, id);
    return f ? f + kt_nav_u32(d, f) : 0;
}

size_t kt_nav_elem(const uint8_t *d, size_t vec, uint32_t i)
{
    size_t slot = vec + 4 + 4 * (size_t)i;
    return slot + kt_nav_u32(d, slot);
}

size_t kt_nav_subgraph0(const uint8_t *d)
{
    return kt_nav_elem(d, kt_nav_vec(d, kt_nav_root(d), 2), 0);
}
