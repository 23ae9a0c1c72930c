/**
 * @file keyer/frame.h
 * @brief Reference-counted buffers and video frames in host or GPU memory.
 *
 * A ::keyer_buffer is a reference-counted block of bytes with a free callback,
 * so host allocations, CUDA allocations and libav buffers all look alike.
 * A ::keyer_frame describes one picture: format, size, up to four planes
 * (pointer + stride in bytes), the buffers that keep the planes alive,
 * timing and colour metadata. Frames are passed by reference: keyer_frame_ref()
 * makes a second frame sharing the same pixels.
 *
 * @code
 * keyer_error err = {0};
 * keyer_frame *f = NULL;
 * if (keyer_frame_create(&f, &err) ||
 *     keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_NV12, 1920, 1080, NULL, &err))
 *     fail(err.message);
 * ... f->data[0], f->stride[0] ...
 * keyer_frame_destroy(&f);
 * @endcode
 *
 * Ownership: a frame owns one reference to each of its buf[] entries.
 * keyer_frame_unref() drops them and resets the frame to empty.
 * Thread safety: buffer reference counts are atomic; a frame struct itself
 * must not be modified by two threads at once.
 */
#ifndef KEYER_FRAME_H
#define KEYER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/alloc.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Pixel formats. Planar layouts follow FFmpeg's of the same name. */
typedef enum keyer_pixel_format {
    KEYER_PIXEL_FORMAT_NONE = 0,
    KEYER_PIXEL_FORMAT_NV12,    /**< 8-bit Y plane, then interleaved U,V at half width and height */
    KEYER_PIXEL_FORMAT_P010,    /**< as NV12 with 16-bit little-endian samples, 10 bits in the high bits */
    KEYER_PIXEL_FORMAT_YUV420P, /**< 8-bit Y, U, V planes; U and V at half width and height */
    KEYER_PIXEL_FORMAT_RGB24,   /**< packed R,G,B bytes */
    KEYER_PIXEL_FORMAT_RGBA,    /**< packed R,G,B,A bytes, straight (not premultiplied) alpha */
    KEYER_PIXEL_FORMAT_GRAY8,   /**< one 8-bit channel (masks, luma) */
    KEYER_PIXEL_FORMAT_GRAYF32, /**< one float channel, native endian (masks in [0,1]) */
    KEYER_PIXEL_FORMAT_COUNT_   /**< number of formats; not a format */
} keyer_pixel_format;

/** Where a frame's or buffer's bytes live. */
typedef enum keyer_memory_type {
    KEYER_MEMORY_HOST = 0, /**< ordinary host memory */
    KEYER_MEMORY_CUDA,     /**< CUDA device memory of keyer_frame::device */
} keyer_memory_type;

/** YUV<->RGB matrix. */
typedef enum keyer_color_matrix {
    KEYER_COLOR_MATRIX_UNSPECIFIED = 0, /**< treated as BT.601 below 720 lines, else BT.709 */
    KEYER_COLOR_MATRIX_BT601,
    KEYER_COLOR_MATRIX_BT709,
    KEYER_COLOR_MATRIX_BT2020,
} keyer_color_matrix;

/** Sample value range of YUV formats. */
typedef enum keyer_color_range {
    KEYER_COLOR_RANGE_UNSPECIFIED = 0, /**< treated as limited */
    KEYER_COLOR_RANGE_LIMITED,         /**< Y in [16,235], UV in [16,240] (8-bit) */
    KEYER_COLOR_RANGE_FULL,            /**< [0,255] */
} keyer_color_range;

/** A rational number, e.g. a time base. */
typedef struct keyer_rational {
    int num;
    int den;
} keyer_rational;

/** Opaque reference-counted memory block. */
typedef struct keyer_buffer keyer_buffer;

/** Called when the last reference to a wrapped buffer goes away. */
typedef void (*keyer_buffer_free_fn)(void *opaque, void *data);

/**
 * Allocates a host buffer of @p size bytes aligned to KEYER_ALIGNMENT with
 * allocator @p a (NULL: system). On success *out holds the only reference.
 * Errors: INVALID_ARGUMENT (size 0, out NULL), OUT_OF_MEMORY.
 */
keyer_status keyer_buffer_create(size_t size, const keyer_allocator *a, keyer_buffer **out,
                                 keyer_error *err);

/**
 * Wraps existing memory (host or device) in a buffer. When the last reference
 * is dropped, @p free_fn(opaque, data) is called (free_fn may be NULL for
 * memory the caller keeps alive). On failure nothing is freed: @p data stays
 * the caller's. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY.
 */
keyer_status keyer_buffer_wrap(void *data, size_t size, keyer_memory_type memory,
                               keyer_buffer_free_fn free_fn, void *opaque, keyer_buffer **out,
                               keyer_error *err);

/** Adds a reference and returns @p buf (NULL gives NULL). */
keyer_buffer *keyer_buffer_ref(keyer_buffer *buf);

/** Drops the reference in *@p buf (NULL or *buf NULL accepted) and sets *buf to NULL. */
void keyer_buffer_unref(keyer_buffer **buf);

