#define _POSIX_C_SOURCE 200809L
#include "io/av.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

keyer_status kr_av_status(int averr)
{
    switch (averr) {
    case 0:
        return KEYER_OK;
    case AVERROR(ENOMEM):
        return KEYER_STATUS_OUT_OF_MEMORY;
    case AVERROR(EINVAL):
        return KEYER_STATUS_INVALID_ARGUMENT;
    case AVERROR(EAGAIN):
        return KEYER_STATUS_AGAIN;
    case AVERROR_EOF:
        return KEYER_STATUS_END;
    case AVERROR_EXIT:
        return KEYER_STATUS_INTERRUPTED;
    case AVERROR_INVALIDDATA:
    case AVERROR_STREAM_NOT_FOUND:
        return KEYER_STATUS_BAD_DATA;
    case AVERROR_DECODER_NOT_FOUND:
    case AVERROR_DEMUXER_NOT_FOUND:
    case AVERROR_ENCODER_NOT_FOUND:
    case AVERROR_MUXER_NOT_FOUND:
    case AVERROR_PROTOCOL_NOT_FOUND:
    case AVERROR_OPTION_NOT_FOUND:
    case AVERROR_PATCHWELCOME:
    case AVERROR(ENOSYS):
        return KEYER_STATUS_UNSUPPORTED;
    case AVERROR_EXTERNAL:
        return KEYER_STATUS_DEVICE;
    case AVERROR_BUG:
    case AVERROR_BUG2:
        return KEYER_STATUS_INTERNAL;
    default:
        return KEYER_STATUS_IO;
    }
}

