#include "keyer/frame.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct keyer_buffer {
    atomic_int refcount;
    void *data;
    size_t size;
    keyer_memory_type memory;
    keyer_buffer_free_fn free_fn;
    void *opaque;
    keyer_allocator allocator; /* for buffers made by keyer_buffer_create */
    int owns_data;
};

static void free_with_allocator(void *opaque, void *data)
{
    keyer_buffer *buf = opaque;
    keyer_free(buf->allocator.alloc ? &buf->allocator : NULL, data);
}

keyer_status keyer_buffer_create(size_t size, const keyer_allocator *a, keyer_buffer **out,
                                 keyer_error *err)
{
    if (!out || size == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_buffer_create: %s", !out ? "out is NULL" : "size is 0");
    *out = NULL;
    keyer_buffer *buf = keyer_calloc(a, sizeof(*buf), KEYER_ALIGNMENT);
    if (!buf)
        goto oom;
    if (a)
        buf->allocator = *a;
    buf->data = keyer_alloc(a, size, KEYER_ALIGNMENT);
    if (!buf->data) {
        keyer_free(a, buf);
        goto oom;
    }
    atomic_init(&buf->refcount, 1);
    buf->size = size;
    buf->memory = KEYER_MEMORY_HOST;
    buf->free_fn = free_with_allocator;
    buf->opaque = buf;
    buf->owns_data = 1;
    *out = buf;
    return KEYER_OK;
oom:
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                           "keyer_buffer_create: cannot allocate %zu bytes", size);
}

keyer_status keyer_buffer_wrap(void *data, size_t size, keyer_memory_type memory,
                               keyer_buffer_free_fn free_fn, void *opaque, keyer_buffer **out,
                               keyer_error *err)
{
    if (!out || !data || size == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_buffer_wrap: %s",
                               !out ? "out is NULL" : !data ? "data is NULL" : "size is 0");
    *out = NULL;
    keyer_buffer *buf = calloc(1, sizeof(*buf));
    if (!buf)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "keyer_buffer_wrap: cannot allocate the buffer header");
    atomic_init(&buf->refcount, 1);
    buf->data = data;
    buf->size = size;
    buf->memory = memory;
    buf->free_fn = free_fn;
    buf->opaque = opaque;
    *out = buf;
    return KEYER_OK;
}

keyer_buffer *keyer_buffer_ref(keyer_buffer *buf)
{
    if (buf)
        atomic_fetch_add_explicit(&buf->refcount, 1, memory_order_relaxed);
    return buf;
}

