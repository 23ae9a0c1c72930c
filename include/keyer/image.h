/**
 * @file keyer/image.h
 * @brief Reading still images (JPEG, PNG, ...) into frames and writing PNG files.
 *
 * Images are decoded with FFmpeg's libraries: anything that libavformat opens
 * as a single picture (its image2 demuxer and the "*_pipe" image demuxers) and
 * libavcodec decodes (JPEG, PNG, BMP, TIFF, WebP, ...). The first picture of the
 * file is converted to the requested pixel format in host memory. EXIF
 * orientation is not applied.
 *
 * @code
 * keyer_error err = {0};
 * keyer_frame *img = NULL;
 * if (keyer_frame_create(&img, &err) ||
 *     keyer_image_read("photo.jpg", KEYER_PIXEL_FORMAT_RGB24, img, &err) ||
 *     keyer_image_write("copy.png", img, &err))
 *     fprintf(stderr, "keyer: %s\n", err.message);
 * keyer_frame_destroy(&img);
 * @endcode
 *
 * Thread safety: both functions are reentrant; they share no state.
 */
#ifndef KEYER_IMAGE_H
#define KEYER_IMAGE_H

#include "keyer/frame.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Decodes the still image at @p path into @p frame (made by keyer_frame_create;
 * its previous contents are dropped) as a host frame of @p format:
 * KEYER_PIXEL_FORMAT_RGB24, RGBA (opaque alpha when the image has none), GRAY8
 * (full-range BT.601 luma), NV12 or YUV420P.
 *
 * Colour metadata: YUV outputs keep the image's matrix and range (a JPEG is
 * full-range BT.601); YUV made from an RGB image (PNG) is full-range BT.601.
 * RGB and gray outputs are full range. pts is 0, time_base {1,1}.
 *
 * Errors (the message names @p path and the reason):
 *  - INVALID_ARGUMENT: NULL path or frame, or another @p format;
 *  - IO: the file does not exist, is a directory, or cannot be read;
 *  - BAD_DATA: an empty file, no picture in it, or data the decoder rejects
 *    (a truncated JPEG, a text file named .png);
 *  - UNSUPPORTED: a codec libavcodec has no decoder for;
 *  - OUT_OF_MEMORY.
 * On failure @p frame is left empty.
 */
keyer_status keyer_image_read(const char *path, keyer_pixel_format format, keyer_frame *frame,
                              keyer_error *err);

/**
 * Encodes host @p frame (RGB24, RGBA or GRAY8) as a PNG file at @p path,
 * replacing an existing file. The file is written under a temporary name in the
 * same directory, flushed and renamed to @p path, so a failed write leaves no
 * file and never a partial one.
 *
 * Errors: INVALID_ARGUMENT (NULL arguments, device memory, another format, a
 * frame failing keyer_frame_check), IO (the directory is not writable, the disk
 * is full: the message names @p path), UNSUPPORTED (libavcodec lacks its PNG
 * encoder), OUT_OF_MEMORY.
 */
keyer_status keyer_image_write(const char *path, const keyer_frame *frame, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_IMAGE_H */