keyer_status kr_av_error(keyer_error *err, int averr, const char *fmt, ...)
{
    keyer_status st = kr_av_status(averr);
    if (st == KEYER_OK)
        st = KEYER_STATUS_INTERNAL;
    if (!err)
        return st;
    char ctx[KEYER_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    char averr_text[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(averr, averr_text, sizeof(averr_text));
    return keyer_error_set(err, st, "%s: %s", ctx, averr_text);
}

enum AVPixelFormat kr_av_pix_fmt(keyer_pixel_format f)
{
    switch (f) {
    case KEYER_PIXEL_FORMAT_NV12:
        return AV_PIX_FMT_NV12;
    case KEYER_PIXEL_FORMAT_P010:
        return AV_PIX_FMT_P010LE;
    case KEYER_PIXEL_FORMAT_YUV420P:
        return AV_PIX_FMT_YUV420P;
    case KEYER_PIXEL_FORMAT_RGB24:
        return AV_PIX_FMT_RGB24;
    case KEYER_PIXEL_FORMAT_RGBA:
        return AV_PIX_FMT_RGBA;
    case KEYER_PIXEL_FORMAT_GRAY8:
        return AV_PIX_FMT_GRAY8;
    case KEYER_PIXEL_FORMAT_GRAYF32:
        return AV_PIX_FMT_GRAYF32LE;
    default:
        return AV_PIX_FMT_NONE;
    }
}

keyer_pixel_format kr_av_keyer_format(enum AVPixelFormat f)
{
    switch (f) {
    case AV_PIX_FMT_NV12:
        return KEYER_PIXEL_FORMAT_NV12;
    case AV_PIX_FMT_P010LE:
        return KEYER_PIXEL_FORMAT_P010;
    case AV_PIX_FMT_YUV420P:
    case AV_PIX_FMT_YUVJ420P:
        return KEYER_PIXEL_FORMAT_YUV420P;
    case AV_PIX_FMT_RGB24:
        return KEYER_PIXEL_FORMAT_RGB24;
    case AV_PIX_FMT_RGBA:
        return KEYER_PIXEL_FORMAT_RGBA;
    case AV_PIX_FMT_GRAY8:
        return KEYER_PIXEL_FORMAT_GRAY8;
    case AV_PIX_FMT_GRAYF32LE:
        return KEYER_PIXEL_FORMAT_GRAYF32;
    default:
        return KEYER_PIXEL_FORMAT_NONE;
    }
}

keyer_color_matrix kr_av_matrix_from(enum AVColorSpace cs)
{
    switch (cs) {
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M:
        return KEYER_COLOR_MATRIX_BT601;
    case AVCOL_SPC_BT709:
        return KEYER_COLOR_MATRIX_BT709;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
        return KEYER_COLOR_MATRIX_BT2020;
    default:
        return KEYER_COLOR_MATRIX_UNSPECIFIED;
    }
}

enum AVColorSpace kr_av_matrix_to(keyer_color_matrix m)
{
    switch (m) {
    case KEYER_COLOR_MATRIX_BT601:
        return AVCOL_SPC_SMPTE170M;
    case KEYER_COLOR_MATRIX_BT709:
        return AVCOL_SPC_BT709;
    case KEYER_COLOR_MATRIX_BT2020:
        return AVCOL_SPC_BT2020_NCL;
    default:
        return AVCOL_SPC_UNSPECIFIED;
    }
}

keyer_color_range kr_av_range_from(enum AVColorRange r)
{
    switch (r) {
    case AVCOL_RANGE_MPEG:
        return KEYER_COLOR_RANGE_LIMITED;
    case AVCOL_RANGE_JPEG:
        return KEYER_COLOR_RANGE_FULL;
    default:
        return KEYER_COLOR_RANGE_UNSPECIFIED;
    }
}

enum AVColorRange kr_av_range_to(keyer_color_range r)
{
    switch (r) {
    case KEYER_COLOR_RANGE_LIMITED:
        return AVCOL_RANGE_MPEG;
    case KEYER_COLOR_RANGE_FULL:
        return AVCOL_RANGE_JPEG;
    default:
        return AVCOL_RANGE_UNSPECIFIED;
    }
}

keyer_status kr_av_check_input_path(const char *path, keyer_error *err)
{
    if (!path || !*path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "input path is empty");
    if (!strcmp(path, "-") || strstr(path, "://") || strchr(path, '%'))
        return KEYER_OK;
    struct stat st;
    if (stat(path, &st) != 0)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot open: %s", path,
                               strerror(errno));
    if (S_ISDIR(st.st_mode))
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: is a directory, not a media file",
                               path);
    if (S_ISREG(st.st_mode) && st.st_size == 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: the file is empty", path);
    return KEYER_OK;
}

int kr_av_name_in_list(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && !strncmp(p, word, n))
            return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

keyer_status kr_av_write_packet(AVFormatContext *oc, AVPacket *pkt, const char *path,
                                keyer_error *err)
{
    int ret = av_interleaved_write_frame(oc, pkt);
    av_packet_unref(pkt);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot write", path);
    return KEYER_OK;
}

/* Deprecated full-range "J" formats become their plain layout plus full range. */
static enum AVPixelFormat unj(enum AVPixelFormat f, enum AVColorRange *range)
{
    enum AVPixelFormat plain = f;
    switch (f) {
    case AV_PIX_FMT_YUVJ420P:
        plain = AV_PIX_FMT_YUV420P;
        break;
    case AV_PIX_FMT_YUVJ422P:
        plain = AV_PIX_FMT_YUV422P;
        break;
    case AV_PIX_FMT_YUVJ444P:
        plain = AV_PIX_FMT_YUV444P;
        break;
    case AV_PIX_FMT_YUVJ440P:
        plain = AV_PIX_FMT_YUV440P;
        break;
    case AV_PIX_FMT_YUVJ411P:
        plain = AV_PIX_FMT_YUV411P;
        break;
    default:
        return f;
    }
    *range = AVCOL_RANGE_JPEG;
    return plain;
}

void kr_image_from_avframe(kr_image *img, const AVFrame *f)
{
    memset(img, 0, sizeof(*img));
    for (int i = 0; i < 4; i++) {
        img->data[i] = f->data[i];
        img->linesize[i] = f->linesize[i];
    }
    img->width = f->width;
    img->height = f->height;
    img->colorspace = f->colorspace;
    img->range = f->color_range;
    img->format = unj((enum AVPixelFormat)f->format, &img->range);
}

void kr_image_from_frame(kr_image *img, const keyer_frame *f)
{
    memset(img, 0, sizeof(*img));
    for (int i = 0; i < 4 && i < KEYER_FRAME_MAX_PLANES; i++) {
        img->data[i] = f->data[i];
        img->linesize[i] = (int)f->stride[i];
    }
    img->width = f->width;
    img->height = f->height;
    img->format = kr_av_pix_fmt(f->format);
    img->colorspace = kr_av_matrix_to(f->matrix);
    img->range = kr_av_range_to(f->range);
}

static int is_rgb(enum AVPixelFormat f)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f);
    return d && (d->flags & AV_PIX_FMT_FLAG_RGB);
}

static int is_gray(enum AVPixelFormat f)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f);
    return d && d->nb_components <= 2 && !(d->flags & AV_PIX_FMT_FLAG_PAL) && !is_rgb(f);
}

static int sws_matrix(enum AVColorSpace cs, int height)
{
    switch (cs) {
    case AVCOL_SPC_BT709:
        return SWS_CS_ITU709;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M:
        return SWS_CS_ITU601;
    case AVCOL_SPC_SMPTE240M:
        return SWS_CS_SMPTE240M;
    case AVCOL_SPC_FCC:
        return SWS_CS_FCC;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
        return SWS_CS_BT2020;
    default:
        return height >= 720 ? SWS_CS_ITU709 : SWS_CS_ITU601;
    }
}

