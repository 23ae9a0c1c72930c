/*
 * Bounds-checked access to an untrusted FlatBuffer (the TFLite model reader's base; the rules
 * are listed at the top of tflite.c). Every function checks what it reads against the file's
 * size and alignment rules and fails with BAD_DATA naming the object, the field and the byte
 * offset; nothing is cast in place, multi-byte values are assembled little-endian byte by byte,
 * so the buffer may have any alignment. The reader only borrows the bytes (fb_reader.p).
 *
 * Internal to src/nn. BAD(), UNSUPPORTED() and TRY() are short on purpose: include this header
 * only from the model reader's .c files.
 */
#ifndef KEYER_NN_FLATBUFFER_H
#define KEYER_NN_FLATBUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/status.h"

/** The file being read: @p n bytes at @p p (borrowed), @p name for messages, errors to @p err. */
typedef struct fb_reader {
    const uint8_t *p;
    size_t n;
    const char *name;
    keyer_error *err;
} fb_reader;

typedef struct fb_table {
    size_t pos;     /* byte offset of the table (its soffset) */
    size_t vt;      /* byte offset of its vtable */
    size_t vt_size; /* vtable bytes */
    size_t size;    /* inline table bytes */
} fb_table;

typedef struct fb_vec {
    size_t data; /* byte offset of element 0; 0 when the vector is absent */
    size_t len;  /* element count; 0 when absent */
} fb_vec;

/** Sets *r->err to "<r->name>: <message>" with @p status and returns @p status. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
keyer_status kr_fb_fail(const fb_reader *r, keyer_status status, const char *fmt, ...);

#define BAD(r, ...) kr_fb_fail((r), KEYER_STATUS_BAD_DATA, __VA_ARGS__)
#define UNSUPPORTED(r, ...) kr_fb_fail((r), KEYER_STATUS_UNSUPPORTED, __VA_ARGS__)
#define TRY(expr)                                                                                 \
    do {                                                                                          \
        keyer_status try_status_ = (expr);                                                        \
        if (try_status_ != KEYER_OK)                                                              \
            return try_status_;                                                                   \
    } while (0)

/* ---- raw reads: the caller has checked the span (fb_span_ok or a checked table/vector) ---- */

/** 1 when @p len bytes at @p pos lie inside the file. */
static inline int fb_span_ok(const fb_reader *r, size_t pos, size_t len)
{
    return pos <= r->n && len <= r->n - pos;
}

/** Little-endian 16 bits at @p pos. */
static inline uint16_t fb_u16(const fb_reader *r, size_t pos)
{
    const uint8_t *b = r->p + pos;
    return (uint16_t)(b[0] | (b[1] << 8));
}

/** Little-endian 32 bits at @p pos. */
static inline uint32_t fb_u32(const fb_reader *r, size_t pos)
{
    const uint8_t *b = r->p + pos;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/** The 32 bits as a two's complement int32 (without implementation-defined conversion). */
static inline int32_t fb_i32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) - INT32_MAX - 1;
}

/** The low byte as a signed 8-bit value. */
static inline int fb_sext8(uint64_t v)
{
    return (int)(v & 0xff) - ((v & 0x80) ? 256 : 0);
}

/** Element @p i (< v->len) of a checked vector of int32. */
static inline int32_t fb_vec_i32(const fb_reader *r, const fb_vec *v, size_t i)
{
    return fb_i32(fb_u32(r, v->data + 4 * i));
}

/* ---- checked access: each fails with BAD_DATA when the file breaks a rule --------------- */

/** Opens the table at byte @p pos: alignment, soffset, vtable and inline size checked.
 *  @p where names the object in messages ("operator 3"). */
keyer_status kr_fb_table_at(const fb_reader *r, size_t pos, const char *where, fb_table *t);
/** A scalar field of @p size bytes (1, 4 or 8), zero-extended, or @p def when absent. */
keyer_status kr_fb_scalar(const fb_reader *r, const fb_table *t, int id, size_t size,
                          uint64_t def, const char *where, const char *field, uint64_t *v);
/** Target of a reference field in *target, or 0 when absent. */
keyer_status kr_fb_ref(const fb_reader *r, const fb_table *t, int id, const char *where,
                       const char *field, size_t *target);
/** A vector field of @p elem-byte elements: *v is {0, 0} when absent; otherwise its length
 *  word and length * elem bytes lie inside the file. */
keyer_status kr_fb_vector(const fb_reader *r, const fb_table *t, int id, size_t elem,
                          const char *where, const char *field, fb_vec *v);
/** A string field: *s points at its bytes inside the file (NUL-terminated), or NULL if absent. */
keyer_status kr_fb_string(const fb_reader *r, const fb_table *t, int id, const char *where,
                          const char *field, const char **s, size_t *len);
/** Element @p i (< v->len) of a vector of tables. */
keyer_status kr_fb_vector_table(const fb_reader *r, const fb_vec *v, size_t i, const char *where,
                                fb_table *t);
/** Copies at most @p cap bytes of @p s, replacing non-printable bytes: safe for messages. */
void kr_fb_printable(const char *s, size_t len, char *buf, size_t cap);

#endif /* KEYER_NN_FLATBUFFER_H */
