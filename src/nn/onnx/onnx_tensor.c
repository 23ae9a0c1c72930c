/*
 * Decoding ONNX TensorProto values (initializers, Constant values, tensor attributes) into
 * packed little-endian elements: raw_data, the typed repeated fields, or external data files
 * confined to the model's folder. Also the names of data and attribute types for messages.
 */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/onnx/onnx_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX reader stores tensors in the host's order, which must be little-endian"
#endif

size_t kr_onnx_elem_size(int32_t data_type)
{
    switch (data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return 1;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return 8;
    default:
        return 0;
    }
}

const char *kr_onnx_type_name(int32_t data_type)
{
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",  "UINT8",  "INT8",    "UINT16",   "INT16",
        "INT32",     "INT64",  "STRING", "BOOL",    "FLOAT16",  "DOUBLE",
        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
    };
    if (data_type < 0 || (size_t)data_type >= sizeof names / sizeof names[0])
        return "unknown";
    return names[data_type];
}

const char *kr_onnx_attr_type_name(int type)
{
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return "FLOAT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return "INT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return "STRING";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return "TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "GRAPH";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "TYPE_PROTO";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return "FLOATS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return "INTS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "STRINGS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "UNDEFINED";
    }
}

const char *kr_onnx_node_label(const Onnx__NodeProto *node, int index, char *buf, size_t size)
{
    const char *op = node->op_type && node->op_type[0] ? node->op_type : "no operator";
    if (node->name && node->name[0])
        snprintf(buf, size, "node '%s' (%s)", node->name, op);
    else
        snprintf(buf, size, "node #%d (%s)", index, op);
    return buf;
}

/* Number of typed-field elements present and which field holds them. */
typedef enum field { FIELD_NONE, FIELD_FLOAT, FIELD_INT32, FIELD_INT64, FIELD_DOUBLE,
                     FIELD_UINT64, FIELD_STRING } field;

static const char *field_name(field f)
{
    switch (f) {
    case FIELD_FLOAT: return "float_data";
    case FIELD_INT32: return "int32_data";
    case FIELD_INT64: return "int64_data";
    case FIELD_DOUBLE: return "double_data";
    case FIELD_UINT64: return "uint64_data";
    case FIELD_STRING: return "string_data";
    default: return "no data";
    }
}

/* The typed field onnx.proto assigns to @p data_type. */
static field field_for_type(int32_t data_type)
{
    switch (data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        return FIELD_FLOAT;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        return FIELD_INT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        return FIELD_INT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return FIELD_DOUBLE;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
        return FIELD_UINT64;
    default:
        return FIELD_NONE;
    }
}

/* Parses a non-negative decimal integer (external data offset or length), strictly. */
static int parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return 0;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* 1 when @p loc has a ".." component (either separator counts, as Windows exports use '\'). */
static int has_dotdot(const char *loc)
{
    const char *p = loc;
    while (*p) {
        const char *e = p;
        while (*e && *e != '/' && *e != '\\')
            e++;
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return 1;
        p = *e ? e + 1 : e;
    }
    return 0;
}

/* Reads @p bytes at @p offset of the external file @p loc (relative to @p dir) into a new
 * buffer (*out, caller frees). */
static keyer_status read_external(const char *file, const char *what, const char *dir,
                                  const char *loc, uint64_t offset, size_t bytes, void **out,
                                  keyer_error *err)
{
    *out = NULL;
    if (!dir)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %s: its data is in the external file '%s', and a model "
                               "read from memory has no folder to read it from",
                               file, what, loc);
    if (!loc[0] || loc[0] == '/' || loc[0] == '\\' || has_dotdot(loc))
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: external data location '%s' is not a path inside the "
                               "model's folder (absolute paths and '..' are refused)",
                               file, what, loc);
    keyer_status st;
    char *path = NULL, *real_dir = NULL, *real_path = NULL;
    void *buf = NULL;
    int fd = -1;
    size_t n = strlen(dir) + strlen(loc) + 2;
    path = malloc(n);
    if (!path) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: %s: out of memory", file,
                             what);
        goto done;
    }
    snprintf(path, n, "%s/%s", dir, loc);
    real_dir = realpath(dir, NULL);
    if (!real_dir) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: %s: cannot resolve the model's folder "
                             "'%s': %s", file, what, dir, strerror(errno));
        goto done;
    }
    real_path = realpath(path, NULL);
    if (!real_path) {
        int e = errno;
        st = keyer_error_set(err, KEYER_STATUS_IO,
                             "%s: %s: external data file '%s': %s", file, what, loc,
                             e == ENOENT ? "missing" : strerror(e));
        goto done;
    }
    size_t dl = strlen(real_dir);
    /* Inside: the folder itself followed by '/' (the root folder "/" contains everything). */
    int inside = strncmp(real_path, real_dir, dl) == 0 &&
                 (real_path[dl] == '/' || (dl == 1 && real_dir[0] == '/'));
    if (!inside) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "%s: %s: external data location '%s' resolves outside the model's "
                             "folder", file, what, loc);
        goto done;
    }
    fd = open(real_path, O_RDONLY);
    if (fd < 0) {
        int e = errno;
        st = keyer_error_set(err, KEYER_STATUS_IO,
                             "%s: %s: cannot open external data file '%s': %s", file, what,
                             loc, strerror(e));
        goto done;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: %s: external data '%s' is not a "
                             "regular file", file, what, loc);
        goto done;
    }
    uint64_t fsize = sb.st_size < 0 ? 0 : (uint64_t)sb.st_size;
    if (offset > fsize || bytes > fsize - offset) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "%s: %s: external data file '%s' has %llu bytes, too short for "
                             "%zu bytes at offset %llu", file, what, loc,
                             (unsigned long long)fsize, bytes, (unsigned long long)offset);
        goto done;
    }
    buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                             "%s: %s: cannot allocate %zu bytes", file, what, bytes);
        goto done;
    }
    size_t got = 0;
    while (got < bytes) {
        ssize_t r = pread(fd, (char *)buf + got, bytes - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            st = keyer_error_set(err, KEYER_STATUS_IO, "%s: %s: cannot read external data "
                                 "file '%s': %s", file, what, loc,
                                 r < 0 ? strerror(errno) : "it shrank while reading");
            goto done;
        }
        got += (size_t)r;
    }
    *out = buf;
    buf = NULL;
    st = KEYER_OK;