/* 1 for full range: RGB always, gray unless said limited, YUV only when said full. */
static int sws_range(enum AVPixelFormat f, enum AVColorRange r)
{
    if (is_rgb(f))
        return 1;
    if (is_gray(f))
        return r != AVCOL_RANGE_MPEG;
    return r == AVCOL_RANGE_JPEG;
}

keyer_status kr_convert(kr_converter *c, const kr_image *src, const kr_image *dst,
                        keyer_error *err)
{
    int src_range = sws_range(src->format, src->range);
    int dst_range = sws_range(dst->format, dst->range);
    int src_cs = sws_matrix(src->colorspace, src->height);
    int dst_cs = sws_matrix(dst->colorspace, dst->height);
    if (src->format == dst->format && src->width == dst->width && src->height == dst->height &&
        (src_range == dst_range || is_rgb(src->format))) {
        uint8_t *dd[4] = {dst->data[0], dst->data[1], dst->data[2], dst->data[3]};
        int dl[4] = {dst->linesize[0], dst->linesize[1], dst->linesize[2], dst->linesize[3]};
        const uint8_t *sd[4] = {src->data[0], src->data[1], src->data[2], src->data[3]};
        av_image_copy(dd, dl, sd, src->linesize, src->format, src->width, src->height);
        return KEYER_OK;
    }
    int flags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP;
    int same = c->sws && c->src_w == src->width && c->src_h == src->height &&
               c->dst_w == dst->width && c->dst_h == dst->height && c->src_fmt == src->format &&
               c->dst_fmt == dst->format && c->src_cs == src_cs && c->dst_cs == dst_cs &&
               c->src_range == src_range && c->dst_range == dst_range && c->flags == flags;
    if (!same) {
        kr_convert_free(c);
        if (!sws_isSupportedInput(src->format) || !sws_isSupportedOutput(dst->format))
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "cannot convert pixel format %s to %s",
                                   av_get_pix_fmt_name(src->format) ? av_get_pix_fmt_name(src->format) : "?",
                                   av_get_pix_fmt_name(dst->format) ? av_get_pix_fmt_name(dst->format) : "?");
        c->sws = sws_getContext(src->width, src->height, src->format, dst->width, dst->height,
                                dst->format, flags, NULL, NULL, NULL);
        if (!c->sws)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                                   "cannot create a %dx%d %s -> %dx%d %s converter", src->width,
                                   src->height, av_get_pix_fmt_name(src->format), dst->width,
                                   dst->height, av_get_pix_fmt_name(dst->format));
        sws_setColorspaceDetails(c->sws, sws_getCoefficients(src_cs), src_range,
                                 sws_getCoefficients(dst_cs), dst_range, 0, 1 << 16, 1 << 16);
        c->src_w = src->width;
        c->src_h = src->height;
        c->dst_w = dst->width;
        c->dst_h = dst->height;
        c->src_fmt = src->format;
        c->dst_fmt = dst->format;
        c->src_cs = src_cs;
        c->dst_cs = dst_cs;
        c->src_range = src_range;
        c->dst_range = dst_range;
        c->flags = flags;
    }
    int h = sws_scale(c->sws, (const uint8_t *const *)src->data, src->linesize, 0, src->height,
                      (uint8_t *const *)dst->data, dst->linesize);
    if (h <= 0)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "libswscale converted no rows (%s -> %s)",
                               av_get_pix_fmt_name(src->format), av_get_pix_fmt_name(dst->format));
    return KEYER_OK;
}

void kr_convert_free(kr_converter *c)
{
    if (!c)
        return;
    sws_freeContext(c->sws);
    memset(c, 0, sizeof(*c));
}

/* ---- FFmpeg's log lines into keyer's loggers (see av.h) ------------------------------------ */

typedef struct log_entry {
    const void *owner; /* NULL: free slot */
    const keyer_logger *logger;
    unsigned long serial; /* order of attachment: the largest is the newest */
} log_entry;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static log_entry log_entries[KR_AV_LOG_MAX];
static unsigned long log_serial;
/* The level of the newest entry's logger when it was attached (-1: no entry): lines above it
 * are dropped before the lock. libavformat and libavcodec log trace and debug lines for every
 * packet and frame (mov: two per packet), which would otherwise take the lock from every
 * demuxer and decoder thread (dozens with many streams). */
static atomic_int log_newest_level = -1;
static _Thread_local int log_inside; /* this thread is forwarding a line already */
static _Thread_local int log_demoted; /* this thread's lines go at DEBUG at most */
static _Thread_local char *log_capture; /* this thread's first error line goes here */
static _Thread_local size_t log_capture_size;

void kr_av_log_demote(int on) { log_demoted = on != 0; }

static void log_install(void);

void kr_av_log_capture(char *buf, size_t size)
{
    pthread_once(&log_once, log_install);
    log_capture = buf && size ? buf : NULL;
    log_capture_size = log_capture ? size : 0;
    if (log_capture)
        buf[0] = '\0';
}

