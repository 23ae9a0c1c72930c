/*
 * Helpers shared by keyer's FFmpeg-based I/O (image.c, reader.c, writer.c, ...):
 * libav error codes to keyer statuses, pixel-format and colour-metadata mapping,
 * input path checks, a cached libswscale converter, and the routing of FFmpeg's own log
 * lines (av_log) into the logger of the reader or writer that is alive.
 *
 * Internal: symbols are prefixed kr_av_ / kr_convert_ and not part of the public API.
 */
#ifndef KEYER_IO_AV_H
#define KEYER_IO_AV_H

#include <libavutil/frame.h>
#include <libavutil/pixfmt.h>

#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/status.h"

struct SwsContext;

/** keyer status for a libav error code (AVERROR(ENOENT) -> IO, AVERROR_INVALIDDATA -> BAD_DATA ...). */
keyer_status kr_av_status(int averr);

/** Records "<formatted context>: <libav's text for averr>" with kr_av_status(averr). */
keyer_status kr_av_error(keyer_error *err, int averr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** libav pixel format with the same memory layout as @p f (AV_PIX_FMT_NONE for none). */
enum AVPixelFormat kr_av_pix_fmt(keyer_pixel_format f);
/** keyer format with the layout of @p f (yuvj420p counts as yuv420p); NONE when there is none. */
keyer_pixel_format kr_av_keyer_format(enum AVPixelFormat f);

keyer_color_matrix kr_av_matrix_from(enum AVColorSpace cs);
enum AVColorSpace kr_av_matrix_to(keyer_color_matrix m);
keyer_color_range kr_av_range_from(enum AVColorRange r);
enum AVColorRange kr_av_range_to(keyer_color_range r);

/**
 * Checks that @p path names something that can be opened for reading before
 * libavformat tries: it exists, it is not a directory, a regular file is not
 * empty. Names with "://" (URLs), "-" and patterns with '%' are not checked.
 * Errors: IO (missing, directory, unreadable), BAD_DATA (empty), each naming @p path.
 */
keyer_status kr_av_check_input_path(const char *path, keyer_error *err);

/** 1 when @p word is one of the comma-separated names in @p list (a libav format's name list,
 *  "mov,mp4,m4a,3gp,3g2,mj2"); 0 for a NULL list. */
int kr_av_name_in_list(const char *list, const char *word);

struct AVFormatContext;
struct AVPacket;

/**
 * Writes @p pkt to @p oc (av_interleaved_write_frame, which takes the packet's data) and
 * unreferences @p pkt either way. Errors: libav's, naming @p path.
 */
keyer_status kr_av_write_packet(struct AVFormatContext *oc, struct AVPacket *pkt,
                                const char *path, keyer_error *err);

/** One picture for the converter: planes, size, layout and colour. */
typedef struct kr_image {
    uint8_t *data[4];
    int linesize[4];
    int width, height;
    enum AVPixelFormat format; /* never a deprecated yuvj format: see kr_image_from_avframe */
    enum AVColorSpace colorspace;
    enum AVColorRange range;
} kr_image;

/** Describes @p f (a host AVFrame), turning yuvj formats into yuv + full range. */
void kr_image_from_avframe(kr_image *img, const AVFrame *f);
/** Describes host keyer frame @p f (format must map to libav). */
void kr_image_from_frame(kr_image *img, const keyer_frame *f);

/**
 * A cached libswscale context: reused while sizes, formats and colour stay the
 * same, so per-frame conversion does not allocate. Zero-initialise.
 */
typedef struct kr_converter {
    struct SwsContext *sws;
    int src_w, src_h, dst_w, dst_h;
    enum AVPixelFormat src_fmt, dst_fmt;
    int src_cs, src_range, dst_cs, dst_range;
    int flags;
} kr_converter;

/**
 * Converts (and scales if sizes differ) @p src into @p dst. Same layout and
 * size copies the planes unchanged; otherwise libswscale converts with the
 * colour matrices and ranges of both images (unspecified: BT.601 below 720
 * lines, BT.709 above; limited range for YUV, full for RGB and gray).
 * Errors: UNSUPPORTED (libswscale cannot convert these formats), OUT_OF_MEMORY.
 */
keyer_status kr_convert(kr_converter *c, const kr_image *src, const kr_image *dst,
                        keyer_error *err);
/** Frees the libswscale context; the converter can be reused afterwards. */
void kr_convert_free(kr_converter *c);

/*
 * FFmpeg's log lines. av_log_set_callback() is process-global, so keyer installs one callback
 * (once, when the first reader or writer attaches or a probe captures) and keeps a small registry, guarded by a
 * mutex, of the loggers of the readers and writers alive. Each FFmpeg line goes to the logger
 * attached last that is still attached, as "ffmpeg: [<context>] <text>" (no trailing newline)
 * at the mapped level: panic/fatal/error -> ERROR, warning -> WARNING, info -> INFO,
 * verbose -> DEBUG, debug/trace -> TRACE; the logger's level filters it (a NULL logger:
 * warnings and errors to stderr). With nothing attached, lines go to av_log_default_callback
 * as if keyer had installed nothing. No allocation per line: the text is formatted into a
 * stack buffer (long lines are cut); each av_log call is one line (FFmpeg's rare messages
 * built from several calls arrive in pieces; empty pieces are dropped). The callback holds
 * the registry's mutex while it forwards, so a detached logger is never called afterwards;
 * a line logged from inside a logger callback goes to av_log_default_callback instead of
 * recursing. Lines more verbose than INFO that neither the newest logger (its level when it
 * was attached) nor FFmpeg's own level (av_log_get_level) would print are dropped before the
 * mutex: libavformat and libavcodec log trace and debug lines for every packet and frame.
 */

/** Number of readers and writers whose loggers can be attached at once (more: not attached). */
#define KR_AV_LOG_MAX 64

/**
 * Attaches @p logger (NULL: the default logger) for FFmpeg's lines on behalf of @p owner (the
 * reader or writer; a key only). @p logger must stay valid until kr_av_log_detach(@p owner).
 * Returns 0, or -1 when the registry is full (then @p owner's lines go to another attached
 * logger or to FFmpeg's default callback).
 */
int kr_av_log_attach(const void *owner, const keyer_logger *logger);
/** Detaches @p owner's logger (nothing if it is not attached). Call after freeing its libav
 * contexts, since their threads may log until then. */
void kr_av_log_detach(const void *owner);

/** While @p on is non-zero, FFmpeg's lines logged by the calling thread are passed on at
 *  DEBUG at most (a reconnecting reader's failed attempts, whose outcome it reports itself). */
void kr_av_log_demote(int on);

/** While @p buf is not NULL, the first error line FFmpeg logs from the calling thread is
 *  copied into @p buf (@p size bytes, cut to fit, no trailing newline; emptied by this call),
 *  and the thread's lines are passed on at DEBUG at most, as with kr_av_log_demote: a probe
 *  that expects to fail reports FFmpeg's reason itself. kr_av_log_capture(NULL, 0) stops. */
void kr_av_log_capture(char *buf, size_t size);

#endif /* KEYER_IO_AV_H */