done:
    if (fd >= 0)
        close(fd);
    free(buf);
    free(real_path);
    free(real_dir);
    free(path);
    return st;
}

static keyer_status decode_external(const Onnx__TensorProto *tp, const char *file,
                                    const char *what, const char *dir, size_t bytes,
                                    void **owned, keyer_error *err)
{
    const char *loc = NULL;
    uint64_t offset = 0, length = 0;
    int has_length = 0;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        const char *key = e->key ? e->key : "";
        const char *value = e->value ? e->value : "";
        if (strcmp(key, "location") == 0) {
            if (loc)
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: two external data locations", file, what);
            loc = value;
        } else if (strcmp(key, "offset") == 0) {
            if (!parse_size(value, &offset))
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: external data offset '%s' is not a "
                                       "non-negative integer", file, what, value);
        } else if (strcmp(key, "length") == 0) {
            if (!parse_size(value, &length))
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: external data length '%s' is not a "
                                       "non-negative integer", file, what, value);
            has_length = 1;
        }
        /* "checksum" and keys of later IR versions are not needed to read the data. */
    }
    if (!loc)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: external data without a location", file, what);
    if (has_length && length != bytes)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: external data length %llu, but its dims need %zu bytes",
                               file, what, (unsigned long long)length, bytes);
    return read_external(file, what, dir, loc, offset, bytes, owned, err);
}

/* Converts @p n int32_data values into elements of @p data_type (range-checked). */
static keyer_status narrow_int32(const int32_t *src, size_t n, int32_t data_type, void *dst,
                                 const char *file, const char *what, keyer_error *err)
{
    int64_t lo, hi;
    switch (data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: lo = 0; hi = UINT8_MAX; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: lo = 0; hi = 1; break;
    default: lo = 0; hi = UINT16_MAX; break; /* UINT16, FLOAT16, BFLOAT16: 16-bit patterns */
    }
    size_t es = kr_onnx_elem_size(data_type);
    for (size_t i = 0; i < n; i++) {
        if (src[i] < lo || src[i] > hi)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: element %zu of int32_data (%ld) is out of range "
                                   "for %s", file, what, i, (long)src[i],
                                   kr_onnx_type_name(data_type));
        if (es == 1) {
            ((uint8_t *)dst)[i] = (uint8_t)src[i];
        } else {
            ((uint16_t *)dst)[i] = (uint16_t)src[i];
        }
    }
    return KEYER_OK;
}