/* Keeps the first error line of a capturing thread (kr_av_log_capture). */
__attribute__((format(printf, 2, 0)))
static void capture_line(int av_level, const char *fmt, va_list ap)
{
    if (!log_capture || log_capture[0] || av_level > AV_LOG_ERROR)
        return;
    va_list aq;
    va_copy(aq, ap);
    vsnprintf(log_capture, log_capture_size, fmt, aq);
    va_end(aq);
    size_t n = strlen(log_capture);
    while (n > 0 && (log_capture[n - 1] == '\n' || log_capture[n - 1] == '\r'))
        log_capture[--n] = '\0';
}

static keyer_log_level keyer_level(int av_level)
{
    if (av_level <= AV_LOG_ERROR)
        return KEYER_LOG_ERROR;
    if (av_level <= AV_LOG_WARNING)
        return KEYER_LOG_WARNING;
    if (av_level <= AV_LOG_INFO)
        return KEYER_LOG_INFO;
    if (av_level <= AV_LOG_VERBOSE)
        return KEYER_LOG_DEBUG;
    return KEYER_LOG_TRACE;
}

/* av_log's format strings come from FFmpeg; the attribute lets -Wformat check them as such. */
__attribute__((format(printf, 3, 0)))
static void log_callback(void *avcl, int level, const char *fmt, va_list ap)
{
    int av_level = level & 0xff; /* the bits above are av_log's colour hints */
    if (level < 0 || log_inside) {
        av_log_default_callback(avcl, level, fmt, ap);
        return;
    }
    capture_line(av_level, fmt, ap);
    int newest = atomic_load_explicit(&log_newest_level, memory_order_relaxed);
    if (av_level > AV_LOG_INFO && av_level > av_log_get_level() &&
        (int)keyer_level(av_level) > newest)
        return; /* no logger takes it, and FFmpeg's own would not print it */
    pthread_mutex_lock(&log_lock);
    const log_entry *e = NULL;
    for (int i = 0; i < KR_AV_LOG_MAX; i++)
        if (log_entries[i].owner && (!e || log_entries[i].serial > e->serial))
            e = &log_entries[i];
    if (!e) {
        pthread_mutex_unlock(&log_lock);
        if (log_capture && av_level <= AV_LOG_WARNING)
            return; /* the capturing caller reports what failed */
        av_log_default_callback(avcl, level, fmt, ap);
        return;
    }
    keyer_logger lg = e->logger ? *e->logger : keyer_logger_default();
    keyer_log_level kl = keyer_level(av_level);
    if ((log_demoted || log_capture) && kl < KEYER_LOG_DEBUG)
        kl = KEYER_LOG_DEBUG;
    if (kl <= lg.level) {
        char text[1024];
        vsnprintf(text, sizeof(text), fmt, ap);
        size_t n = strlen(text);
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
            text[--n] = '\0';
        const AVClass *avc = avcl ? *(const AVClass *const *)avcl : NULL;
        const char *ctx = avc && avc->item_name ? avc->item_name(avcl) : NULL;
        if (n > 0) {
            log_inside = 1;
            if (ctx)
                keyer_log(&lg, kl, "ffmpeg: [%s] %s", ctx, text);
            else
                keyer_log(&lg, kl, "ffmpeg: %s", text);
            log_inside = 0;
        }
    }
    pthread_mutex_unlock(&log_lock);
}

static void log_install(void) { av_log_set_callback(log_callback); }

/* log_newest_level from the entries; the caller holds log_lock. */
static void update_newest_level(void)
{
    const log_entry *e = NULL;
    for (int i = 0; i < KR_AV_LOG_MAX; i++)
        if (log_entries[i].owner && (!e || log_entries[i].serial > e->serial))
            e = &log_entries[i];
    int level = -1;
    if (e)
        level = (int)(e->logger ? e->logger->level : keyer_logger_default().level);
    atomic_store(&log_newest_level, level);
}

int kr_av_log_attach(const void *owner, const keyer_logger *logger)
{
    if (!owner)
        return -1;
    pthread_once(&log_once, log_install);
    int rc = -1;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < KR_AV_LOG_MAX; i++) {
        if (!log_entries[i].owner) {
            log_entries[i] = (log_entry){owner, logger, ++log_serial};
            rc = 0;
            break;
        }
    }
    update_newest_level();
    pthread_mutex_unlock(&log_lock);
    return rc;
}

void kr_av_log_detach(const void *owner)
{
    if (!owner)
        return;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < KR_AV_LOG_MAX; i++)
        if (log_entries[i].owner == owner)
            log_entries[i] = (log_entry){0};
    update_newest_level();
    pthread_mutex_unlock(&log_lock);
}