void keyer_buffer_unref(keyer_buffer **pbuf)
{
    if (!pbuf || !*pbuf)
        return;
    keyer_buffer *buf = *pbuf;
    *pbuf = NULL;
    if (atomic_fetch_sub_explicit(&buf->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (buf->owns_data) {
        keyer_allocator a = buf->allocator;
        keyer_free(a.alloc ? &a : NULL, buf->data);
        keyer_free(a.alloc ? &a : NULL, buf);
        return;
    }
    if (buf->free_fn)
        buf->free_fn(buf->opaque, buf->data);
    free(buf);
}

void *keyer_buffer_data(const keyer_buffer *buf) { return buf ? buf->data : NULL; }
size_t keyer_buffer_size(const keyer_buffer *buf) { return buf ? buf->size : 0; }
keyer_memory_type keyer_buffer_memory(const keyer_buffer *buf)
{
    return buf ? buf->memory : KEYER_MEMORY_HOST;
}

/* ---- pixel formats ---------------------------------------------------- */

typedef struct format_desc {
    const char *name;
    int planes;
    int bytes[KEYER_FRAME_MAX_PLANES];    /* bytes per element of each plane */
    int log2_chroma_w, log2_chroma_h;     /* subsampling of planes >= 1 */
} format_desc;

static const format_desc formats[] = {
    [KEYER_PIXEL_FORMAT_NONE] = {"none", 0, {0}, 0, 0},
    [KEYER_PIXEL_FORMAT_NV12] = {"nv12", 2, {1, 2}, 1, 1},
    [KEYER_PIXEL_FORMAT_P010] = {"p010", 2, {2, 4}, 1, 1},
    [KEYER_PIXEL_FORMAT_YUV420P] = {"yuv420p", 3, {1, 1, 1}, 1, 1},
    [KEYER_PIXEL_FORMAT_RGB24] = {"rgb24", 1, {3}, 0, 0},
    [KEYER_PIXEL_FORMAT_RGBA] = {"rgba", 1, {4}, 0, 0},
    [KEYER_PIXEL_FORMAT_GRAY8] = {"gray8", 1, {1}, 0, 0},
    [KEYER_PIXEL_FORMAT_GRAYF32] = {"grayf32", 1, {4}, 0, 0},
};
_Static_assert(sizeof(formats) / sizeof(formats[0]) == KEYER_PIXEL_FORMAT_COUNT_,
               "formats[] must describe every keyer_pixel_format");

static const format_desc *desc_of(keyer_pixel_format f)
{
    if ((unsigned)f >= KEYER_PIXEL_FORMAT_COUNT_ || f == KEYER_PIXEL_FORMAT_NONE)
        return NULL;
    return &formats[f];
}

const char *keyer_pixel_format_name(keyer_pixel_format format)
{
    const format_desc *d = desc_of(format);
    return d ? d->name : "none";
}

keyer_pixel_format keyer_pixel_format_from_name(const char *name)
{
    if (!name)
        return KEYER_PIXEL_FORMAT_NONE;
    for (int f = 1; f < KEYER_PIXEL_FORMAT_COUNT_; f++)
        if (!strcmp(formats[f].name, name))
            return (keyer_pixel_format)f;
    return KEYER_PIXEL_FORMAT_NONE;
}

int keyer_pixel_format_planes(keyer_pixel_format format)
{
    const format_desc *d = desc_of(format);
    return d ? d->planes : 0;
}

/* Largest frame side keyer accepts: 16K, which keeps every size product in range. */
#define MAX_SIDE 16384

keyer_status keyer_pixel_format_plane(keyer_pixel_format format, int width, int height, int plane,
                                      int *plane_width, int *plane_height, int *bytes_per_element,
                                      keyer_error *err)
{
    const format_desc *d = desc_of(format);
    if (!d)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "unknown pixel format %d",
                               (int)format);
    if (plane < 0 || plane >= d->planes)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "pixel format %s has no plane %d", d->name, plane);
    if (width <= 0 || height <= 0 || width > MAX_SIDE || height > MAX_SIDE)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "frame size %dx%d is outside 1..%d", width, height, MAX_SIDE);
    int sw = plane ? d->log2_chroma_w : 0, sh = plane ? d->log2_chroma_h : 0;
    if (plane_width)
        *plane_width = (width + (1 << sw) - 1) >> sw;
    if (plane_height)
        *plane_height = (height + (1 << sh) - 1) >> sh;
    if (bytes_per_element)
        *bytes_per_element = d->bytes[plane];
    return KEYER_OK;
}

/* ---- frames ------------------------------------------------------------ */

static void frame_reset(keyer_frame *f)
{
    memset(f, 0, sizeof(*f));
    f->pts = INT64_MIN;
    f->time_base = (keyer_rational){0, 1};
}

keyer_status keyer_frame_create(keyer_frame **out, keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_frame_create: out is NULL");
    *out = malloc(sizeof(**out));
    if (!*out)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "keyer_frame_create: cannot allocate a frame");
    frame_reset(*out);
    return KEYER_OK;
}

void keyer_frame_unref(keyer_frame *frame)
{
    if (!frame)
        return;
    for (int i = 0; i < KEYER_FRAME_MAX_PLANES; i++)
        keyer_buffer_unref(&frame->buf[i]);
    frame_reset(frame);
}

void keyer_frame_destroy(keyer_frame **frame)
{
    if (!frame || !*frame)
        return;
    keyer_frame_unref(*frame);
    free(*frame);
    *frame = NULL;
}

