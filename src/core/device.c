/* The device table's registration, and device frames: allocation and copies through a
 * kr_device_fns table. */
#include "core/device.h"

#include <string.h>

const kr_device_fns *kr_device_cuda_table(void); /* cuda/device.c, CUDA builds only */

const kr_device_fns *kr_device_cuda(void)
{
#ifdef KEYER_HAVE_CUDA
    return kr_device_cuda_table();
#else
    return NULL;
#endif
}

typedef struct device_block {
    const kr_device_fns *dev;
    int ordinal;
} device_block;

static void free_device_block(void *opaque, void *data)
{
    /* opaque: the block made by kr_device_frame_alloc, naming the table and device */
    device_block *b = opaque;
    b->dev->free(b->ordinal, data);
    memset(b, 0, sizeof(*b));
    keyer_free(NULL, b);
}

keyer_status kr_device_frame_alloc(const kr_device_fns *dev, int ordinal, keyer_frame *frame,
                                   keyer_pixel_format format, int width, int height,
                                   keyer_error *err)
{
    if (!dev || !frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "device frame: no device or no frame");
    keyer_frame_unref(frame);
    int planes = keyer_pixel_format_planes(format);
    if (planes <= 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "device frame: unknown pixel format %d", (int)format);
    size_t offsets[KEYER_FRAME_MAX_PLANES], pitches[KEYER_FRAME_MAX_PLANES];
    size_t total = 0;
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(format, width, height, p, &pw, &ph, &bpe, err))
            return keyer_error_prefix(err, "device frame: ");
        size_t row = (size_t)pw * (size_t)bpe;
        pitches[p] = (row + 255) & ~(size_t)255;
        offsets[p] = total;
        total += pitches[p] * (size_t)ph;
    }
    device_block *b = keyer_calloc(NULL, sizeof(*b), KEYER_ALIGNMENT);
    if (!b)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "device frame: out of memory");
    b->dev = dev;
    b->ordinal = ordinal;
    void *mem = NULL;
    keyer_status st = dev->alloc(ordinal, total, &mem, err);
    if (st) {
        keyer_free(NULL, b);
        return keyer_error_prefix(err, "device frame %dx%d %s: ", width, height,
                                  keyer_pixel_format_name(format));
    }
    keyer_buffer *buf = NULL;
    st = keyer_buffer_wrap(mem, total, KEYER_MEMORY_CUDA, free_device_block, b, &buf, err);
    if (st) {
        dev->free(ordinal, mem);
        keyer_free(NULL, b);
        return st;
    }
    frame->format = format;
    frame->width = width;
    frame->height = height;
    frame->memory = KEYER_MEMORY_CUDA;
    frame->device = ordinal;
    for (int p = 0; p < planes; p++) {
        frame->data[p] = (uint8_t *)mem + offsets[p];
        frame->stride[p] = (ptrdiff_t)pitches[p];
        frame->buf[p] = p == 0 ? buf : keyer_buffer_ref(buf);
    }
    frame->pts = INT64_MIN;
    frame->duration = 0;
    frame->time_base = (keyer_rational){0, 1};
    return KEYER_OK;
}

keyer_status kr_device_frame_copy_async(const kr_device_fns *dev, int ordinal, keyer_frame *dst,
                                        const keyer_frame *src, void *stream, keyer_error *err)
{
    if (!dst || !src || dst->format != src->format || dst->width != src->width ||
        dst->height != src->height)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "frame copy: the frames differ in format or size");
    if (src->memory == KEYER_MEMORY_HOST && dst->memory == KEYER_MEMORY_HOST)
        return keyer_frame_copy(dst, src, err);
    if (!dev)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "frame copy: a CUDA frame, and keyer was built without CUDA");
    int planes = keyer_pixel_format_planes(src->format);
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(src->format, src->width, src->height, p, &pw, &ph, &bpe,
                                     err))
            return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
        if (src->stride[p] < 0 || dst->stride[p] < 0)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "frame copy: negative strides across devices");
        keyer_status st = dev->copy_2d(ordinal, dst->data[p], (size_t)dst->stride[p],
                                       src->data[p], (size_t)src->stride[p],
                                       (size_t)pw * (size_t)bpe, (size_t)ph, stream, err);
        if (st)
            return keyer_error_prefix(err, "frame copy, plane %d: ", p);
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

keyer_status kr_device_frame_copy(const kr_device_fns *dev, int ordinal, keyer_frame *dst,
                                  const keyer_frame *src, void *stream, keyer_error *err)
{
    keyer_status st = kr_device_frame_copy_async(dev, ordinal, dst, src, stream, err);
    if (st || (src->memory == KEYER_MEMORY_HOST && dst->memory == KEYER_MEMORY_HOST))
        return st;
    st = dev->stream_sync(ordinal, stream, err);
    return st ? keyer_error_prefix(err, "frame copy: ") : KEYER_OK;
}