keyer_status kr_onnx_tensor_decode(const Onnx__TensorProto *tp, const char *file,
                                   const char *what, const char *dir, kr_onnx_tensor *out,
                                   void **owned, keyer_error *err)
{
    memset(out, 0, sizeof *out);
    *owned = NULL;
    out->name = tp->name ? tp->name : "";
    int32_t type = tp->has_data_type ? tp->data_type : ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    out->data_type = type;
    size_t es = kr_onnx_elem_size(type);
    if (!es)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %s: data type %s (%ld) is not supported", file, what,
                               kr_onnx_type_name(type), (long)type);
    if (tp->n_dims > KR_ONNX_MAX_RANK)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %s: rank %zu (keyer reads tensors up to rank %d)", file,
                               what, tp->n_dims, KR_ONNX_MAX_RANK);
    if (tp->segment)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %s: segmented tensors are not supported", file, what);
    out->rank = (int)tp->n_dims;
    out->elem_size = es;
    size_t count = 1;
    const size_t max_count = KR_ONNX_MAX_TENSOR_BYTES / es;
    for (size_t i = 0; i < tp->n_dims; i++) {
        int64_t d = tp->dims[i];
        out->dims[i] = d;
        if (d < 0)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: %s: dimension %zu is %lld",
                                   file, what, i, (long long)d);
        if (d > 0 && count > 0 && ((uint64_t)d > max_count || count > max_count / (size_t)d))
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: its dims hold more than %zu bytes", file, what,
                                   (size_t)KR_ONNX_MAX_TENSOR_BYTES);
        count *= (size_t)d;
    }
    out->count = count;
    size_t bytes = count * es;

    /* Which sources carry data: exactly one may (none only for an empty tensor). */
    field want = field_for_type(type);
    size_t n_typed[] = {0, tp->n_float_data, tp->n_int32_data, tp->n_int64_data,
                        tp->n_double_data, tp->n_uint64_data, tp->n_string_data};
    int sources = 0;
    field typed = FIELD_NONE;
    for (int fi = FIELD_FLOAT; fi <= FIELD_STRING; fi++) {
        if (n_typed[fi]) {
            sources++;
            typed = (field)fi;
        }
    }
    int external = tp->has_data_location &&
                   tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (tp->has_data_location && !external &&
        tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: %s: unknown data_location %d",
                               file, what, (int)tp->data_location);
    sources += tp->has_raw_data + external;
    if (sources > 1)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: data in more than one place (raw_data, %s%s)", file,
                               what, field_name(typed), external ? ", external data" : "");
    if (external) {
        if (!count)
            return KEYER_OK;
        keyer_status st = decode_external(tp, file, what, dir, bytes, owned, err);
        if (st == KEYER_OK)
            out->data = *owned;
        return st;
    }
    if (tp->has_raw_data) {
        if (tp->raw_data.len != bytes)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: raw_data has %zu bytes, its dims (%zu %s elements) "
                                   "need %zu", file, what, tp->raw_data.len, count,
                                   kr_onnx_type_name(type), bytes);
        out->data = count ? tp->raw_data.data : NULL;
        return KEYER_OK;
    }
    if (typed != FIELD_NONE && typed != want)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: data type %s with its data in %s (expected %s)",
                               file, what, kr_onnx_type_name(type), field_name(typed),
                               field_name(want));
    size_t n = n_typed[typed];
    if (n != count)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: %zu elements in %s, its dims need %zu", file, what, n,
                               typed == FIELD_NONE ? field_name(want) : field_name(typed),
                               count);
    if (!count)
        return KEYER_OK;
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: out->data = tp->float_data; return KEYER_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: out->data = tp->int32_data; return KEYER_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: out->data = tp->int64_data; return KEYER_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: out->data = tp->double_data; return KEYER_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: out->data = tp->uint64_data; return KEYER_OK;
    default: break;
    }
    void *buf = malloc(bytes);
    if (!buf)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "%s: %s: cannot allocate %zu bytes", file, what, bytes);
    keyer_status st = KEYER_OK;
    if (type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32) {
        for (size_t i = 0; i < count && st == KEYER_OK; i++) {
            if (tp->uint64_data[i] > UINT32_MAX)
                st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                     "%s: %s: element %zu of uint64_data (%llu) is out of "
                                     "range for UINT32", file, what, i,
                                     (unsigned long long)tp->uint64_data[i]);
            else
                ((uint32_t *)buf)[i] = (uint32_t)tp->uint64_data[i];
        }
    } else {
        st = narrow_int32(tp->int32_data, count, type, buf, file, what, err);
    }
    if (st != KEYER_OK) {
        free(buf);
        return st;
    }
    *owned = buf;
    out->data = buf;
    return KEYER_OK;
}