keyer_status keyer_frame_alloc(keyer_frame *frame, keyer_pixel_format format, int width,
                               int height, const keyer_allocator *a, keyer_error *err)
{
    if (!frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_frame_alloc: frame is NULL");
    keyer_frame_unref(frame);
    int planes = keyer_pixel_format_planes(format);
    size_t offsets[KEYER_FRAME_MAX_PLANES], total = 0;
    ptrdiff_t strides[KEYER_FRAME_MAX_PLANES];
    for (int p = 0; p < planes || p == 0; p++) {
        int pw, ph, bpe;
        keyer_status st = keyer_pixel_format_plane(format, width, height, p, &pw, &ph, &bpe, err);
        if (st)
            return keyer_error_prefix(err, "keyer_frame_alloc: ");
        size_t row = ((size_t)pw * (size_t)bpe + KEYER_ALIGNMENT - 1) & ~(size_t)(KEYER_ALIGNMENT - 1);
        offsets[p] = total;
        strides[p] = (ptrdiff_t)row;
        total += row * (size_t)ph;
    }
    keyer_buffer *buf = NULL;
    keyer_status st = keyer_buffer_create(total, a, &buf, err);
    if (st)
        return keyer_error_prefix(err, "keyer_frame_alloc %s %dx%d: ",
                                  keyer_pixel_format_name(format), width, height);
    frame->format = format;
    frame->width = width;
    frame->height = height;
    frame->memory = KEYER_MEMORY_HOST;
    uint8_t *base = keyer_buffer_data(buf);
    for (int p = 0; p < planes; p++) {
        frame->data[p] = base + offsets[p];
        frame->stride[p] = strides[p];
    }
    frame->buf[0] = buf;
    return KEYER_OK;
}

keyer_status keyer_frame_ref(keyer_frame *dst, const keyer_frame *src, keyer_error *err)
{
    if (!dst || !src || dst == src)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_frame_ref: %s", dst == src && dst ? "dst is src" : "NULL frame");
    keyer_frame_unref(dst);
    *dst = *src;
    for (int i = 0; i < KEYER_FRAME_MAX_PLANES; i++)
        keyer_buffer_ref(dst->buf[i]);
    return KEYER_OK;
}

keyer_status keyer_frame_check(const keyer_frame *f, keyer_error *err)
{
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "frame is NULL");
    int planes = keyer_pixel_format_planes(f->format);
    if (planes == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "frame has unknown pixel format %d", (int)f->format);
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &ph, &bpe, err))
            return keyer_error_prefix(err, "frame: ");
        if (!f->data[p])
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s frame %dx%d: plane %d has no data",
                                   keyer_pixel_format_name(f->format), f->width, f->height, p);
        ptrdiff_t s = f->stride[p] < 0 ? -f->stride[p] : f->stride[p];
        int sample = bpe;
        if (f->format == KEYER_PIXEL_FORMAT_NV12 || f->format == KEYER_PIXEL_FORMAT_P010)
            sample = p ? bpe / 2 : bpe;
        if (f->format == KEYER_PIXEL_FORMAT_RGB24 || f->format == KEYER_PIXEL_FORMAT_RGBA)
            sample = 1;
        if (s < (ptrdiff_t)pw * bpe)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s frame %dx%d: plane %d stride %td is below its row size %d",
                                   keyer_pixel_format_name(f->format), f->width, f->height, p,
                                   f->stride[p], pw * bpe);
        if (s % sample)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s frame %dx%d: plane %d stride %td is not a multiple of the "
                                   "%d-byte sample", keyer_pixel_format_name(f->format), f->width,
                                   f->height, p, f->stride[p], sample);
        if ((uintptr_t)f->data[p] % (uintptr_t)sample)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s frame: plane %d pointer is not aligned to its %d-byte sample",
                                   keyer_pixel_format_name(f->format), p, sample);
    }
    return KEYER_OK;
}

keyer_status keyer_frame_copy(keyer_frame *dst, const keyer_frame *src, keyer_error *err)
{
    keyer_status st;
    if ((st = keyer_frame_check(src, err)))
        return keyer_error_prefix(err, "keyer_frame_copy source: ");
    if ((st = keyer_frame_check(dst, err)))
        return keyer_error_prefix(err, "keyer_frame_copy destination: ");
    if (src->format != dst->format || src->width != dst->width || src->height != dst->height)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_frame_copy: %s %dx%d into %s %dx%d",
                               keyer_pixel_format_name(src->format), src->width, src->height,
                               keyer_pixel_format_name(dst->format), dst->width, dst->height);
    if (src->memory != KEYER_MEMORY_HOST || dst->memory != KEYER_MEMORY_HOST)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_frame_copy: only host frames can be copied here");
    for (int p = 0; p < keyer_pixel_format_planes(src->format); p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(src->format, src->width, src->height, p, &pw, &ph, &bpe, NULL);
        for (int y = 0; y < ph; y++)
            memcpy(dst->data[p] + y * dst->stride[p], src->data[p] + y * src->stride[p],
                   (size_t)pw * (size_t)bpe);
    }
    dst->pts = src->pts;
    dst->duration = src->duration;
    dst->time_base = src->time_base;
    dst->matrix = src->matrix;
    dst->range = src->range;
    dst->rotation = src->rotation;
    dst->flags = src->flags;
    return KEYER_OK;
}