/** Start of the buffer's bytes. */
void *keyer_buffer_data(const keyer_buffer *buf);
/** Size of the buffer in bytes. */
size_t keyer_buffer_size(const keyer_buffer *buf);
/** Where the buffer's bytes live. */
keyer_memory_type keyer_buffer_memory(const keyer_buffer *buf);

/** Maximum number of planes of any format. */
#define KEYER_FRAME_MAX_PLANES 4

/** A video frame. Fields are public; use the functions below to fill them. */
typedef struct keyer_frame {
    keyer_pixel_format format;
    int width;  /**< pixels, > 0 for a frame with data */
    int height; /**< pixels, > 0 for a frame with data */
    keyer_memory_type memory;
    int device;                                /**< CUDA device ordinal when memory is CUDA */
    uint8_t *data[KEYER_FRAME_MAX_PLANES];     /**< first byte of each plane, NULL past the last */
    ptrdiff_t stride[KEYER_FRAME_MAX_PLANES];  /**< bytes between rows of each plane */
    keyer_buffer *buf[KEYER_FRAME_MAX_PLANES]; /**< references keeping planes alive (may repeat, may be NULL) */
    int64_t pts;                               /**< presentation time in time_base units; INT64_MIN if unknown */
    int64_t duration;                          /**< in time_base units; 0 if unknown */
    keyer_rational time_base;                  /**< {0,1} if unknown */
    keyer_color_matrix matrix;
    keyer_color_range range;
    int rotation; /**< clockwise degrees (0, 90, 180, 270) to rotate for display */
    int flags;    /**< KEYER_FRAME_FLAG_* */
} keyer_frame;

/** Frame flag: decoder reported the frame as damaged (concealed errors). */
#define KEYER_FRAME_FLAG_CORRUPT 1
/** Frame flag: keyframe / scene start known to the decoder. */
#define KEYER_FRAME_FLAG_KEY 2
/** Frame flag: the frame does not follow the previous frame of its stream (a jump, e.g. the
 *  next chunk of a file split over several GPUs): temporal effects restart their history
 *  (the keying session resets the matte's temporal smoothing). */
#define KEYER_FRAME_FLAG_DISCONTINUITY 4

/** Canonical lower-case name ("nv12", "rgba", ...); "none" for unknown values. */
const char *keyer_pixel_format_name(keyer_pixel_format format);

/** Parses a name from keyer_pixel_format_name(); KEYER_PIXEL_FORMAT_NONE if unknown. */
keyer_pixel_format keyer_pixel_format_from_name(const char *name);

/** Number of planes of @p format (0 for NONE or invalid values). */
int keyer_pixel_format_planes(keyer_pixel_format format);

/**
 * Geometry of plane @p plane of a @p width x @p height frame in @p format:
 * its width and height in samples-groups and the bytes per row group
 * (e.g. NV12 plane 1 of 1920x1080: 960 x 540, 2 bytes per element).
 * Errors: INVALID_ARGUMENT for an unknown format, a plane it lacks,
 * or non-positive sizes.
 */
keyer_status keyer_pixel_format_plane(keyer_pixel_format format, int width, int height, int plane,
                                      int *plane_width, int *plane_height, int *bytes_per_element,
                                      keyer_error *err);

/** Creates an empty frame (no data, pts unknown). Errors: INVALID_ARGUMENT, OUT_OF_MEMORY. */
keyer_status keyer_frame_create(keyer_frame **out, keyer_error *err);

/**
 * Drops @p frame's data (if any) and gives it freshly allocated host planes for
 * @p format at @p width x @p height, rows aligned to KEYER_ALIGNMENT, in one
 * buffer from allocator @p a (NULL: system). Metadata is reset to defaults.
 * Odd sizes are allowed; chroma planes round up.
 * Errors: INVALID_ARGUMENT (zero/negative/huge sizes, bad format),
 * OUT_OF_MEMORY. On failure the frame is left empty.
 */
keyer_status keyer_frame_alloc(keyer_frame *frame, keyer_pixel_format format, int width,
                               int height, const keyer_allocator *a, keyer_error *err);

/**
 * Makes @p dst a new reference to @p src's pixels: copies every field and adds
 * a reference to each buffer. @p dst's previous data is dropped first.
 * Errors: INVALID_ARGUMENT (NULL, dst == src).
 */
keyer_status keyer_frame_ref(keyer_frame *dst, const keyer_frame *src, keyer_error *err);

/** Drops the frame's buffer references and resets it to empty. NULL accepted. */
void keyer_frame_unref(keyer_frame *frame);

/** Unrefs and frees *@p frame; accepts NULL and *frame == NULL; sets *frame to NULL. */
void keyer_frame_destroy(keyer_frame **frame);

/**
 * Checks that @p frame describes valid pixels: known format, positive size,
 * every plane non-NULL, |stride| >= row bytes, strides a multiple of the
 * sample size. Errors: INVALID_ARGUMENT with the failed condition.
 */
keyer_status keyer_frame_check(const keyer_frame *frame, keyer_error *err);

/**
 * Copies pixels of host frames @p src into @p dst (same format and size,
 * both allocated). Metadata (pts, colour, ...) is copied too.
 * Errors: INVALID_ARGUMENT (mismatch, device memory).
 */
keyer_status keyer_frame_copy(keyer_frame *dst, const keyer_frame *src, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_FRAME_H */
