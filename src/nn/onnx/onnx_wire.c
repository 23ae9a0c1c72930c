/*
 * A walk over the protobuf wire format of an ONNX file before protobuf-c parses it: protobuf-c
 * recurses once per nested message with no limit (a hostile file nesting graphs in attributes
 * would exhaust the stack), and says only "failed" on bad input. This walk bounds the nesting,
 * and names the message, field and byte offset of a truncation or a wrong wire type.
 */
#include <stdint.h>
#include <stdio.h>

#include "nn/onnx/onnx_internal.h"

/* Deeper than any real model (model > graph > node > attribute > graph ... or nested types). */
#define MAX_DEPTH 48

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

typedef struct walk {
    const uint8_t *base;
    const char *name;
    keyer_error *err;
} walk;

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* The wire type a non-packed field of @p type has. */
static int wire_type_of(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return WIRE_FIXED32;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return WIRE_FIXED64;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return WIRE_LEN;
    default:
        return WIRE_VARINT;
    }
}

static keyer_status fail(const walk *w, const uint8_t *at, const ProtobufCMessageDescriptor *d,
                         const char *what)
{
    return keyer_error_set(w->err, KEYER_STATUS_BAD_DATA,
                           "%s: not a valid ONNX model: %s in a %s at byte %zu", w->name, what,
                           d->short_name, (size_t)(at - w->base));
}

static keyer_status walk_message(const walk *w, const uint8_t *p, const uint8_t *end,
                                 const ProtobufCMessageDescriptor *d, int depth)
{
    if (depth > MAX_DEPTH)
        return keyer_error_set(w->err, KEYER_STATUS_BAD_DATA,
                               "%s: not a valid ONNX model: messages nested more than %d deep "
                               "at byte %zu", w->name, MAX_DEPTH, (size_t)(p - w->base));
    while (p < end) {
        const uint8_t *at = p;
        uint64_t key, v;
        if (!read_varint(&p, end, &key))
            return fail(w, at, d, "a truncated field key");
        int wire = (int)(key & 7);
        uint64_t number = key >> 3;
        if (number == 0 || number > 0x1fffffff)
            return fail(w, at, d, "field number 0 or out of range");
        const ProtobufCFieldDescriptor *fd =
            protobuf_c_message_descriptor_get_field(d, (unsigned)number);
        if (fd) {
            int want = wire_type_of(fd->type);
            int packed = fd->label == PROTOBUF_C_LABEL_REPEATED && want != WIRE_LEN &&
                         wire == WIRE_LEN;
            if (wire != want && !packed) {
                char what[200];
                snprintf(what, sizeof what, "field '%s' with wire type %d (expected %d)",
                         fd->name, wire, want);
                return fail(w, at, d, what);
            }
        }
        switch (wire) {
        case WIRE_VARINT:
            if (!read_varint(&p, end, &v))
                return fail(w, at, d, "a truncated varint");
            break;
        case WIRE_FIXED64:
            if (end - p < 8)
                return fail(w, at, d, "a truncated 64-bit field");
            p += 8;
            break;
        case WIRE_FIXED32:
            if (end - p < 4)
                return fail(w, at, d, "a truncated 32-bit field");
            p += 4;
            break;
        case WIRE_LEN:
            if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return fail(w, at, d, "a length-delimited field running past its end");
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                keyer_status st = walk_message(w, p, p + v, fd->descriptor, depth + 1);
                if (st != KEYER_OK)
                    return st;
            }
            p += v;
            break;
        default:
            return fail(w, at, d, "a group or an invalid wire type");
        }
    }
    return KEYER_OK;
}

keyer_status kr_onnx_wire_check(const void *data, size_t size, const char *name,
                                keyer_error *err)
{
    if (!size)
        return KEYER_OK;
    walk w = {data, name, err};
    const uint8_t *p = data;
    return walk_message(&w, p, p + size, &onnx__model_proto__descriptor, 0);
}
