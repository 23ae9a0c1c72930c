/* Bounds-checked FlatBuffer access (see flatbuffer.h). */
#include "nn/flatbuffer.h"

#include <stdarg.h>
#include <stdio.h>

keyer_status kr_fb_fail(const fb_reader *r, keyer_status status, const char *fmt, ...)
{
    char msg[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return keyer_error_set(r->err, status, "%s: %s", r->name, msg);
}

keyer_status kr_fb_table_at(const fb_reader *r, size_t pos, const char *where, fb_table *t)
{
    if (pos % 4 != 0 || !fb_span_ok(r, pos, 4))
        return BAD(r, "%s: table at byte %zu is misaligned or past the end of the file (%zu bytes)",
                   where, pos, r->n);
    long long vt = (long long)pos - (long long)fb_i32(fb_u32(r, pos));
    if (vt < 0 || vt % 2 != 0 || !fb_span_ok(r, (size_t)vt, 4))
        return BAD(r, "%s: the vtable of the table at byte %zu would be at byte %lld, which is "
                   "misaligned or outside the file", where, pos, vt);
    t->pos = pos;
    t->vt = (size_t)vt;
    t->vt_size = fb_u16(r, t->vt);
    t->size = fb_u16(r, t->vt + 2);
    if (t->vt_size < 4 || t->vt_size % 2 != 0 || !fb_span_ok(r, t->vt, t->vt_size))
        return BAD(r, "%s: the vtable at byte %zu has an invalid size of %zu bytes", where, t->vt,
                   t->vt_size);
    if (t->size < 4 || !fb_span_ok(r, pos, t->size))
        return BAD(r, "%s: the table at byte %zu claims %zu bytes, which do not fit in the file",
                   where, pos, t->size);
    return KEYER_OK;
}

/* Byte offset of field @p id (@p size bytes) of @p t in *out, or 0 when the field is absent. */
static keyer_status field_at(const fb_reader *r, const fb_table *t, int id, size_t size,
                             const char *where, const char *field, size_t *out)
{
    size_t entry = 4 + 2 * (size_t)id;
    *out = 0;
    if (entry + 2 > t->vt_size)
        return KEYER_OK;
    size_t off = fb_u16(r, t->vt + entry);
    if (off == 0)
        return KEYER_OK;
    if (off < 4 || off + size > t->size)
        return BAD(r, "%s: field '%s' (offset %zu, %zu bytes) lies outside its %zu-byte table",
                   where, field, off, size, t->size);
    if ((t->pos + off) % size != 0)
        return BAD(r, "%s: field '%s' at byte %zu is not aligned to %zu bytes", where, field,
                   t->pos + off, size);
    *out = t->pos + off;
    return KEYER_OK;
}

/* A scalar field of @p size bytes (1, 4 or 8), zero-extended, or @p def when absent. */
keyer_status kr_fb_scalar(const fb_reader *r, const fb_table *t, int id, size_t size,
                          uint64_t def, const char *where, const char *field, uint64_t *v)
{
    size_t pos;
    TRY(field_at(r, t, id, size, where, field, &pos));
    if (!pos) {
        *v = def;
        return KEYER_OK;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < size; i++)
        x |= (uint64_t)r->p[pos + i] << (8 * i);
    *v = x;
    return KEYER_OK;
}

/* Target of a reference field in *target, or 0 when absent. */
keyer_status kr_fb_ref(const fb_reader *r, const fb_table *t, int id, const char *where,
                       const char *field, size_t *target)
{
    size_t pos;
    TRY(field_at(r, t, id, 4, where, field, &pos));
    *target = 0;
    if (!pos)
        return KEYER_OK;
    uint32_t off = fb_u32(r, pos);
    if (off == 0 || off >= r->n - pos)
        return BAD(r, "%s: field '%s' at byte %zu points to byte %llu, outside the file (%zu "
                   "bytes)", where, field, pos, (unsigned long long)pos + off, r->n);
    *target = pos + off;
    return KEYER_OK;
}

static keyer_status vec_at(const fb_reader *r, size_t pos, size_t elem, const char *where,
                           const char *field, fb_vec *v)
{
    if (pos % 4 != 0 || !fb_span_ok(r, pos, 4))
        return BAD(r, "%s: vector '%s' at byte %zu is misaligned or past the end of the file",
                   where, field, pos);
    size_t len = fb_u32(r, pos);
    size_t data = pos + 4;
    if (len > (r->n - data) / elem)
        return BAD(r, "%s: vector '%s' at byte %zu claims %zu elements of %zu bytes, but only %zu "
                   "bytes remain in the file", where, field, pos, len, elem, r->n - data);
    v->data = data;
    v->len = len;
    return KEYER_OK;
}

keyer_status kr_fb_vector(const fb_reader *r, const fb_table *t, int id, size_t elem,
                          const char *where, const char *field, fb_vec *v)
{
    size_t target;
    v->data = 0;
    v->len = 0;
    TRY(kr_fb_ref(r, t, id, where, field, &target));
    if (!target)
        return KEYER_OK;
    return vec_at(r, target, elem, where, field, v);
}

/* A string field: *s points at its bytes inside the file (NUL-terminated), or NULL if absent. */
keyer_status kr_fb_string(const fb_reader *r, const fb_table *t, int id, const char *where,
                          const char *field, const char **s, size_t *len)
{
    fb_vec v;
    *s = NULL;
    *len = 0;
    TRY(kr_fb_vector(r, t, id, 1, where, field, &v));
    if (!v.data)
        return KEYER_OK;
    if (v.data + v.len >= r->n || r->p[v.data + v.len] != 0)
        return BAD(r, "%s: string '%s' at byte %zu (%zu bytes) has no NUL terminator inside the "
                   "file", where, field, v.data - 4, v.len);
    *s = (const char *)r->p + v.data;
    *len = v.len;
    return KEYER_OK;
}

/* Element @p i (< v->len) of a vector of tables. */
keyer_status kr_fb_vector_table(const fb_reader *r, const fb_vec *v, size_t i, const char *where,
                                fb_table *t)
{
    size_t pos = v->data + 4 * i;
    uint32_t off = fb_u32(r, pos);
    if (off == 0 || off >= r->n - pos)
        return BAD(r, "%s: its offset at byte %zu points to byte %llu, outside the file", where,
                   pos, (unsigned long long)pos + off);
    return kr_fb_table_at(r, pos + off, where, t);
}

/* Copies at most @p cap bytes of @p s, replacing non-printable bytes: safe for messages. */
void kr_fb_printable(const char *s, size_t len, char *buf, size_t cap)
{
    size_t n = 0;
    if (s)
        for (; n < len && n + 1 < cap && s[n]; n++)
            buf[n] = (s[n] >= 0x20 && s[n] < 0x7f) ? s[n] : '?';
    buf[n] = '\0';
}
